/*
 * Unit tests for JSON-RPC parsing and building: every class of bad input
 * gets the right code and kind, ids are echoed, encoding is one line.
 */
#include "gbr-config.h"

#include "jsonrpc.h"
#include "unit.h"
#include "xmalloc.h"

/* Parses s; returns the error code of the reply, or 0 if it parsed. */
static int
code_of(const char *s, size_t len, struct rpc_msg *out)
{
	struct rpc_msg	 msg;
	json_t		*reply;
	int		 code;

	if (rpc_parse(s, len, &msg, &reply) == 0) {
		if (out != NULL)
			*out = msg;
		else
			rpc_msg_release(&msg);
		return 0;
	}
	code = (int)json_integer_value(json_object_get(json_object_get(reply,
	    "error"), "code"));
	json_decref(reply);
	return code;
}

static int
code_s(const char *s)
{
	return code_of(s, strlen(s), NULL);
}

/* Returns the id of the error reply for s as a JSON text. */
static char *
error_id(const char *s)
{
	struct rpc_msg	 msg;
	json_t		*reply;
	char		*id;

	if (rpc_parse(s, strlen(s), &msg, &reply) == 0) {
		rpc_msg_release(&msg);
		return xstrdup("(parsed)");
	}
	id = json_dumps(json_object_get(reply, "id"), JSON_ENCODE_ANY);
	json_decref(reply);
	return id;
}

static const char nul_line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\0b\"}";

int
main(void)
{
	struct rpc_msg	 msg;
	json_t		*m, *id;
	const char	*s;
	char		*e, *deep;
	size_t		 len, i;

	/* Good messages. */
	s = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{}}";
	CHECK(code_of(s, strlen(s), &msg) == 0 && msg.kind == RPC_REQUEST &&
	    strcmp(msg.method, "hello") == 0, "request parsed");
	rpc_msg_release(&msg);
	s = "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}";
	CHECK(code_of(s, strlen(s), &msg) == 0 &&
	    msg.kind == RPC_NOTIFICATION && msg.id == NULL, "notification parsed");
	rpc_msg_release(&msg);
	s = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}";
	CHECK(code_of(s, strlen(s), &msg) == 0 &&
	    msg.kind == RPC_RESPONSE, "response parsed");
	rpc_msg_release(&msg);
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"m\"}") == 0,
	    "null id is a request");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[1]}") == 0,
	    "array params accepted by the parser");

	/* Not JSON. */
	CHECK(code_s("{") == RPC_PARSE_ERROR, "truncated object: -32700");
	CHECK(code_s("hello") == RPC_PARSE_ERROR, "bare word: -32700");
	CHECK(code_s("{} {}") == RPC_PARSE_ERROR, "two values on a line: -32700");
	e = error_id("{\"id\":7,");
	CHECK(strcmp(e, "null") == 0, "parse error answers id null");
	free(e);
	CHECK(code_of(nul_line, sizeof nul_line - 1, NULL) ==
	    RPC_PARSE_ERROR, "raw NUL byte: -32700");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}") ==
	    RPC_PARSE_ERROR, "invalid UTF-8: -32700");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc0\xaf\"}") ==
	    RPC_PARSE_ERROR, "overlong UTF-8: -32700");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\\ud800\"}") ==
	    RPC_PARSE_ERROR, "lone surrogate escape: -32700");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}") ==
	    RPC_PARSE_ERROR, "duplicate key: -32700");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234567890,\"method\":\"m\"}") ==
	    RPC_PARSE_ERROR, "integer beyond 64 bits: -32700");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"m\"}") ==
	    RPC_PARSE_ERROR, "real overflow: -32700");

	/* Deep nesting is refused without recursing to death. */
	len = 100000;
	deep = xmalloc(2 * len + 64);
	memcpy(deep, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":", 46);
	for (i = 0; i < len; i++)
		deep[46 + i] = '[';
	for (i = 0; i < len; i++)
		deep[46 + len + i] = ']';
	deep[46 + 2 * len] = '}';
	CHECK(code_of(deep, 47 + 2 * len, NULL) == RPC_PARSE_ERROR,
	    "100000 nested arrays: -32700, no stack overflow");
	free(deep);

	/* JSON that is not a message. */
	CHECK(code_s("[]") == RPC_INVALID_REQUEST, "array (batch): -32600");
	CHECK(code_s("42") == RPC_INVALID_REQUEST, "number: -32600");
	CHECK(code_s("\"x\"") == RPC_INVALID_REQUEST, "string: -32600");
	CHECK(code_s("{}") == RPC_INVALID_REQUEST, "empty object: -32600");
	CHECK(code_s("{\"id\":1,\"method\":\"m\"}") == RPC_INVALID_REQUEST,
	    "missing jsonrpc: -32600");
	CHECK(code_s("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\"}") ==
	    RPC_INVALID_REQUEST, "wrong version: -32600");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}") ==
	    RPC_INVALID_REQUEST, "numeric method: -32600");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}") ==
	    RPC_INVALID_REQUEST, "empty method: -32600");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"m\"}") ==
	    RPC_INVALID_REQUEST, "object id: -32600");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":3}") ==
	    RPC_INVALID_REQUEST, "scalar params: -32600");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1}") == RPC_INVALID_REQUEST,
	    "neither method nor result: -32600");
	CHECK(code_s("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}") ==
	    RPC_INVALID_REQUEST, "result and error: -32600");
	e = error_id("{\"jsonrpc\":\"1.0\",\"id\":\"abc\",\"method\":\"m\"}");
	CHECK(strcmp(e, "\"abc\"") == 0, "invalid request echoes a valid id");
	free(e);

	/* Building. */
	m = rpc_error(json_integer(5), GBR_ERR_TOO_LARGE, "big", NULL);
	CHECK(strcmp(rpc_error_kind(json_object_get(m, "error")), "too_large") == 0 &&
	    json_integer_value(json_object_get(json_object_get(m, "error"), "code")) == -32001,
	    "error carries code and kind");
	json_decref(json_object_get(m, "id"));	/* rpc_error took its own ref of id */
	e = rpc_encode(m, &len);
	CHECK(len > 0 && e[len - 1] == '\n' && memchr(e, '\n', len - 1) == NULL,
	    "encoded as exactly one line");
	free(e);
	json_decref(m);
	m = rpc_result(NULL, json_pack("{s:s}", "t", "a\nb"));
	e = rpc_encode(m, &len);
	CHECK(memchr(e, '\n', len - 1) == NULL, "newline inside a string is escaped");
	free(e);
	json_decref(m);
	/* rpc_result is built by hand (hot path): pin its exact bytes. */
	id = json_integer(7);
	m = rpc_result(id, NULL);
	e = rpc_encode(m, &len);
	CHECK(len == 37 && memcmp(e, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
	    len) == 0, "a result reply has its keys in order: jsonrpc, id, result");
	CHECK(id->refcount == 2, "rpc_result takes its own reference of id");
	free(e);
	json_decref(m);
	json_decref(id);
	m = rpc_result(NULL, json_true());
	e = rpc_encode(m, &len);
	CHECK(len == 42 && memcmp(e, "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":true}\n",
	    len) == 0, "no id gives id: null");
	free(e);
	json_decref(m);
	for (i = 0; i < GBR_ERR__COUNT; i++)
		CHECK(gbr_err_kind(i) != NULL && gbr_err_code(i) != 0 &&
		    (gbr_err_code(i) <= -32600 || (gbr_err_code(i) >= -32099 &&
		    gbr_err_code(i) <= -32000)), "kind %s has a valid code",
		    gbr_err_kind(i));

	/* Nesting: the top container counts; scalars do not. */
	{
		json_t	*v = json_loads("[1,{\"a\":[[]],\"b\":2}]", 0, NULL);

		CHECK(!rpc_nesting_over(v, 4) && rpc_nesting_over(v, 3) &&
		    !rpc_nesting_over(json_object_get(json_array_get(v, 1), "b"),
		    0), "rpc_nesting_over counts containers, the top one too");
		json_decref(v);
	}

	/*
	 * A NUL byte escaped in a string: refused in a request to gbrd (it
	 * would cut a path short), taken in a line from gbrd, whose encoder
	 * writes one so (a command's output).
	 */
	{
		static const char	 esc[] = "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"event\",\"params\":{\"text\":\"a\\u0000b\"}}";
		json_t			*reply;

		CHECK(code_s(esc) == -32700, "rpc_parse refuses \\u0000");
		CHECK(rpc_parse_from_daemon(esc, strlen(esc), &msg, &reply) == 0 &&
		    json_string_length(json_object_get(msg.params, "text")) == 3 &&
		    memcmp(json_string_value(json_object_get(msg.params,
		    "text")), "a\0b", 3) == 0,
		    "rpc_parse_from_daemon takes it, as a NUL byte");
		rpc_msg_release(&msg);
		CHECK(rpc_parse_from_daemon(nul_line, sizeof nul_line - 1, &msg,
		    &reply) == -1 && reply != NULL,
		    "rpc_parse_from_daemon still refuses a raw NUL byte");
		json_decref(reply);
	}
	return unit_done();
}
