/*
 * The disk log's on-disk format (doc/DISKLOG.md): segment headers, records
 * and snapshot headers, encoded and decoded from memory. Pure: no I/O, no
 * allocation, no libevent, so the daemon, the offline verifier (gbrctl log
 * verify), the unit tests and the fuzzer all agree byte for byte on what is
 * valid. Every integer is little-endian; every checksum is zlib's CRC-32.
 *
 * A decoder never trusts a length it has not bounded first: a record claims
 * at most LOGFMT_MAX_RECORD bytes, and a claim beyond the buffer is "short"
 * (more bytes needed, or a torn tail at the end of a file), not a read past
 * the end.
 */
#ifndef GBR_LOGFMT_H
#define GBR_LOGFMT_H

#include <stddef.h>
#include <stdint.h>

#define LOGFMT_VERSION		1
#define LOGFMT_HEADER_SIZE	64	/* segment and snapshot headers */
#define LOGFMT_CLEAN_OFFSET	48	/* the clean marker's 8 bytes in a segment header */
#define LOGFMT_RECORD_HEAD	28	/* record bytes before the type */
#define LOGFMT_MAX_TYPE		64
#define LOGFMT_MAX_DATA		(16U * 1024 * 1024)
#define LOGFMT_MIN_RECORD	(LOGFMT_RECORD_HEAD + 1 + 1)
#define LOGFMT_MAX_RECORD	(LOGFMT_RECORD_HEAD + LOGFMT_MAX_TYPE + LOGFMT_MAX_DATA)
#define LOGFMT_MAX_SNAPSHOT	(256ULL * 1024 * 1024)

enum logfmt_status {
	LOGFMT_OK = 0,
	LOGFMT_SHORT,		/* the buffer ends before the record or header does */
	LOGFMT_BAD,		/* not a valid record or header */
};

/* A segment file's header. */
struct logfmt_seghdr {
	uint64_t	log_id;		/* random, shared by every file of one log */
	uint64_t	first_seq;	/* seq of the first record in the segment */
	int64_t		created_ms;
	int		clean;		/* sealed: complete and fsynced, nothing follows */
};

/* A snapshot file's header; the JSON body follows it. */
struct logfmt_snaphdr {
	uint64_t	log_id;
	uint64_t	seq;		/* the snapshot covers every record <= seq */
	int64_t		created_ms;
	uint64_t	body_len;
	uint32_t	body_crc;
};

/* One decoded record; type and data point into the decoded buffer. */
struct logfmt_record {
	uint64_t	 seq;
	int64_t		 ts_ms;
	const char	*type;		/* not NUL-terminated */
	size_t		 type_len;
	const char	*data;		/* JSON text, not NUL-terminated */
	size_t		 data_len;
	size_t		 size;		/* bytes the record takes in the file */
};

/* CRC-32 (zlib) of a buffer, continuing from crc (0 to start). */
uint32_t	logfmt_crc(uint32_t crc, const void *, size_t);

/*
 * Tells whether a type is acceptable: 1 to LOGFMT_MAX_TYPE bytes of
 * [a-z0-9._-], starting with a letter.
 */
int		logfmt_type_valid(const char *type, size_t len);

/* Bytes a record with these lengths takes in the file. */
size_t		logfmt_record_size(size_t type_len, size_t data_len);
/*
 * Seals a record in place. buf holds logfmt_record_size(type_len,
 * data_len) bytes, with the data already at buf + LOGFMT_RECORD_HEAD +
 * type_len (so JSON can be encoded straight into its place); the head and
 * type are filled and the checksum computed. The caller has checked the
 * type and the lengths.
 */
void		logfmt_record_seal(unsigned char *buf, uint64_t seq, int64_t ts_ms,
		    const char *type, size_t type_len, size_t data_len);
/*
 * The bytes the record at the start of buf claims to take, once 8 bytes are
 * there; 0 if fewer are, or if the claim is out of range.
 */
size_t		logfmt_record_need(const unsigned char *buf, size_t len);
/*
 * Decodes the record at the start of buf. LOGFMT_SHORT means buf holds only
 * part of a record whose length is plausible; *why is set for LOGFMT_BAD.
 */
enum logfmt_status logfmt_record_decode(const unsigned char *buf, size_t len,
		    struct logfmt_record *, const char **why);
/*
 * The same, checking everything but the checksum: only for bytes whose
 * checksum was just checked by another reader of the same file.
 */
enum logfmt_status logfmt_record_decode_checked(const unsigned char *buf,
		    size_t len, struct logfmt_record *, const char **why);
/*
 * Finds the first offset in [from, max_start) where a complete, valid
 * record with min_seq <= seq <= max_seq starts in buf (the whole record
 * inside buf). Returns -1 if none does. Used to tell a torn tail (nothing
 * valid follows the damage) from corruption before the tail.
 */
long long	logfmt_record_find(const unsigned char *buf, size_t len, size_t from,
		    size_t max_start, uint64_t min_seq, uint64_t max_seq);

/* Encodes a segment header into LOGFMT_HEADER_SIZE bytes. */
void		logfmt_seghdr_encode(unsigned char *out, const struct logfmt_seghdr *);
/* Decodes a segment header; *why is set unless LOGFMT_OK. */
enum logfmt_status logfmt_seghdr_decode(const unsigned char *buf, size_t len,
		    struct logfmt_seghdr *, const char **why);
/* The 8 bytes stored at LOGFMT_CLEAN_OFFSET for a sealed (or open) segment. */
void		logfmt_clean_marker(unsigned char *out, int clean);

/* Encodes a snapshot header into LOGFMT_HEADER_SIZE bytes. */
void		logfmt_snaphdr_encode(unsigned char *out, const struct logfmt_snaphdr *);
/* Decodes a snapshot header (not the body); *why is set unless LOGFMT_OK. */
enum logfmt_status logfmt_snaphdr_decode(const unsigned char *buf, size_t len,
		    struct logfmt_snaphdr *, const char **why);

#endif
