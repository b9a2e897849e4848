/*
 * The approval methods: approval.list, approval.resolve, approval.grants
 * and approval.revoke. Checks the params and hands over to approval.c,
 * which owns the state; a decision is answered only once it is durable.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "conn.h"
#include "dispatch.h"
#include "methods.h"
#include "session.h"

/* Finds the session a filter names, or answers session_not_found. */
static int
method_approval_session(struct request *req, const char *key,
    const char **id)
{
	struct session	*s;

	*id = NULL;
	if (key == NULL)
		return 0;
	if ((s = session_find(key)) == NULL) {
		request_error(req, GBR_ERR_SESSION_NOT_FOUND, json_pack("{s:s%}",
		    "session", key, strlen(key) > 64 ? (size_t)64 : strlen(key)),
		    "no open session has the id or name '%.64s'", key);
		return -1;
	}
	*id = session_id(s);
	return 0;
}

/* Answers a request with an error from approval.c. */
static void
method_approval_fail(struct request *req, struct gbr_error *err)
{
	request_error(req, err->kind, err->data, "%s", err->message);
	free(err->message);
}

/* approval.list {session?, all?, id?} */
void
method_approval_list(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", "all", "id", NULL };
	const char	*key = NULL, *sid, *id = NULL;
	int		 all = 0, more;
	json_t		*list;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "session", 0, &key) != 0 ||
	    params_boolean(req, params, "all", 0, &all) != 0 ||
	    params_string(req, params, "id", 0, &id) != 0 ||
	    method_approval_session(req, key, &sid) != 0)
		return;
	list = approval_list(sid, all, id, &more);
	request_reply(req, json_pack("{s:o, s:b}", "approvals", list, "more",
	    more));
}

/* The decision is durable (or failed): the reply. */
static void
method_approval_decided(void *arg, int error, json_t *approval)
{
	struct request	*req = arg;
	json_t		*a;
	int		 dup;

	if (error != 0) {
		request_error(req, GBR_ERR_STORAGE, NULL, "the decision could "
		    "not be written to the disk log: %s", strerror(error));
		return;
	}
	a = json_deep_copy(approval);
	dup = json_is_true(json_object_get(a, "duplicate"));
	json_object_del(a, "duplicate");
	request_reply(req, json_pack("{s:o, s:b}", "approval", a, "duplicate",
	    dup));
}

/* approval.resolve {id, decision, content?, reason?, scope?, request_id?} */
void
method_approval_resolve(struct request *req, json_t *params)
{
	static const char *const keys[] = { "id", "decision", "content",
	    "reason", "scope", "request_id", NULL };
	struct gbr_error	 err;
	const char		*id = NULL, *d = NULL, *content = NULL;
	const char		*reason = NULL, *scope = NULL, *rid = NULL;
	enum approval_decision	 decision;
	size_t			 clen = 0;
	char			 by[96];
	json_t			*who;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "id", 1, &id) != 0 ||
	    params_string(req, params, "decision", 1, &d) != 0 ||
	    params_string(req, params, "reason", 0, &reason) != 0 ||
	    params_string(req, params, "scope", 0, &scope) != 0 ||
	    params_string(req, params, "request_id", 0, &rid) != 0)
		return;
	/* The content is a file: it may hold NUL bytes. */
	if (json_object_get(params, "content") != NULL) {
		if (!json_is_string(json_object_get(params, "content"))) {
			request_error(req, GBR_ERR_INVALID_PARAMS, json_pack(
			    "{s:s}", "field", "content"), "content: must be a "
			    "string");
			return;
		}
		content = json_string_value(json_object_get(params, "content"));
		clen = json_string_length(json_object_get(params, "content"));
	}
	if (strcmp(d, "approve") == 0)
		decision = APPROVAL_APPROVE;
	else if (strcmp(d, "deny") == 0)
		decision = APPROVAL_DENY;
	else if (strcmp(d, "edit") == 0)
		decision = APPROVAL_EDIT;
	else {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "decision"), "decision: approve, deny or edit");
		return;
	}
	/* Who decided: the client's name from hello and its pid. */
	snprintf(by, sizeof by, "%.64s pid %ld", *conn_client(request_conn(req))
	    != '\0' ? conn_client(request_conn(req)) : "a client",
	    (long)conn_pid(request_conn(req)));
	who = request_who(req);
	if (approval_resolve(id, decision, content, clen, reason, scope, rid,
	    by, who, method_approval_decided, req, &err) != 0)
		method_approval_fail(req, &err);
	json_decref(who);
}

/* approval.grants {session?} */
void
method_approval_grants(struct request *req, json_t *params)
{
	static const char *const keys[] = { "session", NULL };
	const char	*key = NULL, *sid;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "session", 0, &key) != 0 ||
	    method_approval_session(req, key, &sid) != 0)
		return;
	request_reply(req, json_pack("{s:o}", "grants", approval_grants(sid)));
}

/* The revoke record is durable: the reply. */
static void
method_approval_revoked(void *arg, int error, json_t *result)
{
	struct request	*req = arg;

	if (error != 0)
		request_error(req, GBR_ERR_STORAGE, NULL, "the revocation could "
		    "not be written to the disk log: %s", strerror(error));
	else
		request_reply(req, json_deep_copy(result));
}

/* approval.revoke {id} */
void
method_approval_revoke(struct request *req, json_t *params)
{
	static const char *const keys[] = { "id", NULL };
	struct gbr_error	 err;
	const char		*id = NULL;
	json_t			*who;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "id", 1, &id) != 0)
		return;
	who = request_who(req);
	if (approval_revoke(id, who, method_approval_revoked, req, &err) != 0)
		method_approval_fail(req, &err);
	json_decref(who);
}
