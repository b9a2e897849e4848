/*
 * A running job's pipes (see runner.h for the limits they enforce): its
 * stdout and stderr, read as they come and kept up to max_output bytes
 * for both together, passed to the output callback, and the flood kill of
 * a child that goes on writing past twice the cap (at least RN_FLOOD_MIN
 * more); its stdin, written from the job's copy of the input as the pipe
 * takes it; and gbr-exec's status pipe (see gbr-exec.c, "Status"), kept
 * whole up to RN_STATUS_MAX bytes, with the parser of its setup line.
 * The small helpers for descriptors and events live here too.
 *
 * Bounds: each read is at most RN_CHUNK bytes, at most RN_READ_BURST per
 * wakeup per stream (so one flooding child cannot starve the loop), and
 * after the reap rn_read drains at most the maximum it is given.
 *
 * It does not own when the pipes are made, watched or closed for good
 * (runner.c, runner-spawn.c, runner-forksrv.c), nor what the status
 * lines mean for the result (runner.c, rn_deliver).
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/ioctl.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "runner-int.h"
#include "xmalloc.h"

#define RN_CHUNK	65536		/* bytes per read */
#define RN_READ_BURST	4		/* reads per wakeup per stream */
#define RN_FLOOD_MIN	(1024 * 1024)	/* read past the cap before a kill */

/* Frees one event and clears the pointer. */
void
rn_event_free(struct event **ev)
{
	if (*ev != NULL) {
		event_free(*ev);
		*ev = NULL;
	}
}

/*
 * Stops one event without freeing it: it may be the one whose callback is
 * running. Events are freed with their job, from the deliver event.
 */
void
rn_event_stop(struct event *ev)
{
	if (ev != NULL)
		event_del(ev);
}

/* Closes one descriptor and clears it. */
void
rn_close(int *fd)
{
	if (*fd != -1) {
		close(*fd);
		*fd = -1;
	}
}

/* Sets O_NONBLOCK: one system call, where F_GETFL and F_SETFL take two. */
int
rn_nonblock(int fd)
{
	int	on = 1;

	return ioctl(fd, FIONBIO, &on);
}

/* Keeps what fits of a chunk of output and passes it on. */
static void
rn_output(struct runner_job *j, enum runner_stream s, const char *p, size_t n)
{
	struct rn_buf	*b = s == RUNNER_STDOUT ? &j->out : &j->err;
	size_t		 room, keep, want;
	uint64_t	 seen;

	b->total += n;
	if (j->stream) {
		/* A conversation: its reader keeps and bounds what it needs. */
		if (j->out_cb != NULL && j->state == RN_RUNNING)
			j->out_cb(j->arg, s, p, n);
		return;
	}
	room = j->limits.max_output - (j->out.len + j->err.len);
	keep = n < room ? n : room;
	if (keep < n)
		j->truncated = 1;
	if (keep > 0) {
		if (b->len + keep > b->cap) {
			want = b->cap == 0 ? 4096 : b->cap;
			while (want < b->len + keep)
				want *= 2;
			if (want > j->limits.max_output)
				want = j->limits.max_output;
			b->p = xreallocarray(b->p, want, 1);
			b->cap = want;
		}
		memcpy(b->p + b->len, p, keep);
		b->len += keep;
		if (j->out_cb != NULL && j->state == RN_RUNNING)
			j->out_cb(j->arg, s, p, keep);
	}
	seen = j->out.total + j->err.total;
	if (!j->output_limited && !j->exited &&
	    seen > (uint64_t)j->limits.max_output +
	    (j->limits.max_output > RN_FLOOD_MIN ? j->limits.max_output :
	    RN_FLOOD_MIN)) {
		/* It keeps flooding: stop reading, end it like a timeout. */
		j->output_limited = 1;
		if (j->ev_out != NULL)
			event_del(j->ev_out);
		if (j->ev_err != NULL)
			event_del(j->ev_err);
		if (!j->term_sent && !j->kill_sent) {
			struct timeval	tv;

			rn_kill(j, SIGTERM);
			tv.tv_sec = rn.grace_ms / 1000;
			tv.tv_usec = (rn.grace_ms % 1000) * 1000;
			evtimer_add(j->ev_timer, &tv);
		}
	}
}

/*
 * Reads a pipe: up to burst chunks, or to EAGAIN if burst is 0 and at most
 * max bytes. Returns 1 at end of file or error (the fd is then closed,
 * after its event, if given, is stopped: closed first, the event's
 * removal would fail).
 */
int
rn_read(struct runner_job *j, int *fd, struct event *ev, enum runner_stream s,
    int burst, size_t max)
{
	char	buf[RN_CHUNK];
	ssize_t	n;
	size_t	got = 0;
	int	i;

	for (i = 0; burst == 0 || i < burst; i++) {
		if (burst == 0 && got >= max)
			return 0;
		n = read(*fd, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			rn_event_stop(ev);
			rn_close(fd);
			return 1;
		}
		got += (size_t)n;
		rn_output(j, s, buf, (size_t)n);
	}
	return 0;
}

/* stdout or stderr is readable. */
void
rn_on_output(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;

	if (fd == j->fd_out)
		(void)rn_read(j, &j->fd_out, j->ev_out, RUNNER_STDOUT,
		    RN_READ_BURST, 0);
	else if (fd == j->fd_err)
		(void)rn_read(j, &j->fd_err, j->ev_err, RUNNER_STDERR,
		    RN_READ_BURST, 0);
}

/* Reads the status pipe into the job's status buffer. */
int
rn_read_status(struct runner_job *j)
{
	char	drop[256];
	ssize_t	n;

	for (;;) {
		if (j->st_len < RN_STATUS_MAX)
			n = read(j->fd_st, j->st + j->st_len,
			    RN_STATUS_MAX - j->st_len);
		else
			n = read(j->fd_st, drop, sizeof drop);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			rn_event_stop(j->ev_st);
			rn_close(&j->fd_st);
			return 1;
		}
		if (j->st_len < RN_STATUS_MAX)
			j->st_len += (size_t)n;
	}
}

/* True if the status holds a whole line equal to line. */
static int
rn_status_has(const struct runner_job *j, const char *line)
{
	size_t	n = strlen(line), i;

	for (i = 0; i + n <= j->st_len; i++)
		if ((i == 0 || j->st[i - 1] == '\n') &&
		    memcmp(j->st + i, line, n) == 0 &&
		    (i + n == j->st_len || j->st[i + n] == '\n'))
			return 1;
	return 0;
}

/* Parses gbr-exec's setup line. Returns 0, or -1 if it is not one. */
int
rn_parse_setup(const char *line, struct rn_setup *su)
{
	memset(su, 0, sizeof *su);
	if (sscanf(line, "setup ns=%d userns=%d landlock=%d caps=%d "
	    "nproc=%31s hidden=%d ro=%d seccomp=%d proc=%d tmp=%d sup=%d "
	    "chain=%d", &su->ns, &su->userns, &su->ll, &su->caps, su->nproc,
	    &su->hidden, &su->ro, &su->seccomp, &su->proc, &su->tmp, &su->sup,
	    &su->chain) != 12)
		return -1;
	return 0;
}

/* The status pipe is readable. */
void
rn_on_status(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;

	if (!rn_read_status(j)) {
		/* A supervisor says so in its target's setup line. */
		if (!j->supervised && j->fs == NULL && j->st_len > 0 &&
		    memmem(j->st, j->st_len, " sup=1 ", 7) != NULL)
			j->supervised = 1;
		return;
	}
	/*
	 * A fork server's run whose init said "end" and closed the pipe is
	 * over (see gbr-exec.c, "Status"): nothing of it is left but the init
	 * on its way out, and its DONE, which can wait for the namespaces'
	 * teardown, is not needed.
	 */
	if (j->fs != NULL && j->state == RN_RUNNING && rn_status_has(j, "end")) {
		j->reaped = 1;
		j->wstatus = 0;
		rn_reaped(j);
	}
}

/* stdin can take more of the input. */
void
rn_on_input(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;
	size_t			 want;
	ssize_t			 n = 1;

	while (j->input_off < j->input_len) {
		want = j->input_len - j->input_off;
		if (want > RN_CHUNK)
			want = RN_CHUNK;
		n = write(j->fd_in, j->input + j->input_off, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;	/* EPIPE: the child does not want the rest */
		j->input_off += (size_t)n;
	}
	if (j->stream && j->input_off >= j->input_len && !j->input_eof &&
	    n > 0) {
		/* All written: wait for runner_write, keeping the pipe. */
		rn_event_stop(j->ev_in);
		return;
	}
	rn_event_stop(j->ev_in);
	rn_close(&j->fd_in);
}
