/*
 * libFuzzer target for the JSON-RPC parser (protocol/jsonrpc.c). rpc_parse
 * must be total: any bytes give either a message or an error reply, and the
 * daemon writes whatever comes out, so both must encode. Checked here:
 * an error reply is -32700 (with id null) or -32600 and has a data.kind;
 * a parsed message re-encodes to exactly one line with no raw newline, and
 * that line parses back to an equal message of the same kind.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what)
{
	fprintf(stderr, "fuzz-jsonrpc: %s\n", what);
	abort();
}

/* Checks that a message encodes to one line; returns the line (caller frees). */
static char *
check_line(const json_t *msg, size_t *len)
{
	char	*buf;

	buf = rpc_encode(msg, len);
	if (*len < 2 || buf[*len - 1] != '\n')
		fail("an encoded message does not end in one newline");
	if (memchr(buf, '\n', *len - 1) != NULL)
		fail("an encoded message holds a raw newline");
	return buf;
}

/* Checks an error reply from rpc_parse. */
static void
check_reply(const json_t *reply)
{
	json_t		*error, *id;
	json_int_t	 code;
	char		*buf;
	size_t		 len;

	if (reply == NULL)
		fail("rpc_parse failed without a reply");
	error = json_object_get(reply, "error");
	code = json_integer_value(json_object_get(error, "code"));
	if (code != RPC_PARSE_ERROR && code != RPC_INVALID_REQUEST)
		fail("the error code is neither -32700 nor -32600");
	id = json_object_get(reply, "id");
	if (id == NULL || (code == RPC_PARSE_ERROR && !json_is_null(id)))
		fail("a parse error without id: null");
	if (rpc_error_kind(error) == NULL)
		fail("an error reply without data.kind");
	if (!json_is_string(json_object_get(error, "message")))
		fail("an error reply without a message");
	buf = check_line(reply, &len);
	free(buf);
}

/* Parses one input and checks the result both ways. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpc_msg	 msg, again;
	json_t		*reply;
	char		*buf;
	size_t		 len;

	if (rpc_parse((const char *)data, size, &msg, &reply) != 0) {
		check_reply(reply);
		json_decref(reply);
		if (msg.root != NULL)
			fail("a failed parse left a message");
		return 0;
	}
	if (reply != NULL)
		fail("a message came with an error reply");
	if (!json_is_object(msg.root))
		fail("a message that is not an object");
	switch (msg.kind) {
	case RPC_REQUEST:
	case RPC_NOTIFICATION:
		if (msg.method == NULL || *msg.method == '\0')
			fail("a request without a method");
		if ((msg.kind == RPC_REQUEST) != (msg.id != NULL))
			fail("a request without an id or a notification with one");
		break;
	case RPC_RESPONSE:
		if (msg.id == NULL || (msg.result == NULL) == (msg.error == NULL))
			fail("a response without an id or with result and error");
		break;
	default:
		fail("a message of no kind");
	}

	buf = check_line(msg.root, &len);
	if (rpc_parse(buf, len - 1, &again, &reply) != 0)
		fail("a re-encoded message does not parse");
	if (again.kind != msg.kind || !json_equal(again.root, msg.root))
		fail("a re-encoded message parses to a different message");
	if ((msg.method == NULL) != (again.method == NULL) ||
	    (msg.method != NULL && strcmp(msg.method, again.method) != 0))
		fail("a re-encoded message has another method");
	rpc_msg_release(&again);
	free(buf);
	rpc_msg_release(&msg);
	return 0;
}
