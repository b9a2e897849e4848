/*
 * Anthropic messages: POST {base}/v1/messages with "stream": true, the key
 * in x-api-key and the API version in anthropic-version.
 *
 * Request: "system" is its own field; messages alternate user and
 * assistant, so consecutive messages of one role are merged into one
 * message with several content blocks (tool results, then the next user
 * text). An assistant's tool call is a {"type": "tool_use", "id", "name",
 * "input"} block; its result a {"type": "tool_result", "tool_use_id",
 * "content", "is_error"} block in the next user message.
 *
 * Stream: named events. message_start (input tokens), content_block_start
 * (a text block, or a tool_use block with its id and name),
 * content_block_delta (text_delta text, or input_json_delta partial_json:
 * a tool call's input in fragments), content_block_stop (a tool call is
 * complete: its JSON is parsed and handed over), message_delta
 * (stop_reason, output tokens), message_stop (the answer is complete),
 * ping, and error (overloaded_error and api_error are worth a retry).
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "xmalloc.h"

#define AN_BLOCKS_MAX	256	/* content blocks in one answer */

/* One content block being streamed. */
struct an_block {
	int	 tool;		/* a tool_use block */
	char	*id;
	char	*name;
	char	*json;
	size_t	 len;
	size_t	 cap;
	int	 done;
	int	 oversized;	/* past LLM_TOOL_ARGS_MAX: the rest dropped */
};

struct an_state {
	struct an_block	 blocks[AN_BLOCKS_MAX];
	size_t		 json_total;
	int		 ncalls;
	int		 stopped;	/* message_stop seen */
	char		*stop_reason;
	long long	 input;
	long long	 output;
};

/* Appends one message, merging it into the previous one of the same role. */
static void
an_push(json_t *msgs, const char *role, json_t *blocks)
{
	json_t	*last = json_array_get(msgs, json_array_size(msgs) - 1);

	if (json_array_size(blocks) == 0) {
		json_decref(blocks);
		return;
	}
	if (last != NULL && strcmp(json_string_value(json_object_get(last,
	    "role")), role) == 0) {
		json_array_extend(json_object_get(last, "content"), blocks);
		json_decref(blocks);
		return;
	}
	json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", role,
	    "content", blocks));
}

/* Builds the request. */
static int
an_build(const char *base, const char *model, unsigned max_out,
    const char *system, json_t *conv, json_t *tools, char **url, char **body,
    char **cause)
{
	json_t		*msgs = json_array(), *req, *m, *b, *calls, *c, *t, *ts;
	const char	*role, *content;
	size_t		 i, k;

	json_array_foreach(conv, i, m) {
		role = json_string_value(json_object_get(m, "role"));
		content = json_string_value(json_object_get(m, "content"));
		if (role == NULL)
			goto bad;
		b = json_array();
		if (strcmp(role, "user") == 0) {
			json_array_append_new(b, json_pack("{s:s, s:s}", "type",
			    "text", "text", content != NULL && *content != '\0' ?
			    content : "(empty)"));
			an_push(msgs, "user", b);
		} else if (strcmp(role, "assistant") == 0) {
			if (content != NULL && *content != '\0')
				json_array_append_new(b, json_pack("{s:s, s:s}",
				    "type", "text", "text", content));
			calls = json_object_get(m, "tool_calls");
			json_array_foreach(calls, k, c) {
				if (json_string_value(json_object_get(c, "id")) ==
				    NULL || json_string_value(json_object_get(c,
				    "name")) == NULL || !json_is_object(
				    json_object_get(c, "args"))) {
					json_decref(b);
					goto bad;
				}
				json_array_append_new(b, json_pack("{s:s, s:O, s:O, "
				    "s:O}", "type", "tool_use", "id",
				    json_object_get(c, "id"), "name",
				    json_object_get(c, "name"), "input",
				    json_object_get(c, "args")));
			}
			an_push(msgs, "assistant", b);
		} else if (strcmp(role, "tool") == 0) {
			if (json_string_value(json_object_get(m, "call_id")) == NULL) {
				json_decref(b);
				goto bad;
			}
			json_array_append_new(b, json_pack("{s:s, s:O, s:s, s:b}",
			    "type", "tool_result", "tool_use_id",
			    json_object_get(m, "call_id"), "content",
			    json_string_value(json_object_get(m, "output")) != NULL ?
			    json_string_value(json_object_get(m, "output")) : "",
			    "is_error", !json_is_true(json_object_get(m, "ok"))));
			an_push(msgs, "user", b);
		} else {
			json_decref(b);
			goto bad;
		}
	}
	req = json_pack("{s:s, s:i, s:b, s:o}", "model", model,
	    "max_tokens", (int)max_out, "stream", 1, "messages", msgs);
	if (system != NULL && *system != '\0')
		json_object_set_new(req, "system", json_string(system));
	ts = json_array();
	json_array_foreach(tools, i, t) {
		json_array_append_new(ts, json_pack("{s:O, s:O, s:O}", "name",
		    json_object_get(t, "name"), "description",
		    json_object_get(t, "description"), "input_schema",
		    json_object_get(t, "inputSchema")));
	}
	if (json_array_size(ts) > 0)
		json_object_set_new(req, "tools", ts);
	else
		json_decref(ts);
	*body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (*body == NULL) {
		*cause = xstrdup("the request cannot be encoded");
		return -1;
	}
	*url = xasprintf("%s/v1/messages", base);
	return 0;
bad:
	json_decref(msgs);
	*cause = xasprintf("conversation message %zu is malformed", i);
	return -1;
}

/* x-api-key: KEY. */
static char *
an_auth(const char *key)
{
	return xasprintf("x-api-key: %s", key);
}

static const char *const an_headers[] = {
	"anthropic-version: 2023-06-01",
	NULL
};

static void *
an_new(void)
{
	struct an_state	*st = xcalloc(1, sizeof *st);

	st->input = st->output = -1;
	return st;
}

static void
an_free(void *arg)
{
	struct an_state	*st = arg;
	size_t		 i;

	if (st == NULL)
		return;
	for (i = 0; i < AN_BLOCKS_MAX; i++) {
		free(st->blocks[i].id);
		free(st->blocks[i].name);
		free(st->blocks[i].json);
	}
	free(st->stop_reason);
	free(st);
}

/* The block an event's "index" names, or NULL. */
static struct an_block *
an_block(struct an_state *st, json_t *j, struct llm_perr *err)
{
	json_t	*idx = json_object_get(j, "index");

	if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
	    json_integer_value(idx) >= AN_BLOCKS_MAX) {
		err->message = xstrdup("a content block event has no valid index");
		return NULL;
	}
	return &st->blocks[json_integer_value(idx)];
}

/* Appends a fragment of a tool call's input. */
static void
an_json_add(struct an_state *st, struct an_block *b, const char *s, size_t n)
{
	size_t	cap;

	/* Too large: the call becomes an error for the model (llm.h). */
	if (b->oversized || n > LLM_TOOL_ARGS_MAX - st->json_total) {
		b->oversized = 1;
		return;
	}
	if (b->len + n + 1 > b->cap) {
		cap = b->cap == 0 ? 256 : b->cap;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->json = xreallocarray(b->json, cap, 1);
		b->cap = cap;
	}
	memcpy(b->json + b->len, s, n);
	b->len += n;
	b->json[b->len] = '\0';
	st->json_total += n;
}

/* Sends the usage counts known so far. */
static void
an_usage(struct an_state *st, json_t *u, const struct llm_sink *sink, void *arg)
{
	json_t		*v;
	long long	 in = 0;
	int		 any = 0;

	if (!json_is_object(u))
		return;
	/* Cached prompt tokens are input too. */
	if (json_is_integer(v = json_object_get(u, "input_tokens"))) {
		in += json_integer_value(v);
		any = 1;
	}
	if (json_is_integer(v = json_object_get(u, "cache_creation_input_tokens")))
		in += json_integer_value(v);
	if (json_is_integer(v = json_object_get(u, "cache_read_input_tokens")))
		in += json_integer_value(v);
	if (any)
		st->input = in;
	if (json_is_integer(v = json_object_get(u, "output_tokens")))
		st->output = json_integer_value(v);
	sink->usage(arg, st->input, st->output);
}

/* One SSE event. */
static int
an_parse(void *arg0, const char *event, const char *data, size_t len,
    const struct llm_sink *sink, void *arg, struct llm_perr *err)
{
	struct an_state	*st = arg0;
	struct an_block	*b;
	json_t		*j, *cb, *d, *e, *args;
	json_error_t	 jerr;
	const char	*type, *s;
	int		 r = 0;

	if ((j = llm_json_parse(data, len, &jerr)) == NULL ||
	    !json_is_object(j)) {
		json_decref(j);
		err->message = xstrdup("an event of the stream is not JSON");
		return -1;
	}
	type = json_string_value(json_object_get(j, "type"));
	if (type == NULL)
		type = event;
	if (strcmp(type, "message_start") == 0) {
		an_usage(st, json_object_get(json_object_get(j, "message"),
		    "usage"), sink, arg);
	} else if (strcmp(type, "content_block_start") == 0) {
		if ((b = an_block(st, j, err)) == NULL)
			goto fail;
		cb = json_object_get(j, "content_block");
		s = json_string_value(json_object_get(cb, "type"));
		if (s != NULL && strcmp(s, "tool_use") == 0 && b->id == NULL) {
			if (++st->ncalls > LLM_TOOL_CALLS_MAX) {
				err->message = xasprintf("more than %d tool calls "
				    "in one answer", LLM_TOOL_CALLS_MAX);
				goto fail;
			}
			b->tool = 1;
			s = json_string_value(json_object_get(cb, "id"));
			b->id = xstrndup(s != NULL ? s : "", 256);
			s = json_string_value(json_object_get(cb, "name"));
			b->name = xstrndup(s != NULL ? s : "", 256);
		} else if (s != NULL && strcmp(s, "text") == 0 &&
		    (s = json_string_value(json_object_get(cb, "text"))) != NULL &&
		    *s != '\0')
			sink->text(arg, s, strlen(s));
	} else if (strcmp(type, "content_block_delta") == 0) {
		if ((b = an_block(st, j, err)) == NULL)
			goto fail;
		d = json_object_get(j, "delta");
		s = json_string_value(json_object_get(d, "type"));
		if (s != NULL && strcmp(s, "text_delta") == 0) {
			s = json_string_value(json_object_get(d, "text"));
			if (s != NULL && *s != '\0')
				sink->text(arg, s, json_string_length(
				    json_object_get(d, "text")));
		} else if (s != NULL && strcmp(s, "input_json_delta") == 0 &&
		    b->tool && !b->done) {
			s = json_string_value(json_object_get(d, "partial_json"));
			if (s != NULL)
				an_json_add(st, b, s, strlen(s));
		}
	} else if (strcmp(type, "content_block_stop") == 0) {
		if ((b = an_block(st, j, err)) == NULL)
			goto fail;
		if (b->tool && !b->done) {
			b->done = 1;
			if (b->oversized)
				args = NULL;
			else if (b->len == 0)
				args = json_object();
			else if ((args = json_loadb(b->json, b->len, 0,
			    &jerr)) != NULL && !json_is_object(args)) {
				json_decref(args);
				args = NULL;
			}
			sink->tool_call(arg, b->id, b->name, args,
			    b->json != NULL ? b->json : "", b->oversized, NULL);
			json_decref(args);
		}
	} else if (strcmp(type, "message_delta") == 0) {
		s = json_string_value(json_object_get(json_object_get(j, "delta"),
		    "stop_reason"));
		if (s != NULL && st->stop_reason == NULL)
			st->stop_reason = xstrndup(s, 64);
		an_usage(st, json_object_get(j, "usage"), sink, arg);
	} else if (strcmp(type, "message_stop") == 0) {
		st->stopped = 1;
	} else if (strcmp(type, "error") == 0) {
		e = json_object_get(j, "error");
		s = json_string_value(json_object_get(e, "type"));
		err->retryable = s != NULL && (strcmp(s, "overloaded_error") == 0 ||
		    strcmp(s, "api_error") == 0 || strcmp(s, "rate_limit_error") == 0);
		s = json_string_value(json_object_get(e, "message"));
		err->message = xstrdup(s != NULL ? s : "the server reported an "
		    "error in the stream");
		goto fail;
	}
	/* ping and unknown events are ignored, as the API asks. */
	json_decref(j);
	return r;
fail:
	json_decref(j);
	return -1;
}

/* The stream ended: complete only after message_stop. */
static int
an_finish(void *arg0, const struct llm_sink *sink, void *arg)
{
	struct an_state	*st = arg0;

	return st->stopped;
}

static const char *
an_stop(void *arg0)
{
	struct an_state	*st = arg0;

	return st->stop_reason;
}

const struct llm_provider llm_anthropic = {
	"anthropic",
	"https://api.anthropic.com",
	"claude-sonnet-4-5",
	"ANTHROPIC_API_KEY",
	4 * 1024 * 1024,
	an_build,
	an_auth,
	an_headers,
	an_new,
	an_free,
	an_parse,
	an_finish,
	an_stop,
};
