/*
 * gbrctl acp: gbr as an Agent Client Protocol agent. An editor (Zed, a
 * JetBrains IDE, Neovim, Emacs) starts `gbrctl acp` and speaks ACP to it
 * over stdin and stdout, one JSON-RPC 2.0 message per line. Each ACP
 * session is a gbr session in gbrd (the ACP sessionId is gbr's session
 * id), so the same conversation can be open in the editor and in any
 * number of terminals at once: a prompt is session.send, its events come
 * back as session/update notifications, and an approval gbrd asks for
 * becomes a session/request_permission, answered by whoever decides first.
 *
 * No policy lives here. The agent touches files only through gbr's own
 * tools, in gbrd's sandbox: the editor's file-system and terminal methods are
 * never called, even when the editor offers them, so an editor cannot
 * widen what the agent may reach, and unsaved buffers are not seen (only
 * what a prompt embeds, as context the model reads).
 *
 * One poll(2) loop drives the editor's stdin and stdout and gbrd's socket
 * without blocking on one of them; every queue is bounded, and only
 * protocol messages reach stdout (descriptor 1 itself points at stderr
 * while we run, as in gbrctl mcp). This file holds the command, the loop
 * and the editor's side; acp-session.c, acp-update.c and acp-daemon.c the
 * rest (acp-int.h).
 */
#include "gbr-config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp-int.h"
#include "client.h"
#include "ctl.h"
#include "jsonrpc.h"
#include "log.h"
#include "transport.h"
#include "xmalloc.h"

/* Logs a line to stderr (the only place logs may go). */
void __attribute__((format(__printf__, 1, 2)))
acp_log(const char *fmt, ...)
{
	va_list	ap;

	fputs("gbrctl acp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

/* Queues one message for the editor; steals msg. */
void
acp_send(struct acp *a, json_t *msg)
{
	if (!a->out_dead)
		mcp_buf_add_json(&a->out, msg);
	json_decref(msg);
}

/* Answers a request with a result; steals result. */
void
acp_result(struct acp *a, json_t *id, json_t *result)
{
	acp_send(a, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	    "result", result));
}

/* Answers with a JSON-RPC error whose data.kind is kind; id NULL: null. */
void __attribute__((format(__printf__, 5, 6)))
acp_error(struct acp *a, json_t *id, int code, const char *kind,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*text;

	va_start(ap, fmt);
	text = xvasprintf(fmt, ap);
	va_end(ap);
	acp_send(a, json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:s}}}", "jsonrpc",
	    "2.0", "id", id != NULL ? id : json_null(), "error", "code", code,
	    "message", text, "data", "kind", kind));
	free(text);
}

/* Sends the editor a notification; steals params. */
void
acp_notify(struct acp *a, const char *method, json_t *params)
{
	acp_send(a, rpc_notification(method, params));
}

/* Sends the editor a request; steals params. Returns its id. */
long long
acp_request(struct acp *a, const char *method, json_t *params)
{
	long long	id = ++a->next_rid;

	acp_send(a, rpc_request(id, method, params));
	return id;
}

/*
 * initialize: ACP's one stable revision, what we take in a prompt, and
 * no authentication: gbrd holds the provider's keys (a turn without one
 * fails with what to set).
 */
static void
acp_initialize(struct acp *a, json_t *id, json_t *params)
{
	json_t	*pv = json_object_get(params, "protocolVersion");

	if (!json_is_integer(pv) || json_integer_value(pv) < 0 ||
	    json_integer_value(pv) > 65535) {
		acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params",
		    "protocolVersion must be an integer from 0 to 65535");
		return;
	}
	if (json_integer_value(pv) != ACP_PROTOCOL_VERSION)
		acp_log("the editor asked for ACP %lld; speaking %d",
		    (long long)json_integer_value(pv), ACP_PROTOCOL_VERSION);
	a->initialized = 1;
	acp_result(a, id, json_pack("{s:i, s:{s:b, s:{s:b, s:b, s:b}, "
	    "s:{s:b, s:b}}, s:[], s:{s:s, s:s, s:s}}",
	    "protocolVersion", ACP_PROTOCOL_VERSION,
	    "agentCapabilities", "loadSession", 1,
	    "promptCapabilities", "image", 0, "audio", 0, "embeddedContext", 1,
	    "mcpCapabilities", "http", 0, "sse", 0,
	    "authMethods",
	    "agentInfo", "name", "gbr", "title", "gbr", "version",
	    PACKAGE_VERSION));
}

/* Handles one line from the editor. */
static void
acp_client_line(struct acp *a, const char *line, size_t len)
{
	json_error_t	 jerr;
	json_t		*root, *id, *method, *params;

	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
	    &jerr);
	if (root == NULL) {
		acp_error(a, NULL, RPC_PARSE_ERROR, "parse_error",
		    "parse error: %s", jerr.text);
		return;
	}
	if (!json_is_object(root)) {
		acp_error(a, NULL, RPC_INVALID_REQUEST, "invalid_request", "%s",
		    json_is_array(root) ? "batches are not supported" :
		    "a message must be a JSON object");
		goto out;
	}
	id = json_object_get(root, "id");
	method = json_object_get(root, "method");
	params = json_object_get(root, "params");
	if (id != NULL && !json_is_string(id) && !json_is_integer(id) &&
	    !json_is_null(id)) {
		acp_error(a, NULL, RPC_INVALID_REQUEST, "invalid_request",
		    "id must be a string or an integer");
		goto out;
	}
	if (!mcp_streq(json_object_get(root, "jsonrpc"), "2.0")) {
		acp_error(a, id, RPC_INVALID_REQUEST, "invalid_request",
		    "jsonrpc must be \"2.0\"");
		goto out;
	}
	if (rpc_nesting_over(root, RPC_MAX_NESTING)) {
		acp_error(a, id, RPC_INVALID_REQUEST, "invalid_request", "the "
		    "message is nested deeper than %d levels", RPC_MAX_NESTING);
		goto out;
	}
	if (method == NULL) {
		/* A response: to one of our permission requests. */
		if (id == NULL || (json_object_get(root, "result") == NULL &&
		    json_object_get(root, "error") == NULL))
			acp_error(a, id, RPC_INVALID_REQUEST, "invalid_request",
			    "not a request, a notification or a response");
		else
			acp_permission_answer(a, root);
		goto out;
	}
	if (!json_is_string(method) || json_string_length(method) == 0) {
		acp_error(a, id, RPC_INVALID_REQUEST, "invalid_request",
		    "method must be a non-empty string");
		goto out;
	}
	if (params != NULL && !json_is_object(params) && !json_is_null(params)) {
		if (id != NULL)
			acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params",
			    "params must be an object");
		goto out;
	}
	if (id == NULL) {
		/* Notifications are never answered, not even when unknown. */
		if (mcp_streq(method, "session/cancel") && a->initialized)
			acp_session_cancel(a, params);
		goto out;
	}
	if (mcp_streq(method, "initialize"))
		acp_initialize(a, id, params);
	else if (!a->initialized)
		acp_error(a, id, RPC_INVALID_REQUEST, "not_initialized",
		    "the first request must be initialize");
	else if (mcp_streq(method, "authenticate"))
		acp_result(a, id, json_object());	/* nothing to do */
	else if (mcp_streq(method, "session/new"))
		acp_session_new(a, id, params);
	else if (mcp_streq(method, "session/load"))
		acp_session_load(a, id, params);
	else if (mcp_streq(method, "session/prompt"))
		acp_session_prompt(a, id, params);
	else
		acp_error(a, id, RPC_METHOD_NOT_FOUND, "method_not_found",
		    "gbr has no method '%.128s'", json_string_value(method));
out:
	json_decref(root);
}

/* Answers a message over ACP_LINE_MAX (id null: it is never read whole). */
static void
acp_too_large(struct acp *a)
{
	acp_error(a, NULL, RPC_INVALID_REQUEST, "too_large", "a message is "
	    "longer than %d bytes; it is skipped", ACP_LINE_MAX);
}

/* The editor's lines, as mcp_lines_read hands them over. */
static void
acp_client_line_cb(void *arg, const char *line, size_t len)
{
	acp_client_line(arg, line, len);
}

static void
acp_too_large_cb(void *arg)
{
	acp_too_large(arg);
}

/* Reads what the editor sent and handles every complete line. */
static void
acp_client_read(struct acp *a)
{
	mcp_lines_read(&a->in, ACP_LINE_MAX, acp_client_line_cb,
	    acp_too_large_cb, a);
}

/* The loop: until the editor closes stdin or its end of stdout. */
static void
acp_loop(struct acp *a)
{
	struct pollfd	pfd[3];
	int		in_i, out_i, d_i, n, reading;
	short		dev;

	while (!a->in.eof && !a->out_dead) {
		n = 0;
		in_i = out_i = d_i = -1;
		reading = mcp_buf_pending(&a->out) <= ACP_OUT_HIGH;
		if (reading) {
			in_i = n;
			pfd[n].fd = a->in.fd;
			pfd[n++].events = POLLIN;
		}
		if (mcp_buf_pending(&a->out) > 0) {
			out_i = n;
			pfd[n].fd = a->out_fd;
			pfd[n++].events = POLLOUT;
		}
		if (a->cl != NULL) {
			dev = reading ? POLLIN : 0;
			if (mcp_buf_pending(&a->dout) > 0)
				dev |= POLLOUT;
			if (dev != 0) {
				d_i = n;
				pfd[n].fd = a->dfd;
				pfd[n++].events = dev;
			}
		}
		if (n == 0) {
			transport_poll(NULL, 0, 100);
			continue;
		}
		if (transport_poll(pfd, (unsigned)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			acp_log("poll: %s", strerror(errno));
			break;
		}
		if (out_i != -1 && pfd[out_i].revents != 0 &&
		    mcp_buf_flush(&a->out, a->out_fd, transport_stdio_write) != 0) {
			a->out_dead = 1;
			break;
		}
		if (d_i != -1 && (pfd[d_i].revents & POLLOUT) &&
		    mcp_buf_flush(&a->dout, a->dfd, transport_write) != 0) {
			acp_daemon_lost(a, strerror(errno));
			d_i = -1;
		}
		if (d_i != -1 && a->cl != NULL &&
		    (pfd[d_i].revents & (POLLIN | POLLHUP | POLLERR)))
			acp_daemon_read(a);
		if (in_i != -1 && pfd[in_i].revents != 0)
			acp_client_read(a);
		if (mcp_buf_pending(&a->out) > 0 &&
		    mcp_buf_flush(&a->out, a->out_fd, transport_stdio_write) != 0) {
			a->out_dead = 1;
			break;
		}
		if (a->cl != NULL && mcp_buf_pending(&a->dout) > 0 &&
		    mcp_buf_flush(&a->dout, a->dfd, transport_write) != 0)
			acp_daemon_lost(a, strerror(errno));
	}
}

/* Writes what is left for the editor, for at most ACP_FLUSH_MS. */
static void
acp_final_flush(struct acp *a)
{
	struct pollfd	pfd;
	long long	deadline = mcp_now_ms() + ACP_FLUSH_MS;
	int		wait;

	while (!a->out_dead && mcp_buf_pending(&a->out) > 0) {
		if ((wait = (int)(deadline - mcp_now_ms())) <= 0)
			break;
		pfd.fd = a->out_fd;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		if (transport_poll(&pfd, 1, wait) <= 0)
			break;
		if (mcp_buf_flush(&a->out, a->out_fd, transport_stdio_write) != 0)
			break;
	}
}

static const char acp_help[] =
"usage: gbrctl acp [--workspace DIR] [--env E] [--verbose]\n"
"\n"
"gbr as an Agent Client Protocol (ACP 1) agent on stdin and stdout, for an\n"
"editor: Zed, JetBrains IDEs, Neovim (CodeCompanion, avante.nvim), Emacs\n"
"(agent-shell). Each editor thread is a gbr session in gbrd (started if\n"
"nobody answers): its sessionId is gbr's session id, so the same session can\n"
"also be followed and answered from terminals (gbr attach ID, gbrctl approve).\n"
"\n"
"  --workspace DIR  the workspace of new sessions (default: the editor's cwd)\n"
"  --env E          the environment profile of new sessions\n"
"  --verbose        log each request to stderr\n"
"\n"
"The agent reads and writes files only through gbr's tools, in gbr's sandbox;\n"
"it never uses the editor's file or terminal methods, so unsaved buffers are\n"
"not seen (save first, or embed the text in the prompt). Approvals gbrd asks\n"
"for appear as permission requests (allow once, allow for this session,\n"
"reject); the first answer from any client wins.\n"
"\n"
"Zed, in settings.json:\n"
"  \"agent_servers\": { \"gbr\": { \"type\": \"custom\", \"command\": \"gbrctl\",\n"
"                                \"args\": [\"acp\"] } }\n"
"See README.md (Editors) for JetBrains, Neovim and Emacs.\n";

/* Prints the usage of gbrctl acp. */
static int
acp_usage(void)
{
	fprintf(stderr, "usage: gbrctl acp [--workspace DIR] [--env E] "
	    "[--verbose]\n");
	return CTL_EXIT_USAGE;
}

/* gbrctl acp [--workspace DIR] [--env E] [--verbose] */
int
ctl_acp(struct ctl *ctl, int argc, char **argv)
{
	struct acp	 a;
	struct acp_call	*c;
	struct acp_sess	*s;
	struct acp_perm	*p;
	const char	*ws = NULL;
	unsigned char	 r[6];
	char		*cause;
	int		 i, unreachable, rc = CTL_EXIT_OK;
	FILE		*f;

	memset(&a, 0, sizeof a);
	a.ctl = ctl;
	a.dfd = a.in.fd = a.out_fd = -1;
	TAILQ_INIT(&a.sessions);
	TAILQ_INIT(&a.calls);
	TAILQ_INIT(&a.perms);
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(acp_help, stdout);
			return CTL_EXIT_OK;
		}
		if (strcmp(argv[i], "--verbose") == 0 ||
		    strcmp(argv[i], "-v") == 0) {
			a.verbose = 1;
			continue;
		}
		if (i + 1 >= argc)
			return acp_usage();
		if (strcmp(argv[i], "--workspace") == 0)
			ws = argv[++i];
		else if (strcmp(argv[i], "--env") == 0)
			a.env = argv[++i];
		else
			return acp_usage();
	}
	if (ws != NULL && (a.workspace = realpath(ws, NULL)) == NULL) {
		fprintf(stderr, "gbrctl acp: %s: %s\n", ws, strerror(errno));
		return CTL_EXIT_USAGE;
	}
	/* A unique prefix for our request_ids: resends never meet another's. */
	if ((f = fopen("/dev/urandom", "re")) == NULL ||
	    fread(r, 1, sizeof r, f) != sizeof r) {
		fprintf(stderr, "gbrctl acp: /dev/urandom: %s\n", strerror(errno));
		if (f != NULL)
			fclose(f);
		free(a.workspace);
		return CTL_EXIT_ERROR;
	}
	fclose(f);
	for (i = 0; i < (int)sizeof r; i++)
		snprintf(a.rid_prefix + 2 * i, 3, "%02x", r[i]);
	signal(SIGPIPE, SIG_IGN);
	if (transport_stdio_take(&a.in.fd, &a.out_fd, &cause) != 0) {
		acp_log("%s", cause);
		free(cause);
		free(a.workspace);
		return CTL_EXIT_ERROR;
	}
	if (acp_connect(&a, &cause, &unreachable) != 0) {
		acp_log("%s", cause);
		free(cause);
		rc = unreachable ? CTL_EXIT_UNREACHABLE : CTL_EXIT_ERROR;
		goto out;
	}
	acp_loop(&a);
	acp_final_flush(&a);
out:
	while ((c = TAILQ_FIRST(&a.calls)) != NULL)
		acp_call_free(&a, c);
	while ((p = TAILQ_FIRST(&a.perms)) != NULL)
		acp_perm_free(&a, p);
	while ((s = TAILQ_FIRST(&a.sessions)) != NULL)
		acp_sess_free(&a, s);
	client_free(a.cl);
	frame_free(a.dframe);
	mcp_buf_release(&a.dout);
	mcp_buf_release(&a.out);
	transport_stdio_release(a.in.fd, a.out_fd);
	free(a.in.buf);
	free(a.workspace);
	return rc;
}
