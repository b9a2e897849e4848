/*
 * bench-shadow: what rewind's snapshots cost a command (daemon/tools/
 * shadow.c), on a workspace of 10,000 files (100 folders of 100 files of
 * about 1 KiB), beside a bare `git add -A && git write-tree` on a copy of
 * the same files (git's own CLI, a GIT_DIR of its own), measured in the
 * same run. It prints figures; it never asserts a time.
 *
 *   first snapshot (every file hashed and stored)     floor: git, first run
 *   one command that changed nothing: two snapshots   floor: git, second run
 *   one command that changed 10 files: two snapshots
 *     and their diff                                   goal: <= 2x git's run
 *   store size after the runs
 *
 * Those are taken as gbrd did before its snapshot worker: on the calling
 * thread, so each is as long a hold of an event loop. Then the same work
 * through the worker (shadow_snapshot_start) on a fresh store, with an
 * event loop ticking every millisecond meanwhile: the longest gap between
 * two ticks, less the tick, is the longest the loop was held.
 *
 *   first snapshot on the worker         loop held at most    goal: < 20 ms
 *   one command that changed 10 files    loop held at most    goal: < 20 ms
 *
 * usage: bench-shadow [-n FILES]
 */
#include "gbr-config.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "shadow.h"
#include "xmalloc.h"

static unsigned long long	 du_bytes;

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
du_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	du_bytes += (unsigned long long)sb->st_blocks * 512;
	return 0;
}

/* Writes a file of about 1 KiB. */
static void
put(const char *path, unsigned seed)
{
	FILE	*f;
	int	 i;

	if ((f = fopen(path, "w")) == NULL) {
		perror(path);
		exit(1);
	}
	for (i = 0; i < 16; i++)
		fprintf(f, "line %d of file %u: some text that a project has\n",
		    i, seed);
	fclose(f);
}

/* Runs a shell command line; exits if it fails. */
static void
sh(const char *cmd)
{
	pid_t	pid;
	int	st;

	if ((pid = fork()) == 0) {
		execlp("sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (pid == -1 || waitpid(pid, &st, 0) == -1 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench-shadow: failed: %s\n", cmd);
		exit(1);
	}
}

/* Two snapshots and their diff: what one command costs. */
static double
command(struct shadow *sh, size_t *nchanged, void (*change)(const char *),
    const char *ws)
{
	char	 a[SHADOW_OID_LEN + 1], b[SHADOW_OID_LEN + 1], *cause;
	json_t	*d;
	size_t	 skipped;
	double	 t0, t;

	t0 = now();
	if (shadow_snapshot(sh, a, &cause) != 0)
		goto fail;
	t = now() - t0;
	if (change != NULL)
		change(ws);	/* the command's own time is not counted */
	t0 = now();
	if (shadow_snapshot(sh, b, &cause) != 0 ||
	    (d = shadow_diff(sh, a, b, 100000, &skipped, &cause)) == NULL)
		goto fail;
	t += now() - t0;
	*nchanged = json_array_size(d);
	json_decref(d);
	return t;
fail:
	fprintf(stderr, "bench-shadow: %s\n", cause);
	exit(1);
}

static unsigned	change_round;

/* The loop of the worker runs, and what it saw. */
static struct event_base	*eb;
static double			 tick_last, hold_max;

/* Every millisecond: how late this tick is is how long the loop was held. */
static void
tick_cb(evutil_socket_t fd, short events, void *arg)
{
	double	t = now();

	(void)fd;
	(void)events;
	(void)arg;
	if (t - tick_last - 1e-3 > hold_max)
		hold_max = t - tick_last - 1e-3;
	tick_last = t;
}

/* What a job of the worker answered. */
struct waited {
	int	 done, ok;
	char	 tree[SHADOW_OID_LEN + 1];
	size_t	 n;
	char	*cause;
};

static void
job_cb(void *arg, const struct shadow_result *r)
{
	struct waited	*w = arg;

	w->done = 1;
	w->ok = r->ok;
	memcpy(w->tree, r->tree, sizeof w->tree);
	w->n = json_array_size(r->changes);
	if (!r->ok)
		w->cause = xstrdup(r->cause);
	event_base_loopbreak(eb);
}

/* A snapshot (and diff against base) on the worker, the loop ticking. */
static double
on_worker(struct shadow *sh, const char *base, char tree[SHADOW_OID_LEN + 1],
    size_t *n)
{
	struct waited	 w;
	char		*cause;
	double		 t0 = now();

	memset(&w, 0, sizeof w);
	tick_last = t0;	/* what ran before is not the loop's hold */
	if (shadow_snapshot_start(sh, base, 100000, job_cb, &w,
	    &cause) == NULL) {
		fprintf(stderr, "bench-shadow: %s\n", cause);
		exit(1);
	}
	while (!w.done)
		event_base_loop(eb, EVLOOP_ONCE);
	if (!w.ok) {
		fprintf(stderr, "bench-shadow: %s\n", w.cause);
		exit(1);
	}
	memcpy(tree, w.tree, SHADOW_OID_LEN + 1);
	if (n != NULL)
		*n = w.n;
	return now() - t0;
}

/* A command that edits 5 files, creates 3 and deletes 2. */
static void
change10(const char *ws)
{
	char	path[4096];
	int	i;

	change_round++;
	for (i = 0; i < 5; i++) {
		snprintf(path, sizeof path, "%s/d%02d/f%02d.txt", ws, i, i);
		put(path, 1000000 + change_round * 10 + (unsigned)i);
	}
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/d50/new%u-%d.txt", ws,
		    change_round, i);
		put(path, (unsigned)i);
	}
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "%s/d60/f%02u.txt", ws,
		    change_round * 2 + (unsigned)i);
		unlink(path);
	}
}

int
main(int argc, char **argv)
{
	struct shadow	*shw;
	char		 tmpl[] = "/tmp/bench-shadow-XXXXXX", *top, *ws, *st;
	char		 path[4096], cmd[8192], *cause, tree[SHADOW_OID_LEN + 1];
	struct shadow	*shw2;
	struct event	*tick;
	struct timeval	 ms = { 0, 1000 };
	char		*st2, a[SHADOW_OID_LEN + 1], b[SHADOW_OID_LEN + 1];
	double		 t0, first, git1, git2, nochange, ten, wfirst, wcmd;
	double		 hfirst, hcmd;
	size_t		 n = 10000, i, changed;
	int		 c;

	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c == 'n')
			n = (size_t)strtoul(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: bench-shadow [-n FILES]\n");
			return 2;
		}
	}
	if ((top = mkdtemp(tmpl)) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	ws = xasprintf("%s/ws", top);
	st = xasprintf("%s/state", top);
	mkdir(ws, 0755);
	mkdir(st, 0700);
	for (i = 0; i < n; i++) {
		if (i % 100 == 0) {
			snprintf(path, sizeof path, "%s/d%02zu", ws, i / 100);
			mkdir(path, 0755);
		}
		snprintf(path, sizeof path, "%s/d%02zu/f%02zu.txt", ws, i / 100,
		    i % 100);
		put(path, (unsigned)i);
	}
	/* The floor: git's CLI on a copy, with its own GIT_DIR. */
	snprintf(cmd, sizeof cmd, "cp -r %s %s/copy && git init -q --bare "
	    "%s/floor.git", ws, top, top);
	sh(cmd);
	snprintf(cmd, sizeof cmd, "cd %s/copy && GIT_DIR=%s/floor.git "
	    "GIT_WORK_TREE=. git add -A && GIT_DIR=%s/floor.git git "
	    "write-tree >/dev/null", top, top, top);
	t0 = now();
	sh(cmd);
	git1 = now() - t0;
	t0 = now();
	sh(cmd);
	git2 = now() - t0;

	if ((shw = shadow_open(st, ws, &cause)) == NULL) {
		fprintf(stderr, "bench-shadow: %s\n", cause);
		return 1;
	}
	t0 = now();
	if (shadow_snapshot(shw, tree, &cause) != 0) {
		fprintf(stderr, "bench-shadow: %s\n", cause);
		return 1;
	}
	first = now() - t0;
	sleep(1);	/* past the index's racy-clean second */
	nochange = command(shw, &changed, NULL, ws);
	ten = 0;
	for (i = 0; i < 5; i++)
		ten += command(shw, &changed, change10, ws);
	ten /= 5;
	du_bytes = 0;
	snprintf(path, sizeof path, "%s/shadow", st);
	nftw(path, du_cb, 16, FTW_PHYS);

	/*
	 * The same through the worker, on a store of its own: of the copy
	 * (a store is found by its work tree, and the first one is warm).
	 */
	if (evthread_use_pthreads() != 0 || (eb = event_base_new()) == NULL ||
	    (tick = event_new(eb, -1, EV_PERSIST, tick_cb, NULL)) == NULL) {
		fprintf(stderr, "bench-shadow: libevent\n");
		return 1;
	}
	shadow_work_init(eb);
	st2 = xasprintf("%s/state2", top);
	mkdir(st2, 0700);
	snprintf(path, sizeof path, "%s/copy", top);
	if ((shw2 = shadow_open(st2, path, &cause)) == NULL) {
		fprintf(stderr, "bench-shadow: %s\n", cause);
		return 1;
	}
	event_add(tick, &ms);
	hold_max = 0;
	wfirst = on_worker(shw2, NULL, a, NULL);
	hfirst = hold_max;
	sleep(1);	/* past the index's racy-clean second */
	hold_max = 0;
	wcmd = on_worker(shw2, NULL, a, NULL);
	change10(path);
	wcmd += on_worker(shw2, a, b, &changed);
	hcmd = hold_max;
	event_free(tick);

	printf("bench-shadow: %zu files of ~1 KiB\n", n);
	printf("  first snapshot                    %8.1f ms   floor: git add "
	    "-A && write-tree, first run %8.1f ms\n", first * 1e3, git1 * 1e3);
	printf("  command, nothing changed (2 snaps)%8.1f ms   floor: git add "
	    "-A && write-tree, again     %8.1f ms\n", nochange * 1e3,
	    git2 * 1e3);
	printf("  command, %zu files changed (2 snaps + diff) %6.1f ms   goal: "
	    "<= 2x the floor (%.1f ms): %s\n", changed, ten * 1e3,
	    2 * git2 * 1e3, ten <= 2 * git2 ? "met" : "NOT met");
	printf("  shadow store on disk               %8.1f MiB (the files: "
	    "%.1f MiB)\n", (double)du_bytes / 1048576.0,
	    (double)n * 1000 / 1048576.0);
	printf("  on the worker thread, an event loop ticking every 1 ms:\n");
	printf("  first snapshot                    %8.1f ms   loop held at "
	    "most %6.2f ms   goal: < 20 ms: %s\n", wfirst * 1e3, hfirst * 1e3,
	    hfirst < 0.020 ? "met" : "NOT met");
	printf("  command, %zu files changed (2 snaps + diff) %6.1f ms   loop "
	    "held at most %6.2f ms   goal: < 20 ms: %s\n", changed, wcmd * 1e3,
	    hcmd * 1e3, hcmd < 0.020 ? "met" : "NOT met");
	shadow_shutdown();
	event_base_free(eb);
	free(st2);
	nftw(top, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
