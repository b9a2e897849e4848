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
	HANDLE	 h = (HANDLE)_get_osfhandle(fd);
	WCHAR	*w, *p;
	DWORD	 n;
	char	*s, *q;
	int	 len;

	if (h == INVALID_HANDLE_VALUE)
		return NULL;
	n = GetFinalPathNameByHandleW(h, NULL, 0, FILE_NAME_NORMALIZED |
	    VOLUME_NAME_DOS);
	if (n == 0 || n > 32768)
		return NULL;
	w = xreallocarray(NULL, n + 1, sizeof *w);
	if (GetFinalPathNameByHandleW(h, w, n + 1, FILE_NAME_NORMALIZED |
	    VOLUME_NAME_DOS) == 0) {
		free(w);
		return NULL;
	}
	/* \\?\C:\x is C:\x; \\?\UNC\server\share is \\server\share. */
	p = w;
	if (wcsncmp(p, L"\\\\?\\UNC\\", 8) == 0) {
		p += 6;
		*p = L'\\';
	} else if (wcsncmp(p, L"\\\\?\\", 4) == 0)
		p += 4;
	if ((len = WideCharToMultiByte(CP_UTF8, 0, p, -1, NULL, 0, NULL,
	    NULL)) <= 0) {
		free(w);
		return NULL;
	}
	s = xmalloc((size_t)len);
	WideCharToMultiByte(CP_UTF8, 0, p, -1, s, len, NULL, NULL);
	free(w);
	for (q = s; *q != '\0'; q++)
		if (*q == '\\')
			*q = '/';
	return s;
}

/* Names alias here (case, 8.3), and Wine follows links unseen. */
int
osdep_fs_check_final(void)
{
	return 1;
}
