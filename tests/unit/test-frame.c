/*
 * Unit tests for the line framer: split reads, joined lines, empty lines,
 * CRLF, NUL bytes, oversize lines (whole and split), the stop request, and
 * a budget shared by several framers.
 */
#include "gbr-config.h"

#include "frame.h"
#include "unit.h"
#include "xmalloc.h"

struct got {
	char	lines[64][256];
	size_t	lens[64];
	int	n;
	int	stop_after;
};

static int
collect(void *arg, const char *line, size_t len)
{
	struct got	*g = arg;

	if (g->n < 64 && len < 256) {
		memcpy(g->lines[g->n], line, len);
		g->lines[g->n][len] = '\0';
		g->lens[g->n] = len;
	}
	g->n++;
	return g->stop_after > 0 && g->n >= g->stop_after;
}

/* Partial lines of several framers against one budget. */
static void
check_budget(void)
{
	struct frame_budget	*b;
	struct frame		*f1, *f2, *f3;
	struct got		 g;
	enum frame_status	 st;
	char			*big;

	big = xmalloc(300000);
	memset(big, 'x', 300000);
	memset(&g, 0, sizeof g);
	b = frame_budget_create(1000);
	f1 = frame_create(1000);
	f2 = frame_create(1000);
	frame_set_budget(f1, b);
	frame_set_budget(f2, b);
	st = frame_feed(f1, big, 600, collect, &g);
	CHECK(st == FRAME_OK && frame_budget_used(b) >= 600 &&
	    frame_budget_used(b) <= 1000, "a partial line takes its buffer from "
	    "the budget (%zu)", frame_budget_used(b));
	st = frame_feed(f2, big, 600, collect, &g);
	CHECK(st == FRAME_OVER_BUDGET && frame_pending(f2) == 0 &&
	    frame_budget_used(b) <= 1000, "a second one that does not fit is "
	    "refused and holds nothing");
	st = frame_feed(f2, "ok\n", 3, collect, &g);
	CHECK(st == FRAME_OVER_BUDGET && g.n == 0, "a refused framer accepts "
	    "nothing more");
	st = frame_feed(f1, "\n", 1, collect, &g);
	CHECK(st == FRAME_OK && g.n == 1 && frame_budget_used(b) == 0,
	    "a completed line gives its whole buffer back at once");
	CHECK(frame_budget_peak(b) >= 600 && frame_budget_peak(b) <= 1000,
	    "the peak is remembered (%zu)", frame_budget_peak(b));
	CHECK(frame_lines(f1) == 1 && frame_lines(f2) == 0, "lines counted");
	frame_free(f2);

	/* No room to double: exactly what the line needs, then refusal. */
	frame_budget_set_limit(b, 700);
	st = frame_feed(f1, big, 300, collect, &g);
	CHECK(st == FRAME_OK && frame_budget_used(b) == 512, "300 bytes take "
	    "a 512-byte buffer");
	st = frame_feed(f1, big, 300, collect, &g);
	CHECK(st == FRAME_OK && frame_budget_used(b) == 600, "600 bytes fit "
	    "exactly where doubling would not (%zu)", frame_budget_used(b));
	st = frame_feed(f1, big, 101, collect, &g);
	CHECK(st == FRAME_OVER_BUDGET && frame_budget_used(b) == 0,
	    "past the budget: refused, and its bytes go back");
	frame_free(f1);

	/* A lowered limit keeps what is held and refuses growth. */
	frame_budget_set_limit(b, 1000);
	f1 = frame_create(1000);
	frame_set_budget(f1, b);
	st = frame_feed(f1, big, 200, collect, &g);
	frame_budget_set_limit(b, 100);
	CHECK(st == FRAME_OK && frame_budget_used(b) == 256, "held under the "
	    "old limit");
	st = frame_feed(f1, big, 10, collect, &g);
	CHECK(st == FRAME_OK && frame_budget_used(b) == 256, "growth inside "
	    "its buffer needs nothing more");
	st = frame_feed(f1, big, 100, collect, &g);
	CHECK(st == FRAME_OVER_BUDGET && frame_budget_used(b) == 0, "growth "
	    "past a lowered limit refused");
	frame_free(f1);

	/* Dropping and freeing give the bytes back; so does a too-long line. */
	frame_budget_set_limit(b, 1000);
	f1 = frame_create(1000);
	f2 = frame_create(100);
	frame_set_budget(f1, b);
	frame_set_budget(f2, b);
	frame_feed(f1, big, 500, collect, &g);
	frame_feed(f2, big, 50, collect, &g);
	CHECK(frame_budget_used(b) == 512 + 101, "two partial lines held (the second one capped at its maximum + 1)");
	frame_drop(f1);
	CHECK(frame_budget_used(b) == 101 && frame_pending(f1) == 0,
	    "frame_drop gives the buffer back");
	st = frame_feed(f2, big, 60, collect, &g);
	CHECK(st == FRAME_TOO_LARGE && frame_budget_used(b) == 0,
	    "a line over the maximum gives its buffer back");
	frame_feed(f1, big, 10, collect, &g);
	frame_free(f1);
	frame_free(f2);
	CHECK(frame_budget_used(b) == 0, "frame_free gives the buffer back");

	/* Long lines grow by steps, not by doubling. */
	frame_budget_set_limit(b, 1 << 20);
	f1 = frame_create(1 << 20);
	frame_set_budget(f1, b);
	frame_feed(f1, big, 65536, collect, &g);
	frame_feed(f1, big, 300000 - 65536, collect, &g);
	CHECK(frame_budget_used(b) == 320 * 1024 && frame_pending(f1) == 300000,
	    "300000 bytes take 320 KiB (%zu)", frame_budget_used(b));
	frame_feed(f1, "\n", 1, collect, &g);
	CHECK(frame_budget_used(b) == 0, "and give all of it back");
	frame_free(f1);

	/* Without a budget nothing is counted. */
	f3 = frame_create(1000);
	st = frame_feed(f3, big, 900, collect, &g);
	CHECK(st == FRAME_OK && frame_budget_used(b) == 0, "a framer without "
	    "a budget is not counted");
	frame_free(f3);
	frame_budget_free(b);
	free(big);
}

int
main(void)
{
	struct frame	*f;
	struct got	 g;
	const char	*all = "{\"a\":1}\n{\"b\":2}\n";
	char		*big;
	size_t		 i;
	enum frame_status st;

	/* Two lines in one read. */
	memset(&g, 0, sizeof g);
	f = frame_create(1024);
	st = frame_feed(f, all, strlen(all), collect, &g);
	CHECK(st == FRAME_OK && g.n == 2, "joined lines give two lines");
	CHECK(strcmp(g.lines[0], "{\"a\":1}") == 0 &&
	    strcmp(g.lines[1], "{\"b\":2}") == 0, "lines have no newline");
	CHECK(frame_pending(f) == 0, "nothing left pending");
	frame_free(f);

	/* The same bytes one at a time. */
	memset(&g, 0, sizeof g);
	f = frame_create(1024);
	for (i = 0; i < strlen(all); i++)
		st = frame_feed(f, all + i, 1, collect, &g);
	CHECK(st == FRAME_OK && g.n == 2 &&
	    strcmp(g.lines[1], "{\"b\":2}") == 0, "byte-by-byte reads give the same lines");
	frame_free(f);

	/* A line split at every position. */
	for (i = 1; i < 7; i++) {
		memset(&g, 0, sizeof g);
		f = frame_create(1024);
		frame_feed(f, all, i, collect, &g);
		CHECK(g.n == 0 && frame_pending(f) == i, "split at %zu: partial held", i);
		frame_feed(f, all + i, strlen(all) - i, collect, &g);
		CHECK(g.n == 2 && strcmp(g.lines[0], "{\"a\":1}") == 0,
		    "split at %zu: completed", i);
		frame_free(f);
	}

	/* Empty lines and CRLF. */
	memset(&g, 0, sizeof g);
	f = frame_create(1024);
	frame_feed(f, "\n\n\r\nx\r\n\ny\n", 11, collect, &g);
	CHECK(g.n == 2 && strcmp(g.lines[0], "x") == 0 &&
	    strcmp(g.lines[1], "y") == 0, "empty lines skipped, CR stripped");
	frame_free(f);

	/* NUL bytes are passed through with their length. */
	memset(&g, 0, sizeof g);
	f = frame_create(1024);
	frame_feed(f, "a\0b\n", 4, collect, &g);
	CHECK(g.n == 1 && g.lens[0] == 3 && g.lines[0][1] == '\0',
	    "NUL kept inside the line, length exact");
	frame_free(f);

	/* Exactly the maximum is fine; one more is too large. */
	big = xmalloc(2000);
	memset(big, 'x', 2000);
	big[16] = '\n';
	memset(&g, 0, sizeof g);
	f = frame_create(16);
	st = frame_feed(f, big, 17, collect, &g);
	CHECK(st == FRAME_OK && g.n == 1 && g.lens[0] == 16, "line of max bytes accepted");
	frame_free(f);
	big[16] = 'x';
	big[17] = '\n';
	memset(&g, 0, sizeof g);
	f = frame_create(16);
	st = frame_feed(f, big, 18, collect, &g);
	CHECK(st == FRAME_TOO_LARGE && g.n == 0, "max+1 bytes is too large");
	st = frame_feed(f, "ok\n", 3, collect, &g);
	CHECK(st == FRAME_TOO_LARGE && g.n == 0, "a broken framer accepts nothing more");
	frame_free(f);

	/* Too large detected before the newline arrives, across reads. */
	memset(big, 'x', 2000);
	memset(&g, 0, sizeof g);
	f = frame_create(100);
	st = frame_feed(f, big, 60, collect, &g);
	CHECK(st == FRAME_OK && frame_pending(f) == 60, "partial under the limit held");
	st = frame_feed(f, big, 60, collect, &g);
	CHECK(st == FRAME_TOO_LARGE && frame_pending(f) == 0,
	    "partial over the limit refused without buffering the rest");
	frame_free(f);

	/* A huge read without newline is refused at once. */
	memset(&g, 0, sizeof g);
	f = frame_create(100);
	st = frame_feed(f, big, 2000, collect, &g);
	CHECK(st == FRAME_TOO_LARGE && frame_pending(f) == 0, "2000 bytes, no newline: too large");
	frame_free(f);
	free(big);

	/* The callback can stop the feed. */
	memset(&g, 0, sizeof g);
	g.stop_after = 1;
	f = frame_create(1024);
	st = frame_feed(f, all, strlen(all), collect, &g);
	CHECK(st == FRAME_STOPPED && g.n == 1, "callback stop honoured");
	CHECK(frame_backlog(f) == strlen(all) - 8, "unscanned bytes kept as backlog");
	st = frame_feed(f, "{\"c\"", 4, collect, &g);
	CHECK(st == FRAME_STOPPED && g.n == 2 && strcmp(g.lines[1], "{\"b\":2}") == 0,
	    "backlog scanned before new bytes, in order");
	g.stop_after = 0;
	st = frame_feed(f, ":3}\n", 4, collect, &g);
	CHECK(st == FRAME_OK && g.n == 3 && strcmp(g.lines[2], "{\"c\":3}") == 0 &&
	    frame_backlog(f) == 0, "resumed: the held partial line completes");
	frame_free(f);

	/* Resuming with no new bytes. */
	memset(&g, 0, sizeof g);
	g.stop_after = 1;
	f = frame_create(1024);
	frame_feed(f, all, strlen(all), collect, &g);
	g.stop_after = 0;
	st = frame_feed(f, NULL, 0, collect, &g);
	CHECK(st == FRAME_OK && g.n == 2 && frame_backlog(f) == 0,
	    "frame_feed(NULL, 0) resumes the backlog");
	frame_free(f);

	/* A lowered maximum applies to the next line. */
	memset(&g, 0, sizeof g);
	f = frame_create(1024);
	frame_set_max(f, 4);
	st = frame_feed(f, "12345\n", 6, collect, &g);
	CHECK(st == FRAME_TOO_LARGE && frame_max(f) == 4, "frame_set_max applies");
	frame_free(f);

	check_budget();
	return unit_done();
}
