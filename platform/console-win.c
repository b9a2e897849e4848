/*
 * The REPL's terminal on Windows (console.h), but for reading it
 * (console-edit-win.c): the console's modes, its size, writing UTF-8 to
 * it, Ctrl-C and the console's closing, and the person's editor run on
 * it.
 *
 * Output: to a console, text is converted to UTF-16 and written with
 * WriteConsoleW, so the model's text shows right whatever the console's
 * code page; a UTF-8 character cut between two writes is held until the
 * rest comes. Anywhere else (a pipe, a file) bytes go out as they are.
 * Colours are virtual-terminal sequences: console_colors turns on
 * ENABLE_VIRTUAL_TERMINAL_PROCESSING and says no if the console refuses
 * it (before Windows 10), and then no sequence is written.
 *
 * The control handler runs on a thread of its own that the system
 * starts: it tells the caller (console_catch) and sends a byte on a
 * socket pair, the Windows form of the self-pipe, so that WSAPoll wakes.
 * When the console closes the system ends the process once the handler
 * returns (or after 5 seconds), so the handler waits there for gbr to
 * detach first.
 *
 * Every mode and code page changed here is put back at exit.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "console.h"
#include "console-win.h"
#include "paths.h"
#include "transport.h"
#include "transport-win.h"
#include "xmalloc.h"

/* How long the handler holds a closing console for gbr to detach. */
#define CW_CLOSE_WAIT_MS	4000
/* A console write, at most (UTF-16 units). */
#define CW_WRITE_CHUNK		8192

/* A program run with the console. */
struct console_child {
	HANDLE	process;
};

static console_sig_cb	 cw_sig_cb;
static SOCKET		 cw_wake[2] = { INVALID_SOCKET, INVALID_SOCKET };
static int		 cw_restore_set;
static UINT		 cw_cp_orig;	/* output code page, 0 if unchanged */
static DWORD		 cw_out_orig;	/* output mode, as found */
static int		 cw_out_saved;
static DWORD		 cw_out_ours;	/* output mode, with VT if we got it */
static DWORD		 cw_in_orig;	/* input mode, as found */
static int		 cw_in_saved;
static int		 cw_in_ours;	/* the line editor's input mode is on */
static char		 cw_carry[4];	/* a UTF-8 character cut by a write */
static size_t		 cw_carry_len;

/* The standard handle std if it is a console (GetConsoleMode works on it). */
static HANDLE
cw_console(DWORD std)
{
	HANDLE	h = GetStdHandle(std);
	DWORD	mode;

	if (h == NULL || h == INVALID_HANDLE_VALUE || !GetConsoleMode(h, &mode))
		return NULL;
	return h;
}

/* Whether stdin and stdout are both the console. */
int
console_is_terminal(void)
{
	return cw_console(STD_INPUT_HANDLE) != NULL &&
	    cw_console(STD_OUTPUT_HANDLE) != NULL;
}

/*
 * The console's modes and code page as they were (lend: for a child, or
 * at exit), or as gbr set them.
 */
static void
cw_lend(int lend)
{
	HANDLE	out = cw_console(STD_OUTPUT_HANDLE);
	HANDLE	in = cw_console(STD_INPUT_HANDLE);

	if (out != NULL && cw_out_saved)
		SetConsoleMode(out, lend ? cw_out_orig : cw_out_ours);
	if (in != NULL && cw_in_saved)
		SetConsoleMode(in, lend || !cw_in_ours ? cw_in_orig :
		    console_win_edit_mode(cw_in_orig));
	if (cw_cp_orig != 0)
		SetConsoleOutputCP(lend ? cw_cp_orig : CP_UTF8);
}

/* At exit: everything as it was. */
static void
cw_restore(void)
{
	cw_lend(1);
}

/* Saves the modes once and has them put back at exit. */
static void
cw_save(void)
{
	HANDLE	out = cw_console(STD_OUTPUT_HANDLE);
	HANDLE	in = cw_console(STD_INPUT_HANDLE);

	if (!cw_out_saved && out != NULL && GetConsoleMode(out, &cw_out_orig)) {
		cw_out_saved = 1;
		cw_out_ours = cw_out_orig;
	}
	if (!cw_in_saved && in != NULL && GetConsoleMode(in, &cw_in_orig))
		cw_in_saved = 1;
	if (!cw_restore_set) {
		cw_restore_set = 1;
		(void)atexit(cw_restore);
	}
}

/*
 * The input mode for the line editor: the console's cooked mode (line
 * input, echo, Ctrl-C as a signal) in insert mode, keeping quick edit as
 * the person has it. Virtual-terminal input would hand the arrows to
 * ReadConsoleW as escape sequences instead of editing with them.
 */
DWORD
console_win_edit_mode(DWORD orig)
{
	return (orig & ENABLE_QUICK_EDIT_MODE) | ENABLE_LINE_INPUT |
	    ENABLE_ECHO_INPUT | ENABLE_PROCESSED_INPUT | ENABLE_INSERT_MODE |
	    ENABLE_EXTENDED_FLAGS;
}

/* Turns the line editor's input mode on or off. */
void
console_win_input_mode(int ours)
{
	cw_save();
	cw_in_ours = ours;
	cw_lend(0);
}

/*
 * From the start: UTF-8 for what the C library writes (the usage, the
 * last lines at exit); what gbr shows goes through WriteConsoleW anyway.
 */
void
console_early(void)
{
	UINT	cp;

	cw_save();
	if ((cp = GetConsoleOutputCP()) != CP_UTF8 && SetConsoleOutputCP(CP_UTF8))
		cw_cp_orig = cp;
}

/* Colours if the console takes virtual-terminal sequences (turned on here). */
int
console_colors(void)
{
	HANDLE	out = cw_console(STD_OUTPUT_HANDLE);

	if (out == NULL)
		return 0;
	cw_save();
	if (!SetConsoleMode(out, cw_out_ours | ENABLE_VIRTUAL_TERMINAL_PROCESSING))
		return 0;
	cw_out_ours |= ENABLE_VIRTUAL_TERMINAL_PROCESSING;
	return 1;
}

/*
 * The console's size: the buffer's width (where lines wrap) and the
 * window's height.
 */
int
console_size(int *cols, int *rows)
{
	CONSOLE_SCREEN_BUFFER_INFO	sb;
	HANDLE				out = cw_console(STD_OUTPUT_HANDLE);

	if (out == NULL || !GetConsoleScreenBufferInfo(out, &sb))
		return -1;
	*cols = sb.dwSize.X;
	*rows = sb.srWindow.Bottom - sb.srWindow.Top + 1;
	return 0;
}

/* The length of buf's longest prefix that does not end inside a UTF-8 character. */
static size_t
cw_utf8_whole(const char *buf, size_t len)
{
	size_t		i, back, need;
	unsigned char	c;

	for (back = 1; back <= 3 && back <= len; back++) {
		c = (unsigned char)buf[len - back];
		if ((c & 0xc0) == 0x80)
			continue;	/* a continuation byte: look further */
		i = len - back;
		need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return need > back ? i : len;
	}
	return len;
}

/* Writes UTF-8 to the console as UTF-16. */
static void
cw_write_console(HANDLE out, const char *buf, size_t len)
{
	wchar_t	w[CW_WRITE_CHUNK];
	DWORD	done;
	size_t	off = 0, n;
	int	got;

	while (off < len) {
		/* A UTF-8 byte gives at most one UTF-16 unit. */
		n = cw_utf8_whole(buf + off, len - off > CW_WRITE_CHUNK ?
		    CW_WRITE_CHUNK : len - off);
		if (n == 0)
			n = len - off > CW_WRITE_CHUNK ? CW_WRITE_CHUNK : len - off;
		got = MultiByteToWideChar(CP_UTF8, 0, buf + off, (int)n, w,
		    CW_WRITE_CHUNK);
		if (got > 0)
			WriteConsoleW(out, w, (DWORD)got, &done, NULL);
		off += n;
	}
}

/* Writes to standard output (see the top of the file). */
void
console_write(const char *buf, size_t len)
{
	HANDLE	 out = cw_console(STD_OUTPUT_HANDLE);
	char	*joined;
	size_t	 whole;

	if (out == NULL) {
		fwrite(buf, 1, len, stdout);
		return;
	}
	fflush(stdout);		/* what the C library holds goes first */
	if (cw_carry_len > 0) {
		joined = xmalloc(cw_carry_len + len);
		memcpy(joined, cw_carry, cw_carry_len);
		memcpy(joined + cw_carry_len, buf, len);
		len += cw_carry_len;
		cw_carry_len = 0;
		console_write(joined, len);
		free(joined);
		return;
	}
	whole = cw_utf8_whole(buf, len);
	cw_write_console(out, buf, whole);
	memcpy(cw_carry, buf + whole, len - whole);
	cw_carry_len = len - whole;
}

/* Flushes what the C library holds. */
void
console_flush(void)
{
	fflush(stdout);
}

/* The console has no bracketed paste (console-edit-win.c finds pastes). */
void
console_paste_mode(int on)
{
	(void)on;
}

/* Wakes the poll loop. */
static void
cw_poke(void)
{
	char	c = 0;

	(void)send(cw_wake[1], &c, 1, 0);
}

/* The console's control handler (see the top of the file). */
static BOOL WINAPI
cw_ctrl(DWORD type)
{
	switch (type) {
	case CTRL_C_EVENT:
		cw_sig_cb(CONSOLE_SIG_INT);
		cw_poke();
		return TRUE;
	case CTRL_BREAK_EVENT:
		cw_sig_cb(CONSOLE_SIG_HUP);
		cw_poke();
		return TRUE;
	case CTRL_CLOSE_EVENT:
	case CTRL_LOGOFF_EVENT:
	case CTRL_SHUTDOWN_EVENT:
		cw_sig_cb(CONSOLE_SIG_HUP);
		cw_poke();
		/* The process ends when this returns: gbr detaches meanwhile. */
		Sleep(CW_CLOSE_WAIT_MS);
		return TRUE;
	}
	return FALSE;
}

/* Catches Ctrl-C, Ctrl-Break and the console's closing. */
int
console_catch(console_sig_cb cb, char **cause)
{
	u_long	on = 1;

	if (transport_win_socketpair(cw_wake) != 0) {
		*cause = xasprintf("socket pair: %s", strerror(errno));
		return -1;
	}
	/* A handler that finds the pair full need not wait: one byte wakes. */
	(void)ioctlsocket(cw_wake[0], FIONBIO, &on);
	(void)ioctlsocket(cw_wake[1], FIONBIO, &on);
	cw_sig_cb = cb;
	if (!SetConsoleCtrlHandler(cw_ctrl, TRUE)) {
		*cause = xstrdup("cannot catch Ctrl-C");
		return -1;
	}
	return (int)cw_wake[0];
}

/* Empties the wake-up socket. */
void
console_catch_drain(void)
{
	char	drain[64];

	while (recv(cw_wake[0], drain, sizeof drain, 0) > 0)
		;
}

/*
 * Runs the person's editor: cmd.exe /d /s /c "EDITOR "PATH"" with the
 * console, as proc_run_editor does (cmd's /s rule: the outer quotes go,
 * what is inside stays as typed). The console's input and output modes
 * are given back to it as they were meanwhile. No pager on Windows.
 */
int
console_child_start(int what, const char *prog, const char *arg, int in_fd,
    struct console_child **child, char **cause)
{
	STARTUPINFOW		 si;
	PROCESS_INFORMATION	 pi;
	wchar_t			*cmd;
	char			*line, *why;

	(void)in_fd;
	if (what != CONSOLE_RUN_EDITOR) {
		*cause = xstrdup("Windows has no pager here");
		return -1;
	}
	/* A quote in the path would end cmd's quoting early: refuse it. */
	if (strchr(arg, '"') != NULL) {
		*cause = xstrdup("the file's name has a quote in it");
		return -1;
	}
	line = xasprintf("cmd.exe /d /s /c \"%s \"%s\"\"", prog, arg);
	cmd = transport_win_wide(line);
	free(line);
	if (cmd == NULL) {
		*cause = xstrdup("the command is not valid UTF-8");
		return -1;
	}
	fflush(stdout);
	cw_lend(1);
	memset(&si, 0, sizeof si);
	si.cb = sizeof si;
	if (!CreateProcessW(NULL, cmd, NULL, NULL, FALSE,
	    CREATE_UNICODE_ENVIRONMENT, NULL, NULL, &si, &pi)) {
		why = transport_win_strerror(GetLastError());
		*cause = xasprintf("cmd.exe: %s", why);
		free(why);
		free(cmd);
		cw_lend(0);
		return -1;
	}
	free(cmd);
	CloseHandle(pi.hThread);
	*child = xcalloc(1, sizeof **child);
	(*child)->process = pi.hProcess;
	return 0;
}

/* Whether the child ended; its exit code if it is a status (0 to 255). */
int
console_child_done(struct console_child *child, int *status)
{
	DWORD	code;

	if (WaitForSingleObject(child->process, 0) == WAIT_TIMEOUT)
		return 0;
	if (!GetExitCodeProcess(child->process, &code) || code > 255)
		*status = -1;
	else
		*status = (int)code;
	CloseHandle(child->process);
	free(child);
	cw_lend(0);
	return 1;
}

/* Notepad is there on every Windows. */
const char *
console_default_editor(void)
{
	return "notepad";
}

/* No pager: text taller than the console is written whole (it scrolls back). */
const char *
console_pager(void)
{
	return NULL;
}

/* $TMPDIR if it is absolute, else the system's (GetTempPathW), with '/'. */
char *
console_tmp_dir(void)
{
	const char	*tmp = getenv("TMPDIR");
	wchar_t		 w[MAX_PATH + 1];
	char		*dir, *p;
	DWORD		 n;
	size_t		 len;

	if (tmp != NULL && paths_is_absolute(tmp))
		return xstrdup(tmp);
	n = GetTempPathW(MAX_PATH + 1, w);
	if (n == 0 || n > MAX_PATH)
		return xstrdup(".");
	dir = transport_win_utf8(w);
	for (p = dir; *p != '\0'; p++) {
		if (*p == '\\')
			*p = '/';
	}
	/* "C:/Users/x/AppData/Local/Temp/": without the last '/', but "C:/". */
	len = strlen(dir);
	if (len > 3 && dir[len - 1] == '/')
		dir[len - 1] = '\0';
	return dir;
}
