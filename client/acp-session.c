/*
 * gbrctl acp's session requests (see ctl-acp.c for the whole agent):
 * session/new is session.create on the editor's cwd (or --workspace),
 * session/load finds any open gbr session by its id, replays its history
 * and attaches from there, session/prompt is session.send and waits for
 * the turn's end, session/cancel is session.cancel, and the editor's
 * answer to a permission request is approval.resolve. gbrd's replies to
 * each of these come back here too (acp_daemon_reply).
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp-int.h"
#include "jsonrpc.h"
#include "xmalloc.h"

/* ACP's "Resource not found" and "Authentication required". */
#define ACP_NOT_FOUND		-32002
#define ACP_AUTH_REQUIRED	-32000

/* Finds an open session by its id. */
struct acp_sess *
acp_sess_find(struct acp *a, const char *id)
{
	struct acp_sess	*s;

	if (id == NULL)
		return NULL;
	TAILQ_FOREACH(s, &a->sessions, entry) {
		if (strcmp(s->id, id) == 0)
			return s;
	}
	return NULL;
}

/* Adds a session the editor opened (or returns it if it is open). */
static struct acp_sess *
acp_sess_add(struct acp *a, const char *id, const char *workspace)
{
	struct acp_sess	*s;

	if ((s = acp_sess_find(a, id)) != NULL)
		return s;
	s = xcalloc(1, sizeof *s);
	snprintf(s->id, sizeof s->id, "%s", id);
	s->workspace = xstrdup(workspace != NULL ? workspace : "/");
	s->args = json_object();
	s->delta_turn = s->delta_step = -1;
	TAILQ_INSERT_TAIL(&a->sessions, s, entry);
	a->nsessions++;
	return s;
}

/* Frees a session record. */
void
acp_sess_free(struct acp *a, struct acp_sess *s)
{
	TAILQ_REMOVE(&a->sessions, s, entry);
	a->nsessions--;
	json_decref(s->prompt_id);
	json_decref(s->args);
	free(s->workspace);
	free(s->ended_outcome);
	free(s->ended_error);
	free(s->ended_kind);
	free(s);
}

/* The session a request names, or NULL after answering the error. */
static struct acp_sess *
acp_sess_of(struct acp *a, json_t *id, json_t *params)
{
	json_t		*sid = json_object_get(params, "sessionId");
	struct acp_sess	*s;

	if (!json_is_string(sid)) {
		acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params",
		    "sessionId must be a string");
		return NULL;
	}
	if ((s = acp_sess_find(a, json_string_value(sid))) == NULL)
		acp_error(a, id, ACP_NOT_FOUND, "session_not_found", "session "
		    "'%.64s' is not open here (session/new or session/load it)",
		    json_string_value(sid));
	return s;
}

/* Checks that a cwd is an absolute path; answers the error if not. */
static int
acp_check_cwd(struct acp *a, json_t *id, json_t *cwd)
{
	if (!json_is_string(cwd) || json_string_value(cwd)[0] != '/') {
		acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params",
		    "cwd must be an absolute path");
		return -1;
	}
	if (a->nsessions >= ACP_SESSIONS_MAX) {
		acp_error(a, id, RPC_INTERNAL_ERROR, "limit_reached", "%u "
		    "sessions are open on this connection already",
		    a->nsessions);
		return -1;
	}
	return 0;
}

/* session/new: a new gbr session on the workspace. */
void
acp_session_new(struct acp *a, json_t *id, json_t *params)
{
	json_t	*cwd = json_object_get(params, "cwd"), *p;

	if (acp_check_cwd(a, id, cwd) != 0)
		return;
	/* MCP servers the editor offers are not used: gbr has its own tools. */
	if (json_array_size(json_object_get(params, "mcpServers")) > 0)
		acp_log("the editor's MCP servers are not used; gbr's agent "
		    "has its own tools");
	p = json_pack("{s:s}", "workspace", a->workspace != NULL ?
	    a->workspace : json_string_value(cwd));
	if (a->env != NULL)
		json_object_set_new(p, "env", json_string(a->env));
	acp_call(a, ACP_D_CREATE, NULL, id, "session.create", p);
}

/* session/load: an open gbr session, found by its id. */
void
acp_session_load(struct acp *a, json_t *id, json_t *params)
{
	json_t	*sid = json_object_get(params, "sessionId");

	if (acp_check_cwd(a, id, json_object_get(params, "cwd")) != 0)
		return;
	if (!json_is_string(sid) || json_string_length(sid) == 0 ||
	    json_string_length(sid) >= sizeof(((struct acp_sess *)0)->id)) {
		acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params",
		    "sessionId must be a gbr session's id");
		return;
	}
	if (acp_sess_find(a, json_string_value(sid)) != NULL) {
		acp_error(a, id, RPC_INVALID_PARAMS, "already_open", "session "
		    "%s is open on this connection already",
		    json_string_value(sid));
		return;
	}
	acp_call(a, ACP_D_LIST, json_string_value(sid), id, "session.list",
	    NULL);
}

/*
 * The text gbr's model reads for a prompt: its text blocks, then each
 * resource link as a reference and each embedded resource with its text
 * (what the editor had, unsaved or not: context to read, never a file the
 * tools see). Returns NULL with *why for anything else.
 */
static char *
acp_prompt_text(json_t *prompt, const char **why)
{
	json_t		*b, *res;
	const char	*type, *text, *uri;
	char		*out = xstrdup(""), *next;
	size_t		 i;

	json_array_foreach(prompt, i, b) {
		type = json_string_value(json_object_get(b, "type"));
		if (type == NULL)
			goto bad;
		next = NULL;
		if (strcmp(type, "text") == 0) {
			if ((text = json_string_value(json_object_get(b,
			    "text"))) == NULL)
				goto bad;
			next = xasprintf("%s%s%s", out, *out != '\0' ? "\n" : "",
			    text);
		} else if (strcmp(type, "resource_link") == 0) {
			if ((uri = json_string_value(json_object_get(b,
			    "uri"))) == NULL)
				goto bad;
			next = xasprintf("%s%s[%s](%s)", out, *out != '\0' ? "\n" :
			    "", json_string_value(json_object_get(b, "name")) !=
			    NULL ? json_string_value(json_object_get(b, "name")) :
			    uri, uri);
		} else if (strcmp(type, "resource") == 0) {
			res = json_object_get(b, "resource");
			uri = json_string_value(json_object_get(res, "uri"));
			text = json_string_value(json_object_get(res, "text"));
			if (uri == NULL || text == NULL) {
				*why = "only text resources can be embedded";
				free(out);
				return NULL;
			}
			next = xasprintf("%s%s<context uri=\"%s\">\n%s\n</context>",
			    out, *out != '\0' ? "\n" : "", uri, text);
		} else {
			*why = "gbr takes text, resource links and embedded "
			    "text resources (no images or audio)";
			free(out);
			return NULL;
		}
		free(out);
		out = next;
		if (strlen(out) > ACP_PROMPT_MAX)
			break;	/* gbrd refuses it with its own limit */
	}
	if (*out == '\0') {
		*why = "the prompt is empty";
		free(out);
		return NULL;
	}
	return out;
bad:
	*why = "a content block lacks its type or text";
	free(out);
	return NULL;
}

/* session/prompt: session.send; answered when the turn ends. */
void
acp_session_prompt(struct acp *a, json_t *id, json_t *params)
{
	json_t		*prompt = json_object_get(params, "prompt");
	struct acp_sess	*s;
	struct acp_call	*c;
	const char	*why;
	char		*text;

	if ((s = acp_sess_of(a, id, params)) == NULL)
		return;
	if (!json_is_array(prompt)) {
		acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params",
		    "prompt must be an array of content blocks");
		return;
	}
	if (s->prompt_id != NULL) {
		acp_error(a, id, RPC_INVALID_REQUEST, "busy", "a prompt is "
		    "already running in session %s", s->id);
		return;
	}
	if ((text = acp_prompt_text(prompt, &why)) == NULL) {
		acp_error(a, id, RPC_INVALID_PARAMS, "invalid_params", "%s",
		    why);
		return;
	}
	snprintf(s->prompt_rid, sizeof s->prompt_rid, "acp-%s-%llu",
	    a->rid_prefix, ++a->rid_next);
	c = acp_call(a, ACP_D_SEND, s->id, id, "session.send", json_pack(
	    "{s:s, s:s, s:s}", "session", s->id, "text", text, "request_id",
	    s->prompt_rid));
	free(text);
	if (c == NULL)
		return;
	s->prompt_id = json_incref(id);
	s->prompt_turn = 0;
	s->cancel_asked = 0;
}

/* session/cancel: ends the running turn (its prompt says cancelled). */
void
acp_session_cancel(struct acp *a, json_t *params)
{
	struct acp_sess	*s;

	s = acp_sess_find(a, json_string_value(json_object_get(params,
	    "sessionId")));
	if (s == NULL || s->prompt_id == NULL)
		return;
	s->cancel_asked = 1;
	/* Before session.send answers, the cancel waits for the turn. */
	if (s->prompt_turn != 0)
		acp_call(a, ACP_D_CANCEL, s->id, NULL, "session.cancel",
		    json_pack("{s:s}", "session", s->id));
}

/* ACP's stop reason for how gbr's turn ended. */
static const char *
acp_stop_reason(const char *outcome)
{
	if (strcmp(outcome, "cancelled") == 0)
		return "cancelled";
	if (strcmp(outcome, "max_steps") == 0)
		return "max_turn_requests";
	if (strcmp(outcome, "refused") == 0)
		return "refusal";
	return "end_turn";	/* completed, check_failed */
}

/*
 * A turn of s ended (s->ended_turn): if it is the prompt's, the prompt is
 * answered. A turn that failed is an error saying why (no provider: ACP's
 * "authentication required", with what to set).
 */
void
acp_turn_ended(struct acp *a, struct acp_sess *s)
{
	const char	*o = s->ended_outcome != NULL ? s->ended_outcome : "";

	if (s->prompt_id == NULL || s->prompt_turn == 0 ||
	    s->ended_turn < s->prompt_turn)
		return;
	if (s->cancel_asked)
		o = "cancelled";
	if (strcmp(o, "error") == 0 || strcmp(o, "no_provider") == 0)
		acp_error(a, s->prompt_id, strcmp(o, "no_provider") == 0 ?
		    ACP_AUTH_REQUIRED : RPC_INTERNAL_ERROR, s->ended_kind !=
		    NULL ? s->ended_kind : o, "%s", s->ended_error != NULL ?
		    s->ended_error : "the turn failed");
	else
		acp_result(a, s->prompt_id, json_pack("{s:s}", "stopReason",
		    acp_stop_reason(o)));
	json_decref(s->prompt_id);
	s->prompt_id = NULL;
	s->prompt_turn = 0;
	free(s->ended_error);
	free(s->ended_kind);
	s->ended_error = s->ended_kind = NULL;
}

/* The editor answered a permission request: gbrd's approval.resolve. */
void
acp_permission_answer(struct acp *a, json_t *msg)
{
	json_t		*id = json_object_get(msg, "id");
	json_t		*outcome = json_object_get(json_object_get(msg, "result"),
			    "outcome");
	struct acp_perm	*p;
	const char	*opt, *decision, *scope = "once";

	TAILQ_FOREACH(p, &a->perms, entry) {
		if (json_is_integer(id) && json_integer_value(id) == p->rid)
			break;
	}
	if (p == NULL) {
		acp_log("a response to no request of ours");
		return;
	}
	if (p->stale || !mcp_streq(json_object_get(outcome, "outcome"),
	    "selected")) {
		/* Decided elsewhere, or dismissed: a terminal may still decide. */
		if (a->verbose)
			acp_log("permission %lld: no decision", p->rid);
		acp_perm_free(a, p);
		return;
	}
	opt = json_string_value(json_object_get(outcome, "optionId"));
	if (opt != NULL && strcmp(opt, "allow") == 0)
		decision = "approve";
	else if (opt != NULL && strcmp(opt, "allow_session") == 0) {
		decision = "approve";
		scope = "session";
	} else if (opt != NULL && strcmp(opt, "reject") == 0)
		decision = "deny";
	else {
		acp_log("permission %lld: unknown option; not decided", p->rid);
		acp_perm_free(a, p);
		return;
	}
	acp_call(a, ACP_D_RESOLVE, p->sess, NULL, "approval.resolve", json_pack(
	    "{s:s, s:s, s:s, s:s}", "id", p->approval, "decision", decision,
	    "scope", scope, "reason", "decided in the editor (ACP)"));
	acp_perm_free(a, p);
}

/* session.list answered a session/load: history next. */
static void
acp_load_found(struct acp *a, struct acp_call *c, json_t *res)
{
	json_t		*v;
	const char	*id = NULL, *ws = NULL;
	size_t		 i;
	struct acp_call	*h;

	json_array_foreach(json_object_get(res, "sessions"), i, v) {
		/* By id only: the editor goes on with the id it gave. */
		if (mcp_streq(json_object_get(v, "id"), c->sess)) {
			id = json_string_value(json_object_get(v, "id"));
			ws = json_string_value(json_object_get(v, "workspace"));
			break;
		}
	}
	if (id == NULL) {
		acp_error(a, c->id, ACP_NOT_FOUND, "session_not_found", "no open "
		    "gbr session has the id '%.64s'", c->sess);
		return;
	}
	h = acp_call(a, ACP_D_HISTORY, id, c->id, "session.history",
	    json_pack("{s:s, s:i}", "session", id, "limit", ACP_HISTORY_LIMIT));
	if (h != NULL)
		h->data = json_pack("{s:s}", "workspace", ws != NULL ? ws : "/");
}

/* A reply from gbrd to one of our calls. */
void
acp_daemon_reply(struct acp *a, struct acp_call *c, json_t *msg)
{
	json_t		*res = json_object_get(msg, "result"), *v;
	struct acp_sess	*s = acp_sess_find(a, c->sess);
	struct acp_call	*n;
	const char	*kind = client_error_kind(msg);
	const char	*text = client_error_message(msg);
	size_t		 i;

	if (res == NULL) {
		if (kind == NULL)
			kind = "error";
		if (text == NULL)
			text = "gbrd refused the request";
		switch (c->kind) {
		case ACP_D_SEND:
			if (s != NULL) {
				json_decref(s->prompt_id);
				s->prompt_id = NULL;
			}
			/* FALLTHROUGH */
		case ACP_D_CREATE:
		case ACP_D_LIST:
		case ACP_D_HISTORY:
		case ACP_D_ATTACH:
			if (c->id != NULL)
				acp_error(a, c->id, strcmp(kind,
				    "session_not_found") == 0 ? ACP_NOT_FOUND :
				    strcmp(kind, "invalid_params") == 0 ||
				    strcmp(kind, "not_found") == 0 ?
				    RPC_INVALID_PARAMS : RPC_INTERNAL_ERROR, kind,
				    "%s", text);
			if (c->kind != ACP_D_SEND && c->id != NULL &&
			    s != NULL && !s->attached)
				acp_sess_free(a, s);
			break;
		default:
			/* already_resolved: another client was first. */
			if (a->verbose || strcmp(kind, "already_resolved") != 0)
				acp_log("%s: %s", kind, text);
			break;
		}
		return;
	}
	switch (c->kind) {
	case ACP_D_CREATE:
		v = json_object_get(res, "id");
		if (!json_is_string(v)) {
			acp_error(a, c->id, RPC_INTERNAL_ERROR, "error",
			    "session.create gave no id");
			return;
		}
		s = acp_sess_add(a, json_string_value(v), json_string_value(
		    json_object_get(res, "workspace")));
		s->seq = json_integer_value(json_object_get(res, "seq"));
		n = acp_call(a, ACP_D_ATTACH, s->id, c->id, "session.attach",
		    json_pack("{s:s, s:I}", "session", s->id, "after_seq",
		    (json_int_t)s->seq));
		if (n != NULL)
			n->data = json_pack("{s:b}", "new", 1);
		break;
	case ACP_D_LIST:
		acp_load_found(a, c, res);
		break;
	case ACP_D_HISTORY:
		s = acp_sess_add(a, c->sess, json_string_value(json_object_get(
		    c->data, "workspace")));
		s->seq = json_integer_value(json_object_get(res, "seq"));
		acp_replay(a, s, json_object_get(res, "messages"),
		    json_is_true(json_object_get(res, "more")) ?
		    json_integer_value(json_object_get(res, "total")) -
		    (json_int_t)json_array_size(json_object_get(res,
		    "messages")) : 0);
		acp_call(a, ACP_D_ATTACH, s->id, c->id, "session.attach",
		    json_pack("{s:s, s:I}", "session", s->id, "after_seq",
		    (json_int_t)s->seq));
		break;
	case ACP_D_ATTACH:
		if (s == NULL)
			return;
		s->attached = 1;
		if (c->id != NULL)
			acp_result(a, c->id, json_is_true(json_object_get(c->data,
			    "new")) ? json_pack("{s:s}", "sessionId", s->id) :
			    json_object());
		/* The approvals already waiting are asked about at once. */
		acp_call(a, ACP_D_APPROVALS, s->id, NULL, "approval.list",
		    json_pack("{s:s}", "session", s->id));
		break;
	case ACP_D_APPROVALS:
		if (s == NULL)
			return;
		json_array_foreach(json_object_get(res, "approvals"), i, v) {
			if (mcp_streq(json_object_get(v, "state"), "pending") ||
			    mcp_streq(json_object_get(v, "state"),
			    "interrupted"))
				acp_ask_permission(a, s, v);
		}
		break;
	case ACP_D_SEND:
		if (s == NULL || s->prompt_id == NULL)
			return;
		s->prompt_turn = json_integer_value(json_object_get(res,
		    "turn"));
		if (s->cancel_asked)
			acp_call(a, ACP_D_CANCEL, s->id, NULL, "session.cancel",
			    json_pack("{s:s}", "session", s->id));
		acp_turn_ended(a, s);	/* it may have ended already */
		break;
	default:
		break;
	}
}
