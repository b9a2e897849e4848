/*
 * runner.h where gbr has no way yet to confine a command (a Windows build:
 * no gbr-exec, no Landlock, no namespaces; Job objects and a restricted
 * token come with the Windows sandbox). gbr never runs a command it
 * cannot confine, so here every run is refused with `unavailable` and a
 * reason that says so, and daemon.status reports commands as unavailable
 * with that reason; the file tools, which the sandbox confines through
 * the kernel's handles, work as everywhere.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "errors.h"
#include "runner.h"
#include "xmalloc.h"

#define RUNNER_NONE_WHY	"commands are not run on this platform yet: gbr " \
	"cannot confine them to the workspace here, and it never runs one " \
	"unconfined (the file tools work)"

/* Nothing to set up; the refusal stands for every run. */
int
runner_init(struct event_base *base, const struct runner_config *cfg,
    char **cause)
{
	return 0;
}

/* No child of an earlier daemon can be left: none was ever started. */
unsigned
runner_sweep(const char *instance)
{
	return 0;
}

void
runner_reconfigure(const struct runner_config *cfg)
{
}

void
runner_shutdown(void)
{
}

/* Refuses every run; no callback ever runs (libuv's rule). */
int
runner_start(const struct runner_opts *o, runner_output_cb out,
    runner_done_cb done, void *arg, struct runner_job **job,
    enum gbr_err *kind, char **reason)
{
	if (job != NULL)
		*job = NULL;
	*kind = GBR_ERR_UNAVAILABLE;
	*reason = xstrdup(RUNNER_NONE_WHY);
	return -1;
}

/* No job exists to cancel. */
void
runner_cancel(struct runner_job *job)
{
}

long
runner_job_pid(const struct runner_job *job)
{
	return -1;
}

const char *
runner_refusal(void)
{
	return RUNNER_NONE_WHY;
}

int
runner_namespaces(void)
{
	return 0;
}

unsigned
runner_running(void)
{
	return 0;
}

unsigned
runner_queued(void)
{
	return 0;
}

int
runner_landlock_abi(void)
{
	return 0;
}

/* What daemon.status says of commands here: none run, and why. */
json_t *
runner_status_json(void)
{
	return json_pack("{s:b, s:s, s:s, s:s, s:b, s:b, s:b, s:b}",
	    "available", 0,
	    "why_not", RUNNER_NONE_WHY,
	    "commands", "unavailable",
	    "refusal", RUNNER_NONE_WHY,
	    "process_groups", 0,
	    "pid_namespace", 0,
	    "mount_namespace", 0,
	    "env_scrubbed", 1);
}

const char *
runner_exec_path(void)
{
	return NULL;
}

long
runner_fork_server_pid(void)
{
	return -1;
}

/* A signal's name; no child ever ends by one here. */
const char *
runner_signal_name(int sig)
{
	static char	buf[16];

	snprintf(buf, sizeof buf, "SIG%d", sig);
	return buf;
}

void
runner_force_sigchld(int on)
{
}
