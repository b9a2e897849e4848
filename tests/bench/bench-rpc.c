/*
 * bench-rpc: what one protocol request costs in the real daemon, printed
 * beside a floor measured in the same run on the same machine, and the goal
 * in tests/bench/README.md. It starts its own gbrd -f on a private socket and state
 * folder and prints:
 *
 *   - round trip of daemon.ping with one client, p50 and p99, beside a bare
 *     Unix-socket echo of the same line (a blocking echo server in a child
 *     process): once with the client, the echo server and gbrd pinned to one
 *     CPU (the goal: p50 within 1.5x of the floor), once unpinned;
 *   - throughput with many clients, each keeping requests in flight, beside
 *     the same load on the echo server (goal: 100k requests/s on 2 cores);
 *   - idle memory: gbrd's VmRSS right after start and with 1000 idle clients
 *     that said hello (bytes per client), and again after they left;
 *   - start-to-listening: from spawn to the first successful connect,
 *     median of several starts, beside spawn-to-exit of `gbrd --version`.
 *
 * It never fails for being slow: timings are figures to read, not
 * assertions. It exits non-zero only when it cannot run (gbrd does not
 * start, a reply is wrong). Linux only: /proc and sched_setaffinity.
 *
 * usage: bench-rpc [-n calls] [-c clients] [-d depth] [-t seconds]
 *	  [-s starts] [-i idle-clients] BUILD_DIR | PATH_TO_GBRD
 */
#include "gbr-config.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

extern char	**environ;

static const char PING[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.ping\"}\n";
static const char HELLO[] =
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"hello\","
    "\"params\":{\"protocol\":1,\"client\":\"bench-rpc/1\"}}\n";

/* The goals (tests/bench/README.md). */
#define GOAL_RTT_RATIO	1.5
#define GOAL_RPS	100000.0

static char		 bench_dir[] = "/tmp/gbr-bench.XXXXXX";
static char		 gbrd_path[PATH_MAX];
static char		 sock_path[sizeof ((struct sockaddr_un *)0)->sun_path];
static char		 echo_path[sizeof ((struct sockaddr_un *)0)->sun_path];
static char		 state_path[PATH_MAX];
static pid_t		 gbrd_pid = -1;
static pid_t		 echo_pid = -1;
static int		 have_dir;

/* Stops a child for good and reaps it. */
static void
reap(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		*pid = -1;
	}
}

/* nftw callback: removes one entry (what gbrd left: socket, lock, state). */
static int
remove_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* Stops the children and removes the temp folder, at exit. */
static void
atexit_cb(void)
{
	reap(&gbrd_pid);
	reap(&echo_pid);
	if (have_dir) {
		have_dir = 0;
		nftw(bench_dir, remove_cb, 16, FTW_DEPTH | FTW_PHYS);
	}
}

/*
 * A signal ends the run: stop the children with what is safe in a signal
 * handler (kill and _exit); the temp folder may stay behind.
 */
static void
signal_cb(int sig)
{
	(void)sig;
	if (gbrd_pid > 0)
		kill(gbrd_pid, SIGKILL);
	if (echo_pid > 0)
		kill(echo_pid, SIGKILL);
	_exit(1);
}

/* Prints an error and exits (the children are stopped by atexit_cb). */
static void __attribute__((noreturn, format(__printf__, 1, 2)))
die(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "bench-rpc: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Returns a monotonic clock in nanoseconds. */
static uint64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps for a number of milliseconds. */
static void
sleep_ms(long ms)
{
	struct timespec	ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Compares two uint64_t for qsort. */
static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Writes all of a buffer to a blocking socket. */
static int
write_all(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		if ((n = write(fd, buf, len)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Reads until the bytes read end with '\n' (one reply, nothing after it,
 * since one request is in flight). Returns the length, or -1.
 */
static ssize_t
read_reply(int fd, char *buf, size_t size)
{
	size_t	len = 0;
	ssize_t	n;

	do {
		if (len == size)
			return -1;
		if ((n = read(fd, buf + len, size - len)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		len += (size_t)n;
	} while (buf[len - 1] != '\n');
	return (ssize_t)len;
}

/* Connects to a Unix socket; returns the fd or -1. */
static int
connect_unix(const char *path)
{
	struct sockaddr_un	sa;
	int			fd;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa.sun_path)
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends one line and checks the reply is a result (not an error). */
static void
call_checked(int fd, const char *line, const char *what)
{
	char		 buf[16384];
	ssize_t		 n;
	json_t		*reply;
	json_error_t	 jerr;

	if (write_all(fd, line, strlen(line)) != 0 ||
	    (n = read_reply(fd, buf, sizeof buf)) < 0)
		die("%s: no reply: %s", what, strerror(errno));
	reply = json_loadb(buf, (size_t)n, 0, &jerr);
	if (reply == NULL || json_object_get(reply, "result") == NULL)
		die("%s: unexpected reply: %.*s", what, (int)n, buf);
	json_decref(reply);
}

/* Connects to gbrd and says hello; returns the fd. */
static int
gbrd_client(void)
{
	int	fd;

	if ((fd = connect_unix(sock_path)) == -1)
		die("connect %s: %s", sock_path, strerror(errno));
	call_checked(fd, HELLO, "hello");
	return fd;
}

/* Sets the CPU mask of every thread of a process (0: this thread). */
static void
pin_pid(pid_t pid, const cpu_set_t *set)
{
	char		 path[64];
	DIR		*d;
	struct dirent	*de;
	char		*end;
	long		 tid;

	if (pid == 0) {
		if (sched_setaffinity(0, sizeof *set, set) != 0)
			die("sched_setaffinity: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	if ((d = opendir(path)) == NULL)
		die("%s: %s", path, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		errno = 0;
		tid = strtol(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0' || tid <= 0)
			continue;
		/* A thread may exit meanwhile: only other errors count. */
		if (sched_setaffinity((pid_t)tid, sizeof *set, set) != 0 &&
		    errno != ESRCH)
			die("sched_setaffinity %ld: %s", tid, strerror(errno));
	}
	closedir(d);
}

/* Returns gbrd's VmRSS in KiB. */
static long
rss_kib(pid_t pid)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 kib = -1;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "VmRSS:", 6) == 0) {
			kib = strtol(line + 6, NULL, 10);
			break;
		}
	}
	fclose(f);
	if (kib < 0)
		die("no VmRSS in %s", path);
	return kib;
}

/* Spawns gbrd -f on the private socket; returns its pid. */
static pid_t
gbrd_spawn(void)
{
	char	*argv[] = { gbrd_path, "-f", "-s", sock_path, "-S", state_path,
		    "-l", "error", NULL };
	pid_t	 pid;
	int	 r;

	if ((r = posix_spawn(&pid, gbrd_path, NULL, NULL, argv, environ)) != 0)
		die("spawn %s: %s", gbrd_path, strerror(r));
	return pid;
}

/*
 * Waits until gbrd accepts a connection (it is then listening and its loop
 * runs). Returns the connected fd; dies if gbrd exits or takes over 10 s.
 */
static int
gbrd_wait(pid_t pid)
{
	uint64_t	deadline = now_ns() + 10000000000ull;
	int		fd, status;

	for (;;) {
		if ((fd = connect_unix(sock_path)) != -1)
			return fd;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			gbrd_pid = -1;
			die("gbrd exited during start (status %d)", status);
		}
		if (now_ns() > deadline)
			die("gbrd did not listen on %s within 10 s", sock_path);
		/* Poll finely (this is the time measured) but leave gbrd the CPU. */
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	}
}

/* Stops gbrd with SIGTERM (a clean shutdown) and reaps it. */
static void
gbrd_stop(void)
{
	uint64_t	deadline = now_ns() + 5000000000ull;

	if (gbrd_pid <= 0)
		return;
	kill(gbrd_pid, SIGTERM);
	while (waitpid(gbrd_pid, NULL, WNOHANG) != gbrd_pid) {
		if (now_ns() > deadline) {
			reap(&gbrd_pid);
			return;
		}
		sleep_ms(1);
	}
	gbrd_pid = -1;
}

/* Echo server thread: blocking read and write until the peer closes. */
static void *
echo_conn(void *arg)
{
	int	fd = (int)(intptr_t)arg;
	char	buf[65536];
	ssize_t	n;

	while ((n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (write_all(fd, buf, (size_t)n) != 0)
			break;
	}
	close(fd);
	return NULL;
}

/* Forks the floor: a bare echo server, one blocking thread per connection. */
static void
echo_start(void)
{
	struct sockaddr_un	sa;
	pthread_attr_t		attr;
	pthread_t		t;
	int			lfd, fd;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, echo_path, strlen(echo_path) + 1);
	if ((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(lfd, 128) != 0)
		die("echo server %s: %s", echo_path, strerror(errno));
	if ((echo_pid = fork()) == -1)
		die("fork: %s", strerror(errno));
	if (echo_pid != 0) {
		close(lfd);
		return;
	}
	/* The child: dies with the bench, never runs its atexit. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		if ((fd = accept(lfd, NULL, NULL)) == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			_exit(1);
		}
		if (pthread_create(&t, &attr, echo_conn, (void *)(intptr_t)fd) != 0)
			_exit(1);
	}
}

/* Round-trip figures. */
struct rtt {
	double	p50_us;
	double	p99_us;
};

/* Round trips are timed in blocks of this many, alternating the servers. */
#define RTT_BLOCK	500

/* Times one round trip of PING; dies on a reply of the wrong length. */
static uint64_t
rtt_one(int fd, size_t expect)
{
	char		 buf[4096];
	uint64_t	 t0 = now_ns();
	ssize_t		 got;

	if (write_all(fd, PING, strlen(PING)) != 0 ||
	    (got = read_reply(fd, buf, sizeof buf)) < 0)
		die("round trip: %s", strerror(errno));
	if ((size_t)got != expect)
		die("round trip: unexpected reply: %.*s", (int)got, buf);
	return now_ns() - t0;
}

/* Sorts samples and returns their p50 and p99. */
static struct rtt
rtt_stats(uint64_t *t, unsigned n)
{
	struct rtt	r;

	qsort(t, n, sizeof *t, cmp_u64);
	r.p50_us = (double)t[n / 2] / 1000.0;
	r.p99_us = (double)t[(size_t)n * 99 / 100] / 1000.0;
	return r;
}

/*
 * Times n round trips on gbrd and n on the echo floor, alternating blocks,
 * so that both see the same load from whatever else the machine runs.
 */
static void
rtt_measure(int dfd, size_t dexpect, int efd, uint64_t *td, uint64_t *te,
    unsigned n, struct rtt *d, struct rtt *e)
{
	unsigned	i, j;

	/* Warm up caches, the allocator and the scheduler's idea of us. */
	for (i = 0; i < 2000; i++) {
		rtt_one(dfd, dexpect);
		rtt_one(efd, strlen(PING));
	}
	for (i = 0; i < n; i += RTT_BLOCK) {
		for (j = i; j < n && j < i + RTT_BLOCK; j++)
			te[j] = rtt_one(efd, strlen(PING));
		for (j = i; j < n && j < i + RTT_BLOCK; j++)
			td[j] = rtt_one(dfd, dexpect);
	}
	*d = rtt_stats(td, n);
	*e = rtt_stats(te, n);
}

/* The length of gbrd's reply to PING. */
static size_t
ping_reply_len(int fd)
{
	char	buf[4096];
	ssize_t	n;

	if (write_all(fd, PING, strlen(PING)) != 0 ||
	    (n = read_reply(fd, buf, sizeof buf)) < 0)
		die("ping: %s", strerror(errno));
	if (memmem(buf, (size_t)n, "\"result\"", 8) == NULL)
		die("ping: unexpected reply: %.*s", (int)n, buf);
	return (size_t)n;
}

/* Prints one round-trip line: gbrd beside the echo floor. */
static void
rtt_print(const char *label, struct rtt d, struct rtt f, int goal)
{
	double	ratio = d.p50_us / f.p50_us;

	printf("rtt %-9s p50 %6.1fus p99 %6.1fus | floor p50 %6.1fus p99 %6.1fus"
	    " | ratio %.2f", label, d.p50_us, d.p99_us, f.p50_us, f.p99_us, ratio);
	if (goal)
		printf(" (goal <= %.1f) %s\n", GOAL_RTT_RATIO,
		    ratio <= GOAL_RTT_RATIO ? "met" : "NOT MET");
	else
		printf(" (no goal unpinned)\n");
}

/* One load client: a connection kept full of requests. */
struct loader {
	pthread_t		 thread;
	const char		*path;
	int			 hello;		/* gbrd needs hello first */
	unsigned		 depth;
	pthread_barrier_t	*start;
	atomic_int		*stop;
	_Atomic uint64_t	 replies;
	uint64_t		 bytes;
	int			 failed;
};

/* Load client thread: keeps depth requests in flight until told to stop. */
static void *
loader_run(void *arg)
{
	struct loader	*l = arg;
	char		*batch, buf[65536];
	size_t		 plen = strlen(PING), i;
	unsigned	 inflight, k;
	ssize_t		 n;
	int		 fd;

	if ((fd = connect_unix(l->path)) == -1) {
		l->failed = 1;
		pthread_barrier_wait(l->start);
		return NULL;
	}
	if (l->hello)
		call_checked(fd, HELLO, "hello");
	if ((batch = malloc(plen * l->depth)) == NULL)
		die("out of memory");
	for (i = 0; i < l->depth; i++)
		memcpy(batch + i * plen, PING, plen);
	pthread_barrier_wait(l->start);
	if (write_all(fd, batch, plen * l->depth) != 0)
		goto fail;
	inflight = l->depth;
	while (inflight > 0) {
		if ((n = read(fd, buf, sizeof buf)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			goto fail;
		}
		l->bytes += (size_t)n;
		for (k = 0, i = 0; i < (size_t)n; i++)
			k += buf[i] == '\n';
		inflight -= k;
		atomic_fetch_add_explicit(&l->replies, k, memory_order_relaxed);
		/* Refill what came back, in one write, unless stopping. */
		if (k > 0 && !atomic_load_explicit(l->stop, memory_order_relaxed)) {
			if (write_all(fd, batch, plen * k) != 0)
				goto fail;
			inflight += k;
		}
	}
	free(batch);
	close(fd);
	return NULL;
fail:
	l->failed = 1;
	free(batch);
	close(fd);
	return NULL;
}

/* Sums the replies counted so far. */
static uint64_t
loaders_sum(struct loader *l, unsigned n)
{
	uint64_t	sum = 0;
	unsigned	i;

	for (i = 0; i < n; i++)
		sum += atomic_load_explicit(&l[i].replies, memory_order_relaxed);
	return sum;
}

/* Runs the many-clients load against a server; returns requests/s. */
static double
throughput(const char *path, int hello, size_t reply_len, unsigned clients,
    unsigned depth, double seconds)
{
	struct loader		*l;
	pthread_barrier_t	 start;
	atomic_int		 stop = 0;
	uint64_t		 c0, c1, t0, t1, bytes = 0, replies = 0;
	unsigned		 i;

	if ((l = calloc(clients, sizeof *l)) == NULL)
		die("out of memory");
	pthread_barrier_init(&start, NULL, clients + 1);
	for (i = 0; i < clients; i++) {
		l[i].path = path;
		l[i].hello = hello;
		l[i].depth = depth;
		l[i].start = &start;
		l[i].stop = &stop;
		if (pthread_create(&l[i].thread, NULL, loader_run, &l[i]) != 0)
			die("pthread_create failed");
	}
	pthread_barrier_wait(&start);
	sleep_ms(300);		/* warm up */
	c0 = loaders_sum(l, clients);
	t0 = now_ns();
	sleep_ms((long)(seconds * 1000));
	c1 = loaders_sum(l, clients);
	t1 = now_ns();
	atomic_store(&stop, 1);
	for (i = 0; i < clients; i++) {
		pthread_join(l[i].thread, NULL);
		if (l[i].failed)
			die("load client %u failed on %s", i, path);
		bytes += l[i].bytes;
		replies += atomic_load(&l[i].replies);
	}
	/* Cheap check that every reply was a ping result, not an error. */
	if (bytes != replies * reply_len)
		die("%s: %llu reply bytes for %llu replies of %zu bytes", path,
		    (unsigned long long)bytes, (unsigned long long)replies,
		    reply_len);
	pthread_barrier_destroy(&start);
	free(l);
	return (double)(c1 - c0) * 1e9 / (double)(t1 - t0);
}

/* Median of a few doubles (sorts them). */
static double
median(double *v, unsigned n)
{
	unsigned	i, j;
	double		x;

	for (i = 1; i < n; i++) {
		for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
			x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Spawn to exit of `gbrd --version`: what any start costs (exec, libraries). */
static double
version_ms(void)
{
	char		*argv[] = { gbrd_path, "--version", NULL };
	posix_spawn_file_actions_t fa;
	uint64_t	 t0;
	pid_t		 pid;
	int		 r;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	t0 = now_ns();
	if ((r = posix_spawn(&pid, gbrd_path, &fa, NULL, argv, environ)) != 0)
		die("spawn %s: %s", gbrd_path, strerror(r));
	waitpid(pid, NULL, 0);
	posix_spawn_file_actions_destroy(&fa);
	return (double)(now_ns() - t0) / 1e6;
}

/* Raises this process's descriptor limit to its hard limit. */
static void
raise_nofile(unsigned need)
{
	struct rlimit	rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need + 64)
		die("the descriptor limit %llu is too low for %u clients",
		    (unsigned long long)rl.rlim_cur, need);
}

/* Parses a positive number option. */
static unsigned
number(const char *s, const char *what)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || v > 100000000)
		die("bad %s: %s", what, s);
	return (unsigned)v;
}

/* Starts a daemon and times it, keeping it running; returns ms. */
static double
start_once(void)
{
	uint64_t	t0 = now_ns();
	int		fd;

	gbrd_pid = gbrd_spawn();
	fd = gbrd_wait(gbrd_pid);
	close(fd);
	return (double)(now_ns() - t0) / 1e6;
}

int
main(int argc, char **argv)
{
	unsigned	 calls = 100000, clients = 16, depth = 32, starts = 7;
	unsigned	 idle = 1000, seconds = 3, i;
	double		*start_ms, *ver_ms, rps, floor_rps, start_med;
	cpu_set_t	 all, one;
	struct rtt	 d_pin, f_pin, d_free, f_free;
	struct stat	 sb;
	uint64_t	*t;
	size_t		 reply_len;
	long		 rss0, rss1, rss2;
	int		 ch, fd, efd, cpu, *idle_fd;

	while ((ch = getopt(argc, argv, "n:c:d:t:s:i:")) != -1) {
		switch (ch) {
		case 'n': calls = number(optarg, "-n"); break;
		case 'c': clients = number(optarg, "-c"); break;
		case 'd': depth = number(optarg, "-d"); break;
		case 't': seconds = number(optarg, "-t"); break;
		case 's': starts = number(optarg, "-s"); break;
		case 'i': idle = number(optarg, "-i"); break;
		default:
			fprintf(stderr, "usage: bench-rpc [-n calls] [-c clients] "
			    "[-d depth] [-t seconds] [-s starts] [-i idle-clients] "
			    "BUILD_DIR|GBRD\n");
			return 2;
		}
	}
	if (optind != argc - 1)
		die("usage: bench-rpc [options] BUILD_DIR|GBRD");
	if (stat(argv[optind], &sb) == 0 && S_ISDIR(sb.st_mode))
		snprintf(gbrd_path, sizeof gbrd_path, "%s/gbrd", argv[optind]);
	else
		snprintf(gbrd_path, sizeof gbrd_path, "%s", argv[optind]);
	if (access(gbrd_path, X_OK) != 0)
		die("%s: %s", gbrd_path, strerror(errno));

	if (mkdtemp(bench_dir) == NULL)
		die("mkdtemp: %s", strerror(errno));
	have_dir = 1;
	atexit(atexit_cb);
	signal(SIGINT, signal_cb);
	signal(SIGTERM, signal_cb);
	signal(SIGPIPE, SIG_IGN);
	snprintf(sock_path, sizeof sock_path, "%s/gbrd.sock", bench_dir);
	snprintf(echo_path, sizeof echo_path, "%s/echo.sock", bench_dir);
	snprintf(state_path, sizeof state_path, "%s/state", bench_dir);
	/* No user or system config: built-in defaults only. */
	setenv("XDG_CONFIG_HOME", bench_dir, 1);
	unsetenv("GBR_SOCKET");
	unsetenv("GBR_STATE_DIR");
	raise_nofile(idle > clients ? idle : clients);
	if (sched_getaffinity(0, sizeof all, &all) != 0)
		die("sched_getaffinity: %s", strerror(errno));
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &all); cpu++)
		;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	printf("bench-rpc: %s, %d CPUs online, %u calls, %u clients x %u in "
	    "flight\n", gbrd_path, (int)sysconf(_SC_NPROCESSORS_ONLN), calls,
	    clients, depth);
	fflush(stdout);
	/* Fork the echo server before any thread exists. */
	echo_start();

	/* Start-to-listening, then idle memory on the last daemon started. */
	if ((start_ms = calloc(starts, sizeof *start_ms)) == NULL ||
	    (ver_ms = calloc(starts, sizeof *ver_ms)) == NULL ||
	    (idle_fd = calloc(idle, sizeof *idle_fd)) == NULL ||
	    (t = calloc(2 * (size_t)calls, sizeof *t)) == NULL)
		die("out of memory");
	for (i = 0; i < starts; i++) {
		ver_ms[i] = version_ms();
		start_ms[i] = start_once();
		if (i + 1 < starts)
			gbrd_stop();
	}
	sleep_ms(50);
	rss0 = rss_kib(gbrd_pid);
	for (i = 0; i < idle; i++)
		idle_fd[i] = gbrd_client();
	sleep_ms(50);
	rss1 = rss_kib(gbrd_pid);
	for (i = 0; i < idle; i++)
		close(idle_fd[i]);
	/* Let the daemon see every close, then ask it something. */
	fd = gbrd_client();
	call_checked(fd, PING, "ping");
	close(fd);
	sleep_ms(50);
	rss2 = rss_kib(gbrd_pid);
	gbrd_stop();

	/* A fresh daemon for the round trips and the load. */
	gbrd_pid = gbrd_spawn();
	close(gbrd_wait(gbrd_pid));
	fd = gbrd_client();
	reply_len = ping_reply_len(fd);
	if ((efd = connect_unix(echo_path)) == -1)
		die("connect %s: %s", echo_path, strerror(errno));

	/* Pinned: the bench, the echo server and gbrd share one CPU. */
	pin_pid(0, &one);
	pin_pid(echo_pid, &one);
	pin_pid(gbrd_pid, &one);
	rtt_measure(fd, reply_len, efd, t, t + calls, calls, &d_pin, &f_pin);
	pin_pid(0, &all);
	pin_pid(echo_pid, &all);
	pin_pid(gbrd_pid, &all);
	rtt_measure(fd, reply_len, efd, t, t + calls, calls, &d_free, &f_free);
	close(efd);
	close(fd);
	rtt_print("pinned", d_pin, f_pin, 1);
	rtt_print("unpinned", d_free, f_free, 0);
	fflush(stdout);

	floor_rps = throughput(echo_path, 0, strlen(PING), clients, depth,
	    seconds);
	rps = throughput(sock_path, 1, reply_len, clients, depth, seconds);
	printf("throughput %ux%u %9.0f req/s | floor (echo) %9.0f req/s | "
	    "goal >= %.0f req/s %s\n", clients, depth, rps, floor_rps,
	    GOAL_RPS, rps >= GOAL_RPS ? "met" : "NOT MET");

	printf("memory idle rss %ld KiB at start, %ld KiB with %u idle clients "
	    "(%.0f bytes per client), %ld KiB after they left | no goal set\n",
	    rss0, rss1, idle, (double)(rss1 - rss0) * 1024.0 / idle, rss2);
	/* median() sorts, so the ends are the minimum and the maximum. */
	start_med = median(start_ms, starts);
	printf("start to listening median %.1f ms (min %.1f, max %.1f, %u "
	    "starts) | floor (gbrd --version, spawn to exit) median %.1f ms | "
	    "no goal set\n", start_med, start_ms[0], start_ms[starts - 1],
	    starts, median(ver_ms, starts));
	gbrd_stop();
	free(start_ms);
	free(ver_ms);
	free(idle_fd);
	free(t);
	return 0;
}
