/*
 * The runner (see runner.h): the life of a job, from runner_start to its
 * done callback. Every job is on exactly one of three lists of rn
 * (runner-int.h): queued (waiting for a slot), running (a child exists
 * and is not reaped), finished (waiting for the deliver event to call its
 * done callback and free it). A job is only ever freed from that event,
 * never from one of its own callbacks. This file owns those lists and
 * their moves: the slots (max_children, max_per_key) and the queue, the
 * timer (queue deadline, timeout, grace), the signals to a job's process
 * group, the reaping (a pidfd, or SIGCHLD and waitid; after it at most
 * RN_DRAIN_MAX bytes more are read from each pipe before it is closed),
 * the result built from the child's status, and runner_shutdown.
 *
 * It does not own how a child is started (runner-spawn.c direct,
 * runner-forksrv.c through the fork server), what is read from and
 * written to its pipes (runner-io.c), or the daemon-wide setup and
 * policy (runner-setup.c). A job the fork server runs is not our child:
 * its end comes from the server, and its signals go through it.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_SYS_SYSCALL_H
#include <sys/syscall.h>
#endif

#include <event2/event.h>

#include "log.h"
#include "runfilter.h"
#include "runner-int.h"
#include "xmalloc.h"

#define RN_DRAIN_MAX	(1024 * 1024)	/* bytes read per pipe after the reap */
#define RN_ARGV_MAX	4096		/* arguments of a target */
#define RN_ENV_MAX	1024		/* environment entries */

struct rn_runner rn;

static void	rn_finish(struct runner_job *);

/* Signal names, for results. */
const char *
runner_signal_name(int sig)
{
	static const char *const names[] = {
		[SIGHUP] = "SIGHUP", [SIGINT] = "SIGINT", [SIGQUIT] = "SIGQUIT",
		[SIGILL] = "SIGILL", [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT",
		[SIGBUS] = "SIGBUS", [SIGFPE] = "SIGFPE", [SIGKILL] = "SIGKILL",
		[SIGUSR1] = "SIGUSR1", [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
		[SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM", [SIGTERM] = "SIGTERM",
		[SIGCHLD] = "SIGCHLD", [SIGCONT] = "SIGCONT", [SIGSTOP] = "SIGSTOP",
		[SIGTSTP] = "SIGTSTP", [SIGTTIN] = "SIGTTIN", [SIGTTOU] = "SIGTTOU",
		[SIGURG] = "SIGURG", [SIGXCPU] = "SIGXCPU", [SIGXFSZ] = "SIGXFSZ",
		[SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF",
		[SIGWINCH] = "SIGWINCH", [SIGIO] = "SIGIO", [SIGSYS] = "SIGSYS",
	};
	static char	buf[16];

	if (sig > 0 && (size_t)sig < sizeof names / sizeof names[0] &&
	    names[sig] != NULL)
		return names[sig];
	snprintf(buf, sizeof buf, "SIG%d", sig);
	return buf;
}

/* Called on SIGCHLD when pidfds are not used: who has ended? */
static void
rn_sigchld(evutil_socket_t sig, short what, void *arg)
{
	struct runner_job	*j, *next;
	siginfo_t		 si;

	/* The fork server is our child too: has it ended? */
	if (rn.fs != NULL && rn.fs->pidfd == -1) {
		memset(&si, 0, sizeof si);
		if (waitid(P_PID, (id_t)rn.fs->pid, &si,
		    WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == rn.fs->pid)
			rn_fs_lost(rn.fs, "exited");
	}
	rn_fs_reap_dying();
	for (j = TAILQ_FIRST(&rn.running); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (j->exited || j->fs != NULL)
			continue;	/* the server's jobs are not our children */
		memset(&si, 0, sizeof si);
		/* WNOWAIT: the zombie keeps the group id ours until the kill. */
		if (waitid(P_PID, (id_t)j->pid, &si,
		    WEXITED | WNOHANG | WNOWAIT) == 0) {
			if (si.si_pid == j->pid)
				rn_finish(j);
		} else if (errno == ECHILD)
			rn_finish(j);	/* reaped elsewhere: finish anyway */
	}
}

/* Frees a job and everything it holds (never from one of its own events). */
static void
rn_job_free(struct runner_job *j)
{
	rn_event_free(&j->ev_out);
	rn_event_free(&j->ev_err);
	rn_event_free(&j->ev_in);
	rn_event_free(&j->ev_st);
	rn_event_free(&j->ev_pid);
	rn_event_free(&j->ev_timer);
	rn_close(&j->fd_out);
	rn_close(&j->fd_err);
	rn_close(&j->fd_in);
	rn_close(&j->fd_st);
	rn_close(&j->pidfd);
	rn_strv_free(&j->argv);
	rn_strv_free(&j->envp);
	free(j->argv0);
	free(j->key);
	free(j->input);
	free(j->out.p);
	free(j->err.p);
	free(j->reason);
	free(j);
}

/* Delivers every finished job's result, then frees it. */
void
rn_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j;
	struct runner_result	 r;
	struct rn_setup		 su;
	int			 i;
	char			 stage[32], *line, *nl;
	int			 code, sig, core;
	int			 have_status = 0, err = 0, init_sig = 0;
	int			 have_setup;

	/* Fork servers that were lost and have ended since. */
	rn_fs_reap_dying();
	/* Queued jobs take the free slots before done callbacks start more. */
	rn_pump();
	while ((j = TAILQ_FIRST(&rn.finished)) != NULL) {
		TAILQ_REMOVE(&rn.finished, j, entry);
		memset(&r, 0, sizeof r);
		memset(&su, 0, sizeof su);
		snprintf(su.nproc, sizeof su.nproc, "none");
		have_status = err = init_sig = 0;
		have_setup = 0;
		stage[0] = '\0';
		code = sig = core = 0;
		j->st[j->st_len] = '\0';
		for (line = j->st; line != NULL && *line != '\0'; line = nl) {
			if ((nl = strchr(line, '\n')) != NULL)
				*nl++ = '\0';
			if (strncmp(line, "setup ", 6) == 0)
				have_setup = rn_parse_setup(line, &su) == 0;
			else if (sscanf(line, "error init %d", &i) == 1)
				init_sig = i;
			else if (sscanf(line, "error %31s %d", stage, &i) == 2)
				err = i != 0 ? i : EIO;
			else if (sscanf(line, "exit %d", &i) == 1) {
				have_status = 1;
				code = i;
			} else if (sscanf(line, "signal %d %d", &sig, &core) == 2)
				have_status = 2;
		}
		r.ns = su.ns;
		r.userns = su.userns;
		r.landlock_abi = su.ll;
		r.caps_dropped = su.caps;
		r.nproc = su.nproc;
		r.hidden = su.hidden;
		r.ro_binds = su.ro;
		r.seccomp = su.seccomp;
		r.own_proc = su.proc;
		r.private_tmp = su.tmp;
		r.supervised = su.sup;
		r.chained = su.chain;
		r.timed_out = j->timed_out;
		r.cancelled = j->cancelled;
		r.output_limited = j->output_limited;
		r.truncated = j->truncated;
		r.duration_ms = j->t_start != 0 ? j->t_end - j->t_start : 0;
		r.queued_ms = (j->t_start != 0 ? j->t_start : j->t_end) -
		    j->t_queued;
		r.out = j->out.p;
		r.out_len = j->out.len;
		r.out_total = j->out.total;
		r.err = j->err.p;
		r.err_len = j->err.len;
		r.err_total = j->err.total;
		if (j->failed) {
			r.failed = 1;
			r.kind = j->kind;
			r.reason = j->reason;
		} else if (err != 0 && stage[0] != '\0') {
			r.failed = 1;
			r.setup_stage = stage;
			r.setup_errno = err;
			if (strcmp(stage, "exec") == 0 && (err == ENOENT ||
			    err == ENOTDIR))
				r.kind = GBR_ERR_NOT_FOUND;
			else if (strcmp(stage, "exec") == 0 && err == EACCES)
				r.kind = GBR_ERR_PERMISSION_DENIED;
			else if (strcmp(stage, "landlock-abi") == 0 ||
			    strcmp(stage, "unshare") == 0)
				r.kind = GBR_ERR_UNAVAILABLE;
			else
				r.kind = GBR_ERR_INTERNAL;
			j->reason = xasprintf("cannot run '%s': %s (%s)",
			    j->argv0, strerror(err), stage);
			r.reason = j->reason;
		} else if (!j->cancelled || j->reaped) {
			/*
			 * Only an init or a supervisor writes these lines (the
			 * target never holds the descriptor): they are the
			 * target's own status.
			 */
			if (have_status == 1) {
				r.exited = 1;
				r.exit_code = code;
			} else if (have_status == 2) {
				r.signo = sig;
				r.core = core;
			} else if (su.ns && init_sig != 0)
				r.signo = init_sig;
			else if (j->reaped && WIFSIGNALED(j->wstatus)) {
				r.signo = WTERMSIG(j->wstatus);
				r.core = WCOREDUMP(j->wstatus) ? 1 : 0;
			} else if (j->reaped && WIFEXITED(j->wstatus)) {
				if (!have_setup &&
				    WEXITSTATUS(j->wstatus) == 125) {
					/* gbr-exec refused its arguments. */
					r.failed = 1;
					r.kind = GBR_ERR_INTERNAL;
					j->reason = xasprintf("gbr-exec refused "
					    "to run '%s'", j->argv0);
					r.reason = j->reason;
				} else {
					r.exited = 1;
					r.exit_code = WEXITSTATUS(j->wstatus);
				}
			}
		}
		if (j->done_cb != NULL)
			j->done_cb(j->arg, &r);
		rn_job_free(j);
	}
}

/* Sends a signal to the job's whole process group. */
void
rn_kill(struct runner_job *j, int sig)
{
	/*
	 * Only while the child is unreaped: its zombie keeps the group id
	 * from being reused by anyone else. The fork server does the same
	 * with the runs it holds.
	 */
	if (j->reaped || (j->pid <= 0 && j->fs == NULL))
		return;
	if (j->fs != NULL)
		rn_fs_kill(j, sig);
	else if (j->supervised && sig == SIGKILL && j->fs_kills <=
	    RN_SUP_KILL_WAIT)
		/*
		 * A supervisor (gbr-exec.c, "Supervisor") killed first would
		 * leave the run's other processes to init: it gets SIGUSR1,
		 * kills everything and ends. Only one that does not end in
		 * RN_SUP_KILL_WAIT seconds gets SIGKILL itself.
		 */
		(void)kill(j->pid, SIGUSR1);
	else if (kill(-j->pid, sig) != 0 && errno == ESRCH)
		(void)kill(j->pid, sig);
	if (sig == SIGKILL)
		j->kill_sent = 1;
	else if (sig == SIGTERM)
		j->term_sent = 1;
}

/* Moves a job to the finished list and wakes the deliver event. */
void
rn_to_finished(struct runner_job *j)
{
	struct timeval	tv = { 0, 0 };

	j->state = RN_FINISHED;
	j->t_end = (int64_t)clock_mono_ms();
	if (j->ev_timer != NULL)
		event_del(j->ev_timer);
	TAILQ_INSERT_TAIL(&rn.finished, j, entry);
	event_add(rn.ev_deliver, &tv);
}

/* The timer: a queue deadline, the timeout, or the end of the grace. */
static void
rn_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;
	struct timeval		 tv;

	if (j->state == RN_QUEUED) {
		TAILQ_REMOVE(&rn.queued, j, entry);
		rn.nqueued--;
		j->failed = 1;
		j->kind = GBR_ERR_BUSY;
		j->reason = xasprintf("no free slot to run '%s' within %d ms "
		    "(%u running)", j->argv0, j->limits.timeout_ms, rn.nrunning);
		rn_to_finished(j);
		return;
	}
	if (j->state != RN_RUNNING)
		return;
	if (!j->term_sent && !j->kill_sent) {
		if (!j->output_limited && !j->cancelled)
			j->timed_out = 1;
		rn_kill(j, SIGTERM);
		tv.tv_sec = rn.grace_ms / 1000;
		tv.tv_usec = (rn.grace_ms % 1000) * 1000;
		evtimer_add(j->ev_timer, &tv);
		return;
	}
	/* The grace is over: nothing in the group may ignore this. */
	if (j->supervised && j->kill_sent && ++j->fs_kills == RN_SUP_KILL_WAIT + 1)
		log_warn("runner: the supervisor of '%s' has not ended it %d s "
		    "after SIGUSR1; killing it", j->argv0, RN_SUP_KILL_WAIT);
	if (j->fs != NULL && j->kill_sent && ++j->fs_kills > RN_FS_KILL_WAIT &&
	    !j->fs->lost) {
		/* The server does not end the run: it goes, the run with it. */
		log_warn("runner: the fork server has not ended '%s' %d s "
		    "after SIGKILL; killing it", j->argv0, RN_FS_KILL_WAIT);
		(void)kill(j->fs->pid, SIGKILL);
	}
	rn_kill(j, SIGKILL);
	tv.tv_sec = 1;
	tv.tv_usec = 0;
	evtimer_add(j->ev_timer, &tv);	/* again, in case of a stuck fork */
}

/*
 * The direct child has ended (it is a zombie, or already gone): kill the
 * rest of its group, reap it, take what is left in the pipes, and finish.
 */
static void
rn_finish(struct runner_job *j)
{
	pid_t	r;

	if (j->state != RN_RUNNING)
		return;
	j->exited = 1;
	/* Grandchildren holding the pipes or ignoring SIGTERM end here. */
	if (j->pid > 0 && kill(-j->pid, SIGKILL) != 0 && errno != ESRCH)
		log_debug("runner: kill -%ld: %s", (long)j->pid, strerror(errno));
	do {
		r = waitpid(j->pid, &j->wstatus, WNOHANG);
	} while (r == -1 && errno == EINTR);
	if (r == j->pid)
		j->reaped = 1;
	else if (r == 0) {
		/* Not a zombie yet (a spurious wakeup): wait for the next one. */
		j->exited = 0;
		if (j->ev_pid != NULL)
			event_add(j->ev_pid, NULL);
		return;
	} else {
		log_warn("runner: pid %ld was reaped elsewhere", (long)j->pid);
		j->reaped = 1;
		j->wstatus = 0;
	}
	rn_reaped(j);
}

/*
 * The job's child is reaped (or, for the fork server's jobs, the server
 * said so, or is gone): take what is left in the pipes, and finish.
 */
void
rn_reaped(struct runner_job *j)
{
	j->exited = 1;
	TAILQ_REMOVE(&rn.running, j, entry);
	rn.nrunning--;
	/* Whatever the child wrote before it ended is in the pipes now. */
	rn_event_stop(j->ev_out);
	rn_event_stop(j->ev_err);
	rn_event_stop(j->ev_in);
	rn_event_stop(j->ev_st);
	rn_event_stop(j->ev_pid);
	if (j->fd_out != -1)
		(void)rn_read(j, &j->fd_out, NULL, RUNNER_STDOUT, 0,
		    RN_DRAIN_MAX);
	if (j->fd_err != -1)
		(void)rn_read(j, &j->fd_err, NULL, RUNNER_STDERR, 0,
		    RN_DRAIN_MAX);
	if (j->fd_st != -1)
		(void)rn_read_status(j);
	rn_close(&j->fd_out);
	rn_close(&j->fd_err);
	rn_close(&j->fd_in);
	rn_close(&j->fd_st);
	rn_close(&j->pidfd);
	/* Its slot goes to the queue from the deliver event. */
	rn_to_finished(j);
}

/* The pidfd is readable: the child has ended. */
void
rn_on_pidfd(evutil_socket_t fd, short what, void *arg)
{
	rn_finish(arg);
}

/* Opens a pidfd for a child, or -1. */
int
rn_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	int	fd;

	if (!rn.use_pidfd)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd == -1 && (errno == ENOSYS || errno == EINVAL)) {
		rn.use_pidfd = 0;
		log_info("runner: no pidfd here (%s); reaping on SIGCHLD",
		    strerror(errno));
	}
	if (fd != -1)
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
#else
	(void)pid;
	return -1;
#endif
}

/* Makes sure SIGCHLD is watched (the fallback when pidfds are missing). */
int
rn_watch_sigchld(void)
{
	if (rn.ev_sigchld != NULL)
		return 0;
	rn.ev_sigchld = evsignal_new(rn.base, SIGCHLD, rn_sigchld, NULL);
	if (rn.ev_sigchld == NULL || event_add(rn.ev_sigchld, NULL) != 0)
		return -1;
	return 0;
}

/*
 * A job's child has been started, with these pipe ends (fd_in -1 without
 * input): the job runs, its pipes are watched and its timeout is set.
 */
void
rn_running(struct runner_job *j, int fd_out, int fd_err, int fd_st, int fd_in)
{
	struct timeval	tv;

	j->t_start = (int64_t)clock_mono_ms();
	j->fd_out = fd_out;
	j->fd_err = fd_err;
	j->fd_st = fd_st;
	j->fd_in = fd_in;
	(void)rn_nonblock(j->fd_out);
	(void)rn_nonblock(j->fd_err);
	(void)rn_nonblock(j->fd_st);
	j->state = RN_RUNNING;
	TAILQ_INSERT_TAIL(&rn.running, j, entry);
	rn.nrunning++;

	j->ev_out = event_new(rn.base, j->fd_out, EV_READ | EV_PERSIST,
	    rn_on_output, j);
	j->ev_err = event_new(rn.base, j->fd_err, EV_READ | EV_PERSIST,
	    rn_on_output, j);
	j->ev_st = event_new(rn.base, j->fd_st, EV_READ | EV_PERSIST,
	    rn_on_status, j);
	if (j->ev_out == NULL || j->ev_err == NULL || j->ev_st == NULL)
		fatalx("runner: cannot create events");
	event_add(j->ev_out, NULL);
	event_add(j->ev_err, NULL);
	event_add(j->ev_st, NULL);
	if (j->fd_in != -1) {
		(void)rn_nonblock(j->fd_in);
		j->ev_in = event_new(rn.base, j->fd_in, EV_WRITE | EV_PERSIST,
		    rn_on_input, j);
		if (j->ev_in == NULL)
			fatalx("runner: cannot create events");
		event_add(j->ev_in, NULL);
	}
	tv.tv_sec = j->limits.timeout_ms / 1000;
	tv.tv_usec = (j->limits.timeout_ms % 1000) * 1000;
	evtimer_add(j->ev_timer, &tv);
}

/* Jobs running now for a key. */
static unsigned
rn_key_running(const char *key)
{
	struct runner_job	*j;
	unsigned		 n = 0;

	if (key == NULL)
		return 0;
	TAILQ_FOREACH(j, &rn.running, entry)
		if (j->key != NULL && strcmp(j->key, key) == 0)
			n++;
	return n;
}

/* True if a job may start now. */
static int
rn_slot_free(const char *key)
{
	return rn.nrunning < rn.max_children &&
	    (key == NULL || rn_key_running(key) < rn.max_per_key);
}

/* Starts queued jobs while slots are free, oldest first. */
void
rn_pump(void)
{
	struct runner_job	*j, *next;

	for (j = TAILQ_FIRST(&rn.queued); j != NULL &&
	    rn.nrunning < rn.max_children; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (!rn_slot_free(j->key))
			continue;
		TAILQ_REMOVE(&rn.queued, j, entry);
		rn.nqueued--;
		evtimer_del(j->ev_timer);
		if (rn_spawn(j) != 0) {
			j->failed = 1;
			rn_to_finished(j);
		}
	}
}

/* Starts or queues a job (see runner.h). */
int
runner_start(const struct runner_opts *o, runner_output_cb out_cb,
    runner_done_cb done_cb, void *arg, struct runner_job **jobp,
    enum gbr_err *kind, char **reason)
{
	struct runner_job	*j;
	enum runner_mode	 ll;
	size_t			 i, n;

	if (jobp != NULL)
		*jobp = NULL;
	*reason = NULL;
	if (!rn.ready) {
		*kind = GBR_ERR_UNAVAILABLE;
		*reason = xstrdup(rn.exec_path == NULL ? "commands cannot run "
		    "here: gbr-exec was not found (set GBR_EXEC or install it)" :
		    "the runner is not set up");
		return -1;
	}
	if (rn.refusal != NULL) {
		*kind = GBR_ERR_UNAVAILABLE;
		*reason = xstrdup(rn.refusal);
		return -1;
	}
	for (n = 0; o->argv != NULL && o->argv[n] != NULL; n++)
		;
	if (n == 0 || o->argv[0][0] == '\0' || n > RN_ARGV_MAX ||
	    o->cwd == NULL || o->cwd[0] != '/' || o->limits.timeout_ms <= 0 ||
	    (o->limits.max_output == 0 && !o->stream) ||
	    (o->stream && o->input != NULL) || !rn_paths_ok(o->rw_paths, o->nrw) ||
	    !rn_paths_ok(o->ro_paths, o->nro) ||
	    !rn_paths_ok(o->ro_binds, o->nro_binds)) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xstrdup(n > RN_ARGV_MAX ? "too many arguments" :
		    "nothing to run, or a bad working folder, path or limit");
		return -1;
	}
	for (i = 0; o->envp != NULL && o->envp[i] != NULL; i++)
		;
	if (i > RN_ENV_MAX) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xstrdup("too many environment variables");
		return -1;
	}
	/* The stricter of the daemon's mode and the job's. */
	ll = o->landlock > rn.landlock ? o->landlock : rn.landlock;
	if (ll == RUNNER_REQUIRE && rn.ll_abi < 2) {
		*kind = GBR_ERR_UNAVAILABLE;
		*reason = xasprintf("Landlock is required, and this kernel %s",
		    rn.ll_abi == 0 ? "has no Landlock (or it is disabled)" :
		    "has only ABI 1 (2 or later is needed)");
		return -1;
	}
	if (!rn_slot_free(o->key) && rn.nqueued >= rn.max_queued) {
		*kind = GBR_ERR_BUSY;
		*reason = xasprintf("%u commands running and %u waiting: try "
		    "again later", rn.nrunning, rn.nqueued);
		return -1;
	}

	j = xcalloc(1, sizeof *j);
	j->pid = -1;
	j->pidfd = j->fd_out = j->fd_err = j->fd_in = j->fd_st = -1;
	j->limits = o->limits;
	j->out_cb = out_cb;
	j->done_cb = done_cb;
	j->arg = arg;
	j->argv0 = xstrdup(o->argv[0]);
	j->key = o->key != NULL ? xstrdup(o->key) : NULL;
	if (o->input != NULL) {
		j->input = xmalloc(o->input_len + 1);
		memcpy(j->input, o->input, o->input_len);
		j->input_len = o->input_len;
	}
	if (o->stream) {
		/* A pipe for stdin, left open for runner_write. */
		j->stream = 1;
		j->input = xmalloc(1);
	}
	rn_build_argv(j, o, ll);
	rn_build_envp(j, o);
	j->t_queued = (int64_t)clock_mono_ms();
	if ((j->ev_timer = evtimer_new(rn.base, rn_on_timer, j)) == NULL)
		fatalx("runner: cannot create a timer");

	if (rn_slot_free(j->key)) {
		if (rn_spawn(j) != 0) {
			*kind = j->kind;
			*reason = j->reason;
			j->reason = NULL;
			rn_job_free(j);
			return -1;
		}
	} else {
		struct timeval	tv;

		j->state = RN_QUEUED;
		TAILQ_INSERT_TAIL(&rn.queued, j, entry);
		rn.nqueued++;
		tv.tv_sec = j->limits.timeout_ms / 1000;
		tv.tv_usec = (j->limits.timeout_ms % 1000) * 1000;
		evtimer_add(j->ev_timer, &tv);
	}
	if (jobp != NULL)
		*jobp = j;
	return 0;
}

/* Ends a job early (see runner.h). */
void
runner_cancel(struct runner_job *j)
{
	if (j == NULL || j->cancelled)
		return;
	j->cancelled = 1;
	switch (j->state) {
	case RN_QUEUED:
		TAILQ_REMOVE(&rn.queued, j, entry);
		rn.nqueued--;
		rn_to_finished(j);
		break;
	case RN_RUNNING:
		rn_kill(j, SIGKILL);
		break;
	case RN_FINISHED:
		break;
	}
}

/*
 * Input consumed before this offset is dropped from the buffer when more
 * comes; below it, the bytes stay, so a run the fork server gives back
 * (runner-forksrv.c) is sent its whole input again when started direct.
 */
#define RN_STREAM_COMPACT	(64 * 1024)

/* Queues bytes for a stream job's stdin (see runner.h). */
int
runner_write(struct runner_job *j, const char *buf, size_t len)
{
	if (j == NULL || !j->stream || j->input_eof || j->cancelled ||
	    j->state == RN_FINISHED || (j->state == RN_RUNNING &&
	    j->fd_in == -1))
		return -1;
	if (j->input_len - j->input_off + len > RUNNER_STREAM_QUEUE)
		return -1;
	if (j->input_off >= RN_STREAM_COMPACT) {
		memmove(j->input, j->input + j->input_off,
		    j->input_len - j->input_off);
		j->input_len -= j->input_off;
		j->input_off = 0;
	}
	j->input = xreallocarray(j->input, j->input_len + len + 1, 1);
	memcpy(j->input + j->input_len, buf, len);
	j->input_len += len;
	if (j->state == RN_RUNNING && j->ev_in != NULL)
		event_add(j->ev_in, NULL);
	return 0;
}

/* Closes a stream job's stdin once its queue is written. */
void
runner_close_input(struct runner_job *j)
{
	if (j == NULL || !j->stream || j->input_eof)
		return;
	j->input_eof = 1;
	if (j->state == RN_RUNNING && j->ev_in != NULL)
		event_add(j->ev_in, NULL);
}

/* The direct child's pid. */
long
runner_job_pid(const struct runner_job *j)
{
	return j->state == RN_QUEUED ? -1 : (long)j->pid;
}

/* Kills and frees everything; no callback runs. */
void
runner_shutdown(void)
{
	struct runner_job	*j;
	struct rn_list		*lists[] = { &rn.queued, &rn.running,
				    &rn.finished };
	size_t			 i;
	int			 tries, st;

	struct rn_fs		*s;

	TAILQ_FOREACH(j, &rn.running, entry)
		if (j->fs == NULL)
			rn_kill(j, SIGKILL);
	/* The server's runs die with it (their inits' death signal). */
	if ((s = rn.fs) != NULL) {
		rn.fs = NULL;
		s->lost = 1;
		(void)kill(s->pid, SIGKILL);
		TAILQ_INSERT_TAIL(&rn.fs_dying, s, entry);
	}
	/* SIGKILLed children end at once, unless stuck in the kernel. */
	for (tries = 0; tries < 100; tries++) {
		int	left = 0;

		TAILQ_FOREACH(j, &rn.running, entry) {
			if (j->reaped || j->fs != NULL)
				continue;
			if (waitpid(j->pid, &st, WNOHANG) != 0)
				j->reaped = 1;
			else
				left++;
		}
		TAILQ_FOREACH(s, &rn.fs_dying, entry) {
			if (s->reaped)
				continue;
			if (waitpid(s->pid, &st, WNOHANG) != 0)
				s->reaped = 1;
			else
				left++;
		}
		if (left == 0)
			break;
		usleep(10000);
	}
	while ((s = TAILQ_FIRST(&rn.fs_dying)) != NULL) {
		TAILQ_REMOVE(&rn.fs_dying, s, entry);
		rn_fs_free(s);
	}
	for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
		while ((j = TAILQ_FIRST(lists[i])) != NULL) {
			TAILQ_REMOVE(lists[i], j, entry);
			rn_job_free(j);
		}
	}
	rn.nrunning = rn.nqueued = 0;
	rn_event_free(&rn.ev_sigchld);
	rn_event_free(&rn.ev_deliver);
	rn_strv_free(&rn.hide);
	rn_strv_free(&rn.secrets);
	runfilter_shutdown();
	free(rn.refusal);
	free(rn.seccomp_why);
	free(rn.ns_why);
	free(rn.exec_path);
	free(rn.probe_error);
	free(rn.instance);
	free(rn.fs_why);
	rn_close(&rn.devnull);
	memset(&rn, 0, sizeof rn);
}

/* Jobs running now. */
unsigned
runner_running(void)
{
	return rn.nrunning;
}

/* Jobs queued now. */
unsigned
runner_queued(void)
{
	return rn.nqueued;
}

/* Test-only switch. */
void
runner_force_sigchld(int on)
{
	rn.force_sigchld = on;
}
