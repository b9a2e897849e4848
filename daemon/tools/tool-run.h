/*
 * The run tools: run_script, run_command and check, over the
 * runner (runner.h). This file turns an agent's call into a job with the
 * session's rights: the working folder is the allowed root; the
 * environment is an allow-list (PATH, HOME, LANG, LC_ALL, LC_CTYPE, TERM,
 * TZ, USER, LOGNAME, plus gbrd.conf's [exec] pass_env, never a name that
 * looks like a secret), with TMPDIR set to a private folder; under Landlock
 * the child may write only the allowed root and that folder and read the
 * system folders, the read-only roots and [exec] read_paths; read-only
 * roots inside the allowed root, the literal protected files and
 * .gbr_envs are bound read-only where namespaces exist; gbrd's socket and
 * config, and the user's gbr config folder (gbrd.env), are hidden. Limits come from the profile's [exec] (timeout_ms,
 * max_output_bytes), capped by gbrd.conf's [exec].
 *
 * Policy before anything runs: autonomy read-only refuses run_script and
 * run_command (permission_denied); a command matching deny_commands is
 * refused (denied_command); one matching ask_commands returns
 * needs_approval unless the caller says a human approved it (for
 * run_command, and run_script's "sh -c CODE", looked into). Matching is
 * word by word (see tool_run_match). It guards the agent's intent; the
 * boundary is the sandbox below it (a script can always spell a command
 * some other way, and under no_new_privs sudo cannot raise anything).
 *
 * The tools are asynchronous: tool_run_register gives the registry their
 * schemas and a streaming entry (tool.h), so tool_call_async runs them
 * like any other tool, streaming to its output callback and cancelled
 * through the tool_job it gives. tool_run_call is the same call for those that
 * need what tool_ctx cannot say (require_landlock, pass_env: the runner
 * driver and the benchmarks). Both follow libuv's rule: -1 means no
 * callback will run; 0 means done runs exactly once, later, from the loop.
 * Output chunks stream to the output callback while the child runs.
 *
 * Results (done with failed 0): {exit_code (null if killed), signal
 * ("SIGSEGV" or null), timed_out, truncated, output_limited, duration_ms,
 * stdout, stdout_encoding, stdout_bytes, stderr, stderr_encoding,
 * stderr_bytes, sandbox: {...}}; check adds ok, command and diagnostics.
 * Output that is valid UTF-8 is a JSON string with encoding "utf-8",
 * otherwise (or when more than one byte in sixteen is a control character
 * other than tab, newline and CR, which JSON would inflate sixfold) base64
 * with encoding "base64"; a cut at the cap never splits a character. A non-zero exit or a signal is a result, not an
 * error; a timeout is the error timeout whose data is the whole result.
 */
#ifndef GBRD_TOOL_RUN_H
#define GBRD_TOOL_RUN_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"
#include "runner.h"
#include "tool.h"

struct config;
struct env;
struct event_base;
struct sandbox;
struct tool_run;

#define TOOL_RUN_CODE_MAX	(120 * 1024)	/* bytes of code (one argv string) */
#define TOOL_RUN_ARG_MAX	(120 * 1024)	/* bytes of one argument */
#define TOOL_RUN_ARGV_MAX	1024		/* arguments of run_command */
#define TOOL_RUN_ARGV_BYTES	(1024 * 1024)	/* all arguments together */
#define TOOL_RUN_STDIN_MAX	(1024 * 1024)	/* bytes of stdin */
#define TOOL_RUN_DIAG_MAX	200		/* diagnostics check returns */

/* What a call runs against (borrowed for the call of tool_run_call only). */
struct tool_run_ctx {
	struct sandbox		*sandbox;	/* allowed root, read-only roots */
	const struct env	*env;		/* limits, commands, autonomy */
	const char		*session;	/* per-session slot key; NULL: none */
	int			 approved;	/* a human approved this call */
	/*
	 * What a profile may add (env.c has no keys for them yet): 1 asks
	 * for Landlock to be required (never weaker than gbrd.conf), and
	 * extra variable names (a secret-looking one is still refused).
	 */
	int			 require_landlock;
	const char *const	*pass_env;
	size_t			 npass_env;
};

/*
 * Sets up the runner from gbrd.conf's [exec] (cfg borrowed), hiding the
 * files named in hide (gbrd's socket and config) from every child. With a
 * state folder, the private temp folder is STATE/run-tmp (emptied at
 * start: a crash leaves nothing behind for long) and children are marked
 * so that the next start kills any a crash left (runner_sweep); without
 * one, a fresh folder under $TMPDIR. Returns 0 (the runner may still be
 * unavailable: see tool_run_status), or -1 with *cause.
 */
int		 tool_run_init(struct event_base *, const struct config *,
		    const char *state_dir, const char *const *hide,
		    size_t nhide, char **cause);
/* Applies a reloaded gbrd.conf. */
void		 tool_run_reconfigure(const struct config *);
/* Kills every child and removes the temp folder; no callback runs. */
void		 tool_run_shutdown(void);
/* The runner's layers for daemon.status's "security" (new reference). */
json_t		*tool_run_status(void);

/*
 * Registers the three tools with the registry (tool.h). Returns 0, or -1
 * with *cause.
 */
int		 tool_run_register(char **cause);
/*
 * Calls a run tool (see the top of the file): out_cb (may be NULL) gets
 * the live output, done the end (tool.h). On -1, *kind and *reason
 * (caller frees) say why and *data (new reference or NULL; data may be
 * NULL) carries details: {interpreter}, {pattern, command}, ... *run
 * (may be NULL) is valid until done returns.
 */
int		 tool_run_call(const struct tool_run_ctx *, const char *tool,
		    json_t *args, tool_output_cb, tool_done_cb,
		    void *arg, struct tool_run **run, enum gbr_err *kind,
		    char **reason, json_t **data);
/*
 * A session has ended: its temp space (TMPDIR, and with namespaces its
 * /tmp and /dev/shm) is removed.
 */
void		 tool_run_session_end(const char *session);

/*
 * Starts a long-lived child with the session's rights (tool-run-serve.c):
 * an MCP server over stdio. argv[0] is looked up in PATH; names (nnames
 * of them) are variables of gbrd's environment it gets besides the
 * allow-list. The job is a stream (runner.h: runner_write, output to
 * out, nothing kept); done runs once when it ends, as runner_start says.
 * Returns 0 and *job, or -1 with *kind and *reason (caller frees).
 */
#define TOOL_RUN_SERVE_MS	(24 * 3600 * 1000)	/* at most, then ended */
int		 tool_run_serve(const struct tool_run_ctx *,
		    const char *const *argv, const char *const *names,
		    size_t nnames, runner_output_cb, runner_done_cb, void *arg,
		    struct runner_job **job, enum gbr_err *kind, char **reason);
/*
 * The agent's package caches (tool-run-cache.c). The size of a
 * workspace's, or of every one for NULL, is measured on a thread; cb gets
 * {base, caches: [{path, bytes, files, complete}], bytes, max_bytes,
 * complete} (borrowed) on the loop, later. Returns 0, or -1 with *cause.
 * Their removal returns {cleaned: [path]} (new reference), or NULL with
 * *cause (and *busy 1 if a command that uses one runs).
 */
typedef void	(*tool_run_du_cb)(void *arg, json_t *result);
int		 tool_run_cache_du(const char *workspace, tool_run_du_cb cb,
		    void *arg, char **cause);
json_t		*tool_run_cache_clean(const char *workspace, int *busy,
		    char **cause);
/* Ends a call early: done runs later with the error cancelled. */
void		 tool_run_cancel(struct tool_run *);
/* The pid of the call's child (gbr-exec), or -1 while it waits for a slot. */
long		 tool_run_job_pid(const struct tool_run *);

/*
 * Exposed for the unit tests.
 *
 * Splits a command line into words without a shell: blanks separate
 * words; '...' keeps everything literally; "..." keeps everything but \"
 * \\ \$ and \` escapes; a backslash outside quotes takes the next
 * character literally. Unquoted | & ; < > ( ) $ ` and a newline are shell
 * syntax and refused (write "sh -c '...'" to ask for a shell). Returns a
 * new NULL-terminated vector (free each string and the vector), or NULL
 * with *reason (static).
 */
char		**tool_run_split(const char *line, const char **reason);
/*
 * What a script runs as: python3 -c CODE, node -e CODE, cmd /d /q /c CODE,
 * powershell -NoLogo -NoProfile -NonInteractive -Command CODE, or sh -c
 * CODE for language python, node, cmd, powershell or anything else (NULLs
 * read as sh and ""). A new vector, as above.
 */
char		**tool_run_script_argv(const char *language, const char *code);
void		 tool_run_strv_free(char **);
/*
 * True if argv matches a command pattern, word by word: each word of the
 * pattern (split as above) is a wildcard (* ? [...] \) for one argument,
 * a last word "*" matches any number of remaining arguments, none
 * included, and a first word without '/' is also matched against
 * argv[0]'s base name. Wrappers (env VAR=x, nice, nohup, timeout, time,
 * stdbuf, setsid, command, exec, xargs, sudo, doas) and "sh -c STRING"
 * (each ;, &&, || or | part of STRING) are looked through.
 */
int		 tool_run_match(const char *pattern, const char *const *argv);
/* A linear-time wildcard match of one word (* ? [a-z] [!a-z] \x). */
int		 tool_run_wildcard(const char *pattern, const char *word);
/* True if an environment variable name may be passed to a child. */
int		 tool_run_env_name_ok(const char *name);
/* Bytes as JSON: sets *encoding to "utf-8" or "base64" (new reference). */
json_t		*tool_run_bytes_json(const char *, size_t, const char **encoding);
/* file:line[:col] diagnostics found in text (new array, at most max). */
json_t		*tool_run_diagnostics(const char *, size_t, size_t max);

#endif
