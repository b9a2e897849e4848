/*
 * The profile watcher (see envwatch.h): inotify where configure found it
 * (HAVE_SYS_INOTIFY_H) and it works, else mtime polling on a libevent
 * timer; one debounce for both. All state is this struct's; the callback
 * runs from a libevent timer, never from inside a read.
 *
 * Bounds: at most EW_PENDING_MAX names wait at once (beyond that the next
 * report is "everything", from a fresh scan), EW_FILES_MAX extra files,
 * and a poll looks at no more than EW_SCAN_MAX profile files.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_SYS_INOTIFY_H
#include <sys/inotify.h>
#endif

#include <event2/event.h>

#include "env.h"
#include "clock.h"
#include "envwatch.h"
#include "paths.h"
#include "xmalloc.h"

#define EW_PENDING_MAX	256
#define EW_FILES_MAX	64
#define EW_SCAN_MAX	1024

/* What polling compares. */
struct ew_stat {
	int		exists;
	dev_t		dev;
	ino_t		ino;
	off_t		size;
	struct timespec	mtim;
	struct timespec	ctim;
};

/* A profile file seen in .gbr_envs. */
struct ew_prof {
	char		*file;		/* base name, "x.ini" */
	char		*name;		/* profile name, "x" */
	struct ew_stat	 st;
};

/* An extra file reported as a profile name. */
struct ew_file {
	char		*path;
	char		*dir;
	char		*base;
	char		*name;
	int		 wd;
	struct ew_stat	 st;
};

struct envwatch {
	struct event_base	*base;
	char			*ws;
	char			*dir;		/* <ws>/.gbr_envs */
	envwatch_cb		 cb;
	envwatch_gone_cb	 gone;
	void			*arg;
	struct ew_stat		 ws_st;		/* the folder the path named */
	int			 debounce_ms;
	int			 poll_ms;
	int			 max_delay_ms;
	int			 polling;
	int			 ifd;		/* inotify fd, -1 when polling */
	int			 wd_ws;
	int			 wd_parent;	/* for the workspace going */
	char			*parent;	/* its folder; NULL for "/" */
	const char		*ws_name;	/* its name in parent */
	int			 wd_dir;
	struct event		*ev_inotify;
	struct event		*ev_poll;
	struct event		*ev_debounce;
	struct ew_file		 files[EW_FILES_MAX];
	size_t			 nfiles;
	struct ew_prof		*profs;		/* the last scan of .gbr_envs */
	size_t			 nprofs;
	char			*pending[EW_PENDING_MAX];
	size_t			 npending;
	int			 overflow;	/* report everything next time */
	struct timespec		 first;		/* when the oldest pending began */
};

/* Fills an ew_stat from stat(2) of path. */
static void
ew_stat_path(const char *path, struct ew_stat *s)
{
	struct stat	st;

	memset(s, 0, sizeof *s);
	if (stat(path, &st) != 0)
		return;
	s->exists = 1;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = st.st_size;
	s->mtim = st.st_mtim;
	s->ctim = st.st_ctim;
}

/* True if two ew_stats describe the same file state. */
static int
ew_stat_same(const struct ew_stat *a, const struct ew_stat *b)
{
	return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino &&
	    a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
	    a->mtim.tv_nsec == b->mtim.tv_nsec &&
	    a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* The profile name of a file in .gbr_envs ("x.ini" -> "x"), or NULL (new). */
static char *
ew_profile_name(const char *file)
{
	size_t	 len = strlen(file), ext;
	char	*name;

	if (len > 4 && strcmp(file + len - 4, ".ini") == 0)
		ext = 4;
	else if (len > 5 && strcmp(file + len - 5, ".json") == 0)
		ext = 5;
	else
		return NULL;
	name = xstrndup(file, len - ext);
	if (!env_name_valid(name)) {
		free(name);
		return NULL;
	}
	return name;
}

/* (Re)arms the debounce timer, never past max_delay after the first change. */
static void
ew_arm(struct envwatch *w)
{
	struct timeval	tv;
	long		ms = w->debounce_ms, left;

	/*
	 * Polling sees changes only at each poll: the quiet period must span
	 * the next poll, or a burst across a poll would be reported twice.
	 */
	if (w->polling)
		ms += w->poll_ms;
	left = w->max_delay_ms - (long)clock_since_ms(&w->first);
	if (left < ms)
		ms = left > 0 ? left : 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(w->ev_debounce, &tv);
}

/* Queues a name to report (NULL: only re-arms, for an overflow). */
static void
ew_pend(struct envwatch *w, const char *name)
{
	size_t	i;

	if (w->npending == 0 && !w->overflow)
		clock_gettime(CLOCK_MONOTONIC, &w->first);
	if (name == NULL) {
		ew_arm(w);
		return;
	}
	for (i = 0; i < w->npending; i++)
		if (strcmp(w->pending[i], name) == 0)
			break;
	if (i == w->npending) {
		if (w->npending < EW_PENDING_MAX)
			w->pending[w->npending++] = xstrdup(name);
		else
			w->overflow = 1;
	}
	ew_arm(w);
}

/*
 * Says so if the workspace's path no longer names the folder it named
 * (nothing is said while it names nothing, the same folder, or a folder
 * where there was none).
 */
static void
ew_ws_check(struct envwatch *w)
{
	struct ew_stat	now;

	ew_stat_path(w->ws, &now);
	if (!w->ws_st.exists || (now.exists && now.dev == w->ws_st.dev &&
	    now.ino == w->ws_st.ino)) {
		w->ws_st = now;		/* nothing was lost: maybe a new one */
		return;
	}
	w->ws_st = now;
#ifdef HAVE_SYS_INOTIFY_H
	/* The watches on the old folder are of no use: rearm makes new ones. */
	if (w->ifd != -1) {
		if (w->wd_ws != -1)
			inotify_rm_watch(w->ifd, w->wd_ws);
		if (w->wd_dir != -1)
			inotify_rm_watch(w->ifd, w->wd_dir);
		w->wd_ws = w->wd_dir = -1;
	}
#endif
	if (w->gone != NULL)
		w->gone(w->arg);
}

/* Frees a scan. */
static void
ew_profs_free(struct ew_prof *p, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		free(p[i].file);
		free(p[i].name);
	}
	free(p);
}

/* Scans .gbr_envs: every profile file with its stat, at most EW_SCAN_MAX. */
static size_t
ew_scan(struct envwatch *w, struct ew_prof **out)
{
	struct ew_prof	*p = NULL;
	struct dirent	*de;
	DIR		*d;
	size_t		 n = 0;
	char		*name, *path;

	if ((d = opendir(w->dir)) == NULL) {
		*out = NULL;
		return 0;
	}
	while ((de = readdir(d)) != NULL && n < EW_SCAN_MAX) {
		if ((name = ew_profile_name(de->d_name)) == NULL)
			continue;
		p = xreallocarray(p, n + 1, sizeof *p);
		p[n].file = xstrdup(de->d_name);
		p[n].name = name;
		path = xasprintf("%s/%s", w->dir, de->d_name);
		ew_stat_path(path, &p[n].st);
		free(path);
		n++;
	}
	closedir(d);
	*out = p;
	return n;
}

/* Finds a file in a scan, or NULL. */
static struct ew_prof *
ew_find(struct ew_prof *p, size_t n, const char *file)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (strcmp(p[i].file, file) == 0)
			return &p[i];
	return NULL;
}

/*
 * Rescans .gbr_envs and the extra files; queues every name whose files
 * changed since the last scan (all of them when all is set).
 */
static void
ew_rescan(struct envwatch *w, int all)
{
	struct ew_prof	*now, *old;
	struct ew_stat	 st;
	size_t		 n, i;

	n = ew_scan(w, &now);
	for (i = 0; i < n; i++) {
		old = ew_find(w->profs, w->nprofs, now[i].file);
		if (all || old == NULL || !ew_stat_same(&old->st, &now[i].st))
			ew_pend(w, now[i].name);
	}
	for (i = 0; i < w->nprofs; i++)
		if (ew_find(now, n, w->profs[i].file) == NULL)
			ew_pend(w, w->profs[i].name);	/* deleted */
	ew_profs_free(w->profs, w->nprofs);
	w->profs = now;
	w->nprofs = n;
	for (i = 0; i < w->nfiles; i++) {
		ew_stat_path(w->files[i].path, &st);
		if (all || !ew_stat_same(&st, &w->files[i].st))
			ew_pend(w, w->files[i].name);
		w->files[i].st = st;
	}
}

/* Replaces the scan of .gbr_envs without reporting anything. */
static void
ew_snapshot(struct envwatch *w)
{
	size_t	i;

	ew_profs_free(w->profs, w->nprofs);
	w->nprofs = ew_scan(w, &w->profs);
	for (i = 0; i < w->nfiles; i++)
		ew_stat_path(w->files[i].path, &w->files[i].st);
}

/* Compares two strings for qsort. */
static int
ew_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The debounce timer: reports every pending name, once, in order. */
static void
ew_fire(evutil_socket_t fd, short what, void *arg)
{
	struct envwatch	*w = arg;
	char		*names[EW_PENDING_MAX];
	size_t		 n, i;

	(void)fd;
	(void)what;
	if (w->overflow) {
		/* Too many to track: whatever exists now, and what we knew. */
		w->overflow = 0;
		for (i = 0; i < w->nprofs; i++)
			ew_pend(w, w->profs[i].name);
		ew_rescan(w, 1);
		evtimer_del(w->ev_debounce);
		w->overflow = 0;
	} else if (!w->polling)
		ew_snapshot(w);	/* inotify reported names; keep the scan fresh */
	n = w->npending;
	memcpy(names, w->pending, n * sizeof names[0]);
	w->npending = 0;
	qsort(names, n, sizeof names[0], ew_cmp);
	for (i = 0; i < n; i++) {
		w->cb(names[i], w->arg);
		free(names[i]);
	}
}

/* The polling timer. */
static void
ew_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ew_ws_check(arg);
	ew_rescan(arg, 0);
}

#ifdef HAVE_SYS_INOTIFY_H

#define EW_DIR_MASK	(IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | \
	IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

/* Watches .gbr_envs; queues everything in it (it may be new). */
static void
ew_watch_dir(struct envwatch *w)
{
	if (w->wd_dir != -1)
		return;
	w->wd_dir = inotify_add_watch(w->ifd, w->dir, EW_DIR_MASK | IN_MASK_ADD |
	    IN_ONLYDIR);
	if (w->wd_dir != -1)
		ew_rescan(w, 0);
}

/* Reads and handles inotify events. */
static void
ew_inotify(evutil_socket_t fd, short what, void *arg)
{
	struct envwatch			*w = arg;
	char				 buf[4096]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event	*ev;
	ssize_t				 n;
	size_t				 i, k;
	char				*name;

	(void)what;
	for (;;) {
		n = read(fd, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (i = 0; i < (size_t)n; i += sizeof *ev + ev->len) {
			ev = (const struct inotify_event *)(buf + i);
			if (ev->mask & IN_Q_OVERFLOW) {
				w->overflow = 1;
				ew_pend(w, NULL);
				continue;
			}
			/*
			 * The workspace's folder deleted or moved: its parent
			 * says so at once (the folder's own IN_DELETE_SELF
			 * waits until nobody holds it open, and the sandbox
			 * does).
			 */
			if (ev->wd == w->wd_parent) {
				if (ev->mask & IN_IGNORED)
					w->wd_parent = -1;
				if ((ev->mask & IN_IGNORED) || (ev->len > 0 &&
				    strcmp(ev->name, w->ws_name) == 0))
					ew_ws_check(w);
				continue;
			}
			if (ev->wd == w->wd_ws && (ev->mask & (IN_DELETE_SELF |
			    IN_MOVE_SELF | IN_IGNORED))) {
				if (!(ev->mask & IN_IGNORED))
					inotify_rm_watch(w->ifd, w->wd_ws);
				w->wd_ws = -1;
				ew_ws_check(w);
				continue;
			}
			if (ev->wd == w->wd_ws && ev->len > 0 &&
			    strcmp(ev->name, ENV_DIR) == 0) {
				if (ev->mask & (IN_CREATE | IN_MOVED_TO))
					ew_watch_dir(w);
				else if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
					ew_rescan(w, 0);	/* reports the names gone */
			}
			if (ev->wd == w->wd_dir) {
				if (ev->mask & (IN_IGNORED | IN_DELETE_SELF |
				    IN_MOVE_SELF)) {
					if (ev->mask & IN_MOVE_SELF)
						inotify_rm_watch(w->ifd, w->wd_dir);
					w->wd_dir = -1;
					ew_rescan(w, 0);
				} else if (ev->len > 0 &&
				    (name = ew_profile_name(ev->name)) != NULL) {
					ew_pend(w, name);
					free(name);
				}
			}
			for (k = 0; k < w->nfiles; k++)
				if (ev->wd == w->files[k].wd && ev->len > 0 &&
				    strcmp(ev->name, w->files[k].base) == 0)
					ew_pend(w, w->files[k].name);
		}
	}
}

/* Watches the workspace's parent folder for the workspace going. */
static void
ew_watch_parent(struct envwatch *w)
{
	if (w->wd_parent == -1 && w->parent != NULL)
		w->wd_parent = inotify_add_watch(w->ifd, w->parent, IN_DELETE |
		    IN_MOVED_FROM | IN_ONLYDIR | IN_MASK_ADD);
}

/* Watches the workspace's folder, as its path names it now. */
static void
ew_rearm(struct envwatch *w)
{
	if (w->ifd == -1)
		return;
	ew_watch_parent(w);
	if (w->wd_ws != -1)
		return;
	/* The folder in .gbr_envs went with the old one. */
	if (w->wd_dir != -1)
		inotify_rm_watch(w->ifd, w->wd_dir);
	w->wd_dir = -1;
	w->wd_ws = inotify_add_watch(w->ifd, w->ws, IN_CREATE | IN_DELETE |
	    IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
	    IN_ONLYDIR | IN_MASK_ADD);
	if (w->wd_ws == -1)
		return;
	ew_stat_path(w->ws, &w->ws_st);
	ew_watch_dir(w);
	ew_rescan(w, 0);
}

/* Starts inotify; returns 0, or -1 to fall back to polling. */
static int
ew_start_inotify(struct envwatch *w)
{
	if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1)
		return -1;
	w->wd_ws = inotify_add_watch(w->ifd, w->ws, IN_CREATE | IN_DELETE |
	    IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
	    IN_ONLYDIR | IN_MASK_ADD);
	if (w->wd_ws == -1) {
		close(w->ifd);
		w->ifd = -1;
		return -1;
	}
	w->wd_dir = inotify_add_watch(w->ifd, w->dir, EW_DIR_MASK | IN_MASK_ADD |
	    IN_ONLYDIR);
	ew_watch_parent(w);
	w->ev_inotify = event_new(w->base, w->ifd, EV_READ | EV_PERSIST,
	    ew_inotify, w);
	event_add(w->ev_inotify, NULL);
	return 0;
}

/* Watches an extra file's folder. */
static void
ew_watch_file(struct envwatch *w, struct ew_file *f)
{
	if (w->ifd != -1)
		f->wd = inotify_add_watch(w->ifd, f->dir, EW_DIR_MASK |
		    IN_MASK_ADD | IN_ONLYDIR);
}

#else

/* Polling looks at the path: nothing to rearm. */
static void
ew_rearm(struct envwatch *w)
{
	(void)w;
}

/* No inotify in this build: always poll. */
static int
ew_start_inotify(struct envwatch *w)
{
	(void)w;
	return -1;
}

/* No inotify: polling covers extra files. */
static void
ew_watch_file(struct envwatch *w, struct ew_file *f)
{
	(void)w;
	f->wd = -1;
}

#endif

/* Starts polling. */
static void
ew_start_poll(struct envwatch *w)
{
	struct timeval	tv;

	w->polling = 1;
	tv.tv_sec = w->poll_ms / 1000;
	tv.tv_usec = (w->poll_ms % 1000) * 1000;
	w->ev_poll = event_new(w->base, -1, EV_PERSIST, ew_poll, w);
	event_add(w->ev_poll, &tv);
}

/* Starts watching a workspace (see envwatch.h). */
struct envwatch *
envwatch_create(struct event_base *base, const char *workspace,
    const struct envwatch_opts *opts, envwatch_cb cb, void *arg, char **cause)
{
	struct envwatch	*w;
	char		*ws, *slash;

	*cause = NULL;
	if ((ws = realpath(workspace, NULL)) == NULL) {
		*cause = xasprintf("%s: %s", workspace, strerror(errno));
		return NULL;
	}
	w = xcalloc(1, sizeof *w);
	w->base = base;
	w->ws = ws;
	w->dir = xasprintf("%s/%s", ws, ENV_DIR);
	slash = strrchr(ws, '/');
	if (slash != NULL && slash[1] != '\0') {	/* "/" has no parent */
		w->parent = slash == ws ? xstrdup("/") :
		    xstrndup(ws, (size_t)(slash - ws));
		w->ws_name = slash + 1;
	}
	w->cb = cb;
	w->arg = arg;
	w->debounce_ms = opts != NULL && opts->debounce_ms > 0 ? opts->debounce_ms : 200;
	w->poll_ms = opts != NULL && opts->poll_ms > 0 ? opts->poll_ms : 2000;
	w->max_delay_ms = opts != NULL && opts->max_delay_ms > 0 ?
	    opts->max_delay_ms : 2000;
	if (w->max_delay_ms < w->debounce_ms)
		w->max_delay_ms = w->debounce_ms;
	w->ifd = w->wd_ws = w->wd_dir = w->wd_parent = -1;
	w->ev_debounce = evtimer_new(base, ew_fire, w);
	/* The first scan is the baseline: nothing is reported for it. */
	ew_stat_path(w->ws, &w->ws_st);
	w->nprofs = ew_scan(w, &w->profs);
	if ((opts != NULL && opts->force_poll) || ew_start_inotify(w) != 0)
		ew_start_poll(w);
	return w;
}

/* Also watches an extra file (see envwatch.h). */
int
envwatch_add_file(struct envwatch *w, const char *path, const char *name,
    char **cause)
{
	struct ew_file	*f;
	const char	*slash;

	*cause = NULL;
	if (!paths_is_absolute(path) || (slash = strrchr(path, '/')) == NULL ||
	    slash[1] == '\0') {
		*cause = xasprintf("%s: not an absolute file path", path);
		return -1;
	}
	if (w->nfiles >= EW_FILES_MAX) {
		*cause = xasprintf("more than %d extra files", EW_FILES_MAX);
		return -1;
	}
	f = &w->files[w->nfiles++];
	f->path = xstrdup(path);
	f->dir = slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
	f->base = xstrdup(slash + 1);
	f->name = xstrdup(name);
	f->wd = -1;
	ew_stat_path(path, &f->st);
	ew_watch_file(w, f);
	return 0;
}

/* Watches the workspace's folder again if it was made anew (see envwatch.h). */
void
envwatch_rearm(struct envwatch *w)
{
	ew_rearm(w);
}

/* Sets the callback for a workspace folder lost (see envwatch.h). */
void
envwatch_on_gone(struct envwatch *w, envwatch_gone_cb cb)
{
	w->gone = cb;
}

/* Stops watching and frees everything. */
void
envwatch_free(struct envwatch *w)
{
	size_t	i;

	if (w == NULL)
		return;
	if (w->ev_inotify != NULL)
		event_free(w->ev_inotify);
	if (w->ev_poll != NULL)
		event_free(w->ev_poll);
	if (w->ev_debounce != NULL)
		event_free(w->ev_debounce);
	if (w->ifd != -1)
		close(w->ifd);
	for (i = 0; i < w->nfiles; i++) {
		free(w->files[i].path);
		free(w->files[i].dir);
		free(w->files[i].base);
		free(w->files[i].name);
	}
	for (i = 0; i < w->npending; i++)
		free(w->pending[i]);
	ew_profs_free(w->profs, w->nprofs);
	free(w->ws);
	free(w->dir);
	free(w->parent);
	free(w);
}

/* How the watcher notices changes. */
const char *
envwatch_mode(const struct envwatch *w)
{
	return w->polling ? "poll" : "inotify";
}
