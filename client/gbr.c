/*
 * gbr: the interactive client (the REPL). It starts gbrd when nobody
 * answers on the socket (under the start lock, so two terminals starting at
 * once end with one daemon), creates or re-attaches the session for a
 * folder, and then is a chat: lines are messages, "/" lines are commands,
 * and the session's events are printed as they come, from this terminal's
 * turns and from every other terminal attached to the same session.
 *
 * This file owns main, the program's state (G), the connection (calls,
 * events, reconnecting and catching up) and the one poll loop, which
 * multiplexes the terminal, the daemon's socket and what wakes it for a
 * key that is not a line (platform/console.h: a self-pipe for signals on
 * Unix). The terminal and the editor are gbr-term.c's, approvals
 * gbr-approvals.c's, the /commands gbr-cmds.c's (gbr-int.h says what they
 * share).
 *
 * Without a terminal on stdin gbr reads plain lines (for scripts and
 * tests), prints events without a prompt, and at end of input waits for
 * the turn it started to end before it detaches.
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "console.h"
#include "gbr-int.h"
#include "paths.h"
#include "render.h"
#include "xmalloc.h"

struct gbr			 G;
volatile sig_atomic_t		 gbr_got_int, gbr_got_hup, gbr_got_winch;

static void	gbr_event(const json_t *);
static void	gbr_message(const json_t *);

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
"  -H, --history N     messages of the history shown on attaching (default:\n"
"                      20 on a terminal, 0 when piped: a script sees only\n"
"                      what its own lines produce)\n"
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
long long
gbr_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A key or the terminal's fate, from console_catch (on Unix in a signal
 * handler): note it; the console wakes the loop.
 */
static void
gbr_signal(int what)
{
	if (what == CONSOLE_SIG_INT)
		gbr_got_int = 1;
	else if (what == CONSOLE_SIG_WINCH)
		gbr_got_winch = 1;
	else
		gbr_got_hup = 1;
}

/*
 * Event callback of client_call: events, and answers to /tool and /run,
 * read while waiting for another reply.
 */
static void
gbr_event_cb(void *arg, json_t *msg)
{
	gbr_message(msg);
}

/*
 * One message from gbrd that is not the reply being waited for: an event,
 * daemon.stopping (gbrd stops on purpose: no other is started in its
 * place, see gbr_reconnect), or the answer to a /tool or /run.
 */
static void
gbr_message(const json_t *msg)
{
	const char	*method = json_string_value(json_object_get(msg, "method"));
	const char	*why;

	if (method != NULL && strcmp(method, "daemon.stopping") == 0) {
		why = json_string_value(json_object_get(json_object_get(msg,
		    "params"), "reason"));
		free(G.stopped);
		G.stopped = render_escape(why != NULL ? why : "", why != NULL ?
		    strlen(why) : 0, 0, 120);
	} else if (method != NULL)
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
	/*
	 * Live-only events (the answer as it streams, a command's output as
	 * it runs) repeat the last seq: never logged, never replayed, so each
	 * one that arrives is new.
	 */
	if (strcmp(type, "message.delta") == 0 ||
	    strcmp(type, "tool.output") == 0) {
		if (gbr_tool_event(p))
			return;
		if (strcmp(type, "tool.output") == 0)
			gbr_show_output(p);	/* a long one is cut */
		else
			gbr_render(p, 0);
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
	if ((strcmp(type, "tool.call") == 0 || strcmp(type, "tool.result") == 0)
	    && gbr_tool_event(p))
		return;		/* our own /run or /tool: its answer says it */
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
void
gbr_drain(void)
{
	json_t	*msg;
	char	*cause = NULL;

	if (G.cl == NULL)
		return;
	while ((msg = client_read(G.cl, 0, &cause)) != NULL) {
		gbr_message(msg);
		json_decref(msg);
	}
	if (cause != NULL) {
		free(cause);
		G.need_reconnect = 1;
	}
}

/* Prints an error reply: its message and kind, escaped. */
void
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
json_t *
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

/* Makes a random request_id (new). */
char *
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
	const char	*id = json_string_value(json_object_get(info, "id"));

	/* Another session: what was typed for this one, and its turns, stay. */
	if (G.session != NULL && id != NULL && strcmp(G.session, id) != 0) {
		gbr_queue_clear();
		G.sent_turn = G.ended_turn = 0;
	}
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
int
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

/*
 * Shows the recent history of a session, then attaches right after it, so
 * nothing is shown twice and nothing is missed.
 */
int
gbr_attach(const char *key, int show)
{
	json_t		*hist, *res, *m;
	char		*old;
	size_t		 i;
	long long	 total, seq;

	/* limit is at least 1: with show 0, the one message is not shown. */
	if ((hist = gbr_call("session.history", json_pack("{s:s, s:i}", "session",
	    key, "limit", show > 0 ? show : 1), NULL, 0)) == NULL)
		return -1;
	total = json_integer_value(json_object_get(hist, "total"));
	if (show > 0 && total > (long long)json_array_size(json_object_get(hist,
	    "messages")))
		gbr_say("%s* %lld earlier messages (/history N shows more)%s\n",
		    render_color(&G.rd, "dim"), total - (long long)json_array_size(
		    json_object_get(hist, "messages")), render_color(&G.rd, "reset"));
	/* Its tool results are numbered as that session's (for /show). */
	G.hist_session = json_string_value(json_object_get(hist, "session"));
	if (show > 0)
		json_array_foreach(json_object_get(hist, "messages"), i, m)
			gbr_render(m, 1);
	G.hist_session = NULL;
	seq = json_integer_value(json_object_get(hist, "seq"));
	res = gbr_call("session.attach", json_pack("{s:s, s:I}", "session",
	    json_string_value(json_object_get(hist, "session")), "after_seq",
	    (json_int_t)seq), NULL, 0);
	json_decref(hist);
	if (res == NULL)
		return -1;	/* still on the session we were on */
	/* The approvals asked here so far were the other session's. */
	if (G.ask != ASK_NONE)
		gbr_set_line(NULL, NULL);
	gbr_appr_clear();
	old = G.session != NULL ? xstrdup(G.session) : NULL;
	G.last_seq = seq;
	gbr_set_session(json_object_get(res, "session"));
	json_decref(res);
	/* Attached to the new one: leave the one we were on (events stop). */
	if (old != NULL && strcmp(old, G.session) != 0)
		json_decref(gbr_call("session.detach", json_pack("{s:s}",
		    "session", old), NULL, 0));
	free(old);
	G.replaying = 1;
	gbr_appr_sync();
	return 0;
}

/* Sends a message. */
static void
gbr_send(const char *text)
{
	json_t	*res;
	char	 kind[64];

	/* A turn runs, or ours was sent and has not ended yet. */
	if (G.running || G.sent_turn > G.ended_turn) {
		/* Sent, in order, as each turn ends (gbr_send_queued). */
		if (G.nqueue >= GBR_QUEUE_MAX) {
			gbr_say("! %d messages wait already: not queued\n",
			    GBR_QUEUE_MAX);
			return;
		}
		G.queue[G.nqueue++] = xstrdup(text);
		gbr_say("%s* queued (%d waiting): sent when this turn ends; "
		    "Ctrl-C or /cancel clears%s\n", render_color(&G.rd, "dim"),
		    G.nqueue, render_color(&G.rd, "reset"));
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

/* Forgets the queued messages (see gbr-int.h). */
void
gbr_queue_clear(void)
{
	int	n = G.nqueue;

	while (G.nqueue > 0)
		free(G.queue[--G.nqueue]);
	if (n > 0)
		gbr_say("%s* %d queued message%s cleared%s\n",
		    render_color(&G.rd, "dim"), n, n == 1 ? "" : "s",
		    render_color(&G.rd, "reset"));
}

/* The turn ended: the next queued message goes. */
static void
gbr_send_queued(void)
{
	char	*text;
	int	 i;

	if (G.nqueue == 0 || G.running || G.sent_turn > G.ended_turn ||
	    G.cl == NULL || G.ask != ASK_NONE)
		return;
	text = G.queue[0];
	for (i = 1; i < G.nqueue; i++)
		G.queue[i - 1] = G.queue[i];
	G.nqueue--;
	gbr_say("%s> %s%s\n", render_color(&G.rd, "user"), text,
	    render_color(&G.rd, "reset"));
	gbr_send(text);
	free(text);
}

/* Handles one input line. */
void
gbr_line(char *line)
{
	size_t	len;

	line[strcspn(line, "\r\n")] = '\0';
	line += strspn(line, " \t");
	len = strlen(line);
	while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
		line[--len] = '\0';
	if (G.waiting && (len == 0 || line[0] != '/')) {
		if (len > 0)
			gbr_say("! gbrd is stopped: not sent; start it (gbrd) and "
			    "gbr reconnects\n");
		return;
	}
	/* After d, the whole line is the reason, even an empty one. */
	if (G.ask == ASK_REASON) {
		gbr_answer(line);
		return;
	}
	if (G.ask == ASK_REWIND) {
		gbr_rewind_answer(line);
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

/*
 * Sends a message of several lines (typed with Alt-Enter or pasted): it is
 * a message even if it starts with '/', and its newlines are kept; only
 * blank lines and blanks at its end go.
 */
void
gbr_message_text(char *text)
{
	size_t	len = strlen(text);

	while (len > 0 && strchr(" \t\r\n", text[len - 1]) != NULL)
		text[--len] = '\0';
	if (text[strspn(text, " \t\r\n")] == '\0')
		return;
	if (G.waiting) {
		gbr_say("! gbrd is stopped: not sent; start it (gbrd) and gbr "
		    "reconnects\n");
		return;
	}
	gbr_send(text);
}

/* Reconnects after the connection was lost (or we were evicted) and catches up. */
static void
gbr_reconnect(void)
{
	const char	*epoch;
	char		*cause, *last = NULL, name[64], kind[64];
	json_t		*res;
	int		 i, unreachable;

	G.need_reconnect = 0;
	client_free(G.cl);
	G.cl = NULL;
	gbr_tools_lost();
	if (!G.waiting)
		gbr_say("%s* connection to gbrd lost; reconnecting%s\n",
		    render_color(&G.rd, "dim"), render_color(&G.rd, "reset"));
	snprintf(name, sizeof name, "gbr/%s", PACKAGE_VERSION);
	/*
	 * A gbrd that said it stops on purpose (gbrctl shutdown, systemctl
	 * stop) is not started again behind the person's back: gbr connects
	 * to one that someone starts (a restart, socket activation), and
	 * waits for it. A gbrd that died without a word is started again.
	 */
	for (i = 0; i < (G.waiting ? 1 : GBR_RECONNECT_TRIES) && !gbr_got_hup;
	    i++) {
		if ((G.cl = client_connect(G.socket, G.stopped != NULL ?
		    CLIENT_NO_START : CLIENT_AUTOSTART, name, &cause,
		    &unreachable)) != NULL)
			break;
		free(last);
		last = cause;
		if (!G.waiting)
			usleep(250 * 1000);
	}
	if (G.cl == NULL && G.stopped != NULL && unreachable) {
		if (!G.waiting)
			gbr_say("%s! gbrd was stopped (%s) and is not started "
			    "again on its own: start it (gbrd, or systemctl "
			    "--user start gbrd) and gbr reconnects; Ctrl-D "
			    "leaves%s\n", render_color(&G.rd, "error"),
			    G.stopped, render_color(&G.rd, "reset"));
		G.waiting = 1;
		G.running = 0;	/* no turn runs without a gbrd */
		free(last);
		return;
	}
	if (G.cl == NULL) {
		/* Say why: a refused folder or server is not a daemon away. */
		if (last != NULL)
			gbr_say("! cannot reach gbrd on %s: %s\n", G.socket, last);
		else
			gbr_say("! cannot reach gbrd on %s\n", G.socket);
		free(last);
		G.exit_code = 3;
		G.leave = 1;
		return;
	}
	free(last);
	if (G.waiting)
		gbr_say("%s* gbrd is back; reconnected%s\n",
		    render_color(&G.rd, "dim"), render_color(&G.rd, "reset"));
	free(G.stopped);
	G.stopped = NULL;
	G.waiting = 0;
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

/* Catches Ctrl-C, a closed terminal and a new size; exits if it cannot. */
static void
gbr_signals(void)
{
	char	*cause;

	if ((G.wake_fd = console_catch(gbr_signal, &cause)) == -1) {
		fprintf(stderr, "gbr: %s\n", cause);
		free(cause);
		exit(1);
	}
}

/* The main loop. */
static void
gbr_loop(void)
{
	struct pollfd	pfd[3];
	int		n, timeout, held;

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
		gbr_send_queued();
		if (G.waiting && G.ieof)
			break;	/* a script: nothing more can happen */
		/* Without a terminal, input ended: wait for our own turn. */
		if (G.ieof && G.sent_turn <= G.ended_turn && G.ntools == 0 &&
		    G.nqueue == 0)
			break;
		pfd[0].fd = G.ieof ? -1 : G.in_fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = G.cl != NULL ? client_fd(G.cl) : -1;
		pfd[1].events = POLLIN;
		pfd[2].fd = G.wake_fd;
		pfd[2].events = POLLIN;
		timeout = G.running && G.editing && G.ask == ASK_NONE ?
		    GBR_SPIN_MS : -1;
		if (G.waiting)
			timeout = 1000;	/* looks for a gbrd each second */
		/* Input the console took while output was written: read it now. */
		if ((held = G.editing && console_edit_held()))
			timeout = 0;
		n = gbr_poll(pfd, 3, timeout);
		if (n == 0 && G.waiting)
			G.need_reconnect = 1;
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (pfd[2].revents & POLLIN))
			console_catch_drain();
		if (gbr_got_winch) {
			gbr_got_winch = 0;
			if (G.editing) {
				console_resize();
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
		} else if (held && !G.leave && G.editing)
			gbr_stdin_tty();
		if (n == 0 && !held && G.running && G.editing &&
		    G.ask == ASK_NONE) {
			G.spin++;
			gbr_redraw();
		}
	}
}

/*
 * Says once, at start, what keeps the agent's commands in here (or that
 * they are refused, and why): on a terminal as a dim line, and a refusal
 * on any output, since a script would otherwise only see its /run fail.
 */
static void
gbr_say_sandbox(void)
{
	json_t		*res, *rn, *ll, *sc, *ns;
	const char	*cmds, *refusal;

	if ((res = gbr_call("daemon.status", NULL, NULL, 0)) == NULL)
		return;
	rn = json_object_get(json_object_get(res, "security"), "runner");
	cmds = json_string_value(json_object_get(rn, "commands"));
	refusal = json_string_value(json_object_get(rn, "refusal"));
	ll = json_object_get(rn, "landlock");
	sc = json_object_get(rn, "seccomp");
	ns = json_object_get(rn, "namespaces");
	if (cmds != NULL && strcmp(cmds, "allowed") != 0)
		gbr_say("%s! %s%s\n", render_color(&G.rd, "error"),
		    refusal != NULL ? refusal : "commands cannot run here "
		    "(gbrctl status says why)", render_color(&G.rd, "reset"));
	else if (G.tty && cmds != NULL)
		gbr_say("%s* commands: %s, Landlock %s, seccomp %s%s\n",
		    render_color(&G.rd, "dim"),
		    json_is_true(json_object_get(ns, "active")) ?
		    "own namespaces" : "no namespaces (supervised; protected "
		    "paths checked after each command)",
		    json_is_true(json_object_get(ll, "active")) ? "on" : "off",
		    json_is_true(json_object_get(sc, "active")) ? "on" : "off",
		    render_color(&G.rd, "reset"));
	json_decref(res);
}

/* Chooses the session: the named one, or the one for the folder. */
static int
gbr_open(const char *name, int dir_given)
{
	json_t	*res, *params;
	char	 kind[64];

	if (name != NULL && !dir_given) {
		if (gbr_attach(name, G.show) != 0)
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
	    G.show) != 0) {
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
		{ "history",	required_argument,	NULL, 'H' },
		{ "socket",	required_argument,	NULL, 'S' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "version",	no_argument,		NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*socket_flag = NULL, *name = NULL, *epoch;
	char		*cause, cname[64];
	int		 ch, unreachable, list = 0, dir_given, show = -1;
	char		*end;
	long		 n;

	/* Before anything else, so no other process of ours can take our socket. */
	client_protect_process();
	while ((ch = getopt_long(argc, argv, "s:lH:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': name = optarg; break;
		case 'l': list = 1; break;
		case 'H':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' || n < 0 ||
			    n > GBR_HISTORY_MAX) {
				fprintf(stderr, "gbr: --history takes 0 to %d "
				    "messages\n", GBR_HISTORY_MAX);
				return 2;
			}
			show = (int)n;
			break;
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
	G.tty = console_is_terminal();
	if (G.tty)
		console_early();
	/* A script gets only what its lines produce, unless it asks. */
	G.show = show >= 0 ? show : G.tty ? GBR_SHOW_MESSAGES : 0;
	G.rd.out = stdout;
	G.rd.color = render_want_color(STDOUT_FILENO) && console_colors();
	G.rd.quiet_local = 1;
	G.socket = paths_socket(socket_flag);
	gbr_signals();
	if ((G.in_fd = console_input_fd(&cause)) == -1) {
		fprintf(stderr, "gbr: %s\n", cause);
		free(cause);
		free(G.socket);
		return 1;
	}

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
		client_free(G.cl);
		free(G.socket);
		free(G.epoch);
		return 1;
	}
	gbr_say_sandbox();
	if (G.tty) {
		gbr_say_model();
		gbr_say_project();
		gbr_say("%s* %s (env %s); /help for commands, Ctrl-D detaches%s\n",
		    render_color(&G.rd, "dim"), G.label + 4, G.env,
		    render_color(&G.rd, "reset"));
		gbr_editor();
		console_edit_on();
		G.editing = 1;
		gbr_paste_mode(1);
	}

	gbr_loop();

	if (G.tty) {
		gbr_paste_mode(0);
		gbr_block_clear();
		if (G.editing) {
			console_edit_off();
			if (!G.hangup)
				console_write("\n", 1);
		}
		G.editing = 0;
		console_edit_close(G.histfile);
		if (!G.hangup && G.out_col > 0)
			console_write("\n", 1);
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
		gbr_tool_forget(G.ntools - 1);
	if (G.tty && !G.hangup)
		printf("detached from %s; it keeps running (gbr -s %s to come back)\n",
		    G.label + 4, G.label + 4);
	client_free(G.cl);
	json_decref(G.appr);
	json_decref(G.appr_mine);
	free(G.ask_id);
	free(G.saved_line);
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
