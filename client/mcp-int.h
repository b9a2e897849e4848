/*
 * What the files of gbrctl mcp share (the bridge between an MCP client on
 * stdio and gbrd). ctl-mcp.c holds the command, the loop, the client's
 * side (reading its lines, initialize, the queues and the replies);
 * mcp-bridge.c turns tools/list, tools/call and cancellations into gbrd's
 * calls and gbrd's replies and events back into MCP; mcp-daemon.c holds
 * the connection to gbrd: connecting (and again after it went away),
 * finding the session, sending, reading, and losing it.
 */
#ifndef GBR_MCP_INT_H
#define GBR_MCP_INT_H

#include <sys/queue.h>

#include <stddef.h>

#include <jansson.h>

#include "client.h"
#include "ctl.h"
#include "frame.h"

#define MCP_LINE_MAX		(8 * 1024 * 1024)	/* one message from the client */
#define MCP_DAEMON_LINE_MAX	(64 * 1024 * 1024)	/* one message from gbrd */
#define MCP_CALLS_MAX		256		/* requests waiting on gbrd */
#define MCP_DAEMON_QUEUE_MAX	(16 * 1024 * 1024)	/* unsent bytes to gbrd */
#define MCP_OUT_HIGH		(8 * 1024 * 1024)	/* stop reading above this */
#define MCP_READ_CHUNK		65536
#define MCP_PROGRESS_MS		2000		/* between progress notifications */
#define MCP_FLUSH_MS		2000		/* to flush replies at exit */
#define MCP_CALL_TIMEOUT_MS	30000		/* start-up calls to gbrd */
#define MCP_FIRST_DID		1000000		/* our ids on gbrd's connection */
#define MCP_RECONNECT_TRIES	6		/* over about 3 s */

/* A byte queue: data[off..len) is still to be written. */
struct mcp_buf {
	char	*data;
	size_t	 len;
	size_t	 off;
	size_t	 cap;
};

enum mcp_call_kind {
	MCP_CALL_TOOL = 0,	/* tools/call -> tool.call */
	MCP_CALL_LIST,		/* tools/list -> tool.list */
	MCP_CALL_SESSION,	/* our own session.create after a close */
	MCP_CALL_CANCEL,	/* notifications/cancelled -> tool.cancel */
};

/* A request sent to gbrd whose reply has not come yet. */
struct mcp_call {
	TAILQ_ENTRY(mcp_call)	 entry;
	enum mcp_call_kind	 kind;
	long long		 did;		/* gbrd's request id */
	char			*method;	/* gbrd's method */
	json_t			*params;	/* and its params, to send again */
	json_t			*id;		/* the client's id; NULL for ours */
	json_t			*token;		/* _meta.progressToken, or NULL */
	char			*tool;
	char			*path;		/* args.path, to match an approval */
	char			 rid[48];	/* request_id given to gbrd */
	char			*approval;	/* the approval it waits on */
	char			*waiting;	/* what progress says meanwhile */
	long long		 started_ms;
	long long		 progress_ms;	/* when the next progress is due */
	long long		 progress;	/* the last progress value sent */
	int			 cancelled;	/* never answer it */
	int			 described;	/* waiting says what is approved */
};
TAILQ_HEAD(mcp_calls, mcp_call);

/* A tools/call held while the bridge moves to another session. */
struct mcp_held {
	TAILQ_ENTRY(mcp_held)	 entry;
	json_t			*id;
	json_t			*params;
};
TAILQ_HEAD(mcp_helds, mcp_held);

/* The bridge. */
/*
 * Lines from a descriptor (a bridge's stdin): a line over the cap is
 * reported (too_large) and skipped up to its end; the stream goes on.
 */
struct mcp_lines {
	int		 fd;
	char		*buf;
	size_t		 len;
	size_t		 cap;
	int		 skip;		/* dropping the rest of an over-long line */
	int		 eof;
};
typedef void	 (*mcp_line_fn)(void *arg, const char *line, size_t len);
typedef void	 (*mcp_too_large_fn)(void *arg);

struct mcp {
	struct ctl	*ctl;
	const char	*session_arg;	/* --session */
	char		*workspace;	/* --workspace, as a real path */
	const char	*env;		/* --env */
	char		*session;	/* the session's id */
	int		 refreshing;	/* a session.create is on its way */
	int		 verbose;

	struct client	*cl;		/* NULL while gbrd is not connected */
	int		 dfd;
	struct frame	*dframe;
	size_t		 dmax_line;	/* gbrd's max_line_bytes */
	long long	 next_did;
	struct mcp_buf	 dout;		/* to gbrd */

	struct mcp_lines in;		/* the client's stdin, moved */
	int		 out_fd;	/* the client's stdout, moved */
	int		 out_dead;	/* the client closed its end */
	struct mcp_buf	 out;

	int		 initialized;	/* initialize was answered */
	const char	*version;	/* the negotiated revision */
	int		 structured;	/* it has structuredContent */

	struct mcp_calls calls;
	unsigned	 ncalls;
	struct mcp_helds held;
	unsigned	 nheld;
	char		 rid_prefix[24];
	unsigned long long rid_next;
};

/* ctl-mcp.c: the clock, the log, the queues, the replies to the client. */
long long	 mcp_now_ms(void);
void	 mcp_log(const char *fmt, ...) __attribute__((format(__printf__, 1, 2)));
size_t	 mcp_buf_add_json(struct mcp_buf *b, const json_t *msg);
size_t	 mcp_buf_pending(const struct mcp_buf *b);
void	 mcp_buf_release(struct mcp_buf *b);
int	 mcp_buf_flush(struct mcp_buf *b, int fd,
	    ssize_t (*put)(int, const void *, size_t));
void	 mcp_lines_read(struct mcp_lines *in, size_t max, mcp_line_fn line,
	    mcp_too_large_fn too_large, void *arg);
int	 mcp_streq(const json_t *v, const char *s);
char	*mcp_shown(const char *s, size_t max);
void	 mcp_send(struct mcp *m, json_t *msg);
void	 mcp_result(struct mcp *m, json_t *id, json_t *result);
void	 mcp_error(struct mcp *m, json_t *id, int code, const char *kind,
	    json_t *data, const char *fmt, ...)
	    __attribute__((format(__printf__, 6, 7)));
void	 mcp_tool_error(struct mcp *m, json_t *id, const char *kind,
	    const char *message, json_t *data);

/* mcp-bridge.c: MCP requests to gbrd's calls, gbrd's answers to MCP. */
void	 mcp_call_free(struct mcp *m, struct mcp_call *c);
int	 mcp_progress_tick(struct mcp *m);
void	 mcp_tools_list(struct mcp *m, json_t *id, json_t *params);
void	 mcp_tools_call(struct mcp *m, json_t *id, json_t *params);
void	 mcp_release_held(struct mcp *m, int send);
void	 mcp_cancelled(struct mcp *m, json_t *params);
void	 mcp_daemon_reply(struct mcp *m, json_t *msg);
void	 mcp_daemon_progress(struct mcp *m, json_t *params);
void	 mcp_daemon_event(struct mcp *m, json_t *params);

/* mcp-daemon.c: the connection to gbrd. */
int	 mcp_connect(struct mcp *m, char **cause, int *unreachable);
int	 mcp_ensure(struct mcp *m, char **cause);
struct mcp_call *mcp_daemon_call(struct mcp *m, enum mcp_call_kind kind,
	    const char *method, json_t *params, const char **errkind,
	    char **why);
void	 mcp_refresh_session(struct mcp *m, int fresh);
void	 mcp_daemon_lost(struct mcp *m, const char *why);
void	 mcp_daemon_read(struct mcp *m);

#endif
