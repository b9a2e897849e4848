/*
 * What the rest of gbrd reads of the approvals: the accessors of
 * approval.h, the approval object of the protocol (events, replies and
 * snapshots all use it), the count for daemon.status, finding a call's
 * approval by request_id, and approval.list with its bounds (the content
 * budget and the client's queue). Nothing here changes an approval,
 * except that a listing first withdraws what waits on closed sessions
 * (approval.c's sweep), so a list never shows one that cannot be decided.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdlib.h>
#include <string.h>

#include "approval-int.h"
#include "config.h"

/* The name of a state. */
const char *
approval_state_name(enum approval_state st)
{
	if ((unsigned)st >= sizeof ap_states / sizeof ap_states[0])
		return "unknown";
	return ap_states[st];
}

/* The name of a reason to ask. */
const char *
approval_why_name(enum approval_why w)
{
	if ((unsigned)w >= sizeof ap_whys / sizeof ap_whys[0])
		return "protected_path";
	return ap_whys[w];
}

/* The approval object of the protocol. */
json_t *
approval_json(const struct approval *a)
{
	json_t	*o;

	o = json_pack("{s:s, s:s, s:s, s:O, s:s?, s:s?, s:s?, s:s, s:s, s:I, "
	    "s:s, s:s}",
	    "id", a->id, "session", a->session, "tool", a->tool,
	    "args", a->args, "path", a->path, "command", a->command,
	    "diff", a->diff, "why", approval_why_name(a->why),
	    "state", approval_state_name(a->state),
	    "created_ms", (json_int_t)a->created_ms,
	    "scope", a->scope_session ? "session" : "once",
	    "call_id", a->call_id);
	json_object_set_new(o, "path", a->path != NULL ? json_string(a->path) :
	    json_null());
	json_object_set_new(o, "command", a->command != NULL ?
	    json_string(a->command) : json_null());
	json_object_set_new(o, "diff", a->diff != NULL ? json_string(a->diff) :
	    json_null());
	json_object_set_new(o, "expires_ms", a->expires_ms != 0 ?
	    json_integer((json_int_t)a->expires_ms) : json_null());
	json_object_set_new(o, "decision", a->decided ?
	    json_string(ap_decisions[a->decision]) : json_null());
	json_object_set_new(o, "reason", a->reason != NULL ?
	    json_string(a->reason) : json_null());
	json_object_set_new(o, "result", a->result != NULL ?
	    json_incref(a->result) : json_null());
	json_object_set_new(o, "request_id", a->rid != NULL ?
	    json_string(a->rid) : json_null());
	if (a->note != NULL)
		json_object_set_new(o, "note", json_string(a->note));
	if (a->effect != NULL)
		json_object_set_new(o, "effect", json_string(a->effect));
	if (a->resolved_ms != 0)
		json_object_set_new(o, "resolved_ms",
		    json_integer((json_int_t)a->resolved_ms));
	if (a->by != NULL)
		json_object_set_new(o, "decided_by", json_string(a->by));
	return o;
}

/* Counts the approvals that are not finished. */
unsigned
approval_pending_count(void)
{
	struct approval	*a;
	unsigned	 n = 0;

	TAILQ_FOREACH(a, &ap_all, entry)
		if (ap_open(a->state))
			n++;
	return n;
}

/* Finds a live approval of a call by its request_id. */
struct approval *
approval_find_request(const char *session, const char *request_id)
{
	struct approval	*a;

	TAILQ_FOREACH(a, &ap_all, entry)
		if (!ap_finished(a->state) && a->rid != NULL &&
		    strcmp(a->rid, request_id) == 0 &&
		    strcmp(a->session, session) == 0)
			return a;
	return NULL;
}

/* Accessors. */
const char *
approval_id(const struct approval *a)
{
	return a->id;
}

const char *
approval_session(const struct approval *a)
{
	return a->session;
}

const char *
approval_call_id(const struct approval *a)
{
	return a->call_id;
}

const char *
approval_tool(const struct approval *a)
{
	return a->tool;
}

json_t *
approval_args(const struct approval *a)
{
	return a->args;
}

const char *
approval_path(const struct approval *a)
{
	return a->path;
}

const char *
approval_request_id(const struct approval *a)
{
	return a->rid;
}

json_t *
approval_pin(const struct approval *a)
{
	return a->pin;
}

uint64_t
approval_turn(const struct approval *a)
{
	return a->turn;
}

enum approval_state
approval_state(const struct approval *a)
{
	return a->state;
}

enum approval_decision
approval_decision(const struct approval *a)
{
	return a->decision;
}

const char *
approval_reason(const struct approval *a)
{
	return a->reason;
}

const char *
approval_content(const struct approval *a, size_t *len)
{
	if (len != NULL)
		*len = a->content_len;
	return a->decided && a->decision == APPROVAL_EDIT ? a->content : NULL;
}

/* The proposed new file of a file tool's approval (borrowed), or NULL. */
const char *
approval_proposed(const struct approval *a, size_t *len)
{
	json_t	*c;

	if (a->proposed != NULL) {
		*len = a->proposed_len;
		return a->proposed;
	}
	c = json_object_get(a->args, "content");
	if (strcmp(a->tool, "write_file") != 0 || !json_is_string(c))
		return NULL;
	*len = json_string_length(c);
	return json_string_value(c);
}

/* approval.list (see approval.h). */
json_t *
approval_list(const char *session, int all, const char *id, int *more)
{
	struct approval	*a;
	json_t		*arr = json_array(), *o;
	const char	*content;
	char		*enc;
	size_t		 len, budget = APPROVAL_LIST_CONTENT, bytes = 0;
	size_t		 max = config_get()->client_queue_bytes / 2;

	*more = 0;
	ap_sweep_closed();
	TAILQ_FOREACH(a, &ap_all, entry) {
		if (session != NULL && strcmp(a->session, session) != 0)
			continue;
		if (id != NULL ? strcmp(a->id, id) != 0 :
		    !all && !ap_open(a->state))
			continue;
		o = approval_json(a);
		/* The reply must fit a client's queue: the rest is "more". */
		enc = json_dumps(o, JSON_COMPACT);
		len = enc != NULL ? strlen(enc) : 0;
		free(enc);
		if (json_array_size(arr) > 0 && bytes + len > max) {
			json_decref(o);
			*more = 1;
			break;
		}
		bytes += len;
		content = approval_proposed(a, &len);
		if (content != NULL && len <= budget && bytes + len <= max) {
			json_object_set_new(o, "content", json_stringn(content,
			    len));
			budget -= len;
			bytes += len;
		} else {
			json_object_set_new(o, "content", json_null());
			if (content != NULL)
				json_object_set_new(o, "content_omitted",
				    json_true());
		}
		json_array_append_new(arr, o);
	}
	return arr;
}
