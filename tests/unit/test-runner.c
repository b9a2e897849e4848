/*
 * Unit tests for the pure parts of the run tools (tool-run.h): splitting a
 * check_command without a shell, what each script language runs as, the command patterns of deny_commands
 * and ask_commands (and the wrappers they look through), the variables a
 * child may get, the JSON form of output bytes, the diagnostics check
 * returns, signal names, and gbrd.conf's [exec] section. The runner's
 * processes are tested for real by tests/system/test_runner.py.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "runner.h"
#include "tool-run.h"
#include "unit.h"

/* Splits and compares with the expected words (NULL-terminated). */
static int
split_is(const char *line, const char *const *want)
{
	const char	*why;
	char		**v = tool_run_split(line, &why);
	size_t		  i;
	int		  ok = v != NULL;

	for (i = 0; ok && want[i] != NULL; i++)
		ok = v[i] != NULL && strcmp(v[i], want[i]) == 0;
	ok = ok && v[i] == NULL;
	tool_run_strv_free(v);
	return ok;
}

/* True if the line is refused. */
static int
split_refused(const char *line)
{
	const char	*why = NULL;
	char		**v = tool_run_split(line, &why);

	tool_run_strv_free(v);
	return v == NULL && why != NULL;
}

static void
test_split(void)
{
	static const char *const w1[] = { "gleam", "check", NULL };
	static const char *const w2[] = { "make", "-C", "build dir", "-j4", NULL };
	static const char *const w3[] = { "sh", "-c", "a | b && c", NULL };
	static const char *const w4[] = { "echo", "a\"b", "c\\d", "$x", NULL };
	static const char *const w5[] = { "x", "", "y", NULL };
	static const char *const w6[] = { "a b", NULL };

	CHECK(split_is("gleam check", w1), "split: two words");
	CHECK(split_is("  gleam\t check  ", w1), "split: blanks around");
	CHECK(split_is("make -C 'build dir' -j4", w2), "split: single quotes");
	CHECK(split_is("make -C \"build dir\" -j4", w2), "split: double quotes");
	CHECK(split_is("make -C build\\ dir -j4", w2), "split: backslash blank");
	CHECK(split_is("sh -c 'a | b && c'", w3), "split: a quoted shell string");
	CHECK(split_is("echo \"a\\\"b\" 'c\\d' '$x'", w4),
	    "split: escapes in \"\", none in ''");
	CHECK(split_is("x '' y", w5), "split: an empty quoted word");
	CHECK(split_is("a' 'b", w6), "split: quotes join a word");
	CHECK(split_refused("make && make check"), "split: && refused");
	CHECK(split_refused("make | tee log"), "split: | refused");
	CHECK(split_refused("make; rm -rf /"), "split: ; refused");
	CHECK(split_refused("cat < x"), "split: < refused");
	CHECK(split_refused("echo $(id)"), "split: $( refused");
	CHECK(split_refused("echo `id`"), "split: backquote refused");
	CHECK(split_refused("echo \"$HOME\""), "split: $ inside \"\" refused");
	CHECK(split_refused("echo 'open"), "split: unclosed ' refused");
	CHECK(split_refused("echo \"open"), "split: unclosed \" refused");
	CHECK(split_refused("echo x\\"), "split: trailing backslash refused");
	CHECK(split_refused("   "), "split: nothing refused");
	CHECK(split_refused("a\nb"), "split: a newline refused");
}

/* True if a script's argument vector is want, then the code. */
static int
script_is(const char *lang, const char *const *want)
{
	char	**v = tool_run_script_argv(lang, "CODE");
	size_t	  i;
	int	  ok = 1;

	for (i = 0; ok && want[i] != NULL; i++)
		ok = v[i] != NULL && strcmp(v[i], want[i]) == 0;
	ok = ok && v[i] != NULL && strcmp(v[i], "CODE") == 0 && v[i + 1] == NULL;
	tool_run_strv_free(v);
	return ok;
}

static void
test_script_argv(void)
{
	static const char *const py[] = { "python3", "-c", NULL };
	static const char *const node[] = { "node", "-e", NULL };
	static const char *const sh[] = { "sh", "-c", NULL };
	static const char *const cmd[] = { "cmd", "/d", "/q", "/c", NULL };
	static const char *const ps[] = { "powershell", "-NoLogo", "-NoProfile",
	    "-NonInteractive", "-Command", NULL };

	CHECK(script_is("python", py), "script: python3 -c CODE");
	CHECK(script_is("node", node), "script: node -e CODE");
	CHECK(script_is("sh", sh), "script: sh -c CODE");
	CHECK(script_is(NULL, sh), "script: no language is sh");
	CHECK(script_is("cmd", cmd), "script: cmd /d /q /c CODE (no AutoRun, "
	    "echo off)");
	CHECK(script_is("powershell", ps), "script: powershell without a "
	    "profile or prompts");
}

static void
test_wildcard(void)
{
	char	*big;
	size_t	 n = 200000;

	CHECK(tool_run_wildcard("*", ""), "wildcard: * matches empty");
	CHECK(tool_run_wildcard("install*", "install-strip"), "wildcard: prefix");
	CHECK(!tool_run_wildcard("install*", "uninstall"), "wildcard: anchored");
	CHECK(tool_run_wildcard("a?c", "abc"), "wildcard: ?");
	CHECK(!tool_run_wildcard("a?c", "ac"), "wildcard: ? needs one");
	CHECK(tool_run_wildcard("[a-c]x", "bx"), "wildcard: class");
	CHECK(!tool_run_wildcard("[!a-c]x", "bx"), "wildcard: negated class");
	CHECK(tool_run_wildcard("\\*", "*"), "wildcard: escaped *");
	CHECK(!tool_run_wildcard("\\*", "x"), "wildcard: escaped * is literal");
	CHECK(tool_run_wildcard("*/bin/*", "/usr/bin/sudo"),
	    "wildcard: * crosses /");
	CHECK(tool_run_wildcard("[x", "[x"), "wildcard: unclosed [ is literal");
	/* Quadratic at worst: this finishes at once (it would not if exponential). */
	big = malloc(n + 1);
	memset(big, 'a', n);
	big[n] = '\0';
	CHECK(!tool_run_wildcard("*a*a*a*a*a*a*a*a*b", big),
	    "wildcard: many stars over 200k bytes, no match");
	big[n - 1] = 'b';
	CHECK(tool_run_wildcard("*a*a*a*a*a*a*a*a*b", big),
	    "wildcard: many stars over 200k bytes, match");
	free(big);
}

static void
test_match(void)
{
	static const char *const sudo[] = { "sudo", NULL };
	static const char *const sudo_ls[] = { "/usr/bin/sudo", "ls", NULL };
	static const char *const env_sudo[] = { "env", "A=1", "-i", "sudo", "id", NULL };
	static const char *const nice_sudo[] = { "nice", "-n", "5", "sudo", "id", NULL };
	static const char *const timeout_sudo[] = { "timeout", "5", "sudo", "x", NULL };
	static const char *const sh_sudo[] = { "sh", "-c", "ls; sudo rm -rf /", NULL };
	static const char *const bash_push[] = { "bash", "-c",
	    "make && git push origin main", NULL };
	static const char *const push[] = { "git", "push", "origin", "main", NULL };
	static const char *const push0[] = { "git", "push", NULL };
	static const char *const pull[] = { "git", "pull", NULL };
	static const char *const push_one[] = { "git", "push --force", NULL };
	static const char *const inst[] = { "make", "install-strip", NULL };
	static const char *const rmrf[] = { "rm", "-rf", "/", NULL };
	static const char *const rmr[] = { "rm", "-r", "/", NULL };
	static const char *const gadd[] = { "gleam", "add", "lustre", NULL };
	static const char *const echo[] = { "echo", "sudo", NULL };

	CHECK(tool_run_match("sudo *", sudo), "match: 'sudo *' matches bare sudo");
	CHECK(tool_run_match("sudo *", sudo_ls), "match: by base name");
	CHECK(!tool_run_match("/bin/sudo *", sudo_ls),
	    "match: a pattern with / compares the whole argv[0]");
	CHECK(tool_run_match("sudo *", env_sudo), "match: through env A=1 -i");
	CHECK(tool_run_match("sudo *", nice_sudo), "match: through nice -n 5");
	CHECK(tool_run_match("sudo *", timeout_sudo), "match: through timeout 5");
	CHECK(tool_run_match("sudo *", sh_sudo), "match: inside sh -c");
	CHECK(tool_run_match("git push *", bash_push), "match: after && in bash -c");
	CHECK(tool_run_match("git push *", push), "match: git push origin main");
	CHECK(tool_run_match("git push *", push0), "match: git push alone");
	CHECK(!tool_run_match("git push *", pull), "match: git pull is not");
	CHECK(!tool_run_match("git push *", push_one),
	    "match: one argument 'push --force' is not the word push");
	CHECK(tool_run_match("make install*", inst), "match: a glob word");
	CHECK(tool_run_match("rm -rf *", rmrf), "match: rm -rf /");
	CHECK(!tool_run_match("rm -rf *", rmr), "match: rm -r / is another pattern");
	CHECK(tool_run_match("gleam add *", gadd), "match: gleam add lustre");
	CHECK(!tool_run_match("sudo *", echo), "match: sudo as an argument is not");
	CHECK(!tool_run_match("git push", push), "match: no * means exact length");
	CHECK(!tool_run_match("sudo 'unclosed", sudo),
	    "match: a broken pattern matches nothing");
}

static void
test_env_names(void)
{
	CHECK(!tool_run_env_name_ok("GEMINI_API_KEY"), "env: GEMINI_API_KEY never");
	CHECK(!tool_run_env_name_ok("OPENAI_API_KEY"), "env: OPENAI_API_KEY never");
	CHECK(!tool_run_env_name_ok("ANTHROPIC_API_KEY"),
	    "env: ANTHROPIC_API_KEY never");
	CHECK(!tool_run_env_name_ok("GITHUB_TOKEN"), "env: a token never");
	CHECK(!tool_run_env_name_ok("aws_secret_access_key"),
	    "env: lower case too");
	CHECK(!tool_run_env_name_ok("DB_PASSWORD"), "env: a password never");
	CHECK(!tool_run_env_name_ok("LD_PRELOAD"), "env: LD_PRELOAD never");
	CHECK(!tool_run_env_name_ok("GLIBC_TUNABLES"), "env: GLIBC_TUNABLES never");
	CHECK(!tool_run_env_name_ok("1ABC"), "env: not a name");
	CHECK(!tool_run_env_name_ok("A-B"), "env: not a name (dash)");
	CHECK(tool_run_env_name_ok("GOPATH"), "env: GOPATH is fine");
	CHECK(tool_run_env_name_ok("CC"), "env: CC is fine");
}

/* The JSON of some bytes: its encoding and its string. */
static int
bytes_are(const char *s, size_t len, const char *enc, const char *want)
{
	const char	*e;
	json_t		*j = tool_run_bytes_json(s, len, &e);
	int		 ok;

	ok = j != NULL && strcmp(e, enc) == 0 &&
	    json_string_length(j) == strlen(want) &&
	    memcmp(json_string_value(j), want, strlen(want)) == 0;
	json_decref(j);
	return ok;
}

static void
test_bytes(void)
{
	const char	*e;
	json_t		*j;

	CHECK(bytes_are("hello\n", 6, "utf-8", "hello\n"), "bytes: text");
	CHECK(bytes_are("h\xc3\xa9", 3, "utf-8", "h\xc3\xa9"), "bytes: UTF-8 text");
	CHECK(bytes_are("", 0, "utf-8", ""), "bytes: empty");
	CHECK(bytes_are("\xff", 1, "base64", "/w=="), "bytes: 0xff is base64");
	CHECK(bytes_are("\xc0\xaf", 2, "base64", "wK8="), "bytes: overlong is base64");
	CHECK(bytes_are("\xed\xa0\x80", 3, "base64", "7aCA"),
	    "bytes: a surrogate is base64");
	CHECK(bytes_are("abc\xe2\x82", 5, "base64", "YWJj4oI="),
	    "bytes: a cut character is base64");
	CHECK(bytes_are("a\0b", 3, "base64", "YQBi"),
	    "bytes: mostly control characters is base64");
	j = tool_run_bytes_json("0123456789abcdefghij\0", 21, &e);
	CHECK(j != NULL && strcmp(e, "utf-8") == 0 && json_string_length(j) == 21,
	    "bytes: one NUL in text stays text (\\u0000)");
	json_decref(j);
	CHECK(bytes_are("a\tb\r\n", 5, "utf-8", "a\tb\r\n"),
	    "bytes: tab, CR and LF are text");
}

static void
test_diagnostics(void)
{
	const char	*gcc = "src/main.c:12:5: error: 'x' undeclared\n"
			    "make: *** [Makefile:3: all] Error 1\n"
			    "note: nothing here\n";
	const char	*gleam = "error: Unknown variable\n"
			    "  \xe2\x94\x8c\xe2\x94\x80 /w/src/app.gleam:3:10\n";
	json_t		*d;

	d = tool_run_diagnostics(gcc, strlen(gcc), 10);
	/* "[Makefile:3:" has neither '/' nor '.' in its name: not a file. */
	CHECK(json_array_size(d) == 1, "diagnostics: the gcc line found");
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(d, 0),
	    "file")), "src/main.c") == 0 &&
	    json_integer_value(json_object_get(json_array_get(d, 0), "line")) == 12 &&
	    json_integer_value(json_object_get(json_array_get(d, 0), "column")) == 5,
	    "diagnostics: file, line and column");
	json_decref(d);
	d = tool_run_diagnostics(gleam, strlen(gleam), 10);
	CHECK(json_array_size(d) == 1 && strcmp(json_string_value(json_object_get(
	    json_array_get(d, 0), "file")), "/w/src/app.gleam") == 0,
	    "diagnostics: gleam's box-drawn location");
	json_decref(d);
	d = tool_run_diagnostics(gcc, strlen(gcc), 1);
	CHECK(json_array_size(d) == 1, "diagnostics: at most max");
	json_decref(d);
}

static void
test_signals(void)
{
	CHECK(strcmp(runner_signal_name(9), "SIGKILL") == 0, "signal: 9");
	CHECK(strcmp(runner_signal_name(11), "SIGSEGV") == 0, "signal: 11");
	CHECK(strcmp(runner_signal_name(77), "SIG77") == 0, "signal: unnamed");
}

/* Loads a gbrd.conf from text; returns the config or NULL with *cause. */
static struct config *
conf(const char *text, char **cause)
{
	char		 path[] = "/tmp/gbr-test-runner-XXXXXX";
	struct config	*c;
	FILE		*f;
	int		 fd;

	if ((fd = mkstemp(path)) == -1 || (f = fdopen(fd, "w")) == NULL)
		return NULL;
	fputs(text, f);
	fclose(f);
	c = config_load(path, cause);
	unlink(path);
	return c;
}

static void
test_config(void)
{
	struct config	*c;
	char		*cause = NULL;

	c = conf("[exec]\nmax_timeout_ms = 5000\nmax_children = 3\n"
	    "max_children_per_session = 2\nmax_queued = 0\ngrace_ms = 100\n"
	    "max_processes = 64\nmax_memory_bytes = 1G\nlandlock = require\n"
	    "namespaces = off\npass_env = CC, GOPATH\nread_paths = /opt/x\n"
	    "max_output_bytes = 2M\n", &cause);
	CHECK(c != NULL, "config: [exec] accepted (%s)", cause != NULL ? cause : "");
	if (c != NULL) {
		CHECK(c->exec_max_timeout_ms == 5000 && c->exec_max_children == 3 &&
		    c->exec_max_per_session == 2 && c->exec_max_queued == 0 &&
		    c->exec_grace_ms == 100 && c->exec_max_processes == 64 &&
		    c->exec_max_memory_bytes == 1ULL << 30 &&
		    c->exec_landlock == 2 && c->exec_namespaces == 0 &&
		    c->exec_max_output_bytes == 2 << 20,
		    "config: [exec] values");
		CHECK(c->exec_pass_env != NULL &&
		    strcmp(c->exec_pass_env, "CC,GOPATH") == 0,
		    "config: pass_env list");
		config_free(c);
	}
	free(cause);
	cause = NULL;
	c = conf("[exec]\n\npass_env = CC, OPENAI_API_KEY\n", &cause);
	CHECK(c == NULL && cause != NULL && strstr(cause, ":3:") != NULL &&
	    strstr(cause, "secret") != NULL,
	    "config: a secret in pass_env refused with its line (%s)",
	    cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	c = conf("[exec]\nlandlock = maybe\n", &cause);
	CHECK(c == NULL && cause != NULL && strstr(cause, ":2:") != NULL,
	    "config: a bad mode refused with its line");
	free(cause);
	cause = NULL;
	c = conf("[exec]\nfork_server = off\n", &cause);
	CHECK(c != NULL && c->exec_fork_server == 0,
	    "config: fork_server = off accepted");
	config_free(c);
	free(cause);
	cause = NULL;
	c = conf("[exec]\nfork_server = require\n", &cause);
	CHECK(c == NULL && cause != NULL && strstr(cause, "fork_server") != NULL,
	    "config: fork_server takes only off or auto");
	free(cause);
	cause = NULL;
	c = conf("[exec]\nmax_children = 0\n", &cause);
	CHECK(c == NULL, "config: max_children 0 refused");
	free(cause);
	cause = NULL;
	c = conf("[exec]\nread_paths = relative/x\n", &cause);
	CHECK(c == NULL, "config: a relative read path refused");
	free(cause);
	cause = NULL;
	c = conf("[exec]\nbogus = 1\n", &cause);
	CHECK(c == NULL && cause != NULL && strstr(cause, "bogus") != NULL,
	    "config: an unknown [exec] key refused");
	free(cause);
	c = config_defaults();
	CHECK(c->exec_landlock == 1 && c->exec_max_children > 0 &&
	    c->exec_max_timeout_ms > 0 && c->exec_fork_server == 1,
	    "config: [exec] defaults");
	config_free(c);
}

int
main(void)
{
	test_split();
	test_script_argv();
	test_wildcard();
	test_match();
	test_env_names();
	test_bytes();
	test_diagnostics();
	test_signals();
	test_config();
	return unit_done();
}
