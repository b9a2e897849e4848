/*
 * What the tests of the local channel (test-transport.c, test-proc.c) need
 * from the system and is not gbr's to offer: threads, sleeping, a private
 * socket path or pipe name, and what a process holds (descriptors or
 * handles, threads, memory), to show that nothing is left behind. One
 * section per system; the tests themselves are the same on both.
 */
#ifndef GBR_UNIT_SYS_H
#define GBR_UNIT_SYS_H

#include <sys/types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xmalloc.h"

#ifdef _WIN32
#include <psapi.h>
#include <shellapi.h>
#include <tlhelp32.h>
#include "transport-win.h"
#else
#include <sys/stat.h>
#include <dirent.h>
#include <pthread.h>
#include <time.h>
#endif

struct thread;
typedef void *(*thread_fn)(void *);

#ifdef _WIN32
struct thread {
	HANDLE		 h;
	thread_fn	 fn;
	void		*arg;
};

/* Runs a thread's function (the Win32 signature). */
static inline DWORD WINAPI
thread_main(void *arg)
{
	struct thread	*t = arg;

	t->fn(t->arg);
	return 0;
}

/* Starts a thread. */
static inline struct thread *
thread_start(thread_fn fn, void *arg)
{
	struct thread	*t = xcalloc(1, sizeof *t);

	t->fn = fn;
	t->arg = arg;
	if ((t->h = CreateThread(NULL, 0, thread_main, t, 0, NULL)) == NULL)
		abort();
	return t;
}

/* Waits for a thread and frees it. */
static inline void
thread_join(struct thread *t)
{
	WaitForSingleObject(t->h, INFINITE);
	CloseHandle(t->h);
	free(t);
}

static inline void
sleep_ms(unsigned ms)
{
	Sleep(ms);
}

/* A pipe name nobody else uses. */
static inline char *
test_path(void)
{
	return xasprintf("\\\\.\\pipe\\gbr-test-%lu-%llu",
	    (unsigned long)GetCurrentProcessId(),
	    (unsigned long long)GetTickCount64());
}

static inline void
test_path_free(char *path)
{
	free(path);
}

static inline uid_t
self_uid(void)
{
	return COMPAT_UID_SELF;
}

static inline long
self_pid(void)
{
	return (long)GetCurrentProcessId();
}

/*
 * Handles this process holds. Wine 8 answers GetProcessHandleCount with 0:
 * there, every handle value is tried instead (they are multiples of 4).
 */
static inline long
count_handles(void)
{
	DWORD		n = 0, flags;
	uintptr_t	v;

	if (GetProcessHandleCount(GetCurrentProcess(), &n) && n > 0)
		return (long)n;
	for (v = 4; v < 0x40000; v += 4) {
		if (GetHandleInformation((HANDLE)v, &flags))
			n++;
	}
	return (long)n;
}

/* Threads this process runs. */
static inline long
count_threads(void)
{
	THREADENTRY32	te;
	HANDLE		snap;
	DWORD		pid = GetCurrentProcessId();
	long		n = 0;

	snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
	if (snap == INVALID_HANDLE_VALUE)
		return -1;
	te.dwSize = sizeof te;
	if (Thread32First(snap, &te)) {
		do {
			if (te.th32OwnerProcessID == pid)
				n++;
			te.dwSize = sizeof te;
		} while (Thread32Next(snap, &te));
	}
	CloseHandle(snap);
	return n;
}

/* Private memory committed, in bytes. */
static inline long long
memory_used(void)
{
	PROCESS_MEMORY_COUNTERS_EX	pmc;

	MEMORY_BASIC_INFORMATION	mbi;
	char				*p = NULL;
	long long			 sum = 0;

	memset(&pmc, 0, sizeof pmc);
	pmc.cb = sizeof pmc;
	if (GetProcessMemoryInfo(GetCurrentProcess(),
	    (PROCESS_MEMORY_COUNTERS *)&pmc, sizeof pmc) && pmc.PrivateUsage > 0)
		return (long long)pmc.PrivateUsage;
	/* Wine 8 says 0: add up the committed private regions instead. */
	while (VirtualQuery(p, &mbi, sizeof mbi) == sizeof mbi) {
		if (mbi.State == MEM_COMMIT && mbi.Type == MEM_PRIVATE)
			sum += (long long)mbi.RegionSize;
		p = (char *)mbi.BaseAddress + mbi.RegionSize;
		if ((uintptr_t)p < (uintptr_t)mbi.BaseAddress)
			break;
	}
	return sum;
}

static inline unsigned
bridges(void)
{
	return transport_bridge_count();
}
#else
struct thread {
	pthread_t	t;
};

/* Starts a thread. */
static inline struct thread *
thread_start(thread_fn fn, void *arg)
{
	struct thread	*t = xcalloc(1, sizeof *t);

	if (pthread_create(&t->t, NULL, fn, arg) != 0)
		abort();
	return t;
}

/* Waits for a thread and frees it. */
static inline void
thread_join(struct thread *t)
{
	pthread_join(t->t, NULL);
	free(t);
}

static inline void
sleep_ms(unsigned ms)
{
	struct timespec	ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A socket path in a private folder of its own. */
static inline char *
test_path(void)
{
	char	dir[] = "/tmp/gbr-transport-XXXXXX";

	if (mkdtemp(dir) == NULL)
		abort();
	return xasprintf("%s/gbrd.sock", dir);
}

/* Removes the socket's folder and what the tests left in it. */
static inline void
test_path_free(char *path)
{
	char	*f;

	unlink(path);
	f = xasprintf("%s.lock", path);
	unlink(f);
	free(f);
	f = xasprintf("%s.start.lock", path);
	unlink(f);
	free(f);
	*strrchr(path, '/') = '\0';
	rmdir(path);
	free(path);
}

static inline uid_t
self_uid(void)
{
	return getuid();
}

static inline long
self_pid(void)
{
	return (long)getpid();
}

/* Counts the entries of a /proc folder. */
static inline long
count_dir(const char *path)
{
	DIR		*d;
	struct dirent	*de;
	long		 n = 0;

	if ((d = opendir(path)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static inline long
count_handles(void)
{
	return count_dir("/proc/self/fd");
}

static inline long
count_threads(void)
{
	return count_dir("/proc/self/task");
}

/* Resident memory, in bytes. */
static inline long long
memory_used(void)
{
	FILE		*f = fopen("/proc/self/statm", "r");
	long long	 size, rss;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%lld %lld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

static inline unsigned
bridges(void)
{
	return 0;	/* no bridge on Unix */
}
#endif

#endif
