/*
 * Rewind (see rewind.h): the changes of every open session as the
 * workspace.changed and workspace.rewound events recorded them, the
 * bracketing of the tool calls that make them, and undoing them. The
 * bytes are the shadow store's (tools/shadow.c); every file is read and
 * written through the session's sandbox, so a rewind reaches nothing a
 * write_file could not.
 *
 * A command's two snapshots are the shadow store's worker's
 * (shadow_snapshot_start); a file tool's bracket (one file read and
 * stored) and a rewind stay on the loop, through the store's own handle
 * for the loop (shadow.h says why two): they are small, and routing them
 * through the worker would make a write_file wait behind a command's
 * first snapshot of a big workspace.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "log.h"
#include "loop.h"
#include "rewind.h"
#include "sandbox.h"
#include "session-env.h"
#include "shadow.h"
#include "shadow-gc.h"
#include "xmalloc.h"

#define RW_SID_MAX	64
#define RW_DIFF_MAX	(16 * 1024)	/* bytes of one file's diff in a dry run */

/* One recorded call (or rewind) and what it changed. */
struct rw_entry {
	TAILQ_ENTRY(rw_entry)	 entry;
	uint64_t		 seq;
	uint64_t		 turn;
	int64_t			 ts;		/* ms, when it was recorded */
	int			 rewind;	/* a workspace.rewound */
	char			*call_id;
	char			*tool;
	json_t			*changes;	/* [{path, before, after}] */
};
TAILQ_HEAD(rw_entries, rw_entry);

/* The changes of one session. */
struct rw_sess {
	TAILQ_ENTRY(rw_sess)	 entry;
	char			 sid[RW_SID_MAX + 1];
	uint64_t		 floor;		/* nothing known at or before */
	size_t			 n;
	struct rw_entries	 entries;	/* by seq */
};
static TAILQ_HEAD(, rw_sess) rw_sessions = TAILQ_HEAD_INITIALIZER(rw_sessions);

/* A tool call in flight (rewind_begin to rewind_end). */
struct rewind_call {
	TAILQ_ENTRY(rewind_call) entry;		/* in rw_inflight */
	int			 linked;
	char			 sid[RW_SID_MAX + 1];
	char			*tool;
	struct shadow		*sh;
	int			 command;	/* snapshots, else one file */
	int			 failed;	/* command: no "before" */
	char			 tree[SHADOW_OID_LEN + 1];	/* command: before */
	char			*path;		/* file: as the agent typed it */
	size_t			 pathlen;
	char			 before[SHADOW_OID_LEN + 1];	/* file: "" if none */
	/* A snapshot being taken, and whom to tell. */
	struct shadow_job	*job;
	rewind_cb		 cb;
	void			*arg;
	char			*call_id;	/* rewind_end's */
	uint64_t		 turn;
};

/* The calls between rewind_begin and rewind_end: the GC keeps theirs. */
static TAILQ_HEAD(, rewind_call) rw_inflight =
    TAILQ_HEAD_INITIALIZER(rw_inflight);

/* The session's changes, created if asked. */
static struct rw_sess *
rw_sess(const char *sid, int create)
{
	struct rw_sess	*rs;

	TAILQ_FOREACH(rs, &rw_sessions, entry)
		if (strcmp(rs->sid, sid) == 0)
			return rs;
	if (!create)
		return NULL;
	rs = xcalloc(1, sizeof *rs);
	snprintf(rs->sid, sizeof rs->sid, "%s", sid);
	TAILQ_INIT(&rs->entries);
	TAILQ_INSERT_TAIL(&rw_sessions, rs, entry);
	return rs;
}

static void
rw_entry_free(struct rw_entry *e)
{
	free(e->call_id);
	free(e->tool);
	json_decref(e->changes);
	free(e);
}

/* Forgets a session's changes. */
void
rewind_forget(const char *sid)
{
	struct rw_sess	*rs;
	struct rw_entry	*e;

	if ((rs = rw_sess(sid, 0)) == NULL)
		return;
	while ((e = TAILQ_FIRST(&rs->entries)) != NULL) {
		TAILQ_REMOVE(&rs->entries, e, entry);
		rw_entry_free(e);
	}
	TAILQ_REMOVE(&rw_sessions, rs, entry);
	free(rs);
	rewind_gc_kick();	/* what it remembered may be collected */
}

/* A restored session: what its snapshot covers is not replayed. */
void
rewind_floor(const char *sid, uint64_t seq)
{
	struct rw_sess	*rs = rw_sess(sid, 1);

	if (seq > rs->floor)
		rs->floor = seq;
}

/* An event record of a session, live or replayed. */
void
rewind_note(const char *sid, uint64_t seq, json_t *p)
{
	const char	*type = json_string_value(json_object_get(p, "type"));
	struct rw_sess	*rs;
	struct rw_entry	*e;
	json_t		*ch = json_object_get(p, "changes");

	if (type == NULL || !json_is_array(ch) ||
	    (strcmp(type, "workspace.changed") != 0 &&
	    strcmp(type, "workspace.rewound") != 0))
		return;
	rs = rw_sess(sid, 1);
	e = xcalloc(1, sizeof *e);
	e->seq = seq;
	e->turn = (uint64_t)json_integer_value(json_object_get(p, "turn"));
	e->ts = json_integer_value(json_object_get(p, "ts"));
	e->rewind = strcmp(type, "workspace.rewound") == 0;
	e->call_id = xstrdup(json_string_value(json_object_get(p,
	    "call_id")) != NULL ? json_string_value(json_object_get(p,
	    "call_id")) : "");
	e->tool = xstrdup(json_string_value(json_object_get(p, "tool")) !=
	    NULL ? json_string_value(json_object_get(p, "tool")) : "rewind");
	e->changes = json_incref(ch);
	TAILQ_INSERT_TAIL(&rs->entries, e, entry);
	if (++rs->n > REWIND_ENTRIES_MAX) {
		e = TAILQ_FIRST(&rs->entries);
		TAILQ_REMOVE(&rs->entries, e, entry);
		rs->floor = e->seq;
		rs->n--;
		rw_entry_free(e);
	}
	rewind_gc_kick();
}

/* The shadow store of a sandbox's workspace, or NULL (logged). */
static struct shadow *
rw_shadow(struct sandbox *sb)
{
	struct shadow	*sh;
	char		*cause;

	if ((sh = shadow_open(loop_state_dir(), sandbox_root_path(sb, 0),
	    &cause)) == NULL) {
		log_warn("rewind: %s", cause);
		free(cause);
	}
	return sh;
}

/*
 * The id of a workspace file now (stored when store is set): 0 with *oid
 * ("" for no file), or -1 if it cannot be read (*why). *rel (may be NULL)
 * gets its canonical path when it exists.
 */
static int
rw_file(struct shadow *sh, struct sandbox *sb, const char *path, size_t len,
    int store, char oid[SHADOW_OID_LEN + 1], char **rel, char **why)
{
	struct sandbox_loc	 loc;
	enum gbr_err		 kind;
	char			*data, *reason;
	size_t			 dlen;

	*why = NULL;
	if (rel != NULL)
		*rel = NULL;
	if (sandbox_read_file(sb, path, len, 0, &data, &dlen, NULL, &loc,
	    &kind, &reason) != 0) {
		if (kind == GBR_ERR_NOT_FOUND) {
			free(reason);
			oid[0] = '\0';
			return 0;
		}
		*why = reason;
		return -1;
	}
	if (store) {
		if (shadow_put(sh, data, dlen, oid, why) != 0) {
			free(data);
			sandbox_loc_release(&loc);
			return -1;
		}
	} else
		shadow_hash(data, dlen, oid);
	free(data);
	if (rel != NULL)
		*rel = loc.rel;
	else
		sandbox_loc_release(&loc);
	return 0;
}

/* The loop a command's snapshots report back on. */
void
rewind_init(struct event_base *base)
{
	shadow_work_init(base);
}

/* Shutdown: after every call was freed (no snapshot is waited for). */
void
rewind_shutdown(void)
{
	shadow_shutdown();
}

/* A command's "before" snapshot is taken: the command may start. */
static void
rw_before_done(void *arg, const struct shadow_result *r)
{
	struct rewind_call	*rc = arg;

	rc->job = NULL;
	if (!r->ok) {
		/* Best effort: the command runs, unrecorded. */
		log_warn("rewind: %s", r->cause);
		rc->failed = 1;
	} else
		memcpy(rc->tree, r->tree, sizeof rc->tree);
	rc->cb(rc->arg);	/* may free rc */
}

/* A call in flight: what it stored stays until it ends. */
static void
rw_inflight_add(struct rewind_call *rc)
{
	TAILQ_INSERT_TAIL(&rw_inflight, rc, entry);
	rc->linked = 1;
}

/* Before a tool runs. */
int
rewind_begin(const char *sid, struct sandbox *sb, const char *tool,
    json_t *args, struct rewind_call **rcp, rewind_cb cb, void *arg)
{
	struct rewind_call	*rc;
	struct shadow		*sh;
	json_t			*p;
	char			*why;
	int			 command;

	*rcp = NULL;
	if (strcmp(tool, "write_file") == 0 || strcmp(tool, "edit_file") == 0)
		command = 0;
	else if (strcmp(tool, "run_command") == 0 ||
	    strcmp(tool, "run_script") == 0 || strcmp(tool, "check") == 0)
		command = 1;
	else
		return REWIND_READY;
	if (!shadow_available() || (sh = rw_shadow(sb)) == NULL)
		return REWIND_READY;
	rc = xcalloc(1, sizeof *rc);
	snprintf(rc->sid, sizeof rc->sid, "%s", sid);
	rc->tool = xstrdup(tool);
	rc->sh = sh;
	rc->command = command;
	if (command) {
		rc->cb = cb;
		rc->arg = arg;
		if ((rc->job = shadow_snapshot_start(sh, NULL, 0,
		    rw_before_done, rc, &why)) == NULL) {
			log_warn("rewind: %s", why);
			free(why);
			rewind_call_free(rc);
			return REWIND_READY;
		}
		rw_inflight_add(rc);
		*rcp = rc;
		return REWIND_WAIT;
	}
	p = json_object_get(args, "path");
	if (!json_is_string(p)) {
		rewind_call_free(rc);
		return REWIND_READY;
	}
	rc->pathlen = json_string_length(p);
	rc->path = xmalloc(rc->pathlen + 1);
	memcpy(rc->path, json_string_value(p), rc->pathlen + 1);
	if (rw_file(sh, sb, rc->path, rc->pathlen, 1, rc->before, NULL,
	    &why) != 0) {
		/* Too large, protected from reading, ...: not rewindable. */
		log_info("rewind: %s is not kept: %s", tool, why);
		free(why);
		rewind_call_free(rc);
		return REWIND_READY;
	}
	rw_inflight_add(rc);
	*rcp = rc;
	return REWIND_READY;
}

void
rewind_call_free(struct rewind_call *rc)
{
	if (rc == NULL)
		return;
	shadow_job_cancel(rc->job);
	if (rc->linked)
		TAILQ_REMOVE(&rw_inflight, rc, entry);
	free(rc->tool);
	free(rc->path);
	free(rc->call_id);
	free(rc);
}

/* What a file tool changed, as [{path, before, after}], or NULL. */
static json_t *
rw_file_changes(struct rewind_call *rc, struct sandbox *sb)
{
	char	 after[SHADOW_OID_LEN + 1];
	char	*why, *rel;
	json_t	*a;

	if (rw_file(rc->sh, sb, rc->path, rc->pathlen, 1, after, &rel,
	    &why) != 0) {
		log_warn("rewind: %s", why);
		free(why);
		return NULL;
	}
	if (strcmp(after, rc->before) == 0 || rel == NULL) {
		free(rel);
		return NULL;
	}
	a = json_pack("[{s:s, s:s, s:s}]", "path", rel, "before", rc->before,
	    "after", after);
	free(rel);
	return a;
}

/*
 * Records a call's changes (ch: a new reference, or NULL) as a
 * workspace.changed event of s, if there are any.
 */
static void
rw_record(struct rewind_call *rc, struct session *s, const char *call_id,
    uint64_t turn, json_t *ch, size_t skipped)
{
	struct gbr_error	 err;
	json_t			*f;

	if (ch == NULL || json_array_size(ch) == 0) {
		json_decref(ch);
		return;
	}
	f = json_pack("{s:s, s:s, s:I, s:o}", "call_id", call_id, "tool",
	    rc->tool, "turn", (json_int_t)turn, "changes", ch);
	if (skipped > 0)
		json_object_set_new(f, "not_kept",
		    json_integer((json_int_t)skipped));
	if (session_event(s, "workspace.changed", f, NULL, NULL, &err) != 0) {
		log_warn("session %s: workspace.changed not recorded: %s",
		    session_id(s), err.message);
		gbr_error_clear(&err);
	}
}

/* A command's "after" snapshot and diff are taken: record them. */
static void
rw_after_done(void *arg, const struct shadow_result *r)
{
	struct rewind_call	*rc = arg;
	struct session		*s;

	rc->job = NULL;
	if (!r->ok)
		log_warn("rewind: %s", r->cause);
	else if ((s = session_find(rc->sid)) != NULL)
		rw_record(rc, s, rc->call_id, rc->turn,
		    json_incref(r->changes), r->skipped);
	rc->cb(rc->arg);	/* may free rc */
}

/* After the tool ran: record what it changed. */
int
rewind_end(struct rewind_call *rc, struct session *s, struct sandbox *sb,
    const char *call_id, uint64_t turn, rewind_cb cb, void *arg)
{
	char	*why;

	if (rc == NULL)
		return REWIND_READY;
	if (!rc->command) {
		rw_record(rc, s, call_id, turn, rw_file_changes(rc, sb), 0);
		return REWIND_READY;
	}
	if (rc->failed || rc->job != NULL)
		return REWIND_READY;	/* no "before" to compare with */
	free(rc->call_id);
	rc->call_id = xstrdup(call_id);
	rc->turn = turn;
	rc->cb = cb;
	rc->arg = arg;
	if ((rc->job = shadow_snapshot_start(rc->sh, rc->tree,
	    REWIND_FILES_MAX, rw_after_done, rc, &why)) == NULL) {
		log_warn("rewind: %s", why);
		free(why);
		return REWIND_READY;
	}
	return REWIND_WAIT;
}

/* The changes remembered for a session. */
json_t *
rewind_list(struct session *s)
{
	struct rw_sess	*rs = rw_sess(session_id(s), 0);
	struct rw_entry	*e;
	json_t		*a = json_array(), *files, *c;
	size_t		 i;

	if (rs != NULL) {
		TAILQ_FOREACH(e, &rs->entries, entry) {
			files = json_array();
			json_array_foreach(e->changes, i, c)
				json_array_append(files, json_object_get(c,
				    "path"));
			json_array_append_new(a, json_pack("{s:I, s:I, s:s, "
			    "s:s, s:b, s:o}", "seq", (json_int_t)e->seq, "turn",
			    (json_int_t)e->turn, "call_id", e->call_id, "tool",
			    e->tool, "rewind", e->rewind, "files", files));
		}
	}
	return json_pack("{s:I, s:o}", "floor", rs != NULL ?
	    (json_int_t)rs->floor : 0, "changes", a);
}

/* True if a rewind asked for undoes this entry. */
static int
rw_selected(const struct rewind_req *rq, const struct rw_entry *e)
{
	if (rq->turn != 0)
		return !e->rewind && e->turn >= rq->turn;
	return e->seq > rq->seq;
}

/*
 * The plan: an object path -> {target, expect} for every file the
 * selected entries touched: target is its content before the first of
 * them, expect what the last change of anyone recorded left there.
 */
static json_t *
rw_plan(struct rw_sess *rs, const struct rewind_req *rq)
{
	struct rw_entry	*e;
	json_t		*plan = json_object(), *c, *f;
	const char	*path;
	size_t		 i;

	TAILQ_FOREACH(e, &rs->entries, entry) {
		json_array_foreach(e->changes, i, c) {
			path = json_string_value(json_object_get(c, "path"));
			if (path == NULL)
				continue;
			f = json_object_get(plan, path);
			if (f == NULL && rw_selected(rq, e))
				json_object_set_new(plan, path, json_pack(
				    "{s:O, s:O, s:I}", "target", json_object_get(c,
				    "before"), "expect", json_object_get(c,
				    "after"), "seq", (json_int_t)e->seq));
			else if (f != NULL)
				json_object_set(f, "expect",
				    json_object_get(c, "after"));
		}
	}
	return plan;
}

/* A dry run's line for one file: {path, action, diff}. */
static json_t *
rw_preview(struct shadow *sh, struct sandbox *sb, const char *path,
    const char *target, const char *now)
{
	enum gbr_err	 kind;
	char		*cur = NULL, *old = NULL, *d, *why = NULL;
	size_t		 clen = 0, olen = 0;
	json_t		*o;

	o = json_pack("{s:s, s:s}", "path", path, "action", target[0] ==
	    '\0' ? "remove" : now[0] == '\0' ? "create" : "restore");
	if (now[0] != '\0' && sandbox_read_file(sb, path, strlen(path), 0,
	    &cur, &clen, NULL, NULL, &kind, &why) != 0) {
		free(why);
		why = NULL;
	}
	if (target[0] != '\0' && shadow_get(sh, target, &old, &olen,
	    &why) != 0) {
		json_object_set_new(o, "error", json_string(why));
		free(why);
	} else {
		d = diff_unified(path, cur != NULL ? cur : "", clen,
		    old != NULL ? old : "", olen, RW_DIFF_MAX, NULL);
		json_object_set_new(o, "diff", json_string(d));
		free(d);
	}
	free(cur);
	free(old);
	return o;
}

/* Puts one file back; 0, or -1 with *why. */
static int
rw_restore(struct shadow *sh, struct sandbox *sb, const char *path,
    const char *target, char **why)
{
	enum gbr_err	 kind;
	char		*data;
	size_t		 len;
	int		 r;

	if (target[0] == '\0')
		return sandbox_remove_file(sb, path, strlen(path), NULL, &kind,
		    why);
	if (shadow_get(sh, target, &data, &len, why) != 0)
		return -1;
	r = sandbox_write_file(sb, path, strlen(path), data, len, NULL, NULL,
	    NULL, &kind, why);
	free(data);
	return r;
}

/*
 * Fails with gone, naming them, if the content some files would get back
 * is no longer in the store (collected after its change was forgotten,
 * or removed by hand).
 */
static int
rw_gone(struct shadow *sh, json_t *plan, struct gbr_error *err)
{
	json_t		*f, *missing = json_array();
	const char	*path, *target;
	json_int_t	 seq = 0;

	json_object_foreach(plan, path, f) {
		target = json_string_value(json_object_get(f, "target"));
		if (target == NULL || target[0] == '\0' ||
		    shadow_has(sh, target))
			continue;
		json_array_append_new(missing, json_pack("{s:s, s:O, s:s}",
		    "path", path, "seq", json_object_get(f, "seq"), "content",
		    target));
		if (seq == 0)
			seq = json_integer_value(json_object_get(f, "seq"));
	}
	if (json_array_size(missing) == 0) {
		json_decref(missing);
		return 0;
	}
	path = json_string_value(json_object_get(json_array_get(missing, 0),
	    "path"));
	gbr_error_set(err, GBR_ERR_GONE, json_pack("{s:o}", "missing",
	    missing), "what %s held before the change at seq %lld is no "
	    "longer in the shadow store%s (collected after gbrd forgot the "
	    "change for the disk budget, or removed from the store): it "
	    "can no longer be rewound; nothing was rewound", path,
	    (long long)seq, json_array_size(missing) > 1 ? ", nor that of "
	    "other files" : "");
	return -1;
}

/* Rewinds a session (see rewind.h). */
int
rewind_run(struct session *s, const struct rewind_req *rq, json_t **result,
    session_done_cb cb, void *arg, struct gbr_error *err)
{
	struct rw_sess	*rs = rw_sess(session_id(s), 0);
	struct sandbox	*sb;
	struct env	*env;
	struct shadow	*sh;
	json_t		*plan, *f, *conflicts, *todo, *done, *failed, *fields;
	const char	*path, *target, *expect;
	char		 now[SHADOW_OID_LEN + 1], *why;
	void		*it;
	size_t		 i;

	*result = NULL;
	if (!shadow_available())
		return gbr_error_set(err, GBR_ERR_UNAVAILABLE, NULL, "rewind "
		    "is not available in this build of gbrd (no libgit2)");
	if (rs != NULL && rq->turn == 0 && rq->seq < rs->floor)
		return gbr_error_set(err, GBR_ERR_GONE, json_pack("{s:I}",
		    "floor", (json_int_t)rs->floor), "the changes up to seq "
		    "%llu were dropped (with old disk log segments, or to "
		    "keep the shadow store within [log] max_bytes); the "
		    "workspace can be rewound to seq %llu at the earliest",
		    (unsigned long long)rs->floor,
		    (unsigned long long)rs->floor);
	if (session_env_and_sandbox(s, &env, &sb, &why) != 0) {
		gbr_error_set(err, GBR_ERR_INVALID_ENV, NULL, "%s", why);
		free(why);
		return -1;
	}
	if ((sh = rw_shadow(sb)) == NULL)
		return gbr_error_set(err, GBR_ERR_UNAVAILABLE, NULL, "the "
		    "shadow store of this workspace cannot be opened (see "
		    "gbrd's log)");
	plan = rs != NULL ? rw_plan(rs, rq) : json_object();
	if (json_object_size(plan) == 0) {
		json_decref(plan);
		if (rs != NULL && rs->floor > 0 && rq->turn != 0)
			return gbr_error_set(err, GBR_ERR_GONE, json_pack(
			    "{s:I}", "floor", (json_int_t)rs->floor), "no "
			    "change of turn %llu or later is known: the "
			    "changes up to seq %llu were dropped (with old "
			    "disk log segments, or to keep the shadow store "
			    "within [log] max_bytes)", (unsigned long long)rq->turn,
			    (unsigned long long)rs->floor);
		return gbr_error_set(err, GBR_ERR_NOT_FOUND, NULL, "the agent "
		    "changed no file after that point: nothing to undo");
	}
	if (rw_gone(sh, plan, err) != 0) {
		json_decref(plan);
		return -1;
	}
	conflicts = json_array();
	todo = json_array();
	json_object_foreach_safe(plan, it, path, f) {
		target = json_string_value(json_object_get(f, "target"));
		expect = json_string_value(json_object_get(f, "expect"));
		if (target == NULL || expect == NULL)
			continue;
		if (rw_file(sh, sb, path, strlen(path), 1, now, NULL,
		    &why) != 0) {
			json_array_append_new(conflicts, json_pack("{s:s, s:s}",
			    "path", path, "why", why));
			free(why);
			continue;
		}
		if (strcmp(now, expect) != 0)
			json_array_append_new(conflicts, json_pack("{s:s, s:s}",
			    "path", path, "why", "changed since the agent's "
			    "last change"));
		if (strcmp(now, target) != 0)
			json_array_append_new(todo, json_pack("{s:s, s:s, s:s}",
			    "path", path, "before", now, "after", target));
	}
	json_decref(plan);
	if (rq->dry_run) {
		done = json_array();
		json_array_foreach(todo, i, f)
			json_array_append_new(done, rw_preview(sh, sb,
			    json_string_value(json_object_get(f, "path")),
			    json_string_value(json_object_get(f, "after")),
			    json_string_value(json_object_get(f, "before"))));
		*result = json_pack("{s:b, s:o, s:o}", "dry_run", 1, "changes",
		    done, "conflicts", conflicts);
		json_decref(todo);
		return 0;
	}
	if (json_array_size(conflicts) > 0 && !rq->force) {
		json_decref(todo);
		return gbr_error_set(err, GBR_ERR_CONFLICT, json_pack("{s:o}",
		    "conflicts", conflicts), "%zu file%s changed since the "
		    "agent changed %s (the first: %s); nothing was rewound "
		    "(--force undoes it anyway)", json_array_size(conflicts),
		    json_array_size(conflicts) == 1 ? "" : "s",
		    json_array_size(conflicts) == 1 ? "it" : "them",
		    json_string_value(json_object_get(json_array_get(conflicts,
		    0), "path")));
	}
	if (json_array_size(todo) == 0) {
		json_decref(todo);
		json_decref(conflicts);
		return gbr_error_set(err, GBR_ERR_NOT_FOUND, NULL, "every file "
		    "is already as it was: nothing to undo");
	}
	done = json_array();
	failed = json_array();
	json_array_foreach(todo, i, f) {
		path = json_string_value(json_object_get(f, "path"));
		if (rw_restore(sh, sb, path, json_string_value(
		    json_object_get(f, "after")), &why) != 0) {
			json_array_append_new(failed, json_pack("{s:s, s:s}",
			    "path", path, "why", why != NULL ? why : "?"));
			free(why);
		} else
			json_array_append(done, f);
	}
	json_decref(todo);
	fields = json_pack("{s:I, s:o, s:b}", rq->turn != 0 ? "from_turn" :
	    "to_seq", (json_int_t)(rq->turn != 0 ? rq->turn : rq->seq),
	    "changes", done, "forced", rq->force && json_array_size(conflicts) >
	    0);
	if (rq->who != NULL)
		json_object_set(fields, "who", rq->who);
	if (json_array_size(failed) > 0)
		json_object_set_new(fields, "failed", failed);
	else
		json_decref(failed);
	json_decref(conflicts);
	log_info("session %s: rewound %zu file(s)", session_id(s),
	    json_array_size(done));
	return session_event(s, "workspace.rewound", fields, cb, arg, err);
}

/* The GC: keeps what every remembered change and call in flight needs. */
void
rewind_keep(struct shadow_gc *gc)
{
	struct rw_sess		*rs;
	struct rw_entry		*e;
	struct rewind_call	*rc;
	json_t			*c;
	size_t			 i;

	TAILQ_FOREACH(rs, &rw_sessions, entry) {
		TAILQ_FOREACH(e, &rs->entries, entry) {
			json_array_foreach(e->changes, i, c) {
				shadow_gc_keep(gc, json_string_value(
				    json_object_get(c, "before")));
				shadow_gc_keep(gc, json_string_value(
				    json_object_get(c, "after")));
			}
		}
	}
	TAILQ_FOREACH(rc, &rw_inflight, entry) {
		if (rc->command)
			shadow_gc_keep_tree(gc, rc->tree);
		else
			shadow_gc_keep(gc, rc->before);
	}
}

/* The session holding the oldest remembered change, or NULL. */
static struct rw_sess *
rw_oldest(void)
{
	struct rw_sess	*rs, *best = NULL;
	struct rw_entry	*e, *be = NULL;

	TAILQ_FOREACH(rs, &rw_sessions, entry) {
		if ((e = TAILQ_FIRST(&rs->entries)) == NULL)
			continue;
		if (be == NULL || e->ts < be->ts) {
			best = rs;
			be = e;
		}
	}
	return best;
}

/*
 * The disk budget: forgets the oldest changes (of all sessions, by the
 * time they were recorded) until what their contents take on disk, as
 * the finished run gc measured it, adds up to need. Each content is
 * counted once; one a newer change still holds is not freed, which the
 * next run's measure shows. Returns how many changes were forgotten.
 */
size_t
rewind_trim(uint64_t need, struct shadow_gc *gc)
{
	struct rw_sess	*rs;
	struct rw_entry	*e;
	json_t		*seen = json_object(), *c;
	const char	*side[2];
	uint64_t	 freed = 0;
	size_t		 n = 0, i, k;

	while (freed < need && (rs = rw_oldest()) != NULL) {
		e = TAILQ_FIRST(&rs->entries);
		json_array_foreach(e->changes, i, c) {
			side[0] = json_string_value(json_object_get(c,
			    "before"));
			side[1] = json_string_value(json_object_get(c, "after"));
			for (k = 0; k < 2; k++) {
				if (side[k] == NULL || side[k][0] == '\0' ||
				    json_object_get(seen, side[k]) != NULL)
					continue;
				json_object_set_new(seen, side[k], json_true());
				freed += shadow_gc_size(gc, side[k]);
			}
		}
		TAILQ_REMOVE(&rs->entries, e, entry);
		rs->n--;
		if (e->seq > rs->floor)
			rs->floor = e->seq;
		rw_entry_free(e);
		n++;
	}
	json_decref(seen);
	return n;
}

/*
 * A disk log snapshot's part for one session: its remembered changes,
 * newest kept first up to REWIND_SNAP_FILES files, oldest first, as
 * {floor, changes: [[seq, ts, turn, rewind, call_id, tool, [[path,
 * before, after], ...]], ...]}; NULL when nothing is remembered.
 */
json_t *
rewind_state(const char *sid)
{
	struct rw_sess	*rs = rw_sess(sid, 0);
	struct rw_entry	*e, *first = NULL;
	json_t		*a, *files, *c;
	uint64_t	 floor;
	size_t		 nfiles = 0, i;

	if (rs == NULL || (TAILQ_EMPTY(&rs->entries) && rs->floor == 0))
		return NULL;
	floor = rs->floor;
	TAILQ_FOREACH_REVERSE(e, &rs->entries, rw_entries, entry) {
		if (nfiles + json_array_size(e->changes) > REWIND_SNAP_FILES) {
			floor = e->seq;
			break;
		}
		nfiles += json_array_size(e->changes);
		first = e;
	}
	a = json_array();
	for (e = first; e != NULL; e = TAILQ_NEXT(e, entry)) {
		files = json_array();
		json_array_foreach(e->changes, i, c)
			json_array_append_new(files, json_pack("[O, O, O]",
			    json_object_get(c, "path"), json_object_get(c,
			    "before"), json_object_get(c, "after")));
		json_array_append_new(a, json_pack("[I, I, I, b, s, s, o]",
		    (json_int_t)e->seq, (json_int_t)e->ts, (json_int_t)e->turn,
		    e->rewind, e->call_id, e->tool, files));
	}
	return json_pack("{s:I, s:o}", "floor", (json_int_t)floor, "changes",
	    a);
}

/* One side of a change as a snapshot holds it: "" or an object id. */
static int
rw_side_ok(const json_t *v)
{
	size_t	len;

	if (!json_is_string(v))
		return 0;
	len = json_string_length(v);
	return len == 0 || (len == SHADOW_OID_LEN && strspn(
	    json_string_value(v), "0123456789abcdef") == SHADOW_OID_LEN);
}

/* One change of a snapshot as an entry, or NULL if malformed. */
static struct rw_entry *
rw_entry_restore(json_t *v, uint64_t after)
{
	struct rw_entry	*e;
	json_t		*files, *f, *ch;
	json_int_t	 seq, ts, turn;
	const char	*call_id, *tool;
	int		 rw;
	size_t		 i;

	if (json_unpack(v, "[I, I, I, b, s, s, o!]", &seq, &ts, &turn, &rw,
	    &call_id, &tool, &files) != 0 || seq < 1 ||
	    (uint64_t)seq <= after || turn < 0 || !json_is_array(files) ||
	    json_array_size(files) > REWIND_FILES_MAX)
		return NULL;
	ch = json_array();
	json_array_foreach(files, i, f) {
		if (!json_is_array(f) || json_array_size(f) != 3 ||
		    !json_is_string(json_array_get(f, 0)) ||
		    !rw_side_ok(json_array_get(f, 1)) ||
		    !rw_side_ok(json_array_get(f, 2))) {
			json_decref(ch);
			return NULL;
		}
		json_array_append_new(ch, json_pack("{s:O, s:O, s:O}", "path",
		    json_array_get(f, 0), "before", json_array_get(f, 1),
		    "after", json_array_get(f, 2)));
	}
	e = xcalloc(1, sizeof *e);
	e->seq = (uint64_t)seq;
	e->ts = ts;
	e->turn = (uint64_t)turn;
	e->rewind = rw;
	e->call_id = xstrdup(call_id);
	e->tool = xstrdup(tool);
	e->changes = ch;
	return e;
}

/*
 * A session restored from a snapshot (upto: the seq it covers) with its
 * part (rewind_state). A part that does not read leaves the floor at
 * upto, as for a snapshot without one. Returns 0, or -1 if malformed.
 */
int
rewind_restore(const char *sid, uint64_t upto, json_t *state)
{
	struct rw_sess		*rs;
	struct rw_entry		*e;
	struct rw_entries	 got = TAILQ_HEAD_INITIALIZER(got);
	json_t			*a, *v;
	json_int_t		 floor;
	uint64_t		 last;
	size_t			 i, n = 0;

	rewind_floor(sid, upto);
	if (json_unpack(state, "{s:I, s:o}", "floor", &floor, "changes",
	    &a) != 0 || floor < 0 || (uint64_t)floor > upto ||
	    !json_is_array(a) || json_array_size(a) > REWIND_ENTRIES_MAX)
		return -1;
	last = (uint64_t)floor;
	json_array_foreach(a, i, v) {
		if ((e = rw_entry_restore(v, last)) == NULL ||
		    e->seq > upto) {
			if (e != NULL)
				rw_entry_free(e);
			while ((e = TAILQ_FIRST(&got)) != NULL) {
				TAILQ_REMOVE(&got, e, entry);
				rw_entry_free(e);
			}
			return -1;
		}
		last = e->seq;
		TAILQ_INSERT_TAIL(&got, e, entry);
		n++;
	}
	rs = rw_sess(sid, 1);
	while ((e = TAILQ_FIRST(&rs->entries)) != NULL) {
		TAILQ_REMOVE(&rs->entries, e, entry);
		rw_entry_free(e);
	}
	TAILQ_CONCAT(&rs->entries, &got, entry);
	rs->n = n;
	rs->floor = (uint64_t)floor;
	return 0;
}
