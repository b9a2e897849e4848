/*
 * A string-keyed hash map of objects that carry their own entry (one
 * struct idmap_entry per map the object is in), so adding and removing
 * never allocates an entry. session.c keeps its open sessions in two: by
 * id and by name. The map borrows the key from its owner: it must stay
 * unchanged while the entry is in the map. The map does not own the
 * objects and never frees them; it never iterates, so its order is
 * nobody's concern. Not for anything but lookup by exact key.
 */
#ifndef GBRD_IDMAP_H
#define GBRD_IDMAP_H

#include <stddef.h>

/* Embedded in the object it maps; zeroed, it is in no map. */
struct idmap_entry {
	struct idmap_entry	*next;		/* the bucket's chain */
	const char		*key;		/* borrowed from the owner */
	void			*owner;		/* what idmap_find returns */
};

/* A map; zeroed (IDMAP_INITIALIZER), it is empty and holds no memory. */
struct idmap {
	struct idmap_entry	**b;		/* buckets, a power of two */
	size_t			  nb;
	size_t			  n;		/* entries */
};
#define IDMAP_INITIALIZER	{ NULL, 0, 0 }

/*
 * Adds an entry under key (borrowed) for owner. The key must not be in
 * the map yet (callers look it up first) and the entry must be in no map.
 */
void		 idmap_add(struct idmap *, struct idmap_entry *,
		    const char *key, void *owner);
/* The owner of the entry with this key (borrowed), or NULL. */
void		*idmap_find(const struct idmap *, const char *key);
/* Removes an entry; one that is not in the map is left alone. */
void		 idmap_del(struct idmap *, struct idmap_entry *);
/* How many entries the map holds. */
size_t		 idmap_count(const struct idmap *);
/* Frees the buckets (not the objects); the map is empty again. */
void		 idmap_release(struct idmap *);

#endif
