/*
 * The shadow stores' collection and their share of the disk budget
 * (doc/REWIND.md, "Disk use"). When something changes what the stores
 * must keep (a change remembered or forgotten, a session closed), a run
 * of tools/shadow-gc.c follows, at most one at a time and at least
 * GC_MIN_MS apart: the loop hands it the ids of every remembered change
 * and call in flight (rewind_keep), a thread removes the rest and
 * measures the stores, and the loop polls for the end.
 *
 * The budget: the disk log's files and the stores together stay within
 * [log] max_bytes. When a run finds them over it, the oldest remembered
 * changes of all sessions are forgotten (rewind then answers gone for
 * them) until what their contents take brings the total to seven eighths
 * of the budget, and another run removes those contents. While log and
 * stores take over half the budget, they are measured again every
 * minute, since the log grows without telling. Everything here runs on
 * the loop; nothing walks the disk but the run's thread.
 */
#include "gbr-config.h"

#include <event2/event.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "disklog.h"
#include "log.h"
#include "loop.h"
#include "rewind.h"
#include "shadow.h"
#include "shadow-gc.h"
#include "xmalloc.h"

#define GC_MIN_MS	2000	/* between the starts of two runs */
#define GC_POLL_MS	50	/* how often a run's end is looked for */
#define GC_WATCH_MS	60000	/* near the budget: measured again this often */

static struct event		*gc_ev;
static struct shadow_gc		*gc_run;	/* running, or NULL */
static int			 gc_dirty;	/* a run is wanted */
static int64_t			 gc_started_ms;
static struct shadow_gc_stats	 gc_last;	/* the last run's figures */
static int64_t			 gc_last_end_ms;
static uint64_t			 gc_runs, gc_removed, gc_removed_bytes;
static uint64_t			 gc_forgotten;	/* changes, for the budget */
static int			 gc_over;	/* over, nothing left to forget */
static char			*gc_error;

static int64_t
gc_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Arms the timer in ms. */
static void
gc_arm(int64_t ms)
{
	struct timeval	tv;

	if (ms < 0)
		ms = 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (long)(ms % 1000) * 1000;
	evtimer_add(gc_ev, &tv);
}

/* The time between two runs: longer when runs are long. */
static int64_t
gc_interval_ms(void)
{
	return gc_last.ms * 10 > GC_MIN_MS ? gc_last.ms * 10 : GC_MIN_MS;
}

/*
 * A run is wanted: the timer is set for the earliest time one may start
 * (the same time however often this is called), unless one is running.
 */
void
rewind_gc_kick(void)
{
	gc_dirty = 1;
	if (gc_ev == NULL || gc_run != NULL)
		return;
	gc_arm(gc_started_ms + gc_interval_ms() - gc_now_ms());
}

/* Starts a run with what the changes and calls in flight need. */
static void
gc_start(void)
{
	char	*cause;

	gc_dirty = 0;
	gc_run = shadow_gc_create();
	rewind_keep(gc_run);
	gc_started_ms = gc_now_ms();
	if (shadow_gc_start(gc_run, loop_state_dir(), &cause) != 0) {
		log_warn("rewind: the shadow store is not collected: %s",
		    cause);
		free(gc_error);
		gc_error = cause;
		shadow_gc_free(gc_run);
		gc_run = NULL;
		return;
	}
	gc_arm(GC_POLL_MS);
}

/* A run is over: its figures, and the budget. */
static void
gc_finish(void)
{
	const char	*err;
	uint64_t	 log_bytes, max, target, total;
	size_t		 n;

	err = shadow_gc_result(gc_run, &gc_last);
	free(gc_error);
	gc_error = err != NULL ? xstrdup(err) : NULL;
	if (err != NULL)
		log_warn("rewind: collecting the shadow store: %s", err);
	gc_runs++;
	gc_removed += gc_last.removed;
	gc_removed_bytes += gc_last.removed_bytes;
	gc_last_end_ms = gc_now_ms();
	log_bytes = disklog_disk_bytes(&max);
	total = log_bytes + gc_last.bytes;
	gc_over = 0;
	/*
	 * A run that kept everything measured no content: nothing to weigh.
	 * A log over the budget by itself (its snapshots failing) is not
	 * helped by forgetting: the log says so in its own status.
	 */
	if (max > 0 && total > max && log_bytes >= max)
		gc_over = 1;
	else if (max > 0 && total > max && err == NULL) {
		target = max - max / 8;
		n = rewind_trim(total - target, gc_run);
		gc_forgotten += n;
		if (n > 0) {
			log_info("rewind: the disk log (%llu bytes) and the "
			    "shadow store (%llu) are over [log] max_bytes "
			    "(%llu): forgot the %zu oldest change(s)",
			    (unsigned long long)log_bytes,
			    (unsigned long long)gc_last.bytes,
			    (unsigned long long)max, n);
			gc_dirty = 1;
		} else
			gc_over = 1;
	}
	shadow_gc_free(gc_run);
	gc_run = NULL;
	if (gc_dirty)
		rewind_gc_kick();
	else if (max > 0 && total > max / 2)
		gc_arm(GC_WATCH_MS);	/* the log may grow meanwhile */
}

static void
gc_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (gc_run == NULL) {
		if (!loop_shutting_down())
			gc_start();
		return;
	}
	if (!shadow_gc_done(gc_run)) {
		gc_arm(GC_POLL_MS);
		return;
	}
	gc_finish();
}

/*
 * Starts the collection: called once the disk log is replayed, so that
 * every remembered change is known before anything is removed.
 */
void
rewind_gc_init(struct event_base *base)
{
	if (gc_ev != NULL || !shadow_available())
		return;
	if ((gc_ev = evtimer_new(base, gc_cb, NULL)) == NULL)
		fatalx("evtimer_new failed");
	gc_started_ms = gc_now_ms();	/* the first run waits GC_MIN_MS */
	rewind_gc_kick();	/* measures the stores once */
}

/* daemon.status: the stores' figures. */
json_t *
rewind_gc_status(void)
{
	uint64_t	 max, log_bytes = disklog_disk_bytes(&max);

	return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:b, s:b, s:s?, s:o}",
	    "measured", gc_runs > 0,
	    "bytes", (json_int_t)gc_last.bytes,
	    "objects", (json_int_t)gc_last.objects,
	    "stores", (json_int_t)gc_last.stores,
	    "log_bytes", (json_int_t)log_bytes,
	    "max_bytes", (json_int_t)max,
	    "gc_runs", (json_int_t)gc_runs,
	    "gc_ms", (json_int_t)gc_last.ms,
	    "removed", (json_int_t)gc_removed,
	    "removed_bytes", (json_int_t)gc_removed_bytes,
	    "forgotten", (json_int_t)gc_forgotten,
	    "running", gc_run != NULL,
	    "over_budget", gc_over,
	    "error", gc_error,
	    "confinement", shadow_work_status());
}
