/*
 * runfilter: the seccomp filter every agent command runs under. gbrd
 * builds it once at start with libseccomp and hands gbr-exec the compiled
 * BPF program through a sealed memory file; gbr-exec (which links only
 * against libc) applies it to the target just before the target's execve.
 *
 * The filter keeps a command away from every gbrd control channel and from
 * the processes that keep it confined, whichever daemon they belong to:
 *   - socket(AF_UNIX, ...) fails with EACCES (socketpair still works), so
 *     no pathname or abstract Unix socket can be reached: not this
 *     daemon's, not another gbrd's of the same user, not a client's;
 *   - io_uring cannot be set up (it makes sockets without socket(2));
 *   - ptrace, process_vm_readv/writev and pidfd_getfd fail (no stealing
 *     of a connected descriptor from a client or a daemon);
 *   - TIOCSTI and TIOCLINUX fail (no typing into a terminal);
 *   - keyctl, add_key and request_key fail (the user's keyrings).
 * The program for runs without a pid namespace also refuses signals to the
 * run's supervisor and to gbrd (kill, tkill, tgkill, rt_(tg)sigqueueinfo,
 * pidfd_open of their pids and their process groups; kill(-1); every
 * pidfd_send_signal; F_SETOWN and the owner ioctls pointing at them), so
 * the supervisor that ends the run's leftovers cannot be killed first. Its
 * comparisons hold placeholders (RUNFILTER_PID_SUPERVISOR and
 * RUNFILTER_PID_RUNNER, as 32-bit values and negated) that gbr-exec
 * replaces with the real pids (see gbr-exec.h and gbr-exec.c, "Seccomp").
 *
 * Processes of other architectures (i386, x32) are killed at their first
 * system call: the filter could not see their socketcall's arguments.
 */
#ifndef GBRD_RUNFILTER_H
#define GBRD_RUNFILTER_H

#include "gbr-exec.h"

/* Placeholder pids in the no-namespace program (see above). */
#define RUNFILTER_PID_SUPERVISOR	GE_PID_SUPERVISOR
#define RUNFILTER_PID_RUNNER		GE_PID_RUNNER

/*
 * Builds both programs. Returns 0, or -1 with *cause (caller frees) when
 * seccomp cannot be had here (built without libseccomp, or the kernel
 * refuses filters); the runner then says so and decides what that means.
 */
int		 runfilter_init(char **cause);
/*
 * A read-only descriptor of the compiled program (struct sock_filter
 * array) for runs with (ns 1) or without (ns 0) a pid namespace, or -1.
 * Borrowed: valid until runfilter_shutdown.
 */
int		 runfilter_fd(int ns);
/* Instructions in a program, for daemon.status. */
unsigned	 runfilter_size(int ns);
void		 runfilter_shutdown(void);

#endif
