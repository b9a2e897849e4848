/*
 * Approvals in the disk log: every change of an approval or a grant is an
 * "approval.*" record, applied to memory by ap_apply the moment the log
 * takes it (the same function replays the log at start, so memory and log
 * cannot drift apart). This file owns the records (their layout, appending
 * them, applying them), what happens when the log fails one, and the
 * module's snapshot. It does not decide anything: approval.c chooses which
 * record to write and when, approval-grant.c keeps the grants the records
 * make and remove.
 *
 *   approval.requested   {id, session, call_id, tool, args, path, command,
 *                         diff, why, created_ms, expires_ms, request_id,
 *                         turn, pin}                               durable
 *   approval.resolved    {id, state: approved|edited|denied|expired|
 *                         withdrawn, decision, reason, scope, content,
 *                         request_id, ts, grant}                   durable
 *   approval.applying    {id}                                      durable
 *   approval.applied     {id, ok, result}                          durable
 *   approval.interrupted {id, note, expires_ms}                    durable
 *   approval.revoke      {id}  (a grant)                           durable
 *
 * A file tool's approval keeps its pin (toolcall.c writes and reads it:
 * the canonical path and the object the human was shown, sandbox.h), in
 * the record and in snapshots, so an approval decided after a restart is
 * held to the same object. It is not part of the protocol's object.
 *
 * Each record is followed by an event in the session's own stream (a
 * session.event record, later in the log, so a client that heard of a
 * change can count on the change being on disk). Replay notes which
 * changes reached the stream (the events' records, through
 * session_observe_events); approval_recover announces the ones that did
 * not.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval-int.h"
#include "disklog.h"
#include "log.h"
#include "osdep.h"
#include "session.h"
#include "xmalloc.h"

#define AP_SNAPSHOT_VERSION	1

int	ap_broken;	/* a record failed: no more changes */

/* Applies approval.requested. */
static int
ap_apply_requested(json_t *p)
{
	struct approval	*a;
	const char	*id = ap_str(p, "id"), *sid = ap_str(p, "session");
	const char	*call = ap_str(p, "call_id"), *tool = ap_str(p, "tool");
	json_t		*args = json_object_get(p, "args"), *v;
	int		 why;

	why = ap_parse(ap_whys, sizeof ap_whys / sizeof ap_whys[0],
	    ap_str(p, "why"));
	if (id == NULL || strlen(id) != APPROVAL_ID_LEN || sid == NULL ||
	    call == NULL || tool == NULL || !json_is_object(args) || why == -1 ||
	    approval_get(id) != NULL)
		return -1;
	a = xcalloc(1, sizeof *a);
	snprintf(a->id, sizeof a->id, "%s", id);
	a->session = xstrdup(sid);
	a->call_id = xstrdup(call);
	a->tool = xstrdup(tool);
	a->args = json_deep_copy(args);
	a->path = ap_strdup(ap_str(p, "path"));
	a->command = ap_strdup(ap_str(p, "command"));
	a->diff = ap_strdup(ap_str(p, "diff"));
	a->effect = ap_strdup(ap_str(p, "effect"));
	if ((v = json_object_get(p, "proposed")) != NULL && json_is_string(v)) {
		a->proposed_len = json_string_length(v);
		a->proposed = xmalloc(a->proposed_len + 1);
		memcpy(a->proposed, json_string_value(v), a->proposed_len + 1);
	}
	if ((v = json_object_get(p, "pin")) != NULL && json_is_object(v))
		a->pin = json_deep_copy(v);
	a->rid = ap_strdup(ap_str(p, "request_id"));
	a->turn = (uint64_t)ap_int(p, "turn");
	a->why = (enum approval_why)why;
	a->state = APPROVAL_PENDING;
	a->announced = -1;
	a->created_ms = ap_int(p, "created_ms");
	a->expires_ms = ap_int(p, "expires_ms");
	TAILQ_INSERT_TAIL(&ap_all, a, entry);
	ap_nlive++;
	return 0;
}

/* Applies approval.resolved: a decision, an expiry or a withdrawal. */
static int
ap_apply_resolved(json_t *p, int64_t ts)
{
	struct approval	*a = approval_get(ap_str(p, "id"));
	json_t		*g = json_object_get(p, "grant");
	const char	*content = ap_str(p, "content");
	int		 st, d = -1;

	st = ap_parse(ap_states, sizeof ap_states / sizeof ap_states[0],
	    ap_str(p, "state"));
	if (a == NULL || !ap_open(a->state) || (st != APPROVAL_APPROVED &&
	    st != APPROVAL_EDITED && st != APPROVAL_DENIED &&
	    st != APPROVAL_EXPIRED && st != APPROVAL_WITHDRAWN))
		return -1;
	if (ap_str(p, "decision") != NULL && (d = ap_parse(ap_decisions,
	    sizeof ap_decisions / sizeof ap_decisions[0],
	    ap_str(p, "decision"))) == -1)
		return -1;
	if (g != NULL && ap_grant_add(g) != 0)
		return -1;
	a->decided = d != -1;
	a->decision = d != -1 ? (enum approval_decision)d : APPROVAL_APPROVE;
	free(a->reason);
	a->reason = ap_strdup(ap_str(p, "reason"));
	a->scope_session = ap_streq(ap_str(p, "scope"), "session");
	free(a->content);
	a->content = NULL;
	a->content_len = 0;
	if (content != NULL) {
		a->content_len = json_string_length(json_object_get(p, "content"));
		a->content = xmalloc(a->content_len + 1);
		memcpy(a->content, content, a->content_len + 1);
	}
	free(a->resolve_rid);
	a->resolve_rid = ap_strdup(ap_str(p, "request_id"));
	if (ap_str(p, "by") != NULL) {
		free(a->by);
		a->by = ap_strdup(ap_str(p, "by"));
	}
	a->resolved_ms = ts;
	ap_set_state(a, (enum approval_state)st);
	return 0;
}

/* Applies one record to memory (live and at replay). */
static int
ap_apply(const char *type, json_t *p, int64_t ts)
{
	struct approval	*a;
	json_t		*v;

	if (strcmp(type, "approval.requested") == 0)
		return ap_apply_requested(p);
	if (strcmp(type, "approval.resolved") == 0)
		return ap_apply_resolved(p, ts);
	if (strcmp(type, "approval.revoke") == 0)
		return ap_grant_remove(ap_str(p, "id"));
	if ((a = approval_get(ap_str(p, "id"))) == NULL)
		return -1;
	if (strcmp(type, "approval.applying") == 0) {
		if (a->state != APPROVAL_APPROVED && a->state != APPROVAL_EDITED)
			return -1;
		ap_set_state(a, APPROVAL_APPLYING);
		return 0;
	}
	if (strcmp(type, "approval.applied") == 0) {
		if (a->state != APPROVAL_APPLYING)
			return -1;
		json_decref(a->result);
		v = json_object_get(p, "result");
		a->result = v != NULL ? json_deep_copy(v) : NULL;
		ap_set_state(a, json_is_true(json_object_get(p, "ok")) ?
		    APPROVAL_APPLIED : APPROVAL_FAILED);
		return 0;
	}
	if (strcmp(type, "approval.interrupted") == 0) {
		if (a->state != APPROVAL_APPLYING)
			return -1;
		free(a->note);
		a->note = ap_strdup(ap_str(p, "note"));
		a->expires_ms = ap_int(p, "expires_ms");
		/* Asked again: the old decision no longer stands. */
		a->decided = 0;
		free(a->content);
		a->content = NULL;
		a->content_len = 0;
		ap_set_state(a, APPROVAL_INTERRUPTED);
		return 0;
	}
	return -1;
}

/* The log failed a record: stop changing anything until a restart. */
static void
ap_storage_failed(int error)
{
	if (ap_broken)
		return;
	ap_broken = 1;
	log_error("approvals: the disk log failed a record (%s); approvals "
	    "take no more changes until gbrd restarts", strerror(error));
}

/* Disk log callback: runs a record's continuation. */
static void
ap_logged_cb(void *arg, int error, uint64_t seq)
{
	struct ap_wait	*w = arg;

	if (error != 0)
		ap_storage_failed(error);
	if (w->fn != NULL)
		w->fn(w, error);
	json_decref(w->reply);
	free(w);
}

/* Fails a call because the log refused a record. */
int
ap_fail_storage(struct gbr_error *err)
{
	int	e = disklog_error();

	if (e == EAGAIN)
		return gbr_error_set(err, GBR_ERR_BUSY, NULL, "the disk log is "
		    "behind; try again shortly");
	if (e == ESHUTDOWN)
		return gbr_error_set(err, GBR_ERR_SHUTTING_DOWN, NULL,
		    "the daemon is shutting down");
	if (e == EMSGSIZE)
		return gbr_error_set(err, GBR_ERR_TOO_LARGE, NULL,
		    "the change is too large for the disk log");
	return gbr_error_set(err, GBR_ERR_STORAGE, json_pack("{s:s}", "errno",
	    strerror(e)), "the disk log cannot take the change: %s",
	    strerror(e));
}

/*
 * Appends a record (payload borrowed) and applies it. w (may be NULL) is
 * the continuation; it is freed here if the log refuses. Returns 0, or -1
 * if the log would not take it (nothing changed).
 */
int
ap_record(const char *type, json_t *payload, int durable, struct ap_wait *w)
{
	if (disklog_append(type, payload, durable, w != NULL ? ap_logged_cb :
	    NULL, w) == 0) {
		if (w != NULL) {
			json_decref(w->reply);
			free(w);
		}
		return -1;
	}
	if (ap_apply(type, payload, osdep_now_ms()) != 0)
		fatalx("approvals: %s was logged but does not apply", type);
	return 0;
}

/* A continuation. */
struct ap_wait *
ap_wait_new(void (*fn)(struct ap_wait *, int), const char *id,
    approval_done_cb cb, void *arg)
{
	struct ap_wait	*w = xcalloc(1, sizeof *w);

	w->fn = fn;
	if (id != NULL)
		snprintf(w->id, sizeof w->id, "%s", id);
	w->cb = cb;
	w->arg = arg;
	return w;
}

/* Disk log: the live state. */
static json_t *
ap_snapshot(void)
{
	struct approval	*a;
	json_t		*arr = json_array(), *o;

	TAILQ_FOREACH(a, &ap_all, entry) {
		o = approval_json(a);
		json_object_set_new(o, "turn", json_integer((json_int_t)a->turn));
		if (a->rid != NULL)
			json_object_set_new(o, "request_id", json_string(a->rid));
		if (a->resolve_rid != NULL)
			json_object_set_new(o, "resolve_request_id",
			    json_string(a->resolve_rid));
		if (a->content != NULL)
			json_object_set_new(o, "content", json_stringn(a->content,
			    a->content_len));
		if (a->proposed != NULL)
			json_object_set_new(o, "proposed", json_stringn(
			    a->proposed, a->proposed_len));
		if (a->pin != NULL)
			json_object_set_new(o, "pin", json_deep_copy(a->pin));
		json_object_set_new(o, "decided", json_boolean(a->decided));
		json_object_set_new(o, "announced", a->announced == -1 ?
		    json_null() : json_string(ap_states[a->announced]));
		json_array_append_new(arr, o);
	}
	return json_pack("{s:i, s:o, s:o}", "version", AP_SNAPSHOT_VERSION,
	    "approvals", arr, "grants", ap_grant_snapshot());
}

/* Disk log: the newest snapshot's state. */
static int
ap_restore(json_t *state)
{
	struct approval	*a;
	json_t		*arr, *garr, *o, *v;
	size_t		 i;
	int		 st, d;

	if (json_unpack(state, "{s:o, s:o}", "approvals", &arr, "grants",
	    &garr) != 0 || !json_is_array(arr) || !json_is_array(garr) ||
	    ap_int(state, "version") != AP_SNAPSHOT_VERSION) {
		log_error("approval snapshot: unknown layout");
		return -1;
	}
	json_array_foreach(arr, i, o) {
		st = ap_parse(ap_states, sizeof ap_states / sizeof ap_states[0],
		    ap_str(o, "state"));
		if (st == -1 || ap_apply_requested(o) != 0) {
			log_error("approval snapshot: approval %zu is malformed", i);
			return -1;
		}
		a = TAILQ_LAST(&ap_all, approval_list);
		a->state = (enum approval_state)st;
		/* A snapshot from before "announced" existed: all were shown. */
		if ((v = json_object_get(o, "announced")) == NULL)
			a->announced = st;
		else if (json_is_null(v))
			a->announced = -1;
		else if ((a->announced = ap_parse(ap_states, sizeof ap_states /
		    sizeof ap_states[0], json_string_value(v))) == -1) {
			log_error("approval snapshot: approval %zu is malformed", i);
			return -1;
		}
		if (ap_finished(a->state)) {
			ap_nlive--;
			ap_ndone++;
		}
		a->expires_ms = ap_int(o, "expires_ms");
		a->resolved_ms = ap_int(o, "resolved_ms");
		a->decided = json_is_true(json_object_get(o, "decided"));
		d = ap_parse(ap_decisions, sizeof ap_decisions /
		    sizeof ap_decisions[0], ap_str(o, "decision"));
		a->decision = d != -1 ? (enum approval_decision)d :
		    APPROVAL_APPROVE;
		a->scope_session = ap_streq(ap_str(o, "scope"), "session");
		a->reason = ap_strdup(ap_str(o, "reason"));
		a->note = ap_strdup(ap_str(o, "note"));
		a->resolve_rid = ap_strdup(ap_str(o, "resolve_request_id"));
		a->by = ap_strdup(ap_str(o, "decided_by"));
		if ((v = json_object_get(o, "content")) != NULL &&
		    json_is_string(v)) {
			a->content_len = json_string_length(v);
			a->content = xmalloc(a->content_len + 1);
			memcpy(a->content, json_string_value(v),
			    a->content_len + 1);
		}
		v = json_object_get(o, "result");
		if (v != NULL && !json_is_null(v))
			a->result = json_deep_copy(v);
	}
	json_array_foreach(garr, i, o) {
		if (ap_grant_add(o) != 0) {
			log_error("approval snapshot: grant %zu is malformed", i);
			return -1;
		}
	}
	return 0;
}

/* Disk log: one record after the snapshot. */
static int
ap_replay(uint64_t lseq, int64_t ts, const char *type, json_t *payload)
{
	if (ap_apply(type, payload, ts) != 0) {
		log_error("disk log record %llu (%s) does not fit the approvals "
		    "replayed so far", (unsigned long long)lseq, type);
		return -1;
	}
	return 0;
}

/*
 * Replay found an approval's event in its session's stream: what the
 * stream showed of it, so recovery can add what a crash kept out.
 */
static void
ap_event_replayed(json_t *payload)
{
	const char	*type = ap_str(payload, "type");
	json_t		*o = json_object_get(payload, "approval");
	struct approval	*a;
	int		 st;

	if (type == NULL || strncmp(type, "approval.", 9) != 0 ||
	    (a = approval_get(ap_str(o, "id"))) == NULL)
		return;
	st = ap_parse(ap_states, sizeof ap_states / sizeof ap_states[0],
	    ap_str(o, "state"));
	a->announced = st != -1 ? st : (int)a->state;
}

static const struct disklog_module ap_module = {
	"approval", ap_snapshot, ap_restore, ap_replay, NULL
};

/* Registers the module: its records, and its events in session streams. */
void
ap_log_register(void)
{
	session_observe_events(ap_event_replayed);
	disklog_register(&ap_module);
}
