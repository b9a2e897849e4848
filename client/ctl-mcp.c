/*
 * gbrctl mcp: the Model Context Protocol bridge. An MCP client (Claude
 * Desktop or Code, an editor) starts `gbrctl mcp` and speaks MCP to it over
 * stdin and stdout, one JSON-RPC 2.0 message per line. The bridge turns
 * tools/list into gbrd's tool.list and tools/call into tool.call on one
 * session, so an MCP client gets what the agent gets: the same sandbox, the
 * same human approvals, the same disk log. No policy lives here: gbrd
 * decides; the bridge only translates, and says so when it cannot.
 *
 * One poll(2) loop (transport_poll) drives four directions (the client's stdin and stdout,
 * gbrd's socket both ways) without ever blocking on one of them, so many
 * calls can be in flight: a call that waits for a human's approval holds
 * up nothing else. Every queue is bounded: at most MCP_CALLS_MAX calls
 * wait on gbrd, a line from the client is at most MCP_LINE_MAX bytes, and
 * when the client stops reading its replies the bridge stops reading both
 * the client and gbrd (gbrd then holds our replies back, it does not drop
 * them). Only protocol messages reach the client's stdout: while the bridge
 * runs, descriptor 1 itself points at stderr and descriptor 0 at /dev/null,
 * so nothing else (a log line, a gbrd started on demand) can write there.
 * The one wait that blocks the loop is connecting to gbrd (starting it if
 * needed): at start, and again after it went away.
 *
 * A call that waits for a human survives gbrd going away: the approval is
 * durable in gbrd's log, so the bridge connects again and sends the same
 * tool.call (same request_id), which gbrd ties to the pending approval.
 * notifications/cancelled drops the reply and asks gbrd to give up on the
 * call (tool.cancel): a pending approval is withdrawn, a running command
 * stopped; a call that already finished stays done and recorded. Every
 * approval the bridge waits for is also withdrawn by gbrd when our
 * connection closes, which happens when the client goes away (stdin ends)
 * and we exit.
 *
 * This file holds the command, the loop and the client's side: its lines,
 * initialize, the queues and the replies. mcp-bridge.c turns the client's
 * requests into gbrd's calls and back, mcp-daemon.c holds the connection
 * to gbrd (mcp-int.h).
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "frame.h"
#include "jsonrpc.h"
#include "log.h"
#include "mcp-int.h"
#include "transport.h"
#include "xmalloc.h"

/* The MCP revisions spoken here, the latest first. */
static const char *const mcp_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL
};
/* The first revision with structuredContent in tool results. */
#define MCP_STRUCTURED_SINCE	"2025-06-18"

/* Monotonic milliseconds. */
long long
mcp_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Logs a line to stderr (the only place logs may go). */
void __attribute__((format(__printf__, 1, 2)))
mcp_log(const char *fmt, ...)
{
	va_list	ap;

	fputs("gbrctl mcp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

/* Appends bytes to a queue. */
static void
mcp_buf_add(struct mcp_buf *b, const char *data, size_t n)
{
	if (b->off > 0 && (b->off == b->len || b->off > b->cap / 2)) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	if (b->len + n > b->cap) {
		while (b->len + n > b->cap)
			b->cap = b->cap == 0 ? 65536 : b->cap * 2;
		b->data = xreallocarray(b->data, 1, b->cap);
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

/* jansson's output callback: appends to a queue. */
static int
mcp_buf_dump_cb(const char *data, size_t n, void *arg)
{
	mcp_buf_add(arg, data, n);
	return 0;
}

/*
 * Appends a message as one line, encoded in one pass straight into the
 * queue (JSON_COMPACT never writes a raw newline: strings are escaped).
 * Returns its length.
 */
size_t
mcp_buf_add_json(struct mcp_buf *b, const json_t *msg)
{
	size_t	before = b->len - b->off;

	if (json_dump_callback(msg, mcp_buf_dump_cb, b, JSON_COMPACT) != 0)
		fatalx("a message cannot be encoded");
	mcp_buf_add(b, "\n", 1);
	return b->len - b->off - before;
}

/* Bytes still to be written. */
size_t
mcp_buf_pending(const struct mcp_buf *b)
{
	return b->len - b->off;
}

/* Empties a queue and frees its memory. */
void
mcp_buf_release(struct mcp_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

/*
 * Writes what the queue holds without blocking. Returns 0 (even if some is
 * left), or -1 with errno when the other end is gone.
 */
int
mcp_buf_flush(struct mcp_buf *b, int fd,
    ssize_t (*put)(int, const void *, size_t))
{
	ssize_t	n;

	while (b->off < b->len) {
		n = put(fd, b->data + b->off, b->len - b->off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -1;
		}
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	return 0;
}

/* Compares a JSON string with a C string, NUL bytes included. */
int
mcp_streq(const json_t *v, const char *s)
{
	return json_is_string(v) && json_string_length(v) == strlen(s) &&
	    memcmp(json_string_value(v), s, strlen(s)) == 0;
}

/*
 * Copies a string for a person to read: control characters (C0, DEL, C1)
 * and the bidirectional overrides and isolates become '?', so a path
 * cannot make a progress message or a log line lie. Returns a new string.
 */
char *
mcp_shown(const char *s, size_t max)
{
	const unsigned char	*p = (const unsigned char *)s;
	char			*out;
	size_t			 i = 0, o = 0, len = strlen(s);

	if (len > max)
		len = max;
	out = xmalloc(len + 1);
	while (i < len) {
		if (p[i] < 0x20 || p[i] == 0x7f) {
			out[o++] = '?';
			i++;
		} else if (p[i] == 0xc2 && i + 1 < len && p[i + 1] >= 0x80 &&
		    p[i + 1] < 0xa0) {
			out[o++] = '?';	/* C1 controls */
			i += 2;
		} else if (p[i] == 0xe2 && i + 2 < len && ((p[i + 1] == 0x80 &&
		    ((p[i + 2] >= 0x8e && p[i + 2] <= 0x8f) ||
		    (p[i + 2] >= 0xaa && p[i + 2] <= 0xae))) ||
		    (p[i + 1] == 0x81 && p[i + 2] >= 0xa6 && p[i + 2] <= 0xa9))) {
			out[o++] = '?';	/* U+200E/F, U+202A-E, U+2066-9 */
			i += 3;
		} else if (p[i] == 0xd8 && i + 1 < len && p[i + 1] == 0x9c) {
			out[o++] = '?';	/* U+061C */
			i += 2;
		} else
			out[o++] = (char)p[i++];
	}
	out[o] = '\0';
	return out;
}

/* Queues one message for the client; steals msg. */
void
mcp_send(struct mcp *m, json_t *msg)
{
	if (!m->out_dead)
		mcp_buf_add_json(&m->out, msg);
	json_decref(msg);
}

/* Answers a request with a result; steals result. */
void
mcp_result(struct mcp *m, json_t *id, json_t *result)
{
	json_t	*msg = json_object();

	json_object_set_new(msg, "jsonrpc", json_string("2.0"));
	json_object_set(msg, "id", id);
	json_object_set_new(msg, "result", result);
	mcp_send(m, msg);
}

/*
 * Answers with a JSON-RPC error: code, a stable kind in data.kind, and data
 * (stolen, may be NULL). id may be NULL for id: null.
 */
void __attribute__((format(__printf__, 6, 7)))
mcp_error(struct mcp *m, json_t *id, int code, const char *kind, json_t *data,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*text;
	json_t	*msg;

	va_start(ap, fmt);
	text = xvasprintf(fmt, ap);
	va_end(ap);
	if (!json_is_object(data)) {
		json_decref(data);
		data = json_object();
	}
	json_object_set_new(data, "kind", json_string(kind));
	msg = json_pack("{s:s, s:O, s:{s:i, s:s, s:o}}", "jsonrpc", "2.0",
	    "id", id != NULL ? id : json_null(), "error", "code", code,
	    "message", text, "data", data);
	free(text);
	mcp_send(m, msg);
}

/*
 * Answers a tools/call with a failed tool result (isError): the model sees
 * "<kind>: <message>", and structuredContent carries the kind and data.
 * Steals data (may be NULL).
 */
void
mcp_tool_error(struct mcp *m, json_t *id, const char *kind, const char *message,
    json_t *data)
{
	json_t	*res, *err;
	char	*text;

	text = xasprintf("%s: %s", kind, message);
	res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
	    "text", text, "isError", 1);
	free(text);
	if (m->structured) {
		err = json_pack("{s:s, s:s}", "kind", kind, "message", message);
		if (data != NULL && !json_is_null(data))
			json_object_set(err, "data", data);
		json_object_set_new(res, "structuredContent", json_pack("{s:o}",
		    "error", err));
	}
	json_decref(data);
	mcp_result(m, id, res);
}

/* initialize: version negotiation, capabilities, who we are. */
static void
mcp_initialize(struct mcp *m, json_t *id, json_t *params)
{
	json_t		*pv = json_object_get(params, "protocolVersion");
	json_t		*info = json_object_get(params, "clientInfo");
	const char	*cname, *cver;
	char		*instructions, *where;
	size_t		 i;

	if (m->initialized) {
		mcp_error(m, id, RPC_INVALID_REQUEST, "invalid_request", NULL,
		    "initialize was already done on this connection");
		return;
	}
	if (!json_is_string(pv)) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "protocolVersion"),
		    "protocolVersion must be a string");
		return;
	}
	/* The client's revision if we speak it, else our latest. */
	m->version = mcp_versions[0];
	for (i = 0; mcp_versions[i] != NULL; i++) {
		if (mcp_streq(pv, mcp_versions[i]))
			m->version = mcp_versions[i];
	}
	m->structured = strcmp(m->version, MCP_STRUCTURED_SINCE) >= 0;
	m->initialized = 1;
	cname = json_string_value(json_object_get(info, "name"));
	cver = json_string_value(json_object_get(info, "version"));
	if (m->verbose || !mcp_streq(pv, m->version)) {
		where = mcp_shown(json_string_value(pv), 64);
		mcp_log("client %s %s asked for revision %s; speaking %s",
		    cname != NULL ? cname : "?", cver != NULL ? cver : "?",
		    where, m->version);
		free(where);
	}
	where = m->workspace != NULL ? xasprintf("the workspace %s",
	    m->workspace) : xasprintf("the workspace of session %s",
	    m->session);
	instructions = xasprintf("These tools run in gbr's sandbox on %s "
	    "(gbr session %s); paths are relative to the workspace. Writes to "
	    "protected files and risky commands wait for a human's approval "
	    "(given with `gbrctl approve ID` or in the gbr REPL); a denial or a "
	    "refusal by the sandbox comes back as an error result whose text "
	    "starts with its kind, e.g. `path_traversal:`.", where, m->session);
	free(where);
	mcp_result(m, id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, "
	    "s:s}", "protocolVersion", m->version,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "gbr", "title", "gbr: sandboxed tools with "
	    "human approvals", "version", PACKAGE_VERSION,
	    "instructions", instructions));
	free(instructions);
}

/* Handles one line from the client. */
static void
mcp_client_line(struct mcp *m, const char *line, size_t len)
{
	json_error_t	 jerr;
	json_t		*root, *id, *method, *params, *v;

	/* NUL bytes are let through the parser to be refused with a reason. */
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
	    JSON_ALLOW_NUL, &jerr);
	if (root == NULL) {
		mcp_error(m, NULL, RPC_PARSE_ERROR, "parse_error", json_pack(
		    "{s:i}", "position", jerr.position), "parse error: %s",
		    jerr.text);
		return;
	}
	if (!json_is_object(root)) {
		mcp_error(m, NULL, RPC_INVALID_REQUEST, "invalid_request", NULL,
		    "%s", json_is_array(root) ? "batches are not supported" :
		    "a message must be a JSON object");
		goto out;
	}
	id = json_object_get(root, "id");
	method = json_object_get(root, "method");
	params = json_object_get(root, "params");
	if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
		mcp_error(m, NULL, RPC_INVALID_REQUEST, "invalid_request", NULL,
		    "id must be a string or an integer");
		goto out;
	}
	v = json_object_get(root, "jsonrpc");
	if (!mcp_streq(v, "2.0")) {
		mcp_error(m, id, RPC_INVALID_REQUEST, "invalid_request", NULL,
		    "jsonrpc must be \"2.0\"");
		goto out;
	}
	/* gbrd refuses deeper requests, and without an id to answer. */
	if (rpc_nesting_over(root, RPC_MAX_NESTING)) {
		mcp_error(m, id, RPC_INVALID_REQUEST, "invalid_request", json_pack(
		    "{s:i}", "max_nesting", RPC_MAX_NESTING), "the message is "
		    "nested deeper than %d levels", RPC_MAX_NESTING);
		goto out;
	}
	if (method == NULL) {
		/* A response: we never send requests, so there is nothing to match. */
		if (id == NULL || (json_object_get(root, "result") == NULL &&
		    json_object_get(root, "error") == NULL))
			mcp_error(m, id, RPC_INVALID_REQUEST, "invalid_request",
			    NULL, "not a request, a notification or a response");
		goto out;
	}
	if (!json_is_string(method) || json_string_length(method) == 0) {
		mcp_error(m, id, RPC_INVALID_REQUEST, "invalid_request", NULL,
		    "method must be a non-empty string");
		goto out;
	}
	if (id == NULL) {
		if (mcp_streq(method, "notifications/cancelled"))
			mcp_cancelled(m, params);
		/* notifications/initialized and the others need nothing. */
		goto out;
	}
	if (params != NULL && !json_is_object(params)) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params", json_pack(
		    "{s:s}", "field", "params"), "params must be an object");
		goto out;
	}
	if (mcp_streq(method, "initialize"))
		mcp_initialize(m, id, params);
	else if (mcp_streq(method, "ping"))
		mcp_result(m, id, json_object());
	else if (!m->initialized)
		mcp_error(m, id, RPC_INVALID_REQUEST, "not_initialized", NULL,
		    "the first request must be initialize");
	else if (mcp_streq(method, "tools/list"))
		mcp_tools_list(m, id, params);
	else if (mcp_streq(method, "tools/call"))
		mcp_tools_call(m, id, params);
	else
		mcp_error(m, id, RPC_METHOD_NOT_FOUND, "method_not_found",
		    json_pack("{s:s%}", "method", json_string_value(method),
		    json_string_length(method) > 128 ? (size_t)128 :
		    json_string_length(method)), "this server has no method "
		    "'%.128s' (it offers tools only)", json_string_value(method));
out:
	json_decref(root);
}

/* Answers a message over MCP_LINE_MAX (id null: it is never read whole). */
static void
mcp_too_large(struct mcp *m)
{
	mcp_error(m, NULL, RPC_INVALID_REQUEST, "too_large", json_pack("{s:i}",
	    "max_bytes", MCP_LINE_MAX), "a message is longer than %d bytes; it "
	    "is skipped", MCP_LINE_MAX);
	mcp_log("skipping a message over %d bytes", MCP_LINE_MAX);
}

/*
 * Reads what is there (one read: after POLLIN it never blocks) and hands
 * over every complete line. A line over max gets too_large and is skipped
 * up to its end; a last line without its newline still counts at the end.
 */
void
mcp_lines_read(struct mcp_lines *in, size_t max, mcp_line_fn line,
    mcp_too_large_fn too_large, void *arg)
{
	ssize_t	 n;
	size_t	 start, i, end;

	if (in->cap - in->len < MCP_READ_CHUNK) {
		in->cap = in->len + MCP_READ_CHUNK;
		in->buf = xreallocarray(in->buf, 1, in->cap);
	}
	n = transport_stdio_read(in->fd, in->buf + in->len, MCP_READ_CHUNK);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		mcp_log("reading stdin: %s", strerror(errno));
		in->eof = 1;
		return;
	}
	if (n == 0) {
		in->eof = 1;
		if (in->len > 0 && !in->skip)
			line(arg, in->buf, in->len);
		in->len = 0;
		return;
	}
	i = in->len;
	in->len += (size_t)n;
	start = 0;
	for (; i < in->len; i++) {
		if (in->buf[i] != '\n')
			continue;
		if (in->skip)
			in->skip = 0;
		else {
			end = i;
			if (end > start && in->buf[end - 1] == '\r')
				end--;
			if (end - start > max)
				too_large(arg);
			else if (end > start)
				line(arg, in->buf + start, end - start);
		}
		start = i + 1;
	}
	if (in->skip) {
		in->len = 0;	/* still inside the over-long line */
		return;
	}
	memmove(in->buf, in->buf + start, in->len - start);
	in->len -= start;
	if (in->len > max) {
		too_large(arg);
		in->skip = 1;
		in->len = 0;
	}
	/* Give back a buffer a long message grew. */
	if (in->cap > 4 * MCP_READ_CHUNK && in->len < MCP_READ_CHUNK) {
		in->cap = 2 * MCP_READ_CHUNK;
		in->buf = xreallocarray(in->buf, 1, in->cap);
	}
}

/* The client's lines, as mcp_lines_read hands them over. */
static void
mcp_client_line_cb(void *arg, const char *line, size_t len)
{
	mcp_client_line(arg, line, len);
}

static void
mcp_too_large_cb(void *arg)
{
	mcp_too_large(arg);
}

/* Reads what the client sent and handles every complete line. */
static void
mcp_client_read(struct mcp *m)
{
	mcp_lines_read(&m->in, MCP_LINE_MAX, mcp_client_line_cb,
	    mcp_too_large_cb, m);
}

/*
 * Moves the client's stdin and stdout out of the way (transport_stdio_take):
 * the protocol uses private copies, the process's own stdin reads nothing
 * and its stdout is stderr, so whatever else writes to "stdout" (a gbrd
 * started on demand, a stray printf) cannot corrupt the stream.
 */
static int
mcp_take_stdio(struct mcp *m)
{
	char	*cause;

	if (transport_stdio_take(&m->in.fd, &m->out_fd, &cause) != 0) {
		mcp_log("%s", cause);
		free(cause);
		return -1;
	}
	return 0;
}

/* Writes what is left for the client, for at most MCP_FLUSH_MS. */
static void
mcp_final_flush(struct mcp *m)
{
	struct pollfd	pfd;
	long long	deadline = mcp_now_ms() + MCP_FLUSH_MS;
	int		wait;

	while (!m->out_dead && mcp_buf_pending(&m->out) > 0) {
		if ((wait = (int)(deadline - mcp_now_ms())) <= 0)
			break;
		pfd.fd = m->out_fd;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		if (transport_poll(&pfd, 1, wait) <= 0)
			break;
		if (mcp_buf_flush(&m->out, m->out_fd, transport_stdio_write) != 0)
			break;
	}
}

/* The loop: until the client closes stdin or its end of stdout. */
static void
mcp_loop(struct mcp *m)
{
	struct pollfd	pfd[3];
	int		timeout, in_i, out_i, d_i, n, reading;
	short		dev;

	while (!m->in.eof && !m->out_dead) {
		timeout = mcp_progress_tick(m);
		n = 0;
		in_i = out_i = d_i = -1;
		/* A client that does not read its replies is not read either. */
		reading = mcp_buf_pending(&m->out) <= MCP_OUT_HIGH;
		if (reading) {
			in_i = n;
			pfd[n].fd = m->in.fd;
			pfd[n++].events = POLLIN;
		}
		if (mcp_buf_pending(&m->out) > 0) {
			out_i = n;
			pfd[n].fd = m->out_fd;
			pfd[n++].events = POLLOUT;
		}
		if (m->cl != NULL) {
			dev = reading ? POLLIN : 0;
			if (mcp_buf_pending(&m->dout) > 0)
				dev |= POLLOUT;
			if (dev != 0) {
				d_i = n;
				pfd[n].fd = m->dfd;
				pfd[n++].events = dev;
			}
		}
		if (n == 0) {
			/* Only the client's stdout is left to drain, and it is full. */
			transport_poll(NULL, 0, timeout < 0 ? 100 : timeout);
			continue;
		}
		if (transport_poll(pfd, (unsigned)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			mcp_log("poll: %s", strerror(errno));
			break;
		}
		if (out_i != -1 && pfd[out_i].revents != 0 &&
		    mcp_buf_flush(&m->out, m->out_fd, transport_stdio_write) != 0) {
			if (errno != EPIPE)
				mcp_log("writing stdout: %s", strerror(errno));
			m->out_dead = 1;
			break;
		}
		if (d_i != -1 && (pfd[d_i].revents & POLLOUT) &&
		    mcp_buf_flush(&m->dout, m->dfd, transport_write) != 0) {
			mcp_daemon_lost(m, strerror(errno));
			d_i = -1;
		}
		if (d_i != -1 && m->cl != NULL &&
		    (pfd[d_i].revents & (POLLIN | POLLHUP | POLLERR)))
			mcp_daemon_read(m);
		if (in_i != -1 && pfd[in_i].revents != 0)
			mcp_client_read(m);
		/* Answers go out at once when the pipe has room. */
		if (mcp_buf_pending(&m->out) > 0 &&
		    mcp_buf_flush(&m->out, m->out_fd, transport_stdio_write) != 0) {
			m->out_dead = 1;
			break;
		}
		if (m->cl != NULL && mcp_buf_pending(&m->dout) > 0 &&
		    mcp_buf_flush(&m->dout, m->dfd, transport_write) != 0)
			mcp_daemon_lost(m, strerror(errno));
	}
}

/* Prints the usage of gbrctl mcp. */
static int
mcp_usage(void)
{
	fprintf(stderr, "usage: gbrctl mcp [--session S | --workspace DIR] "
	    "[--env E] [--verbose]\n");
	return CTL_EXIT_USAGE;
}

/* gbrctl mcp [--session S | --workspace DIR] [--env E] [--verbose] */
int
ctl_mcp(struct ctl *ctl, int argc, char **argv)
{
	struct mcp	 m;
	struct mcp_call	*c;
	const char	*ws = ".";
	unsigned char	 r[6];
	char		*cause;
	int		 i, unreachable, rc = CTL_EXIT_OK, have_ws = 0;
	FILE		*f;

	memset(&m, 0, sizeof m);
	m.ctl = ctl;
	m.dfd = m.in.fd = m.out_fd = -1;
	TAILQ_INIT(&m.calls);
	TAILQ_INIT(&m.held);
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: gbrctl mcp [--session S | --workspace DIR] "
			    "[--env E] [--verbose]\n\nAn MCP server on stdin and "
			    "stdout: gbr's tools, run in a gbr session (its sandbox,\n"
			    "approvals and log). Register it in an MCP client as "
			    "the command \"gbrctl\"\nwith the arguments [\"mcp\", "
			    "\"--workspace\", \"/path/to/project\"].\n");
			return CTL_EXIT_OK;
		}
		if (strcmp(argv[i], "--verbose") == 0 ||
		    strcmp(argv[i], "-v") == 0) {
			m.verbose = 1;
			continue;
		}
		if (i + 1 >= argc)
			return mcp_usage();
		if (strcmp(argv[i], "--session") == 0)
			m.session_arg = argv[++i];
		else if (strcmp(argv[i], "--workspace") == 0) {
			ws = argv[++i];
			have_ws = 1;
		} else if (strcmp(argv[i], "--env") == 0)
			m.env = argv[++i];
		else
			return mcp_usage();
	}
	if (m.session_arg != NULL && have_ws) {
		fprintf(stderr, "gbrctl mcp: --session and --workspace do not "
		    "go together\n");
		return CTL_EXIT_USAGE;
	}
	if (m.session_arg == NULL &&
	    (m.workspace = realpath(ws, NULL)) == NULL) {
		fprintf(stderr, "gbrctl mcp: %s: %s\n", ws, strerror(errno));
		return CTL_EXIT_USAGE;
	}
	/* A unique prefix for our request_ids: resends never meet another's. */
	if ((f = fopen("/dev/urandom", "re")) == NULL ||
	    fread(r, 1, sizeof r, f) != sizeof r) {
		fprintf(stderr, "gbrctl mcp: /dev/urandom: %s\n", strerror(errno));
		if (f != NULL)
			fclose(f);
		free(m.workspace);
		return CTL_EXIT_ERROR;
	}
	fclose(f);
	for (i = 0; i < (int)sizeof r; i++)
		snprintf(m.rid_prefix + 2 * i, 3, "%02x", r[i]);
	signal(SIGPIPE, SIG_IGN);
	if (mcp_take_stdio(&m) != 0) {
		free(m.workspace);
		return CTL_EXIT_ERROR;
	}
	if (mcp_connect(&m, &cause, &unreachable) != 0) {
		mcp_log("%s", cause);
		free(cause);
		rc = unreachable ? CTL_EXIT_UNREACHABLE : CTL_EXIT_ERROR;
		goto out;
	}
	if (m.verbose)
		mcp_log("serving session %s over stdio", m.session);
	mcp_loop(&m);
	mcp_final_flush(&m);
out:
	/* Closing gbrd's connection withdraws the approvals we waited on. */
	while ((c = TAILQ_FIRST(&m.calls)) != NULL)
		mcp_call_free(&m, c);
	mcp_release_held(&m, 0);
	client_free(m.cl);
	frame_free(m.dframe);
	mcp_buf_release(&m.dout);
	mcp_buf_release(&m.out);
	transport_stdio_release(m.in.fd, m.out_fd);
	free(m.in.buf);
	free(m.workspace);
	free(m.session);
	return rc;
}

