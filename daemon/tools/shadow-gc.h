/*
 * Garbage collection of the shadow stores (tools/shadow.h): one run walks
 * every store in STATE/shadow on a thread of its own, removes the loose
 * objects nobody needs, and measures what the stores hold on disk.
 *
 * What is kept: every object id the caller names (shadow_gc_keep: the
 * contents rewind remembers, the "before" of calls in flight), every
 * object of the trees it names (shadow_gc_keep_tree: a command's snapshot
 * in flight, walked on the thread), every entry of each store's index
 * and every tree its cache names (what the next snapshot of the work
 * tree builds on, trusting they are stored), and every object
 * written or looked for after the run began minus a grace of two seconds
 * (libgit2 touches an object it finds already stored, so whatever the
 * loop stores while the run goes on is seen as new). An object is first
 * renamed aside, its time checked again, and only then removed, so a
 * store that touched it in between gets it back; an object left aside by
 * a crash is put back by the next run.
 *
 * The caller builds the run on the loop (shadow_gc_create, keep, start),
 * polls shadow_gc_done from the loop, reads the figures, and frees it.
 * Nothing of the run is touched by the loop while it is running.
 */
#ifndef GBRD_SHADOW_GC_H
#define GBRD_SHADOW_GC_H

#include <stdint.h>

struct shadow_gc;

/* What a finished run found. */
struct shadow_gc_stats {
	uint64_t	 bytes;		/* every store on disk, after the run */
	uint64_t	 objects;	/* loose objects left */
	uint64_t	 removed;	/* objects removed */
	uint64_t	 removed_bytes;
	uint64_t	 stores;
	int64_t		 ms;		/* how long the run took */
};

/* A new run, not started. */
struct shadow_gc *shadow_gc_create(void);
/* Keeps an object (40 hex digits; anything else is ignored). */
void		 shadow_gc_keep(struct shadow_gc *, const char *oid);
/* Keeps a tree and everything it reaches. */
void		 shadow_gc_keep_tree(struct shadow_gc *, const char *oid);
/*
 * Starts the run on its thread over state_dir/shadow. Returns 0, or -1
 * with *cause (the run can then be freed).
 */
int		 shadow_gc_start(struct shadow_gc *, const char *state_dir,
		    char **cause);
/* 1 once a started run is over. */
int		 shadow_gc_done(struct shadow_gc *);
/* A finished run's figures; its error (borrowed), or NULL. */
const char	*shadow_gc_result(struct shadow_gc *,
		    struct shadow_gc_stats *);
/*
 * Bytes on disk of an object named by shadow_gc_keep, as the finished run
 * found it (0: not found, or packed).
 */
uint64_t	 shadow_gc_size(struct shadow_gc *, const char *oid);
/* Frees a run that was never started or is done. */
void		 shadow_gc_free(struct shadow_gc *);

#endif
