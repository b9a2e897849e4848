/*
 * toolcall: the execution path of every tool call (see toolcall.h). This
 * file owns the calls in flight: who waits for each (callbacks, and the
 * connections to tell about an approval), the policy that decides deny,
 * ask or allow, the approval a call waits for, and the tool.call and
 * tool.result messages in the session's history.
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
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "approval.h"
#include "conn.h"
#include "diff.h"
#include "env.h"
#include "gbrd.h"
#include "jsonrpc.h"
#include "log.h"
#include "osdep.h"
#include "reload.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-run.h"
#include "toolcall.h"
#include "xmalloc.h"

#define TC_WAITERS_MAX		16	/* askers of one call (resends) */
#define TC_COMMAND_MAX		(16 * 1024)	/* bytes of a command shown */
#define TC_SESSION_LEN		64
#define TC_STREAM_BYTES		(1024 * 1024)	/* tool.output bytes per call */
#define TC_STREAM_EVENTS	4096	/* tool.output events per call */

enum tc_state {
	TC_RUNNING,		/* the tool runs, or its result is being written */
	TC_WAITING,		/* an approval is pending */
	TC_APPLYING,		/* approved: the tool runs */
	TC_DONE,		/* the outcome is set: waiters are told */
};

/* Someone waiting for a call's outcome. */
struct tc_waiter {
	struct tc_waiter	*next;
	toolcall_done_cb	 cb;
	toolcall_approval_cb	 on_approval;
	void			*arg;
	struct conn		*conn;		/* counted reference, or NULL */
	int			 had_conn;	/* asked over a connection */
	int			 dup;		/* a resend */
	int			 notified;	/* told about the approval */
	int			 end_at_shutdown;
};

struct toolcall {
	TAILQ_ENTRY(toolcall)	 entry;
	char			 session[TC_SESSION_LEN + 1];
	char			 call_id[TOOLCALL_ID_MAX + 1];
	char			 approval[APPROVAL_ID_LEN + 1];	/* "" if none */
	char			*tool;
	char			*rid;
	json_t			*args;
	uint64_t		 turn;
	int			 flags;
	enum tc_state		 state;
	struct tc_waiter	*waiters;
	unsigned		 nwaiters;
	struct tool_run		*run;		/* a run tool in flight */
	uint64_t		 streamed;	/* tool.output: bytes, events */
	unsigned		 nstreamed;
	int			 stream_cut;	/* the last one said truncated */
	char			*grant;		/* the grant that let it through */
	int			 edited;	/* a human's content was written */
	int			 cancelled;
	json_t			*event;		/* approval.requested's payload */
	struct event		*ev;		/* deferred notifications and the end */
	/* The outcome. */
	int			 ok;
	enum gbr_err		 kind;
	char			*message;
	json_t			*result;	/* ok: the result; else error data */
	json_t			*record;	/* the tool.result message, or NULL */
	int			 dup_outcome;	/* a request_id answered before */
};
TAILQ_HEAD(tc_list, toolcall);

static struct tc_list	tc_calls = TAILQ_HEAD_INITIALIZER(tc_calls);

static void	tc_record_result(struct toolcall *, int, enum gbr_err,
		    const char *, json_t *);
static void	tc_ask(struct toolcall *, struct approval_req *);
static void	tc_run(struct toolcall *, const char *, json_t *, int);
static char	*tc_command_line(char **);

/* The deferred work of a call: notifications, then (once done) the end. */
static void	tc_deferred_cb(evutil_socket_t, short, void *);

/* Allocates a call. */
static struct toolcall *
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
	if ((c->ev = event_new(gbrd_base(), -1, 0, tc_deferred_cb, c)) == NULL)
		fatalx("event_new failed");
	TAILQ_INSERT_TAIL(&tc_calls, c, entry);
	return c;
}

/* Frees a call and its waiters (no callback runs). */
static void
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
	free(c->tool);
	free(c->rid);
	free(c->grant);
	free(c->message);
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
static void
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

/* Sends the approval.requested event to a waiter's connection if it is not attached. */
static void
tc_notify(struct toolcall *c, struct tc_waiter *w)
{
	struct session	*s = session_find(c->session);
	json_t		*msg;

	w->notified = 1;
	if (c->event == NULL)
		return;
	if (w->on_approval != NULL)
		w->on_approval(w->arg, json_object_get(c->event, "approval"));
	if (w->conn != NULL && !conn_closing(w->conn) &&
	    (s == NULL || !session_is_attached(s, w->conn))) {
		msg = rpc_notification("event", json_incref(c->event));
		conn_send(w->conn, msg);
		json_decref(msg);
	}
}

/* The deferred work: late notifications, then, once done, the end. */
static void
tc_deferred_cb(evutil_socket_t fd, short events, void *arg)
{
	struct toolcall		*c = arg;
	struct toolcall_outcome	 o;
	struct tc_waiter	*w;

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

/* Finds the call waiting for an approval. */
static struct toolcall *
tc_find_approval(const char *id)
{
	struct toolcall	*c;

	TAILQ_FOREACH(c, &tc_calls, entry)
		if (strcmp(c->approval, id) == 0 && c->state != TC_DONE)
			return c;
	return NULL;
}

/* A call for an approval nobody waits on in this run (after a restart). */
static struct toolcall *
tc_adopt(struct approval *a)
{
	struct toolcall	*c;

	c = tc_new(approval_session(a), approval_call_id(a), approval_tool(a),
	    approval_args(a), approval_request_id(a), approval_turn(a), 0);
	snprintf(c->approval, sizeof c->approval, "%s", approval_id(a));
	c->state = approval_state(a) == APPROVAL_PENDING ||
	    approval_state(a) == APPROVAL_INTERRUPTED ? TC_WAITING :
	    TC_APPLYING;
	if (c->state == TC_WAITING) {
		c->event = json_pack("{s:s, s:s, s:o}", "session",
		    approval_session(a), "type", "approval.requested",
		    "approval", approval_json(a));
	}
	return c;
}

/* True for the kinds that mean the sandbox refused a path. */
static int
tc_denial(enum gbr_err k)
{
	switch (k) {
	case GBR_ERR_PATH_TRAVERSAL:
	case GBR_ERR_PROTECTED_PATH:
	case GBR_ERR_READ_ONLY:
	case GBR_ERR_NOT_FOUND:
	case GBR_ERR_NOT_A_FILE:
	case GBR_ERR_TOO_LARGE:
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
static void
tc_record_result(struct toolcall *c, int failed, enum gbr_err kind,
    const char *reason, json_t *result)
{
	struct session_error	 err;
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
			free(err.message);
			json_decref(err.data);
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
		free(err.message);
		json_decref(err.data);
	}
}

/* The tool finished. */
static void
tc_tool_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	struct toolcall		*c = arg;
	struct approval_req	 req;
	json_t			*argv, *r = NULL;
	char			*cmd = NULL, **vec;
	size_t			 i;

	c->run = NULL;
	if (failed && kind == GBR_ERR_NEEDS_APPROVAL && c->state == TC_RUNNING &&
	    c->approval[0] == '\0' && !c->cancelled) {
		/*
		 * The runner's own check asked where ours did not (a wrapper
		 * spelled differently): ask the human all the same.
		 */
		argv = json_object_get(result, "argv");
		vec = xcalloc(json_array_size(argv) + 1, sizeof *vec);
		for (i = 0; i < json_array_size(argv); i++)
			vec[i] = (char *)(json_string_value(json_array_get(argv,
			    i)) != NULL ? json_string_value(json_array_get(argv,
			    i)) : "");
		cmd = tc_command_line(vec);
		free(vec);
		memset(&req, 0, sizeof req);
		req.command = cmd;
		req.why = APPROVAL_WHY_ASK_COMMAND;
		tc_ask(c, &req);
		free(cmd);
		return;
	}
	if (c->state == TC_APPLYING && c->approval[0] != '\0')
		approval_applied(c->approval, failed, kind, reason, result);
	if (!failed && c->edited && json_is_object(result)) {
		r = json_deep_copy(result);
		json_object_set_new(r, "edited", json_true());
		result = r;
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

/* Runs a tool now (approved: a human or a grant said yes). */
static void
tc_run(struct toolcall *c, const char *tool, json_t *args, int approved)
{
	const struct tool_def	*def;
	struct tool_run_ctx	 rc;
	struct tool_ctx		 ctx;
	struct session		*s;
	struct env		*env;
	struct sandbox		*sb;
	enum gbr_err		 kind;
	char			*reason;
	json_t			*data = NULL;
	int			 r;

	if ((s = session_find(c->session)) == NULL) {
		tc_tool_done(c, 1, GBR_ERR_SESSION_NOT_FOUND, "the session was "
		    "closed", NULL);
		return;
	}
	if (reload_session(s, &env, &sb, &reason) != 0) {
		tc_tool_done(c, 1, GBR_ERR_INVALID_ENV, reason, NULL);
		free(reason);
		return;
	}
	/*
	 * Deny before anything: a profile made read-only while a human
	 * was deciding wins over the decision.
	 */
	def = tool_find(tool);
	if (approved && env_autonomy(env) == ENV_READ_ONLY && def != NULL &&
	    !def->read_only && strcmp(tool, "check") != 0) {
		data = json_pack("{s:s, s:s}", "autonomy", "read-only", "tool",
		    tool);
		tc_tool_done(c, 1, GBR_ERR_READ_ONLY, "the environment became "
		    "read-only before this approved call ran", data);
		json_decref(data);
		return;
	}
	if (tool_run_handles(tool)) {
		memset(&rc, 0, sizeof rc);
		rc.sandbox = sb;
		rc.env = env;
		rc.session = c->session;
		rc.approved = approved;
		r = tool_run_call(&rc, tool, args, tc_tool_output, tc_tool_done,
		    c, &c->run, &kind, &reason, &data);
	} else {
		memset(&ctx, 0, sizeof ctx);
		ctx.sandbox = sb;
		ctx.env = env;
		ctx.session = c->session;
		ctx.approved = approved;
		r = tool_call_async(&ctx, tool, args, tc_tool_done, c, &kind,
		    &reason, &data);
	}
	if (r != 0) {
		tc_tool_done(c, 1, kind, reason, data);
		free(reason);
		json_decref(data);
	}
}

/* The approval.requested event is out: tell the waiters. */
static void
tc_asked(void *arg, int error, json_t *payload)
{
	struct toolcall		*c = arg;
	struct tc_waiter	*w;

	if (error != 0) {
		/* The log failed: approvals take no more changes; end the call. */
		tc_complete(c, 0, GBR_ERR_STORAGE, "the approval could not be "
		    "written to the disk log", NULL, NULL);
		return;
	}
	json_decref(c->event);
	c->event = json_incref(payload);
	if (c->state != TC_WAITING)
		return;		/* decided already */
	for (w = c->waiters; w != NULL; w = w->next)
		if (!w->notified)
			tc_notify(c, w);
}

/* Suspends a call on a new approval. */
static void
tc_ask(struct toolcall *c, struct approval_req *req)
{
	struct session_error	err;

	req->session = c->session;
	req->call_id = c->call_id;
	req->tool = c->tool;
	req->args = c->args;
	req->request_id = c->rid;
	req->turn = c->turn;
	c->state = TC_WAITING;
	if (approval_create(req, c->approval, tc_asked, c, &err) != 0) {
		c->approval[0] = '\0';
		tc_record_result(c, 1, err.kind, err.message, err.data);
		free(err.message);
		json_decref(err.data);
	}
}

/* The path as the human knows it: relative to the workspace. */
static char *
tc_ws_path(const struct env *env, const char *rel)
{
	const char	*ws = env_workspace(env), *root = env_allowed_root(env);
	size_t		 n = strlen(ws);

	if (strcmp(ws, root) == 0 || strncmp(root, ws, n) != 0 ||
	    root[n] != '/')
		return xstrdup(rel);
	return xasprintf("%s/%s", root + n + 1, rel);
}

/* True if a canonical path is the profiles' folder or inside it. */
static int
tc_env_dir(const char *rel)
{
	const char	*p;
	size_t		 n = strlen(ENV_DIR);

	for (p = rel; p != NULL; p = strchr(p, '/') != NULL ?
	    strchr(p, '/') + 1 : NULL) {
		if (strncasecmp(p, ENV_DIR, n) == 0 &&
		    (p[n] == '/' || p[n] == '\0'))
			return 1;
	}
	return 0;
}

/* A command line as a human reads it: words quoted for a POSIX shell. */
static char *
tc_command_line(char **argv)
{
	static const char	 safe[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
	char			*out;
	size_t			 len = 0, cap = 256, i, total = 0, k;
	const char		*s;

	out = xmalloc(cap);
	out[0] = '\0';
#define TC_PUT(ch) do {							\
	if (len + 2 > cap) {						\
		cap *= 2;						\
		out = xreallocarray(out, cap, 1);			\
	}								\
	out[len++] = (ch);						\
	out[len] = '\0';						\
} while (0)
	for (i = 0; argv[i] != NULL; i++) {
		s = argv[i];
		total += strlen(s) + 1;
		if (len > TC_COMMAND_MAX)
			continue;
		if (i > 0)
			TC_PUT(' ');
		if (*s != '\0' && strspn(s, safe) == strlen(s)) {
			for (k = 0; s[k] != '\0'; k++)
				TC_PUT(s[k]);
			continue;
		}
		TC_PUT('\'');
		for (k = 0; s[k] != '\0'; k++) {
			if (s[k] == '\'') {
				TC_PUT('\'');
				TC_PUT('\\');
				TC_PUT('\'');
			}
			TC_PUT(s[k]);
		}
		TC_PUT('\'');
	}
#undef TC_PUT
	if (len > TC_COMMAND_MAX) {
		/* Said, never hidden: a human sees that it was cut. */
		out[TC_COMMAND_MAX] = '\0';
		s = out;
		out = xasprintf("%s ... (cut: %zu bytes in all)", s, total);
		free((char *)s);
	}
	return out;
}

/* The argument vector a run tool would run, for the command patterns. */
static char **
tc_run_argv(const char *tool, json_t *args)
{
	json_t		*a = json_object_get(args, "argv"), *v;
	const char	*lang, *code;
	char		**argv;
	size_t		 i, n;

	if (strcmp(tool, "run_command") == 0) {
		n = json_array_size(a);
		argv = xcalloc(n + 1, sizeof *argv);
		json_array_foreach(a, i, v)
			argv[i] = xstrdup(json_is_string(v) ?
			    json_string_value(v) : "");
		return argv;
	}
	lang = json_string_value(json_object_get(args, "language"));
	code = json_string_value(json_object_get(args, "code"));
	argv = xcalloc(4, sizeof *argv);
	if (lang != NULL && strcmp(lang, "python") == 0) {
		argv[0] = xstrdup("python3");
		argv[1] = xstrdup("-c");
	} else if (lang != NULL && strcmp(lang, "node") == 0) {
		argv[0] = xstrdup("node");
		argv[1] = xstrdup("-e");
	} else {
		argv[0] = xstrdup("sh");
		argv[1] = xstrdup("-c");
	}
	argv[2] = xstrdup(code != NULL ? code : "");
	return argv;
}

/* What a file change would be: its canonical path and its diff. */
static int
tc_policy_file(struct toolcall *c, struct env *env, struct sandbox *sb,
    struct approval_req *req, char **path, char **diff, char **proposed,
    int *protected, enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	json_t			*jp = json_object_get(c->args, "path");
	const char		*p = json_string_value(jp), *content;
	char			*rel = NULL, *before = NULL, *after = NULL;
	char			*shown, *why = NULL;
	size_t			 plen = json_string_length(jp), blen = 0, alen;
	int			 exists, edit = strcmp(c->tool, "edit_file") == 0;
	enum gbr_err		 k2;

	if (edit) {
		/* The edit must apply now; its result is what is asked. */
		if (sandbox_read_file(sb, p, plen, 0, &before, &blen, NULL, &loc,
		    kind, reason) != 0)
			return -1;
		shown = sandbox_display(sb, &loc);
		sandbox_loc_release(&loc);
		if (tool_file_edit_text(before, blen, c->args,
		    sandbox_max_write(sb), shown, &after, &alen, NULL, kind,
		    reason) != 0) {
			free(shown);
			free(before);
			return -1;
		}
		free(shown);
	} else {
		content = json_string_value(json_object_get(c->args, "content"));
		alen = json_string_length(json_object_get(c->args, "content"));
		after = xmalloc(alen + 1);
		memcpy(after, content != NULL ? content : "", alen);
		after[alen] = '\0';
	}
	if (sandbox_check_write(sb, p, plen, alen, &rel, &exists, protected,
	    kind, reason) != 0) {
		free(before);
		free(after);
		return -1;
	}
	*path = tc_ws_path(env, rel);
	req->why = tc_env_dir(rel) ? APPROVAL_WHY_ENV_DIR :
	    APPROVAL_WHY_PROTECTED_PATH;
	if (!edit && exists && sandbox_read_file(sb, p, plen, 0, &before,
	    &blen, NULL, NULL, &k2, &why) != 0) {
		/* Shown, not guessed: the human sees why there is no diff. */
		*diff = xasprintf("--- a/%s\n+++ b/%s\n(the current content "
		    "cannot be read for a diff: %s)\n", *path, *path, why);
		free(why);
	} else
		*diff = diff_unified(*path, before != NULL ? before : "", blen,
		    after, alen, DIFF_OUT_MAX, NULL);
	free(rel);
	free(before);
	if (edit) {
		/* gbrctl edit and the REPL show the whole proposed file. */
		*proposed = after;
		req->proposed = after;
		req->proposed_len = alen;
	} else
		free(after);
	return 0;
}

/*
 * The policy of toolcall.h: deny (-1 with *kind, *reason, *data), ask (1,
 * req filled; *path, *command, *diff owned by the caller), or allow (0).
 */
static int
tc_policy(struct toolcall *c, struct env *env, struct sandbox *sb,
    struct approval_req *req, char **path, char **command, char **diff,
    char **proposed, enum gbr_err *kind, char **reason, json_t **data)
{
	const struct tool_def	*def = tool_find(c->tool);
	const char *const	*pats;
	char			**argv;
	size_t			 i, n;
	int			 ask = 0, protected = 0, file, run;

	*path = *command = *diff = *proposed = NULL;
	*data = NULL;
	memset(req, 0, sizeof *req);
	file = strcmp(c->tool, "write_file") == 0 ||
	    strcmp(c->tool, "edit_file") == 0;
	run = strcmp(c->tool, "run_command") == 0 ||
	    strcmp(c->tool, "run_script") == 0;
	/* Deny: read-only autonomy writes and runs nothing. */
	if (env_autonomy(env) == ENV_READ_ONLY && def != NULL && !def->read_only &&
	    strcmp(c->tool, "check") != 0) {
		*kind = GBR_ERR_READ_ONLY;
		*reason = xasprintf("%s: this environment's autonomy is "
		    "read-only (no writes, no commands)", c->tool);
		*data = json_pack("{s:s, s:s}", "autonomy", "read-only", "tool",
		    c->tool);
		return -1;
	}
	if (file) {
		/* Deny: whatever the sandbox refuses. Ask: protected paths. */
		if (tc_policy_file(c, env, sb, req, path, diff, proposed,
		    &protected, kind, reason) != 0)
			return -1;
		ask = protected;
		req->path = *path;
	} else if (run && (argv = tc_run_argv(c->tool, c->args))[0] == NULL) {
		/* Nothing to run: the tool itself says why (invalid_params). */
		tool_run_strv_free(argv);
	} else if (run) {
		n = env_deny_commands(env, &pats);
		for (i = 0; i < n; i++) {
			if (!tool_run_match(pats[i], (const char *const *)argv))
				continue;
			*kind = GBR_ERR_DENIED_COMMAND;
			*reason = xasprintf("'%s' is refused by this environment "
			    "(deny_commands: %s)", argv[0], pats[i]);
			*data = json_pack("{s:s}", "pattern", pats[i]);
			tool_run_strv_free(argv);
			return -1;
		}
		*command = tc_command_line(argv);
		req->command = *command;
		n = env_ask_commands(env, &pats);
		for (i = 0; i < n && !ask; i++) {
			if (tool_run_match(pats[i], (const char *const *)argv)) {
				ask = 1;
				req->why = APPROVAL_WHY_ASK_COMMAND;
			}
		}
		tool_run_strv_free(argv);
	}
	/* Ask: the profile's ask_tools, in supervised autonomy only. */
	if (!ask && env_autonomy(env) == ENV_SUPERVISED) {
		n = env_ask_tools(env, &pats);
		for (i = 0; i < n && !ask; i++) {
			if (strcmp(pats[i], c->tool) == 0) {
				ask = 1;
				req->why = APPROVAL_WHY_ASK_TOOL;
			}
		}
	}
	if (!ask) {
		/* Nothing to show: the diff was only for a human. */
		free(*diff);
		*diff = NULL;
		return 0;
	}
	req->diff = *diff;
	return 1;
}

/* Starts a call that was checked and recorded: deny, ask or run. */
static void
tc_begin(struct toolcall *c, struct env *env, struct sandbox *sb)
{
	struct approval_req	 req;
	const char		*g;
	char			*path, *command, *diff, *proposed, *reason;
	json_t			*data;
	enum gbr_err		 kind;
	int			 r;

	r = tc_policy(c, env, sb, &req, &path, &command, &diff, &proposed,
	    &kind, &reason, &data);
	if (r == -1) {
		tc_record_result(c, 1, kind, reason, data);
		free(reason);
		json_decref(data);
	} else if (r == 1 && req.why != APPROVAL_WHY_ENV_DIR &&
	    (g = approval_grant_find(c->session, c->tool, req.path,
	    req.command)) != NULL) {
		/* A session grant: a human already said yes to exactly this. */
		c->grant = xstrdup(g);
		log_info("session %s: %s allowed by grant %s", c->session,
		    c->tool, g);
		tc_run(c, c->tool, c->args, 1);
	} else if (r == 1)
		tc_ask(c, &req);
	else
		tc_run(c, c->tool, c->args, 0);
	free(path);
	free(command);
	free(diff);
	free(proposed);
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
    struct toolcall **handle, struct session_error *err)
{
	struct toolcall_opts	 none;
	struct session_error	 serr;
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
		return session_error_set(err, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", session, strlen(session) > 64 ? (size_t)64 :
		    strlen(session)), "no open session has the id or name "
		    "'%.64s'", session);
	for (i = 0; rid != NULL && rid[i] != '\0'; i++)
		if (i >= 128 || rid[i] < 0x21 || rid[i] > 0x7e)
			break;
	if (rid != NULL && (i == 0 || rid[i] != '\0'))
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "request_id"), "request_id: 1 to 128 printable "
		    "characters");
	if (opts->call_id != NULL && !tc_call_id_valid(opts->call_id))
		return session_error_set(err, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
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
				return session_error_set(err, GBR_ERR_BUSY, NULL, "too many "
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
	if (tool_check(tool, args, &kind, &reason) != 0) {
		session_error_set(err, kind, json_pack("{s:s}", "field", "args"), "%s",
		    reason);
		free(reason);
		return -1;
	}
	if (reload_session(s, &env, &sb, &reason) != 0) {
		session_error_set(err, GBR_ERR_INVALID_ENV, NULL, "%s", reason);
		free(reason);
		return -1;
	}
	if (opts->call_id != NULL) {
		TAILQ_FOREACH(c, &tc_calls, entry)
			if (strcmp(c->call_id, opts->call_id) == 0 &&
			    strcmp(c->session, session_id(s)) == 0)
				return session_error_set(err, GBR_ERR_ALREADY_EXISTS,
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
	    c->args), json_pack("{s:s, s:s, s:O}", "call_id", c->call_id,
	    "tool", c->tool, "args", c->args), NULL, NULL, NULL, NULL,
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
	if (c->state == TC_WAITING && c->approval[0] != '\0')
		approval_withdraw(c->approval, "the caller gave up");
	else if (c->run != NULL)
		tool_run_cancel(c->run);
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

/* A connection closed: withdraw what only it was waiting for. */
void
toolcall_conn_closed(struct conn *conn)
{
	struct toolcall		*c, *next;
	struct tc_waiter	*w;
	int			 hit, alive;

	for (c = TAILQ_FIRST(&tc_calls); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		hit = alive = 0;
		for (w = c->waiters; w != NULL; w = w->next) {
			if (w->conn == conn) {
				conn_unref(w->conn);
				w->conn = NULL;
				hit = 1;
			}
			if (w->conn != NULL || !w->had_conn)
				alive = 1;
		}
		if (hit && !alive && c->state == TC_WAITING &&
		    c->approval[0] != '\0') {
			log_info("session %s: the caller of %s left; approval "
			    "%s withdrawn", c->session, c->call_id, c->approval);
			approval_withdraw(c->approval, "the caller disconnected "
			    "before a human decided");
		}
	}
}

/* approval.c: an approved or edited approval must run now. */
static void
tc_apply_hook(const char *id)
{
	struct approval	*a = approval_get(id);
	struct toolcall	*c;
	const char	*content;
	json_t		*args;
	size_t		 len;

	if (a == NULL)
		return;
	if ((c = tc_find_approval(id)) == NULL)
		c = tc_adopt(a);
	c->state = TC_APPLYING;
	if ((content = approval_content(a, &len)) != NULL) {
		/* Edit: the human's content, written as write_file would. */
		c->edited = 1;
		args = json_pack("{s:O, s:s%}", "path", json_object_get(
		    approval_args(a), "path"), "content", content, len);
		tc_run(c, "write_file", args, 1);
		json_decref(args);
	} else
		tc_run(c, c->tool, c->args, 1);
}

/* approval.c: an approval ended without running. */
static void
tc_closed_hook(const char *id)
{
	struct approval	*a = approval_get(id);
	struct toolcall	*c;
	const char	*why;
	char		*msg;
	json_t		*data;
	enum gbr_err	 kind;

	if (a == NULL)
		return;
	if ((c = tc_find_approval(id)) == NULL)
		c = tc_adopt(a);
	why = approval_reason(a);
	data = json_pack("{s:s, s:o}", "approval_id", id, "reason",
	    why != NULL ? json_string(why) : json_null());
	switch (approval_state(a)) {
	case APPROVAL_DENIED:
		kind = GBR_ERR_DENIED;
		msg = xasprintf("a human denied this call%s%s", why != NULL ?
		    ": " : "", why != NULL ? why : "");
		break;
	case APPROVAL_EXPIRED:
		kind = GBR_ERR_EXPIRED;
		msg = xstrdup("nobody decided on this call in time");
		break;
	default:
		kind = GBR_ERR_CANCELLED;
		msg = xasprintf("the approval was withdrawn: %s", why != NULL ?
		    why : "the caller left");
		break;
	}
	tc_record_result(c, 1, kind, msg, data);
	free(msg);
	json_decref(data);
}

/* Sets up the approvals; before disklog_open. */
void
toolcall_init(void)
{
	static const struct approval_hooks hooks = {
		tc_apply_hook, tc_closed_hook
	};

	approval_init(&hooks);
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
	approval_shutdown();
}
