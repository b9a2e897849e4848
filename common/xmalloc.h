/*
 * Checked allocation. Out-of-memory is the one condition we do not try to
 * survive: these functions log and abort, so callers never test for NULL.
 * Sizes that come from input must be checked against a limit before they
 * reach here (STYLE.md habit 5).
 */
#ifndef GBR_XMALLOC_H
#define GBR_XMALLOC_H

#include <stddef.h>
#include <stdarg.h>

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
char	*xstrndup(const char *, size_t);
/* Returns a new string the caller frees. */
char	*xasprintf(const char *, ...) __attribute__((format(__printf__, 1, 2)));
char	*xvasprintf(const char *, va_list) __attribute__((format(__printf__, 1, 0)));

#endif
