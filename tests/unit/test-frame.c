/*
 * Unit tests for the line framer: split reads, joined lines, empty lines,
 * CRLF, NUL bytes, oversize lines (whole and split), and the stop request.
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

	return unit_done();
}
