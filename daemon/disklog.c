/*
 * The disk log (disklog.h, doc/DISKLOG.md). This file owns the log folder
 * STATE/log: its lock, its segments, its snapshots, the writer and reader
 * threads, and the records in flight.
 *
 * Write path. disklog_append encodes a record on the loop thread (JSON
 * straight into a scratch buffer, then the head and CRC) and copies it into
 * the open batch under a mutex. The writer thread swaps the open batch for
 * an empty one, writes it with pwrite(2), splits it where a segment fills
 * up, and calls fdatasync(2) once if any record of the batch is durable;
 * meanwhile the loop fills the next batch, so under load one fsync covers
 * many acknowledgements (group commit). The writer publishes "done up to
 * seq N" and wakes the loop with event_active; the loop runs the callbacks
 * there, in seq order.
 *
 * Failures. When a write or an fsync fails, the writer cuts the file back to
 * the end of the last good record (ftruncate + fdatasync, retried by a timer
 * until it works) before it tells the loop, and drops every batch of the
 * same epoch. The loop then fails every record in flight with the errno,
 * starts a new epoch and gives the failed seqs out again. So nothing is
 * acknowledged that is not on disk, and a failed record does not stay in
 * the log (unless the daemon dies before the cut is done: then the outcome
 * of those unacknowledged records is unknown, as in any database).
 *
 * Read path. At open the newest snapshot is restored into the modules and
 * every later record is replayed; the last segment's torn tail is cut and
 * reported; any other damage stops the start with the file, the offset and
 * the repair command, or with --repair the good part is kept and the rest
 * moved into STATE/log/damaged. At run time disklog_read is served by the
 * reader thread from the files, using a sparse seq -> offset index per
 * segment that the writer keeps.
 *
 * Bounded disk. When the files pass half of max_bytes the loop asks the
 * modules for their state (snapshot()), encodes it, and hands the bytes to
 * the writer, which writes the snapshot after the records it covers
 * (temp file, fdatasync, rename, fsync of the folder) and only then drops
 * the closed segments it covers. Encoding the state is the only snapshot
 * work on the loop thread; every disk operation is on the writer.
 *
 * Locks: dl.mtx guards the open batch, the writer's requests and its
 * published results; dl.seg_mtx guards the segment table, which the writer
 * changes and the reader and status read. Never both at once.
 */
#include "gbr-config.h"

#include <sys/file.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "disklog.h"
#include "fault.h"
#include "jsonfast.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "osdep.h"
#include "paths.h"
#include "xmalloc.h"

/* Encoded bytes the open batch may hold before appends are refused. */
#define DL_MAX_QUEUE	(64U * 1024 * 1024)
/* Records waiting for their callback. */
#define DL_MAX_PENDING	(1024U * 1024)
/* A sparse index entry every this many bytes of a segment. */
/*
 * How records and snapshots are read back: as jansson wrote them, which
 * includes a NUL byte in a string as \u0000 (a command's output can hold
 * one). jansson refuses those by default.
 */
#define DL_JSON		JSON_ALLOW_NUL
#define DL_INDEX_EVERY	(64U * 1024)
/* Retry of a failed cut, while storage is failing. */
#define DL_RETRY_MS	1000
/* Modules that can register. */
#define DL_MAX_MODULES	32
/* Smallest segment, whatever the options say. */
#define DL_MIN_SEGMENT	4096
/* A batch buffer larger than this is freed after use. */
#define DL_KEEP_BUF	(8U * 1024 * 1024)
/* An open batch this large wakes the writer at once, not at the end of the pass. */
#define DL_WAKE_BYTES	(256U * 1024)
/*
 * A batch the loop may write itself (see dl_write_inline): at most this
 * many bytes, and never again for DL_INLINE_PAUSE_MS after a write that
 * took longer than DL_INLINE_SLOW_US (the kernel throttling a writer).
 */
#define DL_INLINE_MAX		(64U * 1024)
#define DL_INLINE_SLOW_US	1000
#define DL_INLINE_PAUSE_MS	1000

struct dl_buf {
	unsigned char	*data;
	size_t		 len;
	size_t		 cap;
	uint64_t	 first_seq;
	uint64_t	 last_seq;
	unsigned	 epoch;
	int		 durable;
};

struct dl_idx {
	uint64_t	 seq;
	uint64_t	 off;
};

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

struct dl_pending {
	uint64_t	 seq;
	int64_t		 ts_ms;
	disklog_done_cb	 cb;
	void		*arg;
	char		*copy;		/* type then data, for the watch */
	size_t		 type_len;
	size_t		 data_len;
};

struct dl_snapjob {
	char		*body;
	size_t		 len;
	uint64_t	 seq;
	unsigned	 epoch;
};

struct dl_rjob {
	uint64_t		 after;
	uint64_t		 upto;
	unsigned		 limit;
	size_t			 max_bytes;
	disklog_read_cb		 cb;
	void			*arg;
	int			 error;
	struct disklog_page	 page;
	TAILQ_ENTRY(dl_rjob)	 entry;
};
TAILQ_HEAD(dl_rjobs, dl_rjob);

struct dl_error {
	int		 err;
	const char	*op;
	int64_t		 since_ms;
};

static const struct disklog_module *dl_modules[DL_MAX_MODULES];
static size_t dl_nmodules;

static struct {
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
	uint64_t		 snap_failed_ms;	/* monotonic; retry a second later */
	uint64_t		 snaps_written;
	char			*snap_error;
	uint64_t		 appends;
	uint64_t		 failed;
	const char		*prev_shutdown;
	json_t			*torn;
	json_t			*repaired;
	uint64_t		 replayed;
	uint64_t		 replayed_ahead;	/* payloads parse-ahead gave */
	uint64_t		 replay_ms;
	uint64_t		 restored_seq;

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

	/* Writer thread only. */
	pthread_t		 writer;
	struct dl_buf		 busy;
	int			 w_fd;
	uint64_t		 w_good_seq;
	int			 w_failed;
	unsigned		 w_failed_epoch;
	int			 w_need_repair;
	uint64_t		 w_repair_off;

	/* The segment table, under seg_mtx. */
	pthread_mutex_t		 seg_mtx;
	struct dl_seg		**segs;
	size_t			 nsegs;
	uint64_t		 snap_seq;
	uint64_t		 snap_bytes;
	char			*snap_name;
	uint64_t		 disk_bytes;

	/* The reader, under rmtx. */
	pthread_t		 reader;
	pthread_mutex_t		 rmtx;
	pthread_cond_t		 rcond;
	struct dl_rjobs		 rtodo;
	struct dl_rjobs		 rdone;
	int			 r_stop;
} dl = {
	.dirfd = -1, .lockfd = -1, .w_fd = -1,
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.seg_mtx = PTHREAD_MUTEX_INITIALIZER,
	.rmtx = PTHREAD_MUTEX_INITIALIZER,
};

static void	dl_done_cb(evutil_socket_t, short, void *);
static void	dl_read_done_cb(evutil_socket_t, short, void *);

/* Monotonic milliseconds. */
static uint64_t
dl_mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads a little-endian u32 (a record's length in a batch). */
static uint32_t
dl_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* The size at which a segment is closed: at most a quarter of the budget. */
static uint64_t
dl_seg_limit(const struct disklog_opts *o)
{
	uint64_t	lim = o->segment_bytes;

	if (o->max_bytes / 4 < lim)
		lim = o->max_bytes / 4;
	if (lim < DL_MIN_SEGMENT)
		lim = DL_MIN_SEGMENT;
	return lim;
}

/*
 * The bytes the open batch may hold: at most a quarter of the budget, so
 * that with the snapshot started at half the budget (counting what is
 * queued) one more batch cannot take the files over it.
 */
static size_t
dl_queue_cap(const struct disklog_opts *o)
{
	uint64_t	cap = o->max_bytes / 4;

	if (cap > DL_MAX_QUEUE)
		cap = DL_MAX_QUEUE;
	return (size_t)cap;
}

/* fdatasync where it exists. */
static int
dl_datasync(int fd)
{
#ifdef HAVE_FDATASYNC
	return fdatasync(fd);
#else
	return fsync(fd);
#endif
}

/* Writes all of len bytes at off. */
static int
dl_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Registers a module. */
void
disklog_register(const struct disklog_module *m)
{
	if (dl.is_open)
		fatalx("disklog_register after disklog_open");
	if (dl_nmodules == DL_MAX_MODULES)
		fatalx("too many disk log modules");
	dl_modules[dl_nmodules++] = m;
}

/* Finds the module whose records have this type ("<name>.*"). */
static const struct disklog_module *
dl_module_for(const char *type, size_t len)
{
	size_t	i, n;

	for (i = 0; i < dl_nmodules; i++) {
		n = strlen(dl_modules[i]->name);
		if (len > n && type[n] == '.' &&
		    memcmp(type, dl_modules[i]->name, n) == 0)
			return dl_modules[i];
	}
	return NULL;
}

/* ---- the segment table (under seg_mtx) ---- */

/* Adds an index entry if the stride has been passed. */
static void
dl_seg_index(struct dl_seg *s, uint64_t seq, uint64_t off)
{
	if (off < s->idx_next)
		return;
	if (s->nidx == s->cidx) {
		s->cidx = s->cidx == 0 ? 16 : s->cidx * 2;
		s->idx = xreallocarray(s->idx, s->cidx, sizeof *s->idx);
	}
	s->idx[s->nidx].seq = seq;
	s->idx[s->nidx].off = off;
	s->nidx++;
	s->idx_next = off + DL_INDEX_EVERY;
}

/* Returns a new table entry for a segment. */
static struct dl_seg *
dl_seg_new(const char *name, uint64_t first_seq, uint64_t size)
{
	struct dl_seg	*s = xcalloc(1, sizeof *s);

	s->name = xstrdup(name);
	s->first_seq = first_seq;
	s->last_seq = first_seq - 1;
	s->size = size;
	s->idx_next = LOGFMT_HEADER_SIZE;
	return s;
}

/* Frees a table entry. */
static void
dl_seg_free(struct dl_seg *s)
{
	free(s->name);
	free(s->idx);
	free(s);
}

/* Appends an entry to the table (caller holds seg_mtx or runs alone). */
static void
dl_seg_push(struct dl_seg *s)
{
	dl.segs = xreallocarray(dl.segs, dl.nsegs + 1, sizeof *dl.segs);
	dl.segs[dl.nsegs++] = s;
	dl.disk_bytes += s->size;
}

/* The active (newest) segment. */
static struct dl_seg *
dl_seg_active(void)
{
	return dl.segs[dl.nsegs - 1];
}

/* ---- the writer thread ---- */

/*
 * Cuts the active segment back to off and makes the cut durable. On failure
 * the cut is retried before anything else is written.
 */
static int
dl_cut(uint64_t off)
{
	int	saved;

	if (ftruncate(dl.w_fd, (off_t)off) != 0 || dl_datasync(dl.w_fd) != 0) {
		saved = errno;
		log_error("disk log: cannot cut %s/%s back to %" PRIu64
		    " bytes: %s (will retry)", dl.dir, dl_seg_active()->name,
		    off, strerror(saved));
		dl.w_need_repair = 1;
		dl.w_repair_off = off;
		errno = saved;
		return -1;
	}
	dl.w_need_repair = 0;
	return 0;
}

/* Publishes progress (caller holds mtx). */
static void
dl_publish_done(unsigned epoch, uint64_t done)
{
	dl.r_epoch = epoch;
	dl.r_done = done;
	dl.r_need_repair = dl.w_need_repair;
}

/* Records a failure of a batch's epoch and publishes it. */
static void
dl_fail(unsigned epoch, int err, const char *op)
{
	dl.w_failed = 1;
	dl.w_failed_epoch = epoch;
	pthread_mutex_lock(&dl.mtx);
	dl_publish_done(epoch, dl.w_good_seq);
	dl.r_err_new = 1;
	dl.r_err = err;
	dl.r_err_op = op;
	dl.r_err_epoch = epoch;
	pthread_mutex_unlock(&dl.mtx);
}

/*
 * Writes bytes [from, to) of the batch, records first_seq..last_seq, to the
 * end of the active segment. On failure cuts them off again.
 */
static int
dl_write_chunk(const struct dl_buf *b, size_t from, size_t to,
    const char **op)
{
	struct dl_seg	*s = dl_seg_active();
	size_t		 len = to - from, half;
	int		 err;

	if ((err = fault_inject("disklog.write")) != 0) {
		/* Like a disk filling up mid-write: half goes, then it fails. */
		half = len / 2;
		(void)dl_pwrite_all(dl.w_fd, b->data + from, half, s->size);
		errno = err;
	} else if (dl_pwrite_all(dl.w_fd, b->data + from, len, s->size) == 0)
		return 0;
	err = errno;
	*op = "write";
	(void)dl_cut(s->size);
	errno = err;
	return -1;
}

/* Adds records just written to the table: size, last seq and index. */
static void
dl_commit_chunk(const struct dl_buf *b, size_t from, size_t to,
    uint64_t first_seq)
{
	struct dl_seg	*s = dl_seg_active();
	size_t		 p;
	uint64_t	 seq = first_seq, off = s->size;

	pthread_mutex_lock(&dl.seg_mtx);
	for (p = from; p < to; p += 8 + dl_get32(b->data + p)) {
		dl_seg_index(s, seq, off + (p - from));
		seq++;
	}
	s->size += to - from;
	s->last_seq = seq - 1;
	dl.disk_bytes += to - from;
	pthread_mutex_unlock(&dl.seg_mtx);
}

/*
 * Creates the segment whose first record is first_seq and makes it the
 * active one; the old one is sealed (its data was synced by the caller).
 */
static int
dl_switch(uint64_t first_seq, int do_sync)
{
	struct logfmt_seghdr	 h;
	unsigned char		 head[LOGFMT_HEADER_SIZE], mark[8];
	struct dl_seg		*s;
	char			*name = logscan_seg_name(first_seq);
	int			 fd, err;

	fd = openat(dl.dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	if (fd == -1)
		goto fail;
	memset(&h, 0, sizeof h);
	h.log_id = dl.log_id;
	h.first_seq = first_seq;
	h.created_ms = osdep_now_ms();
	logfmt_seghdr_encode(head, &h);
	if ((err = fault_inject("disklog.create")) != 0) {
		errno = err;
		goto fail;
	}
	if (dl_pwrite_all(fd, head, sizeof head, 0) != 0 ||
	    (do_sync && (dl_datasync(fd) != 0 || fsync(dl.dirfd) != 0)))
		goto fail;
	if (do_sync) {
		/* Sealed: complete and synced; a damaged tail there is corruption. */
		logfmt_clean_marker(mark, 1);
		(void)dl_pwrite_all(dl.w_fd, mark, sizeof mark,
		    LOGFMT_CLEAN_OFFSET);
	}
	close(dl.w_fd);
	dl.w_fd = fd;
	s = dl_seg_new(name, first_seq, LOGFMT_HEADER_SIZE);
	pthread_mutex_lock(&dl.seg_mtx);
	dl_seg_push(s);
	pthread_mutex_unlock(&dl.seg_mtx);
	free(name);
	return 0;
fail:
	err = errno;
	if (fd != -1) {
		close(fd);
		(void)unlinkat(dl.dirfd, name, 0);
	}
	log_error("disk log: cannot create segment %s/%s: %s", dl.dir, name,
	    strerror(err));
	free(name);
	errno = err;
	return -1;
}

/* Writes one batch: split at segment ends, one fsync if it holds durable records. */
static void
dl_write_batch(struct dl_buf *b, const struct disklog_opts *o)
{
	struct dl_seg	*s;
	const char	*op = "write";
	uint64_t	 limit = dl_seg_limit(o), seq, chunk_seq;
	size_t		 p, chunk, rlen;
	int		 err;

	if (dl.w_failed && b->epoch == dl.w_failed_epoch)
		return;		/* queued behind a failure: the loop fails it */
	if (dl.w_need_repair && dl_cut(dl.w_repair_off) != 0) {
		dl_fail(b->epoch, errno, "cut");
		return;
	}
	if (b->first_seq != dl.w_good_seq + 1)
		fatalx("disk log: batch starts at seq %" PRIu64 ", expected %"
		    PRIu64, b->first_seq, dl.w_good_seq + 1);

	s = dl_seg_active();
	chunk = 0;
	chunk_seq = seq = b->first_seq;
	for (p = 0; p < b->len; p += rlen, seq++) {
		rlen = 8 + dl_get32(b->data + p);
		if (s->size + (p - chunk) + rlen <= limit ||
		    (s->last_seq < s->first_seq && p == chunk))
			continue;
		/* The segment is full: finish it and start the next one. */
		if (p > chunk) {
			if (dl_write_chunk(b, chunk, p, &op) != 0)
				goto fail;
			if (o->fsync) {
				err = fault_inject("disklog.fsync");
				if (dl_datasync(dl.w_fd) != 0 || err != 0) {
					err = err != 0 ? err : errno;
					op = "fsync";
					(void)dl_cut(s->size);
					errno = err;
					goto fail;
				}
				pthread_mutex_lock(&dl.mtx);
				dl.s_fsyncs++;
				pthread_mutex_unlock(&dl.mtx);
			}
			dl_commit_chunk(b, chunk, p, chunk_seq);
			dl.w_good_seq = seq - 1;
		}
		if (dl_switch(seq, o->fsync) != 0) {
			op = "create";
			goto fail;
		}
		s = dl_seg_active();
		chunk = p;
		chunk_seq = seq;
	}
	if (b->len > chunk) {
		if (dl_write_chunk(b, chunk, b->len, &op) != 0)
			goto fail;
		if (b->durable) {
			err = fault_inject("disklog.fsync");
			if (dl_datasync(dl.w_fd) != 0 || err != 0) {
				err = err != 0 ? err : errno;
				op = "fsync";
				(void)dl_cut(s->size);
				errno = err;
				goto fail;
			}
		}
		dl_commit_chunk(b, chunk, b->len, chunk_seq);
	}
	dl.w_good_seq = b->last_seq;
	pthread_mutex_lock(&dl.mtx);
	dl.s_batches++;
	dl.s_fsyncs += b->durable;
	dl.s_records += b->last_seq - b->first_seq + 1;
	dl.s_bytes += b->len;
	if (b->last_seq - b->first_seq + 1 > dl.s_max_batch)
		dl.s_max_batch = b->last_seq - b->first_seq + 1;
	dl_publish_done(b->epoch, dl.w_good_seq);
	pthread_mutex_unlock(&dl.mtx);
	return;
fail:
	err = errno;
	log_error("disk log: %s failed at seq %" PRIu64 ": %s", op,
	    dl.w_good_seq + 1, strerror(err));
	dl_fail(b->epoch, err, op);
}

/*
 * Writes a snapshot file (temp, fdatasync, rename, fsync of the folder),
 * then drops the closed segments and older snapshots it covers.
 */
static int
dl_write_snapshot(const struct dl_snapjob *job)
{
	struct logfmt_snaphdr	 h;
	unsigned char		 head[LOGFMT_HEADER_SIZE];
	struct dl_seg		**drop = NULL;
	struct logscan_dir	 d;
	char			*name, *cause;
	size_t			 ndrop = 0, i, keep;
	int			 fd, err;

	if (dl.w_fd != -1 && dl_datasync(dl.w_fd) != 0)
		return -1;
	fd = openat(dl.dirfd, "snap.tmp", O_WRONLY | O_CREAT | O_TRUNC |
	    O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1)
		return -1;
	memset(&h, 0, sizeof h);
	h.log_id = dl.log_id;
	h.seq = job->seq;
	h.created_ms = osdep_now_ms();
	h.body_len = job->len;
	h.body_crc = logfmt_crc(0, job->body, job->len);
	logfmt_snaphdr_encode(head, &h);
	name = logscan_snap_name(job->seq);
	if ((err = fault_inject("disklog.snapshot")) != 0)
		errno = err;
	if (err != 0 || dl_pwrite_all(fd, head, sizeof head, 0) != 0 ||
	    dl_pwrite_all(fd, job->body, job->len, sizeof head) != 0 ||
	    dl_datasync(fd) != 0) {
		err = errno;
		close(fd);
		goto fail;
	}
	/* The descriptor is gone after close, whatever it returns. */
	if (close(fd) != 0 ||
	    renameat(dl.dirfd, "snap.tmp", dl.dirfd, name) != 0 ||
	    fsync(dl.dirfd) != 0) {
		err = errno;
		goto fail;
	}

	/* The snapshot is durable: what it covers can go. */
	pthread_mutex_lock(&dl.seg_mtx);
	for (keep = 0; keep + 1 < dl.nsegs &&
	    dl.segs[keep]->last_seq <= job->seq; keep++)
		;
	if (keep > 0) {
		drop = xreallocarray(NULL, keep, sizeof *drop);
		for (i = 0; i < keep; i++) {
			drop[ndrop++] = dl.segs[i];
			dl.disk_bytes -= dl.segs[i]->size;
		}
		memmove(dl.segs, dl.segs + keep,
		    (dl.nsegs - keep) * sizeof *dl.segs);
		dl.nsegs -= keep;
	}
	dl.disk_bytes -= dl.snap_bytes;
	dl.snap_bytes = sizeof head + job->len;
	dl.disk_bytes += dl.snap_bytes;
	dl.snap_seq = job->seq;
	free(dl.snap_name);
	dl.snap_name = name;
	pthread_mutex_unlock(&dl.seg_mtx);

	for (i = 0; i < ndrop; i++) {
		if (unlinkat(dl.dirfd, drop[i]->name, 0) != 0)
			log_warn("disk log: cannot remove %s/%s: %s", dl.dir,
			    drop[i]->name, strerror(errno));
		dl_seg_free(drop[i]);
	}
	free(drop);
	if (logscan_list(dl.dirfd, &d, &cause) == 0) {
		for (i = 0; i < d.nsnaps; i++) {
			if (d.snaps[i].seq < job->seq)
				(void)unlinkat(dl.dirfd, d.snaps[i].name, 0);
		}
		logscan_dir_free(&d);
	} else
		free(cause);
	(void)fsync(dl.dirfd);
	log_info("disk log: snapshot at seq %" PRIu64 " (%zu bytes); dropped "
	    "%zu segment%s", job->seq, job->len, ndrop, ndrop == 1 ? "" : "s");
	return 0;
fail:
	(void)unlinkat(dl.dirfd, "snap.tmp", 0);
	free(name);
	errno = err;
	return -1;
}

/*
 * Takes the open batch into busy, for whoever holds the writer's state
 * (the writer, or the loop writing inline), with the options in force.
 * Caller holds mtx.
 */
static void
dl_take_batch(struct disklog_opts *o)
{
	struct dl_buf	tmp = dl.busy;

	dl.busy = dl.open_buf;
	dl.open_buf = tmp;
	dl.open_buf.len = 0;
	dl.open_buf.durable = 0;
	dl.open_buf.first_seq = dl.open_buf.last_seq = 0;
	*o = dl.w_opts;
}

/* Empties busy once written; a large batch's buffer is not kept. */
static void
dl_put_batch(void)
{
	dl.busy.len = 0;
	if (dl.busy.cap > DL_KEEP_BUF) {
		free(dl.busy.data);
		dl.busy.data = NULL;
		dl.busy.cap = 0;
	}
}

/* Flushes and marks the active segment clean at shutdown. */
static void
dl_seal_active(void)
{
	unsigned char	mark[8];

	if (dl.w_fd == -1)
		return;
	if (dl.w_need_repair && dl_cut(dl.w_repair_off) != 0) {
		log_error("disk log: closing with a failed write not cut off");
		return;
	}
	if (dl_datasync(dl.w_fd) != 0) {
		log_error("disk log: final fsync failed: %s", strerror(errno));
		return;
	}
	logfmt_clean_marker(mark, 1);
	if (dl_pwrite_all(dl.w_fd, mark, sizeof mark, LOGFMT_CLEAN_OFFSET) != 0 ||
	    dl_datasync(dl.w_fd) != 0)
		log_error("disk log: cannot mark a clean shutdown: %s",
		    strerror(errno));
}

/* The writer thread: batches, snapshots, retried cuts, until stopped. */
static void *
dl_writer_main(void *arg)
{
	struct disklog_opts	 o;
	struct dl_snapjob	*job;
	struct timespec		 ts;
	int			 err, wake;

	pthread_mutex_lock(&dl.mtx);
	for (;;) {
		if (dl.w_inline) {
			/* The loop is writing a batch with our state: wait. */
			dl.w_waiting = 1;
			pthread_cond_wait(&dl.wcond, &dl.mtx);
			dl.w_waiting = 0;
			continue;
		}
		/*
		 * A snapshot goes after the records it covers; if they failed
		 * (or the writer stops without them) it is cancelled.
		 */
		job = dl.snapjob;
		if (job != NULL && (dl.w_good_seq >= job->seq || (dl.w_failed &&
		    dl.w_failed_epoch == job->epoch) || (dl.w_stop &&
		    dl.open_buf.len == 0))) {
			dl.snapjob = NULL;
			pthread_mutex_unlock(&dl.mtx);
			if (dl.w_good_seq >= job->seq)
				err = dl_write_snapshot(job) == 0 ? 0 : errno;
			else
				err = ECANCELED;
			free(job->body);
			pthread_mutex_lock(&dl.mtx);
			dl.r_snap_new = 1;
			dl.r_snap_err = err;
			dl.r_snap_seq = job->seq;
			pthread_mutex_unlock(&dl.mtx);
			free(job);
			event_active(dl.ev_done, EV_READ, 0);
			pthread_mutex_lock(&dl.mtx);
			continue;
		}
		if (dl.w_retry) {
			dl.w_retry = 0;
			pthread_mutex_unlock(&dl.mtx);
			wake = dl.w_need_repair && dl_cut(dl.w_repair_off) == 0;
			pthread_mutex_lock(&dl.mtx);
			dl.r_need_repair = dl.w_need_repair;
			if (wake) {
				pthread_mutex_unlock(&dl.mtx);
				event_active(dl.ev_done, EV_READ, 0);
				pthread_mutex_lock(&dl.mtx);
			}
			continue;
		}
		if (dl.open_buf.len > 0) {
			if (dl.w_opts.commit_delay_us > 0 && dl.open_buf.durable &&
			    !dl.w_stop) {
				/* Let more writers join this fsync. */
				clock_gettime(CLOCK_MONOTONIC, &ts);
				ts.tv_nsec += (long)dl.w_opts.commit_delay_us * 1000;
				ts.tv_sec += ts.tv_nsec / 1000000000;
				ts.tv_nsec %= 1000000000;
				while (pthread_cond_timedwait(&dl.wcond, &dl.mtx,
				    &ts) == 0 && !dl.w_stop)
					;
			}
			dl_take_batch(&o);
			pthread_mutex_unlock(&dl.mtx);
			dl_write_batch(&dl.busy, &o);
			dl_put_batch();
			event_active(dl.ev_done, EV_READ, 0);
			pthread_mutex_lock(&dl.mtx);
			continue;
		}
		if (dl.w_stop)
			break;
		dl.w_waiting = 1;
		pthread_cond_wait(&dl.wcond, &dl.mtx);
		dl.w_waiting = 0;
	}
	pthread_mutex_unlock(&dl.mtx);
	dl_seal_active();
	return NULL;
}

/* ---- the reader thread ---- */

/* Finds where to start reading for seq: the segment's name, an offset, its end. */
static int
dl_locate(uint64_t seq, char **name, uint64_t *off, uint64_t *end,
    uint64_t *first_avail)
{
	struct dl_seg	*s = NULL;
	size_t		 i, lo, hi, mid;

	pthread_mutex_lock(&dl.seg_mtx);
	*first_avail = dl.nsegs > 0 ? dl.segs[0]->first_seq : dl.snap_seq + 1;
	for (i = dl.nsegs; i > 0; i--) {
		if (dl.segs[i - 1]->first_seq <= seq) {
			s = dl.segs[i - 1];
			break;
		}
	}
	if (s == NULL || seq > s->last_seq) {
		pthread_mutex_unlock(&dl.seg_mtx);
		return -1;
	}
	*name = xstrdup(s->name);
	*end = s->size;
	*off = LOGFMT_HEADER_SIZE;
	/* The last index entry at or before seq. */
	lo = 0;
	hi = s->nidx;
	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (s->idx[mid].seq <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0)
		*off = s->idx[lo - 1].off;
	pthread_mutex_unlock(&dl.seg_mtx);
	return 0;
}

/* Makes a record's JSON form for a reader, or NULL if its data is not JSON. */
static json_t *
dl_record_json(const struct logfmt_record *rec)
{
	json_error_t	 jerr;
	json_t		*data;

	data = jsonfast_loadb(rec->data, rec->data_len, DL_JSON, &jerr);
	if (data == NULL)
		return NULL;
	return json_pack("{s:I, s:I, s:s%, s:o}", "seq", (json_int_t)rec->seq,
	    "ts_ms", (json_int_t)rec->ts_ms, "type", rec->type,
	    rec->type_len, "data", data);
}

/* Serves one read job from the files. */
static void
dl_read_job(struct dl_rjob *j)
{
	struct logscan_reader	 rd;
	struct logfmt_record	 rec;
	struct stat		 sb;
	const char		*why;
	size_t			 bytes = 0;
	uint64_t		 seq = j->after + 1, off, end, first, pos;
	json_t			*list = json_array(), *r;
	char			*name;
	int			 fd, st, tries = 0;

	j->page.records = list;
	pthread_mutex_lock(&dl.seg_mtx);
	first = dl.nsegs > 0 ? dl.segs[0]->first_seq : dl.snap_seq + 1;
	pthread_mutex_unlock(&dl.seg_mtx);
	if (seq < first) {
		/* Dropped after a snapshot covered them. */
		j->page.gap = 1;
		seq = first;
	}
	while (json_array_size(list) < j->limit && seq <= j->upto &&
	    (bytes < j->max_bytes || json_array_size(list) == 0)) {
		if (dl_locate(seq, &name, &off, &end, &first) != 0) {
			if (seq < first) {
				j->page.gap = 1;
				seq = first;
				continue;
			}
			break;
		}
		fd = openat(dl.dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd == -1 || fstat(fd, &sb) != 0) {
			if (fd != -1)
				close(fd);
			free(name);
			if (errno == ENOENT && ++tries < 8)
				continue;	/* dropped by a snapshot meanwhile */
			j->error = errno;
			break;
		}
		logscan_reader_init(&rd, fd, end);
		for (pos = off; pos < end; pos += rec.size) {
			if ((st = logscan_record_at(&rd, pos, &rec, &why)) < 0 ||
			    st != LOGFMT_OK || rec.seq > seq) {
				log_error("disk log: %s/%s: unreadable record "
				    "at offset %" PRIu64 " while reading seq %"
				    PRIu64 ": %s", dl.dir, name, pos, seq,
				    st < 0 ? strerror(errno) : why != NULL ?
				    why : "unexpected seq");
				j->error = EIO;
				break;
			}
			if (rec.seq < seq)
				continue;
			if ((r = dl_record_json(&rec)) == NULL) {
				log_error("disk log: seq %" PRIu64 " holds no "
				    "valid JSON", rec.seq);
				j->error = EIO;
				break;
			}
			json_array_append_new(list, r);
			bytes += rec.data_len + rec.type_len;
			seq++;
			if (json_array_size(list) >= j->limit || seq > j->upto ||
			    bytes >= j->max_bytes)
				break;
		}
		logscan_reader_release(&rd);
		close(fd);
		free(name);
		if (j->error != 0)
			break;
	}
	j->page.first_seq = first;
	j->page.last_seq = j->upto;
	j->page.more = seq <= j->upto;
}

/* The reader thread: one job at a time, results to the loop. */
static void *
dl_reader_main(void *arg)
{
	struct dl_rjob	*j;

	pthread_mutex_lock(&dl.rmtx);
	for (;;) {
		if ((j = TAILQ_FIRST(&dl.rtodo)) != NULL) {
			TAILQ_REMOVE(&dl.rtodo, j, entry);
			pthread_mutex_unlock(&dl.rmtx);
			dl_read_job(j);
			pthread_mutex_lock(&dl.rmtx);
			TAILQ_INSERT_TAIL(&dl.rdone, j, entry);
			pthread_mutex_unlock(&dl.rmtx);
			event_active(dl.ev_read, EV_READ, 0);
			pthread_mutex_lock(&dl.rmtx);
			continue;
		}
		if (dl.r_stop)
			break;
		pthread_cond_wait(&dl.rcond, &dl.rmtx);
	}
	pthread_mutex_unlock(&dl.rmtx);
	return NULL;
}

/* ---- the loop thread: appends and completions ---- */

/* Grows the pending ring to hold one more. */
static void
dl_pend_grow(void)
{
	struct dl_pending	*n;
	size_t			 cap = dl.pend_cap == 0 ? 1024 : dl.pend_cap * 2, i;

	n = xreallocarray(NULL, cap, sizeof *n);
	for (i = 0; i < dl.pend_n; i++)
		n[i] = dl.pend[(dl.pend_head + i) & (dl.pend_cap - 1)];
	free(dl.pend);
	dl.pend = n;
	dl.pend_cap = cap;
	dl.pend_head = 0;
}

/* Takes the oldest pending record. */
static struct dl_pending
dl_pend_pop(void)
{
	struct dl_pending	e = dl.pend[dl.pend_head];

	dl.pend_head = (dl.pend_head + 1) & (dl.pend_cap - 1);
	dl.pend_n--;
	return e;
}

/* jansson dump callback: JSON straight into the scratch buffer, bounded. */
struct dl_sink {
	size_t	len;
	size_t	max;		/* len may not pass this */
	int	over;
};

/* Appends encoded JSON after the record head in the scratch buffer. */
static int
dl_sink_cb(const char *buf, size_t len, void *arg)
{
	struct dl_sink	*k = arg;
	size_t		 need;

	if (len > k->max - k->len) {
		k->over = 1;
		return -1;
	}
	need = k->len + len;
	if (need > dl.scratch_cap) {
		dl.scratch_cap = dl.scratch_cap * 2 > need ?
		    dl.scratch_cap * 2 : need;
		dl.scratch = xreallocarray(dl.scratch, 1, dl.scratch_cap);
	}
	memcpy(dl.scratch + k->len, buf, len);
	k->len = need;
	return 0;
}

/* Appends a record. */
uint64_t
disklog_append(const char *type, const json_t *payload, int durable,
    disklog_done_cb cb, void *arg)
{
	return disklog_append_bounded(type, payload, durable, LOGFMT_MAX_DATA,
	    cb, arg);
}

/* The payload of the last record appended, as encoded (see disklog.h). */
const char *
disklog_last_payload(size_t *len)
{
	*len = dl.last_len;
	return dl.last_len > 0 ? (const char *)dl.scratch + dl.last_off : NULL;
}

static const struct logfmt_record	*dl_replaying;

/* The payload of the record being replayed (see disklog.h). */
const char *
disklog_replay_payload(size_t *len)
{
	*len = dl_replaying != NULL ? dl_replaying->data_len : 0;
	return dl_replaying != NULL ? (const char *)dl_replaying->data : NULL;
}

/* Appends a record whose payload may take at most max_data bytes. */
uint64_t
disklog_append_bounded(const char *type, const json_t *payload, int durable,
    size_t max_data, disklog_done_cb cb, void *arg)
{
	struct dl_sink		 k;
	struct dl_pending	*e;
	size_t			 tl = strlen(type), size, data_len;
	uint64_t		 seq;
	int64_t			 ts;
	int			 wake;

	dl.last_len = 0;
	if (!dl.is_open || dl.closing) {
		dl.append_err = ESHUTDOWN;
		return 0;
	}
	if (!logfmt_type_valid(type, tl)) {
		dl.append_err = EINVAL;
		return 0;
	}
	if (dl.pend_n >= DL_MAX_PENDING) {
		dl.append_err = EAGAIN;
		return 0;
	}
	k.len = LOGFMT_RECORD_HEAD + tl;
	k.max = k.len + (max_data < LOGFMT_MAX_DATA ? max_data : LOGFMT_MAX_DATA);
	k.over = 0;
	if (dl.scratch_cap > 1024 * 1024) {
		/* Do not keep a large record's buffer for good. */
		free(dl.scratch);
		dl.scratch = NULL;
		dl.scratch_cap = 0;
	}
	if (dl.scratch_cap < k.len + 256) {
		dl.scratch_cap = 4096;
		dl.scratch = xreallocarray(dl.scratch, 1, dl.scratch_cap);
	}
	if (json_dump_callback(payload, dl_sink_cb, &k, JSON_COMPACT |
	    JSON_ENCODE_ANY) != 0) {
		dl.append_err = k.over ? EMSGSIZE : EINVAL;
		return 0;
	}
	data_len = k.len - LOGFMT_RECORD_HEAD - tl;
	if (data_len == 0) {
		dl.append_err = EINVAL;
		return 0;
	}
	size = k.len;
	seq = dl.next_seq;
	ts = osdep_now_ms();
	logfmt_record_seal(dl.scratch, seq, ts, type, tl, data_len);

	pthread_mutex_lock(&dl.mtx);
	/* One record always fits, however large; after it, the cap holds. */
	if (dl.open_buf.len > 0 &&
	    dl.open_buf.len + size > dl_queue_cap(&dl.opts)) {
		pthread_mutex_unlock(&dl.mtx);
		dl.append_err = EAGAIN;
		return 0;
	}
	if (dl.open_buf.len + size > dl.open_buf.cap) {
		dl.open_buf.cap = dl.open_buf.cap * 2 > dl.open_buf.len + size ?
		    dl.open_buf.cap * 2 : dl.open_buf.len + size + 65536;
		dl.open_buf.data = xreallocarray(dl.open_buf.data, 1,
		    dl.open_buf.cap);
	}
	memcpy(dl.open_buf.data + dl.open_buf.len, dl.scratch, size);
	if (dl.open_buf.len == 0) {
		dl.open_buf.first_seq = seq;
		dl.open_buf.epoch = dl.epoch;
	}
	dl.open_buf.len += size;
	dl.open_buf.last_seq = seq;
	if (durable && dl.opts.fsync)
		dl.open_buf.durable = 1;
	/*
	 * Wake an idle writer once per loop pass, not once per record: what
	 * the callbacks of this pass append then goes out as one batch (and
	 * one fsync). A large batch wakes it at once.
	 */
	wake = dl.w_waiting && dl.open_buf.len >= DL_WAKE_BYTES;
	if (wake)
		pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
	if (!wake && !dl.kick_pending) {
		dl.kick_pending = 1;
		event_active(dl.ev_kick, EV_TIMEOUT, 0);
	}

	dl.next_seq++;
	dl.appends++;
	if (cb != NULL || dl.watch != NULL) {
		if (dl.pend_n == dl.pend_cap)
			dl_pend_grow();
		e = &dl.pend[(dl.pend_head + dl.pend_n) & (dl.pend_cap - 1)];
		dl.pend_n++;
		e->seq = seq;
		e->ts_ms = ts;
		e->cb = cb;
		e->arg = arg;
		e->copy = NULL;
		e->type_len = tl;
		e->data_len = data_len;
		if (dl.watch != NULL) {
			e->copy = xmalloc(tl + data_len);
			memcpy(e->copy, type, tl);
			memcpy(e->copy + tl, dl.scratch + LOGFMT_RECORD_HEAD + tl,
			    data_len);
		}
	}
	dl.last_off = LOGFMT_RECORD_HEAD + tl;
	dl.last_len = data_len;
	return seq;
}

/* Runs the callbacks of every pending record up to done, in order. */
static void
dl_complete(uint64_t done)
{
	struct dl_pending	e;

	if (done > dl.done_seq)
		dl.done_seq = done;
	while (dl.pend_n > 0 && dl.pend[dl.pend_head].seq <= done) {
		e = dl_pend_pop();
		if (dl.watch != NULL && e.copy != NULL)
			dl.watch(dl.watch_arg, e.seq, e.ts_ms, e.copy,
			    e.type_len, e.copy + e.type_len, e.data_len);
		free(e.copy);
		if (e.cb != NULL)
			e.cb(e.arg, 0, e.seq);
	}
}

/*
 * The writer failed in the current epoch: everything in flight fails, the
 * failed seqs are given out again, and a timer retries a cut that failed.
 */
static void
dl_failed(int err, const char *op, uint64_t good)
{
	struct dl_pending	 e;
	struct timeval		 tv = { DL_RETRY_MS / 1000, 0 };
	size_t			 n;

	pthread_mutex_lock(&dl.mtx);
	/* Batches of the failed epoch not taken yet are dropped here. */
	dl.open_buf.len = 0;
	dl.open_buf.durable = 0;
	dl.open_buf.first_seq = dl.open_buf.last_seq = 0;
	dl.epoch++;
	pthread_mutex_unlock(&dl.mtx);
	dl.next_seq = good + 1;
	if (!dl.err_active) {
		dl.err_active = 1;
		dl.err_now.since_ms = osdep_now_ms();
	}
	dl.err_now.err = err;
	dl.err_now.op = op;
	dl.err_last = dl.err_now;
	dl.err_count++;
	if (!evtimer_pending(dl.ev_retry, NULL))
		evtimer_add(dl.ev_retry, &tv);
	/* Only those in flight now: appends from the callbacks are new. */
	n = dl.pend_n;
	dl.failed += n;
	while (n-- > 0) {
		e = dl_pend_pop();
		free(e.copy);
		if (e.cb != NULL)
			e.cb(e.arg, err, e.seq);
	}
}

/*
 * Writes the open batch from the loop thread instead of waking the
 * writer, at the end of a loop pass that appended records somebody may
 * wait for, when that is safe and cheap: the writer sleeps, the batch
 * needs no fsync, is small, fits in the active segment, and nothing else
 * (a snapshot, a failure, a stop) waits for the writer. A write(2) of a few
 * KiB into the page cache costs less than the two thread wake-ups of a
 * hand-off (the writer's, then the loop's), and the callbacks run at once.
 * A slow write (the kernel throttling dirty pages) turns this off for a
 * while, so the loop is never held up for long twice; a failed one, until
 * the writer has written again (a failing disk is the writer's to wait
 * on).
 *
 * Called with mtx held and the writer asleep (w_waiting); returns with mtx
 * held. Returns 1 if the batch was written (or failed) here, 0 if the
 * writer must take it.
 */
static int
dl_write_inline(void)
{
	struct disklog_opts	 o;
	struct timespec		 t0, t1;
	uint64_t		 us;

	if (dl.open_buf.durable || dl.open_buf.len > DL_INLINE_MAX ||
	    dl.snapjob != NULL || dl.w_retry || dl.w_stop ||
	    (dl.w_failed && dl.open_buf.epoch == dl.w_failed_epoch) ||
	    dl.w_need_repair || dl.open_buf.epoch != dl.epoch ||
	    dl.err_active ||
	    (dl.inline_off_ms != 0 && dl_mono_ms() < dl.inline_off_ms))
		return 0;
	/* A batch that would start a segment is the writer's (it syncs). */
	if (dl_seg_active()->size + dl.open_buf.len > dl_seg_limit(&dl.w_opts))
		return 0;
	dl.w_inline = 1;
	dl_take_batch(&o);
	pthread_mutex_unlock(&dl.mtx);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	dl_write_batch(&dl.busy, &o);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dl_put_batch();
	us = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
	    (uint64_t)(t1.tv_nsec - t0.tv_nsec) / 1000;
	/* A failure (its cut syncs) is err_active's business, not slowness. */
	if (us > DL_INLINE_SLOW_US &&
	    !(dl.w_failed && dl.w_failed_epoch == dl.busy.epoch)) {
		dl.inline_off_ms = dl_mono_ms() + DL_INLINE_PAUSE_MS;
		log_debug("disk log: a write took %" PRIu64 " us; the writer "
		    "thread takes every batch for %d ms", us,
		    DL_INLINE_PAUSE_MS);
	}
	dl.inline_batches++;
	dl_done_cb(-1, 0, NULL);

	pthread_mutex_lock(&dl.mtx);
	dl.w_inline = 0;
	/*
	 * A snapshot the callbacks asked for, a stop or a large batch is the
	 * writer's now (it was woken while we held its state, and went back
	 * to sleep). Other records they appended have their kick.
	 */
	if (dl.snapjob != NULL || dl.w_retry || dl.w_stop ||
	    dl.open_buf.len >= DL_WAKE_BYTES ||
	    (dl.open_buf.len > 0 && !dl.kick_pending))
		pthread_cond_signal(&dl.wcond);
	return 1;
}

/*
 * The end of a loop pass that appended: writes the batch here or wakes
 * the writer if it sleeps.
 */
static void
dl_kick_cb(evutil_socket_t fd, short events, void *arg)
{
	dl.kick_pending = 0;
	pthread_mutex_lock(&dl.mtx);
	if (dl.w_waiting && dl.open_buf.len > 0 && !dl_write_inline())
		pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
}

/* A timer while storage is failing: asks the writer to retry its cut. */
static void
dl_retry_cb(evutil_socket_t fd, short events, void *arg)
{
	struct timeval	tv = { DL_RETRY_MS / 1000, 0 };

	if (!dl.err_active)
		return;
	pthread_mutex_lock(&dl.mtx);
	if (dl.r_need_repair) {
		dl.w_retry = 1;
		pthread_cond_signal(&dl.wcond);
	}
	pthread_mutex_unlock(&dl.mtx);
	evtimer_add(dl.ev_retry, &tv);
}

/* Starts a snapshot if the files are over half the budget. */
static void
dl_maybe_snapshot(void)
{
	uint64_t	bytes;
	size_t		closed;

	if (dl.snap_inflight || dl.closing || dl.err_active)
		return;
	/* After a failed snapshot, not in a tight loop: once a second. */
	if (dl.snap_failed_ms != 0 &&
	    dl_mono_ms() - dl.snap_failed_ms < DL_RETRY_MS)
		return;
	pthread_mutex_lock(&dl.seg_mtx);
	bytes = dl.disk_bytes;
	closed = dl.nsegs > 0 ? dl.nsegs - 1 : 0;
	pthread_mutex_unlock(&dl.seg_mtx);
	pthread_mutex_lock(&dl.mtx);
	bytes += dl.open_buf.len;
	pthread_mutex_unlock(&dl.mtx);
	/* Only closed segments can be dropped; without one it would be in vain. */
	if (closed > 0 && bytes > dl.opts.max_bytes / 2)
		(void)disklog_snapshot();
}

/* The writer made progress, failed, or finished a snapshot. */
static void
dl_done_cb(evutil_socket_t fd, short events, void *arg)
{
	unsigned	 r_epoch, err_epoch;
	uint64_t	 done, snap_seq;
	int		 err_new, err, snap_new, snap_err;
	const char	*op;

	pthread_mutex_lock(&dl.mtx);
	r_epoch = dl.r_epoch;
	done = dl.r_done;
	err_new = dl.r_err_new;
	err = dl.r_err;
	op = dl.r_err_op;
	err_epoch = dl.r_err_epoch;
	dl.r_err_new = 0;
	snap_new = dl.r_snap_new;
	snap_err = dl.r_snap_err;
	snap_seq = dl.r_snap_seq;
	dl.r_snap_new = 0;
	pthread_mutex_unlock(&dl.mtx);

	if (r_epoch == dl.epoch) {
		if (dl.err_active && !err_new && done > dl.done_seq) {
			log_info("disk log: writing works again (seq %" PRIu64
			    ")", done);
			dl.err_active = 0;
		}
		dl_complete(done);
	}
	if (err_new && err_epoch == dl.epoch)
		dl_failed(err, op, done);
	if (snap_new) {
		dl.snap_inflight = 0;
		free(dl.snap_error);
		dl.snap_error = NULL;
		dl.snap_failed_ms = 0;
		if (snap_err == 0)
			dl.snaps_written++;
		else if (snap_err != ECANCELED) {
			dl.snap_failed_ms = dl_mono_ms();
			dl.snap_error = xasprintf("snapshot at seq %" PRIu64
			    " failed: %s", snap_seq, strerror(snap_err));
			log_error("disk log: %s", dl.snap_error);
		}
	}
	if (dl.watch != NULL)
		dl.watch(dl.watch_arg, dl.done_seq, 0, NULL, 0, NULL, 0);
	dl_maybe_snapshot();
}

/* Read results: callbacks on the loop. */
static void
dl_read_done_cb(evutil_socket_t fd, short events, void *arg)
{
	struct dl_rjobs	 done;
	struct dl_rjob	*j;

	TAILQ_INIT(&done);
	pthread_mutex_lock(&dl.rmtx);
	TAILQ_CONCAT(&done, &dl.rdone, entry);
	pthread_mutex_unlock(&dl.rmtx);
	while ((j = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, j, entry);
		j->cb(j->arg, j->error, &j->page);
		json_decref(j->page.records);
		free(j);
	}
}

/* Queues a read. */
int
disklog_read(uint64_t after_seq, unsigned limit, size_t max_bytes,
    disklog_read_cb cb, void *arg)
{
	struct dl_rjob	*j;

	if (!dl.is_open || dl.closing)
		return -1;
	j = xcalloc(1, sizeof *j);
	j->after = after_seq;
	j->upto = dl.done_seq;
	j->limit = limit == 0 ? 1 : limit;
	j->max_bytes = max_bytes;
	j->cb = cb;
	j->arg = arg;
	pthread_mutex_lock(&dl.rmtx);
	TAILQ_INSERT_TAIL(&dl.rtodo, j, entry);
	pthread_cond_signal(&dl.rcond);
	pthread_mutex_unlock(&dl.rmtx);
	return 0;
}

/* Sets the watch. */
void
disklog_watch(disklog_watch_cb cb, void *arg)
{
	dl.watch = cb;
	dl.watch_arg = arg;
}

/* Starts a snapshot of every module. */
int
disklog_snapshot(void)
{
	struct dl_snapjob	*job;
	json_t			*mods, *body, *st;
	uint64_t		 seq = dl.next_seq - 1;
	size_t			 i;
	char			*text;

	if (!dl.is_open || dl.closing || dl.snap_inflight || seq == 0)
		return -1;
	mods = json_object();
	for (i = 0; i < dl_nmodules; i++) {
		if (dl_modules[i]->snapshot == NULL)
			continue;
		if ((st = dl_modules[i]->snapshot()) == NULL)
			st = json_null();
		json_object_set_new(mods, dl_modules[i]->name, st);
	}
	body = json_pack("{s:I, s:o}", "seq", (json_int_t)seq, "modules", mods);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL || strlen(text) > LOGFMT_MAX_SNAPSHOT) {
		free(dl.snap_error);
		dl.snap_error = xasprintf("snapshot at seq %" PRIu64 " is over "
		    "%llu bytes", seq, (unsigned long long)LOGFMT_MAX_SNAPSHOT);
		log_error("disk log: %s", dl.snap_error);
		free(text);
		return -1;
	}
	job = xcalloc(1, sizeof *job);
	job->body = text;
	job->len = strlen(text);
	job->seq = seq;
	job->epoch = dl.epoch;
	pthread_mutex_lock(&dl.mtx);
	dl.snapjob = job;
	pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
	dl.snap_inflight = 1;
	return 0;
}

/* Returns the last seq given out. */
uint64_t
disklog_last_seq(void)
{
	return dl.next_seq > 0 ? dl.next_seq - 1 : 0;
}

/* Returns the last seq done. */
uint64_t
disklog_done_seq(void)
{
	return dl.done_seq;
}

/* Returns why the last append was refused. */
int
disklog_error(void)
{
	return dl.append_err;
}

/* An error state as JSON. */
static json_t *
dl_error_json(const struct dl_error *e)
{
	return json_pack("{s:i, s:s, s:s, s:I}", "errno", e->err, "error",
	    strerror(e->err), "op", e->op != NULL ? e->op : "?",
	    "since_ms", (json_int_t)e->since_ms);
}

/* State for daemon.status. */
json_t *
disklog_status(void)
{
	json_t		*st;
	uint64_t	 bytes, snap_seq, snap_bytes, first;
	size_t		 nsegs;
	char		 id[17];

	if (dl.dir == NULL)
		return json_pack("{s:b}", "open", 0);
	pthread_mutex_lock(&dl.seg_mtx);
	bytes = dl.disk_bytes;
	nsegs = dl.nsegs;
	snap_seq = dl.snap_seq;
	snap_bytes = dl.snap_bytes;
	first = nsegs > 0 ? dl.segs[0]->first_seq : snap_seq + 1;
	pthread_mutex_unlock(&dl.seg_mtx);
	snprintf(id, sizeof id, "%016" PRIx64, dl.log_id);
	st = json_pack("{s:b, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:b, s:I, s:I, s:I, s:s, s:I, s:I}",
	    "open", dl.is_open && !dl.closing,
	    "dir", dl.dir,
	    "log_id", id,
	    "segments", (json_int_t)nsegs,
	    "bytes", (json_int_t)bytes,
	    "max_bytes", (json_int_t)dl.opts.max_bytes,
	    "segment_bytes", (json_int_t)dl_seg_limit(&dl.opts),
	    "first_seq", (json_int_t)first,
	    "last_seq", (json_int_t)dl.done_seq,
	    "next_seq", (json_int_t)dl.next_seq,
	    "fsync", dl.opts.fsync,
	    "commit_delay_us", (json_int_t)dl.opts.commit_delay_us,
	    "appends", (json_int_t)dl.appends,
	    "failed", (json_int_t)dl.failed,
	    "previous_shutdown", dl.prev_shutdown != NULL ?
		dl.prev_shutdown : "new",
	    "in_flight", (json_int_t)(dl.next_seq - 1 - dl.done_seq),
	    "storage_errors", (json_int_t)dl.err_count);
	pthread_mutex_lock(&dl.mtx);
	json_object_set_new(st, "records", json_integer((json_int_t)dl.s_records));
	json_object_set_new(st, "batches", json_integer((json_int_t)dl.s_batches));
	json_object_set_new(st, "inline_batches",
	    json_integer((json_int_t)dl.inline_batches));
	json_object_set_new(st, "fsyncs", json_integer((json_int_t)dl.s_fsyncs));
	json_object_set_new(st, "bytes_written", json_integer((json_int_t)dl.s_bytes));
	json_object_set_new(st, "largest_batch", json_integer((json_int_t)dl.s_max_batch));
	json_object_set_new(st, "queued_bytes", json_integer((json_int_t)dl.open_buf.len));
	pthread_mutex_unlock(&dl.mtx);
	json_object_set_new(st, "over_budget", json_boolean(bytes > dl.opts.max_bytes));
	json_object_set_new(st, "snapshot", snap_seq == 0 ? json_null() :
	    json_pack("{s:I, s:I, s:I}", "seq", (json_int_t)snap_seq, "bytes",
	    (json_int_t)snap_bytes, "written", (json_int_t)dl.snaps_written));
	json_object_set_new(st, "snapshot_error", dl.snap_error != NULL ?
	    json_string(dl.snap_error) : json_null());
	json_object_set_new(st, "replay", json_pack("{s:I, s:I, s:I, s:I}",
	    "records", (json_int_t)dl.replayed, "ms", (json_int_t)dl.replay_ms,
	    "snapshot_seq", (json_int_t)dl.restored_seq, "parsed_ahead",
	    (json_int_t)dl.replayed_ahead));
	json_object_set_new(st, "torn_tail", dl.torn != NULL ?
	    json_incref(dl.torn) : json_null());
	json_object_set_new(st, "repaired", dl.repaired != NULL ?
	    json_incref(dl.repaired) : json_null());
	json_object_set_new(st, "storage_error", dl.err_active ?
	    dl_error_json(&dl.err_now) : json_null());
	json_object_set_new(st, "last_storage_error", dl.err_count > 0 ?
	    dl_error_json(&dl.err_last) : json_null());
	return st;
}

/* Applies changed options. */
void
disklog_reconfigure(const struct disklog_opts *o)
{
	dl.opts.segment_bytes = o->segment_bytes;
	dl.opts.max_bytes = o->max_bytes;
	dl.opts.fsync = o->fsync;
	dl.opts.commit_delay_us = o->commit_delay_us;
	pthread_mutex_lock(&dl.mtx);
	dl.w_opts = dl.opts;
	pthread_mutex_unlock(&dl.mtx);
}

/* ---- open: restore, replay, cut or refuse, repair ---- */

/*
 * Parse-ahead. Parsing the JSON payloads is nearly all of a replay's time,
 * so for a large segment a helper thread scans the same file with its own
 * reader and parses chunks of DL_PA_CHUNK records for the loop thread,
 * which takes their payloads in order. The two share the work as it
 * comes: of the next DL_PA_RING - 1 chunks ahead of the loop, the helper
 * claims the furthest one nobody has claimed, and the loop claims and
 * parses any chunk it reaches that the helper has not. So the helper works
 * well ahead, the loop rarely waits for it, and whichever thread is faster
 * (the loop also applies every record) does more.
 *
 * The loop's own scan stays the only judge of the file. The helper hops
 * over records to reach a chunk without checking them, then checks the
 * chunk's own records before it parses them; it only ever offers
 * payloads, taken for the seq and offset the loop itself found valid, and
 * whatever it did not parse (it stopped early, a record was not valid
 * JSON) the loop parses and judges itself. The helper frees what it
 * parsed once the loop is past it, so the two threads never free into
 * each other's malloc arena. It is joined before the segment's scan
 * result is acted on.
 */
#define DL_PA_CHUNK	256		/* records per chunk */
#define DL_PA_RING	16		/* chunks the window holds */
#define DL_PA_MIN_BYTES	(256 * 1024)	/* smaller segments: no helper */
#define DL_PA_SPIN_NS	200000		/* the loop spins before it sleeps */
#if defined(__x86_64__) || defined(__i386__)
#define DL_CPU_RELAX()	__builtin_ia32_pause()
#elif defined(__aarch64__)
#define DL_CPU_RELAX()	__asm__ __volatile__("yield")
#else
#define DL_CPU_RELAX()	do { } while (0)
#endif

enum dl_pa_state {
	DL_PA_FREE = 0,
	DL_PA_BUSY,			/* the helper parses it */
	DL_PA_READY,			/* the helper parsed it */
	DL_PA_LOOP,			/* the loop parses it */
};

struct dl_pa_chunk {
	uint64_t	 k;		/* chunk number in the segment */
	int		 state;		/* enum dl_pa_state */
	unsigned	 n;		/* records the helper parsed */
	json_t		*p[DL_PA_CHUNK]; /* NULL: the loop parses it */
	uint64_t	 off[DL_PA_CHUNK]; /* where the helper found each */
};

struct dl_pa {
	pthread_t		 thr;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	int			 fd;
	uint64_t		 base;		/* the segment's first seq */
	uint64_t		 snap_seq;
	uint64_t		 loop_k;	/* the loop's chunk */
	int			 loop_mine;	/* ... which it parses itself */
	int			 stop;		/* the loop gave up: end now */
	int			 done;		/* the helper has ended */
	struct dl_pa_chunk	 ring[DL_PA_RING];
	/* The helper's own: chunk starts found so far, the segment's end. */
	uint64_t		*starts;
	uint64_t		 nstarts;
	uint64_t		 hop_pos, hop_seq;
	uint64_t		 nchunks;	/* UINT64_MAX until the end is seen */
};

/* Parses a payload to replay, or NULL if it needs none or is not JSON. */
static json_t *
dl_pa_parse(const struct logfmt_record *rec, uint64_t snap_seq)
{
	const struct disklog_module	*m;

	if (rec->seq <= snap_seq ||
	    (m = dl_module_for(rec->type, rec->type_len)) == NULL ||
	    m->replay == NULL)
		return NULL;
	return jsonfast_loadb(rec->data, rec->data_len, DL_JSON, NULL);
}

/* Frees what a chunk holds. */
static void
dl_pa_clear(struct dl_pa_chunk *c)
{
	unsigned	i;

	for (i = 0; i < c->n; i++)
		json_decref(c->p[i]);
	c->n = 0;
}

/*
 * The helper's claim: the furthest unclaimed chunk in the window, or -1.
 * A slot whose chunk the loop is past is free again. Under pa->mtx.
 */
static int64_t
dl_pa_claimable(struct dl_pa *pa)
{
	struct dl_pa_chunk	*c;
	uint64_t		 k;

	for (k = pa->loop_k + DL_PA_RING - 1; k > pa->loop_k; k--) {
		if (k >= pa->nchunks)
			continue;
		c = &pa->ring[k % DL_PA_RING];
		if (c->state == DL_PA_FREE || c->k < pa->loop_k)
			return (int64_t)k;
	}
	return -1;
}

/*
 * Moves the helper's reader to the start of chunk k, hopping over records
 * unchecked and noting each chunk's start. Returns 0, or -1 at the end of
 * the segment (then nchunks is known) or at a record that cannot be hopped.
 */
static int
dl_pa_seek(struct dl_pa *pa, struct logscan_reader *rd, uint64_t k,
    uint64_t *pos)
{
	size_t	sz;

	while (pa->nstarts <= k) {
		if (pa->hop_seq - pa->base == pa->nstarts * DL_PA_CHUNK) {
			if (pa->hop_pos >= rd->size) {
				pa->nchunks = pa->nstarts;
				return -1;
			}
			pa->starts = xreallocarray(pa->starts, pa->nstarts + 1,
			    sizeof *pa->starts);
			pa->starts[pa->nstarts++] = pa->hop_pos;
			continue;
		}
		if ((sz = logscan_record_size_at(rd, pa->hop_pos)) == 0) {
			if (pa->hop_pos >= rd->size)
				pa->nchunks = pa->nstarts;
			return -1;
		}
		pa->hop_pos += sz;
		pa->hop_seq++;
	}
	*pos = pa->starts[k];
	return 0;
}

/* The helper: claims chunks ahead of the loop and parses them. */
static void *
dl_pa_main(void *arg)
{
	struct dl_pa		*pa = arg;
	struct dl_pa_chunk	*c;
	struct logscan_reader	 rd;
	struct logfmt_record	 rec;
	struct stat		 sb;
	const char		*why;
	uint64_t		 pos, seq;
	int64_t			 k;
	int			 st;

	if (fstat(pa->fd, &sb) != 0)
		goto out;
	logscan_reader_init(&rd, pa->fd, (uint64_t)sb.st_size);
	pa->hop_pos = LOGFMT_HEADER_SIZE;
	pa->hop_seq = pa->base;
	for (;;) {
		pthread_mutex_lock(&pa->mtx);
		while (!pa->stop && (k = dl_pa_claimable(pa)) < 0)
			pthread_cond_wait(&pa->cv, &pa->mtx);
		if (pa->stop) {
			pthread_mutex_unlock(&pa->mtx);
			break;
		}
		c = &pa->ring[k % DL_PA_RING];
		c->k = (uint64_t)k;
		c->state = DL_PA_BUSY;
		pthread_mutex_unlock(&pa->mtx);
		/* The loop reads p and n only once the chunk is ready. */
		dl_pa_clear(c);
		if (dl_pa_seek(pa, &rd, (uint64_t)k, &pos) == 0) {
			seq = pa->base + (uint64_t)k * DL_PA_CHUNK;
			while (c->n < DL_PA_CHUNK && pos < rd.size) {
				/* Checked: only a valid record is parsed. */
				if ((st = logscan_record_at(&rd, pos, &rec,
				    &why)) < 0 || st != LOGFMT_OK ||
				    rec.seq != seq)
					break;
				c->off[c->n] = pos;
				c->p[c->n++] = dl_pa_parse(&rec, pa->snap_seq);
				pos += rec.size;
				seq++;
			}
		}
		pthread_mutex_lock(&pa->mtx);
		__atomic_store_n(&c->state, DL_PA_READY, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&pa->cv);
		pthread_mutex_unlock(&pa->mtx);
		if (c->n == 0 && pa->nchunks == UINT64_MAX)
			break;	/* a record it cannot get past: the rest is the loop's */
	}
	logscan_reader_release(&rd);
out:
	pthread_mutex_lock(&pa->mtx);
	pa->done = 1;
	pthread_cond_broadcast(&pa->cv);
	pthread_mutex_unlock(&pa->mtx);
	return NULL;
}

/* The CPUs this process may run on. */
static long
dl_cpus(void)
{
#ifdef CPU_COUNT
	cpu_set_t	set;

	if (sched_getaffinity(0, sizeof set, &set) == 0)
		return CPU_COUNT(&set);
#endif
	return sysconf(_SC_NPROCESSORS_ONLN);
}

/* Starts a helper for a segment worth one, or returns NULL. */
static struct dl_pa *
dl_pa_start(const char *name, uint64_t base, uint64_t snap_seq)
{
	struct dl_pa	*pa;
	struct stat	 sb;
	int		 fd;

	if (dl_cpus() < 2 || dl_nmodules == 0)
		return NULL;
	if ((fd = openat(dl.dirfd, name, O_RDONLY | O_CLOEXEC |
	    O_NOFOLLOW)) == -1)
		return NULL;
	if (fstat(fd, &sb) != 0 || sb.st_size < DL_PA_MIN_BYTES) {
		close(fd);
		return NULL;
	}
	pa = xcalloc(1, sizeof *pa);
	pa->fd = fd;
	pa->base = base;
	pa->snap_seq = snap_seq;
	pa->nchunks = UINT64_MAX;
	/* The loop starts on chunk 0, its own. */
	pa->loop_mine = 1;
	pa->ring[0].state = DL_PA_LOOP;
	pthread_mutex_init(&pa->mtx, NULL);
	pthread_cond_init(&pa->cv, NULL);
	if (pthread_create(&pa->thr, NULL, dl_pa_main, pa) != 0) {
		pthread_cond_destroy(&pa->cv);
		pthread_mutex_destroy(&pa->mtx);
		close(fd);
		free(pa);
		return NULL;
	}
	return pa;
}

/*
 * Waits a little for the helper to finish a chunk without sleeping: it is
 * usually nearly done, and a sleep and a wake-up cost more than that.
 */
static void
dl_pa_spin(struct dl_pa_chunk *c)
{
	struct timespec	t0, t;
	unsigned	i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 1; __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == DL_PA_BUSY;
	    i++) {
		if (i % 64 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000000L +
			    (t.tv_nsec - t0.tv_nsec) > DL_PA_SPIN_NS)
				return;
		}
		DL_CPU_RELAX();
	}
}

/*
 * The helper's chunk holding seq, ready, or NULL if the loop parses that
 * chunk itself. Called for every record of the segment, in order; on
 * reaching a new chunk it claims it, or waits for the helper's.
 */
static struct dl_pa_chunk *
dl_pa_chunk_of(struct dl_pa *pa, uint64_t seq)
{
	struct dl_pa_chunk	*c;
	uint64_t		 k;

	if (pa == NULL || seq < pa->base)
		return NULL;
	k = (seq - pa->base) / DL_PA_CHUNK;
	c = &pa->ring[k % DL_PA_RING];
	if (k != pa->loop_k) {
		/* A new chunk: the helper's if it claimed it, else ours. */
		pthread_mutex_lock(&pa->mtx);
		pa->loop_k = k;
		pa->loop_mine = !(c->k == k && (c->state == DL_PA_BUSY ||
		    c->state == DL_PA_READY));
		if (pa->loop_mine) {
			c->k = k;
			c->state = DL_PA_LOOP;
		}
		pthread_cond_broadcast(&pa->cv);	/* the window moved */
		pthread_mutex_unlock(&pa->mtx);
		if (!pa->loop_mine) {
			dl_pa_spin(c);
			pthread_mutex_lock(&pa->mtx);
			while (c->state != DL_PA_READY && !pa->done)
				pthread_cond_wait(&pa->cv, &pa->mtx);
			if (c->state != DL_PA_READY)
				pa->loop_mine = 1;
			pthread_mutex_unlock(&pa->mtx);
		}
	}
	/* Ready: the helper leaves it alone until the loop is past it. */
	return pa->loop_mine ? NULL : c;
}

/*
 * The slot of the record at seq and off if the helper checked it there
 * (and parsed it, when it needed parsing), or NULL.
 */
static json_t **
dl_pa_slot(struct dl_pa *pa, uint64_t seq, uint64_t off)
{
	struct dl_pa_chunk	*c;
	uint64_t		 idx;

	if ((c = dl_pa_chunk_of(pa, seq)) == NULL)
		return NULL;
	idx = (seq - pa->base) % DL_PA_CHUNK;
	return idx < c->n && c->off[idx] == off ? &c->p[idx] : NULL;
}

/*
 * The helper's payload for the record at seq and off, or NULL if the loop
 * must parse it.
 */
static json_t *
dl_pa_take(struct dl_pa *pa, uint64_t seq, uint64_t off)
{
	json_t	**p = dl_pa_slot(pa, seq, off);

	return p != NULL ? json_incref(*p) : NULL;
}

/* Stops and joins the helper, and frees what it parsed. */
static void
dl_pa_end(struct dl_pa *pa)
{
	unsigned	i;

	if (pa == NULL)
		return;
	pthread_mutex_lock(&pa->mtx);
	pa->stop = 1;
	pthread_cond_broadcast(&pa->cv);
	pthread_mutex_unlock(&pa->mtx);
	pthread_join(pa->thr, NULL);
	for (i = 0; i < DL_PA_RING; i++)
		dl_pa_clear(&pa->ring[i]);
	pthread_cond_destroy(&pa->cv);
	pthread_mutex_destroy(&pa->mtx);
	close(pa->fd);
	free(pa->starts);
	free(pa);
}

struct dl_replay {
	struct dl_seg	*seg;
	struct dl_pa	*pa;		/* parse-ahead, or NULL */
	uint64_t	 snap_seq;
	uint64_t	 count;
	uint64_t	 ahead;		/* payloads the helper parsed */
	char		*why;		/* a module refused a record */
};

/* True if the helper checked the record with seq at off (logscan). */
static int
dl_pa_checked(void *arg, uint64_t seq, uint64_t off)
{
	struct dl_replay	*rp = arg;

	return dl_pa_slot(rp->pa, seq, off) != NULL;
}

/* logscan callback: indexes a record and replays it into its module. */
static int
dl_replay_cb(void *arg, const struct logfmt_record *rec, uint64_t off)
{
	struct dl_replay		*rp = arg;
	const struct disklog_module	*m;
	json_error_t			 jerr;
	json_t				*payload;
	char				 type[LOGFMT_MAX_TYPE + 1];
	int				 r;

	dl_seg_index(rp->seg, rec->seq, off);
	payload = dl_pa_take(rp->pa, rec->seq, off);
	if (rec->seq <= rp->snap_seq) {
		json_decref(payload);
		return 0;
	}
	rp->count++;
	if ((m = dl_module_for(rec->type, rec->type_len)) == NULL ||
	    m->replay == NULL) {
		json_decref(payload);
		return 0;
	}
	memcpy(type, rec->type, rec->type_len);
	type[rec->type_len] = '\0';
	if (payload != NULL)
		rp->ahead++;
	else
		payload = jsonfast_loadb(rec->data, rec->data_len, DL_JSON, &jerr);
	if (payload == NULL) {
		rp->why = xasprintf("record seq %" PRIu64 " holds no valid JSON "
		    "(%s)", rec->seq, jerr.text);
		return -1;
	}
	dl_replaying = rec;
	r = m->replay(rec->seq, rec->ts_ms, type, payload);
	dl_replaying = NULL;
	json_decref(payload);
	if (r != 0) {
		rp->why = xasprintf("module '%s' refused record seq %" PRIu64
		    " (%s)", m->name, rec->seq, type);
		return -1;
	}
	return 0;
}

/* Moves a file into STATE/log/damaged under a name that says when. */
static int
dl_move_aside(const char *name, json_t *moved, char **cause)
{
	char	*to;

	if (mkdirat(dl.dirfd, "damaged", 0700) != 0 && errno != EEXIST) {
		*cause = xasprintf("cannot create %s/damaged: %s", dl.dir,
		    strerror(errno));
		return -1;
	}
	to = xasprintf("damaged/%s.%lld", name, (long long)time(NULL));
	if (renameat(dl.dirfd, name, dl.dirfd, to) != 0) {
		*cause = xasprintf("cannot move %s/%s to %s/%s: %s", dl.dir,
		    name, dl.dir, to, strerror(errno));
		free(to);
		return -1;
	}
	log_warn("disk log: moved %s/%s to %s/%s", dl.dir, name, dl.dir, to);
	json_array_append_new(moved, json_string(to));
	free(to);
	return 0;
}

/* Copies the first len bytes of the moved-aside file into a new one named name. */
static int
dl_copy_prefix(const char *from, const char *name, uint64_t len, char **cause)
{
	char		 buf[65536];
	uint64_t	 off = 0;
	long long	 n;
	int		 in, out;

	in = openat(dl.dirfd, from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	out = openat(dl.dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	if (in == -1 || out == -1)
		goto fail;
	while (off < len) {
		n = logscan_pread(in, buf, len - off < sizeof buf ?
		    (size_t)(len - off) : sizeof buf, off);
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			goto fail;
		}
		if (dl_pwrite_all(out, buf, (size_t)n, off) != 0)
			goto fail;
		off += (uint64_t)n;
	}
	if (dl_datasync(out) != 0)
		goto fail;
	close(in);
	close(out);
	return 0;
fail:
	*cause = xasprintf("cannot copy the good part of %s/%s: %s", dl.dir,
	    name, strerror(errno));
	if (in != -1)
		close(in);
	if (out != -1)
		close(out);
	return -1;
}

/* Forgets the listed segments from the n-th on (their names too). */
static void
dl_dir_cut(struct logscan_dir *d, size_t n)
{
	while (d->nsegs > n)
		free(d->segs[--d->nsegs].name);
}

/*
 * --repair: keeps segment i up to good_end (a copy; the damaged original is
 * moved aside) and moves every later segment aside. Never deletes.
 */
static int
dl_repair(struct logscan_dir *d, size_t i, uint64_t good_end, int header_ok,
    const char *why, char **cause)
{
	json_t	*moved = json_array();
	char	*aside;
	size_t	 j;

	for (j = d->nsegs; j > i + 1; j--) {
		if (dl_move_aside(d->segs[j - 1].name, moved, cause) != 0)
			goto fail;
	}
	if (dl_move_aside(d->segs[i].name, moved, cause) != 0)
		goto fail;
	if (header_ok && good_end > LOGFMT_HEADER_SIZE) {
		aside = xstrdup(json_string_value(json_array_get(moved,
		    json_array_size(moved) - 1)));
		if (dl_copy_prefix(aside, d->segs[i].name, good_end,
		    cause) != 0) {
			free(aside);
			goto fail;
		}
		free(aside);
	}
	(void)fsync(dl.dirfd);
	json_decref(dl.repaired);
	dl.repaired = json_pack("{s:s, s:s, s:I, s:o}", "file", d->segs[i].name,
	    "why", why, "kept_bytes", (json_int_t)(header_ok ? good_end : 0),
	    "moved", moved);
	return 0;
fail:
	json_decref(moved);
	return -1;
}

/* The message that refuses a start. */
static char *
dl_refuse(const char *file, uint64_t offset, const char *why, uint64_t good)
{
	char	*state = paths_dirname(dl.dir), *msg;

	msg = xasprintf("the disk log is damaged: %s/%s at offset %" PRIu64
	    ": %s. gbrd will not start and skip records silently. To keep "
	    "every record up to seq %" PRIu64 " and move the damaged files "
	    "aside (into %s/damaged), run: gbrd --repair -S %s", dl.dir, file,
	    offset, why, good, dl.dir, state);
	free(state);
	return msg;
}

/* Reads the newest valid snapshot and restores the modules from it. */
static int
dl_open_snapshot(struct logscan_dir *d, int repair, char **cause)
{
	struct logfmt_snaphdr	 h;
	json_error_t		 jerr;
	json_t			*root, *mods = NULL, *sec;
	char			*body, *why;
	size_t			 len, i, k;
	json_t			*moved;

	for (k = d->nsnaps; k > 0; k--) {
		const char	*name = d->snaps[k - 1].name;

		root = NULL;
		if (logscan_snapshot(dl.dirfd, name, &h, &body, &len, &why) == 0) {
			if (h.seq != d->snaps[k - 1].seq)
				why = xasprintf("header says seq %" PRIu64
				    " but the name says %" PRIu64, h.seq,
				    d->snaps[k - 1].seq);
			else if (dl.log_id != 0 && h.log_id != dl.log_id)
				why = xstrdup("belongs to another log");
			else if ((root = jsonfast_loadb(body, len, DL_JSON,
			    &jerr)) == NULL)
				why = xasprintf("body is not JSON: %s at byte %d",
				    jerr.text, jerr.position);
			else if (!json_is_object(mods = json_object_get(root,
			    "modules")))
				why = xstrdup("body is not a snapshot object "
				    "(no \"modules\" object)");
			free(body);
		}
		if (why != NULL) {
			json_decref(root);
			if (!repair) {
				char	*state = paths_dirname(dl.dir);

				*cause = xasprintf("the disk log's snapshot %s/%s "
				    "is damaged: %s. gbrd will not start without "
				    "it. To fall back to an older snapshot (or "
				    "none) and move it aside, run: gbrd --repair "
				    "-S %s", dl.dir, name, why, state);
				free(state);
				free(why);
				return -1;
			}
			log_warn("disk log: snapshot %s/%s is damaged: %s", dl.dir,
			    name, why);
			free(why);
			moved = json_array();
			if (dl_move_aside(name, moved, cause) != 0) {
				json_decref(moved);
				return -1;
			}
			json_decref(moved);
			continue;
		}
		dl.log_id = h.log_id;
		for (i = 0; i < dl_nmodules; i++) {
			sec = json_object_get(mods, dl_modules[i]->name);
			if (sec == NULL || dl_modules[i]->restore == NULL)
				continue;
			if (dl_modules[i]->restore(sec) != 0) {
				*cause = xasprintf("module '%s' could not restore "
				    "its state from %s/%s", dl_modules[i]->name,
				    dl.dir, name);
				json_decref(root);
				return -1;
			}
		}
		json_decref(root);
		dl.snap_seq = dl.restored_seq = h.seq;
		dl.snap_bytes = LOGFMT_HEADER_SIZE + len;
		dl.snap_name = xstrdup(name);
		return 0;
	}
	return 0;
}

/*
 * Scans every segment in order, replaying records after the snapshot; cuts
 * a torn tail; refuses (or repairs) any other damage.
 */
static int
dl_open_segments(struct logscan_dir *d, int repair, char **cause)
{
	struct logscan_seg	 res;
	struct dl_replay	 rp;
	struct dl_seg		*s;
	uint64_t		 need = 0, good, limit_first;
	size_t			 i, first = 0;
	char			*why;
	int			 fd, last;
	json_t			*moved;

	/* Segments wholly covered by the snapshot are no longer needed. */
	while (first + 1 < d->nsegs && d->segs[first + 1].seq <= dl.snap_seq + 1) {
		if (unlinkat(dl.dirfd, d->segs[first].name, 0) == 0)
			log_info("disk log: removed %s, covered by the snapshot",
			    d->segs[first].name);
		first++;
	}
	for (i = first; i < d->nsegs; i++) {
		last = i + 1 == d->nsegs;
		good = need > 0 ? need - 1 : dl.snap_seq;
		/* The seqs must follow on, except where the snapshot covers a hole. */
		limit_first = dl.snap_seq + 1;
		if (i == first ? (d->segs[i].seq > limit_first) :
		    (d->segs[i].seq != need && (d->segs[i].seq > limit_first ||
		    need > limit_first))) {
			why = xasprintf("starts at seq %" PRIu64 " but seq %" PRIu64
			    " was expected (records are missing)",
			    d->segs[i].seq, i == first ? limit_first : need);
			if (!repair) {
				*cause = dl_refuse(d->segs[i].name, 0, why, good);
				free(why);
				return -1;
			}
			if (dl_repair(d, i, 0, 0, why, cause) != 0) {
				free(why);
				return -1;
			}
			log_warn("disk log: repaired: %s", why);
			free(why);
			dl_dir_cut(d, i);
			break;
		}
		s = dl_seg_new(d->segs[i].name, d->segs[i].seq, 0);
		memset(&rp, 0, sizeof rp);
		rp.seg = s;
		rp.snap_seq = dl.snap_seq;
		rp.pa = dl_pa_start(d->segs[i].name, d->segs[i].seq,
		    dl.snap_seq);
		logscan_segment_trusting(dl.dirfd, d->segs[i].name, dl.log_id,
		    d->segs[i].seq, last, dl_replay_cb, rp.pa != NULL ?
		    dl_pa_checked : NULL, &rp, &res);
		dl_pa_end(rp.pa);
		dl.replayed += rp.count;
		dl.replayed_ahead += rp.ahead;
		if (res.header_ok && dl.log_id == 0)
			dl.log_id = res.hdr.log_id;
		if (last)
			dl.prev_shutdown = res.header_ok && res.hdr.clean ?
			    "clean" : "crash";
		if (res.status == LOGSCAN_OK) {
			s->size = res.size;
			s->last_seq = res.last_seq;
			dl_seg_push(s);
			need = res.last_seq + 1;
			continue;
		}
		if (res.status == LOGSCAN_TORN) {
			/* The end of a write a crash cut short: cut and report. */
			log_warn("disk log: %s/%s: %s; cutting it off",
			    dl.dir, d->segs[i].name, res.why);
			json_decref(dl.torn);
			dl.torn = json_pack("{s:s, s:I, s:I, s:s}", "file",
			    d->segs[i].name, "offset", (json_int_t)res.bad_offset,
			    "bytes", (json_int_t)(res.size - res.good_end),
			    "why", res.why);
			if (!res.header_ok) {
				moved = json_array();
				if (dl_move_aside(d->segs[i].name, moved,
				    cause) != 0) {
					json_decref(moved);
					dl_seg_free(s);
					return -1;
				}
				json_decref(moved);
				dl_seg_free(s);
				dl_dir_cut(d, i);
				break;
			}
			fd = openat(dl.dirfd, d->segs[i].name, O_WRONLY |
			    O_CLOEXEC | O_NOFOLLOW);
			if (fd == -1 || ftruncate(fd, (off_t)res.good_end) != 0 ||
			    dl_datasync(fd) != 0) {
				*cause = xasprintf("cannot cut the torn tail of "
				    "%s/%s: %s", dl.dir, d->segs[i].name,
				    strerror(errno));
				if (fd != -1)
					close(fd);
				dl_seg_free(s);
				return -1;
			}
			close(fd);
			s->size = res.good_end;
			s->last_seq = res.last_seq;
			dl_seg_push(s);
			need = res.last_seq + 1;
			continue;
		}
		/* Corruption, a module's refusal, or a read error. */
		why = rp.why != NULL ? rp.why : xstrdup(res.why);
		good = res.header_ok ? res.last_seq : good;
		if (!repair) {
			*cause = dl_refuse(d->segs[i].name, res.bad_offset, why,
			    good);
			free(why);
			dl_seg_free(s);
			return -1;
		}
		if (dl_repair(d, i, res.good_end, res.header_ok, why,
		    cause) != 0) {
			free(why);
			dl_seg_free(s);
			return -1;
		}
		log_warn("disk log: repaired %s/%s: kept %" PRIu64 " bytes (up "
		    "to seq %" PRIu64 "); damage: %s", dl.dir, d->segs[i].name,
		    res.header_ok ? res.good_end : 0, good, why);
		free(why);
		if (res.header_ok && res.good_end > LOGFMT_HEADER_SIZE) {
			s->size = res.good_end;
			s->last_seq = res.last_seq;
			dl_seg_push(s);
		} else
			dl_seg_free(s);
		dl_dir_cut(d, i + 1);
		break;
	}
	return 0;
}

/* Opens the newest segment for appending, or creates the first one. */
static int
dl_open_active(char **cause)
{
	struct logfmt_seghdr	 h;
	unsigned char		 head[LOGFMT_HEADER_SIZE], mark[8];
	struct dl_seg		*s;
	char			*name;
	int			 fd;

	/* After a repair or a hole the snapshot covers, start a fresh segment. */
	if (dl.nsegs > 0 && dl_seg_active()->last_seq + 1 == dl.next_seq) {
		s = dl_seg_active();
		fd = openat(dl.dirfd, s->name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		logfmt_clean_marker(mark, 0);
		if (fd == -1 || dl_pwrite_all(fd, mark, sizeof mark,
		    LOGFMT_CLEAN_OFFSET) != 0 || dl_datasync(fd) != 0) {
			*cause = xasprintf("cannot open %s/%s for writing: %s",
			    dl.dir, s->name, strerror(errno));
			if (fd != -1)
				close(fd);
			return -1;
		}
		dl.w_fd = fd;
		return 0;
	}
	name = logscan_seg_name(dl.next_seq);
	fd = openat(dl.dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	memset(&h, 0, sizeof h);
	h.log_id = dl.log_id;
	h.first_seq = dl.next_seq;
	h.created_ms = osdep_now_ms();
	logfmt_seghdr_encode(head, &h);
	if (fd == -1 || dl_pwrite_all(fd, head, sizeof head, 0) != 0 ||
	    dl_datasync(fd) != 0 || fsync(dl.dirfd) != 0) {
		*cause = xasprintf("cannot create %s/%s: %s", dl.dir, name,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		free(name);
		return -1;
	}
	dl.w_fd = fd;
	dl_seg_push(dl_seg_new(name, dl.next_seq, LOGFMT_HEADER_SIZE));
	free(name);
	return 0;
}

/* Frees what open set up (on failure or at close). */
static void
dl_teardown(void)
{
	size_t	i;

	for (i = 0; i < dl.nsegs; i++)
		dl_seg_free(dl.segs[i]);
	free(dl.segs);
	dl.segs = NULL;
	dl.nsegs = 0;
	if (dl.w_fd != -1)
		close(dl.w_fd);
	dl.w_fd = -1;
	if (dl.lockfd != -1)
		close(dl.lockfd);
	dl.lockfd = -1;
	if (dl.dirfd != -1)
		close(dl.dirfd);
	dl.dirfd = -1;
	if (dl.ev_done != NULL)
		event_free(dl.ev_done);
	if (dl.ev_read != NULL)
		event_free(dl.ev_read);
	if (dl.ev_retry != NULL)
		event_free(dl.ev_retry);
	if (dl.ev_kick != NULL)
		event_free(dl.ev_kick);
	dl.ev_done = dl.ev_read = dl.ev_retry = dl.ev_kick = NULL;
	free(dl.open_buf.data);
	free(dl.busy.data);
	memset(&dl.open_buf, 0, sizeof dl.open_buf);
	memset(&dl.busy, 0, sizeof dl.busy);
	free(dl.pend);
	dl.pend = NULL;
	dl.pend_cap = dl.pend_n = dl.pend_head = 0;
	free(dl.scratch);
	dl.scratch = NULL;
	dl.scratch_cap = 0;
	dl.last_len = 0;
	free(dl.snap_name);
	dl.snap_name = NULL;
	free(dl.snap_error);
	dl.snap_error = NULL;
	json_decref(dl.torn);
	json_decref(dl.repaired);
	dl.torn = dl.repaired = NULL;
	free(dl.dir);
	dl.dir = NULL;
}

/* Opens the log. */
int
disklog_open(struct event_base *base, const char *state,
    const struct disklog_opts *o, char **cause)
{
	struct logscan_dir	 d;
	pthread_condattr_t	 cattr;
	struct stat		 sb;
	uint64_t		 t0 = dl_mono_ms(), last;
	size_t			 i;
	char			 buf[64];
	int			 created = 0, fd;
	struct timespec		 pause = { 0, 10 * 1000 * 1000 };

	*cause = NULL;
	if (dl.is_open)
		fatalx("disklog_open twice");
	dl.base = base;
	dl.opts = *o;
	dl.w_opts = *o;
	dl.dir = xasprintf("%s/log", state);
	dl.epoch = 1;
	dl.prev_shutdown = NULL;
	dl.replayed = dl.replay_ms = dl.restored_seq = dl.replayed_ahead = 0;
	dl.snap_seq = dl.snap_bytes = dl.disk_bytes = 0;
	dl.log_id = 0;
	dl.w_good_seq = 0;
	dl.w_failed = dl.w_need_repair = 0;
	dl.err_active = 0;
	dl.err_count = 0;
	dl.done_seq = 0;
	dl.appends = dl.failed = 0;
	dl.s_batches = dl.s_fsyncs = dl.s_records = dl.s_bytes = 0;
	dl.inline_batches = 0;
	dl.inline_off_ms = 0;
	dl.s_max_batch = 0;
	dl.r_epoch = 0;
	dl.r_done = 0;
	dl.r_err_new = dl.r_snap_new = 0;
	dl.w_stop = dl.w_retry = dl.r_stop = 0;
	dl.closing = 0;
	dl.snap_inflight = 0;
	dl.snap_failed_ms = 0;
	dl.snaps_written = 0;
	TAILQ_INIT(&dl.rtodo);
	TAILQ_INIT(&dl.rdone);
	fault_init();

	if (stat(dl.dir, &sb) != 0)
		created = 1;
	if (paths_private_dir(dl.dir, 0, cause) != 0)
		goto fail;
	if (created) {
		/* The new folder's own entry must survive a power loss too. */
		if ((fd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
		    fsync(fd) != 0) {
			*cause = xasprintf("cannot sync %s: %s", state,
			    strerror(errno));
			if (fd != -1)
				close(fd);
			goto fail;
		}
		close(fd);
	}
	dl.dirfd = open(dl.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dl.dirfd == -1) {
		*cause = xasprintf("cannot open %s: %s", dl.dir, strerror(errno));
		goto fail;
	}
	dl.lockfd = openat(dl.dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	/*
	 * gbrctl log verify takes the lock shared for an instant to see if a
	 * daemon is live: try for a moment; another gbrd holds it for good.
	 */
	for (i = 0; dl.lockfd != -1 && i < 50; i++) {
		if (flock(dl.lockfd, LOCK_EX | LOCK_NB) == 0 ||
		    errno != EWOULDBLOCK)
			break;
		nanosleep(&pause, NULL);
	}
	if (dl.lockfd == -1 || flock(dl.lockfd, LOCK_EX | LOCK_NB) != 0) {
		*cause = xasprintf(errno == EWOULDBLOCK ? "the disk log in %s "
		    "is in use by another gbrd" : "cannot lock %s: %s", dl.dir,
		    strerror(errno));
		goto fail;
	}
	(void)unlinkat(dl.dirfd, "snap.tmp", 0);
	if (logscan_list(dl.dirfd, &d, cause) != 0)
		goto fail;
	if (dl_open_snapshot(&d, o->repair, cause) != 0 ||
	    dl_open_segments(&d, o->repair, cause) != 0) {
		logscan_dir_free(&d);
		goto fail;
	}
	logscan_dir_free(&d);
	if (dl.log_id == 0) {
		while (dl.log_id == 0) {
			if (osdep_random(&dl.log_id, sizeof dl.log_id) != 0) {
				*cause = xstrdup("no source of random bytes");
				goto fail;
			}
		}
	}
	last = dl.nsegs > 0 ? dl_seg_active()->last_seq : 0;
	dl.next_seq = (last > dl.snap_seq ? last : dl.snap_seq) + 1;
	dl.done_seq = dl.next_seq - 1;
	dl.w_good_seq = dl.done_seq;
	if (dl_open_active(cause) != 0)
		goto fail;
	dl.disk_bytes = dl.snap_bytes;
	for (i = 0; i < dl.nsegs; i++)
		dl.disk_bytes += dl.segs[i]->size;

	dl.ev_done = event_new(base, -1, 0, dl_done_cb, NULL);
	dl.ev_read = event_new(base, -1, 0, dl_read_done_cb, NULL);
	dl.ev_retry = evtimer_new(base, dl_retry_cb, NULL);
	dl.ev_kick = event_new(base, -1, 0, dl_kick_cb, NULL);
	dl.kick_pending = 0;
	if (dl.ev_done == NULL || dl.ev_read == NULL || dl.ev_retry == NULL ||
	    dl.ev_kick == NULL)
		fatalx("event_new failed");
	/* The writer's commit delay is a deadline on the monotonic clock. */
	if (pthread_condattr_init(&cattr) != 0 ||
	    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&dl.wcond, &cattr) != 0 ||
	    pthread_cond_init(&dl.rcond, NULL) != 0)
		fatalx("pthread_cond_init failed");
	pthread_condattr_destroy(&cattr);
	/* jansson seeds its hash on first use; do it before a second thread can. */
	json_object_seed(0);
	if (pthread_create(&dl.writer, NULL, dl_writer_main, NULL) != 0 ||
	    pthread_create(&dl.reader, NULL, dl_reader_main, NULL) != 0)
		fatalx("cannot start the disk log threads");
	dl.is_open = 1;
	dl.replay_ms = dl_mono_ms() - t0;
	snprintf(buf, sizeof buf, "%016" PRIx64, dl.log_id);
	log_info("disk log %s (id %s): %zu segment%s, %" PRIu64 " bytes, next "
	    "seq %" PRIu64 "; restored the snapshot at seq %" PRIu64 " and "
	    "replayed %" PRIu64 " records in %" PRIu64 " ms; previous shutdown: "
	    "%s", dl.dir, buf, dl.nsegs, dl.nsegs == 1 ? "" : "s",
	    dl.disk_bytes, dl.next_seq, dl.restored_seq, dl.replayed,
	    dl.replay_ms, dl.prev_shutdown != NULL ? dl.prev_shutdown : "new");
	return 0;
fail:
	dl_teardown();
	return -1;
}

/* Flushes, fsyncs, marks a clean shutdown and closes. */
void
disklog_close(void)
{
	struct dl_pending	e;

	if (!dl.is_open)
		return;
	dl.closing = 1;
	pthread_mutex_lock(&dl.mtx);
	dl.w_stop = 1;
	pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
	pthread_join(dl.writer, NULL);
	pthread_mutex_lock(&dl.rmtx);
	dl.r_stop = 1;
	pthread_cond_signal(&dl.rcond);
	pthread_mutex_unlock(&dl.rmtx);
	pthread_join(dl.reader, NULL);
	/* The last results, then whatever could not be written. */
	dl_done_cb(-1, 0, NULL);
	dl_read_done_cb(-1, 0, NULL);
	while (dl.pend_n > 0) {
		e = dl_pend_pop();
		free(e.copy);
		if (e.cb != NULL)
			e.cb(e.arg, ESHUTDOWN, e.seq);
	}
	if (dl.snapjob != NULL) {
		free(dl.snapjob->body);
		free(dl.snapjob);
		dl.snapjob = NULL;
	}
	pthread_cond_destroy(&dl.wcond);
	pthread_cond_destroy(&dl.rcond);
	dl.is_open = 0;
	dl.watch = NULL;
	log_info("disk log closed at seq %" PRIu64, dl.done_seq);
	dl_teardown();
}
