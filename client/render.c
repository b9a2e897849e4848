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
 * thing and mean another.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "render.h"
#include "xmalloc.h"

/* Longest one-line summary of tool arguments or results. */
#define RENDER_SUMMARY	160
#define RENDER_LINE_SUMMARY 100	/* bytes of a command's first line shown */
/* Bytes shown of a tool name or id, of a path or command, of raw arguments. */
#define RENDER_NAME_MAX	128
#define RENDER_PATH_MAX	4096
#define RENDER_ARGS_MAX	1024
/* Bytes of one diff line, and lines of a diff, in a bounded view. */
#define RENDER_LINE_MAX	1000
#define RENDER_DIFF_LINES 40

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

/*
 * Decodes one UTF-8 character of s (n bytes available). Returns its length,
 * or 0 if s does not start with a well-formed one (overlong forms,
 * surrogates and code points above U+10FFFF are not well-formed).
 */
static size_t
render_utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t	c, min;
	size_t		len, i;

	if (n == 0)
		return 0;
	c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c < 0xc2)
		return 0;
	if (c < 0xe0) {
		len = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c < 0xf0) {
		len = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c < 0xf5) {
		len = 4;
		c &= 0x07;
		min = 0x10000;
	} else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* True for the C0 and C1 controls and DEL. */
static int
render_is_control(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

/* True for the characters that change the direction of text (Trojan Source). */
static int
render_is_bidi(uint32_t cp)
{
	return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
	    cp == 0x200e || cp == 0x200f || cp == 0x061c;
}

/*
 * True for what a person cannot see or tell apart from something else:
 * controls, bidi formatting, zero-width and other invisible characters,
 * the line and paragraph separators, spaces that are not U+0020, tag
 * characters and noncharacters.
 */
static int
render_is_hidden(uint32_t cp)
{
	if (render_is_control(cp) || render_is_bidi(cp))
		return 1;
	switch (cp) {
	case 0x00a0: case 0x00ad: case 0x034f: case 0x115f: case 0x1160:
	case 0x1680: case 0x17b4: case 0x17b5: case 0x202f: case 0x205f:
	case 0x3000: case 0x3164: case 0xfeff: case 0xffa0:
		return 1;
	}
	return (cp >= 0x180b && cp <= 0x180e) || (cp >= 0x2000 && cp <= 0x200d) ||
	    cp == 0x2028 || cp == 0x2029 || (cp >= 0x2060 && cp <= 0x2064) ||
	    (cp >= 0x206a && cp <= 0x206f) || (cp >= 0xfff9 && cp <= 0xfffb) ||
	    (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff) ||
	    (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe;
}

/* Writes untrusted text made safe to show on one line (see render.h). */
void
render_escaped(struct render *r, const char *s, size_t len, int flags,
    size_t max)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, n, shown;
	uint32_t		 cp;
	char			 esc[16];

	if (s == NULL)
		return;
	shown = max != 0 && len > max ? max : len;
	while (i < shown) {
		cp = 0;
		n = render_utf8(u + i, len - i, &cp);
		esc[0] = '\0';
		if (n == 0) {
			snprintf(esc, sizeof esc, "\\x{%02X}", u[i]);
			n = 1;
		} else if (cp == '\t' && (flags & RENDER_ESC_TAB))
			;
		else if ((flags & RENDER_ESC_CODES) &&
		    (cp == '\n' || cp == '\r' || cp == '\t'))
			snprintf(esc, sizeof esc, "\\u{%04X}", (unsigned)cp);
		else if (cp == '\n')
			snprintf(esc, sizeof esc, "\\n");
		else if (cp == '\r')
			snprintf(esc, sizeof esc, "\\r");
		else if (cp == '\t')
			snprintf(esc, sizeof esc, "\\t");
		else if (render_is_hidden(cp))
			snprintf(esc, sizeof esc, "\\u{%04X}", (unsigned)cp);
		if (esc[0] != '\0')
			fprintf(r->out, "%s%s%s", render_color(r, "escape"), esc,
			    render_color(r, "noescape"));
		else if (cp == '\\' && (flags & RENDER_ESC_BACKSLASH))
			fputs("\\\\", r->out);
		else
			fwrite(s + i, 1, n, r->out);
		i += n;
	}
	if (i < len)
		fprintf(r->out, "...(%zu more bytes)", len - i);
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
		if ((n = render_utf8(u + i, len - i, &cp)) == 0)
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
static void
render_text(struct render *r, const char *s, const char *prefix, size_t max)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, len = strlen(s), n;
	uint32_t		 cp;

	while (i < len) {
		if (max != 0 && i >= max) {
			fputs("...", r->out);
			break;
		}
		if ((n = render_utf8(u + i, len - i, &cp)) == 0) {
			fputc('?', r->out);
			i++;
			continue;
		}
		if (cp == '\n') {
			fputc('\n', r->out);
			if (prefix != NULL && s[i + 1] != '\0')
				fputs(prefix, r->out);
		} else if (cp == '\t')
			fputc('\t', r->out);
		else if (render_is_control(cp) || render_is_bidi(cp))
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
static void
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
		if (more > 0)
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

/* The tool calls an agent's answer asks for, one "~ tool args" line each. */
static void
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
static void
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
			render_line(r, "assistant", "", content);
		fprintf(r->out, "%s~ ", render_color(r, "tool"));
		render_json(r, json_object_get(m, "tool"));
		fputc(' ', r->out);
		render_json(r, json_object_get(m, "args"));
		fprintf(r->out, "%s\n", render_color(r, "reset"));
	} else if (strcmp(role, "assistant") == 0) {
		if (content != NULL && *content != '\0')
			render_line(r, "assistant", "", content);
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
	} else
		render_line(r, "dim", "[?] ", role);
}

/* Writes a JSON string field escaped on one line, or alt when it is not a string. */
static void
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

/* Writes the output and the end of a run tool's result (see render.h). */
void
render_run_result(struct render *r, const json_t *res)
{
	static const char *const streams[] = { "stdout", "stderr" };
	const json_t	*text;
	const char	*enc, *sig;
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
	fprintf(r->out, "%s\n", render_color(r, "reset"));
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
		r->streamed = 1;
		return 1;
	}
	if (strcmp(type, "message") == 0 && r->streamed &&
	    json_object_get(json_object_get(p, "message"), "step") != NULL) {
		/* The agent's answer, already shown live: only its tool calls. */
		r->streamed = 0;
		render_close_line(r);
		render_tool_calls(r, json_object_get(json_object_get(p, "message"),
		    "tool_calls"));
		render_stop_note(r, json_object_get(p, "message"));
		return 1;
	}
	if (strcmp(type, "message") == 0 || strcmp(type, "tool.call") == 0 ||
	    strcmp(type, "tool.result") == 0) {
		render_message(r, json_object_get(p, "message"));
		return 1;
	}
	if (strcmp(type, "llm.retry") == 0 && json_is_integer(json_object_get(p,
	    "max_request_bytes"))) {
		/* A context overflow: asked again at once, with less. */
		r->streamed = 0;
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
		r->streamed = 0;
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
	if (strcmp(type, "resync_required") == 0 || strcmp(type, "evicted") == 0 ||
	    strcmp(type, "sandbox.denied") == 0 || strcmp(type, "env.invalid") == 0 ||
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
