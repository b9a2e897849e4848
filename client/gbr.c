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
 * Keys: Enter sends; Ctrl-C cancels the running turn, else clears the
 * line, and twice in a row leaves; Ctrl-D on an empty line detaches and
 * leaves (the session keeps running); closing the terminal (SIGHUP)
 * detaches cleanly.
 */
#include "gbr-config.h"

#include <sys/ioctl.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <histedit.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
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

struct gbr {
	char		*socket;
	char		 dir[PATH_MAX];
	struct client	*cl;
	char		*epoch;
	char		*session;	/* id of the attached session */
	char		*label;		/* its name, or its id */
	char		*env;
	long long	 last_seq;	/* last event seen */
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
	long long	 last_int_ms;

	char		*ibuf;		/* lines read without a terminal */
	size_t		 ilen;
	int		 ieof;
	int		 idiscard;	/* skipping the rest of an over-long line */
};

static struct gbr		 G;
static int			 gbr_sigpipe[2] = { -1, -1 };
static volatile sig_atomic_t	 gbr_got_int, gbr_got_hup, gbr_got_winch;

static void	gbr_event(const json_t *);

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
"Ctrl-D detaches (the session keeps running in gbrd).\n");
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

/* libedit prompt: the session, and a spinner with the elapsed time during a turn. */
static char *
gbr_prompt(EditLine *el)
{
	static const char	spin[] = "|/-\\";
	long long		ms;

	if (G.running) {
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

/* Writes output above the prompt. */
static void
gbr_write(const char *buf, size_t len)
{
	if (len == 0 || G.hangup)
		return;
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

/* Event callback of client_call: events read while waiting for a reply. */
static void
gbr_event_cb(void *arg, json_t *msg)
{
	gbr_event(json_object_get(msg, "params"));
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
			if (strcmp(state, "awaiting_approval") == 0)
				gbr_render(p, 0);
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
		json_decref(msg);
	}
	if (cause != NULL) {
		free(cause);
		G.need_reconnect = 1;
	}
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
		gbr_say("%s! %s (%s)%s\n", render_color(&G.rd, "error"),
		    client_error_message(reply) != NULL ?
		    client_error_message(reply) : "error",
		    client_error_kind(reply) != NULL ? client_error_kind(reply) : "?",
		    render_color(&G.rd, "reset"));
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

/* Shows the approvals waiting in this session, where the daemon has them. */
static void
gbr_show_approvals(void)
{
	json_t	*res, *a, *list;
	size_t	 i;

	if (!gbr_has_method("approval.list"))
		return;
	if ((res = gbr_call("approval.list", json_pack("{s:s}", "session",
	    G.session), NULL, 0)) == NULL)
		return;
	list = json_is_array(res) ? res : json_object_get(res, "approvals");
	json_array_foreach(list, i, a) {
		json_t	*ev = json_deep_copy(a);

		json_object_set_new(ev, "type", json_string("approval.requested"));
		gbr_render(ev, 0);
		json_decref(ev);
	}
	json_decref(res);
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
	res = gbr_call("session.attach", json_pack("{s:s, s:I}", "session",
	    json_string_value(json_object_get(hist, "session")), "after_seq",
	    (json_int_t)G.last_seq), NULL, 0);
	json_decref(hist);
	if (res == NULL)
		return -1;
	gbr_set_session(json_object_get(res, "session"));
	json_decref(res);
	gbr_show_approvals();
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
"  /close            close this session for good and leave\n"
"  /detach, /quit    leave; the session keeps running (also Ctrl-D)\n"
"  /status, /call METHOD [JSON]   the daemon's state; any protocol method\n"
"Keys: Ctrl-C cancels a running turn, clears the line, twice leaves;\n"
"Ctrl-D on an empty line detaches; Up/Down walk the input history.\n");
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
	} else if (strcmp(cmd, "close") == 0) {
		if ((res = gbr_call("session.close", json_pack("{s:s}", "session",
		    G.session), NULL, 0)) != NULL) {
			json_decref(res);
			G.leave = 1;
		}
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
	if (*line == '\0')
		return;
	if (line[0] == '/')
		gbr_command(line);
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
	if (line[strspn(line, " \t")] != '\0')
		history(G.hist, &hev, H_ENTER, line);
	gbr_line(line);
	free(line);
	if (!G.leave) {
		el_set(G.el, EL_UNBUFFERED, 1);
		G.editing = 1;
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
	if (res != NULL)
		gbr_set_session(json_object_get(res, "session"));
	json_decref(res);
}

/* Ctrl-C: cancel the turn, or clear the line, or (twice) leave. */
static void
gbr_interrupt(void)
{
	const LineInfo	*li;
	long long	 now = gbr_now_ms();
	json_t		*res;

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
		if (G.ieof && G.sent_turn <= G.ended_turn)
			break;
		pfd[0].fd = G.ieof ? -1 : STDIN_FILENO;
		pfd[0].events = POLLIN;
		pfd[1].fd = client_fd(G.cl);
		pfd[1].events = POLLIN;
		pfd[2].fd = gbr_sigpipe[0];
		pfd[2].events = POLLIN;
		timeout = G.running && G.editing ? GBR_SPIN_MS : -1;
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
		if (n == 0 && G.running && G.editing) {
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
	if (list) {
		gbr_list();
		client_free(G.cl);
		free(G.socket);
		free(G.epoch);
		return 0;
	}
	if (gbr_open(name, dir_given) != 0) {
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
	if (G.tty && !G.hangup)
		printf("detached from %s; it keeps running (gbr -s %s to come back)\n",
		    G.label + 4, G.label + 4);
	client_free(G.cl);
	free(G.session);
	free(G.label);
	free(G.env);
	free(G.epoch);
	free(G.my_rid);
	free(G.histfile);
	free(G.ibuf);
	free(G.socket);
	return G.exit_code;
}
