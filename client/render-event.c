/*
 * Events for people (render_event, see render.h): the answer as it
 * streams (markdown, markdown.c), a command's live output, state changes, approvals and
 * profiles, each on its own lines, built on render.c's pieces.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <string.h>

#include "render.h"
#include "render-int.h"

/*
 * A run tool's live output (tool.output): as it comes, line by line after
 * an indent, escaped (stderr in the error colour). A chunk may end inside
 * a line; the next chunk of the same stream goes on with it.
 */
static void
render_tool_output(struct render *r, const json_t *p)
{
	const char	*stream = json_string_value(json_object_get(p, "stream"));
	const json_t	*text = json_object_get(p, "text");
	const char	*s, *end, *nl, *color;
	int		 err = stream != NULL && strcmp(stream, "stderr") == 0;

	if (json_is_true(json_object_get(p, "truncated"))) {
		render_close_line(r);
		fprintf(r->out, "%s  (live output stops here: the result holds "
		    "all of it)%s\n", render_color(r, "dim"),
		    render_color(r, "reset"));
		return;
	}
	if (!json_is_string(text)) {
		if (!json_is_string(json_object_get(p, "data")))
			return;
		render_close_line(r);
		fprintf(r->out, "%s  (%s: output that is not text)%s\n",
		    render_color(r, "dim"), err ? "stderr" : "stdout",
		    render_color(r, "reset"));
		return;
	}
	if (r->open_line && (!r->tool_open || r->tool_err != err))
		render_close_line(r);
	color = err ? "error" : "plain";
	s = json_string_value(text);
	end = s + json_string_length(text);
	while (s < end) {
		if ((nl = memchr(s, '\n', (size_t)(end - s))) == NULL)
			nl = end;
		fputs(render_color(r, color), r->out);
		if (!r->open_line)
			fputs("  ", r->out);
		render_escaped(r, s, (size_t)(nl - s), RENDER_ESC_TAB, 0);
		fputs(render_color(r, "reset"), r->out);
		if (nl < end) {
			fputc('\n', r->out);
			r->open_line = r->tool_open = 0;
			s = nl + 1;
		} else {
			r->open_line = r->tool_open = 1;
			r->tool_err = err;
			s = end;
		}
	}
}

/* Renders a session.state event. */
static int
render_state(struct render *r, const json_t *p)
{
	const char	*state = json_string_value(json_object_get(p, "state"));
	const char	*outcome = json_string_value(json_object_get(p, "outcome"));
	const char	*reason = json_string_value(json_object_get(p, "reason"));
	json_int_t	 turn = json_integer_value(json_object_get(p, "turn"));
	json_int_t	 in, out;
	json_t		*u, *c;
	char		 buf[256], tok[128] = "", cost[32];
	size_t		 n;

	if (state == NULL)
		return 0;
	if (strcmp(state, "running") == 0) {
		snprintf(buf, sizeof buf, "turn %lld running", (long long)turn);
		render_line(r, "dim", "* ", buf);
	} else if (strcmp(state, "idle") == 0 && outcome != NULL) {
		/* What the turn cost, when the model was asked at all. */
		u = json_object_get(p, "usage");
		in = json_integer_value(json_object_get(u, "input_tokens"));
		out = json_integer_value(json_object_get(u, "output_tokens"));
		if (in > 0 || out > 0) {
			n = (size_t)snprintf(tok, sizeof tok, "%lld tokens in, "
			    "%lld out", (long long)in, (long long)out);
			/* gbrd prices a turn only if [prices] names its model. */
			c = json_object_get(u, "cost_usd");
			if (json_is_number(c) && n < sizeof tok) {
				render_cost(cost, sizeof cost, json_number_value(c));
				snprintf(tok + n, sizeof tok - n, ", %s", cost);
			}
		}
		/* no_provider was said by its error event already. */
		if (strcmp(outcome, "no_provider") == 0)
			return 0;
		if (strcmp(outcome, "completed") == 0) {
			if (*tok == '\0')
				return 0;
			snprintf(buf, sizeof buf, "turn %lld: %s", (long long)turn,
			    tok);
		} else
			snprintf(buf, sizeof buf, "turn %lld %.64s%s%s%s",
			    (long long)turn, outcome, *tok != '\0' ? " (" : "",
			    tok, *tok != '\0' ? ")" : "");
		render_line(r, "dim", "* ", buf);
	} else if (strcmp(state, "interrupted") == 0) {
		snprintf(buf, sizeof buf, "turn %lld interrupted: %s",
		    (long long)turn, reason != NULL ? reason : "");
		render_line(r, "error", "! ", buf);
	} else if (strcmp(state, "closed") == 0)
		render_line(r, "dim", "* ", "session closed");
	else if (strcmp(state, "awaiting_approval") == 0)
		render_line(r, "approval", "? ", "waiting for an approval");
	else
		return 0;
	return 1;
}

/*
 * A profile applied (env.reloaded: which, why, the keys that changed) or
 * refused (env.invalid: which, the file:line error, what stays in force).
 */
static void
render_env(struct render *r, const char *type, const json_t *p)
{
	const json_t	*env = json_object_get(p, "env"), *v;
	const json_t	*changed = json_object_get(p, "changed");
	size_t		 i;

	render_close_line(r);
	if (strcmp(type, "env.invalid") == 0) {
		fprintf(r->out, "%s! profile ", render_color(r, "error"));
		render_field(r, env, RENDER_ESC_BACKSLASH, RENDER_NAME_MAX, "?");
		if (json_is_true(json_object_get(p, "deleted")))
			fputs(" was deleted", r->out);
		else {
			fputs(" not applied: ", r->out);
			render_field(r, json_object_get(p, "error"), 0,
			    RENDER_PATH_MAX, "(no reason given)");
		}
		fputs("; the rules in force stay", r->out);
		if ((v = json_object_get(p, "in_force")) != NULL) {
			fputs(" (", r->out);
			render_field(r, v, RENDER_ESC_BACKSLASH,
			    RENDER_NAME_MAX, "?");
			fputc(')', r->out);
		}
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return;
	}
	fprintf(r->out, "%s* profile ", render_color(r, "dim"));
	render_field(r, env, RENDER_ESC_BACKSLASH, RENDER_NAME_MAX, "?");
	if ((v = json_object_get(p, "previous")) != NULL && !json_equal(
	    (json_t *)v, (json_t *)env)) {
		fputs(" in use instead of ", r->out);
		render_field(r, v, RENDER_ESC_BACKSLASH, RENDER_NAME_MAX, "?");
	} else
		fputs(" reloaded", r->out);
	if ((v = json_object_get(p, "reason")) != NULL) {
		fputs(" (", r->out);
		render_field(r, v, 0, RENDER_NAME_MAX, "?");
		fputc(')', r->out);
	}
	if (json_is_array(changed)) {
		fputs(json_array_size(changed) == 0 ? ": nothing changed" :
		    ": ", r->out);
		for (i = 0; i < json_array_size(changed) && i < 16; i++) {
			if (i > 0)
				fputs(", ", r->out);
			render_field(r, json_array_get(changed, i),
			    RENDER_ESC_BACKSLASH, RENDER_NAME_MAX, "?");
		}
		if (json_array_size(changed) > 16)
			fprintf(r->out, " and %zu more", json_array_size(changed) - 16);
	}
	fprintf(r->out, "%s\n", render_color(r, "reset"));
}

/* Renders one event. */
int
render_event(struct render *r, const json_t *p)
{
	const char	*type = json_string_value(json_object_get(p, "type"));
	const char	*text;

	if (type == NULL)
		return 0;
	if (strcmp(type, "tool.output") == 0) {
		render_tool_output(r, p);
		return 1;
	}
	if (strcmp(type, "message.delta") == 0) {
		if ((text = json_string_value(json_object_get(p, "text"))) == NULL)
			return 0;
		if (r->tool_open)
			render_close_line(r);
		markdown_feed(&r->md, r, text, strlen(text));
		r->streamed = 1;
		return 1;
	}
	if (strcmp(type, "message") == 0 && r->streamed &&
	    json_object_get(json_object_get(p, "message"), "step") != NULL) {
		/* The agent's answer, already shown live: only its tool calls. */
		r->streamed = 0;
		markdown_end(&r->md, r);
		render_close_line(r);
		render_tool_calls(r, json_object_get(json_object_get(p, "message"),
		    "tool_calls"));
		render_stop_note(r, json_object_get(p, "message"));
		return 1;
	}
	if (strcmp(type, "message") == 0 || strcmp(type, "tool.call") == 0 ||
	    strcmp(type, "tool.result") == 0 ||
	    strcmp(type, "conversation.rewound") == 0) {
		render_message(r, json_object_get(p, "message"));
		return 1;
	}
	if (strcmp(type, "llm.retry") == 0 && json_is_integer(json_object_get(p,
	    "max_request_bytes"))) {
		/* A context overflow: asked again at once, with less. */
		r->streamed = 0;
		markdown_end(&r->md, r);
		render_close_line(r);
		fprintf(r->out, "%s* the model's context is smaller than the "
		    "request: cut to %lld bytes and asked again (", render_color(r,
		    "dim"), (long long)json_integer_value(json_object_get(p,
		    "max_request_bytes")));
		render_json(r, json_object_get(p, "message"));
		fprintf(r->out, ")%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "llm.retry") == 0) {
		/* The text shown for this step is dropped; it comes again. */
		r->streamed = 0;
		markdown_end(&r->md, r);
		render_close_line(r);
		fprintf(r->out, "%s* retrying in %lld ms (", render_color(r, "dim"),
		    (long long)json_integer_value(json_object_get(p, "delay_ms")));
		render_json(r, json_object_get(p, "kind"));
		fputs("): ", r->out);
		render_json(r, json_object_get(p, "message"));
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "context.trimmed") == 0) {
		render_close_line(r);
		fprintf(r->out, "%s* %lld earlier message(s) shortened for the "
		    "model (the history keeps them whole): the request is %lld "
		    "bytes, its limit %lld (max_request_bytes)%s\n",
		    render_color(r, "dim"),
		    (long long)json_integer_value(json_object_get(p, "shortened")),
		    (long long)json_integer_value(json_object_get(p, "bytes_after")),
		    (long long)json_integer_value(json_object_get(p,
		    "max_request_bytes")), render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "check.result") == 0) {
		render_close_line(r);
		fprintf(r->out, "%s%s check ", render_color(r,
		    json_is_true(json_object_get(p, "ok")) ? "dim" : "error"),
		    json_is_true(json_object_get(p, "ok")) ? "*" : "!");
		render_json(r, json_object_get(p, "command"));
		fprintf(r->out, " %s (run %lld)%s\n",
		    json_is_true(json_object_get(p, "ok")) ? "passed" : "failed",
		    (long long)json_integer_value(json_object_get(p, "attempt")),
		    render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "session.state") == 0) {
		/* A turn that ends (or starts) leaves no code block open. */
		r->streamed = 0;
		markdown_end(&r->md, r);
		return render_state(r, p);
	}
	if (strcmp(type, "error") == 0) {
		text = json_string_value(json_object_get(p, "message"));
		render_close_line(r);
		fprintf(r->out, "%s! ", render_color(r, "error"));
		render_field(r, json_object_get(p, "kind"), RENDER_ESC_BACKSLASH,
		    RENDER_NAME_MAX, "error");
		fputs(": ", r->out);
		render_text(r, text != NULL ? text : "", "  ", 0);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "session.created") == 0) {
		render_close_line(r);
		fprintf(r->out, "%s* session ", render_color(r, "dim"));
		render_field(r, json_object_get(p, "session"), RENDER_ESC_BACKSLASH,
		    RENDER_NAME_MAX, "?");
		fputs(" created on ", r->out);
		render_text(r, json_string_value(json_object_get(p, "workspace")) != NULL ?
		    json_string_value(json_object_get(p, "workspace")) : "?", NULL, 0);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "approval.requested") == 0) {
		render_approval(r, json_object_get(p, "approval"),
		    RENDER_DIFF_LINES, NULL);
		return 1;
	}
	if (strcmp(type, "approval.resolved") == 0) {
		render_approval_resolved(r, json_object_get(p, "approval"), NULL);
		return 1;
	}
	if (strcmp(type, "env.invalid") == 0 || strcmp(type, "env.reloaded") == 0) {
		render_env(r, type, p);
		return 1;
	}
	if (strcmp(type, "resync_required") == 0 || strcmp(type, "evicted") == 0 ||
	    strcmp(type, "sandbox.denied") == 0 ||
	    strcmp(type, "workspace.gone") == 0) {
		render_close_line(r);
		fprintf(r->out, "%s! %s: ", render_color(r, "error"), type);
		render_json(r, json_object_get(p, "reason") != NULL ?
		    json_object_get(p, "reason") : json_object_get(p, "message"));
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "replay_complete") == 0) {
		if (r->quiet_local)
			return 0;
		render_line(r, "dim", "* ", "live");
		return 1;
	}
	render_close_line(r);
	fprintf(r->out, "%s* ", render_color(r, "dim"));
	render_field(r, json_object_get(p, "type"), RENDER_ESC_BACKSLASH,
	    RENDER_NAME_MAX, "?");
	fputc(' ', r->out);
	render_json(r, json_object_get(p, "message") != NULL ?
	    json_object_get(p, "message") : json_object_get(p, "summary"));
	fprintf(r->out, "%s\n", render_color(r, "reset"));
	return 1;
}
