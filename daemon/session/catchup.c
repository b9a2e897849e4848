/*
 * Catch-up (session.attach with after_seq): the missed events a client
 * gets before it goes live. They come from the session's ring when it
 * still holds them, else from the disk log, where every event is a
 * "session.*" record whose payload is the event itself: a page read there
 * is filtered to this session's records and each one is encoded with
 * session_encode, so the line is byte for byte the one live clients got.
 * The session's log index (logindex.h) says where to start reading near
 * event N instead of at the log's first record.
 *
 * While it catches up an attachment gets no live events (they reach it
 * through the ring or the log instead); the catch-up reads on until the
 * ring covers the rest, sends that, then replay_complete, and goes live in
 * the same callback, so nothing is lost or sent twice. It sends at most a
 * page (1/8 of the client's queue, 256K at most) before it looks at the
 * client's queue again, and waits while that is over half full. When the
 * log no longer has an event it needs (a snapshot replaced the old
 * segments), the client gets resync_required.
 *
 * This file owns struct catchup: it holds its attachment, and a log read
 * in flight keeps it alive, so detaching, closing the connection or
 * re-attaching only unlinks it and the read's callback frees it. The
 * attachment itself is session-attach.c's.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "conn.h"
#include "disklog.h"
#include "log.h"
#include "session.h"
#include "session-int.h"
#include "xmalloc.h"

#define SESSION_CATCHUP_RECORDS	1024	/* log records per catch-up read */
#define SESSION_CATCHUP_BYTES	(256U * 1024)	/* at most, per page */
#define SESSION_CATCHUP_POLL_MS	10	/* a slow client's queue is looked at again */
#define SESSION_CATCHUP_POLL_MAX 320	/* ... backing off to this */

/*
 * The missed events being sent to an attachment. A log read in flight
 * keeps it alive after the attachment is gone (a is then NULL).
 */
struct catchup {
	struct attach		*a;		/* NULL once the attachment is gone */
	uint64_t		 next;		/* the next session seq to send */
	uint64_t		 rnext;		/* next when the read in flight began */
	uint64_t		 lpos;		/* log records up to this seq are seen */
	uint64_t		 replayed;	/* events sent so far */
	int			 reading;	/* a disklog_read holds it */
	int			 busy;		/* inside catchup_pump */
	int			 waiting;	/* for the client to read its queue */
	unsigned		 wait_tick;
	TAILQ_ENTRY(catchup)	 wentry;	/* catchup_waiting */
};
TAILQ_HEAD(catchup_list, catchup);

static struct catchup_list	 catchup_waiting = TAILQ_HEAD_INITIALIZER(catchup_waiting);
static struct event		*catchup_ev;	/* looks at waiting catch-ups again */
static unsigned			 catchup_tick;
static int			 catchup_ticking;	/* inside catchup_tick_cb */
static unsigned			 catchup_poll_ms = SESSION_CATCHUP_POLL_MS;
static unsigned			 catchups_n;

/* Frees a catch-up that nothing refers to any more. */
static void
catchup_release(struct catchup *cu)
{
	if (cu->a != NULL || cu->reading || cu->busy > 0)
		return;
	free(cu);
	catchups_n--;
}

/*
 * The attachment is going away (detached, its connection closed, attached
 * again, or the catch-up is done): a read in flight finds it gone.
 */
void
catchup_cancel(struct attach *a)
{
	struct catchup	*cu = a->cu;

	a->cu = NULL;
	cu->a = NULL;
	if (cu->waiting) {
		TAILQ_REMOVE(&catchup_waiting, cu, wentry);
		cu->waiting = 0;
	}
	catchup_release(cu);
}

/* Bytes of events sent in one step: an eighth of a client queue, 256K at most. */
static size_t
catchup_page_bytes(void)
{
	size_t	q = config_get()->client_queue_bytes / 8;

	return q < SESSION_CATCHUP_BYTES ? q : SESSION_CATCHUP_BYTES;
}

/* Ends a fan-out-like section that may have marked attachments dead. */
static void
catchup_unfan(struct session *s)
{
	if (--s->fanning == 0)
		attach_sweep(s);
}

/*
 * Tells a catching-up client that the events after next - 1 cannot be
 * sent; it goes on with replay_complete and live events.
 */
static void
catchup_resync(struct catchup *cu, const char *why)
{
	struct attach	*a = cu->a;
	struct session	*s = a->s;

	/* A send can close the connection, which detaches it: defer that. */
	s->fanning++;
	if (session_send_local(s, a->c, json_pack("{s:s, s:I, s:s, s:I, s:I, "
	    "s:s, s:s}", "session", s->id, "seq", (json_int_t)s->announced,
	    "type", "resync_required", "after_seq", (json_int_t)(cu->next - 1),
	    "first_seq", (json_int_t)session_ring_first(s), "reason", why,
	    "hint", "call session.history, then session.attach "
	    "with after_seq set to the seq history returned")) != 0)
		a->dead = 1;
	cu->next = s->announced + 1;
	catchup_unfan(s);
}

/* The catch-up reached the newest event: replay_complete, and live from now on. */
static void
catchup_finish(struct catchup *cu)
{
	struct attach	*a = cu->a;
	struct session	*s = a->s;

	s->fanning++;
	/* session_break's notice went to the live clients only. */
	if (s->broken && session_send_local(s, a->c, json_pack("{s:s, s:I, s:s, "
	    "s:s, s:s}", "session", s->id, "seq", (json_int_t)s->announced,
	    "type", "resync_required", "reason", "the disk log failed; events "
	    "after this seq are unknown", "hint", "restart gbrd, then call "
	    "session.history and session.attach")) != 0)
		a->dead = 1;
	if (!a->dead && session_send_local(s, a->c, json_pack("{s:s, s:I, s:s, "
	    "s:I}", "session", s->id, "seq", (json_int_t)s->announced, "type",
	    "replay_complete", "replayed", (json_int_t)cu->replayed)) != 0)
		a->dead = 1;
	/* A closed session's stream ends with its close event. */
	if (s->retired)
		a->dead = 1;
	a->cu = NULL;
	cu->a = NULL;
	catchup_unfan(s);
}

static void	catchup_pump(struct catchup *);

/* Looks at the waiting catch-ups again: those whose client read go on. */
static void
catchup_tick_cb(evutil_socket_t fd, short events, void *arg)
{
	struct catchup	*cu;
	struct timeval	 tv;
	size_t		 half = config_get()->client_queue_bytes / 2;
	unsigned	 tick = ++catchup_tick, moved = 0;

	/* Those that wait again during this pass carry this tick: stop there. */
	catchup_ticking = 1;
	while ((cu = TAILQ_FIRST(&catchup_waiting)) != NULL &&
	    cu->wait_tick != tick) {
		TAILQ_REMOVE(&catchup_waiting, cu, wentry);
		cu->waiting = 0;
		if (cu->a == NULL || conn_queued(cu->a->c) <= half)
			moved++;
		catchup_pump(cu);
	}
	catchup_ticking = 0;
	if (TAILQ_EMPTY(&catchup_waiting))
		return;
	/* Clients that do not read cost fewer and fewer wake-ups. */
	if (moved > 0)
		catchup_poll_ms = SESSION_CATCHUP_POLL_MS;
	else if ((catchup_poll_ms *= 2) > SESSION_CATCHUP_POLL_MAX)
		catchup_poll_ms = SESSION_CATCHUP_POLL_MAX;
	tv.tv_sec = catchup_poll_ms / 1000;
	tv.tv_usec = (catchup_poll_ms % 1000) * 1000;
	evtimer_add(catchup_ev, &tv);
}

/* Waits for the client to read what is queued before sending more. */
static void
catchup_wait(struct catchup *cu)
{
	struct timeval	tv = { 0, SESSION_CATCHUP_POLL_MS * 1000 };

	cu->waiting = 1;
	cu->wait_tick = catchup_tick;
	TAILQ_INSERT_TAIL(&catchup_waiting, cu, wentry);
	if (catchup_ev == NULL &&
	    (catchup_ev = evtimer_new(session_base, catchup_tick_cb, NULL)) == NULL)
		fatalx("evtimer_new failed");
	/* Inside a pass the pass arms the timer, with its back-off. */
	if (catchup_ticking || evtimer_pending(catchup_ev, NULL))
		return;
	catchup_poll_ms = SESSION_CATCHUP_POLL_MS;
	evtimer_add(catchup_ev, &tv);
}

static void	catchup_read_cb(void *, int, const struct disklog_page *);

/* Reads the next page of the disk log for a catch-up. */
static void
catchup_read(struct catchup *cu)
{
	if (disklog_read(cu->lpos, SESSION_CATCHUP_RECORDS,
	    catchup_page_bytes(), catchup_read_cb, cu) != 0) {
		catchup_resync(cu, "the disk log cannot be read now (gbrd is "
		    "stopping)");
		return;
	}
	cu->reading = 1;
	cu->rnext = cu->next;
}

/*
 * A page of the disk log: this session's events from next on go to the
 * client, as long as the ring does not have them (the ring's copy goes
 * later, in order). An event of the session beyond next, or the log's end
 * without next, means the log lost it: resync_required.
 */
static void
catchup_read_cb(void *arg, int error, const struct disklog_page *page)
{
	struct catchup	*cu = arg;
	struct attach	*a = cu->a;
	struct session	*s;
	json_t		*rec, *data;
	const char	*type, *id;
	uint64_t	 seq;
	int64_t		 ts;
	size_t		 i, len;
	char		*line;
	int		 r, gone = 0, stop = 0;

	cu->reading = 0;
	if (a == NULL) {
		catchup_release(cu);
		return;
	}
	s = a->s;
	/* Until the end a detach only unlinks: cu stays for catchup_pump. */
	cu->busy++;
	if (error != 0) {
		log_warn("session %s: catch-up for client %llu: the disk log "
		    "read failed: %s", s->id, (unsigned long long)conn_id(a->c),
		    strerror(error));
		catchup_resync(cu, "the disk log could not be read");
		cu->busy--;
		catchup_pump(cu);
		return;
	}
	s->fanning++;
	json_array_foreach(page->records, i, rec) {
		type = json_string_value(json_object_get(rec, "type"));
		data = json_object_get(rec, "data");
		if (type != NULL && strncmp(type, "session.", 8) == 0 &&
		    payload_head(data, &id, &seq, &ts) == 0 &&
		    strcmp(id, s->id) == 0 && seq >= cu->next) {
			/*
			 * next is older than the ring here (it only reaches
			 * the ring's first seq by the sends below), so a later
			 * event of the session means a hole in the log.
			 */
			if (seq > cu->next) {
				gone = 1;
				break;
			}
			if (seq >= session_ring_first(s)) {
				stop = 1;	/* the rest from the ring */
				break;
			}
			line = session_encode(data, &len);
			r = conn_send_raw(a->c, line, len);
			free(line);
			if (r != 0) {
				a->dead = 1;
				break;
			}
			cu->next++;
			cu->replayed++;
		}
		cu->lpos = (uint64_t)json_integer_value(json_object_get(rec,
		    "seq"));
	}
	/*
	 * rnext was announced, so in the log, when the read began: the whole
	 * log up to then without it means it is gone. (A later next may not
	 * have been written then: the next read finds it.)
	 */
	if (!stop && !gone && !a->dead && cu->next == cu->rnext &&
	    cu->next < session_ring_first(s) &&
	    (!page->more || json_array_size(page->records) == 0))
		gone = 1;
	catchup_unfan(s);
	if (gone && cu->a != NULL)
		catchup_resync(cu, "the events after after_seq are no longer "
		    "kept (a snapshot of the disk log replaced them)");
	cu->busy--;
	catchup_pump(cu);
}

/*
 * Moves a catch-up on as far as it can now: the ring's events while the
 * ring has next, a log read when it does not, a wait when the client's
 * queue is over half full, and the end once next is past the newest event.
 */
static void
catchup_pump(struct catchup *cu)
{
	const struct ring_event	*ev;
	struct attach		*a;
	struct session		*s;
	size_t			 half = config_get()->client_queue_bytes / 2;
	size_t			 page = catchup_page_bytes(), bytes;

	cu->busy++;
	while ((a = cu->a) != NULL && !a->dead && !cu->reading &&
	    !cu->waiting) {
		s = a->s;
		if (cu->next > s->announced) {
			catchup_finish(cu);
			break;
		}
		if (conn_queued(a->c) > half) {
			catchup_wait(cu);
			break;
		}
		if (cu->next < session_ring_first(s)) {
			catchup_read(cu);
			continue;
		}
		s->fanning++;
		for (bytes = 0; cu->next <= s->announced && bytes < page;
		    cu->next++) {
			if ((ev = ring_get(&s->ring, cu->next)) == NULL)
				fatalx("session %s: event %llu is not in the "
				    "ring", s->id, (unsigned long long)cu->next);
			if (conn_send_raw(a->c, ev->line, ev->len) != 0) {
				a->dead = 1;
				break;
			}
			bytes += ev->len;
			cu->replayed++;
		}
		catchup_unfan(s);
	}
	cu->busy--;
	if (cu->a == NULL)
		catchup_release(cu);
}

/*
 * Starts the catch-up of a new attachment: from after + 1 with has_after,
 * else nothing to catch up (live at once, after replay_complete).
 */
void
catchup_start(struct attach *a, int has_after, uint64_t after)
{
	struct session	*s = a->s;
	struct catchup	*cu;

	cu = xcalloc(1, sizeof *cu);
	cu->a = a;
	a->cu = cu;
	catchups_n++;
	cu->next = has_after ? after + 1 : s->announced + 1;
	cu->lpos = logindex_find(&s->lidx, cu->next);
	cu->busy++;
	if (has_after && after > s->announced)
		catchup_resync(cu, "after_seq is ahead of this session (the "
		    "daemon lost its newest events, or this is another session)");
	cu->busy--;
	catchup_pump(cu);
}

/* The number of catch-ups alive, for daemon.status. */
unsigned
catchup_count(void)
{
	return catchups_n;
}

/* Frees the timer; after every attachment is gone (session_shutdown). */
void
catchup_shutdown(void)
{
	if (catchup_ev != NULL)
		event_free(catchup_ev);
	catchup_ev = NULL;
}
