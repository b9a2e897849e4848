/*
 * The daemon process itself, where Unix and Windows differ: going to the
 * background, the requests to stop and to re-read the config (signals on
 * Unix; the console's control events and the service manager on Windows),
 * and what the loop needs before it is made. gbrd.c calls these at fixed
 * points and never asks which system it runs on.
 */
#ifndef GBRD_OSDEP_PROC_H
#define GBRD_OSDEP_PROC_H

struct event_base;

/*
 * Where in start-up a daemon goes to the background. Unix forks after the
 * socket is taken, so every reason not to start reaches the terminal and
 * the socket passes to the child; Windows cannot fork, so there the
 * starting process runs the daemon again, detached, before anything is
 * taken, and relays what it reports.
 */
enum osdep_detach_at {
	OSDEP_DETACH_BEFORE_LISTEN,
	OSDEP_DETACH_AFTER_LISTEN,
};

/*
 * Goes to the background if this platform does it at this point: the
 * process that started gbrd waits until the daemon writes to *ready_fd
 * ("ok\n", or "error: WHY\n") or exits, prints the error, and exits with
 * 0 or 1; only the daemon returns, its standard input and output on the
 * null device and its standard error on the file open_log opens (or the
 * null device when it returns -1). state names the folder whose gbrd.log a
 * failed start points at. A failure here exits with a message.
 */
void	osdep_detach(enum osdep_detach_at, int (*open_log)(void),
	    const char *state, int *ready_fd);

/*
 * Holds the stop and reload requests (SIGTERM, SIGINT, SIGHUP) until the
 * loop can take them, so one that comes during a long replay stops the
 * daemon cleanly instead of killing it half way; released by
 * osdep_stop_events. A no-op where requests arrive as events anyway.
 */
void	osdep_requests_hold(void);

/*
 * What the loop needs before the event base is made: libevent's locking
 * for threads, SIGPIPE ignored, the socket library started. Returns 0, or
 * -1 with *cause.
 */
int	osdep_loop_prepare(char **cause);

/*
 * Delivers stop and reload requests to the loop from now on: stop(why)
 * with "SIGTERM", "SIGINT", "console close", "service stop", ... and
 * reload(why) for SIGHUP or the service manager's PARAMCHANGE. Both run on
 * the loop. Releases what osdep_requests_hold held. Returns 0 or -1.
 */
int	osdep_stop_events(struct event_base *, void (*stop)(const char *why),
	    void (*reload)(const char *why));
/* Asks the loop to stop, from any thread (the service's control handler). */
void	osdep_request_stop(const char *why);
/* Asks the loop to re-read the config, from any thread; why names it. */
void	osdep_request_reload(const char *why);
/* Frees what osdep_stop_events made, after the loop has ended. */
void	osdep_stop_events_free(void);

#endif
