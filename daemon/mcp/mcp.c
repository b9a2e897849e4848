/*
 * The MCP client's sessions and servers (see mcp.h). A session's state is
 * made the first time something asks for its tools and follows its
 * profile from then on: each time it is asked, the profile's [mcp.NAME]
 * objects are compared with the running servers', and a server whose
 * object (or the autonomy it started under) changed is stopped and
 * replaced, one that is gone is stopped; the next use starts the new one
 * (a hot reload applies at the next tool call, as for the rest of the
 * profile).
 *
 * A server's life: STOPPED -> STARTING (the process, initialize with our
 * newest revision, the server's choice checked against ours,
 * notifications/initialized, tools/list page by page) -> READY. A
 * process that ends unasked fails the calls in flight and is started
 * again after MCP_BACKOFF_MS, doubled per crash in a row; after
 * MCP_CRASHES_MAX it is FAILED until a call asks again. Idle for idle_ms,
 * it is stopped (its tools stay listed; a call starts it again).
 *
 * A process is only freed from its own done callback (runner.h): a server
 * that is stopped is detached from its session and freed when the
 * runner says its process is gone. A url server has no process: its
 * link (mcp-http.c) closes at once when it is stopped, and everything
 * above the transport (messages, restarts, state) is shared.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "env.h"
#include "escape.h"
#include "log.h"
#include "mcp-int.h"
#include "runner.h"
#include "sandbox.h"
#include "tool-run.h"
#include "xmalloc.h"

struct mcp_session_list	 mcp_sessions = TAILQ_HEAD_INITIALIZER(mcp_sessions);
struct event_base	*mcp_base;
static mcp_env_fn	 mcp_env;

/* The revisions we speak, the newest first. */
static const char *const mcp_revisions[] = { MCP_PROTOCOL_LATEST,
    "2025-06-18", "2025-03-26" };

static void	mcp_on_timer(evutil_socket_t, short, void *);
static void	mcp_server_stop(struct mcp_server *, const char *why);
static void	mcp_ready(struct mcp_server *);
static void	mcp_started(struct mcp_server *, const char *);

/* Untrusted text made safe to log or show. */
char *
mcp_escape(const char *s, size_t len)
{
	return escape_string(s, len, ESCAPE_CODES, 0, NULL);
}

/* An int option of the server's profile object, or def. */
int
mcp_conf_int(const struct mcp_server *srv, const char *key, int def)
{
	json_t	*v = json_object_get(srv->conf, key);

	return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

/* Sets a server's last error (logged). */
void
mcp_error(struct mcp_server *srv, const char *fmt, ...)
{
	va_list	ap;

	free(srv->last_error);
	va_start(ap, fmt);
	srv->last_error = xvasprintf(fmt, ap);
	va_end(ap);
	log_warn("mcp %s/%s: %s", srv->ms != NULL ? srv->ms->sid : "-",
	    srv->name, srv->last_error);
}

/* Arms the server's one timer for ms from now. */
static void
mcp_timer(struct mcp_server *srv, long ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(srv->timer, &tv);
}

/* A new server of a session, stopped. */
static struct mcp_server *
mcp_server_new(struct mcp_session *ms, const char *name, json_t *conf,
    int read_only)
{
	struct mcp_server	*srv = xcalloc(1, sizeof *srv);

	srv->ms = ms;
	srv->name = xstrdup(name);
	srv->conf = json_deep_copy(conf);
	srv->read_only = read_only;
	srv->state = MCP_STOPPED;
	srv->next_id = 1;
	srv->skipped = json_array();
	TAILQ_INIT(&srv->calls);
	if ((srv->timer = evtimer_new(mcp_base, mcp_on_timer, srv)) == NULL)
		fatalx("mcp: cannot create a timer");
	TAILQ_INSERT_TAIL(&ms->servers, srv, entry);
	return srv;
}

/* True if the server has a process or a link. */
int
mcp_server_running(const struct mcp_server *srv)
{
	return srv->job != NULL || srv->http != NULL;
}

/* Frees a server whose process is gone (or never was). */
static void
mcp_server_free(struct mcp_server *srv)
{
	if (srv->http != NULL)
		mcp_http_close(srv);
	event_free(srv->timer);
	mcp_tools_free(srv);
	json_decref(srv->raw_tools);
	free(srv->name);
	json_decref(srv->conf);
	free(srv->out);
	free(srv->last_err_line);
	json_decref(srv->paging);
	free(srv->protocol);
	json_decref(srv->server_info);
	json_decref(srv->capabilities);
	json_decref(srv->skipped);
	free(srv->last_error);
	free(srv->kill_why);
	free(srv);
}

/* Takes a server off its session; freed now, or when its process ends. */
static void
mcp_server_detach(struct mcp_server *srv, const char *why)
{
	mcp_server_stop(srv, why);
	TAILQ_REMOVE(&srv->ms->servers, srv, entry);
	srv->ms = NULL;
	if (!mcp_server_running(srv))
		mcp_server_free(srv);
}

/* Finds a session's state, or NULL. */
static struct mcp_session *
mcp_session_find(const char *sid)
{
	struct mcp_session	*ms;

	TAILQ_FOREACH(ms, &mcp_sessions, entry)
		if (strcmp(ms->sid, sid) == 0)
			return ms;
	return NULL;
}

/* Finds a server by name. */
struct mcp_server *
mcp_server_find(struct mcp_session *ms, const char *name)
{
	struct mcp_server	*srv;

	TAILQ_FOREACH(srv, &ms->servers, entry)
		if (strcmp(srv->name, name) == 0)
			return srv;
	return NULL;
}

/*
 * True if two [mcp.NAME] objects run the same process: they differ at most
 * in what gbr makes of its tools (ask, tools, deny_tools, timeout_ms,
 * idle_ms), which applies without a restart.
 */
static int
mcp_same_process(json_t *a, json_t *b)
{
	static const char *const keys[] = { "command", "args", "env", "url",
	    "headers" };
	size_t	i;
	json_t	*x, *y;

	for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		x = json_object_get(a, keys[i]);
		y = json_object_get(b, keys[i]);
		if ((x == NULL) != (y == NULL) || (x != NULL && !json_equal(x, y)))
			return 0;
	}
	return 1;
}

/* The session's state, following its profile (see the top of the file). */
struct mcp_session *
mcp_session_sync(const char *sid)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv, *next;
	struct env		*env;
	struct sandbox		*sb;
	const json_t		*conf;
	const char		*name;
	json_t			*o;
	char			*cause;
	int			 ro;

	if (sid == NULL || mcp_env == NULL)
		return NULL;
	ms = mcp_session_find(sid);
	if (mcp_env(sid, &env, &sb, &cause) != 0) {
		free(cause);
		return ms;	/* keep what runs: the session may be closing */
	}
	conf = env_mcp(env);
	if (conf == NULL && ms == NULL)
		return NULL;
	if (ms == NULL) {
		ms = xcalloc(1, sizeof *ms);
		ms->sid = xstrdup(sid);
		TAILQ_INIT(&ms->servers);
		TAILQ_INSERT_TAIL(&mcp_sessions, ms, entry);
	}
	ro = env_autonomy(env) == ENV_READ_ONLY;
	for (srv = TAILQ_FIRST(&ms->servers); srv != NULL; srv = next) {
		next = TAILQ_NEXT(srv, entry);
		o = conf != NULL ? json_object_get(conf, srv->name) : NULL;
		if (o == NULL)
			mcp_server_detach(srv, "the profile no longer names it");
		else if (json_equal(o, srv->conf) && ro == srv->read_only)
			continue;
		else if (ro == srv->read_only && mcp_same_process(o,
		    srv->conf)) {
			/* Only what gbr makes of its tools changed. */
			json_decref(srv->conf);
			srv->conf = json_deep_copy(o);
			if (srv->raw_tools != NULL)
				mcp_tools_set(srv, srv->raw_tools);
		} else
			mcp_server_detach(srv, "the profile changed it");
	}
	if (conf != NULL) {
		json_object_foreach((json_t *)conf, name, o)
			if (mcp_server_find(ms, name) == NULL)
				(void)mcp_server_new(ms, name, o, ro);
	}
	return ms;
}

/* Sends one message as a line. */
int
mcp_send(struct mcp_server *srv, json_t *m)
{
	char	*s;
	size_t	 len;
	int	 r;

	json_object_set_new(m, "jsonrpc", json_string("2.0"));
	if (srv->http != NULL)
		return mcp_http_send(srv, m);
	s = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (s == NULL || srv->job == NULL) {
		free(s);
		return -1;
	}
	len = strlen(s);
	s[len] = '\n';	/* json_dumps's NUL: the line's end instead */
	r = runner_write(srv->job, s, len + 1);
	free(s);
	return r;
}

/* Sends a request; returns its id, or 0 if it could not be sent. */
static int64_t
mcp_request(struct mcp_server *srv, const char *method, json_t *params)
{
	int64_t	id = srv->next_id++;

	if (mcp_send(srv, json_pack("{s:I, s:s, s:o}", "id", (json_int_t)id,
	    "method", method, "params", params != NULL ? params :
	    json_object())) != 0)
		return 0;
	return id;
}

/* Asks for (the next page of) the tools. */
static void
mcp_list(struct mcp_server *srv, const char *cursor)
{
	json_t	*p = json_object();

	if (cursor != NULL)
		json_object_set_new(p, "cursor", json_string(cursor));
	if ((srv->list_id = mcp_request(srv, "tools/list", p)) == 0)
		mcp_error(srv, "cannot write to it");
}

/* Ends a running server's process (or link) on purpose. */
void
mcp_kill(struct mcp_server *srv, const char *why)
{
	if (srv->http != NULL) {
		/* No process to wait for: the link is gone now. */
		mcp_http_close(srv);
		mcp_calls_fail(srv, GBR_ERR_UNAVAILABLE, "MCP server '%s' was "
		    "ended: %s", srv->name, why);
		if (srv->state != MCP_STOPPED) {
			srv->state = MCP_FAILED;
			evtimer_del(srv->timer);
		}
		return;
	}
	if (srv->job == NULL || srv->killing)
		return;
	srv->killing = 1;
	free(srv->kill_why);
	srv->kill_why = xstrdup(why);
	runner_close_input(srv->job);
	runner_cancel(srv->job);
}

/* Stops a server: its calls end, its process is ended. */
static void
mcp_server_stop(struct mcp_server *srv, const char *why)
{
	mcp_calls_fail(srv, GBR_ERR_CANCELLED, "MCP server '%s' was stopped: "
	    "%s", srv->name, why);
	mcp_kill(srv, why);
	evtimer_del(srv->timer);
	srv->state = MCP_STOPPED;
	srv->init_id = srv->list_id = 0;
}

/* The end of a stderr line: logged, bounded. */
static void
mcp_err_line(struct mcp_server *srv)
{
	char	*esc;

	if (srv->err_len == 0 && !srv->err_cut)
		return;
	srv->err[srv->err_len] = '\0';
	esc = mcp_escape(srv->err, srv->err_len);
	free(srv->last_err_line);
	srv->last_err_line = xstrdup(esc);
	if (srv->err_lines < MCP_STDERR_LINES) {
		log_info("mcp %s/%s: stderr: %s%s", srv->ms != NULL ?
		    srv->ms->sid : "-", srv->name, esc, srv->err_cut ?
		    " [cut]" : "");
		if (++srv->err_lines == MCP_STDERR_LINES)
			log_info("mcp %s/%s: more stderr is counted, not "
			    "logged", srv->ms != NULL ? srv->ms->sid : "-",
			    srv->name);
	} else
		srv->err_dropped++;
	free(esc);
	srv->err_len = 0;
	srv->err_cut = 0;
}

/* The answer to initialize. */
static void
mcp_initialized(struct mcp_server *srv, json_t *m)
{
	json_t		*r = json_object_get(m, "result");
	const char	*v;
	size_t		 i;

	srv->init_id = 0;
	v = json_string_value(json_object_get(r, "protocolVersion"));
	for (i = 0; v != NULL && i < sizeof mcp_revisions /
	    sizeof mcp_revisions[0]; i++)
		if (strcmp(v, mcp_revisions[i]) == 0)
			break;
	if (!json_is_object(r) || v == NULL || i == sizeof mcp_revisions /
	    sizeof mcp_revisions[0]) {
		mcp_error(srv, "initialize: %s", json_is_object(json_object_get(
		    m, "error")) ? "the server refused it" : v == NULL ?
		    "no protocolVersion in its answer" : "it speaks a "
		    "protocol revision gbr does not (2025-11-25, 2025-06-18 "
		    "or 2025-03-26)");
		mcp_kill(srv, "initialize failed");
		return;
	}
	free(srv->protocol);
	srv->protocol = xstrdup(mcp_revisions[i]);
	json_decref(srv->server_info);
	srv->server_info = json_is_object(json_object_get(r, "serverInfo")) ?
	    json_deep_copy(json_object_get(r, "serverInfo")) : NULL;
	json_decref(srv->capabilities);
	srv->capabilities = json_is_object(json_object_get(r,
	    "capabilities")) ? json_deep_copy(json_object_get(r,
	    "capabilities")) : json_object();
	(void)mcp_send(srv, json_pack("{s:s}", "method",
	    "notifications/initialized"));
	if (json_object_get(srv->capabilities, "tools") == NULL) {
		/* No tools to offer: ready, with none. */
		mcp_tools_set(srv, json_array());
		srv->state = MCP_READY;
		mcp_ready(srv);
		mcp_calls_flush(srv);
		return;
	}
	json_decref(srv->paging);
	srv->paging = json_array();
	srv->pages = 0;
	mcp_list(srv, NULL);
}

/* A page of tools/list. */
static void
mcp_listed(struct mcp_server *srv, json_t *m)
{
	json_t		*r = json_object_get(m, "result"), *t;
	const char	*cursor;

	srv->list_id = 0;
	if (!json_is_object(r) || !json_is_array(t = json_object_get(r,
	    "tools"))) {
		mcp_error(srv, "tools/list: no tools in its answer");
		mcp_kill(srv, "tools/list failed");
		return;
	}
	json_array_extend(srv->paging, t);
	cursor = json_string_value(json_object_get(r, "nextCursor"));
	if (cursor != NULL && ++srv->pages < MCP_PAGES_MAX &&
	    json_array_size(srv->paging) < MCP_TOOLS_MAX) {
		mcp_list(srv, cursor);
		return;
	}
	mcp_tools_set(srv, srv->paging);
	json_decref(srv->paging);
	srv->paging = NULL;
	if (srv->state == MCP_STARTING) {
		srv->state = MCP_READY;
		log_info("mcp %s/%s: ready (protocol %s, %zu tools)",
		    srv->ms != NULL ? srv->ms->sid : "-", srv->name,
		    srv->protocol, srv->ntools);
		mcp_timer(srv, mcp_conf_int(srv, "idle_ms", MCP_IDLE_MS) > 0 ?
		    10000 : 3600000);
		mcp_ready(srv);
	}
	mcp_calls_flush(srv);
	if (srv->relist) {
		srv->relist = 0;
		srv->paging = json_array();
		srv->pages = 0;
		mcp_list(srv, NULL);
	}
}

/* Work of a server that just became ready. */
static void
mcp_ready(struct mcp_server *srv)
{
	if (srv->http != NULL)
		mcp_http_ready(srv);
}

/* A message that does not make sense: counted, and the server ended past a bound. */
void
mcp_bad(struct mcp_server *srv, const char *what)
{
	if (srv->bad < 5)
		log_warn("mcp %s/%s: %s", srv->ms != NULL ? srv->ms->sid : "-",
		    srv->name, what);
	if (++srv->bad >= MCP_BAD_MAX) {
		mcp_error(srv, "ended: %u invalid messages (the last: %s)",
		    srv->bad, what);
		mcp_kill(srv, "invalid messages");
	}
}

/* One message from the server, whatever carried it. */
void
mcp_message(struct mcp_server *srv, json_t *m)
{
	json_t		*idv, *mv;
	const char	*method;
	int64_t		 id;

	idv = json_object_get(m, "id");
	mv = json_object_get(m, "method");
	method = json_string_value(mv);
	if (!json_is_object(m) || !json_is_string(json_object_get(m,
	    "jsonrpc")) || strcmp(json_string_value(json_object_get(m,
	    "jsonrpc")), "2.0") != 0 || (mv != NULL && method == NULL)) {
		mcp_bad(srv, "a message that is not JSON-RPC 2.0");
	} else if (method != NULL && idv != NULL) {
		/* A request of the server's: we answer ping, nothing else. */
		if (strcmp(method, "ping") == 0)
			(void)mcp_send(srv, json_pack("{s:O, s:{}}", "id", idv,
			    "result"));
		else
			(void)mcp_send(srv, json_pack("{s:O, s:{s:i, s:s}}",
			    "id", idv, "error", "code", -32601, "message",
			    "gbr does not offer this to MCP servers"));
	} else if (method != NULL) {
		if (strcmp(method, "notifications/tools/list_changed") == 0 &&
		    srv->state == MCP_READY) {
			if (srv->list_id != 0)
				srv->relist = 1;
			else {
				json_decref(srv->paging);
				srv->paging = json_array();
				srv->pages = 0;
				mcp_list(srv, NULL);
			}
		}
	} else if (!json_is_integer(idv) || (id = json_integer_value(idv)) <= 0 ||
	    (json_object_get(m, "result") == NULL &&
	    !json_is_object(json_object_get(m, "error")))) {
		mcp_bad(srv, "an answer without a valid id, result or error");
	} else if (id == srv->init_id)
		mcp_initialized(srv, m);
	else if (id == srv->list_id) {
		if (json_object_get(m, "error") != NULL) {
			mcp_error(srv, "tools/list: the server refused it");
			srv->list_id = 0;
			mcp_kill(srv, "tools/list failed");
		} else
			mcp_listed(srv, m);
	} else
		/* An answer to a call that ended (too late) is dropped. */
		(void)mcp_call_answer(srv, id, m);
}

/* One line from the server's stdout. */
static void
mcp_line(struct mcp_server *srv, const char *line, size_t len)
{
	json_error_t	 jerr;
	json_t		*m;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (len == 0)
		return;
	if ((m = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		mcp_bad(srv, "a line that is not JSON");
		return;
	}
	mcp_message(srv, m);
	json_decref(m);
}

/* Output from the server: stdout lines are messages, stderr is logged. */
static void
mcp_on_output(void *arg, enum runner_stream s, const char *buf, size_t len)
{
	struct mcp_server	*srv = arg;
	const char		*nl;
	size_t			 n, want;

	if (srv->killing)
		return;
	if (s == RUNNER_STDERR) {
		for (; len > 0; buf++, len--) {
			if (*buf == '\n')
				mcp_err_line(srv);
			else if (srv->err_len < MCP_ERRLINE_MAX)
				srv->err[srv->err_len++] = *buf;
			else
				srv->err_cut = 1;
		}
		return;
	}
	while (len > 0 && !srv->killing) {
		nl = memchr(buf, '\n', len);
		n = nl != NULL ? (size_t)(nl - buf) : len;
		if (srv->out_len + n > MCP_LINE_MAX) {
			mcp_error(srv, "ended: it sent a line longer than %d "
			    "bytes", MCP_LINE_MAX);
			mcp_kill(srv, "a line too long");
			srv->out_len = 0;
			return;
		}
		if (nl != NULL && srv->out_len == 0)
			mcp_line(srv, buf, n);	/* whole: no copy */
		else {
			if (srv->out_len + n + 1 > srv->out_cap) {
				want = srv->out_cap == 0 ? 4096 : srv->out_cap;
				while (want < srv->out_len + n + 1)
					want *= 2;
				srv->out = xreallocarray(srv->out, want, 1);
				srv->out_cap = want;
			}
			memcpy(srv->out + srv->out_len, buf, n);
			srv->out_len += n;
			if (nl != NULL) {
				want = srv->out_len;
				srv->out_len = 0;
				mcp_line(srv, srv->out, want);
			}
		}
		if (nl == NULL)
			break;
		buf += n + 1;
		len -= n + 1;
	}
}

/* The server's process ended. */
static void
mcp_on_done(void *arg, const struct runner_result *r)
{
	struct mcp_server	*srv = arg;
	char			 how[96];

	srv->job = NULL;
	mcp_err_line(srv);
	if (srv->err_dropped > 0)
		log_info("mcp %s/%s: %llu stderr lines were not logged",
		    srv->ms != NULL ? srv->ms->sid : "-", srv->name,
		    (unsigned long long)srv->err_dropped);
	if (r->failed)
		snprintf(how, sizeof how, "could not start");
	else if (r->exited)
		snprintf(how, sizeof how, "exited with code %d", r->exit_code);
	else if (r->timed_out)
		snprintf(how, sizeof how, "ran for its maximum time");
	else
		snprintf(how, sizeof how, "was killed by %s",
		    runner_signal_name(r->signo));
	if (srv->ms == NULL) {
		/* Detached: nobody waits for it any more. */
		mcp_server_free(srv);
		return;
	}
	if (srv->killing) {
		srv->killing = 0;
		mcp_calls_fail(srv, GBR_ERR_UNAVAILABLE, "MCP server '%s' was "
		    "ended: %s", srv->name, srv->kill_why != NULL ?
		    srv->kill_why : "stopped");
		if (srv->state != MCP_STOPPED) {
			srv->state = MCP_FAILED;
			evtimer_del(srv->timer);
		}
		return;
	}
	if (r->failed)
		mcp_error(srv, "%s: %s", how, r->reason != NULL ? r->reason :
		    "unknown");
	else
		mcp_error(srv, "%s%s%s", how, srv->last_err_line != NULL ?
		    "; its last words: " : "", srv->last_err_line != NULL ?
		    srv->last_err_line : "");
	mcp_server_lost(srv, how, r->failed);
}

/* The server went away unasked (see mcp-int.h). */
void
mcp_server_lost(struct mcp_server *srv, const char *how, int give_up)
{
	long	delay;
	int	i;

	mcp_calls_fail(srv, GBR_ERR_UNAVAILABLE, "MCP server '%s' %s during "
	    "the call", srv->name, how);
	if ((int64_t)clock_mono_ms() - srv->started_ms > MCP_STABLE_MS)
		srv->crashes = 0;
	if (give_up || ++srv->crashes >= MCP_CRASHES_MAX) {
		srv->state = MCP_FAILED;
		evtimer_del(srv->timer);
		return;
	}
	delay = MCP_BACKOFF_MS;
	for (i = 1; i < (int)srv->crashes && delay < MCP_BACKOFF_MAX_MS; i++)
		delay *= 2;
	if (delay > MCP_BACKOFF_MAX_MS)
		delay = MCP_BACKOFF_MAX_MS;
	srv->state = MCP_BACKOFF;
	mcp_timer(srv, delay);
}

/* The server's timer: its start deadline, its backoff, or the idle check. */
static void
mcp_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_server	*srv = arg;
	int			 idle;

	switch (srv->state) {
	case MCP_STARTING:
		mcp_error(srv, "did not finish starting (initialize and "
		    "tools/list) within %d ms", mcp_conf_int(srv, "timeout_ms",
		    MCP_TIMEOUT_MS));
		mcp_kill(srv, "it did not start in time");
		break;
	case MCP_BACKOFF:
		(void)mcp_server_start(srv);
		break;
	case MCP_READY:
		idle = mcp_conf_int(srv, "idle_ms", MCP_IDLE_MS);
		if (idle > 0 && srv->ncalls == 0 &&
		    (int64_t)clock_mono_ms() - srv->used_ms >= idle) {
			log_info("mcp %s/%s: idle, stopped", srv->ms != NULL ?
			    srv->ms->sid : "-", srv->name);
			mcp_server_stop(srv, "idle");
			return;
		}
		mcp_timer(srv, idle > 0 && idle < 10000 ? idle : 10000);
		break;
	default:
		break;
	}
}

/* Starts a server (see mcp-int.h). */
int
mcp_server_start(struct mcp_server *srv)
{
	struct tool_run_ctx	 rc;
	struct env		*env;
	struct sandbox		*sb;
	enum gbr_err		 kind;
	json_t			*args, *names, *v;
	const char		**argv, **nv;
	char			*reason, *cause;
	size_t			 i, n = 0, nn = 0;
	int			 r;

	if (mcp_server_running(srv) || srv->ms == NULL)
		return mcp_server_running(srv) ? 0 : -1;
	evtimer_del(srv->timer);
	if (json_object_get(srv->conf, "url") != NULL) {
		if (mcp_http_open(srv, &cause) != 0) {
			srv->state = MCP_FAILED;
			mcp_error(srv, "%s", cause);
			free(cause);
			return -1;
		}
		srv->bad = 0;
		srv->reinits = 0;
		mcp_started(srv, json_string_value(json_object_get(srv->conf,
		    "url")));
		return 0;
	}
	if (mcp_env(srv->ms->sid, &env, &sb, &cause) != 0) {
		srv->state = MCP_FAILED;
		mcp_error(srv, "%s", cause);
		free(cause);
		return -1;
	}
	args = json_object_get(srv->conf, "args");
	names = json_object_get(srv->conf, "env");
	argv = xcalloc(json_array_size(args) + 2, sizeof *argv);
	argv[n++] = json_string_value(json_object_get(srv->conf, "command"));
	json_array_foreach(args, i, v)
		argv[n++] = json_string_value(v);
	nv = xcalloc(json_array_size(names) + 1, sizeof *nv);
	json_array_foreach(names, i, v)
		nv[nn++] = json_string_value(v);
	memset(&rc, 0, sizeof rc);
	rc.sandbox = sb;
	rc.env = env;
	rc.session = srv->ms->sid;
	srv->killing = 0;
	srv->bad = 0;
	srv->err_len = srv->err_cut = 0;
	srv->err_lines = 0;
	srv->err_dropped = 0;
	srv->out_len = 0;
	r = tool_run_serve(&rc, argv, nv, nn, mcp_on_output, mcp_on_done, srv,
	    &srv->job, &kind, &reason);
	free(argv);
	free(nv);
	if (r != 0) {
		srv->state = MCP_FAILED;
		mcp_error(srv, "cannot start: %s (%s)", reason,
		    gbr_err_kind(kind));
		free(reason);
		return -1;
	}
	mcp_started(srv, json_string_value(json_object_get(srv->conf,
	    "command")));
	return 0;
}

/* Sends initialize: the server is starting (again). */
static void
mcp_initialize(struct mcp_server *srv)
{
	srv->state = MCP_STARTING;
	srv->list_id = 0;
	srv->relist = 0;
	srv->init_id = mcp_request(srv, "initialize", json_pack("{s:s, s:{}, "
	    "s:{s:s, s:s}}", "protocolVersion", MCP_PROTOCOL_LATEST,
	    "capabilities", "clientInfo", "name", "gbrd", "version",
	    PACKAGE_VERSION));
	mcp_timer(srv, mcp_conf_int(srv, "timeout_ms", MCP_TIMEOUT_MS));
}

/* A process or link is up: counted, and initialize goes out. */
static void
mcp_started(struct mcp_server *srv, const char *what)
{
	srv->starts++;
	srv->started_ms = srv->used_ms = (int64_t)clock_mono_ms();
	log_info("mcp %s/%s: starting %s", srv->ms->sid, srv->name, what);
	mcp_initialize(srv);
}

/* Starts initialize again on the same link (see mcp-int.h). */
void
mcp_server_reinit(struct mcp_server *srv)
{
	if (srv->state != MCP_READY && srv->state != MCP_STARTING)
		return;
	log_info("mcp %s/%s: its session expired: initialize again",
	    srv->ms != NULL ? srv->ms->sid : "-", srv->name);
	mcp_initialize(srv);
}

/* Starts what is not running, and says whether one is starting. */
int
mcp_session_starting(const char *sid)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;
	int			 starting = 0;

	if ((ms = mcp_session_sync(sid)) == NULL)
		return 0;
	TAILQ_FOREACH(srv, &ms->servers, entry) {
		if (srv->state == MCP_STOPPED && !srv->listed)
			(void)mcp_server_start(srv);
		if (srv->state == MCP_STARTING)
			starting = 1;
	}
	return starting;
}

/* A session ended. */
void
mcp_session_end(const char *sid)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;

	if ((ms = mcp_session_find(sid)) == NULL)
		return;
	while ((srv = TAILQ_FIRST(&ms->servers)) != NULL)
		mcp_server_detach(srv, "the session ended");
	TAILQ_REMOVE(&mcp_sessions, ms, entry);
	free(ms->sid);
	free(ms);
}

/* Sets the module up. */
void
mcp_init(struct event_base *base, mcp_env_fn fn)
{
	mcp_base = base;
	mcp_env = fn;
	tool_set_provider(&mcp_provider);
}

/* Frees everything after the loop; the runner frees the processes. */
void
mcp_shutdown(void)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;
	struct mcp_call		*c;

	tool_set_provider(NULL);
	while ((ms = TAILQ_FIRST(&mcp_sessions)) != NULL) {
		while ((srv = TAILQ_FIRST(&ms->servers)) != NULL) {
			while ((c = TAILQ_FIRST(&srv->calls)) != NULL) {
				TAILQ_REMOVE(&srv->calls, c, entry);
				event_free(c->ev);
				free(c->tool);
				free(c->remote);
				json_decref(c->args);
				free(c);
			}
			TAILQ_REMOVE(&ms->servers, srv, entry);
			mcp_server_free(srv);
		}
		TAILQ_REMOVE(&mcp_sessions, ms, entry);
		free(ms->sid);
		free(ms);
	}
	mcp_env = NULL;
}

/* Counts for daemon.status. */
json_t *
mcp_status_json(void)
{
	struct mcp_session	*ms;
	struct mcp_server	*srv;
	unsigned		 n = 0, running = 0;

	TAILQ_FOREACH(ms, &mcp_sessions, entry)
		TAILQ_FOREACH(srv, &ms->servers, entry) {
			n++;
			if (mcp_server_running(srv))
				running++;
		}
	return json_pack("{s:i, s:i}", "servers", n, "running", running);
}
