/*
 * Process-wide state of gbrd, owned by gbrd.c: the event base, the epoch
 * that changes on every start, the folders in use and shutdown.
 */
#ifndef GBRD_GBRD_H
#define GBRD_GBRD_H

#include <stdint.h>

struct event_base;

struct event_base *gbrd_base(void);
/* A random string, new on every start, so clients can tell a restart happened. */
const char	*gbrd_epoch(void);
const char	*gbrd_state_dir(void);
/* Wall-clock start time, ms since the Unix epoch. */
int64_t		 gbrd_started_ms(void);
/* Monotonic ms since start. */
int64_t		 gbrd_uptime_ms(void);
/* Ends the loop once the current callbacks are done. */
void		 gbrd_shutdown(const char *why);
/* Tells whether shutdown has begun. */
int		 gbrd_shutting_down(void);

#endif
