/*
 * osdep-fs.h on Unix: openat2(2) through syscall(2) where <linux/openat2.h>
 * is (glibc has no wrapper), else ENOSYS; an fd's path from /proc.
 * The probe treats ENOSYS, EPERM (a seccomp filter that predates openat2)
 * and E2BIG/EINVAL (a kernel that does not know this struct) as "absent".
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#include "osdep-fs.h"
#include "xmalloc.h"

#if defined(HAVE_LINUX_OPENAT2_H) && defined(SYS_openat2)

/* openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (and NO_SYMLINKS). */
int
osdep_open_beneath(int dirfd, const char *path, int oflags, mode_t mode,
    int how)
{
	struct open_how	oh;
	long		fd;

	memset(&oh, 0, sizeof oh);
	oh.flags = (unsigned long long)(unsigned)oflags;
	if (oflags & (O_CREAT | O_TMPFILE))
		oh.mode = mode;
	oh.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	if (how & OSDEP_NO_SYMLINKS)
		oh.resolve |= RESOLVE_NO_SYMLINKS;
	do
		fd = syscall(SYS_openat2, dirfd, path, &oh, sizeof oh);
	while (fd == -1 && errno == EINTR);
	return (int)fd;
}

/* Probes openat2 once by opening "/" beneath itself. */
int
osdep_have_open_beneath(void)
{
	static int	have = -1;
	int		fd, root;

	if (have != -1)
		return have;
	have = 0;
	if ((root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return have;
	fd = osdep_open_beneath(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    0, 0);
	if (fd != -1) {
		have = 1;
		close(fd);
	}
	close(root);
	return have;
}

#else

/* No openat2 in this build: the caller walks the path itself. */
int
osdep_open_beneath(int dirfd, const char *path, int oflags, mode_t mode,
    int how)
{
	(void)dirfd, (void)path, (void)oflags, (void)mode, (void)how;
	errno = ENOSYS;
	return -1;
}

/* No openat2 in this build. */
int
osdep_have_open_beneath(void)
{
	return 0;
}

#endif

/*
 * The kernel's name for the fd in /proc is already canonical, so one
 * readlink gives it (realpath of the /proc link would check every
 * component of it again, a dozen system calls). A folder since deleted
 * ends in " (deleted)": then nobody can tell.
 */
char *
osdep_fd_path(int fd)
{
	static const char	 gone[] = " (deleted)";
	char			 proc[64], buf[PATH_MAX];
	ssize_t			 n;

	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	n = readlink(proc, buf, sizeof buf);
	if (n <= 0 || (size_t)n >= sizeof buf || buf[0] != '/' ||
	    ((size_t)n >= sizeof gone - 1 &&
	    memcmp(buf + n - (sizeof gone - 1), gone, sizeof gone - 1) == 0))
		return NULL;
	return xstrndup(buf, (size_t)n);
}

/* Unix names one object by one spelling, and O_NOFOLLOW is kept. */
int
osdep_fs_check_final(void)
{
	return 0;
}
