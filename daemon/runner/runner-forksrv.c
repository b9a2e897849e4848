/*
 * The client of gbr-exec's fork server: one gbr-exec -S started at
 * runner_init (see gbr-exec.c, "Server mode"), which gets each run over a
 * socket with its descriptors (the messages of gbr-exec.h) and clones the
 * run's init itself, so a run costs no exec of gbr-exec. It is used for
 * runs with namespaces only (only there does a dead server take its runs
 * along), once it has started and passed a probe run. A job the server
 * takes is not our child: its end is the server's DONE (group killed,
 * init reaped), its signals go through KILL, and if the server dies (its
 * socket closes, or its pidfd fires) each of its jobs fails with
 * internal_error and another server is started, at most RN_FS_DEATHS
 * times in RN_FS_WINDOW_MS; after that, and whenever the server cannot
 * take a run (a request too big for the socket, a full socket, FAILED for
 * want of resources or namespaces), the run goes direct
 * (runner-spawn.c). A server that has not ended a run RN_FS_KILL_WAIT
 * seconds after its SIGKILL is killed (runner.c, the job's timer).
 *
 * It does not own the jobs (runner.c) or their pipes (runner-io.c); it
 * only hands a job's pipes to the server and reports its end.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "gbr-exec.h"
#include "log.h"
#include "runfilter.h"
#include "runner-int.h"
#include "xmalloc.h"

#define RN_FS_WINDOW_MS	60000		/* ... after which runs go direct */
#define RN_FS_PROBE_MS	5000		/* the start-up probe through the server */
#define RN_FS_READ_BURST 256		/* messages per wakeup */

/* True if the fork server may take this job now. */
static int
rn_fs_usable(const struct runner_job *j)
{
	return rn.fs != NULL && !rn.fs->lost && rn.spawn == RUNNER_SPAWN_AUTO &&
	    j->ns && rn.probe_ns;
}

/*
 * Sends a RUN: gbr-exec's argv without argv[0], the environment, and the
 * four descriptors. Returns 0 or an errno (nothing was sent).
 */
static int
rn_fs_send_run(struct rn_fs *s, uint64_t id, const struct rn_strv *argv,
    const struct rn_strv *envp, const int *fds)
{
	union {
		struct cmsghdr	h;
		char		b[CMSG_SPACE(sizeof(int) * GE_MSG_FDS)];
	}		 cm;
	struct ge_msg	 m;
	struct msghdr	 mh;
	struct iovec	 iov[2];
	size_t		 len = 0, i, n;
	char		*body, *p;
	ssize_t		 r;

	for (i = 1; i < argv->n; i++)
		len += strlen(argv->v[i]) + 1;
	for (i = 0; i < envp->n; i++)
		len += strlen(envp->v[i]) + 1;
	if (argv->n < 2 || argv->n - 1 > GE_MSG_ARGC_MAX ||
	    envp->n > GE_MSG_ENVC_MAX || len > GE_MSG_MAX - sizeof m)
		return EMSGSIZE;
	p = body = xmalloc(len);
	for (i = 1; i < argv->n; i++) {
		n = strlen(argv->v[i]) + 1;
		memcpy(p, argv->v[i], n);
		p += n;
	}
	for (i = 0; i < envp->n; i++) {
		n = strlen(envp->v[i]) + 1;
		memcpy(p, envp->v[i], n);
		p += n;
	}
	memset(&m, 0, sizeof m);
	m.magic = GE_MSG_MAGIC;
	m.type = GE_MSG_RUN;
	m.job = id;
	m.argc = (uint32_t)(argv->n - 1);
	m.envc = (uint32_t)envp->n;
	iov[0].iov_base = &m;
	iov[0].iov_len = sizeof m;
	iov[1].iov_base = body;
	iov[1].iov_len = len;
	memset(&mh, 0, sizeof mh);
	memset(&cm, 0, sizeof cm);
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof cm.b;
	cm.h.cmsg_level = SOL_SOCKET;
	cm.h.cmsg_type = SCM_RIGHTS;
	cm.h.cmsg_len = CMSG_LEN(sizeof(int) * GE_MSG_FDS);
	memcpy(CMSG_DATA(&cm.h), fds, sizeof(int) * GE_MSG_FDS);
	do {
		r = sendmsg(s->ctl, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (r == -1 && errno == EINTR);
	free(body);
	if (r == -1)
		return errno;
	return (size_t)r == sizeof m + len ? 0 : EIO;
}

/*
 * Hands a job to the fork server. Returns 0 if it was sent, or -1 if the
 * job should go direct (nothing is left open).
 */
int
rn_fs_spawn(struct runner_job *j)
{
	int	po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	int	ps[2] = { -1, -1 }, pi[2] = { -1, -1 };
	int	fds[GE_MSG_FDS], e;

	if (!rn_fs_usable(j))
		return -1;
	if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
	    pipe2(ps, O_CLOEXEC) != 0 ||
	    (j->input != NULL && pipe2(pi, O_CLOEXEC) != 0)) {
		e = errno;
		goto fail;
	}
	fds[0] = j->input != NULL ? pi[0] : rn.devnull;
	fds[1] = po[1];
	fds[2] = pe[1];
	fds[3] = ps[1];
	j->fs_id = ++rn.fs_next_id;
	if ((e = rn_fs_send_run(rn.fs, j->fs_id, &j->argv, &j->envp,
	    fds)) != 0)
		goto fail;
	close(po[1]);
	close(pe[1]);
	close(ps[1]);
	if (j->input != NULL)
		close(pi[0]);
	j->fs = rn.fs;
	j->pid = 0;	/* the server's child: its pid is the server's business */
	rn_running(j, po[0], pe[0], ps[0], j->input != NULL ? pi[1] : -1);
	return 0;

fail:
	rn_close(&po[0]);
	rn_close(&po[1]);
	rn_close(&pe[0]);
	rn_close(&pe[1]);
	rn_close(&ps[0]);
	rn_close(&ps[1]);
	rn_close(&pi[0]);
	rn_close(&pi[1]);
	/* A full socket or a big request goes direct; a broken one is lost. */
	rn.fs_fallbacks++;
	if (e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == EBADF)
		rn_fs_lost(rn.fs, "stopped taking runs");
	else if (e != EAGAIN && e != EWOULDBLOCK && e != EMSGSIZE &&
	    e != ENOBUFS && e != ENOMEM && e != EMFILE && e != ENFILE)
		log_warn("runner: cannot hand '%s' to the fork server: %s",
		    j->argv0, strerror(e));
	return -1;
}

/* Sends KILL for a job; a server that cannot take it is killed. */
void
rn_fs_kill(struct runner_job *j, int sig)
{
	struct ge_msg	m;
	ssize_t		r;

	if (j->fs->lost)
		return;
	memset(&m, 0, sizeof m);
	m.magic = GE_MSG_MAGIC;
	m.type = GE_MSG_KILL;
	m.job = j->fs_id;
	m.arg = sig;
	do {
		r = send(j->fs->ctl, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (r == -1 && errno == EINTR);
	if (r != (ssize_t)sizeof m) {
		/* A signal must never be lost: its runs go with it. */
		log_warn("runner: cannot signal the fork server (%s); killing it",
		    r == -1 ? strerror(errno) : "short write");
		(void)kill(j->fs->pid, SIGKILL);
	}
}

/* The running job the server calls id, or NULL. */
static struct runner_job *
rn_fs_job(struct rn_fs *s, uint64_t id)
{
	struct runner_job	*j;

	TAILQ_FOREACH(j, &rn.running, entry)
		if (j->fs == s && j->fs_id == id)
			return j;
	return NULL;
}

/*
 * The server did not start a job (nothing ran): a malformed request fails
 * it, anything else sends it direct.
 */
static void
rn_fs_failed(struct runner_job *j, int kind, int err)
{
	if (kind == GE_FAIL_REQUEST || j->cancelled) {
		if (!j->cancelled) {
			j->failed = 1;
			j->kind = GBR_ERR_INTERNAL;
			j->reason = xasprintf("the fork server refused to run "
			    "'%s' (%s)", j->argv0, strerror(err));
		}
		rn_reaped(j);
		return;
	}
	log_debug("runner: the fork server cannot run '%s' (%s); direct",
	    j->argv0, strerror(err));
	rn.fs_fallbacks++;
	TAILQ_REMOVE(&rn.running, j, entry);
	rn.nrunning--;
	rn_event_free(&j->ev_out);
	rn_event_free(&j->ev_err);
	rn_event_free(&j->ev_in);
	rn_event_free(&j->ev_st);
	rn_close(&j->fd_out);
	rn_close(&j->fd_err);
	rn_close(&j->fd_in);
	rn_close(&j->fd_st);
	j->fs = NULL;
	j->pid = -1;
	j->input_off = 0;
	j->st_len = 0;
	if (rn_spawn_direct(j) != 0) {
		j->failed = 1;
		rn_to_finished(j);
	}
}

/* Handles one message from the server. */
static void
rn_fs_message(struct rn_fs *s, const struct ge_msg *m)
{
	struct runner_job	*j = NULL;

	if (m->type != GE_MSG_READY && (j = rn_fs_job(s, m->job)) == NULL)
		return;	/* a job already finished (cancelled, then DONE) */
	switch (m->type) {
	case GE_MSG_READY:
		s->ready = 1;
		s->shared_vm = (m->arg & GE_READY_SHARED_VM) != 0;
		break;
	case GE_MSG_FAILED:
		rn_fs_failed(j, m->kind, m->arg);
		break;
	case GE_MSG_DONE:
		j->wstatus = m->arg;
		j->reaped = 1;
		rn_reaped(j);
		break;
	}
}

/* The server's socket is readable: its messages, or its end. */
static void
rn_fs_on_ctl(evutil_socket_t fd, short what, void *arg)
{
	struct rn_fs	*s = arg;
	struct ge_msg	 m;
	ssize_t		 n;
	int		 k;

	for (k = 0; k < RN_FS_READ_BURST && !s->lost; k++) {
		n = recv(s->ctl, &m, sizeof m, MSG_DONTWAIT | MSG_TRUNC);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			rn_fs_lost(s, n == 0 ? "closed its socket" :
			    "broke its socket");
			return;
		}
		if ((size_t)n != sizeof m || m.magic != GE_MSG_MAGIC) {
			log_warn("runner: a malformed message from the fork "
			    "server; killing it");
			(void)kill(s->pid, SIGKILL);
			return;
		}
		rn_fs_message(s, &m);
	}
}

/* The server's pidfd is readable: it has ended. */
static void
rn_fs_on_pidfd(evutil_socket_t fd, short what, void *arg)
{
	struct rn_fs	*s = arg;
	struct timeval	 tv = { 0, 0 };

	if (!s->lost)
		rn_fs_lost(s, "exited");
	/* Reaped (and freed) from the deliver event, not from here. */
	event_add(rn.ev_deliver, &tv);
}

/* Frees a server's state (never from one of its own events). */
void
rn_fs_free(struct rn_fs *s)
{
	rn_event_free(&s->ev_ctl);
	rn_event_free(&s->ev_pid);
	rn_close(&s->ctl);
	rn_close(&s->pidfd);
	free(s);
}

/* Reaps the lost servers that have ended, and frees them. */
void
rn_fs_reap_dying(void)
{
	struct rn_fs	*s, *next;
	pid_t		 r;
	int		 st;

	for (s = TAILQ_FIRST(&rn.fs_dying); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		do {
			r = waitpid(s->pid, &st, WNOHANG);
		} while (r == -1 && errno == EINTR);
		if (r == 0)
			continue;	/* not yet: its pidfd or SIGCHLD says when */
		TAILQ_REMOVE(&rn.fs_dying, s, entry);
		rn_fs_free(s);
	}
}

/*
 * A server is gone (or must go): it is killed, each of its jobs fails, and
 * another is started unless it died too often.
 */
void
rn_fs_lost(struct rn_fs *s, const char *why)
{
	struct runner_job	*j, *next;
	struct timeval		 tv = { 0, 0 };
	int64_t			 now = (int64_t)clock_mono_ms();
	unsigned		 i, recent;

	if (s->lost)
		return;
	s->lost = 1;
	log_warn("runner: the fork server (pid %ld) %s", (long)s->pid, why);
	if (rn.fs == s)
		rn.fs = NULL;
	/* Its pidfd event stays: it says when the process is there to reap. */
	event_del(s->ev_ctl);
	(void)kill(s->pid, SIGKILL);	/* unreaped: the pid is still its */
	TAILQ_INSERT_TAIL(&rn.fs_dying, s, entry);
	/* Its inits died with it (death signal), and their namespaces. */
	for (j = TAILQ_FIRST(&rn.running); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (j->fs != s)
			continue;
		j->failed = 1;
		j->kind = GBR_ERR_INTERNAL;
		free(j->reason);
		j->reason = xasprintf("the runner's fork server ended during "
		    "the run of '%s' (it is restarted; the command may have "
		    "partly run)", j->argv0);
		j->fs = NULL;
		rn_reaped(j);
	}
	rn.fs_deaths[rn.fs_ndeaths++ % RN_FS_DEATHS] = now;
	for (i = recent = 0; i < RN_FS_DEATHS && i < rn.fs_ndeaths; i++)
		if (now - rn.fs_deaths[i] < RN_FS_WINDOW_MS)
			recent++;
	if (recent >= RN_FS_DEATHS) {
		rn.fs_given_up = 1;
		free(rn.fs_why);
		rn.fs_why = xasprintf("the fork server died %u times within %d "
		    "s", recent, RN_FS_WINDOW_MS / 1000);
		log_warn("runner: %s; runs go direct from now on", rn.fs_why);
	} else if (!rn.fs_given_up && rn.spawn == RUNNER_SPAWN_AUTO)
		(void)rn_fs_start();
	event_add(rn.ev_deliver, &tv);
}

/*
 * Starts a fork server (not waiting for it: its READY comes through the
 * loop, and runs sent before it queue in the socket). Returns 0, or -1
 * with rn.fs_why set.
 */
int
rn_fs_start(void)
{
	static const char *const pass[] = {
		"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
		"GBR_FAULT_FILE",	/* tests (gbr-exec.c, ge_sv_fault) */
	};
	posix_spawn_file_actions_t	 fa;
	posix_spawnattr_t		 at;
	struct rn_fs			*s;
	sigset_t			 none, all;
	char				 ppid[32], *argv[9], *envp[6];
	const char			*v;
	size_t				 i, ne = 0;
	pid_t				 pid;
	int				 sp[2], r, size = (int)GE_MSG_MAX;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
		free(rn.fs_why);
		rn.fs_why = xasprintf("socketpair: %s", strerror(errno));
		return -1;
	}
	/* Big requests fit where the system allows; others go direct. */
	(void)setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
	(void)rn_nonblock(sp[0]);
	snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
	argv[0] = rn.exec_path;
	argv[1] = (char *)"-S";
	argv[2] = (char *)"-s";
	argv[3] = (char *)"3";
	argv[4] = (char *)"-p";
	argv[5] = ppid;
	argv[6] = NULL;
	if (runfilter_fd(1) != -1) {
		argv[6] = (char *)"-F";
		argv[7] = (char *)"4";
		argv[8] = NULL;
	}
	/* Nothing of ours but the sweep's mark (and the sanitizers'). */
	if (rn.instance != NULL)
		envp[ne++] = rn.instance;
	for (i = 0; i < sizeof pass / sizeof pass[0]; i++)
		if ((v = getenv(pass[i])) != NULL)
			envp[ne++] = xasprintf("%s=%s", pass[i], v);
	envp[ne] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, sp[1], 3);
	if (runfilter_fd(1) != -1)
		posix_spawn_file_actions_adddup2(&fa, runfilter_fd(1),
		    RN_FILTER_FD);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
	    POSIX_SPAWN_SETSIGDEF |
#ifdef POSIX_SPAWN_SETSID
	    POSIX_SPAWN_SETSID
#else
	    POSIX_SPAWN_SETPGROUP
#endif
	    );
	r = posix_spawn(&pid, rn.exec_path, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	for (i = rn.instance != NULL ? 1 : 0; i < ne; i++)
		free(envp[i]);
	close(sp[1]);
	if (r != 0) {
		close(sp[0]);
		free(rn.fs_why);
		rn.fs_why = xasprintf("cannot start %s -S: %s", rn.exec_path,
		    strerror(r));
		return -1;
	}
	s = xcalloc(1, sizeof *s);
	s->pid = pid;
	s->ctl = sp[0];
	s->pidfd = rn_pidfd_open(pid);
	s->ev_ctl = event_new(rn.base, s->ctl, EV_READ | EV_PERSIST,
	    rn_fs_on_ctl, s);
	if (s->ev_ctl == NULL)
		fatalx("runner: cannot create events");
	event_add(s->ev_ctl, NULL);
	if (s->pidfd != -1) {
		s->ev_pid = event_new(rn.base, s->pidfd, EV_READ,
		    rn_fs_on_pidfd, s);
		if (s->ev_pid == NULL)
			fatalx("runner: cannot create events");
		event_add(s->ev_pid, NULL);
	} else if (rn_watch_sigchld() != 0)
		fatalx("runner: cannot watch SIGCHLD");
	rn.fs = s;
	rn.fs_starts++;
	return 0;
}

/*
 * Reads one message from a server, waiting at most until deadline (start
 * only). Returns 1 with *m, 0 on timeout, -1 if the server is gone.
 */
static int
rn_fs_wait(struct rn_fs *s, struct ge_msg *m, int64_t deadline)
{
	struct pollfd	pfd;
	ssize_t		n;
	int64_t		left;

	for (;;) {
		n = recv(s->ctl, m, sizeof *m, MSG_DONTWAIT | MSG_TRUNC);
		if (n == (ssize_t)sizeof *m && m->magic == GE_MSG_MAGIC)
			return 1;
		if (n == 0 || (n == -1 && errno != EAGAIN &&
		    errno != EWOULDBLOCK && errno != EINTR))
			return -1;
		if (n > 0)
			return -1;	/* malformed */
		if ((left = deadline - (int64_t)clock_mono_ms()) <= 0)
			return 0;
		pfd.fd = s->ctl;
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, (int)left);
	}
}

/*
 * At start: runs the probe (gbr-exec -T) through the new server, which must
 * report what the direct probe reported. Blocking, at most RN_FS_PROBE_MS.
 * Returns 0, or -1 with rn.fs_why set (the caller stops the server).
 */
static int
rn_fs_probe(struct rn_fs *s)
{
	struct rn_strv	 av, ev;
	struct ge_msg	 m;
	struct pollfd	 pfds[2];
	char		 buf[RN_STATUS_MAX + 1], *nl;
	size_t		 len = 0;
	ssize_t		 n;
	int64_t		 deadline = (int64_t)clock_mono_ms() + RN_FS_PROBE_MS, left;
	int		 p[2], fds[GE_MSG_FDS], out, e, r, done = 0;
	struct rn_setup	 su;

	if (pipe2(p, O_CLOEXEC) != 0) {
		rn.fs_why = xasprintf("pipe: %s", strerror(errno));
		return -1;
	}
	if ((out = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1) {
		rn.fs_why = xasprintf("/dev/null: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	memset(&av, 0, sizeof av);
	memset(&ev, 0, sizeof ev);
	rn_strv_add(&av, rn.exec_path);
	rn_strv_add(&av, "-T");
	rn_strv_add(&av, "-l");
	rn_strv_add(&av, rn_mode_name(rn.landlock));
	rn_strv_add(&av, "-N");
	rn_strv_add(&av, rn_mode_name(rn.namespaces));
	rn_strv_add(&av, "-K");
	rn_strv_add(&av, "auto");
	rn_strv_num(&av, "-n", 64);
	rn_strv_add(&av, "-w");
	rn_strv_add(&av, "/tmp");
	rn_strv_add(&av, "--");
	rn_strv_add(&av, "true");
	rn_strv_add(&ev, "PATH=/usr/bin:/bin");
	fds[0] = rn.devnull;
	fds[1] = fds[2] = out;
	fds[3] = p[1];
	e = rn_fs_send_run(s, 0, &av, &ev, fds);
	rn_strv_free(&av);
	rn_strv_free(&ev);
	close(out);
	close(p[1]);
	if (e != 0) {
		close(p[0]);
		rn.fs_why = xasprintf("cannot send it a run: %s", strerror(e));
		return -1;
	}
	/*
	 * READY, then the status pipe to its end (the init closes it); FAILED
	 * says nothing ran, DONE that the init ended badly.
	 */
	pfds[0].fd = s->ctl;
	pfds[0].events = POLLIN;
	pfds[1].fd = p[0];
	pfds[1].events = POLLIN;
	while (!done && (left = deadline - (int64_t)clock_mono_ms()) > 0 &&
	    poll(pfds, 2, (int)left) > 0) {
		if (pfds[0].revents != 0) {
			if ((r = rn_fs_wait(s, &m, (int64_t)clock_mono_ms())) < 0) {
				close(p[0]);
				rn.fs_why = xstrdup("it ended at once (see the log)");
				return -1;
			}
			if (r == 1 && m.type == GE_MSG_READY) {
				s->ready = 1;
				s->shared_vm = (m.arg & GE_READY_SHARED_VM) != 0;
			} else if (r == 1 && m.job == 0 &&
			    m.type == GE_MSG_FAILED) {
				close(p[0]);
				rn.fs_why = xasprintf("it cannot start a run: %s",
				    strerror(m.arg));
				return -1;
			}
		}
		if (pfds[1].revents != 0) {
			n = read(p[0], buf + len, sizeof buf - 1 - len);
			if (n > 0 && len + (size_t)n < sizeof buf - 1)
				len += (size_t)n;
			else
				done = 1;
		}
	}
	close(p[0]);
	buf[len] = '\0';
	if (!done) {
		rn.fs_why = xstrdup("no answer in time");
		return -1;
	}
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	if (rn_parse_setup(buf, &su) != 0 || su.ns != rn.probe_ns ||
	    su.userns != rn.probe_userns || su.caps != rn.probe_caps ||
	    su.seccomp != rn.probe_seccomp ||
	    strcmp(su.nproc, rn.probe_nproc) != 0) {
		rn.fs_why = xasprintf("its probe run differs from a direct one "
		    "(\"%s\")", len > 0 ? buf : "no report");
		return -1;
	}
	return 0;
}

/* At start: the fork server, where it applies. */
void
rn_fs_init(void)
{
	free(rn.fs_why);
	rn.fs_why = NULL;
	if (rn.spawn != RUNNER_SPAWN_AUTO || rn.namespaces == RUNNER_OFF ||
	    !rn.probe_ns)
		return;
	if (rn_fs_start() != 0 || rn_fs_probe(rn.fs) != 0) {
		log_warn("runner: the fork server does not work here (%s); "
		    "runs go direct", rn.fs_why);
		rn.fs_given_up = 1;
		if (rn.fs != NULL) {
			(void)kill(rn.fs->pid, SIGKILL);
			rn.fs->lost = 1;
			event_del(rn.fs->ev_ctl);
			TAILQ_INSERT_TAIL(&rn.fs_dying, rn.fs, entry);
			rn.fs = NULL;
		}
		return;
	}
	log_debug("runner: fork server pid %ld (%s memory)", (long)rn.fs->pid,
	    rn.fs->shared_vm ? "shared" : "copied");
}

/* Why runs go direct now (static or rn.fs_why), or NULL if they do not. */
const char *
rn_fs_why_direct(void)
{
	if (rn.spawn != RUNNER_SPAWN_AUTO)
		return "fork_server = off in gbrd.conf";
	if (rn.namespaces == RUNNER_OFF || !rn.probe_ns)
		return "no namespaces here (a run must die with its server)";
	if (rn.fs != NULL)
		return NULL;
	return rn.fs_why != NULL ? rn.fs_why : "the fork server is not running";
}

/* The fork server's pid. */
long
runner_fork_server_pid(void)
{
	return rn.fs != NULL ? (long)rn.fs->pid : -1;
}
