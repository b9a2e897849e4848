/*
 * The event ring: the most recent announced events of one session, each
 * as the exact line clients got, so a client that attaches again catches
 * up from memory instead of the disk log. A ring holds consecutive seqs
 * (the oldest is dropped first) within two bounds of its own, events and
 * bytes; every ring of a pool also shares a bound on bytes, and when the
 * pool is over it the rings pushed to least recently lose their oldest
 * events first. The newest event of the ring being pushed to always
 * stays, whatever the bounds.
 *
 * The ring owns its lines (ring_push takes them). It knows nothing of
 * sessions, clients or the disk log: the session module says which
 * seq each line is and what the bounds are (they come from the config,
 * which may change between pushes).
 */
#ifndef GBRD_RING_H
#define GBRD_RING_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

/* One event kept: its line, encoded once. */
struct ring_event {
	char	*line;
	size_t	 len;
};

/* A ring; zeroed, it is empty and holds no memory. */
struct ring {
	struct ring_event	*ev;		/* circular */
	size_t			 cap;
	size_t			 head;		/* index of the oldest */
	size_t			 n;
	uint64_t		 first;		/* seq of ev[head] */
	uint64_t		 bytes;
	int			 in_lru;	/* in its pool's list: n > 0 */
	TAILQ_ENTRY(ring)	 lru_entry;
};
TAILQ_HEAD(ring_lru, ring);

/* The rings that share a bound on bytes. */
struct ring_pool {
	struct ring_lru	 lru;		/* least recently pushed to first */
	uint64_t	 bytes;		/* of every ring's lines */
};
#define RING_POOL_INITIALIZER(p)	{ TAILQ_HEAD_INITIALIZER((p).lru), 0 }

struct ring_limits {
	size_t		 events;	/* per ring */
	uint64_t	 bytes;		/* per ring */
	uint64_t	 pool_bytes;	/* of every ring of the pool */
};

/*
 * Keeps the line (taken) of event seq, which must follow the newest one
 * held (any seq when the ring is empty); then drops old events until the
 * bounds hold again, or only this one is left.
 */
void		 ring_push(struct ring_pool *, struct ring *, uint64_t seq,
		    char *line, size_t len, const struct ring_limits *);
/* The event seq (borrowed, valid until the next push), or NULL if not held. */
const struct ring_event *ring_get(const struct ring *, uint64_t seq);
/* How many events the ring holds. */
size_t		 ring_count(const struct ring *);
/* The oldest seq held; none: next, the seq the next event will have. */
uint64_t	 ring_first(const struct ring *, uint64_t next);
/* Drops every event and frees the ring's memory; it is empty again. */
void		 ring_release(struct ring_pool *, struct ring *);

#endif
