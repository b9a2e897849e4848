/*
 * The string-keyed map of idmap.h: FNV-1a hashed, chained buckets, the
 * bucket array doubled once the entries outnumber the buckets. It owns
 * only its bucket array; the entries live in the objects they map.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "xmalloc.h"

#define IDMAP_FIRST_BUCKETS	64

/* FNV-1a. */
static size_t
idmap_hash(const char *key)
{
	uint64_t	h = 1469598103934665603ULL;

	while (*key != '\0') {
		h ^= (unsigned char)*key++;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

/* Finds the owner of key. */
void *
idmap_find(const struct idmap *m, const char *key)
{
	struct idmap_entry	*e;

	if (m->nb == 0)
		return NULL;
	for (e = m->b[idmap_hash(key) & (m->nb - 1)]; e != NULL; e = e->next) {
		if (strcmp(e->key, key) == 0)
			return e->owner;
	}
	return NULL;
}

/* Doubles the bucket array, moving every entry to its new chain. */
static void
idmap_grow(struct idmap *m)
{
	struct idmap_entry	**nb, *e, *next;
	size_t			  i, n, h;

	n = m->nb == 0 ? IDMAP_FIRST_BUCKETS : m->nb * 2;
	nb = xcalloc(n, sizeof *nb);
	for (i = 0; i < m->nb; i++) {
		for (e = m->b[i]; e != NULL; e = next) {
			next = e->next;
			h = idmap_hash(e->key) & (n - 1);
			e->next = nb[h];
			nb[h] = e;
		}
	}
	free(m->b);
	m->b = nb;
	m->nb = n;
}

/* Adds an entry at the head of its chain. */
void
idmap_add(struct idmap *m, struct idmap_entry *e, const char *key, void *owner)
{
	size_t	h;

	if (m->n + 1 > m->nb)
		idmap_grow(m);
	e->key = key;
	e->owner = owner;
	h = idmap_hash(key) & (m->nb - 1);
	e->next = m->b[h];
	m->b[h] = e;
	m->n++;
}

/* Removes an entry if it is in the map. */
void
idmap_del(struct idmap *m, struct idmap_entry *e)
{
	struct idmap_entry	**pp;

	/* An entry never added has no key to hash. */
	if (m->nb == 0 || e->key == NULL)
		return;
	for (pp = &m->b[idmap_hash(e->key) & (m->nb - 1)]; *pp != NULL;
	    pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			e->next = NULL;
			m->n--;
			return;
		}
	}
}

/* The number of entries. */
size_t
idmap_count(const struct idmap *m)
{
	return m->n;
}

/* Frees the buckets. */
void
idmap_release(struct idmap *m)
{
	free(m->b);
	m->b = NULL;
	m->nb = m->n = 0;
}
