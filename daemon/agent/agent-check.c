/*
 * The check after a turn: once the model gives its final answer and the
 * turn changed files (a write_file, edit_file, run_command or run_script
 * that worked), the profile's check_command runs through the registry
 * (tool.h) as the "check" tool. Each run is announced by a check.result
 * event; a failure becomes a user message with "source": "check" (the
 * model's next request reads it from the history) while max_fix_attempts
 * are left, and the turn ends completed or check_failed otherwise. This file
 * owns running the check and what its result becomes; the turn itself,
 * and the steps that lead here and follow, are agent.c's.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent-int.h"
#include "env.h"
#include "session-env.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "utf8.h"
#include "xmalloc.h"

#define AGENT_FEEDBACK_MAX	(16 * 1024) /* check output given to the model */
#define AGENT_EVENT_OUTPUT	4096	/* check output in a check.result event */
#define AGENT_DIAG_EVENT	20	/* diagnostics in a check.result event */

/*
 * The check's output as text for people and the model: stderr, then
 * stdout, then the reason it did not complete; its head is kept within
 * max bytes.
 */
static char *
agent_check_text(json_t *result, const char *reason, size_t max)
{
	const char	*out = NULL, *err = NULL;
	char		*all;
	size_t		 len, skip;

	if (json_is_object(result)) {
		if (strcmp(json_string_value(json_object_get(result,
		    "stdout_encoding")) != NULL ? json_string_value(
		    json_object_get(result, "stdout_encoding")) : "", "utf-8") == 0)
			out = json_string_value(json_object_get(result, "stdout"));
		if (strcmp(json_string_value(json_object_get(result,
		    "stderr_encoding")) != NULL ? json_string_value(
		    json_object_get(result, "stderr_encoding")) : "", "utf-8") == 0)
			err = json_string_value(json_object_get(result, "stderr"));
	}
	all = xasprintf("%s%s%s%s", err != NULL ? err : "",
	    err != NULL && *err != '\0' && out != NULL && *out != '\0' ? "\n" : "",
	    out != NULL ? out : "", reason != NULL ? reason : "");
	len = strlen(all);
	if (len <= max)
		return all;
	/* Compilers say the most useful thing first: keep the head. */
	skip = utf8_cut(all, max);
	all[skip] = '\0';
	{
		char	*s = xasprintf("%s\n[gbr: %zu more bytes not shown]", all,
		    len - skip);

		free(all);
		return s;
	}
}

/* The check ended. */
static void
agent_check_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	struct agent_turn	*t = agent_unkey(arg);
	struct gbr_error	 err;
	struct session		*s;
	struct env		*env;
	json_t			*diag, *ev, *m;
	const char		*cmd;
	char			*text, *content;
	unsigned		 run, max;
	int			 ok;

	if (t == NULL)
		return;
	t->check = NULL;
	t->check_busy = 0;
	if ((s = session_find(t->sid)) == NULL) {
		agent_kill(t);
		return;
	}
	session_runtime(s, &env, NULL);
	ok = !failed && json_is_true(json_object_get(result, "ok"));
	run = t->fixes + 1;
	cmd = env != NULL && env_check_command(env) != NULL ?
	    env_check_command(env) : "";
	max = env != NULL ? (unsigned)env_max_fix_attempts(env) : 0;
	diag = json_array();
	if (json_is_array(json_object_get(result, "diagnostics"))) {
		size_t	 i;
		json_t	*d;

		json_array_foreach(json_object_get(result, "diagnostics"), i, d) {
			if (i >= AGENT_DIAG_EVENT)
				break;
			json_array_append(diag, d);
		}
	}
	text = agent_check_text(result, failed ? reason : NULL, AGENT_EVENT_OUTPUT);
	ev = json_pack("{s:I, s:i, s:b, s:s, s:o?, s:b, s:o, s:s, s:b}",
	    "turn", (json_int_t)t->turn, "attempt", (int)run, "ok", ok,
	    "command", cmd, "exit_code", json_incref(json_object_get(result,
	    "exit_code")), "timed_out", failed && kind == GBR_ERR_TIMEOUT,
	    "diagnostics", diag, "output", text, "final", ok || t->fixes >= max);
	free(text);
	if (ev != NULL && session_event(s, "check.result", ev, NULL, NULL,
	    &err) != 0) {
		gbr_error_clear(&err);
	}
	if (ok) {
		agent_end(t, s, "completed", NULL, NULL, json_pack("{s:{s:b, s:i}}",
		    "check", "ok", 1, "runs", (int)run));
		return;
	}
	if (t->fixes >= max) {
		agent_end(t, s, "check_failed", NULL, NULL, json_pack(
		    "{s:{s:b, s:i}}", "check", "ok", 0, "runs", (int)run));
		return;
	}
	text = agent_check_text(result, failed ? reason : NULL, AGENT_FEEDBACK_MAX);
	if (failed)
		content = xasprintf("The check command `%s` did not complete (%s). "
		    "Fix the cause, then answer again.\n\n%s", cmd,
		    gbr_err_kind(kind), text);
	else
		content = xasprintf("The check command `%s` failed (exit code "
		    "%lld). Fix these problems, then answer again.\n\n%s", cmd,
		    (long long)json_integer_value(json_object_get(result,
		    "exit_code")), text);
	free(text);
	m = json_pack("{s:s, s:s, s:s, s:I, s:i}", "role", "user", "content",
	    content, "source", "check", "turn", (json_int_t)t->turn, "attempt",
	    (int)run);
	free(content);
	t->writing = 1;
	if (m == NULL || session_message(s, "message", m, json_pack("{s:I}",
	    "turn", (json_int_t)t->turn), NULL, NULL, agent_written,
	    agent_key(t), &err) != 0) {
		t->writing = 0;
		agent_end(t, s, "error", m == NULL ? "internal_error" :
		    gbr_err_kind(err.kind), m == NULL ? "the check output cannot "
		    "be recorded" : err.message, NULL);
		if (m != NULL) {
			gbr_error_clear(&err);
		}
	}
}

/* The model's final answer: run the check if the turn changed files. */
void
agent_check(struct agent_turn *t, struct session *s, const struct agent_view *v)
{
	struct tool_ctx		 ctx;
	struct env		*env;
	struct sandbox		*sb;
	struct agent_key	*key;
	enum gbr_err		 kind;
	json_t			*args, *data = NULL;
	char			*reason;
	int			 r;

	if (session_env_and_sandbox(s, &env, &sb, &reason) != 0) {
		agent_end(t, s, "completed", NULL, NULL, NULL);
		free(reason);
		return;
	}
	if (!v->changed || env_check_command(env) == NULL) {
		agent_end(t, s, "completed", NULL, NULL, NULL);
		return;
	}
	memset(&ctx, 0, sizeof ctx);
	ctx.sandbox = sb;
	ctx.env = env;
	ctx.session = t->sid;
	/* The profile's own command: its author asked for it to run. */
	ctx.approved = 1;
	t->fixes = v->fixes;
	args = json_object();
	key = agent_key(t);
	t->check_busy = 1;
	r = tool_call_async(&ctx, "check", args, NULL, agent_check_done, key,
	    &t->check, &kind, &reason, &data);
	json_decref(args);
	if (r != 0) {
		free(key);
		t->check_busy = 0;
		t->check = NULL;
		agent_end(t, s, "completed", NULL, NULL, json_pack("{s:{s:b, s:s, "
		    "s:s}}", "check", "ok", 0, "error", gbr_err_kind(kind),
		    "message", reason));
		free(reason);
		json_decref(data);
	}
}
