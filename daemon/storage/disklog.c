/*
 * The disk log (disklog.h, doc/DISKLOG.md). Its files own the log folder
 * STATE/log: its lock, its segments, its snapshots, the writer and reader
 * threads, and the records in flight. This file owns the state they share
 * (struct dl_state, disklog-int.h), opening and closing the log, the
 * segment table and the status; it does not append, write, read, replay,
 * snapshot or repair: disklog-int.h lists the file that does each. The
 * design, which those files divide by thread and by phase, follows.
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
 * the closed segments it covers. What grows with history goes into side
 * files the snapshot names (disklog_snapshot_file): the writer appends to
 * them from the modules' own memory, so encoding the small state is the
 * only snapshot work on the loop thread; every disk operation is on the
 * writer. A snapshot that fails is tried again later and later (backoff).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "disklog.h"
#include "disklog-int.h"
#include "fault.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "osdep.h"
#include "paths.h"
#include "xmalloc.h"

/* A sparse index entry every this many bytes of a segment. */
#define DL_INDEX_EVERY	(64U * 1024)
/* Smallest segment, whatever the options say. */
#define DL_MIN_SEGMENT	4096

const struct disklog_module *dl_modules[DL_MAX_MODULES];
size_t dl_nmodules;

struct dl_state dl = {
	.dirfd = -1, .lockfd = -1, .w_fd = -1,
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.seg_mtx = PTHREAD_MUTEX_INITIALIZER,
	.rmtx = PTHREAD_MUTEX_INITIALIZER,
};

/* The size at which a segment is closed: at most a quarter of the budget. */
uint64_t
dl_seg_limit(const struct disklog_opts *o)
{
	uint64_t	lim = o->segment_bytes;

	if (o->max_bytes / 4 < lim)
		lim = o->max_bytes / 4;
	if (lim < DL_MIN_SEGMENT)
		lim = DL_MIN_SEGMENT;
	return lim;
}

/* fdatasync where it exists. */
int
dl_datasync(int fd)
{
#ifdef HAVE_FDATASYNC
	return fdatasync(fd);
#else
	return fsync(fd);
#endif
}

/* Writes all of len bytes at off. */
int
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
const struct disklog_module *
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
void
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
struct dl_seg *
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
void
dl_seg_free(struct dl_seg *s)
{
	free(s->name);
	free(s->idx);
	free(s);
}

/* Appends an entry to the table (caller holds seg_mtx or runs alone). */
void
dl_seg_push(struct dl_seg *s)
{
	dl.segs = xreallocarray(dl.segs, dl.nsegs + 1, sizeof *dl.segs);
	dl.segs[dl.nsegs++] = s;
	dl.disk_bytes += s->size;
}

/* ---- state for callers: seqs, errors, status, options ---- */

/* Returns the last seq given out. */
uint64_t
disklog_last_seq(void)
{
	return dl.next_seq > 0 ? dl.next_seq - 1 : 0;
}

/* The oldest seq log.read can still give (segments dropped before it). */
uint64_t
disklog_first_seq(void)
{
	uint64_t	 first;

	pthread_mutex_lock(&dl.seg_mtx);
	first = dl.nsegs > 0 ? dl.segs[0]->first_seq : dl.snap_seq + 1;
	pthread_mutex_unlock(&dl.seg_mtx);
	return first;
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

/* The log's bytes on disk, for budgets shared with it. */
uint64_t
disklog_disk_bytes(uint64_t *max)
{
	uint64_t	bytes;

	*max = dl.opts.max_bytes;
	if (dl.dir == NULL)
		return 0;
	pthread_mutex_lock(&dl.seg_mtx);
	bytes = dl.disk_bytes;
	pthread_mutex_unlock(&dl.seg_mtx);
	return bytes;
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
	uint64_t	 bytes, snap_seq, snap_bytes, first, side_files, side_bytes;
	size_t		 nsegs;
	char		 id[17];

	if (dl.dir == NULL)
		return json_pack("{s:b}", "open", 0);
	pthread_mutex_lock(&dl.seg_mtx);
	bytes = dl.disk_bytes;
	nsegs = dl.nsegs;
	snap_seq = dl.snap_seq;
	snap_bytes = dl.snap_bytes;
	side_files = dl.side_files;
	side_bytes = dl.side_bytes;
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
	    json_pack("{s:I, s:I, s:I, s:I}", "seq", (json_int_t)snap_seq,
	    "bytes", (json_int_t)snap_bytes, "written",
	    (json_int_t)dl.snaps_written, "encode_ms",
	    (json_int_t)dl.snap_encode_ms));
	json_object_set_new(st, "snapshot_error", dl.snap_error != NULL ?
	    json_string(dl.snap_error) : json_null());
	json_object_set_new(st, "snapshots_failed",
	    json_integer((json_int_t)dl.snaps_failed));
	json_object_set_new(st, "side_files", json_pack("{s:I, s:I}", "files",
	    (json_int_t)side_files, "bytes", (json_int_t)side_bytes));
	json_object_set_new(st, "replay", json_pack("{s:I, s:I, s:I, s:I, "
	    "s:I}", "records", (json_int_t)dl.replayed, "ms",
	    (json_int_t)dl.replay_ms, "snapshot_seq", (json_int_t)dl.restored_seq,
	    "parsed_ahead", (json_int_t)dl.replayed_ahead, "segments_unread",
	    (json_int_t)dl.skipped_segs));
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
	dl.opts.snapshot_bytes = o->snapshot_bytes;
	dl.opts.fsync = o->fsync;
	dl.opts.commit_delay_us = o->commit_delay_us;
	pthread_mutex_lock(&dl.mtx);
	dl.w_opts = dl.opts;
	pthread_mutex_unlock(&dl.mtx);
}

/* ---- open and close ---- */

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
	struct stat		 sb;
	uint64_t		 t0 = (uint64_t)clock_mono_ms(), last;
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
	dl.skipped_segs = 0;
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
	dl.snap_failed_ms = dl.snap_backoff_ms = 0;
	dl.snaps_written = dl.snaps_failed = dl.snap_encode_ms = 0;
	dl.snap_from_bytes = 0;
	dl.side_files = dl.side_bytes = 0;
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
	if (dl_chain_open(cause) != 0 || logscan_list(dl.dirfd, &d, cause) != 0)
		goto fail;
	if (dl_open_snapshot(&d, o->repair, cause) != 0 ||
	    dl_open_segments(&d, o->repair, cause) != 0) {
		logscan_dir_free(&d);
		goto fail;
	}
	logscan_dir_free(&d);
	dl_chain_start();
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
	dl_side_count();

	dl.ev_done = event_new(base, -1, 0, dl_done_cb, NULL);
	dl.ev_read = event_new(base, -1, 0, dl_read_done_cb, NULL);
	dl.ev_retry = evtimer_new(base, dl_retry_cb, NULL);
	dl.ev_kick = event_new(base, -1, 0, dl_kick_cb, NULL);
	dl.kick_pending = 0;
	if (dl.ev_done == NULL || dl.ev_read == NULL || dl.ev_retry == NULL ||
	    dl.ev_kick == NULL)
		fatalx("event_new failed");
	/* The writer's commit delay is a deadline on the monotonic clock. */
	if (osdep_cond_init(&dl.wcond) != 0 ||
	    pthread_cond_init(&dl.rcond, NULL) != 0)
		fatalx("pthread_cond_init failed");
	/* jansson seeds its hash on first use; do it before a second thread can. */
	json_object_seed(0);
	if (pthread_create(&dl.writer, NULL, dl_writer_main, NULL) != 0 ||
	    pthread_create(&dl.reader, NULL, dl_reader_main, NULL) != 0)
		fatalx("cannot start the disk log threads");
	dl.is_open = 1;
	/* What the replay parsed and freed goes back: a wave, once. */
	if (dl.replayed > 0)
		osdep_memory_trim();
	dl.replay_ms = (uint64_t)clock_mono_ms() - t0;
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
	dl_chain_sync();
	dl_chain_anchor(1);	/* the head at shutdown */
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
		dl_snapjob_free(dl.snapjob);
		dl.snapjob = NULL;
	}
	pthread_cond_destroy(&dl.wcond);
	pthread_cond_destroy(&dl.rcond);
	dl.is_open = 0;
	dl.watch = NULL;
	log_info("disk log closed at seq %" PRIu64, dl.done_seq);
	dl_teardown();
}
