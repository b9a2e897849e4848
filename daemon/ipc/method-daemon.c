/*
 * The daemon's own methods: hello (the handshake), daemon.ping,
 * daemon.status, daemon.reload and daemon.shutdown.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "agent.h"
#include "approval.h"
#include "config.h"
#include "conn.h"
#include "disklog.h"
#include "dispatch.h"
#include "loop.h"
#include "http.h"
#include "jsonrpc.h"
#include "listen.h"
#include "llm.h"
#include "log.h"
#include "mcp.h"
#include "methods.h"
#include "session-env.h"
#include "sandbox.h"
#include "sdnotify.h"
#include "osdep.h"
#include "rewind.h"
#include "server.h"
#include "session.h"
#include "tool-run.h"

/* hello {protocol, client?}: the first call on every connection. */
void
method_hello(struct request *req, json_t *params)
{
	static const char *const keys[] = { "protocol", "client", NULL };
	struct conn	*c = request_conn(req);
	json_int_t	 protocol = 0;
	const char	*client = NULL;

	if (params_only(req, params, keys) != 0 ||
	    params_integer(req, params, "protocol", 1, 0, 1000000, &protocol) != 0 ||
	    params_string(req, params, "client", 0, &client) != 0)
		return;
	if (protocol != GBR_PROTOCOL_VERSION) {
		/* Answer, then close: this client cannot speak with us. */
		conn_ref(c);
		request_error(req, GBR_ERR_UNSUPPORTED_PROTOCOL,
		    json_pack("{s:[i]}", "supported", GBR_PROTOCOL_VERSION),
		    "protocol %lld is not supported (this daemon speaks %d)",
		    (long long)protocol, GBR_PROTOCOL_VERSION);
		conn_close_after_flush(c, "unsupported protocol");
		conn_unref(c);
		return;
	}
	conn_set_hello(c, client);
	log_debug("client %llu is %s", (unsigned long long)conn_id(c),
	    client != NULL ? client : "(unnamed)");
	request_reply(req, json_pack("{s:i, s:s, s:s, s:I, s:s, s:o, s:{s:I}}",
	    "protocol", GBR_PROTOCOL_VERSION, "server", "gbrd",
	    "version", PACKAGE_VERSION, "pid", (json_int_t)getpid(),
	    "epoch", loop_epoch(), "capabilities", dispatch_methods(),
	    "limits", "max_line_bytes", (json_int_t)config_get()->max_line_bytes));
}

/* daemon.ping: the cheapest round trip. */
void
method_daemon_ping(struct request *req, json_t *params)
{
	static const char *const keys[] = { NULL };

	if (params_only(req, params, keys) != 0)
		return;
	request_reply(req, NULL);
}

/* Lists the security layers that are active. */
static json_t *
method_security(void)
{
	const char	*peer = osdep_peer_cred_method();

	return json_pack("{s:o, s:s?, s:b, s:o, s:s, s:o}",
	    "listener", listen_layers(),
	    "peer_uid_check", peer,
	    "peer_uid_check_fail_closed", 1,
	    "runner", tool_run_status(),
	    "sandbox_resolver", sandbox_resolver(),
	    "env_watch", session_env_status());
}

/* daemon.status: what the daemon is doing and which layers are active. */
void
method_daemon_status(struct request *req, json_t *params)
{
	static const char *const keys[] = { NULL };
	const struct config	*cfg = config_get();
	json_t			*result;

	if (params_only(req, params, keys) != 0)
		return;
	result = json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:s, s:s?, s:s, s:{s:I, s:I, s:I, s:s}, s:o, s:{s:I, s:I, s:I}}",
	    "server", "gbrd",
	    "version", PACKAGE_VERSION,
	    "pid", (json_int_t)getpid(),
	    "epoch", loop_epoch(),
	    "started_ms", (json_int_t)loop_started_ms(),
	    "uptime_ms", (json_int_t)loop_uptime_ms(),
	    "state_dir", loop_state_dir(),
	    "config", cfg->path,
	    "log_level", log_level_name(log_get_level()),
	    "clients",
		"connected", (json_int_t)conn_count(),
		"max", (json_int_t)cfg->max_clients,
		"evicted", (json_int_t)conn_evictions(),
		"write_batching", conn_write_batching(),
	    "security", method_security(),
	    "limits",
		"max_line_bytes", (json_int_t)cfg->max_line_bytes,
		"client_queue_bytes", (json_int_t)cfg->client_queue_bytes,
		"max_clients", (json_int_t)cfg->max_clients);
	json_object_set_new(json_object_get(result, "limits"),
	    "max_input_bytes", json_integer((json_int_t)cfg->max_input_bytes));
	/* The unfinished lines of all clients, against their budget. */
	json_object_set_new(result, "input", conn_input_status());
	json_object_set_new(result, "listener", server_status());
	json_object_set_new(result, "service", sdnotify_status_json());
	json_object_set_new(result, "disklog", disklog_status());
	json_object_set_new(result, "shadow", rewind_gc_status());
	json_object_set_new(result, "sessions", session_status());
	/* The profiles' external MCP servers: followed, and running. */
	json_object_set_new(result, "mcp", mcp_status_json());
	/* The agent: turns, streams, and which keys are known (never the keys). */
	json_object_set_new(result, "llm", json_pack("{s:o, s:I, s:o}", "keys",
	    llm_keys_status(), "requests", (json_int_t)http_active(), "agent",
	    agent_status()));
	json_object_set_new(result, "approvals", json_pack("{s:I}", "pending",
	    (json_int_t)approval_pending_count()));
	json_object_set_new(json_object_get(result, "disklog"), "followers",
	    json_integer(method_log_followers()));
	request_reply(req, result);
}

/*
 * daemon.reload: reads gbrd.conf again, as SIGHUP does (the way on Windows,
 * where a daemon outside the service manager gets no signal). Replies once
 * it is done: {config} (null without a file), or invalid_config with why,
 * the config in force unchanged.
 */
void
method_daemon_reload(struct request *req, json_t *params)
{
	static const char *const keys[] = { NULL };
	char	*cause;
	int	 r;

	if (params_only(req, params, keys) != 0)
		return;
	sdnotify_reloading();
	r = loop_reload("daemon.reload", &cause);
	sdnotify_ready();
	if (r != 0) {
		request_error(req, GBR_ERR_INVALID_CONFIG, NULL, "%s",
		    cause != NULL ? cause : "the config could not be read again");
		free(cause);
		return;
	}
	request_reply(req, json_pack("{s:s?}", "config", config_get()->path));
}

/* daemon.shutdown: replies, then stops once the reply is on its way. */
void
method_daemon_shutdown(struct request *req, json_t *params)
{
	static const char *const keys[] = { NULL };
	char	why[64];

	if (params_only(req, params, keys) != 0)
		return;
	snprintf(why, sizeof why, "requested by client pid %ld",
	    (long)conn_pid(request_conn(req)));
	request_reply(req, json_pack("{s:b}", "stopping", 1));
	loop_shutdown(why);
}
