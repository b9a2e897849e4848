/*
 * sdactivate.h on Windows: no socket activation exists there (the Service
 * Control Manager starts gbrd --service, which creates its own pipe), and
 * a gbrd started by a person or a client decides for itself whether to
 * stay in the foreground.
 */
#include "gbr-config.h"

#include "sdactivate.h"

/* Only the service entry point runs under a manager; it says so itself. */
int
sdactivate_managed(void)
{
	return 0;
}

/* No listening socket is ever handed over. */
int
sdactivate_listen_fd(int *fd, char **path, char **cause)
{
	return 0;
}

int
sdactivate_used(void)
{
	return 0;
}
