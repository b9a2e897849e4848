/*
 * The conversation as the model sees it, and rewinding it (session.rewind
 * with conversation, doc/REWIND.md). The history is append-only: a rewind
 * of the conversation appends a history message {role: "rewind", to_seq,
 * from_turn?, messages, who?}, announced as a conversation.rewound event, and
 * the conversation the agent builds (session_conversation) leaves out
 * what each such marker cut: the messages after its to_seq that came
 * before it, and the marker itself. Because the cut is a history message,
 * it is replayed after a crash, kept in the history's side file by a disk
 * log snapshot and read back with it like any other message; and
 * session.history still shows everything, the marker included, so a
 * person sees that it happened.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "session.h"
#include "session-int.h"
#include "utf8.h"
#include "xmalloc.h"

#define CONV_FIRST_MAX	120	/* bytes of the first dropped user message shown */
#define CONV_MARK_BYTES	1024	/* more than a marker takes in the history */

/* A history message's seq (0 if it has none). */
static uint64_t
conv_seq(json_t *m)
{
	return (uint64_t)json_integer_value(json_object_get(m, "seq"));
}

/* True for a message whose role is r. */
static int
conv_role(json_t *m, const char *r)
{
	const char	*role = json_string_value(json_object_get(m, "role"));

	return role != NULL && strcmp(role, r) == 0;
}

/*
 * The messages of msgs (stolen) the model still sees, in order (new):
 * each marker removes what came before it after its to_seq (earlier
 * markers' cuts included), then is left out itself.
 */
static json_t *
conv_view(json_t *msgs)
{
	json_t		*out = json_array(), *m;
	uint64_t	 to;
	size_t		 i, n;

	json_array_foreach(msgs, i, m) {
		if (!conv_role(m, "rewind")) {
			json_array_append(out, m);
			continue;
		}
		to = (uint64_t)json_integer_value(json_object_get(m, "to_seq"));
		while ((n = json_array_size(out)) > 0 &&
		    conv_seq(json_array_get(out, n - 1)) > to)
			json_array_remove(out, n - 1);
	}
	json_decref(msgs);
	return out;
}

/* The history as the model sees it (see session.h). */
json_t *
session_conversation(struct session *s)
{
	json_t	*msgs;

	if ((msgs = session_messages(s, 0)) == NULL)
		return NULL;
	return conv_view(msgs);
}

/*
 * True for a message the model is sent (what agent_conversation keeps):
 * a user's, an answer of the agent (an assistant message with its step),
 * or the result of a call one of those made (calls: call_id -> true). A
 * person's own tool calls (tool.call) never reach the model.
 */
static int
conv_sent(json_t *m, json_t *calls)
{
	const char	*cid = json_string_value(json_object_get(m, "call_id"));

	if (conv_role(m, "user"))
		return 1;
	if (conv_role(m, "assistant"))
		return json_is_integer(json_object_get(m, "step"));
	return conv_role(m, "tool") && cid != NULL &&
	    json_object_get(calls, cid) != NULL;
}

/*
 * Where turn begins in a view: 0 with *to the seq just before its first
 * message (the user's message that started it), or -1 if the view holds
 * nothing of that turn or a later one. A user message carries its turn
 * (session_send); one written before it did is found as the last user
 * message before the first message of the turn.
 */
static int
conv_turn_start(json_t *view, uint64_t turn, uint64_t *to)
{
	json_t		*m, *t;
	size_t		 i, k;
	long		 user = -1;
	int		 plain;

	json_array_foreach(view, i, m) {
		plain = conv_role(m, "user") &&
		    json_object_get(m, "source") == NULL;
		if (plain)
			user = (long)i;
		t = json_object_get(m, "turn");
		if (!json_is_integer(t) || (uint64_t)json_integer_value(t) <
		    turn)
			continue;
		k = plain || user == -1 ? i : (size_t)user;
		*to = conv_seq(json_array_get(view, k)) - 1;
		return 0;
	}
	return -1;
}

/* What a conversation rewind would drop (see session.h). */
int
session_conversation_plan(struct session *s, uint64_t turn, uint64_t seq,
    json_t **plan, struct gbr_error *err)
{
	json_t		*view, *m, *c, *calls, *first = NULL;
	const char	*text;
	char		*cut;
	uint64_t	 to = seq;
	size_t		 i, k, n = 0, len;

	*plan = NULL;
	if (s->state == SESSION_RUNNING || s->state ==
	    SESSION_AWAITING_APPROVAL)
		return gbr_error_set(err, GBR_ERR_BUSY, json_pack("{s:s}",
		    "state", session_state_name(s->state)), "session %s is %s: "
		    "its conversation cannot be rewound while a turn runs; wait "
		    "for the turn to end or cancel it", s->id,
		    session_state_name(s->state));
	/*
	 * A full history would refuse the marker: say so before the files
	 * are touched, not after.
	 */
	if (s->nhist + 1 > config_get()->session_history_messages ||
	    s->hist_bytes + CONV_MARK_BYTES > config_get()->session_history_bytes)
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED, json_pack(
		    "{s:s}", "limit", "history"), "the history of session %s "
		    "is full: its conversation cannot be rewound; start a new "
		    "session", s->id);
	if ((view = session_conversation(s)) == NULL)
		return gbr_error_set(err, GBR_ERR_STORAGE, NULL, "the "
		    "session's history cannot be read from the disk log");
	if (turn != 0 && conv_turn_start(view, turn, &to) != 0) {
		json_decref(view);
		return gbr_error_set(err, GBR_ERR_NOT_FOUND, NULL, "the "
		    "conversation has no message of turn %llu or later: "
		    "nothing to drop", (unsigned long long)turn);
	}
	calls = json_object();
	json_array_foreach(view, i, m) {
		if (!conv_role(m, "assistant") ||
		    !json_is_integer(json_object_get(m, "step")))
			continue;
		json_array_foreach(json_object_get(m, "tool_calls"), k, c)
			if (json_is_string(json_object_get(c, "call_id")))
				json_object_set(calls, json_string_value(
				    json_object_get(c, "call_id")), json_true());
	}
	json_array_foreach(view, i, m) {
		if (conv_seq(m) <= to || !conv_sent(m, calls))
			continue;
		n++;
		if (first == NULL && conv_role(m, "user") &&
		    json_object_get(m, "source") == NULL)
			first = m;
	}
	json_decref(calls);
	if (n == 0) {
		json_decref(view);
		return gbr_error_set(err, GBR_ERR_NOT_FOUND, NULL, "the "
		    "conversation has no message after seq %llu: nothing to "
		    "drop", (unsigned long long)to);
	}
	*plan = json_pack("{s:I, s:I}", "to_seq", (json_int_t)to, "messages",
	    (json_int_t)n);
	if (turn != 0)
		json_object_set_new(*plan, "from_turn",
		    json_integer((json_int_t)turn));
	if (first != NULL && (text = json_string_value(json_object_get(first,
	    "content"))) != NULL) {
		/* Cut at a character's start; the history's text is UTF-8. */
		len = strlen(text);
		if (len > CONV_FIRST_MAX) {
			len = utf8_cut(text, CONV_FIRST_MAX);
			cut = xasprintf("%.*s...", (int)len, text);
			json_object_set_new(*plan, "first_user", json_string(cut));
			free(cut);
		} else
			json_object_set_new(*plan, "first_user",
			    json_string(text));
	}
	json_decref(view);
	return 0;
}

/* Records a conversation rewind (see session.h). */
int
session_conversation_rewind(struct session *s, json_t *plan, json_t *who,
    session_done_cb cb, void *arg, struct gbr_error *err)
{
	json_t	*m, *fields, *result;

	m = json_pack("{s:s, s:O, s:O}", "role", "rewind", "to_seq",
	    json_object_get(plan, "to_seq"), "messages", json_object_get(plan,
	    "messages"));
	if (json_object_get(plan, "from_turn") != NULL)
		json_object_set(m, "from_turn", json_object_get(plan,
		    "from_turn"));
	if (who != NULL)
		json_object_set(m, "who", who);
	fields = json_deep_copy(m);
	json_object_del(fields, "role");
	/* session_message gives the marker the next seq. */
	result = json_deep_copy(fields);
	json_object_set_new(result, "seq", json_integer((json_int_t)(s->seq +
	    1)));
	if (json_object_get(plan, "first_user") != NULL)
		json_object_set(result, "first_user", json_object_get(plan,
		    "first_user"));
	return session_message(s, "conversation.rewound", m, fields, NULL,
	    result, cb, arg, err);
}
