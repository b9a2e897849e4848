/*
 * Unit tests for the disk log's hash chain as gbrd computes it (the
 * writer thread hashes what it wrote: daemon/storage/disklog-chain.c),
 * checked against the files themselves: every log.chain head in them
 * must be the head recomputed here from the records (store/logchain.c),
 * and the head written at shutdown must cover every record before it.
 * Around a write that fails half way (its seqs are given out again, with
 * other records), a batch whose tail fails because the next segment
 * cannot be created (its head part is in the file and stays), and a
 * restart (the chain goes on from the replay); and at open, a large
 * segment hashed by a thread beside the replay, a torn tail, damage and a
 * record a module refused, each cut off.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "disklog.h"
#include "log.h"
#include "logchain.h"
#include "logfmt.h"
#include "logscan.h"
#include "osdep-proc.h"
#include "unit.h"
#include "xmalloc.h"

static char			 state[PATH_MAX];
static char			 faultfile[PATH_MAX + 16];
static struct event_base	*base;

/* A module whose replay refuses one seq (0: none). */
static uint64_t	refuse_seq;

/* The module's replay: refuses refuse_seq. */
static int
mod_replay(uint64_t seq, int64_t ts, const char *type, json_t *payload)
{
	return seq == refuse_seq ? -1 : 0;
}

static const struct disklog_module test_module = {
	"test", NULL, NULL, mod_replay, NULL
};

/* Callback results. */
static struct {
	int		done;
	int		failed;
	int		last_err;
} cbs;

/* Counts a record done or failed. */
static void
done_cb(void *arg, int error, uint64_t seq)
{
	if (error != 0) {
		cbs.failed++;
		cbs.last_err = error;
	} else
		cbs.done++;
}

/* Runs the loop until *flag reaches want or 10 s pass. */
static int
run_until(int *flag, int want)
{
	struct timeval	tv = { 0, 10000 };
	time_t		end = time(NULL) + 10;

	while (*flag < want && time(NULL) < end) {
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return *flag >= want;
}

/* Options: the chain on, a head every 5 records. */
static struct disklog_opts
opts(uint64_t seg)
{
	struct disklog_opts	o;

	memset(&o, 0, sizeof o);
	o.segment_bytes = seg;
	o.max_bytes = 1ULL << 30;
	o.fsync = 1;
	o.chain = 1;
	o.chain_every = 5;
	return o;
}

/* nftw callback: removes one entry. */
static int
rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Removes the state folder's log. */
static void
wipe(void)
{
	char	*dir = xasprintf("%s/log", state);

	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* Arms (or with NULL heals) the fault file, and waits for it to be read. */
static void
fault(const char *line)
{
	struct timespec	 pause = { 0, 60 * 1000 * 1000 };
	FILE		*f;

	if (line == NULL)
		unlink(faultfile);
	else if ((f = fopen(faultfile, "w")) != NULL) {
		fprintf(f, "%s\n", line);
		fclose(f);
	}
	nanosleep(&pause, NULL);
}

/* Appends n records of about size bytes, each with its tag. */
static void
append_n(int n, size_t size, int durable, const char *tag)
{
	char	*pad = xmalloc(size + 1);
	json_t	*p;
	int	 i;

	memset(pad, 'x', size);
	pad[size] = '\0';
	for (i = 0; i < n; i++) {
		p = json_pack("{s:s, s:i, s:s}", "tag", tag, "i", i, "pad", pad);
		if (disklog_append("test.rec", p, durable, done_cb, NULL) == 0)
			cbs.failed++;
		json_decref(p);
	}
	free(pad);
}

/* What a check of the files found. */
struct chk {
	uint64_t	records;	/* seqs 1..records, in order */
	int		heads;		/* log.chain records whose head held */
	int		bad;		/* ... and those whose head did not */
	int		gap;		/* a seq out of order */
	uint64_t	last_upto;	/* of the last head */
	uint64_t	last_head_seq;	/* the last head's own seq */
	int		tagged;		/* records holding the tag looked for */
};

/* Reads a whole file (new), or NULL. */
static unsigned char *
slurp(const char *path, size_t *len)
{
	struct stat	 sb;
	unsigned char	*b;
	int		 fd = open(path, O_RDONLY);

	if (fd == -1 || fstat(fd, &sb) != 0) {
		if (fd != -1)
			close(fd);
		return NULL;
	}
	b = xmalloc((size_t)sb.st_size + 1);
	*len = read(fd, b, (size_t)sb.st_size) == sb.st_size ?
	    (size_t)sb.st_size : 0;
	close(fd);
	return b;
}

/* True if the len bytes at p hold the string s. */
static int
holds(const char *p, size_t len, const char *s)
{
	size_t	n = strlen(s), i;

	for (i = 0; i + n <= len; i++) {
		if (memcmp(p + i, s, n) == 0)
			return 1;
	}
	return 0;
}

/* Checks one log.chain record against the heads recomputed so far. */
static void
check_head(struct chk *k, const struct logfmt_record *r,
    const unsigned char (*heads)[LOGCHAIN_LEN], uint64_t nheads)
{
	json_t		*o = json_loadb(r->data, r->data_len, 0, NULL);
	unsigned char	 h[LOGCHAIN_LEN];
	json_int_t	 upto = json_integer_value(json_object_get(o, "upto"));

	if (upto >= 1 && (uint64_t)upto <= nheads &&
	    logchain_unhex(json_string_value(json_object_get(o, "head")), h,
	    sizeof h) == 0 && memcmp(h, heads[upto - 1], sizeof h) == 0)
		k->heads++;
	else
		k->bad++;
	k->last_upto = (uint64_t)upto;
	k->last_head_seq = r->seq;
	json_decref(o);
}

/*
 * Recomputes the chain from seq 1 through every segment and checks each
 * head in them (the log has no snapshot here); counts records whose data
 * holds tag.
 */
static struct chk
check_files(const char *tag)
{
	struct chk		 k;
	struct logscan_dir	 d;
	struct logfmt_record	 r;
	struct logchain		 c;
	unsigned char		(*heads)[LOGCHAIN_LEN] = NULL, *b;
	char			*dir = xasprintf("%s/log", state), *path, *cause;
	const char		*why;
	size_t			 i, len, off;
	int			 dfd = open(dir, O_RDONLY | O_DIRECTORY);

	memset(&k, 0, sizeof k);
	logchain_init(&c, 0, NULL);
	if (dfd == -1 || logscan_list(dfd, &d, &cause) != 0) {
		k.bad = 1;
		free(dir);
		return k;
	}
	for (i = 0; i < d.nsegs; i++) {
		path = xasprintf("%s/%s", dir, d.segs[i].name);
		b = slurp(path, &len);
		free(path);
		for (off = LOGFMT_HEADER_SIZE; b != NULL && off < len &&
		    logfmt_record_decode(b + off, len - off, &r, &why) ==
		    LOGFMT_OK; off += r.size) {
			if (r.seq != k.records + 1)
				k.gap = 1;
			k.records = r.seq;
			logchain_add(&c, r.seq, r.ts_ms, r.type, r.type_len,
			    r.data, r.data_len);
			heads = xreallocarray(heads, r.seq, sizeof *heads);
			memcpy(heads[r.seq - 1], c.head, LOGCHAIN_LEN);
			if (r.type_len == strlen(LOGCHAIN_ANCHOR_TYPE) &&
			    memcmp(r.type, LOGCHAIN_ANCHOR_TYPE, r.type_len) == 0)
				check_head(&k, &r,
				    (const unsigned char (*)[LOGCHAIN_LEN])heads,
				    r.seq);
			else if (holds(r.data, r.data_len, tag))
				k.tagged++;
		}
		free(b);
	}
	logscan_dir_free(&d);
	close(dfd);
	free(dir);
	free(heads);
	return k;
}

/* A write that fails half way: its records never join the chain. */
static void
test_failed_write(void)
{
	struct disklog_opts	 o = opts(64 << 20);
	struct chk		 k;
	char			*cause;

	wipe();
	memset(&cbs, 0, sizeof cbs);
	CHECK(disklog_open(base, state, &o, &cause) == 0, "a fresh log with "
	    "the chain on");
	append_n(12, 40, 1, "before");
	CHECK(run_until(&cbs.done, 12), "12 records written");
	fault("disklog.write ENOSPC");
	append_n(4, 40, 1, "lost-durable");
	run_until(&cbs.failed, 4);
	append_n(3, 40, 0, "lost-inline");
	run_until(&cbs.failed, 7);
	CHECK(cbs.failed == 7 && cbs.last_err == ENOSPC, "with the disk "
	    "failing half way into each write, 7 records fail (writer and "
	    "loop)");
	fault(NULL);
	append_n(6, 40, 1, "after");
	append_n(6, 40, 0, "after");
	CHECK(run_until(&cbs.done, 24), "healed: 12 more written, on the "
	    "failed records' seqs");
	disklog_close();
	k = check_files("lost");
	CHECK(k.tagged == 0 && !k.gap && k.records >= 24, "the failed "
	    "records are not in the files; %llu records in order",
	    (unsigned long long)k.records);
	CHECK(k.heads >= 2 && k.bad == 0, "every head in the files is the "
	    "chain recomputed from the records (%d heads, %d wrong)", k.heads,
	    k.bad);
	CHECK(k.last_head_seq == k.records && k.last_upto == k.records - 1,
	    "the head written at shutdown covers every record before it "
	    "(upto %llu of %llu)", (unsigned long long)k.last_upto,
	    (unsigned long long)k.records);

	memset(&cbs, 0, sizeof cbs);
	CHECK(disklog_open(base, state, &o, &cause) == 0, "reopens");
	append_n(7, 40, 0, "restarted");
	CHECK(run_until(&cbs.done, 7), "7 more after the restart");
	disklog_close();
	k = check_files("restarted");
	CHECK(k.tagged == 7 && k.bad == 0 && !k.gap && k.heads >= 3 &&
	    k.last_upto == k.records - 1, "the chain went on from the replay: "
	    "%d heads hold, the last covers all %llu records", k.heads,
	    (unsigned long long)k.records);
}

/*
 * One batch across a segment end, the next segment failing to be
 * created: the part in the old segment is written and stays (its seqs are
 * not given out again), so it joins the chain; the rest fails.
 */
static void
test_failed_switch(void)
{
	struct disklog_opts	 o = opts(4096);
	struct chk		 k;
	char			*cause;
	int			 n;

	wipe();
	memset(&cbs, 0, sizeof cbs);
	/* Durable records wait 1 s for company: the 30 make one batch. */
	o.commit_delay_us = 1000000;
	CHECK(disklog_open(base, state, &o, &cause) == 0, "a fresh log with "
	    "4 KiB segments");
	fault("disklog.create ENOSPC");
	append_n(30, 200, 1, "batch");
	run_until(&cbs.failed, 1);
	CHECK(cbs.done > 0 && cbs.failed > 0 && cbs.done + cbs.failed == 30,
	    "one batch across a segment it cannot create: %d records written, "
	    "%d failed", cbs.done, cbs.failed);
	fault(NULL);
	n = cbs.done;
	append_n(10, 200, 0, "after");
	CHECK(run_until(&cbs.done, n + 10), "healed: 10 more written");
	disklog_close();
	k = check_files("after");
	CHECK(k.tagged == 10 && !k.gap && k.bad == 0 && k.heads >= 1,
	    "every head in the %llu records holds (%d)",
	    (unsigned long long)k.records, k.heads);
	CHECK(k.last_head_seq == k.records && k.last_upto == k.records - 1,
	    "the head at shutdown covers the part of the batch that was "
	    "written and all after it (upto %llu of %llu)",
	    (unsigned long long)k.last_upto, (unsigned long long)k.records);
}

/* The path of the only segment (new). */
static char *
only_segment(void)
{
	struct logscan_dir	 d;
	char			*dir = xasprintf("%s/log", state), *cause;
	char			*path = NULL;
	int			 dfd = open(dir, O_RDONLY | O_DIRECTORY);

	if (dfd != -1 && logscan_list(dfd, &d, &cause) == 0) {
		if (d.nsegs == 1)
			path = xasprintf("%s/%s", dir, d.segs[0].name);
		logscan_dir_free(&d);
	}
	if (dfd != -1)
		close(dfd);
	free(dir);
	return path;
}

/*
 * A large segment is hashed at open by a thread of its own while the loop
 * replays it; the loop keeps that head only where its own scan agrees. A
 * torn tail is cut (the hasher stops there too); damage that --repair
 * cuts off is something the hasher walks past without checksums, so its
 * head must not be kept there.
 */
static void
test_replay_hasher(void)
{
	struct disklog_opts	 o = opts(64 << 20);
	struct chk		 k;
	struct stat		 sb;
	char			*cause = NULL, *path;
	unsigned char		*b, mark[8];
	size_t			 len, off, i;
	int			 fd;

	wipe();
	memset(&cbs, 0, sizeof cbs);
	o.chain_every = 500;
	CHECK(disklog_open(base, state, &o, &cause) == 0, "a fresh log");
	for (i = 0; i < 6; i++) {
		append_n(500, 200, 0, "big");
		run_until(&cbs.done, 500 * (int)(i + 1));
	}
	CHECK(cbs.done == 3000, "3000 records of ~250 bytes");
	disklog_close();
	path = only_segment();
	CHECK(path != NULL && stat(path, &sb) == 0 && sb.st_size > 512 * 1024,
	    "in one segment of %lld bytes", path != NULL ?
	    (long long)sb.st_size : 0LL);

	/* A crash's torn tail: half a record at the end, the segment open. */
	b = path != NULL ? slurp(path, &len) : NULL;
	logfmt_clean_marker(mark, 0);
	if (b != NULL && (fd = open(path, O_WRONLY)) != -1) {
		(void)pwrite(fd, b + LOGFMT_HEADER_SIZE, 100, (off_t)len);
		(void)pwrite(fd, mark, sizeof mark, LOGFMT_CLEAN_OFFSET);
		close(fd);
	}
	memset(&cbs, 0, sizeof cbs);
	CHECK(disklog_open(base, state, &o, &cause) == 0, "reopens, the torn "
	    "tail cut");
	append_n(20, 200, 0, "after-torn");
	CHECK(run_until(&cbs.done, 20), "20 more");
	disklog_close();
	k = check_files("after-torn");
	CHECK(k.tagged == 20 && !k.gap && k.bad == 0 && k.heads >= 6 &&
	    k.last_upto == k.records - 1, "the chain went on from the head "
	    "the replay computed: %d heads hold, the last covers all %llu",
	    k.heads, (unsigned long long)k.records);

	/* Damage in the middle: one byte of a record's data, not resealed. */
	free(b);
	b = slurp(path, &len);
	fd = open(path, O_WRONLY);
	for (off = LOGFMT_HEADER_SIZE, i = 0; b != NULL && i < 2000; i++)
		off += 8 + (size_t)(b[off] | b[off + 1] << 8 |
		    b[off + 2] << 16 | (size_t)b[off + 3] << 24);
	if (fd != -1 && b != NULL) {
		(void)pwrite(fd, "#", 1, (off_t)(off + 60));
		close(fd);
	}
	free(b);
	free(cause);
	cause = NULL;
	CHECK(disklog_open(base, state, &o, &cause) != 0, "damage in the "
	    "middle refuses the start");
	free(cause);
	cause = NULL;
	o.repair = 1;
	memset(&cbs, 0, sizeof cbs);
	CHECK(disklog_open(base, state, &o, &cause) == 0, "--repair cuts it "
	    "off");
	o.repair = 0;
	append_n(20, 200, 0, "after-repair");
	CHECK(run_until(&cbs.done, 20), "20 more");
	disklog_close();
	k = check_files("after-repair");
	CHECK(k.tagged == 20 && !k.gap && k.bad == 0 && k.records < 2100 &&
	    k.last_upto == k.records - 1, "the head goes on from the last "
	    "record kept, not from what the hasher read past the damage (%d "
	    "heads hold, %llu records)", k.heads,
	    (unsigned long long)k.records);
	free(path);
}

/*
 * A module refuses a record at open and --repair cuts the log before it:
 * the record must not be in the chain the log goes on with (it was,
 * when the loop hashed each record as its scan read it).
 */
static void
test_refused_record(void)
{
	struct disklog_opts	 o = opts(64 << 20);
	struct chk		 k;
	char			*cause = NULL;

	wipe();
	memset(&cbs, 0, sizeof cbs);
	CHECK(disklog_open(base, state, &o, &cause) == 0, "a fresh log");
	append_n(30, 40, 0, "first");
	CHECK(run_until(&cbs.done, 30), "30 records in one small segment");
	disklog_close();
	refuse_seq = 20;
	CHECK(disklog_open(base, state, &o, &cause) != 0, "the module "
	    "refuses seq 20: no start");
	free(cause);
	cause = NULL;
	o.repair = 1;
	memset(&cbs, 0, sizeof cbs);
	CHECK(disklog_open(base, state, &o, &cause) == 0 &&
	    disklog_last_seq() == 19, "--repair keeps seqs 1 to 19");
	refuse_seq = 0;
	o.repair = 0;
	append_n(10, 40, 0, "after-refusal");
	CHECK(run_until(&cbs.done, 10), "10 more, from seq 20");
	disklog_close();
	k = check_files("after-refusal");
	CHECK(k.tagged == 10 && !k.gap && k.bad == 0 && k.heads >= 1 &&
	    k.last_upto == k.records - 1, "every head holds and the last "
	    "covers all %llu records: the refused one never joined (%d heads "
	    "hold, %d wrong)", (unsigned long long)k.records, k.heads, k.bad);
}

int
main(void)
{
	char	*cause = NULL;

	unit_tmpdir(state, sizeof state, "disklog-chain");
	snprintf(faultfile, sizeof faultfile, "%s/faults", state);
	setenv("GBR_FAULT_FILE", faultfile, 1);
	log_open("test-disklog-chain", LOG_LEVEL_ERROR, LOG_DEST_STDERR);
	if (osdep_loop_prepare(&cause) != 0 ||
	    (base = event_base_new()) == NULL)
		return 1;
	test_failed_write();
	test_failed_switch();
	test_replay_hasher();
	disklog_register(&test_module);
	test_refused_record();
	wipe();
	unlink(faultfile);
	rmdir(state);
	event_base_free(base);
	return unit_done();
}
