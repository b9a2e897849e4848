/*
 * What gbrctl's command files share: the parsed options, the connection,
 * and the helpers that turn a reply into output and an exit code. Each group
 * of commands lives in its own ctl-*.c file and is listed in gbrctl.c's
 * table.
 */
#ifndef GBR_CTL_H
#define GBR_CTL_H

#include <jansson.h>

#include "client.h"

/* Exit codes (DESIGN.md 3). */
#define CTL_EXIT_OK		0
#define CTL_EXIT_ERROR		1	/* the daemon answered with an error */
#define CTL_EXIT_USAGE		2
#define CTL_EXIT_UNREACHABLE	3	/* the daemon cannot be reached */

struct ctl {
	char		*socket;	/* socket path */
	char		*state_dir;	/* for offline commands (log verify) */
	int		 json;		/* --json: machine output */
	int		 timeout_ms;	/* 0: forever */
	struct client	*cl;		/* connected for CMD_CONNECT commands */
};

/*
 * Calls a method. On success stores the result (new reference) and returns
 * CTL_EXIT_OK; otherwise reports the error (stderr, or the error object on
 * stdout with --json) and returns the exit code to use.
 */
int	ctl_call(struct ctl *, const char *method, json_t *params, json_t **result);
/* Prints a JSON value on one line to stdout. */
void	ctl_print_json(const json_t *);
/* Prints an object as "key.sub: value" lines, for people. */
void	ctl_print_flat(const char *prefix, const json_t *);

/* ctl-log.c: gbrctl log [--follow] [--after SEQ] [--limit N] | log verify. */
int	ctl_log(struct ctl *, int, char **);

/* ctl-session.c: the session commands. */
int	ctl_session_new(struct ctl *, int, char **);
int	ctl_session_list(struct ctl *, int, char **);
/* One session's state, tokens and cost (gbrctl status SESSION). */
int	ctl_session_status(struct ctl *, const char *key);
int	ctl_session_send(struct ctl *, int, char **);
int	ctl_session_attach(struct ctl *, int, char **);
int	ctl_session_history(struct ctl *, int, char **);
int	ctl_session_cancel(struct ctl *, int, char **);
int	ctl_session_close(struct ctl *, int, char **);
/* All of stdin as a string (at most 16 MiB; NULL, said on stderr, if not). */
char	*ctl_read_stdin(void);

/* ctl-tool.c: tool, tools, env and cache. */
int	ctl_tool(struct ctl *, int, char **);
int	ctl_tools(struct ctl *, int, char **);
int	ctl_mcp_servers(struct ctl *, int, char **);
int	ctl_env(struct ctl *, int, char **);
/* cache du|clean [DIR|SESSION]: the agent's package caches. */
int	ctl_cache(struct ctl *, int, char **);

/* ctl-approval.c: approvals, approve, deny, edit, grants, revoke. */
int	ctl_approvals(struct ctl *, int, char **);
int	ctl_approve(struct ctl *, int, char **);
int	ctl_deny(struct ctl *, int, char **);
int	ctl_edit(struct ctl *, int, char **);
int	ctl_grants(struct ctl *, int, char **);
int	ctl_revoke(struct ctl *, int, char **);

/* ctl-audit.c: gbrctl audit [--session S] [--since TIME] [--json] */
int	ctl_audit(struct ctl *, int, char **);

/* ctl-rewind.c: gbrctl rewind SESSION [--turn N | --to SEQ] [...] */
int	ctl_rewind(struct ctl *, int, char **);

/* ctl-run.c: gbrctl run SESSION [--timeout-ms MS] -- ARGV... */
int	ctl_run(struct ctl *, int, char **);

/* ctl-mcp.c: gbrctl mcp, the MCP server over stdio. */
int	ctl_mcp(struct ctl *, int, char **);

/* ctl-acp.c: gbrctl acp, the Agent Client Protocol agent over stdio. */
int	ctl_acp(struct ctl *, int, char **);

#endif
