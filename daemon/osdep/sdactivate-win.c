/*
 * sdactivate.h on Windows: no socket activation exists there (the Service
 * Control Manager starts gbrd --service, which creates its own pipe), and
 * a gbrd started by a person or a client decides for itself whether to
 * stay in the foreground.
 */
#include "gbr-config.h"

#include "sdactivate.h"
#include "service.h"

/*
 * The Service Control Manager is the one manager, and it starts gbrd
 * --service, which stays in the foreground under it (service-win.c).
 */
int
sdactivate_managed(void)
{
	return service_active();
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
