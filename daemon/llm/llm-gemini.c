/*
 * Google Gemini: POST {base}/models/{model}:streamGenerateContent?alt=sse
 * with the key in x-goog-api-key (never in the URL, where logs and
 * proxies would keep it).
 *
 * Request: "systemInstruction" holds the system prompt; "contents"
 * alternate "user" and "model" (consecutive ones of a role are merged);
 * an assistant's tool call is a {"functionCall": {"name", "args", "id"?}}
 * part (with the "thoughtSignature" the model gave, sent back verbatim as
 * newer models require); its result a {"functionResponse": {"name",
 * "id"?, "response": {"output"} or {"error"}}} part of the next user
 * content. Tools are "functionDeclarations" whose "parametersJsonSchema"
 * is the tool's JSON Schema as is.
 *
 * Stream: every "data:" event is a whole GenerateContentResponse. Text
 * parts stream (thought parts are skipped); a functionCall part is a
 * complete call; usageMetadata carries the counts so far; finishReason on
 * the candidate says the answer is complete. There is no [DONE]: a stream
 * that ends before a finishReason was cut.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "xmalloc.h"

/* Ids gbr made up for calls the model gave none: never sent back. */
#define GM_SYNTHETIC	"gbr_"

struct gm_state {
	int		 ncalls;
	char		*finish;
};

/* Appends a content, merging it into the previous one of the same role. */
static void
gm_push(json_t *contents, const char *role, json_t *parts)
{
	json_t	*last = json_array_get(contents, json_array_size(contents) - 1);

	if (json_array_size(parts) == 0) {
		json_decref(parts);
		return;
	}
	if (last != NULL && strcmp(json_string_value(json_object_get(last,
	    "role")), role) == 0) {
		json_array_extend(json_object_get(last, "parts"), parts);
		json_decref(parts);
		return;
	}
	json_array_append_new(contents, json_pack("{s:s, s:o}", "role", role,
	    "parts", parts));
}

/* True if an id came from the model (and must go back with the call). */
static int
gm_real_id(const char *id)
{
	return id != NULL && strncmp(id, GM_SYNTHETIC, strlen(GM_SYNTHETIC)) != 0;
}

/* Builds the request. */
static int
gm_build(const char *base, const char *model, unsigned max_out,
    const char *system, json_t *conv, json_t *tools, char **url, char **body,
    char **cause)
{
	json_t		*contents = json_array(), *req, *m, *p, *calls, *c, *t;
	json_t		*decls, *fc, *fr, *sig;
	const char	*role, *content, *id;
	size_t		 i, k;

	json_array_foreach(conv, i, m) {
		role = json_string_value(json_object_get(m, "role"));
		content = json_string_value(json_object_get(m, "content"));
		if (role == NULL)
			goto bad;
		p = json_array();
		if (strcmp(role, "user") == 0) {
			json_array_append_new(p, json_pack("{s:s}", "text",
			    content != NULL ? content : ""));
			gm_push(contents, "user", p);
		} else if (strcmp(role, "assistant") == 0) {
			if (content != NULL && *content != '\0')
				json_array_append_new(p, json_pack("{s:s}", "text",
				    content));
			calls = json_object_get(m, "tool_calls");
			json_array_foreach(calls, k, c) {
				if (json_string_value(json_object_get(c, "name")) ==
				    NULL || !json_is_object(json_object_get(c,
				    "args"))) {
					json_decref(p);
					goto bad;
				}
				fc = json_pack("{s:O, s:O}", "name",
				    json_object_get(c, "name"), "args",
				    json_object_get(c, "args"));
				id = json_string_value(json_object_get(c, "id"));
				if (gm_real_id(id))
					json_object_set_new(fc, "id", json_string(id));
				fc = json_pack("{s:o}", "functionCall", fc);
				sig = json_object_get(json_object_get(c, "meta"),
				    "thoughtSignature");
				if (json_is_string(sig))
					json_object_set(fc, "thoughtSignature", sig);
				json_array_append_new(p, fc);
			}
			gm_push(contents, "model", p);
		} else if (strcmp(role, "tool") == 0) {
			if (json_string_value(json_object_get(m, "name")) == NULL) {
				json_decref(p);
				goto bad;
			}
			fr = json_pack("{s:O, s:{s:s}}", "name",
			    json_object_get(m, "name"), "response",
			    json_is_true(json_object_get(m, "ok")) ? "output" :
			    "error", json_string_value(json_object_get(m,
			    "output")) != NULL ? json_string_value(
			    json_object_get(m, "output")) : "");
			id = json_string_value(json_object_get(m, "call_id"));
			if (gm_real_id(id))
				json_object_set_new(fr, "id", json_string(id));
			json_array_append_new(p, json_pack("{s:o}",
			    "functionResponse", fr));
			gm_push(contents, "user", p);
		} else {
			json_decref(p);
			goto bad;
		}
	}
	req = json_pack("{s:o, s:{s:i}}", "contents", contents,
	    "generationConfig", "maxOutputTokens", (int)max_out);
	if (system != NULL && *system != '\0')
		json_object_set_new(req, "systemInstruction", json_pack(
		    "{s:[{s:s}]}", "parts", "text", system));
	decls = json_array();
	json_array_foreach(tools, i, t) {
		json_array_append_new(decls, json_pack("{s:O, s:O, s:O}", "name",
		    json_object_get(t, "name"), "description",
		    json_object_get(t, "description"), "parametersJsonSchema",
		    json_object_get(t, "inputSchema")));
	}
	if (json_array_size(decls) > 0)
		json_object_set_new(req, "tools", json_pack("[{s:o}]",
		    "functionDeclarations", decls));
	else
		json_decref(decls);
	*body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (*body == NULL) {
		*cause = xstrdup("the request cannot be encoded");
		return -1;
	}
	/* A configured "models/x" name is accepted as well as "x". */
	if (strncmp(model, "models/", 7) == 0)
		model += 7;
	*url = xasprintf("%s/models/%s:streamGenerateContent?alt=sse", base,
	    model);
	return 0;
bad:
	json_decref(contents);
	*cause = xasprintf("conversation message %zu is malformed", i);
	return -1;
}

/* x-goog-api-key: KEY. */
static char *
gm_auth(const char *key)
{
	return xasprintf("x-goog-api-key: %s", key);
}

static void *
gm_new(void)
{
	return xcalloc(1, sizeof(struct gm_state));
}

static void
gm_free(void *arg)
{
	struct gm_state	*st = arg;

	if (st == NULL)
		return;
	free(st->finish);
	free(st);
}

/* True for the error statuses worth a retry. */
static int
gm_retryable(json_t *e)
{
	const char	*status = json_string_value(json_object_get(e, "status"));
	json_int_t	 code = json_integer_value(json_object_get(e, "code"));

	if (code == 429 || code >= 500)
		return 1;
	return status != NULL && (strcmp(status, "RESOURCE_EXHAUSTED") == 0 ||
	    strcmp(status, "UNAVAILABLE") == 0 || strcmp(status, "INTERNAL") == 0);
}

/* One SSE event: a GenerateContentResponse. */
static int
gm_parse(void *arg0, const char *event, const char *data, size_t len,
    const struct llm_sink *sink, void *arg, struct llm_perr *err)
{
	struct gm_state	*st = arg0;
	json_t		*j, *e, *u, *cand, *parts, *part, *fc, *args, *meta, *v;
	json_error_t	 jerr;
	const char	*s, *name, *id;
	char		 gen[32];
	size_t		 i;

	if ((j = llm_json_parse(data, len, &jerr)) == NULL) {
		err->message = xstrdup("an event of the stream is not JSON");
		return -1;
	}
	/* Some proxies wrap the response in an array. */
	if (json_is_array(j) && json_array_size(j) == 1) {
		v = json_incref(json_array_get(j, 0));
		json_decref(j);
		j = v;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		err->message = xstrdup("an event of the stream is not an object");
		return -1;
	}
	if ((e = json_object_get(j, "error")) != NULL) {
		s = json_string_value(json_object_get(e, "message"));
		err->message = xstrdup(s != NULL ? s : "the server reported an "
		    "error in the stream");
		err->retryable = gm_retryable(e);
		json_decref(j);
		return -1;
	}
	if ((s = json_string_value(json_object_get(json_object_get(j,
	    "promptFeedback"), "blockReason"))) != NULL) {
		err->message = xasprintf("the prompt was blocked (%s)", s);
		json_decref(j);
		return -1;
	}
	u = json_object_get(j, "usageMetadata");
	if (json_is_object(u)) {
		long long	out = -1;

		if (json_is_integer(v = json_object_get(u, "candidatesTokenCount")))
			out = json_integer_value(v);
		/* Thinking is billed as output. */
		if (json_is_integer(v = json_object_get(u, "thoughtsTokenCount")))
			out = (out < 0 ? 0 : out) + json_integer_value(v);
		v = json_object_get(u, "promptTokenCount");
		sink->usage(arg, json_is_integer(v) ? json_integer_value(v) : -1,
		    out);
	}
	cand = json_array_get(json_object_get(j, "candidates"), 0);
	parts = json_object_get(json_object_get(cand, "content"), "parts");
	json_array_foreach(parts, i, part) {
		if (json_is_true(json_object_get(part, "thought")))
			continue;
		if ((v = json_object_get(part, "text")) != NULL &&
		    json_is_string(v) && json_string_length(v) > 0) {
			sink->text(arg, json_string_value(v), json_string_length(v));
			continue;
		}
		if ((fc = json_object_get(part, "functionCall")) == NULL)
			continue;
		if (++st->ncalls > LLM_TOOL_CALLS_MAX) {
			err->message = xasprintf("more than %d tool calls in one "
			    "answer", LLM_TOOL_CALLS_MAX);
			json_decref(j);
			return -1;
		}
		name = json_string_value(json_object_get(fc, "name"));
		id = json_string_value(json_object_get(fc, "id"));
		if (id == NULL || *id == '\0' || !gm_real_id(id)) {
			snprintf(gen, sizeof gen, GM_SYNTHETIC "call_%d",
			    st->ncalls);
			id = gen;
		}
		args = json_object_get(fc, "args");
		if (args == NULL)
			args = json_object();
		else if (json_is_object(args))
			json_incref(args);
		else
			args = NULL;
		meta = NULL;
		if (json_is_string(v = json_object_get(part, "thoughtSignature")))
			meta = json_pack("{s:O}", "thoughtSignature", v);
		{
			char	*raw = json_dumps(json_object_get(fc, "args"),
			    JSON_COMPACT | JSON_ENCODE_ANY);

			sink->tool_call(arg, id, name != NULL ? name : "", args,
			    raw != NULL ? raw : "", 0, meta);
			free(raw);
		}
		json_decref(args);
		json_decref(meta);
	}
	if ((s = json_string_value(json_object_get(cand, "finishReason"))) !=
	    NULL && st->finish == NULL)
		st->finish = xstrndup(s, 64);
	json_decref(j);
	return 0;
}

/* The stream ended: complete once a finishReason came. */
static int
gm_finish(void *arg0, const struct llm_sink *sink, void *arg)
{
	struct gm_state	*st = arg0;

	return st->finish != NULL;
}

static const char *
gm_stop(void *arg0)
{
	struct gm_state	*st = arg0;

	return st->finish;
}

const struct llm_provider llm_gemini = {
	"gemini",
	"https://generativelanguage.googleapis.com/v1beta",
	"gemini-2.5-flash",
	"GEMINI_API_KEY",
	4 * 1024 * 1024,
	gm_build,
	gm_auth,
	NULL,
	gm_new,
	gm_free,
	gm_parse,
	gm_finish,
	gm_stop,
};
