/*
 * Unit tests for the policy (policy.h), on a real temporary workspace with
 * one profile per case: deny (read-only autonomy, deny_commands, a path
 * the sandbox refuses), ask (ask_commands, write_protected, ask_tools in
 * supervised autonomy, protected paths, .gbr_envs, a command's change
 * proposed again, a command in full autonomy where writes are not
 * confined) and allow, at each of the three entry points.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "policy.h"
#include "runner.h"
#include "sandbox.h"
#include "tool.h"
#include "unit.h"
#include "xmalloc.h"

static char	ws[256];

/* Tool definitions as the registry holds them (only name and read_only count). */
static const struct tool_def	t_read = { "read_file", "", "{}", 1, 0, 1, NULL, 0 };
static const struct tool_def	t_write = { "write_file", "", "{}", 0, 1, 1, NULL, 0 };
static const struct tool_def	t_command = { "run_command", "", "{}", 0, 1, 0, NULL, 0 };
static const struct tool_def	t_script = { "run_script", "", "{}", 0, 1, 0, NULL, 0 };
static const struct tool_def	t_check = { "check", "", "{}", 0, 0, 1, NULL, 0 };

/* Writes a file of the workspace. */
static void
put(const char *rel, const char *text)
{
	char	 path[PATH_MAX];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) < 0 ||
	    fclose(f) != 0)
		exit(99);
}

/* The env and sandbox of a profile (its [env] lines). */
static struct env *
profile(const char *name, const char *lines, struct sandbox **sb)
{
	struct env	*e;
	char		 rel[128], *text, *cause = NULL;

	snprintf(rel, sizeof rel, ".gbr_envs/%s.ini", name);
	text = xasprintf("[env]\n%s", lines);
	put(rel, text);
	free(text);
	if (env_load(ws, name, &e, &cause) != 0 ||
	    (*sb = env_sandbox(e, &cause)) == NULL) {
		fprintf(stderr, "profile %s: %s\n", name, cause);
		exit(99);
	}
	return e;
}

/* policy_decide on JSON text args. */
static enum policy_verdict
decide(struct env *e, struct sandbox *sb, const struct tool_def *def,
    const char *args, int flags, struct policy_decision *d)
{
	json_t			*a = json_loads(args, 0, NULL);
	enum policy_verdict	 v;

	v = policy_decide(e, sb, def, a, flags, d);
	json_decref(a);
	return v;
}

/* policy_command on a NULL-terminated list of words. */
static enum policy_verdict
command(struct env *e, const struct tool_def *def, int approved,
    enum gbr_err *kind, json_t **data, ...)
{
	const char		*argv[16];
	enum policy_verdict	 v;
	va_list			 ap;
	char			*reason;
	size_t			 n = 0;

	va_start(ap, data);
	while (n < 15 && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	argv[n] = NULL;
	va_end(ap);
	v = policy_command(e, def, argv, approved, kind, &reason, data);
	CHECK((v == POLICY_ALLOW) == (reason == NULL),
	    "command: a reason exactly when not allowed");
	free(reason);
	return v;
}

/* Removes one entry (nftw). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

/* Read-only autonomy writes and runs nothing, at every entry point. */
static void
test_read_only(void)
{
	struct policy_decision	 d;
	struct sandbox		*sb;
	struct env		*e = profile("ro", "autonomy = read-only\n", &sb);
	enum gbr_err		 kind;
	json_t			*data;
	char			*reason;

	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"true\"]}", 0, &d) ==
	    POLICY_DENY && d.kind == GBR_ERR_READ_ONLY && json_is_string(
	    json_object_get(d.data, "autonomy")), "read-only: a command is "
	    "denied (read_only, data autonomy)");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_write, "{\"path\":\"a.txt\",\"content\":\"x\"}",
	    0, &d) == POLICY_DENY && d.kind == GBR_ERR_READ_ONLY,
	    "read-only: a write is denied before the sandbox is asked");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_read, "{\"path\":\"a.txt\"}", 0, &d) ==
	    POLICY_ALLOW, "read-only: a read is allowed");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_check, "{}", 0, &d) == POLICY_ALLOW,
	    "read-only: check is allowed");
	policy_decision_release(&d);
	CHECK(policy_recheck(e, &t_write, &kind, &reason, &data) ==
	    POLICY_DENY && kind == GBR_ERR_READ_ONLY && reason != NULL,
	    "recheck: an approved write is denied when the profile became "
	    "read-only");
	free(reason);
	json_decref(data);
	CHECK(policy_recheck(e, &t_read, &kind, &reason, &data) ==
	    POLICY_ALLOW && reason == NULL && data == NULL,
	    "recheck: a read still runs");
	CHECK(policy_recheck(e, NULL, &kind, &reason, &data) == POLICY_ALLOW,
	    "recheck: an unknown tool is not refused here");
	CHECK(command(e, &t_script, 1, &kind, NULL, "sh", "-c", "true",
	    NULL) == POLICY_DENY && kind == GBR_ERR_PERMISSION_DENIED,
	    "command: read-only refuses even an approved run "
	    "(permission_denied)");
	CHECK(command(e, &t_check, 0, &kind, NULL, "make", NULL) ==
	    POLICY_ALLOW, "command: check is none of the rules' business");
	sandbox_free(sb);
	env_unref(e);
}

/* deny_commands and ask_commands, looked through wrappers and sh -c. */
static void
test_commands(void)
{
	struct policy_decision	 d;
	struct sandbox		*sb;
	/* Supervised: full autonomy asks for every command where writes
	 * are not confined (test_unconfined). */
	struct env		*e = profile("cmds", "autonomy = supervised\n"
				    "deny_commands = sudo *\n"
				    "ask_commands = git push *\n", &sb);
	enum gbr_err		 kind;
	json_t			*data;

	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"sudo\",\"id\"]}", 0,
	    &d) == POLICY_DENY && d.kind == GBR_ERR_DENIED_COMMAND &&
	    strcmp(json_string_value(json_object_get(d.data, "pattern")),
	    "sudo *") == 0 && strstr(d.reason, "deny_commands") != NULL,
	    "deny_commands: denied with the pattern");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_script, "{\"language\":\"sh\",\"code\":"
	    "\"echo hi; sudo id\"}", 0, &d) == POLICY_DENY,
	    "deny_commands: a shell script is looked into");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"git\",\"push\","
	    "\"origin\"]}", 0, &d) == POLICY_ASK &&
	    d.why == POLICY_WHY_ASK_COMMAND && d.effect != NULL &&
	    strcmp(d.command, "git push origin") == 0,
	    "ask_commands: asks, showing the command line");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"echo\",\"it's\"]}", 0,
	    &d) == POLICY_ALLOW && strcmp(d.command, "echo 'it'\\''s'") == 0,
	    "allow: an ordinary command, its line quoted for a shell");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"true\"],"
	    "\"write_protected\":true}", 0, &d) == POLICY_ASK &&
	    d.why == POLICY_WHY_WRITE_PROTECTED,
	    "write_protected: asks");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_command, "{\"argv\":[]}", 0, &d) ==
	    POLICY_ALLOW, "nothing to run: left to the tool's own check");
	policy_decision_release(&d);

	data = NULL;
	CHECK(command(e, &t_command, 1, &kind, &data, "env", "X=1",
	    "/usr/bin/sudo", "id", NULL) == POLICY_DENY &&
	    kind == GBR_ERR_DENIED_COMMAND && json_array_size(json_object_get(
	    data, "argv")) == 4, "command: deny_commands through a wrapper, "
	    "even approved, with pattern and argv");
	json_decref(data);
	CHECK(command(e, &t_command, 0, &kind, &data, "git", "push", "x",
	    NULL) == POLICY_ASK && kind == GBR_ERR_NEEDS_APPROVAL &&
	    json_object_get(data, "pattern") != NULL,
	    "command: ask_commands needs an approval");
	json_decref(data);
	CHECK(command(e, &t_command, 1, &kind, NULL, "git", "push", "x",
	    NULL) == POLICY_ALLOW, "command: an approved ask_commands match "
	    "runs");
	CHECK(command(e, &t_command, 0, &kind, NULL, "echo", "fine", NULL) ==
	    POLICY_ALLOW, "command: anything else runs");
	sandbox_free(sb);
	env_unref(e);
}

/* ask_tools asks in supervised autonomy only. */
static void
test_ask_tools(void)
{
	struct policy_decision	 d;
	struct sandbox		*sb;
	struct env		*e = profile("sup", "autonomy = supervised\n"
				    "ask_tools = read_file\n", &sb);

	CHECK(decide(e, sb, &t_read, "{\"path\":\"a.txt\"}", 0, &d) ==
	    POLICY_ASK && d.why == POLICY_WHY_ASK_TOOL && d.path == NULL,
	    "supervised: a tool in ask_tools asks");
	policy_decision_release(&d);
	sandbox_free(sb);
	env_unref(e);
	e = profile("full", "autonomy = full\nask_tools = read_file\n", &sb);
	CHECK(decide(e, sb, &t_read, "{\"path\":\"a.txt\"}", 0, &d) ==
	    POLICY_ALLOW, "full: ask_tools does not ask");
	policy_decision_release(&d);
	sandbox_free(sb);
	env_unref(e);
}

/*
 * Full autonomy asks before each command where this system does not
 * confine their writes (runner_unconfined: Windows), and nowhere else;
 * each system checks its own answer.
 */
static void
test_unconfined(void)
{
	struct policy_decision	 d;
	struct sandbox		*sb;
	struct env		*e = profile("unconf", "autonomy = full\n", &sb);
	enum gbr_err		 kind;
	int			 asks = runner_unconfined() != NULL;

	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"make\"]}", 0, &d) ==
	    (asks ? POLICY_ASK : POLICY_ALLOW) && (!asks ||
	    (d.why == POLICY_WHY_UNCONFINED && d.effect != NULL &&
	    strcmp(d.command, "make") == 0)), asks ? "full, unconfined: a "
	    "command asks, showing its line" : "full, confined: a command runs");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_script, "{\"language\":\"sh\",\"code\":"
	    "\"true\"}", 0, &d) == (asks ? POLICY_ASK : POLICY_ALLOW),
	    "full: a script as a command");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_read, "{\"path\":\"a.txt\"}", 0, &d) ==
	    POLICY_ALLOW, "full: a read never asks for it");
	policy_decision_release(&d);
	CHECK(command(e, &t_command, 0, &kind, NULL, "make", NULL) ==
	    (asks ? POLICY_ASK : POLICY_ALLOW) && (!asks ||
	    kind == GBR_ERR_NEEDS_APPROVAL), "command: unapproved in full");
	CHECK(command(e, &t_command, 1, &kind, NULL, "make", NULL) ==
	    POLICY_ALLOW, "command: approved in full runs");
	CHECK(command(e, &t_check, 0, &kind, NULL, "make", NULL) ==
	    POLICY_ALLOW, "command: check does not ask");
	sandbox_free(sb);
	env_unref(e);
	e = profile("unconf-sup", "autonomy = supervised\n", &sb);
	CHECK(decide(e, sb, &t_command, "{\"argv\":[\"make\"]}", 0, &d) ==
	    POLICY_ALLOW, "supervised: a command runs (a person watches)");
	policy_decision_release(&d);
	sandbox_free(sb);
	env_unref(e);
}

/* Protected paths and .gbr_envs ask with a diff; the sandbox denies. */
static void
test_files(void)
{
	struct policy_decision	 d;
	struct sandbox		*sb;
	struct env		*e = profile("files", "autonomy = full\n"
				    "protected_files = keep.toml\n", &sb);

	put("keep.toml", "v1\n");
	CHECK(decide(e, sb, &t_write, "{\"path\":\"keep.toml\",\"content\":"
	    "\"v2\\n\"}", 0, &d) == POLICY_ASK &&
	    d.why == POLICY_WHY_PROTECTED_PATH &&
	    strcmp(d.path, "keep.toml") == 0 && d.diff != NULL &&
	    strstr(d.diff, "+v2") != NULL && d.pin.rel != NULL,
	    "protected path: asks with the path, the diff and the pin");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_write, "{\"path\":\".gbr_envs/x.ini\","
	    "\"content\":\"\"}", 0, &d) == POLICY_ASK &&
	    d.why == POLICY_WHY_ENV_DIR, ".gbr_envs: always asks");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_write, "{\"path\":\"other.txt\",\"content\":"
	    "\"x\"}", 0, &d) == POLICY_ALLOW && d.diff == NULL &&
	    d.pin.rel != NULL, "allow: an ordinary file, pinned, no diff kept");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_write, "{\"path\":\"other.txt\",\"content\":"
	    "\"x\"}", POLICY_ASK_ALWAYS, &d) == POLICY_ASK &&
	    d.why == POLICY_WHY_COMMAND_CHANGE && d.effect != NULL,
	    "a command's change proposed again always asks");
	policy_decision_release(&d);
	CHECK(decide(e, sb, &t_write, "{\"path\":\"../out.txt\",\"content\":"
	    "\"x\"}", 0, &d) == POLICY_DENY &&
	    d.kind == GBR_ERR_PATH_TRAVERSAL && d.reason != NULL,
	    "a path the sandbox refuses is denied");
	policy_decision_release(&d);
	sandbox_free(sb);
	env_unref(e);
}

int
main(void)
{
	char	dir[300];

	snprintf(ws, sizeof ws, "/tmp/gbr-test-policy-XXXXXX");
	if (mkdtemp(ws) == NULL)
		return 99;
	snprintf(dir, sizeof dir, "%s/.gbr_envs", ws);
	if (mkdir(dir, 0755) != 0)
		return 99;
	test_read_only();
	test_commands();
	test_unconfined();
	test_ask_tools();
	test_files();
	nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return unit_done();
}
