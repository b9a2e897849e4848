/*
 * The sparse log index of logindex.h: an array of log seqs that grows by
 * doubling up to LOGINDEX_MAX, then thins itself out. It owns only that
 * array.
 */
#include "gbr-config.h"

#include <stdlib.h>

#include "logindex.h"
#include "xmalloc.h"

/* Notes an event's log position if it is the next one on the stride. */
void
logindex_note(struct logindex *x, uint64_t seq, uint64_t lseq)
{
	uint32_t	i;

	if (x->n == 0) {
		x->base = seq;
		x->stride = LOGINDEX_STRIDE;
	} else if (seq < x->base || (seq - x->base) % x->stride != 0 ||
	    (seq - x->base) / x->stride != x->n)
		return;
	if (x->n == x->cap) {
		if (x->cap >= LOGINDEX_MAX) {
			/* seq - base is n * stride, so it stays a position. */
			for (i = 0; i < x->n / 2; i++)
				x->pos[i] = x->pos[2 * i];
			x->n /= 2;
			x->stride *= 2;
		} else {
			x->cap = x->cap == 0 ? 2 : x->cap * 2;
			x->pos = xreallocarray(x->pos, x->cap, sizeof *x->pos);
		}
	}
	x->pos[x->n++] = lseq;
}

/* The log seq to read after to meet event seq. */
uint64_t
logindex_find(const struct logindex *x, uint64_t seq)
{
	uint64_t	k;

	if (x->n == 0 || seq < x->base)
		return 0;
	k = (seq - x->base) / x->stride;
	if (k >= x->n)
		k = x->n - 1;
	return x->pos[k] - 1;
}

/* The number of positions. */
uint32_t
logindex_count(const struct logindex *x)
{
	return x->n;
}

/* The index for a snapshot (new reference). */
json_t *
logindex_json(const struct logindex *x)
{
	json_t		*seqs = json_array();
	uint32_t	 i;

	for (i = 0; i < x->n; i++)
		json_array_append_new(seqs,
		    json_integer((json_int_t)x->pos[i]));
	return json_pack("{s:I, s:I, s:o}", "base", (json_int_t)x->base,
	    "stride", (json_int_t)x->stride, "seqs", seqs);
}

/*
 * Takes an index back from a snapshot: the stride a power of two from
 * LOGINDEX_STRIDE on, 1 to LOGINDEX_MAX positions that increase, the last
 * one's event no later than last_seq.
 */
int
logindex_restore(struct logindex *x, json_t *v, uint64_t last_seq)
{
	json_t		*seqs, *e;
	json_int_t	 base, stride;
	uint64_t	 prev = 0;
	size_t		 i, n;

	logindex_release(x);
	if (json_unpack(v, "{s:I, s:I, s:o}", "base", &base, "stride", &stride,
	    "seqs", &seqs) != 0 || !json_is_array(seqs) || base < 1 ||
	    stride < LOGINDEX_STRIDE || stride > ((json_int_t)1 << 40) ||
	    (stride & (stride - 1)) != 0 ||
	    (n = json_array_size(seqs)) == 0 || n > LOGINDEX_MAX ||
	    (uint64_t)base + (n - 1) * (uint64_t)stride > last_seq)
		return -1;
	for (x->cap = 2; x->cap < n; x->cap *= 2)
		;
	x->pos = xreallocarray(NULL, x->cap, sizeof *x->pos);
	json_array_foreach(seqs, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < 1 ||
		    (uint64_t)json_integer_value(e) <= prev) {
			logindex_release(x);
			return -1;
		}
		x->pos[i] = prev = (uint64_t)json_integer_value(e);
	}
	x->n = (uint32_t)n;
	x->base = (uint64_t)base;
	x->stride = (uint64_t)stride;
	return 0;
}

/* Frees the positions. */
void
logindex_release(struct logindex *x)
{
	free(x->pos);
	x->pos = NULL;
	x->n = x->cap = 0;
}
