/*
 * The REPL's line editor on Unix (console.h): libedit, the output written
 * above its prompt, and the keys libedit knows nothing of.
 *
 * libedit runs in unbuffered mode (the way its own readline callback
 * interface does): el_gets is called only when stdin is readable and
 * handles one key, so the loop never blocks in the editor. Output that
 * arrives while a prompt is on screen is printed above it: the prompt
 * area is cleared, the text written, and libedit redraws the prompt and
 * the half-typed line. Streamed text that ends mid-line stays on its own
 * line above the prompt and later text continues it.
 *
 * Alt-Enter or Ctrl-J ends a line without sending it; a bracketed paste
 * (the terminal marks pasted text with ESC [200~ ... ESC [201~) is taken
 * whole, newlines and all: the caller holds such lines as a block. Two
 * functions bound to the keys do the work. A function cannot end the line
 * itself the way ed-newline does (libedit does not export the redraw that
 * goes with it), so it pushes a carriage return back into libedit's input
 * and asks console_edit_read to read again at once; the line then ends as
 * if Enter had been pressed, echo and all, and ce_nl_key tells that it is
 * a line of a block.
 *
 * The paste is read here, straight from the terminal (libedit reads one
 * byte at a time, so nothing of it is in libedit's hands), up to its end
 * marker, or CE_PASTE_WAIT_MS of silence: a terminal that never sends the
 * marker cannot hang the REPL. At most CE_PASTE_MAX bytes are kept; the
 * rest is read and thrown away, never typed as keys.
 *
 * At a question that keys answer, such a key (alone on the line) ends the
 * line at once, as if Enter followed; and an Enter that comes right after
 * it (fingers used to "a Enter") is dropped.
 */
#include "gbr-config.h"

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "console.h"
#include "xmalloc.h"

#define CE_HISTORY_LINES	1000	/* lines kept in the editing history */
#define CE_PASTE_MAX		(1024 * 1024) /* a paste kept, at most */
#define CE_PASTE_WAIT_MS	1000	/* silence that ends a paste */
#define CE_KEY_ENTER_MS		1000	/* an Enter this soon after a key answer */

static const char	 ce_paste_end[] = "\033[201~";

static struct console_ops ce_ops;
static EditLine		*ce_el;
static History		*ce_hist;
static const char	*ce_prompt_shown = "";	/* what the prompt was drawn as */
static int		 ce_nl_key;	/* the line ended is a line of a block */
static int		 ce_read_again;	/* input was pushed back into libedit */
static char		*ce_paste_rest;	/* a paste's lines after the first */
static size_t		 ce_paste_lost;	/* a paste too long to take: its size */
static long long	 ce_key_ms;	/* when a single key answered a question */

/* What the prompt asks now. */
static int
ce_asking(void)
{
	return ce_ops.asking(ce_ops.arg);
}

/* The terminal's width. */
static int
ce_cols(void)
{
	int	cols, rows;

	if (console_size(&cols, &rows) == 0 && cols > 0)
		return cols;
	return 80;
}

/* libedit's prompt: the caller's. */
static char *
ce_prompt(EditLine *el)
{
	(void)el;
	ce_prompt_shown = ce_ops.prompt(ce_ops.arg);
	return (char *)ce_prompt_shown;
}

/* Clears the prompt area and returns the cursor to the end of an unfinished line. */
void
console_out_begin(int out_col)
{
	const LineInfo	*li;
	int		 cols = ce_cols(), up;

	li = el_line(ce_el);
	up = (int)(strlen(ce_prompt_shown) + (size_t)(li->cursor -
	    li->buffer)) / cols;
	if (up > 0)
		printf("\033[%dA", up);
	printf("\r\033[J");
	if (out_col > 0)
		printf("\033[A\033[%dG", out_col % cols + 1);
}

/* Puts the prompt back under the output. */
void
console_out_end(int out_col)
{
	if (out_col > 0)
		fputc('\n', stdout);
	fflush(stdout);
	el_set(ce_el, EL_REFRESH);
}

/* Replaces the line being typed (see console.h). */
void
console_set_line(const char *text, char **old)
{
	const LineInfo	*li;
	const LineInfoW	*lw;
	int		 n;

	li = el_line(ce_el);
	if (old != NULL && li->lastchar > li->buffer)
		*old = xstrndup(li->buffer, (size_t)(li->lastchar - li->buffer));
	lw = el_wline(ce_el);
	n = (int)(lw->lastchar - lw->buffer);
	el_cursor(ce_el, n);
	el_deletestr(ce_el, n);
	if (text != NULL)
		el_insertstr(ce_el, text);
}

/*
 * Keeps a pasted byte: CR and CRLF become LF (terminals send Enter in a
 * paste as CR), other controls but tab are left out (a paste cannot move
 * the cursor or start an escape sequence), and beyond CE_PASTE_MAX bytes
 * nothing is kept, only counted.
 */
static void
ce_paste_byte(char **buf, size_t *len, size_t *lost, int *cr, unsigned char c)
{
	if (*cr && c == '\n') {
		*cr = 0;
		return;
	}
	*cr = c == '\r';
	if (c == '\r')
		c = '\n';
	if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
		return;
	if (*len >= CE_PASTE_MAX) {
		(*lost)++;
		return;
	}
	if (*buf == NULL)
		*buf = xmalloc(CE_PASTE_MAX + 1);
	(*buf)[(*len)++] = (char)c;
}

/*
 * Reads a paste up to its end marker. Returns the text (new, maybe empty),
 * or NULL if nothing was kept; *lost gets the bytes left out.
 */
static char *
ce_paste_read(size_t *lost)
{
	struct pollfd	 pfd;
	unsigned char	 chunk[4096];
	char		*buf = NULL;
	size_t		 len = 0, held = 0, i;
	ssize_t		 n;
	int		 cr = 0, r;

	*lost = 0;
	pfd.fd = STDIN_FILENO;
	pfd.events = POLLIN;
	for (;;) {
		r = poll(&pfd, 1, CE_PASTE_WAIT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n = read(STDIN_FILENO, chunk, sizeof chunk);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		/*
		 * held counts the bytes of a possible end marker seen so far;
		 * they are kept back until it is clear whether they end it.
		 */
		for (i = 0; i < (size_t)n; i++) {
			if (chunk[i] == (unsigned char)ce_paste_end[held]) {
				if (++held == sizeof ce_paste_end - 1)
					goto done;
				continue;
			}
			for (r = 0; (size_t)r < held; r++)
				ce_paste_byte(&buf, &len, lost, &cr,
				    (unsigned char)ce_paste_end[r]);
			held = chunk[i] == (unsigned char)ce_paste_end[0];
			if (!held)
				ce_paste_byte(&buf, &len, lost, &cr, chunk[i]);
		}
	}
done:
	if (buf != NULL)
		buf[len] = '\0';
	return buf;
}

/* Deletes what follows the cursor on the line being typed; returns it (new). */
static char *
ce_cut_after_cursor(EditLine *el)
{
	const LineInfo	*li = el_line(el);
	const LineInfoW	*lw;
	char		*after;
	int		 n;

	after = xstrndup(li->cursor, (size_t)(li->lastchar - li->cursor));
	lw = el_wline(el);
	if ((n = (int)(lw->lastchar - lw->cursor)) > 0) {
		el_cursor(el, n);
		el_deletestr(el, n);
	}
	return after;
}

/* Ends the line as Enter does (see the top of the file). */
static void
ce_end_line(EditLine *el, int block)
{
	ce_nl_key = block;
	ce_read_again = 1;
	el_push(el, "\r");
}

/* Alt-Enter, Ctrl-J: the line goes into the block; at a question, Enter. */
static unsigned char
ce_key_newline(EditLine *el, int ch)
{
	(void)ch;
	ce_end_line(el, ce_asking() == CONSOLE_ASK_NONE);
	return CC_NORM;
}

/*
 * ESC [200~: a paste. Text without a newline is typed where the cursor is.
 * Otherwise its first line ends the line being typed, the lines after it
 * go into the block (ce_paste_rest, with what followed the cursor), and
 * the last one, unfinished, is left on the line to go on with. At a
 * question, newlines are blanks: a reason is one line.
 */
static unsigned char
ce_key_paste(EditLine *el, int ch)
{
	char	*text, *nl, *after, *p;
	size_t	 lost;

	(void)ch;
	text = ce_paste_read(&lost);
	if (lost > 0) {
		/* Cut, it would be sent as if it were whole: none of it. */
		free(text);
		ce_paste_lost = lost;
		return CC_REFRESH;
	}
	if (text == NULL)
		return CC_NORM;
	if (ce_asking() != CONSOLE_ASK_NONE)
		for (p = text; (p = strchr(p, '\n')) != NULL; p++)
			*p = ' ';
	if ((nl = strchr(text, '\n')) == NULL) {
		if (*text != '\0')
			el_insertstr(el, text);
		free(text);
		return CC_REFRESH;
	}
	*nl = '\0';
	after = ce_cut_after_cursor(el);
	if (*text != '\0')
		el_insertstr(el, text);
	free(ce_paste_rest);
	ce_paste_rest = xasprintf("%s%s", nl + 1, after);
	free(after);
	free(text);
	ce_end_line(el, 1);
	return CC_REFRESH;
}

/* Binds the keys above into libedit. */
static void
ce_keys(EditLine *el)
{
	/*
	 * el_wset: el_set's EL_ADDFN copies the name and help into wide
	 * strings that el_end never frees (libedit's eln.c says so).
	 */
	el_wset(el, EL_ADDFN, L"gbr-newline", L"end a line without sending it",
	    ce_key_newline);
	el_wset(el, EL_ADDFN, L"gbr-paste", L"take a bracketed paste whole",
	    ce_key_paste);
	/*
	 * libedit's edit mode has the terminal map CR to NL and NL to CR,
	 * so Enter and Ctrl-J read as each other; it matters to nobody
	 * while both end the line. Here they differ: as they are.
	 */
	el_set(el, EL_SETTY, "-d", "-inlcr", "-icrnl", NULL);
	/*
	 * And between two lines, while a command runs (libedit's cooked
	 * mode), or an Enter typed ahead would be read as Ctrl-J and keep the
	 * next message from being sent.
	 */
	el_set(el, EL_SETTY, "-x", "-inlcr", "-icrnl", NULL);
	el_set(el, EL_BIND, "^J", "gbr-newline", NULL);
	el_set(el, EL_BIND, "\033\r", "gbr-newline", NULL);
	el_set(el, EL_BIND, "\033\n", "gbr-newline", NULL);
	el_set(el, EL_BIND, "\033[200~", "gbr-paste", NULL);
}

/*
 * At a question, the keys that answer it at once, without Enter (the
 * caller's answer_keys).
 */
static int
ce_answer_key(const char *buf, int count)
{
	if (ce_asking() != CONSOLE_ASK_KEYS || count != 1 || buf[0] == '\0' ||
	    ce_ops.answer_keys == NULL ||
	    strchr(ce_ops.answer_keys, buf[0]) == NULL)
		return 0;
	ce_key_ms = clock_mono_ms();
	return 1;
}

/*
 * Called before libedit reads a key. Fingers used to "a Enter" press Enter
 * after a single-key answer, and that Enter would send the line given back
 * or answer the next question: an Enter that comes next, within
 * CE_KEY_ENTER_MS, belongs to the answer and is dropped. Any other key is
 * given to libedit as it came. Returns 1 if the key was dropped.
 */
static int
ce_key_enter_swallowed(void)
{
	unsigned char	 c[8];
	char		 s[9];
	size_t		 n = 1, want = 1;
	long long	 since = clock_mono_ms() - ce_key_ms;

	if (ce_key_ms == 0)
		return 0;
	ce_key_ms = 0;
	if (since < 0 || since >= CE_KEY_ENTER_MS)
		return 0;
	if (read(STDIN_FILENO, c, 1) != 1)
		return 1;
	if (c[0] == '\r' || c[0] == '\n')
		return 1;
	/* The rest of a UTF-8 character: libedit decodes what is pushed whole. */
	if (c[0] >= 0xc0)
		want = c[0] >= 0xf0 ? 4 : c[0] >= 0xe0 ? 3 : 2;
	while (n < want && read(STDIN_FILENO, c + n, 1) == 1)
		n++;
	memcpy(s, c, n);
	s[n] = '\0';
	el_push(ce_el, s);	/* the el_gets that follows reads it */
	return 0;
}

/* The terminal is readable: one key for libedit. */
int
console_edit_read(struct console_line *in)
{
	const char	*buf;
	int		 count = 0;

	memset(in, 0, sizeof *in);
	if (ce_key_enter_swallowed())
		return CONSOLE_NONE;
	buf = el_gets(ce_el, &count);
	/* Input was pushed back into libedit: it is read now. */
	while (ce_read_again) {
		ce_read_again = 0;
		buf = el_gets(ce_el, &count);
	}
	in->lost = ce_paste_lost;
	ce_paste_lost = 0;
	if (buf == NULL || count <= 0)
		return CONSOLE_NONE;
	if (count == 1 && buf[0] == 4)	/* Ctrl-D on an empty line */
		return CONSOLE_EOF;
	/* An answer key: as if Enter followed. */
	if (ce_answer_key(buf, count)) {
		el_push(ce_el, "\r");
		buf = el_gets(ce_el, &count);
		if (buf == NULL || count <= 0)
			return CONSOLE_NONE;
	}
	if (buf[count - 1] != '\n' && buf[count - 1] != '\r')
		return CONSOLE_NONE;
	in->text = xstrdup(buf);
	in->text[strcspn(in->text, "\r\n")] = '\0';
	in->block = ce_nl_key;
	ce_nl_key = 0;
	if (in->block) {
		in->rest = ce_paste_rest;
		ce_paste_rest = NULL;
	}
	return CONSOLE_LINE;
}

/* libedit reads one byte at a time: nothing is ever held here. */
int
console_edit_held(void)
{
	return 0;
}

/* Shows the prompt and reads keys one at a time. */
void
console_edit_on(void)
{
	el_set(ce_el, EL_UNBUFFERED, 1);
}

/* The line ended: libedit's cooked mode until the next prompt. */
void
console_edit_off(void)
{
	el_set(ce_el, EL_UNBUFFERED, 0);
}

/* Ctrl-C: like a shell, a half-typed line is dropped. */
int
console_drop_line(void)
{
	const LineInfo	*li = el_line(ce_el);

	if (li->lastchar <= li->buffer)
		return 0;
	el_set(ce_el, EL_UNBUFFERED, 0);
	printf("^C\n");
	el_set(ce_el, EL_UNBUFFERED, 1);
	return 1;
}

/* Adds a line to the history. */
void
console_history_add(const char *line)
{
	HistEvent	hev;

	history(ce_hist, &hev, H_ENTER, line);
}

/* The terminal's size changed: libedit learns it. */
void
console_resize(void)
{
	el_resize(ce_el);
}

/* Sets up libedit and the input history (loaded from histfile). */
void
console_edit_open(const struct console_ops *ops, const char *histfile)
{
	HistEvent	 hev;

	ce_ops = *ops;
	setlocale(LC_CTYPE, "");
	ce_hist = history_init();
	history(ce_hist, &hev, H_SETSIZE, CE_HISTORY_LINES);
	history(ce_hist, &hev, H_SETUNIQUE, 1);
	if (histfile != NULL)
		history(ce_hist, &hev, H_LOAD, histfile);
	ce_el = el_init("gbr", stdin, stdout, stderr);
	el_set(ce_el, EL_EDITOR, "emacs");
	el_set(ce_el, EL_PROMPT, ce_prompt);
	el_set(ce_el, EL_HIST, history, ce_hist);
	el_set(ce_el, EL_SIGNAL, 0);
	ce_keys(ce_el);
	el_source(ce_el, NULL);
}

/* Saves the history and gives the terminal back. */
void
console_edit_close(const char *histfile)
{
	HistEvent	hev;

	if (histfile != NULL)
		history(ce_hist, &hev, H_SAVE, histfile);
	el_end(ce_el);
	history_end(ce_hist);
	free(ce_paste_rest);
	ce_paste_rest = NULL;
}

/* libedit's keys and ours. */
const char *
console_keys_help(void)
{
	return
"Keys: Alt-Enter or Ctrl-J starts a new line of the message, Enter sends\n"
"it (a paste is one message); Ctrl-C cancels a running turn, clears the\n"
"line, twice leaves; Ctrl-D on an empty line detaches; Up/Down walk the\n"
"input history.";
}
