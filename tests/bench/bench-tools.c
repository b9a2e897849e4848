/*
 * bench-tools: read_file of a 1 KiB file through the protocol (tool.call
 * on a real gbrd, with its sandbox checks and session records), p50 and
 * p99 beside its goals (p50 under 15 us, p99 under 50 us). It
 * starts its own gbrd -f on a private socket and state folder. Figures to
 * read, not assertions: it exits non-zero only when it cannot run.
 *
 * usage: bench-tools [-n calls] BUILD_DIR | PATH_TO_GBRD
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

extern char	**environ;

static char	 rbuf[1 << 20];
static size_t	 rlen;

/* Sends a request and waits for the line holding its id. */
static int
call(int fd, const char *line, const char *idtag, char *out, size_t outsz)
{
	char	*nl;
	ssize_t	 n;

	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		return -1;
	for (;;) {
		if ((nl = memchr(rbuf, '\n', rlen)) != NULL) {
			size_t used = (size_t)(nl - rbuf) + 1;
			int hit = memmem(rbuf, used, idtag, strlen(idtag)) != NULL &&
			    memmem(rbuf, used, "\"method\"", 8) == NULL;

			if (hit && out != NULL)
				snprintf(out, outsz, "%.*s", (int)used, rbuf);
			memmove(rbuf, nl + 1, rlen - used);
			rlen -= used;
			if (hit)
				return 0;
			continue;
		}
		if ((n = read(fd, rbuf + rlen, sizeof rbuf - rlen)) <= 0)
			return -1;
		rlen += (size_t)n;
	}
}

static int
cmp_d(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	char		 dir[] = "/tmp/gbrbench-XXXXXX", gbrd[4096], sock[96];
	char		 state[512], ws[512], file[600], line[2048], reply[4096];
	char		 sid[64], *p, *envp[8], data[1024];
	struct sockaddr_un sun;
	struct timespec	 t0, t1;
	struct stat	 sb;
	double		*lat;
	pid_t		 pid;
	int		 fd = -1, i, n = 20000, ch, tries, st;
	FILE		*f;

	while ((ch = getopt(argc, argv, "n:")) != -1) {
		if (ch == 'n')
			n = (int)strtol(optarg, NULL, 10);
		else
			return 2;
	}
	if (optind >= argc || n < 100) {
		fprintf(stderr, "usage: bench-tools [-n calls] BUILD_DIR|GBRD\n");
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
	snprintf(file, sizeof file, "%s/run", dir);
	mkdir(file, 0700);
	mkdir(ws, 0700);
	snprintf(file, sizeof file, "%s/ws/one-kib.txt", dir);
	memset(data, 'a', sizeof data);
	for (i = 63; i < (int)sizeof data; i += 64)
		data[i] = '\n';
	if ((f = fopen(file, "w")) == NULL || fwrite(data, 1, sizeof data, f) !=
	    sizeof data || fclose(f) != 0)
		return 1;
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
			fprintf(stderr, "bench-tools: cannot start %s\n", gbrd);
			return 1;
		}
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock);
	for (tries = 0; tries < 500; tries++) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(20000);
	}
	if (fd == -1)
		goto fail;
	if (call(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\","
	    "\"params\":{\"protocol\":1,\"client\":\"bench-tools/1\"}}\n",
	    "\"id\":1", NULL, 0) != 0)
		goto fail;
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"session.create\",\"params\":{\"workspace\":\"%s\"}}\n", ws);
	if (call(fd, line, "\"id\":2", reply, sizeof reply) != 0 ||
	    (p = strstr(reply, "\"id\":\"")) == NULL)
		goto fail;
	snprintf(sid, sizeof sid, "%.12s", p + 6);
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
	    "\"tool.call\",\"params\":{\"session\":\"%s\",\"tool\":\"read_file\","
	    "\"args\":{\"path\":\"one-kib.txt\"}}}\n", sid);
	lat = calloc((size_t)n, sizeof *lat);
	for (i = 0; i < n + 200; i++) {
		if (i > 0 && i % 2000 == 0) {
			/*
			 * A session's history is bounded (2 messages a call):
			 * go on in a new one, outside the timed part.
			 */
			snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\","
			    "\"id\":2,\"method\":\"session.create\",\"params\":"
			    "{\"workspace\":\"%s\"}}\n", ws);
			if (call(fd, line, "\"id\":2", reply, sizeof reply) !=
			    0 || (p = strstr(reply, "\"id\":\"")) == NULL)
				goto fail;
			snprintf(sid, sizeof sid, "%.12s", p + 6);
			snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\","
			    "\"id\":3,\"method\":\"tool.call\",\"params\":"
			    "{\"session\":\"%s\",\"tool\":\"read_file\","
			    "\"args\":{\"path\":\"one-kib.txt\"}}}\n", sid);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (call(fd, line, "\"id\":3", reply, sizeof reply) != 0)
			goto fail;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (strstr(reply, "\"result\"") == NULL) {
			/* Every timed call must have read the file. */
			fprintf(stderr, "bench-tools: %s", reply);
			goto fail;
		}
		if (i >= 200)	/* warm-up */
			lat[i - 200] = (t1.tv_sec - t0.tv_sec) * 1e6 +
			    (t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp_d);
	printf("read_file 1 KiB via tool.call (%d calls): p50 %.1f us (goal < 15),"
	    " p99 %.1f us (goal < 50)\n", n, lat[n / 2], lat[n * 99 / 100]);
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	/* The private folder is left for inspection; it is small. */
	printf("(state and workspace left in %s)\n", dir);
	return 0;
fail:
	fprintf(stderr, "bench-tools: the daemon did not answer as expected\n");
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return 1;
}
