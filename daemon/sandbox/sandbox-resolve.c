/*
 * The sandbox's resolver (see sandbox.c's top for the two resolvers and
 * why writes always walk): mapping an agent's path to a root, the walk
 * beneath a root fd, opening for reading, and reads under a cap.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "osdep-fs.h"
#include "pathgate.h"
#include "sandbox.h"
#include "sandbox-int.h"
#include "xmalloc.h"

/*
 * One meaning on every system (doc/SANDBOX.md): what the agent's path
 * names inside a root is judged by Windows' rules of names too, wherever
 * gbrd runs, so a path refused on Windows is refused on Linux the same
 * way, and a profile or an agent's habit carries across. So a backslash
 * separates (and "..\\..\\x" climbs), and a drive letter, a device name
 * (CON, nul.txt), a colon (an alternate data stream), a trailing dot or
 * space, or <>"|?* in a name is refused. A first component that starts
 * with '~' is refused too: no shell expands it here, and a folder named
 * "~" is never what was meant. Returns 0 or -1 (refused).
 */
static int
sb_one_meaning(struct sb_op *op, const char *rel)
{
	struct pathgate_refusal	 why;
	char			*win;

	if (rel[0] == '~')
		return sb_refuse(op, GBR_ERR_INVALID_PATH, "'~' is not your home "
		    "here: paths are relative to the workspace");
	if ((win = pathgate_normalize(rel, strlen(rel), PATHGATE_WINDOWS,
	    &why)) == NULL)
		return sb_refuse(op, why.kind, "%s", why.reason);
	free(win);
	return 0;
}

/*
 * Maps an agent's path to a root and a normal relative path. Relative
 * paths belong to the allowed root; an absolute one must be under the
 * allowed root or a read-only root (whole components: "/w/proj-evil" is not
 * under "/w/proj"), the most specific root winning.
 */
int
sb_locate(struct sb_op *op, int *root, char **rel)
{
	struct pathgate_refusal	 why;
	struct sandbox		*sb = op->sb;
	char			*abs, *r, *best = NULL;
	size_t			 bestlen = 0, plen;
	int			 n, k;

	*rel = NULL;
	if (op->raw == NULL || op->rawlen == 0)
		return sb_refuse(op, GBR_ERR_INVALID_PATH, "the path is empty");
	if (!pathgate_is_absolute(op->raw, op->rawlen, PATHGATE_HOST)) {
		if ((*rel = pathgate_normalize(op->raw, op->rawlen,
		    PATHGATE_HOST, &why)) == NULL)
			return sb_refuse(op, why.kind, "%s", why.reason);
		if (sb_one_meaning(op, *rel) != 0) {
			free(*rel);
			*rel = NULL;
			return -1;
		}
		*root = 0;
		return 0;
	}
	if ((abs = pathgate_normalize_absolute(op->raw, op->rawlen,
	    PATHGATE_HOST, &why)) == NULL)
		return sb_refuse(op, why.kind, "%s", why.reason);
	for (n = 0; n < sb->nroots; n++) {
		for (k = 0; k < 2; k++) {
			const char *p = k == 0 ? sb->roots[n].path :
			    sb->roots[n].given;

			if ((r = pathgate_relative(p, abs, PATHGATE_HOST)) == NULL)
				continue;
			plen = strlen(p);
			if (best == NULL || plen > bestlen) {
				free(best);
				best = r;
				bestlen = plen;
				*root = n;
			} else
				free(r);
		}
	}
	free(abs);
	if (best == NULL)
		return sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
		    "an absolute path outside the allowed root (%s)",
		    sb->roots[0].path);
	if (strcmp(best, ".") != 0 && sb_one_meaning(op, best) != 0) {
		free(best);
		return -1;
	}
	*rel = best;
	return 0;
}

/* True if the agent's path ends in a separator: it names a folder. */
int
sb_names_folder(const struct sb_op *op)
{
	return op->rawlen > 1 && (op->raw[op->rawlen - 1] == '/' ||
	    op->raw[op->rawlen - 1] == '\\');
}

/*
 * Opens name beneath dirfd, one step: through openat2 refusing every
 * symlink, or openat with O_NOFOLLOW.
 */
int
sb_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	int	fd, tries = 0;

	if (!sb_openat2()) {
		do
			fd = openat(dirfd, name, flags | O_NOFOLLOW, mode);
		while (fd == -1 && errno == EINTR);
		return fd;
	}
	do
		fd = osdep_open_beneath(dirfd, name, flags | O_NOFOLLOW, mode,
		    OSDEP_NO_SYMLINKS);
	while (fd == -1 && errno == EAGAIN && ++tries < SB_RETRIES);
	return fd;
}

/* Appends a component to a canonical path. */
char *
sb_join(const char *a, const char *b)
{
	if (a[0] == '\0')
		return xstrdup(b);
	if (b[0] == '\0')
		return xstrdup(a);
	return xasprintf("%s/%s", a, b);
}

/* The root-relative final path of what fd is (see sandbox-int.h). */
char *
sb_final_rel(struct sb_op *op, int root, int fd)
{
	char	*rp, *fp, *rel = NULL;

	rp = osdep_fd_path(op->sb->roots[root].fd);
	fp = osdep_fd_path(fd);
	if (rp != NULL && fp != NULL)
		rel = pathgate_relative(rp, fp, PATHGATE_HOST);
	if (rel == NULL) {
		if (rp == NULL || fp == NULL)
			sb_refuse(op, GBR_ERR_PATH_TRAVERSAL, "the system cannot "
			    "tell where it is, so it is not known to be inside "
			    "the root");
		else
			sb_refuse(op, GBR_ERR_PATH_TRAVERSAL, "it is really %s, "
			    "outside the root %s (a link or junction led there)",
			    fp, rp);
	}
	free(rp);
	free(fp);
	return rel;
}

/* Frees what a walk holds. */
void
sb_walk_release(struct sb_walk *w)
{
	if (w->dirfd != -1)
		close(w->dirfd);
	if (w->fd != -1 && w->fd != w->dirfd)
		close(w->fd);
	free(w->canon);
	free(w->name);
	free(w->missing);
	memset(w, 0, sizeof *w);
	w->dirfd = w->fd = -1;
}

/* True if a component is a plain name (not empty, ".", or ".."). */
static int
sb_plain(const char *c, size_t len)
{
	return len != 0 && !(len == 1 && c[0] == '.') &&
	    !(len == 2 && c[0] == '.' && c[1] == '.');
}

/* True if every component of a '/'-joined path is a plain name. */
static int
sb_all_plain(const char *p)
{
	size_t	len;

	for (;;) {
		len = strcspn(p, "/");
		if (!sb_plain(p, len))
			return 0;
		if (p[len] == '\0')
			return 1;
		p += len + 1;
	}
}

/*
 * A symlink target was read at canon/comp with rest still to walk: builds
 * the path to walk instead (canon, target, rest), keeping the target's ".."
 * for the walk to resolve against real folders. Returns it or NULL.
 */
static char *
sb_splice(struct sb_op *op, const char *canon, const char *comp,
    const char *target, const char *rest)
{
	struct pathgate_refusal	 why;
	char			*at, *joined;

	at = sb_join(canon, comp);
	if (target[0] == '/') {
		/* RESOLVE_BENEATH refuses these too: the two resolvers agree. */
		sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
		    "'%s' is a symlink to an absolute path; only relative "
		    "links that stay inside are followed", at);
		free(at);
		return NULL;
	}
	if (pathgate_check_bytes(target, strlen(target), PATHGATE_HOST,
	    &why) != 0) {
		sb_refuse(op, why.kind, "symlink '%s': %s", at, why.reason);
		free(at);
		return NULL;
	}
	joined = xasprintf("%s%s%s%s%s", canon, canon[0] != '\0' ? "/" : "",
	    target, rest[0] != '\0' ? "/" : "", rest);
	if (strlen(joined) > PATHGATE_PATH_MAX) {
		sb_refuse(op, GBR_ERR_INVALID_PATH,
		    "the path is too long after following symlink '%s'", at);
		free(joined);
		joined = NULL;
	}
	free(at);
	return joined;
}

/*
 * The per-component walk: resolves path beneath root fd, following only
 * symlinks that stay inside. SB_WANT_FILE opens the target O_NONBLOCK,
 * SB_WANT_DIR opens it O_DIRECTORY (both in w->fd), SB_WANT_WRITE stops at
 * the target's folder and lstat()s the target. Returns 0 or -1 (refused).
 *
 * Only symlink targets bring ".." here (the agent's own were resolved by
 * the gate). A ".." drops the last real folder of the canonical path and
 * the walk starts again from the root: the canonical path holds no link,
 * so this is the physical parent, as the kernel would resolve it.
 */
int
sb_walk(struct sb_op *op, int rootfd, const char *rel, enum sb_want want,
    struct sb_walk *w)
{
	char		*path, *comp = NULL, *next, *slash;
	char		 target[PATHGATE_PATH_MAX + 1];
	const char	*p, *rest;
	size_t		 clen;
	ssize_t		 tlen;
	int		 hops = 0, steps = 0, fd, err, last;

	memset(w, 0, sizeof *w);
	w->dirfd = w->fd = -1;
	path = xstrdup(strcmp(rel, ".") == 0 ? "" : rel);
restart:
	if (w->dirfd != -1)
		close(w->dirfd);
	free(w->canon);
	w->canon = xstrdup("");
	if (++steps > 4 * SB_MAX_HOPS + PATHGATE_PATH_MAX) {
		sb_refuse(op, GBR_ERR_PATH_TRAVERSAL, "the path never settles");
		w->dirfd = -1;
		goto fail;
	}
	/* A fresh open file description, so readdir offsets are never shared. */
	if ((w->dirfd = sb_openat(rootfd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC, 0)) == -1) {
		sb_refuse_errno(op, errno, "the root");
		goto fail;
	}
	p = path;
	while (*p != '\0') {
		clen = strcspn(p, "/");
		rest = p[clen] == '/' ? p + clen + 1 : p + clen;
		if (clen == 0 || (clen == 1 && p[0] == '.')) {
			p = rest;
			continue;
		}
		if (clen == 2 && p[0] == '.' && p[1] == '.') {
			if (w->canon[0] == '\0') {
				sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
				    "a symlink on the path leads above the root");
				goto fail;
			}
			slash = strrchr(w->canon, '/');
			if (slash != NULL)
				*slash = '\0';
			else
				w->canon[0] = '\0';
			next = sb_join(w->canon, rest);
			free(path);
			path = next;
			goto restart;
		}
		free(comp);
		comp = xstrndup(p, clen);
		last = (*rest == '\0');

		if (!last || want == SB_WANT_DIR) {
			fd = sb_openat(w->dirfd, comp, O_RDONLY | O_DIRECTORY |
			    O_CLOEXEC, 0);
			if (fd != -1) {
				close(w->dirfd);
				w->dirfd = fd;
				next = sb_join(w->canon, comp);
				free(w->canon);
				w->canon = next;
				p = rest;
				continue;
			}
			err = errno;
			if (err == ENOENT && want == SB_WANT_WRITE) {
				w->missing = xstrdup(p);
				break;
			}
		} else if (want == SB_WANT_FILE) {
			fd = sb_openat(w->dirfd, comp, O_RDONLY | O_NONBLOCK |
			    O_NOCTTY | O_CLOEXEC, 0);
			if (fd != -1) {
				w->fd = fd;
				w->name = comp;
				comp = NULL;
				break;
			}
			err = errno;
		} else {
			if (fstatat(w->dirfd, comp, &w->st,
			    AT_SYMLINK_NOFOLLOW) == 0) {
				if (!S_ISLNK(w->st.st_mode)) {
					w->exists = 1;
					w->name = comp;
					comp = NULL;
					break;
				}
				err = ELOOP;
			} else if ((err = errno) == ENOENT) {
				w->missing = xstrdup(p);
				break;
			}
		}

		/* Failed: a symlink (ELOOP, or ENOTDIR with O_DIRECTORY) or not. */
		if (err == ELOOP || err == ENOTDIR || err == EMLINK) {
			tlen = readlinkat(w->dirfd, comp, target, sizeof target);
			if (tlen >= 0) {
				if (++hops > SB_MAX_HOPS) {
					char *at = sb_join(w->canon, comp);

					sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
					    "too many symlinks at '%s' (a loop?)", at);
					free(at);
					goto fail;
				}
				if (tlen == 0 || (size_t)tlen >= sizeof target) {
					char *at = sb_join(w->canon, comp);

					sb_refuse(op, GBR_ERR_INVALID_PATH,
					    "symlink '%s' has an empty or over-long "
					    "target", at);
					free(at);
					goto fail;
				}
				target[tlen] = '\0';
				if ((next = sb_splice(op, w->canon, comp, target,
				    rest)) == NULL)
					goto fail;
				free(path);
				path = next;
				goto restart;
			}
			if (errno == EINVAL && err == ENOTDIR) {
				char *at = sb_join(w->canon, comp);

				if (last)
					sb_refuse(op, GBR_ERR_NOT_A_FILE,
					    "'%s' is not a folder", at);
				else
					sb_refuse(op, GBR_ERR_NOT_FOUND,
					    "'%s' is not a folder", at);
				free(at);
				goto fail;
			}
			if (errno == EINVAL && ++hops <= SB_MAX_HOPS)
				goto restart;	/* it changed under us: again */
			if (errno != EINVAL)
				err = errno;
		}
		{
			char *at = sb_join(w->canon, comp);
			char *what = xasprintf("'%s'", at);

			sb_refuse_errno(op, err, what);
			free(what);
			free(at);
		}
		goto fail;
	}
	if (w->missing != NULL && !sb_all_plain(w->missing)) {
		/* "new/../x" from a link: the kernel would say ENOENT too. */
		sb_refuse(op, GBR_ERR_NOT_FOUND,
		    "a folder on the path does not exist");
		goto fail;
	}
	if (*p == '\0' && want != SB_WANT_WRITE) {
		/* The walk consumed the whole path: the target is dirfd itself. */
		w->fd = w->dirfd;
		w->dirfd = -1;
	}
	free(comp);
	free(path);
	return 0;

fail:
	free(comp);
	free(path);
	sb_walk_release(w);
	return -1;
}

/* Opens the target of a read through openat2 in one call. */
static int
sb_open_kernel(struct sb_op *op, int rootfd, const char *rel, int flags)
{
	int	fd, tries = 0;

	do
		fd = osdep_open_beneath(rootfd, rel, flags, 0, 0);
	while (fd == -1 && errno == EAGAIN && ++tries < SB_RETRIES);
	if (fd == -1)
		return sb_refuse_errno(op, errno, "the path");
	return fd;
}

/* Opens a file or folder for reading; the shared part of the two calls. */
static int
sb_open_read(struct sb_op *op, int want_dir, int *fdp, struct stat *st,
    struct sandbox_loc *loc)
{
	struct sb_walk	 w;
	struct stat	 sbuf;
	const char	*own;
	char		*rel;
	int		 root, fd;

	*fdp = -1;
	if (loc != NULL)
		loc->rel = NULL;
	if (st == NULL)
		st = &sbuf;
	if (sb_locate(op, &root, &rel) != 0)
		return -1;
	if (sb_openat2()) {
		fd = sb_open_kernel(op, op->sb->roots[root].fd, rel, want_dir ?
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC :
		    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd == -1 && want_dir && *op->kind == GBR_ERR_NOT_FOUND) {
			/* ENOTDIR: is it the last part that is not a folder? */
			int pfd = osdep_open_beneath(op->sb->roots[root].fd, rel,
			    O_PATH | O_CLOEXEC, 0, 0);
			struct stat pst;

			/*
			 * Only if what is there now is no folder: a folder
			 * renamed in between is a not_found as first said.
			 */
			if (pfd != -1 && (fstat(pfd, &pst) != 0 ||
			    S_ISDIR(pst.st_mode))) {
				close(pfd);
				pfd = -1;
			}
			if (pfd != -1) {
				close(pfd);
				free(*op->reason);
				*op->reason = NULL;
				sb_refuse(op, GBR_ERR_NOT_A_FILE, "not a folder");
			}
		}
	} else {
		if (sb_walk(op, op->sb->roots[root].fd, rel, want_dir ?
		    SB_WANT_DIR : SB_WANT_FILE, &w) != 0)
			fd = -1;
		else {
			fd = w.fd;
			w.fd = -1;
			sb_walk_release(&w);
		}
	}
	if (fd == -1) {
		free(rel);
		return -1;
	}
	if (fstat(fd, st) != 0) {
		sb_refuse_errno(op, errno, "the path");
		goto fail;
	}
	/* What was opened is checked, not only how it was reached. */
	if (osdep_fs_check_final()) {
		char	*frel;

		if ((frel = sb_final_rel(op, root, fd)) == NULL)
			goto fail;
		free(frel);
	}
	if ((own = sb_fd_forbidden(fd)) != NULL) {
		sb_refuse(op, GBR_ERR_PERMISSION_DENIED, "it lies in gbrd's own "
		    "folder %s, which no tool may read", own);
		goto fail;
	}
	if (want_dir && !S_ISDIR(st->st_mode)) {
		sb_refuse(op, GBR_ERR_NOT_A_FILE, "not a folder");
		goto fail;
	}
	if (!want_dir && sb_names_folder(op)) {
		sb_refuse(op, GBR_ERR_NOT_A_FILE, "a path that ends in '/' names "
		    "a folder, and this is a file");
		goto fail;
	}
	if (!want_dir && !S_ISREG(st->st_mode)) {
		sb_refuse(op, GBR_ERR_NOT_A_FILE, "%s, not a regular file",
		    S_ISDIR(st->st_mode) ? "a folder" :
		    S_ISFIFO(st->st_mode) ? "a FIFO" :
		    S_ISSOCK(st->st_mode) ? "a socket" :
		    (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) ? "a device" :
		    "something else");
		goto fail;
	}
	*fdp = fd;
	if (loc != NULL) {
		loc->root = root;
		loc->rel = rel;
	} else
		free(rel);
	return 0;

fail:
	close(fd);
	free(rel);
	return -1;
}

/* Opens a regular file for reading (see sandbox.h). */
int
sandbox_open_file(struct sandbox *sb, const char *path, size_t len, int *fd,
    struct stat *st, struct sandbox_loc *loc, enum gbr_err *kind,
    char **reason)
{
	struct sb_op	op = { sb, path, len, kind, reason, NULL, 0, 0, NULL };

	*reason = NULL;
	return sb_open_read(&op, 0, fd, st, loc);
}

/* Opens a folder for reading (see sandbox.h). */
int
sandbox_open_dir(struct sandbox *sb, const char *path, size_t len, int *fd,
    struct sandbox_loc *loc, enum gbr_err *kind, char **reason)
{
	struct sb_op	op = { sb, path, len, kind, reason, NULL, 0, 0, NULL };

	*reason = NULL;
	return sb_open_read(&op, 1, fd, NULL, loc);
}

/*
 * Reads a whole regular file, opened as fd and described by st, of at
 * most max bytes into a new NUL-terminated buffer. Returns 0, or -1
 * refused (too_large, or the read's errno). Does not close fd.
 */
int
sb_read_fd(struct sb_op *op, int fd, const struct stat *st, size_t max,
    char **data, size_t *dlen)
{
	char		*buf;
	size_t		 used = 0, cap;
	ssize_t		 n;

	*data = NULL;
	*dlen = 0;
	if (st->st_size < 0 || (uintmax_t)st->st_size > max)
		return sb_refuse(op, GBR_ERR_TOO_LARGE,
		    "%jd bytes, over the cap of %zu", (intmax_t)st->st_size, max);
	/* One byte more than the cap, to notice a file that grew. */
	cap = (size_t)st->st_size + 1;
	buf = xmalloc(cap + 1);
	for (;;) {
		if (used == cap) {
			if (cap > max)
				break;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			buf = xreallocarray(buf, cap + 1, 1);
		}
		n = read(fd, buf + used, cap - used);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			int err = errno;

			free(buf);
			return sb_refuse_errno(op, err, "reading the file");
		}
		if (n == 0)
			break;
		used += (size_t)n;
		/*
		 * A short read of a regular file once its size is reached is
		 * its end: no second read to be told so. A file that grew
		 * fills the extra byte and the loop goes on.
		 */
		if (used < cap && used >= (size_t)st->st_size)
			break;
	}
	if (used > max) {
		free(buf);
		return sb_refuse(op, GBR_ERR_TOO_LARGE,
		    "grew over the cap of %zu bytes while being read", max);
	}
	buf[used] = '\0';
	*data = buf;
	*dlen = used;
	return 0;
}

/* Reads a whole regular file under a cap (see sandbox.h). */
int
sandbox_read_file(struct sandbox *sb, const char *path, size_t len,
    size_t max, char **data, size_t *dlen, struct stat *st,
    struct sandbox_loc *loc, enum gbr_err *kind, char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, NULL, 0, 0, NULL };
	struct stat	 sbuf;
	int		 fd, r;

	*reason = NULL;
	*data = NULL;
	*dlen = 0;
	if (st == NULL)
		st = &sbuf;
	if (max == 0 || max > sb->max_read)
		max = sb->max_read;
	if (sb_open_read(&op, 0, &fd, st, loc) != 0)
		return -1;
	r = sb_read_fd(&op, fd, st, max, data, dlen);
	close(fd);
	if (r != 0)
		sandbox_loc_release(loc);
	return r;
}

