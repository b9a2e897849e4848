/*
 * What the MCP client's files share (mcp.h is the API):
 *   mcp.c       sessions and their servers: following the profile, the
 *               process, its lines, the protocol (initialize, tools/list,
 *               what a server asks or notifies), crashes and restarts
 *   mcp-tool.c  the tools: the provider the registry asks, calls and
 *               their end (answers, timeouts, cancels), results for the
 *               model, and mcp.servers
 *   mcp-http.c  the Streamable HTTP transport of a url server: POSTs,
 *               JSON and SSE answers, the session id, the GET stream
 */
#ifndef GBRD_MCP_INT_H
#define GBRD_MCP_INT_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "errors.h"
#include "mcp.h"
#include "tool.h"

struct event;
struct mcp_http;
struct runner_job;

#define MCP_LINE_MAX		(4 * 1024 * 1024) /* bytes of one message */
#define MCP_ERRLINE_MAX		512		/* bytes of a stderr line logged */
#define MCP_STDERR_LINES	200		/* logged per start, then counted */
#define MCP_BAD_MAX		100		/* invalid messages, then ended */
#define MCP_TOOLS_MAX		256		/* tools of one server */
#define MCP_PAGES_MAX		32		/* tools/list pages */
#define MCP_CALLS_MAX		64		/* calls in flight, one server */
#define MCP_NAME_MAX		64		/* bytes of NAME__tool */
#define MCP_DESC_MAX		(8 * 1024)	/* bytes of a description */
#define MCP_RESULT_MAX		(1024 * 1024)	/* bytes of text kept */
#define MCP_TIMEOUT_MS		60000		/* timeout_ms's default */
#define MCP_IDLE_MS		(30 * 60 * 1000) /* idle_ms's default */
#define MCP_BACKOFF_MS		500		/* first restart delay, doubled */
#define MCP_BACKOFF_MAX_MS	30000
#define MCP_CRASHES_MAX		5		/* in a row, then failed */
#define MCP_STABLE_MS		60000		/* up this long: crashes reset */
#define MCP_HTTP_BODY_MAX	(2 * MCP_LINE_MAX) /* one HTTP answer's body */
#define MCP_HTTP_POSTS_MAX	(2 * MCP_CALLS_MAX) /* POSTs in flight */

enum mcp_state {
	MCP_STOPPED,		/* not running (never, idle, or stopped) */
	MCP_STARTING,		/* initialize or the first tools/list */
	MCP_READY,
	MCP_BACKOFF,		/* it died: started again when the timer says */
	MCP_FAILED,		/* gave up (or cannot run): a call tries again */
};

/* One of a server's tools. */
struct mcp_tool {
	struct tool_def	 def;		/* name NAME__tool, description: owned */
	char		*remote;	/* the server's name for it */
	json_t		*schema;	/* inputSchema */
	json_t		*annotations;	/* as the server gave them, or NULL */
};

struct mcp_session;

/* One server of a session. */
struct mcp_server {
	TAILQ_ENTRY(mcp_server)	 entry;
	struct mcp_session	*ms;		/* NULL once detached (dying) */
	char			*name;
	json_t			*conf;		/* the profile's object */
	int			 read_only;	/* the autonomy it started for */
	enum mcp_state		 state;
	struct runner_job	*job;		/* the process, or NULL */
	struct mcp_http		*http;		/* a url server's link, or NULL */
	unsigned		 reinits;	/* sessions lost lately (http) */
	int64_t			 reinit_ms;
	struct event		*timer;		/* start deadline, backoff, idle */
	char			*out;		/* stdout's unfinished line */
	size_t			 out_len, out_cap;
	char			 err[MCP_ERRLINE_MAX + 1];
	size_t			 err_len;
	int			 err_cut;
	unsigned		 err_lines;
	uint64_t		 err_dropped;
	char			*last_err_line;	/* its last stderr line */
	unsigned		 bad;		/* invalid messages this start */
	int64_t			 next_id;
	int64_t			 init_id, list_id;	/* 0: none in flight */
	json_t			*paging;	/* tools of pages so far */
	unsigned		 pages;
	int			 relist;	/* list_changed while listing */
	char			*protocol;	/* the revision agreed */
	json_t			*server_info;
	json_t			*capabilities;
	struct mcp_tool		*tools;
	size_t			 ntools;
	json_t			*raw_tools;	/* the last tools/list, whole */
	int			 listed;	/* tools known (maybe from before) */
	json_t			*skipped;	/* tools left out, and why */
	char			*last_error;
	unsigned		 starts, crashes;
	int64_t			 started_ms, used_ms;
	int			 killing;	/* ended on purpose */
	char			*kill_why;
	TAILQ_HEAD(, mcp_call)	 calls;		/* waiting or sent */
	unsigned		 ncalls;
};
TAILQ_HEAD(mcp_server_list, mcp_server);

/* A session's servers. */
struct mcp_session {
	TAILQ_ENTRY(mcp_session) entry;
	char			*sid;
	struct mcp_server_list	 servers;
};
TAILQ_HEAD(mcp_session_list, mcp_session);

/* A tool call (tool.h's asynchronous call, and its handle). */
struct mcp_call {
	struct tool_job		 job;		/* first: the registry's handle */
	TAILQ_ENTRY(mcp_call)	 entry;		/* on its server, until it ends */
	struct mcp_server	*srv;		/* NULL once it ended */
	char			*tool;		/* NAME__tool */
	char			*remote;
	json_t			*args;
	int64_t			 id;		/* 0 until sent */
	int			 timeout_ms;
	tool_done_cb		 done;
	void			*arg;
	struct event		*ev;		/* its timeout, then its end */
	int			 ended;
	int			 failed;
	enum gbr_err		 kind;
	char			*reason;
	json_t			*result;
};

/* mcp.c */
extern struct mcp_session_list	mcp_sessions;
extern struct event_base	*mcp_base;
/* The session's state, following its profile now; NULL if none. */
struct mcp_session *mcp_session_sync(const char *sid);
/* Finds a server of a session by name, or NULL. */
struct mcp_server *mcp_server_find(struct mcp_session *, const char *name);
/* Starts a server that is not running (0), or -1 (last_error says). */
int		 mcp_server_start(struct mcp_server *);
/* Sends one message (a new reference, stolen). Returns 0 or -1. */
int		 mcp_send(struct mcp_server *, json_t *);
/* True if the server has a process (stdio) or a link (http). */
int		 mcp_server_running(const struct mcp_server *);
/* One message from the server (borrowed), whatever carried it. */
void		 mcp_message(struct mcp_server *, json_t *);
/* A message that makes no sense: counted; too many end the server. */
void		 mcp_bad(struct mcp_server *, const char *what);
/* Sets the server's last error (logged). */
void		 mcp_error(struct mcp_server *, const char *fmt, ...)
		    __attribute__((format(__printf__, 2, 3)));
/* Ends a running server on purpose (it is then failed until asked again). */
void		 mcp_kill(struct mcp_server *, const char *why);
/*
 * The server went away unasked (how: "exited with code 3"); with its
 * last_error set already: its calls fail, it is started again after a
 * backoff, or failed if give_up or it crashed too often.
 */
void		 mcp_server_lost(struct mcp_server *, const char *how,
		    int give_up);
/* Starts its initialize again on the same link (an HTTP session expired). */
void		 mcp_server_reinit(struct mcp_server *);
/* Untrusted text made safe to log or show (new string). */
char		*mcp_escape(const char *, size_t);
/* An int option of the server's profile, or def. */
int		 mcp_conf_int(const struct mcp_server *, const char *, int def);

/* mcp-tool.c */
/* Sends the calls that waited for the server to be ready. */
void		 mcp_calls_flush(struct mcp_server *);
/* Ends every call of a server with this error. */
void		 mcp_calls_fail(struct mcp_server *, enum gbr_err,
		    const char *fmt, ...) __attribute__((format(__printf__, 3, 4)));
/* An answer to a call (result or error), by id. Returns 0, -1 if unknown. */
int		 mcp_call_answer(struct mcp_server *, int64_t id, json_t *msg);
/* Sends a call again once the server is ready (0), -1 if no such call. */
int		 mcp_call_requeue(struct mcp_server *, int64_t id);
/* Ends one call with an error (its answer will not come). */
void		 mcp_call_lost(struct mcp_server *, int64_t id, enum gbr_err,
		    const char *why);
/* Builds the tools of a tools/list (every page), replacing the old ones. */
void		 mcp_tools_set(struct mcp_server *, json_t *tools);
void		 mcp_tools_free(struct mcp_server *);
/* The provider registered with the registry. */
extern const struct tool_provider mcp_provider;

/* mcp-http.c */
/* Opens a url server's link (nothing sent yet). 0, or -1 with *cause. */
int		 mcp_http_open(struct mcp_server *, char **cause);
/* Closes the link at once (DELETE for its session); no callback runs. */
void		 mcp_http_close(struct mcp_server *);
/* POSTs one message (stolen). Returns 0 or -1. */
int		 mcp_http_send(struct mcp_server *, json_t *);
/* The server is ready: its GET stream is opened if it offers one. */
void		 mcp_http_ready(struct mcp_server *);
/* A request of ours ended (a call): its POST is abandoned. */
void		 mcp_http_forget(struct mcp_server *, int64_t id);
/* {session, get_stream} for mcp.servers (new reference). */
json_t		*mcp_http_json(const struct mcp_server *);

#endif
