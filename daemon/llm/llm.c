/*
 * The provider-neutral half of the LLM layer (see llm.h): building a
 * request with its headers, streaming one call (http.c feeds sse.c, whose
 * events the provider's parser turns into text and tool calls), and
 * classifying how it ended (retryable or not, rate limited, auth, a
 * context overflow, a cut stream), with the key scrubbed from every
 * message. Which provider, URL, model and key a request uses is
 * llm-target.c's; the probe for a local Ollama is llm-probe.c's.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "jsonrpc.h"
#include "llm.h"
#include "llm-int.h"
#include "log.h"
#include "sse.h"
#include "utf8.h"
#include "xmalloc.h"

#define LLM_SSE_LINE_MAX	(8 * 1024 * 1024)
#define LLM_SSE_EVENT_MAX	(8 * 1024 * 1024)

/* Takes the loop (the local server probe's events). */
void
llm_init(struct event_base *base)
{
	llm_local_init(base);
}

/* Statuses worth a retry: rate limits, timeouts, the server's trouble. */
int
llm_status_retryable(int status)
{
	return status == 408 || status == 409 || status == 425 ||
	    status == 429 || (status >= 500 && status <= 599);
}

/* The message of a JSON error body ({"error": {"message"}} and kin). */
char *
llm_error_message(const char *body, size_t len)
{
	json_t		*j, *e, *m;
	json_error_t	 jerr;
	char		*out = NULL;

	if ((j = json_loadb(body, len, 0, &jerr)) == NULL)
		return NULL;
	if (json_is_array(j))
		e = json_object_get(json_array_get(j, 0), "error");
	else
		e = json_object_get(j, "error");
	if (json_is_string(e))
		m = e;
	else if ((m = json_object_get(e, "message")) == NULL)
		m = json_object_get(j, "message");
	if (json_is_string(m))
		out = xstrndup(json_string_value(m), 2048);
	json_decref(j);
	return out;
}

/*
 * The delay a JSON error body asks for, in ms, or -1: Gemini sends no
 * Retry-After header but a google.rpc.RetryInfo in error.details, with
 * retryDelay a Duration ("37s", "1.5s"). At most a day.
 */
long
llm_retry_delay_ms(const char *body, size_t len)
{
	json_t		*j, *e, *d;
	json_error_t	 jerr;
	const char	*type, *v;
	char		*end;
	double		 secs;
	long		 ms = -1;
	size_t		 i;

	if (body == NULL || (j = json_loadb(body, len, 0, &jerr)) == NULL)
		return -1;
	e = json_is_array(j) ? json_array_get(j, 0) : j;
	json_array_foreach(json_object_get(json_object_get(e, "error"),
	    "details"), i, d) {
		type = json_string_value(json_object_get(d, "@type"));
		v = json_string_value(json_object_get(d, "retryDelay"));
		if (type == NULL || v == NULL ||
		    strstr(type, "google.rpc.RetryInfo") == NULL)
			continue;
		errno = 0;
		secs = strtod(v, &end);
		if (errno == 0 && end != v && strcmp(end, "s") == 0 &&
		    secs >= 0 && secs <= 86400)
			ms = (long)(secs * 1000 + 0.5);
		break;
	}
	json_decref(j);
	return ms;
}

/*
 * True when a refusal says the request is longer than the model's context
 * window. Providers say so in words more than in codes: OpenAI's
 * context_length_exceeded ("maximum context length is"), Anthropic's
 * "prompt is too long", Gemini's "input token count ... exceeds the
 * maximum number of tokens", llama.cpp's "exceeds the available context
 * size", Ollama's and others' "context window". A 413 is the same remedy.
 */
static int
llm_context_overflow(int status, const char *body)
{
	static const char *const words[] = {
		"context_length_exceeded", "context length", "context window",
		"context size", "prompt is too long", "input token count",
		"maximum number of tokens", "too many tokens", "reduce the length",
	};
	size_t	i;

	if (status == 413)
		return 1;
	if (status != 400 || body == NULL)
		return 0;
	for (i = 0; i < sizeof words / sizeof words[0]; i++)
		if (strcasestr(body, words[i]) != NULL)
			return 1;
	return 0;
}

/* Builds the request for a target. */
int
llm_request_build(const struct llm_target *t, const char *system,
    json_t *conv, json_t *tools, struct llm_request *rq, char **cause)
{
	const char *const	*h;
	size_t			 n = 0, max;

	memset(rq, 0, sizeof *rq);
	if (t->provider->build(t->base_url, t->model, t->max_output_tokens,
	    system, conv, tools, &rq->url, &rq->body, cause) != 0)
		return -1;
	rq->body_len = strlen(rq->body);
	max = 4;
	for (h = t->provider->headers; h != NULL && *h != NULL; h++)
		max++;
	rq->headers = xcalloc(max, sizeof *rq->headers);
	rq->headers[n++] = xstrdup("Content-Type: application/json");
	rq->headers[n++] = xstrdup("Accept: text/event-stream");
	for (h = t->provider->headers; h != NULL && *h != NULL; h++)
		rq->headers[n++] = xstrdup(*h);
	if (t->key != NULL)
		rq->headers[n++] = t->provider->auth_header(t->key);
	rq->nheaders = n;
	return 0;
}

/* Frees a request (the key in its headers is cleared). */
void
llm_request_free(struct llm_request *rq)
{
	size_t	i;

	for (i = 0; i < rq->nheaders; i++)
		llm_secret_free(rq->headers[i]);
	free(rq->headers);
	free(rq->url);
	free(rq->body);
	memset(rq, 0, sizeof *rq);
}

/* One streamed call. */
struct llm_call {
	const struct llm_provider *p;
	struct http_req		*http;
	struct sse		*sse;
	void			*pst;		/* the provider parser's state */
	struct llm_call_cbs	 cbs;
	void			*arg;
	char			*text;
	size_t			 text_len;
	size_t			 text_cap;
	json_t			*calls;
	long long		 input;
	long long		 output;
	int			 status;
	char			*errbody;	/* a non-2xx body, bounded */
	size_t			 errlen;
	struct llm_perr		 perr;
	int			 failed;	/* perr is set */
	const char		*sse_cause;	/* the SSE parser failed */
	int			 busy;		/* inside our data callback */
	int			 cancelled;
};

/* Frees a call. */
static void
llm_call_free(struct llm_call *c)
{
	sse_free(c->sse);
	if (c->pst != NULL)
		c->p->parser_free(c->pst);
	free(c->text);
	json_decref(c->calls);
	free(c->errbody);
	free(c->perr.message);
	free(c);
}

/* The sink: streamed text. */
static void
llm_sink_text(void *arg, const char *s, size_t len)
{
	struct llm_call	*c = arg;
	size_t		 cap;

	if (c->cancelled || len == 0)
		return;
	if (c->text_len + len + 1 > c->text_cap) {
		cap = c->text_cap == 0 ? 1024 : c->text_cap;
		while (cap < c->text_len + len + 1)
			cap *= 2;
		c->text = xreallocarray(c->text, cap, 1);
		c->text_cap = cap;
	}
	memcpy(c->text + c->text_len, s, len);
	c->text_len += len;
	c->text[c->text_len] = '\0';
	if (c->cbs.text != NULL)
		c->cbs.text(c->arg, s, len);
}

/* The sink: a complete tool call. */
static void
llm_sink_call(void *arg, const char *id, const char *name, json_t *args,
    const char *raw, int oversized, json_t *meta)
{
	struct llm_call	*c = arg;
	json_t		*o, *rs;
	int		 deep;

	/*
	 * Arguments nested as deep as jansson parses would be too deep to read
	 * back once stored in a record or sent in an event: refused as
	 * unusable, with why (see RPC_MAX_NESTING).
	 */
	deep = args != NULL && rpc_nesting_over(args, RPC_MAX_NESTING);
	o = json_pack("{s:s, s:s, s:O?}", "id", id, "name", name, "args",
	    deep ? NULL : args);
	if (o == NULL)
		return;
	if (deep)
		json_object_set_new(o, "args_error", json_sprintf("nested deeper "
		    "than %d levels", RPC_MAX_NESTING));
	else if (oversized)
		json_object_set_new(o, "args_error", json_sprintf("larger than "
		    "%d bytes (the tool calls of one answer, in all): send the "
		    "content in smaller parts", LLM_TOOL_ARGS_MAX));
	if (args == NULL || deep) {
		size_t	n = strlen(raw);

		/* Kept for the model's error message; cut on a character. */
		if (n > 4096)
			n = utf8_cut(raw, 4096);
		json_object_set_new(o, "args", json_null());
		rs = json_stringn(raw, n);
		json_object_set_new(o, "raw", rs != NULL ? rs : json_string(""));
	}
	if (meta != NULL)
		json_object_set(o, "meta", meta);
	json_array_append_new(c->calls, o);
}

/* The sink: token counts. */
static void
llm_sink_usage(void *arg, long long in, long long out)
{
	struct llm_call	*c = arg;

	if (in >= 0)
		c->input = in;
	if (out >= 0)
		c->output = out;
}

static const struct llm_sink llm_call_sink = {
	llm_sink_text, llm_sink_call, llm_sink_usage
};

/* sse: one event for the provider's parser. */
static int
llm_call_event(void *arg, const char *event, const char *data, size_t len)
{
	struct llm_call	*c = arg;

	if (c->p->parse(c->pst, event, data, len, &llm_call_sink, c,
	    &c->perr) != 0) {
		c->failed = 1;
		return -1;
	}
	return c->cancelled ? -1 : 0;
}

/* http: body bytes. */
static int
llm_call_data(void *arg, int status, const char *buf, size_t len)
{
	struct llm_call	*c = arg;
	size_t		 n;
	int		 r = 0;

	c->status = status;
	if (status < 200 || status > 299) {
		/* An error body: keep the start of it for the message. */
		n = LLM_ERROR_BODY_MAX - c->errlen;
		if (n > len)
			n = len;
		if (c->errbody == NULL)
			c->errbody = xmalloc(LLM_ERROR_BODY_MAX + 1);
		memcpy(c->errbody + c->errlen, buf, n);
		c->errlen += n;
		c->errbody[c->errlen] = '\0';
		return 0;
	}
	c->busy++;
	if (sse_feed(c->sse, buf, len, llm_call_event, c, &c->sse_cause) != 0) {
		if (c->failed || c->cancelled)
			c->sse_cause = NULL;
		r = -1;
	}
	c->busy--;
	if (c->cancelled) {
		/* Cancelled from a callback: http.c has forgotten the request. */
		llm_call_free(c);
		return -1;
	}
	return r;
}

/* http: the end. */
static void
llm_call_done(void *arg, const struct http_result *res)
{
	struct llm_call		*c = arg;
	struct llm_outcome	 o;
	char			*msg = NULL, *emsg = NULL, *scrubbed;
	int			 complete;

	/* http.c frees the request after this returns. */
	c->http = NULL;
	memset(&o, 0, sizeof o);
	o.input_tokens = c->input;
	o.output_tokens = c->output;
	o.status = res->status;
	o.retry_after_ms = res->retry_after_ms;
	o.kind = "llm_error";
	if (c->failed) {
		o.retryable = c->perr.retryable;
		o.kind = c->perr.retryable ? "llm_unavailable" : "llm_error";
		msg = xasprintf("%s reported: %s", c->p->name, c->perr.message);
	} else if (c->sse_cause != NULL) {
		msg = xasprintf("the %s stream is malformed: %s", c->p->name,
		    c->sse_cause);
	} else if (res->error == HTTP_OK && res->status >= 200 &&
	    res->status <= 299) {
		complete = c->p->finish(c->pst, &llm_call_sink, c);
		if (sse_end(c->sse) && !complete)
			complete = 0;
		o.input_tokens = c->input;
		o.output_tokens = c->output;
		if (complete) {
			o.ok = 1;
			o.kind = NULL;
		} else {
			o.retryable = 1;
			o.kind = "stream_cut";
			msg = xasprintf("the %s stream ended before the answer "
			    "was complete", c->p->name);
		}
	} else if (res->error == HTTP_OK) {
		emsg = c->errbody != NULL ? llm_error_message(c->errbody,
		    c->errlen) : NULL;
		o.retryable = llm_status_retryable(res->status);
		if (o.retry_after_ms < 0 && c->errbody != NULL)
			o.retry_after_ms = llm_retry_delay_ms(c->errbody,
			    c->errlen);
		if (res->status == 429)
			o.kind = "rate_limited";
		else if (res->status == 401 || res->status == 403)
			o.kind = "auth";
		else if (o.retryable)
			o.kind = "llm_unavailable";
		else if (llm_context_overflow(res->status, c->errbody))
			o.kind = "context_overflow";
		msg = xasprintf("%s answered HTTP %d%s%s%s", c->p->name,
		    res->status, emsg != NULL ? ": " : "",
		    emsg != NULL ? emsg : "", res->status == 401 ||
		    res->status == 403 ? " (check the API key)" : "");
	} else {
		switch (res->error) {
		case HTTP_ERR_CONNECT:
		case HTTP_ERR_CONNECT_TIMEOUT:
			o.retryable = 1;
			o.kind = "llm_unavailable";
			break;
		case HTTP_ERR_IDLE:
		case HTTP_ERR_DROPPED:
		case HTTP_ERR_TIMEOUT:
			o.retryable = 1;
			o.kind = "stream_cut";
			break;
		case HTTP_ERR_TOO_LARGE:
			o.kind = "too_large";
			break;
		default:
			break;
		}
		msg = xasprintf("%s: %s", c->p->name, res->message);
	}
	o.text = c->text != NULL ? c->text : "";
	o.text_len = c->text_len;
	o.tool_calls = c->calls;
	o.stop_reason = c->p->stop_reason(c->pst);
	scrubbed = llm_scrub(msg != NULL ? msg : "");
	o.message = scrubbed;
	c->busy++;
	c->cbs.done(c->arg, &o);
	free(msg);
	free(emsg);
	free(scrubbed);
	llm_call_free(c);
}

/* Starts a call. */
struct llm_call *
llm_call_start(const struct llm_target *t, const struct llm_request *rq,
    const struct llm_call_cbs *cbs, void *arg, char **cause)
{
	struct http_request	 hr;
	struct llm_call		*c = xcalloc(1, sizeof *c);

	c->p = t->provider;
	c->cbs = *cbs;
	c->arg = arg;
	c->input = c->output = -1;
	c->calls = json_array();
	c->sse = sse_create(LLM_SSE_LINE_MAX, LLM_SSE_EVENT_MAX);
	c->pst = c->p->parser_new();
	memset(&hr, 0, sizeof hr);
	hr.method = "POST";
	hr.url = rq->url;
	hr.headers = (const char *const *)rq->headers;
	hr.nheaders = rq->nheaders;
	hr.body = rq->body;
	hr.body_len = rq->body_len;
	hr.connect_timeout_ms = t->connect_timeout_ms;
	hr.idle_timeout_ms = t->idle_timeout_ms;
	hr.max_response_bytes = t->max_response_bytes;
	if ((c->http = http_start(&hr, llm_call_data, llm_call_done, c,
	    cause)) == NULL) {
		llm_call_free(c);
		return NULL;
	}
	return c;
}

/* Stops a call. */
void
llm_call_cancel(struct llm_call *c)
{
	if (c == NULL || c->cancelled)
		return;
	c->cancelled = 1;
	if (c->http != NULL)
		http_cancel(c->http);
	c->http = NULL;
	if (c->busy == 0)
		llm_call_free(c);
}

/* Frees everything: the probe's state, then the keys. */
void
llm_shutdown(void)
{
	llm_local_shutdown();
	llm_keys_clear();
}
