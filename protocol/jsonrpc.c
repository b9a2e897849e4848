/*
 * JSON-RPC 2.0 framing on top of jansson. The parser is the first code that
 * touches bytes from a client, so it is strict and total: any input gives
 * either a message or an error reply, never a crash. jansson already bounds
 * nesting depth, rejects invalid UTF-8 and NUL bytes inside strings, and we
 * ask it to reject duplicate keys too.
 */
#include "gbr-config.h"

#include <string.h>

#include "jsonrpc.h"
#include "log.h"
#include "xmalloc.h"

/* Tells whether a JSON value may be used as a request id. */
static int
rpc_valid_id(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id) || json_is_null(id) ||
	    json_is_real(id);
}

/* True if v nests containers more than max deep (see jsonrpc.h). */
int
rpc_nesting_over(const json_t *v, int max)
{
	const char	*key;
	json_t		*e;
	size_t		 i;

	if (!json_is_object(v) && !json_is_array(v))
		return 0;
	if (max <= 0)
		return 1;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (rpc_nesting_over(e, max - 1))
				return 1;
		return 0;
	}
	json_object_foreach((json_t *)v, key, e)
		if (rpc_nesting_over(e, max - 1))
			return 1;
	return 0;
}

/*
 * Parses one line into a message or an error reply, with jansson's flags;
 * max_nesting 0 leaves the depth to jansson.
 */
static int
rpc_parse_flags(const char *line, size_t len, size_t flags, int max_nesting,
    struct rpc_msg *msg, json_t **reply)
{
	json_error_t	 jerr;
	json_t		*root, *v, *id;
	const char	*version;

	memset(msg, 0, sizeof *msg);
	*reply = NULL;
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
	    flags, &jerr);
	if (root == NULL) {
		*reply = rpc_error(NULL, GBR_ERR_PARSE, "parse error",
		    json_pack("{s:s, s:i}", "detail", jerr.text, "position",
		    jerr.position));
		return -1;
	}
	if (max_nesting > 0 && rpc_nesting_over(root, max_nesting)) {
		json_decref(root);
		*reply = rpc_error(NULL, GBR_ERR_PARSE, "parse error",
		    json_pack("{s:s, s:i}", "detail", "nested deeper than the "
		    "limit", "max_nesting", max_nesting));
		return -1;
	}
	if (!json_is_object(root)) {
		*reply = rpc_error(NULL, GBR_ERR_INVALID_REQUEST,
		    json_is_array(root) ? "batch requests are not supported" :
		    "a message must be a JSON object", NULL);
		json_decref(root);
		return -1;
	}
	id = json_object_get(root, "id");
	if (id != NULL && !rpc_valid_id(id)) {
		*reply = rpc_error(NULL, GBR_ERR_INVALID_REQUEST,
		    "id must be a string, a number or null", NULL);
		json_decref(root);
		return -1;
	}
	v = json_object_get(root, "jsonrpc");
	version = json_string_value(v);
	if (version == NULL || strcmp(version, "2.0") != 0) {
		*reply = rpc_error(id, GBR_ERR_INVALID_REQUEST,
		    "jsonrpc must be \"2.0\"", NULL);
		json_decref(root);
		return -1;
	}
	msg->root = root;
	msg->id = id;
	v = json_object_get(root, "method");
	if (v != NULL) {
		if (!json_is_string(v) || json_string_length(v) == 0)
			goto invalid;
		msg->method = json_string_value(v);
		msg->kind = id != NULL ? RPC_REQUEST : RPC_NOTIFICATION;
		msg->params = json_object_get(root, "params");
		if (msg->params != NULL && !json_is_object(msg->params) &&
		    !json_is_array(msg->params)) {
			*reply = rpc_error(id, GBR_ERR_INVALID_REQUEST,
			    "params must be an object or an array", NULL);
			goto fail;
		}
		return 0;
	}
	msg->result = json_object_get(root, "result");
	msg->error = json_object_get(root, "error");
	if (id == NULL || (msg->result == NULL) == (msg->error == NULL) ||
	    (msg->error != NULL && !json_is_object(msg->error)))
		goto invalid;
	msg->kind = RPC_RESPONSE;
	return 0;

invalid:
	*reply = rpc_error(id, GBR_ERR_INVALID_REQUEST,
	    "not a JSON-RPC 2.0 request, notification or response", NULL);
fail:
	json_decref(root);
	memset(msg, 0, sizeof *msg);
	return -1;
}

/* Parses one line into a message or an error reply. */
int
rpc_parse(const char *line, size_t len, struct rpc_msg *msg, json_t **reply)
{
	return rpc_parse_flags(line, len, 0, RPC_MAX_NESTING, msg, reply);
}

/* The same for a line from gbrd, whose strings may hold NUL bytes. */
int
rpc_parse_from_daemon(const char *line, size_t len, struct rpc_msg *msg,
    json_t **reply)
{
	return rpc_parse_flags(line, len, JSON_ALLOW_NUL, 0, msg, reply);
}

/* Releases what rpc_parse filled. */
void
rpc_msg_release(struct rpc_msg *msg)
{
	json_decref(msg->root);
	memset(msg, 0, sizeof *msg);
}

/*
 * Builds a result response. Every reply goes through here, so it is built
 * by hand rather than with json_pack, whose format parsing cost more than
 * the object itself; the keys are constants, so they skip the UTF-8 check.
 */
json_t *
rpc_result(json_t *id, json_t *result)
{
	json_t	*msg;

	if (result == NULL)
		result = json_object();
	if ((msg = json_object()) == NULL || result == NULL ||
	    json_object_set_new_nocheck(msg, "jsonrpc", json_string("2.0")) != 0 ||
	    json_object_set_nocheck(msg, "id", id != NULL ? id : json_null()) != 0)
		fatalx("rpc_result: out of memory");
	if (json_object_set_new_nocheck(msg, "result", result) != 0)
		fatalx("rpc_result: out of memory");
	return msg;
}

/* Builds an error response. */
json_t *
rpc_error(json_t *id, enum gbr_err e, const char *message, json_t *data)
{
	if (data == NULL || !json_is_object(data)) {
		json_decref(data);
		data = json_object();
	}
	json_object_set_new(data, "kind", json_string(gbr_err_kind(e)));
	return json_pack("{s:s, s:O, s:{s:i, s:s, s:o}}", "jsonrpc", "2.0",
	    "id", id != NULL ? id : json_null(), "error", "code", gbr_err_code(e),
	    "message", message != NULL ? message : gbr_err_kind(e), "data", data);
}

/* Builds a notification. */
json_t *
rpc_notification(const char *method, json_t *params)
{
	if (params == NULL)
		params = json_object();
	return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method,
	    "params", params);
}

/* A growing buffer for rpc_encode. */
struct rpc_buf {
	char	*buf;
	size_t	 len;
	size_t	 cap;
};

/* jansson dump callback: appends a piece to an rpc_buf. */
static int
rpc_buf_cb(const char *piece, size_t n, void *arg)
{
	struct rpc_buf	*b = arg;

	if (n > b->cap - b->len) {
		while (n > b->cap - b->len)
			b->cap *= 2;
		b->buf = xreallocarray(b->buf, 1, b->cap);
	}
	memcpy(b->buf + b->len, piece, n);
	b->len += n;
	return 0;
}

/* Builds a request. */
json_t *
rpc_request(json_int_t id, const char *method, json_t *params)
{
	json_t	*msg;

	msg = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", id,
	    "method", method);
	if (params != NULL)
		json_object_set_new(msg, "params", params);
	return msg;
}

/* Encodes a message as one line. */
char *
rpc_encode(const json_t *msg, size_t *len)
{
	struct rpc_buf	b;

	/*
	 * One pass of the encoder (json_dumpb would need two: one to measure,
	 * one to write), into a buffer that doubles. JSON_COMPACT never emits
	 * a raw newline: strings are escaped.
	 */
	b.cap = 512;
	b.len = 0;
	b.buf = xmalloc(b.cap);
	if (json_dump_callback(msg, rpc_buf_cb, &b, JSON_COMPACT) != 0 ||
	    b.len == 0)
		fatalx("rpc_encode: message cannot be encoded");
	rpc_buf_cb("\n", 1, &b);
	*len = b.len;
	return b.buf;
}

/* Returns error.data.kind of an error object. */
const char *
rpc_error_kind(const json_t *error)
{
	return json_string_value(json_object_get(json_object_get(error, "data"),
	    "kind"));
}
