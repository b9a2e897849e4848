/*
 * sdnotify.h on Windows. There is no systemd: the service manager there is
 * the Service Control Manager, whose states gbrd reports from
 * service-win.c when it runs as a service (gbrd --service). Started any
 * other way, every call here is a cheap no-op, as on Unix with no
 * NOTIFY_SOCKET.
 */
#include "gbr-config.h"

#include <jansson.h>

#include "sdnotify.h"

/* Nothing to read from the environment: there is no notify socket. */
void
sdnotify_init(struct event_base *base)
{
}

void
sdnotify_close(void)
{
}

void
sdnotify_ready(void)
{
}

void
sdnotify_reloading(void)
{
}

void
sdnotify_stopping(void)
{
}

void
sdnotify_status_update(unsigned clients)
{
}

void
sdnotify_progress(void)
{
}

void
sdnotify_failed(int status, const char *why)
{
}

/* What daemon.status shows of the service manager: none here. */
json_t *
sdnotify_status_json(void)
{
	return json_pack("{s:n, s:s, s:b}", "notify_socket", "notify", "none",
	    "socket_activated", 0);
}
