/*
 * Unit tests for the lexical gate, both flavours on every OS: a table of
 * inputs with the normal form or the refusal kind each must give, then the
 * comparison, relative-path and glob functions, and the UTF-8 decoder.
 */
#include "gbr-config.h"

#include <stdint.h>

#include "pathgate.h"
#include "utf8.h"
#include "unit.h"
#include "xmalloc.h"

#define U PATHGATE_UNIX
#define W PATHGATE_WINDOWS
#define OK (-1)		/* "no refusal" in the table's kind column */
#define TRAV GBR_ERR_PATH_TRAVERSAL
#define INV GBR_ERR_INVALID_PATH

/* One row: flavour, absolute mode, input, expected output or refusal kind. */
struct row {
	int		 fl;
	int		 abs;
	const char	*in;
	const char	*out;	/* NULL when refused */
	int		 kind;
};

static const struct row rows[] = {
	/* Plain relative paths, both flavours. */
	{ U, 0, "a", "a", OK },
	{ U, 0, "a/b/c.txt", "a/b/c.txt", OK },
	{ U, 0, "./a//b/./c/", "a/b/c", OK },
	{ U, 0, ".", ".", OK },
	{ U, 0, "./", ".", OK },
	{ U, 0, "a/..", ".", OK },
	{ U, 0, "a/b/../c", "a/c", OK },
	{ U, 0, "a..b", "a..b", OK },
	{ U, 0, "..a/b..", "..a/b..", OK },
	{ U, 0, "...", "...", OK },
	{ U, 0, ".hidden/.x", ".hidden/.x", OK },
	{ U, 0, "a\\..\\..\\b", "a\\..\\..\\b", OK },	/* '\' is a name byte on Unix */
	{ U, 0, "a:b", "a:b", OK },
	{ U, 0, "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80", "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80", OK },
	{ U, 0, "CON", "CON", OK },		/* only Windows cares */
	{ U, 0, "PROGRA~1", "PROGRA~1", OK },
	{ U, 0, "trailing. ", "trailing. ", OK },
	{ W, 0, "a\\b/c", "a/b/c", OK },
	{ W, 0, "a\\..\\b", "b", OK },
	{ W, 0, "a..b\\c", "a..b/c", OK },
	{ W, 0, "file~x.txt", "file~x.txt", OK },
	{ W, 0, "a~1b", "a~1b", OK },
	{ W, 0, "notes.txt~", "notes.txt~", OK },
	{ W, 0, "console", "console", OK },
	{ W, 0, "com10", "com10", OK },
	{ W, 0, "lpt", "lpt", OK },
	{ W, 0, "nulx.txt", "nulx.txt", OK },

	/* ".." in every form. */
	{ U, 0, "..", NULL, TRAV },
	{ U, 0, "../x", NULL, TRAV },
	{ U, 0, "a/../../b", NULL, TRAV },
	{ U, 0, "a/b/../../..", NULL, TRAV },
	{ U, 0, "./../x", NULL, TRAV },
	{ U, 0, "a/./../../x", NULL, TRAV },
	{ U, 0, "a//..//..//x", NULL, TRAV },
	{ W, 0, "..\\x", NULL, TRAV },
	{ W, 0, "a\\..\\..\\b", NULL, TRAV },
	{ W, 0, "a/..\\../b", NULL, TRAV },
	{ U, 0, "%2e%2e/x", "%2e%2e/x", OK },	/* no URL decoding: a literal name */

	/* Absolute paths in relative mode. */
	{ U, 0, "/etc/passwd", NULL, TRAV },
	{ U, 0, "//etc", NULL, TRAV },
	{ W, 0, "/etc", NULL, TRAV },
	{ W, 0, "\\Windows", NULL, TRAV },
	{ W, 0, "C:\\Windows", NULL, TRAV },
	{ W, 0, "c:/x", NULL, TRAV },
	{ W, 0, "C:x", NULL, TRAV },
	{ W, 0, "C:", NULL, TRAV },
	{ W, 0, "C:..\\x", NULL, TRAV },
	{ W, 0, "\\\\server\\share\\x", NULL, TRAV },
	{ W, 0, "//server/share", NULL, TRAV },
	{ W, 0, "\\/server/share", NULL, TRAV },
	{ W, 0, "\\\\?\\C:\\x", NULL, TRAV },
	{ W, 0, "\\\\.\\PhysicalDrive0", NULL, TRAV },
	{ W, 0, "//?/C:/x", NULL, TRAV },
	{ W, 0, "\\\\.", NULL, TRAV },
	{ W, 0, "\\??\\C:\\x", NULL, TRAV },

	/* Characters. */
	{ U, 0, "", NULL, INV },
	{ U, 0, "a\tb", NULL, INV },
	{ U, 0, "a\nb", NULL, INV },
	{ U, 0, "a\rb", NULL, INV },
	{ U, 0, "a\x1b[31mb", NULL, INV },
	{ U, 0, "a\x7f", NULL, INV },
	{ U, 0, "a\xc2\x85", NULL, INV },		/* U+0085 NEL (C1) */
	{ U, 0, "a\xe2\x80\xa8", NULL, INV },		/* U+2028 */
	{ U, 0, "a\xe2\x80\xae" "cod.exe", NULL, INV },	/* U+202E RLO */
	{ U, 0, "\xe2\x80\xaa", NULL, INV },		/* U+202A */
	{ U, 0, "\xe2\x80\xab", NULL, INV },		/* U+202B */
	{ U, 0, "\xe2\x80\xac", NULL, INV },		/* U+202C */
	{ U, 0, "\xe2\x80\xad", NULL, INV },		/* U+202D */
	{ U, 0, "x\xe2\x81\xa6", NULL, INV },		/* U+2066 */
	{ U, 0, "x\xe2\x81\xa7", NULL, INV },		/* U+2067 */
	{ U, 0, "x\xe2\x81\xa8", NULL, INV },		/* U+2068 */
	{ U, 0, "x\xe2\x81\xa9", NULL, INV },		/* U+2069 */
	{ U, 0, "x\xe2\x80\x8e", NULL, INV },		/* U+200E LRM */
	{ U, 0, "x\xe2\x80\x8f", NULL, INV },		/* U+200F RLM */
	{ U, 0, "x\xd8\x9c", NULL, INV },		/* U+061C ALM */
	{ U, 0, "x\xe2\x81\xa5", "x\xe2\x81\xa5", OK },	/* U+2065: unassigned, not bidi */
	{ U, 0, "\xc0\xaf", NULL, INV },		/* overlong '/' */
	{ U, 0, "\xc0\xae\xc0\xae/x", NULL, INV },	/* overlong ".." */
	{ U, 0, "\xe0\x80\xaf", NULL, INV },		/* 3-byte overlong '/' */
	{ U, 0, "\xf0\x80\x80\xaf", NULL, INV },	/* 4-byte overlong '/' */
	{ U, 0, "\xed\xa0\x80", NULL, INV },		/* U+D800 surrogate */
	{ U, 0, "\xed\xbf\xbf", NULL, INV },		/* U+DFFF */
	{ U, 0, "\xf4\x90\x80\x80", NULL, INV },	/* U+110000 */
	{ U, 0, "\xf5\x80\x80\x80", NULL, INV },
	{ U, 0, "\xff", NULL, INV },
	{ U, 0, "\x80x", NULL, INV },			/* stray continuation */
	{ U, 0, "x\xc3", NULL, INV },			/* truncated */
	{ U, 0, "x\xe6\x97", NULL, INV },
	{ U, 0, "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", OK },	/* U+10FFFF */
	{ U, 0, "\xee\x80\x80", "\xee\x80\x80", OK },	/* U+E000 */
	{ W, 0, "a<b", NULL, INV },
	{ W, 0, "a>b", NULL, INV },
	{ W, 0, "a\"b", NULL, INV },
	{ W, 0, "a|b", NULL, INV },
	{ W, 0, "a?b", NULL, INV },
	{ W, 0, "a*b", NULL, INV },
	{ U, 0, "a*b?", "a*b?", OK },

	/* Windows: streams, devices, short names, trailing dots and spaces. */
	{ W, 0, "file.txt::$DATA", NULL, INV },
	{ W, 0, "file.txt:secret", NULL, INV },
	{ W, 0, "dir\\file:stream:$DATA", NULL, INV },
	{ W, 0, "a\\b:", NULL, INV },
	{ W, 0, "CON", NULL, INV },
	{ W, 0, "con", NULL, INV },
	{ W, 0, "PRN", NULL, INV },
	{ W, 0, "aux", NULL, INV },
	{ W, 0, "NUL", NULL, INV },
	{ W, 0, "nul.txt", NULL, INV },
	{ W, 0, "NUL.tar.gz", NULL, INV },
	{ W, 0, "nul .txt", NULL, INV },
	{ W, 0, "dir/Nul", NULL, INV },
	{ W, 0, "COM1", NULL, INV },
	{ W, 0, "com9.log", NULL, INV },
	{ W, 0, "COM0", NULL, INV },
	{ W, 0, "LPT1", NULL, INV },
	{ W, 0, "lpt9", NULL, INV },
	{ W, 0, "COM\xc2\xb9", NULL, INV },		/* COM with superscript one */
	{ W, 0, "lpt\xc2\xb3.txt", NULL, INV },
	{ W, 0, "CONIN$", NULL, INV },
	{ W, 0, "conout$", NULL, INV },
	{ W, 0, "CON/..", NULL, INV },			/* checked before '..' pops it */
	{ W, 0, "PROGRA~1", NULL, INV },
	{ W, 0, "progra~1\\x", NULL, INV },
	{ W, 0, "LONGFI~12.TXT", NULL, INV },
	{ W, 0, "docume~1.", NULL, INV },
	{ W, 0, "file.", NULL, INV },
	{ W, 0, "file ", NULL, INV },
	{ W, 0, "dir. \\x", NULL, INV },
	{ W, 0, "a\\...", NULL, INV },
	{ W, 0, "a\\ ", NULL, INV },
	{ W, 0, "a/. ./b", NULL, INV },

	/* Absolute mode. */
	{ U, 1, "/", "/", OK },
	{ U, 1, "/w/proj/../proj-evil/x", "/w/proj-evil/x", OK },
	{ U, 1, "//w///proj/./", "/w/proj", OK },
	{ U, 1, "/..", NULL, TRAV },
	{ U, 1, "/a/../..", NULL, TRAV },
	{ U, 1, "rel", NULL, INV },
	{ W, 1, "c:\\Users\\me", "C:/Users/me", OK },
	{ W, 1, "C:/", "C:/", OK },
	{ W, 1, "C:\\a\\..\\..", NULL, TRAV },
	{ W, 1, "C:x", NULL, TRAV },
	{ W, 1, "\\x", NULL, TRAV },
	{ W, 1, "\\\\srv\\share", NULL, TRAV },
	{ W, 1, "C:\\x::$DATA", NULL, INV },
	{ W, 1, "rel", NULL, INV },
};

/* Runs one table row. */
static void
check_row(const struct row *r)
{
	struct pathgate_refusal	 why = { GBR_ERR_INTERNAL, NULL };
	char			*got, shown[80];
	size_t			 i, o = 0;

	/* Show the input with its unusual bytes escaped. */
	for (i = 0; r->in[i] != '\0' && o + 5 < sizeof shown; i++) {
		unsigned char c = (unsigned char)r->in[i];

		if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(shown + o, sizeof shown - o, "\\x%02x", c);
		else
			shown[o++] = (char)c;
	}
	shown[o] = '\0';
	if (r->abs)
		got = pathgate_normalize_absolute(r->in, strlen(r->in), r->fl, &why);
	else
		got = pathgate_normalize(r->in, strlen(r->in), r->fl, &why);
	if (r->out != NULL)
		CHECK(got != NULL && strcmp(got, r->out) == 0,
		    "%s %s '%s' -> '%s' (got '%s'%s%s)", r->fl == W ? "win" : "unix",
		    r->abs ? "abs" : "rel", shown, r->out, got ? got : "NULL",
		    got ? "" : ": ", got ? "" : why.reason);
	else
		CHECK(got == NULL && (int)why.kind == r->kind && why.reason != NULL,
		    "%s %s '%s' refused as %s (%s)", r->fl == W ? "win" : "unix",
		    r->abs ? "abs" : "rel", shown, gbr_err_kind(r->kind),
		    got == NULL ? why.reason : got);
	free(got);
}

/* Paths with an embedded NUL and length limits, which a table cannot hold. */
static void
check_lengths(void)
{
	struct pathgate_refusal	 why;
	char			 buf[PATHGATE_PATH_MAX + 16], *got;
	size_t			 i;

	got = pathgate_normalize("a\0b", 3, U, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "NUL inside refused (unix)");
	got = pathgate_normalize("a\0/../../x", 10, W, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "NUL inside refused (windows)");
	got = pathgate_normalize("a", 0, U, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "zero length refused");
	got = pathgate_normalize(NULL, 0, U, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "NULL refused");

	memset(buf, 'n', 255);
	got = pathgate_normalize(buf, 255, U, &why);
	CHECK(got != NULL && strlen(got) == 255, "a 255-byte name is accepted");
	free(got);
	got = pathgate_normalize(buf, 256, U, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "a 256-byte name is refused");
	got = pathgate_normalize(buf, 256, W, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "a 256-byte name is refused (windows)");

	/* 4096 bytes of "a/" is fine; one more byte is not. */
	for (i = 0; i < PATHGATE_PATH_MAX; i += 2) {
		buf[i] = 'a';
		buf[i + 1] = '/';
	}
	got = pathgate_normalize(buf, PATHGATE_PATH_MAX, U, &why);
	CHECK(got != NULL && strlen(got) == PATHGATE_PATH_MAX - 1,
	    "a 4096-byte path of 2048 components is accepted");
	free(got);
	buf[PATHGATE_PATH_MAX] = 'a';
	got = pathgate_normalize(buf, PATHGATE_PATH_MAX + 1, U, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_INVALID_PATH, "a 4097-byte path is refused");

	/* 2048 levels down then 2049 up: depth above the root. */
	for (i = 0; i < 1365 * 3; i += 3)
		memcpy(buf + i, "../", 3);
	memcpy(buf, "a/", 2);
	got = pathgate_normalize(buf, 1365 * 3, U, &why);
	CHECK(got == NULL && why.kind == GBR_ERR_PATH_TRAVERSAL,
	    "one name then many '..' is refused");

	/* Normalising twice gives the same string. */
	got = pathgate_normalize("./a//b/../c/./", 14, W, &why);
	if (got != NULL) {
		char	*again = pathgate_normalize(got, strlen(got), W, &why);

		CHECK(again != NULL && strcmp(again, got) == 0, "normalising is idempotent");
		free(again);
	} else
		CHECK(0, "normalising is idempotent");
	free(got);
}

/* pathgate_is_under, pathgate_relative and pathgate_equal. */
static void
check_under(void)
{
	char	*rel;

	CHECK(pathgate_is_under("/w/proj", "/w/proj", U), "a root is under itself");
	CHECK(pathgate_is_under("/w/proj", "/w/proj/a/b", U), "a child is under");
	CHECK(!pathgate_is_under("/w/proj", "/w/proj-evil", U),
	    "sibling with the root as prefix is not under (CVE-2025-53110)");
	CHECK(!pathgate_is_under("/w/proj", "/w/proj-evil/x", U),
	    "sibling's child is not under");
	CHECK(!pathgate_is_under("/w/proj/", "/w/projx", U), "trailing slash root, prefix sibling");
	CHECK(!pathgate_is_under("/w/proj", "/w/proj/../proj-evil", U),
	    "'..' out to a sibling is not under");
	CHECK(!pathgate_is_under("/w/proj", "/w/proj/../../etc", U), "'..' out is not under");
	CHECK(pathgate_is_under("/w/proj", "/w/proj/a/../b", U), "'..' staying inside is under");
	CHECK(!pathgate_is_under("/w/proj", "/w", U), "the parent is not under");
	CHECK(!pathgate_is_under("/w/proj", "/W/PROJ/x", U), "case matters on unix");
	CHECK(pathgate_is_under("/", "/etc", U), "everything is under /");
	CHECK(!pathgate_is_under("/w/proj", "w/proj/x", U), "relative vs absolute: no");
	CHECK(!pathgate_is_under("/w/proj", "/w/proj/\x1b", U), "a refused path is under nothing");
	CHECK(!pathgate_is_under("/w/proj", "/w/proj\xe2\x80\xae", U), "bidi path is under nothing");
	CHECK(pathgate_is_under("a/b", "a/b/c", U), "relative pairs compare too");
	CHECK(!pathgate_is_under("a/b", "a/bc", U), "relative prefix sibling");
	CHECK(!pathgate_is_under(NULL, "/x", U) && !pathgate_is_under("/x", NULL, U),
	    "NULL is under nothing");

	CHECK(pathgate_is_under("C:\\Proj", "c:\\proj\\src", W),
	    "windows compares case-insensitively (C:\\Proj vs c:\\proj)");
	CHECK(pathgate_is_under("C:/Proj", "C:\\PROJ", W), "windows: mixed separators");
	CHECK(!pathgate_is_under("C:\\Proj", "C:\\Proj-evil", W), "windows sibling prefix");
	CHECK(!pathgate_is_under("C:\\Proj", "c:\\PROJ-EVIL\\x", W), "windows sibling prefix, case");
	CHECK(!pathgate_is_under("C:\\Proj", "D:\\Proj", W), "another drive is not under");
	CHECK(!pathgate_is_under("C:\\Proj", "C:Proj\\x", W), "drive-relative is under nothing");
	CHECK(!pathgate_is_under("C:\\Proj", "\\\\srv\\c$\\Proj", W), "UNC is under nothing");
	CHECK(!pathgate_is_under("C:\\Proj", "\\\\?\\C:\\Proj\\x", W), "\\\\?\\ is under nothing");
	CHECK(!pathgate_is_under("C:\\Proj", "C:\\Proj\\x::$DATA", W), "a stream is under nothing");
	CHECK(!pathgate_is_under("C:\\Proj", "C:\\Proj\\x.", W), "trailing dot is under nothing");
	CHECK(!pathgate_is_under("C:\\Proj", "C:\\PROGRA~1", W), "short name is under nothing");
	CHECK(pathgate_is_under("C:\\Caf\xc3\x89", "c:\\caf\xc3\xa9\\x", W),
	    "windows folds Latin-1 (\xc3\x89 vs \xc3\xa9)");
	CHECK(pathgate_is_under("C:\\\xd0\x9f\xd0\xa0", "C:\\\xd0\xbf\xd1\x80", W),
	    "windows folds Cyrillic");
	CHECK(!pathgate_is_under("C:\\Caf\xc3\x89", "c:\\cafe", W), "folding does not strip accents");

	rel = pathgate_relative("/w/proj", "/w/proj/src/../lib/x.c", U);
	CHECK(rel != NULL && strcmp(rel, "lib/x.c") == 0, "relative: lib/x.c");
	free(rel);
	rel = pathgate_relative("/w/proj", "/w/proj", U);
	CHECK(rel != NULL && strcmp(rel, ".") == 0, "relative: the root itself is '.'");
	free(rel);
	rel = pathgate_relative("/w/proj", "/w/proj-evil/x", U);
	CHECK(rel == NULL, "relative: sibling gives NULL");
	rel = pathgate_relative("C:\\Proj", "c:\\PROJ\\Src\\A.txt", W);
	CHECK(rel != NULL && strcmp(rel, "Src/A.txt") == 0, "relative (windows): keeps the path's case");
	free(rel);

	CHECK(pathgate_equal("Gleam.TOML", "gleam.toml", W), "equal: windows ignores case");
	CHECK(!pathgate_equal("Gleam.TOML", "gleam.toml", U), "equal: unix does not");
	CHECK(!pathgate_equal("ab", "abc", W), "equal: lengths differ");
}

/* The glob matcher and its syntax check. */
static void
check_glob(void)
{
	const char	*reason;
	char		 big[600];
	size_t		 i;

	CHECK(pathgate_glob_match("gleam.toml", "gleam.toml", 0), "glob: literal");
	CHECK(!pathgate_glob_match("gleam.toml", "sub/gleam.toml", 0), "glob: literal is anchored");
	CHECK(pathgate_glob_match("*.toml", "manifest.toml", 0), "glob: star");
	CHECK(!pathgate_glob_match("*.toml", "a/manifest.toml", 0), "glob: star does not cross '/'");
	CHECK(pathgate_glob_match("*", ".hidden", 0), "glob: star matches a leading dot");
	CHECK(pathgate_glob_match(".gbr_envs/**", ".gbr_envs/default.ini", 0), "glob: dir/**");
	CHECK(pathgate_glob_match(".gbr_envs/**", ".gbr_envs/a/b/c", 0), "glob: dir/** deep");
	CHECK(pathgate_glob_match(".gbr_envs/**", ".gbr_envs", 0), "glob: dir/** matches dir");
	CHECK(!pathgate_glob_match(".gbr_envs/**", ".gbr_envsx/a", 0), "glob: dir/** not a sibling");
	CHECK(pathgate_glob_match("**/.gbr_envs/**", "a/b/.gbr_envs/x.ini", 0), "glob: **/dir/** nested");
	CHECK(pathgate_glob_match("**/.gbr_envs/**", ".gbr_envs/x.ini", 0), "glob: **/ matches zero dirs");
	CHECK(pathgate_glob_match("src/**/*.gleam", "src/a.gleam", 0), "glob: src/**/*.gleam zero");
	CHECK(pathgate_glob_match("src/**/*.gleam", "src/a/b/c.gleam", 0), "glob: src/**/*.gleam deep");
	CHECK(!pathgate_glob_match("src/**/*.gleam", "lib/a.gleam", 0), "glob: wrong top");
	CHECK(pathgate_glob_match("**", "anything/at/all", 0), "glob: ** alone");
	CHECK(pathgate_glob_match("a/**/b/**/c", "a/x/b/y/z/c", 0), "glob: two globstars");
	CHECK(!pathgate_glob_match("a/**/b/**/c", "a/x/y/z/c", 0), "glob: two globstars, no b");
	CHECK(pathgate_glob_match("file?.c", "file1.c", 0), "glob: ?");
	CHECK(pathgate_glob_match("caf?", "caf\xc3\xa9", 0), "glob: ? takes one UTF-8 char");
	CHECK(pathgate_glob_match("[a-c]x", "bx", 0) && !pathgate_glob_match("[a-c]x", "dx", 0),
	    "glob: class range");
	CHECK(pathgate_glob_match("[!a-c]x", "dx", 0) && !pathgate_glob_match("[^a-c]x", "ax", 0),
	    "glob: negated class");
	CHECK(pathgate_glob_match("[]]", "]", 0), "glob: ']' first in a class");
	CHECK(pathgate_glob_match("a\\*", "a*", 0) && !pathgate_glob_match("a\\*", "ab", 0),
	    "glob: escaped star");
	CHECK(pathgate_glob_match("GLEAM.toml", "gleam.TOML", PATHGATE_GLOB_CASEFOLD),
	    "glob: casefold");
	CHECK(!pathgate_glob_match("GLEAM.toml", "gleam.TOML", 0), "glob: case matters by default");
	CHECK(pathgate_glob_match("**/.GBR_ENVS/**", ".gbr_envs/x", PATHGATE_GLOB_CASEFOLD),
	    "glob: casefold with globstar");
	CHECK(pathgate_glob_match("*", ".", 0) == 0 && pathgate_glob_match("**", ".", 0),
	    "glob: the root matches only **");

	/* Found by fuzz-pathgate: "src/" against "src"; empty and "." parts. */
	CHECK(pathgate_glob_match("src/", "src", 0) && pathgate_glob_match("./gleam.toml",
	    "gleam.toml", 0) && pathgate_glob_match("a//b", "a/b", 0) &&
	    pathgate_glob_match("a/./b/", "a//b", 0) && !pathgate_glob_match("src/", "srcx", 0),
	    "glob: empty and '.' components are ignored on both sides");

	/* Found by fuzz-pathgate: a stray byte 0x80 is not U+0080. */
	CHECK(!pathgate_glob_match("\xc2\x80", "\x80", 0) &&
	    !pathgate_glob_match("\x80", "\xc2\x80", 0) && pathgate_glob_match("\x80", "\x80", 0) &&
	    pathgate_glob_match("?", "\xff", 0), "glob: invalid bytes never equal a real character");

	/* A pattern that makes backtracking matchers explode stays fast. */
	for (i = 0; i < 250; i++)
		big[i] = 'a';
	big[250] = '\0';
	CHECK(!pathgate_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", big, 0),
	    "glob: many stars against 250 a's answers (no exponential backtracking)");
	CHECK(!pathgate_glob_match("**/**/**/**/**/**/**/**/**/**/x",
	    "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/y", 0),
	    "glob: many globstars answer");

	CHECK(pathgate_glob_check("src/**/*.c", &reason) == 0, "glob check: good");
	CHECK(pathgate_glob_check("", &reason) == -1, "glob check: empty");
	CHECK(pathgate_glob_check("/etc/*", &reason) == -1, "glob check: absolute");
	CHECK(pathgate_glob_check("../x", &reason) == -1, "glob check: '..'");
	CHECK(pathgate_glob_check("a/[bc", &reason) == -1, "glob check: unclosed class");
	CHECK(pathgate_glob_check("a/[]]", &reason) == 0, "glob check: ']' first is closed");
	CHECK(pathgate_glob_check("a\tb", &reason) == -1, "glob check: control character");
	CHECK(pathgate_glob_check("a\\[b", &reason) == 0, "glob check: escaped '['");
}

/* The UTF-8 decoder on its own. */
static void
check_utf8(void)
{
	uint32_t	cp = 0;

	CHECK(utf8_decode((const unsigned char *)"A", 1, &cp) == 1 && cp == 'A', "utf8: ASCII");
	CHECK(utf8_decode((const unsigned char *)"\xc2\x80", 2, &cp) == 2 && cp == 0x80,
	    "utf8: smallest 2-byte");
	CHECK(utf8_decode((const unsigned char *)"\xe0\xa0\x80", 3, &cp) == 3 && cp == 0x800,
	    "utf8: smallest 3-byte");
	CHECK(utf8_decode((const unsigned char *)"\xf0\x90\x80\x80", 4, &cp) == 4 &&
	    cp == 0x10000, "utf8: smallest 4-byte");
	CHECK(utf8_decode((const unsigned char *)"\xe2\x82\xac", 2, &cp) == 0,
	    "utf8: a sequence cut by the length");
	CHECK(utf8_decode((const unsigned char *)"\xc1\xbf", 2, &cp) == 0, "utf8: overlong C1");
	CHECK(utf8_decode((const unsigned char *)"\xe2\x28\xa1", 3, &cp) == 0,
	    "utf8: bad continuation");
}

int
main(void)
{
	size_t	i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
		check_row(&rows[i]);
	check_lengths();
	check_under();
	check_glob();
	check_utf8();
	return unit_done();
}
