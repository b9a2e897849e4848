/*
 * The tool registry: every tool the agent (and tool.call, and later the
 * MCP bridge) can call, with its JSON Schema and its hints, behind one
 * calling convention. A tool group (tool-file.c today; the runner and MCP
 * later) describes its tools in a static table of struct tool_def and
 * registers it once at start-up; tool_call checks the arguments against
 * the schema, so every tool gets the same invalid_params errors naming the
 * field, then runs the handler.
 *
 * A handler runs on the event loop and must be bounded (tool-file.c says
 * how each of its tools is). It returns 0 with *result (a new reference),
 * or -1 with *kind and *reason (the caller frees it).
 *
 * Tools that finish later (the run tools: a child process) register an
 * asynchronous entry with tool_register_async instead. tool_call_async
 * calls either kind the same way and follows libuv's rule: -1 means the
 * callback never runs; 0 means it runs exactly once. A synchronous tool
 * has finished (and its callback has run) before tool_call_async returns;
 * an asynchronous one calls back later from the loop.
 */
#ifndef GBRD_TOOL_H
#define GBRD_TOOL_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"

struct sandbox;

/* What a call runs against (borrowed; a session owns these). */
struct env;

struct tool_ctx {
	struct sandbox		*sandbox;
	const struct env	*env;		/* limits and commands, or NULL */
	const char		*session;	/* the session's id, or NULL */
	int			 approved;	/* a human approved this call
						   (toolcall.h): protected paths and
						   ask_commands go through */
};

typedef int (*tool_fn)(struct tool_ctx *, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason);

/*
 * The end of a call: failed 0 with result (borrowed), or failed 1 with
 * kind, reason (borrowed) and result as the error's data (borrowed, may be
 * NULL).
 */
typedef void (*tool_done_cb)(void *arg, int failed, enum gbr_err kind,
    const char *reason, json_t *result);
/*
 * An asynchronous tool group's entry: the arguments are not checked yet.
 * Returns 0 (done runs exactly once, later) or -1 with *kind, *reason
 * (caller frees) and *data (new reference or NULL).
 */
typedef int (*tool_async_fn)(struct tool_ctx *, const char *name,
    json_t *args, tool_done_cb, void *arg, enum gbr_err *kind, char **reason,
    json_t **data);

struct tool_def {
	const char	*name;
	const char	*description;
	const char	*schema;	/* JSON Schema (a subset: see tool.c) */
	int		 read_only;	/* changes nothing */
	int		 destructive;	/* may replace what exists */
	int		 idempotent;	/* calling twice = calling once */
	tool_fn		 fn;
};

/*
 * Registers n tools (the table is borrowed: static storage). Returns 0, or
 * -1 with *cause if a name is taken or a schema does not parse.
 */
int		 tool_register(const struct tool_def *, size_t n, char **cause);
/*
 * Registers n tools that complete asynchronously through afn (their fn is
 * never called). Same errors as tool_register.
 */
int		 tool_register_async(const struct tool_def *, size_t n,
		    tool_async_fn afn, char **cause);
/* Forgets every tool (tests, shutdown). */
void		 tool_reset(void);
/* The tool called name, or NULL. */
const struct tool_def *tool_find(const char *name);
/*
 * Every tool as a new JSON array of {name, description, inputSchema,
 * annotations: {readOnlyHint, destructiveHint, idempotentHint}} (the MCP
 * shape, for tool.list).
 */
json_t		*tool_list_json(void);
/*
 * Calls a tool: unknown name is method_not_found, arguments outside the
 * schema are invalid_params. See above for the results.
 */
int		 tool_call(struct tool_ctx *, const char *name, json_t *args,
		    json_t **result, enum gbr_err *kind, char **reason);
/*
 * Calls any tool, synchronous or not (see the top of the file). On -1,
 * *kind, *reason (caller frees) and *data (new reference or NULL) say why.
 */
int		 tool_call_async(struct tool_ctx *, const char *name,
		    json_t *args, tool_done_cb, void *arg, enum gbr_err *kind,
		    char **reason, json_t **data);
/*
 * Checks that a tool exists (method_not_found) and that args fit its
 * schema (invalid_params). Returns 0, or -1 with *kind and *reason.
 */
int		 tool_check(const char *name, json_t *args, enum gbr_err *kind,
		    char **reason);
/* Checks args against a parsed schema. Returns 0 or -1 with *reason. */
int		 tool_check_args(json_t *schema, json_t *args, char **reason);

#endif
