/*
 * Where gbr's files live (DESIGN.md section 3): the socket, the state folder
 * and the daemon config. Shared by the daemon and the clients so that both
 * always agree. Every function returns a new string the caller frees.
 *
 * paths-unix.c follows XDG; paths-win.c gives the named pipe
 * \\.\pipe\gbr-USER, %LOCALAPPDATA%\gbr\state and %APPDATA%\gbr\gbrd.conf,
 * and writes folders with forward slashes ("C:/Users/alice/...").
 */
#ifndef GBR_PATHS_H
#define GBR_PATHS_H

#include <sys/types.h>

/* What a refusal of the socket folder or server tells a person to do. */
#define PATHS_SOCKET_WAY_OUT \
	"set XDG_RUNTIME_DIR or GBR_SOCKET to a folder of your own"

/* flag, else $GBR_SOCKET, else $XDG_RUNTIME_DIR/gbr/gbrd.sock, else /tmp/gbr-$UID/gbrd.sock. */
char	*paths_socket(const char *flag);
/* flag, else $GBR_STATE_DIR, else $XDG_STATE_HOME/gbr, else ~/.local/state/gbr. */
char	*paths_state_dir(const char *flag);
/*
 * flag, else $GBR_CONFIG, else $XDG_CONFIG_HOME/gbr/gbrd.conf (or
 * ~/.config/gbr/gbrd.conf) if it exists, else SYSCONFDIR/gbr/gbrd.conf if it
 * exists; NULL when there is none (built-in defaults).
 */
char	*paths_config(const char *flag);
/*
 * What --help says of the defaults on this system (static text): where
 * the socket or pipe, the state folder and the config are looked for.
 */
extern const char	paths_help_socket[];
extern const char	paths_help_state[];
extern const char	paths_help_config[];
/*
 * The user's own gbr config folder ($XDG_CONFIG_HOME/gbr or ~/.config/gbr;
 * %APPDATA%/gbr on Windows), which holds gbrd.conf and the keys: a new
 * string, or NULL when there is no home to tell it from.
 */
char	*paths_user_config_dir(void);

/* The folder part of a path. */
char	*paths_dirname(const char *);
/*
 * 1 if path is absolute as this system means it: "/..." on Unix, a drive
 * letter with its root ("C:/...", "C:\\...") on Windows.
 */
int	 paths_is_absolute(const char *path);
/*
 * The length of an absolute path's root, what a walk down its folders
 * starts after: 1 for "/x" on Unix, 3 for "C:/x" on Windows; 0 for a
 * path that is not absolute.
 */
size_t	 paths_root_len(const char *path);
/*
 * The user's home folder (new string), for what must be kept from the
 * agent and for the agent's caches: $HOME when it is absolute; on
 * Windows else %USERPROFILE%, else the profile folder, written with
 * forward slashes. NULL when there is none.
 */
char	*paths_home_dir(void);

/*
 * Makes sure dir is a private folder: creates it (mode 0700) if missing,
 * creating missing parents too when parents is set; then checks with lstat
 * that it is a real directory (not a symlink), owned by us, with no group or
 * other permission bits (on Windows: made with a DACL for us alone, and
 * refused when its DACL lets another account read or write in it). On
 * failure returns -1 and sets *cause.
 */
int	 paths_private_dir(const char *dir, int parents, char **cause);

/*
 * Checks, before a client trusts a socket in it, the folder dir (never
 * creating it): with lstat, it must be a real directory (not a symlink),
 * owned by our uid, and writable by neither group nor others. Unlike
 * paths_private_dir it lets others read and search the folder: that shows
 * them only a socket they may not use, while write permission would let
 * them replace it. Returns 0 when the folder is fine, 1 when it does not
 * exist (nobody can listen there yet), or -1 with *cause (the caller frees
 * it) saying which folder, its owner and mode, and the way out.
 */
int	 paths_check_socket_dir(const char *dir, char **cause);

/*
 * Checks that the open file fd (path names it in messages) is ours
 * alone, as a key must be: no other account may read or change it. Unix
 * asks its mode (no group or other bit); Windows, where a mode means
 * nothing, its DACL (no entry lets an account other than ours, SYSTEM or
 * the Administrators, who can take any file anyway, read or change it).
 * Returns 0, or -1 with *cause (the caller frees it) saying what lets
 * others in and how to make the file private.
 */
int	 paths_fd_private(int fd, const char *path, char **cause);

/* Names a user for a person: "alice (uid 1000)", or "uid 1000" alone. */
char	*paths_uid_name(uid_t);

#endif
