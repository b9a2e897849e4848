/*
 * The shadow store's worker (see shadow.h): rewind's command snapshots,
 * and their diffs, taken on a thread of their own so the event loop never
 * walks or hashes a work tree. A first snapshot of a big workspace takes
 * seconds; every client would stall that long if the loop took it.
 *
 * One thread, started with the first job, runs the jobs one at a time in
 * the order they came: a store's worker handle is then only ever used by
 * it, and two commands of one workspace are bracketed in order. The
 * hand-back is the disk log writer's (storage/disklog-write.c): the
 * worker puts a finished job on the done list and makes an event of the
 * loop active (the base was made thread-aware by evthread_use_pthreads at
 * start-up); the loop runs the callbacks. The worker never logs, never
 * touches a session: it only calls shadow_snapshot and shadow_diff.
 *
 * A job is the loop's until it is queued, the worker's while it runs, and
 * the loop's again on the done list; sw.mtx guards the lists and the
 * state. Shutdown (shadow_work_stop) cuts the running snapshot short
 * (shadow_abort), joins the thread, then tells every job nobody cancelled
 * that it failed.
 *
 * A libgit2 built without threads: the job runs at once while the loop
 * waits (the old cost, said once in the log), its callback still from the
 * loop. The test hook GBR_TEST_SHADOW_INLINE=1 does the same on purpose,
 * so a test can show its measure of the loop's hold catches a held loop.
 *
 * Each job runs on a thread of its own (the worker starts it and waits
 * for it), which confines itself by the kernel before it touches the
 * workspace (osdep/tconfine.c: Landlock): it may read beneath the
 * workspace and read and write beneath its store, nothing else. libgit2
 * opens the work tree's files by path; a process writing the workspace
 * at the same time (another session's command, an MCP server) can swap a
 * folder for a link to, say, ~/.ssh between libgit2's look at the folder
 * and its open of a file in it. Unconfined, gbrd would store that file and
 * a rewind could write it into the workspace; confined, the open fails
 * and so does that snapshot. A thread cannot be widened once confined,
 * hence one per job (a thread costs far less than a snapshot). Where the
 * kernel has no Landlock (or the test hook GBR_TEST_SHADOW_NO_LANDLOCK=1
 * says so), snapshots still run, unconfined: gbrd.log says so once and
 * daemon.status's shadow.confinement tells (doc/REWIND.md).
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "fault.h"
#include "log.h"
#include "shadow.h"
#include "tconfine.h"
#include "xmalloc.h"

#ifdef HAVE_LIBGIT2
#include <pthread.h>
#include <git2.h>

enum sw_state {
	SW_QUEUED,	/* on sw.queue */
	SW_RUNNING,	/* the worker's */
	SW_DONE,	/* on sw.done */
	SW_CALLING,	/* the loop's: its callback is due */
};

struct shadow_job {
	TAILQ_ENTRY(shadow_job)	 entry;
	enum sw_state		 state;
	int			 cancelled;	/* the loop's only */
	struct shadow		*sh;
	int			 has_base;
	char			 base[SHADOW_OID_LEN + 1];
	size_t			 max;
	shadow_done_cb		 cb;
	void			*arg;
	/* The outcome, written by whoever ran it. */
	struct shadow_result	 res;
	char			*cause;
};
TAILQ_HEAD(sw_jobs, shadow_job);

static struct {
	struct event_base	*base;
	struct event		*ev_done;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cond;
	pthread_t		 thr;
	int			 started;	/* the thread runs */
	int			 stop;
	int			 stopping;	/* shadow_work_stop runs */
	int			 inline_only;	/* libgit2 has no threads */
	int			 force_inline;	/* the test hook */
	int			 ll_abi;	/* 0: snapshots unconfined */
	const char		*ll_why;	/* !ll_abi: why */
	struct sw_jobs		 queue;
	struct sw_jobs		 done;
} sw = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.queue = TAILQ_HEAD_INITIALIZER(sw.queue),
	.done = TAILQ_HEAD_INITIALIZER(sw.done),
};

/*
 * Held by a snapshot from its first object to its index on disk, and by a
 * collection (shadow-gc.c) while it decides and removes: a snapshot that
 * outlasts the collection's grace would otherwise have its early objects,
 * in no index yet, removed under it.
 */
static pthread_mutex_t	sw_store_mtx = PTHREAD_MUTEX_INITIALIZER;

void
shadow_store_lock(void)
{
	pthread_mutex_lock(&sw_store_mtx);
}

void
shadow_store_unlock(void)
{
	pthread_mutex_unlock(&sw_store_mtx);
}

/* Takes a job's snapshot (and diff): the worker's, or the loop's inline. */
static void
sw_run(struct shadow_job *j)
{
	struct shadow_result	*r = &j->res;

	r->ok = 0;
	shadow_store_lock();
	if (shadow_snapshot(j->sh, r->tree, &j->cause) != 0)
		goto out;
	if (j->has_base && (r->changes = shadow_diff(j->sh, j->base, r->tree,
	    j->max, &r->skipped, &j->cause)) == NULL)
		goto out;
	r->ok = 1;
out:
	shadow_store_unlock();
	r->cause = j->cause;
}

/* A job's own thread: confined to its workspace and store, then the job. */
static void *
sw_job_main(void *arg)
{
	struct shadow_job	*j = arg;
	char			*c = NULL;

	if (sw.ll_abi > 0 && tconfine_enter(shadow_root(j->sh),
	    shadow_gitdir(j->sh), &c) != 0) {
		j->res.ok = 0;
		j->cause = xasprintf("the shadow store: the snapshot cannot be "
		    "confined to the workspace: %s", c);
		j->res.cause = j->cause;
		free(c);
		return NULL;
	}
	sw_run(j);
	return NULL;
}

/* Runs a job on a thread of its own and waits for it. */
static void
sw_run_confined(struct shadow_job *j)
{
	pthread_t	t;

	if (pthread_create(&t, NULL, sw_job_main, j) != 0) {
		j->res.ok = 0;
		j->cause = xstrdup("the shadow store: a snapshot's thread "
		    "cannot be started");
		j->res.cause = j->cause;
		return;
	}
	pthread_join(t, NULL);
}

static void
sw_free(struct shadow_job *j)
{
	json_decref(j->res.changes);
	free(j->cause);
	free(j);
}

/* The worker: one job at a time, until told to stop. */
static void *
sw_main(void *arg)
{
	struct shadow_job	*j;

	(void)arg;
	pthread_mutex_lock(&sw.mtx);
	for (;;) {
		while (!sw.stop && TAILQ_EMPTY(&sw.queue))
			pthread_cond_wait(&sw.cond, &sw.mtx);
		if (sw.stop)
			break;
		j = TAILQ_FIRST(&sw.queue);
		TAILQ_REMOVE(&sw.queue, j, entry);
		j->state = SW_RUNNING;
		pthread_mutex_unlock(&sw.mtx);
		sw_run_confined(j);
		pthread_mutex_lock(&sw.mtx);
		j->state = SW_DONE;
		TAILQ_INSERT_TAIL(&sw.done, j, entry);
		/* Not under sw.mtx: the loop's lock is never taken inside it. */
		pthread_mutex_unlock(&sw.mtx);
		event_active(sw.ev_done, EV_READ, 0);
		pthread_mutex_lock(&sw.mtx);
	}
	pthread_mutex_unlock(&sw.mtx);
	return NULL;
}

/*
 * The loop: the finished jobs' callbacks. The list is taken whole first;
 * a callback may cancel a job still on it (marked, skipped here) or start
 * new ones.
 */
static void
sw_done_cb(evutil_socket_t fd, short events, void *arg)
{
	struct sw_jobs		 mine = TAILQ_HEAD_INITIALIZER(mine);
	struct shadow_job	*j;

	(void)fd;
	(void)events;
	(void)arg;
	pthread_mutex_lock(&sw.mtx);
	while ((j = TAILQ_FIRST(&sw.done)) != NULL) {
		TAILQ_REMOVE(&sw.done, j, entry);
		j->state = SW_CALLING;
		TAILQ_INSERT_TAIL(&mine, j, entry);
	}
	pthread_mutex_unlock(&sw.mtx);
	while ((j = TAILQ_FIRST(&mine)) != NULL) {
		TAILQ_REMOVE(&mine, j, entry);
		if (!j->cancelled)
			j->cb(j->arg, &j->res);
		sw_free(j);
	}
}

/* The loop results come back on. */
void
shadow_work_init(struct event_base *base)
{
	sw.base = base;
	sw.force_inline = fault_hook_on("SHADOW_INLINE");
	if (fault_hook_on("SHADOW_NO_LANDLOCK")) {
		sw.ll_abi = 0;
		sw.ll_why = "the test hook GBR_TEST_SHADOW_NO_LANDLOCK";
	} else
		sw.ll_abi = tconfine_abi(&sw.ll_why);
	if (sw.ll_abi == 0)
		log_warn("rewind: command snapshots run unconfined (%s): a "
		    "process writing a workspace during one could make gbrd "
		    "store a file from outside it", sw.ll_why);
}

/* daemon.status: whether snapshots are confined by the kernel. */
json_t *
shadow_work_status(void)
{
	return json_pack("{s:b, s:i, s:s?}", "active", sw.ll_abi > 0,
	    "abi", sw.ll_abi, "why_not", sw.ll_abi > 0 ? NULL : sw.ll_why);
}

/* Starts the worker thread, once. Returns 0 or -1 with *cause. */
static int
sw_start(char **cause)
{
	if (sw.stopping) {
		*cause = xstrdup("the shadow store: gbrd is stopping");
		return -1;
	}
	if (sw.started || sw.inline_only)
		return 0;
	if (sw.base == NULL) {
		*cause = xstrdup("the shadow store's worker has no loop");
		return -1;
	}
	if (sw.ev_done == NULL && (sw.ev_done = event_new(sw.base, -1, 0,
	    sw_done_cb, NULL)) == NULL)
		fatalx("event_new failed");
	/* shadow_open ran git_libgit2_init: its features are known now. */
	if (sw.force_inline ||
	    !(git_libgit2_features() & GIT_FEATURE_THREADS)) {
		sw.inline_only = 1;
		return 0;
	}
	/* jansson seeds its hash on first use; before a second thread can. */
	json_object_seed(0);
	sw.stop = 0;
	if (pthread_create(&sw.thr, NULL, sw_main, NULL) != 0) {
		*cause = xstrdup("the shadow store's worker thread cannot be "
		    "started");
		return -1;
	}
	sw.started = 1;
	return 0;
}

/* Queues a snapshot (see shadow.h). */
struct shadow_job *
shadow_snapshot_start(struct shadow *sh, const char *base, size_t max,
    shadow_done_cb cb, void *arg, char **cause)
{
	struct shadow_job	*j;

	*cause = NULL;
	if (sw_start(cause) != 0)
		return NULL;
	j = xcalloc(1, sizeof *j);
	j->sh = sh;
	if (base != NULL) {
		j->has_base = 1;
		snprintf(j->base, sizeof j->base, "%s", base);
	}
	j->max = max;
	j->cb = cb;
	j->arg = arg;
	if (sw.inline_only) {
		/* The loop waits for it, then answers from the loop. */
		sw_run_confined(j);
		pthread_mutex_lock(&sw.mtx);
		j->state = SW_DONE;
		TAILQ_INSERT_TAIL(&sw.done, j, entry);
		pthread_mutex_unlock(&sw.mtx);
		event_active(sw.ev_done, EV_READ, 0);
		return j;
	}
	pthread_mutex_lock(&sw.mtx);
	j->state = SW_QUEUED;
	TAILQ_INSERT_TAIL(&sw.queue, j, entry);
	pthread_cond_signal(&sw.cond);
	pthread_mutex_unlock(&sw.mtx);
	return j;
}

/* Its callback will not run (see shadow.h). */
void
shadow_job_cancel(struct shadow_job *j)
{
	if (j == NULL)
		return;
	pthread_mutex_lock(&sw.mtx);
	if (j->state == SW_QUEUED) {
		TAILQ_REMOVE(&sw.queue, j, entry);
		pthread_mutex_unlock(&sw.mtx);
		sw_free(j);
		return;
	}
	/* Running, done or about to be called: dropped by sw_done_cb. */
	j->cancelled = 1;
	pthread_mutex_unlock(&sw.mtx);
}

/*
 * Stops the worker: the snapshot it takes is cut short, the thread is
 * joined, and the jobs nobody cancelled hear they failed.
 */
void
shadow_work_stop(void)
{
	struct shadow_job	*j;

	/* A callback below may start a job: refused from here on. */
	sw.stopping = 1;
	if (sw.started) {
		pthread_mutex_lock(&sw.mtx);
		sw.stop = 1;
		pthread_cond_signal(&sw.cond);
		pthread_mutex_unlock(&sw.mtx);
		shadow_abort();
		pthread_join(sw.thr, NULL);
		sw.started = 0;
	}
	/* What ran: its callback, as the loop would have. */
	if (sw.ev_done != NULL)
		sw_done_cb(-1, 0, NULL);
	while ((j = TAILQ_FIRST(&sw.queue)) != NULL) {
		TAILQ_REMOVE(&sw.queue, j, entry);
		j->state = SW_CALLING;
		j->res.ok = 0;
		j->res.cause = "the shadow store: gbrd is stopping";
		j->cb(j->arg, &j->res);
		sw_free(j);
	}
	if (sw.ev_done != NULL)
		event_free(sw.ev_done);
	sw.ev_done = NULL;
	sw.inline_only = 0;
	sw.stopping = 0;
}

#else /* !HAVE_LIBGIT2 */

void
shadow_work_init(struct event_base *base)
{
	(void)base;
}

json_t *
shadow_work_status(void)
{
	return json_pack("{s:b, s:i, s:s}", "active", 0, "abi", 0, "why_not",
	    "rewind is not available in this build of gbrd");
}

struct shadow_job *
shadow_snapshot_start(struct shadow *sh, const char *base, size_t max,
    shadow_done_cb cb, void *arg, char **cause)
{
	(void)sh;
	(void)base;
	(void)max;
	(void)cb;
	(void)arg;
	*cause = xstrdup("rewind is not available in this build of gbrd "
	    "(it was built without libgit2)");
	return NULL;
}

void
shadow_job_cancel(struct shadow_job *j)
{
	(void)j;
}

void
shadow_work_stop(void)
{
}

#endif /* HAVE_LIBGIT2 */
