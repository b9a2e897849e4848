/*
 * Sessions: the state machine, the history, the event sequence and the
 * fan-out of events to attached clients. See session.h for the contract.
 *
 * How a change happens: the caller builds the event's payload
 * {session, seq, ts, type, ...}; session_record appends it to the disk log
 * as a "session.*" record and, once the log has taken it, applies it to
 * memory with session_apply (the very function replay uses, so memory and
 * log cannot drift apart) and queues it as pending. When the log reports
 * the record written (or fsynced), the pending entries at the head of the
 * session's queue are announced in seq order: the event line, encoded
 * once, goes to every attached connection and into the session's ring of
 * recent events; then the requests waiting on it are answered.
 *
 * Bounds, all from the [session] config: open sessions, messages and bytes
 * per history, text per message, events and bytes per ring, bytes of all
 * rings together (the least recently active sessions lose their oldest
 * events first), clients per session, request_ids per session. A client
 * that cannot keep up is evicted by conn.c and simply detached here.
 *
 * Catch-up (session.attach with after_seq). The missed events come from
 * the ring when it still holds them, else from the disk log, where every
 * event is a "session.*" record whose payload is the event itself: a page
 * read there is filtered to this session's records and each one is
 * encoded with session_encode, so the line is byte for byte the one live
 * clients got. To start reading near event N and not at the log's first
 * record, each session keeps a sparse index: the log seq of its first
 * event and of every 64th after it, 128 positions at most (when full,
 * every other one goes and the stride doubles), noted when a record is
 * appended and at replay, and kept in the snapshot. While it catches up
 * an attachment gets no live events (they reach it through the ring or
 * the log instead); the catch-up reads on until the ring covers the rest,
 * sends that, then replay_complete, and goes live in the same callback,
 * so nothing is lost or sent twice. It sends at most a page (1/8 of the
 * client's queue, 256K at most) before it looks at the client's queue
 * again, and waits while that is over half full. When the log no longer
 * has an event it needs (a snapshot replaced the old segments), the
 * client gets resync_required. A catch-up holds its attachment through a
 * struct catchup that a log read in flight keeps alive: detaching,
 * closing the connection or re-attaching only unlinks it, and the read's
 * callback frees it. A closed session stays in memory until the clients
 * still catching up on it have its last event.
 *
 * A turn is the agent loop's (agent.c): once the running state is
 * announced, agent_turn_begin takes it; the agent reads the history
 * (session_messages), streams live-only events (session_live: fanned out
 * in order with the records, never logged), appends messages and ends the
 * turn (session_end_turn). With no provider configured at all the turn is
 * a stub that ends with a no_provider error event. GBR_TEST_TURN_MS (read
 * once at start) keeps the stub turn running that long first, so tests
 * can kill the daemon in the middle of a turn. It only delays an error in
 * a daemon that has no provider, so it is harmless in production.
 *
 * GBR_BENCH_LOGGED_FILE (read once at start) names a file of 8-byte slots
 * shared with a benchmark: when the record of event seq N is logged, its
 * CLOCK_MONOTONIC time in nanoseconds is stored in slot N (if the file has
 * one). It lets bench-fanout time "logged -> last client" exactly; it costs
 * one clock read and one store per record, and nothing when unset.
 */
#include "gbr-config.h"

#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "agent.h"
#include "config.h"
#include "conn.h"
#include "disklog.h"
#include "env.h"
#include "gbrd.h"
#include "jsonfast.h"
#include "jsonrpc.h"
#include "log.h"
#include "osdep.h"
#include "sandbox.h"
#include "session.h"
#include "xmalloc.h"

#define SESSION_ID_LEN		12	/* hex characters */
#define SESSION_NAME_MAX	64
#define SESSION_RID_MAX		128	/* bytes of a request_id */
#define SESSION_WAITERS_MAX	64	/* requests waiting on one record */
#define SESSION_CONN_ATTACH_MAX	64	/* sessions one connection may attach */
#define SESSION_CREATE_RIDS	256	/* request_ids of session.create remembered */
#define SESSION_TURN_MS_MAX	600000
#define SESSION_SNAPSHOT_VERSION 1
#define SESSION_LIDX_STRIDE	64	/* log position of every 64th event at first */
#define SESSION_LIDX_MAX	128	/* positions per session (a power of two) */
#define SESSION_CATCHUP_RECORDS	1024	/* log records per catch-up read */
#define SESSION_CATCHUP_BYTES	(256U * 1024)	/* at most, per page */
#define SESSION_CATCHUP_POLL_MS	10	/* a slow client's queue is looked at again */
#define SESSION_CATCHUP_POLL_MAX 320	/* ... backing off to this */
/* An event line up to its params object (session_encode's encoding). */
#define SESSION_EVENT_HEAD \
	"{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":"

#define SESSION_NO_PROVIDER \
	"No LLM provider is configured yet, so the agent cannot answer. " \
	"Set GEMINI_API_KEY, OPENAI_API_KEY (with OPENAI_BASE_URL for another " \
	"OpenAI-compatible server) or ANTHROPIC_API_KEY in gbrd's environment " \
	"and restart gbrd; or set [llm] provider and key_file (mode 0600) in " \
	"gbrd.conf; or [llm] base_url in the profile for a local server; or " \
	"start Ollama on 127.0.0.1:11434. Your message is kept in the session " \
	"history; tools work through tool.call."

/* A request waiting for a record to be written. */
struct waiter {
	struct waiter	*next;
	session_done_cb	 cb;
	void		*arg;
	json_t		*extra;		/* merged into the result, or NULL */
};

/* A change appended to the log and not yet announced. */
struct pending {
	TAILQ_ENTRY(pending)	 entry;
	struct session		*s;
	uint64_t		 seq;
	uint64_t		 turn;
	char			*line;	/* the event, encoded once */
	size_t			 len;
	int			 done;
	int			 error;
	json_t			*result; /* for the waiters, or NULL */
	struct waiter		*waiters;
	unsigned		 nwaiters;
	/* Runs once the record is announced (never after an error). */
	void			(*then)(struct session *, uint64_t turn);
	int			 live;	/* a live-only event (session_live): no record */
};
TAILQ_HEAD(pending_list, pending);

/* One event kept for catch-up. */
struct ring_event {
	char	*line;
	size_t	 len;
};

/* A remembered request_id of session.send. */
struct rid {
	char		*id;
	uint64_t	 seq;	/* the message it appended */
	uint64_t	 turn;	/* the turn it started */
};

/* A remembered request_id of session.create. */
struct create_rid {
	char	*id;
	char	 session[SESSION_ID_LEN + 1];
};

/* One history message, encoded. */
struct hmsg {
	uint64_t	 seq;
	char		*json;
	size_t		 len;
};

/* A connection attached to a session. */
struct attach {
	TAILQ_ENTRY(attach)	 sentry;	/* the session's list */
	TAILQ_ENTRY(attach)	 gentry;	/* every attachment */
	struct session		*s;
	struct conn		*c;		/* counted reference */
	struct catchup		*cu;		/* catching up: no live events yet */
	int			 dead;		/* to unlink after a fan-out */
};
TAILQ_HEAD(attach_list, attach);

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

struct session {
	char			 id[SESSION_ID_LEN + 1];
	char			*name;		/* NULL if unnamed */
	char			*workspace;
	long			 workspace_uid;	/* its folder's owner when made; -1 */
	char			*env;
	char			*system;	/* the system message's text, or NULL */
	uint64_t		 system_seq;	/* the record that set it */
	struct env		*envp;		/* loaded profile (reload.c), or NULL */
	struct sandbox		*sandbox;	/* built from envp, or NULL */
	enum session_state	 state;
	enum session_state	 prev_state;	/* awaiting_approval goes back to it */
	int			 broken;	/* the log failed a record */
	int			 flushing;
	int			 retired;	/* closed and announced: to be freed */
	int64_t			 created_ms;
	int64_t			 active_ms;
	uint64_t		 seq;		/* last seq given out */
	uint64_t		 announced;	/* last seq announced */
	uint64_t		 turn;		/* last turn started */
	uint64_t		 turn_erred;	/* last turn whose error event is logged */
	int64_t			 tokens_in;	/* LLM tokens of every turn (agent.c) */
	int64_t			 tokens_out;
	int64_t			 last_in;	/* ... of the last turn that counted */
	int64_t			 last_out;

	struct hmsg		*hist;
	size_t			 nhist;
	size_t			 hist_cap;
	uint64_t		 hist_bytes;

	struct ring_event	*ring;		/* circular */
	size_t			 ring_cap;
	size_t			 ring_head;
	size_t			 ring_n;
	uint64_t		 ring_first;	/* seq of ring[ring_head] */
	uint64_t		 ring_bytes;
	int			 in_lru;
	TAILQ_ENTRY(session)	 lru_entry;

	/* Sparse index: log seq of event lidx_base + k * lidx_stride. */
	uint64_t		*lidx;
	uint64_t		 lidx_base;
	uint64_t		 lidx_stride;
	uint32_t		 lidx_n;
	uint32_t		 lidx_cap;

	struct rid		*rids;		/* grows, then circular at rids_max */
	size_t			 rids_cap;
	size_t			 rids_max;	/* set at the first request_id */
	size_t			 rids_n;
	size_t			 rids_next;	/* the slot to use when full */

	struct attach_list	 attached;
	unsigned		 nattached;
	int			 fanning;	/* inside a fan-out: defer unlinks */

	struct pending_list	 pending;
	struct event		*turn_ev;	/* the stub turn's timer */

	struct session		*hnext[2];	/* id and name hash chains */
	TAILQ_ENTRY(session)	 entry;		/* session_all or session_dead */
};
TAILQ_HEAD(session_list, session);

/* A string-keyed hash of sessions, chained through hnext[which]. */
struct smap {
	struct session	**b;
	size_t		  nb;
	size_t		  n;
	int		  which;	/* 0: id, 1: name */
};

static struct smap		 session_ids = { NULL, 0, 0, 0 };
static struct smap		 session_names = { NULL, 0, 0, 1 };
static struct session_list	 session_all = TAILQ_HEAD_INITIALIZER(session_all);
static struct session_list	 session_dead = TAILQ_HEAD_INITIALIZER(session_dead);
static struct session_list	 session_lru = TAILQ_HEAD_INITIALIZER(session_lru);
static struct attach_list	 attach_all = TAILQ_HEAD_INITIALIZER(attach_all);
static unsigned			 attach_n;
static struct create_rid	 create_rids[SESSION_CREATE_RIDS];
static size_t			 create_rids_next;
static uint64_t			 events_memory;
static unsigned			 session_turn_ms;
static int			 session_appending;
static uint64_t			*session_probe;	/* GBR_BENCH_LOGGED_FILE */
static size_t			 session_probe_n;
static struct event		*session_reap_ev;
static struct catchup_list	 catchup_waiting = TAILQ_HEAD_INITIALIZER(catchup_waiting);
static struct event		*catchup_ev;	/* looks at waiting catch-ups again */
static unsigned			 catchup_tick;
static int			 catchup_ticking;	/* inside catchup_tick_cb */
static int			 session_stopping;	/* session_shutdown */
static unsigned			 catchup_poll_ms = SESSION_CATCHUP_POLL_MS;
static unsigned			 catchups_n;

static const char *const session_states[] = {
	[SESSION_IDLE] = "idle",
	[SESSION_RUNNING] = "running",
	[SESSION_AWAITING_APPROVAL] = "awaiting_approval",
	[SESSION_INTERRUPTED] = "interrupted",
	[SESSION_CLOSED] = "closed",
};

static json_t	*session_snapshot(void);
static int	 session_restore(json_t *);
static int	 session_replay(uint64_t, int64_t, const char *, json_t *);
static session_event_observer session_observer;
static void	 session_flush(struct session *);
static void	 session_free(struct session *);
static void	 session_reap_schedule(void);
static void	 catchup_cancel(struct attach *);

static const struct disklog_module session_module = {
	"session", session_snapshot, session_restore, session_replay
};

/* Fills a session_error (see session.h). Returns -1. */
int
session_error_set(struct session_error *err, enum gbr_err kind, json_t *data,
    const char *fmt, ...)
{
	va_list	ap;

	err->kind = kind;
	err->data = data;
	va_start(ap, fmt);
	err->message = xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

/* Returns the name of a state. */
const char *
session_state_name(enum session_state st)
{
	if ((unsigned)st >= sizeof session_states / sizeof session_states[0])
		return "unknown";
	return session_states[st];
}

/* Parses a state name; -1 if unknown. */
static int
session_state_parse(const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < sizeof session_states /
	    sizeof session_states[0]; i++) {
		if (strcmp(session_states[i], name) == 0)
			return (int)i;
	}
	return -1;
}

/* Tells whether s looks like a session id (12 lowercase hex characters). */
static int
session_id_like(const char *s)
{
	size_t	i;

	for (i = 0; s[i] != '\0'; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	}
	return i == SESSION_ID_LEN;
}

/* Names: 1 to 64 of [A-Za-z0-9._-], starting with a letter or digit, not id-like. */
int
session_name_valid(const char *s)
{
	size_t	i;
	char	c;

	for (i = 0; (c = s[i]) != '\0'; i++) {
		if (i >= SESSION_NAME_MAX)
			return 0;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '.' || c == '_' || c == '-'))
			continue;
		return 0;
	}
	return i > 0 && !session_id_like(s);
}

/* request_ids: 1 to 128 printable ASCII characters. */
static int
session_rid_valid(const char *s)
{
	size_t	i;

	for (i = 0; s[i] != '\0'; i++) {
		if (i >= SESSION_RID_MAX || s[i] < 0x21 || s[i] > 0x7e)
			return 0;
	}
	return i > 0;
}

/* FNV-1a. */
static size_t
smap_hash(const char *key)
{
	uint64_t	h = 1469598103934665603ULL;

	while (*key != '\0') {
		h ^= (unsigned char)*key++;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

/* The key of a session in a map. */
static const char *
smap_key(const struct smap *m, const struct session *s)
{
	return m->which == 0 ? s->id : s->name;
}

/* Finds a session by key. */
static struct session *
smap_find(const struct smap *m, const char *key)
{
	struct session	*s;

	if (m->nb == 0)
		return NULL;
	for (s = m->b[smap_hash(key) & (m->nb - 1)]; s != NULL;
	    s = s->hnext[m->which]) {
		if (strcmp(smap_key(m, s), key) == 0)
			return s;
	}
	return NULL;
}

/* Doubles the bucket array. */
static void
smap_grow(struct smap *m)
{
	struct session	**nb, *s, *next;
	size_t		  i, n = m->nb == 0 ? 64 : m->nb * 2, h;

	nb = xcalloc(n, sizeof *nb);
	for (i = 0; i < m->nb; i++) {
		for (s = m->b[i]; s != NULL; s = next) {
			next = s->hnext[m->which];
			h = smap_hash(smap_key(m, s)) & (n - 1);
			s->hnext[m->which] = nb[h];
			nb[h] = s;
		}
	}
	free(m->b);
	m->b = nb;
	m->nb = n;
}

/* Adds a session. */
static void
smap_add(struct smap *m, struct session *s)
{
	size_t	h;

	if (m->n + 1 > m->nb)
		smap_grow(m);
	h = smap_hash(smap_key(m, s)) & (m->nb - 1);
	s->hnext[m->which] = m->b[h];
	m->b[h] = s;
	m->n++;
}

/* Removes a session if present. */
static void
smap_del(struct smap *m, struct session *s)
{
	struct session	**pp;

	if (m->nb == 0)
		return;
	for (pp = &m->b[smap_hash(smap_key(m, s)) & (m->nb - 1)]; *pp != NULL;
	    pp = &(*pp)->hnext[m->which]) {
		if (*pp == s) {
			*pp = s->hnext[m->which];
			s->hnext[m->which] = NULL;
			m->n--;
			return;
		}
	}
}

/* Frees a map's buckets. */
static void
smap_release(struct smap *m)
{
	free(m->b);
	m->b = NULL;
	m->nb = m->n = 0;
}

/* Encodes an event payload as its notification line. */
static char *
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
static char *
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

/* Drops the oldest event of a session's ring. */
static void
ring_drop(struct session *s)
{
	struct ring_event	*ev = &s->ring[s->ring_head];

	s->ring_bytes -= ev->len;
	events_memory -= ev->len;
	free(ev->line);
	ev->line = NULL;
	s->ring_head = (s->ring_head + 1) % s->ring_cap;
	s->ring_n--;
	s->ring_first++;
	if (s->ring_n == 0 && s->in_lru) {
		TAILQ_REMOVE(&session_lru, s, lru_entry);
		s->in_lru = 0;
	}
}

/* Returns the first seq that can still be replayed from memory. */
static uint64_t
ring_avail(const struct session *s)
{
	return s->ring_n > 0 ? s->ring_first : s->announced + 1;
}

/* Returns the line of a seq that is in the ring. */
static const struct ring_event *
ring_get(const struct session *s, uint64_t seq)
{
	return &s->ring[(s->ring_head + (size_t)(seq - s->ring_first)) %
	    s->ring_cap];
}

/*
 * Keeps an announced event (takes the line). Per-session and global bounds
 * drop the oldest events, the least recently active sessions first; the
 * newest event of the session itself always stays.
 */
static void
ring_push(struct session *s, uint64_t seq, char *line, size_t len)
{
	const struct config	*cfg = config_get();
	struct ring_event	*nr;
	struct session		*h;
	size_t			 i, ncap;

	while (s->ring_n > 0 && s->ring_n >= cfg->session_ring_events)
		ring_drop(s);
	if (s->ring_n == 0)
		s->ring_first = seq;
	if (s->ring_n == s->ring_cap) {
		ncap = s->ring_cap == 0 ? 4 : s->ring_cap * 2;
		nr = xcalloc(ncap, sizeof *nr);
		for (i = 0; i < s->ring_n; i++)
			nr[i] = s->ring[(s->ring_head + i) % s->ring_cap];
		free(s->ring);
		s->ring = nr;
		s->ring_cap = ncap;
		s->ring_head = 0;
	}
	nr = &s->ring[(s->ring_head + s->ring_n) % s->ring_cap];
	nr->line = line;
	nr->len = len;
	s->ring_n++;
	s->ring_bytes += len;
	events_memory += len;
	while (s->ring_n > 1 && s->ring_bytes > cfg->session_ring_bytes)
		ring_drop(s);
	if (s->in_lru)
		TAILQ_REMOVE(&session_lru, s, lru_entry);
	TAILQ_INSERT_TAIL(&session_lru, s, lru_entry);
	s->in_lru = 1;
	while (events_memory > cfg->session_events_memory &&
	    (h = TAILQ_FIRST(&session_lru)) != NULL) {
		if (h == s && s->ring_n <= 1)
			break;
		ring_drop(h);
	}
}

/*
 * Remembers where a session's event is in the disk log: the first one
 * noted and every lidx_stride-th after it. At SESSION_LIDX_MAX positions
 * every other one is dropped and the stride doubles, so a session with
 * millions of events holds 1 KiB of positions at most.
 */
static void
lidx_note(struct session *s, uint64_t seq, uint64_t lseq)
{
	uint32_t	i;

	if (s->lidx_n == 0) {
		s->lidx_base = seq;
		s->lidx_stride = SESSION_LIDX_STRIDE;
	} else if (seq < s->lidx_base ||
	    (seq - s->lidx_base) % s->lidx_stride != 0 ||
	    (seq - s->lidx_base) / s->lidx_stride != s->lidx_n)
		return;
	if (s->lidx_n == s->lidx_cap) {
		if (s->lidx_cap >= SESSION_LIDX_MAX) {
			/* seq - base is lidx_n * stride, so it stays a position. */
			for (i = 0; i < s->lidx_n / 2; i++)
				s->lidx[i] = s->lidx[2 * i];
			s->lidx_n /= 2;
			s->lidx_stride *= 2;
		} else {
			s->lidx_cap = s->lidx_cap == 0 ? 2 : s->lidx_cap * 2;
			s->lidx = xreallocarray(s->lidx, s->lidx_cap,
			    sizeof *s->lidx);
		}
	}
	s->lidx[s->lidx_n++] = lseq;
}

/*
 * The log seq to read after to meet a session's event seq (or an earlier
 * one of the session): the nearest position at or before it, else 0, the
 * log's start.
 */
static uint64_t
lidx_find(const struct session *s, uint64_t seq)
{
	uint64_t	k;

	if (s->lidx_n == 0 || seq < s->lidx_base)
		return 0;
	k = (seq - s->lidx_base) / s->lidx_stride;
	if (k >= s->lidx_n)
		k = s->lidx_n - 1;
	return s->lidx[k] - 1;
}

/* The index for a snapshot (new reference). */
static json_t *
lidx_json(const struct session *s)
{
	json_t		*seqs = json_array();
	uint32_t	 i;

	for (i = 0; i < s->lidx_n; i++)
		json_array_append_new(seqs, json_integer((json_int_t)s->lidx[i]));
	return json_pack("{s:I, s:I, s:o}", "base", (json_int_t)s->lidx_base,
	    "stride", (json_int_t)s->lidx_stride, "seqs", seqs);
}

/*
 * Takes the index back from a snapshot (v borrowed, may be NULL). One that
 * does not make sense is dropped: catch-up then reads older events from
 * the log's start, slower but still exact.
 */
static void
lidx_restore(struct session *s, json_t *v)
{
	json_t		*seqs, *x;
	json_int_t	 base, stride;
	uint64_t	 prev = 0;
	size_t		 i, n;

	if (v == NULL)
		return;
	if (json_unpack(v, "{s:I, s:I, s:o}", "base", &base, "stride", &stride,
	    "seqs", &seqs) != 0 || !json_is_array(seqs) || base < 1 ||
	    stride < SESSION_LIDX_STRIDE || stride > ((json_int_t)1 << 40) ||
	    (stride & (stride - 1)) != 0 ||
	    (n = json_array_size(seqs)) == 0 || n > SESSION_LIDX_MAX ||
	    (uint64_t)base + (n - 1) * (uint64_t)stride > s->seq)
		goto bad;
	for (s->lidx_cap = 2; s->lidx_cap < n; s->lidx_cap *= 2)
		;
	s->lidx = xreallocarray(NULL, s->lidx_cap, sizeof *s->lidx);
	json_array_foreach(seqs, i, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 1 ||
		    (uint64_t)json_integer_value(x) <= prev)
			goto bad;
		s->lidx[i] = prev = (uint64_t)json_integer_value(x);
	}
	s->lidx_n = (uint32_t)n;
	s->lidx_base = (uint64_t)base;
	s->lidx_stride = (uint64_t)stride;
	return;
bad:
	free(s->lidx);
	s->lidx = NULL;
	s->lidx_n = s->lidx_cap = 0;
	log_warn("session %s: the snapshot's log index is malformed; older "
	    "events are looked for from the log's start", s->id);
}

/* Unlinks and frees an attachment, or marks it while its session fans out. */
static void
attach_remove(struct attach *a)
{
	struct session	*s = a->s;

	if (a->cu != NULL)
		catchup_cancel(a);
	if (s->fanning > 0) {
		a->dead = 1;
		return;
	}
	TAILQ_REMOVE(&s->attached, a, sentry);
	TAILQ_REMOVE(&attach_all, a, gentry);
	s->nattached--;
	attach_n--;
	conn_unref(a->c);
	free(a);
	/* A closed session waits for its last catching-up client. */
	if (s->retired && s->nattached == 0)
		session_reap_schedule();
}

/* Unlinks the attachments marked during a fan-out. */
static void
attach_sweep(struct session *s)
{
	struct attach	*a, *next;

	for (a = TAILQ_FIRST(&s->attached); a != NULL; a = next) {
		next = TAILQ_NEXT(a, sentry);
		if (a->dead)
			attach_remove(a);
	}
}

/* Queues one line to every attached client; the slow ones are detached. */
static void
session_fanout(struct session *s, const char *line, size_t len)
{
	struct attach	*a;
	int		 dead = 0;

	s->fanning++;
	TAILQ_FOREACH(a, &s->attached, sentry) {
		/* One catching up gets this line from the ring or the log. */
		if (!a->dead && a->cu == NULL &&
		    conn_send_raw(a->c, line, len) != 0)
			a->dead = 1;
		dead |= a->dead;
	}
	if (--s->fanning == 0 && dead)
		attach_sweep(s);
}

/* Sends a client-local event (resync_required, replay_complete) to one connection. */
static int
session_send_local(struct session *s, struct conn *c, json_t *payload)
{
	json_t	*msg = rpc_notification("event", payload);
	int	 r;

	r = conn_send(c, msg);
	json_decref(msg);
	return r;
}

/* Encodes one history message: {seq, ts, role, content, ...}. */
static char *
hist_encode(uint64_t seq, int64_t ts, json_t *message, size_t *len)
{
	json_t	*o;
	char	*buf;

	o = json_pack("{s:I, s:I}", "seq", (json_int_t)seq, "ts", (json_int_t)ts);
	json_object_update_missing(o, message);
	buf = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (buf == NULL)
		fatalx("session: a history message cannot be encoded");
	*len = strlen(buf);
	return buf;
}

/*
 * A history message encoded ahead by session_message, for apply_message
 * to take instead of encoding it again.
 */
static struct {
	struct session	*s;
	uint64_t	 seq;
	char		*json;
	size_t		 len;
} hist_ready;

/* Appends an encoded message to the history. */
static void
hist_append(struct session *s, uint64_t seq, char *json, size_t len)
{
	size_t	ncap;

	if (s->nhist == s->hist_cap) {
		ncap = s->hist_cap == 0 ? 8 : s->hist_cap * 2;
		s->hist = xreallocarray(s->hist, ncap, sizeof *s->hist);
		s->hist_cap = ncap;
	}
	s->hist[s->nhist].seq = seq;
	s->hist[s->nhist].json = json;
	s->hist[s->nhist].len = len;
	s->nhist++;
	s->hist_bytes += len;
}

/*
 * A history message as JSON again (new reference), or NULL. jansson wrote
 * it, NUL bytes in strings as \u0000 (a command's output can hold one),
 * which its parser refuses unless told.
 */
static json_t *
hist_parse(const struct hmsg *h, json_error_t *jerr)
{
	return jsonfast_loadb(h->json, h->len, JSON_ALLOW_NUL, jerr);
}

/* Finds a remembered request_id of session.send. */
static struct rid *
rid_find(struct session *s, const char *id)
{
	size_t	i;

	for (i = 0; i < s->rids_n; i++) {
		if (strcmp(s->rids[i].id, id) == 0)
			return &s->rids[i];
	}
	return NULL;
}

/*
 * Remembers a request_id. The array grows with use up to the limit (an idle
 * session with few requests stays small), then the oldest is forgotten.
 */
static void
rid_remember(struct session *s, const char *id, uint64_t seq, uint64_t turn)
{
	struct rid	*r;
	size_t		 ncap;

	if (s->rids_max == 0)
		s->rids_max = config_get()->session_request_ids;
	if (s->rids_n < s->rids_max) {
		if (s->rids_n == s->rids_cap) {
			ncap = s->rids_cap == 0 ? 4 : s->rids_cap * 2;
			if (ncap > s->rids_max)
				ncap = s->rids_max;
			s->rids = xreallocarray(s->rids, ncap, sizeof *s->rids);
			s->rids_cap = ncap;
		}
		r = &s->rids[s->rids_n++];
		s->rids_next = s->rids_n % s->rids_max;
	} else {
		r = &s->rids[s->rids_next];
		free(r->id);
		s->rids_next = (s->rids_next + 1) % s->rids_max;
	}
	r->id = xstrdup(id);
	r->seq = seq;
	r->turn = turn;
}

/* Finds a remembered request_id of session.create. */
static struct create_rid *
create_rid_find(const char *id)
{
	size_t	i;

	for (i = 0; i < SESSION_CREATE_RIDS; i++) {
		if (create_rids[i].id != NULL && strcmp(create_rids[i].id, id) == 0)
			return &create_rids[i];
	}
	return NULL;
}

/* Remembers a request_id of session.create. */
static void
create_rid_remember(const char *id, const char *session)
{
	struct create_rid	*r = &create_rids[create_rids_next];

	free(r->id);
	r->id = xstrdup(id);
	snprintf(r->session, sizeof r->session, "%s", session);
	create_rids_next = (create_rids_next + 1) % SESSION_CREATE_RIDS;
}

/* Allocates an empty session. */
static struct session *
session_alloc(void)
{
	struct session	*s = xcalloc(1, sizeof *s);

	s->workspace_uid = -1;
	TAILQ_INIT(&s->attached);
	TAILQ_INIT(&s->pending);
	return s;
}

/* Frees a session's memory; it must be off every list but entry. */
static void
session_free(struct session *s)
{
	size_t	i;

	while (s->ring_n > 0)
		ring_drop(s);
	free(s->ring);
	free(s->lidx);
	for (i = 0; i < s->nhist; i++)
		free(s->hist[i].json);
	free(s->hist);
	for (i = 0; i < s->rids_n; i++)
		free(s->rids[i].id);
	free(s->rids);
	if (s->turn_ev != NULL)
		event_free(s->turn_ev);
	free(s->name);
	free(s->workspace);
	free(s->env);
	free(s->system);
	if (s->envp != NULL)
		env_unref(s->envp);
	if (s->sandbox != NULL)
		sandbox_free(s->sandbox);
	free(s);
}

/*
 * Frees the closed sessions, from the loop; one that clients are still
 * catching up on stays until they are done (at shutdown, all go).
 */
static void
session_reap_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s, *next;

	for (s = TAILQ_FIRST(&session_dead); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->nattached > 0 && !session_stopping)
			continue;
		TAILQ_REMOVE(&session_dead, s, entry);
		session_free(s);
	}
}

/* Runs session_reap_cb from the loop. */
static void
session_reap_schedule(void)
{
	if (session_reap_ev == NULL &&
	    (session_reap_ev = event_new(gbrd_base(), -1, 0, session_reap_cb,
	    NULL)) == NULL)
		fatalx("event_new failed");
	event_active(session_reap_ev, EV_TIMEOUT, 0);
}

/*
 * A closed session whose last event is out: detach everyone (those still
 * catching up once they have that event too), free it later.
 */
static void
session_retire(struct session *s)
{
	struct attach	*a, *next;

	if (s->retired)
		return;
	s->retired = 1;
	for (a = TAILQ_FIRST(&s->attached); a != NULL; a = next) {
		next = TAILQ_NEXT(a, sentry);
		if (a->cu == NULL)
			attach_remove(a);
	}
	TAILQ_REMOVE(&session_all, s, entry);
	TAILQ_INSERT_TAIL(&session_dead, s, entry);
	session_reap_schedule();
}

/* Reads a payload's common fields. */
static int
payload_head(json_t *p, const char **id, uint64_t *seq, int64_t *ts)
{
	json_t	*v;

	*id = json_string_value(json_object_get(p, "session"));
	v = json_object_get(p, "seq");
	if (*id == NULL || !json_is_integer(v) || json_integer_value(v) < 1)
		return -1;
	*seq = (uint64_t)json_integer_value(v);
	v = json_object_get(p, "ts");
	*ts = json_is_integer(v) ? json_integer_value(v) : 0;
	return 0;
}

/* A workspace_uid field: the uid, or -1 when absent (older records). */
static long
session_uid_field(const json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 0xffffffffLL)
		return -1;
	return (long)json_integer_value(v);
}

/* Applies session.create. *sp is the live session, or NULL at replay. */
static int
apply_create(struct session **sp, json_t *p, const char *id, int64_t ts)
{
	struct session	*s = *sp;
	const char	*ws, *env, *name, *rid;

	ws = json_string_value(json_object_get(p, "workspace"));
	env = json_string_value(json_object_get(p, "env"));
	name = json_string_value(json_object_get(p, "name"));
	rid = json_string_value(json_object_get(p, "request_id"));
	if (ws == NULL || env == NULL || strlen(id) != SESSION_ID_LEN ||
	    smap_find(&session_ids, id) != NULL ||
	    (name != NULL && smap_find(&session_names, name) != NULL))
		return -1;
	if (s == NULL)
		s = session_alloc();
	snprintf(s->id, sizeof s->id, "%s", id);
	s->name = name != NULL ? xstrdup(name) : NULL;
	s->workspace = xstrdup(ws);
	s->workspace_uid = session_uid_field(json_object_get(p,
	    "workspace_uid"));
	s->env = xstrdup(env);
	if (json_string_value(json_object_get(p, "system")) != NULL) {
		s->system = xstrdup(json_string_value(json_object_get(p, "system")));
		s->system_seq = 1;
	}
	s->state = SESSION_IDLE;
	s->created_ms = ts;
	smap_add(&session_ids, s);
	if (s->name != NULL)
		smap_add(&session_names, s);
	TAILQ_INSERT_TAIL(&session_all, s, entry);
	if (rid != NULL)
		create_rid_remember(rid, s->id);
	*sp = s;
	return 0;
}

/* Applies session.message: one history message. */
static int
apply_message(struct session *s, json_t *p, uint64_t seq, int64_t ts)
{
	json_t		*m = json_object_get(p, "message");
	const char	*rid;
	char		*json;
	size_t		 len;

	if (!json_is_object(m) ||
	    json_string_value(json_object_get(m, "role")) == NULL)
		return -1;
	if (hist_ready.json != NULL && hist_ready.s == s &&
	    hist_ready.seq == seq) {
		/* session_message encoded it already, to check the limits. */
		json = hist_ready.json;
		len = hist_ready.len;
		hist_ready.json = NULL;
	} else
		json = hist_encode(seq, ts, m, &len);
	hist_append(s, seq, json, len);
	rid = json_string_value(json_object_get(p, "request_id"));
	if (rid != NULL)
		rid_remember(s, rid, seq, (uint64_t)json_integer_value(
		    json_object_get(p, "turn")));
	return 0;
}

/* Applies session.state. */
static int
apply_state(struct session *s, json_t *p)
{
	json_t	*t = json_object_get(p, "turn"), *u;
	int	 st, prev;

	st = session_state_parse(json_string_value(json_object_get(p, "state")));
	if (st == -1 || st == SESSION_CLOSED)
		return -1;
	if (st == SESSION_AWAITING_APPROVAL &&
	    s->state != SESSION_AWAITING_APPROVAL) {
		/* Where it goes back to once no approval waits (approval.c). */
		prev = session_state_parse(json_string_value(json_object_get(p,
		    "previous")));
		s->prev_state = prev == -1 || prev == SESSION_CLOSED ||
		    prev == SESSION_AWAITING_APPROVAL ? s->state :
		    (enum session_state)prev;
	}
	s->state = st;
	if (json_is_integer(t) && (uint64_t)json_integer_value(t) > s->turn)
		s->turn = (uint64_t)json_integer_value(t);
	/* The end of an agent turn carries its token usage (agent.c). */
	u = json_object_get(p, "usage");
	if (json_is_integer(json_object_get(u, "input_tokens")) &&
	    json_is_integer(json_object_get(u, "output_tokens"))) {
		s->last_in = json_integer_value(json_object_get(u, "input_tokens"));
		s->last_out = json_integer_value(json_object_get(u,
		    "output_tokens"));
		s->tokens_in += s->last_in;
		s->tokens_out += s->last_out;
	}
	return 0;
}

/*
 * Applies session.env: the environment's name and the system message
 * change; every other message of the history stays as it is.
 */
static int
apply_env(struct session *s, json_t *p, uint64_t seq)
{
	const char	*env = json_string_value(json_object_get(p, "env"));
	const char	*sys = json_string_value(json_object_get(p, "system"));

	if (env == NULL)
		return -1;
	free(s->env);
	s->env = xstrdup(env);
	if (sys != NULL) {
		free(s->system);
		s->system = xstrdup(sys);
		s->system_seq = seq;
	}
	return 0;
}

/* Applies session.close: the session leaves the maps at once. */
static void
apply_close(struct session *s)
{
	s->state = SESSION_CLOSED;
	smap_del(&session_ids, s);
	if (s->name != NULL)
		smap_del(&session_names, s);
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
}

/*
 * Applies one record to memory. Used for live changes (*sp is the session,
 * or the fresh one for a create) and at replay (*sp NULL: found by id).
 */
static int
session_apply(const char *type, json_t *p, struct session **sp)
{
	struct session	*s = *sp;
	const char	*id;
	uint64_t	 seq;
	int64_t		 ts;
	int		 r = 0;

	if (payload_head(p, &id, &seq, &ts) != 0)
		return -1;
	if (strcmp(type, "session.create") == 0) {
		if (seq != 1 || apply_create(&s, p, id, ts) != 0)
			return -1;
	} else {
		if (s == NULL && (s = smap_find(&session_ids, id)) == NULL)
			return -1;
		if (seq != s->seq + 1)
			return -1;
		if (strcmp(type, "session.message") == 0)
			r = apply_message(s, p, seq, ts);
		else if (strcmp(type, "session.state") == 0)
			r = apply_state(s, p);
		else if (strcmp(type, "session.close") == 0)
			apply_close(s);
		else if (strcmp(type, "session.env") == 0)
			r = apply_env(s, p, seq);
		else if (strcmp(type, "session.error") != 0 &&
		    strcmp(type, "session.event") != 0)
			r = -1;
		if (r != 0)
			return -1;
	}
	s->seq = seq;
	if (ts > s->active_ms)
		s->active_ms = ts;
	*sp = s;
	return 0;
}

/* Disk log callback: a record is written; announce what is ready, in order. */
static void
session_logged_cb(void *arg, int error, uint64_t lseq)
{
	struct pending	*pe = arg;
	struct timespec	 ts;

	if (session_probe != NULL && error == 0 && pe->seq < session_probe_n) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		__atomic_store_n(&session_probe[pe->seq], (uint64_t)ts.tv_sec *
		    1000000000u + (uint64_t)ts.tv_nsec, __ATOMIC_RELAXED);
	}
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
static struct pending *
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
	lidx_note(pe->s, pe->seq, r);
	if (pe->line == NULL)
		pe->line = session_encode(payload, &pe->len);
	TAILQ_INSERT_TAIL(&pe->s->pending, pe, entry);
	json_decref(payload);
	return pe;
}

/* Announces what a synchronous log callback left ready. */
static void
session_settle(struct session *s)
{
	struct pending	*pe = TAILQ_FIRST(&s->pending);

	if (pe != NULL && pe->done)
		session_flush(s);
}

/* Builds an event payload head. */
static json_t *
session_payload(struct session *s, const char *type)
{
	return json_pack("{s:s, s:I, s:I, s:s}", "session", s->id,
	    "seq", (json_int_t)(s->seq + 1), "ts", (json_int_t)osdep_now_ms(),
	    "type", type);
}

/* Adds a waiter to a pending record. */
static int
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
static struct pending *
pending_find(struct session *s, uint64_t seq)
{
	struct pending	*pe;

	TAILQ_FOREACH(pe, &s->pending, entry) {
		if (pe->seq == seq)
			return pe;
	}
	return NULL;
}

static void	session_nobody(void *, int, json_t *);

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
			ring_push(s, pe->seq, pe->line, pe->len);
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

/* Returns a session's public fields. */
json_t *
session_info(struct session *s)
{
	json_t	*o;

	o = json_pack("{s:s, s:s?, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "id", s->id, "name", s->name, "workspace", s->workspace,
	    "env", s->env, "state", session_state_name(s->state),
	    "attached", (json_int_t)s->nattached,
	    "created_ms", (json_int_t)s->created_ms,
	    "active_ms", (json_int_t)s->active_ms,
	    "messages", (json_int_t)s->nhist,
	    "seq", (json_int_t)s->announced,
	    "turn", (json_int_t)s->turn);
	json_object_set_new(o, "usage", json_pack("{s:I, s:I, s:{s:I, s:I}}",
	    "input_tokens", (json_int_t)s->tokens_in, "output_tokens",
	    (json_int_t)s->tokens_out, "last_turn", "input_tokens",
	    (json_int_t)s->last_in, "output_tokens", (json_int_t)s->last_out));
	return o;
}

/* Finds an open session by id or by name. */
struct session *
session_find(const char *key)
{
	struct session	*s;

	if ((s = smap_find(&session_ids, key)) != NULL)
		return s;
	return smap_find(&session_names, key);
}

static void	session_turn_timer_cb(evutil_socket_t, short, void *);

/* Arms the turn timer. */
static void
session_turn_timer(struct session *s, unsigned ms)
{
	struct timeval	tv;

	if (s->turn_ev == NULL &&
	    (s->turn_ev = evtimer_new(gbrd_base(), session_turn_timer_cb, s)) == NULL)
		fatalx("evtimer_new failed");
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(s->turn_ev, &tv);
}

/*
 * The stub turn ends: no provider yet. If the log cannot take the records
 * now (it is full or failing), the turn keeps running and this is tried
 * again shortly: memory only changes with a record.
 */
static void
session_turn_end(struct session *s, uint64_t turn)
{
	json_t	*p;

	if (s->state != SESSION_RUNNING || s->turn != turn || s->broken)
		return;
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
	if (s->turn_erred != turn) {
		p = session_payload(s, "error");
		json_object_set_new(p, "turn", json_integer((json_int_t)turn));
		json_object_set_new(p, "kind", json_string("no_provider"));
		json_object_set_new(p, "message", json_string(SESSION_NO_PROVIDER));
		if (session_record(&s, "session.error", p, 0) == NULL)
			goto retry;
		s->turn_erred = turn;
	}
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("idle"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "outcome", json_string("no_provider"));
	if (session_record(&s, "session.state", p, 0) == NULL)
		goto retry;
	return;
retry:
	log_warn("session %s: the disk log refused the end of turn %llu (%s); "
	    "retrying", s->id, (unsigned long long)turn, strerror(disklog_error()));
	session_turn_timer(s, 100);
}

/* The stub turn's timer fired. */
static void
session_turn_timer_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s = arg;

	session_turn_end(s, s->turn);
	session_settle(s);
}

/*
 * No provider: the stub turn (GBR_TEST_TURN_MS keeps it running that
 * long), which ends with a no_provider error.
 */
void
session_turn_stub(struct session *s, uint64_t turn)
{
	if (s->state != SESSION_RUNNING || s->turn != turn)
		return;
	if (session_turn_ms == 0)
		session_turn_end(s, turn);
	else
		session_turn_timer(s, session_turn_ms);
}

/* The running state is announced: the agent loop takes the turn. */
static void
session_turn_begin(struct session *s, uint64_t turn)
{
	if (s->state != SESSION_RUNNING || s->turn != turn)
		return;
	if (agent_turn_begin(s, turn) != 0)
		session_turn_stub(s, turn);
}

/* Fails a call because the log refused a record (nothing changed). */
static int
session_fail_storage(struct session_error *err)
{
	int	e = disklog_error();

	switch (e) {
	case EAGAIN:
		return session_error_set(err, GBR_ERR_BUSY, NULL, "the disk log is "
		    "behind; try again shortly");
	case ESHUTDOWN:
		return session_error_set(err, GBR_ERR_SHUTTING_DOWN, NULL,
		    "the daemon is shutting down");
	case EMSGSIZE:
		return session_error_set(err, GBR_ERR_TOO_LARGE, NULL,
		    "the change is too large for the disk log");
	default:
		return session_error_set(err, GBR_ERR_STORAGE, json_pack("{s:s}",
		    "errno", strerror(e)), "the disk log cannot take the "
		    "change: %s", strerror(e));
	}
}

/* Refuses changes to a session whose log record failed. */
static int
session_check_broken(struct session *s, struct session_error *err)
{
	if (!s->broken)
		return 0;
	return session_error_set(err, GBR_ERR_STORAGE, NULL, "session %s cannot "
	    "change: the disk log failed; restart gbrd", s->id);
}

/* Answers a request that has nothing to wait for. */
static void
session_answer(session_done_cb cb, void *arg, json_t *result)
{
	cb(arg, 0, result);
	json_decref(result);
}

/* Answers with a session's info once its create record is written. */
static int
session_existing(struct session *s, json_t *extra, session_done_cb cb,
    void *arg, struct session_error *err)
{
	struct pending	*pe;
	json_t		*res;

	if ((pe = pending_find(s, 1)) != NULL) {
		if (pending_wait(pe, cb, arg, extra) != 0)
			return session_error_set(err, GBR_ERR_BUSY, NULL,
			    "too many requests wait for this session");
		return 0;
	}
	res = session_info(s);
	json_object_update(res, extra);
	json_decref(extra);
	session_answer(cb, arg, res);
	return 0;
}

/* Makes a new random id that no session has. */
static void
session_new_id(char *id)
{
	unsigned char	r[SESSION_ID_LEN / 2];
	size_t		i;

	do {
		if (osdep_random(r, sizeof r) != 0)
			fatalx("no source of random bytes");
		for (i = 0; i < sizeof r; i++)
			snprintf(id + 2 * i, 3, "%02x", r[i]);
	} while (smap_find(&session_ids, id) != NULL);
}

/* Creates a session (or finds the one to reuse). */
int
session_create(const char *workspace, long uid, const char *env, const char *system,
    const char *name, const char *request_id, int reuse, session_done_cb cb,
    void *arg, struct session_error *err)
{
	const struct config	*cfg = config_get();
	struct create_rid	*cr;
	struct session		*s, *best;
	struct pending		*pe;
	json_t			*p;
	char			 id[SESSION_ID_LEN + 1];

	if (request_id != NULL && !session_rid_valid(request_id))
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "request_id"), "request_id: 1 to %d printable "
		    "characters", SESSION_RID_MAX);
	if (request_id != NULL && (cr = create_rid_find(request_id)) != NULL) {
		if ((s = smap_find(&session_ids, cr->session)) == NULL)
			return session_error_set(err, GBR_ERR_SESSION_NOT_FOUND,
			    json_pack("{s:s}", "session", cr->session),
			    "the session this request created (%s) is closed",
			    cr->session);
		return session_existing(s, json_pack("{s:b, s:b}", "created", 1,
		    "duplicate", 1), cb, arg, err);
	}
	if (reuse) {
		best = NULL;
		if (name != NULL)
			best = smap_find(&session_names, name);
		else {
			TAILQ_FOREACH(s, &session_all, entry) {
				if (s->state == SESSION_CLOSED ||
				    strcmp(s->workspace, workspace) != 0 ||
				    (env != NULL && strcmp(s->env, env) != 0))
					continue;
				if (best == NULL || s->active_ms >= best->active_ms)
					best = s;
			}
		}
		if (best != NULL && strcmp(best->workspace, workspace) != 0)
			return session_error_set(err, GBR_ERR_ALREADY_EXISTS,
			    json_pack("{s:s, s:s}", "name", name, "workspace",
			    best->workspace), "session '%s' exists on another "
			    "workspace (%s)", name, best->workspace);
		if (best != NULL)
			return session_existing(best, json_pack("{s:b}",
			    "created", 0), cb, arg, err);
	}
	if (name != NULL && smap_find(&session_names, name) != NULL)
		return session_error_set(err, GBR_ERR_ALREADY_EXISTS,
		    json_pack("{s:s}", "name", name),
		    "a session named '%s' exists", name);
	if (session_ids.n >= cfg->session_max)
		return session_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s, s:I}", "limit", "max_sessions", "max",
		    (json_int_t)cfg->session_max),
		    "%u sessions are open, the configured maximum; close one "
		    "first", cfg->session_max);
	session_new_id(id);
	p = json_pack("{s:s, s:I, s:I, s:s}", "session", id, "seq", (json_int_t)1,
	    "ts", (json_int_t)osdep_now_ms(), "type", "session.created");
	if (name != NULL)
		json_object_set_new(p, "name", json_string(name));
	json_object_set_new(p, "workspace", json_string(workspace));
	json_object_set_new(p, "workspace_uid", json_integer((json_int_t)uid));
	json_object_set_new(p, "env", json_string(env != NULL ? env : "default"));
	if (system != NULL)
		json_object_set_new(p, "system", json_string(system));
	if (request_id != NULL)
		json_object_set_new(p, "request_id", json_string(request_id));
	s = session_alloc();
	if ((pe = session_record(&s, "session.create", p, 1)) == NULL) {
		session_free(s);
		return session_fail_storage(err);
	}
	log_info("session %s created on %s%s%s", s->id, s->workspace,
	    s->name != NULL ? " as " : "", s->name != NULL ? s->name : "");
	pe->result = session_info(s);
	json_object_set_new(pe->result, "created", json_true());
	pending_wait(pe, cb, arg, NULL);
	session_settle(s);
	return 0;
}

/* Appends the user's message and starts a turn. */
int
session_send(struct session *s, const char *text, const char *request_id,
    session_done_cb cb, void *arg, struct session_error *err)
{
	const struct config	*cfg = config_get();
	struct pending		*pe;
	struct rid		*r;
	json_t			*p, *m;
	char			*enc;
	size_t			 len, tlen = strlen(text);
	uint64_t		 turn;

	if (request_id != NULL && !session_rid_valid(request_id))
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "request_id"), "request_id: 1 to %d printable "
		    "characters", SESSION_RID_MAX);
	if (request_id != NULL && (r = rid_find(s, request_id)) != NULL) {
		/* A resend: the first result, nothing started. */
		p = json_pack("{s:b}", "duplicate", 1);
		if ((pe = pending_find(s, r->seq)) != NULL) {
			if (pending_wait(pe, cb, arg, p) != 0)
				return session_error_set(err, GBR_ERR_BUSY, NULL,
				    "too many resends wait for this message");
			return 0;
		}
		session_answer(cb, arg, json_pack("{s:s, s:I, s:I, s:b}",
		    "session", s->id, "seq", (json_int_t)r->seq,
		    "turn", (json_int_t)r->turn, "duplicate", 1));
		json_decref(p);
		return 0;
	}
	if (session_check_broken(s, err) != 0)
		return -1;
	if (tlen == 0)
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "text"), "text: must not be empty");
	if (tlen > cfg->session_max_text_bytes)
		return session_error_set(err, GBR_ERR_TOO_LARGE, json_pack("{s:s, s:I}",
		    "field", "text", "max_bytes",
		    (json_int_t)cfg->session_max_text_bytes),
		    "text: %zu bytes, over the limit of %zu", tlen,
		    cfg->session_max_text_bytes);
	if (s->state != SESSION_IDLE && s->state != SESSION_INTERRUPTED)
		return session_error_set(err, GBR_ERR_BUSY, json_pack("{s:s}", "state",
		    session_state_name(s->state)), "session %s is %s; wait for "
		    "the turn to end or cancel it", s->id,
		    session_state_name(s->state));
	if (s->nhist + 1 > cfg->session_history_messages)
		return session_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s, s:I}", "limit", "history_messages", "max",
		    (json_int_t)cfg->session_history_messages), "the history of "
		    "session %s is full (%zu messages); start a new session",
		    s->id, s->nhist);
	/* The exact size the history entry will have, before anything changes. */
	p = session_payload(s, "message");
	m = json_pack("{s:s, s:s}", "role", "user", "content", text);
	enc = hist_encode(s->seq + 1, json_integer_value(json_object_get(p,
	    "ts")), m, &len);
	free(enc);
	if (s->hist_bytes + len > cfg->session_history_bytes) {
		json_decref(m);
		json_decref(p);
		return session_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s, s:I}", "limit", "history_bytes", "max",
		    (json_int_t)cfg->session_history_bytes), "the history of "
		    "session %s is full (%llu bytes); start a new session",
		    s->id, (unsigned long long)s->hist_bytes);
	}
	turn = s->turn + 1;
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "message", m);
	if (request_id != NULL)
		json_object_set_new(p, "request_id", json_string(request_id));
	if ((pe = session_record(&s, "session.message", p, 1)) == NULL)
		return session_fail_storage(err);
	pe->result = json_pack("{s:s, s:I, s:I}", "session", s->id,
	    "seq", (json_int_t)pe->seq, "turn", (json_int_t)turn);
	pending_wait(pe, cb, arg, NULL);

	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("running"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	if ((pe = session_record(&s, "session.state", p, 0)) == NULL)
		log_warn("session %s: the disk log refused the start of turn "
		    "%llu (%s); the message is kept, no turn runs", s->id,
		    (unsigned long long)turn, strerror(disklog_error()));
	else {
		pe->turn = turn;
		pe->then = session_turn_begin;
	}
	session_settle(s);
	return 0;
}

/* Ends the running turn. */
int
session_cancel(struct session *s, session_done_cb cb, void *arg,
    struct session_error *err)
{
	struct pending	*pe;
	json_t		*p;

	if (s->state != SESSION_RUNNING && s->state != SESSION_AWAITING_APPROVAL) {
		session_answer(cb, arg, json_pack("{s:b, s:s}", "cancelled", 0,
		    "state", session_state_name(s->state)));
		return 0;
	}
	if (session_check_broken(s, err) != 0)
		return -1;
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("idle"));
	json_object_set_new(p, "turn", json_integer((json_int_t)s->turn));
	json_object_set_new(p, "outcome", json_string("cancelled"));
	if ((pe = session_record(&s, "session.state", p, 1)) == NULL)
		return session_fail_storage(err);
	/* The model's stream, the tool and the timers stop at once. */
	agent_cancel(s);
	pe->result = json_pack("{s:b, s:I}", "cancelled", 1,
	    "turn", (json_int_t)s->turn);
	pending_wait(pe, cb, arg, NULL);
	session_settle(s);
	return 0;
}

/* Closes a session. */
int
session_close(struct session *s, session_done_cb cb, void *arg,
    struct session_error *err)
{
	struct pending	*pe;
	json_t		*p;

	if (session_check_broken(s, err) != 0)
		return -1;
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("closed"));
	json_object_set_new(p, "turn", json_integer((json_int_t)s->turn));
	if ((pe = session_record(&s, "session.close", p, 1)) == NULL)
		return session_fail_storage(err);
	agent_cancel(s);
	log_info("session %s closed", s->id);
	pe->result = json_pack("{s:s, s:b}", "session", s->id, "closed", 1);
	pending_wait(pe, cb, arg, NULL);
	session_settle(s);
	return 0;
}

/* Finds the attachment of a connection to a session. */
static struct attach *
attach_find(struct session *s, struct conn *c)
{
	struct attach	*a;

	TAILQ_FOREACH(a, &s->attached, sentry) {
		if (a->c == c && !a->dead)
			return a;
	}
	return NULL;
}

/* Counts a connection's attachments. */
static unsigned
attach_count(struct conn *c)
{
	struct attach	*a;
	unsigned	 n = 0;

	TAILQ_FOREACH(a, &attach_all, gentry) {
		if (a->c == c && !a->dead)
			n++;
	}
	return n;
}

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
static void
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
	    "first_seq", (json_int_t)ring_avail(s), "reason", why,
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
	    (catchup_ev = evtimer_new(gbrd_base(), catchup_tick_cb, NULL)) == NULL)
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
			if (seq >= ring_avail(s)) {
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
	    cu->next < ring_avail(s) &&
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
		if (cu->next < ring_avail(s)) {
			catchup_read(cu);
			continue;
		}
		s->fanning++;
		for (bytes = 0; cu->next <= s->announced && bytes < page;
		    cu->next++) {
			ev = ring_get(s, cu->next);
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
 * Attaches a connection: the reply, the missed events (from the ring, else
 * from the disk log), replay_complete, then live. See the catch-up
 * paragraph at the top of this file.
 */
int
session_attach(struct session *s, struct conn *c, int has_after,
    uint64_t after, session_done_cb cb, void *arg, struct session_error *err)
{
	const struct config	*cfg = config_get();
	struct attach		*a;
	struct catchup		*cu;
	json_t			*res;

	if (conn_closing(c))
		return session_error_set(err, GBR_ERR_INVALID_REQUEST, NULL,
		    "the connection is closing");
	if ((a = attach_find(s, c)) != NULL)
		attach_remove(a);	/* attaching again restarts the stream */
	else {
		if (s->nattached >= cfg->session_max_attached)
			return session_error_set(err, GBR_ERR_LIMIT_REACHED,
			    json_pack("{s:s, s:I}", "limit", "max_attached", "max",
			    (json_int_t)cfg->session_max_attached), "%u clients "
			    "are attached to session %s, the configured maximum",
			    s->nattached, s->id);
		if (attach_count(c) >= SESSION_CONN_ATTACH_MAX)
			return session_error_set(err, GBR_ERR_LIMIT_REACHED,
			    json_pack("{s:s, s:I}", "limit", "attach_per_connection",
			    "max", (json_int_t)SESSION_CONN_ATTACH_MAX), "this "
			    "connection is attached to %d sessions already",
			    SESSION_CONN_ATTACH_MAX);
	}
	res = json_pack("{s:o, s:I, s:I}", "session", session_info(s),
	    "seq", (json_int_t)s->announced, "first_seq",
	    (json_int_t)ring_avail(s));
	session_answer(cb, arg, res);

	/*
	 * The attachment is linked at once but catching up: live events skip
	 * it until catchup_finish, which runs in the same callback that sends
	 * the newest event, so nothing can slip in between.
	 */
	a = xcalloc(1, sizeof *a);
	a->s = s;
	a->c = c;
	conn_ref(c);
	TAILQ_INSERT_TAIL(&s->attached, a, sentry);
	TAILQ_INSERT_TAIL(&attach_all, a, gentry);
	s->nattached++;
	attach_n++;
	cu = xcalloc(1, sizeof *cu);
	cu->a = a;
	a->cu = cu;
	catchups_n++;
	cu->next = has_after ? after + 1 : s->announced + 1;
	cu->lpos = lidx_find(s, cu->next);
	cu->busy++;
	if (has_after && after > s->announced)
		catchup_resync(cu, "after_seq is ahead of this session (the "
		    "daemon lost its newest events, or this is another session)");
	cu->busy--;
	catchup_pump(cu);
	return 0;
}

/* Detaches a connection from one session or from all. */
unsigned
session_detach(struct session *s, struct conn *c)
{
	struct attach	*a, *next;
	unsigned	 n = 0;

	for (a = TAILQ_FIRST(&attach_all); a != NULL; a = next) {
		next = TAILQ_NEXT(a, gentry);
		if (a->c != c || a->dead || (s != NULL && a->s != s))
			continue;
		attach_remove(a);
		n++;
	}
	return n;
}

/* A connection closed. */
void
session_conn_closed(struct conn *c)
{
	session_detach(NULL, c);
}

/* True if s is open and, when workspace is given, on it. */
static int
session_listed(const struct session *s, const char *workspace)
{
	return s->state != SESSION_CLOSED &&
	    (workspace == NULL || strcmp(s->workspace, workspace) == 0);
}

/* Lists the open sessions. */
json_t *
session_list(const char *workspace)
{
	struct session	*s;
	json_t		*a = json_array();

	TAILQ_FOREACH(s, &session_all, entry) {
		if (session_listed(s, workspace))
			json_array_append_new(a, session_info(s));
	}
	return a;
}

/* The ids of the open sessions, of one workspace or all. */
json_t *
session_open_ids(const char *workspace)
{
	struct session	*s;
	json_t		*a = json_array();

	TAILQ_FOREACH(s, &session_all, entry) {
		if (session_listed(s, workspace))
			json_array_append_new(a, json_string(s->id));
	}
	return a;
}

/*
 * Returns the last messages of a history before a seq, as far as announced
 * and as many as fit in half a client's output queue (so the reply itself
 * never evicts the client); "more" says older ones exist.
 */
json_t *
session_history(struct session *s, size_t limit, uint64_t before)
{
	json_t		*msgs = json_array(), *m;
	json_error_t	 jerr;
	size_t		 end = s->nhist, start, i, total, bytes = 0;
	size_t		 max = config_get()->client_queue_bytes / 2;

	/* A message not yet announced would reach the client twice. */
	while (end > 0 && s->hist[end - 1].seq > s->announced)
		end--;
	total = end;
	while (end > 0 && before != 0 && s->hist[end - 1].seq >= before)
		end--;
	for (start = end; start > 0 && end - start < limit; start--) {
		if (start < end && bytes + s->hist[start - 1].len > max)
			break;
		bytes += s->hist[start - 1].len;
	}
	for (i = start; i < end; i++) {
		m = hist_parse(&s->hist[i], &jerr);
		if (m == NULL)
			fatalx("session %s: history message %zu does not parse",
			    s->id, i);
		json_array_append_new(msgs, m);
	}
	return json_pack("{s:s, s:I, s:I, s:b, s:o, s:o}", "session", s->id,
	    "seq", (json_int_t)s->announced, "total", (json_int_t)total,
	    "more", start > 0, "messages", msgs, "system",
	    s->system == NULL ? json_null() : json_pack("{s:s, s:s, s:s, s:I}",
	    "role", "system", "content", s->system, "env", s->env,
	    "seq", (json_int_t)s->system_seq));
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

/* Counters for daemon.status. */
json_t *
session_status(void)
{
	const struct config	*cfg = config_get();

	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
	    "open", (json_int_t)session_ids.n,
	    "max", (json_int_t)cfg->session_max,
	    "attached", (json_int_t)attach_n,
	    "catching_up", (json_int_t)catchups_n,
	    "events_memory_bytes", (json_int_t)events_memory,
	    "events_memory_max", (json_int_t)cfg->session_events_memory);
}

/* Disk log: the live state of every open session. */
static json_t *
session_snapshot(void)
{
	struct session	*s;
	json_t		*sessions = json_array(), *o, *hist, *rids, *crids, *m;
	json_error_t	 jerr;
	size_t		 i, k;

	TAILQ_FOREACH(s, &session_all, entry) {
		if (s->state == SESSION_CLOSED)
			continue;
		hist = json_array();
		for (i = 0; i < s->nhist; i++) {
			m = hist_parse(&s->hist[i], &jerr);
			if (m == NULL)
				fatalx("session %s: history does not parse", s->id);
			json_array_append_new(hist, m);
		}
		rids = json_array();
		for (i = 0; i < s->rids_n; i++) {
			/* Oldest first: from 0 while growing, from rids_next when full. */
			k = s->rids_n < s->rids_max ? i :
			    (s->rids_next + i) % s->rids_max;
			json_array_append_new(rids, json_pack("[s, I, I]",
			    s->rids[k].id, (json_int_t)s->rids[k].seq,
			    (json_int_t)s->rids[k].turn));
		}
		o = json_pack("{s:s, s:s?, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}",
		    "id", s->id, "name", s->name, "workspace", s->workspace,
		    "env", s->env, "state", session_state_name(s->state),
		    "created_ms", (json_int_t)s->created_ms,
		    "active_ms", (json_int_t)s->active_ms,
		    "seq", (json_int_t)s->seq, "turn", (json_int_t)s->turn,
		    "history", hist, "request_ids", rids);
		if (s->system != NULL) {
			json_object_set_new(o, "system", json_string(s->system));
			json_object_set_new(o, "system_seq",
			    json_integer((json_int_t)s->system_seq));
		}
		if (s->workspace_uid >= 0)
			json_object_set_new(o, "workspace_uid",
			    json_integer((json_int_t)s->workspace_uid));
		if (s->state == SESSION_AWAITING_APPROVAL)
			json_object_set_new(o, "previous_state", json_string(
			    session_state_name(s->prev_state)));
		if (s->tokens_in != 0 || s->tokens_out != 0)
			json_object_set_new(o, "usage", json_pack("[I, I, I, I]",
			    (json_int_t)s->tokens_in, (json_int_t)s->tokens_out,
			    (json_int_t)s->last_in, (json_int_t)s->last_out));
		if (s->lidx_n > 0)
			json_object_set_new(o, "log_index", lidx_json(s));
		json_array_append_new(sessions, o);
	}
	crids = json_array();
	for (i = 0; i < SESSION_CREATE_RIDS; i++) {
		k = (create_rids_next + i) % SESSION_CREATE_RIDS;
		if (create_rids[k].id != NULL)
			json_array_append_new(crids, json_pack("[s, s]",
			    create_rids[k].id, create_rids[k].session));
	}
	return json_pack("{s:i, s:o, s:o}", "version", SESSION_SNAPSHOT_VERSION,
	    "sessions", sessions, "create_request_ids", crids);
}

/* Rebuilds one session from a snapshot. */
static int
session_restore_one(json_t *o)
{
	struct session	*s;
	json_t		*hist, *rids, *m, *v, *jname = NULL;
	const char	*id, *name = NULL, *ws, *env, *state;
	json_int_t	 created, active, seq, turn;
	size_t		 i, len;
	int		 st;
	char		*enc;

	/* An unnamed session's name is written as null ("s:s?"). */
	if (json_unpack(o, "{s:s, s?o, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}",
	    "id", &id, "name", &jname, "workspace", &ws, "env", &env,
	    "state", &state, "created_ms", &created, "active_ms", &active,
	    "seq", &seq, "turn", &turn, "history", &hist, "request_ids", &rids) != 0 ||
	    (jname != NULL && !json_is_null(jname) && !json_is_string(jname)))
		return -1;
	name = json_string_value(jname);
	if (strlen(id) != SESSION_ID_LEN || seq < 1 || turn < 0 ||
	    !json_is_array(hist) || !json_is_array(rids) ||
	    (st = session_state_parse(state)) == -1 || st == SESSION_CLOSED ||
	    smap_find(&session_ids, id) != NULL ||
	    (name != NULL && smap_find(&session_names, name) != NULL))
		return -1;
	s = session_alloc();
	snprintf(s->id, sizeof s->id, "%s", id);
	s->name = name != NULL ? xstrdup(name) : NULL;
	s->workspace = xstrdup(ws);
	s->workspace_uid = session_uid_field(json_object_get(o, "workspace_uid"));
	s->env = xstrdup(env);
	if ((v = json_object_get(o, "system")) != NULL && json_is_string(v)) {
		s->system = xstrdup(json_string_value(v));
		s->system_seq = (uint64_t)json_integer_value(json_object_get(o,
		    "system_seq"));
	}
	s->state = st;
	s->prev_state = SESSION_IDLE;
	if ((st = session_state_parse(json_string_value(json_object_get(o,
	    "previous_state")))) != -1 && st != SESSION_CLOSED &&
	    st != SESSION_AWAITING_APPROVAL)
		s->prev_state = st;
	s->created_ms = created;
	s->active_ms = active;
	{
		json_int_t	u[4];

		if (json_unpack(json_object_get(o, "usage"), "[I, I, I, I]",
		    &u[0], &u[1], &u[2], &u[3]) == 0) {
			s->tokens_in = u[0];
			s->tokens_out = u[1];
			s->last_in = u[2];
			s->last_out = u[3];
		}
	}
	s->seq = s->announced = (uint64_t)seq;
	s->turn = (uint64_t)turn;
	lidx_restore(s, json_object_get(o, "log_index"));
	smap_add(&session_ids, s);
	if (s->name != NULL)
		smap_add(&session_names, s);
	TAILQ_INSERT_TAIL(&session_all, s, entry);
	json_array_foreach(hist, i, m) {
		v = json_object_get(m, "seq");
		if (!json_is_object(m) || !json_is_integer(v))
			return -1;
		enc = json_dumps(m, JSON_COMPACT);
		if (enc == NULL)
			return -1;
		len = strlen(enc);
		hist_append(s, (uint64_t)json_integer_value(v), enc, len);
	}
	json_array_foreach(rids, i, m) {
		const char	*rid;
		json_int_t	 rseq, rturn;

		if (json_unpack(m, "[s, I, I]", &rid, &rseq, &rturn) != 0)
			return -1;
		rid_remember(s, rid, (uint64_t)rseq, (uint64_t)rturn);
	}
	return 0;
}

/* Disk log: the newest snapshot's state. */
static int
session_restore(json_t *state)
{
	json_t		*sessions, *crids, *o;
	json_int_t	 version;
	const char	*rid, *sid;
	size_t		 i;

	if (json_unpack(state, "{s:I, s:o, s:o}", "version", &version,
	    "sessions", &sessions, "create_request_ids", &crids) != 0 ||
	    version != SESSION_SNAPSHOT_VERSION || !json_is_array(sessions) ||
	    !json_is_array(crids)) {
		log_error("session snapshot: unknown layout");
		return -1;
	}
	json_array_foreach(sessions, i, o) {
		if (session_restore_one(o) != 0) {
			log_error("session snapshot: session %zu is malformed", i);
			return -1;
		}
	}
	json_array_foreach(crids, i, o) {
		if (json_unpack(o, "[s, s]", &rid, &sid) != 0)
			return -1;
		create_rid_remember(rid, sid);
	}
	log_info("restored %zu sessions from the snapshot", json_array_size(sessions));
	return 0;
}

/* Sets the replay observer of event records (see session.h). */
void
session_observe_events(session_event_observer fn)
{
	session_observer = fn;
}

/* Disk log: one record after the snapshot. */
static int
session_replay(uint64_t lseq, int64_t ts, const char *type, json_t *payload)
{
	struct session	*s = NULL;
	const char	*data;
	char		*line;
	size_t		 len, dlen;

	if (session_apply(type, payload, &s) != 0) {
		log_error("disk log record %llu (%s) does not fit the sessions "
		    "replayed so far", (unsigned long long)lseq, type);
		return -1;
	}
	lidx_note(s, s->seq, lseq);
	if (session_observer != NULL && strcmp(type, "session.event") == 0)
		session_observer(payload);
	data = disklog_replay_payload(&dlen);
	if ((line = session_wrap(data, dlen, &len)) == NULL)
		line = session_encode(payload, &len);
	ring_push(s, s->seq, line, len);
	s->announced = s->seq;
	if (s->state == SESSION_CLOSED) {
		TAILQ_REMOVE(&session_all, s, entry);
		session_free(s);
	}
	return 0;
}

/* Maps the bench probe's file (GBR_BENCH_LOGGED_FILE), if one is named. */
static void
session_probe_init(void)
{
	const char	*path = getenv("GBR_BENCH_LOGGED_FILE");
	struct stat	 sb;
	void		*map;
	int		 fd;

	if (path == NULL || *path == '\0')
		return;
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1 || fstat(fd, &sb) != 0 ||
	    !S_ISREG(sb.st_mode) || sb.st_size < 8) {
		log_warn("GBR_BENCH_LOGGED_FILE=%s ignored: %s", path,
		    fd == -1 ? strerror(errno) : "not a regular file of 8+ bytes");
		if (fd != -1)
			close(fd);
		return;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		log_warn("GBR_BENCH_LOGGED_FILE=%s ignored: mmap: %s", path,
		    strerror(errno));
		return;
	}
	session_probe = map;
	session_probe_n = (size_t)sb.st_size / sizeof *session_probe;
	log_warn("bench probe: logged times go to %s (GBR_BENCH_LOGGED_FILE)",
	    path);
}

/* Registers with the disk log and reads the test hooks. */
void
session_init(void)
{
	const char	*v = getenv("GBR_TEST_TURN_MS");
	char		*end;
	long		 ms;

	session_probe_init();

	if (v != NULL && *v != '\0') {
		errno = 0;
		ms = strtol(v, &end, 10);
		if (errno != 0 || *end != '\0' || ms < 0 || ms > SESSION_TURN_MS_MAX)
			log_warn("GBR_TEST_TURN_MS=%s ignored: expected 0 to %d", v,
			    SESSION_TURN_MS_MAX);
		else {
			session_turn_ms = (unsigned)ms;
			log_warn("test hook: stub turns last %u ms "
			    "(GBR_TEST_TURN_MS)", session_turn_ms);
		}
	}
	disklog_register(&session_module);
}

/* Marks the turns that were running when the daemon stopped as interrupted. */
void
session_recover(void)
{
	struct session	*s;
	json_t		*p;
	unsigned	 n = 0;

	TAILQ_FOREACH(s, &session_all, entry) {
		/* A turn waiting for a human died with the daemon too. */
		if (s->state == SESSION_AWAITING_APPROVAL &&
		    s->prev_state == SESSION_RUNNING)
			s->prev_state = SESSION_INTERRUPTED;
		if (s->state != SESSION_RUNNING)
			continue;
		p = session_payload(s, "session.state");
		json_object_set_new(p, "state", json_string("interrupted"));
		json_object_set_new(p, "turn", json_integer((json_int_t)s->turn));
		json_object_set_new(p, "reason", json_string("the daemon stopped "
		    "during this turn; nothing was re-run"));
		if (session_record(&s, "session.state", p, 0) == NULL)
			log_error("session %s: cannot mark turn %llu interrupted: "
			    "%s", s->id, (unsigned long long)s->turn,
			    strerror(disklog_error()));
		n++;
	}
	TAILQ_FOREACH(s, &session_all, entry)
		session_settle(s);
	if (session_ids.n > 0)
		log_info("%zu sessions open, %u interrupted turns", session_ids.n, n);
}

/* Frees one session's pending records, answering their waiters. */
static void
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

/* Frees everything. */
void
session_shutdown(void)
{
	struct attach	*a;
	struct session	*s;
	size_t		 i;

	/*
	 * disklog_close ran every read callback already, so no catch-up is
	 * held by a read: removing the attachments frees them all.
	 */
	session_stopping = 1;
	while ((a = TAILQ_FIRST(&attach_all)) != NULL) {
		a->s->fanning = 0;
		attach_remove(a);
	}
	if (catchup_ev != NULL)
		event_free(catchup_ev);
	catchup_ev = NULL;
	while ((s = TAILQ_FIRST(&session_all)) != NULL) {
		TAILQ_REMOVE(&session_all, s, entry);
		session_drop_pending(s);
		session_free(s);
	}
	session_reap_cb(-1, 0, NULL);
	if (session_reap_ev != NULL)
		event_free(session_reap_ev);
	session_reap_ev = NULL;
	smap_release(&session_ids);
	smap_release(&session_names);
	for (i = 0; i < SESSION_CREATE_RIDS; i++) {
		free(create_rids[i].id);
		create_rids[i].id = NULL;
	}
}

/* The id of a session (borrowed). */
const char *
session_id(const struct session *s)
{
	return s->id;
}

/* The owner (uid) of the workspace's folder when the session was made, or -1. */
long
session_workspace_uid(const struct session *s)
{
	return s->workspace_uid;
}

/* The canonical workspace of a session (borrowed). */
const char *
session_workspace(const struct session *s)
{
	return s->workspace;
}

/* The name of the session's environment (borrowed). */
const char *
session_env_name(const struct session *s)
{
	return s->env;
}

/* The loaded environment and its sandbox (borrowed; either may be NULL). */
void
session_runtime(struct session *s, struct env **env, struct sandbox **sb)
{
	if (env != NULL)
		*env = s->envp;
	if (sb != NULL)
		*sb = s->sandbox;
}

/* Swaps in a loaded environment and its sandbox (both stolen). */
void
session_set_runtime(struct session *s, struct env *env, struct sandbox *sb)
{
	if (s->envp != NULL)
		env_unref(s->envp);
	if (s->sandbox != NULL)
		sandbox_free(s->sandbox);
	s->envp = env;
	s->sandbox = sb;
}

/* Answers nobody: for records no request waits on. */
static void
session_nobody(void *arg, int error, json_t *result)
{
}

/* Appends an event that changes nothing but the seq (sandbox.denied, env.invalid). */
int
session_event(struct session *s, const char *type, json_t *fields,
    session_done_cb cb, void *arg, struct session_error *err)
{
	struct pending	*pe;
	json_t		*p, *copy;

	if (session_check_broken(s, err) != 0) {
		json_decref(fields);
		return -1;
	}
	p = session_payload(s, type);
	if (fields != NULL) {
		json_object_update_missing(p, fields);
		json_decref(fields);
	}
	copy = cb != NULL ? json_deep_copy(p) : NULL;
	if ((pe = session_record(&s, "session.event", p, 0)) == NULL) {
		json_decref(copy);
		return session_fail_storage(err);
	}
	pe->result = copy;
	pending_wait(pe, cb != NULL ? cb : session_nobody, arg, NULL);
	session_settle(s);
	return 0;
}

/* Moves a session to awaiting_approval and back (see session.h). */
int
session_await_approval(struct session *s, int on, struct session_error *err)
{
	struct pending	*pe;
	json_t		*p;

	if (on && (s->state == SESSION_AWAITING_APPROVAL ||
	    s->state == SESSION_CLOSED))
		return 0;
	if (!on && s->state != SESSION_AWAITING_APPROVAL)
		return 0;
	if (session_check_broken(s, err) != 0)
		return -1;
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string(on ? "awaiting_approval" :
	    session_state_name(s->prev_state)));
	json_object_set_new(p, "turn", json_integer((json_int_t)s->turn));
	if (on)
		json_object_set_new(p, "previous", json_string(
		    session_state_name(s->state)));
	if ((pe = session_record(&s, "session.state", p, 0)) == NULL)
		return session_fail_storage(err);
	pending_wait(pe, session_nobody, NULL, NULL);
	session_settle(s);
	return 0;
}

/* Tells whether a connection is attached to a session. */
int
session_is_attached(struct session *s, struct conn *c)
{
	return attach_find(s, c) != NULL;
}

/*
 * Appends a history message announced as an event of its own type
 * (tool.call, tool.result). A request_id is remembered with it, so
 * session_request_lookup finds it again. result (stolen, may be NULL) is
 * what cb receives; message and fields are stolen.
 */
int
session_message(struct session *s, const char *type, json_t *message,
    json_t *fields, const char *request_id, json_t *result,
    session_done_cb cb, void *arg, struct session_error *err)
{
	const struct config	*cfg = config_get();
	struct pending		*pe;
	json_t			*p;
	char			*enc;
	size_t			 len;

	if ((request_id != NULL && !session_rid_valid(request_id)) ||
	    session_check_broken(s, err) != 0) {
		if (request_id != NULL && !session_rid_valid(request_id))
			session_error_set(err, GBR_ERR_INVALID_PARAMS,
			    json_pack("{s:s}", "field", "request_id"),
			    "request_id: 1 to %d printable characters",
			    SESSION_RID_MAX);
		json_decref(message);
		json_decref(fields);
		json_decref(result);
		return -1;
	}
	p = session_payload(s, type);
	enc = hist_encode(s->seq + 1, json_integer_value(json_object_get(p,
	    "ts")), message, &len);
	if (s->nhist + 1 > cfg->session_history_messages ||
	    s->hist_bytes + len > cfg->session_history_bytes) {
		free(enc);
		json_decref(p);
		json_decref(message);
		json_decref(fields);
		json_decref(result);
		return session_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s}", "limit", "history"), "the history of "
		    "session %s is full; start a new session", s->id);
	}
	if (fields != NULL) {
		json_object_update_missing(p, fields);
		json_decref(fields);
	}
	json_object_set_new(p, "message", message);
	if (request_id != NULL)
		json_object_set_new(p, "request_id", json_string(request_id));
	hist_ready.s = s;
	hist_ready.seq = s->seq + 1;
	hist_ready.json = enc;
	hist_ready.len = len;
	pe = session_record(&s, "session.message", p, 0);
	free(hist_ready.json);		/* not taken: the log refused it */
	hist_ready.json = NULL;
	if (pe == NULL) {
		json_decref(result);
		return session_fail_storage(err);
	}
	pe->result = result;
	pending_wait(pe, cb != NULL ? cb : session_nobody, arg, NULL);
	session_settle(s);
	return 0;
}


/*
 * Looks up a remembered request_id. Returns 0 if unknown; else 1, and cb
 * runs (now, or once the record is written) with the history message that
 * carries it plus "duplicate": true.
 */
int
session_request_lookup(struct session *s, const char *request_id,
    session_done_cb cb, void *arg)
{
	struct pending	*pe;
	struct rid	*r;
	json_error_t	 jerr;
	json_t		*m;
	size_t		 i;

	if ((r = rid_find(s, request_id)) == NULL)
		return 0;
	if ((pe = pending_find(s, r->seq)) != NULL) {
		if (pending_wait(pe, cb, arg, json_pack("{s:b}", "duplicate",
		    1)) == 0)
			return 1;
		session_answer(cb, arg, json_pack("{s:b, s:b}", "duplicate", 1,
		    "busy", 1));
		return 1;
	}
	for (i = s->nhist; i > 0; i--) {
		if (s->hist[i - 1].seq != r->seq)
			continue;
		m = hist_parse(&s->hist[i - 1], &jerr);
		if (m == NULL)
			break;
		json_object_set_new(m, "duplicate", json_true());
		session_answer(cb, arg, m);
		return 1;
	}
	session_answer(cb, arg, json_pack("{s:b, s:I}", "duplicate", 1,
	    "seq", (json_int_t)r->seq));
	return 1;
}

/*
 * Changes the session's environment: its name and system message (one
 * durable session.env record announced as type, with fields stolen).
 */
int
session_set_env(struct session *s, const char *type, const char *env,
    const char *system, json_t *fields, session_done_cb cb, void *arg,
    struct session_error *err)
{
	struct pending	*pe;
	json_t		*p;

	if (session_check_broken(s, err) != 0) {
		json_decref(fields);
		return -1;
	}
	p = session_payload(s, type);
	if (fields != NULL) {
		json_object_update_missing(p, fields);
		json_decref(fields);
	}
	json_object_set_new(p, "env", json_string(env));
	if (system != NULL)
		json_object_set_new(p, "system", json_string(system));
	if ((pe = session_record(&s, "session.env", p, 1)) == NULL)
		return session_fail_storage(err);
	pending_wait(pe, cb != NULL ? cb : session_nobody, arg, NULL);
	session_settle(s);
	return 0;
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

/* Every history message from index from on, parsed (new reference). */
json_t *
session_messages(struct session *s, size_t from)
{
	json_t		*a = json_array(), *m;
	json_error_t	 jerr;
	size_t		 i;

	for (i = from; i < s->nhist; i++) {
		m = hist_parse(&s->hist[i], &jerr);
		if (m == NULL)
			fatalx("session %s: history message %zu does not parse",
			    s->id, i);
		json_array_append_new(a, m);
	}
	return a;
}

/* The session's state and its last turn. */
enum session_state
session_state(const struct session *s)
{
	return s->state;
}

uint64_t
session_turn(const struct session *s)
{
	return s->turn;
}

/*
 * Ends a turn: an error event first when kind is set, then the idle
 * session.state with outcome and fields (stolen: usage, check, ...).
 */
int
session_end_turn(struct session *s, uint64_t turn, const char *outcome,
    const char *kind, const char *message, json_t *fields,
    struct session_error *err)
{
	json_t	*p;

	if (session_check_broken(s, err) != 0) {
		json_decref(fields);
		return -1;
	}
	if (s->turn != turn || (s->state != SESSION_RUNNING &&
	    s->state != SESSION_AWAITING_APPROVAL &&
	    s->state != SESSION_INTERRUPTED)) {
		json_decref(fields);
		return 0;	/* cancelled or closed meanwhile */
	}
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
	if (kind != NULL && s->turn_erred != turn) {
		p = session_payload(s, "error");
		json_object_set_new(p, "turn", json_integer((json_int_t)turn));
		json_object_set_new(p, "kind", json_string(kind));
		json_object_set_new(p, "message", json_string(message != NULL ?
		    message : kind));
		if (session_record(&s, "session.error", p, 0) == NULL) {
			json_decref(fields);
			return session_fail_storage(err);
		}
		s->turn_erred = turn;
	}
	p = session_payload(s, "session.state");
	if (fields != NULL) {
		json_object_update_missing(p, fields);
		json_decref(fields);
	}
	json_object_set_new(p, "state", json_string("idle"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "outcome", json_string(outcome));
	if (session_record(&s, "session.state", p, 0) == NULL)
		return session_fail_storage(err);
	session_settle(s);
	return 0;
}

/*
 * A turn goes on (running again) after a restart left it interrupted or
 * waiting: an agent turn whose approval a human decided after the restart.
 */
int
session_resume_turn(struct session *s, uint64_t turn, const char *why,
    struct session_error *err)
{
	json_t	*p;

	if (session_check_broken(s, err) != 0)
		return -1;
	if (s->turn != turn || s->state != SESSION_INTERRUPTED)
		return 0;
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("running"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "reason", json_string(why));
	if (session_record(&s, "session.state", p, 0) == NULL)
		return session_fail_storage(err);
	session_settle(s);
	return 0;
}

/*
 * A turn that waited for a human when gbrd stopped is taken up again by
 * the agent (agent_recover): once no approval waits, it goes back to
 * running rather than to interrupted (memory only: a later restart
 * decides again).
 */
void
session_adopt_turn(struct session *s)
{
	if (s->state == SESSION_AWAITING_APPROVAL &&
	    s->prev_state == SESSION_INTERRUPTED)
		s->prev_state = SESSION_RUNNING;
}
