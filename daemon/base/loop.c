/*
 * loop (see loop.h): this run's facts, set once at start by gbrd.c.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "loop.h"
#include "xmalloc.h"

static struct event_base	*loop_base;
static char			 loop_epoch_str[33];
static const char		*loop_state;
static int64_t			 loop_start_wall;
static struct timespec		 loop_start_mono;
static int			 loop_stopping;
static char			 loop_why[128];
static void			(*loop_stop_cb)(void);
static int			(*loop_reload_cb)(const char *, char **);

/* Takes this run's facts. */
void
loop_init(struct event_base *base, const char *state_dir, const char *epoch)
{
	struct timespec	now;

	loop_base = base;
	loop_state = state_dir;
	snprintf(loop_epoch_str, sizeof loop_epoch_str, "%s", epoch);
	clock_gettime(CLOCK_REALTIME, &now);
	loop_start_wall = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	clock_gettime(CLOCK_MONOTONIC, &loop_start_mono);
}

/* What shutdown tells. */
void
loop_on_shutdown(void (*cb)(void))
{
	loop_stop_cb = cb;
}

/* Returns this run's epoch. */
const char *
loop_epoch(void)
{
	return loop_epoch_str;
}

/* Returns the state folder. */
const char *
loop_state_dir(void)
{
	return loop_state;
}

/* Returns the start time. */
int64_t
loop_started_ms(void)
{
	return loop_start_wall;
}

/* Returns ms since start. */
int64_t
loop_uptime_ms(void)
{
	return (int64_t)clock_since_ms(&loop_start_mono);
}

/* Registers how the config is read again. */
void
loop_on_reload(int (*fn)(const char *, char **))
{
	loop_reload_cb = fn;
}

/* Reads the config again through gbrd.c's hook. */
int
loop_reload(const char *why, char **cause)
{
	*cause = NULL;
	if (loop_reload_cb == NULL) {
		*cause = xstrdup("this daemon cannot reload its config");
		return -1;
	}
	return loop_reload_cb(why, cause);
}

/* Begins shutdown. */
void
loop_shutdown(const char *why)
{
	if (loop_stopping)
		return;
	loop_stopping = 1;
	snprintf(loop_why, sizeof loop_why, "%s", why);
	log_info("shutting down: %s", why);
	if (loop_stop_cb != NULL)
		loop_stop_cb();
	if (loop_base != NULL)
		event_base_loopexit(loop_base, NULL);
}

/* Why shutdown began ("SIGTERM", "requested by client pid N"), or "". */
const char *
loop_stop_reason(void)
{
	return loop_why;
}

/* Tells whether shutdown has begun. */
int
loop_shutting_down(void)
{
	return loop_stopping;
}
