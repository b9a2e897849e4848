/*
 * The service manager's side of starting gbrd: socket activation
 * (sd_listen_fds(3): the manager holds the listening socket and hands it to
 * us as fd 3) and telling whether a manager started us at all, in which
 * case gbrd stays in the foreground by default.
 */
#ifndef GBRD_SDACTIVATE_H
#define GBRD_SDACTIVATE_H

/*
 * Tells whether a service manager started this process: $NOTIFY_SOCKET is
 * set, $LISTEN_PID names us, or $INVOCATION_ID is set and standard input is
 * not a terminal (desktop terminals started by systemd leak INVOCATION_ID
 * into interactive shells). Call before sdactivate_listen_fd, which clears
 * the LISTEN_* variables.
 */
int	 sdactivate_managed(void);
/*
 * Takes the listening socket passed by the service manager, if any, and
 * clears LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES so that children do not
 * see them. Returns 1 and sets *fd and *path (a new string) when one
 * listening Unix stream socket with a path in a private folder was passed,
 * 0 when none was, and -1 with *cause when what was passed cannot be served.
 */
int	 sdactivate_listen_fd(int *fd, char **path, char **cause);
/* Tells whether the socket served came from the service manager. */
int	 sdactivate_used(void);

#endif
