/*
 * confine.c: what confines the target itself, whatever made it (the
 * namespaces' init, the supervisor's child): resource limits and the
 * process limit ("Processes" at the top of gbr-exec.c), no_new_privs,
 * Landlock, the seccomp program gbrd compiled, and dropping root's
 * capabilities. The namespaces and the mounts are nsinit.c's and
 * mounts.c's; the order in which a run applies all of them is theirs and
 * supervise.c's.
 */
#include "exec.h"

#define GE_PIDMAX_MIN	301	/* the kernel's floor for pid_max */

/* Set once before any child exists (ge_once, the server's start). */
int	ge_cap_last = 63;	/* the highest capability number */
int	ge_pidmax_ns = -1;	/* pid_max is per namespace (6.14+) */
int	ge_caps_bounded;	/* ge_caps_bound done (server, root) */
#ifdef GE_HAVE_SECCOMP
/* The seccomp program (see "Seccomp" below); ge_bpf_len 0: none. */
static struct sock_filter	*ge_bpf;
unsigned short			 ge_bpf_len;
#endif

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

/* What every run may read under Landlock. */
static const char *const sys_ro[] = { GE_SYS_READ };

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

/*
 * Builds and enforces the ruleset (tmp: the session's temp space is at
 * /tmp and /dev/shm). Returns the ABI used, or 0 for none.
 */
int GE_CHILD
ge_landlock(const struct ge_opts *o, int tmp)
{
	/*
	 * Devices, all files. Not /dev/shm: the host's is shared by every
	 * process of the machine; a run gets the session's (-t), or none.
	 */
	static const char *const sys_dev[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
		"/dev/urandom",
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
		ge_ll_allow(rs, sys_dev[i], handled, handled, 0, 1);
	for (i = 0; i < (size_t)o->rd.n; i++)
		ge_ll_allow(rs, o->rd.v[i], GE_LL_READ, handled, 0, 0);
	for (i = 0; i < (size_t)o->wr.n; i++)
		ge_ll_allow(rs, ge_tmp_alias(o, tmp, o->wr.v[i]), handled,
		    handled, 1, 0);
	if ((r = (int)ge_ll(SYS_landlock_restrict_self, rs, 0, 0)) != 0)
		ge_fail("landlock-restrict", -r);
	(void)ge_close(rs);
	return abi;
}

/*
 * True if Landlock will be in force for the run and no path it may read
 * or write holds path: the kernel keeps path out with no mount over it.
 * The paths are compared as strings: gbrd gives real paths.
 */
int GE_CHILD
ge_landlock_keeps_out(const struct ge_opts *o, const char *path)
{
	size_t	i;
	int	j;

	if (o->landlock == GE_OFF || ge_ll_abi() < 2)
		return 0;
	for (i = 0; i < sizeof sys_ro / sizeof sys_ro[0]; i++)
		if (ge_under(path, sys_ro[i]))
			return 0;
	for (j = 0; j < o->rd.n; j++)
		if (ge_under(path, o->rd.v[j]))
			return 0;
	for (j = 0; j < o->wr.n; j++)
		if (ge_under(path, o->wr.v[j]))
			return 0;
	return 1;
}
#else
/* Built without Landlock: "require" cannot be met. */
int GE_CHILD
ge_landlock(const struct ge_opts *o, int tmp)
{
	if (o->landlock == GE_REQUIRE)
		ge_fail("landlock-abi", EOPNOTSUPP);
	return 0;
}

/* Without Landlock nothing is kept out but by a mount. */
int GE_CHILD
ge_landlock_keeps_out(const struct ge_opts *o, const char *path)
{
	(void)o;
	(void)path;
	return 0;
}
#endif

#ifdef GE_HAVE_SECCOMP
/*
 * Seccomp. gbrd compiles the program (daemon/runner/runfilter.c) and
 * passes it on descriptor -F: an array of struct sock_filter, at most
 * BPF_MAXINSNS. It is read once, before any child exists, into memory no
 * child writes; the placeholder pids of gbr-exec.h become the supervisor's
 * and the runner's (0, which the kernel never gives a process, where there
 * are none: a run in a pid namespace cannot name either anyway). Returns
 * 0, or -errno.
 */
static int
ge_filter_load(int fd, pid_t supervisor, pid_t runner)
{
	struct sock_filter	*f;
	struct stat		 st;
	ssize_t			 n;
	size_t			 len, got = 0, i;
	uint32_t		 sup = (uint32_t)supervisor;
	uint32_t		 run = (uint32_t)runner;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof *f != 0 ||
	    st.st_size > (off_t)(BPF_MAXINSNS * sizeof *f))
		return -EINVAL;
	len = (size_t)st.st_size;
	if ((f = malloc(len)) == NULL)
		return -ENOMEM;
	while (got < len) {
		n = pread(fd, (char *)f + got, len - got, (off_t)got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(f);
			return n == 0 ? -EIO : -errno;
		}
		got += (size_t)n;
	}
	for (i = 0; i < len / sizeof *f; i++) {
		if (f[i].k == GE_PID_SUPERVISOR)
			f[i].k = sup;
		else if (f[i].k == 0U - (uint32_t)GE_PID_SUPERVISOR)
			f[i].k = 0U - sup;
		else if (f[i].k == GE_PID_RUNNER)
			f[i].k = run;
		else if (f[i].k == 0U - (uint32_t)GE_PID_RUNNER)
			f[i].k = 0U - run;
	}
	ge_bpf = f;
	ge_bpf_len = (unsigned short)(len / sizeof *f);
	return 0;
}

/*
 * Puts the target under the program, the last step before its execve
 * (no_new_privs is set). Returns 1 if it is on, 0 without a program.
 */
int GE_CHILD
ge_filter_apply(void)
{
	struct sock_fprog	prog;
	long			r;

	if (ge_bpf_len == 0)
		return 0;
	memset(&prog, 0, sizeof prog);
	prog.len = ge_bpf_len;
	prog.filter = ge_bpf;
#if defined(GE_RAW) && defined(SYS_seccomp)
	r = GE_S3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
#elif defined(SYS_seccomp)
	r = ge_ret(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
#else
	r = -ENOSYS;
#endif
	if (r == -ENOSYS)
		r = ge_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
		    (unsigned long)&prog);
	if (r != 0)
		ge_fail("seccomp", (int)-r);
	return 1;
}
#else
static int
ge_filter_load(int fd, pid_t supervisor, pid_t runner)
{
	return -ENOSYS;
}

int GE_CHILD
ge_filter_apply(void)
{
	return 0;
}
#endif

/*
 * Takes the program for a run (see "Seccomp"), or fails as the mode says:
 * "require" without one is an error, "auto" runs without, "off" ignores it.
 */
void
ge_filter_setup(const struct ge_opts *o, pid_t supervisor)
{
	int	r = -ENOENT;

	if (o->filter_fd != -1) {
		/* The server loads it for runs whose own mode decides. */
		if (o->seccomp != GE_OFF || o->server)
			r = ge_filter_load(o->filter_fd, supervisor, o->ppid);
		(void)close(o->filter_fd);
	}
	if (r != 0 && o->seccomp == GE_REQUIRE)
		ge_fail("seccomp", -r);
}

#ifdef GE_HAVE_CAPS
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
int GE_CHILD
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
int GE_CHILD
ge_drop_caps(void)
{
#ifdef GE_HAVE_CAPS
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

/*
 * Sets the process limit meaningfully ("Processes" in gbr-exec.c).
 * Returns its kind (a string constant). Only in_pidns == 0 may count the
 * uid's tasks, which needs libc: that is gbr-exec's own process, never a
 * shared-memory child.
 */
const char * GE_CHILD
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
void GE_CHILD
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
