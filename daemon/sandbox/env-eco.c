/*
 * The ecosystems the built-in default knows, chosen by the files present
 * in the workspace (the first that matches wins): its check, the commands
 * that ask a human first (they add dependencies), and its local knowledge
 * base, the dependencies' sources the build tool downloaded (ADR-0001).
 *
 *   ecosystem  chosen by                       check
 *   gleam      gleam.toml                      gleam check
 *   rust       Cargo.toml                      cargo check
 *   go         go.mod                          go vet ./...
 *   python     pyproject.toml, setup.py,       ruff check . / mypy when
 *              setup.cfg, requirements.txt     configured, else pytest -q
 *                                              (the venv's python when
 *                                              .venv has one); no tests:
 *                                              compileall
 *   node       package.json                    npm run check, else lint,
 *                                              else npm test (not npm
 *                                              init's placeholder)
 *   cmake      CMakeLists.txt                  cmake -S . -B build, then
 *                                              cmake --build build
 *   make       Makefile, makefile,             make
 *              GNUmakefile
 *
 * The knowledge base outside the workspace (cargo's registry sources and
 * Go's module cache, both in the agent's own cache: agentcache.h) becomes
 * read-only roots, so the file tools and search reach it; inside the
 * workspace (build/packages, node_modules, .venv, vendor) it is named to
 * the model, and only Gleam's build/packages is a read-only root, as the
 * seeds have it: a read-only node_modules or .venv would stop every
 * install. The marker files are watched, so a default reloads when a
 * project appears or its folders come (env_eco_watch).
 *
 * Bounds: package.json and pyproject.toml are read up to ECO_FILE_MAX.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agentcache.h"
#include "env-int.h"
#include "xmalloc.h"

#define ECO_FILE_MAX	(1024 * 1024)	/* bytes of a manifest read */

struct env_eco {
	const char	*name;		/* "rust" */
	const char	*title;		/* "Rust" */
	const char	*markers[5];	/* any one chooses it */
	const char	*check;		/* NULL: worked out (eco_check) */
	const char	*ask[3];	/* commands that add dependencies */
	const char	*kb_in[3];	/* knowledge base in the workspace */
	const char	*kb_cache;	/* and in the agent's cache */
};

static const struct env_eco eco_table[] = {
	{ "gleam", "Gleam", { "gleam.toml" }, "gleam check",
	    { "gleam add *" }, { "build/packages" }, NULL },
	{ "rust", "Rust", { "Cargo.toml" }, "cargo check",
	    { "cargo add *", "cargo install *" }, { "vendor" },
	    "cargo/registry/src" },
	{ "go", "Go", { "go.mod" }, "go vet ./...",
	    { "go get *", "go install *" }, { "vendor" }, "go/mod" },
	{ "python", "Python", { "pyproject.toml", "setup.py", "setup.cfg",
	    "requirements.txt" }, NULL,
	    { "pip install *", "python3 -m pip install *" }, { ".venv" },
	    NULL },
	{ "node", "Node.js", { "package.json" }, NULL,
	    { "npm install *", "npm i *", "npm add *" }, { "node_modules" },
	    NULL },
	{ "cmake", "CMake", { "CMakeLists.txt" },
	    "sh -c 'cmake -S . -B build && cmake --build build'",
	    { NULL }, { NULL }, NULL },
	{ "make", "make", { "GNUmakefile", "makefile", "Makefile" }, "make",
	    { NULL }, { NULL }, NULL },
};

/* ws/rel, as a new string. */
static char *
eco_path(const char *ws, const char *rel)
{
	return xasprintf("%s/%s", ws, rel);
}

/* True if ws/rel is a regular file (or a folder, dir 1). */
static int
eco_has(const char *ws, const char *rel, int dir)
{
	struct stat	 st;
	char		*p = eco_path(ws, rel);
	int		 r;

	r = stat(p, &st) == 0 && (dir ? S_ISDIR(st.st_mode) :
	    S_ISREG(st.st_mode));
	free(p);
	return r;
}

/* The head of ws/rel as a string (new), at most ECO_FILE_MAX, or NULL. */
static char *
eco_read(const char *ws, const char *rel)
{
	char		*p = eco_path(ws, rel), *buf;
	ssize_t		 n;
	size_t		 got = 0;
	int		 fd;

	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	free(p);
	if (fd == -1)
		return NULL;
	buf = xmalloc(ECO_FILE_MAX + 1);
	while (got < ECO_FILE_MAX && (n = read(fd, buf + got,
	    ECO_FILE_MAX - got)) != 0) {
		if (n == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return buf;
}

/* True if the text holds a line that starts with s. */
static int
eco_line(const char *text, const char *s)
{
	const char	*p = text;
	size_t		 n = strlen(s);

	while (p != NULL && *p != '\0') {
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, s, n) == 0)
			return 1;
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
	return 0;
}

/* True if the workspace has Python tests pytest would collect. */
static int
eco_py_tests(const char *ws)
{
	static const char *const t[] = { "tests", "test" };
	size_t	i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		if (eco_has(ws, t[i], 1))
			return 1;
	return eco_has(ws, "conftest.py", 0) || eco_has(ws, "test.py", 0);
}

/* Python's check (new string; see the top). */
static char *
eco_python_check(const char *ws)
{
	const char	*py;
	char		*toml = eco_read(ws, "pyproject.toml"), *c;
	int		 ruff, mypy;

	ruff = eco_has(ws, "ruff.toml", 0) || eco_has(ws, ".ruff.toml", 0) ||
	    (toml != NULL && eco_line(toml, "[tool.ruff"));
	mypy = eco_has(ws, "mypy.ini", 0) || eco_has(ws, ".mypy.ini", 0) ||
	    (toml != NULL && eco_line(toml, "[tool.mypy"));
	free(toml);
	py = eco_has(ws, ".venv/bin/python", 0) ? ".venv/bin/python" :
	    "python3";
	if (ruff)
		c = xasprintf("%s -m ruff check .", py);
	/*
	 * mypy's cache goes by a file's size and its mtime in seconds: an
	 * agent's edit of the same size within a second of the last check
	 * (str to int) would pass unseen. Correct over fast.
	 */
	else if (mypy)
		c = xasprintf("%s -m mypy --no-incremental .", py);
	else if (eco_py_tests(ws))
		c = xasprintf("%s -m pytest -q", py);
	else
		c = xasprintf("%s -m compileall -q -x '/[.]|node_modules' .",
		    py);
	return c;
}

/*
 * Node's check (new string, or NULL for none): the package's check, lint
 * or test script, in that order; npm init's placeholder test is none.
 */
static char *
eco_node_check(const char *ws)
{
	static const char *const order[] = { "check", "lint", "test" };
	json_t		*pkg, *scripts, *s;
	char		*text = eco_read(ws, "package.json"), *c = NULL;
	const char	*v;
	size_t		 i;

	if (text == NULL)
		return NULL;
	pkg = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	free(text);
	scripts = json_object_get(pkg, "scripts");
	for (i = 0; c == NULL && i < sizeof order / sizeof order[0]; i++) {
		s = json_object_get(scripts, order[i]);
		if ((v = json_string_value(s)) == NULL || v[0] == '\0')
			continue;
		if (strcmp(order[i], "test") == 0 &&
		    strstr(v, "no test specified") != NULL)
			continue;
		c = strcmp(order[i], "test") == 0 ? xstrdup("npm test") :
		    xasprintf("npm run %s", order[i]);
	}
	json_decref(pkg);
	return c;
}

/* The ecosystem of a workspace (a real path), or NULL. */
static const struct env_eco *
eco_find(const char *ws)
{
	size_t	i, j;

	for (i = 0; i < sizeof eco_table / sizeof eco_table[0]; i++)
		for (j = 0; j < 5 && eco_table[i].markers[j] != NULL; j++)
			if (eco_has(ws, eco_table[i].markers[j], 0))
				return &eco_table[i];
	return NULL;
}

/* Chooses and applies the workspace's ecosystem (see env-int.h). */
void
env_eco_apply(struct env *e, const char *ws)
{
	const struct env_eco	*eco;
	char			*dir, *p, *cause;
	size_t			 i;

	if ((eco = eco_find(ws)) == NULL)
		return;
	e->eco = eco->name;
	e->eco_title = eco->title;
	free(e->check);
	if (eco->check != NULL)
		e->check = xstrdup(eco->check);
	else if (strcmp(eco->name, "python") == 0)
		e->check = eco_python_check(ws);
	else
		e->check = eco_node_check(ws);
	for (i = 0; i < 3 && eco->ask[i] != NULL; i++)
		env_strs_add(&e->ask, eco->ask[i]);
	for (i = 0; i < 3 && eco->kb_in[i] != NULL; i++) {
		env_strs_add(&e->kb, eco->kb_in[i]);
		/* Gleam's packages are a read-only root, as the seeds say. */
		if (strcmp(eco->name, "gleam") == 0 && eco_has(ws,
		    eco->kb_in[i], 1))
			env_strs_add(&e->ro_given, eco->kb_in[i]);
	}
	if (eco->kb_cache == NULL || (dir = agentcache_dir(ws)) == NULL)
		return;
	if (agentcache_make(dir, &cause) != 0) {
		env_strs_add(&e->warnings, cause);
		free(cause);
		free(dir);
		return;
	}
	p = xasprintf("%s/%s", dir, eco->kb_cache);
	if (agentcache_mkdirs(p) == 0)
		env_strs_add(&e->ro_given, p);
	free(p);
	free(dir);
}

/* Watches what would change the default's choice (see env-int.h). */
void
env_eco_watch(struct env *e)
{
	const struct env_eco	*eco;
	char			*p;
	size_t			 i, j;

	for (i = 0; i < sizeof eco_table / sizeof eco_table[0]; i++) {
		eco = &eco_table[i];
		for (j = 0; j < 5 && eco->markers[j] != NULL; j++) {
			p = eco_path(e->workspace, eco->markers[j]);
			env_strs_add(&e->files, p);
			free(p);
		}
	}
	/* Folders that decide a check or a read-only root, once made. */
	p = eco_path(e->workspace, "build/packages");
	env_strs_add(&e->files, p);
	free(p);
	p = eco_path(e->workspace, ".venv");
	env_strs_add(&e->files, p);
	free(p);
	p = eco_path(e->workspace, "tests");
	env_strs_add(&e->files, p);
	free(p);
}
