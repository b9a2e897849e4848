/*
 * Client connection: a channel to gbrd (platform/transport.h), a line
 * framer and a small queue of messages read ahead of the one asked for.
 * Starting the daemon follows tmux's client.c: try to connect; if nobody
 * answers, take a lock, try again (a concurrent client may have started it
 * meanwhile), and only then start gbrd, whose own lock guarantees one
 * daemon per socket anyway (the lock and the start: platform/proc.h).
 *
 * Like tmux's client, it trusts the daemon only after checking who it is:
 * transport_dial checks the socket's folder (ours, closed to others'
 * writes) before connecting, and the server's user right after, before a
 * single byte is sent; gbrd is never started in a folder that fails. Another
 * local user who created /tmp/gbr-<uid> first, or who managed to put a
 * socket in our path, never sees our hello, let alone a workspace path.
 */
#include "gbr-config.h"

#include <sys/types.h>
#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "frame.h"
#include "jsonrpc.h"
#include "proc.h"
#include "transport.h"
#include "xmalloc.h"

/* Replies and events read but not yet handed out. */
#define CLIENT_QUEUE_MAX	4096
/* Longest line a client accepts from the daemon. */
#define CLIENT_MAX_LINE		(64 * 1024 * 1024)

struct client {
	int		 fd;
	struct frame	*frame;
	json_t		*hello;
	json_t		*queue;		/* array of messages read ahead */
	long long	 next_id;
	int		 eof;
	char		*error;		/* a framing or parse error */
	client_event_cb	 event_cb;
	void		*event_arg;
};

/* Finds the gbrd binary: $GBRD, else beside this program, else $PATH. */
static char *
client_gbrd_path(void)
{
	const char	*env = getenv("GBRD");
	char		*path;

	if (env != NULL && *env != '\0')
		return xstrdup(env);
	if ((path = proc_beside_self("gbrd")) != NULL)
		return path;
	return xstrdup("gbrd");
}

/* Runs gbrd in the background and waits until it says it is listening. */
static int
client_spawn_gbrd(const char *path, char **cause)
{
	char	*bin = client_gbrd_path();
	char	*argv[] = { bin, (char *)"-s", (char *)path, NULL };
	int	 r;

	/* gbrd's foreground part exits once the daemon listens. */
	if ((r = proc_spawn_wait(argv, cause)) == -1) {
		free(bin);
		return -1;
	}
	if (r != 0) {
		*cause = xasprintf("%s could not start (see its message above)", bin);
		free(bin);
		return -1;
	}
	free(bin);
	return 0;
}

/* Starts the daemon under the start lock unless somebody already answers. */
int
client_start_daemon(const char *path, char **cause)
{
	int	fd, r = -1;

	/* A foreign folder or server is refused here, before any lock or start. */
	if ((fd = transport_dial(path, cause)) != -1) {
		transport_close(fd);
		return 0;
	}
	if (*cause != NULL)
		return -1;
	if (proc_start_lock(path, cause) != 0)
		return -1;
	/* A client that held the lock before us may have started it. */
	if ((fd = transport_dial(path, cause)) != -1) {
		transport_close(fd);
		r = 0;
	} else if (*cause == NULL)
		r = client_spawn_gbrd(path, cause);
	proc_start_unlock();
	return r;
}

/* Connects and says hello. */
struct client *
client_connect(const char *path, enum client_start start, const char *name,
    char **cause, int *unreachable)
{
	struct client	*cl;
	json_t		*reply;
	int		 fd;

	*unreachable = 0;
	fd = transport_dial(path, cause);
	if (fd == -1 && *cause == NULL && start == CLIENT_AUTOSTART &&
	    (errno == ENOENT || errno == ECONNREFUSED)) {
		if (client_start_daemon(path, cause) != 0) {
			*unreachable = 1;
			return NULL;
		}
		fd = transport_dial(path, cause);
	}
	if (fd == -1 && *cause != NULL) {
		/* A refusal of ours: for the caller, nobody could be reached. */
		*unreachable = 1;
		return NULL;
	}
	if (fd == -1) {
		*cause = xasprintf("cannot connect to %s: %s%s", path,
		    strerror(errno), errno == ENOENT || errno == ECONNREFUSED ?
		    " (is gbrd running? start it with 'gbrd' or 'gbrctl start')" : "");
		*unreachable = 1;
		return NULL;
	}
	cl = xcalloc(1, sizeof *cl);
	cl->fd = fd;
	cl->frame = frame_create(CLIENT_MAX_LINE);
	cl->queue = json_array();
	cl->next_id = 1;
	reply = client_call(cl, "hello", json_pack("{s:i, s:s}", "protocol",
	    GBR_PROTOCOL_VERSION, "client", name), 10000, cause);
	if (reply == NULL) {
		*unreachable = 1;
		client_free(cl);
		return NULL;
	}
	if (json_object_get(reply, "error") != NULL) {
		*cause = xasprintf("the daemon refused us: %s (%s)",
		    client_error_message(reply), client_error_kind(reply));
		json_decref(reply);
		client_free(cl);
		return NULL;
	}
	cl->hello = json_incref(json_object_get(reply, "result"));
	json_decref(reply);
	return cl;
}

/*
 * Makes this process non-dumpable. A client holds a connected socket that
 * speaks for its user with the daemon; a process of the same uid (a command
 * the agent ran, say) could otherwise take that socket with ptrace,
 * pidfd_getfd or process_vm_readv and create sessions or answer approvals
 * through it. Non-dumpable, the kernel lets only a privileged process do
 * that (and there are no core dumps). Exec resets the flag, so every client
 * calls this first thing in main. Where the platform has no such switch,
 * nothing is done: the daemon's own checks still stand.
 */
void
client_protect_process(void)
{
#if defined(HAVE_SYS_PRCTL_H) && defined(PR_SET_DUMPABLE)
	/* Clearing the flag cannot fail; there is nothing to do if it did. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#endif
}

/* Closes and frees a client. */
void
client_free(struct client *cl)
{
	if (cl == NULL)
		return;
	transport_close(cl->fd);
	frame_free(cl->frame);
	json_decref(cl->hello);
	json_decref(cl->queue);
	free(cl->error);
	free(cl);
}

/* Returns hello's result. */
json_t *
client_hello(struct client *cl)
{
	return cl->hello;
}

/* Returns the socket. */
int
client_fd(struct client *cl)
{
	return cl->fd;
}

/* Sets the event callback. */
void
client_set_event_cb(struct client *cl, client_event_cb cb, void *arg)
{
	cl->event_cb = cb;
	cl->event_arg = arg;
}

/* Framer callback: parse and queue one line. */
static int
client_line_cb(void *arg, const char *line, size_t len)
{
	struct client	*cl = arg;
	struct rpc_msg	 msg;
	json_t		*err;

	if (rpc_parse_from_daemon(line, len, &msg, &err) != 0) {
		free(cl->error);
		cl->error = xasprintf("the daemon sent a malformed line: %s",
		    json_string_value(json_object_get(json_object_get(
		    json_object_get(err, "error"), "data"), "detail")));
		json_decref(err);
		return 1;
	}
	if (json_array_size(cl->queue) >= CLIENT_QUEUE_MAX) {
		free(cl->error);
		cl->error = xstrdup("too many unread messages from the daemon");
		rpc_msg_release(&msg);
		return 1;
	}
	json_array_append(cl->queue, msg.root);
	rpc_msg_release(&msg);
	return 0;
}

/* Reads more bytes into the queue, waiting up to timeout_ms. Returns 1 if
 * something was read, 0 on timeout, -1 on error or end of input. */
static int
client_fill(struct client *cl, int timeout_ms, char **cause)
{
	struct pollfd	 pfd;
	char		 buf[65536];
	ssize_t		 n;
	int		 r;

	if (cl->error != NULL) {
		*cause = xstrdup(cl->error);
		return -1;
	}
	if (cl->eof) {
		*cause = xstrdup("the daemon closed the connection");
		return -1;
	}
	memset(&pfd, 0, sizeof pfd);
	pfd.fd = cl->fd;
	pfd.events = POLLIN;
	do
		r = transport_poll(&pfd, 1, timeout_ms);
	while (r == -1 && errno == EINTR);
	if (r == 0)
		return 0;
	if (r < 0) {
		*cause = xasprintf("poll: %s", strerror(errno));
		return -1;
	}
	do
		n = transport_read(cl->fd, buf, sizeof buf);
	while (n == -1 && errno == EINTR);
	if (n < 0) {
		*cause = xasprintf("read: %s", strerror(errno));
		return -1;
	}
	if (n == 0) {
		cl->eof = 1;
		/* Messages read before the end still count. */
		return json_array_size(cl->queue) > 0 ? 1 : (*cause =
		    xstrdup("the daemon closed the connection"), -1);
	}
	if (frame_feed(cl->frame, buf, (size_t)n, client_line_cb, cl) ==
	    FRAME_TOO_LARGE) {
		*cause = xstrdup("the daemon sent an over-long line");
		return -1;
	}
	if (cl->error != NULL && json_array_size(cl->queue) == 0) {
		*cause = xstrdup(cl->error);
		return -1;
	}
	return 1;
}

/* Takes the first queued message, if any. */
static json_t *
client_pop(struct client *cl)
{
	json_t	*msg;

	if (json_array_size(cl->queue) == 0)
		return NULL;
	msg = json_incref(json_array_get(cl->queue, 0));
	json_array_remove(cl->queue, 0);
	return msg;
}

/* Reads the next message. */
json_t *
client_read(struct client *cl, int timeout_ms, char **cause)
{
	long long	 deadline = timeout_ms < 0 ? -1 : clock_mono_ms() + timeout_ms;
	json_t		*msg;
	int		 r, wait;

	*cause = NULL;
	for (;;) {
		if ((msg = client_pop(cl)) != NULL)
			return msg;
		wait = -1;
		if (deadline >= 0) {
			wait = (int)(deadline - clock_mono_ms());
			if (wait < 0)
				wait = 0;
		}
		if ((r = client_fill(cl, wait, cause)) < 0)
			return NULL;
		if (r == 0)
			return NULL;
	}
}

/* Writes all of buf to fd (see client.h). */
int
client_write_fd(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Sends one line, all of it. */
static int
client_write(struct client *cl, const char *buf, size_t len, char **cause)
{
	ssize_t	n;

	while (len > 0) {
		n = transport_write(cl->fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			*cause = xasprintf("write: %s", strerror(errno));
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Sends a request without waiting. */
long long
client_send(struct client *cl, const char *method, json_t *params, char **cause)
{
	json_t		*req;
	char		*line;
	size_t		 len;
	long long	 id = cl->next_id++;
	int		 r;

	*cause = NULL;
	req = rpc_request(id, method, params);
	line = rpc_encode(req, &len);
	json_decref(req);
	r = client_write(cl, line, len, cause);
	free(line);
	return r == 0 ? id : -1;
}

/* Sends a request and waits for its response. */
json_t *
client_call(struct client *cl, const char *method, json_t *params,
    int timeout_ms, char **cause)
{
	long long	 id, deadline;
	json_t		*msg, *mid;
	int		 wait;

	if ((id = client_send(cl, method, params, cause)) < 0)
		return NULL;
	deadline = timeout_ms < 0 ? -1 : clock_mono_ms() + timeout_ms;
	for (;;) {
		wait = -1;
		if (deadline >= 0 && (wait = (int)(deadline - clock_mono_ms())) < 0)
			wait = 0;
		if ((msg = client_read(cl, wait, cause)) == NULL) {
			if (*cause == NULL)
				*cause = xasprintf("no reply to %s within %d ms",
				    method, timeout_ms);
			return NULL;
		}
		mid = json_object_get(msg, "id");
		if (json_is_integer(mid) && json_integer_value(mid) == id &&
		    json_object_get(msg, "method") == NULL)
			return msg;
		if (json_is_null(mid) && json_object_get(msg, "error") != NULL)
			return msg;	/* an error the daemon could not tie to a request */
		/* Events, and answers to requests sent with client_send. */
		if (cl->event_cb != NULL)
			cl->event_cb(cl->event_arg, msg);
		json_decref(msg);
	}
}

/* Returns error.data.kind of a response, or NULL. */
const char *
client_error_kind(const json_t *response)
{
	return rpc_error_kind(json_object_get(response, "error"));
}

/* Returns error.message of a response, or NULL. */
const char *
client_error_message(const json_t *response)
{
	return json_string_value(json_object_get(json_object_get(response,
	    "error"), "message"));
}

/*
 * Reads a regular file of at most max bytes (see client.h).
 */
char *
client_read_file(const char *path, size_t max, size_t *len, char **why)
{
	struct stat	 st;
	char		*buf;
	size_t		 n = 0;
	ssize_t		 r;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) == -1) {
		*why = xasprintf("cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = xasprintf("%s is not a regular file", path);
		close(fd);
		return NULL;
	}
	if ((unsigned long long)st.st_size > max) {
		*why = xasprintf("%s is larger than %zu bytes", path, max);
		close(fd);
		return NULL;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	/* It may grow meanwhile: read what fits, then check the end. */
	while (n < (size_t)st.st_size && (r = read(fd, buf + n,
	    (size_t)st.st_size - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			*why = xasprintf("cannot read %s: %s", path, strerror(errno));
			free(buf);
			close(fd);
			return NULL;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}
