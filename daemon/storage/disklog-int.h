/*
 * What the files of the disk log share, private to daemon/storage/: the
 * records and batches in flight, the segment table, the one state struct
 * dl, and the functions one file of the log calls in another. The public
 * interface is disklog.h; nothing outside this folder includes this file,
 * and its only code is two tiny inline helpers every part uses.
 *
 * The files, one responsibility each (disklog.c describes the design):
 *   disklog.c           the state, open and close, the segment table, status
 *   disklog-append.c    the loop thread: appends, completions, failures
 *   disklog-write.c     the writer thread: batches, group commit, cuts
 *   disklog-snapshot.c  snapshots: taking, writing, dropping, restoring
 *   disklog-read.c      the reader thread: disklog_read from the files
 *   disklog-replay.c    the scan of the segments at open, the torn tail
 *   disklog-ahead.c     parse-ahead: a helper thread parsing the replay
 *   disklog-chain.c     the hash chain: hashed by the writer, its heads,
 *                       and a thread hashing ahead of the replay
 *   disklog-repair.c    --repair, and the refusal to start on damage
 *
 * Which thread may touch which fields of dl is written above each group.
 */
#ifndef GBRD_DISKLOG_INT_H
#define GBRD_DISKLOG_INT_H

#include <sys/queue.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <event2/util.h>

#include "clock.h"
#include "disklog.h"
#include "logchain.h"

struct event;
struct event_base;
struct logscan_dir;

/*
 * How records and snapshots are read back: as jansson wrote them, which
 * includes a NUL byte in a string as \u0000 (a command's output can hold
 * one). jansson refuses those by default.
 */
#define DL_JSON		JSON_ALLOW_NUL
/* Retry of a failed cut, and of a failed snapshot, while storage is failing. */
#define DL_RETRY_MS	1000
/* A snapshot failing again waits twice as long, up to this. */
#define DL_SNAP_BACKOFF_MAX_MS	(5 * 60 * 1000)
/* The suffix of side files (disklog_snapshot_file). */
#define DL_SIDE_SUFFIX	".side"
/* Modules that can register. */
#define DL_MAX_MODULES	32

/* A batch of encoded records, in seq order: the open one, or the writer's. */
struct dl_buf {
	unsigned char	*data;
	size_t		 len;
	size_t		 cap;
	uint64_t	 first_seq;
	uint64_t	 last_seq;
	unsigned	 epoch;
	int		 durable;
};

/* A sparse index entry: where in its segment a record starts. */
struct dl_idx {
	uint64_t	 seq;
	uint64_t	 off;
};

/* A segment in the table: its file, the records it holds, its index. */
struct dl_seg {
	char		*name;
	uint64_t	 first_seq;
	uint64_t	 last_seq;	/* first_seq - 1 while empty */
	uint64_t	 size;
	struct dl_idx	*idx;
	size_t		 nidx;
	size_t		 cidx;
	uint64_t	 idx_next;	/* offset from which the next entry is taken */
};

/* A record waiting for its callback (and the watch) on the loop thread. */
struct dl_pending {
	uint64_t	 seq;
	int64_t		 ts_ms;
	disklog_done_cb	 cb;
	void		*arg;
	char		*copy;		/* type then data, for the watch (if set) */
	size_t		 type_len;
	size_t		 data_len;
};

/* A side file a snapshot keeps, and what to write into it first. */
struct dl_side {
	char			*name;		/* NAME.side */
	uint64_t		 off;
	struct disklog_piece	*pieces;	/* borrowed bytes */
	size_t			 npieces;
	uint64_t		 len;		/* of all the pieces */
};

/* A snapshot the loop encoded, for the writer to write after its records. */
struct dl_snapjob {
	char		*body;
	size_t		 len;
	uint64_t	 seq;
	uint64_t	 chain_seq;	/* its head's: segments past it stay */
	unsigned	 epoch;
	uint64_t	 keep_bytes;	/* drop covered segments down to this */
	struct dl_side	*side;
	size_t		 nside;
	size_t		 side_cap;
};

/* Read jobs queued for the reader thread (struct dl_rjob: disklog-read.c). */
struct dl_rjob;
TAILQ_HEAD(dl_rjobs, dl_rjob);

/* A storage error: what failed, how, since when. */
struct dl_error {
	int		 err;
	const char	*op;
	int64_t		 since_ms;
};

/* The modules registered, in order (disklog.c). */
extern const struct disklog_module *dl_modules[DL_MAX_MODULES];
extern size_t dl_nmodules;

/* The log's state: one log per process (disklog.c). */
struct dl_state {
	/* Set at open, then read-only. */
	struct event_base	*base;
	char			*dir;		/* STATE/log */
	int			 dirfd;
	int			 lockfd;
	uint64_t		 log_id;
	int			 is_open;

	/* Loop thread only. */
	struct disklog_opts	 opts;
	struct event		*ev_done;
	struct event		*ev_read;
	struct event		*ev_retry;
	struct event		*ev_kick;	/* wakes the writer after this pass */
	int			 kick_pending;
	uint64_t		 inline_off_ms;	/* monotonic; no inline write before */
	uint64_t		 inline_batches;
	uint64_t		 next_seq;
	uint64_t		 done_seq;
	unsigned		 epoch;
	struct dl_pending	*pend;
	size_t			 pend_cap;	/* a power of two */
	size_t			 pend_head;
	size_t			 pend_n;
	disklog_watch_cb	 watch;
	void			*watch_arg;
	unsigned char		*scratch;
	size_t			 scratch_cap;
	size_t			 last_off;	/* the last payload in scratch */
	size_t			 last_len;
	int			 closing;
	int			 append_err;
	int			 err_active;
	struct dl_error		 err_now;
	struct dl_error		 err_last;
	uint64_t		 err_count;
	int			 snap_inflight;
	uint64_t		 snap_failed_ms;	/* monotonic; retry snap_backoff_ms later */
	uint64_t		 snap_backoff_ms;	/* doubles with each failure in a row */
	uint64_t		 snaps_failed;
	uint64_t		 snap_encode_ms;	/* the last one's time on the loop */
	uint64_t		 snap_from_bytes;	/* s_bytes + queued at the last one */
	struct dl_snapjob	*snap_building;	/* during the modules' snapshot() */
	uint64_t		 snaps_written;
	char			*snap_error;
	uint64_t		 appends;
	uint64_t		 failed;
	const char		*prev_shutdown;
	json_t			*torn;
	json_t			*repaired;
	uint64_t		 replayed;
	uint64_t		 replayed_ahead;	/* payloads parse-ahead gave */
	uint64_t		 skipped_segs;	/* covered: only headers read */
	uint64_t		 replay_ms;
	uint64_t		 restored_seq;
	struct logchain		 chain;		/* the head the writer last published */
	uint64_t		 chain_anchor;	/* seq the last head covered */
	int			 chain_signed;
	unsigned char		 chain_pk[LOGCHAIN_PK_LEN];
	unsigned char		 chain_sk[LOGCHAIN_SK_LEN];

	/* Shared with the writer, under mtx. */
	pthread_mutex_t		 mtx;
	pthread_cond_t		 wcond;
	struct dl_buf		 open_buf;
	int			 w_waiting;
	int			 w_inline;	/* the loop holds the writer's state */
	int			 w_stop;
	int			 w_retry;
	struct dl_snapjob	*snapjob;
	struct disklog_opts	 w_opts;
	unsigned		 r_epoch;
	uint64_t		 r_done;
	int			 r_err_new;
	int			 r_err;
	const char		*r_err_op;
	unsigned		 r_err_epoch;
	int			 r_snap_new;
	int			 r_snap_err;
	uint64_t		 r_snap_seq;
	int			 r_need_repair;
	uint64_t		 s_batches;
	uint64_t		 s_fsyncs;
	uint64_t		 s_records;
	uint64_t		 s_bytes;
	uint64_t		 s_max_batch;
	struct logchain		 r_chain;	/* w_chain, as last published */

	/* Writer thread only. */
	pthread_t		 writer;
	struct dl_buf		 busy;
	int			 w_fd;
	uint64_t		 w_good_seq;
	int			 w_failed;
	unsigned		 w_failed_epoch;
	int			 w_need_repair;
	uint64_t		 w_repair_off;
	struct logchain		 w_chain;	/* the head of what is written */

	/* The segment table, under seg_mtx. */
	pthread_mutex_t		 seg_mtx;
	struct dl_seg		**segs;
	size_t			 nsegs;
	uint64_t		 snap_seq;
	uint64_t		 snap_bytes;
	char			*snap_name;
	uint64_t		 disk_bytes;
	uint64_t		 side_files;	/* the snapshot's side files */
	uint64_t		 side_bytes;

	/* The reader, under rmtx. */
	pthread_t		 reader;
	pthread_mutex_t		 rmtx;
	pthread_cond_t		 rcond;
	struct dl_rjobs		 rtodo;
	struct dl_rjobs		 rdone;
	int			 r_stop;
};
extern struct dl_state dl;

/* The active (newest) segment. */
static inline struct dl_seg *
dl_seg_active(void)
{
	return dl.segs[dl.nsegs - 1];
}

/* disklog.c: the segment table, shared I/O helpers, the modules. */
uint64_t	 dl_seg_limit(const struct disklog_opts *);
int		 dl_datasync(int);
int		 dl_pwrite_all(int fd, const void *, size_t len, uint64_t off);
const struct disklog_module *dl_module_for(const char *, size_t);
void		 dl_seg_index(struct dl_seg *, uint64_t seq, uint64_t off);
struct dl_seg	*dl_seg_new(const char *name, uint64_t first_seq,
		    uint64_t size);
void		 dl_seg_free(struct dl_seg *);
void		 dl_seg_push(struct dl_seg *);

/* disklog-append.c: the loop thread's side of appends. */
struct dl_pending dl_pend_pop(void);
void		 dl_done_cb(evutil_socket_t, short, void *);
void		 dl_kick_cb(evutil_socket_t, short, void *);
void		 dl_retry_cb(evutil_socket_t, short, void *);

/* disklog-write.c: the writer thread, and its state the loop may borrow. */
void		*dl_writer_main(void *);
void		 dl_take_batch(struct disklog_opts *);
void		 dl_write_batch(struct dl_buf *, const struct disklog_opts *);
void		 dl_put_batch(void);

/* disklog-snapshot.c */
int		 dl_write_snapshot(const struct dl_snapjob *);
void		 dl_snapjob_free(struct dl_snapjob *);
void		 dl_snapshot_done(uint64_t seq, int err);
void		 dl_side_count(void);
void		 dl_maybe_snapshot(void);
int		 dl_open_snapshot(struct logscan_dir *, int repair,
		    char **cause);

/* disklog-read.c: the reader thread and its results on the loop. */
void		*dl_reader_main(void *);
void		 dl_read_done_cb(evutil_socket_t, short, void *);

/* disklog-replay.c */
int		 dl_open_segments(struct logscan_dir *, int repair,
		    char **cause);

/* disklog-ahead.c: parse-ahead for one segment's replay. */
struct dl_pa;
struct dl_pa	*dl_pa_start(const char *name, uint64_t base,
		    uint64_t snap_seq, uint64_t covered);
void		 dl_pa_end(struct dl_pa *);
json_t		**dl_pa_slot(struct dl_pa *, uint64_t seq, uint64_t off);
json_t		*dl_pa_take(struct dl_pa *, uint64_t seq, uint64_t off);

/*
 * disklog-chain.c: the hash chain. The writer's side (dl_chain_written)
 * hashes what it wrote; the rest runs on the loop thread.
 */
struct logfmt_record;
int		 dl_chain_open(char **cause);
void		 dl_chain_restore(json_t *root, uint64_t snap_seq);
struct dl_chain_ahead;
struct dl_chain_ahead *dl_chain_ahead_start(const char *name);
void		 dl_chain_ahead_end(struct dl_chain_ahead *, uint64_t good_end,
		    uint64_t last_seq);
void		 dl_chain_start(void);
void		 dl_chain_written(const struct dl_buf *, size_t from,
		    size_t to);
void		 dl_chain_sync(void);
json_t		*dl_chain_json(const char *seqname);
void		 dl_chain_anchor(int force);

/* disklog-repair.c */
int		 dl_move_aside(const char *name, json_t *moved, char **cause);
void		 dl_dir_cut(struct logscan_dir *, size_t n);
int		 dl_repair(struct logscan_dir *, size_t i, uint64_t good_end,
		    int header_ok, const char *why, char **cause);
char		*dl_refuse(const char *file, uint64_t offset, const char *why,
		    uint64_t good);

#endif
