/*
 * The agent's own package caches. A command's package managers (cargo,
 * go, npm, pip, gradle, maven, ...) write their downloads and build caches
 * into a folder gbr owns for each workspace, never into the user's: a
 * command can then fetch and build, and still cannot plant anything in
 * the caches the user's own builds trust. The folder is
 * $XDG_CACHE_HOME/gbr-agent/<16 hex of the workspace's SHA-256>, or
 * ~/.cache/gbr-agent/... without XDG_CACHE_HOME (the home as
 * paths_home_dir says: %USERPROFILE% on Windows); each variable of the
 * table below points at a folder inside it.
 */
#ifndef GBRD_AGENTCACHE_H
#define GBRD_AGENTCACHE_H

#include <stddef.h>

/* One variable a command gets: NAME=fmt with %s the folder (fmt NULL: it). */
struct agentcache_var {
	const char	*name;		/* CARGO_HOME */
	const char	*sub;		/* cargo: the folder inside the cache */
	const char	*fmt;		/* NULL, or "-Dmaven.repo.local=%s" */
};

/* The table, and its length in *n. */
const struct agentcache_var	*agentcache_vars(size_t *n);

/* The folder of every workspace's cache (new string), or NULL (no home). */
char	*agentcache_base(void);
/* The cache of a workspace (new string; a real path), or NULL. */
char	*agentcache_dir(const char *workspace);
/* A folder inside a workspace's cache, "cargo/registry/src" (new string). */
char	*agentcache_path(const char *workspace, const char *sub);
/*
 * Makes the cache (mode 0700, and its missing parents) and the folders of
 * the table inside it, and checks it is a real folder of ours. Returns 0,
 * or -1 with *cause (new string).
 */
int	 agentcache_make(const char *dir, char **cause);
/* mkdir -p, mode 0700 for what it makes. Returns 0, or -1 with errno. */
int	 agentcache_mkdirs(const char *path);

#endif
