/*
 * Windows platform code behind osdep.h and cpu.h: random bytes from the
 * system's generator, the wall clock, the number of CPUs, condition
 * variables timed on the monotonic clock, and what the Unix side does
 * with peer credentials and the C library's allocator.
 *
 * A named pipe client's identity is read by the listener itself
 * (listen-win.c, from the client process's token) when it connects, so
 * osdep_peer_cred has nothing to read from a descriptor here and fails
 * closed. osdep_peer_in_run tells a client that an agent's command
 * started by the Job objects the runner registers (osdep-win.h): every
 * process of a command is in its command's Job object.
 */
#include "gbr-config.h"

#include <bcrypt.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"
#include "osdep.h"
#include "osdep-win.h"
#include "xmalloc.h"

/*
 * The register of the runs' Job objects: a small array (the runner caps
 * the runs at once), under a lock since it may be read from any thread.
 */
static SRWLOCK	  osdep_jobs_lock = SRWLOCK_INIT;
static HANDLE	 *osdep_jobs;
static unsigned	  osdep_njobs, osdep_jobs_cap;

/* No credentials can be read from a descriptor here: fails closed. */
int
osdep_peer_cred(int fd, uid_t *uid, pid_t *pid)
{
	errno = ENOTSUP;
	return -1;
}

/* Registers a run's Job object. */
void
osdep_jobs_add(HANDLE job)
{
	AcquireSRWLockExclusive(&osdep_jobs_lock);
	if (osdep_njobs == osdep_jobs_cap) {
		osdep_jobs_cap = osdep_jobs_cap == 0 ? 16 : osdep_jobs_cap * 2;
		osdep_jobs = xreallocarray(osdep_jobs, osdep_jobs_cap,
		    sizeof *osdep_jobs);
	}
	osdep_jobs[osdep_njobs++] = job;
	ReleaseSRWLockExclusive(&osdep_jobs_lock);
}

/* Forgets a run's Job object. */
void
osdep_jobs_remove(HANDLE job)
{
	unsigned	i;

	AcquireSRWLockExclusive(&osdep_jobs_lock);
	for (i = 0; i < osdep_njobs; i++) {
		if (osdep_jobs[i] == job) {
			osdep_jobs[i] = osdep_jobs[--osdep_njobs];
			break;
		}
	}
	ReleaseSRWLockExclusive(&osdep_jobs_lock);
}

/* Whether a process is in one of the runs' Job objects. */
int
osdep_jobs_hold(HANDLE process)
{
	unsigned	i;
	BOOL		in;
	int		r = 0;

	AcquireSRWLockShared(&osdep_jobs_lock);
	for (i = 0; i < osdep_njobs && r == 0; i++) {
		if (!IsProcessInJob(process, osdep_jobs[i], &in))
			r = -1;
		else if (in)
			r = 1;
	}
	ReleaseSRWLockShared(&osdep_jobs_lock);
	return r;
}

/* Job objects registered now. */
unsigned
osdep_jobs_count(void)
{
	unsigned	n;

	AcquireSRWLockShared(&osdep_jobs_lock);
	n = osdep_njobs;
	ReleaseSRWLockShared(&osdep_jobs_lock);
	return n;
}

/* The terminal of a process: none on Windows (see osdep.h). */
char *
osdep_pid_tty(pid_t pid)
{
	(void)pid;
	return NULL;	/* a console has no name a person would know */
}

/*
 * Whether the pipe client pid was started by an agent's command: it is
 * in the Job object of a run. A client that cannot be opened any more is
 * treated as one (as on Unix: a peer gone already could have handed its
 * end of the pipe on, and its number may be another process's by now),
 * and so is one whose membership cannot be told.
 */
int
osdep_peer_in_run(int fd, pid_t pid)
{
	HANDLE	proc;
	int	r;

	/*
	 * No run, no process of one: a Job object's processes all end with
	 * its command (the runner kills the whole Job object), and nothing
	 * leaves one.
	 */
	if (pid <= 0 || osdep_jobs_count() == 0)
		return 0;
	/*
	 * Windows' IsProcessInJob takes the limited right; Wine 8 wants the
	 * full one (measured: ERROR_ACCESS_DENIED otherwise).
	 */
	if ((proc = OpenProcess(PROCESS_QUERY_INFORMATION, FALSE,
	    (DWORD)pid)) == NULL && (proc = OpenProcess(
	    PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid)) == NULL)
		return 1;
	r = osdep_jobs_hold(proc);
	CloseHandle(proc);
	return r != 0;
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
