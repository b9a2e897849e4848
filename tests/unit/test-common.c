/*
 * Unit tests for common/: the one UTF-8 decoder (every boundary of RFC
 * 3629's table, overlongs, surrogates, truncation), the validator's
 * eight-byte fast path against the decoder, repair and cutting, the
 * escaper for display (each class of character, each flag, the cut), and
 * the monotonic clock's helpers agreeing with each other.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <time.h>

#include "clock.h"
#include "escape.h"
#include "unit.h"
#include "utf8.h"

/* What escape_write handed over: the text, and how many escapes. */
struct pieces {
	char	 text[256];
	size_t	 len;
	int	 escapes;
	int	 calls;
};

/* escape_write's callback for the tests: records the pieces. */
static void
pieces_cb(const char *data, size_t n, int escape, void *arg)
{
	struct pieces	*p = arg;

	if (p->len + n < sizeof p->text) {
		memcpy(p->text + p->len, data, n);
		p->len += n;
		p->text[p->len] = '\0';
	}
	p->escapes += escape != 0;
	p->calls++;
}

/* Checks that escape_string turns n bytes of in into want. */
static void
check_esc(const char *in, size_t n, int flags, size_t max, const char *want,
    size_t want_used, const char *what)
{
	char	*got;
	size_t	 used;

	got = escape_string(in, n, flags, max, &used);
	CHECK(strcmp(got, want) == 0 && used == want_used,
	    "escape: %s (got \"%s\", %zu bytes used)", what, got, used);
	free(got);
}

/* The escaper for display: classes, flags and the cut. */
static void
check_escape(void)
{
	struct pieces	p;
	size_t		used;

	check_esc("plain caf\xc3\xa9", 11, 0, 0, "plain caf\xc3\xa9", 11,
	    "printable UTF-8 stays as it is");
	check_esc("", 0, 0, 0, "", 0, "empty");
	check_esc("a\tb\nc\rd", 7, 0, 0, "a\\tb\\nc\\rd", 7,
	    "tab, newline and CR as \\t \\n \\r");
	check_esc("a\tb\nc\rd", 7, ESCAPE_CODES, 0,
	    "a\\u{0009}b\\u{000A}c\\u{000D}d", 7, "ESCAPE_CODES: as \\u{XXXX}");
	check_esc("a\tb\n", 4, ESCAPE_TAB, 0, "a\tb\\n", 4,
	    "ESCAPE_TAB keeps tabs");
	check_esc("x\0y\x1b[1m\x7f", 8, 0, 0,
	    "x\\u{0000}y\\u{001B}[1m\\u{007F}", 8, "NUL, ESC and DEL");
	check_esc("\xc2\x85", 2, 0, 0, "\\u{0085}", 2, "a C1 control");
	check_esc("a\xe2\x80\xae" "b", 5, 0, 0, "a\\u{202E}b", 5,
	    "a bidi override");
	check_esc("\xff\xc3(", 3, 0, 0, "\\x{FF}\\x{C3}(", 3,
	    "bytes that are not UTF-8 as \\x{XX}");
	check_esc("\xed\xa0\x80", 3, 0, 0, "\\x{ED}\\x{A0}\\x{80}", 3,
	    "a surrogate is not UTF-8");
	check_esc("a\\b", 3, 0, 0, "a\\b", 3, "a backslash stays by default");
	check_esc("a\\b", 3, ESCAPE_BACKSLASH, 0, "a\\\\b", 3,
	    "ESCAPE_BACKSLASH doubles it");
	check_esc("a\xc2\xa0" "b\xef\xbf\xbe", 7, 0, 0,
	    "a\\u{00A0}b\\u{FFFE}", 7, "a no-break space and a noncharacter");
	check_esc("\xf3\xa0\x81\x81", 4, 0, 0, "\\u{E0041}", 4,
	    "a tag character, five digits");
	check_esc("a\xc2\xa0" "b\xef\xbf\xbe", 7, ESCAPE_PATH, 0,
	    "a\xc2\xa0" "b\xef\xbf\xbe", 7,
	    "ESCAPE_PATH leaves other invisible characters");
	check_esc("\xe2\x80\x8b\xef\xbb\xbf\xe2\x80\xa8\xe2\x81\xa6", 12,
	    ESCAPE_PATH, 0, "\\u{200B}\\u{FEFF}\\u{2028}\\u{2066}", 12,
	    "ESCAPE_PATH: zero-width, BOM, line separator, bidi isolate");
	check_esc("abcdef", 6, 0, 3, "abc", 3, "at most max bytes");
	check_esc("abcdef", 6, 0, 0, "abcdef", 6, "max 0 is all");
	check_esc("ab\xc3\xa9z", 5, 0, 3, "ab\xc3\xa9", 4,
	    "a character that starts before max is whole");
	check_esc("ab\n", 3, 0, 3, "ab\\n", 3, "max equal to len");

	CHECK(escape_is_control(0) && escape_is_control(0x9f) &&
	    !escape_is_control(0xa0) && !escape_is_control(' '),
	    "controls: C0, C1 and DEL only");
	CHECK(escape_is_bidi(0x061c) && escape_is_bidi(0x2069) &&
	    !escape_is_bidi(0x2065), "bidi formatting characters");
	CHECK(escape_is_hidden(0x3000) && escape_is_hidden(0x10fffe) &&
	    !escape_is_hidden(0xe9) && !escape_is_hidden(0x1f600),
	    "hidden: ideographic space, noncharacters; not letters or emoji");

	memset(&p, 0, sizeof p);
	used = escape_write("ab\xe2\x80\xae" "cd\\e", 9, ESCAPE_BACKSLASH, 0,
	    pieces_cb, &p);
	CHECK(used == 9 && strcmp(p.text, "ab\\u{202E}cd\\\\e") == 0 &&
	    p.escapes == 1 && p.calls == 5,
	    "escape_write: text in runs, the escape marked (%d calls)", p.calls);
}

/* The decoder's length for the bytes of a string literal. */
static size_t
dec(const char *s, size_t n, uint32_t *cp)
{
	return utf8_decode((const unsigned char *)s, n, cp);
}

int
main(void)
{
	static const struct {
		const char	*s;
		size_t		 n, len;
		uint32_t	 cp;
		const char	*what;
	} cases[] = {
		{ "A", 1, 1, 0x41, "ASCII" },
		{ "\x00", 1, 1, 0, "NUL is a character" },
		{ "\x7f", 1, 1, 0x7f, "DEL" },
		{ "\xc2\x80", 2, 2, 0x80, "the first 2-byte character" },
		{ "\xdf\xbf", 2, 2, 0x7ff, "the last 2-byte character" },
		{ "\xe0\xa0\x80", 3, 3, 0x800, "the first 3-byte character" },
		{ "\xed\x9f\xbf", 3, 3, 0xd7ff, "just below the surrogates" },
		{ "\xee\x80\x80", 3, 3, 0xe000, "just above them" },
		{ "\xef\xbf\xbf", 3, 3, 0xffff, "the last 3-byte character" },
		{ "\xf0\x90\x80\x80", 4, 4, 0x10000, "the first 4-byte one" },
		{ "\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff, "U+10FFFF" },
		{ "\x80", 1, 0, 0, "a lone continuation byte" },
		{ "\xc0\x80", 2, 0, 0, "overlong NUL" },
		{ "\xc1\xbf", 2, 0, 0, "overlong 2-byte" },
		{ "\xe0\x9f\xbf", 3, 0, 0, "overlong 3-byte" },
		{ "\xf0\x8f\xbf\xbf", 4, 0, 0, "overlong 4-byte" },
		{ "\xed\xa0\x80", 3, 0, 0, "a high surrogate" },
		{ "\xed\xbf\xbf", 3, 0, 0, "a low surrogate" },
		{ "\xf4\x90\x80\x80", 4, 0, 0, "above U+10FFFF" },
		{ "\xf5\x80\x80\x80", 4, 0, 0, "lead byte F5" },
		{ "\xff", 1, 0, 0, "byte FF" },
		{ "\xe2\x82", 2, 0, 0, "truncated 3-byte" },
		{ "\xe2\x28\xa1", 3, 0, 0, "bad second byte" },
		{ "\xf0\x9f\x98", 3, 0, 0, "truncated 4-byte" },
		{ "", 0, 0, 0, "nothing" },
	};
	char		 buf[64], *r;
	size_t		 i, n;
	uint32_t	 cp;
	int		 lossy;
	long long	 ms, since;
	uint64_t	 ns1, ns2;
	struct timespec	 ts;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cp = 0xdeadbeef;
		n = dec(cases[i].s, cases[i].n, &cp);
		CHECK(n == cases[i].len && (n == 0 || cp == cases[i].cp),
		    "decode: %s (length %zu, U+%04X)", cases[i].what, n,
		    (unsigned)cp);
		CHECK(utf8_valid(cases[i].s, cases[i].n) ==
		    (cases[i].len == cases[i].n), "valid agrees: %s",
		    cases[i].what);
	}

	/* The eight-byte fast path must hand a bad byte to the decoder. */
	for (i = 0; i < 20; i++) {
		memset(buf, 'a', 40);
		buf[i] = (char)0x80;
		CHECK(!utf8_valid(buf, 40), "a bad byte at %zu in ASCII", i);
		buf[i] = 'a';
		memcpy(buf + i, "\xe2\x82\xac", 3);
		CHECK(utf8_valid(buf, 40), "a euro sign at %zu in ASCII", i);
	}
	memcpy(buf, "abcdefg\xe2\x82\xac", 10);
	CHECK(!utf8_valid(buf, 9), "a character cut by the length is invalid");

	lossy = 0;
	r = utf8_repair("a\xffz\xe2\x82\xac\xc0", 7, &lossy, &n);
	CHECK(n == 11 && memcmp(r, "a\xef\xbf\xbdz\xe2\x82\xac\xef\xbf\xbd",
	    11) == 0 && r[n] == '\0' && lossy == 1,
	    "repair: bad bytes become U+FFFD, good ones stay");
	free(r);
	lossy = 0;
	r = utf8_repair("plain", 5, &lossy, &n);
	CHECK(n == 5 && strcmp(r, "plain") == 0 && lossy == 0,
	    "repair: valid text is unchanged and not lossy");
	free(r);
	r = utf8_repair("", 0, NULL, &n);
	CHECK(n == 0 && r[0] == '\0', "repair: empty, lossy may be NULL");
	free(r);

	memcpy(buf, "ab\xe2\x82\xac", 6);
	CHECK(utf8_cut(buf, 2) == 2, "cut before a character stays");
	CHECK(utf8_cut(buf, 3) == 2 && utf8_cut(buf, 4) == 2,
	    "cut inside a character backs up to its start");
	CHECK(utf8_cut(buf, 5) == 5, "cut at the end stays");
	CHECK(utf8_cut("\x80\x80", 1) == 0, "cut never goes below 0");
	CHECK(utf8_whole(buf, 5) == 5 && utf8_whole(buf, 2) == 2,
	    "whole characters stay whole");
	CHECK(utf8_whole(buf, 3) == 2 && utf8_whole(buf, 4) == 2,
	    "an unfinished character at the end is left out");
	CHECK(utf8_whole("a\x80\x80\x80\x80", 5) == 5,
	    "stray continuation bytes are not a character to wait for");
	CHECK(utf8_whole("", 0) == 0, "empty");

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ms = clock_mono_ms();
	ns1 = clock_mono_ns();
	ns2 = clock_mono_ns();
	since = clock_since_ms(&ts);
	CHECK(ns2 >= ns1, "the clock does not go back");
	CHECK(ms >= (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 &&
	    (long long)(ns1 / 1000000) >= ms,
	    "milliseconds and nanoseconds read the same clock");
	CHECK(since >= 0 && since < 60000, "since a moment ago: %lld ms",
	    since);
	check_escape();
	return unit_done();
}
