/*
 * The disk log's reader thread: disklog_read, served from the segment
 * files so the loop never waits on the disk. A read is a job queued under
 * rmtx; the reader finds the segment and the offset to start from in the
 * sparse index the writer keeps (the segment table, under seg_mtx), reads
 * and checks the records, and hands the page back to the loop, which runs
 * the callback. Records a snapshot covered and dropped are reported as a
 * gap. This file does not write or index anything, and it reads only the
 * records that were done when the read was asked for.
 */
#include "gbr-config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "disklog-int.h"
#include "jsonfast.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "xmalloc.h"

/* A read job: what to read, then what was read. */
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

/* Finds where to start reading for seq: the segment's name, an offset, its end. */
static int
dl_locate(uint64_t seq, char **name, uint64_t *off, uint64_t *end,
    uint64_t *first_avail, uint64_t *seg_first, uint64_t *idx_next)
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
	*seg_first = s->first_seq;
	*idx_next = s->idx_next;
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

/*
 * A record read at off of the segment starting at seg_first, past what its
 * index covers: a segment the start did not scan (disklog-replay.c) is
 * indexed as it is read, so later pages start near their records. Returns
 * where the index now ends (entries only go in order: dl_seg_index).
 */
static uint64_t
dl_learn(uint64_t seg_first, uint64_t seq, uint64_t off)
{
	uint64_t	 next = UINT64_MAX;
	size_t		 i;

	pthread_mutex_lock(&dl.seg_mtx);
	for (i = 0; i < dl.nsegs; i++) {
		if (dl.segs[i]->first_seq == seg_first) {
			dl_seg_index(dl.segs[i], seq, off);
			next = dl.segs[i]->idx_next;
			break;
		}
	}
	pthread_mutex_unlock(&dl.seg_mtx);
	return next;
}

/* True if seq is still said to be in the segment starting at seg_first. */
static int
dl_locate_same(uint64_t seq, uint64_t seg_first)
{
	size_t	 i;
	int	 same = 0;

	pthread_mutex_lock(&dl.seg_mtx);
	for (i = dl.nsegs; i > 0; i--) {
		if (dl.segs[i - 1]->first_seq <= seq) {
			same = dl.segs[i - 1]->first_seq == seg_first &&
			    seq <= dl.segs[i - 1]->last_seq;
			break;
		}
	}
	pthread_mutex_unlock(&dl.seg_mtx);
	return same;
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
	uint64_t		 seg_first, idx_next;
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
		if (dl_locate(seq, &name, &off, &end, &first, &seg_first,
		    &idx_next) != 0) {
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
			if (pos >= idx_next)
				idx_next = dl_learn(seg_first, rec.seq, pos);
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
		/*
		 * The table says the segment holds seq: if its end came first,
		 * records are missing (a segment the start did not read).
		 */
		if (j->error == 0 && pos >= end && seq <= j->upto &&
		    dl_locate_same(seq, seg_first)) {
			log_error("disk log: %s/%s ends before seq %" PRIu64
			    ", which it should hold", dl.dir, name, seq);
			j->error = EIO;
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
void *
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

/* ---- the loop thread: read requests and results ---- */

/* Read results: callbacks on the loop. */
void
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
