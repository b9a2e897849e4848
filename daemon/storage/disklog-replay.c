/*
 * The replay at open: every segment in order, each record indexed into the
 * segment table and, after the snapshot, handed to its module's replay().
 * A torn tail of the last segment (the end of a write a crash cut short)
 * is cut off and reported; any other damage, or a module refusing a
 * record, stops the start with a message that names the repair (or, with
 * --repair, is repaired). The scan itself is logscan's; parsing the
 * payloads ahead on another thread is disklog-ahead.c; moving damaged
 * files aside is disklog-repair.c; the snapshot restored before the replay
 * is disklog-snapshot.c.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disklog-int.h"
#include "jsonfast.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "sdnotify.h"
#include "xmalloc.h"

/* Records replayed between two reports of progress (a power of two). */
#define DL_PROGRESS_EVERY	1024

/* The record being replayed, for disklog_replay_payload. */
static const struct logfmt_record	*dl_replaying;

/* The payload of the record being replayed (see disklog.h). */
const char *
disklog_replay_payload(size_t *len)
{
	*len = dl_replaying != NULL ? dl_replaying->data_len : 0;
	return dl_replaying != NULL ? (const char *)dl_replaying->data : NULL;
}

struct dl_replay {
	struct dl_seg	*seg;
	struct dl_pa	*pa;		/* parse-ahead, or NULL */
	uint64_t	 snap_seq;
	uint64_t	 covered;	/* by the snapshot and the chain's head */
	uint64_t	 count;
	uint64_t	 ahead;		/* payloads the helper parsed */
	char		*why;		/* a module refused a record */
};

/*
 * True if the record with seq at off needs no checksum (logscan): the
 * helper checked it, or the snapshot and the chain's head cover it (it
 * makes no state, and is checked when read, like the segments a start
 * does not read; its place in the seq order is still checked).
 */
static int
dl_pa_checked(void *arg, uint64_t seq, uint64_t off)
{
	struct dl_replay	*rp = arg;

	return seq <= rp->covered || dl_pa_slot(rp->pa, seq, off) != NULL;
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
	/* A service's start checkpoint moves on (rate-limited there). */
	if ((rp->count & (DL_PROGRESS_EVERY - 1)) == 0)
		sdnotify_progress();
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

/*
 * A segment the snapshot (and the chain's head) wholly covers, followed by
 * the next one, holds nothing the state needs: it stays for
 * log.read, and only its header is read, so a start does not follow the
 * size of what the log keeps. Its records' checksums are checked when they
 * are read (disklog-read.c, which also indexes it then) and by `gbrctl
 * log verify`. Returns the table entry, or NULL when the segment must be
 * scanned (not covered, a header that does not match). Sealed or not
 * (with [log] fsync off none is): damage anywhere in it is found by its
 * readers, who never take it for the end of the records.
 */
static struct dl_seg *
dl_covered_segment(const struct logscan_dir *d, size_t i, uint64_t covered)
{
	struct logfmt_seghdr	 hdr;
	struct dl_seg		*s;
	struct stat		 sb;
	unsigned char		 buf[LOGFMT_HEADER_SIZE];
	const char		*why;
	uint64_t		 next;
	int			 fd;

	if (i + 1 >= d->nsegs)
		return NULL;
	next = d->segs[i + 1].seq;
	if (next <= d->segs[i].seq || next - 1 > covered)
		return NULL;
	fd = openat(dl.dirfd, d->segs[i].name, O_RDONLY | O_CLOEXEC |
	    O_NOFOLLOW);
	if (fd == -1)
		return NULL;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size < LOGFMT_HEADER_SIZE ||
	    logscan_pread(fd, buf, sizeof buf, 0) != (long long)sizeof buf ||
	    logfmt_seghdr_decode(buf, sizeof buf, &hdr, &why) != LOGFMT_OK ||
	    hdr.first_seq != d->segs[i].seq ||
	    (dl.log_id != 0 && hdr.log_id != dl.log_id)) {
		close(fd);
		return NULL;
	}
	close(fd);
	if (dl.log_id == 0)
		dl.log_id = hdr.log_id;
	s = dl_seg_new(d->segs[i].name, d->segs[i].seq, (uint64_t)sb.st_size);
	s->last_seq = next - 1;
	return s;
}

/*
 * Scans every segment in order, replaying records after the snapshot; cuts
 * a torn tail; refuses (or repairs) any other damage.
 */
int
dl_open_segments(struct logscan_dir *d, int repair, char **cause)
{
	struct logscan_seg	 res;
	struct dl_replay	 rp;
	struct dl_chain_ahead	*ch;
	struct dl_seg		*s;
	struct stat		 sb;
	uint64_t		 need = 0, good, limit_first, total, covered;
	size_t			 i, first = 0;
	char			*why;
	int			 fd, last;
	json_t			*moved;

	/*
	 * Segments wholly covered by the snapshot are no longer needed for
	 * the state: they go if the files are over half the budget (a crash
	 * came between the snapshot and their removal), else they stay for
	 * log.read. They are checked like the others, not replayed. With
	 * the chain, "covered" means covered by its head (disklog-chain.c).
	 */
	for (i = 0, total = 0; i < d->nsegs; i++) {
		if (fstatat(dl.dirfd, d->segs[i].name, &sb,
		    AT_SYMLINK_NOFOLLOW) == 0)
			total += (uint64_t)sb.st_size;
	}
	while (first + 1 < d->nsegs && d->segs[first + 1].seq <=
	    (dl.opts.chain ? dl.chain.seq : dl.snap_seq) + 1 &&
	    total > dl.opts.max_bytes / 2) {
		if (fstatat(dl.dirfd, d->segs[first].name, &sb,
		    AT_SYMLINK_NOFOLLOW) == 0)
			total -= (uint64_t)sb.st_size;
		if (unlinkat(dl.dirfd, d->segs[first].name, 0) == 0)
			log_info("disk log: removed %s, covered by the snapshot",
			    d->segs[first].name);
		first++;
	}
	covered = dl.snap_seq;
	if (dl.opts.chain && dl.chain.seq < covered)
		covered = dl.chain.seq;
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
		if ((s = dl_covered_segment(d, i, covered)) != NULL) {
			dl_seg_push(s);
			need = s->last_seq + 1;
			dl.skipped_segs++;
			continue;
		}
		s = dl_seg_new(d->segs[i].name, d->segs[i].seq, 0);
		memset(&rp, 0, sizeof rp);
		rp.seg = s;
		rp.snap_seq = dl.snap_seq;
		rp.covered = covered;
		rp.pa = dl_pa_start(d->segs[i].name, d->segs[i].seq,
		    dl.snap_seq, covered);
		ch = dl_chain_ahead_start(d->segs[i].name);
		logscan_segment_trusting(dl.dirfd, d->segs[i].name, dl.log_id,
		    d->segs[i].seq, last, dl_replay_cb, dl_pa_checked, &rp,
		    &res);
		dl_pa_end(rp.pa);
		dl_chain_ahead_end(ch, res.good_end, res.last_seq);
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
