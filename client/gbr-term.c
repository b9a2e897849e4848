/*
 * The REPL's terminal, as gbr uses it: the prompt (what it says), output
 * written above it, the lines read (from a terminal or plain stdin),
 * Ctrl-C, and running a child with the terminal: the person's editor, the
 * pager. How a system edits a line, draws and runs a program is
 * platform/console.h's; this file says what the keys and lines mean.
 *
 * Keys: Enter sends; Alt-Enter and Ctrl-J end a line without sending it
 * (gbr-input.c holds such lines); Ctrl-C cancels the running turn, else
 * clears the line (and the lines held with it), and twice in a row
 * leaves; Ctrl-D on an empty line detaches and leaves (the session keeps
 * running); closing the terminal (SIGHUP) detaches cleanly.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "console.h"
#include "gbr-int.h"
#include "paths.h"
#include "render.h"
#include "transport.h"
#include "xmalloc.h"

/* The terminal's width. */
int
gbr_cols(void)
{
	int	cols, rows;

	if (console_size(&cols, &rows) == 0 && cols > 0)
		return cols;
	return 80;
}

/* Diff lines shown at once: GBR_DIFF_LINES, fewer if the header would scroll away. */
size_t
gbr_diff_lines(void)
{
	int	cols, rows;

	if (G.tty && console_size(&cols, &rows) == 0 && rows > 0) {
		if (rows < 22)
			return 10;
		if ((size_t)rows - 12 < GBR_DIFF_LINES)
			return (size_t)rows - 12;
	}
	return GBR_DIFF_LINES;
}

/*
 * The prompt: the session, and a spinner with the elapsed time during a
 * turn; or the question about an approval.
 */
static const char *
gbr_prompt(void *arg)
{
	static const char	spin[] = "|/-\\";
	const json_t		*a;
	long long		ms;
	size_t			n = json_array_size(G.appr);
	char			more[32];
	int			i;

	(void)arg;
	if (G.ask == ASK_DECISION) {
		more[0] = '\0';
		if (n > 1)
			snprintf(more, sizeof more, "(%zu more) ", n - 1);
		i = gbr_appr_find(G.ask_id);
		a = i >= 0 ? json_array_get(G.appr, (size_t)i) : NULL;
		snprintf(G.prompt, sizeof G.prompt, "%s[a]pprove / [d]eny%s%s? ",
		    more, a == NULL || gbr_appr_editable(a) ? " / [e]dit" : "",
		    a == NULL || gbr_appr_grantable(a) ? " / [s]ession-approve" :
		    "");
	} else if (G.ask == ASK_REASON)
		snprintf(G.prompt, sizeof G.prompt,
		    "reason for denying (Enter for none)> ");
	else if (G.ask == ASK_REWIND)
		gbr_rewind_prompt(G.prompt, sizeof G.prompt);
	else if (G.block != NULL)
		/* A line of a block: "...>" under the label's "gbr:ID>". */
		snprintf(G.prompt, sizeof G.prompt, "%*s> ", (int)strlen(G.label),
		    "...");
	else if (G.running) {
		ms = gbr_now_ms() - G.turn_start_ms;
		if (ms < 0)
			ms = 0;
		snprintf(G.prompt, sizeof G.prompt, "%s %c %lld.%llds> ", G.label,
		    spin[G.spin % 4], ms / 1000, ms / 100 % 10);
	} else
		snprintf(G.prompt, sizeof G.prompt, "%s> ", G.label);
	return G.prompt;
}

/* Clears the prompt area and returns the cursor to the end of an unfinished line. */
static void
gbr_out_begin(void)
{
	if (G.editing)
		console_out_begin(G.out_col);
}

/* Puts the prompt back under the output. */
static void
gbr_out_end(void)
{
	if (G.editing)
		console_out_end(G.out_col);
	console_flush();
}

/* Redraws the prompt (a new spinner frame, a new state). */
void
gbr_redraw(void)
{
	if (!G.editing || G.hangup)
		return;
	gbr_out_begin();
	gbr_out_end();
}

/* Counts the visible columns of text, skipping escape sequences. */
static void
gbr_track_col(const char *buf, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++) {
		if (buf[i] == '\n') {
			G.out_col = 0;
		} else if (buf[i] == '\033') {
			/* CSI: ESC [ params final */
			if (i + 1 < len && buf[i + 1] == '[') {
				for (i += 2; i < len && (buf[i] < 0x40 || buf[i] > 0x7e); i++)
					;
			}
		} else if (((unsigned char)buf[i] & 0xc0) != 0x80)
			G.out_col++;
	}
}

/*
 * Writes output above the prompt (or keeps it while an editor runs, or
 * gathers it for the pager).
 */
void
gbr_write(const char *buf, size_t len)
{
	if (len == 0 || G.hangup)
		return;
	if (G.page != NULL) {
		/* Gathered for the pager (gbr_page_end decides). */
		fwrite(buf, 1, len, G.page);
		return;
	}
	if (G.in_editor) {
		if (len > GBR_DEFER_MAX - G.defer_len) {
			G.defer_lost += len;
			return;
		}
		G.defer = xreallocarray(G.defer, G.defer_len + len, 1);
		memcpy(G.defer + G.defer_len, buf, len);
		G.defer_len += len;
		gbr_track_col(buf, len);
		return;
	}
	gbr_out_begin();
	console_write(buf, len);
	gbr_track_col(buf, len);
	gbr_out_end();
}

/* printf above the prompt. */
void
gbr_say(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	if (G.rd.open_line) {
		G.rd.open_line = 0;
		gbr_write("\n", 1);
	}
	G.rd.tool_open = 0;
	gbr_write(s, strlen(s));
	free(s);
}

/* Runs a renderer into a buffer and writes it above the prompt. */
void
gbr_render(const json_t *v, int message)
{
	char	*buf = NULL;
	size_t	 len = 0;
	FILE	*f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return;
	G.rd.out = f;
	/* A tool result gets its number for /show. */
	G.rd.tool_tag = gbr_show_tag(v, message);
	if (message)
		render_message(&G.rd, v);
	else
		render_event(&G.rd, v);
	G.rd.tool_tag = 0;
	fclose(f);
	G.rd.out = stdout;
	gbr_write(buf, len);
	free(buf);
}

/* Starts capturing the renderer's output; NULL if memory is short. */
FILE *
gbr_capture(struct gbr_capture *c)
{
	c->buf = NULL;
	c->len = 0;
	if ((c->f = open_memstream(&c->buf, &c->len)) != NULL)
		G.rd.out = c->f;
	return c->f;
}

/* Ends a capture and writes what was rendered above the prompt. */
void
gbr_capture_end(struct gbr_capture *c)
{
	fclose(c->f);
	G.rd.out = stdout;
	gbr_write(c->buf, c->len);
	free(c->buf);
}

/*
 * Replaces the line being typed with text (NULL: empty), redrawing the
 * prompt, which may have changed too; *old (if asked) gets the line that
 * was there, or NULL if it was empty.
 */
void
gbr_set_line(const char *text, char **old)
{
	if (old != NULL)
		*old = NULL;
	if (!G.editing || G.hangup)
		return;
	gbr_out_begin();
	console_set_line(text, old);
	gbr_out_end();
}

/*
 * transport_poll over the descriptors that are not -1 (poll(2) skips
 * those, WSAPoll must not see them); each revents as poll(2) sets it.
 */
int
gbr_poll(struct pollfd *pfd, unsigned n, int timeout)
{
	struct pollfd	set[8];
	unsigned	i, m = 0;
	int		r;

	/* (int): a Windows SOCKET is unsigned, and fits (transport.h). */
	for (i = 0; i < n && m < sizeof set / sizeof set[0]; i++) {
		pfd[i].revents = 0;
		if ((int)pfd[i].fd != -1)
			set[m++] = pfd[i];
	}
	r = transport_poll(set, m, timeout);
	for (i = 0, m = 0; r > 0 && i < n && m < sizeof set / sizeof set[0];
	    i++) {
		if ((int)pfd[i].fd != -1)
			pfd[i].revents = set[m++].revents;
	}
	return r;
}

/*
 * Runs a person's program with the terminal (what: CONSOLE_RUN_EDITOR on
 * the file arg, or CONSOLE_RUN_PAGER reading in_fd). The socket is read
 * meanwhile and output held until it ends; name says what it is in
 * messages. Returns its exit status (128 + N for signal N), or -1 if it
 * could not be run.
 */
int
gbr_run_child(int what, const char *prog, const char *arg, int in_fd,
    const char *name)
{
	struct console_child	*child;
	struct pollfd		 pfd[2];
	char			*cause;
	int			 status = -1;

	gbr_paste_mode(0);
	if (console_child_start(what, prog, arg, in_fd, &child, &cause) != 0) {
		gbr_paste_mode(1);
		gbr_say("! cannot run the %s: %s\n", name, cause);
		free(cause);
		return -1;
	}
	G.in_editor = 1;
	while (!console_child_done(child, &status)) {
		pfd[0].fd = G.cl != NULL && !G.need_reconnect ? client_fd(G.cl) : -1;
		pfd[0].events = POLLIN;
		pfd[1].fd = G.wake_fd;
		pfd[1].events = POLLIN;
		if (gbr_poll(pfd, 2, 100) > 0) {
			if (pfd[1].revents & POLLIN)
				console_catch_drain();
			if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
				gbr_drain();
		}
		gbr_got_int = 0;	/* Ctrl-C was the child's */
	}
	G.in_editor = 0;
	gbr_paste_mode(1);
	gbr_got_winch = 1;		/* the size may have changed meanwhile */
	if (G.defer_len > 0)
		gbr_write(G.defer, G.defer_len);
	if (G.defer_lost > 0)
		gbr_say("%s* %zu bytes of output were left out while the %s "
		    "ran (/history shows the messages)%s\n",
		    render_color(&G.rd, "dim"), G.defer_lost, name,
		    render_color(&G.rd, "reset"));
	free(G.defer);
	G.defer = NULL;
	G.defer_len = G.defer_lost = 0;
	return status;
}

/*
 * Runs $VISUAL, else $EDITOR, else the system's editor on file, with the
 * terminal. Returns the editor's exit status, or -1.
 */
int
gbr_run_editor(const char *file)
{
	const char	*ed = getenv("VISUAL");

	if (ed == NULL || *ed == '\0')
		ed = getenv("EDITOR");
	if (ed == NULL || *ed == '\0')
		ed = console_default_editor();
	return gbr_run_child(CONSOLE_RUN_EDITOR, ed, file, -1, "editor");
}

/* A file name suffix for the editor (".ini" for x.ini), or "". */
const char *
gbr_edit_suffix(const char *path, char *buf, size_t size)
{
	const char	*base, *dot;
	size_t		 i;

	buf[0] = '\0';
	if (path == NULL)
		return buf;
	base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
	if ((dot = strrchr(base, '.')) == NULL || dot == base ||
	    strlen(dot) < 2 || strlen(dot) >= size || strlen(dot) > 12)
		return buf;
	for (i = 1; dot[i] != '\0'; i++) {
		if (!((dot[i] >= 'a' && dot[i] <= 'z') || (dot[i] >= 'A' &&
		    dot[i] <= 'Z') || (dot[i] >= '0' && dot[i] <= '9')))
			return buf;
	}
	snprintf(buf, size, "%s", dot);
	return buf;
}

/* The terminal is readable: a key, maybe the end of a line. */
void
gbr_stdin_tty(void)
{
	struct console_line	 in;
	char			*line, *text, *left = NULL;
	int			 block, r;

	r = console_edit_read(&in);
	if (in.lost > 0)
		gbr_say("! a paste of over %d bytes was left out (%zu bytes too "
		    "many): /run or a file is the way for that much\n",
		    GBR_LINE_MAX, in.lost);
	if (r == CONSOLE_EOF) {		/* Ctrl-D on an empty line */
		if (G.block != NULL)
			return;		/* not with lines held: Ctrl-C drops them */
		console_edit_off();
		G.editing = 0;
		console_write("\n", 1);
		G.leave = 1;
		return;
	}
	if (r != CONSOLE_LINE)
		return;
	line = in.text;
	block = in.block;
	free(G.paste_rest);
	G.paste_rest = in.rest;
	console_edit_off();
	G.editing = 0;
	G.out_col = 0;
	if (block)
		left = gbr_block_line(line);
	else if (G.ask == ASK_NONE && (text = gbr_block_take(line)) != NULL) {
		gbr_message_text(text);
		free(text);
	} else {
		/* Answers to a question are not worth recalling. */
		if (line[strspn(line, " \t")] != '\0' && (G.ask == ASK_NONE ||
		    line[strspn(line, " \t")] == '/'))
			console_history_add(line);
		gbr_line(line);
	}
	free(line);
	if (!G.leave) {
		console_edit_on();
		G.editing = 1;
		gbr_ask_update();	/* gives back a line put aside */
		if (left != NULL)
			gbr_set_line(left, NULL);
	}
	free(left);
}

/* stdin (not a terminal) is readable: complete lines are handled. */
void
gbr_stdin_plain(void)
{
	ssize_t	 n;
	char	*nl;
	size_t	 used;

	if (G.ibuf == NULL)
		G.ibuf = xmalloc(GBR_LINE_MAX + 1);
	n = console_input_read(G.ibuf + G.ilen, GBR_LINE_MAX - G.ilen);
	if (n < 0) {
		if (errno != EINTR && errno != EAGAIN)
			G.ieof = 1;
		return;
	}
	if (n == 0) {
		G.ieof = 1;
		if (G.ilen > 0 && !G.idiscard) {
			G.ibuf[G.ilen] = '\0';
			gbr_line(G.ibuf);
		}
		G.ilen = 0;
		return;
	}
	G.ilen += (size_t)n;
	while ((nl = memchr(G.ibuf, '\n', G.ilen)) != NULL) {
		*nl = '\0';
		used = (size_t)(nl - G.ibuf) + 1;
		if (!G.idiscard && strlen(G.ibuf) == used - 1)
			gbr_line(G.ibuf);
		G.idiscard = 0;
		memmove(G.ibuf, nl + 1, G.ilen - used);
		G.ilen -= used;
	}
	if (G.ilen == GBR_LINE_MAX) {
		gbr_say("! line over %d bytes ignored\n", GBR_LINE_MAX);
		G.ilen = 0;
		G.idiscard = 1;
	}
}

/* Ctrl-C: cancel the turn, or clear the line, or (twice) leave. */
void
gbr_interrupt(void)
{
	long long	 now = gbr_now_ms();
	json_t		*res;
	int		 n;

	if (G.block != NULL && G.ask == ASK_NONE) {
		/* Like a shell: the lines held go with the half-typed one. */
		n = gbr_block_clear();
		gbr_say("^C (%d line%s not sent)\n", n, n == 1 ? "" : "s");
		gbr_set_line(NULL, NULL);
		G.last_int_ms = 0;
		return;
	}
	if (G.ask == ASK_REWIND) {
		gbr_rewind_answer("n");
		gbr_set_line(NULL, NULL);
		G.last_int_ms = 0;
		return;
	}
	if (G.ask == ASK_REASON) {
		/* Back to the question: nothing was denied. */
		G.ask = ASK_DECISION;
		gbr_set_line(NULL, NULL);
		G.last_int_ms = 0;
		return;
	}
	if (G.running) {
		gbr_queue_clear();
		gbr_say("%s^C cancelling turn %lld%s\n", render_color(&G.rd, "dim"),
		    G.turn, render_color(&G.rd, "reset"));
		res = gbr_call("session.cancel", json_pack("{s:s}", "session",
		    G.session), NULL, 0);
		json_decref(res);
		G.last_int_ms = 0;
		return;
	}
	if (!G.tty) {
		G.leave = 1;
		return;
	}
	if (G.editing && console_drop_line()) {
		/* Like a shell: the half-typed line was dropped. */
		G.last_int_ms = 0;
		return;
	}
	if (now - G.last_int_ms < GBR_DOUBLE_INT_MS) {
		G.leave = 1;
		return;
	}
	G.last_int_ms = now;
	gbr_say("(Ctrl-C again to leave; the session keeps running. Ctrl-D or "
	    "/detach also leave)\n");
}

/* What the prompt asks, for the line editor. */
static int
gbr_asking(void *arg)
{
	(void)arg;
	if (G.ask == ASK_DECISION)
		return CONSOLE_ASK_KEYS;
	return G.ask == ASK_NONE ? CONSOLE_ASK_NONE : CONSOLE_ASK_LINE;
}

/* Sets up the line editor and the input history file. */
void
gbr_editor(void)
{
	/*
	 * At a question, a, d (then the reason) and s answer it at once,
	 * without Enter. Not e: an editor that opened on one stray key
	 * would take the Enter that may follow it.
	 */
	static const struct console_ops	 ops = {
		gbr_prompt, gbr_asking, "adsADS", NULL
	};
	char				*state;

	state = paths_state_dir(NULL);
	if (state != NULL && access(state, W_OK) == 0)
		G.histfile = xasprintf("%s/gbr_history", state);
	free(state);
	console_edit_open(&ops, G.histfile);
}
