/*
 * Checked allocation: every failure is fatal, so the rest of the code can
 * treat allocation as infallible and keep its error paths for real errors.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

static void __attribute__((noreturn))
xmalloc_fail(size_t n)
{
	fprintf(stderr, "out of memory allocating %zu bytes\n", n);
	abort();
}

/* Allocates n bytes (at least one). */
void *
xmalloc(size_t n)
{
	void	*p;

	if ((p = malloc(n == 0 ? 1 : n)) == NULL)
		xmalloc_fail(n);
	return p;
}

/* Allocates a zeroed array; the multiplication is checked by calloc. */
void *
xcalloc(size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = calloc(nmemb, size)) == NULL)
		xmalloc_fail(nmemb * size);
	return p;
}

/* Resizes an array, refusing a size that overflows. */
void *
xreallocarray(void *old, size_t nmemb, size_t size)
{
	void	*p;

	if (size != 0 && nmemb > SIZE_MAX / size) {
		fprintf(stderr, "allocation overflow (%zu x %zu)\n", nmemb, size);
		abort();
	}
	if ((p = realloc(old, nmemb * size == 0 ? 1 : nmemb * size)) == NULL)
		xmalloc_fail(nmemb * size);
	return p;
}

/* Duplicates a string. */
char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		xmalloc_fail(strlen(s) + 1);
	return p;
}

/* Duplicates at most n bytes of a string, always terminated. */
char *
xstrndup(const char *s, size_t n)
{
	size_t	 len = strnlen(s, n);
	char	*p;

	/* Not strndup: Windows' C library has none. */
	p = xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

/* Formats into a new string. */
char *
xvasprintf(const char *fmt, va_list ap)
{
	char	*p;

	if (vasprintf(&p, fmt, ap) == -1)
		xmalloc_fail(0);
	return p;
}

/* Formats into a new string. */
char *
xasprintf(const char *fmt, ...)
{
	va_list	 ap;
	char	*p;

	va_start(ap, fmt);
	p = xvasprintf(fmt, ap);
	va_end(ap);
	return p;
}
