/*
 * The agent's package caches (see agentcache.h). The table is the one
 * place that says which package manager keeps what where; tool-run gives
 * the variables to every command and makes the folder writable for it,
 * and the built-in environment (env.c) reads dependency sources from it.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentcache.h"
#include "paths.h"
#include "sha256.h"
#include "xmalloc.h"

#define AC_HASH_HEX	16	/* hex digits of the workspace's digest */

static const struct agentcache_var ac_vars[] = {
	{ "XDG_CACHE_HOME",	"xdg",		NULL },
	{ "CARGO_HOME",		"cargo",	NULL },
	{ "GOPATH",		"go/path",	NULL },
	{ "GOMODCACHE",		"go/mod",	NULL },
	{ "GOCACHE",		"go/build",	NULL },
	{ "npm_config_cache",	"npm",		NULL },
	{ "YARN_CACHE_FOLDER",	"yarn",		NULL },
	{ "PIP_CACHE_DIR",	"pip",		NULL },
	{ "GRADLE_USER_HOME",	"gradle",	NULL },
	{ "MAVEN_OPTS",		"maven",	"-Dmaven.repo.local=%s" },
	{ "DENO_DIR",		"deno",		NULL },
	{ "BUN_INSTALL_CACHE_DIR", "bun",	NULL },
};

/* The table (see agentcache.h). */
const struct agentcache_var *
agentcache_vars(size_t *n)
{
	*n = sizeof ac_vars / sizeof ac_vars[0];
	return ac_vars;
}

/* An absolute, non-empty variable, or NULL. */
static const char *
ac_env_abs(const char *name)
{
	const char	*v = getenv(name);

	return v != NULL && paths_is_absolute(v) ? v : NULL;
}

/* The folder of every workspace's cache (see agentcache.h). */
char *
agentcache_base(void)
{
	const char	*v;

	char		*home, *base = NULL;

	if ((v = ac_env_abs("XDG_CACHE_HOME")) != NULL)
		return xasprintf("%s/gbr-agent", v);
	/* A home that is a root ("/") is none: nothing may be made there. */
	if ((home = paths_home_dir()) != NULL &&
	    strlen(home) > paths_root_len(home))
		base = xasprintf("%s/.cache/gbr-agent", home);
	free(home);
	return base;
}

/* The cache of a workspace (see agentcache.h). */
char *
agentcache_dir(const char *workspace)
{
	unsigned char	d[SHA256_LEN];
	char		hex[SHA256_HEX], real[PATH_MAX], *base, *dir;
	const char	*w = workspace;

	if (workspace == NULL || !paths_is_absolute(workspace))
		return NULL;
	if (realpath(workspace, real) != NULL)
		w = real;
	if ((base = agentcache_base()) == NULL)
		return NULL;
	sha256_buf(w, strlen(w), d);
	sha256_hex(d, hex);
	hex[AC_HASH_HEX] = '\0';
	dir = xasprintf("%s/%s", base, hex);
	free(base);
	return dir;
}

/* A folder inside a workspace's cache (see agentcache.h). */
char *
agentcache_path(const char *workspace, const char *sub)
{
	char	*dir, *p;

	if ((dir = agentcache_dir(workspace)) == NULL)
		return NULL;
	p = xasprintf("%s/%s", dir, sub);
	free(dir);
	return p;
}

/* mkdir -p with mode 0700 for what it makes (see agentcache.h). */
int
agentcache_mkdirs(const char *path)
{
	char	buf[PATH_MAX], *s;

	if (strlen(path) >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, strlen(path) + 1);
	/* Past the root ("/", "C:/"), which is never made. */
	for (s = buf + (paths_root_len(buf) > 0 ? paths_root_len(buf) : 1);
	    *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* Makes the cache and the table's folders (see agentcache.h). */
int
agentcache_make(const char *dir, char **cause)
{
	struct stat	st;
	char		*p;
	size_t		i;

	*cause = NULL;
	if (agentcache_mkdirs(dir) != 0) {
		*cause = xasprintf("%s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid()) {
		*cause = xasprintf("%s is not a folder of ours (a symlink, a "
		    "file or another user's folder is in the way)", dir);
		return -1;
	}
	if ((st.st_mode & 077) != 0 && chmod(dir, 0700) != 0) {
		*cause = xasprintf("%s: %s", dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < sizeof ac_vars / sizeof ac_vars[0]; i++) {
		p = xasprintf("%s/%s", dir, ac_vars[i].sub);
		if (agentcache_mkdirs(p) != 0) {
			*cause = xasprintf("%s: %s", p, strerror(errno));
			free(p);
			return -1;
		}
		free(p);
	}
	return 0;
}
