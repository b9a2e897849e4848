/*
 * jsonfast: jansson's json_loadb(buf, len, JSON_DECODE_ANY | flags, error),
 * about two and a half times faster, for the disk log's replay and the
 * sessions' histories, where parsing the daemon's own JSON is most of the
 * time.
 *
 * jansson's own lexer reads one byte at a time through a callback; yajl's
 * (a Debian package) scans runs of plain bytes at once. So yajl tokenizes
 * and jansson builds the values, with jansson's own checks (UTF-8 of every
 * string and key). Whatever yajl would read differently from jansson (a
 * \u0000 or a surrogate escape, \v or \f between tokens, a document nested
 * deeper than jansson allows) and every document either one refuses goes
 * to json_loadb itself. So the result is always exactly jansson's: the
 * same value, or NULL with jansson's own error. tests/unit/test-jsonfast.c
 * and tests/fuzz/fuzz-jsonfast.c compare the two on the same bytes.
 */
#ifndef GBR_JSONFAST_H
#define GBR_JSONFAST_H

#include <stddef.h>
#include <jansson.h>

/*
 * Parses len bytes of JSON (any value at the top). flags is 0 or
 * JSON_ALLOW_NUL (a \u0000 in a string becomes a NUL byte, as jansson's
 * encoder writes one: the daemon reads its own records with it). Returns a
 * new reference, or NULL with error filled (error may be NULL).
 */
json_t	*jsonfast_loadb(const char *buf, size_t len, size_t flags,
	    json_error_t *error);

/*
 * The fast path alone: a new reference, or NULL if it did not take the
 * document (then jansson must decide). For the tests, which check that it
 * takes what it should and agrees with jansson whenever it does.
 */
json_t	*jsonfast_parse(const char *buf, size_t len);

#endif
