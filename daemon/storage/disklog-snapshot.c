/*
 * Snapshots of the disk log: the state of every module at a seq, after
 * which the segments it covers can go (disklog.c has the design). On the
 * loop thread: deciding to take one (the files are over half the budget)
 * and encoding the modules' state (disklog_snapshot). On the writer
 * thread, once the records it covers are written: the file (temp,
 * fdatasync, rename, fsync of the folder), then dropping the segments and
 * older snapshots it covers. At open: finding the newest valid snapshot
 * and restoring the modules from it, before the replay.
 *
 * This file does not decide when the writer runs a job (disklog-write.c
 * does, in order with the batches) nor replay the records after a snapshot
 * (disklog-replay.c).
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disklog-int.h"
#include "fault.h"
#include "jsonfast.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "osdep.h"
#include "paths.h"
#include "xmalloc.h"

/* ---- the loop thread: when, and what ---- */

/* Starts a snapshot if the files are over half the budget. */
void
dl_maybe_snapshot(void)
{
	uint64_t	bytes;
	size_t		closed;

	if (dl.snap_inflight || dl.closing || dl.err_active)
		return;
	/* After a failed snapshot, not in a tight loop: once a second. */
	if (dl.snap_failed_ms != 0 &&
	    (uint64_t)clock_mono_ms() - dl.snap_failed_ms < DL_RETRY_MS)
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
	if (dl.opts.chain)
		json_object_set_new(body, "chain", dl_chain_json("seq"));
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
	/* Records after its head stay, so the chain goes on from it. */
	job->chain_seq = dl.opts.chain && dl.chain.seq < seq ? dl.chain.seq :
	    seq;
	job->epoch = dl.epoch;
	pthread_mutex_lock(&dl.mtx);
	dl.snapjob = job;
	pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
	dl.snap_inflight = 1;
	return 0;
}

/* ---- the writer thread: the file ---- */

/*
 * Writes a snapshot file (temp, fdatasync, rename, fsync of the folder),
 * then drops the closed segments and older snapshots it covers.
 */
int
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
	    dl.segs[keep]->last_seq <= job->chain_seq; keep++)
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

/* ---- open: restore ---- */

/* Reads the newest valid snapshot and restores the modules from it. */
int
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
		dl_chain_restore(root, h.seq);
		json_decref(root);
		dl.snap_seq = dl.restored_seq = h.seq;
		dl.snap_bytes = LOGFMT_HEADER_SIZE + len;
		dl.snap_name = xstrdup(name);
		return 0;
	}
	return 0;
}
