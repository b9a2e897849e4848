/*
 * How a change happens, from the record to the announcement. The caller
 * builds the event's payload {session, seq, ts, type, ...}
 * (session_payload); session_record appends it to the disk log as a
 * "session.*" record and, once the log has taken it, applies it to
 * memory with session_apply (session-log.c: the very function replay
 * uses, so memory and log cannot drift apart) and queues it as pending.
 * When the log reports the record written (or fsynced), the pending
 * entries at the head of the session's queue are announced in seq order:
 * the event line, encoded once, goes to every attached connection and
 * into the session's ring of recent events; then the requests waiting on
 * it are answered. Live-only events (session_live) wait in the same queue
 * so they reach clients in order with the records around them.
 *
 * This file owns the pending queue, its waiters and the encoding of event
 * lines; it does not decide what a change means (session-log.c applies
 * it) nor who hears it (session-attach.c fans it out).
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "disklog.h"
#include "fault.h"
#include "jsonrpc.h"
#include "log.h"
#include "osdep.h"
#include "session.h"
#include "session-int.h"
#include "xmalloc.h"

/* An event line up to its params object (session_encode's encoding). */
#define SESSION_EVENT_HEAD \
	"{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":"

/* The recent events of every session, bounded together. */
struct ring_pool	 session_rings = RING_POOL_INITIALIZER(session_rings);
static int		 session_appending;	/* inside disklog_append */

static void	 session_flush(struct session *);

/* Encodes an event payload as its notification line. */
char *
session_encode(json_t *payload, size_t *len)
{
	json_t	*msg = rpc_notification("event", json_incref(payload));
	char	*line;

	line = rpc_encode(msg, len);
	json_decref(msg);
	return line;
}

/*
 * An event line around a payload as the disk log encoded it (the same
 * bytes session_encode would give), so it is not encoded again. NULL if
 * there is none.
 */
char *
session_wrap(const char *data, size_t n, size_t *len)
{
	static const char	 head[] = SESSION_EVENT_HEAD;
	char			*line;

	if (data == NULL)
		return NULL;
	line = xmalloc(sizeof head - 1 + n + 2);
	memcpy(line, head, sizeof head - 1);
	memcpy(line + sizeof head - 1, data, n);
	memcpy(line + sizeof head - 1 + n, "}\n", 2);
	*len = sizeof head - 1 + n + 2;
	return line;
}

/* The event line of the record just appended. */
static char *
session_wrap_logged(size_t *len)
{
	const char	*data;
	size_t		 n;

	data = disklog_last_payload(&n);
	return session_wrap(data, n, len);
}

/* Returns the first seq that can still be replayed from memory. */
uint64_t
session_ring_first(const struct session *s)
{
	return ring_first(&s->ring, s->announced + 1);
}

/* Keeps an announced event (takes the line) within the [session] bounds. */
void
session_ring_push(struct session *s, uint64_t seq, char *line, size_t len)
{
	const struct config	*cfg = config_get();
	struct ring_limits	 lim;

	lim.events = cfg->session_ring_events;
	lim.bytes = cfg->session_ring_bytes;
	lim.pool_bytes = cfg->session_events_memory;
	ring_push(&session_rings, &s->ring, seq, line, len, &lim);
	s->ring_used_ms = (uint64_t)clock_mono_ms();
}

/* Disk log callback: a record is written; announce what is ready, in order. */
static void
session_logged_cb(void *arg, int error, uint64_t lseq)
{
	struct pending	*pe = arg;

	if (error == 0)
		fault_probe_mark(pe->seq);
	pe->done = 1;
	pe->error = error;
	/* A callback from inside disklog_append waits for the caller to settle. */
	if (!session_appending)
		session_flush(pe->s);
}

/*
 * Appends a change (payload stolen; it already has session, seq, ts and
 * type) and applies it. Returns the pending entry, or NULL if the log
 * would not take it; then nothing changed.
 */
struct pending *
session_record(struct session **sp, const char *rtype, json_t *payload,
    int durable)
{
	struct pending	*pe = xcalloc(1, sizeof *pe);
	uint64_t	 r;

	pe->s = *sp;
	pe->seq = (uint64_t)json_integer_value(json_object_get(payload, "seq"));
	session_appending++;
	r = disklog_append_bounded(rtype, payload, durable, SIZE_MAX,
	    session_logged_cb, pe);
	session_appending--;
	if (r == 0) {
		json_decref(payload);
		free(pe);
		return NULL;
	}
	/* The event line wraps the payload as the log just encoded it. */
	pe->line = session_wrap_logged(&pe->len);
	if (session_apply(rtype, payload, sp) != 0)
		fatalx("session: %s seq %llu was logged but does not apply", rtype,
		    (unsigned long long)pe->seq);
	pe->s = *sp;
	logindex_note(&pe->s->lidx, pe->seq, r);
	if (pe->line == NULL)
		pe->line = session_encode(payload, &pe->len);
	TAILQ_INSERT_TAIL(&pe->s->pending, pe, entry);
	json_decref(payload);
	return pe;
}

/* Announces what a synchronous log callback left ready. */
void
session_settle(struct session *s)
{
	struct pending	*pe = TAILQ_FIRST(&s->pending);

	if (pe != NULL && pe->done)
		session_flush(s);
}

/* Builds an event payload head. */
json_t *
session_payload(struct session *s, const char *type)
{
	return json_pack("{s:s, s:I, s:I, s:s}", "session", s->id,
	    "seq", (json_int_t)(s->seq + 1), "ts", (json_int_t)osdep_now_ms(),
	    "type", type);
}

/* Adds a waiter to a pending record. */
int
pending_wait(struct pending *pe, session_done_cb cb, void *arg, json_t *extra)
{
	struct waiter	*w, **pp;

	if (pe->nwaiters >= SESSION_WAITERS_MAX) {
		json_decref(extra);
		return -1;
	}
	w = xcalloc(1, sizeof *w);
	w->cb = cb;
	w->arg = arg;
	w->extra = extra;
	for (pp = &pe->waiters; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = w;
	pe->nwaiters++;
	return 0;
}

/* Finds a pending record by seq. */
struct pending *
pending_find(struct session *s, uint64_t seq)
{
	struct pending	*pe;

	TAILQ_FOREACH(pe, &s->pending, entry) {
		if (pe->seq == seq)
			return pe;
	}
	return NULL;
}

/* Answers the waiters of a record and frees it. */
static void
pending_finish(struct pending *pe)
{
	struct waiter	*w;
	json_t		*res;

	while ((w = pe->waiters) != NULL) {
		pe->waiters = w->next;
		if (w->cb == session_nobody) {
			/* No copy of the result for nobody (it may be large). */
			json_decref(w->extra);
			free(w);
			continue;
		}
		res = pe->result != NULL ? json_deep_copy(pe->result) : json_object();
		if (w->extra != NULL)
			json_object_update(res, w->extra);
		w->cb(w->arg, pe->error, res);
		json_decref(res);
		json_decref(w->extra);
		free(w);
	}
	json_decref(pe->result);
	free(pe->line);
	free(pe);
}

/* Tells the attached clients that their stream broke. */
static void
session_break(struct session *s, int error)
{
	json_t	*p;
	char	*line;
	size_t	 len;

	if (s->broken)
		return;
	s->broken = 1;
	log_error("session %s: the disk log failed a record (%s); the session "
	    "takes no more changes until gbrd restarts", s->id, strerror(error));
	p = json_pack("{s:s, s:I, s:s, s:s, s:s}", "session", s->id,
	    "seq", (json_int_t)s->announced, "type", "resync_required",
	    "reason", "the disk log failed; events after this seq are unknown",
	    "hint", "restart gbrd, then call session.history and session.attach");
	line = session_encode(p, &len);
	json_decref(p);
	session_fanout(s, line, len);
	free(line);
}

/* Announces every written record at the head of the queue, in seq order. */
static void
session_flush(struct session *s)
{
	struct pending	*pe;

	if (s->flushing)
		return;
	s->flushing = 1;
	while ((pe = TAILQ_FIRST(&s->pending)) != NULL && pe->done) {
		TAILQ_REMOVE(&s->pending, pe, entry);
		if (pe->error != 0)
			session_break(s, pe->error);
		if (!s->broken && pe->live)
			session_fanout(s, pe->line, pe->len);
		else if (!s->broken) {
			session_fanout(s, pe->line, pe->len);
			session_ring_push(s, pe->seq, pe->line, pe->len);
			pe->line = NULL;
			s->announced = pe->seq;
		}
		if (pe->error == 0 && !s->broken && pe->then != NULL)
			pe->then(s, pe->turn);
		pending_finish(pe);
	}
	s->flushing = 0;
	if (s->state == SESSION_CLOSED && TAILQ_EMPTY(&s->pending))
		session_retire(s);
}

/* Fails a call because the log refused a record (nothing changed). */
int
session_fail_storage(struct gbr_error *err)
{
	int	e = disklog_error();

	switch (e) {
	case EAGAIN:
		return gbr_error_set(err, GBR_ERR_BUSY, NULL, "the disk log is "
		    "behind; try again shortly");
	case ESHUTDOWN:
		return gbr_error_set(err, GBR_ERR_SHUTTING_DOWN, NULL,
		    "the daemon is shutting down");
	case EMSGSIZE:
		return gbr_error_set(err, GBR_ERR_TOO_LARGE, NULL,
		    "the change is too large for the disk log");
	default:
		return gbr_error_set(err, GBR_ERR_STORAGE, json_pack("{s:s}",
		    "errno", strerror(e)), "the disk log cannot take the "
		    "change: %s", strerror(e));
	}
}

/* Refuses changes to a session whose log record failed. */
int
session_check_broken(struct session *s, struct gbr_error *err)
{
	if (!s->broken)
		return 0;
	return gbr_error_set(err, GBR_ERR_STORAGE, NULL, "session %s cannot "
	    "change: the disk log failed; restart gbrd", s->id);
}

/* Answers a request that has nothing to wait for. */
void
session_answer(session_done_cb cb, void *arg, json_t *result)
{
	cb(arg, 0, result);
	json_decref(result);
}

/* Answers nobody: for records no request waits on. */
void
session_nobody(void *arg, int error, json_t *result)
{
}

/* Frees one session's pending records, answering their waiters. */
void
session_drop_pending(struct session *s)
{
	struct pending	*pe;

	while ((pe = TAILQ_FIRST(&s->pending)) != NULL) {
		TAILQ_REMOVE(&s->pending, pe, entry);
		if (!pe->done)
			pe->error = ECANCELED;
		pending_finish(pe);
	}
}

/* Waits until what is appended now is announced (see session.h). */
int
session_when_announced(struct session *s, session_done_cb cb, void *arg)
{
	struct pending	*pe = TAILQ_LAST(&s->pending, pending_list);

	if (pe == NULL || pending_wait(pe, cb, arg, NULL) != 0)
		return 0;
	return 1;
}

/*
 * A live event's line. It is sent often (a streamed answer is one per
 * chunk), so the head is written by hand around the encoding of fields
 * alone: the same JSON as a payload of the head fields followed by the
 * others, at a fraction of the cost. NULL if fields cannot be encoded.
 */
static char *
session_live_encode(struct session *s, const char *type, json_t *fields,
    size_t *len)
{
	static const char	*head_keys[] = { "session", "seq", "ts", "type" };
	char			 head[160], *body = NULL, *line;
	size_t			 n, blen = 0, i;
	int			 r;

	r = snprintf(head, sizeof head, SESSION_EVENT_HEAD "{\"session\":\"%s\","
	    "\"seq\":%llu,\"ts\":%lld,\"type\":\"%s\"", s->id,
	    (unsigned long long)s->announced, (long long)osdep_now_ms(), type);
	if (r < 0 || (size_t)r >= sizeof head)
		fatalx("session: live event head too long (%s)", type);
	if (fields != NULL && json_object_size(fields) > 0) {
		for (i = 0; i < sizeof head_keys / sizeof head_keys[0]; i++)
			json_object_del(fields, head_keys[i]);
		if ((body = json_dumps(fields, JSON_COMPACT)) == NULL)
			return NULL;
		blen = strlen(body);
	}
	n = (size_t)r;
	line = xmalloc(n + blen + 3);
	memcpy(line, head, n);
	if (blen > 2) {
		/* ",k:v,...}": fields' own object without its "{". */
		line[n++] = ',';
		memcpy(line + n, body + 1, blen - 1);
		n += blen - 1;
	} else
		line[n++] = '}';
	memcpy(line + n, "}\n", 2);
	*len = n + 2;
	free(body);
	return line;
}

/*
 * The agent loop's access (agent.c). A live-only event: fanned out to
 * the attached clients in order with the records around it, never logged,
 * never kept in the ring (its seq repeats the last one announced).
 */
int
session_live(struct session *s, const char *type, json_t *fields)
{
	struct pending	*pe;
	char		*line;
	size_t		 len;

	if (s->broken || s->state == SESSION_CLOSED) {
		json_decref(fields);
		return -1;
	}
	line = session_live_encode(s, type, fields, &len);
	json_decref(fields);
	if (line == NULL)
		return -1;
	if (TAILQ_EMPTY(&s->pending)) {
		session_fanout(s, line, len);
		free(line);
		return 0;
	}
	/* Behind records not yet announced: it waits its turn. */
	pe = xcalloc(1, sizeof *pe);
	pe->s = s;
	pe->line = line;
	pe->len = len;
	pe->done = 1;
	pe->live = 1;
	TAILQ_INSERT_TAIL(&s->pending, pe, entry);
	session_settle(s);
	return 0;
}
