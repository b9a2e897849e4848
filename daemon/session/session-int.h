/*
 * What the files of the session module share, and nobody else may see:
 * struct session itself, the records waiting to be announced, the
 * attachments, the module's lists, and the functions one file of the
 * module calls in another. Outside daemon/session/ a session is only
 * the opaque pointer of session.h.
 *
 * Who owns what:
 *   session.c          the open sessions (maps, lists), lifecycle, the
 *                      public calls that change a session
 *   session-record.c   appending records, the pending queue, announcing
 *                      events in seq order, live-only events
 *   session-log.c      applying records to memory, snapshot and replay
 *   session-history.c  history messages and remembered request_ids
 *   session-attach.c   attachments and the fan-out of events
 *   catchup.c          catch-up of a newly attached client
 *   session-turn.c     turns: the agent's ops, the stub turn, ending one
 *   idmap.c, ring.c, logindex.c: units with public headers of their own
 */
#ifndef GBRD_SESSION_INT_H
#define GBRD_SESSION_INT_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "idmap.h"
#include "logindex.h"
#include "ring.h"
#include "session.h"

struct catchup;
struct conn;
struct env;
struct event;
struct event_base;
struct sandbox;

#define SESSION_ID_LEN		12	/* hex characters */
#define SESSION_NAME_MAX	64
#define SESSION_WAITERS_MAX	64	/* requests waiting on one record */

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

/* A remembered request_id of session.send. */
struct rid {
	char		*id;
	uint64_t	 seq;	/* the message it appended */
	uint64_t	 turn;	/* the turn it started */
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

struct session {
	char			 id[SESSION_ID_LEN + 1];
	char			*name;		/* NULL if unnamed */
	char			*workspace;
	long			 workspace_uid;	/* its folder's owner when made; -1 */
	char			*env;
	char			*system;	/* the system message's text, or NULL */
	uint64_t		 system_seq;	/* the record that set it */
	struct env		*envp;		/* its profile (session-env.c), or NULL */
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
	double			 cost_usd;	/* estimated cost of the priced turns */
	double			 last_cost;	/* ... of the last turn; <0: no price */
	int64_t			 unpriced;	/* turns with usage but no price */

	/*
	 * The history: nhist messages, of which the first hist_base are only
	 * in its side file (the first hist_base_bytes bytes) until hist_load;
	 * hist[] holds the others, hist[0] being message hist_base.
	 */
	struct hmsg		*hist;
	size_t			 nhist;
	size_t			 hist_cap;
	uint64_t		 hist_bytes;	/* of all nhist, resident or not */
	size_t			 hist_base;
	uint64_t		 hist_base_bytes;
	uint64_t		 hist_used_ms;	/* monotonic: last hist_load */
	/* The side file: what the last written snapshot and the one in flight cover. */
	size_t			 hist_saved_n;
	uint64_t		 hist_saved_bytes;
	size_t			 hist_pend_n;
	uint64_t		 hist_pend_bytes;
	int			 hist_pend;

	struct ring		 ring;		/* recent events, in session_rings */
	uint64_t		 ring_used_ms;	/* last push (monotonic) */

	struct logindex		 lidx;		/* where its events are in the log */

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

	struct idmap_entry	 id_entry;	/* in session_ids */
	struct idmap_entry	 name_entry;	/* in session_names, if named */
	TAILQ_ENTRY(session)	 entry;		/* session_all or session_dead */
};
TAILQ_HEAD(session_list, session);

/* session.c */
extern struct event_base	*session_base;	/* the loop's, from session_init */
extern struct idmap		 session_ids;	/* open sessions by id */
extern struct idmap		 session_names;	/* ... and by name */
extern struct session_list	 session_all;	/* open, and closed not yet announced */
/* Parses a state name; -1 if unknown. */
int		 session_state_parse(const char *);
/* An empty session (new); session_free frees it. */
struct session	*session_alloc(void);
/* Frees a session's memory; it must be off every list but entry. */
void		 session_free(struct session *);
/* Frees the closed sessions nobody catches up on any more, from the loop. */
void		 session_reap_schedule(void);
/* A closed session's last event is out: detach all; the loop frees it. */
void		 session_retire(struct session *);

/* session-record.c */
extern struct ring_pool		 session_rings;	/* every session's ring */
/* An event payload's notification line (new, the caller frees). */
char		*session_encode(json_t *payload, size_t *len);
/* The line around a payload as the log encoded it, or NULL if data is. */
char		*session_wrap(const char *data, size_t n, size_t *len);
/* The first seq the ring can still replay (the next one if it is empty). */
uint64_t	 session_ring_first(const struct session *);
/* Keeps an announced event (takes the line) within the config's bounds. */
void		 session_ring_push(struct session *, uint64_t seq, char *line,
		    size_t len);
/*
 * Appends a change (payload stolen) and applies it; *sp is the session
 * (or the fresh one of a create). Returns its pending entry, or NULL if
 * the log would not take it: then nothing changed.
 */
struct pending	*session_record(struct session **sp, const char *rtype,
		    json_t *payload, int durable);
/* Announces what a synchronous log callback left ready. */
void		 session_settle(struct session *);
/* The head {session, seq, ts, type} of the session's next event (new). */
json_t		*session_payload(struct session *, const char *type);
/* Adds a waiter to a pending record (extra stolen); -1 if too many wait. */
int		 pending_wait(struct pending *, session_done_cb, void *,
		    json_t *extra);
/* The pending record of a seq, or NULL. */
struct pending	*pending_find(struct session *, uint64_t seq);
/* Fails a call because the log refused a record. Returns -1. */
int		 session_fail_storage(struct gbr_error *);
/* Refuses changes to a session whose log record failed: -1, else 0. */
int		 session_check_broken(struct session *, struct gbr_error *);
/* Answers a request that has nothing to wait for (result stolen). */
void		 session_answer(session_done_cb, void *, json_t *result);
/* The waiter of records nobody waits for. */
void		 session_nobody(void *, int, json_t *);
/* Frees a session's pending records, answering their waiters (shutdown). */
void		 session_drop_pending(struct session *);

/* session-log.c */
/* Reads a payload's common fields; -1 if they are missing. */
int		 payload_head(json_t *, const char **id, uint64_t *seq,
		    int64_t *ts);
/*
 * Applies one record to memory: a live change (*sp the session, or the
 * fresh one of a create) or at replay (*sp NULL: found by id).
 */
int		 session_apply(const char *type, json_t *, struct session **sp);
/* Registers the sessions' records with the disk log (session_init). */
void		 session_log_register(void);

/* session-history.c */
/* Encodes one history message: {seq, ts, role, content, ...} (new). */
char		*hist_encode(uint64_t seq, int64_t ts, json_t *message,
		    size_t *len);
/* The message session_message encoded ahead for this seq (taken), or NULL. */
char		*hist_take_ready(struct session *, uint64_t seq, size_t *len);
/* Appends an encoded message (taken) to the history. */
void		 hist_append(struct session *, uint64_t seq, char *json,
		    size_t len);
/* A history message as JSON again (new reference), or NULL. */
json_t		*hist_parse(const struct hmsg *, json_error_t *);
/* Message i (hist_base <= i < nhist) of the history. */
#define hist_at(s, i)	(&(s)->hist[(i) - (s)->hist_base])
/* Reads the messages only in the side file back in: 0, or -1 (logged). */
int		 hist_load(struct session *);
/* Drops the messages a written snapshot has in the side file. */
void		 hist_unload(struct session *);
/* Lets idle histories leave memory, within [session] history_memory_bytes. */
void		 hist_trim(void);
/* Frees the resident messages (session_free); see hist_limbo_release. */
void		 hist_free(struct session *);
/* Frees the messages of freed sessions once no snapshot reads them. */
void		 hist_limbo_release(void);
/* The history's part of a session's snapshot (new); names its side file. */
json_t		*hist_snapshot(struct session *);
/* The snapshot hist_snapshot was part of is written (error 0) or not. */
void		 hist_snapshot_done(struct session *, int error);
/* What histories hold and what of it is in memory, for daemon.status (new). */
json_t		*hist_status(void);
/* Restores the history from a snapshot's part: 0, or -1. */
int		 hist_restore(struct session *, json_t *);
/* A remembered request_id of session.send (borrowed), or NULL. */
struct rid	*rid_find(struct session *, const char *);
/* Remembers a request_id of a message; the oldest goes past the limit. */
void		 rid_remember(struct session *, const char *, uint64_t seq,
		    uint64_t turn);
/* The session a request_id of session.create made (borrowed), or NULL. */
const char	*create_rid_find(const char *);
/* Remembers a request_id of session.create. */
void		 create_rid_remember(const char *id, const char *session);
/* Those request_ids for a snapshot, oldest first (new reference). */
json_t		*create_rid_json(void);
/* Forgets them all (shutdown). */
void		 create_rid_release(void);

/* session-attach.c */
/* Unlinks and frees an attachment, or marks it while its session fans out. */
void		 attach_remove(struct attach *);
/* Unlinks the attachments marked during a fan-out. */
void		 attach_sweep(struct session *);
/* Removes every attachment (shutdown). */
void		 attach_remove_all(void);
/* The number of attachments. */
unsigned	 attach_total(void);
/* Queues one line to every attached client; the slow ones are detached. */
void		 session_fanout(struct session *, const char *line, size_t len);
/* Sends a client-local event (payload stolen) to one connection. */
int		 session_send_local(struct session *, struct conn *,
		    json_t *payload);

/* catchup.c */
/* Starts a new attachment's catch-up (from after + 1 with has_after). */
void		 catchup_start(struct attach *, int has_after, uint64_t after);
/* The attachment is going away: a read in flight finds it gone. */
void		 catchup_cancel(struct attach *);
/* The catch-ups alive. */
unsigned	 catchup_count(void);
/* Frees the catch-ups' timer (shutdown, after every attachment). */
void		 catchup_shutdown(void);

/* session-turn.c */
/* The running state is announced: the agent (or the stub) takes the turn. */
void		 session_turn_begin(struct session *, uint64_t turn);
/* Stops whatever runs the session's turn. */
void		 session_turn_cancel(struct session *);

/*
 * How long a stub turn runs, in ms (0: at once): the test hook
 * GBR_TEST_TURN_MS (fault.c), read by session_init.
 */
extern unsigned	 session_turn_ms;

#endif
