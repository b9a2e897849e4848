/*
 * The file tools (see tool-file.h): their table and schemas, registration,
 * direct calls, and the helpers the tools share (arguments, refusals, text
 * made valid UTF-8). The tools themselves live in tool-file-read.c
 * (read_file, list_directory), tool-file-write.c (write_file, edit_file)
 * and tool-search.c (search); tool-file-int.h is what they share.
 *
 * All path handling is the sandbox's: the tools only ever hold fds the
 * sandbox opened (or opened below one with sandbox_open_child, which never
 * follows a link), so nothing here can be talked into leaving the roots.
 * Everything runs on the event loop, so every tool is bounded; each file
 * says how.
 */
#include "gbr-config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"
#include "tool-file.h"
#include "tool-file-int.h"
#include "utf8.h"
#include "xmalloc.h"

/* Fills a refusal. Returns -1. */
int
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
const char *
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
json_int_t
tf_int(json_t *args, const char *key, json_int_t def)
{
	json_t	*v = json_object_get(args, key);

	return json_is_integer(v) ? json_integer_value(v) : def;
}

/*
 * A JSON string of bytes made valid UTF-8 (new reference). Valid text,
 * nearly all of it, is checked once and copied once: common/utf8's decoder
 * accepts exactly what jansson does (fuzz-pathgate checks it), so jansson
 * need not check it again.
 */
json_t *
tf_json_text(const char *s, size_t len, int *lossy)
{
	json_t	*j;
	char	*t;
	size_t	 tl;

	if (utf8_valid(s, len))
		j = json_stringn_nocheck(s, len);
	else {
		t = utf8_repair(s, len, lossy, &tl);
		j = json_stringn_nocheck(t, tl);
		free(t);
	}
	return j != NULL ? j : json_string("");
}

/* True for the version-control folders list and search do not descend. */
int
tf_skip_dir(const char *name)
{
	return strcmp(name, ".git") == 0 || strcmp(name, ".hg") == 0 ||
	    strcmp(name, ".svn") == 0;
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
	    tf_read_schema, 1, 0, 1, tf_read, 0 },
	{ "write_file", "Create or replace a whole file (atomically).",
	    tf_write_schema, 0, 1, 1, tf_write, 0 },
	{ "edit_file", "Replace an exact, unique piece of text in a file.",
	    tf_edit_schema, 0, 1, 0, tf_edit, 0 },
	{ "list_directory", "List a folder's entries, optionally a few levels "
	    "deep.", tf_list_schema, 1, 0, 1, tf_list, 0 },
	{ "search", "Search files for a regular expression, in the workspace "
	    "and the read-only reference folders.", tf_search_schema, 1, 0, 1,
	    tf_search, 0 },
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

/* Registers the tools: search runs in slices on base's loop. */
int
tool_file_register(struct event_base *base, char **cause)
{
	size_t	i;

	if (tf_search_init(base, cause) != 0)
		return -1;
	for (i = 0; i < sizeof tf_defs / sizeof tf_defs[0]; i++) {
		if ((tf_defs[i].fn == tf_search ? tool_register_async(&tf_defs[i],
		    1, tf_search_async, cause) : tool_register(&tf_defs[i], 1,
		    cause)) != 0)
			return -1;
	}
	return 0;
}

/* Frees every search in flight; no callback runs. */
void
tool_file_shutdown(void)
{
	tf_search_shutdown();
}

/* Calls one file tool directly. */
int
tool_file_call(struct sandbox *sb, const char *tool, json_t *args,
    json_t **result, enum gbr_err *kind, char **reason)
{
	struct tool_ctx	 ctx = { sb, NULL, NULL, 0, NULL };
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
