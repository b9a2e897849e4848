/*
 * The sandbox (see sandbox.h): roots held open as directory fds, kernel
 * path resolution beneath them, object checks, atomic writes, and the
 * protected and read-only rules. This file holds the roots, the rules and
 * refusals; sandbox-resolve.c the two resolvers and reads; sandbox-write.c
 * the pins of approved writes and the atomic writes (sandbox-int.h).
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
 * Approvals: a write that needs a human is checked dry first
 * (sandbox_check_write), which pins what the walk found: the canonical
 * path and, from the same folder fd, the file's identity and a hash of
 * the bytes read from it (what the human's diff is made from), or, for a
 * new file, the folder it would be created in. The approved write walks
 * again and must end at the same canonical path and find the same object
 * (checked once after the walk and again just before the rename); the
 * pin lifts the protection of its own path only, so a link swapped in
 * meanwhile (gleam.toml -> .gbr_envs/default.ini) meets the protection of
 * what it leads to even if the identity check were wrong.
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

#include "escape.h"
#include "osdep-fs.h"
#include "pathgate.h"
#include "paths.h"
#include "sandbox.h"
#include "sandbox-int.h"
#include "xmalloc.h"

/* The fixed set of protected patterns, whatever the profile says. */
static const char *const sb_always_protected[] = {
	"**/.gbr_envs/**",
};


static int	sb_fallback;
int		sb_skip_pin_checks;	/* tests only: see sandbox.h */

/* Forces the walk even where openat2 works (tests only). */
void
sandbox_force_fallback(int on)
{
	sb_fallback = on;
}

/* Skips the pin checks of approved writes (tests only). */
void
sandbox_test_skip_pin_checks(int on)
{
	sb_skip_pin_checks = on;
}

/* True if openat2 is used. */
int
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
	char	*shown, *out;

	if (raw == NULL)
		return xstrdup("(null)");
	shown = escape_string(raw, len, ESCAPE_PATH | ESCAPE_CODES |
	    ESCAPE_BACKSLASH, SB_SHOW_MAX, NULL);
	if (len <= SB_SHOW_MAX)
		return shown;
	/* Counted from the cut, even when its last character runs past it. */
	out = xasprintf("%s...(%zu more bytes)", shown, len - SB_SHOW_MAX);
	free(shown);
	return out;
}

/* Fills the outputs with a refusal naming the raw path. Returns -1. */
int __attribute__((format(__printf__, 3, 4)))
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
int
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
 * gbrd's own folders (its state with the disk log, its config and the
 * providers' keys, its socket): never reachable through the file tools,
 * whatever the roots say (a workspace of $HOME, read_only_roots = /).
 * Checked on what an open really reached (the descriptor's path, from the
 * kernel), so no spelling or link gets around it. Set once at start.
 */
static char	**sb_forbidden;
static size_t	  sb_nforbidden;

/* Takes gbrd's own folders (see above); paths that do not exist are kept too. */
void
sandbox_set_forbidden(const char *const *paths, size_t n)
{
	char	*r;
	size_t	 i;

	for (i = 0; i < sb_nforbidden; i++)
		free(sb_forbidden[i]);
	free(sb_forbidden);
	sb_forbidden = xcalloc(n + 1, sizeof *sb_forbidden);
	sb_nforbidden = 0;
	for (i = 0; i < n; i++) {
		if (paths[i] == NULL || !paths_is_absolute(paths[i]))
			continue;
		r = realpath(paths[i], NULL);
		sb_forbidden[sb_nforbidden++] = r != NULL ? r : xstrdup(paths[i]);
	}
}

/* The forbidden folder fd lies in (borrowed), or NULL. */
const char *
sb_fd_forbidden(int fd)
{
	char	*path;
	size_t	 i, len;

	if (sb_nforbidden == 0 || (path = osdep_fd_path(fd)) == NULL)
		return NULL;
	for (i = 0; i < sb_nforbidden; i++) {
		len = strlen(sb_forbidden[i]);
		if (strncmp(path, sb_forbidden[i], len) == 0 &&
		    (path[len] == '/' || path[len] == '\0')) {
			free(path);
			return sb_forbidden[i];
		}
	}
	free(path);
	return NULL;
}

/*
 * The real path of an open folder: what the fd is, not what the path
 * was (a link swapped between a check and the open shows here). Else, for
 * a folder since deleted (realpath then decides) or where the system
 * cannot tell, realpath of the path.
 */
static char *
sb_fd_path(int fd, const char *p)
{
	char	*path;

	if ((path = osdep_fd_path(fd)) != NULL)
		return path;
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
	if (cfg->root == NULL || !paths_is_absolute(cfg->root)) {
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
		if (p == NULL || !paths_is_absolute(p)) {
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
		    PATHGATE_HOST, NULL);
		if (r->given == NULL)
			r->given = xstrdup(r->path);
		if (n > 0)
			r->inside = pathgate_relative(sb->roots[0].path, r->path,
			    PATHGATE_HOST);
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
	sb->literal = xcalloc(cfg->nliteral + 1, sizeof *sb->literal);
	for (i = 0; i < cfg->nliteral; i++) {
		const char	*l = cfg->literal[i];

		if (l == NULL || l[0] == '\0' || l[0] == '/' ||
		    paths_is_absolute(l)) {
			*cause = xasprintf("protected path '%s': not a path "
			    "relative to the root", l == NULL ? "(null)" : l);
			goto fail;
		}
		sb->literal[sb->nliteral++] = xstrdup(l);
	}
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
	for (i = 0; i < sb->nliteral; i++)
		free(sb->literal[i]);
	free(sb->literal);
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

/*
 * The protected pattern or literal path that matches a path of the
 * allowed root (borrowed), or NULL. Case-folded both: on a
 * case-insensitive file system both spellings hit. A literal is compared
 * as a whole string, so "prompts/[x].md" is that name and nothing else.
 */
const char *
sb_protected_by(const struct sandbox *sb, const char *rel, int *literal)
{
	size_t	i;

	*literal = 0;
	for (i = 0; i < sb->nprotected; i++)
		if (pathgate_glob_match(sb->protected[i], rel,
		    PATHGATE_GLOB_CASEFOLD))
			return sb->protected[i];
	*literal = 1;
	for (i = 0; i < sb->nliteral; i++)
		if (pathgate_equal(sb->literal[i], rel, PATHGATE_WINDOWS))
			return sb->literal[i];
	return NULL;
}

/* True if writing this canonical path of the allowed root is protected. */
int
sandbox_is_protected(const struct sandbox *sb, const char *rel)
{
	int	literal;

	return sb_protected_by(sb, rel, &literal) != NULL;
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

