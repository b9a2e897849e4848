/*
 * The local channel between gbr's clients and gbrd (DESIGN.md 3), one
 * interface on both systems: the client's side of reaching the daemon, and
 * the byte I/O both sides do on a connected channel.
 *
 * On Unix the channel is a Unix stream socket and these are the plain
 * calls. On Windows it is a named pipe, which neither libevent nor WSAPoll
 * can wait on: there every connected pipe is bridged to a loopback socket
 * pair (transport-win.c), and callers hold an ordinary SOCKET, passed as
 * an int (Win32 handles fit in 32 bits). So gbrd's loop and the clients'
 * poll loops are the same code on both systems; only these calls differ
 * (recv/WSASend/closesocket/WSAPoll on Windows, where read(2) and close(2)
 * do not work on sockets).
 *
 * A channel from this file is closed with transport_close, never close(2):
 * on Windows that is what lets the bridge deliver the last bytes written
 * before the close.
 */
#ifndef GBR_TRANSPORT_H
#define GBR_TRANSPORT_H

#include <sys/types.h>
#ifdef HAVE_SYS_UIO_H
#include <sys/uio.h>		/* struct iovec; compat-win.h has it on Windows */
#endif
#ifdef HAVE_POLL_H
#include <poll.h>		/* struct pollfd; winsock2.h's on Windows */
#endif

#include <stddef.h>

/*
 * Connects to the daemon at path and checks, before a byte is sent, that
 * it may be trusted: on Unix the socket's folder (paths_check_socket_dir)
 * and the server's uid (SO_PEERCRED or getpeereid); on Windows, where path
 * is a pipe name (\\.\pipe\...), the account the server process runs as.
 * Fails closed where the platform cannot tell. Returns a connected,
 * blocking channel; or -1 with *cause NULL and errno set (ENOENT,
 * ECONNREFUSED) when nobody listens there; or -1 with *cause (the caller
 * frees it) when the folder or the server is refused, or the channel
 * cannot be made.
 */
int	 transport_dial(const char *path, char **cause);

/* read(2) on a channel: bytes read, 0 at the end, or -1 with errno. */
ssize_t	 transport_read(int fd, void *buf, size_t len);
/* write(2) on a channel, never raising SIGPIPE (EPIPE instead). */
ssize_t	 transport_write(int fd, const void *buf, size_t len);
/* writev(2) on a channel, never raising SIGPIPE; may write less. */
ssize_t	 transport_writev(int fd, const struct iovec *iov, int iovcnt);
/* Closes a channel (see the top of this file). */
void	 transport_close(int fd);
/* poll(2) over channels only: n, 0 on timeout, or -1 with errno. */
int	 transport_poll(struct pollfd *fds, unsigned n, int timeout_ms);
/* Makes a channel non-blocking. Returns 0, or -1 with errno. */
int	 transport_set_nonblock(int fd);

/*
 * The standard input and output of a program that speaks a protocol over
 * them (gbrctl mcp), as two descriptors transport_poll can wait on: *in_fd
 * for transport_stdio_read, *out_fd (non-blocking where it is a pipe or a
 * socket the client made for us alone) for transport_stdio_write. The
 * process's own standard input then reads the null device and its
 * standard output goes to standard error, so nothing else can write into
 * the protocol. On Unix they are close-on-exec copies of fds 0 and 1; on
 * Windows, sockets pumped to and from the standard handles by a thread
 * each (transport-pump-win.c). Returns 0, or -1 with *cause.
 */
int	 transport_stdio_take(int *in_fd, int *out_fd, char **cause);
ssize_t	 transport_stdio_read(int fd, void *buf, size_t len);
ssize_t	 transport_stdio_write(int fd, const void *buf, size_t len);
/* Gives them back: the output's flags restored, both closed. */
void	 transport_stdio_release(int in_fd, int out_fd);

#endif
