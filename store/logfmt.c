/*
 * Encoding and decoding of the disk log's headers and records (see
 * logfmt.h and doc/DISKLOG.md). Byte order is fixed (little-endian) and
 * written byte by byte, so files move between machines and the code never
 * makes an unaligned access.
 *
 * Record layout:
 *   0  u32 body_len   bytes from offset 8 to the end of the record
 *   4  u32 crc        CRC-32 of bytes 0..3 and 8..end (the length is covered)
 *   8  u64 seq
 *  16  i64 ts_ms
 *  24  u8  type_len, u8 flags (0), u16 reserved (0)
 *  28  type, then the JSON data
 */
#include "gbr-config.h"

#include <string.h>
#include <zlib.h>

#include "logfmt.h"

static const unsigned char logfmt_seg_magic[8] = "GBR-LOG\n";
static const unsigned char logfmt_snap_magic[8] = "GBR-SNP\n";
static const unsigned char logfmt_clean[8] = "SEALED!\n";

/* Reads a little-endian u32. */
static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* Reads a little-endian u64. */
static uint64_t
get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Writes a little-endian u32. */
static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

/* Writes a little-endian u64. */
static void
put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* CRC-32 in pieces that fit zlib's uInt. */
uint32_t
logfmt_crc(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char	*p = buf;
	uLong			 c = crc;
	size_t			 n;

	while (len > 0) {
		n = len > (1U << 30) ? (1U << 30) : len;
		c = crc32(c, p, (uInt)n);
		p += n;
		len -= n;
	}
	return (uint32_t)c;
}

/* Checks a record type's length and characters. */
int
logfmt_type_valid(const char *type, size_t len)
{
	size_t	i;
	char	c;

	if (len == 0 || len > LOGFMT_MAX_TYPE)
		return 0;
	if (type[0] < 'a' || type[0] > 'z')
		return 0;
	for (i = 0; i < len; i++) {
		c = type[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* Returns the file size of a record. */
size_t
logfmt_record_size(size_t type_len, size_t data_len)
{
	return LOGFMT_RECORD_HEAD + type_len + data_len;
}

/* The checksum of a record: its length field and everything after the crc. */
static uint32_t
logfmt_record_crc(const unsigned char *buf, size_t body_len)
{
	return logfmt_crc(logfmt_crc(0, buf, 4), buf + 8, body_len);
}

/* Fills a record's head and type and computes its checksum. */
void
logfmt_record_seal(unsigned char *buf, uint64_t seq, int64_t ts_ms,
    const char *type, size_t type_len, size_t data_len)
{
	size_t	body = LOGFMT_RECORD_HEAD - 8 + type_len + data_len;

	put32(buf, (uint32_t)body);
	put64(buf + 8, seq);
	put64(buf + 16, (uint64_t)ts_ms);
	buf[24] = (unsigned char)type_len;
	buf[25] = 0;
	buf[26] = buf[27] = 0;
	memcpy(buf + LOGFMT_RECORD_HEAD, type, type_len);
	put32(buf + 4, logfmt_record_crc(buf, body));
}

/* Returns the size a record claims. */
size_t
logfmt_record_need(const unsigned char *buf, size_t len)
{
	uint32_t	body;

	if (len < 8)
		return 0;
	body = get32(buf);
	if (body < LOGFMT_MIN_RECORD - 8 || body > LOGFMT_MAX_RECORD - 8)
		return 0;
	return 8 + (size_t)body;
}

static enum logfmt_status logfmt_record_decode_crc(const unsigned char *,
		    size_t, struct logfmt_record *, const char **, int);

/* Decodes one record at the start of buf. */
enum logfmt_status
logfmt_record_decode(const unsigned char *buf, size_t len,
    struct logfmt_record *r, const char **why)
{
	return logfmt_record_decode_crc(buf, len, r, why, 1);
}

/* Decodes one record whose checksum another reader checked. */
enum logfmt_status
logfmt_record_decode_checked(const unsigned char *buf, size_t len,
    struct logfmt_record *r, const char **why)
{
	return logfmt_record_decode_crc(buf, len, r, why, 0);
}

/* Decodes one record, with or without its checksum. */
static enum logfmt_status
logfmt_record_decode_crc(const unsigned char *buf, size_t len,
    struct logfmt_record *r, const char **why, int crc)
{
	uint32_t	body;
	size_t		tl;

	*why = NULL;
	if (len < 8)
		return LOGFMT_SHORT;
	body = get32(buf);
	if (body < LOGFMT_MIN_RECORD - 8 || body > LOGFMT_MAX_RECORD - 8) {
		*why = "record length out of range";
		return LOGFMT_BAD;
	}
	if (len - 8 < body)
		return LOGFMT_SHORT;
	if (crc && get32(buf + 4) != logfmt_record_crc(buf, body)) {
		*why = "checksum mismatch";
		return LOGFMT_BAD;
	}
	tl = buf[24];
	if (buf[25] != 0 || buf[26] != 0 || buf[27] != 0) {
		*why = "reserved bits set";
		return LOGFMT_BAD;
	}
	if (tl == 0 || tl > LOGFMT_MAX_TYPE ||
	    LOGFMT_RECORD_HEAD - 8 + tl >= body) {
		*why = "type length out of range";
		return LOGFMT_BAD;
	}
	if (!logfmt_type_valid((const char *)buf + LOGFMT_RECORD_HEAD, tl)) {
		*why = "invalid type";
		return LOGFMT_BAD;
	}
	r->seq = get64(buf + 8);
	r->ts_ms = (int64_t)get64(buf + 16);
	r->type = (const char *)buf + LOGFMT_RECORD_HEAD;
	r->type_len = tl;
	r->data = r->type + tl;
	r->data_len = body - (LOGFMT_RECORD_HEAD - 8) - tl;
	r->size = 8 + (size_t)body;
	return LOGFMT_OK;
}

/* Finds the next valid record with a plausible seq. */
long long
logfmt_record_find(const unsigned char *buf, size_t len, size_t from,
    size_t max_start, uint64_t min_seq, uint64_t max_seq)
{
	struct logfmt_record	 r;
	const char		*why;
	size_t			 p;
	uint32_t		 body;
	uint64_t		 seq;

	for (p = from; p < max_start && p < len &&
	    len - p >= LOGFMT_MIN_RECORD; p++) {
		/* Cheap tests first: most offsets fail on length or seq. */
		body = get32(buf + p);
		if (body < LOGFMT_MIN_RECORD - 8 || body > LOGFMT_MAX_RECORD - 8 ||
		    len - p - 8 < body)
			continue;
		seq = get64(buf + p + 8);
		if (seq < min_seq || seq > max_seq)
			continue;
		if (logfmt_record_decode(buf + p, len - p, &r, &why) == LOGFMT_OK)
			return (long long)p;
	}
	return -1;
}

/* Encodes a segment header. */
void
logfmt_seghdr_encode(unsigned char *out, const struct logfmt_seghdr *h)
{
	memset(out, 0, LOGFMT_HEADER_SIZE);
	memcpy(out, logfmt_seg_magic, 8);
	put32(out + 8, LOGFMT_VERSION);
	put32(out + 12, LOGFMT_HEADER_SIZE);
	put64(out + 16, h->log_id);
	put64(out + 24, h->first_seq);
	put64(out + 32, (uint64_t)h->created_ms);
	put32(out + 40, 0);
	put32(out + 44, logfmt_crc(0, out, 44));
	logfmt_clean_marker(out + LOGFMT_CLEAN_OFFSET, h->clean);
}

/* Decodes a segment header. */
enum logfmt_status
logfmt_seghdr_decode(const unsigned char *buf, size_t len,
    struct logfmt_seghdr *h, const char **why)
{
	*why = NULL;
	if (len < LOGFMT_HEADER_SIZE) {
		*why = "file shorter than a segment header";
		return LOGFMT_SHORT;
	}
	if (memcmp(buf, logfmt_seg_magic, 8) != 0) {
		*why = "not a gbr log segment (bad magic)";
		return LOGFMT_BAD;
	}
	if (get32(buf + 44) != logfmt_crc(0, buf, 44)) {
		*why = "segment header checksum mismatch";
		return LOGFMT_BAD;
	}
	if (get32(buf + 8) != LOGFMT_VERSION) {
		*why = "unsupported segment format version";
		return LOGFMT_BAD;
	}
	if (get32(buf + 12) != LOGFMT_HEADER_SIZE || get32(buf + 40) != 0) {
		*why = "unsupported segment header layout";
		return LOGFMT_BAD;
	}
	if (get64(buf + 56) != 0) {
		*why = "segment header reserved bytes set";
		return LOGFMT_BAD;
	}
	h->log_id = get64(buf + 16);
	h->first_seq = get64(buf + 24);
	h->created_ms = (int64_t)get64(buf + 32);
	/* Outside the checksum: anything but the exact marker reads "open". */
	h->clean = memcmp(buf + LOGFMT_CLEAN_OFFSET, logfmt_clean, 8) == 0;
	if (h->first_seq == 0) {
		*why = "segment header has first seq 0";
		return LOGFMT_BAD;
	}
	return LOGFMT_OK;
}

/* Returns the clean marker bytes. */
void
logfmt_clean_marker(unsigned char *out, int clean)
{
	if (clean)
		memcpy(out, logfmt_clean, 8);
	else
		memset(out, 0, 8);
}

/* Encodes a snapshot header. */
void
logfmt_snaphdr_encode(unsigned char *out, const struct logfmt_snaphdr *h)
{
	memset(out, 0, LOGFMT_HEADER_SIZE);
	memcpy(out, logfmt_snap_magic, 8);
	put32(out + 8, LOGFMT_VERSION);
	put32(out + 12, LOGFMT_HEADER_SIZE);
	put64(out + 16, h->log_id);
	put64(out + 24, h->seq);
	put64(out + 32, (uint64_t)h->created_ms);
	put64(out + 40, h->body_len);
	put32(out + 48, h->body_crc);
	put32(out + 52, logfmt_crc(0, out, 52));
}

/* Decodes a snapshot header. */
enum logfmt_status
logfmt_snaphdr_decode(const unsigned char *buf, size_t len,
    struct logfmt_snaphdr *h, const char **why)
{
	*why = NULL;
	if (len < LOGFMT_HEADER_SIZE) {
		*why = "file shorter than a snapshot header";
		return LOGFMT_SHORT;
	}
	if (memcmp(buf, logfmt_snap_magic, 8) != 0) {
		*why = "not a gbr log snapshot (bad magic)";
		return LOGFMT_BAD;
	}
	if (get32(buf + 52) != logfmt_crc(0, buf, 52)) {
		*why = "snapshot header checksum mismatch";
		return LOGFMT_BAD;
	}
	if (get32(buf + 8) != LOGFMT_VERSION ||
	    get32(buf + 12) != LOGFMT_HEADER_SIZE) {
		*why = "unsupported snapshot format version";
		return LOGFMT_BAD;
	}
	if (get64(buf + 56) != 0) {
		*why = "snapshot header reserved bytes set";
		return LOGFMT_BAD;
	}
	h->log_id = get64(buf + 16);
	h->seq = get64(buf + 24);
	h->created_ms = (int64_t)get64(buf + 32);
	h->body_len = get64(buf + 40);
	h->body_crc = get32(buf + 48);
	if (h->body_len > LOGFMT_MAX_SNAPSHOT) {
		*why = "snapshot body length out of range";
		return LOGFMT_BAD;
	}
	return LOGFMT_OK;
}
