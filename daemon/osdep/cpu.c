/*
 * cpu.h: how many CPUs this process may run on. The affinity mask
 * (sched_getaffinity, where <sched.h> has CPU_COUNT) is what counts for a
 * daemon started under taskset or a cgroup's cpuset; elsewhere the number
 * of CPUs online is the best guess. The spin-loop hint is inline in
 * cpu.h, not here.
 */
#include "gbr-config.h"

#include <sched.h>
#include <unistd.h>

#include "cpu.h"

/* The CPUs this process may run on. */
long
osdep_cpu_count(void)
{
#ifdef CPU_COUNT
	cpu_set_t	set;

	if (sched_getaffinity(0, sizeof set, &set) == 0)
		return CPU_COUNT(&set);
#endif
	return sysconf(_SC_NPROCESSORS_ONLN);
}
