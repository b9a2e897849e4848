/*
 * The cache.* methods: the size of the agent's package caches (cache.du)
 * and their removal (cache.clean), for one workspace or all of them. The
 * caches are tool-run-cache.c's; this file checks the params.
 */
#include "gbr-config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "methods.h"
#include "paths.h"
#include "session.h"
#include "tool-run.h"
#include "xmalloc.h"

/*
 * The workspace of params (session or workspace; neither: every one) into
 * path, "" for all. Returns 0, or -1 having answered the request.
 */
static int
method_cache_workspace(struct request *req, json_t *params, char *path)
{
	static const char *const keys[] = { "session", "workspace", NULL };
	struct session	*s;
	const char	*ws = NULL, *key = NULL;

	path[0] = '\0';
	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "workspace", 0, &ws) != 0 ||
	    params_string(req, params, "session", 0, &key) != 0)
		return -1;
	if (key != NULL) {
		if ((s = session_find(key)) == NULL) {
			request_error(req, GBR_ERR_SESSION_NOT_FOUND, NULL,
			    "no open session has the id or name '%.64s'", key);
			return -1;
		}
		ws = session_workspace(s);
	}
	if (ws == NULL)
		return 0;
	if (!paths_is_absolute(ws) || strlen(ws) >= PATH_MAX || realpath(ws, path) ==
	    NULL) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "workspace"), "workspace: not an absolute path to "
		    "a folder");
		return -1;
	}
	return 0;
}

/* A cache.du waiting for its thread. */
struct cache_du_req {
	struct request	*req;
	char		 workspace[PATH_MAX];
};

/* The thread has measured: the answer. */
static void
method_cache_du_done(void *arg, json_t *result)
{
	struct cache_du_req	*r = arg;

	if (r->workspace[0] != '\0')
		json_object_set_new(result, "workspace",
		    json_string(r->workspace));
	request_reply(r->req, json_incref(result));
	free(r);
}

/* cache.du {session? | workspace?} */
void
method_cache_du(struct request *req, json_t *params)
{
	struct cache_du_req	*r;
	char			*cause;

	r = xcalloc(1, sizeof *r);
	r->req = req;
	if (method_cache_workspace(req, params, r->workspace) != 0) {
		free(r);
		return;
	}
	if (tool_run_cache_du(r->workspace[0] != '\0' ? r->workspace : NULL,
	    method_cache_du_done, r, &cause) != 0) {
		request_error(req, GBR_ERR_UNAVAILABLE, NULL, "%s", cause);
		free(cause);
		free(r);
	}
}

/* cache.clean {session? | workspace?} */
void
method_cache_clean(struct request *req, json_t *params)
{
	char	 path[PATH_MAX], *cause;
	json_t	*o;
	int	 busy;

	if (method_cache_workspace(req, params, path) != 0)
		return;
	if ((o = tool_run_cache_clean(path[0] != '\0' ? path : NULL, &busy,
	    &cause)) == NULL) {
		request_error(req, busy ? GBR_ERR_BUSY : GBR_ERR_STORAGE, NULL,
		    "%s", cause);
		free(cause);
		return;
	}
	request_reply(req, o);
}
