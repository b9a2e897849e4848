/*
 * libFuzzer target for the environment profile parsers (daemon/sandbox/env.c):
 * byte 0 picks INI or JSON, the rest is the profile, parsed from memory
 * with env_parse (no disk). A refusal must carry a message naming the
 * file; an accepted profile must turn into JSON (env_to_json: every
 * string valid UTF-8, or jansson would refuse it) and compare equal to
 * itself (env_diff is empty). Leaks are reported by the fuzzer's
 * LeakSanitizer.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what)
{
	fprintf(stderr, "fuzz-env: %s\n", what);
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct env	*e;
	json_t		*j, *d;
	char		*cause = NULL, *s;

	if (size < 1)
		return 0;
	e = env_parse("fuzz", "f", (const char *)data + 1, size - 1,
	    (data[0] & 1) ? ENV_JSON : ENV_INI, &cause);
	if (e == NULL) {
		if (cause == NULL || strncmp(cause, "f:", 2) != 0)
			fail("a refusal without 'f:' and a message");
		free(cause);
		return 0;
	}
	if (cause != NULL)
		fail("a cause with a profile");
	j = env_to_json(e);
	if (j == NULL || (s = json_dumps(j, JSON_COMPACT)) == NULL)
		fail("env_to_json failed on an accepted profile");
	free(s);
	json_decref(j);
	d = env_diff(e, e);
	if (json_array_size(d) != 0)
		fail("env_diff of a profile with itself is not empty");
	json_decref(d);
	env_unref(e);
	return 0;
}
