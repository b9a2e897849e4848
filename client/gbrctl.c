/*
 * gbrctl: the scripting client. One command per call, chosen from a table
 * (smtpctl's model). Exit codes are part of the contract (DESIGN.md 3):
 * 0 ok, 1 the daemon answered with an error, 2 usage error, 3 the daemon
 * cannot be reached.
 */
#include "gbr-config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "jsonrpc.h"
#include "paths.h"
#include "xmalloc.h"

#define EXIT_OK		CTL_EXIT_OK
#define EXIT_ERROR	CTL_EXIT_ERROR
#define EXIT_USAGE	CTL_EXIT_USAGE
#define EXIT_UNREACHABLE CTL_EXIT_UNREACHABLE
#define CMD_FAILED	125	/* a CMD_OWN_STATUS command's own failure */

struct cmd {
	const char	*name;
	const char	*args;
	const char	*help;
	int		(*fn)(struct ctl *, int, char **);
	int		 flags;
#define CMD_CONNECT	0x1	/* needs a connection to a running daemon */
#define CMD_OWN_HELP	0x2	/* prints its own --help */
#define CMD_OWN_STATUS	0x4	/* exits with what it ran: gbrctl's own
				   failures are 125 (ctl-run.c) */
#define CMD_OPTS_AFTER	0x8	/* takes gbrctl's options among its arguments */
	int		 min_args;
	int		 max_args;
};

static int	cmd_status(struct ctl *, int, char **);
static int	cmd_ping(struct ctl *, int, char **);
static int	cmd_start(struct ctl *, int, char **);
static int	cmd_shutdown(struct ctl *, int, char **);
static int	cmd_reload(struct ctl *, int, char **);
static int	cmd_call(struct ctl *, int, char **);

static const struct cmd cmds[] = {
	{ "status", "[SESSION]", "show the daemon's state, limits and active "
	    "security layers; or a session's state, tokens and cost",
	    cmd_status, CMD_CONNECT | CMD_OPTS_AFTER, 0, 1 },
	{ "ping", "", "check that the daemon answers",
	    cmd_ping, CMD_CONNECT, 0, 0 },
	{ "start", "", "start the daemon if it is not running",
	    cmd_start, 0, 0, 0 },
	{ "shutdown", "", "stop the daemon cleanly",
	    cmd_shutdown, CMD_CONNECT, 0, 0 },
	{ "reload", "", "re-read gbrd.conf (as SIGHUP does); a broken one is "
	    "refused and the one in force stays", cmd_reload, CMD_CONNECT, 0, 0 },
	{ "call", "METHOD [JSON-PARAMS]", "call any method; print its result as JSON",
	    cmd_call, CMD_CONNECT, 1, 2 },
	{ "log", "[-f] [--after SEQ] [--limit N]", "print the disk log's records "
	    "(-f: then follow); `log verify [--state-dir DIR]` checks its files "
	    "offline, exit 0 only if clean", ctl_log, 0, 0, 5 },
	{ "new", "[--name N] [--env E] [DIR]", "create a session on DIR (default .); print its id",
	    ctl_session_new, CMD_CONNECT, 0, 8 },
	{ "sessions", "", "list the open sessions",
	    ctl_session_list, CMD_CONNECT, 0, 0 },
	{ "send", "[--no-wait] [--events] SESSION TEXT|-", "send a message; wait for the turn and print the answer",
	    ctl_session_send, CMD_CONNECT, 2, 8 },
	{ "attach", "SESSION [--after SEQ]", "print a session's events as they happen",
	    ctl_session_attach, CMD_CONNECT, 1, 4 },
	{ "history", "[--limit N] SESSION", "print a session's messages",
	    ctl_session_history, CMD_CONNECT, 1, 4 },
	{ "rewind", "SESSION [--turn N | --to SEQ] [--dry-run] [--force] "
	    "[--conversation]", "undo what the agent changed in the workspace "
	    "from turn N on, or after seq SEQ (--dry-run: show the diff; "
	    "--conversation: also drop the later messages from what the "
	    "model sees); alone, list the changes", ctl_rewind,
	    CMD_CONNECT | CMD_OWN_HELP, 1, 7 },
	{ "audit", "[--session S] [--since TIME] [--json]", "who approved or "
	    "denied what (client, uid, pid, terminal), what ran and how it "
	    "ended, files changed, rewinds, grants, profile reloads",
	    ctl_audit, CMD_CONNECT | CMD_OWN_HELP, 0, 5 },
	{ "cancel", "SESSION", "cancel the running turn",
	    ctl_session_cancel, CMD_CONNECT, 1, 1 },
	{ "close", "SESSION", "close a session (its history goes with it)",
	    ctl_session_close, CMD_CONNECT, 1, 1 },
	{ "tool", "SESSION NAME [JSON|-]", "run a tool in a session as the agent would",
	    ctl_tool, CMD_CONNECT, 2, 3 },
	{ "tools", "[SESSION]", "list the tools and what they do (with a "
	    "session, its MCP servers' tools too)", ctl_tools, CMD_CONNECT, 0, 1 },
	{ "mcp-servers", "[SESSION]", "list the external MCP servers of a "
	    "session (or all): state, tools, last error", ctl_mcp_servers,
	    CMD_CONNECT, 0, 1 },
	{ "env", "list|show|use|reload ...", "list, show, switch or reload a session's environment",
	    ctl_env, CMD_CONNECT, 1, 3 },
	{ "cache", "du|clean [DIR|SESSION]", "the size of the agent's "
	    "package caches, or remove them (a workspace's, or every one)",
	    ctl_cache, CMD_CONNECT, 1, 2 },
	{ "run", "SESSION -- ARGV...", "run a command in a session's sandbox (run_command); print its output",
	    ctl_run, CMD_CONNECT | CMD_OWN_STATUS, 3, 4096 },
	{ "approvals", "[--session S] [--all]", "list the approvals waiting "
	    "for a human (paths and commands escaped)", ctl_approvals, CMD_OWN_HELP, 0, 4 },
	{ "approve", "ID [--scope session] [--reason R]", "approve: the "
	    "action runs once (session: same tool and path allowed until "
	    "revoked)", ctl_approve, CMD_OWN_HELP, 1, 7 },
	{ "deny", "ID [--reason R]", "deny: the agent gets \"denied\" with "
	    "the reason", ctl_deny, CMD_OWN_HELP, 1, 5 },
	{ "edit", "ID [--reason R]", "edit the proposed file in $VISUAL/$EDITOR, "
	    "then write that instead", ctl_edit, CMD_OWN_HELP, 1, 5 },
	{ "grants", "[--session S]", "list the session grants",
	    ctl_grants, CMD_OWN_HELP, 0, 2 },
	{ "revoke", "GRANT", "revoke a session grant: identical calls ask again",
	    ctl_revoke, CMD_OWN_HELP, 1, 1 },
	{ "mcp", "[--session S | --workspace DIR] [--env E]", "serve gbr's tools "
	    "to an MCP client over stdio (starts gbrd if needed)",
	    ctl_mcp, CMD_OWN_HELP, 0, 5 },
	{ "acp", "[--workspace DIR] [--env E]", "be an Agent Client Protocol "
	    "agent for an editor over stdio (starts gbrd if needed)",
	    ctl_acp, CMD_OWN_HELP, 0, 5 },
};

/* Prints usage. */
static void
usage(FILE *f)
{
	size_t	i;

	fprintf(f,
"usage: gbrctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS...]\n"
"\n"
"Controls the gbr daemon (gbrd) from scripts.\n"
"\n"
"Commands:\n");
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		/* Long argument lists get the help on a line of its own. */
		if (strlen(cmds[i].args) > 22)
			fprintf(f, "  %-9s %s\n  %-9s %-22s %s\n", cmds[i].name,
			    cmds[i].args, "", "", cmds[i].help);
		else
			fprintf(f, "  %-9s %-22s %s\n", cmds[i].name,
			    cmds[i].args, cmds[i].help);
	fprintf(f,
"\n"
"Options:\n"
"  -s, --socket PATH  daemon socket or pipe; by default:\n"
"                     %s\n"
"  -j, --json         machine-readable output: one JSON value per line\n"
"  -t, --timeout MS   how long to wait for a reply (default 30000; 0 = forever)\n"
"  -h, --help         this help; `gbrctl COMMAND --help` or `gbrctl help COMMAND`\n"
"                     for one command\n"
"  -V, --version      print the version\n"
"\n"
"Exit status: 0 ok, 1 the daemon answered with an error, 2 usage error,\n"
"3 the daemon cannot be reached.\n"
"\n"
"Examples:\n"
"  gbrctl status\n"
"  gbrctl --json call daemon.status\n"
"  gbrctl call hello '{\"protocol\":1}'\n", paths_help_socket);
}

/* Takes one of gbrctl's own options (-s, -j, -t); -1 after saying why not. */
static int
global_opt(struct ctl *ctl, const char **socket_flag, int ch, const char *arg)
{
	char	*end;
	long	 t;

	switch (ch) {
	case 's':
		*socket_flag = arg;
		break;
	case 'j':
		ctl->json = 1;
		break;
	case 't':
		errno = 0;
		t = strtol(arg, &end, 10);
		if (errno != 0 || *end != '\0' || t < 0 || t > 86400000) {
			fprintf(stderr, "gbrctl: --timeout takes milliseconds "
			    "from 0 to 86400000\n");
			return -1;
		}
		ctl->timeout_ms = (int)t;
		break;
	default:
		return -1;
	}
	return 0;
}

/* Prints a command's usage line. */
static void
cmd_usage_line(FILE *f, const struct cmd *cmd)
{
	fprintf(f, "usage: gbrctl %s%s%s\n", cmd->name,
	    cmd->args[0] != '\0' ? " " : "", cmd->args);
}

/* Prints one command's usage and what it does. */
static void
cmd_usage(const struct cmd *cmd)
{
	cmd_usage_line(stdout, cmd);
	printf("\n%c%s.\n", cmd->help[0] >= 'a' && cmd->help[0] <= 'z' ?
	    cmd->help[0] - 'a' + 'A' : cmd->help[0], cmd->help + 1);
	if (cmd->flags & CMD_CONNECT)
		printf("\nNeeds a running gbrd (exit 3 when it cannot be "
		    "reached).\n");
}

/* Prints a JSON value on one line. */
void
ctl_print_json(const json_t *v)
{
	char	*s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	if (s != NULL)
		printf("%s\n", s);
	free(s);
}

/* Reports an error response; returns the exit code for it. */
static int
report_error(struct ctl *ctl, const json_t *reply)
{
	if (ctl->json)
		ctl_print_json(json_object_get(reply, "error"));
	else
		fprintf(stderr, "gbrctl: %s (%s)\n",
		    client_error_message(reply) != NULL ?
		    client_error_message(reply) : "error",
		    client_error_kind(reply) != NULL ?
		    client_error_kind(reply) : "unknown");
	return EXIT_ERROR;
}

/* Calls a method; on success stores the result (new reference). */
int
ctl_call(struct ctl *ctl, const char *method, json_t *params, json_t **result)
{
	json_t	*reply;
	char	*cause;
	int	 r;

	reply = client_call(ctl->cl, method, params,
	    ctl->timeout_ms == 0 ? -1 : ctl->timeout_ms, &cause);
	if (reply == NULL) {
		fprintf(stderr, "gbrctl: %s\n", cause);
		free(cause);
		return EXIT_UNREACHABLE;
	}
	if (json_object_get(reply, "error") != NULL) {
		r = report_error(ctl, reply);
		json_decref(reply);
		return r;
	}
	*result = json_incref(json_object_get(reply, "result"));
	json_decref(reply);
	return EXIT_OK;
}

/* Prints an object as "key.sub: value" lines, for people. */
void
ctl_print_flat(const char *prefix, const json_t *v)
{
	const char	*key;
	json_t		*sub;
	char		*name, *s;

	if (json_is_object(v) && json_object_size(v) > 0) {
		json_object_foreach((json_t *)v, key, sub) {
			name = *prefix != '\0' ? xasprintf("%s.%s", prefix, key) :
			    xstrdup(key);
			ctl_print_flat(name, sub);
			free(name);
		}
		return;
	}
	if (json_is_string(v))
		printf("%-28s %s\n", prefix, json_string_value(v));
	else if (json_is_null(v))
		printf("%-28s -\n", prefix);
	else {
		s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		printf("%-28s %s\n", prefix, s != NULL ? s : "?");
		free(s);
	}
}

/* status [SESSION]: the daemon's state, or a session's. */
static int
cmd_status(struct ctl *ctl, int argc, char **argv)
{
	json_t		*st;
	long long	 up;
	int		 r;

	if (argc == 1)
		return ctl_session_status(ctl, argv[0]);
	if ((r = ctl_call(ctl, "daemon.status", NULL, &st)) != EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(st);
	else {
		up = json_integer_value(json_object_get(st, "uptime_ms")) / 1000;
		printf("gbrd %s (pid %lld), up %lldh%02lldm%02llds, epoch %s\n",
		    json_string_value(json_object_get(st, "version")),
		    (long long)json_integer_value(json_object_get(st, "pid")),
		    up / 3600, up / 60 % 60, up % 60,
		    json_string_value(json_object_get(st, "epoch")));
		json_object_del(st, "version");
		json_object_del(st, "pid");
		json_object_del(st, "epoch");
		json_object_del(st, "uptime_ms");
		json_object_del(st, "server");
		ctl_print_flat("", st);
	}
	json_decref(st);
	return EXIT_OK;
}

/* ping: a round trip. */
static int
cmd_ping(struct ctl *ctl, int argc, char **argv)
{
	json_t	*res;
	int	 r;

	if ((r = ctl_call(ctl, "daemon.ping", NULL, &res)) != EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else
		printf("gbrd is alive (epoch %s)\n", json_string_value(
		    json_object_get(client_hello(ctl->cl), "epoch")));
	json_decref(res);
	return EXIT_OK;
}

/* start: starts the daemon unless it runs. */
static int
cmd_start(struct ctl *ctl, int argc, char **argv)
{
	char	*cause;

	if (client_start_daemon(ctl->socket, &cause) != 0) {
		fprintf(stderr, "gbrctl: %s\n", cause);
		free(cause);
		return EXIT_UNREACHABLE;
	}
	if (ctl->json)
		printf("{\"running\":true,\"socket\":\"%s\"}\n", ctl->socket);
	else
		printf("gbrd is running on %s\n", ctl->socket);
	return EXIT_OK;
}

/* shutdown: stops the daemon. */
static int
cmd_shutdown(struct ctl *ctl, int argc, char **argv)
{
	json_t	*res;
	int	 r;

	if ((r = ctl_call(ctl, "daemon.shutdown", NULL, &res)) != EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else
		printf("gbrd is stopping\n");
	json_decref(res);
	return EXIT_OK;
}

/* reload: the daemon reads its config again, or says why it cannot. */
static int
cmd_reload(struct ctl *ctl, int argc, char **argv)
{
	json_t		*res;
	const char	*path;
	int		 r;

	if ((r = ctl_call(ctl, "daemon.reload", NULL, &res)) != EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else if ((path = json_string_value(json_object_get(res,
	    "config"))) != NULL)
		printf("gbrd reloaded %s\n", path);
	else
		printf("gbrd has no config file; it keeps its built-in "
		    "defaults\n");
	json_decref(res);
	return EXIT_OK;
}

/* call METHOD [JSON]: any method, raw. */
static int
cmd_call(struct ctl *ctl, int argc, char **argv)
{
	json_error_t	 jerr;
	json_t		*params = NULL, *res;
	int		 r;

	if (argc == 2) {
		params = json_loads(argv[1], JSON_REJECT_DUPLICATES, &jerr);
		if (params == NULL) {
			fprintf(stderr, "gbrctl: JSON-PARAMS is not valid JSON: "
			    "%s (column %d)\n", jerr.text, jerr.column);
			return EXIT_USAGE;
		}
		if (!json_is_object(params) && !json_is_array(params)) {
			fprintf(stderr, "gbrctl: JSON-PARAMS must be an object "
			    "or an array\n");
			json_decref(params);
			return EXIT_USAGE;
		}
	}
	if ((r = ctl_call(ctl, argv[0], params, &res)) != EXIT_OK)
		return r;
	ctl_print_json(res);
	json_decref(res);
	return EXIT_OK;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket",	required_argument,	NULL, 's' },
		{ "json",	no_argument,		NULL, 'j' },
		{ "timeout",	required_argument,	NULL, 't' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "version",	no_argument,		NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct ctl		 ctl;
	const struct cmd	*cmd = NULL;
	const char		*socket_flag = NULL;
	char			*cause, name[64];
	size_t			 i;
	int			 ch, r, unreachable, help;

	/* Before anything else, so no other process of ours can take our socket. */
	client_protect_process();
	memset(&ctl, 0, sizeof ctl);
	ctl.timeout_ms = 30000;
	/* '+': options stop at the command, so its arguments may start with '-'. */
	while ((ch = getopt_long(argc, argv, "+s:jt:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
		case 'j':
		case 't':
			if (global_opt(&ctl, &socket_flag, ch, optarg) != 0)
				return EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("gbrctl %s\n", PACKAGE_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* "help" alone, or "help COMMAND" as "COMMAND --help". */
	if (strcmp(argv[0], "help") == 0 && argc == 1) {
		usage(stdout);
		return EXIT_OK;
	}
	help = strcmp(argv[0], "help") == 0;
	if (help) {
		argc--;
		argv++;
	}
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		if (strcmp(cmds[i].name, argv[0]) == 0)
			cmd = &cmds[i];
	}
	if (cmd == NULL) {
		fprintf(stderr, "gbrctl: unknown command '%s' (gbrctl --help "
		    "lists them)\n", argv[0]);
		return EXIT_USAGE;
	}
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0))
		help = 1;
	if (help && (cmd->flags & CMD_OWN_HELP)) {
		static char	 opt[] = "--help";
		char		*hv[] = { opt, NULL };

		return cmd->fn(&ctl, 1, hv);
	}
	if (help) {
		cmd_usage(cmd);
		return EXIT_OK;
	}
	/*
	 * A command without arguments also takes gbrctl's own options after
	 * it ("gbrctl sessions --json"): nothing else could be meant. One
	 * whose arguments never start with '-' (CMD_OPTS_AFTER) takes them
	 * among its arguments: getopt_long moves those to the end.
	 */
	if ((cmd->max_args == 0 || (cmd->flags & CMD_OPTS_AFTER)) && argc > 1) {
		optind = 0;
		opterr = 0;
		while ((ch = getopt_long(argc, argv, cmd->max_args == 0 ?
		    "+s:jt:" : "s:jt:", longopts, NULL)) != -1)
			if ((ch != 's' && ch != 'j' && ch != 't') ||
			    global_opt(&ctl, &socket_flag, ch, optarg) != 0) {
				fprintf(stderr, "usage: gbrctl %s (and gbrctl's "
				    "options, -s, -j, -t)\n", cmd->name);
				return EXIT_USAGE;
			}
		argc -= optind - 1;
		argv += optind - 1;
	}
	if (argc - 1 < cmd->min_args || argc - 1 > cmd->max_args) {
		cmd_usage_line(stderr, cmd);
		return cmd->flags & CMD_OWN_STATUS ? CMD_FAILED : EXIT_USAGE;
	}
	ctl.socket = paths_socket(socket_flag);
	ctl.state_dir = paths_state_dir(NULL);
	if (cmd->flags & CMD_CONNECT) {
		snprintf(name, sizeof name, "gbrctl/%s", PACKAGE_VERSION);
		ctl.cl = client_connect(ctl.socket, CLIENT_NO_START, name, &cause,
		    &unreachable);
		if (ctl.cl == NULL) {
			fprintf(stderr, "gbrctl: %s\n", cause);
			free(cause);
			free(ctl.socket);
			free(ctl.state_dir);
			if (cmd->flags & CMD_OWN_STATUS)
				return CMD_FAILED;
			return unreachable ? EXIT_UNREACHABLE : EXIT_ERROR;
		}
	}
	r = cmd->fn(&ctl, argc - 1, argv + 1);
	client_free(ctl.cl);
	free(ctl.socket);
	free(ctl.state_dir);
	return r;
}
