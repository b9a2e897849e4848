/*
 * Unix platform code: peer credentials (SO_PEERCRED on Linux, getpeereid on
 * the BSDs and macOS), the open-file limit and random bytes.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#ifdef HAVE_GETRANDOM
#include <sys/random.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "osdep.h"

/* Gets the peer's credentials; fails closed where unsupported. */
int
osdep_peer_cred(int fd, uid_t *uid, pid_t *pid)
{
#if defined(HAVE_DECL_SO_PEERCRED) && HAVE_DECL_SO_PEERCRED
	struct ucred	cred;
	socklen_t	len = sizeof cred;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    len != sizeof cred)
		return -1;
	*uid = cred.uid;
	*pid = cred.pid;
	return 0;
#elif defined(HAVE_GETPEEREID)
	gid_t	gid;

	if (getpeereid(fd, uid, &gid) != 0)
		return -1;
	*pid = -1;
	return 0;
#else
	(void)fd; (void)uid; (void)pid;
	errno = ENOTSUP;
	return -1;
#endif
}

/* Names the peer credential mechanism. */
const char *
osdep_peer_cred_method(void)
{
#if defined(HAVE_DECL_SO_PEERCRED) && HAVE_DECL_SO_PEERCRED
	return "SO_PEERCRED";
#elif defined(HAVE_GETPEEREID)
	return "getpeereid";
#else
	return NULL;
#endif
}

/* Raises RLIMIT_NOFILE's soft limit to its hard limit. */
long
osdep_raise_nofile(void)
{
	struct rlimit	rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}

/* Wall-clock time in milliseconds since the epoch. */
int64_t
osdep_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Fills buf with random bytes. */
int
osdep_random(void *buf, size_t len)
{
	unsigned char	*p = buf;
	ssize_t		 n;
	int		 fd;

#ifdef HAVE_GETRANDOM
	while (len > 0) {
		if ((n = getrandom(p, len, 0)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (len == 0)
		return 0;
#endif
	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (len > 0) {
		if ((n = read(fd, p, len)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
	return 0;
}
