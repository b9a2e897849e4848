/*
 * Unit tests for the disk log's format (protocol/logfmt.c) and the file
 * checks built on it (protocol/logscan.c): round trips, a torn tail cut at
 * every byte offset of the last record, a single bit flipped at every bit of
 * a segment, a header from another log, seqs out of order, zero-filled
 * tails, and snapshots.
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "logfmt.h"
#include "logscan.h"
#include "unit.h"
#include "xmalloc.h"

#define LOG_ID	0x1122334455667788ULL

static char	tmpdir[] = "/tmp/gbr-test-logfmt-XXXXXX";
static int	dirfd_;

/* Encodes one record into buf (big enough); returns its size. */
static size_t
put_record(unsigned char *buf, uint64_t seq, const char *type, const char *json)
{
	size_t	tl = strlen(type), dl = strlen(json);

	memcpy(buf + LOGFMT_RECORD_HEAD + tl, json, dl);
	logfmt_record_seal(buf, seq, 1700000000000LL + (int64_t)seq, type, tl, dl);
	return logfmt_record_size(tl, dl);
}

/*
 * Builds a segment image: header (first_seq 1) and n records. Returns its
 * size; offs[i] gets record i's offset.
 */
static size_t
build_segment(unsigned char *img, uint64_t log_id, int n, size_t *offs,
    int clean)
{
	struct logfmt_seghdr	h = { log_id, 1, 1700000000000LL, clean };
	char			json[64];
	size_t			len = LOGFMT_HEADER_SIZE;
	int			i;

	logfmt_seghdr_encode(img, &h);
	for (i = 0; i < n; i++) {
		snprintf(json, sizeof json, "{\"i\":%d,\"s\":\"rec%d\"}", i, i);
		if (offs != NULL)
			offs[i] = len;
		len += put_record(img + len, (uint64_t)i + 1, "test.rec", json);
	}
	return len;
}

/* Writes an image to a file in the temp folder. */
static void
write_file(const char *name, const unsigned char *img, size_t len)
{
	int	fd;

	fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd == -1 || write(fd, img, len) != (ssize_t)len) {
		perror(name);
		exit(1);
	}
	close(fd);
}

/* Scans an image as a segment file. */
static enum logscan_status
scan(const unsigned char *img, size_t len, uint64_t log_id, int last,
    struct logscan_seg *res)
{
	write_file("0000000000000001.seg", img, len);
	return logscan_segment(dirfd_, "0000000000000001.seg", log_id, 1, last,
	    NULL, NULL, res);
}

struct collect {
	uint64_t	seqs[16];
	int		n;
};

/* logscan callback: remembers the seqs seen. */
static int
collect_cb(void *arg, const struct logfmt_record *rec, uint64_t off)
{
	struct collect	*c = arg;

	if (c->n < 16)
		c->seqs[c->n++] = rec->seq;
	return 0;
}

/* Encode, decode, type rules. */
static void
test_roundtrip(void)
{
	unsigned char		 buf[256];
	struct logfmt_record	 r;
	const char		*why;
	size_t			 len, i;
	int			 short_ok = 1;

	len = put_record(buf, 42, "session.message", "{\"text\":\"hi\"}");
	CHECK(len == LOGFMT_RECORD_HEAD + 15 + 13, "record size is head + type + data");
	CHECK(logfmt_record_decode(buf, len, &r, &why) == LOGFMT_OK &&
	    r.seq == 42 && r.ts_ms == 1700000000042LL && r.type_len == 15 &&
	    memcmp(r.type, "session.message", 15) == 0 && r.data_len == 13 &&
	    memcmp(r.data, "{\"text\":\"hi\"}", 13) == 0 && r.size == len,
	    "decode gives back seq, timestamp, type and data");
	for (i = 0; i < len; i++) {
		if (logfmt_record_decode(buf, i, &r, &why) != LOGFMT_SHORT)
			short_ok = 0;
	}
	CHECK(short_ok, "every strict prefix of a record decodes as short");
	buf[LOGFMT_RECORD_HEAD + 20] ^= 1;
	CHECK(logfmt_record_decode(buf, len, &r, &why) == LOGFMT_BAD &&
	    strcmp(why, "checksum mismatch") == 0 &&
	    logfmt_record_decode_checked(buf, len, &r, &why) == LOGFMT_OK &&
	    r.seq == 42 && r.size == len, "a flipped data bit fails the "
	    "checksum; decoding what another reader checked skips only that");
	buf[LOGFMT_RECORD_HEAD + 20] ^= 1;
	buf[25] = 1;
	CHECK(logfmt_record_decode_checked(buf, len, &r, &why) == LOGFMT_BAD,
	    "and still checks everything else (reserved bits)");
	buf[25] = 0;
	CHECK(logfmt_type_valid("a", 1) && logfmt_type_valid("user.x-y_z.9", 12),
	    "types of [a-z0-9._-] starting with a letter are valid");
	CHECK(!logfmt_type_valid("", 0) && !logfmt_type_valid("User.x", 6) &&
	    !logfmt_type_valid("1abc", 4) && !logfmt_type_valid("a b", 3) &&
	    !logfmt_type_valid("a\"b", 3) && !logfmt_type_valid("a\nb", 3),
	    "empty, upper case, leading digit, space, quote, newline are invalid");
	memset(buf, 'a', 65);
	CHECK(logfmt_type_valid((char *)buf, 64) &&
	    !logfmt_type_valid((char *)buf, 65), "types are at most 64 bytes");

	/* A length beyond the maximum is bad at once, never "short". */
	buf[0] = buf[1] = buf[2] = buf[3] = 0xff;
	CHECK(logfmt_record_decode(buf, 8, &r, &why) == LOGFMT_BAD,
	    "a record claiming 4 GiB is bad, not short");
	memset(buf, 0, 8);
	CHECK(logfmt_record_decode(buf, 8, &r, &why) == LOGFMT_BAD,
	    "a zero length is bad");
}

/* A torn tail at every byte offset of the last record. */
static void
test_torn_tail(void)
{
	unsigned char		img[4096];
	struct logscan_seg	res;
	struct collect		c;
	size_t			offs[5], len, cut;
	int			all_torn = 1, all_kept = 1, all_zero_torn = 1;

	len = build_segment(img, LOG_ID, 5, offs, 0);
	CHECK(scan(img, len, LOG_ID, 1, &res) == LOGSCAN_OK &&
	    res.records == 5 && res.last_seq == 5 && res.good_end == len,
	    "an intact segment scans ok with all its records");
	for (cut = offs[4] + 1; cut < len; cut++) {
		if (scan(img, cut, LOG_ID, 1, &res) != LOGSCAN_TORN)
			all_torn = 0;
		if (res.good_end != offs[4] || res.last_seq != 4 ||
		    res.bad_offset != offs[4])
			all_kept = 0;
	}
	CHECK(all_torn, "cut inside the last record at each of its %zu offsets: "
	    "torn", len - offs[4] - 1);
	CHECK(all_kept, "the good part ends where the last record began");
	CHECK(scan(img, offs[4], LOG_ID, 1, &res) == LOGSCAN_OK &&
	    res.records == 4, "cut exactly at a record boundary: ok");
	/* The same cut in a segment that is not the last is corruption. */
	CHECK(scan(img, len - 3, LOG_ID, 0, &res) == LOGSCAN_CORRUPT,
	    "a cut record in a segment with later segments is corruption");
	/* Nor may a sealed segment have one. */
	len = build_segment(img, LOG_ID, 5, offs, 1);
	CHECK(scan(img, len - 3, LOG_ID, 1, &res) == LOGSCAN_CORRUPT,
	    "a cut record in a segment sealed clean is corruption");
	/* Zeros after the last record (a filesystem extending the file). */
	len = build_segment(img, LOG_ID, 5, offs, 0);
	for (cut = 1; cut < 200; cut += 7) {
		memset(img + len, 0, cut);
		if (scan(img, len + cut, LOG_ID, 1, &res) != LOGSCAN_TORN ||
		    res.good_end != len || strstr(res.why, "zeros") == NULL)
			all_zero_torn = 0;
	}
	CHECK(all_zero_torn, "zeros after the last record are a torn tail");
	/* Only the header: a segment whose creation a crash cut short. */
	CHECK(scan(img, 20, LOG_ID, 1, &res) == LOGSCAN_TORN &&
	    !res.header_ok, "a last segment shorter than its header is torn");
	CHECK(scan(img, 20, LOG_ID, 0, &res) == LOGSCAN_CORRUPT,
	    "an earlier segment shorter than its header is corrupt");
	memset(&c, 0, sizeof c);
	write_file("0000000000000001.seg", img, len);
	logscan_segment(dirfd_, "0000000000000001.seg", LOG_ID, 1, 1, collect_cb,
	    &c, &res);
	CHECK(c.n == 5 && c.seqs[0] == 1 && c.seqs[4] == 5,
	    "the callback sees every record in order");
}

/* A single bit flipped at every bit position of a segment. */
static void
test_bit_flips(void)
{
	unsigned char		img[4096], copy[4096];
	struct logscan_seg	res;
	size_t			offs[4], len, byte;
	enum logscan_status	st;
	int			bit, missed = 0, wrong = 0, marker_ok = 1, flips = 0;

	len = build_segment(img, LOG_ID, 4, offs, 0);
	for (byte = 0; byte < len; byte++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(copy, img, len);
			copy[byte] ^= (unsigned char)(1 << bit);
			st = scan(copy, len, LOG_ID, 1, &res);
			if (byte >= LOGFMT_CLEAN_OFFSET &&
			    byte < LOGFMT_CLEAN_OFFSET + 8) {
				/* Outside the CRC: can only read "open". */
				if (st != LOGSCAN_OK || res.hdr.clean)
					marker_ok = 0;
				continue;
			}
			flips++;
			if (st == LOGSCAN_OK) {
				missed++;
				continue;
			}
			/* In the last record: a torn tail; anywhere else: corrupt. */
			if (byte >= offs[3] ? (st != LOGSCAN_TORN &&
			    st != LOGSCAN_CORRUPT) : st != LOGSCAN_CORRUPT)
				wrong++;
		}
	}
	CHECK(missed == 0, "all %d single bit flips are detected", flips);
	CHECK(wrong == 0, "flips before the last record are corruption, never "
	    "a torn tail");
	CHECK(marker_ok, "a flip in the clean marker can only make it read open");

	/* In a sealed segment the last record's flips are corruption too. */
	len = build_segment(img, LOG_ID, 4, offs, 1);
	memcpy(copy, img, len);
	copy[len - 2] ^= 0x10;
	CHECK(scan(copy, len, LOG_ID, 1, &res) == LOGSCAN_CORRUPT,
	    "a flip in the last record of a sealed segment is corruption");
}

/* A header from another log, seqs out of order, names that lie. */
static void
test_foreign(void)
{
	unsigned char		img[4096];
	struct logscan_seg	res;
	size_t			offs[4], len;

	len = build_segment(img, 0x9999, 4, offs, 0);
	CHECK(scan(img, len, LOG_ID, 1, &res) == LOGSCAN_CORRUPT &&
	    strstr(res.why, "another log") != NULL,
	    "a segment from another log id is refused");
	CHECK(scan(img, len, 0, 1, &res) == LOGSCAN_OK && res.hdr.log_id == 0x9999,
	    "with no id expected the header's id is reported");

	/* Record 3 carries seq 7: a valid record in the wrong place. */
	len = build_segment(img, LOG_ID, 2, offs, 0);
	len += put_record(img + len, 7, "test.rec", "{}");
	CHECK(scan(img, len, LOG_ID, 1, &res) == LOGSCAN_CORRUPT &&
	    strstr(res.why, "seq 7") != NULL && res.last_seq == 2,
	    "a seq that does not follow on is corruption");

	len = build_segment(img, LOG_ID, 2, offs, 0);
	write_file("0000000000000005.seg", img, len);
	CHECK(logscan_segment(dirfd_, "0000000000000005.seg", LOG_ID, 5, 1, NULL,
	    NULL, &res) == LOGSCAN_CORRUPT, "a header that disagrees with the "
	    "file name is corruption");
	unlinkat(dirfd_, "0000000000000005.seg", 0);
}

/* Snapshots: round trip and damage. */
static void
test_snapshot(void)
{
	struct logfmt_snaphdr	h = { LOG_ID, 77, 1700000000000LL, 0, 0 }, g;
	unsigned char		img[256];
	const char		*body = "{\"seq\":77,\"modules\":{}}", *why;
	char			*got, *w;
	size_t			 len, blen = strlen(body), i;
	int			 missed = 0;

	h.body_len = blen;
	h.body_crc = logfmt_crc(0, body, blen);
	logfmt_snaphdr_encode(img, &h);
	memcpy(img + LOGFMT_HEADER_SIZE, body, blen);
	CHECK(logfmt_snaphdr_decode(img, LOGFMT_HEADER_SIZE, &g, &why) ==
	    LOGFMT_OK && g.seq == 77 && g.log_id == LOG_ID && g.body_len == blen,
	    "snapshot header round trip");
	write_file("snap-000000000000004d.snap", img, LOGFMT_HEADER_SIZE + blen);
	CHECK(logscan_snapshot(dirfd_, "snap-000000000000004d.snap", &g, &got,
	    &len, &w) == 0 && len == blen && strcmp(got, body) == 0,
	    "a snapshot file reads back");
	free(got);
	for (i = 0; i < (LOGFMT_HEADER_SIZE + blen) * 8; i++) {
		img[i / 8] ^= (unsigned char)(1 << (i % 8));
		write_file("snap-000000000000004d.snap", img,
		    LOGFMT_HEADER_SIZE + blen);
		if (logscan_snapshot(dirfd_, "snap-000000000000004d.snap", &g,
		    &got, &len, &w) == 0) {
			missed++;
			free(got);
		} else
			free(w);
		img[i / 8] ^= (unsigned char)(1 << (i % 8));
	}
	CHECK(missed == 0, "every single bit flip in a snapshot is detected");
	write_file("snap-000000000000004d.snap", img, LOGFMT_HEADER_SIZE + blen - 1);
	CHECK(logscan_snapshot(dirfd_, "snap-000000000000004d.snap", &g, &got,
	    &len, &w) != 0, "a short snapshot is refused");
	free(w);
	unlinkat(dirfd_, "snap-000000000000004d.snap", 0);
}

/* The search for a valid record after damage, and the listing. */
static void
test_find_and_list(void)
{
	unsigned char		img[4096];
	struct logscan_dir	d;
	size_t			offs[4], len;
	char			*cause;

	len = build_segment(img, LOG_ID, 4, offs, 0);
	CHECK(logfmt_record_find(img, len, offs[1] + 1, len, 1, 10) ==
	    (long long)offs[2], "find skips to the next valid record");
	CHECK(logfmt_record_find(img, len, offs[1] + 1, len, 9, 10) == -1,
	    "find ignores records with an implausible seq");
	CHECK(logfmt_record_find(img, len, offs[1] + 1, offs[2], 1, 10) == -1,
	    "find stops at max_start");

	write_file("0000000000000001.seg", img, len);
	write_file("00000000000000ff.seg", img, len);
	write_file("snap-0000000000000010.snap", img, 10);
	write_file("0000000000000001.seg.old", img, 10);
	write_file("notes.txt", img, 10);
	CHECK(logscan_list(dirfd_, &d, &cause) == 0 && d.nsegs == 2 &&
	    d.segs[0].seq == 1 && d.segs[1].seq == 255 && d.nsnaps == 1 &&
	    d.snaps[0].seq == 16, "the listing finds segments and snapshots "
	    "in seq order and nothing else");
	logscan_dir_free(&d);
	unlinkat(dirfd_, "00000000000000ff.seg", 0);
	unlinkat(dirfd_, "snap-0000000000000010.snap", 0);
	unlinkat(dirfd_, "0000000000000001.seg.old", 0);
	unlinkat(dirfd_, "notes.txt", 0);
}

/*
 * The reader's record at an offset, with and without the checksum: the
 * unchecked one (a reader whose result another pass judges) takes a
 * record whose data changed, and refuses what is not a record at all.
 */
static void
test_reader_unchecked(void)
{
	unsigned char		 img[4096];
	struct logscan_reader	 rd;
	struct logfmt_record	 rec;
	const char		*why;
	size_t			 offs[4], len;
	int			 fd;

	len = build_segment(img, LOG_ID, 4, offs, 0);
	img[offs[1] + LOGFMT_RECORD_HEAD + 8 + 3] ^= 1;	/* in the data */
	img[offs[3] + 24] = 0;				/* type length 0 */
	write_file("reader.seg", img, len);
	fd = openat(dirfd_, "reader.seg", O_RDONLY);
	logscan_reader_init(&rd, fd, len);
	CHECK(logscan_record_at(&rd, offs[1], &rec, &why) == LOGFMT_BAD,
	    "checked: a record whose data changed is refused");
	CHECK(logscan_record_at_unchecked(&rd, offs[1], &rec, &why) ==
	    LOGFMT_OK && rec.seq == 2 && rec.size == offs[2] - offs[1],
	    "unchecked: it is taken as it is");
	CHECK(logscan_record_at_unchecked(&rd, offs[3], &rec, &why) ==
	    LOGFMT_BAD, "unchecked: a record with no type is still refused");
	logscan_reader_release(&rd);
	close(fd);
	unlinkat(dirfd_, "reader.seg", 0);
}

int
main(void)
{
	if (mkdtemp(tmpdir) == NULL ||
	    (dirfd_ = open(tmpdir, O_RDONLY | O_DIRECTORY)) == -1) {
		perror("mkdtemp");
		return 1;
	}
	test_roundtrip();
	test_torn_tail();
	test_bit_flips();
	test_foreign();
	test_snapshot();
	test_find_and_list();
	test_reader_unchecked();
	unlinkat(dirfd_, "0000000000000001.seg", 0);
	close(dirfd_);
	rmdir(tmpdir);
	return unit_done();
}
