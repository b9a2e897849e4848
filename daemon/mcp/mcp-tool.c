/*
 * The MCP servers' tools (see mcp.h): what the registry's provider
 * answers (tool.h: find, list, call), the calls in flight and their end,
 * and mcp.servers.
 *
 * A tool reaches the model as SERVER__tool with its input schema; a name
 * the providers would refuse (not [A-Za-z0-9_-], or NAME__tool longer
 * than 64 bytes), a tool the profile's tools or deny_tools leave out,
 * and any past MCP_TOOLS_MAX are skipped (mcp.servers says which, and
 * why). Whether a call asks a human is the profile's ask: all, none, or
 * (writes, the default) every tool but those the server marks
 * readOnlyHint: true. The hint is the server's word, not a guarantee:
 * what makes it safe to believe is that the server itself is confined.
 *
 * A call waits for its server to be ready (a stopped one is started), is
 * sent as tools/call, and ends exactly once, from the loop: with the
 * answer, with timeout after timeout_ms (notifications/cancelled is
 * sent), cancelled (the same notification), or unavailable when the
 * server dies. The answer's content goes back as {content, text,
 * structuredContent}: text kept up to MCP_RESULT_MAX bytes, binary
 * content (images, audio, blobs) replaced by its type and size. isError
 * is the error tool_error, with that result as its data.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "escape.h"
#include "log.h"
#include "runner.h"
#include "mcp-int.h"
#include "xmalloc.h"

/* True if s is one of a JSON array of strings. */
static int
mcp_in_list(json_t *l, const char *s)
{
	json_t	*v;
	size_t	 i;

	json_array_foreach(l, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return 1;
	return 0;
}

/* Why a server's tool name cannot be offered, or NULL. */
static const char *
mcp_name_bad(const char *server, const char *s)
{
	size_t	i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_' || s[i] == '-'))
			return "its name is not [A-Za-z0-9_-]";
	if (i == 0)
		return "it has no name";
	if (strlen(server) + 2 + i > MCP_NAME_MAX)
		return "SERVER__tool would be longer than 64 bytes";
	return NULL;
}

/* Frees a server's tools. */
void
mcp_tools_free(struct mcp_server *srv)
{
	size_t	i;

	for (i = 0; i < srv->ntools; i++) {
		free((char *)srv->tools[i].def.name);
		free((char *)srv->tools[i].def.description);
		free(srv->tools[i].remote);
		json_decref(srv->tools[i].schema);
		json_decref(srv->tools[i].annotations);
	}
	free(srv->tools);
	srv->tools = NULL;
	srv->ntools = 0;
}

/* Builds a server's tools from tools/list (see the top of the file). */
void
mcp_tools_set(struct mcp_server *srv, json_t *list)
{
	struct mcp_tool	*t;
	const char	*name, *ask, *why, *desc;
	json_t		*o, *an, *allow, *deny, *sch;
	size_t		 i, j;
	int		 dup;

	json_incref(list);
	mcp_tools_free(srv);
	json_decref(srv->raw_tools);
	srv->raw_tools = list;
	json_array_clear(srv->skipped);
	srv->tools = xcalloc(json_array_size(list) + 1, sizeof *srv->tools);
	allow = json_object_get(srv->conf, "tools");
	deny = json_object_get(srv->conf, "deny_tools");
	ask = json_string_value(json_object_get(srv->conf, "ask"));
	json_array_foreach(list, i, o) {
		name = json_string_value(json_object_get(o, "name"));
		why = NULL;
		if (name == NULL)
			why = "it has no name";
		else if ((why = mcp_name_bad(srv->name, name)) != NULL)
			;
		else if (allow != NULL && !mcp_in_list(allow, name))
			why = "not in the profile's tools";
		else if (mcp_in_list(deny, name))
			why = "in the profile's deny_tools";
		else if (srv->ntools >= MCP_TOOLS_MAX)
			why = "more tools than gbr takes from one server";
		for (j = 0, dup = 0; why == NULL && j < srv->ntools; j++)
			if (strcmp(srv->tools[j].remote, name) == 0)
				dup = 1;
		if (dup)
			why = "listed twice";
		if (why != NULL) {
			if (json_array_size(srv->skipped) < 64) {
				char *esc = name != NULL ? mcp_escape(
				    name, strlen(name)) : NULL;

				json_array_append_new(srv->skipped, json_pack(
				    "{s:s?, s:s}", "name", esc, "why", why));
				free(esc);
			}
			continue;
		}
		t = &srv->tools[srv->ntools++];
		t->remote = xstrdup(name);
		t->def.name = xasprintf("%s%s%s", srv->name, TOOL_PROVIDER_SEP,
		    name);
		desc = json_string_value(json_object_get(o, "description"));
		t->def.description = desc == NULL ? xstrdup("") :
		    xstrndup(desc, strlen(desc) > MCP_DESC_MAX ? MCP_DESC_MAX :
		    strlen(desc));
		sch = json_object_get(o, "inputSchema");
		t->schema = json_is_object(sch) ? json_deep_copy(sch) :
		    json_pack("{s:s}", "type", "object");
		an = json_object_get(o, "annotations");
		t->annotations = json_is_object(an) ? json_deep_copy(an) : NULL;
		t->def.read_only = json_is_true(json_object_get(an,
		    "readOnlyHint"));
		/* MCP's default: a tool that is not read-only may destroy. */
		t->def.destructive = !t->def.read_only &&
		    !json_is_false(json_object_get(an, "destructiveHint"));
		t->def.idempotent = json_is_true(json_object_get(an,
		    "idempotentHint"));
		if (ask != NULL && strcmp(ask, "all") == 0)
			t->def.ask = 1;
		else if (ask != NULL && strcmp(ask, "none") == 0)
			t->def.ask = 0;
		else
			t->def.ask = !t->def.read_only;
	}
	srv->listed = 1;
}

/* Splits NAME__tool: the session's server, its tool, or NULL. */
static struct mcp_server *
mcp_split(const char *sid, const char *name, struct mcp_tool **tp)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;
	const char		*sep;
	char			*server;
	size_t			 i;

	*tp = NULL;
	if ((sep = strstr(name, TOOL_PROVIDER_SEP)) == NULL ||
	    (ms = mcp_session_sync(sid)) == NULL)
		return NULL;
	server = xstrndup(name, (size_t)(sep - name));
	srv = mcp_server_find(ms, server);
	free(server);
	if (srv == NULL)
		return NULL;
	for (i = 0; i < srv->ntools; i++)
		if (strcmp(srv->tools[i].def.name, name) == 0)
			*tp = &srv->tools[i];
	return srv;
}

/* The provider's find. */
static const struct tool_def *
mcp_find(const char *sid, const char *name, json_t **schema)
{
	struct mcp_tool	*t;

	*schema = NULL;
	if (mcp_split(sid, name, &t) == NULL || t == NULL)
		return NULL;
	*schema = t->schema;
	return &t->def;
}

/* The provider's list: the session's tools, MCP-shaped. */
static void
mcp_list_tools(const char *sid, json_t *a)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;
	struct mcp_tool		*t;
	size_t			 i;

	(void)mcp_session_starting(sid);
	if ((ms = mcp_session_sync(sid)) == NULL)
		return;
	TAILQ_FOREACH(srv, &ms->servers, entry)
		for (i = 0; i < srv->ntools; i++) {
			t = &srv->tools[i];
			json_array_append_new(a, json_pack("{s:s, s:s, s:O, "
			    "s:{s:b, s:b, s:b}, s:s}", "name", t->def.name,
			    "description", t->def.description, "inputSchema",
			    t->schema, "annotations", "readOnlyHint",
			    t->def.read_only, "destructiveHint",
			    t->def.destructive, "idempotentHint",
			    t->def.idempotent, "server", srv->name));
		}
}

/* Frees a call that ended. */
static void
mcp_call_free(struct mcp_call *c)
{
	event_free(c->ev);
	free(c->tool);
	free(c->remote);
	json_decref(c->args);
	free(c->reason);
	json_decref(c->result);
	free(c);
}

/* The call's event: its timeout while it runs, its end once it ended. */
static void
mcp_call_ev(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_call	*c = arg;
	char		*why;

	if (!c->ended) {
		why = xasprintf("MCP server '%s' did not answer %s within %d "
		    "ms (timeout_ms in [mcp.%s])", c->srv->name, c->tool,
		    c->timeout_ms, c->srv->name);
		if (c->id != 0)
			(void)mcp_send(c->srv, json_pack("{s:s, s:{s:I, s:s}}",
			    "method", "notifications/cancelled", "params",
			    "requestId", (json_int_t)c->id, "reason",
			    "timed out"));
		if (c->id != 0)
			mcp_http_forget(c->srv, c->id);
		c->failed = 1;
		c->kind = GBR_ERR_TIMEOUT;
		c->reason = why;
		c->ended = 1;
		TAILQ_REMOVE(&c->srv->calls, c, entry);
		c->srv->ncalls--;
		c->srv = NULL;
	}
	c->done(c->arg, c->failed, c->kind, c->reason, c->result);
	mcp_call_free(c);
}

/* Ends a call: its callback runs from the loop. result is stolen. */
static void
mcp_call_end(struct mcp_call *c, int failed, enum gbr_err kind,
    const char *reason, json_t *result)
{
	if (c->ended)
		return;
	c->ended = 1;
	c->failed = failed;
	c->kind = kind;
	c->reason = reason != NULL ? xstrdup(reason) : NULL;
	c->result = result;
	if (c->srv != NULL) {
		c->srv->used_ms = (int64_t)clock_mono_ms();
		if (c->id != 0)
			mcp_http_forget(c->srv, c->id);
		TAILQ_REMOVE(&c->srv->calls, c, entry);
		c->srv->ncalls--;
		c->srv = NULL;
	}
	event_del(c->ev);
	event_active(c->ev, EV_TIMEOUT, 1);
}

/* Ends every call of a server with an error. */
void
mcp_calls_fail(struct mcp_server *srv, enum gbr_err kind, const char *fmt, ...)
{
	struct mcp_call	*c;
	va_list		 ap;
	char		*why;

	if (TAILQ_EMPTY(&srv->calls))
		return;
	va_start(ap, fmt);
	why = xvasprintf(fmt, ap);
	va_end(ap);
	while ((c = TAILQ_FIRST(&srv->calls)) != NULL)
		mcp_call_end(c, 1, kind, why, NULL);
	free(why);
}

/* Finds a call in flight by its id, or NULL. */
static struct mcp_call *
mcp_call_find(struct mcp_server *srv, int64_t id)
{
	struct mcp_call	*c;

	TAILQ_FOREACH(c, &srv->calls, entry)
		if (c->id == id)
			return c;
	return NULL;
}

/* Sends a call again once the server is ready (see mcp-int.h). */
int
mcp_call_requeue(struct mcp_server *srv, int64_t id)
{
	struct mcp_call	*c;

	if (id == 0 || (c = mcp_call_find(srv, id)) == NULL)
		return -1;
	c->id = 0;
	if (srv->state == MCP_READY)
		mcp_calls_flush(srv);
	return 0;
}

/* Ends one call with an error (see mcp-int.h). */
void
mcp_call_lost(struct mcp_server *srv, int64_t id, enum gbr_err kind,
    const char *why)
{
	struct mcp_call	*c;

	if (id != 0 && (c = mcp_call_find(srv, id)) != NULL)
		mcp_call_end(c, 1, kind, why, NULL);
}

/* Sends a call now. */
static void
mcp_call_send(struct mcp_server *srv, struct mcp_call *c)
{
	size_t	i;
	int	known = 0;

	for (i = 0; i < srv->ntools; i++)
		if (strcmp(srv->tools[i].def.name, c->tool) == 0)
			known = 1;
	if (!known) {
		mcp_call_end(c, 1, GBR_ERR_METHOD_NOT_FOUND, "the MCP server no "
		    "longer offers this tool", NULL);
		return;
	}
	c->id = srv->next_id++;
	if (mcp_send(srv, json_pack("{s:I, s:s, s:{s:s, s:O}}", "id",
	    (json_int_t)c->id, "method", "tools/call", "params", "name",
	    c->remote, "arguments", c->args)) != 0)
		mcp_call_end(c, 1, GBR_ERR_UNAVAILABLE, srv->http != NULL ?
		    "cannot send to the MCP server (too many requests in "
		    "flight)" : "cannot write to the MCP server (it does not "
		    "read its input)", NULL);
}

/* Sends the calls that waited for the server. */
void
mcp_calls_flush(struct mcp_server *srv)
{
	struct mcp_call	*c, *next;

	/* A send may end the call (and take it off the list). */
	for (c = TAILQ_FIRST(&srv->calls); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->id == 0)
			mcp_call_send(srv, c);
	}
}

/* The registry's cancel: notifications/cancelled, and the call ends. */
static void
mcp_call_cancel(struct tool_job *job)
{
	struct mcp_call	*c = (struct mcp_call *)job;

	if (c->ended)
		return;
	if (c->id != 0 && c->srv != NULL)
		(void)mcp_send(c->srv, json_pack("{s:s, s:{s:I, s:s}}",
		    "method", "notifications/cancelled", "params", "requestId",
		    (json_int_t)c->id, "reason", "the call was cancelled"));
	mcp_call_end(c, 1, GBR_ERR_CANCELLED, "the call was cancelled", NULL);
}

/* One content item for the model, with its text appended to text. */
static json_t *
mcp_content(json_t *item, char **text, size_t *tlen, int *cut)
{
	const char	*type, *s;
	json_t		*r, *res;
	size_t		 n;

	type = json_string_value(json_object_get(item, "type"));
	if (type == NULL)
		return NULL;
	s = NULL;
	res = json_object_get(item, "resource");
	if (strcmp(type, "text") == 0)
		s = json_string_value(json_object_get(item, "text"));
	else if (strcmp(type, "resource") == 0)
		s = json_string_value(json_object_get(res, "text"));
	if (s != NULL) {
		n = strlen(s);
		if (*tlen + n + 1 > MCP_RESULT_MAX) {
			n = MCP_RESULT_MAX - *tlen > 1 ? MCP_RESULT_MAX - *tlen - 1 :
			    0;
			/* Never cut inside a UTF-8 character. */
			while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
				n--;
			*cut = 1;
		}
		*text = xreallocarray(*text, *tlen + n + 2, 1);
		if (*tlen > 0)
			(*text)[(*tlen)++] = '\n';
		memcpy(*text + *tlen, s, n);
		*tlen += n;
		(*text)[*tlen] = '\0';
	}
	if (strcmp(type, "text") == 0)
		return json_pack("{s:s}", "type", "text");
	r = json_pack("{s:s}", "type", type);
	if (json_is_string(json_object_get(item, "mimeType")))
		json_object_set(r, "mimeType", json_object_get(item,
		    "mimeType"));
	if (json_is_string(json_object_get(item, "data")))
		json_object_set_new(r, "bytes", json_integer((json_int_t)
		    json_string_length(json_object_get(item, "data")) / 4 * 3));
	if (json_is_string(json_object_get(item, "uri")))
		json_object_set(r, "uri", json_object_get(item, "uri"));
	if (json_is_string(json_object_get(res, "uri")))
		json_object_set(r, "uri", json_object_get(res, "uri"));
	if (json_is_string(json_object_get(res, "blob")))
		json_object_set_new(r, "bytes", json_integer((json_int_t)
		    json_string_length(json_object_get(res, "blob")) / 4 * 3));
	return r;
}

/* An answer to a call (see mcp-int.h). */
int
mcp_call_answer(struct mcp_server *srv, int64_t id, json_t *m)
{
	struct mcp_call	*c;
	json_t		*r, *e, *out, *items, *item, *v;
	char		*text = NULL, *msg, *esc;
	size_t		 tlen = 0, i;
	int		 cut = 0;

	TAILQ_FOREACH(c, &srv->calls, entry)
		if (c->id == id)
			break;
	if (c == NULL)
		return -1;
	if (json_is_object(e = json_object_get(m, "error"))) {
		v = json_object_get(e, "message");
		esc = json_is_string(v) ? mcp_escape(
		    json_string_value(v), json_string_length(v) > 4096 ? 4096 :
		    json_string_length(v)) : xstrdup("no message");
		msg = xasprintf("MCP server '%s': %s", srv->name, esc);
		free(esc);
		mcp_call_end(c, 1, json_integer_value(json_object_get(e,
		    "code")) == -32602 ? GBR_ERR_INVALID_PARAMS :
		    GBR_ERR_TOOL_ERROR, msg, NULL);
		free(msg);
		return 0;
	}
	r = json_object_get(m, "result");
	if (!json_is_object(r)) {
		mcp_call_end(c, 1, GBR_ERR_TOOL_ERROR, "the MCP server's answer "
		    "has no result", NULL);
		return 0;
	}
	items = json_array();
	json_array_foreach(json_object_get(r, "content"), i, item) {
		if (!json_is_object(item) || (v = mcp_content(item, &text,
		    &tlen, &cut)) == NULL)
			continue;
		if (json_array_size(items) < 256)
			json_array_append_new(items, v);
		else
			json_decref(v);
	}
	out = json_pack("{s:o, s:s}", "content", items, "text",
	    text != NULL ? text : "");
	if (cut)
		json_object_set_new(out, "truncated", json_true());
	v = json_object_get(r, "structuredContent");
	if (json_is_object(v) && !cut) {
		char *s = json_dumps(v, JSON_COMPACT);

		if (s != NULL && strlen(s) + tlen <= MCP_RESULT_MAX)
			json_object_set(out, "structuredContent", v);
		free(s);
	}
	if (json_is_true(json_object_get(r, "isError"))) {
		esc = mcp_escape(text != NULL ? text : "", tlen > 1024 ?
		    1024 : tlen);
		msg = xasprintf("%s (MCP server '%s'): %s", c->tool, srv->name,
		    esc);
		free(esc);
		mcp_call_end(c, 1, GBR_ERR_TOOL_ERROR, msg, out);
		free(msg);
	} else
		mcp_call_end(c, 0, GBR_ERR_INTERNAL, NULL, out);
	free(text);
	return 0;
}

/* The provider's call (tool.h's tool_async_fn). */
static int
mcp_call(struct tool_ctx *ctx, const char *name, json_t *args,
    tool_output_cb out, tool_done_cb done, void *arg, struct tool_job **job,
    enum gbr_err *kind, char **reason, json_t **data)
{
	struct mcp_server	*srv;
	struct mcp_tool		*t;
	struct mcp_call		*c;
	struct timeval		 tv;

	(void)out;
	*data = NULL;
	if ((srv = mcp_split(ctx->session, name, &t)) == NULL) {
		*kind = GBR_ERR_METHOD_NOT_FOUND;
		*reason = xasprintf("no tool called '%s' (no such MCP server "
		    "in this session's profile)", name);
		return -1;
	}
	if (t == NULL && srv->listed) {
		*kind = GBR_ERR_METHOD_NOT_FOUND;
		*reason = xasprintf("MCP server '%s' has no tool '%s'",
		    srv->name, name);
		return -1;
	}
	if (srv->ncalls >= MCP_CALLS_MAX) {
		*kind = GBR_ERR_BUSY;
		*reason = xasprintf("MCP server '%s' has %d calls in flight",
		    srv->name, MCP_CALLS_MAX);
		return -1;
	}
	if (!mcp_server_running(srv) && srv->state != MCP_BACKOFF &&
	    mcp_server_start(srv) != 0) {
		*kind = GBR_ERR_UNAVAILABLE;
		*reason = xasprintf("MCP server '%s' cannot run: %s", srv->name,
		    srv->last_error != NULL ? srv->last_error : "unknown");
		return -1;
	}
	c = xcalloc(1, sizeof *c);
	c->job.cancel = mcp_call_cancel;
	c->srv = srv;
	c->tool = xstrdup(name);
	c->remote = xstrdup(name + strlen(srv->name) + 2);
	c->args = args != NULL && json_is_object(args) ? json_deep_copy(args) :
	    json_object();
	c->timeout_ms = mcp_conf_int(srv, "timeout_ms", MCP_TIMEOUT_MS);
	c->done = done;
	c->arg = arg;
	if ((c->ev = evtimer_new(mcp_base, mcp_call_ev, c)) == NULL)
		fatalx("mcp: cannot create a timer");
	tv.tv_sec = c->timeout_ms / 1000;
	tv.tv_usec = (c->timeout_ms % 1000) * 1000;
	evtimer_add(c->ev, &tv);
	TAILQ_INSERT_TAIL(&srv->calls, c, entry);
	srv->ncalls++;
	srv->used_ms = (int64_t)clock_mono_ms();
	if (srv->state == MCP_READY)
		mcp_call_send(srv, c);
	if (job != NULL)
		*job = &c->job;
	return 0;
}

const struct tool_provider mcp_provider = {
	mcp_find,
	mcp_list_tools,
	mcp_call,
};

static const char *const mcp_state_names[] = {
	[MCP_STOPPED] = "stopped",
	[MCP_STARTING] = "starting",
	[MCP_READY] = "running",
	[MCP_BACKOFF] = "restarting",
	[MCP_FAILED] = "failed",
};

/* One server for mcp.servers. */
static json_t *
mcp_server_json(struct mcp_session *ms, struct mcp_server *srv)
{
	json_t	*o, *tools;
	size_t	 i;

	tools = json_array();
	for (i = 0; i < srv->ntools; i++)
		json_array_append_new(tools, json_pack("{s:s, s:s, s:b, s:b}",
		    "name", srv->tools[i].def.name, "tool",
		    srv->tools[i].remote, "read_only",
		    srv->tools[i].def.read_only, "ask", srv->tools[i].def.ask));
	o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:o, s:O, s:i, s:i}",
	    "session", ms->sid, "name", srv->name, "transport",
	    json_object_get(srv->conf, "url") != NULL ? "http" : "stdio",
	    "state", mcp_state_names[srv->state], "running",
	    mcp_server_running(srv),
	    "tools", tools, "skipped", srv->skipped, "starts", srv->starts,
	    "crashes", srv->crashes);
	json_object_set(o, "command", json_object_get(srv->conf, "command"));
	json_object_set(o, "url", json_object_get(srv->conf, "url"));
	/* The fork server's runs have no pid of ours to give. */
	json_object_set_new(o, "pid", srv->job != NULL &&
	    runner_job_pid(srv->job) > 0 ? json_integer(runner_job_pid(
	    srv->job)) : json_null());
	json_object_set_new(o, "protocol", srv->protocol != NULL ?
	    json_string(srv->protocol) : json_null());
	json_object_set_new(o, "server_info", srv->server_info != NULL ?
	    json_deep_copy(srv->server_info) : json_null());
	json_object_set_new(o, "last_error", srv->last_error != NULL ?
	    json_string(srv->last_error) : json_null());
	if (srv->http != NULL) {
		json_t	*h = mcp_http_json(srv);

		json_object_update(o, h);
		json_decref(h);
	}
	return o;
}

/* mcp.servers (see mcp.h). */
json_t *
mcp_servers_json(const char *sid)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;
	json_t			*a = json_array();

	if (sid != NULL)
		(void)mcp_session_starting(sid);
	TAILQ_FOREACH(ms, &mcp_sessions, entry) {
		if (sid != NULL && strcmp(ms->sid, sid) != 0)
			continue;
		TAILQ_FOREACH(srv, &ms->servers, entry)
			json_array_append_new(a, mcp_server_json(ms, srv));
	}
	return a;
}
