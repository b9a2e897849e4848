/*
 * exec.h: what the files of gbr-exec share, and nothing of gbrd's (that
 * is gbr-exec.h, the wire contract with the runner). It holds the options
 * and the run's state (struct ge_opts, ge_setup, ge_run), the few globals
 * set once before any child exists, and the system call layer: ge_sys and
 * its thin wrappers, static inline so that each file calls the kernel
 * directly, as the one file did before it was split. Code marked GE_CHILD
 * may run in a child sharing its parent's memory ("Cost" at the top of
 * gbr-exec.c says what it may and may not do).
 *
 * Every file includes the same system headers through this one: many
 * protections are #ifdef'd on macros those headers define (PR_CAP_AMBIENT,
 * SYS_capset, SYS_seccomp, ...), and a file that missed one would turn its
 * protection off without a word.
 */
#ifndef GE_EXEC_H
#define GE_EXEC_H

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
#if defined(HAVE_LINUX_SECCOMP_H) && defined(HAVE_LINUX_FILTER_H)
#include <linux/filter.h>
#include <linux/seccomp.h>
#define GE_HAVE_SECCOMP	1
#endif

#include "gbr-exec.h"

#define GE_PATHS_MAX	128	/* -r, -w, -x, -X and -R paths, each */
#define GE_STACK	(128 * 1024)	/* an init's or a target's stack */
#define GE_GUARD	4096		/* below each stack, never mapped in */

/* Raw system calls ("Cost" in gbr-exec.c): x86_64 and aarch64 Linux. */
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
	const char	*tmpdir;	/* -t: the session's temp folder */
	int		 status_fd;
	int		 filter_fd;	/* -F: the seccomp program, or -1 */
	pid_t		 ppid;
	long long	 cpu, as, fsize, nofile, nproc;
	enum ge_mode	 landlock, ns, seccomp;
	struct ge_paths	 rd, wr, hide, secret, robind;
	int		 probe, server;
	char	*const	*argv;
};

/* What the setup line says (see "Status"). */
struct ge_setup {
	int		 ns, userns, abi, caps, hidden, ro;
	int		 seccomp;	/* the filter is on */
	int		 proc;		/* /proc is the pid namespace's own */
	int		 tmp;		/* /tmp and /dev/shm are the session's */
	int		 sup;		/* a supervisor outlives the target */
	int		 chain;		/* folders made impossible to rename */
	const char	*nproc;
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
	uid_t		 uid;		/* ours, read before the user namespace */
	gid_t		 gid;
	/* Written by the init. */
	int		 sfd;
	struct ge_setup	 su;
};

/* A status line being built (no stdio in children). */
struct ge_line {
	char	b[256];
	size_t	n;
};

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
static inline int GE_CHILD
ge_open(const char *path, int flags, int mode)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_openat, AT_FDCWD, path, flags, mode);
#else
	return (int)ge_ret(open(path, flags, mode));
#endif
}

/* close(2). */
static inline int GE_CHILD
ge_close(int fd)
{
#ifdef GE_RAW
	return (int)GE_S1(SYS_close, fd);
#else
	return (int)ge_ret(close(fd));
#endif
}

/* read(2). */
static inline ssize_t GE_CHILD
ge_read(int fd, void *buf, size_t len)
{
#ifdef GE_RAW
	return GE_S3(SYS_read, fd, buf, len);
#else
	return ge_ret(read(fd, buf, len));
#endif
}

/* write(2). */
static inline ssize_t GE_CHILD
ge_write1(int fd, const void *buf, size_t len)
{
#ifdef GE_RAW
	return GE_S3(SYS_write, fd, buf, len);
#else
	return ge_ret(write(fd, buf, len));
#endif
}

/* Makes to a copy of from, without close-on-exec. Returns 0 or -errno. */
static inline int GE_CHILD
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
static inline int GE_CHILD
ge_fcntl(int fd, int cmd, long arg)
{
#ifdef GE_RAW
	return (int)GE_S3(SYS_fcntl, fd, cmd, arg);
#else
	return (int)ge_ret(fcntl(fd, cmd, arg));
#endif
}

/* chdir(2). */
static inline int GE_CHILD
ge_chdir(const char *dir)
{
#ifdef GE_RAW
	return (int)GE_S1(SYS_chdir, dir);
#else
	return (int)ge_ret(chdir(dir));
#endif
}

/* execve(2); returns -errno. */
static inline int GE_CHILD
ge_execve(const char *path, char *const argv[], char *const envp[])
{
#ifdef GE_RAW
	return (int)GE_S3(SYS_execve, path, argv, envp);
#else
	return (int)ge_ret(execve(path, argv, envp));
#endif
}

/* Ends the process (never the libc exit: no atexit, no sanitizer hooks). */
static inline void __attribute__((noreturn)) GE_CHILD
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
static inline int GE_CHILD
ge_kill(pid_t pid, int sig)
{
#ifdef GE_RAW
	return (int)GE_S2(SYS_kill, pid, sig);
#else
	return (int)ge_ret(kill(pid, sig));
#endif
}

/* wait4(2) without the usage. */
static inline pid_t GE_CHILD
ge_wait(pid_t pid, int *st, int options)
{
#ifdef GE_RAW
	return (pid_t)GE_S4(SYS_wait4, pid, st, options, NULL);
#else
	return (pid_t)ge_ret(waitpid(pid, st, options));
#endif
}

/* The real uid. */
static inline uid_t GE_CHILD
ge_getuid(void)
{
#ifdef GE_RAW
	return (uid_t)GE_S0(SYS_getuid);
#else
	return getuid();
#endif
}

static inline pid_t GE_CHILD
ge_getpid(void)
{
#ifdef GE_RAW
	return (pid_t)GE_S0(SYS_getpid);
#else
	return getpid();
#endif
}

/* setrlimit(2), soft and hard. */
static inline int GE_CHILD
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
static inline int GE_CHILD
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
static inline int GE_CHILD
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
static inline int GE_CHILD
ge_fstat(int fd, struct stat *st)
{
#ifdef GE_RAW
	return (int)GE_S4(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#else
	return (int)ge_ret(fstat(fd, st));
#endif
}

/* uname(2). */
static inline int GE_CHILD
ge_uname(struct utsname *u)
{
#ifdef GE_RAW
	return (int)GE_S1(SYS_uname, u);
#else
	return (int)ge_ret(uname(u));
#endif
}

/* Blocks (how SIG_BLOCK), unblocks or sets signals, as a 64-bit mask. */
static inline int GE_CHILD
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
static inline void GE_CHILD
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

/* Capabilities can be dropped (see confine.c). */
#if defined(HAVE_SYS_PRCTL_H) && defined(HAVE_LINUX_CAPABILITY_H) && \
    defined(SYS_capset) && defined(PR_SET_SECUREBITS)
#define GE_HAVE_CAPS	1
#endif

/*
 * Set once before any child exists (main, ge_once, the server's start);
 * read-only afterwards.
 */
extern int	ge_status;		/* the status descriptor, or -1 */
extern int	ge_cap_last;		/* the highest capability number */
extern int	ge_pidmax_ns;		/* pid_max is per namespace (6.14+) */
extern int	ge_caps_bounded;	/* ge_caps_bound done (server, root) */
#ifdef GE_HAVE_SECCOMP
extern unsigned short	ge_bpf_len;	/* the seccomp program's; 0: none */
#endif

/* status.c: the lines written to the status descriptor. */
void GE_CHILD	ge_ls(struct ge_line *, const char *);
void GE_CHILD	ge_ln(struct ge_line *, long long);
void GE_CHILD	ge_lsend(struct ge_line *);
void __attribute__((noreturn)) GE_CHILD
		ge_fail(const char *, int);
void GE_CHILD	ge_line_setup(struct ge_line *, const struct ge_setup *);
void GE_CHILD	ge_report_setup(const struct ge_setup *);
void GE_CHILD	ge_line_end(struct ge_line *, int);

/* sys.c: what libc would give, safe in a shared-memory child. */
void GE_CHILD	ge_close_from(int);
int GE_CHILD	ge_kernel_at_least(int, int);
int GE_CHILD	ge_under(const char *, const char *);
int GE_CHILD	ge_join(char *, const char *, const char *);
int GE_CHILD	ge_proc_write(const char *, const char *);
void __attribute__((noreturn)) GE_CHILD
		ge_exec(const struct ge_opts *, char *const [], char **);

/* gbr-exec.c: the options, for a direct run and for each server run. */
int		ge_parse(struct ge_opts *, int, char **, const char **,
		    const char **);

/* confine.c: limits, Landlock, seccomp, capabilities. */
const char * GE_CHILD
		ge_nproc(const struct ge_opts *, int, int);
void GE_CHILD	ge_limits(const struct ge_opts *);
int GE_CHILD	ge_landlock(const struct ge_opts *, int);
/* True if Landlock alone keeps the run out of path (see -X). */
int GE_CHILD	ge_landlock_keeps_out(const struct ge_opts *, const char *);
void		ge_filter_setup(const struct ge_opts *, pid_t);
int GE_CHILD	ge_filter_apply(void);
#ifdef GE_HAVE_CAPS
int GE_CHILD	ge_caps_bound(const char **);
#endif
int GE_CHILD	ge_drop_caps(void);

/* mounts.c: the run's mount namespace. */
const char * GE_CHILD
		ge_tmp_alias(const struct ge_opts *, int, const char *);
#ifdef GE_HAVE_NS
void GE_CHILD	ge_mounts(const struct ge_opts *, struct ge_setup *);
#endif

/* nsinit.c: the namespaces' init and the stacks it runs on. */
void		ge_stack_tops(struct ge_run *, void *);
int		ge_stacks(struct ge_run *, void **, size_t *);
#ifdef GE_HAVE_NS
pid_t		ge_clone_init(struct ge_run *);
int		ge_ns_parent(struct ge_run *);
#endif

/* server.c: the fork server (-S). */
void __attribute__((noreturn))
		ge_server(const struct ge_opts *);

/* supervise.c: a run without namespaces. */
void __attribute__((noreturn))
		ge_supervise(struct ge_run *);

#endif
