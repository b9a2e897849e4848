/*
 * The sandbox (see sandbox.h): roots held open as directory fds, kernel
 * path resolution beneath them, object checks, atomic writes, and the
 * protected and read-only rules.
 *
 * Two resolvers give the same answers. With openat2 a read is one call,
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), and the kernel itself
 * refuses "..", absolute symlinks and any link that leaves the root. The
 * walk (no openat2, or sandbox_force_fallback) opens one component at a
 * time with O_NOFOLLOW from the fd of the folder before it; a symlink is
 * read with readlinkat, refused if absolute or if its target climbs above
 * the root (resolved lexically against the real folders walked so far),
 * and otherwise spliced into the path, which is walked again from the
 * root, at most SB_MAX_HOPS times. Writes always use the walk (each step
 * through openat2 when it exists) because the protected and read-only
 * rules must see the canonical path, not the one the agent typed: a link
 * "x -> .gbr_envs" must not make ".gbr_envs/default.ini" writable as
 * "x/default.ini". Both the typed and the canonical paths are checked.
 *
 * ".." in an agent's path is resolved lexically before any lookup (the
 * kernel never sees it), so "link/../x" means "x" whatever "link" is.
 *
 * Hard links: a write never modifies an existing inode, it renames a new
 * file over the name, so even a hard link to a file outside the root
 * cannot carry a write out. On top of that a write to a file whose link
 * count is above one is refused (path_traversal): the other name may be
 * outside, and silently splitting a hard link is not what a human would
 * expect either. Reads of such files are allowed: the kernel cannot tell
 * which name is the "outside" one, and package stores (pnpm) use them.
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
#include "xmalloc.h"

#define SB_MAX_HOPS	40	/* symlinks followed in one resolution (as Linux) */
#define SB_RETRIES	16	/* EAGAIN retries of openat2 (a racing rename) */
#define SB_SHOW_MAX	256	/* bytes of a raw path shown in a reason */

/* The fixed set of protected patterns, whatever the profile says. */
static const char *const sb_always_protected[] = {
	"**/.gbr_envs/**",
};

struct sb_root {
	int	 fd;
	char	*path;		/* realpath at creation */
	char	*given;		/* normal form of the configured path */
	char	*inside;	/* read-only root inside the allowed root: its canonical rel */
};

struct sandbox {
	struct sb_root	*roots;
	int		 nroots;
	char		**protected;
	size_t		 nprotected;
	size_t		 max_read;
	size_t		 max_write;
};

/* One operation in progress: the raw path, for reasons, and the outputs. */
struct sb_op {
	struct sandbox	*sb;
	const char	*raw;
	size_t		 rawlen;
	enum gbr_err	*kind;
	char		**reason;
	int		 approved;	/* a human approved: protected paths are written */
	int		 dry;		/* check only: note a protected match, write nothing */
	int		 protected_hit;	/* dry: a protected pattern matched */
};

/* The result of a walk. */
struct sb_walk {
	int		 dirfd;		/* the folder holding the target (owned) */
	int		 fd;		/* the target when opened (owned), else -1 */
	char		*canon;		/* canonical path of the target's folder ("" = root) */
	char		*name;		/* the target's name in dirfd, NULL for the root */
	char		*missing;	/* write: the part below dirfd that does not exist */
	struct stat	 st;		/* write: lstat of an existing target */
	int		 exists;
};

enum sb_want {
	SB_WANT_FILE,
	SB_WANT_DIR,
	SB_WANT_WRITE,
};

static int	sb_fallback;

/* Forces the walk even where openat2 works (tests only). */
void
sandbox_force_fallback(int on)
{
	sb_fallback = on;
}

/* True if openat2 is used. */
static int
sb_openat2(void)
{
	return !sb_fallback && osdep_have_open_beneath();
}

/* Names the resolver in use. */
const char *
sandbox_resolver(void)
{
	return sb_openat2() ? "openat2" : "openat-walk";
}

/* Makes raw path bytes safe to show (see sandbox.h). */
char *
sandbox_escape_for_display(const char *raw, size_t len)
{
	const unsigned char	*s = (const unsigned char *)raw;
	size_t			 i = 0, n, o = 0, shown, cap;
	uint32_t		 cp;
	char			*out;

	if (raw == NULL)
		return xstrdup("(null)");
	shown = len > SB_SHOW_MAX ? SB_SHOW_MAX : len;
	/* The worst case is "\u{XXXXXX}" (10 bytes) per input byte. */
	cap = shown * 10 + 64;
	out = xmalloc(cap);
	while (i < shown) {
		n = pathgate_utf8_next(s + i, len - i, &cp);
		if (n == 0) {
			o += (size_t)snprintf(out + o, cap - o, "\\x{%02X}", s[i]);
			i++;
			continue;
		}
		if (cp == 0 || pathgate_is_control(cp) || pathgate_is_bidi(cp) ||
		    cp == 0xfeff || (cp >= 0x200b && cp <= 0x200d))
			o += (size_t)snprintf(out + o, cap - o, "\\u{%04X}", cp);
		else if (cp == '\\') {
			out[o++] = '\\';
			out[o++] = '\\';
		} else {
			memcpy(out + o, s + i, n);
			o += n;
		}
		i += n;
	}
	if (shown < len)
		o += (size_t)snprintf(out + o, cap - o, "...(%zu more bytes)",
		    len - shown);
	out[o] = '\0';
	return out;
}

/* Fills the outputs with a refusal naming the raw path. Returns -1. */
static int __attribute__((format(printf, 3, 4)))
sb_refuse(struct sb_op *op, enum gbr_err kind, const char *fmt, ...)
{
	va_list	 ap;
	char	*msg, *shown;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	shown = sandbox_escape_for_display(op->raw, op->rawlen);
	*op->kind = kind;
	*op->reason = xasprintf("'%s': %s", shown, msg);
	free(shown);
	free(msg);
	return -1;
}

/* A refusal for an errno from opening or reading. Returns -1. */
static int
sb_refuse_errno(struct sb_op *op, int err, const char *what)
{
	switch (err) {
	case ENOENT:
		return sb_refuse(op, GBR_ERR_NOT_FOUND, "%s does not exist", what);
	case ENOTDIR:
		return sb_refuse(op, GBR_ERR_NOT_FOUND,
		    "%s does not exist (a part of the path is not a folder)", what);
	case EXDEV:
		return sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
		    "%s leads outside the root (an absolute or escaping symlink)",
		    what);
	case ELOOP:
		return sb_refuse(op, GBR_ERR_PATH_TRAVERSAL,
		    "%s goes through too many symlinks or a /proc magic link",
		    what);
	case ENXIO:
	case ENODEV:
		return sb_refuse(op, GBR_ERR_NOT_A_FILE,
		    "%s is a socket or a device, not a regular file", what);
	case EISDIR:
		return sb_refuse(op, GBR_ERR_NOT_A_FILE, "%s is a folder", what);
	case EACCES:
	case EPERM:
		return sb_refuse(op, GBR_ERR_PERMISSION_DENIED,
		    "%s: permission denied", what);
	case ENAMETOOLONG:
		return sb_refuse(op, GBR_ERR_INVALID_PATH, "%s: name too long",
		    what);
	case EAGAIN:
		return sb_refuse(op, GBR_ERR_BUSY,
		    "%s kept changing during resolution; try again", what);
	case ENOSPC:
	case EDQUOT:
	case EIO:
	case EROFS:
		return sb_refuse(op, GBR_ERR_STORAGE, "%s: %s", what,
		    strerror(err));
	default:
		return sb_refuse(op, GBR_ERR_INTERNAL, "%s: %s", what,
		    strerror(err));
	}
}

/*
 * The real path of an open folder: what the fd is, not what the path
 * was (a link swapped between a check and the open shows here). The
 * kernel's name for the fd in /proc is already canonical, so one readlink
 * gives it (realpath of the /proc link would check every component of it
 * again, a dozen system calls). Else, for a folder since deleted (the name
 * ends in " (deleted)": realpath then decides) or without /proc, realpath
 * of the path.
 */
static char *
sb_fd_path(int fd, const char *p)
{
	static const char	 gone[] = " (deleted)";
	char			 proc[64], buf[PATH_MAX];
	ssize_t			 n;

	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	n = readlink(proc, buf, sizeof buf);
	if (n > 0 && (size_t)n < sizeof buf && buf[0] == '/' &&
	    !((size_t)n >= sizeof gone - 1 &&
	    memcmp(buf + n - (sizeof gone - 1), gone, sizeof gone - 1) == 0))
		return xstrndup(buf, (size_t)n);
	return realpath(p, NULL);
}

/* Creates a sandbox (see sandbox.h). */
struct sandbox *
sandbox_create(const struct sandbox_config *cfg, char **cause)
{
	struct sandbox	*sb;
	struct sb_root	*r;
	char		*real;
	size_t		 i, np;
	int		 n;

	*cause = NULL;
	if (cfg->root == NULL || cfg->root[0] != '/') {
		*cause = xstrdup("the allowed root must be an absolute path");
		return NULL;
	}
	sb = xcalloc(1, sizeof *sb);
	sb->max_read = cfg->max_read != 0 ? cfg->max_read : SANDBOX_READ_MAX;
	sb->max_write = cfg->max_write != 0 ? cfg->max_write : SANDBOX_WRITE_MAX;
	sb->roots = xcalloc(cfg->nro + 1, sizeof *sb->roots);
	for (n = 0; n < (int)cfg->nro + 1; n++) {
		const char	*p = n == 0 ? cfg->root : cfg->ro_roots[n - 1];

		r = &sb->roots[n];
		r->fd = -1;
		sb->nroots = n + 1;
		if (p == NULL || p[0] != '/') {
			*cause = xasprintf("root '%s' is not an absolute path",
			    p == NULL ? "(null)" : p);
			goto fail;
		}
		/* Roots come from the human's profile: following links here is fine. */
		if ((r->fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
		    (real = sb_fd_path(r->fd, p)) == NULL) {
			*cause = xasprintf("%s: %s", p, strerror(errno));
			goto fail;
		}
		r->path = real;
		r->given = pathgate_normalize_absolute(p, strlen(p),
		    PATHGATE_UNIX, NULL);
		if (r->given == NULL)
			r->given = xstrdup(r->path);
		if (n > 0)
			r->inside = pathgate_relative(sb->roots[0].path, r->path,
			    PATHGATE_UNIX);
	}
	np = cfg->nprotected + sizeof sb_always_protected /
	    sizeof sb_always_protected[0];
	sb->protected = xcalloc(np, sizeof *sb->protected);
	for (i = 0; i < cfg->nprotected; i++) {
		const char	*why;

		if (pathgate_glob_check(cfg->protected[i], &why) != 0) {
			*cause = xasprintf("protected pattern '%s': %s",
			    cfg->protected[i], why);
			goto fail;
		}
		sb->protected[sb->nprotected++] = xstrdup(cfg->protected[i]);
	}
	for (i = 0; i < sizeof sb_always_protected /
	    sizeof sb_always_protected[0]; i++)
		sb->protected[sb->nprotected++] = xstrdup(sb_always_protected[i]);
	return sb;

fail:
	sandbox_free(sb);
	return NULL;
}

/* Frees a sandbox and closes its roots. */
void
sandbox_free(struct sandbox *sb)
{
	size_t	i;
	int	n;

	if (sb == NULL)
		return;
	for (n = 0; n < sb->nroots; n++) {
		if (sb->roots[n].fd != -1)
			close(sb->roots[n].fd);
		free(sb->roots[n].path);
		free(sb->roots[n].given);
		free(sb->roots[n].inside);
	}
	free(sb->roots);
	for (i = 0; i < sb->nprotected; i++)
		free(sb->protected[i]);
	free(sb->protected);
	free(sb);
}

/* Frees what a location holds. */
void
sandbox_loc_release(struct sandbox_loc *loc)
{
	if (loc == NULL)
		return;
	free(loc->rel);
	loc->rel = NULL;
}

/* Number of roots (the allowed root first). */
int
sandbox_nroots(const struct sandbox *sb)
{
	return sb->nroots;
}

/* The real path of a root. */
const char *
sandbox_root_path(const struct sandbox *sb, int i)
{
	return (i >= 0 && i < sb->nroots) ? sb->roots[i].path : NULL;
}

/* A read-only root's path inside the allowed root, or NULL. */
const char *
sandbox_root_inside(const struct sandbox *sb, int i)
{
	return (i > 0 && i < sb->nroots) ? sb->roots[i].inside : NULL;
}

/* The read cap in bytes. */
size_t
sandbox_max_read(const struct sandbox *sb)
{
	return sb->max_read;
}

/* The write cap in bytes. */
size_t
sandbox_max_write(const struct sandbox *sb)
{
	return sb->max_write;
}

/* True if writing this canonical path of the allowed root is protected. */
int
sandbox_is_protected(const struct sandbox *sb, const char *rel)
{
	size_t	i;

	/* Case-folded: on a case-insensitive file system both spellings hit. */
	for (i = 0; i < sb->nprotected; i++)
		if (pathgate_glob_match(sb->protected[i], rel,
		    PATHGATE_GLOB_CASEFOLD))
			return 1;
	return 0;
}

/* The path to show the agent for a location. */
char *
sandbox_display(const struct sandbox *sb, const struct sandbox_loc *loc)
{
	const struct sb_root	*r;
	int			 dot = strcmp(loc->rel, ".") == 0;

	if (loc->root <= 0 || loc->root >= sb->nroots)
		return xstrdup(loc->rel);
	r = &sb->roots[loc->root];
	if (r->inside != NULL) {
		if (dot)
			return xstrdup(r->inside);
		if (strcmp(r->inside, ".") == 0)
			return xstrdup(loc->rel);
		return xasprintf("%s/%s", r->inside, loc->rel);
	}
	if (dot)
		return xstrdup(r->path);
	return xasprintf("%s/%s", strcmp(r->path, "/") == 0 ? "" : r->path,
	    loc->rel);
}

/*
 * Maps an agent's path to a root and a normal relative path. Relative
 * paths belong to the allowed root; an absolute one must be under the
 * allowed root or a read-only root (whole components: "/w/proj-evil" is not
 * under "/w/proj"), the most specific root winning.
 */
static int
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
	if (!pathgate_is_absolute(op->raw, op->rawlen, PATHGATE_UNIX)) {
		if ((*rel = pathgate_normalize(op->raw, op->rawlen,
		    PATHGATE_UNIX, &why)) == NULL)
			return sb_refuse(op, why.kind, "%s", why.reason);
		*root = 0;
		return 0;
	}
	if ((abs = pathgate_normalize_absolute(op->raw, op->rawlen,
	    PATHGATE_UNIX, &why)) == NULL)
		return sb_refuse(op, why.kind, "%s", why.reason);
	for (n = 0; n < sb->nroots; n++) {
		for (k = 0; k < 2; k++) {
			const char *p = k == 0 ? sb->roots[n].path :
			    sb->roots[n].given;

			if ((r = pathgate_relative(p, abs, PATHGATE_UNIX)) == NULL)
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
	*rel = best;
	return 0;
}

/*
 * Opens name beneath dirfd, one step: through openat2 refusing every
 * symlink, or openat with O_NOFOLLOW.
 */
static int
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
static char *
sb_join(const char *a, const char *b)
{
	if (a[0] == '\0')
		return xstrdup(b);
	if (b[0] == '\0')
		return xstrdup(a);
	return xasprintf("%s/%s", a, b);
}

/* Frees what a walk holds. */
static void
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
	if (pathgate_check_bytes(target, strlen(target), PATHGATE_UNIX,
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
static int
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
	if (want_dir && !S_ISDIR(st->st_mode)) {
		sb_refuse(op, GBR_ERR_NOT_A_FILE, "not a folder");
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
	struct sb_op	op = { sb, path, len, kind, reason, 0, 0, 0 };

	*reason = NULL;
	return sb_open_read(&op, 0, fd, st, loc);
}

/* Opens a folder for reading (see sandbox.h). */
int
sandbox_open_dir(struct sandbox *sb, const char *path, size_t len, int *fd,
    struct sandbox_loc *loc, enum gbr_err *kind, char **reason)
{
	struct sb_op	op = { sb, path, len, kind, reason, 0, 0, 0 };

	*reason = NULL;
	return sb_open_read(&op, 1, fd, NULL, loc);
}

/* Reads a whole regular file under a cap (see sandbox.h). */
int
sandbox_read_file(struct sandbox *sb, const char *path, size_t len,
    size_t max, char **data, size_t *dlen, struct stat *st,
    struct sandbox_loc *loc, enum gbr_err *kind, char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, 0, 0, 0 };
	struct stat	 sbuf;
	char		*buf;
	size_t		 used = 0, cap;
	ssize_t		 n;
	int		 fd;

	*reason = NULL;
	*data = NULL;
	*dlen = 0;
	if (st == NULL)
		st = &sbuf;
	if (max == 0 || max > sb->max_read)
		max = sb->max_read;
	if (sb_open_read(&op, 0, &fd, st, loc) != 0)
		return -1;
	if (st->st_size < 0 || (uintmax_t)st->st_size > max) {
		close(fd);
		sandbox_loc_release(loc);
		return sb_refuse(&op, GBR_ERR_TOO_LARGE,
		    "%jd bytes, over the cap of %zu", (intmax_t)st->st_size, max);
	}
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

			close(fd);
			free(buf);
			sandbox_loc_release(loc);
			return sb_refuse_errno(&op, err, "reading the file");
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
	close(fd);
	if (used > max) {
		free(buf);
		sandbox_loc_release(loc);
		return sb_refuse(&op, GBR_ERR_TOO_LARGE,
		    "grew over the cap of %zu bytes while being read", max);
	}
	buf[used] = '\0';
	*data = buf;
	*dlen = used;
	return 0;
}

/* Checks the read-only and protected rules on one path of the allowed root. */
static int
sb_policy(struct sb_op *op, const char *rel)
{
	struct sandbox	*sb = op->sb;
	size_t		 i;
	int		 n;

	for (n = 1; n < sb->nroots; n++) {
		if (sb->roots[n].inside != NULL &&
		    pathgate_is_under(sb->roots[n].inside, rel, PATHGATE_UNIX))
			return sb_refuse(op, GBR_ERR_READ_ONLY,
			    "'%s' is inside the read-only root '%s'", rel,
			    sb->roots[n].inside);
	}
	for (i = 0; i < sb->nprotected; i++) {
		if (!pathgate_glob_match(sb->protected[i], rel,
		    PATHGATE_GLOB_CASEFOLD))
			continue;
		/* Approvals (toolcall.c): asked first, then written once. */
		if (op->dry)
			op->protected_hit = 1;
		if (op->dry || op->approved)
			return 0;
		return sb_refuse(op, GBR_ERR_PROTECTED_PATH,
			    "'%s' matches the protected pattern '%s'; writing "
			    "it needs a human's approval", rel, sb->protected[i]);
	}
	return 0;
}

/*
 * True if st is still the file expect described: same inode, size and
 * modification time (an in-place change keeps the inode).
 */
static int
sb_same_file(const struct stat *st, const struct stat *expect)
{
	return st->st_dev == expect->st_dev && st->st_ino == expect->st_ino &&
	    st->st_size == expect->st_size &&
	    st->st_mtim.tv_sec == expect->st_mtim.tv_sec &&
	    st->st_mtim.tv_nsec == expect->st_mtim.tv_nsec;
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
    const char *data, size_t len, mode_t mode, const struct stat *expect)
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
	const char	*name;
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
	/* The typed path first, then the canonical one once resolved. */
	if (sb_policy(op, rel) != 0) {
		free(rel);
		return -1;
	}
	if (sb_walk(op, sb->roots[0].fd, rel, SB_WANT_WRITE, &w) != 0) {
		free(rel);
		return -1;
	}
	free(rel);
	if (w.missing == NULL && w.name == NULL) {
		/* A link led back to a folder ("x -> src/.."). */
		sb_refuse(op, GBR_ERR_NOT_A_FILE, "'%s' is a folder",
		    w.canon[0] != '\0' ? w.canon : ".");
		goto fail;
	}
	full = sb_join(w.canon, w.missing != NULL ? w.missing : w.name);
	if (sb_policy(op, full) != 0)
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
		if (expect != NULL && !sb_same_file(&w.st, expect)) {
			sb_refuse(op, GBR_ERR_BUSY,
			    "the file changed since it was read; read it again");
			goto fail;
		}
		mode = w.st.st_mode & 0777;
		name = w.name;
	} else {
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
			sb_refuse(op, GBR_ERR_BUSY,
			    "'%s' appeared while being created; try again", full);
			goto fail;
		}
	}
	if (!op->dry && sb_atomic_write(op, w.dirfd, name, data, dlen, mode,
	    expect) != 0)
		goto fail;
done:
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
	struct sb_op	 op = { sb, path, len, kind, reason, 0, 0, 0 };

	return sb_write(&op, data, dlen, expect, created, loc);
}

/* The same write, approved by a human: protected paths are written too. */
int
sandbox_write_file_approved(struct sandbox *sb, const char *path, size_t len,
    const char *data, size_t dlen, const struct stat *expect, int *created,
    struct sandbox_loc *loc, enum gbr_err *kind, char **reason)
{
	struct sb_op	 op = { sb, path, len, kind, reason, 1, 0, 0 };

	return sb_write(&op, data, dlen, expect, created, loc);
}

/* Every check of a write of dlen bytes, writing nothing (see sandbox.h). */
int
sandbox_check_write(struct sandbox *sb, const char *path, size_t len,
    size_t dlen, char **rel, int *exists, int *protected, enum gbr_err *kind,
    char **reason)
{
	struct sb_op		 op = { sb, path, len, kind, reason, 0, 1, 0 };
	struct sandbox_loc	 loc;
	int			 created;

	*rel = NULL;
	if (sb_write(&op, NULL, dlen, NULL, &created, &loc) != 0)
		return -1;
	*rel = loc.rel;
	if (exists != NULL)
		*exists = !created;
	if (protected != NULL)
		*protected = op.protected_hit;
	return 0;
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
	return fd;
}
