/*
 * Changing files on Windows as POSIX does: renameat (an atomic replace,
 * even of an open file where the system allows it), unlinkat (the link,
 * never what it points to), links, I/O at an offset, fsync, fchmod and
 * flock. Deletions and renames are set on an open handle
 * (NtSetInformationFile), so that the file changed is the one opened
 * beneath the directory handle, not whatever a name means a moment
 * later.
 */
#include "compat-win-impl.h"

/* FILE_RENAME_INFORMATION, for both classes (10 and 65). */
struct cw_rename {
	union {
		BOOLEAN	replace;
		ULONG	flags;
	} u;
	HANDLE		root;
	ULONG		len;		/* bytes */
	WCHAR		name[1];
};

/* The attributes FileBasicInformation may set. */
#define CW_SETTABLE	(FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_HIDDEN | \
	FILE_ATTRIBUTE_SYSTEM | FILE_ATTRIBUTE_ARCHIVE | \
	FILE_ATTRIBUTE_TEMPORARY | FILE_ATTRIBUTE_OFFLINE | \
	FILE_ATTRIBUTE_NOT_CONTENT_INDEXED)

/*
 * Set once the system has said it does not know the POSIX-semantics
 * classes (Windows before 10 1607, Wine 8), so that each rename or delete
 * asks once, not twice. A race between threads only asks again.
 */
static volatile LONG	cw_rename_ex_missing;
static volatile LONG	cw_delete_ex_missing;

/* flock's byte: far beyond any data, so the lock is advisory. */
#define CW_LOCK_HIGH	0x40000000UL	/* offset 2^62 */

/* 1 if an Ex class failed because it is not there (or not for this FS). */
static int
cw_ex_unknown(NTSTATUS st, volatile LONG *missing)
{
	if (st == STATUS_NOT_IMPLEMENTED || st == STATUS_INVALID_INFO_CLASS) {
		*missing = 1;
		return 1;
	}
	return st == STATUS_INVALID_PARAMETER || st == STATUS_NOT_SUPPORTED;
}

/*
 * Renames what h is open on to name under root: POSIX semantics first
 * (an open target is replaced, read-only or not), then the classic class.
 */
static NTSTATUS
cw_rename_handle(HANDLE h, HANDLE root, const wchar_t *name, size_t len,
    int replace)
{
	struct cw_rename	*ri;
	IO_STATUS_BLOCK		 io;
	NTSTATUS		 st = STATUS_NOT_IMPLEMENTED;
	size_t			 size;

	if (len > CW_NAME_MAX)
		return STATUS_NAME_TOO_LONG;
	size = sizeof *ri + len * sizeof *name;
	if ((ri = calloc(1, size)) == NULL)
		return STATUS_NO_MEMORY;
	ri->root = root;
	ri->len = (ULONG)(len * sizeof *name);
	memcpy(ri->name, name, len * sizeof *name);
	if (!cw_rename_ex_missing) {
		ri->u.flags = CW_RENAME_POSIX_SEMANTICS |
		    CW_RENAME_IGNORE_READONLY |
		    (replace ? CW_RENAME_REPLACE_IF_EXISTS : 0);
		st = NtSetInformationFile(h, &io, ri, (ULONG)size,
		    (FILE_INFORMATION_CLASS)CW_FileRenameInformationEx);
	}
	if (cw_rename_ex_missing || cw_ex_unknown(st, &cw_rename_ex_missing)) {
		ri->u.flags = 0;
		ri->u.replace = replace ? TRUE : FALSE;
		st = NtSetInformationFile(h, &io, ri, (ULONG)size,
		    (FILE_INFORMATION_CLASS)CW_FileRenameInformation);
	}
	free(ri);
	return st;
}

/* Clears the read-only attribute of what h is open on. */
static NTSTATUS
cw_clear_readonly(HANDLE h)
{
	struct cw_tag_info	ti;
	FILE_BASIC_INFO		bi;
	HANDLE			w;
	NTSTATUS		st;
	BOOL			ok;

	if (cw_tag_info(h, &ti) == -1)
		return STATUS_ACCESS_DENIED;
	memset(&bi, 0, sizeof bi);	/* zero times: left as they are */
	bi.FileAttributes = ti.attributes & CW_SETTABLE & ~FILE_ATTRIBUTE_READONLY;
	if (bi.FileAttributes == 0)
		bi.FileAttributes = FILE_ATTRIBUTE_NORMAL;
	if ((st = cw_reopen(h, FILE_WRITE_ATTRIBUTES, FILE_OPEN_REPARSE_POINT,
	    &w)) != STATUS_SUCCESS)
		return st;
	ok = SetFileInformationByHandle(w, FileBasicInfo, &bi, sizeof bi);
	CloseHandle(w);
	return ok ? STATUS_SUCCESS : STATUS_ACCESS_DENIED;
}

/* Writes v as hex digits at w; returns how many. */
static size_t
cw_hex(wchar_t *w, unsigned long v)
{
	static const wchar_t	 digits[] = L"0123456789abcdef";
	wchar_t			 tmp[16];
	size_t			 n = 0, i;

	do {
		tmp[n++] = digits[v & 0xf];
		v >>= 4;
	} while (v != 0 && n < sizeof tmp / sizeof tmp[0]);
	for (i = 0; i < n; i++)
		w[i] = tmp[n - 1 - i];
	return n;
}

/* A name no one else uses, for a file put aside: ".~gbr-PID-N". */
static size_t
cw_aside_name(wchar_t *w)
{
	static volatile LONG	counter;
	size_t			len;

	memcpy(w, L".~gbr-", 6 * sizeof *w);
	len = 6;
	len += cw_hex(w + len, GetCurrentProcessId());
	w[len++] = L'-';
	len += cw_hex(w + len, (unsigned long)InterlockedIncrement(&counter));
	return len;
}

/*
 * Deletes what h is open on: POSIX semantics first (the name goes now,
 * even while others have it open), else the classic delete, which takes
 * the name away only when the last handle closes. So that the name is
 * free at once there too, as after unlink(2), a file (not a folder) whose
 * folder and name are known is first renamed aside; its aside name goes
 * when the last handle closes.
 */
static NTSTATUS
cw_delete_handle(HANDLE h, HANDLE root, const wchar_t *name, size_t len,
    int isdir)
{
	FILE_DISPOSITION_INFO	 di;
	ULONG			 flags;
	IO_STATUS_BLOCK		 io;
	NTSTATUS		 st = STATUS_NOT_IMPLEMENTED;
	wchar_t			 aside[48];
	int			 renamed = 0;

	if (!cw_delete_ex_missing) {
		flags = CW_DISPOSITION_DELETE | CW_DISPOSITION_POSIX_SEMANTICS |
		    CW_DISPOSITION_IGNORE_READONLY;
		st = NtSetInformationFile(h, &io, &flags, sizeof flags,
		    (FILE_INFORMATION_CLASS)CW_FileDispositionInformationEx);
		if (st == STATUS_SUCCESS ||
		    !cw_ex_unknown(st, &cw_delete_ex_missing))
			return st;
	}
	if (root != NULL && !isdir && cw_rename_handle(h, root, aside,
	    cw_aside_name(aside), 0) == STATUS_SUCCESS)
		renamed = 1;
	di.DeleteFile = TRUE;
	st = NtSetInformationFile(h, &io, &di, sizeof di,
	    (FILE_INFORMATION_CLASS)CW_FileDispositionInformation);
	/* POSIX deletes a read-only file: the folder's rights decide. */
	if (st == STATUS_CANNOT_DELETE && cw_clear_readonly(h) == STATUS_SUCCESS)
		st = NtSetInformationFile(h, &io, &di, sizeof di,
		    (FILE_INFORMATION_CLASS)CW_FileDispositionInformation);
	if (st != STATUS_SUCCESS && renamed)
		cw_rename_handle(h, root, name, len, 0);
	return st;
}

/* 1 if the attributes are a folder that is not a link. */
static int
cw_is_dir(const struct cw_tag_info *ti)
{
	return (ti->attributes & FILE_ATTRIBUTE_DIRECTORY) &&
	    !cw_is_link_tag(ti->tag);
}

/*
 * The replace of a target the system will not replace (it is open, and
 * POSIX semantics are missing: Wine 8, FAT, Windows before 10 1607). The
 * target is renamed aside, the source renamed into place, and the aside
 * file deleted (its name goes when its last handle closes). Not atomic:
 * a reader in between finds no file. An empty folder is deleted before a
 * folder takes its name.
 */
static NTSTATUS
cw_rename_aside(HANDLE src, const struct cw_target *t, NTSTATUS first)
{
	struct cw_tag_info	 si, ti;
	HANDLE			 tgt;
	wchar_t			 aside[48];
	size_t			 alen;
	NTSTATUS		 st;

	if (cw_nt_create(t->root, t->name, t->len, CW_DELETE |
	    FILE_READ_ATTRIBUTES, FILE_OPEN, FILE_OPEN_REPARSE_POINT, 0,
	    &tgt) != STATUS_SUCCESS)
		return first;
	if (cw_tag_info(src, &si) == -1 || cw_tag_info(tgt, &ti) == -1) {
		st = first;
		goto out;
	}
	if (cw_is_dir(&ti) != cw_is_dir(&si)) {
		st = cw_is_dir(&ti) ? STATUS_FILE_IS_A_DIRECTORY :
		    STATUS_NOT_A_DIRECTORY;
		goto out;
	}
	if (cw_is_dir(&ti)) {
		if ((st = cw_delete_handle(tgt, NULL, NULL, 0, 1)) !=
		    STATUS_SUCCESS)
			goto out;
		CloseHandle(tgt);
		return cw_rename_handle(src, t->root, t->name, t->len, 1);
	}

	alen = cw_aside_name(aside);
	if ((st = cw_rename_handle(tgt, t->root, aside, alen, 0)) !=
	    STATUS_SUCCESS) {
		st = first;
		goto out;
	}
	st = cw_rename_handle(src, t->root, t->name, t->len, 1);
	if (st != STATUS_SUCCESS) {
		cw_rename_handle(tgt, t->root, t->name, t->len, 0);
		goto out;
	}
	/* Best effort: what is left is a stray file, not a lost one. */
	cw_delete_handle(tgt, NULL, NULL, 0, 0);
out:
	CloseHandle(tgt);
	return st;
}

/* renameat(2): see the top of compat-win.h. */
int
renameat(int olddirfd, const char *old, int newdirfd, const char *new)
{
	struct cw_target	t;
	HANDLE			src;
	NTSTATUS		st;

	/* The link itself is renamed, never what it points to. */
	if (cw_open_handle(olddirfd, old, CW_DELETE | FILE_READ_ATTRIBUTES,
	    FILE_OPEN, FILE_OPEN_REPARSE_POINT, 0, &src) == -1)
		return -1;
	if (cw_target(newdirfd, new, &t) == -1) {
		CloseHandle(src);
		return -1;
	}
	st = cw_rename_handle(src, t.root, t.name, t.len, 1);
	if (st == STATUS_ACCESS_DENIED)
		st = cw_rename_aside(src, &t, st);
	CloseHandle(src);
	cw_target_release(&t);
	return st == STATUS_SUCCESS ? 0 : cw_err_nt(st);
}

/* rename(2) on UTF-8 paths. */
int
compat_rename(const char *old, const char *new)
{
	return renameat(AT_FDCWD, old, AT_FDCWD, new);
}

/* unlinkat once the name is open: the checks, then the delete. */
static int
cw_unlink_open(HANDLE h, const struct cw_target *t, int flags)
{
	struct cw_tag_info	ti;
	NTSTATUS		st;

	if (cw_tag_info(h, &ti) == -1)
		return -1;
	if ((flags & AT_REMOVEDIR) && !cw_is_dir(&ti))
		st = STATUS_NOT_A_DIRECTORY;
	else if (!(flags & AT_REMOVEDIR) && cw_is_dir(&ti))
		st = STATUS_FILE_IS_A_DIRECTORY;
	else
		st = cw_delete_handle(h, t->root, t->name, t->len,
		    cw_is_dir(&ti));
	return st == STATUS_SUCCESS ? 0 : cw_err_nt(st);
}

/*
 * unlinkat(2): a link is removed, never followed; a folder needs
 * AT_REMOVEDIR (EISDIR without), and AT_REMOVEDIR wants a real folder
 * (ENOTDIR for a link to one, as rmdir on a symlink gives on Linux).
 */
int
unlinkat(int dirfd, const char *path, int flags)
{
	struct cw_target	t;
	HANDLE			h;
	ULONG			options = FILE_OPEN_REPARSE_POINT;
	NTSTATUS		st;
	size_t			len;
	int			rc;

	if (flags & ~AT_REMOVEDIR) {
		errno = EINVAL;
		return -1;
	}
	len = strlen(path);
	/* "x/" names a folder: a file there is ENOTDIR. */
	if ((flags & AT_REMOVEDIR) ||
	    (len > 0 && (path[len - 1] == '/' || path[len - 1] == '\\')))
		options |= FILE_DIRECTORY_FILE;
	/* The folder and the name: a file is renamed aside in that folder. */
	if (cw_target(dirfd, path, &t) == -1)
		return -1;
	st = cw_nt_create(t.root, t.name, t.len, CW_DELETE |
	    FILE_READ_ATTRIBUTES, FILE_OPEN, options, 0, &h);
	if (st != STATUS_SUCCESS)
		rc = cw_err_nt(st);
	else {
		rc = cw_unlink_open(h, &t, flags);
		CloseHandle(h);
	}
	cw_target_release(&t);
	return rc;
}

/* unlink(2) on a UTF-8 path. */
int
compat_unlink(const char *path)
{
	return unlinkat(AT_FDCWD, path, 0);
}

/* rmdir(2) on a UTF-8 path. */
int
compat_rmdir(const char *path)
{
	return unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

/* link(2): a hard link (CreateHardLinkW). */
int
link(const char *old, const char *new)
{
	wchar_t	*wo, *wn;
	BOOL	 ok;
	DWORD	 err;

	if ((wo = cw_wide(old, CW_NAME_MAX, 1, NULL)) == NULL)
		return -1;
	if ((wn = cw_wide(new, CW_NAME_MAX, 1, NULL)) == NULL) {
		free(wo);
		return -1;
	}
	ok = CreateHardLinkW(wn, wo, NULL);
	err = GetLastError();
	free(wo);
	free(wn);
	return ok ? 0 : cw_err_win32(err);
}

/*
 * symlink(2) with CreateSymbolicLinkW: a folder link if the target is a
 * folder now (Windows fixes the kind when the link is made).
 */
int
symlink(const char *target, const char *path)
{
	wchar_t	*wt, *wp, *rel = NULL;
	size_t	 tlen, plen, dlen;
	DWORD	 flags = 0, attrs, err = 0;
	BOOL	 ok;

	if ((wt = cw_wide(target, CW_NAME_MAX, 1, &tlen)) == NULL)
		return -1;
	if ((wp = cw_wide(path, CW_NAME_MAX, 1, &plen)) == NULL) {
		free(wt);
		return -1;
	}
	/* A relative target is relative to the link's folder. */
	for (dlen = plen; dlen > 0 && wp[dlen - 1] != L'\\'; dlen--)
		;
	if (wt[0] != L'\\' && !(wt[0] != L'\0' && wt[1] == L':') && dlen > 0 &&
	    (rel = malloc((dlen + tlen + 1) * sizeof *rel)) != NULL) {
		memcpy(rel, wp, dlen * sizeof *rel);
		memcpy(rel + dlen, wt, (tlen + 1) * sizeof *rel);
	}
	attrs = GetFileAttributesW(rel != NULL ? rel : wt);
	free(rel);
	if (attrs != INVALID_FILE_ATTRIBUTES &&
	    (attrs & FILE_ATTRIBUTE_DIRECTORY))
		flags |= SYMBOLIC_LINK_FLAG_DIRECTORY;
	/* Unprivileged where Developer Mode allows it; older systems refuse the flag. */
	ok = CreateSymbolicLinkW(wp, wt, flags |
	    SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE);
	if (!ok && GetLastError() == ERROR_INVALID_PARAMETER)
		ok = CreateSymbolicLinkW(wp, wt, flags);
	if (!ok)
		err = GetLastError();
	else {
		/* Wine 8's CreateSymbolicLinkW says yes and makes nothing. */
		attrs = GetFileAttributesW(wp);
		if (attrs == INVALID_FILE_ATTRIBUTES ||
		    !(attrs & FILE_ATTRIBUTE_REPARSE_POINT))
			err = ERROR_NOT_SUPPORTED;
	}
	free(wt);
	free(wp);
	return err == 0 ? 0 : cw_err_win32(err);
}

/* The offset of an OVERLAPPED, which ReadFile and WriteFile start at. */
static void
cw_overlapped(OVERLAPPED *ov, off_t off)
{
	memset(ov, 0, sizeof *ov);
	ov->Offset = (DWORD)((uint64_t)off & 0xffffffffU);
	ov->OffsetHigh = (DWORD)((uint64_t)off >> 32);
}

/*
 * pread(2) and pwrite(2). A synchronous handle moves its file position
 * even when an OVERLAPPED gives the offset, so the position is put back:
 * not atomic against another thread's read(2) on the same fd.
 */
static ssize_t
cw_pio(int fd, void *rbuf, const void *wbuf, size_t n, off_t off)
{
	HANDLE		h;
	OVERLAPPED	ov;
	LARGE_INTEGER	zero, pos;
	DWORD		done = 0, err = 0;
	BOOL		ok;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return -1;
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	if (GetFileType(h) != FILE_TYPE_DISK) {
		errno = ESPIPE;
		return -1;
	}
	if (n > INT_MAX)
		n = INT_MAX;	/* a short transfer, as POSIX allows */
	zero.QuadPart = 0;
	if (!SetFilePointerEx(h, zero, &pos, FILE_CURRENT))
		return cw_err_win32(GetLastError());
	cw_overlapped(&ov, off);
	if (rbuf != NULL)
		ok = ReadFile(h, rbuf, (DWORD)n, &done, &ov);
	else
		ok = WriteFile(h, wbuf, (DWORD)n, &done, &ov);
	if (!ok)
		err = GetLastError();
	SetFilePointerEx(h, pos, NULL, FILE_BEGIN);
	if (!ok && err == ERROR_HANDLE_EOF)
		return 0;
	if (!ok)
		return cw_err_win32(err);
	return (ssize_t)done;
}

/* pread(2). */
ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	return cw_pio(fd, buf, NULL, n, off);
}

/* pwrite(2); on an O_APPEND fd it appends, as Linux does. */
ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return cw_pio(fd, NULL, buf, n, off);
}

/*
 * fsync(2): FlushFileBuffers. A folder is a successful no-op (see the
 * header). Windows flushes only through a handle that may write: a
 * read-only fd flushes through a second handle, and if it may not have
 * one, nothing was written through it to flush.
 */
int
fsync(int fd)
{
	struct cw_tag_info	ti;
	HANDLE			h, w;
	DWORD			err;
	BOOL			ok;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return -1;
	if (GetFileType(h) != FILE_TYPE_DISK) {
		errno = EINVAL;
		return -1;
	}
	if (cw_tag_info(h, &ti) == 0 &&
	    (ti.attributes & FILE_ATTRIBUTE_DIRECTORY))
		return 0;
	if (FlushFileBuffers(h))
		return 0;
	if ((err = GetLastError()) != ERROR_ACCESS_DENIED)
		return cw_err_win32(err);
	if (cw_reopen(h, FILE_WRITE_DATA, 0, &w) != STATUS_SUCCESS)
		return 0;
	ok = FlushFileBuffers(w);
	err = GetLastError();
	CloseHandle(w);
	return ok ? 0 : cw_err_win32(err);
}

/* fdatasync(2): the same as fsync. */
int
fdatasync(int fd)
{
	return fsync(fd);
}

/*
 * fchmod(2): no write bit is the read-only attribute; any write bit
 * clears it. Folders ignore the attribute, so nothing changes for them.
 */
int
fchmod(int fd, mode_t mode)
{
	struct cw_tag_info	ti;
	FILE_BASIC_INFO		bi;
	HANDLE			h;
	ULONG			attrs;
	NTSTATUS		st;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return -1;
	if (cw_tag_info(h, &ti) == -1)
		return -1;
	if (ti.attributes & FILE_ATTRIBUTE_DIRECTORY)
		return 0;
	attrs = ti.attributes & CW_SETTABLE;
	if (mode & 0222)
		attrs &= ~FILE_ATTRIBUTE_READONLY;
	else
		attrs |= FILE_ATTRIBUTE_READONLY;
	if (attrs == (ti.attributes & CW_SETTABLE))
		return 0;
	memset(&bi, 0, sizeof bi);
	bi.FileAttributes = attrs != 0 ? attrs : FILE_ATTRIBUTE_NORMAL;
	if (SetFileInformationByHandle(h, FileBasicInfo, &bi, sizeof bi))
		return 0;
	if (GetLastError() != ERROR_ACCESS_DENIED)
		return cw_err_win32(GetLastError());
	/* An fd opened for reading lacks FILE_WRITE_ATTRIBUTES. */
	if ((st = cw_reopen(h, FILE_WRITE_ATTRIBUTES, 0, &h)) != STATUS_SUCCESS)
		return cw_err_nt(st);
	if (!SetFileInformationByHandle(h, FileBasicInfo, &bi, sizeof bi)) {
		cw_err_win32(GetLastError());
		CloseHandle(h);
		return -1;
	}
	CloseHandle(h);
	return 0;
}

/*
 * flock(2) with LockFileEx on one far byte (see the header). Locks
 * belong to the open file, so two opens of one file conflict and a dup
 * shares its lock, as flock's do.
 */
int
flock(int fd, int op)
{
	HANDLE		h;
	OVERLAPPED	ov;
	DWORD		flags, err;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return -1;
	memset(&ov, 0, sizeof ov);
	ov.OffsetHigh = CW_LOCK_HIGH;
	switch (op & ~LOCK_NB) {
	case LOCK_UN:
		if (!UnlockFileEx(h, 0, 1, 0, &ov) &&
		    GetLastError() != ERROR_NOT_LOCKED)
			return cw_err_win32(GetLastError());
		return 0;
	case LOCK_SH:
		flags = 0;
		break;
	case LOCK_EX:
		flags = LOCKFILE_EXCLUSIVE_LOCK;
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	if (op & LOCK_NB)
		flags |= LOCKFILE_FAIL_IMMEDIATELY;
	/*
	 * flock converts a lock it holds; LockFileEx would stack a second
	 * one on the handle. The old one goes first: flock(2) does not
	 * promise an atomic conversion either.
	 */
	UnlockFileEx(h, 0, 1, 0, &ov);
	if (LockFileEx(h, flags, 0, 1, 0, &ov))
		return 0;
	err = GetLastError();
	if (err == ERROR_LOCK_VIOLATION || err == ERROR_IO_PENDING) {
		errno = EWOULDBLOCK;
		return -1;
	}
	return cw_err_win32(err);
}
