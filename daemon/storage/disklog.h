/*
 * The disk log: a segmented, append-only, checksummed record of every state
 * change of the daemon. A state change is appended here before any client
 * hears of it, and the daemon's state after a crash is whatever replaying
 * this log gives (DESIGN.md section 5).
 *
 * Modules that own durable state (sessions, approvals, environments) each
 * register a struct disklog_module before disklog_open: at open, the newest
 * snapshot's section for the module is passed to restore(), then every
 * record after the snapshot whose type starts with "<name>." is passed to
 * replay(), in order. When the log is over its disk budget it asks every
 * module for snapshot() and writes a snapshot before dropping old segments.
 *
 * Callbacks run on the event loop thread. If disklog_append returns 0 the
 * callback never runs (libuv's rule).
 *
 * Threads: a writer thread does every write(2) and fdatasync(2) (group
 * commit: one fsync covers everything queued since the last one) and a
 * reader thread serves disklog_read from the files, so the loop never waits
 * on the disk. Their results come back through events on the loop's base,
 * which must have been created after evthread_use_pthreads().
 *
 * Sequence numbers are global, start at 1 and have no holes in the log.
 * After a storage failure the records that failed are cut off the file and
 * their numbers are given out again, so a number never names two records
 * that both survive.
 *
 * Modules' duties: restore() is called only when the snapshot has a section
 * for the module; snapshot() must reflect every record appended so far
 * (including those still in flight); modules must not append during
 * restore() or replay().
 */
#ifndef GBRD_DISKLOG_H
#define GBRD_DISKLOG_H

#include <stdint.h>
#include <jansson.h>

struct event_base;

struct disklog_opts {
	uint64_t	segment_bytes;	/* a segment is closed at this size */
	uint64_t	max_bytes;	/* disk budget for all segments */
	uint64_t	snapshot_bytes;	/* a snapshot after this much is logged; 0 */
	int		fsync;		/* durable records are fdatasync'ed */
	unsigned	commit_delay_us; /* extra wait to gather a group commit */
	int		repair;		/* gbrd --repair: cut at the last good record */
	int		chain;		/* hash-chain the records (DISKLOG.md) */
	unsigned	chain_every;	/* a log.chain head every N records */
	const char	*signing_key;	/* Ed25519 seed file (borrowed at
					   open), or NULL: heads unsigned */
};

struct disklog_module {
	const char	*name;		/* snapshot section; records "<name>.*" */
	/* This module's live state for a snapshot (new reference). */
	json_t		*(*snapshot)(void);
	/* State from the newest snapshot (borrowed). Returns 0 or -1. */
	int		 (*restore)(json_t *state);
	/* One record after the snapshot (payload borrowed). Returns 0 or -1. */
	int		 (*replay)(uint64_t seq, int64_t ts_ms, const char *type,
			    json_t *payload);
	/*
	 * Optional: the snapshot snapshot() was asked for at seq is written
	 * (error 0), or failed or was cancelled (an errno value); side files
	 * it named hold their new bytes only if error is 0.
	 */
	void		 (*snapshot_done)(uint64_t seq, int error);
};

/*
 * Called when a record is written (non-durable) or fsynced (durable).
 * error is 0 or an errno value (the record is then not durable and the
 * request that depends on it must fail with storage_error).
 */
typedef void (*disklog_done_cb)(void *arg, int error, uint64_t seq);

/*
 * A page of records read from the files: records is an array of
 * {seq, ts_ms, type, data} (borrowed for the call); first_seq is the oldest
 * seq the log still has, gap says that records after after_seq were already
 * dropped (covered by a snapshot), more that later records exist.
 */
struct disklog_page {
	json_t		*records;
	uint64_t	 first_seq;
	uint64_t	 last_seq;	/* the log's last done seq when read */
	int		 gap;
	int		 more;
};
typedef void (*disklog_read_cb)(void *arg, int error,
		    const struct disklog_page *);

/*
 * Called on the loop thread, in seq order, for each record appended while
 * the watch was set, once it is done; type and data are borrowed. After
 * each round it is called once more with type NULL and seq = the last done
 * seq: records done that were not handed over by value (appended before the
 * watch was set) must be read with disklog_read.
 */
typedef void (*disklog_watch_cb)(void *arg, uint64_t seq, int64_t ts_ms,
		    const char *type, size_t type_len, const char *data,
		    size_t data_len);

/* Registers a module; before disklog_open. The struct is borrowed forever. */
void		 disklog_register(const struct disklog_module *);
/*
 * Opens the log in dir/log (dir is the state folder), replays it into the registered modules, and starts
 * the writer. Returns -1 and sets *cause if the log cannot be used (for
 * corruption before the tail, the cause names the file, the offset and the
 * repair command).
 */
int		 disklog_open(struct event_base *, const char *dir,
		    const struct disklog_opts *, char **cause);
/* Flushes, fsyncs, marks a clean shutdown and closes. */
void		 disklog_close(void);
/* Applies changed options from a reloaded config. */
void		 disklog_reconfigure(const struct disklog_opts *);

/*
 * Appends a record of type (e.g. "session.message") with a JSON payload
 * (borrowed; encoded at once). Returns the record's global sequence number,
 * or 0 if the log cannot take it (storage failed or closed); then cb never
 * runs. cb may be NULL.
 */
uint64_t	 disklog_append(const char *type, const json_t *payload,
		    int durable, disklog_done_cb cb, void *arg);

/*
 * disklog_append with a smaller limit on the payload's encoded size: over
 * it, returns 0 with EMSGSIZE (the payload is encoded once, not measured
 * first).
 */
uint64_t	 disklog_append_bounded(const char *type, const json_t *payload,
		    int durable, size_t max_data, disklog_done_cb cb, void *arg);

/*
 * The compact JSON of the last record's payload, as the log holds it:
 * len bytes, not NUL-terminated, valid until the next append or close.
 * NULL if the last append failed.
 */
const char	*disklog_last_payload(size_t *len);
/*
 * Inside a module's replay(): the payload of the record being replayed as
 * the log holds it (the same compact JSON as disklog_last_payload gave
 * when it was appended), len bytes, not NUL-terminated. NULL elsewhere.
 */
const char	*disklog_replay_payload(size_t *len);

/* The last sequence number given out. */
uint64_t	 disklog_last_seq(void);
/* The oldest seq disklog_read can still give (a snapshot dropped the rest). */
uint64_t	 disklog_first_seq(void);
/* The last seq done: it and every record before it are written (or fsynced). */
uint64_t	 disklog_done_seq(void);
/*
 * Why the last disklog_append returned 0: ESHUTDOWN (closed or closing),
 * EAGAIN (too much queued), EMSGSIZE (record too large), EINVAL (bad type
 * or a payload jansson cannot encode).
 */
int		 disklog_error(void);
/* State for daemon.status (new reference). */
json_t		*disklog_status(void);
/*
 * The log's files on disk in bytes (segments and snapshot, as
 * daemon.status counts them); *max gets [log] max_bytes. 0 when closed.
 */
uint64_t	 disklog_disk_bytes(uint64_t *max);

/*
 * Reads up to limit records after after_seq, stopping past max_bytes of
 * data (at least one record is returned), from the reader thread; cb runs
 * on the loop. Only records done when called are read. Returns 0, or -1 if
 * the log is closed (then cb never runs).
 */
int		 disklog_read(uint64_t after_seq, unsigned limit, size_t max_bytes,
		    disklog_read_cb cb, void *arg);
/* Sets (or with NULL clears) the one watch callback. */
void		 disklog_watch(disklog_watch_cb cb, void *arg);
/* A piece of the bytes to write into a side file (borrowed). */
struct disklog_piece {
	const void	*data;
	size_t		 len;
};

/*
 * Inside a module's snapshot(): the snapshot keeps side file name (the
 * file STATE/log/NAME.side; name is [a-z0-9-], 1 to 64 characters), whose
 * first off bytes an earlier snapshot wrote, and the writer thread writes
 * the n pieces (the array is taken; NULL if n is 0) at off and cuts the
 * file there, fsynced, before the snapshot itself. What the pieces point
 * to is only borrowed: the module must keep it unchanged until its
 * snapshot_done() runs for this snapshot or disklog_close returns. Side
 * files a written snapshot does not name are removed. Large state
 * (sessions' histories) goes there so that a snapshot stays small and
 * nothing of that size is encoded or copied on the loop.
 */
void		 disklog_snapshot_file(const char *name, uint64_t off,
		    struct disklog_piece *pieces, size_t n);
/*
 * Reads len bytes at off of side file name into *buf (new, NUL-terminated),
 * on the calling thread. Returns 0, or -1 with errno (EIO if the file is
 * shorter).
 */
int		 disklog_file_read(const char *name, uint64_t off, size_t len,
		    char **buf);

/*
 * Writes a snapshot of every module now (the writer thread does the I/O),
 * after which segments it covers are dropped. Done by itself when the log
 * is over half its budget. Returns 0 if one was started.
 */
int		 disklog_snapshot(void);

#endif
