/*
 * The profile watcher behind hot reload (ADR-0012): it notices that a
 * workspace's profiles changed and says which, once per burst. It knows
 * nothing of sessions: the reloader it calls parses and validates the
 * named profile, and swaps it in only if it is good.
 *
 * With inotify it watches <workspace>/.gbr_envs (and the workspace itself,
 * for that folder appearing or going, and for the workspace's own folder
 * being deleted or moved), plus the folders of any extra file
 * added with envwatch_add_file (a profile's system_file). Without inotify,
 * or when asked to, it polls: every poll_ms it compares the mtime, ctime,
 * size and inode of every profile file and extra file with what it saw.
 * Either way, events are debounced: a name is reported once the folder has
 * been quiet for debounce_ms (editors save in bursts), and at the latest
 * max_delay_ms after its first change, so a file rewritten forever is
 * still reported.
 */
#ifndef GBRD_ENVWATCH_H
#define GBRD_ENVWATCH_H

struct event_base;
struct envwatch;

/*
 * Called with a profile name ("default", or the name given with
 * envwatch_add_file) once per debounced change, including deletion. The
 * callback must not free the watcher (mark it and free it from the loop).
 */
typedef void (*envwatch_cb)(const char *name, void *arg);

struct envwatch_opts {
	int	debounce_ms;	/* quiet period; 0 means 200 */
	int	poll_ms;	/* polling period; 0 means 2000 */
	int	max_delay_ms;	/* report at the latest after this; 0 means 2000 */
	int	force_poll;	/* poll even where inotify works */
};

/*
 * Starts watching a workspace's profiles (opts may be NULL). Returns the
 * watcher, or NULL with *cause.
 */
struct envwatch	*envwatch_create(struct event_base *, const char *workspace,
		    const struct envwatch_opts *, envwatch_cb, void *arg,
		    char **cause);
/* Also reports changes of path (an absolute file path) as profile name. */
int		 envwatch_add_file(struct envwatch *, const char *path,
		    const char *name, char **cause);
/*
 * Called, with the watcher's arg, when the workspace's path stops naming
 * the folder it named: deleted, moved away, or another folder put there.
 * It may be called again for the same loss.
 */
typedef void (*envwatch_gone_cb)(void *arg);
void		 envwatch_on_gone(struct envwatch *, envwatch_gone_cb);
/*
 * Watches the folder the workspace's path names now, if the kernel ended
 * the watch on the old one (cheap when it did not), and reports the
 * profiles that differ.
 */
void		 envwatch_rearm(struct envwatch *);
/* Stops watching; frees everything. */
void		 envwatch_free(struct envwatch *);
/* "inotify" or "poll". */
const char	*envwatch_mode(const struct envwatch *);

#endif
