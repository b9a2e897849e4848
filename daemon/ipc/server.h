/*
 * The listening socket: where it lives, who may connect, and the lock that
 * makes sure only one gbrd serves one socket.
 */
#ifndef GBRD_SERVER_H
#define GBRD_SERVER_H

#include <jansson.h>

struct event_base;

/*
 * Takes the lock beside path and listens on path. A stale socket from a dead
 * daemon is replaced; a live daemon is never displaced. Returns -1 and sets
 * *cause on failure. Done before going to the background, so that every
 * reason not to start reaches the terminal; the socket survives the fork.
 */
int	 server_listen(const char *path, char **cause);
/*
 * Takes an already listening socket (socket activation) and the lock beside
 * path, so one daemon per socket still holds. The socket file belongs to
 * the service manager and is never unlinked.
 */
int	 server_adopt(int fd, const char *path, char **cause);
/* Starts accepting from the event loop. */
void	 server_start(struct event_base *);
/* Stops listening, removes the socket if we made it, drops the lock. */
void	 server_close(void);
/* The socket path served. */
const char *server_path(void);
/* Connections refused since start, by reason (a new JSON object). */
json_t	*server_status(void);

#endif
