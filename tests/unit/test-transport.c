/*
 * The local channel end to end, in one process: gbrd's side (listen.h)
 * and a client's (transport.h) on a private socket (Unix) or pipe name
 * (Windows, where every connection goes through the bridge of
 * platform/transport-bridge-win.c). One daemon per name; the peer's
 * account and pid; bytes both ways, 4 MiB each way at once; the end of
 * input seen on both sides, also after the last words of a server that
 * closes on unread input; 50 connections opened and closed without a
 * descriptor, handle or thread left behind; backpressure (a client that
 * does not read stops the server's writes, and memory does not grow).
 *
 * The program runs itself as a child (--child-listen NAME) to show that
 * another process is refused the name.
 */
#include "gbr-config.h"

#include <sys/types.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "listen.h"
#include "proc.h"
#include "transport.h"
#include "unit.h"
#include "unit-sys.h"
#include "xmalloc.h"


#define MIB		(1024 * 1024)
#define BULK_BYTES	(4 * MIB)
#define FLOOD_BYTES	(16 * MIB)
#define CYCLES		50
#define CHUNK		(32 * 1024)

/* ---- helpers ---- */

/* The byte at offset i of stream d: not periodic at any small length. */
static unsigned char
pattern(int d, uint64_t i)
{
	return (unsigned char)((i * 131) ^ (i >> 8) * 7 ^ (i >> 16) ^
	    (uint64_t)(d * 91));
}

/* Fills buf with stream d from offset off. */
static void
pattern_fill(int d, uint64_t off, unsigned char *buf, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++)
		buf[i] = pattern(d, off + i);
}

/* Whether buf is stream d from offset off. */
static int
pattern_check(int d, uint64_t off, const unsigned char *buf, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++) {
		if (buf[i] != pattern(d, off + i))
			return 0;
	}
	return 1;
}

/* Waits for fd to be ready for events; returns revents, 0 on timeout. */
static int
wait_fd(int fd, int events, int ms)
{
	struct pollfd	pfd;

	memset(&pfd, 0, sizeof pfd);
	pfd.fd = fd;
	pfd.events = (short)events;
	if (transport_poll(&pfd, 1, ms) <= 0)
		return 0;
	return pfd.revents;
}

/* Accepts one connection within ms; returns 1 with it. */
static int
accept_one(int *fd, struct listen_peer *peer, int ms)
{
	int	r;

	for (;;) {
		if ((r = listen_accept(fd, peer)) != 0)
			return r;
		if (wait_fd(listen_fd(), POLLIN, ms) == 0)
			return 0;
	}
}

/* Writes all of buf to a blocking channel. */
static int
write_all(int fd, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = transport_write(fd, p, len)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Writes all of buf to a non-blocking channel, waiting up to ms each time. */
static int
write_all_nb(int fd, const void *buf, size_t len, int ms)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = transport_write(fd, p, len)) < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR)
				return -1;
			if (wait_fd(fd, POLLOUT, ms) == 0)
				return -1;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads until the end (or len bytes); returns the count, -1 on error. */
static ssize_t
read_upto(int fd, void *buf, size_t len, int ms)
{
	char	*p = buf;
	size_t	 got = 0;
	ssize_t	 n;

	while (got < len) {
		if (wait_fd(fd, POLLIN, ms) == 0)
			return -1;
		if ((n = transport_read(fd, p + got, len - got)) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Connects and accepts: *c the client's end, *s the server's. */
static int
connect_pair(const char *path, int *c, int *s, struct listen_peer *peer)
{
	struct listen_peer	 p;
	char			*cause = NULL;

	if ((*c = transport_dial(path, &cause)) == -1) {
		printf("# dial: %s\n", cause != NULL ? cause : strerror(errno));
		free(cause);
		return -1;
	}
	if (accept_one(s, peer != NULL ? peer : &p, 5000) != 1) {
		transport_close(*c);
		return -1;
	}
	return 0;
}

/* ---- the cases ---- */

/* The child of test_listen: must be refused the name. */
static int
child_listen(const char *path)
{
	char	*cause = NULL;
	int	 r;

	if (listen_open(path, &cause) == 0)
		return 1;
	printf("# child refused: %s\n", cause);
	r = strstr(cause, "already") != NULL ? 42 : 2;
	free(cause);
	return r;
}

/* One daemon per name, in this process and from another. */
static void
test_listen(const char *path)
{
	char	*cause = NULL, *self, *argv[4];
	int	 r;

	r = listen_open(path, &cause);
	CHECK(r == 0, "listen_open on a fresh name");
	if (r != 0)
		printf("# %s\n", cause);
	free(cause);
	cause = NULL;
	CHECK(listen_path() != NULL && strcmp(listen_path(), path) == 0,
	    "listen_path says what is served");
	r = listen_open(path, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, "already") != NULL,
	    "a second listen_open in this process is refused");
	free(cause);
	CHECK(listen_fd() != -1 && strcmp(listen_path(), path) == 0,
	    "the first listener is untouched");

	self = proc_beside_self("test-transport");
	argv[0] = self;
	argv[1] = (char *)"--child-listen";
	argv[2] = (char *)path;
	argv[3] = NULL;
	cause = NULL;
	r = self != NULL ? proc_spawn_wait(argv, &cause) : -1;
	CHECK(r == 42, "another process is refused the name (status %d)", r);
	free(cause);
	free(self);
}

/* A client is accepted with our account and pid. */
static void
test_peer(const char *path)
{
	struct listen_peer	peer;
	int			c, s;

	memset(&peer, 0, sizeof peer);
	if (connect_pair(path, &c, &s, &peer) != 0) {
		CHECK(0, "dial and accept");
		return;
	}
	CHECK(peer.known, "the peer's account is known");
	CHECK(peer.uid == self_uid(), "the peer is our own account");
	CHECK((long)peer.pid == self_pid(), "the peer's pid is ours (%ld)",
	    (long)peer.pid);
	transport_close(c);
	transport_close(s);
}

/* A few bytes each way, and the end of input each way. */
static void
test_small(const char *path)
{
	char	buf[64];
	int	c, s;

	if (connect_pair(path, &c, &s, NULL) != 0) {
		CHECK(0, "dial and accept");
		return;
	}
	CHECK(write_all(c, "hello\n", 6) == 0, "the client writes");
	CHECK(read_upto(s, buf, 6, 5000) == 6 && memcmp(buf, "hello\n", 6) == 0,
	    "the server reads what it wrote");
	CHECK(write_all_nb(s, "world\n", 6, 5000) == 0, "the server writes");
	CHECK(read_upto(c, buf, 6, 5000) == 6 && memcmp(buf, "world\n", 6) == 0,
	    "the client reads what it wrote");
	CHECK(write_all(c, "bye\n", 4) == 0, "the client's last words");
	transport_close(c);
	CHECK(read_upto(s, buf, sizeof buf, 5000) == 4 &&
	    memcmp(buf, "bye\n", 4) == 0,
	    "the server reads the client's last words, then the end");
	transport_close(s);
}

struct bulk {
	int		fd;
	size_t		len;
	int		ok;
};

/* A client thread: writes stream 0 (blocking). */
static void *
bulk_send(void *arg)
{
	struct bulk	*b = arg;
	unsigned char	*buf = xmalloc(CHUNK);
	size_t		 off, n;

	b->ok = 1;
	for (off = 0; off < b->len && b->ok; off += n) {
		n = b->len - off < CHUNK ? b->len - off : CHUNK;
		pattern_fill(0, off, buf, n);
		if (write_all(b->fd, buf, n) != 0)
			b->ok = 0;
	}
	free(buf);
	return NULL;
}

/* A client thread: reads stream 1 (blocking) and checks every byte. */
static void *
bulk_recv(void *arg)
{
	struct bulk	*b = arg;
	unsigned char	*buf = xmalloc(CHUNK);
	size_t		 off = 0;
	ssize_t		 n;

	b->ok = 1;
	while (off < b->len) {
		n = transport_read(b->fd, buf, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || !pattern_check(1, off, buf, (size_t)n)) {
			b->ok = 0;
			break;
		}
		off += (size_t)n;
	}
	b->len = off;
	free(buf);
	return NULL;
}

/*
 * The server's side of a transfer on a non-blocking channel: writes
 * stream 1 from offset from up to out, and reads stream 0 up to in bytes,
 * both at once. Returns 0 when all went and came byte-exact.
 */
static int
serve_bulk_from(int s, size_t from, size_t out, size_t in)
{
	unsigned char	*wbuf = xmalloc(CHUNK), *rbuf = xmalloc(CHUNK);
	size_t		 sent = from, got = 0, wlen = 0, woff = 0;
	ssize_t		 n;
	int		 ev, r = 0;

	while (r == 0 && (sent < out || got < in)) {
		ev = wait_fd(s, (got < in ? POLLIN : 0) |
		    (sent < out ? POLLOUT : 0), 10000);
		if (ev == 0) {
			printf("# stalled: sent %zu of %zu, read %zu of %zu\n",
			    sent, out, got, in);
			r = -1;
			break;
		}
		if (got < in && (ev & (POLLIN | POLLHUP | POLLERR))) {
			n = transport_read(s, rbuf, CHUNK);
			if (n == 0 || (n < 0 && errno != EAGAIN &&
			    errno != EWOULDBLOCK))
				r = -1;
			else if (n > 0) {
				if (!pattern_check(0, got, rbuf, (size_t)n))
					r = -1;
				got += (size_t)n;
			}
		}
		if (sent < out && (ev & POLLOUT)) {
			if (woff == wlen) {
				wlen = out - sent < CHUNK ? out - sent : CHUNK;
				pattern_fill(1, sent, wbuf, wlen);
				woff = 0;
			}
			n = transport_write(s, wbuf + woff, wlen - woff);
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
				r = -1;
			else if (n > 0) {
				woff += (size_t)n;
				sent += (size_t)n;
			}
		}
	}
	free(wbuf);
	free(rbuf);
	return r;
}

/* serve_bulk_from, from the start. */
static int
serve_bulk(int s, size_t out, size_t in)
{
	return serve_bulk_from(s, 0, out, in);
}

/* 4 MiB each way at once, byte-exact. */
static void
test_bulk(const char *path)
{
	struct bulk	 tx, rx;
	struct thread	*t1, *t2;
	int		 c, s, r;

	if (connect_pair(path, &c, &s, NULL) != 0) {
		CHECK(0, "dial and accept");
		return;
	}
	tx.fd = rx.fd = c;
	tx.len = rx.len = BULK_BYTES;
	t1 = thread_start(bulk_send, &tx);
	t2 = thread_start(bulk_recv, &rx);
	r = serve_bulk(s, BULK_BYTES, BULK_BYTES);
	thread_join(t1);
	thread_join(t2);
	CHECK(r == 0, "the server wrote 4 MiB and read 4 MiB, byte-exact");
	CHECK(tx.ok, "the client wrote 4 MiB");
	CHECK(rx.ok && rx.len == BULK_BYTES,
	    "the client read 4 MiB, byte-exact (%zu)", rx.len);
	transport_close(c);
	transport_close(s);
}

struct goodbye {
	int		fd;
	size_t		got;
	int		ok;
};

/* A client thread: writes input the server never reads, then reads all. */
static void *
goodbye_client(void *arg)
{
	struct goodbye	*g = arg;
	unsigned char	*buf = xmalloc(CHUNK);
	ssize_t		 n;

	memset(buf, 'x', CHUNK);
	g->ok = write_all(g->fd, buf, CHUNK) == 0;
	for (;;) {
		n = transport_read(g->fd, buf, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (!pattern_check(1, g->got, buf, (size_t)n))
			g->ok = 0;
		g->got += (size_t)n;
	}
	/* The end, or a reset after everything (Unix, on unread input). */
	if (n < 0 && errno != ECONNRESET)
		g->ok = 0;
	free(buf);
	return NULL;
}

/*
 * A server that writes its last words and closes without reading what the
 * client sent (the daemon's error-then-close): every word arrives.
 */
static void
test_goodbye(const char *path)
{
	struct goodbye	 g;
	struct thread	*t;
	int		 c, s;

	if (connect_pair(path, &c, &s, NULL) != 0) {
		CHECK(0, "dial and accept");
		return;
	}
	memset(&g, 0, sizeof g);
	g.fd = c;
	t = thread_start(goodbye_client, &g);
	sleep_ms(100);		/* the client's input is there, unread */
	CHECK(serve_bulk(s, 100 * 1024, 0) == 0, "the server's last words");
	transport_close(s);
	thread_join(t);
	CHECK(g.ok && g.got == 100 * 1024,
	    "all of them reach the client, then the end (%zu bytes)", g.got);
	transport_close(c);
}

/* One connection opened, used and closed from both sides. */
static int
cycle(const char *path)
{
	char	b = 'c';
	int	c, s, ok;

	if (connect_pair(path, &c, &s, NULL) != 0)
		return 0;
	ok = write_all(c, &b, 1) == 0 && read_upto(s, &b, 1, 5000) == 1 &&
	    write_all_nb(s, "s", 1, 5000) == 0 && read_upto(c, &b, 1, 5000) == 1 &&
	    b == 's';
	transport_close(c);
	ok = ok && read_upto(s, &b, 1, 5000) == 0;
	transport_close(s);
	return ok;
}

/* Waits until no bridge is left (up to 5 s). */
static int
bridges_gone(void)
{
	int	i;

	for (i = 0; i < 500 && bridges() > 0; i++)
		sleep_ms(10);
	return bridges() == 0;
}

/* 50 connections leave no descriptor, handle or thread behind. */
static void
test_cycles(const char *path)
{
	long	h0, t0, h1, t1;
	int	i, ok = 1;

	ok = cycle(path);		/* the first one starts what stays */
	bridges_gone();
	sleep_ms(100);
	h0 = count_handles();
	t0 = count_threads();
	for (i = 0; i < CYCLES && ok; i++)
		ok = cycle(path);
	CHECK(ok, "%d connections opened, used and closed (%d done)", CYCLES, i);
	CHECK(bridges_gone(), "every bridge ended");
	/* A thread that has freed its bridge may take a moment to exit. */
	for (i = 0; i < 100 && count_threads() > t0; i++)
		sleep_ms(10);
	h1 = count_handles();
	t1 = count_threads();
	CHECK(h0 > 0 && h1 == h0, "handles before and after: %ld, %ld", h0, h1);
	CHECK(t0 > 0 && t1 == t0, "threads before and after: %ld, %ld", t0, t1);
}

struct reader {
	int		fd;
	size_t		len;
	int		ok;
};

/* A client thread: reads stream 1 to the end, checking every byte. */
static void *
flood_recv(void *arg)
{
	struct reader	*r = arg;
	struct bulk	 b;

	b.fd = r->fd;
	b.len = r->len;
	bulk_recv(&b);
	r->ok = b.ok;
	r->len = b.len;
	return NULL;
}

/*
 * A client that reads nothing for a while: the server's writes stop (the
 * channel holds a bounded amount) and memory does not grow; once it reads,
 * all 16 MiB arrive.
 */
static void
test_backpressure(const char *path)
{
	unsigned char	*buf = xmalloc(CHUNK);
	struct reader	 rd;
	struct thread	*t;
	long long	 m, m0, m1;
	size_t		 sent = 0;
	ssize_t		 n;
	int		 c, s, r;

	m = memory_used();
	if (connect_pair(path, &c, &s, NULL) != 0) {
		CHECK(0, "dial and accept");
		free(buf);
		return;
	}
	/* What a connection costs (under Wine, its threads' whole stacks). */
	m0 = memory_used();
	printf("# a connection costs %lld KiB of memory\n", (m0 - m) / 1024);
	/* Write until nothing more goes for a second. */
	for (;;) {
		pattern_fill(1, sent, buf, CHUNK);
		n = transport_write(s, buf, CHUNK);
		if (n > 0) {
			sent += (size_t)n;
			if (sent >= FLOOD_BYTES)
				break;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			break;
		if (wait_fd(s, POLLOUT, 1000) == 0)
			break;
	}
	/* The last write may have been partial: the stream goes on from sent. */
	m1 = memory_used();
	CHECK(sent < FLOOD_BYTES, "writes stop while the client does not read "
	    "(%zu KiB taken)", sent / 1024);
	CHECK(sent <= 2 * MIB, "what the channel holds is bounded (%zu KiB)",
	    sent / 1024);
	CHECK(m0 > 0 && m1 - m0 < MIB, "memory does not grow meanwhile (%lld "
	    "KiB)", (m1 - m0) / 1024);
	sleep_ms(300);
	pattern_fill(1, sent, buf, CHUNK);
	n = transport_write(s, buf, CHUNK);
	CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
	    "still full a while later (%zd)", n);
	if (n > 0)
		sent += (size_t)n;
	rd.fd = c;
	rd.len = FLOOD_BYTES;
	t = thread_start(flood_recv, &rd);
	r = serve_bulk_from(s, sent, FLOOD_BYTES, 0);
	thread_join(t);
	CHECK(r == 0, "the server wrote the rest once the client read");
	CHECK(rd.ok && rd.len == FLOOD_BYTES,
	    "the client read all 16 MiB, byte-exact (%zu)", rd.len);
	transport_close(c);
	transport_close(s);
	free(buf);
}

/*
 * A server that closes while its client reads nothing: what it wrote
 * cannot be passed on, and its side ends within the bridge's grace (5 s)
 * rather than waiting for the client.
 */
static void
test_stuck(const char *path)
{
	unsigned char	*buf = xmalloc(CHUNK);
	unsigned	 before;
	int		 c, s, i;

	if (connect_pair(path, &c, &s, NULL) != 0) {
		CHECK(0, "dial and accept");
		free(buf);
		return;
	}
	memset(buf, 's', CHUNK);
	while (transport_write(s, buf, CHUNK) > 0 ||
	    wait_fd(s, POLLOUT, 500) != 0)
		;
	before = bridges();
	transport_close(s);
	for (i = 0; i < 1000 && bridges() >= before && before > 0; i++)
		sleep_ms(10);
	CHECK(before == 0 || bridges() < before,
	    "the server's side ends though its client never reads (%d ms)",
	    i * 10);
	transport_close(c);
	CHECK(bridges_gone(), "and the client's once it closes");
	free(buf);
}

/* Nobody listens: -1, errno ENOENT, no cause. */
static void
test_missing(const char *path)
{
	char	*cause = NULL, *other;
	int	 fd;

	other = xasprintf("%s-nobody", path);
	errno = 0;
	fd = transport_dial(other, &cause);
	CHECK(fd == -1 && cause == NULL && (errno == ENOENT ||
	    errno == ECONNREFUSED), "dialing a name nobody serves: %s",
	    cause != NULL ? cause : strerror(errno));
	free(cause);
	free(other);
}

/* After listen_close the name is free: nobody answers, a new daemon may. */
static void
test_reopen(const char *path)
{
	char	*cause = NULL;
	int	 fd, c, s;

	listen_close();
	CHECK(listen_path() == NULL, "listen_close forgets the name");
	errno = 0;
	fd = transport_dial(path, &cause);
	CHECK(fd == -1 && cause == NULL && (errno == ENOENT ||
	    errno == ECONNREFUSED), "nobody answers after listen_close");
	free(cause);
	cause = NULL;
	CHECK(listen_open(path, &cause) == 0, "the name can be served again%s%s",
	    cause != NULL ? ": " : "", cause != NULL ? cause : "");
	free(cause);
	CHECK(connect_pair(path, &c, &s, NULL) == 0, "and reached again");
	transport_close(c);
	transport_close(s);
	listen_close();
	CHECK(bridges_gone(), "no bridge is left at the end");
}

#ifdef _WIN32
/* A dial to something that is not a pipe name is refused with a cause. */
static void
test_not_pipe(void)
{
	char	*cause = NULL;

	CHECK(transport_dial("C:\\tmp\\gbrd.sock", &cause) == -1 &&
	    cause != NULL && strstr(cause, "pipe name") != NULL,
	    "a path that is not a pipe name: %s", cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	CHECK(listen_open("\\\\.\\pipe\\a\\b", &cause) == -1 &&
	    cause != NULL, "listen_open refuses a backslash in the name");
	free(cause);
}
#endif

int
main(int argc, char **argv)
{
	char	*path;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 3 && strcmp(argv[1], "--child-listen") == 0)
		return child_listen(argv[2]);

	path = test_path();
	test_listen(path);
	test_peer(path);
	test_small(path);
	test_bulk(path);
	test_goodbye(path);
	test_cycles(path);
	test_backpressure(path);
	test_stuck(path);
	test_missing(path);
	test_reopen(path);
#ifdef _WIN32
	test_not_pipe();
#endif
	test_path_free(path);
	return unit_done();
}
