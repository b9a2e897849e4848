/*
 * A parser for server-sent events (the WHATWG "text/event-stream" format),
 * the framing every LLM provider streams its answer in. It is pure: bytes
 * go in as they arrive from the network, in chunks split anywhere (inside
 * a line, between \r and \n, inside a UTF-8 character), and whole events
 * come out through a callback.
 *
 * What it understands: lines end with \r\n, \n or \r; a line starting with
 * ':' is a comment; "field: value" (one space after the colon is dropped)
 * or "field" alone; "data" lines of one event are joined with \n; "event"
 * names the event (default "message"); "id" and "retry" are kept (the
 * latter only as digits); a blank line dispatches the event, and an event
 * without data is not dispatched. A byte-order mark at the very start is
 * skipped. Unknown fields are ignored, as the standard says.
 *
 * Bounds: a line longer than max_line, or an event whose data grows over
 * max_event, stops the parser with an error (a misbehaving server cannot
 * make gbrd grow without limit). After an error or a callback that
 * returned -1, every later sse_feed fails.
 */
#ifndef GBRD_SSE_H
#define GBRD_SSE_H

#include <stddef.h>

struct sse;

/*
 * One event. event is its name ("message" when none was given); data is
 * NUL-terminated and len bytes long (it may hold NUL bytes of its own).
 * Both are borrowed. Return 0 to go on, -1 to stop the parser.
 */
typedef int (*sse_event_cb)(void *arg, const char *event, const char *data,
    size_t len);

/* A new parser with the given bounds (bytes; both at least 16). */
struct sse	*sse_create(size_t max_line, size_t max_event);
void		 sse_free(struct sse *);
/*
 * Feeds bytes; cb runs for each event completed by them. Returns 0, or -1
 * with *cause (static) when a bound was crossed or cb returned -1 (cause
 * then says "stopped").
 */
int		 sse_feed(struct sse *, const char *buf, size_t len,
		    sse_event_cb cb, void *arg, const char **cause);
/*
 * The stream ended. An event not yet dispatched (no blank line after it)
 * is dropped, as the standard says; returns 1 if there was one (the
 * stream was cut in the middle of an event), else 0.
 */
int		 sse_end(struct sse *);
/* The last event id seen, or "" (borrowed). */
const char	*sse_last_id(const struct sse *);
/* The last retry value seen in milliseconds, or -1. */
long		 sse_retry_ms(const struct sse *);
/* Events dispatched so far. */
unsigned long	 sse_count(const struct sse *);

#endif
