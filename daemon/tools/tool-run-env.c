/*
 * What a child starts with besides its rights: its environment (an
 * allow-list of our variables, never one that looks like a secret, the
 * ones the system's programs need to run at all (runner_env_needed), and
 * TMPDIR) and its session's temp space under the private temp folder,
 * which goes with the session. Also the refusal of an allowed root that
 * would let a command reach gbrd's own folders.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentcache.h"
#include "log.h"
#include "runner.h"
#include "tool-run-int.h"
#include "xmalloc.h"

#define TR_RMTREE_MAX	100000		/* entries removed from the temp folder */
#define TR_BASE_ENV	"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", \
			"TZ", "USER", "LOGNAME"

/* True if a variable may reach a child (see config.c's twin). */
int
tool_run_env_name_ok(const char *s)
{
	static const char *const bad[] = { "KEY", "TOKEN", "SECRET", "PASS",
	    "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE" };
	char	up[256];
	size_t	i;

	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= sizeof up - 1 || !((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_'))
			return 0;
		up[i] = (s[i] >= 'a' && s[i] <= 'z') ? s[i] - 32 : s[i];
	}
	up[i] = '\0';
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (strstr(up, bad[i]) != NULL)
			return 0;
	return strncmp(up, "LD_", 3) != 0 && strcmp(up, "GLIBC_TUNABLES") != 0 &&
	    strcmp(up, "GCONV_PATH") != 0;
}

/* True if v[0..n) already sets name. */
static int
tr_env_has(char **v, size_t n, const char *name)
{
	size_t	i, len = strlen(name);

	for (i = 0; i < n; i++)
		if (strncmp(v[i], name, len) == 0 && v[i][len] == '=')
			return 1;
	return 0;
}

/* NAME=fmt with its one %s replaced by path (fmt NULL: NAME=path). */
static char *
tr_env_fmt(const char *name, const char *fmt, const char *path)
{
	const char	*at;

	if (fmt == NULL || (at = strstr(fmt, "%s")) == NULL)
		return xasprintf("%s=%s", name, path);
	return xasprintf("%s=%.*s%s%s", name, (int)(at - fmt), fmt, path,
	    at + 2);
}

/* Builds the child's environment from ours and the allow-lists. */
char **
tr_build_env(const struct tool_run_ctx *ctx, const char *stmp,
    const char *cache)
{
	static const char *const base[] = { TR_BASE_ENV };
	const struct agentcache_var *cv;
	const char *const *need;
	char		**v = NULL, **p, *sub;
	const char	*val;
	size_t		  n = 0, i, ncv, nneed;

	cv = agentcache_vars(&ncv);
	need = runner_env_needed(&nneed);
	v = xcalloc(sizeof base / sizeof base[0] + nneed + ncv + 128 + 6,
	    sizeof *v);
	for (i = 0; i < sizeof base / sizeof base[0]; i++) {
		if ((val = getenv(base[i])) != NULL)
			v[n++] = xasprintf("%s=%s", base[i], val);
		else if (strcmp(base[i], "PATH") == 0)
			v[n++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
	}
	/* What the system's programs need to run at all (none on Unix). */
	for (i = 0; i < nneed; i++)
		if ((val = getenv(need[i])) != NULL)
			v[n++] = xasprintf("%s=%s", need[i], val);
	/*
	 * No update checks: they call home from every command and put
	 * notices in what the model reads.
	 */
	v[n++] = xstrdup("npm_config_update_notifier=false");
	v[n++] = xstrdup("PIP_DISABLE_PIP_VERSION_CHECK=1");
	/* The package managers' caches: the agent's own, never overridden. */
	for (i = 0; cache != NULL && i < ncv; i++) {
		sub = xasprintf("%s/%s", cache, cv[i].sub);
		v[n++] = tr_env_fmt(cv[i].name, cv[i].fmt, sub);
		free(sub);
	}
	for (p = tr.pass_env; p != NULL && *p != NULL &&
	    n < 64 + 9 + nneed; p++)
		if (tool_run_env_name_ok(*p) && !tr_env_has(v, n, *p) &&
		    strcmp(*p, "TMPDIR") != 0 && (val = getenv(*p)) != NULL)
			v[n++] = xasprintf("%s=%s", *p, val);
	for (i = 0; i < ctx->npass_env && i < 64; i++)
		if (tool_run_env_name_ok(ctx->pass_env[i]) &&
		    !tr_env_has(v, n, ctx->pass_env[i]) &&
		    strcmp(ctx->pass_env[i], "TMPDIR") != 0 &&
		    (val = getenv(ctx->pass_env[i])) != NULL)
			v[n++] = xasprintf("%s=%s", ctx->pass_env[i], val);
	if (stmp != NULL)
		v[n++] = xasprintf("TMPDIR=%s/tmp", stmp);
	v[n] = NULL;
	return v;
}

/*
 * True if a session id may name a folder of the temp space: 1 to 64 of
 * [A-Za-z0-9_-].
 */
static int
tr_session_ok(const char *sid)
{
	size_t	i;

	for (i = 0; sid[i] != '\0'; i++)
		if (!((sid[i] >= 'a' && sid[i] <= 'z') ||
		    (sid[i] >= 'A' && sid[i] <= 'Z') ||
		    (sid[i] >= '0' && sid[i] <= '9') || sid[i] == '_' ||
		    sid[i] == '-'))
			return 0;
	return i > 0 && i <= 64;
}

/*
 * Why the allowed root cannot have commands, or NULL: without a mount
 * namespace to hide them, gbrd's own state, config or socket folder inside
 * it would be writable by every command (new string).
 */
char *
tr_refuse_root(const char *root)
{
	size_t	i, n = strlen(root);

	if (runner_namespaces())
		return NULL;
	for (i = 0; i < tr.nown; i++)
		if (strncmp(tr.own[i], root, n) == 0 && (tr.own[i][n] == '/' ||
		    tr.own[i][n] == '\0' || (n == 1 && root[0] == '/')))
			return xasprintf("the allowed root %s holds gbrd's own "
			    "folder %s; without a mount namespace to hide it a "
			    "command could change it: use a folder that does "
			    "not hold it as the workspace", root, tr.own[i]);
	return NULL;
}

/* Makes dir (0700) unless it is there, and checks it is ours and real. */
static int
tr_private_dir(const char *dir)
{
	struct stat	st;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

/*
 * The session's temp space (new string), with its tmp/ and shm/ folders:
 * TMPDIR, and with namespaces /tmp and /dev/shm. Private to the session
 * (nothing another session's command can reach), kept across its commands
 * and removed when the session ends (tool_run_session_end) and at start.
 * A command may write inside tmp/ and shm/, never the folder that holds
 * them. NULL on failure (logged).
 */
char *
tr_session_tmp(const char *session)
{
	const char	*sid = session != NULL ? session : "-";
	char		*d, *t;

	if (tr.tmp == NULL)
		return NULL;
	if (!tr_session_ok(sid))
		return NULL;
	d = xasprintf("%s/%s", tr.tmp, sid);
	if (tr_private_dir(d) != 0)
		goto fail;
	t = xasprintf("%s/tmp", d);
	if (tr_private_dir(t) != 0) {
		free(t);
		goto fail;
	}
	free(t);
	t = xasprintf("%s/shm", d);
	if (tr_private_dir(t) != 0) {
		free(t);
		goto fail;
	}
	free(t);
	return d;
fail:
	log_warn("tool-run: %s: %s", d, strerror(errno));
	free(d);
	return NULL;
}

static unsigned	tr_rm_count;

/* One entry of the temp folder's removal. */
static int
tr_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (++tr_rm_count > TR_RMTREE_MAX)
		return 1;
	(void)remove(path);
	return 0;
}

/* Removes a folder tree, bounded (a child may have filled it). */
int
tr_rmtree(const char *path)
{
	struct stat	st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	tr_rm_count = 0;
	return nftw(path, tr_rm, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 &&
	    lstat(path, &st) != 0 ? 0 : -1;
}

/* The session's temp space goes with the session (see tool-run.h). */
void
tool_run_session_end(const char *session)
{
	char	*d;

	if (tr.tmp == NULL || session == NULL)
		return;
	if (!tr_session_ok(session))
		return;
	d = xasprintf("%s/%s", tr.tmp, session);
	if (tr_rmtree(d) != 0)
		log_warn("tool-run: %s was not removed completely", d);
	free(d);
}
