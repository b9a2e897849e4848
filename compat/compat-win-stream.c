/*
 * open_memstream(3) for the Windows C runtime, which has none: the
 * clients render text into memory through stdio (render.c, gbr's pager),
 * and a FILE that writes into a growing buffer cannot be made from the
 * runtime's own streams. So the stream is an anonymous temporary file
 * (FILE_FLAG_DELETE_ON_CLOSE, FILE_ATTRIBUTE_TEMPORARY: it stays in the
 * cache and vanishes when closed, even if the process dies), and POSIX's
 * promise, that *buf and *len hold what was written after every fflush and
 * fclose, is kept by wrapping those two: for a stream in this file's
 * table they read the file back into a new NUL-terminated buffer.
 *
 * A stream the clients make this way holds one rendered message or page
 * (bounded where it is made), so reading it back is cheap. The table is
 * small and locked: only the thread that made a stream uses it, but two
 * threads may make streams at once.
 */
#include "compat-win-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This file's fclose and fflush are the C runtime's. */
#undef fclose
#undef fflush

/* Streams into memory open at once, per process. */
#define MS_MAX	64

struct ms_stream {
	FILE	 *f;
	char	**buf;
	size_t	 *len;
};

static struct ms_stream	ms_table[MS_MAX];
static SRWLOCK		ms_lock = SRWLOCK_INIT;

/* The table's entry for f (locked by the caller), or NULL. */
static struct ms_stream *
ms_find(FILE *f)
{
	size_t	i;

	for (i = 0; i < MS_MAX; i++)
		if (ms_table[i].f == f)
			return &ms_table[i];
	return NULL;
}

/* Reads the stream's file back into a new buffer for *buf and *len. */
static int
ms_sync(struct ms_stream *ms)
{
	long	 end;
	char	*b;

	if (fflush(ms->f) != 0 || (end = ftell(ms->f)) < 0)
		return -1;
	if ((b = malloc((size_t)end + 1)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (fseek(ms->f, 0, SEEK_SET) != 0 ||
	    fread(b, 1, (size_t)end, ms->f) != (size_t)end ||
	    fseek(ms->f, end, SEEK_SET) != 0) {
		free(b);
		errno = EIO;
		return -1;
	}
	b[end] = '\0';
	free(*ms->buf);
	*ms->buf = b;
	*ms->len = (size_t)end;
	return 0;
}

/* A stream whose bytes reach *buf and *len at each fflush and fclose. */
FILE *
open_memstream(char **buf, size_t *len)
{
	WCHAR			 dir[MAX_PATH + 1], path[MAX_PATH + 16];
	struct ms_stream	*ms;
	HANDLE			 h;
	FILE			*f;
	int			 fd;

	if (buf == NULL || len == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (GetTempPathW(MAX_PATH + 1, dir) == 0 ||
	    GetTempFileNameW(dir, L"gbr", 0, path) == 0) {
		errno = EIO;
		return NULL;
	}
	h = CreateFileW(path, GENERIC_READ | GENERIC_WRITE, 0, NULL,
	    CREATE_ALWAYS, FILE_ATTRIBUTE_TEMPORARY | FILE_FLAG_DELETE_ON_CLOSE,
	    NULL);
	if (h == INVALID_HANDLE_VALUE) {
		DeleteFileW(path);
		errno = EIO;
		return NULL;
	}
	if ((fd = _open_osfhandle((intptr_t)h, _O_RDWR | _O_BINARY)) == -1) {
		CloseHandle(h);
		errno = EMFILE;
		return NULL;
	}
	if ((f = _fdopen(fd, "w+b")) == NULL) {
		_close(fd);
		return NULL;
	}
	AcquireSRWLockExclusive(&ms_lock);
	if ((ms = ms_find(NULL)) != NULL) {
		ms->f = f;
		ms->buf = buf;
		ms->len = len;
	}
	ReleaseSRWLockExclusive(&ms_lock);
	if (ms == NULL) {
		fclose(f);
		errno = EMFILE;
		return NULL;
	}
	*buf = NULL;
	*len = 0;
	if (ms_sync(ms) != 0) {
		compat_fclose(f);
		return NULL;
	}
	return f;
}

/* fflush, which also updates a memory stream's buffer. */
int
compat_fflush(FILE *f)
{
	struct ms_stream	*ms = NULL;
	int			 r;

	if (f != NULL) {
		AcquireSRWLockShared(&ms_lock);
		ms = ms_find(f);
		ReleaseSRWLockShared(&ms_lock);
	}
	if (ms == NULL)
		return fflush(f);
	r = ms_sync(ms);
	return r == 0 ? 0 : EOF;
}

/* fclose, which gives a memory stream's buffer its final bytes first. */
int
compat_fclose(FILE *f)
{
	struct ms_stream	*ms;
	int			 r = 0;

	AcquireSRWLockExclusive(&ms_lock);
	ms = ms_find(f);
	ReleaseSRWLockExclusive(&ms_lock);
	if (ms != NULL) {
		r = ms_sync(ms);
		AcquireSRWLockExclusive(&ms_lock);
		ms->f = NULL;
		ReleaseSRWLockExclusive(&ms_lock);
	}
	if (fclose(f) != 0)
		r = -1;
	return r == 0 ? 0 : EOF;
}
