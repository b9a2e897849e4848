/*
 * What a command may not write, and the check after (see "What a command
 * can write" in doc/PROTOCOL.md): the read-only binds of one call (its
 * lock set: .gbr_envs, the read-only roots inside the allowed root, and
 * unless a human approved the command the protected files, .git/hooks and
 * .git/config), and the groups of commands running in one allowed root,
 * whose last one to end has what they changed in those paths put back
 * (lockaudit.h). A crash's unfinished checks are done at the next start.
 */
#include "gbr-config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "env.h"
#include "lockaudit.h"
#include "agentcache.h"
#include "log.h"
#include "pathgate.h"
#include "runhold.h"
#include "runner.h"
#include "sandbox.h"
#include "tool-run-int.h"
#include "xmalloc.h"

#define TR_GLOB_WALK	20000		/* entries a protected glob's walk reads */

/*
 * The commands running in one allowed root, and the check after the last
 * of them (lockaudit.h): started by the first, ended by the last, so one
 * command's changes are never taken for another's starting state.
 */
struct tr_group {
	TAILQ_ENTRY(tr_group)	 entry;
	char			*root;
	char			*workspace;
	struct lockaudit	*la;
	unsigned		 active;
	int			 exempt;	/* an approved command ran */
};
TAILQ_HEAD(tr_group_list, tr_group);
static struct tr_group_list	tr_groups = TAILQ_HEAD_INITIALIZER(tr_groups);

/* Adds root/rel (or root itself for rel NULL) unless it is there already. */
static void
tr_lock_add(struct tr_locks *l, const char *root, const char *rel)
{
	char	*p;
	size_t	 i;

	p = rel == NULL ? xstrdup(root) : xasprintf("%s/%s", root, rel);
	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i], p) == 0) {
			free(p);
			return;
		}
	if (l->n >= TR_RO_MAX) {
		l->full = 1;
		free(p);
		return;
	}
	l->v[l->n++] = p;
}

/* Frees the list. */
void
tr_locks_free(struct tr_locks *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

/*
 * What of a protected pattern can be bound read-only: a literal name is
 * itself; "DIR/" followed by "**" or "*" is DIR (all of it, or all it holds
 * at its top, which binding DIR covers); anything else (a wildcard in a folder
 * name, "*.toml" at the top) has no one path, and is left to the check
 * after the run (NULL). Returns a new string.
 */
static char *
tr_pattern_lock(const char *pat)
{
	const char	*w, *slash;
	size_t		 n;

	if (pat[0] == '/' || pat[0] == '\0' || strstr(pat, "..") != NULL)
		return NULL;
	if ((w = strpbrk(pat, "*?[\\")) == NULL)
		return xstrdup(pat);
	/* The wildcard must be the whole last component, after a literal folder. */
	if ((slash = strrchr(pat, '/')) == NULL || w != slash + 1)
		return NULL;
	if (strcmp(slash + 1, "**") != 0 && strcmp(slash + 1, "*") != 0)
		return NULL;
	n = (size_t)(slash - pat);
	if (n == 0 || memchr(pat, '*', n) != NULL || memchr(pat, '?', n) != NULL ||
	    memchr(pat, '[', n) != NULL || memchr(pat, '\\', n) != NULL)
		return NULL;
	return xstrndup(pat, n);
}

/*
 * A protected pattern with no one folder to bind ("*.toml", "**" and a
 * name): what it matches now, found by a bounded walk of the root that
 * follows no link (TR_GLOB_WALK entries), each locked like a literal
 * name. A match a command creates anew is not caught by this; only the
 * check after the run and the file tools' own policy see those.
 */
static void
tr_glob_locks(const char *root, const char *pat, struct tr_locks *l)
{
	struct {
		char	*rel;
		int	 depth;
	}		 stack[64];
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		*dir, *rel, *full;
	unsigned	 seen = 0;
	int		 n = 0, depth;

	stack[n].rel = xstrdup("");
	stack[n++].depth = 0;
	while (n > 0 && !l->full) {
		n--;
		rel = stack[n].rel;
		depth = stack[n].depth;
		dir = rel[0] == '\0' ? xstrdup(root) :
		    xasprintf("%s/%s", root, rel);
		if ((d = opendir(dir)) != NULL) {
			while ((de = readdir(d)) != NULL &&
			    seen++ < TR_GLOB_WALK) {
				if (strcmp(de->d_name, ".") == 0 ||
				    strcmp(de->d_name, "..") == 0)
					continue;
				full = rel[0] == '\0' ? xstrdup(de->d_name) :
				    xasprintf("%s/%s", rel, de->d_name);
				if (pathgate_glob_match(pat, full,
				    PATHGATE_GLOB_CASEFOLD))
					tr_lock_add(l, root, full);
				else if (depth < 32 && n < 64 &&
				    fstatat(dirfd(d), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) == 0 &&
				    S_ISDIR(st.st_mode)) {
					stack[n].rel = full;
					stack[n++].depth = depth + 1;
					continue;
				}
				free(full);
			}
			closedir(d);
		}
		free(dir);
		free(rel);
	}
	while (n > 0)
		free(stack[--n].rel);
}

/* inih callback: core.hooksPath of a .git/config. */
static int
tr_git_config_cb(void *arg, const char *section, const char *name,
    const char *value)
{
	char	**out = arg;

	if (strcasecmp(section, "core") == 0 && strcasecmp(name, "hooksPath") == 0
	    && value != NULL) {
		free(*out);
		*out = xstrdup(value);
	}
	return 1;
}

/*
 * The read-only binds of a call (see "What a command can write" in
 * doc/PROTOCOL.md): everything that decides the sandbox or that a human
 * must approve, inside the writable root. Always: the workspace's
 * .gbr_envs (and the root's, where they differ) and the read-only roots
 * inside the root. Unless a human approved this very command: .git/hooks,
 * .git/config, a core.hooksPath inside the root, the protected
 * files, their folders (a pattern DIR/ and "**"), the system_file, and
 * all of .git where the profile protects it so. Bounded by TR_RO_MAX;
 * l->full says one
 * did not fit (then nothing runs: a bind is never silently dropped).
 */
void
tr_lockset(const struct tool_run_ctx *ctx, const char *root,
    struct tr_locks *l)
{
	const char *const	*pats;
	const char		*ws = env_workspace(ctx->env), *sf;
	char			*p, *hooks = NULL;
	size_t			 i, n;
	FILE			*f;

	tr_lock_add(l, root, ENV_DIR);
	if (strcmp(ws, root) != 0)
		tr_lock_add(l, ws, ENV_DIR);
	for (i = 1; i < (size_t)sandbox_nroots(ctx->sandbox); i++)
		if (sandbox_root_inside(ctx->sandbox, (int)i) != NULL)
			tr_lock_add(l, sandbox_root_path(ctx->sandbox, (int)i),
			    NULL);
	l->nalways = l->n;
	if (ctx->approved)
		return;
	tr_lock_add(l, root, ".git/hooks");
	tr_lock_add(l, root, ".git/config");
	p = xasprintf("%s/.git/config", root);
	if ((f = fopen(p, "re")) != NULL) {
		(void)ini_parse_file(f, tr_git_config_cb, &hooks);
		fclose(f);
	}
	free(p);
	if (hooks != NULL && hooks[0] != '\0' && strstr(hooks, "..") == NULL) {
		/* Relative to the work tree, or absolute: lock it if inside. */
		if (hooks[0] == '/') {
			if (strncmp(hooks, root, strlen(root)) == 0 &&
			    hooks[strlen(root)] == '/')
				tr_lock_add(l, hooks, NULL);
		} else
			tr_lock_add(l, root, hooks);
	}
	free(hooks);
	n = env_protected(ctx->env, &pats);
	for (i = 0; i < n; i++) {
		if ((p = tr_pattern_lock(pats[i])) == NULL) {
			tr_glob_locks(root, pats[i], l);
			continue;
		}
		tr_lock_add(l, root, p);
		free(p);
	}
	if ((sf = env_system_file(ctx->env)) != NULL && sf[0] == '/' &&
	    strncmp(sf, root, strlen(root)) == 0 && sf[strlen(root)] == '/')
		tr_lock_add(l, sf, NULL);
}

/* A short stable name for a path (FNV-1a, hex). */
void
tr_hash(const char *s, char *out, size_t outsz)
{
	uint64_t	h = 1469598103934665603ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	snprintf(out, outsz, "%016llx", (unsigned long long)h);
}

/*
 * A command of root starts: the first one records the locked paths as
 * they are (lockaudit_add); one joining later adds what its own lock set
 * has that is not recorded yet. With a mount namespace an existing path
 * is bound read-only and cannot change: only what does not exist yet (or
 * is a link, which no bind covers) is recorded. Returns the group.
 */
struct tr_group *
tr_group_enter(const char *root, const char *workspace,
    const struct tr_locks *l, int approved)
{
	struct tr_group	*g;
	struct stat	 st;
	char		*file = NULL, *cause, h[32];
	size_t		 i;
	int		 ns = runner_namespaces();

	TAILQ_FOREACH(g, &tr_groups, entry)
		if (strcmp(g->root, root) == 0)
			break;
	if (g == NULL) {
		g = xcalloc(1, sizeof *g);
		g->root = xstrdup(root);
		g->workspace = xstrdup(workspace);
		if (tr.audit_dir != NULL) {
			tr_hash(root, h, sizeof h);
			file = xasprintf("%s/%s.json", tr.audit_dir, h);
		}
		if ((g->la = lockaudit_create(root, file, &cause)) == NULL) {
			log_warn("tool-run: %s", cause);
			free(cause);
		}
		free(file);
		TAILQ_INSERT_TAIL(&tr_groups, g, entry);
		tr.audits++;
	}
	for (i = 0; g->la != NULL && i < l->n; i++) {
		if (ns && lstat(l->v[i], &st) == 0 && !S_ISLNK(st.st_mode))
			continue;
		lockaudit_add(g->la, l->v[i], i < l->nalways, 1);
	}
	if (g->la != NULL)
		(void)lockaudit_save(g->la);
	if (approved)
		g->exempt = 1;
	g->active++;
	runhold_enter(g->workspace);
	return g;
}

/*
 * A command of the group has ended; after the last, the check: what the
 * commands changed is put back. Returns the changes (new array) or NULL.
 */
json_t *
tr_group_leave(struct tr_group *g)
{
	json_t		*ch = NULL, *c;
	char		*ws;
	size_t		 i;

	if (g == NULL || g->active == 0)
		return NULL;
	if (--g->active > 0) {
		/* One of several: the hold stays (the others still count). */
		runhold_leave(g->workspace);
		return NULL;
	}
	TAILQ_REMOVE(&tr_groups, g, entry);
	if (g->la != NULL) {
		ch = lockaudit_finish(g->la, g->exempt);
		lockaudit_free(g->la);
	}
	json_array_foreach(ch, i, c) {
		log_warn("tool-run: a command %s %s: %s%s%s",
		    json_string_value(json_object_get(c, "change")),
		    json_string_value(json_object_get(c, "path")),
		    json_is_true(json_object_get(c, "restored")) ?
		    "put back as it was" : "NOT put back",
		    json_object_get(c, "why") != NULL ? " - " : "",
		    json_object_get(c, "why") != NULL ? json_string_value(
		    json_object_get(c, "why")) : "");
		if (json_is_true(json_object_get(c, "restored")))
			tr.restored++;
	}
	if (ch != NULL && json_array_size(ch) == 0) {
		json_decref(ch);
		ch = NULL;
	}
	/* After the check: the reload sees what is there now. */
	ws = g->workspace;
	free(g->root);
	free(g);
	runhold_leave(ws);
	free(ws);
	return ch;
}

/* Every child is gone: the checks of the commands that were running. */
void
tr_groups_end(void)
{
	struct tr_group	*g;

	while ((g = TAILQ_FIRST(&tr_groups)) != NULL) {
		g->active = 1;
		json_decref(tr_group_leave(g));
	}
	runhold_clear();
}

/* Workspaces with commands running now. */
size_t
tr_groups_count(void)
{
	struct tr_group	*g;
	size_t		 n = 0;

	TAILQ_FOREACH(g, &tr_groups, entry)
		n++;
	return n;
}

/* True if a command runs now whose workspace's agent cache is dir. */
int
tr_group_busy(const char *dir)
{
	struct tr_group	*g;
	char		*d;
	int		 same;

	TAILQ_FOREACH(g, &tr_groups, entry) {
		if (g->workspace == NULL ||
		    (d = agentcache_dir(g->workspace)) == NULL)
			continue;
		same = strcmp(d, dir) == 0;
		free(d);
		if (same)
			return 1;
	}
	return 0;
}

/*
 * At start: the checks a gbrd that died while commands ran did not do
 * (lockaudit_recover), before any profile is loaded; and the folder for
 * this run's records.
 */
void
tr_audit_recover(const char *state_dir)
{
	json_t	*ch, *c;
	size_t	 i;

	tr.audit_dir = xasprintf("%s/audit", state_dir);
	if (mkdir(tr.audit_dir, 0700) != 0 && errno != EEXIST) {
		log_warn("tool-run: %s: %s; a crash during a command would leave "
		    "its changes to protected paths in place", tr.audit_dir,
		    strerror(errno));
		free(tr.audit_dir);
		tr.audit_dir = NULL;
		return;
	}
	ch = lockaudit_recover(tr.audit_dir);
	json_array_foreach(ch, i, c) {
		log_warn("tool-run: a command that was running when gbrd stopped "
		    "%s %s: %s", json_string_value(json_object_get(c, "change")),
		    json_string_value(json_object_get(c, "path")),
		    json_is_true(json_object_get(c, "restored")) ?
		    "put back as it was" : "NOT put back");
		if (json_is_true(json_object_get(c, "restored")))
			tr.restored++;
	}
	json_decref(ch);
}

/*
 * Adds what a child of ctx reads but never writes to ro (nro used, at
 * most TR_RO_MAX): the roots outside the workspace, [exec] read_paths,
 * the toolchains' folders. Returns the new count; TR_RO_MAX means one
 * did not fit (then nothing runs).
 */
size_t
tr_ro_paths(const struct tool_run_ctx *ctx, const char **ro, size_t nro)
{
	size_t	 i;

	for (i = 1; i < (size_t)sandbox_nroots(ctx->sandbox); i++)
		if (sandbox_root_inside(ctx->sandbox, (int)i) == NULL &&
		    nro < TR_RO_MAX)
			ro[nro++] = sandbox_root_path(ctx->sandbox, (int)i);
	for (i = 0; tr.read_paths != NULL && tr.read_paths[i] != NULL &&
	    nro < TR_RO_MAX; i++)
		ro[nro++] = tr.read_paths[i];
	for (i = 0; tr.tc_reads != NULL && tr.tc_reads[i] != NULL &&
	    nro < TR_RO_MAX; i++)
		ro[nro++] = tr.tc_reads[i];
	return nro;
}
