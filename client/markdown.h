/*
 * The model's markdown for a terminal (markdown.c), as it streams: text
 * comes in arbitrary chunks and goes out a line at a time, rendered by
 * md4c, except that prose and code lines are written as soon as nothing
 * later in the line can change how they look. Fenced code blocks are
 * followed across lines. Everything written is escaped as prose is
 * (render.c's render_text): markdown decides the layout and the colours,
 * never the bytes that reach the terminal.
 */
#ifndef GBR_MARKDOWN_H
#define GBR_MARKDOWN_H

#include <stddef.h>

struct render;

/*
 * Longest line held back until it ends; a longer one goes out as it comes,
 * as plain text (a bound on what a model can make a client hold).
 */
#define MARKDOWN_LINE_MAX	4096

/*
 * The state of one stream, embedded in struct render so that it needs no
 * allocation and no release: zeroed, it is a stream at the start of a line,
 * outside any code block.
 */
struct markdown {
	char	 line[MARKDOWN_LINE_MAX + 1];	/* and a NUL (markdown.c) */
	size_t	 len;		/* bytes of the current line held */
	size_t	 done;		/* of which already written */
	int	 mode;		/* how the line is written (markdown.c) */
	char	 fence;		/* '`' or '~' in a fenced code block, or 0 */
	size_t	 fence_len;	/* the opening fence's length ... */
	size_t	 fence_indent;	/* ... and indent */
};

/* Takes len bytes of streamed text; writes each line once it can. */
void	markdown_feed(struct markdown *, struct render *, const char *s,
	    size_t len);
/* Ends the current line as if a newline had come (a code block goes on). */
void	markdown_flush(struct markdown *, struct render *);
/* Ends the current line and any code block: the stream's text is over. */
void	markdown_end(struct markdown *, struct render *);
/* Renders a whole text (from the history), without trailing newlines. */
void	markdown_text(struct render *, const char *s, size_t len);

#endif
