/*
 * UTF-8 (see utf8.h). The validator takes eight ASCII bytes at a time, as
 * nearly all source text is ASCII; the decoder is the slow path.
 */
#include "gbr-config.h"

#include <string.h>

#include "utf8.h"
#include "xmalloc.h"

size_t
utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t	c, min;
	size_t		len, i;

	if (n == 0)
		return 0;
	c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c < 0xc2)		/* a continuation byte, or an overlong 2-byte lead */
		return 0;
	if (c < 0xe0) {
		len = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c < 0xf0) {
		len = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c < 0xf5) {
		len = 4;
		c &= 0x07;
		min = 0x10000;
	} else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

int
utf8_valid(const char *s, size_t len)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, n;
	uint64_t		 w;
	uint32_t		 cp;

	while (i < len) {
		if (len - i >= sizeof w) {
			memcpy(&w, u + i, sizeof w);
			if ((w & 0x8080808080808080ULL) == 0) {
				i += sizeof w;
				continue;
			}
		}
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		if ((n = utf8_decode(u + i, len - i, &cp)) == 0)
			return 0;
		i += n;
	}
	return 1;
}

char *
utf8_repair(const char *s, size_t len, int *lossy, size_t *olen)
{
	const unsigned char	*u = (const unsigned char *)s;
	char			*out;
	size_t			 i = 0, o = 0, n;
	uint32_t		 cp;

	out = xreallocarray(NULL, len + 1, 3);	/* aborts on overflow */
	while (i < len) {
		if (u[i] < 0x80) {
			out[o++] = (char)u[i++];
			continue;
		}
		if ((n = utf8_decode(u + i, len - i, &cp)) == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			if (lossy != NULL)
				*lossy = 1;
			continue;
		}
		memcpy(out + o, u + i, n);
		o += n;
		i += n;
	}
	out[o] = '\0';
	*olen = o;
	return out;
}

size_t
utf8_cut(const char *s, size_t cut)
{
	while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	return cut;
}

size_t
utf8_whole(const char *s, size_t len)
{
	unsigned char	c;
	size_t		i, back, need;

	/* Back over at most 3 continuation bytes to a lead byte. */
	for (back = 0; back < 4 && back < len; back++) {
		i = len - 1 - back;
		c = (unsigned char)s[i];
		if ((c & 0xc0) == 0x80)
			continue;
		need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 :
		    c >= 0xc0 ? 2 : 1;
		return need > back + 1 ? i : len;
	}
	return len;
}
