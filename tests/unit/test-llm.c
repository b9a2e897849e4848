/*
 * Unit tests for the pure parts of the LLM layer: each provider's request
 * (built from one provider-neutral conversation and read back as JSON),
 * each provider's stream parser fed with wire samples written after the
 * providers' public documentation (text deltas, tool calls whose
 * arguments arrive in fragments, usage, the end of an answer, a cut
 * stream, errors inside the stream), the choice of provider, URL and key
 * (a profile must not redirect the key), the key file's checks, and the
 * redaction helpers.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "env.h"
#include "http.h"
#include "llm.h"
#include "paths.h"
#include "sse.h"
#include "unit.h"
#include "xmalloc.h"

/* What a parser reported. */
struct seen {
	char		 text[8192];
	size_t		 tlen;
	json_t		*calls;
	long long	 in, out;
	int		 ntext;
};

static void
seen_text(void *arg, const char *s, size_t len)
{
	struct seen	*v = arg;

	if (v->tlen + len < sizeof v->text) {
		memcpy(v->text + v->tlen, s, len);
		v->tlen += len;
		v->text[v->tlen] = '\0';
	}
	v->ntext++;
}

static void
seen_call(void *arg, const char *id, const char *name, json_t *args,
    const char *raw, int oversized, json_t *meta)
{
	struct seen	*v = arg;

	json_array_append_new(v->calls, json_pack("{s:s, s:s, s:O?, s:s, s:O?}",
	    "id", id, "name", name, "args", args, "raw", raw, "meta", meta));
}

static void
seen_usage(void *arg, long long in, long long out)
{
	struct seen	*v = arg;

	if (in >= 0)
		v->in = in;
	if (out >= 0)
		v->out = out;
}

static const struct llm_sink sink = { seen_text, seen_call, seen_usage };

/* Glue: SSE events to a provider parser. */
struct feed {
	const struct llm_provider	*p;
	void				*st;
	struct seen			*v;
	struct llm_perr			 err;
	int				 failed;
};

static int
feed_event(void *arg, const char *event, const char *data, size_t len)
{
	struct feed	*f = arg;

	if (f->p->parse(f->st, event, data, len, &sink, f->v, &f->err) != 0) {
		f->failed = 1;
		return -1;
	}
	return 0;
}

/*
 * Feeds a wire sample, chunk bytes at a time, to a provider's parser.
 * Returns 1 if the answer was complete, 0 if cut, -1 on an error
 * (*retryable says which kind).
 */
static int
run(const struct llm_provider *p, const char *wire, size_t chunk,
    struct seen *v, int *retryable)
{
	struct sse	*s = sse_create(1 << 20, 1 << 20);
	struct feed	 f;
	const char	*cause;
	size_t		 off, n, len = strlen(wire);
	int		 r = 0;

	memset(v, 0, sizeof *v);
	v->calls = json_array();
	v->in = v->out = -1;
	memset(&f, 0, sizeof f);
	f.p = p;
	f.st = p->parser_new();
	f.v = v;
	for (off = 0; off < len && r == 0; off += n) {
		n = len - off < chunk ? len - off : chunk;
		r = sse_feed(s, wire + off, n, feed_event, &f, &cause);
	}
	if (retryable != NULL)
		*retryable = f.err.retryable;
	if (f.failed)
		r = -1;
	else
		r = p->finish(f.st, &sink, v);
	free(f.err.message);
	p->parser_free(f.st);
	sse_free(s);
	return r;
}

/* Runs a sample at every chunk size from 1 to 64 and checks they agree. */
static int
run_all(const struct llm_provider *p, const char *wire, struct seen *v)
{
	struct seen	 w;
	char		*a, *b;
	size_t		 c;
	int		 r, r2, same = 1;

	r = run(p, wire, strlen(wire), v, NULL);
	a = json_dumps(v->calls, JSON_COMPACT | JSON_SORT_KEYS);
	for (c = 1; c <= 64; c++) {
		r2 = run(p, wire, c, &w, NULL);
		b = json_dumps(w.calls, JSON_COMPACT | JSON_SORT_KEYS);
		same &= r2 == r && strcmp(a, b) == 0 && strcmp(w.text, v->text) == 0;
		free(b);
		json_decref(w.calls);
	}
	free(a);
	return same ? r : -2;
}

/* The conversation every builder is given. */
static json_t *
conversation(void)
{
	return json_pack("[{s:s, s:s}, {s:s, s:s, s:[{s:s, s:s, s:{s:s}, s:{s:s}}, "
	    "{s:s, s:s, s:{s:s, s:s}}]}, {s:s, s:s, s:s, s:b, s:s}, "
	    "{s:s, s:s, s:s, s:b, s:s}, {s:s, s:s}]",
	    "role", "user", "content", "Fix the build",
	    "role", "assistant", "content", "Looking.", "tool_calls",
	    "id", "call_1", "name", "read_file", "args", "path", "main.c",
	    "meta", "thoughtSignature", "sig-AAA",
	    "id", "call_2", "name", "write_file", "args", "path", "a.c",
	    "content", "x",
	    "role", "tool", "call_id", "call_1", "name", "read_file", "ok", 1,
	    "output", "{\"content\":\"int main\"}",
	    "role", "tool", "call_id", "call_2", "name", "write_file", "ok", 0,
	    "output", "protected_path: needs approval",
	    "role", "user", "content", "The check failed");
}

static json_t *
tools(void)
{
	return json_pack("[{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}]",
	    "name", "read_file", "description", "Read a file", "inputSchema",
	    "type", "object", "properties", "path", "type", "string",
	    "required", "path");
}

/* Builds with a provider and parses the body back. */
static json_t *
build(const struct llm_provider *p, const char *model, char **url)
{
	json_t		*conv = conversation(), *t = tools(), *j;
	json_error_t	 jerr;
	char		*body = NULL, *cause = NULL;

	*url = NULL;
	if (p->build("https://example.test/base", model, 1000, "You are gbr.",
	    conv, t, url, &body, &cause) != 0) {
		printf("# build: %s\n", cause);
		free(cause);
		json_decref(conv);
		json_decref(t);
		return NULL;
	}
	j = json_loads(body, 0, &jerr);
	free(body);
	json_decref(conv);
	json_decref(t);
	return j;
}

static void
test_builders(void)
{
	json_t	*j, *m, *x;
	char	*url;

	/* OpenAI. */
	j = build(&llm_openai, "gpt-x", &url);
	CHECK(j != NULL && strcmp(url, "https://example.test/base/chat/completions")
	    == 0, "openai: URL");
	m = json_object_get(j, "messages");
	CHECK(json_array_size(m) == 6 && strcmp(json_string_value(json_object_get(
	    json_array_get(m, 0), "role")), "system") == 0 &&
	    strcmp(json_string_value(json_object_get(json_array_get(m, 0),
	    "content")), "You are gbr.") == 0, "openai: the system prompt first");
	x = json_array_get(json_object_get(json_array_get(m, 2), "tool_calls"), 0);
	CHECK(strcmp(json_string_value(json_object_get(x, "id")), "call_1") == 0 &&
	    strcmp(json_string_value(json_object_get(json_object_get(x,
	    "function"), "arguments")), "{\"path\":\"main.c\"}") == 0,
	    "openai: tool call arguments are JSON text");
	x = json_array_get(m, 3);
	CHECK(strcmp(json_string_value(json_object_get(x, "role")), "tool") == 0 &&
	    strcmp(json_string_value(json_object_get(x, "tool_call_id")),
	    "call_1") == 0, "openai: a tool result names its call");
	CHECK(json_is_true(json_object_get(j, "stream")) &&
	    json_is_true(json_object_get(json_object_get(j, "stream_options"),
	    "include_usage")) && strcmp(json_string_value(json_object_get(
	    json_object_get(json_array_get(json_object_get(j, "tools"), 0),
	    "function"), "name")), "read_file") == 0,
	    "openai: streaming with usage, and the tools");
	json_decref(j);
	free(url);

	/* Anthropic. */
	j = build(&llm_anthropic, "claude-x", &url);
	CHECK(j != NULL && strcmp(url, "https://example.test/base/v1/messages") == 0 &&
	    strcmp(json_string_value(json_object_get(j, "system")),
	    "You are gbr.") == 0 && json_integer_value(json_object_get(j,
	    "max_tokens")) == 1000, "anthropic: URL, system, max_tokens");
	m = json_object_get(j, "messages");
	CHECK(json_array_size(m) == 3, "anthropic: user/assistant/user after "
	    "merging (%zu)", json_array_size(m));
	x = json_object_get(json_array_get(m, 1), "content");
	CHECK(json_array_size(x) == 3 && strcmp(json_string_value(json_object_get(
	    json_array_get(x, 1), "type")), "tool_use") == 0 &&
	    strcmp(json_string_value(json_object_get(json_object_get(
	    json_array_get(x, 1), "input"), "path")), "main.c") == 0,
	    "anthropic: text and tool_use blocks");
	x = json_object_get(json_array_get(m, 2), "content");
	CHECK(json_array_size(x) == 3 && strcmp(json_string_value(json_object_get(
	    json_array_get(x, 0), "type")), "tool_result") == 0 &&
	    json_is_false(json_object_get(json_array_get(x, 0), "is_error")) &&
	    json_is_true(json_object_get(json_array_get(x, 1), "is_error")) &&
	    strcmp(json_string_value(json_object_get(json_array_get(x, 2),
	    "type")), "text") == 0, "anthropic: results first, then the text, "
	    "in one user message");
	CHECK(json_object_get(json_array_get(json_object_get(j, "tools"), 0),
	    "input_schema") != NULL, "anthropic: tools with input_schema");
	json_decref(j);
	free(url);

	/* Gemini. */
	j = build(&llm_gemini, "models/gemini-x", &url);
	CHECK(j != NULL && strcmp(url, "https://example.test/base/models/"
	    "gemini-x:streamGenerateContent?alt=sse") == 0 &&
	    strstr(url, "key=") == NULL, "gemini: URL (no key in it)");
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(
	    json_object_get(json_object_get(j, "systemInstruction"), "parts"), 0),
	    "text")), "You are gbr.") == 0, "gemini: systemInstruction");
	m = json_object_get(j, "contents");
	CHECK(json_array_size(m) == 3 && strcmp(json_string_value(json_object_get(
	    json_array_get(m, 1), "role")), "model") == 0, "gemini: user/model/user");
	x = json_array_get(json_object_get(json_array_get(m, 1), "parts"), 1);
	CHECK(strcmp(json_string_value(json_object_get(json_object_get(x,
	    "functionCall"), "name")), "read_file") == 0 &&
	    strcmp(json_string_value(json_object_get(x, "thoughtSignature")),
	    "sig-AAA") == 0, "gemini: functionCall with its thoughtSignature");
	x = json_object_get(json_array_get(m, 2), "parts");
	CHECK(json_array_size(x) == 3 && strcmp(json_string_value(json_object_get(
	    json_object_get(json_object_get(json_array_get(x, 0),
	    "functionResponse"), "response"), "output")),
	    "{\"content\":\"int main\"}") == 0 && json_object_get(json_object_get(
	    json_object_get(json_array_get(x, 1), "functionResponse"),
	    "response"), "error") != NULL, "gemini: functionResponse output "
	    "and error");
	CHECK(json_object_get(json_array_get(json_object_get(json_array_get(
	    json_object_get(j, "tools"), 0), "functionDeclarations"), 0),
	    "parametersJsonSchema") != NULL, "gemini: parametersJsonSchema");
	json_decref(j);
	free(url);
}

static const char openai_wire[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me \"},"
    "\"finish_reason\":null}]}\n\n"
    ": keep-alive\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"look.\"},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"id\":\"call_A\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
    "\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"function\":{\"arguments\":\"{\\\"pa\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
    "\"id\":\"call_B\",\"type\":\"function\",\"function\":{\"name\":\"run_command\","
    "\"arguments\":\"{\\\"argv\\\":[\\\"ma\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"function\":{\"arguments\":\"th\\\":\\\"a.c\\\"}\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
    "\"function\":{\"arguments\":\"ke\\\"]}\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,"
    "\"completion_tokens\":33,\"total_tokens\":153}}\n\n"
    "data: [DONE]\n\n";

static const char anthropic_wire[] =
    "event: message_start\r\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
    "\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,"
    "\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\r\n\r\n"
    "event: content_block_start\r\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n"
    "event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay\"}}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\", reading.\"}}\r\n\r\n"
    "event: content_block_stop\r\ndata: {\"type\":\"content_block_stop\",\"index\":0}\r\n\r\n"
    "event: content_block_start\r\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\","
    "\"id\":\"toolu_01\",\"name\":\"read_file\",\"input\":{}}}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"RE\"}}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ADME.md\\\"}\"}}\r\n\r\n"
    "event: content_block_stop\r\ndata: {\"type\":\"content_block_stop\",\"index\":1}\r\n\r\n"
    "event: content_block_start\r\n"
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\","
    "\"id\":\"toolu_02\",\"name\":\"list_directory\",\"input\":{}}}\r\n\r\n"
    "event: content_block_stop\r\ndata: {\"type\":\"content_block_stop\",\"index\":2}\r\n\r\n"
    "event: message_delta\r\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},"
    "\"usage\":{\"output_tokens\":89}}\r\n\r\n"
    "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n";

static const char gemini_wire[] =
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"I will \"}],"
    "\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 40,"
    "\"candidatesTokenCount\": 2,\"totalTokenCount\": 42},\"modelVersion\": \"gemini-x\"}\r\n\r\n"
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"thinking\", \"thought\": true},"
    "{\"text\": \"check.\"}],\"role\": \"model\"},\"index\": 0}]}\r\n\r\n"
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"read_file\","
    "\"args\": {\"path\": \"go.mod\"}},\"thoughtSignature\": \"c2lnbmF0dXJl\"},"
    "{\"functionCall\": {\"id\": \"fc-7\", \"name\": \"search\", \"args\": {\"pattern\": \"TODO\"}}}],"
    "\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],"
    "\"usageMetadata\": {\"promptTokenCount\": 40,\"candidatesTokenCount\": 25,"
    "\"thoughtsTokenCount\": 5,\"totalTokenCount\": 70}}\r\n\r\n";

static void
test_parsers(void)
{
	struct seen	 v;
	json_t		*c;
	int		 r, retry;
	char		*cut;

	r = run_all(&llm_openai, openai_wire, &v);
	CHECK(r == 1 && strcmp(v.text, "Let me look.") == 0,
	    "openai: text assembled, answer complete, every chunking agrees");
	c = v.calls;
	CHECK(json_array_size(c) == 2 &&
	    strcmp(json_string_value(json_object_get(json_array_get(c, 0), "id")),
	    "call_A") == 0 && strcmp(json_string_value(json_object_get(
	    json_object_get(json_array_get(c, 0), "args"), "path")), "a.c") == 0 &&
	    strcmp(json_string_value(json_array_get(json_object_get(json_object_get(
	    json_array_get(c, 1), "args"), "argv"), 0)), "make") == 0,
	    "openai: two calls whose fragments interleave, keyed by index");
	CHECK(v.in == 120 && v.out == 33, "openai: usage from the last chunk");
	json_decref(v.calls);

	/* Cut before finish_reason: incomplete, and no call is handed over. */
	cut = xstrndup(openai_wire, strstr(openai_wire, "data: {\"id\":\"c1\","
	    "\"choices\":[{\"index\":0,\"delta\":{},\"finish") - openai_wire);
	r = run(&llm_openai, cut, 7, &v, NULL);
	CHECK(r == 0 && json_array_size(v.calls) == 0,
	    "openai: a stream cut in the middle is incomplete, no half call");
	json_decref(v.calls);
	free(cut);

	r = run(&llm_openai, "data: {\"error\":{\"message\":\"boom\",\"type\":"
	    "\"server_error\"}}\n\n", 5, &v, &retry);
	CHECK(r == -1 && retry == 1, "openai: an error in the stream");
	json_decref(v.calls);
	r = run(&llm_openai, "data: {\"choices\":[{\"index\":0,\"delta\":{"
	    "\"tool_calls\":[{\"index\":0,\"id\":\"x\",\"function\":{\"name\":"
	    "\"read_file\",\"arguments\":\"{not json\"}}]},\"finish_reason\":"
	    "\"tool_calls\"}]}\n\ndata: [DONE]\n\n", 9, &v, NULL);
	CHECK(r == 1 && json_array_size(v.calls) == 1 &&
	    json_is_null(json_object_get(json_array_get(v.calls, 0), "args")) &&
	    strcmp(json_string_value(json_object_get(json_array_get(v.calls, 0),
	    "raw")), "{not json") == 0, "openai: invalid arguments are "
	    "reported raw, not guessed");
	json_decref(v.calls);
	r = run(&llm_openai, "data: {\"choices\":[{\"index\":0,\"delta\":{"
	    "\"tool_calls\":[{\"index\":99,\"id\":\"x\"}]}}]}\n\n", 9, &v, NULL);
	CHECK(r == -1, "openai: a tool call index beyond the bound is refused");
	json_decref(v.calls);
	r = run(&llm_openai, "data: {oops\n\n", 3, &v, NULL);
	CHECK(r == -1, "openai: a chunk that is not JSON is an error");
	json_decref(v.calls);

	r = run_all(&llm_anthropic, anthropic_wire, &v);
	CHECK(r == 1 && strcmp(v.text, "Okay, reading.") == 0,
	    "anthropic: text assembled, complete, every chunking agrees");
	c = v.calls;
	CHECK(json_array_size(c) == 2 && strcmp(json_string_value(json_object_get(
	    json_array_get(c, 0), "id")), "toolu_01") == 0 &&
	    strcmp(json_string_value(json_object_get(json_object_get(
	    json_array_get(c, 0), "args"), "path")), "README.md") == 0 &&
	    json_object_size(json_object_get(json_array_get(c, 1), "args")) == 0,
	    "anthropic: input_json_delta fragments make the input; an empty "
	    "input is {}");
	CHECK(v.in == 25 && v.out == 89, "anthropic: usage from message_start "
	    "and message_delta");
	json_decref(v.calls);
	cut = xstrndup(anthropic_wire, strstr(anthropic_wire,
	    "event: message_stop") - anthropic_wire);
	r = run(&llm_anthropic, cut, 11, &v, NULL);
	CHECK(r == 0, "anthropic: no message_stop means the stream was cut");
	json_decref(v.calls);
	free(cut);
	r = run(&llm_anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":"
	    "{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 4,
	    &v, &retry);
	CHECK(r == -1 && retry == 1, "anthropic: overloaded_error is retryable");
	json_decref(v.calls);
	r = run(&llm_anthropic, "event: error\ndata: {\"type\":\"error\",\"error\":"
	    "{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n", 4,
	    &v, &retry);
	CHECK(r == -1 && retry == 0, "anthropic: invalid_request_error is not");
	json_decref(v.calls);

	r = run_all(&llm_gemini, gemini_wire, &v);
	CHECK(r == 1 && strcmp(v.text, "I will check.") == 0,
	    "gemini: text assembled, thought parts skipped, complete");
	c = v.calls;
	CHECK(json_array_size(c) == 2 && strncmp(json_string_value(
	    json_object_get(json_array_get(c, 0), "id")), "gbr_", 4) == 0 &&
	    strcmp(json_string_value(json_object_get(json_object_get(
	    json_array_get(c, 0), "meta"), "thoughtSignature")),
	    "c2lnbmF0dXJl") == 0 && strcmp(json_string_value(json_object_get(
	    json_array_get(c, 1), "id")), "fc-7") == 0,
	    "gemini: functionCall parts, a made-up id when none, the signature "
	    "kept");
	CHECK(v.in == 40 && v.out == 30, "gemini: usage (thoughts count as "
	    "output)");
	json_decref(v.calls);
	cut = xstrndup(gemini_wire, strstr(gemini_wire, "data: {\"candidates\": "
	    "[{\"content\": {\"parts\": [{\"functionCall\"") - gemini_wire);
	r = run(&llm_gemini, cut, 5, &v, NULL);
	CHECK(r == 0, "gemini: no finishReason means the stream was cut");
	json_decref(v.calls);
	free(cut);
	r = run(&llm_gemini, "data: {\"error\":{\"code\":503,\"message\":\"busy\","
	    "\"status\":\"UNAVAILABLE\"}}\n\n", 4, &v, &retry);
	CHECK(r == -1 && retry == 1, "gemini: UNAVAILABLE is retryable");
	json_decref(v.calls);
	r = run(&llm_gemini, "data: {\"promptFeedback\":{\"blockReason\":"
	    "\"SAFETY\"}}\n\n", 4, &v, &retry);
	CHECK(r == -1 && retry == 0, "gemini: a blocked prompt is an error");
	json_decref(v.calls);
}

/* Writes a file with a mode. */
static void
put(const char *path, const char *text, int shared)
{
	FILE	*f;

	unlink(path);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	unit_set_shared(path, shared);
}

static void
test_resolve(void)
{
	struct config		*cfg = config_defaults();
	struct llm_target	 t;
	struct llm_request	 rq;
	struct env		*env;
	char			 dir[PATH_MAX], path[PATH_MAX + 16];
	char			 link[PATH_MAX + 16], *cause;
	const char		*prof;
	json_t			*conv = json_pack("[{s:s, s:s}]", "role", "user",
				    "content", "hi");
	size_t			 i;
	int			 r, found;

	unsetenv("GEMINI_API_KEY");
	unsetenv("OPENAI_API_KEY");
	unsetenv("ANTHROPIC_API_KEY");
	unsetenv("OPENAI_BASE_URL");
	CHECK(llm_keys_load(cfg, &cause) == 0, "no keys at all is fine");
	r = llm_resolve(cfg, NULL, NULL, &t, &cause);
	CHECK(r == 1 && strstr(cause, "GEMINI_API_KEY") != NULL &&
	    strstr(cause, "key_file") != NULL && strstr(cause, "Ollama") != NULL,
	    "nothing configured: no provider, and the message says what to set");
	free(cause);
	CHECK(llm_wants_local(cfg, NULL), "then a local Ollama is worth a probe");
	r = llm_resolve(cfg, NULL, "llama3.2:latest", &t, &cause);
	CHECK(r == 0 && t.local && strcmp(t.base_url,
	    "http://127.0.0.1:11434/v1") == 0 && strcmp(t.model,
	    "llama3.2:latest") == 0 && t.key == NULL && t.provider == &llm_openai,
	    "a local Ollama is used through its OpenAI-compatible API");
	llm_target_free(&t);

	setenv("ANTHROPIC_API_KEY", "sk-ant-SECRET1234", 1);
	CHECK(llm_keys_load(cfg, &cause) == 0, "a key from the environment");
	CHECK(!llm_wants_local(cfg, NULL), "no probe once a key is known");
	r = llm_resolve(cfg, NULL, NULL, &t, &cause);
	CHECK(r == 0 && t.provider == &llm_anthropic && strcmp(t.key,
	    "sk-ant-SECRET1234") == 0 && strcmp(t.base_url,
	    "https://api.anthropic.com") == 0, "the key chooses the provider");
	CHECK(llm_request_build(&t, "sys", conv, NULL, &rq, &cause) == 0,
	    "a request is built");
	found = 0;
	for (i = 0; i < rq.nheaders; i++)
		found |= strcmp(rq.headers[i], "x-api-key: sk-ant-SECRET1234") == 0;
	CHECK(found && strstr(rq.url, "SECRET") == NULL &&
	    strstr(rq.body, "SECRET") == NULL,
	    "the key is in its header, not in the URL or body");
	llm_request_free(&rq);
	llm_target_free(&t);
	cause = llm_scrub("HTTP 401: key sk-ant-SECRET1234 is bad");
	CHECK(strcmp(cause, "HTTP 401: key REDACTED is bad") == 0,
	    "llm_scrub removes a known key");
	free(cause);

	/* A profile cannot send the key elsewhere. */
	prof = "[llm]\nprovider = anthropic\nbase_url = https://evil.example/\n";
	env = env_parse("p", "p.ini", prof, strlen(prof), ENV_INI, &cause);
	r = llm_resolve(cfg, env, NULL, &t, &cause);
	CHECK(r == 0 && t.key == NULL && t.note != NULL &&
	    strcmp(t.base_url, "https://evil.example") == 0,
	    "a profile's base_url gets no key, and a note says why");
	llm_target_free(&t);
	free(cfg->llm_base_url);
	cfg->llm_base_url = xstrdup("https://evil.example");
	r = llm_resolve(cfg, env, NULL, &t, &cause);
	CHECK(r == 0 && t.key != NULL && strcmp(t.url_source, "profile") == 0,
	    "unless gbrd.conf names the same URL");
	llm_target_free(&t);
	free(cfg->llm_base_url);
	cfg->llm_base_url = NULL;
	env_unref(env);

	prof = "[llm]\nprovider = gemini\nmodel = ../../x?key=1\n";
	env = env_parse("p", "p.ini", prof, strlen(prof), ENV_INI, &cause);
	if (env == NULL) {
		CHECK(1, "a model with URL syntax is refused by the profile");
		free(cause);
	} else {
		r = llm_resolve(cfg, env, NULL, &t, &cause);
		CHECK(r != 0, "a model with URL syntax is refused");
		if (r != 0)
			free(cause);
		env_unref(env);
	}
	prof = "[llm]\nprovider = gemini\n";
	env = env_parse("p", "p.ini", prof, strlen(prof), ENV_INI, &cause);
	r = llm_resolve(cfg, env, NULL, &t, &cause);
	CHECK(r == 1 && strstr(cause, "GEMINI_API_KEY") != NULL,
	    "a provider without its key: no_provider naming the variable");
	free(cause);
	env_unref(env);
	prof = "[llm]\nbase_url = http://127.0.0.1:8080/v1\nmax_steps = 7\n"
	    "max_request_bytes = 64K\n";
	env = env_parse("p", "p.ini", prof, strlen(prof), ENV_INI, &cause);
	r = llm_resolve(cfg, env, NULL, &t, &cause);
	CHECK(r == 0 && t.provider == &llm_openai && t.key == NULL &&
	    t.max_steps == 7 && t.max_request_bytes == 64 * 1024,
	    "a base_url alone is an OpenAI-compatible server; profile limits");
	llm_target_free(&t);
	env_unref(env);

	setenv("OPENAI_API_KEY", "sk-bad\r\nX-Evil: 1", 1);
	r = llm_keys_load(cfg, &cause);
	CHECK(r == -1 && strstr(cause, "OPENAI_API_KEY") != NULL,
	    "a key with a line break is refused (no header injection)");
	free(cause);
	unsetenv("OPENAI_API_KEY");

	/* The key file. */
	unit_tmpdir(dir, sizeof dir, "llm");
	snprintf(path, sizeof path, "%s/key", dir);
	free(cfg->llm_key_file);
	cfg->llm_key_file = xstrdup(path);
	put(path, "gm-FILEKEY\n", UNIT_READ);
	r = llm_keys_load(cfg, &cause);
	CHECK(r == -1 && strstr(cause, "provider") != NULL,
	    "key_file needs [llm] provider");
	free(cause);
	cfg->llm_provider = xstrdup("gemini");
	r = llm_keys_load(cfg, &cause);
	{
		/* The refusal says what the platform's check says, and its way out. */
		char	*why = NULL;
		int	 fd = open(path, O_RDONLY);

		CHECK(r == -1 && fd != -1 && paths_fd_private(fd, path, &why) ==
		    -1 && strstr(cause, why) != NULL && strstr(cause,
		    "refusing") != NULL, "a key file others can read is refused "
		    "(%s)", cause);
		if (fd != -1)
			close(fd);
		free(why);
	}
	free(cause);
	unit_set_shared(path, UNIT_PRIVATE);
	r = llm_keys_load(cfg, &cause);
	CHECK(r == 0, "a key file of ours alone is read (%s)", r == 0 ? "ok" :
	    cause);
	r = llm_resolve(cfg, NULL, NULL, &t, &cause);
	CHECK(r == 0 && t.provider == &llm_gemini && strcmp(t.key, "gm-FILEKEY") == 0 &&
	    strcmp(t.key_source, "key_file") == 0, "its key is used for its "
	    "provider, trimmed");
	llm_target_free(&t);
	if (unit_can_symlink(dir)) {
		snprintf(link, sizeof link, "%s/link", dir);
		symlink(path, link);
		free(cfg->llm_key_file);
		cfg->llm_key_file = xstrdup(link);
		r = llm_keys_load(cfg, &cause);
		CHECK(r == -1, "a key file that is a symlink is refused");
		free(cause);
		unlink(link);
	} else
		unit_skip(1, UNIT_NO_SYMLINKS);
	put(path, "a b\n", UNIT_PRIVATE);
	free(cfg->llm_key_file);
	cfg->llm_key_file = xstrdup(path);
	r = llm_keys_load(cfg, &cause);
	CHECK(r == -1, "a key file holding blanks inside the key is refused");
	free(cause);
	unlink(path);
	rmdir(dir);
	llm_keys_clear();
	unsetenv("ANTHROPIC_API_KEY");
	json_decref(conv);
	config_free(cfg);
}

static void
test_helpers(void)
{
	const char	*e;
	char		*s;

	s = http_redact_url("https://u:pw@host.example/v1/x?alt=sse&key=AIzaSECRET&b=2");
	CHECK(strcmp(s, "https://REDACTED@host.example/v1/x?alt=sse&key=REDACTED&b=2")
	    == 0, "URL: userinfo and key= redacted (%s)", s);
	free(s);
	s = http_redact_url("http://h/p?api_key=1&token=2#frag");
	CHECK(strcmp(s, "http://h/p?api_key=REDACTED&token=REDACTED#frag") == 0,
	    "URL: api_key and token redacted (%s)", s);
	free(s);
	s = http_redact_header("Authorization: Bearer sk-123");
	CHECK(strcmp(s, "Authorization: REDACTED") == 0, "header: Authorization");
	free(s);
	s = http_redact_header("X-Goog-Api-Key: AIza");
	CHECK(strcmp(s, "X-Goog-Api-Key: REDACTED") == 0, "header: x-goog-api-key");
	free(s);
	s = http_redact_header("Content-Type: application/json");
	CHECK(strcmp(s, "Content-Type: application/json") == 0, "header: others kept");
	free(s);
	CHECK(http_host_loopback("127.0.0.1") && http_host_loopback("localhost") &&
	    http_host_loopback("[::1]") && !http_host_loopback("127.0.0.1.evil.com") &&
	    !http_host_loopback("10.0.0.1"), "loopback hosts");
	CHECK(http_parse_retry_after("7", 0) == 7000 &&
	    http_parse_retry_after(" 0 ", 0) == 0 &&
	    http_parse_retry_after("soon", 0) == -1 &&
	    http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470) ==
	    10000 && http_parse_retry_after("99999999999", 0) == 24L * 3600 * 1000,
	    "Retry-After: seconds, HTTP date, junk, a cap");
	CHECK(llm_status_retryable(429) && llm_status_retryable(503) &&
	    llm_status_retryable(529) && !llm_status_retryable(400) &&
	    !llm_status_retryable(401), "retryable statuses");
	e = "{\"error\":{\"message\":\"Invalid key\",\"code\":401}}";
	s = llm_error_message(e, strlen(e));
	CHECK(s != NULL && strcmp(s, "Invalid key") == 0, "error message from a body");
	free(s);
	e = "[{\"error\":{\"code\":429,\"message\":\"Quota\"}}]";
	s = llm_error_message(e, strlen(e));
	CHECK(s != NULL && strcmp(s, "Quota") == 0, "error message, Gemini's array");
	free(s);
	CHECK(llm_error_message("<html>", 6) == NULL, "no message from HTML");
	e = "[{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\","
	    "\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\"},"
	    "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
	    "\"retryDelay\":\"37s\"}]}}]";
	CHECK(llm_retry_delay_ms(e, strlen(e)) == 37000, "Gemini's RetryInfo");
	e = "{\"error\":{\"details\":[{\"@type\":\"type.googleapis.com/"
	    "google.rpc.RetryInfo\",\"retryDelay\":\"1.5s\"}]}}";
	CHECK(llm_retry_delay_ms(e, strlen(e)) == 1500, "RetryInfo, fractions");
	e = "{\"error\":{\"details\":[{\"@type\":\"type.googleapis.com/"
	    "google.rpc.RetryInfo\",\"retryDelay\":\"soon\"}]}}";
	CHECK(llm_retry_delay_ms(e, strlen(e)) == -1 &&
	    llm_retry_delay_ms("{\"error\":{}}", 12) == -1 &&
	    llm_retry_delay_ms("<html>", 6) == -1, "no RetryInfo, junk");
	e = "{\"error\":{\"details\":[{\"@type\":\"type.googleapis.com/"
	    "google.rpc.RetryInfo\",\"retryDelay\":\"-3s\"}]}}";
	CHECK(llm_retry_delay_ms(e, strlen(e)) == -1, "RetryInfo, negative");
	CHECK(llm_model_valid("gpt-4o-mini") && llm_model_valid("llama3.2:latest") &&
	    llm_model_valid("models/gemini-2.5-flash") && !llm_model_valid("a b") &&
	    !llm_model_valid("x?key=1") && !llm_model_valid("../x") &&
	    !llm_model_valid("/abs") && !llm_model_valid(""), "model names");
	s = llm_base_trim("http://h/v1///");
	CHECK(strcmp(s, "http://h/v1") == 0, "base URL trimmed");
	free(s);
	CHECK(llm_provider_find("gemini") == &llm_gemini &&
	    llm_provider_find("nope") == NULL, "providers by name");
}

int
main(void)
{
	test_builders();
	test_parsers();
	test_resolve();
	test_helpers();
	return unit_done();
}
