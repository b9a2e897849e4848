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

#include <sys/stat.h>

#include <dirent.h>
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

static int	dl_snapshot_start(uint64_t);

/*
 * Starts a snapshot if the files are over half the budget, or if
 * snapshot_bytes were logged since the last one (so that a restart
 * replays no more than about that).
 */
void
dl_maybe_snapshot(void)
{
	uint64_t	bytes, logged;
	size_t		closed;

	if (dl.snap_inflight || dl.closing || dl.err_active)
		return;
	/* After a failed snapshot, not in a tight loop: backing off. */
	if (dl.snap_failed_ms != 0 &&
	    (uint64_t)clock_mono_ms() - dl.snap_failed_ms < dl.snap_backoff_ms)
		return;
	pthread_mutex_lock(&dl.seg_mtx);
	bytes = dl.disk_bytes;
	closed = dl.nsegs > 0 ? dl.nsegs - 1 : 0;
	pthread_mutex_unlock(&dl.seg_mtx);
	pthread_mutex_lock(&dl.mtx);
	bytes += dl.open_buf.len;
	/* Less while a batch is between the queue and the counter. */
	logged = dl.s_bytes + dl.open_buf.len;
	pthread_mutex_unlock(&dl.mtx);
	/*
	 * Over the budget, every closed segment it covers goes (without one
	 * it would be in vain); after snapshot_bytes, only as far as the files
	 * are over half the budget, so log.read keeps what it had.
	 */
	if (closed > 0 && bytes > dl.opts.max_bytes / 2)
		(void)dl_snapshot_start(0);
	else if (dl.opts.snapshot_bytes > 0 && logged > dl.snap_from_bytes &&
	    logged - dl.snap_from_bytes >= dl.opts.snapshot_bytes)
		(void)dl_snapshot_start(dl.opts.max_bytes / 2);
}

/* Frees a snapshot job. */
void
dl_snapjob_free(struct dl_snapjob *job)
{
	size_t	i;

	if (job == NULL)
		return;
	for (i = 0; i < job->nside; i++) {
		free(job->side[i].name);
		free(job->side[i].pieces);
	}
	free(job->side);
	free(job->body);
	free(job);
}

/*
 * A snapshot is over (err 0), failed or was cancelled: the modules hear of
 * it, and a failure backs off, doubling the wait up to a few minutes, so
 * that a snapshot that cannot be written costs little however often the
 * log asks for one.
 */
void
dl_snapshot_done(uint64_t seq, int err)
{
	size_t	i;

	dl.snap_inflight = 0;
	if (err == 0) {
		dl.snaps_written++;
		dl.snap_failed_ms = 0;
		dl.snap_backoff_ms = 0;
		free(dl.snap_error);
		dl.snap_error = NULL;
	} else if (err != ECANCELED) {
		dl.snaps_failed++;
		dl.snap_failed_ms = (uint64_t)clock_mono_ms();
		if (dl.snap_backoff_ms == 0)
			dl.snap_backoff_ms = DL_RETRY_MS;
		else if (dl.snap_backoff_ms < DL_SNAP_BACKOFF_MAX_MS / 2)
			dl.snap_backoff_ms *= 2;
		else
			dl.snap_backoff_ms = DL_SNAP_BACKOFF_MAX_MS;
		if (dl.snap_error == NULL)
			dl.snap_error = xasprintf("snapshot at seq %" PRIu64
			    " failed: %s", seq, strerror(err));
		log_error("disk log: %s; the next try in %" PRIu64 " s",
		    dl.snap_error, dl.snap_backoff_ms / 1000);
	}
	for (i = 0; i < dl_nmodules; i++) {
		if (dl_modules[i]->snapshot_done != NULL)
			dl_modules[i]->snapshot_done(seq, err);
	}
}

/* A side file's name is the module's business, within these bounds. */
static int
dl_side_name_ok(const char *name)
{
	size_t	n = strlen(name), i;

	if (n == 0 || n > 64)
		return 0;
	for (i = 0; i < n; i++) {
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
			return 0;
	}
	return 1;
}

/* A module's snapshot() names a side file (and bytes to write into it). */
void
disklog_snapshot_file(const char *name, uint64_t off,
    struct disklog_piece *pieces, size_t n)
{
	struct dl_snapjob	*job = dl.snap_building;
	struct dl_side		*sd;
	size_t			 i;

	if (job == NULL || !dl_side_name_ok(name)) {
		free(pieces);
		return;
	}
	if (job->nside == job->side_cap) {
		job->side_cap = job->side_cap == 0 ? 16 : job->side_cap * 2;
		job->side = xreallocarray(job->side, job->side_cap,
		    sizeof *job->side);
	}
	sd = &job->side[job->nside++];
	sd->name = xasprintf("%s%s", name, DL_SIDE_SUFFIX);
	sd->off = off;
	sd->pieces = pieces;
	sd->npieces = n;
	sd->len = 0;
	for (i = 0; i < n; i++)
		sd->len += pieces[i].len;
}

/* Reads part of a side file. */
int
disklog_file_read(const char *name, uint64_t off, size_t len, char **buf)
{
	char	*path, *b;
	size_t	 got = 0;
	ssize_t	 n;
	int	 fd, err;

	*buf = NULL;
	if (dl.dir == NULL || !dl_side_name_ok(name))
		return errno = EINVAL, -1;
	path = xasprintf("%s%s", name, DL_SIDE_SUFFIX);
	fd = openat(dl.dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd == -1)
		return -1;
	b = xmalloc(len + 1);
	while (got < len) {
		n = pread(fd, b + got, len - got, (off_t)(off + got));
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n == 0 ? EIO : errno;
			close(fd);
			free(b);
			return errno = err, -1;
		}
		got += (size_t)n;
	}
	close(fd);
	b[len] = '\0';
	*buf = b;
	return 0;
}

/* Starts a snapshot of every module, dropping every segment it covers. */
int
disklog_snapshot(void)
{
	return dl_snapshot_start(0);
}

/*
 * Starts a snapshot of every module; the closed segments it covers go,
 * the oldest first, while the files are over keep_bytes. Only the
 * modules' small state is encoded here, on the loop; what they put in
 * side files is written by the writer.
 */
static int
dl_snapshot_start(uint64_t keep_bytes)
{
	struct dl_snapjob	*job;
	json_t			*mods, *body, *st;
	uint64_t		 seq = dl.next_seq - 1, t0;
	size_t			 i;
	char			*text;

	if (!dl.is_open || dl.closing || dl.snap_inflight || seq == 0)
		return -1;
	t0 = (uint64_t)clock_mono_ms();
	job = xcalloc(1, sizeof *job);
	dl.snap_building = job;
	mods = json_object();
	for (i = 0; i < dl_nmodules; i++) {
		if (dl_modules[i]->snapshot == NULL)
			continue;
		if ((st = dl_modules[i]->snapshot()) == NULL)
			st = json_null();
		json_object_set_new(mods, dl_modules[i]->name, st);
	}
	dl.snap_building = NULL;
	body = json_pack("{s:I, s:o}", "seq", (json_int_t)seq, "modules", mods);
	if (dl.opts.chain) {
		dl_chain_sync();	/* the head the writer has now */
		json_object_set_new(body, "chain", dl_chain_json("seq"));
	}
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL || strlen(text) > LOGFMT_MAX_SNAPSHOT) {
		free(dl.snap_error);
		dl.snap_error = xasprintf("snapshot at seq %" PRIu64 " is over "
		    "%llu bytes", seq, (unsigned long long)LOGFMT_MAX_SNAPSHOT);
		free(text);
		dl_snapjob_free(job);
		dl_snapshot_done(seq, EFBIG);
		return -1;
	}
	job->body = text;
	job->len = strlen(text);
	job->seq = seq;
	/* Records after its head stay, so the chain goes on from it. */
	job->chain_seq = dl.opts.chain && dl.chain.seq < seq ? dl.chain.seq :
	    seq;
	job->epoch = dl.epoch;
	job->keep_bytes = keep_bytes;
	pthread_mutex_lock(&dl.mtx);
	dl.snap_from_bytes = dl.s_bytes + dl.open_buf.len;
	pthread_mutex_unlock(&dl.mtx);
	dl.snap_encode_ms = (uint64_t)clock_mono_ms() - t0;
	log_debug("disk log: snapshot at seq %" PRIu64 " encoded in %" PRIu64
	    " ms (%zu bytes, %zu side files)", seq, dl.snap_encode_ms, job->len,
	    job->nside);
	pthread_mutex_lock(&dl.mtx);
	dl.snapjob = job;
	pthread_cond_signal(&dl.wcond);
	pthread_mutex_unlock(&dl.mtx);
	dl.snap_inflight = 1;
	return 0;
}

/* ---- the writer thread: the file ---- */

/* Writes a side file's pieces at off, gathered in writes of up to 1 MiB. */
static int
dl_write_pieces(int fd, const struct dl_side *sd)
{
	const size_t	 cap = 1024 * 1024;
	char		*buf;
	size_t		 i, n = 0, take, at;
	uint64_t	 off = sd->off;

	buf = xmalloc(cap);
	for (i = 0; i < sd->npieces; i++) {
		for (at = 0; at < sd->pieces[i].len; at += take) {
			take = sd->pieces[i].len - at;
			if (take > cap - n)
				take = cap - n;
			memcpy(buf + n, (const char *)sd->pieces[i].data + at,
			    take);
			n += take;
			if (n == cap) {
				if (dl_pwrite_all(fd, buf, n, off) != 0)
					goto fail;
				off += n;
				n = 0;
			}
		}
	}
	if (n > 0 && dl_pwrite_all(fd, buf, n, off) != 0)
		goto fail;
	free(buf);
	return 0;
fail:
	free(buf);
	return -1;
}

/* Writes a side file's new bytes and cuts it there, fsynced. */
static int
dl_write_side(const struct dl_side *sd, int *created)
{
	struct stat	sb;
	int		fd, err;

	fd = openat(dl.dirfd, sd->name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1 && errno == ENOENT) {
		fd = openat(dl.dirfd, sd->name, O_WRONLY | O_CREAT | O_CLOEXEC |
		    O_NOFOLLOW, 0600);
		*created = 1;
	}
	if (fd == -1)
		return -1;
	if ((err = fault_inject("disklog.snapshot")) != 0) {
		close(fd);
		return errno = err, -1;
	}
	if ((sd->len > 0 && dl_write_pieces(fd, sd) != 0) ||
	    fstat(fd, &sb) != 0 ||
	    ((uint64_t)sb.st_size != sd->off + sd->len &&
	    ftruncate(fd, (off_t)(sd->off + sd->len)) != 0) ||
	    dl_datasync(fd) != 0) {
		err = errno;
		close(fd);
		return errno = err, -1;
	}
	return close(fd);
}

/* Removes the side files the snapshot just written does not keep. */
static void
dl_drop_sides(const struct dl_snapjob *job)
{
	struct dirent	*de;
	DIR		*dir;
	size_t		 len, slen = strlen(DL_SIDE_SUFFIX), i;
	int		 fd;

	if ((fd = dup(dl.dirfd)) == -1)
		return;
	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	rewinddir(dir);
	while ((de = readdir(dir)) != NULL) {
		len = strlen(de->d_name);
		if (len <= slen || strcmp(de->d_name + len - slen,
		    DL_SIDE_SUFFIX) != 0)
			continue;
		for (i = 0; i < job->nside; i++) {
			if (strcmp(job->side[i].name, de->d_name) == 0)
				break;
		}
		if (i == job->nside && unlinkat(dl.dirfd, de->d_name, 0) != 0)
			log_warn("disk log: cannot remove %s/%s: %s", dl.dir,
			    de->d_name, strerror(errno));
	}
	closedir(dir);
}

/* Counts the side files and their bytes for daemon.status (at open). */
void
dl_side_count(void)
{
	struct dirent	*de;
	struct stat	 sb;
	DIR		*dir;
	size_t		 len, slen = strlen(DL_SIDE_SUFFIX);
	int		 fd;

	dl.side_files = dl.side_bytes = 0;
	if ((fd = dup(dl.dirfd)) == -1)
		return;
	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	rewinddir(dir);
	while ((de = readdir(dir)) != NULL) {
		len = strlen(de->d_name);
		if (len <= slen || strcmp(de->d_name + len - slen,
		    DL_SIDE_SUFFIX) != 0 ||
		    fstatat(dl.dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		dl.side_files++;
		dl.side_bytes += (uint64_t)sb.st_size;
	}
	closedir(dir);
}

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
	uint64_t		 side_bytes = 0, segbytes;
	int			 fd, err, created = 0;

	if (dl.w_fd != -1 && dl_datasync(dl.w_fd) != 0)
		return -1;
	/* The side files first: the snapshot refers to what they hold. */
	for (i = 0; i < job->nside; i++) {
		if (job->side[i].len > 0 &&
		    dl_write_side(&job->side[i], &created) != 0)
			return -1;
		side_bytes += job->side[i].off + job->side[i].len;
	}
	if (created && fsync(dl.dirfd) != 0)
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

	/*
	 * The snapshot is durable: what it covers can go, the oldest first,
	 * as far as the files are over half the budget (log.read and
	 * catch-ups read the rest).
	 */
	pthread_mutex_lock(&dl.seg_mtx);
	segbytes = dl.disk_bytes - dl.snap_bytes;
	for (keep = 0; keep + 1 < dl.nsegs &&
	    dl.segs[keep]->last_seq <= job->chain_seq &&
	    segbytes + LOGFMT_HEADER_SIZE + job->len > job->keep_bytes; keep++)
		segbytes -= dl.segs[keep]->size;
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
	dl.side_files = job->nside;
	dl.side_bytes = side_bytes;
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
	dl_drop_sides(job);
	(void)fsync(dl.dirfd);
	log_info("disk log: snapshot at seq %" PRIu64 " (%zu bytes, %zu side "
	    "file%s, %" PRIu64 " bytes); dropped %zu segment%s", job->seq,
	    job->len, job->nside, job->nside == 1 ? "" : "s", side_bytes, ndrop,
	    ndrop == 1 ? "" : "s");
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
