/*
 * Unit tests for the built-in default's ecosystems (env-eco.c): each is
 * chosen by its files in a real temporary workspace, gets its check, the
 * commands that ask, its knowledge base (read-only roots in the agent's
 * cache, made; folders in the workspace, named in the prompt) and shows
 * in env_to_json; the first match wins; `extends = builtin` keeps every
 * default but the keys the file gives; and no profile makes a secret
 * store of the home, or a folder that holds one, a read-only root.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agentcache.h"
#include "env.h"
#include "pathgate.h"
#include "paths.h"
#include "unit.h"
#include "xmalloc.h"

static char	ws[256], cache[256];

/* Removes one entry (nftw). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path) == 0 ? 0 : 0;
}

/* A fresh, empty workspace in ws. */
static void
fresh(void)
{
	if (ws[0] != '\0')
		nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	unit_tmpdir(ws, sizeof ws, "eco");
}

/* Writes ws/rel, making its folders. */
static void
put(const char *rel, const char *text)
{
	char	 path[PATH_MAX + 64], *s;
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	for (s = path + strlen(ws) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		(void)mkdir(path, 0755);
		*s = '/';
	}
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF ||
	    fclose(f) != 0) {
		fprintf(stderr, "put %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* The default of ws (checked to load), or NULL. */
static struct env *
load(void)
{
	struct env	*e = NULL;
	char		*cause = NULL;

	if (env_load(ws, NULL, &e, &cause) != 0) {
		printf("# load: %s\n", cause);
		free(cause);
		return NULL;
	}
	return e;
}

/* The ecosystem env_to_json shows ("" for none). */
static const char *
eco_of(const struct env *e)
{
	static char	 buf[32];
	json_t		*j = env_to_json(e);
	const char	*s = json_string_value(json_object_get(j, "ecosystem"));

	snprintf(buf, sizeof buf, "%s", s != NULL ? s : "");
	json_decref(j);
	return buf;
}

/* True if e's check is want (NULL: none). */
static int
check_is(const struct env *e, const char *want)
{
	const char	*c = env_check_command(e);

	if (want == NULL || c == NULL) {
		if (c != want)
			printf("# check [%s], want [%s]\n", c ? c : "(none)",
			    want ? want : "(none)");
		return c == want;
	}
	return unit_same(c, want);
}

/* True if the list v[0..n) holds s. */
static int
has(const char *const *v, size_t n, const char *s)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

/* One case: the files, then the ecosystem and check expected. */
static void
one(const char *what, const char *eco, const char *check)
{
	struct env	*e = load();

	CHECK(e != NULL && unit_same(eco_of(e), eco) && check_is(e, check),
	    "%s: %s, check %s", what, eco[0] ? eco : "no ecosystem",
	    check ? check : "none");
	env_unref(e);
}

/* The read-only root in the agent's cache: made, and a root. */
static void
cache_root(const char *sub, const char *what)
{
	const char *const *v;
	struct env	*e = load();
	struct stat	 st;
	char		*want = agentcache_path(ws, sub);
	size_t		 n = e != NULL ? env_ro_roots(e, &v) : 0;

	CHECK(e != NULL && want != NULL && strncmp(want, cache,
	    strlen(cache)) == 0 && has(v, n, want) && stat(want, &st) == 0 &&
	    S_ISDIR(st.st_mode), "%s: %s is a read-only root, made", what,
	    want != NULL ? want : "(none)");
	CHECK(e != NULL && strstr(env_system_prompt(e), want) != NULL &&
	    strstr(env_system_prompt(e), "look its real API up") != NULL,
	    "%s: the prompt sends the model there", what);
	free(want);
	env_unref(e);
}

static void
check_ecosystems(void)
{
	const char *const *v;
	struct env	*e;
	size_t		 n;

	fresh();
	one("an empty folder", "", NULL);

	fresh();
	put("gleam.toml", "name = \"app\"\n");
	put("build/packages/gleam_stdlib/gleam.toml", "name = \"x\"\n");
	one("gleam.toml", "gleam", "gleam check");
	e = load();
	n = e != NULL ? env_ro_roots(e, &v) : 0;
	CHECK(n == 1 && strstr(v[0], "/build/packages") != NULL,
	    "gleam: build/packages is the read-only root, as the seeds say");
	env_unref(e);

	fresh();
	put("Cargo.toml", "[package]\nname = \"app\"\n");
	put("Makefile", "all:\n");
	one("Cargo.toml (and a Makefile: the first match wins)", "rust",
	    "cargo check");
	cache_root("cargo/registry/src", "rust");
	e = load();
	n = e != NULL ? env_ask_commands(e, &v) : 0;
	CHECK(has(v, n, "cargo add *") && has(v, n, "git commit *"),
	    "rust: cargo add asks, and git's writing commands still do");
	CHECK(e != NULL && strstr(env_system_prompt(e), "Rust project") !=
	    NULL && strstr(env_system_prompt(e), "vendor") != NULL &&
	    strstr(env_system_prompt(e), "cargo check") != NULL,
	    "rust: the prompt names the ecosystem, vendor and the check");
	env_unref(e);

	fresh();
	put("go.mod", "module example.com/app\n\ngo 1.19\n");
	one("go.mod", "go", "go vet ./...");
	cache_root("go/mod", "go");

	fresh();
	put("pyproject.toml", "[project]\nname = \"app\"\n");
	one("pyproject.toml, no tests", "python",
	    "python3 -m compileall -q -x '/[.]|node_modules' .");
	put("tests/test_app.py", "def test_x():\n    pass\n");
	one("pyproject.toml with tests/", "python", "python3 -m pytest -q");
	put(".venv/bin/python", "");
	one("a .venv with its python", "python", ".venv/bin/python -m pytest -q");
	put("pyproject.toml", "[project]\nname = \"app\"\n\n[tool.mypy]\n"
	    "strict = true\n");
	one("[tool.mypy]", "python", ".venv/bin/python -m mypy --no-incremental .");
	put("pyproject.toml", "[project]\nname = \"app\"\n[tool.mypy]\n"
	    "[tool.ruff.lint]\nselect = [\"E\"]\n");
	one("[tool.ruff.lint] (ruff over mypy)", "python",
	    ".venv/bin/python -m ruff check .");
	e = load();
	CHECK(e != NULL && strstr(env_system_prompt(e), ".venv") != NULL &&
	    strstr(env_system_prompt(e), "Python project") != NULL,
	    "python: the prompt names .venv as the knowledge base");
	env_unref(e);
	fresh();
	put("requirements.txt", "requests\n");
	one("requirements.txt alone", "python",
	    "python3 -m compileall -q -x '/[.]|node_modules' .");

	fresh();
	put("package.json", "{\"name\":\"app\",\"scripts\":{\"test\":"
	    "\"echo \\\"Error: no test specified\\\" && exit 1\"}}");
	one("package.json from npm init", "node", NULL);
	put("package.json", "{\"name\":\"app\",\"scripts\":{\"test\":"
	    "\"node --test\"}}");
	one("package.json with a test", "node", "npm test");
	put("package.json", "{\"name\":\"app\",\"scripts\":{\"test\":"
	    "\"node --test\",\"lint\":\"eslint .\"}}");
	one("package.json with lint and test", "node", "npm run lint");
	put("package.json", "{\"name\":\"app\",\"scripts\":{\"test\":"
	    "\"node --test\",\"lint\":\"eslint .\",\"check\":\"tsc\"}}");
	one("package.json with check, lint and test", "node", "npm run check");
	put("package.json", "{\"name\": [ not json");
	one("a broken package.json", "node", NULL);
	put("package.json", "{\"scripts\":{\"check\":\"a\",\"check\":\"b\"}}");
	one("a package.json with a key twice", "node", NULL);
	e = load();
	CHECK(e != NULL && strstr(env_system_prompt(e), "node_modules") != NULL,
	    "node: the prompt names node_modules");
	n = e != NULL ? env_ro_roots(e, &v) : 0;
	CHECK(n == 0, "node: node_modules is no read-only root (installs "
	    "write it)");
	env_unref(e);

	fresh();
	put("CMakeLists.txt", "project(app C)\n");
	put("Makefile", "all:\n");
	one("CMakeLists.txt (over a Makefile)", "cmake",
	    "sh -c 'cmake -S . -B build && cmake --build build'");
	fresh();
	put("makefile", "all:\n");
	one("makefile", "make", "make");
}

static void
check_extends(void)
{
	const char *const *v;
	struct env	*e;
	char		*cause = NULL, *want;
	size_t		 n;
	int		 r;

	fresh();
	put("Cargo.toml", "[package]\nname = \"app\"\n");
	put(".gbr_envs/default.ini", "[env]\nextends = builtin\n"
	    "check_command = cargo clippy\n");
	e = load();
	CHECK(e != NULL && check_is(e, "cargo clippy") &&
	    unit_same(eco_of(e), "rust"), "extends: one line changes the "
	    "check, the ecosystem stays");
	n = e != NULL ? env_protected(e, &v) : 0;
	CHECK(has(v, n, ".git/**") && has(v, n, ".gbr_envs/**"),
	    "extends: the default's protected files stay");
	n = e != NULL ? env_ask_commands(e, &v) : 0;
	CHECK(has(v, n, "cargo add *") && has(v, n, "git push *"),
	    "extends: the default's ask_commands stay");
	want = agentcache_path(ws, "cargo/registry/src");
	n = e != NULL ? env_ro_roots(e, &v) : 0;
	CHECK(want != NULL && has(v, n, want),
	    "extends: the default's read-only roots stay");
	free(want);
	env_unref(e);

	put(".gbr_envs/default.ini", "[env]\nextends = builtin\n"
	    "protected_files = Cargo.lock\n");
	e = load();
	n = e != NULL ? env_protected(e, &v) : 0;
	CHECK(has(v, n, "Cargo.lock") && has(v, n, ".git/**") &&
	    check_is(e, "cargo check"), "extends: protected_files add to "
	    "the default's");
	env_unref(e);

	put(".gbr_envs/default.ini", "[env]\nextends = mine\n");
	e = NULL;
	r = env_load(ws, NULL, &e, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, ":2:") != NULL &&
	    strstr(cause, "builtin") != NULL, "extends = mine is refused "
	    "with its line (%s)", cause != NULL ? cause : "loaded");
	free(cause);

	put(".gbr_envs/default.ini", "[env]\ncheck_command = cargo clippy\n");
	e = load();
	n = e != NULL ? env_protected(e, &v) : 0;
	CHECK(e != NULL && n == 0 && unit_same(eco_of(e), ""),
	    "without extends a profile is only itself, as before");
	env_unref(e);
}

/* A profile cannot make the home's secrets read-only roots. */
static void
check_secret_roots(void)
{
	/* Under the home ("" is the home itself), and the root above it. */
	static const char *const bad[] = { "/.ssh", "/.ssh/keys", "",
	    "/.config", "/.config/gbr", "/AppData/Roaming/gbr", NULL };
	struct env	*e;
	char		 home[300], line[700], root[400], *cause;
	size_t		 i;
	int		 r;

	fresh();
	snprintf(home, sizeof home, "%s/home", ws);
	put("home/.ssh/keys/id", "secret\n");
	put("home/.config/gbr/gbrd.env", "KEY=x\n");
	put("home/AppData/Roaming/gbr/gbrd.conf", "[llm]\n");
	put("home/src/lib/a.c", "int a;\n");
	setenv("HOME", home, 1);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (bad[i] != NULL)
			snprintf(root, sizeof root, "%s%s", home, bad[i]);
		else	/* the root above the home: "/", or "C:/" */
			snprintf(root, sizeof root, "%.*s",
			    (int)paths_root_len(home), home);
		snprintf(line, sizeof line, "[env]\nread_only_roots = %s\n",
		    root);
		put(".gbr_envs/default.ini", line);
		e = NULL;
		cause = NULL;
		r = env_load(ws, NULL, &e, &cause);
		CHECK(r == -1 && cause != NULL && strstr(cause, ":2:") != NULL &&
		    strstr(cause, "secret") != NULL, "read_only_roots = %s is "
		    "refused (%s)", root, cause != NULL ? cause : "loaded");
		free(cause);
		env_unref(e);
	}
	snprintf(line, sizeof line, "[env]\nread_only_roots = %s/src/lib\n",
	    home);
	put(".gbr_envs/default.ini", line);
	e = load();
	CHECK(e != NULL, "a folder of the home that holds no secret may be one");
	env_unref(e);

	/*
	 * .SSH is .ssh where names have no case (Windows): refused there;
	 * elsewhere it is another folder, and no secret.
	 */
	put("home/.SSH/keys/other", "x\n");
	snprintf(line, sizeof line, "[env]\nread_only_roots = %s/.SSH/keys\n",
	    home);
	put(".gbr_envs/default.ini", line);
	e = NULL;
	cause = NULL;
	r = env_load(ws, NULL, &e, &cause);
	if (pathgate_equal(".ssh", ".SSH", PATHGATE_HOST))
		CHECK(r == -1 && cause != NULL && strstr(cause, "secret") !=
		    NULL, "read_only_roots = ~/.SSH/keys is refused where "
		    "names have no case (%s)", cause != NULL ? cause : "loaded");
	else
		CHECK(r == 0, "read_only_roots = ~/.SSH/keys is another folder "
		    "where names have case (%s)", cause != NULL ? cause : "ok");
	free(cause);
	env_unref(e);
	unsetenv("HOME");
}

int
main(void)
{
	unit_tmpdir(cache, sizeof cache, "eco-cache");
	setenv("XDG_CACHE_HOME", cache, 1);
	check_ecosystems();
	check_extends();
	check_secret_roots();
	nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	nftw(cache, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return unit_done();
}
