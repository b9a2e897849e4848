/*
 * What the files of the runner share, and nothing outside daemon/runner/
 * includes: the job and fork server structs, the runner's one state (rn),
 * and the functions one file calls in another. runner.h is the API.
 *
 * The files, by responsibility:
 *   runner.c          a job's life: start, queue and slots, timeout and
 *                     kills, reaping, the result and the done callback,
 *                     shutdown;
 *   runner-io.c       a running job's pipes: output kept up to its cap,
 *                     the flood kill, stdin written through the loop,
 *                     gbr-exec's status pipe and its setup line;
 *   runner-spawn.c    what gbr-exec is given (argv, environment,
 *                     descriptors) and the direct posix_spawn of it;
 *   runner-forksrv.c  the client of gbr-exec's fork server (gbr-exec -S);
 *   runner-setup.c    the runner on this system: finding gbr-exec, probing
 *                     which layers hold, the policy that refuses commands
 *                     without them, the sweep of leftovers, reloads, and
 *                     daemon.status;
 *   runfilter.c       the seccomp program (runfilter.h).
 *
 * Every function here runs on the loop's thread.
 */
#ifndef GBRD_RUNNER_INT_H
#define GBRD_RUNNER_INT_H

#include <sys/types.h>
#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "clock.h"
#include "runner.h"

#define RN_STATUS_MAX	1024		/* bytes kept from the status pipe */
#define RN_PATHS_MAX	128		/* -r, -w or -R paths given to gbr-exec */
#define RN_STATUS_FD	3		/* where gbr-exec finds the status pipe */
#define RN_FILTER_FD	4		/* and the seccomp program (-F) */
#define RN_SUP_KILL_WAIT 5		/* seconds a supervisor has to end a run */
#define RN_FS_DEATHS	5		/* fork server deaths in the window ... */
#define RN_FS_KILL_WAIT	5		/* seconds after SIGKILL, then it is stuck */

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
	int			 stream;	/* runner_opts.stream */
	int			 input_eof;	/* stream: close once written */
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
	int			 supervised;	/* direct, no namespaces: see rn_kill */
	struct rn_fs		*fs;		/* the fork server running it */
	uint64_t		 fs_id;
	unsigned		 fs_kills;	/* timer rounds since SIGKILL */
};

TAILQ_HEAD(rn_list, runner_job);

/* One fork server process (see runner-forksrv.c). */
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

/* What gbr-exec's setup line says (see gbr-exec.c, "Status"). */
struct rn_setup {
	int	ns, userns, ll, caps, hidden, ro;
	int	seccomp, proc, tmp, sup, chain;
	char	nproc[32];
};

/* The runner's state: one per process, defined in runner.c. */
struct rn_runner {
	struct event_base	*base;
	int			 ready;
	char			*exec_path;
	unsigned		 max_children, max_per_key, max_queued;
	int			 grace_ms;
	enum runner_mode	 landlock, namespaces, seccomp;
	unsigned		 accept_risks;
	char			*refusal;	/* why commands cannot run, or NULL */
	char			*seccomp_why;	/* why there is no program */
	char			*ns_why;	/* why "auto" went without namespaces */
	struct rn_strv		 hide;
	struct rn_strv		 secrets;
	char			*instance;	/* "GBR_RUNNER=..." for children */
	struct rn_list		 queued, running, finished;
	unsigned		 nqueued, nrunning;
	struct event		*ev_sigchld, *ev_deliver;
	int			 use_pidfd;
	int			 force_sigchld;
	int			 ll_abi;
	/* What a probe run of gbr-exec reported at start. */
	int			 probe_ok, probe_ns, probe_userns, probe_caps;
	int			 probe_seccomp, probe_proc, probe_tmp, probe_sup;
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
};

extern struct rn_runner rn;

/* runner.c: a job's life. */
void		 rn_kill(struct runner_job *, int);
void		 rn_to_finished(struct runner_job *);
void		 rn_reaped(struct runner_job *);
void		 rn_running(struct runner_job *, int fd_out, int fd_err,
		    int fd_st, int fd_in);
void		 rn_pump(void);
void		 rn_deliver(evutil_socket_t, short, void *);
void		 rn_on_pidfd(evutil_socket_t, short, void *);
int		 rn_pidfd_open(pid_t);
int		 rn_watch_sigchld(void);

/* runner-io.c: the pipes. */
void		 rn_event_free(struct event **);
void		 rn_event_stop(struct event *);
void		 rn_close(int *);
int		 rn_nonblock(int);
int		 rn_read(struct runner_job *, int *fd, struct event *,
		    enum runner_stream, int burst, size_t max);
int		 rn_read_status(struct runner_job *);
int		 rn_parse_setup(const char *, struct rn_setup *);
void		 rn_on_output(evutil_socket_t, short, void *);
void		 rn_on_status(evutil_socket_t, short, void *);
void		 rn_on_input(evutil_socket_t, short, void *);

/* runner-spawn.c: what gbr-exec gets, and the direct spawn. */
void		 rn_strv_add(struct rn_strv *, const char *);
void		 rn_strv_num(struct rn_strv *, const char *,
		    unsigned long long);
void		 rn_strv_free(struct rn_strv *);
const char	*rn_mode_name(enum runner_mode);
int		 rn_paths_ok(const char *const *, size_t);
void		 rn_build_argv(struct runner_job *, const struct runner_opts *,
		    enum runner_mode);
void		 rn_build_envp(struct runner_job *, const struct runner_opts *);
int		 rn_spawn_direct(struct runner_job *);
int		 rn_spawn(struct runner_job *);

/* runner-forksrv.c: the fork server. */
int		 rn_fs_spawn(struct runner_job *);
void		 rn_fs_kill(struct runner_job *, int);
void		 rn_fs_lost(struct rn_fs *, const char *);
void		 rn_fs_reap_dying(void);
void		 rn_fs_free(struct rn_fs *);
int		 rn_fs_start(void);
void		 rn_fs_init(void);
const char	*rn_fs_why_direct(void);

#endif
