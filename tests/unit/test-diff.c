/*
 * Unit tests for daemon/tools/diff.c: the unified diffs a human reads before
 * approving a change. Exact output for the small cases (GNU diff -u's
 * format), and for many random texts: applying the diff to the old text
 * gives the new one, and the number of changed lines is the smallest
 * possible (checked against an LCS table). The caps: a diff over the
 * output cap says so, and texts past the search caps still give a diff
 * that applies.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "unit.h"
#include "xmalloc.h"

/* A tiny growing string. */
struct str {
	char	*p;
	size_t	 len;
	size_t	 cap;
};

static void
str_add(struct str *s, const char *p, size_t len)
{
	if (s->len + len + 1 > s->cap) {
		s->cap = (s->len + len + 1) * 2;
		s->p = xreallocarray(s->p, s->cap, 1);
	}
	memcpy(s->p + s->len, p, len);
	s->len += len;
	s->p[s->len] = '\0';
}

/* The start of line i (0-based) of t, and its length with the newline. */
static const char *
line_at(const char *t, size_t tlen, size_t i, size_t *len)
{
	const char	*p = t, *end = t + tlen, *nl;

	while (i-- > 0) {
		nl = memchr(p, '\n', (size_t)(end - p));
		p = nl + 1;
	}
	nl = memchr(p, '\n', (size_t)(end - p));
	*len = nl != NULL ? (size_t)(nl - p) + 1 : (size_t)(end - p);
	return p;
}

/* Counts the lines of a text. */
static size_t
count_lines(const char *t, size_t len)
{
	size_t	n = 0, i;

	for (i = 0; i < len; i++)
		if (t[i] == '\n')
			n++;
	return n + (len > 0 && t[len - 1] != '\n');
}

/*
 * Applies a unified diff to a; returns the new text (new string) or NULL
 * if the diff does not fit a. *changed counts '+' and '-' lines.
 */
static char *
apply(const char *a, size_t alen, const char *d, size_t *changed)
{
	struct str	 out = { NULL, 0, 0 };
	const char	*p, *nl, *l;
	size_t		 ai = 0, na = count_lines(a, alen), as, len;
	unsigned long	 x1, x2, y1, y2;
	int		 n;
	char		 prev = 0;

	*changed = 0;
	str_add(&out, "", 0);
	p = strstr(d, "\n+++ ");
	if (p == NULL || (p = strchr(p + 1, '\n')) == NULL)
		return NULL;
	p++;
	while (*p != '\0') {
		nl = strchr(p, '\n');
		if (nl == NULL)
			return NULL;
		if (strncmp(p, "@@ ", 3) == 0) {
			x2 = y2 = 1;
			n = sscanf(p, "@@ -%lu,%lu +%lu,%lu @@", &x1, &x2, &y1, &y2);
			if (n != 4) {
				x2 = 1;
				if (sscanf(p, "@@ -%lu,%lu +%lu @@", &x1, &x2, &y1) == 3)
					y2 = 1;
				else if (sscanf(p, "@@ -%lu +%lu,%lu @@", &x1, &y1, &y2) == 3)
					x2 = 1;
				else if (sscanf(p, "@@ -%lu +%lu @@", &x1, &y1) == 2)
					x2 = y2 = 1;
				else
					return NULL;
			}
			as = x2 == 0 ? x1 : x1 - 1;
			(void)y1;
			(void)y2;
			while (ai < as && ai < na) {
				l = line_at(a, alen, ai++, &len);
				str_add(&out, l, len);
			}
		} else if (p[0] == ' ' || p[0] == '-') {
			if (ai >= na)
				return NULL;
			l = line_at(a, alen, ai++, &len);
			if ((size_t)(nl - p - 1) != len - (l[len - 1] == '\n') ||
			    memcmp(p + 1, l, len - (l[len - 1] == '\n')) != 0)
				return NULL;
			if (p[0] == ' ')
				str_add(&out, l, len);
			else
				(*changed)++;
		} else if (p[0] == '+') {
			str_add(&out, p + 1, (size_t)(nl - p));
			(*changed)++;
		} else if (p[0] == '\\') {
			/* The '+' line before has no newline. */
			if (prev == '+' && out.len > 0 &&
			    out.p[out.len - 1] == '\n')
				out.p[--out.len] = '\0';
		} else
			return NULL;
		prev = p[0];
		p = nl + 1;
	}
	while (ai < na) {
		l = line_at(a, alen, ai++, &len);
		str_add(&out, l, len);
	}
	return out.p;
}

/* The smallest number of changed lines (n + m - 2 LCS). */
static size_t
min_changes(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t		 n = count_lines(a, alen), m = count_lines(b, blen);
	size_t		*t, i, j, la, lb, r;
	const char	*x, *y;

	t = xcalloc((n + 1) * (m + 1), sizeof *t);
	for (i = 1; i <= n; i++) {
		x = line_at(a, alen, i - 1, &la);
		for (j = 1; j <= m; j++) {
			y = line_at(b, blen, j - 1, &lb);
			if (la == lb && memcmp(x, y, la) == 0)
				t[i * (m + 1) + j] = t[(i - 1) * (m + 1) + j - 1] + 1;
			else
				t[i * (m + 1) + j] =
				    t[(i - 1) * (m + 1) + j] > t[i * (m + 1) + j - 1] ?
				    t[(i - 1) * (m + 1) + j] : t[i * (m + 1) + j - 1];
		}
	}
	r = n + m - 2 * t[n * (m + 1) + m];
	free(t);
	return r;
}

/* A random text of up to maxl lines from a small alphabet of lines. */
static char *
random_text(size_t maxl, unsigned alpha, int nonl, size_t *len)
{
	struct str	s = { NULL, 0, 0 };
	size_t		n = (size_t)rand() % (maxl + 1), i;
	char		line[16];

	str_add(&s, "", 0);
	for (i = 0; i < n; i++) {
		snprintf(line, sizeof line, "l%u\n", (unsigned)rand() % alpha);
		str_add(&s, line, strlen(line));
	}
	if (nonl && s.len > 0)
		s.p[--s.len] = '\0';
	*len = s.len;
	return s.p;
}

/* How the head of the 2000-line rewrite below begins. */
#define HEAD_BIG "--- a/big\n+++ b/big\n@@ -1,2000 +1,2000 @@\n-old line 0\n" \
	"-old line 1\n"

/* Diffs and checks exact output. */
static int
same(const char *a, const char *b, const char *want)
{
	char	*d = diff_unified("f.txt", a, strlen(a), b, strlen(b), 0, NULL);
	int	 ok = strcmp(d, want) == 0;

	if (!ok)
		printf("# got:\n%s# want:\n%s", d, want);
	free(d);
	return ok;
}

int
main(void)
{
	char	*a, *b, *d, *r;
	size_t	 alen, blen, changed, i, len, ok_apply = 0, ok_min = 0, trials;
	int	 cut;
	struct str big_a = { NULL, 0, 0 }, big_b = { NULL, 0, 0 };
	char	 line[32];

	CHECK(same("x\n", "x\n", "--- a/f.txt\n+++ b/f.txt\n"),
	    "equal texts: the header alone");
	CHECK(same("a\nb\nc\n", "a\nB\nc\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"),
	    "one changed line with its context");
	CHECK(same("", "x\ny\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n"),
	    "a new file: an empty old range");
	CHECK(same("x\ny\n", "",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +0,0 @@\n-x\n-y\n"),
	    "everything removed: an empty new range");
	CHECK(same("x\n", "y\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-x\n+y\n"),
	    "a range of one line has no count");
	CHECK(same("a\nb", "a\nb\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n"
	    "\\ No newline at end of file\n+b\n"),
	    "a missing final newline is marked");
	CHECK(same("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\n5\n6\n7\n8\n9\nX\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -7,3 +7,4 @@\n 7\n 8\n 9\n+X\n"),
	    "an appended line: context before it only");
	CHECK(same("A\n1\n2\n3\n4\n5\n6\nB\n", "a\n1\n2\n3\n4\n5\n6\nb\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -1,8 +1,8 @@\n-A\n+a\n 1\n 2\n 3\n"
	    " 4\n 5\n 6\n-B\n+b\n"),
	    "changes six lines apart share one hunk");
	CHECK(same("A\n1\n2\n3\n4\n5\n6\n7\nB\n", "a\n1\n2\n3\n4\n5\n6\n7\nb\n",
	    "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n-A\n+a\n 1\n 2\n 3\n"
	    "@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-B\n+b\n"),
	    "changes seven lines apart make two hunks");
	d = diff_unified("bin", "a\0b", 3, "a", 1, 0, NULL);
	CHECK(strstr(d, "Binary files differ (3 bytes -> 1 bytes)") != NULL,
	    "a NUL byte makes it binary: sizes only");
	free(d);

	/* The output cap: a note instead of the hunks. */
	for (i = 0; i < 2000; i++) {
		snprintf(line, sizeof line, "old line %zu\n", i);
		str_add(&big_a, line, strlen(line));
		snprintf(line, sizeof line, "new line %zu\n", i);
		str_add(&big_b, line, strlen(line));
	}
	d = diff_unified("big", big_a.p, big_a.len, big_b.p, big_b.len, 4096,
	    &len);
	CHECK(len < 4096 && strncmp(d, "--- a/big\n+++ b/big\n(the diff is "
	    "over the cap of 4096 bytes", 47) == 0 && strlen(d) == len,
	    "over the output cap: the header and a note");
	free(d);
	/* The head of it instead, cut after a whole line. */
	d = diff_unified_head("big", big_a.p, big_a.len, big_b.p, big_b.len,
	    4096, &len, &cut);
	CHECK(cut && len <= 4096 + 20 && strlen(d) == len && d[len - 1] == '\n' &&
	    strncmp(d, HEAD_BIG, strlen(HEAD_BIG)) == 0,
	    "the head: cut at a whole line");
	r = strrchr(d, '\n');
	for (r--; r > d && r[-1] != '\n'; r--)
		;
	CHECK(strncmp(r, "-old line ", 10) == 0, "the head ends with a whole line");
	free(d);
	/* A cut that would leave a hunk header alone drops it. */
	d = diff_unified_head("f", "a\n1\n2\n3\n4\n5\n6\n7\nb\n", 18,
	    "A\n1\n2\n3\n4\n5\n6\n7\nB\n", 18, 48, &len, &cut);
	CHECK(cut && strcmp(d, "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n-a\n+A\n"
	    " 1\n 2\n 3\n") == 0, "the head: no hunk header without lines");
	free(d);
	d = diff_unified_head("f", "x\n", 2, "y\n", 2, 0, &len, &cut);
	CHECK(!cut && strcmp(d, "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n") == 0,
	    "the head of a short diff is all of it");
	free(d);
	/* Past the edit cap: still a diff that applies (one big hunk). */
	d = diff_unified("big", big_a.p, big_a.len, big_b.p, big_b.len,
	    (size_t)64 << 20, &len);
	r = apply(big_a.p, big_a.len, d, &changed);
	CHECK(r != NULL && strcmp(r, big_b.p) == 0 && changed == 4000,
	    "past the edit cap: the middle replaced, and it applies");
	free(r);
	free(d);
	/* Many small edits in a big file: Myers within its caps, minimal. */
	free(big_b.p);
	big_b.p = NULL;
	big_b.len = big_b.cap = 0;
	for (i = 0; i < 2000; i++) {
		snprintf(line, sizeof line, i % 100 == 7 ? "changed %zu\n" :
		    "old line %zu\n", i);
		str_add(&big_b, line, strlen(line));
	}
	d = diff_unified("big", big_a.p, big_a.len, big_b.p, big_b.len,
	    (size_t)64 << 20, &len);
	r = apply(big_a.p, big_a.len, d, &changed);
	CHECK(r != NULL && strcmp(r, big_b.p) == 0 && changed == 40,
	    "twenty scattered edits in 2000 lines: 40 changed lines");
	free(r);
	free(d);
	free(big_a.p);
	free(big_b.p);

	/* Random texts: the diff applies and is as short as possible. */
	srand(7);
	trials = 3000;
	for (i = 0; i < trials; i++) {
		a = random_text(12, 4, rand() % 5 == 0, &alen);
		b = random_text(12, 4, rand() % 5 == 0, &blen);
		d = diff_unified("r", a, alen, b, blen, (size_t)1 << 20, NULL);
		r = apply(a, alen, d, &changed);
		if (r != NULL && strcmp(r, b) == 0)
			ok_apply++;
		else
			printf("# a:\n%s\n# b:\n%s\n# diff:\n%s\n", a, b, d);
		if (changed == min_changes(a, alen, b, blen))
			ok_min++;
		free(r);
		free(d);
		free(a);
		free(b);
	}
	CHECK(ok_apply == trials, "random texts: %zu of %zu diffs apply",
	    ok_apply, trials);
	CHECK(ok_min == trials, "random texts: %zu of %zu diffs are minimal",
	    ok_min, trials);
	return unit_done();
}
