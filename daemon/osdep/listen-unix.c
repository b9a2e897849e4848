/*
 * gbrd's listening socket on Unix (listen.h). Layers, each meant to hold
 * alone (DESIGN.md 3, 4): the socket folder is private (0700, ours, checked
 * with lstat); the socket is created under a 0177 umask; every peer's uid
 * is read from the kernel (SO_PEERCRED or getpeereid) for the listener
 * above to check. A lock file beside the socket decides which daemon owns
 * it, so a live daemon is never displaced and a stale socket left by a
 * dead one (kill -9) is replaced.
 */
#include "gbr-config.h"

#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "listen.h"
#include "log.h"
#include "osdep.h"
#include "paths.h"
#include "xmalloc.h"

/* How many times (20 ms apart) a stale socket may still answer. */
#define LISTEN_STALE_TRIES	50

static int		 listen_sock = -1;
static int		 listen_lock_fd = -1;
static int		 listen_owns_path;
static char		*listen_sock_path;
static char		*listen_lock_path;

/* Fills a sockaddr_un; fails if the path does not fit. */
static int
listen_sockaddr(const char *path, struct sockaddr_un *sa, char **cause)
{
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa->sun_path) {
		*cause = xasprintf("socket path too long (%zu bytes, at most %zu): %s",
		    strlen(path), sizeof sa->sun_path - 1, path);
		return -1;
	}
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

/*
 * Writes our pid into the lock: once when it is taken and again from
 * listen_start, since a daemon going to the background forks in between
 * (the lock, an open file description, passes to the child).
 */
static void
listen_lock_pid(void)
{
	char	buf[32];
	int	n;

	if (listen_lock_fd == -1)
		return;
	n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(listen_lock_fd, 0) != 0 ||
	    pwrite(listen_lock_fd, buf, (size_t)n, 0) != n)
		log_warn("cannot write pid to %s: %s", listen_lock_path,
		    strerror(errno));
}

/*
 * Takes the daemon lock beside the socket; says who holds it if taken.
 * Kept only once taken: a refused second start leaves the first's alone.
 */
static int
listen_lock(const char *path, char **cause)
{
	char	 buf[32], *lock;
	ssize_t	 n;
	int	 fd;

	lock = xasprintf("%s.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		*cause = xasprintf("cannot open lock %s: %s", lock,
		    strerror(errno));
		free(lock);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		n = pread(fd, buf, sizeof buf - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		*cause = xasprintf("another gbrd is already running on %s%s%s%s",
		    path, *buf != '\0' ? " (pid " : "", buf, *buf != '\0' ? ")" : "");
		close(fd);
		free(lock);
		return -1;
	}
	listen_lock_fd = fd;
	listen_lock_path = lock;
	listen_lock_pid();
	return 0;
}

/* Drops the lock after a failed start. */
static void
listen_unlock(void)
{
	if (listen_lock_fd != -1)
		close(listen_lock_fd);
	listen_lock_fd = -1;
	free(listen_lock_path);
	listen_lock_path = NULL;
}

/* Refuses a second listener in this process (there is one of each). */
static int
listen_busy(char **cause)
{
	if (listen_sock == -1)
		return 0;
	*cause = xasprintf("another gbrd is already running on %s (this "
	    "process)", listen_sock_path);
	return -1;
}

/* Removes a socket left by a dead daemon; refuses to touch anything else. */
static int
listen_clear_stale(const char *path, const struct sockaddr_un *sa,
    char **cause)
{
	struct timespec	pause = { 0, 20 * 1000 * 1000 };
	struct stat	sb;
	int		fd, r, tries;

	if (lstat(path, &sb) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(sb.st_mode)) {
		*cause = xasprintf("%s exists and is not a socket; not removing it",
		    path);
		return -1;
	}
	/*
	 * We hold the lock, so a live peer here is a daemon without one, or
	 * the listening socket of a daemon killed a moment ago: a child it
	 * was starting holds a copy until its exec closes it. That one goes
	 * away within milliseconds; a real server does not.
	 */
	for (tries = 0;; tries++) {
		/* Non-blocking: a full backlog must not hang the start. */
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0)) == -1) {
			*cause = xasprintf("socket: %s", strerror(errno));
			return -1;
		}
		r = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
		if (r != 0 && errno == EAGAIN)
			r = 0;		/* a server there, too busy to accept */
		close(fd);
		if (r != 0)
			break;
		if (tries == LISTEN_STALE_TRIES) {
			*cause = xasprintf("a server is answering on %s; not "
			    "replacing it", path);
			return -1;
		}
		nanosleep(&pause, NULL);
	}
	log_info("removing stale socket %s", path);
	if (unlink(path) != 0 && errno != ENOENT) {
		*cause = xasprintf("cannot remove stale socket %s: %s", path,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* Creates the socket folder and socket, under the lock. */
int
listen_open(const char *path, char **cause)
{
	struct sockaddr_un	 sa;
	char			*dir;
	mode_t			 mask;
	int			 fd;

	*cause = NULL;
	if (listen_busy(cause) != 0 || listen_sockaddr(path, &sa, cause) != 0)
		return -1;
	dir = paths_dirname(path);
	if (paths_private_dir(dir, 1, cause) != 0) {
		free(dir);
		return -1;
	}
	free(dir);
	if (listen_lock(path, cause) != 0)
		return -1;
	if (listen_clear_stale(path, &sa, cause) != 0)
		goto fail;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		*cause = xasprintf("socket: %s", strerror(errno));
		goto fail;
	}
	mask = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		umask(mask);
		*cause = xasprintf("bind %s: %s", path, strerror(errno));
		close(fd);
		goto fail;
	}
	umask(mask);
	if (listen(fd, SOMAXCONN) != 0) {
		*cause = xasprintf("listen %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		goto fail;
	}
	listen_sock_path = xstrdup(path);
	listen_owns_path = 1;
	listen_sock = fd;
	log_debug("listening on %s", path);
	return 0;

fail:
	listen_unlock();
	return -1;
}

/* Serves a socket handed over by the service manager. */
int
listen_adopt(int fd, const char *path, char **cause)
{
	int	flags;

	*cause = NULL;
	if (listen_busy(cause) != 0)
		return -1;
	/* One daemon per socket holds here too: a gbrd started by hand on
	 * the same path keeps its lock and this one refuses to start. */
	if (path != NULL && listen_lock(path, cause) != 0)
		return -1;
	if ((flags = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) {
		*cause = xasprintf("inherited socket %d: %s", fd, strerror(errno));
		listen_unlock();
		return -1;
	}
	listen_sock_path = xstrdup(path != NULL ? path : "(inherited)");
	listen_owns_path = 0;
	listen_sock = fd;
	log_info("serving the inherited socket %s", listen_sock_path);
	return 0;
}

/* The daemon is in its final process: the lock gets its pid. */
void
listen_start(void)
{
	listen_lock_pid();
}

/* Returns the listening socket. */
int
listen_fd(void)
{
	return listen_sock;
}

/* Accepts one connection and reads its peer's credentials. */
int
listen_accept(int *fd, struct listen_peer *peer)
{
	int	s;

	s = accept4(listen_sock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (s == -1)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	peer->known = osdep_peer_cred(s, &peer->uid, &peer->pid) == 0;
	if (!peer->known) {
		peer->uid = (uid_t)-1;
		peer->pid = -1;
	}
	*fd = s;
	return 1;
}

/* Stops listening and cleans up what we created. */
void
listen_close(void)
{
	if (listen_sock != -1) {
		close(listen_sock);
		listen_sock = -1;
		if (listen_owns_path && unlink(listen_sock_path) != 0)
			log_warn("cannot remove %s: %s", listen_sock_path,
			    strerror(errno));
	}
	if (listen_lock_fd != -1) {
		/* The lock file stays: removing it would race a new daemon. */
		close(listen_lock_fd);
		listen_lock_fd = -1;
	}
	free(listen_sock_path);
	free(listen_lock_path);
	listen_sock_path = listen_lock_path = NULL;
}

/* Returns the socket path served. */
const char *
listen_path(void)
{
	return listen_sock_path;
}

/* The Unix socket's walls: its folder, its mode, the peer's uid, the lock. */
json_t *
listen_layers(void)
{
	return json_pack("{s:s, s:b, s:s, s:s?, s:b, s:s}",
	    "kind", "unix socket",
	    "folder_private", 1,
	    "umask", "0177",
	    "peer_check", osdep_peer_cred_method(),
	    "fail_closed", 1,
	    "one_daemon", "a lock file beside the socket");
}
