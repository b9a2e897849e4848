/*
 * What the files of the file tools share (tool-file.h is the public face):
 * tool-file.c holds the tool table, the argument helpers and the entry
 * points; tool-file-read.c reads files and lists folders; tool-file-write.c
 * writes and edits files; tool-search.c searches, in slices on the loop.
 */
#ifndef GBRD_TOOL_FILE_INT_H
#define GBRD_TOOL_FILE_INT_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"
#include "tool.h"

struct event_base;

/* tool-file.c: arguments, refusals and text. */

/* Fills a refusal. Returns -1. */
int		 tf_fail(enum gbr_err *kind, char **reason, enum gbr_err k,
		    const char *fmt, ...) __attribute__((format(__printf__, 4, 5)));
/* A string argument and its length (JSON strings may hold NUL), or NULL. */
const char	*tf_str(json_t *args, const char *key, size_t *len);
/* An integer argument, or def when absent. */
json_int_t	 tf_int(json_t *args, const char *key, json_int_t def);
/* A JSON string of len bytes made valid UTF-8 (new reference); *lossy set if not. */
json_t		*tf_json_text(const char *s, size_t len, int *lossy);
/* True for the version-control folders list and search do not descend. */
int		 tf_skip_dir(const char *name);

/* tool-file-read.c: read_file and list_directory (tool_fn). */
int	tf_read(struct tool_ctx *, json_t *args, json_t **result,
	    enum gbr_err *kind, char **reason);
int	tf_list(struct tool_ctx *, json_t *args, json_t **result,
	    enum gbr_err *kind, char **reason);

/* tool-file-write.c: write_file and edit_file (tool_fn). */
int	tf_write(struct tool_ctx *, json_t *args, json_t **result,
	    enum gbr_err *kind, char **reason);
int	tf_edit(struct tool_ctx *, json_t *args, json_t **result,
	    enum gbr_err *kind, char **reason);

/* tool-search.c: search, to its end at once (tool_fn). */
int	tf_search(struct tool_ctx *, json_t *args, json_t **result,
	    enum gbr_err *kind, char **reason);
/* search as the registry's asynchronous entry (tool_async_fn). */
int	tf_search_async(struct tool_ctx *, const char *name, json_t *args,
	    tool_output_cb out, tool_done_cb done, void *arg,
	    struct tool_job **job, enum gbr_err *kind, char **reason,
	    json_t **data);
/* Sets up the slices on base's loop. Returns 0 or -1 with *cause. */
int	tf_search_init(struct event_base *base, char **cause);
/* Frees every search in flight; no callback runs. */
void	tf_search_shutdown(void);

#endif
