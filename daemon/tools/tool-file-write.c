/*
 * write_file and edit_file (see tool-file-int.h), and edit_file's change on
 * a text (tool_file_edit_text), which the approvals' diff shares. Both
 * write at most the sandbox's write cap, atomically, through the sandbox;
 * an approved call writes only if the file still holds the bytes the
 * human's diff was made from. Each result carries the unified diff of
 * what the write changed (tf_diff), protected or not, so that the person
 * who reads the tool.result sees every change the agent made, not only
 * the ones an approval showed.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-file-int.h"
#include "xmalloc.h"

/* True if text has more than max lines. */
static int
tf_lines_over(const char *s, size_t len, size_t max)
{
	const char	*p = s, *end = s + len;
	size_t		 n = 0;

	while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		if (++n > max)
			return 1;
		p++;
	}
	return 0;
}

/*
 * Adds the diff from old to new to a write's result: "diff" (a/PATH and
 * b/PATH named as shown), with "diff_truncated" when it was cut at
 * TF_DIFF_OUT_MAX bytes; or, with none, "diff_omitted" saying why
 * (omitted: the reason, when the caller already knows it has no old
 * text to diff; else NULL). It runs on the loop, so it is
 * bounded as the approvals' diff is: texts over TF_DIFF_FILE_MAX (the
 * default write cap, the most an approval diffs) are not diffed, and
 * diff.c caps its own search (DIFF_MAX_LINES, DIFF_MAX_EDITS). Unlike an
 * approval's, this runs on every write, so texts over TF_DIFF_LINES_MAX
 * lines are not diffed either: diff.c keeps some 60 bytes a line, and 4
 * MiB of empty lines would cost hundreds of MB for a moment. Text with
 * a NUL byte is binary, and a list of sizes would tell nobody anything.
 */
static void
tf_diff(json_t *result, const char *shown, const char *old, size_t olen,
    const char *new, size_t nlen, const char *omitted)
{
	char	*d;
	size_t	 dlen;
	int	 cut, lossy = 0;

	if (omitted == NULL && (olen > TF_DIFF_FILE_MAX ||
	    nlen > TF_DIFF_FILE_MAX || tf_lines_over(old, olen,
	    TF_DIFF_LINES_MAX) || tf_lines_over(new, nlen, TF_DIFF_LINES_MAX)))
		omitted = "too large";
	if (omitted == NULL && (memchr(old, '\0', olen) != NULL ||
	    memchr(new, '\0', nlen) != NULL))
		omitted = "binary";
	if (omitted != NULL) {
		json_object_set_new(result, "diff_omitted", json_string(omitted));
		return;
	}
	d = diff_unified_head(shown, old, olen, new, nlen, TF_DIFF_OUT_MAX,
	    &dlen, &cut);
	/* The old text may be any bytes; the diff must be a JSON string. */
	json_object_set_new(result, "diff", tf_json_text(d, dlen, &lossy));
	if (cut)
		json_object_set_new(result, "diff_truncated", json_true());
	free(d);
}

/* write_file {path, content}: creates or replaces a whole file. */
int
tf_write(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	struct stat		 st;
	const char		*path, *content, *omitted = NULL;
	char			*shown, *old = NULL, *why = NULL;
	size_t			 plen, clen, olen = 0;
	enum gbr_err		 rkind;
	int			 created;

	path = tf_str(args, "path", &plen);
	content = tf_str(args, "content", &clen);
	if (content == NULL)
		content = "";
	/*
	 * What the write replaces, for its diff; a missing file is empty.
	 * The write then expects the file just read, as edit_file does, so
	 * the diff is of exactly the bytes replaced: a change slipped in
	 * between is refused (busy), never shown wrong.
	 */
	if (sandbox_read_file(ctx->sandbox, path, plen, TF_DIFF_FILE_MAX, &old,
	    &olen, &st, &loc, &rkind, &why) != 0) {
		if (rkind == GBR_ERR_TOO_LARGE)
			omitted = "too large";
		else if (rkind != GBR_ERR_NOT_FOUND)
			omitted = "unreadable";
	}
	sandbox_loc_release(&loc);
	free(why);
	if ((ctx->approved ? sandbox_write_file_approved(ctx->sandbox, path,
	    plen, content, clen, old != NULL ? &st : NULL, ctx->pin, &created,
	    &loc, kind, reason) : sandbox_write_file(ctx->sandbox, path, plen,
	    content, clen, old != NULL ? &st : NULL, &created, &loc, kind,
	    reason)) != 0) {
		free(old);
		return -1;
	}
	shown = sandbox_display(ctx->sandbox, &loc);
	sandbox_loc_release(&loc);
	*result = json_pack("{s:s, s:I, s:b}", "path", shown,
	    "bytes", (json_int_t)clen, "created", created);
	tf_diff(*result, shown, old != NULL ? old : "", olen, content, clen,
	    omitted);
	free(old);
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
int
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
	if (ctx->approved && ctx->pin != NULL &&
	    !sandbox_pin_content(ctx->pin, data, dlen)) {
		/* The edit must apply to the text the human's diff was made from. */
		tf_fail(kind, reason, GBR_ERR_CHANGED_SINCE_APPROVAL, "'%s' was "
		    "modified (its bytes are not the ones the human's diff was "
		    "made from) since a human approved the change; nothing was "
		    "written (the agent may ask again)", shown);
		goto fail;
	}
	if (tool_file_edit_text(data, dlen, args,
	    sandbox_max_write(ctx->sandbox), shown, &out, &outlen, &count, kind,
	    reason) != 0)
		goto fail;
	if ((ctx->approved ? sandbox_write_file_approved(ctx->sandbox, path,
	    plen, out, outlen, &st, ctx->pin, NULL, NULL, kind, reason) :
	    sandbox_write_file(ctx->sandbox, path, plen, out, outlen, &st,
	    NULL, NULL, kind, reason)) != 0) {
		free(out);
		goto fail;
	}
	*result = json_pack("{s:s, s:I, s:I}", "path", shown,
	    "replacements", (json_int_t)count, "bytes", (json_int_t)outlen);
	tf_diff(*result, shown, data, dlen, out, outlen, NULL);
	free(out);
	free(data);
	free(shown);
	return 0;

fail:
	free(data);
	free(shown);
	return -1;
}
