/*
 * Client connections. The hot path is short on purpose: one read(2) into a
 * shared buffer, lines framed in place, every reply of the batch queued and
 * written with one writev(2) at the end. libevent tells us when the socket is
 * readable or writable; we do the I/O ourselves instead of using
 * bufferevents, which would add a copy and extra system calls per round trip.
 * The I/O goes through platform/transport.h, whose calls are the plain ones
 * on Unix and Winsock's on Windows (where a connection is a bridged pipe).
 *
 * Bounds: a line over the maximum gets too_large and the connection closes
 * without reading the rest; when replies to a client's own requests pile up
 * past a high-water mark, its remaining requests wait in the framer and its
 * socket is not read until the queue drains (backpressure); events
 * that push a queue over its limit evict the client (a final "evicted" event,
 * then close). So one client can never make the daemon grow without bound.
 *
 * Unfinished lines of all clients together share one budget
 * ([daemon] max_input_bytes): a client whose line would take it past the
 * limit gets busy and is closed, and a line not complete line_timeout_ms
 * after its first byte gets timeout and is closed, so clients that stop in
 * the middle of a line (slowloris) hold the budget for a bounded time.
 * When much of it was given back, the allocator is asked to return its
 * free memory to the system (osdep_memory_trim), once the wave is over.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "config.h"
#include "clock.h"
#include "conn.h"
#include "frame.h"
#include "jsonrpc.h"
#include "log.h"
#include "sdnotify.h"
#include "osdep.h"
#include "transport.h"
#include "uring.h"
#include "xmalloc.h"

#define CONN_HELLO	0x01	/* hello succeeded */
#define CONN_CLOSED	0x02	/* socket closed, off the list */
#define CONN_DRAINING	0x04	/* no more reads; close once flushed */
#define CONN_EVICTED	0x08	/* queue overflowed; nothing more is queued */
#define CONN_IN_READ	0x10	/* handling a read: replies are batched */
#define CONN_PAUSED	0x20	/* reading paused by backpressure */
#define CONN_FLUSHQ	0x40	/* on the end-of-pass flush queue */


static struct conn_ops	conn_ops;	/* the layer above's, from conn_init */
/* Queue chunks one batched write takes per client (the rest: next write). */
#define CONN_IOV	16
/* Queue chunks one writev takes (what evbuffer_write took at most). */
#define CONN_WRITEV_IOV	128

/* Encoded messages reach the output queue in pieces of up to this size. */
#define CONN_ENCODE_STACK	4096

/* How long a draining client gets to read what is left. */
#define CONN_GRACE_SEC	2

/*
 * Input memory given back since the last trim that makes one worth it, and
 * how long to wait first, so that a wave of clients leaving costs one.
 */
#define CONN_TRIM_BYTES		(1024 * 1024)
#define CONN_TRIM_DELAY_MS	250

struct conn {
	uint64_t	 id;
	int		 fd;
	uid_t		 uid;
	pid_t		 pid;
	int		 flags;
	int		 refs;
	unsigned	 pending;	/* requests not yet answered */
	char		*why;		/* why it is draining */
	struct event	*ev_read;
	struct event	*ev_write;
	struct event	*ev_grace;
	struct event	*ev_resume;	/* handles held requests after backpressure */
	struct event	*ev_line;	/* the unfinished line's deadline */
	uint64_t	 line_since;	/* when it began (monotonic ms), 0: none */
	unsigned long long line_mark;	/* frame_lines() then */
	struct frame	*frame;
	struct evbuffer	*out;
	size_t		 out_max;
	char		 client[64];
	TAILQ_ENTRY(conn) entry;
	TAILQ_ENTRY(conn) fentry;	/* on conn_flushq */
};
TAILQ_HEAD(conn_head, conn);

static struct conn_head	 conn_list = TAILQ_HEAD_INITIALIZER(conn_list);
/* Written at the end of this pass, all at once (conn_flush_all_cb). */
static struct conn_head	 conn_flushq = TAILQ_HEAD_INITIALIZER(conn_flushq);
static struct event	*conn_ev_flush;
static struct {
	struct conn		**c;
	struct uring_send	 *s;
	struct iovec		 *iov;
	size_t			  cap;
} conn_batch;
static struct event_base	*conn_base;
static unsigned			 conn_n;
static uint64_t			 conn_next_id = 1;
static uint64_t			 conn_evicted_n;
/* The unfinished lines of every client (frame.h), and its counters. */
static struct frame_budget	*conn_budget;
static uint64_t			 conn_refused_input_n;
static uint64_t			 conn_line_timeouts_n;
static size_t			 conn_trim_high;	/* most held since the last trim */
static struct event		*conn_ev_trim;
/* One read buffer for all: the loop is single-threaded. */
static char			 conn_rbuf[64 * 1024];

static void	conn_read_cb(evutil_socket_t, short, void *);
static void	conn_write_cb(evutil_socket_t, short, void *);
static void	conn_grace_cb(evutil_socket_t, short, void *);
static void	conn_resume_cb(evutil_socket_t, short, void *);
static void	conn_flush_all_cb(evutil_socket_t, short, void *);
static void	conn_line_timeout_cb(evutil_socket_t, short, void *);
static void	conn_trim_cb(evutil_socket_t, short, void *);
static void	conn_flush(struct conn *);

/* Sets the event base, and the batched writer where the kernel has one. */
void
conn_init(struct event_base *base, const struct conn_ops *ops)
{
	conn_ops = *ops;
	conn_base = base;
	if ((conn_ev_flush = event_new(base, -1, 0, conn_flush_all_cb,
	    NULL)) == NULL || (conn_ev_trim = evtimer_new(base, conn_trim_cb,
	    NULL)) == NULL)
		fatalx("event_new failed");
	conn_budget = frame_budget_create(config_get()->max_input_bytes);
	(void)uring_init();
}

/* How events reach many clients at once, for daemon.status. */
const char *
conn_write_batching(void)
{
	return uring_available() ? "io_uring" : "writev";
}

/* Wraps a connected socket. */
struct conn *
conn_create(int fd, uid_t uid, pid_t pid)
{
	const struct config	*cfg = config_get();
	struct conn		*c = xcalloc(1, sizeof *c);

	c->id = conn_next_id++;
	c->fd = fd;
	c->uid = uid;
	c->pid = pid;
	c->refs = 1;		/* the list's reference */
	c->frame = frame_create(cfg->max_line_bytes);
	frame_set_budget(c->frame, conn_budget);
	c->out = evbuffer_new();
	c->out_max = cfg->client_queue_bytes;
	if (c->out == NULL)
		fatalx("evbuffer_new failed");
	c->ev_read = event_new(conn_base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
	c->ev_write = event_new(conn_base, fd, EV_WRITE | EV_PERSIST, conn_write_cb, c);
	c->ev_grace = evtimer_new(conn_base, conn_grace_cb, c);
	c->ev_resume = event_new(conn_base, -1, 0, conn_resume_cb, c);
	c->ev_line = evtimer_new(conn_base, conn_line_timeout_cb, c);
	if (c->ev_read == NULL || c->ev_write == NULL || c->ev_grace == NULL ||
	    c->ev_resume == NULL || c->ev_line == NULL)
		fatalx("event_new failed");
	event_add(c->ev_read, NULL);
	TAILQ_INSERT_TAIL(&conn_list, c, entry);
	conn_n++;
	sdnotify_status_update(conn_count());
	log_debug("client %llu connected (pid %ld)", (unsigned long long)c->id,
	    (long)pid);
	return c;
}

/* Frees a connection from the loop once nothing refers to it. */
static void
conn_free_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c = arg;

	event_free(c->ev_read);
	event_free(c->ev_write);
	event_free(c->ev_grace);
	event_free(c->ev_resume);
	event_free(c->ev_line);
	frame_free(c->frame);
	evbuffer_free(c->out);
	free(c->why);
	free(c);
}

/* Takes a reference. */
void
conn_ref(struct conn *c)
{
	c->refs++;
}

/* Drops a reference; the last one schedules the free (never inline). */
void
conn_unref(struct conn *c)
{
	if (--c->refs > 0)
		return;
	if (event_base_once(conn_base, -1, EV_TIMEOUT, conn_free_cb, c, NULL) != 0)
		fatalx("event_base_once failed");
}

/* Returns the free memory after a wave of input went back (see the top). */
static void
conn_trim_cb(evutil_socket_t fd, short events, void *arg)
{
	osdep_memory_trim();
	conn_trim_high = frame_budget_used(conn_budget);
}

/* Notes the input budget after it may have changed; schedules a trim. */
static void
conn_budget_note(void)
{
	struct timeval	tv = { 0, CONN_TRIM_DELAY_MS * 1000 };
	size_t		used = frame_budget_used(conn_budget);

	if (used > conn_trim_high)
		conn_trim_high = used;
	else if (conn_trim_high - used >= CONN_TRIM_BYTES &&
	    !evtimer_pending(conn_ev_trim, NULL))
		evtimer_add(conn_ev_trim, &tv);
}

/*
 * A connection reads no more: its unfinished line goes back to the budget
 * now rather than when the last reference does. Not while a read is being
 * handled: the framer may be handing out that line.
 */
static void
conn_drop_input(struct conn *c)
{
	if (c->flags & CONN_IN_READ)
		return;
	frame_drop(c->frame);
	c->line_since = 0;
	event_del(c->ev_line);
	conn_budget_note();
}

/* Closes the socket now and leaves the list. */
void
conn_close(struct conn *c, const char *why)
{
	if (c->flags & CONN_CLOSED)
		return;
	c->flags |= CONN_CLOSED;
	event_del(c->ev_read);
	event_del(c->ev_write);
	event_del(c->ev_grace);
	event_del(c->ev_resume);
	conn_drop_input(c);
	if (c->flags & CONN_FLUSHQ) {
		TAILQ_REMOVE(&conn_flushq, c, fentry);
		c->flags &= ~CONN_FLUSHQ;
	}
	transport_close(c->fd);
	c->fd = -1;
	TAILQ_REMOVE(&conn_list, c, entry);
	conn_n--;
	sdnotify_status_update(conn_count());
	if (conn_ops.closed != NULL)
		conn_ops.closed(c);
	log_debug("client %llu closed: %s", (unsigned long long)c->id,
	    why != NULL ? why : (c->why != NULL ? c->why : "closed"));
	conn_unref(c);
}

/* Stops reading and closes once the queue is written. */
void
conn_close_after_flush(struct conn *c, const char *why)
{
	if (c->flags & (CONN_CLOSED | CONN_DRAINING))
		return;
	c->flags |= CONN_DRAINING;
	free(c->why);
	c->why = xstrdup(why);
	event_del(c->ev_read);
	conn_drop_input(c);
	if (!(c->flags & CONN_IN_READ))
		conn_flush(c);
}

/* The client had its grace time to read the rest and did not. */
static void
conn_grace_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c = arg;

	conn_close(c, "did not read its last messages in time");
}

/* Closes a draining connection if nothing is left to do. */
static void
conn_maybe_finish(struct conn *c)
{
	struct timeval	tv = { CONN_GRACE_SEC, 0 };

	if (!(c->flags & CONN_DRAINING) || (c->flags & CONN_CLOSED) ||
	    c->pending > 0)
		return;
	if (evbuffer_get_length(c->out) == 0)
		conn_close(c, NULL);
	else if (!evtimer_pending(c->ev_grace, NULL))
		evtimer_add(c->ev_grace, &tv);
}

/*
 * After a write (err: its errno, or 0): closes on a real error, else
 * waits for EV_WRITE if something is left.
 */
static void
conn_written(struct conn *c, int err)
{
	size_t	left;

	if (err != 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
		conn_close(c, err == EPIPE || err == ECONNRESET ?
		    "peer went away" : "write error");
		return;
	}
	left = evbuffer_get_length(c->out);
	if (left > 0) {
		if (!event_pending(c->ev_write, EV_WRITE, NULL))
			event_add(c->ev_write, NULL);
	} else if (event_pending(c->ev_write, EV_WRITE, NULL))
		event_del(c->ev_write);
	/*
	 * Backpressure: once the queue has drained enough, go on with the
	 * held requests and reading, from the loop (not from inside a flush
	 * that a handler may have started).
	 */
	if ((c->flags & CONN_PAUSED) && left <= c->out_max / 4) {
		c->flags &= ~CONN_PAUSED;
		event_active(c->ev_resume, EV_TIMEOUT, 0);
	}
	conn_maybe_finish(c);
}

/*
 * Writes from the output queue with one gathered write, as evbuffer_write
 * did, but through the transport. Returns the bytes written, or -1 with
 * errno.
 */
static ssize_t
conn_write_out(struct conn *c)
{
	struct evbuffer_iovec	vec[CONN_WRITEV_IOV];
	struct iovec		iov[CONN_WRITEV_IOV];
	ssize_t			n;
	int			k, i;

	k = evbuffer_peek(c->out, -1, NULL, vec, CONN_WRITEV_IOV);
	if (k > CONN_WRITEV_IOV)
		k = CONN_WRITEV_IOV;
	for (i = 0; i < k; i++) {
		iov[i].iov_base = vec[i].iov_base;
		iov[i].iov_len = vec[i].iov_len;
	}
	if ((n = transport_writev(c->fd, iov, k)) > 0)
		evbuffer_drain(c->out, (size_t)n);
	return n;
}

/* Writes what is queued; waits for EV_WRITE if the socket is full. */
static void
conn_flush(struct conn *c)
{
	int	err = 0;

	if (c->flags & CONN_CLOSED)
		return;
	if (evbuffer_get_length(c->out) > 0 && conn_write_out(c) < 0)
		err = errno;
	conn_written(c, err);
}

/* Room for n clients in the batch arrays. */
static void
conn_batch_grow(size_t n)
{
	if (n <= conn_batch.cap)
		return;
	conn_batch.cap = n < 64 ? 64 : n;
	conn_batch.c = xreallocarray(conn_batch.c, conn_batch.cap,
	    sizeof *conn_batch.c);
	conn_batch.s = xreallocarray(conn_batch.s, conn_batch.cap,
	    sizeof *conn_batch.s);
	conn_batch.iov = xreallocarray(conn_batch.iov, conn_batch.cap,
	    CONN_IOV * sizeof *conn_batch.iov);
}

/*
 * The end of a pass that queued output outside a read batch: everything
 * queued to every client goes out now. Several clients at once (an event
 * fanned out to everyone attached) are written with one system call where
 * the kernel can (uring.c says why that matters); else one writev each.
 */
static void
conn_flush_all_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c;
	size_t		 n = 0, i;
	int		 k;

	TAILQ_FOREACH(c, &conn_flushq, fentry)
		n++;
	if (n < 2 || !uring_available()) {
		while ((c = TAILQ_FIRST(&conn_flushq)) != NULL) {
			TAILQ_REMOVE(&conn_flushq, c, fentry);
			c->flags &= ~CONN_FLUSHQ;
			conn_flush(c);
		}
		return;
	}
	/*
	 * Nothing may touch an output queue between the peek and the send
	 * (an append can move a queue's bytes), so clients with nothing to
	 * write are seen to after the send, with the others.
	 */
	conn_batch_grow(n);
	n = 0;
	while ((c = TAILQ_FIRST(&conn_flushq)) != NULL) {
		TAILQ_REMOVE(&conn_flushq, c, fentry);
		c->flags &= ~CONN_FLUSHQ;
		conn_batch.c[n] = c;
		conn_batch.s[n].fd = c->fd;
		conn_batch.s[n].iov = conn_batch.iov + n * CONN_IOV;
		/* io_uring is Linux's: there evbuffer_iovec is iovec. */
		k = evbuffer_peek(c->out, -1, NULL, (struct evbuffer_iovec *)
		    (conn_batch.iov + n * CONN_IOV), CONN_IOV);
		conn_batch.s[n].iovcnt = k < CONN_IOV ? k : CONN_IOV;
		n++;
	}
	uring_sendv(conn_batch.s, n);
	/*
	 * Every queue loses what went out before anything can run: what
	 * follows may write to a client of this batch again (an eviction
	 * flushes at once) or close it.
	 */
	for (i = 0; i < n; i++)
		if (conn_batch.s[i].res > 0)
			evbuffer_drain(conn_batch.c[i]->out,
			    (size_t)conn_batch.s[i].res);
	for (i = 0; i < n; i++) {
		c = conn_batch.c[i];
		if (c->flags & CONN_CLOSED)
			continue;
		conn_written(c, conn_batch.s[i].res < 0 ?
		    (int)-conn_batch.s[i].res : 0);
	}
}

/*
 * Schedules a write for what was queued outside a read batch (events, late
 * replies). Several events produced by one callback, such as a turn's
 * state change and its message, then leave in one writev instead of one
 * system call each; the flush runs before the loop waits again, so no
 * latency is added. Inside a read batch the batch's own flush does it.
 */
static void
conn_schedule_flush(struct conn *c)
{
	if (c->flags & (CONN_IN_READ | CONN_CLOSED | CONN_FLUSHQ))
		return;
	c->flags |= CONN_FLUSHQ;
	TAILQ_INSERT_TAIL(&conn_flushq, c, fentry);
	if (!event_pending(conn_ev_flush, EV_TIMEOUT, NULL))
		event_active(conn_ev_flush, EV_TIMEOUT, 0);
}

/* The socket can take more. */
static void
conn_write_cb(evutil_socket_t fd, short events, void *arg)
{
	conn_flush(arg);
}

/*
 * A message being encoded: jansson hands out one small piece per JSON
 * token, so pieces are gathered here and reach the evbuffer in few large
 * evbuffer_add calls instead of one each (callgrind: 1.2k of the 25k
 * instructions a pipelined ping cost). One pass, whatever the size.
 */
struct conn_enc {
	struct evbuffer	*out;
	size_t		 len;
	char		 buf[CONN_ENCODE_STACK];
};

/* Moves what was gathered into the evbuffer. */
static int
conn_enc_flush(struct conn_enc *e)
{
	if (e->len > 0 && evbuffer_add(e->out, e->buf, e->len) != 0)
		return -1;
	e->len = 0;
	return 0;
}

/* jansson dump callback: gathers one piece of the encoded message. */
static int
conn_dump_cb(const char *buf, size_t len, void *arg)
{
	struct conn_enc	*e = arg;

	if (len > sizeof e->buf - e->len) {
		if (conn_enc_flush(e) != 0)
			return -1;
		if (len > sizeof e->buf)
			return evbuffer_add(e->out, buf, len);
	}
	memcpy(e->buf + e->len, buf, len);
	e->len += len;
	return 0;
}

/* Appends one message as a line, without any limit check. */
static void
conn_append(struct conn *c, const json_t *msg)
{
	struct conn_enc	e;

	e.out = c->out;
	e.len = 0;
	if (json_dump_callback(msg, conn_dump_cb, &e, JSON_COMPACT) != 0 ||
	    conn_dump_cb("\n", 1, &e) != 0 || conn_enc_flush(&e) != 0)
		fatalx("cannot queue a message");
}

/* Gives up on a client that is too far behind: keep the line being sent,
 * drop the rest, say why, and close after a grace time. */
static void
conn_evict(struct conn *c)
{
	struct evbuffer_ptr	 eol;
	struct evbuffer		*keep;
	size_t			 queued = evbuffer_get_length(c->out);
	json_t			*ev;

	c->flags |= CONN_EVICTED;
	conn_evicted_n++;
	eol = evbuffer_search_eol(c->out, NULL, NULL, EVBUFFER_EOL_LF);
	if ((keep = evbuffer_new()) == NULL)
		fatalx("evbuffer_new failed");
	if (eol.pos >= 0)
		evbuffer_remove_buffer(c->out, keep, (size_t)eol.pos + 1);
	evbuffer_free(c->out);
	c->out = keep;
	ev = rpc_notification("event", json_pack("{s:s, s:s, s:I, s:I}",
	    "type", "evicted", "reason", "output queue over its limit",
	    "queued_bytes", (json_int_t)queued, "limit_bytes",
	    (json_int_t)c->out_max));
	conn_append(c, ev);
	json_decref(ev);
	log_warn("client %llu evicted: %zu bytes queued, limit %zu",
	    (unsigned long long)c->id, queued, c->out_max);
	conn_close_after_flush(c, "evicted");
}

/* Queues a message, evicting the client if its queue overflows. */
int
conn_send(struct conn *c, const json_t *msg)
{
	if (c->flags & (CONN_CLOSED | CONN_EVICTED))
		return -1;
	conn_append(c, msg);
	if (evbuffer_get_length(c->out) > c->out_max) {
		conn_evict(c);
		return -1;
	}
	conn_schedule_flush(c);
	return 0;
}

/* Queues framed bytes, evicting the client if its queue overflows. */
int
conn_send_raw(struct conn *c, const char *buf, size_t len)
{
	if (c->flags & (CONN_CLOSED | CONN_EVICTED))
		return -1;
	if (evbuffer_add(c->out, buf, len) != 0)
		fatalx("cannot queue a message");
	if (evbuffer_get_length(c->out) > c->out_max) {
		conn_evict(c);
		return -1;
	}
	conn_schedule_flush(c);
	return 0;
}

/* Framer callback: one complete line from the client. */
static int
conn_line_cb(void *arg, const char *line, size_t len)
{
	struct conn	*c = arg;

	if (c->flags & (CONN_CLOSED | CONN_DRAINING))
		return 1;
	conn_ops.line(c, line, len);
	if (c->flags & (CONN_CLOSED | CONN_DRAINING))
		return 1;
	/*
	 * Backpressure: once this client's replies pile up past the
	 * high-water mark, stop handling its requests (the framer keeps the
	 * rest) until the queue drains.
	 */
	if (evbuffer_get_length(c->out) > c->out_max / 2) {
		c->flags |= CONN_PAUSED;
		return 1;
	}
	return 0;
}

/* Sends a last error line (id null) and closes once it is written. */
static void
conn_refuse(struct conn *c, enum gbr_err e, const char *message, json_t *data,
    const char *why)
{
	json_t	*reply;

	reply = rpc_error(NULL, e, message, data);
	conn_append(c, reply);
	json_decref(reply);
	conn_close_after_flush(c, why);
}

/* The unfinished line is past its deadline, or its deadline moved on. */
static void
conn_line_timeout_cb(evutil_socket_t fd, short events, void *arg)
{
	const struct config	*cfg = config_get();
	struct conn		*c = arg;
	struct timeval		 tv;
	uint64_t		 now, end;

	if (c->flags & (CONN_CLOSED | CONN_DRAINING) || c->line_since == 0)
		return;
	now = (uint64_t)clock_mono_ms();
	end = c->line_since + cfg->line_timeout_ms;
	if (now < end) {
		/* Another line began since the timer was set. */
		tv.tv_sec = (time_t)((end - now) / 1000);
		tv.tv_usec = (long)((end - now) % 1000) * 1000;
		evtimer_add(c->ev_line, &tv);
		return;
	}
	conn_line_timeouts_n++;
	log_info("client %llu left a line of %zu bytes unfinished for %u ms; "
	    "closing", (unsigned long long)c->id, frame_pending(c->frame),
	    cfg->line_timeout_ms);
	conn_refuse(c, GBR_ERR_TIMEOUT, "line not finished in time",
	    json_pack("{s:s, s:I, s:I}", "limit", "line_timeout_ms",
	    "max_ms", (json_int_t)cfg->line_timeout_ms, "pending_bytes",
	    (json_int_t)frame_pending(c->frame)), "line not finished in time");
}

/*
 * After a feed: an unfinished line gets its deadline. The timer is set
 * only when none is pending; when it fires it checks again, so a client
 * that streams long lines back to back costs no timer call per line.
 */
static void
conn_line_watch(struct conn *c)
{
	unsigned long long	lines = frame_lines(c->frame);
	struct timeval		tv;
	unsigned		ms;

	if (frame_pending(c->frame) == 0) {
		c->line_since = 0;
		return;
	}
	if (c->line_since == 0 || lines != c->line_mark) {
		/* A new line began in this feed. */
		c->line_since = (uint64_t)clock_mono_ms();
		c->line_mark = lines;
	}
	if (!evtimer_pending(c->ev_line, NULL)) {
		ms = config_get()->line_timeout_ms;
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (long)(ms % 1000) * 1000;
		evtimer_add(c->ev_line, &tv);
	}
}

/*
 * Handles bytes from the client (or, with len 0, what backpressure left
 * waiting), then writes every reply of the batch at once.
 */
static void
conn_process(struct conn *c, const char *buf, size_t len)
{
	enum frame_status	st;

	conn_ref(c);
	c->flags |= CONN_IN_READ;
	st = frame_feed(c->frame, buf, len, conn_line_cb, c);
	if (st == FRAME_TOO_LARGE && !(c->flags & (CONN_CLOSED | CONN_DRAINING))) {
		log_info("client %llu sent a line over %zu bytes; closing",
		    (unsigned long long)c->id, frame_max(c->frame));
		conn_refuse(c, GBR_ERR_TOO_LARGE, "line too long",
		    json_pack("{s:I}", "max_bytes",
		    (json_int_t)frame_max(c->frame)), "line too long");
	} else if (st == FRAME_OVER_BUDGET &&
	    !(c->flags & (CONN_CLOSED | CONN_DRAINING))) {
		conn_refused_input_n++;
		log_info("client %llu: its unfinished line does not fit in the "
		    "input budget (%zu of %zu bytes held); closing",
		    (unsigned long long)c->id, frame_budget_used(conn_budget),
		    frame_budget_limit(conn_budget));
		conn_refuse(c, GBR_ERR_BUSY, "the daemon holds too much "
		    "unfinished input from its clients; try again",
		    json_pack("{s:s, s:I}", "limit", "max_input_bytes",
		    "max_bytes", (json_int_t)frame_budget_limit(conn_budget)),
		    "input budget full");
	}
	c->flags &= ~CONN_IN_READ;
	if (c->flags & (CONN_CLOSED | CONN_DRAINING))
		conn_drop_input(c);
	else
		conn_line_watch(c);
	conn_budget_note();
	if ((c->flags & CONN_PAUSED) && !(c->flags & CONN_CLOSED))
		event_del(c->ev_read);
	conn_flush(c);
	conn_unref(c);
}

/* The queue drained after backpressure: go on with what was held. */
static void
conn_resume_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c = arg;

	if (c->flags & (CONN_CLOSED | CONN_PAUSED))
		return;
	if (frame_backlog(c->frame) > 0)
		conn_process(c, NULL, 0);
	if (!(c->flags & (CONN_CLOSED | CONN_DRAINING | CONN_PAUSED)))
		event_add(c->ev_read, NULL);
}

/* The socket is readable: one read, every complete line handled, one flush. */
static void
conn_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c = arg;
	ssize_t		 n;

	n = transport_read(c->fd, conn_rbuf, sizeof conn_rbuf);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		conn_close(c, "read error");
		return;
	}
	if (n == 0) {
		/*
		 * The peer closed its side: answer what it sent, then close.
		 * Calls waiting for a human are withdrawn first, or they would
		 * hold the connection open until someone decides.
		 */
		if (conn_ops.eof != NULL)
			conn_ops.eof(c);
		conn_close_after_flush(c, "end of input");
		return;
	}
	conn_process(c, conn_rbuf, (size_t)n);
}

/* Counts a request that will be answered later. */
void
conn_request_begin(struct conn *c)
{
	c->pending++;
}

/* A request was answered (or dropped). */
void
conn_request_end(struct conn *c)
{
	if (c->pending > 0)
		c->pending--;
	conn_schedule_flush(c);
}

/* Returns the connection's id. */
uint64_t
conn_id(const struct conn *c)
{
	return c->id;
}

/* Bytes queued for the client and not yet written. */
size_t
conn_queued(const struct conn *c)
{
	return evbuffer_get_length(c->out);
}

/* Returns the peer's pid as the kernel saw it at connect time. */
pid_t
conn_pid(const struct conn *c)
{
	return c->pid;
}

/* The peer's uid, as checked when it connected. */
uid_t
conn_uid(const struct conn *c)
{
	return c->uid;
}

/* Tells whether nothing more can be sent. */
int
conn_closing(const struct conn *c)
{
	return (c->flags & (CONN_CLOSED | CONN_EVICTED | CONN_DRAINING)) != 0;
}

/* Tells whether hello succeeded. */
int
conn_has_hello(const struct conn *c)
{
	return (c->flags & CONN_HELLO) != 0;
}

/* Records a successful hello. */
void
conn_set_hello(struct conn *c, const char *client)
{
	c->flags |= CONN_HELLO;
	if (client != NULL)
		snprintf(c->client, sizeof c->client, "%s", client);
}

/* Returns the client's name from hello ("" if none). */
const char *
conn_client(const struct conn *c)
{
	return c->client;
}

/* Returns the number of open connections. */
unsigned
conn_count(void)
{
	return conn_n;
}

/* Returns the number of evictions since start. */
uint64_t
conn_evictions(void)
{
	return conn_evicted_n;
}

/* Applies the live config's limits to every connection. */
void
conn_apply_config(void)
{
	const struct config	*cfg = config_get();
	struct conn		*c;

	frame_budget_set_limit(conn_budget, cfg->max_input_bytes);
	TAILQ_FOREACH(c, &conn_list, entry) {
		frame_set_max(c->frame, cfg->max_line_bytes);
		c->out_max = cfg->client_queue_bytes;
	}
}

/* The input budget and what it refused, for daemon.status. */
json_t *
conn_input_status(void)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
	    "max_bytes", (json_int_t)frame_budget_limit(conn_budget),
	    "used_bytes", (json_int_t)frame_budget_used(conn_budget),
	    "peak_bytes", (json_int_t)frame_budget_peak(conn_budget),
	    "line_timeout_ms", (json_int_t)config_get()->line_timeout_ms,
	    "refused", (json_int_t)conn_refused_input_n,
	    "timed_out", (json_int_t)conn_line_timeouts_n);
}

/* Sends a notification to every client past hello (see conn.h). */
void
conn_notify_all(const json_t *msg)
{
	struct conn	*c, *next;

	/* An overflowing queue evicts its client: take the next one first. */
	for (c = TAILQ_FIRST(&conn_list); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (!(c->flags & CONN_CLOSED) && conn_has_hello(c))
			(void)conn_send(c, msg);
	}
}

/* Closes every connection after one try to flush each. */
void
conn_close_all(const char *why)
{
	struct conn	*c;

	while ((c = TAILQ_FIRST(&conn_list)) != NULL) {
		if (evbuffer_get_length(c->out) > 0)
			(void)conn_write_out(c);
		conn_close(c, why);
	}
}
