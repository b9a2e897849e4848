/*
 * gbrd: the daemon's entry point. It parses the command line, reads the
 * config, takes the socket, and runs the one libevent loop that drives
 * everything else. Unless -f is given it goes to the background, and the
 * command that started it returns only once the daemon is listening (or
 * with the reason it could not start), so scripts and clients can rely on
 * "gbrd returned 0" meaning "the socket answers". On Windows, gbrd
 * --service runs the same start-up and loop as a service, on the thread
 * the Service Control Manager gives it (service.h).
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "sdactivate.h"
#include "agent.h"
#include "config.h"
#include "conn.h"
#include "disklog.h"
#include "dispatch.h"
#include "session.h"
#include "tool-file.h"
#include "tool-run.h"
#include "toolcall.h"
#include "loop.h"
#include "http.h"
#include "llm.h"
#include "log.h"
#include "mcp.h"
#include "methods.h"
#include "sdnotify.h"
#include "osdep.h"
#include "osdep-proc.h"
#include "paths.h"
#include "session-env.h"
#include "sandbox.h"
#include "server.h"
#include "service.h"
#include "xmalloc.h"

/* A log file larger than this is moved to gbrd.log.1 at start. */
#define GBRD_LOG_ROTATE	(16 * 1024 * 1024)

static struct event_base	*gbrd_ev_base;
static char			 gbrd_epoch_str[33];
static char			*gbrd_state;
static int			 gbrd_ready_fd = -1;
static int			 gbrd_level_flag = -1;	/* -l wins over the config */
static const char		*gbrd_config_flag;	/* -c, for reloads */

/* The command line, parsed by main for gbrd_run (which a service runs). */
static const char		*gbrd_socket_flag, *gbrd_state_flag;
static int			 gbrd_foreground, gbrd_syslog, gbrd_repair;

/* Prints usage. */
static void __attribute__((noreturn))
usage(int status)
{
	FILE	*f = status == 0 ? stdout : stderr;

	fprintf(f,
"usage: gbrd [-f] [-s SOCKET] [-S STATE_DIR] [-c CONFIG] [-l LEVEL] [--syslog]\n"
"            [--repair] [--service]\n"
"\n"
"The gbr daemon: holds agent sessions, the sandbox and the disk log, and\n"
"serves the gbr protocol on a local socket (a named pipe on Windows). gbr\n"
"and gbrctl start it when needed.\n"
"\n"
"  -f, --foreground       stay in the foreground, log to stderr (the default\n"
"                         when started by systemd)\n"
"  -s, --socket PATH      socket or pipe (default below)\n"
"  -S, --state-dir DIR    disk log folder (default below)\n"
"  -c, --config FILE      daemon config (default below)\n"
"  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
"      --repair           if the disk log is damaged, keep every record up to\n"
"                         the last good one, move the damaged files into\n"
"                         STATE_DIR/log/damaged (nothing is deleted), and start\n"
"      --syslog           log to syslog instead of stderr\n"
"      --service          run as a Windows service, under the Service Control\n"
"                         Manager (Windows only; see gbrd(8))\n"
"  -h, --help             this help\n"
"  -V, --version          print the version\n"
"\n"
"Signals: SIGTERM and SIGINT stop the daemon cleanly; SIGHUP re-reads the config.\n"
"(Windows: `gbrctl reload` re-reads it.) In the background, logs go to\n"
"STATE_DIR/gbrd.log.\n"
"\n"
"Defaults:\n"
"  socket: %s\n"
"  state:  %s\n"
"  config: %s\n", paths_help_socket, paths_help_state, paths_help_config);
	exit(status);
}

/* Tells the starting parent how start-up went, once. */
static void
gbrd_report(const char *message)
{
	size_t	len = strlen(message);

	if (gbrd_ready_fd == -1)
		return;
	(void)!write(gbrd_ready_fd, message, len);
	close(gbrd_ready_fd);
	gbrd_ready_fd = -1;
}

/* Exits during start-up with a message for the user. */
static void __attribute__((noreturn, format(__printf__, 1, 2)))
gbrd_fail(const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	sdnotify_failed(1, msg);
	/* What was held goes out with it: to the terminal if not detached. */
	log_release();
	if (gbrd_ready_fd != -1) {
		char	*line = xasprintf("error: %s\n", msg);

		gbrd_report(line);
		free(line);
	}
	free(msg);
	exit(1);
}

/* Opens STATE_DIR/gbrd.log for a background daemon, rotating a large one. */
static int
gbrd_open_logfile(void)
{
	struct stat	 sb;
	char		*path, *old;
	int		 fd;

	path = xasprintf("%s/gbrd.log", gbrd_state);
	if (stat(path, &sb) == 0 && sb.st_size > GBRD_LOG_ROTATE) {
		old = xasprintf("%s.1", path);
		(void)rename(path, old);
		free(old);
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	free(path);
	return fd;
}

/* A stop request (SIGTERM, SIGINT, the service manager): clean shutdown. */
static void
gbrd_stop(const char *why)
{
	loop_shutdown(why);
}

/*
 * The disk log's signing key: [log] signing_key, else log-signing.key in
 * the user's gbr config folder if it is there, else none.
 */
static const char *
gbrd_signing_key(const struct config *cfg)
{
	static char	*found;
	struct stat	 sb;
	char		*dir;

	if (cfg->log_signing_key != NULL)
		return cfg->log_signing_key;
	if (found == NULL && (dir = paths_user_config_dir()) != NULL) {
		found = xasprintf("%s/log-signing.key", dir);
		free(dir);
	}
	return found != NULL && stat(found, &sb) == 0 ? found : NULL;
}

/* The disk log's options from the config. */
static void
gbrd_disklog_opts(struct disklog_opts *o, const struct config *cfg, int repair)
{
	memset(o, 0, sizeof *o);
	o->segment_bytes = cfg->log_segment_bytes;
	o->max_bytes = cfg->log_max_bytes;
	o->snapshot_bytes = cfg->log_snapshot_bytes;
	o->fsync = cfg->log_fsync;
	o->commit_delay_us = cfg->log_commit_delay_us;
	o->repair = repair;
	o->chain = cfg->log_chain;
	o->chain_every = cfg->log_chain_every;
	o->signing_key = gbrd_signing_key(cfg);
}

/*
 * Re-reads the config; keeps the old one if the new one is broken (then
 * returns -1 with *cause). The loop's reload hook (loop_reload).
 */
static int
gbrd_reload(const char *trigger, char **cause)
{
	const struct config	*old = config_get();
	struct config		*cfg;
	struct disklog_opts	 dlo;
	char			*path, *why;

	*cause = NULL;
	path = old->path != NULL ? xstrdup(old->path) :
	    paths_config(gbrd_config_flag);
	if (path == NULL) {
		log_info("%s: no config file; keeping the built-in defaults",
		    trigger);
		return 0;
	}
	if ((cfg = config_load(path, &why)) == NULL) {
		log_error("%s: %s; keeping the previous config", trigger, why);
		*cause = xasprintf("%s; the previous config stays in force", why);
		free(why);
		free(path);
		return -1;
	}
	free(path);
	if (gbrd_level_flag != -1)
		cfg->log_level = gbrd_level_flag;
	config_set(cfg);
	log_set_level(cfg->log_level);
	conn_apply_config();
	gbrd_disklog_opts(&dlo, cfg, 0);
	disklog_reconfigure(&dlo);
	tool_run_reconfigure(cfg);
	/* The LLM keys: a bad key_file keeps the keys in use. */
	if (llm_keys_load(cfg, &why) != 0) {
		log_error("%s: %s; keeping the previous LLM keys", trigger,
		    why);
		*cause = xasprintf("%s; the previous LLM keys stay in use", why);
		free(why);
		log_info("%s: reloaded %s, but not its keys", trigger,
		    cfg->path);
		return -1;
	}
	log_info("%s: reloaded %s", trigger, cfg->path);
	return 0;
}

/* A reload request (SIGHUP), announced to the service manager. */
static void
gbrd_request_reload(const char *why)
{
	char	*cause;

	sdnotify_reloading();
	(void)loop_reload(why, &cause);
	free(cause);
	sdnotify_ready();
}

/* Makes this run's epoch from random bytes. */
static void
gbrd_make_epoch(void)
{
	unsigned char	r[8];
	size_t		i;

	if (osdep_random(r, sizeof r) != 0)
		gbrd_fail("no source of random bytes");
	for (i = 0; i < sizeof r; i++)
		snprintf(gbrd_epoch_str + 2 * i, 3, "%02x", r[i]);
}

/*
 * Everything after the command line: start-up, the loop, shutdown. It is
 * main's body, apart so that a Windows service runs the same one flow on
 * the thread the Service Control Manager gives it (service.h). Returns
 * the exit status; a failed start exits (gbrd_fail).
 */
static int
gbrd_run(void)
{
	int		 foreground = gbrd_foreground, level = gbrd_level_flag;
	int		 managed, lfd;
	struct disklog_opts dlo;
	struct config	*cfg;
	char		*cfg_path, *cause, *sock_path, *lpath;
	const char	*hide[2];
	long		 nofile;
	json_t		*note;

	log_open("gbrd", level != -1 ? level : LOG_LEVEL_INFO,
	    gbrd_syslog ? LOG_DEST_SYSLOG : LOG_DEST_STDERR);
	umask(077);
	/* Before anything big is allocated: freed buffers go back (osdep.h). */
	osdep_memory_init();
	/* Before sdactivate_listen_fd clears LISTEN_PID. */
	managed = sdactivate_managed();
	/* Until it detaches, a background gbrd keeps its lines for gbrd.log. */
	if (!foreground && !managed)
		log_hold();
	/*
	 * Stop and reload requests wait until the loop has handlers for them:
	 * a SIGTERM during a long replay then stops cleanly (STOPPING=1, the
	 * log closed) instead of killing the daemon half way through.
	 */
	osdep_requests_hold();

	/*
	 * The state folder before the config: a service has no console, and
	 * from here on its lines (a refused config among them) are in
	 * gbrd.log there.
	 */
	gbrd_state = paths_state_dir(gbrd_state_flag);
	if (paths_private_dir(gbrd_state, 1, &cause) != 0)
		gbrd_fail("state folder: %s", cause);
	service_log_file(gbrd_state, gbrd_open_logfile);

	if ((cfg_path = paths_config(gbrd_config_flag)) != NULL) {
		/* Freed first: LeakSanitizer may not see it on the stack. */
		if ((cfg = config_load(cfg_path, &cause)) == NULL) {
			free(cfg_path);
			gbrd_fail("%s", cause);
		}
	} else
		cfg = config_defaults();
	free(cfg_path);
	if (level != -1)
		cfg->log_level = level;
	config_set(cfg);
	log_set_level(cfg->log_level);

	/* Where the platform cannot fork, the daemon starts over detached. */
	if (!foreground && !managed)
		osdep_detach(OSDEP_DETACH_BEFORE_LISTEN, gbrd_open_logfile,
		    gbrd_state, &gbrd_ready_fd);
	sock_path = paths_socket(gbrd_socket_flag);
	switch (sdactivate_listen_fd(&lfd, &lpath, &cause)) {
	case -1:
		gbrd_fail("socket activation: %s", cause);
	case 1:
		if (strcmp(lpath, sock_path) != 0)
			log_info("serving the socket from the service manager, "
			    "%s, instead of %s", lpath, sock_path);
		free(sock_path);
		sock_path = lpath;
		if (server_adopt(lfd, sock_path, &cause) != 0)
			gbrd_fail("%s", cause);
		break;
	default:
		if (server_listen(sock_path, &cause) != 0)
			gbrd_fail("%s", cause);
		break;
	}

	if (!foreground && managed)
		log_debug("started by a service manager: staying in the "
		    "foreground");
	else if (!foreground) {
		osdep_detach(OSDEP_DETACH_AFTER_LISTEN, gbrd_open_logfile,
		    gbrd_state, &gbrd_ready_fd);
		/* stderr is now the log file: check again for the journal. */
		log_open(NULL, log_get_level(),
		    gbrd_syslog ? LOG_DEST_SYSLOG : LOG_DEST_STDERR);
	}
	log_release();

	if (osdep_loop_prepare(&cause) != 0)
		gbrd_fail("%s", cause);
	if ((gbrd_ev_base = event_base_new()) == NULL)
		gbrd_fail("cannot create the event loop");
	nofile = osdep_raise_nofile();
	/* libcurl once, before anything could start a thread; then the keys. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		gbrd_fail("curl_global_init failed");
	if (http_init(gbrd_ev_base, &cause) != 0)
		gbrd_fail("http: %s", cause);
	if (llm_keys_load(config_get(), &cause) != 0)
		gbrd_fail("%s", cause);
	gbrd_make_epoch();
	loop_init(gbrd_ev_base, gbrd_state, gbrd_epoch_str);
	loop_on_shutdown(sdnotify_stopping);
	loop_on_reload(gbrd_reload);
	llm_init(gbrd_ev_base);
	conn_init(gbrd_ev_base, &dispatch_conn_ops);
	sdnotify_init(gbrd_ev_base);
	session_init(gbrd_ev_base);	/* registers with the disk log */
	agent_init(gbrd_ev_base);	/* takes the running turns */
	toolcall_init(gbrd_ev_base);	/* the approvals register too */
	dispatch_observe_close(session_conn_closed, 0);
	dispatch_observe_close(method_log_conn_closed, 0);
	dispatch_observe_close(toolcall_conn_closed, 1);

	/* Replay before anyone is served: clients see the state the log gives. */
	gbrd_disklog_opts(&dlo, config_get(), gbrd_repair);
	if (disklog_open(gbrd_ev_base, gbrd_state, &dlo, &cause) != 0)
		gbrd_fail("%s", cause);
	sdnotify_progress();
	/* Turns that were running when the daemon died are marked interrupted. */
	session_recover();
	/* The agent's commands; no child may reach the socket or the config. */
	hide[0] = sock_path;
	hide[1] = config_get()->path;
	if (tool_run_init(gbrd_ev_base, config_get(), gbrd_state, hide,
	    hide[1] != NULL ? 2 : 1, &cause) != 0)
		gbrd_fail("runner: %s", cause);
	/*
	 * No file tool reads or writes gbrd's own files, whatever a profile's
	 * roots say: the disk log, the config, the keys (gbrd.env, key_file).
	 */
	{
		const char	*own[4];
		char		*ucfg = paths_user_config_dir();
		size_t		 n = 0;

		own[n++] = gbrd_state;
		if (config_get()->path != NULL)
			own[n++] = config_get()->path;
		if (config_get()->llm_key_file != NULL)
			own[n++] = config_get()->llm_key_file;
		if (ucfg != NULL)
			own[n++] = ucfg;
		sandbox_set_forbidden(own, n);
		free(ucfg);
	}
	/* The tools, then every session's environment and profile watcher. */
	if (method_tool_init(gbrd_ev_base, &cause) != 0)
		gbrd_fail("tools: %s", cause);
	session_env_init(gbrd_ev_base);
	session_env_recover();
	/* The profiles' MCP servers: their tools join each session's. */
	mcp_init(gbrd_ev_base, session_env_lookup);
	sdnotify_progress();
	/* Approvals: interrupted ones marked, expired ones ended. */
	toolcall_recover();
	/* Agent turns that waited for an approval wait again. */
	agent_recover();

	server_start(gbrd_ev_base);

	if (osdep_stop_events(gbrd_ev_base, gbrd_stop,
	    gbrd_request_reload) != 0)
		gbrd_fail("cannot install signal handlers");

	log_info("gbrd %s started on %s (pid %ld, epoch %s, open-file limit %ld)",
	    PACKAGE_VERSION, sock_path, (long)getpid(), gbrd_epoch_str, nofile);
	gbrd_report("ok\n");
	sdnotify_ready();

	event_base_dispatch(gbrd_ev_base);

	/* No transfer outlives the loop (MCP's url servers' ones first). */
	agent_shutdown();
	mcp_shutdown();
	llm_shutdown();
	http_shutdown();
	/* No child outlives the daemon, and no search its callers. */
	tool_run_shutdown();
	tool_file_shutdown();
	session_env_shutdown();

	/* Writes what is queued; the replies it releases get one flush below. */
	disklog_close();
	/*
	 * Clients hear that this stop was meant (a crash says nothing): the
	 * REPL then does not start another gbrd in its place (PROTOCOL.md).
	 */
	note = json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
	    "daemon.stopping", "params", "reason", loop_stop_reason());
	if (note != NULL)
		conn_notify_all(note);
	json_decref(note);
	conn_close_all("daemon shutting down");
	server_close();
	/* Sessions first: a record they drop may still end a tool call. */
	session_shutdown();
	toolcall_shutdown();
	/* One more pass runs the deferred frees of closed connections. */
	event_base_loop(gbrd_ev_base, EVLOOP_NONBLOCK);
	osdep_stop_events_free();
	sdnotify_close();
	event_base_free(gbrd_ev_base);
	curl_global_cleanup();
	config_set(NULL);
	free(sock_path);
	free(gbrd_state);
	log_info("stopped");
	log_close();
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground",	no_argument,		NULL, 'f' },
		{ "socket",	required_argument,	NULL, 's' },
		{ "state-dir",	required_argument,	NULL, 'S' },
		{ "config",	required_argument,	NULL, 'c' },
		{ "log-level",	required_argument,	NULL, 'l' },
		{ "syslog",	no_argument,		NULL, 'Y' },
		{ "repair",	no_argument,		NULL, 'R' },
		{ "service",	no_argument,		NULL, 'W' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "version",	no_argument,		NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*level_flag = NULL;
	int		 ch, service = 0;

	while ((ch = getopt_long(argc, argv, "fs:S:c:l:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f': gbrd_foreground = 1; break;
		case 's': gbrd_socket_flag = optarg; break;
		case 'S': gbrd_state_flag = optarg; break;
		case 'c': gbrd_config_flag = optarg; break;
		case 'l': level_flag = optarg; break;
		case 'Y': gbrd_syslog = 1; break;
		case 'R': gbrd_repair = 1; break;
		case 'W': service = 1; break;
		case 'h': usage(0);
		case 'V': printf("gbrd %s\n", PACKAGE_VERSION); return 0;
		default: usage(2);
		}
	}
	if (optind != argc)
		usage(2);
	if (level_flag != NULL &&
	    (gbrd_level_flag = log_level_parse(level_flag)) == -1) {
		fprintf(stderr, "gbrd: unknown log level '%s' (error, warn, info, "
		    "debug)\n", level_flag);
		return 2;
	}
	/* The Service Control Manager's thread runs the body (service.h). */
	if (service)
		return service_run(gbrd_run);
	return gbrd_run();
}
