/*
 * Platform code behind one small interface (STYLE.md habit 8). The
 * implementation is chosen by configure's HAVE_* results, never by OS name.
 */
#ifndef GBRD_OSDEP_H
#define GBRD_OSDEP_H

#include <sys/types.h>

#include <stdint.h>

/*
 * Gets the uid (and pid, -1 if unknown) of a Unix socket's peer. Returns -1
 * where the platform cannot tell: callers then refuse the peer (fail closed).
 */
int		 osdep_peer_cred(int fd, uid_t *uid, pid_t *pid);
/* Names the mechanism used by osdep_peer_cred, or NULL if there is none. */
const char	*osdep_peer_cred_method(void);
/* Raises the open-file soft limit to the hard limit; returns the new soft limit. */
long		 osdep_raise_nofile(void);
/* Fills buf with random bytes (getrandom, else /dev/urandom). Returns 0 or -1. */
int		 osdep_random(void *buf, size_t len);
/* Wall-clock time in milliseconds since the epoch. */
int64_t		 osdep_now_ms(void);

#endif
