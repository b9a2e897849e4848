/*
 * jsonfast: yajl tokenizes, jansson builds and checks (see jsonfast.h).
 *
 * The values are built as yajl reports them: a container is put into its
 * parent when it opens and filled after, so everything built hangs from
 * the root, and one json_decref of the root frees it all whenever the
 * parse stops. Object members are set in the order they come, so keys keep
 * jansson's order and a repeated key keeps its last value, as in jansson.
 *
 * Where yajl and jansson could read the same bytes differently, this file
 * does not try to follow jansson: it gives up and json_loadb decides.
 * - \u escapes: yajl turns \u0000 into a NUL byte and a lone surrogate
 *   into '?', jansson refuses both (the first unless JSON_ALLOW_NUL). Any
 *   \u0000 or \uD800-\uDFFF escape sends the document to jansson. Other
 *   \u escapes yajl decodes to UTF-8 as jansson does.
 * - Whitespace: yajl also skips \v and \f between tokens; jansson does
 *   not. Either byte anywhere sends the document to jansson (inside a
 *   string both refuse a raw control character).
 * - UTF-8: yajl is told not to check it; json_stringn and
 *   json_object_setn_new check every string and key with jansson's own
 *   rules (overlong forms, surrogates, beyond U+10FFFF).
 * - Numbers: the grammar is the same (RFC 8259). An integer is read with
 *   strtoll as jansson does (out of range: jansson decides); a number with
 *   a fraction or an exponent is given to json_loadb alone, so its value,
 *   its rounding and its overflow are jansson's, whatever the locale.
 * - Depth: jansson counts every value, containers and scalars, and refuses
 *   one deeper than JSON_PARSER_MAX_DEPTH; so does this file, by going to
 *   jansson.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "jsonfast.h"

#define JF_MAX_NUMBER	40	/* longer integers go to jansson */
#define JF_KEY_INLINE	128	/* keys longer than this are copied to the heap */

struct jf {
	yajl_handle	  h;
	json_t		 *root;
	/* Where the root value ended in buf, unless in yajl's final " ". */
	size_t		  end;
	int		  finishing;
	json_t		**stack;	/* the open containers, outermost first */
	size_t		  depth;
	size_t		  cap;
	json_t		 *inline_stack[32];
	/* The member name read last; yajl may reuse its buffer before the value. */
	char		 *key;
	size_t		  keylen;
	size_t		  keycap;
	char		  inline_key[JF_KEY_INLINE];
};

/*
 * Notes where the root value ended. yajl ignores an unfinished string after
 * the root ("1 \"x" passes), so the bytes after it are checked at the end.
 * A value that yajl completes in yajl_complete_parse (a number at the very
 * end) ends in the " " that yajl feeds itself there: nothing follows it.
 */
static void
jf_ended(struct jf *p)
{
	p->end = p->finishing ? SIZE_MAX : yajl_get_bytes_consumed(p->h);
}

/* Puts v (stolen) where the parse is: the root, an array or an object. */
static int
jf_put(struct jf *p, json_t *v)
{
	json_t	*parent;

	if (v == NULL)
		return 0;
	if (p->depth + 1 > JSON_PARSER_MAX_DEPTH) {
		json_decref(v);
		return 0;
	}
	if (p->depth == 0) {
		if (p->root != NULL) {
			json_decref(v);
			return 0;
		}
		p->root = v;
		jf_ended(p);
		return 1;
	}
	parent = p->stack[p->depth - 1];
	if (json_is_array(parent))
		return json_array_append_new(parent, v) == 0;
	return json_object_setn_new(parent, p->key, p->keylen, v) == 0;
}

/* Opens a container: put into its parent, then pushed. */
static int
jf_open(struct jf *p, json_t *v)
{
	json_t	**grown;
	size_t	  cap;

	if (v == NULL)
		return 0;
	if (p->depth == p->cap) {
		if (p->cap >= JSON_PARSER_MAX_DEPTH) {
			json_decref(v);
			return 0;
		}
		cap = p->cap * 4 > JSON_PARSER_MAX_DEPTH ?
		    JSON_PARSER_MAX_DEPTH : p->cap * 4;
		grown = p->stack == p->inline_stack ?
		    malloc(cap * sizeof *grown) :
		    realloc(p->stack, cap * sizeof *grown);
		if (grown == NULL) {
			json_decref(v);
			return 0;
		}
		if (p->stack == p->inline_stack)
			memcpy(grown, p->inline_stack, sizeof p->inline_stack);
		p->stack = grown;
		p->cap = cap;
	}
	/* Borrowed below: the parent (or root) holds the reference. */
	if (!jf_put(p, v))
		return 0;
	p->stack[p->depth++] = v;
	return 1;
}

static int
jf_null(void *ctx)
{
	return jf_put(ctx, json_null());
}

static int
jf_boolean(void *ctx, int b)
{
	return jf_put(ctx, json_boolean(b));
}

/* A number's text: an integer here, anything else by jansson. */
static int
jf_number(void *ctx, const char *s, size_t len)
{
	char		 text[JF_MAX_NUMBER + 1];
	char		*end;
	long long	 v;

	if (memchr(s, '.', len) != NULL || memchr(s, 'e', len) != NULL ||
	    memchr(s, 'E', len) != NULL)
		return jf_put(ctx, json_loadb(s, len, JSON_DECODE_ANY, NULL));
	if (len > JF_MAX_NUMBER)
		return 0;
	memcpy(text, s, len);
	text[len] = '\0';
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || end != text + len)
		return 0;
	return jf_put(ctx, json_integer((json_int_t)v));
}

static int
jf_string(void *ctx, const unsigned char *s, size_t len)
{
	return jf_put(ctx, json_stringn((const char *)s, len));
}

static int
jf_start_map(void *ctx)
{
	return jf_open(ctx, json_object());
}

static int
jf_start_array(void *ctx)
{
	return jf_open(ctx, json_array());
}

static int
jf_map_key(void *ctx, const unsigned char *s, size_t len)
{
	struct jf	*p = ctx;
	char		*grown;

	if (len >= p->keycap) {
		grown = p->key == p->inline_key ? malloc(len + 1) :
		    realloc(p->key, len + 1);
		if (grown == NULL)
			return 0;
		p->key = grown;
		p->keycap = len + 1;
	}
	memcpy(p->key, s, len);
	p->keylen = len;
	return 1;
}

static int
jf_close(void *ctx)
{
	struct jf	*p = ctx;

	if (--p->depth == 0)
		jf_ended(p);
	return 1;
}

static const yajl_callbacks jf_callbacks = {
	.yajl_null = jf_null,
	.yajl_boolean = jf_boolean,
	.yajl_number = jf_number,
	.yajl_string = jf_string,
	.yajl_start_map = jf_start_map,
	.yajl_map_key = jf_map_key,
	.yajl_end_map = jf_close,
	.yajl_start_array = jf_start_array,
	.yajl_end_array = jf_close,
};

/*
 * True if yajl reads these bytes as jansson does, as far as the bytes alone
 * tell (see the top of the file): no \u0000, no surrogate escape, no \v or
 * \f anywhere.
 */
static int
jf_plain(const char *buf, size_t len)
{
	const char	*p = buf, *end = buf + len;
	const char	*u;

	if (memchr(buf, '\v', len) != NULL || memchr(buf, '\f', len) != NULL)
		return 0;
	while ((p = memchr(p, '\\', (size_t)(end - p))) != NULL) {
		if (end - p < 6)
			break;		/* no \uXXXX fits in what is left */
		if (p[1] == 'u') {
			u = p + 2;
			if (memcmp(u, "0000", 4) == 0 ||
			    ((u[0] == 'd' || u[0] == 'D') && u[1] != '\0' &&
			    strchr("89abcdefABCDEF", u[1]) != NULL))
				return 0;
		}
		/*
		 * A backslash and the byte after it are one escape, as the
		 * lexers read them: in "\\u0000" the u is no escape. (A
		 * backslash outside a string is refused by both.)
		 */
		p += 2;
	}
	return 1;
}

/* True if buf holds only JSON whitespace from off on. */
static int
jf_only_space(const char *buf, size_t len, size_t off)
{
	for (; off < len; off++)
		if (buf[off] != ' ' && buf[off] != '\n' && buf[off] != '\r' &&
		    buf[off] != '\t')
			return 0;
	return 1;
}

json_t *
jsonfast_parse(const char *buf, size_t len)
{
	struct jf	 p;
	yajl_handle	 h;
	yajl_status	 st;

	if (!jf_plain(buf, len))
		return NULL;
	memset(&p, 0, sizeof p);
	p.stack = p.inline_stack;
	p.cap = sizeof p.inline_stack / sizeof p.inline_stack[0];
	p.key = p.inline_key;
	p.keycap = sizeof p.inline_key;
	if ((h = yajl_alloc(&jf_callbacks, NULL, &p)) == NULL)
		return NULL;
	p.h = h;
	yajl_config(h, yajl_dont_validate_strings, 1);
	st = yajl_parse(h, (const unsigned char *)buf, len);
	if (st == yajl_status_ok) {
		p.finishing = 1;
		st = yajl_complete_parse(h);
	}
	yajl_free(h);
	if (p.stack != p.inline_stack)
		free(p.stack);
	if (p.key != p.inline_key)
		free(p.key);
	if (st == yajl_status_ok && p.root != NULL && p.depth == 0 &&
	    jf_only_space(buf, len, p.end))
		return p.root;
	json_decref(p.root);
	return NULL;
}

json_t *
jsonfast_loadb(const char *buf, size_t len, size_t flags, json_error_t *error)
{
	json_t	*v;

	if ((v = jsonfast_parse(buf, len)) != NULL)
		return v;
	/* yajl refused it, or it is a case for jansson: jansson decides. */
	return json_loadb(buf, len, JSON_DECODE_ANY | (flags & JSON_ALLOW_NUL),
	    error);
}
