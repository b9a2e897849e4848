/*
 * bench-disklog: the disk log's speed, printed beside the raw floor of the
 * same disk measured by a bare C loop in the same run: write(2) of the same
 * record followed by fdatasync(2) each time, and 1000 records followed by
 * one fdatasync. It links daemon/storage/disklog.c with a private event base, the
 * way gbrd runs it, and prints figures and goals; it never asserts a time.
 *
 *   non-durable appends/s                 goal >= 500k/s
 *   durable acks/s, 1, 16 and 64 writers  goal with 64: >= 20x one fsync/record
 *   and fsyncs per acknowledgement
 *   replay speed                          goal >= 1M records/s
 *   start-up time, empty log and with N records
 *   the hash chain: appends and replay with it on beside off
 *                                         goal: within 10%
 *
 * usage: bench-disklog [-c] [-n RECORDS] [-d DIR] [-t SECONDS] [-r ROUNDS]
 *   -c  the hash chain's comparison only (ROUNDS of each, 3 by default)
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "disklog.h"
#include "log.h"
#include "logfmt.h"
#include "xmalloc.h"

static struct event_base	*base;
static int			 chain_on;	/* the hash chain (DISKLOG.md) */
static char			*state;
static json_t			*payload;
static uint64_t			 replayed;

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* nftw callback: removes one entry. */
static int
rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Empties the state folder's log. */
static void
wipe(void)
{
	char	*dir = xasprintf("%s/log", state);

	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* Options with no budget pressure. */
static struct disklog_opts
bench_opts(void)
{
	struct disklog_opts	o;

	memset(&o, 0, sizeof o);
	o.segment_bytes = 64ULL << 20;
	o.max_bytes = 64ULL << 30;
	o.fsync = 1;
	o.chain = chain_on;
	o.chain_every = 1000;
	return o;
}

/* Opens the log; exits on failure. Returns the seconds it took. */
static double
open_log(void)
{
	struct disklog_opts	 o = bench_opts();
	char			*cause;
	double			 t = now();

	if (disklog_open(base, state, &o, &cause) != 0) {
		fprintf(stderr, "bench-disklog: %s\n", cause);
		exit(1);
	}
	return now() - t;
}

/* Runs the loop until the log has done everything appended. */
static void
drain(void)
{
	while (disklog_done_seq() < disklog_last_seq())
		event_base_loop(base, EVLOOP_ONCE);
}

/* The raw floor: a bare loop of write + fdatasync on a file of our own. */
static void
raw_floor(const unsigned char *rec, size_t len, double secs, double *per_sync,
    double *batch1000, double *write_only)
{
	char	*path = xasprintf("%s/raw.bin", state);
	double	 t0, t;
	long	 n = 0, i;
	int	 fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1) {
		perror(path);
		exit(1);
	}
	t0 = now();
	do {
		if (write(fd, rec, len) != (ssize_t)len || fdatasync(fd) != 0)
			exit(1);
		n++;
	} while ((t = now()) - t0 < secs);
	*per_sync = n / (t - t0);

	n = 0;
	t0 = now();
	do {
		for (i = 0; i < 1000; i++) {
			if (write(fd, rec, len) != (ssize_t)len)
				exit(1);
		}
		if (fdatasync(fd) != 0)
			exit(1);
		n += 1000;
	} while ((t = now()) - t0 < secs);
	*batch1000 = n / (t - t0);

	n = 0;
	t0 = now();
	do {
		for (i = 0; i < 10000; i++) {
			if (write(fd, rec, len) != (ssize_t)len)
				exit(1);
		}
		n += 10000;
	} while ((t = now()) - t0 < secs);
	*write_only = n / (t - t0);
	close(fd);
	unlink(path);
	free(path);
}

/*
 * Non-durable appends of n records; returns appends per second, until all
 * are written, and in *call_us the loop thread's time per append call.
 */
static double
bench_nondurable(long n, double *call_us)
{
	double	t0 = now(), t1;
	long	i;

	for (i = 0; i < n; i++) {
		while (disklog_append("bench.rec", payload, 0, NULL, NULL) == 0) {
			if (disklog_error() != EAGAIN) {
				fprintf(stderr, "append failed: %s\n",
				    strerror(disklog_error()));
				exit(1);
			}
			sched_yield();	/* the writer is behind: let it catch up */
		}
	}
	t1 = now();
	drain();
	*call_us = (t1 - t0) * 1e6 / n;
	return n / (now() - t0);
}

/* jansson's share: encoding the same payload n times, in us per record. */
static double
bench_jansson(long n)
{
	char	buf[512];
	double	t0 = now();
	long	i;

	for (i = 0; i < n; i++) {
		if (json_dumpb(payload, buf, sizeof buf, JSON_COMPACT |
		    JSON_ENCODE_ANY) == 0)
			exit(1);
	}
	return (now() - t0) * 1e6 / n;
}

/* A closed-loop writer: appends, waits for the fsync, appends again. */
struct writer {
	long	acks;
	int	stop;
};

static void	writer_next(struct writer *);

/* One durable record acknowledged. */
static void
writer_done(void *arg, int error, uint64_t seq)
{
	struct writer	*w = arg;

	if (error != 0) {
		fprintf(stderr, "durable append failed: %s\n", strerror(error));
		exit(1);
	}
	w->acks++;
	if (!w->stop)
		writer_next(w);
}

/* Appends the writer's next durable record. */
static void
writer_next(struct writer *w)
{
	if (disklog_append("bench.rec", payload, 1, writer_done, w) == 0) {
		fprintf(stderr, "append refused: %s\n", strerror(disklog_error()));
		exit(1);
	}
}

/* Returns the fsyncs done so far. */
static long
fsyncs(void)
{
	json_t	*st = disklog_status();
	long	 n = (long)json_integer_value(json_object_get(st, "fsyncs"));

	json_decref(st);
	return n;
}

/* nwriters closed-loop writers for secs: acks/s and fsyncs per ack. */
static double
bench_durable(int nwriters, double secs, double *per_ack)
{
	struct writer	*w = xcalloc((size_t)nwriters, sizeof *w);
	struct timeval	 tv = { 0, 0 };
	long		 acks = 0, f0 = fsyncs();
	double		 t0 = now(), t;
	int		 i;

	tv.tv_sec = (time_t)secs;
	tv.tv_usec = (suseconds_t)((secs - (double)tv.tv_sec) * 1e6);
	for (i = 0; i < nwriters; i++)
		writer_next(&w[i]);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	for (i = 0; i < nwriters; i++)
		w[i].stop = 1;
	t = now();
	drain();
	for (i = 0; i < nwriters; i++)
		acks += w[i].acks;
	*per_ack = acks > 0 ? (double)(fsyncs() - f0) / (double)acks : 0;
	free(w);
	return acks / (t - t0);
}

/* The module used to measure replay with JSON parsing. */
static int
bench_replay(uint64_t seq, int64_t ts, const char *type, json_t *p)
{
	replayed++;
	return json_is_object(p) ? 0 : -1;
}

static const struct disklog_module bench_module = {
	"bench", NULL, NULL, bench_replay, NULL
};

/* Records replayed by the last open. */
static double
replayed_now(void)
{
	json_t	*st = disklog_status();
	double	 r = (double)json_integer_value(json_object_get(json_object_get(st,
	    "replay"), "records"));

	json_decref(st);
	return r;
}

/* Formats a rate with a unit. */
static const char *
rate(double v, char *buf, size_t len)
{
	if (v >= 1e6)
		snprintf(buf, len, "%.2fM/s", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk/s", v / 1e3);
	else
		snprintf(buf, len, "%.0f/s", v);
	return buf;
}

/* qsort: doubles in increasing order. */
static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n values (sorts them). */
static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* CPU seconds of the calling thread (who) or of the whole process. */
static double
cpu_now(int thread)
{
	struct rusage	ru;

#ifdef RUSAGE_THREAD
	if (getrusage(thread ? RUSAGE_THREAD : RUSAGE_SELF, &ru) != 0)
#else
	if (thread || getrusage(RUSAGE_SELF, &ru) != 0)
#endif
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* What chain_compare measures, each round, chain off [0] and on [1]. */
enum {
	CC_APP,		/* appends/s */
	CC_REP,		/* replayed records/s */
	CC_APP_LOOP,	/* ns of the loop thread's CPU per append */
	CC_APP_CPU,	/* ns of every thread's CPU per append */
	CC_REP_LOOP,	/* the same for the replay */
	CC_REP_CPU,
	CC_N
};

/*
 * The chain's cost: non-durable appends and a replay into a module, with
 * the chain off and on, alternating rounds of each (off first, then on,
 * then off...); medians of the rates, of the ratio of each round's pair,
 * and of the CPU time per record (the loop thread's, and all threads').
 */
static void
chain_compare(long n, int rounds)
{
	static const char *const names[CC_N] = {
		"non-durable appends", "replay into a module",
		"  appends: loop thread CPU per record",
		"  appends: all threads' CPU per record",
		"  replay: loop thread CPU per record",
		"  replay: all threads' CPU per record",
	};
	double	*m[CC_N][2], *ratio[2], call_us, t, l0, c0, med[2], r;
	char	 a[32], b[32];
	int	 round, on, k;

	for (k = 0; k < CC_N; k++) {
		for (on = 0; on < 2; on++)
			m[k][on] = xcalloc((size_t)rounds, sizeof *m[k][on]);
	}
	for (k = 0; k < 2; k++)
		ratio[k] = xcalloc((size_t)rounds, sizeof *ratio[k]);
	for (round = 0; round < rounds; round++) {
		for (on = 0; on < 2; on++) {
			chain_on = on;
			wipe();
			(void)open_log();
			l0 = cpu_now(1);
			c0 = cpu_now(0);
			m[CC_APP][on][round] = bench_nondurable(n, &call_us);
			m[CC_APP_LOOP][on][round] = (cpu_now(1) - l0) * 1e9 / n;
			disklog_close();
			m[CC_APP_CPU][on][round] = (cpu_now(0) - c0) * 1e9 / n;
			replayed = 0;
			l0 = cpu_now(1);
			c0 = cpu_now(0);
			t = open_log();
			m[CC_REP_LOOP][on][round] = (cpu_now(1) - l0) * 1e9 /
			    (double)replayed;
			m[CC_REP_CPU][on][round] = (cpu_now(0) - c0) * 1e9 /
			    (double)replayed;
			m[CC_REP][on][round] = (double)replayed / t;
			disklog_close();
		}
		printf("  round %d: appends %.0fk/s on, %.0fk/s off (%.0f%%); "
		    "replay %.0fk/s on, %.0fk/s off (%.0f%%)\n", round + 1,
		    m[CC_APP][1][round] / 1e3, m[CC_APP][0][round] / 1e3,
		    100 * m[CC_APP][1][round] / m[CC_APP][0][round],
		    m[CC_REP][1][round] / 1e3, m[CC_REP][0][round] / 1e3,
		    100 * m[CC_REP][1][round] / m[CC_REP][0][round]);
		fflush(stdout);
		for (k = 0; k < 2; k++)
			ratio[k][round] = m[k][1][round] / m[k][0][round];
	}
	chain_on = 0;
	snprintf(a, sizeof a, "the hash chain (medians of %d)", rounds);
	printf("\n%-44s %14s %18s\n", a, "chain on", "chain off");
	for (k = 0; k < CC_N; k++) {
		for (on = 0; on < 2; on++)
			med[on] = median(m[k][on], rounds);
		if (k == CC_APP || k == CC_REP) {
			r = med[1] / med[0];
			printf("%-44s %14s %18s   %.0f%% of off; goal >= 90%%: "
			    "%s\n", names[k], rate(med[1], a, sizeof a),
			    rate(med[0], b, sizeof b), r * 100,
			    r >= 0.9 ? "met" : "NOT met");
			/* On a shared machine the pairs say more. */
			printf("%-44s %13.0f%%\n", "  median of the rounds' "
			    "on/off", 100 * median(ratio[k], rounds));
		} else
			printf("%-44s %11.0f ns %15.0f ns\n", names[k], med[1],
			    med[0]);
		for (on = 0; on < 2; on++)
			free(m[k][on]);
	}
	for (k = 0; k < 2; k++)
		free(ratio[k]);
}

int
main(int argc, char **argv)
{
	unsigned char	 rec[512];
	char		 a[32], b[32], *dirflag = NULL, *data;
	long		 n = 1000000;
	double		 secs = 2, per_sync, batch1000, write_only, nd, d1, d16, d64;
	double		 f1, f16, f64, t_empty, t_full, t_full_mod, r_full, call_us;
	double		 json_us;
	size_t		 dlen, rlen;
	int		 ch, only_chain = 0, rounds = 3;

	while ((ch = getopt(argc, argv, "cn:d:r:t:")) != -1) {
		switch (ch) {
		case 'c': only_chain = 1; break;
		case 'r': rounds = (int)strtol(optarg, NULL, 10); break;
		case 'n': n = strtol(optarg, NULL, 10); break;
		case 'd': dirflag = optarg; break;
		case 't': secs = strtod(optarg, NULL); break;
		default:
			fprintf(stderr, "usage: bench-disklog [-c] [-n RECORDS] "
			    "[-d DIR] [-t SECONDS] [-r ROUNDS]\n");
			return 2;
		}
	}
	if (n < 1000 || secs <= 0 || rounds < 1 || rounds > 99) {
		fprintf(stderr, "bench-disklog: -n at least 1000, -t above 0, "
		    "-r 1 to 99\n");
		return 2;
	}
	log_open("bench-disklog", LOG_LEVEL_ERROR, LOG_DEST_STDERR);
	state = dirflag != NULL ? xstrdup(dirflag) :
	    xasprintf("%s/gbr-bench-disklog-XXXXXX", getenv("TMPDIR") != NULL ?
	    getenv("TMPDIR") : "/var/tmp");
	if (dirflag == NULL && mkdtemp(state) == NULL) {
		perror(state);
		return 1;
	}
	if (evthread_use_pthreads() != 0 || (base = event_base_new()) == NULL)
		return 1;

	/* A typical small record: about 100 bytes on disk. */
	payload = json_pack("{s:s, s:i, s:s}", "session", "s-0123456789abcdef",
	    "turn", 42, "text", "the agent read src/main.gleam");
	data = json_dumps(payload, JSON_COMPACT);
	dlen = strlen(data);
	rlen = logfmt_record_size(9, dlen);
	memcpy(rec + LOGFMT_RECORD_HEAD + 9, data, dlen);
	logfmt_record_seal(rec, 1, 0, "bench.rec", 9, dlen);
	free(data);

	printf("bench-disklog: %s, records of %zu bytes, %ld records\n", state,
	    rlen, n);
	fflush(stdout);
	if (only_chain) {
		disklog_register(&bench_module);
		chain_compare(n, rounds);
		goto out;
	}
	raw_floor(rec, rlen, secs, &per_sync, &batch1000, &write_only);

	wipe();
	t_empty = open_log();
	nd = bench_nondurable(n, &call_us);
	json_us = bench_jansson(n);
	d1 = bench_durable(1, secs, &f1);
	d16 = bench_durable(16, secs, &f16);
	d64 = bench_durable(64, secs, &f64);
	disklog_close();

	/* Replay: first with nothing to feed (checks only), then into a module. */
	replayed = 0;
	t_full = open_log();
	r_full = replayed_now();
	disklog_close();
	disklog_register(&bench_module);
	t_full_mod = open_log();
	disklog_close();

	printf("\n%-44s %14s %18s\n", "", "gbr disk log", "raw floor");
	printf("%-44s %14s %18s   goal >= 500k/s: %s\n",
	    "non-durable appends", rate(nd, a, sizeof a),
	    rate(write_only, b, sizeof b), nd >= 5e5 ? "met" : "NOT met");
	printf("%-44s %11.2f us\n", "  loop thread time per append call",
	    call_us);
	printf("%-44s %11.2f us\n", "  of which jansson encoding the payload",
	    json_us);
	printf("%-44s %14s %18s   (write+fdatasync each)\n",
	    "durable acks, 1 writer", rate(d1, a, sizeof a),
	    rate(per_sync, b, sizeof b));
	printf("%-44s %14.2f %18s\n", "  fsyncs per ack", f1, "1.00");
	printf("%-44s %14s\n", "durable acks, 16 writers", rate(d16, a, sizeof a));
	printf("%-44s %14.3f\n", "  fsyncs per ack", f16);
	printf("%-44s %14s %18s   (1000 writes + 1 fdatasync)\n",
	    "durable acks, 64 writers", rate(d64, a, sizeof a),
	    rate(batch1000, b, sizeof b));
	printf("%-44s %14.3f\n", "  fsyncs per ack", f64);
	printf("%-44s %13.1fx %18s   goal >= 20x: %s\n",
	    "  64 writers vs one fsync per record", d64 / per_sync, "",
	    d64 / per_sync >= 20 ? "met" : "NOT met");
	printf("%-44s %14s %18s   goal >= 1M/s: %s\n",
	    "replay, checksums only (no module)", rate(r_full / t_full, a,
	    sizeof a), "", r_full / t_full >= 1e6 ? "met" : "NOT met");
	printf("%-44s %14s %18s   goal >= 1M/s: %s\n",
	    "replay into a module (JSON parsed)", rate((double)replayed /
	    t_full_mod, a, sizeof a), "", (double)replayed / t_full_mod >= 1e6 ?
	    "met" : "NOT met");
	printf("%-44s %11.1f ms\n", "start-up, empty log", t_empty * 1000);
	snprintf(a, sizeof a, "start-up, %.0f records", r_full);
	printf("%-44s %11.1f ms\n", a, t_full * 1000);
	printf("%-44s %11.1f ms\n", "  the same, replayed into a module",
	    t_full_mod * 1000);

	chain_compare(n, rounds);
out:
	json_decref(payload);
	if (dirflag == NULL) {
		wipe();
		rmdir(state);
	}
	free(state);
	event_base_free(base);
	return 0;
}
