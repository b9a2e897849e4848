/*
 * The policy (see policy.h): the rules themselves, and what a human is
 * shown when one of them asks (the canonical path and diff of a file
 * change, the command line of a run). The rules are small functions
 * shared by the three entry points, so a rule is written once whoever
 * asks: read-only autonomy, what the sandbox refuses, protected paths and
 * .gbr_envs, deny_commands, ask_commands, write_protected and ask_tools.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "diff.h"
#include "env.h"
#include "policy.h"
#include "runner.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-run.h"
#include "xmalloc.h"

#define POLICY_COMMAND_MAX	(16 * 1024)	/* bytes of a command shown */

/* What a yes to a run that asks lets it do (tool-run-locks.c, tr_lockset). */
#define POLICY_RUN_EFFECT "if approved, this run may also write the " \
	"protected files, .git/hooks and .git/config (and all of .git where " \
	"it is protected); never .gbr_envs or the read-only roots"
#define POLICY_CHANGE_EFFECT "a command changed this file; gbrd put it " \
	"back as it was: approving writes the command's version"
#define POLICY_UNCONFINED_EFFECT "if approved, this command runs without " \
	"write confinement: it can write anywhere your account can"

/*
 * True if a command must ask because nothing confines its writes here
 * (runner_unconfined: Windows, unless gbrd.conf accepts the risk) and
 * full autonomy would otherwise run it unseen. In supervised autonomy a
 * person watches the session and ask_tools decides, as everywhere.
 */
static int
policy_unconfined(const struct env *env)
{
	return env_autonomy(env) == ENV_FULL && runner_unconfined() != NULL;
}

/* True if read-only autonomy refuses def: it writes or runs, and is not check. */
static int
policy_read_only(const struct env *env, const struct tool_def *def)
{
	return env_autonomy(env) == ENV_READ_ONLY && def != NULL &&
	    !def->read_only && strcmp(def->name, "check") != 0;
}

/* The first of n patterns that argv matches, or NULL. */
static const char *
policy_match(const char *const *pats, size_t n, char *const *argv)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (tool_run_match(pats[i], (const char *const *)argv))
			return pats[i];
	return NULL;
}

/* The deny_commands pattern argv matches, or NULL. */
static const char *
policy_denied(const struct env *env, char *const *argv)
{
	const char *const	*pats;
	size_t			 n = env_deny_commands(env, &pats);

	return policy_match(pats, n, argv);
}

/* The ask_commands pattern argv matches, or NULL. */
static const char *
policy_asked(const struct env *env, char *const *argv)
{
	const char *const	*pats;
	size_t			 n = env_ask_commands(env, &pats);

	return policy_match(pats, n, argv);
}

/* The refusal of a deny_commands match. */
static char *
policy_denied_reason(const char *pattern, char *const *argv)
{
	return xasprintf("'%s' is refused by this environment (deny_commands: "
	    "%s)", argv[0], pattern);
}

/* The argument vector a run tool would run, for the command patterns. */
static char **
policy_run_argv(const char *tool, json_t *args)
{
	json_t		*a = json_object_get(args, "argv"), *v;
	char		**argv;
	size_t		 i, n;

	if (strcmp(tool, "run_command") != 0)
		return tool_run_script_argv(json_string_value(json_object_get(
		    args, "language")), json_string_value(json_object_get(args,
		    "code")));
	n = json_array_size(a);
	argv = xcalloc(n + 1, sizeof *argv);
	json_array_foreach(a, i, v)
		argv[i] = xstrdup(json_is_string(v) ? json_string_value(v) : "");
	return argv;
}

/* A command line as a human reads it: words quoted for a POSIX shell. */
static char *
policy_command_line(char *const *argv)
{
	static const char	 safe[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
	char			*out;
	size_t			 len = 0, cap = 256, i, total = 0, k;
	const char		*s;

	out = xmalloc(cap);
	out[0] = '\0';
#define POLICY_PUT(ch) do {						\
	if (len + 2 > cap) {						\
		cap *= 2;						\
		out = xreallocarray(out, cap, 1);			\
	}								\
	out[len++] = (ch);						\
	out[len] = '\0';						\
} while (0)
	for (i = 0; argv[i] != NULL; i++) {
		s = argv[i];
		total += strlen(s) + 1;
		if (len > POLICY_COMMAND_MAX)
			continue;
		if (i > 0)
			POLICY_PUT(' ');
		if (*s != '\0' && strspn(s, safe) == strlen(s)) {
			for (k = 0; s[k] != '\0'; k++)
				POLICY_PUT(s[k]);
			continue;
		}
		POLICY_PUT('\'');
		for (k = 0; s[k] != '\0'; k++) {
			if (s[k] == '\'') {
				POLICY_PUT('\'');
				POLICY_PUT('\\');
				POLICY_PUT('\'');
			}
			POLICY_PUT(s[k]);
		}
		POLICY_PUT('\'');
	}
#undef POLICY_PUT
	if (len > POLICY_COMMAND_MAX) {
		/* Said, never hidden: a human sees that it was cut. */
		out[POLICY_COMMAND_MAX] = '\0';
		s = out;
		out = xasprintf("%s ... (cut: %zu bytes in all)", s, total);
		free((char *)s);
	}
	return out;
}

/* The path as the human knows it: relative to the workspace. */
static char *
policy_ws_path(const struct env *env, const char *rel)
{
	const char	*ws = env_workspace(env), *root = env_allowed_root(env);
	size_t		 n = strlen(ws);

	if (strcmp(ws, root) == 0 || strncmp(root, ws, n) != 0 ||
	    root[n] != '/')
		return xstrdup(rel);
	return xasprintf("%s/%s", root + n + 1, rel);
}

/* True if a canonical path is the profiles' folder or inside it. */
static int
policy_env_dir(const char *rel)
{
	const char	*p;
	size_t		 n = strlen(ENV_DIR);

	for (p = rel; p != NULL; p = strchr(p, '/') != NULL ?
	    strchr(p, '/') + 1 : NULL) {
		if (strncasecmp(p, ENV_DIR, n) == 0 &&
		    (p[n] == '/' || p[n] == '\0'))
			return 1;
	}
	return 0;
}

/*
 * A file change: deny what the sandbox refuses (-1 with d->kind and
 * d->reason), else its canonical path, its diff, and the pin of what it
 * resolved to, all from one look at the file: the diff is made from
 * exactly the bytes the pin's hash covers. *protected says whether the
 * path asks.
 */
static int
policy_file(const struct env *env, struct sandbox *sb, const char *tool,
    json_t *args, struct policy_decision *d, int *protected)
{
	struct sandbox_check	 chk;
	json_t			*jp = json_object_get(args, "path");
	json_t			*jc = json_object_get(args, "content");
	const char		*p = json_string_value(jp);
	char			*after = NULL, *shown;
	size_t			 plen = json_string_length(jp), alen = 0;
	int			 edit = strcmp(tool, "edit_file") == 0;

	if (!edit)
		alen = json_string_length(jc);
	if (sandbox_check_write(sb, p, plen, alen, &chk, &d->kind,
	    &d->reason) != 0)
		return -1;
	if (edit) {
		/* The edit must apply now; its result is what is asked. */
		if (!chk.pin.exists || chk.cur == NULL) {
			shown = sandbox_escape_for_display(p, plen);
			d->kind = !chk.pin.exists ? GBR_ERR_NOT_FOUND :
			    chk.cur_kind;
			d->reason = xasprintf("'%s': %s", shown,
			    !chk.pin.exists ? "the file does not exist" :
			    chk.cur_why);
			free(shown);
			sandbox_check_release(&chk);
			return -1;
		}
		if (tool_file_edit_text(chk.cur, chk.curlen, args,
		    sandbox_max_write(sb), chk.pin.asked, &after, &alen, NULL,
		    &d->kind, &d->reason) != 0) {
			sandbox_check_release(&chk);
			return -1;
		}
	} else {
		after = xmalloc(alen + 1);
		memcpy(after, json_string_value(jc) != NULL ?
		    json_string_value(jc) : "", alen);
		after[alen] = '\0';
	}
	*protected = chk.protected;
	d->path = policy_ws_path(env, chk.pin.rel);
	d->why = policy_env_dir(chk.pin.rel) ? POLICY_WHY_ENV_DIR :
	    POLICY_WHY_PROTECTED_PATH;
	if (chk.pin.exists && chk.cur == NULL) {
		/* Shown, not guessed: the human sees why there is no diff. */
		d->diff = xasprintf("--- a/%s\n+++ b/%s\n(the current content "
		    "cannot be read for a diff: %s)\n", d->path, d->path,
		    chk.cur_why);
	} else
		d->diff = diff_unified(d->path, chk.cur != NULL ? chk.cur : "",
		    chk.curlen, after, alen, DIFF_OUT_MAX, NULL);
	if (edit) {
		/* gbrctl edit and the REPL show the whole proposed file. */
		d->proposed = after;
		d->proposed_len = alen;
	} else
		free(after);
	/* The pin moves to the decision; the rest of the check goes. */
	d->pin = chk.pin;
	memset(&chk.pin, 0, sizeof chk.pin);
	sandbox_check_release(&chk);
	return 0;
}

/*
 * A run tool's command: deny a deny_commands match (-1), else the command
 * line to show, and 1 if it asks (ask_commands, or write_protected).
 */
static int
policy_run(const struct env *env, const char *tool, json_t *args,
    struct policy_decision *d)
{
	const char	*pat;
	char		**argv = policy_run_argv(tool, args);
	int		  ask = 0;

	if (argv[0] == NULL) {
		/* Nothing to run: the tool itself says why (invalid_params). */
		tool_run_strv_free(argv);
		return 0;
	}
	if ((pat = policy_denied(env, argv)) != NULL) {
		d->kind = GBR_ERR_DENIED_COMMAND;
		d->reason = policy_denied_reason(pat, argv);
		d->data = json_pack("{s:s}", "pattern", pat);
		tool_run_strv_free(argv);
		return -1;
	}
	d->command = policy_command_line(argv);
	if (policy_asked(env, argv) != NULL) {
		ask = 1;
		d->why = POLICY_WHY_ASK_COMMAND;
	} else if (json_is_true(json_object_get(args, "write_protected"))) {
		ask = 1;
		d->why = POLICY_WHY_WRITE_PROTECTED;
	}
	if (ask)
		d->effect = POLICY_RUN_EFFECT;
	else if (policy_unconfined(env)) {
		ask = 1;
		d->why = POLICY_WHY_UNCONFINED;
		d->effect = POLICY_UNCONFINED_EFFECT;
	}
	tool_run_strv_free(argv);
	return ask;
}

/* True if supervised autonomy asks before def (ask_tools). */
static int
policy_ask_tool(const struct env *env, const struct tool_def *def)
{
	const char *const	*pats;
	size_t			 i, n;

	if (env_autonomy(env) != ENV_SUPERVISED)
		return 0;
	n = env_ask_tools(env, &pats);
	for (i = 0; i < n; i++)
		if (strcmp(pats[i], def->name) == 0)
			return 1;
	return 0;
}

/* The decision before a call (see policy.h). */
enum policy_verdict
policy_decide(const struct env *env, struct sandbox *sb,
    const struct tool_def *def, json_t *args, int flags,
    struct policy_decision *d)
{
	const char	*tool = def->name;
	int		 ask = 0, protected = 0, r;

	memset(d, 0, sizeof *d);
	d->verdict = POLICY_DENY;
	/* Deny: read-only autonomy writes and runs nothing. */
	if (policy_read_only(env, def)) {
		d->kind = GBR_ERR_READ_ONLY;
		d->reason = xasprintf("%s: this environment's autonomy is "
		    "read-only (no writes, no commands)", tool);
		d->data = json_pack("{s:s, s:s}", "autonomy", "read-only",
		    "tool", tool);
		return d->verdict;
	}
	if (strcmp(tool, "write_file") == 0 || strcmp(tool, "edit_file") == 0) {
		/* Deny: whatever the sandbox refuses. Ask: protected paths. */
		if (policy_file(env, sb, tool, args, d, &protected) != 0)
			return d->verdict;
		ask = protected;
		if (flags & POLICY_ASK_ALWAYS) {
			ask = 1;
			if (d->why != POLICY_WHY_ENV_DIR)
				d->why = POLICY_WHY_COMMAND_CHANGE;
			d->effect = POLICY_CHANGE_EFFECT;
		}
	} else if (strcmp(tool, "run_command") == 0 ||
	    strcmp(tool, "run_script") == 0) {
		/* Deny: deny_commands. Ask: ask_commands, write_protected. */
		if ((r = policy_run(env, tool, args, d)) < 0)
			return d->verdict;
		ask = r;
	}
	/* Ask: the profile's ask_tools, in supervised autonomy only. */
	if (!ask && policy_ask_tool(env, def)) {
		ask = 1;
		d->why = POLICY_WHY_ASK_TOOL;
	}
	/* Ask: an MCP server's tool, as its [mcp.NAME] ask says. */
	if (!ask && def->ask) {
		ask = 1;
		d->why = POLICY_WHY_MCP_TOOL;
	}
	if (!ask) {
		/* Nothing to show: the diff was only for a human. */
		free(d->diff);
		d->diff = NULL;
	}
	d->verdict = ask ? POLICY_ASK : POLICY_ALLOW;
	return d->verdict;
}

/* Frees a decision's strings, data and pin. */
void
policy_decision_release(struct policy_decision *d)
{
	free(d->reason);
	json_decref(d->data);
	free(d->path);
	free(d->command);
	free(d->diff);
	free(d->proposed);
	sandbox_pin_release(&d->pin);
	memset(d, 0, sizeof *d);
}

/* An approved call is about to run (see policy.h). */
enum policy_verdict
policy_recheck(const struct env *env, const struct tool_def *def,
    enum gbr_err *kind, char **reason, json_t **data)
{
	*reason = NULL;
	*data = NULL;
	if (!policy_read_only(env, def))
		return POLICY_ALLOW;
	*kind = GBR_ERR_READ_ONLY;
	*reason = xstrdup("the environment became read-only before this "
	    "approved call ran");
	*data = json_pack("{s:s, s:s}", "autonomy", "read-only", "tool",
	    def->name);
	return POLICY_DENY;
}

/* A command refusal's or question's data: the pattern and argv. */
static json_t *
policy_command_data(const char *pattern, const char *const *argv)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; argv[i] != NULL; i++)
		json_array_append_new(a, json_string(argv[i]));
	return json_pack("{s:s, s:o}", "pattern", pattern, "argv", a);
}

/* The command rules before a child starts (see policy.h). */
enum policy_verdict
policy_command(const struct env *env, const struct tool_def *def,
    const char *const *argv, int approved, enum gbr_err *kind, char **reason,
    json_t **data)
{
	const char	*pat;

	*reason = NULL;
	if (data != NULL)
		*data = NULL;
	if (strcmp(def->name, "check") == 0)
		return POLICY_ALLOW;
	if (policy_read_only(env, def)) {
		*kind = GBR_ERR_PERMISSION_DENIED;
		*reason = xasprintf("%s: this environment's autonomy is "
		    "read-only", def->name);
		return POLICY_DENY;
	}
	/*
	 * Patterns apply to run_script too: "sh -c CODE" is looked into, so
	 * a shell script cannot simply say what run_command may not.
	 */
	if ((pat = policy_denied(env, (char *const *)argv)) != NULL) {
		*kind = GBR_ERR_DENIED_COMMAND;
		*reason = policy_denied_reason(pat, (char *const *)argv);
		if (data != NULL)
			*data = policy_command_data(pat, argv);
		return POLICY_DENY;
	}
	if (!approved && (pat = policy_asked(env, (char *const *)argv)) != NULL) {
		*kind = GBR_ERR_NEEDS_APPROVAL;
		*reason = xasprintf("'%s' needs a human's approval "
		    "(ask_commands: %s)", argv[0], pat);
		if (data != NULL)
			*data = policy_command_data(pat, argv);
		return POLICY_ASK;
	}
	if (!approved && policy_unconfined(env)) {
		*kind = GBR_ERR_NEEDS_APPROVAL;
		*reason = xasprintf("'%s' needs a human's approval: %s",
		    argv[0], runner_unconfined());
		return POLICY_ASK;
	}
	return POLICY_ALLOW;
}
