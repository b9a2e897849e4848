/*
 * What osdep.h says of a client's peer, on Windows. The peer's account is
 * told by the pipe listener (listen-win.c: GetNamedPipeClientProcessId and
 * the process token's user SID), so only the rest of osdep.h's peer
 * questions are answered here. Kept apart from the Windows osdep file to
 * come: it belongs with the pipe until the Windows sandbox exists.
 */
#include "gbr-config.h"

#include <sys/types.h>

#include "osdep.h"

/*
 * Whether the peer is a process an agent's command started. Not known on
 * Windows yet: the equivalent (a job object per run, and asking whether
 * the client's process is in one) comes with the Windows sandbox. Until
 * then this says 0, as osdep.h allows where the platform cannot tell
 * (there is no gbr-exec on Windows yet either): the daemon's status must
 * not claim this wall there.
 */
int
osdep_peer_in_run(int fd, pid_t pid)
{
	(void)fd;
	(void)pid;
	return 0;
}

/* Names how the peer's account is told. */
const char *
osdep_peer_cred_method(void)
{
	return "GetNamedPipeClientProcessId";
}
