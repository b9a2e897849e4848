/*
 * What a command may read of the user's home. The choice (doc/SANDBOX.md
 * says why, against Codex and Claude Code): not the home with secrets
 * taken out, which fails open on every store a deny list forgets, but the
 * toolchains alone, added to what Landlock lets a command read:
 *
 *   - every folder on gbrd's PATH outside the system folders, with its
 *     installation root where the folder is a bin/ or shims/ one (the
 *     root of ~/.pyenv/shims is ~/.pyenv, that of
 *     ~/.nvm/versions/node/v20/bin is ~/.nvm/versions/node/v20);
 *   - the usual installation roots in the home, when they are there:
 *     ~/.pyenv, ~/.nvm, ~/.rustup, ~/.cargo/bin (never ~/.cargo, which
 *     holds the registry's credentials), ~/go, ~/.local/bin, ~/.local/lib,
 *     ~/.asdf, ~/.local/share/mise, ~/.sdkman, ~/.volta, ~/.bun, ~/.deno.
 *
 * Never the home itself or a folder above it, nor a folder that holds or
 * lies inside a secret store or one of gbrd's own folders: such a
 * candidate is left out (and logged). `[exec] toolchain_reads = off`
 * drops all of it.
 *
 * The secret stores (secrets.h) are also hidden from every command where
 * there is a mount namespace (an empty folder or /dev/null over each), so
 * that they stay out of reach without Landlock and in a workspace that
 * holds them.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gbr-exec.h"
#include "log.h"
#include "secrets.h"
#include "tool-run-int.h"
#include "xmalloc.h"

#define TR_TC_MAX	48		/* toolchain folders a command may read */

/* The usual installation roots, relative to the home. */
static const char *const tr_roots[] = {
	".pyenv", ".nvm", ".rustup", ".cargo/bin", "go", ".local/bin",
	".local/lib", ".asdf", ".local/share/mise", ".sdkman", ".volta",
	".bun", ".deno",
};

/* Folders every command reads anyway. */
static const char *const tr_sys[] = { GE_SYS_READ };

/* Why a candidate may not be read, or NULL. */
static const char *
tr_tc_refused(const char *c, const char *home)
{
	size_t	i;

	for (i = 0; i < tr.nown; i++)
		if (secrets_beneath(c, tr.own[i]) || secrets_beneath(tr.own[i], c))
			return "it holds or is inside one of gbrd's own folders";
	return home != NULL ? secrets_refuse(c, home) : NULL;
}

/* Adds a folder (a real path) to v[*n] unless refused or already read. */
static void
tr_tc_add(char **v, size_t *n, const char *path, const char *home)
{
	struct stat	 st;
	const char	*why;
	char		 p[PATH_MAX];
	size_t		 i;

	if (realpath(path, p) == NULL || stat(p, &st) != 0 ||
	    !S_ISDIR(st.st_mode))
		return;
	for (i = 0; i < sizeof tr_sys / sizeof tr_sys[0]; i++)
		if (secrets_beneath(p, tr_sys[i]))
			return;
	for (i = 0; i < *n; i++)
		if (secrets_beneath(p, v[i]))
			return;
	if ((why = tr_tc_refused(p, home)) != NULL) {
		log_info("tool-run: %s is not readable by commands: %s", p, why);
		return;
	}
	if (*n >= TR_TC_MAX)
		return;
	/* A wider folder takes the place of those inside it. */
	for (i = 0; i < *n; )
		if (secrets_beneath(v[i], p)) {
			free(v[i]);
			v[i] = v[--*n];
		} else
			i++;
	v[(*n)++] = xstrdup(p);
}

/* True if s ends with t. */
static int
tr_ends(const char *s, const char *t)
{
	size_t	n = strlen(s), m = strlen(t);

	return n >= m && strcmp(s + n - m, t) == 0;
}

/* The installation root of a PATH folder (new string): see the top. */
static char *
tr_tc_root(const char *dir, const char *home)
{
	const char	*b = strrchr(dir, '/');
	char		*up;

	if (b == NULL || (strcmp(b, "/bin") != 0 && strcmp(b, "/shims") != 0))
		return xstrdup(dir);
	up = xstrndup(dir, (size_t)(b - dir));
	/* ~/bin, ~/.local/bin, ~/.cargo/bin: the folder alone. */
	if (up[0] == '\0' || (home != NULL && secrets_beneath(home, up)) ||
	    tr_ends(up, "/.local") || tr_ends(up, "/.cargo")) {
		free(up);
		return xstrdup(dir);
	}
	return up;
}

/* Works out what commands may read of the toolchains (see the top). */
void
tr_home_setup(const struct config *cfg)
{
	char		*v[TR_TC_MAX + 1], *home, *path, *s, *tok, *save, *r;
	const char	*pe;
	size_t		 n = 0, i;

	tool_run_strv_free(tr.tc_reads);
	tr.tc_reads = NULL;
	if (!cfg->exec_toolchain_reads)
		return;
	home = secrets_home();
	if ((pe = getenv("PATH")) != NULL) {
		path = xstrdup(pe);
		for (tok = strtok_r(path, ":", &save); tok != NULL;
		    tok = strtok_r(NULL, ":", &save)) {
			if (tok[0] != '/')
				continue;
			r = tr_tc_root(tok, home);
			tr_tc_add(v, &n, r, home);
			free(r);
		}
		free(path);
	}
	for (i = 0; home != NULL && i < sizeof tr_roots / sizeof tr_roots[0];
	    i++) {
		s = xasprintf("%s/%s", home, tr_roots[i]);
		tr_tc_add(v, &n, s, home);
		free(s);
	}
	free(home);
	v[n] = NULL;
	tr.tc_reads = xcalloc(n + 1, sizeof *tr.tc_reads);
	memcpy(tr.tc_reads, v, (n + 1) * sizeof *v);
}

/* The secret stores, for the runner's -X (at start: tr.secrets). */
void
tr_home_hide(void)
{
	const char *const *v;
	char		*home, *s;
	size_t		 i, n;

	if ((home = secrets_home()) == NULL)
		return;
	v = secrets_stores(&n);
	for (i = 0; i < n; i++) {
		s = xasprintf("%s/%s", home, v[i]);
		if (tr.nsecrets < TR_HIDE_MAX)
			tr.secrets[tr.nsecrets++] = s;
		else
			free(s);
	}
	free(home);
}

/* What commands read of the toolchains, for daemon.status. */
json_t *
tr_home_json(void)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; tr.tc_reads != NULL && tr.tc_reads[i] != NULL; i++)
		json_array_append_new(a, json_string(tr.tc_reads[i]));
	return a;
}
