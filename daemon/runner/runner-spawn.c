/*
 * What gbr-exec is given for a job, and the direct way to start it. The
 * argument vector (the limits, the Landlock paths, the namespace and
 * seccomp modes, the hidden files and read-only binds, then the target's
 * argv: see gbr-exec.c for each option), the environment (the caller's
 * scrubbed one, plus the sweep's GBR_RUNNER mark), and the posix_spawn of
 * gbr-exec with the job's pipes on 0, 1, 2 and RN_STATUS_FD, the seccomp
 * program on RN_FILTER_FD, its own session and default signals. rn_spawn
 * tries the fork server (runner-forksrv.c) first and comes here when the
 * server cannot take the job.
 *
 * It does not own the job once it runs (runner.c) or its pipes after
 * the spawn (runner-io.c).
 */
#include "gbr-config.h"

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "runfilter.h"
#include "runner-int.h"
#include "xmalloc.h"

/* Appends a copy of s. */
void
rn_strv_add(struct rn_strv *sv, const char *s)
{
	if (sv->n + 2 > sv->cap) {
		sv->cap = sv->cap == 0 ? 32 : sv->cap * 2;
		sv->v = xreallocarray(sv->v, sv->cap, sizeof *sv->v);
	}
	sv->v[sv->n++] = xstrdup(s);
	sv->v[sv->n] = NULL;
}

/* Appends an option and its number. */
void
rn_strv_num(struct rn_strv *sv, const char *opt, unsigned long long v)
{
	char	buf[32];

	snprintf(buf, sizeof buf, "%llu", v);
	rn_strv_add(sv, opt);
	rn_strv_add(sv, buf);
}

/* Frees the strings and the vector. */
void
rn_strv_free(struct rn_strv *sv)
{
	size_t	i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	memset(sv, 0, sizeof *sv);
}

/* The name of a mode as gbr-exec takes it. */
const char *
rn_mode_name(enum runner_mode m)
{
	return m == RUNNER_REQUIRE ? "require" : m == RUNNER_AUTO ? "auto" : "off";
}

/* Checks a list of paths for gbr-exec. */
int
rn_paths_ok(const char *const *v, size_t n)
{
	size_t	i;

	if (n > RN_PATHS_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (v[i] == NULL || v[i][0] != '/')
			return 0;
	return 1;
}

/* Builds gbr-exec's argument vector for a job. */
void
rn_build_argv(struct runner_job *j, const struct runner_opts *o,
    enum runner_mode ll)
{
	const struct runner_limits	*l = &o->limits;
	uint64_t			 cpu;
	size_t				 i;

	rn_strv_add(&j->argv, rn.exec_path);
	rn_strv_num(&j->argv, "-s", RN_STATUS_FD);
	rn_strv_num(&j->argv, "-p", (unsigned long long)getpid());
	rn_strv_add(&j->argv, "-C");
	rn_strv_add(&j->argv, o->cwd);
	cpu = l->cpu_seconds != 0 ? l->cpu_seconds :
	    (uint64_t)(l->timeout_ms + 999) / 1000 + 1;
	rn_strv_num(&j->argv, "-c", cpu);
	if (l->address_space != 0)
		rn_strv_num(&j->argv, "-a", l->address_space);
	if (l->file_size != 0)
		rn_strv_num(&j->argv, "-f", l->file_size);
	if (l->open_files != 0)
		rn_strv_num(&j->argv, "-o", l->open_files);
	if (l->processes != 0)
		rn_strv_num(&j->argv, "-n", l->processes);
	rn_strv_add(&j->argv, "-l");
	rn_strv_add(&j->argv, rn_mode_name(ll));
	for (i = 0; i < o->nro; i++) {
		rn_strv_add(&j->argv, "-r");
		rn_strv_add(&j->argv, o->ro_paths[i]);
	}
	for (i = 0; i < o->nrw; i++) {
		rn_strv_add(&j->argv, "-w");
		rn_strv_add(&j->argv, o->rw_paths[i]);
	}
	rn_strv_add(&j->argv, "-N");
	rn_strv_add(&j->argv, rn_mode_name(rn.namespaces));
	j->ns = rn.namespaces != RUNNER_OFF;
	rn_strv_add(&j->argv, "-K");
	rn_strv_add(&j->argv, rn_mode_name(rn.seccomp));
	/* Direct runs read it there; the fork server has its own (-F). */
	if (runfilter_fd(j->ns) != -1)
		rn_strv_num(&j->argv, "-F", RN_FILTER_FD);
	if (o->tmpdir != NULL) {
		rn_strv_add(&j->argv, "-t");
		rn_strv_add(&j->argv, o->tmpdir);
	}
	for (i = 0; i < rn.hide.n; i++) {
		rn_strv_add(&j->argv, "-x");
		rn_strv_add(&j->argv, rn.hide.v[i]);
	}
	for (i = 0; i < rn.secrets.n; i++) {
		rn_strv_add(&j->argv, "-X");
		rn_strv_add(&j->argv, rn.secrets.v[i]);
	}
	for (i = 0; i < o->nro_binds; i++) {
		rn_strv_add(&j->argv, "-R");
		rn_strv_add(&j->argv, o->ro_binds[i]);
	}
	rn_strv_add(&j->argv, "--");
	for (i = 0; o->argv[i] != NULL; i++)
		rn_strv_add(&j->argv, o->argv[i]);
}

/*
 * Builds a job's environment: the caller's, without any GBR_RUNNER entry
 * of its own, then the sweep's mark; PATH alone if that leaves nothing.
 */
void
rn_build_envp(struct runner_job *j, const struct runner_opts *o)
{
	size_t	i;

	for (i = 0; o->envp != NULL && o->envp[i] != NULL; i++)
		if (strncmp(o->envp[i], "GBR_RUNNER=", 11) != 0)
			rn_strv_add(&j->envp, o->envp[i]);
	if (rn.instance != NULL)
		rn_strv_add(&j->envp, rn.instance);
	if (j->envp.v == NULL)
		rn_strv_add(&j->envp, "PATH=/usr/bin:/bin");
}

/*
 * Spawns a job's gbr-exec. Returns 0, or -1 with the job's kind and reason
 * set (nothing is left open).
 */
int
rn_spawn_direct(struct runner_job *j)
{
	posix_spawn_file_actions_t	 fa;
	posix_spawnattr_t		 at;
	sigset_t			 none, all;
	int				 po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	int				 ps[2] = { -1, -1 }, pi[2] = { -1, -1 };
	int				 r;
	short				 flags;

	if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
	    pipe2(ps, O_CLOEXEC) != 0 ||
	    (j->input != NULL && pipe2(pi, O_CLOEXEC) != 0)) {
		r = errno;
		goto fail;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* Sources are all above 2, and fd 3 is written last. */
	if (j->input != NULL)
		posix_spawn_file_actions_adddup2(&fa, pi[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawn_file_actions_adddup2(&fa, ps[1], RN_STATUS_FD);
	if (runfilter_fd(j->ns) != -1)
		posix_spawn_file_actions_adddup2(&fa, runfilter_fd(j->ns),
		    RN_FILTER_FD);
	j->supervised = !j->ns;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	/* SIGPIPE is ignored here; the child must get the default back. */
	posix_spawnattr_setsigdefault(&at, &all);
	flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_SETSID
	flags |= POSIX_SPAWN_SETSID;
#else
	flags |= POSIX_SPAWN_SETPGROUP;
	posix_spawnattr_setpgroup(&at, 0);
#endif
	posix_spawnattr_setflags(&at, flags);
	r = posix_spawn(&j->pid, rn.exec_path, &fa, &at, j->argv.v, j->envp.v);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (r != 0)
		goto fail;
	close(po[1]);
	close(pe[1]);
	close(ps[1]);
	if (j->input != NULL)
		close(pi[0]);
	rn_running(j, po[0], pe[0], ps[0], j->input != NULL ? pi[1] : -1);
	if ((j->pidfd = rn_pidfd_open(j->pid)) != -1) {
		j->ev_pid = event_new(rn.base, j->pidfd, EV_READ, rn_on_pidfd, j);
		if (j->ev_pid == NULL)
			fatalx("runner: cannot create events");
		event_add(j->ev_pid, NULL);
	} else {
		if (rn_watch_sigchld() != 0)
			fatalx("runner: cannot watch SIGCHLD");
		/* It may have ended before the watch began: look, later. */
		event_active(rn.ev_sigchld, EV_SIGNAL, 1);
	}
	return 0;

fail:
	rn_close(&po[0]);
	rn_close(&po[1]);
	rn_close(&pe[0]);
	rn_close(&pe[1]);
	rn_close(&ps[0]);
	rn_close(&ps[1]);
	rn_close(&pi[0]);
	rn_close(&pi[1]);
	j->kind = r == EMFILE || r == ENFILE || r == EAGAIN || r == ENOMEM ?
	    GBR_ERR_BUSY : GBR_ERR_INTERNAL;
	j->reason = xasprintf("cannot start %s for '%s': %s", rn.exec_path,
	    j->argv0, strerror(r));
	return -1;
}

/* Starts a job: through the fork server where it can, else directly. */
int
rn_spawn(struct runner_job *j)
{
	if (rn_fs_spawn(j) == 0)
		return 0;
	return rn_spawn_direct(j);
}
