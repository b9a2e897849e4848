/*
 * toolcall: the execution path of every tool call (see toolcall.h). This
 * file owns the calls in flight: who waits for each (callbacks, and the
 * connections to tell about an approval), running the tool, and the
 * tool.call and tool.result messages in the session's history. What the
 * policy's decision (policy.h) leads to and the approval a call waits for
 * are toolcall-approval.c's.
 *
 * A call is one struct toolcall, found by its session and call_id, by its
 * request_id, or by the approval it waits for. Several waiters may share a
 * call: the first asker and the resends of its request_id. A call that
 * nobody started in this run (an approval from before a restart that a
 * human approves now) is adopted from its approval and simply has no
 * waiter: its outcome still goes into the session's history.
 *
 * Every callback runs from the loop through the call's own deferred event,
 * never from inside toolcall_start, so a caller never sees its callback
 * before toolcall_start has returned.
 *
 * A call that may change the workspace is bracketed by rewind (rewind.h).
 * A command's bracket is two snapshots taken off the loop, so the call
 * waits twice: before the tool starts (TC_RW_BEFORE: a command that
 * started sooner would be in its own "before") and before its
 * tool.result is recorded (TC_RW_AFTER: the workspace.changed event goes
 * first). Cancelled while it waits for the first, it ends without
 * running; it never waits for a cancel in the second (the command ran:
 * what it changed is still recorded).
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "approval.h"
#include "conn.h"
#include "log.h"
#include "osdep.h"
#include "policy.h"
#include "rewind.h"
#include "session-env.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "toolcall-int.h"
#include "xmalloc.h"

#define TC_WAITERS_MAX		16	/* askers of one call (resends) */
#define TC_STREAM_BYTES		(1024 * 1024)	/* tool.output bytes per call */
#define TC_STREAM_EVENTS	4096	/* tool.output events per call */

static struct event_base	*tc_base;	/* the loop's, from toolcall_init */

struct tc_list	tc_calls = TAILQ_HEAD_INITIALIZER(tc_calls);

/* The deferred work of a call: notifications, then (once done) the end. */
static void	tc_deferred_cb(evutil_socket_t, short, void *);
static void	tc_tool_done(void *, int, enum gbr_err, const char *,
		    json_t *);

/* Allocates a call. */
struct toolcall *
tc_new(const char *session, const char *call_id, const char *tool,
    json_t *args, const char *rid, uint64_t turn, int flags)
{
	struct toolcall	*c = xcalloc(1, sizeof *c);

	snprintf(c->session, sizeof c->session, "%s", session);
	snprintf(c->call_id, sizeof c->call_id, "%s", call_id);
	c->tool = xstrdup(tool);
	c->rid = rid != NULL ? xstrdup(rid) : NULL;
	c->args = args != NULL ? json_deep_copy(args) : json_object();
	c->turn = turn;
	c->flags = flags;
	if ((c->ev = event_new(tc_base, -1, 0, tc_deferred_cb, c)) == NULL)
		fatalx("event_new failed");
	TAILQ_INSERT_TAIL(&tc_calls, c, entry);
	return c;
}

/* Frees a call and its waiters (no callback runs). */
void
tc_free(struct toolcall *c)
{
	struct tc_waiter	*w;

	TAILQ_REMOVE(&tc_calls, c, entry);
	while ((w = c->waiters) != NULL) {
		c->waiters = w->next;
		if (w->conn != NULL)
			conn_unref(w->conn);
		free(w);
	}
	event_free(c->ev);
	rewind_call_free(c->rw);	/* drops a snapshot in flight */
	free(c->run_tool);
	json_decref(c->run_args);
	free(c->out_reason);
	json_decref(c->out_result);
	free(c->tool);
	free(c->rid);
	free(c->grant);
	free(c->message);
	free(c->human_diff);
	json_decref(c->args);
	json_decref(c->event);
	json_decref(c->result);
	json_decref(c->record);
	free(c);
}

/* Adds a waiter. Returns -1 if too many wait already. */
static int
tc_add_waiter(struct toolcall *c, const struct toolcall_opts *o,
    toolcall_done_cb cb, void *arg, int dup)
{
	struct tc_waiter	*w, **pp;

	if (c->nwaiters >= TC_WAITERS_MAX)
		return -1;
	w = xcalloc(1, sizeof *w);
	w->cb = cb;
	w->arg = arg;
	w->dup = dup;
	if (o != NULL) {
		w->on_approval = o->on_approval;
		w->end_at_shutdown = (o->flags & TOOLCALL_END_AT_SHUTDOWN) != 0;
		if (o->asker != NULL) {
			w->conn = o->asker;
			w->had_conn = 1;
			conn_ref(w->conn);
		}
	}
	for (pp = &c->waiters; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = w;
	c->nwaiters++;
	return 0;
}

/* Schedules the deferred work. */
static void
tc_kick(struct toolcall *c)
{
	event_active(c->ev, EV_TIMEOUT, 0);
}

/* Sets the outcome and tells the waiters from the loop. */
void
tc_complete(struct toolcall *c, int ok, enum gbr_err kind, const char *message,
    json_t *result, json_t *record)
{
	c->state = TC_DONE;
	c->ok = ok;
	c->kind = kind;
	free(c->message);
	c->message = message != NULL ? xstrdup(message) : NULL;
	json_decref(c->result);
	c->result = result != NULL ? json_incref(result) : NULL;
	json_decref(c->record);
	c->record = record != NULL ? json_incref(record) : NULL;
	tc_kick(c);
}

/* The outcome of a call from its tool.result message. */
static void
tc_complete_from_record(struct toolcall *c, json_t *m)
{
	json_t		*e = json_object_get(m, "error");
	const char	*kind, *msg;
	enum gbr_err	 k;

	if (json_is_true(json_object_get(m, "ok"))) {
		tc_complete(c, 1, GBR_ERR_INTERNAL, NULL,
		    json_object_get(m, "result"), m);
		return;
	}
	kind = json_string_value(json_object_get(e, "kind"));
	msg = json_string_value(json_object_get(e, "message"));
	for (k = 0; k < GBR_ERR__COUNT; k++)
		if (kind != NULL && strcmp(gbr_err_kind(k), kind) == 0)
			break;
	if (k == GBR_ERR__COUNT)
		k = GBR_ERR_INTERNAL;
	tc_complete(c, 0, k, msg != NULL ? msg : "the tool failed",
	    json_object_get(e, "data"), m);
}

/* The deferred work: late notifications, then, once done, the end. */
static void
tc_deferred_cb(evutil_socket_t fd, short events, void *arg)
{
	struct toolcall		*c = arg;
	struct toolcall_outcome	 o;
	struct tc_waiter	*w;

	if (c->rw_phase == TC_RW_CANCELLED) {
		/* Cancelled while its "before" snapshot was taken. */
		c->rw_phase = TC_RW_NONE;
		tc_tool_done(c, 1, GBR_ERR_CANCELLED, "cancelled before it ran",
		    NULL);
		return;
	}
	if (c->state == TC_WAITING) {
		for (w = c->waiters; w != NULL; w = w->next)
			if (!w->notified)
				tc_notify(c, w);
		return;
	}
	if (c->state != TC_DONE)
		return;
	memset(&o, 0, sizeof o);
	o.session = c->session;
	o.call_id = c->call_id;
	o.tool = c->tool;
	o.ok = c->ok;
	o.result = c->ok ? c->result : NULL;
	o.kind = c->kind;
	o.message = c->message;
	o.data = c->ok ? NULL : c->result;
	o.approval_id = c->approval[0] != '\0' ? c->approval : NULL;
	o.record = c->record;
	while ((w = c->waiters) != NULL) {
		c->waiters = w->next;
		c->nwaiters--;
		o.duplicate = w->dup || c->dup_outcome;
		w->cb(w->arg, &o);
		if (w->conn != NULL)
			conn_unref(w->conn);
		free(w);
	}
	tc_free(c);
}

/*
 * True for the kinds that mean the sandbox refused a path. A file that is
 * not there, a folder read as a file or a file over a limit is the tool's
 * answer, not a refusal: no sandbox.denied for those.
 */
static int
tc_denial(enum gbr_err k)
{
	switch (k) {
	case GBR_ERR_PATH_TRAVERSAL:
	case GBR_ERR_PROTECTED_PATH:
	case GBR_ERR_READ_ONLY:
	case GBR_ERR_INVALID_PATH:
	case GBR_ERR_PERMISSION_DENIED:
		return 1;
	default:
		return 0;
	}
}

/* The tool.result record is written: the end. */
static void
tc_written(void *arg, int error, json_t *m)
{
	struct toolcall	*c = arg;
	char		*msg;

	if (error != 0) {
		msg = xasprintf("the result could not be written to the disk "
		    "log: %s", strerror(error));
		tc_complete(c, 0, GBR_ERR_STORAGE, msg, NULL, NULL);
		free(msg);
		return;
	}
	tc_complete_from_record(c, m);
}

/*
 * Records the outcome (a sandbox.denied event first for a refusal, then
 * the tool.result message); the waiters hear once it is written.
 * reason and result are borrowed.
 */
void
tc_record_result(struct toolcall *c, int failed, enum gbr_err kind,
    const char *reason, json_t *result)
{
	struct gbr_error	 err;
	struct session		*s;
	json_t			*m, *p, *f;
	char			*esc, *msg;

	c->state = TC_RUNNING;
	if ((s = session_find(c->session)) == NULL) {
		msg = xasprintf("session %s closed during the call", c->session);
		tc_complete(c, 0, GBR_ERR_SESSION_NOT_FOUND, msg, NULL, NULL);
		free(msg);
		return;
	}
	if (failed && tc_denial(kind)) {
		p = json_object_get(c->args, "path");
		esc = json_is_string(p) ? sandbox_escape_for_display(
		    json_string_value(p), json_string_length(p)) : NULL;
		if (session_event(s, "sandbox.denied", json_pack("{s:s, s:s, "
		    "s:s?, s:s, s:s}", "call_id", c->call_id, "tool", c->tool,
		    "path", esc, "kind", gbr_err_kind(kind), "reason",
		    reason != NULL ? reason : ""), NULL, NULL, &err) != 0) {
			log_warn("session %s: sandbox.denied not recorded: %s",
			    c->session, err.message);
			gbr_error_clear(&err);
		}
		free(esc);
		log_info("session %s: %s refused (%s): %s", c->session, c->tool,
		    gbr_err_kind(kind), reason != NULL ? reason : "");
	}
	m = json_pack("{s:s, s:s, s:s, s:b}", "role", "tool", "call_id",
	    c->call_id, "tool", c->tool, "ok", !failed);
	if (!failed)
		json_object_set(m, "result", result != NULL ? result :
		    json_object());
	else {
		json_object_set_new(m, "error", json_pack("{s:s, s:s}", "kind",
		    gbr_err_kind(kind), "message", reason != NULL ? reason :
		    "the tool failed"));
		if (result != NULL)
			json_object_set(json_object_get(m, "error"), "data",
			    result);
	}
	if (c->approval[0] != '\0')
		json_object_set_new(m, "approval_id", json_string(c->approval));
	if (c->grant != NULL)
		json_object_set_new(m, "grant_id", json_string(c->grant));
	if (c->turn != 0)
		json_object_set_new(m, "turn", json_integer((json_int_t)c->turn));
	f = json_pack("{s:s, s:s, s:b}", "call_id", c->call_id, "tool", c->tool,
	    "ok", !failed);
	if (c->approval[0] != '\0')
		json_object_set_new(f, "approval_id", json_string(c->approval));
	/*
	 * Every call answers only once its result is written, so a kill -9
	 * never loses a call that was answered. For a read this costs no
	 * thread hand-off: its two records go out in one batch that the loop
	 * writes itself at the end of the pass (doc/DISKLOG.md). The record
	 * is also what a resend of the request_id gets, while it is written
	 * and after.
	 */
	if (session_message(s, "tool.result", json_incref(m), f, c->rid, m,
	    tc_written, c, &err) != 0) {
		tc_complete(c, 0, err.kind, err.message, err.data, NULL);
		gbr_error_clear(&err);
	}
}

static void	tc_tool_finish(struct toolcall *, int, enum gbr_err,
		    const char *, json_t *);

/* A command's "after" snapshot is recorded: its result now. */
static void
tc_rewind_after(void *arg)
{
	struct toolcall	*c = arg;
	json_t		*result = c->out_result;
	char		*reason = c->out_reason;

	rewind_call_free(c->rw);	/* rewind allows it here */
	c->rw = NULL;
	c->rw_phase = TC_RW_NONE;
	c->out_result = NULL;
	c->out_reason = NULL;
	tc_tool_finish(c, c->out_failed, c->out_kind, reason, result);
	free(reason);
	json_decref(result);
}

/* The tool finished: what it changed is recorded before its result. */
static void
tc_tool_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	struct toolcall	*c = arg;
	struct session	*s;
	struct env	*env;
	struct sandbox	*sb;
	char		*why = NULL;

	c->job = NULL;
	if (c->rw != NULL) {
		if ((s = session_find(c->session)) != NULL &&
		    session_env_and_sandbox(s, &env, &sb, &why) == 0) {
			if (rewind_end(c->rw, s, sb, c->call_id, c->turn,
			    tc_rewind_after, c) == REWIND_WAIT) {
				c->rw_phase = TC_RW_AFTER;
				c->out_failed = failed;
				c->out_kind = kind;
				c->out_reason = reason != NULL ?
				    xstrdup(reason) : NULL;
				c->out_result = result != NULL ?
				    json_incref(result) : NULL;
				return;
			}
		} else
			free(why);
		rewind_call_free(c->rw);
		c->rw = NULL;
	}
	tc_tool_finish(c, failed, kind, reason, result);
}

/* The tool's outcome, its changes recorded: the tool.result. */
static void
tc_tool_finish(struct toolcall *c, int failed, enum gbr_err kind,
    const char *reason, json_t *result)
{
	json_t	*r = NULL, *kept;

	if (failed && kind == GBR_ERR_CHANGED_SINCE_APPROVAL && result == NULL) {
		/* Which decision no longer holds: ask again, or see the grant. */
		r = json_object();
		if (c->approval[0] != '\0')
			json_object_set_new(r, "approval_id",
			    json_string(c->approval));
		if (c->grant != NULL)
			json_object_set_new(r, "grant_id", json_string(c->grant));
		result = r;
	}
	if (c->state == TC_APPLYING && c->approval[0] != '\0') {
		/*
		 * The approval keeps its result without the write's diff: it
		 * has the diff the human approved, and the two together could
		 * pass APPROVAL_RESULT_MAX and lose the path and size. The
		 * tool.result keeps the diff.
		 */
		if (json_is_object(result) && json_object_get(result,
		    "diff") != NULL) {
			kept = json_copy(result);
			json_object_del(kept, "diff");
			json_object_del(kept, "diff_truncated");
			approval_applied(c->approval, failed, kind, reason, kept);
			json_decref(kept);
		} else
			approval_applied(c->approval, failed, kind, reason,
			    result);
	}
	if (!failed && c->edited && json_is_object(result)) {
		/* The model hears what the human changed in its proposal. */
		r = json_deep_copy(result);
		json_object_set_new(r, "edited", json_true());
		if (c->human_diff != NULL)
			json_object_set_new(r, "human_changes",
			    json_string(c->human_diff));
		result = r;
	}
	if (json_is_array(json_object_get(result, "protected_changes"))) {
		json_t	*p = tc_propose_changes(c, result);

		json_decref(r);
		result = r = p;
	}
	tc_record_result(c, failed, kind, reason, result);
	json_decref(r);
}

/*
 * A run tool's output while it runs: a live tool.output event to the
 * session's attached clients (never logged or replayed: the tool.result
 * has it all), at most TC_STREAM_BYTES and TC_STREAM_EVENTS per call;
 * the one that would pass either carries no output and truncated: true.
 */
static void
tc_tool_output(void *arg, json_t *chunk)
{
	struct toolcall	*c = arg;
	struct session	*s;
	json_t		*f, *v;
	size_t		 len;

	if (c->stream_cut || (s = session_find(c->session)) == NULL)
		return;
	if ((v = json_object_get(chunk, "text")) == NULL)
		v = json_object_get(chunk, "data");
	len = json_string_length(v);
	f = json_deep_copy(chunk);
	if (c->streamed + len > TC_STREAM_BYTES ||
	    c->nstreamed + 1 >= TC_STREAM_EVENTS) {
		c->stream_cut = 1;
		json_object_del(f, "data");
		json_object_del(f, "encoding");
		json_object_set_new(f, "text", json_string(""));
	}
	c->streamed += len;
	c->nstreamed++;
	json_object_set_new(f, "truncated", json_boolean(c->stream_cut));
	json_object_set_new(f, "call_id", json_string(c->call_id));
	json_object_set_new(f, "tool", json_string(c->tool));
	(void)session_live(s, "tool.output", f);
}

static void	tc_start_tool(struct toolcall *, const char *, json_t *, int,
		    const struct sandbox_pin *, struct env *, struct sandbox *);
static void	tc_rewind_before(void *);

/*
 * Runs a tool now (approved: a human or a grant said yes; for a file
 * tool, pin is what was approved and the only thing written), once its
 * rewind bracket's first half is done.
 */
void
tc_run(struct toolcall *c, const char *tool, json_t *args, int approved,
    const struct sandbox_pin *pin)
{
	struct session		*s;
	struct env		*env;
	struct sandbox		*sb;
	enum gbr_err		 kind;
	char			*reason;
	json_t			*data = NULL;

	if ((s = session_find(c->session)) == NULL) {
		tc_tool_done(c, 1, GBR_ERR_SESSION_NOT_FOUND, "the session was "
		    "closed", NULL);
		return;
	}
	if (session_env_and_sandbox(s, &env, &sb, &reason) != 0) {
		tc_tool_done(c, 1, GBR_ERR_INVALID_ENV, reason, NULL);
		free(reason);
		return;
	}
	/*
	 * Deny before anything: a profile made read-only while a human
	 * was deciding wins over the decision.
	 */
	if (approved && policy_recheck(env, tool_lookup(c->session, tool),
	    &kind, &reason, &data) == POLICY_DENY) {
		tc_tool_done(c, 1, kind, reason, data);
		free(reason);
		json_decref(data);
		return;
	}
	rewind_call_free(c->rw);
	c->rw = NULL;
	if (rewind_begin(c->session, sb, tool, args, &c->rw, tc_rewind_before,
	    c) == REWIND_WAIT) {
		if (pin != NULL) {
			/*
			 * A pin is a file tool's, whose bracket never waits;
			 * it is borrowed, so it could not be kept for later.
			 */
			log_warn("session %s: %s: a pinned call is not "
			    "rewindable", c->session, tool);
			rewind_call_free(c->rw);
			c->rw = NULL;
		} else {
			c->rw_phase = TC_RW_BEFORE;
			c->run_tool = xstrdup(tool);
			c->run_args = json_incref(args);
			c->run_approved = approved;
			return;
		}
	}
	tc_start_tool(c, tool, args, approved, pin, env, sb);
}

/* Starts the tool (its rewind bracket's first half is done). */
static void
tc_start_tool(struct toolcall *c, const char *tool, json_t *args,
    int approved, const struct sandbox_pin *pin, struct env *env,
    struct sandbox *sb)
{
	struct tool_ctx		 ctx;
	enum gbr_err		 kind;
	char			*reason;
	json_t			*data = NULL;

	memset(&ctx, 0, sizeof ctx);
	ctx.sandbox = sb;
	ctx.env = env;
	ctx.session = c->session;
	ctx.approved = approved;
	ctx.pin = pin;
	if (tool_call_async(&ctx, tool, args, tc_tool_output, tc_tool_done, c,
	    &c->job, &kind, &reason, &data) != 0) {
		/* It never ran: nothing to compare. */
		rewind_call_free(c->rw);
		c->rw = NULL;
		tc_tool_done(c, 1, kind, reason, data);
		free(reason);
		json_decref(data);
	}
}

/*
 * A command's "before" snapshot is taken (or failed: it runs unrecorded):
 * it starts now, if its session and env still allow it.
 */
static void
tc_rewind_before(void *arg)
{
	struct toolcall	*c = arg;
	struct session	*s;
	struct env	*env;
	struct sandbox	*sb;
	enum gbr_err	 kind;
	char		*reason, *tool = c->run_tool;
	json_t		*args = c->run_args, *data = NULL;

	c->rw_phase = TC_RW_NONE;
	c->run_tool = NULL;
	c->run_args = NULL;
	if ((s = session_find(c->session)) == NULL) {
		rewind_call_free(c->rw);	/* rewind allows it here */
		c->rw = NULL;
		tc_tool_done(c, 1, GBR_ERR_SESSION_NOT_FOUND, "the session was "
		    "closed", NULL);
	} else if (session_env_and_sandbox(s, &env, &sb, &reason) != 0) {
		rewind_call_free(c->rw);
		c->rw = NULL;
		tc_tool_done(c, 1, GBR_ERR_INVALID_ENV, reason, NULL);
		free(reason);
	} else if (c->run_approved && policy_recheck(env, tool_lookup(
	    c->session, tool), &kind, &reason, &data) == POLICY_DENY) {
		/* A profile made read-only while the snapshot was taken. */
		rewind_call_free(c->rw);
		c->rw = NULL;
		tc_tool_done(c, 1, kind, reason, data);
		free(reason);
		json_decref(data);
	} else
		tc_start_tool(c, tool, args, c->run_approved, NULL, env, sb);
	free(tool);
	json_decref(args);
}

/* A resent request_id answered from the history. */
static void
tc_dup_found(void *arg, int error, json_t *m)
{
	struct toolcall	*c = arg;

	c->dup_outcome = 1;
	if (error != 0)
		tc_complete(c, 0, GBR_ERR_STORAGE, "the first call's result "
		    "could not be written", NULL, NULL);
	else if (m == NULL || json_object_get(m, "call_id") == NULL)
		tc_complete(c, 0, GBR_ERR_BUSY, "this request_id is in use; try "
		    "again shortly", NULL, NULL);
	else {
		snprintf(c->call_id, sizeof c->call_id, "%s",
		    json_string_value(json_object_get(m, "call_id")) != NULL ?
		    json_string_value(json_object_get(m, "call_id")) : "");
		free(c->tool);
		c->tool = xstrdup(json_string_value(json_object_get(m,
		    "tool")) != NULL ? json_string_value(json_object_get(m,
		    "tool")) : "");
		if (json_string_value(json_object_get(m, "approval_id")) != NULL)
			snprintf(c->approval, sizeof c->approval, "%s",
			    json_string_value(json_object_get(m, "approval_id")));
		tc_complete_from_record(c, m);
	}
}

/* True if s may be a caller's call_id. */
static int
tc_call_id_valid(const char *s)
{
	size_t	i;

	for (i = 0; s[i] != '\0'; i++) {
		if (i >= TOOLCALL_ID_MAX)
			return 0;
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_' || s[i] == '.' || s[i] == ':' || s[i] == '-'))
			return 0;
	}
	return i > 0;
}

/* Starts a call (see toolcall.h). */
int
toolcall_start(const char *session, const char *tool, json_t *args,
    const struct toolcall_opts *opts, toolcall_done_cb cb, void *arg,
    struct toolcall **handle, struct gbr_error *err)
{
	struct toolcall_opts	 none;
	struct gbr_error	 serr;
	struct toolcall		*c;
	struct approval		*a;
	struct session		*s;
	struct env		*env;
	struct sandbox		*sb;
	enum gbr_err		 kind;
	unsigned char		 r[8];
	char			 id[TOOLCALL_ID_MAX + 1], *reason;
	const char		*rid;
	size_t			 i;

	if (opts == NULL) {
		memset(&none, 0, sizeof none);
		opts = &none;
	}
	if (handle != NULL)
		*handle = NULL;
	rid = opts->request_id;
	if ((s = session_find(session)) == NULL)
		return gbr_error_set(err, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", session, strlen(session) > 64 ? (size_t)64 :
		    strlen(session)), "no open session has the id or name "
		    "'%.64s'", session);
	if (opts->call_id != NULL && !tc_call_id_valid(opts->call_id))
		return gbr_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "call_id"), "call_id: 1 to %d of [A-Za-z0-9_.:-]",
		    TOOLCALL_ID_MAX);
	if (rid != NULL) {
		/* A resend: join the call in flight, or get the first outcome. */
		TAILQ_FOREACH(c, &tc_calls, entry) {
			if (c->rid == NULL || strcmp(c->rid, rid) != 0 ||
			    strcmp(c->session, session_id(s)) != 0 ||
			    c->state == TC_DONE)
				continue;
			if (tc_add_waiter(c, opts, cb, arg, 1) != 0)
				return gbr_error_set(err, GBR_ERR_BUSY, NULL, "too many "
				    "resends wait for this call");
			if (c->state == TC_WAITING)
				tc_kick(c);
			if (handle != NULL)
				*handle = c;
			return 0;
		}
		c = tc_new(session_id(s), "", tool, args, rid, opts->turn, 0);
		tc_add_waiter(c, opts, cb, arg, 1);
		c->state = TC_RUNNING;
		if (session_request_lookup(s, rid, tc_dup_found, c)) {
			if (handle != NULL)
				*handle = c;
			return 0;
		}
		if ((a = approval_find_request(session_id(s), rid)) != NULL) {
			/* A call whose asker left with a restart: adopt it. */
			tc_free(c);
			c = tc_adopt(a);
			tc_add_waiter(c, opts, cb, arg, 1);
			if (c->state == TC_WAITING)
				tc_kick(c);
			if (handle != NULL)
				*handle = c;
			return 0;
		}
		tc_free(c);
	}
	if (tool_check(session_id(s), tool, args, &kind, &reason) != 0) {
		gbr_error_set(err, kind, json_pack("{s:s}", "field", "args"), "%s",
		    reason);
		free(reason);
		return -1;
	}
	if (session_env_and_sandbox(s, &env, &sb, &reason) != 0) {
		gbr_error_set(err, GBR_ERR_INVALID_ENV, NULL, "%s", reason);
		free(reason);
		return -1;
	}
	if (opts->call_id != NULL) {
		TAILQ_FOREACH(c, &tc_calls, entry)
			if (strcmp(c->call_id, opts->call_id) == 0 &&
			    strcmp(c->session, session_id(s)) == 0)
				return gbr_error_set(err, GBR_ERR_ALREADY_EXISTS,
				    json_pack("{s:s}", "call_id", opts->call_id),
				    "a call with this call_id is in flight");
		snprintf(id, sizeof id, "%s", opts->call_id);
	} else {
		if (osdep_random(r, sizeof r) != 0)
			fatalx("no source of random bytes");
		for (i = 0; i < sizeof r; i++)
			snprintf(id + 2 * i, 3, "%02x", r[i]);
	}
	c = tc_new(session_id(s), id, tool, args, rid, opts->turn, opts->flags);
	tc_add_waiter(c, opts, cb, arg, 0);
	c->state = TC_RUNNING;
	/* The call's record: on its way to the disk before the tool starts. */
	if (!(opts->flags & TOOLCALL_NO_CALL_MESSAGE) &&
	    session_message(s, "tool.call", json_pack("{s:s, s:s, s:s, s:O}",
	    "role", "assistant", "call_id", c->call_id, "tool", c->tool, "args",
	    c->args), json_pack("{s:s, s:s, s:O, s:s?}", "call_id", c->call_id,
	    "tool", c->tool, "args", c->args, "call_request_id", c->rid), NULL,
	    NULL, NULL, NULL,
	    &serr) != 0) {
		*err = serr;
		tc_free(c);
		return -1;
	}
	if (handle != NULL)
		*handle = c;
	tc_begin(c, env, sb);
	return 0;
}

/* Gives up on a call (see toolcall.h). */
void
toolcall_cancel(struct toolcall *c)
{
	if (c == NULL || c->state == TC_DONE || c->cancelled)
		return;
	c->cancelled = 1;
	if (c->rw_phase == TC_RW_BEFORE) {
		/* Not started yet: it never will (ends from the loop). */
		log_info("session %s: %s cancelled before it ran (its rewind "
		    "snapshot was being taken)", c->session, c->call_id);
		rewind_call_free(c->rw);
		c->rw = NULL;
		free(c->run_tool);
		c->run_tool = NULL;
		json_decref(c->run_args);
		c->run_args = NULL;
		c->rw_phase = TC_RW_CANCELLED;
		tc_kick(c);
	} else if (c->state == TC_WAITING && c->approval[0] != '\0')
		approval_withdraw(c->approval, "the caller gave up");
	else if (c->job != NULL)
		tool_job_cancel(c->job);
}

/* Gives up on every call of a closed session (see toolcall.h). */
unsigned
toolcall_cancel_session(const char *session)
{
	struct toolcall	*c;
	unsigned	 n = 0;

	/* From the head again after each: a cancel may end calls at once. */
again:
	TAILQ_FOREACH(c, &tc_calls, entry) {
		if (c->state == TC_DONE || c->cancelled ||
		    strcmp(c->session, session) != 0)
			continue;
		toolcall_cancel(c);
		n++;
		goto again;
	}
	return n;
}

/* Gives up on the call in flight with a request_id (see toolcall.h). */
int
toolcall_cancel_request(const char *session, const char *request_id)
{
	struct toolcall	*c;
	struct session	*s;

	if ((s = session_find(session)) == NULL)
		return 0;
	TAILQ_FOREACH(c, &tc_calls, entry) {
		if (c->rid == NULL || c->state == TC_DONE || c->cancelled ||
		    strcmp(c->rid, request_id) != 0 ||
		    strcmp(c->session, session_id(s)) != 0)
			continue;
		toolcall_cancel(c);
		return 1;
	}
	return 0;
}

/* The call's id. */
const char *
toolcall_call_id(const struct toolcall *c)
{
	return c->call_id;
}

/* The approval the call waits for, or NULL. */
const char *
toolcall_approval_id(const struct toolcall *c)
{
	return c->approval[0] != '\0' ? c->approval : NULL;
}

/* Sets up the approvals; before disklog_open. */
void
toolcall_init(struct event_base *base)
{
	tc_base = base;
	rewind_init(base);
	approval_init(base, &tc_approval_hooks);
}

/* After replay and tool registration. */
void
toolcall_recover(void)
{
	approval_recover();
}

/* Frees every call; only END_AT_SHUTDOWN waiters hear of it. */
void
toolcall_shutdown(void)
{
	struct toolcall_outcome	 o;
	struct toolcall		*c;
	struct tc_waiter	*w;

	while ((c = TAILQ_FIRST(&tc_calls)) != NULL) {
		memset(&o, 0, sizeof o);
		o.session = c->session;
		o.call_id = c->call_id;
		o.tool = c->tool;
		o.kind = GBR_ERR_SHUTTING_DOWN;
		o.message = c->approval[0] != '\0' ? "the daemon stopped "
		    "before this call ended; its approval stays and can be "
		    "decided after the restart" : "the daemon stopped before "
		    "this call ended";
		o.approval_id = c->approval[0] != '\0' ? c->approval : NULL;
		for (w = c->waiters; w != NULL; w = w->next) {
			if (!w->end_at_shutdown)
				continue;
			o.duplicate = w->dup;
			w->cb(w->arg, &o);
		}
		tc_free(c);
	}
	/* No call waits for a snapshot any more: the worker can stop. */
	rewind_shutdown();
	approval_shutdown();
}
