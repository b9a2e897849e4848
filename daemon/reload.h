/*
 * Hot reload: the environment each session runs under, and the watchers
 * that keep it current. reload.c loads a session's profile (and builds its
 * sandbox) the first time it is needed, and after a restart; it starts one
 * profile watcher (envwatch.h) per workspace, shared by every session on
 * that workspace and bounded in number; and it applies a change the
 * openbgpd way: parse and validate the new profile first, keep the old
 * one on any error (an env.invalid event says why), else record the
 * change (session.env: the system message replaced, every other message
 * untouched) and swap the env and sandbox pointers, so the very next tool
 * call uses the new rules. The env and sandbox themselves are kept with
 * the session (session_runtime).
 */
#ifndef GBRD_RELOAD_H
#define GBRD_RELOAD_H

#include <jansson.h>

#include "errors.h"
#include "session.h"

struct env;
struct event_base;
struct sandbox;

#define RELOAD_WATCH_MAX	64	/* workspaces watched at once */

/* Remembers the loop; before reload_recover. */
void		 reload_init(struct event_base *);
/* After replay: loads every open session's environment and watches it. */
void		 reload_recover(void);
/* Stops every watcher. */
void		 reload_shutdown(void);
/* Watchers and their mode, for daemon.status (new reference). */
json_t		*reload_status(void);

/*
 * The session's environment and sandbox, loading them if needed (a
 * profile that no longer loads gives the built-in default and an
 * env.invalid event). Borrowed. Returns 0, or -1 with *cause.
 */
int		 reload_session(struct session *, struct env **,
		    struct sandbox **, char **cause);
/*
 * Loads profile name for a session and, if it is valid, records the
 * change (an env.reloaded event with reason why and what changed) and
 * swaps it in. force: apply even when nothing changed. Returns 0 and cb
 * runs once with {env, changed, reloaded}; or -1 with *kind, *cause
 * (caller frees) and *data (new reference or NULL): the old profile stays.
 */
int		 reload_apply(struct session *, const char *name, int force,
		    const char *why, session_done_cb, void *, enum gbr_err *kind,
		    char **cause, json_t **data);

#endif
