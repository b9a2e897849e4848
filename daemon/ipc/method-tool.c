/*
 * tool.list, tool.call and mcp.servers: a tool run exactly as the agent
 * runs it, and the external MCP servers whose tools join a session's.
 * tool.call is a thin front of toolcall.c, the one execution path every
 * caller shares: the session's environment and sandbox, the policy (deny,
 * then ask a human, then allow), the tool.call and tool.result messages,
 * and idempotent request_ids. A call that needs a human stays unanswered
 * (nothing blocks) until a decision: the caller first gets a tool.progress
 * notification carrying the call_id and the approval's id, and the
 * approval.requested event even when it is not attached to the session.
 */
#include "gbr-config.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "dispatch.h"
#include "env.h"
#include "loop.h"
#include "jsonrpc.h"
#include "log.h"
#include "mcp.h"
#include "methods.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-run.h"
#include "toolcall.h"
#include "xmalloc.h"

/*
 * How long a tool.call of NAME__tool waits for the session's MCP servers
 * to start and list their tools (the agent waits as long per turn).
 */
#define METHOD_MCP_WAIT_MS	20000

static struct event_base	*method_tool_base;

/* Registers every tool group; at start-up. */
int
method_tool_init(struct event_base *base, char **cause)
{
	method_tool_base = base;
	if (tool_file_register(base, cause) != 0)
		return -1;
	return tool_run_register(cause);
}

/* The session a tool.list or mcp.servers names, or NULL (replied). */
static int
method_tool_session(struct request *req, json_t *params, const char **sid)
{
	struct session	*s;
	const char	*key = NULL;

	*sid = NULL;
	if (params_string(req, params, "session", 0, &key) != 0)
		return -1;
	if (key == NULL)
		return 0;
	if ((s = session_find(key)) == NULL) {
		request_error(req, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", key, strlen(key) > 64 ? (size_t)64 : strlen(key)),
		    "no open session has the id or name '%.64s'", key);
		return -1;
	}
	*sid = session_id(s);
	return 0;
}

/*
 * tool.list {session?}: the built-in tools, and with a session the tools
 * of its profile's MCP servers (starting them: those still starting are
 * not listed yet).
 */
void
method_tool_list(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	const char	*sid;

	if (params_only(req, params, keys) != 0 ||
	    method_tool_session(req, params, &sid) != 0)
		return;
	request_reply(req, json_pack("{s:o}", "tools", tool_list_json(sid)));
}

/* mcp.servers {session?}: the MCP servers of a session, or of all. */
void
method_mcp_servers(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	const char	*sid;

	if (params_only(req, params, keys) != 0 ||
	    method_tool_session(req, params, &sid) != 0)
		return;
	request_reply(req, json_pack("{s:o}", "servers", mcp_servers_json(sid)));
}

/* A tool.call in flight: the request, for the reply and the progress. */
struct tool_req {
	struct request	*req;
	char		*rid;
	/* While it waits for MCP servers to start: */
	char		*key;
	char		*tool;
	json_t		*args;
	struct event	*ev;
	long long	 since;
};

/* The call waits for a human: tell the caller which call and which approval. */
static void
method_tool_progress(void *arg, const json_t *approval)
{
	struct tool_req	*tr = arg;
	json_t		*msg, *id = request_rpc_id(tr->req);

	msg = rpc_notification("tool.progress", json_pack("{s:O?, s:s?, s:O, "
	    "s:O, s:O, s:s, s:O}", "id", id, "request_id", tr->rid,
	    "session", json_object_get(approval, "session"),
	    "call_id", json_object_get(approval, "call_id"),
	    "tool", json_object_get(approval, "tool"),
	    "state", "awaiting_approval",
	    "approval_id", json_object_get(approval, "id")));
	conn_send(request_conn(tr->req), msg);
	json_decref(msg);
}

/* The call's end: the reply. */
static void
method_tool_reply(void *arg, const struct toolcall_outcome *o)
{
	struct tool_req	*tr = arg;
	json_t		*data;

	if (o->ok)
		request_reply(tr->req, json_pack("{s:s, s:s, s:O, s:b}",
		    "call_id", o->call_id, "tool", o->tool, "result",
		    o->result != NULL ? o->result : json_object(), "duplicate",
		    o->duplicate));
	else {
		data = json_is_object(o->data) ? json_deep_copy(o->data) :
		    json_object();
		if (o->call_id[0] != '\0')
			json_object_set_new(data, "call_id",
			    json_string(o->call_id));
		json_object_set_new(data, "tool", json_string(o->tool));
		if (o->duplicate)
			json_object_set_new(data, "duplicate", json_true());
		request_error(tr->req, o->kind, data, "%s", o->message != NULL ?
		    o->message : "the tool failed");
	}
	free(tr->rid);
	free(tr);
}

/* Starts the call through toolcall.c; the request is finished now or later. */
static void
method_tool_go(struct tool_req *tr)
{
	struct toolcall_opts	 opts;
	struct gbr_error	 err;

	memset(&opts, 0, sizeof opts);
	opts.request_id = tr->rid;
	opts.asker = request_conn(tr->req);
	opts.on_approval = method_tool_progress;
	opts.flags = TOOLCALL_END_AT_SHUTDOWN;
	if (toolcall_start(tr->key, tr->tool, tr->args, &opts,
	    method_tool_reply, tr, NULL, &err) != 0) {
		request_error(tr->req, err.kind, err.data, "%s", err.message);
		free(err.message);
		free(tr->rid);
		free(tr);
	}
}

/*
 * Checked every 50 ms while the session's MCP servers start: a call of one
 * of their tools right after a session began or a reload restarted its
 * server would otherwise find no such tool.
 */
static void
method_tool_wait(evutil_socket_t fd, short what, void *arg)
{
	struct tool_req	*tr = arg;
	struct timeval	 tv = { 0, 50 * 1000 };
	char		*key = tr->key, *tool = tr->tool;
	json_t		*args = tr->args;

	(void)fd;
	(void)what;
	if (session_find(key) != NULL && mcp_session_starting(key) &&
	    clock_mono_ms() - tr->since < METHOD_MCP_WAIT_MS) {
		evtimer_add(tr->ev, &tv);
		return;
	}
	event_free(tr->ev);
	tr->ev = NULL;
	method_tool_go(tr);	/* may free tr */
	free(key);
	free(tool);
	json_decref(args);
}

/* tool.call {session, tool, args?, request_id?} */
void
method_tool_call(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "tool", "args",
	    "request_id", NULL };
	struct tool_req		*tr;
	const char		*key = NULL, *tool = NULL, *rid = NULL;
	json_t			*args = NULL;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "session", 1, &key) != 0 ||
	    params_string(req, params, "tool", 1, &tool) != 0 ||
	    params_object(req, params, "args", 0, &args) != 0 ||
	    params_string(req, params, "request_id", 0, &rid) != 0)
		return;
	tr = xcalloc(1, sizeof *tr);
	tr->req = req;
	tr->rid = rid != NULL ? xstrdup(rid) : NULL;
	if (strstr(tool, TOOL_PROVIDER_SEP) != NULL &&
	    session_find(key) != NULL && mcp_session_starting(key)) {
		tr->key = xstrdup(key);
		tr->tool = xstrdup(tool);
		tr->args = args != NULL ? json_incref(args) : NULL;
		tr->since = clock_mono_ms();
		if ((tr->ev = evtimer_new(method_tool_base, method_tool_wait,
		    tr)) == NULL)
			fatalx("method-tool: cannot create a timer");
		method_tool_wait(-1, 0, tr);
		return;
	}
	tr->key = (char *)key;		/* borrowed: used before we return */
	tr->tool = (char *)tool;
	tr->args = args;
	method_tool_go(tr);
}

/*
 * tool.cancel {session, request_id}: the caller gives up on a tool.call it
 * made with that request_id. A pending approval is withdrawn, a running
 * command is stopped; the tool.call itself still gets its one reply (kind
 * cancelled, or the real result if the tool had finished). A call already
 * done is not undone: cancelled is false then.
 */
void
method_tool_cancel(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "request_id", NULL };
	const char	*key = NULL, *rid = NULL;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "session", 1, &key) != 0 ||
	    params_string(req, params, "request_id", 1, &rid) != 0)
		return;
	if (session_find(key) == NULL) {
		request_error(req, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s}",
		    "session", key), "no open session '%s'", key);
		return;
	}
	request_reply(req, json_pack("{s:b}", "cancelled",
	    toolcall_cancel_request(key, rid)));
}
