/*
 * bench-llm: the agent's streaming relay in the real daemon, against the
 * goals in tests/bench/README.md. It starts its own gbrd -f on a private socket and
 * state folder, with gbrd.conf pointing the OpenAI-compatible provider at
 * a fake server inside this program (127.0.0.1, HTTP/1.1, chunked SSE),
 * and prints:
 *
 *   - relay latency per streamed chunk: the fake server stamps each SSE
 *     chunk with the monotonic time just before its write(2); an attached
 *     client reads the message.delta event gbrd made of it and takes the
 *     difference. One session, chunks paced apart so none waits behind
 *     another. The floor is the same stream read straight from the fake
 *     server by a plain TCP client in this program (the loopback hop gbrd
 *     itself pays on the way in), so "added" is what gbrd costs: curl,
 *     the SSE parser, the provider's JSON, the event's encoding and the
 *     Unix socket to the client. Floor and gbrd take turns, in -r rounds
 *     of a stream each, so both see the same load on the machine.
 *   - 50 sessions streaming at once: gbrd's CPU time per chunk relayed,
 *     its memory before, at the peak and after, and the latency under
 *     that load.
 *
 * Timings are figures to read, never assertions; it exits non-zero only
 * when it cannot run. Linux only (/proc, epoll).
 *
 * usage: bench-llm [-n chunks] [-r rounds] [-s sessions]
 *	  [-m chunks-per-session] BUILD_DIR | PATH_TO_GBRD
 */
#include "gbr-config.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
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

extern char	**environ;

#define GOAL_ADDED_P99_US	100.0

static const char HELLO[] =
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"hello\","
    "\"params\":{\"protocol\":1,\"client\":\"bench-llm/1\"}}\n";

static char		 bench_dir[] = "/tmp/gbr-llm.XXXXXX";
static char		 gbrd_path[PATH_MAX];
static char		 sock_path[sizeof ((struct sockaddr_un *)0)->sun_path];
static char		 state_path[PATH_MAX];
static char		 conf_path[PATH_MAX];
static char		 ws_path[PATH_MAX];
static pid_t		 gbrd_pid = -1;
static int		 have_dir;

/* The fake server. */
static int		 srv_fd;
static int		 srv_port;
static atomic_int	 srv_chunks = 2000;	/* chunks per stream */
static atomic_long	 srv_gap_us = 500;	/* between chunks */

/* Latencies collected by the readers, in microseconds. */
static double		*lat;
static atomic_long	 nlat;
static long		 maxlat;

/* Monotonic nanoseconds. */
static uint64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Removes one file of the bench folder. */
static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Stops gbrd and removes the folder. */
static void
cleanup(void)
{
	if (gbrd_pid > 0) {
		kill(gbrd_pid, SIGKILL);
		waitpid(gbrd_pid, NULL, 0);
		gbrd_pid = -1;
	}
	if (have_dir)
		nftw(bench_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	have_dir = 0;
}

/* Gives up: this run cannot go on. */
static void __attribute__((noreturn, format(__printf__, 1, 2)))
die(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fputs("bench-llm: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	cleanup();
	exit(1);
}

/* Writes all of buf; -1 if the peer went away. */
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

/* Reads one line (blocking). */
static size_t
read_line(int fd, char *buf, size_t size)
{
	size_t	len = 0;
	ssize_t	n;

	while (len + 1 < size) {
		if ((n = read(fd, buf + len, 1)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			die("read: %s", n == 0 ? "the daemon closed" : strerror(errno));
		}
		if (buf[len++] == '\n')
			break;
	}
	buf[len] = '\0';
	return len;
}

/* Sends a request line and reads lines until its reply comes back. */
static void
call(int fd, const char *line, const char *want, char *reply, size_t size)
{
	if (write_all(fd, line, strlen(line)) != 0)
		die("write: %s", strerror(errno));
	for (;;) {
		read_line(fd, reply, size);
		if (strstr(reply, "\"method\"") != NULL)
			continue;
		if (strstr(reply, "\"error\":{") != NULL)
			die("%s failed: %s", want, reply);
		return;
	}
}

/* Connects to gbrd and says hello. */
static int
client(void)
{
	struct sockaddr_un	sa;
	char			buf[4096];
	int			fd;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("connect %s: %s", sock_path, strerror(errno));
	call(fd, HELLO, "hello", buf, sizeof buf);
	return fd;
}

/* gbrd's VmRSS (or VmHWM) in KiB. */
static long
mem_kib(const char *key)
{
	char	 path[64], line[256];
	FILE	*f;
	long	 kib = -1;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)gbrd_pid);
	if ((f = fopen(path, "r")) == NULL)
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			kib = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return kib;
}

/* gbrd's CPU time (user + system) in microseconds. */
static double
cpu_us(void)
{
	char			 path[64], buf[1024], *p;
	unsigned long		 ut = 0, st = 0;
	FILE			*f;
	size_t			 n;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)gbrd_pid);
	if ((f = fopen(path, "r")) == NULL)
		die("%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		die("cannot read %s", path);
	return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* One streamed answer on a connection: chunked SSE, each chunk stamped. */
static void *
srv_conn(void *arg)
{
	int		 fd = (int)(intptr_t)arg, one = 1, i, n;
	char		 req[65536], ev[512], frame[600];
	size_t		 got = 0;
	ssize_t		 r;
	char		*end, *cl;
	long		 body = 0;
	static const char head[] = "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (;;) {
		/* Headers, then Content-Length bytes of body. */
		while ((end = memmem(req, got, "\r\n\r\n", 4)) == NULL) {
			if (got == sizeof req ||
			    (r = read(fd, req + got, sizeof req - got)) <= 0)
				goto out;
			got += (size_t)r;
		}
		req[end - req] = '\0';
		body = (cl = strcasestr(req, "content-length:")) != NULL ?
		    strtol(cl + 15, NULL, 10) : 0;
		got -= (size_t)(end + 4 - req);
		memmove(req, end + 4, got);
		while ((long)got < body) {
			r = read(fd, req, sizeof req);
			if (r <= 0)
				goto out;
			body -= r;
		}
		got = 0;
		if (write_all(fd, head, sizeof head - 1) != 0)
			goto out;
		n = atomic_load(&srv_chunks);
		for (i = 0; i < n; i++) {
			int	len = snprintf(ev, sizeof ev, "data: {\"id\":\"c\","
			    "\"object\":\"chat.completion.chunk\",\"choices\":[{"
			    "\"index\":0,\"delta\":{\"content\":\"<%d:%llu>\"},"
			    "\"finish_reason\":null}]}\n\n", i,
			    (unsigned long long)now_ns());
			int	flen = snprintf(frame, sizeof frame, "%x\r\n%s\r\n",
			    len, ev);

			if (write_all(fd, frame, (size_t)flen) != 0)
				goto out;
			if (atomic_load(&srv_gap_us) > 0)
				nanosleep(&(struct timespec){ 0,
				    atomic_load(&srv_gap_us) * 1000 }, NULL);
		}
		snprintf(ev, sizeof ev, "data: {\"choices\":[{\"index\":0,"
		    "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
		snprintf(frame, sizeof frame, "%zx\r\n%s\r\n0\r\n\r\n", strlen(ev),
		    ev);
		if (write_all(fd, frame, strlen(frame)) != 0)
			goto out;
	}
out:
	close(fd);
	return NULL;
}

/* Accepts connections to the fake server. */
static void *
srv_accept(void *arg)
{
	pthread_t	t;
	int		fd;

	for (;;) {
		if ((fd = accept(srv_fd, NULL, NULL)) == -1) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pthread_create(&t, NULL, srv_conn, (void *)(intptr_t)fd) != 0)
			die("pthread_create");
		pthread_detach(t);
	}
}

/* Starts the fake server on 127.0.0.1. */
static void
srv_start(void)
{
	struct sockaddr_in	sa;
	socklen_t		len = sizeof sa;
	pthread_t		t;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((srv_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(srv_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(srv_fd, 256) != 0 ||
	    getsockname(srv_fd, (struct sockaddr *)&sa, &len) != 0)
		die("fake server: %s", strerror(errno));
	srv_port = ntohs(sa.sin_port);
	if (pthread_create(&t, NULL, srv_accept, NULL) != 0)
		die("pthread_create");
	pthread_detach(t);
}

/* Notes the latency of every stamped chunk "<i:ns>" in a piece of text. */
static void
stamp_scan(const char *s, uint64_t t)
{
	const char		*p = s;
	unsigned long long	 ns;
	long			 k;

	while ((p = strchr(p, '<')) != NULL) {
		if (sscanf(p, "<%*d:%llu>", &ns) == 1 && ns > 0 && t >= ns) {
			k = atomic_fetch_add(&nlat, 1);
			if (k < maxlat)
				lat[k] = (double)(t - ns) / 1000.0;
		}
		p++;
	}
}

/* The floor: the stream read straight from the fake server. */
static void
floor_run(void)
{
	struct sockaddr_in	 sa;
	char			 buf[65536], req[256];
	ssize_t			 r;
	int			 fd, one = 1;
	size_t			 len;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)srv_port);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("floor connect: %s", strerror(errno));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	len = (size_t)snprintf(req, sizeof req, "POST /v1/chat/completions "
	    "HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
	write_all(fd, req, len);
	for (;;) {
		r = read(fd, buf, sizeof buf - 1);
		if (r <= 0)
			break;
		buf[r] = '\0';
		stamp_scan(buf, now_ns());
		if (strstr(buf, "[DONE]") != NULL)
			break;
	}
	close(fd);
}

/* Sorts doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The p-th percentile of a sorted array. */
static double
pct(const double *v, size_t n, double p)
{
	size_t	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);

	return n == 0 ? 0 : v[i < n ? i : n - 1];
}

/* Sorts what was collected and returns how many. */
static size_t
lat_sorted(void)
{
	size_t	n = (size_t)atomic_load(&nlat);

	if (n > (size_t)maxlat)
		n = (size_t)maxlat;
	qsort(lat, n, sizeof *lat, cmp_double);
	return n;
}

/*
 * Moves what was collected to the end of v (n so far, room for cap);
 * returns the new n.
 */
static size_t
lat_take(double *v, size_t n, size_t cap)
{
	size_t	k = (size_t)atomic_load(&nlat);

	if (k > (size_t)maxlat)
		k = (size_t)maxlat;
	if (k > cap - n)
		k = cap - n;
	memcpy(v + n, lat, k * sizeof *lat);
	atomic_store(&nlat, 0);
	return n + k;
}

/* Starts gbrd and waits until it answers. */
static void
gbrd_start(void)
{
	char		*argv[] = { gbrd_path, "-f", "-s", sock_path, "-S", state_path,
			    "-c", conf_path, "-l", "error", NULL };
	uint64_t	 deadline = now_ns() + 60000000000ull;
	int		 r, fd, status;

	unsetenv("GBR_TEST_TURN_MS");
	setenv("OPENAI_API_KEY", "bench-key", 1);
	if ((r = posix_spawn(&gbrd_pid, gbrd_path, NULL, NULL, argv, environ)) != 0)
		die("spawn %s: %s", gbrd_path, strerror(r));
	for (;;) {
		struct sockaddr_un	sa;

		memset(&sa, 0, sizeof sa);
		sa.sun_family = AF_UNIX;
		memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd != -1 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
			close(fd);
			return;
		}
		if (fd != -1)
			close(fd);
		if (waitpid(gbrd_pid, &status, WNOHANG) == gbrd_pid) {
			gbrd_pid = -1;
			die("gbrd exited during start (status %d)", status);
		}
		if (now_ns() > deadline)
			die("gbrd did not listen within 60 s");
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
}

/* A session attached on its own connection; returns the connection. */
static int
session_open(int i, char *sid, size_t size)
{
	char	line[8192], reply[65536], *p;
	int	fd = client();

	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"session.create\",\"params\":{\"workspace\":\"%s\",\"name\":"
	    "\"b%d\"}}\n", ws_path, i);
	call(fd, line, "session.create", reply, sizeof reply);
	if ((p = strstr(reply, "\"id\":\"")) == NULL)
		die("no session id: %s", reply);
	snprintf(sid, size, "%.12s", p + 6);
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"session.attach\",\"params\":{\"session\":\"%s\"}}\n", sid);
	call(fd, line, "session.attach", reply, sizeof reply);
	return fd;
}

/* Starts a turn (the reply is read later with the events). */
static void
session_send(int fd, const char *sid)
{
	char	line[512];

	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
	    "\"session.send\",\"params\":{\"session\":\"%s\",\"text\":"
	    "\"stream please\"}}\n", sid);
	if (write_all(fd, line, strlen(line)) != 0)
		die("send: %s", strerror(errno));
}

/*
 * Reads the events of n connections until each has seen its turn end,
 * noting the latency of every delta; samples gbrd's memory meanwhile.
 */
static void
relay_read(int *fds, int n, long *peak_kib)
{
	struct epoll_event	 ev, evs[64];
	char			**pend, buf[1 << 16], *line, *nl;
	size_t			*plen, cap = 1 << 20;
	uint64_t		 t, next_sample = 0;
	int			 ep, i, k, left = n, *done;
	ssize_t			 r;
	long			 kib;

	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
		die("epoll_create1: %s", strerror(errno));
	pend = calloc((size_t)n, sizeof *pend);
	plen = calloc((size_t)n, sizeof *plen);
	done = calloc((size_t)n, sizeof *done);
	for (i = 0; i < n; i++) {
		pend[i] = malloc(cap);
		ev.events = EPOLLIN;
		ev.data.u32 = (uint32_t)i;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	while (left > 0) {
		k = epoll_wait(ep, evs, 64, 100);
		for (i = 0; i < k; i++) {
			int	ci = (int)evs[i].data.u32;

			r = read(fds[ci], buf, sizeof buf);
			t = now_ns();
			if (r <= 0)
				die("gbrd closed a client");
			if (plen[ci] + (size_t)r > cap)
				die("a line longer than %zu bytes", cap);
			memcpy(pend[ci] + plen[ci], buf, (size_t)r);
			plen[ci] += (size_t)r;
			line = pend[ci];
			while ((nl = memchr(line, '\n', plen[ci] -
			    (size_t)(line - pend[ci]))) != NULL) {
				*nl = '\0';
				if (strstr(line, "\"message.delta\"") != NULL)
					stamp_scan(line, t);
				else if (strstr(line, "\"session.state\"") != NULL &&
				    strstr(line, "\"state\":\"idle\"") != NULL &&
				    !done[ci]) {
					if (strstr(line, "\"completed\"") == NULL)
						die("a turn did not complete: %s", line);
					done[ci] = 1;
					left--;
				} else if (strstr(line, "\"type\":\"error\"") != NULL)
					die("the turn failed: %s", line);
				line = nl + 1;
			}
			plen[ci] -= (size_t)(line - pend[ci]);
			memmove(pend[ci], line, plen[ci]);
		}
		if (peak_kib != NULL && now_ns() >= next_sample) {
			if ((kib = mem_kib("VmRSS:")) > *peak_kib)
				*peak_kib = kib;
			next_sample = now_ns() + 50000000ull;
		}
	}
	for (i = 0; i < n; i++)
		free(pend[i]);
	free(pend);
	free(plen);
	free(done);
	close(ep);
}

/* Parses a positive number option. */
static long
number(const char *s, const char *opt, long max)
{
	char	*end;
	long	 v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > max) {
		fprintf(stderr, "bench-llm: %s takes 1 to %ld\n", opt, max);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	long		 chunks = 2000, rounds = 10, sessions = 50, per = 400;
	long		 kib0, kib1, peak, k;
	double		 f50, f99, g50, g99, l50, l99, cpu0, cpu1, *fl, *gl;
	char		 sid[32], (*sids)[32];
	int		 ch, fd, *fds, i;
	size_t		 n, nf = 0, ng = 0;
	uint64_t	 t0, t1;
	FILE		*f;
	struct stat	 sb;

	while ((ch = getopt(argc, argv, "n:r:s:m:")) != -1) {
		switch (ch) {
		case 'n': chunks = number(optarg, "-n", 1000000); break;
		case 'r': rounds = number(optarg, "-r", 1000); break;
		case 's': sessions = number(optarg, "-s", 1000); break;
		case 'm': per = number(optarg, "-m", 1000000); break;
		default:
			fprintf(stderr, "usage: bench-llm [-n chunks] [-r rounds] "
			    "[-s sessions] [-m chunks-per-session] BUILD_DIR|GBRD\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: bench-llm [-n chunks] [-r rounds] "
		    "[-s sessions] [-m chunks-per-session] BUILD_DIR|GBRD\n");
		return 2;
	}
	if (stat(argv[optind], &sb) == 0 && S_ISDIR(sb.st_mode))
		snprintf(gbrd_path, sizeof gbrd_path, "%s/gbrd", argv[optind]);
	else
		snprintf(gbrd_path, sizeof gbrd_path, "%s", argv[optind]);
	if (access(gbrd_path, X_OK) != 0)
		die("%s: %s", gbrd_path, strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(bench_dir) == NULL)
		die("mkdtemp: %s", strerror(errno));
	have_dir = 1;
	snprintf(sock_path, sizeof sock_path, "%s/s", bench_dir);
	snprintf(state_path, sizeof state_path, "%s/state", bench_dir);
	snprintf(conf_path, sizeof conf_path, "%s/gbrd.conf", bench_dir);
	snprintf(ws_path, sizeof ws_path, "%s/ws", bench_dir);
	if (mkdir(ws_path, 0700) != 0)
		die("mkdir: %s", strerror(errno));
	if (rounds > chunks)
		rounds = chunks;
	maxlat = chunks > sessions * per ? chunks : sessions * per;
	if ((lat = calloc((size_t)maxlat, sizeof *lat)) == NULL ||
	    (fl = calloc((size_t)chunks, sizeof *fl)) == NULL ||
	    (gl = calloc((size_t)chunks, sizeof *gl)) == NULL)
		die("out of memory");

	srv_start();
	if ((f = fopen(conf_path, "w")) == NULL)
		die("%s: %s", conf_path, strerror(errno));
	fprintf(f, "[llm]\nprovider = openai\nbase_url = http://127.0.0.1:%d/v1\n"
	    "ollama_url = off\n[log]\nfsync = no\n[session]\n"
	    "history_bytes = 256M\n", srv_port);
	fclose(f);
	gbrd_start();

	/*
	 * 1. Latency, one session, chunks paced 500 us apart: a stream read
	 * straight (the floor), then a turn through gbrd, round after round.
	 */
	atomic_store(&srv_gap_us, 500);
	fd = session_open(0, sid, sizeof sid);
	for (k = 0; k < rounds; k++) {
		atomic_store(&srv_chunks, (int)(chunks / rounds +
		    (k < chunks % rounds)));
		atomic_store(&nlat, 0);
		floor_run();
		nf = lat_take(fl, nf, (size_t)chunks);
		session_send(fd, sid);
		relay_read(&fd, 1, NULL);
		ng = lat_take(gl, ng, (size_t)chunks);
	}
	close(fd);
	qsort(fl, nf, sizeof *fl, cmp_double);
	qsort(gl, ng, sizeof *gl, cmp_double);
	f50 = pct(fl, nf, 50);
	f99 = pct(fl, nf, 99);
	g50 = pct(gl, ng, 50);
	g99 = pct(gl, ng, 99);
	free(fl);
	free(gl);
	printf("relay latency per chunk (%zu chunks, one session, 500 us apart; "
	    "floor and gbrd in turn, %ld rounds)\n", ng, rounds);
	printf("  floor (fake server -> TCP client):   p50 %7.1f us  p99 %7.1f us\n",
	    f50, f99);
	printf("  gbrd (fake server -> attached client): p50 %7.1f us  p99 %7.1f us\n",
	    g50, g99);
	/*
	 * A floor whose p99 is above gbrd's (whose path holds the floor's
	 * hop) or above a millisecond saw the machine stall: the difference
	 * says nothing then.
	 */
	printf("  added by gbrd:                       p50 %7.1f us  p99 %7.1f us"
	    "  (goal: p99 < %.0f us: %s)\n", g50 - f50, g99 - f99,
	    GOAL_ADDED_P99_US, f99 > 1000.0 || g99 < f99 ?
	    "not judged, the floor stalled: run again" :
	    g99 - f99 < GOAL_ADDED_P99_US ? "met" : "NOT met");

	/* 2. Many sessions streaming at once. */
	atomic_store(&srv_chunks, (int)per);
	atomic_store(&srv_gap_us, 5000);
	atomic_store(&nlat, 0);
	fds = calloc((size_t)sessions, sizeof *fds);
	sids = calloc((size_t)sessions, sizeof *sids);
	for (i = 0; i < sessions; i++)
		fds[i] = session_open(i + 1, sids[i], sizeof sids[i]);
	sleep(1);
	kib0 = mem_kib("VmRSS:");
	peak = kib0;
	cpu0 = cpu_us();
	t0 = now_ns();
	for (i = 0; i < sessions; i++)
		session_send(fds[i], sids[i]);
	relay_read(fds, (int)sessions, &peak);
	t1 = now_ns();
	cpu1 = cpu_us();
	kib1 = mem_kib("VmRSS:");
	n = lat_sorted();
	l50 = pct(lat, n, 50);
	l99 = pct(lat, n, 99);
	printf("%ld sessions streaming at once (%ld chunks each, 5 ms apart, "
	    "%zu chunks in %.2f s)\n", sessions, per, n,
	    (double)(t1 - t0) / 1e9);
	printf("  gbrd CPU: %.0f ms in all, %.1f us per chunk relayed, %.0f%% "
	    "of one CPU\n", (cpu1 - cpu0) / 1000.0, (cpu1 - cpu0) /
	    (double)(n > 0 ? n : 1), (cpu1 - cpu0) / ((double)(t1 - t0) / 1000.0)
	    * 100.0);
	printf("  gbrd memory (VmRSS): %ld KiB before, %ld KiB at the peak "
	    "(+%ld KiB, %.1f KiB per streaming session), %ld KiB after\n",
	    kib0, peak, peak - kib0, (double)(peak - kib0) / (double)sessions,
	    kib1);
	printf("  latency under load: p50 %.1f us  p99 %.1f us\n", l50, l99);
	for (i = 0; i < sessions; i++)
		close(fds[i]);
	free(fds);
	free(sids);
	kill(gbrd_pid, SIGTERM);
	waitpid(gbrd_pid, NULL, 0);
	gbrd_pid = -1;
	free(lat);
	cleanup();
	return 0;
}
