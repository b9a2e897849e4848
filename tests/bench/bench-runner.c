/*
 * bench-runner: what running a command costs (issue 6), printed beside a
 * floor measured in the same run on the same machine:
 *
 *   - /bin/true run N times, one at a time, through a bare posix_spawn +
 *     waitpid loop (the floor), through the runner with every layer off
 *     (the gbr-exec trampoline alone), through the run_command tool with
 *     the layers this machine has (namespaces, Landlock, rlimits, the
 *     scrubbed environment), and through gbrd's tool.call over its socket
 *     (the protocol round trip, the session's records) when gbrd answers.
 *     Goal: the runner within 1.2x the floor plus the protocol round trip;
 *   - memory: this process's RSS (the runner's state, as in the daemon)
 *     and gbrd's RSS, idle and with 50 children running (sleep).
 *
 * Runs alternate in blocks so both see the same load. It never fails for
 * being slow: timings are figures to read, not assertions; it exits
 * non-zero only when it cannot run at all.
 *
 * usage: bench-runner [BUILD_DIR] [-n runs]
 */
#include "gbr-config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

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

extern char	**environ;

static struct event_base	*base;
static int			 pending;
static char			 tmpdir[256];

/* Monotonic nanoseconds. */
static long long
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
	if (--pending == 0)
		event_base_loopbreak(base);
}

/* One /bin/true through the runner with every layer off. */
static long long
runner_once(void)
{
	const char *const	 argv[] = { "/bin/true", NULL };
	const char *const	 envp[] = { "PATH=/usr/bin:/bin", NULL };
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
rss_kib(pid_t pid)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 kib = -1;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
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
	    connect(c->fd, (struct sockaddr *)&sun, sizeof sun) != 0)
		return -1;
	r = rpc_call(c, "hello", json_pack("{s:i, s:s}", "protocol", 1,
	    "client", "bench-runner/1"));
	if (r == NULL || json_object_get(r, "result") == NULL) {
		json_decref(r);
		return -1;
	}
	json_decref(r);
	return 0;
}

/* Starts gbrd on a private socket; returns its pid or -1. */
static pid_t
gbrd_start(const char *build, char *sock, size_t socksz)
{
	char		 gbrd[512], state[300], conf[300], *argv[8];
	struct rpc	 c;
	FILE		*f;
	pid_t		 pid;
	int		 i;

	snprintf(gbrd, sizeof gbrd, "%s/gbrd", build);
	snprintf(sock, socksz, "%s/sock/gbrd.sock", tmpdir);
	snprintf(state, sizeof state, "%s/state", tmpdir);
	snprintf(conf, sizeof conf, "%s/gbrd.conf", tmpdir);
	if ((f = fopen(conf, "w")) == NULL)
		return -1;
	fprintf(f, "[daemon]\nlog_level = error\n[log]\nfsync = no\n"
	    "[exec]\nmax_children = 64\nmax_children_per_session = 64\n");
	fclose(f);
	argv[0] = gbrd;
	argv[1] = "-f";
	argv[2] = "-s";
	argv[3] = sock;
	argv[4] = "-S";
	argv[5] = state;
	argv[6] = "-c";
	argv[7] = conf;
	{
		char	*av[9];

		memcpy(av, argv, sizeof argv);
		av[8] = NULL;
		if (posix_spawn(&pid, gbrd, NULL, NULL, av, environ) != 0)
			return -1;
	}
	for (i = 0; i < 200; i++) {
		if (rpc_open(&c, sock) == 0) {
			close(c.fd);
			return pid;
		}
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* Prints one timing line. */
static void
report(const char *what, long long *v, int n, long long floor_p50)
{
	long long	p50 = pct(v, n, 50), p99 = pct(v, n, 99);

	printf("  %-40s p50 %7.1f us  p99 %8.1f us", what, p50 / 1e3, p99 / 1e3);
	if (floor_p50 > 0)
		printf("  %.2fx the floor", (double)p50 / (double)floor_p50);
	printf("\n");
}

int
main(int argc, char **argv)
{
	const char		*build = ".";
	struct config		*cfg;
	struct runner_config	 rc;
	struct tool_run_ctx	 ctx;
	struct env		*env;
	struct sandbox		*sb;
	struct rpc		 c;
	json_t			*args, *r, *sess;
	char			 ws[300], sock[300], *cause, exec_path[600];
	char			 cmd[700];
	long long		*bare, *run, *tool, *rpc, *ping, t0;
	long			 rss0, rss50, grss0, grss50;
	const char		*sid;
	pid_t			 gpid;
	int			 n = 300, i, k, ch, nrpc = 0;

	while ((ch = getopt(argc, argv, "n:")) != -1) {
		if (ch != 'n' || (n = (int)strtol(optarg, NULL, 10)) < 10 ||
		    n > 100000) {
			fprintf(stderr, "usage: bench-runner [BUILD_DIR] [-n runs]\n");
			return 2;
		}
	}
	if (optind < argc)
		build = argv[optind];
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
	bare = xcalloc((size_t)n, sizeof *bare);
	run = xcalloc((size_t)n, sizeof *run);
	tool = xcalloc((size_t)n, sizeof *tool);
	rpc = xcalloc((size_t)n, sizeof *rpc);
	ping = xcalloc((size_t)n, sizeof *ping);

	/* The bare runner (every layer off) and the tool with every layer. */
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

	printf("runs of /bin/true, one at a time, %d each (alternating blocks of 10)\n", n);
	for (i = 0; i < n; i += 10) {
		for (k = i; k < i + 10 && k < n; k++)
			bare[k] = bare_once();
		/* Layers off: the trampoline's cost alone. */
		memset(&rc, 0, sizeof rc);
		rc.max_children = 64;
		rc.landlock = RUNNER_OFF;
		rc.namespaces = RUNNER_OFF;
		runner_reconfigure(&rc);
		for (k = i; k < i + 10 && k < n; k++)
			run[k] = runner_once();
		rc.landlock = (enum runner_mode)cfg->exec_landlock;
		rc.namespaces = (enum runner_mode)cfg->exec_namespaces;
		rc.max_per_key = cfg->exec_max_per_session;
		runner_reconfigure(&rc);
		for (k = i; k < i + 10 && k < n; k++)
			tool[k] = tool_once(&ctx, args);
	}
	for (i = 0; i < n; i++)
		if (bare[i] < 0 || run[i] < 0 || tool[i] < 0) {
			fprintf(stderr, "bench-runner: a run failed\n");
			return 1;
		}
	r = tool_run_status();
	printf("  layers here: landlock abi %lld%s, namespaces %s, process limit %s\n",
	    (long long)json_integer_value(json_object_get(json_object_get(r,
	    "landlock"), "abi")), json_is_true(json_object_get(json_object_get(r,
	    "landlock"), "active")) ? "" : " (inactive)",
	    json_is_true(json_object_get(r, "pid_namespace")) ? "yes" : "no",
	    json_string_value(json_object_get(r, "process_limit")));
	json_decref(r);
	t0 = pct(bare, n, 50);
	report("bare posix_spawn + waitpid (floor)", bare, n, 0);
	report("runner, layers off (gbr-exec alone)", run, n, t0);
	report("run_command tool, every layer", tool, n, t0);

	/* Memory of this process with 50 children running. */
	{
		json_t	*sl = json_pack("{s:[s, s]}", "argv", "sleep", "3");

		memset(&rc, 0, sizeof rc);
		rc.max_children = 64;
		rc.max_per_key = 64;
		rc.landlock = (enum runner_mode)cfg->exec_landlock;
		rc.namespaces = (enum runner_mode)cfg->exec_namespaces;
		runner_reconfigure(&rc);
		rss0 = rss_kib(getpid());
		pending = 50;
		for (i = 0; i < 50; i++) {
			enum gbr_err	 kind;
			json_t		*data;
			static int	 ok[50];

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
		printf("memory of the runner's process (like gbrd's share)\n");
		printf("  %-40s %ld KiB idle, %ld KiB with %d children running "
		    "(%+ld KiB)\n", "VmRSS", rss0, rss50, k, rss50 - rss0);
	}
	tool_run_shutdown();
	sandbox_free(sb);
	env_unref(env);

	/* Through gbrd, when it answers and has tool.call. */
	printf("through gbrd (tool.call over the socket)\n");
	if ((gpid = gbrd_start(build, sock, sizeof sock)) == -1 ||
	    rpc_open(&c, sock) != 0) {
		printf("  skipped: gbrd did not start\n");
		goto out;
	}
	sess = rpc_call(&c, "session.create", json_pack("{s:s}", "workspace", ws));
	sid = json_string_value(json_object_get(json_object_get(sess, "result"),
	    "id"));
	if (sid == NULL) {
		printf("  skipped: session.create failed\n");
		json_decref(sess);
		goto stop;
	}
	for (i = 0; i < n; i++) {
		t0 = now_ns();
		r = rpc_call(&c, "daemon.ping", NULL);
		ping[i] = now_ns() - t0;
		json_decref(r);
		t0 = now_ns();
		r = rpc_call(&c, "tool.call", json_pack("{s:s, s:s, s:O}", "session",
		    sid, "tool", "run_command", "args", args));
		rpc[i] = now_ns() - t0;
		if (r == NULL || json_object_get(r, "result") == NULL) {
			char	*s = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;

			printf("  skipped: tool.call: %.300s\n", s != NULL ? s :
			    "no answer");
			free(s);
			json_decref(r);
			json_decref(sess);
			goto stop;
		}
		json_decref(r);
		nrpc++;
	}
	report("daemon.ping (the protocol round trip)", ping, n, 0);
	report("tool.call run_command /bin/true", rpc, n, pct(bare, n, 50));
	printf("  goal: runner <= 1.2 x floor + round trip = %.1f us; "
	    "tool.call p50 %.1f us\n", (1.2 * (double)pct(bare, n, 50) +
	    (double)pct(ping, n, 50)) / 1e3, (double)pct(rpc, n, 50) / 1e3);
	printf("  (tool.call also appends two durable records per call: "
	    "tool.call and tool.result)\n");

	/* gbrd's memory with 50 children. */
	grss0 = rss_kib(gpid);
	{
		struct rpc	cs[50];
		json_t		*sl = json_pack("{s:[s, s]}", "argv", "sleep", "3");
		char		*line;

		for (i = 0; i < 50; i++) {
			if (rpc_open(&cs[i], sock) != 0)
				break;
			json_t	*req;
			int	 bad;

			cs[i].id++;
			req = json_pack("{s:s, s:i, s:s, s:{s:s, s:s, s:O}}",
			    "jsonrpc", "2.0", "id", cs[i].id, "method", "tool.call",
			    "params", "session", sid, "tool", "run_command", "args",
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
		usleep(800000);
		grss50 = rss_kib(gpid);
		for (i = 0; i < k; i++) {
			json_t	*resp;

			/* Wait for each answer, then close. */
			cs[i].len = 0;
			for (;;) {
				ssize_t	nr = read(cs[i].fd, cs[i].buf + cs[i].len,
				    sizeof cs[i].buf - cs[i].len);
				char	*nl;

				if (nr <= 0)
					break;
				cs[i].len += (size_t)nr;
				if ((nl = memchr(cs[i].buf, '\n', cs[i].len)) != NULL) {
					*nl = '\0';
					resp = json_loads(cs[i].buf, 0, NULL);
					if (resp != NULL && json_object_get(resp,
					    "id") != NULL) {
						json_decref(resp);
						break;
					}
					json_decref(resp);
					memmove(cs[i].buf, nl + 1, cs[i].len -
					    (size_t)(nl + 1 - cs[i].buf));
					cs[i].len -= (size_t)(nl + 1 - cs[i].buf);
				}
			}
			close(cs[i].fd);
		}
		json_decref(sl);
		printf("  %-40s %ld KiB idle, %ld KiB with %d children running "
		    "(%+ld KiB)\n", "gbrd VmRSS", grss0, grss50, k, grss50 - grss0);
	}
	json_decref(sess);
stop:
	close(c.fd);
	kill(gpid, SIGTERM);
	waitpid(gpid, NULL, 0);
out:
	json_decref(args);
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
	free(bare);
	free(run);
	free(tool);
	free(rpc);
	free(ping);
	(void)nrpc;
	return 0;
}
