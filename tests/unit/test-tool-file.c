/*
 * Unit tests for the tool registry and the five file tools, on a real
 * temporary workspace: argument checking against the schemas, read slices
 * and their bounds, writes, edits that are missing or ambiguous, listings,
 * and search (globs, paths, read-only roots, binary and large files,
 * symlinks never followed, bounds, refused patterns).
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"
#include "tool.h"
#include "tool-file.h"
#include "unit.h"
#include "xmalloc.h"

static char		 base[256];
static int		 links;		/* this system makes symlinks */
static char		 root[PATH_MAX];
static struct sandbox	*sb;

/* Writes a file under base. */
static void
put(const char *rel, const char *text, size_t len)
{
	char	 path[PATH_MAX + 64];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", base, rel);
	if ((f = fopen(path, "w")) == NULL || fwrite(text, 1, len, f) != len ||
	    fclose(f) != 0) {
		fprintf(stderr, "put %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* Makes a folder under base. */
static void
mkd(const char *rel)
{
	char	path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s/%s", base, rel);
	mkdir(path, 0755);
}

/* Reads a file under base into a static buffer. */
static const char *
slurp(const char *rel)
{
	static char	 buf[65536];
	char		 path[PATH_MAX + 64];
	FILE		*f;
	size_t		 n;

	snprintf(path, sizeof path, "%s/%s", base, rel);
	buf[0] = '\0';
	if ((f = fopen(path, "r")) == NULL)
		return buf;
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Calls a tool through the registry with JSON text args. */
static int
call(const char *tool, const char *args, json_t **result, enum gbr_err *kind,
    char **reason)
{
	struct tool_ctx	 ctx = { sb, NULL, NULL, 0, NULL };
	json_t		*a = args != NULL ? json_loads(args, JSON_ALLOW_NUL, NULL) : NULL;
	int		 r;

	if (args != NULL && a == NULL) {
		fprintf(stderr, "bad test JSON: %s\n", args);
		exit(99);
	}
	r = tool_call(&ctx, tool, a, result, kind, reason);
	json_decref(a);
	return r;
}

/* Expects a call to fail with kind. */
static void
fails(const char *tool, const char *args, enum gbr_err kind, const char *what)
{
	json_t		*res = NULL;
	enum gbr_err	 k = GBR_ERR_INTERNAL;
	char		*reason = NULL;
	int		 r;

	r = call(tool, args, &res, &k, &reason);
	CHECK(r == -1 && k == kind && res == NULL && reason != NULL,
	    "%s: %s fails as %s (%s)", tool, what, gbr_err_kind(kind),
	    r == 0 ? "succeeded" : reason);
	free(reason);
	json_decref(res);
}

/* Calls and expects success; returns the result (caller decrefs). */
static json_t *
works(const char *tool, const char *args, const char *what)
{
	json_t		*res = NULL;
	enum gbr_err	 k;
	char		*reason = NULL;
	int		 r;

	r = call(tool, args, &res, &k, &reason);
	CHECK(r == 0 && res != NULL, "%s: %s works (%s)", tool, what,
	    r == 0 ? "ok" : reason);
	free(reason);
	return res;
}

/* A string member of a result ("" if absent). */
static const char *
sget(json_t *o, const char *key)
{
	const char	*s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

/* An integer member of a result (-1 if absent). */
static json_int_t
iget(json_t *o, const char *key)
{
	json_t	*v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The registry and argument checks. */
static void
check_registry(void)
{
	const struct tool_def	*defs;
	json_t			*list, *t;
	char			*cause = NULL;
	size_t			 n, i;
	int			 r;

	defs = tool_file_defs(&n);
	r = tool_register(defs, n, &cause);
	CHECK(r == 0 && n == 5, "the five file tools register (%s)", cause ? cause : "ok");
	free(cause);
	cause = NULL;
	r = tool_register(defs, 1, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, "twice") != NULL,
	    "registering a name twice is refused");
	free(cause);

	list = tool_list_json(NULL);
	CHECK(json_array_size(list) == 5, "tool_list_json lists five tools");
	json_array_foreach(list, i, t) {
		json_t *s = json_object_get(t, "inputSchema");

		CHECK(json_is_string(json_object_get(t, "name")) &&
		    json_is_string(json_object_get(t, "description")) &&
		    json_is_object(s) &&
		    strcmp(json_string_value(json_object_get(s, "type")), "object") == 0 &&
		    json_is_false(json_object_get(s, "additionalProperties")) &&
		    json_is_object(json_object_get(t, "annotations")),
		    "tool %s has a schema and annotations", sget(t, "name"));
	}
	json_decref(list);
	list = tool_file_schemas();
	CHECK(json_array_size(list) == 5, "tool_file_schemas gives five");
	json_decref(list);
	CHECK(tool_find("search") != NULL && tool_find("search")->read_only &&
	    tool_find("write_file")->destructive, "hints: search read-only, write destructive");

	fails("no_such_tool", "{}", GBR_ERR_METHOD_NOT_FOUND, "an unknown tool");
	fails("read_file", "{}", GBR_ERR_INVALID_PARAMS, "a missing path");
	fails("read_file", NULL, GBR_ERR_INVALID_PARAMS, "no arguments at all");
	fails("read_file", "{\"path\": 3}", GBR_ERR_INVALID_PARAMS, "a number as path");
	fails("read_file", "{\"path\": \"a\", \"offset\": 0}", GBR_ERR_INVALID_PARAMS,
	    "offset below its minimum");
	fails("read_file", "{\"path\": \"a\", \"limit\": 1000000}", GBR_ERR_INVALID_PARAMS,
	    "limit above its maximum");
	fails("read_file", "{\"path\": \"a\", \"bogus\": 1}", GBR_ERR_INVALID_PARAMS,
	    "an unknown argument");
	fails("read_file", "[\"a\"]", GBR_ERR_INVALID_PARAMS, "an array as arguments");
	fails("edit_file", "{\"path\": \"a\", \"old_string\": \"x\", \"new_string\": \"y\", "
	    "\"replace_all\": \"yes\"}", GBR_ERR_INVALID_PARAMS, "a string as a boolean");
	fails("list_directory", "{\"path\": \".\", \"depth\": 6}", GBR_ERR_INVALID_PARAMS,
	    "depth over 5");
	fails("search", "{\"pattern\": \"x\", \"max_results\": 0}", GBR_ERR_INVALID_PARAMS,
	    "max_results 0");
}

/* read_file. */
static void
check_read(void)
{
	static char	 big[TF_READ_OUT_MAX + 100];	/* off the stack */
	json_t		*r;

	put("proj/lines.txt", "one\ntwo\nthree\nfour\nfive\n", 24);
	r = works("read_file", "{\"path\": \"lines.txt\"}", "a whole file");
	CHECK(strcmp(sget(r, "content"), "one\ntwo\nthree\nfour\nfive\n") == 0 &&
	    iget(r, "total_lines") == 5 && json_is_false(json_object_get(r, "truncated")),
	    "read: content and total_lines");
	json_decref(r);
	r = works("read_file", "{\"path\": \"lines.txt\", \"offset\": 2, \"limit\": 2}", "a slice");
	CHECK(strcmp(sget(r, "content"), "two\nthree\n") == 0 && iget(r, "start_line") == 2 &&
	    json_is_true(json_object_get(r, "truncated")) && iget(r, "next_offset") == 4,
	    "read: offset 2 limit 2 gives two lines and next_offset 4");
	json_decref(r);
	r = works("read_file", "{\"path\": \"lines.txt\", \"offset\": 5}", "the last line");
	CHECK(strcmp(sget(r, "content"), "five\n") == 0 &&
	    json_is_false(json_object_get(r, "truncated")), "read: the last line alone");
	json_decref(r);
	fails("read_file", "{\"path\": \"lines.txt\", \"offset\": 6}", GBR_ERR_INVALID_PARAMS,
	    "an offset past the end");
	put("proj/nonl.txt", "a\nb", 3);
	r = works("read_file", "{\"path\": \"nonl.txt\"}", "no final newline");
	CHECK(iget(r, "total_lines") == 2 && strcmp(sget(r, "content"), "a\nb") == 0,
	    "read: a last line without newline counts");
	json_decref(r);
	put("proj/empty.txt", "", 0);
	r = works("read_file", "{\"path\": \"empty.txt\"}", "an empty file");
	CHECK(iget(r, "total_lines") == 0 && strcmp(sget(r, "content"), "") == 0,
	    "read: an empty file");
	json_decref(r);
	put("proj/bin.dat", "ab\0cd", 5);
	fails("read_file", "{\"path\": \"bin.dat\"}", GBR_ERR_NOT_A_FILE, "a binary file");
	/* Valid UTF-8 of every length, past the eight-byte ASCII steps. */
	put("proj/utf8.txt", "ascii only, eight+ \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 "
	    "\xf0\x9f\x98\x80 end\n", 38);
	r = works("read_file", "{\"path\": \"utf8.txt\"}", "a UTF-8 file");
	CHECK(strcmp(sget(r, "content"), "ascii only, eight+ \xc3\xa9t\xc3\xa9 "
	    "\xe2\x9c\x93 \xf0\x9f\x98\x80 end\n") == 0 &&
	    json_object_get(r, "lossy") == NULL, "read: valid UTF-8 comes back "
	    "as it is, not lossy");
	json_decref(r);
	put("proj/bad-late.txt", "0123456789abcdef\xed\xa0\x80 surrogate\n", 30);
	r = works("read_file", "{\"path\": \"bad-late.txt\"}", "a surrogate");
	CHECK(strcmp(sget(r, "content"), "0123456789abcdef\xef\xbf\xbd\xef\xbf"
	    "\xbd\xef\xbf\xbd surrogate\n") == 0 &&
	    json_is_true(json_object_get(r, "lossy")), "read: an encoded "
	    "surrogate after sixteen ASCII bytes is three U+FFFD, lossy");
	json_decref(r);
	put("proj/latin1.txt", "caf\xe9\n", 5);
	r = works("read_file", "{\"path\": \"latin1.txt\"}", "a Latin-1 file");
	CHECK(strcmp(sget(r, "content"), "caf\xef\xbf\xbd\n") == 0 &&
	    json_is_true(json_object_get(r, "lossy")), "read: invalid UTF-8 becomes U+FFFD, lossy");
	json_decref(r);
	memset(big, 'z', sizeof big);
	big[sizeof big - 1] = '\n';
	put("proj/oneline.txt", big, sizeof big);
	r = works("read_file", "{\"path\": \"oneline.txt\"}", "one huge line");
	CHECK(strlen(sget(r, "content")) == TF_READ_OUT_MAX &&
	    json_is_true(json_object_get(r, "line_cut")) && iget(r, "next_offset") == 2,
	    "read: one line over the output cap is cut and says so");
	json_decref(r);
	fails("read_file", "{\"path\": \"../etc/passwd\"}", GBR_ERR_PATH_TRAVERSAL, "..");
	fails("read_file", "{\"path\": \"a\\u0000b\"}", GBR_ERR_INVALID_PATH,
	    "a JSON \\u0000 in the path (never cut at the NUL)");
	fails("read_file", "{\"path\": \"missing.txt\"}", GBR_ERR_NOT_FOUND, "a missing file");
}

/* write_file and edit_file. */
static void
check_write_edit(void)
{
	json_t	*r;

	r = works("write_file", "{\"path\": \"src/new.c\", \"content\": \"int x;\\n\"}", "a new file");
	CHECK(json_is_true(json_object_get(r, "created")) && iget(r, "bytes") == 7 &&
	    strcmp(sget(r, "path"), "src/new.c") == 0 && strcmp(slurp("proj/src/new.c"), "int x;\n") == 0,
	    "write: created, bytes, path");
	CHECK(strcmp(sget(r, "diff"), "--- a/src/new.c\n+++ b/src/new.c\n@@ -0,0 +1 @@\n+int x;\n") == 0 &&
	    json_object_get(r, "diff_truncated") == NULL, "write: a new file's diff adds only");
	json_decref(r);
	r = works("write_file", "{\"path\": \"src/new.c\", \"content\": \"int y;\\n\"}", "a replace");
	CHECK(json_is_false(json_object_get(r, "created")) &&
	    strcmp(slurp("proj/src/new.c"), "int y;\n") == 0, "write: replaced");
	CHECK(strcmp(sget(r, "diff"), "--- a/src/new.c\n+++ b/src/new.c\n@@ -1 +1 @@\n-int x;\n+int y;\n") == 0,
	    "write: a replace's diff removes and adds");
	json_decref(r);
	r = works("write_file", "{\"path\": \"zeros.bin\", \"content\": \"a\\u0000b\"}", "NUL bytes");
	CHECK(json_object_get(r, "diff") == NULL && strcmp(sget(r, "diff_omitted"), "binary") == 0,
	    "write: no diff of binary content");
	json_decref(r);
	r = works("write_file", "{\"path\": \"zeros.bin\", \"content\": \"text\"}", "over binary");
	CHECK(strcmp(sget(r, "diff_omitted"), "binary") == 0, "write: no diff over a binary file");
	json_decref(r);
	{
		char	*many = xmalloc(100001 * 2 + 64), *o = many;
		size_t	 i;

		/* Lines past TF_DIFF_LINES_MAX: no diff, even under the size cap. */
		o += snprintf(o, 64, "{\"path\": \"zeros.bin\", \"content\": \"");
		for (i = 0; i < TF_DIFF_LINES_MAX + 1; i++) {
			*o++ = '\\';
			*o++ = 'n';
		}
		snprintf(o, 8, "\"}");
		r = works("write_file", many, "many lines");
		CHECK(json_object_get(r, "diff") == NULL &&
		    strcmp(sget(r, "diff_omitted"), "too large") == 0, "write: no diff of too many lines");
		json_decref(r);
		free(many);
	}
	{
		char	path[PATH_MAX + 64];

		/* The listings below count the workspace's files. */
		snprintf(path, sizeof path, "%s/proj/zeros.bin", base);
		unlink(path);
	}
	fails("write_file", "{\"path\": \"gleam.toml\", \"content\": \"x\"}", GBR_ERR_PROTECTED_PATH,
	    "a protected file");
	fails("write_file", "{\"path\": \".gbr_envs/default.ini\", \"content\": \"x\"}",
	    GBR_ERR_PROTECTED_PATH, "a profile");
	{
		char	args[PATH_MAX + 128];

		snprintf(args, sizeof args, "{\"path\": \"%s/deps/pkg/x.gleam\", "
		    "\"content\": \"x\"}", base);
		fails("write_file", args, GBR_ERR_READ_ONLY, "a read-only root (absolute)");
	}
	if (links)
		fails("write_file", "{\"path\": \"deps/pkg/x.gleam\", "
		    "\"content\": \"x\"}", GBR_ERR_PATH_TRAVERSAL,
		    "a link to the read-only root (a link out)");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);

	put("proj/src/e.txt", "alpha beta\nalpha gamma\ndelta\n", 29);
	fails("edit_file", "{\"path\": \"src/e.txt\", \"old_string\": \"omega\", \"new_string\": \"x\"}",
	    GBR_ERR_NOT_FOUND, "old_string missing");
	fails("edit_file", "{\"path\": \"src/e.txt\", \"old_string\": \"alpha\", \"new_string\": \"x\"}",
	    GBR_ERR_NOT_UNIQUE, "old_string twice");
	fails("edit_file", "{\"path\": \"src/e.txt\", \"old_string\": \"\", \"new_string\": \"x\"}",
	    GBR_ERR_INVALID_PARAMS, "an empty old_string");
	fails("edit_file", "{\"path\": \"src/e.txt\", \"old_string\": \"delta\", \"new_string\": \"delta\"}",
	    GBR_ERR_INVALID_PARAMS, "old_string equal to new_string");
	CHECK(strcmp(slurp("proj/src/e.txt"), "alpha beta\nalpha gamma\ndelta\n") == 0,
	    "edit: failed edits change nothing");
	r = works("edit_file", "{\"path\": \"src/e.txt\", \"old_string\": \"alpha gamma\", "
	    "\"new_string\": \"ALPHA\"}", "a unique edit");
	CHECK(iget(r, "replacements") == 1 &&
	    strcmp(slurp("proj/src/e.txt"), "alpha beta\nALPHA\ndelta\n") == 0, "edit: one replacement");
	CHECK(strcmp(sget(r, "diff"), "--- a/src/e.txt\n+++ b/src/e.txt\n@@ -1,3 +1,3 @@\n alpha beta\n"
	    "-alpha gamma\n+ALPHA\n delta\n") == 0, "edit: its diff");
	json_decref(r);
	put("proj/src/e.txt", "aaaa", 4);
	r = works("edit_file", "{\"path\": \"src/e.txt\", \"old_string\": \"aa\", "
	    "\"new_string\": \"b\", \"replace_all\": true}", "replace_all");
	CHECK(iget(r, "replacements") == 2 && strcmp(slurp("proj/src/e.txt"), "bb") == 0,
	    "edit: replace_all, non-overlapping (aaaa -> bb)");
	json_decref(r);
	fails("edit_file", "{\"path\": \"gleam.toml\", \"old_string\": \"name\", \"new_string\": \"x\"}",
	    GBR_ERR_PROTECTED_PATH, "a protected file");
	CHECK(strcmp(slurp("proj/gleam.toml"), "name = \"p\"\n") == 0, "edit: protected file unchanged");
	fails("edit_file", "{\"path\": \"bin.dat\", \"old_string\": \"ab\", \"new_string\": \"x\"}",
	    GBR_ERR_NOT_A_FILE, "a binary file");
}

/* list_directory. */
static void
check_list(void)
{
	json_t	*r, *e;
	char	 name[64];
	int	 i;

	r = works("list_directory", "{\"path\": \"src\"}", "src");
	e = json_object_get(r, "entries");
	CHECK(json_array_size(e) == 2 && strcmp(sget(json_array_get(e, 0), "path"), "e.txt") == 0 &&
	    strcmp(sget(json_array_get(e, 0), "type"), "file") == 0,
	    "list: sorted entries with types");
	json_decref(r);
	r = works("list_directory", "{\"path\": \".\", \"depth\": 2}", "the root, two deep");
	e = json_object_get(r, "entries");
	{
		char *s = json_dumps(e, JSON_COMPACT);

		CHECK(strstr(s, "\"src/new.c\"") != NULL &&
		    strstr(s, ".git/HEAD") == NULL,
		    "list: depth 2 shows src/ files, never inside .git");
		if (links)
			CHECK(strstr(s, "\"link_out\"") != NULL &&
			    strstr(s, "\"symlink\"") != NULL &&
			    strstr(s, "\"link_out/") == NULL,
			    "list: symlinks as symlinks, never inside links");
		else
			unit_skip(1, UNIT_NO_SYMLINKS);
		free(s);
	}
	json_decref(r);
	mkd("proj/many");
	for (i = 0; i < TF_LIST_MAX + 5; i++) {
		snprintf(name, sizeof name, "proj/many/f%04d", i);
		put(name, "", 0);
	}
	r = works("list_directory", "{\"path\": \"many\"}", "a big folder");
	CHECK(json_array_size(json_object_get(r, "entries")) == TF_LIST_MAX &&
	    json_is_true(json_object_get(r, "truncated")), "list: capped at TF_LIST_MAX, truncated");
	json_decref(r);
	{
		char	 path[PATH_MAX + 64], *s;
		FILE	*f;

		/* Windows allows no control character in a name: none to list. */
		snprintf(path, sizeof path, "%s/proj/src/bad\x1b[1mname", base);
		if ((f = fopen(path, "w")) != NULL) {
			fclose(f);
			r = works("list_directory", "{\"path\": \"src\"}",
			    "a hostile name");
			s = json_dumps(json_object_get(r, "entries"),
			    JSON_COMPACT);
			CHECK(strstr(s, "\\\\u{001B}") != NULL &&
			    strstr(s, "unsafe_name") != NULL, "list: a control "
			    "character in a name is shown escaped (%s)", s);
			free(s);
			json_decref(r);
		} else
			unit_skip(2, "this system allows no control character "
			    "in a file name");
	}
	fails("list_directory", "{\"path\": \"src/e.txt\"}", GBR_ERR_NOT_A_FILE, "a file");
	if (links)
		fails("list_directory", "{\"path\": \"link_out\"}",
		    GBR_ERR_PATH_TRAVERSAL, "a link out");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);
}

/* Orders strings bytewise, for qsort. */
static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * search's folders are read and sorted a step at a time (a merge sort):
 * several steps' worth of names, made in a shuffled order, come out in
 * strcmp's order.
 */
static void
check_search_names(void)
{
	char		 rel[PATH_MAX + 64], **names;
	json_t		*r, *m;
	size_t		 i, j, n = 1100, ok = 1;

	mkd("proj/many");
	for (i = 0; i < n; i++) {
		/* A permutation of 0..n-1 (7 and n are coprime). */
		j = (i * 7 + 3) % n;
		snprintf(rel, sizeof rel, "proj/many/f%zu", j);
		put(rel, "needle\n", 7);
	}
	r = works("search", "{\"pattern\": \"needle\", \"path\": \"many\", "
	    "\"max_results\": 1000}", "1100 names in one folder");
	m = json_object_get(r, "matches");
	/* The first 1000 names in strcmp's order: f0, f1, f10, f100, ... */
	names = xcalloc(n, sizeof *names);
	for (i = 0; i < n; i++)
		names[i] = xasprintf("many/f%zu", i);
	qsort(names, n, sizeof *names, str_cmp);
	for (i = 0; i < json_array_size(m); i++)
		if (strcmp(sget(json_array_get(m, i), "path"), names[i]) != 0)
			ok = 0;
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	CHECK(json_array_size(m) == 1000 && ok && strcmp(sget(r,
	    "truncated_reason"), "max_results") == 0,
	    "search: a folder read in steps comes out in strcmp's order");
	json_decref(r);
}

/* search. */
static void
check_search(void)
{
	static char	 big[TF_SEARCH_FILE_MAX + 10];	/* 4 MiB: not on a stack */
	json_t		*r, *m;
	char		*s;

	mkd("proj/lib");
	put("proj/lib/a.gleam", "import gleam/list\npub fn alpha() { 1 }\n", 39);
	put("proj/lib/b.gleam", "pub fn beta() { 2 }\npub fn alphabet() { 3 }\n", 44);
	put("proj/lib/c.txt", "pub fn alpha_in_txt\n", 20);
	put("proj/lib/d.bin", "pub fn alpha\0binary", 19);
	put("deps/pkg/lib.gleam", "pub fn from_package() { 9 }\n", 28);
	put("outside/secret.gleam", "pub fn alpha_secret() {}\n", 25);

	r = works("search", "{\"pattern\": \"pub fn alpha\", \"path\": \"lib\"}", "a literal in lib");
	m = json_object_get(r, "matches");
	s = json_dumps(m, JSON_COMPACT);
	CHECK(json_array_size(m) == 3 && strstr(s, "\"lib/a.gleam\"") != NULL &&
	    strstr(s, "\"line\":2") != NULL && strstr(s, "lib/c.txt") != NULL &&
	    iget(r, "skipped_binary") == 1, "search: literal matches, binary skipped (%s)", s);
	free(s);
	json_decref(r);

	r = works("search", "{\"pattern\": \"^pub fn [a-z_]+\\\\(\", \"glob\": \"*.gleam\"}",
	    "a regex with a glob, everywhere");
	m = json_object_get(r, "matches");
	s = json_dumps(m, JSON_COMPACT);
	CHECK(strstr(s, "lib/a.gleam") != NULL && strstr(s, "lib/c.txt") == NULL &&
	    strstr(s, "deps/pkg/lib.gleam") != NULL && strstr(s, "secret") == NULL &&
	    strstr(s, "alphabet") != NULL && strstr(s, "import") == NULL,
	    "search: regex, glob, the read-only root included, never through a link (%s)", s);
	free(s);
	json_decref(r);

	r = works("search", "{\"pattern\": \"from_package\"}", "everywhere by default");
	m = json_object_get(r, "matches");
	s = json_dumps(m, JSON_COMPACT);
	CHECK(json_array_size(m) == 1 && strstr(s, base) != NULL,
	    "search: a read-only root outside is searched, shown absolute (%s)", s);
	free(s);
	json_decref(r);

	r = works("search", "{\"pattern\": \"fn\", \"glob\": \"lib/**/*.gleam\", \"max_results\": 2}",
	    "max_results");
	CHECK(json_array_size(json_object_get(r, "matches")) == 2 &&
	    json_is_true(json_object_get(r, "truncated")) &&
	    strcmp(sget(r, "truncated_reason"), "max_results") == 0,
	    "search: stops at max_results and says so");
	json_decref(r);

	memset(big, 'x', sizeof big);
	put("proj/lib/huge.txt", big, sizeof big);
	r = works("search", "{\"pattern\": \"xxx\", \"path\": \"lib\"}", "a file over the size cap");
	CHECK(iget(r, "skipped_large") == 1, "search: files over the cap are skipped and counted");
	json_decref(r);

	/* The required-string prefilter must never lose a match. */
	{
		static const struct {
			const char	*pattern;	/* JSON-escaped */
			size_t		 want;
		} cases[] = {
			{ "colou?r", 2 }, { "colou{0,1}r", 2 }, { "colou*r", 2 },
			{ "x(ab)?y", 2 }, { "fooo+", 1 }, { "fo+", 1 },
			{ "a\\\\.b", 1 }, { "a.b", 2 }, { "\\\\[bracket\\\\]", 1 },
			{ "[[:alpha:]]+ket", 1 }, { "end\\\\$", 1 }, { "(colo)ur", 1 },
			{ "^colour$", 1 }, { "lour|lor", 2 }, { "[]x]yz", 1 },
			{ "ta\\\\sh?ere", 0 }, { "tab.here", 1 },
		};
		char	args[256];
		size_t	c;

		const char	*tricky = "color\ncolour\nxy\nxaby\nfooo\na.b\naxb\n"
		    "tab\there\n[bracket]\nend$\n]yz\n";

		put("proj/lib/tricky.txt", tricky, strlen(tricky));
		for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
			snprintf(args, sizeof args, "{\"pattern\": \"%s\", \"glob\": "
			    "\"tricky.txt\"}", cases[c].pattern);
			r = works("search", args, cases[c].pattern);
			CHECK(json_array_size(json_object_get(r, "matches")) == cases[c].want,
			    "search: '%s' finds %zu line(s), got %zu", cases[c].pattern,
			    cases[c].want, json_array_size(json_object_get(r, "matches")));
			json_decref(r);
		}
	}

	r = works("search", "{\"pattern\": \"a*b\", \"path\": \"lib\"}", "a pattern with an empty-ish match");
	CHECK(r != NULL, "search: a*b answers");
	json_decref(r);
	fails("search", "{\"pattern\": \"(a)\\\\1\"}", GBR_ERR_INVALID_PARAMS, "a back-reference");
	fails("search", "{\"pattern\": \"(unclosed\"}", GBR_ERR_INVALID_PARAMS, "a bad regex");
	fails("search", "{\"pattern\": \"\"}", GBR_ERR_INVALID_PARAMS, "an empty pattern");
	fails("search", "{\"pattern\": \"x\", \"glob\": \"../*\"}", GBR_ERR_INVALID_PARAMS,
	    "a glob with ..");
	fails("search", "{\"pattern\": \"x\", \"path\": \"../outside\"}", GBR_ERR_PATH_TRAVERSAL,
	    "a path outside");
	if (links)
		fails("search", "{\"pattern\": \"x\", \"path\": \"link_out\"}",
		    GBR_ERR_PATH_TRAVERSAL, "a link out as the path");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);
}

/* Removes one entry (nftw). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

int
main(void)
{
	static const char *const prot[] = { "gleam.toml" };
	struct sandbox_config	 cfg;
	const char		*ro[2];
	char			 deps[PATH_MAX + 16], *cause = NULL;
	char			 link[PATH_MAX + 16];

	/*
	 * What a search finds is checked here, not its 3 s budget, which
	 * Wine on a loaded machine can spend on these few thousand files.
	 */
	setenv("GBR_TEST_SEARCH_MS", "60000", 1);
	unit_tmpdir(base, sizeof base, "tools");
	links = unit_can_symlink(base);
	snprintf(root, sizeof root, "%s/proj", base);
	mkd("proj");
	mkd("proj/src");
	mkd("proj/.git");
	put("proj/.git/HEAD", "ref: x\n", 7);
	mkd("proj/.gbr_envs");
	put("proj/gleam.toml", "name = \"p\"\n", 11);
	mkd("outside");
	mkd("deps");
	mkd("deps/pkg");
	snprintf(link, sizeof link, "%s/link_out", root);
	if (links && symlink("../outside", link) != 0)
		return 99;
	/* deps is a read-only root outside; proj/deps links to it (never followed). */
	snprintf(deps, sizeof deps, "%s/deps", base);
	ro[0] = deps;
	memset(&cfg, 0, sizeof cfg);
	cfg.root = root;
	cfg.ro_roots = ro;
	cfg.nro = 1;
	cfg.protected = prot;
	cfg.nprotected = 1;
	if ((sb = sandbox_create(&cfg, &cause)) == NULL) {
		fprintf(stderr, "%s\n", cause);
		return 99;
	}
	/* Writing deps/... through the allowed root must still be read_only. */
	snprintf(link, sizeof link, "%s/deps", root);
	if (links && symlink("../deps", link) != 0)
		return 99;

	check_registry();
	check_read();
	check_write_edit();
	check_list();
	check_search();
	check_search_names();

	sandbox_free(sb);
	tool_reset();
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return unit_done();
}
