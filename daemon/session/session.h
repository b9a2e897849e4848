/*
 * Sessions: the long-lived conversations that gbrd holds for its clients.
 * The session module (session.c and the siblings session-int.h lists)
 * owns every session (id, name, workspace, environment name, state
 * machine, history, event sequence, the ring of recent events, the
 * attached connections and the request_ids remembered for idempotent
 * calls). Others hold a session by id or name and look it up again when
 * they need it; a struct session pointer is borrowed and valid only until
 * the callback returns.
 *
 * Every change is a disk log record ("session.*") appended before anyone
 * hears of it: the record's payload is the event itself, so replaying the
 * log rebuilds the sessions, their histories, their seq counters, the
 * request_id memory and the event ring byte for byte. The change is
 * applied in memory when the record is appended (so the next request sees
 * it) and announced to attached clients, in seq order, once the log says
 * the record is written (or fsynced, for a durable one).
 *
 * The calls that change a session follow libuv's rule: if one returns -1
 * its callback never runs; if it returns 0 the callback runs exactly once,
 * later, from the loop.
 */
#ifndef GBRD_SESSION_H
#define GBRD_SESSION_H

struct event_base;

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "errors.h"

struct conn;
struct session;

enum session_state {
	SESSION_IDLE = 0,
	SESSION_RUNNING,		/* a turn is running */
	SESSION_AWAITING_APPROVAL,	/* a turn waits for a human decision */
	SESSION_INTERRUPTED,		/* the daemon died during the last turn */
	SESSION_CLOSED,
};

/* Why a call failed: struct gbr_error (protocol/errors.h). */

/*
 * Called once a change is in the log (error 0) or could not be written
 * (error is an errno value). result is borrowed: take a reference to keep it.
 */
typedef void (*session_done_cb)(void *arg, int error, json_t *result);

/* Registers the module with the disk log; before disklog_open. */
void		 session_init(struct event_base *);
/*
 * Who runs a turn once it is announced running: begin returns 0 if it
 * took the turn (else a stub ends it, for tests without an agent); cancel
 * stops one (cancel, close). The agent registers itself (agent_init), so
 * the session layer never calls up into it.
 */
struct session_turn_ops {
	int	(*begin)(struct session *, uint64_t turn);
	void	(*cancel)(struct session *);
};
void		 session_set_turn_ops(const struct session_turn_ops *);
/*
 * After disklog_open: a turn that was running when the daemon stopped is
 * marked interrupted (with an event); nothing is re-run.
 */
void		 session_recover(void);
/* Frees everything; after the loop and after disklog_close. */
void		 session_shutdown(void);
/* A connection went away: it is detached from every session. */
void		 session_conn_closed(struct conn *);
/* Counters for daemon.status (new reference). */
json_t		*session_status(void);

/* Finds an open session by id or by name (borrowed), or NULL. */
struct session	*session_find(const char *);
/* Tells whether a name is acceptable for a session or an environment. */
int		 session_name_valid(const char *);

/*
 * Creates a session on an existing folder (workspace is a canonical
 * absolute path, owned by uid: checked whenever the session loads it
 * again). With reuse, an open session that fits (the named one, or
 * the most recently active one on the workspace) is returned instead; the
 * result says "created": false. A request_id seen before returns the first
 * result.
 */
int		 session_create(const char *workspace, long uid, const char *env,
		    const char *system, const char *name, const char *request_id, int reuse,
		    session_done_cb, void *, struct gbr_error *);
/*
 * Appends the user's message (durable) and starts a turn. A request_id
 * seen before returns the first result and starts nothing.
 */
int		 session_send(struct session *, const char *text,
		    const char *request_id, session_done_cb, void *,
		    struct gbr_error *);
/* Ends the running turn. The result says whether there was one. */
int		 session_cancel(struct session *, session_done_cb, void *,
		    struct gbr_error *);
/* Closes a session: clients hear it, then it is gone. */
int		 session_close(struct session *, session_done_cb, void *,
		    struct gbr_error *);
/*
 * Attaches a connection. cb runs first, at once, with the result (the
 * caller replies with it); then the missed events after after_seq (from
 * the ring, or read from the disk log, page by page as the client reads:
 * possibly later, from the loop), or resync_required for those the log
 * no longer has, then replay_complete, then live events. has_after 0
 * means live events only. Until replay_complete the connection counts as
 * attached (session_is_attached) but live events reach it only through
 * the catch-up.
 */
int		 session_attach(struct session *, struct conn *, int has_after,
		    uint64_t after_seq, session_done_cb, void *,
		    struct gbr_error *);
/* Detaches a connection from one session, or from all when NULL. Returns the count. */
unsigned	 session_detach(struct session *, struct conn *);

/* A session's public fields (new reference). */
json_t		*session_info(struct session *);
/* Every open session, optionally only those on one workspace (new reference). */
json_t		*session_list(const char *workspace);
/*
 * The ids of the open sessions (of one workspace, or all with NULL), as
 * an array of strings: what to walk when the sessions may change meanwhile.
 */
json_t		*session_open_ids(const char *workspace);
/*
 * session.history's result as JSON text (new, NUL-terminated, *len bytes):
 * up to limit of the newest messages before seq before (0: the end), as
 * far as announced, bounded in bytes by half a client queue; or NULL if
 * the part kept only on disk cannot be read back (logged).
 */
char		*session_history_text(struct session *, size_t limit,
		    uint64_t before, size_t *len);
/*
 * Read-your-writes for session_history: if records appended so far are
 * not announced yet (another client's call whose records are still being
 * written), cb runs once they are (error as for their write) and 1 is
 * returned; else 0, and cb never runs.
 */
int		 session_when_announced(struct session *, session_done_cb,
		    void *);

const char	*session_state_name(enum session_state);

/* Accessors (borrowed strings). */
const char	*session_id(const struct session *);
const char	*session_workspace(const struct session *);
/* The owner (uid) of the workspace's folder when the session was made, or -1. */
long		 session_workspace_uid(const struct session *);
const char	*session_env_name(const struct session *);

/*
 * The environment and sandbox loaded for a session (session-env.c loads them;
 * the session keeps them and frees them with itself). Borrowed; either may
 * be NULL until loaded.
 */
struct env;
struct sandbox;
void		 session_runtime(struct session *, struct env **,
		    struct sandbox **);
/* Swaps in a new environment and sandbox (both stolen); frees the old. */
void		 session_set_runtime(struct session *, struct env *,
		    struct sandbox *);

/*
 * Appends an event that changes nothing but the seq (sandbox.denied,
 * env.invalid): fields (stolen) join {session, seq, ts, type}. cb may be
 * NULL; it receives the event's payload once it is announced.
 */
int		 session_event(struct session *, const char *type,
		    json_t *fields, session_done_cb, void *,
		    struct gbr_error *);
/*
 * Called for each event record (session_event's) that replay finds in
 * the log, with its payload (borrowed): how approval.c learns which of
 * its changes reached the session's stream before a crash.
 */
typedef void	(*session_event_observer)(json_t *payload);
void		 session_observe_events(session_event_observer);
/*
 * Appends a history message announced as an event of its own type
 * (tool.call, tool.result); a request_id is remembered with it. message,
 * fields and result are stolen; result is what cb receives.
 */
int		 session_message(struct session *, const char *type,
		    json_t *message, json_t *fields, const char *request_id,
		    json_t *result, session_done_cb, void *,
		    struct gbr_error *);
/*
 * A resent request_id: 0 if unknown; 1 if known, and cb runs exactly once
 * (now, or once its record is written) with the message that carries it
 * and "duplicate": true.
 */
int		 session_request_lookup(struct session *, const char *request_id,
		    session_done_cb, void *);
/*
 * Approvals (approval.c): on 1 moves the session to awaiting_approval,
 * remembering the state it leaves; on 0 goes back to that state (a turn
 * that was running before a restart comes back as interrupted). A
 * session.state record and event; nothing happens if the session is
 * already there.
 */
int		 session_await_approval(struct session *, int on,
		    struct gbr_error *);
/* Tells whether a connection is attached to a session (its events reach it). */
int		 session_is_attached(struct session *, struct conn *);
/* Who is attached: a new array of {client, pid}. */
json_t		*session_clients(struct session *);
/*
 * Changes the environment's name and the system message (a durable
 * session.env record announced as type; fields stolen). Every other
 * history message stays untouched. cb may be NULL.
 */
int		 session_set_env(struct session *, const char *type,
		    const char *env, const char *system, json_t *fields,
		    session_done_cb, void *, struct gbr_error *);

/*
 * For the agent loop (agent.c).
 *
 * A live-only event (message.delta): fields (stolen) join {session, seq,
 * ts, type}; it reaches the attached clients in order with the records
 * around it but is never logged or replayed (seq repeats the last one).
 */
int		 session_live(struct session *, const char *type,
		    json_t *fields);
/*
 * Every history message from index from on (new reference), or NULL if
 * the part kept only on disk cannot be read back (logged).
 */
json_t		*session_messages(struct session *, size_t from);
/*
 * The history as the model sees it (new reference), or NULL as for
 * session_messages: without what a conversation rewind cut (the messages
 * after its to_seq that came before it) nor the rewinds' own markers
 * (session-conv.c).
 */
json_t		*session_conversation(struct session *);
/*
 * What rewinding the conversation to before turn (or, with turn 0, to
 * after seq) would drop: 0 with *plan (new) {to_seq, from_turn?,
 * messages (how many), first_user? (the first dropped user message's
 * text, cut at 120 bytes)}; or -1 with err: busy while a turn runs,
 * not_found when nothing comes after that point.
 */
int		 session_conversation_plan(struct session *, uint64_t turn,
		    uint64_t seq, json_t **plan, struct gbr_error *);
/*
 * Drops from the conversation what plan (borrowed, from
 * session_conversation_plan just before) says: a history message
 * {role: "rewind", to_seq, from_turn?, messages, who? (borrowed)}
 * announced as a conversation.rewound event. cb receives {seq, to_seq,
 * from_turn?, messages, who?, first_user?}.
 */
int		 session_conversation_rewind(struct session *, json_t *plan,
		    json_t *who, session_done_cb, void *, struct gbr_error *);
enum session_state session_state(const struct session *);
uint64_t	 session_turn(const struct session *);
/* No provider: the stub turn that ends with a no_provider error. */
void		 session_turn_stub(struct session *, uint64_t turn);
/*
 * Ends a turn (if it is still the running one): an error event {kind,
 * message} when kind is set, then session.state idle with outcome and
 * fields (stolen; "usage" {input_tokens, output_tokens} is added to the
 * session's counters).
 */
int		 session_end_turn(struct session *, uint64_t turn,
		    const char *outcome, const char *kind, const char *message,
		    json_t *fields, struct gbr_error *);
/*
 * A turn waiting for an approval since before a restart is the agent's
 * again: once decided it goes back to running, not to interrupted.
 */
void		 session_adopt_turn(struct session *);
/* An interrupted turn runs again (a session.state running with reason why). */
int		 session_resume_turn(struct session *, uint64_t turn,
		    const char *why, struct gbr_error *);

#endif
