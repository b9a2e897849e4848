/*
 * HTTP without blocking: libcurl's multi socket interface driven by the
 * one libevent loop (the pattern of curl's docs/examples/multi-event.c).
 * curl tells us which sockets to watch and when to wake it
 * (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION); we keep one event per
 * socket and one timer, and call curl_multi_socket_action when they fire.
 * Any number of requests stream at once while the loop serves everyone
 * else.
 *
 * A request streams its body to a callback as bytes arrive (never kept
 * whole), and ends with one completion callback carrying the HTTP status,
 * Retry-After and a classified error. Bounds set per request: the connect
 * timeout, the idle timeout (no byte for that long ends the transfer), an
 * optional total timeout, and the largest response body accepted.
 * Redirects are never followed (a redirect could carry the credentials
 * elsewhere), only http and https are spoken, and a loopback URL never
 * goes through a proxy.
 *
 * Secrets: headers may hold API keys. They are copied into curl and never
 * logged; debug logs show URLs with their credentials and key-like query
 * parameters redacted (http_redact_url) and headers with sensitive values
 * replaced (http_redact_header).
 *
 * The callbacks follow libuv's rule: if http_start returns NULL, done
 * never runs; otherwise done runs exactly once, later, from the loop,
 * unless the request is cancelled first (then it never runs).
 * http_cancel takes effect at once, also from inside a data callback.
 */
#ifndef GBRD_HTTP_H
#define GBRD_HTTP_H

#include <stddef.h>

struct event_base;
struct http_req;

/* How a transfer ended. */
enum http_error {
	HTTP_OK = 0,		/* a complete response (any status) */
	HTTP_ERR_CONNECT,	/* could not connect (refused, unreachable, DNS) */
	HTTP_ERR_CONNECT_TIMEOUT, /* the connect timeout expired */
	HTTP_ERR_IDLE,		/* no byte within the idle timeout */
	HTTP_ERR_TIMEOUT,	/* the total timeout expired */
	HTTP_ERR_DROPPED,	/* the connection broke during the transfer */
	HTTP_ERR_TOO_LARGE,	/* the response body crossed max_response_bytes */
	HTTP_ERR_STOPPED,	/* the data callback returned -1 */
	HTTP_ERR_TLS,		/* certificate or TLS failure */
	HTTP_ERR_OTHER,		/* anything else curl reported */
};

/*
 * A response header as it arrives (name and value borrowed, not
 * NUL-terminated, the value without its surrounding blanks).
 */
typedef void (*http_header_fn)(void *arg, const char *name, size_t nlen,
    const char *value, size_t vlen);

struct http_request {
	const char		*method;	/* "POST", "GET" or "DELETE" */
	const char		*url;
	const char *const	*headers;	/* "Name: value" each */
	size_t			 nheaders;
	const char		*body;		/* POST body (copied), or NULL */
	size_t			 body_len;
	long			 connect_timeout_ms; /* 0: 10 s */
	long			 idle_timeout_ms;    /* 0: none */
	long			 total_timeout_ms;   /* 0: none */
	size_t			 max_response_bytes; /* 0: 16 MiB */
	http_header_fn		 header_cb;	/* or NULL; given http_start's arg */
};

struct http_result {
	int		 status;	/* the HTTP status, 0 if none arrived */
	enum http_error	 error;
	const char	*message;	/* why, for people ("" when ok); borrowed */
	long		 retry_after_ms; /* from Retry-After, or -1 */
	size_t		 received;	/* body bytes received */
	long		 elapsed_ms;
};

/*
 * Body bytes as they arrive (buf borrowed), with the response's status.
 * Return 0 to go on, -1 to stop the transfer (done then says
 * HTTP_ERR_STOPPED).
 */
typedef int (*http_data_cb)(void *arg, int status, const char *buf,
    size_t len);
/* The end of a request; result is borrowed. */
typedef void (*http_done_cb)(void *arg, const struct http_result *);

/* Sets up the multi handle on the loop; after curl_global_init. */
int		 http_init(struct event_base *, char **cause);
/* Cancels every request (no callback runs) and frees the multi handle. */
void		 http_shutdown(void);
/* Requests in flight (daemon.status). */
unsigned	 http_active(void);

/*
 * Starts a request (everything in req is copied). Returns the request, or
 * NULL with *cause (caller frees): then done never runs.
 */
struct http_req	*http_start(const struct http_request *, http_data_cb,
		    http_done_cb, void *arg, char **cause);
/* Ends a request at once; its callbacks never run again. */
void		 http_cancel(struct http_req *);

/* A URL safe to log: userinfo and key-like query values redacted (new). */
char		*http_redact_url(const char *url);
/* A header safe to log: credential values redacted (new). */
char		*http_redact_header(const char *header);
/* True if host (no brackets needed for IPv6) is a loopback name or address. */
int		 http_host_loopback(const char *host);
/*
 * The host of an http:// or https:// URL (new), or NULL if the URL does
 * not parse or has another scheme.
 */
char		*http_url_host(const char *url);
/* Parses a Retry-After value (seconds or an HTTP date) at now; -1 if bad. */
long		 http_parse_retry_after(const char *value, long long now);

#endif
