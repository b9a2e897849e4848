/*
 * The run tools (see tool-run.h): their table and schemas, the argument
 * checks, tool_run_call (the policy, the limits and rights of the child,
 * then the runner), the registry's entry, and the module's set-up and
 * shutdown. The module also owns the private temp folder every child's
 * temp space is under, made at start and removed at shutdown. The other
 * parts are in the files tool-run-int.h lists.
 *
 * Bounds: code and each argument at most 120 KiB (the kernel's limit on
 * one argument string is 128 KiB), at most TOOL_RUN_ARGV_MAX arguments and
 * TOOL_RUN_ARGV_BYTES in all, stdin at most TOOL_RUN_STDIN_MAX; output as
 * the profile and gbrd.conf say; check returns at most TOOL_RUN_DIAG_MAX
 * diagnostics of at most 400 bytes each.
 */
#include "gbr-config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "env.h"
#include "log.h"
#include "policy.h"
#include "paths.h"
#include "runner.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-run-int.h"
#include "xmalloc.h"

/* Calls in flight: freed by tool_run_shutdown if their child never ends. */
struct tool_run_list	tr_live = TAILQ_HEAD_INITIALIZER(tr_live);

struct tr_state		tr;

static const char tr_script_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"sh\","
    "\"cmd\",\"powershell\"],\"description\":\"python (python3), node, sh, "
    "or on Windows cmd or powershell\"},"
    "\"code\":{\"type\":\"string\",\"description\":\"The program text "
    "(at most 120 KiB)\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400000,"
    "\"description\":\"Stop it after this long (at most the environment's "
    "limit)\"},"
    "\"stdin\":{\"type\":\"string\",\"description\":\"Text given on "
    "standard input (default: none)\"},"
    "\"write_protected\":{\"type\":\"boolean\",\"description\":\"It must "
    "write the workspace's protected files or .git (read-only for commands "
    "otherwise): a human is asked first\"}},"
    "\"required\":[\"language\",\"code\"],\"additionalProperties\":false}";

static const char tr_command_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
    "\"minItems\":1,\"description\":\"The program and its arguments, one "
    "per item; no shell is involved\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400000,"
    "\"description\":\"Stop it after this long (at most the environment's "
    "limit)\"},"
    "\"write_protected\":{\"type\":\"boolean\",\"description\":\"It must "
    "write the workspace's protected files or .git (read-only for commands "
    "otherwise): a human is asked first\"}},"
    "\"required\":[\"argv\"],\"additionalProperties\":false}";

static const char tr_check_schema[] =
    "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";

static const struct tool_def tr_defs[] = {
	{ "run_script", "Run a short Python, Node.js or shell script (on "
	    "Windows also cmd or PowerShell) in the workspace, with a time "
	    "limit; returns its exit code and output.",
	    tr_script_schema, 0, 1, 0, NULL, 0 },
	{ "run_command", "Run a program with arguments (an argument vector, "
	    "no shell) in the workspace, with a time limit; returns its exit "
	    "code and output.", tr_command_schema, 0, 1, 0, NULL, 0 },
	{ "check", "Run the environment's check command (a build or type "
	    "check) and return its diagnostics.", tr_check_schema, 0, 0, 1,
	    NULL, 0 },
};

/* Fills a refusal. Returns -1. */
static int __attribute__((format(__printf__, 4, 5)))
tr_fail(enum gbr_err *kind, char **reason, enum gbr_err k, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	*kind = k;
	*reason = xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

/* Splits a comma-separated config list into a vector (NULL for none). */
static char **
tr_list(const char *s)
{
	char	**v = NULL, *copy, *item, *next;
	size_t	  n = 0;

	if (s == NULL || *s == '\0')
		return NULL;
	copy = xstrdup(s);
	for (item = copy; item != NULL; item = next) {
		if ((next = strchr(item, ',')) != NULL)
			*next++ = '\0';
		if (*item == '\0')
			continue;
		v = xreallocarray(v, n + 2, sizeof *v);
		v[n++] = xstrdup(item);
		v[n] = NULL;
	}
	free(copy);
	return v;
}

/* A string argument and its length. */
static const char *
tr_str(json_t *args, const char *key, size_t *len)
{
	json_t	*v = json_object_get(args, key);

	if (!json_is_string(v)) {
		*len = 0;
		return NULL;
	}
	*len = json_string_length(v);
	return json_string_value(v);
}

/* Checks run_command's argv: strings, no NUL, within the bounds. */
static int
tr_argv(json_t *a, char ***out, enum gbr_err *kind, char **reason)
{
	json_t	*v;
	size_t	 i, n = json_array_size(a), total = 0, len;
	char	**argv;

	if (n == 0)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: 'argv' must hold at least the program");
	if (n > TOOL_RUN_ARGV_MAX)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: more than %d arguments", TOOL_RUN_ARGV_MAX);
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_command: argv[%zu] must be a string", i);
		len = json_string_length(v);
		if (memchr(json_string_value(v), '\0', len) != NULL)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_command: argv[%zu] holds a NUL character", i);
		if (len > TOOL_RUN_ARG_MAX)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_command: argv[%zu] is longer than %d bytes", i,
			    TOOL_RUN_ARG_MAX);
		total += len + 1;
	}
	if (total > TOOL_RUN_ARGV_BYTES)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: the arguments take more than %d bytes",
		    TOOL_RUN_ARGV_BYTES);
	if (json_string_length(json_array_get(a, 0)) == 0)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: argv[0] is empty");
	argv = xcalloc(n + 1, sizeof *argv);
	json_array_foreach(a, i, v)
		argv[i] = xstrdup(json_string_value(v));
	*out = argv;
	return 0;
}

/* Calls a run tool (see tool-run.h). */
int
tool_run_call(const struct tool_run_ctx *ctx, const char *tool, json_t *args,
    tool_output_cb out_cb, tool_done_cb done_cb, void *arg,
    struct tool_run **runp, enum gbr_err *kind, char **reason, json_t **data)
{
	struct runner_opts	 o;
	struct tool_run		*r = NULL;
	const struct tool_def	*def = NULL;
	const char		*s, *code, *input = NULL, *why, *lang;
	const char		*rw[4], *ro[TR_RO_MAX];
	char			*tmp_sub[2] = { NULL, NULL };
	struct tr_locks		 locks;
	char			**argv = NULL, **envp = NULL, *stmp = NULL;
	char			*cache = NULL;
	size_t			 len, input_len = 0, i, nro = 0;
	json_int_t		 t;
	enum tr_tool		 which;
	int			 rc = -1, timeout;
	char			*why_s;

	if (runp != NULL)
		*runp = NULL;
	*reason = NULL;
	if (data != NULL)
		*data = NULL;
	memset(&locks, 0, sizeof locks);
	for (i = 0; tool != NULL && i < sizeof tr_defs / sizeof tr_defs[0]; i++)
		if (strcmp(tr_defs[i].name, tool) == 0)
			def = &tr_defs[i];
	if (def == NULL)
		return tr_fail(kind, reason, GBR_ERR_METHOD_NOT_FOUND,
		    "no run tool called '%s'", tool != NULL ? tool : "");
	which = (enum tr_tool)(def - tr_defs);
	if (!tr.ready)
		return tr_fail(kind, reason, GBR_ERR_UNAVAILABLE,
		    "the runner is not set up");
	/* Where no command may run at all, that is the answer, before any
	 * folder or cache is made for one. */
	if ((why = runner_refusal()) != NULL)
		return tr_fail(kind, reason, GBR_ERR_UNAVAILABLE, "%s: %s", tool,
		    why);
	if (tool_check_args(tr.schemas[which], args, &why_s) != 0) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xasprintf("%s: %s", tool, why_s);
		free(why_s);
		return -1;
	}
	if (ctx == NULL || ctx->sandbox == NULL || ctx->env == NULL)
		return tr_fail(kind, reason, GBR_ERR_INTERNAL,
		    "%s: no sandbox or environment", tool);

	switch (which) {
	case TR_SCRIPT:
		lang = json_string_value(json_object_get(args, "language"));
		code = tr_str(args, "code", &len);
		if (memchr(code, '\0', len) != NULL)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_script: 'code' holds a NUL character");
		if (len > TOOL_RUN_CODE_MAX)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_script: 'code' is longer than %d bytes: write "
			    "it to a file and run that with run_command",
			    TOOL_RUN_CODE_MAX);
		argv = tool_run_script_argv(lang, code);
		if ((input = tr_str(args, "stdin", &input_len)) != NULL &&
		    input_len > TOOL_RUN_STDIN_MAX) {
			tool_run_strv_free(argv);
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_script: 'stdin' is longer than %d bytes",
			    TOOL_RUN_STDIN_MAX);
		}
		break;
	case TR_COMMAND:
		if (tr_argv(json_object_get(args, "argv"), &argv, kind,
		    reason) != 0)
			return -1;
		break;
	case TR_CHECK:
		if ((s = env_check_command(ctx->env)) == NULL)
			return tr_fail(kind, reason, GBR_ERR_NOT_FOUND,
			    "this environment has no check_command");
		if ((argv = tool_run_split(s, &why)) == NULL)
			return tr_fail(kind, reason, GBR_ERR_INVALID_ENV,
			    "check_command '%s': %s", s, why);
		break;
	}

	/* The policy, before anything runs. */
	if (policy_command(ctx->env, def, (const char *const *)argv,
	    ctx->approved, kind, reason, data) != POLICY_ALLOW)
		goto out;

	/* Limits: the call's, within the profile's, within gbrd.conf's. */
	timeout = env_timeout_ms(ctx->env);
	if (json_is_integer(json_object_get(args, "timeout_ms"))) {
		t = json_integer_value(json_object_get(args, "timeout_ms"));
		if (t < timeout)
			timeout = (int)t;
	}
	if ((unsigned)timeout > tr.max_timeout_ms)
		timeout = (int)tr.max_timeout_ms;

	/* Rights: write the allowed root and the temp folder; read the rest. */
	memset(&o, 0, sizeof o);
	rw[0] = sandbox_root_path(ctx->sandbox, 0);
	if ((why_s = tr_refuse_root(rw[0])) != NULL) {
		tr_fail(kind, reason, GBR_ERR_PERMISSION_DENIED, "%s", why_s);
		free(why_s);
		goto out;
	}
	if ((stmp = tr_session_tmp(ctx->session)) == NULL) {
		tr_fail(kind, reason, GBR_ERR_INTERNAL, "%s: the session's temp "
		    "folder cannot be made (see gbrd's log)", tool);
		goto out;
	}
	rw[1] = tmp_sub[0] = xasprintf("%s/tmp", stmp);
	rw[2] = tmp_sub[1] = xasprintf("%s/shm", stmp);
	if ((cache = tr_cache_ready(env_workspace(ctx->env), &why_s)) == NULL) {
		tr_fail(kind, reason, GBR_ERR_UNAVAILABLE, "%s: the agent's "
		    "package cache cannot be made: %s", tool, why_s);
		free(why_s);
		goto out;
	}
	rw[3] = cache;
	nro = tr_ro_paths(ctx, ro, nro);
	/* Never writable by a child: what decides the sandbox (tr_lockset). */
	tr_lockset(ctx, rw[0], &locks);
	if (locks.full || nro >= TR_RO_MAX) {
		tr_fail(kind, reason, GBR_ERR_INVALID_ENV, "%s: this profile "
		    "needs more than %d read-only paths for a command (its "
		    "read-only roots, protected files and folders); none is "
		    "ever left out, so nothing ran: protect folders (DIR/**) "
		    "rather than many files", tool, TR_RO_MAX);
		goto out;
	}
	envp = tr_build_env(ctx, stmp, cache);
	o.argv = (const char *const *)argv;
	o.envp = (const char *const *)envp;
	o.cwd = rw[0];
	o.input = input;
	o.input_len = input_len;
	o.key = ctx->session;
	o.limits.timeout_ms = timeout;
	o.limits.max_output = env_max_output_bytes(ctx->env) < tr.max_output ?
	    env_max_output_bytes(ctx->env) : tr.max_output;
	o.limits.address_space = tr.memory;
	o.limits.file_size = tr.file_size;
	o.limits.processes = tr.processes;
	o.limits.open_files = tr.open_files;
	o.rw_paths = rw;
	o.nrw = 4;
	o.ro_paths = ro;
	o.nro = nro;
	o.ro_binds = (const char *const *)locks.v;
	o.nro_binds = locks.n;
	o.tmpdir = stmp;
	o.landlock = ctx->require_landlock ? RUNNER_REQUIRE : RUNNER_OFF;

	r = xcalloc(1, sizeof *r);
	r->tool = which;
	r->what = xstrdup(argv[0]);
	if (which == TR_CHECK) {
		r->command = json_array();
		for (i = 0; argv[i] != NULL; i++)
			json_array_append_new(r->command, json_string(argv[i]));
	}
	r->out_cb = out_cb;
	r->done_cb = done_cb;
	r->arg = arg;
	r->locked = locks.n > locks.nalways;
	TAILQ_INSERT_TAIL(&tr_live, r, entry);
	r->group = tr_group_enter(rw[0], env_workspace(ctx->env), &locks,
	    ctx->approved);
	if (runner_start(&o, tr_on_output, tr_on_done, r, &r->job, kind,
	    reason) != 0) {
		json_decref(tr_group_leave(r->group));
		tr_run_free(r);
		goto out;
	}
	if (runp != NULL)
		*runp = r;
	rc = 0;
out:
	tool_run_strv_free(argv);
	tool_run_strv_free(envp);
	tr_locks_free(&locks);
	free(stmp);
	free(cache);
	free(tmp_sub[0]);
	free(tmp_sub[1]);
	return rc;
}

/* Forgets a call. */
void
tr_run_free(struct tool_run *r)
{
	TAILQ_REMOVE(&tr_live, r, entry);
	free(r->what);
	json_decref(r->command);
	free(r);
}

/* Ends a call early. */
void
tool_run_cancel(struct tool_run *r)
{
	if (r != NULL)
		runner_cancel(r->job);
}

/* The registry's cancel (tool_job_cancel). */
static void
tr_job_cancel(struct tool_job *job)
{
	tool_run_cancel((struct tool_run *)(void *)((char *)job -
	    offsetof(struct tool_run, handle)));
}

/* The registry's asynchronous entry: a call with the rights ctx gives. */
static int
tr_async(struct tool_ctx *ctx, const char *name, json_t *args,
    tool_output_cb out, tool_done_cb done, void *arg, struct tool_job **job,
    enum gbr_err *kind, char **reason, json_t **data)
{
	struct tool_run_ctx	 rc;
	struct tool_run		*r;

	memset(&rc, 0, sizeof rc);
	rc.sandbox = ctx->sandbox;
	rc.env = ctx->env;
	rc.session = ctx->session;
	rc.approved = ctx->approved;
	if (tool_run_call(&rc, name, args, out, done, arg, &r, kind,
	    reason, data) != 0)
		return -1;
	r->handle.cancel = tr_job_cancel;
	if (job != NULL)
		*job = &r->handle;
	return 0;
}

/* Registers the run tools. */
int
tool_run_register(char **cause)
{
	return tool_register_async(tr_defs, sizeof tr_defs / sizeof tr_defs[0],
	    tr_async, cause);
}

/* The pid of the call's child. */
long
tool_run_job_pid(const struct tool_run *r)
{
	return r != NULL && r->job != NULL ? runner_job_pid(r->job) : -1;
}

/* The runner's config from gbrd.conf. */
static void
tr_runner_config(const struct config *cfg, struct runner_config *rc,
    const char *const *hide, size_t nhide, const char *instance)
{
	memset(rc, 0, sizeof *rc);
	rc->instance = instance;
	rc->exec_path = cfg->exec_helper;
	rc->max_children = cfg->exec_max_children;
	rc->max_per_key = cfg->exec_max_per_session;
	rc->max_queued = cfg->exec_max_queued;
	rc->grace_ms = (int)cfg->exec_grace_ms;
	rc->landlock = (enum runner_mode)cfg->exec_landlock;
	rc->namespaces = (enum runner_mode)cfg->exec_namespaces;
	rc->seccomp = (enum runner_mode)cfg->exec_seccomp;
	rc->accept_risks = cfg->exec_accept_risks;
	rc->spawn = cfg->exec_fork_server ? RUNNER_SPAWN_AUTO :
	    RUNNER_SPAWN_DIRECT;
	rc->hide = hide;
	rc->nhide = nhide;
	if (hide != NULL) {
		rc->secrets = (const char *const *)tr.secrets;
		rc->nsecrets = tr.nsecrets;
	}
}

/* Takes the per-call caps from gbrd.conf. */
static void
tr_caps(const struct config *cfg)
{
	char	*real;
	size_t	 i;

	tr.max_timeout_ms = cfg->exec_max_timeout_ms;
	tr.max_output = (size_t)cfg->exec_max_output_bytes;
	tr.processes = cfg->exec_max_processes;
	tr.memory = cfg->exec_max_memory_bytes;
	tr.file_size = cfg->exec_max_file_bytes;
	tr.open_files = cfg->exec_max_open_files;
	tool_run_strv_free(tr.pass_env);
	tool_run_strv_free(tr.read_paths);
	tr.pass_env = tr_list(cfg->exec_pass_env);
	tr.read_paths = tr_list(cfg->exec_read_paths);
	/*
	 * Real paths: gbr-exec tells by their strings whether Landlock alone
	 * keeps a secret store out (-X), so a symlink must not hide a home.
	 */
	for (i = 0; tr.read_paths != NULL && tr.read_paths[i] != NULL; i++)
		if ((real = realpath(tr.read_paths[i], NULL)) != NULL) {
			free(tr.read_paths[i]);
			tr.read_paths[i] = real;
		}
	tr.cache_max = cfg->exec_cache_max_bytes;
}

/*
 * Adds one of gbrd's own paths to what commands never see (tr.hide), and
 * a folder (dir 1) to what a writable root may not hold (tr.own).
 */
static void
tr_own_add(const char *path, int dir)
{
	size_t	i;

	for (i = 0; i < tr.nhide; i++)
		if (strcmp(tr.hide[i], path) == 0)
			return;
	if (tr.nhide >= TR_OWN_MAX)
		return;
	tr.hide[tr.nhide++] = xstrdup(path);
	if (dir && tr.nown < TR_OWN_MAX)
		tr.own[tr.nown++] = xstrdup(path);
}

/* Sets the tools and the runner up. */
int
tool_run_init(struct event_base *base, const struct config *cfg,
    const char *state_dir, const char *const *hide, size_t nhide,
    char **cause)
{
	struct runner_config	 rc;
	const char		*t;
	char			*tmpl, inst[32], *ucfg = NULL, *d;
	size_t			 i;

	*cause = NULL;
	for (i = 0; i < sizeof tr_defs / sizeof tr_defs[0]; i++)
		if ((tr.schemas[i] = json_loads(tr_defs[i].schema, 0,
		    NULL)) == NULL)
			fatalx("tool-run: schema of %s", tr_defs[i].name);
	tr_caps(cfg);
	tr.base = base;
	if (state_dir != NULL) {
		tmpl = xasprintf("%s/run-tmp", state_dir);
		if (tr_rmtree(tmpl) != 0 || mkdir(tmpl, 0700) != 0) {
			log_warn("tool-run: %s: %s; children get no temp folder",
			    tmpl, strerror(errno));
			free(tmpl);
		} else
			tr.tmp = tmpl;
		tr_hash(state_dir, inst, sizeof inst);
		tr_audit_recover(state_dir);
	} else {
		if ((t = getenv("TMPDIR")) == NULL || t[0] != '/')
			t = "/tmp";
		tmpl = xasprintf("%s/gbr-run-%lu-XXXXXX", t,
		    (unsigned long)getuid());
		if (mkdtemp(tmpl) == NULL) {
			log_warn("tool-run: %s: %s; children get no temp folder",
			    tmpl, strerror(errno));
			free(tmpl);
		} else
			tr.tmp = tmpl;
	}
	/*
	 * Hidden from every command (with a mount namespace), and never
	 * inside a root a command may write without one (tr_refuse_root):
	 * what the caller names (the socket, the config file), the socket's
	 * folder, the standard socket folders of any gbrd of this user
	 * ($XDG_RUNTIME_DIR/gbr, /tmp/gbr-UID), the state folder (the disk
	 * log) and the user's gbr config folder, where gbrd.env keeps the
	 * providers' API keys for systemd (gbrd(8), FILES).
	 */
	for (i = 0; i < nhide; i++) {
		if (hide[i] == NULL || hide[i][0] != '/')
			continue;
		tr_own_add(hide[i], 0);
		d = paths_dirname(hide[i]);
		tr_own_add(d, 1);
		free(d);
	}
	if ((t = getenv("XDG_CONFIG_HOME")) != NULL && t[0] == '/')
		ucfg = xasprintf("%s/gbr", t);
	else if ((t = getenv("HOME")) != NULL && t[0] == '/')
		ucfg = xasprintf("%s/.config/gbr", t);
	if (ucfg != NULL)
		tr_own_add(ucfg, 1);
	free(ucfg);
	if (state_dir != NULL)
		tr_own_add(state_dir, 1);
	if ((t = getenv("XDG_RUNTIME_DIR")) != NULL && t[0] == '/') {
		d = xasprintf("%s/gbr", t);
		tr_own_add(d, 1);
		free(d);
	}
	d = xasprintf("/tmp/gbr-%lu", (unsigned long)getuid());
	tr_own_add(d, 1);
	free(d);
	tr_home_hide();
	tr_home_setup(cfg);
	tr_cache_sweep();
	tr_runner_config(cfg, &rc, (const char *const *)tr.hide, tr.nhide,
	    state_dir != NULL ? inst : NULL);
	if (runner_init(base, &rc, cause) != 0)
		return -1;
	tr.ready = 1;
	return 0;
}

/* Applies a reloaded gbrd.conf. */
void
tool_run_reconfigure(const struct config *cfg)
{
	struct runner_config	rc;

	tr_caps(cfg);
	tr_home_setup(cfg);
	/* The hidden files stay those given at start. */
	tr_runner_config(cfg, &rc, NULL, 0, NULL);
	runner_reconfigure(&rc);
}

/* Kills every child and removes the temp folder. */
void
tool_run_shutdown(void)
{
	struct tool_run	*r;
	size_t		 i;

	runner_shutdown();
	/* No callback runs now: what the calls still held goes here. */
	while ((r = TAILQ_FIRST(&tr_live)) != NULL)
		tr_run_free(r);
	tr_groups_end();
	tr_cache_shutdown();
	free(tr.audit_dir);
	if (tr.tmp != NULL && tr_rmtree(tr.tmp) != 0)
		log_warn("tool-run: %s was not removed completely", tr.tmp);
	free(tr.tmp);
	tool_run_strv_free(tr.pass_env);
	tool_run_strv_free(tr.read_paths);
	tool_run_strv_free(tr.tc_reads);
	for (i = 0; i < sizeof tr.schemas / sizeof tr.schemas[0]; i++)
		json_decref(tr.schemas[i]);
	for (i = 0; i < tr.nown; i++)
		free(tr.own[i]);
	for (i = 0; i < tr.nhide; i++)
		free(tr.hide[i]);
	for (i = 0; i < tr.nsecrets; i++)
		free(tr.secrets[i]);
	memset(&tr, 0, sizeof tr);
}

/* The runner's layers for daemon.status. */
json_t *
tool_run_status(void)
{
	json_t	*o = runner_status_json();

	json_object_set_new(o, "temp_dir", tr.tmp != NULL ?
	    json_string(tr.tmp) : json_null());
	json_object_set_new(o, "temp", json_string(runner_namespaces() ?
	    "per session: /tmp and /dev/shm are the session's own" :
	    "per session: TMPDIR is the session's own; no /dev/shm"));
	json_object_set_new(o, "toolchain_reads", tr_home_json());
	json_object_set_new(o, "protected_checks", json_pack("{s:I, s:I, s:I}",
	    "workspaces_running", (json_int_t)tr_groups_count(),
	    "checks", (json_int_t)tr.audits,
	    "paths_put_back", (json_int_t)tr.restored));
	json_object_set_new(o, "limits", json_pack("{s:I, s:I, s:I, s:I, "
	    "s:I, s:I}",
	    "max_timeout_ms", (json_int_t)tr.max_timeout_ms,
	    "max_output_bytes", (json_int_t)tr.max_output,
	    "max_processes", (json_int_t)tr.processes,
	    "max_memory_bytes", (json_int_t)tr.memory,
	    "max_file_bytes", (json_int_t)tr.file_size,
	    "max_open_files", (json_int_t)tr.open_files));
	return o;
}
