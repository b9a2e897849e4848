/*
 * activate.c owns the hand-over of a listening socket from the service
 * manager (socket activation): with gbrd.socket, systemd creates
 * $XDG_RUNTIME_DIR/gbr/gbrd.sock, listens on it, and starts gbrd on the
 * first connection with the socket as fd 3, $LISTEN_FDS=1 and $LISTEN_PID
 * set to gbrd's pid. The variables are read once and cleared, as
 * sd_listen_fds(3) does, so that processes gbrd starts do not take them as
 * their own. With libsystemd the reading is sd_listen_fds(); without it the
 * same few lines are parsed here.
 *
 * The socket is checked before it is served: it must be a listening Unix
 * stream socket bound to a path (never abstract, DESIGN.md 3), and its
 * folder must be private, the same rule server_listen applies to a socket
 * gbrd creates itself. The manager owns the socket file: gbrd never
 * unlinks it.
 */
#include "gbr-config.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "sdactivate.h"
#include "log.h"
#include "paths.h"
#include "xmalloc.h"

/* The first passed descriptor (SD_LISTEN_FDS_START). */
#define ACTIVATE_FD_START	3

static int	sdactivate_socket_used;

/* Tells whether $LISTEN_PID is set and names this process. */
static int
sdactivate_pid_is_us(void)
{
	const char	*s = getenv("LISTEN_PID");
	char		*end;
	long long	 pid;

	if (s == NULL || *s < '1' || *s > '9')
		return 0;
	errno = 0;
	pid = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0' && pid == (long long)getpid();
}

/* Tells whether a service manager started us. */
int
sdactivate_managed(void)
{
	const char	*s;

	if ((s = getenv("NOTIFY_SOCKET")) != NULL && *s != '\0')
		return 1;
	if (sdactivate_pid_is_us() && getenv("LISTEN_FDS") != NULL)
		return 1;
	if ((s = getenv("INVOCATION_ID")) != NULL && *s != '\0' &&
	    !isatty(STDIN_FILENO))
		return 1;
	return 0;
}

#ifdef HAVE_LIBSYSTEMD
/* Counts the passed descriptors with libsystemd, clearing the variables. */
static int
sdactivate_count(char **cause)
{
	int	n;

	if ((n = sd_listen_fds(1)) < 0) {
		*cause = xasprintf("cannot take the sockets from the service "
		    "manager: %s", strerror(-n));
		return -1;
	}
	return n;
}
#else
/* Counts the passed descriptors the way sd_listen_fds(3) does. */
static int
sdactivate_count(char **cause)
{
	const char	*s = getenv("LISTEN_FDS");
	char		*end;
	long		 n = 0;
	int		 ours = sdactivate_pid_is_us(), fd, flags;

	if (s != NULL && ours) {
		errno = 0;
		n = strtol(s, &end, 10);
		if (errno != 0 || end == s || *end != '\0' || n < 0 ||
		    n > 1024) {
			*cause = xasprintf("LISTEN_FDS=%s is not a count of "
			    "descriptors", s);
			n = -1;
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	for (fd = ACTIVATE_FD_START; n > 0 && fd < ACTIVATE_FD_START + n; fd++) {
		if ((flags = fcntl(fd, F_GETFD)) == -1 ||
		    fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == -1) {
			*cause = xasprintf("passed descriptor %d: %s", fd,
			    strerror(errno));
			return -1;
		}
	}
	return (int)n;
}
#endif

/* Checks that fd listens on a Unix stream socket; returns its path. */
static char *
sdactivate_check(int fd, char **cause)
{
	struct sockaddr_un	sa;
	socklen_t		len = sizeof sa, olen;
	int			type, on;

	olen = sizeof type;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) != 0 ||
	    type != SOCK_STREAM) {
		*cause = xasprintf("passed descriptor %d is not a stream socket",
		    fd);
		return NULL;
	}
#ifdef SO_ACCEPTCONN
	olen = sizeof on;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) != 0 ||
	    !on) {
		*cause = xasprintf("passed socket %d is not listening", fd);
		return NULL;
	}
#endif
	memset(&sa, 0, sizeof sa);
	if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 ||
	    sa.sun_family != AF_UNIX) {
		*cause = xasprintf("passed socket %d is not a Unix socket", fd);
		return NULL;
	}
	if (len <= offsetof(struct sockaddr_un, sun_path) ||
	    sa.sun_path[0] != '/') {
		*cause = xasprintf("passed socket %d has no path (abstract or "
		    "unnamed sockets are not served)", fd);
		return NULL;
	}
	/* The kernel may omit the NUL when the path fills sun_path. */
	return xstrndup(sa.sun_path, len - offsetof(struct sockaddr_un, sun_path));
}

/* Takes the socket the service manager passed, if any. */
int
sdactivate_listen_fd(int *fdp, char **pathp, char **cause)
{
	char	*path, *dir;
	int	 n;

	*cause = NULL;
	if ((n = sdactivate_count(cause)) <= 0)
		return n;
	if (n != 1) {
		*cause = xasprintf("the service manager passed %d sockets; gbrd "
		    "serves exactly one (one ListenStream= in gbrd.socket)", n);
		return -1;
	}
	if ((path = sdactivate_check(ACTIVATE_FD_START, cause)) == NULL)
		return -1;
	dir = paths_dirname(path);
	if (paths_private_dir(dir, 0, cause) != 0) {
		free(dir);
		free(path);
		return -1;
	}
	free(dir);
	log_debug("socket activation: fd %d listens on %s", ACTIVATE_FD_START,
	    path);
	sdactivate_socket_used = 1;
	*fdp = ACTIVATE_FD_START;
	*pathp = path;
	return 1;
}

/* Tells whether the socket came from the service manager. */
int
sdactivate_used(void)
{
	return sdactivate_socket_used;
}
