/*
 * Whole paths on Windows in POSIX's form: realpath ("C:/x", links
 * resolved), the current folder in UTF-8 (chdir, getcwd), access, and
 * mkdtemp. What they open goes through the one resolver,
 * cw_open_handle (compat-win-open.c); what they give back uses '/'.
 */
#include "compat-win-impl.h"

/*
 * access(2): opens the file with the rights asked for. X_OK is existence
 * (Windows has no execute bit that means what POSIX's does).
 */
int
compat_access(const char *path, int mode)
{
	ACCESS_MASK	access = FILE_READ_ATTRIBUTES;
	HANDLE		h;

	if (mode & R_OK)
		access |= FILE_READ_DATA;
	if (mode & W_OK)
		access |= FILE_WRITE_DATA;
	if (cw_open_handle(AT_FDCWD, path, access, FILE_OPEN, 0, 0, &h) == -1) {
		/* Access is checked before sharing: this one had the rights. */
		if (errno == EBUSY)
			return 0;
		return -1;
	}
	CloseHandle(h);
	return 0;
}

/* The final path of h as realpath gives it ("C:/x"), new, or NULL. */
static char *
cw_final_utf8(HANDLE h)
{
	wchar_t	*buf, *p;
	DWORD	 n, got;
	char	*s, *c;

	if ((n = GetFinalPathNameByHandleW(h, NULL, 0, VOLUME_NAME_DOS)) == 0) {
		cw_err_win32(GetLastError());
		return NULL;
	}
	if (n > CW_NAME_MAX) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if ((buf = malloc((n + 1) * sizeof *buf)) == NULL)
		return NULL;
	got = GetFinalPathNameByHandleW(h, buf, n, VOLUME_NAME_DOS);
	if (got == 0 || got >= n) {
		free(buf);
		errno = got == 0 ? cw_errno_win32(GetLastError()) : EAGAIN;
		return NULL;
	}
	/* "\\?\UNC\srv\x" is "//srv/x"; "\\?\C:\x" is "C:/x". */
	p = buf;
	if (wcsncmp(p, L"\\\\?\\UNC\\", 8) == 0) {
		p += 6;
		p[0] = L'\\';
	} else if (wcsncmp(p, L"\\\\?\\", 4) == 0)
		p += 4;
	s = cw_utf8_new(p, wcslen(p));
	free(buf);
	if (s == NULL)
		return NULL;
	for (c = s; *c != '\0'; c++) {
		if (*c == '\\')
			*c = '/';
	}
	return s;
}

/* The final path of what fd is now ("C:/x"), new, or NULL (compat-win.h). */
char *
compat_fd_path(int fd)
{
	HANDLE	h;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return NULL;
	return cw_final_utf8(h);
}

/* realpath(3): the final path of what path names (links resolved). */
char *
realpath(const char *path, char *resolved)
{
	HANDLE	 h;
	char	*s;

	if (cw_open_handle(AT_FDCWD, path, FILE_READ_ATTRIBUTES, FILE_OPEN, 0,
	    0, &h) == -1)
		return NULL;
	s = cw_final_utf8(h);
	CloseHandle(h);
	if (s == NULL || resolved == NULL)
		return s;
	/* POSIX's buffer is PATH_MAX bytes: refuse rather than cut. */
	if (strlen(s) >= PATH_MAX) {
		free(s);
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(resolved, s, strlen(s) + 1);
	free(s);
	return resolved;
}

/* chdir(2) on a UTF-8 path. */
int
compat_chdir(const char *path)
{
	wchar_t	*w;
	BOOL	 ok;

	if ((w = cw_wide(path, CW_NAME_MAX, 1, NULL)) == NULL)
		return -1;
	ok = SetCurrentDirectoryW(w);
	free(w);
	return ok ? 0 : cw_err_win32(GetLastError());
}

/* getcwd(3) in UTF-8 with '/'; a NULL buffer is allocated, as glibc does. */
char *
compat_getcwd(char *buf, size_t size)
{
	wchar_t	*w;
	DWORD	 n, got;
	size_t	 len;
	char	*c;

	if (buf != NULL && size == 0) {
		errno = EINVAL;
		return NULL;
	}
	if ((n = GetCurrentDirectoryW(0, NULL)) == 0) {
		cw_err_win32(GetLastError());
		return NULL;
	}
	if (n > CW_NAME_MAX || (w = malloc((n + 1) * sizeof *w)) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	got = GetCurrentDirectoryW(n, w);
	if (got == 0 || got >= n) {
		free(w);
		errno = got == 0 ? cw_errno_win32(GetLastError()) : EAGAIN;
		return NULL;
	}
	len = cw_utf8(w, got, NULL, 0);
	if (buf == NULL) {
		if (size == 0)
			size = len + 1;
		if ((buf = malloc(size)) == NULL) {
			free(w);
			return NULL;
		}
	}
	if (len >= size) {
		free(w);
		errno = ERANGE;
		return NULL;
	}
	cw_utf8(w, got, buf, size);
	free(w);
	for (c = buf; *c != '\0'; c++) {
		if (*c == '\\')
			*c = '/';
	}
	return buf;
}

/* mkdtemp(3): XXXXXX from the system's random numbers (rand_s). */
char *
mkdtemp(char *template)
{
	static const char	 chars[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t			 len, i;
	unsigned int		 r;
	int			 tries;

	len = strlen(template);
	if (len < 6 || strcmp(template + len - 6, "XXXXXX") != 0) {
		errno = EINVAL;
		return NULL;
	}
	for (tries = 0; tries < 100; tries++) {
		for (i = len - 6; i < len; i++) {
			if (rand_s(&r) != 0) {
				errno = EIO;
				return NULL;
			}
			template[i] = chars[r % (sizeof chars - 1)];
		}
		if (compat_mkdir(template, 0700) == 0)
			return template;
		if (errno != EEXIST)
			return NULL;
	}
	errno = EEXIST;
	return NULL;
}

/* mkstemps(3): XXXXXX from rand_s, before the suffix; made with O_EXCL. */
int
mkstemps(char *template, int suffixlen)
{
	static const char	 chars[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t			 len, end, i;
	unsigned int		 r;
	int			 tries, fd;

	len = strlen(template);
	if (suffixlen < 0 || (size_t)suffixlen > len ||
	    len - (size_t)suffixlen < 6 ||
	    strncmp(template + len - suffixlen - 6, "XXXXXX", 6) != 0) {
		errno = EINVAL;
		return -1;
	}
	end = len - (size_t)suffixlen;
	for (tries = 0; tries < 100; tries++) {
		for (i = end - 6; i < end; i++) {
			if (rand_s(&r) != 0) {
				errno = EIO;
				return -1;
			}
			template[i] = chars[r % (sizeof chars - 1)];
		}
		fd = compat_open(template, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600);
		if (fd != -1 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

/* fchmodat(2): fchmod of what dirfd/path names (not following a link). */
int
fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
	int	fd, r, saved;

	if ((fd = openat(dirfd, path, O_PATH | ((flags & AT_SYMLINK_NOFOLLOW) ?
	    O_NOFOLLOW : 0))) == -1)
		return -1;
	r = fchmod(fd, mode);
	saved = errno;
	close(fd);
	errno = saved;
	return r;
}

/*
 * symlinkat(2): the link is made by its full path, the folder's final
 * path (what dirfd is now) joined with path.
 */
int
symlinkat(const char *target, int dirfd, const char *path)
{
	HANDLE	 h;
	char	*dir, *full;
	size_t	 n;
	int	 r;

	if (dirfd == AT_FDCWD)
		return symlink(target, path);
	if ((h = cw_fd_handle(dirfd)) == INVALID_HANDLE_VALUE)
		return -1;
	if ((dir = cw_final_utf8(h)) == NULL)
		return -1;
	n = strlen(dir) + 1 + strlen(path) + 1;
	if ((full = malloc(n)) == NULL) {
		free(dir);
		errno = ENOMEM;
		return -1;
	}
	snprintf(full, n, "%s/%s", dir, path);
	free(dir);
	r = symlink(target, full);
	free(full);
	return r;
}
