/*
 * Line framing for the protocol: one JSON text per '\n'-terminated line,
 * with a maximum length. Complete lines inside the bytes fed are handed out
 * in place (no copy); only a partial line at the end of a read is kept, so
 * an idle connection holds no buffer at all.
 *
 * Framers may share a budget (struct frame_budget): the bytes the partial
 * lines of all of them hold together, whatever each one's maximum. A daemon
 * with thousands of clients bounds its memory with it; a framer whose
 * partial line would take the budget past its limit refuses, like a line
 * over the maximum.
 */
#ifndef GBR_FRAME_H
#define GBR_FRAME_H

#include <stddef.h>

struct frame;

enum frame_status {
	FRAME_OK = 0,		/* all bytes consumed */
	FRAME_STOPPED,		/* the callback asked to stop; the rest is kept */
	FRAME_TOO_LARGE,	/* a line went over the maximum; nothing more is accepted */
	FRAME_OVER_BUDGET,	/* a partial line did not fit in the shared budget;
				   nothing more is accepted */
};

struct frame_budget;

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
/*
 * Lines handed out since the framer was created (a partial line held after
 * a feed that moved this began in that feed).
 */
unsigned long long frame_lines(const struct frame *);
/* Bytes kept unscanned after a callback stopped. */
size_t		 frame_backlog(const struct frame *);
/*
 * Forgets what is held, the partial line and the backlog, giving the
 * budget its bytes back: for input that will never be read on.
 */
void		 frame_drop(struct frame *);
/*
 * Feeds bytes (buf may be NULL when len is 0, to resume a backlog): the
 * backlog is scanned first, then buf. See enum frame_status.
 */
enum frame_status frame_feed(struct frame *, const char *, size_t,
		    frame_line_cb, void *);

/*
 * A budget shared by framers: at most limit bytes of buffer, counted by
 * capacity, for the partial lines of all of them together. The backlog
 * kept after a stop is not counted: it is at most one feed.
 */
struct frame_budget *frame_budget_create(size_t limit);
/* Frees a budget; every framer that used it must be freed first. */
void		 frame_budget_free(struct frame_budget *);
/* A new limit applies to growth from now on; what is held stays. */
void		 frame_budget_set_limit(struct frame_budget *, size_t);
size_t		 frame_budget_limit(const struct frame_budget *);
/* Bytes held now, and the most ever held at once. */
size_t		 frame_budget_used(const struct frame_budget *);
size_t		 frame_budget_peak(const struct frame_budget *);
/*
 * Makes a framer take its partial line's buffer from b (borrowed; NULL for
 * none). Only for a framer that holds no partial line yet.
 */
void		 frame_set_budget(struct frame *, struct frame_budget *);

#endif
