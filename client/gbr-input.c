/*
 * Input of more than one line in the REPL, and single-key answers.
 *
 * Alt-Enter or Ctrl-J ends a line without sending it; a bracketed paste
 * (the terminal marks pasted text with ESC [200~ ... ESC [201~) is taken
 * whole, newlines and all. The lines held so far are the block; Enter
 * sends the block and the line being typed as one message, Ctrl-C drops
 * them. Without this, a pasted stack trace went out as one message per
 * line, each starting a turn.
 *
 * libedit knows neither: two functions bound to the keys do the work. A
 * function cannot end the line itself the way ed-newline does (libedit
 * does not export the redraw that goes with it), so it pushes a carriage
 * return back into libedit's input and asks gbr_stdin_tty to read again
 * at once; the line then ends as if Enter had been pressed, echo and all,
 * and G.nl_key tells that it is a line of a block.
 *
 * The paste is read here, straight from the terminal (libedit reads one
 * byte at a time, so nothing of it is in libedit's hands), up to its end
 * marker, or GBR_PASTE_WAIT_MS of silence: a terminal that never sends the
 * marker cannot hang the REPL. At most GBR_LINE_MAX bytes are kept; the
 * rest is read and thrown away, never typed as keys.
 */
#include "gbr-config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gbr-int.h"
#include "xmalloc.h"

#define GBR_PASTE_WAIT_MS	1000	/* silence that ends a paste */
#define GBR_PASTE_SHOW		12	/* pasted lines echoed before "N more" */
#define GBR_KEY_ENTER_MS	1000	/* an Enter this soon after a key answer */

static const char	gbr_paste_end[] = "\033[201~";

/* Turns bracketed paste on or off (terminals that know nothing of it ignore it). */
void
gbr_paste_mode(int on)
{
	if (!G.tty || G.hangup)
		return;
	fputs(on ? "\033[?2004h" : "\033[?2004l", stdout);
	fflush(stdout);
}

/*
 * Keeps a pasted byte: CR and CRLF become LF (terminals send Enter in a
 * paste as CR), other controls but tab are left out (a paste cannot move
 * the cursor or start an escape sequence), and beyond GBR_LINE_MAX bytes
 * nothing is kept, only counted.
 */
static void
gbr_paste_byte(char **buf, size_t *len, size_t *lost, int *cr, unsigned char c)
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
	if (*len >= GBR_LINE_MAX) {
		(*lost)++;
		return;
	}
	if (*buf == NULL)
		*buf = xmalloc(GBR_LINE_MAX + 1);
	(*buf)[(*len)++] = (char)c;
}

/*
 * Reads a paste up to its end marker. Returns the text (new, maybe empty),
 * or NULL if nothing was kept; *lost gets the bytes left out.
 */
static char *
gbr_paste_read(size_t *lost)
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
		r = poll(&pfd, 1, GBR_PASTE_WAIT_MS);
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
			if (chunk[i] == (unsigned char)gbr_paste_end[held]) {
				if (++held == sizeof gbr_paste_end - 1)
					goto done;
				continue;
			}
			for (r = 0; (size_t)r < held; r++)
				gbr_paste_byte(&buf, &len, lost, &cr,
				    (unsigned char)gbr_paste_end[r]);
			held = chunk[i] == (unsigned char)gbr_paste_end[0];
			if (!held)
				gbr_paste_byte(&buf, &len, lost, &cr, chunk[i]);
		}
	}
done:
	if (buf != NULL)
		buf[len] = '\0';
	return buf;
}

/* Deletes what follows the cursor on the line being typed; returns it (new). */
static char *
gbr_cut_after_cursor(EditLine *el)
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
gbr_end_line(EditLine *el, int block)
{
	G.nl_key = block;
	G.read_again = 1;
	el_push(el, "\r");
}

/* Alt-Enter, Ctrl-J: the line goes into the block; at a question, Enter. */
static unsigned char
gbr_key_newline(EditLine *el, int ch)
{
	(void)ch;
	gbr_end_line(el, G.ask == ASK_NONE);
	return CC_NORM;
}

/*
 * ESC [200~: a paste. Text without a newline is typed where the cursor is.
 * Otherwise its first line ends the line being typed, the lines after it
 * go into the block (G.paste_rest, with what followed the cursor), and
 * the last one, unfinished, is left on the line to go on with. At a
 * question, newlines are blanks: a reason is one line.
 */
static unsigned char
gbr_key_paste(EditLine *el, int ch)
{
	char	*text, *nl, *after, *p;
	size_t	 lost;

	(void)ch;
	text = gbr_paste_read(&lost);
	if (lost > 0) {
		/* Cut, it would be sent as if it were whole: none of it. */
		free(text);
		G.paste_lost = lost;
		return CC_REFRESH;
	}
	if (text == NULL)
		return CC_NORM;
	if (G.ask != ASK_NONE)
		for (p = text; (p = strchr(p, '\n')) != NULL; p++)
			*p = ' ';
	if ((nl = strchr(text, '\n')) == NULL) {
		if (*text != '\0')
			el_insertstr(el, text);
		free(text);
		return CC_REFRESH;
	}
	*nl = '\0';
	after = gbr_cut_after_cursor(el);
	if (*text != '\0')
		el_insertstr(el, text);
	free(G.paste_rest);
	G.paste_rest = xasprintf("%s%s", nl + 1, after);
	free(after);
	free(text);
	gbr_end_line(el, 1);
	return CC_REFRESH;
}

/* Binds the keys above into libedit. */
void
gbr_input_keys(EditLine *el)
{
	/*
	 * el_wset: el_set's EL_ADDFN copies the name and help into wide
	 * strings that el_end never frees (libedit's eln.c says so).
	 */
	el_wset(el, EL_ADDFN, L"gbr-newline", L"end a line without sending it",
	    gbr_key_newline);
	el_wset(el, EL_ADDFN, L"gbr-paste", L"take a bracketed paste whole",
	    gbr_key_paste);
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

/* Appends one line to the block (never past GBR_LINE_MAX: then 0). */
static int
gbr_block_add(const char *line, size_t n)
{
	if (n + 1 > GBR_LINE_MAX - G.block_len)
		return 0;
	G.block = xreallocarray(G.block, G.block_len + n + 2, 1);
	memcpy(G.block + G.block_len, line, n);
	G.block_len += n;
	G.block[G.block_len++] = '\n';
	G.block[G.block_len] = '\0';
	G.block_lines++;
	return 1;
}

/* Drops the block (Ctrl-C, leaving); returns how many lines it held. */
int
gbr_block_clear(void)
{
	int	n = G.block_lines;

	free(G.block);
	G.block = NULL;
	G.block_len = 0;
	G.block_lines = 0;
	free(G.paste_rest);
	G.paste_rest = NULL;
	return n;
}

/*
 * A line of a block was ended (G.nl_key): keeps it, and the lines of a
 * paste after it, echoing those (the line itself is on screen already).
 * Returns what is left to type on, or NULL.
 */
char *
gbr_block_line(const char *line)
{
	char	*rest = G.paste_rest, *p, *nl, *left = NULL;
	size_t	 shown = 0, more = 0;
	int	 full = 0;

	G.paste_rest = NULL;
	full = !gbr_block_add(line, strlen(line));
	for (p = rest; !full && p != NULL && (nl = strchr(p, '\n')) != NULL;
	    p = nl + 1) {
		if (!gbr_block_add(p, (size_t)(nl - p))) {
			full = 1;
			break;
		}
		if (shown++ < GBR_PASTE_SHOW)
			gbr_say("%*s> %.*s\n", (int)strlen(G.label), "...",
			    (int)(nl - p), p);
		else
			more++;
	}
	if (more > 0)
		gbr_say("%*s  (%zu more lines pasted)\n", (int)strlen(G.label),
		    "", more);
	if (full)
		gbr_say("! the message is over %d bytes: the lines beyond that "
		    "were left out\n", GBR_LINE_MAX);
	else if (p != NULL && *p != '\0')
		left = xstrdup(p);
	free(rest);
	return left;
}

/*
 * Enter, with a block held: the block and the last line are the message
 * (new), the block is emptied. NULL without a block.
 */
char *
gbr_block_take(const char *line)
{
	char	*text;

	if (G.block == NULL)
		return NULL;
	text = xasprintf("%s%s", G.block, line);
	gbr_block_clear();
	return text;
}

/*
 * At a question, the keys that answer it at once, without Enter: a, d
 * (then the reason) and s. Not e: an editor that opened on one stray key
 * would take the Enter that may follow it.
 */
int
gbr_answer_key(const char *buf, int count)
{
	if (G.ask != ASK_DECISION || count != 1 || buf[0] == '\0' ||
	    strchr("adsADS", buf[0]) == NULL)
		return 0;
	G.key_answer_ms = gbr_now_ms();
	return 1;
}

/*
 * Called before libedit reads a key. Fingers used to "a Enter" press Enter
 * after a single-key answer, and that Enter would send the line given back
 * (gbr_ask_update) or answer the next question: an Enter that comes next,
 * within GBR_KEY_ENTER_MS, belongs to the answer and is dropped. Any other
 * key is given to libedit as it came. Returns 1 if the key was dropped.
 */
int
gbr_key_enter_swallowed(void)
{
	unsigned char	 c[8];
	char		 s[9];
	size_t		 n = 1, want = 1;
	long long	 since = gbr_now_ms() - G.key_answer_ms;

	if (G.key_answer_ms == 0)
		return 0;
	G.key_answer_ms = 0;
	if (since < 0 || since >= GBR_KEY_ENTER_MS)
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
	el_push(G.el, s);	/* the el_gets that follows reads it */
	return 0;
}
