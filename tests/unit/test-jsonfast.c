/*
 * jsonfast_loadb must give exactly what json_loadb(JSON_DECODE_ANY | flags)
 * gives, with flags 0 and JSON_ALLOW_NUL:
 * the same value (compared as jansson prints it, so key order and the
 * rounding of reals count too) or NULL with the same error. First a table
 * of the cases where yajl and jansson differ or could, then documents
 * generated at random and damaged at random, every one compared.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonfast.h"
#include "unit.h"

/*
 * Compares the two parsers on len bytes, with flags 0 then JSON_ALLOW_NUL;
 * returns 1 if they agree both times.
 */
static int	same_flags(const char *, size_t, size_t, char *, size_t);

static int
same(const char *buf, size_t len, char *why, size_t whylen)
{
	return same_flags(buf, len, 0, why, whylen) &&
	    same_flags(buf, len, JSON_ALLOW_NUL, why, whylen);
}

static int
same_flags(const char *buf, size_t len, size_t flags, char *why, size_t whylen)
{
	json_error_t	 ea, eb;
	json_t		*a, *b;
	char		*da, *db;
	int		 ok;

	memset(&ea, 0, sizeof ea);
	memset(&eb, 0, sizeof eb);
	a = json_loadb(buf, len, JSON_DECODE_ANY | flags, &ea);
	b = jsonfast_loadb(buf, len, flags, &eb);
	if (a == NULL || b == NULL) {
		ok = a == NULL && b == NULL && strcmp(ea.text, eb.text) == 0 &&
		    ea.position == eb.position;
		snprintf(why, whylen, "flags %zx: jansson %s (%s), jsonfast %s "
		    "(%s)", flags, a == NULL ? "refuses" : "accepts", ea.text,
		    b == NULL ? "refuses" : "accepts", eb.text);
		json_decref(a);
		json_decref(b);
		return ok;
	}
	da = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
	db = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY);
	ok = da != NULL && db != NULL && strcmp(da, db) == 0 && json_equal(a, b);
	snprintf(why, whylen, "flags %zx: jansson %.200s, jsonfast %.200s",
	    flags, da ? da : "?", db ? db : "?");
	free(da);
	free(db);
	json_decref(a);
	json_decref(b);
	return ok;
}

/* Documents and what jansson makes of them (asserted too, to keep the
 * table honest about which cases it covers). */
static const struct {
	const char	*text;
	size_t		 len;		/* 0: strlen */
	int		 valid;		/* jansson accepts it */
} cases[] = {
	{ "{\"session\":\"s-1\",\"turn\":42,\"text\":\"read main.c\"}", 0, 1 },
	{ "[1,-0,0,-1,9223372036854775807,-9223372036854775808]", 0, 1 },
	{ "9223372036854775808", 0, 0 },		/* integer overflow */
	{ "-9223372036854775809", 0, 0 },
	{ "[1.5,-0.0,1e3,1E-3,2.5e+10,0.1,123456789012345678901234567890]",
	    0, 0 },					/* the last: too big */
	{ "[1.5,-0.0,1e3,1E-3,2.5e+10,0.1,1.7976931348623157e308]", 0, 1 },
	{ "1e400", 0, 0 },				/* real overflow */
	{ "1e-400", 0, 1 },				/* underflow is 0 */
	{ "01", 0, 0 }, { "-", 0, 0 }, { "1.", 0, 0 }, { ".5", 0, 0 },
	{ "1e", 0, 0 }, { "+1", 0, 0 }, { "0x10", 0, 0 },
	{ "\"plain\"", 0, 1 }, { "true", 0, 1 }, { "null", 0, 1 },
	{ "  [ true , false , null ]  \n", 0, 1 },
	{ "", 0, 0 }, { "   ", 0, 0 }, { "[", 0, 0 }, { "{\"a\":", 0, 0 },
	{ "[1,]", 0, 0 }, { "{\"a\":1,}", 0, 0 }, { "[1] 2", 0, 0 },
	{ "{\"a\":1}{}", 0, 0 }, { "tru", 0, 0 }, { "nul", 0, 0 },
	{ "/* c */ 1", 0, 0 }, { "[1] // c", 0, 0 },
	{ "\v1", 0, 0 }, { "[1,\f2]", 0, 0 },	/* yajl skips these */
	{ "\"a\\u0000b\"", 0, 0 }, { "{\"a\\u0000\":1}", 0, 0 },
	{ "\"\\ud800\"", 0, 0 }, { "\"\\uDC00x\"", 0, 0 },
	{ "\"\\ud800\\u0041\"", 0, 0 },
	{ "\"\\ud83d\\ude00\"", 0, 1 },		/* a valid pair */
	{ "\"\\\\u0000\"", 0, 1 },		/* an escaped backslash */
	{ "\"\\u00e9\\u20ac\\u0001\\u001b[31m\"", 0, 1 },
	{ "\"\\b\\f\\n\\r\\t\\\"\\\\\\/\"", 0, 1 },
	{ "\"\\x\"", 0, 0 }, { "\"\\u12g4\"", 0, 0 }, { "\"\\u12\"", 0, 0 },
	{ "\"tab\there\"", 0, 0 },		/* a raw control byte */
	{ "\"nul\0here\"", 11, 0 },
	{ "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", 0, 1 },
	{ "\"\xc0\xaf\"", 0, 0 },			/* overlong */
	{ "\"\xed\xa0\x80\"", 0, 0 },			/* a surrogate in UTF-8 */
	{ "\"\xf4\x90\x80\x80\"", 0, 0 },		/* beyond U+10FFFF */
	{ "\"\xff\"", 0, 0 }, { "\"\xe2\x82\"", 0, 0 },
	{ "{\"\xc0\xaf\":1}", 0, 0 },			/* a bad key */
	{ "\xef\xbb\xbf{}", 0, 0 },			/* a BOM */
	{ "{\"a\":1,\"b\":2,\"a\":3}", 0, 1 },	/* the last one wins */
	{ "{\"a\":{\"x\":[1]},\"a\":[2,{\"y\":null}]}", 0, 1 },
	{ "{\"z\":1,\"a\":2,\"m\":3}", 0, 1 },	/* order kept */
	{ "{\"\":\"\",\"k\\n\\\"q\":\"v\\n\"}", 0, 1 },
	{ "[[[[[[[[[[]]]]]]]]]]", 0, 1 },
	{ "{1:2}", 0, 0 }, { "{\"a\" 1}", 0, 0 }, { "[1 2]", 0, 0 },
	{ "'a'", 0, 0 }, { "NaN", 0, 0 }, { "Infinity", 0, 0 },
	/* yajl lets an unfinished string follow the root value. */
	{ "1 \"x", 0, 0 }, { "{} \"abc", 0, 0 }, { "\"a\" \"", 0, 0 },
	{ "[1] 2", 0, 0 }, { "1 tr", 0, 0 }, { "null \n\t\r ", 0, 1 },
};

/* Valid documents the fast path must take itself, not hand to jansson. */
static const char *const fast_cases[] = {
	"{\"session\":\"s-1\",\"turn\":42,\"text\":\"read main.c\"}",
	"[1,-0,9223372036854775807,-9223372036854775808,1.5,-0.0,1e-400]",
	"\"\\\\u0000\"", "\"\\u00e9\\u001b[0m\\n\"", "true", "null", "0",
	"{\"a\":1,\"a\":{\"b\":[[],{}]}}", "\"caf\xc3\xa9\"", " [] ",
};

/* A key longer than the inline buffer, with escapes that yajl decodes
 * into its own buffer before the value is read. */
static void
test_long_keys(void)
{
	char	buf[4096];
	char	why[512];
	size_t	n = 0;
	int	i;

	n += (size_t)snprintf(buf + n, sizeof buf - n, "{\"");
	for (i = 0; i < 300; i++)
		buf[n++] = (char)('a' + i % 26);
	n += (size_t)snprintf(buf + n, sizeof buf - n,
	    "\\n\":\"v\\t\",\"short\\\"\":{\"");
	for (i = 0; i < 1000; i++)
		buf[n++] = 'k';
	n += (size_t)snprintf(buf + n, sizeof buf - n, "\":[\"x\\\\\"]}}");
	CHECK(same(buf, n, why, sizeof why), "long and escaped keys: %s", why);
}

/* Appends n copies of s to buf at *len. */
static void
repeat(char *buf, size_t *len, const char *s, size_t n)
{
	size_t	l = strlen(s);

	while (n-- > 0) {
		memcpy(buf + *len, s, l);
		*len += l;
	}
}

/*
 * jansson refuses a value deeper than JSON_PARSER_MAX_DEPTH, and counts
 * scalars: 2048 empty arrays nested pass, a number inside them does not.
 */
static void
test_depth(void)
{
	static const size_t	 depths[] = { 1, 31, 32, 33, 129, 2047, 2048,
		    2049, 5000 };
	static const char	*inner[] = { "", "1", "\"s\"" };
	char			 why[512];
	char			*buf;
	json_t			*j;
	size_t			 d, k, i, n;

	buf = malloc(6 * 5000 + 16);
	for (k = 0; k < sizeof depths / sizeof depths[0]; k++) {
		d = depths[k];
		for (i = 0; i < 3; i++) {
			n = 0;
			repeat(buf, &n, "[", d);
			repeat(buf, &n, inner[i], 1);
			repeat(buf, &n, "]", d);
			CHECK(same(buf, n, why, sizeof why), "%zu arrays deep "
			    "around '%s': %s", d, inner[i], why);
			n = 0;
			repeat(buf, &n, "{\"k\":", d - 1);
			repeat(buf, &n, i == 0 ? "{}" : "{\"k\":", 1);
			repeat(buf, &n, inner[i], 1);
			repeat(buf, &n, i == 0 ? "" : "}", 1);
			repeat(buf, &n, "}", d - 1);
			CHECK(same(buf, n, why, sizeof why), "%zu objects deep "
			    "around '%s': %s", d, inner[i], why);
		}
	}
	n = 0;
	repeat(buf, &n, "[", 2048);
	repeat(buf, &n, "]", 2048);
	j = jsonfast_loadb(buf, n, 0, NULL);
	CHECK(j != NULL, "2048 nested arrays are taken");
	json_decref(j);
	n = 0;
	repeat(buf, &n, "[", 2048);
	repeat(buf, &n, "1", 1);
	repeat(buf, &n, "]", 2048);
	CHECK(jsonfast_loadb(buf, n, 0, NULL) == NULL,
	    "a number inside 2048 nested arrays is refused");
	free(buf);
}

/* A tiny deterministic generator, so a failure is the same every run. */
static uint64_t	rng = 0x9e3779b97f4a7c15ULL;

static unsigned
rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

#define NPIECES(a)	(sizeof (a) / sizeof (a)[0])

/* A random string: ASCII, what jansson escapes, UTF-8 of every length. */
static json_t *
rnd_string(void)
{
	static const char	*pieces[] = { "a", "Z", " ", "\"", "\\", "/",
		    "\n", "\t", "\x01", "\x1b", "\x7f", "\xc3\xa9",
		    "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "u",
		    "0000", "d800" };
	char			 buf[256];
	const char		*piece;
	size_t			 n = 0, l;
	unsigned		 k = rnd(12);

	while (k-- > 0) {
		piece = pieces[rnd(NPIECES(pieces))];
		l = strlen(piece);
		memcpy(buf + n, piece, l);
		n += l;
	}
	return json_stringn(buf, n);
}

/* A random value up to depth levels of containers. */
static json_t *
rnd_value(int depth)
{
	static const double	 reals[] = { 0.5, -0.0, 1e-300, 3.14159, 1e300,
		    -2.5e-5, 123456.789, 4.9e-324 };
	static const json_int_t	 ints[] = { 0, 1, -1, 42, 9223372036854775807LL,
		    -9223372036854775807LL - 1, 1000000007 };
	json_t			*v, *key;
	unsigned		 i, n;

	switch (rnd(depth > 0 ? 9 : 6)) {
	case 0:
		return json_null();
	case 1:
		return json_boolean(rnd(2));
	case 2:
		return json_integer(rnd(2) ? ints[rnd(NPIECES(ints))] :
		    (json_int_t)rnd(2000001) - 1000000);
	case 3:
		return json_real(reals[rnd(NPIECES(reals))]);
	case 4:
	case 5:
		return rnd_string();
	case 6:
	case 7:
		v = json_object();
		n = rnd(5);
		for (i = 0; i < n; i++) {
			key = rnd_string();
			json_object_setn_new(v, json_string_value(key),
			    json_string_length(key), rnd_value(depth - 1));
			json_decref(key);
		}
		return v;
	default:
		v = json_array();
		n = rnd(5);
		for (i = 0; i < n; i++)
			json_array_append_new(v, rnd_value(depth - 1));
		return v;
	}
}

/* Damages a document the ways that matter to a lexer. */
static size_t
damage(char *buf, size_t len, size_t cap)
{
	static const char	*bits[] = { "\\u0000", "\\ud800", "\\uDFFF",
		    "\\u00e9", "\v", "\f", " ", "\\", "\"", ",", ":", "]", "}",
		    "[", "{", "1", "-", ".", "e", "\x80", "\xc0\xaf", "\0",
		    "\\\\", "\\n", "9999999999999999999999" };
	const char		*bit;
	size_t			 at, l;

	switch (rnd(4)) {
	case 0:			/* cut short */
		return len > 0 ? rnd((unsigned)len) : 0;
	case 1:			/* one byte changed */
		if (len > 0)
			buf[rnd((unsigned)len)] = (char)rnd(256);
		return len;
	default:		/* something inserted */
		bit = bits[rnd(NPIECES(bits))];
		l = *bit == '\0' ? 1 : strlen(bit);
		if (len + l > cap)
			return len;
		at = rnd((unsigned)len + 1);
		memmove(buf + at + l, buf + at, len - at);
		memcpy(buf + at, bit, l);
		return len + l;
	}
}

int
main(void)
{
	static const size_t	 flags[] = { JSON_COMPACT, JSON_INDENT(2),
		    JSON_ENSURE_ASCII | JSON_COMPACT, 0, JSON_SORT_KEYS };
	char			 why[512];
	char			 buf[65536];
	char			*text;
	json_t			*v, *j;
	size_t			 i, len, bad_same = 0, bad = 0, good = 0,
				 good_same = 0, bad_valid = 0, fast = 0,
				 whole = 0;
	int			 valid;

	for (i = 0; i < NPIECES(cases); i++) {
		len = cases[i].len != 0 ? cases[i].len : strlen(cases[i].text);
		j = json_loadb(cases[i].text, len, JSON_DECODE_ANY, NULL);
		valid = j != NULL;
		json_decref(j);
		CHECK(valid == cases[i].valid && same(cases[i].text, len, why,
		    sizeof why), "case %zu (%s %.40s): %s", i,
		    cases[i].valid ? "valid" : "invalid", cases[i].text, why);
	}
	for (i = 0; i < NPIECES(fast_cases); i++) {
		j = jsonfast_parse(fast_cases[i], strlen(fast_cases[i]));
		CHECK(j != NULL && same(fast_cases[i], strlen(fast_cases[i]), why,
		    sizeof why), "the fast path takes %s", fast_cases[i]);
		json_decref(j);
	}
	test_long_keys();
	test_depth();

	/* Random documents, whole and damaged: each must agree. */
	for (i = 0; i < 200000; i++) {
		v = rnd_value((int)rnd(6));
		text = json_dumps(v, flags[rnd(NPIECES(flags))] |
		    JSON_ENCODE_ANY);
		json_decref(v);
		len = strlen(text);
		if (len > sizeof buf / 2) {
			free(text);
			continue;
		}
		memcpy(buf, text, len);
		free(text);
		whole++;
		j = jsonfast_parse(buf, len);
		fast += j != NULL;
		json_decref(j);
		if (same(buf, len, why, sizeof why))
			good_same++;
		else if (good++ < 5)
			CHECK(0, "random document %zu: %s", i, why);
		len = damage(buf, len, sizeof buf);
		if (rnd(2))
			len = damage(buf, len, sizeof buf);
		j = json_loadb(buf, len, JSON_DECODE_ANY, NULL);
		bad_valid += j != NULL;
		json_decref(j);
		if (same(buf, len, why, sizeof why))
			bad_same++;
		else if (bad++ < 5)
			CHECK(0, "damaged document %zu (%.*s): %s", i,
			    (int)(len < 80 ? len : 80), buf, why);
	}
	CHECK(good == 0, "%zu random documents read the same", good_same);
	/* What it declines: \u0000 and surrogates (written by
	 * JSON_ENSURE_ASCII for emoji), a fraction of the documents. */
	CHECK(fast * 10 > whole * 7, "the fast path took %zu of %zu", fast,
	    whole);
	CHECK(bad == 0, "%zu damaged documents read the same (%zu of them "
	    "still valid)", bad_same, bad_valid);
	CHECK(bad_valid > 1000 && bad_same - bad_valid > 1000,
	    "the damaged ones are both valid and invalid");
	return unit_done();
}
