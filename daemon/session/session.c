/*
 * Sessions: their lifecycle and the calls that change them. See session.h
 * for the contract. This file owns the open sessions (the maps by id and
 * by name, the list of all, the closed ones waiting to be freed), the
 * state names, the checks on names and request_ids, and every public
 * call that is not a turn's (session-turn.c), a history's
 * (session-history.c) or an attachment's (session-attach.c). It does not
 * write the log or announce events itself: session-record.c does that
 * for every change, and session-log.c applies them to memory.
 *
 * Bounds, all from the [session] config: open sessions, messages and bytes
 * per history, text per message, events and bytes per ring, bytes of all
 * rings together (the least recently active sessions lose their oldest
 * events first), clients per session, request_ids per session. A client
 * that cannot keep up is evicted by conn.c and simply detached here.
 *
 * A closed session leaves the maps at once (session-log.c) and stays in
 * memory, on session_dead, until the clients still catching up on it have
 * its last event; then it is freed from the loop.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "disklog.h"
#include "env.h"
#include "fault.h"
#include "log.h"
#include "osdep.h"
#include "sandbox.h"
#include "rewind.h"
#include "session.h"
#include "session-int.h"
#include "xmalloc.h"

struct event_base		*session_base;
struct idmap			 session_ids = IDMAP_INITIALIZER;
struct idmap			 session_names = IDMAP_INITIALIZER;
struct session_list		 session_all = TAILQ_HEAD_INITIALIZER(session_all);
/* Closed and announced, waiting for their last catching-up clients. */
static struct session_list	 session_dead = TAILQ_HEAD_INITIALIZER(session_dead);
static struct event		*session_reap_ev;
static struct event		*session_trim_ev;	/* hist_trim, now and then */
static int			 session_stopping;	/* session_shutdown */

static const char *const session_states[] = {
	[SESSION_IDLE] = "idle",
	[SESSION_RUNNING] = "running",
	[SESSION_AWAITING_APPROVAL] = "awaiting_approval",
	[SESSION_INTERRUPTED] = "interrupted",
	[SESSION_CLOSED] = "closed",
};


/* Returns the name of a state. */
const char *
session_state_name(enum session_state st)
{
	if ((unsigned)st >= sizeof session_states / sizeof session_states[0])
		return "unknown";
	return session_states[st];
}

/* Parses a state name; -1 if unknown. */
int
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

/* Allocates an empty session. */
struct session *
session_alloc(void)
{
	struct session	*s = xcalloc(1, sizeof *s);

	s->workspace_uid = -1;
	s->last_cost = -1;
	TAILQ_INIT(&s->attached);
	TAILQ_INIT(&s->pending);
	return s;
}

/* Frees a session's memory; it must be off every list but entry. */
void
session_free(struct session *s)
{
	size_t	i;

	ring_release(&session_rings, &s->ring);
	logindex_release(&s->lidx);
	hist_free(s);
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
void
session_reap_schedule(void)
{
	if (session_reap_ev == NULL &&
	    (session_reap_ev = event_new(session_base, -1, 0, session_reap_cb,
	    NULL)) == NULL)
		fatalx("event_new failed");
	event_active(session_reap_ev, EV_TIMEOUT, 0);
}

/*
 * A closed session whose last event is out: detach everyone (those still
 * catching up once they have that event too), free it from the loop.
 */
void
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

/* Returns a session's public fields. */
json_t *
session_info(struct session *s)
{
	json_t	*o, *u;

	o = json_pack("{s:s, s:s?, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "id", s->id, "name", s->name, "workspace", s->workspace,
	    "env", s->env, "state", session_state_name(s->state),
	    "attached", (json_int_t)s->nattached,
	    "created_ms", (json_int_t)s->created_ms,
	    "active_ms", (json_int_t)s->active_ms,
	    "messages", (json_int_t)s->nhist,
	    "seq", (json_int_t)s->announced,
	    "turn", (json_int_t)s->turn);
	json_object_set_new(o, "clients", session_clients(s));
	u = json_pack("{s:I, s:I, s:f, s:I, s:{s:I, s:I}}",
	    "input_tokens", (json_int_t)s->tokens_in, "output_tokens",
	    (json_int_t)s->tokens_out, "cost_usd", s->cost_usd,
	    "unpriced_turns", (json_int_t)s->unpriced, "last_turn",
	    "input_tokens", (json_int_t)s->last_in, "output_tokens",
	    (json_int_t)s->last_out);
	/* cost_usd covers the priced turns only; unpriced_turns says how many
	   are left out. The last turn's cost is there only if it had one. */
	if (s->last_cost >= 0)
		json_object_set_new(json_object_get(u, "last_turn"), "cost_usd",
		    json_real(s->last_cost));
	json_object_set_new(o, "usage", u);
	return o;
}

/* Finds an open session by id or by name. */
struct session *
session_find(const char *key)
{
	struct session	*s;

	if ((s = idmap_find(&session_ids, key)) != NULL)
		return s;
	return idmap_find(&session_names, key);
}

/* Answers with a session's info once its create record is written. */
static int
session_existing(struct session *s, json_t *extra, session_done_cb cb,
    void *arg, struct gbr_error *err)
{
	struct pending	*pe;
	json_t		*res;

	if ((pe = pending_find(s, 1)) != NULL) {
		if (pending_wait(pe, cb, arg, extra) != 0)
			return gbr_error_set(err, GBR_ERR_BUSY, NULL,
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
	} while (idmap_find(&session_ids, id) != NULL);
}

/* Creates a session (or finds the one to reuse). */
int
session_create(const char *workspace, long uid, const char *env, const char *system,
    const char *name, const char *request_id, int reuse, session_done_cb cb,
    void *arg, struct gbr_error *err)
{
	const struct config	*cfg = config_get();
	const char		*made;
	struct session		*s, *best;
	struct pending		*pe;
	json_t			*p;
	char			 id[SESSION_ID_LEN + 1];

	if (request_id != NULL && (made = create_rid_find(request_id)) != NULL) {
		if ((s = idmap_find(&session_ids, made)) == NULL)
			return gbr_error_set(err, GBR_ERR_SESSION_NOT_FOUND,
			    json_pack("{s:s}", "session", made),
			    "the session this request created (%s) is closed",
			    made);
		return session_existing(s, json_pack("{s:b, s:b}", "created", 1,
		    "duplicate", 1), cb, arg, err);
	}
	if (reuse) {
		best = NULL;
		if (name != NULL)
			best = idmap_find(&session_names, name);
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
			return gbr_error_set(err, GBR_ERR_ALREADY_EXISTS,
			    json_pack("{s:s, s:s}", "name", name, "workspace",
			    best->workspace), "session '%s' exists on another "
			    "workspace (%s)", name, best->workspace);
		if (best != NULL)
			return session_existing(best, json_pack("{s:b}",
			    "created", 0), cb, arg, err);
	}
	if (name != NULL && idmap_find(&session_names, name) != NULL)
		return gbr_error_set(err, GBR_ERR_ALREADY_EXISTS,
		    json_pack("{s:s}", "name", name),
		    "a session named '%s' exists", name);
	if (idmap_count(&session_ids) >= cfg->session_max)
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED,
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
    session_done_cb cb, void *arg, struct gbr_error *err)
{
	const struct config	*cfg = config_get();
	struct pending		*pe;
	struct rid		*r;
	json_t			*p, *m;
	char			*enc;
	size_t			 len, tlen = strlen(text);
	uint64_t		 turn;

	if (request_id != NULL && (r = rid_find(s, request_id)) != NULL) {
		/* A resend: the first result, nothing started. */
		p = json_pack("{s:b}", "duplicate", 1);
		if ((pe = pending_find(s, r->seq)) != NULL) {
			if (pending_wait(pe, cb, arg, p) != 0)
				return gbr_error_set(err, GBR_ERR_BUSY, NULL,
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
		return gbr_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "text"), "text: must not be empty");
	if (tlen > cfg->session_max_text_bytes)
		return gbr_error_set(err, GBR_ERR_TOO_LARGE, json_pack("{s:s, s:I}",
		    "field", "text", "max_bytes",
		    (json_int_t)cfg->session_max_text_bytes),
		    "text: %zu bytes, over the limit of %zu", tlen,
		    cfg->session_max_text_bytes);
	if (s->state != SESSION_IDLE && s->state != SESSION_INTERRUPTED)
		return gbr_error_set(err, GBR_ERR_BUSY, json_pack("{s:s}", "state",
		    session_state_name(s->state)), "session %s is %s; wait for "
		    "the turn to end or cancel it", s->id,
		    session_state_name(s->state));
	if (s->nhist + 1 > cfg->session_history_messages)
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s, s:I}", "limit", "history_messages", "max",
		    (json_int_t)cfg->session_history_messages), "the history of "
		    "session %s is full (%zu messages); start a new session",
		    s->id, s->nhist);
	/* The exact size the history entry will have, before anything changes. */
	p = session_payload(s, "message");
	turn = s->turn + 1;
	/* Its turn, so that a rewind of the conversation finds where it began. */
	m = json_pack("{s:s, s:s, s:I}", "role", "user", "content", text,
	    "turn", (json_int_t)turn);
	enc = hist_encode(s->seq + 1, json_integer_value(json_object_get(p,
	    "ts")), m, &len);
	free(enc);
	if (s->hist_bytes + len > cfg->session_history_bytes) {
		json_decref(m);
		json_decref(p);
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s, s:I}", "limit", "history_bytes", "max",
		    (json_int_t)cfg->session_history_bytes), "the history of "
		    "session %s is full (%llu bytes); start a new session",
		    s->id, (unsigned long long)s->hist_bytes);
	}
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

/* Closes a session. */
int
session_close(struct session *s, session_done_cb cb, void *arg,
    struct gbr_error *err)
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
	session_turn_cancel(s);
	log_info("session %s closed", s->id);
	pe->result = json_pack("{s:s, s:b}", "session", s->id, "closed", 1);
	pending_wait(pe, cb, arg, NULL);
	session_settle(s);
	return 0;
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

/* Counters for daemon.status. */
json_t *
session_status(void)
{
	const struct config	*cfg = config_get();

	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
	    "open", (json_int_t)idmap_count(&session_ids),
	    "max", (json_int_t)cfg->session_max,
	    "attached", (json_int_t)attach_total(),
	    "catching_up", (json_int_t)catchup_count(),
	    "events_memory_bytes", (json_int_t)session_rings.bytes,
	    "events_memory_max", (json_int_t)cfg->session_events_memory,
	    "histories", hist_status());
}

#define SESSION_TURN_MS_MAX	600000	/* GBR_TEST_TURN_MS: at most 10 minutes */

unsigned	session_turn_ms;

/*
 * Idle histories leave memory (hist_trim): checked every quarter of
 * [session] history_idle, between 1 and 30 s.
 */
static void
session_trim_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval	tv = { 0, 0 };
	unsigned	idle = config_get()->session_history_idle;

	if (what != 0)
		hist_trim();
	tv.tv_sec = idle / 4 < 1 ? 1 : idle / 4 > 30 ? 30 : idle / 4;
	evtimer_add(session_trim_ev, &tv);
}

/* Registers with the disk log and reads the test hooks. */
void
session_init(struct event_base *base)
{
	session_base = base;
	/* Tests kill the daemon in the middle of a stub turn. */
	session_turn_ms = (unsigned)fault_hook_long("TURN_MS", 0,
	    SESSION_TURN_MS_MAX, 0);
	session_log_register();
	if ((session_trim_ev = evtimer_new(base, session_trim_cb, NULL)) == NULL)
		fatalx("evtimer_new failed");
	session_trim_cb(-1, 0, NULL);
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
	/* Every remembered change is known: the shadow store's GC may run. */
	rewind_gc_init(session_base);
	if (idmap_count(&session_ids) > 0)
		log_info("%zu sessions open, %u interrupted turns",
		    idmap_count(&session_ids), n);
}

/* Frees everything. */
void
session_shutdown(void)
{
	struct session	*s;

	/*
	 * disklog_close ran every read callback already, so no catch-up is
	 * held by a read: removing the attachments frees them all.
	 */
	session_stopping = 1;
	attach_remove_all();
	catchup_shutdown();
	while ((s = TAILQ_FIRST(&session_all)) != NULL) {
		TAILQ_REMOVE(&session_all, s, entry);
		session_drop_pending(s);
		session_free(s);
	}
	/* disklog_close is over: no snapshot reads a history any more. */
	hist_limbo_release();
	session_reap_cb(-1, 0, NULL);
	if (session_reap_ev != NULL)
		event_free(session_reap_ev);
	session_reap_ev = NULL;
	if (session_trim_ev != NULL)
		event_free(session_trim_ev);
	session_trim_ev = NULL;
	idmap_release(&session_ids);
	idmap_release(&session_names);
	create_rid_release();
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

/* Appends an event that changes nothing but the seq (sandbox.denied, env.invalid). */
int
session_event(struct session *s, const char *type, json_t *fields,
    session_done_cb cb, void *arg, struct gbr_error *err)
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
session_await_approval(struct session *s, int on, struct gbr_error *err)
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

/*
 * Changes the session's environment: its name and system message (one
 * durable session.env record announced as type, with fields stolen).
 */
int
session_set_env(struct session *s, const char *type, const char *env,
    const char *system, json_t *fields, session_done_cb cb, void *arg,
    struct gbr_error *err)
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
