/*
 * Server-sent events: see sse.h. The parser keeps only the line being
 * read (bounded by max_line) and the data of the event being built
 * (bounded by max_event); a complete line found whole inside one chunk is
 * parsed in place without being copied.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "sse.h"
#include "xmalloc.h"

#define SSE_ID_MAX	256	/* bytes of an event id kept */

struct sse {
	size_t		 max_line;
	size_t		 max_event;
	char		*line;		/* the unfinished line */
	size_t		 line_len;
	char		*data;		/* the event's data, lines joined by \n */
	size_t		 data_len;
	size_t		 data_cap;
	int		 has_data;	/* a data field was seen */
	char		*event;		/* the event's name, or "" */
	size_t		 event_len;
	char		 id[SSE_ID_MAX + 1];
	long		 retry;
	int		 last_cr;	/* the previous chunk ended with \r */
	int		 started;	/* past the first line (BOM check) */
	int		 failed;
	unsigned long	 count;
};

/* Creates a parser. */
struct sse *
sse_create(size_t max_line, size_t max_event)
{
	struct sse	*s = xcalloc(1, sizeof *s);

	s->max_line = max_line < 16 ? 16 : max_line;
	s->max_event = max_event < 16 ? 16 : max_event;
	s->retry = -1;
	return s;
}

/* Frees a parser. */
void
sse_free(struct sse *s)
{
	if (s == NULL)
		return;
	free(s->line);
	free(s->data);
	free(s->event);
	free(s);
}

/* Appends bytes to the unfinished line, within max_line. */
static int
sse_line_add(struct sse *s, const char *p, size_t n)
{
	if (n > s->max_line - s->line_len)
		return -1;
	if (s->line == NULL)
		s->line = xmalloc(s->max_line + 1);
	memcpy(s->line + s->line_len, p, n);
	s->line_len += n;
	return 0;
}

/* Appends one data line (and the \n that joins it to the next). */
static int
sse_data_add(struct sse *s, const char *p, size_t n)
{
	size_t	need, cap;

	if (n + 1 > s->max_event - s->data_len)
		return -1;
	need = s->data_len + n + 2;
	if (need > s->data_cap) {
		cap = s->data_cap == 0 ? 256 : s->data_cap;
		while (cap < need)
			cap *= 2;
		if (cap > s->max_event + 2)
			cap = s->max_event + 2;
		s->data = xreallocarray(s->data, cap, 1);
		s->data_cap = cap;
	}
	memcpy(s->data + s->data_len, p, n);
	s->data_len += n;
	s->data[s->data_len++] = '\n';
	s->has_data = 1;
	return 0;
}

/* Forgets the event being built. */
static void
sse_reset_event(struct sse *s)
{
	s->data_len = 0;
	s->has_data = 0;
	s->event_len = 0;
}

/* A blank line: hands the event over, if it has data. */
static int
sse_dispatch(struct sse *s, sse_event_cb cb, void *arg)
{
	const char	*name;
	int		 r;

	if (!s->has_data) {
		sse_reset_event(s);
		return 0;
	}
	/* The last \n joined nothing: drop it. */
	s->data_len--;
	s->data[s->data_len] = '\0';
	if (s->event_len > 0) {
		s->event[s->event_len] = '\0';
		name = s->event;
	} else
		name = "message";
	s->count++;
	r = cb(arg, name, s->data, s->data_len);
	sse_reset_event(s);
	return r;
}

/* True if n bytes are all decimal digits (and there is at least one). */
static int
sse_digits(const char *p, size_t n)
{
	size_t	i;

	if (n == 0 || n > 9)
		return 0;
	for (i = 0; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return 0;
	return 1;
}

/* Parses one complete line (without its end). */
static int
sse_line(struct sse *s, const char *p, size_t n, sse_event_cb cb, void *arg,
    const char **cause)
{
	const char	*colon, *v;
	size_t		 flen, vlen, i;

	if (!s->started) {
		s->started = 1;
		if (n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) {
			p += 3;
			n -= 3;
		}
	}
	if (n == 0) {
		if (sse_dispatch(s, cb, arg) != 0) {
			*cause = "stopped";
			return -1;
		}
		return 0;
	}
	if (p[0] == ':')
		return 0;	/* a comment (providers send them as keep-alives) */
	if ((colon = memchr(p, ':', n)) != NULL) {
		flen = colon - p;
		v = colon + 1;
		vlen = n - flen - 1;
		if (vlen > 0 && *v == ' ') {
			v++;
			vlen--;
		}
	} else {
		flen = n;
		v = p + n;
		vlen = 0;
	}
	if (flen == 4 && memcmp(p, "data", 4) == 0) {
		if (sse_data_add(s, v, vlen) != 0) {
			*cause = "an event is larger than the limit";
			return -1;
		}
	} else if (flen == 5 && memcmp(p, "event", 5) == 0) {
		/* vlen < max_line: the line itself was bounded. */
		if (s->event == NULL)
			s->event = xmalloc(s->max_line + 1);
		memcpy(s->event, v, vlen);
		s->event_len = vlen;
	} else if (flen == 2 && memcmp(p, "id", 2) == 0) {
		if (memchr(v, '\0', vlen) == NULL && vlen <= SSE_ID_MAX) {
			memcpy(s->id, v, vlen);
			s->id[vlen] = '\0';
		}
	} else if (flen == 5 && memcmp(p, "retry", 5) == 0) {
		if (sse_digits(v, vlen)) {
			s->retry = 0;
			for (i = 0; i < vlen; i++)
				s->retry = s->retry * 10 + (v[i] - '0');
		}
	}
	return 0;
}

/* Feeds bytes. */
int
sse_feed(struct sse *s, const char *buf, size_t len, sse_event_cb cb,
    void *arg, const char **cause)
{
	const char	*p = buf, *end = buf + len, *q;
	size_t		 span;
	int		 r;

	*cause = NULL;
	if (s->failed) {
		*cause = "the parser stopped earlier";
		return -1;
	}
	while (p < end) {
		if (s->last_cr) {
			s->last_cr = 0;
			if (*p == '\n') {
				p++;
				continue;
			}
		}
		for (q = p; q < end && *q != '\r' && *q != '\n'; q++)
			;
		span = q - p;
		if (q == end) {
			if (sse_line_add(s, p, span) != 0)
				goto too_long;
			break;
		}
		if (s->line_len == 0) {
			if (span > s->max_line)
				goto too_long;
			r = sse_line(s, p, span, cb, arg, cause);
		} else {
			if (sse_line_add(s, p, span) != 0)
				goto too_long;
			r = sse_line(s, s->line, s->line_len, cb, arg, cause);
			s->line_len = 0;
		}
		if (r != 0) {
			s->failed = 1;
			return -1;
		}
		s->last_cr = (*q == '\r');
		p = q + 1;
	}
	return 0;
too_long:
	s->failed = 1;
	*cause = "a line is longer than the limit";
	return -1;
}

/* The stream ended: was an event left unfinished? */
int
sse_end(struct sse *s)
{
	int	cut = s->has_data || s->line_len > 0 || s->event_len > 0;

	sse_reset_event(s);
	s->line_len = 0;
	return cut;
}

/* The last event id. */
const char *
sse_last_id(const struct sse *s)
{
	return s->id;
}

/* The last retry value. */
long
sse_retry_ms(const struct sse *s)
{
	return s->retry;
}

/* Events dispatched. */
unsigned long
sse_count(const struct sse *s)
{
	return s->count;
}
