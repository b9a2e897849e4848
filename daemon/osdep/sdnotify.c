/*
 * notify.c owns gbrd's side of the sd_notify(3) protocol: the notify
 * socket, the watchdog timer and the STATUS= line. A service manager (in
 * practice systemd, with Type=notify) learns from us when clients can be
 * served (READY=1, sent only after the log is replayed and the socket
 * listens), when a reload begins and ends (RELOADING=1 ... READY=1), when
 * we stop (STOPPING=1), that the event loop still turns (WATCHDOG=1 from a
 * timer at half of WATCHDOG_USEC, so a stuck loop gets the daemon
 * restarted), and a one-line summary for `systemctl status`.
 *
 * With libsystemd the messages go through sd_notify(). Without it the same
 * protocol is spoken directly: one datagram of "KEY=VALUE\n" lines sent to
 * the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract name
 * written with a leading '@'). Our socket is non-blocking and a message that
 * cannot be sent at once is dropped and counted, so a busy manager never
 * stalls the loop. (libsystemd's sd_notify uses a blocking socket; in
 * practice systemd drains its notify socket at once, and the built-in path
 * is there for anyone who wants the stricter guarantee.)
 */
#include "gbr-config.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "sdactivate.h"
#include "log.h"
#include "sdnotify.h"
#include "xmalloc.h"

/* At most one STATUS= change per this many ms. */
#define NOTIFY_STATUS_INTERVAL_MS	1000
/* Longest STATUS= text. */
#define NOTIFY_STATUS_MAX		200

#ifdef HAVE_LIBSYSTEMD
#define NOTIFY_IMPL	"libsystemd"
#else
#define NOTIFY_IMPL	"built-in"
#endif

enum sdnotify_state {
	NOTIFY_STARTING = 0,
	NOTIFY_READY,
	NOTIFY_RELOADING,
	NOTIFY_STOPPING,
};

static enum sdnotify_state sdnotify_state;
static char		*sdnotify_path;		/* $NOTIFY_SOCKET, NULL if none */
static uint64_t		 sdnotify_watchdog_usec;	/* 0: no watchdog */
static struct event	*sdnotify_ev_watchdog;
static struct event	*sdnotify_ev_status;
static char		 sdnotify_status_last[NOTIFY_STATUS_MAX + 1];
static int64_t		 sdnotify_status_last_ms = INT64_MIN / 2;
static uint64_t		 sdnotify_sent;
static unsigned		 sdnotify_clients;	/* as conn.c last said */
static uint64_t		 sdnotify_errors;
static int		 sdnotify_warned;

#ifndef HAVE_LIBSYSTEMD
static int		 sdnotify_fd = -1;
static struct sockaddr_un sdnotify_sa;
static socklen_t	 sdnotify_salen;
#endif

static void	sdnotify_watchdog_cb(evutil_socket_t, short, void *);
static void	sdnotify_status_cb(evutil_socket_t, short, void *);

/* Monotonic microseconds. */
static uint64_t
sdnotify_now_usec(void)
{
	return clock_mono_ns() / 1000;
}

/*
 * Builds the STATUS= summary. This is the one place to extend: each part of
 * the daemon that a person wants to see in `systemctl status` adds a short
 * clause here ("2 sessions, 1 approval pending, 3 clients").
 */
static void
sdnotify_status_summary(char *buf, size_t len)
{
	unsigned	clients = sdnotify_clients;

	snprintf(buf, len, "Serving %u client%s", clients,
	    clients == 1 ? "" : "s");
}

#ifndef HAVE_LIBSYSTEMD
/*
 * Parses $NOTIFY_SOCKET into an address: an absolute path, or '@' for the
 * abstract namespace (as sd_notify(3) documents). Returns -1 and sets
 * *cause if it is neither or does not fit.
 */
static int
sdnotify_parse_addr(const char *s, struct sockaddr_un *sa, socklen_t *salen,
    char **cause)
{
	size_t	n = strlen(s);

	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	if (s[0] != '/' && s[0] != '@') {
		*cause = xasprintf("NOTIFY_SOCKET=%s is neither an absolute path "
		    "nor an abstract name ('@...'); it is not supported", s);
		return -1;
	}
	/* A path needs room for its NUL; an abstract name does not. */
	if (n < 2 || n > sizeof sa->sun_path - (s[0] == '/')) {
		*cause = xasprintf("NOTIFY_SOCKET is empty or too long (%zu "
		    "bytes)", n);
		return -1;
	}
	memcpy(sa->sun_path, s, n);
	if (s[0] == '@')
		sa->sun_path[0] = '\0';
	*salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (s[0] == '/'));
	return 0;
}

/* Parses an unsigned decimal environment value; -1 if it is not one. */
static int
notify_env_u64(const char *s, uint64_t *out)
{
	char			*end;
	unsigned long long	 v;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

/* Opens the socket and reads the watchdog variables, the built-in way. */
static void
sdnotify_open(void)
{
	const char	*s = getenv("NOTIFY_SOCKET");
	uint64_t	 usec = 0, pid;
	char		*cause;

	if (s != NULL && *s != '\0') {
		if (sdnotify_parse_addr(s, &sdnotify_sa, &sdnotify_salen, &cause) != 0) {
			log_warn("%s", cause);
			free(cause);
		} else if ((sdnotify_fd = socket(AF_UNIX, SOCK_DGRAM |
		    SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1)
			log_warn("notify socket: %s", strerror(errno));
		else
			sdnotify_path = xstrdup(s);
	}
	/* The watchdog is ours only if WATCHDOG_PID is unset or names us. */
	s = getenv("WATCHDOG_USEC");
	if (s != NULL && (notify_env_u64(s, &usec) != 0 || usec == 0)) {
		log_warn("ignoring WATCHDOG_USEC=%s: not a positive number", s);
		usec = 0;
	}
	s = getenv("WATCHDOG_PID");
	if (usec != 0 && s != NULL &&
	    (notify_env_u64(s, &pid) != 0 || pid != (uint64_t)getpid())) {
		log_debug("WATCHDOG_PID=%s is not us; no watchdog", s);
		usec = 0;
	}
	sdnotify_watchdog_usec = usec;
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}
#else
/* Reads the same variables through libsystemd. */
static void
sdnotify_open(void)
{
	const char	*s = getenv("NOTIFY_SOCKET");
	uint64_t	 usec = 0;
	int		 r;

	/* sd_notify reads NOTIFY_SOCKET on every call, so it stays set. */
	if (s != NULL && *s != '\0')
		sdnotify_path = xstrdup(s);
	/* Checks WATCHDOG_PID against us, then unsets both variables. */
	if ((r = sd_watchdog_enabled(1, &usec)) < 0)
		log_warn("ignoring the watchdog settings: %s", strerror(-r));
	sdnotify_watchdog_usec = r > 0 ? usec : 0;
}
#endif

/* Sends one message; failures are counted and logged once. Returns 0 or -1. */
static int
sdnotify_send(const char *msg)
{
	int	error = 0;

	if (sdnotify_path == NULL)
		return -1;
#ifdef HAVE_LIBSYSTEMD
	{
		int	r = sd_notify(0, msg);

		if (r < 0)
			error = -r;
		else if (r == 0)
			error = ENOTCONN;
	}
#else
	if (sdnotify_fd == -1)
		return -1;
	if (sendto(sdnotify_fd, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL,
	    (const struct sockaddr *)&sdnotify_sa, sdnotify_salen) == -1)
		error = errno;
#endif
	if (error != 0) {
		sdnotify_errors++;
		if (!sdnotify_warned)
			log_warn("cannot notify the service manager on %s: %s",
			    sdnotify_path, strerror(error));
		else
			log_debug("cannot notify the service manager: %s",
			    strerror(error));
		sdnotify_warned = 1;
		return -1;
	}
	sdnotify_sent++;
	return 0;
}

/* Remembers the status the manager now shows, and when it was sent. */
static void
sdnotify_status_sent(const char *status)
{
	snprintf(sdnotify_status_last, sizeof sdnotify_status_last, "%s", status);
	sdnotify_status_last_ms = (int64_t)(sdnotify_now_usec() / 1000);
}

/* Sends msg with a STATUS= line appended. */
static void
sdnotify_send_with_status(const char *msg, const char *status)
{
	char	buf[512];

	snprintf(buf, sizeof buf, "%s\nSTATUS=%s", msg, status);
	if (sdnotify_send(buf) == 0)
		sdnotify_status_sent(status);
}

/* Reads the environment and arms the watchdog. */
void
sdnotify_init(struct event_base *base)
{
	struct timeval	tv;
	uint64_t	every;

	sdnotify_open();
	if (sdnotify_path == NULL) {
		if (sdnotify_watchdog_usec != 0)
			log_warn("WATCHDOG_USEC is set but there is no notify "
			    "socket; no watchdog");
		sdnotify_watchdog_usec = 0;
		return;
	}
	sdnotify_ev_status = evtimer_new(base, sdnotify_status_cb, NULL);
	if (sdnotify_ev_status == NULL)
		fatalx("evtimer_new failed");
	if (sdnotify_watchdog_usec != 0) {
		/* Half the timeout, as sd_watchdog_enabled(3) advises. */
		every = sdnotify_watchdog_usec / 2;
		if (every < 1000)
			every = 1000;
		tv.tv_sec = (time_t)(every / 1000000);
		tv.tv_usec = (suseconds_t)(every % 1000000);
		sdnotify_ev_watchdog = event_new(base, -1, EV_PERSIST,
		    sdnotify_watchdog_cb, NULL);
		if (sdnotify_ev_watchdog == NULL ||
		    event_add(sdnotify_ev_watchdog, &tv) != 0)
			fatalx("cannot arm the watchdog timer");
	}
	if (sdnotify_watchdog_usec != 0)
		log_info("service manager: notify socket %s (%s), watchdog "
		    "ping every %" PRIu64 " ms", sdnotify_path, NOTIFY_IMPL,
		    every / 1000);
	else
		log_info("service manager: notify socket %s (%s), no watchdog",
		    sdnotify_path, NOTIFY_IMPL);
}

/* Frees the timers and closes the socket. */
void
sdnotify_close(void)
{
	if (sdnotify_ev_watchdog != NULL)
		event_free(sdnotify_ev_watchdog);
	if (sdnotify_ev_status != NULL)
		event_free(sdnotify_ev_status);
	sdnotify_ev_watchdog = sdnotify_ev_status = NULL;
#ifndef HAVE_LIBSYSTEMD
	if (sdnotify_fd != -1)
		close(sdnotify_fd);
	sdnotify_fd = -1;
#endif
	free(sdnotify_path);
	sdnotify_path = NULL;
}

/* WATCHDOG=1: the loop is alive, since this timer ran. */
static void
sdnotify_watchdog_cb(evutil_socket_t fd, short events, void *arg)
{
	sdnotify_send("WATCHDOG=1");
}

/* Sends READY=1 (start-up done, or a reload finished). */
void
sdnotify_ready(void)
{
	char	status[NOTIFY_STATUS_MAX + 1];

	if (sdnotify_path == NULL || sdnotify_state == NOTIFY_STOPPING)
		return;
	sdnotify_status_summary(status, sizeof status);
	sdnotify_send_with_status("READY=1", status);
	sdnotify_state = NOTIFY_READY;
}

/* Sends RELOADING=1 with the time systemd's notify-reload expects. */
void
sdnotify_reloading(void)
{
	char	msg[128];

	if (sdnotify_path == NULL || sdnotify_state == NOTIFY_STOPPING)
		return;
	sdnotify_state = NOTIFY_RELOADING;
	snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
	    sdnotify_now_usec());
	sdnotify_send_with_status(msg, "Reloading the configuration");
}

/* Sends STOPPING=1; from now on the status stays as it is. */
void
sdnotify_stopping(void)
{
	if (sdnotify_path == NULL || sdnotify_state == NOTIFY_STOPPING)
		return;
	sdnotify_state = NOTIFY_STOPPING;
	if (sdnotify_ev_status != NULL)
		evtimer_del(sdnotify_ev_status);
	sdnotify_send_with_status("STOPPING=1", "Stopping");
}

/* Schedules a STATUS= refresh, no sooner than the rate limit allows. */
void
sdnotify_status_update(unsigned clients)
{
	sdnotify_clients = clients;
	struct timeval	tv = { 0, 0 };
	int64_t		wait;

	if (sdnotify_ev_status == NULL || sdnotify_state != NOTIFY_READY ||
	    evtimer_pending(sdnotify_ev_status, NULL))
		return;
	wait = sdnotify_status_last_ms + NOTIFY_STATUS_INTERVAL_MS -
	    (int64_t)(sdnotify_now_usec() / 1000);
	if (wait > 0) {
		tv.tv_sec = (time_t)(wait / 1000);
		tv.tv_usec = (suseconds_t)(wait % 1000 * 1000);
	}
	evtimer_add(sdnotify_ev_status, &tv);
}

/* Sends the summary if it changed since the last one sent. */
static void
sdnotify_status_cb(evutil_socket_t fd, short events, void *arg)
{
	char	status[NOTIFY_STATUS_MAX + 1], msg[NOTIFY_STATUS_MAX + 16];

	if (sdnotify_state != NOTIFY_READY)
		return;
	sdnotify_status_summary(status, sizeof status);
	if (strcmp(status, sdnotify_status_last) == 0)
		return;
	snprintf(msg, sizeof msg, "STATUS=%s", status);
	if (sdnotify_send(msg) == 0)
		sdnotify_status_sent(status);
}

/* Nothing to say before READY=1 (see sdnotify.h). */
void
sdnotify_progress(void)
{
}

/* systemd reads the exit status; the journal has the reason. */
void
sdnotify_failed(int status, const char *why)
{
}

/* The "service" object of daemon.status. */
json_t *
sdnotify_status_json(void)
{
	return json_pack("{s:s?, s:s, s:I, s:I, s:b, s:I, s:I}",
	    "notify_socket", sdnotify_path,
	    "notify", NOTIFY_IMPL,
	    "watchdog_usec", (json_int_t)sdnotify_watchdog_usec,
	    "watchdog_ping_ms", (json_int_t)(sdnotify_watchdog_usec / 2000),
	    "socket_activated", sdactivate_used(),
	    "notifications_sent", (json_int_t)sdnotify_sent,
	    "notification_errors", (json_int_t)sdnotify_errors);
}
