/*
 * Line framer. The common case, a read that ends on a line boundary, never
 * copies: lines are handed out from the caller's buffer. A line split across
 * reads is gathered in a private buffer that never grows past the maximum
 * line length and is freed as soon as the line is complete, so an idle
 * connection holds no buffer and a shared budget counts only lines still
 * being received.
 *
 * The buffer doubles up to FRAME_STEP, then grows a step at a time. With a
 * budget, its capacity is taken from the budget before it grows: that
 * size where the budget has room, else exactly what the line needs so far,
 * else the framer refuses (FRAME_OVER_BUDGET) and drops what it held.
 *
 * A callback may ask to stop (the daemon does when a client's replies pile
 * up): the bytes not yet scanned are kept as a backlog and scanned first by
 * the next frame_feed, so nothing is lost and nothing is reordered.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "xmalloc.h"

/*
 * A partial line longer than this grows by this much at a time instead of
 * doubling, so its slack is at most one step (reads bring up to 64 KiB).
 */
#define FRAME_STEP	(64 * 1024)

struct frame_budget {
	size_t	 limit;
	size_t	 used;
	size_t	 peak;
};

struct frame {
	size_t			 max;
	struct frame_budget	*budget;	/* borrowed, or NULL */
	char			*part;		/* incomplete line from earlier feeds */
	size_t			 plen;
	size_t			 psize;		/* taken from the budget, if any */
	char			*back;		/* bytes not yet scanned when a
						   callback stopped */
	size_t			 blen;
	unsigned long long	 lines;		/* handed out so far */
	enum frame_status	 broken;	/* FRAME_TOO_LARGE or
						   FRAME_OVER_BUDGET once refused */
};

/* Creates a budget. */
struct frame_budget *
frame_budget_create(size_t limit)
{
	struct frame_budget	*b = xcalloc(1, sizeof *b);

	b->limit = limit;
	return b;
}

/* Frees a budget. */
void
frame_budget_free(struct frame_budget *b)
{
	free(b);
}

/* Changes a budget's limit. */
void
frame_budget_set_limit(struct frame_budget *b, size_t limit)
{
	b->limit = limit;
}

/* Returns a budget's limit. */
size_t
frame_budget_limit(const struct frame_budget *b)
{
	return b->limit;
}

/* Returns the bytes taken from a budget now. */
size_t
frame_budget_used(const struct frame_budget *b)
{
	return b->used;
}

/* Returns the most bytes ever taken from a budget at once. */
size_t
frame_budget_peak(const struct frame_budget *b)
{
	return b->peak;
}

/* Creates a framer. */
struct frame *
frame_create(size_t max_line)
{
	struct frame	*f = xcalloc(1, sizeof *f);

	f->max = max_line;
	return f;
}

/* Frees the partial line's buffer and gives its bytes back to the budget. */
static void
frame_release(struct frame *f)
{
	if (f->budget != NULL)
		f->budget->used -= f->psize;
	free(f->part);
	f->part = NULL;
	f->psize = 0;
	f->plen = 0;
}

/* Frees a framer and any partial line it holds. */
void
frame_free(struct frame *f)
{
	if (f == NULL)
		return;
	frame_release(f);
	free(f->back);
	free(f);
}

/* Makes the framer's partial lines count against a budget. */
void
frame_set_budget(struct frame *f, struct frame_budget *b)
{
	if (f->psize != 0)
		return;		/* the caller broke the rule; keep the books right */
	f->budget = b;
}

/* Returns the number of lines handed out. */
unsigned long long
frame_lines(const struct frame *f)
{
	return f->lines;
}

/* Changes the maximum line length for lines not yet complete. */
void
frame_set_max(struct frame *f, size_t max_line)
{
	f->max = max_line;
}

/* Returns the maximum line length. */
size_t
frame_max(const struct frame *f)
{
	return f->max;
}

/* Returns the bytes of the partial line held. */
size_t
frame_pending(const struct frame *f)
{
	return f->plen;
}

/*
 * Appends to the partial line; the caller has checked the maximum. Returns
 * -1 if the budget cannot hold it (nothing is changed then).
 */
static int
frame_keep(struct frame *f, const char *buf, size_t len)
{
	struct frame_budget	*b = f->budget;
	size_t			 want = f->plen + len, size, room;

	if (want > f->psize) {
		if (want > FRAME_STEP) {
			/* A long line: little slack, it counts in the budget. */
			size = (want + FRAME_STEP - 1) / FRAME_STEP * FRAME_STEP;
		} else {
			size = f->psize == 0 ? 256 : f->psize;
			while (size < want)
				size *= 2;
		}
		if (size > f->max + 1)
			size = f->max + 1;
		if (b != NULL) {
			/* What the budget could give this framer in all. */
			room = b->used - f->psize < b->limit ?
			    b->limit - (b->used - f->psize) : 0;
			if (size > room)
				size = want;	/* no room to double: no slack */
			if (size > room)
				return -1;
			b->used += size - f->psize;
			if (b->used > b->peak)
				b->peak = b->used;
		}
		f->part = xreallocarray(f->part, 1, size);
		f->psize = size;
	}
	memcpy(f->part + f->plen, buf, len);
	f->plen += len;
	return 0;
}

/* Returns the bytes kept unscanned after a callback stopped. */
size_t
frame_backlog(const struct frame *f)
{
	return f->blen;
}

/* Forgets the partial line and the backlog. */
void
frame_drop(struct frame *f)
{
	frame_release(f);
	free(f->back);
	f->back = NULL;
	f->blen = 0;
}

/* Keeps bytes the callback did not want yet. */
static void
frame_hold(struct frame *f, const char *buf, size_t len)
{
	if (len == 0)
		return;
	f->back = xmalloc(len);
	memcpy(f->back, buf, len);
	f->blen = len;
}

/* Scans bytes, calling cb for each complete line. */
static enum frame_status
frame_scan(struct frame *f, const char *buf, size_t len, frame_line_cb cb,
    void *arg)
{
	const char	*nl, *line;
	size_t		 take, llen;
	int		 gathered, stop;

	while (len > 0) {
		nl = memchr(buf, '\n', len);
		take = nl != NULL ? (size_t)(nl - buf) : len;
		if (f->plen + take > f->max) {
			/*
			 * A line is too long: stop here without gathering
			 * the rest, whatever its size.
			 */
			f->broken = FRAME_TOO_LARGE;
			frame_release(f);
			return FRAME_TOO_LARGE;
		}
		if (nl == NULL) {
			if (frame_keep(f, buf, len) != 0)
				goto over;
			return FRAME_OK;
		}
		gathered = f->plen > 0;
		if (gathered) {
			if (frame_keep(f, buf, take) != 0)
				goto over;
			line = f->part;
			llen = f->plen;
		} else {
			line = buf;
			llen = take;
		}
		buf += take + 1;
		len -= take + 1;
		if (llen > 0 && line[llen - 1] == '\r')
			llen--;
		if (llen > 0)
			f->lines++;
		stop = llen > 0 ? cb(arg, line, llen) : 0;
		/* The line is done: its buffer goes back at once. */
		if (gathered)
			frame_release(f);
		if (stop) {
			frame_hold(f, buf, len);
			return FRAME_STOPPED;
		}
	}
	return FRAME_OK;

over:
	f->broken = FRAME_OVER_BUDGET;
	frame_release(f);
	return FRAME_OVER_BUDGET;
}

/* Feeds bytes after any backlog, calling cb for each complete line. */
enum frame_status
frame_feed(struct frame *f, const char *buf, size_t len, frame_line_cb cb,
    void *arg)
{
	enum frame_status	 st;
	char			*old;
	size_t			 olen;

	if (f->broken)
		return f->broken;
	if (f->blen == 0)
		return frame_scan(f, buf, len, cb, arg);
	/* Scan the backlog first, with the new bytes after it. */
	old = f->back;
	olen = f->blen;
	if (len > 0) {
		old = xreallocarray(old, 1, olen + len);
		memcpy(old + olen, buf, len);
		olen += len;
	}
	f->back = NULL;
	f->blen = 0;
	st = frame_scan(f, old, olen, cb, arg);
	free(old);
	return st;
}
