/*
 * libFuzzer target for protocol/jsonfast.c: on any bytes, jsonfast_loadb
 * must give exactly what json_loadb(JSON_DECODE_ANY | flags) gives, with
 * flags 0 and JSON_ALLOW_NUL: the same value as jansson prints it (key
 * order, reals) or NULL with the same error.
 * A difference aborts. jansson is the reference; yajl's lexer (which the
 * fast path uses) runs here with the sanitizers too.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonfast.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Aborts with a message: the fuzzer reports it as a crash. */
static void __attribute__((noreturn))
fail(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "fuzz-jsonfast: %s\n  jansson:  %s\n  jsonfast: %s\n",
	    what, a, b);
	abort();
}

/* One comparison, with jansson's flags. */
static void
compare(const uint8_t *data, size_t size, size_t flags)
{
	json_error_t	 ea, eb;
	json_t		*a, *b;
	char		*da, *db;

	a = json_loadb((const char *)data, size, JSON_DECODE_ANY | flags, &ea);
	b = jsonfast_loadb((const char *)data, size, flags, &eb);
	if (a == NULL || b == NULL) {
		if (a != NULL || b != NULL)
			fail(a == NULL ? "only jsonfast accepts" :
			    "only jansson accepts", ea.text, eb.text);
		if (strcmp(ea.text, eb.text) != 0 || ea.position != eb.position)
			fail("the errors differ", ea.text, eb.text);
		return;
	}
	da = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
	db = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY);
	if (da == NULL || db == NULL || strcmp(da, db) != 0 || !json_equal(a, b))
		fail("the values differ", da ? da : "?", db ? db : "?");
	free(da);
	free(db);
	json_decref(a);
	json_decref(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	compare(data, size, 0);
	compare(data, size, JSON_ALLOW_NUL);
	return 0;
}
