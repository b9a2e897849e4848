/*
 * gbrctl mcp's connection to gbrd (see ctl-mcp.c for the whole bridge):
 * connecting (starting gbrd if nobody answers) and finding the session,
 * sending requests without blocking, reading gbrd's lines, and losing the
 * connection: every call still waiting is answered then, except the ones
 * waiting for a human, which are sent again on a new connection.
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "frame.h"
#include "jsonrpc.h"
#include "mcp-int.h"
#include "transport.h"
#include "xmalloc.h"

/*
 * Finds the session to use on a fresh connection (blocking: nothing else
 * is on it yet). --session: the open session with that id or name, moved
 * to --env if it uses another profile. Otherwise the most recently active
 * session on the workspace (and env), or a new one.
 */
static int
mcp_find_session(struct mcp *m, struct client *cl, char **cause)
{
	json_t		*reply, *res, *s, *params;
	const char	*id = NULL, *env = NULL;
	size_t		 i;

	if (m->session_arg != NULL) {
		reply = client_call(cl, "session.list", NULL,
		    MCP_CALL_TIMEOUT_MS, cause);
		if (reply == NULL)
			return -1;
		res = json_object_get(reply, "result");
		json_array_foreach(json_object_get(res, "sessions"), i, s) {
			if (mcp_streq(json_object_get(s, "id"), m->session_arg) ||
			    mcp_streq(json_object_get(s, "name"), m->session_arg)) {
				id = json_string_value(json_object_get(s, "id"));
				env = json_string_value(json_object_get(s, "env"));
				break;
			}
		}
		if (id == NULL) {
			*cause = res == NULL ? xasprintf("session.list failed: %s",
			    client_error_message(reply)) : xasprintf("no open "
			    "session has the id or name '%s'", m->session_arg);
			json_decref(reply);
			return -1;
		}
		free(m->session);
		m->session = xstrdup(id);
		if (m->env != NULL && (env == NULL || strcmp(env, m->env) != 0)) {
			json_decref(reply);
			reply = client_call(cl, "env.use", json_pack("{s:s, s:s}",
			    "session", m->session, "env", m->env),
			    MCP_CALL_TIMEOUT_MS, cause);
			if (reply == NULL)
				return -1;
			if (json_object_get(reply, "error") != NULL) {
				*cause = xasprintf("env.use %s: %s (%s)", m->env,
				    client_error_message(reply),
				    client_error_kind(reply));
				json_decref(reply);
				return -1;
			}
			mcp_log("session %s now uses the profile %s", m->session,
			    m->env);
		}
		json_decref(reply);
		return 0;
	}
	params = json_pack("{s:s, s:b}", "workspace", m->workspace, "reuse", 1);
	if (m->env != NULL)
		json_object_set_new(params, "env", json_string(m->env));
	reply = client_call(cl, "session.create", params, MCP_CALL_TIMEOUT_MS,
	    cause);
	if (reply == NULL)
		return -1;
	res = json_object_get(reply, "result");
	if (!json_is_string(json_object_get(res, "id"))) {
		*cause = xasprintf("session.create on %s: %s (%s)", m->workspace,
		    client_error_message(reply) != NULL ?
		    client_error_message(reply) : "no id",
		    client_error_kind(reply) != NULL ?
		    client_error_kind(reply) : "?");
		json_decref(reply);
		return -1;
	}
	free(m->session);
	m->session = xstrdup(json_string_value(json_object_get(res, "id")));
	mcp_log("%s session %s on %s (profile %s)",
	    json_is_false(json_object_get(res, "created")) ? "using" : "created",
	    m->session, m->workspace, json_string_value(json_object_get(res,
	    "env")) != NULL ? json_string_value(json_object_get(res, "env")) :
	    "?");
	json_decref(reply);
	return 0;
}

/*
 * Connects to gbrd (starting it under the start lock if nobody answers,
 * as gbr does), says hello and finds the session. Returns 0, or -1 with
 * *cause and *unreachable when nobody could be reached.
 */
int
mcp_connect(struct mcp *m, char **cause, int *unreachable)
{
	struct client	*cl;
	json_t		*max;
	char		 name[64];

	snprintf(name, sizeof name, "gbrctl-mcp/%s", PACKAGE_VERSION);
	cl = client_connect(m->ctl->socket, CLIENT_AUTOSTART, name, cause,
	    unreachable);
	if (cl == NULL)
		return -1;
	if (mcp_find_session(m, cl, cause) != 0) {
		client_free(cl);
		return -1;
	}
	/*
	 * From here on the loop reads and writes the socket itself. The
	 * client has nothing read ahead: gbrd sends nothing unasked to a
	 * connection that did not attach or follow anything.
	 */
	max = json_object_get(json_object_get(client_hello(cl), "limits"),
	    "max_line_bytes");
	m->dmax_line = json_is_integer(max) && json_integer_value(max) > 0 ?
	    (size_t)json_integer_value(max) : 1024 * 1024;
	m->cl = cl;
	m->dfd = client_fd(cl);
	(void)transport_set_nonblock(m->dfd);
	m->dframe = frame_create(MCP_DAEMON_LINE_MAX);
	m->next_did = MCP_FIRST_DID;
	return 0;
}

/* Connects again after gbrd went away; returns 0 or -1 with *cause. */
int
mcp_ensure(struct mcp *m, char **cause)
{
	int	unreachable;

	*cause = NULL;
	if (m->cl != NULL)
		return 0;
	if (mcp_connect(m, cause, &unreachable) != 0) {
		mcp_log("cannot reach gbrd: %s", *cause);
		return -1;
	}
	mcp_log("connected to gbrd again");
	return 0;
}

/*
 * Queues a call's request to gbrd under a new id. Returns 0, or -1 with
 * *kind and *why (the caller frees) when it cannot go: the line is longer
 * than gbrd takes, or too much waits to be sent.
 */
static int
mcp_daemon_send(struct mcp *m, struct mcp_call *c, const char **errkind,
    char **why)
{
	json_t	*req;
	size_t	 len;

	if (mcp_buf_pending(&m->dout) >= MCP_DAEMON_QUEUE_MAX) {
		*errkind = "busy";
		*why = xasprintf("%zu bytes already wait to be sent to gbrd; "
		    "try again shortly", mcp_buf_pending(&m->dout));
		return -1;
	}
	req = rpc_request(m->next_did, c->method, c->params != NULL ?
	    json_incref(c->params) : NULL);
	len = mcp_buf_add_json(&m->dout, req);
	json_decref(req);
	if (len > m->dmax_line) {
		/* Taken back (the last len bytes) before any was written. */
		m->dout.len -= len;
		*errkind = "too_large";
		*why = xasprintf("the call is %zu bytes encoded; gbrd takes at "
		    "most %zu per message", len, m->dmax_line);
		return -1;
	}
	c->did = m->next_did++;
	return 0;
}

/*
 * Connects again, trying for a few seconds: a gbrd killed a moment ago may
 * still hold its socket, and a new one takes a moment to start.
 */
static int
mcp_ensure_patiently(struct mcp *m, char **cause)
{
	int	i, wait_ms = 100;

	for (i = 0; i < MCP_RECONNECT_TRIES; i++) {
		if (mcp_ensure(m, cause) == 0)
			return 0;
		if (i + 1 == MCP_RECONNECT_TRIES)
			break;
		free(*cause);
		transport_poll(NULL, 0, wait_ms);
		wait_ms *= 2;
	}
	return -1;
}

/*
 * Sends a request to gbrd and records it. Steals params. Returns the call,
 * or NULL with *kind and *why (the caller frees), as mcp_daemon_send.
 */
struct mcp_call *
mcp_daemon_call(struct mcp *m, enum mcp_call_kind kind, const char *method,
    json_t *params, const char **errkind, char **why)
{
	struct mcp_call	*c;

	c = xcalloc(1, sizeof *c);
	c->kind = kind;
	c->method = xstrdup(method);
	c->params = params;
	c->started_ms = mcp_now_ms();
	TAILQ_INSERT_TAIL(&m->calls, c, entry);
	m->ncalls++;
	if (mcp_daemon_send(m, c, errkind, why) != 0) {
		mcp_call_free(m, c);
		return NULL;
	}
	return c;
}

/*
 * Asks gbrd for another session on the workspace: any open one after ours
 * was closed, a new one (fresh) after ours filled its history. A tools/call
 * that comes meanwhile is held until gbrd answers (mcp_release_held).
 */
void
mcp_refresh_session(struct mcp *m, int fresh)
{
	json_t		*params;
	const char	*kind;
	char		*why;

	if (m->workspace == NULL || m->refreshing || m->cl == NULL)
		return;
	params = json_pack("{s:s, s:b}", "workspace", m->workspace, "reuse",
	    !fresh);
	if (m->env != NULL)
		json_object_set_new(params, "env", json_string(m->env));
	if (mcp_daemon_call(m, MCP_CALL_SESSION, "session.create", params,
	    &kind, &why) == NULL) {
		mcp_log("cannot ask for a new session: %s", why);
		free(why);
		return;
	}
	m->refreshing = 1;
}

/* Framer callback: one line from gbrd. */
static int
mcp_daemon_line(void *arg, const char *line, size_t len)
{
	struct mcp	*m = arg;
	struct rpc_msg	 msg;
	json_t		*err;

	if (rpc_parse_from_daemon(line, len, &msg, &err) != 0) {
		json_decref(err);
		mcp_log("gbrd sent a line that is not JSON-RPC");
		return 0;
	}
	if (msg.kind == RPC_RESPONSE)
		mcp_daemon_reply(m, msg.root);
	else if (msg.method != NULL && strcmp(msg.method, "event") == 0)
		mcp_daemon_event(m, msg.params);
	else if (msg.method != NULL && strcmp(msg.method, "tool.progress") == 0)
		mcp_daemon_progress(m, msg.params);
	rpc_msg_release(&msg);
	return 0;
}

/*
 * gbrd went away (it stopped, crashed or closed us). Every call still
 * waiting gets an answer now: whether its tool ran is unknown, so the
 * result says where to look rather than guess. The next request connects
 * again (starting gbrd if needed).
 */
void
mcp_daemon_lost(struct mcp *m, const char *why)
{
	struct mcp_calls carried = TAILQ_HEAD_INITIALIZER(carried);
	struct mcp_call	*c;
	const char	*kind;
	char		*text, *cause;

	mcp_log("lost gbrd: %s", why);
	while ((c = TAILQ_FIRST(&m->calls)) != NULL) {
		/*
		 * A call waiting for a human is a durable approval in gbrd's
		 * log: sent again with its request_id after gbrd is back, it
		 * is adopted and the decision still reaches the client. Any
		 * other call may have been running: its outcome is unknown
		 * and it is never sent again.
		 */
		if (c->kind == MCP_CALL_TOOL && c->approval != NULL &&
		    !c->cancelled) {
			TAILQ_REMOVE(&m->calls, c, entry);
			TAILQ_INSERT_TAIL(&carried, c, entry);
			continue;
		}
		if (c->cancelled || c->id == NULL)
			;
		else if (c->kind == MCP_CALL_TOOL) {
			text = xasprintf("gbrd closed the connection during the "
			    "call (%s); whether %s ran is unknown: see `gbrctl "
			    "history %s`", why, c->tool, m->session);
			mcp_tool_error(m, c->id, "unavailable", text, NULL);
			free(text);
		} else
			mcp_error(m, c->id, RPC_INTERNAL_ERROR, "unavailable",
			    NULL, "gbrd closed the connection: %s", why);
		mcp_call_free(m, c);
	}
	m->refreshing = 0;
	client_free(m->cl);
	m->cl = NULL;
	m->dfd = -1;
	frame_free(m->dframe);
	m->dframe = NULL;
	mcp_buf_release(&m->dout);
	if (!TAILQ_EMPTY(&carried) && mcp_ensure_patiently(m, &cause) != 0) {
		while ((c = TAILQ_FIRST(&carried)) != NULL) {
			TAILQ_REMOVE(&carried, c, entry);
			TAILQ_INSERT_TAIL(&m->calls, c, entry);
			text = xasprintf("gbrd went away while %s waited for "
			    "approval %s and cannot be reached again (%s); the "
			    "approval stays in gbrd's log (gbrctl approvals)",
			    c->tool, c->approval, cause);
			mcp_tool_error(m, c->id, "unavailable", text, NULL);
			free(text);
			mcp_call_free(m, c);
		}
		free(cause);
	}
	while ((c = TAILQ_FIRST(&carried)) != NULL) {
		TAILQ_REMOVE(&carried, c, entry);
		TAILQ_INSERT_TAIL(&m->calls, c, entry);
		if (mcp_daemon_send(m, c, &kind, &text) != 0) {
			mcp_tool_error(m, c->id, kind, text, NULL);
			free(text);
			mcp_call_free(m, c);
			continue;
		}
		mcp_log("asked gbrd again for %s, which waits for approval %s",
		    c->tool, c->approval);
	}
	/* Held calls never reached gbrd: they go on a new connection. */
	mcp_release_held(m, 1);
}

/* Reads what gbrd sent. */
void
mcp_daemon_read(struct mcp *m)
{
	char	buf[MCP_READ_CHUNK];
	ssize_t	n;

	n = transport_read(m->dfd, buf, sizeof buf);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		mcp_daemon_lost(m, strerror(errno));
		return;
	}
	if (n == 0) {
		mcp_daemon_lost(m, "end of stream");
		return;
	}
	if (frame_feed(m->dframe, buf, (size_t)n, mcp_daemon_line, m) ==
	    FRAME_TOO_LARGE)
		mcp_daemon_lost(m, "it sent an over-long line");
}
