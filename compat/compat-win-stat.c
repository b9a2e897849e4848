/*
 * What a file is, read from its handle: gbr's struct stat (fstat, stat,
 * lstat, fstatat), and links (readlinkat, readlink, which reparse points
 * count as links). Everything is asked of an open handle, never of a
 * name twice, so that what is reported is one file's facts.
 */
#include "compat-win-impl.h"

#include <winioctl.h>

/* FILETIME ticks (100 ns since 1601) between 1601 and 1970. */
#define CW_EPOCH_TICKS	116444736000000000LL

/* The largest reparse data (MAXIMUM_REPARSE_DATA_BUFFER_SIZE). */
#define CW_REPARSE_MAX	(16 * 1024)

/* 1 if a reparse tag is a link: a symlink, a junction, a WSL link. */
int
cw_is_link_tag(ULONG tag)
{
	return tag == CW_TAG_SYMLINK || tag == CW_TAG_MOUNT_POINT ||
	    tag == CW_TAG_LX_SYMLINK;
}

/* The handle's attributes and reparse tag. */
int
cw_tag_info(HANDLE h, struct cw_tag_info *ti)
{
	FILE_ATTRIBUTE_TAG_INFO	info;

	if (!GetFileInformationByHandleEx(h, FileAttributeTagInfo, &info,
	    sizeof info))
		return cw_err_win32(GetLastError());
	ti->attributes = info.FileAttributes;
	ti->tag = (info.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) ?
	    info.ReparseTag : 0;
	return 0;
}

/*
 * The target in reparse data (got bytes) as a new UTF-8 string with '/',
 * or NULL with EINVAL. A symlink or junction has a print name (what
 * mklink was given) and a substitute name (\??\C:\x); the print name is
 * what POSIX's readlink would show, the substitute one is the fallback.
 */
static char *
cw_reparse_target(const unsigned char *buf, DWORD got)
{
	ULONG		 tag;
	USHORT		 dlen, off[4];
	size_t		 base, o, n;
	wchar_t		*name;
	char		*s, *c;

	if (got < 8)
		goto invalid;
	memcpy(&tag, buf, sizeof tag);
	memcpy(&dlen, buf + 4, sizeof dlen);
	if ((size_t)dlen + 8 > got)
		goto invalid;
	if (tag == CW_TAG_LX_SYMLINK) {
		/* A version (4 bytes), then the target in UTF-8. */
		if (dlen < 4)
			goto invalid;
		return strndup((const char *)buf + 12, dlen - 4);
	}
	if (tag == CW_TAG_SYMLINK)
		base = 20;	/* the four offsets, then a ULONG of flags */
	else if (tag == CW_TAG_MOUNT_POINT)
		base = 16;
	else
		goto invalid;
	if ((size_t)dlen + 8 < base)
		goto invalid;
	memcpy(off, buf + 8, sizeof off);
	/* off: substitute offset and length, print offset and length. */
	if (off[3] != 0) {
		o = off[2];
		n = off[3];
	} else {
		o = off[0];
		n = off[1];
	}
	if ((o & 1) || (n & 1) || base + o + n > (size_t)dlen + 8)
		goto invalid;
	n /= sizeof *name;
	/* A copy: the bytes need not be aligned for wchar_t. */
	if ((name = malloc((n + 1) * sizeof *name)) == NULL)
		return NULL;
	memcpy(name, buf + base + o, n * sizeof *name);
	name[n] = L'\0';
	o = 0;
	if (off[3] == 0 && wcsncmp(name, L"\\??\\UNC\\", 8) == 0) {
		o = 6;
		name[6] = L'\\';
	} else if (off[3] == 0 && wcsncmp(name, L"\\??\\", 4) == 0)
		o = 4;
	s = cw_utf8_new(name + o, n - o);
	free(name);
	if (s == NULL)
		return NULL;
	for (c = s; *c != '\0'; c++) {
		if (*c == '\\')
			*c = '/';
	}
	return s;

invalid:
	errno = EINVAL;
	return NULL;
}

/* A link's target into buf (see compat-win-impl.h). */
ssize_t
cw_link_target(HANDLE h, char *buf, size_t size)
{
	unsigned char	*rb;
	DWORD		 got;
	char		*s;
	size_t		 len;

	if ((rb = malloc(CW_REPARSE_MAX)) == NULL)
		return -1;
	if (!DeviceIoControl(h, FSCTL_GET_REPARSE_POINT, NULL, 0, rb,
	    CW_REPARSE_MAX, &got, NULL)) {
		cw_err_win32(GetLastError());
		free(rb);
		return -1;
	}
	s = cw_reparse_target(rb, got);
	free(rb);
	if (s == NULL)
		return -1;
	len = strlen(s);
	if (buf != NULL)
		memcpy(buf, s, len < size ? len : size);
	free(s);
	return (ssize_t)len;
}

/* A FILETIME count as a struct timespec since 1970. */
static void
cw_timespec(int64_t ticks, struct timespec *ts)
{
	int64_t	v = ticks - CW_EPOCH_TICKS, r;

	r = v % 10000000;
	ts->tv_sec = (time_t)(v / 10000000);
	if (r < 0) {
		r += 10000000;
		ts->tv_sec--;
	}
	ts->tv_nsec = (long)(r * 100);
}

/* The two halves of a FILETIME as one count. */
static int64_t
cw_ticks(FILETIME ft)
{
	return (int64_t)(((uint64_t)ft.dwHighDateTime << 32) |
	    ft.dwLowDateTime);
}

/* Fills st from a handle on a file (see the top of compat-win.h). */
static int
cw_stat_disk(HANDLE h, struct compat_stat *st)
{
	BY_HANDLE_FILE_INFORMATION	bi;
	FILE_BASIC_INFO			basic;
	FILE_STANDARD_INFO		std;
	struct cw_tag_info		ti;
	ssize_t				n;

	memset(st, 0, sizeof *st);
	if (!GetFileInformationByHandle(h, &bi))
		return cw_err_win32(GetLastError());
	st->st_dev = bi.dwVolumeSerialNumber;
	st->st_ino = ((uint64_t)bi.nFileIndexHigh << 32) | bi.nFileIndexLow;
	st->st_nlink = bi.nNumberOfLinks;
	st->st_size = (int64_t)(((uint64_t)bi.nFileSizeHigh << 32) |
	    bi.nFileSizeLow);
	cw_timespec(cw_ticks(bi.ftLastAccessTime), &st->st_atim);
	cw_timespec(cw_ticks(bi.ftLastWriteTime), &st->st_mtim);
	/* The change time is NTFS's own; Win32's first call lacks it. */
	if (GetFileInformationByHandleEx(h, FileBasicInfo, &basic,
	    sizeof basic))
		cw_timespec(basic.ChangeTime.QuadPart, &st->st_ctim);
	else
		st->st_ctim = st->st_mtim;
	if (GetFileInformationByHandleEx(h, FileStandardInfo, &std, sizeof std))
		st->st_blocks = std.AllocationSize.QuadPart / 512;
	else
		st->st_blocks = (st->st_size + 511) / 512;

	/*
	 * A handle to a link itself exists only when it was opened with
	 * FILE_OPEN_REPARSE_POINT (AT_SYMLINK_NOFOLLOW, O_NOFOLLOW|O_PATH).
	 */
	if ((bi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) &&
	    cw_tag_info(h, &ti) == 0 && cw_is_link_tag(ti.tag)) {
		st->st_mode = S_IFLNK | 0777;
		if ((n = cw_link_target(h, NULL, 0)) >= 0)
			st->st_size = n;
	} else if (bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
		/* A folder's read-only bit means nothing to Windows either. */
		st->st_mode = S_IFDIR | 0755;
	} else if (bi.dwFileAttributes & FILE_ATTRIBUTE_READONLY)
		st->st_mode = S_IFREG | 0444;
	else
		st->st_mode = S_IFREG | 0644;
	st->st_uid = cw_owner_is_self(h) ? COMPAT_UID_SELF : COMPAT_UID_OTHER;
	st->st_gid = 0;
	return 0;
}

/* Fills st from any handle: a file, a console, a pipe. */
static int
cw_stat_handle(HANDLE h, struct compat_stat *st)
{
	LARGE_INTEGER	size;
	HANDLE		r;
	DWORD		type;
	int		rc, saved = errno;

	type = GetFileType(h);
	if (type == FILE_TYPE_DISK) {
		if (cw_stat_disk(h, st) == 0)
			return 0;
		/*
		 * A handle we did not open (a redirected standard stream)
		 * may lack FILE_READ_ATTRIBUTES: a second handle on the
		 * same file asks instead.
		 */
		if (cw_reopen(h, FILE_READ_ATTRIBUTES | READ_CONTROL, 0,
		    &r) == STATUS_SUCCESS) {
			rc = cw_stat_disk(r, st);
			CloseHandle(r);
			if (rc == 0)
				return 0;
		}
		/*
		 * Wine 8 gives a standard stream redirected from a Unix file
		 * a handle that answers neither: a file of ours with its
		 * size, and no identity (st_dev and st_ino 0).
		 */
		memset(st, 0, sizeof *st);
		st->st_mode = S_IFREG | 0644;
		if (GetFileSizeEx(h, &size))
			st->st_size = size.QuadPart;
		errno = saved;
	} else if (type == FILE_TYPE_CHAR) {
		memset(st, 0, sizeof *st);
		st->st_mode = S_IFCHR | 0666;
	} else if (type == FILE_TYPE_PIPE) {
		memset(st, 0, sizeof *st);
		st->st_mode = S_IFIFO | 0600;
	} else {
		if (GetLastError() != NO_ERROR)
			return cw_err_win32(GetLastError());
		memset(st, 0, sizeof *st);
	}
	st->st_uid = COMPAT_UID_SELF;
	st->st_nlink = 1;
	return 0;
}

/* fstat(2). */
int
compat_fstat(int fd, struct compat_stat *st)
{
	HANDLE	h;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return -1;
	return cw_stat_handle(h, st);
}

/* fstatat(2): AT_SYMLINK_NOFOLLOW is the only flag. */
int
fstatat(int dirfd, const char *path, struct compat_stat *st, int flag)
{
	HANDLE	h;
	ULONG	options = 0;
	int	rc;

	if (flag & ~AT_SYMLINK_NOFOLLOW) {
		errno = EINVAL;
		return -1;
	}
	if (flag & AT_SYMLINK_NOFOLLOW)
		options |= FILE_OPEN_REPARSE_POINT;
	if (cw_open_handle(dirfd, path, FILE_READ_ATTRIBUTES | READ_CONTROL,
	    FILE_OPEN, options, 0, &h) == -1)
		return -1;
	rc = cw_stat_handle(h, st);
	CloseHandle(h);
	return rc;
}

/* stat(2) on a UTF-8 path. */
int
compat_stat(const char *path, struct compat_stat *st)
{
	return fstatat(AT_FDCWD, path, st, 0);
}

/* lstat(2): a link itself. */
int
lstat(const char *path, struct compat_stat *st)
{
	return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

/* readlinkat(2): EINVAL for anything that is not a link. */
ssize_t
readlinkat(int dirfd, const char *path, char *buf, size_t size)
{
	struct cw_tag_info	ti;
	HANDLE			h;
	ssize_t			n = -1;

	if (cw_open_handle(dirfd, path, FILE_READ_ATTRIBUTES, FILE_OPEN,
	    FILE_OPEN_REPARSE_POINT, 0, &h) == -1)
		return -1;
	if (cw_tag_info(h, &ti) == 0) {
		if (cw_is_link_tag(ti.tag))
			n = cw_link_target(h, buf, size);
		else
			errno = EINVAL;
	}
	CloseHandle(h);
	if (n > (ssize_t)size)
		n = (ssize_t)size;	/* cut, as readlink(2) does */
	return n;
}

/* readlink(2). */
ssize_t
readlink(const char *path, char *buf, size_t size)
{
	return readlinkat(AT_FDCWD, path, buf, size);
}
