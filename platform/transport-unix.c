/*
 * The channel on Unix: a Unix stream socket (transport.h). Dialing follows
 * tmux's client: the daemon is trusted only after checking who it is. The
 * socket's folder must be ours and closed to others' writes (lstat, before
 * connecting), and the process listening must run as our uid (SO_PEERCRED
 * or getpeereid, right after connect, before a single byte is sent).
 * Another local user who created /tmp/gbr-<uid> first, or who managed to
 * put a socket in our path, never sees our hello, let alone a workspace
 * path. The rest are the plain system calls.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"
#include "transport.h"
#include "xmalloc.h"

/* send(2)'s flag that turns SIGPIPE into EPIPE, where there is one. */
#ifdef MSG_NOSIGNAL
#define TRANSPORT_NOSIGNAL	MSG_NOSIGNAL
#else
#define TRANSPORT_NOSIGNAL	0
#endif

/* Connects a socket to path; returns the fd or -1 with errno set. */
static int
transport_connect(const char *path)
{
	struct sockaddr_un	sa;
	int			fd, saved;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/*
 * Reads the uid of the server on a connected fd, as the kernel recorded it
 * when that server called listen(2). Returns 0, or -1 with errno set
 * (ENOTSUP where the platform has no way to ask).
 */
static int
transport_peer_uid(int fd, uid_t *uid)
{
#if defined(HAVE_DECL_SO_PEERCRED) && HAVE_DECL_SO_PEERCRED
	struct ucred	cred;
	socklen_t	len = sizeof cred;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return -1;
	if (len != sizeof cred) {
		errno = EPROTO;
		return -1;
	}
	*uid = cred.uid;
	return 0;
#elif defined(HAVE_GETPEEREID)
	gid_t	gid;

	return getpeereid(fd, uid, &gid);
#else
	(void)fd;
	(void)uid;
	errno = ENOTSUP;
	return -1;
#endif
}

/*
 * Checks that the server on a connected fd runs as our uid. Fails closed:
 * where the platform cannot tell us who it is, we do not talk to it.
 * Returns 0, or -1 with *cause.
 */
static int
transport_check_peer(int fd, const char *path, char **cause)
{
	uid_t	 uid;
	char	*them;

	if (transport_peer_uid(fd, &uid) != 0) {
		*cause = xasprintf("cannot tell which user serves %s (%s); "
		    "refusing to talk to it", path, strerror(errno));
		return -1;
	}
	if (uid == getuid())
		return 0;
	them = paths_uid_name(uid);
	*cause = xasprintf("refusing the server on %s: it runs as %s, not as "
	    "you (uid %ld), so nothing was sent to it; another user may be "
	    "running a fake gbrd there, so %s", path, them, (long)getuid(),
	    PATHS_SOCKET_WAY_OUT);
	free(them);
	return -1;
}

/* Connects to the daemon, checking its folder before and its uid after. */
int
transport_dial(const char *path, char **cause)
{
	char	*dir;
	int	 fd, r;

	*cause = NULL;
	dir = paths_dirname(path);
	r = paths_check_socket_dir(dir, cause);
	free(dir);
	if (r == -1)
		return -1;
	if (r == 1) {
		errno = ENOENT;		/* no folder: nobody listens there */
		return -1;
	}
	if ((fd = transport_connect(path)) == -1)
		return -1;
	if (transport_check_peer(fd, path, cause) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads from a channel. */
ssize_t
transport_read(int fd, void *buf, size_t len)
{
	return read(fd, buf, len);
}

/* Writes to a channel without SIGPIPE. */
ssize_t
transport_write(int fd, const void *buf, size_t len)
{
	return send(fd, buf, len, TRANSPORT_NOSIGNAL);
}

/* Gathers a write to a channel without SIGPIPE (sendmsg: writev's flags). */
ssize_t
transport_writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct msghdr	msg;

	memset(&msg, 0, sizeof msg);
	msg.msg_iov = (struct iovec *)iov;
	msg.msg_iovlen = (size_t)iovcnt;
	return sendmsg(fd, &msg, TRANSPORT_NOSIGNAL);
}

/* Closes a channel. */
void
transport_close(int fd)
{
	if (fd != -1)
		close(fd);
}

/* Waits on channels. */
int
transport_poll(struct pollfd *fds, unsigned n, int timeout_ms)
{
	return poll(fds, (nfds_t)n, timeout_ms);
}

/* Makes a channel non-blocking. */
int
transport_set_nonblock(int fd)
{
	int	flags;

	if ((flags = fcntl(fd, F_GETFL)) == -1)
		return -1;
	return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Standard output's flags before transport_stdio_take, or -1. */
static int	transport_stdio_flags = -1;

/* Takes standard input and output for a protocol (see transport.h). */
int
transport_stdio_take(int *in_fd, int *out_fd, char **cause)
{
	struct stat	st;
	int		fd;

	*cause = NULL;
	if ((*in_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)) == -1 ||
	    (*out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)) == -1) {
		*cause = xasprintf("stdin and stdout must be open: %s",
		    strerror(errno));
		if (*in_fd != -1)
			close(*in_fd);
		return -1;
	}
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1) {
		*cause = xasprintf("/dev/null: %s", strerror(errno));
		close(*in_fd);
		close(*out_fd);
		return -1;
	}
	dup2(fd, STDIN_FILENO);
	if (dup2(STDERR_FILENO, STDOUT_FILENO) == -1)
		dup2(fd, STDOUT_FILENO);
	close(fd);
	/*
	 * Non-blocking writes to a pipe or socket the client made for us
	 * alone; a terminal or file is shared with others (a shell) and
	 * stays as it is. Reads need no flag: one read after POLLIN never
	 * blocks.
	 */
	transport_stdio_flags = -1;
	if (fstat(*out_fd, &st) == 0 && (S_ISFIFO(st.st_mode) ||
	    S_ISSOCK(st.st_mode)) &&
	    (transport_stdio_flags = fcntl(*out_fd, F_GETFL)) != -1)
		fcntl(*out_fd, F_SETFL, transport_stdio_flags | O_NONBLOCK);
	return 0;
}

/* Reads standard input's copy. */
ssize_t
transport_stdio_read(int fd, void *buf, size_t len)
{
	return read(fd, buf, len);
}

/* Writes standard output's copy (a pipe, a file or a terminal). */
ssize_t
transport_stdio_write(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len);
}

/* Restores standard output's flags (shared with the client) and closes. */
void
transport_stdio_release(int in_fd, int out_fd)
{
	if (out_fd != -1 && transport_stdio_flags != -1)
		fcntl(out_fd, F_SETFL, transport_stdio_flags);
	transport_stdio_flags = -1;
	if (in_fd != -1)
		close(in_fd);
	if (out_fd != -1)
		close(out_fd);
}
