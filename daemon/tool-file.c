/*
 * The file tools (see tool-file.h). All path handling is the sandbox's:
 * these functions only ever hold fds the sandbox opened (or opened below
 * one with sandbox_open_child, which never follows a link), so nothing
 * here can be talked into leaving the roots.
 *
 * Bounds, since all of this runs on the event loop:
 * - read_file reads at most the sandbox's read cap and returns at most
 *   TF_READ_OUT_MAX bytes of text, with next_offset to go on;
 * - write_file and edit_file write at most the sandbox's write cap;
 * - list_directory returns at most TF_LIST_MAX entries, TF_LIST_DEPTH_MAX
 *   deep, reading at most TF_DIR_NAMES_MAX names per folder;
 * - search reads files of at most TF_SEARCH_FILE_MAX bytes, at most
 *   TF_SEARCH_FILES_MAX files and TF_SEARCH_BYTES_MAX bytes in all, returns
 *   at most max_results matches, and stops after TF_SEARCH_MS of wall-clock
 *   time. The regular expression runs one line at a time on at most the
 *   first TF_SEARCH_LINE_MAX bytes of the line: glibc's matcher can be
 *   quadratic in the text it is given (measured: "a*b" over a 10 MB buffer
 *   took 21 s, over the same text line by line 0.04 s), so bounding the
 *   line bounds one call, and the clock is checked between lines.
 *   Back-references, the one POSIX feature that is exponential, are refused.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pathgate.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-file.h"
#include "xmalloc.h"

#define TF_DIR_NAMES_MAX	100000	/* names read from one folder */
#define TF_MATCH_TEXT_MAX	240	/* bytes of a matching line returned */

/* Fills a refusal. Returns -1. */
static int __attribute__((format(printf, 4, 5)))
tf_fail(enum gbr_err *kind, char **reason, enum gbr_err k, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	*kind = k;
	*reason = xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

/* A string argument and its length (JSON strings may hold NUL). */
static const char *
tf_str(json_t *args, const char *key, size_t *len)
{
	json_t	*v = json_object_get(args, key);

	if (!json_is_string(v)) {
		*len = 0;
		return NULL;
	}
	*len = json_string_length(v);
	return json_string_value(v);
}

/* An integer argument, or def when absent. */
static json_int_t
tf_int(json_t *args, const char *key, json_int_t def)
{
	json_t	*v = json_object_get(args, key);

	return json_is_integer(v) ? json_integer_value(v) : def;
}

/* True if len bytes are valid UTF-8 (NUL bytes included). */
static int
tf_utf8_valid(const char *s, size_t len)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, n;
	uint64_t		 w;
	uint32_t		 cp;

	while (i < len) {
		/* Eight ASCII bytes at a time: most text is all ASCII. */
		if (len - i >= sizeof w) {
			memcpy(&w, u + i, sizeof w);
			if ((w & 0x8080808080808080ULL) == 0) {
				i += sizeof w;
				continue;
			}
		}
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		if ((n = pathgate_utf8_next(u + i, len - i, &cp)) == 0)
			return 0;
		i += n;
	}
	return 1;
}

/*
 * Copies len bytes as valid UTF-8: every invalid byte becomes U+FFFD and
 * *lossy is set. New string of *olen bytes (NUL bytes are kept).
 */
static char *
tf_utf8(const char *s, size_t len, int *lossy, size_t *olen)
{
	const unsigned char	*u = (const unsigned char *)s;
	char			*out = xmalloc(len * 3 + 1);
	size_t			 i = 0, o = 0, n;
	uint32_t		 cp;

	while (i < len) {
		if (u[i] < 0x80) {
			out[o++] = (char)u[i++];
			continue;
		}
		if ((n = pathgate_utf8_next(u + i, len - i, &cp)) == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			if (lossy != NULL)
				*lossy = 1;
			continue;
		}
		memcpy(out + o, u + i, n);
		o += n;
		i += n;
	}
	out[o] = '\0';
	*olen = o;
	return out;
}

/*
 * A JSON string of bytes made valid UTF-8 (new reference). Valid text,
 * nearly all of it, is checked once and copied once: pathgate's decoder
 * accepts exactly what jansson does (fuzz-pathgate checks it), so jansson
 * need not check it again.
 */
static json_t *
tf_json_text(const char *s, size_t len, int *lossy)
{
	json_t	*j;
	char	*t;
	size_t	 tl;

	if (tf_utf8_valid(s, len))
		j = json_stringn_nocheck(s, len);
	else {
		t = tf_utf8(s, len, lossy, &tl);
		j = json_stringn_nocheck(t, tl);
		free(t);
	}
	return j != NULL ? j : json_string("");
}

/* Backs up from cut to the start of a UTF-8 character. */
static size_t
tf_utf8_cut(const char *s, size_t cut)
{
	while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	return cut;
}

/* read_file {path, offset?, limit?}: a slice of a text file, by lines. */
static int
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
		    "offset %" JSON_INTEGER_FORMAT " is past the end of '%s' "
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
				q = p + tf_utf8_cut(p, TF_READ_OUT_MAX);
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

/* write_file {path, content}: creates or replaces a whole file. */
static int
tf_write(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	const char		*path, *content;
	char			*shown;
	size_t			 plen, clen;
	int			 created;

	path = tf_str(args, "path", &plen);
	content = tf_str(args, "content", &clen);
	if ((ctx->approved ? sandbox_write_file_approved :
	    sandbox_write_file)(ctx->sandbox, path, plen, content, clen, NULL,
	    &created, &loc, kind, reason) != 0)
		return -1;
	shown = sandbox_display(ctx->sandbox, &loc);
	sandbox_loc_release(&loc);
	*result = json_pack("{s:s, s:I, s:b}", "path", shown,
	    "bytes", (json_int_t)clen, "created", created);
	free(shown);
	return 0;
}

/* Counts non-overlapping occurrences of needle in hay. */
static size_t
tf_count(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
	const char	*p = hay, *end = hay + hlen, *m;
	size_t		 n = 0;

	while ((size_t)(end - p) >= nlen &&
	    (m = memmem(p, (size_t)(end - p), needle, nlen)) != NULL) {
		n++;
		p = m + nlen;
	}
	return n;
}

/* Replaces old_string in a file's text (see tool-file.h). */
int
tool_file_edit_text(const char *data, size_t dlen, json_t *args, size_t max,
    const char *shown, char **outp, size_t *outlen, size_t *countp,
    enum gbr_err *kind, char **reason)
{
	const char	*old, *new, *p, *m, *end;
	char		*out, *o;
	size_t		 olen, nlen, count, size;
	int		 all;

	*outp = NULL;
	old = tf_str(args, "old_string", &olen);
	new = tf_str(args, "new_string", &nlen);
	all = json_is_true(json_object_get(args, "replace_all"));
	if (old == NULL || new == NULL)
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "old_string and new_string are required");
	if (olen == 0)
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "old_string is empty");
	if (olen == nlen && memcmp(old, new, olen) == 0)
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "old_string and new_string are the same");
	if (memchr(data, '\0', dlen) != NULL)
		return tf_fail(kind, reason, GBR_ERR_NOT_A_FILE,
		    "'%s' looks binary (it holds NUL bytes)", shown);
	count = tf_count(data, dlen, old, olen);
	if (count == 0)
		return tf_fail(kind, reason, GBR_ERR_NOT_FOUND,
		    "old_string was not found in '%s' (it must match exactly, "
		    "whitespace included)", shown);
	if (count > 1 && !all)
		return tf_fail(kind, reason, GBR_ERR_NOT_UNIQUE,
		    "old_string occurs %zu times in '%s'; add the text around "
		    "it to make it unique, or set replace_all", count, shown);
	/* The new size, checked against the write cap before allocating. */
	if (nlen > olen && count > max / (nlen - olen))
		size = SIZE_MAX;
	else
		size = nlen >= olen ? dlen + count * (nlen - olen) :
		    dlen - count * (olen - nlen);
	if (size > max)
		return tf_fail(kind, reason, GBR_ERR_TOO_LARGE,
		    "'%s' would grow over the write cap of %zu bytes", shown,
		    max);
	out = xmalloc(size + 1);
	o = out;
	end = data + dlen;
	for (p = data; (m = memmem(p, (size_t)(end - p), old, olen)) != NULL;
	    p = m + olen) {
		memcpy(o, p, (size_t)(m - p));
		o += m - p;
		memcpy(o, new, nlen);
		o += nlen;
	}
	memcpy(o, p, (size_t)(end - p));
	o += end - p;
	*o = '\0';
	*outp = out;
	*outlen = (size_t)(o - out);
	if (countp != NULL)
		*countp = count;
	return 0;
}

/* edit_file {path, old_string, new_string, replace_all?}. */
static int
tf_edit(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	struct stat		 st;
	const char		*path, *old, *new;
	char			*data, *out, *shown;
	size_t			 plen, olen, nlen, dlen, count, outlen;

	path = tf_str(args, "path", &plen);
	old = tf_str(args, "old_string", &olen);
	new = tf_str(args, "new_string", &nlen);
	if (olen == 0)
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "old_string is empty");
	if (olen == nlen && memcmp(old, new, olen) == 0)
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "old_string and new_string are the same");
	if (sandbox_read_file(ctx->sandbox, path, plen, 0, &data, &dlen, &st,
	    &loc, kind, reason) != 0)
		return -1;
	shown = sandbox_display(ctx->sandbox, &loc);
	sandbox_loc_release(&loc);
	if (tool_file_edit_text(data, dlen, args,
	    sandbox_max_write(ctx->sandbox), shown, &out, &outlen, &count, kind,
	    reason) != 0)
		goto fail;
	if ((ctx->approved ? sandbox_write_file_approved :
	    sandbox_write_file)(ctx->sandbox, path, plen, out, outlen, &st,
	    NULL, NULL, kind, reason) != 0) {
		free(out);
		goto fail;
	}
	*result = json_pack("{s:s, s:I, s:I}", "path", shown,
	    "replacements", (json_int_t)count, "bytes", (json_int_t)outlen);
	free(out);
	free(data);
	free(shown);
	return 0;

fail:
	free(data);
	free(shown);
	return -1;
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

/* True for the version-control folders list and search do not descend. */
static int
tf_skip_dir(const char *name)
{
	return strcmp(name, ".git") == 0 || strcmp(name, ".hg") == 0 ||
	    strcmp(name, ".svn") == 0;
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
static int
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

/* One folder being searched: its names and where we are in them. */
struct tf_frame {
	DIR	 *d;
	char	**names;
	size_t	  n;
	size_t	  i;
	char	 *rel;		/* relative to the search base, "" at the top */
};

struct tf_search {
	regex_t		 re;
	char		 literal[1025];	/* a string every match contains */
	size_t		 literal_len;	/* 0: none */
	const char	*glob;
	int		 glob_slash;
	size_t		 max_results;
	json_t		*matches;
	uint64_t	 bytes;
	size_t		 files;
	size_t		 skipped_binary;
	size_t		 skipped_large;
	size_t		 lines_cut;
	const char	*stop;		/* why the search stopped early, or NULL */
	struct timespec	 deadline;
};

/* True once the wall-clock budget is spent. */
static int
tf_late(const struct tf_search *s)
{
	struct timespec	now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > s->deadline.tv_sec || (now.tv_sec ==
	    s->deadline.tv_sec && now.tv_nsec >= s->deadline.tv_nsec);
}

/* Searches one file's bytes, line by line. */
static void
tf_search_text(struct tf_search *s, const char *shown, const char *buf,
    size_t len)
{
	const char	*p = buf, *end = buf + len, *nl, *hit = NULL, *q;
	regmatch_t	 m;
	size_t		 line = 0, ll, tl, checked = 0;
	int		 lossy;

	if (s->literal_len > 0 && (hit = memmem(buf, len, s->literal,
	    s->literal_len)) == NULL)
		return;
	for (; p < end; p = nl + 1) {
		if (s->literal_len > 0) {
			/* Only lines holding the required string can match. */
			if (hit < p && (hit = memmem(p, (size_t)(end - p),
			    s->literal, s->literal_len)) == NULL)
				return;
			for (q = p; (q = memchr(q, '\n', (size_t)(hit - q))) != NULL;
			    q++) {
				line++;
				p = q + 1;
			}
		}
		line++;
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if ((++checked & 255) == 0 && tf_late(s)) {
			s->stop = "time";
			return;
		}
		ll = (size_t)(nl - p);
		if (ll > TF_SEARCH_LINE_MAX) {
			ll = TF_SEARCH_LINE_MAX;
			s->lines_cut++;
		}
		m.rm_so = 0;
		m.rm_eo = (regoff_t)ll;
		if (regexec(&s->re, p, 1, &m, REG_STARTEND) != 0)
			continue;
		tl = ll;
		if (tl > 0 && p[tl - 1] == '\r')
			tl--;
		if (tl > TF_MATCH_TEXT_MAX)
			tl = tf_utf8_cut(p, TF_MATCH_TEXT_MAX);
		lossy = 0;
		json_array_append_new(s->matches, json_pack("{s:s, s:I, s:o}",
		    "path", shown, "line", (json_int_t)line,
		    "text", tf_json_text(p, tl, &lossy)));
		if (json_array_size(s->matches) >= s->max_results) {
			s->stop = "max_results";
			return;
		}
		if (nl == end)
			break;
	}
}

/* Searches one regular file, opened below a searched folder. */
static void
tf_search_file(struct tf_search *s, int dirfd, const char *name,
    const char *rel, const char *shown)
{
	struct stat	 st;
	const char	*base;
	char		*buf;
	size_t		 used = 0;
	ssize_t		 n;
	int		 fd;

	if (s->glob != NULL) {
		base = strrchr(rel, '/');
		base = base != NULL ? base + 1 : rel;
		if (!pathgate_glob_match(s->glob, s->glob_slash ? rel : base, 0))
			return;
	}
	if (s->files >= TF_SEARCH_FILES_MAX) {
		s->stop = "files";
		return;
	}
	if ((fd = sandbox_open_child(dirfd, name, 0, &st)) == -1)
		return;
	if (st.st_size > TF_SEARCH_FILE_MAX) {
		s->skipped_large++;
		close(fd);
		return;
	}
	if (s->bytes + (uint64_t)st.st_size > TF_SEARCH_BYTES_MAX) {
		s->stop = "bytes";
		close(fd);
		return;
	}
	s->files++;
	buf = xmalloc((size_t)st.st_size + 1);
	while (used < (size_t)st.st_size) {
		n = read(fd, buf + used, (size_t)st.st_size - used);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	/* REG_STARTEND bounds the match, but a NUL end keeps strlen-based
	 * regexec wrappers (ASan's interceptor) inside the buffer too. */
	buf[used] = '\0';
	s->bytes += used;
	if (memchr(buf, '\0', used) != NULL)
		s->skipped_binary++;
	else
		tf_search_text(s, shown, buf, used);
	free(buf);
}

/* Searches below an open folder (takes fd); prefix is its display path. */
static void
tf_search_tree(struct tf_search *s, int fd, const char *prefix)
{
	struct tf_frame	 stack[TF_SEARCH_DEPTH_MAX];
	struct tf_frame	*f;
	struct stat	 st;
	const char	*name;
	char		*rel, *shown;
	int		 depth = 0, cut = 0, cfd;

	if ((stack[0].d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	stack[0].n = tf_dir_names(stack[0].d, TF_DIR_NAMES_MAX, &stack[0].names,
	    &cut);
	stack[0].i = 0;
	stack[0].rel = xstrdup("");
	while (depth >= 0 && s->stop == NULL) {
		f = &stack[depth];
		if (f->i >= f->n) {
			tf_names_free(f->names, f->n);
			free(f->rel);
			closedir(f->d);
			depth--;
			continue;
		}
		name = f->names[f->i++];
		if (tf_late(s)) {
			s->stop = "time";
			break;
		}
		if (fstatat(dirfd(f->d), name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		rel = f->rel[0] == '\0' ? xstrdup(name) :
		    xasprintf("%s/%s", f->rel, name);
		if (S_ISDIR(st.st_mode)) {
			if (!tf_skip_dir(name) && depth + 1 < TF_SEARCH_DEPTH_MAX &&
			    (cfd = sandbox_open_child(dirfd(f->d), name, 1,
			    &st)) != -1) {
				struct tf_frame *c = &stack[depth + 1];

				if ((c->d = fdopendir(cfd)) == NULL) {
					close(cfd);
					free(rel);
					continue;
				}
				c->n = tf_dir_names(c->d, TF_DIR_NAMES_MAX,
				    &c->names, &cut);
				c->i = 0;
				c->rel = rel;
				depth++;
				continue;
			}
		} else if (S_ISREG(st.st_mode)) {
			/* Links are never followed: in or out, they are skipped. */
			shown = strcmp(prefix, ".") == 0 ? xstrdup(rel) :
			    xasprintf("%s/%s", prefix, rel);
			tf_search_file(s, dirfd(f->d), name, rel, shown);
			free(shown);
		}
		free(rel);
	}
	for (; depth >= 0; depth--) {
		tf_names_free(stack[depth].names, stack[depth].n);
		free(stack[depth].rel);
		closedir(stack[depth].d);
	}
	if (cut && s->stop == NULL)
		s->stop = "folder_size";
}

/*
 * Finds a string that every match of an ERE must contain, to skip with
 * memmem the lines that cannot match: the longest run of plain characters
 * outside any group or bracket. Conservative: any '|' means none; a
 * character followed by '*', '?' or '{' may be absent, so it leaves the
 * run; GNU escapes such as \w end it. Writes it to out (NUL-terminated)
 * and returns its length, 0 if there is none worth using.
 */
static size_t
tf_required_literal(const char *p, char *out, size_t outsz)
{
	char	run[1025];
	size_t	rl = 0, best = 0;
	int	depth = 0;

	if (strchr(p, '|') != NULL || strlen(p) >= sizeof run)
		return 0;
	out[0] = '\0';
	for (;;) {
		char	c = *p;
		int	lit = 0;

		if (c == '\\' && p[1] != '\0' && strchr(".[]()*+?{}|^$\\/", p[1]) != NULL) {
			c = p[1];	/* an escaped operator is itself */
			p++;
			lit = depth == 0;
		} else if (c == '\\') {
			p += p[1] != '\0' ? 1 : 0;	/* \w, \b, ...: not plain */
		} else if (c == '(') {
			depth++;
		} else if (c == ')') {
			depth -= depth > 0;
		} else if (c == '[') {
			/* Skip the class: ']' first is a member, as is "[:x:]". */
			p++;
			if (*p == '^')
				p++;
			if (*p == ']')
				p++;
			while (*p != '\0' && *p != ']') {
				if (*p == '[' && (p[1] == ':' || p[1] == '.' ||
				    p[1] == '=')) {
					const char *e = strstr(p + 2, "]");

					p = e != NULL ? e : p + strlen(p) - 1;
				}
				p++;
			}
			if (*p == '\0')
				break;
		} else if (c != '\0' && strchr(".*+?{}^$", c) == NULL)
			lit = depth == 0;
		/* A following '*', '?' or '{' makes this character optional. */
		if (lit && p[1] != '\0' && strchr("*?{", p[1]) != NULL)
			lit = 0;
		if (lit) {
			run[rl++] = c;
			if (p[1] == '+') {
				/* Present at least once, but the run stops here. */
				lit = 0;
				p++;
			}
		}
		if (!lit || c == '\0') {
			if (rl > best && rl < outsz) {
				memcpy(out, run, rl);
				out[rl] = '\0';
				best = rl;
			}
			rl = 0;
		}
		if (*p == '\0')
			break;
		p++;
	}
	return best >= 3 ? best : 0;
}

/* search {pattern, path?, glob?, max_results?}. */
static int
tf_search(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	struct tf_search	 s;
	const char		*pattern, *path, *why;
	char			 err[256], *shown;
	size_t			 len, plen, i;
	int			 r, fd, n;

	memset(&s, 0, sizeof s);
	pattern = tf_str(args, "pattern", &len);
	if (len == 0 || len > 1024 || strlen(pattern) != len)
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "pattern must be 1 to 1024 bytes, without NUL");
	for (i = 0; i + 1 < len; i++) {
		if (pattern[i] == '\\' && pattern[i + 1] >= '1' &&
		    pattern[i + 1] <= '9')
			return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "back-references (\\1 to \\9) are not supported");
		if (pattern[i] == '\\')
			i++;
	}
	s.glob = tf_str(args, "glob", &len);
	if (s.glob != NULL) {
		if (strlen(s.glob) != len || pathgate_glob_check(s.glob, &why) != 0)
			return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "glob: %s", strlen(s.glob) != len ? "holds a NUL" : why);
		s.glob_slash = strchr(s.glob, '/') != NULL;
	}
	if ((r = regcomp(&s.re, pattern, REG_EXTENDED | REG_NEWLINE)) != 0) {
		regerror(r, &s.re, err, sizeof err);
		return tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "pattern: %s", err);
	}
	s.literal_len = tf_required_literal(pattern, s.literal, sizeof s.literal);
	s.max_results = (size_t)tf_int(args, "max_results", TF_SEARCH_RESULTS);
	s.matches = json_array();
	clock_gettime(CLOCK_MONOTONIC, &s.deadline);
	s.deadline.tv_sec += TF_SEARCH_MS / 1000;
	s.deadline.tv_nsec += (TF_SEARCH_MS % 1000) * 1000000L;
	if (s.deadline.tv_nsec >= 1000000000L) {
		s.deadline.tv_sec++;
		s.deadline.tv_nsec -= 1000000000L;
	}

	path = tf_str(args, "path", &plen);
	if (path != NULL) {
		if (sandbox_open_dir(ctx->sandbox, path, plen, &fd, &loc, kind,
		    reason) != 0) {
			regfree(&s.re);
			json_decref(s.matches);
			return -1;
		}
		shown = sandbox_display(ctx->sandbox, &loc);
		sandbox_loc_release(&loc);
		tf_search_tree(&s, fd, shown);
		free(shown);
	} else {
		/* The allowed root, then each read-only root outside it. */
		for (n = 0; n < sandbox_nroots(ctx->sandbox) && s.stop == NULL; n++) {
			const char	*p = n == 0 ? "." :
			    sandbox_root_path(ctx->sandbox, n);

			if (n > 0 && sandbox_root_inside(ctx->sandbox, n) != NULL)
				continue;
			if (sandbox_open_dir(ctx->sandbox, p, strlen(p), &fd, &loc,
			    kind, reason) != 0) {
				free(*reason);
				*reason = NULL;
				continue;
			}
			shown = sandbox_display(ctx->sandbox, &loc);
			sandbox_loc_release(&loc);
			tf_search_tree(&s, fd, shown);
			free(shown);
		}
	}
	regfree(&s.re);
	*result = json_pack("{s:o, s:I, s:I, s:I, s:I, s:b}",
	    "matches", s.matches,
	    "files_scanned", (json_int_t)s.files,
	    "bytes_scanned", (json_int_t)s.bytes,
	    "skipped_binary", (json_int_t)s.skipped_binary,
	    "skipped_large", (json_int_t)s.skipped_large,
	    "truncated", s.stop != NULL);
	if (s.stop != NULL)
		json_object_set_new(*result, "truncated_reason", json_string(s.stop));
	if (s.lines_cut > 0)
		json_object_set_new(*result, "long_lines_cut",
		    json_integer((json_int_t)s.lines_cut));
	return 0;
}

static const char tf_read_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"The file, relative to "
    "the workspace (or absolute inside it or a read-only root)\"},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":1,\"description\":"
    "\"First line to return, 1-based (default 1)\"},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,"
    "\"description\":\"Lines to return (default 2000)\"}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}";

static const char tf_write_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"The file to create or "
    "replace; missing folders are created\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"The whole new "
    "content\"}},"
    "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}";

static const char tf_edit_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"The file to edit\"},"
    "\"old_string\":{\"type\":\"string\",\"description\":\"Exact text to "
    "replace; must occur once unless replace_all\"},"
    "\"new_string\":{\"type\":\"string\",\"description\":\"The text to put "
    "instead\"},"
    "\"replace_all\":{\"type\":\"boolean\",\"description\":\"Replace every "
    "occurrence (default false)\"}},"
    "\"required\":[\"path\",\"old_string\",\"new_string\"],"
    "\"additionalProperties\":false}";

static const char tf_list_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"The folder ('.' for "
    "the workspace)\"},"
    "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5,"
    "\"description\":\"Levels to descend (default 1)\"}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}";

static const char tf_search_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"pattern\":{\"type\":\"string\",\"description\":\"A POSIX extended "
    "regular expression, matched line by line\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"Folder to search "
    "(default: the workspace and every read-only root)\"},"
    "\"glob\":{\"type\":\"string\",\"description\":\"Only files matching "
    "this glob, e.g. '*.gleam' or 'src/**/*.c'\"},"
    "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"
    "\"description\":\"Matches to return (default 100)\"}},"
    "\"required\":[\"pattern\"],\"additionalProperties\":false}";

static const struct tool_def tf_defs[] = {
	{ "read_file", "Read a text file, or a slice of its lines.",
	    tf_read_schema, 1, 0, 1, tf_read },
	{ "write_file", "Create or replace a whole file (atomically).",
	    tf_write_schema, 0, 1, 1, tf_write },
	{ "edit_file", "Replace an exact, unique piece of text in a file.",
	    tf_edit_schema, 0, 1, 0, tf_edit },
	{ "list_directory", "List a folder's entries, optionally a few levels "
	    "deep.", tf_list_schema, 1, 0, 1, tf_list },
	{ "search", "Search files for a regular expression, in the workspace "
	    "and the read-only reference folders.", tf_search_schema, 1, 0, 1,
	    tf_search },
};

/* The tool table. */
const struct tool_def *
tool_file_defs(size_t *n)
{
	*n = sizeof tf_defs / sizeof tf_defs[0];
	return tf_defs;
}

/* The five tools, tool.list-shaped. */
json_t *
tool_file_schemas(void)
{
	json_t	*a = json_array(), *schema;
	size_t	 i;

	for (i = 0; i < sizeof tf_defs / sizeof tf_defs[0]; i++) {
		schema = json_loads(tf_defs[i].schema, 0, NULL);
		json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:{s:b, s:b, s:b}}",
		    "name", tf_defs[i].name,
		    "description", tf_defs[i].description,
		    "inputSchema", schema != NULL ? schema : json_object(),
		    "annotations",
			"readOnlyHint", tf_defs[i].read_only,
			"destructiveHint", tf_defs[i].destructive,
			"idempotentHint", tf_defs[i].idempotent));
	}
	return a;
}

/* Calls one file tool directly. */
int
tool_file_call(struct sandbox *sb, const char *tool, json_t *args,
    json_t **result, enum gbr_err *kind, char **reason)
{
	struct tool_ctx	 ctx = { sb, NULL, NULL, 0 };
	json_t		*schema;
	char		*why;
	size_t		 i;
	int		 r;

	*result = NULL;
	*reason = NULL;
	for (i = 0; i < sizeof tf_defs / sizeof tf_defs[0]; i++) {
		if (tool == NULL || strcmp(tf_defs[i].name, tool) != 0)
			continue;
		schema = json_loads(tf_defs[i].schema, 0, NULL);
		r = tool_check_args(schema, args, &why);
		json_decref(schema);
		if (r != 0) {
			*kind = GBR_ERR_INVALID_PARAMS;
			*reason = xasprintf("%s: %s", tool, why);
			free(why);
			return -1;
		}
		if (args == NULL)
			args = json_object();
		else
			json_incref(args);
		r = tf_defs[i].fn(&ctx, args, result, kind, reason);
		json_decref(args);
		return r;
	}
	return tf_fail(kind, reason, GBR_ERR_METHOD_NOT_FOUND,
	    "no file tool called '%s'", tool != NULL ? tool : "");
}
