/*
 * supervise.c: a run without namespaces (-N off, or auto where the kernel
 * refuses them). gbr-exec stays as the run's supervisor and subreaper, and
 * forks the target, which alone is confined (confine.c). Namespace mode
 * is nsinit.c's. This is gbr-exec's own process, never a shared-memory
 * child, so it uses libc freely.
 */
#include "exec.h"

/*
 * Sends sig to each child of ours (the target, and what was reparented to
 * us: see "Supervisor"). From /proc/self/task/PID/children where the
 * kernel has it, else from every process's parent in /proc.
 */
static void
ge_sup_signal(pid_t self, int sig)
{
	char		 path[300], buf[4096], *p;
	DIR		*d;
	struct dirent	*de;
	FILE		*f;
	long		 pid, ppid;
	size_t		 n;

	snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)self);
	if ((f = fopen(path, "re")) != NULL) {
		while (fscanf(f, "%ld", &pid) == 1)
			if (pid > 1)
				(void)kill((pid_t)pid, sig);
		fclose(f);
		return;
	}
	if ((d = opendir("/proc")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = '\0';
		/* pid (comm) state ppid: the name ends at the last ')'. */
		if ((p = strrchr(buf, ')')) == NULL ||
		    sscanf(p + 1, " %*c %ld", &ppid) != 1 || ppid != self)
			continue;
		pid = strtol(de->d_name, NULL, 10);
		if (pid > 1)
			(void)kill((pid_t)pid, sig);
	}
	closedir(d);
}

/*
 * Supervisor. Without namespaces gbr-exec stays as the run's supervisor:
 * a child subreaper (every process the run leaves behind, however it
 * double-forks or calls setsid, is reparented to it, never to init), whose
 * target child is the leader of a session of its own (no terminal; its
 * kill(0) cannot reach the supervisor). The target alone gets the limits,
 * Landlock and the seccomp program; the supervisor stays outside them, so
 * Landlock's signal scoping (ABI 6) or, before it, the seccomp program's
 * rules on signals keep the run from killing its supervisor (or gbrd).
 * Like a namespace's init, it forwards SIGTERM, SIGINT and SIGHUP, reports
 * how the target ended, then kills what is left (each child in turn,
 * again at each wake-up, until there is no child at all) and says "end".
 * SIGUSR1, which the runner sends instead of SIGKILL and which gbrd's death
 * sends too (the death signal), ends everything at once the same way.
 */
void __attribute__((noreturn))
ge_supervise(struct ge_run *r)
{
	struct signalfd_siginfo	 si;
	struct ge_setup		 su;
	struct ge_line		 l;
	sigset_t		 mask;
	pid_t			 target, pid, self = getpid();
	ssize_t			 n;
	int			 sfd, st, done = 0, killing = 0, e;

#if defined(HAVE_SYS_PRCTL_H) && defined(PR_SET_CHILD_SUBREAPER)
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		ge_fail("subreaper", errno);
#else
	ge_fail("subreaper", ENOSYS);
#endif
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0)
		ge_fail("sigmask", errno);
	if ((sfd = signalfd(-1, &mask, SFD_CLOEXEC)) == -1)
		ge_fail("signalfd", errno);
	/*
	 * The runner may be gone when the status is written (its death is
	 * what SIGUSR1 says): the supervisor must live on to end the run.
	 */
	{
		struct sigaction	sa;

		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_IGN;
		(void)sigaction(SIGPIPE, &sa, NULL);
	}
	/* gbrd's death ends the run, not only the supervisor. */
	if ((e = ge_prctl(PR_SET_PDEATHSIG, SIGUSR1, 0)) != 0)
		ge_fail("pdeathsig", -e);
	if (r->o.ppid != 0 && getppid() != r->o.ppid)
		ge_exit(125);

	if ((target = fork()) == -1)
		ge_fail("fork", errno);
	if (target == 0) {
		(void)close(sfd);
		if (setsid() == -1)
			ge_fail("setsid", errno);
		if ((e = ge_prctl(PR_SET_PDEATHSIG, SIGKILL, 0)) != 0)
			ge_fail("pdeathsig", -e);
		if (getppid() != self)
			ge_exit(125);
		ge_sigdfl(SIGPIPE);
		memset(&su, 0, sizeof su);
		su.sup = 1;
		su.nproc = ge_nproc(&r->o, 0, 0);
		ge_limits(&r->o);
		su.abi = ge_landlock(&r->o, 0);
		su.caps = ge_drop_caps();
#ifdef GE_HAVE_SECCOMP
		su.seccomp = ge_bpf_len > 0 && r->o.seccomp != GE_OFF;
#endif
		sigemptyset(&mask);
		(void)sigprocmask(SIG_SETMASK, &mask, NULL);
		ge_report_setup(&su);
		if (ge_status != -1 && (e = ge_fcntl(ge_status, F_SETFD,
		    FD_CLOEXEC)) != 0)
			ge_fail("cloexec", -e);
		if (su.seccomp)
			(void)ge_filter_apply();
		ge_exec(&r->o, r->envp, r->shargv);
	}
	l.n = 0;
	for (;;) {
		n = read(sfd, &si, sizeof si);
		if (n == -1 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof si)
			break;
		if (si.ssi_signo == SIGUSR1)
			killing = 1;
		else if (si.ssi_signo != SIGCHLD) {
			if (!done)
				(void)kill(-target, (int)si.ssi_signo);
			ge_sup_signal(self, (int)si.ssi_signo);
		}
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0 ||
		    (pid == -1 && errno == EINTR)) {
			if (pid != target || done)
				continue;
			done = 1;
			ge_line_end(&l, st);
			ge_lsend(&l);
			l.n = 0;
		}
		if (pid == -1 && errno == ECHILD)
			break;
		if (killing && !done)
			(void)kill(-target, SIGKILL);
		if (done || killing)
			ge_sup_signal(self, SIGKILL);
	}
	/* No child is left: nothing of the run is (see "Status"). */
	if (done) {
		ge_ls(&l, "end\n");
		ge_lsend(&l);
	}
	ge_exit(done ? 0 : 1);
}
