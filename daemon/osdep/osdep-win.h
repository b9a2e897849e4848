/*
 * What Windows' osdep code offers the layers above beyond osdep.h; only
 * Windows builds see this header (the runner's Windows files include it).
 *
 * The Job objects of the agent's commands. The runner registers each
 * Job object it makes while the run lives, so that osdep_peer_in_run can
 * tell a pipe client inside one of them (IsProcessInJob) and the listener
 * refuses it: no process an agent's command started drives gbrd. Every
 * process a command starts stays in its Job object (breakaway is not
 * allowed), and the whole Job object is killed when the command ends.
 * The register is locked: it may be read from any thread.
 */
#ifndef GBRD_OSDEP_WIN_H
#define GBRD_OSDEP_WIN_H

#include <windows.h>

/* Registers a run's Job object (borrowed until osdep_jobs_remove). */
void		 osdep_jobs_add(HANDLE job);
/* Forgets it (before its handle is closed). */
void		 osdep_jobs_remove(HANDLE job);
/*
 * 1 if the process is in one of the registered Job objects, 0 if not,
 * -1 if that cannot be told (callers fail closed).
 */
int		 osdep_jobs_hold(HANDLE process);
/* Job objects registered now. */
unsigned	 osdep_jobs_count(void);

#endif
