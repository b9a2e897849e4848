/*
 * gbr: the interactive client (the REPL). It starts gbrd when nobody
 * answers on the socket (under the start lock, so two terminals starting at
 * once end with one daemon), creates or re-attaches the session for a
 * folder, and then is a chat: lines are messages, "/" lines are commands,
 * and the session's events are printed as they come, from this terminal's
 * turns and from every other terminal attached to the same session.
 *
 * One poll(2) loop multiplexes the terminal, the daemon's socket and a
 * self-pipe for signals. libedit runs in unbuffered mode (the way its own
 * readline callback interface does): el_gets is called only when stdin is
 * readable and handles one key, so the loop never blocks in the editor.
 * Output that arrives while a prompt is on screen is printed above it: the
 * prompt area is cleared, the text written, and libedit redraws the prompt
 * and the half-typed line. Streamed text that ends mid-line stays on its
 * own line above the prompt and later text continues it.
 *
 * Without a terminal on stdin gbr reads plain lines (for scripts and
 * tests), prints events without a prompt, and at end of input waits for
 * the turn it started to end before it detaches.
 *
 * Approvals. The session's pending approvals (from approval.requested
 * events, and from approval.list on attach) are kept in arrival order. On
 * a terminal the oldest is shown (escaped, its diff coloured and bounded)
 * and the prompt turns into the question; the line the person was typing
 * is put aside and given back afterwards. The question is only a prompt:
 * the loop goes on reading events meanwhile, so streamed text and other
 * approvals keep coming, and when another terminal answers first the
 * approval.resolved event drops the question. "e" runs the editor on a
 * private temporary file; while it has the terminal the socket is still
 * read (a client that stops reading gets evicted) and what would have been
 * printed waits in a bounded buffer. Without a terminal approvals are
 * printed and /approve, /deny answer them.
 *
 * Keys: Enter sends; Ctrl-C cancels the running turn, else clears the
 * line, and twice in a row leaves; Ctrl-D on an empty line detaches and
 * leaves (the session keeps running); closing the terminal (SIGHUP)
 * detaches cleanly.
 */
#include "gbr-config.h"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <histedit.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "paths.h"
#include "render.h"
#include "xmalloc.h"

#define GBR_HISTORY_LINES	1000	/* lines kept in the editing history */
#define GBR_LINE_MAX		(1024 * 1024) /* a line read without a terminal */
#define GBR_SHOW_MESSAGES	20	/* history shown when attaching */
#define GBR_SPIN_MS		100	/* spinner frame */
#define GBR_CALL_MS		30000	/* longest wait for a reply */
#define GBR_RECONNECT_TRIES	20
#define GBR_DOUBLE_INT_MS	2000	/* two Ctrl-C within this leave */
#define GBR_APPROVALS_MAX	256	/* pending approvals kept here */
#define GBR_MINE_MAX		64	/* approvals answered here, remembered */
#define GBR_DIFF_LINES		40	/* diff lines shown before "... N more" */
#define GBR_EDIT_MAX		(16 * 1024 * 1024) /* a file read for an edit */
#define GBR_DEFER_MAX		(1024 * 1024) /* output kept while an editor runs */
#define GBR_LINE_DEFAULT	(1024 * 1024) /* the daemon's line limit, if unsaid */
#define GBR_TOOLS_MAX		16	/* /tool and /run calls waiting at once */
#define GBR_ARGV_MAX		4096	/* words of a /run command line */

extern char **environ;

/* What the prompt is asking. */
enum gbr_ask {
	ASK_NONE = 0,		/* nothing: lines are messages */
	ASK_DECISION,		/* [a]pprove / [d]eny / [e]dit / [s]ession */
	ASK_REASON,		/* the reason for a denial */
};

struct gbr {
	char		*socket;
	char		 dir[PATH_MAX];
	struct client	*cl;
	char		*epoch;
	char		*session;	/* id of the attached session */
	char		*label;		/* its name, or its id */
	char		*env;
	char		*workspace;	/* the session's folder (a real path) */
	long long	 last_seq;	/* last event seen */
	size_t		 max_line;	/* the longest request line gbrd takes */
	int		 tty;
	struct render	 rd;

	EditLine	*el;
	History		*hist;
	char		*histfile;
	int		 editing;	/* a prompt is on screen */
	int		 out_col;	/* column of an unfinished output line */
	char		 prompt[160];

	int		 running;
	long long	 turn;
	long long	 turn_start_ms;	/* wall clock */
	unsigned	 spin;
	long long	 sent_turn;	/* the last turn this gbr started */
	long long	 ended_turn;	/* the last turn seen ending */
	char		*my_rid;	/* request_id of the last message sent */

	int		 need_resync;
	int		 need_reconnect;
	int		 leave;
	int		 hangup;	/* the terminal is gone: write nothing */
	int		 exit_code;
	int		 tool_failed;	/* a /run or /tool failed: exit 4 */
	long long	 last_int_ms;

	char		*ibuf;		/* lines read without a terminal */
	size_t		 ilen;
	int		 ieof;
	int		 idiscard;	/* skipping the rest of an over-long line */

	json_t		*appr;		/* pending approvals, oldest first */
	json_t		*appr_mine;	/* ids answered from here: {id: true} */
	int		 appr_full;	/* said that GBR_APPROVALS_MAX was reached */
	int		 replaying;	/* attached, replay_complete not seen yet */
	char		*ask_id;	/* the approval the prompt asks about */
	enum gbr_ask	 ask;
	char		*saved_line;	/* the half-typed line, put aside */
	int		 in_editor;	/* an editor has the terminal */
	char		*defer;		/* output held while it does */
	size_t		 defer_len;
	size_t		 defer_lost;

	struct {
		long long	 id;	/* of the tool.call request */
		char		*what;	/* "/run ls" or "/tool NAME", escaped */
	}		 tools[GBR_TOOLS_MAX];	/* answers awaited */
	int		 ntools;
};

static struct gbr		 G;
static int			 gbr_sigpipe[2] = { -1, -1 };
static volatile sig_atomic_t	 gbr_got_int, gbr_got_hup, gbr_got_winch;

static void	gbr_event(const json_t *);
static void	gbr_tool_reply(const json_t *);
static int	gbr_appr_find(const char *);
static int	gbr_appr_editable(const json_t *);
static int	gbr_appr_grantable(const json_t *);
static void	gbr_appr_requested(const json_t *);
static void	gbr_appr_resolved(const json_t *);
static void	gbr_appr_announce(void);

/* Prints usage. */
static void
usage(FILE *f)
{
	fprintf(f,
"usage: gbr [-s NAME] [--list] [--socket PATH] [DIR]\n"
"\n"
"The gbr interactive client. Starts the daemon (gbrd) if it is not running,\n"
"then creates or re-attaches the session for DIR (default: the current folder)\n"
"and reads messages. Type /help for the commands.\n"
"\n"
"  -s, --session NAME  attach to the session with this name or id (with DIR,\n"
"                      create it there if it does not exist)\n"
"  -l, --list          list the sessions and exit\n"
"      --socket PATH   daemon socket (default: $GBR_SOCKET, else\n"
"                      $XDG_RUNTIME_DIR/gbr/gbrd.sock, else /tmp/gbr-$UID/gbrd.sock)\n"
"  -h, --help          this help\n"
"  -V, --version       print the version\n"
"\n"
"Keys: Enter sends, Ctrl-C cancels the running turn (twice: leave),\n"
"Ctrl-D detaches (the session keeps running in gbrd).\n"
"\n"
"A pending approval is shown with its diff and asked at the prompt:\n"
"[a]pprove / [d]eny / [e]dit ($VISUAL, else $EDITOR, else vi) /\n"
"[s]ession-approve. /approvals lists them.\n");
}

/* Wall-clock milliseconds. */
static long long
gbr_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Signal handler: note it and wake the loop. */
static void
gbr_signal(int sig)
{
	int	saved = errno;
	char	c = 0;

	if (sig == SIGINT)
		gbr_got_int = 1;
	else if (sig == SIGWINCH)
		gbr_got_winch = 1;
	else
		gbr_got_hup = 1;
	(void)!write(gbr_sigpipe[1], &c, 1);
	errno = saved;
}

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
static size_t
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
static void
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

/* Writes output above the prompt (or keeps it while an editor runs). */
static void
gbr_write(const char *buf, size_t len)
{
	if (len == 0 || G.hangup)
		return;
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
static void __attribute__((format(printf, 1, 2)))
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
	gbr_write(s, strlen(s));
	free(s);
}

/* Runs a renderer into a buffer and writes it above the prompt. */
static void
gbr_render(const json_t *v, int message)
{
	char	*buf = NULL;
	size_t	 len = 0;
	FILE	*f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return;
	G.rd.out = f;
	if (message)
		render_message(&G.rd, v);
	else
		render_event(&G.rd, v);
	fclose(f);
	G.rd.out = stdout;
	gbr_write(buf, len);
	free(buf);
}

/*
 * Event callback of client_call: events, and answers to /tool and /run,
 * read while waiting for another reply.
 */
static void
gbr_event_cb(void *arg, json_t *msg)
{
	if (json_object_get(msg, "method") != NULL)
		gbr_event(json_object_get(msg, "params"));
	else
		gbr_tool_reply(msg);
}

/* Handles one event of the attached session. */
static void
gbr_event(const json_t *p)
{
	const char	*type = json_string_value(json_object_get(p, "type"));
	const char	*sid = json_string_value(json_object_get(p, "session"));
	const char	*state, *rid;
	json_t		*m;
	long long	 seq = json_integer_value(json_object_get(p, "seq"));

	if (type == NULL)
		return;
	if (strcmp(type, "evicted") == 0) {
		gbr_render(p, 0);
		G.need_reconnect = 1;
		return;
	}
	if (sid == NULL || G.session == NULL || strcmp(sid, G.session) != 0)
		return;
	if (strcmp(type, "replay_complete") == 0) {
		if (seq > G.last_seq)
			G.last_seq = seq;
		G.replaying = 0;
		gbr_appr_announce();
		return;
	}
	if (strcmp(type, "resync_required") == 0) {
		gbr_say("%s* some events are gone; reloading the history%s\n",
		    render_color(&G.rd, "dim"), render_color(&G.rd, "reset"));
		G.need_resync = 1;
		return;
	}
	if (seq <= G.last_seq)
		return;		/* already seen */
	G.last_seq = seq;
	if (strcmp(type, "session.state") == 0 &&
	    (state = json_string_value(json_object_get(p, "state"))) != NULL) {
		if (strcmp(state, "running") == 0 ||
		    strcmp(state, "awaiting_approval") == 0) {
			if (!G.running)
				G.turn_start_ms = json_integer_value(
				    json_object_get(p, "ts"));
			G.running = 1;
			G.turn = json_integer_value(json_object_get(p, "turn"));
			/* awaiting_approval: the approval itself says it. */
			gbr_redraw();
			return;
		}
		G.running = 0;
		G.ended_turn = json_integer_value(json_object_get(p, "turn"));
		if (strcmp(state, "closed") == 0) {
			gbr_render(p, 0);
			G.leave = 1;
			return;
		}
	}
	if (strcmp(type, "approval.requested") == 0) {
		gbr_appr_requested(json_object_get(p, "approval"));
		return;
	}
	if (strcmp(type, "approval.resolved") == 0) {
		gbr_appr_resolved(json_object_get(p, "approval"));
		return;
	}
	if (strcmp(type, "message") == 0 && G.tty &&
	    (m = json_object_get(p, "message")) != NULL &&
	    (rid = json_string_value(json_object_get(p, "request_id"))) != NULL &&
	    G.my_rid != NULL && strcmp(rid, G.my_rid) == 0)
		return;		/* our own line is on the screen already */
	gbr_render(p, 0);
	gbr_redraw();
}

/* Reads every message already available from the daemon. */
static void
gbr_drain(void)
{
	json_t	*msg;
	char	*cause = NULL;

	if (G.cl == NULL)
		return;
	while ((msg = client_read(G.cl, 0, &cause)) != NULL) {
		if (json_object_get(msg, "method") != NULL)
			gbr_event(json_object_get(msg, "params"));
		else
			gbr_tool_reply(msg);
		json_decref(msg);
	}
	if (cause != NULL) {
		free(cause);
		G.need_reconnect = 1;
	}
}

/* Prints an error reply: its message and kind, escaped. */
static void
gbr_say_error(const json_t *reply)
{
	const char	*msg = client_error_message(reply);
	const char	*kind = client_error_kind(reply);
	char		*m, *k;

	m = render_escape(msg != NULL ? msg : "error", msg != NULL ?
	    strlen(msg) : 5, 0, 4096);
	k = render_escape(kind != NULL ? kind : "?", kind != NULL ?
	    strlen(kind) : 1, RENDER_ESC_BACKSLASH, 128);
	gbr_say("%s! %s (%s)%s\n", render_color(&G.rd, "error"), m, k,
	    render_color(&G.rd, "reset"));
	free(m);
	free(k);
}

/*
 * Calls a method. Returns the result (new reference), or NULL after
 * printing the error; *kind gets the error kind (borrowed from a static
 * copy) when the daemon answered with one.
 */
static json_t *
gbr_call(const char *method, json_t *params, char *kind, size_t kindlen)
{
	json_t	*reply, *res;
	char	*cause;

	if (kind != NULL)
		*kind = '\0';
	if (G.cl == NULL) {
		json_decref(params);
		return NULL;
	}
	if ((reply = client_call(G.cl, method, params, GBR_CALL_MS, &cause)) == NULL) {
		gbr_say("%s! %s%s\n", render_color(&G.rd, "error"), cause,
		    render_color(&G.rd, "reset"));
		free(cause);
		G.need_reconnect = 1;
		return NULL;
	}
	if (json_object_get(reply, "error") != NULL) {
		if (kind != NULL)
			snprintf(kind, kindlen, "%s", client_error_kind(reply) != NULL ?
			    client_error_kind(reply) : "");
		gbr_say_error(reply);
		json_decref(reply);
		return NULL;
	}
	res = json_incref(json_object_get(reply, "result"));
	json_decref(reply);
	return res;
}

/* Makes a random request_id. */
static char *
gbr_request_id(void)
{
	unsigned char	r[8];
	char		buf[2 * sizeof r + 1];
	size_t		i;
	int		fd;

	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) == -1 ||
	    read(fd, r, sizeof r) != (ssize_t)sizeof r) {
		long long	t = gbr_now_ms() ^ ((long long)getpid() << 20);

		memcpy(r, &t, sizeof r);
	}
	if (fd != -1)
		close(fd);
	for (i = 0; i < sizeof r; i++)
		snprintf(buf + 2 * i, 3, "%02x", r[i]);
	return xstrdup(buf);
}

/* Sets the attached session's identity from its info. */
static void
gbr_set_session(const json_t *info)
{
	const char	*name = json_string_value(json_object_get(info, "name"));
	const char	*state = json_string_value(json_object_get(info, "state"));

	free(G.session);
	free(G.label);
	free(G.env);
	free(G.workspace);
	G.workspace = json_string_value(json_object_get(info, "workspace")) != NULL ?
	    xstrdup(json_string_value(json_object_get(info, "workspace"))) : NULL;
	G.session = xstrdup(json_string_value(json_object_get(info, "id")));
	G.label = xasprintf("gbr:%s", name != NULL ? name : G.session);
	G.env = xstrdup(json_string_value(json_object_get(info, "env")) != NULL ?
	    json_string_value(json_object_get(info, "env")) : "default");
	G.running = state != NULL && (strcmp(state, "running") == 0 ||
	    strcmp(state, "awaiting_approval") == 0);
	G.turn = json_integer_value(json_object_get(info, "turn"));
	G.turn_start_ms = json_integer_value(json_object_get(info, "active_ms"));
}

/* Tells whether the daemon offers a method. */
static int
gbr_has_method(const char *name)
{
	json_t	*caps, *v;
	size_t	 i;

	if (G.cl == NULL)
		return 0;
	caps = json_object_get(client_hello(G.cl), "capabilities");
	json_array_foreach(caps, i, v) {
		if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
			return 1;
	}
	return 0;
}

/* The longest request line the daemon takes (hello's limits). */
static size_t
gbr_max_line(void)
{
	json_t	*v;

	if (G.cl == NULL)
		return GBR_LINE_DEFAULT;
	v = json_object_get(json_object_get(client_hello(G.cl), "limits"),
	    "max_line_bytes");
	if (!json_is_integer(v) || json_integer_value(v) < 4096)
		return GBR_LINE_DEFAULT;
	return (size_t)json_integer_value(v);
}

/* The id of an approval object (borrowed), or NULL. */
static const char *
gbr_appr_id(const json_t *a)
{
	return json_string_value(json_object_get(a, "id"));
}

/* Finds a pending approval by id: its index in G.appr, or -1. */
static int
gbr_appr_find(const char *id)
{
	json_t	*a;
	size_t	 i;

	if (id == NULL)
		return -1;
	json_array_foreach(G.appr, i, a) {
		if (gbr_appr_id(a) != NULL && strcmp(gbr_appr_id(a), id) == 0)
			return (int)i;
	}
	return -1;
}

/* Tells whether an approval is a change to a file, which "e" can edit. */
static int
gbr_appr_editable(const json_t *a)
{
	const char	*tool = json_string_value(json_object_get(a, "tool"));

	if (json_is_string(json_object_get(a, "proposed")) ||
	    json_is_string(json_object_get(a, "content")))
		return 1;
	return tool != NULL && (strcmp(tool, "write_file") == 0 ||
	    strcmp(tool, "edit_file") == 0);
}

/*
 * Tells whether "s" can grant an approval for the rest of the session:
 * not for .gbr_envs/, which gbrd asks about every time.
 */
static int
gbr_appr_grantable(const json_t *a)
{
	const char	*why = json_string_value(json_object_get(a, "why"));

	return why == NULL || strcmp(why, "env_dir") != 0;
}

/* Adds (a copy of) a pending approval, or updates it. Returns 1 if it is new. */
static int
gbr_appr_add(const json_t *a)
{
	json_t	*copy, *old;
	int	 i;

	if (!json_is_object(a) || gbr_appr_id(a) == NULL)
		return 0;
	copy = json_deep_copy(a);
	if ((i = gbr_appr_find(gbr_appr_id(a))) >= 0) {
		old = json_array_get(G.appr, (size_t)i);
		json_object_set_new(copy, "gbr_shown", json_boolean(json_is_true(
		    json_object_get(old, "gbr_shown"))));
		json_array_set_new(G.appr, (size_t)i, copy);
		return 0;
	}
	if (json_array_size(G.appr) >= GBR_APPROVALS_MAX) {
		json_decref(copy);
		if (!G.appr_full)
			gbr_say("%s? more than %d approvals are pending; /approvals "
			    "lists them%s\n", render_color(&G.rd, "approval"),
			    GBR_APPROVALS_MAX, render_color(&G.rd, "reset"));
		G.appr_full = 1;
		return 0;
	}
	json_object_set_new(copy, "gbr_shown", json_false());
	json_array_append_new(G.appr, copy);
	return 1;
}

/*
 * Forgets a pending approval. Returns -1 if it was not pending here, else
 * whether it had been shown.
 */
static int
gbr_appr_remove(const char *id)
{
	int	i = gbr_appr_find(id), shown;

	if (i < 0)
		return -1;
	shown = json_is_true(json_object_get(json_array_get(G.appr, (size_t)i),
	    "gbr_shown"));
	json_array_remove(G.appr, (size_t)i);
	if (json_array_size(G.appr) < GBR_APPROVALS_MAX)
		G.appr_full = 0;
	return shown;
}

/* Forgets every pending approval (another session is attached). */
static void
gbr_appr_clear(void)
{
	json_array_clear(G.appr);
	G.appr_full = 0;
	free(G.ask_id);
	G.ask_id = NULL;
	G.ask = ASK_NONE;
}

/*
 * The pending approval a person means by key: its id, or the one id it
 * starts. Returns a new string: the id, or key itself.
 */
static char *
gbr_appr_match(const char *key)
{
	json_t		*a;
	const char	*hit = NULL;
	size_t		 i, n = 0;

	if (gbr_appr_find(key) >= 0)
		return xstrdup(key);
	json_array_foreach(G.appr, i, a) {
		if (gbr_appr_id(a) != NULL &&
		    strncmp(gbr_appr_id(a), key, strlen(key)) == 0) {
			hit = gbr_appr_id(a);
			n++;
		}
	}
	return xstrdup(n == 1 ? hit : key);
}

/* Output of the renderer gathered to be written above the prompt at once. */
struct gbr_capture {
	FILE	*f;
	char	*buf;
	size_t	 len;
};

/* Starts capturing the renderer's output; NULL if memory is short. */
static FILE *
gbr_capture(struct gbr_capture *c)
{
	c->buf = NULL;
	c->len = 0;
	if ((c->f = open_memstream(&c->buf, &c->len)) != NULL)
		G.rd.out = c->f;
	return c->f;
}

/* Ends a capture and writes what was rendered above the prompt. */
static void
gbr_capture_end(struct gbr_capture *c)
{
	fclose(c->f);
	G.rd.out = stdout;
	gbr_write(c->buf, c->len);
	free(c->buf);
}

/* Shows an approval: its diff bounded, or whole when all is set. */
static void
gbr_show_approval(const json_t *a, int all)
{
	const json_t		*id = json_object_get(a, "id");
	struct gbr_capture	 cap;
	char			*hint, *shown;
	FILE			*f;

	shown = render_escape(json_string_value(id), json_string_length(id),
	    RENDER_ESC_BACKSLASH, 128);
	hint = xasprintf(" (/approval %s shows them all)", shown);
	if ((f = gbr_capture(&cap)) != NULL) {
		render_approval(&G.rd, a, all ? 0 : gbr_diff_lines(), hint);
		if (!G.tty)
			fprintf(f, "  answer with /approve %s or /deny %s [REASON]\n",
			    shown, shown);
		gbr_capture_end(&cap);
	}
	free(hint);
	free(shown);
}

/* One line about an approval waiting behind the one being asked. */
static void
gbr_show_queued(const json_t *a)
{
	struct gbr_capture	 cap;
	FILE			*f;

	if ((f = gbr_capture(&cap)) == NULL)
		return;
	render_close_line(&G.rd);
	fprintf(f, "%s? approval ", render_color(&G.rd, "approval"));
	render_escaped(&G.rd, gbr_appr_id(a), strlen(gbr_appr_id(a)),
	    RENDER_ESC_BACKSLASH, 128);
	fputs(" waits its turn: ", f);
	render_approval_what(&G.rd, a);
	fprintf(f, "%s\n", render_color(&G.rd, "reset"));
	gbr_capture_end(&cap);
}

/*
 * Replaces the line being typed with text (NULL: empty), redrawing the
 * prompt, which may have changed too; *old (if asked) gets the line that
 * was there, or NULL if it was empty.
 */
static void
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

/* Ends the question. */
static void
gbr_ask_end(void)
{
	free(G.ask_id);
	G.ask_id = NULL;
	G.ask = ASK_NONE;
}

/*
 * Puts the prompt in step with the pending approvals: drops a question
 * whose approval is gone, asks about the oldest one when nothing is
 * asked (putting the half-typed line aside), and gives that line back
 * when nothing is left to ask.
 */
static void
gbr_ask_update(void)
{
	json_t	*a;
	char	*old;
	int	 was_asking = G.ask != ASK_NONE, changed = 0;

	if (!G.tty || G.leave || G.hangup)
		return;
	if (G.ask_id != NULL && gbr_appr_find(G.ask_id) < 0) {
		gbr_ask_end();
		changed = 1;
	}
	if (G.ask_id == NULL && !G.in_editor && !G.replaying &&
	    json_array_size(G.appr) > 0) {
		a = json_array_get(G.appr, 0);
		G.ask_id = xstrdup(gbr_appr_id(a));
		G.ask = ASK_DECISION;
		json_object_set_new(a, "gbr_shown", json_true());
		gbr_show_approval(a, 0);
		/* A half-typed answer is dropped; a half-typed message kept. */
		gbr_set_line(NULL, &old);
		if (old != NULL && !was_asking) {
			free(G.saved_line);
			G.saved_line = old;
		} else
			free(old);
		if (!G.editing)
			changed = 1;
	} else if (G.ask_id == NULL && G.saved_line != NULL && G.editing) {
		old = G.saved_line;
		G.saved_line = NULL;
		gbr_set_line(old, NULL);
		free(old);
	} else if (G.ask_id == NULL && was_asking && G.editing)
		gbr_set_line(NULL, NULL);	/* a half-typed answer goes */
	else if (changed)
		gbr_redraw();
}

/*
 * Tells about the approvals not shown yet: on a terminal the oldest is
 * asked and the others announced in one line each; without one they are
 * printed whole.
 */
static void
gbr_appr_announce(void)
{
	json_t	*a;
	size_t	 i;

	if (G.replaying)
		return;
	gbr_ask_update();
	json_array_foreach(G.appr, i, a) {
		if (json_is_true(json_object_get(a, "gbr_shown")))
			continue;
		json_object_set_new(a, "gbr_shown", json_true());
		if (G.tty)
			gbr_show_queued(a);
		else
			gbr_show_approval(a, 0);
	}
}

/* approval.requested: one more approval to decide. */
static void
gbr_appr_requested(const json_t *a)
{
	if (gbr_appr_add(a))
		gbr_appr_announce();
}

/* The past tense of a decision. */
static const char *
gbr_decided(const char *decision)
{
	if (decision == NULL)
		return NULL;
	if (strcmp(decision, "approve") == 0)
		return "approved";
	if (strcmp(decision, "deny") == 0)
		return "denied";
	if (strcmp(decision, "edit") == 0)
		return "edited";
	return NULL;
}

/*
 * approval.resolved: an approval was decided (here or elsewhere), applied,
 * expired or withdrawn. A question about it is dropped.
 */
static void
gbr_appr_resolved(const json_t *a)
{
	const char		*id = gbr_appr_id(a), *state, *done;
	struct gbr_capture	 cap;
	char			*where = NULL;
	int			 was, mine;

	if (id == NULL)
		return;
	state = json_string_value(json_object_get(a, "state"));
	if (state != NULL && (strcmp(state, "pending") == 0 ||
	    strcmp(state, "interrupted") == 0)) {
		/* To be decided again (gbrd died while applying it). */
		if (gbr_appr_add(a))
			gbr_appr_announce();
		else if (!G.replaying)
			gbr_show_approval(a, 0);
		return;
	}
	mine = json_object_get(G.appr_mine, id) != NULL;
	was = gbr_appr_remove(id);
	if (G.replaying && was != 1)
		return;		/* history nobody here was shown */
	done = gbr_decided(json_string_value(json_object_get(a, "decision")));
	if (!mine && was >= 0 && done != NULL)
		where = state != NULL && strcmp(state, done) == 0 ?
		    xstrdup("in another terminal") :
		    xasprintf("(%s in another terminal)", done);
	if (gbr_capture(&cap) != NULL) {
		render_approval_resolved(&G.rd, a, where);
		gbr_capture_end(&cap);
	}
	free(where);
	gbr_ask_update();
}

/*
 * Makes the pending approvals those gbrd lists for the session (after
 * attaching, reconnecting, or on /approvals), keeping what was shown.
 */
static void
gbr_appr_sync(void)
{
	json_t	*res, *list, *a, *copy, *keep;
	char	*shown;
	size_t	 i;
	int	 j;

	if (!gbr_has_method("approval.list") || G.session == NULL)
		return;
	if ((res = gbr_call("approval.list", json_pack("{s:s}", "session",
	    G.session), NULL, 0)) == NULL)
		return;
	list = json_is_array(res) ? res : json_object_get(res, "approvals");
	keep = json_array();
	json_array_foreach(list, i, a) {
		if (!json_is_object(a) || gbr_appr_id(a) == NULL ||
		    json_array_size(keep) >= GBR_APPROVALS_MAX)
			continue;
		copy = json_deep_copy(a);
		j = gbr_appr_find(gbr_appr_id(a));
		json_object_set_new(copy, "gbr_shown", json_boolean(j >= 0 &&
		    json_is_true(json_object_get(json_array_get(G.appr,
		    (size_t)j), "gbr_shown"))));
		json_array_append_new(keep, copy);
	}
	/* Shown here, answered while this terminal was away. */
	json_array_foreach(G.appr, i, a) {
		for (j = 0; j < (int)json_array_size(keep); j++) {
			if (strcmp(gbr_appr_id(json_array_get(keep, (size_t)j)),
			    gbr_appr_id(a)) == 0)
				break;
		}
		if (j < (int)json_array_size(keep) ||
		    !json_is_true(json_object_get(a, "gbr_shown")))
			continue;
		shown = render_escape(gbr_appr_id(a), strlen(gbr_appr_id(a)),
		    RENDER_ESC_BACKSLASH, 128);
		gbr_say("%s? approval %s is no longer pending%s\n",
		    render_color(&G.rd, "approval"), shown,
		    render_color(&G.rd, "reset"));
		free(shown);
	}
	json_decref(G.appr);
	G.appr = keep;
	G.appr_full = json_array_size(list) > GBR_APPROVALS_MAX;
	json_decref(res);
	gbr_appr_announce();
}

/* /tools: the tools the agent has, as gbrd lists them (escaped). */
static void
gbr_tools(void)
{
	json_t		*res, *t;
	const char	*name, *what;
	char		*n, *w;
	size_t		 i;

	if ((res = gbr_call("tool.list", NULL, NULL, 0)) == NULL)
		return;
	json_array_foreach(json_object_get(res, "tools"), i, t) {
		name = json_string_value(json_object_get(t, "name"));
		what = json_string_value(json_object_get(t, "description"));
		n = render_escape(name != NULL ? name : "?", name != NULL ?
		    strlen(name) : 1, RENDER_ESC_BACKSLASH | RENDER_ESC_CODES, 64);
		w = render_escape(what != NULL ? what : "", what != NULL ?
		    strlen(what) : 0, RENDER_ESC_CODES, 512);
		gbr_say("  %-16s %s\n", n, w);
		free(n);
		free(w);
	}
	json_decref(res);
}

/* /approvals: the pending approvals of this session, from gbrd. */
static void
gbr_approvals_cmd(void)
{
	struct gbr_capture	 cap;
	json_t			*a;
	size_t			 i;
	FILE			*f;

	if (!gbr_has_method("approval.list")) {
		gbr_say("this gbrd has no approvals\n");
		return;
	}
	gbr_appr_sync();
	if (json_array_size(G.appr) == 0) {
		gbr_say("no approvals pending\n");
		return;
	}
	if ((f = gbr_capture(&cap)) == NULL)
		return;
	json_array_foreach(G.appr, i, a) {
		fprintf(f, "%s ", G.ask_id != NULL &&
		    strcmp(G.ask_id, gbr_appr_id(a)) == 0 ? "*" : " ");
		render_escaped(&G.rd, gbr_appr_id(a), strlen(gbr_appr_id(a)),
		    RENDER_ESC_BACKSLASH, 128);
		fputs("  ", f);
		render_approval_what(&G.rd, a);
		if (json_is_string(json_object_get(a, "state")) && strcmp(
		    json_string_value(json_object_get(a, "state")), "pending") != 0) {
			fputs("  [", f);
			render_escaped(&G.rd, json_string_value(json_object_get(a,
			    "state")), json_string_length(json_object_get(a,
			    "state")), RENDER_ESC_BACKSLASH, 64);
			fputc(']', f);
		}
		fputc('\n', f);
	}
	fputs("(/approval ID shows one; /approve ID, /deny ID [REASON], "
	    "/edit ID answer)\n", f);
	gbr_capture_end(&cap);
}

/* Remembers that an approval is being answered from this terminal. */
static void
gbr_appr_mark_mine(const char *id)
{
	if (json_object_size(G.appr_mine) >= GBR_MINE_MAX)
		json_object_clear(G.appr_mine);
	json_object_set_new(G.appr_mine, id, json_true());
}

/*
 * Sends a decision about approval id. Steals content (NULL: none).
 * Returns 0 when gbrd took it, -1 after saying why not.
 */
static int
gbr_resolve(const char *key, const char *decision, json_t *content,
    const char *reason, const char *scope)
{
	json_t		*params, *reply, *res, *data;
	struct gbr_capture	 cap;
	const char		*kind, *st;
	char			*id = gbr_appr_match(key), *line, *cause, *shown;
	char			*est;
	size_t			 len;
	int			 r = -1;

	shown = render_escape(id, strlen(id), RENDER_ESC_BACKSLASH, 128);
	params = json_pack("{s:s, s:s}", "id", id, "decision", decision);
	if (content != NULL)
		json_object_set_new(params, "content", content);
	if (reason != NULL && *reason != '\0') {
		if (json_object_set_new(params, "reason", json_string(reason)) != 0) {
			gbr_say("! the reason is not valid UTF-8; nothing was sent\n");
			goto out;
		}
	}
	if (scope != NULL)
		json_object_set_new(params, "scope", json_string(scope));
	if (G.cl == NULL)
		goto out;
	/* A request over gbrd's line limit would cost the connection. */
	line = json_dumps(params, JSON_COMPACT);
	len = line != NULL ? strlen(line) : 0;
	free(line);
	if (len + 128 > G.max_line) {
		gbr_say("! that is too large to send: %zu bytes, gbrd takes at most "
		    "%zu in one request; nothing was sent\n", len, G.max_line);
		goto out;
	}
	gbr_appr_mark_mine(id);
	reply = client_call(G.cl, "approval.resolve", params, GBR_CALL_MS, &cause);
	params = NULL;
	if (reply == NULL) {
		gbr_say("%s! %s%s\n", render_color(&G.rd, "error"), cause,
		    render_color(&G.rd, "reset"));
		free(cause);
		G.need_reconnect = 1;
		goto out;
	}
	if (json_object_get(reply, "error") != NULL) {
		kind = client_error_kind(reply) != NULL ? client_error_kind(reply) : "?";
		data = json_object_get(json_object_get(reply, "error"), "data");
		st = json_string_value(json_object_get(data, "state"));
		if (st == NULL)
			st = json_string_value(json_object_get(json_object_get(data,
			    "approval"), "state"));
		if (strcmp(kind, "already_resolved") == 0) {
			est = st != NULL ? render_escape(st, strlen(st),
			    RENDER_ESC_BACKSLASH, 64) : NULL;
			gbr_say("%s? approval %s was already answered%s%s%s%s\n",
			    render_color(&G.rd, "approval"), shown, est != NULL ?
			    " (" : "", est != NULL ? est : "", est != NULL ? ")" : "",
			    render_color(&G.rd, "reset"));
			free(est);
			gbr_appr_remove(id);
		} else if (strcmp(kind, "approval_not_found") == 0) {
			gbr_say("%s? there is no approval %s (/approvals lists the "
			    "pending ones)%s\n", render_color(&G.rd, "approval"),
			    shown, render_color(&G.rd, "reset"));
			gbr_appr_remove(id);
		} else
			gbr_say_error(reply);
		json_decref(reply);
		gbr_ask_update();
		goto out;
	}
	res = json_object_get(reply, "result");
	if (json_object_get(res, "approval") != NULL)
		res = json_object_get(res, "approval");
	/* Of another session, no event will tell: the reply does. */
	if (res != NULL && (G.session == NULL || !json_is_string(json_object_get(
	    res, "session")) || strcmp(json_string_value(json_object_get(res,
	    "session")), G.session) != 0) && gbr_capture(&cap) != NULL) {
		render_approval_resolved(&G.rd, res, NULL);
		gbr_capture_end(&cap);
	}
	json_decref(reply);
	gbr_appr_remove(id);
	gbr_ask_update();
	r = 0;
out:
	json_decref(params);
	free(shown);
	free(id);
	return r;
}

/*
 * Reads a regular file of at most max bytes, not following a final
 * symbolic link. Returns a new buffer (NUL-terminated; *len bytes), or
 * NULL with *why.
 */
static char *
gbr_read_file(const char *path, size_t max, size_t *len, char **why)
{
	struct stat	 st;
	char		*buf;
	size_t		 n = 0;
	ssize_t		 r;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) == -1) {
		*why = xasprintf("cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = xasprintf("%s is not a regular file", path);
		close(fd);
		return NULL;
	}
	if ((unsigned long long)st.st_size > max) {
		*why = xasprintf("%s is larger than %zu bytes", path, max);
		close(fd);
		return NULL;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	/* It may grow meanwhile: read what fits, then check the end. */
	while (n < (size_t)st.st_size && (r = read(fd, buf + n,
	    (size_t)st.st_size - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			*why = xasprintf("cannot read %s: %s", path, strerror(errno));
			free(buf);
			close(fd);
			return NULL;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/*
 * Replaces old_string with new_string in cur as edit_file does (once, or
 * everywhere with replace_all). Returns a new buffer, or NULL with *why.
 */
static char *
gbr_apply_edit(const char *cur, size_t clen, const json_t *args, size_t *len,
    char **why)
{
	const json_t	*jo = json_object_get(args, "old_string");
	const json_t	*jn = json_object_get(args, "new_string");
	const char	*old, *new, *p, *m, *end = cur + clen;
	size_t		 olen, nlen, count = 0;
	char		*out, *o;
	int		 all = json_is_true(json_object_get(args, "replace_all"));

	if (!json_is_string(jo) || !json_is_string(jn) ||
	    json_string_length(jo) == 0) {
		*why = xstrdup("its arguments have no old_string and new_string");
		return NULL;
	}
	old = json_string_value(jo);
	olen = json_string_length(jo);
	new = json_string_value(jn);
	nlen = json_string_length(jn);
	for (p = cur; (m = memmem(p, (size_t)(end - p), old, olen)) != NULL;
	    p = m + olen)
		count++;
	if (count == 0) {
		*why = xstrdup("old_string is not in the file now (it changed "
		    "since the agent asked)");
		return NULL;
	}
	if (count > 1 && !all) {
		*why = xasprintf("old_string occurs %zu times in the file now",
		    count);
		return NULL;
	}
	if (nlen > olen && count > (GBR_EDIT_MAX - clen) / (nlen - olen)) {
		*why = xstrdup("the result would be too large");
		return NULL;
	}
	out = o = xmalloc(clen - count * olen + count * nlen + 1);
	for (p = cur; (m = memmem(p, (size_t)(end - p), old, olen)) != NULL;
	    p = m + olen) {
		memcpy(o, p, (size_t)(m - p));
		o += m - p;
		memcpy(o, new, nlen);
		o += nlen;
	}
	memcpy(o, p, (size_t)(end - p));
	o += end - p;
	*o = '\0';
	*len = (size_t)(o - out);
	return out;
}

/*
 * The whole new content an approval proposes for its file: what gbrd
 * says (proposed, or content), else write_file's content, else for
 * edit_file the file as it is now in the session's folder with the edit
 * applied.
 * Returns a new buffer, or NULL with *why; *how says which.
 */
static char *
gbr_proposed(const json_t *a, size_t *len, const char **how, char **why)
{
	const json_t	*args = json_object_get(a, "args"), *v;
	const char	*tool = json_string_value(json_object_get(a, "tool"));
	const char	*rel;
	char		*full, real[PATH_MAX], *cur, *out;
	size_t		 clen, wl;

	if (json_is_string(v = json_object_get(a, "proposed")) ||
	    json_is_string(v = json_object_get(a, "content"))) {
		*how = "the whole new file, as gbrd proposes it";
		*len = json_string_length(v);
		return xstrndup(json_string_value(v), *len);
	}
	if (tool != NULL && strcmp(tool, "write_file") == 0 &&
	    json_is_string(v = json_object_get(args, "content"))) {
		*how = "the content write_file would write";
		*len = json_string_length(v);
		return xstrndup(json_string_value(v), *len);
	}
	if (tool == NULL || strcmp(tool, "edit_file") != 0) {
		*why = xstrdup("it is not a change to a file: there is nothing to "
		    "edit");
		return NULL;
	}
	rel = json_string_value(json_object_get(a, "path"));
	if (rel == NULL)
		rel = json_string_value(json_object_get(args, "path"));
	if (rel == NULL || *rel == '/' || G.workspace == NULL) {
		*why = xstrdup("it names no file in the session's folder");
		return NULL;
	}
	/* Read here, as the person would: only inside the session's folder. */
	full = xasprintf("%s/%s", G.workspace, rel);
	if (realpath(full, real) == NULL) {
		*why = xasprintf("cannot find the file: %s", strerror(errno));
		free(full);
		return NULL;
	}
	free(full);
	wl = strlen(G.workspace);
	if (strncmp(real, G.workspace, wl) != 0 || real[wl] != '/') {
		*why = xstrdup("the file is outside the session's folder");
		return NULL;
	}
	if ((cur = gbr_read_file(real, GBR_EDIT_MAX, &clen, why)) == NULL)
		return NULL;
	out = gbr_apply_edit(cur, clen, args, len, why);
	free(cur);
	*how = "the file as it is now, with edit_file's change applied";
	return out;
}

/*
 * Runs $VISUAL, else $EDITOR, else vi on file, with the terminal. The
 * socket is read meanwhile and output held. Returns the editor's exit
 * status, or -1.
 */
static int
gbr_run_editor(const char *file)
{
	posix_spawnattr_t	 attr;
	sigset_t		 def;
	struct pollfd		 pfd[2];
	const char		*ed = getenv("VISUAL");
	char			*cmd, drain[64];
	char			*argv[6];
	pid_t			 pid, w;
	int			 status = -1, r;

	if (ed == NULL || *ed == '\0')
		ed = getenv("EDITOR");
	if (ed == NULL || *ed == '\0')
		ed = "vi";
	/* As git does: the variable may hold arguments, so a shell reads it. */
	cmd = xasprintf("%s \"$1\"", ed);
	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = cmd;
	argv[3] = (char *)"sh";
	argv[4] = (char *)file;
	argv[5] = NULL;
	posix_spawnattr_init(&attr);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
	fflush(stdout);
	r = posix_spawn(&pid, "/bin/sh", NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	free(cmd);
	if (r != 0) {
		gbr_say("! cannot run the editor: %s\n", strerror(r));
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
		gbr_got_int = 0;	/* Ctrl-C was the editor's */
	}
	G.in_editor = 0;
	gbr_got_winch = 1;		/* the size may have changed meanwhile */
	if (G.defer_len > 0)
		gbr_write(G.defer, G.defer_len);
	if (G.defer_lost > 0)
		gbr_say("%s* %zu bytes of output were left out while the editor "
		    "ran (/history shows the messages)%s\n",
		    render_color(&G.rd, "dim"), G.defer_lost,
		    render_color(&G.rd, "reset"));
	free(G.defer);
	G.defer = NULL;
	G.defer_len = G.defer_lost = 0;
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* A file name suffix for the editor (".ini" for x.ini), or "". */
static const char *
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

/*
 * "e" or /edit: the proposed content in the editor, on a private
 * temporary file; what the person saves is sent as the decision "edit".
 * Nothing is sent when the editor fails or nothing changed.
 */
static void
gbr_edit(const char *key)
{
	const char	*tmpdir = getenv("TMPDIR"), *how = NULL;
	json_t		*a = NULL, *content;
	char		*id = gbr_appr_match(key), *shown, *why = NULL;
	char		*proposed = NULL, *edited = NULL, *path = NULL, suffix[16];
	size_t		 plen = 0, elen = 0;
	int		 i, fd, st, keep = 0;

	shown = render_escape(id, strlen(id), RENDER_ESC_BACKSLASH, 128);
	if (!G.tty) {
		gbr_say("! editing needs a terminal (gbrctl edit %s works too)\n",
		    shown);
		goto out;
	}
	if ((i = gbr_appr_find(id)) < 0) {
		gbr_say("? no approval %s is pending here (/approvals lists them)\n",
		    shown);
		goto out;
	}
	a = json_incref(json_array_get(G.appr, (size_t)i));
	if ((proposed = gbr_proposed(a, &plen, &how, &why)) == NULL) {
		gbr_say("! cannot edit approval %s: %s\n", shown, why);
		goto out;
	}
	if (tmpdir == NULL || *tmpdir != '/')
		tmpdir = "/tmp";
	gbr_edit_suffix(json_string_value(json_object_get(a, "path")), suffix,
	    sizeof suffix);
	path = xasprintf("%s/gbr-approval-XXXXXX%s", tmpdir, suffix);
	if ((fd = mkstemps(path, (int)strlen(suffix))) == -1) {
		gbr_say("! cannot make a temporary file in %s: %s\n", tmpdir,
		    strerror(errno));
		goto out;
	}
	keep = 1;
	if (fchmod(fd, 0600) != 0 || client_write_fd(fd, proposed, plen) != 0) {
		gbr_say("! cannot write %s: %s\n", path, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	gbr_say("* editing %s (%s)\n", path, how);
	if ((st = gbr_run_editor(path)) != 0) {
		gbr_say("! the editor failed (exit %d): nothing was sent, approval "
		    "%s still waits\n", st, shown);
		keep = 0;
		goto out;
	}
	if (gbr_appr_find(id) < 0) {
		gbr_say("? approval %s was answered while you edited: your text was "
		    "not sent and is kept in %s\n", shown, path);
		goto out;
	}
	if ((edited = gbr_read_file(path, G.max_line, &elen, &why)) == NULL) {
		gbr_say("! %s: nothing was sent\n", why);
		goto out;
	}
	if (elen == plen && memcmp(edited, proposed, plen) == 0) {
		gbr_say("* no change, so nothing was sent (answer a to approve it "
		    "as proposed)\n");
		keep = 0;
		goto out;
	}
	if ((why = render_text_problem(edited, elen)) != NULL ||
	    (content = json_stringn(edited, elen)) == NULL) {
		gbr_say("! the edited text holds %s, and gbr writes text files "
		    "only: nothing was sent; it is kept in %s\n", why != NULL ?
		    why : "what is not text", path);
		goto out;
	}
	if (gbr_resolve(id, "edit", content, NULL, NULL) == 0)
		keep = 0;
	else
		gbr_say("your text is kept in %s\n", path);
out:
	if (path != NULL && !keep)
		unlink(path);
	json_decref(a);
	free(path);
	free(proposed);
	free(edited);
	free(why);
	free(shown);
	free(id);
}

/* /approval ID: one approval, whole. */
static void
gbr_approval_show(const char *key)
{
	json_t	*res, *a;
	char	*id = gbr_appr_match(key), *shown;
	size_t	 i;
	int	 j;

	if ((j = gbr_appr_find(id)) >= 0) {
		gbr_show_approval(json_array_get(G.appr, (size_t)j), 1);
		free(id);
		return;
	}
	if (gbr_has_method("approval.list") && (res = gbr_call("approval.list",
	    NULL, NULL, 0)) != NULL) {
		json_array_foreach(json_is_array(res) ? res :
		    json_object_get(res, "approvals"), i, a) {
			if (gbr_appr_id(a) != NULL && strcmp(gbr_appr_id(a), id) == 0) {
				gbr_show_approval(a, 1);
				json_decref(res);
				free(id);
				return;
			}
		}
		json_decref(res);
	}
	shown = render_escape(id, strlen(id), RENDER_ESC_BACKSLASH, 128);
	gbr_say("? no approval %s is pending (/approvals lists them)\n", shown);
	free(shown);
	free(id);
}

/*
 * A line typed while the prompt asks about an approval: a, d [REASON],
 * e or s at the question, anything (the reason) after d.
 */
static void
gbr_answer(char *line)
{
	char	*id, *word = line, *rest;

	if (G.ask_id == NULL || gbr_appr_find(G.ask_id) < 0) {
		gbr_ask_update();
		return;
	}
	id = xstrdup(G.ask_id);
	if (G.ask == ASK_REASON) {
		G.ask = ASK_DECISION;
		(void)gbr_resolve(id, "deny", NULL, line, NULL);
		free(id);
		return;
	}
	rest = word + strcspn(word, " \t");
	if (*rest != '\0') {
		*rest++ = '\0';
		rest += strspn(rest, " \t");
	}
	if (strcasecmp(word, "a") == 0 || strcasecmp(word, "approve") == 0)
		(void)gbr_resolve(id, "approve", NULL, NULL, NULL);
	else if ((strcasecmp(word, "s") == 0 || strcasecmp(word, "session") == 0) &&
	    !gbr_appr_grantable(json_array_get(G.appr, (size_t)gbr_appr_find(id))))
		gbr_say("changes to .gbr_envs/ are asked every time: there is no "
		    "approval for the session (a approves this one)\n");
	else if (strcasecmp(word, "s") == 0 || strcasecmp(word, "session") == 0)
		(void)gbr_resolve(id, "approve", NULL, NULL, "session");
	else if ((strcasecmp(word, "d") == 0 || strcasecmp(word, "deny") == 0) &&
	    *rest != '\0')
		(void)gbr_resolve(id, "deny", NULL, rest, NULL);
	else if (strcasecmp(word, "d") == 0 || strcasecmp(word, "deny") == 0)
		G.ask = ASK_REASON;
	else if (strcasecmp(word, "e") == 0 || strcasecmp(word, "edit") == 0)
		gbr_edit(id);
	else if (*word != '\0')
		gbr_say("answer a (approve), d (deny), e (edit the content) or s "
		    "(approve it for the rest of the session); /approval ID shows "
		    "it again\n");
	free(id);
}

/*
 * Shows the recent history of a session, then attaches right after it, so
 * nothing is shown twice and nothing is missed.
 */
static int
gbr_attach(const char *key, int show)
{
	json_t		*hist, *res, *m;
	size_t		 i;
	long long	 total;

	if ((hist = gbr_call("session.history", json_pack("{s:s, s:i}", "session",
	    key, "limit", show), NULL, 0)) == NULL)
		return -1;
	total = json_integer_value(json_object_get(hist, "total"));
	if (total > (long long)json_array_size(json_object_get(hist, "messages")))
		gbr_say("%s* %lld earlier messages (/history N shows more)%s\n",
		    render_color(&G.rd, "dim"), total - (long long)json_array_size(
		    json_object_get(hist, "messages")), render_color(&G.rd, "reset"));
	json_array_foreach(json_object_get(hist, "messages"), i, m)
		gbr_render(m, 1);
	G.last_seq = json_integer_value(json_object_get(hist, "seq"));
	/* The approvals asked here so far were the other session's. */
	if (G.ask != ASK_NONE)
		gbr_set_line(NULL, NULL);
	gbr_appr_clear();
	res = gbr_call("session.attach", json_pack("{s:s, s:I}", "session",
	    json_string_value(json_object_get(hist, "session")), "after_seq",
	    (json_int_t)G.last_seq), NULL, 0);
	json_decref(hist);
	if (res == NULL)
		return -1;
	gbr_set_session(json_object_get(res, "session"));
	json_decref(res);
	G.replaying = 1;
	gbr_appr_sync();
	return 0;
}

/* Prints the session list. */
static void
gbr_list(void)
{
	json_t	*res, *s;
	size_t	 i;

	if ((res = gbr_call("session.list", NULL, NULL, 0)) == NULL)
		return;
	if (json_array_size(json_object_get(res, "sessions")) == 0)
		gbr_say("no sessions\n");
	json_array_foreach(json_object_get(res, "sessions"), i, s) {
		gbr_say("%s %-12s  %-16s  %-17s  %5lld msgs  %s\n",
		    G.session != NULL && strcmp(G.session, json_string_value(
		    json_object_get(s, "id"))) == 0 ? "*" : " ",
		    json_string_value(json_object_get(s, "id")),
		    json_string_value(json_object_get(s, "name")) != NULL ?
		    json_string_value(json_object_get(s, "name")) : "-",
		    json_string_value(json_object_get(s, "state")),
		    (long long)json_integer_value(json_object_get(s, "messages")),
		    json_string_value(json_object_get(s, "workspace")));
	}
	json_decref(res);
}

/* Sends a message. */
static void
gbr_send(const char *text)
{
	json_t	*res;
	char	 kind[64];

	if (G.running) {
		gbr_say("a turn is running: wait for it, or Ctrl-C (/cancel) to "
		    "stop it\n");
		return;
	}
	free(G.my_rid);
	G.my_rid = gbr_request_id();
	res = gbr_call("session.send", json_pack("{s:s, s:s, s:s}", "session",
	    G.session, "text", text, "request_id", G.my_rid), kind, sizeof kind);
	if (res == NULL) {
		if (strcmp(kind, "session_not_found") == 0)
			G.leave = 1;
		return;
	}
	G.sent_turn = json_integer_value(json_object_get(res, "turn"));
	json_decref(res);
}

/* /help */
static void
gbr_help(void)
{
	gbr_say(
"Type a message and press Enter to send it to the agent. Commands:\n"
"  /help             this list\n"
"  /sessions         list the sessions (* marks this one)\n"
"  /attach NAME      switch to another session (by name or id)\n"
"  /new [NAME]       start a new session on this folder\n"
"  /history [N]      show the last N messages (default 50)\n"
"  /cancel           cancel the running turn (also Ctrl-C)\n"
"  /env              show the session's environment\n"
"  /tools            list the agent's tools (what it may do here)\n"
"  /run PROGRAM [ARGS...]   run a command here as the agent would (its\n"
"                    sandbox and rules); words as in a shell, unexpanded\n"
"  /tool NAME [JSON] run any tool here as the agent would\n"
"  /approvals        list the approvals waiting for a decision\n"
"  /approval ID      show one, with its whole diff\n"
"  /approve ID [session]   approve it (session: also the same tool and\n"
"                    path for the rest of the session)\n"
"  /deny ID [REASON] deny it\n"
"  /edit ID          edit the proposed content in $VISUAL/$EDITOR, send it\n"
"  /close            close this session for good and leave\n"
"  /detach, /quit    leave; the session keeps running (also Ctrl-D)\n"
"  /status, /call METHOD [JSON]   the daemon's state; any protocol method\n"
"Keys: Ctrl-C cancels a running turn, clears the line, twice leaves;\n"
"Ctrl-D on an empty line detaches; Up/Down walk the input history.\n"
"A pending approval is asked at the prompt: a approves, d denies (then a\n"
"reason, or Enter), e edits, s approves for the rest of the session.\n");
}

/*
 * Splits a /run line into words as a shell would, without expanding
 * anything: blanks separate words, '...' keeps everything, "..." keeps all
 * but \" and \\, and a backslash elsewhere keeps the next character.
 * Returns a JSON array of the words, or NULL after saying why.
 */
static json_t *
gbr_words(const char *line)
{
	json_t		*v = json_array(), *w;
	const char	*p = line;
	char		*word;
	size_t		 n;
	char		 q;
	int		 in, bad = 0;

	word = xmalloc(strlen(line) + 1);
	for (;;) {
		p += strspn(p, " \t");
		if (*p == '\0')
			break;
		n = 0;
		in = 0;
		while (*p != '\0' && (in || (*p != ' ' && *p != '\t'))) {
			q = *p;
			if (!in && (q == '\'' || q == '"')) {
				in = q;
				p++;
			} else if (in && q == in) {
				in = 0;
				p++;
			} else if (q == '\\' && in != '\'' && p[1] != '\0' &&
			    (!in || p[1] == '"' || p[1] == '\\')) {
				word[n++] = p[1];
				p += 2;
			} else
				word[n++] = *p++;
		}
		if (in) {
			gbr_say("! /run: a %c quote is not closed\n", in);
			bad = 1;
			break;
		}
		if (json_array_size(v) >= GBR_ARGV_MAX ||
		    (w = json_stringn(word, n)) == NULL) {
			gbr_say("! /run: %s\n", json_array_size(v) >= GBR_ARGV_MAX ?
			    "too many words" : "a word is not UTF-8");
			bad = 1;
			break;
		}
		json_array_append_new(v, w);
	}
	free(word);
	if (bad || json_array_size(v) == 0) {
		if (!bad)
			gbr_say("usage: /run PROGRAM [ARGS...] (words as in a "
			    "shell: '...', \"...\", \\; nothing is expanded)\n");
		json_decref(v);
		return NULL;
	}
	return v;
}

/*
 * Starts a tool in this session as the agent would (tool.call), without
 * waiting: its call and result show as the session's events, approvals
 * can be answered meanwhile, and the answer is shown when it comes
 * (gbr_tool_reply). what names the call there. Steals args.
 */
static void
gbr_tool_start(const char *tool, json_t *args, const char *what)
{
	long long	 id;
	char		*cause;

	if (G.cl == NULL) {
		json_decref(args);
		G.tool_failed = 1;
		return;
	}
	if (G.ntools >= GBR_TOOLS_MAX) {
		gbr_say("! %d tool calls are waiting for their answers already\n",
		    GBR_TOOLS_MAX);
		json_decref(args);
		G.tool_failed = 1;
		return;
	}
	if ((id = client_send(G.cl, "tool.call", json_pack("{s:s, s:s, s:o}",
	    "session", G.session, "tool", tool, "args", args), &cause)) < 0) {
		gbr_say("%s! %s%s\n", render_color(&G.rd, "error"), cause,
		    render_color(&G.rd, "reset"));
		free(cause);
		G.need_reconnect = 1;
		G.tool_failed = 1;
		return;
	}
	G.tools[G.ntools].id = id;
	G.tools[G.ntools].what = render_escape(what, strlen(what), 0, 200);
	G.ntools++;
}

/* An answer read from gbrd that is no event: one to /tool or /run? */
static void
gbr_tool_reply(const json_t *msg)
{
	const json_t		*id = json_object_get(msg, "id"), *res;
	struct gbr_capture	 cap;
	char			*what, *s;
	int			 i;

	for (i = 0; i < G.ntools; i++)
		if (json_is_integer(id) && json_integer_value(id) == G.tools[i].id)
			break;
	if (i == G.ntools)
		return;
	what = G.tools[i].what;
	G.tools[i] = G.tools[--G.ntools];
	res = json_object_get(msg, "result");
	if (json_object_get(res, "result") != NULL)
		res = json_object_get(res, "result");
	if (res == NULL) {
		gbr_say("%s: ", what);
		gbr_say_error(msg);
		G.tool_failed = 1;
	} else if (json_object_get(res, "exit_code") != NULL) {
		if (json_is_true(json_object_get(res, "timed_out")) ||
		    json_is_string(json_object_get(res, "signal")) ||
		    json_integer_value(json_object_get(res, "exit_code")) != 0)
			G.tool_failed = 1;
		if (gbr_capture(&cap) != NULL) {
			render_close_line(&G.rd);
			fprintf(cap.f, "%s%s:%s\n", render_color(&G.rd, "dim"),
			    what, render_color(&G.rd, "reset"));
			render_run_result(&G.rd, res);
			gbr_capture_end(&cap);
		}
	} else {
		s = json_dumps(res, JSON_INDENT(2) | JSON_ENSURE_ASCII |
		    JSON_ENCODE_ANY);
		gbr_say("%s:\n%s\n", what, s != NULL ? s : "?");
		free(s);
	}
	free(what);
	gbr_redraw();
}

/* Forgets the answers a lost connection took with it. */
static void
gbr_tools_lost(void)
{
	while (G.ntools > 0) {
		G.ntools--;
		gbr_say("* the answer to %s was lost with the connection; "
		    "/history shows its result\n", G.tools[G.ntools].what);
		G.tool_failed = 1;
		free(G.tools[G.ntools].what);
	}
}

/* /tool NAME [JSON-ARGS] */
static void
gbr_tool_cmd(const char *name, const char *json)
{
	json_error_t	 jerr;
	json_t		*args;
	char		*what;

	if (*name == '\0') {
		gbr_say("usage: /tool NAME [JSON-ARGS] (/tools lists them)\n");
		G.tool_failed = 1;
		return;
	}
	args = json != NULL ? json_loads(json, JSON_REJECT_DUPLICATES, &jerr) :
	    json_object();
	if (args == NULL || !json_is_object(args)) {
		gbr_say("! /tool: JSON-ARGS must be a JSON object%s%s\n",
		    args == NULL ? ": " : "", args == NULL ? jerr.text : "");
		json_decref(args);
		G.tool_failed = 1;
		return;
	}
	what = xasprintf("/tool %s", name);
	gbr_tool_start(name, args, what);
	free(what);
}

/* /run PROGRAM [ARGS...]: run_command with these words as its argv. */
static void
gbr_run_cmd(const char *line)
{
	json_t	*argv;
	char	*what;

	if ((argv = gbr_words(line)) == NULL) {
		G.tool_failed = 1;
		return;
	}
	what = xasprintf("/run %s", line);
	gbr_tool_start("run_command", json_pack("{s:o}", "argv", argv), what);
	free(what);
}

/* /call METHOD [JSON] and /status: any method, its result printed as JSON. */
static void
gbr_call_raw(const char *method, const char *params)
{
	json_error_t	 jerr;
	json_t		*p = NULL, *res;
	char		*s;

	if (*method == '\0') {
		gbr_say("usage: /call METHOD [JSON-PARAMS]\n");
		return;
	}
	if (params != NULL &&
	    (p = json_loads(params, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		gbr_say("! not valid JSON: %s\n", jerr.text);
		return;
	}
	if ((res = gbr_call(method, p, NULL, 0)) == NULL)
		return;
	s = json_dumps(res, JSON_INDENT(2) | JSON_ENCODE_ANY);
	gbr_say("%s\n", s != NULL ? s : "?");
	free(s);
	json_decref(res);
}

/* Handles a "/" command. */
static void
gbr_command(char *line)
{
	json_t		*res, *m;
	char		*cmd = line + 1, *arg, *end, *rest;
	size_t		 i;
	long		 n;

	arg = cmd + strcspn(cmd, " \t");
	/* /run takes the rest of the line whole: it splits it itself. */
	if (arg - cmd == 3 && strncmp(cmd, "run", 3) == 0) {
		gbr_run_cmd(arg + strspn(arg, " \t"));
		return;
	}
	rest = NULL;
	if (*arg != '\0') {
		*arg++ = '\0';
		arg += strspn(arg, " \t");
		rest = arg + strcspn(arg, " \t");
		if (*rest != '\0') {
			*rest++ = '\0';
			rest += strspn(rest, " \t");
		}
		if (*rest == '\0')
			rest = NULL;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "?") == 0)
		gbr_help();
	else if (strcmp(cmd, "quit") == 0 || strcmp(cmd, "detach") == 0 ||
	    strcmp(cmd, "exit") == 0)
		G.leave = 1;
	else if (strcmp(cmd, "sessions") == 0 || strcmp(cmd, "list") == 0)
		gbr_list();
	else if (strcmp(cmd, "attach") == 0) {
		if (*arg == '\0') {
			gbr_say("usage: /attach NAME (/sessions lists them)\n");
			return;
		}
		res = gbr_call("session.detach", json_pack("{s:s}", "session",
		    G.session), NULL, 0);
		json_decref(res);
		if (gbr_attach(arg, GBR_SHOW_MESSAGES) != 0 && G.session != NULL)
			(void)gbr_attach(G.session, 0);	/* stay where we were */
		else
			gbr_say("* attached to %s\n", G.label + 4);
	} else if (strcmp(cmd, "new") == 0) {
		res = gbr_call("session.create", *arg != '\0' ?
		    json_pack("{s:s, s:s}", "workspace", G.dir, "name", arg) :
		    json_pack("{s:s}", "workspace", G.dir), NULL, 0);
		if (res == NULL)
			return;
		json_decref(gbr_call("session.detach", json_pack("{s:s}",
		    "session", G.session), NULL, 0));
		if (gbr_attach(json_string_value(json_object_get(res, "id")), 0) == 0)
			gbr_say("* new session %s\n", G.label + 4);
		json_decref(res);
	} else if (strcmp(cmd, "history") == 0) {
		n = 50;
		if (*arg != '\0') {
			errno = 0;
			n = strtol(arg, &end, 10);
			if (errno != 0 || *end != '\0' || n < 1 || n > 100000) {
				gbr_say("usage: /history [N] (1 to 100000)\n");
				return;
			}
		}
		if ((res = gbr_call("session.history", json_pack("{s:s, s:i}",
		    "session", G.session, "limit", (int)n), NULL, 0)) == NULL)
			return;
		json_array_foreach(json_object_get(res, "messages"), i, m)
			gbr_render(m, 1);
		json_decref(res);
	} else if (strcmp(cmd, "cancel") == 0) {
		if ((res = gbr_call("session.cancel", json_pack("{s:s}", "session",
		    G.session), NULL, 0)) == NULL)
			return;
		if (!json_is_true(json_object_get(res, "cancelled")))
			gbr_say("nothing to cancel\n");
		json_decref(res);
	} else if (strcmp(cmd, "env") == 0) {
		gbr_say("environment: %s\n", G.env);
		if (gbr_has_method("env.show") && (res = gbr_call("env.show",
		    json_pack("{s:s}", "session", G.session), NULL, 0)) != NULL) {
			char	*s = json_dumps(res, JSON_INDENT(2));

			gbr_say("%s\n", s != NULL ? s : "?");
			free(s);
			json_decref(res);
		}
	} else if (strcmp(cmd, "tools") == 0)
		gbr_tools();
	else if (strcmp(cmd, "tool") == 0)
		gbr_tool_cmd(arg, rest);
	else if (strcmp(cmd, "close") == 0) {
		if ((res = gbr_call("session.close", json_pack("{s:s}", "session",
		    G.session), NULL, 0)) != NULL) {
			json_decref(res);
			G.leave = 1;
		}
	} else if (strcmp(cmd, "approvals") == 0)
		gbr_approvals_cmd();
	else if (strcmp(cmd, "approval") == 0 || strcmp(cmd, "approve") == 0 ||
	    strcmp(cmd, "deny") == 0 || strcmp(cmd, "edit") == 0) {
		if (*arg == '\0') {
			gbr_say("usage: /%s ID%s (/approvals lists them)\n", cmd,
			    strcmp(cmd, "deny") == 0 ? " [REASON]" :
			    strcmp(cmd, "approve") == 0 ? " [session]" : "");
			return;
		}
		if (strcmp(cmd, "approval") == 0)
			gbr_approval_show(arg);
		else if (strcmp(cmd, "edit") == 0)
			gbr_edit(arg);
		else if (strcmp(cmd, "deny") == 0)
			(void)gbr_resolve(arg, "deny", NULL, rest, NULL);
		else if (rest != NULL && strcmp(rest, "session") != 0)
			gbr_say("usage: /approve ID [session]\n");
		else
			(void)gbr_resolve(arg, "approve", NULL, NULL, rest);
	} else if (strcmp(cmd, "call") == 0 || strcmp(cmd, "status") == 0) {
		gbr_call_raw(strcmp(cmd, "status") == 0 ? "daemon.status" : arg,
		    strcmp(cmd, "status") == 0 ? NULL : rest);
	} else
		gbr_say("unknown command /%s (/help lists them)\n", cmd);
}

/* Handles one input line. */
static void
gbr_line(char *line)
{
	size_t	len;

	line[strcspn(line, "\r\n")] = '\0';
	line += strspn(line, " \t");
	len = strlen(line);
	while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
		line[--len] = '\0';
	/* After d, the whole line is the reason, even an empty one. */
	if (G.ask == ASK_REASON) {
		gbr_answer(line);
		return;
	}
	if (*line == '\0')
		return;
	if (line[0] == '/')
		gbr_command(line);
	else if (G.ask == ASK_DECISION)
		gbr_answer(line);
	else
		gbr_send(line);
}

/* The terminal is readable: one key for libedit. */
static void
gbr_stdin_tty(void)
{
	HistEvent	 hev;
	const char	*buf;
	char		*line;
	int		 count = 0;

	buf = el_gets(G.el, &count);
	if (buf == NULL || count <= 0)
		return;
	if (count == 1 && buf[0] == 4) {	/* Ctrl-D on an empty line */
		el_set(G.el, EL_UNBUFFERED, 0);
		G.editing = 0;
		fputc('\n', stdout);
		G.leave = 1;
		return;
	}
	if (buf[count - 1] != '\n' && buf[count - 1] != '\r')
		return;
	line = xstrdup(buf);
	el_set(G.el, EL_UNBUFFERED, 0);
	G.editing = 0;
	G.out_col = 0;
	line[strcspn(line, "\r\n")] = '\0';
	/* Answers to a question are not worth recalling. */
	if (line[strspn(line, " \t")] != '\0' && (G.ask == ASK_NONE ||
	    line[strspn(line, " \t")] == '/'))
		history(G.hist, &hev, H_ENTER, line);
	gbr_line(line);
	free(line);
	if (!G.leave) {
		el_set(G.el, EL_UNBUFFERED, 1);
		G.editing = 1;
		gbr_ask_update();	/* gives back a line put aside */
	}
}

/* stdin (not a terminal) is readable: complete lines are handled. */
static void
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

/* Reconnects after the connection was lost (or we were evicted) and catches up. */
static void
gbr_reconnect(void)
{
	const char	*epoch;
	char		*cause, name[64], kind[64];
	json_t		*res;
	int		 i, unreachable;

	G.need_reconnect = 0;
	client_free(G.cl);
	G.cl = NULL;
	gbr_tools_lost();
	gbr_say("%s* connection to gbrd lost; reconnecting%s\n",
	    render_color(&G.rd, "dim"), render_color(&G.rd, "reset"));
	snprintf(name, sizeof name, "gbr/%s", PACKAGE_VERSION);
	for (i = 0; i < GBR_RECONNECT_TRIES && !gbr_got_hup; i++) {
		if ((G.cl = client_connect(G.socket, CLIENT_AUTOSTART, name, &cause,
		    &unreachable)) != NULL)
			break;
		free(cause);
		usleep(250 * 1000);
	}
	if (G.cl == NULL) {
		gbr_say("! cannot reach gbrd on %s\n", G.socket);
		G.exit_code = 3;
		G.leave = 1;
		return;
	}
	client_set_event_cb(G.cl, gbr_event_cb, NULL);
	epoch = json_string_value(json_object_get(client_hello(G.cl), "epoch"));
	if (epoch != NULL && G.epoch != NULL && strcmp(epoch, G.epoch) != 0)
		gbr_say("%s* gbrd restarted (new epoch %s)%s\n",
		    render_color(&G.rd, "dim"), epoch, render_color(&G.rd, "reset"));
	free(G.epoch);
	G.epoch = xstrdup(epoch != NULL ? epoch : "");
	res = gbr_call("session.attach", json_pack("{s:s, s:I}", "session",
	    G.session, "after_seq", (json_int_t)G.last_seq), kind, sizeof kind);
	if (res == NULL) {
		if (strcmp(kind, "session_not_found") == 0)
			G.leave = 1;
		return;
	}
	gbr_set_session(json_object_get(res, "session"));
	json_decref(res);
	G.max_line = gbr_max_line();
	G.replaying = 1;
	gbr_appr_sync();
}

/* The daemon no longer has the events we missed: show them from the history. */
static void
gbr_resync(void)
{
	json_t		*hist, *m, *res;
	size_t		 i;

	G.need_resync = 0;
	if ((hist = gbr_call("session.history", json_pack("{s:s, s:i}", "session",
	    G.session, "limit", 1000), NULL, 0)) == NULL)
		return;
	json_array_foreach(json_object_get(hist, "messages"), i, m) {
		if (json_integer_value(json_object_get(m, "seq")) > G.last_seq)
			gbr_render(m, 1);
	}
	G.last_seq = json_integer_value(json_object_get(hist, "seq"));
	json_decref(hist);
	res = gbr_call("session.attach", json_pack("{s:s, s:I}", "session",
	    G.session, "after_seq", (json_int_t)G.last_seq), NULL, 0);
	if (res != NULL) {
		gbr_set_session(json_object_get(res, "session"));
		G.replaying = 1;
		gbr_appr_sync();
	}
	json_decref(res);
}

/* Ctrl-C: cancel the turn, or clear the line, or (twice) leave. */
static void
gbr_interrupt(void)
{
	const LineInfo	*li;
	long long	 now = gbr_now_ms();
	json_t		*res;

	if (G.ask == ASK_REASON) {
		/* Back to the question: nothing was denied. */
		G.ask = ASK_DECISION;
		gbr_set_line(NULL, NULL);
		G.last_int_ms = 0;
		return;
	}
	if (G.running) {
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

/* Sets up signals: handlers with SA_RESTART, woken through a pipe. */
static void
gbr_signals(void)
{
	struct sigaction	sa;
	int			i;

	if (pipe(gbr_sigpipe) != 0) {
		perror("gbr: pipe");
		exit(1);
	}
	for (i = 0; i < 2; i++) {
		fcntl(gbr_sigpipe[i], F_SETFL, O_NONBLOCK);
		fcntl(gbr_sigpipe[i], F_SETFD, FD_CLOEXEC);
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = gbr_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Sets up libedit and the input history file. */
static void
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
	el_source(G.el, NULL);
}

/* The main loop. */
static void
gbr_loop(void)
{
	struct pollfd	pfd[3];
	char		drain[64];
	int		n, timeout;

	while (!G.leave) {
		if (gbr_got_hup) {
			G.hangup = 1;
			break;
		}
		if (G.need_reconnect)
			gbr_reconnect();
		if (G.need_resync && !G.need_reconnect)
			gbr_resync();
		gbr_drain();
		if (G.leave || G.need_reconnect || G.need_resync)
			continue;
		/* Without a terminal, input ended: wait for our own turn. */
		if (G.ieof && G.sent_turn <= G.ended_turn && G.ntools == 0)
			break;
		pfd[0].fd = G.ieof ? -1 : STDIN_FILENO;
		pfd[0].events = POLLIN;
		pfd[1].fd = client_fd(G.cl);
		pfd[1].events = POLLIN;
		pfd[2].fd = gbr_sigpipe[0];
		pfd[2].events = POLLIN;
		timeout = G.running && G.editing && G.ask == ASK_NONE ?
		    GBR_SPIN_MS : -1;
		n = poll(pfd, 3, timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (pfd[2].revents & POLLIN))
			while (read(gbr_sigpipe[0], drain, sizeof drain) > 0)
				;
		if (gbr_got_winch) {
			gbr_got_winch = 0;
			if (G.editing) {
				el_resize(G.el);
				gbr_redraw();
			}
		}
		if (gbr_got_int) {
			gbr_got_int = 0;
			gbr_interrupt();
		}
		if (n > 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
			gbr_drain();
		if (n > 0 && !G.leave && (pfd[0].revents & (POLLIN | POLLHUP))) {
			if (G.tty)
				gbr_stdin_tty();
			else
				gbr_stdin_plain();
		}
		if (n == 0 && G.running && G.editing && G.ask == ASK_NONE) {
			G.spin++;
			gbr_redraw();
		}
	}
}

/* Chooses the session: the named one, or the one for the folder. */
static int
gbr_open(const char *name, int dir_given)
{
	json_t	*res, *params;
	char	 kind[64];

	if (name != NULL && !dir_given) {
		if (gbr_attach(name, GBR_SHOW_MESSAGES) != 0)
			return -1;
		return 0;
	}
	params = json_pack("{s:s, s:b}", "workspace", G.dir, "reuse", 1);
	if (name != NULL)
		json_object_set_new(params, "name", json_string(name));
	if ((res = gbr_call("session.create", params, kind, sizeof kind)) == NULL)
		return -1;
	if (G.tty)
		gbr_say("%s* %s session %s on %s%s\n", render_color(&G.rd, "dim"),
		    json_is_true(json_object_get(res, "created")) ? "new" :
		    "attached to", json_string_value(json_object_get(res, "id")),
		    G.dir, render_color(&G.rd, "reset"));
	if (gbr_attach(json_string_value(json_object_get(res, "id")),
	    GBR_SHOW_MESSAGES) != 0) {
		json_decref(res);
		return -1;
	}
	json_decref(res);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "session",	required_argument,	NULL, 's' },
		{ "list",	no_argument,		NULL, 'l' },
		{ "socket",	required_argument,	NULL, 'S' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "version",	no_argument,		NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*socket_flag = NULL, *name = NULL, *epoch;
	char		*cause, cname[64];
	HistEvent	 hev;
	int		 ch, unreachable, list = 0, dir_given;

	while ((ch = getopt_long(argc, argv, "s:lhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': name = optarg; break;
		case 'l': list = 1; break;
		case 'S': socket_flag = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("gbr %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind > 1) {
		usage(stderr);
		return 2;
	}
	dir_given = argc - optind == 1;
	if (realpath(dir_given ? argv[optind] : ".", G.dir) == NULL) {
		fprintf(stderr, "gbr: %s: %s\n", dir_given ? argv[optind] : ".",
		    strerror(errno));
		return 2;
	}
	G.tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	G.rd.out = stdout;
	G.rd.color = render_want_color(STDOUT_FILENO);
	G.rd.quiet_local = 1;
	G.socket = paths_socket(socket_flag);
	gbr_signals();

	snprintf(cname, sizeof cname, "gbr/%s", PACKAGE_VERSION);
	if ((G.cl = client_connect(G.socket, CLIENT_AUTOSTART, cname, &cause,
	    &unreachable)) == NULL) {
		fprintf(stderr, "gbr: %s\n", cause);
		free(cause);
		free(G.socket);
		return 3;
	}
	client_set_event_cb(G.cl, gbr_event_cb, NULL);
	epoch = json_string_value(json_object_get(client_hello(G.cl), "epoch"));
	G.epoch = xstrdup(epoch != NULL ? epoch : "");
	G.max_line = gbr_max_line();
	G.appr = json_array();
	G.appr_mine = json_object();
	if (list) {
		gbr_list();
		json_decref(G.appr);
		json_decref(G.appr_mine);
		client_free(G.cl);
		free(G.socket);
		free(G.epoch);
		return 0;
	}
	if (gbr_open(name, dir_given) != 0) {
		json_decref(G.appr);
		json_decref(G.appr_mine);
		free(G.workspace);
		client_free(G.cl);
		free(G.socket);
		free(G.epoch);
		return 1;
	}
	if (G.tty) {
		gbr_say("%s* %s (env %s); /help for commands, Ctrl-D detaches%s\n",
		    render_color(&G.rd, "dim"), G.label + 4, G.env,
		    render_color(&G.rd, "reset"));
		gbr_editor();
		el_set(G.el, EL_UNBUFFERED, 1);
		G.editing = 1;
	}

	gbr_loop();

	if (G.tty) {
		if (G.editing) {
			el_set(G.el, EL_UNBUFFERED, 0);
			if (!G.hangup)
				fputc('\n', stdout);
		}
		G.editing = 0;
		if (G.histfile != NULL)
			history(G.hist, &hev, H_SAVE, G.histfile);
		el_end(G.el);
		history_end(G.hist);
		if (!G.hangup && G.out_col > 0)
			fputc('\n', stdout);
	}
	if (G.cl != NULL && G.session != NULL) {
		/* Detaching is what closing the connection does too; say it anyway. */
		json_decref(client_call(G.cl, "session.detach", json_pack("{s:s}",
		    "session", G.session), 1000, &cause) );
		if (cause != NULL)
			free(cause);
	}
	if (G.tty && !G.hangup && G.ntools > 0)
		printf("%d /run or /tool call%s not answered yet: a running one "
		    "goes on (/history shows its result), one waiting for an "
		    "approval is withdrawn\n", G.ntools, G.ntools == 1 ? "" :
		    "s");
	while (G.ntools > 0)
		free(G.tools[--G.ntools].what);
	if (G.tty && !G.hangup)
		printf("detached from %s; it keeps running (gbr -s %s to come back)\n",
		    G.label + 4, G.label + 4);
	client_free(G.cl);
	json_decref(G.appr);
	json_decref(G.appr_mine);
	free(G.ask_id);
	free(G.saved_line);
	free(G.workspace);
	free(G.session);
	free(G.label);
	free(G.env);
	free(G.epoch);
	free(G.my_rid);
	free(G.histfile);
	free(G.ibuf);
	free(G.socket);
	/* Scripted, a failed /run or /tool fails gbr (gbr(1), EXIT STATUS). */
	if (G.exit_code == 0 && G.tool_failed && !G.tty)
		return 4;
	return G.exit_code;
}
