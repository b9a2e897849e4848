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
 * and UTF-16, the accounts, and the checked loopback socket pair, which
 * the bridge and gbrd's listener share (transport-win.h).
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <sddl.h>

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
/* The part of a pipe path before its name, and the longest name. */
#define TRANSPORT_PIPE_PREFIX	"\\\\.\\pipe\\"
#define TRANSPORT_PIPE_MAX	200
/* What a refusal of the server tells a person to do. */
#define TRANSPORT_WAY_OUT \
	"set GBR_SOCKET to a pipe name of your own (\\\\.\\pipe\\NAME)"

static INIT_ONCE	 transport_once = INIT_ONCE_STATIC_INIT;
static int		 transport_wsa_ok;
static INIT_ONCE	 transport_sid_once = INIT_ONCE_STATIC_INIT;
static PSID		 transport_sid;

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

/* Reads a token's user SID into a new buffer; NULL if it cannot. */
static PSID
transport_token_sid(HANDLE token)
{
	union {
		TOKEN_USER	tu;
		BYTE		b[sizeof(TOKEN_USER) + SECURITY_MAX_SID_SIZE];
	}	 u;
	DWORD	 len;
	PSID	 sid;

	if (!GetTokenInformation(token, TokenUser, &u, sizeof u, &len) ||
	    !IsValidSid(u.tu.User.Sid))
		return NULL;
	len = GetLengthSid(u.tu.User.Sid);
	sid = xmalloc(len);
	if (!CopySid(len, sid, u.tu.User.Sid)) {
		free(sid);
		return NULL;
	}
	return sid;
}

/* InitOnce callback: reads our own SID. */
static BOOL CALLBACK
transport_read_self_sid(PINIT_ONCE once, void *arg, void **ctx)
{
	HANDLE	token;

	if (OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) {
		transport_sid = transport_token_sid(token);
		CloseHandle(token);
	}
	return TRUE;
}

/* Our own account's SID. */
PSID
transport_win_self_sid(void)
{
	InitOnceExecuteOnce(&transport_sid_once, transport_read_self_sid, NULL,
	    NULL);
	return transport_sid;
}

/* Names an account for a person: "DOMAIN\name", else its SID string. */
static char *
transport_sid_name(PSID sid)
{
	wchar_t		 name[256], dom[256], *str;
	DWORD		 nlen = 256, dlen = 256;
	SID_NAME_USE	 use;
	char		*n, *d, *s;

	if (LookupAccountSidW(NULL, sid, name, &nlen, dom, &dlen, &use)) {
		n = transport_win_utf8(name);
		d = transport_win_utf8(dom);
		s = *d != '\0' ? xasprintf("%s\\%s", d, n) : xstrdup(n);
		free(n);
		free(d);
		return s;
	}
	if (ConvertSidToStringSidW(sid, &str)) {
		s = transport_win_utf8(str);
		LocalFree(str);
		return s;
	}
	return xstrdup("an account that cannot be named");
}

/*
 * Whether process pid runs as our account. A pid is only a number: the
 * caller asks while the pipe is connected, so the process at the other
 * end cannot have gone and given its number away unless it handed its end
 * of the pipe to another process first.
 */
int
transport_win_pid_same_user(DWORD pid, char **who)
{
	HANDLE	proc, token;
	PSID	self = transport_win_self_sid(), sid;
	int	same;

	if (self == NULL || pid == 0)
		return -1;
	if ((proc = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE,
	    pid)) == NULL)
		return -1;
	if (!OpenProcessToken(proc, TOKEN_QUERY, &token)) {
		CloseHandle(proc);
		return -1;
	}
	sid = transport_token_sid(token);
	CloseHandle(token);
	CloseHandle(proc);
	if (sid == NULL)
		return -1;
	same = EqualSid(sid, self) ? 1 : 0;
	if (!same && who != NULL)
		*who = transport_sid_name(sid);
	free(sid);
	return same;
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

/* Accepts the pair's connection from l, waiting a bounded time. */
static SOCKET
transport_pair_accept(SOCKET l, struct sockaddr_in *peer)
{
	WSAPOLLFD	pfd;
	u_long		on = 1, off = 0;
	int		len = sizeof *peer;
	SOCKET		s;

	/* A connection stolen on the way must not leave us waiting forever. */
	pfd.fd = l;
	pfd.events = POLLRDNORM;
	pfd.revents = 0;
	if (WSAPoll(&pfd, 1, TRANSPORT_PAIR_MS) != 1) {
		WSASetLastError(WSAETIMEDOUT);
		return INVALID_SOCKET;
	}
	if (ioctlsocket(l, FIONBIO, &on) != 0)
		return INVALID_SOCKET;
	s = accept(l, (struct sockaddr *)peer, &len);
	if (s != INVALID_SOCKET) {
		/* An accepted socket takes the listener's mode: blocking again. */
		(void)ioctlsocket(s, FIONBIO, &off);
		SetHandleInformation((HANDLE)s, HANDLE_FLAG_INHERIT, 0);
	}
	return s;
}

/* Makes a checked loopback socket pair (see transport-win.h). */
int
transport_win_socketpair(SOCKET sv[2])
{
	struct sockaddr_in	 sa, peer, self;
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
	    listen(l, 1) != 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &len) != 0)
		goto fail;
	if ((a = transport_socket()) == INVALID_SOCKET)
		goto fail;
	transport_tune(a);
	if (connect(a, (struct sockaddr *)&sa, sizeof sa) != 0)
		goto fail;
	if ((b = transport_pair_accept(l, &peer)) == INVALID_SOCKET)
		goto fail;
	/*
	 * Any local process may connect to a loopback port: the accepted
	 * socket must be the one we connected, else it is not ours.
	 */
	len = sizeof self;
	if (getsockname(a, (struct sockaddr *)&self, &len) != 0)
		goto fail;
	if (peer.sin_family != AF_INET ||
	    peer.sin_addr.s_addr != self.sin_addr.s_addr ||
	    peer.sin_port != self.sin_port) {
		WSASetLastError(WSAEACCES);
		goto fail;
	}
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
