/*
 * The sandbox: what the agent's file tools may read and write, enforced by
 * the kernel rather than by string checks (DESIGN.md section 4, layers 1
 * to 3 and the protected-file part of layer 4).
 *
 * A sandbox holds the allowed root and every read-only root open as
 * directory fds for its whole life. An agent's path goes through the
 * lexical gate (pathgate.h), is then resolved beneath a root fd with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) where the kernel has it,
 * else with a per-component openat(O_NOFOLLOW) walk that follows only
 * relative symlinks staying inside; all later work uses the fd it returns.
 * Reads accept regular files only, opened O_NONBLOCK so a FIFO cannot
 * block the loop; writes are atomic (temp file in the same folder, fsync,
 * renameat, fsync of the folder), never go through a hard link, and are
 * refused inside read-only roots and on protected paths.
 *
 * A sandbox is immutable after sandbox_create and owns its fds; a reload
 * builds a new one and frees the old one. Every refusal gives a kind
 * (path_traversal, protected_path, read_only, not_found, not_a_file,
 * too_large, invalid_path, permission_denied, changed_since_approval) and
 * a reason the caller frees, naming the raw path escaped for display.
 *
 * Approvals (approval.h): when a write needs a human, sandbox_check_write
 * pins what it resolved to (struct sandbox_pin: the canonical path and
 * the object there, content hash included). The approved write takes that
 * pin and goes through only if the path still resolves to the same
 * canonical path and the same object; and the approval lifts the
 * protection of that one path, never of another.
 */
#ifndef GBRD_SANDBOX_H
#define GBRD_SANDBOX_H

#include <sys/types.h>
#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "errors.h"
#include "sha256.h"

struct sandbox;

#define SANDBOX_READ_MAX	(16 * 1024 * 1024)	/* default read cap */
#define SANDBOX_WRITE_MAX	(4 * 1024 * 1024)	/* default write cap */

/* What sandbox_create needs; every pointer is borrowed and copied. */
struct sandbox_config {
	const char		*root;		/* absolute path of the allowed root */
	const char *const	*ro_roots;	/* absolute paths of read-only roots */
	size_t			 nro;
	const char *const	*protected;	/* globs, relative to the allowed root */
	size_t			 nprotected;
	const char *const	*literal;	/* protected exact paths, canonical and
						   relative to the allowed root: never
						   read as patterns */
	size_t			 nliteral;
	size_t			 max_read;	/* bytes; 0 means SANDBOX_READ_MAX */
	size_t			 max_write;	/* bytes; 0 means SANDBOX_WRITE_MAX */
};

/* Where a resolved object is: a root and a canonical path beneath it. */
struct sandbox_loc {
	int	 root;		/* 0: the allowed root; 1..n: read-only roots */
	char	*rel;		/* canonical, '/'-joined, "." for the root itself */
};

/*
 * What a write resolved to when a human was asked, and what an approved
 * write must still find: the same canonical path, and there either the
 * same file (device, inode, size, mtime, ctime, and the hash of the bytes
 * the human's diff was made from) or, for a new file, still nothing, below
 * the same folder, in the same allowed root. Strings are owned
 * (sandbox_pin_release).
 */
struct sandbox_pin {
	char		*root;		/* the allowed root's real path */
	char		*rel;		/* canonical path in the allowed root */
	char		*asked;		/* the path as typed, in normal form */
	int		 exists;	/* a regular file was there */
	uint64_t	 dev;		/* exists: the file's; else the deepest */
	uint64_t	 ino;		/* folder of the path that exists */
	int64_t		 size;		/* exists: */
	struct timespec	 mtime;
	struct timespec	 ctime;
	int		 hashed;	/* sha256 is set (the file fit the read cap) */
	unsigned char	 sha256[SHA256_LEN];
};

/* What sandbox_check_write finds (sandbox_check_release frees it). */
struct sandbox_check {
	struct sandbox_pin	 pin;
	int			 protected;	/* a protected pattern or path,
						   .gbr_envs included, matches the
						   typed or the canonical path */
	char			*cur;		/* exists: the content now, read
						   from the pinned file (NUL-
						   terminated; what the hash covers) */
	size_t			 curlen;
	char			*cur_why;	/* exists but cur is NULL: why */
	enum gbr_err		 cur_kind;	/* and its kind (too_large, ...) */
};

/* Creates a sandbox, opening every root. NULL with *cause on failure. */
struct sandbox	*sandbox_create(const struct sandbox_config *, char **cause);
/*
 * gbrd's own folders (state, config, socket): whatever a sandbox's roots
 * hold, nothing in them is ever opened, read, listed, searched or written
 * (permission_denied), checked on the path an open really reached. Once,
 * at start; the paths are copied (resolved where they exist).
 */
void		 sandbox_set_forbidden(const char *const *paths, size_t n);
void		 sandbox_free(struct sandbox *);

/*
 * Opens a regular file for reading: *fd (caller closes), *st from fstat on
 * that fd, *loc (caller frees loc->rel; loc may be NULL). Returns 0, or -1
 * with *kind and *reason (caller frees).
 */
int	 sandbox_open_file(struct sandbox *, const char *path, size_t len,
	    int *fd, struct stat *st, struct sandbox_loc *loc,
	    enum gbr_err *kind, char **reason);
/* Opens a folder for reading (O_DIRECTORY), the same way. */
int	 sandbox_open_dir(struct sandbox *, const char *path, size_t len,
	    int *fd, struct sandbox_loc *loc, enum gbr_err *kind, char **reason);
/*
 * Reads a whole regular file of at most max bytes (0: the sandbox's cap)
 * into a new NUL-terminated buffer. *st (may be NULL) identifies what was
 * read, for sandbox_write_file's expect.
 */
int	 sandbox_read_file(struct sandbox *, const char *path, size_t len,
	    size_t max, char **data, size_t *dlen, struct stat *st,
	    struct sandbox_loc *loc, enum gbr_err *kind, char **reason);

/*
 * Writes data atomically to a file in the allowed root, creating missing
 * folders. If expect is not NULL the file must still be the one it
 * describes (same inode, size and mtime), else GBR_ERR_BUSY. *created says
 * whether the file is new (may be NULL).
 */
int	 sandbox_write_file(struct sandbox *, const char *path, size_t len,
	    const char *data, size_t dlen, const struct stat *expect,
	    int *created, struct sandbox_loc *loc, enum gbr_err *kind,
	    char **reason);

/*
 * sandbox_write_file for a write a human approved (approval.h), pinned by
 * sandbox_check_write when the human was asked: the path must resolve to
 * pin->rel and find the object pinned there, else nothing is written and
 * the kind is changed_since_approval (also for a NULL pin). The protection
 * of pin->rel (and of the typed pin->asked) is lifted, of no other path.
 * Every other rule still holds.
 */
int	 sandbox_write_file_approved(struct sandbox *, const char *path,
	    size_t len, const char *data, size_t dlen,
	    const struct stat *expect, const struct sandbox_pin *pin,
	    int *created, struct sandbox_loc *loc, enum gbr_err *kind,
	    char **reason);
/*
 * Removes a regular file of the allowed root, with every refusal of
 * sandbox_write_file (and BUSY if expect no longer describes it).
 */
int	 sandbox_remove_file(struct sandbox *, const char *path, size_t len,
	    const struct stat *expect, enum gbr_err *kind, char **reason);
/*
 * Checks a write of dlen bytes without writing or creating anything:
 * every refusal of sandbox_write_file but protected_path. Returns 0 with
 * *chk filled (see struct sandbox_check; caller releases), or -1 with
 * *kind and *reason (chk holds nothing).
 */
int	 sandbox_check_write(struct sandbox *, const char *path, size_t len,
	    size_t dlen, struct sandbox_check *chk, enum gbr_err *kind,
	    char **reason);
/* Frees what a check holds (not the struct). */
void	 sandbox_check_release(struct sandbox_check *);
/* Frees what a pin holds (not the struct). */
void	 sandbox_pin_release(struct sandbox_pin *);
/* True if data is the content a pin's hash covers (or it has no hash). */
int	 sandbox_pin_content(const struct sandbox_pin *, const char *data,
	    size_t len);

/*
 * Opens an entry of a folder already opened through this sandbox, never
 * following a symlink: want_dir selects O_DIRECTORY, else a regular file
 * opened O_NONBLOCK. Returns the fd, or -1 with errno (ELOOP for a link,
 * EINVAL for a wrong type). *st is filled from the opened fd.
 */
int	 sandbox_open_child(int dirfd, const char *name, int want_dir,
	    struct stat *st);

/*
 * True if a write to this canonical path of the allowed root is protected
 * (a pattern or a literal path matches).
 */
int	 sandbox_is_protected(const struct sandbox *, const char *rel);
/* The path to show the agent for a location (new string). */
char	*sandbox_display(const struct sandbox *, const struct sandbox_loc *);
/* Roots: count, real absolute path (borrowed), and whether writable. */
int	 sandbox_nroots(const struct sandbox *);
const char *sandbox_root_path(const struct sandbox *, int);
/*
 * For a read-only root inside the allowed root, its canonical path
 * relative to the allowed root (borrowed); NULL for one outside it.
 */
const char *sandbox_root_inside(const struct sandbox *, int);
size_t	 sandbox_max_read(const struct sandbox *);
size_t	 sandbox_max_write(const struct sandbox *);

/* Frees what a sandbox_loc holds (not the struct). */
void	 sandbox_loc_release(struct sandbox_loc *);

/*
 * The raw bytes of an agent's path, made safe to show: control, bidi and
 * line-breaking characters become \u{XXXX}, invalid UTF-8 bytes \x{XX}, a
 * backslash "\\"; over 256 bytes are cut with a note. New string.
 */
char	*sandbox_escape_for_display(const char *raw, size_t len);

/* "openat2" or "openat-walk": how paths are resolved now (daemon.status). */
const char *sandbox_resolver(void);
/* Test-only: 1 forces the openat(O_NOFOLLOW) walk even where openat2 works. */
void	 sandbox_force_fallback(int);
/*
 * Test-only: 1 skips an approved write's pin checks (path and object), to
 * show that the protection of other paths holds without them.
 */
void	 sandbox_test_skip_pin_checks(int);

#endif
