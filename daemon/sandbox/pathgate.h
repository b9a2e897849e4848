/*
 * The lexical gate: the first of the sandbox's layers (DESIGN.md section 4).
 * Pure code, no I/O: it decides from the bytes alone whether a path an agent
 * sent may even be looked at, and turns it into one normal form. Both the
 * Unix and the Windows rules live here and are chosen by a parameter, so
 * both are unit-tested and fuzzed on every OS.
 *
 * Normal forms: a relative path is its components joined with '/' ("." for
 * the root itself), never holding "", "." or ".." components; an absolute
 * path is "/a/b" (Unix) or "C:/a/b" (Windows, drive letter upper-cased).
 * ".." is resolved lexically, and a path whose ".." would ever climb above
 * its start ("a/../../b") is refused, not clamped.
 *
 * Refusals carry an error kind (path_traversal for where a path points,
 * invalid_path for what it is made of) and a static English reason.
 */
#ifndef GBRD_PATHGATE_H
#define GBRD_PATHGATE_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define PATHGATE_PATH_MAX	4096	/* bytes in a whole path */
#define PATHGATE_NAME_MAX	255	/* bytes in one component */

enum pathgate_flavour {
	PATHGATE_UNIX = 0,
	PATHGATE_WINDOWS,
};

/*
 * The flavour of the system gbrd runs on, for its own paths (workspaces,
 * roots, what a symlink points at) and the agent's: the Windows rules on a
 * Windows build, where a path is "C:/..." and names compare without case.
 */
#ifdef GBR_PATHS_WINDOWS
#define PATHGATE_HOST	PATHGATE_WINDOWS
#else
#define PATHGATE_HOST	PATHGATE_UNIX
#endif

/* Why a path was refused: reason is a static string. */
struct pathgate_refusal {
	enum gbr_err	 kind;
	const char	*reason;
};

/*
 * Normalises a relative path of len bytes. Returns a new string the caller
 * frees, or NULL with *why filled (absolute paths are refused here).
 */
char	*pathgate_normalize(const char *path, size_t len,
	    enum pathgate_flavour, struct pathgate_refusal *why);
/*
 * Checks only the bytes of a path (length, NUL, UTF-8, controls, bidi, and
 * the Windows reserved characters), without looking at its components:
 * for symlink targets, whose ".." must be resolved against real folders.
 * Returns 0, or -1 with *why.
 */
int	 pathgate_check_bytes(const char *path, size_t len,
	    enum pathgate_flavour, struct pathgate_refusal *why);
/* Normalises an absolute path. Returns a new string, or NULL with *why. */
char	*pathgate_normalize_absolute(const char *path, size_t len,
	    enum pathgate_flavour, struct pathgate_refusal *why);
/*
 * True if the path looks absolute in this flavour: on Windows that
 * includes drive-relative "C:x", rooted "\x", UNC and device prefixes.
 */
int	 pathgate_is_absolute(const char *path, size_t len,
	    enum pathgate_flavour);

/*
 * True if path is root itself or inside it, comparing whole components
 * ("/w/proj-evil" is not under "/w/proj"), case-insensitively on Windows.
 * Both are normalised first (both absolute or both relative); anything
 * the gate refuses is not under anything.
 */
int	 pathgate_is_under(const char *root, const char *path,
	    enum pathgate_flavour);
/*
 * If path is under root, returns path relative to root as a new normal
 * relative path ("." when equal); else NULL.
 */
char	*pathgate_relative(const char *root, const char *path,
	    enum pathgate_flavour);
/* Compares two names or normal paths as the flavour's file system would. */
int	 pathgate_equal(const char *a, const char *b, enum pathgate_flavour);

/*
 * Glob matching over normal relative paths: '*', '?' and [classes] never
 * match '/', a component that is exactly "**" matches any number of
 * components (FNM_PATHNAME semantics plus globstar). Empty and "."
 * components are ignored on both sides ("./a//b/" is "a/b"). Time is at most
 * pattern length times path length, never exponential (glibc's fnmatch
 * backtracks on every '*'). Returns 1 on a match.
 */
#define PATHGATE_GLOB_CASEFOLD	0x1
int	 pathgate_glob_match(const char *pattern, const char *path, int flags);
/* Checks a glob's syntax; returns 0, or -1 with a static *reason. */
int	 pathgate_glob_check(const char *pattern, const char **reason);

/* True for C0/C1 controls, DEL, line/paragraph separators. */
int	 pathgate_is_control(uint32_t cp);
/* True for what shows nothing and some file systems ignore in names. */
int	 pathgate_is_invisible(uint32_t cp);

#endif
