/*
 * The DIR functions over a directory fd's handle: entries are read in
 * batches with GetFileInformationByHandleEx (FileIdBothDirectoryInfo),
 * which gives each name with its attributes, reparse tag and file id, so
 * readdir needs no second call per entry. "." and ".." come back as the
 * file system lists them (NTFS and Wine do, first), as on Linux.
 */
#include "compat-win-impl.h"

/* One batch of entries: 64 KiB holds some hundreds. */
#define CW_DIR_BUF	(64 * 1024)

struct compat_dir {
	int			 fd;	/* owned: closedir closes it */
	HANDLE			 h;
	unsigned char		*buf;	/* aligned by malloc, as the API needs */
	size_t			 next;	/* offset of the next entry, or... */
	int			 more;	/* ...0 when the batch is used up */
	int			 restart;
	int			 eof;
	struct compat_dirent	 ent;
};

/* fdopendir(3): takes fd, which must be a directory opened for reading. */
compat_dir *
compat_fdopendir(int fd)
{
	struct cw_tag_info	 ti;
	compat_dir		*d;
	HANDLE			 h;

	if ((h = cw_fd_handle(fd)) == INVALID_HANDLE_VALUE)
		return NULL;
	if (cw_tag_info(h, &ti) == -1)
		return NULL;
	if (!(ti.attributes & FILE_ATTRIBUTE_DIRECTORY)) {
		errno = ENOTDIR;
		return NULL;
	}
	if ((d = calloc(1, sizeof *d)) == NULL)
		return NULL;
	if ((d->buf = malloc(CW_DIR_BUF)) == NULL) {
		free(d);
		return NULL;
	}
	d->fd = fd;
	d->h = h;
	d->restart = 1;
	return d;
}

/* opendir(3) on a UTF-8 path. */
compat_dir *
compat_opendir(const char *path)
{
	compat_dir	*d;
	int		 fd, saved;

	if ((fd = openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY)) == -1)
		return NULL;
	if ((d = compat_fdopendir(fd)) == NULL) {
		saved = errno;
		close(fd);
		errno = saved;
	}
	return d;
}

/* Reads the next batch; 0, or -1 at the end (errno kept) or on error. */
static int
cw_dir_fill(compat_dir *d)
{
	FILE_INFO_BY_HANDLE_CLASS	cls;
	DWORD				err;

	cls = d->restart ? FileIdBothDirectoryRestartInfo :
	    FileIdBothDirectoryInfo;
	if (!GetFileInformationByHandleEx(d->h, cls, d->buf, CW_DIR_BUF)) {
		err = GetLastError();
		if (err == ERROR_NO_MORE_FILES) {
			d->eof = 1;
			return -1;
		}
		return cw_err_win32(err);
	}
	d->restart = 0;
	d->next = 0;
	d->more = 1;
	return 0;
}

/*
 * readdir(3): NULL at the end with errno untouched, or on error with
 * errno set. The entry is overwritten by the next call.
 */
struct compat_dirent *
compat_readdir(compat_dir *d)
{
	FILE_ID_BOTH_DIR_INFO	*e;
	size_t			 n;

	if (d->eof)
		return NULL;
	if (!d->more && cw_dir_fill(d) == -1)
		return NULL;
	e = (FILE_ID_BOTH_DIR_INFO *)(d->buf + d->next);
	if (e->NextEntryOffset == 0)
		d->more = 0;
	else
		d->next += e->NextEntryOffset;

	n = e->FileNameLength / sizeof(WCHAR);
	if (cw_utf8(e->FileName, n, d->ent.d_name, sizeof d->ent.d_name) >=
	    sizeof d->ent.d_name) {
		errno = ENAMETOOLONG;	/* not with NTFS's 255 units */
		return NULL;
	}
	d->ent.d_ino = (uint64_t)e->FileId.QuadPart;
	/*
	 * With the reparse attribute, EaSize holds the tag. Wine 8 marks a
	 * Unix symlink with the attribute and a tag of 0: a link too.
	 */
	if ((e->FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) &&
	    (cw_is_link_tag(e->EaSize) || e->EaSize == 0))
		d->ent.d_type = DT_LNK;
	else if (e->FileAttributes & FILE_ATTRIBUTE_DIRECTORY)
		d->ent.d_type = DT_DIR;
	else
		d->ent.d_type = DT_REG;
	return &d->ent;
}

/* rewinddir(3): the next readdir starts again from the first entry. */
void
compat_rewinddir(compat_dir *d)
{
	d->restart = 1;
	d->more = 0;
	d->eof = 0;
}

/* dirfd(3): the fd closedir will close. */
int
compat_dirfd(compat_dir *d)
{
	return d->fd;
}

/* closedir(3): closes the fd too. */
int
compat_closedir(compat_dir *d)
{
	int	rc;

	rc = close(d->fd);
	free(d->buf);
	free(d);
	return rc;
}
