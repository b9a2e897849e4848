/*
 * The session.* methods. Each handler checks its params (the validation
 * boundary: workspaces are made canonical here, names and environment
 * names checked), finds the session by id or by name, and hands the typed
 * call to session.c, which answers through method_session_done once the
 * change is in the disk log.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approval.h"
#include "dispatch.h"
#include "config.h"
#include "env.h"
#include "llm.h"
#include "log.h"
#include "mcp.h"
#include "methods.h"
#include "paths.h"
#include "rewind.h"
#include "session-env.h"
#include "session.h"
#include "tool-run.h"
#include "toolcall.h"
#include "xmalloc.h"

/* History messages returned when the client does not say. */
#define METHOD_HISTORY_DEFAULT	1000
#define METHOD_HISTORY_MAX	100000

/* session.c callback: the change is in the log, or it could not be. */
static void
method_session_done(void *arg, int error, json_t *result)
{
	struct request	*req = arg;

	if (error != 0)
		request_error(req, GBR_ERR_STORAGE, json_pack("{s:s}", "errno",
		    strerror(error)), "the change could not be written to the "
		    "disk log: %s", strerror(error));
	else
		request_reply(req, json_incref(result));
}

/* Fails a request with what session.c said. */
static void
method_session_fail(struct request *req, struct gbr_error *err)
{
	request_error(req, err->kind, err->data, "%s", err->message);
	free(err->message);
}

/* Finds the session named by params.session; answers the request if none. */
static struct session *
method_session_lookup(struct request *req, json_t *params, int required)
{
	struct session	*s;
	const char	*key = NULL;

	if (params_string(req, params, "session", required, &key) != 0)
		return NULL;
	if (key == NULL)
		return NULL;
	if ((s = session_find(key)) == NULL) {
		request_error(req, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", key, strlen(key) > 64 ? (size_t)64 : strlen(key)),
		    "no open session has the id or name '%.64s'", key);
		return NULL;
	}
	return s;
}

/*
 * Makes a workspace canonical and gives its owner; answers the request and
 * returns -1 if it is not usable.
 */
static int
method_workspace(struct request *req, const char *path, char *out, long *uid)
{
	struct stat	sb;

	if (!paths_is_absolute(path) || strlen(path) >= PATH_MAX) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "workspace"), "workspace: must be an absolute path "
		    "shorter than %d bytes", PATH_MAX);
		return -1;
	}
	if (realpath(path, out) == NULL) {
		request_error(req, errno == ENOENT ? GBR_ERR_NOT_FOUND :
		    GBR_ERR_INVALID_PARAMS, json_pack("{s:s, s:s}", "field",
		    "workspace", "errno", strerror(errno)), "workspace: %s",
		    strerror(errno));
		return -1;
	}
	if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "workspace"), "workspace: not a directory");
		return -1;
	}
	*uid = (long)sb.st_uid;
	return 0;
}

/*
 * Loads the profile a new session asks for (NULL: "default", else the
 * built-in default), so that a broken or missing one is refused with its
 * error before anything is written. *system is the prompt (caller frees).
 */
static int
method_env(struct request *req, const char *ws, const char *env,
    char **system)
{
	struct env	*e;
	char		*cause;

	if (env != NULL && !env_name_valid(env)) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "env"), "env: 1 to 64 letters, digits, '.', '_' or "
		    "'-', starting with a letter or digit");
		return -1;
	}
	if (env_load(ws, env, &e, &cause) != 0) {
		request_error(req, GBR_ERR_INVALID_ENV, json_pack("{s:s, s:s, s:s}",
		    "field", "env", "env", env != NULL ? env : "default",
		    "error", cause), "%s", cause);
		free(cause);
		return -1;
	}
	*system = xstrdup(env_system_prompt(e));
	env_unref(e);
	return 0;
}

/* The session is created: load its environment and watch it, then answer. */
static void
method_session_created(void *arg, int error, json_t *result)
{
	struct session	*s;
	char		*cause;

	if (error == 0 && (s = session_find(json_string_value(
	    json_object_get(result, "id")))) != NULL &&
	    session_env_and_sandbox(s, NULL, NULL, &cause) != 0) {
		log_warn("session %s: %s", session_id(s), cause);
		free(cause);
	}
	method_session_done(arg, error, result);
}

/* session.create {workspace, env?, name?, request_id?, reuse?} */
void
method_session_create(struct request *req, json_t *params)
{
	static const char *const keys[] = { "workspace", "env", "name",
	    "request_id", "reuse", NULL };
	struct gbr_error	 err;
	const char		*ws = NULL, *env = NULL, *name = NULL, *rid = NULL;
	char			 path[PATH_MAX], *system = NULL;
	long			 uid;
	int			 reuse = 0;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "workspace", 1, &ws) != 0 ||
	    params_string(req, params, "env", 0, &env) != 0 ||
	    params_string(req, params, "name", 0, &name) != 0 ||
	    params_string(req, params, "request_id", 0, &rid) != 0 ||
	    params_boolean(req, params, "reuse", 0, &reuse) != 0)
		return;
	if (name != NULL && !session_name_valid(name)) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "name"), "name: 1 to 64 letters, digits, '.', '_' "
		    "or '-', starting with a letter or digit, and not 12 hex "
		    "digits (those are ids)");
		return;
	}
	if (method_workspace(req, ws, path, &uid) != 0)
		return;
	if (method_env(req, path, env, &system) != 0)
		return;
	if (session_create(path, uid, env, system, name, rid, reuse,
	    method_session_created, req, &err) != 0)
		method_session_fail(req, &err);
	free(system);
}

/*
 * The model a session's next turn would ask, as the agent resolves it
 * (profile, then gbrd.conf, then the keys found): {provider, model,
 * base_url}, {"local": true} when a local Ollama is probed first, or
 * {"none": why}.
 */
static json_t *
method_session_llm(const char *id)
{
	const struct config	*cfg = config_get();
	struct llm_target	 t;
	struct session		*s;
	struct env		*env;
	struct sandbox		*sb;
	json_t			*o;
	char			*cause;

	if (id == NULL || (s = session_find(id)) == NULL)
		return json_null();
	if (session_env_and_sandbox(s, &env, &sb, &cause) != 0) {
		o = json_pack("{s:s}", "none", cause);
		free(cause);
		return o;
	}
	if (llm_wants_local(cfg, env))
		return json_pack("{s:b, s:s?}", "local", 1, "base_url",
		    llm_local_url(cfg));
	memset(&t, 0, sizeof t);
	if (llm_resolve(cfg, env, NULL, &t, &cause) != 0) {
		o = json_pack("{s:s}", "none", cause);
		free(cause);
		return o;
	}
	o = json_pack("{s:s, s:s, s:s}", "provider", t.provider->name, "model",
	    t.model, "base_url", t.base_url);
	llm_target_free(&t);
	return o;
}

/* session.list {workspace?} */
void
method_session_list(struct request *req, json_t *params)
{
	static const char *const keys[] = { "workspace", NULL };
	const char	*ws = NULL;
	char		 path[PATH_MAX];
	json_t		*list, *o;
	size_t		 i;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "workspace", 0, &ws) != 0)
		return;
	/* A folder that does not resolve has no sessions. */
	if (ws != NULL && (strlen(ws) >= PATH_MAX || realpath(ws, path) == NULL)) {
		request_reply(req, json_pack("{s:[]}", "sessions"));
		return;
	}
	list = session_list(ws != NULL ? path : NULL);
	json_array_foreach(list, i, o)
		json_object_set_new(o, "llm", method_session_llm(
		    json_string_value(json_object_get(o, "id"))));
	request_reply(req, json_pack("{s:o}", "sessions", list));
}

/* session.attach {session, after_seq?} */
void
method_session_attach(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "after_seq", NULL };
	struct gbr_error	 err;
	struct session		*s;
	json_int_t		 after = -1;

	if (params_only(req, params, keys) != 0 ||
	    params_integer(req, params, "after_seq", 0, 0, INT64_MAX, &after) != 0 ||
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	if (session_attach(s, request_conn(req), after >= 0, (uint64_t)(after >= 0 ?
	    after : 0), method_session_done, req, &err) != 0)
		method_session_fail(req, &err);
}

/* session.detach {session?}: without a session, from every session. */
void
method_session_detach(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	struct session	*s = NULL;
	unsigned	 n;

	if (params_only(req, params, keys) != 0)
		return;
	if (params != NULL && json_object_get(params, "session") != NULL &&
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	n = session_detach(s, request_conn(req));
	request_reply(req, json_pack("{s:I}", "detached", (json_int_t)n));
}

/* session.send {session, text, request_id?} */
void
method_session_send(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "text", "request_id", NULL };
	struct gbr_error	 err;
	struct session		*s;
	const char		*text = NULL, *rid = NULL;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "text", 1, &text) != 0 ||
	    params_string(req, params, "request_id", 0, &rid) != 0 ||
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	if (session_send(s, text, rid, method_session_done, req, &err) != 0)
		method_session_fail(req, &err);
}

/* session.cancel {session} */
void
method_session_cancel(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	struct gbr_error	 err;
	struct session		*s;

	if (params_only(req, params, keys) != 0 ||
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	if (session_cancel(s, method_session_done, req, &err) != 0)
		method_session_fail(req, &err);
}

/* session.close {session} */
void
method_session_close(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	struct gbr_error	 err;
	struct session		*s;
	char			 sid[65];

	if (params_only(req, params, keys) != 0 ||
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	snprintf(sid, sizeof sid, "%s", session_id(s));
	if (session_close(s, method_session_done, req, &err) != 0)
		method_session_fail(req, &err);
	else {
		approval_sweep();	/* its approvals are withdrawn */
		/* Its commands stop, before their temp space goes. */
		if (toolcall_cancel_session(sid) > 0)
			log_info("session %s: its calls in flight are "
			    "cancelled", sid);
		mcp_session_end(sid);	/* its MCP servers stop */
		tool_run_session_end(sid);
	}
}

/* A session.history that waits for the records before it. */
struct history_req {
	struct request	*req;
	char		*sid;
	size_t		 limit;
	uint64_t	 before;
};

/* The records a history request waited for are announced: answer. */
static void
method_session_history_ready(void *arg, int error, json_t *result)
{
	struct history_req	*h = arg;
	struct session		*s;
	char			*r;
	size_t			 len;

	if ((s = session_find(h->sid)) == NULL)
		request_error(h->req, GBR_ERR_SESSION_NOT_FOUND, json_pack(
		    "{s:s}", "session", h->sid), "session %s is closed",
		    h->sid);
	else if ((r = session_history_text(s, h->limit, h->before,
	    &len)) == NULL)
		request_error(h->req, GBR_ERR_STORAGE, NULL, "the history of "
		    "session %s cannot be read from the disk log", h->sid);
	else {
		request_reply_text(h->req, r, len);
		free(r);
	}
	free(h->sid);
	free(h);
}

/*
 * session.history {session, limit?, before_seq?}. A read-only tool call
 * answers before its records are written; the history a client asks for
 * next includes them, so it waits until every record appended before it
 * is announced (at most the disk log's next batch).
 */
void
method_session_history(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "limit", "before_seq", NULL };
	struct history_req	*h;
	struct session		*s;
	json_int_t		 limit = METHOD_HISTORY_DEFAULT, before = 0;

	if (params_only(req, params, keys) != 0 ||
	    params_integer(req, params, "limit", 0, 1, METHOD_HISTORY_MAX,
	    &limit) != 0 ||
	    params_integer(req, params, "before_seq", 0, 1, INT64_MAX,
	    &before) != 0 ||
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	h = xcalloc(1, sizeof *h);
	h->req = req;
	h->sid = xstrdup(session_id(s));
	h->limit = (size_t)limit;
	h->before = (uint64_t)before;
	if (session_when_announced(s, method_session_history_ready, h) == 0)
		method_session_history_ready(h, 0, NULL);
}

/*
 * A session.rewind in flight: its workspace part and its conversation
 * part each answer once their record is written (in seq order); the
 * reply goes once both did.
 */
struct method_rewind {
	struct request	*req;
	unsigned	 waiting;	/* records still to be written */
	int		 error;		/* the first errno of a write */
	json_t		*reply;
};

/* One part of a session.rewind is written (or not): reply after the last. */
static void
method_rewind_part(struct method_rewind *mr, int error)
{
	if (error != 0 && mr->error == 0)
		mr->error = error;
	if (--mr->waiting > 0)
		return;
	if (mr->error != 0)
		method_session_done(mr->req, mr->error, NULL);
	else
		request_reply(mr->req, json_incref(mr->reply));
	json_decref(mr->reply);
	free(mr);
}

/* The workspace.rewound record is written. */
static void
method_session_rewound(void *arg, int error, json_t *p)
{
	struct method_rewind	*mr = arg;
	json_int_t		 seq;

	if (error == 0) {
		seq = json_integer_value(json_object_get(p, "seq"));
		json_object_set_new(mr->reply, "seq", json_integer(seq));
		json_object_set(mr->reply, "changes", json_object_get(p,
		    "changes"));
		if (json_object_get(p, "failed") != NULL)
			json_object_set(mr->reply, "failed", json_object_get(p,
			    "failed"));
		json_object_set_new(mr->reply, "undo_to_seq",
		    json_integer(seq - 1));
	}
	method_rewind_part(mr, error);
}

/* The conversation.rewound record is written. */
static void
method_session_conv_rewound(void *arg, int error, json_t *p)
{
	struct method_rewind	*mr = arg;

	if (error == 0) {
		json_object_set(mr->reply, "conversation", p);
		if (json_object_get(mr->reply, "seq") == NULL)
			json_object_set(mr->reply, "seq", json_object_get(p,
			    "seq"));
	}
	method_rewind_part(mr, error);
}

/*
 * The conversation part of session.rewind: 0 with *plan (new) what it
 * would drop, or NULL when nothing would be; -1 (answered) when it is
 * refused (busy, a full history, the history unreadable).
 */
static int
method_rewind_plan(struct request *req, struct session *s,
    const struct rewind_req *rq, json_t **plan)
{
	struct gbr_error	 err;

	*plan = NULL;
	if (session_conversation_plan(s, rq->turn, rq->seq, plan, &err) == 0)
		return 0;
	if (err.kind == GBR_ERR_NOT_FOUND) {
		gbr_error_clear(&err);
		return 0;
	}
	method_session_fail(req, &err);
	return -1;
}

/*
 * The workspace had nothing to undo (err) and the conversation has plan:
 * true if the conversation goes on alone. A turn whose start a disk log
 * snapshot did not drop has no change rewind could have lost, so "gone"
 * for it means nothing to undo as well.
 */
static int
method_rewind_alone(const struct rewind_req *rq, json_t *plan,
    struct gbr_error *err)
{
	if (plan == NULL)
		return 0;
	if (err->kind == GBR_ERR_NOT_FOUND)
		return 1;
	return err->kind == GBR_ERR_GONE && rq->turn != 0 &&
	    json_integer_value(json_object_get(plan, "to_seq")) >=
	    json_integer_value(json_object_get(err->data, "floor"));
}

/*
 * session.rewind {session, turn | seq, dry_run?, force?, conversation?}:
 * undoes what the agent changed in the workspace from a turn on, or after
 * a seq (rewind.h), then with conversation drops the later messages from
 * what the model sees (session_conversation_rewind).
 */
void
method_session_rewind(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "turn", "seq",
	    "dry_run", "force", "conversation", NULL };
	struct method_rewind	*mr;
	struct rewind_req	 rq;
	struct gbr_error	 err;
	struct session		*s;
	json_int_t		 turn = 0, seq = -1;
	int			 dry = 0, force = 0, conv = 0, r;
	json_t			*result, *plan = NULL;

	if (params_only(req, params, keys) != 0 ||
	    params_integer(req, params, "turn", 0, 1, INT64_MAX, &turn) != 0 ||
	    params_integer(req, params, "seq", 0, 0, INT64_MAX, &seq) != 0 ||
	    params_boolean(req, params, "dry_run", 0, &dry) != 0 ||
	    params_boolean(req, params, "force", 0, &force) != 0 ||
	    params_boolean(req, params, "conversation", 0, &conv) != 0)
		return;
	if ((turn == 0) == (seq == -1)) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "turn"), "exactly one of turn and seq is needed");
		return;
	}
	if ((s = method_session_lookup(req, params, 1)) == NULL)
		return;
	memset(&rq, 0, sizeof rq);
	rq.turn = (uint64_t)turn;
	rq.seq = seq < 0 ? 0 : (uint64_t)seq;
	rq.dry_run = dry;
	rq.force = force;
	if (conv && method_rewind_plan(req, s, &rq, &plan) != 0)
		return;
	rq.who = request_who(req);
	mr = xcalloc(1, sizeof *mr);
	mr->req = req;
	mr->reply = json_object();
	mr->waiting = 1;
	r = rewind_run(s, &rq, &result, method_session_rewound, mr, &err);
	if (r != 0 && !(conv && method_rewind_alone(&rq, plan, &err))) {
		if (conv && plan == NULL && err.kind == GBR_ERR_NOT_FOUND) {
			gbr_error_clear(&err);
			gbr_error_set(&err, GBR_ERR_NOT_FOUND, NULL, "neither "
			    "the workspace nor the conversation has anything "
			    "after that point: nothing to undo");
		}
		method_session_fail(req, &err);
		goto out;
	}
	if (r != 0) {
		/* The conversation alone. */
		gbr_error_clear(&err);
		json_object_set_new(mr->reply, "changes", json_array());
		if (dry)
			result = json_pack("{s:b, s:[], s:[]}", "dry_run", 1,
			    "changes", "conflicts");
		mr->waiting = 0;
	}
	if (dry) {
		if (conv)
			json_object_set(result, "conversation", plan != NULL ?
			    plan : json_null());
		request_reply(req, result);
		goto out;
	}
	if (plan != NULL) {
		/*
		 * At once after the workspace's record, before any other
		 * request can start a turn whose messages it would cut.
		 */
		mr->waiting++;
		if (session_conversation_rewind(s, plan, rq.who,
		    method_session_conv_rewound, mr, &err) != 0) {
			mr->waiting--;
			if (mr->waiting == 0) {
				method_session_fail(req, &err);
				goto out;
			}
			/* The files are rewound: say what of it is not. */
			log_warn("session %s: the conversation was not rewound: "
			    "%s", session_id(s), err.message);
			json_object_set_new(mr->reply, "conversation_error",
			    json_string(err.message));
			gbr_error_clear(&err);
		}
	} else if (conv)
		json_object_set_new(mr->reply, "conversation", json_null());
	json_decref(plan);
	json_decref(rq.who);
	return;
out:
	json_decref(mr->reply);
	free(mr);
	json_decref(plan);
	json_decref(rq.who);
}

/* session.changes {session}: what rewind knows the agent changed. */
void
method_session_changes(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	struct session		*s;

	if (params_only(req, params, keys) != 0 ||
	    (s = method_session_lookup(req, params, 1)) == NULL)
		return;
	request_reply(req, rewind_list(s));
}
