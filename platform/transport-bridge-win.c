/*
 * The bridge between a Win32 handle opened for overlapped I/O (a connected
 * named pipe) and a loopback socket pair, so that callers wait on an
 * ordinary SOCKET (transport-win.h). One thread per bridge copies both
 * ways with overlapped I/O on both sides: a synchronous pipe handle would
 * serialise a pending read with every write.
 *
 * Bounds: each way has one fixed buffer, refilled only once it has been
 * written out, so backpressure passes through: a reader that stops fills
 * the pipe, then the bridge's buffer, then the socket, and the writer
 * blocks (or gets EAGAIN). Nothing queues without bound.
 *
 * How it ends. A pipe has no half close, so each end of the bridge is
 * either open or gone:
 * - The pipe ends (the other process closed it): what was read is passed
 *   on, then the caller's socket sees the end of input; the bridge waits
 *   for the caller to close its end.
 * - The caller ends its side (transport_close, or a plain close): what it
 *   wrote is passed on to the pipe, then the pipe is closed, and nothing
 *   more is read from it.
 * transport_close hands the caller's socket to the bridge instead of
 * closing it at once: closing a socket that still has unread input makes
 * TCP reset the connection, which would throw away the last lines the
 * caller wrote (an error and then a close is the daemon's usual goodbye).
 * The bridge closes both sockets once it has read everything up to the
 * caller's end; if the pipe will not take the rest within a grace time,
 * the rest is dropped. So a thread never outlives a closed pair for long.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>
#include <process.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport-win.h"
#include "xmalloc.h"

/*
 * Each way's buffer. Small on purpose: a daemon with 4096 clients holds
 * 4096 bridges; throughput is ample for a control channel.
 */
#define BRIDGE_BUF		(16 * 1024)
/* How long a released bridge may take to pass its last bytes on. */
#define BRIDGE_GRACE_MS		5000
/* The bridge thread's stack (reserved; committed as used). */
#define BRIDGE_STACK		(64 * 1024)

/* Where one way of the bridge is. */
enum bridge_state {
	BRIDGE_IDLE,		/* nothing pending: read next */
	BRIDGE_READING,		/* a read is pending */
	BRIDGE_WRITING,		/* a write of buf[off, len) is pending */
	BRIDGE_DONE		/* nothing more goes this way */
};

/* One way: a buffer read from one side and written to the other. */
struct bridge_way {
	enum bridge_state	 state;
	OVERLAPPED		 rd;
	OVERLAPPED		 wr;
	DWORD			 len;
	DWORD			 off;
	int			 eof;		/* the source ended */
	int			 broken;	/* the sink fails: drop */
	char			 buf[BRIDGE_BUF];
};

struct bridge {
	HANDLE			 h;		/* the handle (pipe) */
	SOCKET			 s;		/* the bridge's end of the pair */
	SOCKET			 peer;		/* the caller's end */
	HANDLE			 wake;		/* set by transport_close */
	int			 released;	/* peer is ours (bridge_lock) */
	int			 stopping;	/* released seen: finish up */
	int			 h_closed;
	ULONGLONG		 deadline;	/* the grace's end */
	struct bridge_way	 in;		/* handle to socket */
	struct bridge_way	 out;		/* socket to handle */
	struct bridge		*next;
};

static SRWLOCK		 bridge_lock = SRWLOCK_INIT;
static struct bridge	*bridge_list;		/* live bridges */
static unsigned		 bridge_n;

/*
 * An operation finished at once. The system sets its event then too,
 * unless the handle skips that (FILE_SKIP_SET_EVENT_ON_HANDLE); setting
 * it here as well costs nothing and keeps one rule: a finished operation
 * is told by its event.
 */
static void
bridge_now(struct bridge_way *w, OVERLAPPED *ov, enum bridge_state state)
{
	w->state = state;
	SetEvent(ov->hEvent);
}

/* Reads from the handle into the "in" way. */
static void
bridge_in_read(struct bridge *b)
{
	struct bridge_way	*w = &b->in;

	ResetEvent(w->rd.hEvent);
	w->rd.Internal = w->rd.InternalHigh = 0;
	w->rd.Offset = w->rd.OffsetHigh = 0;
	if (ReadFile(b->h, w->buf, sizeof w->buf, NULL, &w->rd))
		bridge_now(w, &w->rd, BRIDGE_READING);
	else if (GetLastError() == ERROR_IO_PENDING)
		w->state = BRIDGE_READING;
	else
		w->eof = 1;
}

/* Sends the rest of the "in" way's buffer to the socket. */
static void
bridge_in_write(struct bridge *b)
{
	struct bridge_way	*w = &b->in;
	WSABUF			 wb;

	ResetEvent(w->wr.hEvent);
	w->wr.Internal = w->wr.InternalHigh = 0;
	wb.buf = w->buf + w->off;
	wb.len = w->len - w->off;
	if (WSASend(b->s, &wb, 1, NULL, 0, &w->wr, NULL) == 0)
		bridge_now(w, &w->wr, BRIDGE_WRITING);
	else if (WSAGetLastError() == WSA_IO_PENDING)
		w->state = BRIDGE_WRITING;
	else {
		w->broken = 1;
		w->state = BRIDGE_IDLE;
	}
}

/* Receives from the socket into the "out" way. */
static void
bridge_out_read(struct bridge *b)
{
	struct bridge_way	*w = &b->out;
	WSABUF			 wb;
	DWORD			 flags = 0;

	WSAResetEvent(w->rd.hEvent);
	w->rd.Internal = w->rd.InternalHigh = 0;
	wb.buf = w->buf;
	wb.len = sizeof w->buf;
	if (WSARecv(b->s, &wb, 1, NULL, &flags, &w->rd, NULL) == 0)
		bridge_now(w, &w->rd, BRIDGE_READING);
	else if (WSAGetLastError() == WSA_IO_PENDING)
		w->state = BRIDGE_READING;
	else
		w->eof = 1;
}

/* Writes the rest of the "out" way's buffer to the handle. */
static void
bridge_out_write(struct bridge *b)
{
	struct bridge_way	*w = &b->out;

	ResetEvent(w->wr.hEvent);
	w->wr.Internal = w->wr.InternalHigh = 0;
	w->wr.Offset = w->wr.OffsetHigh = 0;
	if (WriteFile(b->h, w->buf + w->off, w->len - w->off, NULL, &w->wr))
		bridge_now(w, &w->wr, BRIDGE_WRITING);
	else if (GetLastError() == ERROR_IO_PENDING)
		w->state = BRIDGE_WRITING;
	else {
		w->broken = 1;
		w->state = BRIDGE_IDLE;
	}
}

/* The "in" way's pending operation finished: take its result. */
static void
bridge_in_done(struct bridge *b)
{
	struct bridge_way	*w = &b->in;
	DWORD			 n, flags;

	if (w->state == BRIDGE_READING) {
		w->state = BRIDGE_IDLE;
		if (!GetOverlappedResult(b->h, &w->rd, &n, FALSE)) {
			w->eof = 1;	/* broken pipe, or cancelled */
			return;
		}
		if (n == 0 || w->broken || b->stopping)
			return;
		w->len = n;
		w->off = 0;
		bridge_in_write(b);
		return;
	}
	w->state = BRIDGE_IDLE;
	if (!WSAGetOverlappedResult(b->s, &w->wr, &n, FALSE, &flags)) {
		w->broken = 1;		/* the caller's end is gone */
		return;
	}
	w->off += n;
	if (w->off < w->len && !b->stopping)
		bridge_in_write(b);
}

/* The "out" way's pending operation finished: take its result. */
static void
bridge_out_done(struct bridge *b)
{
	struct bridge_way	*w = &b->out;
	DWORD			 n, flags;

	if (w->state == BRIDGE_READING) {
		w->state = BRIDGE_IDLE;
		if (!WSAGetOverlappedResult(b->s, &w->rd, &n, FALSE, &flags) ||
		    n == 0) {
			w->eof = 1;	/* the caller's end, or a reset */
			return;
		}
		if (w->broken)
			return;
		w->len = n;
		w->off = 0;
		bridge_out_write(b);
		return;
	}
	w->state = BRIDGE_IDLE;
	if (!GetOverlappedResult(b->h, &w->wr, &n, FALSE)) {
		w->broken = 1;		/* the pipe is gone, or the grace ended */
		return;
	}
	w->off += n;
	if (w->off < w->len)
		bridge_out_write(b);
}

/* Cancels a way's pending operation and waits for it to finish. */
static void
bridge_cancel(struct bridge *b, struct bridge_way *w, HANDLE on_read,
    HANDLE on_write)
{
	DWORD	n;

	if (w->state == BRIDGE_READING) {
		CancelIoEx(on_read, &w->rd);
		(void)GetOverlappedResult(on_read, &w->rd, &n, TRUE);
	} else if (w->state == BRIDGE_WRITING) {
		CancelIoEx(on_write, &w->wr);
		(void)GetOverlappedResult(on_write, &w->wr, &n, TRUE);
	}
	w->state = BRIDGE_IDLE;
}

/*
 * Starts what each way can do next, and closes what is finished. Returns
 * 1 once both ways are done.
 */
static int
bridge_step(struct bridge *b)
{
	/* A read that fails at once leaves its way idle: done at once too. */
	if (b->in.state == BRIDGE_IDLE && !b->in.eof && !b->stopping &&
	    !b->h_closed)
		bridge_in_read(b);
	if (b->in.state == BRIDGE_IDLE) {
		/* The caller sees the end of what the pipe sent. */
		if (!b->in.broken)
			(void)shutdown(b->s, SD_SEND);
		b->in.state = BRIDGE_DONE;
	}
	if (b->out.state == BRIDGE_IDLE && !b->out.eof)
		bridge_out_read(b);
	if (b->out.state == BRIDGE_IDLE)
		b->out.state = BRIDGE_DONE;
	if (b->out.state == BRIDGE_DONE && !b->h_closed) {
		/* Nothing more will be written: the other process sees the end. */
		bridge_cancel(b, &b->in, b->h, (HANDLE)b->s);
		CloseHandle(b->h);
		b->h_closed = 1;
		if (b->in.state == BRIDGE_IDLE)
			return bridge_step(b);
	}
	return b->in.state == BRIDGE_DONE && b->out.state == BRIDGE_DONE;
}

/* Whether a way's pending operation has finished. */
static int
bridge_ready(const struct bridge_way *w)
{
	HANDLE	ev;

	if (w->state == BRIDGE_READING)
		ev = w->rd.hEvent;
	else if (w->state == BRIDGE_WRITING)
		ev = w->wr.hEvent;
	else
		return 0;
	return WaitForSingleObject(ev, 0) == WAIT_OBJECT_0;
}

/* Adds a way's pending operation's event to the set waited for. */
static void
bridge_wait_on(const struct bridge_way *w, HANDLE *set, DWORD *n)
{
	if (w->state == BRIDGE_READING)
		set[(*n)++] = w->rd.hEvent;
	else if (w->state == BRIDGE_WRITING)
		set[(*n)++] = w->wr.hEvent;
}

/* The caller handed its end over: stop reading the pipe, start the grace. */
static void
bridge_stop(struct bridge *b)
{
	b->stopping = 1;
	b->deadline = GetTickCount64() + BRIDGE_GRACE_MS;
	/* Nobody reads the caller's end any more: what the pipe sends goes. */
	bridge_cancel(b, &b->in, b->h, (HANDLE)b->s);
	b->in.broken = 1;
}

/* The grace ended: drop what the pipe would not take. */
static void
bridge_expire(struct bridge *b)
{
	bridge_cancel(b, &b->out, (HANDLE)b->s, b->h);
	b->out.eof = 1;
	b->out.broken = 1;
}

/* Takes a bridge off the list; returns whether the caller released it. */
static int
bridge_unlink(struct bridge *b)
{
	struct bridge	**pp;
	int		  released;

	AcquireSRWLockExclusive(&bridge_lock);
	for (pp = &bridge_list; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == b) {
			*pp = b->next;
			bridge_n--;
			break;
		}
	}
	released = b->released;
	ReleaseSRWLockExclusive(&bridge_lock);
	return released;
}

/* Takes the bridge off the list and frees it, with what it still holds. */
static void
bridge_free(struct bridge *b)
{
	int	released;

	if (!b->h_closed)
		CloseHandle(b->h);
	closesocket(b->s);
	released = bridge_unlink(b);
	/* Last: by now everything it wrote has been read (the top says why). */
	if (released)
		closesocket(b->peer);
	CloseHandle(b->in.rd.hEvent);
	CloseHandle(b->in.wr.hEvent);
	CloseHandle(b->out.rd.hEvent);
	CloseHandle(b->out.wr.hEvent);
	CloseHandle(b->wake);
	free(b);
}

/* The bridge's thread: copies both ways until both are done. */
static unsigned __stdcall
bridge_main(void *arg)
{
	struct bridge	*b = arg;
	HANDLE		 set[5];
	DWORD		 n, timeout;
	ULONGLONG	 now;
	int		 released;

	for (;;) {
		AcquireSRWLockShared(&bridge_lock);
		released = b->released;
		ReleaseSRWLockShared(&bridge_lock);
		if (released && !b->stopping)
			bridge_stop(b);
		if (bridge_step(b))
			break;
		n = 0;
		set[n++] = b->wake;
		bridge_wait_on(&b->in, set, &n);
		bridge_wait_on(&b->out, set, &n);
		timeout = INFINITE;
		if (b->stopping) {
			now = GetTickCount64();
			timeout = now >= b->deadline ? 0 :
			    (DWORD)(b->deadline - now);
		}
		if (WaitForMultipleObjects(n, set, FALSE, timeout) ==
		    WAIT_TIMEOUT && b->stopping) {
			bridge_expire(b);
			continue;
		}
		if (bridge_ready(&b->in))
			bridge_in_done(b);
		if (bridge_ready(&b->out))
			bridge_out_done(b);
	}
	bridge_free(b);
	return 0;
}

/* A manual-reset event for one overlapped operation. */
static int
bridge_event(OVERLAPPED *ov)
{
	memset(ov, 0, sizeof *ov);
	return (ov->hEvent = CreateEventW(NULL, TRUE, FALSE, NULL)) != NULL;
}

/* Frees a bridge that never started. */
static void
bridge_discard(struct bridge *b)
{
	if (b->in.rd.hEvent != NULL)
		CloseHandle(b->in.rd.hEvent);
	if (b->in.wr.hEvent != NULL)
		CloseHandle(b->in.wr.hEvent);
	if (b->out.rd.hEvent != NULL)
		CloseHandle(b->out.rd.hEvent);
	if (b->out.wr.hEvent != NULL)
		CloseHandle(b->out.wr.hEvent);
	if (b->wake != NULL)
		CloseHandle(b->wake);
	if (b->s != INVALID_SOCKET)
		closesocket(b->s);
	if (b->peer != INVALID_SOCKET)
		closesocket(b->peer);
	free(b);
}

/* Bridges a handle to a new socket pair (see transport-win.h). */
int
transport_bridge_handle(HANDLE h, char **cause)
{
	struct bridge	*b;
	SOCKET		 sv[2];
	uintptr_t	 t;
	int		 err;

	if (transport_win_socketpair(sv) != 0) {
		err = errno;
		if (cause != NULL)
			*cause = xasprintf("cannot make a socket pair: %s",
			    strerror(err));
		errno = err;
		return -1;
	}
	b = xcalloc(1, sizeof *b);
	b->h = h;
	b->peer = sv[0];
	b->s = sv[1];
	if (!bridge_event(&b->in.rd) || !bridge_event(&b->in.wr) ||
	    !bridge_event(&b->out.rd) || !bridge_event(&b->out.wr) ||
	    (b->wake = CreateEventW(NULL, FALSE, FALSE, NULL)) == NULL) {
		err = transport_win_errno(GetLastError());
		goto fail;
	}
	AcquireSRWLockExclusive(&bridge_lock);
	b->next = bridge_list;
	bridge_list = b;
	bridge_n++;
	ReleaseSRWLockExclusive(&bridge_lock);
	t = _beginthreadex(NULL, BRIDGE_STACK, bridge_main, b,
	    STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
	if (t == 0) {
		err = errno != 0 ? errno : EAGAIN;
		(void)bridge_unlink(b);
		goto fail;
	}
	CloseHandle((HANDLE)t);		/* the thread frees the bridge */
	return (int)sv[0];

fail:
	bridge_discard(b);
	if (cause != NULL)
		*cause = xasprintf("cannot start a bridge: %s", strerror(err));
	errno = err;
	return -1;
}

/* Counts the live bridges. */
unsigned
transport_bridge_count(void)
{
	unsigned	n;

	AcquireSRWLockShared(&bridge_lock);
	n = bridge_n;
	ReleaseSRWLockShared(&bridge_lock);
	return n;
}

/* Hands a caller's end to its bridge, if it has one alive. */
int
transport_bridge_release(SOCKET s)
{
	struct bridge	*b;

	AcquireSRWLockExclusive(&bridge_lock);
	for (b = bridge_list; b != NULL; b = b->next) {
		if (b->peer == s && !b->released)
			break;
	}
	if (b == NULL) {
		ReleaseSRWLockExclusive(&bridge_lock);
		return 0;
	}
	b->released = 1;
	/* The end of what the caller wrote, after all of it. */
	(void)shutdown(s, SD_SEND);
	SetEvent(b->wake);
	ReleaseSRWLockExclusive(&bridge_lock);
	return 1;
}
