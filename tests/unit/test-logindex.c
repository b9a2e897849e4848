/*
 * Unit tests for daemon/session/logindex.c, where a catch-up starts
 * reading the disk log: the first note sets the base, only events on the
 * stride are kept, a lookup never lands after the event it is asked for
 * and never more than a stride before it, the thinning at LOGINDEX_MAX
 * positions (the stride doubles, every kept position stays right), and
 * the snapshot's JSON: a round trip, and every malformed form refused
 * with the index left empty.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logindex.h"
#include "unit.h"

/* The log seq of event seq in the tests: other records between them. */
static uint64_t
lseq_of(uint64_t seq)
{
	return 3 * seq + 7;
}

/* The event whose record is log seq l (inverse of lseq_of). */
static uint64_t
seq_of(uint64_t l)
{
	return (l - 7) / 3;
}

/*
 * Tells whether every lookup from 1 to last is right: the read starts at
 * a noted event at or before q, less than a stride before it; before the
 * base, at the log's start.
 */
static int
lookups_ok(const struct logindex *x, uint64_t last)
{
	uint64_t	q, l, e;

	for (q = 1; q <= last; q++) {
		l = logindex_find(x, q);
		if (q < x->base) {
			if (l != 0)
				return 0;
			continue;
		}
		e = seq_of(l + 1);
		if (lseq_of(e) != l + 1 || e > q || q - e >= x->stride)
			return 0;
	}
	return 1;
}

/* Tries to restore from text; returns what logindex_restore did. */
static int
restore_text(struct logindex *x, const char *text, uint64_t last)
{
	json_t	*v = json_loads(text, 0, NULL);
	int	 r;

	if (v == NULL) {
		printf("# test bug: %s does not parse\n", text);
		return 99;
	}
	r = logindex_restore(x, v, last);
	json_decref(v);
	return r;
}

int
main(void)
{
	static const char *const bad[] = {
		"{\"base\": 0, \"stride\": 64, \"seqs\": [10]}",
		"{\"base\": 1, \"stride\": 32, \"seqs\": [10]}",
		"{\"base\": 1, \"stride\": 96, \"seqs\": [10]}",
		"{\"base\": 1, \"stride\": 2199023255552, \"seqs\": [10]}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": []}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": [10, 10]}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": [20, 10]}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": [0]}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": [-5]}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": [10, \"20\"]}",
		"{\"base\": 1, \"stride\": 64, \"seqs\": {}}",
		"{\"base\": 1, \"stride\": 64}",
		"{\"stride\": 64, \"seqs\": [10]}",
		"{\"base\": \"1\", \"stride\": 64, \"seqs\": [10]}",
		"[1, 64, [10]]",
		/* Three positions reach event 129; the session ends at 128. */
		"{\"base\": 1, \"stride\": 64, \"seqs\": [10, 20, 30]}",
	};
	struct logindex	 x, y;
	json_t		*j, *seqs;
	uint64_t	 seq, stride_seen = 0;
	uint32_t	 max_n = 0;
	size_t		 i;
	int		 ok;

	memset(&x, 0, sizeof x);
	memset(&y, 0, sizeof y);
	CHECK(logindex_count(&x) == 0 && logindex_find(&x, 1) == 0 &&
	    logindex_find(&x, UINT64_MAX) == 0,
	    "an empty index reads from the log's start");

	logindex_note(&x, 5, 100);
	CHECK(logindex_count(&x) == 1 && x.base == 5 &&
	    x.stride == LOGINDEX_STRIDE, "the first note sets the base");
	CHECK(logindex_find(&x, 5) == 99 && logindex_find(&x, 1000) == 99,
	    "at or after the base: just before the base's record");
	CHECK(logindex_find(&x, 4) == 0,
	    "before the base: the log's start");
	logindex_note(&x, 6, 101);
	logindex_note(&x, 5 + 2 * LOGINDEX_STRIDE, 300);
	CHECK(logindex_count(&x) == 1,
	    "off the stride, or skipping a position: not kept");
	logindex_note(&x, 5 + LOGINDEX_STRIDE, 200);
	CHECK(logindex_count(&x) == 2 &&
	    logindex_find(&x, 5 + LOGINDEX_STRIDE - 1) == 99 &&
	    logindex_find(&x, 5 + LOGINDEX_STRIDE) == 199 &&
	    logindex_find(&x, 5 + 2 * LOGINDEX_STRIDE) == 199,
	    "the next position on the stride is kept and found");
	logindex_release(&x);
	CHECK(logindex_count(&x) == 0 && x.pos == NULL &&
	    logindex_find(&x, 70) == 0, "released: empty");

	/* A long session: the positions thin out and stay right. */
	ok = 1;
	for (seq = 1; seq <= 100000; seq++) {
		logindex_note(&x, seq, lseq_of(seq));
		if (logindex_count(&x) > max_n)
			max_n = logindex_count(&x);
		if (x.stride != stride_seen) {
			/* Just thinned (or the first): all still right. */
			stride_seen = x.stride;
			if (!lookups_ok(&x, seq))
				ok = 0;
		}
	}
	CHECK(max_n == LOGINDEX_MAX && logindex_count(&x) <= LOGINDEX_MAX,
	    "never more than %d positions", LOGINDEX_MAX);
	CHECK(ok, "right after every doubling of the stride");
	CHECK(lookups_ok(&x, 100000), "every lookup of 100000 events is right");
	CHECK(x.stride == 1024 && logindex_count(&x) == 98,
	    "100000 events: stride 1024, 98 positions");

	/* Exactly at the thinning: 128 positions, then the 129th. */
	logindex_release(&x);
	for (seq = 1; seq <= 1 + (LOGINDEX_MAX - 1) * LOGINDEX_STRIDE; seq++)
		logindex_note(&x, seq, lseq_of(seq));
	CHECK(logindex_count(&x) == LOGINDEX_MAX && x.stride == LOGINDEX_STRIDE,
	    "full: %d positions on the first stride", LOGINDEX_MAX);
	for (; seq <= 1 + LOGINDEX_MAX * LOGINDEX_STRIDE; seq++)
		logindex_note(&x, seq, lseq_of(seq));
	CHECK(logindex_count(&x) == LOGINDEX_MAX / 2 + 1 &&
	    x.stride == 2 * LOGINDEX_STRIDE && lookups_ok(&x, seq - 1),
	    "the next position halves them, doubles the stride, and is kept");

	/* The snapshot's form, and back. */
	j = logindex_json(&x);
	seqs = json_object_get(j, "seqs");
	CHECK(json_integer_value(json_object_get(j, "base")) == 1 &&
	    json_integer_value(json_object_get(j, "stride")) ==
	    2 * LOGINDEX_STRIDE && json_array_size(seqs) == logindex_count(&x),
	    "the JSON holds base, stride and every position");
	CHECK(logindex_restore(&y, j, seq - 1) == 0 &&
	    logindex_count(&y) == logindex_count(&x) && y.base == x.base &&
	    y.stride == x.stride && lookups_ok(&y, seq - 1),
	    "restored, it finds the same positions");
	for (; seq <= 200000; seq++) {
		logindex_note(&x, seq, lseq_of(seq));
		logindex_note(&y, seq, lseq_of(seq));
	}
	CHECK(logindex_count(&y) == logindex_count(&x) &&
	    y.stride == x.stride && lookups_ok(&y, seq - 1) &&
	    memcmp(x.pos, y.pos, x.n * sizeof *x.pos) == 0,
	    "a restored index goes on exactly as the original");
	CHECK(logindex_restore(&y, j, seq - 1) == 0 &&
	    logindex_count(&y) == json_array_size(seqs),
	    "restoring over a used index replaces it");
	json_decref(j);

	CHECK(restore_text(&y, "{\"base\": 1, \"stride\": 64, \"seqs\": "
	    "[10, 20, 30]}", 129) == 0 && logindex_count(&y) == 3 &&
	    logindex_find(&y, 129) == 29 && y.cap == 4,
	    "three positions, the last one the session's last event");
	logindex_note(&y, 193, 500);
	logindex_note(&y, 194, 501);
	CHECK(logindex_count(&y) == 4 && logindex_find(&y, 200) == 499,
	    "notes after a restore go on from its last position");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(restore_text(&y, bad[i], 128) == -1 &&
		    logindex_count(&y) == 0 && y.pos == NULL &&
		    logindex_find(&y, 100) == 0,
		    "refused, the index left empty: %s", bad[i]);
		restore_text(&y, "{\"base\": 1, \"stride\": 64, \"seqs\": [5]}",
		    1);
	}
	j = json_pack("{s:I, s:I, s:o}", "base", (json_int_t)1, "stride",
	    (json_int_t)64, "seqs", json_array());
	for (i = 0; i < LOGINDEX_MAX + 1; i++)
		json_array_append_new(json_object_get(j, "seqs"),
		    json_integer((json_int_t)(i + 1)));
	CHECK(logindex_restore(&y, j, 1000000) == -1 && logindex_count(&y) == 0,
	    "more than %d positions are refused", LOGINDEX_MAX);
	json_array_remove(json_object_get(j, "seqs"), LOGINDEX_MAX);
	CHECK(logindex_restore(&y, j, 1000000) == 0 &&
	    logindex_count(&y) == LOGINDEX_MAX && y.cap == LOGINDEX_MAX,
	    "exactly %d are taken", LOGINDEX_MAX);
	logindex_note(&y, 1 + LOGINDEX_MAX * 64, 5000);
	CHECK(logindex_count(&y) == LOGINDEX_MAX / 2 + 1 && y.stride == 128 &&
	    logindex_find(&y, 1 + LOGINDEX_MAX * 64) == 4999 &&
	    logindex_find(&y, 1 + 128) == 3 - 1,
	    "and the next note thins them as if they were noted here");
	json_decref(j);
	logindex_release(&x);
	logindex_release(&y);
	return unit_done();
}
