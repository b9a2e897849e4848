/*
 * The runner: child processes for the agent's scripts and commands (DESIGN.md
 * section 4, layer 5), with hard limits, driven by the event loop.
 *
 * A job is started with posix_spawn (fork would copy a large daemon) of the
 * trampoline gbr-exec, which applies what posix_spawn cannot (rlimits,
 * PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, Landlock, namespaces, dropping
 * root's capabilities) and then runs the target: see the comment at the top
 * of gbr-exec.c. Where namespaces hold, a job goes instead to gbr-exec's
 * fork server (started once, by runner_init), which applies the same setup
 * without an exec of gbr-exec per run; runner-forksrv.c says how its death
 * is handled, and daemon.status says which way is in use (runner.spawn:
 * "forkserver" or "direct"). Each job leads its own process group; stdin is
 * /dev/null or the given input, written through the loop; stdout and stderr
 * are non-blocking pipes drained by libevent, both at once. A job's end is
 * seen through a pidfd where the kernel has one, else through SIGCHLD (an
 * evsignal) and waitid(WNOHANG | WNOWAIT) on each job; either way the whole
 * process group is killed while the child is still an unreaped zombie (so
 * the group id cannot have been reused), then the child is reaped, what
 * is left in the pipes is read without waiting for an end of file that a
 * grandchild could hold back for ever, and the job is finished.
 *
 * Hard limits. The timeout sends SIGTERM to the group, then SIGKILL after
 * the grace; the job ends with timed_out whether or not grandchildren
 * ignore signals or keep the pipes open. Output beyond max_output is
 * dropped (truncated); a child that goes on writing past twice the cap
 * (at least 1 MiB more) is killed the same way (output_limited). At most
 * max_children jobs run at once, max_per_key of them for one key (a
 * session); more wait in a bounded queue, at most their own timeout, or
 * fail with busy.
 *
 * Callbacks follow libuv's rule: if runner_start returns -1 no callback
 * runs; if it returns 0 the done callback runs exactly once, later, from
 * the loop (never from inside runner_start or runner_cancel), and the job
 * is freed when it returns. The output callback runs zero or more times
 * before it, from the loop.
 *
 * The process must ignore SIGPIPE (runner_init sets SIG_IGN if it is at its
 * default): writing a job's input to a child that has gone must not kill
 * the daemon. runner_init also makes the daemon non-dumpable, so a child
 * running as the same user cannot read gbrd's memory or environment (its
 * API keys) through /proc even where Landlock is missing.
 */
#ifndef GBRD_RUNNER_H
#define GBRD_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "errors.h"

struct event_base;
struct runner_job;

enum runner_mode {
	RUNNER_OFF = 0,
	RUNNER_AUTO,		/* where the kernel can */
	RUNNER_REQUIRE,		/* refuse to run without it */
};

enum runner_stream {
	RUNNER_STDOUT = 1,
	RUNNER_STDERR = 2,
};

/* How children are started (gbrd.conf [exec] fork_server = auto|off). */
enum runner_spawn {
	RUNNER_SPAWN_AUTO = 0,	/* the fork server where it works, else direct */
	RUNNER_SPAWN_DIRECT,	/* posix_spawn of gbr-exec for every job */
};

/*
 * Risks a config may accept (gbrd.conf [exec] accept_risks; the same bits
 * as config.h's CONFIG_RISK_*). Without the layers that keep them away, a
 * command could write anywhere the user can (no Landlock), reach a gbrd
 * control socket (no seccomp filter), or leave processes behind (no pid
 * namespace, and nothing that keeps its supervisor alive): commands are
 * then refused, naming the layer, unless the risk is accepted.
 */
#define RUNNER_RISK_WRITES	0x1
#define RUNNER_RISK_CONTROL	0x2
#define RUNNER_RISK_LEFTOVERS	0x4

/* Daemon-wide settings (runner_init copies what it needs). */
struct runner_config {
	const char	*exec_path;	/* gbr-exec; NULL: $GBR_EXEC, beside us, libexec */
	unsigned	 max_children;	/* jobs running at once, in all */
	unsigned	 max_per_key;	/* jobs running at once for one key */
	unsigned	 max_queued;	/* jobs waiting for a slot; 0: busy at once */
	int		 grace_ms;	/* from SIGTERM to SIGKILL */
	enum runner_mode landlock;	/* the default for jobs */
	enum runner_mode namespaces;	/* pid + mount (+ user) namespaces */
	enum runner_mode seccomp;	/* the system call filter (runfilter.h) */
	unsigned	 accept_risks;	/* RUNNER_RISK_* */
	const char *const *hide;	/* files hidden from every job (gbrd's socket) */
	size_t		 nhide;
	/* Secrets (~/.ssh): hidden where Landlock would not keep them out. */
	const char *const *secrets;
	size_t		 nsecrets;
	const char	*instance;	/* marks children for runner_sweep; NULL: none */
	enum runner_spawn spawn;
};

/* Limits of one job; 0 means "none" except where said. */
struct runner_limits {
	int		 timeout_ms;	/* required, > 0 */
	size_t		 max_output;	/* bytes kept of stdout and stderr together */
	uint64_t	 cpu_seconds;	/* RLIMIT_CPU; 0: the timeout, rounded up, + 1 */
	uint64_t	 address_space;	/* RLIMIT_AS */
	uint64_t	 file_size;	/* RLIMIT_FSIZE */
	unsigned	 processes;	/* processes at once (see gbr-exec.c) */
	unsigned	 open_files;	/* RLIMIT_NOFILE */
};

/* What to run; every pointer is borrowed and copied by runner_start. */
struct runner_opts {
	const char *const *argv;	/* argv[0] is looked up in envp's PATH */
	const char *const *envp;	/* the whole environment, already scrubbed */
	const char	*cwd;		/* absolute */
	const char	*input;		/* stdin bytes; NULL: /dev/null */
	size_t		 input_len;
	const char	*key;		/* for max_per_key (a session id); NULL: none */
	struct runner_limits limits;
	enum runner_mode landlock;	/* RUNNER_AUTO: the config's mode */
	const char *const *rw_paths;	/* writable under Landlock */
	size_t		 nrw;
	const char *const *ro_paths;	/* readable under Landlock */
	size_t		 nro;
	const char *const *ro_binds;	/* made read-only inside rw_paths (namespaces) */
	size_t		 nro_binds;
	const char	*tmpdir;	/* the session's temp space: tmp/ and shm/ */
	/*
	 * A conversation, not a run (an MCP server): stdin stays open for
	 * runner_write (input must be NULL), output is passed to the output
	 * callback and not kept (max_output is then ignored), and a child
	 * that writes a lot is not killed for it: bounding what it says is
	 * the caller's business. Not on Windows (unavailable).
	 */
	int		 stream;
};

/* How a job ended: passed to the done callback, valid only during it. */
struct runner_result {
	int		 failed;	/* it did not run: kind and reason say why */
	enum gbr_err	 kind;
	const char	*reason;
	const char	*setup_stage;	/* gbr-exec's failing stage ("exec"), or NULL */
	int		 setup_errno;
	int		 exited;	/* exit_code is valid */
	int		 exit_code;
	int		 signo;		/* killed by this signal, else 0 */
	int		 core;
	int		 timed_out;
	int		 cancelled;
	int		 truncated;	/* output was dropped beyond max_output */
	int		 output_limited; /* killed for flooding past the cap */
	int64_t		 duration_ms;	/* from spawn to reap */
	int64_t		 queued_ms;	/* waiting for a slot */
	const char	*out;		/* kept stdout bytes (not NUL-terminated) */
	size_t		 out_len;
	uint64_t	 out_total;	/* every byte read, kept or not */
	const char	*err;
	size_t		 err_len;
	uint64_t	 err_total;
	/* The layers that held for this job, as gbr-exec reported them. */
	int		 ns;		/* pid + mount namespaces */
	int		 userns;
	int		 landlock_abi;	/* 0: none */
	int		 caps_dropped;
	const char	*nproc;		/* "pid_max", "rlimit-userns", "rlimit-uid", "none" */
	int		 hidden;	/* files hidden */
	int		 ro_binds;	/* paths made read-only */
	int		 seccomp;	/* the system call filter was on */
	int		 own_proc;	/* /proc was the pid namespace's own */
	int		 private_tmp;	/* /tmp and /dev/shm were the session's */
	int		 supervised;	/* a supervisor ended what was left */
	int		 chained;	/* folders made impossible to rename */
};

typedef void (*runner_output_cb)(void *arg, enum runner_stream,
    const char *buf, size_t len);
typedef void (*runner_done_cb)(void *arg, const struct runner_result *);

/*
 * Sets the runner up on a loop (one per process). Returns 0, or -1 with
 * *cause (caller frees): gbr-exec not found, a required layer missing.
 */
int		 runner_init(struct event_base *, const struct runner_config *,
		    char **cause);
/*
 * Kills what a previous run of this daemon left behind: processes of our
 * uid whose environment holds GBR_RUNNER=instance (every child gets it).
 * Only namespace-less children can be left (a namespace dies with its
 * init), and only those that kept the variable; runner_init calls this.
 * Returns how many were killed.
 */
unsigned	 runner_sweep(const char *instance);
/* Applies new daemon-wide caps to jobs started from now on. */
void		 runner_reconfigure(const struct runner_config *);
/*
 * Kills every job's process group with SIGKILL, reaps what it can within
 * a second, and frees everything; no callback runs. After the loop.
 */
void		 runner_shutdown(void);

/*
 * Starts (or queues) a job. Returns 0 and *job (borrowed, valid until the
 * done callback returns; may be NULL), or -1 with *kind and *reason
 * (caller frees): busy (no slot and a full queue), unavailable (a
 * required layer), invalid_params, internal_error.
 */
int		 runner_start(const struct runner_opts *, runner_output_cb,
		    runner_done_cb, void *arg, struct runner_job **job,
		    enum gbr_err *kind, char **reason);
/*
 * Ends a job early: a queued one is dropped, a running one's group is
 * killed. The done callback still runs once, later, with cancelled set.
 */
void		 runner_cancel(struct runner_job *);

/*
 * Queues len bytes for a stream job's stdin (runner_opts.stream), written
 * through the loop as the pipe takes them. Returns 0, or -1 if the job is
 * not a stream, its stdin is closed, it has finished, or more than
 * RUNNER_STREAM_QUEUE bytes already wait (a child that does not read).
 */
#define RUNNER_STREAM_QUEUE	(16 * 1024 * 1024)
int		 runner_write(struct runner_job *, const char *, size_t);
/* Closes a stream job's stdin once what is queued is written. */
void		 runner_close_input(struct runner_job *);

/*
 * The pid of the job's direct child (gbr-exec, or the fork server's init
 * of the run), -1 while queued, 0 until the fork server has said.
 */
long		 runner_job_pid(const struct runner_job *);

/*
 * NULL if commands may run here, else why not (borrowed): the missing
 * layer, what it would let a command do, and the setting that accepts it.
 */
const char	*runner_refusal(void);
/* 1 if commands run with their own pid and mount namespaces. */
int		 runner_namespaces(void);
/*
 * NULL if what commands write is confined to their roots here, or
 * gbrd.conf accepts that it is not ([exec] accept_risks = writes); else
 * why not (borrowed). Unix never runs a command whose writes are not
 * confined (runner_refusal says so instead), so there it is NULL. Where
 * it is not NULL (Windows), commands run anyway, and the policy asks a
 * human before each one in full autonomy (policy.c).
 */
const char	*runner_unconfined(void);
/*
 * The variables of gbrd's environment that this system's programs need to
 * run at all, which the run tools pass on beside their allow-list
 * (Windows: SystemRoot, ComSpec, PATHEXT, ...; Unix: none). Borrowed.
 */
const char *const *runner_env_needed(size_t *n);

/* Jobs running and queued now. */
unsigned	 runner_running(void);
unsigned	 runner_queued(void);
/* The Landlock ABI of this kernel (0: none). */
int		 runner_landlock_abi(void);
/* What the runner enforces here, for daemon.status (new reference). */
json_t		*runner_status_json(void);
/* The gbr-exec in use (borrowed), or NULL before runner_init. */
const char	*runner_exec_path(void);
/* The fork server's pid, or -1 when runs go direct. */
long		 runner_fork_server_pid(void);
/* "SIGKILL" for 9, etc.; "SIG<n>" for one without a name (static buffer). */
const char	*runner_signal_name(int);

/* Test-only: 1 reaps through SIGCHLD even where pidfds work. */
void		 runner_force_sigchld(int);

#endif
