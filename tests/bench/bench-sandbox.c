/*
 * bench-sandbox: what the sandbox costs, printed beside a floor measured
 * in the same run on the same machine, and its goals:
 *
 *   - open+close of a file five folders deep through sandbox_open_file
 *     (the lexical gate, openat2 beneath the root fd, fstat, the regular
 *     file check) beside a bare openat2(RESOLVE_BENEATH) open+close of the
 *     same path (goal: within 1.2x); the forced openat walk too;
 *   - read_file of a 1 KiB file through the tool layer (in process; the
 *     protocol round trip needs sessions), p50 and p99;
 *   - search over about 100 MB of generated source files (goal: under 1 s),
 *     for a regular expression and for a plain string.
 *
 * It never fails for being slow: timings are figures to read, not
 * assertions. It exits non-zero only when it cannot run.
 *
 * usage: bench-sandbox [-n opens] [-m megabytes] [-k (keep the tree)]
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#include <jansson.h>

#include "osdep-fs.h"
#include "sandbox.h"
#include "tool-file.h"

static char	base[256];

/* Monotonic time in nanoseconds. */
static long long
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Dies with a message. */
static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "bench-sandbox: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Writes a file, or dies. */
static void
put(const char *path, const char *text, size_t len)
{
	FILE	*f = fopen(path, "w");

	if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0)
		die(path);
}

/* Orders doubles. */
static int
cmp_ll(const void *a, const void *b)
{
	long long	x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

/* Nanoseconds per bare openat2 open+close (or openat if absent). */
static double
bare_open(int rootfd, const char *rel, int n)
{
	long long	t0;
	int		i, fd;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		fd = osdep_open_beneath(rootfd, rel, O_RDONLY | O_CLOEXEC, 0, 0);
		if (fd == -1)
			fd = openat(rootfd, rel, O_RDONLY | O_CLOEXEC);
		if (fd == -1)
			die("bare open");
		close(fd);
	}
	return (double)(now_ns() - t0) / n;
}

/* Nanoseconds per bare openat2 open+fstat+close: the floor with a type check. */
static double
bare_open_fstat(int rootfd, const char *rel, int n)
{
	struct stat	st;
	long long	t0;
	int		i, fd;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		fd = osdep_open_beneath(rootfd, rel, O_RDONLY | O_CLOEXEC, 0, 0);
		if (fd == -1)
			fd = openat(rootfd, rel, O_RDONLY | O_CLOEXEC);
		if (fd == -1 || fstat(fd, &st) != 0)
			die("bare open");
		close(fd);
	}
	return (double)(now_ns() - t0) / n;
}

/* Nanoseconds per sandbox_open_file + close. */
static double
sandbox_open(struct sandbox *sb, const char *rel, int n)
{
	struct stat	 st;
	enum gbr_err	 k;
	char		*reason;
	long long	 t0;
	int		 i, fd;
	size_t		 len = strlen(rel);

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		if (sandbox_open_file(sb, rel, len, &fd, &st, NULL, &k, &reason) != 0) {
			fprintf(stderr, "sandbox open: %s\n", reason);
			exit(1);
		}
		close(fd);
	}
	return (double)(now_ns() - t0) / n;
}

/* The median of several rounds of f. */
#define ROUNDS 7
static double
median(double v[ROUNDS])
{
	double	t;
	int	i, j;

	for (i = 0; i < ROUNDS; i++)
		for (j = i + 1; j < ROUNDS; j++)
			if (v[j] < v[i]) {
				t = v[i];
				v[i] = v[j];
				v[j] = t;
			}
	return v[ROUNDS / 2];
}

/* Generates about mb megabytes of Gleam-like source under dir. */
static size_t
generate(const char *dir, int mb)
{
	char	path[PATH_MAX], *buf;
	size_t	total = 0, cap = 64 * 1024, n;
	int	f, d, i, line;

	buf = malloc(cap);
	if (buf == NULL)
		die("malloc");
	for (f = 0; total < (size_t)mb * 1024 * 1024; f++) {
		d = f / 50;
		snprintf(path, sizeof path, "%s/pkg%d", dir, d);
		mkdir(path, 0755);
		snprintf(path, sizeof path, "%s/pkg%d/src", dir, d);
		mkdir(path, 0755);
		n = 0;
		for (line = 0; n + 200 < cap; line++) {
			i = f * 10000 + line;
			n += (size_t)snprintf(buf + n, cap - n, line % 7 == 0 ?
			    "/// Returns the thing number %d, or an error.\n" :
			    line % 7 == 1 ? "pub fn function_%d(x: Int) -> Result(Int, Nil) {\n" :
			    line % 7 == 6 ? "}\n" :
			    "  let value_%d = list.map(items, fn(item) { item + 1 })\n", i);
		}
		snprintf(path, sizeof path, "%s/pkg%d/src/module%d.gleam", dir, d, f);
		put(path, buf, n);
		total += n;
	}
	/* One needle, near the end. */
	snprintf(path, sizeof path, "%s/pkg%d/src/needle.gleam", dir, f / 50);
	put(path, "pub fn needle_in_haystack_42() { 0 }\n", 37);
	free(buf);
	return total;
}

/* Removes one entry (nftw). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* Runs one search and prints it. */
static void
bench_search(struct sandbox *sb, const char *label, const char *args_text,
    size_t total)
{
	json_t		*args = json_loads(args_text, 0, NULL), *res = NULL;
	enum gbr_err	 k;
	char		*reason = NULL;
	long long	 t0, t1;
	double		 secs;

	t0 = now_ns();
	if (tool_file_call(sb, "search", args, &res, &k, &reason) != 0) {
		fprintf(stderr, "search: %s\n", reason);
		exit(1);
	}
	t1 = now_ns();
	secs = (double)(t1 - t0) / 1e9;
	printf("search %-28s %6.3f s  %4.0f MB/s  %zu matches, %lld files, "
	    "%.1f MB read%s%s   (goal: under 1 s over %.0f MB)\n", label, secs,
	    (double)json_integer_value(json_object_get(res, "bytes_scanned")) / 1e6 / secs,
	    json_array_size(json_object_get(res, "matches")),
	    (long long)json_integer_value(json_object_get(res, "files_scanned")),
	    (double)json_integer_value(json_object_get(res, "bytes_scanned")) / 1e6,
	    json_is_true(json_object_get(res, "truncated")) ? ", truncated: " : "",
	    json_is_true(json_object_get(res, "truncated")) ?
	    json_string_value(json_object_get(res, "truncated_reason")) : "",
	    (double)total / 1e6);
	json_decref(res);
	json_decref(args);
}

int
main(int argc, char **argv)
{
	static const char	 deep[] = "a/b/c/d/e/f.txt";
	struct sandbox_config	 cfg;
	struct sandbox		*sb;
	char			 root[PATH_MAX], path[PATH_MAX + 64], *cause, kb[1024];
	double			 bare[ROUNDS], sbx[ROUNDS], walk[ROUNDS], bst[ROUNDS];
	double			 b, s, w, bs;
	long long		*lat, t0;
	size_t			 total;
	int			 n = 200000, mb = 100, keep = 0, c, r, rootfd, i;

	while ((c = getopt(argc, argv, "n:m:k")) != -1) {
		switch (c) {
		case 'n':
			n = (int)strtol(optarg, NULL, 10);
			break;
		case 'm':
			mb = (int)strtol(optarg, NULL, 10);
			break;
		case 'k':
			keep = 1;
			break;
		default:
			fprintf(stderr, "usage: bench-sandbox [-n opens] [-m MB] [-k]\n");
			return 2;
		}
	}
	if (n < 1000)
		n = 1000;
	snprintf(base, sizeof base, "/tmp/gbr-bench-sandbox-XXXXXX");
	if (mkdtemp(base) == NULL)
		die("mkdtemp");
	snprintf(root, sizeof root, "%s/root", base);
	mkdir(root, 0755);
	snprintf(path, sizeof path, "%s/a", root);
	mkdir(path, 0755);
	strncat(path, "/b", sizeof path - strlen(path) - 1);
	mkdir(path, 0755);
	strncat(path, "/c", sizeof path - strlen(path) - 1);
	mkdir(path, 0755);
	strncat(path, "/d", sizeof path - strlen(path) - 1);
	mkdir(path, 0755);
	strncat(path, "/e", sizeof path - strlen(path) - 1);
	mkdir(path, 0755);
	strncat(path, "/f.txt", sizeof path - strlen(path) - 1);
	memset(kb, 'k', sizeof kb);
	for (i = 63; i < (int)sizeof kb; i += 64)
		kb[i] = '\n';
	put(path, kb, sizeof kb);

	memset(&cfg, 0, sizeof cfg);
	cfg.root = root;
	if ((sb = sandbox_create(&cfg, &cause)) == NULL) {
		fprintf(stderr, "sandbox: %s\n", cause);
		return 1;
	}
	if ((rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		die(root);

	printf("bench-sandbox: %d opens per round, median of %d rounds; resolver %s\n",
	    n, ROUNDS, sandbox_resolver());
	for (r = 0; r < ROUNDS; r++) {
		sandbox_force_fallback(0);
		bare[r] = bare_open(rootfd, deep, n);
		bst[r] = bare_open_fstat(rootfd, deep, n);
		sbx[r] = sandbox_open(sb, deep, n);
		sandbox_force_fallback(1);
		walk[r] = sandbox_open(sb, deep, n / 4);
		sandbox_force_fallback(0);
	}
	b = median(bare);
	s = median(sbx);
	w = median(walk);
	bs = median(bst);
	printf("open+close 5 deep: bare %s %7.0f ns   sandbox %7.0f ns   "
	    "ratio %.2fx   (goal: within 1.20x)\n",
	    osdep_have_open_beneath() ? "openat2" : "openat ", b, s, s / b);
	printf("open+close 5 deep: bare + fstat (the regular-file check) %7.0f ns   "
	    "sandbox ratio to it %.2fx\n", bs, s / bs);
	printf("open+close 5 deep: forced openat walk  %7.0f ns   ratio %.2fx to bare\n",
	    w, w / b);

	/* read_file of 1 KiB through the tool layer. */
	{
		json_t		*args = json_pack("{s:s}", "path", deep), *res;
		enum gbr_err	 k;
		char		*reason;
		int		 m = n / 4;

		lat = malloc(sizeof *lat * (size_t)m);
		if (lat == NULL)
			die("malloc");
		for (i = 0; i < m; i++) {
			t0 = now_ns();
			if (tool_file_call(sb, "read_file", args, &res, &k, &reason) != 0) {
				fprintf(stderr, "read_file: %s\n", reason);
				return 1;
			}
			json_decref(res);
			lat[i] = now_ns() - t0;
		}
		qsort(lat, (size_t)m, sizeof *lat, cmp_ll);
		printf("read_file 1 KiB (in process, no protocol): p50 %.1f us  p99 %.1f us"
		    "   (protocol goal: p50 < 15 us, p99 < 50 us; needs sessions)\n",
		    (double)lat[m / 2] / 1e3, (double)lat[m * 99 / 100] / 1e3);
		free(lat);
		json_decref(args);
	}
	sandbox_free(sb);

	/* search over generated source. */
	snprintf(path, sizeof path, "%s/root/packages", base);
	mkdir(path, 0755);
	t0 = now_ns();
	total = generate(path, mb);
	printf("generated %.1f MB of source in %.1f s\n", (double)total / 1e6,
	    (double)(now_ns() - t0) / 1e9);
	if ((sb = sandbox_create(&cfg, &cause)) == NULL) {
		fprintf(stderr, "sandbox: %s\n", cause);
		return 1;
	}
	/* A first pass warms the page cache; the figures are the next ones. */
	bench_search(sb, "(cold cache, ignore)", "{\"pattern\": \"needle_in_haystack_[0-9]+\"}",
	    total);
	bench_search(sb, "regex needle_in_haystack_[0-9]+",
	    "{\"pattern\": \"needle_in_haystack_[0-9]+\"}", total);
	bench_search(sb, "string needle_in_haystack",
	    "{\"pattern\": \"needle_in_haystack\"}", total);
	bench_search(sb, "regex ^pub fn function_99[0-9]*\\(",
	    "{\"pattern\": \"^pub fn function_99[0-9]*\\\\(\", \"max_results\": 1000}", total);
	bench_search(sb, "regex (fn|let) +[a-z]+_9999999 (no prefilter)",
	    "{\"pattern\": \"(fn|let) +[a-z]+_9999999\"}", total);
	sandbox_free(sb);
	close(rootfd);
	if (!keep)
		nftw(base, rm_one, 64, FTW_DEPTH | FTW_PHYS);
	else
		printf("tree kept in %s\n", base);
	return 0;
}
