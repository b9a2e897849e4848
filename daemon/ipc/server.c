/*
 * The listener's policy, on top of the mechanism in daemon/osdep/listen.h
 * (where gbrd listens, one daemon per socket or pipe, what the system says
 * of each peer). Layers, each meant to hold alone (DESIGN.md 3, 4): only
 * the daemon's own user may connect, told by the kernel (SO_PEERCRED,
 * getpeereid, or on Windows the client process's account), and anyone
 * else is refused, failing closed where the platform cannot tell; nothing
 * an agent's command started may connect; past max_clients, clients get
 * "busy". Refused clients get one error line, then the close.
 *
 * One descriptor is kept in reserve: when the process runs out of file
 * descriptors the reserve is released for a moment, so the waiting client
 * gets a clear "busy" instead of hanging in the backlog (OpenSMTPD's trick;
 * on Windows the bridge's socket stands for the descriptor, and the trick
 * is harmless).
 */
#include "gbr-config.h"

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "config.h"
#include "conn.h"
#include "jsonrpc.h"
#include "listen.h"
#include "log.h"
#include "osdep.h"
#include "server.h"
#include "transport.h"
#include "xmalloc.h"

static int		 server_reserve_fd = -1;
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

/* Listens on path, under the lock (listen.h). */
int
server_listen(const char *path, char **cause)
{
	return listen_open(path, cause);
}

/* Serves a socket handed over by the service manager (listen.h). */
int
server_adopt(int fd, const char *path, char **cause)
{
	return listen_adopt(fd, path, cause);
}

/* Starts accepting from the event loop. */
void
server_start(struct event_base *base)
{
	listen_start();
	server_reserve();
	server_ev = event_new(base, listen_fd(), EV_READ | EV_PERSIST,
	    server_accept_cb, NULL);
	server_ev_resume = evtimer_new(base, server_resume_cb, NULL);
	if (server_ev == NULL || server_ev_resume == NULL)
		fatalx("event_new failed");
	event_add(server_ev, NULL);
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
	listen_close();
	if (server_reserve_fd != -1) {
		close(server_reserve_fd);
		server_reserve_fd = -1;
	}
}

/* Returns the socket path served. */
const char *
server_path(void)
{
	return listen_path();
}

/* Sends one error line to a socket we will not serve, then closes it. */
static void
server_refuse(int fd, enum gbr_err e, const char *message)
{
	json_t	*reply = rpc_error(NULL, e, message, NULL);
	size_t	 len;
	char	*line = rpc_encode(reply, &len);

	/* Best effort on a fresh, non-blocking channel: its buffer is empty. */
	(void)!transport_write(fd, line, len);
	free(line);
	json_decref(reply);
	transport_close(fd);
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
	struct timeval		tv = { 0, 100 * 1000 };
	struct listen_peer	peer;
	int			fd;

	log_warn("out of file descriptors; refusing connections for a moment");
	if (server_reserve_fd != -1) {
		close(server_reserve_fd);
		server_reserve_fd = -1;
		if (listen_accept(&fd, &peer) == 1) {
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
	struct listen_peer	 peer;
	int			 fd, i, r;

	/* A bounded batch keeps one burst from starving the other clients. */
	for (i = 0; i < 64; i++) {
		if ((r = listen_accept(&fd, &peer)) == 0)
			return;
		if (r == -1) {
			if (errno == EMFILE || errno == ENFILE)
				server_out_of_fds();
			else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (!peer.known) {
			server_refused_uid++;
			log_warn("refused a client: cannot read its credentials");
			server_refuse(fd, GBR_ERR_PERMISSION_DENIED,
			    "cannot verify the peer's user id");
			continue;
		}
		if (peer.uid != getuid()) {
			server_refused_uid++;
			log_warn("refused a client of uid %ld (pid %ld): only uid "
			    "%ld may connect", (long)peer.uid, (long)peer.pid,
			    (long)getuid());
			server_refuse(fd, GBR_ERR_PERMISSION_DENIED,
			    "only the daemon's own user may connect");
			continue;
		}
		/*
		 * A second wall behind the commands' seccomp filter: nothing
		 * an agent's command started drives any gbrd.
		 */
		if (osdep_peer_in_run(fd, peer.pid)) {
			server_refused_run++;
			log_warn("refused a client (pid %ld): it was started by "
			    "an agent's command", (long)peer.pid);
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
		conn_create(fd, peer.uid, peer.pid);
	}
}

/* Returns listener counters and checks. */
json_t *
server_status(void)
{
	return json_pack("{s:s?, s:I, s:I, s:I, s:I}", "socket",
	    listen_path(),
	    "accepted", (json_int_t)server_accepted,
	    "refused_uid", (json_int_t)server_refused_uid,
	    "refused_from_command", (json_int_t)server_refused_run,
	    "refused_busy", (json_int_t)server_refused_full);
}
