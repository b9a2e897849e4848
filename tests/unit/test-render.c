/*
 * Unit tests for client/render.c: what people see of session events. The
 * daemon's text is untrusted (an agent wrote it), so escape sequences and
 * control characters must never reach the terminal; colours only when asked.
 * What a person approves (paths, commands, diffs) must show every hidden
 * character as a visible escape, so a prompt cannot lie.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "unit.h"

/* Renders one event (JSON text) into a string the caller frees. */
static char *
show(struct render *r, const char *event, int message)
{
	json_error_t	 jerr;
	json_t		*v = json_loads(event, 0, &jerr);
	char		*buf = NULL;
	size_t		 len = 0;

	r->out = open_memstream(&buf, &len);
	if (v == NULL)
		printf("# bad test JSON: %s\n", jerr.text);
	else if (message)
		render_message(r, v);
	else
		render_event(r, v);
	fclose(r->out);
	json_decref(v);
	return buf;
}


/* Escapes s (len bytes) without colours; the caller frees the result. */
static char *
esc(const char *s, size_t len, int flags, size_t max)
{
	return render_escape(s, len, flags, max);
}

/* same(): unit.h's unit_same. */
#define same unit_same

/* Renders with a function taking a JSON value, into a string the caller frees. */
static char *
show_approval(struct render *r, const char *json, int resolved, size_t max)
{
	json_error_t	 jerr;
	json_t		*v = json_loads(json, 0, &jerr);
	char		*buf = NULL;
	size_t		 len = 0;

	r->out = open_memstream(&buf, &len);
	if (v == NULL)
		printf("# bad test JSON: %s\n", jerr.text);
	else if (resolved)
		render_approval_resolved(r, v, "in another terminal");
	else
		render_approval(r, v, max, " (/approval X shows all)");
	fclose(r->out);
	json_decref(v);
	return buf;
}

/* Renders a diff into a string the caller frees; *more gets the lines left out. */
static char *
show_diff(struct render *r, const char *diff, size_t max, size_t *more)
{
	char	*buf = NULL;
	size_t	 len = 0;

	r->out = open_memstream(&buf, &len);
	*more = render_diff(r, diff, strlen(diff), "", max, 0);
	fclose(r->out);
	return buf;
}

/* The escaper: every hidden character becomes a visible escape. */
static void
test_escape(void)
{
	static const char *const bidi[] = { "\xe2\x80\xaa", "\xe2\x80\xab",
	    "\xe2\x80\xac", "\xe2\x80\xad", "\xe2\x80\xae", "\xe2\x81\xa6",
	    "\xe2\x81\xa7", "\xe2\x81\xa8", "\xe2\x81\xa9", "\xe2\x80\x8f",
	    "\xd8\x9c" };
	static const char *const hidden[] = { "\xe2\x80\x8b", "\xe2\x80\x8c",
	    "\xe2\x80\x8d", "\xe2\x81\xa0", "\xef\xbb\xbf", "\xc2\xad",
	    "\xc2\xa0", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe3\x80\x80",
	    "\xf3\xa0\x80\x81", "\xe1\xa0\x8e", "\xef\xbf\xbe" };
	struct render	 r;
	char		*s, *buf = NULL, in[32];
	size_t		 i, len = 0;
	int		 ok;

	s = esc("src/a\033[31mred\033[0m.c", 19, 0, 0);
	CHECK(strchr(s, '\033') == NULL && same(s,
	    "src/a\\u{001B}[31mred\\u{001B}[0m.c"), "ANSI escapes are shown, not run");
	free(s);
	s = esc("a\nb\tc\rd\x07", 8, 0, 0);
	CHECK(same(s, "a\\nb\\tc\\rd\\u{0007}"), "newline, tab, CR and BEL escaped");
	free(s);
	s = esc("a\tb\nc", 5, RENDER_ESC_TAB, 0);
	CHECK(same(s, "a\tb\\nc"), "tabs kept when asked, newlines never");
	free(s);
	s = esc("x\xc2\x9b" "31m\xc2\x85y\x7f", 10, 0, 0);
	CHECK(same(s, "x\\u{009B}31m\\u{0085}y\\u{007F}"),
	    "C1 controls (8-bit CSI, NEL) and DEL escaped");
	free(s);

	ok = 1;
	for (i = 0; i < sizeof bidi / sizeof bidi[0]; i++) {
		snprintf(in, sizeof in, "a%sb", bidi[i]);
		s = esc(in, strlen(in), 0, 0);
		if (strstr(s, "\\u{") == NULL || strchr(s + 1, 'b') == NULL ||
		    strncmp(s, "a\\u{", 4) != 0 || strlen(s) != 10)
			ok = 0, printf("# bidi %zu: %s\n", i, s);
		free(s);
	}
	CHECK(ok, "every bidi override, embedding, isolate and mark escaped");
	s = esc("evil\xe2\x80\xae" "fdp.exe", 14, 0, 0);
	CHECK(same(s, "evil\\u{202E}fdp.exe"), "Trojan Source RLO shown as \\u{202E}");
	free(s);
	ok = 1;
	for (i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
		snprintf(in, sizeof in, "a%sb", hidden[i]);
		s = esc(in, strlen(in), 0, 0);
		if (strncmp(s, "a\\u{", 4) != 0 || s[strlen(s) - 1] != 'b' ||
		    strchr(s, '\xe2') != NULL || strchr(s, '\xef') != NULL)
			ok = 0, printf("# hidden %zu: %s\n", i, s);
		free(s);
	}
	CHECK(ok, "zero-width, invisible, odd spaces, tags, noncharacters escaped");

	s = esc("a\xff" "b\xc0\xaf" "c\xe0\x80\xaf" "d\xed\xa0\x80" "e\xf4\x90\x80\x80"
	    "f\xe2\x82", 21, 0, 0);
	CHECK(same(s, "a\\x{FF}b\\x{C0}\\x{AF}c\\x{E0}\\x{80}\\x{AF}d\\x{ED}\\x{A0}"
	    "\\x{80}e\\x{F4}\\x{90}\\x{80}\\x{80}f\\x{E2}\\x{82}"),
	    "invalid UTF-8 (stray, overlong, surrogate, too big, cut) as bytes");
	free(s);
	s = esc("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 a-b_c.d/e f", 29, 0, 0);
	CHECK(same(s, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 a-b_c.d/e f"),
	    "ordinary text and UTF-8 left alone");
	free(s);
	s = esc("a\\u{202E}b", 10, RENDER_ESC_BACKSLASH, 0);
	CHECK(same(s, "a\\\\u{202E}b"), "a literal \\u{...} in a path cannot pose as an escape");
	free(s);
	s = esc("C:\\x", 4, 0, 0);
	CHECK(same(s, "C:\\x"), "backslashes kept as they are without the flag");
	free(s);
	s = esc("abcdefghij", 10, 0, 4);
	CHECK(same(s, "abcd...(6 more bytes)"), "cut at max, saying how much is left");
	free(s);
	s = esc("\xe6\x97\xa5\xe6\x9c\xac", 6, 0, 4);
	CHECK(same(s, "\xe6\x97\xa5\xe6\x9c\xac"), "a cut never splits a character");
	free(s);
	s = esc("a\0b", 3, 0, 0);
	CHECK(same(s, "a\\u{0000}b"), "NUL inside the text escaped");
	free(s);

	memset(&r, 0, sizeof r);
	r.color = 1;
	r.out = open_memstream(&buf, &len);
	render_escaped(&r, "a\xe2\x80\xae" "b\\", 6, RENDER_ESC_BACKSLASH, 0);
	fclose(r.out);
	CHECK(same(buf, "a\033[7m\\u{202E}\033[27mb\\\\"),
	    "with colours an escape is in reverse video, a backslash is not");
	free(buf);

	/* Prose (messages) keeps newlines and tabs but not the rest. */
	memset(&r, 0, sizeof r);
	s = show(&r, "{\"role\":\"assistant\",\"content\":\"a\\u009b2Jb\\u202ec"
	    "\\u2066d\\te\"}", 1);
	CHECK(same(s, "a?2Jb?c?d\te\n"), "prose: C1 and bidi controls shown as '?'");
	free(s);
}

/* Diffs: coloured by line kind, escaped, bounded. */
static void
test_diff(void)
{
	struct render	 r;
	char		*s, big[4000];
	size_t		 more, i, o = 0;

	memset(&r, 0, sizeof r);
	r.color = 1;
	s = show_diff(&r, "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n ctx\n-old\n+new\n"
	    "--- gone\n\\ No newline at end of file\n+\033]0;x\007\n", 0, &more);
	CHECK(same(s, "\033[1m--- a/f\033[0m\n\033[1m+++ b/f\033[0m\n"
	    "\033[36m@@ -1,3 +1,3 @@\033[0m\n ctx\n\033[31m-old\033[0m\n"
	    "\033[32m+new\033[0m\n\033[31m--- gone\033[0m\n"
	    "\033[2m\\ No newline at end of file\033[0m\n"
	    "\033[32m+\033[7m\\u{001B}\033[27m]0;x\033[7m\\u{0007}\033[27m\033[0m\n")
	    && more == 0,
	    "+ green, - red, @@ cyan, headers bold; a '---' line in a hunk is red; "
	    "escapes inside lines shown");
	free(s);

	r.color = 0;
	s = show_diff(&r, "@@ -1 +1 @@\n-a\t\xe2\x80\xae\n+b\n", 0, &more);
	CHECK(strchr(s, '\033') == NULL && same(s, "@@ -1 +1 @@\n-a\t\\u{202E}\n+b\n"),
	    "without colours: no escape sequence at all, tabs kept, bidi escaped");
	free(s);

	for (i = 0; i < 100; i++)
		o += (size_t)snprintf(big + o, sizeof big - o, "+line %zu\n", i);
	s = show_diff(&r, big, 10, &more);
	CHECK(more == 90 && strstr(s, "+line 9\n") != NULL &&
	    strstr(s, "+line 10\n") == NULL, "bounded: 10 lines shown, 90 left out");
	free(s);
	s = show_diff(&r, big, 0, &more);
	CHECK(more == 0 && strstr(s, "+line 99\n") != NULL, "0: the whole diff");
	free(s);
	s = show_diff(&r, "", 10, &more);
	CHECK(same(s, "") && more == 0, "an empty diff shows nothing");
	free(s);
}

/* Approvals: what the person is asked, and what they see when it is over. */
static void
test_approval(void)
{
	struct render	 r;
	char		*s, json[8192];
	size_t		 i, o = 0;

	memset(&r, 0, sizeof r);
	s = show_approval(&r, "{\"id\":\"ap1\",\"tool\":\"write_file\",\"path\":"
	    "\"x\\u001b[2K\\u202egnp.exe\",\"why\":\"env_dir\",\"state\":\"pending\","
	    "\"diff\":\"--- a/x\\n+++ b/x\\n@@ -0,0 +1 @@\\n+hi\\n\"}", 0, 40);
	CHECK(strchr(s, '\033') == NULL && strstr(s, "\xe2\x80\xae") == NULL &&
	    same(s, "? approval ap1 needs a decision: write_file "
	    "x\\u{001B}[2K\\u{202E}gnp.exe\n  why: .gbr_envs/ holds the environment "
	    "profiles and is always protected\n  --- a/x\n  +++ b/x\n"
	    "  @@ -0,0 +1 @@\n  +hi\n"),
	    "a file approval: escaped path, why in words, the diff");
	free(s);

	s = show_approval(&r, "{\"id\":\"ap2\",\"tool\":\"run_command\",\"path\":null,"
	    "\"command\":\"git push \\u2067--force\\u2069 origin\",\"why\":"
	    "\"ask_command\",\"state\":\"pending\",\"diff\":null}", 0, 40);
	CHECK(same(s, "? approval ap2 needs a decision: run_command\n"
	    "  $ git push \\u{2067}--force\\u{2069} origin\n"
	    "  why: the command matches ask_commands in the profile\n"),
	    "a command approval: the whole command on its own line, escaped");
	free(s);

	s = show_approval(&r, "{\"id\":\"ap3\",\"tool\":\"edit_file\",\"path\":\"a\","
	    "\"why\":\"odd\\u0007\",\"state\":\"interrupted\",\"diff\":\"+x\"}", 0, 40);
	CHECK(strstr(s, "  why: odd\\u{0007}\n") != NULL &&
	    strstr(s, "may already be done") != NULL,
	    "an unknown why is escaped; an interrupted one warns");
	free(s);
	s = show_approval(&r, "{\"id\":\"ap3\",\"tool\":\"edit_file\",\"path\":\"a\","
	    "\"why\":\"protected_path\",\"state\":\"interrupted\",\"note\":"
	    "\"it may\\u001b[8m hold it\"}", 0, 40);
	CHECK(strstr(s, "  ! it may\\u{001B}[8m hold it\n") != NULL,
	    "gbrd's note about an interrupted one is shown, escaped");
	free(s);
	s = show_approval(&r, "{\"id\":\"ap3\",\"tool\":\"write_file\",\"path\":"
	    "\"a\",\"state\":\"failed\",\"reason\":null,\"result\":{\"error\":"
	    "{\"kind\":\"too_large\",\"message\":\"over the cap\"}}}", 1, 0);
	CHECK(same(s, "? approval ap3 failed in another terminal: write_file a "
	    "(over the cap)\n"), "a failure says why");
	free(s);

	s = show_approval(&r, "{\"id\":\"ap4\",\"tool\":\"write_file\",\"path\":\"n\","
	    "\"why\":\"protected_path\",\"args\":{\"path\":\"n\",\"content\":"
	    "\"one\\ntwo\\n\"}}", 0, 40);
	CHECK(strstr(s, "  the new content:\n  +one\n  +two\n") != NULL,
	    "no diff: the new content is shown instead");
	free(s);

	o = (size_t)snprintf(json, sizeof json, "{\"id\":\"ap5\",\"tool\":"
	    "\"write_file\",\"path\":\"big\",\"why\":\"protected_path\",\"diff\":\"");
	for (i = 0; i < 50; i++)
		o += (size_t)snprintf(json + o, sizeof json - o, "+%zu\\n", i);
	snprintf(json + o, sizeof json - o, "\"}");
	s = show_approval(&r, json, 0, 40);
	CHECK(strstr(s, "  +39\n  ... 10 more lines (/approval X shows all)\n") !=
	    NULL && strstr(s, "+40") == NULL, "a long diff is bounded, with the hint");
	free(s);
	s = show_approval(&r, json, 0, 0);
	CHECK(strstr(s, "  +49\n") != NULL && strstr(s, "more line") == NULL,
	    "and shown whole when asked");
	free(s);

	s = show_approval(&r, "{\"id\":\"ap6\",\"tool\":\"write_file\",\"path\":"
	    "\"p\\u200bq\",\"state\":\"denied\",\"decision\":\"deny\",\"reason\":"
	    "\"no\\u001b[1mway\"}", 1, 0);
	CHECK(same(s, "? approval ap6 denied in another terminal: write_file "
	    "p\\u{200B}q (reason: no\\u{001B}[1mway)\n"),
	    "a resolved approval: state, where, escaped path and reason");
	free(s);

	s = show(&r, "{\"type\":\"approval.requested\",\"session\":\"s\",\"seq\":3,"
	    "\"approval\":{\"id\":\"ap7\",\"tool\":\"ask\\u001b\",\"args\":{\"q\":1},"
	    "\"why\":\"ask_tool\"}}", 0);
	CHECK(same(s, "? approval ap7 needs a decision: ask\\u{001B}\n"
	    "  args: {\"q\":1}\n  why: the profile's autonomy asks before this tool "
	    "runs\n"), "approval.requested events render the approval");
	free(s);
	s = show(&r, "{\"type\":\"approval.resolved\",\"session\":\"s\",\"seq\":4,"
	    "\"approval\":{\"id\":\"ap7\",\"tool\":\"write_file\",\"path\":\"f\","
	    "\"state\":\"applied\"}}", 0);
	CHECK(same(s, "? approval ap7 applied: write_file f\n"),
	    "approval.resolved events say the outcome");
	free(s);
}

/* Tool results as the REPL shows them: the message, the line, the check. */
static const struct {
	const char	*json;
	const char	*want;
	const char	*what;
} summaries[] = {
	{ "{\"role\":\"tool\",\"tool\":\"write_file\",\"ok\":true,"
	    "\"result\":{\"path\":\"src/a.c\",\"bytes\":1,\"created\":true}}",
	    "  = write_file src/a.c: 1 byte, new file\n", "write_file" },
	{ "{\"role\":\"tool\",\"tool\":\"read_file\",\"ok\":true,"
	    "\"result\":{\"path\":\"a\\u001b[2J\",\"lines\":3,\"total_lines\":9,"
	    "\"size\":70,\"truncated\":true,\"content\":\"x\"}}",
	    "  = read_file a\\u{001B}[2J: 3 lines of 9 (70 bytes), cut\n",
	    "read_file, its path escaped" },
	{ "{\"role\":\"tool\",\"tool\":\"run_command\",\"ok\":true,"
	    "\"result\":{\"exit_code\":2,\"signal\":null,\"duration_ms\":4,"
	    "\"truncated\":false,\"stdout\":\"one \\u001b]0;x\\u0007\\ntwo\\nthree\\n\","
	    "\"stdout_encoding\":\"utf-8\",\"stderr\":\"\"}}",
	    "  = run_command exit 2 in 4 ms: one \\u{001B}]0;x\\u{0007} (+2 lines)\n",
	    "run_command: status, time, the first line escaped" },
	{ "{\"role\":\"tool\",\"tool\":\"run_script\",\"ok\":true,"
	    "\"result\":{\"exit_code\":null,\"signal\":\"SIGSEGV\",\"duration_ms\":9,"
	    "\"truncated\":true,\"stdout\":\"\",\"stderr\":\"AAEC\","
	    "\"stderr_encoding\":\"base64\",\"stderr_bytes\":3}}",
	    "  = run_script killed by SIGSEGV in 9 ms, output cut: (stderr) "
	    "3 bytes that are not text\n", "run_script: a signal, binary stderr" },
	{ "{\"role\":\"tool\",\"tool\":\"check\",\"ok\":true,"
	    "\"result\":{\"ok\":false,\"exit_code\":1,\"duration_ms\":300,"
	    "\"diagnostics\":[{}],\"stdout\":\"a.c:1:1: error: x\\n\"}}",
	    "  = check failed, exit 1 in 300 ms, 1 diagnostic: a.c:1:1: error: x\n",
	    "check: failed, with its diagnostics" },
	{ "{\"role\":\"tool\",\"tool\":\"search\",\"ok\":true,"
	    "\"result\":{\"matches\":[{},{}],\"files_scanned\":1}}",
	    "  = search 2 matches (1 file scanned)\n", "search" },
	{ "{\"role\":\"tool\",\"tool\":\"mcp_thing\",\"ok\":true,"
	    "\"result\":{\"path\":\"p\"}}",
	    "  = mcp_thing {\"path\":\"p\"}\n", "an unknown tool: its JSON" },
};

int
main(void)
{
	struct render	 r;
	char		*s;
	size_t		 i;

	memset(&r, 0, sizeof r);
	s = show(&r, "{\"type\":\"message\",\"seq\":2,\"message\":{\"role\":\"user\","
	    "\"content\":\"hi\\nthere\"}}", 0);
	CHECK(strcmp(s, "> hi\n  there\n") == 0, "user message, continuation indented");
	free(s);

	s = show(&r, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"evil \\u001b[2J\\u001b]0;title\\u0007 end\"}}", 0);
	CHECK(strchr(s, '\033') == NULL && strchr(s, '\007') == NULL,
	    "escape and bell characters never reach the terminal");
	CHECK(strstr(s, "evil ?[2J?]0;title? end") != NULL, "they show as '?'");
	free(s);

	s = show(&r, "{\"role\":\"user\",\"content\":\"trailing\\n\\n\"}", 1);
	CHECK(strcmp(s, "> trailing\n") == 0, "trailing newlines add no blank lines");
	free(s);

	s = show(&r, "{\"role\":\"rewind\",\"to_seq\":7,\"messages\":4}", 1);
	CHECK(strcmp(s, "* conversation rewound: 4 messages after seq 7 "
	    "dropped from what the model sees\n") == 0,
	    "a conversation rewind in a history says what the model lost");
	free(s);
	s = show(&r, "{\"type\":\"conversation.rewound\",\"to_seq\":3,"
	    "\"messages\":1,\"message\":{\"role\":\"rewind\",\"to_seq\":3,"
	    "\"messages\":1}}", 0);
	CHECK(strcmp(s, "* conversation rewound: 1 message after seq 3 "
	    "dropped from what the model sees\n") == 0,
	    "... and so does its live event");
	free(s);

	s = show(&r, "{\"type\":\"message.delta\",\"text\":\"stream\"}", 0);
	CHECK(strcmp(s, "stream") == 0 && r.open_line, "a delta leaves the line open");
	free(s);
	s = show(&r, "{\"type\":\"error\",\"kind\":\"no_provider\",\"message\":\"m\"}", 0);
	CHECK(strcmp(s, "\n! no_provider: m\n") == 0 && !r.open_line,
	    "the next event closes the streamed line first");
	free(s);

	s = show(&r, "{\"type\":\"session.state\",\"state\":\"idle\",\"turn\":3,"
	    "\"outcome\":\"cancelled\"}", 0);
	CHECK(strcmp(s, "* turn 3 cancelled\n") == 0, "cancelled turn");
	free(s);
	s = show(&r, "{\"type\":\"session.state\",\"state\":\"idle\",\"turn\":3,"
	    "\"outcome\":\"no_provider\"}", 0);
	CHECK(strcmp(s, "") == 0, "no_provider end is said by its error event only");
	free(s);
	s = show(&r, "{\"type\":\"session.state\",\"state\":\"interrupted\",\"turn\":4,"
	    "\"reason\":\"daemon died\"}", 0);
	CHECK(strcmp(s, "! turn 4 interrupted: daemon died\n") == 0, "interrupted turn");
	free(s);

	/* A write's result: its line, then its diff, capped on screen. */
	s = show(&r, "{\"role\":\"tool\",\"tool\":\"edit_file\",\"ok\":true,"
	    "\"result\":{\"path\":\"a.c\",\"replacements\":1,\"bytes\":4,"
	    "\"diff\":\"--- a/a.c\\n+++ b/a.c\\n@@ -1 +1 @@\\n-x\\u001b\\n+y\\n\"}}",
	    1);
	CHECK(same(s, "  = edit_file a.c: 1 replacement, now 4 bytes\n"
	    "    --- a/a.c\n    +++ b/a.c\n    @@ -1 +1 @@\n    -x\\u{001B}\n"
	    "    +y\n"), "an edit's diff under its line, escaped");
	free(s);
	{
		char	big[4096];
		size_t	n;

		n = (size_t)snprintf(big, sizeof big, "{\"role\":\"tool\","
		    "\"tool\":\"write_file\",\"ok\":true,\"result\":{\"path\":"
		    "\"n\",\"bytes\":9,\"created\":true,\"diff_truncated\":true,"
		    "\"diff\":\"--- a/n\\n+++ b/n\\n@@ -0,0 +1,30 @@\\n");
		for (i = 0; i < 30; i++)
			n += (size_t)snprintf(big + n, sizeof big - n, "+%zu\\n", i);
		snprintf(big + n, sizeof big - n, "\"}}");
		s = show(&r, big, 1);
		CHECK(strstr(s, "    +16\n    ... 13 more lines, and the rest of "
		    "the diff was cut by gbrd\n") != NULL && strstr(s, "+17") ==
		    NULL, "a long diff: 20 lines, the count, and gbrd's cut");
		free(s);
	}
	s = show(&r, "{\"role\":\"tool\",\"tool\":\"write_file\",\"ok\":true,"
	    "\"result\":{\"path\":\"b\",\"bytes\":3,\"created\":false,"
	    "\"diff_omitted\":\"binary\"}}", 1);
	CHECK(same(s, "  = write_file b: 3 bytes, replaced, no diff "
	    "(binary)\n"), "no diff: the line says why");
	free(s);
	s = show(&r, "{\"role\":\"tool\",\"tool\":\"read_file\",\"ok\":true,"
	    "\"result\":{\"path\":\"b\",\"lines\":1,\"total_lines\":1,"
	    "\"size\":2,\"diff\":\"+x\\n\"}}", 1);
	CHECK(strstr(s, "+x") == NULL, "only a write's diff is shown");
	free(s);
	/* What a turn cost, when gbrd priced it ([prices]). */
	s = show(&r, "{\"type\":\"session.state\",\"state\":\"idle\",\"turn\":5,"
	    "\"outcome\":\"completed\",\"usage\":{\"input_tokens\":1200,"
	    "\"output_tokens\":100,\"cost_usd\":0.0051}}", 0);
	CHECK(same(s, "* turn 5: 1200 tokens in, 100 out, about $0.0051\n"),
	    "a priced turn says what it cost");
	free(s);
	s = show(&r, "{\"type\":\"session.state\",\"state\":\"idle\",\"turn\":6,"
	    "\"outcome\":\"max_steps\",\"usage\":{\"input_tokens\":9,"
	    "\"output_tokens\":1,\"unpriced\":true}}", 0);
	CHECK(same(s, "* turn 6 max_steps (9 tokens in, 1 out)\n"),
	    "an unpriced turn gives tokens only");
	free(s);
	{
		static const struct {
			double		 usd;
			const char	*want;
		} costs[] = {
			{ 0, "$0" }, { 0.00001, "less than $0.0001" },
			{ 0.00012, "about $0.0001" }, { 0.98765, "about $0.9877" },
			{ 12.345, "about $12.35" }, { -1, "$0" },
		};
		char	buf[32];

		for (i = 0; i < sizeof costs / sizeof costs[0]; i++) {
			render_cost(buf, sizeof buf, costs[i].usd);
			CHECK(same(buf, costs[i].want), "render_cost(%g)",
			    costs[i].usd);
		}
	}

	/* The agent's answer: shown live once, then only its tool calls. */
	s = show(&r, "{\"type\":\"message.delta\",\"text\":\"Hi there\",\"step\":1}", 0);
	free(s);
	s = show(&r, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"Hi there\",\"step\":1,\"tool_calls\":[{\"name\":"
	    "\"read_file\",\"args\":{\"path\":\"a\"}}]}}", 0);
	CHECK(strstr(s, "Hi there") == NULL && strstr(s, "read_file") != NULL &&
	    !r.open_line, "a streamed answer is not shown twice; its tool calls are");
	free(s);
	s = show(&r, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"Cut sho\",\"step\":3,\"stop_reason\":\"MAX_TOKENS\"}}", 0);
	CHECK(strstr(s, "Cut sho") != NULL && strstr(s, "output limit") != NULL,
	    "an answer cut at the output limit says so");
	free(s);
	s = show(&r, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"Whole\",\"step\":3,\"stop_reason\":\"end_turn\"}}", 0);
	CHECK(strstr(s, "output limit") == NULL, "a whole one does not");
	free(s);
	s = show(&r, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"From history\",\"step\":2}}", 0);
	CHECK(strstr(s, "From history") != NULL, "an answer not streamed is shown");
	free(s);
	s = show(&r, "{\"type\":\"llm.retry\",\"delay_ms\":1000,\"kind\":"
	    "\"rate_limited\",\"message\":\"slow \\u001b[2J down\"}", 0);
	CHECK(strstr(s, "retrying in 1000 ms") != NULL && strchr(s, '\033') == NULL,
	    "a retry is said, escaped");
	free(s);
	s = show(&r, "{\"type\":\"context.trimmed\",\"turn\":3,\"shortened\":2,"
	    "\"bytes_before\":40000,\"bytes_after\":16000,"
	    "\"max_request_bytes\":16384}", 0);
	CHECK(strstr(s, "2 earlier message(s) shortened") != NULL &&
	    strstr(s, "16000 bytes, its limit 16384") != NULL,
	    "a trimmed context is said with its figures");
	free(s);
	s = show(&r, "{\"type\":\"workspace.gone\",\"workspace\":\"/p\","
	    "\"message\":\"the workspace folder was deleted\"}", 0);
	CHECK(strstr(s, "! workspace.gone: ") != NULL &&
	    strstr(s, "was deleted") != NULL, "a workspace gone is an alarm");
	free(s);
	s = show(&r, "{\"type\":\"llm.retry\",\"delay_ms\":0,\"kind\":"
	    "\"context_overflow\",\"max_request_bytes\":90000,\"message\":"
	    "\"prompt is too long\"}", 0);
	CHECK(strstr(s, "cut to 90000 bytes and asked again") != NULL &&
	    strstr(s, "prompt is too long") != NULL, "a context overflow is said");
	free(s);
	s = show(&r, "{\"type\":\"check.result\",\"ok\":false,\"attempt\":2,"
	    "\"command\":\"make\"}", 0);
	CHECK(strstr(s, "! check") != NULL && strstr(s, "failed (run 2)") != NULL,
	    "a failed check");
	free(s);

	s = show(&r, "{\"role\":\"tool_call\",\"name\":\"read_file\",\"args\":"
	    "{\"path\":\"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}", 1);
	CHECK(strncmp(s, "~ read_file {\"path\":\"", 21) == 0 &&
	    strstr(s, "...(") != NULL && strlen(s) < 200,
	    "tool calls are one line, cut");
	free(s);

	s = show(&r, "{\"type\":\"tool.call\",\"message\":{\"role\":\"assistant\","
	    "\"call_id\":\"c1\",\"tool\":\"write_file\",\"args\":{\"path\":\"a\\u001b\"}}}", 0);
	CHECK(same(s, "~ write_file {\"path\":\"a\\u001B\"}\n"),
	    "tool.call events: one line, tool and arguments");
	free(s);
	s = show(&r, "{\"type\":\"tool.result\",\"message\":{\"role\":\"tool\","
	    "\"tool\":\"write_file\",\"ok\":true,\"result\":{\"bytes\":3}}}", 0);
	CHECK(same(s, "  = write_file {\"bytes\":3}\n"), "tool.result events: the result");
	free(s);
	/* What gbrd takes as text in a request, and where it stops. */
	CHECK(render_text_problem("caf\xc3\xa9\n", 6) == NULL &&
	    render_text_problem("", 0) == NULL, "UTF-8 text is text");
	s = render_text_problem("ab\0cd", 5);
	CHECK(s != NULL && strcmp(s, "a NUL byte at byte 2") == 0, "a NUL byte, where");
	free(s);
	s = render_text_problem("caf\xe9", 4);
	CHECK(s != NULL && strcmp(s, "not UTF-8 at byte 3") == 0, "Latin-1, where");
	free(s);
	s = render_text_problem("\xed\xa0\x80", 3);
	CHECK(s != NULL && strcmp(s, "not UTF-8 at byte 0") == 0, "a surrogate");
	free(s);
	s = render_text_problem("ok\xc3", 3);
	CHECK(s != NULL && strcmp(s, "not UTF-8 at byte 2") == 0, "a cut character");
	free(s);

	/* Known tools read as sentences; what they print is escaped. */
	for (i = 0; i < sizeof summaries / sizeof summaries[0]; i++) {
		s = show(&r, summaries[i].json, 1);
		CHECK(same(s, summaries[i].want), "%s", summaries[i].what);
		free(s);
	}
	s = show(&r, "{\"role\":\"tool\",\"tool\":\"write_file\",\"ok\":false,"
	    "\"error\":{\"kind\":\"denied\",\"message\":\"no\\u202e\"}}", 1);
	CHECK(same(s, "  = write_file denied: no\\u{202E}\n"),
	    "a failed one: kind and message, escaped");
	free(s);

	/* The REPL numbers them: the tag, and where the rest of the output is. */
	r.tool_tag = 3;
	s = show(&r, summaries[2].json, 1);
	CHECK(same(s, "  = [3] run_command exit 2 in 4 ms: one "
	    "\\u{001B}]0;x\\u{0007} (+2 lines, /show 3 for all)\n"),
	    "a tagged run: its number, and /show N for the rest");
	free(s);
	s = show(&r, summaries[0].json, 1);
	CHECK(same(s, "  = [3] write_file src/a.c: 1 byte, new file\n"),
	    "a tagged result of another tool: its number only");
	free(s);
	r.tool_tag = 0;

	/* /show's read_file: every line kept, each escaped after the indent. */
	{
		static const char	 text[] = "a\tb\n\033[2Jc\xe2\x80\xae" "d";
		char			*buf = NULL;
		size_t			 len = 0;

		r.out = open_memstream(&buf, &len);
		render_text_block(&r, text, sizeof text - 1, "  ");
		fclose(r.out);
		CHECK(same(buf, "  a\tb\n  \\u{001B}[2Jc\\u{202E}d\n"),
		    "a text block: lines indented, tabs kept, controls escaped");
		free(buf);
	}

	s = show(&r, "{\"type\":\"replay_complete\",\"seq\":5}", 0);
	CHECK(strcmp(s, "* live\n") == 0, "replay_complete shown by default");
	free(s);
	r.quiet_local = 1;
	s = show(&r, "{\"type\":\"replay_complete\",\"seq\":5}", 0);
	CHECK(strcmp(s, "") == 0, "and hidden when quiet");
	free(s);

	s = show(&r, "{\"type\":\"no.such.type\"}", 0);
	CHECK(strcmp(s, "* no.such.type \n") == 0, "unknown types still show");
	free(s);
	/* Found by fuzz-render: the type and kind were written as they came. */
	s = show(&r, "{\"type\":\"b\\u2069x\\u001b\"}", 0);
	CHECK(same(s, "* b\\u{2069}x\\u{001B} \n"), "an unknown type is escaped");
	free(s);
	s = show(&r, "{\"type\":\"error\",\"kind\":\"k\\u202e\",\"message\":\"m\"}", 0);
	CHECK(same(s, "! k\\u{202E}: m\n"), "an error's kind is escaped");
	free(s);
	s = show(&r, "{\"type\":\"session.created\",\"session\":\"s\\u001b[2J\","
	    "\"workspace\":\"/w\"}", 0);
	CHECK(same(s, "* session s\\u{001B}[2J created on /w\n"),
	    "a session id is escaped");
	free(s);
	s = show(&r, "{\"seq\":1}", 0);
	CHECK(strcmp(s, "") == 0, "no type, nothing");
	free(s);

	r.color = 1;
	s = show(&r, "{\"type\":\"error\",\"kind\":\"x\",\"message\":\"y\"}", 0);
	CHECK(strcmp(s, "\033[31m! x: y\033[0m\n") == 0, "colour when asked");
	free(s);

	test_escape();
	test_diff();
	test_approval();

	setenv("NO_COLOR", "1", 1);
	CHECK(render_want_color(1) == 0, "NO_COLOR turns colours off");
	setenv("NO_COLOR", "", 1);
	CHECK(render_want_color(-1) == 0, "not a terminal: no colours");
	return unit_done();
}
