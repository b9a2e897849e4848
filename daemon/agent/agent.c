/*
 * The agent loop: see agent.h for what a turn is. This file owns the
 * turns in flight (struct agent_turn, agent-int.h: the model call, the
 * tool call or the check being waited for, the retry timer) and their
 * steps; the history is the session's, read again at every step. What
 * is sent to the model (the conversation and its context budget) is
 * agent-context.c's; the check after a turn is agent-check.c's.
 *
 * One step (agent_step), from the current turn's messages (those after
 * the user's message that started it):
 *   - the last assistant message has a tool call without a recorded
 *     result: run it (one at a time, in order) through toolcall_start,
 *     with the call's id as call_id and "agent:TURN:STEP:K" as its
 *     request_id, so that after a restart the same call is adopted, never
 *     started twice;
 *   - it has tool calls, all answered: ask the model again;
 *   - it has none (the model's final answer): the check, if the turn
 *     changed files (agent_check);
 *   - there is none after the last user or check message: ask the model.
 *
 * Asking the model: the provider, URL, model and key are resolved again
 * for every request, and the system prompt is the session's profile's as
 * it is now (session-env.c keeps it current), so a reloaded profile
 * applies to the next request. The request is built from the whole history and cut
 * to the context budget (agent_build); a cut is told to the user by a
 * context.trimmed event, and a request that cannot fit ends the turn
 * with too_large. A refusal saying the context overflowed teaches a
 * smaller budget, and the request is cut to it and sent again.
 * Text streams to the attached clients as live message.delta events
 * (deltas are not logged: the durable record is the assistant message
 * written once the answer is complete). A failed request is retried with
 * exponential backoff and jitter, or after Retry-After, when it is worth
 * it (429, 5xx, a dropped or cut stream); an llm.retry event says so, and
 * clients drop the partial text they were shown. Tools run only after a
 * complete answer, so a retry never runs one twice.
 *
 * Callbacks from other modules carry a small key (the turn's id), never a
 * pointer to the turn: a turn cancelled meanwhile is simply not found.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "agent.h"
#include "agent-int.h"
#include "config.h"
#include "env.h"
#include "loop.h"
#include "llm.h"
#include "log.h"
#include "clock.h"
#include "mcp.h"
#include "osdep.h"
#include "session-env.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "toolcall.h"
#include "xmalloc.h"

#define AGENT_SHRINKS_MAX	6	/* cut requests after overflows, per turn */

static struct event_base	*agent_base;	/* the loop's, from agent_init */

/* Takes the loop; session hands running turns to the agent from now on. */
void
agent_init(struct event_base *base)
{
	static const struct session_turn_ops ops = {
		agent_turn_begin, agent_cancel
	};

	agent_base = base;
	session_set_turn_ops(&ops);
}

static struct agent_list	agent_turns = TAILQ_HEAD_INITIALIZER(agent_turns);
static uint64_t			agent_next_id = 1;
static unsigned			agent_n;

static void	agent_step(struct agent_turn *);

/* A key for a callback (the callback frees it). */
struct agent_key *
agent_key(struct agent_turn *t)
{
	struct agent_key	*k = xmalloc(sizeof *k);

	k->id = t->id;
	return k;
}

/* The turn a key names, or NULL; frees the key. */
struct agent_turn *
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
	if ((t->ev = evtimer_new(agent_base, agent_ev_cb, t)) == NULL)
		fatalx("evtimer_new failed");
	TAILQ_INSERT_TAIL(&agent_turns, t, entry);
	agent_n++;
	return t;
}

/*
 * Forgets a turn at once: the stream stops, a tool call or check is told
 * to stop (their callbacks find no turn), the probe forgets it.
 */
void
agent_kill(struct agent_turn *t)
{
	TAILQ_REMOVE(&agent_turns, t, entry);
	agent_n--;
	if (t->call != NULL)
		llm_call_cancel(t->call);
	if (t->tc != NULL && t->tc_busy)
		toolcall_cancel(t->tc);
	if (t->check != NULL && t->check_busy)
		tool_job_cancel(t->check);
	if (t->probing)
		llm_local_forget(t);
	event_free(t->ev);
	if (t->have_target)
		llm_target_free(&t->target);
	free(t->local_model);
	free(t);
}

/*
 * The usage of a turn: every answer's counts, summed, and what they cost
 * at [prices]. The cost is there only if every answer that reports usage
 * came from a priced model: a sum that leaves some answers out would read
 * as the whole, so an unpriced one gives "unpriced": true instead. A turn
 * without answers has neither: there was nothing to price.
 */
static json_t *
agent_usage(json_t *msgs, uint64_t turn)
{
	const struct config		*cfg = config_get();
	const struct config_price	*pr;
	json_t				*m, *u, *o;
	json_int_t			 in = 0, out = 0, min, mout;
	size_t				 i;
	double				 cost = 0;
	int				 answers = 0, unpriced = 0;

	json_array_foreach(msgs, i, m) {
		if (json_object_get(m, "step") == NULL ||
		    (uint64_t)json_integer_value(json_object_get(m, "turn")) != turn)
			continue;
		u = json_object_get(m, "usage");
		min = json_integer_value(json_object_get(u, "input_tokens"));
		mout = json_integer_value(json_object_get(u, "output_tokens"));
		if (min < 0)
			min = 0;
		if (mout < 0)
			mout = 0;
		in += min;
		out += mout;
		if (!json_is_object(u))
			continue;
		answers++;
		pr = config_price(cfg, json_string_value(json_object_get(m,
		    "model")));
		if (pr == NULL)
			unpriced = 1;
		else
			cost += (double)min * pr->input / 1e6 +
			    (double)mout * pr->output / 1e6;
	}
	o = json_pack("{s:I, s:I}", "input_tokens", in, "output_tokens", out);
	/* Absurd counts times prices could overflow: a real must be finite. */
	if (unpriced || !isfinite(cost))
		json_object_set_new(o, "unpriced", json_true());
	else if (answers > 0)
		json_object_set_new(o, "cost_usd", json_real(cost));
	return o;
}

/*
 * Ends the turn (outcome, an error kind and message or NULL, fields
 * stolen) with its usage, and forgets it.
 */
void
agent_end(struct agent_turn *t, struct session *s, const char *outcome,
    const char *kind, const char *message, json_t *fields)
{
	struct gbr_error	 err;
	json_t			*msgs;

	if (fields == NULL)
		fields = json_object();
	if (s != NULL) {
		if ((msgs = session_messages(s, 0)) == NULL)
			msgs = json_array();
		json_object_set_new(fields, "usage", agent_usage(msgs, t->turn));
		json_decref(msgs);
		log_info("session %s: turn %llu %s%s%s", t->sid,
		    (unsigned long long)t->turn, outcome, kind != NULL ? ": " : "",
		    message != NULL ? message : "");
		if (session_end_turn(s, t->turn, outcome, kind, message, fields,
		    &err) != 0) {
			log_warn("session %s: the end of turn %llu is not recorded: "
			    "%s", t->sid, (unsigned long long)t->turn, err.message);
			gbr_error_clear(&err);
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
	struct gbr_error	 err;
	struct env		*env;
	struct sandbox		*sb;
	json_t			*conv, *tools;
	const char		*url;
	char			*cause;
	unsigned		 shortened;
	size_t			 before, max, learned;
	int			 r;

	if (session_env_and_sandbox(s, &env, &sb, &cause) != 0) {
		agent_end(t, s, "error", "invalid_env", cause, NULL);
		free(cause);
		return;
	}
	/*
	 * The profile's MCP servers are starting: their tools belong in the
	 * request, so wait for them a bounded time (checked every 50 ms).
	 */
	if (t->mcp_since == 0)
		t->mcp_since = clock_mono_ms();
	if (mcp_session_starting(t->sid) &&
	    clock_mono_ms() - t->mcp_since < AGENT_MCP_WAIT_MS) {
		agent_kick_ms(t, 50);
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
	if ((learned = agent_budget(t->sid, &t->target)) > 0 && learned < max)
		max = learned;
	if (t->budget > 0 && t->budget < max)
		max = t->budget;
	conv = agent_conversation(msgs);
	tools = tool_list_json(t->sid);
	r = agent_build(&t->target, env_system_prompt(env) != NULL ?
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
			gbr_error_clear(&err);
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
void
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
	struct gbr_error	 err;
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
			gbr_error_clear(&err);
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
			gbr_error_clear(&err);
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
		agent_budget_set(t->sid, &t->target, t->budget);
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
		gbr_error_clear(&err);
	}
}

/* Records a tool result the tool never produced (bad arguments, ...). */
static void
agent_tool_refused(struct agent_turn *t, struct session *s, json_t *call,
    const char *rid, const char *kind, const char *message)
{
	struct gbr_error	 err;
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
		gbr_error_clear(&err);
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

/* Runs the call k (call) of the assistant message am. */
static void
agent_run_tool(struct agent_turn *t, struct session *s, json_t *am,
    json_t *call, size_t k)
{
	struct toolcall_opts	 opts;
	struct gbr_error	 err;
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
		gbr_error_clear(&err);
	}
}

/*
 * Ends the turn as refused if the model's last answer says it declined
 * (a stop reason of Anthropic's, OpenAI's or Gemini's): the person is told,
 * instead of a turn that looks completed with nothing in it. Returns 1 if
 * it ended the turn.
 */
static int
agent_refused(struct agent_turn *t, struct session *s, json_t *am)
{
	static const char *const refusals[] = {
		"refusal",				/* Anthropic */
		"content_filter",			/* OpenAI */
		"SAFETY", "RECITATION", "BLOCKLIST",	/* Gemini */
		"PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
	};
	const char	*why = json_string_value(json_object_get(am,
			    "stop_reason"));
	char		*msg;
	size_t		 i;

	if (why == NULL)
		return 0;
	for (i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
		if (strcmp(why, refusals[i]) != 0)
			continue;
		msg = xasprintf("the model declined to answer (stop reason %s); "
		    "rephrase the request or try another model", why);
		agent_end(t, s, "refused", "refused", msg, json_pack("{s:s}",
		    "stop_reason", why));
		free(msg);
		return 1;
	}
	return 0;
}

/* One step of a turn (see the top of the file). */
static void
agent_step(struct agent_turn *t)
{
	struct gbr_error	 err;
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
			gbr_error_clear(&err);
			agent_kill(t);
			return;
		}
		st = session_state(s);
	}
	if (st != SESSION_RUNNING && st != SESSION_AWAITING_APPROVAL) {
		agent_kill(t);
		return;
	}
	if ((msgs = session_conversation(s)) == NULL) {
		agent_end(t, s, "error", "storage_error", "the session's "
		    "history cannot be read from the disk log", NULL);
		return;
	}
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
		if (json_array_size(calls) == 0 && agent_refused(t, s, am)) {
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

	if (session_env_and_sandbox(s, &env, &sb, &cause) != 0) {
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
		if ((msgs = session_conversation(s)) == NULL)
			continue;
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
	agent_budget_clear();
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
