/*
 * The log index: where one session's events are in the disk log, so a
 * catch-up can start reading near event N instead of at the log's first
 * record. It is sparse: the log seq of the first event noted and of every
 * LOGINDEX_STRIDE-th after it, LOGINDEX_MAX positions at most; when full,
 * every other position goes and the stride doubles, so a session with
 * millions of events holds 1 KiB of positions at most. Events are noted
 * in seq order (when their record is appended, and at replay); the index
 * is kept in the session's snapshot as JSON.
 *
 * It knows seqs only: nothing of sessions, records or reading the log.
 */
#ifndef GBRD_LOGINDEX_H
#define GBRD_LOGINDEX_H

#include <stdint.h>
#include <jansson.h>

#define LOGINDEX_STRIDE	64	/* the first stride */
#define LOGINDEX_MAX	128	/* positions at most (a power of two) */

/* An index; zeroed, it is empty and holds no memory. */
struct logindex {
	uint64_t	*pos;		/* log seq of event base + k * stride */
	uint64_t	 base;
	uint64_t	 stride;
	uint32_t	 n;
	uint32_t	 cap;
};

/*
 * Notes that event seq is record lseq (>= 1) of the log. The first note
 * sets the base; after that only the events on the stride are kept, and
 * notes must come in increasing seq and lseq.
 */
void		 logindex_note(struct logindex *, uint64_t seq, uint64_t lseq);
/*
 * The log seq to read after to meet event seq (or an earlier one): just
 * before the nearest position at or before it, else 0, the log's start.
 */
uint64_t	 logindex_find(const struct logindex *, uint64_t seq);
/* How many positions the index holds. */
uint32_t	 logindex_count(const struct logindex *);
/* The index as {base, stride, seqs} for a snapshot (new reference). */
json_t		*logindex_json(const struct logindex *);
/*
 * Takes an index back from logindex_json's form (borrowed) for a session
 * whose last event is last_seq. Returns 0; or -1 if it does not make
 * sense, and the index is left empty (older events are then looked for
 * from the log's start: slower, still exact).
 */
int		 logindex_restore(struct logindex *, json_t *,
		    uint64_t last_seq);
/* Frees the positions; the index is empty again. */
void		 logindex_release(struct logindex *);

#endif
