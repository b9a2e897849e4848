/*
 * What gbrd tells its service manager (sd_notify(3)): READY=1 once clients
 * can be served, RELOADING=1 around a SIGHUP reload, STOPPING=1 on shutdown,
 * a short STATUS= line, and WATCHDOG=1 keep-alives from the event loop.
 * Every function is a cheap no-op when no service manager listens. On
 * Windows the same calls are what the Service Control Manager hears of a
 * service (service-win.c): start pending, running, stop pending, stopped.
 */
#ifndef GBRD_SDNOTIFY_H
#define GBRD_SDNOTIFY_H

#include <jansson.h>

struct event_base;

/*
 * Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, takes them out of the
 * environment (children must not talk to our manager) and arms the
 * watchdog timer. Called once, in the process that will serve (after going
 * to the background), before the loop runs.
 */
void	 sdnotify_init(struct event_base *);
/* Releases the socket and timers; later calls do nothing. */
void	 sdnotify_close(void);

/* READY=1 with the current STATUS=; also ends a reload. */
void	 sdnotify_ready(void);
/* RELOADING=1: a reload has begun; sdnotify_ready() ends it. */
void	 sdnotify_reloading(void);
/* STOPPING=1: shutdown has begun; status updates stop. */
void	 sdnotify_stopping(void);
/*
 * Says the summary may have changed: clients is how many are connected
 * now (conn.c says so when one comes or goes). The STATUS= line is rebuilt from the loop and sent
 * at most once per second, and only if it differs from the last one, so
 * callers may call this as often as they like.
 */
void	 sdnotify_status_update(unsigned clients);

/*
 * A step of a long start-up (the disk log's replay calls it as it goes):
 * the Service Control Manager's checkpoint moves on, so a slow start is
 * told from a stuck one. Nothing on systemd: READY=1 is the first message
 * gbrd sends there, and TimeoutStartSec= bounds the start. Cheap enough
 * to call for every few records.
 */
void	 sdnotify_progress(void);
/*
 * The start failed: gbrd exits with status next. Under the Service Control
 * Manager the event log says why and the service stops with that status
 * as its service-specific error. Nothing on systemd, which reads the exit
 * status, and the journal has the error line.
 */
void	 sdnotify_failed(int status, const char *why);

/* The "service" object of daemon.status (a new reference). */
json_t	*sdnotify_status_json(void);

#endif
