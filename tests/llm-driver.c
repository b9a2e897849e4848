/*
 * Drives one streamed LLM call (http.c, sse.c, llm*.c) on its own event
 * loop, for tests/system/test_llm_http.py against tests/system/fakellm.py:
 * the HTTP layer and the providers are tested over a real socket before
 * (and apart from) the agent loop.
 *
 *   llm-driver --provider P --base URL [--model M] [--key K]
 *       [--idle-ms N] [--connect-ms N] [--max-bytes N] [--cancel-ms N]
 *       [--conv JSON] [--system TEXT] [--probe URL] [--parallel N]
 *
 * Prints one JSON line per streamed text piece {"delta": TEXT, "call": I}
 * and one per call at its end {"call": I, "outcome": {...}}; with
 * --cancel-ms, {"call": I, "cancelled": true} once it is cancelled (no
 * outcome may follow). With --probe, asks that Ollama which model it
 * offers and prints {"probe": MODEL or null}.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "http.h"
#include "llm.h"
#include "loop.h"
#include "log.h"
#include "xmalloc.h"

#define DRIVER_CALLS_MAX	256

static struct event_base	*base;
static int			 running;
static struct llm_call		*calls[DRIVER_CALLS_MAX];

/* Prints one JSON object as a line. */
static void
emit(json_t *o)
{
	char	*s = json_dumps(o, JSON_COMPACT);

	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(o);
}

static void
on_text(void *arg, const char *s, size_t len)
{
	emit(json_pack("{s:s%, s:i}", "delta", s, len, "call",
	    (int)(intptr_t)arg));
}

static void
on_done(void *arg, const struct llm_outcome *o)
{
	int	i = (int)(intptr_t)arg;

	calls[i] = NULL;
	emit(json_pack("{s:i, s:{s:b, s:s%, s:O, s:s?, s:I, s:I, s:b, s:s?, "
	    "s:s, s:i, s:I}}", "call", i, "outcome", "ok", o->ok, "text",
	    o->text, o->text_len, "tool_calls", o->tool_calls, "stop_reason",
	    o->stop_reason, "input_tokens", (json_int_t)o->input_tokens,
	    "output_tokens", (json_int_t)o->output_tokens, "retryable",
	    o->retryable, "kind", o->kind, "message", o->message, "status",
	    o->status, "retry_after_ms", (json_int_t)o->retry_after_ms));
	if (--running == 0)
		event_base_loopexit(base, NULL);
}

static void
on_cancel(evutil_socket_t fd, short ev, void *arg)
{
	int	i;

	for (i = 0; i < DRIVER_CALLS_MAX; i++) {
		if (calls[i] == NULL)
			continue;
		llm_call_cancel(calls[i]);
		calls[i] = NULL;
		emit(json_pack("{s:i, s:b}", "call", i, "cancelled", 1));
		running--;
	}
	/* Stay a little, so that a callback after cancel would show. */
	{
		struct timeval	tv = { 0, 300000 };

		event_base_loopexit(base, &tv);
	}
}

static void
on_probe(void *arg, const char *model)
{
	emit(json_pack("{s:s?}", "probe", model));
	event_base_loopexit(base, NULL);
}

int
main(int argc, char **argv)
{
	struct llm_target	 t;
	struct llm_request	 rq;
	struct llm_call_cbs	 cbs = { on_text, on_done };
	struct event		*ev = NULL;
	struct timeval		 tv;
	const char		*provider = "openai", *url = NULL, *model = "m";
	const char		*key = NULL, *conv_s = NULL, *system = "sys";
	const char		*probe = NULL;
	long			 idle = 0, connect = 0, cancel = 0, maxb = 0;
	int			 i, n = 1;
	json_t			*conv;
	json_error_t		 jerr;
	char			*cause;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--provider") == 0)
			provider = argv[i + 1];
		else if (strcmp(argv[i], "--base") == 0)
			url = argv[i + 1];
		else if (strcmp(argv[i], "--model") == 0)
			model = argv[i + 1];
		else if (strcmp(argv[i], "--key") == 0)
			key = argv[i + 1];
		else if (strcmp(argv[i], "--idle-ms") == 0)
			idle = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--connect-ms") == 0)
			connect = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--max-bytes") == 0)
			maxb = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--cancel-ms") == 0)
			cancel = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--conv") == 0)
			conv_s = argv[i + 1];
		else if (strcmp(argv[i], "--system") == 0)
			system = argv[i + 1];
		else if (strcmp(argv[i], "--probe") == 0)
			probe = argv[i + 1];
		else if (strcmp(argv[i], "--parallel") == 0)
			n = (int)strtol(argv[i + 1], NULL, 10);
		else {
			fprintf(stderr, "llm-driver: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (n < 1 || n > DRIVER_CALLS_MAX)
		return 2;
	log_open("llm-driver", LOG_LEVEL_DEBUG, LOG_DEST_STDERR);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	base = event_base_new();
	llm_init(base);
	loop_init(base, NULL, "");
	if (http_init(base, &cause) != 0) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (probe != NULL) {
		if (llm_local_probe(probe, on_probe, NULL) != 0)
			return 1;
		event_base_dispatch(base);
		llm_shutdown();
		http_shutdown();
		event_base_free(base);
		curl_global_cleanup();
		return 0;
	}
	memset(&t, 0, sizeof t);
	if ((t.provider = llm_provider_find(provider)) == NULL || url == NULL)
		return 2;
	t.base_url = xstrdup(url);
	t.model = xstrdup(model);
	t.key = key != NULL ? xstrdup(key) : NULL;
	if (key != NULL)
		llm_key_set(provider, key);
	t.max_output_tokens = 256;
	t.connect_timeout_ms = connect;
	t.idle_timeout_ms = idle;
	t.max_response_bytes = (size_t)maxb;
	conv = conv_s != NULL ? json_loads(conv_s, 0, &jerr) :
	    json_pack("[{s:s, s:s}]", "role", "user", "content", "hello");
	if (conv == NULL)
		return 2;
	if (llm_request_build(&t, system, conv, NULL, &rq, &cause) != 0) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	for (i = 0; i < n; i++) {
		if ((calls[i] = llm_call_start(&t, &rq, &cbs, (void *)(intptr_t)i,
		    &cause)) == NULL) {
			fprintf(stderr, "%s\n", cause);
			return 1;
		}
		running++;
	}
	if (cancel > 0) {
		ev = evtimer_new(base, on_cancel, NULL);
		tv.tv_sec = cancel / 1000;
		tv.tv_usec = (cancel % 1000) * 1000;
		evtimer_add(ev, &tv);
	}
	event_base_dispatch(base);
	if (ev != NULL)
		event_free(ev);
	llm_request_free(&rq);
	llm_target_free(&t);
	json_decref(conv);
	llm_shutdown();
	http_shutdown();
	event_base_free(base);
	curl_global_cleanup();
	return 0;
}
