/*
 * Confining one thread of gbrd by the kernel (Landlock on Linux): what
 * the thread may open from then on, whatever path it is handed. The
 * shadow store's worker (tools/shadow-work.c) takes each snapshot on a
 * thread confined this way, so that a workspace folder swapped for a link
 * under libgit2's walk cannot make gbrd read a file outside the workspace.
 *
 * A thread is confined for the rest of its life and never widened: give
 * it a thread of its own that ends with the work.
 */
#ifndef GBRD_TCONFINE_H
#define GBRD_TCONFINE_H

/*
 * The kernel's Landlock ABI, or 0 with *why (a static string) where this
 * system has none (old kernel, disabled, not Linux) or only ABI 1 (which
 * denies linking a file into another folder: libgit2 needs it).
 */
int	tconfine_abi(const char **why);
/*
 * Confines the calling thread: from now on it may read (files and
 * folders) beneath read_root only and read and write beneath rw_dir only;
 * it gets no_new_privs. Returns 0, or -1 with *cause (then it may be
 * confined in part: it must not go on with the work).
 */
int	tconfine_enter(const char *read_root, const char *rw_dir,
	    char **cause);

#endif
