/*
 * libFuzzer target for the line framer (protocol/frame.c), the first code
 * that sees a client's bytes. The input chooses the maximum line length,
 * where the stream is split into reads, and whether the callback asks to
 * stop (the framer then keeps the rest as a backlog, resumed by the next
 * feed). The framer's output is checked against a plain model of the same
 * stream: split on '\n', drop one '\r' before it, skip empty lines, and
 * stop for good at the first line longer than the maximum. A stop may
 * delay lines but never lose or reorder them, so the model holds in every
 * mode. The framer takes its buffer from a budget that always has room for
 * one line of the maximum: the budget never refuses, holds at least the
 * pending bytes and nothing once none are pending, and all is given back.
 *
 * Input layout: byte 0 picks the maximum (1..64) and the mode; then each
 * chunk is one length byte (0..31) followed by that many data bytes.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* What the callback saw, all lines end to end, and how to answer. */
struct got {
	size_t		 max;
	char		*bytes;		/* every line, concatenated */
	size_t		*lens;
	size_t		 n;
	size_t		 used;
	size_t		 cap;		/* bytes and lens are sized for the input */
	int		 stop_every;	/* ask to stop after every Nth line, 0: never */
	int		 after_large;	/* set once TOO_LARGE was returned */
};

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what)
{
	fprintf(stderr, "fuzz-frame: %s\n", what);
	abort();
}

/* Framer callback: checks one line and records it. */
static int
collect(void *arg, const char *line, size_t len)
{
	struct got	*g = arg;

	if (g->after_large)
		fail("a line was handed out after TOO_LARGE");
	if (len == 0)
		fail("an empty line was handed out");
	if (len > g->max)
		fail("a line longer than the maximum was handed out");
	if (memchr(line, '\n', len) != NULL)
		fail("a line holds a newline");
	if (g->used + len > g->cap || g->n >= g->cap)
		fail("more line bytes than input bytes");
	memcpy(g->bytes + g->used, line, len);
	g->used += len;
	g->lens[g->n++] = len;
	return g->stop_every > 0 && g->n % (size_t)g->stop_every == 0;
}

/* The model: lines of the whole stream; returns 1 if one is too long. */
static int
model(const char *s, size_t len, size_t max, struct got *m)
{
	const char	*nl;
	size_t		 take, llen;

	while (len > 0) {
		nl = memchr(s, '\n', len);
		take = nl != NULL ? (size_t)(nl - s) : len;
		if (take > max)
			return 1;
		if (nl == NULL)
			return 0;
		llen = take;
		if (llen > 0 && s[llen - 1] == '\r')
			llen--;
		if (llen > 0) {
			memcpy(m->bytes + m->used, s, llen);
			m->used += llen;
			m->lens[m->n++] = llen;
		}
		s += take + 1;
		len -= take + 1;
	}
	return 0;
}

/* Allocates the line store for an input of size bytes. */
static void
got_init(struct got *g, size_t size)
{
	memset(g, 0, sizeof *g);
	g->cap = size + 1;
	if ((g->bytes = malloc(g->cap)) == NULL ||
	    (g->lens = calloc(g->cap, sizeof *g->lens)) == NULL)
		fail("out of memory");
}

/* Feeds one input as chunks and checks every invariant. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_budget	*b;
	struct frame		*f;
	struct got		 g, m;
	enum frame_status	 st;
	char			*stream;
	size_t			 off, clen, slen = 0, since_nl = 0, i;
	int			 model_large, stopping, budget;

	if (size < 1)
		return 0;
	got_init(&g, size);
	got_init(&m, size);
	if ((stream = malloc(size)) == NULL)
		fail("out of memory");
	g.max = (size_t)(data[0] & 0x3f) + 1;
	/* Bits 6-7: 0 or 1 never stop, 2 stops after each line, 3 every 3rd. */
	g.stop_every = (data[0] >> 6) == 2 ? 1 : (data[0] >> 6) == 3 ? 3 : 0;
	stopping = g.stop_every != 0;
	f = frame_create(g.max);
	b = frame_budget_create(g.max + 1);
	frame_set_budget(f, b);
	st = FRAME_OK;

	for (off = 1; off < size; off += clen) {
		clen = data[off++] & 0x1f;
		if (clen > size - off)
			clen = size - off;
		memcpy(stream + slen, data + off, clen);
		slen += clen;
		st = frame_feed(f, (const char *)data + off, clen, collect, &g);
		if (g.after_large && st != FRAME_TOO_LARGE)
			fail("a feed after TOO_LARGE did not say TOO_LARGE");
		if (st == FRAME_TOO_LARGE)
			g.after_large = 1;
		if (st == FRAME_STOPPED && !stopping)
			fail("STOPPED without the callback asking");
		if (frame_pending(f) > g.max)
			fail("pending bytes above the maximum");
		if (st == FRAME_OVER_BUDGET)
			fail("a budget with room for a whole line refused");
		if (frame_budget_used(b) < frame_pending(f) ||
		    frame_budget_used(b) > frame_budget_limit(b) ||
		    (frame_pending(f) == 0 && frame_budget_used(b) != 0))
			fail("the budget does not match the pending bytes");
		if (st == FRAME_TOO_LARGE && frame_pending(f) != 0)
			fail("a broken framer still holds bytes");
		if (st != FRAME_STOPPED && frame_backlog(f) != 0)
			fail("a backlog kept without a stop");
		if (frame_backlog(f) > slen)
			fail("a backlog larger than the bytes fed");
		for (i = 0; i < clen; i++)
			since_nl = data[off + i] == '\n' ? 0 : since_nl + 1;
		/* Once all is scanned, pending is the bytes after the last newline. */
		if (st == FRAME_OK && frame_pending(f) != since_nl)
			fail("pending differs from the bytes after the last newline");
	}

	/* Resume a backlog with empty feeds: each may stop again after a line. */
	for (budget = (int)size + 2; st == FRAME_STOPPED; budget--) {
		if (budget == 0)
			fail("resuming a backlog never ends");
		st = frame_feed(f, NULL, 0, collect, &g);
		if (st == FRAME_TOO_LARGE)
			g.after_large = 1;
		if (frame_pending(f) > g.max)
			fail("pending bytes above the maximum");
	}
	if (frame_backlog(f) != 0)
		fail("a backlog left after resuming");
	if (st == FRAME_OK && frame_pending(f) != since_nl)
		fail("pending differs from the bytes after the last newline");

	/* The output is exactly the model's, stops or not. */
	model_large = model(stream, slen, g.max, &m);
	if (model_large != g.after_large)
		fail("TOO_LARGE differs from the model");
	if (m.n != g.n || m.used != g.used ||
	    memcmp(m.lens, g.lens, g.n * sizeof *g.lens) != 0 ||
	    memcmp(m.bytes, g.bytes, g.used) != 0)
		fail("lines differ from the model");

	frame_free(f);
	if (frame_budget_used(b) != 0)
		fail("bytes still taken from the budget after frame_free");
	frame_budget_free(b);
	free(stream);
	free(g.bytes);
	free(g.lens);
	free(m.bytes);
	free(m.lens);
	return 0;
}
