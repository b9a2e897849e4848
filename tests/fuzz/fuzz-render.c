/*
 * libFuzzer target for what a person is shown of untrusted text
 * (client/render.c): the escaper every path, command and reason of an
 * approval goes through, the diff renderer, and the rendering of whole
 * approval objects and events. Invariants checked on every input:
 *   - render_escape's output is valid UTF-8 holding no control character
 *     (C0, DEL, C1), no bidi formatting character and nothing invisible:
 *     whatever the input, what is shown is visible text;
 *   - with colours, the only escape sequences are the renderer's own SGR
 *     sequences ("ESC [ digits m"): nothing from the input can move the
 *     cursor, set a title or change modes; and all output (prose too) is
 *     valid UTF-8 with no other control and no bidi override;
 *   - a cut output says how much was left out (a cut never splits a
 *     character, so up to 3 bytes past the limit may be shown whole).
 * Inputs that parse as JSON are also rendered as an approval and as an
 * event, and the same escape-sequence invariant is checked. Every input is
 * also streamed as markdown (client/markdown.c) in pieces whose sizes the
 * input sets, and rendered whole, under the same invariant.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what, const char *s)
{
	fprintf(stderr, "fuzz-render: %s: '%s'\n", what, s != NULL ? s : "");
	abort();
}

/* Decodes one UTF-8 character strictly; 0 if malformed. */
static size_t
utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t	len, i;
	uint32_t c = s[0], min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c < 0xe0) {
		len = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c < 0xf0) {
		len = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c < 0xf5) {
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

/* Checks escaped text: visible UTF-8 only. */
static void
check_visible(const char *out, int tab)
{
	const unsigned char	*s = (const unsigned char *)out;
	size_t			 i = 0, n, len = strlen(out);
	uint32_t		 cp;

	while (i < len) {
		if ((n = utf8(s + i, len - i, &cp)) == 0)
			fail("not UTF-8", out);
		if ((cp < 0x20 && !(tab && cp == '\t')) || cp == 0x7f ||
		    (cp >= 0x80 && cp <= 0x9f))
			fail("a control character got through", out);
		if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 &&
		    cp <= 0x2069) || cp == 0x200e || cp == 0x200f ||
		    cp == 0x061c)
			fail("a bidi character got through", out);
		if ((cp >= 0x200b && cp <= 0x200d) || cp == 0xfeff ||
		    cp == 0x2060 || cp == 0x00ad || cp == 0x2028 ||
		    cp == 0x2029 || (cp >= 0xe0000 && cp <= 0xe007f))
			fail("an invisible character got through", out);
		i += n;
	}
}

/* Checks coloured output: every ESC starts one of our SGR sequences. */
static void
check_escapes(const char *out, size_t len)
{
	size_t		i, j, n;
	uint32_t	cp;

	for (i = 0; i < len; i++) {
		if (out[i] != '\033')
			continue;
		if (i + 1 >= len || out[i + 1] != '[')
			fail("a bare ESC", out + i);
		for (j = i + 2; j < len && out[j] >= '0' && out[j] <= '9'; j++)
			;
		if (j == i + 2 || j >= len || out[j] != 'm')
			fail("an escape sequence that is not ours", out + i);
	}
	for (i = 0; i < len; i += n) {
		if ((n = utf8((const unsigned char *)out + i, len - i, &cp)) == 0)
			fail("rendered output is not UTF-8", out + i);
		if ((cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\033') ||
		    cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
			fail("a control character in rendered output", out + i);
		if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 &&
		    cp <= 0x2069))
			fail("a bidi override in rendered output", out + i);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct render	 r;
	json_t		*v;
	char		*s, *buf = NULL;
	size_t		 len = 0, more, off, piece;

	s = render_escape((const char *)data, size, RENDER_ESC_BACKSLASH, 0);
	check_visible(s, 0);
	free(s);
	s = render_escape((const char *)data, size, RENDER_ESC_TAB, 16);
	check_visible(s, 1);
	if (size > 16 + 3 && strstr(s, " more bytes)") == NULL)
		fail("a cut that does not say so", s);
	free(s);

	memset(&r, 0, sizeof r);
	r.color = 1;
	if ((r.out = open_memstream(&buf, &len)) == NULL)
		return 0;
	more = render_diff(&r, (const char *)data, size, "  ", 8, 64);
	(void)more;
	render_escaped(&r, (const char *)data, size, 0, 0);
	render_close_line(&r);
	/* Markdown streamed in pieces of 1 to 16 bytes, then whole. */
	for (off = 0; off < size; off += piece) {
		piece = 1 + (data[off] & 15);
		if (piece > size - off)
			piece = size - off;
		markdown_feed(&r.md, &r, (const char *)data + off, piece);
	}
	markdown_end(&r.md, &r);
	markdown_text(&r, (const char *)data, size);
	if ((v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL)) !=
	    NULL) {
		render_approval(&r, v, 8, " (hint)");
		render_approval_resolved(&r, v, "in another terminal");
		render_event(&r, v);
		render_message(&r, v);
		json_decref(v);
	}
	fclose(r.out);
	check_escapes(buf, len);
	free(buf);
	return 0;
}
