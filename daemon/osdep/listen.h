/*
 * gbrd's side of the local channel (DESIGN.md 3): where it listens, the
 * rule of one daemon per socket or pipe, and each new connection with what
 * the system says of its peer. Policy (who is let in, how many) is the
 * listener's above (daemon/ipc/server.c); this is the mechanism, one file
 * per system:
 * - Unix (listen-unix.c): a Unix stream socket in a private folder,
 *   created under a 0177 umask, with a lock file beside it that decides
 *   which daemon owns it (a stale socket from a dead daemon is replaced,
 *   a live daemon never displaced); peers by SO_PEERCRED or getpeereid.
 * - Windows (listen-win.c): a named pipe with an owner-only DACL, remote
 *   clients rejected, one daemon per pipe name (a named mutex and the
 *   first-instance flag); a thread takes each pipe client, tells its
 *   account, and hands it to the loop as a bridged socket
 *   (platform/transport-win.h), so the loop waits on sockets only.
 * The connections are channels of platform/transport.h.
 */
#ifndef GBRD_LISTEN_H
#define GBRD_LISTEN_H

#include <sys/types.h>

#include <jansson.h>

/* What the system says of a new connection's peer. */
struct listen_peer {
	uid_t	uid;	/* Windows: COMPAT_UID_SELF for our account, else OTHER */
	pid_t	pid;	/* -1 when unknown */
	int	known;	/* 0: uid could not be told (refuse: fail closed) */
};

/*
 * Listens on path (a socket path, or a pipe name on Windows), making sure
 * no other gbrd serves it. Returns 0, or -1 with *cause (the caller frees
 * it). Done before going to the background, so that every reason not to
 * start reaches the terminal; on Unix the socket survives the fork.
 */
int		 listen_open(const char *path, char **cause);
/*
 * Serves an already listening socket (socket activation), still taking
 * the lock beside path so one daemon per socket holds; the socket file is
 * the service manager's and is never removed. Windows: -1, ENOTSUP.
 */
int		 listen_adopt(int fd, const char *path, char **cause);
/*
 * Called once the daemon runs in its final process, before the loop
 * watches listen_fd: Unix writes the new pid into the lock (going to the
 * background forked in between).
 */
void		 listen_start(void);
/* What the loop watches for EV_READ: a connection may be waiting. */
int		 listen_fd(void);
/*
 * Takes the next connection: 1 with a non-blocking channel in *fd and its
 * peer; 0 when none is waiting; -1 with errno (EMFILE and ENFILE when out
 * of descriptors: the caller must see those).
 */
int		 listen_accept(int *fd, struct listen_peer *peer);
/*
 * Stops listening: the socket we made is removed (a pipe goes with its
 * last handle), connections not yet taken are closed, the lock dropped.
 * Windows: then waits up to 2 s for the connections closed before to pass
 * their last bytes on (their bridges would die with the process).
 */
void		 listen_close(void);
/* The socket path or pipe name served (borrowed), or NULL. */
const char	*listen_path(void);
/*
 * The layers that keep other users off the channel on this system, for
 * daemon.status: {kind, ...}, a new reference (see PROTOCOL.md).
 */
json_t		*listen_layers(void);

#endif
