/*
 * Unit tests for daemon/session/ring.c, the recent events a client
 * catches up from: seqs kept in order across the wrap-around of the
 * circular array and its growth while wrapped, the per-ring bounds on
 * events and bytes (the newest event always stays), the pool's bound on
 * bytes that takes from the ring pushed to least recently first, a ring
 * emptied by the pool, lookups outside what is held, and release. The
 * pool's byte count is checked against the lines actually held after
 * every step.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "unit.h"
#include "xmalloc.h"

static struct ring_pool	pool = RING_POOL_INITIALIZER(pool);

/* A line "<seq>:" padded with 'x' to len bytes (len >= 24). */
static char *
line_of(uint64_t seq, size_t len)
{
	char	*l = xmalloc(len + 1);
	int	 n;

	memset(l, 'x', len);
	n = snprintf(l, len + 1, "%llu:", (unsigned long long)seq);
	l[n] = 'x';
	l[len] = '\0';
	return l;
}

/* Pushes event seq with a line of len bytes. */
static void
push(struct ring *r, uint64_t seq, size_t len, const struct ring_limits *lim)
{
	ring_push(&pool, r, seq, line_of(seq, len), len, lim);
}

/* Tells whether r holds exactly seqs first..last, each with its own line. */
static int
holds(const struct ring *r, uint64_t first, uint64_t last)
{
	const struct ring_event	*ev;
	char			 want[32];
	uint64_t		 seq;
	uint64_t		 bytes = 0;

	if (ring_count(r) != last - first + 1 || ring_first(r, 0) != first ||
	    ring_get(r, first - 1) != NULL || ring_get(r, last + 1) != NULL)
		return 0;
	for (seq = first; seq <= last; seq++) {
		snprintf(want, sizeof want, "%llu:", (unsigned long long)seq);
		if ((ev = ring_get(r, seq)) == NULL ||
		    strncmp(ev->line, want, strlen(want)) != 0)
			return 0;
		bytes += ev->len;
	}
	return bytes == r->bytes;
}

/* Tells whether the pool's count is the sum of what its rings hold. */
static int
pool_ok(const struct ring *a, const struct ring *b)
{
	return pool.bytes == a->bytes + (b != NULL ? b->bytes : 0);
}

int
main(void)
{
	struct ring		 a, b;
	struct ring_limits	 lim = { 3, 1 << 20, 1 << 30 };
	uint64_t		 seq;
	int			 ok;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);

	CHECK(ring_count(&a) == 0 && ring_first(&a, 42) == 42 &&
	    ring_get(&a, 0) == NULL && ring_get(&a, 1) == NULL,
	    "an empty ring: nothing held, first is the next seq");

	/* Three events in four slots, then the bound of 3 slides them. */
	push(&a, 10, 30, &lim);
	push(&a, 11, 30, &lim);
	push(&a, 12, 30, &lim);
	CHECK(holds(&a, 10, 12) && a.cap == 4 && pool_ok(&a, NULL),
	    "three events: 10 to 12, in four slots");
	push(&a, 13, 30, &lim);
	push(&a, 14, 30, &lim);
	CHECK(holds(&a, 12, 14) && a.cap == 4 && a.head == 2 &&
	    pool_ok(&a, NULL),
	    "past the bound on events the oldest go: 12 to 14");
	CHECK(ring_get(&a, 14) == &a.ev[0],
	    "the newest event wrapped around to the first slot");

	/* Growing while wrapped must keep the order. */
	lim.events = 100;
	push(&a, 15, 30, &lim);
	push(&a, 16, 30, &lim);
	CHECK(holds(&a, 12, 16) && a.cap == 8 && a.head == 0 &&
	    pool_ok(&a, NULL),
	    "growing while wrapped keeps 12 to 16 in order");
	ok = 1;
	for (seq = 17; seq <= 80; seq++) {
		push(&a, seq, 30, &lim);
		if (!holds(&a, 12, seq))
			ok = 0;
	}
	CHECK(ok && a.cap == 128,
	    "every seq is found at each push while it grows");
	lim.events = 1;
	push(&a, 81, 30, &lim);
	CHECK(holds(&a, 81, 81) && pool_ok(&a, NULL),
	    "a bound lowered between pushes takes effect at the next one");
	lim.events = 0;
	push(&a, 82, 30, &lim);
	CHECK(holds(&a, 82, 82), "a bound of 0 events still keeps the newest");

	/* The bound on bytes per ring. */
	lim.events = 100;
	lim.bytes = 100;
	push(&a, 83, 40, &lim);
	CHECK(holds(&a, 82, 83) && a.bytes == 70, "70 bytes fit in 100");
	push(&a, 84, 40, &lim);
	CHECK(holds(&a, 83, 84) && a.bytes == 80,
	    "over 100 bytes the oldest go until it fits");
	push(&a, 85, 500, &lim);
	CHECK(holds(&a, 85, 85) && a.bytes == 500 && pool_ok(&a, NULL),
	    "an event over the bound alone stays, alone");
	push(&a, 86, 60, &lim);
	push(&a, 87, 40, &lim);
	CHECK(holds(&a, 86, 87) && a.bytes == 100,
	    "exactly the bound on bytes fits");
	push(&a, 88, 24, &lim);
	CHECK(holds(&a, 87, 88) && a.bytes == 64 && pool_ok(&a, NULL),
	    "a little over the bound drops the oldest");

	/* The pool: a was pushed to before b, so a loses first. */
	lim.bytes = 1 << 20;
	lim.pool_bytes = 200;
	ring_release(&pool, &a);
	CHECK(pool.bytes == 0 && ring_count(&a) == 0 && a.ev == NULL &&
	    !a.in_lru, "released: nothing held, nothing counted");
	push(&a, 1, 50, &lim);
	push(&a, 2, 50, &lim);
	push(&b, 1, 50, &lim);
	push(&b, 2, 50, &lim);
	CHECK(holds(&a, 1, 2) && holds(&b, 1, 2) && pool.bytes == 200,
	    "two rings at the pool's bound");
	push(&b, 3, 50, &lim);
	CHECK(holds(&a, 2, 2) && holds(&b, 1, 3) && pool_ok(&a, &b),
	    "over the pool's bound the least recent ring loses its oldest");
	push(&b, 4, 50, &lim);
	CHECK(ring_count(&a) == 0 && !a.in_lru && ring_first(&a, 3) == 3 &&
	    holds(&b, 1, 4) && pool_ok(&a, &b),
	    "a ring the pool empties leaves its list; first is the next seq");
	push(&b, 5, 50, &lim);
	CHECK(holds(&b, 2, 5) && pool.bytes == 200,
	    "with the other ring empty, the pushing one loses its own oldest");
	push(&a, 3, 50, &lim);
	CHECK(holds(&a, 3, 3) && holds(&b, 3, 5) && pool_ok(&a, &b),
	    "an emptied ring pushed to again is the newest: the other pays");
	push(&a, 4, 300, &lim);
	CHECK(holds(&a, 4, 4) && ring_count(&b) == 0 && !b.in_lru &&
	    pool.bytes == 300 && pool_ok(&a, &b),
	    "one event over the pool's bound empties the others and stays");
	lim.pool_bytes = 10;
	push(&a, 5, 40, &lim);
	CHECK(holds(&a, 5, 5) && pool.bytes == 40,
	    "a pool bound below one event still keeps the newest");
	push(&b, 6, 40, &lim);
	CHECK(ring_count(&a) == 0 && holds(&b, 6, 6) && pool.bytes == 40,
	    "and the ring pushed to keeps it, the other gives way");

	ring_release(&pool, &a);
	ring_release(&pool, &b);
	CHECK(pool.bytes == 0 && TAILQ_EMPTY(&pool.lru),
	    "every ring released: the pool is empty");
	ring_release(&pool, &a);
	CHECK(pool.bytes == 0 && ring_count(&a) == 0,
	    "releasing an empty ring again is harmless");
	lim.pool_bytes = 1 << 30;
	push(&a, 1000, 30, &lim);
	CHECK(holds(&a, 1000, 1000), "a released ring can be used again");
	ring_release(&pool, &a);
	return unit_done();
}
