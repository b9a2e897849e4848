/*
 * UTF-8, the one decoder of the tree. Well-formed means what RFC 3629 and
 * jansson mean: no overlong forms, no surrogates, nothing above U+10FFFF.
 * NUL bytes are characters like any other here; callers that must refuse
 * them (paths) do so themselves.
 */
#ifndef GBR_UTF8_H
#define GBR_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Decodes the character at s (n bytes available) into *cp and returns its
 * length, or returns 0 if s does not start with a well-formed character
 * (or n is 0).
 */
size_t	utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* True if the len bytes at s are all well-formed UTF-8. */
int	utf8_valid(const char *s, size_t len);
/*
 * A copy of len bytes made well-formed: every byte that does not start a
 * well-formed character becomes U+FFFD, and *lossy (if given) is set. The
 * new string has *olen bytes and a NUL after them; the caller frees it.
 */
char	*utf8_repair(const char *s, size_t len, int *lossy, size_t *olen);
/*
 * The largest length <= cut that does not split a character of s (moves
 * back over continuation bytes; s must have at least cut + 1 bytes, or cut
 * must be its length).
 */
size_t	utf8_cut(const char *s, size_t cut);
/*
 * The length of the whole characters of the len bytes at s: an unfinished
 * character at the end (a buffer cut inside one: a stream's chunk, a cap)
 * is left out. Unlike utf8_cut it never reads s[len].
 */
size_t	utf8_whole(const char *s, size_t len);

#endif
