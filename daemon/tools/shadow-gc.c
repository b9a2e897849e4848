/*
 * Garbage collection of the shadow stores (see shadow-gc.h). The loop
 * fills a run with the ids it must keep and starts it; a detached thread
 * does every disk access: for each STATE/shadow/HASH.git it reads the
 * index (its own handle on the file, which libgit2 replaces by rename),
 * walks the trees in flight (its own handle on the repository), then
 * lists objects/XX/ and removes what is neither kept nor recent, and sums
 * the blocks of every file and folder of the store. The loop only polls
 * an atomic flag.
 *
 * Only loose objects are collected: the stores are never packed (a pack
 * found there is counted, not read).
 */
#include "gbr-config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "shadow.h"
#include "shadow-gc.h"
#include "xmalloc.h"

#define GC_GRACE_MS	2000	/* an object touched this recently stays */
#define GC_DEPTH_MAX	16	/* folders deep in a store when measuring */
#define GC_KEEP_MAX	(16u << 20)	/* ids of one set: past it, nothing goes */

#ifdef HAVE_LIBGIT2
#include <git2.h>

/* A sorted set of ids, with what each takes on disk. */
struct gc_set {
	git_oid		*ids;
	uint64_t	*sizes;
	size_t		 n, cap;
	int		 sorted;
	int		 full;		/* an id did not fit: keep everything */
};

struct shadow_gc {
	struct gc_set		 keep;		/* from the loop */
	struct gc_set		 trees;		/* from the loop: walked */
	struct gc_set		 more;		/* found by the thread */
	char			*dir;		/* STATE/shadow */
	int64_t			 cutoff_ms;	/* older and unkept: removed */
	struct shadow_gc_stats	 st;
	char			*error;
	atomic_int		 done;
};

static void
gc_set_add(struct gc_set *s, const git_oid *id)
{
	if (s->n == GC_KEEP_MAX) {
		s->full = 1;	/* the run then removes nothing */
		return;
	}
	if (s->n == s->cap) {
		s->cap = s->cap == 0 ? 256 : s->cap * 2;
		s->ids = xreallocarray(s->ids, s->cap, sizeof *s->ids);
	}
	s->ids[s->n++] = *id;
	s->sorted = 0;
}

static int
gc_oid_cmp(const void *a, const void *b)
{
	return git_oid_cmp(a, b);
}

/* Sorts a set and drops its duplicates. */
static void
gc_set_sort(struct gc_set *s)
{
	size_t	i, j;

	if (s->sorted)
		return;
	if (s->n > 1)
		qsort(s->ids, s->n, sizeof *s->ids, gc_oid_cmp);
	for (i = j = 0; i < s->n; i++)
		if (j == 0 || git_oid_cmp(&s->ids[j - 1], &s->ids[i]) != 0)
			s->ids[j++] = s->ids[i];
	s->n = j;
	free(s->sizes);
	s->sizes = s->n > 0 ? xcalloc(s->n, sizeof *s->sizes) : NULL;
	s->sorted = 1;
}

/* Where an id is in a sorted set, or -1. */
static long
gc_set_find(const struct gc_set *s, const git_oid *id)
{
	const git_oid	*p;

	if (s->n == 0)
		return -1;
	p = bsearch(id, s->ids, s->n, sizeof *s->ids, gc_oid_cmp);
	return p == NULL ? -1 : (long)(p - s->ids);
}

static void
gc_set_release(struct gc_set *s)
{
	free(s->ids);
	free(s->sizes);
	memset(s, 0, sizeof *s);
}

struct shadow_gc *
shadow_gc_create(void)
{
	struct shadow_gc	*gc = xcalloc(1, sizeof *gc);

	atomic_init(&gc->done, 0);
	return gc;
}

void
shadow_gc_keep(struct shadow_gc *gc, const char *oid)
{
	git_oid	id;

	if (oid != NULL && strlen(oid) == SHADOW_OID_LEN &&
	    git_oid_fromstr(&id, oid) == 0)
		gc_set_add(&gc->keep, &id);
}

void
shadow_gc_keep_tree(struct shadow_gc *gc, const char *oid)
{
	git_oid	id;

	if (oid != NULL && strlen(oid) == SHADOW_OID_LEN &&
	    git_oid_fromstr(&id, oid) == 0)
		gc_set_add(&gc->trees, &id);
}

/* The wall clock in ms, as file times count. */
static int64_t
gc_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
gc_mtime_ms(const struct stat *sb)
{
	return (int64_t)sb->st_mtim.tv_sec * 1000 +
	    sb->st_mtim.tv_nsec / 1000000;
}

/* git_tree_walk: keeps every entry of a tree in flight. */
static int
gc_tree_entry(const char *root, const git_tree_entry *e, void *arg)
{
	struct shadow_gc	*gc = arg;

	(void)root;
	gc_set_add(&gc->more, git_tree_entry_id(e));
	return 0;
}

static uint32_t
gc_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/*
 * The trees the index's cache names (its TREE extension): the next
 * snapshot reuses them for the folders that did not change, without
 * looking whether they are still stored, so they must stay. The index
 * format (version 2 or 3, as libgit2 writes it): a 12-byte header,
 * entries of 62 bytes (64 with extended flags) then the path, padded
 * with NULs to a multiple of 8, then extensions (4-byte name, 4-byte
 * size), then a 20-byte checksum. TREE is a list of "path NUL count
 * SP subtrees LF" each followed by a 20-byte id when count >= 0.
 * Returns 0, or -1 if the file does not read as that (then nothing of
 * the store is removed).
 */
static int
gc_index_trees(struct shadow_gc *gc, const unsigned char *b, size_t len)
{
	const unsigned char	*p, *end, *nl;
	git_oid			 id;
	uint32_t		 version, n, i, flags, esize, namelen;
	size_t			 off, fixed;

	if (len < 12 + GIT_OID_RAWSZ || memcmp(b, "DIRC", 4) != 0)
		return -1;
	version = gc_be32(b + 4);
	n = gc_be32(b + 8);
	if (version != 2 && version != 3)
		return -1;
	len -= GIT_OID_RAWSZ;		/* the checksum */
	off = 12;
	for (i = 0; i < n; i++) {
		if (off + 62 > len)
			return -1;
		flags = (uint32_t)b[off + 60] << 8 | b[off + 61];
		fixed = version == 3 && (flags & 0x4000) ? 64 : 62;
		namelen = flags & 0xfff;
		if (namelen == 0xfff) {
			if (off + fixed > len || (p = memchr(b + off + fixed,
			    '\0', len - off - fixed)) == NULL)
				return -1;
			namelen = (uint32_t)(p - (b + off + fixed));
		}
		off += (fixed + namelen + 8) & ~(size_t)7;
		if (off > len)
			return -1;
	}
	while (off + 8 <= len) {
		esize = gc_be32(b + off + 4);
		if (esize > len - off - 8)
			return -1;
		if (memcmp(b + off, "TREE", 4) != 0) {
			off += 8 + (size_t)esize;
			continue;
		}
		p = b + off + 8;
		end = p + esize;
		while (p < end) {
			if ((p = memchr(p, '\0', (size_t)(end - p))) == NULL ||
			    (nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
				return -1;
			/* A negative count: invalidated, no id follows. */
			if (p[1] == '-') {
				p = nl + 1;
				continue;
			}
			if ((size_t)(end - nl - 1) < GIT_OID_RAWSZ)
				return -1;
			git_oid_fromraw(&id, nl + 1);
			gc_set_add(&gc->more, &id);
			p = nl + 1 + GIT_OID_RAWSZ;
		}
		off += 8 + (size_t)esize;
	}
	return 0;
}

/* Reads a whole file (an index: bounded by what the store holds). */
static unsigned char *
gc_slurp(const char *path, size_t *len)
{
	unsigned char	*b;
	FILE		*f;
	long		 sz;

	if ((f = fopen(path, "rb")) == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return NULL;
	}
	b = xmalloc((size_t)sz + 1);
	if (fread(b, 1, (size_t)sz, f) != (size_t)sz) {
		free(b);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = (size_t)sz;
	return b;
}

/* Keeps the index entries and the trees in flight of one store. */
static int
gc_mark(struct shadow_gc *gc, const char *gitdir)
{
	git_repository	*repo;
	git_index	*idx;
	git_tree	*t;
	const git_index_entry *ie;
	unsigned char	*buf;
	char		*path;
	size_t		 i, n, len;
	int		 r = 0;

	path = xasprintf("%s/index", gitdir);
	if (access(path, F_OK) == 0) {
		/*
		 * The tree cache by hand (no API gives it), the entries
		 * through libgit2. libgit2 replaces the file by rename, so
		 * each read sees one whole index; what a newer one between
		 * the two reads names was just stored, which the grace
		 * keeps.
		 */
		if ((buf = gc_slurp(path, &len)) == NULL ||
		    gc_index_trees(gc, buf, len) != 0 ||
		    git_index_open(&idx, path) < 0) {
			free(buf);
			free(path);
			return -1;
		}
		free(buf);
		n = git_index_entrycount(idx);
		for (i = 0; i < n; i++)
			if ((ie = git_index_get_byindex(idx, i)) != NULL)
				gc_set_add(&gc->more, &ie->id);
		git_index_free(idx);
	}
	free(path);
	if (gc->trees.n == 0)
		return 0;
	if (git_repository_open_bare(&repo, gitdir) < 0)
		return -1;
	for (i = 0; i < gc->trees.n && r == 0; i++) {
		/* A tree of another workspace's store is not found here. */
		if (git_tree_lookup(&t, repo, &gc->trees.ids[i]) < 0)
			continue;
		gc_set_add(&gc->more, &gc->trees.ids[i]);
		if (git_tree_walk(t, GIT_TREEWALK_PRE, gc_tree_entry, gc) < 0)
			r = -1;
		git_tree_free(t);
	}
	git_repository_free(repo);
	return r;
}

/*
 * One loose object: kept (its size noted), or renamed aside, checked
 * again and removed. Returns the bytes it still takes.
 */
static uint64_t
gc_object(struct shadow_gc *gc, const char *path, const git_oid *id)
{
	struct stat	 sb;
	char		*aside;
	uint64_t	 size;
	long		 k;

	if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
		return 0;
	size = (uint64_t)sb.st_blocks * 512;
	gc->st.objects++;
	if ((k = gc_set_find(&gc->keep, id)) >= 0) {
		gc->keep.sizes[k] = size;
		return size;
	}
	if (gc_set_find(&gc->more, id) >= 0 ||
	    gc_mtime_ms(&sb) >= gc->cutoff_ms)
		return size;
	/*
	 * A store that looks for this object now (to write the same bytes)
	 * touches it: renamed aside first, the touch fails and the store
	 * writes it anew; touched just before, the time says so.
	 */
	aside = xasprintf("%s.gc", path);
	if (rename(path, aside) != 0) {
		free(aside);
		return 0;
	}
	if (lstat(aside, &sb) == 0 && gc_mtime_ms(&sb) >= gc->cutoff_ms) {
		if (link(aside, path) != 0 && errno != EEXIST)
			log_warn("shadow gc: %s: %s", path, strerror(errno));
		(void)unlink(aside);
		free(aside);
		return size;
	}
	if (unlink(aside) != 0) {
		free(aside);
		return size;
	}
	free(aside);
	gc->st.objects--;
	gc->st.removed++;
	gc->st.removed_bytes += size;
	return 0;
}

/* An object left aside by a run that died: back where it was. */
static void
gc_unaside(const char *aside)
{
	char	*path = xstrndup(aside, strlen(aside) - 3);

	if (link(aside, path) != 0 && errno != EEXIST)
		log_warn("shadow gc: %s: %s", path, strerror(errno));
	(void)unlink(aside);
	free(path);
}

/* Sweeps objects/XX/ of one store. */
static void
gc_sweep(struct shadow_gc *gc, const char *gitdir)
{
	DIR		*top, *sub;
	struct dirent	*d, *o;
	char		*tpath, *spath, *opath, hex[SHADOW_OID_LEN + 1];
	git_oid		 id;
	size_t		 len;

	tpath = xasprintf("%s/objects", gitdir);
	if ((top = opendir(tpath)) == NULL) {
		free(tpath);
		return;
	}
	while ((d = readdir(top)) != NULL) {
		if (strlen(d->d_name) != 2 ||
		    strspn(d->d_name, "0123456789abcdef") != 2)
			continue;
		spath = xasprintf("%s/%s", tpath, d->d_name);
		if ((sub = opendir(spath)) == NULL) {
			free(spath);
			continue;
		}
		while ((o = readdir(sub)) != NULL) {
			len = strlen(o->d_name);
			opath = xasprintf("%s/%s", spath, o->d_name);
			if (len == SHADOW_OID_LEN - 2 + 3 &&
			    strcmp(o->d_name + len - 3, ".gc") == 0)
				gc_unaside(opath);
			free(opath);
		}
		rewinddir(sub);
		while ((o = readdir(sub)) != NULL) {
			if (strlen(o->d_name) != SHADOW_OID_LEN - 2 ||
			    strspn(o->d_name, "0123456789abcdef") !=
			    SHADOW_OID_LEN - 2)
				continue;
			snprintf(hex, sizeof hex, "%s%s", d->d_name, o->d_name);
			if (git_oid_fromstr(&id, hex) < 0)
				continue;
			opath = xasprintf("%s/%s", spath, o->d_name);
			(void)gc_object(gc, opath, &id);
			free(opath);
		}
		closedir(sub);
		free(spath);
	}
	closedir(top);
	free(tpath);
}

/* The blocks of a folder and everything in it. */
static uint64_t
gc_du(const char *path, int depth)
{
	struct stat	 sb;
	struct dirent	*d;
	DIR		*dir;
	char		*p;
	uint64_t	 n;

	if (lstat(path, &sb) != 0)
		return 0;
	n = (uint64_t)sb.st_blocks * 512;
	if (!S_ISDIR(sb.st_mode) || depth >= GC_DEPTH_MAX ||
	    (dir = opendir(path)) == NULL)
		return n;
	while ((d = readdir(dir)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		p = xasprintf("%s/%s", path, d->d_name);
		n += gc_du(p, depth + 1);
		free(p);
	}
	closedir(dir);
	return n;
}

/* The thread: every store, one after the other. */
static void *
gc_main(void *arg)
{
	struct shadow_gc	*gc = arg;
	struct dirent		*d;
	DIR			*dir;
	char			*gitdir;
	int64_t			 t0 = gc_now_ms();
	size_t			 len;

	gc_set_sort(&gc->keep);
	gc_set_sort(&gc->trees);
	if ((dir = opendir(gc->dir)) == NULL) {
		if (errno != ENOENT)
			gc->error = xasprintf("%s: %s", gc->dir,
			    strerror(errno));
		goto out;
	}
	while ((d = readdir(dir)) != NULL) {
		len = strlen(d->d_name);
		if (len < 5 || strcmp(d->d_name + len - 4, ".git") != 0)
			continue;
		gitdir = xasprintf("%s/%s", gc->dir, d->d_name);
		gc->more.n = 0;
		gc->more.sorted = 0;
		gc->more.full = 0;
		if (gc->keep.full || gc->trees.full) {
			if (gc->error == NULL)
				gc->error = xstrdup("over 16M contents to keep: "
				    "nothing was collected");
		} else {
			/* No snapshot writes meanwhile (shadow-work.c). */
			shadow_store_lock();
			if (gc_mark(gc, gitdir) != 0 || gc->more.full) {
				/* What it needs is not known: nothing goes. */
				if (gc->error == NULL)
					gc->error = xasprintf("%s: %s", gitdir,
					    git_error_last() != NULL ?
					    git_error_last()->message :
					    "unreadable");
			} else {
				gc_set_sort(&gc->more);
				gc_sweep(gc, gitdir);
			}
			shadow_store_unlock();
		}
		gc->st.bytes += gc_du(gitdir, 0);
		gc->st.stores++;
		free(gitdir);
	}
	closedir(dir);
out:
	gc->st.ms = gc_now_ms() - t0;
	atomic_store(&gc->done, 1);
	return NULL;
}

int
shadow_gc_start(struct shadow_gc *gc, const char *state_dir, char **cause)
{
	pthread_attr_t	a;
	pthread_t	t;
	int		r;

	if (shadow_lib_init(cause) != 0)
		return -1;
	gc->dir = xasprintf("%s/shadow", state_dir);
	gc->cutoff_ms = gc_now_ms() - GC_GRACE_MS;
	if (pthread_attr_init(&a) != 0) {
		*cause = xstrdup("shadow gc: pthread_attr_init failed");
		return -1;
	}
	(void)pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &a, gc_main, gc);
	(void)pthread_attr_destroy(&a);
	if (r != 0) {
		*cause = xasprintf("shadow gc: no thread: %s", strerror(r));
		return -1;
	}
	return 0;
}

int
shadow_gc_done(struct shadow_gc *gc)
{
	return atomic_load(&gc->done);
}

const char *
shadow_gc_result(struct shadow_gc *gc, struct shadow_gc_stats *st)
{
	*st = gc->st;
	return gc->error;
}

uint64_t
shadow_gc_size(struct shadow_gc *gc, const char *oid)
{
	git_oid	id;
	long	k;

	if (oid == NULL || strlen(oid) != SHADOW_OID_LEN ||
	    git_oid_fromstr(&id, oid) < 0 || !gc->keep.sorted ||
	    (k = gc_set_find(&gc->keep, &id)) < 0)
		return 0;
	return gc->keep.sizes[k];
}

void
shadow_gc_free(struct shadow_gc *gc)
{
	if (gc == NULL)
		return;
	gc_set_release(&gc->keep);
	gc_set_release(&gc->trees);
	gc_set_release(&gc->more);
	free(gc->dir);
	free(gc->error);
	free(gc);
}

#else /* !HAVE_LIBGIT2 */

struct shadow_gc {
	int	unused;
};

struct shadow_gc *
shadow_gc_create(void)
{
	return xcalloc(1, sizeof (struct shadow_gc));
}

void
shadow_gc_keep(struct shadow_gc *gc, const char *oid)
{
	(void)gc;
	(void)oid;
}

void
shadow_gc_keep_tree(struct shadow_gc *gc, const char *oid)
{
	(void)gc;
	(void)oid;
}

int
shadow_gc_start(struct shadow_gc *gc, const char *state_dir, char **cause)
{
	(void)gc;
	(void)state_dir;
	*cause = xstrdup("the shadow store is not in this build (no libgit2)");
	return -1;
}

int
shadow_gc_done(struct shadow_gc *gc)
{
	(void)gc;
	return 1;
}

const char *
shadow_gc_result(struct shadow_gc *gc, struct shadow_gc_stats *st)
{
	(void)gc;
	memset(st, 0, sizeof *st);
	return NULL;
}

uint64_t
shadow_gc_size(struct shadow_gc *gc, const char *oid)
{
	(void)gc;
	(void)oid;
	return 0;
}

void
shadow_gc_free(struct shadow_gc *gc)
{
	free(gc);
}

#endif /* HAVE_LIBGIT2 */
