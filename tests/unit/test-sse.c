/*
 * Unit tests for the server-sent events parser: framing (\n, \r\n, \r),
 * chunks split at every byte, multi-line data, comments, event names,
 * ids and retry, the bounds, and an unfinished event at the end.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"
#include "unit.h"

/* What the callback collected: "name|data" lines joined by \x1e. */
struct got {
	char	buf[65536];
	size_t	len;
	int	n;
	int	stop_at;	/* return -1 on this event (1-based), or 0 */
};

static int
collect(void *arg, const char *event, const char *data, size_t len)
{
	struct got	*g = arg;
	size_t		 el = strlen(event);

	if (g->len + el + len + 2 < sizeof g->buf) {
		memcpy(g->buf + g->len, event, el);
		g->len += el;
		g->buf[g->len++] = '|';
		memcpy(g->buf + g->len, data, len);
		g->len += len;
		g->buf[g->len++] = '\x1e';
		g->buf[g->len] = '\0';
	}
	g->n++;
	return g->stop_at == g->n ? -1 : 0;
}

/* Feeds text whole, then checks what came out. */
static int
whole(const char *in, const char *want, int nwant)
{
	struct sse	*s = sse_create(1024, 4096);
	struct got	 g;
	const char	*cause;
	int		 r;

	memset(&g, 0, sizeof g);
	r = sse_feed(s, in, strlen(in), collect, &g, &cause);
	sse_free(s);
	return r == 0 && g.n == nwant && strcmp(g.buf, want) == 0;
}

/* Feeds text in chunks of chunk bytes. */
static int
chunked(const char *in, size_t chunk, const char *want, int nwant)
{
	struct sse	*s = sse_create(1024, 4096);
	struct got	 g;
	const char	*cause;
	size_t		 off, n, len = strlen(in);
	int		 r = 0;

	memset(&g, 0, sizeof g);
	for (off = 0; off < len && r == 0; off += n) {
		n = len - off < chunk ? len - off : chunk;
		r = sse_feed(s, in + off, n, collect, &g, &cause);
	}
	sse_free(s);
	return r == 0 && g.n == nwant && strcmp(g.buf, want) == 0;
}

static uint32_t	chunk_seed;

/*
 * The chunk sizes: xorshift32, so that every system cuts the stream at
 * the same places (random(3) is not on Windows, and rand differs).
 */
static uint32_t
chunk_next(void)
{
	chunk_seed ^= chunk_seed << 13;
	chunk_seed ^= chunk_seed >> 17;
	chunk_seed ^= chunk_seed << 5;
	return chunk_seed;
}

int
main(void)
{
	struct sse	*s;
	struct got	 g, g2;
	const char	*cause;
	char		 big[8192], stream[32768];
	size_t		 i, off, n, len;
	int		 ok, r;

	CHECK(whole("data: hello\n\n", "message|hello\x1e", 1),
	    "one event, default name");
	CHECK(whole("data: a\r\n\r\ndata: b\r\r", "message|a\x1emessage|b\x1e", 2),
	    "\\r\\n and lone \\r end lines");
	CHECK(whole("event: content_block_delta\ndata: {\"x\":1}\n\n",
	    "content_block_delta|{\"x\":1}\x1e", 1), "named event");
	CHECK(whole("data: one\ndata: two\ndata:\n\n", "message|one\ntwo\n\x1e", 1),
	    "data lines joined with \\n (an empty one too)");
	CHECK(whole(": keep-alive\n\n:another\ndata: x\n\n", "message|x\x1e", 1),
	    "comments ignored, even between fields");
	CHECK(whole("event: ping\n\ndata: y\n\n", "message|y\x1e", 1),
	    "an event without data is not dispatched and its name is reset");
	CHECK(whole("data:  two spaces\n\n", "message| two spaces\x1e", 1),
	    "only one space after the colon is dropped");
	CHECK(whole("data\n\n", "message|\x1e", 1), "a field without a colon");
	CHECK(whole("foo: bar\ndata: z\nretry: x\n\n", "message|z\x1e", 1),
	    "unknown fields ignored");
	CHECK(whole("\xef\xbb\xbf" "data: bom\n\n", "message|bom\x1e", 1),
	    "a byte-order mark at the start is skipped");
	CHECK(chunked("\xef\xbb\xbf" "data: bom\n\n", 1, "message|bom\x1e", 1),
	    "a byte-order mark split across chunks is skipped");
	CHECK(whole("data: \xef\xbb\xbf\n\n", "message|\xef\xbb\xbf\x1e", 1),
	    "a BOM inside data is kept");

	/* Every split point, every line ending. */
	{
		const char *in = "event: a\r\ndata: x\r\ndata: y\r\n\r\n"
		    ": c\ndata: {\"k\":\"v\"}\n\nevent: b\rdata: z\r\r";
		const char *want = "a|x\ny\x1emessage|{\"k\":\"v\"}\x1e" "b|z\x1e";

		ok = 1;
		for (i = 1; i <= strlen(in); i++)
			ok &= chunked(in, i, want, 3);
		CHECK(ok, "the same events whatever the chunk size (1..%zu)",
		    strlen(in));
	}

	/* \r at the end of one chunk, \n at the start of the next: one line end. */
	s = sse_create(1024, 4096);
	memset(&g, 0, sizeof g);
	r = sse_feed(s, "data: a\r", 8, collect, &g, &cause);
	r |= sse_feed(s, "\n", 1, collect, &g, &cause);
	r |= sse_feed(s, "\r\n", 2, collect, &g, &cause);
	CHECK(r == 0 && g.n == 1 && strcmp(g.buf, "message|a\x1e") == 0,
	    "\\r|\\n split across chunks is one line end");
	sse_free(s);

	/* id and retry. */
	s = sse_create(1024, 4096);
	memset(&g, 0, sizeof g);
	r = sse_feed(s, "id: 42\nretry: 1500\ndata: q\n\n", 28, collect, &g,
	    &cause);
	CHECK(r == 0 && strcmp(sse_last_id(s), "42") == 0 &&
	    sse_retry_ms(s) == 1500 && sse_count(s) == 1, "id and retry kept");
	sse_free(s);

	/* Bounds. */
	s = sse_create(64, 128);
	memset(&g, 0, sizeof g);
	memset(big, 'x', 100);
	memcpy(big, "data: ", 6);
	big[100] = '\n';
	r = sse_feed(s, big, 101, collect, &g, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, "line") != NULL,
	    "a line over the limit is an error");
	r = sse_feed(s, "data: ok\n\n", 10, collect, &g, &cause);
	CHECK(r == -1 && g.n == 0, "and the parser stays stopped");
	sse_free(s);

	s = sse_create(64, 128);
	memset(&g, 0, sizeof g);
	for (i = 0, r = 0; i < 10 && r == 0; i++)
		r = sse_feed(s, "data: 0123456789012345678901234\n", 32, collect,
		    &g, &cause);
	CHECK(r == -1 && strstr(cause, "event") != NULL && g.n == 0,
	    "an event over the limit is an error, line by line");
	sse_free(s);

	/* A long line split in many chunks stays within the limit check. */
	s = sse_create(64, 4096);
	memset(&g, 0, sizeof g);
	for (i = 0, r = 0; i < 20 && r == 0; i++)
		r = sse_feed(s, "xxxxxxxx", 8, collect, &g, &cause);
	CHECK(r == -1 && i <= 9, "a line growing across chunks is stopped at "
	    "the limit (after %zu chunks)", i);
	sse_free(s);

	/* The callback stops the parser. */
	s = sse_create(1024, 4096);
	memset(&g, 0, sizeof g);
	g.stop_at = 1;
	r = sse_feed(s, "data: 1\n\ndata: 2\n\n", 18, collect, &g, &cause);
	CHECK(r == -1 && g.n == 1 && strcmp(cause, "stopped") == 0,
	    "a callback returning -1 stops the parser");
	sse_free(s);

	/* A cut stream. */
	s = sse_create(1024, 4096);
	memset(&g, 0, sizeof g);
	r = sse_feed(s, "data: 1\n\ndata: {\"par", 20, collect, &g, &cause);
	CHECK(r == 0 && g.n == 1 && sse_end(s) == 1,
	    "an unfinished event at the end is reported and dropped");
	CHECK(sse_end(s) == 0, "and reported once");
	sse_free(s);
	s = sse_create(1024, 4096);
	memset(&g, 0, sizeof g);
	sse_feed(s, "data: 1\n\n", 9, collect, &g, &cause);
	CHECK(sse_end(s) == 0, "a stream ending on a blank line is whole");
	sse_free(s);

	/* Many events, random chunking, compared with one whole feed. */
	chunk_seed = 7;
	len = 0;
	for (i = 0; i < 300 && len < sizeof stream - 200; i++) {
		n = snprintf(stream + len, sizeof stream - len,
		    "%sevent: e%zu%sdata: {\"i\":%zu}%sdata: more%s%s",
		    i % 5 == 0 ? ": comment\n" : "", i % 7,
		    i % 2 ? "\r\n" : "\n", i, i % 3 ? "\n" : "\r",
		    i % 2 ? "\r\n" : "\n", i % 2 ? "\r\n" : "\n");
		len += n;
	}
	s = sse_create(1024, 4096);
	memset(&g, 0, sizeof g);
	sse_feed(s, stream, len, collect, &g, &cause);
	sse_free(s);
	ok = 1;
	for (i = 0; i < 20; i++) {
		s = sse_create(1024, 4096);
		memset(&g2, 0, sizeof g2);
		for (off = 0; off < len; off += n) {
			n = 1 + (size_t)(chunk_next() % 97);
			if (n > len - off)
				n = len - off;
			sse_feed(s, stream + off, n, collect, &g2, &cause);
		}
		sse_free(s);
		ok &= g2.n == g.n && strcmp(g2.buf, g.buf) == 0;
	}
	CHECK(ok && g.n == 300, "random chunking gives the same %d events", g.n);

	return unit_done();
}
