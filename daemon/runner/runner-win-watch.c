/*
 * The watcher of a run on Windows, and the loop's side of what it posts.
 *
 * libevent waits on sockets only here, and a run is pipes and a process
 * handle. So each run has one thread, the watcher, which owns the run's
 * side of its pipes (opened for overlapped I/O by runner-win-spawn.c),
 * its process handle and a duplicate of its Job object, and waits on all
 * of them at once (WaitForMultipleObjects): a chunk read from stdout or
 * stderr is sent to the loop as a frame (runner-win.h) on a socket pair;
 * the input, if any, is written to stdin as the child takes it. When the
 * run's first process ends, the watcher ends the rest of its Job object
 * (as the Unix runner kills the process group), reads what the pipes
 * still hold, at most RW_DRAIN_MAX bytes each and for at most
 * RW_DRAIN_MS (a process that escaped the Job object's kill, holding a
 * pipe, must not hold the run), sends the END frame with the exit code,
 * and closes its socket: the loop sees the frames, then the end of the
 * socket, which finishes the job (rw_over).
 *
 * Bounds and backpressure: one read of RW_CHUNK bytes per pipe is in
 * flight at a time, and the next one starts only once the chunk is sent;
 * the socket's buffers are fixed (transport_win_socketpair). A loop that
 * does not read stops the watcher's sends, then its reads, then the
 * child's writes. The loop reads at most RW_READ_BURST chunks per wakeup.
 *
 * If the loop's end of the socket goes first (runner_shutdown), a send
 * fails: the watcher kills the Job object and ends. The watcher frees
 * everything it owns itself; the loop keeps only its own handles.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>
#include <process.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "runner-win.h"
#include "transport.h"
#include "transport-win.h"
#include "xmalloc.h"

#define RW_STACK	(64 * 1024)	/* the watcher's stack (reserved) */

/* What a watcher owns. */
struct rw_watch {
	HANDLE		 proc;		/* the run's first process */
	HANDLE		 job;		/* a duplicate of its Job object */
	HANDLE		 pipe[2];	/* stdout and stderr, ours */
	OVERLAPPED	 ov[2];
	int		 reading[2];	/* a read is in flight */
	uint64_t	 drained[2];	/* bytes read after the exit */
	HANDLE		 in;		/* stdin, ours, or NULL */
	OVERLAPPED	 ov_in;
	int		 writing;
	char		*input;
	size_t		 input_len, input_off;
	SOCKET		 s;		/* the watcher's end */
	int		 lost;		/* the loop's end is gone */
	struct {
		struct rw_frame	 h;
		char		 b[RW_CHUNK];
	}		 f[2];		/* a frame per pipe: header, then data */
};

/* Sends all of buf; -1 once the loop's end is gone. */
static int
rw_send(struct rw_watch *w, const void *buf, size_t len)
{
	const char	*p = buf;
	int		 n;

	while (len > 0 && !w->lost) {
		n = send(w->s, p, len > INT_MAX ? INT_MAX : (int)len, 0);
		if (n <= 0) {
			w->lost = 1;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	return w->lost ? -1 : 0;
}

/* Closes one of the watcher's handles, after its I/O is over. */
static void
rw_close_io(HANDLE *h, OVERLAPPED *ov, int *pending)
{
	DWORD	n;

	if (*h == NULL)
		return;
	if (*pending) {
		/* The buffer must outlive the I/O: cancel, then wait for it. */
		CancelIoEx(*h, ov);
		(void)GetOverlappedResult(*h, ov, &n, TRUE);
		*pending = 0;
	}
	CloseHandle(*h);
	*h = NULL;
}

/* Starts the next read of pipe i (the event fires when it completes). */
static void
rw_read_next(struct rw_watch *w, int i)
{
	ResetEvent(w->ov[i].hEvent);
	w->ov[i].Internal = w->ov[i].InternalHigh = 0;
	if (ReadFile(w->pipe[i], w->f[i].b, RW_CHUNK, NULL, &w->ov[i]) ||
	    GetLastError() == ERROR_IO_PENDING) {
		/* Done at once or later: either way the event is set. */
		w->reading[i] = 1;
		return;
	}
	/* ERROR_BROKEN_PIPE: every writer has gone. */
	w->reading[i] = 0;
	CloseHandle(w->pipe[i]);
	w->pipe[i] = NULL;
}

/* A read of pipe i completed: send its chunk on, and read again. */
static void
rw_read_done(struct rw_watch *w, int i, int exited)
{
	DWORD	n = 0;

	w->reading[i] = 0;
	if (!GetOverlappedResult(w->pipe[i], &w->ov[i], &n, FALSE)) {
		/* ERROR_BROKEN_PIPE: every writer has gone. */
		CloseHandle(w->pipe[i]);
		w->pipe[i] = NULL;
		return;
	}
	/* A write of no bytes reads as none: not the end of the pipe. */
	if (n > 0) {
		w->f[i].h.type = i == 0 ? RW_F_OUT : RW_F_ERR;
		w->f[i].h.len = n;
		if (rw_send(w, &w->f[i], sizeof w->f[i].h + n) != 0)
			return;
		if (exited && (w->drained[i] += n) >= RW_DRAIN_MAX)
			return;	/* enough after the end: the rest is cut */
	}
	rw_read_next(w, i);
}

/* Writes the next part of the input to stdin, or closes it when done. */
static void
rw_write_next(struct rw_watch *w)
{
	size_t	want = w->input_len - w->input_off;

	if (want == 0) {
		CloseHandle(w->in);	/* the child reads the end of its input */
		w->in = NULL;
		return;
	}
	if (want > RW_CHUNK)
		want = RW_CHUNK;
	ResetEvent(w->ov_in.hEvent);
	w->ov_in.Internal = w->ov_in.InternalHigh = 0;
	if (WriteFile(w->in, w->input + w->input_off, (DWORD)want, NULL,
	    &w->ov_in) || GetLastError() == ERROR_IO_PENDING) {
		w->writing = 1;
		return;
	}
	/* The child does not want the rest (it closed its stdin, or ended). */
	w->writing = 0;
	CloseHandle(w->in);
	w->in = NULL;
}

/* A write to stdin completed. */
static void
rw_write_done(struct rw_watch *w)
{
	DWORD	n = 0;

	w->writing = 0;
	if (!GetOverlappedResult(w->in, &w->ov_in, &n, FALSE)) {
		CloseHandle(w->in);
		w->in = NULL;
		return;
	}
	w->input_off += n;
	rw_write_next(w);
}

/* Frees what a watcher owns (its I/O over first). */
static void
rw_watch_free(struct rw_watch *w)
{
	int	i;

	for (i = 0; i < 2; i++) {
		rw_close_io(&w->pipe[i], &w->ov[i], &w->reading[i]);
		if (w->ov[i].hEvent != NULL)
			CloseHandle(w->ov[i].hEvent);
	}
	rw_close_io(&w->in, &w->ov_in, &w->writing);
	if (w->ov_in.hEvent != NULL)
		CloseHandle(w->ov_in.hEvent);
	if (w->proc != NULL)
		CloseHandle(w->proc);
	if (w->job != NULL)
		CloseHandle(w->job);
	if (w->s != INVALID_SOCKET)
		closesocket(w->s);
	free(w->input);
	free(w);
}

/*
 * The run's first process has ended: its code goes in the END frame, and
 * the rest of the run goes with it, and with it every handle of the
 * pipes a process of the Job object held. Returns the drain's deadline.
 */
static ULONGLONG
rw_exited(struct rw_watch *w, struct rw_end *e)
{
	DWORD	code;

	if (GetExitCodeProcess(w->proc, &code)) {
		e->code = code;
		e->flags |= RW_END_CODE;
	}
	(void)TerminateJobObject(w->job, RW_KILL_CODE);
	rw_close_io(&w->in, &w->ov_in, &w->writing);
	return GetTickCount64() + RW_DRAIN_MS;
}

/* The watcher thread (see the top of this file). */
static unsigned __stdcall
rw_watch_main(void *arg)
{
	struct rw_watch	*w = arg;
	struct {
		struct rw_frame	h;
		struct rw_end	e;
	}		 end;
	HANDLE		 set[4];
	int		 what[4], n, i, k, first = 0, exited = 0;
	DWORD		 r, wait = INFINITE;
	ULONGLONG	 deadline = 0, now;

	memset(&end, 0, sizeof end);
	for (i = 0; i < 2; i++)
		rw_read_next(w, i);
	if (w->in != NULL)
		rw_write_next(w);
	while (!w->lost) {
		/*
		 * The lowest signalled index wins a wait: the pipes take
		 * turns at being first, so that a flood on one does not
		 * starve the other. The process comes last, so what it wrote
		 * before it ended is read before its end is seen.
		 */
		n = 0;
		first = !first;
		for (k = 0; k < 2; k++) {
			i = k ^ first;
			if (w->pipe[i] != NULL && w->reading[i]) {
				what[n] = i;
				set[n++] = w->ov[i].hEvent;
			}
		}
		if (w->in != NULL && w->writing) {
			what[n] = 2;
			set[n++] = w->ov_in.hEvent;
		}
		if (!exited) {
			what[n] = 3;
			set[n++] = w->proc;
		}
		if (n == 0)
			break;		/* both pipes ended after the exit */
		/*
		 * A pipe that never rests (a grandchild flooding it) would
		 * win every wait: the process is looked at each time too.
		 */
		if (!exited && WaitForSingleObject(w->proc, 0) == WAIT_OBJECT_0) {
			exited = 1;
			deadline = rw_exited(w, &end.e);
			continue;
		}
		if (exited) {
			now = GetTickCount64();
			if (now >= deadline)
				break;
			wait = (DWORD)(deadline - now);
		}
		r = WaitForMultipleObjects((DWORD)n, set, FALSE, wait);
		if (r == WAIT_TIMEOUT)
			break;
		if (r >= WAIT_OBJECT_0 + (DWORD)n) {
			/* WAIT_FAILED: never expected; end the run, say so. */
			break;
		}
		switch (what[r - WAIT_OBJECT_0]) {
		case 0:
		case 1:
			i = what[r - WAIT_OBJECT_0];
			rw_read_done(w, i, exited);
			if (exited && w->pipe[i] != NULL && !w->reading[i])
				end.e.flags |= RW_END_CUT;
			break;
		case 2:
			rw_write_done(w);
			break;
		case 3:
			exited = 1;
			deadline = rw_exited(w, &end.e);
			break;
		}
	}
	if (!exited) {
		/* The loop's end went first, or waiting failed: end the run. */
		(void)TerminateJobObject(w->job, RW_KILL_CODE);
	}
	for (i = 0; i < 2; i++)
		if (w->pipe[i] != NULL)
			end.e.flags |= RW_END_CUT;
	end.h.type = RW_F_END;
	end.h.len = sizeof end.e;
	(void)rw_send(w, &end, sizeof end);
	/* No input comes from the loop: this close loses nothing it sent. */
	shutdown(w->s, SD_SEND);
	rw_watch_free(w);
	return 0;
}

/* Starts a run's watcher (see runner-win.h). */
int
rw_watch_start(struct runner_job *j, void *proc, void *job, void *out,
    void *err, void *in)
{
	struct rw_watch	*w;
	SOCKET		 sv[2];
	uintptr_t	 t;
	int		 i;

	w = xcalloc(1, sizeof *w);
	w->proc = proc;
	w->job = job;
	w->pipe[0] = out;
	w->pipe[1] = err;
	w->in = in;
	w->s = INVALID_SOCKET;
	if (in != NULL && j->input != NULL) {
		w->input = xmalloc(j->input_len + 1);
		memcpy(w->input, j->input, j->input_len);
		w->input_len = j->input_len;
	}
	for (i = 0; i < 2; i++)
		if ((w->ov[i].hEvent = CreateEventW(NULL, TRUE, FALSE,
		    NULL)) == NULL)
			goto fail;
	if ((w->ov_in.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL)) == NULL)
		goto fail;
	if (transport_win_socketpair(sv) != 0) {
		log_warn("runner: socket pair: %s", strerror(errno));
		goto fail;
	}
	w->s = sv[1];
	j->sock = (intptr_t)sv[0];
	if (transport_set_nonblock((int)sv[0]) != 0)
		goto fail_sock;
	j->ev_sock = event_new(rw.base, (evutil_socket_t)sv[0],
	    EV_READ | EV_PERSIST, rw_on_sock, j);
	if (j->ev_sock == NULL || event_add(j->ev_sock, NULL) != 0)
		goto fail_sock;
	t = _beginthreadex(NULL, RW_STACK, rw_watch_main, w,
	    STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
	if (t == 0) {
		log_warn("runner: cannot start a watcher thread: %s",
		    strerror(errno));
		goto fail_sock;
	}
	j->thread = (void *)t;
	return 0;

fail_sock:
	if (j->ev_sock != NULL) {
		event_free(j->ev_sock);
		j->ev_sock = NULL;
	}
	closesocket(sv[0]);
	j->sock = -1;
fail:
	rw_watch_free(w);
	return -1;
}

/* Handles one whole frame; -1 if it is not one the watcher sends. */
static int
rw_frame_in(struct runner_job *j, const struct rw_frame *h, const char *p)
{
	struct rw_end	e;

	switch (h->type) {
	case RW_F_OUT:
	case RW_F_ERR:
		/* Past the cap it is counted and dropped there. */
		rw_output(j, h->type == RW_F_OUT ? RUNNER_STDOUT :
		    RUNNER_STDERR, p, h->len);
		return 0;
	case RW_F_END:
		if (h->len != sizeof e)
			return -1;
		memcpy(&e, p, sizeof e);
		j->ended = 1;
		j->code = e.code;
		j->end_flags = e.flags;
		if (e.flags & RW_END_CUT)
			log_info("runner: '%s' ended, but a pipe of it stayed "
			    "open after its Job object was killed; the rest "
			    "was dropped", j->argv0);
		return 0;
	}
	return -1;
}

/* The loop's end of a job's socket is readable (see runner-win.h). */
void
rw_on_sock(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;
	struct rw_frame		 h;
	size_t			 off;
	int			 n, burst;

	for (burst = 0; burst < RW_READ_BURST; burst++) {
		n = recv((SOCKET)fd, (char *)j->rbuf + j->rlen,
		    (int)(sizeof j->rbuf - j->rlen), 0);
		if (n == SOCKET_ERROR && WSAGetLastError() == WSAEWOULDBLOCK)
			return;
		if (n <= 0) {
			/* The watcher is done (or gone): the run is over. */
			rw_over(j);
			return;
		}
		j->rlen += (size_t)n;
		off = 0;
		while (j->rlen - off >= sizeof h) {
			memcpy(&h, j->rbuf + off, sizeof h);
			if (h.len > RW_CHUNK) {
				log_warn("runner: a bad frame from the watcher "
				    "of '%s'", j->argv0);
				rw_kill(j);
				rw_over(j);
				return;
			}
			if (j->rlen - off < sizeof h + h.len)
				break;
			if (rw_frame_in(j, &h, (const char *)j->rbuf + off +
			    sizeof h) != 0) {
				log_warn("runner: a bad frame from the watcher "
				    "of '%s'", j->argv0);
				rw_kill(j);
				rw_over(j);
				return;
			}
			off += sizeof h + h.len;
		}
		memmove(j->rbuf, j->rbuf + off, j->rlen - off);
		j->rlen -= off;
	}
}
