/*
 * The REPL's terminal: the prompt, output written above it, libedit, the
 * lines read (from a terminal or plain stdin), Ctrl-C, and running a
 * child with the terminal: the person's editor, the pager.
 *
 * libedit runs in unbuffered mode (the way its own readline callback
 * interface does): el_gets is called only when stdin is readable and
 * handles one key, so the loop never blocks in the editor. Output that
 * arrives while a prompt is on screen is printed above it: the prompt
 * area is cleared, the text written, and libedit redraws the prompt and
 * the half-typed line. Streamed text that ends mid-line stays on its own
 * line above the prompt and later text continues it.
 *
 * Keys: Enter sends; Alt-Enter and Ctrl-J end a line without sending it
 * (gbr-input.c); Ctrl-C cancels the running turn, else clears the line
 * (and the lines held with it), and twice in a row leaves; Ctrl-D on an empty line detaches and
 * leaves (the session keeps running); closing the terminal (SIGHUP)
 * detaches cleanly.
 */
#include "gbr-config.h"

#include <sys/ioctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "client.h"
#include "gbr-int.h"
#include "paths.h"
#include "render.h"
#include "xmalloc.h"

extern char **environ;

/* The terminal's width. */
static int
gbr_cols(void)
{
	struct winsize	ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

/* Diff lines shown at once: GBR_DIFF_LINES, fewer if the header would scroll away. */
size_t
gbr_diff_lines(void)
{
	struct winsize	ws;

	if (G.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
		if (ws.ws_row < 22)
			return 10;
		if ((size_t)ws.ws_row - 12 < GBR_DIFF_LINES)
			return (size_t)ws.ws_row - 12;
	}
	return GBR_DIFF_LINES;
}

/*
 * libedit prompt: the session, and a spinner with the elapsed time during
 * a turn; or the question about an approval.
 */
static char *
gbr_prompt(EditLine *el)
{
	static const char	spin[] = "|/-\\";
	const json_t		*a;
	long long		ms;
	size_t			n = json_array_size(G.appr);
	char			more[32];
	int			i;

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
	const LineInfo	*li;
	int		 cols = gbr_cols(), up;

	if (!G.editing)
		return;
	li = el_line(G.el);
	up = (int)(strlen(G.prompt) + (size_t)(li->cursor - li->buffer)) / cols;
	if (up > 0)
		printf("\033[%dA", up);
	printf("\r\033[J");
	if (G.out_col > 0)
		printf("\033[A\033[%dG", G.out_col % cols + 1);
}

/* Puts the prompt back under the output. */
static void
gbr_out_end(void)
{
	if (G.editing) {
		if (G.out_col > 0)
			fputc('\n', stdout);
		fflush(stdout);
		el_set(G.el, EL_REFRESH);
	}
	fflush(stdout);
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
	fwrite(buf, 1, len, stdout);
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
	const LineInfo	*li;
	const LineInfoW	*lw;
	int		 n;

	if (old != NULL)
		*old = NULL;
	if (!G.editing || G.hangup)
		return;
	gbr_out_begin();
	li = el_line(G.el);
	if (old != NULL && li->lastchar > li->buffer)
		*old = xstrndup(li->buffer, (size_t)(li->lastchar - li->buffer));
	lw = el_wline(G.el);
	n = (int)(lw->lastchar - lw->buffer);
	el_cursor(G.el, n);
	el_deletestr(G.el, n);
	if (text != NULL)
		el_insertstr(G.el, text);
	gbr_out_end();
}

/*
 * Runs "sh -c cmd sh arg" with the terminal, its stdin from in_fd unless
 * that is -1, for the editor or the pager. The socket is read meanwhile
 * and output held until it ends; what names the child in messages.
 * Returns its exit status (128 + N for signal N), or -1 if it could not
 * be run.
 */
int
gbr_run_child(const char *cmd, const char *arg, int in_fd, const char *what)
{
	posix_spawnattr_t		 attr;
	posix_spawn_file_actions_t	 fa;
	sigset_t			 def;
	struct pollfd			 pfd[2];
	char				 drain[64];
	char				*argv[6];
	pid_t				 pid, w;
	int				 status = -1, r;

	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = (char *)cmd;
	argv[3] = (char *)"sh";
	argv[4] = (char *)arg;
	argv[5] = NULL;
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_init(&fa);
	if (in_fd != -1)
		posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
	gbr_paste_mode(0);
	fflush(stdout);
	r = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (r != 0) {
		gbr_paste_mode(1);
		gbr_say("! cannot run the %s: %s\n", what, strerror(r));
		return -1;
	}
	G.in_editor = 1;
	for (;;) {
		if ((w = waitpid(pid, &status, WNOHANG)) == pid)
			break;
		if (w == -1 && errno != EINTR) {
			status = -1;
			break;
		}
		pfd[0].fd = G.cl != NULL && !G.need_reconnect ? client_fd(G.cl) : -1;
		pfd[0].events = POLLIN;
		pfd[1].fd = gbr_sigpipe[0];
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, 100) > 0) {
			if (pfd[1].revents & POLLIN)
				while (read(gbr_sigpipe[0], drain, sizeof drain) > 0)
					;
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
		    render_color(&G.rd, "dim"), G.defer_lost, what,
		    render_color(&G.rd, "reset"));
	free(G.defer);
	G.defer = NULL;
	G.defer_len = G.defer_lost = 0;
	if (status != -1 && WIFSIGNALED(status))
		return 128 + WTERMSIG(status);	/* as a shell says it */
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/*
 * Runs $VISUAL, else $EDITOR, else vi on file, with the terminal.
 * Returns the editor's exit status, or -1.
 */
int
gbr_run_editor(const char *file)
{
	const char	*ed = getenv("VISUAL");
	char		*cmd;
	int		 status;

	if (ed == NULL || *ed == '\0')
		ed = getenv("EDITOR");
	if (ed == NULL || *ed == '\0')
		ed = "vi";
	/* As git does: the variable may hold arguments, so a shell reads it. */
	cmd = xasprintf("%s \"$1\"", ed);
	status = gbr_run_child(cmd, file, -1, "editor");
	free(cmd);
	return status;
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

/* The terminal is readable: one key for libedit. */
void
gbr_stdin_tty(void)
{
	HistEvent	 hev;
	const char	*buf;
	char		*line, *text, *left = NULL;
	int		 count = 0, block;

	if (gbr_key_enter_swallowed())
		return;
	buf = el_gets(G.el, &count);
	/* Input was pushed back into libedit: it is read now. */
	while (G.read_again) {
		G.read_again = 0;
		buf = el_gets(G.el, &count);
	}
	if (G.paste_lost > 0) {
		gbr_say("! a paste of over %d bytes was left out (%zu bytes too "
		    "many): /run or a file is the way for that much\n",
		    GBR_LINE_MAX, G.paste_lost);
		G.paste_lost = 0;
	}
	if (buf == NULL || count <= 0)
		return;
	if (count == 1 && buf[0] == 4) {	/* Ctrl-D on an empty line */
		if (G.block != NULL)
			return;		/* not with lines held: Ctrl-C drops them */
		el_set(G.el, EL_UNBUFFERED, 0);
		G.editing = 0;
		fputc('\n', stdout);
		G.leave = 1;
		return;
	}
	/* a, d, e, s at the question answer it at once: as if Enter followed. */
	if (gbr_answer_key(buf, count)) {
		el_push(G.el, "\r");
		buf = el_gets(G.el, &count);
		if (buf == NULL || count <= 0)
			return;
	}
	if (buf[count - 1] != '\n' && buf[count - 1] != '\r')
		return;
	line = xstrdup(buf);
	block = G.nl_key;
	G.nl_key = 0;
	el_set(G.el, EL_UNBUFFERED, 0);
	G.editing = 0;
	G.out_col = 0;
	line[strcspn(line, "\r\n")] = '\0';
	if (block)
		left = gbr_block_line(line);
	else if (G.ask == ASK_NONE && (text = gbr_block_take(line)) != NULL) {
		gbr_message_text(text);
		free(text);
	} else {
		/* Answers to a question are not worth recalling. */
		if (line[strspn(line, " \t")] != '\0' && (G.ask == ASK_NONE ||
		    line[strspn(line, " \t")] == '/'))
			history(G.hist, &hev, H_ENTER, line);
		gbr_line(line);
	}
	free(line);
	if (!G.leave) {
		el_set(G.el, EL_UNBUFFERED, 1);
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
	n = read(STDIN_FILENO, G.ibuf + G.ilen, GBR_LINE_MAX - G.ilen);
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
	const LineInfo	*li;
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
	li = el_line(G.el);
	if (G.editing && li->lastchar > li->buffer) {
		/* Like a shell: drop the half-typed line. */
		el_set(G.el, EL_UNBUFFERED, 0);
		printf("^C\n");
		el_set(G.el, EL_UNBUFFERED, 1);
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

static struct termios	gbr_tty_orig;

/* At exit: the terminal as the shell left it (el_end restores ours). */
static void
gbr_tty_restore(void)
{
	(void)tcsetattr(STDIN_FILENO, TCSANOW, &gbr_tty_orig);
}

/*
 * From the start, before the daemon answers: the terminal stops mapping
 * CR to NL, so that an Enter typed while gbr connects is still an Enter
 * when the editor reads it, not the Ctrl-J that ends a line unsent. The
 * shell's settings come back at exit.
 */
void
gbr_tty_early(void)
{
	struct termios	t;

	if (tcgetattr(STDIN_FILENO, &gbr_tty_orig) != 0)
		return;
	t = gbr_tty_orig;
	t.c_iflag &= ~(tcflag_t)(ICRNL | INLCR);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
		(void)atexit(gbr_tty_restore);
}

/* Sets up libedit and the input history file. */
void
gbr_editor(void)
{
	HistEvent	 hev;
	char		*state;

	setlocale(LC_CTYPE, "");
	G.hist = history_init();
	history(G.hist, &hev, H_SETSIZE, GBR_HISTORY_LINES);
	history(G.hist, &hev, H_SETUNIQUE, 1);
	state = paths_state_dir(NULL);
	if (state != NULL && access(state, W_OK) == 0) {
		G.histfile = xasprintf("%s/gbr_history", state);
		history(G.hist, &hev, H_LOAD, G.histfile);
	}
	free(state);
	G.el = el_init("gbr", stdin, stdout, stderr);
	el_set(G.el, EL_EDITOR, "emacs");
	el_set(G.el, EL_PROMPT, gbr_prompt);
	el_set(G.el, EL_HIST, history, G.hist);
	el_set(G.el, EL_SIGNAL, 0);
	gbr_input_keys(G.el);
	el_source(G.el, NULL);
}
