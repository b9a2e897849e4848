/*
 * The Streamable HTTP transport of the MCP client (MCP 2025-03-26 and
 * later): a server whose profile gives a url instead of a command. There
 * is no process: each message gbrd sends is one POST to the url
 * (Content-Type: application/json, Accept: application/json,
 * text/event-stream), through llm/http.c's libcurl multi interface on
 * the loop. A request's answer comes back either as one JSON body or as
 * an SSE stream that may carry the server's requests and notifications
 * before the answer; what gbrd sends that is not a request (a
 * notification, an answer to a ping) is acknowledged with 202. Every
 * message, whatever carried it, goes through mcp.c's mcp_message, the
 * same checks as a line of a stdio server.
 *
 * The session: an Mcp-Session-Id header on the answer to initialize is
 * kept and sent on every later request, with MCP-Protocol-Version (the
 * revision agreed); a 404 to a request that carried it says the session
 * expired: initialize goes out again and the calls that were sent in the
 * lost session are sent again once the server is ready (the server
 * never ran them). Once ready, a GET opens the server's own SSE stream
 * (list_changed, pings); 405 means it offers none. When the server is
 * stopped its session is ended with a DELETE.
 *
 * Everything that arrives is untrusted and bounded as a stdio server's
 * lines are: a JSON body or an SSE line or event over MCP_LINE_MAX, or an
 * answer over MCP_HTTP_BODY_MAX, ends the server; a connection that
 * cannot be made or breaks is the server dying (a restart after a
 * backoff, its error in last_error); an HTTP error fails what it
 * carried. A POST is bounded in time by the server's timeout_ms.
 *
 * Requests are freed only outside their own callbacks: a callback holds
 * its request busy, and a request ended meanwhile (the server stopped
 * from inside a message) is freed when the callback returns.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "clock.h"
#include "http.h"
#include "log.h"
#include "mcp-int.h"
#include "sse.h"
#include "xmalloc.h"

#define MCP_HTTP_SID_MAX	256	/* bytes of an Mcp-Session-Id */
#define MCP_HTTP_CONNECT_MS	10000	/* at most, and at most timeout_ms */
#define MCP_HTTP_DELETE_MS	5000
#define MCP_HTTP_GET_MAX	(8 * MCP_HTTP_BODY_MAX) /* then opened again */
#define MCP_HTTP_RETRY_MS	1000	/* the GET stream again, doubled */
#define MCP_HTTP_RETRY_MAX_MS	30000
#define MCP_HTTP_ERRBODY	200	/* bytes of an error body quoted */

enum mcp_get_state {
	MCP_GET_NONE,		/* not tried in this session */
	MCP_GET_OPEN,		/* open, or opening again soon */
	MCP_GET_REFUSED,	/* the server offers none */
};

struct mcp_http;

/* One POST (or the GET stream) in flight. */
struct mcp_hreq {
	TAILQ_ENTRY(mcp_hreq)	 entry;
	struct mcp_http		*h;		/* NULL once ended */
	struct http_req		*req;		/* NULL once http.c is done */
	int			 get;		/* the server's stream */
	int64_t			 id;		/* the request carried, or 0 */
	int			 init;		/* it carries initialize */
	unsigned		 gen;		/* the session it was sent in */
	int			 with_session;
	char			 ctype[64];	/* the media type, lower case */
	char			*sid;		/* Mcp-Session-Id heard */
	int			 sid_bad;
	struct sse		*sse;
	char			*body;		/* a JSON body (or an error's) */
	size_t			 len, cap;
	int			 wrong;		/* neither JSON nor SSE */
	int			 answered;	/* its answer came */
	unsigned		 events;
	int			 busy;		/* inside its callbacks */
	int			 dead;
};
TAILQ_HEAD(mcp_hreq_list, mcp_hreq);

/* A url server's link. */
struct mcp_http {
	struct mcp_server	*srv;
	char			*url;
	char			**hdrs;		/* the profile's, "Name: value" */
	size_t			 nhdrs;
	char			*session;	/* Mcp-Session-Id, or NULL */
	unsigned		 gen;		/* sessions so far */
	struct mcp_hreq_list	 reqs;
	unsigned		 nposts;
	struct mcp_hreq		*get;
	enum mcp_get_state	 get_state;
	long			 get_delay;
	struct event		*get_timer;
};

static void	mcp_get_start(struct mcp_http *);

/* Frees a request that ended and is out of its callbacks. */
static void
mcp_hreq_free(struct mcp_hreq *rq)
{
	sse_free(rq->sse);
	free(rq->sid);
	free(rq->body);
	free(rq);
}

/* Ends a request: cancelled, off its link, freed unless busy. */
static void
mcp_hreq_kill(struct mcp_hreq *rq)
{
	if (rq->dead)
		return;
	rq->dead = 1;
	if (rq->req != NULL) {
		http_cancel(rq->req);
		rq->req = NULL;
	}
	if (rq->h != NULL) {
		TAILQ_REMOVE(&rq->h->reqs, rq, entry);
		if (rq->h->get == rq)
			rq->h->get = NULL;
		else
			rq->h->nposts--;
		rq->h = NULL;
	}
	if (rq->busy == 0)
		mcp_hreq_free(rq);
}

/* Leaves a callback: a request that ended meanwhile is freed now. */
static int
mcp_hreq_release(struct mcp_hreq *rq)
{
	if (--rq->busy > 0 || !rq->dead)
		return 0;
	mcp_hreq_free(rq);
	return -1;
}

/* The headers of a request: ours, the session's, the profile's. */
static char **
mcp_http_headers(struct mcp_http *h, int get, int init, size_t *n)
{
	struct mcp_server	*srv = h->srv;
	char			**v;
	size_t			 i;

	v = xcalloc(h->nhdrs + 5, sizeof *v);
	*n = 0;
	if (get)
		v[(*n)++] = xstrdup("Accept: text/event-stream");
	else {
		v[(*n)++] = xstrdup("Content-Type: application/json");
		v[(*n)++] = xstrdup("Accept: application/json, "
		    "text/event-stream");
	}
	if (!init && h->session != NULL)
		v[(*n)++] = xasprintf("Mcp-Session-Id: %s", h->session);
	if (!init && srv->protocol != NULL)
		v[(*n)++] = xasprintf("MCP-Protocol-Version: %s",
		    srv->protocol);
	for (i = 0; i < h->nhdrs; i++)
		v[(*n)++] = xstrdup(h->hdrs[i]);
	return v;
}

/* Frees headers (they may hold a secret). */
static void
mcp_http_headers_free(char **v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		memset(v[i], 0, strlen(v[i]));
		free(v[i]);
	}
	free(v);
}

/* A response header: the media type, and the session initialize gives. */
static void
mcp_hreq_header(void *arg, const char *name, size_t nlen, const char *v,
    size_t vlen)
{
	struct mcp_hreq	*rq = arg;
	size_t		 i;

	if (nlen == 12 && strncasecmp(name, "content-type", 12) == 0) {
		for (i = 0; i < vlen && i < sizeof rq->ctype - 1 && v[i] != ';' &&
		    v[i] != ' '; i++)
			rq->ctype[i] = (v[i] >= 'A' && v[i] <= 'Z') ?
			    v[i] - 'A' + 'a' : v[i];
		rq->ctype[i] = '\0';
	} else if (rq->init && nlen == 14 && strncasecmp(name,
	    "mcp-session-id", 14) == 0) {
		free(rq->sid);
		rq->sid = NULL;
		/* Visible ASCII only, as the specification says. */
		for (i = 0; i < vlen; i++)
			if (v[i] < 0x21 || v[i] > 0x7e)
				break;
		rq->sid_bad = vlen == 0 || vlen > MCP_HTTP_SID_MAX || i < vlen;
		if (!rq->sid_bad)
			rq->sid = xstrndup(v, vlen);
	}
}

/* One message (or a batch of them) of an answer's body or stream. */
static void
mcp_hreq_message(struct mcp_hreq *rq, const char *buf, size_t len)
{
	struct mcp_server	*srv = rq->h->srv;
	json_error_t		 jerr;
	json_t			*m, *one;
	size_t			 i, n;

	while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == '\n' ||
	    buf[len - 1] == ' '))
		len--;
	if (len == 0)
		return;
	if ((m = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		mcp_bad(srv, "an HTTP answer that is not JSON");
		return;
	}
	/* 2025-03-26 allowed a batch: an array of messages. */
	n = json_is_array(m) ? json_array_size(m) : 1;
	for (i = 0; i < n && i < MCP_BAD_MAX && !rq->dead; i++) {
		one = json_is_array(m) ? json_array_get(m, i) : m;
		if (rq->id != 0 && json_object_get(one, "method") == NULL &&
		    json_is_integer(json_object_get(one, "id")) &&
		    json_integer_value(json_object_get(one, "id")) == rq->id)
			rq->answered = 1;
		mcp_message(srv, one);
	}
	json_decref(m);
}

/* An SSE event of an answer or of the server's stream. */
static int
mcp_hreq_event(void *arg, const char *event, const char *data, size_t len)
{
	struct mcp_hreq	*rq = arg;

	if (rq->dead)
		return -1;
	/* Only "message" events carry JSON-RPC; others are ignored. */
	if (strcmp(event, "message") == 0) {
		rq->events++;
		if (rq->get && rq->h != NULL)
			rq->h->get_delay = MCP_HTTP_RETRY_MS;
		mcp_hreq_message(rq, data, len);
	}
	return rq->dead ? -1 : 0;
}

/* The server sent more than one message may be: it is ended. */
static void
mcp_http_too_long(struct mcp_server *srv, const char *what)
{
	mcp_error(srv, "ended: it sent %s longer than %d bytes", what,
	    MCP_LINE_MAX);
	mcp_kill(srv, "a message too long");
}

/* Body bytes of a POST's answer or of the GET stream. */
static int
mcp_hreq_data(void *arg, int status, const char *buf, size_t len)
{
	struct mcp_hreq		*rq = arg;
	struct mcp_http		*h = rq->h;
	struct mcp_server	*srv;
	const char		*cause;
	size_t			 want;

	if (rq->dead || h == NULL)
		return -1;
	srv = h->srv;
	if (status < 200 || status > 299) {
		/* An error's body: a little of it is quoted. */
		if (rq->len < MCP_HTTP_ERRBODY) {
			want = MCP_HTTP_ERRBODY - rq->len < len ?
			    MCP_HTTP_ERRBODY - rq->len : len;
			rq->body = xreallocarray(rq->body, rq->len + want + 1, 1);
			memcpy(rq->body + rq->len, buf, want);
			rq->len += want;
		}
		return 0;
	}
	rq->busy++;
	if (rq->init && rq->sid != NULL && h->session == NULL) {
		h->session = rq->sid;
		rq->sid = NULL;
	}
	if (strcmp(rq->ctype, "text/event-stream") == 0) {
		if (rq->sse == NULL)
			rq->sse = sse_create(MCP_LINE_MAX, MCP_LINE_MAX);
		if (sse_feed(rq->sse, buf, len, mcp_hreq_event, rq, &cause) != 0 &&
		    !rq->dead)
			mcp_http_too_long(srv, "an SSE line or event");
	} else if (strcmp(rq->ctype, "application/json") == 0 && !rq->get) {
		if (rq->len + len > MCP_LINE_MAX)
			mcp_http_too_long(srv, "a JSON answer");
		else {
			if (rq->len + len + 1 > rq->cap) {
				want = rq->cap == 0 ? 4096 : rq->cap;
				while (want < rq->len + len + 1)
					want *= 2;
				rq->body = xreallocarray(rq->body, want, 1);
				rq->cap = want;
			}
			memcpy(rq->body + rq->len, buf, len);
			rq->len += len;
		}
	} else
		rq->wrong = 1;
	if (mcp_hreq_release(rq) != 0 || rq->dead || rq->wrong)
		return -1;
	return 0;
}

/* The link broke or could not be made: the server is lost. */
static void
mcp_http_lost(struct mcp_server *srv, const struct http_result *res)
{
	const char	*url = srv->http->url;
	char		*how;

	switch (res->error) {
	case HTTP_ERR_CONNECT:
		how = xasprintf("cannot connect to %s (%s)", url, res->message);
		break;
	case HTTP_ERR_CONNECT_TIMEOUT:
		how = xasprintf("cannot connect to %s in time", url);
		break;
	case HTTP_ERR_TLS:
		how = xasprintf("TLS with %s failed (%s)", url, res->message);
		break;
	case HTTP_ERR_DROPPED:
		how = xasprintf("dropped the connection (%s)", res->message);
		break;
	default:
		how = xasprintf("HTTP failed (%s)", res->message);
		break;
	}
	mcp_http_close(srv);
	mcp_error(srv, "%s", how);
	mcp_server_lost(srv, how, 0);
	free(how);
}

/* A 404 to a request that carried the session: it expired. */
static void
mcp_http_expired(struct mcp_hreq *rq)
{
	struct mcp_http		*h = rq->h;
	struct mcp_server	*srv = h->srv;
	int64_t			 now = (int64_t)clock_mono_ms();

	if (rq->gen == h->gen) {
		h->gen++;
		free(h->session);
		h->session = NULL;
		if (h->get != NULL)
			mcp_hreq_kill(h->get);
		evtimer_del(h->get_timer);
		h->get_state = MCP_GET_NONE;
		if (now - srv->reinit_ms > MCP_STABLE_MS)
			srv->reinits = 0;
		srv->reinit_ms = now;
		if (++srv->reinits > MCP_CRASHES_MAX) {
			mcp_error(srv, "its session expired %u times in a row",
			    srv->reinits);
			mcp_kill(srv, "its sessions keep expiring");
			return;
		}
		mcp_error(srv, "its session expired (HTTP 404): initialized "
		    "again");
		mcp_server_reinit(srv);
	}
	/* A call the lost session never ran goes again. */
	if (rq->id != 0 && !rq->dead)
		(void)mcp_call_requeue(srv, rq->id);
}

/* A POST that carried a request ended without its answer. */
static void
mcp_hreq_unanswered(struct mcp_hreq *rq, const char *why)
{
	struct mcp_server	*srv = rq->h->srv;
	char			*msg;

	if (rq->id == srv->init_id || rq->id == srv->list_id) {
		mcp_error(srv, "%s: %s", rq->id == srv->init_id ?
		    "initialize" : "tools/list", why);
		mcp_kill(srv, rq->id == srv->init_id ? "initialize failed" :
		    "tools/list failed");
		return;
	}
	msg = xasprintf("MCP server '%s': %s", srv->name, why);
	mcp_call_lost(srv, rq->id, GBR_ERR_UNAVAILABLE, msg);
	free(msg);
}

/* The GET stream ended: opened again later, unless the server offers none. */
static void
mcp_get_done(struct mcp_hreq *rq, const struct http_result *res)
{
	struct mcp_http		*h = rq->h;
	struct mcp_server	*srv = h->srv;
	struct timeval		 tv;

	if (res->error == HTTP_ERR_CONNECT ||
	    res->error == HTTP_ERR_CONNECT_TIMEOUT) {
		/* Nobody listens there any more: the server is gone. */
		mcp_http_lost(srv, res);
		return;
	}
	if (res->status == 404 && rq->with_session) {
		mcp_http_expired(rq);
		return;
	}
	if (res->error == HTTP_OK && (res->status < 200 || res->status > 299 ||
	    (res->received > 0 && strcmp(rq->ctype, "text/event-stream") !=
	    0))) {
		h->get_state = MCP_GET_REFUSED;
		if (res->status != 405)
			log_info("mcp %s/%s: no stream from the server (HTTP %d)",
			    srv->ms != NULL ? srv->ms->sid : "-", srv->name,
			    res->status);
		return;
	}
	if (rq->wrong) {
		h->get_state = MCP_GET_REFUSED;
		return;
	}
	if (srv->state != MCP_READY)
		return;
	tv.tv_sec = h->get_delay / 1000;
	tv.tv_usec = (h->get_delay % 1000) * 1000;
	evtimer_add(h->get_timer, &tv);
	if (h->get_delay < MCP_HTTP_RETRY_MAX_MS)
		h->get_delay *= 2;
}

/* The end of a POST (or of the GET stream). */
static void
mcp_hreq_done(void *arg, const struct http_result *res)
{
	struct mcp_hreq		*rq = arg;
	struct mcp_server	*srv;
	char			*esc, *why;

	rq->req = NULL;		/* http.c frees it when we return */
	if (rq->dead || rq->h == NULL)
		return;		/* not reached: a cancelled request is silent */
	srv = rq->h->srv;
	rq->busy++;
	if (rq->get) {
		mcp_get_done(rq, res);
		goto out;
	}
	if (res->error == HTTP_ERR_TOO_LARGE) {
		mcp_error(srv, "ended: it sent an HTTP answer larger than %d "
		    "bytes", MCP_HTTP_BODY_MAX);
		mcp_kill(srv, "an answer too large");
		goto out;
	}
	if (res->error == HTTP_ERR_TIMEOUT && rq->id == 0) {
		log_warn("mcp %s/%s: a notification's POST got no answer in "
		    "time", srv->ms != NULL ? srv->ms->sid : "-", srv->name);
		goto out;
	}
	if (res->error != HTTP_OK && !(res->error == HTTP_ERR_STOPPED &&
	    rq->wrong)) {
		if (res->error == HTTP_ERR_TIMEOUT)
			mcp_hreq_unanswered(rq, "no answer in time");
		else
			mcp_http_lost(srv, res);
		goto out;
	}
	if (res->status == 404 && rq->with_session) {
		mcp_http_expired(rq);
		goto out;
	}
	if (res->status < 200 || res->status > 299) {
		esc = mcp_escape(rq->body != NULL ? rq->body : "", rq->len);
		why = xasprintf("HTTP %d%s%s", res->status, rq->len > 0 ?
		    ": " : "", esc);
		free(esc);
		if (rq->id == 0)
			log_warn("mcp %s/%s: a notification's POST: %s",
			    srv->ms != NULL ? srv->ms->sid : "-", srv->name, why);
		else if (res->status >= 500 && (rq->id == srv->init_id ||
		    rq->id == srv->list_id)) {
			/* The server (or a proxy) is in trouble: a restart may help. */
			mcp_http_close(srv);
			mcp_error(srv, "%s", why);
			mcp_server_lost(srv, why, 0);
		} else
			mcp_hreq_unanswered(rq, why);
		free(why);
		goto out;
	}
	if (rq->init && rq->sid_bad)
		mcp_bad(srv, "an Mcp-Session-Id that is not 1 to 256 visible "
		    "ASCII characters");
	if (rq->init && rq->sid != NULL && rq->h->session == NULL) {
		rq->h->session = rq->sid;
		rq->sid = NULL;
	}
	if (rq->body != NULL && rq->len > 0 && !rq->dead)
		mcp_hreq_message(rq, rq->body, rq->len);
	if (rq->sse != NULL && sse_end(rq->sse) && !rq->dead)
		log_warn("mcp %s/%s: an SSE answer was cut in an event",
		    srv->ms != NULL ? srv->ms->sid : "-", srv->name);
	if (rq->id != 0 && !rq->answered && !rq->dead) {
		if (rq->wrong)
			mcp_bad(srv, "an HTTP answer that is neither "
			    "application/json nor text/event-stream");
		if (!rq->dead)
			mcp_hreq_unanswered(rq, rq->wrong ? "its HTTP answer is "
			    "neither application/json nor text/event-stream" :
			    res->status == 202 ? "HTTP 202 to a request" :
			    "its HTTP answer ended without the JSON-RPC answer");
	}
out:
	mcp_hreq_kill(rq);
	(void)mcp_hreq_release(rq);
}

/* Starts a request on the link. Returns it, or NULL (logged). */
static struct mcp_hreq *
mcp_hreq_start(struct mcp_http *h, int get, int init, int64_t id,
    const char *body, size_t len)
{
	struct mcp_server	*srv = h->srv;
	struct http_request	 hr;
	struct mcp_hreq		*rq;
	char			**hdrs, *cause;
	size_t			 nh;
	int			 timeout;

	timeout = mcp_conf_int(srv, "timeout_ms", MCP_TIMEOUT_MS);
	rq = xcalloc(1, sizeof *rq);
	rq->get = get;
	rq->init = init;
	rq->id = id;
	rq->gen = h->gen;
	rq->with_session = !init && h->session != NULL;
	hdrs = mcp_http_headers(h, get, init, &nh);
	memset(&hr, 0, sizeof hr);
	hr.method = get ? "GET" : "POST";
	hr.url = h->url;
	hr.headers = (const char *const *)hdrs;
	hr.nheaders = nh;
	hr.body = body;
	hr.body_len = len;
	hr.connect_timeout_ms = timeout < MCP_HTTP_CONNECT_MS ? timeout :
	    MCP_HTTP_CONNECT_MS;
	/* A call ends at timeout_ms on its own; this bounds the rest. */
	hr.total_timeout_ms = get ? 0 : (long)timeout + 5000;
	hr.max_response_bytes = get ? MCP_HTTP_GET_MAX : MCP_HTTP_BODY_MAX;
	hr.header_cb = mcp_hreq_header;
	rq->req = http_start(&hr, mcp_hreq_data, mcp_hreq_done, rq, &cause);
	mcp_http_headers_free(hdrs, nh);
	if (rq->req == NULL) {
		log_warn("mcp %s/%s: %s", srv->ms != NULL ? srv->ms->sid : "-",
		    srv->name, cause);
		free(cause);
		mcp_hreq_free(rq);
		return NULL;
	}
	rq->h = h;
	TAILQ_INSERT_TAIL(&h->reqs, rq, entry);
	if (!get)
		h->nposts++;
	return rq;
}

/* POSTs one message (see mcp-int.h). */
int
mcp_http_send(struct mcp_server *srv, json_t *m)
{
	struct mcp_http	*h = srv->http;
	const char	*method;
	json_t		*idv;
	int64_t		 id = 0;
	char		*s;
	int		 init;

	method = json_string_value(json_object_get(m, "method"));
	idv = json_object_get(m, "id");
	if (method != NULL && json_is_integer(idv))
		id = json_integer_value(idv);
	init = method != NULL && strcmp(method, "initialize") == 0;
	s = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (s == NULL || h == NULL || h->nposts >= MCP_HTTP_POSTS_MAX) {
		if (s != NULL && h != NULL)
			log_warn("mcp %s/%s: %d POSTs in flight: not sent",
			    srv->ms != NULL ? srv->ms->sid : "-", srv->name,
			    MCP_HTTP_POSTS_MAX);
		free(s);
		return -1;
	}
	if (mcp_hreq_start(h, 0, init, id, s, strlen(s)) == NULL) {
		free(s);
		return -1;
	}
	free(s);
	return 0;
}

/* Opens the GET stream. */
static void
mcp_get_start(struct mcp_http *h)
{
	if (h->get != NULL || h->get_state == MCP_GET_REFUSED ||
	    h->srv->state != MCP_READY)
		return;
	h->get_state = MCP_GET_OPEN;
	h->get = mcp_hreq_start(h, 1, 0, 0, NULL, 0);
}

/* The GET stream's retry timer. */
static void
mcp_get_timer(evutil_socket_t fd, short what, void *arg)
{
	mcp_get_start(arg);
}

/* The server is ready (see mcp-int.h). */
void
mcp_http_ready(struct mcp_server *srv)
{
	if (srv->http != NULL)
		mcp_get_start(srv->http);
}

/* A request of ours ended: its POST goes (see mcp-int.h). */
void
mcp_http_forget(struct mcp_server *srv, int64_t id)
{
	struct mcp_hreq	*rq;

	if (srv->http == NULL || id == 0)
		return;
	TAILQ_FOREACH(rq, &srv->http->reqs, entry)
		if (!rq->get && rq->id == id) {
			mcp_hreq_kill(rq);
			return;
		}
}

/* Nothing to do when a DELETE ends: the session is gone either way. */
static int
mcp_delete_data(void *arg, int status, const char *buf, size_t len)
{
	return 0;
}

static void
mcp_delete_done(void *arg, const struct http_result *res)
{
}

/* Closes the link (see mcp-int.h). */
void
mcp_http_close(struct mcp_server *srv)
{
	struct mcp_http		*h = srv->http;
	struct http_request	 hr;
	struct http_req		*req;
	char			**hdrs, *cause;
	size_t			 nh;

	if (h == NULL)
		return;
	if (h->session != NULL) {
		/* Tells the server the session is over (it may say 405). */
		hdrs = mcp_http_headers(h, 1, 0, &nh);
		memset(&hr, 0, sizeof hr);
		hr.method = "DELETE";
		hr.url = h->url;
		hr.headers = (const char *const *)hdrs;
		hr.nheaders = nh;
		hr.connect_timeout_ms = MCP_HTTP_DELETE_MS;
		hr.total_timeout_ms = MCP_HTTP_DELETE_MS;
		hr.max_response_bytes = 4096;
		req = http_start(&hr, mcp_delete_data, mcp_delete_done, NULL,
		    &cause);
		if (req == NULL)
			free(cause);
		mcp_http_headers_free(hdrs, nh);
	}
	srv->http = NULL;
	while (!TAILQ_EMPTY(&h->reqs))
		mcp_hreq_kill(TAILQ_FIRST(&h->reqs));
	event_free(h->get_timer);
	mcp_http_headers_free(h->hdrs, h->nhdrs);
	free(h->session);
	free(h->url);
	free(h);
}

/*
 * The profile's headers ("Name=VARIABLE") with their values from gbrd's
 * environment. Returns 0, or -1 with *cause.
 */
static int
mcp_http_conf_headers(struct mcp_http *h, json_t *l, char **cause)
{
	const char	*item, *eq, *val;
	json_t		*v;
	size_t		 i;

	h->hdrs = xcalloc(json_array_size(l) + 1, sizeof *h->hdrs);
	json_array_foreach(l, i, v) {
		item = json_string_value(v);
		if (item == NULL || (eq = strchr(item, '=')) == NULL)
			continue;	/* env-mcp.c checked the form */
		if ((val = getenv(eq + 1)) == NULL) {
			*cause = xasprintf("cannot start: header %.*s: %s is "
			    "not set in gbrd's environment", (int)(eq - item),
			    item, eq + 1);
			return -1;
		}
		if (strpbrk(val, "\r\n") != NULL) {
			*cause = xasprintf("cannot start: header %.*s: %s "
			    "holds a line break", (int)(eq - item), item, eq + 1);
			return -1;
		}
		h->hdrs[h->nhdrs++] = xasprintf("%.*s: %s", (int)(eq - item),
		    item, val);
	}
	return 0;
}

/* Opens a url server's link (see mcp-int.h). */
int
mcp_http_open(struct mcp_server *srv, char **cause)
{
	struct mcp_http	*h;
	const char	*url;
	char		*host;
	int		 plain;

	url = json_string_value(json_object_get(srv->conf, "url"));
	if (url == NULL || (host = http_url_host(url)) == NULL) {
		*cause = xstrdup("cannot start: url is not an http:// or "
		    "https:// URL");
		return -1;
	}
	/* Headers may carry a secret: plain HTTP only where it stays here. */
	plain = strncasecmp(url, "http://", 7) == 0;
	if (plain && !http_host_loopback(host)) {
		*cause = xasprintf("cannot start: plain http:// is only for a "
		    "loopback host (localhost, 127.0.0.0/8, ::1), not %s: use "
		    "https://", host);
		free(host);
		return -1;
	}
	free(host);
	h = xcalloc(1, sizeof *h);
	h->srv = srv;
	h->url = xstrdup(url);
	h->get_delay = MCP_HTTP_RETRY_MS;
	TAILQ_INIT(&h->reqs);
	if ((h->get_timer = evtimer_new(mcp_base, mcp_get_timer, h)) == NULL)
		fatalx("mcp: cannot create a timer");
	srv->http = h;
	if (mcp_http_conf_headers(h, json_object_get(srv->conf, "headers"),
	    cause) != 0) {
		mcp_http_close(srv);
		return -1;
	}
	return 0;
}

/* What mcp.servers says of the link (see mcp-int.h). */
json_t *
mcp_http_json(const struct mcp_server *srv)
{
	const struct mcp_http	*h = srv->http;
	const char		*stream;

	stream = h->get != NULL ? "open" : h->get_state == MCP_GET_REFUSED ?
	    "not offered" : "none";
	return json_pack("{s:{s:b, s:s, s:i}}", "http", "session",
	    h->session != NULL, "stream", stream, "in_flight", h->nposts);
}
