/*
 * The env.* methods: list a workspace's profiles, show one, switch a
 * session to another (env.use) and force a reload (env.reload). Loading,
 * validating, recording and swapping are session-env.c's; this file checks the
 * params and shapes the replies.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "env.h"
#include "methods.h"
#include "paths.h"
#include "session-env.h"
#include "session.h"
#include "xmalloc.h"

/* Finds params.session, answering the request if there is none. */
static struct session *
method_env_session(struct request *req, json_t *params, int required)
{
	struct session	*s;
	const char	*key = NULL;

	if (params_string(req, params, "session", required, &key) != 0 ||
	    key == NULL)
		return NULL;
	if ((s = session_find(key)) == NULL)
		request_error(req, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", key, strlen(key) > 64 ? (size_t)64 : strlen(key)),
		    "no open session has the id or name '%.64s'", key);
	return s;
}

/* Checks a profile name param; answers the request if it is bad. */
static int
method_env_name(struct request *req, const char *name)
{
	if (env_name_valid(name))
		return 0;
	request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}", "field",
	    "env"), "env: 1 to %d letters, digits, '.', '_' or '-', starting "
	    "with a letter or digit", ENV_NAME_MAX);
	return -1;
}

/* env.list {session | workspace} */
void
method_env_list(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "workspace", NULL };
	struct session	*s = NULL;
	const char	*ws = NULL;
	char		 path[PATH_MAX], *cause;
	json_t		*l;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "workspace", 0, &ws) != 0)
		return;
	if (json_object_get(params, "session") != NULL) {
		if ((s = method_env_session(req, params, 1)) == NULL)
			return;
		ws = session_workspace(s);
	} else if (ws == NULL) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "session"), "give a session or a workspace");
		return;
	}
	if (!paths_is_absolute(ws) || strlen(ws) >= PATH_MAX || realpath(ws, path) == NULL) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "workspace"), "workspace: not an absolute path to a "
		    "folder");
		return;
	}
	if ((l = env_list(path, &cause)) == NULL) {
		request_error(req, GBR_ERR_INVALID_ENV, NULL, "%s", cause);
		free(cause);
		return;
	}
	request_reply(req, json_pack("{s:s, s:o, s:s?}", "workspace", path,
	    "envs", l, "current", s != NULL ? session_env_name(s) : NULL));
}

/* env.show {session, env?} */
void
method_env_show(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "env", NULL };
	struct session	*s;
	struct env	*env;
	const char	*name = NULL;
	char		*cause;
	json_t		*o;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "env", 0, &name) != 0 ||
	    (s = method_env_session(req, params, 1)) == NULL)
		return;
	if (name != NULL && method_env_name(req, name) != 0)
		return;
	if (name == NULL || strcmp(name, session_env_name(s)) == 0) {
		if (session_env_and_sandbox(s, &env, NULL, &cause) != 0) {
			request_error(req, GBR_ERR_INVALID_ENV, NULL, "%s", cause);
			free(cause);
			return;
		}
		o = env_to_json(env);
		json_object_set_new(o, "in_use", json_true());
	} else {
		if (env_load(session_workspace(s), name, &env, &cause) != 0) {
			request_error(req, GBR_ERR_INVALID_ENV, json_pack(
			    "{s:s, s:s}", "env", name, "error", cause), "%s",
			    cause);
			free(cause);
			return;
		}
		o = env_to_json(env);
		env_unref(env);
		json_object_set_new(o, "in_use", json_false());
	}
	json_object_set_new(o, "session", json_string(session_id(s)));
	request_reply(req, o);
}

/* session-env.c callback: the change is written. */
static void
method_env_done(void *arg, int error, json_t *result)
{
	struct request	*req = arg;

	if (error != 0)
		request_error(req, GBR_ERR_STORAGE, NULL, "the change could not "
		    "be written to the disk log: %s", strerror(error));
	else
		request_reply(req, json_incref(result));
}

/* Loads and swaps, answering the request. */
static void
method_env_apply(struct request *req, struct session *s, const char *name,
    const char *why)
{
	enum gbr_err	 kind;
	json_t		*data;
	char		*cause;

	if (session_env_apply(s, name, 1, why, method_env_done, req, &kind,
	    &cause, &data) != 0) {
		request_error(req, kind, data, "%s", cause);
		free(cause);
	}
}

/* env.use {session, env} */
void
method_env_use(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "env", NULL };
	struct session	*s;
	const char	*name = NULL;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "env", 1, &name) != 0 ||
	    method_env_name(req, name) != 0 ||
	    (s = method_env_session(req, params, 1)) == NULL)
		return;
	method_env_apply(req, s, name, "env.use");
}

/* env.reload {session} */
void
method_env_reload(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	struct session	*s;
	char		*name;

	if (params_only(req, params, keys) != 0 ||
	    (s = method_env_session(req, params, 1)) == NULL)
		return;
	name = xstrdup(session_env_name(s));
	method_env_apply(req, s, name, "env.reload");
	free(name);
}
