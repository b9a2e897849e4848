/*
 * A minimal TAP producer for the C unit tests: one "ok N - name" line per
 * check, a plan at the end, exit status 1 if any check failed. automake's
 * tap-driver.sh counts the lines.
 */
#ifndef GBR_UNIT_H
#define GBR_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_n, unit_failed;

/* Evaluates cond exactly once. */
#define CHECK(cond, ...) do {						\
	int	unit_ok_ = (cond) ? 1 : 0;				\
									\
	unit_n++;							\
	if (!unit_ok_)							\
		unit_failed++;						\
	printf("%sok %d - ", unit_ok_ ? "" : "not ", unit_n);		\
	printf(__VA_ARGS__);						\
	if (unit_ok_)							\
		printf("\n");						\
	else								\
		printf("  [%s] at %s:%d\n", #cond, __FILE__, __LINE__);	\
	fflush(stdout);							\
} while (0)

/* True if s equals want; prints both otherwise. */
static inline int
unit_same(const char *s, const char *want)
{
	if (strcmp(s, want) == 0)
		return 1;
	printf("# got  [%s]\n# want [%s]\n", s, want);
	return 0;
}

static inline int
unit_done(void)
{
	printf("1..%d\n", unit_n);
	return unit_failed != 0;
}

#endif
