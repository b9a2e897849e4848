/*
 * lockaudit (see lockaudit.h): records, compares and puts back the paths
 * that decide a workspace's sandbox. The record is a JSON object, so that
 * memory and the file written for a crash hold the same thing:
 *
 *   {"root": ROOT, "entries": {PATH: ENTRY, ...}}
 *   ENTRY = {"t": "f" (file) | "d" (folder) | "l" (link) | "o" (other)
 *                 | "-" (absent),
 *            "mode", "ino", "dev", "size", "mt", "ct" (ns),
 *            "data": base64 of the bytes | null, "link": target,
 *            "always": bool, "trunc": bool (a folder not all recorded)}
 *
 * Everything that touches the tree goes through la_walk: one component at
 * a time from the root's descriptor, never following a link.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "lockaudit.h"
#include "log.h"
#include "paths.h"
#include "xmalloc.h"

#define LA_DEPTH_MAX	32	/* folder levels recorded under one path */

struct lockaudit {
	char		*root;
	size_t		 rootlen;
	char		*file;		/* where the record is kept, or NULL */
	json_t		*entries;	/* path -> entry */
	size_t		 bytes;		/* recorded bytes so far */
	unsigned	 aside;		/* names made by la_aside */
};

/* Nanoseconds of a timespec, as JSON. */
static json_int_t
la_ns(const struct timespec *ts)
{
	return (json_int_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* True if path is root or beneath it. */
static int
la_inside(const struct lockaudit *la, const char *path)
{
	return strncmp(path, la->root, la->rootlen) == 0 &&
	    (path[la->rootlen] == '/' || path[la->rootlen] == '\0');
}

/*
 * Opens the folder holding path (under the root), one component at a time
 * without following links, and points *name at the last component. With
 * make, a missing folder is made and anything else in the way (a link, a
 * file) is moved aside first. Returns the descriptor, or -1 with errno.
 */
static int	la_aside(struct lockaudit *, int, const char *);

static int
la_walk(struct lockaudit *la, const char *path, const char **name, int make)
{
	char		 comp[NAME_MAX + 1];
	const char	*p, *slash;
	size_t		 n;
	int		 fd, next;

	if (!la_inside(la, path) || path[la->rootlen] == '\0') {
		errno = EINVAL;
		return -1;
	}
	if ((fd = open(la->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	p = path + la->rootlen + 1;
	while ((slash = strchr(p, '/')) != NULL) {
		n = (size_t)(slash - p);
		if (n == 0 || n > NAME_MAX) {
			close(fd);
			errno = EINVAL;
			return -1;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (next == -1 && make && (errno == ELOOP || errno == ENOTDIR)) {
			if (la_aside(la, fd, comp) == 0)
				errno = ENOENT;
		}
		if (next == -1 && make && errno == ENOENT &&
		    mkdirat(fd, comp, 0755) == 0)
			next = openat(fd, comp, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (next == -1)
			return -1;
		fd = next;
		p = slash + 1;
	}
	if (*p == '\0' || strlen(p) > NAME_MAX) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	*name = p;
	return fd;
}

/*
 * Moves dirfd/name out of the way under a new name beside it (nothing is
 * destroyed that could not be put back by hand). Returns 0 or -1.
 */
static int
la_aside(struct lockaudit *la, int dirfd, const char *name)
{
	unsigned char	r[4];
	char		 to[NAME_MAX + 1];

	randombytes_buf(r, sizeof r);
	if (snprintf(to, sizeof to, ".%.200s.gbr-moved-%02x%02x%02x%02x-%u",
	    name, r[0], r[1], r[2], r[3], la->aside++) >= (int)sizeof to)
		return -1;
	return renameat(dirfd, name, dirfd, to);
}

/* Reads a whole regular file of at most max bytes. Returns 0 or -1. */
static int
la_read(int dirfd, const char *name, const struct stat *expect, size_t max,
    char **out, size_t *len)
{
	struct stat	 st;
	char		*buf;
	size_t		 got = 0;
	ssize_t		 n;
	int		 fd;

	*out = NULL;
	if ((fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (expect != NULL && (st.st_ino != expect->st_ino ||
	    st.st_dev != expect->st_dev)) || (size_t)st.st_size > max) {
		close(fd);
		return -1;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

/* Base64 of bytes (new JSON string). */
static json_t *
la_b64(const char *p, size_t len)
{
	size_t	 n = sodium_base64_encoded_len(len,
	    sodium_base64_VARIANT_ORIGINAL);
	char	*s = xmalloc(n);
	json_t	*j;

	sodium_bin2base64(s, n, (const unsigned char *)p, len,
	    sodium_base64_VARIANT_ORIGINAL);
	j = json_string(s);
	free(s);
	return j;
}

/* Bytes of a base64 JSON string (new buffer, NUL-terminated), or NULL. */
static char *
la_unb64(json_t *j, size_t *len)
{
	const char	*s = json_string_value(j);
	size_t		 n;
	char		*buf;

	if (s == NULL)
		return NULL;
	n = strlen(s);
	buf = xmalloc(n + 1);
	if (sodium_base642bin((unsigned char *)buf, n, s, n, NULL, len, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(buf);
		return NULL;
	}
	buf[*len] = '\0';
	return buf;
}

/* A JSON string of text a human can be shown, or NULL (binary, NUL). */
static json_t *
la_text(const char *p, size_t len)
{
	if (memchr(p, '\0', len) != NULL)
		return NULL;
	return json_stringn(p, len);	/* NULL unless valid UTF-8 */
}

static void	la_record(struct lockaudit *, const char *, int, int, int);

/* Records what a folder holds (bounded). */
static void
la_record_dir(struct lockaudit *la, const char *path, int dirfd, json_t *e,
    int always, int content, int depth)
{
	struct dirent	*de;
	DIR		*d;
	char		*child;
	int		 fd;

	if (depth >= LA_DEPTH_MAX ||
	    (fd = dup(dirfd)) == -1 || (d = fdopendir(fd)) == NULL) {
		json_object_set_new(e, "trunc", json_true());
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (json_object_size(la->entries) >= LOCKAUDIT_ENTRIES) {
			json_object_set_new(e, "trunc", json_true());
			break;
		}
		child = xasprintf("%s/%s", path, de->d_name);
		la_record(la, child, always, content, depth + 1);
		free(child);
	}
	closedir(d);
}

/* Records one path as it is now (see lockaudit_add). */
static void
la_record(struct lockaudit *la, const char *path, int always, int content,
    int depth)
{
	struct stat	 st;
	const char	*name;
	json_t		*e;
	char		*data, link[4096];
	size_t		 len;
	ssize_t		 n;
	int		 dirfd, fd;

	if (json_object_get(la->entries, path) != NULL ||
	    json_object_size(la->entries) >= LOCKAUDIT_ENTRIES)
		return;
	e = json_object();
	json_object_set_new(e, "always", json_boolean(always));
	json_object_set_new(la->entries, path, e);
	if ((dirfd = la_walk(la, path, &name, 0)) == -1 ||
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		json_object_set_new(e, "t", json_string("-"));
		if (dirfd != -1)
			close(dirfd);
		return;
	}
	json_object_set_new(e, "mode", json_integer(st.st_mode & 07777));
	json_object_set_new(e, "ino", json_integer((json_int_t)st.st_ino));
	json_object_set_new(e, "dev", json_integer((json_int_t)st.st_dev));
	json_object_set_new(e, "size", json_integer((json_int_t)st.st_size));
	json_object_set_new(e, "mt", json_integer(la_ns(&st.st_mtim)));
	json_object_set_new(e, "ct", json_integer(la_ns(&st.st_ctim)));
	if (S_ISREG(st.st_mode)) {
		json_object_set_new(e, "t", json_string("f"));
		if (content && (size_t)st.st_size <= LOCKAUDIT_FILE_MAX &&
		    la->bytes + (size_t)st.st_size <= LOCKAUDIT_BYTES &&
		    la_read(dirfd, name, &st, LOCKAUDIT_FILE_MAX, &data,
		    &len) == 0) {
			json_object_set_new(e, "data", la_b64(data, len));
			la->bytes += len;
			free(data);
		} else
			json_object_set_new(e, "data", json_null());
	} else if (S_ISDIR(st.st_mode)) {
		json_object_set_new(e, "t", json_string("d"));
		if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) != -1) {
			la_record_dir(la, path, fd, e, always, content, depth);
			close(fd);
		} else
			json_object_set_new(e, "trunc", json_true());
	} else if (S_ISLNK(st.st_mode)) {
		json_object_set_new(e, "t", json_string("l"));
		if ((n = readlinkat(dirfd, name, link, sizeof link - 1)) >= 0) {
			link[n] = '\0';
			json_object_set_new(e, "link", json_string(link));
		}
	} else
		json_object_set_new(e, "t", json_string("o"));
	close(dirfd);
}

/* Makes a record (see lockaudit.h). */
struct lockaudit *
lockaudit_create(const char *root, const char *file, char **cause)
{
	struct lockaudit	*la;

	*cause = NULL;
	if (root == NULL || !paths_is_absolute(root)) {
		*cause = xstrdup("lockaudit: the root must be absolute");
		return NULL;
	}
	la = xcalloc(1, sizeof *la);
	la->root = xstrdup(root);
	la->rootlen = strlen(root);
	while (la->rootlen > 1 && la->root[la->rootlen - 1] == '/')
		la->root[--la->rootlen] = '\0';
	la->file = file != NULL ? xstrdup(file) : NULL;
	la->entries = json_object();
	return la;
}

/* Records a path (see lockaudit.h). */
void
lockaudit_add(struct lockaudit *la, const char *path, int always,
    int content)
{
	if (la != NULL && path != NULL && la_inside(la, path) &&
	    path[la->rootlen] == '/')
		la_record(la, path, always, content, 0);
}

/* Writes the record to its file, through a temporary one. */
int
lockaudit_save(struct lockaudit *la)
{
	json_t	*o;
	char	*tmp;
	int	 r;

	if (la->file == NULL)
		return 0;
	o = json_pack("{s:s, s:O}", "root", la->root, "entries", la->entries);
	tmp = xasprintf("%s.tmp", la->file);
	r = json_dump_file(o, tmp, JSON_COMPACT);
	json_decref(o);
	if (r == 0 && rename(tmp, la->file) != 0)
		r = -1;
	if (r != 0) {
		log_warn("lockaudit: cannot write %s: %s", la->file,
		    strerror(errno));
		(void)unlink(tmp);
	}
	free(tmp);
	return r == 0 ? 0 : -1;
}

/* Appends one change to the list. */
static void
la_change(json_t *out, const char *path, const char *change, int restored,
    const char *why, json_t *proposed)
{
	json_t	*c = json_pack("{s:s, s:s, s:b}", "path", path, "change", change,
	    "restored", restored);

	if (why != NULL)
		json_object_set_new(c, "why", json_string(why));
	if (proposed != NULL)
		json_object_set_new(c, "proposed", proposed);
	json_array_append_new(out, c);
}

/* The new bytes of a regular file, for a human (new JSON string or NULL). */
static json_t *
la_proposed(int dirfd, const char *name)
{
	char	*data;
	size_t	 len;
	json_t	*j;

	if (la_read(dirfd, name, NULL, LOCKAUDIT_FILE_MAX, &data, &len) != 0)
		return NULL;
	j = la_text(data, len);
	free(data);
	return j;
}

/*
 * Removes what a command made at dirfd/name: a file or link is unlinked, a
 * folder emptied depth first (bounded) and removed, else moved aside.
 * Records each regular file's bytes as a proposal. Returns 0 or -1.
 */
static int
la_remove(struct lockaudit *la, int dirfd, const char *name, const char *path,
    json_t *out, int depth, unsigned *budget)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		*child;
	int		 fd, bad = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode)) {
		la_change(out, path, "created", 1, NULL, S_ISREG(st.st_mode) ?
		    la_proposed(dirfd, name) : NULL);
		return unlinkat(dirfd, name, 0);
	}
	if (depth < LA_DEPTH_MAX && (fd = openat(dirfd, name, O_RDONLY |
	    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		if ((d = fdopendir(fd)) == NULL)
			close(fd);
		else {
			while ((de = readdir(d)) != NULL && !bad) {
				if (strcmp(de->d_name, ".") == 0 ||
				    strcmp(de->d_name, "..") == 0)
					continue;
				if (*budget == 0) {
					bad = 1;
					break;
				}
				(*budget)--;
				child = xasprintf("%s/%s", path, de->d_name);
				if (la_remove(la, fd, de->d_name, child,
				    out, depth + 1, budget) != 0)
					bad = 1;
				free(child);
			}
			closedir(d);
		}
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
		return 0;
	/* Too big to take apart: out of the way, whole. */
	la_change(out, path, "created", la_aside(la, dirfd, name) == 0,
	    "a folder too big to remove was moved aside", NULL);
	return 0;
}

/* Writes bytes to dirfd/name with mode, through a temporary file. */
static int
la_write(struct lockaudit *la, int dirfd, const char *name, const char *data,
    size_t len, mode_t mode)
{
	char	tmp[64];
	int	fd, ok;

	snprintf(tmp, sizeof tmp, ".gbr-restore-%ld-%u.tmp", (long)getpid(),
	    la->aside++);
	if ((fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1)
		return -1;
	ok = write(fd, data, len) == (ssize_t)len && fchmod(fd, mode) == 0;
	ok = close(fd) == 0 && ok;
	if (ok && renameat(dirfd, tmp, dirfd, name) == 0)
		return 0;
	(void)unlinkat(dirfd, tmp, 0);
	return -1;
}

/* Compares one recorded path and puts it back. */
static void
la_check(struct lockaudit *la, const char *path, json_t *e, json_t *out,
    int exempt)
{
	struct stat	 st;
	const char	*t = json_string_value(json_object_get(e, "t")), *name;
	json_t		*proposed;
	char		*data = NULL, *cur;
	size_t		 len = 0, clen;
	mode_t		 mode;
	unsigned	 budget = LOCKAUDIT_ENTRIES;
	int		 dirfd, have, same, r;

	if (t == NULL || (exempt && !json_is_true(json_object_get(e, "always"))))
		return;
	mode = (mode_t)json_integer_value(json_object_get(e, "mode"));
	/* The folder it lives in, made again if a command took it away. */
	if ((dirfd = la_walk(la, path, &name, strcmp(t, "-") != 0)) == -1) {
		if (strcmp(t, "-") != 0)
			la_change(out, path, "removed", 0, strerror(errno), NULL);
		return;
	}
	have = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (strcmp(t, "-") == 0) {
		if (have)
			(void)la_remove(la, dirfd, name, path, out, 0, &budget);
		goto done;
	}
	if (strcmp(t, "f") == 0) {
		data = la_unb64(json_object_get(e, "data"), &len);
		same = have && S_ISREG(st.st_mode);
		if (same && data != NULL) {
			same = la_read(dirfd, name, &st, LOCKAUDIT_FILE_MAX, &cur,
			    &clen) == 0 && clen == len &&
			    memcmp(cur, data, len) == 0;
			if (cur != NULL)
				free(cur);
		} else if (same)
			same = (json_int_t)st.st_ino == json_integer_value(
			    json_object_get(e, "ino")) &&
			    (json_int_t)st.st_size == json_integer_value(
			    json_object_get(e, "size")) &&
			    la_ns(&st.st_mtim) == json_integer_value(
			    json_object_get(e, "mt"));
		if (same) {
			if ((st.st_mode & 07777) != mode) {
				r = fchmodat(dirfd, name, mode, 0);
				la_change(out, path, "mode", r == 0, NULL, NULL);
			}
			goto done;
		}
		if (data == NULL) {
			la_change(out, path, have ? "modified" : "removed", 0,
			    "too large to keep a copy of: not put back", NULL);
			goto done;
		}
		proposed = have && S_ISREG(st.st_mode) ?
		    la_proposed(dirfd, name) : NULL;
		if (have && S_ISDIR(st.st_mode))
			(void)la_remove(la, dirfd, name, path, out, 0, &budget);
		r = la_write(la, dirfd, name, data, len, mode);
		la_change(out, path, !have ? "removed" : S_ISREG(st.st_mode) ?
		    "modified" : "replaced", r == 0, r == 0 ? NULL :
		    strerror(errno), proposed);
	} else if (strcmp(t, "d") == 0) {
		if (have && S_ISDIR(st.st_mode)) {
			if ((st.st_mode & 07777) != mode) {
				r = fchmodat(dirfd, name, mode, 0);
				la_change(out, path, "mode", r == 0, NULL, NULL);
			}
			goto done;
		}
		if (have)
			(void)la_remove(la, dirfd, name, path, out, 0, &budget);
		r = mkdirat(dirfd, name, mode);
		la_change(out, path, have ? "replaced" : "removed", r == 0, NULL,
		    NULL);
	} else if (strcmp(t, "l") == 0) {
		const char	*target = json_string_value(json_object_get(e,
				    "link"));
		char		 buf[4096];
		ssize_t		 n;

		if (have && S_ISLNK(st.st_mode) && target != NULL &&
		    (n = readlinkat(dirfd, name, buf, sizeof buf - 1)) >= 0 &&
		    (buf[n] = '\0', strcmp(buf, target) == 0))
			goto done;
		if (have)
			(void)la_remove(la, dirfd, name, path, out, 0, &budget);
		r = target != NULL ? symlinkat(target, dirfd, name) : -1;
		la_change(out, path, have ? "replaced" : "removed", r == 0, NULL,
		    NULL);
	} else if (!have)
		la_change(out, path, "removed", 0, "not a file, folder or link",
		    NULL);
done:
	free(data);
	close(dirfd);
}

/* What a recorded folder holds now and did not: a command made it. */
static void
la_check_new(struct lockaudit *la, const char *path, json_t *e, json_t *out,
    int exempt)
{
	struct dirent	*de;
	DIR		*d;
	const char	*name;
	char		*child;
	unsigned	 budget = LOCKAUDIT_ENTRIES;
	int		 dirfd, fd;

	if (json_is_true(json_object_get(e, "trunc")) ||
	    (exempt && !json_is_true(json_object_get(e, "always"))))
		return;
	if ((dirfd = la_walk(la, path, &name, 0)) == -1)
		return;
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		close(dirfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		child = xasprintf("%s/%s", path, de->d_name);
		if (json_object_get(la->entries, child) == NULL)
			(void)la_remove(la, fd, de->d_name, child, out, 0,
			    &budget);
		free(child);
	}
	closedir(d);
	close(dirfd);
}

/* Orders paths so that a folder comes before what it holds. */
static int
la_path_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Compares and puts back (see lockaudit.h). */
json_t *
lockaudit_finish(struct lockaudit *la, int exempt)
{
	const char	**keys, *k;
	json_t		 *out = json_array(), *e;
	size_t		  n = 0, i;

	keys = xreallocarray(NULL, json_object_size(la->entries) + 1,
	    sizeof *keys);
	json_object_foreach(la->entries, k, e)
		keys[n++] = k;
	qsort(keys, n, sizeof *keys, la_path_cmp);
	/* Parents first: a folder put back before the files it held. */
	for (i = 0; i < n; i++)
		la_check(la, keys[i], json_object_get(la->entries, keys[i]), out,
		    exempt);
	for (i = 0; i < n; i++) {
		e = json_object_get(la->entries, keys[i]);
		if (strcmp(json_string_value(json_object_get(e, "t")) != NULL ?
		    json_string_value(json_object_get(e, "t")) : "", "d") == 0)
			la_check_new(la, keys[i], e, out, exempt);
	}
	free(keys);
	if (la->file != NULL)
		(void)unlink(la->file);
	return out;
}

/* Frees a record. */
void
lockaudit_free(struct lockaudit *la)
{
	if (la == NULL)
		return;
	json_decref(la->entries);
	free(la->root);
	free(la->file);
	free(la);
}

/* Puts back what records of a dead gbrd say (see lockaudit.h). */
json_t *
lockaudit_recover(const char *dir)
{
	struct lockaudit	*la;
	struct dirent		*de;
	DIR			*d;
	json_t			*all = json_array(), *o, *ch, *c;
	json_error_t		 jerr;
	const char		*root;
	char			*path, *cause;
	size_t			 len, i;

	if ((d = opendir(dir)) == NULL)
		return all;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		if ((o = json_load_file(path, 0, &jerr)) == NULL ||
		    (root = json_string_value(json_object_get(o, "root"))) ==
		    NULL || !json_is_object(json_object_get(o, "entries"))) {
			log_warn("lockaudit: %s is not a record (%s); removed",
			    path, o == NULL ? jerr.text : "no root");
			json_decref(o);
			(void)unlink(path);
			free(path);
			continue;
		}
		if ((la = lockaudit_create(root, path, &cause)) == NULL) {
			log_warn("%s", cause);
			free(cause);
			(void)unlink(path);
		} else {
			json_decref(la->entries);
			la->entries = json_incref(json_object_get(o, "entries"));
			ch = lockaudit_finish(la, 0);
			json_array_foreach(ch, i, c) {
				json_object_set_new(c, "root", json_string(root));
				json_object_del(c, "proposed");
				json_array_append(all, c);
			}
			json_decref(ch);
			lockaudit_free(la);
		}
		json_decref(o);
		free(path);
	}
	closedir(d);
	return all;
}
