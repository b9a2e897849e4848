/*
 * The standard streams of a program that speaks a protocol over them
 * (gbrctl mcp) as sockets its poll loop can wait on (transport.h's
 * transport_stdio_*). Windows' standard input and output are anonymous
 * pipes, files or consoles, which WSAPoll cannot wait on, and they are
 * synchronous handles; each one only goes one way, so one thread per
 * stream pumps it through a loopback socket pair with plain blocking
 * calls: standard input to the caller's socket, the caller's socket to
 * standard output. Each pump has one fixed buffer: a caller that does not
 * read stops the input pump, an output that does not drain stops the
 * caller's writes (EAGAIN on its non-blocking socket). Nothing queues
 * without bound.
 *
 * The process's own standard input becomes the null device and its
 * standard output a copy of standard error, so nothing else (a gbrd
 * started on demand inherits them, a stray printf) can write into the
 * protocol.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>
#include <process.h>

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"
#include "transport-win.h"
#include "xmalloc.h"

/* One pump's buffer and its thread's stack. */
#define PUMP_BUF	(64 * 1024)
#define PUMP_STACK	(64 * 1024)

struct pump {
	HANDLE	h;		/* the standard stream */
	SOCKET	s;		/* the pump's end of the pair */
	char	buf[PUMP_BUF];
};

/* Standard input to the socket, until either ends. */
static unsigned __stdcall
pump_in_main(void *arg)
{
	struct pump	*p = arg;
	DWORD		 n;
	int		 off, w;

	while (ReadFile(p->h, p->buf, sizeof p->buf, &n, NULL) && n > 0) {
		for (off = 0; off < (int)n; off += w) {
			if ((w = send(p->s, p->buf + off, (int)n - off, 0)) <= 0)
				goto out;
		}
	}
out:
	/* The caller reads the end of input, after everything before it. */
	shutdown(p->s, SD_SEND);
	closesocket(p->s);
	CloseHandle(p->h);
	free(p);
	return 0;
}

/* The socket to standard output, until either ends. */
static unsigned __stdcall
pump_out_main(void *arg)
{
	struct pump	*p = arg;
	DWORD		 w;
	int		 n, off;

	while ((n = recv(p->s, p->buf, sizeof p->buf, 0)) > 0) {
		for (off = 0; off < n; off += (int)w) {
			if (!WriteFile(p->h, p->buf + off, (DWORD)(n - off), &w,
			    NULL))
				goto out;
		}
	}
out:
	/* A reader that went away: the caller's next write fails. */
	closesocket(p->s);
	CloseHandle(p->h);
	free(p);
	return 0;
}

/* Starts a pump for a duplicate of std; returns the caller's socket. */
static int
pump_start(DWORD std, int out, char **cause)
{
	struct pump	*p;
	SOCKET		 sv[2];
	HANDLE		 h = GetStdHandle(std), dup;
	uintptr_t	 t;

	if (h == NULL || h == INVALID_HANDLE_VALUE ||
	    !DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &dup,
	    0, FALSE, DUPLICATE_SAME_ACCESS)) {
		*cause = xasprintf("standard %s must be open", out ? "output" :
		    "input");
		return -1;
	}
	if (transport_win_socketpair(sv) != 0) {
		*cause = xasprintf("socket pair: %s", strerror(errno));
		CloseHandle(dup);
		return -1;
	}
	p = xcalloc(1, sizeof *p);
	p->h = dup;
	p->s = sv[1];
	t = _beginthreadex(NULL, PUMP_STACK, out ? pump_out_main : pump_in_main,
	    p, STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
	if (t == 0) {
		*cause = xstrdup("cannot start a thread");
		closesocket(sv[0]);
		closesocket(sv[1]);
		CloseHandle(dup);
		free(p);
		return -1;
	}
	CloseHandle((HANDLE)t);
	return (int)sv[0];
}

/* Points a standard stream at fd, for the C library and for Win32 both. */
static void
pump_std(int std, DWORD which, int fd)
{
	if (_dup2(fd, std) == 0)
		SetStdHandle(which, (HANDLE)_get_osfhandle(std));
}

/* Takes standard input and output for a protocol (see transport.h). */
int
transport_stdio_take(int *in_fd, int *out_fd, char **cause)
{
	int	fd;

	*cause = NULL;
	if (transport_win_init() != 0) {
		*cause = xasprintf("Winsock: %s", strerror(errno));
		return -1;
	}
	if ((*in_fd = pump_start(STD_INPUT_HANDLE, 0, cause)) == -1)
		return -1;
	if ((*out_fd = pump_start(STD_OUTPUT_HANDLE, 1, cause)) == -1) {
		closesocket((SOCKET)*in_fd);
		return -1;
	}
	if ((fd = open("NUL", O_RDWR)) != -1) {
		pump_std(0, STD_INPUT_HANDLE, fd);
		close(fd);
	}
	pump_std(1, STD_OUTPUT_HANDLE, 2);
	(void)transport_set_nonblock(*out_fd);
	return 0;
}

/* Reads what standard input sent. */
ssize_t
transport_stdio_read(int fd, void *buf, size_t len)
{
	return transport_read(fd, buf, len);
}

/* Writes toward standard output. */
ssize_t
transport_stdio_write(int fd, const void *buf, size_t len)
{
	return transport_write(fd, buf, len);
}

/* Ends both: the output pump writes what it holds, then stops. */
void
transport_stdio_release(int in_fd, int out_fd)
{
	if (out_fd != -1)
		transport_close(out_fd);
	if (in_fd != -1)
		closesocket((SOCKET)in_fd);
}
