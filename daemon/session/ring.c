/*
 * The event ring of ring.h: a circular array per ring that doubles when
 * full, and the pool's list of rings in the order they were last pushed
 * to, which says whose events go first when the pool is over its bytes.
 * It owns the lines it holds; nothing here knows what an event means.
 */
#include "gbr-config.h"

#include <stdlib.h>

#include "ring.h"
#include "xmalloc.h"

#define RING_FIRST_CAP	4

/* Drops the oldest event of a ring; an emptied ring leaves the pool's list. */
static void
ring_drop(struct ring_pool *pool, struct ring *r)
{
	struct ring_event	*ev = &r->ev[r->head];

	r->bytes -= ev->len;
	pool->bytes -= ev->len;
	free(ev->line);
	ev->line = NULL;
	r->head = (r->head + 1) % r->cap;
	r->n--;
	r->first++;
	if (r->n == 0 && r->in_lru) {
		TAILQ_REMOVE(&pool->lru, r, lru_entry);
		r->in_lru = 0;
	}
}

/* The oldest seq held, or next when there is none. */
uint64_t
ring_first(const struct ring *r, uint64_t next)
{
	return r->n > 0 ? r->first : next;
}

/* The number of events held. */
size_t
ring_count(const struct ring *r)
{
	return r->n;
}

/* Returns the event of a seq the ring holds. */
const struct ring_event *
ring_get(const struct ring *r, uint64_t seq)
{
	if (r->n == 0 || seq < r->first || seq - r->first >= r->n)
		return NULL;
	return &r->ev[(r->head + (size_t)(seq - r->first)) % r->cap];
}

/*
 * Keeps an event (takes the line). The ring's own bounds drop its oldest
 * events; the pool's bound drops those of the least recently pushed rings
 * first; the newest event of this ring always stays.
 */
void
ring_push(struct ring_pool *pool, struct ring *r, uint64_t seq, char *line,
    size_t len, const struct ring_limits *lim)
{
	struct ring_event	*nr;
	struct ring		*h;
	size_t			 i, ncap;

	while (r->n > 0 && r->n >= lim->events)
		ring_drop(pool, r);
	if (r->n == 0)
		r->first = seq;
	if (r->n == r->cap) {
		/* Unrolled into the new array oldest first, so head is 0. */
		ncap = r->cap == 0 ? RING_FIRST_CAP : r->cap * 2;
		nr = xcalloc(ncap, sizeof *nr);
		for (i = 0; i < r->n; i++)
			nr[i] = r->ev[(r->head + i) % r->cap];
		free(r->ev);
		r->ev = nr;
		r->cap = ncap;
		r->head = 0;
	}
	nr = &r->ev[(r->head + r->n) % r->cap];
	nr->line = line;
	nr->len = len;
	r->n++;
	r->bytes += len;
	pool->bytes += len;
	while (r->n > 1 && r->bytes > lim->bytes)
		ring_drop(pool, r);
	if (r->in_lru)
		TAILQ_REMOVE(&pool->lru, r, lru_entry);
	TAILQ_INSERT_TAIL(&pool->lru, r, lru_entry);
	r->in_lru = 1;
	while (pool->bytes > lim->pool_bytes &&
	    (h = TAILQ_FIRST(&pool->lru)) != NULL) {
		if (h == r && r->n <= 1)
			break;
		ring_drop(pool, h);
	}
}

/* Drops everything a ring holds and frees its array. */
void
ring_release(struct ring_pool *pool, struct ring *r)
{
	while (r->n > 0)
		ring_drop(pool, r);
	free(r->ev);
	r->ev = NULL;
	r->cap = r->head = 0;
}
