/*
 * Environment profiles (see env.h): loading one from a workspace (its
 * file opened under the workspace, never through a link), the checks
 * against the workspace that finish it, the built-in default, the list of
 * profiles, and their references. Parsing is in env-parse.c; what others
 * ask of a finished profile (accessors, env.show's JSON, the diff a reload
 * reports, the sandbox it makes) is in env-view.c.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "env-int.h"
#include "osdep-fs.h"
#include "pathgate.h"
#include "paths.h"
#include "secrets.h"
#include "sandbox.h"
#include "utf8.h"
#include "xmalloc.h"

/* Appends an owned copy. */
void
env_strs_add(struct env_strs *l, const char *s)
{
	l->v = xreallocarray(l->v, l->n + 1, sizeof *l->v);
	l->v[l->n++] = xstrdup(s);
}

/* Frees a list's strings. */
void
env_strs_clear(struct env_strs *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* True if two lists hold the same strings in the same order. */
int
env_strs_equal(const struct env_strs *a, const struct env_strs *b)
{
	size_t	i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return 0;
	return 1;
}

/* A list as a new JSON array. */
json_t *
env_strs_json(const struct env_strs *l)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; i < l->n; i++)
		json_array_append_new(a, json_string(l->v[i]));
	return a;
}

/* NULL-safe string equality. */
int
env_str_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* A new env with the defaults every profile starts from. */
struct env *
env_new(const char *name)
{
	struct env	*e = xcalloc(1, sizeof *e);

	e->refs = 1;
	e->name = xstrdup(name);
	e->root_given = xstrdup(".");
	e->max_fix = 3;
	e->autonomy = ENV_SUPERVISED;
	e->timeout_ms = 30000;
	e->max_output = 1024 * 1024;
	return e;
}


/* Takes a reference. */
struct env *
env_ref(struct env *e)
{
	e->refs++;
	return e;
}

/* Drops a reference; the last one frees. */
void
env_unref(struct env *e)
{
	if (e == NULL || --e->refs > 0)
		return;
	free(e->name);
	free(e->source);
	free(e->workspace);
	free(e->root_given);
	free(e->allowed_root);
	env_strs_clear(&e->ro_given);
	env_strs_clear(&e->ro);
	env_strs_clear(&e->protected);
	env_strs_clear(&e->literal);
	free(e->check);
	env_strs_clear(&e->ask);
	env_strs_clear(&e->deny);
	env_strs_clear(&e->ask_tools);
	json_decref(e->mcp);
	free(e->system);
	free(e->system_file_given);
	free(e->system_file);
	free(e->provider);
	free(e->model);
	free(e->base_url);
	env_strs_clear(&e->warnings);
	env_strs_clear(&e->files);
	env_strs_clear(&e->kb);
	free(e);
}

/* An error about a key found while finishing, with the key's line. */
static int __attribute__((format(__printf__, 4, 5)))
env_key_error(const struct env *e, enum env_key k, char **cause,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	if (e->source != NULL && e->line[k] > 0)
		*cause = xasprintf("%s:%d: %s", e->source, e->line[k], msg);
	else if (e->source != NULL)
		*cause = xasprintf("%s: %s", e->source, msg);
	else
		*cause = xstrdup(msg);
	free(msg);
	return -1;
}

/* Joins a workspace and a normal path (absolute paths are kept). */
static char *
env_join(const char *ws, const char *path)
{
	if (paths_is_absolute(path))
		return xstrdup(path);
	if (strcmp(path, ".") == 0)
		return xstrdup(ws);
	return xasprintf("%s/%s", ws, path);
}

/*
 * Opens a file of the workspace for reading. A relative path must stay
 * inside the workspace even through symlinks (openat2 RESOLVE_BENEATH, or
 * realpath then O_NOFOLLOW): a command the agent ran could otherwise point
 * .gbr_envs/x.ini or prompts/x.md at a secret and have it read into a
 * prompt. An absolute path is the human's explicit choice and is opened as
 * is. O_NONBLOCK: a FIFO put there must not block the daemon. Returns the
 * fd, or -1 with *why (new).
 */
static int
env_open(const char *ws, const char *path, char **why)
{
	char	*full, *real;
	int	 wsfd, fd, err;

	if (paths_is_absolute(path)) {
		if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY |
		    O_CLOEXEC)) == -1)
			*why = xstrdup(strerror(errno));
		return fd;
	}
	if (osdep_have_open_beneath()) {
		if ((wsfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
			*why = xstrdup(strerror(errno));
			return -1;
		}
		fd = osdep_open_beneath(wsfd, path, O_RDONLY | O_NONBLOCK |
		    O_NOCTTY | O_CLOEXEC, 0, 0);
		err = errno;
		close(wsfd);
		if (fd == -1)
			*why = xstrdup(err == EXDEV || err == ELOOP ?
			    "it leads outside the workspace" : strerror(err));
		return fd;
	}
	full = xasprintf("%s/%s", ws, path);
	real = realpath(full, NULL);
	free(full);
	if (real == NULL) {
		*why = xstrdup(strerror(errno));
		return -1;
	}
	if (!pathgate_is_under(ws, real, PATHGATE_HOST)) {
		free(real);
		*why = xstrdup("it leads outside the workspace");
		return -1;
	}
	fd = open(real, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1)
		*why = xstrdup(strerror(errno));
	free(real);
	return fd;
}

/*
 * Reads a small regular file (a profile or a system_file) from fd, which
 * it closes, into a new NUL-terminated buffer. Returns 0, or -1 with *why.
 */
static int
env_read_fd(int fd, char **data, size_t *len, char **why)
{
	struct stat	 st;
	char		*buf;
	size_t		 used = 0;
	ssize_t		 n;
	int		 err;

	*data = NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = xstrdup("not a regular file");
		close(fd);
		return -1;
	}
	if (st.st_size > ENV_FILE_MAX) {
		*why = xasprintf("larger than %d bytes", ENV_FILE_MAX);
		close(fd);
		return -1;
	}
	buf = xmalloc(ENV_FILE_MAX + 2);
	for (;;) {
		n = read(fd, buf + used, ENV_FILE_MAX + 1 - used);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
		if (used > ENV_FILE_MAX)
			break;
	}
	err = errno;
	close(fd);
	if (n == -1) {
		*why = xstrdup(strerror(err));
		free(buf);
		return -1;
	}
	if (used > ENV_FILE_MAX) {
		*why = xasprintf("larger than %d bytes", ENV_FILE_MAX);
		free(buf);
		return -1;
	}
	buf[used] = '\0';
	*data = buf;
	*len = used;
	return 0;
}

/* True if path is an existing folder. */
static int
env_is_dir(const char *path)
{
	struct stat	st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Appends item to a ", "-separated list being built (new string). */
static char *
env_cat(char *list, const char *item)
{
	char	*out;

	out = xasprintf("%s%s%s", list != NULL ? list : "",
	    list != NULL ? ", " : "", item);
	free(list);
	return out;
}

/*
 * The default system prompt: the tools, the confinement, and the local
 * knowledge (ADR-0001: look library APIs up in the read-only roots).
 */
static char *
env_default_prompt(const struct env *e)
{
	char	*ro = NULL, *prot = NULL, *kb = NULL, *eco = NULL, *rel, *out;
	size_t	 i, j;

	for (i = 0; i < e->ro.n; i++) {
		rel = pathgate_relative(e->allowed_root, e->ro.v[i], PATHGATE_HOST);
		ro = env_cat(ro, rel != NULL ? rel : e->ro.v[i]);
		free(rel);
	}
	for (i = 0; i < e->protected.n; i++)
		if (strcmp(e->protected.v[i], ".gbr_envs/**") != 0)
			prot = env_cat(prot, e->protected.v[i]);
	/* The knowledge base in the workspace that is not a root already. */
	for (i = 0; i < e->kb.n; i++) {
		for (j = 0; j < e->ro_given.n; j++)
			if (strcmp(e->ro_given.v[j], e->kb.v[i]) == 0)
				break;
		if (j == e->ro_given.n)
			kb = env_cat(kb, e->kb.v[i]);
	}
	if (e->eco_title != NULL)
		eco = xasprintf("This is a %s project.%s%s%s\n", e->eco_title,
		    kb != NULL ? " The packages it installs, with their "
		    "source code, are in the workspace under " : "",
		    kb != NULL ? kb : "",
		    kb != NULL ? " (when they exist): search there for a "
		    "library's real API before you use it." : "");
	out = xasprintf(
	    "You are a coding agent working in the folder %s. You can only "
	    "see and change files inside it: give paths relative to it; a "
	    "path that leaves it, by '..' or through a symbolic link, is "
	    "refused.\n"
	    "Your file tools: read_file {path, offset?, limit?} reads a text "
	    "file (offset and limit count lines); write_file {path, content} "
	    "creates or replaces a whole file; edit_file {path, old_string, "
	    "new_string, replace_all?} replaces an exact piece of text, which "
	    "must be unique unless replace_all is true; list_directory {path, "
	    "depth?} lists a folder; search {pattern, path?, glob?, "
	    "max_results?} finds a POSIX extended regular expression in "
	    "files.\n"
	    "Writing %s%s.gbr_envs/** (your own rules) needs a human's "
	    "approval: say why when you ask.\n"
	    "%s"
	    "%s%s%s"
	    "%s%s%s",
	    e->allowed_root,
	    prot != NULL ? prot : "", prot != NULL ? " or " : "",
	    eco != NULL ? eco : "",
	    ro != NULL ? "Read-only reference folders: " : "",
	    ro != NULL ? ro : "",
	    ro != NULL ? ". They hold the source code of the project's "
	    "dependencies, as the build tool downloaded them. Before you use "
	    "a library function, look its real API up there with search "
	    "(for example search {pattern: \"pub fn name\", path: \"the "
	    "folder\"}) instead of guessing from memory.\n" : "",
	    e->check != NULL ? "After you change code, `" : "",
	    e->check != NULL ? e->check : "",
	    e->check != NULL ? "` runs and its errors come back to you: fix "
	    "them before you say you are done.\n" : "");
	free(ro);
	free(prot);
	free(kb);
	free(eco);
	return out;
}

/* Checks an env against its workspace (see env.h). */
int
env_finish(struct env *e, const char *workspace, char **cause)
{
	const char *why_c;
	char	*ws, *path, *real, *data, *why, *rel;
	size_t	 i, len;
	int	 fd;

	*cause = NULL;
	if (e->finished) {
		*cause = xstrdup("the profile was already checked");
		return -1;
	}
	if ((ws = realpath(workspace, NULL)) == NULL) {
		*cause = xasprintf("workspace %s: %s", workspace, strerror(errno));
		return -1;
	}
	if (!env_is_dir(ws)) {
		*cause = xasprintf("workspace %s is not a folder", workspace);
		free(ws);
		return -1;
	}
	free(e->workspace);
	e->workspace = ws;

	path = env_join(ws, e->root_given);
	real = realpath(path, NULL);
	free(path);
	if (real == NULL)
		return env_key_error(e, K_ALLOWED_ROOT, cause,
		    "allowed_root '%s': %s", e->root_given, strerror(errno));
	if (!pathgate_is_under(ws, real, PATHGATE_HOST)) {
		env_key_error(e, K_ALLOWED_ROOT, cause, "allowed_root '%s' is "
		    "outside the workspace %s (it is %s)", e->root_given, ws, real);
		free(real);
		return -1;
	}
	if (!env_is_dir(real)) {
		env_key_error(e, K_ALLOWED_ROOT, cause,
		    "allowed_root '%s' is not a folder", e->root_given);
		free(real);
		return -1;
	}
	free(e->allowed_root);
	e->allowed_root = real;

	env_strs_clear(&e->ro);
	for (i = 0; i < e->ro_given.n; i++) {
		path = env_join(ws, e->ro_given.v[i]);
		real = realpath(path, NULL);
		free(path);
		if (real == NULL && errno == ENOENT) {
			/* build/packages appears with the first build: not an error. */
			why = xasprintf("read_only_roots: '%s' does not exist (yet); "
			    "skipped until the profile is reloaded", e->ro_given.v[i]);
			env_strs_add(&e->warnings, why);
			free(why);
			continue;
		}
		if (real == NULL || !env_is_dir(real)) {
			free(real);
			return env_key_error(e, K_RO_ROOTS, cause,
			    "read_only_roots: '%s' is not a folder", e->ro_given.v[i]);
		}
		if ((why_c = secrets_refuse(real, NULL)) != NULL) {
			env_key_error(e, K_RO_ROOTS, cause, "read_only_roots: "
			    "'%s' (%s): %s, and a profile cannot open the "
			    "home's secrets to the agent", e->ro_given.v[i],
			    real, why_c);
			free(real);
			return -1;
		}
		env_strs_add(&e->ro, real);
		free(real);
	}

	if (e->system_file_given != NULL) {
		path = env_join(ws, e->system_file_given);
		real = realpath(path, NULL);
		free(path);
		if (real == NULL)
			return env_key_error(e, K_SYSTEM_FILE, cause,
			    "system_file '%s': %s", e->system_file_given,
			    strerror(errno));
		if ((fd = env_open(ws, e->system_file_given, &why)) == -1 ||
		    env_read_fd(fd, &data, &len, &why) != 0) {
			env_key_error(e, K_SYSTEM_FILE, cause, "system_file '%s': %s",
			    e->system_file_given, why);
			free(why);
			free(real);
			return -1;
		}
		if (strlen(data) != len) {
			free(data);
			free(real);
			return env_key_error(e, K_SYSTEM_FILE, cause,
			    "system_file '%s' holds a NUL byte", e->system_file_given);
		}
		for (i = 0; i < len; ) {
			uint32_t cp;
			size_t n = utf8_decode((const unsigned char *)data + i,
			    len - i, &cp);

			if (n == 0) {
				free(data);
				free(real);
				return env_key_error(e, K_SYSTEM_FILE, cause,
				    "system_file '%s' is not valid UTF-8",
				    e->system_file_given);
			}
			i += n;
		}
		free(e->system);
		e->system = data;
		free(e->system_file);
		e->system_file = real;
		/*
		 * The agent must not rewrite its own prompt: protect the file,
		 * by its exact canonical path. As a pattern, a name such as
		 * "prompts/[x].md" or "p*.md" would match other names (or
		 * none) and leave the file itself writable. A plain name is
		 * also kept among the patterns, where the runner's read-only
		 * binds for children look for literal names.
		 */
		if ((rel = pathgate_relative(e->allowed_root, real,
		    PATHGATE_HOST)) != NULL && strcmp(rel, ".") != 0) {
			env_strs_add(&e->literal, rel);
			if (strpbrk(rel, "*?[\\") == NULL)
				env_strs_add(&e->protected, rel);
		}
		free(rel);
	}
	if (e->system == NULL)
		e->system = env_default_prompt(e);

	env_strs_clear(&e->files);
	if (e->source != NULL)
		env_strs_add(&e->files, e->source);
	if (e->system_file != NULL)
		env_strs_add(&e->files, e->system_file);
	e->finished = 1;
	return 0;
}

/* True if name may name a profile. */
int
env_name_valid(const char *name)
{
	size_t	i, len;

	if (name == NULL || (len = strlen(name)) == 0 || len > ENV_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '.' || c == '_' || c == '-'))
			continue;
		return 0;
	}
	return strstr(name, "..") == NULL;
}

/* The built-in default: the profile of a workspace without one (env.h). */
struct env *
env_builtin(const char *workspace, char **cause)
{
	static const char *const prot[] = {
		"gleam.toml", "manifest.toml", ".gbr_envs/**", ".git/**"
	};
	/*
	 * .git is protected, so it is read-only for commands: git's writing
	 * commands ask a human, and once approved may write it for that run
	 * (tool-run-locks.c, tr_lockset). Its reading ones (status, diff, log,
	 * show, blame, grep) run as they are.
	 */
	static const char *const git_ask[] = {
		"git add *", "git am *", "git apply *", "git checkout *",
		"git cherry-pick *", "git clean *", "git commit *",
		"git config *", "git fetch *", "git gc *", "git init *",
		"git merge *", "git mv *", "git notes *", "git pull *",
		"git push *", "git rebase *", "git reset *", "git restore *",
		"git revert *", "git rm *", "git stash *", "git submodule *",
		"git switch *", "git worktree *",
	};
	struct env	*e = env_new("default");
	char		*ws;
	size_t		 i;

	*cause = NULL;
	e->builtin = 1;
	for (i = 0; i < sizeof prot / sizeof prot[0]; i++)
		env_strs_add(&e->protected, prot[i]);
	for (i = 0; i < sizeof git_ask / sizeof git_ask[0]; i++)
		env_strs_add(&e->ask, git_ask[i]);
	if ((ws = realpath(workspace, NULL)) != NULL) {
		env_eco_apply(e, ws);
		free(ws);
	}
	if (env_finish(e, workspace, cause) != 0) {
		env_unref(e);
		return NULL;
	}
	env_eco_watch(e);
	return e;
}

/* Adds to l each item of more it does not hold yet. */
static void
env_strs_union(struct env_strs *l, const struct env_strs *more)
{
	size_t	i, j;

	for (i = 0; i < more->n; i++) {
		for (j = 0; j < l->n && strcmp(l->v[j], more->v[i]) != 0; j++)
			;
		if (j == l->n)
			env_strs_add(l, more->v[i]);
	}
}

/*
 * extends = builtin: what the file does not say comes from the built-in
 * default of the workspace; protected files and the commands that ask
 * add to the default's, never take any away.
 */
static int
env_inherit(struct env *e, const char *workspace, char **cause)
{
	struct env	*b;
	size_t		 i;

	if ((b = env_builtin(workspace, cause)) == NULL)
		return -1;
	if (!(e->set & (1u << K_RO_ROOTS)))
		for (i = 0; i < b->ro_given.n; i++)
			env_strs_add(&e->ro_given, b->ro_given.v[i]);
	if (!(e->set & (1u << K_CHECK)) && b->check != NULL)
		e->check = xstrdup(b->check);
	env_strs_union(&e->protected, &b->protected);
	env_strs_union(&e->ask, &b->ask);
	e->eco = b->eco;
	e->eco_title = b->eco_title;
	for (i = 0; i < b->kb.n; i++)
		env_strs_add(&e->kb, b->kb.v[i]);
	for (i = 0; i < b->warnings.n; i++)
		env_strs_add(&e->warnings, b->warnings.v[i]);
	env_unref(b);
	return 0;
}

/* Loads a profile or the built-in default (see env.h). */
int
env_load(const char *workspace, const char *name, struct env **out,
    char **cause)
{
	struct env	*e;
	char		*ws, *ini, *json, *path, *data, *why, *rel;
	size_t		 len;
	int		 have_ini, have_json, fd;

	*out = NULL;
	*cause = NULL;
	if (name == NULL)
		name = "default";
	if (!env_name_valid(name)) {
		*cause = xasprintf("'%s' is not a profile name (letters, digits, "
		    ". _ -, at most %d)", name, ENV_NAME_MAX);
		return -1;
	}
	if ((ws = realpath(workspace, NULL)) == NULL) {
		*cause = xasprintf("workspace %s: %s", workspace, strerror(errno));
		return -1;
	}
	ini = xasprintf("%s/%s/%s.ini", ws, ENV_DIR, name);
	json = xasprintf("%s/%s/%s.json", ws, ENV_DIR, name);
	have_ini = access(ini, F_OK) == 0;
	have_json = access(json, F_OK) == 0;
	if (have_ini && have_json) {
		free(ws);
		*cause = xasprintf("both %s and %s exist: keep one", ini, json);
		free(ini);
		free(json);
		return -1;
	}
	if (!have_ini && !have_json) {
		free(ws);
		free(ini);
		free(json);
		if (strcmp(name, "default") == 0)
			return (*out = env_builtin(workspace, cause)) == NULL ? -1 : 0;
		*cause = xasprintf("no profile '%s' in %s/%s", name, workspace,
		    ENV_DIR);
		return -1;
	}
	path = have_ini ? ini : json;
	rel = xasprintf("%s/%s.%s", ENV_DIR, name, have_ini ? "ini" : "json");
	fd = env_open(ws, rel, &why);
	free(rel);
	free(ws);
	if (fd == -1 || env_read_fd(fd, &data, &len, &why) != 0) {
		*cause = xasprintf("%s: %s", path, why);
		free(why);
		free(ini);
		free(json);
		return -1;
	}
	e = env_parse(name, path, data, len, have_ini ? ENV_INI : ENV_JSON, cause);
	free(data);
	if (e != NULL && e->extends && env_inherit(e, workspace, cause) != 0) {
		env_unref(e);
		e = NULL;
	}
	if (e != NULL) {
		e->source = xstrdup(path);
		if (env_finish(e, workspace, cause) != 0) {
			env_unref(e);
			e = NULL;
		} else if (e->extends)
			env_eco_watch(e);
	}
	free(ini);
	free(json);
	if (e == NULL)
		return -1;
	*out = e;
	return 0;
}

/* Orders profile list entries by name. */
static int
env_list_cmp(const void *a, const void *b)
{
	const char	*na = json_string_value(json_object_get(*(json_t *const *)a, "name"));
	const char	*nb = json_string_value(json_object_get(*(json_t *const *)b, "name"));
	int		 r = strcmp(na, nb);

	if (r != 0)
		return r;
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a,
	    "format")), json_string_value(json_object_get(*(json_t *const *)b,
	    "format")));
}

/* Lists the profiles of a workspace (see env.h). */
json_t *
env_list(const char *workspace, char **cause)
{
	DIR		*d;
	struct dirent	*de;
	json_t		**items = NULL, *out;
	size_t		 n = 0, i, len;
	char		*dir, *name;
	const char	*fmt;
	int		 have_default = 0;

	*cause = NULL;
	dir = xasprintf("%s/%s", workspace, ENV_DIR);
	if ((d = opendir(dir)) == NULL && errno != ENOENT) {
		*cause = xasprintf("%s: %s", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	while (d != NULL && (de = readdir(d)) != NULL && n < 1024) {
		len = strlen(de->d_name);
		if (len > 4 && strcmp(de->d_name + len - 4, ".ini") == 0)
			fmt = "ini";
		else if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0)
			fmt = "json";
		else
			continue;
		name = xstrndup(de->d_name, len - strlen(fmt) - 1);
		if (env_name_valid(name)) {
			char *file = xasprintf("%s/%s", dir, de->d_name);

			items = xreallocarray(items, n + 1, sizeof *items);
			items[n++] = json_pack("{s:s, s:s, s:s, s:b}", "name", name,
			    "file", file, "format", fmt, "builtin", 0);
			free(file);
			if (strcmp(name, "default") == 0)
				have_default = 1;
		}
		free(name);
	}
	if (d != NULL)
		closedir(d);
	free(dir);
	if (n > 0)
		qsort(items, n, sizeof *items, env_list_cmp);
	out = json_array();
	if (!have_default)
		json_array_append_new(out, json_pack("{s:s, s:n, s:n, s:b}",
		    "name", "default", "file", "format", "builtin", 1));
	for (i = 0; i < n; i++)
		json_array_append_new(out, items[i]);
	free(items);
	return out;
}
