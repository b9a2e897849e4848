/*
 * The DIR functions over a directory fd's handle: entries are read in
 * batches with GetFileInformationByHandleEx (FileIdBothDirectoryInfo),
 * which gives each name with its attributes, reparse tag and file id, so
 * readdir needs no second call per entry. "." and ".." come back as the
 * file system lists them (NTFS and Wine do, first), as on Linux.
 *
 * nftw walks a tree with them.
 *
 * Each listing, the first and every one after rewinddir, reads through a
 * handle of its own, opened anew on the folder: POSIX wants a rewound
 * stream to show the folder as it is now, and Wine 8 keeps the entries it
 * read for an open file object, so that a restarted scan of the same
 * handle (or of a dup of it) would show the folder as it was.
 */
#include "compat-win-impl.h"

/* One batch of entries: 64 KiB holds some hundreds. */
#define CW_DIR_BUF	(64 * 1024)

struct compat_dir {
	int			 fd;	/* owned: closedir closes it */
	HANDLE			 h;
	HANDLE			 scan;	/* this listing's own, or NULL */
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

	if (d->restart) {
		/* A fresh handle, so that the folder is read as it is now. */
		if (d->scan != NULL)
			CloseHandle(d->scan);
		if (cw_reopen(d->h, FILE_LIST_DIRECTORY, FILE_DIRECTORY_FILE,
		    &d->scan) != STATUS_SUCCESS)
			d->scan = NULL;
	}
	cls = d->restart ? FileIdBothDirectoryRestartInfo :
	    FileIdBothDirectoryInfo;
	if (!GetFileInformationByHandleEx(d->scan != NULL ? d->scan : d->h,
	    cls, d->buf, CW_DIR_BUF)) {
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

	if (d->scan != NULL)
		CloseHandle(d->scan);
	rc = close(d->fd);
	free(d->buf);
	free(d);
	return rc;
}

/* What one walk of nftw keeps. */
struct cw_walk {
	int		(*fn)(const char *, const struct compat_stat *, int,
			    struct FTW *);
	int		  flags;
	uint64_t	  dev;		/* the top's volume, for FTW_MOUNT */
};

/*
 * Visits path (its last name at base, level folders below the top), and
 * what is below it when it is a folder. Returns 0 to go on, or what the
 * callback returned to stop, or -1 with errno.
 */
static int
cw_walk_one(struct cw_walk *w, const char *path, int base, int level)
{
	struct compat_stat	 st;
	struct compat_dirent	*de;
	struct FTW		 ftw = { base, level };
	compat_dir		*d;
	char			*child;
	size_t			 len = strlen(path);
	int			 r, sep, err;

	if (w->flags & FTW_PHYS)
		r = lstat(path, &st);
	else if ((r = compat_stat(path, &st)) != 0 && lstat(path, &st) == 0)
		return w->fn(path, &st, FTW_SLN, &ftw);	/* a link to nothing */
	if (r != 0 && level == 0)
		return -1;	/* as POSIX: the top must be there */
	if (r != 0) {
		memset(&st, 0, sizeof st);
		return w->fn(path, &st, FTW_NS, &ftw);
	}
	if (level == 0)
		w->dev = st.st_dev;
	else if ((w->flags & FTW_MOUNT) && st.st_dev != w->dev)
		return 0;
	if (S_ISLNK(st.st_mode))
		return w->fn(path, &st, FTW_SL, &ftw);
	if (!S_ISDIR(st.st_mode))
		return w->fn(path, &st, FTW_F, &ftw);
	if ((d = compat_opendir(path)) == NULL)
		return w->fn(path, &st, FTW_DNR, &ftw);
	if (!(w->flags & FTW_DEPTH) && (r = w->fn(path, &st, FTW_D,
	    &ftw)) != 0) {
		compat_closedir(d);
		return r;
	}
	r = 0;
	while (r == 0 && (errno = 0, de = compat_readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* The top may end with a separator ("C:/"); its children add none. */
		sep = len == 0 || (path[len - 1] != '/' && path[len - 1] != '\\');
		if ((child = malloc(len + strlen(de->d_name) + 2)) == NULL) {
			r = -1;
			break;
		}
		memcpy(child, path, len);
		if (sep)
			child[len] = '/';
		memcpy(child + len + sep, de->d_name, strlen(de->d_name) + 1);
		r = cw_walk_one(w, child, (int)(len + sep), level + 1);
		free(child);
	}
	err = r == 0 ? errno : 0;
	compat_closedir(d);
	if (r != 0)
		return r;
	if (err != 0) {
		errno = err;
		return -1;
	}
	return (w->flags & FTW_DEPTH) ? w->fn(path, &st, FTW_DP, &ftw) : 0;
}

/* nftw(3): see compat-win.h for the flags it knows. */
int
compat_nftw(const char *path, int (*fn)(const char *,
    const struct compat_stat *, int, struct FTW *), int nopenfd, int flags)
{
	struct cw_walk	 w = { fn, flags, 0 };
	const char	*a = strrchr(path, '/'), *b = strrchr(path, '\\');
	const char	*slash = a == NULL || (b != NULL && b > a) ? b : a;

	(void)nopenfd;	/* one folder open per level: gbr's trees are shallow */
	if (flags & ~(FTW_PHYS | FTW_MOUNT | FTW_DEPTH)) {
		errno = EINVAL;
		return -1;
	}
	return cw_walk_one(&w, path, slash != NULL && slash[1] != '\0' ?
	    (int)(slash - path + 1) : 0, 0);
}
