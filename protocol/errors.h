/*
 * The error kinds of the protocol: each has a JSON-RPC code and a stable
 * lower_snake name sent as error.data.kind. Clients and tests match on the
 * kind, never on the message. Add new kinds at the end of the enum and the
 * table; never renumber or rename one that shipped.
 */
#ifndef GBR_ERRORS_H
#define GBR_ERRORS_H

#define RPC_PARSE_ERROR		-32700
#define RPC_INVALID_REQUEST	-32600
#define RPC_METHOD_NOT_FOUND	-32601
#define RPC_INVALID_PARAMS	-32602
#define RPC_INTERNAL_ERROR	-32603

enum gbr_err {
	GBR_ERR_PARSE = 0,		/* parse_error */
	GBR_ERR_INVALID_REQUEST,	/* invalid_request */
	GBR_ERR_METHOD_NOT_FOUND,	/* method_not_found */
	GBR_ERR_INVALID_PARAMS,		/* invalid_params */
	GBR_ERR_INTERNAL,		/* internal_error */
	GBR_ERR_TOO_LARGE,		/* too_large */
	GBR_ERR_HELLO_REQUIRED,		/* hello_required */
	GBR_ERR_UNSUPPORTED_PROTOCOL,	/* unsupported_protocol */
	GBR_ERR_PERMISSION_DENIED,	/* permission_denied */
	GBR_ERR_BUSY,			/* busy */
	GBR_ERR_SHUTTING_DOWN,		/* shutting_down */
	GBR_ERR_STORAGE,		/* storage_error */
	GBR_ERR_NOT_FOUND,		/* not_found */
	GBR_ERR_TIMEOUT,		/* timeout */
	GBR_ERR_UNAVAILABLE,		/* unavailable: a feature not built or not usable here */
	GBR_ERR_SESSION_NOT_FOUND,	/* session_not_found */
	GBR_ERR_ALREADY_EXISTS,		/* already_exists: e.g. a session name in use */
	GBR_ERR_LIMIT_REACHED,		/* limit_reached: a configured count or size bound */
	GBR_ERR_INVALID_ENV,		/* invalid_env: no such environment profile */
	GBR_ERR_PATH_TRAVERSAL,		/* path_traversal: points outside the sandbox */
	GBR_ERR_PROTECTED_PATH,		/* protected_path: a write needs a human */
	GBR_ERR_READ_ONLY,		/* read_only: inside a read-only root */
	GBR_ERR_NOT_A_FILE,		/* not_a_file: a folder, FIFO, device, socket */
	GBR_ERR_INVALID_PATH,		/* invalid_path: bytes no path may hold */
	GBR_ERR_NOT_UNIQUE,		/* not_unique: edit_file's old_string matches twice */
	GBR_ERR_INTERPRETER_NOT_FOUND,	/* interpreter_not_found: run_script's python3/node/sh */
	GBR_ERR_COMMAND_NOT_FOUND,	/* command_not_found: run_command's program */
	GBR_ERR_NEEDS_APPROVAL,		/* needs_approval: an ask_commands match */
	GBR_ERR_DENIED_COMMAND,		/* denied_command: a deny_commands match */
	GBR_ERR_CANCELLED,		/* cancelled: ended early on request */
	GBR_ERR_APPROVAL_NOT_FOUND,	/* approval_not_found: no such approval */
	GBR_ERR_ALREADY_RESOLVED,	/* already_resolved: a human decided first */
	GBR_ERR_DENIED,			/* denied: a human said no */
	GBR_ERR_EXPIRED,		/* expired: nobody decided in time */
	GBR_ERR_CHANGED_SINCE_APPROVAL,	/* changed_since_approval: the approved
					   file is no longer what a human saw */
	GBR_ERR_INVALID_CONFIG,		/* invalid_config: gbrd.conf cannot be used */
	GBR_ERR_TOOL_ERROR,		/* tool_error: an MCP server's tool said
					   it failed (isError, or its error) */
	GBR_ERR_CONFLICT,		/* conflict: a rewind would undo what
					   someone else changed since */
	GBR_ERR_GONE,			/* gone: what was asked for was dropped
					   (a snapshot of the disk log) */
	GBR_ERR__COUNT
};

/*
 * An error on its way to a client: what every layer that can fail for a
 * client's reason fills, and what dispatch turns into a JSON-RPC error
 * ({code, message, data: {kind, ...data}}).
 */
struct gbr_error {
	enum gbr_err	 kind;
	char		*message;	/* the holder frees it (gbr_error_clear) */
	struct json_t	*data;		/* a new reference or NULL */
};

/* Fills err (data stolen, message formatted). Returns -1. */
int		 gbr_error_set(struct gbr_error *err, enum gbr_err kind,
		    struct json_t *data, const char *fmt, ...)
		    __attribute__((format(__printf__, 4, 5)));
/* Frees what err holds and empties it. */
void		 gbr_error_clear(struct gbr_error *err);

/* The JSON-RPC code of a kind. */
int		 gbr_err_code(enum gbr_err);
/* The stable name of a kind. */
const char	*gbr_err_kind(enum gbr_err);

#endif
