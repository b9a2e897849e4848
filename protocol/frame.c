/*
 * Line framer. The common case, a read that ends on a line boundary, never
 * copies: lines are handed out from the caller's buffer. A line split across
 * reads is gathered in a private buffer that never grows past the maximum
 * line length and is freed again once it grew large, so memory per idle
 * connection stays near zero.
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

/* A gathered line buffer larger than this is freed after use. */
#define FRAME_KEEP	(16 * 1024)

struct frame {
	size_t	 max;
	char	*part;		/* incomplete line from earlier feeds */
	size_t	 plen;
	size_t	 psize;
	char	*back;		/* bytes not yet scanned when a callback stopped */
	size_t	 blen;
	int	 broken;	/* a line went over the maximum */
};

/* Creates a framer. */
struct frame *
frame_create(size_t max_line)
{
	struct frame	*f = xcalloc(1, sizeof *f);

	f->max = max_line;
	return f;
}

/* Frees a framer and any partial line it holds. */
void
frame_free(struct frame *f)
{
	if (f == NULL)
		return;
	free(f->part);
	free(f->back);
	free(f);
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

/* Appends to the partial line; the caller has checked the maximum. */
static void
frame_keep(struct frame *f, const char *buf, size_t len)
{
	size_t	want = f->plen + len;

	if (want > f->psize) {
		size_t	size = f->psize == 0 ? 256 : f->psize;

		while (size < want)
			size *= 2;
		if (size > f->max + 1)
			size = f->max + 1;
		f->part = xreallocarray(f->part, 1, size);
		f->psize = size;
	}
	memcpy(f->part + f->plen, buf, len);
	f->plen += len;
}

/* Forgets the gathered line, releasing a large buffer. */
static void
frame_reset(struct frame *f)
{
	f->plen = 0;
	if (f->psize > FRAME_KEEP) {
		free(f->part);
		f->part = NULL;
		f->psize = 0;
	}
}

/* Returns the bytes kept unscanned after a callback stopped. */
size_t
frame_backlog(const struct frame *f)
{
	return f->blen;
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
			f->broken = 1;
			frame_reset(f);
			return FRAME_TOO_LARGE;
		}
		if (nl == NULL) {
			frame_keep(f, buf, len);
			return FRAME_OK;
		}
		gathered = f->plen > 0;
		if (gathered) {
			frame_keep(f, buf, take);
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
		stop = llen > 0 ? cb(arg, line, llen) : 0;
		if (gathered)
			frame_reset(f);
		if (stop) {
			frame_hold(f, buf, len);
			return FRAME_STOPPED;
		}
	}
	return FRAME_OK;
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
		return FRAME_TOO_LARGE;
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
