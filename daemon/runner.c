/*
 * The runner (see runner.h): spawning gbr-exec, the pipes, the timers, the
 * reaping, the slots and the queue. All state is this file's; every job is
 * on exactly one of three lists: queued (waiting for a slot), running (a
 * child exists and is not reaped), finished (waiting for the deliver event
 * to call its done callback and free it). A job is only ever freed from
 * that event, never from one of its own callbacks.
 *
 * Two ways to start a child. Direct: posix_spawn of gbr-exec, which sets
 * the run up and execs the target (and, with namespaces, clones an init
 * that clones the target). Fork server: one gbr-exec -S started at
 * runner_init (see gbr-exec.c, "Server mode"), which gets each run over a
 * socket with its descriptors and clones the run's init itself, so a run
 * costs no exec of gbr-exec; it is used for runs with namespaces only
 * (only there does a dead server take its runs along), once it has
 * started and passed a probe run. A job the server takes is not our
 * child: its end is the server's DONE (group killed, init reaped), its
 * signals go through KILL, and if the server dies (its socket closes, or
 * its pidfd fires) each of its jobs fails with internal_error and another
 * server is started, at most RN_FS_DEATHS times in RN_FS_WINDOW_MS; after
 * that, and whenever the server cannot take a run (a request too big for
 * the socket, a full socket, FAILED for want of resources or namespaces),
 * the run goes direct. A server that has not ended a run RN_FS_KILL_WAIT
 * seconds after its SIGKILL is killed.
 *
 * Bounds: each job keeps at most max_output bytes of output, reads at most
 * RN_READ_BURST chunks per wakeup per stream (so one flooding child cannot
 * starve the loop), keeps at most RN_STATUS_MAX bytes from gbr-exec's
 * status pipe, and after its child is reaped reads at most RN_DRAIN_MAX
 * bytes more from each pipe before closing it.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif
#ifdef HAVE_SYS_SYSCALL_H
#include <sys/syscall.h>
#endif

#include <event2/event.h>

#include "gbr-exec.h"
#include "log.h"
#include "runner.h"
#include "xmalloc.h"

#define RN_CHUNK	65536		/* bytes per read */
#define RN_READ_BURST	4		/* reads per wakeup per stream */
#define RN_STATUS_MAX	1024		/* bytes kept from the status pipe */
#define RN_DRAIN_MAX	(1024 * 1024)	/* bytes read per pipe after the reap */
#define RN_FLOOD_MIN	(1024 * 1024)	/* read past the cap before a kill */
#define RN_ARGV_MAX	4096		/* arguments of a target */
#define RN_ENV_MAX	1024		/* environment entries */
#define RN_PATHS_MAX	48		/* -r, -w or -R paths given to gbr-exec */
#define RN_STATUS_FD	3		/* where gbr-exec finds the status pipe */
#define RN_FS_DEATHS	5		/* fork server deaths in the window ... */
#define RN_FS_WINDOW_MS	60000		/* ... after which runs go direct */
#define RN_FS_KILL_WAIT	5		/* seconds after SIGKILL, then it is stuck */
#define RN_FS_PROBE_MS	5000		/* the start-up probe through the server */
#define RN_FS_READ_BURST 256		/* messages per wakeup */

/* A growable NULL-terminated vector of owned strings. */
struct rn_strv {
	char	**v;
	size_t	  n, cap;
};

/* One output stream's kept bytes. */
struct rn_buf {
	char		*p;
	size_t		 len, cap;
	uint64_t	 total;
};

enum rn_state {
	RN_QUEUED,
	RN_RUNNING,
	RN_FINISHED,
};

struct runner_job {
	TAILQ_ENTRY(runner_job)	 entry;
	enum rn_state		 state;

	struct rn_strv		 argv;		/* gbr-exec's whole argv */
	struct rn_strv		 envp;
	char			*argv0;		/* the target's, for messages */
	char			*key;
	char			*input;
	size_t			 input_len, input_off;
	struct runner_limits	 limits;
	runner_output_cb	 out_cb;
	runner_done_cb		 done_cb;
	void			*arg;

	pid_t			 pid;
	int			 pidfd;
	int			 fd_out, fd_err, fd_in, fd_st;
	struct event		*ev_out, *ev_err, *ev_in, *ev_st, *ev_pid;
	struct event		*ev_timer;	/* queue deadline, timeout, grace */
	struct rn_buf		 out, err;
	char			 st[RN_STATUS_MAX + 1];
	size_t			 st_len;

	int64_t			 t_queued, t_start, t_end;
	int			 term_sent, kill_sent, exited, reaped;
	int			 wstatus;
	int			 timed_out, cancelled, output_limited, truncated;
	int			 failed;
	enum gbr_err		 kind;
	char			*reason;

	int			 ns;		/* asked for namespaces */
	struct rn_fs		*fs;		/* the fork server running it */
	uint64_t		 fs_id;
	unsigned		 fs_kills;	/* timer rounds since SIGKILL */
};

TAILQ_HEAD(rn_list, runner_job);

/* One fork server process (see the top). */
struct rn_fs {
	TAILQ_ENTRY(rn_fs)	 entry;		/* on rn.fs_dying once lost */
	pid_t			 pid;
	int			 pidfd;
	int			 ctl;
	struct event		*ev_ctl, *ev_pid;
	int			 ready;		/* READY came */
	int			 shared_vm;
	int			 lost;
	int			 reaped;
};

TAILQ_HEAD(rn_fs_list, rn_fs);

static struct {
	struct event_base	*base;
	int			 ready;
	char			*exec_path;
	unsigned		 max_children, max_per_key, max_queued;
	int			 grace_ms;
	enum runner_mode	 landlock, namespaces;
	struct rn_strv		 hide;
	char			*instance;	/* "GBR_RUNNER=..." for children */
	struct rn_list		 queued, running, finished;
	unsigned		 nqueued, nrunning;
	struct event		*ev_sigchld, *ev_deliver;
	int			 use_pidfd;
	int			 force_sigchld;
	int			 ll_abi;
	/* What a probe run of gbr-exec reported at start. */
	int			 probe_ok, probe_ns, probe_userns, probe_caps;
	/* An "auto" layer that fails here (not merely missing) stays off. */
	int			 ns_broken, ll_broken;
	char			 probe_nproc[32];
	char			*probe_error;
	int			 dumpable_off;
	/* The fork server. */
	enum runner_spawn	 spawn;
	struct rn_fs		*fs;		/* the one in use, or NULL */
	struct rn_fs_list	 fs_dying;	/* lost, not yet reaped */
	uint64_t		 fs_next_id;
	unsigned		 fs_starts;
	uint64_t		 fs_fallbacks;	/* runs it could not take */
	int64_t			 fs_deaths[RN_FS_DEATHS];
	unsigned		 fs_ndeaths;
	int			 fs_given_up;
	char			*fs_why;	/* why runs go direct */
	int			 devnull;	/* stdin of server runs without input */
} rn;

extern char	**environ;

static void	rn_finish(struct runner_job *);
static void	rn_reaped(struct runner_job *);
static int	rn_spawn_direct(struct runner_job *);
static void	rn_fs_lost(struct rn_fs *, const char *);
static void	rn_fs_reap_dying(void);
static int	rn_fs_start(void);
static void	rn_fs_kill(struct runner_job *, int);
static void	rn_pump(void);
static void	rn_event_free(struct event **);
static void	rn_close(int *);

/* Monotonic milliseconds. */
static int64_t
rn_now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Appends a copy of s. */
static void
rn_strv_add(struct rn_strv *sv, const char *s)
{
	if (sv->n + 2 > sv->cap) {
		sv->cap = sv->cap == 0 ? 32 : sv->cap * 2;
		sv->v = xreallocarray(sv->v, sv->cap, sizeof *sv->v);
	}
	sv->v[sv->n++] = xstrdup(s);
	sv->v[sv->n] = NULL;
}

/* Appends an option and its number. */
static void
rn_strv_num(struct rn_strv *sv, const char *opt, unsigned long long v)
{
	char	buf[32];

	snprintf(buf, sizeof buf, "%llu", v);
	rn_strv_add(sv, opt);
	rn_strv_add(sv, buf);
}

/* Frees the strings and the vector. */
static void
rn_strv_free(struct rn_strv *sv)
{
	size_t	i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	memset(sv, 0, sizeof *sv);
}

/* The name of a mode as gbr-exec takes it. */
static const char *
rn_mode_name(enum runner_mode m)
{
	return m == RUNNER_REQUIRE ? "require" : m == RUNNER_AUTO ? "auto" : "off";
}

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

/* Finds gbr-exec: the config's, $GBR_EXEC, beside this program, libexec. */
static char *
rn_find_exec(const char *configured)
{
	char		 self[PATH_MAX], *slash, *p;
	const char	*env;
	ssize_t		 n;

	if (configured != NULL)
		return access(configured, X_OK) == 0 ? xstrdup(configured) : NULL;
	if ((env = getenv("GBR_EXEC")) != NULL && *env != '\0')
		return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			p = xasprintf("%s/gbr-exec", self);
			if (access(p, X_OK) == 0)
				return p;
			free(p);
		}
	}
#ifdef GBR_LIBEXECDIR
	if (access(GBR_LIBEXECDIR "/gbr-exec", X_OK) == 0)
		return xstrdup(GBR_LIBEXECDIR "/gbr-exec");
#endif
	return NULL;
}

/* The Landlock ABI of this kernel. */
static int
rn_probe_landlock(void)
{
#if defined(HAVE_LINUX_LANDLOCK_H) && defined(SYS_landlock_create_ruleset)
	long	v = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U);

	return v < 0 ? 0 : (int)v;
#else
	return 0;
#endif
}

/* Parses gbr-exec's setup line into the probe fields (or a result). */
static int
rn_parse_setup(const char *line, int *ns, int *userns, int *ll, int *caps,
    char *nproc, size_t nprocsz, int *hidden, int *ro)
{
	char	kind[32];

	if (sscanf(line, "setup ns=%d userns=%d landlock=%d caps=%d "
	    "nproc=%31s hidden=%d ro=%d", ns, userns, ll, caps, kind,
	    hidden, ro) != 7)
		return -1;
	snprintf(nproc, nprocsz, "%s", kind);
	return 0;
}

/*
 * Runs gbr-exec once in test mode (-T: set up, report, exit) to learn
 * which layers really hold here. Blocking, but only at start, bounded by a
 * 5 s poll.
 */
static void
rn_probe(enum runner_mode ll_mode, enum runner_mode ns_mode)
{
	posix_spawn_file_actions_t	 fa;
	struct rn_strv			 av;
	struct pollfd			 pfd;
	char				 buf[RN_STATUS_MAX + 1], *nl;
	size_t				 len = 0;
	ssize_t				 n;
	pid_t				 pid;
	int				 p[2], st, ll, hidden, ro, r;

	free(rn.probe_error);
	rn.probe_error = NULL;
	rn.probe_ok = 0;
	if (pipe2(p, O_CLOEXEC) != 0) {
		rn.probe_error = xasprintf("pipe: %s", strerror(errno));
		return;
	}
	memset(&av, 0, sizeof av);
	rn_strv_add(&av, rn.exec_path);
	rn_strv_add(&av, "-T");
	rn_strv_num(&av, "-s", RN_STATUS_FD);
	rn_strv_add(&av, "-l");
	rn_strv_add(&av, rn_mode_name(ll_mode));
	rn_strv_add(&av, "-N");
	rn_strv_add(&av, rn_mode_name(ns_mode));
	rn_strv_num(&av, "-n", 64);
	rn_strv_add(&av, "-w");
	rn_strv_add(&av, "/tmp");
	rn_strv_add(&av, "--");
	rn_strv_add(&av, "true");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], RN_STATUS_FD);
	r = posix_spawn(&pid, rn.exec_path, &fa, NULL, av.v, environ);
	posix_spawn_file_actions_destroy(&fa);
	rn_strv_free(&av);
	close(p[1]);
	if (r != 0) {
		close(p[0]);
		rn.probe_error = xasprintf("%s: %s", rn.exec_path, strerror(r));
		return;
	}
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (len < sizeof buf - 1 && poll(&pfd, 1, 5000) > 0) {
		if ((n = read(p[0], buf + len, sizeof buf - 1 - len)) <= 0)
			break;
		len += (size_t)n;
	}
	close(p[0]);
	buf[len] = '\0';
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	if (rn_parse_setup(buf, &rn.probe_ns, &rn.probe_userns, &ll,
	    &rn.probe_caps, rn.probe_nproc, sizeof rn.probe_nproc, &hidden,
	    &ro) == 0)
		rn.probe_ok = 1;
	else
		rn.probe_error = xstrdup(len > 0 ? buf : "no report");
}

/* Sets the daemon-wide caps. */
static void
rn_apply(const struct runner_config *cfg)
{
	rn.max_children = cfg->max_children > 0 ? cfg->max_children : 16;
	rn.max_per_key = cfg->max_per_key > 0 ? cfg->max_per_key : rn.max_children;
	rn.max_queued = cfg->max_queued;
	rn.grace_ms = cfg->grace_ms > 0 ? cfg->grace_ms : 2000;
	rn.landlock = cfg->landlock;
	rn.namespaces = cfg->namespaces;
	rn.spawn = cfg->spawn;
	if (rn.ns_broken && rn.namespaces == RUNNER_AUTO)
		rn.namespaces = RUNNER_OFF;
	if (rn.ll_broken && rn.landlock == RUNNER_AUTO)
		rn.landlock = RUNNER_OFF;
}

/* Takes the hidden files (at start only: they do not change on reload). */
static void
rn_set_hide(const struct runner_config *cfg)
{
	size_t	i;

	rn_strv_free(&rn.hide);
	for (i = 0; i < cfg->nhide && i < RN_PATHS_MAX; i++)
		if (cfg->hide[i] != NULL && cfg->hide[i][0] == '/')
			rn_strv_add(&rn.hide, cfg->hide[i]);
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
static void
rn_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j;
	struct runner_result	 r;
	int			 ll, hidden, ro, i;
	char			 nproc[32], stage[32], *line, *nl;
	int			 code, sig, core, ns = 0, userns = 0, caps = 0;
	int			 have_status = 0, err = 0, init_sig = 0;
	int			 have_setup;

	/* Fork servers that were lost and have ended since. */
	rn_fs_reap_dying();
	/* Queued jobs take the free slots before done callbacks start more. */
	rn_pump();
	while ((j = TAILQ_FIRST(&rn.finished)) != NULL) {
		TAILQ_REMOVE(&rn.finished, j, entry);
		memset(&r, 0, sizeof r);
		snprintf(nproc, sizeof nproc, "none");
		ll = hidden = ro = 0;
		ns = userns = caps = have_status = err = init_sig = 0;
		have_setup = 0;
		stage[0] = '\0';
		code = sig = core = 0;
		j->st[j->st_len] = '\0';
		for (line = j->st; line != NULL && *line != '\0'; line = nl) {
			if ((nl = strchr(line, '\n')) != NULL)
				*nl++ = '\0';
			if (strncmp(line, "setup ", 6) == 0)
				have_setup = rn_parse_setup(line, &ns, &userns,
				    &ll, &caps, nproc, sizeof nproc, &hidden,
				    &ro) == 0;
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
		r.ns = ns;
		r.userns = userns;
		r.landlock_abi = ll;
		r.caps_dropped = caps;
		r.nproc = nproc;
		r.hidden = hidden;
		r.ro_binds = ro;
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
			if (ns && have_status == 1) {
				r.exited = 1;
				r.exit_code = code;
			} else if (ns && have_status == 2) {
				r.signo = sig;
				r.core = core;
			} else if (ns && init_sig != 0)
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

/* Frees one event and clears the pointer. */
static void
rn_event_free(struct event **ev)
{
	if (*ev != NULL) {
		event_free(*ev);
		*ev = NULL;
	}
}

/*
 * Stops one event without freeing it: it may be the one whose callback is
 * running. Events are freed with their job, from the deliver event.
 */
static void
rn_event_stop(struct event *ev)
{
	if (ev != NULL)
		event_del(ev);
}

/* Closes one descriptor and clears it. */
static void
rn_close(int *fd)
{
	if (*fd != -1) {
		close(*fd);
		*fd = -1;
	}
}

/* Sends a signal to the job's whole process group. */
static void
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
	else if (kill(-j->pid, sig) != 0 && errno == ESRCH)
		(void)kill(j->pid, sig);
	if (sig == SIGKILL)
		j->kill_sent = 1;
	else if (sig == SIGTERM)
		j->term_sent = 1;
}

/* Moves a job to the finished list and wakes the deliver event. */
static void
rn_to_finished(struct runner_job *j)
{
	struct timeval	tv = { 0, 0 };

	j->state = RN_FINISHED;
	j->t_end = rn_now();
	if (j->ev_timer != NULL)
		event_del(j->ev_timer);
	TAILQ_INSERT_TAIL(&rn.finished, j, entry);
	event_add(rn.ev_deliver, &tv);
}

/* Keeps what fits of a chunk of output and passes it on. */
static void
rn_output(struct runner_job *j, enum runner_stream s, const char *p, size_t n)
{
	struct rn_buf	*b = s == RUNNER_STDOUT ? &j->out : &j->err;
	size_t		 room, keep, want;
	uint64_t	 seen;

	b->total += n;
	room = j->limits.max_output - (j->out.len + j->err.len);
	keep = n < room ? n : room;
	if (keep < n)
		j->truncated = 1;
	if (keep > 0) {
		if (b->len + keep > b->cap) {
			want = b->cap == 0 ? 4096 : b->cap;
			while (want < b->len + keep)
				want *= 2;
			if (want > j->limits.max_output)
				want = j->limits.max_output;
			b->p = xreallocarray(b->p, want, 1);
			b->cap = want;
		}
		memcpy(b->p + b->len, p, keep);
		b->len += keep;
		if (j->out_cb != NULL && j->state == RN_RUNNING)
			j->out_cb(j->arg, s, p, keep);
	}
	seen = j->out.total + j->err.total;
	if (!j->output_limited && !j->exited &&
	    seen > (uint64_t)j->limits.max_output +
	    (j->limits.max_output > RN_FLOOD_MIN ? j->limits.max_output :
	    RN_FLOOD_MIN)) {
		/* It keeps flooding: stop reading, end it like a timeout. */
		j->output_limited = 1;
		if (j->ev_out != NULL)
			event_del(j->ev_out);
		if (j->ev_err != NULL)
			event_del(j->ev_err);
		if (!j->term_sent && !j->kill_sent) {
			struct timeval	tv;

			rn_kill(j, SIGTERM);
			tv.tv_sec = rn.grace_ms / 1000;
			tv.tv_usec = (rn.grace_ms % 1000) * 1000;
			evtimer_add(j->ev_timer, &tv);
		}
	}
}

/*
 * Reads a pipe: up to burst chunks, or to EAGAIN if burst is 0 and at most
 * max bytes. Returns 1 at end of file or error (the fd is then closed,
 * after its event, if given, is stopped: closed first, the event's
 * removal would fail).
 */
static int
rn_read(struct runner_job *j, int *fd, struct event *ev, enum runner_stream s,
    int burst, size_t max)
{
	char	buf[RN_CHUNK];
	ssize_t	n;
	size_t	got = 0;
	int	i;

	for (i = 0; burst == 0 || i < burst; i++) {
		if (burst == 0 && got >= max)
			return 0;
		n = read(*fd, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			rn_event_stop(ev);
			rn_close(fd);
			return 1;
		}
		got += (size_t)n;
		rn_output(j, s, buf, (size_t)n);
	}
	return 0;
}

/* stdout or stderr is readable. */
static void
rn_on_output(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;

	if (fd == j->fd_out)
		(void)rn_read(j, &j->fd_out, j->ev_out, RUNNER_STDOUT,
		    RN_READ_BURST, 0);
	else if (fd == j->fd_err)
		(void)rn_read(j, &j->fd_err, j->ev_err, RUNNER_STDERR,
		    RN_READ_BURST, 0);
}

/* Reads the status pipe into the job's status buffer. */
static int
rn_read_status(struct runner_job *j)
{
	char	drop[256];
	ssize_t	n;

	for (;;) {
		if (j->st_len < RN_STATUS_MAX)
			n = read(j->fd_st, j->st + j->st_len,
			    RN_STATUS_MAX - j->st_len);
		else
			n = read(j->fd_st, drop, sizeof drop);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			rn_event_stop(j->ev_st);
			rn_close(&j->fd_st);
			return 1;
		}
		if (j->st_len < RN_STATUS_MAX)
			j->st_len += (size_t)n;
	}
}

/* True if the status holds a whole line equal to line. */
static int
rn_status_has(const struct runner_job *j, const char *line)
{
	size_t	n = strlen(line), i;

	for (i = 0; i + n <= j->st_len; i++)
		if ((i == 0 || j->st[i - 1] == '\n') &&
		    memcmp(j->st + i, line, n) == 0 &&
		    (i + n == j->st_len || j->st[i + n] == '\n'))
			return 1;
	return 0;
}

/* The status pipe is readable. */
static void
rn_on_status(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;

	if (!rn_read_status(j))
		return;
	/*
	 * A fork server's run whose init said "end" and closed the pipe is
	 * over (see gbr-exec.c, "Status"): nothing of it is left but the init
	 * on its way out, and its DONE, which can wait for the namespaces'
	 * teardown, is not needed.
	 */
	if (j->fs != NULL && j->state == RN_RUNNING && rn_status_has(j, "end")) {
		j->reaped = 1;
		j->wstatus = 0;
		rn_reaped(j);
	}
}

/* stdin can take more of the input. */
static void
rn_on_input(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;
	size_t			 want;
	ssize_t			 n;

	while (j->input_off < j->input_len) {
		want = j->input_len - j->input_off;
		if (want > RN_CHUNK)
			want = RN_CHUNK;
		n = write(j->fd_in, j->input + j->input_off, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;	/* EPIPE: the child does not want the rest */
		j->input_off += (size_t)n;
	}
	rn_event_stop(j->ev_in);
	rn_close(&j->fd_in);
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
static void
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
static void
rn_on_pidfd(evutil_socket_t fd, short what, void *arg)
{
	rn_finish(arg);
}

/* Sets O_NONBLOCK: one system call, where F_GETFL and F_SETFL take two. */
static int
rn_nonblock(int fd)
{
	int	on = 1;

	return ioctl(fd, FIONBIO, &on);
}

/* Opens a pidfd for a child, or -1. */
static int
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
static int
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
static void
rn_running(struct runner_job *j, int fd_out, int fd_err, int fd_st, int fd_in)
{
	struct timeval	tv;

	j->t_start = rn_now();
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

/*
 * Spawns a job's gbr-exec. Returns 0, or -1 with the job's kind and reason
 * set (nothing is left open).
 */
static int
rn_spawn_direct(struct runner_job *j)
{
	posix_spawn_file_actions_t	 fa;
	posix_spawnattr_t		 at;
	sigset_t			 none, all;
	int				 po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	int				 ps[2] = { -1, -1 }, pi[2] = { -1, -1 };
	int				 r;
	short				 flags;

	if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
	    pipe2(ps, O_CLOEXEC) != 0 ||
	    (j->input != NULL && pipe2(pi, O_CLOEXEC) != 0)) {
		r = errno;
		goto fail;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* Sources are all above 2, and fd 3 is written last. */
	if (j->input != NULL)
		posix_spawn_file_actions_adddup2(&fa, pi[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawn_file_actions_adddup2(&fa, ps[1], RN_STATUS_FD);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	/* SIGPIPE is ignored here; the child must get the default back. */
	posix_spawnattr_setsigdefault(&at, &all);
	flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_SETSID
	flags |= POSIX_SPAWN_SETSID;
#else
	flags |= POSIX_SPAWN_SETPGROUP;
	posix_spawnattr_setpgroup(&at, 0);
#endif
	posix_spawnattr_setflags(&at, flags);
	r = posix_spawn(&j->pid, rn.exec_path, &fa, &at, j->argv.v, j->envp.v);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (r != 0)
		goto fail;
	close(po[1]);
	close(pe[1]);
	close(ps[1]);
	if (j->input != NULL)
		close(pi[0]);
	rn_running(j, po[0], pe[0], ps[0], j->input != NULL ? pi[1] : -1);
	if ((j->pidfd = rn_pidfd_open(j->pid)) != -1) {
		j->ev_pid = event_new(rn.base, j->pidfd, EV_READ, rn_on_pidfd, j);
		if (j->ev_pid == NULL)
			fatalx("runner: cannot create events");
		event_add(j->ev_pid, NULL);
	} else {
		if (rn_watch_sigchld() != 0)
			fatalx("runner: cannot watch SIGCHLD");
		/* It may have ended before the watch began: look, later. */
		event_active(rn.ev_sigchld, EV_SIGNAL, 1);
	}
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
	j->kind = r == EMFILE || r == ENFILE || r == EAGAIN || r == ENOMEM ?
	    GBR_ERR_BUSY : GBR_ERR_INTERNAL;
	j->reason = xasprintf("cannot start %s for '%s': %s", rn.exec_path,
	    j->argv0, strerror(r));
	return -1;
}

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
static int
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

/* Starts a job: through the fork server where it can, else directly. */
static int
rn_spawn(struct runner_job *j)
{
	if (rn_fs_spawn(j) == 0)
		return 0;
	return rn_spawn_direct(j);
}

/* Sends KILL for a job; a server that cannot take it is killed. */
static void
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
static void
rn_fs_free(struct rn_fs *s)
{
	rn_event_free(&s->ev_ctl);
	rn_event_free(&s->ev_pid);
	rn_close(&s->ctl);
	rn_close(&s->pidfd);
	free(s);
}

/* Reaps the lost servers that have ended, and frees them. */
static void
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
static void
rn_fs_lost(struct rn_fs *s, const char *why)
{
	struct runner_job	*j, *next;
	struct timeval		 tv = { 0, 0 };
	int64_t			 now = rn_now();
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
static int
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
	char				 ppid[32], *argv[7], *envp[6];
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
		if ((left = deadline - rn_now()) <= 0)
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
	char		 buf[RN_STATUS_MAX + 1], nproc[32], *nl;
	size_t		 len = 0;
	ssize_t		 n;
	int64_t		 deadline = rn_now() + RN_FS_PROBE_MS, left;
	int		 p[2], fds[GE_MSG_FDS], out, e, r, done = 0;
	int		 ns, userns, ll, caps, hidden, ro;

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
	while (!done && (left = deadline - rn_now()) > 0 &&
	    poll(pfds, 2, (int)left) > 0) {
		if (pfds[0].revents != 0) {
			if ((r = rn_fs_wait(s, &m, rn_now())) < 0) {
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
	if (rn_parse_setup(buf, &ns, &userns, &ll, &caps, nproc, sizeof nproc,
	    &hidden, &ro) != 0 || ns != rn.probe_ns ||
	    userns != rn.probe_userns || caps != rn.probe_caps ||
	    strcmp(nproc, rn.probe_nproc) != 0) {
		rn.fs_why = xasprintf("its probe run differs from a direct one "
		    "(\"%s\")", len > 0 ? buf : "no report");
		return -1;
	}
	return 0;
}

/* At start: the fork server, where it applies. */
static void
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
static const char *
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
static void
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

/* Builds gbr-exec's argument vector for a job. */
static void
rn_build_argv(struct runner_job *j, const struct runner_opts *o,
    enum runner_mode ll)
{
	const struct runner_limits	*l = &o->limits;
	uint64_t			 cpu;
	size_t				 i;

	rn_strv_add(&j->argv, rn.exec_path);
	rn_strv_num(&j->argv, "-s", RN_STATUS_FD);
	rn_strv_num(&j->argv, "-p", (unsigned long long)getpid());
	rn_strv_add(&j->argv, "-C");
	rn_strv_add(&j->argv, o->cwd);
	cpu = l->cpu_seconds != 0 ? l->cpu_seconds :
	    (uint64_t)(l->timeout_ms + 999) / 1000 + 1;
	rn_strv_num(&j->argv, "-c", cpu);
	if (l->address_space != 0)
		rn_strv_num(&j->argv, "-a", l->address_space);
	if (l->file_size != 0)
		rn_strv_num(&j->argv, "-f", l->file_size);
	if (l->open_files != 0)
		rn_strv_num(&j->argv, "-o", l->open_files);
	if (l->processes != 0)
		rn_strv_num(&j->argv, "-n", l->processes);
	rn_strv_add(&j->argv, "-l");
	rn_strv_add(&j->argv, rn_mode_name(ll));
	for (i = 0; i < o->nro; i++) {
		rn_strv_add(&j->argv, "-r");
		rn_strv_add(&j->argv, o->ro_paths[i]);
	}
	for (i = 0; i < o->nrw; i++) {
		rn_strv_add(&j->argv, "-w");
		rn_strv_add(&j->argv, o->rw_paths[i]);
	}
	rn_strv_add(&j->argv, "-N");
	rn_strv_add(&j->argv, rn_mode_name(rn.namespaces));
	j->ns = rn.namespaces != RUNNER_OFF;
	for (i = 0; i < rn.hide.n; i++) {
		rn_strv_add(&j->argv, "-x");
		rn_strv_add(&j->argv, rn.hide.v[i]);
	}
	for (i = 0; i < o->nro_binds; i++) {
		rn_strv_add(&j->argv, "-R");
		rn_strv_add(&j->argv, o->ro_binds[i]);
	}
	rn_strv_add(&j->argv, "--");
	for (i = 0; o->argv[i] != NULL; i++)
		rn_strv_add(&j->argv, o->argv[i]);
}

/* Checks a list of paths for gbr-exec. */
static int
rn_paths_ok(const char *const *v, size_t n)
{
	size_t	i;

	if (n > RN_PATHS_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (v[i] == NULL || v[i][0] != '/')
			return 0;
	return 1;
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
	for (n = 0; o->argv != NULL && o->argv[n] != NULL; n++)
		;
	if (n == 0 || o->argv[0][0] == '\0' || n > RN_ARGV_MAX ||
	    o->cwd == NULL || o->cwd[0] != '/' || o->limits.timeout_ms <= 0 ||
	    o->limits.max_output == 0 || !rn_paths_ok(o->rw_paths, o->nrw) ||
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
	rn_build_argv(j, o, ll);
	for (i = 0; o->envp != NULL && o->envp[i] != NULL; i++)
		if (strncmp(o->envp[i], "GBR_RUNNER=", 11) != 0)
			rn_strv_add(&j->envp, o->envp[i]);
	if (rn.instance != NULL)
		rn_strv_add(&j->envp, rn.instance);
	if (j->envp.v == NULL)
		rn_strv_add(&j->envp, "PATH=/usr/bin:/bin");
	j->t_queued = rn_now();
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

/* The direct child's pid. */
long
runner_job_pid(const struct runner_job *j)
{
	return j->state == RN_QUEUED ? -1 : (long)j->pid;
}

/* Sets the runner up. */
int
runner_init(struct event_base *base, const struct runner_config *cfg,
    char **cause)
{
	struct sigaction	sa;

	*cause = NULL;
	if (rn.base != NULL) {
		*cause = xstrdup("the runner is already set up");
		return -1;
	}
	rn.base = base;
	TAILQ_INIT(&rn.queued);
	TAILQ_INIT(&rn.running);
	TAILQ_INIT(&rn.finished);
	TAILQ_INIT(&rn.fs_dying);
	if ((rn.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
		*cause = xasprintf("/dev/null: %s", strerror(errno));
		return -1;
	}
	rn_apply(cfg);
	rn_set_hide(cfg);
	if ((rn.ev_deliver = evtimer_new(base, rn_deliver, NULL)) == NULL) {
		*cause = xstrdup("cannot create an event");
		return -1;
	}
	/* A child gone before its input was written must not kill us. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, NULL);
	}
#if defined(HAVE_SYS_PRCTL_H) && defined(PR_SET_DUMPABLE)
	/*
	 * Children run as our uid: without this they could read
	 * /proc/<gbrd>/environ (API keys) and mem where Landlock is missing.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
		rn.dumpable_off = 1;
#endif
	rn.use_pidfd = !rn.force_sigchld;
#ifndef SYS_pidfd_open
	rn.use_pidfd = 0;
#endif
	if (!rn.use_pidfd && rn_watch_sigchld() != 0) {
		*cause = xstrdup("cannot watch SIGCHLD");
		return -1;
	}
	rn.ll_abi = rn_probe_landlock();
	if (cfg->instance != NULL) {
		unsigned	n = runner_sweep(cfg->instance);

		if (n > 0)
			log_warn("runner: killed %u processes a previous run left "
			    "behind", n);
		rn.instance = xasprintf("GBR_RUNNER=%s", cfg->instance);
	}
	if ((rn.exec_path = rn_find_exec(cfg->exec_path)) == NULL) {
		log_warn("runner: gbr-exec not found (%s): commands cannot run",
		    cfg->exec_path != NULL ? cfg->exec_path :
		    "set GBR_EXEC, or install it beside gbrd or in libexec");
		return 0;
	}
	rn_probe(rn.landlock, rn.namespaces);
	/*
	 * A system can offer a layer and then refuse part of it (a user
	 * namespace whose uid_map cannot be written, under some AppArmor
	 * policies): in "auto" such a layer is turned off, said once, and
	 * daemon.status shows it; "require" stays a refusal.
	 */
	if (!rn.probe_ok && rn.namespaces == RUNNER_AUTO) {
		log_warn("runner: namespaces fail here (%s); running without",
		    rn.probe_error);
		rn.ns_broken = 1;
		rn.namespaces = RUNNER_OFF;
		rn_probe(rn.landlock, rn.namespaces);
	}
	if (!rn.probe_ok && rn.landlock == RUNNER_AUTO) {
		log_warn("runner: Landlock fails here (%s); running without",
		    rn.probe_error);
		rn.ll_broken = 1;
		rn.landlock = RUNNER_OFF;
		rn_probe(rn.landlock, rn.namespaces);
	}
	if (!rn.probe_ok) {
		log_warn("runner: %s does not work here: %s", rn.exec_path,
		    rn.probe_error);
		return 0;
	}
	if (rn.namespaces == RUNNER_REQUIRE && !rn.probe_ns) {
		*cause = xasprintf("namespaces are required and this system "
		    "cannot make them");
		return -1;
	}
	if (rn.landlock == RUNNER_REQUIRE && rn.ll_abi < 2) {
		*cause = xasprintf("Landlock is required and this kernel has "
		    "ABI %d (2 or later is needed)", rn.ll_abi);
		return -1;
	}
	rn.ready = 1;
	rn_fs_init();
	return 0;
}

/* True if a NUL-separated environment block holds entry exactly. */
static int
rn_environ_has(const char *blk, size_t len, const char *entry)
{
	size_t	elen = strlen(entry), i = 0, n;

	while (i < len) {
		n = strnlen(blk + i, len - i);
		if (n == elen && memcmp(blk + i, entry, elen) == 0)
			return 1;
		i += n + 1;
	}
	return 0;
}

/* Kills leftovers of a previous run (see runner.h). */
unsigned
runner_sweep(const char *instance)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	char		 path[300], *blk, *entry;
	size_t		 len;
	ssize_t		 n;
	unsigned	 killed = 0;
	long		 pid;
	int		 fd, pidfd;
	char		*end;

	if (instance == NULL || (d = opendir("/proc")) == NULL)
		return 0;
	entry = xasprintf("GBR_RUNNER=%s", instance);
	blk = xmalloc(256 * 1024);
	while ((de = readdir(d)) != NULL) {
		pid = strtol(de->d_name, &end, 10);
		if (*end != '\0' || pid <= 1 || pid == (long)getpid())
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 ||
		    st.st_uid != getuid())
			continue;
		/* A pidfd first: the kill then cannot hit a reused pid. */
		pidfd = -1;
#ifdef SYS_pidfd_open
		pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
		snprintf(path, sizeof path, "/proc/%ld/environ", pid);
		len = 0;
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
			while (len < 256 * 1024 && (n = read(fd, blk + len,
			    256 * 1024 - len)) > 0)
				len += (size_t)n;
			close(fd);
		}
		if (len > 0 && rn_environ_has(blk, len, entry)) {
#if defined(SYS_pidfd_send_signal)
			if (pidfd != -1 && syscall(SYS_pidfd_send_signal, pidfd,
			    SIGKILL, NULL, 0) == 0)
				killed++;
			else
#endif
			if (pidfd == -1 && kill((pid_t)pid, SIGKILL) == 0)
				killed++;
		}
		if (pidfd != -1)
			close(pidfd);
	}
	closedir(d);
	free(blk);
	free(entry);
	return killed;
}

/* Applies new caps. */
void
runner_reconfigure(const struct runner_config *cfg)
{
	enum runner_mode	ns = rn.namespaces;

	rn_apply(cfg);
	if (rn.namespaces == RUNNER_REQUIRE && !rn.probe_ns) {
		log_warn("runner: namespaces are required but cannot be made "
		    "here; keeping '%s'", rn_mode_name(ns));
		rn.namespaces = ns;
	}
	/* Turned on again (or namespaces are): a server, if none runs. */
	if (rn.ready && rn.fs == NULL && !rn.fs_given_up &&
	    rn.spawn == RUNNER_SPAWN_AUTO && rn.namespaces != RUNNER_OFF &&
	    rn.probe_ns && rn_fs_start() != 0)
		log_warn("runner: no fork server (%s)", rn.fs_why);
	rn_pump();
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

/* The kernel's Landlock ABI. */
int
runner_landlock_abi(void)
{
	return rn.base != NULL ? rn.ll_abi : rn_probe_landlock();
}

/* The gbr-exec in use. */
const char *
runner_exec_path(void)
{
	return rn.exec_path;
}

/* What holds here, for daemon.status. */
json_t *
runner_status_json(void)
{
	json_t		*o, *ll;
	const char	*why = NULL;

	if (rn.ll_broken)
		why = "the kernel offers it but refused a ruleset (see the log)";
	else if (rn.landlock == RUNNER_OFF)
		why = "off in gbrd.conf";
	else if (rn.ll_abi == 0)
		why = "the kernel has no Landlock, or it is disabled";
	else if (rn.ll_abi < 2)
		why = "the kernel has only ABI 1 (2 or later is needed)";
	ll = json_pack("{s:b, s:i, s:s, s:s?}",
	    "active", why == NULL && rn.ready,
	    "abi", rn.ll_abi,
	    "mode", rn_mode_name(rn.landlock),
	    "why_not", why);
	o = json_pack("{s:b, s:s?, s:s?, s:o, s:b, s:b, s:b, s:b, s:s, s:b, "
	    "s:b, s:s, s:b, s:{s:I, s:I, s:I, s:I}, s:i}",
	    "available", rn.ready,
	    "exec", rn.exec_path,
	    "why_not", rn.ready ? NULL : rn.probe_error != NULL ?
		rn.probe_error : "gbr-exec was not found",
	    "landlock", ll,
	    "process_groups", 1,
	    "pid_namespace", rn.probe_ok && rn.probe_ns,
	    "user_namespace", rn.probe_ok && rn.probe_userns,
	    "mount_namespace", rn.probe_ok && rn.probe_ns,
	    "process_limit", rn.probe_ok ? rn.probe_nproc : "unknown",
	    "socket_hidden", rn.probe_ok && rn.probe_ns && rn.hide.n > 0,
	    "root_capabilities_dropped", rn.probe_ok && rn.probe_caps &&
		getuid() == 0,
	    "rlimits", "cpu, as, fsize, nofile, core=0",
	    "daemon_not_dumpable", rn.dumpable_off,
	    "children",
		"running", (json_int_t)rn.nrunning,
		"queued", (json_int_t)rn.nqueued,
		"max", (json_int_t)rn.max_children,
		"max_per_session", (json_int_t)rn.max_per_key,
	    "grace_ms", rn.grace_ms);
	json_object_set_new(o, "env_scrubbed", json_true());
	json_object_set_new(o, "spawn", json_string(rn.ready &&
	    rn_fs_why_direct() == NULL ? "forkserver" : "direct"));
	json_object_set_new(o, "spawn_why_direct", rn_fs_why_direct() != NULL ?
	    json_string(rn_fs_why_direct()) : json_null());
	json_object_set_new(o, "fork_server", rn.fs == NULL ? json_null() :
	    json_pack("{s:I, s:b, s:I, s:I}", "pid", (json_int_t)rn.fs->pid,
	    "shared_memory", rn.fs->shared_vm,
	    "restarts", (json_int_t)(rn.fs_starts > 0 ? rn.fs_starts - 1 : 0),
	    "direct_fallbacks", (json_int_t)rn.fs_fallbacks));
	json_object_set_new(o, "reaping", json_string(rn.use_pidfd ?
	    "pidfd" : "sigchld"));
	return o;
}

/* The fork server's pid. */
long
runner_fork_server_pid(void)
{
	return rn.fs != NULL ? (long)rn.fs->pid : -1;
}

/* Test-only switch. */
void
runner_force_sigchld(int on)
{
	rn.force_sigchld = on;
}
