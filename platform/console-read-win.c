/*
 * The thread that reads the console on Windows (console-win.h), and
 * standard input that is no console. ReadConsoleW blocks and WSAPoll
 * waits on sockets only, so what is read comes to the poll loop as
 * messages on a socket pair: for the line editor (console-edit-win.c) one
 * answer per request, for plain input the bytes themselves.
 *
 * A request is one read. If keys answer the question alone, or an Enter
 * after such a key is to be dropped, the reader first peeks at the input
 * records: such a key is taken without echo or Enter, and an Enter within
 * the time given is taken away; any other key is left for a cooked read,
 * the console's own line editing (ReadConsoleW with line input and echo),
 * which starts from the request's initial characters (nInitialChars:
 * they are on the screen already). The read ends with Enter, with Ctrl-D
 * or Ctrl-Z (dwCtrlWakeupMask: an empty line is the end of input), or
 * with CW_WAKE, which the loop injects when it wants the line back to
 * write above it (console_win_wake): the line then comes back as typed so
 * far, the wake-up character where the cursor was. A wake asked while
 * the reader peeks sets an event instead; one that comes when the read
 * just ended stays in the input and makes the next read come back at
 * once, unasked, which the editor takes as a redraw.
 *
 * A paste of several lines reaches a cooked read as lines typed one after
 * the other. A line after which more input waits at once (within
 * CW_PASTE_GAP_MS: nobody types that fast), or that a read got at once
 * after such a line, is flagged as pasted.
 *
 * Ctrl-C is the console's signal (console-win.c): the read goes on under
 * Wine, while Windows ends it (ERROR_OPERATION_ABORTED, CW_M_ABORT) and
 * drops what was typed.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>
#include <process.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "clock.h"
#include "console.h"
#include "console-win.h"
#include "transport.h"
#include "transport-win.h"
#include "xmalloc.h"

#define CW_CTRL_D		0x04
#define CW_CTRL_Z		0x1a
#define CW_READ_CHUNK		4096	/* UTF-16 units a cooked read takes */
#define CW_PASTE_GAP_MS		15	/* input this soon after a line: pasted */
#define CW_PASTE_READ_MS	50	/* a read this quick after a pasted line */
#define CW_PEEK_RECS		64
#define CW_THREAD_STACK		(256 * 1024)

/* Where the reader is (cw_phase). */
#define CW_IDLE		0
#define CW_PEEK		1
#define CW_COOKED	2

/* One request: what the line starts with, what to peek for. */
struct cw_req {
	wchar_t	*initial;
	size_t	 ninitial;
	wchar_t	 keys[CW_KEYS_MAX + 1];
	DWORD	 swallow_ms;
};

/* Shared by the reader and the loop, under cw_lock. */
static CRITICAL_SECTION	 cw_lock;
static struct cw_req	 cw_rq;
static int		 cw_phase;
static int		 cw_wake_asked;

/* Set once by console_input_fd. */
static SOCKET		 cw_pair[2] = { INVALID_SOCKET, INVALID_SOCKET };
static HANDLE		 cw_in = INVALID_HANDLE_VALUE;
static HANDLE		 cw_req_ev;	/* a request waits */
static HANDLE		 cw_wake_ev;	/* the line is wanted back (peeking) */

/* The reader's own. */
static int		 cw_prev_paste;

/* UTF-16 to UTF-8, n units: a new string (*len bytes). */
static char *
cw_utf8(const wchar_t *w, size_t n, size_t *len)
{
	char	*s;
	int	 m;

	*len = 0;
	if (n == 0)
		return xstrdup("");
	m = WideCharToMultiByte(CP_UTF8, 0, w, (int)n, NULL, 0, NULL, NULL);
	if (m <= 0)
		return xstrdup("");
	s = xmalloc((size_t)m + 1);
	m = WideCharToMultiByte(CP_UTF8, 0, w, (int)n, s, m, NULL, NULL);
	s[m > 0 ? m : 0] = '\0';
	*len = m > 0 ? (size_t)m : 0;
	return s;
}

/* Sends all of buf on the reader's end. Returns 0, or -1. */
static int
cw_send_all(const void *buf, size_t len)
{
	const char	*p = buf;
	int		 n;

	while (len > 0) {
		n = send(cw_pair[1], p, len > INT_MAX ? INT_MAX : (int)len, 0);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The reader answers: type, flags, and the text w (n units). */
static void
cw_answer(int type, int flags, size_t cursor, size_t lost, const wchar_t *w,
    size_t n)
{
	struct cw_msg	 m;
	char		*s;

	/*
	 * A paste goes on only from line to line: once the loop took the
	 * line back (Ctrl-C, output), what comes next was typed, even if
	 * a slow loop let it pile up before the next read.
	 */
	if (type != CW_M_LINE)
		cw_prev_paste = 0;
	memset(&m, 0, sizeof m);
	s = cw_utf8(w, n, &m.len);
	m.type = type;
	m.flags = flags;
	m.cursor = cursor;
	m.lost = lost;
	if (cw_send_all(&m, sizeof m) == 0)
		(void)cw_send_all(s, m.len);
	free(s);
}

/* Takes one input record off the console (the one peeked at). */
static void
cw_consume(void)
{
	INPUT_RECORD	r;
	DWORD		got;

	(void)ReadConsoleInputW(cw_in, &r, 1, &got);
}

/* Whether a key that makes no character by itself is a modifier. */
static int
cw_modifier(WORD vk)
{
	return vk == VK_SHIFT || vk == VK_CONTROL || vk == VK_MENU ||
	    vk == VK_CAPITAL || vk == VK_LWIN || vk == VK_RWIN;
}

/*
 * Whether a typed character waits in the input buffer, looking for up to
 * ms (a paste's next line; key releases and the like do not count).
 */
static int
cw_input_waits(int ms)
{
	INPUT_RECORD	 recs[CW_PEEK_RECS];
	DWORD		 got, i;
	long long	 until = clock_mono_ms() + ms;
	WCHAR		 ch;

	for (;;) {
		if (PeekConsoleInputW(cw_in, recs, CW_PEEK_RECS, &got)) {
			for (i = 0; i < got; i++) {
				ch = recs[i].Event.KeyEvent.uChar.UnicodeChar;
				if (recs[i].EventType == KEY_EVENT &&
				    recs[i].Event.KeyEvent.bKeyDown && ch != 0 &&
				    ch != CW_WAKE)
					return 1;
			}
		}
		if (clock_mono_ms() >= until)
			return 0;
		Sleep(2);
	}
}

/* Whether the loop wants the line back (and then forgets it asked). */
static int
cw_woken(void)
{
	int	asked;

	EnterCriticalSection(&cw_lock);
	if ((asked = cw_wake_asked))
		cw_phase = CW_IDLE;
	cw_wake_asked = 0;
	LeaveCriticalSection(&cw_lock);
	return asked;
}

/*
 * Peeks at the keys before a cooked read (see the top of the file).
 * Returns CW_M_KEY with *key, CW_M_WOKE, CW_M_END, or 0 for a cooked read.
 */
static int
cw_peek(const struct cw_req *rq, wchar_t *key, int *flags)
{
	INPUT_RECORD	 r;
	HANDLE		 h[2];
	DWORD		 got, w, timeout;
	long long	 until = clock_mono_ms() + rq->swallow_ms, left = 0;
	int		 swallowing = rq->swallow_ms > 0, keys = rq->keys[0] != 0;
	WCHAR		 ch;

	h[0] = cw_in;
	h[1] = cw_wake_ev;
	for (;;) {
		if (cw_woken())
			return CW_M_WOKE;
		if (swallowing && (left = until - clock_mono_ms()) <= 0) {
			swallowing = 0;
			*flags |= CW_F_KEYSEEN;
		}
		if (!swallowing && !keys)
			return 0;
		timeout = swallowing ? (DWORD)left : INFINITE;
		w = WaitForMultipleObjects(2, h, FALSE, timeout);
		if (w == WAIT_TIMEOUT || w == WAIT_OBJECT_0 + 1)
			continue;
		if (w != WAIT_OBJECT_0 || !PeekConsoleInputW(cw_in, &r, 1, &got))
			return CW_M_END;
		if (got == 0)
			continue;
		if (r.EventType != KEY_EVENT || !r.Event.KeyEvent.bKeyDown) {
			cw_consume();	/* a release, the mouse, the focus */
			continue;
		}
		ch = r.Event.KeyEvent.uChar.UnicodeChar;
		if (ch == 0 && cw_modifier(r.Event.KeyEvent.wVirtualKeyCode)) {
			cw_consume();
			continue;
		}
		if (swallowing) {
			swallowing = 0;
			*flags |= CW_F_KEYSEEN;
			if (ch == '\r' || ch == '\n') {
				cw_consume();	/* the Enter of "a Enter" */
				continue;
			}
		}
		if (keys && ch != 0 && wcschr(rq->keys, ch) != NULL) {
			cw_consume();
			*key = ch;
			return CW_M_KEY;
		}
		return 0;	/* anything else is typed into the line */
	}
}

/* Finds a wake-up character in w[0..n): its index, or -1. */
static long
cw_find_ctl(const wchar_t *w, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (w[i] == CW_WAKE || w[i] == CW_CTRL_D || w[i] == CW_CTRL_Z)
			return (long)i;
	}
	return -1;
}

/*
 * A cooked read, starting from rq's initial characters, to the end of
 * the line or a wake-up character; a line longer than one read takes
 * several. Answers what it got.
 */
static void
cw_cooked(const struct cw_req *rq, int flags)
{
	CONSOLE_READCONSOLE_CONTROL	 crc;
	wchar_t				*buf, ctl;
	size_t				 len = rq->ninitial, cap, lost = 0, keep;
	long				 at;
	long long			 start = clock_mono_ms();
	DWORD				 n, err;
	BOOL				 ok;
	int				 first = 1, paste;

	EnterCriticalSection(&cw_lock);
	if (cw_wake_asked) {
		cw_wake_asked = 0;
		cw_phase = CW_IDLE;
		LeaveCriticalSection(&cw_lock);
		cw_answer(CW_M_WOKE, flags, rq->ninitial, 0, rq->initial,
		    rq->ninitial);
		return;
	}
	cw_phase = CW_COOKED;
	LeaveCriticalSection(&cw_lock);

	cap = len + CW_READ_CHUNK;
	buf = xreallocarray(NULL, cap, sizeof *buf);
	if (len > 0)
		memcpy(buf, rq->initial, len * sizeof *buf);
	for (;;) {
		memset(&crc, 0, sizeof crc);
		crc.nLength = sizeof crc;
		crc.nInitialChars = first ? (ULONG)len : 0;
		crc.dwCtrlWakeupMask = (1UL << CW_WAKE) | (1UL << CW_CTRL_D) |
		    (1UL << CW_CTRL_Z);
		keep = first ? 0 : len;		/* what earlier reads gave */
		n = 0;
		ok = ReadConsoleW(cw_in, buf + keep, (DWORD)(cap - keep), &n,
		    &crc);
		err = ok ? 0 : GetLastError();
		first = 0;
		if (!ok || n == 0)
			break;
		len = keep + n;
		if (cw_find_ctl(buf, len) >= 0 || buf[len - 1] == '\n' ||
		    len < cap)
			break;
		/* The read was full: the line goes on beyond it. */
		if (len + CW_READ_CHUNK > CW_LINE_MAX) {
			lost += len;
			len = 0;
		}
		cap = len + CW_READ_CHUNK;
		buf = xreallocarray(buf, cap, sizeof *buf);
	}
	EnterCriticalSection(&cw_lock);
	cw_phase = CW_IDLE;
	cw_wake_asked = 0;
	LeaveCriticalSection(&cw_lock);

	if (!ok || n == 0) {
		/* Ctrl-C (Windows ends the read), or a console that went away. */
		if (ok || err == ERROR_OPERATION_ABORTED)
			cw_answer(CW_M_ABORT, flags, 0, 0, NULL, 0);
		else
			cw_answer(CW_M_END, flags, 0, 0, NULL, 0);
		free(buf);
		return;
	}
	if ((at = cw_find_ctl(buf, len)) >= 0) {
		ctl = buf[at];
		memmove(buf + at, buf + at + 1, (len - (size_t)at - 1) *
		    sizeof *buf);
		len--;
		while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == '\n'))
			len--;
		if (ctl != CW_WAKE && len == 0)
			cw_answer(CW_M_EOF, flags, 0, 0, NULL, 0);
		else	/* asked for, or a stray one: the loop draws it again */
			cw_answer(CW_M_WOKE, flags, (size_t)at, 0, buf, len);
		free(buf);
		return;
	}
	while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == '\n'))
		len--;
	if (lost > 0) {
		lost += len;
		len = 0;
	}
	paste = cw_input_waits(CW_PASTE_GAP_MS) || (cw_prev_paste &&
	    clock_mono_ms() - start < CW_PASTE_READ_MS);
	cw_prev_paste = paste;
	cw_answer(CW_M_LINE, flags | (paste ? CW_F_PASTE : 0), 0, lost, buf,
	    len);
	free(buf);
}

/* The reader of the line editor: one answer per request. */
static unsigned __stdcall
cw_edit_main(void *arg)
{
	struct cw_req	rq;
	wchar_t		key;
	int		flags, r, dead = 0;

	(void)arg;
	for (;;) {
		if (WaitForSingleObject(cw_req_ev, INFINITE) != WAIT_OBJECT_0)
			break;
		EnterCriticalSection(&cw_lock);
		rq = cw_rq;
		cw_rq.initial = NULL;
		cw_phase = CW_PEEK;
		LeaveCriticalSection(&cw_lock);
		flags = 0;
		r = 0;
		if (dead)
			r = CW_M_END;
		else if (rq.keys[0] != 0 || rq.swallow_ms > 0)
			r = cw_peek(&rq, &key, &flags);
		if (r == CW_M_KEY)
			cw_answer(CW_M_KEY, flags, 0, 0, &key, 1);
		else if (r == CW_M_WOKE)
			cw_answer(CW_M_WOKE, flags, rq.ninitial, 0, rq.initial,
			    rq.ninitial);
		else if (r == CW_M_END) {
			dead = 1;
			cw_answer(CW_M_END, flags, 0, 0, NULL, 0);
		} else
			cw_cooked(&rq, flags);
		EnterCriticalSection(&cw_lock);
		cw_phase = CW_IDLE;
		LeaveCriticalSection(&cw_lock);
		free(rq.initial);
	}
	return 0;
}

/*
 * The console read as plain lines (its output goes elsewhere): each line
 * with a newline; Ctrl-D or Ctrl-Z ends the input (with what was typed
 * before it, as a terminal's end of file does).
 */
static unsigned __stdcall
cw_lines_main(void *arg)
{
	CONSOLE_READCONSOLE_CONTROL	 crc;
	wchar_t				 buf[CW_READ_CHUNK];
	char				*s;
	size_t				 len;
	long				 at;
	DWORD				 n;

	(void)arg;
	for (;;) {
		memset(&crc, 0, sizeof crc);
		crc.nLength = sizeof crc;
		crc.dwCtrlWakeupMask = (1UL << CW_CTRL_D) | (1UL << CW_CTRL_Z);
		if (!ReadConsoleW(cw_in, buf, CW_READ_CHUNK, &n, &crc)) {
			if (GetLastError() == ERROR_OPERATION_ABORTED)
				continue;	/* Ctrl-C: the signal says it */
			break;
		}
		if (n == 0)
			continue;
		at = cw_find_ctl(buf, n);
		s = cw_utf8(buf, at >= 0 ? (size_t)at : n, &len);
		/* CR LF as the console ends a line: LF. */
		if (at < 0 && len >= 2 && s[len - 2] == '\r') {
			s[len - 2] = '\n';
			len--;
		}
		if (cw_send_all(s, len) != 0 || at >= 0) {
			free(s);
			break;
		}
		free(s);
	}
	shutdown(cw_pair[1], SD_SEND);
	return 0;
}

/* Standard input that is no console, to the socket as it comes. */
static unsigned __stdcall
cw_pump_main(void *arg)
{
	HANDLE	h = arg;
	char	buf[16384];
	DWORD	n;

	while (ReadFile(h, buf, sizeof buf, &n, NULL) && n > 0) {
		if (cw_send_all(buf, n) != 0)
			break;
	}
	shutdown(cw_pair[1], SD_SEND);
	return 0;
}

/* Starts reading standard input on a thread (see the top of the file). */
int
console_input_fd(char **cause)
{
	unsigned	(__stdcall *fn)(void *) = cw_pump_main;
	HANDLE		 in = GetStdHandle(STD_INPUT_HANDLE);
	uintptr_t	 t;
	DWORD		 mode;

	if (cw_pair[0] != INVALID_SOCKET)
		return (int)cw_pair[0];
	if (transport_win_socketpair(cw_pair) != 0) {
		*cause = xasprintf("socket pair: %s", strerror(errno));
		return -1;
	}
	InitializeCriticalSection(&cw_lock);
	if (in != NULL && in != INVALID_HANDLE_VALUE && GetConsoleMode(in, &mode)) {
		/* Our own handle, for writing the wake-up into it too. */
		cw_in = CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE,
		    FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING, 0,
		    NULL);
		if (cw_in == INVALID_HANDLE_VALUE)
			cw_in = in;
		if (console_is_terminal()) {
			fn = cw_edit_main;
			cw_req_ev = CreateEventW(NULL, FALSE, FALSE, NULL);
			cw_wake_ev = CreateEventW(NULL, FALSE, FALSE, NULL);
			if (cw_req_ev == NULL || cw_wake_ev == NULL) {
				*cause = xstrdup("cannot make an event");
				return -1;
			}
		} else {
			fn = cw_lines_main;
			console_win_input_mode(1);
		}
	}
	t = _beginthreadex(NULL, CW_THREAD_STACK, fn, in,
	    STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
	if (t == 0) {
		*cause = xstrdup("cannot start a thread");
		return -1;
	}
	CloseHandle((HANDLE)t);
	return (int)cw_pair[0];
}

/* Reads what the thread sent. */
ssize_t
console_input_read(void *buf, size_t len)
{
	return transport_read((int)cw_pair[0], buf, len);
}

/* Reads exactly len bytes of an answer (it is on its way). */
static int
cw_recv_all(void *buf, size_t len)
{
	char	*p = buf;
	int	 n;

	while (len > 0) {
		n = recv(cw_pair[0], p, len > INT_MAX ? INT_MAX : (int)len, 0);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Reads the reader's answer, waiting up to ms. Returns 1 with *m and
 * *text (new), 0 if none came in time, -1 if the reader is gone.
 */
int
console_win_recv(struct cw_msg *m, char **text, int ms)
{
	struct pollfd	pfd;
	int		r;

	pfd.fd = cw_pair[0];
	pfd.events = POLLIN;
	pfd.revents = 0;
	if ((r = transport_poll(&pfd, 1, ms)) == 0)
		return 0;
	if (r < 0 || cw_recv_all(m, sizeof *m) != 0 || m->len > 8 *
	    (size_t)CW_LINE_MAX)
		return -1;
	*text = xmalloc(m->len + 1);
	if (cw_recv_all(*text, m->len) != 0) {
		free(*text);
		return -1;
	}
	(*text)[m->len] = '\0';
	return 1;
}

/* Asks the reader for one read (see console-win.h). */
void
console_win_request(wchar_t *initial, size_t n, const wchar_t *keys,
    DWORD swallow_ms)
{
	EnterCriticalSection(&cw_lock);
	free(cw_rq.initial);
	cw_rq.initial = initial;
	cw_rq.ninitial = n;
	wcsncpy(cw_rq.keys, keys, CW_KEYS_MAX);
	cw_rq.keys[CW_KEYS_MAX] = 0;
	cw_rq.swallow_ms = swallow_ms;
	cw_wake_asked = 0;
	LeaveCriticalSection(&cw_lock);
	SetEvent(cw_req_ev);
}

/* Wakes a pending read: CW_WAKE into a cooked one, the event for a peek. */
void
console_win_wake(void)
{
	INPUT_RECORD	r;
	DWORD		n;

	memset(&r, 0, sizeof r);
	r.EventType = KEY_EVENT;
	r.Event.KeyEvent.bKeyDown = TRUE;
	r.Event.KeyEvent.wRepeatCount = 1;
	r.Event.KeyEvent.uChar.UnicodeChar = CW_WAKE;
	EnterCriticalSection(&cw_lock);
	cw_wake_asked = 1;
	if (cw_phase == CW_COOKED)
		(void)WriteConsoleInputW(cw_in, &r, 1, &n);
	else if (cw_phase == CW_PEEK)
		SetEvent(cw_wake_ev);
	LeaveCriticalSection(&cw_lock);
}

/* The wake asked for is answered (or no longer wanted). */
void
console_win_wake_done(void)
{
	EnterCriticalSection(&cw_lock);
	cw_wake_asked = 0;
	LeaveCriticalSection(&cw_lock);
}
