/*
 * The model's markdown for a terminal (see markdown.h). md4c parses one
 * line at a time: a line is the unit that streams (a person should see the
 * answer as it comes, not when it ends), and almost everything markdown
 * says about looks is said within a line. What spans lines is followed
 * here: fenced code blocks, whose lines are shown indented and coloured,
 * untouched by markdown. Tables, setext headings and lazy continuations are
 * not followed; their lines read as text.
 *
 * A line is held until it ends, but a line that starts as prose is written
 * up to its first character that could open a span ('*', '`', '[', ...),
 * and a code line as it comes: the rest of the line cannot change how that
 * part looks. When the line ends md4c parses it whole and what was written
 * already is skipped (md4c's text points into the line).
 *
 * Without colours the layout is the same (bullets, indents, no markers),
 * only the SGR sequences are left out. Every byte of the model's text goes
 * through render_text_len, which shows controls and bidi as '?'.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <md4c.h>

#include "markdown.h"
#include "render.h"
#include "render-int.h"

/* How the current line is written. */
#define MD_NEW	0	/* only blanks so far: undecided */
#define MD_HOLD	1	/* held whole until it ends */
#define MD_PROSE 2	/* written up to its first span character */
#define MD_CODE	3	/* a code block's line, written as it comes */
#define MD_RAW	4	/* too long to hold: plain, as it comes */

/*
 * Characters that may open or change a span, and those that may start a
 * block. A NUL byte (md4c's MD_TEXT_NULLCHAR) stops prose too.
 */
#define MD_SPAN_CHARS	"*_`[]~<&!\\"
#define MD_BLOCK_CHARS	"#-+>=|0123456789"

#define MD_INDENT	"    "	/* before each code line */
#define MD_RULE_LEN	40	/* a thematic break's width */
#define MD_LISTS	16	/* lists nested in one line that are numbered */

/* Text attributes, counted so that nested spans end well. */
enum { MD_BOLD, MD_ITALIC, MD_UNDER, MD_STRIKE, MD_MONO, MD_DIM, MD_NATTR };
static const char *const md_sgr[MD_NATTR] = { "1", "3", "4", "9", "36", "2" };

/* What md4c's callbacks need while one line is written. */
struct md_out {
	struct render	*r;
	const char	*line, *skip;	/* line up to skip was written */
	int		 attr[MD_NATTR];
	/*
	 * The link being written: its address is copied, md4c may free it
	 * once the span has started. It comes from the line, so it fits.
	 */
	char		 href[MARKDOWN_LINE_MAX];
	size_t		 href_len;
	int		 in_link;
	size_t		 link_pos;	/* ... how much its text matches */
	int		 link_same;
	unsigned	 items[MD_LISTS]; /* the next number, 0 for bullets */
	int		 depth;
	int		 wrote;
};

/* Whether c is one of set's characters (a NUL byte is not). */
static int
md_in(const char *set, char c)
{
	return c != '\0' && strchr(set, c) != NULL;
}

/* Writes the SGR sequence for the attributes in force (with colours). */
static void
md_style(struct md_out *o)
{
	int	i;

	if (!o->r->color)
		return;
	fputs("\033[0m", o->r->out);
	for (i = 0; i < MD_NATTR; i++)
		if (o->attr[i] > 0)
			fprintf(o->r->out, "\033[%sm", md_sgr[i]);
}

/* Adds (1) or removes (-1) an attribute. */
static void
md_attr(struct md_out *o, int attr, int delta)
{
	o->attr[attr] += delta;
	md_style(o);
}

/* Writes dim text of ours (not the model's), then the style in force again. */
static void
md_dim(struct md_out *o, const char *s)
{
	if (o->r->color)
		fputs("\033[0m\033[2m", o->r->out);
	fputs(s, o->r->out);
	md_style(o);
}

/* md4c: a block starts. */
static int
md_enter_block(MD_BLOCKTYPE type, void *detail, void *arg)
{
	struct md_out	*o = arg;
	int		 i;

	switch (type) {
	case MD_BLOCK_QUOTE:
		md_dim(o, "\xe2\x94\x82 ");	/* U+2502 */
		o->wrote = 1;
		break;
	case MD_BLOCK_UL:
	case MD_BLOCK_OL:
		if (o->depth < MD_LISTS)
			o->items[o->depth] = type == MD_BLOCK_OL ?
			    ((MD_BLOCK_OL_DETAIL *)detail)->start : 0;
		o->depth++;
		break;
	case MD_BLOCK_LI:
		i = o->depth - 1;
		if (i >= 0 && i < MD_LISTS && o->items[i] != 0)
			fprintf(o->r->out, "%u. ", o->items[i]++);
		else
			fputs("\xe2\x80\xa2 ", o->r->out);	/* U+2022 */
		o->wrote = 1;
		break;
	case MD_BLOCK_H:
		o->attr[MD_BOLD]++;
		if (((MD_BLOCK_H_DETAIL *)detail)->level == 1)
			o->attr[MD_UNDER]++;
		md_style(o);
		break;
	case MD_BLOCK_CODE:
		md_attr(o, MD_MONO, 1);
		break;
	case MD_BLOCK_HR:
		if (o->r->color)
			fputs("\033[2m", o->r->out);
		for (i = 0; i < MD_RULE_LEN; i++)
			fputs("\xe2\x94\x80", o->r->out);	/* U+2500 */
		md_style(o);
		o->wrote = 1;
		break;
	default:
		break;
	}
	return 0;
}

/* md4c: a block ends. */
static int
md_leave_block(MD_BLOCKTYPE type, void *detail, void *arg)
{
	struct md_out	*o = arg;

	switch (type) {
	case MD_BLOCK_UL:
	case MD_BLOCK_OL:
		o->depth--;
		break;
	case MD_BLOCK_H:
		o->attr[MD_BOLD]--;
		if (((MD_BLOCK_H_DETAIL *)detail)->level == 1)
			o->attr[MD_UNDER]--;
		md_style(o);
		break;
	case MD_BLOCK_CODE:
		md_attr(o, MD_MONO, -1);
		break;
	default:
		break;
	}
	return 0;
}

/* The attribute a span sets, or -1. */
static int
md_span_attr(MD_SPANTYPE type)
{
	switch (type) {
	case MD_SPAN_EM:
		return MD_ITALIC;
	case MD_SPAN_STRONG:
		return MD_BOLD;
	case MD_SPAN_DEL:
		return MD_STRIKE;
	case MD_SPAN_CODE:
		return MD_MONO;
	case MD_SPAN_U:
	case MD_SPAN_A:
	case MD_SPAN_IMG:
		return MD_UNDER;
	default:
		return -1;
	}
}

/* md4c: a span starts. */
static int
md_enter_span(MD_SPANTYPE type, void *detail, void *arg)
{
	struct md_out	*o = arg;
	MD_ATTRIBUTE	*href;
	int		 a = md_span_attr(type);

	if (type == MD_SPAN_A || type == MD_SPAN_IMG) {
		href = type == MD_SPAN_A ? &((MD_SPAN_A_DETAIL *)detail)->href :
		    &((MD_SPAN_IMG_DETAIL *)detail)->src;
		o->href_len = href->size < sizeof o->href ? href->size :
		    sizeof o->href;
		if (o->href_len > 0)	/* an empty one may have no text */
			memcpy(o->href, href->text, o->href_len);
		o->in_link = 1;
		o->link_pos = 0;
		o->link_same = 1;
	}
	if (a >= 0)
		md_attr(o, a, 1);
	return 0;
}

/* md4c: a span ends; a link's address follows its text (unless it is it). */
static int
md_leave_span(MD_SPANTYPE type, void *detail, void *arg)
{
	struct md_out	*o = arg;
	int		 a = md_span_attr(type);

	(void)detail;
	if (a >= 0)
		md_attr(o, a, -1);
	if ((type == MD_SPAN_A || type == MD_SPAN_IMG) && o->in_link) {
		if (o->href_len > 0 && !(o->link_same &&
		    o->link_pos == o->href_len)) {
			md_dim(o, " (");
			if (o->r->color)
				fputs("\033[2m", o->r->out);
			render_text_len(o->r, o->href, o->href_len);
			md_dim(o, ")");
		}
		o->in_link = 0;
	}
	return 0;
}

/* Writes an entity: the few a model uses as characters, others as they are. */
static void
md_entity(struct md_out *o, const char *s, size_t n)
{
	static const char *const map[][2] = {
		{ "&amp;", "&" }, { "&lt;", "<" }, { "&gt;", ">" },
		{ "&quot;", "\"" }, { "&#39;", "'" }, { "&nbsp;", " " },
	};
	size_t	i;

	for (i = 0; i < sizeof map / sizeof map[0]; i++) {
		if (strlen(map[i][0]) == n && memcmp(s, map[i][0], n) == 0) {
			fputs(map[i][1], o->r->out);
			return;
		}
	}
	render_text_len(o->r, s, n);
}

/* md4c: text, escaped; what the stream wrote already is skipped. */
static int
md_text(MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *arg)
{
	struct md_out	*o = arg;
	size_t		 n = size;

	o->wrote = 1;
	if (type == MD_TEXT_NULLCHAR) {
		fputc('?', o->r->out);
		return 0;
	}
	if (type == MD_TEXT_BR || type == MD_TEXT_SOFTBR) {
		fputc(' ', o->r->out);
		return 0;
	}
	/* Only text of the line can have been written, not md4c's own. */
	if ((uintptr_t)text >= (uintptr_t)o->line &&
	    (uintptr_t)text < (uintptr_t)o->skip) {
		if (n <= (size_t)(o->skip - text))
			return 0;
		n -= (size_t)(o->skip - text);
		text = o->skip;
	}
	if (o->in_link && o->link_same) {
		if (o->link_pos + n <= o->href_len &&
		    memcmp(o->href + o->link_pos, text, n) == 0)
			o->link_pos += n;
		else
			o->link_same = 0;
	}
	if (type == MD_TEXT_ENTITY)
		md_entity(o, text, n);
	else
		render_text_len(o->r, text, n);
	return 0;
}

/* The length of the blanks a line starts with. */
static size_t
md_indent(const char *s, size_t len)
{
	size_t	i = 0;

	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

/* The length of the run of c at s (at most len). */
static size_t
md_run(const char *s, size_t len, char c)
{
	size_t	i = 0;

	while (i < len && s[i] == c)
		i++;
	return i;
}

/*
 * Whether the line opens a fenced code block (three or more '`' or '~';
 * a '`' fence's info string has no '`'); if so its fence is remembered.
 * Any indent is taken: models indent fences inside list items.
 */
static int
md_fence_open(struct markdown *md)
{
	size_t	ind = md_indent(md->line, md->len), n;
	char	c = ind < md->len ? md->line[ind] : '\0';

	if (c != '`' && c != '~')
		return 0;
	if ((n = md_run(md->line + ind, md->len - ind, c)) < 3)
		return 0;
	if (c == '`' && memchr(md->line + ind + n, '`',
	    md->len - ind - n) != NULL)
		return 0;
	md->fence = c;
	md->fence_len = n;
	md->fence_indent = ind;
	return 1;
}

/* Whether the line closes the code block: as long a fence or longer, blanks. */
static int
md_fence_close(const struct markdown *md)
{
	size_t	ind = md_indent(md->line, md->len), n;

	n = md_run(md->line + ind, md->len - ind, md->fence);
	if (n < md->fence_len)
		return 0;
	return md_indent(md->line + ind + n, md->len - ind - n) ==
	    md->len - ind - n;
}

/* Starts a code line: indent, colour; the block's own indent is dropped. */
static void
md_code_start(struct markdown *md, struct render *r)
{
	size_t	ind = md_indent(md->line, md->len);

	fputs(MD_INDENT, r->out);
	if (r->color)
		fprintf(r->out, "\033[%sm", md_sgr[MD_MONO]);
	md->done = ind < md->fence_indent ? ind : md->fence_indent;
	md->mode = MD_CODE;
}

/* Renders a whole line of markdown with md4c, skipping what was written. */
static void
md_parse_line(struct markdown *md, struct render *r)
{
	MD_PARSER	 p;
	struct md_out	 o;
	size_t		 ind = md_indent(md->line, md->len);

	memset(&p, 0, sizeof p);
	p.flags = MD_FLAG_NOHTML | MD_FLAG_STRIKETHROUGH |
	    MD_FLAG_NOINDENTEDCODEBLOCKS;
	p.enter_block = md_enter_block;
	p.leave_block = md_leave_block;
	p.enter_span = md_enter_span;
	p.leave_span = md_leave_span;
	p.text = md_text;
	memset(&o, 0, sizeof o);
	o.r = r;
	/*
	 * md4c 0.4.8 reads a byte past its input where a link's address
	 * runs to the end ("[a](b"), and takes a ')' there for its end: the
	 * NUL after the line keeps that byte harmless.
	 */
	md->line[md->len] = '\0';
	o.line = md->line;
	o.skip = md->line + md->done;
	/* The indent is ours to keep: to md4c four blanks would be code. */
	if (md->done < ind)
		fwrite(md->line + md->done, 1, ind - md->done, r->out);
	/*
	 * A line md4c shows nothing of (a link reference definition, "[1]:
	 * https://..."), or could not parse (no memory), is shown as it is.
	 */
	(void)md_parse(md->line + ind, (MD_SIZE)(md->len - ind), &p, &o);
	if (!o.wrote) {
		ind = md->done > ind ? md->done : ind;
		render_text_len(r, md->line + ind, md->len - ind);
	}
	if (r->color)
		fputs("\033[0m", r->out);
}

/* The current line has ended: writes what is left of it and a newline. */
static void
md_line_end(struct markdown *md, struct render *r)
{
	size_t	ind = md_indent(md->line, md->len);

	if (md->mode == MD_RAW || md->mode == MD_CODE) {
		if (md->mode == MD_CODE)
			render_text_len(r, md->line + md->done,
			    md->len - md->done);
		if (r->color)
			fputs("\033[0m", r->out);
		fputc('\n', r->out);
	} else if (md->fence != 0 && ind < md->len && md_fence_close(md))
		md->fence = 0;
	else if (md->fence != 0 && ind == md->len)
		fputc('\n', r->out);
	else if (md->fence != 0) {
		md_code_start(md, r);
		md_line_end(md, r);
		return;
	} else if (md_fence_open(md))
		;	/* the fence itself is not shown */
	else if (ind == md->len)
		fputc('\n', r->out);
	else {
		md_parse_line(md, r);
		fputc('\n', r->out);
	}
	md->len = md->done = 0;
	md->mode = MD_NEW;
	r->open_line = 0;
}

/* Writes what can be written of the current line before it ends. */
static void
md_advance(struct markdown *md, struct render *r)
{
	size_t	ind = md_indent(md->line, md->len), stop;
	char	c;

	if (md->mode == MD_NEW) {
		if (ind == md->len)
			return;
		c = md->line[ind];
		if (md->fence != 0) {
			if (c == md->fence) {
				md->mode = MD_HOLD;
				return;
			}
			md_code_start(md, r);
		} else if (md_in(MD_BLOCK_CHARS MD_SPAN_CHARS, c))
			md->mode = MD_HOLD;
		else
			md->mode = MD_PROSE;
	}
	if (md->mode == MD_CODE)
		stop = md->len;
	else if (md->mode == MD_PROSE) {
		for (stop = md->done; stop < md->len; stop++)
			if (md->line[stop] == '\0' ||
			    md_in(MD_SPAN_CHARS, md->line[stop]))
				break;
	} else
		return;
	if (stop > md->done) {
		render_text_len(r, md->line + md->done, stop - md->done);
		md->done = stop;
	}
	if (md->mode == MD_CODE || md->done > 0)
		r->open_line = 1;
}

/*
 * A line too long to hold: what was held goes out plain, and so does the
 * rest of the line as it comes (in a code block, as code).
 */
static void
md_raw(struct markdown *md, struct render *r, const char *s, size_t n)
{
	if (md->mode != MD_RAW) {
		if (md->fence != 0 && md->mode != MD_CODE)
			md_code_start(md, r);
		render_text_len(r, md->line + md->done, md->len - md->done);
		md->len = md->done = 0;
		md->mode = MD_RAW;
	}
	render_text_len(r, s, n);
	r->open_line = 1;
}

/* Takes streamed text (see markdown.h). */
void
markdown_feed(struct markdown *md, struct render *r, const char *s, size_t len)
{
	const char	*nl;
	size_t		 n;

	while (len > 0) {
		nl = memchr(s, '\n', len);
		n = nl != NULL ? (size_t)(nl - s) : len;
		if (md->mode == MD_RAW || n > MARKDOWN_LINE_MAX - md->len)
			md_raw(md, r, s, n);
		else {
			memcpy(md->line + md->len, s, n);
			md->len += n;
			md_advance(md, r);
		}
		if (nl == NULL)
			break;
		md_line_end(md, r);
		s = nl + 1;
		len -= n + 1;
	}
}

/* Ends the current line (see markdown.h); blanks alone wait for more. */
void
markdown_flush(struct markdown *md, struct render *r)
{
	if (md->mode != MD_NEW)
		md_line_end(md, r);
}

/* Ends the stream's text (see markdown.h). */
void
markdown_end(struct markdown *md, struct render *r)
{
	markdown_flush(md, r);
	md->len = md->done = 0;
	md->mode = MD_NEW;
	md->fence = 0;
}

/* Renders a whole text with a state of its own (see markdown.h). */
void
markdown_text(struct render *r, const char *s, size_t len)
{
	struct markdown	 md;

	while (len > 0 && s[len - 1] == '\n')
		len--;
	memset(&md, 0, sizeof md);
	markdown_feed(&md, r, s, len);
	markdown_end(&md, r);
}
