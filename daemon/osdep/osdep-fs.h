/*
 * Platform file-system calls the sandbox needs, behind one small interface
 * (STYLE.md habit 8): today openat2(2) with RESOLVE_BENEATH on Linux. The
 * implementation in osdep-fs.c is chosen by configure's HAVE_* results; on
 * a system without it every call fails with ENOSYS and the sandbox walks
 * paths itself.
 */
#ifndef GBRD_OSDEP_FS_H
#define GBRD_OSDEP_FS_H

#include <sys/types.h>

#define OSDEP_NO_SYMLINKS	0x1	/* refuse every symlink, not just escaping ones */

/*
 * Opens path beneath dirfd: the kernel refuses "..", absolute paths and
 * symlinks that would leave dirfd (EXDEV) and /proc magic links (ELOOP).
 * Returns an fd or -1 with errno (ENOSYS where the kernel or the build
 * lacks openat2).
 */
int	osdep_open_beneath(int dirfd, const char *path, int oflags, mode_t mode,
	    int how);
/* True if osdep_open_beneath works here (probed once, then cached). */
int	osdep_have_open_beneath(void);
/*
 * The canonical path of what fd is now (not what it was opened as: a
 * folder renamed since shows its new name), as a new string; NULL when the
 * system cannot tell or the object was deleted. Linux reads it from
 * /proc/self/fd, Windows from the handle (GetFinalPathNameByHandle).
 */
char	*osdep_fd_path(int fd);
/*
 * 1 where a path's spelling does not name one object alone, or where a
 * link may be followed without the walk seeing it: Windows, whose names
 * compare without case and have 8.3 short aliases ("GLEAM~1.TOM" is
 * gleam.toml), and where Wine follows Unix symlinks even when asked not
 * to. There the sandbox checks what every handle it opened really is,
 * from its final path (osdep_fd_path). 0 on Unix, where the walk's
 * O_NOFOLLOW steps (or openat2) say it all.
 */
int	osdep_fs_check_final(void);

#endif
