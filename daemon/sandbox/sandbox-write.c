/*
 * The sandbox's writes (see sandbox.c's top): the read-only and protected
 * rules on a canonical path, the pins of what a human approved and their
 * checks, and atomic writes (a new file renamed over the name).
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
#include "paths.h"
#include "sandbox.h"
#include "sandbox-int.h"
#include "xmalloc.h"

/*
 * Checks the read-only and protected rules on one path of the allowed
 * root. An approved write (op->pin) passes the protection of the path the
 * human approved, as resolved (pin->rel) or as typed (pin->asked), and of
 * no other: whatever else a link leads to keeps its own protection.
 */
static int
sb_policy(struct sb_op *op, const char *rel)
{
	struct sandbox	*sb = op->sb;
	const char	*by;
	int		 n, literal;

	for (n = 1; n < sb->nroots; n++) {
		if (sb->roots[n].inside != NULL &&
		    pathgate_is_under(sb->roots[n].inside, rel, PATHGATE_HOST))
			return sb_refuse(op, GBR_ERR_READ_ONLY,
			    "'%s' is inside the read-only root '%s'", rel,
			    sb->roots[n].inside);
	}
	if ((by = sb_protected_by(sb, rel, &literal)) == NULL)
		return 0;
	/* Approvals (toolcall.c): asked first, then written once. */
	if (op->dry) {
		op->protected_hit = 1;
		return 0;
	}
	if (op->pin != NULL && (strcmp(rel, op->pin->rel) == 0 ||
	    (op->pin->asked != NULL && strcmp(rel, op->pin->asked) == 0)))
		return 0;
	return sb_refuse(op, GBR_ERR_PROTECTED_PATH,
	    "'%s' matches the protected %s '%s'; writing it needs a human's "
	    "approval%s", rel, literal ? "path" : "pattern", by,
	    op->pin != NULL ? " (the approval was for another path)" : "");
}

/*
 * Where names alias (osdep_fs_check_final: 8.3 short names, case), the
 * typed path may be another spelling of a protected one ("GLEAM~1.TOM"):
 * the policy also judges the path as the file system spells it, taken
 * from the final paths of the folder and of the file if it exists, and
 * the folder must really lie inside the root. Returns 0 or -1 (refused).
 */
static int
sb_policy_final(struct sb_op *op, const struct sb_walk *w, const char *full)
{
	char	*drel, *frel;
	int	 fd, r;

	if ((drel = sb_final_rel(op, 0, w->dirfd)) == NULL)
		return -1;
	if (w->exists) {
		if ((fd = sb_openat(w->dirfd, w->name, O_PATH | O_CLOEXEC,
		    0)) == -1) {
			free(drel);
			return sb_refuse_errno(op, errno, "the file");
		}
		frel = sb_final_rel(op, 0, fd);
		close(fd);
	} else
		frel = sb_join(strcmp(drel, ".") == 0 ? "" : drel, w->missing);
	free(drel);
	if (frel == NULL)
		return -1;
	r = pathgate_equal(frel, full, PATHGATE_HOST) ? 0 : sb_policy(op, frel);
	free(frel);
	return r;
}

/* True if two timestamps are the same, to the nanosecond. */
static int
sb_same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/*
 * True if st is still the file expect described: same inode, size,
 * modification and change times (an in-place change keeps the inode; the
 * change time is the kernel's own, which no one can set back).
 */
static int
sb_same_file(const struct stat *st, const struct stat *expect)
{
	return st->st_dev == expect->st_dev && st->st_ino == expect->st_ino &&
	    st->st_size == expect->st_size &&
	    sb_same_time(&st->st_mtim, &expect->st_mtim) &&
	    sb_same_time(&st->st_ctim, &expect->st_ctim);
}

/* True if st is the object a pin names (a folder: device and inode only). */
static int
sb_pin_is(const struct sandbox_pin *pin, const struct stat *st)
{
	if ((uint64_t)st->st_dev != pin->dev || (uint64_t)st->st_ino != pin->ino)
		return 0;
	if (!pin->exists)
		return 1;
	return S_ISREG(st->st_mode) && (int64_t)st->st_size == pin->size &&
	    sb_same_time(&st->st_mtim, &pin->mtime) &&
	    sb_same_time(&st->st_ctim, &pin->ctime);
}

/* A refusal of an approved write whose object changed. Returns -1. */
static int __attribute__((format(__printf__, 2, 3)))
sb_changed(struct sb_op *op, const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	sb_refuse(op, GBR_ERR_CHANGED_SINCE_APPROVAL, "%s since a human "
	    "approved the change; nothing was written (the agent may ask "
	    "again)", msg);
	free(msg);
	return -1;
}

/*
 * Opens dirfd/name (never following a link) and reads it whole, if it is
 * the regular file st describes: *data (new, NUL-terminated) or NULL with
 * *why (new) when it cannot be read (over the read cap, unreadable).
 * *now is the file's identity, taken before the read and checked
 * unchanged after it, so the bytes belong to exactly that state. Returns
 * 0, or -1 refused: the file changed under the read (busy), or was
 * replaced since the walk looked (busy).
 */
static int
sb_read_pinned(struct sb_op *op, int dirfd, const char *name,
    const struct stat *st, struct stat *now, char **data, size_t *dlen,
    char **why, enum gbr_err *whykind)
{
	struct sb_op	 sub = *op;
	struct stat	 after;
	char		*r = NULL;
	int		 fd;

	*data = *why = NULL;
	*dlen = 0;
	if ((fd = sb_openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY |
	    O_CLOEXEC, 0)) == -1) {
		if (errno != EACCES && errno != EPERM)
			return sb_refuse(op, GBR_ERR_BUSY, "'%s' changed while "
			    "being checked; try again", name);
		*whykind = GBR_ERR_PERMISSION_DENIED;
		*why = xasprintf("it cannot be opened: %s", strerror(errno));
		if (fstatat(dirfd, name, now, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !sb_same_file(now, st))
			return sb_refuse(op, GBR_ERR_BUSY, "'%s' changed while "
			    "being checked; try again", name);
		return 0;
	}
	if (fstat(fd, now) != 0 || !sb_same_file(now, st)) {
		close(fd);
		return sb_refuse(op, GBR_ERR_BUSY, "'%s' changed while being "
		    "checked; try again", name);
	}
	/* The read's own refusal is not the check's: keep it as a why. */
	sub.kind = whykind;
	sub.reason = &r;
	if (sb_read_fd(&sub, fd, now, op->sb->max_read, data, dlen) != 0) {
		*why = r;
		r = NULL;
	}
	if (fstat(fd, &after) != 0 || !sb_same_file(&after, now)) {
		close(fd);
		free(*data);
		free(*why);
		*data = *why = NULL;
		*dlen = 0;
		return sb_refuse(op, GBR_ERR_BUSY, "'%s' changed while being "
		    "read; try again", name);
	}
	close(fd);
	return 0;
}

/*
 * A dry check found what it would write: fill op->chk's pin (and the
 * current content) from the walk. full is the canonical path.
 */
static int
sb_pin_take(struct sb_op *op, struct sb_walk *w, const char *full,
    const char *asked)
{
	struct sandbox_check	*chk = op->chk;
	struct sandbox_pin	*pin = &chk->pin;
	struct stat		 st;

	if (!w->exists) {
		if (fstat(w->dirfd, &st) != 0)
			return sb_refuse_errno(op, errno, "the folder");
	} else if (sb_read_pinned(op, w->dirfd, w->name, &w->st, &st,
	    &chk->cur, &chk->curlen, &chk->cur_why, &chk->cur_kind) != 0)
		return -1;
	pin->root = xstrdup(op->sb->roots[0].path);
	pin->rel = xstrdup(full);
	pin->asked = xstrdup(asked);
	pin->exists = w->exists;
	pin->dev = (uint64_t)st.st_dev;
	pin->ino = (uint64_t)st.st_ino;
	if (w->exists) {
		pin->size = (int64_t)st.st_size;
		pin->mtime = st.st_mtim;
		pin->ctime = st.st_ctim;
		if (chk->cur != NULL) {
			sha256_buf(chk->cur, chk->curlen, pin->sha256);
			pin->hashed = 1;
		}
	}
	return 0;
}

/*
 * An approved write, first look: does the path still lead where the human
 * was shown, in the same allowed root? Returns 0, or -1 refused
 * (changed_since_approval).
 */
static int
sb_pin_path(struct sb_op *op, const char *full)
{
	const struct sandbox_pin	*pin = op->pin;

	if (pin->root == NULL || strcmp(op->sb->roots[0].path, pin->root) != 0)
		return sb_changed(op, "the allowed root is '%s' now, not the "
		    "'%s' the write was asked in", op->sb->roots[0].path,
		    pin->root != NULL ? pin->root : "(none)");
	if (strcmp(full, pin->rel) != 0)
		return sb_changed(op, "the path leads to '%s' now, not to the "
		    "'%s' a human was shown: a link or folder on the way was "
		    "changed", full, pin->rel);
	return 0;
}

/*
 * An approved write, second look (after the deny rules, which win over a
 * decision): is the object there still what the human was shown? The
 * same file with the same bytes, or still nothing below the same folder.
 * Returns 0, or -1 refused (changed_since_approval saying what changed).
 */
static int
sb_pin_object(struct sb_op *op, struct sb_walk *w, const char *full)
{
	const struct sandbox_pin	*pin = op->pin;
	struct stat			 st;
	enum gbr_err			 whykind;
	char				*data = NULL, *why = NULL;
	size_t				 dlen;
	int				 same;

	if (pin->exists && !w->exists)
		return sb_changed(op, "'%s' was removed", full);
	if (!pin->exists && w->exists)
		return sb_changed(op, "'%s', new when a human was asked, was "
		    "created", full);
	if (!pin->exists) {
		if (fstat(w->dirfd, &st) != 0)
			return sb_refuse_errno(op, errno, "the folder");
		if (!sb_pin_is(pin, &st))
			return sb_changed(op, "the folder '%s' that '%s' would be "
			    "created in was replaced", w->canon[0] != '\0' ?
			    w->canon : ".", full);
		return 0;
	}
	if ((uint64_t)w->st.st_dev != pin->dev ||
	    (uint64_t)w->st.st_ino != pin->ino || !S_ISREG(w->st.st_mode))
		return sb_changed(op, "'%s' was replaced by another file", full);
	if (!sb_pin_is(pin, &w->st))
		return sb_changed(op, "'%s' was modified (its size or times "
		    "differ)", full);
	if (!pin->hashed)
		return 0;
	if (sb_read_pinned(op, w->dirfd, w->name, &w->st, &st, &data, &dlen,
	    &why, &whykind) != 0) {
		/* It changed while being read: that is a change too. */
		free(*op->reason);
		*op->reason = NULL;
		return sb_changed(op, "'%s' was modified", full);
	}
	same = data != NULL && sandbox_pin_content(pin, data, dlen);
	free(data);
	if (!same) {
		sb_changed(op, "'%s' was modified (its bytes are not the ones "
		    "the human's diff was made from%s%s)", full,
		    why != NULL ? ": " : "", why != NULL ? why : "");
		free(why);
		return -1;
	}
	free(why);
	return 0;
}

/* True if data is what a pin's hash covers (see sandbox.h). */
int
sandbox_pin_content(const struct sandbox_pin *pin, const char *data,
    size_t len)
{
	unsigned char	d[SHA256_LEN];

	if (!pin->hashed)
		return 1;
	if ((int64_t)len != pin->size)
		return 0;
	sha256_buf(data, len, d);
	return memcmp(d, pin->sha256, sizeof d) == 0;
}

/* Frees what a pin holds. */
void
sandbox_pin_release(struct sandbox_pin *pin)
{
	if (pin == NULL)
		return;
	free(pin->root);
	free(pin->rel);
	free(pin->asked);
	memset(pin, 0, sizeof *pin);
}

/* Frees what a check holds. */
void
sandbox_check_release(struct sandbox_check *chk)
{
	if (chk == NULL)
		return;
	sandbox_pin_release(&chk->pin);
	free(chk->cur);
	free(chk->cur_why);
	memset(chk, 0, sizeof *chk);
}

/* Writes all of buf to fd. Returns 0 or -1 with errno. */
static int
sb_write_all(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Writes data to dirfd/name atomically: a new temp file in the same folder
 * (O_EXCL, never following a link), written, fsynced, renamed over the
 * name, then the folder fsynced. The old inode is never written.
 */
static int
sb_atomic_write(struct sb_op *op, int dirfd, const char *name,
    const char *data, size_t len, mode_t mode, const struct stat *expect,
    const char *full)
{
	static unsigned	 counter;
	struct stat	 st;
	char		 tmp[64];
	int		 fd = -1, i, err;

	for (i = 0; i < 32; i++) {
		snprintf(tmp, sizeof tmp, ".gbr-%ld-%u.tmp", (long)getpid(),
		    counter++);
		fd = sb_openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_CLOEXEC, 0600);
		if (fd != -1 || errno != EEXIST)
			break;
	}
	if (fd == -1)
		return sb_refuse_errno(op, errno, "creating the temporary file");
	if (sb_write_all(fd, data, len) != 0 || fchmod(fd, mode) != 0 ||
	    fsync(fd) != 0) {
		err = errno;
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return sb_refuse_errno(op, err, "writing the temporary file");
	}
	if (close(fd) != 0) {
		err = errno;
		unlinkat(dirfd, tmp, 0);
		return sb_refuse_errno(op, err, "writing the temporary file");
	}
	if (expect != NULL && (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !sb_same_file(&st, expect))) {
		unlinkat(dirfd, tmp, 0);
		return sb_refuse(op, GBR_ERR_BUSY,
		    "the file changed since it was read; read it again");
	}
	/* Approved: the last look before the rename, as close to it as can be. */
	if (op->pin != NULL) {
		int	there = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
		int	gone = !there && errno == ENOENT;

		if (op->pin->exists ? !there || !sb_pin_is(op->pin, &st) :
		    !gone) {
			unlinkat(dirfd, tmp, 0);
			return sb_changed(op, "'%s' changed while being written",
			    full);
		}
	}
	if (renameat(dirfd, tmp, dirfd, name) != 0) {
		err = errno;
		unlinkat(dirfd, tmp, 0);
		return sb_refuse_errno(op, err, "replacing the file");
	}
	if (fsync(dirfd) != 0 && errno != EINVAL)
		return sb_refuse_errno(op, errno, "syncing the folder");
	return 0;
}

/*
 * The body of the writes: every check, then (unless op->dry) the missing
 * folders and the atomic write. A dry run stops before changing anything
 * and gives the canonical path in loc.
 */
static int
sb_write(struct sb_op *op, const char *data, size_t dlen,
    const struct stat *expect, int *created, struct sandbox_loc *loc)
{
	struct sandbox	*sb = op->sb;
	struct sb_walk	 w;
	struct stat	 st;
	char		*rel, *full = NULL, *comp, *m;
	const char	*name, *own;
	mode_t		 mode = 0644;
	size_t		 clen;
	int		 root, fd;

	*op->reason = NULL;
	if (created != NULL)
		*created = 0;
	if (loc != NULL)
		loc->rel = NULL;
	if (sb_locate(op, &root, &rel) != 0)
		return -1;
	if (root != 0) {
		sb_refuse(op, GBR_ERR_READ_ONLY, "inside the read-only root %s",
		    sb->roots[root].path);
		free(rel);
		return -1;
	}
	if (dlen > sb->max_write) {
		free(rel);
		return sb_refuse(op, GBR_ERR_TOO_LARGE,
		    "%zu bytes, over the write cap of %zu", dlen, sb->max_write);
	}
	if (strcmp(rel, ".") == 0) {
		free(rel);
		return sb_refuse(op, GBR_ERR_NOT_A_FILE, "the root is a folder");
	}
	if (sb_names_folder(op)) {
		free(rel);
		return sb_refuse(op, GBR_ERR_NOT_A_FILE, "a path that ends in "
		    "'/' names a folder; a file is written without it");
	}
	/* The typed path first, then the canonical one once resolved. */
	if (sb_policy(op, rel) != 0) {
		free(rel);
		return -1;
	}
	if (sb_walk(op, sb->roots[0].fd, rel, SB_WANT_WRITE, &w) != 0) {
		free(rel);
		return -1;
	}
	if ((own = sb_fd_forbidden(w.dirfd)) != NULL) {
		sb_refuse(op, GBR_ERR_PERMISSION_DENIED, "it lies in gbrd's own "
		    "folder %s, which no tool may write", own);
		free(rel);
		sb_walk_release(&w);
		return -1;
	}
	if (w.missing == NULL && w.name == NULL) {
		/* A link led back to a folder ("x -> src/.."). */
		sb_refuse(op, GBR_ERR_NOT_A_FILE, "'%s' is a folder",
		    w.canon[0] != '\0' ? w.canon : ".");
		goto fail;
	}
	full = sb_join(w.canon, w.missing != NULL ? w.missing : w.name);
	if (op->pin != NULL && !sb_skip_pin_checks &&
	    sb_pin_path(op, full) != 0)
		goto fail;
	if (sb_policy(op, full) != 0)
		goto fail;
	if (osdep_fs_check_final() && sb_policy_final(op, &w, full) != 0)
		goto fail;
	if (w.exists) {
		if (!S_ISREG(w.st.st_mode)) {
			sb_refuse(op, GBR_ERR_NOT_A_FILE, "'%s' is %s", full,
			    S_ISDIR(w.st.st_mode) ? "a folder" :
			    "not a regular file");
			goto fail;
		}
		if (w.st.st_nlink > 1) {
			sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
			    "'%s' has %ju hard links; gbr never writes through "
			    "a hard link (another name may be outside the root)",
			    full, (uintmax_t)w.st.st_nlink);
			goto fail;
		}
		if ((w.st.st_mode & S_IWUSR) == 0) {
			/* A rename would replace it anyway: respect the mode. */
			sb_refuse(op, GBR_ERR_PERMISSION_DENIED,
			    "'%s' is read-only (mode %03o)", full,
			    (unsigned)(w.st.st_mode & 0777));
			goto fail;
		}
		if (op->pin != NULL && !sb_skip_pin_checks &&
		    sb_pin_object(op, &w, full) != 0)
			goto fail;
		if (expect != NULL && !sb_same_file(&w.st, expect)) {
			sb_refuse(op, GBR_ERR_BUSY,
			    "the file changed since it was read; read it again");
			goto fail;
		}
		mode = w.st.st_mode & 0777;
		name = w.name;
	} else {
		if (op->pin != NULL && !sb_skip_pin_checks &&
		    sb_pin_object(op, &w, full) != 0)
			goto fail;
		if (expect != NULL) {
			sb_refuse(op, GBR_ERR_NOT_FOUND,
			    "'%s' was removed since it was read", full);
			goto fail;
		}
		if (op->dry)
			goto done;	/* a check creates nothing */
		/* Create the missing folders, one O_NOFOLLOW step at a time. */
		m = w.missing;
		for (;;) {
			clen = strcspn(m, "/");
			if (m[clen] == '\0')
				break;
			comp = xstrndup(m, clen);
			if (mkdirat(w.dirfd, comp, 0755) != 0 && errno != EEXIST) {
				sb_refuse_errno(op, errno, "creating a folder");
				free(comp);
				goto fail;
			}
			fd = sb_openat(w.dirfd, comp, O_RDONLY | O_DIRECTORY |
			    O_CLOEXEC, 0);
			free(comp);
			if (fd == -1) {
				sb_refuse_errno(op, errno, "a new folder");
				goto fail;
			}
			close(w.dirfd);
			w.dirfd = fd;
			m += clen + 1;
		}
		name = m;
		if (fstatat(w.dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			/* Appeared meanwhile: do not guess, let the caller retry. */
			if (op->pin != NULL)
				sb_changed(op, "'%s' appeared while being "
				    "created", full);
			else
				sb_refuse(op, GBR_ERR_BUSY, "'%s' appeared while "
				    "being created; try again", full);
			goto fail;
		}
	}
	if (!op->dry && sb_atomic_write(op, w.dirfd, name, data, dlen, mode,
	    expect, full) != 0)
		goto fail;
done:
	if (op->dry && op->chk != NULL && sb_pin_take(op, &w, full, rel) != 0)
		goto fail;
	free(rel);
	if (created != NULL)
		*created = !w.exists;
	sb_walk_release(&w);
	if (loc != NULL) {
		loc->root = 0;
		loc->rel = full;
	} else
		free(full);
	return 0;

fail:
	free(rel);
	free(full);
	sb_walk_release(&w);
	return -1;
}

/* Writes a file atomically in the allowed root (see sandbox.h). */
int
sandbox_write_file(struct sandbox *sb, const char *path, size_t len,
    const char *data, size_t dlen, const struct stat *expect, int *created,
    struct sandbox_loc *loc, enum gbr_err *kind, char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, NULL, 0, 0, NULL };

	return sb_write(&op, data, dlen, expect, created, loc);
}

/* The same write, approved by a human for what the pin names. */
int
sandbox_write_file_approved(struct sandbox *sb, const char *path, size_t len,
    const char *data, size_t dlen, const struct stat *expect,
    const struct sandbox_pin *pin, int *created, struct sandbox_loc *loc,
    enum gbr_err *kind, char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, pin, 0, 0, NULL };

	if (pin == NULL || pin->rel == NULL) {
		*reason = NULL;
		if (created != NULL)
			*created = 0;
		if (loc != NULL)
			loc->rel = NULL;
		return sb_refuse(&op, GBR_ERR_CHANGED_SINCE_APPROVAL, "the "
		    "approval does not record which file it was for (it was "
		    "asked by an older gbrd); nothing was written (the agent "
		    "may ask again)");
	}
	return sb_write(&op, data, dlen, expect, created, loc);
}

/*
 * Removes a regular file of the allowed root (rewind undoing a file the
 * agent created): the same walk and refusals as a write, so nothing
 * outside the root, in a read-only root, protected or reached through a
 * link is ever removed. If expect is not NULL the file must still be that
 * one (BUSY otherwise).
 */
int
sandbox_remove_file(struct sandbox *sb, const char *path, size_t len,
    const struct stat *expect, enum gbr_err *kind, char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, NULL, 0, 0, NULL };
	struct sb_walk	 w;
	char		*rel, *full = NULL;
	const char	*own;
	int		 root, r = -1;

	*reason = NULL;
	if (sb_locate(&op, &root, &rel) != 0)
		return -1;
	if (root != 0 || strcmp(rel, ".") == 0) {
		free(rel);
		return sb_refuse(&op, root != 0 ? GBR_ERR_READ_ONLY :
		    GBR_ERR_NOT_A_FILE, "not a file of the writable root");
	}
	if (sb_policy(&op, rel) != 0 ||
	    sb_walk(&op, sb->roots[0].fd, rel, SB_WANT_WRITE, &w) != 0) {
		free(rel);
		return -1;
	}
	free(rel);
	if ((own = sb_fd_forbidden(w.dirfd)) != NULL) {
		sb_refuse(&op, GBR_ERR_PERMISSION_DENIED, "it lies in gbrd's "
		    "own folder %s", own);
		goto out;
	}
	if (w.missing != NULL || w.name == NULL || !w.exists) {
		sb_refuse(&op, GBR_ERR_NOT_FOUND, "no such file");
		goto out;
	}
	full = sb_join(w.canon, w.name);
	if (sb_policy(&op, full) != 0)
		goto out;
	if (!S_ISREG(w.st.st_mode)) {
		sb_refuse(&op, GBR_ERR_NOT_A_FILE, "'%s' is not a regular file",
		    full);
		goto out;
	}
	if (expect != NULL && !sb_same_file(&w.st, expect)) {
		sb_refuse(&op, GBR_ERR_BUSY, "the file changed since it was "
		    "read; read it again");
		goto out;
	}
	if (unlinkat(w.dirfd, w.name, 0) != 0) {
		sb_refuse_errno(&op, errno, "removing a file");
		goto out;
	}
	(void)fsync(w.dirfd);
	r = 0;
out:
	free(full);
	sb_walk_release(&w);
	return r;
}

/* Every check of a write of dlen bytes, writing nothing (see sandbox.h). */
int
sandbox_check_write(struct sandbox *sb, const char *path, size_t len,
    size_t dlen, struct sandbox_check *chk, enum gbr_err *kind,
    char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, NULL, 1, 0, chk };

	memset(chk, 0, sizeof *chk);
	if (sb_write(&op, NULL, dlen, NULL, NULL, NULL) != 0) {
		sandbox_check_release(chk);
		return -1;
	}
	chk->protected = op.protected_hit;
	return 0;
}

/*
 * True if fd is really an entry of the folder dirfd: its final path's
 * folder is dirfd's final path (as the file system compares names).
 */
static int
sb_is_child(int dirfd, int fd)
{
	char	*dp, *fp, *up;
	int	 yes = 0;

	dp = osdep_fd_path(dirfd);
	fp = osdep_fd_path(fd);
	if (dp != NULL && fp != NULL) {
		up = paths_dirname(fp);
		yes = pathgate_equal(up, dp, PATHGATE_HOST);
		free(up);
	}
	free(dp);
	free(fp);
	return yes;
}

/* Opens a folder's entry without following links (see sandbox.h). */
int
sandbox_open_child(int dirfd, const char *name, int want_dir, struct stat *st)
{
	int	fd;

	if (name[0] == '\0' || strchr(name, '/') != NULL ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		errno = EINVAL;
		return -1;
	}
	fd = sb_openat(dirfd, name, want_dir ? O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC : O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (fstat(fd, st) != 0 || (want_dir ? !S_ISDIR(st->st_mode) :
	    !S_ISREG(st->st_mode))) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	/* Where a link may be followed unseen, the child must be a child. */
	if (osdep_fs_check_final() && !sb_is_child(dirfd, fd)) {
		close(fd);
		errno = ELOOP;
		return -1;
	}
	/* A folder of gbrd's own is not entered (its files are under it). */
	if (want_dir && sb_fd_forbidden(fd) != NULL) {
		close(fd);
		errno = EACCES;
		return -1;
	}
	return fd;
}

