/*
 * Dispatch: the method table, the request object and the param checks.
 * Every error that reaches a client is built here, so every error has a
 * JSON-RPC code and a stable data.kind.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "osdep.h"
#include "jsonrpc.h"
#include "log.h"
#include "methods.h"
#include "xmalloc.h"

/* The method may be called before hello. */
#define METHOD_BEFORE_HELLO	0x1

static const struct method {
	const char	*name;
	method_fn	 fn;
	int		 flags;
} methods[] = {
	{ "hello",		method_hello,		METHOD_BEFORE_HELLO },
	{ "daemon.ping",	method_daemon_ping,	0 },
	{ "daemon.status",	method_daemon_status,	0 },
	{ "daemon.shutdown",	method_daemon_shutdown,	0 },
	{ "daemon.reload",	method_daemon_reload,	0 },
	{ "log.read",		method_log_read,	0 },
	{ "log.append",		method_log_append,	0 },
	{ "session.create",	method_session_create,	0 },
	{ "session.list",	method_session_list,	0 },
	{ "session.attach",	method_session_attach,	0 },
	{ "session.detach",	method_session_detach,	0 },
	{ "session.send",	method_session_send,	0 },
	{ "session.cancel",	method_session_cancel,	0 },
	{ "session.close",	method_session_close,	0 },
	{ "session.history",	method_session_history,	0 },
	{ "session.rewind",	method_session_rewind,	0 },
	{ "session.changes",	method_session_changes,	0 },
	{ "tool.list",		method_tool_list,	0 },
	{ "tool.call",		method_tool_call,	0 },
	{ "tool.cancel",	method_tool_cancel,	0 },
	{ "mcp.servers",	method_mcp_servers,	0 },
	{ "approval.list",	method_approval_list,	0 },
	{ "approval.resolve",	method_approval_resolve, 0 },
	{ "approval.grants",	method_approval_grants,	0 },
	{ "approval.revoke",	method_approval_revoke,	0 },
	{ "env.list",		method_env_list,	0 },
	{ "env.show",		method_env_show,	0 },
	{ "env.use",		method_env_use,		0 },
	{ "env.reload",		method_env_reload,	0 },
	{ "cache.du",		method_cache_du,	0 },
	{ "cache.clean",	method_cache_clean,	0 },
};

struct request {
	struct conn		*conn;		/* counted reference */
	json_t			*id;		/* NULL for a notification */
	const struct method	*method;
};

/* Finds a method by name. */
static const struct method *
dispatch_find(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof methods / sizeof methods[0]; i++) {
		if (strcmp(methods[i].name, name) == 0)
			return &methods[i];
	}
	return NULL;
}

/* Sends an error for a line that never became a request. */
static void
dispatch_reject(struct conn *c, json_t *id, enum gbr_err e, json_t *data,
    const char *message)
{
	json_t	*reply = rpc_error(id, e, message, data);

	conn_send(c, reply);
	json_decref(reply);
}

/*
 * The request_id rule, for every method that takes one: 1 to
 * DISPATCH_RID_MAX printable ASCII characters, no spaces. Checked here once;
 * the modules that remember request_ids rely on it. (A value that is not a
 * string is left to the method's params_string, which says so.)
 */
static int
dispatch_rid_valid(json_t *params)
{
	json_t		*v;
	const char	*s;
	size_t		 i, n;

	if (!json_is_object(params) ||
	    !json_is_string(v = json_object_get(params, "request_id")))
		return 1;
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0 || n > DISPATCH_RID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return 0;
	return 1;
}

/* Handles one line. */
void
dispatch_line(struct conn *c, const char *line, size_t len)
{
	struct rpc_msg		 msg;
	json_t			*reply;
	const struct method	*m;
	struct request		*req;

	if (rpc_parse(line, len, &msg, &reply) != 0) {
		conn_send(c, reply);
		json_decref(reply);
		return;
	}
	if (msg.kind == RPC_RESPONSE) {
		/* We never send requests to clients, so nothing waits for this. */
		dispatch_reject(c, msg.id, GBR_ERR_INVALID_REQUEST, NULL,
		    "unexpected response");
		goto out;
	}
	if ((m = dispatch_find(msg.method)) == NULL) {
		if (msg.kind == RPC_REQUEST)
			dispatch_reject(c, msg.id, GBR_ERR_METHOD_NOT_FOUND,
			    json_pack("{s:s}", "method", msg.method),
			    "unknown method");
		goto out;
	}
	if (!conn_has_hello(c) && !(m->flags & METHOD_BEFORE_HELLO)) {
		if (msg.kind == RPC_REQUEST)
			dispatch_reject(c, msg.id, GBR_ERR_HELLO_REQUIRED, NULL,
			    "the first call must be hello");
		goto out;
	}
	if (!dispatch_rid_valid(msg.params)) {
		if (msg.kind == RPC_REQUEST)
			dispatch_reject(c, msg.id, GBR_ERR_INVALID_PARAMS,
			    json_pack("{s:s}", "field", "request_id"),
			    "request_id: 1 to 128 printable characters");
		goto out;
	}
	req = xcalloc(1, sizeof *req);
	req->conn = c;
	conn_ref(c);
	conn_request_begin(c);
	req->id = msg.id != NULL ? json_incref(msg.id) : NULL;
	req->method = m;
	m->fn(req, msg.params);
out:
	rpc_msg_release(&msg);
}

/* Who is told of closing connections, in the order they asked. */
static struct {
	dispatch_close_fn	 fn;
	int			 on_eof;
}			 dispatch_observers[DISPATCH_OBSERVERS_MAX];
static size_t		 dispatch_nobservers;

void
dispatch_observe_close(dispatch_close_fn fn, int on_eof)
{
	if (dispatch_nobservers == DISPATCH_OBSERVERS_MAX)
		fatalx("dispatch: more than %d close observers",
		    DISPATCH_OBSERVERS_MAX);
	dispatch_observers[dispatch_nobservers].fn = fn;
	dispatch_observers[dispatch_nobservers].on_eof = on_eof;
	dispatch_nobservers++;
}

/* A connection closed: every observer is told. */
void
dispatch_conn_closed(struct conn *c)
{
	size_t	i;

	for (i = 0; i < dispatch_nobservers; i++)
		dispatch_observers[i].fn(c);
}

/* The peer closed its side: the observers that asked for it are told. */
void
dispatch_conn_eof(struct conn *c)
{
	size_t	i;

	for (i = 0; i < dispatch_nobservers; i++)
		if (dispatch_observers[i].on_eof)
			dispatch_observers[i].fn(c);
}

/* Lists the method names. */
json_t *
dispatch_methods(void)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; i < sizeof methods / sizeof methods[0]; i++)
		json_array_append_new(a, json_string(methods[i].name));
	return a;
}

/* Frees a finished request. */
static void
request_free(struct request *req)
{
	conn_request_end(req->conn);
	conn_unref(req->conn);
	json_decref(req->id);
	free(req);
}

/* Sends a reply and frees the request. */
void
request_reply(struct request *req, json_t *result)
{
	json_t	*reply;

	if (req->id != NULL) {
		reply = rpc_result(req->id, result);
		conn_send(req->conn, reply);
		json_decref(reply);
	} else
		json_decref(result);
	request_free(req);
}

/*
 * Sends a reply whose result is JSON text already (len bytes, borrowed:
 * a value, no newline in it) and frees the request.
 */
void
request_reply_text(struct request *req, const char *result, size_t len)
{
	char	*id, *line;
	size_t	 ilen, n;

	if (req->id != NULL) {
		if ((id = json_dumps(req->id, JSON_COMPACT |
		    JSON_ENCODE_ANY)) == NULL)
			fatalx("request_reply_text: out of memory");
		ilen = strlen(id);
		n = sizeof "{\"jsonrpc\":\"2.0\",\"id\":" - 1 + ilen +
		    sizeof ",\"result\":" - 1 + len + 2;
		line = xmalloc(n);
		memcpy(line, "{\"jsonrpc\":\"2.0\",\"id\":",
		    sizeof "{\"jsonrpc\":\"2.0\",\"id\":" - 1);
		n = sizeof "{\"jsonrpc\":\"2.0\",\"id\":" - 1;
		memcpy(line + n, id, ilen);
		n += ilen;
		memcpy(line + n, ",\"result\":", sizeof ",\"result\":" - 1);
		n += sizeof ",\"result\":" - 1;
		memcpy(line + n, result, len);
		n += len;
		line[n++] = '}';
		line[n++] = '\n';
		(void)conn_send_raw(req->conn, line, n);
		free(line);
		free(id);
	}
	request_free(req);
}

/* Sends an error and frees the request. */
void
request_error(struct request *req, enum gbr_err e, json_t *data,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*message;
	json_t	*reply;

	if (req->id != NULL) {
		va_start(ap, fmt);
		message = xvasprintf(fmt, ap);
		va_end(ap);
		reply = rpc_error(req->id, e, message, data);
		conn_send(req->conn, reply);
		json_decref(reply);
		free(message);
	} else
		json_decref(data);
	request_free(req);
}

/* Returns the asking connection. */
struct conn *
request_conn(const struct request *req)
{
	return req->conn;
}

/* Who sent a request (see dispatch.h). */
json_t *
request_who(const struct request *req)
{
	struct conn	*c = req->conn;
	char		*tty = osdep_pid_tty(conn_pid(c));
	json_t		*o;

	o = json_pack("{s:s, s:I, s:I}", "client", *conn_client(c) != '\0' ?
	    conn_client(c) : "a client", "pid", (json_int_t)conn_pid(c),
	    "uid", (json_int_t)conn_uid(c));
	if (tty != NULL)
		json_object_set_new(o, "tty", json_string(tty));
	free(tty);
	return o;
}

/* Returns the method name. */
const char *
request_method(const struct request *req)
{
	return req->method->name;
}

/* Returns the JSON-RPC id, or NULL. */
json_t *
request_rpc_id(const struct request *req)
{
	return req->id;
}

/* Fails a request for one bad field. */
static int
params_fail(struct request *req, const char *key, const char *what)
{
	request_error(req, GBR_ERR_INVALID_PARAMS,
	    json_pack("{s:s}", "field", key), "%s: %s", key, what);
	return -1;
}

/* Checks the shape of params and that no unknown key is present. */
int
params_only(struct request *req, json_t *params, const char *const *keys)
{
	const char	*key;
	json_t		*v;
	size_t		 i;

	if (params == NULL)
		return 0;
	if (!json_is_object(params))
		return params_fail(req, "params", "must be an object");
	json_object_foreach(params, key, v) {
		for (i = 0; keys[i] != NULL; i++) {
			if (strcmp(keys[i], key) == 0)
				break;
		}
		if (keys[i] == NULL)
			return params_fail(req, key, "unknown field");
	}
	return 0;
}

/* Looks a key up; reports a missing required one. */
static int
params_lookup(struct request *req, json_t *params, const char *key,
    int required, json_t **v)
{
	*v = params != NULL ? json_object_get(params, key) : NULL;
	if (*v == NULL && required)
		return params_fail(req, key, "required");
	return 0;
}

/* Checks a string field. */
int
params_string(struct request *req, json_t *params, const char *key,
    int required, const char **out)
{
	json_t	*v;

	if (params_lookup(req, params, key, required, &v) != 0)
		return -1;
	if (v == NULL)
		return 0;
	if (!json_is_string(v))
		return params_fail(req, key, "must be a string");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return params_fail(req, key, "must not contain NUL");
	*out = json_string_value(v);
	return 0;
}

/* Checks an integer field and its range. */
int
params_integer(struct request *req, json_t *params, const char *key,
    int required, json_int_t min, json_int_t max, json_int_t *out)
{
	json_t	*v;
	char	 what[96];

	if (params_lookup(req, params, key, required, &v) != 0)
		return -1;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v))
		return params_fail(req, key, "must be an integer");
	if (json_integer_value(v) < min || json_integer_value(v) > max) {
		snprintf(what, sizeof what, "must be from %lld"
		    " to %lld", min, max);
		return params_fail(req, key, what);
	}
	*out = json_integer_value(v);
	return 0;
}

/* Checks a boolean field. */
int
params_boolean(struct request *req, json_t *params, const char *key,
    int required, int *out)
{
	json_t	*v;

	if (params_lookup(req, params, key, required, &v) != 0)
		return -1;
	if (v == NULL)
		return 0;
	if (!json_is_boolean(v))
		return params_fail(req, key, "must be true or false");
	*out = json_is_true(v);
	return 0;
}

/* Checks an object field. */
int
params_object(struct request *req, json_t *params, const char *key,
    int required, json_t **out)
{
	json_t	*v;

	if (params_lookup(req, params, key, required, &v) != 0)
		return -1;
	if (v == NULL)
		return 0;
	if (!json_is_object(v))
		return params_fail(req, key, "must be an object");
	*out = v;
	return 0;
}

/* What conn.c calls with a connection's input. */
const struct conn_ops dispatch_conn_ops = {
	dispatch_line, dispatch_conn_closed, dispatch_conn_eof
};
