/*
 * Rendering of session events and history messages for people, shared by
 * gbr (the REPL) and gbrctl (attach, send, history). One line per event,
 * compact; streamed text (message.delta) is written as it comes, without a
 * newline, and the renderer remembers that the line is open. Colours only
 * when the caller says so (render_want_color).
 */
#ifndef GBR_RENDER_H
#define GBR_RENDER_H

#include <stdio.h>
#include <jansson.h>

struct render {
	FILE	*out;
	int	 color;
	int	 open_line;	/* streamed text left the line unfinished */
	int	 quiet_local;	/* skip replay_complete and the like */
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

#endif
