/*
 * libFuzzer target for the lexical gate (daemon/sandbox/pathgate.c), the first
 * code every path an agent invents reaches. Byte 0 picks the flavour
 * (Unix or Windows) and the mode (relative, absolute, or glob); the rest
 * is the path (or "pattern\npath" for globs). Invariants checked on every
 * input the gate accepts:
 *   - the output is valid UTF-8 with no NUL, control or bidi character;
 *   - no component is "", "." or ".." (a relative root is exactly ".");
 *   - no component is longer than 255 bytes; Windows output holds no '\'
 *     and no ':' outside "C:";
 *   - normalising the output again gives the same string (idempotent);
 *   - the output is under itself, and a relative output is under "." and
 *     comes back unchanged from pathgate_relative("/r", "/r/" + output).
 * For globs: the matcher answers (the fuzzer's timeout catches blow-ups),
 * and a pattern without any wildcard matches exactly the equal path (once
 * '/' runs and "." components are collapsed on both sides).
 * On every input: pathgate's UTF-8 decoder accepts exactly the byte strings
 * jansson accepts (the file tools hand text it validated to jansson
 * unchecked).
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pathgate.h"
#include "utf8.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what, const char *s)
{
	fprintf(stderr, "fuzz-pathgate: %s: '%s'\n", what, s != NULL ? s : "");
	abort();
}

/* Checks the invariants of an accepted normal path. */
static void
check_output(const char *out, size_t inlen, enum pathgate_flavour fl, int abs)
{
	struct pathgate_refusal	 why;
	const char		*p, *c;
	char			*again, *joined, *rel;
	size_t			 len = strlen(out), clen;

	if (len == 0 || len > inlen + 3)
		fail("output length", out);
	if (pathgate_check_bytes(out, len, PATHGATE_UNIX, &why) != 0)
		fail("output holds a bad byte", out);
	p = out;
	if (abs) {
		if (fl == PATHGATE_WINDOWS) {
			if (len < 3 || out[1] != ':' || out[2] != '/' ||
			    out[0] < 'A' || out[0] > 'Z')
				fail("windows absolute form", out);
			p = out + 3;
		} else {
			if (out[0] != '/')
				fail("unix absolute form", out);
			p = out + 1;
		}
	} else if (strcmp(out, ".") == 0)
		p = "";
	if (fl == PATHGATE_WINDOWS && (strchr(out, '\\') != NULL ||
	    strchr(p, ':') != NULL))
		fail("windows output holds '\\' or ':'", out);
	while (*p != '\0') {
		c = p;
		clen = strcspn(c, "/");
		if (clen == 0 || clen > PATHGATE_NAME_MAX ||
		    (clen == 1 && c[0] == '.') ||
		    (clen == 2 && c[0] == '.' && c[1] == '.'))
			fail("bad component", out);
		p = c[clen] == '/' ? c + clen + 1 : c + clen;
		if (c[clen] == '/' && *p == '\0')
			fail("trailing slash", out);
	}
	again = abs ? pathgate_normalize_absolute(out, len, fl, &why) :
	    pathgate_normalize(out, len, fl, &why);
	if (again == NULL || strcmp(again, out) != 0)
		fail("not idempotent", out);
	free(again);
	if (!pathgate_is_under(out, out, fl))
		fail("not under itself", out);
	if (!abs) {
		if (!pathgate_is_under(".", out, fl))
			fail("relative not under '.'", out);
		if (fl == PATHGATE_UNIX) {
			joined = malloc(len + 4);
			if (joined == NULL)
				abort();
			memcpy(joined, "/r/", 3);
			memcpy(joined + 3, out, len + 1);
			rel = pathgate_relative("/r", joined, fl);
			if (rel == NULL || strcmp(rel, out) != 0)
				fail("relative round trip", out);
			free(rel);
			free(joined);
		}
	}
}

/* Collapses '/' runs and "." components, as the matcher compares (new). */
static char *
canon(const char *s)
{
	char	*out = malloc(strlen(s) + 1), *o = out;
	size_t	 len;

	if (out == NULL)
		abort();
	while (*s != '\0') {
		len = strcspn(s, "/");
		if (len > 0 && !(len == 1 && s[0] == '.')) {
			if (o != out)
				*o++ = '/';
			memcpy(o, s, len);
			o += len;
		}
		s += len;
		if (*s == '/')
			s++;
	}
	*o = '\0';
	return out;
}

/* Glob mode: "pattern\npath". */
static void
check_glob(const char *s, size_t len)
{
	const char	*nl = memchr(s, '\n', len), *why;
	char		*pat, *path;
	int		 m;

	if (nl == NULL)
		return;
	pat = strndup(s, (size_t)(nl - s));
	path = strndup(nl + 1, len - (size_t)(nl - s) - 1);
	if (pat == NULL || path == NULL)
		abort();
	(void)pathgate_glob_check(pat, &why);
	m = pathgate_glob_match(pat, path, 0);
	(void)pathgate_glob_match(pat, path, PATHGATE_GLOB_CASEFOLD);
	if (strpbrk(pat, "*?[\\") == NULL) {
		char	*cp = canon(pat), *cs = canon(path);

		if (m != (strcmp(cp, cs) == 0))
			fail("a literal pattern must match exactly its equal", pat);
		free(cp);
		free(cs);
	}
	free(pat);
	free(path);
}

/* utf8_decode (common/utf8.c) and jansson agree on what is valid UTF-8. */
static void
check_utf8_agrees(const uint8_t *d, size_t n)
{
	size_t		 i = 0, k;
	uint32_t	 cp;
	json_t		*j;
	int		 ok = 1;

	while (i < n) {
		if ((k = utf8_decode(d + i, n - i, &cp)) == 0) {
			ok = 0;
			break;
		}
		i += k;
	}
	j = json_stringn((const char *)d, n);
	if (ok != (j != NULL))
		fail(ok ? "jansson refuses UTF-8 that pathgate accepts" :
		    "jansson accepts UTF-8 that pathgate refuses", NULL);
	json_decref(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pathgate_refusal	 why;
	enum pathgate_flavour	 fl;
	const char		*s;
	char			*out;
	size_t			 len;
	int			 mode;

	check_utf8_agrees(data, size);
	if (size < 1 || size > PATHGATE_PATH_MAX + 64)
		return 0;
	fl = (data[0] & 1) ? PATHGATE_WINDOWS : PATHGATE_UNIX;
	mode = (data[0] >> 1) % 3;
	s = (const char *)data + 1;
	len = size - 1;
	if (mode == 2) {
		char *z = strndup(s, len);

		if (z == NULL)
			abort();
		check_glob(z, strlen(z));
		free(z);
		return 0;
	}
	why.kind = GBR_ERR__COUNT;
	why.reason = NULL;
	out = mode == 1 ? pathgate_normalize_absolute(s, len, fl, &why) :
	    pathgate_normalize(s, len, fl, &why);
	if (out == NULL) {
		if (why.reason == NULL || (why.kind != GBR_ERR_PATH_TRAVERSAL &&
		    why.kind != GBR_ERR_INVALID_PATH))
			fail("a refusal without a kind or reason", NULL);
		return 0;
	}
	if (memchr(s, '\0', len) != NULL)
		fail("accepted a path holding NUL", out);
	check_output(out, len, fl, mode == 1);
	free(out);
	return 0;
}
