/*
 * bench-search: how long one big search stalls gbrd's loop. It starts its
 * own gbrd -f on a private socket and state folder, makes a workspace of
 * source-like files (20,000 of about 5 KiB, 100 to a folder), then, for a
 * few searches, sends the tool.call on one connection and pings the daemon
 * (daemon.ping, one at a time) on a second one until the search's reply
 * arrives. The worst ping is the longest the loop kept another client
 * waiting; it is printed beside the search's own duration, and beside the
 * same pings with no search running (the floor). Figures to read, not
 * assertions: it exits non-zero only when it cannot run.
 *
 * usage: bench-search [-n files] [-r rounds] BUILD_DIR | PATH_TO_GBRD
 */
#include "gbr-config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A connection and what was read from it but not yet used. */
struct peer {
	int	 fd;
	char	*buf;
	size_t	 len;
	size_t	 cap;
};

/* Takes the next complete line (NUL-terminated in place), or NULL. */
static char *
peer_line(struct peer *p, size_t *used)
{
	char	*nl;

	if ((nl = memchr(p->buf, '\n', p->len)) == NULL)
		return NULL;
	*nl = '\0';
	*used = (size_t)(nl - p->buf) + 1;
	return p->buf;
}

/* Forgets a line taken with peer_line. */
static void
peer_drop(struct peer *p, size_t used)
{
	memmove(p->buf, p->buf + used, p->len - used);
	p->len -= used;
}

/* Reads what is there (blocking if block). Returns -1 at the end. */
static int
peer_read(struct peer *p, int block)
{
	ssize_t	n;

	if (p->cap - p->len < 65536) {
		p->cap = p->cap == 0 ? 1 << 20 : p->cap * 2;
		if ((p->buf = realloc(p->buf, p->cap)) == NULL)
			return -1;
	}
	n = recv(p->fd, p->buf + p->len, p->cap - p->len, block ? 0 :
	    MSG_DONTWAIT);
	if (n < 0 && !block && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0)
		return -1;
	p->len += (size_t)n;
	return 0;
}

/*
 * Waits (blocking) for the reply holding idtag; copies it to out if asked.
 * Events and other lines are skipped.
 */
static int
peer_wait(struct peer *p, const char *idtag, char *out, size_t outsz)
{
	size_t	 used;
	char	*l;
	int	 hit;

	for (;;) {
		while ((l = peer_line(p, &used)) != NULL) {
			hit = strstr(l, idtag) != NULL &&
			    strstr(l, "\"method\"") == NULL;
			if (hit && out != NULL)
				snprintf(out, outsz, "%s", l);
			peer_drop(p, used);
			if (hit)
				return 0;
		}
		if (peer_read(p, 1) != 0)
			return -1;
	}
}

/* Sends a line and waits for its reply. */
static int
peer_call(struct peer *p, const char *line, const char *idtag, char *out,
    size_t outsz)
{
	if (write(p->fd, line, strlen(line)) != (ssize_t)strlen(line))
		return -1;
	return peer_wait(p, idtag, out, outsz);
}

static double
now_us(void)
{
	struct timespec	t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Occurrences of what in s. */
static int
count(const char *s, const char *what)
{
	int	n = 0;

	while ((s = strstr(s, what)) != NULL) {
		n++;
		s += strlen(what);
	}
	return n;
}

/* nftw callback: removes one entry of the workspace. */
static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int
cmp_d(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static const char ping[] =
    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"daemon.ping\"}\n";

/* One ping round trip on p, in microseconds, or -1. */
static double
ping_once(struct peer *p)
{
	double	t0 = now_us();

	if (peer_call(p, ping, "\"id\":9", NULL, 0) != 0)
		return -1;
	return now_us() - t0;
}

/* Prints p50, p99 and the worst of n latencies (sorted in place). */
static void
print_lat(const char *what, double *lat, size_t n)
{
	qsort(lat, n, sizeof *lat, cmp_d);
	printf("  %-28s %6zu pings: p50 %7.0f us, p99 %7.0f us, worst %7.0f us\n",
	    what, n, lat[n / 2], lat[n * 99 / 100], lat[n - 1]);
}

/* Writes n source-like files of about 5 KiB under ws/src, 100 to a folder. */
static int
make_tree(const char *ws, int n)
{
	static const char *const words[] = { "int", "char", "void", "return",
	    "static", "struct", "const", "size_t", "json_t", "buf", "len",
	    "count", "index", "value", "result", "error", "cause", "free",
	    "malloc", "strlen", "memcpy", "if", "else", "for", "while" };
	char		 path[1024], line[256];
	unsigned	 seed = 7;
	FILE		*f;
	int		 i, l, w, k, o;

	snprintf(path, sizeof path, "%s/src", ws);
	mkdir(path, 0700);
	for (i = 0; i < n; i++) {
		if (i % 100 == 0) {
			snprintf(path, sizeof path, "%s/src/m%03d", ws, i / 100);
			mkdir(path, 0700);
		}
		snprintf(path, sizeof path, "%s/src/m%03d/f%05d.c", ws, i / 100,
		    i);
		if ((f = fopen(path, "w")) == NULL)
			return -1;
		for (l = 0; l < 110; l++) {
			seed = seed * 1103515245 + 12345;
			o = snprintf(line, sizeof line, "%.*s", (int)(seed >> 16) %
			    4, "\t\t\t");
			w = 2 + (int)((seed >> 8) % 8);
			for (k = 0; k < w; k++) {
				seed = seed * 1103515245 + 12345;
				o += snprintf(line + o, sizeof line - (size_t)o,
				    "%s%s", k > 0 ? " " : "", words[(seed >> 16) %
				    (sizeof words / sizeof words[0])]);
			}
			fprintf(f, "%s(%s_%u);\n", line, words[(seed >> 4) % 25],
			    (seed >> 20) % 1000);
		}
		if (fclose(f) != 0)
			return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const char *const searches[][2] = {
		{ "no_such_name_anywhere", "a literal, in no file" },
		{ "(count|index)_9[0-9]\\\\)", "a regex, up to 1000 matches" },
		{ "[a-z]+_[0-9]+x", "a regex, no literal, no match" },
	};
	char		 dir[] = "/tmp/gbrbench-XXXXXX", gbrd[4096], sock[96];
	char		 state[512], ws[512], path[600], line[2048], reply[8192];
	char		 sid[64], *p, *envp[8], tag[32], *l;
	struct sockaddr_un sun;
	struct stat	 sb;
	struct peer	 a = { -1, NULL, 0, 0 }, b = { -1, NULL, 0, 0 };
	double		*lat, t0, dur, d;
	size_t		 nlat, cap = 1 << 20, used;
	pid_t		 pid;
	int		 nfiles = 20000, rounds = 3, ch, tries, st, r, s, id = 100;
	int		 done, i;

	while ((ch = getopt(argc, argv, "n:r:")) != -1) {
		if (ch == 'n')
			nfiles = (int)strtol(optarg, NULL, 10);
		else if (ch == 'r')
			rounds = (int)strtol(optarg, NULL, 10);
		else
			return 2;
	}
	if (optind >= argc || nfiles < 1 || rounds < 1) {
		fprintf(stderr, "usage: bench-search [-n files] [-r rounds] "
		    "BUILD_DIR|GBRD\n");
		return 2;
	}
	if (stat(argv[optind], &sb) == 0 && S_ISDIR(sb.st_mode))
		snprintf(gbrd, sizeof gbrd, "%s/gbrd", argv[optind]);
	else
		snprintf(gbrd, sizeof gbrd, "%s", argv[optind]);
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(sock, sizeof sock, "%s/run/gbrd.sock", dir);
	snprintf(state, sizeof state, "%s/state", dir);
	snprintf(ws, sizeof ws, "%s/ws", dir);
	snprintf(path, sizeof path, "%s/run", dir);
	mkdir(path, 0700);
	mkdir(ws, 0700);
	t0 = now_us();
	if (make_tree(ws, nfiles) != 0) {
		fprintf(stderr, "bench-search: cannot write the workspace\n");
		return 1;
	}
	printf("workspace: %d files, written in %.1f s\n", nfiles,
	    (now_us() - t0) / 1e6);
	envp[0] = (char *)"PATH=/usr/bin:/bin";
	snprintf(line, sizeof line, "GBR_SOCKET=%s", sock);
	envp[1] = strdup(line);
	snprintf(line, sizeof line, "GBR_STATE_DIR=%s", state);
	envp[2] = strdup(line);
	snprintf(line, sizeof line, "XDG_CONFIG_HOME=%s", dir);
	envp[3] = strdup(line);
	envp[4] = NULL;
	{
		char *args[] = { gbrd, (char *)"-f", (char *)"-l", (char *)"warn",
		    NULL };
		if (posix_spawn(&pid, gbrd, NULL, NULL, args, envp) != 0) {
			fprintf(stderr, "bench-search: cannot start %s\n", gbrd);
			return 1;
		}
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock);
	for (i = 0; i < 2; i++) {
		struct peer	*q = i == 0 ? &a : &b;

		for (tries = 0; tries < 500; tries++) {
			q->fd = socket(AF_UNIX, SOCK_STREAM, 0);
			if (connect(q->fd, (struct sockaddr *)&sun, sizeof sun) == 0)
				break;
			close(q->fd);
			q->fd = -1;
			usleep(20000);
		}
		if (q->fd == -1 || peer_call(q, "{\"jsonrpc\":\"2.0\",\"id\":1,"
		    "\"method\":\"hello\",\"params\":{\"protocol\":1,\"client\":"
		    "\"bench-search/1\"}}\n", "\"id\":1", NULL, 0) != 0)
			goto fail;
	}
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"session.create\",\"params\":{\"workspace\":\"%s\"}}\n", ws);
	if (peer_call(&a, line, "\"id\":2", reply, sizeof reply) != 0 ||
	    (p = strstr(reply, "\"id\":\"")) == NULL)
		goto fail;
	snprintf(sid, sizeof sid, "%.12s", p + 6);
	if ((lat = calloc(cap, sizeof *lat)) == NULL)
		goto fail;

	/* The floor: pings with nothing else running. */
	for (i = 0; i < 2000; i++)
		if ((lat[i] = ping_once(&b)) < 0)
			goto fail;
	print_lat("no search (floor)", lat, 2000);

	for (r = 0; r < rounds; r++) {
		for (s = 0; s < (int)(sizeof searches / sizeof searches[0]); s++) {
			snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%d,"
			    "\"method\":\"tool.call\",\"params\":{\"session\":"
			    "\"%s\",\"tool\":\"search\",\"args\":{\"pattern\":"
			    "\"%s\",\"max_results\":1000}}}\n", ++id, sid,
			    searches[s][0]);
			snprintf(tag, sizeof tag, "\"id\":%d,", id);
			t0 = now_us();
			if (write(a.fd, line, strlen(line)) != (ssize_t)strlen(line))
				goto fail;
			nlat = 0;
			done = 0;
			dur = 0;
			while (!done) {
				if ((d = ping_once(&b)) < 0)
					goto fail;
				if (nlat < cap)
					lat[nlat++] = d;
				if (peer_read(&a, 0) != 0)
					goto fail;
				while ((l = peer_line(&a, &used)) != NULL) {
					if (strstr(l, tag) != NULL &&
					    strstr(l, "\"method\"") == NULL) {
						dur = now_us() - t0;
						done = 1;
						snprintf(reply, sizeof reply,
						    "%d matches, %ld files%s",
						    count(l, "\"line\":"), (p =
						    strstr(l, "\"files_scanned\":"))
						    != NULL ? strtol(p + 16, NULL,
						    10) : -1L, strstr(l,
						    "\"truncated_reason\":\"time")
						    != NULL ? ", stopped at its 3 s" :
						    "");
					}
					peer_drop(&a, used);
				}
			}
			printf("round %d, %s: search %.0f ms (%s)\n", r + 1,
			    searches[s][1], dur / 1e3, reply);
			print_lat("pings while it ran", lat, nlat);
		}
	}
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	/* The workspace is big; the state folder stays for inspection. */
	(void)nftw(ws, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	printf("(state left in %s)\n", dir);
	return 0;
fail:
	fprintf(stderr, "bench-search: the daemon did not answer as expected\n");
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return 1;
}
