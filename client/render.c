/*
 * Event and message rendering for people (see render.h). Everything the
 * daemon sends is untrusted text: in prose, control characters other than
 * newline and tab, C1 controls, bidirectional overrides and bytes that are
 * not UTF-8 are shown as '?' so an agent's output cannot drive the
 * terminal, and one-line summaries are cut at a fixed width.
 *
 * What a person is asked to approve is held to a stricter rule
 * (render_escaped): every character that is invisible, changes the
 * direction of the text, moves the cursor or is not UTF-8 is written as a
 * visible escape, so a path, a command or a diff line cannot show one
 * thing and mean another. The escaping itself is common/escape.c's (gbrd
 * escapes paths with it too); this file adds reverse video on top.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "escape.h"
#include "markdown.h"
#include "render.h"
#include "render-int.h"
#include "utf8.h"
#include "xmalloc.h"

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
	if (strcmp(what, "diff_add") == 0)
		return "\033[32m";
	if (strcmp(what, "diff_del") == 0)
		return "\033[31m";
	if (strcmp(what, "diff_hunk") == 0)
		return "\033[36m";
	if (strcmp(what, "diff_file") == 0)
		return "\033[1m";
	if (strcmp(what, "escape") == 0)
		return "\033[7m";	/* reverse video, ended by "noescape" */
	if (strcmp(what, "noescape") == 0)
		return "\033[27m";	/* keeps the line's colour */
	return "";
}

static void	render_text_cut(struct render *, const char *, size_t,
		    const char *, size_t);

/* escape_write's callback: an escape in reverse video, text as it is. */
static void
render_escape_cb(const char *data, size_t n, int escape, void *arg)
{
	struct render	*r = arg;

	if (escape)
		fprintf(r->out, "%s%.*s%s", render_color(r, "escape"), (int)n,
		    data, render_color(r, "noescape"));
	else
		fwrite(data, 1, n, r->out);
}

/* Writes untrusted text made safe to show on one line (see render.h). */
void
render_escaped(struct render *r, const char *s, size_t len, int flags,
    size_t max)
{
	size_t	used;

	if (s == NULL)
		return;
	used = escape_write(s, len, flags, max, render_escape_cb, r);
	if (used < len)
		fprintf(r->out, "...(%zu more bytes)", len - used);
}

/* Says why s is not text gbrd takes (see render.h), or NULL. */
char *
render_text_problem(const char *s, size_t len)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, n;
	uint32_t		 cp;

	while (i < len) {
		if (u[i] == '\0')
			return xasprintf("a NUL byte at byte %zu", i);
		if ((n = utf8_decode(u + i, len - i, &cp)) == 0)
			return xasprintf("not UTF-8 at byte %zu", i);
		i += n;
	}
	return NULL;
}

/* Returns untrusted text made safe to show on one line, without colours. */
char *
render_escape(const char *s, size_t len, int flags, size_t max)
{
	struct render	 r;
	char		*buf = NULL;
	size_t		 blen = 0;

	memset(&r, 0, sizeof r);
	if ((r.out = open_memstream(&buf, &blen)) == NULL)
		return xstrdup("?");
	render_escaped(&r, s, len, flags, max);
	fclose(r.out);
	return buf;
}

/*
 * Writes untrusted text: newlines kept (each new line gets prefix), tabs
 * kept, other controls (C0 and C1), bidi formatting characters and bytes
 * that are not UTF-8 shown as '?'. At most max bytes (0: all), with "..."
 * when cut.
 */
void
render_text(struct render *r, const char *s, const char *prefix, size_t max)
{
	render_text_cut(r, s, strlen(s), prefix, max);
}

/* The same for len bytes of s, which need not end in a NUL. */
void
render_text_len(struct render *r, const char *s, size_t len)
{
	render_text_cut(r, s, len, NULL, 0);
}

/* render_text's work, on len bytes. */
static void
render_text_cut(struct render *r, const char *s, size_t len,
    const char *prefix, size_t max)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, n;
	uint32_t		 cp;

	while (i < len) {
		if (max != 0 && i >= max) {
			fputs("...", r->out);
			break;
		}
		if ((n = utf8_decode(u + i, len - i, &cp)) == 0) {
			fputc('?', r->out);
			i++;
			continue;
		}
		if (cp == '\n') {
			fputc('\n', r->out);
			if (prefix != NULL && i + 1 < len)
				fputs(prefix, r->out);
		} else if (cp == '\t')
			fputc('\t', r->out);
		else if (escape_is_control(cp) || escape_is_bidi(cp))
			fputc('?', r->out);
		else
			fwrite(s + i, 1, n, r->out);
		i += n;
	}
}

/*
 * Writes a JSON value compactly on one line, cut, with the strict escapes:
 * tool names, paths and arguments are what a person checks.
 */
void
render_json(struct render *r, const json_t *v)
{
	char	*s;

	if (v == NULL)
		return;
	if (json_is_string(v)) {
		render_escaped(r, json_string_value(v), json_string_length(v), 0,
		    RENDER_SUMMARY);
		return;
	}
	s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (s != NULL) {
		render_escaped(r, s, strlen(s), 0, RENDER_SUMMARY);
		free(s);
	}
}

/* Writes an integer field, or "?" when it is not one. */
static void
render_int(struct render *r, const json_t *o, const char *key)
{
	const json_t	*v = json_object_get(o, key);

	if (json_is_integer(v))
		fprintf(r->out, "%lld", (long long)json_integer_value(v));
	else
		fputc('?', r->out);
}

/* Writes "N thing" or "N things" for an integer field. */
static void
render_count(struct render *r, const json_t *o, const char *key,
    const char *one, const char *many)
{
	render_int(r, o, key);
	fprintf(r->out, " %s", json_integer_value(json_object_get(o, key)) == 1 ?
	    one : many);
}

/* Writes "N thing" or "N things" for the length of an array field. */
static void
render_items(struct render *r, const json_t *o, const char *key,
    const char *one, const char *many)
{
	size_t	n = json_array_size(json_object_get(o, key));

	fprintf(r->out, "%zu %s", n, n == 1 ? one : many);
}

/*
 * Writes ": " and the first line of a command's output (stdout, else
 * stderr), cut and escaped, with how many lines follow: what a person
 * looks at first.
 */
static void
render_first_line(struct render *r, const json_t *res)
{
	static const char *const streams[] = { "stdout", "stderr" };
	const json_t		*v;
	const char		*s, *enc, *p;
	char			 key[32];
	size_t			 i, n, more;

	for (i = 0; i < 2; i++) {
		v = json_object_get(res, streams[i]);
		if ((s = json_string_value(v)) == NULL ||
		    json_string_length(v) == 0)
			continue;
		snprintf(key, sizeof key, "%s_encoding", streams[i]);
		enc = json_string_value(json_object_get(res, key));
		fprintf(r->out, ": %s", i == 1 ? "(stderr) " : "");
		if (enc != NULL && strcmp(enc, "utf-8") != 0) {
			snprintf(key, sizeof key, "%s_bytes", streams[i]);
			render_count(r, res, key, "byte", "bytes");
			fputs(" that are not text", r->out);
			return;
		}
		n = strcspn(s, "\n");
		render_escaped(r, s, n, 0, RENDER_LINE_SUMMARY);
		for (more = 0, p = s + n; (p = strchr(p, '\n')) != NULL; p++)
			if (p[1] != '\0')
				more++;
		/* Tagged, the rest is one command away: say which. */
		if (more > 0 && r->tool_tag > 0)
			fprintf(r->out, " (+%zu line%s, /show %lld for all)",
			    more, more == 1 ? "" : "s", r->tool_tag);
		else if (more > 0)
			fprintf(r->out, " (+%zu line%s)", more, more == 1 ? "" :
			    "s");
		return;
	}
}

/*
 * Writes a known tool's result as a person reads it ("a.py: 12 bytes,
 * new file", "exit 2 in 4 ms: first line"); returns 0, writing nothing,
 * for a tool or a shape it does not know.
 */
static int
render_tool_summary(struct render *r, const char *tool, const json_t *res)
{
	const json_t	*path = json_object_get(res, "path"), *v;
	int		 cut = json_is_true(json_object_get(res, "truncated"));

	if (tool == NULL || !json_is_object(res))
		return 0;
	if (json_is_string(path) && (strcmp(tool, "read_file") == 0 ||
	    strcmp(tool, "write_file") == 0 || strcmp(tool, "edit_file") == 0 ||
	    strcmp(tool, "list_directory") == 0)) {
		render_escaped(r, json_string_value(path), json_string_length(path),
		    0, RENDER_SUMMARY);
		fputs(": ", r->out);
		if (strcmp(tool, "read_file") == 0) {
			render_count(r, res, "lines", "line", "lines");
			fputs(" of ", r->out);
			render_int(r, res, "total_lines");
			fputs(" (", r->out);
			render_count(r, res, "size", "byte", "bytes");
			fputc(')', r->out);
		} else if (strcmp(tool, "write_file") == 0) {
			render_count(r, res, "bytes", "byte", "bytes");
			fputs(json_is_true(json_object_get(res, "created")) ?
			    ", new file" : ", replaced", r->out);
		} else if (strcmp(tool, "edit_file") == 0) {
			render_count(r, res, "replacements", "replacement",
			    "replacements");
			fputs(", now ", r->out);
			render_count(r, res, "bytes", "byte", "bytes");
		} else
			render_items(r, res, "entries", "entry", "entries");
		if (json_is_string(v = json_object_get(res, "diff_omitted"))) {
			fputs(", no diff (", r->out);
			render_escaped(r, json_string_value(v),
			    json_string_length(v), 0, 32);
			fputc(')', r->out);
		}
	} else if (strcmp(tool, "search") == 0) {
		render_items(r, res, "matches", "match", "matches");
		fputs(" (", r->out);
		render_count(r, res, "files_scanned", "file", "files");
		fputs(" scanned)", r->out);
	} else if (strcmp(tool, "run_command") == 0 ||
	    strcmp(tool, "run_script") == 0 || strcmp(tool, "check") == 0) {
		if ((v = json_object_get(res, "ok")) != NULL)
			fputs(json_is_true(v) ? "passed, " : "failed, ", r->out);
		if (json_is_integer(json_object_get(res, "exit_code"))) {
			fputs("exit ", r->out);
			render_int(r, res, "exit_code");
		} else if (json_is_string(v = json_object_get(res, "signal"))) {
			fputs("killed by ", r->out);
			render_escaped(r, json_string_value(v),
			    json_string_length(v), 0, 16);
		} else
			fputs("ended", r->out);
		fputs(" in ", r->out);
		render_int(r, res, "duration_ms");
		fputs(" ms", r->out);
		if (json_array_size(json_object_get(res, "diagnostics")) > 0) {
			fputs(", ", r->out);
			render_items(r, res, "diagnostics", "diagnostic",
			    "diagnostics");
		}
		if (cut)
			fputs(", output cut", r->out);
		render_first_line(r, res);
		return 1;
	} else
		return 0;
	if (cut)
		fputs(", cut", r->out);
	return 1;
}

/*
 * Writes the diff a write_file or edit_file result carries, under its
 * summary line: at most RENDER_TOOL_DIFF_LINES lines, since a person
 * follows the agent's work and a long rewrite would push the rest off the
 * screen; how many lines are left out, and whether gbrd cut it.
 */
static void
render_tool_diff(struct render *r, const char *tool, const json_t *res)
{
	const json_t	*diff = json_object_get(res, "diff");
	size_t		 more;

	if (tool == NULL || (strcmp(tool, "write_file") != 0 &&
	    strcmp(tool, "edit_file") != 0) || !json_is_string(diff))
		return;
	more = render_diff(r, json_string_value(diff), json_string_length(diff),
	    "    ", RENDER_TOOL_DIFF_LINES, RENDER_LINE_MAX);
	if (more > 0 || json_is_true(json_object_get(res, "diff_truncated")))
		fprintf(r->out, "%s    ... %zu more line%s%s%s\n",
		    render_color(r, "dim"), more, more == 1 ? "" : "s",
		    json_is_true(json_object_get(res, "diff_truncated")) ?
		    ", and the rest of the diff was cut by gbrd" : "",
		    render_color(r, "reset"));
}

/* Ends an open streamed line. */
void
render_close_line(struct render *r)
{
	markdown_flush(&r->md, r);
	if (r->open_line) {
		fputc('\n', r->out);
		r->open_line = 0;
	}
	r->tool_open = 0;
}

/* Prints one line: colour, marker, text, reset. */
void
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

/* The tool calls an agent's answer asks for, one "~ tool args" line each. */
void
render_tool_calls(struct render *r, const json_t *calls)
{
	const json_t	*c;
	size_t		 i;

	json_array_foreach(calls, i, c) {
		fprintf(r->out, "%s~ ", render_color(r, "tool"));
		render_json(r, json_object_get(c, "name"));
		fputc(' ', r->out);
		render_json(r, json_object_get(c, "args"));
		fprintf(r->out, "%s\n", render_color(r, "reset"));
	}
}

/*
 * After an answer the model stopped because it reached its output limit
 * (OpenAI's "length", Anthropic's "max_tokens", Gemini's "MAX_TOKENS"): a
 * note, so that a cut answer is not taken for a whole one.
 */
void
render_stop_note(struct render *r, const json_t *m)
{
	const char	*why = json_string_value(json_object_get(m, "stop_reason"));

	if (why == NULL || (strcasecmp(why, "length") != 0 &&
	    strcasecmp(why, "max_tokens") != 0))
		return;
	render_close_line(r);
	fprintf(r->out, "%s* the answer stopped at the model's output limit "
	    "([llm] max_output_tokens): ask it to go on%s\n",
	    render_color(r, "dim"), render_color(r, "reset"));
}

/* Renders a message object ({role, content, name?, args?}). */
void
render_message(struct render *r, const json_t *m)
{
	const char	*role = json_string_value(json_object_get(m, "role"));
	const char	*content = json_string_value(json_object_get(m, "content"));
	const json_t	*v, *err;

	if (role == NULL)
		return;
	render_close_line(r);
	if (strcmp(role, "user") == 0)
		render_line(r, "user", "> ", content != NULL ? content : "");
	else if (strcmp(role, "assistant") == 0 &&
	    json_is_string(json_object_get(m, "tool"))) {
		/* A tool call (tool.call, or a client's through it). */
		if (content != NULL && *content != '\0')
			markdown_text(r, content, strlen(content));
		fprintf(r->out, "%s~ ", render_color(r, "tool"));
		render_json(r, json_object_get(m, "tool"));
		fputc(' ', r->out);
		render_json(r, json_object_get(m, "args"));
		fprintf(r->out, "%s\n", render_color(r, "reset"));
	} else if (strcmp(role, "assistant") == 0) {
		if (content != NULL && *content != '\0')
			markdown_text(r, content, strlen(content));
		render_tool_calls(r, json_object_get(m, "tool_calls"));
		render_stop_note(r, m);
	}
	else if (strcmp(role, "system") == 0)
		render_line(r, "dim", "[system] ", content != NULL ? content : "");
	else if (strcmp(role, "tool") == 0) {
		/* Its result: {tool, ok, result} or {tool, ok: false, error}. */
		err = json_object_get(m, "error");
		fprintf(r->out, "%s  = ", render_color(r, json_is_false(
		    json_object_get(m, "ok")) ? "error" : "tool"));
		if (r->tool_tag > 0)
			fprintf(r->out, "[%lld] ", r->tool_tag);
		if ((v = json_object_get(m, "tool")) != NULL) {
			render_json(r, v);
			fputc(' ', r->out);
		}
		if (json_is_false(json_object_get(m, "ok")) && err != NULL) {
			render_json(r, json_object_get(err, "kind"));
			fputs(": ", r->out);
			render_json(r, json_object_get(err, "message"));
		} else if ((v = json_object_get(m, "result")) != NULL) {
			if (!render_tool_summary(r, json_string_value(
			    json_object_get(m, "tool")), v))
				render_json(r, v);
		} else if (content != NULL)
			render_text(r, content, NULL, RENDER_SUMMARY);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
		if (json_is_true(json_object_get(m, "ok")))
			render_tool_diff(r, json_string_value(json_object_get(m,
			    "tool")), json_object_get(m, "result"));
	} else if (strcmp(role, "tool_call") == 0 || strcmp(role, "tool_result") == 0) {
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
	} else if (strcmp(role, "rewind") == 0) {
		/* session.rewind with conversation: the messages stay shown. */
		fprintf(r->out, "%s* conversation rewound: %lld message%s "
		    "after seq %lld dropped from what the model sees%s\n", render_color(r, "dim"), (long long)
		    json_integer_value(json_object_get(m, "messages")),
		    json_integer_value(json_object_get(m, "messages")) == 1 ?
		    "" : "s", (long long)json_integer_value(json_object_get(m,
		    "to_seq")), render_color(r, "reset"));
	} else
		render_line(r, "dim", "[?] ", role);
}

/* Writes a JSON string field escaped on one line, or alt when it is not a string. */
void
render_field(struct render *r, const json_t *v, int flags, size_t max,
    const char *alt)
{
	if (json_is_string(v))
		render_escaped(r, json_string_value(v), json_string_length(v),
		    flags, max);
	else if (alt != NULL)
		fputs(alt, r->out);
}

/*
 * Writes lines of text escaped, each after indent, at most max_lines (0:
 * all) of at most line_max bytes (0: whole). With a colour, every line has
 * it; without, lines are coloured as a unified diff. Returns the number of
 * lines left out.
 */
static size_t
render_lines(struct render *r, const char *text, size_t tlen,
    const char *indent, const char *fixed, size_t max_lines, size_t line_max)
{
	const char	*p = text, *end = text + tlen, *nl, *color;
	size_t		 len, shown = 0, more = 0;
	int		 header = 1;

	while (p < end) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		len = (size_t)(nl - p);
		if (max_lines != 0 && shown >= max_lines) {
			more++;
			p = nl < end ? nl + 1 : end;
			continue;
		}
		/* File headers come before the first hunk; later "---" is a line. */
		if (fixed != NULL)
			color = fixed;
		else if (len >= 2 && p[0] == '@' && p[1] == '@') {
			color = "diff_hunk";
			header = 0;
		} else if (header && ((len >= 4 && (memcmp(p, "--- ", 4) == 0 ||
		    memcmp(p, "+++ ", 4) == 0)) || (len >= 5 &&
		    memcmp(p, "diff ", 5) == 0)))
			color = "diff_file";
		else if (len > 0 && p[0] == '+')
			color = "diff_add";
		else if (len > 0 && p[0] == '-')
			color = "diff_del";
		else if (len > 0 && p[0] == '\\')
			color = "dim";
		else
			color = NULL;
		if (color != NULL)
			fputs(render_color(r, color), r->out);
		fputs(indent != NULL ? indent : "", r->out);
		render_escaped(r, p, len, RENDER_ESC_TAB, line_max);
		if (color != NULL)
			fputs(render_color(r, "reset"), r->out);
		fputc('\n', r->out);
		shown++;
		p = nl < end ? nl + 1 : end;
	}
	return more;
}

/* Writes lines of text, each escaped after indent (see render.h). */
void
render_text_block(struct render *r, const char *text, size_t len,
    const char *indent)
{
	render_close_line(r);
	(void)render_lines(r, text, len, indent, "plain", 0, 0);
}

/* Writes a JSON value indented, text as it is, each line escaped (render.h). */
void
render_json_block(struct render *r, const json_t *v)
{
	char	*s;

	render_close_line(r);
	if ((s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY)) == NULL) {
		fputs("?\n", r->out);
		return;
	}
	(void)render_lines(r, s, strlen(s), "", "plain", 0, 0);
	free(s);
}

/* Writes how a run tool's call ended (see render.h). */
void
render_run_end(struct render *r, const json_t *res)
{
	const char	*sig;

	sig = json_string_value(json_object_get(res, "signal"));
	fprintf(r->out, "%s= ", render_color(r, "dim"));
	if (json_is_true(json_object_get(res, "timed_out")))
		fputs("timed out", r->out);
	else if (sig != NULL) {
		fputs("killed by ", r->out);
		render_escaped(r, sig, strlen(sig), RENDER_ESC_BACKSLASH, 32);
	} else
		fprintf(r->out, "exit %lld", (long long)json_integer_value(
		    json_object_get(res, "exit_code")));
	if (json_is_true(json_object_get(res, "truncated")) ||
	    json_is_true(json_object_get(res, "output_limited")))
		fputs(", output cut at the limit", r->out);
	fprintf(r->out, " (%lld ms)%s\n", (long long)json_integer_value(
	    json_object_get(res, "duration_ms")), render_color(r, "reset"));
}

/* Writes the output and the end of a run tool's result (see render.h). */
void
render_run_result(struct render *r, const json_t *res)
{
	static const char *const streams[] = { "stdout", "stderr" };
	const json_t	*text;
	const char	*enc;
	char		 key[32];
	size_t		 i;

	render_close_line(r);
	for (i = 0; i < 2; i++) {
		text = json_object_get(res, streams[i]);
		if (!json_is_string(text) || json_string_length(text) == 0)
			continue;
		snprintf(key, sizeof key, "%s_encoding", streams[i]);
		enc = json_string_value(json_object_get(res, key));
		if (enc != NULL && strcmp(enc, "utf-8") != 0) {
			snprintf(key, sizeof key, "%s_bytes", streams[i]);
			fprintf(r->out, "%s  (%s: %lld bytes, not text)%s\n",
			    render_color(r, "dim"), streams[i], (long long)
			    json_integer_value(json_object_get(res, key)),
			    render_color(r, "reset"));
			continue;
		}
		(void)render_lines(r, json_string_value(text),
		    json_string_length(text), "  ", i == 0 ? "plain" : "error",
		    0, 0);
	}
	render_run_end(r, res);
}

/* Writes a unified diff, coloured and escaped (see render.h). */
size_t
render_diff(struct render *r, const char *diff, size_t dlen, const char *indent,
    size_t max_lines, size_t line_max)
{
	return render_lines(r, diff, dlen, indent, NULL, max_lines, line_max);
}

/* Says why an approval was asked for, in words (NULL if the reason is unknown). */
const char *
render_approval_why(const char *why)
{
	if (why == NULL)
		return NULL;
	if (strcmp(why, "protected_path") == 0)
		return "a protected file (protected_files in the profile)";
	if (strcmp(why, "env_dir") == 0)
		return ".gbr_envs/ holds the environment profiles and is always "
		    "protected";
	if (strcmp(why, "ask_command") == 0)
		return "the command matches ask_commands in the profile";
	if (strcmp(why, "ask_tool") == 0)
		return "the profile's autonomy asks before this tool runs";
	if (strcmp(why, "mcp_tool") == 0)
		return "a tool of an MCP server the profile names ([mcp.NAME] "
		    "ask)";
	if (strcmp(why, "unconfined") == 0)
		return "commands are not confined to the workspace on this "
		    "platform: in full autonomy each one asks first";
	return NULL;
}

/* Writes what an approval is about on one line: its tool, then its path or command. */
void
render_approval_what(struct render *r, const json_t *a)
{
	const json_t	*args = json_object_get(a, "args");
	const json_t	*path = json_object_get(a, "path");
	const json_t	*cmd = json_object_get(a, "command");

	render_field(r, json_object_get(a, "tool"), RENDER_ESC_BACKSLASH,
	    RENDER_NAME_MAX, "?");
	if (json_is_string(path)) {
		fputc(' ', r->out);
		render_field(r, path, RENDER_ESC_BACKSLASH, RENDER_PATH_MAX, NULL);
	} else if (json_is_string(cmd)) {
		fputs(" $ ", r->out);
		render_field(r, cmd, 0, RENDER_PATH_MAX, NULL);
	} else if (json_is_string(json_object_get(args, "path"))) {
		fputc(' ', r->out);
		render_field(r, json_object_get(args, "path"), RENDER_ESC_BACKSLASH,
		    RENDER_PATH_MAX, NULL);
	}
}

/* Renders a pending approval for a person to decide (see render.h). */
void
render_approval(struct render *r, const json_t *a, size_t max_lines,
    const char *hint)
{
	const json_t	*args = json_object_get(a, "args");
	const json_t	*cmd = json_object_get(a, "command");
	const json_t	*diff = json_object_get(a, "diff");
	const json_t	*content = json_object_get(args, "content");
	const char	*why = json_string_value(json_object_get(a, "why"));
	const char	*state = json_string_value(json_object_get(a, "state"));
	char		*s;
	size_t		 more = 0;

	render_close_line(r);
	fprintf(r->out, "%s? approval ", render_color(r, "approval"));
	render_field(r, json_object_get(a, "id"), RENDER_ESC_BACKSLASH,
	    RENDER_NAME_MAX, "?");
	fputs(" needs a decision: ", r->out);
	if (json_is_string(cmd)) {
		/* The whole command, on its own line, where it cannot hide. */
		render_field(r, json_object_get(a, "tool"), RENDER_ESC_BACKSLASH,
		    RENDER_NAME_MAX, "?");
		fprintf(r->out, "%s\n  $ ", render_color(r, "reset"));
		render_field(r, cmd, 0, 0, NULL);
		fputc('\n', r->out);
	} else {
		render_approval_what(r, a);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
	}
	if (!json_is_string(cmd) && !json_is_string(diff) &&
	    !json_is_string(content) && args != NULL) {
		s = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
		fputs("  args: ", r->out);
		if (s != NULL)
			render_escaped(r, s, strlen(s), 0, RENDER_ARGS_MAX);
		fputc('\n', r->out);
		free(s);
	}
	fputs("  why: ", r->out);
	if (render_approval_why(why) != NULL)
		fputs(render_approval_why(why), r->out);
	else
		render_field(r, json_object_get(a, "why"), RENDER_ESC_BACKSLASH,
		    RENDER_NAME_MAX, "not given");
	fputc('\n', r->out);
	if (state != NULL && strcmp(state, "interrupted") == 0) {
		fprintf(r->out, "%s  ! ", render_color(r, "error"));
		if (json_is_string(json_object_get(a, "note")))
			render_field(r, json_object_get(a, "note"), 0,
			    RENDER_PATH_MAX, NULL);
		else
			fputs("gbrd stopped while applying it: part of it may "
			    "already be done; check before you answer", r->out);
		fprintf(r->out, "%s\n", render_color(r, "reset"));
	} else if (state != NULL && strcmp(state, "pending") != 0) {
		fputs("  state: ", r->out);
		render_escaped(r, state, strlen(state), RENDER_ESC_BACKSLASH,
		    RENDER_NAME_MAX);
		fputc('\n', r->out);
	}
	if (json_is_string(diff))
		more = render_diff(r, json_string_value(diff),
		    json_string_length(diff), "  ", max_lines, max_lines != 0 ?
		    RENDER_LINE_MAX : 0);
	else if (json_is_string(content)) {
		fputs("  the new content:\n", r->out);
		more = render_lines(r, json_string_value(content),
		    json_string_length(content), "  +", "diff_add", max_lines,
		    max_lines != 0 ? RENDER_LINE_MAX : 0);
	}
	if (more > 0)
		fprintf(r->out, "%s  ... %zu more line%s%s%s\n",
		    render_color(r, "dim"), more, more == 1 ? "" : "s",
		    hint != NULL ? hint : "", render_color(r, "reset"));
}

/* Renders the outcome of an approval (see render.h). */
void
render_approval_resolved(struct render *r, const json_t *a, const char *where)
{
	const json_t	*reason = json_object_get(a, "reason");
	const char	*state = json_string_value(json_object_get(a, "state"));

	/* A failure says why in its result. */
	if (!json_is_string(reason) && state != NULL &&
	    strcmp(state, "failed") == 0)
		reason = json_object_get(json_object_get(json_object_get(a,
		    "result"), "error"), "message");
	render_close_line(r);
	fprintf(r->out, "%s? approval ", render_color(r, "approval"));
	render_field(r, json_object_get(a, "id"), RENDER_ESC_BACKSLASH,
	    RENDER_NAME_MAX, "?");
	fputc(' ', r->out);
	render_field(r, json_object_get(a, "state"), RENDER_ESC_BACKSLASH,
	    RENDER_NAME_MAX, "resolved");
	if (where != NULL)
		fprintf(r->out, " %s", where);
	fputs(": ", r->out);
	render_approval_what(r, a);
	if (json_is_string(reason) && json_string_length(reason) > 0) {
		fputs(state != NULL && strcmp(state, "denied") == 0 ?
		    " (reason: " : " (", r->out);
		render_field(r, reason, 0, RENDER_PATH_MAX, NULL);
		fputc(')', r->out);
	}
	/* Which terminal or script decided (approved, edited, denied). */
	if (json_is_string(json_object_get(a, "decided_by")) && state != NULL &&
	    (strcmp(state, "approved") == 0 || strcmp(state, "edited") == 0 ||
	    strcmp(state, "denied") == 0)) {
		fputs(", by ", r->out);
		render_field(r, json_object_get(a, "decided_by"), 0,
		    RENDER_NAME_MAX, "?");
	}
	fprintf(r->out, "%s\n", render_color(r, "reset"));
}

/* Formats an estimated cost in USD. */
void
render_cost(char *buf, size_t len, double usd)
{
	/* An estimate from configured prices: never more precise than that. */
	if (!(usd > 0))		/* zero, or NaN from a broken daemon */
		snprintf(buf, len, "$0");
	else if (usd < 0.00005)
		snprintf(buf, len, "less than $0.0001");
	else if (usd < 1)
		snprintf(buf, len, "about $%.4f", usd);
	else
		snprintf(buf, len, "about $%.2f", usd);
}
