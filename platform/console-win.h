/*
 * What the Windows console files share (Windows builds only):
 * console-win.c saves the console's modes, lends them to a child and puts
 * them back at exit; console-read-win.c is the thread that reads the
 * console; console-edit-win.c the line editor the poll loop drives, which
 * asks that thread for one read at a time and reads its answer.
 */
#ifndef GBR_CONSOLE_WIN_H
#define GBR_CONSOLE_WIN_H

#include <winsock2.h>
#include <windows.h>

#include <stddef.h>

#define CW_WAKE		0x1e	/* Ctrl-^: injected to take the line back */
#define CW_KEYS_MAX	16	/* keys that answer a question alone */
#define CW_LINE_MAX	(1024 * 1024) /* a line kept, in UTF-16 units */

/* What the reader answers (struct cw_msg's type). */
#define CW_M_LINE	'L'	/* a line ended with Enter */
#define CW_M_WOKE	'W'	/* the line so far (asked for, or a stray wake) */
#define CW_M_EOF	'E'	/* Ctrl-D or Ctrl-Z on an empty line */
#define CW_M_ABORT	'A'	/* Ctrl-C ended the read (Windows) */
#define CW_M_KEY	'K'	/* an answer key, alone */
#define CW_M_END	'Z'	/* the console is gone */
/* And how (flags). */
#define CW_F_PASTE	0x1	/* the line came with more: a paste */
#define CW_F_KEYSEEN	0x2	/* the key after an answer key was read */

/* One answer, followed on the socket by len bytes of UTF-8. */
struct cw_msg {
	int	type;
	int	flags;
	size_t	cursor;		/* CW_M_WOKE: the cursor, in UTF-16 units */
	size_t	lost;		/* CW_M_LINE: units of a line too long, left out */
	size_t	len;
};

/* The line editor's input mode, from the mode the console had (orig). */
DWORD	console_win_edit_mode(DWORD orig);
/* Turns the line editor's input mode on (ours) or back to the console's. */
void	console_win_input_mode(int ours);

/*
 * Asks the reader for one read (console_input_fd started it): a line
 * that starts with initial (n UTF-16 units; taken, freed by the reader),
 * one of keys (NUL-terminated, empty: none) alone if it comes first,
 * dropping an Enter that comes within swallow_ms.
 */
void	console_win_request(wchar_t *initial, size_t n, const wchar_t *keys,
	    DWORD swallow_ms);
/* Asks the reader to answer now with the line so far (CW_M_WOKE). */
void	console_win_wake(void);
/* The answer came: a wake asked for is no longer wanted. */
void	console_win_wake_done(void);
/*
 * Reads the reader's answer, waiting up to ms. Returns 1 with *m and
 * *text (new), 0 if none came in time, -1 if the reader is gone.
 */
int	console_win_recv(struct cw_msg *m, char **text, int ms);

#endif
