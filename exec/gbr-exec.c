/*
 * gbr-exec: the trampoline between gbrd's runner (daemon/runner/runner.c)
 * and the program an agent asked to run. posix_spawn cannot apply resource
 * limits, a Landlock ruleset or namespaces in the child before the target
 * runs, so the runner spawns this small program instead, with the target's
 * argument vector after "--" and the limits as options; it applies them
 * and then runs the target. It links only against libc. It also runs as
 * the runner's fork server (-S, see "Server mode"), which applies the very
 * same setup without an exec of its own per run.
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
 *   -X PATH    a secret (~/.ssh): hidden as -x, unless Landlock is in
 *              force and no path the target may read holds it (the
 *              kernel keeps it out already, and a mount less is saved)
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

#include "exec.h"

/*
 * The files of gbr-exec, one responsibility each: this one holds main and
 * the options; exec.h the shared types and the system call layer;
 * status.c the status lines; sys.c libc's few helpers made safe for a
 * shared-memory child; confine.c limits, Landlock, seccomp and
 * capabilities; mounts.c the mount namespace; nsinit.c the namespaces'
 * init; supervise.c a run without namespaces; server.c the fork server.
 */

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
 * Parses the options (getopt's "+C:s:p:c:a:f:o:n:l:r:w:N:x:X:R:TS", by hand:
 * the server parses one vector per run). Returns 0, or -1 with *why
 * pointing at a static reason and *bad at the offending word.
 */
int
ge_parse(struct ge_opts *o, int argc, char **argv, const char **why,
    const char **bad)
{
	const char	*a, *val;
	long long	 v;
	int		 i, m;
	char		 c;

	memset(o, 0, sizeof *o);
	o->status_fd = o->filter_fd = -1;
	o->cpu = o->as = o->fsize = o->nofile = o->nproc = -1;
	o->landlock = o->ns = o->seccomp = GE_OFF;
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
		if (strchr("Cspcafonlrw NxXRtFK", c) == NULL || c == ' ') {
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
		if (strchr("spcafonF", c) != NULL && (v = ge_number(val)) < 0) {
			*why = "needs a number";
			return -1;
		}
		m = 0;
		if ((c == 'l' || c == 'N' || c == 'K') &&
		    (m = ge_mode(val)) < 0) {
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
		case 'K': o->seccomp = (enum ge_mode)m; break;
		case 'F': o->filter_fd = v > INT_MAX ? -1 : (int)v; break;
		case 't':
			if (val[0] != '/') {
				*why = "needs an absolute path";
				return -1;
			}
			o->tmpdir = val;
			break;
		case 'r': m = ge_add(&o->rd, val); break;
		case 'w': m = ge_add(&o->wr, val); break;
		case 'x': m = ge_add(&o->hide, val); break;
		case 'X': m = ge_add(&o->secret, val); break;
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
	    "[-N off|auto|require] [-x path] [-X path] [-R path] [-T]\n"
	    "                -- program [args...]\n"
	    "       gbr-exec -S -s fd [-p ppid]\n"
	    "gbr-exec is gbrd's helper: see the comment at the top of "
	    "exec/gbr-exec.c.\n");
	exit(125);
}

int
main(int argc, char **argv)
{
	extern char	**environ;
	struct ge_run	 r;
	const char	*why, *bad;
	int		 e, n;

	memset(&r, 0, sizeof r);
	if (ge_parse(&r.o, argc, argv, &why, &bad) != 0)
		usage(why, bad);
	ge_once();
	if (r.o.server)
		ge_server(&r.o);
	if (r.o.status_fd > 2)
		ge_status = r.o.status_fd;
	/* Before the descriptor goes with the others ("Seccomp", confine.c). */
	ge_filter_setup(&r.o, getpid());
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
		/* In the namespaces the session's temp space is /tmp. */
		if (r.o.tmpdir != NULL && setenv("TMPDIR", "/tmp", 1) != 0)
			ge_fail("setenv", errno);
		r.envp = environ;
#ifdef GE_HAVE_NS
		e = ge_ns_parent(&r);
#else
		e = -ENOSYS;
#endif
		if (r.o.ns == GE_REQUIRE)
			ge_fail("unshare", -e);
		if (r.o.tmpdir != NULL) {
			char	tmp[PATH_MAX];

			if (ge_join(tmp, r.o.tmpdir, "/tmp") != 0 ||
			    setenv("TMPDIR", tmp, 1) != 0)
				ge_fail("setenv", ENAMETOOLONG);
			r.envp = environ;
		}
	}
	/* No namespaces: gbr-exec stays as the run's supervisor. */
	ge_supervise(&r);
}
