/*
 * Reading a disk log folder from its files: listing segments and snapshots,
 * checking one segment record by record, and reading a snapshot. The
 * daemon uses it to open (and repair) its log, and gbrctl uses the very
 * same code for `gbrctl log verify`, so both give one verdict on a file.
 * Plain POSIX I/O, no libevent; it never writes.
 *
 * The verdict on a segment:
 *   ok       every byte is a valid record, seqs follow on one by one;
 *   torn     the last segment ends in damage after which nothing valid
 *            follows: a write cut short by a crash, safe to cut off;
 *   corrupt  damage with valid records after it, a damaged sealed segment,
 *            a bad header, a foreign log id or a seq out of order: never
 *            skipped silently.
 */
#ifndef GBR_LOGSCAN_H
#define GBR_LOGSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "logfmt.h"

#define LOGSCAN_SEG_SUFFIX	".seg"
#define LOGSCAN_SNAP_PREFIX	"snap-"
#define LOGSCAN_SNAP_SUFFIX	".snap"

struct logscan_file {
	char		*name;
	uint64_t	 seq;		/* a segment's first seq, a snapshot's seq */
};

/* A log folder's files, each list sorted by seq. */
struct logscan_dir {
	struct logscan_file	*segs;
	size_t			 nsegs;
	struct logscan_file	*snaps;
	size_t			 nsnaps;
};

enum logscan_status {
	LOGSCAN_OK = 0,
	LOGSCAN_TORN,
	LOGSCAN_CORRUPT,
	LOGSCAN_STOPPED,	/* the record callback asked to stop */
	LOGSCAN_IOERR,
};

struct logscan_seg {
	enum logscan_status	 status;
	int			 header_ok;
	struct logfmt_seghdr	 hdr;
	uint64_t		 size;		/* file size */
	uint64_t		 records;	/* valid records read */
	uint64_t		 last_seq;	/* of the last valid record, else first_seq - 1 */
	uint64_t		 good_end;	/* offset after the last valid record */
	uint64_t		 bad_offset;	/* where the damage starts */
	char			 why[192];
};

/*
 * Called for each valid record in order, with its offset in the file. The
 * record points into a buffer valid for the call only. Return 0 to go on,
 * anything else to stop (status LOGSCAN_STOPPED).
 */
typedef int (*logscan_record_cb)(void *arg, const struct logfmt_record *,
		    uint64_t offset);

/*
 * A bounded buffered reader over one file: the buffer grows to at most one
 * maximal record plus a chunk, whatever the file claims.
 */
struct logscan_reader {
	int		 fd;
	uint64_t	 size;		/* bytes of the file to consider */
	unsigned char	*buf;
	size_t		 cap;
	uint64_t	 off;		/* file offset of buf[0] */
	size_t		 len;		/* valid bytes in buf */
};

/* Sets up a reader over fd's first size bytes. */
void	 logscan_reader_init(struct logscan_reader *, int fd, uint64_t size);
/* Frees the buffer (not the fd). */
void	 logscan_reader_release(struct logscan_reader *);
/*
 * Decodes the record at pos. LOGFMT_SHORT means the reader's end comes
 * before the record's. Returns -1 on a read error (errno set).
 */
int	 logscan_record_at(struct logscan_reader *, uint64_t pos,
	    struct logfmt_record *, const char **why);

/*
 * The same without the checksum: only for a reader whose records another
 * pass checks, and that keeps its result only where that pass agrees.
 */
int	 logscan_record_at_unchecked(struct logscan_reader *, uint64_t pos,
	    struct logfmt_record *, const char **why);

/*
 * The size the record at pos says it has, without checking it (a reader
 * skipping records another pass checks): 0 if there is no plausible one.
 */
size_t	 logscan_record_size_at(struct logscan_reader *, uint64_t pos);

/* Lists the segments and snapshots in an open folder. Returns 0 or -1 with *cause. */
int	 logscan_list(int dirfd, struct logscan_dir *, char **cause);
void	 logscan_dir_free(struct logscan_dir *);
/* The file name of a segment or a snapshot (new string). */
char	*logscan_seg_name(uint64_t first_seq);
char	*logscan_snap_name(uint64_t seq);

/*
 * Checks one segment. log_id 0 accepts any id (the caller compares);
 * name_seq is the seq the file name promises as its first. last says
 * whether this is the newest segment (only there can a tail be torn). cb
 * may be NULL. Fills *out and returns its status.
 */
enum logscan_status logscan_segment(int dirfd, const char *name, uint64_t log_id,
	    uint64_t name_seq, int last, logscan_record_cb cb, void *arg,
	    struct logscan_seg *out);

/*
 * Asked before a record is decoded: nonzero if another reader of the same
 * file, which does not change meanwhile, has just checked the checksum of
 * the valid record with this seq at this offset (the bytes are the same,
 * so the checksum is not computed again). Everything else is checked.
 */
typedef int (*logscan_checked_cb)(void *arg, uint64_t seq, uint64_t offset);

/* logscan_segment, with checked (may be NULL) consulted for each record. */
enum logscan_status logscan_segment_trusting(int dirfd, const char *name,
	    uint64_t log_id, uint64_t name_seq, int last, logscan_record_cb cb,
	    logscan_checked_cb checked, void *arg, struct logscan_seg *out);

/*
 * Reads and checks a snapshot: header, length and body checksum. On success
 * returns 0, fills *hdr and sets *body (NUL-terminated, the caller frees)
 * and *len. On failure returns -1 and sets *why (a new string).
 */
int	 logscan_snapshot(int dirfd, const char *name, struct logfmt_snaphdr *hdr,
	    char **body, size_t *len, char **why);

/* Reads exactly len bytes at off (EINTR and short reads handled). Returns bytes read or -1. */
long long logscan_pread(int fd, void *buf, size_t len, uint64_t off);

#endif
