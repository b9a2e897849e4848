/*
 * Where gbr's files live (DESIGN.md section 3): the socket, the state folder
 * and the daemon config. Shared by the daemon and the clients so that both
 * always agree. Every function returns a new string the caller frees.
 */
#ifndef GBR_PATHS_H
#define GBR_PATHS_H

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
/* The folder part of a path. */
char	*paths_dirname(const char *);

/*
 * Makes sure dir is a private folder: creates it (mode 0700) if missing,
 * creating missing parents too when parents is set; then checks with lstat
 * that it is a real directory (not a symlink), owned by us, with no group or
 * other permission bits. On failure returns -1 and sets *cause.
 */
int	 paths_private_dir(const char *dir, int parents, char **cause);

#endif
