/*
 * A long-lived child with a session's rights: an MCP server over stdio
 * (daemon/mcp/). It is confined exactly as the run tools confine a
 * command (tool-run.c): the working folder is the allowed root, the only
 * one it may write besides the session's temp space and the agent's
 * package cache (in read-only autonomy not even the root); it reads the
 * system folders, the read-only roots and [exec] read_paths; the
 * protected files and .gbr_envs are bound read-only where namespaces
 * exist; gbrd's socket, config and the home's secret stores are hidden;
 * the environment is the same allow-list, plus the variables the
 * profile names for this server, which are passed even when they look
 * like secrets (a human wrote them there on purpose), never a loader
 * variable. The limits are [exec]'s; the timeout is TOOL_RUN_SERVE_MS,
 * so a server outliving it is ended and started again when next needed.
 *
 * What it does not do: there is no policy here (the profile itself names
 * the program, and each call it serves goes through the policy), and no
 * check of protected files after it (tr_group_enter): a server runs for
 * as long as the session, not for one call. So without namespaces, where
 * the protected files cannot be bound read-only, it gets no write to the
 * workspace at all (only its temp space and the agent's cache): it could
 * otherwise rewrite .gbr_envs, which decides the sandbox.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "runner.h"
#include "sandbox.h"
#include "tool-run-int.h"
#include "xmalloc.h"

/* True if a variable the profile names may be passed at all. */
static int
tr_serve_name_ok(const char *s)
{
	size_t	i;

	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (i >= 128 || !((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return strncmp(s, "LD_", 3) != 0 && strcmp(s, "GLIBC_TUNABLES") != 0 &&
	    strcmp(s, "GCONV_PATH") != 0 && strcmp(s, "TMPDIR") != 0 &&
	    strncmp(s, "GBR", 3) != 0;
}

/* Sets *kind and *reason. Returns -1. */
static int __attribute__((format(__printf__, 4, 5)))
tr_serve_fail(enum gbr_err *kind, char **reason, enum gbr_err k,
    const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	*kind = k;
	*reason = xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

/* Starts a confined long-lived child (see tool-run.h). */
int
tool_run_serve(const struct tool_run_ctx *ctx, const char *const *argv,
    const char *const *names, size_t nnames, runner_output_cb out,
    runner_done_cb done, void *arg, struct runner_job **job,
    enum gbr_err *kind, char **reason)
{
	struct runner_opts	 o;
	struct tr_locks		 locks;
	const char		*rw[4], *ro[TR_RO_MAX], *why, *val;
	char			*tmp_sub[2] = { NULL, NULL }, *stmp = NULL;
	char			*cache = NULL, *why_s, **envp = NULL;
	size_t			 i, n, nro = 0, nrw = 0;
	int			 rc = -1;

	*job = NULL;
	*reason = NULL;
	memset(&locks, 0, sizeof locks);
	if (!tr.ready)
		return tr_serve_fail(kind, reason, GBR_ERR_UNAVAILABLE,
		    "the runner is not set up");
	if ((why = runner_refusal()) != NULL)
		return tr_serve_fail(kind, reason, GBR_ERR_UNAVAILABLE, "%s",
		    why);
	if (ctx == NULL || ctx->sandbox == NULL || ctx->env == NULL ||
	    argv == NULL || argv[0] == NULL)
		return tr_serve_fail(kind, reason, GBR_ERR_INTERNAL,
		    "no sandbox, environment or program");

	memset(&o, 0, sizeof o);
	o.cwd = sandbox_root_path(ctx->sandbox, 0);
	if ((why_s = tr_refuse_root(o.cwd)) != NULL) {
		tr_serve_fail(kind, reason, GBR_ERR_PERMISSION_DENIED, "%s",
		    why_s);
		free(why_s);
		goto out;
	}
	/*
	 * Read-only autonomy: the server writes nothing of the workspace.
	 * Nor without namespaces: nothing could keep .gbr_envs and the
	 * protected files read-only for a child that lives as long as the
	 * session (Landlock allows a tree, it cannot carve files out of it),
	 * and no check after it could put them back in time.
	 */
	if (env_autonomy(ctx->env) != ENV_READ_ONLY && runner_namespaces())
		rw[nrw++] = o.cwd;
	else
		ro[nro++] = o.cwd;	/* it still reads the workspace */
	if ((stmp = tr_session_tmp(ctx->session)) == NULL) {
		tr_serve_fail(kind, reason, GBR_ERR_INTERNAL, "the session's "
		    "temp folder cannot be made (see gbrd's log)");
		goto out;
	}
	rw[nrw++] = tmp_sub[0] = xasprintf("%s/tmp", stmp);
	rw[nrw++] = tmp_sub[1] = xasprintf("%s/shm", stmp);
	if ((cache = tr_cache_ready(env_workspace(ctx->env), &why_s)) == NULL) {
		tr_serve_fail(kind, reason, GBR_ERR_UNAVAILABLE, "the agent's "
		    "package cache cannot be made: %s", why_s);
		free(why_s);
		goto out;
	}
	rw[nrw++] = cache;
	nro = tr_ro_paths(ctx, ro, nro);
	tr_lockset(ctx, o.cwd, &locks);
	if (locks.full || nro >= TR_RO_MAX) {
		tr_serve_fail(kind, reason, GBR_ERR_INVALID_ENV, "this profile "
		    "needs more than %d read-only paths for a child", TR_RO_MAX);
		goto out;
	}
	envp = tr_build_env(ctx, stmp, cache);
	for (n = 0; envp[n] != NULL; n++)
		;
	envp = xreallocarray(envp, n + nnames + 1, sizeof *envp);
	for (i = 0; i < nnames; i++)
		if (tr_serve_name_ok(names[i]) &&
		    (val = getenv(names[i])) != NULL)
			envp[n++] = xasprintf("%s=%s", names[i], val);
	envp[n] = NULL;

	o.argv = argv;
	o.envp = (const char *const *)envp;
	o.stream = 1;
	o.key = NULL;	/* not one of the session's command slots */
	o.limits.timeout_ms = TOOL_RUN_SERVE_MS;
	o.limits.max_output = tr.max_output;
	o.limits.address_space = tr.memory;
	o.limits.file_size = tr.file_size;
	o.limits.processes = tr.processes;
	o.limits.open_files = tr.open_files;
	o.rw_paths = rw;
	o.nrw = nrw;
	o.ro_paths = ro;
	o.nro = nro;
	o.ro_binds = (const char *const *)locks.v;
	o.nro_binds = locks.n;
	o.tmpdir = stmp;
	o.landlock = ctx->require_landlock ? RUNNER_REQUIRE : RUNNER_OFF;
	if (runner_start(&o, out, done, arg, job, kind, reason) != 0)
		goto out;
	rc = 0;
out:
	tool_run_strv_free(envp);
	tr_locks_free(&locks);
	free(stmp);
	free(cache);
	free(tmp_sub[0]);
	free(tmp_sub[1]);
	return rc;
}
