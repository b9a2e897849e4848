/*
 * The binding of each session to its environment and sandbox, and the hot
 * reload that keeps it current. session-env.c loads a session's profile
 * (and builds its sandbox) the first time it is needed, and after a
 * restart; it starts one
 * profile watcher (envwatch.h) per workspace, shared by every session on
 * that workspace and bounded in number; and it applies a change the
 * openbgpd way: parse and validate the new profile first, keep the old
 * one on any error (an env.invalid event says why), else record the
 * change (session.env: the system message replaced, every other message
 * untouched) and swap the env and sandbox pointers, so the very next tool
 * call uses the new rules. The env and sandbox themselves are kept with
 * the session (session_runtime).
 */
#ifndef GBRD_SESSION_ENV_H
#define GBRD_SESSION_ENV_H

#include <jansson.h>

#include "errors.h"
#include "session.h"

struct env;
struct event_base;
struct sandbox;

/*
 * Workspaces watched with inotify at once (each takes one of the user's
 * fs.inotify.max_user_instances, 128 by default); beyond that, up to
 * SESSION_ENV_WATCH_MAX in all are polled every 2 s (envwatch.h).
 */
#define SESSION_ENV_INOTIFY_MAX	64
#define SESSION_ENV_WATCH_MAX	1024

/* Remembers the loop; before session_env_recover. */
void		 session_env_init(struct event_base *);
/* After replay: loads every open session's environment and watches it. */
void		 session_env_recover(void);
/* Stops every watcher. */
void		 session_env_shutdown(void);
/* Watchers and their mode, for daemon.status (new reference). */
json_t		*session_env_status(void);

/*
 * The session's environment and sandbox, loading them if needed (a
 * profile that no longer loads gives the built-in default and an
 * env.invalid event). Borrowed. Returns 0, or -1 with *cause.
 */
int		 session_env_and_sandbox(struct session *, struct env **,
		    struct sandbox **, char **cause);
/* The same by a session's id or name (mcp.h's mcp_env_fn). */
int		 session_env_lookup(const char *session, struct env **,
		    struct sandbox **, char **cause);
/*
 * Loads profile name for a session and, if it is valid, records the
 * change (an env.reloaded event with reason why and what changed) and
 * swaps it in. force: apply even when nothing changed. Returns 0 and cb
 * runs once with {env, changed, reloaded}; or -1 with *kind, *cause
 * (caller frees) and *data (new reference or NULL): the old profile stays.
 */
int		 session_env_apply(struct session *, const char *name,
		    int force, const char *why, session_done_cb, void *, enum gbr_err *kind,
		    char **cause, json_t **data);

#endif
