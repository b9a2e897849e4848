/*
 * Escaping untrusted text for display (see escape.h). The classes of
 * characters live here once, for gbrd and the clients alike, so a path
 * in a refusal and the same path in an approval are held to rules that
 * cannot drift apart.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "utf8.h"
#include "xmalloc.h"

/* A growing string for escape_string. */
struct escape_buf {
	char	*data;
	size_t	 len;
	size_t	 cap;
};

/* True for the C0 and C1 controls and DEL. */
int
escape_is_control(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

/* True for the bidirectional formatting characters. */
int
escape_is_bidi(uint32_t cp)
{
	return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
	    cp == 0x200e || cp == 0x200f || cp == 0x061c;
}

/* True for what a person cannot see or tell apart (see escape.h). */
int
escape_is_hidden(uint32_t cp)
{
	if (escape_is_control(cp) || escape_is_bidi(cp))
		return 1;
	switch (cp) {
	case 0x00a0: case 0x00ad: case 0x034f: case 0x115f: case 0x1160:
	case 0x1680: case 0x17b4: case 0x17b5: case 0x202f: case 0x205f:
	case 0x3000: case 0x3164: case 0xfeff: case 0xffa0:
		return 1;
	}
	return (cp >= 0x180b && cp <= 0x180e) || (cp >= 0x2000 && cp <= 0x200d) ||
	    cp == 0x2028 || cp == 0x2029 || (cp >= 0x2060 && cp <= 0x2064) ||
	    (cp >= 0x206a && cp <= 0x206f) || (cp >= 0xfff9 && cp <= 0xfffb) ||
	    (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff) ||
	    (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe;
}

/* True for the characters ESCAPE_PATH escapes: what the path gate refuses. */
static int
escape_is_path_hidden(uint32_t cp)
{
	return escape_is_control(cp) || cp == 0x2028 || cp == 0x2029 ||
	    escape_is_bidi(cp) || cp == 0xfeff || (cp >= 0x200b && cp <= 0x200d);
}

/* Escapes s for display and hands it to cb (see escape.h). */
size_t
escape_write(const char *s, size_t len, int flags, size_t max, escape_cb cb,
    void *arg)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, n, shown, run = 0;
	uint32_t		 cp;
	char			 esc[16];
	int			 el, hidden;

	shown = max != 0 && len > max ? max : len;
	while (i < shown) {
		cp = 0;
		n = utf8_decode(u + i, len - i, &cp);
		el = 0;
		if (n == 0) {
			el = snprintf(esc, sizeof esc, "\\x{%02X}", u[i]);
			n = 1;
		} else if (cp == '\t' && (flags & ESCAPE_TAB))
			;
		else if ((flags & ESCAPE_CODES) &&
		    (cp == '\n' || cp == '\r' || cp == '\t'))
			el = snprintf(esc, sizeof esc, "\\u{%04X}", (unsigned)cp);
		else if (cp == '\n')
			el = snprintf(esc, sizeof esc, "\\n");
		else if (cp == '\r')
			el = snprintf(esc, sizeof esc, "\\r");
		else if (cp == '\t')
			el = snprintf(esc, sizeof esc, "\\t");
		else {
			hidden = (flags & ESCAPE_PATH) ?
			    escape_is_path_hidden(cp) : escape_is_hidden(cp);
			if (hidden)
				el = snprintf(esc, sizeof esc, "\\u{%04X}",
				    (unsigned)cp);
		}
		if (el == 0 && !(cp == '\\' && (flags & ESCAPE_BACKSLASH))) {
			/* Plain text goes out in runs, not a byte at a time. */
			run += n;
			i += n;
			continue;
		}
		if (run > 0)
			cb(s + i - run, run, 0, arg);
		run = 0;
		if (el > 0)
			cb(esc, (size_t)el, 1, arg);
		else
			cb("\\\\", 2, 0, arg);
		i += n;
	}
	if (run > 0)
		cb(s + i - run, run, 0, arg);
	return i;
}

/* escape_string's callback: appends to the string. */
static void
escape_buf_cb(const char *data, size_t n, int escape, void *arg)
{
	struct escape_buf	*b = arg;

	(void)escape;
	if (b->len + n + 1 > b->cap) {
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap == 0 ? 64 : b->cap * 2;
		b->data = xreallocarray(b->data, 1, b->cap);
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

/* Escapes s for display as a new string (see escape.h). */
char *
escape_string(const char *s, size_t len, int flags, size_t max, size_t *used)
{
	struct escape_buf	b;
	size_t			u;

	memset(&b, 0, sizeof b);
	u = escape_write(s, len, flags, max, escape_buf_cb, &b);
	if (used != NULL)
		*used = u;
	if (b.data == NULL)
		return xstrdup("");
	b.data[b.len] = '\0';
	return b.data;
}
