/*
 * The disk log's writer thread (disklog.c has the design): it takes the
 * open batch the loop filled, writes it at the end of the active segment,
 * starts a new segment where one fills up, and calls fdatasync(2) once for
 * all the durable records of a batch (group commit). After a failed write
 * or fsync it cuts the file back to the last good record before it tells
 * the loop. It also writes the snapshots the loop hands it (the file I/O
 * is in disklog-snapshot.c) and seals the active segment at shutdown.
 *
 * Once records are written it adds them to the hash chain
 * (disklog-chain.c's dl_chain_written), from the batch buffer itself.
 *
 * It does not encode records or run callbacks (disklog-append.c, on the
 * loop), and it does not read: the reader thread is disklog-read.c. The
 * loop may borrow the writer's state for one small batch (dl_write_inline
 * in disklog-append.c) while the writer sleeps, through dl_take_batch,
 * dl_write_batch and dl_put_batch here.
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "disklog-int.h"
#include "fault.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "osdep.h"

/* A batch buffer larger than this is freed after use. */
#define DL_KEEP_BUF	(8U * 1024 * 1024)

/* Reads a little-endian u32 (a record's length in a batch). */
static uint32_t
dl_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

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
	dl.r_chain = dl.w_chain;
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
void
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
			if (o->chain)
				dl_chain_written(b, chunk, p);
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
		if (o->chain)
			dl_chain_written(b, chunk, b->len);
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
 * Takes the open batch into busy, for whoever holds the writer's state
 * (the writer, or the loop writing inline), with the options in force.
 * Caller holds mtx.
 */
void
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
void
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
void *
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
			pthread_mutex_lock(&dl.mtx);
			dl.r_snap_new = 1;
			dl.r_snap_err = err;
			dl.r_snap_seq = job->seq;
			pthread_mutex_unlock(&dl.mtx);
			dl_snapjob_free(job);
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
				while (osdep_cond_timedwait(&dl.wcond, &dl.mtx,
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
