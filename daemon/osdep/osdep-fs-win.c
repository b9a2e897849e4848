/*
 * osdep-fs.h on Windows. NtCreateFile relative to a directory handle
 * follows links in every component but the last, so a multi-component
 * open beneath a folder cannot be trusted to stay beneath it:
 * osdep_open_beneath answers ENOSYS and the sandbox walks the path one
 * component at a time (compat's openat with O_NOFOLLOW refuses each
 * reparse point). An fd's path comes from its handle.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "osdep-fs.h"
#include "xmalloc.h"

/* No single call opens beneath a folder safely here: walk instead. */
int
osdep_open_beneath(int dirfd, const char *path, int oflags, mode_t mode,
    int how)
{
	errno = ENOSYS;
	return -1;
}

int
osdep_have_open_beneath(void)
{
	return 0;
}

/* The handle's final path, "C:/dir/name" (UTF-8, forward slashes). */
char *
osdep_fd_path(int fd)
{
	return compat_fd_path(fd);
}

/* Names alias here (case, 8.3), and Wine follows links unseen. */
int
osdep_fs_check_final(void)
{
	return 1;
}
