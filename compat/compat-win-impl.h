/*
 * What the compat/compat-win-*.c files share and nothing else sees: the NT
 * declarations they need, the UTF-8 <-> UTF-16 conversions, the one
 * table from Win32 errors and NTSTATUS values to errno, and the opener
 * that resolves a path beneath a directory handle. The files that include
 * this are compiled without the forced "-include compat-win.h" (their own
 * CPPFLAGS in Makefile.am), because ntstatus.h must be reached with
 * WIN32_NO_STATUS around windows.h, which that header cannot do for
 * everyone.
 */
#ifndef GBR_COMPAT_WIN_IMPL_H
#define GBR_COMPAT_WIN_IMPL_H

#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0A00
#endif
/* rand_s, for mkdtemp. */
#define _CRT_RAND_S
#define WIN32_NO_STATUS
#include <winsock2.h>
#include <windows.h>
#undef WIN32_NO_STATUS
#include <ntstatus.h>
#include <winternl.h>
#include <wchar.h>

#include "compat-win.h"

/* The DELETE access right: compat-win.h undefines windows.h's name. */
#define CW_DELETE	0x00010000UL

/* The NT information classes mingw-w64's winternl.h does not name. */
#define CW_FileRenameInformation		10
#define CW_FileDispositionInformation		13
#define CW_FileEndOfFileInformation		20
#define CW_FileAttributeTagInformation		35
#define CW_FileDispositionInformationEx		64
#define CW_FileRenameInformationEx		65

/* Flags of the Ex classes (winbase.h hides them behind a version test). */
#define CW_RENAME_REPLACE_IF_EXISTS		0x00000001
#define CW_RENAME_POSIX_SEMANTICS		0x00000002
#define CW_RENAME_IGNORE_READONLY		0x00000040
#define CW_DISPOSITION_DELETE			0x00000001
#define CW_DISPOSITION_POSIX_SEMANTICS		0x00000002
#define CW_DISPOSITION_IGNORE_READONLY		0x00000010

/* The reparse tags that are links (a symlink, a junction, a WSL link). */
#define CW_TAG_MOUNT_POINT	0xA0000003UL
#define CW_TAG_SYMLINK		0xA000000CUL
#define CW_TAG_LX_SYMLINK	0xA000001DUL

/* The longest name NT takes, in UTF-16 units (UNICODE_STRING's limit). */
#define CW_NAME_MAX	32767

struct cw_tag_info {
	ULONG	attributes;
	ULONG	tag;
};

/* compat-win-misc.c: errors. Each sets errno and returns -1. */
int	 cw_err_win32(DWORD);
int	 cw_err_nt(NTSTATUS);
int	 cw_errno_win32(DWORD);
int	 cw_errno_nt(NTSTATUS);

/*
 * compat-win-misc.c: UTF-8 <-> UTF-16. Lone surrogates round-trip (as
 * WTF-8), so that every NTFS name read can be opened again.
 * cw_wide returns a new NUL-terminated string of at most max units (its
 * length in *lenp), with '/' turned into '\' when slashes is set; NULL
 * with errno EILSEQ, ENAMETOOLONG or ENOMEM.
 */
wchar_t	*cw_wide(const char *, size_t max, int slashes, size_t *lenp);
/*
 * Writes the n units of w as UTF-8 into buf (size bytes, NUL-terminated
 * when it fits) and returns the length it needs without the NUL.
 */
size_t	 cw_utf8(const wchar_t *, size_t n, char *buf, size_t size);
/* The same into a new string, or NULL (ENOMEM). */
char	*cw_utf8_new(const wchar_t *, size_t n);

/* compat-win-misc.c: 1 if the handle's owner counts as us (the header). */
int	 cw_owner_is_self(HANDLE);

/* compat-win-open.c: handles by path. */
/* The HANDLE under a C runtime fd, or INVALID_HANDLE_VALUE (EBADF). */
HANDLE	 cw_fd_handle(int);
/*
 * Opens path relative to dirfd (the header's rules: AT_FDCWD, absolute
 * paths, "." and "..", ':' refused, a trailing '/' wants a directory)
 * with NtCreateFile and the sharing every open uses. Returns 0 and the
 * handle in *hp, or -1 with errno.
 */
int	 cw_open_handle(int dirfd, const char *, ACCESS_MASK, ULONG disposition,
	     ULONG options, ULONG attributes, HANDLE *hp);
/*
 * NtCreateFile of len units of name under root (NULL: name is a full NT
 * path), shared for reading, writing and deletion, synchronous, not
 * inherited.
 */
NTSTATUS cw_nt_create(HANDLE root, const wchar_t *name, size_t len,
	     ACCESS_MASK, ULONG disposition, ULONG options, ULONG attributes,
	     HANDLE *);
/* Opens the file h names again with other access (an empty relative name). */
NTSTATUS cw_reopen(HANDLE, ACCESS_MASK, ULONG options, HANDLE *);

/*
 * Where a new name goes, for renameat: a directory handle (or NULL) and a
 * name relative to it (or a full NT path). The root is closed by
 * cw_target_release when owned.
 */
struct cw_target {
	HANDLE		 root;
	int		 owned;
	wchar_t		*name;
	size_t		 len;
};
int	 cw_target(int dirfd, const char *, struct cw_target *);
void	 cw_target_release(struct cw_target *);

/* compat-win-stat.c: 1 if a reparse tag is a link. */
int	 cw_is_link_tag(ULONG);
/* The handle's attributes and reparse tag; -1 with errno on failure. */
int	 cw_tag_info(HANDLE, struct cw_tag_info *);
/*
 * A link's target as readlinkat gives it ('/' separators, UTF-8) into buf;
 * returns its whole length, or -1 (EINVAL if h is not a link).
 */
ssize_t	 cw_link_target(HANDLE, char *, size_t);

#endif
