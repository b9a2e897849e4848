/*
 * The tool registry: every tool the agent, tool.call and the MCP bridge
 * (gbrctl mcp, through tool.call) can call, with its JSON Schema and its
 * hints, behind one calling convention. A tool group (the file tools in
 * tool-file.c and tool-search.c, the run tools in tool-run.c) describes
 * its tools in a static table of struct tool_def and registers it once at
 * start-up; tool_call checks the arguments against the schema, so every
 * tool gets the same invalid_params errors naming the field, then runs the
 * handler. Whether a call may run at all is policy.h's to say, before it
 * gets here.
 *
 * A handler runs on the event loop and must be bounded (the top of each
 * tool group's files says how each of its tools is). It returns 0 with *result (a new reference),
 * or -1 with *kind and *reason (the caller frees it).
 *
 * Tools that finish later (the run tools: a child process; search: slices
 * of the loop) register an asynchronous entry with tool_register_async
 * instead. tool_call_async calls either kind the same way and follows
 * libuv's rule: -1 means the callback never runs; 0 means it runs exactly
 * once. A synchronous tool has finished (and its callback has run) before
 * tool_call_async returns; an asynchronous one calls back later from the
 * loop, may stream live output before that (a command's stdout and
 * stderr as they come, to the output callback), and may give a tool_job
 * to end it early.
 */
#ifndef GBRD_TOOL_H
#define GBRD_TOOL_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"

struct sandbox;

/* What a call runs against (borrowed; a session owns these). */
struct env;

struct sandbox_pin;

/*
 * A chunk of an asynchronous call's live output (borrowed):
 * {stream, text} or {stream, data, encoding}.
 */
typedef void (*tool_output_cb)(void *arg, json_t *chunk);

struct tool_ctx {
	struct sandbox		*sandbox;
	const struct env	*env;		/* limits and commands, or NULL */
	const char		*session;	/* the session's id, or NULL */
	int			 approved;	/* a human approved this call
						   (toolcall.h): protected paths and
						   ask_commands go through */
	const struct sandbox_pin *pin;		/* approved file writes: the
						   object the human saw (sandbox.h);
						   only that one is written */
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
 * An asynchronous call in flight. The tool group embeds one in its own
 * state (so the struct is not opaque) and owns it; it stays valid until
 * done has returned.
 */
struct tool_job {
	/* Ends the call early: done still runs once, later (see tool_job_cancel). */
	void	(*cancel)(struct tool_job *);
};

/*
 * An asynchronous tool group's entry: the arguments are not checked yet.
 * out (may be NULL) gets each chunk of live output, with the same arg as
 * done, until done runs (a tool with nothing to stream ignores it).
 * Returns 0 (done runs exactly once, later; *job, when job is not NULL, is
 * the call's handle or NULL if it cannot be cancelled) or -1 with *kind,
 * *reason (caller frees) and *data (new reference or NULL).
 */
typedef int (*tool_async_fn)(struct tool_ctx *, const char *name,
    json_t *args, tool_output_cb out, tool_done_cb, void *arg,
    struct tool_job **job, enum gbr_err *kind, char **reason, json_t **data);

struct tool_def {
	const char	*name;
	const char	*description;
	const char	*schema;	/* JSON Schema (a subset: see tool.c) */
	int		 read_only;	/* changes nothing */
	int		 destructive;	/* may replace what exists */
	int		 idempotent;	/* calling twice = calling once */
	tool_fn		 fn;
	int		 ask;		/* a provider's tool that asks a
					   human before every call (policy.c) */
};

/*
 * Tools that live outside this registry and come and go with a session:
 * the tools of the MCP servers a session's profile names (daemon/mcp/).
 * Their names hold TOOL_PROVIDER_SEP, which no built-in name does; the
 * registry asks the provider about such a name, in a session. A layer
 * above hands the provider down once (tool_set_provider): calls go down.
 */
#define TOOL_PROVIDER_SEP	"__"

struct tool_provider {
	/*
	 * The tool called name in session, or NULL; *schema (borrowed) is
	 * its parsed input schema. Both stay valid until the loop runs
	 * again.
	 */
	const struct tool_def *(*find)(const char *session, const char *name,
		    json_t **schema);
	/* Appends the session's tools, shaped as tool_list_json's, to a. */
	void	(*list)(const char *session, json_t *a);
	/* Calls one (ctx->session is set), as a tool_async_fn. */
	tool_async_fn call;
};

/*
 * Registers n tools (the table is borrowed: static storage). Returns 0, or
 * -1 with *cause if a name is taken or a schema does not parse.
 */
int		 tool_register(const struct tool_def *, size_t n, char **cause);
/*
 * Registers n tools that complete asynchronously through afn (their fn, if
 * any, is what tool_call runs; NULL refuses tool_call). Same errors as
 * tool_register.
 */
int		 tool_register_async(const struct tool_def *, size_t n,
		    tool_async_fn afn, char **cause);
/* Sets the provider of session tools (borrowed; NULL: none). */
void		 tool_set_provider(const struct tool_provider *);
/* Forgets every tool (tests, shutdown). */
void		 tool_reset(void);
/* The built-in tool called name, or NULL. */
const struct tool_def *tool_find(const char *name);
/*
 * The tool called name in session (NULL: built-ins only), a provider's
 * too (borrowed, valid until the loop runs again), or NULL.
 */
const struct tool_def *tool_lookup(const char *session, const char *name);
/*
 * Every tool as a new JSON array of {name, description, inputSchema,
 * annotations: {readOnlyHint, destructiveHint, idempotentHint}} (the MCP
 * shape, for tool.list), with the provider's tools of session (NULL:
 * none) after the built-ins.
 */
json_t		*tool_list_json(const char *session);
/*
 * Calls a tool: unknown name is method_not_found, arguments outside the
 * schema are invalid_params. See above for the results.
 */
int		 tool_call(struct tool_ctx *, const char *name, json_t *args,
		    json_t **result, enum gbr_err *kind, char **reason);
/*
 * Calls any tool, synchronous or not (see the top of the file). out (may
 * be NULL) gets the live output of a tool that streams it, with arg, until
 * done runs. *job (job may be NULL) is set to the call's handle, or NULL
 * when there is none (a synchronous tool: done has run already). On -1,
 * *kind, *reason (caller frees) and *data (new reference or NULL) say why.
 */
int		 tool_call_async(struct tool_ctx *, const char *name,
		    json_t *args, tool_output_cb out, tool_done_cb, void *arg,
		    struct tool_job **job, enum gbr_err *kind, char **reason,
		    json_t **data);
/*
 * Ends an asynchronous call early: its done runs once, later, from the
 * loop, with the error cancelled (or its real outcome if it had just
 * finished). Only before done has run.
 */
void		 tool_job_cancel(struct tool_job *);
/*
 * Checks that a tool exists in session (NULL: built-ins only;
 * method_not_found) and that args fit its schema (invalid_params).
 * Returns 0, or -1 with *kind and *reason.
 */
int		 tool_check(const char *session, const char *name, json_t *args,
		    enum gbr_err *kind, char **reason);
/* Checks args against a parsed schema. Returns 0 or -1 with *reason. */
int		 tool_check_args(json_t *schema, json_t *args, char **reason);

#endif
