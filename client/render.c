/*
 * Event and message rendering for people (see render.h). Everything the
 * daemon sends is untrusted text: control characters other than newline
 * and tab are shown as '?' so an agent's output cannot drive the terminal,
 * and one-line summaries are cut at a fixed width.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "render.h"
#include "xmalloc.h"

/* Longest one-line summary of tool arguments or results. */
#define RENDER_SUMMARY	160

/* Tells whether colours may be used. */
int
render_want_color(int fd)
{
	const char	*nc = getenv("NO_COLOR");

	if (nc != NULL && *nc != '\0')
		return 0;
	return isatty(fd);
}

/* Returns the escape sequence for a kind of text. */
const char *
render_color(const struct render *r, const char *what)
{
	if (!r->color)
		return "";
	if (strcmp(what, "user") == 0)
		return "\033[36m";
	if (strcmp(what, "assistant") == 0)
		return "\033[1m";
	if (strcmp(what, "tool") == 0)
		return "\033[33m";
	if (strcmp(what, "error") == 0)
		return "\033[31m";
	if (strcmp(what, "approval") == 0)
		return "\033[35m";
	if (strcmp(what, "dim") == 0)
		return "\033[2m";
	if (strcmp(what, "reset") == 0)
		return "\033[0m";
	return "";
}

/*
 * Writes untrusted text: newlines kept (each new line gets prefix), tabs
 * kept, other control characters and escape sequences neutralised.
 * At most max bytes (0: all), with "..." when cut.
 */
static void
render_text(struct render *r, const char *s, const char *prefix, size_t max)
{
	size_t	n = 0;

	for (; *s != '\0'; s++, n++) {
		if (max != 0 && n >= max) {
			fputs("...", r->out);
			break;
		}
		if (*s == '\n') {
			fputc('\n', r->out);
			if (prefix != NULL && s[1] != '\0')
				fputs(prefix, r->out);
		} else if (*s == '\t' || (unsigned char)*s >= 0x20) {
			if (*s == 0x7f)
				fputc('?', r->out);
			else
				fputc(*s, r->out);
		} else
			fputc('?', r->out);
	}
}

/* Writes a JSON value compactly on one line, cut. */
static void
render_json(struct render *r, const json_t *v)
{
	char	*s;

	if (v == NULL)
		return;
	if (json_is_string(v)) {
		render_text(r, json_string_value(v), NULL, RENDER_SUMMARY);
		return;
	}
	s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (s != NULL) {
		render_text(r, s, NULL, RENDER_SUMMARY);
		free(s);
	}
}

/* Ends an open streamed line. */
void
render_close_line(struct render *r)
{
	if (r->open_line) {
		fputc('\n', r->out);
		r->open_line = 0;
	}
}

/* Prints one line: colour, marker, text, reset. */
static void
render_line(struct render *r, const char *color, const char *marker,
    const char *text)
{
	char	*t = xstrdup(text);
	size_t	 n = strlen(t);

	/* The line ends here: trailing newlines of the text would add blank lines. */
	while (n > 0 && t[n - 1] == '\n')
		t[--n] = '\0';
	render_close_line(r);
	fprintf(r->out, "%s%s", render_color(r, color), marker);
	render_text(r, t, "  ", 0);
	fprintf(r->out, "%s\n", render_color(r, "reset"));
	free(t);
}

/* Renders a message object ({role, content, name?, args?}). */
void
render_message(struct render *r, const json_t *m)
{
	const char	*role = json_string_value(json_object_get(m, "role"));
	const char	*content = json_string_value(json_object_get(m, "content"));
	const json_t	*v;

	if (role == NULL)
		return;
	render_close_line(r);
	if (strcmp(role, "user") == 0)
		render_line(r, "user", "> ", content != NULL ? content : "");
	else if (strcmp(role, "assistant") == 0)
		render_line(r, "assistant", "", content != NULL ? content : "");
	else if (strcmp(role, "system") == 0)
		render_line(r, "dim", "[system] ", content != NULL ? content : "");
	else if (strcmp(role, "tool_call") == 0 || strcmp(role, "tool_result") == 0) {
		fprintf(r->out, "%s%s ", render_color(r, "tool"),
		    strcmp(role, "tool_call") == 0 ? "~" : "  =");
		if ((v = json_object_get(m, "name")) != NULL) {
			render_json(r, v);
			fputc(' ', r->out);
		}
		if ((v = json_object_get(m, "args")) != NULL)
			render_json(r, v);
		else if (content != NULL)
			render_text(r, content, NULL, RENDER_SUMMARY);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
	} else
		render_line(r, "dim", "[?] ", role);
}

/* Renders a session.state event. */
static int
render_state(struct render *r, const json_t *p)
{
	const char	*state = json_string_value(json_object_get(p, "state"));
	const char	*outcome = json_string_value(json_object_get(p, "outcome"));
	const char	*reason = json_string_value(json_object_get(p, "reason"));
	json_int_t	 turn = json_integer_value(json_object_get(p, "turn"));
	char		 buf[256];

	if (state == NULL)
		return 0;
	if (strcmp(state, "running") == 0) {
		snprintf(buf, sizeof buf, "turn %lld running", (long long)turn);
		render_line(r, "dim", "* ", buf);
	} else if (strcmp(state, "idle") == 0 && outcome != NULL) {
		/* no_provider was said by its error event already. */
		if (strcmp(outcome, "no_provider") == 0 ||
		    strcmp(outcome, "completed") == 0)
			return 0;
		snprintf(buf, sizeof buf, "turn %lld %s", (long long)turn, outcome);
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

/* Renders one event. */
int
render_event(struct render *r, const json_t *p)
{
	const char	*type = json_string_value(json_object_get(p, "type"));
	const char	*text;

	if (type == NULL)
		return 0;
	if (strcmp(type, "message.delta") == 0) {
		if ((text = json_string_value(json_object_get(p, "text"))) == NULL)
			return 0;
		if (!r->open_line)
			fputs(render_color(r, "assistant"), r->out);
		render_text(r, text, NULL, 0);
		r->open_line = text[0] != '\0' && text[strlen(text) - 1] != '\n';
		if (!r->open_line)
			fputs(render_color(r, "reset"), r->out);
		return 1;
	}
	if (strcmp(type, "message") == 0) {
		render_message(r, json_object_get(p, "message"));
		return 1;
	}
	if (strcmp(type, "session.state") == 0)
		return render_state(r, p);
	if (strcmp(type, "error") == 0) {
		text = json_string_value(json_object_get(p, "message"));
		render_close_line(r);
		fprintf(r->out, "%s! %s: ", render_color(r, "error"),
		    json_string_value(json_object_get(p, "kind")) != NULL ?
		    json_string_value(json_object_get(p, "kind")) : "error");
		render_text(r, text != NULL ? text : "", "  ", 0);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "session.created") == 0) {
		render_close_line(r);
		fprintf(r->out, "%s* session %s created on ", render_color(r, "dim"),
		    json_string_value(json_object_get(p, "session")));
		render_text(r, json_string_value(json_object_get(p, "workspace")) != NULL ?
		    json_string_value(json_object_get(p, "workspace")) : "?", NULL, 0);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "approval.requested") == 0 ||
	    strcmp(type, "approval.resolved") == 0) {
		render_close_line(r);
		fprintf(r->out, "%s? %s ", render_color(r, "approval"),
		    strcmp(type, "approval.requested") == 0 ?
		    "approval needed:" : "approval resolved:");
		render_json(r, json_object_get(p, "id"));
		fputc(' ', r->out);
		render_json(r, json_object_get(p, "summary") != NULL ?
		    json_object_get(p, "summary") : json_object_get(p, "decision"));
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		return 1;
	}
	if (strcmp(type, "resync_required") == 0 || strcmp(type, "evicted") == 0 ||
	    strcmp(type, "sandbox.denied") == 0 || strcmp(type, "env.invalid") == 0) {
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
	fprintf(r->out, "%s* %s ", render_color(r, "dim"), type);
	render_json(r, json_object_get(p, "message") != NULL ?
	    json_object_get(p, "message") : json_object_get(p, "summary"));
	fprintf(r->out, "%s\n", render_color(r, "reset"));
	return 1;
}
