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

#define CHECK(cond, ...) do {						\
	unit_n++;							\
	if (cond) {							\
		printf("ok %d - ", unit_n);				\
	} else {							\
		unit_failed++;						\
		printf("not ok %d - ", unit_n);				\
	}								\
	printf(__VA_ARGS__);						\
	printf("%s\n", (cond) ? "" : "  [" #cond "] at " __FILE__);	\
} while (0)

static inline int
unit_done(void)
{
	printf("1..%d\n", unit_n);
	return unit_failed != 0;
}

#endif
