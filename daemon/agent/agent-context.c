/*
 * What the agent sends a model: the provider-neutral conversation a
 * session history stands for (agent_conversation, agent.h), and the
 * context budget it must fit. This file owns turning a history into a
 * conversation, cutting a conversation until its request fits, and the
 * budgets learned from the models' refusals. It knows nothing of turns
 * in flight (agent.c) or of the check (agent-check.c): it works on
 * histories, conversations and targets.
 *
 * The budget: if a request would be larger than max_request_bytes (or
 * than what the model's refusals taught), the oldest tool outputs are
 * shortened first, then the oldest messages and tool call arguments,
 * then whole exchanges are left out (each with a marker saying so); the
 * newest user message is kept whole, and a request that still does not
 * fit is never sent (agent.c then ends the turn with too_large, and
 * tells the user of any cut with a context.trimmed event).
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent.h"
#include "agent-int.h"
#include "llm.h"
#include "session.h"
#include "utf8.h"
#include "xmalloc.h"

#define AGENT_KEEP		512	/* bytes kept of a shortened string */
#define AGENT_BUDGETS_MAX	256	/* sessions whose learned budget is kept */

/*
 * "session provider model" -> the request size the model's context takes,
 * as learned from the provider's refusals: later requests are cut to it
 * at once instead of being refused again. In memory only: after a restart
 * the first overflow teaches it again.
 */
static json_t			*agent_budgets;

/* True for an assistant message the agent wrote. */
int
agent_ours(json_t *m)
{
	const char	*role = json_string_value(json_object_get(m, "role"));

	return role != NULL && strcmp(role, "assistant") == 0 &&
	    json_is_integer(json_object_get(m, "step"));
}

/*
 * The result of write_file or edit_file without its diff (a new
 * reference), or NULL for any other. The diff is for the person reading
 * the tool.result, which keeps it: the model wrote the change itself and
 * knows it, and up to TF_DIFF_OUT_MAX bytes per write, sent again with
 * every later request, would crowd out of the context what it does not
 * know. What it cannot know (what a human changed in its proposal) comes
 * apart, as "human_changes", and is kept.
 */
static json_t *
agent_without_diff(json_t *m)
{
	const char	*tool = json_string_value(json_object_get(m, "tool"));
	json_t		*r = json_object_get(m, "result");

	if (tool == NULL || (strcmp(tool, "write_file") != 0 &&
	    strcmp(tool, "edit_file") != 0) || !json_is_object(r) ||
	    (json_object_get(r, "diff") == NULL &&
	    json_object_get(r, "diff_omitted") == NULL))
		return NULL;
	r = json_copy(r);
	json_object_del(r, "diff");
	json_object_del(r, "diff_truncated");
	json_object_del(r, "diff_omitted");
	return r;
}

/* A tool result as the model reads it. */
static char *
agent_output(json_t *m)
{
	json_t		*e = json_object_get(m, "error"), *r;
	const char	*kind, *msg;
	char		*s, *data, *out;

	if (json_is_true(json_object_get(m, "ok"))) {
		if ((r = agent_without_diff(m)) != NULL) {
			s = json_dumps(r, JSON_COMPACT);
			json_decref(r);
		} else
			s = json_dumps(json_object_get(m, "result"),
			    JSON_COMPACT | JSON_ENCODE_ANY);
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
	keep = utf8_cut(s, AGENT_KEEP);
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
agent_drop(const struct llm_target *target, const char *system, json_t *conv,
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
		if (llm_request_build(target, system, conv, tools, rq,
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
int
agent_build(const struct llm_target *target, const char *system, json_t *conv,
    json_t *tools, size_t max, struct llm_request *rq, unsigned *shortened,
    size_t *before, char **cause)
{
	size_t		 n, i, last, excess, saved, dropped;
	const char	*role;
	json_t		*m;
	int		 pass;

	*shortened = 0;
	if (llm_request_build(target, system, conv, tools, rq, cause) != 0)
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
			if (llm_request_build(target, system, conv, tools,
			    rq, cause) != 0)
				return -1;
		}
	}
	if (rq->body_len > max && last < n) {
		if ((dropped = agent_drop(target, system, conv, tools, rq, max,
		    &last, cause)) == (size_t)-1)
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
agent_budget_key(const char *sid, const struct llm_target *target)
{
	return xasprintf("%s %s %s", sid, target->provider->name,
	    target->model);
}

/* The request size the turn's model takes (0: none learned). */
size_t
agent_budget(const char *sid, const struct llm_target *target)
{
	json_t	*v;
	char	*key;

	if (agent_budgets == NULL)
		return 0;
	key = agent_budget_key(sid, target);
	v = json_object_get(agent_budgets, key);
	free(key);
	return v != NULL ? (size_t)json_integer_value(v) : 0;
}

/* Remembers a smaller budget for the turn's model; forgets closed sessions'. */
void
agent_budget_set(const char *sid, const struct llm_target *target,
    size_t bytes)
{
	const char	*k;
	json_t		*v;
	void		*tmp;
	char		*key, ksid[AGENT_SID_MAX + 1];

	if (agent_budgets == NULL)
		agent_budgets = json_object();
	if (json_object_size(agent_budgets) >= AGENT_BUDGETS_MAX)
		json_object_foreach_safe(agent_budgets, tmp, k, v) {
			snprintf(ksid, sizeof ksid, "%.*s", (int)strcspn(k, " "),
			    k);
			if (session_find(ksid) == NULL)
				json_object_del(agent_budgets, k);
		}
	key = agent_budget_key(sid, target);
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
size_t
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

/* Forgets every learned budget (agent_shutdown). */
void
agent_budget_clear(void)
{
	json_decref(agent_budgets);
	agent_budgets = NULL;
}
