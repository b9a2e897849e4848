/*
 * bench-runner: what running a command costs, printed beside a
 * floor measured in the same run on the same machine:
 *
 *   - /bin/true run N times, one at a time, through a bare posix_spawn +
 *     waitpid loop (the floor); through the runner with every layer off
 *     (the gbr-exec trampoline alone); through the runner with every layer
 *     this machine has (namespaces, Landlock, rlimits) started directly
 *     (posix_spawn of gbr-exec: the old way) and through the fork server
 *     (gbr-exec -S: the new way); through the run_command tool (the
 *     scrubbed environment, the policy checks, the result as JSON); and
 *     through gbrd's tool.call over its socket (the protocol round trip,
 *     the session's records) with the fork server and without. Goal: the
 *     runner within 1.2x the floor plus the protocol round trip;
 *   - for each, the wall-clock p50 and p99 and the CPU time per run: this
 *     process's and its reaped children's (getrusage), plus the fork
 *     server's and its reaped children's (/proc/PID/stat, clock ticks:
 *     the server, not we, reaps the runs it starts), plus gbrd's for the
 *     tool.call lines. On a busy machine the CPU time is the steadier
 *     figure; wall time includes waiting for a CPU;
 *   - memory: this process's RSS (the runner's state, as in the daemon)
 *     and gbrd's and its fork server's RSS, idle and with 50 children
 *     running (sleep).
 *
 * Runs alternate in blocks of 10 so every way sees the same load. It never
 * fails for being slow: timings are figures to read, not assertions; it
 * exits non-zero only when it cannot run at all.
 *
 * usage: bench-runner [BUILD_DIR] [-n runs]
 */
#include "gbr-config.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "config.h"
#include "env.h"
#include "log.h"
#include "runner.h"
#include "sandbox.h"
#include "tool-run.h"
#include "xmalloc.h"

#define BLOCK	5		/* runs of one way before the next way */

extern char	**environ;

static struct event_base	*base;
static int			 pending;
static char			 tmpdir[256];

/* One way of running /bin/true: its samples and CPU time. */
struct way {
	const char	*name;
	long long	*wall;		/* ns, one per run */
	long long	 cpu_us;	/* summed over the runs */
	int		 n;
};

/* Monotonic nanoseconds. */
static long long
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* This process's CPU time and its reaped children's, in microseconds. */
static long long
rusage_us(void)
{
	struct rusage	s, c;

	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	return (s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec +
	    c.ru_stime.tv_sec) * 1000000LL + s.ru_utime.tv_usec +
	    s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec;
}

/*
 * A live process's CPU time and its reaped children's (utime, stime,
 * cutime, cstime of /proc/PID/stat), in microseconds; 0 for pid <= 0.
 */
static long long
proc_us(long pid)
{
	char		 path[64], buf[1024], *p;
	unsigned long	 ut, st;
	long		 cut, cst;
	FILE		*f;
	size_t		 n;
	int		 field;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields 14-17, counted after the name (field 2 ends at the last ')'). */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	for (field = 2; *p != '\0' && field < 13; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, " %lu %lu %ld %ld", &ut, &st, &cut, &cst) != 4)
		return 0;
	return (long long)(ut + st + (unsigned long)cut + (unsigned long)cst) *
	    1000000LL / sysconf(_SC_CLK_TCK);
}

/*
 * Waits (at most a second) until a fork server has reaped every init it
 * started: a run is over for the runner when its init says "end", a little
 * before the server reaps it, and only then is its CPU time the server's.
 */
static void
settle(long pid)
{
	char	path[96], buf[64];
	FILE	*f;
	size_t	n;
	int	i;

	if (pid <= 0)
		return;
	snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
	for (i = 0; i < 1000; i++) {
		if ((f = fopen(path, "re")) == NULL)
			return;		/* no such file here: nothing to wait on */
		n = fread(buf, 1, sizeof buf, f);
		fclose(f);
		if (n == 0)
			return;
		usleep(1000);
	}
}

/* Sorts and returns the p-th percentile of n samples (ns). */
static int
cmp_ll(const void *a, const void *b)
{
	long long	x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static long long
pct(long long *v, int n, int p)
{
	qsort(v, (size_t)n, sizeof *v, cmp_ll);
	return v[(n - 1) * p / 100];
}

/* One bare posix_spawn + waitpid of /bin/true. */
static long long
bare_once(void)
{
	char *const	 argv[] = { "true", NULL };
	long long	 t0 = now_ns();
	pid_t		 pid;
	int		 st;

	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
		return -1;
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	return now_ns() - t0;
}

/* The runner's done callback for the timed runs. */
static void
done_cb(void *arg, const struct runner_result *r)
{
	int	*ok = arg;

	*ok = !r->failed && r->exited && r->exit_code == 0;
	if (r->failed)
		fprintf(stderr, "bench-runner: %s\n", r->reason);
	if (--pending == 0)
		event_base_loopbreak(base);
}

/* One /bin/true through the runner, with or without the layers. */
static long long
runner_once(int layers)
{
	const char *const	 argv[] = { "/bin/true", NULL };
	const char *const	 envp[] = { "PATH=/usr/bin:/bin", NULL };
	const char *const	 rw[] = { tmpdir };
	struct runner_opts	 o;
	enum gbr_err		 kind;
	char			*reason;
	long long		 t0 = now_ns();
	int			 ok = 0;

	memset(&o, 0, sizeof o);
	o.argv = argv;
	o.envp = envp;
	o.cwd = "/";
	o.limits.timeout_ms = 10000;
	o.limits.max_output = 65536;
	if (layers) {
		o.limits.processes = 512;
		o.limits.address_space = 4ULL << 30;
		o.limits.file_size = 1ULL << 30;
		o.limits.open_files = 1024;
		o.rw_paths = rw;
		o.nrw = 1;
	}
	pending = 1;
	if (runner_start(&o, NULL, done_cb, &ok, NULL, &kind, &reason) != 0) {
		fprintf(stderr, "bench-runner: %s\n", reason);
		exit(1);
	}
	event_base_dispatch(base);
	return ok ? now_ns() - t0 : -1;
}

/* The tool layer's done callback. */
static void
tool_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	int	*ok = arg;

	*ok = !failed;
	if (failed)
		fprintf(stderr, "bench-runner: %s\n", reason);
	if (--pending == 0)
		event_base_loopbreak(base);
}

/* One call of the run_command tool. */
static long long
tool_once(struct tool_run_ctx *ctx, json_t *args)
{
	enum gbr_err	 kind;
	json_t		*data;
	char		*reason;
	long long	 t0 = now_ns();
	int		 ok = 0;

	pending = 1;
	if (tool_run_call(ctx, "run_command", args, NULL, tool_done, &ok, NULL,
	    &kind, &reason, &data) != 0) {
		fprintf(stderr, "bench-runner: %s\n", reason);
		exit(1);
	}
	event_base_dispatch(base);
	return ok ? now_ns() - t0 : -1;
}

/* VmRSS of a process in KiB, or -1. */
static long
rss_kib(long pid)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 kib = -1;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* A process's parent, or -1. */
static long
ppid_of(long pid)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 pp = -1;

	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "PPid: %ld", &pp) == 1)
			break;
	fclose(f);
	return pp;
}

/*
 * The gbr-exec processes under root (gbr-exec, its inits, the fork server
 * and its inits: not the targets, which have exec'd): how many, how many
 * address spaces (the fork server's inits share its own), and the
 * proportional set size of those (smaps_rollup's Pss, which splits shared
 * pages between address spaces, so each is counted once: kcmp KCMP_VM).
 */
static void
helpers_pss(long root, int *count, int *spaces, long *kib)
{
	DIR		*d;
	struct dirent	*de;
	char		 path[300], line[256];
	FILE		*f;
	long		 pid, p, pss, seen[256];
	int		 depth, nseen = 0, i, same;

	*count = *spaces = 0;
	*kib = 0;
	if ((d = opendir("/proc")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if ((pid = strtol(de->d_name, NULL, 10)) <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/comm", pid);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		line[0] = '\0';
		if (fgets(line, sizeof line, f) == NULL)
			line[0] = '\0';
		fclose(f);
		if (strcmp(line, "gbr-exec\n") != 0)
			continue;
		for (p = pid, depth = 0; p > 1 && p != root && depth < 4; depth++)
			p = ppid_of(p);
		if (p != root)
			continue;
		(*count)++;
		for (i = same = 0; i < nseen && !same; i++)
			same = syscall(SYS_kcmp, (pid_t)pid, (pid_t)seen[i],
			    1 /* KCMP_VM */, 0, 0) == 0;
		if (same || nseen == (int)(sizeof seen / sizeof seen[0]))
			continue;
		seen[nseen++] = pid;
		snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", pid);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		while (fgets(line, sizeof line, f) != NULL)
			if (sscanf(line, "Pss: %ld", &pss) == 1) {
				(*spaces)++;
				*kib += pss;
				break;
			}
		fclose(f);
	}
	closedir(d);
}

/* A tiny blocking JSON-RPC client for gbrd. */
struct rpc {
	int	 fd;
	char	 buf[1 << 16];
	size_t	 len;
	int	 id;
};

/* Sends a request and returns its response (new reference), or NULL. */
static json_t *
rpc_call(struct rpc *c, const char *method, json_t *params)
{
	json_t	*req, *resp;
	char	*line, *nl;
	ssize_t	 n;
	size_t	 len;

	req = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", ++c->id,
	    "method", method, "params", params != NULL ? params : json_object());
	line = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	len = strlen(line);
	line[len] = '\n';
	if (write(c->fd, line, len + 1) != (ssize_t)len + 1) {
		free(line);
		return NULL;
	}
	free(line);
	for (;;) {
		while ((nl = memchr(c->buf, '\n', c->len)) == NULL) {
			if (c->len == sizeof c->buf)
				return NULL;
			n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
			if (n <= 0)
				return NULL;
			c->len += (size_t)n;
		}
		*nl = '\0';
		resp = json_loads(c->buf, 0, NULL);
		len = (size_t)(nl + 1 - c->buf);
		memmove(c->buf, nl + 1, c->len - len);
		c->len -= len;
		if (resp != NULL && json_integer_value(json_object_get(resp,
		    "id")) == c->id)
			return resp;
		json_decref(resp);	/* an event */
	}
}

/* Connects and says hello. */
static int
rpc_open(struct rpc *c, const char *path)
{
	struct sockaddr_un	sun;
	json_t			*r;

	memset(c, 0, sizeof *c);
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	if ((c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(c->fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
		if (c->fd != -1)
			close(c->fd);
		return -1;
	}
	r = rpc_call(c, "hello", json_pack("{s:i, s:s}", "protocol", 1,
	    "client", "bench-runner/1"));
	if (r == NULL || json_object_get(r, "result") == NULL) {
		json_decref(r);
		close(c->fd);
		return -1;
	}
	json_decref(r);
	return 0;
}

/* A gbrd started on a private socket and state folder. */
struct gbrd {
	pid_t		 pid;
	char		 sock[300];
	struct rpc	 c;
	char		*sid;
	long		 server;	/* its fork server, or -1 */
	const char	*spawn;
};

/* Starts gbrd (fork_server on or off) and opens a session; 0 or -1. */
static int
gbrd_start(struct gbrd *g, const char *build, const char *ws, int fs)
{
	char		 gbrd[512], state[300], conf[300];
	char		*av[9];
	json_t		*r, *st;
	FILE		*f;
	int		 i;

	memset(g, 0, sizeof *g);
	g->pid = -1;
	g->server = -1;
	snprintf(gbrd, sizeof gbrd, "%s/gbrd", build);
	snprintf(g->sock, sizeof g->sock, "%s/sock%d/gbrd.sock", tmpdir, fs);
	snprintf(state, sizeof state, "%s/state%d", tmpdir, fs);
	snprintf(conf, sizeof conf, "%s/gbrd%d.conf", tmpdir, fs);
	if ((f = fopen(conf, "w")) == NULL)
		return -1;
	fprintf(f, "[daemon]\nlog_level = error\n[log]\nfsync = no\n"
	    "[exec]\nmax_children = 64\nmax_children_per_session = 64\n"
	    "fork_server = %s\n", fs ? "auto" : "off");
	fclose(f);
	av[0] = gbrd;
	av[1] = (char *)"-f";
	av[2] = (char *)"-s";
	av[3] = g->sock;
	av[4] = (char *)"-S";
	av[5] = state;
	av[6] = (char *)"-c";
	av[7] = conf;
	av[8] = NULL;
	if (posix_spawn(&g->pid, gbrd, NULL, NULL, av, environ) != 0)
		return -1;
	for (i = 0; i < 200; i++) {
		if (rpc_open(&g->c, g->sock) == 0)
			break;
		usleep(20000);
	}
	if (i == 200)
		return -1;
	r = rpc_call(&g->c, "session.create", json_pack("{s:s}", "workspace",
	    ws));
	if (json_string_value(json_object_get(json_object_get(r, "result"),
	    "id")) == NULL) {
		json_decref(r);
		return -1;
	}
	g->sid = xstrdup(json_string_value(json_object_get(json_object_get(r,
	    "result"), "id")));
	json_decref(r);
	r = rpc_call(&g->c, "daemon.status", NULL);
	st = json_object_get(json_object_get(json_object_get(r, "result"),
	    "security"), "runner");
	g->spawn = json_string_value(json_object_get(st, "spawn")) != NULL &&
	    strcmp(json_string_value(json_object_get(st, "spawn")),
	    "forkserver") == 0 ? "forkserver" : "direct";
	if (json_is_object(json_object_get(st, "fork_server")))
		g->server = (long)json_integer_value(json_object_get(
		    json_object_get(st, "fork_server"), "pid"));
	json_decref(r);
	return 0;
}

/* Stops a gbrd. */
static void
gbrd_stop(struct gbrd *g)
{
	if (g->pid <= 0)
		return;
	close(g->c.fd);
	kill(g->pid, SIGTERM);
	waitpid(g->pid, NULL, 0);
	free(g->sid);
	g->pid = -1;
}

/* One tool.call (run_command /bin/true, or another tool); ns or -1. */
static long long
rpc_once(struct gbrd *g, const char *tool, json_t *args)
{
	long long	 t0 = now_ns();
	json_t		*r;
	int		 ok;

	r = rpc_call(&g->c, "tool.call", json_pack("{s:s, s:s, s:O}", "session",
	    g->sid, "tool", tool, "args", args));
	ok = r != NULL && json_object_get(r, "result") != NULL;
	if (!ok) {
		char	*s = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;

		fprintf(stderr, "bench-runner: tool.call: %.300s\n", s != NULL ?
		    s : "no answer");
		free(s);
	}
	json_decref(r);
	return ok ? now_ns() - t0 : -1;
}

/* One daemon.ping; ns. */
static long long
ping_once(struct gbrd *g)
{
	long long	 t0 = now_ns();

	json_decref(rpc_call(&g->c, "daemon.ping", NULL));
	return now_ns() - t0;
}

/*
 * Prints one way's line: p10, p50 and p99 of the wall-clock time, the CPU
 * time per run, and the ratios to the floor (p50, p10, CPU). On a shared
 * machine p10 says most about the cost itself: p50 includes the waits
 * for a CPU other jobs cause.
 */
static void
report(struct way *w, const struct way *floor)
{
	long long	p10 = pct(w->wall, w->n, 10), p50 = pct(w->wall, w->n, 50);
	long long	p99 = pct(w->wall, w->n, 99);
	double		cpu = (double)w->cpu_us / w->n;

	printf("  %-38s p10 %7.1f  p50 %7.1f  p99 %8.1f  cpu %7.1f", w->name,
	    p10 / 1e3, p50 / 1e3, p99 / 1e3, cpu);
	if (floor != NULL)
		printf("  %.2fx %.2fx %.2fx", (double)p50 /
		    (double)pct(floor->wall, floor->n, 50), (double)p10 /
		    (double)pct(floor->wall, floor->n, 10), (double)w->cpu_us /
		    (double)floor->cpu_us * floor->n / w->n);
	printf("\n");
}

/* Sets the runner's daemon-wide config for a block. */
static void
set_runner(const struct config *cfg, int layers, enum runner_spawn spawn)
{
	struct runner_config	rc;

	memset(&rc, 0, sizeof rc);
	rc.max_children = 64;
	rc.max_per_key = 64;
	rc.landlock = layers ? (enum runner_mode)cfg->exec_landlock : RUNNER_OFF;
	rc.namespaces = layers ? (enum runner_mode)cfg->exec_namespaces :
	    RUNNER_OFF;
	rc.seccomp = layers ? (enum runner_mode)cfg->exec_seccomp : RUNNER_OFF;
	/* "Every layer off" is the trampoline's own cost: its risks accepted. */
	rc.accept_risks = layers ? 0 : RUNNER_RISK_WRITES | RUNNER_RISK_CONTROL |
	    RUNNER_RISK_LEFTOVERS;
	rc.spawn = spawn;
	runner_reconfigure(&rc);
}

/* Memory of a gbrd and its fork server with 50 sleeps running. */
static void
gbrd_memory(struct gbrd *g)
{
	struct rpc	 cs[50];
	json_t		*sl = json_pack("{s:[s, s]}", "argv", "sleep", "3");
	char		*line;
	long		 g0 = rss_kib(g->pid), s0 = rss_kib(g->server), g50, s50;
	long		 hkib;
	int		 i, k, hn, hs;

	for (i = 0; i < 50; i++) {
		json_t	*req;
		int	 bad;

		if (rpc_open(&cs[i], g->sock) != 0)
			break;
		cs[i].id++;
		req = json_pack("{s:s, s:i, s:s, s:{s:s, s:s, s:O}}",
		    "jsonrpc", "2.0", "id", cs[i].id, "method", "tool.call",
		    "params", "session", g->sid, "tool", "run_command", "args",
		    sl);
		line = json_dumps(req, JSON_COMPACT);
		json_decref(req);
		bad = write(cs[i].fd, line, strlen(line)) < 0 ||
		    write(cs[i].fd, "\n", 1) < 0;
		free(line);
		if (bad) {
			close(cs[i].fd);
			break;
		}
	}
	k = i;
	usleep(1500000);
	g50 = rss_kib(g->pid);
	s50 = rss_kib(g->server);
	helpers_pss(g->pid, &hn, &hs, &hkib);
	for (i = 0; i < k; i++) {
		/* Wait for each answer (a line with an id), then close. */
		cs[i].len = 0;
		for (;;) {
			ssize_t	 nr = read(cs[i].fd, cs[i].buf + cs[i].len,
			    sizeof cs[i].buf - cs[i].len);
			char	*nl;
			json_t	*resp;

			if (nr <= 0)
				break;
			cs[i].len += (size_t)nr;
			while ((nl = memchr(cs[i].buf, '\n', cs[i].len)) != NULL) {
				int	done;

				*nl = '\0';
				resp = json_loads(cs[i].buf, 0, NULL);
				done = resp != NULL &&
				    json_object_get(resp, "id") != NULL;
				json_decref(resp);
				cs[i].len -= (size_t)(nl + 1 - cs[i].buf);
				memmove(cs[i].buf, nl + 1, cs[i].len);
				if (done)
					goto answered;
			}
		}
answered:
		close(cs[i].fd);
	}
	json_decref(sl);
	printf("  gbrd (%s): %ld KiB idle, %ld KiB with %d children running "
	    "(%+ld KiB)", g->spawn, g0, g50, k, g50 - g0);
	if (g->server > 0)
		printf("; its fork server %ld KiB idle, %ld KiB with them "
		    "(the runs' inits share its memory)", s0, s50);
	printf("\n    its gbr-exec processes with them: %d in %d address "
	    "spaces, %ld KiB in all (PSS)\n", hn, hs, hkib);
}

/* The ways, in the order each turn runs them. */
enum {
	W_BARE, W_OFF, W_DIRECT, W_FS, W_TOOL, W_PING, W_RPC_L, W_RPC_D,
	W_RPC_F, W__COUNT
};
static struct way	 ways[W__COUNT] = {
	[W_BARE] = { .name = "bare posix_spawn + waitpid (floor)" },
	[W_OFF] = { .name = "runner, layers off (gbr-exec alone)" },
	[W_DIRECT] = { .name = "runner, every layer, direct (before)" },
	[W_FS] = { .name = "runner, every layer, fork server" },
	[W_TOOL] = { .name = "run_command tool, every layer" },
	[W_PING] = { .name = "daemon.ping (the protocol round trip)" },
	[W_RPC_L] = { .name = "tool.call list_directory (no child)" },
	[W_RPC_D] = { .name = "tool.call, fork_server = off (before)" },
	[W_RPC_F] = { .name = "tool.call, fork server" },
};

/* One run of one way; ns, or -1 if it failed. */
static long long
way_once(int w, struct tool_run_ctx *ctx, json_t *args, json_t *largs,
    struct gbrd *gd, struct gbrd *gf)
{
	switch (w) {
	case W_BARE:
		return bare_once();
	case W_OFF:
		return runner_once(0);
	case W_DIRECT:
	case W_FS:
		return runner_once(1);
	case W_TOOL:
		return tool_once(ctx, args);
	case W_PING:
		return ping_once(gf);
	case W_RPC_L:
		return rpc_once(gf, "list_directory", largs);
	case W_RPC_D:
		return rpc_once(gd, "run_command", args);
	case W_RPC_F:
		return rpc_once(gf, "run_command", args);
	}
	return -1;
}

/* CPU time so far of what a way uses: us, our children, the servers. */
static long long
way_cpu(int w, struct gbrd *gd, struct gbrd *gf)
{
	long long	c = rusage_us();

	if (w <= W_TOOL)
		return c + proc_us(runner_fork_server_pid());
	if (w == W_RPC_D)
		return c + proc_us(gd->pid) + proc_us(gd->server);
	if (w != W_PING)
		return c + proc_us(gf->pid) + proc_us(gf->server);
	return c + proc_us(gf->pid);
}

int
main(int argc, char **argv)
{
	const char		*build = ".";
	struct config		*cfg;
	struct tool_run_ctx	 ctx;
	struct env		*env;
	struct sandbox		*sb;
	struct gbrd		 gd, gf;
	json_t			*args, *largs, *r;
	char			 ws[300], *cause, exec_path[600], cmd[700];
	long long		 c0, t0, floor_p50, ping_p50, goal;
	long			 rss0, rss50;
	int			 n = 300, i, k, w, ch, have_gbrd, last;

	while ((ch = getopt(argc, argv, "n:")) != -1) {
		if (ch != 'n' || (n = (int)strtol(optarg, NULL, 10)) < BLOCK ||
		    n > 100000) {
			fprintf(stderr, "usage: bench-runner [BUILD_DIR] [-n runs]\n");
			return 2;
		}
	}
	if (optind < argc)
		build = argv[optind];
	n -= n % BLOCK;
	log_open("bench-runner", LOG_LEVEL_ERROR, LOG_DEST_STDERR);
	signal(SIGPIPE, SIG_IGN);
	snprintf(exec_path, sizeof exec_path, "%s/gbr-exec", build);
	if (access(exec_path, X_OK) != 0) {
		fprintf(stderr, "bench-runner: no %s\n", exec_path);
		return 1;
	}
	setenv("GBR_EXEC", exec_path, 1);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/gbr-bench-runner-XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return 1;
	snprintf(ws, sizeof ws, "%s/ws", tmpdir);
	mkdir(ws, 0700);
	base = event_base_new();
	for (w = 0; w < W__COUNT; w++)
		ways[w].wall = xcalloc((size_t)n, sizeof *ways[w].wall);

	cfg = config_defaults();
	if (env_load(ws, NULL, &env, &cause) != 0 ||
	    (sb = env_sandbox(env, &cause)) == NULL ||
	    tool_run_init(base, cfg, NULL, NULL, 0, &cause) != 0) {
		fprintf(stderr, "bench-runner: %s\n", cause);
		return 1;
	}
	memset(&ctx, 0, sizeof ctx);
	ctx.sandbox = sb;
	ctx.env = env;
	ctx.session = "bench";
	args = json_pack("{s:[s]}", "argv", "/bin/true");
	largs = json_pack("{s:s}", "path", ".");
	r = tool_run_status();
	printf("runs of /bin/true, one at a time, %d each, every way in turn "
	    "(blocks of %d); CPU per run: children and fork servers included\n",
	    n, BLOCK);
	printf("  layers here: landlock abi %lld%s, namespaces %s, process "
	    "limit %s, fork server %s\n",
	    (long long)json_integer_value(json_object_get(json_object_get(r,
	    "landlock"), "abi")), json_is_true(json_object_get(json_object_get(r,
	    "landlock"), "active")) ? "" : " (inactive)",
	    json_is_true(json_object_get(r, "pid_namespace")) ? "yes" : "no",
	    json_string_value(json_object_get(r, "process_limit")),
	    runner_fork_server_pid() > 0 ? "running" : "not running");
	if (runner_fork_server_pid() <= 0)
		printf("  (runs go direct: %s)\n", json_string_value(
		    json_object_get(r, "spawn_why_direct")));
	json_decref(r);

	/* Two gbrds (fork server on, off), measured in the same turns. */
	memset(&gd, 0, sizeof gd);
	gd.pid = -1;
	have_gbrd = gbrd_start(&gf, build, ws, 1) == 0 &&
	    gbrd_start(&gd, build, ws, 0) == 0;
	if (!have_gbrd)
		printf("  gbrd did not start: no tool.call figures\n");
	last = have_gbrd ? W__COUNT - 1 : W_TOOL;

	for (i = 0; i < n; i += BLOCK) {
		for (w = W_BARE; w <= last; w++) {
			switch (w) {
			case W_OFF:
				set_runner(cfg, 0, RUNNER_SPAWN_DIRECT);
				break;
			case W_DIRECT:
				set_runner(cfg, 1, RUNNER_SPAWN_DIRECT);
				break;
			case W_FS:
				set_runner(cfg, 1, RUNNER_SPAWN_AUTO);
				break;
			}
			c0 = way_cpu(w, &gd, &gf);
			for (k = i; k < i + BLOCK; k++)
				if ((ways[w].wall[k] = way_once(w, &ctx, args,
				    largs, &gd, &gf)) < 0) {
					fprintf(stderr, "bench-runner: a run "
					    "failed (%s)\n", ways[w].name);
					return 1;
				}
			settle(runner_fork_server_pid());
			settle(gf.server);
			ways[w].cpu_us += way_cpu(w, &gd, &gf) - c0;
			ways[w].n = k;
		}
	}
	floor_p50 = pct(ways[W_BARE].wall, n, 50);
	printf("  %-38s %s\n", "(times in us; ratios to the floor:",
	    "p50, p10, CPU)");
	for (w = W_BARE; w <= last; w++)
		report(&ways[w], w == W_BARE || w == W_PING || w == W_RPC_L ?
		    NULL : &ways[W_BARE]);
	if (have_gbrd) {
		ping_p50 = pct(ways[W_PING].wall, n, 50);
		goal = (long long)(1.2 * (double)floor_p50) + ping_p50;
		t0 = pct(ways[W_RPC_F].wall, n, 50);
		printf("  goal: tool.call p50 <= 1.2 x floor + round trip = "
		    "%.1f us; with the fork server %.1f us (%s), direct %.1f us\n",
		    goal / 1e3, t0 / 1e3, t0 <= goal ? "met" : "not met",
		    pct(ways[W_RPC_D].wall, n, 50) / 1e3);
		/*
		 * Every tool.call appends two durable records (tool.call,
		 * tool.result) and replies once the second is written:
		 * list_directory pays that and starts no child.
		 */
		t0 -= pct(ways[W_RPC_L].wall, n, 50) - ping_p50;
		printf("  less gbrd's per-call records (list_directory's time "
		    "beyond the round trip): %.1f us = %.2fx the floor (%s)\n",
		    t0 / 1e3, (double)t0 / (double)floor_p50, t0 <= goal ?
		    "met" : "not met");
		t0 = pct(ways[W_RPC_F].wall, n, 10);
		goal = (long long)(1.2 * (double)pct(ways[W_BARE].wall, n, 10)) +
		    pct(ways[W_PING].wall, n, 10);
		printf("  the same goal on p10: %.1f us <= %.1f us (%s)\n",
		    t0 / 1e3, goal / 1e3, t0 <= goal ? "met" : "not met");
	}

	/* Memory of this process with 50 children running. */
	{
		json_t		*sl = json_pack("{s:[s, s]}", "argv", "sleep", "3");
		static int	 ok[50];

		set_runner(cfg, 1, RUNNER_SPAWN_AUTO);
		rss0 = rss_kib(getpid());
		pending = 50;
		for (i = 0; i < 50; i++) {
			enum gbr_err	 kind;
			json_t		*data;

			if (tool_run_call(&ctx, "run_command", sl, NULL, tool_done,
			    &ok[i], NULL, &kind, &cause, &data) != 0) {
				fprintf(stderr, "bench-runner: %s\n", cause);
				return 1;
			}
		}
		usleep(500000);
		event_base_loop(base, EVLOOP_NONBLOCK);
		rss50 = rss_kib(getpid());
		k = (int)runner_running();
		event_base_dispatch(base);
		json_decref(sl);
		printf("memory\n");
		printf("  the runner's process (gbrd's share): %ld KiB idle, %ld "
		    "KiB with %d children running (%+ld KiB)\n", rss0, rss50, k,
		    rss50 - rss0);
	}
	tool_run_shutdown();
	sandbox_free(sb);
	env_unref(env);
	if (have_gbrd) {
		gbrd_memory(&gf);
		gbrd_memory(&gd);
	}
	gbrd_stop(&gf);
	gbrd_stop(&gd);
	json_decref(args);
	json_decref(largs);
	config_free(cfg);
	event_base_free(base);
	snprintf(cmd, sizeof cmd, "%s", tmpdir);
	{
		/* The temp tree: ws, sock, state; small, removed with rm. */
		char *const	rmv[] = { "rm", "-rf", cmd, NULL };
		pid_t		p;

		if (posix_spawnp(&p, "rm", NULL, NULL, rmv, environ) == 0)
			waitpid(p, NULL, 0);
	}
	for (w = 0; w < W__COUNT; w++)
		free(ways[w].wall);
	return 0;
}
