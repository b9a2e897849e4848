/*
 * tool.list and tool.call: a tool run exactly as the agent runs it. A call
 * takes the session's current environment and sandbox (reload.c keeps
 * them current), is recorded in the session (a tool.call message, then a
 * tool.result message, each an event through the disk log), and answers
 * once the result is written. A refusal by the sandbox is also a
 * sandbox.denied event with the raw path escaped for display. A resent
 * request_id answers with the first result and runs nothing.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "env.h"
#include "log.h"
#include "methods.h"
#include "osdep.h"
#include "reload.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-run.h"
#include "xmalloc.h"

#define CALL_DUPS_MAX	8	/* resends waiting on one call */

/* A tool call in progress. */
struct call {
	TAILQ_ENTRY(call)	 entry;
	char			 session[16];
	char			 id[17];	/* call_id */
	char			*tool;
	char			*rid;		/* request_id or NULL */
	json_t			*args;
	struct request		*req;
	struct request		*dups[CALL_DUPS_MAX];
	unsigned		 ndups;
};
TAILQ_HEAD(call_list, call);

static struct call_list	calls = TAILQ_HEAD_INITIALIZER(calls);

/* The run tools through the registry: tool-run.c's own entry point. */
static int
method_tool_run(struct tool_ctx *ctx, const char *name, json_t *args,
    tool_done_cb done, void *arg, enum gbr_err *kind, char **reason,
    json_t **data)
{
	struct tool_run_ctx	rc;

	memset(&rc, 0, sizeof rc);
	rc.sandbox = ctx->sandbox;
	rc.env = ctx->env;
	rc.session = ctx->session;
	return tool_run_call(&rc, name, args, NULL, done, arg, NULL, kind,
	    reason, data);
}

/* Registers every tool group; at start-up. */
int
method_tool_init(char **cause)
{
	const struct tool_def	*defs;
	size_t			 n;

	defs = tool_file_defs(&n);
	if (tool_register(defs, n, cause) != 0)
		return -1;
	defs = tool_run_defs(&n);
	return tool_register_async(defs, n, method_tool_run, cause);
}

/* tool.list {} */
void
method_tool_list(struct request *req, json_t *params)
{
	static const char *const keys[] = { NULL };

	if (params_only(req, params, keys) != 0)
		return;
	request_reply(req, json_pack("{s:o}", "tools", tool_list_json()));
}

/* The reply to tool.call from its tool.result message. */
static void
method_tool_answer(struct request *req, json_t *m, int dup)
{
	json_t		*e = json_object_get(m, "error"), *data;
	const char	*kind, *msg;
	enum gbr_err	 k;

	if (m == NULL || json_object_get(m, "call_id") == NULL) {
		request_error(req, GBR_ERR_BUSY, NULL, "this request_id is in "
		    "use; try again shortly");
		return;
	}
	if (json_is_true(json_object_get(m, "ok"))) {
		request_reply(req, json_pack("{s:O, s:O, s:O, s:b}", "call_id",
		    json_object_get(m, "call_id"), "tool",
		    json_object_get(m, "tool"), "result",
		    json_object_get(m, "result"), "duplicate", dup));
		return;
	}
	kind = json_string_value(json_object_get(e, "kind"));
	msg = json_string_value(json_object_get(e, "message"));
	for (k = 0; k < GBR_ERR__COUNT; k++)
		if (kind != NULL && strcmp(gbr_err_kind(k), kind) == 0)
			break;
	if (k == GBR_ERR__COUNT)
		k = GBR_ERR_INTERNAL;
	data = json_object_get(e, "data");
	data = json_is_object(data) ? json_deep_copy(data) : json_object();
	json_object_set(data, "call_id", json_object_get(m, "call_id"));
	json_object_set(data, "tool", json_object_get(m, "tool"));
	if (dup)
		json_object_set_new(data, "duplicate", json_true());
	request_error(req, k, data, "%s", msg != NULL ? msg : "the tool failed");
}

/* A resend's answer: the first result. */
static void
method_tool_dup_cb(void *arg, int error, json_t *result)
{
	struct request	*req = arg;

	if (error != 0)
		request_error(req, GBR_ERR_STORAGE, NULL, "the first call's "
		    "result could not be written");
	else
		method_tool_answer(req, result, 1);
}

/* Frees a finished call. */
static void
call_free(struct call *c)
{
	TAILQ_REMOVE(&calls, c, entry);
	free(c->tool);
	free(c->rid);
	json_decref(c->args);
	free(c);
}

/* The tool.result record is written: answer everyone who asked. */
static void
method_tool_written(void *arg, int error, json_t *result)
{
	struct call	*c = arg;
	unsigned	 i;

	if (error != 0) {
		request_error(c->req, GBR_ERR_STORAGE, NULL, "the result could "
		    "not be written to the disk log: %s", strerror(error));
		for (i = 0; i < c->ndups; i++)
			request_error(c->dups[i], GBR_ERR_STORAGE, NULL,
			    "the result could not be written");
	} else {
		method_tool_answer(c->req, result, 0);
		for (i = 0; i < c->ndups; i++)
			method_tool_answer(c->dups[i], result, 1);
	}
	call_free(c);
}

/* True for the kinds that mean the sandbox refused a path. */
static int
method_tool_denial(enum gbr_err k)
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

/* The tool is done: record sandbox.denied and tool.result. */
static void
method_tool_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	struct call		*c = arg;
	struct session_error	 err;
	struct session		*s;
	json_t			*m, *p;
	char			*esc;
	unsigned		 i;

	if ((s = session_find(c->session)) == NULL) {
		request_error(c->req, GBR_ERR_SESSION_NOT_FOUND, json_pack(
		    "{s:s}", "session", c->session), "session %s closed during "
		    "the call", c->session);
		for (i = 0; i < c->ndups; i++)
			request_error(c->dups[i], GBR_ERR_SESSION_NOT_FOUND,
			    NULL, "session %s closed during the call", c->session);
		call_free(c);
		return;
	}
	if (failed && method_tool_denial(kind)) {
		p = json_object_get(c->args, "path");
		esc = json_is_string(p) ? sandbox_escape_for_display(
		    json_string_value(p), json_string_length(p)) : NULL;
		if (session_event(s, "sandbox.denied", json_pack("{s:s, s:s, "
		    "s:s?, s:s, s:s}", "call_id", c->id, "tool", c->tool,
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
	m = json_pack("{s:s, s:s, s:s, s:b}", "role", "tool", "call_id", c->id,
	    "tool", c->tool, "ok", !failed);
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
	if (session_message(s, "tool.result", json_incref(m), json_pack(
	    "{s:s, s:s, s:b}", "call_id", c->id, "tool", c->tool, "ok",
	    !failed), c->rid, m, method_tool_written, c, &err) != 0) {
		request_error(c->req, err.kind, err.data, "%s", err.message);
		for (i = 0; i < c->ndups; i++)
			request_error(c->dups[i], err.kind, NULL, "%s",
			    err.message);
		free(err.message);
		call_free(c);
	}
}

/* tool.call {session, tool, args?, request_id?} */
void
method_tool_call(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "tool", "args",
	    "request_id", NULL };
	struct session_error	 err;
	struct tool_ctx		 ctx;
	struct session		*s;
	struct env		*env;
	struct sandbox		*sb;
	struct call		*c;
	const char		*key = NULL, *tool = NULL, *rid = NULL;
	json_t			*args = NULL, *data;
	enum gbr_err		 kind;
	unsigned char		 r[8];
	char			*reason;
	size_t			 i;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "session", 1, &key) != 0 ||
	    params_string(req, params, "tool", 1, &tool) != 0 ||
	    params_object(req, params, "args", 0, &args) != 0 ||
	    params_string(req, params, "request_id", 0, &rid) != 0)
		return;
	if ((s = session_find(key)) == NULL) {
		request_error(req, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", key, strlen(key) > 64 ? (size_t)64 : strlen(key)),
		    "no open session has the id or name '%.64s'", key);
		return;
	}
	if (rid != NULL) {
		TAILQ_FOREACH(c, &calls, entry) {
			if (c->rid == NULL || strcmp(c->rid, rid) != 0 ||
			    strcmp(c->session, session_id(s)) != 0)
				continue;
			if (c->ndups >= CALL_DUPS_MAX) {
				request_error(req, GBR_ERR_BUSY, NULL, "too many "
				    "resends wait for this call");
				return;
			}
			c->dups[c->ndups++] = req;
			return;
		}
		if (session_request_lookup(s, rid, method_tool_dup_cb, req))
			return;
	}
	if (tool_check(tool, args, &kind, &reason) != 0) {
		request_error(req, kind, json_pack("{s:s}", "field", "args"), "%s",
		    reason);
		free(reason);
		return;
	}
	if (reload_session(s, &env, &sb, &reason) != 0) {
		request_error(req, GBR_ERR_INVALID_ENV, NULL, "%s", reason);
		free(reason);
		return;
	}
	c = xcalloc(1, sizeof *c);
	snprintf(c->session, sizeof c->session, "%s", session_id(s));
	if (osdep_random(r, sizeof r) != 0)
		fatalx("no source of random bytes");
	for (i = 0; i < sizeof r; i++)
		snprintf(c->id + 2 * i, 3, "%02x", r[i]);
	c->tool = xstrdup(tool);
	c->rid = rid != NULL ? xstrdup(rid) : NULL;
	c->args = args != NULL ? json_incref(args) : json_object();
	c->req = req;
	TAILQ_INSERT_TAIL(&calls, c, entry);
	if (session_message(s, "tool.call", json_pack("{s:s, s:s, s:s, s:O}",
	    "role", "assistant", "call_id", c->id, "tool", c->tool, "args",
	    c->args), json_pack("{s:s, s:s, s:O}", "call_id", c->id, "tool",
	    c->tool, "args", c->args), NULL, NULL, NULL, NULL, &err) != 0) {
		request_error(req, err.kind, err.data, "%s", err.message);
		free(err.message);
		call_free(c);
		return;
	}
	ctx.sandbox = sb;
	ctx.env = env;
	ctx.session = c->session;
	if (tool_call_async(&ctx, tool, c->args, method_tool_done, c, &kind,
	    &reason, &data) != 0) {
		method_tool_done(c, 1, kind, reason, data);
		free(reason);
		json_decref(data);
	}
}
