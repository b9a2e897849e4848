/*
 * runner-driver: calls the run tools (tool-run.h) on its own event loop,
 * the way gbrd's tool.call will, and prints what a client would see, so
 * tests/system/test_runner.py can test the runner before tool.call is
 * wired (and be pointed at tool.call afterwards with the same checks).
 *
 * usage: runner-driver -w WORKSPACE [-e ENV] [-c GBRD_CONF] [-k SESSION]
 *            [-n CALLS] [-x HIDE]... [-I STATE] [-a] [-C CANCEL_MS] [-S] [-s] [-q]
 *            TOOL [ARGS_JSON | @FILE]
 *
 * Output, one JSON object per line on stdout:
 *   {"started": i, "pid": P}         when call i is started (pid of gbr-exec,
 *                                    -1 while it waits for a slot)
 *   {"event": i, "chunk": {...}}     streamed output (only with -s)
 *   {"call": i, "response": R}       R is a JSON-RPC response, exactly as
 *                                    tool.call would answer: {"result": ...}
 *                                    or {"error": {code, message, data: {kind}}}
 *   {"done": N, "status": {...}}     at the end: the runner's status
 * Options: -n starts CALLS calls at once; -C cancels every call after
 * CANCEL_MS; -S reaps through SIGCHLD instead of pidfds; -a marks the
 * calls approved; -x hides a file from the children; -I gives a state
 * folder (the temp folder goes there, and leftovers of a previous driver
 * with the same folder are killed at start); -q prints no
 * response bodies (only kinds and exit codes, for big outputs).
 * Exit status: 0 once every call has finished, 2 on usage, 1 on set-up.
 */
#include "gbr-config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "config.h"
#include "env.h"
#include "errors.h"
#include "jsonrpc.h"
#include "log.h"
#include "runner.h"
#include "sandbox.h"
#include "tool-run.h"
#include "xmalloc.h"

#define DRV_CALLS_MAX	1000

struct drv_call {
	int		 i;
	struct tool_run	*run;
	int		 done;
};

static struct event_base	*base;
static int			 stream, quiet, pending;
static struct drv_call		 calls[DRV_CALLS_MAX];

/* Prints one JSON object on a line and flushes. */
static void
drv_print(json_t *o)
{
	char	*s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);

	if (s != NULL)
		printf("%s\n", s);
	free(s);
	fflush(stdout);
	json_decref(o);
}

/* Streamed output. */
static void
drv_output(void *arg, json_t *chunk)
{
	struct drv_call	*c = arg;

	if (stream)
		drv_print(json_pack("{s:i, s:O}", "event", c->i, "chunk", chunk));
}

/* Drops the big fields of a result for -q. */
static void
drv_quiet(json_t *o)
{
	if (!quiet || o == NULL)
		return;
	json_object_del(o, "stdout");
	json_object_del(o, "stderr");
}

/* The end of a call: print it as tool.call would answer. */
static void
drv_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	struct drv_call	*c = arg;
	json_t		*resp, *copy;

	copy = result != NULL ? json_deep_copy(result) : NULL;
	drv_quiet(copy);
	if (failed)
		resp = rpc_error(NULL, kind, reason, copy);
	else
		resp = json_pack("{s:s, s:n, s:o}", "jsonrpc", "2.0", "id",
		    "result", copy != NULL ? copy : json_object());
	drv_print(json_pack("{s:i, s:o}", "call", c->i, "response", resp));
	c->done = 1;
	c->run = NULL;
	if (--pending == 0)
		event_base_loopexit(base, NULL);
}

/* -C: cancels every call still running. */
static void
drv_cancel(evutil_socket_t fd, short what, void *arg)
{
	int	i, n = *(int *)arg;

	for (i = 0; i < n; i++)
		if (!calls[i].done && calls[i].run != NULL)
			tool_run_cancel(calls[i].run);
}

/* Prints usage and exits 2. */
static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: runner-driver -w WORKSPACE [-e ENV] [-c CONF] "
	    "[-k SESSION] [-n CALLS] [-x HIDE]... [-I STATE] [-a] [-C MS] [-S] [-s] [-q] "
	    "TOOL [ARGS_JSON]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct tool_run_ctx	 ctx;
	struct config		*cfg;
	struct env		*env;
	struct sandbox		*sb;
	struct event		*ev_cancel = NULL;
	struct timeval		 tv;
	json_error_t		 jerr;
	json_t			*args = NULL, *data;
	const char		*ws = NULL, *envname = NULL, *conf = NULL;
	const char		*key = "s1", *hide[8], *state = NULL;
	char			*cause, *reason;
	enum gbr_err		 kind;
	int			 ch, n = 1, i, nhide = 0, approved = 0;
	int			 cancel_ms = -1;

	while ((ch = getopt(argc, argv, "w:e:c:k:n:x:I:aC:Ssq")) != -1) {
		switch (ch) {
		case 'w': ws = optarg; break;
		case 'e': envname = optarg; break;
		case 'c': conf = optarg; break;
		case 'k': key = optarg; break;
		case 'n':
			n = (int)strtol(optarg, NULL, 10);
			if (n < 1 || n > DRV_CALLS_MAX)
				usage();
			break;
		case 'x':
			if (nhide >= 8)
				usage();
			hide[nhide++] = optarg;
			break;
		case 'I': state = optarg; break;
		case 'a': approved = 1; break;
		case 'C': cancel_ms = (int)strtol(optarg, NULL, 10); break;
		case 'S': runner_force_sigchld(1); break;
		case 's': stream = 1; break;
		case 'q': quiet = 1; break;
		default: usage();
		}
	}
	if (ws == NULL || optind >= argc || argc - optind > 2)
		usage();
	if (argc - optind == 2 && argv[optind + 1][0] == '@')
		args = json_load_file(argv[optind + 1] + 1,
		    JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	else if (argc - optind == 2)
		args = json_loads(argv[optind + 1],
		    JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (argc - optind == 2 && args == NULL) {
		fprintf(stderr, "runner-driver: ARGS_JSON: %s\n", jerr.text);
		return 2;
	}
	log_open("runner-driver", LOG_LEVEL_INFO, LOG_DEST_STDERR);
	signal(SIGPIPE, SIG_IGN);
	if (conf != NULL) {
		if ((cfg = config_load(conf, &cause)) == NULL) {
			fprintf(stderr, "runner-driver: %s\n", cause);
			return 1;
		}
	} else
		cfg = config_defaults();
	if (env_load(ws, envname, &env, &cause) != 0 ||
	    (sb = env_sandbox(env, &cause)) == NULL) {
		fprintf(stderr, "runner-driver: %s\n", cause);
		return 1;
	}
	if ((base = event_base_new()) == NULL)
		return 1;
	if (tool_run_init(base, cfg, state, hide, (size_t)nhide, &cause) != 0) {
		fprintf(stderr, "runner-driver: %s\n", cause);
		return 1;
	}
	memset(&ctx, 0, sizeof ctx);
	ctx.sandbox = sb;
	ctx.env = env;
	ctx.session = key;
	ctx.approved = approved;
	for (i = 0; i < n; i++) {
		calls[i].i = i;
		pending++;
		if (tool_run_call(&ctx, argv[optind], args, drv_output, drv_done,
		    &calls[i], &calls[i].run, &kind, &reason, &data) != 0) {
			pending--;
			calls[i].done = 1;
			drv_print(json_pack("{s:i, s:o}", "call", i, "response",
			    rpc_error(NULL, kind, reason, data)));
			free(reason);
			continue;
		}
		drv_print(json_pack("{s:i, s:I}", "started", i, "pid",
		    (json_int_t)tool_run_job_pid(calls[i].run)));
	}
	if (cancel_ms >= 0) {
		ev_cancel = evtimer_new(base, drv_cancel, &n);
		tv.tv_sec = cancel_ms / 1000;
		tv.tv_usec = (cancel_ms % 1000) * 1000;
		evtimer_add(ev_cancel, &tv);
	}
	if (pending > 0)
		event_base_dispatch(base);
	drv_print(json_pack("{s:i, s:o}", "done", n, "status", tool_run_status()));
	if (ev_cancel != NULL)
		event_free(ev_cancel);
	tool_run_shutdown();
	event_base_free(base);
	sandbox_free(sb);
	env_unref(env);
	config_free(cfg);
	json_decref(args);
	log_close();
	return 0;
}
