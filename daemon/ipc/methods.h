/*
 * The method handlers, one group per file (method-*.c). dispatch.c holds the
 * table that maps names to these.
 */
#ifndef GBRD_METHODS_H
#define GBRD_METHODS_H

struct event_base;

#include <jansson.h>

struct request;

/* method-daemon.c */
void	method_hello(struct request *, json_t *);
void	method_daemon_ping(struct request *, json_t *);
void	method_daemon_status(struct request *, json_t *);
void	method_daemon_shutdown(struct request *, json_t *);
void	method_daemon_reload(struct request *, json_t *);

/* method-log.c */
struct conn;
void	method_log_read(struct request *, json_t *);
void	method_log_append(struct request *, json_t *);
/* Drops the connection's log follower. */
void	method_log_conn_closed(struct conn *);
/* Followers now, for daemon.status. */
unsigned method_log_followers(void);

/* method-session.c */
void	method_session_create(struct request *, json_t *);
void	method_session_list(struct request *, json_t *);
void	method_session_attach(struct request *, json_t *);
void	method_session_detach(struct request *, json_t *);
void	method_session_send(struct request *, json_t *);
void	method_session_cancel(struct request *, json_t *);
void	method_session_close(struct request *, json_t *);
void	method_session_history(struct request *, json_t *);
void	method_session_rewind(struct request *, json_t *);
void	method_session_changes(struct request *, json_t *);

/* method-tool.c */
int	method_tool_init(struct event_base *, char **cause);
void	method_tool_list(struct request *, json_t *);
void	method_tool_call(struct request *, json_t *);
void	method_tool_cancel(struct request *, json_t *);
void	method_mcp_servers(struct request *, json_t *);

/* method-approval.c */
void	method_approval_list(struct request *, json_t *);
void	method_approval_resolve(struct request *, json_t *);
void	method_approval_grants(struct request *, json_t *);
void	method_approval_revoke(struct request *, json_t *);

/* method-env.c */
void	method_env_list(struct request *, json_t *);
void	method_env_show(struct request *, json_t *);
void	method_env_use(struct request *, json_t *);
void	method_env_reload(struct request *, json_t *);

/* method-cache.c */
void	method_cache_du(struct request *, json_t *);
void	method_cache_clean(struct request *, json_t *);

#endif
