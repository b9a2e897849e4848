/*
 * Unified diffs (see diff.h). The texts are split into lines (a line keeps
 * its '\n'; the last one may lack it), each line gets a hash so that the
 * search compares integers first, the common head and tail are cut, and
 * Myers' greedy forward search finds a shortest edit script of the middle,
 * keeping one compact copy of its frontier per step to walk back. The
 * script is then printed as hunks with DIFF_CONTEXT lines around each
 * change, hunks whose context would touch merged into one, in the format
 * of GNU diff -u (and Python's difflib): a range of one line is written
 * "L", an empty range "L,0" with L the line before it.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "xmalloc.h"

/* One line of a text. */
struct dline {
	const char	*s;
	size_t		 len;		/* with its '\n', if any */
	uint64_t	 h;
};

/* A growing output buffer that stops at a cap. */
struct dbuf {
	char	*p;
	size_t	 len;
	size_t	 cap;
	size_t	 max;
	int	 over;
};

/* One step of the edit script: ' ', '-' or '+', with the lines' indexes. */
struct dop {
	char	 op;
	size_t	 ai;		/* a's line for ' ' and '-' */
	size_t	 bi;		/* b's line for ' ' and '+' */
};

/* FNV-1a of a line. */
static uint64_t
diff_hash(const char *s, size_t len)
{
	uint64_t	h = 1469598103934665603ULL;
	size_t		i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* Splits text into lines (new array; *n set). */
static struct dline *
diff_lines(const char *t, size_t len, size_t *n)
{
	struct dline	*v;
	const char	*p = t, *end = t + len, *nl;
	size_t		 count = 0, i = 0;

	for (p = t; p < end; p = nl + 1) {
		count++;
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			break;
	}
	v = xcalloc(count + 1, sizeof *v);
	for (p = t; p < end && i < count; i++) {
		nl = memchr(p, '\n', (size_t)(end - p));
		v[i].s = p;
		v[i].len = nl != NULL ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		v[i].h = diff_hash(v[i].s, v[i].len);
		p += v[i].len;
	}
	*n = count;
	return v;
}

/* True if two lines are equal. */
static int
diff_eq(const struct dline *x, const struct dline *y)
{
	return x->h == y->h && x->len == y->len &&
	    memcmp(x->s, y->s, x->len) == 0;
}

/* Appends bytes; past the cap only notes that it is over. */
static void
dbuf_add(struct dbuf *b, const char *s, size_t len)
{
	size_t	ncap;

	if (b->over)
		return;
	if (b->len + len > b->max) {
		b->over = 1;
		return;
	}
	if (b->len + len + 1 > b->cap) {
		ncap = b->cap == 0 ? 1024 : b->cap;
		while (ncap < b->len + len + 1)
			ncap *= 2;
		b->p = xreallocarray(b->p, ncap, 1);
		b->cap = ncap;
	}
	memcpy(b->p + b->len, s, len);
	b->len += len;
	b->p[b->len] = '\0';
}

/* Appends formatted text. */
static void __attribute__((format(__printf__, 2, 3)))
dbuf_printf(struct dbuf *b, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	dbuf_add(b, s, strlen(s));
	free(s);
}

/* Appends one line of a hunk with its marker. */
static void
dbuf_line(struct dbuf *b, char op, const struct dline *l)
{
	dbuf_add(b, &op, 1);
	dbuf_add(b, l->s, l->len);
	if (l->len == 0 || l->s[l->len - 1] != '\n')
		dbuf_add(b, "\n\\ No newline at end of file\n", 29);
}

/*
 * Myers' search on a[0..n) and b[0..m). Appends the script to ops (which
 * has room for n + m entries) and returns its length, or (size_t)-1 when
 * more than dmax edits would be needed.
 */
static size_t
diff_myers(const struct dline *a, size_t n, const struct dline *b, size_t m,
    size_t dmax, struct dop *ops, size_t a0, size_t b0)
{
	long		*v, **trace, k, x, y, px, pk, d, found = -1;
	long		 off = (long)dmax + 1;
	size_t		 nops = 0, i, j;
	struct dop	 t;

	v = xcalloc(2 * dmax + 3, sizeof *v);
	trace = xcalloc(dmax + 1, sizeof *trace);
	v[off + 1] = 0;
	for (d = 0; d <= (long)dmax; d++) {
		for (k = -d; k <= d; k += 2) {
			if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1];
			else
				x = v[off + k - 1] + 1;
			y = x - k;
			while (x < (long)n && y < (long)m &&
			    diff_eq(&a[x], &b[y])) {
				x++;
				y++;
			}
			v[off + k] = x;
			if (x >= (long)n && y >= (long)m && found == -1)
				found = d;
		}
		/* The frontier of this step: k = -d, -d+2, ..., d. */
		trace[d] = xcalloc((size_t)d + 1, sizeof **trace);
		for (k = -d; k <= d; k += 2)
			trace[d][(k + d) / 2] = v[off + k];
		if (found != -1)
			break;
	}
	if (found == -1) {
		for (i = 0; i <= dmax; i++)
			free(trace[i]);
		free(trace);
		free(v);
		return (size_t)-1;
	}
	/* Walk back from (n, m), collecting the script in reverse. */
	x = (long)n;
	y = (long)m;
	for (d = found; d >= 0; d--) {
		k = x - y;
		if (d == 0) {
			while (x > 0 && y > 0) {
				x--;
				y--;
				ops[nops++] = (struct dop){ ' ', a0 + (size_t)x,
				    b0 + (size_t)y };
			}
			break;
		}
		if (k == -d || (k != d && trace[d - 1][(k - 1 + d - 1) / 2] <
		    trace[d - 1][(k + 1 + d - 1) / 2]))
			pk = k + 1;	/* came down: an insertion */
		else
			pk = k - 1;	/* came right: a deletion */
		px = trace[d - 1][(pk + d - 1) / 2];
		/* The snake back to just after the move. */
		while (x > (pk == k + 1 ? px : px + 1) && x - k > 0) {
			x--;
			y--;
			ops[nops++] = (struct dop){ ' ', a0 + (size_t)x,
			    b0 + (size_t)y };
		}
		if (pk == k + 1) {
			y--;
			ops[nops++] = (struct dop){ '+', 0, b0 + (size_t)y };
		} else {
			x--;
			ops[nops++] = (struct dop){ '-', a0 + (size_t)x, 0 };
		}
	}
	for (i = 0, j = nops; i < j / 2; i++) {
		t = ops[i];
		ops[i] = ops[j - 1 - i];
		ops[j - 1 - i] = t;
	}
	for (i = 0; i <= (size_t)found; i++)
		free(trace[i]);
	free(trace);
	free(v);
	return nops;
}

/* Writes the range of a hunk header as GNU diff does. */
static void
diff_range(struct dbuf *b, char side, size_t start, size_t count)
{
	if (count == 1)
		dbuf_printf(b, "%c%zu", side, start + 1);
	else if (count == 0)
		dbuf_printf(b, "%c%zu,0", side, start);
	else
		dbuf_printf(b, "%c%zu,%zu", side, start + 1, count);
}

/* Prints the script's hunks. */
static void
diff_hunks(struct dbuf *out, const struct dop *ops, size_t nops,
    const struct dline *a, const struct dline *b)
{
	size_t	*apos, *bpos, i = 0, s, e, j, last, k;

	/* apos[k], bpos[k]: lines of a and of b before step k. */
	apos = xcalloc(nops + 1, sizeof *apos);
	bpos = xcalloc(nops + 1, sizeof *bpos);
	for (k = 0; k < nops; k++) {
		apos[k + 1] = apos[k] + (ops[k].op != '+');
		bpos[k + 1] = bpos[k] + (ops[k].op != '-');
	}
	while (i < nops && !out->over) {
		while (i < nops && ops[i].op == ' ')
			i++;
		if (i == nops)
			break;
		/* Context before, then every change closer than 2 contexts. */
		s = i >= DIFF_CONTEXT ? i - DIFF_CONTEXT : 0;
		last = i;
		for (j = i; j < nops; j++) {
			if (ops[j].op != ' ')
				last = j;
			else if (j - last > 2 * DIFF_CONTEXT)
				break;
		}
		e = last + 1 + DIFF_CONTEXT;
		if (e > nops)
			e = nops;
		dbuf_add(out, "@@ ", 3);
		diff_range(out, '-', apos[s], apos[e] - apos[s]);
		dbuf_add(out, " ", 1);
		diff_range(out, '+', bpos[s], bpos[e] - bpos[s]);
		dbuf_add(out, " @@\n", 4);
		for (k = s; k < e; k++) {
			if (ops[k].op == '+')
				dbuf_line(out, '+', &b[ops[k].bi]);
			else
				dbuf_line(out, ops[k].op, &a[ops[k].ai]);
		}
		i = e;
	}
	free(apos);
	free(bpos);
}

/*
 * The unified diff of a and b. Over max_out bytes of hunks, with cutp
 * NULL the hunks become a note (diff_unified); else they are cut after
 * the last whole line that fits and *cutp is set (diff_unified_head).
 */
static char *
diff_make(const char *path, const char *a, size_t alen, const char *b,
    size_t blen, size_t max_out, size_t *lenp, int *cutp)
{
	struct dbuf	 out = { NULL, 0, 0, 0, 0 };
	struct dline	*la, *lb;
	struct dop	*ops;
	size_t		 na, nb, pre = 0, suf = 0, nops = 0, i, r, mid_a, mid_b;
	size_t		 hdr;

	if (max_out == 0)
		max_out = DIFF_OUT_MAX;
	out.max = (size_t)-1;
	dbuf_printf(&out, "--- a/%s\n+++ b/%s\n", path, path);
	hdr = out.len;
	if (memchr(a, '\0', alen) != NULL || memchr(b, '\0', blen) != NULL) {
		dbuf_printf(&out, "Binary files differ (%zu bytes -> %zu "
		    "bytes)\n", alen, blen);
		goto done;
	}
	la = diff_lines(a, alen, &na);
	lb = diff_lines(b, blen, &nb);
	while (pre < na && pre < nb && diff_eq(&la[pre], &lb[pre]))
		pre++;
	while (suf < na - pre && suf < nb - pre &&
	    diff_eq(&la[na - 1 - suf], &lb[nb - 1 - suf]))
		suf++;
	mid_a = na - pre - suf;
	mid_b = nb - pre - suf;
	ops = xcalloc(na + nb + 1, sizeof *ops);
	for (i = 0; i < pre; i++)
		ops[nops++] = (struct dop){ ' ', i, i };
	r = (size_t)-1;
	if (mid_a + mid_b <= DIFF_MAX_LINES)
		r = diff_myers(la + pre, mid_a, lb + pre, mid_b,
		    DIFF_MAX_EDITS, ops + nops, pre, pre);
	if (r == (size_t)-1) {
		/* Past the caps: the middle is replaced as a whole. */
		r = 0;
		for (i = 0; i < mid_a; i++)
			ops[nops + r++] = (struct dop){ '-', pre + i, 0 };
		for (i = 0; i < mid_b; i++)
			ops[nops + r++] = (struct dop){ '+', 0, pre + i };
	}
	nops += r;
	for (i = 0; i < suf; i++)
		ops[nops++] = (struct dop){ ' ', na - suf + i, nb - suf + i };
	/* The hunks, within the cap (the header always fits). */
	out.max = hdr + max_out;
	diff_hunks(&out, ops, nops, la, lb);
	if (out.over && cutp != NULL) {
		/* A line is added in pieces: drop the one left half-written. */
		while (out.len > hdr && out.p[out.len - 1] != '\n')
			out.len--;
		/* And a hunk header left with none of its lines. */
		if (out.len > hdr) {
			i = out.len - 1;
			while (i > hdr && out.p[i - 1] != '\n')
				i--;
			if (out.len - i >= 2 && memcmp(out.p + i, "@@", 2) == 0)
				out.len = i;
		}
		out.p[out.len] = '\0';
		*cutp = 1;
	} else if (out.over) {
		out.over = 0;
		out.len = hdr;
		out.p[out.len] = '\0';
		out.max = (size_t)-1;
		dbuf_printf(&out, "(the diff is over the cap of %zu bytes and "
		    "is not shown: %zu lines -> %zu lines, %zu bytes -> %zu "
		    "bytes)\n", max_out, na, nb, alen, blen);
	}
	free(ops);
	free(la);
	free(lb);
done:
	if (lenp != NULL)
		*lenp = out.len;
	return out.p;
}

/* The unified diff of a and b, or a note past the cap (see diff.h). */
char *
diff_unified(const char *path, const char *a, size_t alen, const char *b,
    size_t blen, size_t max_out, size_t *lenp)
{
	return diff_make(path, a, alen, b, blen, max_out, lenp, NULL);
}

/* The unified diff of a and b, its head only past the cap (see diff.h). */
char *
diff_unified_head(const char *path, const char *a, size_t alen, const char *b,
    size_t blen, size_t max_out, size_t *lenp, int *cut)
{
	*cut = 0;
	return diff_make(path, a, alen, b, blen, max_out, lenp, cut);
}
