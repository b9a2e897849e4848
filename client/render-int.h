/*
 * What render.c and render-event.c share: the bounds of what is shown and
 * the helpers that write one piece (private to the renderer; render.h is
 * the interface).
 */
#ifndef GBR_RENDER_INT_H
#define GBR_RENDER_INT_H

#include <stddef.h>
#include <jansson.h>

#include "render.h"

/* Longest one-line summary of tool arguments or results. */
#define RENDER_SUMMARY	160
#define RENDER_LINE_SUMMARY 100	/* bytes of a command's first line shown */
/* Bytes shown of a tool name or id, of a path or command, of raw arguments. */
#define RENDER_NAME_MAX	128
#define RENDER_PATH_MAX	4096
#define RENDER_ARGS_MAX	1024
/* Bytes of one diff line, and lines of a diff, in a bounded view. */
#define RENDER_LINE_MAX	1000
#define RENDER_DIFF_LINES 40
#define RENDER_TOOL_DIFF_LINES 20	/* of a write's diff under its result */

/* Prose: controls and bidi as '?', at most max bytes (0: all). */
void	render_text(struct render *, const char *s, const char *prefix,
	    size_t max);
/* Prose of len bytes (no NUL needed), as render_text writes it. */
void	render_text_len(struct render *, const char *s, size_t len);
/* A JSON value compactly on one line, cut, with the strict escapes. */
void	render_json(struct render *, const json_t *v);
/* One line: colour, marker, then text as prose. */
void	render_line(struct render *, const char *color, const char *marker,
	    const char *text);
/* The tool calls of an assistant message, one line each. */
void	render_tool_calls(struct render *, const json_t *calls);
/* Why an answer stopped, when it is worth saying. */
void	render_stop_note(struct render *, const json_t *m);
/* A JSON string escaped on one line (flags, max), or alt. */
void	render_field(struct render *, const json_t *v, int flags,
	    size_t max, const char *alt);

#endif
