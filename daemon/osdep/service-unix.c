/*
 * service.h on Unix: there is no Service Control Manager. systemd (or any
 * other manager) starts gbrd -f and hears from it through sdnotify.c, so
 * gbrd --service is a usage error here, and the rest does nothing.
 */
#include "gbr-config.h"

#include <stdio.h>

#include "service.h"

/* gbrd --service: says where it exists, and that systemd needs none. */
int
service_run(int (*body)(void))
{
	fprintf(stderr, "gbrd: --service exists only on Windows; under "
	    "systemd run gbrd -f (see gbrd(8), \"SERVICE MANAGER\")\n");
	return 2;
}

/* Never a Windows service. */
int
service_active(void)
{
	return 0;
}

/* A Unix daemon's standard error is already where it should be. */
void
service_log_file(const char *state, int (*open_log)(void))
{
}
