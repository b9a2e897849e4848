/*
 * Sessions and their environments (see session-env.h): each session's
 * profile and sandbox loaded on demand, one profile watcher per workspace,
 * and the parse, validate, record, swap sequence that every change goes
 * through (a profile edited on disk, env.reload, env.use). The watchers
 * are this file's; the loaded env and sandbox are kept with the session
 * (session_runtime), and the profiles themselves are env.c's.
 */
#include "gbr-config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "envwatch.h"
#include "log.h"
#include "session-env.h"
#include "runhold.h"
#include "sandbox.h"
#include "session.h"
#include "xmalloc.h"

/* One watched workspace. */
struct rwatch {
	TAILQ_ENTRY(rwatch)	 entry;
	char			*workspace;
	struct envwatch		*w;
	json_t			*files;		/* extra files added: path -> name */
	json_t			*held;		/* names changed while commands ran */
};
TAILQ_HEAD(rwatch_list, rwatch);

/* A change waiting for its record to be written. */
struct rwait {
	session_done_cb	 cb;
	void		*arg;
	json_t		*result;
};

static struct event_base	*reload_base;
static struct rwatch_list	 reload_watches =
    TAILQ_HEAD_INITIALIZER(reload_watches);
static unsigned			 reload_nwatches;

static void	reload_watch_cb(const char *, void *);
static void	reload_watch_gone(void *);
static void	reload_released(const char *, void *);

/* Remembers the loop, and hears when a workspace's commands have ended. */
void
session_env_init(struct event_base *base)
{
	reload_base = base;
	runhold_set_release(reload_released, NULL);
}

/* Finds the watcher of a workspace. */
static struct rwatch *
reload_watch_find(const char *ws)
{
	struct rwatch	*rw;

	TAILQ_FOREACH(rw, &reload_watches, entry) {
		if (strcmp(rw->workspace, ws) == 0)
			return rw;
	}
	return NULL;
}

/* Frees a watcher (never from its own callback). */
static void
reload_watch_free(struct rwatch *rw)
{
	TAILQ_REMOVE(&reload_watches, rw, entry);
	reload_nwatches--;
	envwatch_free(rw->w);
	json_decref(rw->files);
	json_decref(rw->held);
	free(rw->workspace);
	free(rw);
}

/* Frees the watchers of workspaces that no open session uses. */
static void
reload_watch_gc(void)
{
	struct rwatch	*rw, *next;
	json_t		*l;

	for (rw = TAILQ_FIRST(&reload_watches); rw != NULL; rw = next) {
		next = TAILQ_NEXT(rw, entry);
		l = session_open_ids(rw->workspace);
		if (json_array_size(l) == 0)
			reload_watch_free(rw);
		json_decref(l);
	}
}

/* How many workspaces are watched in a mode ("inotify" or "poll"). */
static unsigned
reload_watch_count(const char *mode)
{
	struct rwatch	*rw;
	unsigned	 n = 0;

	TAILQ_FOREACH(rw, &reload_watches, entry)
		n += strcmp(envwatch_mode(rw->w), mode) == 0;
	return n;
}

/*
 * Makes sure the workspace of an env is watched, with the env's extra
 * files (a system_file). Failure only loses hot reload: it is logged.
 */
static void
reload_watch(const char *ws, const struct env *env)
{
	struct rwatch		*rw;
	struct envwatch_opts	 opts;
	const char *const	*files;
	char			*cause, *dir;
	size_t			 i, n, dlen;

	if (reload_base == NULL)
		return;
	if ((rw = reload_watch_find(ws)) == NULL) {
		if (reload_nwatches >= SESSION_ENV_INOTIFY_MAX)
			reload_watch_gc();
		if (reload_nwatches >= SESSION_ENV_WATCH_MAX) {
			log_warn("%s: not watched for profile changes: %d "
			    "workspaces are watched already (env.reload still "
			    "works)", ws, SESSION_ENV_WATCH_MAX);
			return;
		}
		memset(&opts, 0, sizeof opts);
		opts.force_poll = reload_watch_count("inotify") >=
		    SESSION_ENV_INOTIFY_MAX;
		rw = xcalloc(1, sizeof *rw);
		rw->workspace = xstrdup(ws);
		rw->files = json_object();
		rw->held = json_object();
		rw->w = envwatch_create(reload_base, ws, &opts, reload_watch_cb,
		    rw, &cause);
		if (rw->w == NULL) {
			log_warn("%s: profiles not watched: %s", ws, cause);
			free(cause);
			json_decref(rw->files);
			json_decref(rw->held);
			free(rw->workspace);
			free(rw);
			return;
		}
		envwatch_on_gone(rw->w, reload_watch_gone);
		TAILQ_INSERT_TAIL(&reload_watches, rw, entry);
		reload_nwatches++;
		log_debug("%s: watching profiles (%s)", ws, envwatch_mode(rw->w));
	} else
		envwatch_rearm(rw->w);	/* the folder may be new */
	if (env == NULL)
		return;
	/* Profiles in .gbr_envs are watched already; add the others. */
	dir = xasprintf("%s/%s/", ws, ENV_DIR);
	dlen = strlen(dir);
	n = env_files(env, &files);
	for (i = 0; i < n; i++) {
		if (strncmp(files[i], dir, dlen) == 0 &&
		    strchr(files[i] + dlen, '/') == NULL)
			continue;
		if (json_object_get(rw->files, files[i]) != NULL)
			continue;
		if (envwatch_add_file(rw->w, files[i], env_name(env),
		    &cause) != 0) {
			log_warn("%s: not watched: %s", files[i], cause);
			free(cause);
			continue;
		}
		json_object_set_new(rw->files, files[i],
		    json_string(env_name(env)));
	}
	free(dir);
}

/* Tells a session's clients that a profile is not used, and why. */
static void
reload_invalid(struct session *s, const char *name, const char *error,
    int deleted)
{
	struct gbr_error	 err;
	struct env		*cur;
	json_t			*f;

	session_runtime(s, &cur, NULL);
	log_warn("session %s: profile '%s' not applied: %s", session_id(s),
	    name, error);
	f = json_pack("{s:s, s:s, s:b}", "env", name, "error", error,
	    "deleted", deleted);
	if (cur != NULL)
		json_object_set_new(f, "in_force", json_string(env_source(cur) !=
		    NULL ? env_name(cur) : "(built-in default)"));
	if (session_event(s, "env.invalid", f, NULL, NULL, &err) != 0) {
		log_warn("session %s: env.invalid not recorded: %s",
		    session_id(s), err.message);
		gbr_error_clear(&err);
	}
}

/*
 * One recovery's profiles, by workspace and name: the sessions of one
 * workspace load its profile once, not once each (the files' paths are
 * resolved and checked anew for every load). Valid for the one pass only;
 * a profile edited after it is the watcher's business, as it is for any
 * session. Envs are immutable once loaded, so sessions may share one.
 */
struct reload_cache {
	json_t		 *slots;	/* "workspace\nname" -> index in envs */
	struct env	**envs;
	size_t		  n;
	json_t		 *paths;	/* workspaces whose path was checked */
};

/* env_load through the cache (if any): a new reference, or -1 and *why. */
static int
reload_load(struct reload_cache *rc, const char *ws, const char *name,
    struct env **env, char **why)
{
	json_t	*slot;
	char	*key;

	if (rc == NULL)
		return env_load(ws, name, env, why);
	key = xasprintf("%s\n%s", ws, name != NULL ? name : "default");
	if ((slot = json_object_get(rc->slots, key)) != NULL) {
		free(key);
		*env = env_ref(rc->envs[json_integer_value(slot)]);
		return 0;
	}
	if (env_load(ws, name, env, why) != 0) {
		free(key);	/* a failure is said for each session */
		return -1;
	}
	rc->envs = xreallocarray(rc->envs, rc->n + 1, sizeof *rc->envs);
	rc->envs[rc->n] = env_ref(*env);
	json_object_set_new(rc->slots, key, json_integer((json_int_t)rc->n++));
	free(key);
	return 0;
}

/*
 * Checks that the session's path still names its workspace as it did: the
 * path was resolved when the session was made, and its folder is owned by
 * whoever owned it then (a folder deleted and made again by someone else,
 * as anyone may in a shared /tmp, is not taken). Through rc, once per
 * workspace: a restart checks 10,000 sessions. Returns 0, or -1 with
 * *cause.
 */
static int
reload_path_check(struct session *s, struct reload_cache *rc, char **cause)
{
	const char	*ws = session_workspace(s);
	long		 uid = session_workspace_uid(s);
	struct stat	 st;
	char		*real, *key = NULL;

	*cause = NULL;
	if (rc != NULL) {
		key = xasprintf("%s\n%ld", ws, uid);
		if (json_object_get(rc->paths, key) != NULL) {
			free(key);
			return 0;
		}
	}
	real = realpath(ws, NULL);
	if (real == NULL && (errno == ENOENT || errno == ENOTDIR))
		*cause = xasprintf("the session's workspace %s does not exist "
		    "any more (deleted or moved): create the folder again to go "
		    "on, or start a session where it is now", ws);
	else if (real != NULL && strcmp(real, ws) != 0)
		*cause = xasprintf("the session's workspace %s now leads to %s (a "
		    "link was put in its place): start a session there if that "
		    "is meant", ws, real);
	else if (real != NULL && uid >= 0 && stat(real, &st) == 0 &&
	    (long)st.st_uid != uid)
		*cause = xasprintf("the folder at %s belongs to uid %ld, but the "
		    "workspace was uid %ld's when the session was made (deleted "
		    "and made again by someone else?): start a session on it if "
		    "it is meant", real, (long)st.st_uid, uid);
	free(real);
	if (*cause != NULL) {
		free(key);
		return -1;
	}
	if (key != NULL)
		json_object_set_new(rc->paths, key, json_true());
	free(key);
	return 0;
}

/* Loads a session's env and sandbox if it has none yet (through rc). */
static int
session_env_load(struct session *s, struct reload_cache *rc,
    struct env **envp, struct sandbox **sbp, char **cause)
{
	struct env	*env;
	struct sandbox	*sb;
	char		*why = NULL, *why2 = NULL;

	*cause = NULL;
	session_runtime(s, &env, &sb);
	if (env != NULL && sb != NULL)
		goto done;
	if (reload_path_check(s, rc, cause) != 0)
		return -1;
	env = NULL;
	sb = NULL;
	if (reload_load(rc, session_workspace(s), session_env_name(s), &env,
	    &why) == 0 && (sb = env_sandbox(env, &why)) != NULL) {
		session_set_runtime(s, env, sb);
		goto done;
	}
	if (env != NULL)
		env_unref(env);
	/* Never refuse the session: the built-in default, and say why. */
	if ((env = env_builtin(session_workspace(s), &why2)) == NULL ||
	    (sb = env_sandbox(env, &why2)) == NULL) {
		if (env != NULL)
			env_unref(env);
		*cause = xasprintf("%s; the built-in default fails too: %s", why,
		    why2);
		free(why);
		free(why2);
		return -1;
	}
	session_set_runtime(s, env, sb);
	reload_invalid(s, session_env_name(s), why, 0);
	free(why);
done:
	reload_watch(session_workspace(s), env);
	if (envp != NULL)
		*envp = env;
	if (sbp != NULL)
		*sbp = sb;
	return 0;
}

/* The session's env and sandbox, loaded first if it has none yet. */
int
session_env_and_sandbox(struct session *s, struct env **envp,
    struct sandbox **sbp, char **cause)
{
	return session_env_load(s, NULL, envp, sbp, cause);
}

/* A session's env and sandbox by its id (mcp_init's callback). */
int
session_env_lookup(const char *sid, struct env **envp, struct sandbox **sbp,
    char **cause)
{
	struct session	*s;

	if ((s = session_find(sid)) == NULL) {
		*cause = xasprintf("no open session '%.64s'", sid);
		return -1;
	}
	return session_env_load(s, NULL, envp, sbp, cause);
}

/* The change is written: answer with what changed. */
static void
reload_applied(void *arg, int error, json_t *result)
{
	struct rwait	*rw = arg;

	json_object_update(result, rw->result);
	rw->cb(rw->arg, error, result);
	json_decref(rw->result);
	free(rw);
}

/* Loads, validates, records and swaps (see session-env.h). */
int
session_env_apply(struct session *s, const char *name, int force,
    const char *why, session_done_cb cb, void *arg, enum gbr_err *kind,
    char **cause, json_t **data)
{
	struct gbr_error	 err;
	struct env		*old, *ne = NULL;
	struct sandbox		*sb;
	struct rwait		*rw;
	json_t			*diff, *res;
	char			*c = NULL;
	int			 same, deleted;

	*cause = NULL;
	*data = NULL;
	*kind = GBR_ERR_INVALID_ENV;
	if (session_env_and_sandbox(s, &old, NULL, cause) != 0) {
		*kind = GBR_ERR_INTERNAL;
		return -1;
	}
	same = strcmp(name, session_env_name(s)) == 0;
	/* A profile in use that is gone keeps the last good one. */
	deleted = same && env_source(old) != NULL &&
	    access(env_source(old), F_OK) != 0 && errno == ENOENT;
	if (deleted) {
		c = xasprintf("%s was deleted; the last good profile stays in "
		    "force", env_source(old));
		goto invalid;
	}
	if (env_load(session_workspace(s), name, &ne, &c) != 0)
		goto invalid;
	if ((sb = env_sandbox(ne, &c)) == NULL)
		goto invalid;
	diff = env_diff(old, ne);
	if (same && !force && json_array_size(diff) == 0 &&
	    strcmp(session_env_name(s), env_name(ne)) == 0) {
		/* An editor's save that changed nothing. */
		json_decref(diff);
		sandbox_free(sb);
		env_unref(ne);
		if (cb != NULL) {
			res = json_pack("{s:s, s:[], s:b}", "env", name,
			    "changed", "reloaded", 0);
			cb(arg, 0, res);
			json_decref(res);
		}
		return 0;
	}
	res = json_pack("{s:s, s:O, s:b}", "env", name, "changed", diff,
	    "reloaded", 1);
	rw = NULL;
	if (cb != NULL) {
		rw = xcalloc(1, sizeof *rw);
		rw->cb = cb;
		rw->arg = arg;
		rw->result = json_incref(res);
	}
	if (session_set_env(s, "env.reloaded", name, env_system_prompt(ne),
	    json_pack("{s:s, s:o, s:s, s:s?}", "previous",
	    session_env_name(s), "changed", diff, "reason", why,
	    "file", env_source(ne)), rw != NULL ? reload_applied : NULL, rw,
	    &err) != 0) {
		if (rw != NULL) {
			json_decref(rw->result);
			free(rw);
		}
		json_decref(res);
		sandbox_free(sb);
		env_unref(ne);
		*kind = err.kind;
		*cause = err.message;
		*data = err.data;
		return -1;
	}
	json_decref(res);
	/* The record is appended: the next tool call sees the new rules. */
	session_set_runtime(s, ne, sb);
	log_info("session %s: profile '%s' applied (%s)", session_id(s), name,
	    why);
	reload_watch(session_workspace(s), ne);
	return 0;

invalid:
	if (ne != NULL)
		env_unref(ne);
	if (strcmp(why, "env.use") != 0)
		reload_invalid(s, name, c, deleted);
	*cause = c;
	*data = json_pack("{s:s, s:s}", "env", name, "error", c);
	return -1;
}

/* A workspace's profile changed: reload the sessions that use it. */
static void
reload_watch_cb(const char *name, void *arg)
{
	struct rwatch	*rw = arg;
	struct session	*s;
	json_t		*l, *o, *data;
	enum gbr_err	 kind;
	char		*cause;
	size_t		 i;

	/*
	 * A command of this workspace runs: the change may be its own, and
	 * is looked at again once the last one has ended and what it changed
	 * has been put back (runhold.h, lockaudit.h).
	 */
	if (runhold_active(rw->workspace) > 0) {
		json_object_set_new(rw->held, name, json_true());
		return;
	}
	l = session_open_ids(rw->workspace);
	json_array_foreach(l, i, o) {
		s = session_find(json_string_value(o));
		if (s == NULL || strcmp(session_env_name(s), name) != 0)
			continue;
		if (session_env_apply(s, name, 0, "changed on disk", NULL, NULL,
		    &kind, &cause, &data) != 0) {
			free(cause);
			json_decref(data);
		}
	}
	json_decref(l);
}

/* The last command of a workspace has ended: what changed meanwhile. */
static void
reload_released(const char *ws, void *arg)
{
	struct rwatch	*rw;
	json_t		*held, *v;
	const char	*name;

	if ((rw = reload_watch_find(ws)) == NULL ||
	    json_object_size(rw->held) == 0)
		return;
	held = rw->held;
	rw->held = json_object();
	json_object_foreach(held, name, v)
		reload_watch_cb(name, rw);
	json_decref(held);
}

/*
 * The workspace's folder was deleted or moved: its sessions let go of the
 * sandbox that holds it and load the path again at their next call, as
 * after a restart (the folder may be made again: a fresh clone).
 */
static void
reload_watch_gone(void *arg)
{
	struct rwatch		*rw = arg;
	struct session		*s;
	struct gbr_error	 err;
	struct sandbox		*sb;
	json_t			*l, *o;
	size_t			 i;

	l = session_open_ids(rw->workspace);
	json_array_foreach(l, i, o) {
		if ((s = session_find(json_string_value(o))) == NULL)
			continue;
		session_runtime(s, NULL, &sb);
		if (sb == NULL)
			continue;
		log_warn("session %s: its workspace %s was deleted or moved",
		    session_id(s), rw->workspace);
		session_set_runtime(s, NULL, NULL);
		if (session_event(s, "workspace.gone", json_pack("{s:s, s:s}",
		    "workspace", rw->workspace, "message", "the workspace "
		    "folder was deleted or moved: tools fail until a folder is "
		    "made again at its path"), NULL, NULL, &err) != 0) {
			gbr_error_clear(&err);
		}
	}
	json_decref(l);
}

/* After replay: every open session gets its environment. */
void
session_env_recover(void)
{
	struct reload_cache	 rc = { json_object(), NULL, 0, json_object() };
	struct session		*s;
	json_t			*l, *o;
	char			*cause;
	size_t			 i;

	l = session_open_ids(NULL);
	json_array_foreach(l, i, o) {
		s = session_find(json_string_value(o));
		if (s != NULL && session_env_load(s, &rc, NULL, NULL,
		    &cause) != 0) {
			log_error("session %s: no environment: %s",
			    session_id(s), cause);
			free(cause);
		}
	}
	json_decref(l);
	for (i = 0; i < rc.n; i++)
		env_unref(rc.envs[i]);
	free(rc.envs);
	json_decref(rc.slots);
	json_decref(rc.paths);
}

/* Stops every watcher. */
void
session_env_shutdown(void)
{
	struct rwatch	*rw;

	while ((rw = TAILQ_FIRST(&reload_watches)) != NULL)
		reload_watch_free(rw);
}

/* For daemon.status. */
json_t *
session_env_status(void)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I}", "watched_workspaces",
	    (json_int_t)reload_nwatches, "inotify",
	    (json_int_t)reload_watch_count("inotify"), "poll",
	    (json_int_t)reload_watch_count("poll"), "inotify_max",
	    (json_int_t)SESSION_ENV_INOTIFY_MAX, "max",
	    (json_int_t)SESSION_ENV_WATCH_MAX);
}
