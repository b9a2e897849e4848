/*
 * Unit tests for daemon/storage/disklog.c with a private event base: appends and
 * their callbacks, replay into a module, a segment switch in the middle of
 * one batch, snapshots and the disk budget, a torn tail, corruption and
 * --repair, injected write and fsync failures, reads and the watch.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "cpu.h"
#include "disklog.h"
#include "log.h"
#include "logscan.h"
#include "osdep-proc.h"
#include "unit.h"
#include "xmalloc.h"

static char			 state[PATH_MAX];
static char			 faultfile[PATH_MAX + 16];
static struct event_base	*base;

/* The test module: records seen by replay, state from restore. */
static struct {
	uint64_t	seqs[100000];
	size_t		n;
	int		bad;		/* a replay out of order */
	json_int_t	counter;	/* its live state */
	json_int_t	restored;	/* -1 until restore runs */
} mod;

/* Replay refuses this seq; checks that "i" is seq - 1 (when set). */
static uint64_t	mod_refuse_seq;
static int	mod_check_i;

/* The module's snapshot: its counter. */
static json_t *
mod_snapshot(void)
{
	return json_pack("{s:I}", "counter", mod.counter);
}

/* The module's restore. */
static int
mod_restore(json_t *st)
{
	mod.restored = json_integer_value(json_object_get(st, "counter"));
	mod.counter = mod.restored;
	return 0;
}

/* The module's replay: checks order and counts. */
static int
mod_replay(uint64_t seq, int64_t ts, const char *type, json_t *payload)
{
	if (mod.n > 0 && seq != mod.seqs[mod.n - 1] + 1)
		mod.bad = 1;
	if (seq == mod_refuse_seq)
		return -1;
	if (mod_check_i && json_integer_value(json_object_get(payload,
	    "i")) != (json_int_t)seq - 1)
		mod.bad = 1;
	if (mod.n < sizeof mod.seqs / sizeof mod.seqs[0])
		mod.seqs[mod.n++] = seq;
	mod.counter++;
	return 0;
}

static const struct disklog_module test_module = {
	"test", mod_snapshot, mod_restore, mod_replay, NULL
};

/* Callback results. */
static struct {
	int		done;
	int		failed;
	int		last_err;
	uint64_t	last_seq;
	int		order_bad;
} cbs;

/* Counts a done record. */
static void
done_cb(void *arg, int error, uint64_t seq)
{
	if (error != 0) {
		cbs.failed++;
		cbs.last_err = error;
	} else {
		if (cbs.last_seq != 0 && seq <= cbs.last_seq)
			cbs.order_bad = 1;
		cbs.last_seq = seq;
		cbs.done++;
	}
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

/* Default options for the tests. */
static struct disklog_opts
opts(uint64_t seg, uint64_t max)
{
	struct disklog_opts	o;

	memset(&o, 0, sizeof o);
	o.segment_bytes = seg;
	o.max_bytes = max;
	o.fsync = 1;
	return o;
}

/* Opens the log, resetting the module's view first. */
static int
open_log(const struct disklog_opts *o, char **cause)
{
	memset(&mod, 0, sizeof mod);
	mod.restored = -1;
	memset(&cbs, 0, sizeof cbs);
	return disklog_open(base, state, o, cause);
}

/* Counts files with a suffix in STATE/log. */
static int
count_files(const char *sub, const char *suffix)
{
	char		*dir = xasprintf("%s/log%s", state, sub);
	DIR		*d = opendir(dir);
	struct dirent	*de;
	int		 n = 0;
	size_t		 l;

	free(dir);
	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		l = strlen(de->d_name);
		if (l >= strlen(suffix) &&
		    strcmp(de->d_name + l - strlen(suffix), suffix) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* nftw callback: removes one entry. */
static int
rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Removes the whole state folder's log. */
static void
wipe(void)
{
	char	*dir = xasprintf("%s/log", state);

	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* The "i" of the first record append_n writes (then i + 1, ...). */
static int	append_base;

/* Appends n records of about size bytes. */
static void
append_n(int n, size_t size, int durable)
{
	char	*pad = xmalloc(size + 1);
	json_t	*p;
	int	 i;

	memset(pad, 'x', size);
	pad[size] = '\0';
	for (i = 0; i < n; i++) {
		p = json_pack("{s:i, s:s}", "i", append_base + i, "pad", pad);
		if (disklog_append("test.rec", p, durable, done_cb, NULL) == 0)
			cbs.failed++;
		json_decref(p);
	}
	free(pad);
}

/* Appends, callbacks in order, replay after a clean restart. */
static void
test_append_replay(void)
{
	struct disklog_opts	 o = opts(64 << 20, 1ULL << 30);
	json_t			*st, *p;
	char			*cause;

	CHECK(open_log(&o, &cause) == 0, "a new log opens");
	st = disklog_status();
	CHECK(strcmp(json_string_value(json_object_get(st, "previous_shutdown")),
	    "new") == 0 && json_integer_value(json_object_get(st, "next_seq")) == 1,
	    "a new log starts at seq 1");
	json_decref(st);
	p = json_pack("{s:s}", "k", "v");
	CHECK(disklog_append("Bad Type", p, 1, done_cb, NULL) == 0 &&
	    disklog_error() == EINVAL, "a bad type is refused");
	json_decref(p);
	append_n(500, 50, 0);
	append_n(500, 50, 1);
	CHECK(run_until(&cbs.done, 1000) && cbs.failed == 0 && !cbs.order_bad,
	    "1000 appends: every callback ran, in seq order");
	CHECK(disklog_done_seq() == 1000 && disklog_last_seq() == 1000,
	    "done and last seq are 1000");
	disklog_close();
	CHECK(disklog_append("test.rec", json_null(), 1, done_cb, NULL) == 0 &&
	    disklog_error() == ESHUTDOWN, "appends after close are refused");

	disklog_register(&test_module);
	CHECK(open_log(&o, &cause) == 0, "reopens");
	CHECK(mod.n == 1000 && mod.seqs[0] == 1 && mod.seqs[999] == 1000 &&
	    !mod.bad && mod.restored == -1, "replay gave the module all 1000 "
	    "records in order, no snapshot");
	st = disklog_status();
	CHECK(strcmp(json_string_value(json_object_get(st, "previous_shutdown")),
	    "clean") == 0, "the previous shutdown reads clean");
	json_decref(st);
	disklog_close();
}

/* A segment switch in the middle of one batch. */
static void
test_switch_mid_batch(void)
{
	struct disklog_opts	 o = opts(4096, 1ULL << 30);
	struct logscan_dir	 d;
	struct logscan_seg	 res;
	json_t			*st;
	char			*cause, *dir;
	size_t			 i;
	int			 dfd, ok = 1;
	uint64_t		 next = 1;
	struct timespec		 t0, t1;

	wipe();
	/*
	 * Durable records wait 1 s for company, so all 60 (appended in one
	 * loop turn) make one batch even on a loaded machine.
	 */
	o.commit_delay_us = 1000000;
	CHECK(open_log(&o, &cause) == 0, "opens with 4 KiB segments");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	append_n(60, 200, 1);
	CHECK(run_until(&cbs.done, 60), "60 records of ~250 bytes are done");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) /
	    1000000 >= 950, "the commit delay was waited for (at least 1 s)");
	st = disklog_status();
	CHECK(json_integer_value(json_object_get(st, "batches")) == 1 &&
	    json_integer_value(json_object_get(st, "largest_batch")) == 60,
	    "they were written as one batch");
	CHECK(json_integer_value(json_object_get(st, "segments")) >= 3,
	    "that batch spans %lld segments",
	    (long long)json_integer_value(json_object_get(st, "segments")));
	json_decref(st);
	disklog_close();

	dir = xasprintf("%s/log", state);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	logscan_list(dfd, &d, &cause);
	for (i = 0; i < d.nsegs; i++) {
		if (d.segs[i].seq != next || logscan_segment(dfd, d.segs[i].name,
		    0, d.segs[i].seq, i + 1 == d.nsegs, NULL, NULL, &res) !=
		    LOGSCAN_OK || res.size > 4096 || (i + 1 < d.nsegs &&
		    !res.hdr.clean))
			ok = 0;
		next = res.last_seq + 1;
	}
	CHECK(ok && next == 61, "each segment is valid, at most 4 KiB, sealed, "
	    "and the seqs run on across them");
	logscan_dir_free(&d);
	close(dfd);
	free(dir);

	CHECK(open_log(&o, &cause) == 0 && mod.n == 60 && !mod.bad,
	    "replay across the segments gives all 60 in order");
	disklog_close();
}

/* Snapshot, restore, and the disk budget. */
static void
test_snapshot_budget(void)
{
	struct disklog_opts	 o = opts(16384, 65536);
	json_t			*st;
	char			*cause;
	uint64_t		 bytes, maxb = 0;
	int			 i, overs = 0;

	wipe();
	CHECK(open_log(&o, &cause) == 0, "opens with a 64 KiB budget");
	for (i = 0; i < 200; i++) {
		append_n(10, 400, 1);
		mod.counter += 10;
		run_until(&cbs.done, (i + 1) * 10);
		st = disklog_status();
		bytes = (uint64_t)json_integer_value(json_object_get(st, "bytes"));
		if (bytes > maxb)
			maxb = bytes;
		if (bytes > 65536)
			overs++;
		json_decref(st);
	}
	CHECK(cbs.done == 2000 && cbs.failed == 0, "2000 records (~900 KiB) "
	    "through a 64 KiB budget");
	CHECK(overs == 0, "disk use never went over the budget (peak %llu bytes)",
	    (unsigned long long)maxb);
	st = disklog_status();
	CHECK(json_integer_value(json_object_get(json_object_get(st, "snapshot"),
	    "written")) > 0 && count_files("", ".snap") == 1,
	    "snapshots were written and only the newest is kept");
	json_decref(st);
	disklog_close();

	CHECK(open_log(&o, &cause) == 0, "reopens after snapshots");
	CHECK(mod.restored > 0 && mod.restored + (json_int_t)mod.n == 2000 &&
	    mod.counter == 2000 && !mod.bad, "restore (%lld) plus replay (%zu) "
	    "rebuild the state of all 2000 records", (long long)mod.restored,
	    mod.n);
	disklog_close();
}

/* Reads and the gap after dropped segments. */
struct readres {
	int		 done;
	int		 error;
	json_t		*records;
	struct disklog_page page;
};

/* Keeps a page. */
static void
read_cb(void *arg, int error, const struct disklog_page *page)
{
	struct readres	*r = arg;

	r->error = error;
	r->page = *page;
	r->records = json_incref(page->records);
	r->done = 1;
}

/* disklog_read: pages, limits and gaps. */
static void
test_read(void)
{
	struct disklog_opts	 o = opts(16384, 65536);
	struct readres		 r;
	char			*cause;
	int			 ok = 1;
	size_t			 i;

	CHECK(open_log(&o, &cause) == 0, "reopens for reads");
	memset(&r, 0, sizeof r);
	disklog_read(0, 50, 1 << 20, read_cb, &r);
	run_until(&r.done, 1);
	CHECK(r.error == 0 && r.page.gap && r.page.first_seq > 1 &&
	    json_array_size(r.records) == (r.page.first_seq + 50 > 2001 ?
	    2001 - r.page.first_seq : 50) &&
	    (uint64_t)json_integer_value(json_object_get(json_array_get(
	    r.records, 0), "seq")) == r.page.first_seq,
	    "reading from 0 after segments were dropped says gap and starts "
	    "at the oldest record (%llu)", (unsigned long long)r.page.first_seq);
	json_decref(r.records);
	memset(&r, 0, sizeof r);
	disklog_read(1990, 1000, 1 << 20, read_cb, &r);
	run_until(&r.done, 1);
	for (i = 0; i < json_array_size(r.records); i++) {
		if (json_integer_value(json_object_get(json_array_get(r.records, i),
		    "seq")) != (json_int_t)(1991 + i))
			ok = 0;
	}
	CHECK(r.error == 0 && !r.page.gap && json_array_size(r.records) == 10 &&
	    ok && !r.page.more, "reading after 1990 gives 1991..2000 and no more");
	CHECK(json_integer_value(json_object_get(json_object_get(json_array_get(
	    r.records, 0), "data"), "i")) == 0, "records carry their data");
	json_decref(r.records);
	memset(&r, 0, sizeof r);
	disklog_read(1000, 1000, 3000, read_cb, &r);
	run_until(&r.done, 1);
	CHECK(r.error == 0 && json_array_size(r.records) < 10 && r.page.more,
	    "a byte budget stops a page early (%zu records)",
	    json_array_size(r.records));
	json_decref(r.records);
	disklog_close();
}

/* A torn tail is cut and reported; corruption refuses; --repair. */
static void
test_torn_corrupt_repair(void)
{
	struct disklog_opts	 o = opts(64 << 20, 1ULL << 30);
	struct logscan_dir	 d;
	json_t			*st;
	char			*cause, *dir, *path;
	int			 dfd, fd;
	struct stat		 sb;

	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log");
	append_n(100, 30, 1);
	run_until(&cbs.done, 100);
	disklog_close();
	dir = xasprintf("%s/log", state);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	logscan_list(dfd, &d, &cause);
	path = xasprintf("%s/%s", dir, d.segs[0].name);
	logscan_dir_free(&d);

	/*
	 * A crash: the segment is not sealed, and half a record is at the
	 * end. (A sealed segment cut short is corruption: tested below.)
	 */
	fd = open(path, O_RDWR);
	if (fd == -1 || pwrite(fd, "\0\0\0\0\0\0\0\0", 8,
	    LOGFMT_CLEAN_OFFSET) != 8 || fstat(fd, &sb) != 0 ||
	    ftruncate(fd, sb.st_size - 20) != 0)
		CHECK(0, "cannot cut %s", path);
	close(fd);
	CHECK(open_log(&o, &cause) == 0 && mod.n == 99, "a torn last record is "
	    "cut: 99 records replay");
	st = disklog_status();
	CHECK(json_is_object(json_object_get(st, "torn_tail")) &&
	    strcmp(json_string_value(json_object_get(st, "previous_shutdown")),
	    "crash") == 0, "daemon status reports the torn tail and a crash");
	json_decref(st);
	memset(&cbs, 0, sizeof cbs);
	append_n(1, 10, 1);
	run_until(&cbs.done, 1);
	CHECK(cbs.last_seq == 100, "the next record takes seq 100");
	disklog_close();

	/* A segment sealed at a clean shutdown and then cut short. */
	if (stat(path, &sb) != 0 || truncate(path, sb.st_size - 5) != 0)
		CHECK(0, "cannot cut %s", path);
	cause = NULL;
	CHECK(open_log(&o, &cause) != 0 && cause != NULL &&
	    strstr(cause, "sealed") != NULL, "a sealed segment cut short is "
	    "corruption, not a torn tail");
	free(cause);
	/* Put the record back as it was: a crash tail again, cut at open. */
	fd = open(path, O_RDWR);
	if (fd == -1 || pwrite(fd, "\0\0\0\0\0\0\0\0", 8,
	    LOGFMT_CLEAN_OFFSET) != 8)
		CHECK(0, "cannot unseal %s", path);
	close(fd);
	CHECK(open_log(&o, &cause) == 0 && mod.n == 99, "unsealed, the same "
	    "cut is a torn tail again");
	disklog_close();

	/* Corruption before the tail: one flipped byte in record 10. */
	fd = open(path, O_RDWR);
	if (fd == -1 || pwrite(fd, "Z", 1, LOGFMT_HEADER_SIZE + 10 * 60) != 1)
		CHECK(0, "cannot damage %s", path);
	close(fd);
	cause = NULL;
	CHECK(open_log(&o, &cause) != 0 && cause != NULL &&
	    strstr(cause, "0000000000000001.seg") != NULL &&
	    strstr(cause, "offset") != NULL &&
	    strstr(cause, "gbrd --repair") != NULL, "corruption refuses the "
	    "start naming file, offset and the repair command");
	free(cause);
	o.repair = 1;
	CHECK(open_log(&o, &cause) == 0, "--repair opens it");
	CHECK(mod.n > 0 && mod.n < 100 && !mod.bad, "the good records before "
	    "the damage replay (%zu)", mod.n);
	CHECK(count_files("/damaged", "") > 2, "the damaged file was moved "
	    "aside, not deleted");
	st = disklog_status();
	CHECK(json_is_object(json_object_get(st, "repaired")) &&
	    (size_t)json_integer_value(json_object_get(st, "next_seq")) ==
	    mod.n + 1, "status reports the repair and seqs continue");
	json_decref(st);
	disklog_close();
	o.repair = 0;
	CHECK(open_log(&o, &cause) == 0, "after repair it opens normally");
	disklog_close();
	free(path);
	free(dir);
	close(dfd);
}

/*
 * Replay: every payload reaches its module with its own seq, and a module
 * refusing a record stops the start (or, with --repair, cuts the log)
 * exactly there, wherever the record is.
 */
static void
test_replay_refusal(void)
{
	struct disklog_opts	 o = opts(64 << 20, 1ULL << 30);
	static const uint64_t	 refuse[] = { 5000, 9000 };
	json_t			*st;
	char			*cause;
	size_t			 k;

	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log");
	append_n(10000, 20, 0);
	CHECK(run_until(&cbs.done, 10000), "10000 records written");
	disklog_close();
	mod_check_i = 1;
	CHECK(open_log(&o, &cause) == 0 && mod.n == 10000 && !mod.bad,
	    "10000 records replay in order, each with its own payload");
	disklog_close();
	for (k = 0; k < sizeof refuse / sizeof refuse[0]; k++) {
		mod_refuse_seq = refuse[k];
		cause = NULL;
		CHECK(open_log(&o, &cause) != 0 && cause != NULL &&
		    strstr(cause, "refused record seq") != NULL &&
		    mod.n == refuse[k] - 1 && !mod.bad, "a refusal of seq %llu "
		    "stops the start there (%zu replayed)",
		    (unsigned long long)refuse[k], mod.n);
		free(cause);
	}
	o.repair = 1;
	CHECK(open_log(&o, &cause) == 0 && mod.n == 8999 && !mod.bad,
	    "--repair keeps the records before the refused one");
	st = disklog_status();
	CHECK(json_integer_value(json_object_get(st, "next_seq")) == 9000,
	    "and the seqs go on from there");
	json_decref(st);
	disklog_close();
	o.repair = 0;
	mod_refuse_seq = 0;
	CHECK(open_log(&o, &cause) == 0 && mod.n == 8999 && !mod.bad,
	    "after the repair, 8999 records replay");
	disklog_close();
	mod_check_i = 0;
}

static long long	status_int_in(const char *, const char *);

/* Whether disklog may start a parse-ahead helper here (two CPUs or more). */
static int	pa_cpus;

/* Record offsets of one segment, by seq (logscan callback). */
static uint64_t	pa_off[30001];

static int
pa_off_cb(void *arg, const struct logfmt_record *rec, uint64_t off)
{
	if (rec->seq < sizeof pa_off / sizeof pa_off[0])
		pa_off[rec->seq] = off;
	return 0;
}

/* The first segment's path (new string); fills pa_off. */
static char *
pa_scan(void)
{
	struct logscan_dir	 d;
	struct logscan_seg	 res;
	char			*dir = xasprintf("%s/log", state), *cause, *path;
	int			 dfd = open(dir, O_RDONLY | O_DIRECTORY);

	memset(pa_off, 0, sizeof pa_off);
	if (dfd == -1 || logscan_list(dfd, &d, &cause) != 0 || d.nsegs != 1)
		CHECK(0, "cannot list %s", dir);
	logscan_segment(dfd, d.segs[0].name, 0, d.segs[0].seq, 1, pa_off_cb,
	    NULL, &res);
	path = xasprintf("%s/%s", dir, d.segs[0].name);
	logscan_dir_free(&d);
	close(dfd);
	free(dir);
	return path;
}

/* Overwrites bytes of a file, keeping what was there in old. */
static void
pa_poke(const char *path, uint64_t off, const void *buf, size_t len,
    void *old)
{
	int	fd = open(path, O_RDWR);

	if (fd == -1 || (old != NULL && pread(fd, old, len, (off_t)off) !=
	    (ssize_t)len) || pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		CHECK(0, "cannot change %s", path);
	close(fd);
}

/*
 * A large segment is replayed with a helper thread parsing payloads ahead:
 * every record still reaches its module once, in order, with its own
 * payload, and damage anywhere (in a chunk the helper parsed, or in one it
 * hopped over unchecked) stops the start at the very record where it is.
 */
static void
test_parse_ahead(void)
{
	struct disklog_opts	 o = opts(64 << 20, 1ULL << 30);
	static const uint64_t	 damage[] = { 4000, 7000, 15000, 29000 };
	unsigned char		 save[8], bad[8];
	size_t			 i;
	struct stat		 sb;
	char			*cause, *path;
	long long		 ahead;

	/* The count the log itself asks before it starts its helper. */
	pa_cpus = osdep_cpu_count() > 1;
	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log");
	append_n(30000, 20, 0);
	CHECK(run_until(&cbs.done, 30000), "30000 records written");
	disklog_close();
	path = pa_scan();
	CHECK(stat(path, &sb) == 0 && sb.st_size > 1024 * 1024,
	    "one segment of %lld bytes", (long long)sb.st_size);
	mod_check_i = 1;
	CHECK(open_log(&o, &cause) == 0 && mod.n == 30000 && !mod.bad,
	    "30000 records replay in order, each with its own payload");
	ahead = status_int_in("replay", "parsed_ahead");
	if (pa_cpus)
		CHECK(ahead > 0 && ahead < 30000, "the helper parsed %lld of "
		    "them, the loop the rest", ahead);
	else
		CHECK(ahead == 0, "one CPU to run on: no helper, the loop parsed "
		    "them all");
	disklog_close();

	/*
	 * A flipped byte in a payload, at places the helper is likely to
	 * have parsed (it starts with the furthest chunk of its window,
	 * seqs 3841 to 4096) and elsewhere.
	 */
	for (i = 0; i < sizeof damage / sizeof damage[0]; i++) {
		pa_poke(path, pa_off[damage[i]] + 40, "Z", 1, save);
		cause = NULL;
		CHECK(open_log(&o, &cause) != 0 && cause != NULL &&
		    strstr(cause, "offset") != NULL &&
		    mod.n == damage[i] - 1 && !mod.bad, "damage in seq %llu "
		    "stops the start there (%zu replayed)",
		    (unsigned long long)damage[i], mod.n);
		free(cause);
		pa_poke(path, pa_off[damage[i]] + 40, save, 1, NULL);
	}

	/*
	 * A wrong length in a record the helper hops over (seq 100, chunk
	 * 0): the helper is thrown off, the loop's own check stops at it.
	 */
	pa_poke(path, pa_off[100], "\0\0\0\0", 4, save);
	memcpy(bad, save, 4);
	bad[0] += 4;	/* still a plausible length: the hop goes wrong */
	pa_poke(path, pa_off[100], bad, 4, NULL);
	cause = NULL;
	CHECK(open_log(&o, &cause) != 0 && cause != NULL && mod.n == 99 &&
	    !mod.bad, "a bad length before the helper's chunks stops the "
	    "start at seq 100 (%zu replayed)", mod.n);
	free(cause);
	pa_poke(path, pa_off[100], save, 4, NULL);

	/* A torn tail: the helper stops where the loop cuts. */
	if (stat(path, &sb) != 0 || truncate(path, sb.st_size - 7) != 0 ||
	    (pa_poke(path, LOGFMT_CLEAN_OFFSET, "\0\0\0\0\0\0\0\0", 8,
	    NULL), 0))
		CHECK(0, "cannot cut %s", path);
	CHECK(open_log(&o, &cause) == 0 && mod.n == 29999 && !mod.bad,
	    "a torn last record is cut; 29999 replay with the helper");
	disklog_close();

	/* A refusal in a helper's chunk, and the payloads after a repair. */
	mod_refuse_seq = 20000;
	cause = NULL;
	CHECK(open_log(&o, &cause) != 0 && mod.n == 19999 && !mod.bad,
	    "a module refusing seq 20000 stops there (%zu replayed)", mod.n);
	free(cause);
	mod_refuse_seq = 0;
	CHECK(open_log(&o, &cause) == 0 && mod.n == 29999 && !mod.bad,
	    "and without the refusal all replay again");
	disklog_close();
	free(path);

	/* A snapshot in the middle of the segment: the helper skips before it. */
	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log");
	append_n(10000, 20, 0);
	mod.counter = 10000;
	CHECK(run_until(&cbs.done, 10000) && disklog_snapshot() == 0,
	    "10000 records, then a snapshot");
	for (i = 0; i < 500 && status_int_in("snapshot", "written") < 1; i++)
		run_until(&cbs.done, cbs.done + 1);
	append_base = 10000;
	append_n(10000, 20, 0);
	CHECK(run_until(&cbs.done, 20000) && count_files("", ".seg") == 1,
	    "10000 more, in the same segment");
	disklog_close();
	append_base = 0;
	CHECK(open_log(&o, &cause) == 0 && mod.restored == 10000 &&
	    mod.n == 10000 && mod.seqs[0] == 10001 && !mod.bad &&
	    (status_int_in("replay", "parsed_ahead") > 0) == pa_cpus,
	    "restore, then the "
	    "10000 records after the snapshot replay with their payloads");
	disklog_close();

	/* Records of very different sizes: hops and reads across buffers. */
	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log");
	for (i = 0; i < 3000; i++) {
		append_base = (int)i;
		append_n(1, (i * 7919) % 6000 + 10, 0);
	}
	append_base = 0;
	CHECK(run_until(&cbs.done, 3000), "3000 records of 10 to 6000 bytes");
	disklog_close();
	CHECK(open_log(&o, &cause) == 0 && mod.n == 3000 && !mod.bad &&
	    (status_int_in("replay", "parsed_ahead") > 0) == pa_cpus,
	    "replay in order, "
	    "every payload its own, %lld from the helper",
	    status_int_in("replay", "parsed_ahead"));
	disklog_close();
	mod_check_i = 0;
}

/* The size of the first segment, or -1. */
static long long
seg_size(void)
{
	struct logscan_dir	 d;
	struct stat		 sb;
	char			*dir = xasprintf("%s/log", state), *cause;
	long long		 r = -1;
	int			 dfd;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) != -1 &&
	    logscan_list(dfd, &d, &cause) == 0) {
		if (d.nsegs > 0 && fstatat(dfd, d.segs[0].name, &sb, 0) == 0)
			r = (long long)sb.st_size;
		logscan_dir_free(&d);
	}
	if (dfd != -1)
		close(dfd);
	free(dir);
	return r;
}

static void	fault(const char *);

/* An integer one level down in disklog_status(). */
static long long
status_int_in(const char *obj, const char *key)
{
	json_t		*st = disklog_status();
	long long	 v = json_integer_value(json_object_get(
			    json_object_get(st, obj), key));

	json_decref(st);
	return v;
}


/* A counter of disklog_status(). */
static long long
status_int(const char *key)
{
	json_t		*st = disklog_status();
	long long	 v = json_integer_value(json_object_get(st, key));

	json_decref(st);
	return v;
}

/*
 * A small batch that needs no fsync is written by the loop itself, its
 * callbacks in the same pass; one that needs an fsync, or that would
 * start a new segment, goes to the writer thread. Order holds across
 * both, and everything replays.
 */
static void
test_inline(void)
{
	struct disklog_opts	 o = opts(64 << 20, 1ULL << 30);
	struct timespec		 settle = { 0, 100 * 1000 * 1000 };
	char			*cause;
	long long		 before, inl;

	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log (fsync on)");
	nanosleep(&settle, NULL);	/* the new writer thread goes to sleep */
	append_n(3, 10, 0);
	before = seg_size();
	event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(cbs.done == 3 && seg_size() > before && !cbs.order_bad,
	    "three records that need no fsync: written and acknowledged in "
	    "one pass of the loop");
	inl = status_int("inline_batches");
	CHECK(inl == 1, "by the loop itself, as one batch (%lld)", inl);
	append_n(2, 10, 1);
	CHECK(run_until(&cbs.done, 5) && status_int("inline_batches") == inl &&
	    status_int("fsyncs") == 1, "a durable batch is the writer's (one "
	    "fsync)");
	append_n(1, 70 * 1024, 0);
	CHECK(run_until(&cbs.done, 6) && status_int("inline_batches") == inl,
	    "a batch over the inline limit is the writer's");
	append_n(4, 10, 0);
	CHECK(run_until(&cbs.done, 10) && !cbs.order_bad &&
	    status_int("inline_batches") == inl + 1, "then the loop writes "
	    "again, in order");

	/* A write by the loop that fails: errors, no acks, then it works. */
	fault("disklog.write ENOSPC");
	nanosleep(&settle, NULL);
	inl = status_int("inline_batches");
	append_n(3, 10, 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(cbs.failed == 3 && cbs.last_err == ENOSPC && cbs.done == 10 &&
	    status_int("inline_batches") == inl + 1, "a failed write by the "
	    "loop fails its records with ENOSPC and acks none");
	fault(NULL);
	nanosleep(&settle, NULL);
	append_n(2, 10, 0);
	CHECK(run_until(&cbs.done, 12) && cbs.last_seq == 12 && !cbs.order_bad,
	    "healed, the next records are written, reusing seq 11");
	CHECK(status_int("inline_batches") == inl + 1, "while the error "
	    "stood, the writer wrote them");
	nanosleep(&settle, NULL);
	append_n(2, 10, 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(cbs.done == 14 && status_int("inline_batches") == inl + 2,
	    "then the loop writes them itself again");
	disklog_close();
	CHECK(open_log(&o, &cause) == 0, "reopens");
	CHECK(mod.n == 14 && mod.seqs[0] == 1 && mod.seqs[13] == 14 &&
	    !mod.bad, "the fourteen acknowledged records replay, in order");
	disklog_close();

	/* A small segment: a batch that would start the next one is synced. */
	wipe();
	o = opts(4096, 1ULL << 30);
	CHECK(open_log(&o, &cause) == 0, "a fresh log with small segments");
	append_n(1, 10, 0);
	CHECK(run_until(&cbs.done, 1), "one record in");
	inl = status_int("inline_batches");
	append_n(1, 4096, 0);
	CHECK(run_until(&cbs.done, 2) && status_int("inline_batches") == inl &&
	    count_files("", ".seg") == 2, "a batch that starts a segment goes "
	    "to the writer, which starts it");
	disklog_close();
}

/* Arms (or with NULL heals) the fault file. */
static void
fault(const char *line)
{
	FILE	*f;

	if (line == NULL) {
		unlink(faultfile);
		return;
	}
	f = fopen(faultfile, "w");
	fprintf(f, "%s\n", line);
	fclose(f);
}

/* Injected write and fsync failures: errors, no acks, recovery. */
static void
test_faults(void)
{
	struct disklog_opts	 o = opts(64 << 20, 1ULL << 30);
	json_t			*st;
	char			*cause;
	struct timespec		 pause = { 0, 50 * 1000 * 1000 };

	wipe();
	CHECK(open_log(&o, &cause) == 0, "a fresh log with faults armed by file");
	append_n(10, 10, 1);
	run_until(&cbs.done, 10);

	fault("disklog.write ENOSPC");
	nanosleep(&pause, NULL);
	append_n(5, 10, 1);
	run_until(&cbs.failed, 5);
	CHECK(cbs.failed == 5 && cbs.last_err == ENOSPC && cbs.done == 10,
	    "a failed write fails its records with ENOSPC and acks none");
	st = disklog_status();
	CHECK(json_integer_value(json_object_get(json_object_get(st,
	    "storage_error"), "errno")) == ENOSPC,
	    "status shows the storage error");
	json_decref(st);
	fault(NULL);
	nanosleep(&pause, NULL);
	append_n(1, 10, 1);
	run_until(&cbs.done, 11);
	CHECK(cbs.done == 11 && cbs.last_seq == 11, "after healing the next "
	    "record is written, reusing seq 11");
	st = disklog_status();
	CHECK(json_is_null(json_object_get(st, "storage_error")) &&
	    json_is_object(json_object_get(st, "last_storage_error")),
	    "the error clears and is kept as the last one");
	json_decref(st);

	fault("disklog.fsync EIO");
	nanosleep(&pause, NULL);
	append_n(3, 10, 1);
	run_until(&cbs.failed, 8);
	CHECK(cbs.failed == 8 && cbs.last_err == EIO && cbs.done == 11,
	    "a failed fsync fails its records with EIO");
	fault(NULL);
	nanosleep(&pause, NULL);
	append_n(2, 10, 1);
	run_until(&cbs.done, 13);
	CHECK(cbs.done == 13 && cbs.last_seq == 13, "and writing resumes at "
	    "seq 12");
	disklog_close();
	CHECK(open_log(&o, &cause) == 0 && mod.n == 13 && !mod.bad &&
	    mod.seqs[12] == 13, "after a restart exactly the 13 acknowledged "
	    "records are there, in order");
	disklog_close();
}

/* The watch: records by value in order, then a tick. */
static struct {
	uint64_t	seqs[64];
	int		n;
	int		ticks;
} w;

/* Collects watched records. */
static void
watch_cb(void *arg, uint64_t seq, int64_t ts, const char *type, size_t tl,
    const char *data, size_t dl)
{
	if (type == NULL) {
		w.ticks++;
		return;
	}
	if (w.n < 64 && tl == 8 && memcmp(type, "test.rec", 8) == 0 &&
	    dl > 2 && data[0] == '{')
		w.seqs[w.n++] = seq;
}

/* The watch hands over records appended while it is set. */
static void
test_watch(void)
{
	struct disklog_opts	o = opts(64 << 20, 1ULL << 30);
	char			*cause;
	uint64_t		 first;

	CHECK(open_log(&o, &cause) == 0, "opens for the watch");
	memset(&w, 0, sizeof w);
	first = disklog_last_seq() + 1;
	disklog_watch(watch_cb, NULL);
	append_n(20, 10, 0);
	run_until(&cbs.done, 20);
	CHECK(w.n == 20 && w.seqs[0] == first && w.seqs[19] == first + 19 &&
	    w.ticks > 0, "the watch saw all 20 by value, in order, and ticks");
	disklog_watch(NULL, NULL);
	disklog_close();
}

int
main(void)
{
	char	*cause = NULL;

	unit_tmpdir(state, sizeof state, "disklog");
	snprintf(faultfile, sizeof faultfile, "%s/faults", state);
	setenv("GBR_FAULT_FILE", faultfile, 1);
	log_open("test-disklog", LOG_LEVEL_ERROR, LOG_DEST_STDERR);
	if (osdep_loop_prepare(&cause) != 0 ||
	    (base = event_base_new()) == NULL)
		return 1;
	test_append_replay();
	test_switch_mid_batch();
	test_snapshot_budget();
	test_read();
	test_torn_corrupt_repair();
	test_replay_refusal();
	test_parse_ahead();
	test_inline();
	test_faults();
	test_watch();
	wipe();
	rmdir(state);
	event_base_free(base);
	return unit_done();
}
