/*
 * The listening socket. Layers, each meant to hold alone (DESIGN.md 3, 4):
 * the socket folder is private (0700, ours, checked with lstat); the socket
 * is created under a 0177 umask; every peer's uid is checked with the
 * kernel's credentials and anyone else is refused, failing closed where the
 * platform cannot tell. A lock file beside the socket decides which daemon
 * owns it, so a live daemon is never displaced and a stale socket left by a
 * dead one (kill -9) is replaced.
 *
 * One descriptor is kept in reserve: when the process runs out of file
 * descriptors the reserve is released for a moment, so the waiting client
 * gets a clear "busy" instead of hanging in the backlog (OpenSMTPD's trick).
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

#include <event2/event.h>

#include "config.h"
#include "conn.h"
#include "jsonrpc.h"
#include "log.h"
#include "osdep.h"
#include "paths.h"
#include "server.h"
#include "xmalloc.h"

/* How many times (20 ms apart) a stale socket may still answer. */
#define SERVER_STALE_TRIES	50

static int		 server_fd = -1;
static int		 server_lock_fd = -1;
static int		 server_reserve_fd = -1;
static int		 server_owns_path;
static char		*server_sock_path;
static char		*server_lock_path;
static struct event	*server_ev;
static struct event	*server_ev_resume;
static uint64_t		 server_refused_uid;
static uint64_t		 server_refused_run;	/* peers from a command */
static uint64_t		 server_refused_full;
static uint64_t		 server_accepted;

static void	server_accept_cb(evutil_socket_t, short, void *);
static void	server_resume_cb(evutil_socket_t, short, void *);

/* Opens the spare descriptor kept for running out of descriptors. */
static void
server_reserve(void)
{
	if (server_reserve_fd == -1)
		server_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Fills a sockaddr_un; fails if the path does not fit. */
static int
server_sockaddr(const char *path, struct sockaddr_un *sa, char **cause)
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

static void	server_lock_pid(void);

/* Takes the daemon lock beside the socket; says who holds it if taken. */
static int
server_lock(const char *path, char **cause)
{
	char	buf[32];
	ssize_t	n;
	int	fd;

	server_lock_path = xasprintf("%s.lock", path);
	fd = open(server_lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		*cause = xasprintf("cannot open lock %s: %s", server_lock_path,
		    strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		n = pread(fd, buf, sizeof buf - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		*cause = xasprintf("another gbrd is already running on %s%s%s%s",
		    path, *buf != '\0' ? " (pid " : "", buf, *buf != '\0' ? ")" : "");
		close(fd);
		return -1;
	}
	server_lock_fd = fd;
	server_lock_pid();
	return 0;
}

/*
 * Writes our pid into the lock: once when it is taken and again from
 * server_start, since a daemon going to the background forks in between
 * (the lock, an open file description, passes to the child).
 */
static void
server_lock_pid(void)
{
	char	buf[32];
	int	n;

	if (server_lock_fd == -1)
		return;
	n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(server_lock_fd, 0) != 0 ||
	    pwrite(server_lock_fd, buf, (size_t)n, 0) != n)
		log_warn("cannot write pid to %s: %s", server_lock_path,
		    strerror(errno));
}

/* Removes a socket left by a dead daemon; refuses to touch anything else. */
static int
server_clear_stale(const char *path, const struct sockaddr_un *sa, char **cause)
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
		if (tries == SERVER_STALE_TRIES) {
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

/* Starts accepting on the listening socket from the event loop. */
void
server_start(struct event_base *base)
{
	int	fd = server_fd;

	server_lock_pid();
	server_reserve();
	server_ev = event_new(base, fd, EV_READ | EV_PERSIST, server_accept_cb, NULL);
	server_ev_resume = evtimer_new(base, server_resume_cb, NULL);
	if (server_ev == NULL || server_ev_resume == NULL)
		fatalx("event_new failed");
	event_add(server_ev, NULL);
}

/* Creates the socket folder and socket, under the lock. */
int
server_listen(const char *path, char **cause)
{
	struct sockaddr_un	 sa;
	char			*dir;
	mode_t			 mask;
	int			 fd;

	*cause = NULL;
	if (server_sockaddr(path, &sa, cause) != 0)
		return -1;
	dir = paths_dirname(path);
	if (paths_private_dir(dir, 1, cause) != 0) {
		free(dir);
		return -1;
	}
	free(dir);
	if (server_lock(path, cause) != 0)
		return -1;
	if (server_clear_stale(path, &sa, cause) != 0)
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
	server_sock_path = xstrdup(path);
	server_owns_path = 1;
	server_fd = fd;
	log_debug("listening on %s", path);
	return 0;

fail:
	close(server_lock_fd);
	server_lock_fd = -1;
	free(server_lock_path);
	server_lock_path = NULL;
	return -1;
}

/* Serves a socket handed over by the service manager. */
int
server_adopt(int fd, const char *path, char **cause)
{
	int	flags;

	*cause = NULL;
	/* One daemon per socket holds here too: a gbrd started by hand on
	 * the same path keeps its lock and this one refuses to start. */
	if (path != NULL && server_lock(path, cause) != 0) {
		free(server_lock_path);
		server_lock_path = NULL;
		return -1;
	}
	if ((flags = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) {
		*cause = xasprintf("inherited socket %d: %s", fd, strerror(errno));
		if (server_lock_fd != -1)
			close(server_lock_fd);
		server_lock_fd = -1;
		free(server_lock_path);
		server_lock_path = NULL;
		return -1;
	}
	server_sock_path = xstrdup(path != NULL ? path : "(inherited)");
	server_owns_path = 0;
	server_fd = fd;
	log_info("serving the inherited socket %s", server_sock_path);
	return 0;
}

/* Stops listening and cleans up what we created. */
void
server_close(void)
{
	if (server_ev != NULL) {
		event_free(server_ev);
		event_free(server_ev_resume);
		server_ev = server_ev_resume = NULL;
	}
	if (server_fd != -1) {
		close(server_fd);
		server_fd = -1;
		if (server_owns_path && unlink(server_sock_path) != 0)
			log_warn("cannot remove %s: %s", server_sock_path,
			    strerror(errno));
	}
	if (server_lock_fd != -1) {
		/* The lock file stays: removing it would race a new daemon. */
		close(server_lock_fd);
		server_lock_fd = -1;
	}
	if (server_reserve_fd != -1) {
		close(server_reserve_fd);
		server_reserve_fd = -1;
	}
	free(server_sock_path);
	free(server_lock_path);
	server_sock_path = server_lock_path = NULL;
}

/* Returns the socket path served. */
const char *
server_path(void)
{
	return server_sock_path;
}

/* Sends one error line to a socket we will not serve, then closes it. */
static void
server_refuse(int fd, enum gbr_err e, const char *message)
{
	json_t	*reply = rpc_error(NULL, e, message, NULL);
	size_t	 len;
	char	*line = rpc_encode(reply, &len);

	/* Best effort on a fresh socket: its buffer is empty. */
	(void)!send(fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	free(line);
	json_decref(reply);
	close(fd);
}

/* Accepting again after running out of descriptors. */
static void
server_resume_cb(evutil_socket_t fd, short events, void *arg)
{
	server_reserve();
	event_add(server_ev, NULL);
}

/* Uses the reserve descriptor to tell one waiting client we are full. */
static void
server_out_of_fds(void)
{
	struct timeval	tv = { 0, 100 * 1000 };
	int		fd;

	log_warn("out of file descriptors; refusing connections for a moment");
	if (server_reserve_fd != -1) {
		close(server_reserve_fd);
		server_reserve_fd = -1;
		fd = accept4(server_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd != -1) {
			server_refused_full++;
			server_refuse(fd, GBR_ERR_BUSY,
			    "the daemon is out of file descriptors");
		}
	}
	event_del(server_ev);
	evtimer_add(server_ev_resume, &tv);
}

/* Accepts waiting connections, checking each peer. */
static void
server_accept_cb(evutil_socket_t lfd, short events, void *arg)
{
	const struct config	*cfg = config_get();
	uid_t			 uid;
	pid_t			 pid;
	int			 fd, i;

	/* A bounded batch keeps one burst from starving the other clients. */
	for (i = 0; i < 64; i++) {
		fd = accept4(server_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE)
				server_out_of_fds();
			else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (osdep_peer_cred(fd, &uid, &pid) != 0) {
			server_refused_uid++;
			log_warn("refused a client: cannot read its credentials");
			server_refuse(fd, GBR_ERR_PERMISSION_DENIED,
			    "cannot verify the peer's user id");
			continue;
		}
		if (uid != getuid()) {
			server_refused_uid++;
			log_warn("refused a client of uid %ld (pid %ld): only uid "
			    "%ld may connect", (long)uid, (long)pid,
			    (long)getuid());
			server_refuse(fd, GBR_ERR_PERMISSION_DENIED,
			    "only the daemon's own user may connect");
			continue;
		}
		/*
		 * A second wall behind the commands' seccomp filter: nothing
		 * an agent's command started drives any gbrd.
		 */
		if (osdep_peer_in_run(fd, pid)) {
			server_refused_run++;
			log_warn("refused a client (pid %ld): it was started by "
			    "an agent's command", (long)pid);
			server_refuse(fd, GBR_ERR_PERMISSION_DENIED,
			    "a process started by an agent's command may not "
			    "drive gbrd");
			continue;
		}
		if (conn_count() >= cfg->max_clients) {
			server_refused_full++;
			server_refuse(fd, GBR_ERR_BUSY, "too many clients");
			continue;
		}
		server_accepted++;
		conn_create(fd, uid, pid);
	}
}

/* Returns listener counters and checks. */
json_t *
server_status(void)
{
	return json_pack("{s:s?, s:I, s:I, s:I, s:I}", "socket",
	    server_sock_path,
	    "accepted", (json_int_t)server_accepted,
	    "refused_uid", (json_int_t)server_refused_uid,
	    "refused_from_command", (json_int_t)server_refused_run,
	    "refused_busy", (json_int_t)server_refused_full);
}
