/*
 * gbr-exec: the trampoline between gbrd's runner (runner.c) and the program
 * an agent asked to run. posix_spawn cannot apply resource limits, a
 * Landlock ruleset or namespaces in the child before the target runs, so
 * the runner spawns this small program instead, with the target's argument
 * vector after "--" and the limits as options; it applies them and then
 * runs the target. It links only against libc. It also runs as the
 * runner's fork server (-S, see "Server mode"), which applies the very same
 * setup without an exec of its own per run.
 *
 * usage: gbr-exec [options] -- PROGRAM [ARGS...]
 *        gbr-exec -S -s FD -p PID
 *   -C DIR     working folder
 *   -s FD      status descriptor (see "Status" below); with -S, the socket
 *              to the runner
 *   -p PID     the runner's pid: if the parent is no longer it, exit at once
 *   -c SECS    RLIMIT_CPU (seconds of CPU, per process)
 *   -a BYTES   RLIMIT_AS
 *   -f BYTES   RLIMIT_FSIZE
 *   -o COUNT   RLIMIT_NOFILE
 *   -n COUNT   processes the run may hold at once (see "Processes")
 *   -l MODE    Landlock: off, auto (where the kernel has ABI 2 or later)
 *              or require (refuse to run without it)
 *   -r PATH    readable (and executable) under Landlock; repeatable
 *   -w PATH    writable under Landlock (the allowed root, the temp folder)
 *   -N MODE    namespaces: off, auto or require (see "Namespaces")
 *   -x PATH    hidden from the target (a file: /dev/null is bound over it;
 *              used for gbrd's socket and config); needs namespaces
 *   -R PATH    made read-only by a bind mount (protected files inside a
 *              writable folder, .gbr_envs); needs namespaces
 *   -T         probe: set everything up, report it, exit 0 instead of
 *              running the target (gbrd learns what holds at start)
 *   -S         server mode (below)
 *
 * Always: every descriptor above the status one is closed, the core size
 * is 0, PR_SET_NO_NEW_PRIVS is set, PR_SET_PDEATHSIG is SIGKILL (the
 * target dies with the runner: the death signal survives execve when no
 * set-uid program runs, which no_new_privs guarantees), and when the real
 * uid is 0 every capability is dropped (bounding, ambient, permitted,
 * effective, inheritable; SECBIT_NOROOT locked) just before the target
 * runs, so root's target cannot undo the mounts or kill others.
 *
 * Namespaces. With -N auto or require, gbr-exec clones the namespace's
 * init into a new pid namespace and a new mount namespace (and, when not
 * root, a new user namespace mapping the user to itself so that this is
 * allowed); the init sets the run up and clones the target. The payoff:
 * the kernel kills every process of the namespace when its init ends, so
 * nothing the target starts survives the run, not even a process that
 * called setsid() or closed its pipes; the init has PR_SET_PDEATHSIG
 * against its parent (gbr-exec, or the server), which has it against the
 * runner, so the whole tree dies with gbrd; the target cannot name
 * (signal, ptrace) any process outside; and /dev/null can be bound over
 * gbrd's socket so the target cannot drive the daemon that runs it. The
 * init reaps orphans, forwards SIGTERM, SIGINT and SIGHUP to the namespace,
 * writes the target's exit status to the status descriptor and, once the
 * target has ended, kills what is left. Without namespaces (off, or auto
 * where the kernel refuses them) gbr-exec sets everything up and execs the
 * target itself: the runner's process-group kill is then the only reach
 * over grandchildren.
 *
 * Cost. Where a process is expensive to create (page tables copied, then
 * torn down), fork() costs as much as half an exec. So the init and the
 * target are clone()d with CLONE_VM: the init runs on its own stack in the
 * memory of the process that made it, and the target is made like
 * posix_spawn makes a child (CLONE_VM | CLONE_VFORK) and gets memory of its
 * own only at its execve. Code that runs in such a child (marked GE_CHILD)
 * must not touch what the other processes sharing the memory touch: no
 * malloc, no stdio, no static or global it writes, and no errno (the
 * thread-local errno is the parent's too). So every system call it makes
 * goes through ge_sys, which returns -errno and leaves errno alone; the
 * only libc calls it makes are the string functions (memcpy, strlen: no
 * state) and clone(), whose errno is read once, right away (a failed
 * clone can at worst report another process's errno). Where
 * ge_sys has no assembly (not x86_64 or aarch64), children are made
 * without CLONE_VM: as correct, only slower.
 *
 * Processes. RLIMIT_NPROC counts every process of the real uid and does
 * not apply to uid 0 at all, so a plain "-n 256" would either be
 * meaningless or break the user's other programs. gbr-exec makes it
 * meaningful as follows: inside a new user namespace the kernel counts
 * the uid's processes per namespace (Linux 5.14 and later), so the limit
 * is the run's own count; in a pid namespace on Linux 6.14 and later the
 * namespace's own pid_max is set to COUNT + 1 (at least 301, the kernel's
 * floor), which bounds the run for root too; without namespaces and not
 * root, the limit is the uid's current process count plus COUNT. Root
 * without namespaces has no process limit, and says so.
 *
 * Landlock (ABI 2 or later): every file system right the kernel knows is
 * handled; the -w paths get all of them, the -r paths and the system
 * folders (/usr, /bin, /sbin, /lib*, /etc, /opt, /proc, /sys, the Nix and
 * Guix stores) get read, list and execute, and /dev/null, /dev/zero,
 * /dev/full, /dev/random, /dev/urandom and /dev/shm are usable. With ABI 6
 * and later, signals and abstract Unix sockets are scoped to the sandbox.
 * Network access is not restricted.
 *
 * Status: gbr-exec and its init write single lines (atomic: under
 * PIPE_BUF) to the status descriptor, which the target never inherits:
 *   setup ns=0|1 userns=0|1 landlock=ABI caps=0|1 nproc=KIND hidden=N ro=N
 *                                    (namespace mode: written by the init
 *                                     once the target has ended, with how)
 *   error STAGE ERRNO                (setup failed; nothing ran)
 *   exit CODE | signal SIGNO CORE    (namespace mode: how the target ended)
 *   end                              (namespace mode: the init has reaped
 *                                     everything; nothing of the run is left)
 *   error init SIGNO                 (direct mode: the init was killed)
 * Without namespaces a successful execve closes the descriptor and the
 * runner reads the target's status from waitpid. After "end" the init
 * closes its descriptors and exits; the runner may take the run as over
 * from there (only the init holds the descriptor, so no process of the
 * run can write that line), without waiting for the kernel to tear the
 * namespaces down, which can take a while (an RCU grace period).
 *
 * Server mode (-S). gbrd starts one gbr-exec -S at start-up, with a
 * SOCK_SEQPACKET socket as -s; the messages are in gbr-exec.h. Each RUN
 * carries gbr-exec's options and the target's argv exactly as a direct run
 * would get them, the environment, and the run's stdin, stdout, stderr and
 * status descriptors. The server clones the run's init (namespaces are
 * required: without them a run would outlive a dead server) and makes it a
 * process group's leader at once (setpgid, before any KILL can come; the
 * server's session has no terminal); the init then does exactly what the
 * init of a direct run does, so a run costs the target's exec and little
 * more. What every run would redo the server does once at start (default
 * signal dispositions; for root, locked securebits and an empty capability
 * bounding set, which take nothing from the inits but everything from what
 * they exec), and it keeps a few stack pairs for reuse. The
 * server kills a run's group on KILL while its init is unreaped; when the
 * init ends it kills the group once more, reaps it and says DONE with its
 * wait status (the target's own status came through the status descriptor
 * as in a direct run). The server is single-threaded, has PR_SET_PDEATHSIG
 * against gbrd (and exits when the socket closes), makes itself
 * non-dumpable when it runs as root (as non-root, a new user namespace's
 * init must write its own uid_map, which needs a dumpable process; the
 * server then holds nothing a child could not read in /proc anyway), and
 * each init checks through a pidfd that the server is alive once its own
 * PR_SET_PDEATHSIG is set. If the server dies, every init dies (death
 * signal), and with it its namespace: gbrd then fails those runs and
 * starts another server.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>	/* ST_*: statfs(2)'s f_flags */
#include <sys/signalfd.h>
#endif
#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif
#ifdef HAVE_SYS_SYSCALL_H
#include <sys/syscall.h>
#endif
#ifdef HAVE_LINUX_LANDLOCK_H
#include <linux/landlock.h>
#endif
#ifdef HAVE_LINUX_CAPABILITY_H
#include <linux/capability.h>
#endif

#include "gbr-exec.h"

#define GE_PATHS_MAX	64	/* -r, -w, -x and -R paths, each */
#define GE_PIDMAX_MIN	301	/* the kernel's floor for pid_max */
#define GE_STACK	(128 * 1024)	/* an init's or a target's stack */
#define GE_GUARD	4096		/* below each stack, never mapped in */
#define GE_SV_RUNS_MAX	4096	/* runs one server holds at once */
#define GE_SV_POOL	32	/* stack pairs the server keeps for reuse */

/* Raw system calls (see "Cost" above): x86_64 and aarch64 Linux. */
#if defined(__linux__) && defined(HAVE_SYS_SYSCALL_H) && \
    (defined(__x86_64__) || defined(__aarch64__))
#define GE_RAW		1
#define GE_SHARE_VM	CLONE_VM
#else
#define GE_SHARE_VM	0
#endif

/* Namespaces need clone() and unshare()'s flags. */
#if defined(__linux__) && defined(HAVE_UNSHARE) && defined(CLONE_NEWPID)
#define GE_HAVE_NS	1
#endif

/*
 * Code that may run in a child sharing its parent's memory. The sanitizers'
 * runtime keeps per-thread state (the parent's) and must not run there.
 */
#if defined(__SANITIZE_ADDRESS__)
#define GE_CHILD	__attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GE_CHILD	__attribute__((no_sanitize_address))
#endif
#endif
#ifndef GE_CHILD
#define GE_CHILD
#endif

enum ge_mode {
	GE_OFF = 0,
	GE_AUTO,
	GE_REQUIRE,
};

struct ge_paths {
	const char	*v[GE_PATHS_MAX];
	int		 n;
};

struct ge_opts {
	const char	*dir;
	int		 status_fd;
	pid_t		 ppid;
	long long	 cpu, as, fsize, nofile, nproc;
	enum ge_mode	 landlock, ns;
	struct ge_paths	 rd, wr, hide, robind;
	int		 probe, server;
	char	*const	*argv;
};

/*
 * One run's namespace part: written by its maker before the init is
 * cloned, then by the init before the target is cloned; read by both.
 */
struct ge_run {
	struct ge_opts	 o;
	char *const	*envp;
	char		**shargv;	/* "sh", SCRIPT, args...: for ENOEXEC */
	char		*istack;	/* tops of the init's and target's stacks */
	char		*tstack;
	int		 server;	/* made by the server */
	int		 fds[GE_MSG_FDS];	/* server: stdin..status, moved to 0..3 */
	int		 alive_fd;	/* readable once the maker is gone */
	int		 alive_wr;	/* the maker's end of a pipe, or -1 */
	int		 userns;
	/* Written by the init. */
	int		 sfd;
	int		 abi, hidden, ro;
	const char	*nproc;
};

/* Set once before any child exists; read-only afterwards (ge_once). */
static int	ge_status = -1;
static int	ge_cap_last = 63;	/* the highest capability number */
static int	ge_pidmax_ns = -1;	/* pid_max is per namespace (6.14+) */
static int	ge_caps_bounded;	/* ge_caps_bound done (server, root) */

/*
 * The system call layer. ge_sys returns the kernel's result: a value, or
 * -errno; errno itself is never written where GE_RAW holds.
 */
#if defined(GE_RAW) && defined(__x86_64__)
static inline long GE_CHILD
ge_sys(long n, long a, long b, long c, long d, long e, long f)
{
	register long	r10 __asm__("r10") = d;
	register long	r8 __asm__("r8") = e;
	register long	r9 __asm__("r9") = f;
	long		ret;

	__asm__ __volatile__ ("syscall"
	    : "=a" (ret)
	    : "a" (n), "D" (a), "S" (b), "d" (c), "r" (r10), "r" (r8), "r" (r9)
	    : "rcx", "r11", "memory");
	return ret;
}
#elif defined(GE_RAW) && defined(__aarch64__)
static inline long GE_CHILD
ge_sys(long n, long a, long b, long c, long d, long e, long f)
{
	register long	x8 __asm__("x8") = n;
	register long	x0 __asm__("x0") = a;
	register long	x1 __asm__("x1") = b;
	register long	x2 __asm__("x2") = c;
	register long	x3 __asm__("x3") = d;
	register long	x4 __asm__("x4") = e;
	register long	x5 __asm__("x5") = f;

	__asm__ __volatile__ ("svc 0"
	    : "+r" (x0)
	    : "r" (x8), "r" (x1), "r" (x2), "r" (x3), "r" (x4), "r" (x5)
	    : "memory", "cc");
	return x0;
}
#endif

#ifndef GE_RAW
/* A libc result as the kernel's: -errno on failure. */
static inline long GE_CHILD
ge_ret(long r)
{
	return r == -1 ? -errno : r;
}
#endif

#ifdef GE_RAW
#define GE_S0(n)		ge_sys((n), 0, 0, 0, 0, 0, 0)
#define GE_S1(n, a)		ge_sys((n), (long)(a), 0, 0, 0, 0, 0)
#define GE_S2(n, a, b)		ge_sys((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define GE_S3(n, a, b, c)	ge_sys((n), (long)(a), (long)(b), (long)(c), \
				    0, 0, 0)
#define GE_S4(n, a, b, c, d)	ge_sys((n), (long)(a), (long)(b), (long)(c), \
				    (long)(d), 0, 0)
#define GE_S5(n, a, b, c, d, e)	ge_sys((n), (long)(a), (long)(b), (long)(c), \
				    (long)(d), (long)(e), 0)
#endif

#ifndef SYS_close_range
#define SYS_close_range	436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open	434
#endif

/* open(2). */
static int GE_CHILD
ge_open(const char *path, int flags, int mode)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_openat, AT_FDCWD, path, flags, mode);
#else
	return (int)ge_ret(open(path, flags, mode));
#endif
}

/* close(2). */
static int GE_CHILD
ge_close(int fd)
{
#ifdef GE_RAW
	return (int)GE_S1(SYS_close, fd);
#else
	return (int)ge_ret(close(fd));
#endif
}

/* read(2). */
static ssize_t GE_CHILD
ge_read(int fd, void *buf, size_t len)
{
#ifdef GE_RAW
	return GE_S3(SYS_read, fd, buf, len);
#else
	return ge_ret(read(fd, buf, len));
#endif
}

/* write(2). */
static ssize_t GE_CHILD
ge_write1(int fd, const void *buf, size_t len)
{
#ifdef GE_RAW
	return GE_S3(SYS_write, fd, buf, len);
#else
	return ge_ret(write(fd, buf, len));
#endif
}

/* Makes to a copy of from, without close-on-exec. Returns 0 or -errno. */
static int GE_CHILD
ge_dup_to(int from, int to)
{
	long	r;

	if (from == to)
		return 0;
#ifdef GE_RAW
	r = GE_S3(SYS_dup3, from, to, 0);
#else
	r = ge_ret(dup2(from, to));
#endif
	return r < 0 ? (int)r : 0;
}

/* fcntl(2) with an integer argument. */
static int GE_CHILD
ge_fcntl(int fd, int cmd, long arg)
{
#ifdef GE_RAW
	return (int)GE_S3(SYS_fcntl, fd, cmd, arg);
#else
	return (int)ge_ret(fcntl(fd, cmd, arg));
#endif
}

/* chdir(2). */
static int GE_CHILD
ge_chdir(const char *dir)
{
#ifdef GE_RAW
	return (int)GE_S1(SYS_chdir, dir);
#else
	return (int)ge_ret(chdir(dir));
#endif
}

/* execve(2); returns -errno. */
static int GE_CHILD
ge_execve(const char *path, char *const argv[], char *const envp[])
{
#ifdef GE_RAW
	return (int)GE_S3(SYS_execve, path, argv, envp);
#else
	return (int)ge_ret(execve(path, argv, envp));
#endif
}

/* Ends the process (never the libc exit: no atexit, no sanitizer hooks). */
static void __attribute__((noreturn)) GE_CHILD
ge_exit(int code)
{
#ifdef GE_RAW
	for (;;)
		(void)GE_S1(SYS_exit_group, code);
#else
	_exit(code);
#endif
}

/* kill(2). */
static int GE_CHILD
ge_kill(pid_t pid, int sig)
{
#ifdef GE_RAW
	return (int)GE_S2(SYS_kill, pid, sig);
#else
	return (int)ge_ret(kill(pid, sig));
#endif
}

/* wait4(2) without the usage. */
static pid_t GE_CHILD
ge_wait(pid_t pid, int *st, int options)
{
#ifdef GE_RAW
	return (pid_t)GE_S4(SYS_wait4, pid, st, options, NULL);
#else
	return (pid_t)ge_ret(waitpid(pid, st, options));
#endif
}

/* The real uid and gid. */
static uid_t GE_CHILD
ge_getuid(void)
{
#ifdef GE_RAW
	return (uid_t)GE_S0(SYS_getuid);
#else
	return getuid();
#endif
}

static pid_t GE_CHILD
ge_getpid(void)
{
#ifdef GE_RAW
	return (pid_t)GE_S0(SYS_getpid);
#else
	return getpid();
#endif
}

static gid_t GE_CHILD
ge_getgid(void)
{
#ifdef GE_RAW
	return (gid_t)GE_S0(SYS_getgid);
#else
	return getgid();
#endif
}

/* setrlimit(2), soft and hard. */
static int GE_CHILD
ge_setrlimit(int resource, const struct rlimit *rl)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_prlimit64, 0, resource, rl, NULL);
#else
	return (int)ge_ret(setrlimit(resource, rl));
#endif
}

#ifdef HAVE_SYS_PRCTL_H
/* prctl(2). */
static int GE_CHILD
ge_prctl(int op, unsigned long a, unsigned long b)
{
#ifdef GE_RAW
	return (int)GE_S5(SYS_prctl, op, a, b, 0, 0);
#else
	return (int)ge_ret(prctl(op, a, b, 0, 0));
#endif
}
#endif

/* lstat(2) (follow 0) or stat(2) (follow 1). */
static int GE_CHILD
ge_stat(const char *path, struct stat *st, int follow)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_newfstatat, AT_FDCWD, path, st,
	    follow ? 0 : AT_SYMLINK_NOFOLLOW);
#else
	return (int)ge_ret(follow ? stat(path, st) : lstat(path, st));
#endif
}

/* fstat(2). */
static int GE_CHILD
ge_fstat(int fd, struct stat *st)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#else
	return (int)ge_ret(fstat(fd, st));
#endif
}

/* uname(2). */
static int GE_CHILD
ge_uname(struct utsname *u)
{
#ifdef GE_RAW
	return (int)GE_S1(SYS_uname, u);
#else
	return (int)ge_ret(uname(u));
#endif
}

/* Blocks (how SIG_BLOCK), unblocks or sets signals, as a 64-bit mask. */
static int GE_CHILD
ge_sigmask(int how, uint64_t set, uint64_t *old)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_rt_sigprocmask, how, &set, old, sizeof set);
#else
	sigset_t	s, o;
	int		sig, r;

	sigemptyset(&s);
	for (sig = 1; sig < 64 && sig < NSIG; sig++)
		if (set & (1ULL << (sig - 1)))
			sigaddset(&s, sig);
	r = (int)ge_ret(sigprocmask(how, &s, &o));
	if (old != NULL) {
		*old = 0;
		for (sig = 1; sig < 64 && sig < NSIG; sig++)
			if (sigismember(&o, sig))
				*old |= 1ULL << (sig - 1);
	}
	return r;
#endif
}

/* Gives a signal its default action (no handler runs in shared memory). */
static void GE_CHILD
ge_sigdfl(int sig)
{
#ifdef GE_RAW
	struct {
		void		*handler;
		unsigned long	 flags;
		void		*restorer;
		uint64_t	 mask;
	} ksa;

	memset(&ksa, 0, sizeof ksa);
	ksa.handler = SIG_DFL;
	(void)GE_S4(SYS_rt_sigaction, sig, &ksa, NULL, sizeof ksa.mask);
#else
	struct sigaction	sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(sig, &sa, NULL);
#endif
}

#define GE_SIG(s)	(1ULL << ((s) - 1))

/* Writes a whole buffer, retrying on EINTR; errors are ignored. */
static void GE_CHILD
ge_write(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (fd != -1 && len > 0) {
		n = ge_write1(fd, buf, len);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* A status line being built (no stdio in children). */
struct ge_line {
	char	b[256];
	size_t	n;
};

/* Appends a string. */
static void GE_CHILD
ge_ls(struct ge_line *l, const char *s)
{
	while (*s != '\0' && l->n < sizeof l->b - 1)
		l->b[l->n++] = *s++;
}

/* Appends a number. */
static void GE_CHILD
ge_ln(struct ge_line *l, long long v)
{
	char			t[24];
	unsigned long long	u;
	int			i = 0;

	if (v < 0) {
		ge_ls(l, "-");
		u = 0ULL - (unsigned long long)v;
	} else
		u = (unsigned long long)v;
	do
		t[i++] = (char)('0' + u % 10);
	while ((u /= 10) != 0 && i < (int)sizeof t);
	while (i > 0 && l->n < sizeof l->b - 1)
		l->b[l->n++] = t[--i];
}

/* Writes the line to the status descriptor (one write: atomic). */
static void GE_CHILD
ge_lsend(struct ge_line *l)
{
	ge_write(ge_status, l->b, l->n);
}

/* Reports a failed setup stage and exits. */
static void __attribute__((noreturn)) GE_CHILD
ge_fail(const char *stage, int err)
{
	struct ge_line	l;

	l.n = 0;
	ge_ls(&l, "error ");
	ge_ls(&l, stage);
	ge_ls(&l, " ");
	ge_ln(&l, err);
	ge_ls(&l, "\n");
	ge_lsend(&l);
	ge_exit(126);
}

/* Parses a non-negative integer; -1 if it is not one. */
static long long
ge_number(const char *s)
{
	char		*end;
	long long	 v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0)
		return -1;
	return v;
}

/* Parses off, auto or require; -1 otherwise. */
static int
ge_mode(const char *s)
{
	if (strcmp(s, "off") == 0)
		return GE_OFF;
	if (strcmp(s, "auto") == 0)
		return GE_AUTO;
	if (strcmp(s, "require") == 0)
		return GE_REQUIRE;
	return -1;
}

/* Adds a path to a bounded list; -1 if full or not absolute. */
static int
ge_add(struct ge_paths *p, const char *path)
{
	if (p->n >= GE_PATHS_MAX || path[0] != '/')
		return -1;
	p->v[p->n++] = path;
	return 0;
}

/*
 * Parses the options (getopt's "+C:s:p:c:a:f:o:n:l:r:w:N:x:R:TS", by hand:
 * the server parses one vector per run). Returns 0, or -1 with *why
 * pointing at a static reason and *bad at the offending word.
 */
static int
ge_parse(struct ge_opts *o, int argc, char **argv, const char **why,
    const char **bad)
{
	const char	*a, *val;
	long long	 v;
	int		 i, m;
	char		 c;

	memset(o, 0, sizeof *o);
	o->status_fd = -1;
	o->cpu = o->as = o->fsize = o->nofile = o->nproc = -1;
	o->landlock = o->ns = GE_OFF;
	*why = NULL;
	*bad = NULL;
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (a[0] != '-' || a[1] == '\0')
			break;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		*bad = a;
		c = a[1];
		if (c == 'T' || c == 'S') {
			if (a[2] != '\0') {
				*why = "takes no value";
				return -1;
			}
			if (c == 'T')
				o->probe = 1;
			else
				o->server = 1;
			continue;
		}
		if (strchr("Cspcafonlrw NxR", c) == NULL || c == ' ') {
			*why = "unknown option";
			return -1;
		}
		if (a[2] != '\0')
			val = a + 2;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			*why = "needs a value";
			return -1;
		}
		*bad = val;
		v = 0;
		if (strchr("spcafon", c) != NULL && (v = ge_number(val)) < 0) {
			*why = "needs a number";
			return -1;
		}
		m = 0;
		if ((c == 'l' || c == 'N') && (m = ge_mode(val)) < 0) {
			*why = "takes off, auto or require";
			return -1;
		}
		switch (c) {
		case 'C': o->dir = val; break;
		case 's': o->status_fd = v > INT_MAX ? -1 : (int)v; break;
		case 'p': o->ppid = (pid_t)v; break;
		case 'c': o->cpu = v; break;
		case 'a': o->as = v; break;
		case 'f': o->fsize = v; break;
		case 'o': o->nofile = v; break;
		case 'n': o->nproc = v; break;
		case 'l': o->landlock = (enum ge_mode)m; break;
		case 'N': o->ns = (enum ge_mode)m; break;
		case 'r': m = ge_add(&o->rd, val); break;
		case 'w': m = ge_add(&o->wr, val); break;
		case 'x': m = ge_add(&o->hide, val); break;
		case 'R': m = ge_add(&o->robind, val); break;
		}
		if (m < 0) {
			*why = "too many paths, or not absolute";
			return -1;
		}
	}
	*bad = NULL;
	o->argv = argv + i;
	if (!o->server && i >= argc) {
		*why = "no program to run";
		return -1;
	}
	return 0;
}

/* Closes every descriptor from first on (close_range where it exists). */
static void GE_CHILD
ge_close_from(int first)
{
#ifdef GE_RAW
	char		 buf[4096];
	long		 n, off, fd;
	int		 dfd;
	const char	*p;

	if (GE_S3(SYS_close_range, first, ~0U, 0) == 0)
		return;
	/* Before Linux 5.9: what /proc/self/fd lists, read by hand. */
	if ((dfd = ge_open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    0)) < 0) {
		for (fd = first; fd < 65536; fd++)
			(void)ge_close((int)fd);
		return;
	}
	while ((n = GE_S3(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
		for (off = 0; off < n; ) {
			/* struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name */
			unsigned short	reclen;

			memcpy(&reclen, buf + off + 16, sizeof reclen);
			p = buf + off + 19;
			for (fd = 0; *p >= '0' && *p <= '9'; p++)
				fd = fd * 10 + (*p - '0');
			if (*p == '\0' && p != buf + off + 19 && fd >= first &&
			    fd != dfd)
				(void)ge_close((int)fd);
			if (reclen == 0)
				break;
			off += reclen;
		}
	}
	(void)ge_close(dfd);
#else
#ifdef HAVE_CLOSE_RANGE
	if (close_range((unsigned)first, ~0U, 0) == 0)
		return;
#endif
	{
		DIR		*d;
		struct dirent	*de;
		long		 fd, max;

		/* /proc/self/fd lists what is open; else a bounded loop. */
		if ((d = opendir("/proc/self/fd")) != NULL) {
			while ((de = readdir(d)) != NULL) {
				fd = strtol(de->d_name, NULL, 10);
				if (fd >= first && fd != dirfd(d))
					close((int)fd);
			}
			closedir(d);
			return;
		}
		max = sysconf(_SC_OPEN_MAX);
		if (max < 0 || max > 65536)
			max = 65536;
		for (fd = first; fd < max; fd++)
			close((int)fd);
	}
#endif
}

/* Sets one resource limit (soft and hard), unless v is -1. */
static void GE_CHILD
ge_rlimit(int resource, const char *stage, long long v)
{
	struct rlimit	rl;
	int		r;

	if (v < 0)
		return;
	rl.rlim_cur = rl.rlim_max = (rlim_t)v;
	if ((r = ge_setrlimit(resource, &rl)) < 0)
		ge_fail(stage, -r);
}

/* Reads a decimal number at *p, moving *p past it. */
static long GE_CHILD
ge_atol(const char **p)
{
	long	v = 0;

	while (**p >= '0' && **p <= '9' && v < 100000)
		v = v * 10 + (*(*p)++ - '0');
	return v;
}

/* True if the running kernel is at least major.minor. */
static int GE_CHILD
ge_kernel_at_least(int major, int minor)
{
	struct utsname	 u;
	const char	*p;
	long		 ma, mi;

	if (ge_uname(&u) != 0)
		return 0;
	p = u.release;
	ma = ge_atol(&p);
	if (*p++ != '.')
		return 0;
	mi = ge_atol(&p);
	return ma > major || (ma == major && mi >= minor);
}

/*
 * Counts the tasks (threads included) the real uid has now, from /proc.
 * Only without namespaces, in gbr-exec's own process: it uses libc freely.
 */
static long long
ge_uid_tasks(void)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	char		 path[300], buf[512], *p;
	long long	 n = 0;
	uid_t		 uid = getuid();
	ssize_t		 len;
	int		 fd, field;

	if ((d = opendir("/proc")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 ||
		    st.st_uid != uid)
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		len = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		/* num_threads is field 20; the name (field 2) ends at the last ')'. */
		if ((p = strrchr(buf, ')')) == NULL)
			continue;
		for (field = 2; *p != '\0' && field < 20; p++)
			if (*p == ' ')
				field++;
		n += field == 20 ? strtoll(p, NULL, 10) : 1;
	}
	closedir(d);
	return n;
}

/*
 * The Landlock part. The kernel ABI is stable, so what an old
 * <linux/landlock.h> lacks is defined here with the kernel's values.
 */
#if defined(HAVE_LINUX_LANDLOCK_H) && defined(SYS_landlock_create_ruleset)
#define GE_HAVE_LANDLOCK 1

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE	(1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV	(1ULL << 15)
#endif
#define GE_LL_SCOPE_ABSTRACT_UNIX	(1ULL << 0)
#define GE_LL_SCOPE_SIGNAL		(1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6 (the kernel takes a size). */
struct ge_ll_attr {
	uint64_t	fs;
	uint64_t	net;
	uint64_t	scoped;
};

#define GE_LL_READ	(LANDLOCK_ACCESS_FS_EXECUTE | \
	LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* The rights that apply to a file (others are for folders only). */
#define GE_LL_FILE	(LANDLOCK_ACCESS_FS_EXECUTE | \
	LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
	LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* A Landlock system call (through ge_sys where it exists). */
static long GE_CHILD
ge_ll(long n, long a, long b, long c)
{
#ifdef GE_RAW
	return GE_S3(n, a, b, c);
#else
	return ge_ret(syscall(n, a, b, c));
#endif
}

/* The Landlock ABI the kernel offers, or 0. */
static int GE_CHILD
ge_ll_abi(void)
{
	long	v;

	v = ge_ll(SYS_landlock_create_ruleset, 0, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	return v < 0 ? 0 : (int)v;
}

/* Every file system right an ABI knows. */
static uint64_t GE_CHILD
ge_ll_fs_rights(int abi)
{
	uint64_t	r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;	/* ABI 1 */

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

/*
 * Allows rights beneath path. A missing optional path is skipped; a
 * missing required one is an error. A path known to be a file (file 1:
 * the devices) gets only a file's rights without a look: were it a folder,
 * it would get fewer rights, never more.
 */
static void GE_CHILD
ge_ll_allow(int ruleset, const char *path, uint64_t rights, uint64_t handled,
    int required, int file)
{
	struct landlock_path_beneath_attr	 pb;
	struct stat				 st;
	int					 fd, r;

	if (file) {
		fd = ge_open(path, O_PATH | O_CLOEXEC, 0);
		rights &= GE_LL_FILE;
	/* A folder opens with O_DIRECTORY: no fstat needed for most paths. */
	} else if ((fd = ge_open(path, O_PATH | O_CLOEXEC | O_DIRECTORY, 0)) ==
	    -ENOTDIR) {
		if ((fd = ge_open(path, O_PATH | O_CLOEXEC, 0)) >= 0) {
			if ((r = ge_fstat(fd, &st)) != 0)
				ge_fail("landlock-path", -r);
			if (!S_ISDIR(st.st_mode))
				rights &= GE_LL_FILE;
		}
	}
	if (fd < 0) {
		if (!required && (fd == -ENOENT || fd == -EACCES ||
		    fd == -ENOTDIR))
			return;
		ge_fail("landlock-path", -fd);
	}
	memset(&pb, 0, sizeof pb);
	pb.allowed_access = rights & handled;
	pb.parent_fd = fd;
	if (pb.allowed_access != 0 && (r = (int)ge_ll(SYS_landlock_add_rule,
	    ruleset, LANDLOCK_RULE_PATH_BENEATH, (long)&pb)) != 0)
		ge_fail("landlock-rule", -r);
	(void)ge_close(fd);
}

/* Builds and enforces the ruleset. Returns the ABI used, or 0 for none. */
static int GE_CHILD
ge_landlock(const struct ge_opts *o)
{
	static const char *const sys_ro[] = {
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
		"/etc", "/opt", "/proc", "/sys", "/nix/store", "/gnu/store",
		"/run/systemd/resolve",
	};
	static const char *const sys_dev[] = {	/* files, then /dev/shm */
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
		"/dev/urandom", "/dev/shm",
	};
	struct ge_ll_attr	 attr;
	size_t			 size, i;
	uint64_t		 handled;
	int			 abi, rs, r;

	if (o->landlock == GE_OFF)
		return 0;
	abi = ge_ll_abi();
	if (abi < 2) {
		/*
		 * ABI 1 denies every rename and link across folders, which
		 * breaks ordinary builds; we ask for 2 or refuse (require).
		 */
		if (o->landlock == GE_REQUIRE)
			ge_fail("landlock-abi", abi == 0 ? EOPNOTSUPP : ENOTSUP);
		return 0;
	}
	memset(&attr, 0, sizeof attr);
	handled = attr.fs = ge_ll_fs_rights(abi);
	size = sizeof attr.fs;
	if (abi >= 6) {
		attr.scoped = GE_LL_SCOPE_ABSTRACT_UNIX | GE_LL_SCOPE_SIGNAL;
		size = sizeof attr;
	}
	if ((rs = (int)ge_ll(SYS_landlock_create_ruleset, (long)&attr,
	    (long)size, 0)) < 0)
		ge_fail("landlock-create", -rs);
	for (i = 0; i < sizeof sys_ro / sizeof sys_ro[0]; i++)
		ge_ll_allow(rs, sys_ro[i], GE_LL_READ, handled, 0, 0);
	for (i = 0; i < sizeof sys_dev / sizeof sys_dev[0]; i++)
		ge_ll_allow(rs, sys_dev[i], handled, handled, 0,
		    i + 1 < sizeof sys_dev / sizeof sys_dev[0]);
	for (i = 0; i < (size_t)o->rd.n; i++)
		ge_ll_allow(rs, o->rd.v[i], GE_LL_READ, handled, 0, 0);
	for (i = 0; i < (size_t)o->wr.n; i++)
		ge_ll_allow(rs, o->wr.v[i], handled, handled, 1, 0);
	if ((r = (int)ge_ll(SYS_landlock_restrict_self, rs, 0, 0)) != 0)
		ge_fail("landlock-restrict", -r);
	(void)ge_close(rs);
	return abi;
}
#else
/* Built without Landlock: "require" cannot be met. */
static int GE_CHILD
ge_landlock(const struct ge_opts *o)
{
	if (o->landlock == GE_REQUIRE)
		ge_fail("landlock-abi", EOPNOTSUPP);
	return 0;
}
#endif

#if defined(HAVE_SYS_PRCTL_H) && defined(HAVE_LINUX_CAPABILITY_H) && \
    defined(SYS_capset) && defined(PR_SET_SECUREBITS)
/*
 * The part of dropping root's capabilities that takes nothing away from
 * the caller now, only from what it runs: NOROOT, NO_SETUID_FIXUP and
 * NO_CAP_AMBIENT_RAISE, each locked, and KEEP_CAPS locked off
 * (<linux/securebits.h> bits 0-3 and 5-7: execve never hands uid 0 its
 * capabilities back), an empty bounding set, no ambient capabilities.
 * The fork server does it once at start, for all its runs (its inits keep
 * their effective capabilities for the mounts); else each target does.
 * Returns 0, or -errno with *stage.
 */
static int GE_CHILD
ge_caps_bound(const char **stage)
{
	int	c, r;

	*stage = "securebits";
	if ((r = ge_prctl(PR_SET_SECUREBITS, 0xef, 0)) != 0)
		return r;
	*stage = "capbset";
	for (c = 0; c <= ge_cap_last; c++)
		if ((r = ge_prctl(PR_CAPBSET_DROP, (unsigned long)c, 0)) != 0 &&
		    r != -EINVAL)
			return r;
#ifdef PR_CAP_AMBIENT
	(void)ge_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0);
#endif
	return 0;
}
#endif

/* Drops every capability for good (uid 0 only). Returns 1 if done. */
static int GE_CHILD
ge_drop_caps(void)
{
#if defined(HAVE_SYS_PRCTL_H) && defined(HAVE_LINUX_CAPABILITY_H) && \
    defined(SYS_capset) && defined(PR_SET_SECUREBITS)
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[2];
	const char			*stage;
	int				r;

	if (ge_getuid() != 0)
		return 0;
	if (!ge_caps_bounded && (r = ge_caps_bound(&stage)) != 0)
		ge_fail(stage, -r);
	memset(&hdr, 0, sizeof hdr);
	memset(data, 0, sizeof data);
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
#ifdef GE_RAW
	r = (int)GE_S2(SYS_capset, &hdr, data);
#else
	r = (int)ge_ret(syscall(SYS_capset, &hdr, data));
#endif
	if (r != 0)
		ge_fail("capset", -r);
	return 1;
#else
	return 0;
#endif
}

/* Writes a short string to a /proc file. Returns 0 or -errno. */
static int GE_CHILD
ge_proc_write(const char *path, const char *s)
{
	size_t	len = strlen(s);
	ssize_t	n;
	int	fd, r;

	if ((fd = ge_open(path, O_WRONLY | O_CLOEXEC, 0)) < 0)
		return fd;
	n = ge_write1(fd, s, len);
	r = ge_close(fd);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	return r;
}

/* In a new user namespace: the user stays itself inside. */
static void GE_CHILD
ge_userns_map(uid_t uid, gid_t gid)
{
	struct ge_line	l;
	int		r;

	if ((r = ge_proc_write("/proc/self/setgroups", "deny")) != 0)
		ge_fail("userns-map", -r);
	l.n = 0;
	ge_ln(&l, uid);
	ge_ls(&l, " ");
	ge_ln(&l, uid);
	ge_ls(&l, " 1\n");
	l.b[l.n] = '\0';
	if ((r = ge_proc_write("/proc/self/uid_map", l.b)) != 0)
		ge_fail("userns-map", -r);
	l.n = 0;
	ge_ln(&l, gid);
	ge_ls(&l, " ");
	ge_ln(&l, gid);
	ge_ls(&l, " 1\n");
	l.b[l.n] = '\0';
	if ((r = ge_proc_write("/proc/self/gid_map", l.b)) != 0)
		ge_fail("userns-map", -r);
}

#ifdef GE_HAVE_NS
/* mount(2). */
static int GE_CHILD
ge_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data)
{
#ifdef GE_RAW
	return (int)GE_S5(SYS_mount, src, dst, type, flags, data);
#else
	return (int)ge_ret(mount(src, dst, type, flags, data));
#endif
}

/* The flags a read-only remount must keep (a user namespace locks them). */
static unsigned long GE_CHILD
ge_locked_flags(const char *path)
{
	struct statfs	sf;
	unsigned long	f = 0;

#ifdef GE_RAW
	if (GE_S2(SYS_statfs, path, &sf) != 0)
		return 0;
#else
	if (statfs(path, &sf) != 0)
		return 0;
#endif
	/* f_flags holds the ST_* mount flags (Linux 2.6.36 and later). */
	if (sf.f_flags & ST_NOSUID)
		f |= MS_NOSUID;
	if (sf.f_flags & ST_NODEV)
		f |= MS_NODEV;
	if (sf.f_flags & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sf.f_flags & ST_NOATIME)
		f |= MS_NOATIME;
	if (sf.f_flags & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sf.f_flags & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/*
 * In the new mount namespace: nothing propagates back to the host, /dev/null
 * covers each hidden file, and each -R path is bound read-only over itself.
 * Returns how many paths were hidden; *ro says how many were bound.
 */
static int GE_CHILD
ge_mounts(const struct ge_opts *o, int *ro)
{
	struct stat	st;
	int		i, r, hidden = 0;

	*ro = 0;
	if ((r = ge_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) != 0)
		ge_fail("mount-private", -r);
	for (i = 0; i < o->hide.n; i++) {
		if (ge_stat(o->hide.v[i], &st, 0) != 0)
			continue;	/* nothing there to reach */
		if (S_ISDIR(st.st_mode))
			r = ge_mount("tmpfs", o->hide.v[i], "tmpfs",
			    MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
			    "size=4k,mode=000");
		else
			r = ge_mount("/dev/null", o->hide.v[i], NULL, MS_BIND,
			    NULL);
		if (r != 0)
			ge_fail("mount-hide", -r);
		hidden++;
	}
	for (i = 0; i < o->robind.n; i++) {
		if (ge_stat(o->robind.v[i], &st, 0) != 0 || S_ISLNK(st.st_mode))
			continue;
		if ((r = ge_mount(o->robind.v[i], o->robind.v[i], NULL,
		    MS_BIND | MS_REC, NULL)) != 0 ||
		    (r = ge_mount(NULL, o->robind.v[i], NULL, MS_REMOUNT |
		    MS_BIND | MS_RDONLY | ge_locked_flags(o->robind.v[i]),
		    NULL)) != 0)
			ge_fail("mount-readonly", -r);
		(*ro)++;
	}
	return hidden;
}
#endif

/*
 * Sets the process limit meaningfully (see the top). Returns its kind (a
 * string constant). Only in_pidns == 0 may count the uid's tasks, which
 * needs libc: that is gbr-exec's own process, never a shared-memory child.
 */
static const char * GE_CHILD
ge_nproc(const struct ge_opts *o, int in_pidns, int userns)
{
	struct ge_line	 l;
	long long	 cur, lim;

	if (o->nproc < 0)
		return "none";
	if (in_pidns && (ge_pidmax_ns != -1 ? ge_pidmax_ns :
	    ge_kernel_at_least(6, 14))) {
		/*
		 * Only from 6.14 is pid_max per namespace; before, this file
		 * is the whole machine's, so it is never written there.
		 */
		lim = o->nproc + 1 < GE_PIDMAX_MIN ? GE_PIDMAX_MIN : o->nproc + 1;
		l.n = 0;
		ge_ln(&l, lim);
		l.b[l.n] = '\0';
		if (ge_proc_write("/proc/sys/kernel/pid_max", l.b) == 0) {
			if (userns)
				ge_rlimit(RLIMIT_NPROC, "rlimit-nproc", o->nproc);
			return "pid_max";
		}
	}
	if (userns) {
		ge_rlimit(RLIMIT_NPROC, "rlimit-nproc", o->nproc);
		return "rlimit-userns";
	}
	if (ge_getuid() == 0 || in_pidns)
		return "none";
	if ((cur = ge_uid_tasks()) < 0)
		cur = 0;
	ge_rlimit(RLIMIT_NPROC, "rlimit-nproc", cur + o->nproc);
	return "rlimit-uid";
}

/* Applies the limits every mode shares. */
static void GE_CHILD
ge_limits(const struct ge_opts *o)
{
	ge_rlimit(RLIMIT_CORE, "rlimit-core", 0);
	ge_rlimit(RLIMIT_CPU, "rlimit-cpu", o->cpu);
	ge_rlimit(RLIMIT_AS, "rlimit-as", o->as);
	ge_rlimit(RLIMIT_FSIZE, "rlimit-fsize", o->fsize);
	ge_rlimit(RLIMIT_NOFILE, "rlimit-nofile", o->nofile);
#ifdef PR_SET_NO_NEW_PRIVS
	{
		int	r;

		if ((r = ge_prctl(PR_SET_NO_NEW_PRIVS, 1, 0)) != 0)
			ge_fail("no-new-privs", -r);
	}
#endif
}

/*
 * execve with a PATH search in envp's PATH (execvpe, without libc): a name
 * with a slash is run as it is; ENOEXEC runs the file with /bin/sh (through
 * shargv, which has room for it); EACCES anywhere wins over ENOENT, and
 * any other error stops the search. Returns -errno.
 */
static int GE_CHILD
ge_execvpe(char *const argv[], char *const envp[], char **shargv)
{
	const char	*file = argv[0], *path = "/bin:/usr/bin", *p, *q;
	char		 buf[PATH_MAX];
	size_t		 flen, dlen;
	int		 r, eacces = 0, last = -ENOENT;

	for (flen = 0; file[flen] != '\0'; flen++)
		if (file[flen] == '/')
			break;
	if (file[flen] == '/') {
		r = ge_execve(file, argv, envp);
		if (r == -ENOEXEC && shargv != NULL) {
			shargv[1] = (char *)file;
			(void)ge_execve("/bin/sh", shargv, envp);
		}
		return r;
	}
	if (flen == 0)
		return -ENOENT;
	for (r = 0; envp != NULL && envp[r] != NULL; r++)
		if (strncmp(envp[r], "PATH=", 5) == 0) {
			path = envp[r] + 5;
			break;
		}
	for (p = path; ; p = q + 1) {
		for (q = p; *q != '\0' && *q != ':'; q++)
			;
		dlen = (size_t)(q - p);
		if (dlen == 0) {
			buf[0] = '.';
			dlen = 1;
		} else if (dlen < sizeof buf)
			memcpy(buf, p, dlen);
		if (dlen + 1 + flen + 1 <= sizeof buf) {
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			r = ge_execve(buf, argv, envp);
			if (r == -ENOEXEC && shargv != NULL) {
				shargv[1] = buf;
				(void)ge_execve("/bin/sh", shargv, envp);
				return r;
			}
			switch (r) {
			case -EACCES:
				eacces = 1;
				/* FALLTHROUGH */
			case -ENOENT:
			case -ESTALE:
			case -ENOTDIR:
			case -ENODEV:
			case -ETIMEDOUT:
				last = r;
				break;
			default:
				return r;
			}
		}
		if (*q == '\0')
			break;
	}
	return eacces ? -EACCES : last;
}

/* Runs the target; reports and exits if it cannot. */
static void __attribute__((noreturn)) GE_CHILD
ge_exec(const struct ge_opts *o, char *const envp[], char **shargv)
{
	int	r;

	if (o->probe)
		ge_exit(0);
	r = ge_execvpe(o->argv, envp, shargv);
	ge_fail("exec", -r);
}

/* Appends the setup line (see "Status") to l. */
static void GE_CHILD
ge_line_setup(struct ge_line *l, int ns, int userns, int abi, int caps,
    const char *nproc, int hidden, int ro)
{
	ge_ls(l, "setup ns=");
	ge_ln(l, ns);
	ge_ls(l, " userns=");
	ge_ln(l, userns);
	ge_ls(l, " landlock=");
	ge_ln(l, abi);
	ge_ls(l, " caps=");
	ge_ln(l, caps);
	ge_ls(l, " nproc=");
	ge_ls(l, nproc);
	ge_ls(l, " hidden=");
	ge_ln(l, hidden);
	ge_ls(l, " ro=");
	ge_ln(l, ro);
	ge_ls(l, "\n");
}

/* Writes the setup line (see "Status"). */
static void GE_CHILD
ge_report_setup(int ns, int userns, int abi, int caps, const char *nproc,
    int hidden, int ro)
{
	struct ge_line	l;

	l.n = 0;
	ge_line_setup(&l, ns, userns, abi, caps, nproc, hidden, ro);
	ge_lsend(&l);
}

#ifdef GE_HAVE_NS
/*
 * The target, cloned by the init with CLONE_VFORK (and CLONE_VM where
 * ge_sys is raw): default signals, no capabilities, then the program.
 */
static int GE_CHILD
ge_target(void *arg)
{
	struct ge_run	*r = arg;
	int		 e;

	/*
	 * Every disposition is the default already (ge_once; the init set
	 * only defaults), so only the mask is left to clear. The init says
	 * "setup" once the target has ended (one write, one wake-up of the
	 * runner); a failure here says "error" first.
	 */
	(void)ge_close(r->sfd);
	(void)ge_sigmask(SIG_SETMASK, 0, NULL);
	(void)ge_drop_caps();
	if ((e = ge_fcntl(ge_status, F_SETFD, FD_CLOEXEC)) != 0 &&
	    ge_status != -1)
		ge_fail("cloexec", -e);
	ge_exec(&r->o, r->envp, r->shargv);
}

/* Appends how the target ended to l. */
static void GE_CHILD
ge_line_end(struct ge_line *l, int st)
{
	if (WIFSIGNALED(st)) {
		ge_ls(l, "signal ");
		ge_ln(l, WTERMSIG(st));
		ge_ls(l, WCOREDUMP(st) ? " 1\n" : " 0\n");
	} else {
		ge_ls(l, "exit ");
		ge_ln(l, WEXITSTATUS(st));
		ge_ls(l, "\n");
	}
}

/*
 * The namespace's init (cloned into the new namespaces): sets the run up,
 * clones the target, reaps everything, reports how the target ended, then
 * ends the namespace.
 */
static int GE_CHILD
ge_init(void *arg)
{
	struct ge_run	*r = arg;
	struct pollfd	 pfd;
	struct signalfd_siginfo si;
	uint64_t	 fwd = GE_SIG(SIGTERM) | GE_SIG(SIGINT) | GE_SIG(SIGHUP);
	struct ge_line	 l;
	pid_t		 target, pid;
	ssize_t		 n;
	int		 st, i, e, done = 0, clean = 0;

	/* The server's run: its descriptors become 0-3 (3: the status). */
	if (r->server)
		for (i = 0; i < GE_MSG_FDS; i++)
			if ((e = ge_dup_to(r->fds[i], i)) != 0)
				ge_fail("dup", -e);
	/*
	 * What follows (pid_max, kill(-1, ...)) is right only in a pid
	 * namespace of our own, where the init is pid 1: never act on the
	 * host's if a caller forgot CLONE_NEWPID.
	 */
	if (ge_getpid() != 1)
		ge_fail("pid-namespace", ESRCH);
	if ((e = ge_prctl(PR_SET_PDEATHSIG, SIGKILL, 0)) != 0)
		ge_fail("pdeathsig", -e);
	/* The maker may have died before the line above: then stop here. */
	if (r->alive_wr != -1)
		(void)ge_close(r->alive_wr);
	pfd.fd = r->alive_fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
#ifdef GE_RAW
	{
		struct timespec	zero = { 0, 0 };

		if (GE_S5(SYS_ppoll, &pfd, 1, &zero, NULL, 8) != 0)
			ge_exit(125);
	}
#else
	if (poll(&pfd, 1, 0) != 0)
		ge_exit(125);
#endif
	/*
	 * Nothing else of the maker's stays open. (The server has made this
	 * init a process group's leader already: see ge_sv_run.)
	 */
	ge_close_from(r->server ? GE_MSG_FDS : ge_status > 2 ? ge_status + 1 : 3);
	if (r->userns)
		ge_userns_map(ge_getuid(), ge_getgid());
	if (r->server && r->o.dir != NULL && (e = ge_chdir(r->o.dir)) != 0)
		ge_fail("chdir", -e);
	r->hidden = ge_mounts(&r->o, &r->ro);
	r->nproc = ge_nproc(&r->o, 1, r->userns);
	ge_limits(&r->o);
	r->abi = ge_landlock(&r->o);

	/* Every signal waits; the forwarded ones and SIGCHLD are read here. */
	(void)ge_sigmask(SIG_SETMASK, ~0ULL, NULL);
	ge_sigdfl(SIGTERM);
	ge_sigdfl(SIGINT);
	ge_sigdfl(SIGHUP);
	{
		uint64_t	mask = fwd | GE_SIG(SIGCHLD);

#ifdef GE_RAW
		r->sfd = (int)GE_S4(SYS_signalfd4, -1, &mask, sizeof mask,
		    SFD_CLOEXEC);
#else
		sigset_t	s;
		int		sig;

		sigemptyset(&s);
		for (sig = 1; sig < 64; sig++)
			if (mask & GE_SIG(sig))
				sigaddset(&s, sig);
		r->sfd = (int)ge_ret(signalfd(-1, &s, SFD_CLOEXEC));
#endif
		if (r->sfd < 0)
			ge_fail("signalfd", -r->sfd);
	}
	target = clone(ge_target, r->tstack,
	    GE_SHARE_VM | CLONE_VFORK | SIGCHLD, r);
	if (target == -1)
		ge_fail("fork", errno);	/* see "Cost" at the top */
	l.n = 0;
	for (;;) {
		n = ge_read(r->sfd, &si, sizeof si);
		if (n == -EINTR)
			continue;
		if (n != (ssize_t)sizeof si)
			break;
		if (si.ssi_signo != SIGCHLD) {
			(void)ge_kill(-1, (int)si.ssi_signo);
			continue;
		}
		while ((pid = ge_wait(-1, &st, WNOHANG)) > 0 || pid == -EINTR) {
			if (pid != target || done)
				continue;
			/*
			 * What the target got and how it ended, in one line
			 * buffer: written now, unless "end" can join it (the
			 * usual case: then the runner wakes up once).
			 */
			done = 1;
			ge_line_setup(&l, 1, r->userns, r->abi,
			    ge_getuid() == 0, r->nproc, r->hidden, r->ro);
			ge_line_end(&l, st);
		}
		if (done && pid != -ECHILD && l.n > 0) {
			ge_lsend(&l);
			l.n = 0;
		}
		/*
		 * The run is over: what is left goes with it (again at each
		 * wake-up: a process that was forking during one kill(-1) is
		 * caught by the next).
		 */
		if (done)
			(void)ge_kill(-1, SIGKILL);
		if (pid == -ECHILD) {
			clean = done;
			break;
		}
	}
	/*
	 * Nothing of the run is left: say so, and let go of its pipes. Exit
	 * 0 means exactly this (the server then tells the runner nothing).
	 */
	if (clean)
		ge_ls(&l, "end\n");
	if (l.n > 0)
		ge_lsend(&l);
	ge_close_from(0);
	ge_exit(clean ? 0 : 1);
}

/* The tops of a stack pair's two stacks. */
static void
ge_stack_tops(struct ge_run *r, void *base)
{
	char	*p = base;

	r->istack = p + GE_GUARD + GE_STACK;
	r->tstack = p + 2 * (GE_GUARD + GE_STACK);
}

/* Maps a stack pair: init's and target's, each above a guard page. */
static int
ge_stacks(struct ge_run *r, void **base, size_t *len)
{
	char	*p;

	*len = 2 * (GE_GUARD + GE_STACK);
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	if (mprotect(p, GE_GUARD, PROT_NONE) != 0 ||
	    mprotect(p + GE_GUARD + GE_STACK, GE_GUARD, PROT_NONE) != 0) {
		munmap(p, *len);
		return -1;
	}
	*base = p;
	ge_stack_tops(r, p);
	return 0;
}

/*
 * Clones the init into new pid and mount namespaces (and a user namespace
 * when not root). Returns its pid, or -errno.
 */
static pid_t
ge_clone_init(struct ge_run *r)
{
	int	flags = GE_SHARE_VM | CLONE_NEWPID | CLONE_NEWNS | SIGCHLD;
	pid_t	pid;

	r->userns = getuid() != 0;
	if (r->userns)
		flags |= CLONE_NEWUSER;
	r->sfd = -1;
	pid = clone(ge_init, r->istack, flags, r);
	return pid == -1 ? -errno : pid;
}

/*
 * Namespace mode of a direct run, in gbr-exec: clone the init and wait for
 * it. Returns only if the kernel refused the namespaces (-errno).
 */
static int
ge_ns_parent(struct ge_run *r)
{
	struct sigaction	sa;
	void			*stk;
	size_t			 stklen;
	int			 st, p[2] = { -1, -1 };
	pid_t			 init, pid;

	if (ge_stacks(r, &stk, &stklen) != 0)
		ge_fail("mmap", errno);
	/* Readable once gbr-exec is gone: a pidfd, or else a pipe. */
	r->alive_wr = -1;
#ifdef GE_RAW
	r->alive_fd = (int)GE_S2(SYS_pidfd_open, getpid(), 0);
#else
	r->alive_fd = -1;
#endif
	if (r->alive_fd < 0) {
		if (pipe(p) != 0)
			ge_fail("pipe", errno);
		r->alive_fd = p[0];
		r->alive_wr = p[1];
	}
	if ((init = ge_clone_init(r)) < 0) {
		munmap(stk, stklen);
		(void)ge_close(r->alive_fd);
		if (r->alive_wr != -1)
			(void)ge_close(r->alive_wr);
		return init;
	}
	/*
	 * The runner's SIGTERM reaches the init and the target through the
	 * process group; gbr-exec itself stays to report, and its SIGKILL
	 * (the end of the grace) takes the init, hence the namespace, along.
	 */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	while ((pid = ge_wait(init, &st, 0)) == -EINTR)
		;
	if (pid == init && WIFSIGNALED(st)) {
		struct ge_line	l;

		l.n = 0;
		ge_ls(&l, "error init ");
		ge_ln(&l, WTERMSIG(st));
		ge_ls(&l, "\n");
		ge_lsend(&l);
	}
	ge_exit(0);
}
#endif

/*
 * Server mode. The runs in flight, each with its init, its descriptors
 * (closed once the init has its copies), its strings and its stacks (freed
 * only once the init is reaped: until then it may be reading them).
 */
struct ge_job {
	struct ge_job	*next;
	uint64_t	 id;
	pid_t		 pid;
	int		 fds[GE_MSG_FDS];	/* the server's copies */
	struct ge_run	 run;		/* the init's: never written after clone */
	char		*body;
	char		**vec;		/* argv, envp, shargv */
	void		*stack;
	size_t		 stacklen;
};

static struct {
	int		 ctl;		/* the socket to the runner */
	int		 sfd;		/* SIGCHLD */
	int		 self;		/* a pidfd of the server, for its inits */
	struct ge_job	*jobs;
	unsigned	 njobs;
	char		*buf;		/* GE_MSG_MAX: one message, as it comes */
	void		*pool[GE_SV_POOL];	/* stack pairs no init uses */
	int		 npool;
} sv;

/* Sends one message to the runner (blocking: it always reads). */
static void
ge_sv_send(uint32_t type, uint64_t job, int32_t arg, int32_t kind)
{
	struct ge_msg	m;
	ssize_t		n;

	memset(&m, 0, sizeof m);
	m.magic = GE_MSG_MAGIC;
	m.type = type;
	m.job = job;
	m.arg = arg;
	m.kind = kind;
	do {
#ifdef GE_RAW
		n = GE_S4(SYS_sendto, sv.ctl, &m, sizeof m, MSG_NOSIGNAL);
#else
		n = ge_ret(send(sv.ctl, &m, sizeof m, MSG_NOSIGNAL));
#endif
	} while (n == -EINTR);
	if (n < 0)
		ge_exit(0);	/* the runner is gone: so are we */
}

/*
 * Fault injection for tests, as in daemon/fault.h: inert unless
 * GBR_FAULT_FILE is set; then a line "SITE ERRNO-NAME" there makes the
 * server fail at that site. Sites: exec.server (at start), exec.clone
 * (each run, as if clone had failed). Returns the errno, or 0.
 */
static int
ge_sv_fault(const char *site)
{
	static const struct {
		const char	*name;
		int		 err;
	} names[] = {
		{ "EAGAIN", EAGAIN }, { "ENOMEM", ENOMEM }, { "ENOSPC", ENOSPC },
		{ "EPERM", EPERM }, { "EINVAL", EINVAL }, { "EUSERS", EUSERS },
	};
	const char	*path = getenv("GBR_FAULT_FILE");
	char		 line[128], *p;
	size_t		 n = strlen(site), i;
	FILE		*f;
	int		 err = 0;

	if (path == NULL || (f = fopen(path, "re")) == NULL)
		return 0;
	while (err == 0 && fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, site, n) != 0 || line[n] != ' ')
			continue;
		p = line + n + 1;
		p[strcspn(p, " \t\r\n")] = '\0';
		err = EIO;
		for (i = 0; i < sizeof names / sizeof names[0]; i++)
			if (strcmp(p, names[i].name) == 0)
				err = names[i].err;
	}
	fclose(f);
	return err;
}

/* Frees a job (its init is reaped, or was never made). */
static void
ge_sv_free(struct ge_job *j)
{
	int	i;

	for (i = 0; i < GE_MSG_FDS; i++)
		if (j->fds[i] != -1)
			(void)ge_close(j->fds[i]);
	/* Its init is reaped (its target went first): the stacks are free. */
	if (j->stack != NULL && sv.npool < GE_SV_POOL)
		sv.pool[sv.npool++] = j->stack;
	else if (j->stack != NULL)
		munmap(j->stack, j->stacklen);
	free(j->body);
	free(j->vec);
	free(j);
}

/* Starts one run (a RUN message with its descriptors). */
static void
ge_sv_run(const struct ge_msg *m, char *body, size_t len, const int *fds)
{
	struct ge_job	*j;
	const char	*why, *bad;
	char		*p, *end;
	char		**argv, **envp;
	size_t		 i, k, tn;
	pid_t		 pid = -1;
	int		 kind = GE_FAIL_RESOURCES, err = ENOMEM;

	if ((j = calloc(1, sizeof *j)) == NULL) {
		for (i = 0; i < GE_MSG_FDS; i++)
			(void)ge_close(fds[i]);
		free(body);
		ge_sv_send(GE_MSG_FAILED, m->job, ENOMEM, GE_FAIL_RESOURCES);
		return;
	}
	j->id = m->job;
	j->body = body;
	for (i = 0; i < GE_MSG_FDS; i++)
		j->fds[i] = j->run.fds[i] = fds[i];
	if (sv.njobs >= GE_SV_RUNS_MAX) {
		err = EAGAIN;
		goto fail;
	}
	/* The body: argc strings, then envc; every one NUL-terminated. */
	kind = GE_FAIL_REQUEST;
	err = EINVAL;
	if (m->argc < 1 || m->argc > GE_MSG_ARGC_MAX ||
	    m->envc > GE_MSG_ENVC_MAX || len == 0 || body[len - 1] != '\0')
		goto fail;
	/* [0] "gbr-exec", argv..., NULL, envp..., NULL, shargv[argc + 2] */
	k = 1 + m->argc + 1 + m->envc + 1 + m->argc + 2;
	if ((j->vec = calloc(k, sizeof *j->vec)) == NULL) {
		kind = GE_FAIL_RESOURCES;
		err = ENOMEM;
		goto fail;
	}
	argv = j->vec;
	envp = j->vec + 1 + m->argc + 1;
	argv[0] = (char *)"gbr-exec";
	p = body;
	end = body + len;
	for (i = 0; i < m->argc + m->envc; i++) {
		if (p >= end)
			goto fail;
		if (i < m->argc)
			argv[1 + i] = p;
		else
			envp[i - m->argc] = p;
		p += strlen(p) + 1;
	}
	if (p != end)
		goto fail;
	if (ge_parse(&j->run.o, 1 + (int)m->argc, argv, &why, &bad) != 0 ||
	    j->run.o.server || j->run.o.argv[0] == NULL ||
	    j->run.o.ns == GE_OFF)
		goto fail;
	/* shargv: "sh", the script (set at exec), the target's arguments. */
	j->run.shargv = envp + m->envc + 1;
	j->run.shargv[0] = (char *)"sh";
	for (tn = 1; j->run.o.argv[tn] != NULL; tn++)
		j->run.shargv[1 + tn] = j->run.o.argv[tn];
	j->run.envp = envp;
	j->run.server = 1;
	j->run.alive_fd = sv.self;
	j->run.alive_wr = -1;
	kind = GE_FAIL_RESOURCES;
	if (sv.npool > 0) {
		j->stack = sv.pool[--sv.npool];
		j->stacklen = 2 * (GE_GUARD + GE_STACK);
		ge_stack_tops(&j->run, j->stack);
	} else if (ge_stacks(&j->run, &j->stack, &j->stacklen) != 0) {
		err = errno;
		j->stack = NULL;
		goto fail;
	}
#ifdef GE_HAVE_NS
	if ((err = ge_sv_fault("exec.clone")) != 0) {
		kind = GE_FAIL_CLONE;
		goto fail;
	}
	if ((pid = ge_clone_init(&j->run)) < 0) {
		kind = GE_FAIL_CLONE;
		err = -pid;
		goto fail;
	}
#else
	kind = GE_FAIL_CLONE;
	err = ENOSYS;
	goto fail;
#endif
	/*
	 * Its own process group, at once (before any KILL can come): the
	 * runner's signals go to the group, and the zombie keeps its id ours.
	 */
	(void)setpgid(pid, pid);
	/* The init has its own copies (its ge_run stays as it is). */
	for (i = 0; i < GE_MSG_FDS; i++) {
		(void)ge_close(j->fds[i]);
		j->fds[i] = -1;
	}
	j->pid = pid;
	j->next = sv.jobs;
	sv.jobs = j;
	sv.njobs++;
	return;
fail:
	ge_sv_send(GE_MSG_FAILED, m->job, err, kind);
	ge_sv_free(j);
}

/* KILL: signals a run's group while its init is unreaped (the group's id). */
static void
ge_sv_kill(uint64_t id, int sig)
{
	struct ge_job	*j;

	if (sig <= 0 || sig >= 65)
		return;
	for (j = sv.jobs; j != NULL; j = j->next)
		if (j->id == id && j->pid > 0) {
			(void)ge_kill(-j->pid, sig);
			return;
		}
}

/* SIGCHLD: each ended init's group is killed, the init reaped, DONE sent. */
static void
ge_sv_reap(void)
{
	struct signalfd_siginfo	 ssi;
	struct ge_job		**jp, *j;
	siginfo_t		 si;
	pid_t			 pid;
	long			 r;
	int			 st;

	while (ge_read(sv.sfd, &ssi, sizeof ssi) == (ssize_t)sizeof ssi)
		;
	for (;;) {
		memset(&si, 0, sizeof si);
		/* WNOWAIT: the zombie keeps the group id the run's until the kill. */
#ifdef GE_RAW
		r = GE_S5(SYS_waitid, P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT,
		    NULL);
#else
		r = ge_ret(waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT));
#endif
		if (r != 0 || si.si_pid == 0)
			return;
		pid = si.si_pid;
		for (jp = &sv.jobs; *jp != NULL && (*jp)->pid != pid;
		    jp = &(*jp)->next)
			;
		if ((j = *jp) != NULL)
			(void)ge_kill(-pid, SIGKILL);
		st = 0;
		while (ge_wait(pid, &st, 0) == -EINTR)
			;
		if (j != NULL) {
			*jp = j->next;
			sv.njobs--;
			/* Exit 0 only after "end", which the runner has read. */
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				ge_sv_send(GE_MSG_DONE, j->id, st, 0);
			ge_sv_free(j);
		}
	}
}

/*
 * Reads and handles one message. Returns 1 if one was handled (or
 * dropped), -1 if none was waiting, 0 when the runner has gone.
 */
static int
ge_sv_read(void)
{
	union {
		struct cmsghdr	h;
		char		b[CMSG_SPACE(sizeof(int) * GE_MSG_FDS)];
	}			 cm;
	struct ge_msg		 m;
	struct msghdr		 mh;
	struct iovec		 iov[2];
	struct cmsghdr		*c;
	char			*body = NULL;
	size_t			 blen = 0, k;
	ssize_t			 n, len;
	int			 fds[GE_MSG_FDS], nfd = 0, i, *p;

	/* One datagram, whole, into the buffer kept for it. */
	memset(&m, 0, sizeof m);
	memset(&mh, 0, sizeof mh);
	iov[0].iov_base = &m;
	iov[0].iov_len = sizeof m;
	iov[1].iov_base = sv.buf;
	iov[1].iov_len = GE_MSG_MAX - sizeof m;
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof cm.b;
	do {
#ifdef GE_RAW
		n = GE_S3(SYS_recvmsg, sv.ctl, &mh, MSG_DONTWAIT |
		    MSG_CMSG_CLOEXEC);
#else
		n = ge_ret(recvmsg(sv.ctl, &mh, MSG_DONTWAIT |
		    MSG_CMSG_CLOEXEC));
#endif
	} while (n == -EINTR);
	if (n == -EAGAIN || n == -EWOULDBLOCK)
		return -1;
	if (n <= 0)
		return 0;
	len = n;
	if ((size_t)n > sizeof m) {
		blen = (size_t)n - sizeof m;
		if ((body = malloc(blen)) != NULL)	/* NULL: dropped */
			memcpy(body, sv.buf, blen);
	}
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		p = (int *)CMSG_DATA(c);
		for (k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			if (nfd < GE_MSG_FDS)
				fds[nfd++] = p[k];
			else
				(void)ge_close(p[k]);
		}
	}
	if ((size_t)len < sizeof m || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    m.magic != GE_MSG_MAGIC || (blen > 0 && body == NULL) ||
	    (m.type == GE_MSG_RUN && nfd != GE_MSG_FDS)) {
		for (i = 0; i < nfd; i++)
			(void)ge_close(fds[i]);
		free(body);
		if (m.magic == GE_MSG_MAGIC && m.type == GE_MSG_RUN)
			ge_sv_send(GE_MSG_FAILED, m.job, body == NULL && blen > 0 ?
			    ENOMEM : EINVAL, body == NULL && blen > 0 ?
			    GE_FAIL_RESOURCES : GE_FAIL_REQUEST);
		return 1;
	}
	if (m.type == GE_MSG_RUN) {
		ge_sv_run(&m, body, blen, fds);
		return 1;
	}
	for (i = 0; i < nfd; i++)
		(void)ge_close(fds[i]);
	free(body);
	if (m.type == GE_MSG_KILL)
		ge_sv_kill(m.job, m.arg);
	return 1;
}

/* Server mode: serves runs until the runner goes (see the top). */
static void __attribute__((noreturn))
ge_server(const struct ge_opts *o)
{
	struct ge_job	*j;
	struct pollfd	 p[2];
	long		 r;
	int		 k, e;

	if (o->status_fd < 3) {
		fprintf(stderr, "gbr-exec: -S needs -s FD (the runner's socket, "
		    "above 2)\n");
		exit(125);
	}
	sv.ctl = o->status_fd;
	/*
	 * 0-2 open, so that a run's descriptors, as they come, are above 3
	 * and moving them to 0-3 in its init never overwrites one of them.
	 */
	for (k = 0; k < 3; k++)
		if (fcntl(k, F_GETFD) == -1 && open("/dev/null", O_RDWR) != k)
			exit(125);
	if (sv.ctl != 3) {
		fprintf(stderr, "gbr-exec: -S takes its socket as descriptor 3\n");
		exit(125);
	}
	/*
	 * Nothing else of the runner's: descriptors it left open across
	 * the exec (its libraries' socketpairs, whatever its own parent
	 * passed on) would live on in the server as long as it does.
	 */
	ge_close_from(4);
#ifdef HAVE_SYS_PRCTL_H
	if (ge_prctl(PR_SET_PDEATHSIG, SIGKILL, 0) != 0)
		exit(125);
#endif
	if (o->ppid != 0 && getppid() != o->ppid)
		exit(125);
#if defined(HAVE_SYS_PRCTL_H) && defined(PR_SET_DUMPABLE)
	/* See "Server mode": only root can afford it (uid_map). */
	if (getuid() == 0)
		(void)ge_prctl(PR_SET_DUMPABLE, 0, 0);
#endif
#if defined(HAVE_SYS_PRCTL_H) && defined(HAVE_LINUX_CAPABILITY_H) && \
    defined(SYS_capset) && defined(PR_SET_SECUREBITS)
	if (getuid() == 0) {
		const char	*stage;

		if ((e = ge_caps_bound(&stage)) == 0)
			ge_caps_bounded = 1;
		else
			fprintf(stderr, "gbr-exec: %s: %s (each run drops them "
			    "instead)\n", stage, strerror(-e));
	}
#endif
#if defined(GE_HAVE_NS) && defined(SYS_pidfd_open)
#ifdef GE_RAW
	sv.self = (int)GE_S2(SYS_pidfd_open, getpid(), 0);
#else
	sv.self = (int)ge_ret(syscall(SYS_pidfd_open, getpid(), 0));
#endif
#else
	sv.self = -ENOSYS;
#endif
	if (sv.self < 0) {
		fprintf(stderr, "gbr-exec: the fork server needs namespaces and "
		    "pidfd_open (Linux 5.3): %s\n", strerror(-sv.self));
		exit(125);
	}
	if ((e = ge_sv_fault("exec.server")) != 0) {
		fprintf(stderr, "gbr-exec: exec.server: %s (GBR_FAULT_FILE)\n",
		    strerror(e));
		exit(125);
	}
	(void)ge_sigmask(SIG_BLOCK, GE_SIG(SIGCHLD), NULL);
#ifdef __linux__
	{
		sigset_t	s;

		sigemptyset(&s);
		sigaddset(&s, SIGCHLD);
		sv.sfd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
	}
#else
	sv.sfd = -1;
#endif
	if (sv.sfd < 0) {
		fprintf(stderr, "gbr-exec: signalfd: %s\n", strerror(errno));
		exit(125);
	}
	if ((sv.buf = malloc(GE_MSG_MAX)) == NULL) {
		fprintf(stderr, "gbr-exec: out of memory\n");
		exit(125);
	}
	/* Each run's status descriptor, in its init and target. */
	ge_status = GE_MSG_FDS - 1;
	ge_sv_send(GE_MSG_READY, 0, GE_SHARE_VM != 0 ? GE_READY_SHARED_VM : 0,
	    0);
	for (;;) {
		p[0].fd = sv.ctl;
		p[0].events = POLLIN;
		p[1].fd = sv.sfd;
		p[1].events = POLLIN;
		p[0].revents = p[1].revents = 0;
#ifdef GE_RAW
		r = GE_S5(SYS_ppoll, p, 2, NULL, NULL, 8);
#else
		r = ge_ret(poll(p, 2, -1));
#endif
		if (r == -EINTR)
			continue;
		if (r < 0)
			break;
		if (p[1].revents != 0)
			ge_sv_reap();
		if (p[0].revents != 0) {
			for (k = 0; k < 64; k++)
				if ((e = ge_sv_read()) <= 0)
					break;
			if (k < 64 && e == 0)
				break;
		}
	}
	/* The runner is gone: end every run (their inits would anyway). */
	for (j = sv.jobs; j != NULL; j = j->next)
		(void)ge_kill(-j->pid, SIGKILL);
	ge_exit(0);
}

/*
 * What every run would otherwise redo, done once at start, before any
 * child exists: default dispositions for every signal (a child then has
 * only its mask to clear), the highest capability number, and whether
 * pid_max is per namespace.
 */
static void
ge_once(void)
{
	char	buf[32], *end;
	ssize_t	n;
	long	v;
	int	sig, fd;

	for (sig = 1; sig < 65; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			ge_sigdfl(sig);
	if ((fd = ge_open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC,
	    0)) >= 0) {
		if ((n = ge_read(fd, buf, sizeof buf - 1)) > 0) {
			buf[n] = '\0';
			v = strtol(buf, &end, 10);
			if (end != buf && v > 0 && v < 64)
				ge_cap_last = (int)v;
		}
		(void)ge_close(fd);
	}
	ge_pidmax_ns = ge_kernel_at_least(6, 14);
}

/* Prints usage. */
static void __attribute__((noreturn))
usage(const char *why, const char *bad)
{
	if (why != NULL)
		fprintf(stderr, "gbr-exec: %s%s%s\n", bad != NULL ? bad : "",
		    bad != NULL ? ": " : "", why);
	fprintf(stderr, "usage: gbr-exec [-C dir] [-s fd] [-p ppid] [-c cpu] "
	    "[-a as] [-f fsize] [-o nofile] [-n nproc]\n"
	    "                [-l off|auto|require] [-r path] [-w path] "
	    "[-N off|auto|require] [-x path] [-R path] [-T]\n"
	    "                -- program [args...]\n"
	    "       gbr-exec -S -s fd [-p ppid]\n"
	    "gbr-exec is gbrd's helper: see the comment at the top of "
	    "daemon/gbr-exec.c.\n");
	exit(125);
}

int
main(int argc, char **argv)
{
	extern char	**environ;
	struct ge_run	 r;
	const char	*why, *bad, *nproc;
	int		 abi, caps, e, n;

	memset(&r, 0, sizeof r);
	if (ge_parse(&r.o, argc, argv, &why, &bad) != 0)
		usage(why, bad);
	ge_once();
	if (r.o.server)
		ge_server(&r.o);
	if (r.o.status_fd > 2)
		ge_status = r.o.status_fd;
	ge_close_from(ge_status > 2 ? ge_status + 1 : 3);

#ifdef HAVE_SYS_PRCTL_H
	if ((e = ge_prctl(PR_SET_PDEATHSIG, SIGKILL, 0)) != 0)
		ge_fail("pdeathsig", -e);
#endif
	/* The runner may have died before the line above. */
	if (r.o.ppid != 0 && getppid() != r.o.ppid)
		ge_exit(125);
	if (r.o.dir != NULL && (e = ge_chdir(r.o.dir)) != 0)
		ge_fail("chdir", -e);

	/* What ENOEXEC needs: "sh", the file, the target's arguments. */
	for (n = 0; r.o.argv[n] != NULL; n++)
		;
	if ((r.shargv = calloc((size_t)n + 2, sizeof *r.shargv)) == NULL)
		ge_fail("malloc", ENOMEM);
	r.shargv[0] = (char *)"sh";
	for (e = 1; e < n; e++)
		r.shargv[1 + e] = r.o.argv[e];
	r.envp = environ;
	for (e = 0; e < GE_MSG_FDS; e++)
		r.fds[e] = -1;

	if (r.o.ns != GE_OFF) {
#ifdef GE_HAVE_NS
		e = ge_ns_parent(&r);
#else
		e = -ENOSYS;
#endif
		if (r.o.ns == GE_REQUIRE)
			ge_fail("unshare", -e);
	}
	/* No namespaces: set up here and become the target. */
	nproc = ge_nproc(&r.o, 0, 0);
	ge_limits(&r.o);
	abi = ge_landlock(&r.o);
	caps = ge_drop_caps();
	ge_report_setup(0, 0, abi, caps, nproc, 0, 0);
	if (ge_status != -1 && (e = ge_fcntl(ge_status, F_SETFD,
	    FD_CLOEXEC)) != 0)
		ge_fail("cloexec", -e);
	ge_exec(&r.o, environ, r.shargv);
}
