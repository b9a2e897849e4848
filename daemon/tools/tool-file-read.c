/*
 * read_file and list_directory (see tool-file-int.h), the file tools that
 * only read. Bounds, since both run on the event loop:
 * - read_file reads at most the sandbox's read cap and returns at most
 *   TF_READ_OUT_MAX bytes of text, with next_offset to go on;
 * - list_directory returns at most TF_LIST_MAX entries, TF_LIST_DEPTH_MAX
 *   deep, reading at most TF_DIR_NAMES_MAX names per folder.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pathgate.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-file-int.h"
#include "utf8.h"
#include "xmalloc.h"

/* read_file {path, offset?, limit?}: a slice of a text file, by lines. */
int
tf_read(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	const char		*path, *p, *q, *end, *nl, *le;
	char			*data, *shown;
	size_t			 plen, dlen, total = 0, n = 0;
	json_int_t		 offset, limit, line;
	int			 lossy = 0, cut = 0;

	path = tf_str(args, "path", &plen);
	offset = tf_int(args, "offset", 1);
	limit = tf_int(args, "limit", TF_READ_LINES);
	if (sandbox_read_file(ctx->sandbox, path, plen, 0, &data, &dlen, NULL,
	    &loc, kind, reason) != 0)
		return -1;
	shown = sandbox_display(ctx->sandbox, &loc);
	sandbox_loc_release(&loc);
	if (memchr(data, '\0', dlen) != NULL) {
		free(data);
		tf_fail(kind, reason, GBR_ERR_NOT_A_FILE,
		    "'%s' looks binary (it holds NUL bytes)", shown);
		free(shown);
		return -1;
	}
	end = data + dlen;
	for (p = data; p < end && (nl = memchr(p, '\n', (size_t)(end - p))) != NULL;
	    p = nl + 1)
		total++;
	if (p < end)
		total++;	/* a last line without a newline */

	for (p = data, line = 1; line < offset && p < end; line++) {
		nl = memchr(p, '\n', (size_t)(end - p));
		p = nl != NULL ? nl + 1 : end;
	}
	if (line < offset || (p == end && offset > 1 && (size_t)offset > total)) {
		free(data);
		tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "offset %lld is past the end of '%s' "
		    "(%zu lines)", offset, shown, total);
		free(shown);
		return -1;
	}
	for (q = p; (json_int_t)n < limit && q < end; n++) {
		nl = memchr(q, '\n', (size_t)(end - q));
		le = nl != NULL ? nl + 1 : end;
		if ((size_t)(le - p) > TF_READ_OUT_MAX) {
			if (n == 0) {
				/* One huge line: return its start, say it was cut. */
				q = p + utf8_cut(p, TF_READ_OUT_MAX);
				cut = 1;
				n = 1;
			}
			break;
		}
		q = le;
	}
	*result = json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:b}",
	    "path", shown,
	    "content", tf_json_text(p, (size_t)(q - p), &lossy),
	    "start_line", offset,
	    "lines", (json_int_t)n,
	    "total_lines", (json_int_t)total,
	    "size", (json_int_t)dlen,
	    "truncated", cut || (q < end && (size_t)offset + n <= total));
	if (cut || (q < end && (size_t)offset + n <= total))
		json_object_set_new(*result, "next_offset",
		    json_integer(offset + (json_int_t)n));
	if (cut)
		json_object_set_new(*result, "line_cut", json_true());
	if (lossy)
		json_object_set_new(*result, "lossy", json_true());
	free(data);
	free(shown);
	return 0;
}

/* Orders names bytewise. */
static int
tf_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Reads the names of an open folder (not "." or ".."), at most max, sorted.
 * Returns the count; *cut is set if there were more.
 */
static size_t
tf_dir_names(DIR *d, size_t max, char ***names, int *cut)
{
	struct dirent	*e;
	size_t		 n = 0, cap = 0;

	*names = NULL;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == max) {
			*cut = 1;
			break;
		}
		if (n == cap) {
			cap = cap == 0 ? 64 : cap * 2;
			*names = xreallocarray(*names, cap, sizeof **names);
		}
		(*names)[n++] = xstrdup(e->d_name);
	}
	if (n > 0)
		qsort(*names, n, sizeof **names, tf_name_cmp);
	return n;
}

/* Frees a name array. */
static void
tf_names_free(char **names, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* A name as the agent may see it: escaped if the gate would refuse it. */
static json_t *
tf_name_json(const char *rel, int *unsafe)
{
	char	*e;
	json_t	*j;

	if (pathgate_check_bytes(rel, strlen(rel), PATHGATE_UNIX, NULL) == 0) {
		*unsafe = 0;
		return json_string(rel);
	}
	*unsafe = 1;
	e = sandbox_escape_for_display(rel, strlen(rel));
	j = json_string(e);
	free(e);
	return j;
}

struct tf_list {
	json_t	*entries;
	size_t	 count;
	int	 truncated;
};

/* Lists one folder (takes fd) into l, descending depth-1 more levels. */
static void
tf_list_dir(int fd, const char *rel, int depth, struct tf_list *l)
{
	struct stat	 st;
	DIR		*d;
	char		**names, *child;
	const char	*type;
	size_t		 n, i;
	int		 cut = 0, cfd, unsafe;
	json_t		*e;

	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	n = tf_dir_names(d, TF_DIR_NAMES_MAX, &names, &cut);
	if (cut)
		l->truncated = 1;
	for (i = 0; i < n; i++) {
		if (l->count >= TF_LIST_MAX) {
			l->truncated = 1;
			break;
		}
		child = rel[0] == '\0' ? xstrdup(names[i]) :
		    xasprintf("%s/%s", rel, names[i]);
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
			free(child);
			continue;
		}
		type = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" :
		    S_ISLNK(st.st_mode) ? "symlink" : "other";
		e = json_pack("{s:o, s:s}", "path", tf_name_json(child, &unsafe),
		    "type", type);
		if (S_ISREG(st.st_mode))
			json_object_set_new(e, "size", json_integer(st.st_size));
		if (unsafe)
			json_object_set_new(e, "unsafe_name", json_true());
		json_array_append_new(l->entries, e);
		l->count++;
		if (S_ISDIR(st.st_mode) && depth > 1 && !tf_skip_dir(names[i]) &&
		    (cfd = sandbox_open_child(dirfd(d), names[i], 1, &st)) != -1)
			tf_list_dir(cfd, child, depth - 1, l);
		free(child);
	}
	tf_names_free(names, n);
	closedir(d);
}

/* list_directory {path, depth?}: the entries of a folder, sorted. */
int
tf_list(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	struct tf_list		 l;
	const char		*path;
	char			*shown;
	size_t			 plen;
	int			 fd;

	path = tf_str(args, "path", &plen);
	if (sandbox_open_dir(ctx->sandbox, path, plen, &fd, &loc, kind,
	    reason) != 0)
		return -1;
	shown = sandbox_display(ctx->sandbox, &loc);
	sandbox_loc_release(&loc);
	l.entries = json_array();
	l.count = 0;
	l.truncated = 0;
	tf_list_dir(fd, "", (int)tf_int(args, "depth", 1), &l);
	*result = json_pack("{s:s, s:o, s:b}", "path", shown, "entries",
	    l.entries, "truncated", l.truncated);
	free(shown);
	return 0;
}

