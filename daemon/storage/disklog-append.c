/*
 * The disk log on the loop thread: appends and completions (disklog.c has
 * the design). disklog_append encodes a record into a scratch buffer,
 * seals it and copies it into the open batch; the end of the loop pass
 * wakes the writer or, for a small batch nobody must fsync, writes it
 * here (dl_write_inline). When the writer reports progress the callbacks
 * of the records done run here in seq order, and the watch sees them;
 * when it reports a failure every record in flight fails and the failed
 * seqs are given out again.
 *
 * This file does no I/O of its own: writing is disklog-write.c (whose
 * state dl_write_inline borrows while the writer sleeps), snapshots are
 * disklog-snapshot.c, reads disklog-read.c.
 */
#include "gbr-config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "clock.h"
#include "disklog-int.h"
#include "log.h"
#include "logfmt.h"
#include "osdep.h"
#include "xmalloc.h"

/* Encoded bytes the open batch may hold before appends are refused. */
#define DL_MAX_QUEUE	(64U * 1024 * 1024)
/* Records waiting for their callback. */
#define DL_MAX_PENDING	(1024U * 1024)
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
struct dl_pending
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
	/* (The chain needs nothing here: the writer hashes what it wrote.) */
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
	uint64_t		 t0;
	uint64_t		 us;

	if (dl.open_buf.durable || dl.open_buf.len > DL_INLINE_MAX ||
	    dl.snapjob != NULL || dl.w_retry || dl.w_stop ||
	    (dl.w_failed && dl.open_buf.epoch == dl.w_failed_epoch) ||
	    dl.w_need_repair || dl.open_buf.epoch != dl.epoch ||
	    dl.err_active ||
	    (dl.inline_off_ms != 0 && (uint64_t)clock_mono_ms() < dl.inline_off_ms))
		return 0;
	/* A batch that would start a segment is the writer's (it syncs). */
	if (dl_seg_active()->size + dl.open_buf.len > dl_seg_limit(&dl.w_opts))
		return 0;
	dl.w_inline = 1;
	dl_take_batch(&o);
	pthread_mutex_unlock(&dl.mtx);

	t0 = clock_mono_ns();
	dl_write_batch(&dl.busy, &o);
	/* (Computed per field, a nanosecond part that went down wrapped.) */
	us = (clock_mono_ns() - t0) / 1000;
	dl_put_batch();
	/* A failure (its cut syncs) is err_active's business, not slowness. */
	if (us > DL_INLINE_SLOW_US &&
	    !(dl.w_failed && dl.w_failed_epoch == dl.busy.epoch)) {
		dl.inline_off_ms = (uint64_t)clock_mono_ms() + DL_INLINE_PAUSE_MS;
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
void
dl_kick_cb(evutil_socket_t fd, short events, void *arg)
{
	dl.kick_pending = 0;
	pthread_mutex_lock(&dl.mtx);
	if (dl.w_waiting && dl.open_buf.len > 0 && !dl_write_inline())
		pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
}

/* A timer while storage is failing: asks the writer to retry its cut. */
void
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

/* The writer made progress, failed, or finished a snapshot. */
void
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
	dl.chain = dl.r_chain;		/* what the writer hashed */
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
	/*
	 * A head goes in after the failure is handled, and not while writes
	 * fail: dl_failed would drop it, or the disk fail it again.
	 */
	if (!dl.err_active)
		dl_chain_anchor(0);
	if (snap_new) {
		free(dl.snap_error);
		dl.snap_error = NULL;
		dl_snapshot_done(snap_seq, snap_err);
	}
	if (dl.watch != NULL)
		dl.watch(dl.watch_arg, dl.done_seq, 0, NULL, 0, NULL, 0);
	dl_maybe_snapshot();
}

/* Sets the watch. */
void
disklog_watch(disklog_watch_cb cb, void *arg)
{
	dl.watch = cb;
	dl.watch_arg = arg;
}
