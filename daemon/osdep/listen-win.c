/*
 * gbrd's named pipe on Windows (listen.h), \\.\pipe\gbr-<user>.
 *
 * Who may reach it, in layers that each hold alone (DESIGN.md 3, 4): every
 * instance has a DACL that grants our own account and nobody else
 * (protected: nothing inherited), remote clients are rejected
 * (PIPE_REJECT_REMOTE_CLIENTS), and each client's process is looked up
 * (GetNamedPipeClientProcessId, its token's user SID) for the listener
 * above to check, failing closed when it cannot be told.
 *
 * One daemon per pipe name, enforced twice: a named mutex derived from the
 * name exists while a gbrd serves it, and the first instance is created
 * with FILE_FLAG_FIRST_PIPE_INSTANCE. Wine 8 ignores that flag (a second
 * CreateNamedPipeW with it succeeds there), so under Wine the mutex is
 * what holds. The mutex is told by its existence, not by who owns it: it
 * goes with the last handle, so a daemon that dies frees the name, and a
 * second listen_open in the same process is refused too.
 *
 * The loop cannot wait on a pipe, so a thread does: it waits in
 * ConnectNamedPipe (overlapped, so that listen_close can stop it), makes
 * the next instance at once (there is always one waiting), tells who the
 * client is, bridges the pipe to a socket pair, and posts the socket with
 * what it learned through a notification socket pair whose other end is
 * listen_fd(). A loop that stops accepting fills that pair and the thread
 * waits: connections queue as in a socket's backlog, never without bound.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>
#include <process.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "listen.h"
#include "log.h"
#include "transport.h"
#include "transport-win.h"
#include "xmalloc.h"

/* Each pipe instance's buffers, each way. */
#define LISTEN_PIPE_BUF		(64 * 1024)
/* How long the thread waits before trying again after a failure. */
#define LISTEN_RETRY_MS		100
/* How long listen_close gives the bridges to pass their last bytes on. */
#define LISTEN_FLUSH_MS		2000

/* What the thread posts for each client: fixed size, read whole. */
struct listen_rec {
	uint64_t	sock;	/* the caller's end, or INVALID_SOCKET */
	uint32_t	pid;
	int16_t		same;	/* 1 our account, 0 another, -1 unknown */
	int16_t		err;	/* errno when sock is INVALID_SOCKET */
};

static char			*listen_name;
static wchar_t			*listen_wname;
static HANDLE			 listen_mutex;
static HANDLE			 listen_first;	/* until the thread takes it */
static SECURITY_ATTRIBUTES	 listen_sa;
static SOCKET			 listen_loop = INVALID_SOCKET;
static SOCKET			 listen_post = INVALID_SOCKET;
static HANDLE			 listen_stop;
static HANDLE			 listen_thread;
/* A record read in part (the pair is a stream). */
static unsigned char		 listen_part[sizeof(struct listen_rec)];
static size_t			 listen_part_len;

/*
 * Makes an owner-only security descriptor: a protected DACL with one ACE,
 * all access for our account's SID. Returns 0, or -1 with *cause.
 */
static int
listen_security(SECURITY_ATTRIBUTES *sa, char **cause)
{
	PSECURITY_DESCRIPTOR	 sd;
	PSID			 sid = transport_win_self_sid();
	PACL			 acl;
	DWORD			 len;

	if (sid == NULL) {
		*cause = xstrdup("cannot read this process's account");
		return -1;
	}
	len = sizeof(ACL) + sizeof(ACCESS_ALLOWED_ACE) - sizeof(DWORD) +
	    GetLengthSid(sid);
	/* One block: the descriptor, then the ACL it points to. */
	sd = xcalloc(1, SECURITY_DESCRIPTOR_MIN_LENGTH + len + 8);
	acl = (PACL)((char *)sd + ((SECURITY_DESCRIPTOR_MIN_LENGTH + 7) & ~7));
	if (!InitializeAcl(acl, len, ACL_REVISION) ||
	    !AddAccessAllowedAce(acl, ACL_REVISION, GENERIC_ALL, sid) ||
	    !InitializeSecurityDescriptor(sd, SECURITY_DESCRIPTOR_REVISION) ||
	    !SetSecurityDescriptorDacl(sd, TRUE, acl, FALSE) ||
	    !SetSecurityDescriptorControl(sd, SE_DACL_PROTECTED,
	    SE_DACL_PROTECTED)) {
		*cause = xasprintf("cannot make the pipe's security descriptor "
		    "(error %lu)", (unsigned long)GetLastError());
		free(sd);
		return -1;
	}
	sa->nLength = sizeof *sa;
	sa->lpSecurityDescriptor = sd;
	sa->bInheritHandle = FALSE;	/* no child gets a handle */
	return 0;
}

/* Creates one pipe instance; the first one claims the name. */
static HANDLE
listen_instance(const wchar_t *name, SECURITY_ATTRIBUTES *sa, int first)
{
	DWORD	open = PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED;

	if (first)
		open |= FILE_FLAG_FIRST_PIPE_INSTANCE;
	/*
	 * Unlimited instances: the listener above refuses clients over its
	 * limit with a "busy" line, as on Unix, rather than leaving them
	 * waiting for a free instance.
	 */
	return CreateNamedPipeW(name, open, PIPE_TYPE_BYTE | PIPE_READMODE_BYTE |
	    PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, PIPE_UNLIMITED_INSTANCES,
	    LISTEN_PIPE_BUF, LISTEN_PIPE_BUF, 0, sa);
}

/* Writes all of a record to the loop; -1 once the loop's end is gone. */
static int
listen_send(const struct listen_rec *rec)
{
	const char	*p = (const char *)rec;
	size_t		 left = sizeof *rec;
	int		 n;

	while (left > 0) {
		if ((n = send(listen_post, p, (int)left, 0)) <= 0)
			return -1;
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

/* Tells who a connected client is, bridges it and posts it to the loop. */
static int
listen_hand_over(HANDLE inst)
{
	struct listen_rec	rec;
	ULONG			pid = 0;
	int			fd, err;

	memset(&rec, 0, sizeof rec);
	rec.same = -1;
	if (GetNamedPipeClientProcessId(inst, &pid)) {
		rec.pid = pid;
		rec.same = (int16_t)transport_win_pid_same_user(pid, NULL);
	}
	if ((fd = transport_bridge_handle(inst, NULL)) == -1) {
		err = errno;
		CloseHandle(inst);	/* the client sees the pipe break */
		/* Out of sockets or memory: the loop's out-of-descriptors path. */
		rec.err = (int16_t)(err == EMFILE || err == ENOBUFS ||
		    err == ENOMEM ? EMFILE : err);
		rec.sock = (uint64_t)INVALID_SOCKET;
	} else
		rec.sock = (uint64_t)(SOCKET)fd;
	if (listen_send(&rec) != 0) {
		if (fd != -1)
			transport_close(fd);
		return -1;
	}
	return 0;
}

/* Waits for a client on inst; 1 connected, 0 not (try again), -1 stop. */
static int
listen_wait_client(HANDLE inst, OVERLAPPED *ov)
{
	HANDLE	set[2];
	DWORD	n;

	ResetEvent(ov->hEvent);
	ov->Internal = ov->InternalHigh = 0;
	if (ConnectNamedPipe(inst, ov))
		return 1;
	switch (GetLastError()) {
	case ERROR_PIPE_CONNECTED:
		return 1;	/* it came between create and connect */
	case ERROR_NO_DATA:
		return 0;	/* it came and went */
	case ERROR_IO_PENDING:
		break;
	default:
		return 0;
	}
	set[0] = ov->hEvent;
	set[1] = listen_stop;
	if (WaitForMultipleObjects(2, set, FALSE, INFINITE) != WAIT_OBJECT_0) {
		CancelIoEx(inst, ov);
		(void)GetOverlappedResult(inst, ov, &n, TRUE);
		return -1;
	}
	return GetOverlappedResult(inst, ov, &n, FALSE) ? 1 : 0;
}

/* The listener thread: one client after another until listen_close. */
static unsigned __stdcall
listen_main(void *arg)
{
	OVERLAPPED	ov;
	HANDLE		inst = listen_first, next;
	int		r;

	memset(&ov, 0, sizeof ov);
	if ((ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL)) == NULL)
		return 1;
	listen_first = NULL;
	for (;;) {
		if (inst == INVALID_HANDLE_VALUE &&
		    (inst = listen_instance(listen_wname, &listen_sa, 0)) ==
		    INVALID_HANDLE_VALUE) {
			/* Out of resources for now: try again shortly. */
			if (WaitForSingleObject(listen_stop, LISTEN_RETRY_MS) !=
			    WAIT_TIMEOUT)
				break;
			continue;
		}
		if ((r = listen_wait_client(inst, &ov)) == -1)
			break;
		if (r == 0) {
			CloseHandle(inst);
			inst = INVALID_HANDLE_VALUE;
			continue;
		}
		/* The next client finds an instance waiting. */
		next = listen_instance(listen_wname, &listen_sa, 0);
		if (listen_hand_over(inst) != 0) {
			inst = next;
			break;
		}
		inst = next;
	}
	if (inst != INVALID_HANDLE_VALUE)
		CloseHandle(inst);
	CloseHandle(ov.hEvent);
	return 0;
}

/* Frees what listen_open made, on failure or at close. */
static void
listen_release(void)
{
	if (listen_first != NULL && listen_first != INVALID_HANDLE_VALUE)
		CloseHandle(listen_first);
	listen_first = NULL;
	if (listen_loop != INVALID_SOCKET)
		closesocket(listen_loop);
	if (listen_post != INVALID_SOCKET)
		closesocket(listen_post);
	listen_loop = listen_post = INVALID_SOCKET;
	if (listen_stop != NULL)
		CloseHandle(listen_stop);
	listen_stop = NULL;
	if (listen_mutex != NULL)
		CloseHandle(listen_mutex);
	listen_mutex = NULL;
	free(listen_sa.lpSecurityDescriptor);
	memset(&listen_sa, 0, sizeof listen_sa);
	free(listen_wname);
	free(listen_name);
	listen_wname = NULL;
	listen_name = NULL;
	listen_part_len = 0;
}

/* Claims the pipe name with the mutex; -1 with *cause if it is taken. */
static int
listen_claim(const char *path, char **cause)
{
	wchar_t	*obj;
	DWORD	 err;
	char	*why;

	obj = transport_win_object_name(path, "gbrd");
	listen_mutex = CreateMutexW(&listen_sa, FALSE, obj);
	err = GetLastError();
	free(obj);
	if (listen_mutex != NULL && err != ERROR_ALREADY_EXISTS)
		return 0;
	if (listen_mutex != NULL || err == ERROR_ACCESS_DENIED)
		*cause = xasprintf("another gbrd is already serving %s", path);
	else {
		why = transport_win_strerror(err);
		*cause = xasprintf("cannot claim %s: %s", path, why);
		free(why);
	}
	if (listen_mutex != NULL)
		CloseHandle(listen_mutex);
	listen_mutex = NULL;
	return -1;
}

/* Claims the pipe name, creates its first instance, starts the thread. */
int
listen_open(const char *path, char **cause)
{
	SOCKET	 sv[2];
	DWORD	 err;
	char	*why;

	*cause = NULL;
	if (!transport_win_is_pipe(path)) {
		*cause = xasprintf("%s is not a pipe name (\\\\.\\pipe\\NAME)",
		    path);
		return -1;
	}
	if (listen_name != NULL) {
		*cause = xasprintf("another gbrd is already serving %s from this "
		    "process", listen_name);
		return -1;
	}
	if (transport_win_init() != 0) {
		*cause = xstrdup("cannot start Windows sockets");
		return -1;
	}
	listen_name = xstrdup(path);
	listen_wname = transport_win_wide(path);
	if (listen_security(&listen_sa, cause) != 0 ||
	    listen_claim(path, cause) != 0)
		goto fail;
	listen_first = listen_instance(listen_wname, &listen_sa, 1);
	if (listen_first == INVALID_HANDLE_VALUE) {
		err = GetLastError();
		if (err == ERROR_ACCESS_DENIED || err == ERROR_PIPE_BUSY)
			*cause = xasprintf("another gbrd is already serving %s "
			    "(or another program holds that pipe name)", path);
		else {
			why = transport_win_strerror(err);
			*cause = xasprintf("cannot create the pipe %s: %s",
			    path, why);
			free(why);
		}
		goto fail;
	}
	if (transport_win_socketpair(sv) != 0) {
		*cause = xasprintf("cannot make a socket pair: %s",
		    strerror(errno));
		goto fail;
	}
	listen_loop = sv[0];
	listen_post = sv[1];
	if (transport_set_nonblock((int)listen_loop) != 0 ||
	    (listen_stop = CreateEventW(NULL, TRUE, FALSE, NULL)) == NULL) {
		*cause = xstrdup("cannot set up the pipe's listener");
		goto fail;
	}
	listen_thread = (HANDLE)_beginthreadex(NULL, 0, listen_main, NULL, 0,
	    NULL);
	if (listen_thread == NULL) {
		*cause = xasprintf("cannot start the pipe's listener: %s",
		    strerror(errno));
		goto fail;
	}
	log_debug("listening on %s", path);
	return 0;

fail:
	listen_release();
	return -1;
}

/* Socket activation is systemd's: there is none on Windows. */
int
listen_adopt(int fd, const char *path, char **cause)
{
	*cause = xstrdup("socket activation is not supported on Windows");
	errno = ENOTSUP;
	return -1;
}

/* Nothing to do: no fork on Windows, the thread runs already. */
void
listen_start(void)
{
}

/* Returns the loop's end of the notification pair. */
int
listen_fd(void)
{
	return listen_loop == INVALID_SOCKET ? -1 : (int)listen_loop;
}

/* Reads the next record; 1 with it, 0 if none is whole yet, -1 (errno). */
static int
listen_read_rec(struct listen_rec *rec)
{
	int	n;

	while (listen_part_len < sizeof listen_part) {
		n = recv(listen_loop, (char *)listen_part + listen_part_len,
		    (int)(sizeof listen_part - listen_part_len), 0);
		if (n == 0) {
			errno = EPIPE;	/* the thread is gone */
			return -1;
		}
		if (n == SOCKET_ERROR) {
			if (WSAGetLastError() == WSAEWOULDBLOCK)
				return 0;
			errno = transport_win_wsa_errno(WSAGetLastError());
			return -1;
		}
		listen_part_len += (size_t)n;
	}
	memcpy(rec, listen_part, sizeof *rec);
	listen_part_len = 0;
	return 1;
}

/* Takes the next client the thread posted. */
int
listen_accept(int *fd, struct listen_peer *peer)
{
	struct listen_rec	rec;
	int			r;

	if ((r = listen_read_rec(&rec)) != 1)
		return r;
	if ((SOCKET)rec.sock == INVALID_SOCKET) {
		errno = rec.err;
		return -1;
	}
	*fd = (int)(SOCKET)rec.sock;
	if (transport_set_nonblock(*fd) != 0) {
		transport_close(*fd);
		errno = EIO;
		return -1;
	}
	peer->pid = rec.pid != 0 ? (pid_t)rec.pid : -1;
	peer->known = rec.same >= 0;
	peer->uid = rec.same == 1 ? COMPAT_UID_SELF : COMPAT_UID_OTHER;
	return 1;
}

/* Closes the clients posted and not taken. */
static void
listen_drain(void)
{
	struct listen_rec	rec;

	while (listen_read_rec(&rec) == 1) {
		if ((SOCKET)rec.sock != INVALID_SOCKET)
			transport_close((int)(SOCKET)rec.sock);
	}
}

/* Stops the thread, closes what was not taken, frees the name. */
void
listen_close(void)
{
	ULONGLONG	deadline;

	if (listen_name == NULL)
		return;
	if (listen_thread != NULL) {
		SetEvent(listen_stop);
		/* Draining makes room for a post the thread may be blocked in. */
		while (WaitForSingleObject(listen_thread, 20) == WAIT_TIMEOUT)
			listen_drain();
		CloseHandle(listen_thread);
		listen_thread = NULL;
	}
	listen_drain();
	listen_release();
	/*
	 * The connections closed before (a shutdown's last words) live on in
	 * their bridges until the pipe has taken them; the process ending
	 * would drop them. A client that does not read is not waited for.
	 */
	deadline = GetTickCount64() + LISTEN_FLUSH_MS;
	while (transport_bridge_count() > 0 && GetTickCount64() < deadline)
		Sleep(10);
}

/* Returns the pipe name served. */
const char *
listen_path(void)
{
	return listen_name;
}

/*
 * The pipe's walls: its DACL, remote clients, each client's account, one
 * daemon per name.
 */
json_t *
listen_layers(void)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}",
	    "kind", "named pipe",
	    "dacl", "owner only",
	    "remote_clients", "rejected",
	    "peer_check", "the client process's account "
		"(GetNamedPipeClientProcessId, its token's user)",
	    "fail_closed", 1,
	    "one_daemon", "a named mutex and the first pipe instance");
}
