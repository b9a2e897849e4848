/*
 * Unit tests for daemon/session/idmap.c, the map that finds a session by
 * id or by name: lookups in an empty map, adds past every doubling of the
 * buckets (every entry must be found again after each rehash), removal at
 * the head, middle and tail of a chain, removing what was never added or
 * is already gone, the same object in two maps at once, and reuse after
 * release.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "unit.h"

#define NOBJ	1000

/* An object in two maps, as a session is (by id and by name). */
struct obj {
	char			id[16];
	char			name[16];
	struct idmap_entry	by_id;
	struct idmap_entry	by_name;
};

static struct obj	objs[NOBJ];

/* Tells whether every object in [from, to) is found by id, and nothing else. */
static int
all_found(const struct idmap *m, size_t from, size_t to)
{
	size_t	i;

	for (i = 0; i < NOBJ; i++) {
		if (idmap_find(m, objs[i].id) !=
		    (i >= from && i < to ? &objs[i] : NULL))
			return 0;
	}
	return 1;
}

/* The index of the chain an entry is in, or -1. */
static long
chain_of(const struct idmap *m, const struct idmap_entry *e)
{
	const struct idmap_entry	*x;
	size_t				 i;

	for (i = 0; i < m->nb; i++) {
		for (x = m->b[i]; x != NULL; x = x->next) {
			if (x == e)
				return (long)i;
		}
	}
	return -1;
}

int
main(void)
{
	struct idmap		 ids = IDMAP_INITIALIZER;
	struct idmap		 names = IDMAP_INITIALIZER;
	struct idmap_entry	*chain[3], never = { NULL, NULL, NULL };
	size_t			 i, j, grown_ok = 1, nb;
	long			 c;
	int			 ok;

	for (i = 0; i < NOBJ; i++) {
		snprintf(objs[i].id, sizeof objs[i].id, "%012zx", i * 7919);
		snprintf(objs[i].name, sizeof objs[i].name, "name-%zu", i);
	}

	CHECK(idmap_find(&ids, "x") == NULL && idmap_count(&ids) == 0,
	    "an empty map finds nothing and holds no buckets");
	idmap_del(&ids, &never);
	CHECK(idmap_count(&ids) == 0,
	    "removing from an empty map does nothing");
	CHECK(idmap_find(&ids, "") == NULL,
	    "the empty key is not found either");

	/* Every doubling (64, 128, ... buckets) must move every entry. */
	nb = 0;
	for (i = 0; i < NOBJ; i++) {
		idmap_add(&ids, &objs[i].by_id, objs[i].id, &objs[i]);
		if (ids.nb != nb) {
			nb = ids.nb;
			if (!all_found(&ids, 0, i + 1))
				grown_ok = 0;
		}
	}
	CHECK(grown_ok,
	    "every entry is found after each growth of the buckets");
	CHECK(idmap_count(&ids) == NOBJ && ids.nb >= NOBJ &&
	    (ids.nb & (ids.nb - 1)) == 0,
	    "%d entries: at most one per bucket on average, a power of two",
	    NOBJ);
	CHECK(all_found(&ids, 0, NOBJ), "all %d found by id", NOBJ);
	CHECK(idmap_find(&ids, "000000000001") == NULL,
	    "a key that was never added is not found");

	/* Find a chain of three and remove its middle, head, then tail. */
	ok = 0;
	for (i = 0; i < ids.nb && !ok; i++) {
		for (j = 0, chain[0] = ids.b[i]; j < 2 && chain[j] != NULL; j++)
			chain[j + 1] = chain[j]->next;
		ok = j == 2 && chain[2] != NULL;
	}
	CHECK(ok, "some bucket chains three entries");
	if (ok) {
		c = chain_of(&ids, chain[0]);
		idmap_del(&ids, chain[1]);
		CHECK(idmap_find(&ids, chain[1]->key) == NULL &&
		    idmap_find(&ids, chain[0]->key) == chain[0]->owner &&
		    idmap_find(&ids, chain[2]->key) == chain[2]->owner &&
		    chain[0]->next == chain[2],
		    "removing the middle of a chain keeps its neighbours");
		idmap_del(&ids, chain[0]);
		CHECK(ids.b[c] == chain[2] &&
		    idmap_find(&ids, chain[2]->key) == chain[2]->owner,
		    "removing the head of a chain keeps the rest");
		idmap_del(&ids, chain[2]);
		CHECK(chain_of(&ids, chain[2]) == -1 &&
		    idmap_count(&ids) == NOBJ - 3,
		    "removing the tail; the count follows");
		idmap_del(&ids, chain[2]);
		CHECK(idmap_count(&ids) == NOBJ - 3,
		    "removing an entry twice changes nothing");
		for (j = 0; j < 3; j++)
			idmap_add(&ids, chain[j], chain[j]->key,
			    chain[j]->owner);
		CHECK(idmap_count(&ids) == NOBJ && all_found(&ids, 0, NOBJ),
		    "removed entries can be added again");
	}
	idmap_del(&ids, &never);
	CHECK(idmap_count(&ids) == NOBJ && all_found(&ids, 0, NOBJ),
	    "removing an entry that was never added changes nothing");

	for (i = 0; i < NOBJ; i += 2)
		idmap_del(&ids, &objs[i].by_id);
	ok = 1;
	for (i = 0; i < NOBJ; i++) {
		if (idmap_find(&ids, objs[i].id) != (i % 2 ? &objs[i] : NULL))
			ok = 0;
	}
	CHECK(ok && idmap_count(&ids) == NOBJ / 2,
	    "every other one removed: the others are all still there");

	/* The same objects in a second map, by another key. */
	for (i = 0; i < NOBJ; i++)
		idmap_add(&names, &objs[i].by_name, objs[i].name, &objs[i]);
	ok = 1;
	for (i = 0; i < NOBJ; i++) {
		if (idmap_find(&names, objs[i].name) != &objs[i] ||
		    idmap_find(&names, objs[i].id) != NULL ||
		    idmap_find(&ids, objs[i].name) != NULL)
			ok = 0;
	}
	CHECK(ok,
	    "two maps over the same objects do not see each other's keys");
	idmap_del(&names, &objs[1].by_name);
	CHECK(idmap_find(&ids, objs[1].id) == &objs[1] &&
	    idmap_find(&names, objs[1].name) == NULL,
	    "leaving one map leaves the object in the other");
	CHECK(idmap_find(&names, "name-1000") == NULL &&
	    idmap_find(&names, "name-10") == &objs[10] &&
	    idmap_find(&names, "name-1") == NULL,
	    "keys that share a prefix are told apart");

	idmap_release(&ids);
	CHECK(idmap_count(&ids) == 0 && idmap_find(&ids, objs[1].id) == NULL &&
	    ids.b == NULL, "released: empty, no buckets");
	memset(&objs[3].by_id, 0, sizeof objs[3].by_id);
	idmap_add(&ids, &objs[3].by_id, objs[3].id, &objs[3]);
	CHECK(idmap_count(&ids) == 1 &&
	    idmap_find(&ids, objs[3].id) == &objs[3],
	    "a released map can be used again");
	idmap_release(&ids);
	idmap_release(&names);
	return unit_done();
}
