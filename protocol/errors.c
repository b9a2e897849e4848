/*
 * The table of error kinds: the one place that maps a kind to its code and
 * its wire name.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdlib.h>

#include <jansson.h>

#include "errors.h"
#include "xmalloc.h"

static const struct {
	int		 code;
	const char	*kind;
} gbr_errs[GBR_ERR__COUNT] = {
	[GBR_ERR_PARSE] =		 { RPC_PARSE_ERROR, "parse_error" },
	[GBR_ERR_INVALID_REQUEST] =	 { RPC_INVALID_REQUEST, "invalid_request" },
	[GBR_ERR_METHOD_NOT_FOUND] =	 { RPC_METHOD_NOT_FOUND, "method_not_found" },
	[GBR_ERR_INVALID_PARAMS] =	 { RPC_INVALID_PARAMS, "invalid_params" },
	[GBR_ERR_INTERNAL] =		 { RPC_INTERNAL_ERROR, "internal_error" },
	[GBR_ERR_TOO_LARGE] =		 { -32001, "too_large" },
	[GBR_ERR_HELLO_REQUIRED] =	 { -32002, "hello_required" },
	[GBR_ERR_UNSUPPORTED_PROTOCOL] = { -32003, "unsupported_protocol" },
	[GBR_ERR_PERMISSION_DENIED] =	 { -32004, "permission_denied" },
	[GBR_ERR_BUSY] =		 { -32005, "busy" },
	[GBR_ERR_SHUTTING_DOWN] =	 { -32006, "shutting_down" },
	[GBR_ERR_STORAGE] =		 { -32007, "storage_error" },
	[GBR_ERR_NOT_FOUND] =		 { -32008, "not_found" },
	[GBR_ERR_TIMEOUT] =		 { -32009, "timeout" },
	[GBR_ERR_UNAVAILABLE] =		 { -32010, "unavailable" },
	[GBR_ERR_SESSION_NOT_FOUND] =	 { -32011, "session_not_found" },
	[GBR_ERR_ALREADY_EXISTS] =	 { -32012, "already_exists" },
	[GBR_ERR_LIMIT_REACHED] =	 { -32013, "limit_reached" },
	[GBR_ERR_INVALID_ENV] =		 { -32014, "invalid_env" },
	[GBR_ERR_PATH_TRAVERSAL] =	 { -32015, "path_traversal" },
	[GBR_ERR_PROTECTED_PATH] =	 { -32016, "protected_path" },
	[GBR_ERR_READ_ONLY] =		 { -32017, "read_only" },
	[GBR_ERR_NOT_A_FILE] =		 { -32018, "not_a_file" },
	[GBR_ERR_INVALID_PATH] =	 { -32019, "invalid_path" },
	[GBR_ERR_NOT_UNIQUE] =		 { -32020, "not_unique" },
	[GBR_ERR_INTERPRETER_NOT_FOUND] = { -32021, "interpreter_not_found" },
	[GBR_ERR_COMMAND_NOT_FOUND] =	 { -32022, "command_not_found" },
	[GBR_ERR_NEEDS_APPROVAL] =	 { -32023, "needs_approval" },
	[GBR_ERR_DENIED_COMMAND] =	 { -32024, "denied_command" },
	[GBR_ERR_CANCELLED] =		 { -32025, "cancelled" },
	[GBR_ERR_APPROVAL_NOT_FOUND] =	 { -32026, "approval_not_found" },
	[GBR_ERR_ALREADY_RESOLVED] =	 { -32027, "already_resolved" },
	[GBR_ERR_DENIED] =		 { -32028, "denied" },
	[GBR_ERR_EXPIRED] =		 { -32029, "expired" },
	[GBR_ERR_CHANGED_SINCE_APPROVAL] = { -32030, "changed_since_approval" },
	[GBR_ERR_INVALID_CONFIG] =	 { -32031, "invalid_config" },
	[GBR_ERR_TOOL_ERROR] =		 { -32032, "tool_error" },
	[GBR_ERR_CONFLICT] =		 { -32033, "conflict" },
	[GBR_ERR_GONE] =		 { -32034, "gone" },
};

/* Returns the JSON-RPC code of a kind. */
int
gbr_err_code(enum gbr_err e)
{
	if ((unsigned)e >= GBR_ERR__COUNT)
		return RPC_INTERNAL_ERROR;
	return gbr_errs[e].code;
}

/* Returns the wire name of a kind. */
const char *
gbr_err_kind(enum gbr_err e)
{
	if ((unsigned)e >= GBR_ERR__COUNT)
		return "internal_error";
	return gbr_errs[e].kind;
}

int
gbr_error_set(struct gbr_error *err, enum gbr_err kind, json_t *data,
    const char *fmt, ...)
{
	va_list	ap;

	err->kind = kind;
	err->data = data;
	va_start(ap, fmt);
	err->message = xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

void
gbr_error_clear(struct gbr_error *err)
{
	free(err->message);
	err->message = NULL;
	json_decref(err->data);
	err->data = NULL;
}
