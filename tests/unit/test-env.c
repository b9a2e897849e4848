/*
 * Unit tests for environment profiles: a table of malformed INI and JSON
 * profiles, each of which must be refused with the right "file:line:" and
 * words; good profiles with every key; then loading from a real temporary
 * workspace (the built-in default and its Gleam detection, missing and
 * ambiguous profiles, an allowed_root outside, a system_file), the list,
 * the diff a reload reports, and the sandbox a profile builds.
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

#include "env.h"
#include "paths.h"
#include "sandbox.h"
#include "unit.h"
#include "xmalloc.h"

/* One bad profile: format, text, and what the error must contain. */
struct bad {
	enum env_format	 fmt;
	const char	*text;
	const char	*want;	/* a substring of the message, "f:N: ..." */
};

static const struct bad bads[] = {
	{ ENV_INI, "[env]\nbogus = 1\n", "f:2: unknown key 'bogus' in [env]" },
	{ ENV_INI, "[nope]\nx = 1\n", "f:2: unknown section [nope]" },
	{ ENV_INI, "allowed_root = .\n", "f:1: 'allowed_root' is outside any [section]" },
	{ ENV_INI, "[env]\n\n\nautonomy = yolo\n", "f:4: autonomy = 'yolo'" },
	{ ENV_INI, "[env]\nmax_fix_attempts = -1\n", "f:2: max_fix_attempts" },
	{ ENV_INI, "[env]\nmax_fix_attempts = 3x\n", "f:2: max_fix_attempts" },
	{ ENV_INI, "[env]\nmax_fix_attempts = 101\n", "f:2: max_fix_attempts" },
	{ ENV_INI, "[env]\nmax_fix_attempts = 99999999999999999999\n", "f:2: max_fix_attempts" },
	{ ENV_INI, "[exec]\ntimeout_ms = 0\n", "f:2: timeout_ms" },
	{ ENV_INI, "[exec]\ntimeout_ms = 3600001\n", "f:2: timeout_ms" },
	{ ENV_INI, "[exec]\nmax_output_bytes = 12\n", "f:2: max_output_bytes" },
	{ ENV_INI, "[exec]\nmax_output_bytes = 1T\n", "f:2: max_output_bytes" },
	{ ENV_INI, "[exec]\nmax_output_bytes = -1\n", "f:2: max_output_bytes" },
	{ ENV_INI, "[llm]\nprovider = skynet\n", "f:2: provider = 'skynet'" },
	{ ENV_INI, "[llm]\nbase_url = ftp://x\n", "f:2: base_url" },
	{ ENV_INI, "[llm]\nbase_url = file:///etc/passwd\n", "f:2: base_url" },
	{ ENV_INI, "[llm]\nmodel =\n", "f:2: model" },
	{ ENV_INI, "[env]\nallowed_root = ../other\n", "f:2: allowed_root '../other' is outside the workspace" },
	{ ENV_INI, "[env]\nallowed_root = src/../../x\n", "f:2: allowed_root 'src/../../x' is outside" },
	{ ENV_INI, "[env]\nallowed_root =\n", "f:2: allowed_root is empty" },
	{ ENV_INI, "[env]\nread_only_roots = ok, ../../etc\n", "f:2: read_only_roots '../../etc' is outside" },
	{ ENV_INI, "[env]\nprotected_files = a/[bc\n", "f:2: protected_files 'a/[bc': a '[' class" },
	{ ENV_INI, "[env]\nprotected_files = /etc/*\n", "f:2: protected_files '/etc/*': an absolute pattern" },
	{ ENV_INI, "[env]\nprotected_files = ../x\n", "f:2: protected_files '../x'" },
	{ ENV_INI, "[env]\nautonomy = full\nautonomy = supervised\n", "f:3: autonomy is given twice" },
	{ ENV_INI, "[env]\nautonomy = full\n   supervised\n",
	    "f:3: autonomy: only [prompt] system and lists may continue" },
	{ ENV_INI, "[env]\nautonomy = full\n[llm]\n[env]\nautonomy = full\n", "f:5: autonomy is given twice" },
	{ ENV_INI, "[env]\ncheck_command = gleam check\n  --target js\n", "f:3: check_command: only" },
	{ ENV_INI, "[prompt]\nsystem = a\nsystem = b\n", "f:3: system is given twice" },
	{ ENV_INI, "[prompt]\nsystem = a\nsystem_file = p.md\n", "f:3: give system or system_file, not both" },
	{ ENV_INI, "[prompt]\nsystem_file =\n", "f:2: system_file is empty" },
	{ ENV_INI, "[prompt]\nsystem_file = ../../etc/passwd\n", "f:2: system_file '../../etc/passwd' is outside" },
	{ ENV_INI, "[env]\nthis line has no equals sign\n", "f:2: syntax error" },
	{ ENV_INI, "[env\nautonomy = full\n", "f:1: syntax error" },
	{ ENV_INI, "[env]\nautonomy = full\n\xff\xfe\n", "f:3: not valid UTF-8" },
	{ ENV_INI, "[env]\nautonomy = \xc0\xafull\n", "f:2: not valid UTF-8" },
	{ ENV_INI, "[env]\ncheck_command = rm\x1b[2J\n", "f:2: check_command: holds a control" },
	{ ENV_INI, "[env]\ndeny_commands = sudo *, \xe2\x80\xae" "evil\n", "f:2: deny_commands: holds a control, bidi" },
	{ ENV_INI, "[env]\nask_commands = git push *\n[env]\nbogus=1\n", "f:4: unknown key 'bogus'" },
	{ ENV_INI, "[env]\nautonomy = full\n[exec]\ntimeout_ms = 1e3\n", "f:4: timeout_ms" },

	{ ENV_JSON, "{\"env\": {\"bogus\": 1}}", "f:1: unknown key 'bogus' in [env]" },
	{ ENV_JSON, "{\n\"env\": {\n\"autonomy\": \"yolo\"\n}\n}", "f:3: autonomy = 'yolo'" },
	{ ENV_JSON, "{\"nope\": {}}", "f:1: unknown section [nope]" },
	{ ENV_JSON, "{\"env\": []}", "f:1: [env] must be an object" },
	{ ENV_JSON, "[1, 2]", "f:1: expected a JSON object of sections" },
	{ ENV_JSON, "{\"env\": {\"autonomy\": \"full\",}}", "f:1: column" },
	{ ENV_JSON, "{\n\"env\": {\n\"autonomy\": \"full\"\n}\n", "f:5: column" },
	{ ENV_JSON, "{\"env\": {\"autonomy\": \"full\", \"autonomy\": \"full\"}}", "duplicate" },
	{ ENV_JSON, "{\"env\": {\"max_fix_attempts\": \"lots\"}}", "max_fix_attempts = 'lots'" },
	{ ENV_JSON, "{\"env\": {\"max_fix_attempts\": 1.5}}", "max_fix_attempts: expected a number" },
	{ ENV_JSON, "{\"env\": {\"autonomy\": 3}}", "autonomy: expected a string" },
	{ ENV_JSON, "{\"env\": {\"protected_files\": [1]}}", "protected_files: item 0 is not a string" },
	{ ENV_JSON, "{\"env\": {\"protected_files\": {\"a\": 1}}}", "protected_files: expected an array" },
	{ ENV_JSON, "{\"env\": {\"allowed_root\": \"a\\u0000b\"}}", "f:1: column" },
	{ ENV_JSON, "{\"env\": {\"allowed_root\": null}}", "allowed_root: expected a string" },
	{ ENV_JSON, "{\"env\": {\"allowed_root\": \"/\\u202e/x\"}}", "allowed_root" },
	{ ENV_JSON, "{\"prompt\": {\"system\": \"a\", \"system_file\": \"b\"}}", "not both" },
	{ ENV_JSON, "", "f:1: column" },
	{ ENV_JSON, "{\"env\": {\"deny_commands\": \"a\\u0001b\"}}", "holds a control" },
	{ ENV_INI, "[env]\nask_tools = write_file, Run Script\n", "f:2: ask_tools 'Run Script': a tool name" },
	{ ENV_JSON, "{\"env\": {\"ask_tools\": [\"a/b\"]}}", "ask_tools 'a/b'" },
	/* [mcp.NAME]: external MCP servers (env-mcp.c). */
	{ ENV_INI, "[mcp.a__b]\ncommand = x\n", "f:2: [mcp.a__b] command: a server's name" },
	{ ENV_INI, "[mcp._a]\ncommand = x\n", "a server's name" },
	{ ENV_INI, "[mcp.]\ncommand = x\n", "a server's name" },
	{ ENV_INI, "[mcp.a]\ncommand = x\nurl = http://h/\n", "not both" },
	{ ENV_INI, "[mcp.a]\nargs = x\n", "give command" },
	{ ENV_INI, "[mcp.a]\nurl = ftp://h/\n", "url must start" },
	{ ENV_INI, "[mcp.a]\ncommand = x\ncommand = y\n", "f:3: [mcp.a] command: given twice" },
	{ ENV_INI, "[mcp.a]\ncommand = x\nask = maybe\n", "ask is all, writes or none" },
	{ ENV_INI, "[mcp.a]\ncommand = x\ntimeout_ms = 99\n", "timeout_ms is" },
	{ ENV_INI, "[mcp.a]\ncommand = x\nidle_ms = -1\n", "idle_ms is" },
	{ ENV_INI, "[mcp.a]\ncommand = x\nenv = A-B\n", "a variable name" },
	{ ENV_INI, "[mcp.a]\ncommand = x\ntools = a/b\n", "a tool name" },
	{ ENV_INI, "[mcp.a]\ncommand = x\nwhat = y\n", "unknown key" },
	{ ENV_JSON, "{\"mcp\": []}", "must be an object of servers" },
	{ ENV_JSON, "{\"mcp\": {\"a\": 1}}", "mcp.a must be an object" },
	{ ENV_JSON, "{\"mcp\": {\"a\": {\"command\": \"x\", \"args\": [1]}}}", "items must be strings" },
	{ ENV_JSON, "{\"mcp\": {\"a\": {\"command\": true}}}", "a string, a number or a list" },
	{ ENV_JSON, "{\"mcp\": {\"a\": {}}}", "give command" },
};

/* Parses text; returns the env or NULL with *cause. */
static struct env *
parse(enum env_format fmt, const char *text, size_t len, char **cause)
{
	return env_parse("t", "f", text, len, fmt, cause);
}

/* The malformed-profile table. */
static void
check_bads(void)
{
	struct env	*e;
	char		*cause;
	size_t		 i;

	for (i = 0; i < sizeof bads / sizeof bads[0]; i++) {
		e = parse(bads[i].fmt, bads[i].text, strlen(bads[i].text), &cause);
		CHECK(e == NULL && cause != NULL && strstr(cause, bads[i].want) != NULL,
		    "bad %s #%zu refused: want \"%s\", got \"%s\"",
		    bads[i].fmt == ENV_INI ? "ini" : "json", i, bads[i].want,
		    cause != NULL ? cause : "(accepted)");
		free(cause);
		env_unref(e);
	}

	/* A NUL byte in the middle of an INI file. */
	e = parse(ENV_INI, "[env]\nautonomy = full\0junk\n", 27, &cause);
	CHECK(e == NULL && cause != NULL && strstr(cause, "f:2: a NUL byte") != NULL,
	    "a NUL byte is refused with its line (%s)", cause);
	free(cause);
	/* Too big. */
	{
		char	*big = xmalloc(ENV_FILE_MAX + 2);

		memset(big, ';', ENV_FILE_MAX + 1);
		e = parse(ENV_INI, big, ENV_FILE_MAX + 1, &cause);
		CHECK(e == NULL && strstr(cause, "larger than") != NULL, "a huge profile is refused");
		free(cause);
		free(big);
	}
}

/* Good profiles: every key, long lines, continuation, both formats. */
static void
check_goods(void)
{
	static const char ini_fmt[] =
	    "; a comment\n"
	    "[env]\n"
	    "allowed_root    = ./src/..\n"
	    "read_only_roots = build/packages, %s\n"
	    "protected_files = gleam.toml, manifest.toml\n"
	    "protected_files = priv/**\n"
	    "check_command   = gleam check ; a comment after\n"
	    "max_fix_attempts = 5\n"
	    "autonomy        = read-only\n"
	    "ask_commands    = gleam add *, git push *\n"
	    "deny_commands   = sudo *\n"
	    "[prompt]\n"
	    "system = First line.\n"
	    "  Second line.\n"
	    "[exec]\n"
	    "timeout_ms = 1000\n"
	    "max_output_bytes = 2M\n"
	    "[llm]\n"
	    "provider = openai\n"
	    "model = qwen2.5-coder\n"
	    "base_url = http://127.0.0.1:11434/v1\n";
	static const char json[] =
	    "{\"env\": {\"allowed_root\": \".\", \"read_only_roots\": [\"build/packages\"],"
	    " \"protected_files\": \"gleam.toml, manifest.toml\", \"max_fix_attempts\": 5,"
	    " \"autonomy\": \"full\", \"deny_commands\": [\"sudo *\", \"rm -rf /, really\"]},"
	    " \"prompt\": {\"system\": \"Line one.\\nLine two; with a semicolon.\"},"
	    " \"exec\": {\"timeout_ms\": 1000, \"max_output_bytes\": \"64K\"},"
	    " \"llm\": {\"provider\": \"anthropic\", \"model\": \"claude\"}}";
	struct env		*e;
	const char *const	*v;
	char			*cause, *text, ini[sizeof ini_fmt + 64];
	size_t			 n, i;

	/* An absolute read-only root as this system writes one. */
	snprintf(ini, sizeof ini, ini_fmt, paths_is_absolute("/usr/include") ?
	    "/usr/include" : "C:/include");
	e = parse(ENV_INI, ini, strlen(ini), &cause);
	CHECK(e != NULL, "a full INI profile parses (%s)", cause ? cause : "ok");
	if (e != NULL) {
		CHECK(strcmp(env_name(e), "t") == 0, "name kept");
		n = env_protected(e, &v);
		CHECK(n == 3 && strcmp(v[2], "priv/**") == 0, "a repeated list key adds items");
		CHECK(strcmp(env_check_command(e), "gleam check") == 0,
		    "an inline ';' comment is cut (%s)", env_check_command(e));
		CHECK(env_max_fix_attempts(e) == 5 && env_autonomy(e) == ENV_READ_ONLY,
		    "numbers and enums");
		n = env_ask_commands(e, &v);
		CHECK(n == 2 && strcmp(v[1], "git push *") == 0, "ask_commands split on commas");
		n = env_ask_tools(e, &v);
		CHECK(n == 0, "ask_tools: none by default");
		CHECK(strcmp(env_system_prompt(e), "First line.\nSecond line.") == 0,
		    "a continued system prompt keeps its lines");
		CHECK(env_timeout_ms(e) == 1000 && env_max_output_bytes(e) == 2 << 20,
		    "exec values and size suffixes");
		CHECK(strcmp(env_llm_provider(e), "openai") == 0 &&
		    strcmp(env_llm_base_url(e), "http://127.0.0.1:11434/v1") == 0, "llm values");
		env_unref(e);
	}
	free(cause);

	e = parse(ENV_JSON, json, strlen(json), &cause);
	CHECK(e != NULL, "a full JSON profile parses (%s)", cause ? cause : "ok");
	if (e != NULL) {
		n = env_deny_commands(e, &v);
		CHECK(n == 2 && strcmp(v[1], "rm -rf /, really") == 0,
		    "JSON arrays keep commas inside items");
		n = env_protected(e, &v);
		CHECK(n == 2, "a JSON string list is split on commas");
		CHECK(strstr(env_system_prompt(e), "; with a semicolon") != NULL,
		    "JSON prompts keep ';'");
		CHECK(env_max_output_bytes(e) == 64 << 10, "JSON size as a string with suffix");
		env_unref(e);
	}
	free(cause);

	/* A 10000-byte prompt line is read whole, never cut into a new key. */
	text = xmalloc(20000);
	n = (size_t)snprintf(text, 20000, "[prompt]\nsystem = ");
	for (i = 0; i < 10000; i++)
		text[n++] = (i % 50 == 49) ? ' ' : 'x';
	memcpy(text + n, "autonomy = full\n", 17);
	n += 16;
	e = parse(ENV_INI, text, n, &cause);
	CHECK(e != NULL && strlen(env_system_prompt(e)) > 10000 &&
	    env_autonomy(e) == ENV_SUPERVISED,
	    "a long line stays one value (%s)", cause ? cause : "ok");
	env_unref(e);
	free(cause);
	free(text);

	/* Over the line limit: an error with the line, never a silent cut. */
	text = xmalloc(ENV_LINE_MAX + 100);
	n = (size_t)snprintf(text, 100, "[env]\n\n[prompt]\nsystem = ");
	memset(text + n, 'y', ENV_LINE_MAX);
	n += ENV_LINE_MAX;
	text[n++] = '\n';
	e = parse(ENV_INI, text, n, &cause);
	CHECK(e == NULL && cause != NULL && strstr(cause, "f:4: the line is longer") != NULL,
	    "a line over the limit is refused with its line (%s)", cause ? cause : "accepted");
	free(cause);
	free(text);

	e = parse(ENV_INI, "", 0, &cause);
	CHECK(e != NULL && env_autonomy(e) == ENV_SUPERVISED && env_max_fix_attempts(e) == 3,
	    "an empty profile gives the defaults");
	env_unref(e);
	text = "\xef\xbb\xbf[env]\r\nautonomy = full\r\n";
	e = parse(ENV_INI, text, strlen(text), &cause);
	CHECK(e != NULL && env_autonomy(e) == ENV_FULL, "BOM and CRLF are fine (%s)",
	    cause ? cause : "ok");
	env_unref(e);
	free(cause);
}

static char	ws[256];

/* Writes a file under the workspace. */
static void
put(const char *rel, const char *text)
{
	char	 path[PATH_MAX + 64];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF || fclose(f) != 0) {
		fprintf(stderr, "put %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* Makes a folder under the workspace. */
static void
mkd(const char *rel)
{
	char	path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	mkdir(path, 0755);
}

/* Loads a profile and expects an error containing want. */
static void
load_bad(const char *name, const char *want, const char *what)
{
	struct env	*e = NULL;
	char		*cause = NULL;
	int		 r;

	r = env_load(ws, name, &e, &cause);
	CHECK(r == -1 && e == NULL && cause != NULL && strstr(cause, want) != NULL,
	    "load: %s (%s)", what, cause != NULL ? cause : "loaded");
	free(cause);
}

/* Removes one entry (nftw). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* Loading from a real workspace. */
static void
check_workspace(void)
{
	struct env		*e = NULL, *e2 = NULL;
	struct sandbox		*sb;
	const char *const	*v;
	json_t			*j, *d;
	char			*cause = NULL, want[PATH_MAX + 64], *s;
	enum gbr_err		 k;
	size_t			 n, ai;
	int			 r, links;

	unit_tmpdir(ws, sizeof ws, "env");
	links = unit_can_symlink(ws);

	/* No .gbr_envs, no gleam.toml: the plain built-in default. */
	r = env_load(ws, NULL, &e, &cause);
	CHECK(r == 0 && e != NULL && env_source(e) == NULL && env_check_command(e) == NULL,
	    "built-in default without gleam.toml (%s)", cause ? cause : "ok");
	if (e != NULL) {
		n = env_protected(e, &v);
		CHECK(n == 4 && strcmp(v[0], "gleam.toml") == 0 && strcmp(v[3], ".git/**") == 0,
		    "built-in protects gleam.toml, manifest.toml, .gbr_envs/**, .git/**");
		CHECK(env_ro_roots(e, &v) == 0, "no build/packages: no read-only root");
		CHECK(strstr(env_system_prompt(e), "read_file") != NULL &&
		    strstr(env_system_prompt(e), "search") != NULL &&
		    strstr(env_system_prompt(e), ws) != NULL,
		    "default prompt names the tools and the folder");
		n = env_files(e, &v);
		snprintf(want, sizeof want, "%s/Cargo.toml", ws);
		for (ai = 0; ai < n && strcmp(v[ai], want) != 0; ai++)
			;
		CHECK(ai < n, "built-in default watches the ecosystems' "
		    "files (a Cargo.toml that appears reloads it)");
		env_unref(e);
	}
	free(cause);
	cause = NULL;

	/* A Gleam project: check command, ask_commands, build/packages. */
	put("gleam.toml", "name = \"p\"\n");
	mkd("build");
	mkd("build/packages");
	r = env_load(ws, "default", &e, &cause);
	CHECK(r == 0 && e != NULL && env_check_command(e) != NULL &&
	    strcmp(env_check_command(e), "gleam check") == 0,
	    "built-in default detects gleam.toml (%s)", cause ? cause : "ok");
	if (e != NULL) {
		n = env_ask_commands(e, &v);
		for (ai = 0; ai < n && strcmp(v[ai], "gleam add *") != 0; ai++)
			;
		CHECK(ai < n, "built-in asks for gleam add *");
		for (ai = 0; ai < n && strcmp(v[ai], "git commit *") != 0; ai++)
			;
		CHECK(ai < n, "built-in asks for git commit * (.git is protected)");
		n = env_ro_roots(e, &v);
		snprintf(want, sizeof want, "%s/build/packages", ws);
		CHECK(n == 1 && strcmp(v[0], want) == 0, "built-in read-only root build/packages");
		CHECK(strstr(env_system_prompt(e), "build/packages") != NULL &&
		    strstr(env_system_prompt(e), "gleam check") != NULL &&
		    strstr(env_system_prompt(e), "instead of guessing") != NULL,
		    "default prompt points at build/packages and the check");
		j = env_to_json(e);
		CHECK(j != NULL && json_is_true(json_object_get(j, "builtin")) &&
		    json_is_array(json_object_get(j, "read_only_roots")),
		    "env_to_json of the built-in default");
		json_decref(j);

		/* Its sandbox refuses .gbr_envs, gleam.toml, build/packages. */
		sb = env_sandbox(e, &cause);
		CHECK(sb != NULL, "the built-in default builds a sandbox");
		if (sb != NULL) {
			r = sandbox_write_file(sb, "gleam.toml", 10, "x", 1, NULL, NULL, NULL,
			    &k, &cause);
			CHECK(r == -1 && k == GBR_ERR_PROTECTED_PATH, "sandbox: gleam.toml protected");
			free(cause);
			r = sandbox_write_file(sb, ".gbr_envs/default.ini", 21, "x", 1, NULL,
			    NULL, NULL, &k, &cause);
			CHECK(r == -1 && k == GBR_ERR_PROTECTED_PATH, "sandbox: .gbr_envs protected");
			free(cause);
			r = sandbox_write_file(sb, "build/packages/x", 16, "x", 1, NULL,
			    NULL, NULL, &k, &cause);
			CHECK(r == -1 && k == GBR_ERR_READ_ONLY, "sandbox: build/packages read-only");
			free(cause);
			r = sandbox_write_file(sb, "src/app.gleam", 13, "x", 1, NULL, NULL,
			    NULL, &k, &cause);
			CHECK(r == 0, "sandbox: src/app.gleam writable");
			free(cause);
			cause = NULL;
			sandbox_free(sb);
		}
	}

	/* A default.ini takes over; the list shows it. */
	mkd(".gbr_envs");
	mkd("src");
	mkd("prompts");
	put("prompts/x.md", "You are careful.\n");
	put(".gbr_envs/default.ini", "[env]\nallowed_root = .\nautonomy = full\n"
	    "[prompt]\nsystem_file = prompts/x.md\n");
	r = env_load(ws, NULL, &e2, &cause);
	CHECK(r == 0 && e2 != NULL && env_autonomy(e2) == ENV_FULL &&
	    strcmp(env_system_prompt(e2), "You are careful.\n") == 0,
	    "default.ini is loaded with its system_file (%s)", cause ? cause : "ok");
	if (e2 != NULL) {
		n = env_files(e2, &v);
		snprintf(want, sizeof want, "%s/prompts/x.md", ws);
		CHECK(n == 2 && strstr(v[0], ".gbr_envs/default.ini") != NULL &&
		    strcmp(v[1], want) == 0, "env_files: the profile and its system_file");
		n = env_protected(e2, &v);
		CHECK(n == 1 && strcmp(v[0], "prompts/x.md") == 0,
		    "a system_file inside the root becomes protected");
		if (e != NULL) {
			d = env_diff(e, e2);
			s = json_dumps(d, JSON_COMPACT);
			CHECK(strstr(s, "env.autonomy") != NULL && strstr(s, "prompt.system") != NULL &&
			    strstr(s, "env.check_command") != NULL &&
			    strstr(s, "exec.timeout_ms") == NULL, "env_diff names what changed (%s)", s);
			free(s);
			json_decref(d);
			d = env_diff(e2, e2);
			CHECK(json_array_size(d) == 0, "env_diff of an env with itself is empty");
			json_decref(d);
		}
		env_unref(e2);
	}
	env_unref(e);
	free(cause);
	cause = NULL;

	/*
	 * A system_file whose name has glob characters is protected as
	 * itself, never read as a pattern: the file is protected, a name the
	 * pattern would match is not, and an unclosed '[' breaks nothing.
	 */
	{
		static const struct {
			const char	*name;	/* the system_file */
			const char	*other;	/* a name its pattern would match */
		} lit[] = {
			{ "prompts/[x].md", "prompts/x.md" },
			{ "prompts/p*.md", "prompts/pa.md" },
			{ "prompts/q?.md", "prompts/qa.md" },
			{ "prompts/[y.md", NULL },
		};
		size_t	 i;
		char	 ini[256];
		FILE	*f;

		for (i = 0; i < sizeof lit / sizeof lit[0]; i++) {
			/* Windows allows no '*' or '?' in a name: no such file. */
			snprintf(want, sizeof want, "%s/%s", ws, lit[i].name);
			if ((f = fopen(want, "w")) == NULL && errno == EINVAL) {
				unit_skip(lit[i].other != NULL ? 4 : 3, "this "
				    "system allows no such character in a file "
				    "name");
				continue;
			}
			if (f != NULL)
				fclose(f);
			put(lit[i].name, "Literal.\n");
			snprintf(ini, sizeof ini, "[prompt]\nsystem_file = %s\n",
			    lit[i].name);
			put(".gbr_envs/lit.ini", ini);
			e2 = NULL;
			r = env_load(ws, "lit", &e2, &cause);
			sb = r == 0 ? env_sandbox(e2, &cause) : NULL;
			CHECK(sb != NULL, "system_file %s: the profile and its "
			    "sandbox load (%s)", lit[i].name, cause ? cause : "ok");
			free(cause);
			cause = NULL;
			if (sb == NULL) {
				env_unref(e2);
				continue;
			}
			n = env_protected_paths(e2, &v);
			CHECK(n == 1 && strcmp(v[0], lit[i].name) == 0 &&
			    env_protected(e2, &v) == 0, "system_file %s is a "
			    "protected path, not a pattern", lit[i].name);
			s = NULL;
			r = sandbox_write_file(sb, lit[i].name, strlen(lit[i].name),
			    "x", 1, NULL, NULL, NULL, &k, &s);
			/*
			 * A name with '*' or '?' is refused to the agent on
			 * every system (one meaning: Windows has no such
			 * name); any other waits for a human.
			 */
			CHECK(r == -1 && (strpbrk(lit[i].name, "*?") != NULL ?
			    k == GBR_ERR_INVALID_PATH : k == GBR_ERR_PROTECTED_PATH),
			    "system_file %s: the agent may not write it without "
			    "a human (%s)", lit[i].name, r == 0 ? "WRITTEN" : s);
			free(s);
			s = NULL;
			if (lit[i].other != NULL) {
				r = sandbox_write_file(sb, lit[i].other,
				    strlen(lit[i].other), "x", 1, NULL, NULL, NULL,
				    &k, &s);
				CHECK(r == 0, "system_file %s: %s is not protected "
				    "by it (%s)", lit[i].name, lit[i].other,
				    r == 0 ? "ok" : s);
				free(s);
				s = NULL;
			}
			sandbox_free(sb);
			env_unref(e2);
		}
		snprintf(want, sizeof want, "%s/.gbr_envs/lit.ini", ws);
		unlink(want);
	}

	put(".gbr_envs/other.json", "{\"env\": {\"allowed_root\": \"src\"}}");
	put(".gbr_envs/bad name.ini", "");
	j = env_list(ws, &cause);
	s = json_dumps(j, JSON_COMPACT);
	CHECK(j != NULL && json_array_size(j) == 2 && strstr(s, "\"default\"") != NULL &&
	    strstr(s, "\"other\"") != NULL && strstr(s, "bad name") == NULL,
	    "env_list lists valid names only (%s)", s);
	free(s);
	json_decref(j);
	r = env_load(ws, "other", &e, &cause);
	snprintf(want, sizeof want, "%s/src", ws);
	CHECK(r == 0 && strcmp(env_allowed_root(e), want) == 0,
	    "a JSON profile with allowed_root = src (%s)", cause ? cause : "ok");
	env_unref(e);
	free(cause);
	cause = NULL;

	load_bad("nothere", "no profile 'nothere'", "a missing profile is an error");
	load_bad("../default", "not a profile name", "a path as a name is refused");
	load_bad("a/b", "not a profile name", "a slash in a name is refused");
	load_bad(".hidden", "not a profile name", "a leading dot is refused");
	put(".gbr_envs/other.ini", "[env]\n");
	load_bad("other", "keep one", "both other.ini and other.json");
	unlink(strcat(strcpy(want, ws), "/.gbr_envs/other.ini"));

	put(".gbr_envs/gone.ini", "[env]\n\nallowed_root = missing\n");
	load_bad("gone", "gone.ini:3: allowed_root 'missing'", "allowed_root that does not exist");
	put(".gbr_envs/file.ini", "[env]\nallowed_root = gleam.toml\n");
	load_bad("file", "file.ini:2: allowed_root 'gleam.toml' is not a folder",
	    "allowed_root that is a file");
	snprintf(want, sizeof want, "%s/escape", ws);
	if (links) {
		if (symlink("/tmp", want) != 0)
			exit(99);
		put(".gbr_envs/esc.ini", "[env]\nallowed_root = escape\n");
		load_bad("esc", "esc.ini:2: allowed_root 'escape' is outside "
		    "the workspace", "allowed_root through a symlink out");
	} else
		unit_skip(1, UNIT_NO_SYMLINKS);
	/* A folder outside, absolute as this system writes it. */
	{
		const char	*out = paths_is_absolute("/etc") ? "/etc" :
		    "C:/Windows";
		char		 ini[128], msg[128];

		snprintf(ini, sizeof ini, "[env]\nallowed_root = %s\n", out);
		put(".gbr_envs/abs.ini", ini);
		snprintf(msg, sizeof msg, "abs.ini:2: allowed_root '%s' is "
		    "outside", out);
		load_bad("abs", msg, "allowed_root absolute outside");
	}
	put(".gbr_envs/sf.ini", "[prompt]\n\nsystem_file = prompts/none.md\n");
	load_bad("sf", "sf.ini:3: system_file 'prompts/none.md'", "a missing system_file");
	put(".gbr_envs/sfd.ini", "[prompt]\nsystem_file = prompts\n");
	load_bad("sfd", "sfd.ini:2: system_file 'prompts': not a regular file",
	    "a system_file that is a folder");
	put(".gbr_envs/rof.ini", "[env]\nread_only_roots = gleam.toml\n");
	load_bad("rof", "rof.ini:2: read_only_roots: 'gleam.toml' is not a folder",
	    "a read-only root that is a file");
	put(".gbr_envs/js.json", "{\n  \"env\": {\n    \"allowed_root\": \"nope\"\n  }\n}\n");
	load_bad("js", "js.json:3: allowed_root 'nope'", "JSON: the key's line is found");

	/* Links out of the workspace: a profile, a system_file (a command the
	 * agent ran could plant them to read a secret into a prompt). */
	{
		char	secret[512], lpath[PATH_MAX + 64];
		FILE	*f;

		snprintf(secret, sizeof secret, "%s.secret", ws);
		if ((f = fopen(secret, "w")) == NULL)
			exit(99);
		fputs("[env]\nautonomy = full\n", f);
		fclose(f);
		if (links) {
			snprintf(lpath, sizeof lpath, "%s/.gbr_envs/linked.ini",
			    ws);
			if (symlink(secret, lpath) != 0)
				exit(99);
			load_bad("linked", "leads outside the workspace",
			    "a profile that links out");
			snprintf(lpath, sizeof lpath, "%s/prompts/leak.md", ws);
			if (symlink(secret, lpath) != 0)
				exit(99);
			put(".gbr_envs/leak.ini",
			    "[prompt]\nsystem_file = prompts/leak.md\n");
			load_bad("leak", "leak.ini:2: system_file "
			    "'prompts/leak.md': it leads outside",
			    "a system_file that links out");
		} else
			unit_skip(2, UNIT_NO_SYMLINKS);
		snprintf(want, sizeof want, "[prompt]\nsystem_file = %s\n", secret);
		put(".gbr_envs/abssf.ini", want);
		r = env_load(ws, "abssf", &e, &cause);
		CHECK(r == 0 && strcmp(env_system_prompt(e), "[env]\nautonomy = full\n") == 0,
		    "an absolute system_file is the human's choice (%s)", cause ? cause : "ok");
		env_unref(e);
		free(cause);
		cause = NULL;
		unlink(secret);
	}

	put(".gbr_envs/later.ini", "[env]\nread_only_roots = deps/later\n");
	r = env_load(ws, "later", &e, &cause);
	CHECK(r == 0 && env_ro_roots(e, &v) == 0 && env_warnings(e, &v) == 1 &&
	    strstr(v[0], "deps/later") != NULL,
	    "a read-only root that does not exist yet is a warning (%s)", cause ? cause : "ok");
	env_unref(e);
	free(cause);
	cause = NULL;

	CHECK(env_name_valid("default") && env_name_valid("gleam-web_2.x") &&
	    !env_name_valid("") && !env_name_valid("a..b") && !env_name_valid("-x"),
	    "profile name rules");

	nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* [mcp.NAME] in INI and JSON give the same servers. */
static void
check_mcp(void)
{
	static const char ini[] = "[env]\nautonomy = full\n"
	    "[mcp.mem]\ncommand = node\nargs = a.js, --flag\nargs = more\n"
	    "env = TOKEN\nask = all\ntools = x, y\ndeny_tools = z\n"
	    "timeout_ms = 500\nidle_ms = 0\n[mcp.web]\nurl = https://h/mcp\n";
	static const char js[] = "{\"env\": {\"autonomy\": \"full\"}, \"mcp\": "
	    "{\"mem\": {\"command\": \"node\", \"args\": [\"a.js\", \"--flag\", "
	    "\"more\"], \"env\": [\"TOKEN\"], \"ask\": \"all\", \"tools\": "
	    "[\"x\", \"y\"], \"deny_tools\": [\"z\"], \"timeout_ms\": 500, "
	    "\"idle_ms\": 0}, \"web\": {\"url\": \"https://h/mcp\"}}}";
	struct env	*a, *b, *none;
	char		*cause;
	json_t		*d, *v;
	size_t		 i;
	int		 found;

	a = parse(ENV_INI, ini, strlen(ini), &cause);
	CHECK(a != NULL, "INI mcp parses (%s)", cause != NULL ? cause : "");
	free(cause);
	b = parse(ENV_JSON, js, strlen(js), &cause);
	CHECK(b != NULL, "JSON mcp parses (%s)", cause != NULL ? cause : "");
	free(cause);
	if (a == NULL || b == NULL)
		return;
	CHECK(json_equal((json_t *)env_mcp(a), (json_t *)env_mcp(b)),
	    "INI and JSON give the same servers");
	CHECK(json_array_size(json_object_get(json_object_get(env_mcp(a),
	    "mem"), "args")) == 3, "args: a repeated key adds items");
	none = parse(ENV_INI, "[env]\nautonomy = full\n", 22, &cause);
	CHECK(none != NULL && env_mcp(none) == NULL, "no [mcp.*]: none");
	free(cause);
	d = env_diff(none, a);
	found = 0;
	json_array_foreach(d, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), "mcp") == 0)
			found = 1;
	CHECK(found, "env_diff says mcp changed");
	json_decref(d);
	d = env_diff(a, b);
	CHECK(d != NULL && json_array_size(d) == 0, "same servers: no diff");
	json_decref(d);
	env_unref(a);
	env_unref(b);
	env_unref(none);
}

int
main(void)
{
	check_bads();
	check_mcp();
	check_goods();
	check_workspace();
	return unit_done();
}
