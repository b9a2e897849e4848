/*
 * Line framing for the protocol: one JSON text per '\n'-terminated line,
 * with a maximum length. Complete lines inside the bytes fed are handed out
 * in place (no copy); only a partial line at the end of a read is kept, so
 * an idle connection holds no buffer at all.
 */
#ifndef GBR_FRAME_H
#define GBR_FRAME_H

#include <stddef.h>

struct frame;

enum frame_status {
	FRAME_OK = 0,		/* all bytes consumed */
	FRAME_STOPPED,		/* the callback asked to stop; the rest is kept */
	FRAME_TOO_LARGE,	/* a line went over the maximum; nothing more is accepted */
};

/*
 * Called for each complete line, without its '\n' (nor a '\r' before it).
 * Empty lines are skipped. The line is borrowed for the call only. Return
 * 0 to go on, anything else to stop.
 */
typedef int (*frame_line_cb)(void *arg, const char *line, size_t len);

/* Returns a new framer accepting lines of at most max_line bytes. */
struct frame	*frame_create(size_t max_line);
void		 frame_free(struct frame *);
void		 frame_set_max(struct frame *, size_t);
size_t		 frame_max(const struct frame *);
/* Bytes of an incomplete line held from earlier reads. */
size_t		 frame_pending(const struct frame *);
/* Bytes kept unscanned after a callback stopped. */
size_t		 frame_backlog(const struct frame *);
/*
 * Feeds bytes (buf may be NULL when len is 0, to resume a backlog): the
 * backlog is scanned first, then buf. See enum frame_status.
 */
enum frame_status frame_feed(struct frame *, const char *, size_t,
		    frame_line_cb, void *);

#endif
