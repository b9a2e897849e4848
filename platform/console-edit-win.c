/*
 * The line editor on Windows (console.h): the console's own cooked mode
 * edits the line (the arrows, Home, End, the history with Up and F7 are
 * the console's), read by a thread (console-read-win.c) one request at a
 * time; this file is the loop's side: the prompt, output above it, the
 * answers and what they mean.
 *
 * Output above the prompt: while a cooked read is pending the console
 * owns the line, so nothing may be written. The line is taken back first
 * (cw_take: the reader is woken and answers with the line as typed so
 * far and where its cursor was); the prompt area is cleared with the
 * console's own calls (no escape sequence needed), the output written,
 * the prompt and the line drawn again, and a new read started with the
 * line as its initial characters, so typing goes on where it was (the
 * cursor at its end). Keys typed meanwhile wait in the console's input.
 * An answer that comes while the line is being taken back (Enter was
 * pressed just then) is held for console_edit_read.
 *
 * At a question that keys answer, such a key is taken alone and echoed
 * here with its Enter; an Enter within CW_KEY_ENTER_MS after it is
 * dropped, as on Unix. A line the reader flags as pasted is a line of the
 * block (the caller holds it) unless the prompt asks a question.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "clock.h"
#include "console.h"
#include "console-win.h"
#include "xmalloc.h"

#define CW_TAKE_MS		2000	/* longest wait for the line back */
#define CW_KEY_ENTER_MS		1000	/* an Enter this soon after a key answer */

/* The loop's own. */
static struct console_ops cw_ops;
static int		 cw_on;		/* the prompt is up, keys are read */
static int		 cw_pending;	/* a request's answer is not read yet */
static int		 cw_stuck;	/* ... and did not come in time */
static int		 cw_drawn;	/* prompt and cw_text are on the screen */
static int		 cw_dead;	/* the console is gone */
static int		 cw_held;	/* an answer read while output was written */
static struct cw_msg	 cw_held_msg;
static char		*cw_held_text;
static char		*cw_text;	/* the line typed so far */
static size_t		 cw_cursor;	/* where the cursor is in it (units) */
static const char	*cw_prompt_shown = "";
static long long	 cw_key_ms;	/* when a key answered a question */

/* UTF-8 to UTF-16 (a bad byte becomes U+FFFD): a new string, *n units. */
static wchar_t *
cw_wide(const char *s, size_t *n)
{
	wchar_t	*w;
	int	 m;

	*n = 0;
	if (*s == '\0')
		return NULL;
	m = MultiByteToWideChar(CP_UTF8, 0, s, (int)strlen(s), NULL, 0);
	if (m <= 0)
		return NULL;
	w = xreallocarray(NULL, (size_t)m, sizeof *w);
	m = MultiByteToWideChar(CP_UTF8, 0, s, (int)strlen(s), w, m);
	*n = m > 0 ? (size_t)m : 0;
	return w;
}

/* The UTF-16 units of UTF-8 text: about the columns it takes. */
static size_t
cw_units(const char *s)
{
	size_t	n = 0;

	for (; *s != '\0'; s++) {
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
		if ((unsigned char)*s >= 0xf0)
			n++;	/* a surrogate pair */
	}
	return n;
}

/* Asks the reader for a line that starts with cw_text. */
static void
cw_request(void)
{
	const char	*k = cw_ops.answer_keys;
	wchar_t		*w, keys[CW_KEYS_MAX + 1];
	size_t		 n, i = 0;
	long long	 since = clock_mono_ms() - cw_key_ms;
	DWORD		 swallow = 0;

	if (cw_dead)
		return;
	w = cw_wide(cw_text, &n);
	if (cw_ops.asking(cw_ops.arg) == CONSOLE_ASK_KEYS && n == 0 && k != NULL)
		for (; i < CW_KEYS_MAX && k[i] != '\0'; i++)
			keys[i] = (unsigned char)k[i];
	keys[i] = 0;
	if (cw_key_ms != 0 && since >= 0 && since < CW_KEY_ENTER_MS)
		swallow = (DWORD)(CW_KEY_ENTER_MS - since);
	console_win_request(w, n, keys, swallow);
	cw_pending = 1;
}

/* Gives the reader's answer a place: the line back, or held for later. */
static void
cw_got(const struct cw_msg *m, char *text)
{
	cw_pending = 0;
	cw_stuck = 0;
	if (m->flags & CW_F_KEYSEEN)
		cw_key_ms = 0;
	if (m->type == CW_M_WOKE) {
		free(cw_text);
		cw_text = text;
		cw_cursor = m->cursor;
		return;
	}
	if (m->type == CW_M_LINE)
		cw_drawn = 0;	/* the console took it to a new line */
	cw_held = 1;
	cw_held_msg = *m;
	cw_held_text = text;
}

/* Takes the line back from a pending read (see the top of the file). */
static void
cw_take(void)
{
	struct cw_msg	 m;
	char		*text;
	int		 got;

	if (!cw_pending)
		return;
	if (!cw_stuck)
		console_win_wake();
	/* Stuck (a pop-up of the console's holds the read): do not wait again. */
	got = console_win_recv(&m, &text, cw_stuck ? 0 : CW_TAKE_MS);
	if (got == 0) {
		cw_stuck = 1;
		return;
	}
	console_win_wake_done();
	if (got < 0) {
		memset(&m, 0, sizeof m);
		m.type = CW_M_END;
		text = xstrdup("");
	}
	cw_got(&m, text);
}

/*
 * Clears the prompt and the line from the screen, and puts the cursor
 * where output goes on: at column out_col of the line above if it is
 * unfinished, else where the prompt began.
 */
static void
cw_clear(int out_col)
{
	CONSOLE_SCREEN_BUFFER_INFO	 sb;
	HANDLE				 out = GetStdHandle(STD_OUTPUT_HANDLE);
	COORD				 at;
	DWORD				 n;
	size_t				 pcols = cw_units(cw_prompt_shown);
	int				 cols, y, last;

	if (!GetConsoleScreenBufferInfo(out, &sb) || sb.dwSize.X <= 0)
		return;
	cols = sb.dwSize.X;
	y = sb.dwCursorPosition.Y - (int)((pcols + cw_cursor) / (size_t)cols);
	if (y < 0)
		y = 0;
	last = y + (int)((pcols + cw_units(cw_text)) / (size_t)cols);
	if (last < sb.srWindow.Bottom)
		last = sb.srWindow.Bottom;
	if (last > sb.dwSize.Y - 1)
		last = sb.dwSize.Y - 1;
	at.X = 0;
	at.Y = (SHORT)y;
	n = (DWORD)(last - y + 1) * (DWORD)cols;
	FillConsoleOutputCharacterW(out, L' ', n, at, &n);
	n = (DWORD)(last - y + 1) * (DWORD)cols;
	FillConsoleOutputAttribute(out, sb.wAttributes, n, at, &n);
	if (out_col > 0 && y > 0) {
		at.X = (SHORT)(out_col % cols);
		at.Y = (SHORT)(y - 1);
	}
	SetConsoleCursorPosition(out, at);
}

/* Draws the prompt and the line typed so far; the cursor ends after it. */
static void
cw_draw(void)
{
	cw_prompt_shown = cw_ops.prompt(cw_ops.arg);
	console_write(cw_prompt_shown, strlen(cw_prompt_shown));
	console_write(cw_text, strlen(cw_text));
	console_flush();
	cw_cursor = cw_units(cw_text);
	cw_drawn = 1;
}

/* The line is typed on from scratch. */
static void
cw_text_clear(void)
{
	free(cw_text);
	cw_text = xstrdup("");
	cw_cursor = 0;
}

/* Takes the prompt and the line off the screen for output. */
void
console_out_begin(int out_col)
{
	cw_take();
	if (cw_drawn && !cw_stuck)
		cw_clear(out_col);
	cw_drawn = 0;
}

/* Puts the prompt and the line back under the output, and reads on. */
void
console_out_end(int out_col)
{
	if (out_col > 0)
		console_write("\n", 1);
	console_flush();
	if (!cw_on || cw_stuck)
		return;
	if (cw_held && cw_held_msg.type == CW_M_LINE)
		return;		/* that line ended: the caller reads it next */
	cw_draw();
	if (!cw_held)
		cw_request();
}

/* Replaces the line being typed (between begin and end). */
void
console_set_line(const char *text, char **old)
{
	if (old != NULL && cw_text[0] != '\0')
		*old = xstrdup(cw_text);
	free(cw_text);
	cw_text = xstrdup(text != NULL ? text : "");
	cw_cursor = cw_units(cw_text);
}

/* Reads the reader's answer, when the socket or cw_held says there is one. */
int
console_edit_read(struct console_line *in)
{
	struct cw_msg	 m;
	char		*text;
	int		 r;

	memset(in, 0, sizeof *in);
	if (cw_held) {
		m = cw_held_msg;
		text = cw_held_text;
		cw_held = 0;
		cw_held_text = NULL;
	} else if (cw_pending) {
		if ((r = console_win_recv(&m, &text, 0)) == 0)
			return CONSOLE_NONE;
		if (r < 0) {
			memset(&m, 0, sizeof m);
			m.type = CW_M_END;
			text = xstrdup("");
		}
		cw_got(&m, text);
		cw_held = 0;
		cw_held_text = NULL;
		if (m.type == CW_M_WOKE)
			text = xstrdup(cw_text);
	} else
		return CONSOLE_NONE;
	if (m.type != CW_M_WOKE && m.type != CW_M_ABORT)
		cw_key_ms = 0;
	switch (m.type) {
	case CW_M_LINE:
		cw_text_clear();
		in->text = text;
		in->lost = m.lost;
		in->block = (m.flags & CW_F_PASTE) &&
		    cw_ops.asking(cw_ops.arg) == CONSOLE_ASK_NONE;
		return CONSOLE_LINE;
	case CW_M_KEY:
		/* Taken without echo: shown as if typed, with its Enter. */
		cw_text_clear();
		console_write(text, strlen(text));
		console_write("\n", 1);
		console_flush();
		cw_drawn = 0;
		cw_key_ms = clock_mono_ms();
		in->text = text;
		return CONSOLE_LINE;
	case CW_M_EOF:
		free(text);
		cw_text_clear();
		if (cw_on)
			cw_request();	/* the caller may not leave: read on */
		return CONSOLE_EOF;
	case CW_M_END:
		free(text);
		cw_dead = 1;
		return CONSOLE_EOF;
	case CW_M_ABORT:
		/* Ctrl-C ended the read and what was typed is gone. */
		free(text);
		cw_text_clear();
		console_write("\n", 1);
		if (cw_on) {
			cw_draw();
			cw_request();
		}
		return CONSOLE_NONE;
	default:
		/* The line came back unasked: drawn again, and read on. */
		free(text);
		if (cw_on) {
			if (cw_drawn)
				cw_clear(0);
			cw_draw();
			cw_request();
		}
		return CONSOLE_NONE;
	}
}

/* Whether an answer was read while output was written. */
int
console_edit_held(void)
{
	return cw_held;
}

/* Shows the prompt and reads a line. */
void
console_edit_on(void)
{
	cw_on = 1;
	if (cw_text == NULL)
		cw_text = xstrdup("");
	cw_draw();
	if (!cw_held && !cw_pending)
		cw_request();
}

/* Stops reading: a pending read gives its line back (it stays on screen). */
void
console_edit_off(void)
{
	cw_take();
	cw_on = 0;
	cw_drawn = 0;
}

/* Ctrl-C at the prompt: a half-typed line is written again with ^C, and goes. */
int
console_drop_line(void)
{
	struct console_line	in;

	cw_take();
	if (cw_held && cw_held_msg.type == CW_M_ABORT) {
		(void)console_edit_read(&in);	/* a new prompt, a new read */
		return 0;
	}
	if (cw_held || cw_stuck)
		return 0;
	if (cw_text[0] == '\0') {
		cw_request();	/* the screen is as it was */
		return 0;
	}
	if (cw_drawn)
		cw_clear(0);
	cw_draw();
	console_write("^C\n", 3);
	cw_text_clear();
	cw_draw();
	cw_request();
	return 1;
}

/* The console keeps its own history of the lines read. */
void
console_history_add(const char *line)
{
	(void)line;
}

/* The console wraps at its width, read at each redraw. */
void
console_resize(void)
{
}

/* Sets up the line editor: the console's cooked mode, in insert mode. */
void
console_edit_open(const struct console_ops *ops, const char *histfile)
{
	(void)histfile;
	cw_ops = *ops;
	if (cw_text == NULL)
		cw_text = xstrdup("");
	console_win_input_mode(1);
}

/* Gives the console its own input mode back. */
void
console_edit_close(const char *histfile)
{
	(void)histfile;
	cw_on = 0;
	console_win_input_mode(0);
	free(cw_held_text);
	cw_held_text = NULL;
	cw_held = 0;
}

/* The console's keys and ours. */
const char *
console_keys_help(void)
{
	return
"Keys: Enter sends (a paste of several lines is one message); the\n"
"console edits the line and keeps its history (Up/Down, F7); Ctrl-C\n"
"cancels a running turn, clears the line, twice leaves; Ctrl-D or Ctrl-Z\n"
"on an empty line detaches.";
}
