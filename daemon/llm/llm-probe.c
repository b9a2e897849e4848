/*
 * The probe for a local Ollama (llm.h's llm_local_*): when no provider is
 * configured, a turn asks whether an Ollama answers on this machine and
 * which model it offers. One GET of base_url/api/tags at a time, with
 * short timeouts and never blocking the loop; its answer is kept for
 * LLM_LOCAL_FRESH_MS, and the turns that asked meanwhile wait in a list
 * (at most LLM_LOCAL_WAITERS_MAX) and are called back from the loop. This
 * file owns the probe and its remembered answer; what a turn does with the
 * model is llm-target.c's (llm_resolve) and agent.c's.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "http.h"
#include "llm.h"
#include "llm-int.h"
#include "log.h"
#include "loop.h"
#include "xmalloc.h"

#define LLM_LOCAL_FRESH_MS	30000	/* a probe's answer is kept this long */
#define LLM_LOCAL_BODY_MAX	(1024 * 1024)
#define LLM_LOCAL_WAITERS_MAX	100000

static struct event_base	*llm_base;	/* the loop's, from llm_init */

/* A turn waiting for the probe's answer. */
struct llm_waiter {
	llm_local_cb		 cb;
	void			*arg;
	struct llm_waiter	*next;
};

static struct {
	struct http_req		*req;
	char			*url;		/* the base probed */
	char			*body;
	size_t			 len;
	int			 status;
	int			 known;		/* an answer is remembered */
	char			*model;		/* the answer: NULL, none found */
	int64_t			 when_ms;
	struct llm_waiter	*waiters;
	unsigned		 nwaiters;
	struct event		*ev;		/* runs the waiters from the loop */
} llm_local;

/* Calls back every waiter with the remembered answer. */
static void
llm_local_run(evutil_socket_t fd, short events, void *arg)
{
	struct llm_waiter	*w;

	while ((w = llm_local.waiters) != NULL) {
		llm_local.waiters = w->next;
		llm_local.nwaiters--;
		w->cb(w->arg, llm_local.model);
		free(w);
	}
}

/* Schedules the waiters' callbacks. */
static void
llm_local_wake(void)
{
	if (llm_local.ev == NULL && (llm_local.ev = event_new(llm_base, -1, 0,
	    llm_local_run, NULL)) == NULL)
		fatalx("event_new failed");
	event_active(llm_local.ev, EV_TIMEOUT, 0);
}

/* The probe's body. */
static int
llm_local_data(void *arg, int status, const char *buf, size_t len)
{
	llm_local.status = status;
	if (len > LLM_LOCAL_BODY_MAX - llm_local.len)
		return -1;
	llm_local.body = xreallocarray(llm_local.body, llm_local.len + len + 1, 1);
	memcpy(llm_local.body + llm_local.len, buf, len);
	llm_local.len += len;
	llm_local.body[llm_local.len] = '\0';
	return 0;
}

/* The probe ended: remember its answer and wake the waiters. */
static void
llm_local_done(void *arg, const struct http_result *res)
{
	json_t		*j, *m;
	json_error_t	 jerr;
	const char	*name;

	llm_local.req = NULL;
	free(llm_local.model);
	llm_local.model = NULL;
	if (res->error == HTTP_OK && res->status == 200 && llm_local.body != NULL &&
	    (j = json_loadb(llm_local.body, llm_local.len, 0, &jerr)) != NULL) {
		m = json_array_get(json_object_get(j, "models"), 0);
		name = json_string_value(json_object_get(m, "name"));
		if (name == NULL)
			name = json_string_value(json_object_get(m, "model"));
		if (name != NULL && llm_model_valid(name))
			llm_local.model = xstrdup(name);
		json_decref(j);
	}
	if (llm_local.model != NULL)
		log_info("llm: a local Ollama at %s offers %s", llm_local.url,
		    llm_local.model);
	else
		log_debug("llm: no local Ollama at %s (%s)", llm_local.url,
		    res->error != HTTP_OK ? res->message : "no model");
	free(llm_local.body);
	llm_local.body = NULL;
	llm_local.len = 0;
	llm_local.known = 1;
	llm_local.when_ms = loop_uptime_ms();
	llm_local_run(-1, 0, NULL);
}

/* Starts a probe nobody waits for (at start, and to refresh an old answer). */
static void
llm_local_refresh(const char *base)
{
	struct http_request	 hr;
	char			*url, *b, *cause;

	if (llm_local.req != NULL)
		return;
	free(llm_local.url);
	llm_local.url = xstrdup(base);
	b = llm_base_trim(base);
	url = xasprintf("%s/api/tags", b);
	free(b);
	memset(&hr, 0, sizeof hr);
	hr.method = "GET";
	hr.url = url;
	hr.connect_timeout_ms = 500;
	hr.total_timeout_ms = 3000;
	hr.max_response_bytes = LLM_LOCAL_BODY_MAX;
	llm_local.req = http_start(&hr, llm_local_data, llm_local_done, NULL,
	    &cause);
	free(url);
	if (llm_local.req == NULL) {
		log_debug("llm: cannot probe for Ollama: %s", cause);
		free(cause);
	}
}

/* Asks a local Ollama which model it offers. */
int
llm_local_probe(const char *base, llm_local_cb cb, void *arg)
{
	struct llm_waiter	*w, **pp;

	if (llm_local.nwaiters >= LLM_LOCAL_WAITERS_MAX)
		return -1;
	if (llm_local.url != NULL && strcmp(llm_local.url, base) != 0 &&
	    llm_local.req == NULL) {
		llm_local.known = 0;
		free(llm_local.url);
		llm_local.url = NULL;
	}
	w = xcalloc(1, sizeof *w);
	w->cb = cb;
	w->arg = arg;
	for (pp = &llm_local.waiters; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = w;
	llm_local.nwaiters++;
	if (llm_local.req != NULL)
		return 0;
	if (llm_local.known &&
	    loop_uptime_ms() - llm_local.when_ms < LLM_LOCAL_FRESH_MS) {
		llm_local_wake();
		return 0;
	}
	llm_local_refresh(base);
	if (llm_local.req == NULL) {
		/* Remember "none" and answer from the loop. */
		free(llm_local.model);
		llm_local.model = NULL;
		llm_local.known = 1;
		llm_local.when_ms = loop_uptime_ms();
		llm_local_wake();
	}
	return 0;
}

/*
 * What a local Ollama offered, if an answer is remembered (1, *model set,
 * NULL for none) even an old one, which is then refreshed in the
 * background; 0 if none is known yet (a probe is started).
 */
int
llm_local_known(const char *base, const char **model)
{
	if (llm_local.known && llm_local.url != NULL &&
	    strcmp(llm_local.url, base) == 0) {
		*model = llm_local.model;
		if (loop_uptime_ms() - llm_local.when_ms >= LLM_LOCAL_FRESH_MS)
			llm_local_refresh(base);
		return 1;
	}
	if (llm_local.req == NULL)
		llm_local_refresh(base);
	return 0;
}

/* Forgets a waiter. */
void
llm_local_forget(void *arg)
{
	struct llm_waiter	*w, **pp;

	for (pp = &llm_local.waiters; (w = *pp) != NULL;) {
		if (w->arg == arg) {
			*pp = w->next;
			llm_local.nwaiters--;
			free(w);
		} else
			pp = &w->next;
	}
}

/* Takes the loop (llm_init). */
void
llm_local_init(struct event_base *base)
{
	llm_base = base;
}

/* Frees the probe's state (llm_shutdown). */
void
llm_local_shutdown(void)
{
	struct llm_waiter	*w;

	if (llm_local.req != NULL)
		http_cancel(llm_local.req);
	while ((w = llm_local.waiters) != NULL) {
		llm_local.waiters = w->next;
		free(w);
	}
	if (llm_local.ev != NULL)
		event_free(llm_local.ev);
	free(llm_local.url);
	free(llm_local.model);
	free(llm_local.body);
	memset(&llm_local, 0, sizeof llm_local);
}
