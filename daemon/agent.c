/*
 * The agent loop: see agent.h for what a turn is. This file owns the
 * turns in flight (struct agent_turn: the model call, the tool call or
 * the check being waited for, the retry timer) and nothing else; the
 * history is the session's, read again at every step.
 *
 * One step (agent_step), from the current turn's messages (those after
 * the user's message that started it):
 *   - the last assistant message has a tool call without a recorded
 *     result: run it (one at a time, in order) through toolcall_start,
 *     with the call's id as call_id and "agent:TURN:STEP:K" as its
 *     request_id, so that after a restart the same call is adopted, never
 *     started twice;
 *   - it has tool calls, all answered: ask the model again;
 *   - it has none (the model's final answer): if the turn changed files
 *     (a write_file, edit_file, run_command or run_script that worked)
 *     and the profile has a check_command, run it; a failure becomes a
 *     user message with "source": "check" while fix attempts are left;
 *   - there is none after the last user or check message: ask the model.
 *
 * Asking the model: the provider, URL, model and key are resolved again
 * for every request, and the system prompt is the session's profile's as
 * it is now (reload.c keeps it current), so a reloaded profile applies to
 * the next request. The conversation is built from the whole history; if
 * the request would be larger than max_request_bytes (or than what the
 * model's refusals taught), the oldest tool outputs are shortened first,
 * then the oldest messages and tool call arguments, then whole exchanges
 * are left out (each with a marker saying so), and a context.trimmed event
 * tells the user; the newest user message is kept whole, and a request
 * that still does not fit is never sent: the turn ends with too_large.
 * Text streams to the attached clients as live message.delta events
 * (deltas are not logged: the durable record is the assistant message
 * written once the answer is complete). A failed request is retried with exponential backoff and
 * jitter, or after Retry-After, when it is worth it (429, 5xx, a dropped
 * or cut stream); an llm.retry event says so, and clients drop the
 * partial text they were shown. Tools run only after a complete answer,
 * so a retry never runs one twice.
 *
 * Callbacks from other modules carry a small key (the turn's id), never a
 * pointer to the turn: a turn cancelled meanwhile is simply not found.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "agent.h"
#include "config.h"
#include "env.h"
#include "gbrd.h"
#include "llm.h"
#include "log.h"
#include "osdep.h"
#include "reload.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "tool-run.h"
#include "toolcall.h"
#include "xmalloc.h"

#define AGENT_SID_MAX		64
#define AGENT_KEEP		512	/* bytes kept of a shortened string */
#define AGENT_FEEDBACK_MAX	(16 * 1024) /* check output given to the model */
#define AGENT_EVENT_OUTPUT	4096	/* check output in a check.result event */
#define AGENT_DIAG_EVENT	20	/* diagnostics in a check.result event */
#define AGENT_BUDGET_MIN	(16 * 1024) /* a learned context budget, at least */
#define AGENT_SHRINKS_MAX	6	/* cut requests after overflows, per turn */
#define AGENT_BUDGETS_MAX	256	/* sessions whose learned budget is kept */

struct agent_turn {
	TAILQ_ENTRY(agent_turn)	 entry;
	uint64_t		 id;		/* the key callbacks carry */
	char			 sid[AGENT_SID_MAX + 1];
	uint64_t		 turn;
	int			 resumed;	/* goes on from before a restart */
	struct llm_target	 target;
	int			 have_target;
	char			*local_model;	/* what a local Ollama offered */
	int			 probing;
	struct llm_call		*call;
	unsigned		 step;		/* the step the call is for */
	struct toolcall		*tc;
	int			 tc_busy;	/* a tool call's callback is due */
	struct tool_run		*check;
	int			 check_busy;
	unsigned		 fixes;		/* check messages so far, for the run */
	int			 writing;	/* a record of ours is being written */
	struct event		*ev;		/* steps, and retry backoff */
	unsigned		 attempt;	/* retries of the current request */
	unsigned		 trimmed;	/* messages shortened or left out, as told */
	size_t			 sent;		/* bytes of the last request sent */
	unsigned		 shrinks;	/* requests cut after a context overflow */
	size_t			 budget;	/* tried after one; learned if it works */
};
TAILQ_HEAD(agent_list, agent_turn);

/* What a callback needs to find its turn again. */
struct agent_key {
	uint64_t	id;
};

/* The current turn as the history tells it. */
struct agent_view {
	size_t	 start;		/* the user's message that began it */
	long	 last;		/* the last assistant message of ours, or -1 */
	long	 feedback;	/* the last check message, or -1 */
	unsigned steps;		/* assistant messages of ours in the turn */
	unsigned fixes;		/* check messages in the turn */
	int	 changed;	/* a tool that changes files worked */
};

static struct agent_list	agent_turns = TAILQ_HEAD_INITIALIZER(agent_turns);
static uint64_t			agent_next_id = 1;
static unsigned			agent_n;
/*
 * "session provider model" -> the request size the model's context takes,
 * as learned from the provider's refusals: later requests are cut to it
 * at once instead of being refused again. In memory only: after a restart
 * the first overflow teaches it again.
 */
static json_t			*agent_budgets;

static void	agent_step(struct agent_turn *);
static void	agent_kill(struct agent_turn *);

/* A key for a callback (the callback frees it). */
static struct agent_key *
agent_key(struct agent_turn *t)
{
	struct agent_key	*k = xmalloc(sizeof *k);

	k->id = t->id;
	return k;
}

/* The turn a key names, or NULL; frees the key. */
static struct agent_turn *
agent_unkey(struct agent_key *k)
{
	struct agent_turn	*t;
	uint64_t		 id = k->id;

	free(k);
	TAILQ_FOREACH(t, &agent_turns, entry)
		if (t->id == id)
			return t;
	return NULL;
}

/* The turn of a session, or NULL. */
static struct agent_turn *
agent_find(const char *sid)
{
	struct agent_turn	*t;

	TAILQ_FOREACH(t, &agent_turns, entry)
		if (strcmp(t->sid, sid) == 0)
			return t;
	return NULL;
}

/* Runs a step from the loop (after ms milliseconds). */
static void
agent_kick_ms(struct agent_turn *t, long ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(t->ev, &tv);
}

static void
agent_kick(struct agent_turn *t)
{
	agent_kick_ms(t, 0);
}

/* The timer: one step. */
static void
agent_ev_cb(evutil_socket_t fd, short events, void *arg)
{
	agent_step(arg);
}

/* A new turn for a session. */
static struct agent_turn *
agent_new(struct session *s, uint64_t turn)
{
	struct agent_turn	*t = xcalloc(1, sizeof *t);

	t->id = agent_next_id++;
	snprintf(t->sid, sizeof t->sid, "%s", session_id(s));
	t->turn = turn;
	if ((t->ev = evtimer_new(gbrd_base(), agent_ev_cb, t)) == NULL)
		fatalx("evtimer_new failed");
	TAILQ_INSERT_TAIL(&agent_turns, t, entry);
	agent_n++;
	return t;
}

/*
 * Forgets a turn at once: the stream stops, a tool call or check is told
 * to stop (their callbacks find no turn), the probe forgets it.
 */
static void
agent_kill(struct agent_turn *t)
{
	TAILQ_REMOVE(&agent_turns, t, entry);
	agent_n--;
	if (t->call != NULL)
		llm_call_cancel(t->call);
	if (t->tc != NULL && t->tc_busy)
		toolcall_cancel(t->tc);
	if (t->check != NULL && t->check_busy)
		tool_run_cancel(t->check);
	if (t->probing)
		llm_local_forget(t);
	event_free(t->ev);
	if (t->have_target)
		llm_target_free(&t->target);
	free(t->local_model);
	free(t);
}

/* The usage of a turn: every answer's counts, summed. */
static json_t *
agent_usage(json_t *msgs, uint64_t turn)
{
	json_t		*m, *u;
	json_int_t	 in = 0, out = 0;
	size_t		 i;

	json_array_foreach(msgs, i, m) {
		if (json_object_get(m, "step") == NULL ||
		    (uint64_t)json_integer_value(json_object_get(m, "turn")) != turn)
			continue;
		u = json_object_get(m, "usage");
		if (json_integer_value(json_object_get(u, "input_tokens")) > 0)
			in += json_integer_value(json_object_get(u, "input_tokens"));
		if (json_integer_value(json_object_get(u, "output_tokens")) > 0)
			out += json_integer_value(json_object_get(u, "output_tokens"));
	}
	return json_pack("{s:I, s:I}", "input_tokens", in, "output_tokens", out);
}

/*
 * Ends the turn (outcome, an error kind and message or NULL, fields
 * stolen) with its usage, and forgets it.
 */
static void
agent_end(struct agent_turn *t, struct session *s, const char *outcome,
    const char *kind, const char *message, json_t *fields)
{
	struct session_error	 err;
	json_t			*msgs;

	if (fields == NULL)
		fields = json_object();
	if (s != NULL) {
		msgs = session_messages(s, 0);
		json_object_set_new(fields, "usage", agent_usage(msgs, t->turn));
		json_decref(msgs);
		log_info("session %s: turn %llu %s%s%s", t->sid,
		    (unsigned long long)t->turn, outcome, kind != NULL ? ": " : "",
		    message != NULL ? message : "");
		if (session_end_turn(s, t->turn, outcome, kind, message, fields,
		    &err) != 0) {
			log_warn("session %s: the end of turn %llu is not recorded: "
			    "%s", t->sid, (unsigned long long)t->turn, err.message);
			free(err.message);
			json_decref(err.data);
		}
	} else
		json_decref(fields);
	agent_kill(t);
}

/* True for the tools whose success may have changed files. */
static int
agent_changing(const char *tool)
{
	return tool != NULL && (strcmp(tool, "write_file") == 0 ||
	    strcmp(tool, "edit_file") == 0 || strcmp(tool, "run_command") == 0 ||
	    strcmp(tool, "run_script") == 0);
}

/* True for an assistant message the agent wrote. */
static int
agent_ours(json_t *m)
{
	const char	*role = json_string_value(json_object_get(m, "role"));

	return role != NULL && strcmp(role, "assistant") == 0 &&
	    json_is_integer(json_object_get(m, "step"));
}

/* True for a message that started a turn (a human's, not a check's). */
static int
agent_user(json_t *m)
{
	const char	*role = json_string_value(json_object_get(m, "role"));

	return role != NULL && strcmp(role, "user") == 0 &&
	    json_object_get(m, "source") == NULL;
}

/* Reads the current turn out of the history. */
static void
agent_view(json_t *msgs, struct agent_view *v)
{
	json_t		*m;
	const char	*role;
	size_t		 i, n = json_array_size(msgs);

	memset(v, 0, sizeof *v);
	v->last = v->feedback = -1;
	for (i = n; i > 0; i--)
		if (agent_user(json_array_get(msgs, i - 1)))
			break;
	v->start = i > 0 ? i - 1 : 0;
	for (i = v->start + 1; i < n; i++) {
		m = json_array_get(msgs, i);
		role = json_string_value(json_object_get(m, "role"));
		if (agent_ours(m)) {
			v->last = (long)i;
			v->steps++;
		} else if (role != NULL && strcmp(role, "user") == 0) {
			v->feedback = (long)i;
			v->fixes++;
		} else if (role != NULL && strcmp(role, "tool") == 0 &&
		    json_is_true(json_object_get(m, "ok")) &&
		    agent_changing(json_string_value(json_object_get(m, "tool"))))
			v->changed = 1;
	}
}

/* The index of the result of call_id after index from, or -1. */
static long
agent_result(json_t *msgs, size_t from, const char *call_id)
{
	json_t		*m;
	const char	*role, *id;
	size_t		 i;

	for (i = from + 1; i < json_array_size(msgs); i++) {
		m = json_array_get(msgs, i);
		role = json_string_value(json_object_get(m, "role"));
		id = json_string_value(json_object_get(m, "call_id"));
		if (role != NULL && strcmp(role, "tool") == 0 && id != NULL &&
		    strcmp(id, call_id) == 0)
			return (long)i;
	}
	return -1;
}

/* A tool result as the model reads it. */
static char *
agent_output(json_t *m)
{
	json_t		*e = json_object_get(m, "error");
	const char	*kind, *msg;
	char		*s, *data, *out;

	if (json_is_true(json_object_get(m, "ok"))) {
		s = json_dumps(json_object_get(m, "result"), JSON_COMPACT |
		    JSON_ENCODE_ANY);
		return s != NULL ? s : xstrdup("{}");
	}
	kind = json_string_value(json_object_get(e, "kind"));
	msg = json_string_value(json_object_get(e, "message"));
	data = json_object_get(e, "data") != NULL ? json_dumps(json_object_get(e,
	    "data"), JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	out = xasprintf("error %s: %s%s%s", kind != NULL ? kind : "failed",
	    msg != NULL ? msg : "the tool failed", data != NULL ? "\ndata: " : "",
	    data != NULL ? data : "");
	free(data);
	return out;
}

/* The conversation a history stands for (see agent.h and llm.h). */
json_t *
agent_conversation(json_t *msgs)
{
	json_t		*conv = json_array(), *m, *calls, *c, *item, *ic, *args;
	json_t		*r, *byid = json_object();
	const char	*role, *cid;
	char		*out;
	size_t		 i, k;
	long		 j;

	/* call_id -> the first result recorded for it. */
	json_array_foreach(msgs, i, m) {
		role = json_string_value(json_object_get(m, "role"));
		cid = json_string_value(json_object_get(m, "call_id"));
		if (role != NULL && strcmp(role, "tool") == 0 && cid != NULL &&
		    json_object_get(byid, cid) == NULL)
			json_object_set_new(byid, cid, json_integer((json_int_t)i));
	}
	json_array_foreach(msgs, i, m) {
		role = json_string_value(json_object_get(m, "role"));
		if (role == NULL)
			continue;
		if (strcmp(role, "user") == 0) {
			json_array_append_new(conv, json_pack("{s:s, s:s}", "role",
			    "user", "content", json_string_value(json_object_get(m,
			    "content")) != NULL ? json_string_value(json_object_get(
			    m, "content")) : ""));
			continue;
		}
		/* Tool calls a human made through tool.call are not the model's. */
		if (!agent_ours(m))
			continue;
		item = json_pack("{s:s, s:s}", "role", "assistant", "content",
		    json_string_value(json_object_get(m, "content")) != NULL ?
		    json_string_value(json_object_get(m, "content")) : "");
		calls = json_object_get(m, "tool_calls");
		ic = json_array();
		json_array_foreach(calls, k, c) {
			args = json_object_get(c, "args");
			json_array_append_new(ic, json_pack("{s:O, s:O, s:o}", "id",
			    json_object_get(c, "id"), "name", json_object_get(c,
			    "name"), "args", json_is_object(args) ?
			    json_incref(args) : json_object()));
			if (json_object_get(c, "meta") != NULL)
				json_object_set(json_array_get(ic, k), "meta",
				    json_object_get(c, "meta"));
		}
		if (json_array_size(ic) > 0)
			json_object_set(item, "tool_calls", ic);
		json_array_append_new(conv, item);
		/* Every call is answered, right after the message that made it. */
		json_array_foreach(calls, k, c) {
			cid = json_string_value(json_object_get(c, "call_id"));
			r = cid != NULL ? json_object_get(byid, cid) : NULL;
			j = r != NULL ? (long)json_integer_value(r) : -1;
			if (j > (long)i) {
				out = agent_output(json_array_get(msgs, j));
				json_array_append_new(conv, json_pack("{s:s, s:O, s:O, "
				    "s:b, s:s}", "role", "tool", "call_id",
				    json_object_get(c, "id"), "name", json_object_get(c,
				    "name"), "ok", json_is_true(json_object_get(
				    json_array_get(msgs, j), "ok")), "output", out));
				free(out);
			} else
				json_array_append_new(conv, json_pack("{s:s, s:O, s:O, "
				    "s:b, s:s}", "role", "tool", "call_id",
				    json_object_get(c, "id"), "name", json_object_get(c,
				    "name"), "ok", 0, "output", "not run: the turn "
				    "ended before this call (nothing is re-run)"));
		}
		json_decref(ic);
	}
	json_decref(byid);
	return conv;
}

/* Cuts s to at most n bytes without splitting a UTF-8 character. */
static size_t
agent_utf8_cut(const char *s, size_t n)
{
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/*
 * The shortened form of a long string value, or NULL when it is short
 * enough to keep (a shortened one is, so nothing is cut twice).
 */
static json_t *
agent_cut(json_t *v, const char *what)
{
	const char	*s = json_string_value(v);
	size_t		 len, keep;
	json_t		*o;
	char		*cut;

	if (s == NULL || (len = json_string_length(v)) <= AGENT_KEEP + 128)
		return NULL;
	keep = agent_utf8_cut(s, AGENT_KEEP);
	cut = xasprintf("%.*s\n[gbr: this %s was shortened from %zu to %zu "
	    "bytes to fit the context budget]", (int)keep, s, what, len, keep);
	o = json_string(cut);
	free(cut);
	return o != NULL ? o : json_string("[gbr: shortened]");
}

/* Shortens obj[key] if long; returns the bytes saved. */
static size_t
agent_cut_key(json_t *obj, const char *key, const char *what)
{
	json_t	*v = json_object_get(obj, key), *o;
	size_t	 saved;

	if ((o = agent_cut(v, what)) == NULL)
		return 0;
	saved = json_string_length(v) - json_string_length(o);
	json_object_set_new(obj, key, o);
	return saved;
}

/*
 * Shortens every long string inside a tool call's arguments (a file's
 * content given to write_file, say); returns the bytes saved. The depth
 * is bounded: arguments nested deeper than RPC_MAX_NESTING are refused
 * when they arrive.
 */
static size_t
agent_cut_args(json_t *v)
{
	const char	*k;
	json_t		*e, *o;
	size_t		 i, saved = 0;
	void		*tmp;

	if (json_is_object(v)) {
		json_object_foreach_safe(v, tmp, k, e) {
			if (json_is_string(e))
				saved += agent_cut_key(v, k, "argument");
			else
				saved += agent_cut_args(e);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, e) {
			if ((o = agent_cut(e, "argument")) != NULL) {
				saved += json_string_length(e) -
				    json_string_length(o);
				json_array_set_new(v, i, o);
			} else
				saved += agent_cut_args(e);
		}
	}
	return saved;
}

/*
 * Shortens what one message of the conversation may lose: in the first
 * pass a tool's output, in the second the text of a message and the
 * arguments of the calls it made. Returns the bytes saved; *n counts the
 * messages shortened.
 */
static size_t
agent_cut_message(json_t *m, int pass, unsigned *n)
{
	json_t	*c;
	size_t	 saved = 0, k;

	if (pass == 0)
		saved = agent_cut_key(m, "output", "output");
	else {
		saved = agent_cut_key(m, "content", "message");
		json_array_foreach(json_object_get(m, "tool_calls"), k, c)
			saved += agent_cut_args(json_object_get(c, "args"));
	}
	if (saved > 0)
		(*n)++;
	return saved;
}

/*
 * Leaves out the oldest exchanges whole (a user's message and all that
 * followed it up to the next one), never the newest user message, until
 * the request fits: enough of them at a time, by their own JSON size, to
 * cover the excess, so that the request is built again once, not once an
 * exchange. A marker at the head says how many were left out. Returns how
 * many messages were left out.
 */
static size_t
agent_drop(struct agent_turn *t, const char *system, json_t *conv,
    json_t *tools, struct llm_request *rq, size_t max, size_t *last,
    char **cause)
{
	const char	*role, *text;
	json_t		*m, *o, *rest;
	size_t		 next, dropped = 0, i, size, excess;
	char		*marked;

	while (rq->body_len > max) {
		/* The first user message past enough bytes, up to the newest. */
		excess = rq->body_len - max;
		next = size = 0;
		for (i = 0; i <= *last; i++) {
			m = json_array_get(conv, i);
			role = json_string_value(json_object_get(m, "role"));
			if (i > 0 && role != NULL && strcmp(role, "user") == 0) {
				next = i;
				if (size > excess)
					break;
			}
			size += json_dumpb(m, NULL, 0, JSON_COMPACT);
		}
		if (next == 0)
			break;
		rest = json_array();
		for (i = next; i < json_array_size(conv); i++)
			json_array_append(rest, json_array_get(conv, i));
		json_array_clear(conv);
		json_array_extend(conv, rest);
		json_decref(rest);
		dropped += next;
		*last -= next;
		m = json_array_get(conv, 0);
		text = json_string_value(json_object_get(m, "content"));
		marked = xasprintf("[gbr: the %zu oldest messages of this "
		    "conversation were left out to fit the context budget]\n\n%s",
		    dropped, text != NULL ? text : "");
		if ((o = json_string(marked)) == NULL)
			o = json_string("[gbr: earlier messages were left out]");
		json_object_set_new(m, "content", o);
		free(marked);
		llm_request_free(rq);
		if (llm_request_build(&t->target, system, conv, tools, rq,
		    cause) != 0)
			return (size_t)-1;
	}
	return dropped;
}

/*
 * Builds the request within max bytes, cutting the conversation, oldest
 * first, until it fits: tool outputs first, then the text of earlier
 * messages and the arguments of tool calls, then whole earlier exchanges.
 * The newest user message is never cut: a question the model cannot read
 * whole is not sent. Returns 0 (*shortened says how many messages were
 * shortened or left out), or -1 with *cause.
 */
static int
agent_build(struct agent_turn *t, const char *system, json_t *conv,
    json_t *tools, size_t max, struct llm_request *rq, unsigned *shortened,
    size_t *before, char **cause)
{
	size_t		 n, i, last, excess, saved, dropped;
	const char	*role;
	json_t		*m;
	int		 pass;

	*shortened = 0;
	if (llm_request_build(&t->target, system, conv, tools, rq, cause) != 0)
		return -1;
	*before = rq->body_len;
	n = last = json_array_size(conv);
	json_array_foreach(conv, i, m) {
		role = json_string_value(json_object_get(m, "role"));
		if (role != NULL && strcmp(role, "user") == 0)
			last = i;
	}
	for (pass = 0; pass < 2 && rq->body_len > max; pass++) {
		i = 0;
		while (rq->body_len > max && i < n) {
			/* Shorten enough, oldest first, to cover the excess. */
			excess = rq->body_len - max;
			saved = 0;
			for (; i < n && saved <= excess; i++)
				if (i != last)
					saved += agent_cut_message(
					    json_array_get(conv, i), pass,
					    shortened);
			llm_request_free(rq);
			if (llm_request_build(&t->target, system, conv, tools,
			    rq, cause) != 0)
				return -1;
		}
	}
	if (rq->body_len > max && last < n) {
		if ((dropped = agent_drop(t, system, conv, tools, rq, max, &last,
		    cause)) == (size_t)-1)
			return -1;
		*shortened += (unsigned)dropped;
	}
	if (rq->body_len > max) {
		*cause = xasprintf("the conversation needs %zu bytes even with "
		    "every earlier message shortened or left out, over the limit "
		    "of %zu (max_request_bytes, or what the model took): shorten "
		    "the message or raise the limit", rq->body_len, max);
		llm_request_free(rq);
		return -1;
	}
	return 0;
}

/*
 * The key of a learned budget: the session and its model, as a session
 * may switch to a model with a larger context (a profile reload).
 */
static char *
agent_budget_key(const struct agent_turn *t)
{
	return xasprintf("%s %s %s", t->sid, t->target.provider->name,
	    t->target.model);
}

/* The request size the turn's model takes (0: none learned). */
static size_t
agent_budget(const struct agent_turn *t)
{
	json_t	*v;
	char	*key;

	if (agent_budgets == NULL)
		return 0;
	key = agent_budget_key(t);
	v = json_object_get(agent_budgets, key);
	free(key);
	return v != NULL ? (size_t)json_integer_value(v) : 0;
}

/* Remembers a smaller budget for the turn's model; forgets closed sessions'. */
static void
agent_budget_set(const struct agent_turn *t, size_t bytes)
{
	const char	*k;
	json_t		*v;
	void		*tmp;
	char		*key, sid[AGENT_SID_MAX + 1];

	if (agent_budgets == NULL)
		agent_budgets = json_object();
	if (json_object_size(agent_budgets) >= AGENT_BUDGETS_MAX)
		json_object_foreach_safe(agent_budgets, tmp, k, v) {
			snprintf(sid, sizeof sid, "%.*s", (int)strcspn(k, " "), k);
			if (session_find(sid) == NULL)
				json_object_del(agent_budgets, k);
		}
	key = agent_budget_key(t);
	if (json_object_size(agent_budgets) < AGENT_BUDGETS_MAX ||
	    json_object_get(agent_budgets, key) != NULL)
		json_object_set_new(agent_budgets, key,
		    json_integer((json_int_t)bytes));
	free(key);
}

/*
 * The budget to learn from a refusal saying the request exceeds the
 * model's context: the providers give the limit and the count in tokens
 * ("maximum context length is 128000 tokens ... resulted in 150000",
 * "prompt is too long: 250000 tokens > 200000 maximum", "input token count
 * (1200000) exceeds the maximum number of tokens allowed (1048576)"), so
 * the request is cut by their ratio, with a margin: the two largest
 * numbers in the message, smaller over larger. Without them, by a quarter.
 */
static size_t
agent_budget_learn(size_t sent, const char *message)
{
	unsigned long long	 hi = 0, lo = 0, v;
	const char		*p = message;
	double			 ratio = 0.75;
	size_t			 budget;

	while (p != NULL && *p != '\0') {
		if (*p < '0' || *p > '9') {
			p++;
			continue;
		}
		/* Digits, grouped or not ("128000", "128,000"). */
		for (v = 0; (*p >= '0' && *p <= '9') || (*p == ',' &&
		    p[1] >= '0' && p[1] <= '9'); p++)
			if (*p != ',' && v < 1000000000000000ULL)
				v = v * 10 + (unsigned long long)(*p - '0');
		if (v > hi) {
			lo = hi;
			hi = v;
		} else if (v > lo)
			lo = v;
	}
	if (hi > 0 && lo >= 1000 && lo < hi)
		ratio = (double)lo / (double)hi * 0.9;
	if (ratio < 0.05)
		ratio = 0.05;
	budget = (size_t)((double)sent * ratio);
	return budget < AGENT_BUDGET_MIN ? AGENT_BUDGET_MIN : budget;
}

static void	agent_llm_text(void *, const char *, size_t);
static void	agent_llm_done(void *, const struct llm_outcome *);
static const struct llm_call_cbs agent_llm_cbs = {
	agent_llm_text, agent_llm_done
};

/* The probe for a local Ollama answered. */
static void
agent_probed(void *arg, const char *model)
{
	struct agent_turn	*t = arg;
	struct session		*s;

	t->probing = 0;
	if ((s = session_find(t->sid)) == NULL) {
		agent_kill(t);
		return;
	}
	if (model == NULL) {
		/* Nothing anywhere: the no_provider turn. */
		agent_kill(t);
		session_turn_stub(s, session_turn(s));
		return;
	}
	free(t->local_model);
	t->local_model = xstrdup(model);
	agent_kick(t);
}

/* Asks the model. */
static void
agent_request(struct agent_turn *t, struct session *s, json_t *msgs,
    const struct agent_view *v)
{
	const struct config	*cfg = config_get();
	struct llm_request	 rq;
	struct session_error	 err;
	struct env		*env;
	struct sandbox		*sb;
	json_t			*conv, *tools;
	const char		*url;
	char			*cause;
	unsigned		 shortened;
	size_t			 before, max, learned;
	int			 r;

	if (reload_session(s, &env, &sb, &cause) != 0) {
		agent_end(t, s, "error", "invalid_env", cause, NULL);
		free(cause);
		return;
	}
	if (t->local_model == NULL && llm_wants_local(cfg, env)) {
		url = llm_local_url(cfg);
		if (llm_local_probe(url, agent_probed, t) == 0) {
			t->probing = 1;
			return;
		}
	}
	if (t->have_target)
		llm_target_free(&t->target);
	t->have_target = 0;
	r = llm_resolve(cfg, env, t->local_model, &t->target, &cause);
	if (r != 0) {
		agent_end(t, s, r == 1 ? "no_provider" : "error", r == 1 ?
		    "no_provider" : "llm_error", cause, NULL);
		free(cause);
		return;
	}
	t->have_target = 1;
	if (v->steps >= t->target.max_steps) {
		cause = xasprintf("the model was asked %u times in this turn, the "
		    "limit (max_steps); send a message to go on", v->steps);
		agent_end(t, s, "max_steps", "max_steps", cause, NULL);
		free(cause);
		return;
	}
	if (t->target.note != NULL && t->attempt == 0 && v->steps == 0)
		log_warn("session %s: %s", t->sid, t->target.note);
	max = t->target.max_request_bytes;
	if ((learned = agent_budget(t)) > 0 && learned < max)
		max = learned;
	if (t->budget > 0 && t->budget < max)
		max = t->budget;
	conv = agent_conversation(msgs);
	tools = tool_list_json();
	r = agent_build(t, env_system_prompt(env) != NULL ?
	    env_system_prompt(env) : "", conv, tools, max, &rq, &shortened,
	    &before, &cause);
	json_decref(conv);
	json_decref(tools);
	if (r != 0) {
		agent_end(t, s, "error", "too_large", cause, NULL);
		free(cause);
		return;
	}
	if (shortened > t->trimmed) {
		t->trimmed = shortened;
		if (session_event(s, "context.trimmed", json_pack("{s:I, s:i, s:I, "
		    "s:I, s:I}", "turn", (json_int_t)t->turn, "shortened",
		    (int)shortened, "bytes_before", (json_int_t)before,
		    "bytes_after", (json_int_t)rq.body_len, "max_request_bytes",
		    (json_int_t)max), NULL, NULL,
		    &err) != 0) {
			free(err.message);
			json_decref(err.data);
		}
	}
	t->step = v->steps + 1;
	log_debug("session %s: turn %llu step %u: %s %s, %zu bytes", t->sid,
	    (unsigned long long)t->turn, t->step, t->target.provider->name,
	    t->target.model, rq.body_len);
	t->sent = rq.body_len;
	t->call = llm_call_start(&t->target, &rq, &agent_llm_cbs, t, &cause);
	llm_request_free(&rq);
	if (t->call == NULL) {
		agent_end(t, s, "error", "llm_error", cause, NULL);
		free(cause);
	}
}

/* Streamed text: a live event for the attached clients. */
static void
agent_llm_text(void *arg, const char *text, size_t len)
{
	struct agent_turn	*t = arg;
	struct session		*s;
	json_t			*f;

	if ((s = session_find(t->sid)) == NULL)
		return;
	f = json_pack("{s:s%, s:I, s:i}", "text", text, len, "turn",
	    (json_int_t)t->turn, "step", (int)t->step);
	if (f != NULL)
		session_live(s, "message.delta", f);
}

/* A record of ours is written: the next step. */
static void
agent_written(void *arg, int error, json_t *result)
{
	struct agent_turn	*t = agent_unkey(arg);

	if (t == NULL)
		return;
	t->writing = 0;
	if (error != 0) {
		agent_end(t, session_find(t->sid), "error", "storage_error",
		    "the disk log failed a record of this turn", NULL);
		return;
	}
	agent_kick(t);
}

/* True if s may be a call_id (toolcall.h): 1-64 of [A-Za-z0-9_.:-]. */
static int
agent_call_id_ok(const char *s)
{
	size_t	n = strlen(s);

	return n > 0 && n <= TOOLCALL_ID_MAX && strncmp(s, "gbr_", 4) != 0 &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_.:-") == n;
}

/* The delay before retry number attempt (0-based): backoff with jitter. */
static long
agent_backoff(const struct llm_target *t, unsigned attempt, long retry_after)
{
	unsigned char	r[2];
	long		d = t->retry_base_ms;
	unsigned	i;

	if (retry_after >= 0)
		d = retry_after;
	else {
		for (i = 0; i < attempt && d < t->retry_max_ms; i++)
			d *= 2;
		/* Half to all of it, so that many sessions spread out. */
		if (osdep_random(r, sizeof r) == 0)
			d = d / 2 + (long)(((r[0] << 8) | r[1]) % (d / 2 + 1));
	}
	if (d > t->retry_max_ms)
		d = t->retry_max_ms;
	return d;
}

/* The answer is complete, or the request failed. */
static void
agent_llm_done(void *arg, const struct llm_outcome *o)
{
	struct agent_turn	*t = arg;
	struct session_error	 err;
	struct session		*s;
	json_t			*m, *calls, *c, *seen;
	const char		*id;
	char			*cid;
	size_t			 k, budget;
	long			 delay;

	t->call = NULL;
	if ((s = session_find(t->sid)) == NULL) {
		agent_kill(t);
		return;
	}
	if (!o->ok && o->kind != NULL && strcmp(o->kind, "context_overflow") == 0 &&
	    t->shrinks < AGENT_SHRINKS_MAX && t->sent > AGENT_BUDGET_MIN) {
		/* Cut the request to what the model can take, and ask again. */
		budget = agent_budget_learn(t->sent, o->message);
		if (budget >= t->sent)
			budget = t->sent - t->sent / 4;
		/* Kept for the session only once the model answers at it. */
		t->budget = budget;
		t->shrinks++;
		log_info("session %s: %s; the request (%zu bytes) is cut to %zu "
		    "bytes and sent again", t->sid, o->message, t->sent, budget);
		if (session_event(s, "llm.retry", json_pack("{s:I, s:i, s:i, s:I, "
		    "s:s, s:i, s:s, s:I}", "turn", (json_int_t)t->turn, "step",
		    (int)t->step, "attempt", (int)t->shrinks, "delay_ms",
		    (json_int_t)0, "kind", o->kind, "status", o->status,
		    "message", o->message, "max_request_bytes",
		    (json_int_t)budget), NULL, NULL, &err) != 0) {
			free(err.message);
			json_decref(err.data);
		}
		agent_kick(t);
		return;
	}
	if (!o->ok && o->retryable && t->attempt < t->target.max_retries) {
		delay = agent_backoff(&t->target, t->attempt, o->retry_after_ms);
		t->attempt++;
		log_info("session %s: %s (%s); retry %u in %ld ms", t->sid,
		    o->message, o->kind, t->attempt, delay);
		if (session_event(s, "llm.retry", json_pack("{s:I, s:i, s:i, s:I, "
		    "s:s, s:i, s:s}", "turn", (json_int_t)t->turn, "step",
		    (int)t->step, "attempt", (int)t->attempt, "delay_ms",
		    (json_int_t)delay, "kind", o->kind, "status", o->status,
		    "message", o->message), NULL, NULL, &err) != 0) {
			free(err.message);
			json_decref(err.data);
		}
		agent_kick_ms(t, delay);
		return;
	}
	if (!o->ok) {
		agent_end(t, s, "error", o->kind != NULL ? o->kind : "llm_error",
		    o->message, json_pack("{s:i}", "status", o->status));
		return;
	}
	t->attempt = 0;
	if (t->budget > 0) {
		agent_budget_set(t, t->budget);
		t->budget = 0;
	}
	calls = json_array();
	seen = json_object();
	json_array_foreach(o->tool_calls, k, c) {
		id = json_string_value(json_object_get(c, "id"));
		if (id != NULL && agent_call_id_ok(id) &&
		    json_object_get(seen, id) == NULL)
			cid = xstrdup(id);
		else
			cid = xasprintf("t%llu.s%u.c%zu",
			    (unsigned long long)t->turn, t->step, k);
		json_object_set_new(seen, cid, json_true());
		m = json_deep_copy(c);
		json_object_set_new(m, "call_id", json_string(cid));
		json_array_append_new(calls, m);
		free(cid);
	}
	json_decref(seen);
	m = json_pack("{s:s, s:s%, s:I, s:i, s:{s:I, s:I}, s:s, s:s, s:s?}",
	    "role", "assistant", "content", o->text, o->text_len,
	    "turn", (json_int_t)t->turn, "step", (int)t->step, "usage",
	    "input_tokens", (json_int_t)(o->input_tokens > 0 ? o->input_tokens : 0),
	    "output_tokens", (json_int_t)(o->output_tokens > 0 ?
	    o->output_tokens : 0), "provider", t->target.provider->name,
	    "model", t->target.model, "stop_reason", o->stop_reason);
	if (m == NULL) {
		json_decref(calls);
		agent_end(t, s, "error", "llm_error", "the answer is not valid "
		    "UTF-8", NULL);
		return;
	}
	if (json_array_size(calls) > 0)
		json_object_set(m, "tool_calls", calls);
	json_decref(calls);
	t->writing = 1;
	if (session_message(s, "message", m, json_pack("{s:I}", "turn",
	    (json_int_t)t->turn), NULL, NULL, agent_written, agent_key(t),
	    &err) != 0) {
		/* The callback never runs: its key is lost with it (small). */
		t->writing = 0;
		agent_end(t, s, "error", gbr_err_kind(err.kind), err.message, NULL);
		free(err.message);
		json_decref(err.data);
	}
}

/* Records a tool result the tool never produced (bad arguments, ...). */
static void
agent_tool_refused(struct agent_turn *t, struct session *s, json_t *call,
    const char *rid, const char *kind, const char *message)
{
	struct session_error	 err;
	const char		*cid = json_string_value(json_object_get(call,
				    "call_id"));
	const char		*name = json_string_value(json_object_get(call,
				    "name"));
	json_t			*m;

	m = json_pack("{s:s, s:s, s:s, s:b, s:{s:s, s:s}, s:I}", "role", "tool",
	    "call_id", cid, "tool", name != NULL ? name : "", "ok", 0, "error",
	    "kind", kind, "message", message, "turn", (json_int_t)t->turn);
	t->writing = 1;
	if (session_message(s, "tool.result", m, json_pack("{s:s, s:s, s:b}",
	    "call_id", cid, "tool", name != NULL ? name : "", "ok", 0), rid,
	    NULL, agent_written, agent_key(t), &err) != 0) {
		t->writing = 0;
		agent_end(t, s, "error", gbr_err_kind(err.kind), err.message, NULL);
		free(err.message);
		json_decref(err.data);
	}
}

/* A tool call ended (its tool.result is in the history). */
static void
agent_tool_done(void *arg, const struct toolcall_outcome *o)
{
	struct agent_turn	*t = agent_unkey(arg);
	struct session		*s;

	if (t == NULL)
		return;
	t->tc = NULL;
	t->tc_busy = 0;
	s = session_find(t->sid);
	if (s == NULL) {
		agent_kill(t);
		return;
	}
	if (o->record == NULL) {
		agent_end(t, s, "error", gbr_err_kind(o->kind), o->message, NULL);
		return;
	}
	agent_kick(t);
}

/* Runs the call k of the assistant message at index a. */
static void
agent_run_tool(struct agent_turn *t, struct session *s, json_t *am,
    json_t *call, size_t k)
{
	struct toolcall_opts	 opts;
	struct session_error	 err;
	struct agent_key	*key;
	json_t			*args = json_object_get(call, "args");
	const char		*name = json_string_value(json_object_get(call,
				    "name"));
	char			 rid[128], *msg;

	snprintf(rid, sizeof rid, "agent:%llu:%lld:%zu",
	    (unsigned long long)t->turn,
	    (long long)json_integer_value(json_object_get(am, "step")), k);
	if (json_is_string(json_object_get(call, "args_error"))) {
		msg = xasprintf("the arguments of this call are %s",
		    json_string_value(json_object_get(call, "args_error")));
		agent_tool_refused(t, s, call, rid, "invalid_params", msg);
		free(msg);
		return;
	}
	if (!json_is_object(args)) {
		msg = xasprintf("the arguments of this call are not a valid JSON "
		    "object: %s", json_string_value(json_object_get(call,
		    "raw")) != NULL ? json_string_value(json_object_get(call,
		    "raw")) : "");
		agent_tool_refused(t, s, call, rid, "invalid_params", msg);
		free(msg);
		return;
	}
	memset(&opts, 0, sizeof opts);
	opts.request_id = rid;
	opts.call_id = json_string_value(json_object_get(call, "call_id"));
	opts.turn = t->turn;
	opts.flags = TOOLCALL_NO_CALL_MESSAGE;
	key = agent_key(t);
	t->tc_busy = 1;
	if (toolcall_start(t->sid, name != NULL ? name : "", args, &opts,
	    agent_tool_done, key, &t->tc, &err) != 0) {
		free(key);
		t->tc_busy = 0;
		t->tc = NULL;
		agent_tool_refused(t, s, call, rid, gbr_err_kind(err.kind),
		    err.message);
		free(err.message);
		json_decref(err.data);
	}
}

/* The check's output, tail first kept, as text for people and the model. */
static char *
agent_check_text(json_t *result, const char *reason, size_t max)
{
	const char	*out = NULL, *err = NULL;
	char		*all;
	size_t		 len, skip;

	if (json_is_object(result)) {
		if (strcmp(json_string_value(json_object_get(result,
		    "stdout_encoding")) != NULL ? json_string_value(
		    json_object_get(result, "stdout_encoding")) : "", "utf-8") == 0)
			out = json_string_value(json_object_get(result, "stdout"));
		if (strcmp(json_string_value(json_object_get(result,
		    "stderr_encoding")) != NULL ? json_string_value(
		    json_object_get(result, "stderr_encoding")) : "", "utf-8") == 0)
			err = json_string_value(json_object_get(result, "stderr"));
	}
	all = xasprintf("%s%s%s%s", err != NULL ? err : "",
	    err != NULL && *err != '\0' && out != NULL && *out != '\0' ? "\n" : "",
	    out != NULL ? out : "", reason != NULL ? reason : "");
	len = strlen(all);
	if (len <= max)
		return all;
	/* Compilers say the most useful thing first: keep the head. */
	skip = agent_utf8_cut(all, max);
	all[skip] = '\0';
	{
		char	*s = xasprintf("%s\n[gbr: %zu more bytes not shown]", all,
		    len - skip);

		free(all);
		return s;
	}
}

/* The check ended. */
static void
agent_check_done(void *arg, int failed, enum gbr_err kind, const char *reason,
    json_t *result)
{
	struct agent_turn	*t = agent_unkey(arg);
	struct session_error	 err;
	struct session		*s;
	struct env		*env;
	json_t			*diag, *ev, *m;
	const char		*cmd;
	char			*text, *content;
	unsigned		 run, max;
	int			 ok;

	if (t == NULL)
		return;
	t->check = NULL;
	t->check_busy = 0;
	if ((s = session_find(t->sid)) == NULL) {
		agent_kill(t);
		return;
	}
	session_runtime(s, &env, NULL);
	ok = !failed && json_is_true(json_object_get(result, "ok"));
	run = t->fixes + 1;
	cmd = env != NULL && env_check_command(env) != NULL ?
	    env_check_command(env) : "";
	max = env != NULL ? (unsigned)env_max_fix_attempts(env) : 0;
	diag = json_array();
	if (json_is_array(json_object_get(result, "diagnostics"))) {
		size_t	 i;
		json_t	*d;

		json_array_foreach(json_object_get(result, "diagnostics"), i, d) {
			if (i >= AGENT_DIAG_EVENT)
				break;
			json_array_append(diag, d);
		}
	}
	text = agent_check_text(result, failed ? reason : NULL, AGENT_EVENT_OUTPUT);
	ev = json_pack("{s:I, s:i, s:b, s:s, s:o?, s:b, s:o, s:s, s:b}",
	    "turn", (json_int_t)t->turn, "attempt", (int)run, "ok", ok,
	    "command", cmd, "exit_code", json_incref(json_object_get(result,
	    "exit_code")), "timed_out", failed && kind == GBR_ERR_TIMEOUT,
	    "diagnostics", diag, "output", text, "final", ok || t->fixes >= max);
	free(text);
	if (ev != NULL && session_event(s, "check.result", ev, NULL, NULL,
	    &err) != 0) {
		free(err.message);
		json_decref(err.data);
	}
	if (ok) {
		agent_end(t, s, "completed", NULL, NULL, json_pack("{s:{s:b, s:i}}",
		    "check", "ok", 1, "runs", (int)run));
		return;
	}
	if (t->fixes >= max) {
		agent_end(t, s, "check_failed", NULL, NULL, json_pack(
		    "{s:{s:b, s:i}}", "check", "ok", 0, "runs", (int)run));
		return;
	}
	text = agent_check_text(result, failed ? reason : NULL, AGENT_FEEDBACK_MAX);
	if (failed)
		content = xasprintf("The check command `%s` did not complete (%s). "
		    "Fix the cause, then answer again.\n\n%s", cmd,
		    gbr_err_kind(kind), text);
	else
		content = xasprintf("The check command `%s` failed (exit code "
		    "%lld). Fix these problems, then answer again.\n\n%s", cmd,
		    (long long)json_integer_value(json_object_get(result,
		    "exit_code")), text);
	free(text);
	m = json_pack("{s:s, s:s, s:s, s:I, s:i}", "role", "user", "content",
	    content, "source", "check", "turn", (json_int_t)t->turn, "attempt",
	    (int)run);
	free(content);
	t->writing = 1;
	if (m == NULL || session_message(s, "message", m, json_pack("{s:I}",
	    "turn", (json_int_t)t->turn), NULL, NULL, agent_written,
	    agent_key(t), &err) != 0) {
		t->writing = 0;
		agent_end(t, s, "error", m == NULL ? "internal_error" :
		    gbr_err_kind(err.kind), m == NULL ? "the check output cannot "
		    "be recorded" : err.message, NULL);
		if (m != NULL) {
			free(err.message);
			json_decref(err.data);
		}
	}
}

/* The model's final answer: run the check if the turn changed files. */
static void
agent_check(struct agent_turn *t, struct session *s, const struct agent_view *v)
{
	struct tool_run_ctx	 rc;
	struct env		*env;
	struct sandbox		*sb;
	struct agent_key	*key;
	enum gbr_err		 kind;
	json_t			*args, *data = NULL;
	char			*reason;
	int			 r;

	if (reload_session(s, &env, &sb, &reason) != 0) {
		agent_end(t, s, "completed", NULL, NULL, NULL);
		free(reason);
		return;
	}
	if (!v->changed || env_check_command(env) == NULL) {
		agent_end(t, s, "completed", NULL, NULL, NULL);
		return;
	}
	memset(&rc, 0, sizeof rc);
	rc.sandbox = sb;
	rc.env = env;
	rc.session = t->sid;
	/* The profile's own command: its author asked for it to run. */
	rc.approved = 1;
	t->fixes = v->fixes;
	args = json_object();
	key = agent_key(t);
	t->check_busy = 1;
	r = tool_run_call(&rc, "check", args, NULL, agent_check_done, key,
	    &t->check, &kind, &reason, &data);
	json_decref(args);
	if (r != 0) {
		free(key);
		t->check_busy = 0;
		t->check = NULL;
		agent_end(t, s, "completed", NULL, NULL, json_pack("{s:{s:b, s:s, "
		    "s:s}}", "check", "ok", 0, "error", gbr_err_kind(kind),
		    "message", reason));
		free(reason);
		json_decref(data);
	}
}

/* One step of a turn (see the top of the file). */
static void
agent_step(struct agent_turn *t)
{
	struct session_error	 err;
	struct agent_view	 v;
	struct session		*s;
	json_t			*msgs, *am, *calls, *c;
	enum session_state	 st;
	const char		*cid;
	size_t			 k;

	if (t->call != NULL || t->tc_busy || t->check_busy || t->probing ||
	    t->writing)
		return;
	if ((s = session_find(t->sid)) == NULL || session_turn(s) != t->turn) {
		agent_kill(t);
		return;
	}
	st = session_state(s);
	if (st == SESSION_INTERRUPTED && t->resumed) {
		if (session_resume_turn(s, t->turn, "an approval was decided "
		    "after a restart; the turn goes on", &err) != 0) {
			free(err.message);
			json_decref(err.data);
			agent_kill(t);
			return;
		}
		st = session_state(s);
	}
	if (st != SESSION_RUNNING && st != SESSION_AWAITING_APPROVAL) {
		agent_kill(t);
		return;
	}
	msgs = session_messages(s, 0);
	agent_view(msgs, &v);
	if (v.last != -1 && v.last > v.feedback) {
		am = json_array_get(msgs, v.last);
		calls = json_object_get(am, "tool_calls");
		json_array_foreach(calls, k, c) {
			cid = json_string_value(json_object_get(c, "call_id"));
			if (cid != NULL && agent_result(msgs, v.last, cid) != -1)
				continue;
			agent_run_tool(t, s, am, c, k);
			json_decref(msgs);
			return;
		}
		if (json_array_size(calls) == 0) {
			agent_check(t, s, &v);
			json_decref(msgs);
			return;
		}
	}
	agent_request(t, s, msgs, &v);
	json_decref(msgs);
}

/* A turn begins. */
int
agent_turn_begin(struct session *s, uint64_t turn)
{
	const struct config	*cfg = config_get();
	struct agent_turn	*t;
	struct env		*env = NULL;
	struct sandbox		*sb;
	const char		*local = NULL;
	char			*cause;
	int			 known = 0;

	if (reload_session(s, &env, &sb, &cause) != 0) {
		free(cause);
		env = NULL;
	}

	if (!llm_configured(cfg, env)) {
		if (llm_local_url(cfg) == NULL)
			return -1;
		/* A local Ollama, as far as the last probe knows. */
		known = llm_local_known(llm_local_url(cfg), &local);
		if (known && local == NULL)
			return -1;
	}
	if ((t = agent_find(session_id(s))) != NULL)
		agent_kill(t);
	t = agent_new(s, turn);
	if (local != NULL)
		t->local_model = xstrdup(local);
	agent_kick(t);
	return 0;
}

/* Stops a session's turn. */
void
agent_cancel(struct session *s)
{
	struct agent_turn	*t;

	if ((t = agent_find(session_id(s))) != NULL)
		agent_kill(t);
}

/* Turns that waited for a human when gbrd stopped wait again. */
void
agent_recover(void)
{
	struct agent_view	 v;
	struct agent_turn	*t;
	struct session		*s;
	json_t			*list, *info, *msgs, *am, *calls, *c;
	const char		*cid, *local;
	size_t			 i, k;
	unsigned		 n = 0;

	/* Ask a local Ollama now, so that a first turn knows at once. */
	if (!llm_configured(config_get(), NULL) &&
	    llm_local_url(config_get()) != NULL)
		llm_local_known(llm_local_url(config_get()), &local);
	list = session_open_ids(NULL);
	json_array_foreach(list, i, info) {
		if ((s = session_find(json_string_value(info))) == NULL ||
		    session_state(s) != SESSION_AWAITING_APPROVAL)
			continue;
		msgs = session_messages(s, 0);
		agent_view(msgs, &v);
		if (v.last == -1 || v.last < v.feedback) {
			json_decref(msgs);
			continue;
		}
		am = json_array_get(msgs, v.last);
		calls = json_object_get(am, "tool_calls");
		json_array_foreach(calls, k, c) {
			cid = json_string_value(json_object_get(c, "call_id"));
			if (cid == NULL || agent_result(msgs, v.last, cid) != -1)
				continue;
			/* The same request_id: toolcall adopts the pending call. */
			t = agent_new(s, session_turn(s));
			t->resumed = 1;
			session_adopt_turn(s);
			agent_run_tool(t, s, am, c, k);
			n++;
			break;
		}
		json_decref(msgs);
	}
	json_decref(list);
	if (n > 0)
		log_info("%u agent turns wait for an approval again", n);
}

/* Stops everything; no callback runs after. */
void
agent_shutdown(void)
{
	struct agent_turn	*t;

	while ((t = TAILQ_FIRST(&agent_turns)) != NULL) {
		/* The tool and check modules stop on their own, silently. */
		t->tc_busy = t->check_busy = 0;
		agent_kill(t);
	}
	json_decref(agent_budgets);
	agent_budgets = NULL;
}

/* Counters for daemon.status. */
json_t *
agent_status(void)
{
	struct agent_turn	*t;
	unsigned		 streaming = 0, tools = 0;

	TAILQ_FOREACH(t, &agent_turns, entry) {
		streaming += t->call != NULL;
		tools += t->tc_busy || t->check_busy;
	}
	return json_pack("{s:i, s:i, s:i}", "turns", (int)agent_n, "streaming",
	    (int)streaming, "in_tools", (int)tools);
}
