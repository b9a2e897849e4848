/*
 * OpenAI-compatible chat completions (OpenAI, Ollama, llama.cpp's server,
 * vLLM, LM Studio): POST {base}/chat/completions with "stream": true.
 *
 * Request: the system prompt is the first message; an assistant's tool
 * calls are {"id", "type": "function", "function": {"name", "arguments":
 * JSON TEXT}}; a result is {"role": "tool", "tool_call_id", "content"}.
 * "stream_options": {"include_usage": true} asks for a last chunk with
 * the token counts.
 *
 * Stream: "data: {chunk}" events, then "data: [DONE]". Text arrives in
 * choices[0].delta.content; a tool call's arguments arrive in fragments
 * across chunks, in choices[0].delta.tool_calls[] keyed by "index" (the
 * id and name come with the first fragment). The calls are complete when
 * finish_reason arrives (or at [DONE]): only then is each one's JSON
 * parsed and handed over.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "xmalloc.h"

/* One tool call being assembled. */
struct oa_call {
	char	*id;
	char	*name;
	char	*args;
	size_t	 len;
	size_t	 cap;
	int	 used;
	int	 emitted;
	int	 oversized;	/* past LLM_TOOL_ARGS_MAX: the rest dropped */
};

struct oa_state {
	struct oa_call	 calls[LLM_TOOL_CALLS_MAX];
	int		 ncalls;	/* highest index used + 1 */
	size_t		 args_total;
	int		 done;		/* [DONE] seen */
	char		*finish;	/* finish_reason */
};

/* Builds the request. */
static int
oa_build(const char *base, const char *model, unsigned max_out,
    const char *system, json_t *conv, json_t *tools, char **url, char **body,
    char **cause)
{
	json_t		*msgs = json_array(), *req, *m, *tc, *calls, *c, *t, *ts;
	const char	*role, *content;
	char		*args;
	size_t		 i, k;

	if (system != NULL && *system != '\0')
		json_array_append_new(msgs, json_pack("{s:s, s:s}", "role",
		    "system", "content", system));
	json_array_foreach(conv, i, m) {
		role = json_string_value(json_object_get(m, "role"));
		content = json_string_value(json_object_get(m, "content"));
		if (role == NULL)
			goto bad;
		if (strcmp(role, "user") == 0) {
			json_array_append_new(msgs, json_pack("{s:s, s:s}", "role",
			    "user", "content", content != NULL ? content : ""));
		} else if (strcmp(role, "assistant") == 0) {
			calls = json_object_get(m, "tool_calls");
			tc = json_array();
			json_array_foreach(calls, k, c) {
				args = json_dumps(json_object_get(c, "args"),
				    JSON_COMPACT | JSON_ENCODE_ANY);
				if (args == NULL ||
				    json_string_value(json_object_get(c, "id")) == NULL ||
				    json_string_value(json_object_get(c, "name")) == NULL) {
					free(args);
					json_decref(tc);
					goto bad;
				}
				json_array_append_new(tc, json_pack("{s:O, s:s, "
				    "s:{s:O, s:s}}", "id", json_object_get(c, "id"),
				    "type", "function", "function", "name",
				    json_object_get(c, "name"), "arguments", args));
				free(args);
			}
			if (json_array_size(tc) > 0) {
				json_array_append_new(msgs, json_pack("{s:s, s:o, s:o}",
				    "role", "assistant", "content",
				    content != NULL && *content != '\0' ?
				    json_string(content) : json_null(),
				    "tool_calls", tc));
			} else {
				json_decref(tc);
				json_array_append_new(msgs, json_pack("{s:s, s:s}",
				    "role", "assistant", "content",
				    content != NULL ? content : ""));
			}
		} else if (strcmp(role, "tool") == 0) {
			if (json_string_value(json_object_get(m, "call_id")) == NULL)
				goto bad;
			json_array_append_new(msgs, json_pack("{s:s, s:O, s:s}",
			    "role", "tool", "tool_call_id",
			    json_object_get(m, "call_id"), "content",
			    json_string_value(json_object_get(m, "output")) != NULL ?
			    json_string_value(json_object_get(m, "output")) : ""));
		} else
			goto bad;
	}
	req = json_pack("{s:s, s:o, s:b, s:{s:b}}", "model", model,
	    "messages", msgs, "stream", 1, "stream_options", "include_usage", 1);
	ts = json_array();
	json_array_foreach(tools, i, t) {
		json_array_append_new(ts, json_pack("{s:s, s:{s:O, s:O, s:O}}",
		    "type", "function", "function", "name",
		    json_object_get(t, "name"), "description",
		    json_object_get(t, "description"), "parameters",
		    json_object_get(t, "inputSchema")));
	}
	if (json_array_size(ts) > 0)
		json_object_set_new(req, "tools", ts);
	else
		json_decref(ts);
	(void)max_out;	/* optional here; models differ in its name */
	*body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (*body == NULL) {
		*cause = xstrdup("the request cannot be encoded");
		return -1;
	}
	*url = xasprintf("%s/chat/completions", base);
	return 0;
bad:
	json_decref(msgs);
	*cause = xasprintf("conversation message %zu is malformed", i);
	return -1;
}

/* Authorization: Bearer KEY. */
static char *
oa_auth(const char *key)
{
	return xasprintf("Authorization: Bearer %s", key);
}

static void *
oa_new(void)
{
	return xcalloc(1, sizeof(struct oa_state));
}

static void
oa_free(void *arg)
{
	struct oa_state	*st = arg;
	int		 i;

	if (st == NULL)
		return;
	for (i = 0; i < LLM_TOOL_CALLS_MAX; i++) {
		free(st->calls[i].id);
		free(st->calls[i].name);
		free(st->calls[i].args);
	}
	free(st->finish);
	free(st);
}

/* Hands over every assembled call not yet handed over. */
static void
oa_emit(struct oa_state *st, const struct llm_sink *sink, void *arg)
{
	struct oa_call	*c;
	json_t		*args;
	json_error_t	 jerr;
	char		 id[32];
	int		 i;

	for (i = 0; i < st->ncalls; i++) {
		c = &st->calls[i];
		if (!c->used || c->emitted)
			continue;
		c->emitted = 1;
		if (c->oversized)
			args = NULL;
		else if (c->len == 0)
			args = json_object();
		else if ((args = json_loadb(c->args, c->len, 0, &jerr)) != NULL &&
		    !json_is_object(args)) {
			json_decref(args);
			args = NULL;
		}
		if (c->id == NULL) {
			snprintf(id, sizeof id, "gbr_call_%d", i);
			c->id = xstrdup(id);
		}
		sink->tool_call(arg, c->id, c->name != NULL ? c->name : "",
		    args, c->args != NULL ? c->args : "", c->oversized, NULL);
		json_decref(args);
	}
}

/* Adds one fragment of delta.tool_calls. */
static int
oa_fragment(struct oa_state *st, json_t *f, size_t pos, struct llm_perr *err)
{
	json_t		*idx = json_object_get(f, "index"), *fn;
	const char	*s;
	struct oa_call	*c;
	json_int_t	 i = json_is_integer(idx) ? json_integer_value(idx) :
			    (json_int_t)pos;
	size_t		 n, cap;

	if (i < 0 || i >= LLM_TOOL_CALLS_MAX) {
		err->message = xasprintf("more than %d tool calls in one answer",
		    LLM_TOOL_CALLS_MAX);
		return -1;
	}
	c = &st->calls[i];
	if (c->emitted)
		return 0;	/* a fragment after finish_reason: ignored */
	c->used = 1;
	if (i + 1 > st->ncalls)
		st->ncalls = (int)i + 1;
	if ((s = json_string_value(json_object_get(f, "id"))) != NULL &&
	    *s != '\0' && c->id == NULL)
		c->id = xstrndup(s, 256);
	fn = json_object_get(f, "function");
	if ((s = json_string_value(json_object_get(fn, "name"))) != NULL &&
	    *s != '\0' && c->name == NULL)
		c->name = xstrndup(s, 256);
	if ((s = json_string_value(json_object_get(fn, "arguments"))) != NULL) {
		n = strlen(s);
		/* Too large: the call becomes an error for the model (llm.h). */
		if (c->oversized || n > LLM_TOOL_ARGS_MAX - st->args_total) {
			c->oversized = 1;
			return 0;
		}
		if (c->len + n + 1 > c->cap) {
			cap = c->cap == 0 ? 256 : c->cap;
			while (cap < c->len + n + 1)
				cap *= 2;
			c->args = xreallocarray(c->args, cap, 1);
			c->cap = cap;
		}
		memcpy(c->args + c->len, s, n);
		c->len += n;
		c->args[c->len] = '\0';
		st->args_total += n;
	}
	return 0;
}

/* One SSE event: a chunk, or [DONE]. */
static int
oa_parse(void *arg0, const char *event, const char *data, size_t len,
    const struct llm_sink *sink, void *arg, struct llm_perr *err)
{
	struct oa_state	*st = arg0;
	json_t		*j, *e, *u, *ch, *delta, *tcs, *f, *v;
	json_error_t	 jerr;
	const char	*s;
	size_t		 i;

	if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
		st->done = 1;
		oa_emit(st, sink, arg);
		return 0;
	}
	if ((j = llm_json_parse(data, len, &jerr)) == NULL ||
	    !json_is_object(j)) {
		json_decref(j);
		err->message = xstrdup("a chunk of the stream is not JSON");
		return -1;
	}
	if ((e = json_object_get(j, "error")) != NULL) {
		s = json_string_value(json_object_get(e, "message"));
		if (s == NULL)
			s = json_string_value(e);
		err->message = xstrdup(s != NULL ? s : "the server reported an "
		    "error in the stream");
		/* Mid-stream errors are the server's trouble, not the request's. */
		err->retryable = 1;
		json_decref(j);
		return -1;
	}
	u = json_object_get(j, "usage");
	if (json_is_object(u)) {
		long long	in = -1, out = -1;

		if (json_is_integer(v = json_object_get(u, "prompt_tokens")))
			in = json_integer_value(v);
		if (json_is_integer(v = json_object_get(u, "completion_tokens")))
			out = json_integer_value(v);
		sink->usage(arg, in, out);
	}
	ch = json_array_get(json_object_get(j, "choices"), 0);
	if (ch != NULL) {
		delta = json_object_get(ch, "delta");
		if ((s = json_string_value(json_object_get(delta, "content"))) !=
		    NULL && *s != '\0')
			sink->text(arg, s, json_string_length(json_object_get(delta,
			    "content")));
		tcs = json_object_get(delta, "tool_calls");
		json_array_foreach(tcs, i, f) {
			if (oa_fragment(st, f, i, err) != 0) {
				json_decref(j);
				return -1;
			}
		}
		if ((s = json_string_value(json_object_get(ch, "finish_reason"))) !=
		    NULL && st->finish == NULL) {
			st->finish = xstrndup(s, 64);
			oa_emit(st, sink, arg);
		}
	}
	json_decref(j);
	return 0;
}

/* The stream ended. */
static int
oa_finish(void *arg0, const struct llm_sink *sink, void *arg)
{
	struct oa_state	*st = arg0;
	int		 complete = st->done || st->finish != NULL;

	if (complete)
		oa_emit(st, sink, arg);
	return complete;
}

static const char *
oa_stop(void *arg0)
{
	struct oa_state	*st = arg0;

	return st->finish;
}

const struct llm_provider llm_openai = {
	"openai",
	"https://api.openai.com/v1",
	"gpt-4o-mini",
	"OPENAI_API_KEY",
	4 * 1024 * 1024,
	oa_build,
	oa_auth,
	NULL,
	oa_new,
	oa_free,
	oa_parse,
	oa_finish,
	oa_stop,
};
