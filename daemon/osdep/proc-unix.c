/*
 * The daemon process on Unix (osdep-proc.h): fork and setsid after the
 * socket is taken, with the parent waiting on a pipe for the child's
 * report; the stop and reload signals held during start-up and delivered
 * through the loop; pthread locking for libevent.
 */
#include "gbr-config.h"

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "log.h"
#include "osdep-proc.h"
#include "xmalloc.h"

static sigset_t		 proc_sigmask;	/* the mask before start-up */
static int		 proc_held;
static struct event	*proc_ev_term, *proc_ev_int, *proc_ev_hup;
static struct event	*proc_ev_stop, *proc_ev_reload;
static void		(*proc_stop)(const char *);
static void		(*proc_reload)(const char *);
static const char	*proc_stop_why = "stop requested";
static const char	*proc_reload_why = "reload requested";

/* Exits during start-up, before the log is anywhere a person looks. */
static void __attribute__((noreturn))
proc_fail(const char *what)
{
	fprintf(stderr, "gbrd: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Goes to the background after the socket is taken (see osdep-proc.h). */
void
osdep_detach(enum osdep_detach_at at, int (*open_log)(void),
    const char *state, int *ready_fd)
{
	char	buf[1024];
	ssize_t	n, off = 0;
	int	p[2], fd, logfd;
	pid_t	pid;

	if (at != OSDEP_DETACH_AFTER_LISTEN)
		return;
	if (pipe(p) != 0 || fcntl(p[0], F_SETFD, FD_CLOEXEC) != 0 ||
	    fcntl(p[1], F_SETFD, FD_CLOEXEC) != 0)
		proc_fail("pipe");
	switch ((pid = fork())) {
	case -1:
		proc_fail("fork");
	case 0:
		break;
	default:
		/* The waiting parent can be interrupted again. */
		if (proc_held)
			sigprocmask(SIG_SETMASK, &proc_sigmask, NULL);
		close(p[1]);
		while (off < (ssize_t)sizeof buf - 1 &&
		    (n = read(p[0], buf + off, sizeof buf - 1 - off)) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			off += n;
		}
		buf[off] = '\0';
		if (strncmp(buf, "ok", 2) == 0)
			exit(0);
		if (off == 0)
			fprintf(stderr, "gbrd: the daemon exited during start-up; "
			    "see %s/gbrd.log\n", state);
		else
			fprintf(stderr, "gbrd: %s", buf);
		exit(1);
	}
	close(p[0]);
	*ready_fd = p[1];
	if (setsid() == -1)
		proc_fail("setsid");
	if (chdir("/") != 0)
		proc_fail("chdir /");
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		proc_fail("/dev/null");
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if ((logfd = open_log()) != -1) {
		dup2(logfd, STDERR_FILENO);
		close(logfd);
	} else
		dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/* Blocks SIGTERM, SIGINT and SIGHUP until osdep_stop_events. */
void
osdep_requests_hold(void)
{
	sigset_t	sigs;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &proc_sigmask);
	proc_held = 1;
}

/* SIGPIPE is an error return, not a death; libevent locks for threads. */
int
osdep_loop_prepare(char **cause)
{
	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads() != 0) {
		*cause = xstrdup("libevent has no thread support");
		return -1;
	}
	return 0;
}

/* A stop signal, or a stop asked for by another thread. */
static void
proc_stop_cb(evutil_socket_t sig, short events, void *arg)
{
	if (arg == proc_ev_stop)
		proc_stop(proc_stop_why);
	else
		proc_stop(sig == SIGINT ? "SIGINT" : "SIGTERM");
}

/* SIGHUP, or a reload asked for by another thread. */
static void
proc_reload_cb(evutil_socket_t sig, short events, void *arg)
{
	proc_reload(arg == proc_ev_reload ? proc_reload_why : "SIGHUP");
}

/* Installs the signal events, then lets the held signals in. */
int
osdep_stop_events(struct event_base *base, void (*stop)(const char *),
    void (*reload)(const char *))
{
	proc_stop = stop;
	proc_reload = reload;
	proc_ev_term = evsignal_new(base, SIGTERM, proc_stop_cb, NULL);
	proc_ev_int = evsignal_new(base, SIGINT, proc_stop_cb, NULL);
	proc_ev_hup = evsignal_new(base, SIGHUP, proc_reload_cb, NULL);
	proc_ev_stop = event_new(base, -1, 0, proc_stop_cb, event_self_cbarg());
	proc_ev_reload = event_new(base, -1, 0, proc_reload_cb,
	    event_self_cbarg());
	if (proc_ev_term == NULL || proc_ev_int == NULL || proc_ev_hup == NULL ||
	    proc_ev_stop == NULL || proc_ev_reload == NULL ||
	    event_add(proc_ev_term, NULL) != 0 ||
	    event_add(proc_ev_int, NULL) != 0 ||
	    event_add(proc_ev_hup, NULL) != 0)
		return -1;
	if (proc_held)
		sigprocmask(SIG_SETMASK, &proc_sigmask, NULL);
	proc_held = 0;
	return 0;
}

/* Wakes the loop to stop (libevent's locks make this safe from a thread). */
void
osdep_request_stop(const char *why)
{
	if (proc_ev_stop == NULL)
		return;
	proc_stop_why = why;
	event_active(proc_ev_stop, 0, 0);
}

/* Wakes the loop to re-read the config. */
void
osdep_request_reload(const char *why)
{
	proc_reload_why = why;
	if (proc_ev_reload != NULL)
		event_active(proc_ev_reload, 0, 0);
}

/* Frees the events of osdep_stop_events. */
void
osdep_stop_events_free(void)
{
	struct event	**evs[] = { &proc_ev_term, &proc_ev_int, &proc_ev_hup,
	    &proc_ev_stop, &proc_ev_reload };
	size_t		  i;

	for (i = 0; i < sizeof evs / sizeof evs[0]; i++) {
		if (*evs[i] != NULL)
			event_free(*evs[i]);
		*evs[i] = NULL;
	}
}
