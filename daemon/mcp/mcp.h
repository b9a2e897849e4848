/*
 * The MCP client: gbr as a client of the external MCP servers a session's
 * profile names ([mcp.NAME], env-mcp.c). Their tools join the session's
 * tools as NAME__tool (tool.h's provider), so the agent, tool.call and
 * the MCP bridge reach them through toolcall.c like any other tool: the
 * policy (an [mcp.NAME] ask puts calls to a human), approvals, the
 * tool.call and tool.result messages in the disk log.
 *
 * A server over stdio runs through the runner with the rights of a
 * session's command (tool_run_serve: writes only in the workspace, a
 * scrubbed environment, gbrd's socket hidden, limits), from the first
 * time the session needs its tools until the session ends or the server
 * has been idle for idle_ms; a server that dies is started again after
 * a backoff. Everything it says is untrusted: lines are bounded, JSON is
 * checked, answers must match a request we sent, and a server that
 * floods, hangs or speaks nonsense is ended without the loop ever
 * waiting for it.
 *
 * The module sits between tools/ (it registers the provider, it spawns
 * through tool-run) and the session: what it needs of a session (its
 * env and sandbox) it gets through the callback given to mcp_init.
 */
#ifndef GBRD_MCP_H
#define GBRD_MCP_H

#include <jansson.h>

struct env;
struct event_base;
struct sandbox;

/* The protocol revisions spoken, the newest first (sent in initialize). */
#define MCP_PROTOCOL_LATEST	"2025-11-25"

/*
 * Finds a session's env and sandbox (borrowed, valid until the loop runs
 * again). Returns 0, or -1 with *cause (caller frees).
 */
typedef int (*mcp_env_fn)(const char *session, struct env **,
    struct sandbox **, char **cause);

/* Sets the module up and hands the registry its provider. */
void		 mcp_init(struct event_base *, mcp_env_fn);
/*
 * Frees everything after the loop (before runner_shutdown and
 * http_shutdown); no callback runs.
 */
void		 mcp_shutdown(void);
/* A session ended: its servers are stopped, their calls end (cancelled). */
void		 mcp_session_end(const char *session);
/*
 * Starts the session's servers if they are not running, and says whether
 * one is still starting (1: its tools are not known yet) or not (0).
 */
int		 mcp_session_starting(const char *session);
/*
 * mcp.servers: the servers of session (NULL: of every session), each
 * {session, name, transport, command | url, state, pid, protocol,
 * server_info, tools: [...], skipped, restarts, last_error}. New reference.
 */
json_t		*mcp_servers_json(const char *session);
/* Counts for daemon.status (new reference). */
json_t		*mcp_status_json(void);

#endif
