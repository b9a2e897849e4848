/*
 * The messages between gbrd's runner (daemon/runner/runner.c) and gbr-exec
 * in server mode (gbr-exec -S: the fork server, see the top of gbr-exec.c
 * and server.c). Both ends are built from one tree and run on one machine,
 * so a message is this header in native byte order, one per
 * SOCK_SEQPACKET datagram, followed by its body; gbr-exec needs nothing
 * but libc to read it.
 *
 *   runner -> server
 *     RUN      job, argc, envc; body: argc then envc NUL-terminated
 *              strings (gbr-exec's options, "--", the target's argv; then
 *              the environment); GE_MSG_FDS descriptors ride along
 *              (SCM_RIGHTS): stdin, stdout, stderr, status
 *     KILL     job, arg = signal: to the run's process group, while the
 *              run's init is unreaped (so the group id is still the run's)
 *   server -> runner
 *     READY    arg = GE_READY_* flags, once, at start
 *     FAILED   job, kind = GE_FAIL_*, arg = errno: nothing ran
 *     DONE     job, arg = the init's wait status; the group has been
 *              killed and the init reaped. Only when the init did not end
 *              cleanly (exit 0 after its "end" status line, which the
 *              runner has read: see gbr-exec.c, "Status"), so a normal run
 *              costs the runner no wake-up on this socket (the init's
 *              pid is never sent either: the runner has no use for it).
 */
#ifndef GBR_EXEC_H
#define GBR_EXEC_H

#include <stdint.h>

/*
 * The folders every run may read and execute under Landlock (exec/
 * confine.c); gbrd leaves them out of what it adds (tool-run-home.c).
 */
#define GE_SYS_READ \
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", \
	"/etc", "/opt", "/proc", "/sys", "/nix/store", "/gnu/store", \
	"/run/systemd/resolve"

#define GE_MSG_MAGIC	0x67627831u	/* "gbx1" */
#define GE_MSG_MAX	(8u << 20)	/* bytes of one message, header included */
#define GE_MSG_ARGC_MAX	8192		/* strings of a RUN's argv */
#define GE_MSG_ENVC_MAX	2048		/* strings of a RUN's environment */
#define GE_MSG_FDS	4		/* stdin, stdout, stderr, status */

enum ge_msg_type {
	GE_MSG_READY = 1,
	GE_MSG_RUN,
	GE_MSG_KILL,
	GE_MSG_FAILED,
	GE_MSG_DONE,
};

/* Why a RUN did not start. */
enum ge_fail_kind {
	GE_FAIL_REQUEST = 1,	/* malformed: a bug, never retried */
	GE_FAIL_RESOURCES,	/* memory, descriptors, too many runs */
	GE_FAIL_CLONE,		/* the kernel refused the namespaces */
};

#define GE_READY_SHARED_VM	0x1	/* inits share the server's memory */

/*
 * The seccomp program gbrd compiles for runs without a pid namespace
 * (daemon/runner/runfilter.c) compares system call arguments with these two
 * values, as 32-bit numbers and negated; gbr-exec puts the pid of the
 * run's supervisor (itself) and of the runner (its -p) in their place.
 */
#define GE_PID_SUPERVISOR	0x7eadbee1
#define GE_PID_RUNNER		0x7eadbee2

struct ge_msg {
	uint32_t	magic;
	uint32_t	type;
	uint64_t	job;
	int32_t		arg;
	int32_t		kind;
	uint32_t	argc;
	uint32_t	envc;
};

#endif
