/*
 * libFuzzer target for the disk log's record reader: the input is taken as
 * a segment file (and as a snapshot file). Whatever the bytes, decoding
 * must stay inside the buffer, and what it accepts must be exactly what the
 * encoder writes: every record decoded is sealed again from its fields and
 * must come out byte for byte the same. The file-level checker
 * (protocol/logscan.c, shared with gbrd and gbrctl log verify) reads the
 * same bytes from a file and must agree with the in-memory walk on how many
 * records are good before the first damage.
 */
#include "gbr-config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logfmt.h"
#include "logscan.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static char	fz_dir[] = "/tmp/gbr-fuzz-logfmt-XXXXXX";
static int	fz_dirfd = -1;

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what)
{
	fprintf(stderr, "fuzz-logfmt: %s\n", what);
	abort();
}

/* Removes the scratch folder when the fuzzer exits. */
static void
cleanup(void)
{
	unlinkat(fz_dirfd, "0000000000000001.seg", 0);
	unlinkat(fz_dirfd, "snap-0000000000000001.snap", 0);
	close(fz_dirfd);
	rmdir(fz_dir);
}

/* Re-encodes a decoded record and compares it with the bytes it came from. */
static void
check_roundtrip(const uint8_t *at, const struct logfmt_record *r)
{
	unsigned char	*copy;

	if (r->size != logfmt_record_size(r->type_len, r->data_len))
		fail("size does not match the lengths");
	if (!logfmt_type_valid(r->type, r->type_len))
		fail("an invalid type was accepted");
	if ((copy = malloc(r->size)) == NULL)
		abort();
	memcpy(copy + LOGFMT_RECORD_HEAD + r->type_len, r->data, r->data_len);
	logfmt_record_seal(copy, r->seq, r->ts_ms, r->type, r->type_len,
	    r->data_len);
	if (memcmp(copy, at, r->size) != 0)
		fail("a decoded record does not re-encode to the same bytes");
	free(copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct logfmt_seghdr	 h;
	struct logfmt_snaphdr	 sh;
	struct logfmt_record	 r;
	struct logscan_seg	 res;
	const char		*why;
	size_t			 pos;
	uint64_t		 good = 0, next = 0;
	long long		 at;
	int			 fd, hdr_ok;
	char			*body, *w;
	size_t			 blen;

	if (fz_dirfd == -1) {
		if (mkdtemp(fz_dir) == NULL ||
		    (fz_dirfd = open(fz_dir, O_RDONLY | O_DIRECTORY)) == -1)
			abort();
		atexit(cleanup);
	}

	/* In memory: the header, then records until the first failure. */
	hdr_ok = logfmt_seghdr_decode(data, size, &h, &why) == LOGFMT_OK;
	pos = hdr_ok ? LOGFMT_HEADER_SIZE : 0;
	if (hdr_ok)
		next = h.first_seq;
	while (pos < size) {
		enum logfmt_status st = logfmt_record_decode(data + pos,
		    size - pos, &r, &why);

		if (st != LOGFMT_OK)
			break;
		if (r.size > size - pos || r.data + r.data_len >
		    (const char *)data + size)
			fail("a record runs past the buffer");
		check_roundtrip(data + pos, &r);
		if (hdr_ok && r.seq != next)
			break;
		next = r.seq + 1;
		good++;
		pos += r.size;
	}
	if (pos < size) {
		at = logfmt_record_find(data, size, pos + 1, size, 0, UINT64_MAX);
		if (at >= 0 && logfmt_record_decode(data + at, size - (size_t)at,
		    &r, &why) != LOGFMT_OK)
			fail("find returned an offset that does not decode");
	}

	/* From a file: logscan must agree on the good records. */
	if ((fd = openat(fz_dirfd, "0000000000000001.seg", O_WRONLY | O_CREAT |
	    O_TRUNC, 0600)) == -1)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	logscan_segment(fz_dirfd, "0000000000000001.seg", 0, 1, 1, NULL, NULL,
	    &res);
	if (hdr_ok && h.first_seq == 1 && res.header_ok && res.records != good)
		fail("logscan and the in-memory walk disagree");
	if (res.status == LOGSCAN_OK && res.good_end != size)
		fail("ok but not every byte was a record");
	if (res.good_end > size)
		fail("the good part ends past the file");

	/* And as a snapshot. */
	if (logfmt_snaphdr_decode(data, size, &sh, &why) == LOGFMT_OK &&
	    sh.body_len > LOGFMT_MAX_SNAPSHOT)
		fail("a snapshot body over the maximum was accepted");
	if ((fd = openat(fz_dirfd, "snap-0000000000000001.snap", O_WRONLY |
	    O_CREAT | O_TRUNC, 0600)) == -1)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	if (logscan_snapshot(fz_dirfd, "snap-0000000000000001.snap", &sh, &body,
	    &blen, &w) == 0) {
		if (blen + LOGFMT_HEADER_SIZE != size || body[blen] != '\0')
			fail("snapshot body length wrong");
		free(body);
	} else
		free(w);
	return 0;
}
