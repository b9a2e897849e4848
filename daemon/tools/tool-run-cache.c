/*
 * The agent's own package caches (agentcache.h), as the run tools use
 * them: each command of a workspace writes that workspace's cache (its
 * fourth writable folder) and its package managers are pointed at it
 * through the environment. Bounded: before a command, at most once every
 * TR_CACHE_EVERY seconds for a workspace, a thread measures the cache;
 * one over `[exec] cache_max_bytes` is cleared before the next command of
 * that workspace that finds none of its commands running (a running
 * build is never pulled from under itself). Clearing renames the folder
 * aside on the loop (one system call) and removes it on a thread.
 * Cleanable by hand: cache.du (measured on a thread; the loop answers)
 * and cache.clean (tool-run.h).
 *
 * Bounds: at most TR_CACHE_SLOTS workspaces remembered (the oldest slot
 * is reused), a walk stops after TR_CACHE_WALK entries (the size is then
 * "at least").
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "agentcache.h"
#include "log.h"
#include "tool-run-int.h"
#include "xmalloc.h"

#define TR_CACHE_EVERY	600		/* seconds between two measures */
#define TR_CACHE_SLOTS	64		/* workspaces remembered */
#define TR_CACHE_WALK	2000000		/* entries one walk visits at most */
#define TR_CACHE_DEPTH	64		/* folders deep one walk goes */

struct tr_cache_slot {
	char		*dir;		/* NULL: free */
	time_t		 measured;	/* when a measure last started */
	atomic_int	 running;	/* a thread measures it now */
	atomic_int	 over;		/* the last measure found it too big */
	uint64_t	 max;		/* the bound when the measure started */
	dev_t		 dev;		/* the folder agentcache_make made */
	ino_t		 ino;
};

static struct tr_cache_slot	tr_slots[TR_CACHE_SLOTS];

/* What a walk found. */
struct tr_walk {
	uint64_t	bytes, files;
	int		complete;
	unsigned long	seen;
};

/* Adds the folder open on dfd (closed here) to w; rm 1: removes it too. */
static void
tr_walk_dir(int dfd, struct tr_walk *w, int depth, int rm)
{
	DIR		*d;
	struct dirent	*e;
	struct stat	 st;
	int		 fd;

	/* Go makes its module cache read-only: its entries must go too. */
	if (rm)
		(void)fchmod(dfd, 0700);
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		w->complete = 0;
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (++w->seen > TR_CACHE_WALK) {
			w->complete = 0;
			break;
		}
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth >= TR_CACHE_DEPTH) {
				w->complete = 0;
				continue;
			}
			if ((fd = openat(dirfd(d), e->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
				tr_walk_dir(fd, w, depth + 1, rm);
			else
				w->complete = 0;
			if (rm && unlinkat(dirfd(d), e->d_name,
			    AT_REMOVEDIR) != 0)
				w->complete = 0;
			continue;
		}
		w->files++;
		w->bytes += (uint64_t)st.st_blocks * 512;
		if (rm && unlinkat(dirfd(d), e->d_name, 0) != 0)
			w->complete = 0;
	}
	closedir(d);
}

/* Measures (or removes, rm 1) a folder tree; never follows a symlink. */
static struct tr_walk
tr_walk(const char *dir, int rm)
{
	struct tr_walk	w = { 0, 0, 1, 0 };
	int		fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0) {
		w.complete = errno == ENOENT;
		return w;
	}
	tr_walk_dir(fd, &w, 0, rm);
	if (rm && rmdir(dir) != 0)
		w.complete = 0;
	return w;
}

/* The thread that removes a cache renamed aside. */
static void *
tr_cache_rm_main(void *arg)
{
	char	*dir = arg;

	/* What is left (an entry it could not remove) stays aside. */
	(void)tr_walk(dir, 1);
	free(dir);
	return NULL;
}

/* The thread that measures a slot's cache. */
static void *
tr_cache_du_main(void *arg)
{
	struct tr_cache_slot	*sl = arg;
	struct tr_walk		 w = tr_walk(sl->dir, 0);

	atomic_store(&sl->over, w.bytes > sl->max);
	atomic_store(&sl->running, 0);
	return NULL;
}

/* Starts a detached thread. Returns 0 or -1. */
static int
tr_thread(void *(*fn)(void *), void *arg)
{
	pthread_attr_t	a;
	pthread_t	t;
	int		r;

	if (pthread_attr_init(&a) != 0)
		return -1;
	(void)pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &a, fn, arg);
	(void)pthread_attr_destroy(&a);
	return r == 0 ? 0 : -1;
}

/*
 * Empties a cache: renames it aside (its parent is ours) and removes that
 * on a thread. Returns 0, or -1 with errno.
 */
static int
tr_cache_clear(const char *dir)
{
	static unsigned	 seq;
	char		*aside;

	aside = xasprintf("%s.old-%ld-%u", dir, (long)getpid(), ++seq);
	if (rename(dir, aside) != 0) {
		free(aside);
		return errno == ENOENT ? 0 : -1;
	}
	if (tr_thread(tr_cache_rm_main, aside) != 0)
		(void)tr_cache_rm_main(aside);
	return 0;
}

/* The slot of a cache, made if need be (the oldest is reused). */
static struct tr_cache_slot *
tr_cache_slot(const char *dir)
{
	struct tr_cache_slot	*sl, *old = NULL;
	size_t			 i;

	for (i = 0; i < TR_CACHE_SLOTS; i++) {
		sl = &tr_slots[i];
		if (sl->dir != NULL && strcmp(sl->dir, dir) == 0)
			return sl;
	}
	for (i = 0; i < TR_CACHE_SLOTS; i++) {
		sl = &tr_slots[i];
		if (atomic_load(&sl->running))
			continue;
		if (sl->dir == NULL)
			break;
		if (old == NULL || sl->measured < old->measured)
			old = sl;
	}
	if (i == TR_CACHE_SLOTS) {
		if (old == NULL)
			return NULL;	/* every slot is being measured */
		sl = old;
	}
	free(sl->dir);
	sl->dir = xstrdup(dir);
	sl->measured = 0;
	sl->dev = 0;
	sl->ino = 0;
	atomic_store(&sl->over, 0);
	return sl;
}

/* Before a command of workspace: its cache, ready (see tool-run-int.h). */
char *
tr_cache_ready(const char *workspace, char **cause)
{
	struct tr_cache_slot	*sl;
	struct stat		 st;
	char			*dir;
	time_t			 now = time(NULL);

	*cause = NULL;
	if ((dir = agentcache_dir(workspace)) == NULL) {
		*cause = xstrdup("there is no home or XDG_CACHE_HOME for the "
		    "agent's package caches");
		return NULL;
	}
	if ((sl = tr_cache_slot(dir)) != NULL && atomic_load(&sl->over) &&
	    !atomic_load(&sl->running) && !tr_group_busy(dir)) {
		atomic_store(&sl->over, 0);
		if (tr_cache_clear(dir) == 0)
			log_info("tool-run: the agent's cache %s was over %llu "
			    "bytes: cleared", dir,
			    (unsigned long long)tr.cache_max);
		else
			log_warn("tool-run: %s: %s", dir, strerror(errno));
	}
	/*
	 * Made once: the same folder of ours (lstat) needs no other look.
	 * A command may have removed a subfolder; its tool makes it again.
	 */
	if (sl == NULL || sl->ino == 0 || lstat(dir, &st) != 0 ||
	    !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    st.st_dev != sl->dev || st.st_ino != sl->ino) {
		if (agentcache_make(dir, cause) != 0) {
			free(dir);
			return NULL;
		}
		if (sl != NULL && lstat(dir, &st) == 0) {
			sl->dev = st.st_dev;
			sl->ino = st.st_ino;
		}
	}
	if (sl != NULL && !atomic_load(&sl->running) &&
	    (sl->measured == 0 || now - sl->measured >= TR_CACHE_EVERY)) {
		sl->measured = now;
		sl->max = tr.cache_max;
		atomic_store(&sl->running, 1);
		if (tr_thread(tr_cache_du_main, sl) != 0)
			atomic_store(&sl->running, 0);
	}
	return dir;
}

/* True if name is a workspace's cache folder: 16 hex digits. */
static int
tr_cache_name_ok(const char *name)
{
	size_t	i;

	for (i = 0; name[i] != '\0'; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return i == 16;
}

/*
 * The caches to act on: a workspace's (its folder, even if not made yet)
 * or, for NULL, every one under the base. Returns a NULL-ended vector
 * (tool_run_strv_free), or NULL with *cause.
 */
static char **
tr_cache_list(const char *workspace, char **cause)
{
	DIR		*d;
	struct dirent	*e;
	char		**v, *base;
	size_t		 n = 0, cap = 8;

	*cause = NULL;
	v = xcalloc(cap + 1, sizeof *v);
	if (workspace != NULL) {
		if ((v[0] = agentcache_dir(workspace)) == NULL) {
			free(v);
			*cause = xstrdup("no folder for the agent's caches (no "
			    "home, no XDG_CACHE_HOME)");
			return NULL;
		}
		return v;
	}
	if ((base = agentcache_base()) == NULL) {
		free(v);
		*cause = xstrdup("no folder for the agent's caches (no home, "
		    "no XDG_CACHE_HOME)");
		return NULL;
	}
	if ((d = opendir(base)) != NULL) {
		while ((e = readdir(d)) != NULL && n < TR_CACHE_SLOTS * 16) {
			if (!tr_cache_name_ok(e->d_name))
				continue;
			if (n == cap) {
				cap *= 2;
				v = xreallocarray(v, cap + 1, sizeof *v);
			}
			v[n++] = xasprintf("%s/%s", base, e->d_name);
		}
		closedir(d);
	}
	v[n] = NULL;
	free(base);
	return v;
}

/* A cache.du on its thread: what it measures, then the loop's answer. */
struct tr_du {
	char		**dirs;
	struct tr_walk	 *w;
	size_t		  n;
	uint64_t	  max;
	struct event	 *ev;
	tool_run_du_cb	  cb;
	void		 *arg;
};

static pthread_mutex_t	tr_du_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	tr_du_cond = PTHREAD_COND_INITIALIZER;
static unsigned		tr_du_running;	/* threads measuring for cache.du */

/* Back on the loop: the answer. */
static void
tr_du_done(evutil_socket_t fd, short what, void *arg)
{
	struct tr_du	*j = arg;
	json_t		*a, *o;
	uint64_t	 total = 0;
	char		*base;
	size_t		 i;
	int		 complete = 1;

	(void)fd;
	(void)what;
	a = json_array();
	for (i = 0; i < j->n; i++) {
		total += j->w[i].bytes;
		complete &= j->w[i].complete;
		json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:b}",
		    "path", j->dirs[i], "bytes", (json_int_t)j->w[i].bytes,
		    "files", (json_int_t)j->w[i].files, "complete",
		    j->w[i].complete));
	}
	base = agentcache_base();
	o = json_pack("{s:s?, s:o, s:I, s:I, s:b}", "base", base, "caches", a,
	    "bytes", (json_int_t)total, "max_bytes", (json_int_t)j->max,
	    "complete", complete);
	free(base);
	j->cb(j->arg, o);
	json_decref(o);
	event_free(j->ev);
	tool_run_strv_free(j->dirs);
	free(j->w);
	free(j);
}

/* The thread: measures each cache, then wakes the loop. */
static void *
tr_du_main(void *arg)
{
	struct tr_du	*j = arg;
	size_t		 i;

	for (i = 0; i < j->n; i++)
		j->w[i] = tr_walk(j->dirs[i], 0);
	event_active(j->ev, EV_TIMEOUT, 0);
	pthread_mutex_lock(&tr_du_lock);
	tr_du_running--;
	pthread_cond_broadcast(&tr_du_cond);
	pthread_mutex_unlock(&tr_du_lock);
	return NULL;
}

/* cache.du (see tool-run.h). */
int
tool_run_cache_du(const char *workspace, tool_run_du_cb cb, void *arg,
    char **cause)
{
	struct tr_du	*j;

	if (tr.base == NULL) {
		*cause = xstrdup("the runner is not set up");
		return -1;
	}
	j = xcalloc(1, sizeof *j);
	if ((j->dirs = tr_cache_list(workspace, cause)) == NULL) {
		free(j);
		return -1;
	}
	while (j->dirs[j->n] != NULL)
		j->n++;
	j->w = xcalloc(j->n + 1, sizeof *j->w);
	j->max = tr.cache_max;
	j->cb = cb;
	j->arg = arg;
	j->ev = event_new(tr.base, -1, 0, tr_du_done, j);
	pthread_mutex_lock(&tr_du_lock);
	tr_du_running++;
	pthread_mutex_unlock(&tr_du_lock);
	if (tr_thread(tr_du_main, j) != 0) {
		pthread_mutex_lock(&tr_du_lock);
		tr_du_running--;
		pthread_mutex_unlock(&tr_du_lock);
		event_free(j->ev);
		tool_run_strv_free(j->dirs);
		free(j->w);
		free(j);
		*cause = xstrdup("no thread could be started to measure it");
		return -1;
	}
	return 0;
}

/* cache.clean (see tool-run.h). */
json_t *
tool_run_cache_clean(const char *workspace, int *busy, char **cause)
{
	json_t	*a;
	char	**v;
	size_t	 i;

	*busy = 0;
	if ((v = tr_cache_list(workspace, cause)) == NULL)
		return NULL;
	for (i = 0; v[i] != NULL; i++)
		if (tr_group_busy(v[i])) {
			*busy = 1;
			*cause = xasprintf("a command that uses %s is running: "
			    "clean it once the command has ended", v[i]);
			tool_run_strv_free(v);
			return NULL;
		}
	a = json_array();
	for (i = 0; v[i] != NULL; i++) {
		if (tr_cache_clear(v[i]) != 0) {
			*cause = xasprintf("%s: %s", v[i], strerror(errno));
			tool_run_strv_free(v);
			json_decref(a);
			return NULL;
		}
		json_array_append_new(a, json_string(v[i]));
	}
	tool_run_strv_free(v);
	return json_pack("{s:o}", "cleaned", a);
}

/*
 * At start: caches renamed aside whose removal a gbrd that died did not
 * finish (NAME.old-PID-N) are removed now, on threads.
 */
void
tr_cache_sweep(void)
{
	DIR		*d;
	struct dirent	*e;
	char		*base, *p, hex[17];
	unsigned	 n = 0;

	if ((base = agentcache_base()) == NULL || (d = opendir(base)) == NULL) {
		free(base);
		return;
	}
	while ((e = readdir(d)) != NULL && n < TR_CACHE_SLOTS) {
		if (strlen(e->d_name) < 21 ||
		    strncmp(e->d_name + 16, ".old-", 5) != 0)
			continue;
		memcpy(hex, e->d_name, 16);
		hex[16] = '\0';
		if (!tr_cache_name_ok(hex))
			continue;
		p = xasprintf("%s/%s", base, e->d_name);
		if (tr_thread(tr_cache_rm_main, p) == 0)
			n++;
		else
			free(p);
	}
	closedir(d);
	free(base);
}

/*
 * Forgets the slots (at shutdown; a measuring thread may still hold one),
 * after the cache.du threads, whose answers would need the loop, are done
 * (each walk is bounded).
 */
void
tr_cache_shutdown(void)
{
	size_t	i;

	pthread_mutex_lock(&tr_du_lock);
	while (tr_du_running > 0)
		pthread_cond_wait(&tr_du_cond, &tr_du_lock);
	pthread_mutex_unlock(&tr_du_lock);

	for (i = 0; i < TR_CACHE_SLOTS; i++)
		if (!atomic_load(&tr_slots[i].running)) {
			free(tr_slots[i].dir);
			tr_slots[i].dir = NULL;
		}
}
