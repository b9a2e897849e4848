/*
 * The shadow store: what rewind (session/rewind.c) needs to undo what the
 * agent changed in a workspace. One private git repository per workspace,
 * through libgit2, in gbrd's state folder (STATE/shadow/HASH.git, where
 * no command and no file tool can reach: sandbox_set_forbidden covers the
 * state folder). It is bare: the workspace is set as its work tree in
 * memory only, so nothing is ever written into the workspace and the
 * user's own .git (skipped by libgit2's work tree walk) is never read or
 * touched. Its objects are content-addressed, so every version of a file
 * is stored once.
 *
 * Two ways in: a file tool stores the bytes it saw before and after a
 * write (shadow_put); a command is bracketed by two snapshots of the
 * whole work tree (shadow_snapshot: git add -A into the shadow index, then
 * write-tree; incremental, since the index's stat cache skips the files
 * that did not change), whose difference (shadow_diff) is what it
 * changed. Snapshots honour the workspace's .gitignore files: what git
 * would ignore (build outputs, node_modules) is neither stored nor
 * rewound (doc/REWIND.md says why).
 *
 * Snapshots walk and hash the whole work tree (seconds for a big
 * workspace's first one), so gbrd takes them on a worker thread of their
 * own (shadow-work.c: shadow_snapshot_start); its results come back on the
 * loop. Each store has two libgit2 handles, since a git_repository must
 * not be used by two threads at once: the worker's (its index, the
 * snapshots and their diffs) and the loop's (shadow_put and shadow_get,
 * which are one small object each and stay on the loop, so a write_file's
 * bracket never waits behind a command's snapshot). Both write loose
 * objects into the same object folder, which git makes safe for
 * concurrent writers (each object is written aside, then renamed).
 *
 * Every object id is 40 hex digits; "" stands for "no file". Without
 * libgit2 (HAVE_LIBGIT2 unset: the Windows build) every call fails with a
 * cause saying so.
 */
#ifndef GBRD_SHADOW_H
#define GBRD_SHADOW_H

#include <stddef.h>
#include <jansson.h>

#define SHADOW_OID_LEN	40

struct event_base;
struct shadow;
struct shadow_job;

/*
 * The shadow store of a workspace (root: its real absolute path), opened
 * or created under state_dir/shadow. Stores stay open until
 * shadow_shutdown; borrowed. NULL with *cause.
 */
struct shadow	*shadow_open(const char *state_dir, const char *root,
		    char **cause);
/*
 * Closes every store (shutdown): first stops the worker (a snapshot it is
 * taking is cut short; every job not cancelled hears it failed).
 */
void		 shadow_shutdown(void);
/*
 * Sets libgit2 up (once) as the stores need it, so that another thread
 * may use it (shadow-gc.c). Returns 0 or -1 with *cause.
 */
int		 shadow_lib_init(char **cause);
/* 1 if the store holds an object (40 hex digits), else 0. */
int		 shadow_has(struct shadow *, const char *oid);
/* The store's folder, and the workspace it keeps (borrowed). */
const char	*shadow_gitdir(struct shadow *);
const char	*shadow_root(struct shadow *);
/* 1 if this build can snapshot commands (libgit2 is there). */
int		 shadow_available(void);
/* Stores len bytes; *oid gets their id. Returns 0 or -1 with *cause. */
int		 shadow_put(struct shadow *, const void *data, size_t len,
		    char oid[SHADOW_OID_LEN + 1], char **cause);
/* The id len bytes would have, without storing them. */
void		 shadow_hash(const void *data, size_t len,
		    char oid[SHADOW_OID_LEN + 1]);
/*
 * The bytes of an object, in a new buffer (*data, *len). Returns 0, or -1
 * with *cause (an object no longer stored says so).
 */
int		 shadow_get(struct shadow *, const char *oid, char **data,
		    size_t *len, char **cause);
/*
 * Snapshots the work tree: *tree gets the id of a tree holding every file
 * not ignored. Returns 0 or -1 with *cause. It uses the store's worker
 * handle: call it from the worker thread (or a program with no worker,
 * such as the benchmark), never while a job of shadow_snapshot_start may
 * run.
 */
int		 shadow_snapshot(struct shadow *, char tree[SHADOW_OID_LEN + 1],
		    char **cause);
/*
 * What changed between two trees: a new array of {path, before, after}
 * (ids, "" for no file) for the regular files; at most max entries (the
 * rest are counted in *skipped with the links and submodules). NULL with
 * *cause. The worker's handle, as shadow_snapshot.
 */
json_t		*shadow_diff(struct shadow *, const char *a, const char *b,
		    size_t max, size_t *skipped, char **cause);
/* Makes a snapshot in progress on another thread fail soon (shutdown). */
void		 shadow_abort(void);

/* shadow-work.c: snapshots off the loop. */

/* What a job found; borrowed for the callback's duration. */
struct shadow_result {
	int		 ok;
	char		 tree[SHADOW_OID_LEN + 1];	/* the snapshot */
	json_t		*changes;	/* with a base: shadow_diff's array */
	size_t		 skipped;	/* with a base: shadow_diff's count */
	const char	*cause;		/* !ok: why */
};
typedef void	(*shadow_done_cb)(void *arg, const struct shadow_result *);

/*
 * The loop the results come back on; before the first job. Learns whether
 * the kernel can confine snapshots (Landlock) and logs once if not.
 */
void		 shadow_work_init(struct event_base *);
/*
 * daemon.status's shadow.confinement, a new object: {active, abi,
 * why_not}: whether each snapshot runs on a thread the kernel confines to
 * its workspace (read) and store (read, write).
 */
json_t		*shadow_work_status(void);
/*
 * Snapshots sh's work tree on the worker thread, then, if base is not
 * NULL, diffs the tree base against it (at most max entries, as
 * shadow_diff). cb runs once, from the loop, with the outcome; jobs run
 * one at a time in the order they were started. Returns the job
 * (borrowed: valid until cb runs or shadow_job_cancel), or NULL with
 * *cause, and then cb never runs.
 */
struct shadow_job *shadow_snapshot_start(struct shadow *, const char *base,
		    size_t max, shadow_done_cb cb, void *arg, char **cause);
/*
 * cb will not run. A job still queued is dropped; one the worker is
 * taking finishes there (a snapshot cannot be stopped halfway without
 * wasting it: the next one starts from it) and its result is dropped.
 */
void		 shadow_job_cancel(struct shadow_job *);
/* Stops the worker: shadow_shutdown's first step. */
void		 shadow_work_stop(void);
/*
 * The lock a command's snapshot holds (on the worker) and a collection
 * holds while it marks and sweeps a store (shadow-gc.c): never on the loop
 * but in the inline fallback.
 */
void		 shadow_store_lock(void);
void		 shadow_store_unlock(void);
#endif
