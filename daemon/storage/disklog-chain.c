/*
 * The disk log's hash chain (doc/DISKLOG.md, "The chain"; the hash and
 * the signatures are store/logchain.c's). The writer thread computes it:
 * once a batch's records are in the file (after their fsync, if they have
 * one) it hashes them, in seq order, from the batch buffer it just wrote
 * (dl_chain_written), so a record whose write failed, and whose seq was
 * given out again, never joined it, and the loop copies nothing for it.
 * The head (w_chain) is the writer's; it publishes it with its progress
 * (r_chain, under mtx) and the loop keeps the last one it saw (chain).
 * When the loop writes a small batch itself (dl_write_inline) it holds
 * the writer's state, and hashes that batch the same way.
 *
 * On the loop thread: every chain_every records, and at a clean
 * shutdown, the head is appended as a "log.chain" record {upto, head,
 * sig?, key?} (it joins the chain in its turn); a snapshot carries the
 * head it was taken at ({chain: {seq, head, sig?}}), and the segments it
 * drops are only those the head covers, so the chain stays checkable from
 * the snapshot on. At open the chain is taken from the snapshot and
 * carried through the replay, before the writer starts, through the
 * records the replay's scan accepted and no others: a large segment by a
 * thread that reads and hashes it beside the loop's replay
 * (dl_chain_ahead_*), whose head the loop keeps only where its scan
 * accepted the same records; a small one by the loop after its scan.
 *
 * With a signing key (an Ed25519 seed, 64 hex digits, in the file [log]
 * signing_key names), every head written is signed, on the loop: once per
 * head, not per record.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "cpu.h"
#include "disklog-int.h"
#include "log.h"
#include "logchain.h"
#include "logfmt.h"
#include "logscan.h"
#include "xmalloc.h"

/* Segments smaller than this the loop hashes itself once it replayed them. */
#define DL_CHAIN_AHEAD_MIN	(256 * 1024)

/*
 * The replay's hasher for one segment: a thread that reads the file on its
 * own and carries the chain through it while the loop replays it.
 */
struct dl_chain_ahead {
	pthread_t	 thr;
	int		 fd;
	uint64_t	 size;
	struct logchain	 from;		/* the chain before the segment */
	struct logchain	 c;		/* ... and after what it walked */
	uint64_t	 end;		/* the offset after the last one walked */
	uint64_t	 last_seq;
	int		 threaded;	/* thr runs (else the loop hashes) */
};

/* Loads the signing key, if one is configured. Returns 0 or -1. */
int
dl_chain_open(char **cause)
{
	unsigned char	 seed[LOGCHAIN_SEED_LEN];
	char		 buf[2 * LOGCHAIN_SEED_LEN + 2];
	ssize_t		 n;
	int		 fd;

	logchain_init(&dl.chain, 0, NULL);
	dl.chain_anchor = 0;
	dl.chain_signed = 0;
	if (!dl.opts.chain || dl.opts.signing_key == NULL)
		return 0;
	if ((fd = open(dl.opts.signing_key, O_RDONLY | O_CLOEXEC)) == -1) {
		*cause = xasprintf("the disk log's signing key %s: %s",
		    dl.opts.signing_key, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n >= 2 * LOGCHAIN_SEED_LEN) {
		buf[2 * LOGCHAIN_SEED_LEN] = '\0';
		if (logchain_unhex(buf, seed, sizeof seed) == 0) {
			logchain_keypair(seed, dl.chain_pk, dl.chain_sk);
			sodium_memzero(seed, sizeof seed);
			sodium_memzero(buf, sizeof buf);
			dl.chain_signed = 1;
			dl.opts.signing_key = NULL;	/* borrowed: open only */
			return 0;
		}
	}
	sodium_memzero(buf, sizeof buf);
	*cause = xasprintf("the disk log's signing key %s is not 64 hex "
	    "digits (an Ed25519 seed: gbrctl log keygen makes one)",
	    dl.opts.signing_key);
	return -1;
}

/* The chain a snapshot carries (root borrowed); none: it starts there. */
void
dl_chain_restore(json_t *root, uint64_t snap_seq)
{
	json_t		*c = json_object_get(root, "chain");
	unsigned char	 head[LOGCHAIN_LEN];

	if (json_is_object(c) && json_is_integer(json_object_get(c, "seq")) &&
	    logchain_unhex(json_string_value(json_object_get(c, "head")), head,
	    sizeof head) == 0)
		logchain_init(&dl.chain, (uint64_t)json_integer_value(
		    json_object_get(c, "seq")), head);
	else
		logchain_init(&dl.chain, snap_seq, NULL);
	dl.chain_anchor = dl.chain.seq;
}

/*
 * Walks a segment's records from its header up to limit, without their
 * checksums, adding to c each record that follows it; stops at the first
 * one that cannot be decoded. *end and *last_seq: after the last walked.
 */
static void
dl_chain_walk(int fd, uint64_t limit, struct logchain *c, uint64_t *end,
    uint64_t *last_seq)
{
	struct logscan_reader	 rd;
	struct logfmt_record	 rec;
	const char		*why;
	uint64_t		 pos = LOGFMT_HEADER_SIZE;

	logscan_reader_init(&rd, fd, limit);
	*last_seq = 0;
	while (pos < limit && logscan_record_at_unchecked(&rd, pos, &rec,
	    &why) == LOGFMT_OK) {
		if (rec.seq == c->seq + 1)
			logchain_add(c, rec.seq, rec.ts_ms, rec.type,
			    rec.type_len, rec.data, rec.data_len);
		*last_seq = rec.seq;
		pos += rec.size;
	}
	*end = pos;
	logscan_reader_release(&rd);
}

/* The hasher's thread: the whole file. */
static void *
dl_chain_ahead_main(void *arg)
{
	struct dl_chain_ahead	*ch = arg;

	dl_chain_walk(ch->fd, ch->size, &ch->c, &ch->end, &ch->last_seq);
	return NULL;
}

/*
 * Starts carrying the chain through a segment the loop is about to
 * replay (NULL without the chain, or if the file cannot be opened: the
 * scan then fails too). A large one, with two CPUs, is hashed by a thread
 * of its own from the chain as it is now, so that the loop thread does not
 * (it parses and applies); a small one is hashed by dl_chain_ahead_end.
 * Either way the loop's scan is the judge: only the records it accepted
 * join.
 */
struct dl_chain_ahead *
dl_chain_ahead_start(const char *name)
{
	struct dl_chain_ahead	*ch;
	struct stat		 sb;
	int			 fd;

	if (!dl.opts.chain)
		return NULL;
	if ((fd = openat(dl.dirfd, name, O_RDONLY | O_CLOEXEC |
	    O_NOFOLLOW)) == -1)
		return NULL;
	ch = xcalloc(1, sizeof *ch);
	ch->fd = fd;
	ch->from = ch->c = dl.chain;
	if (fstat(fd, &sb) == 0 && sb.st_size >= DL_CHAIN_AHEAD_MIN &&
	    osdep_cpu_count() >= 2) {
		ch->size = (uint64_t)sb.st_size;
		ch->threaded = pthread_create(&ch->thr, NULL,
		    dl_chain_ahead_main, ch) == 0;
	}
	return ch;
}

/*
 * The loop's scan of the segment accepted the records before good_end,
 * the last one last_seq: the chain goes on through them, and them only.
 * The hasher's head is kept if it walked exactly those; if it walked
 * anything else (it went on past damage, a torn tail or a record a module
 * refused) or there was none, the loop hashes them itself.
 */
void
dl_chain_ahead_end(struct dl_chain_ahead *ch, uint64_t good_end,
    uint64_t last_seq)
{
	struct logchain	c;
	uint64_t	end, seq;

	if (ch == NULL)
		return;
	if (ch->threaded)
		pthread_join(ch->thr, NULL);
	if (ch->threaded && ch->end == good_end && ch->last_seq == last_seq)
		dl.chain = ch->c;
	else {
		if (ch->threaded)
			log_debug("disk log: the chain's hasher read to offset "
			    "%" PRIu64 " (seq %" PRIu64 "), the replay kept "
			    "records to %" PRIu64 " (seq %" PRIu64 "): hashing "
			    "those again", ch->end, ch->last_seq, good_end,
			    last_seq);
		c = ch->from;
		dl_chain_walk(ch->fd, good_end, &c, &end, &seq);
		dl.chain = c;
	}
	close(ch->fd);
	free(ch);
}

/* The chain as the replay left it becomes the writer's (before it starts). */
void
dl_chain_start(void)
{
	dl.w_chain = dl.chain;
	dl.r_chain = dl.chain;
}

/* Reads a little-endian integer of a record's head. */
static uint64_t
dl_chain_le(const unsigned char *p, int n)
{
	uint64_t	v = 0;

	while (n-- > 0)
		v = v << 8 | p[n];
	return v;
}

/*
 * Bytes [from, to) of a batch, whole records in seq order, are in the
 * file: they join the chain. Writer thread (or the loop holding its
 * state). A record that does not follow the head (a hole a snapshot
 * covers, where the chain cannot go on) does not join, as in the replay.
 */
void
dl_chain_written(const struct dl_buf *b, size_t from, size_t to)
{
	const unsigned char	*r;
	size_t			 p, size, tl;
	uint64_t		 seq;

	for (p = from; p < to; p += size) {
		r = b->data + p;
		size = 8 + (size_t)dl_chain_le(r, 4);
		seq = dl_chain_le(r + 8, 8);
		tl = r[24];
		if (seq != dl.w_chain.seq + 1)
			continue;
		logchain_add(&dl.w_chain, seq, (int64_t)dl_chain_le(r + 16, 8),
		    (const char *)r + LOGFMT_RECORD_HEAD, tl,
		    (const char *)r + LOGFMT_RECORD_HEAD + tl,
		    size - LOGFMT_RECORD_HEAD - tl);
	}
}

/* The loop takes the head the writer published last. */
void
dl_chain_sync(void)
{
	pthread_mutex_lock(&dl.mtx);
	dl.chain = dl.r_chain;
	pthread_mutex_unlock(&dl.mtx);
}

/* The head now as {seq|upto, head, sig?, key?} (new). */
json_t *
dl_chain_json(const char *seqname)
{
	unsigned char	 sig[LOGCHAIN_SIG_LEN];
	char		 hex[2 * LOGCHAIN_SIG_LEN + 1];
	json_t		*o;

	logchain_hex(dl.chain.head, LOGCHAIN_LEN, hex);
	o = json_pack("{s:I, s:s}", seqname, (json_int_t)dl.chain.seq, "head",
	    hex);
	if (dl.chain_signed) {
		logchain_sign(dl.chain_sk, dl.log_id, &dl.chain, sig);
		logchain_hex(sig, sizeof sig, hex);
		json_object_set_new(o, "sig", json_string(hex));
		logchain_hex(dl.chain_pk, LOGCHAIN_PK_LEN, hex);
		json_object_set_new(o, "key", json_string(hex));
	}
	return o;
}

/*
 * Appends the head as a log.chain record when chain_every records joined
 * since the last one (or, with force, any). The head is the one the loop
 * saw last (dl_done_cb copies it; callers that need it fresh sync first).
 */
void
dl_chain_anchor(int force)
{
	json_t	*o;

	if (!dl.opts.chain || dl.closing || dl.chain.seq <= dl.chain_anchor ||
	    (!force && dl.chain.seq - dl.chain_anchor < dl.opts.chain_every))
		return;
	dl.chain_anchor = dl.chain.seq + 1;	/* the anchor itself */
	o = dl_chain_json("upto");
	if (disklog_append(LOGCHAIN_ANCHOR_TYPE, o, 0, NULL, NULL) == 0)
		log_warn("disk log: the chain's head at seq %" PRIu64 " could "
		    "not be appended", dl.chain.seq);
	json_decref(o);
}
