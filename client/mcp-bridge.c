/*
 * gbrctl mcp's translation (see ctl-mcp.c for the whole bridge):
 * tools/list and tools/call become gbrd's tool.list and tool.call on the
 * session, notifications/cancelled becomes tool.cancel, and what gbrd
 * answers comes back as MCP: a tool result (isError for the tool's own
 * failures, the sandbox's refusals and a human's denial), a protocol
 * error, or progress while a call waits for a human's approval. The calls
 * in flight and the ones held while the session changes live here.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jsonrpc.h"
#include "mcp-int.h"
#include "xmalloc.h"

/* Frees a call record. */
void
mcp_call_free(struct mcp *m, struct mcp_call *c)
{
	TAILQ_REMOVE(&m->calls, c, entry);
	m->ncalls--;
	free(c->method);
	json_decref(c->params);
	json_decref(c->id);
	json_decref(c->token);
	free(c->tool);
	free(c->path);
	free(c->approval);
	free(c->waiting);
	free(c);
}

/* Sends the client a progress notification for a call. */
static void
mcp_progress(struct mcp *m, struct mcp_call *c, long long now)
{
	json_t	*p;
	char	*msg;

	if (c->token == NULL || c->cancelled)
		return;
	c->progress_ms = now + MCP_PROGRESS_MS;
	/* Optional, so never worth growing a queue the client does not read. */
	if (mcp_buf_pending(&m->out) > MCP_OUT_HIGH)
		return;
	if (c->waiting != NULL)
		msg = xstrdup(c->waiting);
	else
		msg = xasprintf("running %s (%lld s)", c->tool,
		    (now - c->started_ms) / 1000);
	p = json_pack("{s:O, s:I, s:s}", "progressToken", c->token,
	    "progress", (json_int_t)++c->progress, "message", msg);
	free(msg);
	mcp_send(m, rpc_notification("notifications/progress", p));
}

/* Sends every progress notification that is due; returns ms to the next. */
int
mcp_progress_tick(struct mcp *m)
{
	struct mcp_call	*c;
	long long	 now = mcp_now_ms(), next = -1;

	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->token == NULL || c->cancelled)
			continue;
		if (c->progress_ms <= now)
			mcp_progress(m, c, now);
		if (next == -1 || c->progress_ms < next)
			next = c->progress_ms;
	}
	if (next == -1)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

/* tools/list: gbrd's tool.list, already in the MCP shape. */
void
mcp_tools_list(struct mcp *m, json_t *id, json_t *params)
{
	struct mcp_call	*c;
	const char	*kind;
	char		*why;

	if (json_object_get(params, "cursor") != NULL) {
		/* We never hand out a cursor, so none is valid. */
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "cursor"), "unknown cursor");
		return;
	}
	if (m->ncalls >= MCP_CALLS_MAX) {
		mcp_error(m, id, RPC_INTERNAL_ERROR, "busy", NULL,
		    "%u requests already wait on gbrd", m->ncalls);
		return;
	}
	if (mcp_ensure(m, &why) != 0) {
		mcp_error(m, id, RPC_INTERNAL_ERROR, "unavailable", NULL,
		    "cannot reach gbrd: %s", why);
		free(why);
		return;
	}
	c = mcp_daemon_call(m, MCP_CALL_LIST, "tool.list", NULL, &kind, &why);
	if (c == NULL) {
		mcp_error(m, id, RPC_INTERNAL_ERROR, kind, NULL, "%s", why);
		free(why);
		return;
	}
	c->id = json_incref(id);
}

/*
 * Finds a string holding a NUL byte anywhere in v (gbr's protocol cannot
 * carry one: jansson refuses it). Returns the key it was under, "" at the
 * top, or NULL when there is none.
 */
static const char *
mcp_find_nul(json_t *v, const char *under)
{
	const char	*key, *r;
	json_t		*sub;
	size_t		 i;

	if (json_is_string(v))
		return memchr(json_string_value(v), '\0',
		    json_string_length(v)) != NULL ? under : NULL;
	if (json_is_object(v)) {
		json_object_foreach(v, key, sub) {
			if ((r = mcp_find_nul(sub, key)) != NULL)
				return r;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, sub) {
			if ((r = mcp_find_nul(sub, under)) != NULL)
				return r;
		}
	}
	return NULL;
}

/* tools/call: gbrd's tool.call on our session. */
void
mcp_tools_call(struct mcp *m, json_t *id, json_t *params)
{
	json_t		*name = json_object_get(params, "name");
	json_t		*args = json_object_get(params, "arguments");
	json_t		*meta = json_object_get(params, "_meta");
	json_t		*token = json_object_get(meta, "progressToken");
	json_t		*req;
	struct mcp_call	*c;
	struct mcp_held	*h;
	const char	*kind, *field;
	char		*why, *shown, rid[48];

	if (!json_is_string(name) || json_string_length(name) == 0 ||
	    memchr(json_string_value(name), '\0', json_string_length(name)) !=
	    NULL) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "name"), "name must be a tool's "
		    "name (tools/list has them)");
		return;
	}
	if (args != NULL && !json_is_object(args) && !json_is_null(args)) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "arguments"), "arguments must "
		    "be an object");
		return;
	}
	if (token != NULL && !json_is_string(token) && !json_is_integer(token)) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "_meta.progressToken"),
		    "progressToken must be a string or an integer");
		return;
	}
	if (m->ncalls + m->nheld >= MCP_CALLS_MAX) {
		why = xasprintf("%u calls already wait on gbrd; try again when "
		    "one is done", m->ncalls + m->nheld);
		mcp_tool_error(m, id, "busy", why, NULL);
		free(why);
		return;
	}
	if ((field = mcp_find_nul(args, "")) != NULL) {
		/*
		 * gbr's protocol never carries a NUL byte (jansson refuses it),
		 * so such a call cannot reach gbrd: it is refused here, as the
		 * sandbox's lexical gate would refuse it in a path.
		 */
		why = xasprintf("argument '%s' holds a NUL byte, which no path "
		    "or text sent to gbr may contain", field);
		mcp_tool_error(m, id, strcmp(field, "path") == 0 ?
		    "invalid_path" : "invalid_params", why, json_pack("{s:s}",
		    "field", field));
		free(why);
		return;
	}
	if (m->refreshing) {
		/* The session is changing: the call waits for the new one. */
		h = xcalloc(1, sizeof *h);
		h->id = json_incref(id);
		h->params = json_incref(params);
		TAILQ_INSERT_TAIL(&m->held, h, entry);
		m->nheld++;
		return;
	}
	if (mcp_ensure(m, &why) != 0) {
		shown = xasprintf("cannot reach gbrd: %s", why);
		mcp_tool_error(m, id, "unavailable", shown, NULL);
		free(shown);
		free(why);
		return;
	}
	snprintf(rid, sizeof rid, "mcp-%s-%llu", m->rid_prefix, ++m->rid_next);
	req = json_pack("{s:s, s:O, s:o, s:s}", "session", m->session, "tool",
	    name, "args", json_is_object(args) ? json_incref(args) :
	    json_object(), "request_id", rid);
	c = mcp_daemon_call(m, MCP_CALL_TOOL, "tool.call", req, &kind, &why);
	if (c == NULL) {
		mcp_tool_error(m, id, kind, why, NULL);
		free(why);
		return;
	}
	c->id = json_incref(id);
	c->tool = xstrdup(json_string_value(name));
	if (json_is_string(json_object_get(args, "path")))
		c->path = xstrdup(json_string_value(json_object_get(args,
		    "path")));
	memcpy(c->rid, rid, sizeof c->rid);
	if (token != NULL) {
		c->token = json_incref(token);
		c->progress_ms = c->started_ms + MCP_PROGRESS_MS;
	}
	if (m->verbose)
		mcp_log("tools/call %s -> tool.call %lld", c->tool, c->did);
}

/* Sends the calls held while the session changed (or frees them). */
void
mcp_release_held(struct mcp *m, int send)
{
	struct mcp_held	*h;

	while ((h = TAILQ_FIRST(&m->held)) != NULL) {
		TAILQ_REMOVE(&m->held, h, entry);
		m->nheld--;
		if (send)
			mcp_tools_call(m, h->id, h->params);
		json_decref(h->id);
		json_decref(h->params);
		free(h);
	}
}

/* notifications/cancelled: never answer that request; gbrd gives up too. */
void
mcp_cancelled(struct mcp *m, json_t *params)
{
	json_t		*rid = json_object_get(params, "requestId");
	struct mcp_call	*c;
	struct mcp_held	*h;
	const char	*kind;
	char		*why;

	if (rid == NULL)
		return;
	TAILQ_FOREACH(h, &m->held, entry) {
		if (json_equal(h->id, rid)) {
			TAILQ_REMOVE(&m->held, h, entry);
			m->nheld--;
			json_decref(h->id);
			json_decref(h->params);
			free(h);
			return;
		}
	}
	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->id == NULL || c->cancelled || !json_equal(c->id, rid))
			continue;
		/*
		 * The client will never read the reply. gbrd is asked to give
		 * up too (tool.cancel): a pending approval is withdrawn, a
		 * running command stopped. A call that already finished stays
		 * done and recorded; its reply is dropped here.
		 */
		c->cancelled = 1;
		if (m->verbose || c->approval != NULL)
			mcp_log("call %s cancelled by the client%s%s", c->tool !=
			    NULL ? c->tool : "tools/list", c->approval != NULL ?
			    "; withdrawing approval " : "",
			    c->approval != NULL ? c->approval : "");
		if (c->kind == MCP_CALL_TOOL && m->session != NULL &&
		    mcp_daemon_call(m, MCP_CALL_CANCEL, "tool.cancel",
		    json_pack("{s:s, s:s}", "session", m->session,
		    "request_id", c->rid), &kind, &why) == NULL) {
			mcp_log("cannot ask gbrd to cancel %s: %s", c->rid, why);
			free(why);
		}
		return;
	}
}

/* The text a model reads for a successful tool result. */
static char *
mcp_result_text(const char *tool, json_t *result)
{
	json_t		*content = json_object_get(result, "content");
	json_t		*next = json_object_get(result, "next_offset");
	char		*s;

	/* read_file's text is the file itself, not JSON around it. */
	if (strcmp(tool, "read_file") == 0 && json_is_string(content)) {
		if (json_is_true(json_object_get(result, "truncated")) &&
		    json_is_integer(next))
			return xasprintf("%s\n[gbr: the file goes on: %lld "
			    "lines in all; read_file with offset %lld for "
			    "more]", json_string_value(content), (long long)
			    json_integer_value(json_object_get(result,
			    "total_lines")), (long long)json_integer_value(next));
		return xstrdup(json_string_value(content));
	}
	s = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
	return s != NULL ? s : xstrdup("{}");
}

/*
 * A tool's result r (borrowed) as the model gets it, a new reference:
 * write_file's and edit_file's without their diff. As gbrd's own agent
 * does (agent-context.c), the model that wrote the change is not sent it
 * back; the session's tool.result keeps it, for attach and history.
 */
static json_t *
mcp_without_diff(const char *tool, json_t *r)
{
	if ((strcmp(tool, "write_file") != 0 && strcmp(tool, "edit_file") != 0) ||
	    !json_is_object(r))
		return json_incref(r);
	r = json_copy(r);
	json_object_del(r, "diff");
	json_object_del(r, "diff_truncated");
	json_object_del(r, "diff_omitted");
	return r;
}

/* The reply to a tool.call: a tool result, or a protocol error. */
static void
mcp_tool_reply(struct mcp *m, struct mcp_call *c, json_t *msg)
{
	json_t		*err = json_object_get(msg, "error");
	json_t		*data = json_object_get(err, "data");
	json_t		*res, *r, *sc, *own;
	const char	*kind, *text, *limit;
	char		*body, *more = NULL;

	if (err == NULL) {
		own = r = mcp_without_diff(c->tool, json_object_get(
		    json_object_get(msg, "result"), "result"));
		body = mcp_result_text(c->tool, r);
		res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type",
		    "text", "text", body, "isError", 0);
		free(body);
		if (m->structured) {
			sc = json_is_object(r) ? json_copy(r) :
			    json_pack("{s:O}", "result", r != NULL ? r :
			    json_null());
			/* read_file's text block is the content: not twice. */
			if (strcmp(c->tool, "read_file") == 0)
				json_object_del(sc, "content");
			json_object_set_new(res, "structuredContent", sc);
		}
		json_decref(own);
		r = json_object_get(json_object_get(msg, "result"), "call_id");
		if (json_is_string(r))
			json_object_set_new(res, "_meta", json_pack("{s:O}",
			    "gbr/call_id", r));
		mcp_result(m, c->id, res);
		return;
	}
	kind = json_string_value(json_object_get(data, "kind"));
	text = json_string_value(json_object_get(err, "message"));
	if (kind == NULL)
		kind = "internal_error";
	if (text == NULL)
		text = "the tool failed";
	if (strcmp(kind, "method_not_found") == 0) {
		/* An unknown tool is a protocol error in MCP. */
		body = mcp_shown(c->tool, 128);
		mcp_error(m, c->id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s, s:s}", "field", "name", "tool", body),
		    "unknown tool '%s' (tools/list has them)", body);
		free(body);
		return;
	}
	if (strcmp(kind, "session_not_found") == 0) {
		mcp_log("session %s is gone (closed?)%s", m->session,
		    m->workspace != NULL ? "; asking gbrd for another" : "");
		mcp_refresh_session(m, 0);
	}
	if (strcmp(kind, "limit_reached") == 0 && (limit = json_string_value(
	    json_object_get(data, "limit"))) != NULL &&
	    strncmp(limit, "history", 7) == 0) {
		/*
		 * A session's history is bounded (every call and result is in
		 * it), and an MCP client may call tools all day: go on in a
		 * new session. This call may or may not have run, so it is not
		 * sent again: the model is told to call again.
		 */
		mcp_log("session %s is full (%s)%s", m->session, limit,
		    m->workspace != NULL ? "; starting a new one on the "
		    "workspace" : "; start gbrctl mcp on another session");
		if (m->workspace != NULL && !m->refreshing) {
			mcp_refresh_session(m, 1);
			more = xasprintf("%s (gbr goes on in a new session: if "
			    "the call did not happen, make it again)", text);
			text = more;
		}
	}
	/*
	 * Everything else is the tool's own failure: the sandbox's refusals,
	 * a human's denial, arguments outside the schema (MCP 2025-11-25
	 * calls these tool execution errors so the model can correct itself).
	 */
	if (json_is_object(data)) {
		data = json_deep_copy(data);
		json_object_del(data, "kind");
	} else
		data = NULL;
	mcp_tool_error(m, c->id, kind, text, data);
	free(more);
}

/* A reply from gbrd: finish the call it answers. */
void
mcp_daemon_reply(struct mcp *m, json_t *msg)
{
	json_t		*id = json_object_get(msg, "id"), *res;
	struct mcp_call	*c;

	if (!json_is_integer(id)) {
		/* gbrd could not tie an error to a request: it is broken. */
		mcp_log("gbrd sent an error for no request: %s (%s)",
		    client_error_message(msg) != NULL ?
		    client_error_message(msg) : "?",
		    client_error_kind(msg) != NULL ? client_error_kind(msg) :
		    "?");
		return;
	}
	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->did == json_integer_value(id))
			break;
	}
	if (c == NULL)
		return;
	if (m->verbose)
		mcp_log("gbrd answered %lld (%s) after %lld ms", c->did,
		    c->tool != NULL ? c->tool : "-", mcp_now_ms() - c->started_ms);
	if (c->cancelled) {
		mcp_call_free(m, c);
		return;
	}
	switch (c->kind) {
	case MCP_CALL_TOOL:
		mcp_tool_reply(m, c, msg);
		break;
	case MCP_CALL_LIST:
		res = json_object_get(msg, "result");
		if (!json_is_array(json_object_get(res, "tools")))
			mcp_error(m, c->id, RPC_INTERNAL_ERROR,
			    client_error_kind(msg) != NULL ?
			    client_error_kind(msg) : "internal_error", NULL,
			    "gbrd's tool.list failed: %s",
			    client_error_message(msg) != NULL ?
			    client_error_message(msg) : "no tools");
		else
			mcp_result(m, c->id, json_pack("{s:O}", "tools",
			    json_object_get(res, "tools")));
		break;
	case MCP_CALL_CANCEL:
		if (m->verbose)
			mcp_log("tool.cancel: %s", json_is_true(json_object_get(
			    json_object_get(msg, "result"), "cancelled")) ?
			    "cancelled" : "nothing in flight");
		break;
	case MCP_CALL_SESSION:
		m->refreshing = 0;
		res = json_object_get(json_object_get(msg, "result"), "id");
		if (json_is_string(res)) {
			free(m->session);
			m->session = xstrdup(json_string_value(res));
			mcp_log("now using session %s", m->session);
		} else
			mcp_log("no new session: %s (%s)",
			    client_error_message(msg) != NULL ?
			    client_error_message(msg) : "?",
			    client_error_kind(msg) != NULL ?
			    client_error_kind(msg) : "?");
		/* The held calls go now (to the old session if none came). */
		mcp_release_held(m, 1);
		break;
	}
	mcp_call_free(m, c);
}

/*
 * Finds the call an approval.requested event is about. gbrd sends it only
 * to the connection that made the call, so it is one of ours: the one with
 * its request_id, else the one waiting for that tool on that path, else
 * the oldest one of that tool that waits on no approval yet.
 */
static struct mcp_call *
mcp_approval_call(struct mcp *m, json_t *a)
{
	const char	*rid = json_string_value(json_object_get(a, "request_id"));
	const char	*tool = json_string_value(json_object_get(a, "tool"));
	const char	*path = json_string_value(json_object_get(a, "path"));
	struct mcp_call	*c, *first = NULL;
	size_t		 pl, cl;

	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->kind != MCP_CALL_TOOL)
			continue;
		if (rid != NULL && strcmp(c->rid, rid) == 0)
			return c;
		if (rid != NULL || c->approval != NULL || tool == NULL ||
		    strcmp(c->tool, tool) != 0)
			continue;
		if (path != NULL && c->path != NULL) {
			/* gbrd shows the canonical path; ours may be relative. */
			pl = strlen(path);
			cl = strlen(c->path);
			if (strcmp(path, c->path) == 0 || (pl > cl &&
			    strcmp(path + pl - cl, c->path) == 0 &&
			    path[pl - cl - 1] == '/'))
				return c;
		}
		if (first == NULL)
			first = c;
	}
	return first;
}

/*
 * A call waits for a human: progress says so at once and every 2 s, with
 * the commands that answer. what (the path or command) may come later.
 */
static void
mcp_wait_approval(struct mcp *m, struct mcp_call *c, const char *aid,
    const char *what)
{
	char	*shown, *tool;

	if (c->approval != NULL && strcmp(c->approval, aid) == 0 &&
	    (what == NULL || c->described))
		return;
	free(c->approval);
	c->approval = xstrdup(aid);
	shown = mcp_shown(what != NULL ? what : "", 256);
	tool = mcp_shown(c->tool, 64);
	free(c->waiting);
	c->waiting = xasprintf("waiting for a human to approve %s%s%s "
	    "(gbrctl approve %s, or gbrctl deny %s)", tool,
	    *shown != '\0' ? " " : "", shown, aid, aid);
	c->described = what != NULL;
	mcp_log("%s", c->waiting);
	free(shown);
	free(tool);
	mcp_progress(m, c, mcp_now_ms());
}

/*
 * tool.progress from gbrd: the tool.call with this request id waits for
 * the approval it names.
 */
void
mcp_daemon_progress(struct mcp *m, json_t *params)
{
	json_t		*id = json_object_get(params, "id");
	const char	*aid = json_string_value(json_object_get(params,
			    "approval_id"));
	struct mcp_call	*c;

	if (!json_is_integer(id) || aid == NULL ||
	    !mcp_streq(json_object_get(params, "state"), "awaiting_approval"))
		return;
	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->kind == MCP_CALL_TOOL && c->did == json_integer_value(id)) {
			mcp_wait_approval(m, c, aid, NULL);
			return;
		}
	}
}

/* An event from gbrd: approvals say what a call waits for. */
void
mcp_daemon_event(struct mcp *m, json_t *params)
{
	json_t		*type = json_object_get(params, "type");
	json_t		*a = json_object_get(params, "approval");
	struct mcp_call	*c;
	const char	*aid, *what, *state;

	if (mcp_streq(type, "evicted")) {
		mcp_log("gbrd evicted us: %s", json_string_value(json_object_get(
		    params, "reason")) != NULL ? json_string_value(
		    json_object_get(params, "reason")) : "?");
		return;
	}
	if (!json_is_object(a))
		a = params;
	aid = json_string_value(json_object_get(a, "id"));
	if (aid == NULL)
		aid = json_string_value(json_object_get(params, "approval_id"));
	if (mcp_streq(type, "approval.requested") && aid != NULL) {
		if ((c = mcp_approval_call(m, a)) == NULL)
			return;
		what = json_string_value(json_object_get(a, "path"));
		if (what == NULL)
			what = json_string_value(json_object_get(a, "command"));
		mcp_wait_approval(m, c, aid, what);
		return;
	}
	if (mcp_streq(type, "approval.resolved") && aid != NULL) {
		TAILQ_FOREACH(c, &m->calls, entry) {
			if (c->approval != NULL && strcmp(c->approval, aid) == 0)
				break;
		}
		if (c == NULL)
			return;
		state = json_string_value(json_object_get(a, "state"));
		if (state == NULL)
			state = json_string_value(json_object_get(a, "decision"));
		free(c->waiting);
		c->waiting = xasprintf("approval %s %s; %s goes on", aid,
		    state != NULL ? state : "resolved", c->tool);
		mcp_progress(m, c, mcp_now_ms());
	}
}
