/*
 * nsinit.c: namespace mode ("Namespaces" and "Cost" at the top of
 * gbr-exec.c). It maps the stacks, clones the init into new pid and mount
 * namespaces (and a user namespace when not root) and, for a direct run,
 * waits for it; the init writes its user namespace's uid_map, has the
 * mounts made (mounts.c) and the target confined (confine.c), clones the
 * target, reaps everything, forwards signals and reports how the target
 * ended. The fork server (server.c) clones the same init for each of its
 * runs; a run without namespaces is supervise.c's.
 */
#include "exec.h"

#ifdef GE_HAVE_NS
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
	 * Every disposition is the default already (ge_once in gbr-exec.c;
	 * the init set only defaults), so only the mask is left to clear.
	 * The init says "setup" once the target has ended (one write, one
	 * wake-up of the runner); a failure here says "error" first.
	 */
	(void)ge_close(r->sfd);
	(void)ge_sigmask(SIG_SETMASK, 0, NULL);
	(void)ge_drop_caps();
	if ((e = ge_fcntl(ge_status, F_SETFD, FD_CLOEXEC)) != 0 &&
	    ge_status != -1)
		ge_fail("cloexec", -e);
	if (r->o.seccomp != GE_OFF)
		(void)ge_filter_apply();
	ge_exec(&r->o, r->envp, r->shargv);
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
	 * init a process group's leader already: see ge_sv_run in server.c.)
	 */
	ge_close_from(r->server ? GE_MSG_FDS : ge_status > 2 ? ge_status + 1 : 3);
	/*
	 * The ids are the ones read before the clone: inside the new user
	 * namespace, before its map is written, they read as the overflow
	 * uid (65534), which the kernel refuses to map.
	 */
	if (r->userns)
		ge_userns_map(r->uid, r->gid);
	ge_mounts(&r->o, &r->su);
	/*
	 * The working folder is entered after the mounts: one entered
	 * before would still be the covered /tmp's, and ".." from it would
	 * lead back into what the mounts hid.
	 */
	if (r->o.dir != NULL && (e = ge_chdir(r->o.dir)) != 0)
		ge_fail("chdir", -e);
	r->su.nproc = ge_nproc(&r->o, 1, r->userns);
	ge_limits(&r->o);
	r->su.abi = ge_landlock(&r->o, r->su.tmp);
	r->su.ns = 1;
	r->su.userns = r->userns;
	r->su.caps = ge_getuid() == 0;
#ifdef GE_HAVE_SECCOMP
	r->su.seccomp = ge_bpf_len > 0 && r->o.seccomp != GE_OFF;
#endif

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
		ge_fail("fork", errno);	/* "Cost" in gbr-exec.c */
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
			ge_line_setup(&l, &r->su);
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
#endif

/* The tops of a stack pair's two stacks. */
void
ge_stack_tops(struct ge_run *r, void *base)
{
	char	*p = base;

	r->istack = p + GE_GUARD + GE_STACK;
	r->tstack = p + 2 * (GE_GUARD + GE_STACK);
}

/* Maps a stack pair: init's and target's, each above a guard page. */
int
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

#ifdef GE_HAVE_NS
/*
 * Clones the init into new pid and mount namespaces (and a user namespace
 * when not root). Returns its pid, or -errno.
 */
pid_t
ge_clone_init(struct ge_run *r)
{
	int	flags = GE_SHARE_VM | CLONE_NEWPID | CLONE_NEWNS | SIGCHLD;
	pid_t	pid;

	r->userns = getuid() != 0;
	r->uid = getuid();
	r->gid = getgid();
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
int
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
