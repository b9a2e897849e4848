/*
 * gbrctl mcp: the Model Context Protocol bridge. An MCP client (Claude
 * Desktop or Code, an editor) starts `gbrctl mcp` and speaks MCP to it over
 * stdin and stdout, one JSON-RPC 2.0 message per line. The bridge turns
 * tools/list into gbrd's tool.list and tools/call into tool.call on one
 * session, so an MCP client gets what the agent gets: the same sandbox, the
 * same human approvals, the same disk log. No policy lives here: gbrd
 * decides; the bridge only translates, and says so when it cannot.
 *
 * One poll(2) loop drives four directions (the client's stdin and stdout,
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
 */
#include "gbr-config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include "xmalloc.h"

#define MCP_LINE_MAX		(8 * 1024 * 1024)	/* one message from the client */
#define MCP_DAEMON_LINE_MAX	(64 * 1024 * 1024)	/* one message from gbrd */
#define MCP_CALLS_MAX		256		/* requests waiting on gbrd */
#define MCP_DAEMON_QUEUE_MAX	(16 * 1024 * 1024)	/* unsent bytes to gbrd */
#define MCP_OUT_HIGH		(8 * 1024 * 1024)	/* stop reading above this */
#define MCP_READ_CHUNK		65536
#define MCP_PROGRESS_MS		2000		/* between progress notifications */
#define MCP_FLUSH_MS		2000		/* to flush replies at exit */
#define MCP_CALL_TIMEOUT_MS	30000		/* start-up calls to gbrd */
#define MCP_FIRST_DID		1000000		/* our ids on gbrd's connection */
#define MCP_RECONNECT_TRIES	6		/* over about 3 s */

/* The MCP revisions spoken here, the latest first. */
static const char *const mcp_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL
};
/* The first revision with structuredContent in tool results. */
#define MCP_STRUCTURED_SINCE	"2025-06-18"

/* A byte queue: data[off..len) is still to be written. */
struct mcp_buf {
	char	*data;
	size_t	 len;
	size_t	 off;
	size_t	 cap;
};

enum mcp_call_kind {
	MCP_CALL_TOOL = 0,	/* tools/call -> tool.call */
	MCP_CALL_LIST,		/* tools/list -> tool.list */
	MCP_CALL_SESSION,	/* our own session.create after a close */
	MCP_CALL_CANCEL,	/* notifications/cancelled -> tool.cancel */
};

/* A request sent to gbrd whose reply has not come yet. */
struct mcp_call {
	TAILQ_ENTRY(mcp_call)	 entry;
	enum mcp_call_kind	 kind;
	long long		 did;		/* gbrd's request id */
	char			*method;	/* gbrd's method */
	json_t			*params;	/* and its params, to send again */
	json_t			*id;		/* the client's id; NULL for ours */
	json_t			*token;		/* _meta.progressToken, or NULL */
	char			*tool;
	char			*path;		/* args.path, to match an approval */
	char			 rid[48];	/* request_id given to gbrd */
	char			*approval;	/* the approval it waits on */
	char			*waiting;	/* what progress says meanwhile */
	long long		 started_ms;
	long long		 progress_ms;	/* when the next progress is due */
	long long		 progress;	/* the last progress value sent */
	int			 cancelled;	/* never answer it */
	int			 described;	/* waiting says what is approved */
};
TAILQ_HEAD(mcp_calls, mcp_call);

/* A tools/call held while the bridge moves to another session. */
struct mcp_held {
	TAILQ_ENTRY(mcp_held)	 entry;
	json_t			*id;
	json_t			*params;
};
TAILQ_HEAD(mcp_helds, mcp_held);

/* The bridge. */
struct mcp {
	struct ctl	*ctl;
	const char	*session_arg;	/* --session */
	char		*workspace;	/* --workspace, as a real path */
	const char	*env;		/* --env */
	char		*session;	/* the session's id */
	int		 refreshing;	/* a session.create is on its way */
	int		 verbose;

	struct client	*cl;		/* NULL while gbrd is not connected */
	int		 dfd;
	struct frame	*dframe;
	size_t		 dmax_line;	/* gbrd's max_line_bytes */
	long long	 next_did;
	struct mcp_buf	 dout;		/* to gbrd */

	int		 in_fd;		/* the client's stdin, moved */
	int		 out_fd;	/* the client's stdout, moved */
	int		 out_flags;	/* to restore at exit, or -1 */
	char		*in_buf;
	size_t		 in_len;
	size_t		 in_cap;
	int		 in_skip;	/* dropping the rest of an over-long line */
	int		 in_eof;
	int		 out_dead;	/* the client closed its end */
	struct mcp_buf	 out;

	int		 initialized;	/* initialize was answered */
	const char	*version;	/* the negotiated revision */
	int		 structured;	/* it has structuredContent */

	struct mcp_calls calls;
	unsigned	 ncalls;
	struct mcp_helds held;
	unsigned	 nheld;
	char		 rid_prefix[24];
	unsigned long long rid_next;
};

static void	mcp_daemon_lost(struct mcp *, const char *);
static void	mcp_tools_call(struct mcp *, json_t *, json_t *);

/* Monotonic milliseconds. */
static long long
mcp_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Logs a line to stderr (the only place logs may go). */
static void __attribute__((format(printf, 1, 2)))
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
static size_t
mcp_buf_add_json(struct mcp_buf *b, const json_t *msg)
{
	size_t	before = b->len - b->off;

	if (json_dump_callback(msg, mcp_buf_dump_cb, b, JSON_COMPACT) != 0)
		fatalx("a message cannot be encoded");
	mcp_buf_add(b, "\n", 1);
	return b->len - b->off - before;
}

/* Bytes still to be written. */
static size_t
mcp_buf_pending(const struct mcp_buf *b)
{
	return b->len - b->off;
}

/* Empties a queue and frees its memory. */
static void
mcp_buf_release(struct mcp_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

/*
 * Writes what the queue holds without blocking. Returns 0 (even if some is
 * left), or -1 with errno when the other end is gone.
 */
static int
mcp_buf_flush(struct mcp_buf *b, int fd)
{
	ssize_t	n;

	while (b->off < b->len) {
		n = write(fd, b->data + b->off, b->len - b->off);
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
static int
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
static char *
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
static void
mcp_send(struct mcp *m, json_t *msg)
{
	if (!m->out_dead)
		mcp_buf_add_json(&m->out, msg);
	json_decref(msg);
}

/* Answers a request with a result; steals result. */
static void
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
static void __attribute__((format(printf, 6, 7)))
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
static void
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

/* Frees a call record. */
static void
mcp_call_free(struct mcp *m, struct mcp_call *c)
{
	TAILQ_REMOVE(&m->calls, c, entry);
	m->ncalls--;
	free(c->method);
	json_decref(c->params);
	json_decref(c->id);
	json_decref(c->token);
	free(c->tool);
	free(c->path);
	free(c->approval);
	free(c->waiting);
	free(c);
}

/* Sends the client a progress notification for a call. */
static void
mcp_progress(struct mcp *m, struct mcp_call *c, long long now)
{
	json_t	*p;
	char	*msg;

	if (c->token == NULL || c->cancelled)
		return;
	c->progress_ms = now + MCP_PROGRESS_MS;
	/* Optional, so never worth growing a queue the client does not read. */
	if (mcp_buf_pending(&m->out) > MCP_OUT_HIGH)
		return;
	if (c->waiting != NULL)
		msg = xstrdup(c->waiting);
	else
		msg = xasprintf("running %s (%lld s)", c->tool,
		    (now - c->started_ms) / 1000);
	p = json_pack("{s:O, s:I, s:s}", "progressToken", c->token,
	    "progress", (json_int_t)++c->progress, "message", msg);
	free(msg);
	mcp_send(m, rpc_notification("notifications/progress", p));
}

/* Sends every progress notification that is due; returns ms to the next. */
static int
mcp_progress_tick(struct mcp *m)
{
	struct mcp_call	*c;
	long long	 now = mcp_now_ms(), next = -1;

	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->token == NULL || c->cancelled)
			continue;
		if (c->progress_ms <= now)
			mcp_progress(m, c, now);
		if (next == -1 || c->progress_ms < next)
			next = c->progress_ms;
	}
	if (next == -1)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

/*
 * Finds the session to use on a fresh connection (blocking: nothing else
 * is on it yet). --session: the open session with that id or name, moved
 * to --env if it uses another profile. Otherwise the most recently active
 * session on the workspace (and env), or a new one.
 */
static int
mcp_find_session(struct mcp *m, struct client *cl, char **cause)
{
	json_t		*reply, *res, *s, *params;
	const char	*id = NULL, *env = NULL;
	size_t		 i;

	if (m->session_arg != NULL) {
		reply = client_call(cl, "session.list", NULL,
		    MCP_CALL_TIMEOUT_MS, cause);
		if (reply == NULL)
			return -1;
		res = json_object_get(reply, "result");
		json_array_foreach(json_object_get(res, "sessions"), i, s) {
			if (mcp_streq(json_object_get(s, "id"), m->session_arg) ||
			    mcp_streq(json_object_get(s, "name"), m->session_arg)) {
				id = json_string_value(json_object_get(s, "id"));
				env = json_string_value(json_object_get(s, "env"));
				break;
			}
		}
		if (id == NULL) {
			*cause = res == NULL ? xasprintf("session.list failed: %s",
			    client_error_message(reply)) : xasprintf("no open "
			    "session has the id or name '%s'", m->session_arg);
			json_decref(reply);
			return -1;
		}
		free(m->session);
		m->session = xstrdup(id);
		if (m->env != NULL && (env == NULL || strcmp(env, m->env) != 0)) {
			json_decref(reply);
			reply = client_call(cl, "env.use", json_pack("{s:s, s:s}",
			    "session", m->session, "env", m->env),
			    MCP_CALL_TIMEOUT_MS, cause);
			if (reply == NULL)
				return -1;
			if (json_object_get(reply, "error") != NULL) {
				*cause = xasprintf("env.use %s: %s (%s)", m->env,
				    client_error_message(reply),
				    client_error_kind(reply));
				json_decref(reply);
				return -1;
			}
			mcp_log("session %s now uses the profile %s", m->session,
			    m->env);
		}
		json_decref(reply);
		return 0;
	}
	params = json_pack("{s:s, s:b}", "workspace", m->workspace, "reuse", 1);
	if (m->env != NULL)
		json_object_set_new(params, "env", json_string(m->env));
	reply = client_call(cl, "session.create", params, MCP_CALL_TIMEOUT_MS,
	    cause);
	if (reply == NULL)
		return -1;
	res = json_object_get(reply, "result");
	if (!json_is_string(json_object_get(res, "id"))) {
		*cause = xasprintf("session.create on %s: %s (%s)", m->workspace,
		    client_error_message(reply) != NULL ?
		    client_error_message(reply) : "no id",
		    client_error_kind(reply) != NULL ?
		    client_error_kind(reply) : "?");
		json_decref(reply);
		return -1;
	}
	free(m->session);
	m->session = xstrdup(json_string_value(json_object_get(res, "id")));
	mcp_log("%s session %s on %s (profile %s)",
	    json_is_false(json_object_get(res, "created")) ? "using" : "created",
	    m->session, m->workspace, json_string_value(json_object_get(res,
	    "env")) != NULL ? json_string_value(json_object_get(res, "env")) :
	    "?");
	json_decref(reply);
	return 0;
}

/*
 * Connects to gbrd (starting it under the start lock if nobody answers,
 * as gbr does), says hello and finds the session. Returns 0, or -1 with
 * *cause and *unreachable when nobody could be reached.
 */
static int
mcp_connect(struct mcp *m, char **cause, int *unreachable)
{
	struct client	*cl;
	json_t		*max;
	char		 name[64];
	int		 flags;

	snprintf(name, sizeof name, "gbrctl-mcp/%s", PACKAGE_VERSION);
	cl = client_connect(m->ctl->socket, CLIENT_AUTOSTART, name, cause,
	    unreachable);
	if (cl == NULL)
		return -1;
	if (mcp_find_session(m, cl, cause) != 0) {
		client_free(cl);
		return -1;
	}
	/*
	 * From here on the loop reads and writes the socket itself. The
	 * client has nothing read ahead: gbrd sends nothing unasked to a
	 * connection that did not attach or follow anything.
	 */
	max = json_object_get(json_object_get(client_hello(cl), "limits"),
	    "max_line_bytes");
	m->dmax_line = json_is_integer(max) && json_integer_value(max) > 0 ?
	    (size_t)json_integer_value(max) : 1024 * 1024;
	m->cl = cl;
	m->dfd = client_fd(cl);
	if ((flags = fcntl(m->dfd, F_GETFL)) != -1)
		fcntl(m->dfd, F_SETFL, flags | O_NONBLOCK);
	m->dframe = frame_create(MCP_DAEMON_LINE_MAX);
	m->next_did = MCP_FIRST_DID;
	return 0;
}

/* Connects again after gbrd went away; returns 0 or -1 with *cause. */
static int
mcp_ensure(struct mcp *m, char **cause)
{
	int	unreachable;

	*cause = NULL;
	if (m->cl != NULL)
		return 0;
	if (mcp_connect(m, cause, &unreachable) != 0) {
		mcp_log("cannot reach gbrd: %s", *cause);
		return -1;
	}
	mcp_log("connected to gbrd again");
	return 0;
}

/*
 * Queues a call's request to gbrd under a new id. Returns 0, or -1 with
 * *kind and *why (the caller frees) when it cannot go: the line is longer
 * than gbrd takes, or too much waits to be sent.
 */
static int
mcp_daemon_send(struct mcp *m, struct mcp_call *c, const char **errkind,
    char **why)
{
	json_t	*req;
	size_t	 len;

	if (mcp_buf_pending(&m->dout) >= MCP_DAEMON_QUEUE_MAX) {
		*errkind = "busy";
		*why = xasprintf("%zu bytes already wait to be sent to gbrd; "
		    "try again shortly", mcp_buf_pending(&m->dout));
		return -1;
	}
	req = rpc_request(m->next_did, c->method, c->params != NULL ?
	    json_incref(c->params) : NULL);
	len = mcp_buf_add_json(&m->dout, req);
	json_decref(req);
	if (len > m->dmax_line) {
		/* Taken back (the last len bytes) before any was written. */
		m->dout.len -= len;
		*errkind = "too_large";
		*why = xasprintf("the call is %zu bytes encoded; gbrd takes at "
		    "most %zu per message", len, m->dmax_line);
		return -1;
	}
	c->did = m->next_did++;
	return 0;
}

/*
 * Connects again, trying for a few seconds: a gbrd killed a moment ago may
 * still hold its socket, and a new one takes a moment to start.
 */
static int
mcp_ensure_patiently(struct mcp *m, char **cause)
{
	int	i, wait_ms = 100;

	for (i = 0; i < MCP_RECONNECT_TRIES; i++) {
		if (mcp_ensure(m, cause) == 0)
			return 0;
		if (i + 1 == MCP_RECONNECT_TRIES)
			break;
		free(*cause);
		poll(NULL, 0, wait_ms);
		wait_ms *= 2;
	}
	return -1;
}

/*
 * Sends a request to gbrd and records it. Steals params. Returns the call,
 * or NULL with *kind and *why (the caller frees), as mcp_daemon_send.
 */
static struct mcp_call *
mcp_daemon_call(struct mcp *m, enum mcp_call_kind kind, const char *method,
    json_t *params, const char **errkind, char **why)
{
	struct mcp_call	*c;

	c = xcalloc(1, sizeof *c);
	c->kind = kind;
	c->method = xstrdup(method);
	c->params = params;
	c->started_ms = mcp_now_ms();
	TAILQ_INSERT_TAIL(&m->calls, c, entry);
	m->ncalls++;
	if (mcp_daemon_send(m, c, errkind, why) != 0) {
		mcp_call_free(m, c);
		return NULL;
	}
	return c;
}

/*
 * Asks gbrd for another session on the workspace: any open one after ours
 * was closed, a new one (fresh) after ours filled its history. A tools/call
 * that comes meanwhile is held until gbrd answers (mcp_release_held).
 */
static void
mcp_refresh_session(struct mcp *m, int fresh)
{
	json_t		*params;
	const char	*kind;
	char		*why;

	if (m->workspace == NULL || m->refreshing || m->cl == NULL)
		return;
	params = json_pack("{s:s, s:b}", "workspace", m->workspace, "reuse",
	    !fresh);
	if (m->env != NULL)
		json_object_set_new(params, "env", json_string(m->env));
	if (mcp_daemon_call(m, MCP_CALL_SESSION, "session.create", params,
	    &kind, &why) == NULL) {
		mcp_log("cannot ask for a new session: %s", why);
		free(why);
		return;
	}
	m->refreshing = 1;
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

/* tools/list: gbrd's tool.list, already in the MCP shape. */
static void
mcp_tools_list(struct mcp *m, json_t *id, json_t *params)
{
	struct mcp_call	*c;
	const char	*kind;
	char		*why;

	if (json_object_get(params, "cursor") != NULL) {
		/* We never hand out a cursor, so none is valid. */
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "cursor"), "unknown cursor");
		return;
	}
	if (m->ncalls >= MCP_CALLS_MAX) {
		mcp_error(m, id, RPC_INTERNAL_ERROR, "busy", NULL,
		    "%u requests already wait on gbrd", m->ncalls);
		return;
	}
	if (mcp_ensure(m, &why) != 0) {
		mcp_error(m, id, RPC_INTERNAL_ERROR, "unavailable", NULL,
		    "cannot reach gbrd: %s", why);
		free(why);
		return;
	}
	c = mcp_daemon_call(m, MCP_CALL_LIST, "tool.list", NULL, &kind, &why);
	if (c == NULL) {
		mcp_error(m, id, RPC_INTERNAL_ERROR, kind, NULL, "%s", why);
		free(why);
		return;
	}
	c->id = json_incref(id);
}

/*
 * Finds a string holding a NUL byte anywhere in v (gbr's protocol cannot
 * carry one: jansson refuses it). Returns the key it was under, "" at the
 * top, or NULL when there is none.
 */
static const char *
mcp_find_nul(json_t *v, const char *under)
{
	const char	*key, *r;
	json_t		*sub;
	size_t		 i;

	if (json_is_string(v))
		return memchr(json_string_value(v), '\0',
		    json_string_length(v)) != NULL ? under : NULL;
	if (json_is_object(v)) {
		json_object_foreach(v, key, sub) {
			if ((r = mcp_find_nul(sub, key)) != NULL)
				return r;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, sub) {
			if ((r = mcp_find_nul(sub, under)) != NULL)
				return r;
		}
	}
	return NULL;
}

/* tools/call: gbrd's tool.call on our session. */
static void
mcp_tools_call(struct mcp *m, json_t *id, json_t *params)
{
	json_t		*name = json_object_get(params, "name");
	json_t		*args = json_object_get(params, "arguments");
	json_t		*meta = json_object_get(params, "_meta");
	json_t		*token = json_object_get(meta, "progressToken");
	json_t		*req;
	struct mcp_call	*c;
	struct mcp_held	*h;
	const char	*kind, *field;
	char		*why, *shown, rid[48];

	if (!json_is_string(name) || json_string_length(name) == 0 ||
	    memchr(json_string_value(name), '\0', json_string_length(name)) !=
	    NULL) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "name"), "name must be a tool's "
		    "name (tools/list has them)");
		return;
	}
	if (args != NULL && !json_is_object(args) && !json_is_null(args)) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "arguments"), "arguments must "
		    "be an object");
		return;
	}
	if (token != NULL && !json_is_string(token) && !json_is_integer(token)) {
		mcp_error(m, id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s}", "field", "_meta.progressToken"),
		    "progressToken must be a string or an integer");
		return;
	}
	if (m->ncalls + m->nheld >= MCP_CALLS_MAX) {
		why = xasprintf("%u calls already wait on gbrd; try again when "
		    "one is done", m->ncalls + m->nheld);
		mcp_tool_error(m, id, "busy", why, NULL);
		free(why);
		return;
	}
	if ((field = mcp_find_nul(args, "")) != NULL) {
		/*
		 * gbr's protocol never carries a NUL byte (jansson refuses it),
		 * so such a call cannot reach gbrd: it is refused here, as the
		 * sandbox's lexical gate would refuse it in a path.
		 */
		why = xasprintf("argument '%s' holds a NUL byte, which no path "
		    "or text sent to gbr may contain", field);
		mcp_tool_error(m, id, strcmp(field, "path") == 0 ?
		    "invalid_path" : "invalid_params", why, json_pack("{s:s}",
		    "field", field));
		free(why);
		return;
	}
	if (m->refreshing) {
		/* The session is changing: the call waits for the new one. */
		h = xcalloc(1, sizeof *h);
		h->id = json_incref(id);
		h->params = json_incref(params);
		TAILQ_INSERT_TAIL(&m->held, h, entry);
		m->nheld++;
		return;
	}
	if (mcp_ensure(m, &why) != 0) {
		shown = xasprintf("cannot reach gbrd: %s", why);
		mcp_tool_error(m, id, "unavailable", shown, NULL);
		free(shown);
		free(why);
		return;
	}
	snprintf(rid, sizeof rid, "mcp-%s-%llu", m->rid_prefix, ++m->rid_next);
	req = json_pack("{s:s, s:O, s:o, s:s}", "session", m->session, "tool",
	    name, "args", json_is_object(args) ? json_incref(args) :
	    json_object(), "request_id", rid);
	c = mcp_daemon_call(m, MCP_CALL_TOOL, "tool.call", req, &kind, &why);
	if (c == NULL) {
		mcp_tool_error(m, id, kind, why, NULL);
		free(why);
		return;
	}
	c->id = json_incref(id);
	c->tool = xstrdup(json_string_value(name));
	if (json_is_string(json_object_get(args, "path")))
		c->path = xstrdup(json_string_value(json_object_get(args,
		    "path")));
	memcpy(c->rid, rid, sizeof c->rid);
	if (token != NULL) {
		c->token = json_incref(token);
		c->progress_ms = c->started_ms + MCP_PROGRESS_MS;
	}
	if (m->verbose)
		mcp_log("tools/call %s -> tool.call %lld", c->tool, c->did);
}

/* Sends the calls held while the session changed (or frees them). */
static void
mcp_release_held(struct mcp *m, int send)
{
	struct mcp_held	*h;

	while ((h = TAILQ_FIRST(&m->held)) != NULL) {
		TAILQ_REMOVE(&m->held, h, entry);
		m->nheld--;
		if (send)
			mcp_tools_call(m, h->id, h->params);
		json_decref(h->id);
		json_decref(h->params);
		free(h);
	}
}

/* notifications/cancelled: never answer that request; gbrd gives up too. */
static void
mcp_cancelled(struct mcp *m, json_t *params)
{
	json_t		*rid = json_object_get(params, "requestId");
	struct mcp_call	*c;
	struct mcp_held	*h;
	const char	*kind;
	char		*why;

	if (rid == NULL)
		return;
	TAILQ_FOREACH(h, &m->held, entry) {
		if (json_equal(h->id, rid)) {
			TAILQ_REMOVE(&m->held, h, entry);
			m->nheld--;
			json_decref(h->id);
			json_decref(h->params);
			free(h);
			return;
		}
	}
	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->id == NULL || c->cancelled || !json_equal(c->id, rid))
			continue;
		/*
		 * The client will never read the reply. gbrd is asked to give
		 * up too (tool.cancel): a pending approval is withdrawn, a
		 * running command stopped. A call that already finished stays
		 * done and recorded; its reply is dropped here.
		 */
		c->cancelled = 1;
		if (m->verbose || c->approval != NULL)
			mcp_log("call %s cancelled by the client%s%s", c->tool !=
			    NULL ? c->tool : "tools/list", c->approval != NULL ?
			    "; withdrawing approval " : "",
			    c->approval != NULL ? c->approval : "");
		if (c->kind == MCP_CALL_TOOL && m->session != NULL &&
		    mcp_daemon_call(m, MCP_CALL_CANCEL, "tool.cancel",
		    json_pack("{s:s, s:s}", "session", m->session,
		    "request_id", c->rid), &kind, &why) == NULL) {
			mcp_log("cannot ask gbrd to cancel %s: %s", c->rid, why);
			free(why);
		}
		return;
	}
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
 * Reads what the client sent and handles every complete line. A line over
 * MCP_LINE_MAX gets an error (id null: it was never read whole) and is
 * skipped up to its end; the connection goes on.
 */
static void
mcp_client_read(struct mcp *m)
{
	ssize_t	 n;
	size_t	 start, i, end;

	if (m->in_cap - m->in_len < MCP_READ_CHUNK) {
		m->in_cap = m->in_len + MCP_READ_CHUNK;
		m->in_buf = xreallocarray(m->in_buf, 1, m->in_cap);
	}
	/* One read after POLLIN never blocks, whatever the descriptor is. */
	n = read(m->in_fd, m->in_buf + m->in_len, MCP_READ_CHUNK);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		mcp_log("reading stdin: %s", strerror(errno));
		m->in_eof = 1;
		return;
	}
	if (n == 0) {
		m->in_eof = 1;
		/* A last message without its newline still counts. */
		if (m->in_len > 0 && !m->in_skip)
			mcp_client_line(m, m->in_buf, m->in_len);
		m->in_len = 0;
		return;
	}
	i = m->in_len;
	m->in_len += (size_t)n;
	start = 0;
	for (; i < m->in_len; i++) {
		if (m->in_buf[i] != '\n')
			continue;
		if (m->in_skip)
			m->in_skip = 0;
		else {
			end = i;
			if (end > start && m->in_buf[end - 1] == '\r')
				end--;
			if (end - start > MCP_LINE_MAX)
				mcp_too_large(m);
			else if (end > start)
				mcp_client_line(m, m->in_buf + start, end - start);
		}
		start = i + 1;
	}
	if (m->in_skip) {
		m->in_len = 0;	/* still inside the over-long line */
		return;
	}
	memmove(m->in_buf, m->in_buf + start, m->in_len - start);
	m->in_len -= start;
	if (m->in_len > MCP_LINE_MAX) {
		mcp_too_large(m);
		m->in_skip = 1;
		m->in_len = 0;
	}
	/* Give back a buffer a long message grew. */
	if (m->in_cap > 4 * MCP_READ_CHUNK && m->in_len < MCP_READ_CHUNK) {
		m->in_cap = 2 * MCP_READ_CHUNK;
		m->in_buf = xreallocarray(m->in_buf, 1, m->in_cap);
	}
}

/* The text a model reads for a successful tool result. */
static char *
mcp_result_text(const char *tool, json_t *result)
{
	json_t		*content = json_object_get(result, "content");
	json_t		*next = json_object_get(result, "next_offset");
	char		*s;

	/* read_file's text is the file itself, not JSON around it. */
	if (strcmp(tool, "read_file") == 0 && json_is_string(content)) {
		if (json_is_true(json_object_get(result, "truncated")) &&
		    json_is_integer(next))
			return xasprintf("%s\n[gbr: the file goes on: %lld "
			    "lines in all; read_file with offset %lld for "
			    "more]", json_string_value(content), (long long)
			    json_integer_value(json_object_get(result,
			    "total_lines")), (long long)json_integer_value(next));
		return xstrdup(json_string_value(content));
	}
	s = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
	return s != NULL ? s : xstrdup("{}");
}

/* The reply to a tool.call: a tool result, or a protocol error. */
static void
mcp_tool_reply(struct mcp *m, struct mcp_call *c, json_t *msg)
{
	json_t		*err = json_object_get(msg, "error");
	json_t		*data = json_object_get(err, "data");
	json_t		*res, *r, *sc;
	const char	*kind, *text, *limit;
	char		*body, *more = NULL;

	if (err == NULL) {
		r = json_object_get(json_object_get(msg, "result"), "result");
		body = mcp_result_text(c->tool, r);
		res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type",
		    "text", "text", body, "isError", 0);
		free(body);
		if (m->structured) {
			sc = json_is_object(r) ? json_copy(r) :
			    json_pack("{s:O}", "result", r != NULL ? r :
			    json_null());
			/* read_file's text block is the content: not twice. */
			if (strcmp(c->tool, "read_file") == 0)
				json_object_del(sc, "content");
			json_object_set_new(res, "structuredContent", sc);
		}
		r = json_object_get(json_object_get(msg, "result"), "call_id");
		if (json_is_string(r))
			json_object_set_new(res, "_meta", json_pack("{s:O}",
			    "gbr/call_id", r));
		mcp_result(m, c->id, res);
		return;
	}
	kind = json_string_value(json_object_get(data, "kind"));
	text = json_string_value(json_object_get(err, "message"));
	if (kind == NULL)
		kind = "internal_error";
	if (text == NULL)
		text = "the tool failed";
	if (strcmp(kind, "method_not_found") == 0) {
		/* An unknown tool is a protocol error in MCP. */
		body = mcp_shown(c->tool, 128);
		mcp_error(m, c->id, RPC_INVALID_PARAMS, "invalid_params",
		    json_pack("{s:s, s:s}", "field", "name", "tool", body),
		    "unknown tool '%s' (tools/list has them)", body);
		free(body);
		return;
	}
	if (strcmp(kind, "session_not_found") == 0) {
		mcp_log("session %s is gone (closed?)%s", m->session,
		    m->workspace != NULL ? "; asking gbrd for another" : "");
		mcp_refresh_session(m, 0);
	}
	if (strcmp(kind, "limit_reached") == 0 && (limit = json_string_value(
	    json_object_get(data, "limit"))) != NULL &&
	    strncmp(limit, "history", 7) == 0) {
		/*
		 * A session's history is bounded (every call and result is in
		 * it), and an MCP client may call tools all day: go on in a
		 * new session. This call may or may not have run, so it is not
		 * sent again: the model is told to call again.
		 */
		mcp_log("session %s is full (%s)%s", m->session, limit,
		    m->workspace != NULL ? "; starting a new one on the "
		    "workspace" : "; start gbrctl mcp on another session");
		if (m->workspace != NULL && !m->refreshing) {
			mcp_refresh_session(m, 1);
			more = xasprintf("%s (gbr goes on in a new session: if "
			    "the call did not happen, make it again)", text);
			text = more;
		}
	}
	/*
	 * Everything else is the tool's own failure: the sandbox's refusals,
	 * a human's denial, arguments outside the schema (MCP 2025-11-25
	 * calls these tool execution errors so the model can correct itself).
	 */
	if (json_is_object(data)) {
		data = json_deep_copy(data);
		json_object_del(data, "kind");
	} else
		data = NULL;
	mcp_tool_error(m, c->id, kind, text, data);
	free(more);
}

/* A reply from gbrd: finish the call it answers. */
static void
mcp_daemon_reply(struct mcp *m, json_t *msg)
{
	json_t		*id = json_object_get(msg, "id"), *res;
	struct mcp_call	*c;

	if (!json_is_integer(id)) {
		/* gbrd could not tie an error to a request: it is broken. */
		mcp_log("gbrd sent an error for no request: %s (%s)",
		    client_error_message(msg) != NULL ?
		    client_error_message(msg) : "?",
		    client_error_kind(msg) != NULL ? client_error_kind(msg) :
		    "?");
		return;
	}
	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->did == json_integer_value(id))
			break;
	}
	if (c == NULL)
		return;
	if (m->verbose)
		mcp_log("gbrd answered %lld (%s) after %lld ms", c->did,
		    c->tool != NULL ? c->tool : "-", mcp_now_ms() - c->started_ms);
	if (c->cancelled) {
		mcp_call_free(m, c);
		return;
	}
	switch (c->kind) {
	case MCP_CALL_TOOL:
		mcp_tool_reply(m, c, msg);
		break;
	case MCP_CALL_LIST:
		res = json_object_get(msg, "result");
		if (!json_is_array(json_object_get(res, "tools")))
			mcp_error(m, c->id, RPC_INTERNAL_ERROR,
			    client_error_kind(msg) != NULL ?
			    client_error_kind(msg) : "internal_error", NULL,
			    "gbrd's tool.list failed: %s",
			    client_error_message(msg) != NULL ?
			    client_error_message(msg) : "no tools");
		else
			mcp_result(m, c->id, json_pack("{s:O}", "tools",
			    json_object_get(res, "tools")));
		break;
	case MCP_CALL_CANCEL:
		if (m->verbose)
			mcp_log("tool.cancel: %s", json_is_true(json_object_get(
			    json_object_get(msg, "result"), "cancelled")) ?
			    "cancelled" : "nothing in flight");
		break;
	case MCP_CALL_SESSION:
		m->refreshing = 0;
		res = json_object_get(json_object_get(msg, "result"), "id");
		if (json_is_string(res)) {
			free(m->session);
			m->session = xstrdup(json_string_value(res));
			mcp_log("now using session %s", m->session);
		} else
			mcp_log("no new session: %s (%s)",
			    client_error_message(msg) != NULL ?
			    client_error_message(msg) : "?",
			    client_error_kind(msg) != NULL ?
			    client_error_kind(msg) : "?");
		/* The held calls go now (to the old session if none came). */
		mcp_release_held(m, 1);
		break;
	}
	mcp_call_free(m, c);
}

/*
 * Finds the call an approval.requested event is about. gbrd sends it only
 * to the connection that made the call, so it is one of ours: the one with
 * its request_id, else the one waiting for that tool on that path, else
 * the oldest one of that tool that waits on no approval yet.
 */
static struct mcp_call *
mcp_approval_call(struct mcp *m, json_t *a)
{
	const char	*rid = json_string_value(json_object_get(a, "request_id"));
	const char	*tool = json_string_value(json_object_get(a, "tool"));
	const char	*path = json_string_value(json_object_get(a, "path"));
	struct mcp_call	*c, *first = NULL;
	size_t		 pl, cl;

	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->kind != MCP_CALL_TOOL)
			continue;
		if (rid != NULL && strcmp(c->rid, rid) == 0)
			return c;
		if (rid != NULL || c->approval != NULL || tool == NULL ||
		    strcmp(c->tool, tool) != 0)
			continue;
		if (path != NULL && c->path != NULL) {
			/* gbrd shows the canonical path; ours may be relative. */
			pl = strlen(path);
			cl = strlen(c->path);
			if (strcmp(path, c->path) == 0 || (pl > cl &&
			    strcmp(path + pl - cl, c->path) == 0 &&
			    path[pl - cl - 1] == '/'))
				return c;
		}
		if (first == NULL)
			first = c;
	}
	return first;
}

/*
 * A call waits for a human: progress says so at once and every 2 s, with
 * the commands that answer. what (the path or command) may come later.
 */
static void
mcp_wait_approval(struct mcp *m, struct mcp_call *c, const char *aid,
    const char *what)
{
	char	*shown, *tool;

	if (c->approval != NULL && strcmp(c->approval, aid) == 0 &&
	    (what == NULL || c->described))
		return;
	free(c->approval);
	c->approval = xstrdup(aid);
	shown = mcp_shown(what != NULL ? what : "", 256);
	tool = mcp_shown(c->tool, 64);
	free(c->waiting);
	c->waiting = xasprintf("waiting for a human to approve %s%s%s "
	    "(gbrctl approve %s, or gbrctl deny %s)", tool,
	    *shown != '\0' ? " " : "", shown, aid, aid);
	c->described = what != NULL;
	mcp_log("%s", c->waiting);
	free(shown);
	free(tool);
	mcp_progress(m, c, mcp_now_ms());
}

/*
 * tool.progress from gbrd: the tool.call with this request id waits for
 * the approval it names.
 */
static void
mcp_daemon_progress(struct mcp *m, json_t *params)
{
	json_t		*id = json_object_get(params, "id");
	const char	*aid = json_string_value(json_object_get(params,
			    "approval_id"));
	struct mcp_call	*c;

	if (!json_is_integer(id) || aid == NULL ||
	    !mcp_streq(json_object_get(params, "state"), "awaiting_approval"))
		return;
	TAILQ_FOREACH(c, &m->calls, entry) {
		if (c->kind == MCP_CALL_TOOL && c->did == json_integer_value(id)) {
			mcp_wait_approval(m, c, aid, NULL);
			return;
		}
	}
}

/* An event from gbrd: approvals say what a call waits for. */
static void
mcp_daemon_event(struct mcp *m, json_t *params)
{
	json_t		*type = json_object_get(params, "type");
	json_t		*a = json_object_get(params, "approval");
	struct mcp_call	*c;
	const char	*aid, *what, *state;

	if (mcp_streq(type, "evicted")) {
		mcp_log("gbrd evicted us: %s", json_string_value(json_object_get(
		    params, "reason")) != NULL ? json_string_value(
		    json_object_get(params, "reason")) : "?");
		return;
	}
	if (!json_is_object(a))
		a = params;
	aid = json_string_value(json_object_get(a, "id"));
	if (aid == NULL)
		aid = json_string_value(json_object_get(params, "approval_id"));
	if (mcp_streq(type, "approval.requested") && aid != NULL) {
		if ((c = mcp_approval_call(m, a)) == NULL)
			return;
		what = json_string_value(json_object_get(a, "path"));
		if (what == NULL)
			what = json_string_value(json_object_get(a, "command"));
		mcp_wait_approval(m, c, aid, what);
		return;
	}
	if (mcp_streq(type, "approval.resolved") && aid != NULL) {
		TAILQ_FOREACH(c, &m->calls, entry) {
			if (c->approval != NULL && strcmp(c->approval, aid) == 0)
				break;
		}
		if (c == NULL)
			return;
		state = json_string_value(json_object_get(a, "state"));
		if (state == NULL)
			state = json_string_value(json_object_get(a, "decision"));
		free(c->waiting);
		c->waiting = xasprintf("approval %s %s; %s goes on", aid,
		    state != NULL ? state : "resolved", c->tool);
		mcp_progress(m, c, mcp_now_ms());
	}
}

/* Framer callback: one line from gbrd. */
static int
mcp_daemon_line(void *arg, const char *line, size_t len)
{
	struct mcp	*m = arg;
	struct rpc_msg	 msg;
	json_t		*err;

	if (rpc_parse_from_daemon(line, len, &msg, &err) != 0) {
		json_decref(err);
		mcp_log("gbrd sent a line that is not JSON-RPC");
		return 0;
	}
	if (msg.kind == RPC_RESPONSE)
		mcp_daemon_reply(m, msg.root);
	else if (msg.method != NULL && strcmp(msg.method, "event") == 0)
		mcp_daemon_event(m, msg.params);
	else if (msg.method != NULL && strcmp(msg.method, "tool.progress") == 0)
		mcp_daemon_progress(m, msg.params);
	rpc_msg_release(&msg);
	return 0;
}

/*
 * gbrd went away (it stopped, crashed or closed us). Every call still
 * waiting gets an answer now: whether its tool ran is unknown, so the
 * result says where to look rather than guess. The next request connects
 * again (starting gbrd if needed).
 */
static void
mcp_daemon_lost(struct mcp *m, const char *why)
{
	struct mcp_calls carried = TAILQ_HEAD_INITIALIZER(carried);
	struct mcp_call	*c;
	const char	*kind;
	char		*text, *cause;

	mcp_log("lost gbrd: %s", why);
	while ((c = TAILQ_FIRST(&m->calls)) != NULL) {
		/*
		 * A call waiting for a human is a durable approval in gbrd's
		 * log: sent again with its request_id after gbrd is back, it
		 * is adopted and the decision still reaches the client. Any
		 * other call may have been running: its outcome is unknown
		 * and it is never sent again.
		 */
		if (c->kind == MCP_CALL_TOOL && c->approval != NULL &&
		    !c->cancelled) {
			TAILQ_REMOVE(&m->calls, c, entry);
			TAILQ_INSERT_TAIL(&carried, c, entry);
			continue;
		}
		if (c->cancelled || c->id == NULL)
			;
		else if (c->kind == MCP_CALL_TOOL) {
			text = xasprintf("gbrd closed the connection during the "
			    "call (%s); whether %s ran is unknown: see `gbrctl "
			    "history %s`", why, c->tool, m->session);
			mcp_tool_error(m, c->id, "unavailable", text, NULL);
			free(text);
		} else
			mcp_error(m, c->id, RPC_INTERNAL_ERROR, "unavailable",
			    NULL, "gbrd closed the connection: %s", why);
		mcp_call_free(m, c);
	}
	m->refreshing = 0;
	client_free(m->cl);
	m->cl = NULL;
	m->dfd = -1;
	frame_free(m->dframe);
	m->dframe = NULL;
	mcp_buf_release(&m->dout);
	if (!TAILQ_EMPTY(&carried) && mcp_ensure_patiently(m, &cause) != 0) {
		while ((c = TAILQ_FIRST(&carried)) != NULL) {
			TAILQ_REMOVE(&carried, c, entry);
			TAILQ_INSERT_TAIL(&m->calls, c, entry);
			text = xasprintf("gbrd went away while %s waited for "
			    "approval %s and cannot be reached again (%s); the "
			    "approval stays in gbrd's log (gbrctl approvals)",
			    c->tool, c->approval, cause);
			mcp_tool_error(m, c->id, "unavailable", text, NULL);
			free(text);
			mcp_call_free(m, c);
		}
		free(cause);
	}
	while ((c = TAILQ_FIRST(&carried)) != NULL) {
		TAILQ_REMOVE(&carried, c, entry);
		TAILQ_INSERT_TAIL(&m->calls, c, entry);
		if (mcp_daemon_send(m, c, &kind, &text) != 0) {
			mcp_tool_error(m, c->id, kind, text, NULL);
			free(text);
			mcp_call_free(m, c);
			continue;
		}
		mcp_log("asked gbrd again for %s, which waits for approval %s",
		    c->tool, c->approval);
	}
	/* Held calls never reached gbrd: they go on a new connection. */
	mcp_release_held(m, 1);
}

/* Reads what gbrd sent. */
static void
mcp_daemon_read(struct mcp *m)
{
	char	buf[MCP_READ_CHUNK];
	ssize_t	n;

	n = read(m->dfd, buf, sizeof buf);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		mcp_daemon_lost(m, strerror(errno));
		return;
	}
	if (n == 0) {
		mcp_daemon_lost(m, "end of stream");
		return;
	}
	if (frame_feed(m->dframe, buf, (size_t)n, mcp_daemon_line, m) ==
	    FRAME_TOO_LARGE)
		mcp_daemon_lost(m, "it sent an over-long line");
}

/*
 * Moves the client's stdin and stdout out of the way: the protocol uses
 * private close-on-exec copies, descriptor 0 becomes /dev/null and 1 a copy
 * of stderr, so whatever else writes to "stdout" (a gbrd started on demand,
 * a stray printf) cannot corrupt the stream.
 */
static int
mcp_take_stdio(struct mcp *m)
{
	struct stat	st;
	int		fd;

	if ((m->in_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)) == -1 ||
	    (m->out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)) == -1) {
		mcp_log("stdin and stdout must be open: %s", strerror(errno));
		return -1;
	}
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1) {
		mcp_log("/dev/null: %s", strerror(errno));
		return -1;
	}
	dup2(fd, STDIN_FILENO);
	if (dup2(STDERR_FILENO, STDOUT_FILENO) == -1)
		dup2(fd, STDOUT_FILENO);
	close(fd);
	/*
	 * Non-blocking writes to a pipe or socket the client made for us
	 * alone; a terminal or file is shared with others (a shell) and
	 * stays as it is. Reads need no flag: one read after POLLIN never
	 * blocks.
	 */
	m->out_flags = -1;
	if (fstat(m->out_fd, &st) == 0 && (S_ISFIFO(st.st_mode) ||
	    S_ISSOCK(st.st_mode)) &&
	    (m->out_flags = fcntl(m->out_fd, F_GETFL)) != -1)
		fcntl(m->out_fd, F_SETFL, m->out_flags | O_NONBLOCK);
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
		if (poll(&pfd, 1, wait) <= 0)
			break;
		if (mcp_buf_flush(&m->out, m->out_fd) != 0)
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

	while (!m->in_eof && !m->out_dead) {
		timeout = mcp_progress_tick(m);
		n = 0;
		in_i = out_i = d_i = -1;
		/* A client that does not read its replies is not read either. */
		reading = mcp_buf_pending(&m->out) <= MCP_OUT_HIGH;
		if (reading) {
			in_i = n;
			pfd[n].fd = m->in_fd;
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
			poll(NULL, 0, timeout < 0 ? 100 : timeout);
			continue;
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			mcp_log("poll: %s", strerror(errno));
			break;
		}
		if (out_i != -1 && pfd[out_i].revents != 0 &&
		    mcp_buf_flush(&m->out, m->out_fd) != 0) {
			if (errno != EPIPE)
				mcp_log("writing stdout: %s", strerror(errno));
			m->out_dead = 1;
			break;
		}
		if (d_i != -1 && (pfd[d_i].revents & POLLOUT) &&
		    mcp_buf_flush(&m->dout, m->dfd) != 0) {
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
		    mcp_buf_flush(&m->out, m->out_fd) != 0) {
			m->out_dead = 1;
			break;
		}
		if (m->cl != NULL && mcp_buf_pending(&m->dout) > 0 &&
		    mcp_buf_flush(&m->dout, m->dfd) != 0)
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
	m.dfd = m.in_fd = m.out_fd = -1;
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
	if (m.out_flags != -1)
		fcntl(m.out_fd, F_SETFL, m.out_flags);
	close(m.in_fd);
	close(m.out_fd);
	free(m.in_buf);
	free(m.workspace);
	free(m.session);
	return rc;
}
