/*
 * What the Windows runner's files share, and nothing outside daemon/runner/
 * includes (runner.h is the API; Makefile.am builds these files instead of
 * the Unix ones when GBR_WINDOWS is set).
 *
 * The files, by responsibility:
 *   runner-win.c        a job's life on the loop: start, queue and slots,
 *                       the timer (queue deadline, timeout), the kill of
 *                       the whole Job object, the result and the done
 *                       callback, shutdown;
 *   runner-win-spawn.c  making one run: finding the program (PATH and
 *                       PATHEXT), its command line, its environment
 *                       block, the pipes, the Job object and its limits,
 *                       CreateProcessW;
 *   runner-win-watch.c  the watcher thread of each run (its pipes and its
 *                       process) and the loop's side of what it posts;
 *   runner-win-setup.c  the runner on this system: runner_init, reloads,
 *                       the probe of Job objects, what is and is not
 *                       confined, and daemon.status.
 *
 * Threads. Everything here runs on the loop's thread except the body of
 * the watcher (rw_watch_main), which touches only its own struct rw_watch
 * and talks to the loop through its socket; the loop touches a running
 * job's Job object (to kill it), never the watcher's handles.
 */
#ifndef GBRD_RUNNER_WIN_H
#define GBRD_RUNNER_WIN_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "clock.h"
#include "runner.h"

#define RW_CHUNK	65536		/* bytes per frame of output */
#define RW_ARGV_MAX	4096		/* arguments of a target */
#define RW_ENV_MAX	1024		/* environment entries */
#define RW_READ_BURST	4		/* socket reads per wakeup */
#define RW_DRAIN_MAX	(1024 * 1024)	/* bytes per pipe after the exit */
#define RW_DRAIN_MS	1000		/* and the time they may take */
/*
 * The exit code a Job object's processes get when gbrd ends them
 * (TerminateJobObject): "KILL" in ASCII, unlike any code a program
 * chooses, so that a result can say the run was killed.
 */
#define RW_KILL_CODE	0x4B494C4CU
/* The signal number a killed run reports: Windows' kill is SIGKILL's. */
#define RW_KILL_SIGNO	9

/* Frames from the watcher to the loop: a header, then len bytes. */
#define RW_F_OUT	1		/* stdout bytes */
#define RW_F_ERR	2		/* stderr bytes */
#define RW_F_END	3		/* struct rw_end; nothing follows */

struct rw_frame {
	uint32_t	type;
	uint32_t	len;
};

/* The last frame: how the run's first process ended. */
struct rw_end {
	uint32_t	code;		/* its exit code */
	uint32_t	flags;
};
#define RW_END_CODE	0x1		/* code is valid */
#define RW_END_CUT	0x2		/* a pipe was still open after the
					   drain's bounds: what was left of
					   it is dropped */

/* One output stream's kept bytes. */
struct rw_buf {
	char		*p;
	size_t		 len, cap;
	uint64_t	 total;
};

enum rw_state {
	RW_QUEUED,
	RW_RUNNING,
	RW_FINISHED,
};

struct runner_job {
	TAILQ_ENTRY(runner_job)	 entry;
	enum rw_state		 state;

	char			**argv;		/* the target's, owned */
	char			**envp;		/* NAME=value, owned */
	char			*cwd;
	char			*tmpdir;	/* the session's temp space */
	char			*argv0;		/* for messages */
	char			*key;
	char			*input;
	size_t			 input_len;
	struct runner_limits	 limits;
	runner_output_cb	 out_cb;
	runner_done_cb		 done_cb;
	void			*arg;

	void			*hjob;		/* the Job object (HANDLE) */
	void			*thread;	/* the watcher (HANDLE) */
	unsigned long		 pid;
	char			*script;	/* a batch file we wrote, removed
						   at the end */
	intptr_t		 sock;		/* the loop's end (SOCKET), or -1 */
	struct event		*ev_sock, *ev_timer;
	unsigned char		 rbuf[sizeof(struct rw_frame) + RW_CHUNK];
	size_t			 rlen;
	struct rw_buf		 out, err;

	int64_t			 t_queued, t_start, t_end;
	int			 kill_sent, kills;
	int			 timed_out, cancelled, output_limited, truncated;
	int			 ended;		/* the END frame came */
	uint32_t		 code, end_flags;
	int			 failed;
	enum gbr_err		 kind;
	char			*reason;
	const char		*stage;		/* "exec": the program did not start */
	int			 serrno;
};

TAILQ_HEAD(rw_list, runner_job);

/* The runner's state: one per process, defined in runner-win.c. */
struct rw_runner {
	struct event_base	*base;
	int			 ready;
	unsigned		 max_children, max_per_key, max_queued;
	int			 grace_ms;
	unsigned		 accept_risks;
	char			*refusal;	/* why commands cannot run, or NULL */
	char			*unconfined;	/* why writes are not confined */
	struct rw_list		 queued, running, finished;
	unsigned		 nqueued, nrunning;
	struct event		*ev_deliver;
	uint64_t		 started, killed;
	uint64_t		 serial;	/* names pipes and scripts */
};

extern struct rw_runner rw;

/* runner-win.c */
void		 rw_kill(struct runner_job *);
void		 rw_to_finished(struct runner_job *);
void		 rw_pump(void);
/* The watcher has ended (its socket closed): the job is over. */
void		 rw_over(struct runner_job *);
/* Keeps what fits of a chunk of output, passes it on, kills a flood. */
void		 rw_output(struct runner_job *, enum runner_stream,
		    const char *, size_t);
/* The lists and the deliver event on the loop. Returns 0 or -1. */
int		 rw_init_loop(struct event_base *);

/* runner-win-spawn.c */
/*
 * Starts a job's process in a new Job object, and its watcher. Returns 0:
 * running, or finished already with stage "exec" (the program cannot
 * start; the result says why, as gbr-exec's error line does on Unix); or
 * -1 with j->kind and j->reason (nothing could be set up).
 */
int		 rw_spawn(struct runner_job *);
/* Probes Job objects once at start: NULL, or why they cannot be had. */
char		*rw_probe_job(void);
/* Frees a vector of strings. */
void		 rw_strv_free(char **);

/* runner-win-watch.c */
/*
 * Starts the watcher of a started process, taking the handles (process,
 * a duplicate of the Job object, the pipes' ends of ours) whatever
 * happens. Returns 0 with j->sock and j->thread set and j->ev_sock
 * watched, or -1 (the caller kills the Job object).
 */
int		 rw_watch_start(struct runner_job *, void *proc, void *job,
		    void *out, void *err, void *in);
/* The loop's end of a job's socket has data, or has ended. */
void		 rw_on_sock(evutil_socket_t, short, void *);

#endif
