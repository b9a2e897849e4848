/*
 * Sessions in the disk log: how each "session.*" record changes memory
 * (session_apply, for a live change and at replay alike), the snapshot
 * that replaces the records before it, and the replay that rebuilds the
 * sessions, their histories, seq counters, request_id memory, event rings
 * and log indexes from the snapshot and the records after it. Replaying
 * gives back memory byte for byte as it was: the record's payload is the
 * event itself. The histories are not in the snapshot but in side files
 * beside it, left on disk at restore until read (session-history.c).
 *
 * This file owns the record and snapshot formats. It does not append
 * records (session-record.c) or read the log for a client
 * (catchup.c).
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "disklog.h"
#include "log.h"
#include "rewind.h"
#include "session.h"
#include "session-int.h"
#include "xmalloc.h"

/*
 * 2: a session's history is in its side file ({"file","messages","bytes"});
 * 1 (still restored): the history's messages in the snapshot itself.
 */
#define SESSION_SNAPSHOT_VERSION 2

static json_t	*session_snapshot(void);
static int	 session_restore(json_t *);
static int	 session_replay(uint64_t, int64_t, const char *, json_t *);
static void	 session_snapshot_done(uint64_t, int);
static session_event_observer session_observer;

static const struct disklog_module session_module = {
	"session", session_snapshot, session_restore, session_replay,
	session_snapshot_done
};

/* Reads a payload's common fields. */
int
payload_head(json_t *p, const char **id, uint64_t *seq, int64_t *ts)
{
	json_t	*v;

	*id = json_string_value(json_object_get(p, "session"));
	v = json_object_get(p, "seq");
	if (*id == NULL || !json_is_integer(v) || json_integer_value(v) < 1)
		return -1;
	*seq = (uint64_t)json_integer_value(v);
	v = json_object_get(p, "ts");
	*ts = json_is_integer(v) ? json_integer_value(v) : 0;
	return 0;
}

/* A workspace_uid field: the uid, or -1 when absent (older records). */
static long
session_uid_field(const json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 0xffffffffLL)
		return -1;
	return (long)json_integer_value(v);
}

/* Applies session.create. *sp is the live session, or NULL at replay. */
static int
apply_create(struct session **sp, json_t *p, const char *id, int64_t ts)
{
	struct session	*s = *sp;
	const char	*ws, *env, *name, *rid;

	ws = json_string_value(json_object_get(p, "workspace"));
	env = json_string_value(json_object_get(p, "env"));
	name = json_string_value(json_object_get(p, "name"));
	rid = json_string_value(json_object_get(p, "request_id"));
	if (ws == NULL || env == NULL || strlen(id) != SESSION_ID_LEN ||
	    idmap_find(&session_ids, id) != NULL ||
	    (name != NULL && idmap_find(&session_names, name) != NULL))
		return -1;
	if (s == NULL)
		s = session_alloc();
	snprintf(s->id, sizeof s->id, "%s", id);
	s->name = name != NULL ? xstrdup(name) : NULL;
	s->workspace = xstrdup(ws);
	s->workspace_uid = session_uid_field(json_object_get(p,
	    "workspace_uid"));
	s->env = xstrdup(env);
	if (json_string_value(json_object_get(p, "system")) != NULL) {
		s->system = xstrdup(json_string_value(json_object_get(p, "system")));
		s->system_seq = 1;
	}
	s->state = SESSION_IDLE;
	s->created_ms = ts;
	idmap_add(&session_ids, &s->id_entry, s->id, s);
	if (s->name != NULL)
		idmap_add(&session_names, &s->name_entry, s->name, s);
	TAILQ_INSERT_TAIL(&session_all, s, entry);
	if (rid != NULL)
		create_rid_remember(rid, s->id);
	*sp = s;
	return 0;
}

/* Applies session.message: one history message. */
static int
apply_message(struct session *s, json_t *p, uint64_t seq, int64_t ts)
{
	json_t		*m = json_object_get(p, "message");
	const char	*rid;
	char		*json;
	size_t		 len;

	if (!json_is_object(m) ||
	    json_string_value(json_object_get(m, "role")) == NULL)
		return -1;
	/* session_message may have encoded it already, to check the limits. */
	if ((json = hist_take_ready(s, seq, &len)) == NULL)
		json = hist_encode(seq, ts, m, &len);
	hist_append(s, seq, json, len);
	rid = json_string_value(json_object_get(p, "request_id"));
	if (rid != NULL)
		rid_remember(s, rid, seq, (uint64_t)json_integer_value(
		    json_object_get(p, "turn")));
	return 0;
}

/* Applies session.state. */
static int
apply_state(struct session *s, json_t *p)
{
	json_t	*t = json_object_get(p, "turn"), *u, *c;
	int	 st, prev;

	st = session_state_parse(json_string_value(json_object_get(p, "state")));
	if (st == -1 || st == SESSION_CLOSED)
		return -1;
	if (st == SESSION_AWAITING_APPROVAL &&
	    s->state != SESSION_AWAITING_APPROVAL) {
		/* Where it goes back to once no approval waits (approval.c). */
		prev = session_state_parse(json_string_value(json_object_get(p,
		    "previous")));
		s->prev_state = prev == -1 || prev == SESSION_CLOSED ||
		    prev == SESSION_AWAITING_APPROVAL ? s->state :
		    (enum session_state)prev;
	}
	s->state = st;
	if (json_is_integer(t) && (uint64_t)json_integer_value(t) > s->turn)
		s->turn = (uint64_t)json_integer_value(t);
	/* The end of an agent turn carries its token usage (agent.c). */
	u = json_object_get(p, "usage");
	if (json_is_integer(json_object_get(u, "input_tokens")) &&
	    json_is_integer(json_object_get(u, "output_tokens"))) {
		s->last_in = json_integer_value(json_object_get(u, "input_tokens"));
		s->last_out = json_integer_value(json_object_get(u,
		    "output_tokens"));
		s->tokens_in += s->last_in;
		s->tokens_out += s->last_out;
		/* Its cost, if [prices] priced it when it ended (agent.c). */
		c = json_object_get(u, "cost_usd");
		if (json_is_number(c) && json_number_value(c) >= 0 &&
		    isfinite(s->cost_usd + json_number_value(c))) {
			s->last_cost = json_number_value(c);
			s->cost_usd += s->last_cost;
		} else {
			s->last_cost = -1;
			if (json_is_true(json_object_get(u, "unpriced")))
				s->unpriced++;
		}
	}
	return 0;
}

/*
 * Applies session.env: the environment's name and the system message
 * change; every other message of the history stays as it is.
 */
static int
apply_env(struct session *s, json_t *p, uint64_t seq)
{
	const char	*env = json_string_value(json_object_get(p, "env"));
	const char	*sys = json_string_value(json_object_get(p, "system"));

	if (env == NULL)
		return -1;
	free(s->env);
	s->env = xstrdup(env);
	if (sys != NULL) {
		free(s->system);
		s->system = xstrdup(sys);
		s->system_seq = seq;
	}
	return 0;
}

/* Applies session.close: the session leaves the maps at once. */
static void
apply_close(struct session *s)
{
	s->state = SESSION_CLOSED;
	rewind_forget(s->id);
	idmap_del(&session_ids, &s->id_entry);
	if (s->name != NULL)
		idmap_del(&session_names, &s->name_entry);
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
}

/*
 * Applies one record to memory. Used for live changes (*sp is the session,
 * or the fresh one for a create) and at replay (*sp NULL: found by id).
 */
int
session_apply(const char *type, json_t *p, struct session **sp)
{
	struct session	*s = *sp;
	const char	*id;
	uint64_t	 seq;
	int64_t		 ts;
	int		 r = 0;

	if (payload_head(p, &id, &seq, &ts) != 0)
		return -1;
	if (strcmp(type, "session.create") == 0) {
		if (seq != 1 || apply_create(&s, p, id, ts) != 0)
			return -1;
	} else {
		if (s == NULL && (s = idmap_find(&session_ids, id)) == NULL)
			return -1;
		if (seq != s->seq + 1)
			return -1;
		if (strcmp(type, "session.message") == 0)
			r = apply_message(s, p, seq, ts);
		else if (strcmp(type, "session.state") == 0)
			r = apply_state(s, p);
		else if (strcmp(type, "session.close") == 0)
			apply_close(s);
		else if (strcmp(type, "session.env") == 0)
			r = apply_env(s, p, seq);
		else if (strcmp(type, "session.event") == 0)
			rewind_note(s->id, seq, p);
		else if (strcmp(type, "session.error") != 0)
			r = -1;
		if (r != 0)
			return -1;
	}
	s->seq = seq;
	if (ts > s->active_ms)
		s->active_ms = ts;
	*sp = s;
	return 0;
}

/* Disk log: the live state of every open session. */
static json_t *
session_snapshot(void)
{
	struct session	*s;
	json_t		*sessions = json_array(), *o, *hist, *rids, *rw;
	size_t		 i, k;

	TAILQ_FOREACH(s, &session_all, entry) {
		if (s->state == SESSION_CLOSED)
			continue;
		hist = hist_snapshot(s);
		rids = json_array();
		for (i = 0; i < s->rids_n; i++) {
			/* Oldest first: from 0 while growing, from rids_next when full. */
			k = s->rids_n < s->rids_max ? i :
			    (s->rids_next + i) % s->rids_max;
			json_array_append_new(rids, json_pack("[s, I, I]",
			    s->rids[k].id, (json_int_t)s->rids[k].seq,
			    (json_int_t)s->rids[k].turn));
		}
		o = json_pack("{s:s, s:s?, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}",
		    "id", s->id, "name", s->name, "workspace", s->workspace,
		    "env", s->env, "state", session_state_name(s->state),
		    "created_ms", (json_int_t)s->created_ms,
		    "active_ms", (json_int_t)s->active_ms,
		    "seq", (json_int_t)s->seq, "turn", (json_int_t)s->turn,
		    "history", hist, "request_ids", rids);
		if (s->system != NULL) {
			json_object_set_new(o, "system", json_string(s->system));
			json_object_set_new(o, "system_seq",
			    json_integer((json_int_t)s->system_seq));
		}
		if (s->workspace_uid >= 0)
			json_object_set_new(o, "workspace_uid",
			    json_integer((json_int_t)s->workspace_uid));
		if (s->state == SESSION_AWAITING_APPROVAL)
			json_object_set_new(o, "previous_state", json_string(
			    session_state_name(s->prev_state)));
		/* Older gbrd wrote the first four items only (restore below). */
		if (s->tokens_in != 0 || s->tokens_out != 0 || s->unpriced != 0 ||
		    s->last_cost >= 0)
			json_object_set_new(o, "usage", json_pack(
			    "[I, I, I, I, f, f, I]", (json_int_t)s->tokens_in,
			    (json_int_t)s->tokens_out, (json_int_t)s->last_in,
			    (json_int_t)s->last_out, s->cost_usd, s->last_cost,
			    (json_int_t)s->unpriced));
		if (logindex_count(&s->lidx) > 0)
			json_object_set_new(o, "log_index",
			    logindex_json(&s->lidx));
		/* What rewind remembers outlives the records it came from. */
		if ((rw = rewind_state(s->id)) != NULL)
			json_object_set_new(o, "rewind", rw);
		json_array_append_new(sessions, o);
	}
	return json_pack("{s:i, s:o, s:o}", "version", SESSION_SNAPSHOT_VERSION,
	    "sessions", sessions, "create_request_ids", create_rid_json());
}

/* Rebuilds one session from a snapshot. */
static int
session_restore_one(json_t *o)
{
	struct session	*s;
	json_t		*hist, *rids, *m, *v, *jname = NULL;
	const char	*id, *name = NULL, *ws, *env, *state;
	json_int_t	 created, active, seq, turn;
	size_t		 i;
	int		 st;

	/* An unnamed session's name is written as null ("s:s?"). */
	if (json_unpack(o, "{s:s, s?o, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}",
	    "id", &id, "name", &jname, "workspace", &ws, "env", &env,
	    "state", &state, "created_ms", &created, "active_ms", &active,
	    "seq", &seq, "turn", &turn, "history", &hist, "request_ids", &rids) != 0 ||
	    (!json_is_array(hist) && !json_is_object(hist)) ||
	    (jname != NULL && !json_is_null(jname) && !json_is_string(jname)))
		return -1;
	name = json_string_value(jname);
	if (strlen(id) != SESSION_ID_LEN || seq < 1 || turn < 0 ||
	    !json_is_array(rids) ||
	    (st = session_state_parse(state)) == -1 || st == SESSION_CLOSED ||
	    idmap_find(&session_ids, id) != NULL ||
	    (name != NULL && idmap_find(&session_names, name) != NULL))
		return -1;
	s = session_alloc();
	snprintf(s->id, sizeof s->id, "%s", id);
	s->name = name != NULL ? xstrdup(name) : NULL;
	s->workspace = xstrdup(ws);
	s->workspace_uid = session_uid_field(json_object_get(o, "workspace_uid"));
	s->env = xstrdup(env);
	if ((v = json_object_get(o, "system")) != NULL && json_is_string(v)) {
		s->system = xstrdup(json_string_value(v));
		s->system_seq = (uint64_t)json_integer_value(json_object_get(o,
		    "system_seq"));
	}
	s->state = st;
	s->prev_state = SESSION_IDLE;
	if ((st = session_state_parse(json_string_value(json_object_get(o,
	    "previous_state")))) != -1 && st != SESSION_CLOSED &&
	    st != SESSION_AWAITING_APPROVAL)
		s->prev_state = st;
	s->created_ms = created;
	s->active_ms = active;
	{
		json_t		*ju = json_object_get(o, "usage");
		json_int_t	 u[5];
		double		 c[2];
		int		 full = 0;

		if (json_unpack(ju, "[I, I, I, I!]", &u[0], &u[1], &u[2],
		    &u[3]) == 0 || (full = json_unpack(ju,
		    "[I, I, I, I, F, F, I!]", &u[0], &u[1], &u[2], &u[3], &c[0],
		    &c[1], &u[4]) == 0)) {
			s->tokens_in = u[0];
			s->tokens_out = u[1];
			s->last_in = u[2];
			s->last_out = u[3];
		}
		if (full && c[0] >= 0 && isfinite(c[0]) && isfinite(c[1]) &&
		    u[4] >= 0) {
			s->cost_usd = c[0];
			s->last_cost = c[1] < 0 ? -1 : c[1];
			s->unpriced = u[4];
		}
	}
	s->seq = s->announced = (uint64_t)seq;
	s->turn = (uint64_t)turn;
	/* Older changes are not replayed: the snapshot may hold them. */
	if ((v = json_object_get(o, "rewind")) == NULL)
		rewind_floor(s->id, s->seq);
	else if (rewind_restore(s->id, s->seq, v) != 0)
		log_warn("session %s: the snapshot's rewind changes are "
		    "malformed; only later changes can be rewound", s->id);
	if ((v = json_object_get(o, "log_index")) != NULL &&
	    logindex_restore(&s->lidx, v, s->seq) != 0)
		log_warn("session %s: the snapshot's log index is malformed; "
		    "older events are looked for from the log's start", s->id);
	idmap_add(&session_ids, &s->id_entry, s->id, s);
	if (s->name != NULL)
		idmap_add(&session_names, &s->name_entry, s->name, s);
	TAILQ_INSERT_TAIL(&session_all, s, entry);
	if (hist_restore(s, hist) != 0)
		return -1;
	json_array_foreach(rids, i, m) {
		const char	*rid;
		json_int_t	 rseq, rturn;

		if (json_unpack(m, "[s, I, I]", &rid, &rseq, &rturn) != 0)
			return -1;
		rid_remember(s, rid, (uint64_t)rseq, (uint64_t)rturn);
	}
	return 0;
}

/* Disk log: the newest snapshot's state. */
static int
session_restore(json_t *state)
{
	json_t		*sessions, *crids, *o;
	json_int_t	 version;
	const char	*rid, *sid;
	size_t		 i;

	if (json_unpack(state, "{s:I, s:o, s:o}", "version", &version,
	    "sessions", &sessions, "create_request_ids", &crids) != 0 ||
	    version < 1 || version > SESSION_SNAPSHOT_VERSION ||
	    !json_is_array(sessions) ||
	    !json_is_array(crids)) {
		log_error("session snapshot: unknown layout");
		return -1;
	}
	json_array_foreach(sessions, i, o) {
		if (session_restore_one(o) != 0) {
			log_error("session snapshot: session %zu is malformed", i);
			return -1;
		}
	}
	json_array_foreach(crids, i, o) {
		if (json_unpack(o, "[s, s]", &rid, &sid) != 0)
			return -1;
		create_rid_remember(rid, sid);
	}
	log_info("restored %zu sessions from the snapshot", json_array_size(sessions));
	return 0;
}

/* Disk log: the snapshot is written, or it is not. */
static void
session_snapshot_done(uint64_t seq, int error)
{
	struct session	*s;

	TAILQ_FOREACH(s, &session_all, entry)
		hist_snapshot_done(s, error);
	hist_limbo_release();
}

/* Sets the replay observer of event records (see session.h). */
void
session_observe_events(session_event_observer fn)
{
	session_observer = fn;
}

/* Disk log: one record after the snapshot. */
static int
session_replay(uint64_t lseq, int64_t ts, const char *type, json_t *payload)
{
	struct session	*s = NULL;

	if (session_apply(type, payload, &s) != 0) {
		log_error("disk log record %llu (%s) does not fit the sessions "
		    "replayed so far", (unsigned long long)lseq, type);
		return -1;
	}
	logindex_note(&s->lidx, s->seq, lseq);
	if (session_observer != NULL && strcmp(type, "session.event") == 0)
		session_observer(payload);
	/*
	 * The event ring is not refilled: an attach after a restart catches
	 * up from the disk log (catchup.c), so memory holds events only for
	 * sessions that are live again, not for every record replayed.
	 */
	s->announced = s->seq;
	if (s->state == SESSION_CLOSED) {
		TAILQ_REMOVE(&session_all, s, entry);
		session_free(s);
	}
	return 0;
}

/* Registers the sessions' records and snapshot with the disk log. */
void
session_log_register(void)
{
	disklog_register(&session_module);
}
