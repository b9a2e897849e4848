/*
 * Unix platform code: peer credentials (SO_PEERCRED on Linux, getpeereid on
 * the BSDs and macOS), the open-file limit, random bytes, condition
 * variables timed on the monotonic clock, and how the C library's
 * allocator gives memory back.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#ifdef HAVE_GETRANDOM
#include <sys/random.h>
#endif

#if defined(HAVE_MALLOPT) || defined(HAVE_MALLOC_TRIM)
#include <malloc.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYS_SYSCALL_H
#include <sys/syscall.h>
#endif

#include "osdep.h"

/* Gets the peer's credentials; fails closed where unsupported. */
int
osdep_peer_cred(int fd, uid_t *uid, pid_t *pid)
{
#if defined(HAVE_DECL_SO_PEERCRED) && HAVE_DECL_SO_PEERCRED
	struct ucred	cred;
	socklen_t	len = sizeof cred;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    len != sizeof cred)
		return -1;
	*uid = cred.uid;
	*pid = cred.pid;
	return 0;
#elif defined(HAVE_GETPEEREID)
	gid_t	gid;

	if (getpeereid(fd, uid, &gid) != 0)
		return -1;
	*pid = -1;
	return 0;
#else
	(void)fd; (void)uid; (void)pid;
	errno = ENOTSUP;
	return -1;
#endif
}

#define OSDEP_ANCESTRY_MAX	4096	/* ancestors looked at, at most */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD		77	/* Linux 6.5 */
#endif

/* A process's name and parent from /proc/PID/stat. Returns 0 or -1. */
static int
osdep_proc_stat(long pid, char *comm, size_t commsz, long *ppid)
{
	char	path[64], buf[512], *open_p, *close_p;
	ssize_t	n;
	size_t	len;
	int	fd;

	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) state ppid": comm may hold ')' and blanks. */
	if ((open_p = strchr(buf, '(')) == NULL ||
	    (close_p = strrchr(buf, ')')) == NULL || close_p < open_p)
		return -1;
	len = (size_t)(close_p - open_p - 1);
	if (len >= commsz)
		len = commsz - 1;
	memcpy(comm, open_p + 1, len);
	comm[len] = '\0';
	if (sscanf(close_p + 1, " %*c %ld", ppid) != 1)
		return -1;
	return 0;
}

/*
 * The terminal of a process (see osdep.h): its controlling terminal from
 * /proc/PID/stat (readable whoever the process is: clients make
 * themselves non-dumpable, which hides their fds from another user's and
 * even their own uid's gbrd), else what its first fds lead to.
 */
char *
osdep_pid_tty(pid_t pid)
{
	char		 path[64], buf[512], *p;
	ssize_t		 n;
	unsigned long	 tty, major, minor;
	int		 i, fd;

	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		/* After "(comm)": state ppid pgrp session tty_nr. */
		if (n > 0) {
			buf[n] = '\0';
			if ((p = strrchr(buf, ')')) != NULL &&
			    sscanf(p + 1, " %*c %*d %*d %*d %lu", &tty) == 1 &&
			    tty != 0) {
				major = (tty >> 8) & 0xfff;
				minor = (tty & 0xff) | ((tty >> 12) & 0xfff00);
				if (major >= 136 && major <= 143)
					snprintf(buf, sizeof buf, "/dev/pts/%lu",
					    (major - 136) * 256 + minor);
				else if (major == 4 && minor < 64)
					snprintf(buf, sizeof buf, "/dev/tty%lu",
					    minor);
				else
					snprintf(buf, sizeof buf, "tty %lu:%lu",
					    major, minor);
				return strdup(buf);
			}
		}
	}
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "/proc/%ld/fd/%d", (long)pid, i);
		if ((n = readlink(path, buf, sizeof buf - 1)) <= 0)
			continue;
		buf[n] = '\0';
		if (strncmp(buf, "/dev/pts/", 9) == 0 ||
		    strncmp(buf, "/dev/tty", 8) == 0)
			return strdup(buf);
	}
	return NULL;
}

/* Whether the peer belongs to a run (see osdep.h). */
int
osdep_peer_in_run(int fd, pid_t pid)
{
	char		comm[64];
	long		p = pid, ppid;
	int		i, in = 0, pidfd = -1;
	socklen_t	len = sizeof pidfd;

	if (pid <= 0)
		return 0;
	/* A pidfd first: it tells afterwards whether pid is still the peer. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0)
		pidfd = -1;
	for (i = 0; i < OSDEP_ANCESTRY_MAX && p > 1; i++) {
		if (osdep_proc_stat(p, comm, sizeof comm, &ppid) != 0) {
			/* The peer itself gone: nothing can be told of it. */
			in = i == 0;
			break;
		}
		if (strcmp(comm, "gbr-exec") == 0) {
			in = 1;
			break;
		}
		p = ppid;
	}
#if defined(SYS_pidfd_send_signal)
	if (pidfd != -1 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0
	    && errno == ESRCH)
		in = 1;
#endif
	if (pidfd != -1)
		close(pidfd);
	return in;
}

/* Names the peer credential mechanism. */
const char *
osdep_peer_cred_method(void)
{
#if defined(HAVE_DECL_SO_PEERCRED) && HAVE_DECL_SO_PEERCRED
	return "SO_PEERCRED";
#elif defined(HAVE_GETPEEREID)
	return "getpeereid";
#else
	return NULL;
#endif
}

/* Raises RLIMIT_NOFILE's soft limit to its hard limit. */
long
osdep_raise_nofile(void)
{
	struct rlimit	rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}

/* Wall-clock time in milliseconds since the epoch. */
int64_t
osdep_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A condition whose waits are timed on the monotonic clock. */
int
osdep_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t	attr;
	int			r;

	if ((r = pthread_condattr_init(&attr)) != 0)
		return r;
	if ((r = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) == 0)
		r = pthread_cond_init(c, &attr);
	pthread_condattr_destroy(&attr);
	return r;
}

/* Waits until signalled or the monotonic deadline. */
int
osdep_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
    const struct timespec *deadline)
{
	return pthread_cond_timedwait(c, m, deadline);
}

/* Fills buf with random bytes. */
int
osdep_random(void *buf, size_t len)
{
	unsigned char	*p = buf;
	ssize_t		 n;
	int		 fd;

#ifdef HAVE_GETRANDOM
	while (len > 0) {
		if ((n = getrandom(p, len, 0)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (len == 0)
		return 0;
#endif
	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (len > 0) {
		if ((n = read(fd, p, len)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
	return 0;
}

/*
 * Fixes glibc's mmap threshold. Left alone, glibc raises it each time a
 * mapped block is freed (up to 32 MiB), after which blocks of that size
 * come from the heap, where a freed one in the middle is kept: measured,
 * a second wave of 100 slow clients holding 1000 KiB lines each left gbrd
 * at 110 MiB after they left, where the first wave gave its memory back.
 * Setting the threshold turns the dynamic one off, so every block of 128
 * KiB or more is a mapping of its own and goes back when freed.
 */
void
osdep_memory_init(void)
{
#ifdef HAVE_MALLOPT
	(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

/*
 * Gives the free pages of the heap back to the system, where the library
 * can: blocks under the mmap threshold stay in the heap when freed (1000
 * slow clients with 100 KiB lines left 27 MiB behind without a trim). It
 * walks the whole heap, so callers do it once after a wave, not per free.
 */
void
osdep_memory_trim(void)
{
#ifdef HAVE_MALLOC_TRIM
	(void)malloc_trim(0);
#endif
}
