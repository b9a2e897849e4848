/*
 * Rendering of session events and history messages for people, shared by
 * gbr (the REPL) and gbrctl (attach, send, history). One line per event,
 * compact; streamed text (message.delta) is markdown, written a line at a
 * time as it comes (markdown.h), and the renderer remembers a line it left
 * open. Colours only
 * when the caller says so (render_want_color).
 */
#ifndef GBR_RENDER_H
#define GBR_RENDER_H

#include <stdio.h>
#include <jansson.h>

#include "escape.h"
#include "markdown.h"

struct render {
	FILE	*out;
	int	 color;
	int	 open_line;	/* streamed text left the line unfinished */
	int	 quiet_local;	/* skip replay_complete and the like */
	int	 streamed;	/* the answer being written was shown live */
	int	 tool_open;	/* the open line is live command output ... */
	int	 tool_err;	/* ... of stderr */
	struct markdown md;	/* the answer streaming in (markdown.h) */
	long long tool_tag;	/* a tool result's number ("[3]"), 0: none */
};

/* Tells whether colours may be used on fd: a terminal, and NO_COLOR unset or empty. */
int	render_want_color(int fd);
/* Renders one event's params. Returns 1 if something was printed. */
int	render_event(struct render *, const json_t *params);
/* Renders one history message ({seq, ts, role, content, ...}). */
void	render_message(struct render *, const json_t *msg);
/* Ends an open streamed line. */
void	render_close_line(struct render *);
/* Colour helpers: the escape for a role, or "" without colour. */
const char *render_color(const struct render *, const char *what);

/* Flags of render_escaped: common/escape.h's. */
#define RENDER_ESC_BACKSLASH	ESCAPE_BACKSLASH /* show '\' as "\\": paths, names */
#define RENDER_ESC_TAB		ESCAPE_TAB	/* keep tabs as they are: diff lines */
#define RENDER_ESC_CODES	ESCAPE_CODES	/* newline, CR, tab as \u{XXXX} too */

/*
 * Writes untrusted text so that what is seen is what it is, on one line:
 * newline, carriage return and tab (unless RENDER_ESC_TAB) as \n \r \t,
 * other controls (C0, C1, DEL), bidi formatting characters, zero-width and
 * other invisible characters, unusual spaces, tag characters and
 * noncharacters as \u{XXXX}, bytes that are not UTF-8 as \x{XX}. With
 * colours, each escape is in reverse video so it cannot pass for text.
 * At most max bytes of s (0: all), then "...(N more bytes)".
 */
void	render_escaped(struct render *, const char *s, size_t len, int flags,
	    size_t max);
/* The same, without colours, as a new string the caller frees. */
char	*render_escape(const char *s, size_t len, int flags, size_t max);
/*
 * NULL if s is text gbrd takes in a request (UTF-8 without NUL bytes);
 * else why not, with the byte offset (a new string): "a NUL byte at byte
 * 2", "not UTF-8 at byte 3".
 */
char	*render_text_problem(const char *s, size_t len);
/*
 * Writes a unified diff, one escaped line after another, each after indent:
 * '+' lines green, '-' red, "@@" cyan, file headers bold (with colours).
 * At most max_lines lines (0: all) of at most line_max bytes (0: whole).
 * Returns the number of lines left out.
 */
size_t	render_diff(struct render *, const char *diff, size_t len,
	    const char *indent, size_t max_lines, size_t line_max);
/*
 * Writes a run tool's result (run_command, run_script, check) for the
 * person who asked: stdout and stderr whole, each line escaped (stderr in
 * the error colour), output that is not text only counted, then how the
 * run ended ("= exit 0 (12 ms)").
 */
void	render_run_result(struct render *, const json_t *result);
/* Lines of text, each after indent and escaped as render_escaped does. */
void	render_text_block(struct render *, const char *text, size_t len,
	    const char *indent);
/*
 * A JSON value for a person: indented, non-ASCII text as it is (jansson
 * already writes controls as \uXXXX), each line escaped as render_escaped
 * does (bidi, invisible characters).
 */
void	render_json_block(struct render *, const json_t *);
/* Only how it ended ("= exit 0 (12 ms)"): its output was shown live. */
void	render_run_end(struct render *, const json_t *result);
/*
 * Renders an approval object (approval.requested's params.approval, an
 * entry of approval.list) for a person to decide: id, tool, the escaped
 * path or command, why, and the diff (at most max_lines, 0: all; hint is
 * added to the "... N more lines" line).
 */
void	render_approval(struct render *, const json_t *approval,
	    size_t max_lines, const char *hint);
/* Writes "TOOL PATH" or "TOOL $ COMMAND" of an approval, escaped, no newline. */
void	render_approval_what(struct render *, const json_t *approval);
/* Renders an approval's outcome on one line; where (or NULL) follows the state. */
void	render_approval_resolved(struct render *, const json_t *approval,
	    const char *where);
/*
 * Writes an estimated cost for a person into buf: "about $0.0123" (four
 * decimals under a dollar, where token prices live; cents above),
 * "less than $0.0001", or "$0" for nothing at all.
 */
void	render_cost(char *buf, size_t len, double usd);
/* Why an approval was asked for, in words; NULL for an unknown reason. */
const char *render_approval_why(const char *why);

#endif
