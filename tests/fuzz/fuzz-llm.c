/*
 * libFuzzer target for the bytes an LLM provider (or anything pretending
 * to be one) sends back: the SSE parser (daemon/llm/sse.c) and the three
 * providers' stream parsers (daemon/llm-*.c). Byte 0 picks the provider
 * and the chunk size; the rest is the response body. The body is fed
 * whole, then again in chunks of that size, and the two runs must agree
 * (same events, same text, same tool calls, same end). Invariants: every
 * tool call has a name and an id, its arguments are an object or absent,
 * and text handed over is what the events carried (bounded by the input).
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "sse.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

struct run {
	const struct llm_provider	*p;
	void				*st;
	size_t				 text;
	size_t				 calls;
	size_t				 events;
	int				 failed;
	size_t				 input;
};

static void __attribute__((noreturn))
fail(const char *what)
{
	fprintf(stderr, "fuzz-llm: %s\n", what);
	abort();
}

static void
on_text(void *arg, const char *s, size_t len)
{
	struct run	*r = arg;

	r->text += len;
	if (r->text > r->input * 6 + 16)
		fail("more text than the input can hold");
}

static void
on_call(void *arg, const char *id, const char *name, json_t *args,
    const char *raw, int oversized, json_t *meta)
{
	struct run	*r = arg;

	if (id == NULL || name == NULL || raw == NULL)
		fail("a tool call without id, name or raw text");
	if (args != NULL && !json_is_object(args))
		fail("tool call arguments that are not an object");
	r->calls++;
}

static void
on_usage(void *arg, long long in, long long out)
{
}

static const struct llm_sink sink = { on_text, on_call, on_usage };

static int
on_event(void *arg, const char *event, const char *data, size_t len)
{
	struct run	*r = arg;
	struct llm_perr	 err = { 0, NULL };

	r->events++;
	if (strlen(data) > len)
		fail("event data longer than its length");
	if (r->p->parse(r->st, event, data, len, &sink, r, &err) != 0) {
		free(err.message);
		r->failed = 1;
		return -1;
	}
	return 0;
}

/* Feeds the body in chunks of size n; returns the end state. */
static int
feed(struct run *r, const char *body, size_t len, size_t n)
{
	struct sse	*s = sse_create(4096, 65536);
	const char	*cause;
	size_t		 off, k;
	int		 rc = 0, done;

	r->st = r->p->parser_new();
	for (off = 0; off < len && rc == 0; off += k) {
		k = len - off < n ? len - off : n;
		rc = sse_feed(s, body + off, k, on_event, r, &cause);
	}
	done = rc == 0 ? r->p->finish(r->st, &sink, r) : -1;
	sse_end(s);
	sse_free(s);
	r->p->parser_free(r->st);
	return done;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct llm_provider *const ps[] = {
		&llm_openai, &llm_anthropic, &llm_gemini
	};
	struct run	a, b;
	int		ra, rb;

	if (size < 1)
		return 0;
	memset(&a, 0, sizeof a);
	a.p = ps[data[0] % 3];
	a.input = size;
	b = a;
	ra = feed(&a, (const char *)data + 1, size - 1, size);
	rb = feed(&b, (const char *)data + 1, size - 1, 1 + data[0] / 3 % 17);
	if (ra != rb || a.text != b.text || a.calls != b.calls ||
	    a.events != b.events || a.failed != b.failed)
		fail("whole and chunked runs disagree");
	return 0;
}
