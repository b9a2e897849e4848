/*
 * The processor, for code that shares work between threads: the hint a
 * spin loop gives the CPU, and how many CPUs this process may run on.
 * The hint is one instruction that differs per architecture and runs in a
 * tight loop, so it is a static inline here rather than a call; the count
 * is asked for seldom and lives in cpu.c. This file owns nothing else (no
 * atomics, no thread creation: those are the caller's, through pthreads
 * and the compiler's __atomic builtins).
 */
#ifndef GBRD_OSDEP_CPU_H
#define GBRD_OSDEP_CPU_H

/*
 * Tells the CPU the thread is spinning on a value another thread will
 * change (x86 pause, arm64 yield): it saves power and lets a sibling
 * hyperthread run. Where there is no such instruction it does nothing.
 */
static inline void
osdep_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/*
 * The CPUs this process may run on: its affinity mask where the system
 * has one, else the CPUs online. At least 1 is not promised (sysconf may
 * fail and give -1); callers compare it with what they need.
 */
long	osdep_cpu_count(void);

#endif
