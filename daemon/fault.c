/*
 * Fault injection (see fault.h). The armed sites live in a small table that
 * is refreshed from GBR_FAULT_FILE at most every FAULT_REFRESH_MS; the check
 * itself is one load of a flag when the variable is unset, so the hooks cost
 * nothing in normal use. The file is read with a bounded buffer and only
 * known errno names are accepted, so a stray file cannot do more than what a
 * test could ask for.
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "xmalloc.h"

#define FAULT_REFRESH_MS	20
#define FAULT_MAX_SITES		16
#define FAULT_FILE_MAX		4096

static const struct {
	const char	*name;
	int		 value;
} fault_errnos[] = {
	{ "ENOSPC", ENOSPC },
	{ "EIO", EIO },
	{ "EFBIG", EFBIG },
	{ "EDQUOT", EDQUOT },
	{ "EROFS", EROFS },
};

static pthread_mutex_t	 fault_mtx = PTHREAD_MUTEX_INITIALIZER;
static char		*fault_path;
static long long	 fault_read_ms = -1000000;
static struct {
	char	site[48];
	int	err;
}			 fault_sites[FAULT_MAX_SITES];
static int		 fault_nsites;

/* Monotonic milliseconds. */
static long long
fault_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads GBR_FAULT_FILE's name. */
void
fault_init(void)
{
	const char	*v = getenv("GBR_FAULT_FILE");

	if (v == NULL || *v == '\0' || fault_path != NULL)
		return;
	fault_path = xstrdup(v);
	log_warn("fault injection armed from %s (GBR_FAULT_FILE); this is "
	    "for tests only", fault_path);
}

/* Re-reads the file into the table; a missing file disarms every site. */
static void
fault_refresh(void)
{
	char	 buf[FAULT_FILE_MAX + 1], site[48], name[16], *line, *next;
	ssize_t	 n;
	size_t	 i;
	int	 fd;

	fault_nsites = 0;
	if ((fd = open(fault_path, O_RDONLY | O_CLOEXEC)) == -1)
		return;
	n = read(fd, buf, FAULT_FILE_MAX);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (line = buf; line != NULL && fault_nsites < FAULT_MAX_SITES;
	    line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (sscanf(line, "%47s %15s", site, name) != 2)
			continue;
		for (i = 0; i < sizeof fault_errnos / sizeof fault_errnos[0]; i++) {
			if (strcmp(fault_errnos[i].name, name) == 0)
				break;
		}
		if (i == sizeof fault_errnos / sizeof fault_errnos[0])
			continue;
		snprintf(fault_sites[fault_nsites].site,
		    sizeof fault_sites[fault_nsites].site, "%s", site);
		fault_sites[fault_nsites].err = fault_errnos[i].value;
		fault_nsites++;
	}
}

/* Returns the errno armed for site, or 0. */
int
fault_inject(const char *site)
{
	long long	now;
	int		i, err = 0;

	if (fault_path == NULL)
		return 0;
	pthread_mutex_lock(&fault_mtx);
	now = fault_now_ms();
	if (now - fault_read_ms >= FAULT_REFRESH_MS) {
		fault_refresh();
		fault_read_ms = now;
	}
	for (i = 0; i < fault_nsites; i++) {
		if (strcmp(fault_sites[i].site, site) == 0) {
			err = fault_sites[i].err;
			break;
		}
	}
	pthread_mutex_unlock(&fault_mtx);
	return err;
}
