/*
 * Unit tests for client/markdown.c: the model's markdown as it streams.
 * Chunks are cut where a stream may cut them (mid-word, mid-fence, a '`'
 * apart from its pair); the output must not depend on where, must be the
 * same text with and without colours (only the SGR sequences differ), and
 * must never carry a control byte of the model's.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "markdown.h"
#include "render.h"
#include "unit.h"

/* A renderer writing into memory. */
struct sink {
	struct render	 r;
	char		*buf;
	size_t		 len;
};

/* Starts a renderer into memory, with colours or without. */
static void
sink_open(struct sink *k, int color)
{
	memset(k, 0, sizeof *k);
	k->r.color = color;
	k->r.out = open_memstream(&k->buf, &k->len);
}

/* What was written so far (a borrowed string). */
static const char *
sink_text(struct sink *k)
{
	fflush(k->r.out);
	return k->buf;
}

/* Ends the renderer; returns what it wrote (the caller frees it). */
static char *
sink_close(struct sink *k)
{
	fclose(k->r.out);
	return k->buf;
}

/* Feeds chunks (NULL-terminated) as message.delta does, then ends it. */
static char *
feed(int color, const char *const *chunks)
{
	struct sink	 k;

	sink_open(&k, color);
	for (; *chunks != NULL; chunks++)
		markdown_feed(&k.r.md, &k.r, *chunks, strlen(*chunks));
	markdown_end(&k.r.md, &k.r);
	render_close_line(&k.r);
	return sink_close(&k);
}

/* s without its CSI sequences, as a new string. */
static char *
strip_sgr(const char *s)
{
	char	*out = malloc(strlen(s) + 1), *o = out;

	while (*s != '\0') {
		if (s[0] == '\033' && s[1] == '[') {
			for (s += 2; *s != '\0' && (*s < 0x40 || *s > 0x7e);
			    s++)
				;
			if (*s != '\0')
				s++;
			continue;
		}
		*o++ = *s++;
	}
	*o = '\0';
	return out;
}

/* same(): unit.h's unit_same. */
#define same unit_same

/*
 * Renders chunks without colours (must give want) and with colours (must
 * give want once the SGR sequences are taken out, and contain each of
 * the sequences in sgr, NULL-terminated, in that order).
 */
static void
check(const char *what, const char *const *chunks, const char *want,
    const char *const *sgr)
{
	char		*plain = feed(0, chunks), *color = feed(1, chunks);
	char		*stripped = strip_sgr(color);
	const char	*p = color;
	int		 found = 1;

	CHECK(same(plain, want), "%s: without colours", what);
	CHECK(strchr(plain, '\033') == NULL, "%s: no escape without colours",
	    what);
	CHECK(same(stripped, want), "%s: the same text with colours", what);
	for (; sgr != NULL && *sgr != NULL; sgr++) {
		if ((p = strstr(p, *sgr)) == NULL) {
			printf("# missing [\\033%s] in [%s]\n", *sgr + 1,
			    color);
			found = 0;
			break;
		}
		p += strlen(*sgr);
	}
	CHECK(found, "%s: its colours", what);
	free(plain);
	free(color);
	free(stripped);
}

/* Headings, emphasis, inline code, strikethrough, cut anywhere. */
static void
test_inline(void)
{
	static const char *const h[] = { "# Ti", "tle\n## Sub\n", NULL };
	static const char *const h_sgr[] = { "\033[1m\033[4mTitle",
	    "\033[1mSub", NULL };
	static const char *const em[] = { "Some **bo", "ld** te", "xt, *it*",
	    " and ~~gone~~\n", NULL };
	static const char *const em_sgr[] = { "\033[1mbold", "\033[3mit",
	    "\033[9mgone", NULL };
	static const char *const code[] = { "use `", "ls -l *.c", "` now\n",
	    NULL };
	static const char *const code_sgr[] = { "\033[36mls -l *.c", NULL };
	static const char *const under[] = { "snake_case_name and 2 * 3\n",
	    NULL };

	check("headings", h, "Title\nSub\n", h_sgr);
	check("emphasis split mid-word", em,
	    "Some bold text, it and gone\n", em_sgr);
	check("a '`' split from its pair", code, "use ls -l *.c now\n",
	    code_sgr);
	check("intraword markers stay", under, "snake_case_name and 2 * 3\n",
	    NULL);
}

/* Lists, quotes, rules, links. */
static void
test_blocks(void)
{
	static const char *const list[] = { "- one\n* tw", "o\n1. first\n2",
	    ") second\n  - nes", "ted **b**\n", NULL };
	static const char *const quote[] = { "> quoted *x*\n", NULL };
	static const char *const rule[] = { "a\n---\nb\n", NULL };
	static const char *const link[] = { "see [the docs](https://x.org/d)",
	    " and <https://y.org>\n", NULL };
	static const char *const refdef[] = { "  [1]: https://z.org\n", NULL };
	static const char *const link_sgr[] = { "the docs",
	    "\033[2mhttps://x.org/d", NULL };
	char	*s;

	check("lists", list, "\xe2\x80\xa2 one\n\xe2\x80\xa2 two\n1. first\n"
	    "2. second\n  \xe2\x80\xa2 nested b\n", NULL);
	check("a quote", quote, "\xe2\x94\x82 quoted x\n", NULL);
	check("a link: its text, then its address", link,
	    "see the docs (https://x.org/d) and https://y.org\n", link_sgr);
	check("a line md4c shows nothing of is shown as it is", refdef,
	    "  [1]: https://z.org\n", NULL);
	s = feed(0, rule);
	CHECK(strncmp(s, "a\n\xe2\x94\x80\xe2\x94\x80", 8) == 0 &&
	    strstr(s, "\nb\n") != NULL, "a thematic break is a rule");
	free(s);
}

/* Fenced code: across chunks and lines, untouched, set apart. */
static void
test_fences(void)
{
	static const char *const fence[] = { "Intro:\n``", "`py", "thon\nprint("
	    "'a *b*')\n  x", " = 1\n\n`", "``\nafter *em*\n", NULL };
	static const char *const fence_sgr[] = { "\033[36mprint('a *b*')",
	    NULL };
	static const char *const tilde[] = { "~~~~\ncode ``` not the end\n",
	    "~~~\n~~~~~\n# h\n", NULL };
	static const char *const listed[] = { "1. run:\n   ```sh\n   make\n",
	    "   ```\n", NULL };
	static const char *const open[] = { "```\nnever closed", NULL };

	check("a fenced block split mid-fence", fence,
	    "Intro:\n    print('a *b*')\n      x = 1\n\nafter em\n", fence_sgr);
	check("a tilde fence ends with its own kind", tilde,
	    "    code ``` not the end\n    ~~~\nh\n", NULL);
	check("a fence inside a list item", listed, "1. run:\n    make\n",
	    NULL);
	check("a block the message leaves open ends with it", open,
	    "    never closed\n", NULL);
}

/* What streams early, and what waits for its line. */
static void
test_streaming(void)
{
	struct sink	 k;
	char		*s;

	sink_open(&k, 0);
	markdown_feed(&k.r.md, &k.r, "Hello wor", 9);
	CHECK(same(sink_text(&k), "Hello wor") && k.r.open_line,
	    "prose is written before its line ends");
	markdown_feed(&k.r.md, &k.r, "ld **x", 6);
	CHECK(same(sink_text(&k), "Hello world "),
	    "from a span's first marker it waits for the line");
	markdown_feed(&k.r.md, &k.r, "y** z\n# He", 10);
	CHECK(same(sink_text(&k), "Hello world xy z\n") && !k.r.open_line,
	    "the line ends rendered, nothing written twice");
	markdown_feed(&k.r.md, &k.r, "ad\n```\nco", 9);
	CHECK(same(sink_text(&k), "Hello world xy z\nHead\n    co"),
	    "a code line is written as it comes");
	render_close_line(&k.r);
	CHECK(same(sink_text(&k), "Hello world xy z\nHead\n    co\n"),
	    "another event ends the line first");
	markdown_feed(&k.r.md, &k.r, "de *still*\n", 11);
	CHECK(same(sink_text(&k), "Hello world xy z\nHead\n    co\n"
	    "    de *still*\n"), "and the code block goes on");
	s = sink_close(&k);
	free(s);
}

/* Untrusted bytes, long lines, whole texts. */
static void
test_safety(void)
{
	static const char *const evil[] = { "evil \033[2J **b\033]0;t\007**\n",
	    "```\n\033[31mred\n", NULL };
	char		*s, *big;
	const char	*chunks[3];
	struct sink	 k;
	size_t		 n = MARKDOWN_LINE_MAX + 100;

	s = feed(1, evil);
	CHECK(strstr(s, "\033[2J") == NULL && strstr(s, "\033]") == NULL &&
	    strchr(s, '\007') == NULL && strstr(s, "\033[31m") == NULL,
	    "the model's escapes never reach the terminal");
	CHECK(strstr(s, "?[2J") != NULL && strstr(s, "?[31mred") != NULL,
	    "they show as '?'");
	free(s);

	big = malloc(n + 2);
	memset(big, 'a', n);
	big[10] = '*';
	big[n] = '\n';
	big[n + 1] = '\0';
	chunks[0] = big;
	chunks[1] = NULL;
	s = feed(0, chunks);
	CHECK(strlen(s) == n + 1 && s[n] == '\n',
	    "a line too long to hold goes out whole, as plain text");
	free(s);
	free(big);

	/* md4c reads past a line ending in a link address: a ")" there hurt. */
	chunks[0] = "xxxxxxxxxxxxx)\nan d[a](=ttp:\n";
	chunks[1] = NULL;
	s = feed(0, chunks);
	CHECK(same(s, "xxxxxxxxxxxxx)\nan d[a](=ttp:\n"),
	    "what was in the line before does not end a link");
	free(s);

	sink_open(&k, 0);
	markdown_text(&k.r, "# T\n\n- a\n```\nx\n```\n\n\n", 21);
	s = sink_close(&k);
	CHECK(same(s, "T\n\n\xe2\x80\xa2 a\n    x\n"),
	    "a whole text, without its trailing newlines");
	free(s);
}

/* Through render_event and render_message, as the clients call it. */
static void
test_events(void)
{
	struct sink	 k;
	json_t		*v;
	char		*s;

	sink_open(&k, 0);
	v = json_pack("{s:s, s:s}", "type", "message.delta", "text", "**Bo");
	render_event(&k.r, v);
	json_decref(v);
	v = json_pack("{s:s, s:s}", "type", "message.delta", "text", "ld**");
	render_event(&k.r, v);
	json_decref(v);
	CHECK(same(sink_text(&k), ""), "a line that starts with a span waits");
	v = json_pack("{s:s, s:{s:s, s:s, s:i}}", "type", "message", "message",
	    "role", "assistant", "content", "**Bold**", "step", 1);
	render_event(&k.r, v);
	json_decref(v);
	CHECK(same(sink_text(&k), "Bold\n"), "the message ends it, shown once");
	v = json_pack("{s:s, s:s}", "role", "assistant", "content",
	    "a `b` [c](d)\n");
	render_message(&k.r, v);
	json_decref(v);
	s = sink_close(&k);
	CHECK(same(s, "Bold\na b c (d)\n"), "history is rendered the same way");
	free(s);
}

int
main(void)
{
	test_inline();
	test_blocks();
	test_fences();
	test_streaming();
	test_safety();
	test_events();
	return unit_done();
}
