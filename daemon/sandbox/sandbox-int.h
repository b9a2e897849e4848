/*
 * What the files of the sandbox share (sandbox.h is the public face):
 * sandbox.c holds the roots, the rules (protected, read-only, gbrd's own
 * folders) and refusals; sandbox-resolve.c maps a path to a root and walks
 * it to an open folder and name (openat2 or one component at a time) and
 * serves reads; sandbox-write.c pins what a human approved and writes
 * atomically.
 */
#ifndef GBRD_SANDBOX_INT_H
#define GBRD_SANDBOX_INT_H

#include <sys/types.h>
#include <sys/stat.h>

#include <stddef.h>

#include "errors.h"
#include "sandbox.h"

#define SB_MAX_HOPS	40	/* symlinks followed in one resolution (as Linux) */
#define SB_RETRIES	16	/* EAGAIN retries of openat2 (a racing rename) */
#define SB_SHOW_MAX	256	/* bytes of a raw path shown in a reason */

/* The fixed set of protected patterns, whatever the profile says. */

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
	char		**literal;	/* protected exact paths (canonical) */
	size_t		 nliteral;
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
	const struct sandbox_pin *pin;	/* approved: what the human saw */
	int		 dry;		/* check only: note a protected match, write nothing */
	int		 protected_hit;	/* dry: a protected pattern matched */
	struct sandbox_check *chk;	/* dry: the pin and content found, or NULL */
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

/* Tests only: approved writes skip their pin checks (sandbox.h). */
extern int	 sb_skip_pin_checks;

/* sandbox.c: the rules, refusals and gbrd's own folders. */
const char	*sb_fd_forbidden(int fd);
int	 sb_openat2(void);
const char	*sb_protected_by(const struct sandbox *sb, const char *rel,
	    int *literal);
int	 sb_refuse(struct sb_op *op, enum gbr_err kind, const char *fmt,
	    ...) __attribute__((format(__printf__, 3, 4)));
int	 sb_refuse_errno(struct sb_op *op, int err, const char *what);

/* sandbox-resolve.c: locating, walking and reading. */
char	*sb_join(const char *a, const char *b);
/* True if the agent's path ends in a separator (it names a folder). */
int	 sb_names_folder(const struct sb_op *op);
/*
 * Where osdep_fs_check_final says so: the path of what fd is now, relative
 * to root's own final path (its long names, as the file system spells
 * them), or NULL with op refused (path_traversal) when it is not beneath
 * the root or cannot be told (fail closed). A new string.
 */
char	*sb_final_rel(struct sb_op *op, int root, int fd);
int	 sb_locate(struct sb_op *op, int *root, char **rel);
int	 sb_openat(int dirfd, const char *name, int flags, mode_t mode);
int	 sb_read_fd(struct sb_op *op, int fd, const struct stat *st,
	    size_t max, char **data, size_t *dlen);
int	 sb_walk(struct sb_op *op, int rootfd, const char *rel,
	    enum sb_want want, struct sb_walk *w);
void	 sb_walk_release(struct sb_walk *w);

#endif
