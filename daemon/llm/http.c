/*
 * libcurl's multi socket interface on libevent: see http.h for the
 * contract.
 *
 * How the pieces fit (curl's docs/examples/multi-event.c and ghiper.c):
 * curl calls http_socket_cb whenever it wants a socket watched for
 * reading, writing or nothing; we keep one persistent event per socket
 * (its pointer is curl_multi_assign'ed to the socket). curl calls
 * http_timer_cb with the time until it next needs waking; one timer event
 * does that. When an event fires we hand the socket (or the timeout) to
 * curl_multi_socket_action, then collect the finished transfers with
 * curl_multi_info_read, one at a time, removing each handle before its
 * done callback runs so that the callback may start or cancel requests
 * freely.
 *
 * Inside curl's own callbacks (data, header, socket, timer) a handle must
 * not be removed. http_cancel called from there (a data callback that ends
 * its session, say) only marks the request; the write callback of a
 * marked request refuses its bytes, and the request is reaped as soon as
 * curl returns. Either way, no callback of a cancelled request runs again.
 *
 * A request started from inside curl's callbacks (an MCP server's SSE
 * event that asks for an answer, say) cannot be added to the multi
 * handle there: it waits, marked pending, and is added as soon as curl
 * returns (http_add_pending).
 *
 * Each request has its own idle timer, re-armed by every byte received:
 * a provider that stops sending in the middle of a stream is noticed
 * after idle_timeout_ms, whatever TCP thinks.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "clock.h"
#include "http.h"
#include "log.h"
#include "xmalloc.h"

#define HTTP_CONNECT_MS		10000
#define HTTP_MAX_RESPONSE	(16 * 1024 * 1024)
#define HTTP_RETRY_AFTER_MAX	(24L * 3600 * 1000)	/* one day */

struct http_req {
	TAILQ_ENTRY(http_req)	 entry;
	CURL			*easy;
	struct curl_slist	*headers;
	char			*body;
	char			*url_log;	/* redacted, for the logs */
	http_data_cb		 data_cb;
	http_done_cb		 done_cb;
	http_header_fn		 header_cb;
	void			*arg;
	struct event		*idle_ev;
	long			 idle_ms;
	size_t			 max_bytes;
	size_t			 received;
	int			 status;
	long			 retry_after_ms;
	int			 cancelled;	/* reaped once curl returns */
	int			 pending;	/* added once curl returns */
	int			 too_large;
	int			 stopped;	/* the data callback said stop */
	int			 idle;		/* the idle timer fired */
	struct timespec		 started;
	char			 errbuf[CURL_ERROR_SIZE];
};
TAILQ_HEAD(http_list, http_req);

/* One watched socket. */
struct http_sock {
	curl_socket_t	 fd;
	struct event	*ev;
};

static struct event_base	*http_base;
static CURLM			*http_multi;
static struct event		*http_timer;
static struct http_list		 http_reqs = TAILQ_HEAD_INITIALIZER(http_reqs);
static unsigned			 http_nreqs;
static int			 http_in_curl;	/* depth of calls into curl */
static int			 http_zombies;	/* cancelled inside curl */
static int			 http_npending;	/* started inside curl */

static void	http_check(void);

/* Frees a request that is off the multi handle and off the list. */
static void
http_req_free(struct http_req *r)
{
	if (r->easy != NULL)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->headers);
	if (r->body != NULL) {
		/* A request body can quote secrets the user pasted. */
		memset(r->body, 0, strlen(r->body));
		free(r->body);
	}
	if (r->idle_ev != NULL)
		event_free(r->idle_ev);
	free(r->url_log);
	free(r);
}

/* Takes a request off the multi handle and the list (outside curl). */
static void
http_req_detach(struct http_req *r)
{
	curl_multi_remove_handle(http_multi, r->easy);
	TAILQ_REMOVE(&http_reqs, r, entry);
	http_nreqs--;
	if (r->idle_ev != NULL)
		evtimer_del(r->idle_ev);
}

/* Frees the requests cancelled while curl was running. */
static void
http_reap(void)
{
	struct http_req	*r, *next;

	if (http_zombies == 0)
		return;
	for (r = TAILQ_FIRST(&http_reqs); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (r->cancelled) {
			http_req_detach(r);
			http_req_free(r);
		}
	}
	http_zombies = 0;
}

/* Re-arms a request's idle timer. */
static void
http_idle_arm(struct http_req *r)
{
	struct timeval	tv;

	if (r->idle_ev == NULL)
		return;
	tv.tv_sec = r->idle_ms / 1000;
	tv.tv_usec = (r->idle_ms % 1000) * 1000;
	evtimer_add(r->idle_ev, &tv);
}

/* curl: body bytes. Returning less than given aborts the transfer. */
static size_t
http_write_cb(char *ptr, size_t size, size_t nmemb, void *userp)
{
	struct http_req	*r = userp;
	size_t		 n = size * nmemb;
	long		 code = 0;

	if (r->cancelled)
		return 0;
	if (n > r->max_bytes - r->received) {
		r->too_large = 1;
		return 0;
	}
	r->received += n;
	http_idle_arm(r);
	if (r->status == 0 && curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE,
	    &code) == CURLE_OK)
		r->status = (int)code;
	if (n > 0 && r->data_cb(r->arg, r->status, ptr, n) != 0) {
		r->stopped = 1;
		return 0;
	}
	/* The callback may have cancelled this very request. */
	return r->cancelled ? 0 : n;
}

/* Parses a Retry-After value: delay-seconds or an HTTP date. */
long
http_parse_retry_after(const char *v, long long now)
{
	const char	*p;
	long long	 secs = 0;
	time_t		 t;

	while (*v == ' ' || *v == '\t')
		v++;
	if (*v >= '0' && *v <= '9') {
		for (p = v; *p >= '0' && *p <= '9'; p++) {
			secs = secs * 10 + (*p - '0');
			if (secs > HTTP_RETRY_AFTER_MAX / 1000)
				return HTTP_RETRY_AFTER_MAX;
		}
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		return *p == '\0' ? (long)(secs * 1000) : -1;
	}
	if ((t = curl_getdate(v, NULL)) == -1)
		return -1;
	if ((long long)t <= now)
		return 0;
	if ((long long)t - now > HTTP_RETRY_AFTER_MAX / 1000)
		return HTTP_RETRY_AFTER_MAX;
	return (long)(((long long)t - now) * 1000);
}

/* Hands a "Name: value" header line to the request's header callback. */
static void
http_header_split(struct http_req *r, const char *buf, size_t n)
{
	const char	*colon, *v, *end = buf + n;

	if ((colon = memchr(buf, ':', n)) == NULL || colon == buf)
		return;
	v = colon + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' ||
	    end[-1] == ' ' || end[-1] == '\t'))
		end--;
	r->header_cb(r->arg, buf, (size_t)(colon - buf), v, (size_t)(end - v));
}

/* curl: one header line (the status line included). */
static size_t
http_header_cb(char *buf, size_t size, size_t nitems, void *userp)
{
	struct http_req	*r = userp;
	size_t		 n = size * nitems;
	char		 v[128];
	size_t		 vlen;

	if (r->cancelled)
		return 0;
	http_idle_arm(r);
	if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		/* A new response (after a 1xx): forget the last one's headers. */
		r->retry_after_ms = -1;
		r->status = 0;
		return n;
	}
	if (n > 12 && strncasecmp(buf, "retry-after:", 12) == 0) {
		vlen = n - 12;
		if (vlen >= sizeof v)
			vlen = sizeof v - 1;
		memcpy(v, buf + 12, vlen);
		v[vlen] = '\0';
		r->retry_after_ms = http_parse_retry_after(v, (long long)time(NULL));
	}
	if (r->header_cb != NULL)
		http_header_split(r, buf, n);
	/* The callback may have cancelled this very request. */
	return r->cancelled ? 0 : n;
}

/* The idle timer fired: nothing arrived for too long. */
static void
http_idle_cb(evutil_socket_t fd, short events, void *arg)
{
	struct http_req		*r = arg;
	struct http_result	 res;
	char			*msg;

	if (r->cancelled)
		return;
	r->idle = 1;
	http_req_detach(r);
	memset(&res, 0, sizeof res);
	res.status = r->status;
	res.error = HTTP_ERR_IDLE;
	msg = xasprintf("nothing arrived for %ld ms", r->idle_ms);
	res.message = msg;
	res.retry_after_ms = r->retry_after_ms;
	res.received = r->received;
	res.elapsed_ms = (long)clock_since_ms(&r->started);
	log_debug("http: %s: %s", r->url_log, msg);
	r->done_cb(r->arg, &res);
	free(msg);
	http_req_free(r);
}

/* Maps a finished transfer to a result. */
static enum http_error
http_classify(struct http_req *r, CURLcode code)
{
	if (r->too_large)
		return HTTP_ERR_TOO_LARGE;
	if (r->stopped)
		return HTTP_ERR_STOPPED;
	switch (code) {
	case CURLE_OK:
		return HTTP_OK;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
		return HTTP_ERR_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		/* Before any byte came back, it was the connect timeout. */
		if (r->status == 0 && r->received == 0) {
			curl_off_t	connect = 0;

			curl_easy_getinfo(r->easy, CURLINFO_CONNECT_TIME_T,
			    &connect);
			if (connect == 0)
				return HTTP_ERR_CONNECT_TIMEOUT;
		}
		return HTTP_ERR_TIMEOUT;
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return HTTP_ERR_DROPPED;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
		return HTTP_ERR_TLS;
	default:
		return HTTP_ERR_OTHER;
	}
}

/* Adds the requests started inside curl's callbacks (outside curl). */
static void
http_add_pending(void)
{
	struct http_req		*r, *next;
	struct http_result	 res;
	CURLMcode		 mc;

	if (http_npending == 0)
		return;
	http_npending = 0;
	for (r = TAILQ_FIRST(&http_reqs); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (!r->pending || r->cancelled)
			continue;
		r->pending = 0;
		http_in_curl++;
		mc = curl_multi_add_handle(http_multi, r->easy);
		http_in_curl--;
		if (mc == CURLM_OK)
			continue;
		/* Its done callback is owed: it says why. */
		http_req_detach(r);
		memset(&res, 0, sizeof res);
		res.error = HTTP_ERR_OTHER;
		res.message = curl_multi_strerror(mc);
		res.retry_after_ms = -1;
		r->done_cb(r->arg, &res);
		http_req_free(r);
		/* The callback may have started or cancelled others. */
		next = TAILQ_FIRST(&http_reqs);
	}
}

/* Collects finished transfers and runs their done callbacks, one by one. */
static void
http_check(void)
{
	struct http_result	 res;
	struct http_req		*r;
	CURLMsg			*msg;
	CURLcode		 code;
	long			 status = 0;
	int			 left;

	http_reap();
	while ((msg = curl_multi_info_read(http_multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		code = msg->data.result;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		http_req_detach(r);
		if (r->cancelled) {
			http_req_free(r);
			continue;
		}
		memset(&res, 0, sizeof res);
		if (curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE,
		    &status) == CURLE_OK && status != 0)
			r->status = (int)status;
		res.status = r->status;
		res.error = http_classify(r, code);
		if (res.error == HTTP_ERR_TOO_LARGE)
			res.message = "the response is larger than the limit";
		else if (res.error == HTTP_ERR_STOPPED)
			res.message = "stopped by the reader";
		else if (res.error != HTTP_OK)
			res.message = r->errbuf[0] != '\0' ? r->errbuf :
			    curl_easy_strerror(code);
		else
			res.message = "";
		res.retry_after_ms = r->retry_after_ms;
		res.received = r->received;
		res.elapsed_ms = (long)clock_since_ms(&r->started);
		log_debug("http: %s: status %d, %zu bytes in %ld ms%s%s",
		    r->url_log, res.status, res.received, res.elapsed_ms,
		    res.error != HTTP_OK ? ": " : "", res.message);
		r->done_cb(r->arg, &res);
		http_req_free(r);
	}
	http_add_pending();
}

/* A watched socket is ready. */
static void
http_event_cb(evutil_socket_t fd, short events, void *arg)
{
	int	flags = 0, running;

	if (events & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (events & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	http_in_curl++;
	curl_multi_socket_action(http_multi, fd, flags, &running);
	http_in_curl--;
	http_check();
}

/* curl's timeout expired. */
static void
http_timer_event_cb(evutil_socket_t fd, short events, void *arg)
{
	int	running;

	http_in_curl++;
	curl_multi_socket_action(http_multi, CURL_SOCKET_TIMEOUT, 0, &running);
	http_in_curl--;
	http_check();
}

/* curl: wake me in timeout_ms (-1: never). */
static int
http_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct timeval	tv;

	if (timeout_ms < 0) {
		evtimer_del(http_timer);
		return 0;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	evtimer_add(http_timer, &tv);
	return 0;
}

/* curl: watch (or stop watching) a socket. */
static int
http_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp,
    void *socketp)
{
	struct http_sock	*hs = socketp;
	short			 kind;

	if (what == CURL_POLL_REMOVE) {
		if (hs != NULL) {
			event_free(hs->ev);
			free(hs);
		}
		curl_multi_assign(http_multi, fd, NULL);
		return 0;
	}
	kind = EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
	    ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
	if (hs == NULL) {
		hs = xcalloc(1, sizeof *hs);
		hs->fd = fd;
		curl_multi_assign(http_multi, fd, hs);
	} else
		event_free(hs->ev);
	if ((hs->ev = event_new(http_base, fd, kind, http_event_cb, NULL)) == NULL ||
	    event_add(hs->ev, NULL) != 0)
		fatalx("http: cannot watch a socket");
	return 0;
}

/* Sets up the multi handle. */
int
http_init(struct event_base *base, char **cause)
{
	http_base = base;
	if ((http_multi = curl_multi_init()) == NULL) {
		*cause = xstrdup("curl_multi_init failed");
		return -1;
	}
	if ((http_timer = evtimer_new(base, http_timer_event_cb, NULL)) == NULL)
		fatalx("evtimer_new failed");
	curl_multi_setopt(http_multi, CURLMOPT_SOCKETFUNCTION, http_socket_cb);
	curl_multi_setopt(http_multi, CURLMOPT_TIMERFUNCTION, http_timer_cb);
	return 0;
}

/* Cancels everything and frees the multi handle. */
void
http_shutdown(void)
{
	struct http_req	*r;

	if (http_multi == NULL)
		return;
	while ((r = TAILQ_FIRST(&http_reqs)) != NULL) {
		http_req_detach(r);
		http_req_free(r);
	}
	curl_multi_cleanup(http_multi);
	http_multi = NULL;
	event_free(http_timer);
	http_timer = NULL;
}

/* Requests in flight. */
unsigned
http_active(void)
{
	return http_nreqs;
}

/* True for localhost and the loopback addresses. */
int
http_host_loopback(const char *host)
{
	size_t	len = strlen(host);

	if (len > 2 && host[0] == '[' && host[len - 1] == ']') {
		host++;
		len -= 2;
	}
	if ((len == 9 && strncasecmp(host, "localhost", 9) == 0) ||
	    (len == 3 && strncmp(host, "::1", 3) == 0))
		return 1;
	return len >= 4 && strncmp(host, "127.", 4) == 0 &&
	    strspn(host, "0123456789.") == len;
}

/* The host of a URL (new), or NULL if the URL does not parse. */
static char *
http_url_host_scheme(const char *url, int *scheme_ok)
{
	CURLU	*u = curl_url();
	char	*host = NULL, *scheme = NULL, *copy = NULL;

	*scheme_ok = 0;
	if (u == NULL)
		return NULL;
	if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK) {
		*scheme_ok = strcasecmp(scheme, "http") == 0 ||
		    strcasecmp(scheme, "https") == 0;
		copy = xstrdup(host);
	}
	curl_free(host);
	curl_free(scheme);
	curl_url_cleanup(u);
	return copy;
}

/* The host of an http:// or https:// URL (new), or NULL. */
char *
http_url_host(const char *url)
{
	char	*host;
	int	 scheme_ok;

	if ((host = http_url_host_scheme(url, &scheme_ok)) != NULL &&
	    !scheme_ok) {
		free(host);
		host = NULL;
	}
	return host;
}

/* Starts a request. */
struct http_req *
http_start(const struct http_request *req, http_data_cb data_cb,
    http_done_cb done_cb, void *arg, char **cause)
{
	struct http_req	*r;
	struct curl_slist *sl;
	CURLMcode	 mc;
	char		*host;
	size_t		 i;
	int		 scheme_ok;

	if (http_multi == NULL) {
		*cause = xstrdup("the HTTP layer is not running");
		return NULL;
	}
	if ((host = http_url_host_scheme(req->url, &scheme_ok)) == NULL ||
	    !scheme_ok) {
		free(host);
		*cause = xstrdup("not an http:// or https:// URL");
		return NULL;
	}
	r = xcalloc(1, sizeof *r);
	r->data_cb = data_cb;
	r->done_cb = done_cb;
	r->header_cb = req->header_cb;
	r->arg = arg;
	r->retry_after_ms = -1;
	r->max_bytes = req->max_response_bytes != 0 ? req->max_response_bytes :
	    HTTP_MAX_RESPONSE;
	r->idle_ms = req->idle_timeout_ms;
	r->url_log = http_redact_url(req->url);
	clock_gettime(CLOCK_MONOTONIC, &r->started);
	if ((r->easy = curl_easy_init()) == NULL) {
		free(host);
		http_req_free(r);
		*cause = xstrdup("curl_easy_init failed");
		return NULL;
	}
	/* curl would add "Expect: 100-continue" to a large POST: a round trip for nothing. */
	r->headers = curl_slist_append(NULL, "Expect:");
	for (i = 0; i < req->nheaders && r->headers != NULL; i++) {
		sl = curl_slist_append(r->headers, req->headers[i]);
		if (sl == NULL)
			break;
		r->headers = sl;
	}
	if (r->headers == NULL || i < req->nheaders)
		fatalx("http: out of memory");
	curl_easy_setopt(r->easy, CURLOPT_URL, req->url);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->easy, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS,
	    (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(r->easy, CURLOPT_USERAGENT, "gbrd/" PACKAGE_VERSION);
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, http_write_cb);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, http_header_cb);
	curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS,
	    req->connect_timeout_ms > 0 ? req->connect_timeout_ms :
	    (long)HTTP_CONNECT_MS);
	if (req->total_timeout_ms > 0)
		curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS,
		    req->total_timeout_ms);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	if (http_host_loopback(host))
		curl_easy_setopt(r->easy, CURLOPT_NOPROXY, "*");
	free(host);
	if (req->method != NULL && strcmp(req->method, "GET") == 0)
		curl_easy_setopt(r->easy, CURLOPT_HTTPGET, 1L);
	else if (req->method != NULL && strcmp(req->method, "DELETE") == 0) {
		curl_easy_setopt(r->easy, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, "DELETE");
	} else {
		r->body = xmalloc(req->body_len + 1);
		if (req->body_len > 0)
			memcpy(r->body, req->body, req->body_len);
		r->body[req->body_len] = '\0';
		curl_easy_setopt(r->easy, CURLOPT_POST, 1L);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)req->body_len);
	}
	if (r->idle_ms > 0) {
		if ((r->idle_ev = evtimer_new(http_base, http_idle_cb, r)) == NULL)
			fatalx("evtimer_new failed");
		http_idle_arm(r);
	}
	if (http_in_curl > 0) {
		/* curl refuses to be called from its own callbacks. */
		r->pending = 1;
		http_npending++;
		TAILQ_INSERT_TAIL(&http_reqs, r, entry);
		http_nreqs++;
		return r;
	}
	http_in_curl++;
	mc = curl_multi_add_handle(http_multi, r->easy);
	http_in_curl--;
	if (mc != CURLM_OK) {
		*cause = xasprintf("curl_multi_add_handle: %s",
		    curl_multi_strerror(mc));
		http_req_free(r);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&http_reqs, r, entry);
	http_nreqs++;
	log_debug("http: %s %s", req->method != NULL ? req->method : "POST",
	    r->url_log);
	return r;
}

/* Ends a request at once; no callback runs. */
void
http_cancel(struct http_req *r)
{
	if (r == NULL || r->cancelled)
		return;
	r->cancelled = 1;
	if (r->idle_ev != NULL)
		evtimer_del(r->idle_ev);
	if (http_in_curl > 0) {
		/* Inside curl: removed as soon as it returns (http_reap). */
		http_zombies++;
		return;
	}
	http_req_detach(r);
	http_req_free(r);
}

/* True if a query parameter's name looks like it carries a credential. */
static int
http_secret_param(const char *name, size_t len)
{
	static const char *const names[] = { "key", "api_key", "apikey",
	    "api-key", "access_token", "token", "auth", "password", "secret",
	    "sig", "signature", "client_secret" };
	size_t	i;

	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == len && strncasecmp(names[i], name,
		    len) == 0)
			return 1;
	return 0;
}

/* A URL safe to log. */
char *
http_redact_url(const char *url)
{
	const char	*p, *q, *at, *slash, *amp, *eq;
	size_t		 cap = strlen(url) * 2 + 32, o = 0, n;
	char		*out = xmalloc(cap);

#define PUT(s, len) do {						\
	memcpy(out + o, (s), (len));					\
	o += (len);							\
} while (0)
	/* scheme://[userinfo@]host... : drop userinfo. */
	if ((p = strstr(url, "://")) != NULL) {
		p += 3;
		PUT(url, (size_t)(p - url));
		slash = p + strcspn(p, "/?#");
		at = memchr(p, '@', slash - p);
		if (at != NULL) {
			PUT("REDACTED@", 9);
			p = at + 1;
		}
	} else
		p = url;
	q = strchr(p, '?');
	if (q == NULL) {
		PUT(p, strlen(p));
		out[o] = '\0';
		return out;
	}
	q++;
	PUT(p, (size_t)(q - p));
	while (*q != '\0' && *q != '#') {
		n = strcspn(q, "&#");
		amp = q + n;
		eq = memchr(q, '=', n);
		if (eq != NULL && http_secret_param(q, eq - q)) {
			PUT(q, (size_t)(eq - q + 1));
			PUT("REDACTED", 8);
		} else
			PUT(q, n);
		q = amp;
		if (*q == '&') {
			PUT("&", 1);
			q++;
		}
	}
	PUT(q, strlen(q));
	out[o] = '\0';
#undef PUT
	return out;
}

/* A header safe to log. */
char *
http_redact_header(const char *h)
{
	static const char *const names[] = { "authorization", "x-api-key",
	    "x-goog-api-key", "api-key", "proxy-authorization", "cookie" };
	const char	*colon = strchr(h, ':');
	size_t		 i, n;

	if (colon == NULL)
		return xstrdup(h);
	n = colon - h;
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == n && strncasecmp(names[i], h, n) == 0)
			return xasprintf("%.*s: REDACTED", (int)n, h);
	return xstrdup(h);
}
