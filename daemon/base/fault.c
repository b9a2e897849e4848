/*
 * Fault injection (see fault.h). The armed sites live in a small table that
 * is refreshed from GBR_FAULT_FILE at most every FAULT_REFRESH_MS; the check
 * itself is one load of a flag when the variable is unset, so the hooks cost
 * nothing in normal use. The file is read with a bounded buffer and only
 * known errno names are accepted, so a stray file cannot do more than what a
 * test could ask for.
 */
#include "gbr-config.h"

#ifdef HAVE_SYS_MMAN_H
#include <sys/mman.h>
#endif
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
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

static pthread_once_t	 fault_probe_once = PTHREAD_ONCE_INIT;
static void		 fault_probe_init(void);

/* Reads GBR_FAULT_FILE's name, and maps the bench probe's file. */
void
fault_init(void)
{
	const char	*v = getenv("GBR_FAULT_FILE");

	pthread_once(&fault_probe_once, fault_probe_init);

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
	now = clock_mono_ms();
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

/* The environment variable behind the test hook name. */
static const char *
fault_hook_value(const char *name, char *var, size_t size)
{
	snprintf(var, size, "GBR_TEST_%s", name);
	return getenv(var);
}

/* Whether GBR_TEST_<name>=1. */
int
fault_hook_on(const char *name)
{
	char		 var[64];
	const char	*v = fault_hook_value(name, var, sizeof var);

	if (v == NULL || strcmp(v, "1") != 0)
		return 0;
	log_warn("test hook %s=1 armed; this is for tests only", var);
	return 1;
}

/* GBR_TEST_<name> as a number in [min, max], else dflt. */
long
fault_hook_long(const char *name, long min, long max, long dflt)
{
	char		 var[64], *end;
	const char	*v = fault_hook_value(name, var, sizeof var);
	long		 n;

	if (v == NULL || *v == '\0')
		return dflt;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < min || n > max) {
		log_warn("%s=%s ignored: expected %ld to %ld", var, v, min, max);
		return dflt;
	}
	log_warn("test hook %s=%ld armed; this is for tests only", var, n);
	return n;
}

/* GBR_TEST_<name> as a string (borrowed from the environment), or NULL. */
const char *
fault_hook_str(const char *name)
{
	char		 var[64];
	const char	*v = fault_hook_value(name, var, sizeof var);

	if (v == NULL || *v == '\0')
		return NULL;
	log_warn("test hook %s=%s armed; this is for tests only", var, v);
	return v;
}

static uint64_t		*fault_probe;
static size_t		 fault_probe_n;

/* Maps the bench probe's file (GBR_BENCH_LOGGED_FILE), if one is named. */
static void
fault_probe_init(void)
{
	const char	*path = getenv("GBR_BENCH_LOGGED_FILE");
#ifdef HAVE_SYS_MMAN_H
	struct stat	 sb;
	void		*map;
	int		 fd;
#endif

	if (path == NULL || *path == '\0')
		return;
#ifndef HAVE_SYS_MMAN_H
	log_warn("GBR_BENCH_LOGGED_FILE=%s ignored: no mmap here", path);
#else
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1 || fstat(fd, &sb) != 0 ||
	    !S_ISREG(sb.st_mode) || sb.st_size < 8) {
		log_warn("GBR_BENCH_LOGGED_FILE=%s ignored: %s", path,
		    fd == -1 ? strerror(errno) : "not a regular file of 8+ bytes");
		if (fd != -1)
			close(fd);
		return;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		log_warn("GBR_BENCH_LOGGED_FILE=%s ignored: mmap: %s", path,
		    strerror(errno));
		return;
	}
	fault_probe_n = (size_t)sb.st_size / sizeof *fault_probe;
	fault_probe = map;
	log_warn("bench probe: logged times go to %s (GBR_BENCH_LOGGED_FILE)",
	    path);
#endif
}

/* Slot n of the bench probe gets the time, if there is one. */
void
fault_probe_mark(uint64_t slot)
{
	pthread_once(&fault_probe_once, fault_probe_init);
	if (fault_probe == NULL || slot >= fault_probe_n)
		return;
	__atomic_store_n(&fault_probe[slot], clock_mono_ns(), __ATOMIC_RELAXED);
}
