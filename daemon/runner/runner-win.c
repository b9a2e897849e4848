/*
 * The runner on Windows (runner.h): the life of a job, from runner_start
 * to its done callback, with the same contract, limits and lists as the
 * Unix runner (runner.c) and these differences of mechanism:
 *
 * - A job's processes live in a Job object of their own, made by
 *   runner-win-spawn.c: nothing a command starts can leave it (no
 *   breakaway), and JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE ends all of them
 *   when its last handle closes, so nothing outlives gbrd, whatever way
 *   gbrd ends. A kill (the timeout, a cancel, a flood of output) is
 *   TerminateJobObject: every process of the run at once, children and
 *   grandchildren included. Windows has no SIGTERM for a process without
 *   a console of ours, so there is no grace: the first kill is the last.
 * - The loop never waits on a handle: each run has a watcher thread
 *   (runner-win-watch.c) that reads its pipes and waits for its first
 *   process to end, and posts both through a socket pair, whose loop end
 *   is an ordinary libevent read event. When the first process ends, the
 *   watcher kills what is left of the Job object (the process group kill
 *   of the Unix runner), drains the pipes within bounds, posts how it
 *   ended and closes its socket; the end of that socket finishes the job.
 *
 * Every job is on exactly one of rw's lists: queued (waiting for a slot),
 * running (a process exists, or its watcher has not ended), finished
 * (waiting for the deliver event to call its done callback and free it).
 * A job is only ever freed from that event, never from one of its own
 * callbacks (libuv's rule, runner.h).
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "osdep-win.h"
#include "runner-win.h"
#include "xmalloc.h"

#define RW_FLOOD_MIN	(1024 * 1024)	/* read past the cap before a kill */
#define RW_KILL_AGAIN_MS 1000		/* a kill is repeated until it ends */

struct rw_runner rw;

/* A signal's name for a result: only the kill is ever reported here. */
const char *
runner_signal_name(int sig)
{
	static char	buf[16];

	if (sig == RW_KILL_SIGNO)
		return "SIGKILL";
	snprintf(buf, sizeof buf, "SIG%d", sig);
	return buf;
}

/* Frees a job and everything it still holds. */
static void
rw_job_free(struct runner_job *j)
{
	if (j->ev_sock != NULL)
		event_free(j->ev_sock);
	if (j->ev_timer != NULL)
		event_free(j->ev_timer);
	if (j->sock != -1)
		closesocket((SOCKET)j->sock);
	if (j->hjob != NULL) {
		osdep_jobs_remove(j->hjob);
		CloseHandle(j->hjob);
	}
	if (j->thread != NULL)
		CloseHandle(j->thread);
	if (j->script != NULL) {
		(void)unlink(j->script);
		free(j->script);
	}
	rw_strv_free(j->argv);
	rw_strv_free(j->envp);
	free(j->cwd);
	free(j->tmpdir);
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
rw_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j;
	struct runner_result	 r;

	/* Queued jobs take the free slots before done callbacks start more. */
	rw_pump();
	while ((j = TAILQ_FIRST(&rw.finished)) != NULL) {
		TAILQ_REMOVE(&rw.finished, j, entry);
		memset(&r, 0, sizeof r);
		r.nproc = j->limits.processes > 0 ? "job-object" : "none";
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
			r.setup_stage = j->stage;
			r.setup_errno = j->serrno;
		} else if (j->ended && (j->end_flags & RW_END_CODE)) {
			if (j->kill_sent && j->code == RW_KILL_CODE)
				r.signo = RW_KILL_SIGNO;
			else {
				r.exited = 1;
				/* As cmd's %ERRORLEVEL% shows it: signed. */
				r.exit_code = (int)j->code;
			}
		} else if (j->state == RW_FINISHED && j->t_start != 0 &&
		    !j->cancelled) {
			/* The watcher ended without a word: say so. */
			r.failed = 1;
			r.kind = GBR_ERR_INTERNAL;
			j->reason = xasprintf("'%s' ran, but how it ended was "
			    "lost (see gbrd's log)", j->argv0);
			r.reason = j->reason;
		}
		if (j->done_cb != NULL)
			j->done_cb(j->arg, &r);
		rw_job_free(j);
	}
}

/* Ends every process of the job's Job object. */
void
rw_kill(struct runner_job *j)
{
	if (j->state != RW_RUNNING || j->hjob == NULL)
		return;
	if (!TerminateJobObject(j->hjob, RW_KILL_CODE))
		log_warn("runner: cannot end the processes of '%s' (error %lu)",
		    j->argv0, (unsigned long)GetLastError());
	if (!j->kill_sent)
		rw.killed++;
	j->kill_sent = 1;
}

/* Moves a job to the finished list and wakes the deliver event. */
void
rw_to_finished(struct runner_job *j)
{
	struct timeval	tv = { 0, 0 };

	j->state = RW_FINISHED;
	j->t_end = (int64_t)clock_mono_ms();
	if (j->ev_timer != NULL)
		event_del(j->ev_timer);
	TAILQ_INSERT_TAIL(&rw.finished, j, entry);
	event_add(rw.ev_deliver, &tv);
}

/* Arms the job's timer for ms milliseconds. */
static void
rw_timer(struct runner_job *j, int ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(j->ev_timer, &tv);
}

/* The timer: a queue deadline, the timeout, or a kill to repeat. */
static void
rw_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct runner_job	*j = arg;

	if (j->state == RW_QUEUED) {
		TAILQ_REMOVE(&rw.queued, j, entry);
		rw.nqueued--;
		j->failed = 1;
		j->kind = GBR_ERR_BUSY;
		j->reason = xasprintf("no free slot to run '%s' within %d ms "
		    "(%u running)", j->argv0, j->limits.timeout_ms, rw.nrunning);
		rw_to_finished(j);
		return;
	}
	if (j->state != RW_RUNNING)
		return;
	if (!j->kill_sent && !j->output_limited && !j->cancelled)
		j->timed_out = 1;
	/*
	 * Once killed, the processes end at once unless stuck in the
	 * kernel; the watcher then ends within its drain's bounds.
	 */
	if (j->kill_sent && ++j->kills % 10 == 0)
		log_warn("runner: '%s' has not ended %d s after its kill",
		    j->argv0, j->kills);
	rw_kill(j);
	rw_timer(j, RW_KILL_AGAIN_MS);
}

/* The watcher's socket ended: the job is over (see rw_on_sock). */
void
rw_over(struct runner_job *j)
{
	if (j->state != RW_RUNNING)
		return;
	TAILQ_REMOVE(&rw.running, j, entry);
	rw.nrunning--;
	if (j->ev_sock != NULL)
		event_del(j->ev_sock);
	/*
	 * Whatever the watcher left (it kills the Job object when the first
	 * process ends, or when our end of the socket goes), closing our
	 * handle makes sure of: KILL_ON_JOB_CLOSE.
	 */
	if (!j->ended && j->hjob != NULL)
		(void)TerminateJobObject(j->hjob, RW_KILL_CODE);
	rw_to_finished(j);
}

/* Keeps what fits of a chunk of output and passes it on (runner.h). */
void
rw_output(struct runner_job *j, enum runner_stream s, const char *p, size_t n)
{
	struct rw_buf	*b = s == RUNNER_STDOUT ? &j->out : &j->err;
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
		if (j->out_cb != NULL && j->state == RW_RUNNING)
			j->out_cb(j->arg, s, p, keep);
	}
	seen = j->out.total + j->err.total;
	if (!j->output_limited && !j->ended &&
	    seen > (uint64_t)j->limits.max_output +
	    (j->limits.max_output > RW_FLOOD_MIN ? j->limits.max_output :
	    RW_FLOOD_MIN)) {
		/*
		 * It keeps flooding: end it like a timeout. The socket is
		 * still read (and the rest dropped), so that the watcher can
		 * post the end.
		 */
		j->output_limited = 1;
		if (!j->kill_sent) {
			rw_kill(j);
			rw_timer(j, RW_KILL_AGAIN_MS);
		}
	}
}

/* Jobs running now for a key. */
static unsigned
rw_key_running(const char *key)
{
	struct runner_job	*j;
	unsigned		 n = 0;

	if (key == NULL)
		return 0;
	TAILQ_FOREACH(j, &rw.running, entry)
		if (j->key != NULL && strcmp(j->key, key) == 0)
			n++;
	return n;
}

/* True if a job may start now. */
static int
rw_slot_free(const char *key)
{
	return rw.nrunning < rw.max_children &&
	    (key == NULL || rw_key_running(key) < rw.max_per_key);
}

/* Starts a job now: running, or finished at once if it cannot start. */
static int
rw_start_now(struct runner_job *j)
{
	if (rw_spawn(j) != 0)
		return -1;
	if (j->state == RW_FINISHED)
		return 0;	/* the program was not found: said later */
	j->state = RW_RUNNING;
	TAILQ_INSERT_TAIL(&rw.running, j, entry);
	rw.nrunning++;
	rw.started++;
	rw_timer(j, j->limits.timeout_ms);
	return 0;
}

/* Starts queued jobs while slots are free, oldest first. */
void
rw_pump(void)
{
	struct runner_job	*j, *next;

	for (j = TAILQ_FIRST(&rw.queued); j != NULL &&
	    rw.nrunning < rw.max_children; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (!rw_slot_free(j->key))
			continue;
		TAILQ_REMOVE(&rw.queued, j, entry);
		rw.nqueued--;
		evtimer_del(j->ev_timer);
		if (rw_start_now(j) != 0) {
			j->failed = 1;
			rw_to_finished(j);
		}
	}
}

/* A copy of a NULL-terminated vector. */
static char **
rw_strv_copy(const char *const *v, size_t n)
{
	char	**c = xcalloc(n + 1, sizeof *c);
	size_t	  i;

	for (i = 0; i < n; i++)
		c[i] = xstrdup(v[i]);
	return c;
}

/* True if path is absolute the Windows way: "C:/..." or "C:\...". */
static int
rw_abs(const char *path)
{
	return path != NULL && ((path[0] >= 'A' && path[0] <= 'Z') ||
	    (path[0] >= 'a' && path[0] <= 'z')) && path[1] == ':' &&
	    (path[2] == '/' || path[2] == '\\');
}

/* Starts or queues a job (see runner.h). */
int
runner_start(const struct runner_opts *o, runner_output_cb out_cb,
    runner_done_cb done_cb, void *arg, struct runner_job **jobp,
    enum gbr_err *kind, char **reason)
{
	struct runner_job	*j;
	size_t			 n, ne;

	if (jobp != NULL)
		*jobp = NULL;
	*reason = NULL;
	if (!rw.ready || rw.refusal != NULL) {
		*kind = GBR_ERR_UNAVAILABLE;
		*reason = xstrdup(rw.refusal != NULL ? rw.refusal :
		    "the runner is not set up");
		return -1;
	}
	if (o->stream) {
		/* The watcher thread writes a fixed input, then closes it. */
		*kind = GBR_ERR_UNAVAILABLE;
		*reason = xstrdup("a conversation with a child process (an MCP "
		    "server over stdio) is not available on Windows yet");
		return -1;
	}
	for (n = 0; o->argv != NULL && o->argv[n] != NULL; n++)
		;
	for (ne = 0; o->envp != NULL && o->envp[ne] != NULL; ne++)
		;
	if (n == 0 || o->argv[0][0] == '\0' || n > RW_ARGV_MAX ||
	    !rw_abs(o->cwd) || o->limits.timeout_ms <= 0 ||
	    o->limits.max_output == 0 || ne > RW_ENV_MAX) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xstrdup(n > RW_ARGV_MAX ? "too many arguments" :
		    ne > RW_ENV_MAX ? "too many environment variables" :
		    "nothing to run, or a bad working folder or limit");
		return -1;
	}
	if (!rw_slot_free(o->key) && rw.nqueued >= rw.max_queued) {
		*kind = GBR_ERR_BUSY;
		*reason = xasprintf("%u commands running and %u waiting: try "
		    "again later", rw.nrunning, rw.nqueued);
		return -1;
	}

	j = xcalloc(1, sizeof *j);
	j->sock = -1;
	j->limits = o->limits;
	j->out_cb = out_cb;
	j->done_cb = done_cb;
	j->arg = arg;
	j->argv = rw_strv_copy(o->argv, n);
	j->envp = rw_strv_copy(o->envp, ne);
	j->cwd = xstrdup(o->cwd);
	j->tmpdir = o->tmpdir != NULL ? xstrdup(o->tmpdir) : NULL;
	j->argv0 = xstrdup(o->argv[0]);
	j->key = o->key != NULL ? xstrdup(o->key) : NULL;
	if (o->input != NULL) {
		j->input = xmalloc(o->input_len + 1);
		memcpy(j->input, o->input, o->input_len);
		j->input_len = o->input_len;
	}
	j->t_queued = (int64_t)clock_mono_ms();
	if ((j->ev_timer = evtimer_new(rw.base, rw_on_timer, j)) == NULL)
		fatalx("runner: cannot create a timer");

	if (rw_slot_free(j->key)) {
		if (rw_start_now(j) != 0) {
			*kind = j->kind;
			*reason = j->reason;
			j->reason = NULL;
			rw_job_free(j);
			return -1;
		}
	} else {
		j->state = RW_QUEUED;
		TAILQ_INSERT_TAIL(&rw.queued, j, entry);
		rw.nqueued++;
		rw_timer(j, j->limits.timeout_ms);
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
	case RW_QUEUED:
		TAILQ_REMOVE(&rw.queued, j, entry);
		rw.nqueued--;
		rw_to_finished(j);
		break;
	case RW_RUNNING:
		rw_kill(j);
		rw_timer(j, RW_KILL_AGAIN_MS);
		break;
	case RW_FINISHED:
		break;
	}
}

/* Stream jobs do not exist here (runner_start refuses them). */
int
runner_write(struct runner_job *j, const char *buf, size_t len)
{
	(void)j;
	(void)buf;
	(void)len;
	return -1;
}

/* Stream jobs do not exist here. */
void
runner_close_input(struct runner_job *j)
{
	(void)j;
}

/* The first process's id. */
long
runner_job_pid(const struct runner_job *j)
{
	return j->state == RW_QUEUED ? -1 : (long)j->pid;
}

/*
 * Kills every job's Job object, waits a bounded time for the watchers to
 * see it, and frees everything; no callback runs.
 */
void
runner_shutdown(void)
{
	struct runner_job	*j;
	struct rw_list		*lists[] = { &rw.queued, &rw.running,
				    &rw.finished };
	ULONGLONG		 deadline;
	size_t			 i;

	TAILQ_FOREACH(j, &rw.running, entry)
		rw_kill(j);
	/*
	 * A watcher ends once its process has: within its drain's bounds.
	 * Closing our handles would end the Job objects anyway
	 * (KILL_ON_JOB_CLOSE), but a watcher still running would lose its
	 * socket under it; this wait is for tidiness, not for safety.
	 */
	deadline = GetTickCount64() + RW_DRAIN_MS + 1000;
	TAILQ_FOREACH(j, &rw.running, entry) {
		if (j->thread == NULL)
			continue;
		if (j->ev_sock != NULL) {
			event_free(j->ev_sock);
			j->ev_sock = NULL;
		}
		if (j->sock != -1) {
			closesocket((SOCKET)j->sock);
			j->sock = -1;
		}
		if (GetTickCount64() < deadline)
			(void)WaitForSingleObject(j->thread,
			    (DWORD)(deadline - GetTickCount64()));
	}
	for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
		while ((j = TAILQ_FIRST(lists[i])) != NULL) {
			TAILQ_REMOVE(lists[i], j, entry);
			rw_job_free(j);
		}
	}
	rw.nrunning = rw.nqueued = 0;
	if (rw.ev_deliver != NULL)
		event_free(rw.ev_deliver);
	free(rw.refusal);
	free(rw.unconfined);
	memset(&rw, 0, sizeof rw);
}

/* Jobs running now. */
unsigned
runner_running(void)
{
	return rw.nrunning;
}

/* Jobs queued now. */
unsigned
runner_queued(void)
{
	return rw.nqueued;
}

/* Nothing to switch: a watcher thread sees each run's end. */
void
runner_force_sigchld(int on)
{
}

/* The lists and the deliver event, on the loop (runner_init's part). */
int
rw_init_loop(struct event_base *base)
{
	rw.base = base;
	TAILQ_INIT(&rw.queued);
	TAILQ_INIT(&rw.running);
	TAILQ_INIT(&rw.finished);
	if ((rw.ev_deliver = evtimer_new(base, rw_deliver, NULL)) == NULL)
		return -1;
	return 0;
}
