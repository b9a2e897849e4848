/*
 * The shadow store (see shadow.h): one bare git repository per workspace
 * in gbrd's state folder, driven through libgit2. This file owns the open
 * repositories and their indexes; what a change means and when to undo
 * it are session/rewind.c's.
 *
 * libgit2 is told to read no configuration but the repository's own (no
 * ~/.gitconfig, no /etc/gitconfig: a person's settings must not change
 * what is stored), and not to check who owns the work tree (gbrd may run
 * as another user than the workspace's owner). The work tree is set in
 * memory (git_repository_set_workdir with no gitlink), so nothing is
 * written into the workspace.
 *
 * Threads: a store has the loop's handle (repo: shadow_put, shadow_get)
 * and the worker's (wrepo and its index: shadow_snapshot, shadow_diff),
 * opened by the worker on its first snapshot so that reading a big index
 * is not the loop's either. A libgit2 object is never used by two threads
 * at once; libgit2 itself is initialised once, from the loop, before the
 * worker starts (shadow-work.c), and its error state is per thread.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "sha256.h"
#include "shadow.h"
#include "xmalloc.h"

#ifdef HAVE_LIBGIT2
#include <git2.h>

#define SHADOW_OPEN_MAX	64	/* workspaces with an open store */

struct shadow {
	char		*root;
	char		*gitdir;
	git_repository	*repo;		/* the loop's */
	git_repository	*wrepo;		/* the worker's, or NULL until used */
	git_index	*index;		/* wrepo's */
};

static struct shadow	*shadow_stores[SHADOW_OPEN_MAX];
static size_t		 shadow_nstores;
static int		 shadow_ready;
static atomic_int	 shadow_stop;	/* shadow_abort: cut snapshots short */
/* The test hook GBR_TEST_SHADOW_PAUSE: the folder a snapshot waits at. */
static const char	*shadow_pause_dir;
static int		 shadow_paused;	/* it waited already: once a run */

/* libgit2's last error as a new string. */
static char *
shadow_err(const char *what)
{
	const git_error	*e = git_error_last();

	return xasprintf("the shadow store: %s: %s", what,
	    e != NULL && e->message != NULL ? e->message : "unknown error");
}

/* Sets libgit2 up once. */
static int
shadow_init(char **cause)
{
	static const int levels[] = { GIT_CONFIG_LEVEL_SYSTEM,
	    GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL,
	    GIT_CONFIG_LEVEL_PROGRAMDATA };
	size_t	i;

	if (shadow_ready)
		return 0;
	if (git_libgit2_init() < 0) {
		*cause = shadow_err("init");
		return -1;
	}
	for (i = 0; i < sizeof levels / sizeof levels[0]; i++)
		(void)git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i], "");
	(void)git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
	shadow_pause_dir = fault_hook_str("SHADOW_PAUSE");
	/* The worker's handles are another thread's: libgit2 must know. */
	if (!(git_libgit2_features() & GIT_FEATURE_THREADS))
		log_warn("rewind: libgit2 was built without thread support; "
		    "snapshots run on the event loop");
	shadow_ready = 1;
	return 0;
}

/* Opens or creates the store of a workspace (see shadow.h). */
struct shadow *
shadow_open(const char *state_dir, const char *root, char **cause)
{
	unsigned char	 h[SHA256_LEN];
	char		 hex[SHA256_HEX], *dir, *gitdir;
	struct shadow	*sh;
	git_repository	*repo = NULL;
	git_config	*cfg = NULL;
	size_t		 i;

	*cause = NULL;
	for (i = 0; i < shadow_nstores; i++)
		if (strcmp(shadow_stores[i]->root, root) == 0)
			return shadow_stores[i];
	if (shadow_init(cause) != 0)
		return NULL;
	if (shadow_nstores == SHADOW_OPEN_MAX) {
		*cause = xasprintf("the shadow store: over %d workspaces in "
		    "one run", SHADOW_OPEN_MAX);
		return NULL;
	}
	sha256_buf(root, strlen(root), h);
	sha256_hex(h, hex);
	dir = xasprintf("%s/shadow", state_dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		*cause = xasprintf("the shadow store: %s: %s", dir,
		    strerror(errno));
		free(dir);
		return NULL;
	}
	gitdir = xasprintf("%s/%.32s.git", dir, hex);
	free(dir);
	if (git_repository_open_bare(&repo, gitdir) < 0) {
		if (git_repository_init(&repo, gitdir, 1) < 0) {
			*cause = shadow_err(gitdir);
			free(gitdir);
			return NULL;
		}
		/* Plain bytes: no line ending is ever converted. */
		if (git_repository_config(&cfg, repo) == 0) {
			(void)git_config_set_bool(cfg, "core.autocrlf", 0);
			(void)git_config_set_string(cfg, "gbr.workspace", root);
			git_config_free(cfg);
		}
	}
	sh = xcalloc(1, sizeof *sh);
	sh->root = xstrdup(root);
	sh->gitdir = gitdir;
	sh->repo = repo;
	shadow_stores[shadow_nstores++] = sh;
	return sh;
}

/*
 * The worker's handle of a store, opened on first use (on the worker:
 * reading the index of a big work tree is not the loop's to do).
 */
static int
shadow_worker_open(struct shadow *sh, char **cause)
{
	git_repository	*repo = NULL;

	if (sh->wrepo != NULL)
		return 0;
	if (git_repository_open_bare(&repo, sh->gitdir) < 0 ||
	    git_repository_set_workdir(repo, sh->root, 0) < 0 ||
	    git_repository_index(&sh->index, repo) < 0) {
		*cause = shadow_err(sh->root);
		git_repository_free(repo);
		return -1;
	}
	sh->wrepo = repo;
	return 0;
}

/* Closes every store. */
void
shadow_shutdown(void)
{
	size_t	i;

	/* No thread may hold a store while it is freed. */
	shadow_work_stop();
	for (i = 0; i < shadow_nstores; i++) {
		git_index_free(shadow_stores[i]->index);
		git_repository_free(shadow_stores[i]->wrepo);
		git_repository_free(shadow_stores[i]->repo);
		free(shadow_stores[i]->gitdir);
		free(shadow_stores[i]->root);
		free(shadow_stores[i]);
	}
	shadow_nstores = 0;
	if (shadow_ready)
		git_libgit2_shutdown();
	shadow_ready = 0;
	atomic_store(&shadow_stop, 0);
}

int
shadow_available(void)
{
	return 1;
}

/* Cuts the snapshots in progress short (see shadow.h). */
void
shadow_abort(void)
{
	atomic_store(&shadow_stop, 1);
}

/* The store's folder and its workspace (borrowed). */
const char *
shadow_gitdir(struct shadow *sh)
{
	return sh->gitdir;
}

const char *
shadow_root(struct shadow *sh)
{
	return sh->root;
}

/*
 * The test hook GBR_TEST_SHADOW_PAUSE=PATH: the first time in a run that
 * a snapshot's walk meets PATH (or a path beneath it), it makes the file
 * test-paused in the store and waits, up to 10 s, until the test removes
 * it: the test swaps a folder for a link at that very moment, as a
 * process writing the workspace could by chance.
 */
static void
shadow_pause(struct shadow *sh, const char *path)
{
	struct timespec	 ts = { 0, 10 * 1000 * 1000 };
	struct stat	 st;
	size_t		 n = strlen(shadow_pause_dir);
	char		*mark;
	int		 i, fd;

	if (path == NULL || shadow_paused || strncmp(path, shadow_pause_dir,
	    n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return;
	shadow_paused = 1;
	mark = xasprintf("%s/test-paused", sh->gitdir);
	if ((fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
		close(fd);
	for (i = 0; i < 1000 && lstat(mark, &st) == 0; i++)
		nanosleep(&ts, NULL);
	(void)unlink(mark);
	free(mark);
}

/* libgit2's diff progress: a non-zero return ends the walk. */
static int
shadow_progress(const git_diff *d, const char *old_path, const char *new_path,
    void *arg)
{
	(void)d;
	if (shadow_pause_dir != NULL)
		shadow_pause(arg, new_path != NULL ? new_path : old_path);
	return atomic_load(&shadow_stop) ? GIT_EUSER : 0;
}

/* Stores bytes as a blob. */
int
shadow_put(struct shadow *sh, const void *data, size_t len,
    char oid[SHADOW_OID_LEN + 1], char **cause)
{
	git_oid	id;

	if (git_blob_create_from_buffer(&id, sh->repo, data, len) < 0) {
		*cause = shadow_err("storing a file");
		return -1;
	}
	git_oid_tostr(oid, SHADOW_OID_LEN + 1, &id);
	return 0;
}

/* The blob id of bytes. */
void
shadow_hash(const void *data, size_t len, char oid[SHADOW_OID_LEN + 1])
{
	git_oid	id;

	if (git_odb_hash(&id, data, len, GIT_OBJECT_BLOB) < 0)
		fatalx("git_odb_hash failed");
	git_oid_tostr(oid, SHADOW_OID_LEN + 1, &id);
}

/* Reads a blob back. */
int
shadow_get(struct shadow *sh, const char *oid, char **data, size_t *len,
    char **cause)
{
	git_oid		 id;
	git_blob	*b;

	if (git_oid_fromstr(&id, oid) < 0) {
		*cause = xasprintf("the shadow store: '%.64s' is no object id",
		    oid);
		return -1;
	}
	if (git_blob_lookup(&b, sh->repo, &id) < 0) {
		*cause = xasprintf("the shadow store no longer holds %.12s",
		    oid);
		return -1;
	}
	*len = (size_t)git_blob_rawsize(b);
	*data = xmalloc(*len + 1);
	memcpy(*data, git_blob_rawcontent(b), *len);
	(*data)[*len] = '\0';
	git_blob_free(b);
	return 0;
}

/*
 * git add -A, then write-tree. One walk of the work tree (a diff of the
 * index against it, untracked files included, the index's stat cache
 * sparing the unchanged files), then each difference applied: half of
 * what git_index_add_all and git_index_update_all cost one after the
 * other (each walks the tree).
 */
int
shadow_snapshot(struct shadow *sh, char tree[SHADOW_OID_LEN + 1],
    char **cause)
{
	git_diff_options	 opts;
	git_diff		*d = NULL;
	const git_diff_delta	*dd;
	git_oid			 id;
	size_t			 i, n;
	int			 r = 0;

	if (git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION) < 0)
		fatalx("git_diff_options_init failed");
	opts.flags = GIT_DIFF_INCLUDE_UNTRACKED |
	    GIT_DIFF_RECURSE_UNTRACKED_DIRS | GIT_DIFF_INCLUDE_TYPECHANGE |
	    GIT_DIFF_UPDATE_INDEX;
	opts.progress_cb = shadow_progress;
	opts.payload = sh;
	if (shadow_worker_open(sh, cause) != 0)
		return -1;
	/* Another process may have written the index: read it if so. */
	if (git_index_read(sh->index, 0) < 0 ||
	    git_diff_index_to_workdir(&d, sh->wrepo, sh->index, &opts) < 0) {
		*cause = atomic_load(&shadow_stop) ? xstrdup("the shadow "
		    "store: gbrd is stopping") : shadow_err("reading the "
		    "workspace");
		return -1;
	}
	n = git_diff_num_deltas(d);
	/*
	 * Cut short, the index in memory holds part of the files: still a
	 * true cache of the work tree, which the next snapshot completes.
	 */
	for (i = 0; i < n && r == 0; i++) {
		if (atomic_load(&shadow_stop)) {
			git_diff_free(d);
			*cause = xstrdup("the shadow store: gbrd is stopping");
			return -1;
		}
		dd = git_diff_get_delta(d, i);
		if (dd->status == GIT_DELTA_DELETED)
			r = git_index_remove_bypath(sh->index,
			    dd->old_file.path);
		else
			r = git_index_add_bypath(sh->index, dd->new_file.path);
	}
	git_diff_free(d);
	if (r < 0) {
		*cause = shadow_err("reading the workspace");
		return -1;
	}
	if (git_index_write_tree(&id, sh->index) < 0 ||
	    git_index_write(sh->index) < 0) {
		*cause = shadow_err("writing a snapshot");
		return -1;
	}
	git_oid_tostr(tree, SHADOW_OID_LEN + 1, &id);
	return 0;
}

/* The tree of an id. */
static int
shadow_tree(struct shadow *sh, const char *oid, git_tree **t, char **cause)
{
	git_oid	id;

	if (git_oid_fromstr(&id, oid) < 0 ||
	    git_tree_lookup(t, sh->wrepo, &id) < 0) {
		*cause = xasprintf("the shadow store no longer holds the "
		    "snapshot %.12s", oid);
		return -1;
	}
	return 0;
}

/* A delta's side as an id, "" for none, or NULL for a link or submodule. */
static const char *
shadow_side(const git_diff_file *f, char buf[SHADOW_OID_LEN + 1])
{
	if (!(f->flags & GIT_DIFF_FLAG_EXISTS) || git_oid_is_zero(&f->id))
		return "";
	if (f->mode != GIT_FILEMODE_BLOB &&
	    f->mode != GIT_FILEMODE_BLOB_EXECUTABLE)
		return NULL;
	git_oid_tostr(buf, SHADOW_OID_LEN + 1, &f->id);
	return buf;
}

/* What changed between two snapshots. */
json_t *
shadow_diff(struct shadow *sh, const char *a, const char *b, size_t max,
    size_t *skipped, char **cause)
{
	git_diff_options	 opts;
	git_tree		*ta = NULL, *tb = NULL;
	git_diff		*d = NULL;
	const git_diff_delta	*dd;
	const char		*before, *after;
	char			 ob[SHADOW_OID_LEN + 1], nb[SHADOW_OID_LEN + 1];
	json_t			*out;
	size_t			 i, n;

	*skipped = 0;
	if (git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION) < 0)
		fatalx("git_diff_options_init failed");
	if (shadow_worker_open(sh, cause) != 0)
		return NULL;
	if (shadow_tree(sh, a, &ta, cause) != 0)
		return NULL;
	if (shadow_tree(sh, b, &tb, cause) != 0) {
		git_tree_free(ta);
		return NULL;
	}
	if (git_diff_tree_to_tree(&d, sh->wrepo, ta, tb, &opts) < 0) {
		*cause = shadow_err("comparing snapshots");
		git_tree_free(ta);
		git_tree_free(tb);
		return NULL;
	}
	out = json_array();
	n = git_diff_num_deltas(d);
	for (i = 0; i < n; i++) {
		dd = git_diff_get_delta(d, i);
		before = shadow_side(&dd->old_file, ob);
		after = shadow_side(&dd->new_file, nb);
		if (before == NULL || after == NULL ||
		    json_array_size(out) >= max) {
			(*skipped)++;
			continue;
		}
		json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "path",
		    dd->new_file.path != NULL ? dd->new_file.path :
		    dd->old_file.path, "before", before, "after", after));
	}
	git_diff_free(d);
	git_tree_free(ta);
	git_tree_free(tb);
	return out;
}

/* libgit2, set up for another thread (see shadow.h). */
int
shadow_lib_init(char **cause)
{
	*cause = NULL;
	return shadow_init(cause);
}

/* Whether an object is stored (a rewind's target still there). */
int
shadow_has(struct shadow *sh, const char *oid)
{
	git_odb	*odb;
	git_oid	 id;
	int	 r;

	if (git_oid_fromstr(&id, oid) < 0 ||
	    git_repository_odb(&odb, sh->repo) < 0)
		return 0;
	r = git_odb_exists(odb, &id);
	git_odb_free(odb);
	return r == 1;
}

#else /* !HAVE_LIBGIT2 */

#define SHADOW_NONE "rewind is not available in this build of gbrd " \
	"(it was built without libgit2)"

int
shadow_lib_init(char **cause)
{
	*cause = xstrdup(SHADOW_NONE);
	return -1;
}

int
shadow_has(struct shadow *sh, const char *oid)
{
	(void)sh;
	(void)oid;
	return 0;
}

struct shadow *
shadow_open(const char *state_dir, const char *root, char **cause)
{
	(void)state_dir;
	(void)root;
	*cause = xstrdup(SHADOW_NONE);
	return NULL;
}

void
shadow_shutdown(void)
{
	shadow_work_stop();
}

void
shadow_abort(void)
{
}

int
shadow_available(void)
{
	return 0;
}

const char *
shadow_gitdir(struct shadow *sh)
{
	(void)sh;
	return "";
}

const char *
shadow_root(struct shadow *sh)
{
	(void)sh;
	return "";
}

int
shadow_put(struct shadow *sh, const void *data, size_t len,
    char oid[SHADOW_OID_LEN + 1], char **cause)
{
	(void)sh;
	(void)data;
	(void)len;
	oid[0] = '\0';
	*cause = xstrdup(SHADOW_NONE);
	return -1;
}

void
shadow_hash(const void *data, size_t len, char oid[SHADOW_OID_LEN + 1])
{
	(void)data;
	(void)len;
	oid[0] = '\0';
}

int
shadow_get(struct shadow *sh, const char *oid, char **data, size_t *len,
    char **cause)
{
	(void)sh;
	(void)oid;
	*data = NULL;
	*len = 0;
	*cause = xstrdup(SHADOW_NONE);
	return -1;
}

int
shadow_snapshot(struct shadow *sh, char tree[SHADOW_OID_LEN + 1],
    char **cause)
{
	(void)sh;
	tree[0] = '\0';
	*cause = xstrdup(SHADOW_NONE);
	return -1;
}

json_t *
shadow_diff(struct shadow *sh, const char *a, const char *b, size_t max,
    size_t *skipped, char **cause)
{
	(void)sh;
	(void)a;
	(void)b;
	(void)max;
	*skipped = 0;
	*cause = xstrdup(SHADOW_NONE);
	return NULL;
}

#endif /* HAVE_LIBGIT2 */
