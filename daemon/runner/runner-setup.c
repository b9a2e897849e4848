/*
 * The runner on this system: runner_init and runner_reconfigure. Finding
 * gbr-exec (the config's, $GBR_EXEC, beside gbrd, libexec), learning
 * which layers really hold here (the kernel's Landlock ABI, and a probe
 * run of gbr-exec -T that reports what it set up), turning off an "auto"
 * layer the system offers but refuses, the policy that refuses commands
 * when a layer is missing and its risk is not accepted (runner.h,
 * RUNNER_RISK_*), the sweep of processes a previous gbrd left behind,
 * and what daemon.status says about all of it.
 *
 * It does not own the jobs (runner.c) or the fork server (its start and
 * probe are runner-forksrv.c's; runner_init only calls them).
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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

#include <event2/event.h>

#include "log.h"
#include "runfilter.h"
#include "runner-int.h"
#include "xmalloc.h"

extern char	**environ;

/* Finds gbr-exec: the config's, $GBR_EXEC, beside this program, libexec. */
static char *
rn_find_exec(const char *configured)
{
	char		 self[PATH_MAX], *slash, *p;
	const char	*env;
	ssize_t		 n;

	if (configured != NULL)
		return access(configured, X_OK) == 0 ? xstrdup(configured) : NULL;
	if ((env = getenv("GBR_EXEC")) != NULL && *env != '\0')
		return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			p = xasprintf("%s/gbr-exec", self);
			if (access(p, X_OK) == 0)
				return p;
			free(p);
		}
	}
#ifdef GBR_LIBEXECDIR
	if (access(GBR_LIBEXECDIR "/gbr-exec", X_OK) == 0)
		return xstrdup(GBR_LIBEXECDIR "/gbr-exec");
#endif
	return NULL;
}

/* The Landlock ABI of this kernel. */
static int
rn_probe_landlock(void)
{
#if defined(HAVE_LINUX_LANDLOCK_H) && defined(SYS_landlock_create_ruleset)
	long	v = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U);

	return v < 0 ? 0 : (int)v;
#else
	return 0;
#endif
}

/*
 * Runs gbr-exec once in test mode (-T: set up, report, exit) to learn
 * which layers really hold here. Blocking, but only at start, bounded by a
 * 5 s poll.
 */
static void
rn_probe(enum runner_mode ll_mode, enum runner_mode ns_mode)
{
	posix_spawn_file_actions_t	 fa;
	struct rn_strv			 av;
	struct rn_setup			 su;
	struct pollfd			 pfd;
	char				 buf[RN_STATUS_MAX + 1], *nl;
	size_t				 len = 0;
	ssize_t				 n;
	pid_t				 pid;
	int				 p[2], st, r, ffd;

	free(rn.probe_error);
	rn.probe_error = NULL;
	rn.probe_ok = 0;
	if (pipe2(p, O_CLOEXEC) != 0) {
		rn.probe_error = xasprintf("pipe: %s", strerror(errno));
		return;
	}
	memset(&av, 0, sizeof av);
	rn_strv_add(&av, rn.exec_path);
	rn_strv_add(&av, "-T");
	rn_strv_num(&av, "-s", RN_STATUS_FD);
	rn_strv_add(&av, "-l");
	rn_strv_add(&av, rn_mode_name(ll_mode));
	rn_strv_add(&av, "-N");
	rn_strv_add(&av, rn_mode_name(ns_mode));
	/* What the kernel takes, whatever the mode: rn_policy decides. */
	rn_strv_add(&av, "-K");
	rn_strv_add(&av, "auto");
	ffd = runfilter_fd(ns_mode != RUNNER_OFF);
	if (ffd != -1)
		rn_strv_num(&av, "-F", RN_FILTER_FD);
	rn_strv_num(&av, "-n", 64);
	rn_strv_add(&av, "-w");
	rn_strv_add(&av, "/tmp");
	rn_strv_add(&av, "--");
	rn_strv_add(&av, "true");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], RN_STATUS_FD);
	if (ffd != -1)
		posix_spawn_file_actions_adddup2(&fa, ffd, RN_FILTER_FD);
	r = posix_spawn(&pid, rn.exec_path, &fa, NULL, av.v, environ);
	posix_spawn_file_actions_destroy(&fa);
	rn_strv_free(&av);
	close(p[1]);
	if (r != 0) {
		close(p[0]);
		rn.probe_error = xasprintf("%s: %s", rn.exec_path, strerror(r));
		return;
	}
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (len < sizeof buf - 1 && poll(&pfd, 1, 5000) > 0) {
		if ((n = read(p[0], buf + len, sizeof buf - 1 - len)) <= 0)
			break;
		len += (size_t)n;
	}
	close(p[0]);
	buf[len] = '\0';
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	if (rn_parse_setup(buf, &su) == 0) {
		rn.probe_ok = 1;
		rn.probe_ns = su.ns;
		rn.probe_userns = su.userns;
		rn.probe_caps = su.caps;
		rn.probe_seccomp = su.seccomp;
		rn.probe_proc = su.proc;
		rn.probe_tmp = su.tmp;
		rn.probe_sup = su.sup;
		snprintf(rn.probe_nproc, sizeof rn.probe_nproc, "%s", su.nproc);
	} else
		rn.probe_error = xstrdup(len > 0 ? buf : "no report");
}

/* Sets the daemon-wide caps. */
static void
rn_apply(const struct runner_config *cfg)
{
	rn.max_children = cfg->max_children > 0 ? cfg->max_children : 16;
	rn.max_per_key = cfg->max_per_key > 0 ? cfg->max_per_key : rn.max_children;
	rn.max_queued = cfg->max_queued;
	rn.grace_ms = cfg->grace_ms > 0 ? cfg->grace_ms : 2000;
	rn.landlock = cfg->landlock;
	rn.namespaces = cfg->namespaces;
	rn.seccomp = cfg->seccomp;
	rn.accept_risks = cfg->accept_risks;
	rn.spawn = cfg->spawn;
	if (rn.ns_broken && rn.namespaces == RUNNER_AUTO)
		rn.namespaces = RUNNER_OFF;
	if (rn.ll_broken && rn.landlock == RUNNER_AUTO)
		rn.landlock = RUNNER_OFF;
}

/* Why Landlock does not hold here, or NULL if it does. */
static const char *
rn_ll_why(void)
{
	if (rn.ll_broken)
		return "the kernel offers it but refused a ruleset (see the log)";
	if (rn.landlock == RUNNER_OFF)
		return "landlock = off in gbrd.conf";
	if (rn.ll_abi == 0)
		return "the kernel has no Landlock, or it is disabled";
	if (rn.ll_abi < 2)
		return "the kernel has only ABI 1 (2 or later is needed)";
	return NULL;
}

/* Why the seccomp filter does not hold here, or NULL if it does. */
static const char *
rn_seccomp_why(void)
{
	if (rn.seccomp == RUNNER_OFF)
		return "seccomp = off in gbrd.conf";
	if (rn.seccomp_why != NULL)
		return rn.seccomp_why;
	if (!rn.probe_ok || !rn.probe_seccomp)
		return "the kernel refused the filter (see the log)";
	return NULL;
}

/* True if runs have their own pid and mount namespaces. */
static int
rn_ns_active(void)
{
	return rn.namespaces != RUNNER_OFF && rn.probe_ok && rn.probe_ns;
}

/*
 * Decides whether commands may run with the layers that hold (see
 * runner.h, RUNNER_RISK_*): each invariant needs one layer that keeps it,
 * or gbrd.conf accepting the risk by name. Sets rn.refusal.
 */
static void
rn_policy(void)
{
	struct {
		unsigned	 bit;
		const char	*name, *layer, *why, *risk;
	} need[3];
	char		*msg = NULL, *names = NULL, *t;
	size_t		 n = 0, i;
	const char	*llw = rn_ll_why(), *scw = rn_seccomp_why();

	free(rn.refusal);
	rn.refusal = NULL;
	if (!rn.ready)
		return;
	if (llw != NULL && !(rn.accept_risks & RUNNER_RISK_WRITES)) {
		need[n].bit = RUNNER_RISK_WRITES;
		need[n].name = "writes";
		need[n].layer = "Landlock";
		need[n].why = llw;
		need[n++].risk = rn_ns_active() ? "write anywhere your user "
		    "can (your home, gbrd's state and config)" : "write "
		    "anywhere your user can (your home, gbrd's state and "
		    "config) and read your secrets (~/.ssh, ...)";
	}
	if (scw != NULL && !(rn.accept_risks & RUNNER_RISK_CONTROL)) {
		need[n].bit = RUNNER_RISK_CONTROL;
		need[n].name = "control";
		need[n].layer = "the seccomp filter";
		need[n].why = scw;
		need[n++].risk = "connect to a gbrd socket and create sessions "
		    "or answer its own approvals";
	}
	if (!rn_ns_active() && scw != NULL && rn.ll_abi < 6 &&
	    !(rn.accept_risks & RUNNER_RISK_LEFTOVERS)) {
		need[n].bit = RUNNER_RISK_LEFTOVERS;
		need[n].name = "leftovers";
		need[n].layer = "a pid namespace";
		need[n].why = "none here, and neither seccomp nor Landlock "
		    "ABI 6 keeps a run from killing its supervisor";
		need[n++].risk = "leave processes running after the command";
	}
	if (n == 0)
		return;
	for (i = 0; i < n; i++) {
		t = xasprintf("%s%s%s is missing (%s): a command could %s",
		    msg != NULL ? msg : "", msg != NULL ? "; " : "",
		    need[i].layer, need[i].why, need[i].risk);
		free(msg);
		msg = t;
		t = xasprintf("%s%s%s", names != NULL ? names : "",
		    names != NULL ? ", " : "", need[i].name);
		free(names);
		names = t;
	}
	rn.refusal = xasprintf("commands are refused here: %s. To run them "
	    "anyway, accept the risk in gbrd.conf: [exec] accept_risks = %s",
	    msg, names);
	free(msg);
	free(names);
}

/* Why commands cannot run here (see runner.h). */
const char *
runner_refusal(void)
{
	return rn.refusal;
}

/* True if runs get namespaces. */
int
runner_namespaces(void)
{
	return rn_ns_active();
}

/* Unconfined writes are refused here (rn_policy), never run: none. */
const char *
runner_unconfined(void)
{
	return NULL;
}

/* A Unix program needs nothing of the environment to start. */
const char *const *
runner_env_needed(size_t *n)
{
	static const char *const none[] = { NULL };

	*n = 0;
	return none;
}

/* Takes the hidden files (at start only: they do not change on reload). */
static void
rn_set_hide(const struct runner_config *cfg)
{
	size_t	i;

	rn_strv_free(&rn.hide);
	for (i = 0; i < cfg->nhide && i < RN_PATHS_MAX; i++)
		if (cfg->hide[i] != NULL && cfg->hide[i][0] == '/')
			rn_strv_add(&rn.hide, cfg->hide[i]);
	rn_strv_free(&rn.secrets);
	for (i = 0; i < cfg->nsecrets && i < RN_PATHS_MAX; i++)
		if (cfg->secrets[i] != NULL && cfg->secrets[i][0] == '/')
			rn_strv_add(&rn.secrets, cfg->secrets[i]);
}

/* Sets the runner up. */
int
runner_init(struct event_base *base, const struct runner_config *cfg,
    char **cause)
{
	struct sigaction	sa;

	*cause = NULL;
	if (rn.base != NULL) {
		*cause = xstrdup("the runner is already set up");
		return -1;
	}
	rn.base = base;
	TAILQ_INIT(&rn.queued);
	TAILQ_INIT(&rn.running);
	TAILQ_INIT(&rn.finished);
	TAILQ_INIT(&rn.fs_dying);
	if ((rn.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
		*cause = xasprintf("/dev/null: %s", strerror(errno));
		return -1;
	}
	rn_apply(cfg);
	rn_set_hide(cfg);
	if ((rn.ev_deliver = evtimer_new(base, rn_deliver, NULL)) == NULL) {
		*cause = xstrdup("cannot create an event");
		return -1;
	}
	/* A child gone before its input was written must not kill us. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, NULL);
	}
#if defined(HAVE_SYS_PRCTL_H) && defined(PR_SET_DUMPABLE)
	/*
	 * Children run as our uid: without this they could read
	 * /proc/<gbrd>/environ (API keys) and mem where Landlock is missing.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
		rn.dumpable_off = 1;
#endif
	rn.use_pidfd = !rn.force_sigchld;
#ifndef SYS_pidfd_open
	rn.use_pidfd = 0;
#endif
	if (!rn.use_pidfd && rn_watch_sigchld() != 0) {
		*cause = xstrdup("cannot watch SIGCHLD");
		return -1;
	}
	rn.ll_abi = rn_probe_landlock();
	{
		char	*why;

		if (runfilter_init(&why) != 0) {
			log_warn("runner: no seccomp filter for commands: %s", why);
			rn.seccomp_why = why;
		}
	}
	if (cfg->instance != NULL) {
		unsigned	n = runner_sweep(cfg->instance);

		if (n > 0)
			log_warn("runner: killed %u processes a previous run left "
			    "behind", n);
		rn.instance = xasprintf("GBR_RUNNER=%s", cfg->instance);
	}
	if ((rn.exec_path = rn_find_exec(cfg->exec_path)) == NULL) {
		log_warn("runner: gbr-exec not found (%s): commands cannot run",
		    cfg->exec_path != NULL ? cfg->exec_path :
		    "set GBR_EXEC, or install it beside gbrd or in libexec");
		return 0;
	}
	rn_probe(rn.landlock, rn.namespaces);
	/*
	 * A system can offer a layer and then refuse part of it (a user
	 * namespace whose uid_map cannot be written, under some AppArmor
	 * policies): in "auto" such a layer is turned off, said once, and
	 * daemon.status shows it; "require" stays a refusal.
	 */
	if (!rn.probe_ok && rn.namespaces == RUNNER_AUTO) {
		log_warn("runner: namespaces fail here (%s); running without",
		    rn.probe_error);
		free(rn.ns_why);
		rn.ns_why = xstrdup(rn.probe_error != NULL ? rn.probe_error :
		    "the probe failed");
		rn.ns_broken = 1;
		rn.namespaces = RUNNER_OFF;
		rn_probe(rn.landlock, rn.namespaces);
	}
	if (!rn.probe_ok && rn.landlock == RUNNER_AUTO) {
		log_warn("runner: Landlock fails here (%s); running without",
		    rn.probe_error);
		rn.ll_broken = 1;
		rn.landlock = RUNNER_OFF;
		rn_probe(rn.landlock, rn.namespaces);
	}
	if (!rn.probe_ok) {
		log_warn("runner: %s does not work here: %s", rn.exec_path,
		    rn.probe_error);
		return 0;
	}
	if (rn.namespaces == RUNNER_REQUIRE && !rn.probe_ns) {
		*cause = xasprintf("namespaces are required and this system "
		    "cannot make them");
		return -1;
	}
	if (rn.landlock == RUNNER_REQUIRE && rn.ll_abi < 2) {
		*cause = xasprintf("Landlock is required and this kernel has "
		    "ABI %d (2 or later is needed)", rn.ll_abi);
		return -1;
	}
	if (rn.seccomp == RUNNER_REQUIRE && !rn.probe_seccomp) {
		*cause = xasprintf("seccomp is required and cannot be had here "
		    "(%s)", rn.seccomp_why != NULL ? rn.seccomp_why :
		    "the kernel refused the filter");
		return -1;
	}
	if (!rn.probe_seccomp && rn.seccomp_why == NULL)
		rn.seccomp_why = xstrdup("the kernel refused the filter");
	rn.ready = 1;
	rn_fs_init();
	rn_policy();
	if (rn.refusal != NULL)
		log_warn("runner: %s", rn.refusal);
	return 0;
}

/* True if a NUL-separated environment block holds entry exactly. */
static int
rn_environ_has(const char *blk, size_t len, const char *entry)
{
	size_t	elen = strlen(entry), i = 0, n;

	while (i < len) {
		n = strnlen(blk + i, len - i);
		if (n == elen && memcmp(blk + i, entry, elen) == 0)
			return 1;
		i += n + 1;
	}
	return 0;
}

/* Kills leftovers of a previous run (see runner.h). */
unsigned
runner_sweep(const char *instance)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	char		 path[300], *blk, *entry;
	size_t		 len;
	ssize_t		 n;
	unsigned	 killed = 0;
	long		 pid;
	int		 fd, pidfd;
	char		*end;

	if (instance == NULL || (d = opendir("/proc")) == NULL)
		return 0;
	entry = xasprintf("GBR_RUNNER=%s", instance);
	blk = xmalloc(256 * 1024);
	while ((de = readdir(d)) != NULL) {
		pid = strtol(de->d_name, &end, 10);
		if (*end != '\0' || pid <= 1 || pid == (long)getpid())
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 ||
		    st.st_uid != getuid())
			continue;
		/* A pidfd first: the kill then cannot hit a reused pid. */
		pidfd = -1;
#ifdef SYS_pidfd_open
		pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
		snprintf(path, sizeof path, "/proc/%ld/environ", pid);
		len = 0;
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
			while (len < 256 * 1024 && (n = read(fd, blk + len,
			    256 * 1024 - len)) > 0)
				len += (size_t)n;
			close(fd);
		}
		if (len > 0 && rn_environ_has(blk, len, entry)) {
#if defined(SYS_pidfd_send_signal)
			if (pidfd != -1 && syscall(SYS_pidfd_send_signal, pidfd,
			    SIGKILL, NULL, 0) == 0)
				killed++;
			else
#endif
			if (pidfd == -1 && kill((pid_t)pid, SIGKILL) == 0)
				killed++;
		}
		if (pidfd != -1)
			close(pidfd);
	}
	closedir(d);
	free(blk);
	free(entry);
	return killed;
}

/* Applies new caps. */
void
runner_reconfigure(const struct runner_config *cfg)
{
	enum runner_mode	ns = rn.namespaces;

	rn_apply(cfg);
	if (rn.namespaces == RUNNER_REQUIRE && !rn.probe_ns) {
		log_warn("runner: namespaces are required but cannot be made "
		    "here; keeping '%s'", rn_mode_name(ns));
		rn.namespaces = ns;
	}
	/* Turned on again (or namespaces are): a server, if none runs. */
	if (rn.ready && rn.fs == NULL && !rn.fs_given_up &&
	    rn.spawn == RUNNER_SPAWN_AUTO && rn.namespaces != RUNNER_OFF &&
	    rn.probe_ns && rn_fs_start() != 0)
		log_warn("runner: no fork server (%s)", rn.fs_why);
	rn_policy();
	rn_pump();
}

/* The kernel's Landlock ABI. */
int
runner_landlock_abi(void)
{
	return rn.base != NULL ? rn.ll_abi : rn_probe_landlock();
}

/* The gbr-exec in use. */
const char *
runner_exec_path(void)
{
	return rn.exec_path;
}

/* What holds here, for daemon.status. */
json_t *
runner_status_json(void)
{
	json_t		*o, *ll, *sc, *inv;
	const char	*why = rn_ll_why(), *scw = rn_seccomp_why();
	int		 ns = rn_ns_active();

	ll = json_pack("{s:b, s:i, s:s, s:s?, s:b}",
	    "active", why == NULL && rn.ready,
	    "abi", rn.ll_abi,
	    "mode", rn_mode_name(rn.landlock),
	    "why_not", why,
	    "scoped_signals_and_sockets", why == NULL && rn.ll_abi >= 6);
	sc = json_pack("{s:b, s:s, s:s?, s:i}",
	    "active", scw == NULL && rn.ready,
	    "mode", rn_mode_name(rn.seccomp),
	    "why_not", scw,
	    "instructions", (int)runfilter_size(ns));
	/*
	 * Each invariant of doc/PROTOCOL.md ("What a command can reach"),
	 * and what keeps it here: a layer, "checked after each command", or
	 * "accepted risk" (gbrd.conf), or "refused" (commands do not run).
	 */
	inv = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}",
	    "no_control_channel", scw == NULL ? (ns ? "seccomp, mount "
		"namespace, peer check" : "seccomp, peer check") :
		(rn.accept_risks & RUNNER_RISK_CONTROL) ? "accepted risk" :
		"refused",
	    "writes_confined", why == NULL ? (ns ? "landlock, mount "
		"namespace" : "landlock") :
		(rn.accept_risks & RUNNER_RISK_WRITES) ? "accepted risk" :
		"refused",
	    "nothing_outlives_a_run", ns ? "pid namespace" :
		scw == NULL || (why == NULL && rn.ll_abi >= 6) ? "supervisor" :
		(rn.accept_risks & RUNNER_RISK_LEFTOVERS) ? "accepted risk" :
		"refused",
	    "protected_paths", ns ? "read-only mounts, then checked after "
		"each command" : "checked after each command (no mount "
		"namespace: not locked while it runs)",
	    "private_temp", ns ? "the session's /tmp and /dev/shm" :
		why == NULL ? "the session's TMPDIR; no /dev/shm" : "refused",
	    "secrets_out_of_reach", why == NULL ? (ns ? "landlock (reads "
		"the system, the toolchains and the roots), mount namespace "
		"(the secret stores hidden)" : "landlock (reads the system, "
		"the toolchains and the roots)") : ns ? "mount namespace (the "
		"secret stores hidden; no Landlock: the rest of the home is "
		"readable)" : (rn.accept_risks & RUNNER_RISK_WRITES) ?
		"accepted risk" : "refused");
	o = json_pack("{s:b, s:s?, s:s?, s:o, s:b, s:b, s:b, s:b, s:s, s:b, "
	    "s:b, s:s, s:b, s:{s:I, s:I, s:I, s:I}, s:i}",
	    "available", rn.ready,
	    "exec", rn.exec_path,
	    "why_not", rn.ready ? NULL : rn.probe_error != NULL ?
		rn.probe_error : "gbr-exec was not found",
	    "landlock", ll,
	    "process_groups", 1,
	    "pid_namespace", rn.probe_ok && rn.probe_ns,
	    "user_namespace", rn.probe_ok && rn.probe_userns,
	    "mount_namespace", rn.probe_ok && rn.probe_ns,
	    "process_limit", rn.probe_ok ? rn.probe_nproc : "unknown",
	    "socket_hidden", rn.probe_ok && rn.probe_ns && rn.hide.n > 0,
	    "root_capabilities_dropped", rn.probe_ok && rn.probe_caps &&
		getuid() == 0,
	    "rlimits", "cpu, as, fsize, nofile, core=0",
	    "daemon_not_dumpable", rn.dumpable_off,
	    "children",
		"running", (json_int_t)rn.nrunning,
		"queued", (json_int_t)rn.nqueued,
		"max", (json_int_t)rn.max_children,
		"max_per_session", (json_int_t)rn.max_per_key,
	    "grace_ms", rn.grace_ms);
	json_object_set_new(o, "env_scrubbed", json_true());
	json_object_set_new(o, "spawn", json_string(rn.ready &&
	    rn_fs_why_direct() == NULL ? "forkserver" : "direct"));
	json_object_set_new(o, "spawn_why_direct", rn_fs_why_direct() != NULL ?
	    json_string(rn_fs_why_direct()) : json_null());
	json_object_set_new(o, "fork_server", rn.fs == NULL ? json_null() :
	    json_pack("{s:I, s:b, s:I, s:I}", "pid", (json_int_t)rn.fs->pid,
	    "shared_memory", rn.fs->shared_vm,
	    "restarts", (json_int_t)(rn.fs_starts > 0 ? rn.fs_starts - 1 : 0),
	    "direct_fallbacks", (json_int_t)rn.fs_fallbacks));
	json_object_set_new(o, "reaping", json_string(rn.use_pidfd ?
	    "pidfd" : "sigchld"));
	json_object_set_new(o, "seccomp", sc);
	json_object_set_new(o, "invariants", inv);
	json_object_set_new(o, "commands", json_string(!rn.ready ?
	    "unavailable" : rn.refusal != NULL ? "refused" : "allowed"));
	json_object_set_new(o, "refusal", rn.refusal != NULL ?
	    json_string(rn.refusal) : json_null());
	json_object_set_new(o, "own_proc", json_boolean(rn.probe_ok &&
	    rn.probe_proc));
	json_object_set_new(o, "namespaces", json_pack("{s:b, s:s, s:s?}",
	    "active", ns, "mode", rn_mode_name(rn.namespaces),
	    "why_not", ns ? NULL : rn.namespaces == RUNNER_OFF &&
	    rn.ns_why == NULL ? "namespaces = off in gbrd.conf" : rn.ns_why));
	return o;
}
