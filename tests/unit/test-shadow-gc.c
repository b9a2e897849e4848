/*
 * Unit tests of the shadow store's collection (daemon/tools/shadow-gc.c)
 * on a real store: what it removes (an object nothing keeps, older than
 * the grace) and what it never removes (what it is told to keep, the
 * index's entries and the trees its cache names, a tree in flight and
 * everything under it, anything recent); an index it cannot read makes
 * it remove nothing; an object a dead run left aside is put back. Object
 * times are set in the past by hand, so no test waits for the grace.
 */
#include "gbr-config.h"

#include <sys/stat.h>
#include <sys/time.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shadow.h"
#include "shadow-gc.h"
#include "unit.h"
#include "xmalloc.h"

static char	state[PATH_MAX], ws[PATH_MAX], gitdir[PATH_MAX];

static void
put(const char *rel, const char *text)
{
	char	*p = xasprintf("%s/%s", ws, rel);
	FILE	*f = fopen(p, "w");

	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		exit(99);
	free(p);
}

/* The loose object file of an id. */
static char *
objpath(const char *oid)
{
	return xasprintf("%s/objects/%.2s/%s", gitdir, oid, oid + 2);
}

static int
stored(const char *oid)
{
	char	*p = objpath(oid);
	int	 r = access(p, F_OK) == 0;

	free(p);
	return r;
}

/* Every object an hour old: past any grace. */
static void
age(void)
{
	struct timeval	 tv[2];
	struct dirent	*d, *o;
	DIR		*top, *sub;
	char		*t, *s, *p;

	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= 3600;
	tv[1] = tv[0];
	t = xasprintf("%s/objects", gitdir);
	if ((top = opendir(t)) == NULL)
		exit(99);
	while ((d = readdir(top)) != NULL) {
		if (strlen(d->d_name) != 2)
			continue;
		s = xasprintf("%s/%s", t, d->d_name);
		if ((sub = opendir(s)) != NULL) {
			while ((o = readdir(sub)) != NULL) {
				p = xasprintf("%s/%s", s, o->d_name);
				if (o->d_name[0] != '.')
					(void)utimes(p, tv);
				free(p);
			}
			closedir(sub);
		}
		free(s);
	}
	closedir(top);
	free(t);
}

/* One run to its end; its error (a new string) or NULL. */
static char *
run(struct shadow_gc *gc, struct shadow_gc_stats *st)
{
	const char	*err;
	char		*cause, *r;
	int		 i;

	if (shadow_gc_start(gc, state, &cause) != 0) {
		printf("# %s\n", cause);
		exit(99);
	}
	for (i = 0; i < 2000 && !shadow_gc_done(gc); i++)
		usleep(5000);
	if (!shadow_gc_done(gc))
		exit(99);
	err = shadow_gc_result(gc, st);
	r = err != NULL ? xstrdup(err) : NULL;
	return r;
}

static void
test_collection(void)
{
	struct shadow		*sh;
	struct shadow_gc	*gc;
	struct shadow_gc_stats	 st;
	char			 t1[SHADOW_OID_LEN + 1], t2[SHADOW_OID_LEN + 1];
	char			 orphan[SHADOW_OID_LEN + 1], kept[SHADOW_OID_LEN + 1];
	char			 xold[SHADOW_OID_LEN + 1], xnew[SHADOW_OID_LEN + 1];
	char			 y[SHADOW_OID_LEN + 1], fresh[SHADOW_OID_LEN + 1];
	char			*cause, *err, *p, *q, *idx, *bak;
	size_t			 skipped;
	json_t			*d;
	FILE			*f;

	if ((sh = shadow_open(state, ws, &cause)) == NULL) {
		printf("# %s\n", cause);
		exit(99);
	}
	CHECK(shadow_snapshot(sh, t1, &cause) == 0, "first snapshot");
	shadow_hash("x one\n", 6, xold);
	shadow_hash("y\n", 2, y);
	put("a/x.txt", "x two\n");
	CHECK(shadow_snapshot(sh, t2, &cause) == 0, "second snapshot");
	shadow_hash("x two\n", 6, xnew);
	CHECK(shadow_put(sh, "orphan\n", 7, orphan, &cause) == 0, "orphan");
	CHECK(shadow_put(sh, "kept\n", 5, kept, &cause) == 0, "kept");
	age();
	CHECK(shadow_put(sh, "fresh\n", 6, fresh, &cause) == 0, "fresh");

	/* The first snapshot's tree in flight, one id kept by name. */
	gc = shadow_gc_create();
	shadow_gc_keep(gc, kept);
	shadow_gc_keep(gc, "not an id");
	shadow_gc_keep_tree(gc, t1);
	err = run(gc, &st);
	CHECK(err == NULL, "a clean run");
	CHECK(!stored(orphan), "an object nothing keeps goes");
	CHECK(st.removed == 1, "and only it (%llu)",
	    (unsigned long long)st.removed);
	CHECK(stored(kept) && stored(fresh), "kept by name; recent");
	CHECK(stored(xnew) && stored(y), "the index's entries stay");
	CHECK(stored(t1) && stored(xold), "a tree in flight and its files");
	CHECK(stored(t2), "the tree the index's cache names stays");
	CHECK(st.bytes > 0 && st.stores == 1, "measured");
	CHECK(shadow_gc_size(gc, kept) > 0, "the size of a kept object");
	CHECK(shadow_gc_size(gc, orphan) == 0, "none for another");
	shadow_gc_free(gc);
	free(err);

	/* Without the tree in flight: its own tree and old file go. */
	gc = shadow_gc_create();
	err = run(gc, &st);
	CHECK(err == NULL && !stored(t1) && !stored(xold) && !stored(kept),
	    "unkept, the first snapshot goes");
	shadow_gc_free(gc);
	free(err);
	/* The next snapshot builds on the cached trees: they are there. */
	put("c/z.txt", "z\n");
	CHECK(shadow_snapshot(sh, t1, &cause) == 0, "third snapshot");
	d = shadow_diff(sh, t2, t1, 10, &skipped, &cause);
	CHECK(d != NULL && json_array_size(d) == 1, "its diff reads");
	json_decref(d);

	/* An index that does not read: nothing is removed. */
	idx = xasprintf("%s/index", gitdir);
	bak = xasprintf("%s/index.bak", gitdir);
	CHECK(rename(idx, bak) == 0, "index aside");
	if ((f = fopen(idx, "w")) == NULL)
		exit(99);
	/* Version 2, 7 entries, then not even one. */
	fwrite("DIRC\0\0\0\2\0\0\0\7 truncated entries", 1, 29, f);
	fclose(f);
	CHECK(shadow_put(sh, "orphan 2\n", 9, orphan, &cause) == 0, "orphan");
	age();
	gc = shadow_gc_create();
	err = run(gc, &st);
	CHECK(err != NULL && st.removed == 0 && stored(orphan),
	    "a damaged index: an error, nothing removed");
	shadow_gc_free(gc);
	free(err);
	CHECK(rename(bak, idx) == 0, "index back");
	free(idx);
	free(bak);

	/* An object a dead run left aside is put back. */
	p = objpath(orphan);
	q = xasprintf("%s.gc", p);
	CHECK(rename(p, q) == 0, "aside");
	gc = shadow_gc_create();
	shadow_gc_keep(gc, orphan);
	err = run(gc, &st);
	CHECK(err == NULL && stored(orphan) && access(q, F_OK) != 0,
	    "put back by the next run");
	shadow_gc_free(gc);
	free(err);
	free(p);
	free(q);
}

int
main(void)
{
	char	*p, hex[NAME_MAX + 1];
	DIR	*dir;
	struct dirent *d;

	unit_tmpdir(state, sizeof state, "shadowgc-state");
	unit_tmpdir(ws, sizeof ws, "shadowgc-ws");
	p = xasprintf("%s/a", ws);
	(void)mkdir(p, 0700);
	free(p);
	p = xasprintf("%s/c", ws);
	(void)mkdir(p, 0700);
	free(p);
	put("a/x.txt", "x one\n");
	put("c/y.txt", "y\n");
	if (!shadow_available()) {
		unit_skip(1, "built without libgit2");
		return unit_done();
	}
	{
		struct shadow	*sh;
		char		*cause;

		if ((sh = shadow_open(state, ws, &cause)) == NULL)
			exit(99);
	}
	p = xasprintf("%s/shadow", state);
	if ((dir = opendir(p)) == NULL)
		exit(99);
	hex[0] = '\0';
	while ((d = readdir(dir)) != NULL)
		if (strstr(d->d_name, ".git") != NULL)
			snprintf(hex, sizeof hex, "%s", d->d_name);
	closedir(dir);
	snprintf(gitdir, sizeof gitdir, "%s/%s", p, hex);
	free(p);
	test_collection();
	shadow_shutdown();
	return unit_done();
}
