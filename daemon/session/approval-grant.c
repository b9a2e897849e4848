/*
 * Session grants: what an approval decided with scope "session" leaves
 * behind, so later calls of the same session, tool, and path or command
 * pass without asking. This file owns the grants in memory (at most
 * APPROVAL_GRANTS_MAX), finding one for a call, approval.grants and
 * approval.revoke. It does not own how a grant is born or dies on disk:
 * a grant is made by an approval.resolved record and removed by an
 * approval.revoke record, both appended and applied by approval-log.c,
 * which calls ap_grant_add and ap_grant_remove. Grants of a closed
 * session are forgotten in memory only (nothing to replay: a closed
 * session takes no calls).
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval-int.h"
#include "log.h"
#include "osdep.h"
#include "session.h"
#include "xmalloc.h"

struct grant {
	TAILQ_ENTRY(grant)	 entry;
	char			 id[APPROVAL_ID_LEN + 1];
	char			*session;
	char			*tool;
	char			*path;		/* or NULL */
	char			*command;	/* or NULL */
	char			*approval;	/* the approval that made it */
	int64_t			 created_ms;
};
TAILQ_HEAD(grant_list, grant);

static struct grant_list	 ap_grants = TAILQ_HEAD_INITIALIZER(ap_grants);
static unsigned			 ap_ngrants;

/* Finds a grant by id. */
static struct grant *
ap_grant_get(const char *id)
{
	struct grant	*g;

	TAILQ_FOREACH(g, &ap_grants, entry)
		if (strcmp(g->id, id) == 0)
			return g;
	return NULL;
}

/* Frees a grant (off the list). */
static void
ap_grant_free(struct grant *g)
{
	free(g->session);
	free(g->tool);
	free(g->path);
	free(g->command);
	free(g->approval);
	free(g);
}

/* How many grants there are. */
unsigned
ap_grant_count(void)
{
	return ap_ngrants;
}

/* A new grant for a decision with scope "session" (see approval-int.h). */
json_t *
ap_grant_new(const struct approval *a)
{
	json_t	*g;
	char	 gid[APPROVAL_ID_LEN + 1];

	do
		ap_new_id(gid, 'g');
	while (ap_grant_get(gid) != NULL);
	g = json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", gid, "session",
	    a->session, "tool", a->tool, "approval", a->id, "created_ms",
	    (json_int_t)osdep_now_ms());
	if (a->path != NULL)
		json_object_set_new(g, "path", json_string(a->path));
	if (a->command != NULL)
		json_object_set_new(g, "command", json_string(a->command));
	return g;
}

/* Adds a grant from its JSON. */
int
ap_grant_add(json_t *g)
{
	struct grant	*gr;
	const char	*id = ap_str(g, "id");

	if (id == NULL || strlen(id) != APPROVAL_ID_LEN ||
	    ap_str(g, "session") == NULL || ap_str(g, "tool") == NULL ||
	    ap_grant_get(id) != NULL)
		return -1;
	gr = xcalloc(1, sizeof *gr);
	snprintf(gr->id, sizeof gr->id, "%s", id);
	gr->session = xstrdup(ap_str(g, "session"));
	gr->tool = xstrdup(ap_str(g, "tool"));
	gr->path = ap_strdup(ap_str(g, "path"));
	gr->command = ap_strdup(ap_str(g, "command"));
	gr->approval = ap_strdup(ap_str(g, "approval"));
	gr->created_ms = ap_int(g, "created_ms");
	TAILQ_INSERT_TAIL(&ap_grants, gr, entry);
	ap_ngrants++;
	return 0;
}

/* Removes a grant by id (approval.revoke). */
int
ap_grant_remove(const char *id)
{
	struct grant	*g;

	if ((g = ap_grant_get(id != NULL ? id : "")) == NULL)
		return -1;
	TAILQ_REMOVE(&ap_grants, g, entry);
	ap_ngrants--;
	ap_grant_free(g);
	return 0;
}

/* Grants die with their session (memory only: nothing to replay). */
void
ap_grant_forget_closed(void)
{
	struct grant	*g, *gnext;

	for (g = TAILQ_FIRST(&ap_grants); g != NULL; g = gnext) {
		gnext = TAILQ_NEXT(g, entry);
		if (session_find(g->session) == NULL) {
			TAILQ_REMOVE(&ap_grants, g, entry);
			ap_ngrants--;
			ap_grant_free(g);
		}
	}
}

/* The grants as the snapshot keeps them. */
json_t *
ap_grant_snapshot(void)
{
	struct grant	*g;
	json_t		*garr = json_array();

	TAILQ_FOREACH(g, &ap_grants, entry)
		json_array_append_new(garr, json_pack("{s:s, s:s, s:s, s:s?, "
		    "s:s?, s:s?, s:I}", "id", g->id, "session", g->session,
		    "tool", g->tool, "path", g->path, "command", g->command,
		    "approval", g->approval, "created_ms",
		    (json_int_t)g->created_ms));
	return garr;
}

/* Frees every grant. */
void
ap_grant_clear(void)
{
	struct grant	*g;

	while ((g = TAILQ_FIRST(&ap_grants)) != NULL) {
		TAILQ_REMOVE(&ap_grants, g, entry);
		ap_grant_free(g);
	}
	ap_ngrants = 0;
}

/* A grant that lets a call through, or NULL. */
const char *
approval_grant_find(const char *session, const char *tool, const char *path,
    const char *command)
{
	struct grant	*g;

	TAILQ_FOREACH(g, &ap_grants, entry)
		if (strcmp(g->session, session) == 0 &&
		    strcmp(g->tool, tool) == 0 && ap_streq(g->path, path) &&
		    ap_streq(g->command, command))
			return g->id;
	return NULL;
}

/* approval.grants (see approval.h). */
json_t *
approval_grants(const char *session)
{
	struct grant	*g;
	json_t		*arr = json_array();

	ap_sweep_closed();
	TAILQ_FOREACH(g, &ap_grants, entry) {
		if (session != NULL && strcmp(g->session, session) != 0)
			continue;
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:o, "
		    "s:I, s:s?}", "id", g->id, "session", g->session, "tool",
		    g->tool, "path", g->path != NULL ? json_string(g->path) :
		    json_null(), "command", g->command != NULL ?
		    json_string(g->command) : json_null(), "created_ms",
		    (json_int_t)g->created_ms, "approval", g->approval));
	}
	return arr;
}

/* The revoke record is durable: answer. */
static void
ap_revoked_written(struct ap_wait *w, int error)
{
	w->cb(w->arg, error, w->reply);
}

/* Revokes a grant (see approval.h). */
int
approval_revoke(const char *grant_id, json_t *who, approval_done_cb cb,
    void *arg, struct gbr_error *err)
{
	struct ap_wait	*w;
	json_t		*p;

	if (ap_grant_get(grant_id) == NULL)
		return gbr_error_set(err, GBR_ERR_NOT_FOUND, json_pack("{s:s%}",
		    "grant", grant_id, strlen(grant_id) > 64 ? (size_t)64 :
		    strlen(grant_id)), "no grant has the id '%.64s'", grant_id);
	if (ap_broken)
		return gbr_error_set(err, GBR_ERR_STORAGE, NULL, "approvals cannot "
		    "change: the disk log failed; restart gbrd");
	w = ap_wait_new(ap_revoked_written, NULL, cb, arg);
	w->reply = json_pack("{s:b, s:s}", "revoked", 1, "id", grant_id);
	p = json_pack("{s:s}", "id", grant_id);
	if (who != NULL)
		json_object_set(p, "who", who);
	if (ap_record("approval.revoke", p, 1, w) != 0) {
		json_decref(p);
		return ap_fail_storage(err);
	}
	json_decref(p);
	log_info("grant %s revoked", grant_id);
	return 0;
}
