/*
 * What gbr's C code takes from POSIX and Windows' C runtime (mingw-w64's
 * msvcrt/ucrt) does not give, declared here and implemented over Win32 and
 * NT handles in compat/compat-win-*.c. On a Windows build (configure
 * --host=x86_64-w64-mingw32) every file is compiled with
 * "-include compat/compat-win.h", so the same sources build on both
 * systems without an #ifdef in their logic (STYLE.md habit 8); no other
 * build sees this file.
 *
 * The rules the implementation keeps, because the sandbox relies on them:
 * - Paths are UTF-8; both '/' and '\' separate; they are converted to
 *   UTF-16 and opened with the wide (W) calls, never the ANSI code page.
 * - A file descriptor is a C runtime fd (_open_osfhandle) wrapping a Win32
 *   HANDLE, also for directories (opened with FILE_FLAG_BACKUP_SEMANTICS),
 *   so that openat() and friends work relative to a directory fd exactly
 *   as on Linux: the kernel (NtCreateFile with RootDirectory) resolves the
 *   name beneath the directory's handle.
 * - Every fd is binary (no CRLF translation) and not inherited by children
 *   unless asked for.
 * - Files are opened with FILE_SHARE_READ | FILE_SHARE_WRITE |
 *   FILE_SHARE_DELETE, so that an open file can be renamed over or deleted
 *   as on POSIX.
 * - O_NOFOLLOW (and AT_SYMLINK_NOFOLLOW) open a reparse point itself
 *   (symbolic link, junction, mount point) instead of its target; opening
 *   one with O_NOFOLLOW for data fails with ELOOP, as POSIX does for a
 *   symlink, and fstatat(AT_SYMLINK_NOFOLLOW) reports it as S_IFLNK.
 * - struct stat is gbr's own (the C runtime's has a 16-bit st_ino):
 *   st_dev is the volume serial number and st_ino the 64-bit file index,
 *   so (st_dev, st_ino) names one file as on Unix; st_nlink is the link
 *   count; st_uid is COMPAT_UID_SELF when the file's owner is the calling
 *   user (or, for an elevated process, the Administrators group that owns
 *   what it creates) and COMPAT_UID_OTHER otherwise; getuid() and
 *   geteuid() return COMPAT_UID_SELF. So "owned by us" checks keep their
 *   meaning.
 * - renameat() replaces an existing target atomically
 *   (MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH semantics), with
 *   POSIX semantics where the system has them (Windows 10 1607 and later:
 *   an open target is replaced too). Where it has not (Wine 8, FAT, older
 *   Windows), a target that is open is first renamed aside and deleted
 *   after the replace: a reader in between may see ENOENT. fsync()
 *   is FlushFileBuffers, and on a directory it is a successful no-op (NTFS
 *   journals the metadata a rename changes).
 * - unlinkat() frees the name at once, as POSIX does: a POSIX-semantics
 *   delete where the system has one; elsewhere a file is first renamed
 *   aside in its folder (".~gbr-PID-N", gone when its last handle
 *   closes). Both renameat() and unlinkat() act on the link, never on
 *   what it points to.
 * - "." components are dropped; a ".." component is resolved as a POSIX
 *   kernel does (physically, after the links before it), by opening the
 *   parent of what the prefix resolved to; NtCreateFile itself refuses
 *   "." and "..". So ".." beneath a directory fd can leave it, as on
 *   POSIX: gbr's sandbox never passes "..".
 * - A ':' after the drive (an NTFS alternate data stream) is refused with
 *   EINVAL: POSIX has no streams, and a name checked as one file must not
 *   open another's hidden stream. So is "C:x" (relative to drive C's own
 *   current folder). Names are case-insensitive, as NTFS folders are by
 *   default.
 * - flock() locks one byte far beyond any real data, so that the lock is
 *   advisory as on POSIX: Windows byte-range locks are mandatory, and a
 *   whole-file lock would stop every other reader.
 * - The standard streams (fd 0, 1, 2) and _fmode are binary from the start
 *   of every program (a constructor in libgbrcompat.a; the link pulls it
 *   in with -u compat_win_init).
 * - Errors set errno to the POSIX value (ENOENT, EEXIST, EACCES, ENOTDIR,
 *   EISDIR, ELOOP, EXDEV, ENOTEMPTY, EBUSY, ENAMETOOLONG, ENOSPC, EINVAL).
 */
#ifndef GBR_COMPAT_WIN_H
#define GBR_COMPAT_WIN_H

/*
 * The build's switches before any system header, since this file comes
 * first: _GNU_SOURCE turns on mingw-w64's C99 printf (%zu, %lld), and
 * _POSIX_THREAD_SAFE_FUNCTIONS its localtime_r. (Every definition in it is
 * repeated identically when a source includes it again: no warning.)
 */
#ifdef HAVE_CONFIG_H
#include "gbr-config.h"
#endif
/* 64-bit off_t (lseek, ftruncate, pread, pwrite) before any header. */
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif

/*
 * mingw-w64's own printf family, which knows C99's %zu, %jd and %lld, and
 * format checks by the same rules: gbr's attributes say __printf__, which
 * is the C runtime's (Microsoft's) archetype on this target unless mapped.
 */
#define __USE_MINGW_ANSI_STDIO	1
#define __printf__		__gnu_printf__

/* Windows 10 or later: the APIs below are all there. */
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0A00
#endif
#ifndef WINVER
#define WINVER 0x0A00
#endif
/* winsock2.h must come before windows.h, which would pull in winsock 1. */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* windows.h's names that collide with gbr's own identifiers. */
#undef ERROR
#undef DELETE
#undef IN
#undef OUT
#undef OPTIONAL
#undef interface
#undef small

/*
 * Windows has no SIGPIPE: a write to a pipe or socket whose reader is gone
 * fails with an error instead. signal(SIGPIPE, SIG_IGN) then asks the C
 * runtime for a signal it does not know, which it refuses, harmlessly.
 */
#ifndef SIGPIPE
#define SIGPIPE		13
#endif

/* A name's longest, in bytes, as on Linux (Windows allows 255 UTF-16 units). */
#ifndef NAME_MAX
#define NAME_MAX	255
#endif

/* Identities: see the top of this file. */
typedef unsigned int	uid_t;
typedef unsigned int	gid_t;
#define COMPAT_UID_SELF		((uid_t)1000)
#define COMPAT_UID_OTHER	((uid_t)65534)
uid_t	getuid(void);
uid_t	geteuid(void);

/* The open(2) flags the C runtime lacks; values clear of its own. */
#ifndef O_CLOEXEC
#define O_CLOEXEC	_O_NOINHERIT
#endif
#define O_NOFOLLOW	0x01000000
#define O_DIRECTORY	0x02000000
#define O_PATH		0x04000000	/* attributes only, no data access */
#define O_NONBLOCK	0		/* files never block on Windows */
#define O_NOCTTY	0

#define AT_FDCWD		(-100)
#define AT_SYMLINK_NOFOLLOW	0x100
#define AT_REMOVEDIR		0x200

/* errno values POSIX has and the C runtime does not. */
#ifndef ELOOP
#define ELOOP		114
#endif
#ifndef EDQUOT
#define EDQUOT		122
#endif
#ifndef ESHUTDOWN
#define ESHUTDOWN	108
#endif
#ifndef ENOTSUP
#define ENOTSUP		129
#endif
#ifndef EOPNOTSUPP
#define EOPNOTSUPP	130
#endif

/* gbr's struct stat (see the top of this file). */
#undef stat	/* mingw-w64 maps them to _stat64 for 64-bit off_t */
#undef fstat
#define stat	compat_stat
#define fstat	compat_fstat
struct compat_stat {
	uint64_t	st_dev;
	uint64_t	st_ino;
	unsigned	st_mode;
	unsigned	st_nlink;
	uid_t		st_uid;
	gid_t		st_gid;
	int64_t		st_size;
	int64_t		st_blocks;	/* 512-byte units allocated */
	struct timespec	st_atim;
	struct timespec	st_mtim;
	struct timespec	st_ctim;
};
int	compat_stat(const char *, struct compat_stat *);
int	compat_fstat(int, struct compat_stat *);
int	lstat(const char *, struct compat_stat *);
int	fstatat(int, const char *, struct compat_stat *, int);

#ifndef S_IFLNK
#define S_IFLNK		0120000
#endif
#ifndef S_IFSOCK
#define S_IFSOCK	0140000
#endif
#ifndef S_ISLNK
#define S_ISLNK(m)	(((m) & S_IFMT) == S_IFLNK)
#endif
#ifndef S_ISSOCK
#define S_ISSOCK(m)	(((m) & S_IFMT) == S_IFSOCK)
#endif

/* Files, by UTF-8 path or relative to a directory fd. */
#define open(...)	compat_open(__VA_ARGS__)
int	compat_open(const char *, int, ...);
int	openat(int, const char *, int, ...);
int	unlinkat(int, const char *, int);
int	renameat(int, const char *, int, const char *);
int	mkdirat(int, const char *, mode_t);
ssize_t	readlinkat(int, const char *, char *, size_t);
ssize_t	readlink(const char *, char *, size_t);
/* A hard link (CreateHardLinkW). */
int	link(const char *, const char *);
/*
 * A symbolic link (CreateSymbolicLinkW, unprivileged where Developer Mode
 * allows it); fails with EPERM without the privilege, and with ENOTSUP
 * where the call claims success and makes nothing (Wine 8).
 */
int	symlink(const char *, const char *);
#define mkdir(p, m)	compat_mkdir(p, m)
int	compat_mkdir(const char *, mode_t);
#define unlink(p)	compat_unlink(p)
int	compat_unlink(const char *);
#define rmdir(p)	compat_rmdir(p)
int	compat_rmdir(const char *);
/* remove(3) as POSIX has it: a file, or an empty folder (the CRT's: files). */
#define remove(p)	compat_remove(p)
int	compat_remove(const char *);
#define rename(a, b)	compat_rename(a, b)
int	compat_rename(const char *, const char *);
#define access(p, m)	compat_access(p, m)
int	compat_access(const char *, int);
#define chdir(p)	compat_chdir(p)
int	compat_chdir(const char *);
#define getcwd(b, n)	compat_getcwd(b, n)
char	*compat_getcwd(char *, size_t);
/* Resolves links and returns "C:/dir/name" (forward slashes, no \\?\). */
char	*realpath(const char *, char *);
/*
 * Not POSIX: the final path of what fd is now (GetFinalPathNameByHandleW),
 * in realpath's form; a new string, or NULL with errno.
 */
char	*compat_fd_path(int);
#define fopen(p, m)	compat_fopen(p, m)
FILE	*compat_fopen(const char *, const char *);
char	*mkdtemp(char *);
/*
 * mkstemps(3) as the BSDs and glibc have it: XXXXXX before a suffix of
 * suffixlen bytes, a new file (O_EXCL) opened for reading and writing.
 */
int	 mkstemps(char *, int);
#ifndef X_OK
#define X_OK	0	/* Windows has no execute bit: existence */
#endif

int	fchmodat(int, const char *, mode_t, int);
int	symlinkat(const char *, int, const char *);

/*
 * A stream into memory (POSIX 2008): *buf and *len are set, the buffer
 * NUL-terminated, at every fflush and fclose, as POSIX says. fclose and
 * fflush are wrapped to do that for such streams.
 */
FILE	*open_memstream(char **, size_t *);
#define fclose(f)	compat_fclose(f)
int	 compat_fclose(FILE *);
#define fflush(f)	compat_fflush(f)
int	 compat_fflush(FILE *);

ssize_t	pread(int, void *, size_t, off_t);
ssize_t	pwrite(int, const void *, size_t, off_t);
int	fsync(int);
int	fdatasync(int);
int	fchmod(int, mode_t);

/*
 * Scatter/gather buffers (<sys/uio.h>, which mingw-w64 lacks): the
 * transport's writev is WSASend over them (platform/transport-win.c).
 * The layout is libevent's struct evbuffer_iovec on Windows.
 */
struct iovec {
	void	*iov_base;
	size_t	 iov_len;
};

/* Whole-file advisory locks, as flock(2) (LockFileEx on the handle). */
#define LOCK_SH	1
#define LOCK_EX	2
#define LOCK_NB	4
#define LOCK_UN	8
int	flock(int, int);

/* Directories, read through the directory's handle. */
#define DIR		compat_dir
#define dirent		compat_dirent
#define opendir(p)	compat_opendir(p)
#define fdopendir(fd)	compat_fdopendir(fd)
#define readdir(d)	compat_readdir(d)
#define closedir(d)	compat_closedir(d)
#define rewinddir(d)	compat_rewinddir(d)
#define dirfd(d)	compat_dirfd(d)
#define DT_UNKNOWN	0
#define DT_DIR		4
#define DT_REG		8
#define DT_LNK		10
struct compat_dirent {
	uint64_t	d_ino;
	unsigned char	d_type;
	char		d_name[1024];	/* UTF-8 of up to 255 UTF-16 units */
};
typedef struct compat_dir compat_dir;
compat_dir		*compat_opendir(const char *);
compat_dir		*compat_fdopendir(int);	/* takes the fd */
struct compat_dirent	*compat_readdir(compat_dir *);
int			 compat_closedir(compat_dir *);
void			 compat_rewinddir(compat_dir *);
int			 compat_dirfd(compat_dir *);

/*
 * nftw(3) over the functions above, so that the callback gets gbr's
 * struct stat and UTF-8 names (mingw-w64's walks with the C runtime's
 * stat and ANSI names). It honours FTW_PHYS, FTW_DEPTH and FTW_MOUNT;
 * FTW_CHDIR and FTW_ACTIONRETVAL are not there (EINVAL).
 */
#include <ftw.h>
#define nftw	compat_nftw
int	compat_nftw(const char *, int (*)(const char *,
	    const struct compat_stat *, int, struct FTW *), int, int);

/* Strings and memory. */
void	*memmem(const void *, size_t, const void *, size_t);
char	*strcasestr(const char *, const char *);
void	 explicit_bzero(void *, size_t);
char	*strndup(const char *, size_t);
size_t	 strnlen(const char *, size_t);

/* The environment in UTF-8 (the C runtime's is in the ANSI code page). */
#define getenv(n)	compat_getenv(n)
char	*compat_getenv(const char *);
int	 setenv(const char *, const char *, int);
int	 unsetenv(const char *);

#endif
