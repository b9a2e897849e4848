/*
 * The Windows runner on this system: runner_init and runner_reconfigure,
 * the probe that a Job object with limits can be made (without one no
 * command runs: it could outlive its run and gbrd), what is confined and
 * what is not, the variables Windows programs need, and what
 * daemon.status says about all of it.
 *
 * What holds for each command here: its own Job object (nothing it
 * starts leaves it; all of it is killed when the command ends, times out,
 * floods its output or is cancelled, and when gbrd ends however it ends:
 * KILL_ON_JOB_CLOSE), the Job object's limits, an environment built from
 * the run tools' allow-list, and the pipe's wall (a client inside a run's
 * Job object is refused: osdep-win.h). What does not: where a command
 * writes. gbr has no write confinement on Windows yet (a restricted
 * token, a low integrity level or an AppContainer, which Wine could not
 * test either), so runner_unconfined says so, daemon.status says so, and
 * the policy asks a human before each command in full autonomy, unless
 * gbrd.conf accepts the risk ([exec] accept_risks = writes).
 *
 * Wine. Wine 8 keeps the Job object's membership, its kill and its
 * KILL_ON_JOB_CLOSE, but ignores the limits on active processes, memory
 * and CPU time (measured: SetInformationJobObject takes them and nothing
 * enforces them); daemon.status says so when it finds itself under Wine.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "osdep-win.h"
#include "runner-win.h"
#include "xmalloc.h"

#define RW_UNCONFINED "commands are not confined to the workspace on this " \
	"platform: a command can write anywhere your account can (your " \
	"files, gbrd's state and config), and read your secrets; in full " \
	"autonomy each command asks a human first. To run them without " \
	"asking, accept the risk in gbrd.conf: [exec] accept_risks = writes"

/* The version of Wine under us, or NULL on Windows itself. */
static const char *
rw_wine(void)
{
	typedef const char *(*wine_version_fn)(void);
	static int		 done;
	static const char	*v;
	HMODULE			 nt;
	FARPROC			 f;

	if (done)
		return v;
	done = 1;
	if ((nt = GetModuleHandleW(L"ntdll.dll")) != NULL &&
	    (f = GetProcAddress(nt, "wine_get_version")) != NULL)
		v = ((wine_version_fn)(void (*)(void))f)();
	return v;
}

/* Takes the daemon-wide caps. */
static void
rw_apply(const struct runner_config *cfg)
{
	rw.max_children = cfg->max_children > 0 ? cfg->max_children : 16;
	rw.max_per_key = cfg->max_per_key > 0 ? cfg->max_per_key :
	    rw.max_children;
	rw.max_queued = cfg->max_queued;
	rw.grace_ms = cfg->grace_ms > 0 ? cfg->grace_ms : 2000;
	rw.accept_risks = cfg->accept_risks;
	free(rw.unconfined);
	rw.unconfined = (rw.accept_risks & RUNNER_RISK_WRITES) ? NULL :
	    xstrdup(RW_UNCONFINED);
}

/* Sets the runner up (see runner.h). */
int
runner_init(struct event_base *base, const struct runner_config *cfg,
    char **cause)
{
	*cause = NULL;
	if (rw.base != NULL) {
		*cause = xstrdup("the runner is already set up");
		return -1;
	}
	if (rw_init_loop(base) != 0) {
		*cause = xstrdup("cannot create an event");
		return -1;
	}
	rw_apply(cfg);
	/*
	 * Children inherit the error mode: a missing DLL or a crash must
	 * fail the command, not wait for a person to close a dialog.
	 */
	SetErrorMode(GetErrorMode() | SEM_FAILCRITICALERRORS |
	    SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
	if ((rw.refusal = rw_probe_job()) != NULL)
		log_warn("runner: %s", rw.refusal);
	rw.ready = 1;
	if (rw.unconfined != NULL)
		log_info("runner: %s", rw.unconfined);
	if (rw_wine() != NULL)
		log_info("runner: under Wine %s: the Job objects' limits on "
		    "processes, memory and CPU time are not enforced there",
		    rw_wine());
	return 0;
}

/*
 * Nothing of an earlier gbrd can be left: its Job objects died with it
 * (KILL_ON_JOB_CLOSE).
 */
unsigned
runner_sweep(const char *instance)
{
	return 0;
}

/* Applies new caps to jobs started from now on. */
void
runner_reconfigure(const struct runner_config *cfg)
{
	rw_apply(cfg);
	rw_pump();
}

/* Why commands cannot run here, or NULL. */
const char *
runner_refusal(void)
{
	return rw.refusal;
}

/* Windows has no namespaces. */
int
runner_namespaces(void)
{
	return 0;
}

/* Why writes are not confined here (see runner.h). */
const char *
runner_unconfined(void)
{
	return rw.base != NULL ? rw.unconfined : RW_UNCONFINED;
}

/*
 * What a Windows program needs to find the system, its own files and the
 * person's folders; none of them is a secret. (TEMP and TMP are the
 * session's, set by runner-win-spawn.c.)
 */
const char *const *
runner_env_needed(size_t *n)
{
	static const char *const v[] = {
		"SystemRoot", "SystemDrive", "windir", "ComSpec", "PATHEXT",
		"OS", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE",
		"PROCESSOR_IDENTIFIER", "PROCESSOR_LEVEL", "PROCESSOR_REVISION",
		"ProgramData", "ALLUSERSPROFILE", "PUBLIC", "ProgramFiles",
		"ProgramFiles(x86)", "ProgramW6432", "CommonProgramFiles",
		"CommonProgramFiles(x86)", "CommonProgramW6432", "USERPROFILE",
		"HOMEDRIVE", "HOMEPATH", "APPDATA", "LOCALAPPDATA", "USERNAME",
		"USERDOMAIN", "COMPUTERNAME", "PSModulePath", NULL
	};

	*n = sizeof v / sizeof v[0] - 1;
	return v;
}

/* No Landlock on Windows. */
int
runner_landlock_abi(void)
{
	return 0;
}

/* No gbr-exec on Windows: CreateProcessW and a Job object instead. */
const char *
runner_exec_path(void)
{
	return NULL;
}

/* No fork server on Windows. */
long
runner_fork_server_pid(void)
{
	return -1;
}

/* What holds here, for daemon.status. */
json_t *
runner_status_json(void)
{
	json_t		*o, *job, *inv, *lim;
	const char	*wine = rw_wine();
	int		 ok = rw.ready && rw.refusal == NULL;

	lim = json_pack("{s:s, s:s, s:s, s:s}",
	    "active_processes", "[exec] max_processes, when set",
	    "memory", "[exec] max_memory_bytes, committed memory per process",
	    "cpu_time", "user time per process: the timeout, rounded up, "
		"plus one second",
	    "not_limited", "file size and open files (a Job object has no "
		"such limit)");
	job = json_pack("{s:b, s:b, s:b, s:b, s:s, s:o, s:s}",
	    "active", ok,
	    "kill_on_close", ok,
	    "killed_with_the_command", ok,
	    "breakaway", 0,
	    "ui_restrictions", "clipboard, other processes' windows, global "
		"atoms, desktops, display and system settings, logoff",
	    "limits", lim,
	    "limits_enforced", wine == NULL ? "by Windows" : "no: Wine "
		"ignores them (measured); the timeout and the kill of the "
		"whole Job object hold");
	inv = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}",
	    "no_control_channel", "peer check: a pipe client in a run's Job "
		"object is refused",
	    "writes_confined", rw.unconfined == NULL ? "accepted risk" :
		"no: full autonomy asks a human before each command",
	    "nothing_outlives_a_run", ok ? "job object" : "refused",
	    "protected_paths", "checked after each command (not locked "
		"while it runs)",
	    "private_temp", "the session's TEMP and TMP (not enforced: "
		"other folders are writable too)",
	    "secrets_out_of_reach", "no: a command reads what your account "
		"can");
	o = json_pack("{s:b, s:s, s:s?, s:s?, s:s, s:o, s:s, s:o, s:b, s:b, "
	    "s:b, s:b, s:b, s:{s:I, s:I, s:I, s:I}, s:I, s:I}",
	    "available", rw.ready,
	    "commands", !rw.ready ? "unavailable" : rw.refusal != NULL ?
		"refused" : "allowed",
	    "refusal", rw.refusal,
	    "why_not", rw.ready ? NULL : "the runner is not set up",
	    "containment", "a Job object per command (CreateProcessW, "
		"suspended until it is in it)",
	    "job_object", job,
	    "writes", rw.unconfined != NULL ? rw.unconfined : "not confined "
		"to the workspace on this platform, and gbrd.conf accepts "
		"the risk (accept_risks = writes)",
	    "invariants", inv,
	    "env_scrubbed", 1,
	    "process_groups", 0,
	    "pid_namespace", 0,
	    "mount_namespace", 0,
	    "daemon_not_dumpable", 0,
	    "children",
		"running", (json_int_t)rw.nrunning,
		"queued", (json_int_t)rw.nqueued,
		"max", (json_int_t)rw.max_children,
		"max_per_session", (json_int_t)rw.max_per_key,
	    "started", (json_int_t)rw.started,
	    "killed", (json_int_t)rw.killed);
	json_object_set_new(o, "write_confinement", json_pack("{s:b, s:s, "
	    "s:s}", "active", 0,
	    "why_not", "gbr has no restricted token, integrity level or "
		"AppContainer for commands yet",
	    "full_autonomy", rw.unconfined != NULL ? "asks a human before "
		"each command" : "runs commands (accept_risks = writes)"));
	json_object_set_new(o, "control_channel", json_pack("{s:s, s:I}",
	    "wall", "the pipe's listener refuses a client in a run's Job "
		"object (IsProcessInJob)",
	    "job_objects", (json_int_t)osdep_jobs_count()));
	json_object_set_new(o, "landlock", json_pack("{s:b, s:i, s:s}",
	    "active", 0, "abi", 0, "why_not", "Windows has no Landlock"));
	json_object_set_new(o, "seccomp", json_pack("{s:b, s:s}", "active", 0,
	    "why_not", "Windows has no seccomp"));
	json_object_set_new(o, "namespaces", json_pack("{s:b, s:s}", "active",
	    0, "why_not", "Windows has no namespaces"));
	json_object_set_new(o, "spawn", json_string("CreateProcessW"));
	json_object_set_new(o, "reaping", json_string("a watcher thread per "
	    "command"));
	json_object_set_new(o, "wine", wine != NULL ? json_string(wine) :
	    json_null());
	return o;
}
