/*
 * Human approvals: the state machine of approval.h, kept in the disk log.
 *
 * Every change is an "approval.*" record, applied to memory by ap_apply
 * the moment the log takes it (the same function replays the log at
 * start, so memory and log cannot drift apart):
 *
 *   approval.requested   {id, session, call_id, tool, args, path, command,
 *                         diff, why, created_ms, expires_ms, request_id,
 *                         turn}                                    durable
 *   approval.resolved    {id, state: approved|edited|denied|expired|
 *                         withdrawn, decision, reason, scope, content,
 *                         request_id, ts, grant}                   durable
 *   approval.applying    {id}                                      durable
 *   approval.applied     {id, ok, result}                          durable
 *   approval.interrupted {id, note, expires_ms}                    durable
 *   approval.revoke      {id}  (a grant)                           durable
 *
 * Each is followed by an event in the session's own stream (a
 * session.event record, later in the log, so a client that heard of a
 * change can count on the change being on disk): approval.requested once,
 * approval.resolved on every later change a human should see.
 *
 * Bounds: [approval] max_pending approvals not finished, in all;
 * APPROVAL_KEEP_DONE finished ones kept for approval.list {all: true}
 * (the oldest are forgotten, in memory and in snapshots alike);
 * APPROVAL_GRANTS_MAX grants; results kept up to APPROVAL_RESULT_MAX
 * bytes (a summary beyond).
 *
 * Test hooks (read once at start): GBR_TEST_CRASH_AFTER_APPLYING=1 makes
 * gbrd _exit(137) right after an "applying" record is durable and before
 * the action runs, so tests can kill it exactly between the two records;
 * GBR_TEST_CRASH_BEFORE_ANNOUNCE=1 makes it _exit(137) once a new
 * approval.requested record is durable, before its session event.
 * Replay notes which changes reached the session's stream (the events'
 * records, through session_observe_events); recovery announces the ones
 * that did not.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "approval.h"
#include "config.h"
#include "disklog.h"
#include "gbrd.h"
#include "log.h"
#include "osdep.h"
#include "session.h"
#include "xmalloc.h"

#define AP_SNAPSHOT_VERSION	1
#define AP_REASON_MAX		4096	/* bytes of a human's reason */
#define AP_RID_MAX		128	/* bytes of a resolve's request_id */

struct approval {
	TAILQ_ENTRY(approval)	 entry;
	char			 id[APPROVAL_ID_LEN + 1];
	char			*session;
	char			*call_id;
	char			*tool;
	json_t			*args;
	char			*path;		/* or NULL */
	char			*command;	/* or NULL */
	char			*diff;		/* or NULL */
	char			*proposed;	/* edit_file's new file, or NULL */
	size_t			 proposed_len;
	char			*rid;		/* the call's request_id, or NULL */
	uint64_t		 turn;
	enum approval_why	 why;
	enum approval_state	 state;
	int			 decided;	/* decision is set */
	enum approval_decision	 decision;
	int			 scope_session;
	char			*reason;	/* or NULL */
	char			*content;	/* an edit's content, or NULL */
	size_t			 content_len;
	char			*resolve_rid;	/* the decision's request_id, or NULL */
	char			*note;		/* interrupted: what may have happened */
	json_t			*result;	/* applied/failed: kept result, or NULL */
	int64_t			 created_ms;
	int64_t			 expires_ms;	/* 0: never */
	int64_t			 resolved_ms;
	int			 applying_started; /* this run: the apply hook ran */
	int			 announced;	/* state of its last session event; -1: none */
};
TAILQ_HEAD(approval_list, approval);

struct grant {
	TAILQ_ENTRY(grant)	 entry;
	char			 id[APPROVAL_ID_LEN + 1];
	char			*session;
	char			*tool;
	char			*path;		/* or NULL */
	char			*command;	/* or NULL */
	char			*approval;	/* the approval that made it */
	int64_t			 created_ms;
};
TAILQ_HEAD(grant_list, grant);

/* A record's continuation once the log has written it. */
struct ap_wait {
	void			(*fn)(struct ap_wait *, int error);
	char			 id[APPROVAL_ID_LEN + 1];
	approval_done_cb	 cb;
	void			*arg;
	json_t			*reply;		/* what cb gets, or NULL */
};

static struct approval_list	 ap_all = TAILQ_HEAD_INITIALIZER(ap_all);
static struct grant_list	 ap_grants = TAILQ_HEAD_INITIALIZER(ap_grants);
static struct approval_hooks	 ap_hooks;
static unsigned			 ap_nlive;	/* not finished */
static unsigned			 ap_ndone;
static unsigned			 ap_ngrants;
static int			 ap_broken;	/* a record failed: no more changes */
static int			 ap_crash_after_applying;
static int			 ap_crash_before_announce;
static struct event		*ap_timer;
static struct event		*ap_kick;	/* recovery's applies, from the loop */

static const char *const ap_states[] = {
	[APPROVAL_PENDING] = "pending",
	[APPROVAL_APPROVED] = "approved",
	[APPROVAL_DENIED] = "denied",
	[APPROVAL_EDITED] = "edited",
	[APPROVAL_APPLYING] = "applying",
	[APPROVAL_APPLIED] = "applied",
	[APPROVAL_INTERRUPTED] = "interrupted",
	[APPROVAL_EXPIRED] = "expired",
	[APPROVAL_WITHDRAWN] = "withdrawn",
	[APPROVAL_FAILED] = "failed",
};

static const char *const ap_whys[] = {
	[APPROVAL_WHY_PROTECTED_PATH] = "protected_path",
	[APPROVAL_WHY_ASK_COMMAND] = "ask_command",
	[APPROVAL_WHY_ASK_TOOL] = "ask_tool",
	[APPROVAL_WHY_ENV_DIR] = "env_dir",
};

static const char *const ap_decisions[] = {
	[APPROVAL_APPROVE] = "approve",
	[APPROVAL_DENY] = "deny",
	[APPROVAL_EDIT] = "edit",
};

static json_t	*ap_snapshot(void);
static int	 ap_restore(json_t *);
static int	 ap_replay(uint64_t, int64_t, const char *, json_t *);
static void	 ap_schedule(void);
static void	 ap_sweep_closed(void);

static const struct disklog_module ap_module = {
	"approval", ap_snapshot, ap_restore, ap_replay
};

/* The name of a state. */
const char *
approval_state_name(enum approval_state st)
{
	if ((unsigned)st >= sizeof ap_states / sizeof ap_states[0])
		return "unknown";
	return ap_states[st];
}

/* The name of a reason to ask. */
const char *
approval_why_name(enum approval_why w)
{
	if ((unsigned)w >= sizeof ap_whys / sizeof ap_whys[0])
		return "protected_path";
	return ap_whys[w];
}

/* Finds a name in a table; -1 if absent. */
static int
ap_parse(const char *const *table, size_t n, const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < n; i++)
		if (table[i] != NULL && strcmp(table[i], name) == 0)
			return (int)i;
	return -1;
}

/* True for the states that will not change any more. */
static int
ap_finished(enum approval_state st)
{
	switch (st) {
	case APPROVAL_DENIED:
	case APPROVAL_APPLIED:
	case APPROVAL_EXPIRED:
	case APPROVAL_WITHDRAWN:
	case APPROVAL_FAILED:
		return 1;
	default:
		return 0;
	}
}

/* True for the states a human may still decide on. */
static int
ap_open(enum approval_state st)
{
	return st == APPROVAL_PENDING || st == APPROVAL_INTERRUPTED;
}

/* A copy of a string, or NULL. */
static char *
ap_strdup(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

/* Compares two strings that may be NULL. */
static int
ap_streq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* A string of a JSON object, or NULL. */
static const char *
ap_str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* An integer of a JSON object, or 0. */
static int64_t
ap_int(json_t *o, const char *key)
{
	json_t	*v = json_object_get(o, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* A new random id with a one-letter prefix. */
static void
ap_new_id(char *id, char prefix)
{
	unsigned char	r[8];
	size_t		i;

	if (osdep_random(r, sizeof r) != 0)
		fatalx("no source of random bytes");
	id[0] = prefix;
	for (i = 0; i < sizeof r; i++)
		snprintf(id + 1 + 2 * i, 3, "%02x", r[i]);
}

/* Finds an approval by id. */
struct approval *
approval_get(const char *id)
{
	struct approval	*a;

	if (id == NULL)
		return NULL;
	TAILQ_FOREACH(a, &ap_all, entry)
		if (strcmp(a->id, id) == 0)
			return a;
	return NULL;
}

/* Finds a grant by id. */
static struct grant *
ap_grant_get(const char *id)
{
	struct grant	*g;

	TAILQ_FOREACH(g, &ap_grants, entry)
		if (strcmp(g->id, id) == 0)
			return g;
	return NULL;
}

/* Frees an approval (off the list). */
static void
ap_free(struct approval *a)
{
	free(a->session);
	free(a->call_id);
	free(a->tool);
	json_decref(a->args);
	free(a->path);
	free(a->command);
	free(a->diff);
	free(a->proposed);
	free(a->rid);
	free(a->reason);
	free(a->content);
	free(a->resolve_rid);
	free(a->note);
	json_decref(a->result);
	free(a);
}

/* Frees a grant (off the list). */
static void
ap_grant_free(struct grant *g)
{
	free(g->session);
	free(g->tool);
	free(g->path);
	free(g->command);
	free(g->approval);
	free(g);
}

/* Moves an approval to a state, keeping the counters right. */
static void
ap_set_state(struct approval *a, enum approval_state st)
{
	struct approval	*o, *next;

	if (!ap_finished(a->state) && ap_finished(st)) {
		ap_nlive--;
		ap_ndone++;
		/* Finished ones are kept in the order they finished. */
		TAILQ_REMOVE(&ap_all, a, entry);
		TAILQ_INSERT_TAIL(&ap_all, a, entry);
	}
	a->state = st;
	/* Forget the oldest finished ones past the bound. */
	for (o = TAILQ_FIRST(&ap_all); o != NULL && ap_ndone > APPROVAL_KEEP_DONE;
	    o = next) {
		next = TAILQ_NEXT(o, entry);
		if (!ap_finished(o->state) || o == a)
			continue;
		TAILQ_REMOVE(&ap_all, o, entry);
		ap_ndone--;
		ap_free(o);
	}
}

/* Applies approval.requested. */
static int
ap_apply_requested(json_t *p)
{
	struct approval	*a;
	const char	*id = ap_str(p, "id"), *sid = ap_str(p, "session");
	const char	*call = ap_str(p, "call_id"), *tool = ap_str(p, "tool");
	json_t		*args = json_object_get(p, "args"), *v;
	int		 why;

	why = ap_parse(ap_whys, sizeof ap_whys / sizeof ap_whys[0],
	    ap_str(p, "why"));
	if (id == NULL || strlen(id) != APPROVAL_ID_LEN || sid == NULL ||
	    call == NULL || tool == NULL || !json_is_object(args) || why == -1 ||
	    approval_get(id) != NULL)
		return -1;
	a = xcalloc(1, sizeof *a);
	snprintf(a->id, sizeof a->id, "%s", id);
	a->session = xstrdup(sid);
	a->call_id = xstrdup(call);
	a->tool = xstrdup(tool);
	a->args = json_deep_copy(args);
	a->path = ap_strdup(ap_str(p, "path"));
	a->command = ap_strdup(ap_str(p, "command"));
	a->diff = ap_strdup(ap_str(p, "diff"));
	if ((v = json_object_get(p, "proposed")) != NULL && json_is_string(v)) {
		a->proposed_len = json_string_length(v);
		a->proposed = xmalloc(a->proposed_len + 1);
		memcpy(a->proposed, json_string_value(v), a->proposed_len + 1);
	}
	a->rid = ap_strdup(ap_str(p, "request_id"));
	a->turn = (uint64_t)ap_int(p, "turn");
	a->why = (enum approval_why)why;
	a->state = APPROVAL_PENDING;
	a->announced = -1;
	a->created_ms = ap_int(p, "created_ms");
	a->expires_ms = ap_int(p, "expires_ms");
	TAILQ_INSERT_TAIL(&ap_all, a, entry);
	ap_nlive++;
	return 0;
}

/* Adds a grant from its JSON. */
static int
ap_apply_grant(json_t *g)
{
	struct grant	*gr;
	const char	*id = ap_str(g, "id");

	if (id == NULL || strlen(id) != APPROVAL_ID_LEN ||
	    ap_str(g, "session") == NULL || ap_str(g, "tool") == NULL ||
	    ap_grant_get(id) != NULL)
		return -1;
	gr = xcalloc(1, sizeof *gr);
	snprintf(gr->id, sizeof gr->id, "%s", id);
	gr->session = xstrdup(ap_str(g, "session"));
	gr->tool = xstrdup(ap_str(g, "tool"));
	gr->path = ap_strdup(ap_str(g, "path"));
	gr->command = ap_strdup(ap_str(g, "command"));
	gr->approval = ap_strdup(ap_str(g, "approval"));
	gr->created_ms = ap_int(g, "created_ms");
	TAILQ_INSERT_TAIL(&ap_grants, gr, entry);
	ap_ngrants++;
	return 0;
}

/* Applies approval.resolved: a decision, an expiry or a withdrawal. */
static int
ap_apply_resolved(json_t *p, int64_t ts)
{
	struct approval	*a = approval_get(ap_str(p, "id"));
	json_t		*g = json_object_get(p, "grant");
	const char	*content = ap_str(p, "content");
	int		 st, d = -1;

	st = ap_parse(ap_states, sizeof ap_states / sizeof ap_states[0],
	    ap_str(p, "state"));
	if (a == NULL || !ap_open(a->state) || (st != APPROVAL_APPROVED &&
	    st != APPROVAL_EDITED && st != APPROVAL_DENIED &&
	    st != APPROVAL_EXPIRED && st != APPROVAL_WITHDRAWN))
		return -1;
	if (ap_str(p, "decision") != NULL && (d = ap_parse(ap_decisions,
	    sizeof ap_decisions / sizeof ap_decisions[0],
	    ap_str(p, "decision"))) == -1)
		return -1;
	if (g != NULL && ap_apply_grant(g) != 0)
		return -1;
	a->decided = d != -1;
	a->decision = d != -1 ? (enum approval_decision)d : APPROVAL_APPROVE;
	free(a->reason);
	a->reason = ap_strdup(ap_str(p, "reason"));
	a->scope_session = ap_streq(ap_str(p, "scope"), "session");
	free(a->content);
	a->content = NULL;
	a->content_len = 0;
	if (content != NULL) {
		a->content_len = json_string_length(json_object_get(p, "content"));
		a->content = xmalloc(a->content_len + 1);
		memcpy(a->content, content, a->content_len + 1);
	}
	free(a->resolve_rid);
	a->resolve_rid = ap_strdup(ap_str(p, "request_id"));
	a->resolved_ms = ts;
	ap_set_state(a, (enum approval_state)st);
	return 0;
}

/* Applies one record to memory (live and at replay). */
static int
ap_apply(const char *type, json_t *p, int64_t ts)
{
	struct approval	*a;
	struct grant	*g;
	json_t		*v;

	if (strcmp(type, "approval.requested") == 0)
		return ap_apply_requested(p);
	if (strcmp(type, "approval.resolved") == 0)
		return ap_apply_resolved(p, ts);
	if (strcmp(type, "approval.revoke") == 0) {
		if ((g = ap_grant_get(ap_str(p, "id") != NULL ?
		    ap_str(p, "id") : "")) == NULL)
			return -1;
		TAILQ_REMOVE(&ap_grants, g, entry);
		ap_ngrants--;
		ap_grant_free(g);
		return 0;
	}
	if ((a = approval_get(ap_str(p, "id"))) == NULL)
		return -1;
	if (strcmp(type, "approval.applying") == 0) {
		if (a->state != APPROVAL_APPROVED && a->state != APPROVAL_EDITED)
			return -1;
		ap_set_state(a, APPROVAL_APPLYING);
		return 0;
	}
	if (strcmp(type, "approval.applied") == 0) {
		if (a->state != APPROVAL_APPLYING)
			return -1;
		json_decref(a->result);
		v = json_object_get(p, "result");
		a->result = v != NULL ? json_deep_copy(v) : NULL;
		ap_set_state(a, json_is_true(json_object_get(p, "ok")) ?
		    APPROVAL_APPLIED : APPROVAL_FAILED);
		return 0;
	}
	if (strcmp(type, "approval.interrupted") == 0) {
		if (a->state != APPROVAL_APPLYING)
			return -1;
		free(a->note);
		a->note = ap_strdup(ap_str(p, "note"));
		a->expires_ms = ap_int(p, "expires_ms");
		/* Asked again: the old decision no longer stands. */
		a->decided = 0;
		free(a->content);
		a->content = NULL;
		a->content_len = 0;
		ap_set_state(a, APPROVAL_INTERRUPTED);
		return 0;
	}
	return -1;
}

/* The log failed a record: stop changing anything until a restart. */
static void
ap_storage_failed(int error)
{
	if (ap_broken)
		return;
	ap_broken = 1;
	log_error("approvals: the disk log failed a record (%s); approvals "
	    "take no more changes until gbrd restarts", strerror(error));
}

/* Disk log callback: runs a record's continuation. */
static void
ap_logged_cb(void *arg, int error, uint64_t seq)
{
	struct ap_wait	*w = arg;

	if (error != 0)
		ap_storage_failed(error);
	if (w->fn != NULL)
		w->fn(w, error);
	json_decref(w->reply);
	free(w);
}

/* Fails a call because the log refused a record. */
static int
ap_fail_storage(struct session_error *err)
{
	int	e = disklog_error();

	if (e == EAGAIN)
		return session_error_set(err, GBR_ERR_BUSY, NULL, "the disk log is "
		    "behind; try again shortly");
	if (e == ESHUTDOWN)
		return session_error_set(err, GBR_ERR_SHUTTING_DOWN, NULL,
		    "the daemon is shutting down");
	if (e == EMSGSIZE)
		return session_error_set(err, GBR_ERR_TOO_LARGE, NULL,
		    "the change is too large for the disk log");
	return session_error_set(err, GBR_ERR_STORAGE, json_pack("{s:s}", "errno",
	    strerror(e)), "the disk log cannot take the change: %s",
	    strerror(e));
}

/*
 * Appends a record (payload borrowed) and applies it. w (may be NULL) is
 * the continuation; it is freed here if the log refuses. Returns 0, or -1
 * if the log would not take it (nothing changed).
 */
static int
ap_record(const char *type, json_t *payload, int durable, struct ap_wait *w)
{
	if (disklog_append(type, payload, durable, w != NULL ? ap_logged_cb :
	    NULL, w) == 0) {
		if (w != NULL) {
			json_decref(w->reply);
			free(w);
		}
		return -1;
	}
	if (ap_apply(type, payload, osdep_now_ms()) != 0)
		fatalx("approvals: %s was logged but does not apply", type);
	return 0;
}

/* A continuation. */
static struct ap_wait *
ap_wait_new(void (*fn)(struct ap_wait *, int), const char *id,
    approval_done_cb cb, void *arg)
{
	struct ap_wait	*w = xcalloc(1, sizeof *w);

	w->fn = fn;
	if (id != NULL)
		snprintf(w->id, sizeof w->id, "%s", id);
	w->cb = cb;
	w->arg = arg;
	return w;
}

/* The approval object of the protocol. */
json_t *
approval_json(const struct approval *a)
{
	json_t	*o;

	o = json_pack("{s:s, s:s, s:s, s:O, s:s?, s:s?, s:s?, s:s, s:s, s:I, "
	    "s:s, s:s}",
	    "id", a->id, "session", a->session, "tool", a->tool,
	    "args", a->args, "path", a->path, "command", a->command,
	    "diff", a->diff, "why", approval_why_name(a->why),
	    "state", approval_state_name(a->state),
	    "created_ms", (json_int_t)a->created_ms,
	    "scope", a->scope_session ? "session" : "once",
	    "call_id", a->call_id);
	json_object_set_new(o, "path", a->path != NULL ? json_string(a->path) :
	    json_null());
	json_object_set_new(o, "command", a->command != NULL ?
	    json_string(a->command) : json_null());
	json_object_set_new(o, "diff", a->diff != NULL ? json_string(a->diff) :
	    json_null());
	json_object_set_new(o, "expires_ms", a->expires_ms != 0 ?
	    json_integer((json_int_t)a->expires_ms) : json_null());
	json_object_set_new(o, "decision", a->decided ?
	    json_string(ap_decisions[a->decision]) : json_null());
	json_object_set_new(o, "reason", a->reason != NULL ?
	    json_string(a->reason) : json_null());
	json_object_set_new(o, "result", a->result != NULL ?
	    json_incref(a->result) : json_null());
	json_object_set_new(o, "request_id", a->rid != NULL ?
	    json_string(a->rid) : json_null());
	if (a->note != NULL)
		json_object_set_new(o, "note", json_string(a->note));
	if (a->resolved_ms != 0)
		json_object_set_new(o, "resolved_ms",
		    json_integer((json_int_t)a->resolved_ms));
	return o;
}

/*
 * Announces a change in the approval's session: the event (with cb, or
 * none). Returns 0, or -1 if there is no such session or the event could
 * not be appended (then cb never runs).
 */
static int
ap_announce(struct approval *a, const char *type, session_done_cb cb,
    void *arg)
{
	struct session_error	 err;
	struct session		*s;

	if ((s = session_find(a->session)) == NULL)
		return -1;
	if (session_event(s, type, json_pack("{s:o}", "approval",
	    approval_json(a)), cb, arg, &err) != 0) {
		log_warn("approval %s: %s event not recorded: %s", a->id, type,
		    err.message);
		free(err.message);
		json_decref(err.data);
		return -1;
	}
	a->announced = (int)a->state;
	return 0;
}

/* Puts a session in awaiting_approval while it has open approvals, else back. */
static void
ap_sync_session(const char *sid)
{
	struct session_error	 err;
	struct session		*s;
	struct approval		*a;
	int			 open = 0;

	if ((s = session_find(sid)) == NULL)
		return;
	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state) && strcmp(a->session, sid) == 0)
			open = 1;
	if (session_await_approval(s, open, &err) != 0) {
		log_warn("session %s: state not changed for approvals: %s", sid,
		    err.message);
		free(err.message);
		json_decref(err.data);
	}
}

/* Counts the approvals that are not finished. */
unsigned
approval_pending_count(void)
{
	struct approval	*a;
	unsigned	 n = 0;

	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state))
			n++;
	return n;
}

/* Continuation of a create: the event is announced (or failed). */
static void
ap_create_announced(void *arg, int error, json_t *payload)
{
	struct ap_wait	*w = arg;

	w->cb(w->arg, error, payload);
	free(w);
}

/* Test hook: the new approval is durable; die before its event. */
static void
ap_crash_now(struct ap_wait *w, int error)
{
	log_warn("approval %s is on disk: exiting before its session event "
	    "(GBR_TEST_CRASH_BEFORE_ANNOUNCE)", w->id);
	_exit(137);
}

/* Creates a pending approval (see approval.h). */
int
approval_create(const struct approval_req *req, char *id, approval_done_cb cb,
    void *arg, struct session_error *err)
{
	const struct config	*cfg = config_get();
	struct approval		*a;
	struct ap_wait		*w;
	struct session		*s;
	json_t			*p;
	int64_t			 now = osdep_now_ms();

	if (ap_broken)
		return session_error_set(err, GBR_ERR_STORAGE, NULL, "approvals cannot "
		    "change: the disk log failed; restart gbrd");
	if ((s = session_find(req->session)) == NULL)
		return session_error_set(err, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s}",
		    "session", req->session), "session %s is closed",
		    req->session);
	if (ap_nlive >= cfg->approval_max_pending)
		return session_error_set(err, GBR_ERR_LIMIT_REACHED, json_pack("{s:s, s:I}",
		    "limit", "max_pending", "max",
		    (json_int_t)cfg->approval_max_pending), "%u approvals are "
		    "waiting, the configured maximum; decide some first",
		    ap_nlive);
	do
		ap_new_id(id, 'a');
	while (approval_get(id) != NULL);
	p = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:I, s:I}",
	    "id", id, "session", session_id(s), "call_id", req->call_id,
	    "tool", req->tool, "args", req->args,
	    "why", approval_why_name(req->why),
	    "created_ms", (json_int_t)now,
	    "turn", (json_int_t)req->turn);
	if (req->path != NULL)
		json_object_set_new(p, "path", json_string(req->path));
	if (req->command != NULL)
		json_object_set_new(p, "command", json_string(req->command));
	if (req->diff != NULL)
		json_object_set_new(p, "diff", json_string(req->diff));
	if (req->proposed != NULL)
		json_object_set_new(p, "proposed", json_stringn(req->proposed,
		    req->proposed_len));
	if (req->request_id != NULL)
		json_object_set_new(p, "request_id", json_string(req->request_id));
	if (cfg->approval_expire_after != 0)
		json_object_set_new(p, "expires_ms", json_integer((json_int_t)(now +
		    (int64_t)cfg->approval_expire_after * 1000)));
	w = ap_crash_before_announce ? ap_wait_new(ap_crash_now, id, NULL,
	    NULL) : NULL;
	if (ap_record("approval.requested", p, 1, w) != 0) {
		json_decref(p);
		return ap_fail_storage(err);
	}
	json_decref(p);
	a = approval_get(id);
	log_info("approval %s: session %s, %s (%s)%s%s", a->id, a->session,
	    a->tool, approval_why_name(a->why), a->path != NULL ? " on " : "",
	    a->path != NULL ? a->path : "");
	if (ap_crash_before_announce)
		return 0;	/* the record's callback ends gbrd: no event */
	w = ap_wait_new(NULL, id, cb, arg);
	if (ap_announce(a, "approval.requested", ap_create_announced, w) != 0) {
		/* The approval stands (approval.list shows it); say so now. */
		p = json_pack("{s:s, s:s, s:o}", "session", a->session, "type",
		    "approval.requested", "approval", approval_json(a));
		cb(arg, 0, p);
		json_decref(p);
		free(w);
	}
	ap_sync_session(a->session);
	ap_schedule();
	return 0;
}

/* Appends the "applying" record and runs the action once it is durable. */
static void	ap_applying_written(struct ap_wait *, int);

/* Starts applying an approved or edited approval. */
static void
ap_start_applying(struct approval *a)
{
	json_t	*p = json_pack("{s:s}", "id", a->id);

	if (ap_record("approval.applying", p, 1,
	    ap_wait_new(ap_applying_written, a->id, NULL, NULL)) != 0)
		log_error("approval %s: the disk log refused the applying "
		    "record (%s); it is applied at the next start", a->id,
		    strerror(disklog_error()));
	json_decref(p);
}

/* "applying" is durable: run the action (toolcall.c). */
static void
ap_applying_written(struct ap_wait *w, int error)
{
	struct approval	*a = approval_get(w->id);

	if (error != 0 || a == NULL || a->state != APPROVAL_APPLYING)
		return;
	if (ap_crash_after_applying) {
		log_warn("test hook: exiting after approval %s is applying "
		    "(GBR_TEST_CRASH_AFTER_APPLYING)", a->id);
		_exit(137);
	}
	if (gbrd_shutting_down()) {
		/* The next start sees "applying" without "applied": interrupted. */
		log_warn("approval %s: not applied, the daemon is stopping",
		    a->id);
		return;
	}
	a->applying_started = 1;
	if (ap_hooks.apply != NULL)
		ap_hooks.apply(a->id);
}

/* The resolved record is durable: answer, then act. */
static void
ap_resolved_written(struct ap_wait *w, int error)
{
	struct approval	*a = approval_get(w->id);

	if (w->cb != NULL)
		w->cb(w->arg, error, w->reply);
	if (error != 0 || a == NULL)
		return;
	if (a->state == APPROVAL_DENIED || a->state == APPROVAL_EXPIRED ||
	    a->state == APPROVAL_WITHDRAWN) {
		if (ap_hooks.closed != NULL)
			ap_hooks.closed(a->id);
	}
}

/*
 * Appends approval.resolved for a (fields stolen: state and the rest),
 * announces it, and puts the session back. Returns 0 or -1 (err set).
 */
static int
ap_resolve_record(struct approval *a, json_t *fields, approval_done_cb cb,
    void *arg, struct session_error *err)
{
	struct ap_wait	*w;
	char		 id[APPROVAL_ID_LEN + 1];

	snprintf(id, sizeof id, "%s", a->id);
	json_object_set_new(fields, "id", json_string(a->id));
	w = ap_wait_new(ap_resolved_written, a->id, cb, arg);
	if (ap_record("approval.resolved", fields, 1, w) != 0) {
		json_decref(fields);
		return ap_fail_storage(err);
	}
	json_decref(fields);
	if ((a = approval_get(id)) == NULL)
		fatalx("approval %s vanished", id);
	/* What the resolver hears: the approval as decided. */
	w->reply = approval_json(a);
	ap_announce(a, "approval.resolved", NULL, NULL);
	if (a->state == APPROVAL_APPROVED || a->state == APPROVAL_EDITED)
		ap_start_applying(a);
	ap_sync_session(a->session);
	ap_schedule();
	return 0;
}

/* A human's decision (see approval.h). */
int
approval_resolve(const char *id, enum approval_decision d, const char *content,
    size_t content_len, const char *reason, const char *scope,
    const char *request_id, approval_done_cb cb, void *arg,
    struct session_error *err)
{
	struct approval	*a;
	json_t		*f, *reply;
	char		 gid[APPROVAL_ID_LEN + 1];
	int		 session_scope = 0;

	/* One whose session closed is withdrawn first, not applied. */
	ap_sweep_closed();
	if ((a = approval_get(id)) == NULL)
		return session_error_set(err, GBR_ERR_APPROVAL_NOT_FOUND, json_pack("{s:s%}",
		    "id", id, strlen(id) > 64 ? (size_t)64 : strlen(id)),
		    "no approval has the id '%.64s'", id);
	if (request_id != NULL && a->resolve_rid != NULL &&
	    strcmp(request_id, a->resolve_rid) == 0) {
		/* A resend of the decision that won: the same answer. */
		reply = approval_json(a);
		json_object_set_new(reply, "duplicate", json_true());
		cb(arg, 0, reply);
		json_decref(reply);
		return 0;
	}
	if (!ap_open(a->state))
		return session_error_set(err, GBR_ERR_ALREADY_RESOLVED, json_pack("{s:s, "
		    "s:s, s:o}", "id", a->id, "state",
		    approval_state_name(a->state), "decision", a->decided ?
		    json_string(ap_decisions[a->decision]) : json_null()),
		    "approval %s is already %s", a->id,
		    approval_state_name(a->state));
	if (ap_broken)
		return session_error_set(err, GBR_ERR_STORAGE, NULL, "approvals cannot "
		    "change: the disk log failed; restart gbrd");
	if (reason != NULL && strlen(reason) > AP_REASON_MAX)
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "reason"), "reason: at most %d bytes",
		    AP_REASON_MAX);
	if (request_id != NULL && (strlen(request_id) == 0 ||
	    strlen(request_id) > AP_RID_MAX))
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "request_id"), "request_id: 1 to %d bytes",
		    AP_RID_MAX);
	if (scope != NULL && strcmp(scope, "once") != 0 &&
	    strcmp(scope, "session") != 0)
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "scope"), "scope: \"once\" or \"session\"");
	if (d == APPROVAL_EDIT) {
		if (content == NULL)
			return session_error_set(err, GBR_ERR_INVALID_PARAMS,
			    json_pack("{s:s}", "field", "content"), "content: "
			    "required for edit (the whole new file)");
		if (strcmp(a->tool, "write_file") != 0 &&
		    strcmp(a->tool, "edit_file") != 0)
			return session_error_set(err, GBR_ERR_INVALID_PARAMS,
			    json_pack("{s:s}", "field", "decision"), "edit "
			    "applies to file changes only; this is %s", a->tool);
		if (content_len > APPROVAL_CONTENT_MAX)
			return session_error_set(err, GBR_ERR_TOO_LARGE, json_pack("{s:s}",
			    "field", "content"), "content: over %d bytes",
			    APPROVAL_CONTENT_MAX);
	} else if (content != NULL)
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "content"), "content: only for edit");
	/* .gbr_envs changes are asked every time: no grant for them. */
	if (d != APPROVAL_DENY && scope != NULL && strcmp(scope, "session") == 0 &&
	    a->why != APPROVAL_WHY_ENV_DIR)
		session_scope = 1;
	if (session_scope && ap_ngrants >= APPROVAL_GRANTS_MAX)
		return session_error_set(err, GBR_ERR_LIMIT_REACHED, json_pack("{s:s, s:I}",
		    "limit", "grants", "max", (json_int_t)APPROVAL_GRANTS_MAX),
		    "%d session grants exist; revoke some first",
		    APPROVAL_GRANTS_MAX);
	f = json_pack("{s:s, s:s, s:s}", "state", d == APPROVAL_DENY ? "denied" :
	    d == APPROVAL_EDIT ? "edited" : "approved", "decision",
	    ap_decisions[d], "scope", session_scope ? "session" : "once");
	if (reason != NULL)
		json_object_set_new(f, "reason", json_string(reason));
	if (request_id != NULL)
		json_object_set_new(f, "request_id", json_string(request_id));
	if (d == APPROVAL_EDIT)
		json_object_set_new(f, "content", json_stringn(content,
		    content_len));
	if (session_scope) {
		do
			ap_new_id(gid, 'g');
		while (ap_grant_get(gid) != NULL);
		json_object_set_new(f, "grant", json_pack("{s:s, s:s, s:s, s:s, "
		    "s:I}", "id", gid, "session", a->session, "tool", a->tool,
		    "approval", a->id, "created_ms", (json_int_t)osdep_now_ms()));
		if (a->path != NULL)
			json_object_set_new(json_object_get(f, "grant"), "path",
			    json_string(a->path));
		if (a->command != NULL)
			json_object_set_new(json_object_get(f, "grant"),
			    "command", json_string(a->command));
	}
	log_info("approval %s: %s%s%s", a->id, ap_decisions[d],
	    session_scope ? " for the session" : "",
	    reason != NULL ? " with a reason" : "");
	return ap_resolve_record(a, f, cb, arg, err);
}

/* Ends an approval without a decision (expired, withdrawn). */
static int
ap_end(struct approval *a, const char *state, const char *why)
{
	struct session_error	 err;
	json_t			*f;

	f = json_pack("{s:s}", "state", state);
	if (why != NULL)
		json_object_set_new(f, "reason", json_string(why));
	if (ap_resolve_record(a, f, NULL, NULL, &err) != 0) {
		log_warn("approval %s: not %s: %s", a->id, state, err.message);
		free(err.message);
		json_decref(err.data);
		return -1;
	}
	return 0;
}

/* The asker is gone: withdraw a pending approval. */
int
approval_withdraw(const char *id, const char *why)
{
	struct approval	*a = approval_get(id);

	if (a == NULL || !ap_open(a->state) || ap_broken)
		return -1;
	log_info("approval %s: withdrawn (%s)", a->id, why);
	return ap_end(a, "withdrawn", why);
}

/* Keeps a result within APPROVAL_RESULT_MAX bytes (new reference). */
static json_t *
ap_bounded(json_t *v)
{
	char	*s;
	size_t	 len;

	if (v == NULL)
		return NULL;
	s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	len = s != NULL ? strlen(s) : 0;
	free(s);
	if (len <= APPROVAL_RESULT_MAX)
		return json_deep_copy(v);
	return json_pack("{s:b, s:I, s:s}", "truncated", 1, "bytes",
	    (json_int_t)len, "note", "the result was too large to keep here; "
	    "the session's tool.result message has it");
}

/* The action finished: record applied or failed. */
void
approval_applied(const char *id, int failed, enum gbr_err kind,
    const char *reason, json_t *result)
{
	struct approval	*a = approval_get(id);
	json_t		*p, *r;

	if (a == NULL || a->state != APPROVAL_APPLYING)
		return;
	if (!failed)
		r = ap_bounded(result);
	else {
		r = json_pack("{s:{s:s, s:s}}", "error", "kind",
		    gbr_err_kind(kind), "message", reason != NULL ? reason :
		    "the tool failed");
		if (result != NULL)
			json_object_set_new(json_object_get(r, "error"), "data",
			    ap_bounded(result));
	}
	p = json_pack("{s:s, s:b}", "id", id, "ok", !failed);
	if (r != NULL)
		json_object_set_new(p, "result", r);
	if (ap_record("approval.applied", p, 1, NULL) != 0)
		log_error("approval %s: the disk log refused the applied record "
		    "(%s)", id, strerror(disklog_error()));
	else {
		log_info("approval %s: %s", id, failed ? "failed" : "applied");
		ap_announce(approval_get(id), "approval.resolved", NULL, NULL);
	}
	json_decref(p);
}

/* Finds a live approval of a call by its request_id. */
struct approval *
approval_find_request(const char *session, const char *request_id)
{
	struct approval	*a;

	TAILQ_FOREACH(a, &ap_all, entry)
		if (!ap_finished(a->state) && a->rid != NULL &&
		    strcmp(a->rid, request_id) == 0 &&
		    strcmp(a->session, session) == 0)
			return a;
	return NULL;
}

/* Accessors. */
const char *
approval_id(const struct approval *a)
{
	return a->id;
}

const char *
approval_session(const struct approval *a)
{
	return a->session;
}

const char *
approval_call_id(const struct approval *a)
{
	return a->call_id;
}

const char *
approval_tool(const struct approval *a)
{
	return a->tool;
}

json_t *
approval_args(const struct approval *a)
{
	return a->args;
}

const char *
approval_path(const struct approval *a)
{
	return a->path;
}

const char *
approval_request_id(const struct approval *a)
{
	return a->rid;
}

uint64_t
approval_turn(const struct approval *a)
{
	return a->turn;
}

enum approval_state
approval_state(const struct approval *a)
{
	return a->state;
}

enum approval_decision
approval_decision(const struct approval *a)
{
	return a->decision;
}

const char *
approval_reason(const struct approval *a)
{
	return a->reason;
}

const char *
approval_content(const struct approval *a, size_t *len)
{
	if (len != NULL)
		*len = a->content_len;
	return a->decided && a->decision == APPROVAL_EDIT ? a->content : NULL;
}

/*
 * The ids of the open approvals that pred selects (new array, *n set).
 * Ending one may forget old finished ones, so loops that end approvals
 * collect first and look each up again.
 */
static char (*ap_collect(int (*pred)(const struct approval *, int64_t),
    int64_t now, size_t *n))[APPROVAL_ID_LEN + 1]
{
	struct approval	*a;
	char		(*ids)[APPROVAL_ID_LEN + 1];
	size_t		 k = 0;

	TAILQ_FOREACH(a, &ap_all, entry)
		k += ap_open(a->state) && pred(a, now);
	ids = xcalloc(k + 1, sizeof *ids);
	*n = 0;
	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state) && pred(a, now) && *n < k)
			snprintf(ids[(*n)++], sizeof ids[0], "%s", a->id);
	return ids;
}

/* ap_collect: the session is gone. */
static int
ap_orphaned(const struct approval *a, int64_t now)
{
	return session_find(a->session) == NULL;
}

/* ap_collect: the deadline has passed. */
static int
ap_due(const struct approval *a, int64_t now)
{
	return a->expires_ms != 0 && a->expires_ms <= now;
}

/* Withdraws the open approvals whose session is gone. */
static void
ap_sweep_closed(void)
{
	struct approval	*a;
	struct grant	*g, *gnext;
	char		(*ids)[APPROVAL_ID_LEN + 1];
	size_t		 i, n;

	ids = ap_collect(ap_orphaned, 0, &n);
	for (i = 0; i < n && !ap_broken; i++)
		if ((a = approval_get(ids[i])) != NULL && ap_open(a->state))
			ap_end(a, "withdrawn", "the session was closed");
	free(ids);
	/* Grants die with their session (memory only: nothing to replay). */
	for (g = TAILQ_FIRST(&ap_grants); g != NULL; g = gnext) {
		gnext = TAILQ_NEXT(g, entry);
		if (session_find(g->session) == NULL) {
			TAILQ_REMOVE(&ap_grants, g, entry);
			ap_ngrants--;
			ap_grant_free(g);
		}
	}
}

/* The proposed new file of a file tool's approval (borrowed), or NULL. */
static const char *
ap_proposed(const struct approval *a, size_t *len)
{
	json_t	*c;

	if (a->proposed != NULL) {
		*len = a->proposed_len;
		return a->proposed;
	}
	c = json_object_get(a->args, "content");
	if (strcmp(a->tool, "write_file") != 0 || !json_is_string(c))
		return NULL;
	*len = json_string_length(c);
	return json_string_value(c);
}

/* Withdraws what waits on sessions that are closed (session.close). */
void
approval_sweep(void)
{
	ap_sweep_closed();
}

/* approval.list (see approval.h). */
json_t *
approval_list(const char *session, int all, const char *id, int *more)
{
	struct approval	*a;
	json_t		*arr = json_array(), *o;
	const char	*content;
	char		*enc;
	size_t		 len, budget = APPROVAL_LIST_CONTENT, bytes = 0;
	size_t		 max = config_get()->client_queue_bytes / 2;

	*more = 0;
	ap_sweep_closed();
	TAILQ_FOREACH(a, &ap_all, entry) {
		if (session != NULL && strcmp(a->session, session) != 0)
			continue;
		if (id != NULL ? strcmp(a->id, id) != 0 :
		    !all && !ap_open(a->state))
			continue;
		o = approval_json(a);
		/* The reply must fit a client's queue: the rest is "more". */
		enc = json_dumps(o, JSON_COMPACT);
		len = enc != NULL ? strlen(enc) : 0;
		free(enc);
		if (json_array_size(arr) > 0 && bytes + len > max) {
			json_decref(o);
			*more = 1;
			break;
		}
		bytes += len;
		content = ap_proposed(a, &len);
		if (content != NULL && len <= budget && bytes + len <= max) {
			json_object_set_new(o, "content", json_stringn(content,
			    len));
			budget -= len;
			bytes += len;
		} else {
			json_object_set_new(o, "content", json_null());
			if (content != NULL)
				json_object_set_new(o, "content_omitted",
				    json_true());
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

/* A grant that lets a call through, or NULL. */
const char *
approval_grant_find(const char *session, const char *tool, const char *path,
    const char *command)
{
	struct grant	*g;

	TAILQ_FOREACH(g, &ap_grants, entry)
		if (strcmp(g->session, session) == 0 &&
		    strcmp(g->tool, tool) == 0 && ap_streq(g->path, path) &&
		    ap_streq(g->command, command))
			return g->id;
	return NULL;
}

/* approval.grants (see approval.h). */
json_t *
approval_grants(const char *session)
{
	struct grant	*g;
	json_t		*arr = json_array();

	ap_sweep_closed();
	TAILQ_FOREACH(g, &ap_grants, entry) {
		if (session != NULL && strcmp(g->session, session) != 0)
			continue;
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:o, "
		    "s:I, s:s?}", "id", g->id, "session", g->session, "tool",
		    g->tool, "path", g->path != NULL ? json_string(g->path) :
		    json_null(), "command", g->command != NULL ?
		    json_string(g->command) : json_null(), "created_ms",
		    (json_int_t)g->created_ms, "approval", g->approval));
	}
	return arr;
}

/* The revoke record is durable: answer. */
static void
ap_revoked_written(struct ap_wait *w, int error)
{
	w->cb(w->arg, error, w->reply);
}

/* Revokes a grant (see approval.h). */
int
approval_revoke(const char *grant_id, approval_done_cb cb, void *arg,
    struct session_error *err)
{
	struct ap_wait	*w;
	json_t		*p;

	if (ap_grant_get(grant_id) == NULL)
		return session_error_set(err, GBR_ERR_NOT_FOUND, json_pack("{s:s%}",
		    "grant", grant_id, strlen(grant_id) > 64 ? (size_t)64 :
		    strlen(grant_id)), "no grant has the id '%.64s'", grant_id);
	if (ap_broken)
		return session_error_set(err, GBR_ERR_STORAGE, NULL, "approvals cannot "
		    "change: the disk log failed; restart gbrd");
	w = ap_wait_new(ap_revoked_written, NULL, cb, arg);
	w->reply = json_pack("{s:b, s:s}", "revoked", 1, "id", grant_id);
	p = json_pack("{s:s}", "id", grant_id);
	if (ap_record("approval.revoke", p, 1, w) != 0) {
		json_decref(p);
		return ap_fail_storage(err);
	}
	json_decref(p);
	log_info("grant %s revoked", grant_id);
	return 0;
}

/* The expiry timer: expires what is due, then waits for the next. */
static void
ap_timer_cb(evutil_socket_t fd, short events, void *arg)
{
	struct approval	*a;
	char		(*ids)[APPROVAL_ID_LEN + 1];
	size_t		 i, n;

	ids = ap_collect(ap_due, osdep_now_ms(), &n);
	for (i = 0; i < n && !ap_broken; i++) {
		if ((a = approval_get(ids[i])) == NULL || !ap_open(a->state))
			continue;
		log_info("approval %s: expired", a->id);
		ap_end(a, "expired", "nobody decided in time");
	}
	free(ids);
	ap_sweep_closed();
	ap_schedule();
}

/* Arms the timer for the next expiry. */
static void
ap_schedule(void)
{
	struct approval	*a;
	struct timeval	 tv;
	int64_t		 next = 0, wait;

	if (gbrd_base() == NULL)
		return;
	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state) && a->expires_ms != 0 &&
		    (next == 0 || a->expires_ms < next))
			next = a->expires_ms;
	if (ap_timer == NULL && (ap_timer = evtimer_new(gbrd_base(),
	    ap_timer_cb, NULL)) == NULL)
		fatalx("evtimer_new failed");
	if (next == 0) {
		evtimer_del(ap_timer);
		return;
	}
	wait = next - osdep_now_ms();
	if (wait < 0)
		wait = 0;
	/* Wake at least hourly: the wall clock may jump. */
	if (wait > 3600 * 1000)
		wait = 3600 * 1000;
	tv.tv_sec = (time_t)(wait / 1000);
	tv.tv_usec = (suseconds_t)(wait % 1000) * 1000 + 1000;
	if (tv.tv_usec >= 1000000) {
		tv.tv_sec++;
		tv.tv_usec -= 1000000;
	}
	evtimer_add(ap_timer, &tv);
}

/* Disk log: the live state. */
static json_t *
ap_snapshot(void)
{
	struct approval	*a;
	struct grant	*g;
	json_t		*arr = json_array(), *garr = json_array(), *o;

	TAILQ_FOREACH(a, &ap_all, entry) {
		o = approval_json(a);
		json_object_set_new(o, "turn", json_integer((json_int_t)a->turn));
		if (a->rid != NULL)
			json_object_set_new(o, "request_id", json_string(a->rid));
		if (a->resolve_rid != NULL)
			json_object_set_new(o, "resolve_request_id",
			    json_string(a->resolve_rid));
		if (a->content != NULL)
			json_object_set_new(o, "content", json_stringn(a->content,
			    a->content_len));
		if (a->proposed != NULL)
			json_object_set_new(o, "proposed", json_stringn(
			    a->proposed, a->proposed_len));
		json_object_set_new(o, "decided", json_boolean(a->decided));
		json_object_set_new(o, "announced", a->announced == -1 ?
		    json_null() : json_string(ap_states[a->announced]));
		json_array_append_new(arr, o);
	}
	TAILQ_FOREACH(g, &ap_grants, entry)
		json_array_append_new(garr, json_pack("{s:s, s:s, s:s, s:s?, "
		    "s:s?, s:s?, s:I}", "id", g->id, "session", g->session,
		    "tool", g->tool, "path", g->path, "command", g->command,
		    "approval", g->approval, "created_ms",
		    (json_int_t)g->created_ms));
	return json_pack("{s:i, s:o, s:o}", "version", AP_SNAPSHOT_VERSION,
	    "approvals", arr, "grants", garr);
}

/* Disk log: the newest snapshot's state. */
static int
ap_restore(json_t *state)
{
	struct approval	*a;
	json_t		*arr, *garr, *o, *v;
	size_t		 i;
	int		 st, d;

	if (json_unpack(state, "{s:o, s:o}", "approvals", &arr, "grants",
	    &garr) != 0 || !json_is_array(arr) || !json_is_array(garr) ||
	    ap_int(state, "version") != AP_SNAPSHOT_VERSION) {
		log_error("approval snapshot: unknown layout");
		return -1;
	}
	json_array_foreach(arr, i, o) {
		st = ap_parse(ap_states, sizeof ap_states / sizeof ap_states[0],
		    ap_str(o, "state"));
		if (st == -1 || ap_apply_requested(o) != 0) {
			log_error("approval snapshot: approval %zu is malformed", i);
			return -1;
		}
		a = TAILQ_LAST(&ap_all, approval_list);
		a->state = (enum approval_state)st;
		/* A snapshot from before "announced" existed: all were shown. */
		if ((v = json_object_get(o, "announced")) == NULL)
			a->announced = st;
		else if (json_is_null(v))
			a->announced = -1;
		else if ((a->announced = ap_parse(ap_states, sizeof ap_states /
		    sizeof ap_states[0], json_string_value(v))) == -1) {
			log_error("approval snapshot: approval %zu is malformed", i);
			return -1;
		}
		if (ap_finished(a->state)) {
			ap_nlive--;
			ap_ndone++;
		}
		a->expires_ms = ap_int(o, "expires_ms");
		a->resolved_ms = ap_int(o, "resolved_ms");
		a->decided = json_is_true(json_object_get(o, "decided"));
		d = ap_parse(ap_decisions, sizeof ap_decisions /
		    sizeof ap_decisions[0], ap_str(o, "decision"));
		a->decision = d != -1 ? (enum approval_decision)d :
		    APPROVAL_APPROVE;
		a->scope_session = ap_streq(ap_str(o, "scope"), "session");
		a->reason = ap_strdup(ap_str(o, "reason"));
		a->note = ap_strdup(ap_str(o, "note"));
		a->resolve_rid = ap_strdup(ap_str(o, "resolve_request_id"));
		if ((v = json_object_get(o, "content")) != NULL &&
		    json_is_string(v)) {
			a->content_len = json_string_length(v);
			a->content = xmalloc(a->content_len + 1);
			memcpy(a->content, json_string_value(v),
			    a->content_len + 1);
		}
		v = json_object_get(o, "result");
		if (v != NULL && !json_is_null(v))
			a->result = json_deep_copy(v);
	}
	json_array_foreach(garr, i, o) {
		if (ap_apply_grant(o) != 0) {
			log_error("approval snapshot: grant %zu is malformed", i);
			return -1;
		}
	}
	return 0;
}

/* Disk log: one record after the snapshot. */
static int
ap_replay(uint64_t lseq, int64_t ts, const char *type, json_t *payload)
{
	if (ap_apply(type, payload, ts) != 0) {
		log_error("disk log record %llu (%s) does not fit the approvals "
		    "replayed so far", (unsigned long long)lseq, type);
		return -1;
	}
	return 0;
}

/*
 * Replay found an approval's event in its session's stream: what the
 * stream showed of it, so recovery can add what a crash kept out.
 */
static void
ap_event_replayed(json_t *payload)
{
	const char	*type = ap_str(payload, "type");
	json_t		*o = json_object_get(payload, "approval");
	struct approval	*a;
	int		 st;

	if (type == NULL || strncmp(type, "approval.", 9) != 0 ||
	    (a = approval_get(ap_str(o, "id"))) == NULL)
		return;
	st = ap_parse(ap_states, sizeof ap_states / sizeof ap_states[0],
	    ap_str(o, "state"));
	a->announced = st != -1 ? st : (int)a->state;
}

/* Registers the module and reads the test hooks. */
void
approval_init(const struct approval_hooks *hooks)
{
	const char	*v = getenv("GBR_TEST_CRASH_AFTER_APPLYING");

	ap_hooks = *hooks;
	if (v != NULL && strcmp(v, "1") == 0) {
		ap_crash_after_applying = 1;
		log_warn("test hook: gbrd exits right after an approval is "
		    "applying (GBR_TEST_CRASH_AFTER_APPLYING)");
	}
	v = getenv("GBR_TEST_CRASH_BEFORE_ANNOUNCE");
	if (v != NULL && strcmp(v, "1") == 0) {
		ap_crash_before_announce = 1;
		log_warn("test hook: gbrd exits once a new approval is on disk, "
		    "before its session event (GBR_TEST_CRASH_BEFORE_ANNOUNCE)");
	}
	session_observe_events(ap_event_replayed);
	disklog_register(&ap_module);
}

/* The applies recovery found: run from the loop, once it turns. */
static void
ap_kick_cb(evutil_socket_t fd, short events, void *arg)
{
	struct approval	*a;

	TAILQ_FOREACH(a, &ap_all, entry)
		if (a->state == APPROVAL_APPROVED || a->state == APPROVAL_EDITED)
			ap_start_applying(a);
}

/* After replay: interrupted, expired, pending applies, session states. */
void
approval_recover(void)
{
	const struct config	*cfg = config_get();
	struct approval		*a;
	json_t			*p, *list, *o;
	const char		*note, *type;
	size_t			 i;
	unsigned		 nint = 0, nwait = 0, napply = 0;

	/*
	 * A change is logged before its session event; a crash in between
	 * (or an event the log refused) leaves the stream without it. Add
	 * it now, late: an open approval as approval.requested if nothing
	 * was shown yet, any other change as approval.resolved. One being
	 * applied is announced as interrupted below.
	 */
	TAILQ_FOREACH(a, &ap_all, entry) {
		if (a->announced == (int)a->state ||
		    a->state == APPROVAL_APPLYING)
			continue;
		type = a->announced == -1 && a->state == APPROVAL_PENDING ?
		    "approval.requested" : "approval.resolved";
		if (ap_announce(a, type, NULL, NULL) == 0)
			log_warn("approval %s: its %s event was missing from "
			    "session %s (gbrd stopped before it); added now",
			    a->id, type, a->session);
	}
	TAILQ_FOREACH(a, &ap_all, entry) {
		if (a->state == APPROVAL_APPROVED || a->state == APPROVAL_EDITED)
			napply++;
		if (a->state != APPROVAL_APPLYING)
			continue;
		if (strcmp(a->tool, "write_file") == 0 ||
		    strcmp(a->tool, "edit_file") == 0)
			note = "gbrd stopped while applying this change: the file "
			    "may already hold it, in whole (writes are atomic) or "
			    "not at all; read it before deciding again";
		else
			note = "gbrd stopped while running this command: it may "
			    "have run, partly or fully; check its effects before "
			    "deciding again";
		p = json_pack("{s:s, s:s}", "id", a->id, "note", note);
		if (cfg->approval_expire_after != 0)
			json_object_set_new(p, "expires_ms", json_integer(
			    (json_int_t)(osdep_now_ms() +
			    (int64_t)cfg->approval_expire_after * 1000)));
		if (ap_record("approval.interrupted", p, 1, NULL) != 0)
			log_error("approval %s: cannot mark it interrupted: %s",
			    a->id, strerror(disklog_error()));
		else {
			log_warn("approval %s was applying when gbrd stopped: "
			    "interrupted; a human must decide again", a->id);
			ap_announce(a, "approval.resolved", NULL, NULL);
			nint++;
		}
		json_decref(p);
	}
	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state))
			nwait++;
	/* Sessions in awaiting_approval exactly while an approval waits. */
	list = session_open_ids(NULL);
	json_array_foreach(list, i, o)
		ap_sync_session(json_string_value(o));
	json_decref(list);
	if (napply > 0) {
		if ((ap_kick = event_new(gbrd_base(), -1, 0, ap_kick_cb,
		    NULL)) == NULL)
			fatalx("event_new failed");
		event_active(ap_kick, EV_TIMEOUT, 0);
	}
	if (nwait > 0 || nint > 0)
		log_info("%u approvals waiting for a human (%u interrupted), %u "
		    "to apply", nwait, nint, napply);
	/* Expired while the daemon was down, and the timer for the rest. */
	ap_timer_cb(-1, 0, NULL);
}

/* Frees everything. */
void
approval_shutdown(void)
{
	struct approval	*a;
	struct grant	*g;

	while ((a = TAILQ_FIRST(&ap_all)) != NULL) {
		TAILQ_REMOVE(&ap_all, a, entry);
		ap_free(a);
	}
	while ((g = TAILQ_FIRST(&ap_grants)) != NULL) {
		TAILQ_REMOVE(&ap_grants, g, entry);
		ap_grant_free(g);
	}
	ap_nlive = ap_ndone = ap_ngrants = 0;
	if (ap_timer != NULL)
		event_free(ap_timer);
	ap_timer = NULL;
	if (ap_kick != NULL)
		event_free(ap_kick);
	ap_kick = NULL;
}
