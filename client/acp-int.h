/*
 * What the files of gbrctl acp share (the Agent Client Protocol agent: an
 * editor on stdio, gbrd behind). ctl-acp.c holds the command, the loop and
 * the editor's side (its lines, initialize, the replies); acp-session.c
 * turns session/new, load, prompt, cancel and the permission answers into
 * gbrd's calls; acp-update.c turns gbrd's events and history into
 * session/update notifications and permission requests; acp-daemon.c holds
 * the connection to gbrd and the calls waiting on it.
 */
#ifndef GBR_ACP_INT_H
#define GBR_ACP_INT_H

#include <sys/queue.h>

#include <stddef.h>

#include <jansson.h>

#include "client.h"
#include "ctl.h"
#include "frame.h"
#include "mcp-int.h"	/* the byte queues and small helpers */

#define ACP_PROTOCOL_VERSION	1		/* the stable ACP revision */
#define ACP_LINE_MAX		(8 * 1024 * 1024)	/* one message from the editor */
#define ACP_DAEMON_LINE_MAX	(64 * 1024 * 1024)	/* one message from gbrd */
#define ACP_CALLS_MAX		256		/* requests waiting on gbrd */
#define ACP_SESSIONS_MAX	64		/* gbrd's attach limit per connection */
#define ACP_PERMS_MAX		256		/* permission requests unanswered */
#define ACP_OUT_HIGH		(8 * 1024 * 1024)	/* stop reading above this */
#define ACP_READ_CHUNK		65536
#define ACP_FLUSH_MS		2000		/* to flush replies at exit */
#define ACP_FIRST_DID		1000000		/* our ids on gbrd's connection */
#define ACP_SHOWN_MAX		(64 * 1024)	/* tool output shown in a card */
#define ACP_HISTORY_LIMIT	1000		/* messages replayed by session/load */
#define ACP_PROMPT_MAX		(256 * 1024)	/* gbrd's max_text_bytes default */

/* What a call to gbrd is for, so that its reply goes to the right place. */
enum acp_call_kind {
	ACP_D_CREATE = 0,	/* session/new: session.create */
	ACP_D_ATTACH,		/* session.attach after new or load */
	ACP_D_LIST,		/* session/load: session.list finds it */
	ACP_D_HISTORY,		/* session/load: session.history to replay */
	ACP_D_APPROVALS,	/* approval.list: pending ones to ask about */
	ACP_D_SEND,		/* session/prompt: session.send */
	ACP_D_CANCEL,		/* session/cancel: session.cancel */
	ACP_D_RESOLVE,		/* a permission answer: approval.resolve */
};

/* A session the editor opened (new or loaded). */
struct acp_sess {
	TAILQ_ENTRY(acp_sess)	 entry;
	char			 id[32];	/* gbr's id = ACP's sessionId */
	char			*workspace;	/* for absolute locations */
	long long		 seq;		/* the last event seen */
	int			 attached;	/* events flow */

	json_t			*prompt_id;	/* the session/prompt waiting */
	char			 prompt_rid[64];	/* its session.send request_id */
	long long		 prompt_turn;	/* 0 until session.send answers */
	int			 cancel_asked;	/* session/cancel came */
	long long		 ended_turn;	/* the last turn seen to end */
	char			*ended_outcome;
	char			*ended_error;	/* its error event's text */
	char			*ended_kind;

	long long		 delta_turn;	/* message.delta seen for */
	long long		 delta_step;	/* this turn and step */
	json_t			*args;		/* call_id -> {tool, args} running */
};
TAILQ_HEAD(acp_sesss, acp_sess);

/* A request sent to gbrd whose reply has not come yet. */
struct acp_call {
	TAILQ_ENTRY(acp_call)	 entry;
	enum acp_call_kind	 kind;
	long long		 did;		/* gbrd's request id */
	json_t			*id;		/* the editor's request, or NULL */
	char			 sess[32];	/* the session it is about */
	json_t			*data;		/* what the next step needs */
};
TAILQ_HEAD(acp_calls, acp_call);

/* A session/request_permission the editor has not answered. */
struct acp_perm {
	TAILQ_ENTRY(acp_perm)	 entry;
	long long		 rid;		/* our request's id */
	char			 sess[32];
	char			*approval;	/* gbr's approval id */
	char			*call_id;	/* the tool call it is about */
	int			 stale;		/* decided elsewhere: ignore */
};
TAILQ_HEAD(acp_perms, acp_perm);

/* The agent. */
struct acp {
	struct ctl	*ctl;
	char		*workspace;	/* --workspace, as a real path, or NULL */
	const char	*env;		/* --env */
	int		 verbose;

	struct client	*cl;		/* NULL while gbrd is not connected */
	int		 dfd;
	struct frame	*dframe;
	size_t		 dmax_line;
	long long	 next_did;
	struct mcp_buf	 dout;

	struct mcp_lines in;		/* the editor's stdin, moved */
	int		 out_fd;
	int		 out_dead;
	struct mcp_buf	 out;

	int		 initialized;
	struct acp_sesss sessions;
	unsigned	 nsessions;
	struct acp_calls calls;
	unsigned	 ncalls;
	struct acp_perms perms;
	unsigned	 nperms;
	long long	 next_rid;	/* our requests to the editor */
	char		 rid_prefix[16];
	unsigned long long rid_next;
};

/* ctl-acp.c: the log and the replies to the editor. */
void	 acp_log(const char *fmt, ...) __attribute__((format(__printf__, 1, 2)));
void	 acp_send(struct acp *a, json_t *msg);
void	 acp_result(struct acp *a, json_t *id, json_t *result);
void	 acp_error(struct acp *a, json_t *id, int code, const char *kind,
	    const char *fmt, ...) __attribute__((format(__printf__, 5, 6)));
void	 acp_notify(struct acp *a, const char *method, json_t *params);
long long acp_request(struct acp *a, const char *method, json_t *params);

/* acp-session.c: the editor's session requests. */
struct acp_sess *acp_sess_find(struct acp *a, const char *id);
void	 acp_sess_free(struct acp *a, struct acp_sess *s);
void	 acp_session_new(struct acp *a, json_t *id, json_t *params);
void	 acp_session_load(struct acp *a, json_t *id, json_t *params);
void	 acp_session_prompt(struct acp *a, json_t *id, json_t *params);
void	 acp_session_cancel(struct acp *a, json_t *params);
void	 acp_permission_answer(struct acp *a, json_t *msg);
void	 acp_daemon_reply(struct acp *a, struct acp_call *c, json_t *msg);
void	 acp_turn_ended(struct acp *a, struct acp_sess *s);

/* acp-update.c: gbrd's events and history as ACP updates. */
void	 acp_event(struct acp *a, json_t *params);
void	 acp_replay(struct acp *a, struct acp_sess *s, json_t *messages,
	    json_int_t older);
void	 acp_ask_permission(struct acp *a, struct acp_sess *s, json_t *ap);
void	 acp_perm_free(struct acp *a, struct acp_perm *p);

/* acp-daemon.c: the connection to gbrd. */
int	 acp_connect(struct acp *a, char **cause, int *unreachable);
int	 acp_ensure(struct acp *a, char **cause);
struct acp_call *acp_call(struct acp *a, enum acp_call_kind kind,
	    const char *sess, json_t *id, const char *method, json_t *params);
void	 acp_call_free(struct acp *a, struct acp_call *c);
void	 acp_daemon_lost(struct acp *a, const char *why);
void	 acp_daemon_read(struct acp *a);

#endif
