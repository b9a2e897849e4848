/*
 * Platform code behind one small interface (STYLE.md habit 8). The
 * implementation is chosen by configure's HAVE_* results, never by OS name.
 */
#ifndef GBRD_OSDEP_H
#define GBRD_OSDEP_H

#include <sys/types.h>

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/*
 * Gets the uid (and pid, -1 if unknown) of a Unix socket's peer. Returns -1
 * where the platform cannot tell: callers then refuse the peer (fail closed).
 */
int		 osdep_peer_cred(int fd, uid_t *uid, pid_t *pid);
/*
 * 1 if the socket's peer (pid from osdep_peer_cred) is a process an agent's
 * command started: it, or one of its ancestors, is a gbr-exec (the init,
 * supervisor or fork server of a run of any gbrd). A run's processes
 * cannot leave that ancestry: a pid namespace's orphans go to its init, a
 * supervisor is a child subreaper. Also 1 when the peer is gone already
 * (its pid could be another process's by now). 0 otherwise, or where the
 * platform cannot tell (there gbr-exec confines nothing either).
 */
int		 osdep_peer_in_run(int fd, pid_t pid);
/*
 * The terminal a process works on (its stdin, stdout or stderr, the first
 * that is one: "/dev/pts/3"), as a new string, or NULL (none, gone, or a
 * platform that cannot tell). For the audit trail: which terminal a
 * decision came from.
 */
char		*osdep_pid_tty(pid_t pid);
/* Names the mechanism used by osdep_peer_cred, or NULL if there is none. */
const char	*osdep_peer_cred_method(void);
/* Raises the open-file soft limit to the hard limit; returns the new soft limit. */
long		 osdep_raise_nofile(void);
/* Fills buf with random bytes (getrandom, else /dev/urandom). Returns 0 or -1. */
int		 osdep_random(void *buf, size_t len);
/* Wall-clock time in milliseconds since the epoch. */
int64_t		 osdep_now_ms(void);
/* Makes the allocator give big freed blocks back to the system at once. */
void		 osdep_memory_init(void);
/* Gives the allocator's free memory back to the system (not cheap: seldom). */
void		 osdep_memory_trim(void);
/*
 * A condition variable whose timed wait takes its deadline on
 * CLOCK_MONOTONIC, so that setting the wall clock neither stretches nor
 * cuts a wait. Both return 0 or an errno value, as pthreads does (the
 * wait ETIMEDOUT at the deadline).
 */
int		 osdep_cond_init(pthread_cond_t *);
int		 osdep_cond_timedwait(pthread_cond_t *, pthread_mutex_t *,
		     const struct timespec *deadline);

#endif
