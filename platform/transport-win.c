/*
 * The channel on Windows (transport.h): a named pipe, \\.\pipe\gbr-<user>,
 * bridged to a loopback socket pair so that callers hold an ordinary
 * SOCKET (transport-bridge-win.c does the copying).
 *
 * Dialing trusts the daemon only after checking who it is, as on Unix:
 * the pipe is opened with SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION,
 * so a server that is not ours can at most learn who we are, never act as
 * us; then the server's process (GetNamedPipeServerProcessId) must run as
 * our own account (its token's user SID), or nothing is sent to it. Where
 * that cannot be read we refuse (fail closed).
 *
 * Also here: Winsock's start, errno for Win32 and Winsock errors, UTF-8
 * and UTF-16, and the checked loopback socket pair, which the bridge and
 * gbrd's listener share (transport-win.h); the accounts are in
 * transport-account-win.c.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "transport.h"
#include "transport-win.h"
#include "xmalloc.h"

/* How long a dial waits for a busy pipe (every instance taken). */
#define TRANSPORT_BUSY_MS	5000
/* The socket pair's buffers: what a pair may hold, each way, each end. */
#define TRANSPORT_SOCKBUF	(64 * 1024)
/* How long the socket pair waits for its own connection to arrive. */
#define TRANSPORT_PAIR_MS	2000
/* Others' connections to the pair's port passed over, at most. */
#define TRANSPORT_PAIR_TRIES	8
/* The part of a pipe path before its name, and the longest name. */
#define TRANSPORT_PIPE_PREFIX	"\\\\.\\pipe\\"
#define TRANSPORT_PIPE_MAX	200
/* What a refusal of the server tells a person to do. */
#define TRANSPORT_WAY_OUT \
	"set GBR_SOCKET to a pipe name of your own (\\\\.\\pipe\\NAME)"

static INIT_ONCE	 transport_once = INIT_ONCE_STATIC_INIT;
static int		 transport_wsa_ok;

/* InitOnce callback: WSAStartup, once per process. */
static BOOL CALLBACK
transport_startup(PINIT_ONCE once, void *arg, void **ctx)
{
	WSADATA	wd;

	transport_wsa_ok = WSAStartup(MAKEWORD(2, 2), &wd) == 0;
	return TRUE;
}

/* Starts Winsock once. */
int
transport_win_init(void)
{
	InitOnceExecuteOnce(&transport_once, transport_startup, NULL, NULL);
	if (!transport_wsa_ok) {
		errno = ENOSYS;
		return -1;
	}
	return 0;
}

/* Maps a Winsock error to errno. */
int
transport_win_wsa_errno(int e)
{
	switch (e) {
	case WSAEWOULDBLOCK:
		return EAGAIN;
	case WSAEINTR:
		return EINTR;
	case WSAECONNRESET:
	case WSAECONNABORTED:
	case WSAENETRESET:
		return ECONNRESET;
	case WSAESHUTDOWN:
		return EPIPE;
	case WSAENOTCONN:
		return ENOTCONN;
	case WSAEMFILE:
		return EMFILE;
	case WSAENOBUFS:
		return ENOBUFS;
	case WSAENOTSOCK:
		return EBADF;
	case WSAEFAULT:
		return EFAULT;
	case WSAEINVAL:
	case WSANOTINITIALISED:
		return EINVAL;
	case WSAECONNREFUSED:
		return ECONNREFUSED;
	case WSAETIMEDOUT:
		return ETIMEDOUT;
	case WSAEACCES:
		return EACCES;
	case WSAEADDRINUSE:
		return EADDRINUSE;
	case WSAEINPROGRESS:
		return EINPROGRESS;
	default:
		return EIO;
	}
}

/* Maps a Win32 error to errno. */
int
transport_win_errno(DWORD e)
{
	switch (e) {
	case ERROR_FILE_NOT_FOUND:
	case ERROR_PATH_NOT_FOUND:
		return ENOENT;
	case ERROR_ACCESS_DENIED:
		return EACCES;
	case ERROR_PIPE_BUSY:
		return EBUSY;
	case ERROR_BROKEN_PIPE:
	case ERROR_NO_DATA:
	case ERROR_PIPE_NOT_CONNECTED:
		return EPIPE;
	case ERROR_NOT_ENOUGH_MEMORY:
	case ERROR_OUTOFMEMORY:
		return ENOMEM;
	case ERROR_TOO_MANY_OPEN_FILES:
		return EMFILE;
	case ERROR_NO_SYSTEM_RESOURCES:
		return ENFILE;
	case ERROR_INVALID_PARAMETER:
	case ERROR_INVALID_NAME:
		return EINVAL;
	case ERROR_OPERATION_ABORTED:
		return ECANCELED;
	case ERROR_SEM_TIMEOUT:
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

/* The system's text for a Win32 error, with its number. */
char *
transport_win_strerror(DWORD e)
{
	wchar_t	 buf[512];
	char	*text, *msg;
	size_t	 len;
	DWORD	 n;

	n = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM |
	    FORMAT_MESSAGE_IGNORE_INSERTS | FORMAT_MESSAGE_MAX_WIDTH_MASK, NULL,
	    e, 0, buf, sizeof buf / sizeof buf[0], NULL);
	if (n == 0)
		return xasprintf("Windows error %lu", (unsigned long)e);
	buf[n < sizeof buf / sizeof buf[0] ? n : 0] = L'\0';
	text = transport_win_utf8(buf);
	/* The system's sentences end in ". " or ".\r\n": one clause here. */
	len = strlen(text);
	while (len > 0 && strchr(" .\r\n", text[len - 1]) != NULL)
		text[--len] = '\0';
	msg = xasprintf("%s (error %lu)", text, (unsigned long)e);
	free(text);
	return msg;
}

/* Converts UTF-8 to UTF-16. */
wchar_t *
transport_win_wide(const char *s)
{
	wchar_t	*w;
	int	 n;

	n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
	if (n <= 0)
		return NULL;
	w = xreallocarray(NULL, (size_t)n, sizeof *w);
	if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
		free(w);
		return NULL;
	}
	return w;
}

/* Converts UTF-16 to UTF-8 (a lone surrogate becomes U+FFFD). */
char *
transport_win_utf8(const wchar_t *w)
{
	char	*s;
	int	 n;

	n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
	if (n <= 0)
		return xstrdup("?");
	s = xmalloc((size_t)n);
	if (WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n) {
		free(s);
		return xstrdup("?");
	}
	return s;
}

/* Tells whether path is a local pipe name. */
int
transport_win_is_pipe(const char *path)
{
	size_t	plen = strlen(TRANSPORT_PIPE_PREFIX), len;

	if (strlen(path) <= plen ||
	    _strnicmp(path, TRANSPORT_PIPE_PREFIX, plen) != 0)
		return 0;
	len = strlen(path + plen);
	return len <= TRANSPORT_PIPE_MAX && strchr(path + plen, '\\') == NULL;
}

/* Names a kernel object after a pipe (see transport-win.h). */
wchar_t *
transport_win_object_name(const char *path, const char *kind)
{
	wchar_t	*name, *obj;
	char	*s;

	if (!transport_win_is_pipe(path))
		return NULL;
	s = xasprintf("Local\\gbr-%s-%s", kind,
	    path + strlen(TRANSPORT_PIPE_PREFIX));
	name = transport_win_wide(s);
	free(s);
	if (name == NULL)
		return NULL;
	/* "Local\" keeps its case; the rest is folded as the pipe's is. */
	obj = name + wcslen(L"Local\\");
	CharLowerBuffW(obj, (DWORD)wcslen(obj));
	return name;
}

/* A TCP socket for the pair: overlapped (the bridge), never inherited. */
static SOCKET
transport_socket(void)
{
	SOCKET	s;

	s = WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
	    WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
	if (s == INVALID_SOCKET && WSAGetLastError() == WSAEINVAL) {
		/* Before Windows 7 SP1 the flag is unknown: clear it after. */
		s = WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0,
		    WSA_FLAG_OVERLAPPED);
		if (s != INVALID_SOCKET)
			SetHandleInformation((HANDLE)s, HANDLE_FLAG_INHERIT, 0);
	}
	return s;
}

/* Nagle off and fixed buffers on one end of the pair. */
static void
transport_tune(SOCKET s)
{
	int	on = 1, size = TRANSPORT_SOCKBUF;

	/*
	 * Nagle would hold a small reply back until the last one is
	 * acknowledged. Fixed buffers keep what the pair can hold bounded
	 * (automatic tuning would let it grow to megabytes on loopback).
	 */
	(void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, (const char *)&on,
	    sizeof on);
	(void)setsockopt(s, SOL_SOCKET, SO_SNDBUF, (const char *)&size,
	    sizeof size);
	(void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, (const char *)&size,
	    sizeof size);
}

/* Whether an accepted peer is the socket we connected (self). */
static int
transport_pair_ours(const struct sockaddr_in *peer,
    const struct sockaddr_in *self)
{
	return peer->sin_family == AF_INET &&
	    peer->sin_addr.s_addr == self->sin_addr.s_addr &&
	    peer->sin_port == self->sin_port;
}

/*
 * Accepts the pair's connection from l: the one from self. Any local
 * process may connect to a loopback port, so others' connections are
 * closed and passed over, a few at most, within a bounded time (one
 * stolen on its way must not leave us waiting forever).
 */
static SOCKET
transport_pair_accept(SOCKET l, const struct sockaddr_in *self)
{
	struct sockaddr_in	peer;
	WSAPOLLFD		pfd;
	u_long			on = 1, off = 0;
	int			len, tries;
	SOCKET			s;

	if (ioctlsocket(l, FIONBIO, &on) != 0)
		return INVALID_SOCKET;
	for (tries = 0; tries < TRANSPORT_PAIR_TRIES; tries++) {
		pfd.fd = l;
		pfd.events = POLLRDNORM;
		pfd.revents = 0;
		if (WSAPoll(&pfd, 1, TRANSPORT_PAIR_MS) != 1)
			break;
		len = sizeof peer;
		if ((s = accept(l, (struct sockaddr *)&peer, &len)) ==
		    INVALID_SOCKET)
			return INVALID_SOCKET;
		if (transport_pair_ours(&peer, self)) {
			/* It takes the listener's mode: blocking again. */
			(void)ioctlsocket(s, FIONBIO, &off);
			SetHandleInformation((HANDLE)s, HANDLE_FLAG_INHERIT, 0);
			return s;
		}
		closesocket(s);
	}
	WSASetLastError(tries == TRANSPORT_PAIR_TRIES ? WSAEACCES :
	    WSAETIMEDOUT);
	return INVALID_SOCKET;
}

/* Makes a checked loopback socket pair (see transport-win.h). */
int
transport_win_socketpair(SOCKET sv[2])
{
	struct sockaddr_in	 sa, self;
	SOCKET			 l, a = INVALID_SOCKET, b = INVALID_SOCKET;
	BOOL			 excl = TRUE;
	int			 len, err;

	if (transport_win_init() != 0)
		return -1;
	if ((l = transport_socket()) == INVALID_SOCKET)
		goto fail;
	/* Nobody may bind our port beside us and take our connection. */
	(void)setsockopt(l, SOL_SOCKET, SO_EXCLUSIVEADDRUSE,
	    (const char *)&excl, sizeof excl);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	len = sizeof sa;
	if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(l, TRANSPORT_PAIR_TRIES) != 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &len) != 0)
		goto fail;
	if ((a = transport_socket()) == INVALID_SOCKET)
		goto fail;
	transport_tune(a);
	len = sizeof self;
	if (connect(a, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    getsockname(a, (struct sockaddr *)&self, &len) != 0)
		goto fail;
	if ((b = transport_pair_accept(l, &self)) == INVALID_SOCKET)
		goto fail;
	transport_tune(b);
	closesocket(l);
	sv[0] = a;
	sv[1] = b;
	return 0;

fail:
	err = WSAGetLastError();
	if (b != INVALID_SOCKET)
		closesocket(b);
	if (a != INVALID_SOCKET)
		closesocket(a);
	if (l != INVALID_SOCKET)
		closesocket(l);
	errno = transport_win_wsa_errno(err);
	return -1;
}

/*
 * Checks that the server of a connected pipe runs as our account. Returns
 * 0, or -1 with *cause.
 */
static int
transport_check_server(HANDLE h, const char *path, char **cause)
{
	ULONG	 pid;
	char	*who = NULL, *why;

	if (!GetNamedPipeServerProcessId(h, &pid)) {
		why = transport_win_strerror(GetLastError());
		*cause = xasprintf("cannot tell which account serves %s (%s); "
		    "refusing to talk to it", path, why);
		free(why);
		return -1;
	}
	switch (transport_win_pid_same_user(pid, &who)) {
	case 1:
		return 0;
	case 0:
		*cause = xasprintf("refusing the server on %s: it runs as %s, "
		    "not as you, so nothing was sent to it; another account "
		    "may be running a fake gbrd there, so %s", path, who,
		    TRANSPORT_WAY_OUT);
		free(who);
		return -1;
	default:
		*cause = xasprintf("cannot tell which account serves %s (its "
		    "process %lu cannot be read); refusing to talk to it",
		    path, (unsigned long)pid);
		return -1;
	}
}

/* Opens the pipe, waiting a bounded time while every instance is busy. */
static HANDLE
transport_open_pipe(const wchar_t *name, DWORD *err)
{
	ULONGLONG	deadline = GetTickCount64() + TRANSPORT_BUSY_MS;
	HANDLE		h;

	for (;;) {
		/*
		 * Identification only: a server that is not ours may learn
		 * who we are, but can never act as us.
		 */
		h = CreateFileW(name, GENERIC_READ | GENERIC_WRITE, 0, NULL,
		    OPEN_EXISTING, FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT |
		    SECURITY_IDENTIFICATION, NULL);
		if (h != INVALID_HANDLE_VALUE)
			return h;
		*err = GetLastError();
		if (*err != ERROR_PIPE_BUSY || GetTickCount64() >= deadline)
			return INVALID_HANDLE_VALUE;
		/* Fails at once when the pipe is gone: CreateFileW then says. */
		(void)WaitNamedPipeW(name, 250);
	}
}

/* Connects to the daemon's pipe and checks its server. */
int
transport_dial(const char *path, char **cause)
{
	wchar_t	*name;
	HANDLE	 h;
	DWORD	 err = 0;
	char	*why;
	int	 fd;

	*cause = NULL;
	if (!transport_win_is_pipe(path) ||
	    (name = transport_win_wide(path)) == NULL) {
		*cause = xasprintf("%s is not a pipe name (\\\\.\\pipe\\NAME, "
		    "at most %d characters, no backslash in NAME)", path,
		    TRANSPORT_PIPE_MAX);
		return -1;
	}
	if (transport_win_init() != 0) {
		*cause = xstrdup("cannot start Windows sockets");
		free(name);
		return -1;
	}
	h = transport_open_pipe(name, &err);
	free(name);
	if (h == INVALID_HANDLE_VALUE) {
		if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND) {
			errno = ENOENT;		/* nobody listens there */
			return -1;
		}
		if (err == ERROR_ACCESS_DENIED)
			*cause = xasprintf("refusing %s: it may not be opened "
			    "(access denied), so it is not served by gbrd for "
			    "you; another account may be running a fake gbrd "
			    "there, so %s", path, TRANSPORT_WAY_OUT);
		else if (err == ERROR_PIPE_BUSY)
			*cause = xasprintf("%s stayed busy for %d ms",
			    path, TRANSPORT_BUSY_MS);
		else {
			why = transport_win_strerror(err);
			*cause = xasprintf("cannot open %s: %s", path, why);
			free(why);
		}
		return -1;
	}
	if (transport_check_server(h, path, cause) != 0) {
		CloseHandle(h);
		return -1;
	}
	if ((fd = transport_bridge_handle(h, cause)) == -1) {
		CloseHandle(h);
		return -1;
	}
	return fd;
}

/* Reads from a channel (a socket). */
ssize_t
transport_read(int fd, void *buf, size_t len)
{
	int	n;

	n = recv((SOCKET)fd, buf, len > INT_MAX ? INT_MAX : (int)len, 0);
	if (n == SOCKET_ERROR) {
		errno = transport_win_wsa_errno(WSAGetLastError());
		return -1;
	}
	return n;
}

/* Writes to a channel. */
ssize_t
transport_write(int fd, const void *buf, size_t len)
{
	int	n;

	n = send((SOCKET)fd, buf, len > INT_MAX ? INT_MAX : (int)len, 0);
	if (n == SOCKET_ERROR) {
		errno = transport_win_wsa_errno(WSAGetLastError());
		return -1;
	}
	return n;
}

/* Gathers a write to a channel with WSASend. */
ssize_t
transport_writev(int fd, const struct iovec *iov, int iovcnt)
{
	WSABUF	bufs[64];
	DWORD	sent = 0, n = 0;
	size_t	total = 0;
	int	i;

	/* Like writev, a short write is fine: the rest goes next time. */
	for (i = 0; i < iovcnt && n < sizeof bufs / sizeof bufs[0]; i++) {
		if (iov[i].iov_len == 0)
			continue;
		if (iov[i].iov_len > INT_MAX - total)
			break;
		bufs[n].buf = iov[i].iov_base;
		bufs[n].len = (ULONG)iov[i].iov_len;
		total += iov[i].iov_len;
		n++;
	}
	if (n == 0)
		return 0;
	if (WSASend((SOCKET)fd, bufs, n, &sent, 0, NULL, NULL) != 0) {
		errno = transport_win_wsa_errno(WSAGetLastError());
		return -1;
	}
	return (ssize_t)sent;
}

/* Closes a channel; a bridged one through its bridge. */
void
transport_close(int fd)
{
	if (fd == -1)
		return;
	if (!transport_bridge_release((SOCKET)fd))
		closesocket((SOCKET)fd);
}

/* Waits on channels with WSAPoll. */
int
transport_poll(struct pollfd *fds, unsigned n, int timeout_ms)
{
	int	r;

	if (n == 0) {
		/* WSAPoll refuses an empty set; poll(2) just waits. */
		Sleep(timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms);
		return 0;
	}
	r = WSAPoll(fds, n, timeout_ms);
	if (r == SOCKET_ERROR) {
		errno = transport_win_wsa_errno(WSAGetLastError());
		return -1;
	}
	return r;
}

/* Makes a channel non-blocking. */
int
transport_set_nonblock(int fd)
{
	u_long	on = 1;

	if (ioctlsocket((SOCKET)fd, FIONBIO, &on) != 0) {
		errno = transport_win_wsa_errno(WSAGetLastError());
		return -1;
	}
	return 0;
}
