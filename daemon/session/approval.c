/*
 * Human approvals: the state machine of approval.h. This file owns the
 * approvals in memory and every change of state: creating one, a human's
 * decision, running the action once (applying, then applied or failed),
 * ending one without a decision (expired by the timer, withdrawn when the
 * asker or its session is gone), the session's awaiting_approval state
 * and approval.* events that follow, and what a start finds (recovery).
 * It does not write or read the disk log itself: each change is a record
 * that approval-log.c appends and applies (approval-int.h names the
 * parts); grants live in approval-grant.c, and what others read (the
 * accessors, the protocol object, approval.list) in approval-view.c.
 *
 * Bounds: [approval] max_pending approvals not finished, in all;
 * APPROVAL_KEEP_DONE finished ones kept for approval.list {all: true}
 * (the oldest are forgotten, in memory and in snapshots alike);
 * APPROVAL_GRANTS_MAX grants; results kept up to APPROVAL_RESULT_MAX
 * bytes (a summary beyond).
 *
 * Test hooks (fault.c, read once at start): GBR_TEST_CRASH_AFTER_APPLYING=1 makes
 * gbrd _exit(137) right after an "applying" record is durable and before
 * the action runs, so tests can kill it exactly between the two records;
 * GBR_TEST_CRASH_BEFORE_ANNOUNCE=1 makes it _exit(137) once a new
 * approval.requested record is durable, before its session event.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "approval-int.h"
#include "config.h"
#include "disklog.h"
#include "loop.h"
#include "fault.h"
#include "log.h"
#include "osdep.h"
#include "session.h"
#include "xmalloc.h"

#define AP_REASON_MAX		4096	/* bytes of a human's reason */

struct approval_list		 ap_all = TAILQ_HEAD_INITIALIZER(ap_all);
unsigned			 ap_nlive;	/* not finished */
unsigned			 ap_ndone;

static struct event_base	*ap_base;	/* the loop's, from approval_init */
static struct approval_hooks	 ap_hooks;
static int			 ap_crash_after_applying;
static int			 ap_crash_before_announce;
static struct event		*ap_timer;
static struct event		*ap_kick;	/* recovery's applies, from the loop */

const char *const ap_states[AP_NSTATES] = {
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

const char *const ap_whys[AP_NWHYS] = {
	[APPROVAL_WHY_PROTECTED_PATH] = "protected_path",
	[APPROVAL_WHY_ASK_COMMAND] = "ask_command",
	[APPROVAL_WHY_ASK_TOOL] = "ask_tool",
	[APPROVAL_WHY_ENV_DIR] = "env_dir",
	[APPROVAL_WHY_COMMAND_CHANGE] = "command_change",
	[APPROVAL_WHY_WRITE_PROTECTED] = "write_protected",
	[APPROVAL_WHY_UNCONFINED] = "unconfined",
	[APPROVAL_WHY_MCP_TOOL] = "mcp_tool",
};

const char *const ap_decisions[AP_NDECISIONS] = {
	[APPROVAL_APPROVE] = "approve",
	[APPROVAL_DENY] = "deny",
	[APPROVAL_EDIT] = "edit",
};

static void	 ap_schedule(void);

/* Finds a name in a table; -1 if absent. */
int
ap_parse(const char *const *table, size_t n, const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < n; i++)
		if (table[i] != NULL && strcmp(table[i], name) == 0)
			return (int)i;
	return -1;
}

/* True for the states that will not change any more. */
int
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
int
ap_open(enum approval_state st)
{
	return st == APPROVAL_PENDING || st == APPROVAL_INTERRUPTED;
}

/* A copy of a string, or NULL. */
char *
ap_strdup(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

/* Compares two strings that may be NULL. */
int
ap_streq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* A string of a JSON object, or NULL. */
const char *
ap_str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* An integer of a JSON object, or 0. */
int64_t
ap_int(json_t *o, const char *key)
{
	json_t	*v = json_object_get(o, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* A new random id with a one-letter prefix. */
void
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

/* Frees an approval (off the list). */
void
ap_free(struct approval *a)
{
	free(a->session);
	free(a->call_id);
	free(a->tool);
	json_decref(a->args);
	free(a->path);
	free(a->command);
	free(a->diff);
	free(a->effect);
	free(a->proposed);
	free(a->by);
	json_decref(a->pin);
	free(a->rid);
	free(a->reason);
	free(a->content);
	free(a->resolve_rid);
	free(a->note);
	json_decref(a->result);
	free(a);
}

/* Moves an approval to a state, keeping the counters right. */
void
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

/*
 * Announces a change in the approval's session: the event (with cb, or
 * none). Returns 0, or -1 if there is no such session or the event could
 * not be appended (then cb never runs).
 */
static int
ap_announce(struct approval *a, const char *type, session_done_cb cb,
    void *arg)
{
	struct gbr_error	 err;
	struct session		*s;

	if ((s = session_find(a->session)) == NULL)
		return -1;
	if (session_event(s, type, json_pack("{s:o}", "approval",
	    approval_json(a)), cb, arg, &err) != 0) {
		log_warn("approval %s: %s event not recorded: %s", a->id, type,
		    err.message);
		gbr_error_clear(&err);
		return -1;
	}
	a->announced = (int)a->state;
	return 0;
}

/* Puts a session in awaiting_approval while it has open approvals, else back. */
static void
ap_sync_session(const char *sid)
{
	struct gbr_error	 err;
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
		gbr_error_clear(&err);
	}
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
    void *arg, struct gbr_error *err)
{
	const struct config	*cfg = config_get();
	struct approval		*a;
	struct ap_wait		*w;
	struct session		*s;
	json_t			*p;
	int64_t			 now = osdep_now_ms();

	if (ap_broken)
		return gbr_error_set(err, GBR_ERR_STORAGE, NULL, "approvals cannot "
		    "change: the disk log failed; restart gbrd");
	if ((s = session_find(req->session)) == NULL)
		return gbr_error_set(err, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s}",
		    "session", req->session), "session %s is closed",
		    req->session);
	if (ap_nlive >= cfg->approval_max_pending)
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED, json_pack("{s:s, s:I}",
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
	if (req->effect != NULL)
		json_object_set_new(p, "effect", json_string(req->effect));
	if (req->proposed != NULL)
		json_object_set_new(p, "proposed", json_stringn(req->proposed,
		    req->proposed_len));
	if (req->pin != NULL)
		json_object_set_new(p, "pin", json_deep_copy(req->pin));
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
	if (loop_shutting_down()) {
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
    void *arg, struct gbr_error *err)
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
    const char *request_id, const char *by, json_t *who, approval_done_cb cb,
    void *arg, struct gbr_error *err)
{
	struct approval	*a;
	json_t		*f, *reply;
	int		 session_scope = 0;

	/* One whose session closed is withdrawn first, not applied. */
	ap_sweep_closed();
	if ((a = approval_get(id)) == NULL)
		return gbr_error_set(err, GBR_ERR_APPROVAL_NOT_FOUND, json_pack("{s:s%}",
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
		return gbr_error_set(err, GBR_ERR_ALREADY_RESOLVED, json_pack("{s:s, "
		    "s:s, s:o}", "id", a->id, "state",
		    approval_state_name(a->state), "decision", a->decided ?
		    json_string(ap_decisions[a->decision]) : json_null()),
		    "approval %s is already %s", a->id,
		    approval_state_name(a->state));
	if (ap_broken)
		return gbr_error_set(err, GBR_ERR_STORAGE, NULL, "approvals cannot "
		    "change: the disk log failed; restart gbrd");
	if (reason != NULL && strlen(reason) > AP_REASON_MAX)
		return gbr_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "reason"), "reason: at most %d bytes",
		    AP_REASON_MAX);
	if (scope != NULL && strcmp(scope, "once") != 0 &&
	    strcmp(scope, "session") != 0)
		return gbr_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "scope"), "scope: \"once\" or \"session\"");
	if (d == APPROVAL_EDIT) {
		if (content == NULL)
			return gbr_error_set(err, GBR_ERR_INVALID_PARAMS,
			    json_pack("{s:s}", "field", "content"), "content: "
			    "required for edit (the whole new file)");
		if (strcmp(a->tool, "write_file") != 0 &&
		    strcmp(a->tool, "edit_file") != 0)
			return gbr_error_set(err, GBR_ERR_INVALID_PARAMS,
			    json_pack("{s:s}", "field", "decision"), "edit "
			    "applies to file changes only; this is %s", a->tool);
		if (content_len > APPROVAL_CONTENT_MAX)
			return gbr_error_set(err, GBR_ERR_TOO_LARGE, json_pack("{s:s}",
			    "field", "content"), "content: over %d bytes",
			    APPROVAL_CONTENT_MAX);
	} else if (content != NULL)
		return gbr_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "content"), "content: only for edit");
	/* .gbr_envs changes are asked every time: no grant for them. */
	if (d != APPROVAL_DENY && scope != NULL && strcmp(scope, "session") == 0 &&
	    a->why != APPROVAL_WHY_ENV_DIR)
		session_scope = 1;
	if (session_scope && ap_grant_count() >= APPROVAL_GRANTS_MAX)
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED, json_pack("{s:s, s:I}",
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
	if (by != NULL && *by != '\0')
		json_object_set_new(f, "by", json_string(by));
	if (who != NULL)
		json_object_set(f, "who", who);	/* the audit trail's */
	if (d == APPROVAL_EDIT)
		json_object_set_new(f, "content", json_stringn(content,
		    content_len));
	if (session_scope)
		json_object_set_new(f, "grant", ap_grant_new(a));
	log_info("approval %s: %s%s%s", a->id, ap_decisions[d],
	    session_scope ? " for the session" : "",
	    reason != NULL ? " with a reason" : "");
	return ap_resolve_record(a, f, cb, arg, err);
}

/* Ends an approval without a decision (expired, withdrawn). */
static int
ap_end(struct approval *a, const char *state, const char *why)
{
	struct gbr_error	 err;
	json_t			*f;

	f = json_pack("{s:s}", "state", state);
	if (why != NULL)
		json_object_set_new(f, "reason", json_string(why));
	if (ap_resolve_record(a, f, NULL, NULL, &err) != 0) {
		log_warn("approval %s: not %s: %s", a->id, state, err.message);
		gbr_error_clear(&err);
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
void
ap_sweep_closed(void)
{
	struct approval	*a;
	char		(*ids)[APPROVAL_ID_LEN + 1];
	size_t		 i, n;

	ids = ap_collect(ap_orphaned, 0, &n);
	for (i = 0; i < n && !ap_broken; i++)
		if ((a = approval_get(ids[i])) != NULL && ap_open(a->state))
			ap_end(a, "withdrawn", "the session was closed");
	free(ids);
	ap_grant_forget_closed();
}

/* Withdraws what waits on sessions that are closed (session.close). */
void
approval_sweep(void)
{
	ap_sweep_closed();
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

	if (ap_base == NULL)
		return;
	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state) && a->expires_ms != 0 &&
		    (next == 0 || a->expires_ms < next))
			next = a->expires_ms;
	if (ap_timer == NULL && (ap_timer = evtimer_new(ap_base,
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
	tv.tv_usec = (long)(wait % 1000) * 1000 + 1000;
	if (tv.tv_usec >= 1000000) {
		tv.tv_sec++;
		tv.tv_usec -= 1000000;
	}
	evtimer_add(ap_timer, &tv);
}

/* Registers the module and reads the test hooks. */
void
approval_init(struct event_base *base, const struct approval_hooks *hooks)
{
	ap_base = base;
	ap_hooks = *hooks;
	/* gbrd exits right after an approval is applying ... */
	ap_crash_after_applying = fault_hook_on("CRASH_AFTER_APPLYING");
	/* ... or once a new approval is on disk, before its session event. */
	ap_crash_before_announce = fault_hook_on("CRASH_BEFORE_ANNOUNCE");
	ap_log_register();
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
		if ((ap_kick = event_new(ap_base, -1, 0, ap_kick_cb,
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

	while ((a = TAILQ_FIRST(&ap_all)) != NULL) {
		TAILQ_REMOVE(&ap_all, a, entry);
		ap_free(a);
	}
	ap_grant_clear();
	ap_nlive = ap_ndone = 0;
	if (ap_timer != NULL)
		event_free(ap_timer);
	ap_timer = NULL;
	if (ap_kick != NULL)
		event_free(ap_kick);
	ap_kick = NULL;
}
