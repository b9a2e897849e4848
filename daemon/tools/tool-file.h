/*
 * The five file tools over a sandbox: read_file, write_file, edit_file,
 * list_directory and search. Each has a JSON Schema (tool_file_defs, for
 * tool_register and tool.list). They run on the event loop, so each is
 * bounded: by the sandbox's size caps, by an entry cap, and (search) by a
 * cap on files, bytes, results and wall-clock time; a tool that stops at a
 * bound says so in its result ("truncated") instead of failing.
 */
#ifndef GBRD_TOOL_FILE_H
#define GBRD_TOOL_FILE_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"

struct event_base;
struct sandbox;
struct tool_def;

#define TF_READ_LINES		2000		/* read_file's default limit */
#define TF_READ_OUT_MAX		(256 * 1024)	/* bytes of text one read returns */
#define TF_LIST_MAX		1000		/* entries list_directory returns */
#define TF_LIST_DEPTH_MAX	5
#define TF_DIR_NAMES_MAX	100000	/* names read from one folder */
#define TF_SEARCH_RESULTS	100		/* search's default max_results */
#define TF_SEARCH_RESULTS_MAX	1000
#define TF_SEARCH_FILE_MAX	(4 * 1024 * 1024)	/* bigger files are skipped */
#define TF_SEARCH_BYTES_MAX	(512ULL * 1024 * 1024)	/* bytes read per search */
#define TF_SEARCH_FILES_MAX	200000
#define TF_SEARCH_MS		3000		/* wall-clock budget */
#define TF_SEARCH_LINE_MAX	8192	/* bytes of one line the regex sees */
#define TF_SEARCH_DEPTH_MAX	64
/* One slice of a search on the loop (tool_file_register). */
#define TF_SLICE_MS		2
#define TF_SLICE_FILES		256
#define TF_SLICE_BYTES		(8 * 1024 * 1024)
#define TF_SEARCH_ACTIVE	8	/* searches taking turns; more wait */
/* The diff in a write's result: no bigger texts, at most this much of it. */
#define TF_DIFF_FILE_MAX	(4 * 1024 * 1024)	/* SANDBOX_WRITE_MAX */
#define TF_DIFF_LINES_MAX	100000		/* lines of either text */
#define TF_DIFF_OUT_MAX		(64 * 1024)	/* DIFF_OUT_MAX */

/*
 * Registers the five tools (tool.h): search as an asynchronous tool that
 * runs in slices on base's loop, with a tool_job to cancel it. Returns 0
 * or -1 with *cause.
 */
int			 tool_file_register(struct event_base *, char **cause);
/* Frees every search still running; no callback runs (shutdown). */
void			 tool_file_shutdown(void);
/* The tool table (static storage), n set to its length. */
const struct tool_def	*tool_file_defs(size_t *n);
/* The five tools as a new JSON array in tool.list's shape. */
json_t			*tool_file_schemas(void);
/*
 * edit_file's change on a file's text (data, dlen bytes), for the tool
 * and for the approvals' diff: old_string replaced by new_string (args
 * checked against the schema), at most max bytes out, shown naming the
 * file in reasons. Returns 0 with *out (new, NUL-terminated), *outlen and
 * *count (may be NULL), or -1 with *kind and *reason (not_found,
 * not_unique, not_a_file, too_large, invalid_params).
 */
int	tool_file_edit_text(const char *data, size_t dlen, json_t *args,
	    size_t max, const char *shown, char **out, size_t *outlen,
	    size_t *count, enum gbr_err *kind, char **reason);
/*
 * Calls one file tool directly (args checked against its schema first),
 * search too, to its end at once. Returns 0 with *result (new
 * reference), or -1 with *kind and *reason.
 */
int	tool_file_call(struct sandbox *, const char *tool, json_t *args,
	    json_t **result, enum gbr_err *kind, char **reason);

#endif
