/*
 * Reading disk log files (see logscan.h). A segment is read through one
 * buffer that slides over the file with pread(2): a record is decoded in
 * place when it fits, the buffer grows (up to one maximal record plus a
 * chunk) when it does not, so memory stays bounded whatever the file says.
 *
 * When a record fails, what follows decides its name: if any complete,
 * valid record with a plausible seq starts later in the file, the damage is
 * inside the log (corrupt); if nothing does, it is the torn end of the last
 * write (torn). The search is only run on that error path.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logscan.h"
#include "xmalloc.h"

/* Bytes read at a time. */
#define LOGSCAN_CHUNK	(1024 * 1024)

/* Reads len bytes at off. */
long long
logscan_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t	done = 0;
	ssize_t	n;

	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long long)done;
}

/*
 * Makes the file's bytes [pos, pos + want) available (fewer at the end of
 * the file) and points *p at pos. Returns the bytes available from pos, or
 * -1 on a read error.
 */
static long long
logscan_rd_get(struct logscan_reader *rd, uint64_t pos, size_t want,
    const unsigned char **p)
{
	size_t		n, keep;
	long long	got;

	if (pos >= rd->size)
		return 0;
	if (want > rd->size - pos)
		want = (size_t)(rd->size - pos);
	if (pos < rd->off || pos + want > rd->off + rd->len) {
		n = want > LOGSCAN_CHUNK ? want : LOGSCAN_CHUNK;
		if (n > rd->size - pos)
			n = (size_t)(rd->size - pos);
		if (n > rd->cap) {
			rd->buf = xreallocarray(rd->buf, 1, n);
			rd->cap = n;
		}
		/* Keep what we hold from pos on; read only the rest. */
		keep = 0;
		if (pos >= rd->off && pos < rd->off + rd->len) {
			keep = (size_t)(rd->off + rd->len - pos);
			memmove(rd->buf, rd->buf + (pos - rd->off), keep);
		}
		got = logscan_pread(rd->fd, rd->buf + keep, n - keep,
		    pos + keep);
		if (got < 0)
			return -1;
		rd->off = pos;
		rd->len = keep + (size_t)got;
		if (rd->len < want)	/* the file shrank under us */
			want = rd->len;
	}
	*p = rd->buf + (pos - rd->off);
	return (long long)(rd->off + rd->len - pos);
}

/* Sets up a reader. */
void
logscan_reader_init(struct logscan_reader *rd, int fd, uint64_t size)
{
	memset(rd, 0, sizeof *rd);
	rd->fd = fd;
	rd->size = size;
}

/* Frees a reader's buffer. */
void
logscan_reader_release(struct logscan_reader *rd)
{
	free(rd->buf);
	rd->buf = NULL;
	rd->cap = rd->len = 0;
}

static int	logscan_record_at_crc(struct logscan_reader *, uint64_t,
		    struct logfmt_record *, const char **, int);

/* Decodes the record at pos, reading more for a long one. */
int
logscan_record_at(struct logscan_reader *rd, uint64_t pos,
    struct logfmt_record *rec, const char **why)
{
	return logscan_record_at_crc(rd, pos, rec, why, 1);
}

/* Decodes the record at pos, its checksum not checked. */
int
logscan_record_at_unchecked(struct logscan_reader *rd, uint64_t pos,
    struct logfmt_record *rec, const char **why)
{
	return logscan_record_at_crc(rd, pos, rec, why, 0);
}

/* The same, checking the checksum or trusting another reader's check. */
static int
logscan_record_at_crc(struct logscan_reader *rd, uint64_t pos,
    struct logfmt_record *rec, const char **why, int crc)
{
	enum logfmt_status	(*decode)(const unsigned char *, size_t,
				    struct logfmt_record *, const char **) =
				    crc ? logfmt_record_decode :
				    logfmt_record_decode_checked;
	const unsigned char	*p;
	long long		 avail;
	enum logfmt_status	 st;
	size_t			 need;

	/*
	 * Ask for the head only: the buffer is refilled (a chunk at a time)
	 * just when the head is not in it, never once per record.
	 */
	if ((avail = logscan_rd_get(rd, pos, LOGFMT_RECORD_HEAD, &p)) < 0)
		return -1;
	st = decode(p, (size_t)avail, rec, why);
	if (st == LOGFMT_SHORT && (uint64_t)avail < rd->size - pos &&
	    (need = logfmt_record_need(p, (size_t)avail)) > (size_t)avail) {
		/* The record runs past what the buffer holds. */
		if ((avail = logscan_rd_get(rd, pos, need, &p)) < 0)
			return -1;
		st = decode(p, (size_t)avail, rec, why);
	}
	return (int)st;
}

/* The size the record at pos claims, unchecked: 0 if none or not plausible. */
size_t
logscan_record_size_at(struct logscan_reader *rd, uint64_t pos)
{
	const unsigned char	*p;
	long long		 avail;

	if (pos >= rd->size || (avail = logscan_rd_get(rd, pos, 8, &p)) < 8)
		return 0;
	return logfmt_record_need(p, (size_t)avail);
}

/* Fills the reason of a verdict. */
static void
logscan_why(struct logscan_seg *out, const char *fmt, ...)
	__attribute__((format(__printf__, 2, 3)));
static void
logscan_why(struct logscan_seg *out, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(out->why, sizeof out->why, fmt, ap);
	va_end(ap);
}

/*
 * Tells whether a valid record with a seq in [min_seq, max_seq] starts
 * anywhere in [from, size). Returns 1, 0, or -1 on a read error.
 */
static int
logscan_valid_after(struct logscan_reader *rd, uint64_t from, uint64_t min_seq,
    uint64_t max_seq, uint64_t *at)
{
	const unsigned char	*p;
	long long		 avail, found;
	uint64_t		 pos;
	size_t			 window = LOGSCAN_CHUNK + LOGFMT_MAX_RECORD;

	for (pos = from; pos < rd->size; pos += LOGSCAN_CHUNK) {
		if ((avail = logscan_rd_get(rd, pos, window, &p)) < 0)
			return -1;
		/* Starts in this chunk; their records may run into the next. */
		found = logfmt_record_find(p, (size_t)avail, 0,
		    LOGSCAN_CHUNK, min_seq, max_seq);
		if (found >= 0) {
			*at = pos + (uint64_t)found;
			return 1;
		}
	}
	return 0;
}

/* Returns 1 if every byte of the file from pos on is zero. */
static int
logscan_zero_after(struct logscan_reader *rd, uint64_t pos)
{
	const unsigned char	*p;
	long long		 avail, i;

	while (pos < rd->size) {
		if ((avail = logscan_rd_get(rd, pos, LOGSCAN_CHUNK, &p)) <= 0)
			return 0;
		for (i = 0; i < avail; i++) {
			if (p[i] != 0)
				return 0;
		}
		pos += (uint64_t)avail;
	}
	return 1;
}

/* Decides between a torn tail and corruption for damage at pos. */
static enum logscan_status
logscan_damage(struct logscan_reader *rd, struct logscan_seg *out, uint64_t pos,
    int last, const char *what)
{
	uint64_t	next = out->last_seq + 1, at = 0, span;
	int		r;

	out->bad_offset = pos;
	if (!last) {
		logscan_why(out, "%s at offset %" PRIu64 " (later segments "
		    "follow, so this is not a torn tail)", what, pos);
		return out->status = LOGSCAN_CORRUPT;
	}
	if (out->hdr.clean) {
		logscan_why(out, "%s at offset %" PRIu64 " in a segment that "
		    "was sealed clean", what, pos);
		return out->status = LOGSCAN_CORRUPT;
	}
	span = (rd->size - pos) / LOGFMT_MIN_RECORD + 1;
	r = logscan_valid_after(rd, pos + 1, next, next + span, &at);
	if (r < 0) {
		logscan_why(out, "read error: %s", strerror(errno));
		return out->status = LOGSCAN_IOERR;
	}
	if (r == 1) {
		logscan_why(out, "%s at offset %" PRIu64 ", and valid records "
		    "follow it (at offset %" PRIu64 ")", what, pos, at);
		return out->status = LOGSCAN_CORRUPT;
	}
	logscan_why(out, "torn tail at offset %" PRIu64 ": %s; %" PRIu64
	    " bytes after the last good record (%s)", pos, what,
	    rd->size - pos, logscan_zero_after(rd, pos) ? "zeros" :
	    "a partial write");
	return out->status = LOGSCAN_TORN;
}

/* Checks one segment file. */
enum logscan_status
logscan_segment(int dirfd, const char *name, uint64_t log_id,
    uint64_t name_seq, int last, logscan_record_cb cb, void *arg,
    struct logscan_seg *out)
{
	return logscan_segment_trusting(dirfd, name, log_id, name_seq, last,
	    cb, NULL, arg, out);
}

/* Checks one segment file, skipping checksums another reader checked. */
enum logscan_status
logscan_segment_trusting(int dirfd, const char *name, uint64_t log_id,
    uint64_t name_seq, int last, logscan_record_cb cb,
    logscan_checked_cb checked, void *arg, struct logscan_seg *out)
{
	struct logscan_reader	 rd;
	struct logfmt_record	 rec;
	struct stat		 sb;
	const unsigned char	*p;
	const char		*why;
	enum logfmt_status	 st;
	long long		 avail;
	uint64_t		 pos = 0;
	int			 r;

	memset(out, 0, sizeof *out);
	logscan_reader_init(&rd, -1, 0);
	rd.fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (rd.fd == -1 || fstat(rd.fd, &sb) != 0) {
		logscan_why(out, "cannot open: %s", strerror(errno));
		if (rd.fd != -1)
			close(rd.fd);
		return out->status = LOGSCAN_IOERR;
	}
	if (!S_ISREG(sb.st_mode)) {
		close(rd.fd);
		logscan_why(out, "not a regular file");
		return out->status = LOGSCAN_CORRUPT;
	}
	rd.size = out->size = (uint64_t)sb.st_size;

	if ((avail = logscan_rd_get(&rd, 0, LOGSCAN_CHUNK, &p)) < 0) {
		logscan_why(out, "read error: %s", strerror(errno));
		out->status = LOGSCAN_IOERR;
		goto done;
	}
	st = logfmt_seghdr_decode(p, (size_t)avail, &out->hdr, &why);
	if (st != LOGFMT_OK) {
		out->bad_offset = 0;
		/* A segment whose creation a crash cut short holds no record. */
		if (last && rd.size <= LOGFMT_HEADER_SIZE) {
			logscan_why(out, "torn tail: %s (%" PRIu64 " bytes, "
			    "created but never finished)", why, rd.size);
			out->status = LOGSCAN_TORN;
		} else {
			logscan_why(out, "%s", why);
			out->status = LOGSCAN_CORRUPT;
		}
		goto done;
	}
	out->header_ok = 1;
	out->last_seq = out->hdr.first_seq - 1;
	out->good_end = LOGFMT_HEADER_SIZE;
	if (log_id != 0 && out->hdr.log_id != log_id) {
		logscan_why(out, "belongs to another log (id %016" PRIx64
		    ", this log is %016" PRIx64 ")", out->hdr.log_id, log_id);
		out->status = LOGSCAN_CORRUPT;
		goto done;
	}
	if (out->hdr.first_seq != name_seq) {
		logscan_why(out, "header says first seq %" PRIu64 " but the "
		    "name says %" PRIu64, out->hdr.first_seq, name_seq);
		out->status = LOGSCAN_CORRUPT;
		goto done;
	}

	pos = LOGFMT_HEADER_SIZE;
	while (pos < rd.size) {
		if ((r = logscan_record_at_crc(&rd, pos, &rec, &why,
		    checked == NULL || !checked(arg, out->last_seq + 1,
		    pos))) < 0)
			goto ioerr;
		st = (enum logfmt_status)r;
		if (st == LOGFMT_SHORT) {
			logscan_damage(&rd, out, pos, last,
			    "incomplete record");
			goto done;
		}
		if (st == LOGFMT_BAD) {
			logscan_damage(&rd, out, pos, last, why);
			goto done;
		}
		if (rec.seq != out->last_seq + 1) {
			out->bad_offset = pos;
			logscan_why(out, "record at offset %" PRIu64 " has seq %"
			    PRIu64 " where %" PRIu64 " was expected", pos,
			    rec.seq, out->last_seq + 1);
			out->status = LOGSCAN_CORRUPT;
			goto done;
		}
		if (cb != NULL && cb(arg, &rec, pos) != 0) {
			out->status = LOGSCAN_STOPPED;
			goto done;
		}
		out->records++;
		out->last_seq = rec.seq;
		pos += rec.size;
		out->good_end = pos;
	}
	out->status = LOGSCAN_OK;
	goto done;
ioerr:
	logscan_why(out, "read error at offset %" PRIu64 ": %s", pos,
	    strerror(errno));
	out->status = LOGSCAN_IOERR;
done:
	close(rd.fd);
	logscan_reader_release(&rd);
	return out->status;
}

/* Reads and checks a snapshot. */
int
logscan_snapshot(int dirfd, const char *name, struct logfmt_snaphdr *hdr,
    char **body, size_t *len, char **why)
{
	unsigned char	 head[LOGFMT_HEADER_SIZE];
	struct stat	 sb;
	const char	*w;
	char		*b = NULL;
	long long	 n;
	int		 fd;

	*body = NULL;
	*why = NULL;
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1 || fstat(fd, &sb) != 0) {
		*why = xasprintf("cannot open: %s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		*why = xstrdup("not a regular file");
		goto fail;
	}
	if ((n = logscan_pread(fd, head, sizeof head, 0)) < 0) {
		*why = xasprintf("read error: %s", strerror(errno));
		goto fail;
	}
	if (logfmt_snaphdr_decode(head, (size_t)n, hdr, &w) != LOGFMT_OK) {
		*why = xstrdup(w);
		goto fail;
	}
	if ((uint64_t)sb.st_size != LOGFMT_HEADER_SIZE + hdr->body_len) {
		*why = xasprintf("size %lld does not match the header's %llu "
		    "bytes", (long long)sb.st_size,
		    (unsigned long long)(LOGFMT_HEADER_SIZE + hdr->body_len));
		goto fail;
	}
	b = xmalloc((size_t)hdr->body_len + 1);
	n = logscan_pread(fd, b, (size_t)hdr->body_len, LOGFMT_HEADER_SIZE);
	if (n < 0 || (uint64_t)n != hdr->body_len) {
		*why = xasprintf("read error: %s", n < 0 ? strerror(errno) :
		    "file shrank");
		goto fail;
	}
	if (logfmt_crc(0, b, (size_t)hdr->body_len) != hdr->body_crc) {
		*why = xstrdup("snapshot body checksum mismatch");
		goto fail;
	}
	b[hdr->body_len] = '\0';
	close(fd);
	*body = b;
	*len = (size_t)hdr->body_len;
	return 0;
fail:
	free(b);
	if (fd != -1)
		close(fd);
	return -1;
}

/* Parses 16 lower-case hex digits. */
static int
logscan_hex16(const char *s, uint64_t *out)
{
	uint64_t	v = 0;
	int		i;

	for (i = 0; i < 16; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			v = v << 4 | (uint64_t)(s[i] - '0');
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = v << 4 | (uint64_t)(s[i] - 'a' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Orders files by seq. */
static int
logscan_cmp(const void *a, const void *b)
{
	const struct logscan_file	*x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Adds a file to a list. */
static void
logscan_add(struct logscan_file **list, size_t *n, const char *name,
    uint64_t seq)
{
	*list = xreallocarray(*list, *n + 1, sizeof **list);
	(*list)[*n].name = xstrdup(name);
	(*list)[*n].seq = seq;
	(*n)++;
}

/* Lists segments and snapshots. */
int
logscan_list(int dirfd, struct logscan_dir *d, char **cause)
{
	struct dirent	*de;
	DIR		*dir;
	size_t		 len;
	uint64_t	 seq;
	int		 fd;

	memset(d, 0, sizeof *d);
	*cause = NULL;
	if ((fd = dup(dirfd)) == -1 || (dir = fdopendir(fd)) == NULL) {
		*cause = xasprintf("cannot list the log folder: %s",
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	rewinddir(dir);
	while ((de = readdir(dir)) != NULL) {
		len = strlen(de->d_name);
		if (len == 16 + strlen(LOGSCAN_SEG_SUFFIX) &&
		    strcmp(de->d_name + 16, LOGSCAN_SEG_SUFFIX) == 0 &&
		    logscan_hex16(de->d_name, &seq) == 0)
			logscan_add(&d->segs, &d->nsegs, de->d_name, seq);
		else if (len == strlen(LOGSCAN_SNAP_PREFIX) + 16 +
		    strlen(LOGSCAN_SNAP_SUFFIX) &&
		    strncmp(de->d_name, LOGSCAN_SNAP_PREFIX,
		    strlen(LOGSCAN_SNAP_PREFIX)) == 0 &&
		    strcmp(de->d_name + strlen(LOGSCAN_SNAP_PREFIX) + 16,
		    LOGSCAN_SNAP_SUFFIX) == 0 &&
		    logscan_hex16(de->d_name + strlen(LOGSCAN_SNAP_PREFIX),
		    &seq) == 0)
			logscan_add(&d->snaps, &d->nsnaps, de->d_name, seq);
	}
	closedir(dir);
	if (d->nsegs > 0)
		qsort(d->segs, d->nsegs, sizeof *d->segs, logscan_cmp);
	if (d->nsnaps > 0)
		qsort(d->snaps, d->nsnaps, sizeof *d->snaps, logscan_cmp);
	return 0;
}

/* Frees a listing. */
void
logscan_dir_free(struct logscan_dir *d)
{
	size_t	i;

	for (i = 0; i < d->nsegs; i++)
		free(d->segs[i].name);
	for (i = 0; i < d->nsnaps; i++)
		free(d->snaps[i].name);
	free(d->segs);
	free(d->snaps);
	memset(d, 0, sizeof *d);
}

/* Names a segment. */
char *
logscan_seg_name(uint64_t first_seq)
{
	return xasprintf("%016" PRIx64 LOGSCAN_SEG_SUFFIX, first_seq);
}

/* Names a snapshot. */
char *
logscan_snap_name(uint64_t seq)
{
	return xasprintf(LOGSCAN_SNAP_PREFIX "%016" PRIx64 LOGSCAN_SNAP_SUFFIX,
	    seq);
}
