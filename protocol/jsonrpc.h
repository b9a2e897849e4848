/*
 * JSON-RPC 2.0 messages on the gbr line protocol: parsing one line into a
 * request, notification or response, and building replies, errors and
 * notifications. Ownership follows jansson's words: "steals" means the
 * function takes the caller's reference.
 */
#ifndef GBR_JSONRPC_H
#define GBR_JSONRPC_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"

#define GBR_PROTOCOL_VERSION	1

enum rpc_kind {
	RPC_REQUEST = 1,	/* method and id */
	RPC_NOTIFICATION,	/* method, no id */
	RPC_RESPONSE,		/* result or error, and id */
};

struct rpc_msg {
	enum rpc_kind	 kind;
	json_t		*root;		/* owned; every pointer below borrows from it */
	json_t		*id;		/* NULL for a notification */
	const char	*method;	/* requests and notifications */
	json_t		*params;	/* object or array, NULL when absent */
	json_t		*result;	/* responses */
	json_t		*error;		/* responses */
};

/*
 * Parses one line. On success returns 0 and fills msg (release it with
 * rpc_msg_release). On failure returns -1 and sets *reply to a new reference
 * to the error response that the peer should get: -32700 with id null for
 * text that is not JSON, -32600 for JSON that is not a message.
 */
int	 rpc_parse(const char *line, size_t len, struct rpc_msg *msg, json_t **reply);

/*
 * How deep a request (or a model's tool arguments) may nest: containers
 * within containers, the top one counted. What gbrd keeps is stored inside
 * records and sent inside events a few levels deeper, and jansson reads
 * nothing deeper than 2048 levels; so gbrd takes far less, and everything
 * it writes can be read back. rpc_parse refuses a deeper request (-32700).
 */
#define RPC_MAX_NESTING	64
/* True if v nests containers more than max deep (v itself counted). */
int	 rpc_nesting_over(const json_t *v, int max);
/*
 * rpc_parse for a line from gbrd, in the clients: its strings may hold NUL
 * bytes, which jansson writes as \u0000 (a command's output, a file's
 * text). Requests to gbrd are parsed by rpc_parse, without them: a NUL
 * would cut a path or an argument short in C.
 */
int	 rpc_parse_from_daemon(const char *line, size_t len, struct rpc_msg *msg,
	    json_t **reply);
void	 rpc_msg_release(struct rpc_msg *);

/* Returns a new result response; steals result (NULL means {}). */
json_t	*rpc_result(json_t *id, json_t *result);
/*
 * Returns a new error response for a kind; data (stolen, may be NULL) is an
 * object that gets "kind" added. id may be NULL for id: null.
 */
json_t	*rpc_error(json_t *id, enum gbr_err, const char *message, json_t *data);
/* Returns a new notification; steals params. */
json_t	*rpc_notification(const char *method, json_t *params);
/* Returns a new request with an integer id; steals params (NULL: none). */
json_t	*rpc_request(json_int_t id, const char *method, json_t *params);

/*
 * Encodes a message as one line with its '\n'. Returns a new buffer the
 * caller frees, and its length in *len.
 */
char	*rpc_encode(const json_t *, size_t *len);

/* The kind string of an error response's error object, or NULL. */
const char *rpc_error_kind(const json_t *error);

#endif
