/*
 * The lexical gate (see pathgate.h): the Unix and Windows rules for what a
 * path may be made of, lexical normalisation with "..", component-wise
 * comparison, and the glob matcher the protected-file rules use. Nothing
 * here touches the file system, allocates without a bound, or takes time
 * that grows faster than the input: it is the code every hostile path
 * reaches first, so it is kept small enough to read whole and is fuzzed.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "pathgate.h"
#include "utf8.h"
#include "xmalloc.h"

/* One component of a path being normalised: where it starts and its length. */
struct pg_comp {
	const char	*p;
	size_t		 len;
};

/* Fills a refusal and returns NULL, so callers can "return refuse(...)". */
static char *
refuse(struct pathgate_refusal *why, enum gbr_err kind, const char *reason)
{
	if (why != NULL) {
		why->kind = kind;
		why->reason = reason;
	}
	return NULL;
}

/* True for the characters that are controls, or break a line when shown. */
int
pathgate_is_control(uint32_t cp)
{
	return escape_is_control(cp) || cp == 0x2028 || cp == 0x2029;
}

/*
 * True for a character that shows nothing at all (zero-width joiners and
 * spaces, soft hyphens, variation and tag characters, fillers): a person
 * cannot see it in an approval, and some file systems ignore it in names
 * (".g\u200cit" may be ".git" on macOS), so no path may hold one. Spaces
 * that show as spaces (U+00A0, U+3000, ...) are not among them.
 */
int
pathgate_is_invisible(uint32_t cp)
{
	switch (cp) {
	case 0x00ad: case 0x034f: case 0x115f: case 0x1160: case 0x17b4:
	case 0x17b5: case 0x3164: case 0xfeff: case 0xffa0:
		return 1;
	}
	return (cp >= 0x180b && cp <= 0x180f) || (cp >= 0x200b && cp <= 0x200d) ||
	    (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x206a && cp <= 0x206f) ||
	    (cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xfff9 && cp <= 0xfffb) ||
	    (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff);
}

/* True if c separates components in this flavour. */
static int
pg_sep(char c, enum pathgate_flavour fl)
{
	return c == '/' || (fl == PATHGATE_WINDOWS && c == '\\');
}

/* True for an ASCII letter (locale-free). */
static int
pg_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* ASCII upper-casing (locale-free). */
static char
pg_upper(char c)
{
	return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

/*
 * A simple case fold for Windows comparisons: ASCII, Latin-1, Latin
 * Extended-A, Greek and Cyrillic capitals. Other scripts compare exactly,
 * which can only make pathgate_is_under answer "no" (it fails closed).
 */
static uint32_t
pg_fold(uint32_t c)
{
	if (c >= 'A' && c <= 'Z')
		return c + 32;
	if (c < 0xc0)
		return c;
	if (c <= 0xde && c != 0xd7)
		return c + 32;
	if (c >= 0x100 && c <= 0x17f) {
		if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 ||
		    c == 0x17f)
			return c;	/* dotted/dotless i, kra, 'n, long s */
		if (c == 0x178)
			return 0xff;
		if ((c < 0x138 || (c >= 0x14a && c < 0x178)) && (c & 1) == 0)
			return c + 1;
		if (((c > 0x138 && c < 0x149) || c > 0x178) && (c & 1) == 1)
			return c + 1;
		return c;
	}
	if (c >= 0x391 && c <= 0x3ab && c != 0x3a2)
		return c + 32;
	if (c >= 0x410 && c <= 0x42f)
		return c + 32;
	if (c >= 0x400 && c <= 0x40f)
		return c + 80;
	return c;
}

/* Compares two names of given lengths as the flavour's file system would. */
static int
pg_name_eq(const char *a, size_t al, const char *b, size_t bl,
    enum pathgate_flavour fl)
{
	const unsigned char	*ua = (const unsigned char *)a;
	const unsigned char	*ub = (const unsigned char *)b;
	size_t			 i = 0, j = 0, na, nb;
	uint32_t		 ca, cb;

	if (fl == PATHGATE_UNIX)
		return al == bl && memcmp(a, b, al) == 0;
	while (i < al && j < bl) {
		na = utf8_decode(ua + i, al - i, &ca);
		nb = utf8_decode(ub + j, bl - j, &cb);
		if (na == 0 || nb == 0) {	/* not UTF-8: bytes must agree */
			if (ua[i] != ub[j])
				return 0;
			i++, j++;
			continue;
		}
		if (pg_fold(ca) != pg_fold(cb))
			return 0;
		i += na;
		j += nb;
	}
	return i == al && j == bl;
}

/* Compares two names or normal paths (whole strings). */
int
pathgate_equal(const char *a, const char *b, enum pathgate_flavour fl)
{
	return pg_name_eq(a, strlen(a), b, strlen(b), fl);
}

/*
 * True for a Windows device name: CON, PRN, AUX, NUL, COM0-9, LPT0-9 (and
 * the superscript digits 1-3), CONIN$, CONOUT$, CLOCK$, with or without an
 * extension and with trailing spaces before it ("nul .txt").
 */
static int
pg_win_device(const char *c, size_t len)
{
	static const char *const names[] = {
		"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$", NULL
	};
	const char *const	*n;
	size_t			 b = 0, i;

	while (b < len && c[b] != '.')
		b++;
	while (b > 0 && c[b - 1] == ' ')
		b--;
	for (n = names; *n != NULL; n++) {
		if (strlen(*n) != b)
			continue;
		for (i = 0; i < b && pg_upper(c[i]) == (*n)[i]; i++)
			;
		if (i == b)
			return 1;
	}
	if (b != 4 && b != 5)
		return 0;
	if (!((pg_upper(c[0]) == 'C' && pg_upper(c[1]) == 'O' &&
	    pg_upper(c[2]) == 'M') || (pg_upper(c[0]) == 'L' &&
	    pg_upper(c[1]) == 'P' && pg_upper(c[2]) == 'T')))
		return 0;
	if (b == 4)
		return c[3] >= '0' && c[3] <= '9';
	/* U+00B9, U+00B2, U+00B3: superscript one, two, three. */
	return (unsigned char)c[3] == 0xc2 && ((unsigned char)c[4] == 0xb9 ||
	    (unsigned char)c[4] == 0xb2 || (unsigned char)c[4] == 0xb3);
}

/*
 * True for a name that may be an 8.3 short name ("PROGRA~1", "LONGFI~2.TXT"):
 * a '~' followed by digits up to the end or to a dot. Such a name can be
 * another file's alias, which no lexical rule could then see.
 */
static int
pg_win_shortname(const char *c, size_t len)
{
	size_t	i, j;

	for (i = 0; i < len; i++) {
		if (c[i] != '~')
			continue;
		for (j = i + 1; j < len && c[j] >= '0' && c[j] <= '9'; j++)
			;
		if (j > i + 1 && (j == len || c[j] == '.'))
			return 1;
	}
	return 0;
}

/* Checks the characters of a whole path. Returns 0 or -1 with *why. */
static int
pg_check_chars(const char *path, size_t len, enum pathgate_flavour fl,
    struct pathgate_refusal *why)
{
	const unsigned char	*s = (const unsigned char *)path;
	size_t			 i = 0, n;
	uint32_t		 cp;

	while (i < len) {
		if (s[i] == '\0') {
			refuse(why, GBR_ERR_INVALID_PATH, "the path holds a NUL byte");
			return -1;
		}
		if ((n = utf8_decode(s + i, len - i, &cp)) == 0) {
			refuse(why, GBR_ERR_INVALID_PATH, "the path is not valid UTF-8");
			return -1;
		}
		if (pathgate_is_control(cp)) {
			refuse(why, GBR_ERR_INVALID_PATH,
			    "the path holds a control character");
			return -1;
		}
		if (escape_is_bidi(cp)) {
			refuse(why, GBR_ERR_INVALID_PATH,
			    "the path holds a bidirectional formatting character");
			return -1;
		}
		if (pathgate_is_invisible(cp)) {
			refuse(why, GBR_ERR_INVALID_PATH,
			    "the path holds an invisible character (zero-width, "
			    "soft hyphen, variation selector, ...)");
			return -1;
		}
		if (fl == PATHGATE_WINDOWS && cp < 0x80 &&
		    strchr("<>\"|?*", (int)cp) != NULL) {
			refuse(why, GBR_ERR_INVALID_PATH,
			    "the path holds a character Windows reserves (<>\"|?*)");
			return -1;
		}
		i += n;
	}
	return 0;
}

/* Checks one component that will be kept. Returns 0 or -1 with *why. */
static int
pg_check_name(const char *c, size_t len, enum pathgate_flavour fl,
    struct pathgate_refusal *why)
{
	if (len > PATHGATE_NAME_MAX) {
		refuse(why, GBR_ERR_INVALID_PATH,
		    "a name in the path is longer than 255 bytes");
		return -1;
	}
	if (fl != PATHGATE_WINDOWS)
		return 0;
	if (memchr(c, ':', len) != NULL) {
		refuse(why, GBR_ERR_INVALID_PATH,
		    "a name holds ':' (an alternate data stream or a drive)");
		return -1;
	}
	if (c[len - 1] == '.' || c[len - 1] == ' ') {
		refuse(why, GBR_ERR_INVALID_PATH,
		    "a name ends with a dot or a space (Windows drops them)");
		return -1;
	}
	if (pg_win_device(c, len)) {
		refuse(why, GBR_ERR_INVALID_PATH,
		    "a name is a Windows device name (CON, NUL, COM1, ...)");
		return -1;
	}
	if (pg_win_shortname(c, len)) {
		refuse(why, GBR_ERR_INVALID_PATH,
		    "a name looks like an 8.3 short name (PROGRA~1)");
		return -1;
	}
	return 0;
}

/*
 * Classifies the start of a path. Returns the offset where components
 * begin, sets *absolute and, on Windows, *drive (0 if none); or returns
 * -1 with *why for the forms that are never accepted.
 */
static long
pg_prefix(const char *p, size_t len, enum pathgate_flavour fl, int *absolute,
    char *drive, struct pathgate_refusal *why)
{
	*absolute = 0;
	*drive = 0;
	if (fl == PATHGATE_UNIX) {
		*absolute = (p[0] == '/');
		return 0;
	}
	if (len >= 2 && pg_sep(p[0], fl) && pg_sep(p[1], fl)) {
		if (len >= 3 && (p[2] == '?' || p[2] == '.') &&
		    (len == 3 || pg_sep(p[3], fl))) {
			refuse(why, GBR_ERR_PATH_TRAVERSAL,
			    "a Windows device namespace path (\\\\?\\ or \\\\.\\)");
			return -1;
		}
		refuse(why, GBR_ERR_PATH_TRAVERSAL, "a UNC path (\\\\server\\share)");
		return -1;
	}
	if (len >= 2 && pg_alpha(p[0]) && p[1] == ':') {
		if (len == 2 || !pg_sep(p[2], fl)) {
			refuse(why, GBR_ERR_PATH_TRAVERSAL,
			    "a drive-relative path (C:x)");
			return -1;
		}
		*absolute = 1;
		*drive = pg_upper(p[0]);
		return 2;
	}
	if (pg_sep(p[0], fl)) {
		refuse(why, GBR_ERR_PATH_TRAVERSAL,
		    "a path rooted on the current drive (\\x)");
		return -1;
	}
	return 0;
}

/* The gate itself, for both modes. Returns a new normal path or NULL. */
static char *
pg_gate(const char *path, size_t len, enum pathgate_flavour fl, int want_abs,
    struct pathgate_refusal *why)
{
	struct pg_comp	*comps;
	size_t		 n = 0, i, start, clen, used;
	long		 off;
	int		 absolute;
	char		 drive, *out;

	if (path == NULL || len == 0)
		return refuse(why, GBR_ERR_INVALID_PATH, "the path is empty");
	if (len > PATHGATE_PATH_MAX)
		return refuse(why, GBR_ERR_INVALID_PATH,
		    "the path is longer than 4096 bytes");
	if ((off = pg_prefix(path, len, fl, &absolute, &drive, why)) < 0)
		return NULL;
	if (pg_check_chars(path, len, fl, why) != 0)
		return NULL;
	if (absolute && !want_abs)
		return refuse(why, GBR_ERR_PATH_TRAVERSAL, "an absolute path");
	if (!absolute && want_abs)
		return refuse(why, GBR_ERR_INVALID_PATH, "not an absolute path");

	/* At most one component per two bytes, plus one. */
	comps = xreallocarray(NULL, len / 2 + 2, sizeof *comps);
	i = (size_t)off;
	while (i < len) {
		while (i < len && pg_sep(path[i], fl))
			i++;
		if (i == len)
			break;
		start = i;
		while (i < len && !pg_sep(path[i], fl))
			i++;
		clen = i - start;
		if (clen == 1 && path[start] == '.')
			continue;
		if (clen == 2 && path[start] == '.' && path[start + 1] == '.') {
			if (n == 0) {
				free(comps);
				return refuse(why, GBR_ERR_PATH_TRAVERSAL,
				    "'..' climbs above the root");
			}
			n--;
			continue;
		}
		if (pg_check_name(path + start, clen, fl, why) != 0) {
			free(comps);
			return NULL;
		}
		comps[n].p = path + start;
		comps[n].len = clen;
		n++;
	}

	out = xmalloc(len + 4);
	used = 0;
	if (drive != 0) {
		out[used++] = drive;
		out[used++] = ':';
	}
	if (absolute)
		out[used++] = '/';
	for (i = 0; i < n; i++) {
		if (i > 0)
			out[used++] = '/';
		memcpy(out + used, comps[i].p, comps[i].len);
		used += comps[i].len;
	}
	if (used == 0)
		out[used++] = '.';
	out[used] = '\0';
	free(comps);
	return out;
}

/* Checks the bytes of a path without normalising it. */
int
pathgate_check_bytes(const char *path, size_t len, enum pathgate_flavour fl,
    struct pathgate_refusal *why)
{
	if (path == NULL || len == 0) {
		refuse(why, GBR_ERR_INVALID_PATH, "the path is empty");
		return -1;
	}
	if (len > PATHGATE_PATH_MAX) {
		refuse(why, GBR_ERR_INVALID_PATH,
		    "the path is longer than 4096 bytes");
		return -1;
	}
	return pg_check_chars(path, len, fl, why);
}

/* Normalises a relative path. */
char *
pathgate_normalize(const char *path, size_t len, enum pathgate_flavour fl,
    struct pathgate_refusal *why)
{
	return pg_gate(path, len, fl, 0, why);
}

/* Normalises an absolute path. */
char *
pathgate_normalize_absolute(const char *path, size_t len,
    enum pathgate_flavour fl, struct pathgate_refusal *why)
{
	return pg_gate(path, len, fl, 1, why);
}

/* True if the path looks absolute (or drive-, root- or UNC-based). */
int
pathgate_is_absolute(const char *path, size_t len, enum pathgate_flavour fl)
{
	if (len == 0)
		return 0;
	if (pg_sep(path[0], fl))
		return 1;
	return fl == PATHGATE_WINDOWS && len >= 2 && pg_alpha(path[0]) &&
	    path[1] == ':';
}

/*
 * Compares two normal paths of the same kind component by component. On a
 * match sets *rest to what follows root in path ("" when equal).
 */
static int
pg_under(const char *r, const char *p, enum pathgate_flavour fl,
    const char **rest)
{
	size_t	rl, pl;

	if (fl == PATHGATE_WINDOWS && r[0] != '\0' && r[1] == ':') {
		if (p[0] == '\0' || p[1] != ':' || r[0] != p[0])
			return 0;
		r += 2;
		p += 2;
	}
	if (strcmp(r, ".") == 0)
		r = "";
	if (strcmp(p, ".") == 0)
		p = "";
	for (;;) {
		while (*r == '/')
			r++;
		while (*p == '/')
			p++;
		if (*r == '\0') {
			*rest = p;
			return 1;
		}
		if (*p == '\0')
			return 0;
		rl = strcspn(r, "/");
		pl = strcspn(p, "/");
		if (!pg_name_eq(r, rl, p, pl, fl))
			return 0;
		r += rl;
		p += pl;
	}
}

/* Normalises root and path the same way; both must pass the gate. */
static int
pg_pair(const char *root, const char *path, enum pathgate_flavour fl,
    char **nr, char **np)
{
	size_t	rlen = strlen(root), plen = strlen(path);
	int	abs_r = pathgate_is_absolute(root, rlen, fl);

	*nr = *np = NULL;
	if (abs_r != pathgate_is_absolute(path, plen, fl))
		return -1;
	*nr = pg_gate(root, rlen, fl, abs_r, NULL);
	*np = pg_gate(path, plen, fl, abs_r, NULL);
	if (*nr == NULL || *np == NULL) {
		free(*nr);
		free(*np);
		*nr = *np = NULL;
		return -1;
	}
	return 0;
}

/* True if path is root or inside it, by whole components. */
int
pathgate_is_under(const char *root, const char *path,
    enum pathgate_flavour fl)
{
	char		*nr, *np;
	const char	*rest;
	int		 r;

	if (root == NULL || path == NULL || pg_pair(root, path, fl, &nr, &np) != 0)
		return 0;
	r = pg_under(nr, np, fl, &rest);
	free(nr);
	free(np);
	return r;
}

/* Returns path relative to root, or NULL if it is not under root. */
char *
pathgate_relative(const char *root, const char *path,
    enum pathgate_flavour fl)
{
	char		*nr, *np, *out = NULL;
	const char	*rest;

	if (root == NULL || path == NULL || pg_pair(root, path, fl, &nr, &np) != 0)
		return NULL;
	if (pg_under(nr, np, fl, &rest))
		out = xstrdup(*rest == '\0' ? "." : rest);
	free(nr);
	free(np);
	return out;
}

/* ASCII lower-casing for glob comparisons. */
static uint32_t
pg_lower(uint32_t c)
{
	return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/*
 * Decodes one character for the matcher. A byte that is not UTF-8 counts
 * as one character above U+10FFFF, so it never equals a real one (0x80
 * must not match U+0080: found by fuzz-pathgate).
 */
static size_t
pg_char(const char *s, size_t n, uint32_t *cp)
{
	size_t	len = utf8_decode((const unsigned char *)s, n, cp);

	if (len == 0) {
		*cp = 0x110000 + (unsigned char)s[0];
		return 1;
	}
	return len;
}

/*
 * Matches a bracket class starting at p[*pi] == '[' against c. Returns 1
 * or 0, advancing *pi past the class; -1 if the class is not closed.
 */
static int
pg_class(const char *p, size_t pl, size_t *pi, uint32_t c, int fold)
{
	size_t		i = *pi + 1;
	int		negate = 0, hit = 0, first = 1;
	uint32_t	lo, hi;

	if (i < pl && (p[i] == '!' || p[i] == '^')) {
		negate = 1;
		i++;
	}
	if (fold)
		c = pg_lower(c);
	while (i < pl && (p[i] != ']' || first)) {
		first = 0;
		if (p[i] == '\\' && i + 1 < pl)
			i++;
		i += pg_char(p + i, pl - i, &lo);
		hi = lo;
		if (i + 1 < pl && p[i] == '-' && p[i + 1] != ']') {
			i++;
			if (p[i] == '\\' && i + 1 < pl)
				i++;
			i += pg_char(p + i, pl - i, &hi);
		}
		if (fold) {
			lo = pg_lower(lo);
			hi = pg_lower(hi);
		}
		if (c >= lo && c <= hi)
			hit = 1;
	}
	if (i >= pl)
		return -1;
	*pi = i + 1;
	return hit != negate;
}

/*
 * Matches one pattern component against one path component in at most
 * pattern-times-name steps: only the last '*' is ever backtracked to, which
 * is enough because every other token matches exactly one character.
 */
static int
pg_seg_match(const char *p, size_t pl, const char *s, size_t sl, int fold)
{
	size_t		pi = 0, si = 0, star_p = 0, star_s = 0, n, save;
	int		have_star = 0, m;
	uint32_t	pc, sc;

	while (si < sl) {
		if (pi < pl && p[pi] == '*') {
			while (pi < pl && p[pi] == '*')
				pi++;
			have_star = 1;
			star_p = pi;
			star_s = si;
			continue;
		}
		n = pg_char(s + si, sl - si, &sc);
		m = 0;
		if (pi < pl) {
			if (p[pi] == '?') {
				pi++;
				m = 1;
			} else if (p[pi] == '[') {
				save = pi;
				if ((m = pg_class(p, pl, &pi, sc, fold)) == -1) {
					/* An unclosed '[' is a literal. */
					pi = save + 1;
					m = (sc == '[');
				}
			} else {
				if (p[pi] == '\\' && pi + 1 < pl)
					pi++;
				pi += pg_char(p + pi, pl - pi, &pc);
				m = fold ? pg_lower(pc) == pg_lower(sc) : pc == sc;
			}
		}
		if (m) {
			si += n;
			continue;
		}
		if (!have_star)
			return 0;
		star_s += pg_char(s + star_s, sl - star_s, &sc);
		si = star_s;
		pi = star_p;
	}
	while (pi < pl && p[pi] == '*')
		pi++;
	return pi == pl;
}

/* Returns the length of the component at s (up to '/' or the end). */
static size_t
pg_seglen(const char *s)
{
	return strcspn(s, "/");
}

/* Skips a component and the '/' after it. */
static const char *
pg_segnext(const char *s)
{
	s += pg_seglen(s);
	return *s == '/' ? s + 1 : s;
}

/* True if the pattern component at p is exactly "**". */
static int
pg_globstar(const char *p)
{
	return p[0] == '*' && p[1] == '*' && (p[2] == '/' || p[2] == '\0');
}

/* Skips separators and "." components: "a//./b/" compares as "a/b". */
static const char *
pg_skip(const char *x)
{
	for (;;) {
		if (*x == '/')
			x++;
		else if (x[0] == '.' && (x[1] == '/' || x[1] == '\0'))
			x++;
		else
			return x;
	}
}

/* Glob matching with globstar; "**" backtracks the same way '*' does. */
int
pathgate_glob_match(const char *pattern, const char *path, int flags)
{
	const char	*p = pg_skip(pattern), *s = pg_skip(path);
	const char	*star_p = NULL, *star_s = NULL;
	int		 fold = (flags & PATHGATE_GLOB_CASEFOLD) != 0;

	while (*s != '\0') {
		if (*p != '\0' && pg_globstar(p)) {
			p = pg_skip(pg_segnext(p));
			star_p = p;
			star_s = s;
			continue;
		}
		if (*p != '\0' && pg_seg_match(p, pg_seglen(p), s, pg_seglen(s),
		    fold)) {
			p = pg_skip(pg_segnext(p));
			s = pg_skip(pg_segnext(s));
			continue;
		}
		if (star_p == NULL)
			return 0;
		star_s = pg_skip(pg_segnext(star_s));
		s = star_s;
		p = star_p;
	}
	while (*p != '\0' && pg_globstar(p))
		p = pg_skip(pg_segnext(p));
	return *p == '\0';
}

/* Checks a glob: relative, no "..", closed classes, sane length. */
int
pathgate_glob_check(const char *pattern, const char **reason)
{
	size_t		len = strlen(pattern), i, seg;
	uint32_t	cp;

	if (len == 0) {
		*reason = "an empty pattern";
		return -1;
	}
	if (len > PATHGATE_PATH_MAX) {
		*reason = "a pattern longer than 4096 bytes";
		return -1;
	}
	if (pattern[0] == '/') {
		*reason = "an absolute pattern (patterns are relative to the root)";
		return -1;
	}
	for (i = 0; i < len; i += seg) {
		if ((seg = utf8_decode((const unsigned char *)pattern + i,
		    len - i, &cp)) == 0 || pathgate_is_control(cp)) {
			*reason = "a pattern that is not printable UTF-8";
			return -1;
		}
	}
	for (i = 0; i < len; i = (size_t)(pg_segnext(pattern + i) - pattern)) {
		seg = pg_seglen(pattern + i);
		if (seg == 2 && pattern[i] == '.' && pattern[i + 1] == '.') {
			*reason = "a pattern with a '..' component";
			return -1;
		}
	}
	for (i = 0; i < len; i++) {
		size_t	pi = i;
		int	first = 1;

		if (pattern[i] == '\\' && i + 1 < len) {
			i++;
			continue;
		}
		if (pattern[i] != '[')
			continue;
		pi = i + 1;
		if (pi < len && (pattern[pi] == '!' || pattern[pi] == '^'))
			pi++;
		while (pi < len && pattern[pi] != '/' &&
		    (pattern[pi] != ']' || first)) {
			first = 0;
			if (pattern[pi] == '\\' && pi + 1 < len)
				pi++;
			pi++;
		}
		if (pi >= len || pattern[pi] != ']') {
			*reason = "a '[' class that is never closed";
			return -1;
		}
		i = pi;
	}
	return 0;
}
