/*
 * Windows platform code behind osdep.h and cpu.h: random bytes from the
 * system's generator, the wall clock, the number of CPUs, condition
 * variables timed on the monotonic clock, and what the Unix side does
 * with peer credentials and the C library's allocator.
 *
 * A named pipe client's identity is read by the listener itself
 * (listen-win.c, from the client process's token) when it connects, so
 * osdep_peer_cred has nothing to read from a descriptor here and fails
 * closed. osdep_peer_in_run answers 0: gbrd runs no agent command on
 * Windows yet (the runner refuses them), so no peer can come from one.
 */
#include "gbr-config.h"

#include <bcrypt.h>
#include <errno.h>
#include <stdint.h>

#include "cpu.h"
#include "osdep.h"

/* No credentials can be read from a descriptor here: fails closed. */
int
osdep_peer_cred(int fd, uid_t *uid, pid_t *pid)
{
	errno = ENOTSUP;
	return -1;
}

/* No agent command runs on Windows yet: none can be the peer. */
int
osdep_peer_in_run(int fd, pid_t pid)
{
	return 0;
}

/* How the listener identifies a named pipe's client. */
const char *
osdep_peer_cred_method(void)
{
	return "GetNamedPipeClientProcessId";
}

/*
 * The C runtime's limit of open files (its fds, not Windows' handles),
 * raised to its maximum: 8192 in the UCRT, 2048 in msvcrt.dll.
 */
long
osdep_raise_nofile(void)
{
	if (_setmaxstdio(8192) != -1)
		return 8192;
	if (_setmaxstdio(2048) != -1)
		return 2048;
	return _getmaxstdio();
}

/* Wall-clock time in milliseconds since the epoch. */
int64_t
osdep_now_ms(void)
{
	FILETIME	ft;
	uint64_t	t;

	GetSystemTimePreciseAsFileTime(&ft);
	t = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
	/* 100 ns units since 1601 to ms since 1970. */
	return (int64_t)(t / 10000) - INT64_C(11644473600000);
}

/* A condition variable: winpthreads times its waits on the wall clock. */
int
osdep_cond_init(pthread_cond_t *c)
{
	/*
	 * pthread_condattr_setclock takes CLOCK_REALTIME alone here, so the
	 * clock is not set: osdep_cond_timedwait waits relative instead.
	 */
	return pthread_cond_init(c, NULL);
}

/*
 * Waits until signalled or the monotonic deadline, for what is left of
 * it (winpthreads' relative wait): a change of the wall clock in between
 * moves nothing.
 */
int
osdep_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
    const struct timespec *deadline)
{
	struct timespec	now, left;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left.tv_sec = deadline->tv_sec - now.tv_sec;
	left.tv_nsec = deadline->tv_nsec - now.tv_nsec;
	if (left.tv_nsec < 0) {
		left.tv_sec--;
		left.tv_nsec += 1000000000L;
	}
	if (left.tv_sec < 0)
		left.tv_sec = left.tv_nsec = 0;
	return pthread_cond_timedwait_relative_np(c, m, &left);
}

/* Fills buf with random bytes from the system's preferred generator. */
int
osdep_random(void *buf, size_t len)
{
	unsigned char	*p = buf;
	ULONG		 n;

	while (len > 0) {
		n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
		if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, p, n,
		    BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* The Windows heap needs no tuning for gbrd's pattern. */
void
osdep_memory_init(void)
{
}

/* Gives the default heap's free blocks back where it can. */
void
osdep_memory_trim(void)
{
	(void)HeapCompact(GetProcessHeap(), 0);
}

/* The CPUs this process may run on. */
long
osdep_cpu_count(void)
{
	DWORD_PTR	proc, sys;
	long		n = 0;

	if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys)) {
		for (; proc != 0; proc &= proc - 1)
			n++;
		if (n > 0)
			return n;
	}
	return (long)GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
}
