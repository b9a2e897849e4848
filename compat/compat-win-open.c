/*
 * Opening by path on Windows as POSIX's openat does: the one resolver
 * (cw_open_handle) that every path-taking function in compat-win-*.c goes
 * through, and the functions that are mostly an open: openat, open,
 * fopen, mkdirat, mkdir. A name relative to a directory fd is handed to
 * NtCreateFile with that directory's handle as RootDirectory, so the
 * kernel resolves it beneath the handle whatever happens to the path
 * above; AT_FDCWD and absolute paths follow the Win32 rules
 * (GetFullPathNameW) and are opened as \??\ paths.
 *
 * Only the Win32 layer knows "." and "..": NtCreateFile takes them as
 * names and refuses them (STATUS_OBJECT_NAME_INVALID, measured under
 * Wine 8). So "." is dropped here, and ".." is done the way a POSIX
 * kernel does it: what came before is opened (following links) and its
 * parent is opened from its final path.
 */
#include "compat-win-impl.h"

#include <stdarg.h>

/* What an open of a folder on the way needs. */
#define CW_DIR_ACCESS	(FILE_TRAVERSE | FILE_READ_ATTRIBUTES | SYNCHRONIZE)

/* The HANDLE under a C runtime fd, or INVALID_HANDLE_VALUE with EBADF. */
HANDLE
cw_fd_handle(int fd)
{
	intptr_t	h;

	if (fd < 0) {
		errno = EBADF;
		return INVALID_HANDLE_VALUE;
	}
	h = _get_osfhandle(fd);
	if (h == -1 || h == -2) {
		errno = EBADF;
		return INVALID_HANDLE_VALUE;
	}
	return (HANDLE)h;
}

/* NtCreateFile of len units of name under root, with the sharing we use. */
NTSTATUS
cw_nt_create(HANDLE root, const wchar_t *name, size_t len, ACCESS_MASK access,
    ULONG disposition, ULONG options, ULONG attributes, HANDLE *hp)
{
	UNICODE_STRING		us;
	OBJECT_ATTRIBUTES	oa;
	IO_STATUS_BLOCK		io;

	*hp = NULL;
	if (len > CW_NAME_MAX)
		return STATUS_NAME_TOO_LONG;
	us.Buffer = (wchar_t *)name;
	us.Length = us.MaximumLength = (USHORT)(len * sizeof *name);
	/* No OBJ_INHERIT: children get a handle only when asked for. */
	InitializeObjectAttributes(&oa, &us, OBJ_CASE_INSENSITIVE, root, NULL);
	return NtCreateFile(hp, access | SYNCHRONIZE, &oa, &io, NULL,
	    attributes, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
	    disposition, options | FILE_SYNCHRONOUS_IO_NONALERT, NULL, 0);
}

/* Opens the file h names again, with other access (see the header). */
NTSTATUS
cw_reopen(HANDLE h, ACCESS_MASK access, ULONG options, HANDLE *out)
{
	return cw_nt_create(h, L"", 0, access, FILE_OPEN, options, 0, out);
}

/* 1 if w does not depend on a directory fd: "\x", "\\srv\x", "C:x". */
static int
cw_is_absolute(const wchar_t *w)
{
	if (w[0] == L'\\')
		return 1;
	return ((w[0] >= L'A' && w[0] <= L'Z') ||
	    (w[0] >= L'a' && w[0] <= L'z')) && w[1] == L':';
}

/* The next component of w from *i (skipping separators); 0 at the end. */
static int
cw_next(const wchar_t *w, size_t len, size_t *i, size_t *start, size_t *n)
{
	while (*i < len && w[*i] == L'\\')
		(*i)++;
	if (*i == len)
		return 0;
	*start = *i;
	while (*i < len && w[*i] != L'\\')
		(*i)++;
	*n = *i - *start;
	return 1;
}

#define CW_DOT(w, s, n)		((n) == 1 && (w)[s] == L'.')
#define CW_DOTDOT(w, s, n)	((n) == 2 && (w)[s] == L'.' && (w)[(s) + 1] == L'.')

/*
 * The full NT path (\??\C:\x, \??\UNC\srv\share\x) of a Win32 path, as a
 * new string; a trailing separator goes, except a drive's root.
 */
static wchar_t *
cw_nt_full(const wchar_t *w, size_t *lenp)
{
	wchar_t		*full, *nt;
	const wchar_t	*rest, *prefix;
	DWORD		 n, got;
	size_t		 skip, len;

	if ((n = GetFullPathNameW(w, 0, NULL, NULL)) == 0) {
		cw_err_win32(GetLastError());
		return NULL;
	}
	if (n > CW_NAME_MAX) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if ((full = malloc(n * sizeof *full)) == NULL)
		return NULL;
	got = GetFullPathNameW(w, n, full, NULL);
	if (got == 0 || got >= n) {
		free(full);
		errno = got == 0 ? cw_errno_win32(GetLastError()) : EAGAIN;
		return NULL;
	}
	/* A ':' past the drive names a stream: refused (see the header). */
	skip = 0;
	if (full[0] != L'\0' && full[1] == L':')
		skip = 2;
	else if (wcsncmp(full, L"\\\\?\\", 4) == 0 ||
	    wcsncmp(full, L"\\\\.\\", 4) == 0)
		skip = (got >= 6 && full[5] == L':') ? 6 : 4;
	if (wcschr(full + skip, L':') != NULL) {
		free(full);
		errno = EINVAL;
		return NULL;
	}
	if (wcsncmp(full, L"\\\\?\\", 4) == 0 ||
	    wcsncmp(full, L"\\\\.\\", 4) == 0) {
		prefix = L"\\??\\";
		rest = full + 4;
	} else if (wcsncmp(full, L"\\\\", 2) == 0) {
		prefix = L"\\??\\UNC\\";
		rest = full + 2;
	} else {
		prefix = L"\\??\\";
		rest = full;
	}
	len = wcslen(prefix) + wcslen(rest);
	if ((nt = malloc((len + 1) * sizeof *nt)) == NULL) {
		free(full);
		return NULL;
	}
	memcpy(nt, prefix, wcslen(prefix) * sizeof *nt);
	memcpy(nt + wcslen(prefix), rest, (wcslen(rest) + 1) * sizeof *nt);
	free(full);
	while (len > 5 && nt[len - 1] == L'\\' && nt[len - 2] != L':')
		nt[--len] = L'\0';
	*lenp = len;
	return nt;
}

/*
 * Opens the parent folder of the folder h: one component up its final
 * path (a root is its own parent, as "/.." is "/").
 */
static NTSTATUS
cw_parent(HANDLE h, HANDLE *out)
{
	wchar_t		*buf;
	DWORD		 n, got;
	size_t		 len, root, i;
	NTSTATUS	 st;

	if ((n = GetFinalPathNameByHandleW(h, NULL, 0, VOLUME_NAME_DOS)) == 0)
		return STATUS_OBJECT_PATH_NOT_FOUND;
	if (n > CW_NAME_MAX || (buf = malloc((n + 1) * sizeof *buf)) == NULL)
		return STATUS_NO_MEMORY;
	got = GetFinalPathNameByHandleW(h, buf, n, VOLUME_NAME_DOS);
	/* "\\?\C:\a\b" becomes the NT path "\??\C:\a\b". */
	if (got == 0 || got >= n || wcsncmp(buf, L"\\\\?\\", 4) != 0) {
		free(buf);
		return STATUS_OBJECT_PATH_NOT_FOUND;
	}
	buf[1] = L'?';
	len = got;
	/* The root: "\??\C:\", or "\??\UNC\srv\share". */
	if (wcsncmp(buf + 4, L"UNC\\", 4) == 0) {
		for (root = 8; root < len && buf[root] != L'\\'; root++)
			;
		for (root++; root < len && buf[root] != L'\\'; root++)
			;
	} else
		root = 7;
	for (i = len; i > root && buf[i - 1] != L'\\'; i--)
		;
	if (i > root)
		len = i - 1;
	else if (len > root)
		len = root;
	st = cw_nt_create(NULL, buf, len, CW_DIR_ACCESS, FILE_OPEN,
	    FILE_DIRECTORY_FILE, 0, out);
	free(buf);
	return st;
}

/*
 * The resolver: opens path relative to dirfd (see compat-win-impl.h and
 * the top of this file) and returns 0 with the handle in *hp.
 */
int
cw_open_handle(int dirfd, const char *path, ACCESS_MASK access,
    ULONG disposition, ULONG options, ULONG attributes, HANDLE *hp)
{
	wchar_t		*w, *seg = NULL, *nt;
	size_t		 len, i = 0, s = 0, n = 0, segl = 0, head, ntlen;
	HANDLE		 root = NULL, owned = NULL, h;
	NTSTATUS	 st;
	int		 full, rc = -1;

	*hp = NULL;
	if ((w = cw_wide(path, CW_NAME_MAX, 1, &len)) == NULL)
		return -1;
	if (len == 0) {
		errno = ENOENT;
		goto out;
	}
	/*
	 * "C:x" is relative to the drive's own current folder, which POSIX
	 * has no idea of (it would be a plain name there): refused.
	 */
	if (cw_is_absolute(w) && w[1] == L':' && w[2] != L'\\') {
		errno = EINVAL;
		goto out;
	}
	full = dirfd == AT_FDCWD || cw_is_absolute(w);
	if (!full && (root = cw_fd_handle(dirfd)) == INVALID_HANDLE_VALUE)
		goto out;

	/* A name ending in '/', "." or ".." can only be a folder. */
	for (head = len; head > 0 && w[head - 1] != L'\\'; head--)
		;
	if (w[len - 1] == L'\\' || CW_DOT(w, head, len - head) ||
	    CW_DOTDOT(w, head, len - head)) {
		if (options & FILE_NON_DIRECTORY_FILE) {
			errno = EISDIR;
			goto out;
		}
		options |= FILE_DIRECTORY_FILE;
	}

	if ((seg = malloc((len + 2) * sizeof *seg)) == NULL)
		goto out;
	if (full) {
		/* Up to the first "..", the Win32 rules make a full path. */
		for (head = len; cw_next(w, len, &i, &s, &n); ) {
			if (CW_DOTDOT(w, s, n)) {
				head = s;
				break;
			}
		}
		memcpy(seg, w, head * sizeof *seg);
		seg[head] = L'\0';
		if (head == 0) {
			seg[0] = L'.';
			seg[1] = L'\0';
		}
		if ((nt = cw_nt_full(seg, &ntlen)) == NULL)
			goto out;
		if (head == len)
			st = cw_nt_create(NULL, nt, ntlen, access, disposition,
			    options, attributes, hp);
		else {
			st = cw_nt_create(NULL, nt, ntlen, CW_DIR_ACCESS,
			    FILE_OPEN, FILE_DIRECTORY_FILE, 0, &h);
			owned = root = h;
		}
		free(nt);
		if (st != STATUS_SUCCESS) {
			cw_err_nt(st);
			goto out;
		}
		if (head == len) {
			rc = 0;
			goto out;
		}
		i = head;
	}

	/* The rest, beneath root, one ".." at a time. */
	while (cw_next(w, len, &i, &s, &n)) {
		if (CW_DOT(w, s, n))
			continue;
		if (wmemchr(w + s, L':', n) != NULL) {
			errno = EINVAL;
			goto out;
		}
		if (CW_DOTDOT(w, s, n)) {
			if (segl > 0) {
				st = cw_nt_create(root, seg, segl,
				    CW_DIR_ACCESS, FILE_OPEN,
				    FILE_DIRECTORY_FILE, 0, &h);
				if (st != STATUS_SUCCESS) {
					cw_err_nt(st);
					goto out;
				}
				if (owned != NULL)
					CloseHandle(owned);
				owned = root = h;
				segl = 0;
			}
			if ((st = cw_parent(root, &h)) != STATUS_SUCCESS) {
				cw_err_nt(st);
				goto out;
			}
			if (owned != NULL)
				CloseHandle(owned);
			owned = root = h;
			continue;
		}
		if (segl > 0)
			seg[segl++] = L'\\';
		memcpy(seg + segl, w + s, n * sizeof *seg);
		segl += n;
	}
	/* An empty name opens root itself ("." or "a/.."). */
	st = cw_nt_create(root, seg, segl, access, disposition, options,
	    attributes, hp);
	if (st != STATUS_SUCCESS)
		cw_err_nt(st);
	else
		rc = 0;
out:
	if (owned != NULL)
		CloseHandle(owned);
	free(seg);
	free(w);
	return rc;
}

/*
 * Where renameat puts a name: the folder that will hold it, opened, and
 * its last component. One way for every kind of path, so that ".." and
 * AT_FDCWD need nothing of their own.
 */
int
cw_target(int dirfd, const char *path, struct cw_target *t)
{
	size_t	 len, i, plen;
	char	*parent;
	int	 rc;

	memset(t, 0, sizeof *t);
	len = strlen(path);
	while (len > 1 && (path[len - 1] == '/' || path[len - 1] == '\\'))
		len--;
	for (i = len; i > 0 && path[i - 1] != '/' && path[i - 1] != '\\'; i--)
		;
	/* The last component is path[i, len). */
	if (len == 0 || i == len || (len - i == 1 && path[i] == '.') ||
	    (len - i == 2 && path[i] == '.' && path[i + 1] == '.')) {
		errno = len == 0 ? ENOENT : EINVAL;
		return -1;
	}
	if (i == 0)
		plen = 0;
	else if (i == 1 || path[i - 2] == ':')
		plen = i;		/* "/x" and "C:/x": keep the root's '/' */
	else
		plen = i - 1;
	if ((parent = malloc(plen + 2)) == NULL)
		return -1;
	memcpy(parent, path, plen);
	parent[plen] = '\0';
	if (plen == 0) {
		parent[0] = '.';
		parent[1] = '\0';
	}
	rc = cw_open_handle(dirfd, parent, CW_DIR_ACCESS, FILE_OPEN,
	    FILE_DIRECTORY_FILE, 0, &t->root);
	free(parent);
	if (rc == -1)
		return -1;
	t->owned = 1;
	if ((parent = strndup(path + i, len - i)) == NULL) {
		cw_target_release(t);
		return -1;
	}
	t->name = cw_wide(parent, CW_NAME_MAX, 1, &t->len);
	free(parent);
	if (t->name == NULL || wmemchr(t->name, L':', t->len) != NULL) {
		if (t->name != NULL)
			errno = EINVAL;
		cw_target_release(t);
		return -1;
	}
	return 0;
}

/* Frees what cw_target made. */
void
cw_target_release(struct cw_target *t)
{
	if (t->owned && t->root != NULL)
		CloseHandle(t->root);
	free(t->name);
	memset(t, 0, sizeof *t);
}

/* openat(2) with the mode already read (see the header's rules). */
static int
cw_openat(int dirfd, const char *path, int flags, int mode)
{
	ACCESS_MASK		access;
	ULONG			options = 0, disposition, attributes;
	FILE_END_OF_FILE_INFO	eof;
	IO_STATUS_BLOCK		io;
	struct cw_tag_info	ti;
	NTSTATUS		st;
	HANDLE			h;
	int			acc = flags & O_ACCMODE, writing, crt, fd;

	if (flags & O_PATH)
		access = FILE_READ_ATTRIBUTES | READ_CONTROL;
	else if (acc == O_RDONLY)
		access = FILE_GENERIC_READ;
	else if (acc == O_WRONLY)
		access = FILE_GENERIC_WRITE | FILE_READ_ATTRIBUTES;
	else if (acc == O_RDWR)
		access = FILE_GENERIC_READ | FILE_GENERIC_WRITE;
	else {
		errno = EINVAL;
		return -1;
	}
	writing = !(flags & O_PATH) && acc != O_RDONLY;
	/*
	 * A handle with FILE_APPEND_DATA but not FILE_WRITE_DATA writes at
	 * the end whatever the offset, atomically, as O_APPEND does. O_TRUNC
	 * needs FILE_WRITE_DATA: then the C runtime's _O_APPEND seeks to the
	 * end before each write instead.
	 */
	if ((flags & O_APPEND) && writing && !(flags & O_TRUNC))
		access &= ~FILE_WRITE_DATA;
	if (flags & O_DIRECTORY) {
		if (flags & O_CREAT) {
			errno = EINVAL;
			return -1;
		}
		if (writing) {
			errno = EISDIR;
			return -1;
		}
		options |= FILE_DIRECTORY_FILE;
	} else if (writing || (flags & O_CREAT))
		options |= FILE_NON_DIRECTORY_FILE;

	if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
		disposition = FILE_CREATE;
	else if (flags & O_CREAT)
		disposition = FILE_OPEN_IF;
	else
		disposition = FILE_OPEN;
	/* O_EXCL never follows a link at the name, as POSIX says. */
	if ((flags & O_NOFOLLOW) || disposition == FILE_CREATE)
		options |= FILE_OPEN_REPARSE_POINT;
	attributes = FILE_ATTRIBUTE_NORMAL;
	if ((flags & O_CREAT) && !(mode & 0222))
		attributes = FILE_ATTRIBUTE_READONLY;

	if (cw_open_handle(dirfd, path, access, disposition, options,
	    attributes, &h) == -1)
		return -1;
	if (flags & O_NOFOLLOW) {
		if (cw_tag_info(h, &ti) == -1) {
			CloseHandle(h);
			return -1;
		}
		if ((ti.attributes & FILE_ATTRIBUTE_REPARSE_POINT) &&
		    cw_is_link_tag(ti.tag) && !(flags & O_PATH)) {
			CloseHandle(h);
			errno = ELOOP;
			return -1;
		}
		/*
		 * Another kind of reparse point (deduplicated, cloud) is a
		 * file with a filter behind it: opened again the usual way.
		 */
		if ((ti.attributes & FILE_ATTRIBUTE_REPARSE_POINT) &&
		    !cw_is_link_tag(ti.tag)) {
			CloseHandle(h);
			if (cw_open_handle(dirfd, path, access, disposition,
			    options & ~FILE_OPEN_REPARSE_POINT, attributes,
			    &h) == -1)
				return -1;
		}
	}
	if ((flags & O_TRUNC) && writing) {
		eof.EndOfFile.QuadPart = 0;
		st = NtSetInformationFile(h, &io, &eof, sizeof eof,
		    (FILE_INFORMATION_CLASS)CW_FileEndOfFileInformation);
		if (st != STATUS_SUCCESS) {
			CloseHandle(h);
			return cw_err_nt(st);
		}
	}
	crt = _O_BINARY | _O_NOINHERIT;
	if (!writing)
		crt |= _O_RDONLY;
	if (flags & O_APPEND)
		crt |= _O_APPEND;
	if ((fd = _open_osfhandle((intptr_t)h, crt)) == -1) {
		CloseHandle(h);
		errno = EMFILE;
		return -1;
	}
	return fd;
}

/* openat(2): the mode is there only with O_CREAT. */
int
openat(int dirfd, const char *path, int flags, ...)
{
	va_list	ap;
	int	mode = 0;

	if (flags & O_CREAT) {
		va_start(ap, flags);
		mode = va_arg(ap, int);
		va_end(ap);
	}
	return cw_openat(dirfd, path, flags, mode);
}

/* open(2) on a UTF-8 path. */
int
compat_open(const char *path, int flags, ...)
{
	va_list	ap;
	int	mode = 0;

	if (flags & O_CREAT) {
		va_start(ap, flags);
		mode = va_arg(ap, int);
		va_end(ap);
	}
	return cw_openat(AT_FDCWD, path, flags, mode);
}

/* fopen(3) on a UTF-8 path; the stream is binary whatever mode says. */
FILE *
compat_fopen(const char *path, const char *mode)
{
	const char	*p;
	char		 crt[4];
	int		 flags, plus, fd;
	FILE		*f;

	plus = strchr(mode, '+') != NULL;
	switch (mode[0]) {
	case 'r':
		flags = plus ? O_RDWR : O_RDONLY;
		break;
	case 'w':
		flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC;
		break;
	case 'a':
		flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND;
		break;
	default:
		errno = EINVAL;
		return NULL;
	}
	for (p = mode + 1; *p != '\0'; p++) {
		if (*p == 'x')
			flags |= O_EXCL;
		else if (*p != '+' && *p != 'b' && *p != 't' && *p != 'e') {
			errno = EINVAL;
			return NULL;
		}
	}
	if ((fd = compat_open(path, flags, 0666)) == -1)
		return NULL;
	crt[0] = mode[0];
	crt[1] = plus ? '+' : 'b';
	crt[2] = plus ? 'b' : '\0';
	crt[3] = '\0';
	if ((f = _fdopen(fd, crt)) == NULL)
		close(fd);
	return f;
}

/* mkdirat(2); the mode is not used: the folder inherits its ACL. */
int
mkdirat(int dirfd, const char *path, mode_t mode)
{
	HANDLE	h;

	if (cw_open_handle(dirfd, path, FILE_LIST_DIRECTORY |
	    FILE_READ_ATTRIBUTES, FILE_CREATE,
	    FILE_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT, FILE_ATTRIBUTE_NORMAL,
	    &h) == -1)
		return -1;
	CloseHandle(h);
	return 0;
}

/* mkdir(2) on a UTF-8 path. */
int
compat_mkdir(const char *path, mode_t mode)
{
	return mkdirat(AT_FDCWD, path, mode);
}
