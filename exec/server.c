/*
 * server.c: the fork server (gbr-exec -S; "Server mode" at the top of
 * gbr-exec.c, and the messages in gbr-exec.h). It reads RUN and KILL from
 * the runner's socket, clones each run's init (nsinit.c) on a stack pair
 * it keeps for reuse, signals and reaps the inits, and says READY, FAILED
 * and DONE. What happens inside a run is nsinit.c's; a run's options are
 * parsed by gbr-exec.c's ge_parse, as for a direct run.
 */
#include "exec.h"

#define GE_SV_RUNS_MAX	4096	/* runs one server holds at once */
#define GE_SV_POOL	32	/* stack pairs the server keeps for reuse */

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
 * Fault injection for tests, as in daemon/base/fault.h: inert unless
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
	/* The run's own -F means nothing here: the server's program holds. */
	j->run.o.filter_fd = -1;
#ifdef GE_HAVE_SECCOMP
	if (j->run.o.seccomp == GE_REQUIRE && ge_bpf_len == 0) {
		err = ENOSYS;
		goto fail;
	}
#endif
	/* In the namespaces the session's temp space is /tmp. */
	if (j->run.o.tmpdir != NULL)
		for (i = 0; envp[i] != NULL; i++)
			if (strncmp(envp[i], "TMPDIR=", 7) == 0)
				envp[i] = (char *)"TMPDIR=/tmp";
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

/* Serves runs until the runner goes ("Server mode" in gbr-exec.c). */
void __attribute__((noreturn))
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
	/* The seccomp program, before its descriptor goes ("Seccomp", confine.c). */
	ge_filter_setup(o, 0);
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
#ifdef GE_HAVE_CAPS
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
