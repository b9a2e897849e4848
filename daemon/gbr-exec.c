/*
 * gbr-exec: the trampoline between gbrd's runner (runner.c) and the program
 * an agent asked to run. posix_spawn cannot apply resource limits, a
 * Landlock ruleset or namespaces in the child before the target runs, so
 * the runner spawns this small program instead, with the target's argument
 * vector after "--" and the limits as options; it applies them to itself
 * and then runs the target. It links only against libc, so its own start
 * costs one exec of a small binary.
 *
 * usage: gbr-exec [options] -- PROGRAM [ARGS...]
 *   -C DIR     working folder
 *   -s FD      status descriptor (see "Status" below)
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
 *
 * Always: every descriptor above the status one is closed, the core size
 * is 0, PR_SET_NO_NEW_PRIVS is set, PR_SET_PDEATHSIG is SIGKILL (the
 * target dies with the runner: the death signal survives execve when no
 * set-uid program runs, which no_new_privs guarantees), and when the real
 * uid is 0 every capability is dropped (bounding, ambient, permitted,
 * effective, inheritable; SECBIT_NOROOT locked) just before the target
 * runs, so root's target cannot undo the mounts or kill others.
 *
 * Namespaces. With -N auto or require, gbr-exec unshares a pid namespace
 * and a mount namespace (and, when not root, a user namespace mapping the
 * user to itself so that this is allowed), then forks the namespace's init,
 * which forks the target. The payoff: the kernel kills every process of
 * the namespace when its init ends, so nothing the target starts survives
 * the run, not even a process that called setsid() or closed its pipes;
 * the init has PR_SET_PDEATHSIG against gbr-exec, which has it against the
 * runner, so the whole tree dies with gbrd; the target cannot name (signal,
 * ptrace) any process outside; and /dev/null can be bound over gbrd's
 * socket so the target cannot drive the daemon that runs it. The init
 * reaps orphans, forwards SIGTERM, SIGINT and SIGHUP to the namespace,
 * writes the target's exit status to the status descriptor and, once the
 * target has ended, kills what is left. Without namespaces (off, or auto
 * where unshare fails) gbr-exec sets everything up and execs the target
 * itself: the runner's process-group kill is then the only reach over
 * grandchildren.
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
 *   error STAGE ERRNO                (setup failed; nothing ran)
 *   exit CODE | signal SIGNO CORE    (namespace mode: how the target ended)
 * Without namespaces a successful execve closes the descriptor and the
 * runner reads the target's status from waitpid.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#define GE_PATHS_MAX	64	/* -r, -w, -x and -R paths, each */
#define GE_PIDMAX_MIN	301	/* the kernel's floor for pid_max */

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
	int		 probe;
	char	*const	*argv;
};

static int	ge_status = -1;

/* Writes a whole buffer, retrying on EINTR; errors are ignored. */
static void
ge_write(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (fd != -1 && len > 0) {
		n = write(fd, buf, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* Writes one status line (see the top of the file). */
static void __attribute__((format(printf, 1, 2)))
ge_report(const char *fmt, ...)
{
	char	line[256];
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof line)
		ge_write(ge_status, line, (size_t)n);
}

/* Reports a failed setup stage and exits. */
static void __attribute__((noreturn))
ge_fail(const char *stage, int err)
{
	ge_report("error %s %d\n", stage, err);
	_exit(126);
}

/* Parses a non-negative integer option. */
static long long
ge_number(const char *opt, const char *s)
{
	char		*end;
	long long	 v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0) {
		fprintf(stderr, "gbr-exec: %s needs a number, not '%s'\n", opt, s);
		exit(125);
	}
	return v;
}

/* Parses off, auto or require. */
static enum ge_mode
ge_mode(const char *opt, const char *s)
{
	if (strcmp(s, "off") == 0)
		return GE_OFF;
	if (strcmp(s, "auto") == 0)
		return GE_AUTO;
	if (strcmp(s, "require") == 0)
		return GE_REQUIRE;
	fprintf(stderr, "gbr-exec: %s takes off, auto or require\n", opt);
	exit(125);
}

/* Adds a path to a bounded list. */
static void
ge_add(struct ge_paths *p, const char *path)
{
	if (p->n >= GE_PATHS_MAX || path[0] != '/') {
		fprintf(stderr, "gbr-exec: too many paths, or '%s' is not "
		    "absolute\n", path);
		exit(125);
	}
	p->v[p->n++] = path;
}

/* Closes every descriptor above keep (close_range where the libc has it). */
static void
ge_close_from(int first)
{
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
}

/* Sets one resource limit (soft and hard), unless v is -1. */
static void
ge_rlimit(int resource, const char *stage, long long v)
{
	struct rlimit	rl;

	if (v < 0)
		return;
	rl.rlim_cur = rl.rlim_max = (rlim_t)v;
	if (setrlimit(resource, &rl) != 0)
		ge_fail(stage, errno);
}

/* True if the running kernel is at least major.minor. */
static int
ge_kernel_at_least(int major, int minor)
{
	struct utsname	u;
	char		*end;
	long		 ma, mi;

	if (uname(&u) != 0)
		return 0;
	ma = strtol(u.release, &end, 10);
	if (*end != '.')
		return 0;
	mi = strtol(end + 1, NULL, 10);
	return ma > major || (ma == major && mi >= minor);
}

/* Counts the tasks (threads included) the real uid has now, from /proc. */
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

/* The Landlock ABI the kernel offers, or 0. */
static int
ge_ll_abi(void)
{
	long	v;

	v = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	return v < 0 ? 0 : (int)v;
}

/* Every file system right an ABI knows. */
static uint64_t
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
 * missing required one is an error.
 */
static void
ge_ll_allow(int ruleset, const char *path, uint64_t rights, uint64_t handled,
    int required)
{
	struct landlock_path_beneath_attr	 pb;
	struct stat				 st;
	int					 fd;

	if ((fd = open(path, O_PATH | O_CLOEXEC)) == -1) {
		if (!required && (errno == ENOENT || errno == EACCES ||
		    errno == ENOTDIR))
			return;
		ge_fail("landlock-path", errno);
	}
	if (fstat(fd, &st) != 0)
		ge_fail("landlock-path", errno);
	if (!S_ISDIR(st.st_mode))
		rights &= GE_LL_FILE;
	memset(&pb, 0, sizeof pb);
	pb.allowed_access = rights & handled;
	pb.parent_fd = fd;
	if (pb.allowed_access != 0 && syscall(SYS_landlock_add_rule, ruleset,
	    LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
		ge_fail("landlock-rule", errno);
	close(fd);
}

/* Builds and enforces the ruleset. Returns the ABI used, or 0 for none. */
static int
ge_landlock(const struct ge_opts *o)
{
	static const char *const sys_ro[] = {
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
		"/etc", "/opt", "/proc", "/sys", "/nix/store", "/gnu/store",
		"/run/systemd/resolve",
	};
	static const char *const sys_dev[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
		"/dev/urandom", "/dev/shm",
	};
	struct ge_ll_attr	 attr;
	size_t			 size, i;
	uint64_t		 handled;
	int			 abi, rs;

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
	if ((rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0)) < 0)
		ge_fail("landlock-create", errno);
	for (i = 0; i < sizeof sys_ro / sizeof sys_ro[0]; i++)
		ge_ll_allow(rs, sys_ro[i], GE_LL_READ, handled, 0);
	for (i = 0; i < sizeof sys_dev / sizeof sys_dev[0]; i++)
		ge_ll_allow(rs, sys_dev[i], handled, handled, 0);
	for (i = 0; i < (size_t)o->rd.n; i++)
		ge_ll_allow(rs, o->rd.v[i], GE_LL_READ, handled, 0);
	for (i = 0; i < (size_t)o->wr.n; i++)
		ge_ll_allow(rs, o->wr.v[i], handled, handled, 1);
	if (syscall(SYS_landlock_restrict_self, rs, 0) != 0)
		ge_fail("landlock-restrict", errno);
	close(rs);
	return abi;
}
#else
/* Built without Landlock: "require" cannot be met. */
static int
ge_landlock(const struct ge_opts *o)
{
	if (o->landlock == GE_REQUIRE)
		ge_fail("landlock-abi", EOPNOTSUPP);
	return 0;
}
#endif

/* Drops every capability for good (uid 0 only). Returns 1 if done. */
static int
ge_drop_caps(void)
{
#if defined(HAVE_SYS_PRCTL_H) && defined(HAVE_LINUX_CAPABILITY_H) && \
    defined(SYS_capset) && defined(PR_SET_SECUREBITS)
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[2];
	int				c;

	if (getuid() != 0 && geteuid() != 0)
		return 0;
	/*
	 * NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each locked, and
	 * KEEP_CAPS locked off (<linux/securebits.h> bits 0-3 and 5-7):
	 * execve never hands uid 0 its capabilities back.
	 */
	if (prctl(PR_SET_SECUREBITS, 0xef, 0, 0, 0) != 0)
		ge_fail("securebits", errno);
	for (c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			ge_fail("capbset", errno);
#ifdef PR_CAP_AMBIENT
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
#endif
	memset(&hdr, 0, sizeof hdr);
	memset(data, 0, sizeof data);
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capset, &hdr, data) != 0)
		ge_fail("capset", errno);
	return 1;
#else
	return 0;
#endif
}

/* Writes a short string to a /proc file. */
static int
ge_proc_write(const char *path, const char *s)
{
	int	fd, r = 0;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		r = -1;
	if (close(fd) != 0)
		r = -1;
	return r;
}

/*
 * Unshares the namespaces (see the top of the file). Returns 1 with a new
 * user namespace, 0 without, -1 if the kernel said no.
 */
static int
ge_unshare(void)
{
#ifdef HAVE_UNSHARE
	char	map[64];
	uid_t	uid = getuid();
	gid_t	gid = getgid();

	if (uid == 0) {
		if (unshare(CLONE_NEWPID | CLONE_NEWNS) == 0)
			return 0;
		return -1;
	}
	if (unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) != 0)
		return -1;
	/* The user stays itself inside; setgroups must be denied first. */
	snprintf(map, sizeof map, "%lu %lu 1\n", (unsigned long)uid,
	    (unsigned long)uid);
	if (ge_proc_write("/proc/self/setgroups", "deny") != 0 ||
	    ge_proc_write("/proc/self/uid_map", map) != 0)
		ge_fail("userns-map", errno);
	snprintf(map, sizeof map, "%lu %lu 1\n", (unsigned long)gid,
	    (unsigned long)gid);
	if (ge_proc_write("/proc/self/gid_map", map) != 0)
		ge_fail("userns-map", errno);
	return 1;
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* The flags a read-only remount must keep (a user namespace locks them). */
static unsigned long
ge_locked_flags(const char *path)
{
	struct statvfs	sv;
	unsigned long	f = 0;

	if (statvfs(path, &sv) != 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/*
 * In the new mount namespace: nothing propagates back to the host, /dev/null
 * covers each hidden file, and each -R path is bound read-only over itself.
 * Returns how many paths were hidden; *ro says how many were bound.
 */
static int
ge_mounts(const struct ge_opts *o, int *ro)
{
	struct stat	st;
	int		i, hidden = 0;

	*ro = 0;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		ge_fail("mount-private", errno);
	for (i = 0; i < o->hide.n; i++) {
		if (lstat(o->hide.v[i], &st) != 0)
			continue;	/* nothing there to reach */
		if (S_ISDIR(st.st_mode)) {
			if (mount("tmpfs", o->hide.v[i], "tmpfs",
			    MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
			    "size=4k,mode=000") != 0)
				ge_fail("mount-hide", errno);
		} else if (mount("/dev/null", o->hide.v[i], NULL, MS_BIND,
		    NULL) != 0)
			ge_fail("mount-hide", errno);
		hidden++;
	}
	for (i = 0; i < o->robind.n; i++) {
		if (lstat(o->robind.v[i], &st) != 0 || S_ISLNK(st.st_mode))
			continue;
		if (mount(o->robind.v[i], o->robind.v[i], NULL,
		    MS_BIND | MS_REC, NULL) != 0 ||
		    mount(NULL, o->robind.v[i], NULL, MS_REMOUNT | MS_BIND |
		    MS_RDONLY | ge_locked_flags(o->robind.v[i]), NULL) != 0)
			ge_fail("mount-readonly", errno);
		(*ro)++;
	}
	return hidden;
}

/* Sets the process limit meaningfully (see the top). Returns its kind. */
static const char *
ge_nproc(const struct ge_opts *o, int in_pidns, int userns)
{
	static char	 buf[32];
	long long	 cur, lim;

	if (o->nproc < 0)
		return "none";
	if (in_pidns && ge_kernel_at_least(6, 14)) {
		/*
		 * Only from 6.14 is pid_max per namespace; before, this file
		 * is the whole machine's, so it is never written there.
		 */
		lim = o->nproc + 1 < GE_PIDMAX_MIN ? GE_PIDMAX_MIN : o->nproc + 1;
		snprintf(buf, sizeof buf, "%lld", lim);
		if (ge_proc_write("/proc/sys/kernel/pid_max", buf) == 0) {
			if (userns)
				ge_rlimit(RLIMIT_NPROC, "rlimit-nproc", o->nproc);
			return "pid_max";
		}
	}
	if (userns) {
		ge_rlimit(RLIMIT_NPROC, "rlimit-nproc", o->nproc);
		return "rlimit-userns";
	}
	if (getuid() == 0)
		return "none";
	if ((cur = ge_uid_tasks()) < 0)
		cur = 0;
	ge_rlimit(RLIMIT_NPROC, "rlimit-nproc", cur + o->nproc);
	return "rlimit-uid";
}

/* Applies the limits every mode shares. */
static void
ge_limits(const struct ge_opts *o)
{
	ge_rlimit(RLIMIT_CORE, "rlimit-core", 0);
	ge_rlimit(RLIMIT_CPU, "rlimit-cpu", o->cpu);
	ge_rlimit(RLIMIT_AS, "rlimit-as", o->as);
	ge_rlimit(RLIMIT_FSIZE, "rlimit-fsize", o->fsize);
	ge_rlimit(RLIMIT_NOFILE, "rlimit-nofile", o->nofile);
#ifdef PR_SET_NO_NEW_PRIVS
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		ge_fail("no-new-privs", errno);
#endif
}

/* Runs the target; reports and exits if it cannot. */
static void __attribute__((noreturn))
ge_exec(const struct ge_opts *o)
{
	if (o->probe)
		_exit(0);
	execvp(o->argv[0], o->argv);
	ge_fail("exec", errno);
}

/* Sends a signal to the whole namespace (the init's handler). */
static void
ge_forward(int sig)
{
	int	saved = errno;

	(void)kill(-1, sig);
	errno = saved;
}

/*
 * The namespace's init: forks the target, reaps everything, reports how
 * the target ended, then ends the namespace.
 */
static void __attribute__((noreturn))
ge_init(const struct ge_opts *o, int alive_fd, int userns)
{
	struct sigaction	 sa;
	struct pollfd		 pfd;
	const char		*nproc;
	sigset_t		 all, old;
	pid_t			 target, pid;
	int			 st, abi, caps, hidden, ro;

#ifdef PR_SET_PDEATHSIG
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		ge_fail("pdeathsig", errno);
#endif
	/* gbr-exec may have died before the line above: then stop here. */
	pfd.fd = alive_fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 0) != 0)
		_exit(125);
	hidden = ge_mounts(o, &ro);
	nproc = ge_nproc(o, 1, userns);
	ge_limits(o);
	abi = ge_landlock(o);

	/* Forwarded signals; the others keep their defaults. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = ge_forward;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	switch ((target = fork())) {
	case -1:
		ge_fail("fork", errno);
	case 0:
		close(alive_fd);
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_DFL;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		caps = ge_drop_caps();
		ge_report("setup ns=1 userns=%d landlock=%d caps=%d nproc=%s "
		    "hidden=%d ro=%d\n", userns, abi, caps, nproc, hidden, ro);
		if (fcntl(ge_status, F_SETFD, FD_CLOEXEC) != 0)
			ge_fail("cloexec", errno);
		ge_exec(o);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	for (;;) {
		pid = waitpid(-1, &st, 0);
		if (pid == -1 && errno == EINTR)
			continue;
		if (pid == -1)
			break;
		if (pid != target)
			continue;
		if (WIFSIGNALED(st))
			ge_report("signal %d %d\n", WTERMSIG(st),
			    WCOREDUMP(st) ? 1 : 0);
		else
			ge_report("exit %d\n", WEXITSTATUS(st));
		/* The run is over: what is left goes with it. */
		(void)kill(-1, SIGKILL);
	}
	_exit(0);
}

/* Namespace mode, in gbr-exec: fork the init and wait for it. */
static void __attribute__((noreturn))
ge_ns_parent(const struct ge_opts *o, int userns)
{
	struct sigaction	sa;
	int			alive[2], st;
	pid_t			init, pid;

	if (pipe(alive) != 0)
		ge_fail("pipe", errno);
	switch ((init = fork())) {
	case -1:
		ge_fail("fork", errno);
	case 0:
		close(alive[1]);
		ge_init(o, alive[0], userns);
	}
	close(alive[0]);
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
	for (;;) {
		pid = waitpid(init, &st, 0);
		if (pid == -1 && errno == EINTR)
			continue;
		break;
	}
	if (pid == init && WIFSIGNALED(st))
		ge_report("error init %d\n", WTERMSIG(st));
	_exit(0);
}

/* Prints usage. */
static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: gbr-exec [-C dir] [-s fd] [-p ppid] [-c cpu] "
	    "[-a as] [-f fsize] [-o nofile] [-n nproc]\n"
	    "                [-l off|auto|require] [-r path] [-w path] "
	    "[-N off|auto|require] [-x path] [-R path] [-T]\n"
	    "                -- program [args...]\n"
	    "gbr-exec is gbrd's helper: see the comment at the top of "
	    "daemon/gbr-exec.c.\n");
	exit(125);
}

int
main(int argc, char **argv)
{
	struct ge_opts	 o;
	const char	*nproc;
	int		 ch, userns, abi, caps;

	memset(&o, 0, sizeof o);
	o.status_fd = -1;
	o.cpu = o.as = o.fsize = o.nofile = o.nproc = -1;
	o.landlock = o.ns = GE_OFF;
	while ((ch = getopt(argc, argv, "+C:s:p:c:a:f:o:n:l:r:w:N:x:R:T")) != -1) {
		switch (ch) {
		case 'C': o.dir = optarg; break;
		case 's': o.status_fd = (int)ge_number("-s", optarg); break;
		case 'p': o.ppid = (pid_t)ge_number("-p", optarg); break;
		case 'c': o.cpu = ge_number("-c", optarg); break;
		case 'a': o.as = ge_number("-a", optarg); break;
		case 'f': o.fsize = ge_number("-f", optarg); break;
		case 'o': o.nofile = ge_number("-o", optarg); break;
		case 'n': o.nproc = ge_number("-n", optarg); break;
		case 'l': o.landlock = ge_mode("-l", optarg); break;
		case 'r': ge_add(&o.rd, optarg); break;
		case 'w': ge_add(&o.wr, optarg); break;
		case 'N': o.ns = ge_mode("-N", optarg); break;
		case 'x': ge_add(&o.hide, optarg); break;
		case 'R': ge_add(&o.robind, optarg); break;
		case 'T': o.probe = 1; break;
		default: usage();
		}
	}
	if (optind >= argc)
		usage();
	o.argv = argv + optind;
	if (o.status_fd > 2)
		ge_status = o.status_fd;
	ge_close_from(ge_status > 2 ? ge_status + 1 : 3);

#ifdef PR_SET_PDEATHSIG
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		ge_fail("pdeathsig", errno);
#endif
	/* The runner may have died before the line above. */
	if (o.ppid != 0 && getppid() != o.ppid)
		_exit(125);
	if (o.dir != NULL && chdir(o.dir) != 0)
		ge_fail("chdir", errno);

	if (o.ns != GE_OFF) {
		if ((userns = ge_unshare()) >= 0)
			ge_ns_parent(&o, userns);
		if (o.ns == GE_REQUIRE)
			ge_fail("unshare", errno);
	}
	/* No namespaces: set up here and become the target. */
	nproc = ge_nproc(&o, 0, 0);
	ge_limits(&o);
	abi = ge_landlock(&o);
	caps = ge_drop_caps();
	ge_report("setup ns=0 userns=0 landlock=%d caps=%d nproc=%s hidden=0 "
	    "ro=0\n", abi, caps, nproc);
	if (ge_status != -1 && fcntl(ge_status, F_SETFD, FD_CLOEXEC) != 0)
		ge_fail("cloexec", errno);
	ge_exec(&o);
}
