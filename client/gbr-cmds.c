/*
 * The REPL's "/" commands: a table of them (name, arguments, handler, one
 * line of help; gbrctl's model), from which /help is made, and /run and
 * /tool, which start a tool in the session without waiting and show its
 * answer when it comes.
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
#include "render.h"
#include "xmalloc.h"

#define GBR_HELP_COLS		76	/* /help wraps its lines here */
#define GBR_HELP_INDENT		19	/* and indents what it wraps */

/* A "/" command. */
struct gbr_cmd {
	const char	*name;
	const char	*aliases;	/* other names, between blanks, or NULL */
	const char	*args;		/* what follows it, for /help */
	const char	*help;		/* one line for /help */
	void		(*fn)(char *, char *);
	int		 flags;
#define GBR_CMD_LINE	0x1		/* takes the rest of the line whole */
};

/* /tools: the tools the agent has, as gbrd lists them (escaped). */
static void
gbr_cmd_tools(char *arg, char *rest)
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

/* Prints the session list. */
void
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
	char		*cause, *rid;

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
	rid = gbr_request_id();
	if ((id = client_send(G.cl, "tool.call", json_pack("{s:s, s:s, s:o, s:s}",
	    "session", G.session, "tool", tool, "args", args, "request_id", rid),
	    &cause)) < 0) {
		free(rid);
		gbr_say("%s! %s%s\n", render_color(&G.rd, "error"), cause,
		    render_color(&G.rd, "reset"));
		free(cause);
		G.need_reconnect = 1;
		G.tool_failed = 1;
		return;
	}
	G.tools[G.ntools].id = id;
	G.tools[G.ntools].what = render_escape(what, strlen(what), 0, 200);
	G.tools[G.ntools].rid = rid;
	G.tools[G.ntools].call_id = NULL;
	G.tools[G.ntools].live = 0;
	G.tools[G.ntools].seq = 0;
	G.ntools++;
}

/* Forgets slot i of the answers awaited. */
void
gbr_tool_forget(int i)
{
	free(G.tools[i].what);
	free(G.tools[i].rid);
	free(G.tools[i].call_id);
	G.tools[i] = G.tools[--G.ntools];
}

/*
 * The events of our own /run and /tool: the call (its line is on the
 * screen already) and its result (its answer says it) are not shown; its
 * live output is, on a terminal, and then the answer gives only how it
 * ended. A script gets the answer's block alone.
 */
int
gbr_tool_event(const json_t *p)
{
	const char	*type = json_string_value(json_object_get(p, "type"));
	const char	*rid = json_string_value(json_object_get(p,
			    "call_request_id"));
	const char	*cid = json_string_value(json_object_get(p, "call_id"));
	int		 i;

	if (type == NULL || cid == NULL)
		return 0;
	for (i = 0; i < G.ntools; i++) {
		if (strcmp(type, "tool.call") == 0 && rid != NULL &&
		    strcmp(rid, G.tools[i].rid) == 0) {
			free(G.tools[i].call_id);
			G.tools[i].call_id = xstrdup(cid);
			return 1;
		}
		if (G.tools[i].call_id == NULL ||
		    strcmp(cid, G.tools[i].call_id) != 0)
			continue;
		if (strcmp(type, "tool.output") == 0 && G.tty) {
			G.tools[i].live = 1;
			return 0;
		}
		/* Where its result is, should its output be cut (/show). */
		if (strcmp(type, "tool.result") == 0)
			G.tools[i].seq = json_integer_value(json_object_get(p,
			    "seq"));
		return 1;
	}
	return 0;
}

/* An answer read from gbrd that is no event: one to /tool or /run? */
void
gbr_tool_reply(const json_t *msg)
{
	const json_t		*id = json_object_get(msg, "id"), *res;
	struct gbr_capture	 cap;
	char			*what;
	long long		 n;
	int			 i, live, cut;

	for (i = 0; i < G.ntools; i++)
		if (json_is_integer(id) && json_integer_value(id) == G.tools[i].id)
			break;
	if (i == G.ntools)
		return;
	what = G.tools[i].what;
	G.tools[i].what = NULL;
	live = G.tools[i].live;
	/* Cut on the screen: all of it is one /show away. */
	cut = live && gbr_show_output_cut(G.tools[i].call_id);
	n = cut ? gbr_show_number(G.session, G.tools[i].seq) : 0;
	gbr_tool_forget(i);
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
			if (live) {
				render_run_end(&G.rd, res);
				if (n > 0)
					fprintf(cap.f, "%s  [%lld]: /show %lld "
					    "for all of its output%s\n",
					    render_color(&G.rd, "dim"), n, n,
					    render_color(&G.rd, "reset"));
				else if (cut)
					fprintf(cap.f, "%s  /history shows all "
					    "of its output%s\n", render_color(
					    &G.rd, "dim"), render_color(&G.rd,
					    "reset"));
			} else {
				fprintf(cap.f, "%s%s:%s\n", render_color(&G.rd,
				    "dim"), what, render_color(&G.rd, "reset"));
				render_run_result(&G.rd, res);
			}
			gbr_capture_end(&cap);
		}
	} else if (gbr_capture(&cap) != NULL) {
		render_close_line(&G.rd);
		fprintf(cap.f, "%s:\n", what);
		render_json_block(&G.rd, res);
		gbr_capture_end(&cap);
	}
	free(what);
	gbr_redraw();
}

/* Forgets the answers a lost connection took with it. */
void
gbr_tools_lost(void)
{
	while (G.ntools > 0) {
		gbr_say("* the answer to %s was lost with the connection; "
		    "/history shows its result\n", G.tools[G.ntools - 1].what);
		G.tool_failed = 1;
		gbr_tool_forget(G.ntools - 1);
	}
}

/* /tool NAME [JSON-ARGS] */
static void
gbr_cmd_tool(char *name, char *json)
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

/*
 * /run PROGRAM [ARGS...]: run_command with these words as its argv (line
 * is the rest of the line, whole).
 */
static void
gbr_cmd_run(char *line, char *rest)
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

/* A string field, escaped for a terminal, or "?" (for /status lines). */
static const char *
gbr_str(const json_t *o, const char *key)
{
	static char	 bufs[8][512];
	static int	 next;
	const json_t	*v = json_object_get(o, key);
	char		*e, *b;

	if (!json_is_string(v))
		return "?";
	b = bufs[next++ % 8];
	e = render_escape(json_string_value(v), json_string_length(v), 0, 400);
	snprintf(b, sizeof bufs[0], "%s", e != NULL ? e : "?");
	free(e);
	return b;
}

/* An integer field, or 0. */
static long long
gbr_int(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

static void	gbr_status_line(const char *, const char *, ...)
		    __attribute__((format(__printf__, 2, 3)));

/* One line of /status: a label in a column, then the text. */
static void
gbr_status_line(const char *label, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	gbr_say("%-10s %s\n", label, s);
	free(s);
}

/* The model line of a session's llm (session.list): new, or NULL. */
static char *
gbr_model_text(const json_t *llm)
{
	if (json_is_string(json_object_get(llm, "provider")))
		return xasprintf("%s %s (%s)", gbr_str(llm, "provider"),
		    gbr_str(llm, "model"), gbr_str(llm, "base_url"));
	if (json_is_true(json_object_get(llm, "local")))
		return xasprintf("a local Ollama (%s), its model found at each "
		    "turn", gbr_str(llm, "base_url"));
	if (json_is_string(json_object_get(llm, "none")))
		return xasprintf("none: %s", gbr_str(llm, "none"));
	return NULL;
}

/* This session's entry of session.list (new), or NULL. */
static json_t *
gbr_session_entry(void)
{
	json_t	*list, *v, *found = NULL;
	size_t	 i;

	if (G.session == NULL ||
	    (list = gbr_call("session.list", NULL, NULL, 0)) == NULL)
		return NULL;
	json_array_foreach(json_object_get(list, "sessions"), i, v)
		if (json_is_string(json_object_get(v, "id")) &&
		    strcmp(json_string_value(json_object_get(v, "id")),
		    G.session) == 0)
			found = json_incref(v);
	json_decref(list);
	return found;
}

/* The start-up line naming the model the session asks (see gbr-int.h). */
void
gbr_say_model(void)
{
	json_t	*s = gbr_session_entry();
	char	*m;

	if (s == NULL)
		return;
	if ((m = gbr_model_text(json_object_get(s, "llm"))) != NULL)
		gbr_say("%s* model: %s%s\n", render_color(&G.rd, "dim"), m,
		    render_color(&G.rd, "reset"));
	free(m);
	json_decref(s);
}

/* The start-up line naming the ecosystem (see gbr-int.h). */
void
gbr_say_project(void)
{
	json_t		*e;
	const char	*eco, *check;
	char		*esc;

	if (G.session == NULL || (e = gbr_call("env.show", json_pack("{s:s}",
	    "session", G.session), NULL, 0)) == NULL)
		return;
	eco = json_string_value(json_object_get(e, "ecosystem"));
	check = json_string_value(json_object_get(e, "check_command"));
	if (eco != NULL) {
		/* The check comes from a file of the workspace: escaped. */
		esc = check != NULL ? render_escape(check, strlen(check), 0,
		    200) : NULL;
		gbr_say("%s* project: %s; after a change: %s%s\n",
		    render_color(&G.rd, "dim"), eco, esc != NULL ? esc :
		    "no check", render_color(&G.rd, "reset"));
		free(esc);
	}
	json_decref(e);
}

/* /call METHOD [JSON]: any method, its result printed as JSON. */
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

/* /detach, /quit, /exit */
static void
gbr_cmd_detach(char *arg, char *rest)
{
	G.leave = 1;
}

/* /sessions, /list */
static void
gbr_cmd_sessions(char *arg, char *rest)
{
	gbr_list();
}

/* /attach NAME */
static void
gbr_cmd_attach(char *arg, char *rest)
{
	if (*arg == '\0') {
		gbr_say("usage: /attach NAME (/sessions lists them)\n");
		return;
	}
	/* A name that is not a session changes nothing: we stay attached. */
	if (gbr_attach(arg, GBR_SHOW_MESSAGES) == 0)
		gbr_say("* attached to %s\n", G.label + 4);
	else if (G.session != NULL)
		gbr_say("* still on %s\n", G.label + 4);
}

/* /new [NAME] */
static void
gbr_cmd_new(char *arg, char *rest)
{
	json_t	*res;

	res = gbr_call("session.create", *arg != '\0' ?
	    json_pack("{s:s, s:s}", "workspace", G.dir, "name", arg) :
	    json_pack("{s:s}", "workspace", G.dir), NULL, 0);
	if (res == NULL)
		return;
	if (gbr_attach(json_string_value(json_object_get(res, "id")), 0) == 0)
		gbr_say("* new session %s\n", G.label + 4);
	json_decref(res);
}

/* /history [N] */
static void
gbr_cmd_history(char *arg, char *rest)
{
	json_t	*res, *m;
	char	*end;
	size_t	 i;
	long	 n = 50;

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
	/* Taller than the terminal: through the pager. */
	gbr_page_begin();
	json_array_foreach(json_object_get(res, "messages"), i, m)
		gbr_render(m, 1);
	gbr_page_end();
	json_decref(res);
}

/* /cancel */
static void
gbr_cmd_cancel(char *arg, char *rest)
{
	json_t	*res;
	int	 queued = G.nqueue;

	gbr_queue_clear();
	if ((res = gbr_call("session.cancel", json_pack("{s:s}", "session",
	    G.session), NULL, 0)) == NULL)
		return;
	if (!json_is_true(json_object_get(res, "cancelled")) && queued == 0)
		gbr_say("nothing to cancel\n");
	json_decref(res);
}

/* /env */
static void
gbr_cmd_env(char *arg, char *rest)
{
	json_t	*res;
	char	*s;

	gbr_say("environment: %s\n", G.env);
	if (gbr_has_method("env.show") && (res = gbr_call("env.show",
	    json_pack("{s:s}", "session", G.session), NULL, 0)) != NULL) {
		s = json_dumps(res, JSON_INDENT(2));
		gbr_say("%s\n", s != NULL ? s : "?");
		free(s);
		json_decref(res);
	}
}

/* /approvals */
static void
gbr_cmd_approvals(char *arg, char *rest)
{
	gbr_approvals_cmd();
}

/*
 * Says how /approval, /approve, /deny and /edit are used when no ID is
 * given; returns 1 if it did.
 */
static int
gbr_cmd_need_id(const char *cmd, const char *arg)
{
	if (*arg != '\0')
		return 0;
	gbr_say("usage: /%s ID%s (/approvals lists them)\n", cmd,
	    strcmp(cmd, "deny") == 0 ? " [REASON]" :
	    strcmp(cmd, "approve") == 0 ? " [session]" : "");
	return 1;
}

/* /approval ID */
static void
gbr_cmd_approval(char *arg, char *rest)
{
	if (!gbr_cmd_need_id("approval", arg))
		gbr_approval_show(arg);
}

/* /approve ID [session] */
static void
gbr_cmd_approve(char *arg, char *rest)
{
	if (gbr_cmd_need_id("approve", arg))
		return;
	if (rest != NULL && strcmp(rest, "session") != 0)
		gbr_say("usage: /approve ID [session]\n");
	else
		(void)gbr_resolve(arg, "approve", NULL, NULL, rest);
}

/* /deny ID [REASON] */
static void
gbr_cmd_deny(char *arg, char *rest)
{
	if (!gbr_cmd_need_id("deny", arg))
		(void)gbr_resolve(arg, "deny", NULL, rest, NULL);
}

/* /edit ID */
static void
gbr_cmd_edit(char *arg, char *rest)
{
	if (!gbr_cmd_need_id("edit", arg))
		gbr_edit(arg);
}

/* /close */
static void
gbr_cmd_close(char *arg, char *rest)
{
	json_t	*res;

	if ((res = gbr_call("session.close", json_pack("{s:s}", "session",
	    G.session), NULL, 0)) != NULL) {
		json_decref(res);
		G.leave = 1;
	}
}

/*
 * The status line of what the session cost: the priced turns' sum, and
 * how many turns [prices] could not price (left out of the sum).
 */
static void
gbr_cost_line(json_t *u)
{
	json_t		*c = json_object_get(u, "cost_usd");
	json_t		*last = json_object_get(json_object_get(u, "last_turn"),
			    "cost_usd");
	long long	 unpriced = gbr_int(u, "unpriced_turns");
	char		 total[32], lc[32], left[96] = "";

	/* An older gbrd, or nothing asked of a model yet. */
	if (!json_is_number(c) || (gbr_int(u, "input_tokens") == 0 &&
	    gbr_int(u, "output_tokens") == 0 && unpriced == 0))
		return;
	if (json_number_value(c) <= 0 && unpriced > 0) {
		gbr_status_line("cost", "unknown: %lld turn%s without a price "
		    "(gbrd.conf [prices])", unpriced, unpriced == 1 ? "" : "s");
		return;
	}
	render_cost(total, sizeof total, json_number_value(c));
	snprintf(lc, sizeof lc, "unpriced");
	if (json_is_number(last))
		render_cost(lc, sizeof lc, json_number_value(last));
	if (unpriced > 0)
		snprintf(left, sizeof left, " (%lld turn%s without a price left "
		    "out)", unpriced, unpriced == 1 ? "" : "s");
	gbr_status_line("cost", "this session %s%s; last turn %s", total, left,
	    lc);
}

/* /status */
static void
gbr_cmd_status(char *arg, char *rest)
{
	json_t		*st, *s, *v, *u, *ap;
	const char	*name;
	char		*m;
	size_t		 i, pending = 0;
	long long	 up;

	if ((s = gbr_session_entry()) != NULL) {
		name = json_string_value(json_object_get(s, "name"));
		gbr_status_line("session", "%s%s%s%s on %s", name != NULL ?
		    name : "", name != NULL ? " (" : "", G.session,
		    name != NULL ? ")" : "", gbr_str(s, "workspace"));
		gbr_status_line("", "env %s, %s, turn %lld, %lld messages, "
		    "%lld attached", gbr_str(s, "env"), gbr_str(s, "state"),
		    gbr_int(s, "turn"), gbr_int(s, "messages"),
		    gbr_int(s, "attached"));
		if ((m = gbr_model_text(json_object_get(s, "llm"))) != NULL)
			gbr_status_line("model", "%s", m);
		free(m);
		/* Who is attached: this gbr, other terminals, scripts. */
		json_array_foreach(json_object_get(s, "clients"), i, v)
			gbr_status_line(i == 0 ? "attached" : "", "%s, pid %lld%s",
			    *gbr_str(v, "client") != '\0' ? gbr_str(v, "client") :
			    "(unnamed)", gbr_int(v, "pid"), gbr_int(v, "pid") ==
			    (long long)getpid() ? " (this one)" : "");
		u = json_object_get(s, "usage");
		gbr_status_line("tokens", "this session in %lld, out %lld; last "
		    "turn in %lld, out %lld", gbr_int(u, "input_tokens"),
		    gbr_int(u, "output_tokens"), gbr_int(json_object_get(u,
		    "last_turn"), "input_tokens"), gbr_int(json_object_get(u,
		    "last_turn"), "output_tokens"));
		gbr_cost_line(u);
		if ((ap = gbr_call("approval.list", json_pack("{s:s}", "session",
		    G.session), NULL, 0)) != NULL) {
			json_array_foreach(json_object_get(ap, "approvals"), i, v)
				pending += strcmp(gbr_str(v, "state"),
				    "pending") == 0;
			gbr_status_line("approvals", "%zu pending%s", pending,
			    pending > 0 ? " (/approvals)" : "");
			json_decref(ap);
		}
		json_decref(s);
	}
	if ((st = gbr_call("daemon.status", NULL, NULL, 0)) == NULL)
		return;
	up = gbr_int(st, "uptime_ms") / 1000;
	gbr_status_line("gbrd", "%s, pid %lld, up %lldh%02lldm%02llds, %lld "
	    "clients (/call daemon.status: all of it, as JSON)",
	    gbr_str(st, "version"), gbr_int(st, "pid"), up / 3600, up / 60 % 60,
	    up % 60, gbr_int(json_object_get(st, "clients"), "connected"));
	json_decref(st);
}

/* /call METHOD [JSON] */
static void
gbr_cmd_call(char *arg, char *rest)
{
	gbr_call_raw(arg, rest);
}

static void	gbr_cmd_help(char *, char *);

/*
 * The commands, in the order /help lists them. A handler gets the first
 * word after the command (arg, "" if none) and the rest of the line (rest,
 * NULL if none), or with GBR_CMD_LINE the rest of the line whole as arg.
 */
static const struct gbr_cmd gbr_cmds[] = {
	{ "help", "?", "", "this list", gbr_cmd_help, 0 },
	{ "sessions", "list", "", "list the sessions (* marks this one)",
	    gbr_cmd_sessions, 0 },
	{ "attach", NULL, "NAME", "switch to another session (by name or id)",
	    gbr_cmd_attach, 0 },
	{ "new", NULL, "[NAME]", "start a new session on this folder",
	    gbr_cmd_new, 0 },
	{ "history", NULL, "[N]", "show the last N messages (default 50)",
	    gbr_cmd_history, 0 },
	{ "show", NULL, "[N]", "all of tool result [N] (default: the last), "
	    "paged with $PAGER when long", gbr_show_cmd, 0 },
	{ "cancel", NULL, "", "cancel the running turn (also Ctrl-C)",
	    gbr_cmd_cancel, 0 },
	{ "env", NULL, "", "show the session's environment", gbr_cmd_env, 0 },
	{ "tools", NULL, "", "list the agent's tools (what it may do here)",
	    gbr_cmd_tools, 0 },
	{ "run", NULL, "PROGRAM [ARGS...]", "run a command here as the agent "
	    "would (its sandbox and rules); words as in a shell, unexpanded",
	    gbr_cmd_run, GBR_CMD_LINE },
	{ "tool", NULL, "NAME [JSON]", "run any tool here as the agent would",
	    gbr_cmd_tool, 0 },
	{ "rewind", NULL, "[N | to SEQ] [--conversation]", "list the turns "
	    "that changed files; N: show the diff that undoes turn N and "
	    "later, then ask (c, or --conversation: also drop the later "
	    "messages from what the model sees)", gbr_cmd_rewind, 0 },
	{ "approvals", NULL, "", "list the approvals waiting for a decision",
	    gbr_cmd_approvals, 0 },
	{ "approval", NULL, "ID", "show one, with its whole diff",
	    gbr_cmd_approval, 0 },
	{ "approve", NULL, "ID [session]", "approve it (session: also the same "
	    "tool and path for the rest of the session)", gbr_cmd_approve, 0 },
	{ "deny", NULL, "ID [REASON]", "deny it", gbr_cmd_deny, 0 },
	{ "edit", NULL, "ID", "edit the proposed content in $VISUAL/$EDITOR, "
	    "send it", gbr_cmd_edit, 0 },
	{ "close", NULL, "", "close this session for good and leave",
	    gbr_cmd_close, 0 },
	{ "detach", "quit exit", "", "leave; the session keeps running (also "
	    "Ctrl-D)", gbr_cmd_detach, 0 },
	{ "status", "who", "", "this session, its model and tokens, who is "
	    "attached, and gbrd",
	    gbr_cmd_status, 0 },
	{ "call", NULL, "METHOD [JSON]", "call any protocol method, print its "
	    "result", gbr_cmd_call, 0 },
	{ NULL, NULL, NULL, NULL, NULL, 0 }
};

/* /help, /?: the commands of the table, then the keys. */
static void
gbr_cmd_help(char *arg, char *rest)
{
	struct gbr_capture	 cap;
	const struct gbr_cmd	*c;
	const char		*w, *a;
	FILE			*f;
	size_t			 n;
	int			 col;

	if ((f = gbr_capture(&cap)) == NULL)
		return;
	fputs("Type a message and press Enter to send it to the agent. "
	    "Commands:\n", f);
	for (c = gbr_cmds; c->name != NULL; c++) {
		col = fprintf(f, "  /%s", c->name);
		/* Each alias is a word of c->aliases. */
		for (a = c->aliases; a != NULL && *a != '\0'; a += n) {
			a += strspn(a, " ");
			n = strcspn(a, " ");
			col += fprintf(f, ", /%.*s", (int)n, a);
		}
		if (*c->args != '\0')
			col += fprintf(f, " %s", c->args);
		if (col < GBR_HELP_INDENT)
			col += fprintf(f, "%*s", GBR_HELP_INDENT - col, "");
		/* The help, in words wrapped at GBR_HELP_COLS. */
		for (w = c->help; *w != '\0'; w += n) {
			w += strspn(w, " ");
			n = strcspn(w, " ");
			if (col > GBR_HELP_INDENT && col + 1 + (int)n > GBR_HELP_COLS)
				col = fprintf(f, "\n%*s", GBR_HELP_INDENT, "") - 1;
			col += fprintf(f, " %.*s", (int)n, w);
		}
		fputc('\n', f);
	}
	/* The keys of this system's line editor, then the approvals'. */
	fputs(console_keys_help(), f);
	fputs(
" A pending approval is asked at the prompt, one key\n"
"answers: a approves, d denies (then a reason, or Enter), s approves for\n"
"the rest of the session; e Enter edits.\n", f);
	gbr_capture_end(&cap);
}

/* Tells whether name (n bytes) is the command c or one of its aliases. */
static int
gbr_cmd_is(const struct gbr_cmd *c, const char *name, size_t n)
{
	const char	*a;
	size_t		 an;

	if (strlen(c->name) == n && strncmp(c->name, name, n) == 0)
		return 1;
	for (a = c->aliases; a != NULL && *a != '\0'; a += an) {
		a += strspn(a, " ");
		an = strcspn(a, " ");
		if (an == n && strncmp(a, name, n) == 0)
			return 1;
	}
	return 0;
}

/* Handles a "/" command: finds it in the table and runs its handler. */
void
gbr_command(char *line)
{
	const struct gbr_cmd	*c;
	char			*cmd = line + 1, *arg, *rest;

	arg = cmd + strcspn(cmd, " \t");
	for (c = gbr_cmds; c->name != NULL; c++)
		if (gbr_cmd_is(c, cmd, (size_t)(arg - cmd)))
			break;
	/* /run takes the rest of the line whole: it splits it itself. */
	if (c->name != NULL && (c->flags & GBR_CMD_LINE)) {
		c->fn(arg + strspn(arg, " \t"), NULL);
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
	if (c->name != NULL)
		c->fn(arg, rest);
	else
		gbr_say("unknown command /%s (/help lists them)\n", cmd);
}
