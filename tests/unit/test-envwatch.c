/*
 * Unit tests for the profile watcher, on a real workspace and a real
 * libevent loop, once with inotify and once polling: nothing reported for
 * the baseline, one report for a burst of 50 saves (in place and by
 * rename, as editors do), one per profile changed, nothing for files that
 * are not profiles, deletions, an extra file (a system_file), the whole
 * .gbr_envs folder going and coming back, the max delay for a file
 * that never stops changing, and the workspace's own folder deleted (while
 * held open), made again and moved away.
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

#include <event2/event.h>

#include "envwatch.h"
#include "osdep-proc.h"
#include "unit.h"
#include "xmalloc.h"

static char			 ws[256];
static struct event_base	*base;
static const char		*mode;
static char			 got[64][64];	/* names reported, in order */
static int			 ngot;

/* The watcher's callback: records the name. */
static void
on_change(const char *name, void *arg)
{
	(void)arg;
	if (ngot < 64)
		snprintf(got[ngot++], sizeof got[0], "%s", name);
}

static int			 ngone;		/* workspace losses reported */

/* The watcher's other callback: counts the workspace's losses. */
static void
on_gone(void *arg)
{
	(void)arg;
	ngone++;
}

/* Runs the loop for ms milliseconds. */
static void
run_for(int ms)
{
	struct timeval	tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Sleeps ms milliseconds without running the loop. */
static void
nap(int ms)
{
	struct timespec	ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Writes a file under the workspace, in place. */
static void
put(const char *rel, const char *text)
{
	char	 path[PATH_MAX];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF || fclose(f) != 0) {
		fprintf(stderr, "put %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* Writes a file the way many editors save: a temp file renamed over it. */
static void
put_rename(const char *rel, const char *text)
{
	char	path[PATH_MAX], tmp[PATH_MAX + 8];

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	snprintf(tmp, sizeof tmp, "%s.tmp~", path);
	put(tmp + strlen(ws) + 1, text);
	rename(tmp, path);
}

/* Removes a file under the workspace. */
static void
rm(const char *rel)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof path, "%s/%s", ws, rel);
	unlink(path);
}

/* The reports so far, joined with spaces, then forgets them. */
static const char *
reports(void)
{
	static char	buf[4096];
	int		i;

	buf[0] = '\0';
	for (i = 0; i < ngot; i++) {
		if (i > 0)
			strncat(buf, " ", sizeof buf - strlen(buf) - 1);
		strncat(buf, got[i], sizeof buf - strlen(buf) - 1);
	}
	ngot = 0;
	return buf;
}

/* Removes one entry (nftw). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* All scenarios with one watcher. */
static void
scenarios(int poll)
{
	struct envwatch_opts	 o;
	struct envwatch		*w;
	char			*cause = NULL, path[PATH_MAX], text[64];
	const char		*r;
	struct timespec		 t0, t1;
	long			 burst_ms;
	int			 i, settle;

	unit_tmpdir(ws, sizeof ws, "envwatch");
	snprintf(path, sizeof path, "%s/.gbr_envs", ws);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/prompts", ws);
	mkdir(path, 0755);
	put(".gbr_envs/default.ini", "[env]\n");
	put("prompts/x.md", "v1\n");

	memset(&o, 0, sizeof o);
	o.debounce_ms = 100;
	o.poll_ms = 100;
	o.max_delay_ms = 600;
	o.force_poll = poll;
	w = envwatch_create(base, ws, &o, on_change, NULL, &cause);
	CHECK(w != NULL, "%s: watcher created (%s)", mode, cause ? cause : "ok");
	if (w == NULL)
		return;
	CHECK(strcmp(envwatch_mode(w), poll ? "poll" : "inotify") == 0,
	    "%s: mode is %s", mode, envwatch_mode(w));
	snprintf(path, sizeof path, "%s/prompts/x.md", ws);
	CHECK(envwatch_add_file(w, path, "default", &cause) == 0, "%s: extra file added", mode);
	CHECK(envwatch_add_file(w, "relative/x", "default", &cause) == -1,
	    "%s: a relative extra file is refused", mode);
	free(cause);
	cause = NULL;
	settle = poll ? 700 : 400;

	run_for(300);
	r = reports();
	CHECK(strcmp(r, "") == 0, "%s: nothing for the baseline (%s)", mode, r);

	/* A burst of 50 saves, 3 ms apart, half in place, half by rename. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 50; i++) {
		snprintf(text, sizeof text, "[env]\n; save %d\n", i);
		if (i % 2)
			put(".gbr_envs/default.ini", text);
		else
			put_rename(".gbr_envs/default.ini", text);
		nap(3);
		if (i % 10 == 9)
			run_for(1);	/* let the loop see some of it mid-burst */
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	burst_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000000;
	run_for(settle);
	r = reports();
	/*
	 * One report; on a loaded machine where the burst itself outlasted
	 * the max delay (600 ms), that report and one for the rest.
	 */
	CHECK(strcmp(r, "default") == 0 || (burst_ms + 100 >= o.max_delay_ms &&
	    strcmp(r, "default default") == 0),
	    "%s: a burst of 50 saves (%ld ms) gives one report (%s)", mode,
	    burst_ms, r);

	put(".gbr_envs/a.ini", "[env]\n");
	put(".gbr_envs/b.json", "{}");
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "a b") == 0, "%s: two new profiles, one report each (%s)", mode, r);

	put(".gbr_envs/notes.txt", "x");
	put(".gbr_envs/.default.ini.swp", "x");
	put(".gbr_envs/bad name.ini", "x");
	put("src.gleam", "x");
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "") == 0, "%s: files that are not profiles are ignored (%s)", mode, r);

	rm(".gbr_envs/b.json");
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "b") == 0, "%s: a deleted profile is reported (%s)", mode, r);

	put("prompts/x.md", "v2, longer\n");
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "default") == 0, "%s: the extra file reports its name (%s)", mode, r);

	/* The whole folder goes, then comes back. */
	rm(".gbr_envs/default.ini");
	rm(".gbr_envs/a.ini");
	rm(".gbr_envs/notes.txt");
	rm(".gbr_envs/.default.ini.swp");
	rm(".gbr_envs/bad name.ini");
	snprintf(path, sizeof path, "%s/.gbr_envs", ws);
	rmdir(path);
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "a default") == 0, "%s: removing .gbr_envs reports what was in it (%s)",
	    mode, r);
	mkdir(path, 0755);
	put(".gbr_envs/default.ini", "[env]\n");
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "default") == 0, "%s: a new .gbr_envs is watched again (%s)", mode, r);

	/* A file that never stops changing is still reported (max delay). */
	for (i = 0; i < 30; i++) {
		snprintf(text, sizeof text, "[env]\n; tick %d\n", i);
		put(".gbr_envs/default.ini", text);
		run_for(50);
	}
	CHECK(ngot >= 1, "%s: constant changes are reported within the max delay (%d so far)",
	    mode, ngot);
	run_for(settle);
	reports();

	/*
	 * The workspace's folder itself: deleted while held open (as a
	 * sandbox holds it), made again, moved away, and a parent's other
	 * entries coming and going, which say nothing.
	 */
	envwatch_on_gone(w, on_gone);
	ngone = 0;
	snprintf(path, sizeof path, "%s-sibling", ws);
	mkdir(path, 0755);
	rmdir(path);
	run_for(settle);
	CHECK(ngone == 0, "%s: a sibling of the workspace going says nothing (%d)",
	    mode, ngone);
	{
		int	held = open(ws, O_RDONLY | O_DIRECTORY);

		nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		run_for(poll ? settle : 50);
		CHECK(ngone == 1, "%s: the workspace deleted, though held open, "
		    "is reported (%d)", mode, ngone);
		run_for(settle);
		CHECK(ngone == 1, "%s: once (%d)", mode, ngone);
		close(held);
	}
	reports();
	mkdir(ws, 0755);
	envwatch_rearm(w);
	snprintf(path, sizeof path, "%s/.gbr_envs", ws);
	mkdir(path, 0755);
	put(".gbr_envs/default.ini", "[env]\n; anew\n");
	run_for(settle);
	r = reports();
	CHECK(strstr(r, "default") != NULL, "%s: the folder made again is "
	    "watched (%s)", mode, r);
	put(".gbr_envs/default.ini", "[env]\n; edited\n");
	run_for(settle);
	r = reports();
	CHECK(strcmp(r, "default") == 0, "%s: and its edits too (%s)", mode, r);
	CHECK(ngone == 1, "%s: a folder made again is no loss (%d)", mode, ngone);
	snprintf(path, sizeof path, "%s-moved", ws);
	rename(ws, path);
	run_for(settle);
	CHECK(ngone == 2, "%s: the workspace moved away is reported (%d)", mode,
	    ngone);
	rename(path, ws);
	reports();

	envwatch_free(w);
	nftw(ws, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int
main(void)
{
	char	*cause = NULL;

	/* What gbrd does before its loop (Winsock, libevent's locks). */
	if (osdep_loop_prepare(&cause) != 0 || (base = event_base_new()) ==
	    NULL)
		return 99;
#ifdef HAVE_SYS_INOTIFY_H
	mode = "inotify";
	scenarios(0);
#else
	printf("# no inotify in this build: polling only\n");
#endif
	mode = "poll";
	scenarios(1);
	event_base_free(base);
	return unit_done();
}
