/*
 * loop: what every part of gbrd may know of this run of it: the epoch that
 * changes on every start, the state folder, when it started, and shutdown.
 * gbrd.c sets it up (loop_init) and registers what shutdown must tell (the
 * service manager). The event base is not here: every module that needs
 * it is handed it at its init.
 */
#ifndef GBRD_LOOP_H
#define GBRD_LOOP_H

#include <stdint.h>

struct event_base;

/* At start: the base whose loop shutdown ends, the state folder (borrowed). */
void		 loop_init(struct event_base *, const char *state_dir,
		    const char *epoch);
/* Called once when shutdown begins (the service manager's STOPPING=1). */
void		 loop_on_shutdown(void (*)(void));
/*
 * How the config is read again (gbrd.c's): fn(why, cause) returns 0, or -1
 * with *cause (new) when the new config is broken and the old one stays in
 * force; why names the trigger in the log ("SIGHUP", "daemon.reload").
 */
void		 loop_on_reload(int (*fn)(const char *why, char **cause));
/*
 * Re-reads the config now (SIGHUP, the service manager's PARAMCHANGE,
 * daemon.reload). Returns 0, or -1 with *cause (new).
 */
int		 loop_reload(const char *why, char **cause);
/* A random string, new on every start, so clients can tell a restart happened. */
const char	*loop_epoch(void);
const char	*loop_state_dir(void);
/* Wall-clock start time, ms since the Unix epoch. */
int64_t		 loop_started_ms(void);
/* Monotonic ms since start. */
int64_t		 loop_uptime_ms(void);
/* Ends the loop once the current callbacks are done. */
void		 loop_shutdown(const char *why);
/* Tells whether shutdown has begun. */
int		 loop_shutting_down(void);
/* Why it began ("SIGTERM", "requested by client pid N"), or "". */
const char	*loop_stop_reason(void);

#endif
