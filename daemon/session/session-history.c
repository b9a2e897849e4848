/*
 * A session's history and the request_ids it remembers. The history is
 * the list of messages (user, assistant, tool calls and results), each
 * kept encoded as JSON with its seq, bounded in messages and bytes; the
 * system message is kept apart (session.env replaces it). A request_id
 * remembered with a message (session.send, a tool call) lets a resent
 * request get the first result instead of running twice; the request_ids
 * of session.create are remembered daemon-wide, in a ring of
 * SESSION_CREATE_RIDS.
 *
 * This file owns the encoding of history messages, the request_id memory
 * and the public calls that read the history or append a message to it.
 * A message enters the history only when its record applies
 * (apply_message in session-log.c), like every other change.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "jsonfast.h"
#include "log.h"
#include "session.h"
#include "session-int.h"
#include "xmalloc.h"

#define SESSION_CREATE_RIDS	256	/* request_ids of session.create remembered */

/* A remembered request_id of session.create. */
struct create_rid {
	char	*id;
	char	 session[SESSION_ID_LEN + 1];
};

static struct create_rid	 create_rids[SESSION_CREATE_RIDS];
static size_t			 create_rids_next;

/* Encodes one history message: {seq, ts, role, content, ...}. */
char *
hist_encode(uint64_t seq, int64_t ts, json_t *message, size_t *len)
{
	json_t	*o;
	char	*buf;

	o = json_pack("{s:I, s:I}", "seq", (json_int_t)seq, "ts", (json_int_t)ts);
	json_object_update_missing(o, message);
	buf = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (buf == NULL)
		fatalx("session: a history message cannot be encoded");
	*len = strlen(buf);
	return buf;
}

/*
 * A history message encoded ahead by session_message, for apply_message
 * to take instead of encoding it again.
 */
static struct {
	struct session	*s;
	uint64_t	 seq;
	char		*json;
	size_t		 len;
} hist_ready;

/*
 * Takes the message session_message encoded ahead for event seq of s, or
 * returns NULL if there is none (then the caller encodes it).
 */
char *
hist_take_ready(struct session *s, uint64_t seq, size_t *len)
{
	char	*json;

	if (hist_ready.json == NULL || hist_ready.s != s ||
	    hist_ready.seq != seq)
		return NULL;
	json = hist_ready.json;
	*len = hist_ready.len;
	hist_ready.json = NULL;
	return json;
}

/* Appends an encoded message to the history. */
void
hist_append(struct session *s, uint64_t seq, char *json, size_t len)
{
	size_t	ncap;

	if (s->nhist == s->hist_cap) {
		ncap = s->hist_cap == 0 ? 8 : s->hist_cap * 2;
		s->hist = xreallocarray(s->hist, ncap, sizeof *s->hist);
		s->hist_cap = ncap;
	}
	s->hist[s->nhist].seq = seq;
	s->hist[s->nhist].json = json;
	s->hist[s->nhist].len = len;
	s->nhist++;
	s->hist_bytes += len;
}

/*
 * A history message as JSON again (new reference), or NULL. jansson wrote
 * it, NUL bytes in strings as \u0000 (a command's output can hold one),
 * which its parser refuses unless told.
 */
json_t *
hist_parse(const struct hmsg *h, json_error_t *jerr)
{
	return jsonfast_loadb(h->json, h->len, JSON_ALLOW_NUL, jerr);
}

/* Finds a remembered request_id of session.send. */
struct rid *
rid_find(struct session *s, const char *id)
{
	size_t	i;

	for (i = 0; i < s->rids_n; i++) {
		if (strcmp(s->rids[i].id, id) == 0)
			return &s->rids[i];
	}
	return NULL;
}

/*
 * Remembers a request_id. The array grows with use up to the limit (an idle
 * session with few requests stays small), then the oldest is forgotten.
 */
void
rid_remember(struct session *s, const char *id, uint64_t seq, uint64_t turn)
{
	struct rid	*r;
	size_t		 ncap;

	if (s->rids_max == 0)
		s->rids_max = config_get()->session_request_ids;
	if (s->rids_n < s->rids_max) {
		if (s->rids_n == s->rids_cap) {
			ncap = s->rids_cap == 0 ? 4 : s->rids_cap * 2;
			if (ncap > s->rids_max)
				ncap = s->rids_max;
			s->rids = xreallocarray(s->rids, ncap, sizeof *s->rids);
			s->rids_cap = ncap;
		}
		r = &s->rids[s->rids_n++];
		s->rids_next = s->rids_n % s->rids_max;
	} else {
		r = &s->rids[s->rids_next];
		free(r->id);
		s->rids_next = (s->rids_next + 1) % s->rids_max;
	}
	r->id = xstrdup(id);
	r->seq = seq;
	r->turn = turn;
}

/* The session a remembered request_id of session.create made (borrowed). */
const char *
create_rid_find(const char *id)
{
	size_t	i;

	for (i = 0; i < SESSION_CREATE_RIDS; i++) {
		if (create_rids[i].id != NULL && strcmp(create_rids[i].id, id) == 0)
			return create_rids[i].session;
	}
	return NULL;
}

/* Remembers a request_id of session.create. */
void
create_rid_remember(const char *id, const char *session)
{
	struct create_rid	*r = &create_rids[create_rids_next];

	free(r->id);
	r->id = xstrdup(id);
	snprintf(r->session, sizeof r->session, "%s", session);
	create_rids_next = (create_rids_next + 1) % SESSION_CREATE_RIDS;
}

/* The request_ids of session.create, oldest first (new reference). */
json_t *
create_rid_json(void)
{
	json_t	*crids = json_array();
	size_t	 i, k;

	for (i = 0; i < SESSION_CREATE_RIDS; i++) {
		k = (create_rids_next + i) % SESSION_CREATE_RIDS;
		if (create_rids[k].id != NULL)
			json_array_append_new(crids, json_pack("[s, s]",
			    create_rids[k].id, create_rids[k].session));
	}
	return crids;
}

/* Forgets every request_id of session.create. */
void
create_rid_release(void)
{
	size_t	i;

	for (i = 0; i < SESSION_CREATE_RIDS; i++) {
		free(create_rids[i].id);
		create_rids[i].id = NULL;
	}
}

/*
 * Returns the last messages of a history before a seq, as far as announced
 * and as many as fit in half a client's output queue (so the reply itself
 * never evicts the client); "more" says older ones exist.
 */
json_t *
session_history(struct session *s, size_t limit, uint64_t before)
{
	json_t		*msgs = json_array(), *m;
	json_error_t	 jerr;
	size_t		 end = s->nhist, start, i, total, bytes = 0;
	size_t		 max = config_get()->client_queue_bytes / 2;

	/* A message not yet announced would reach the client twice. */
	while (end > 0 && s->hist[end - 1].seq > s->announced)
		end--;
	total = end;
	while (end > 0 && before != 0 && s->hist[end - 1].seq >= before)
		end--;
	for (start = end; start > 0 && end - start < limit; start--) {
		if (start < end && bytes + s->hist[start - 1].len > max)
			break;
		bytes += s->hist[start - 1].len;
	}
	for (i = start; i < end; i++) {
		m = hist_parse(&s->hist[i], &jerr);
		if (m == NULL)
			fatalx("session %s: history message %zu does not parse",
			    s->id, i);
		json_array_append_new(msgs, m);
	}
	return json_pack("{s:s, s:I, s:I, s:b, s:o, s:o}", "session", s->id,
	    "seq", (json_int_t)s->announced, "total", (json_int_t)total,
	    "more", start > 0, "messages", msgs, "system",
	    s->system == NULL ? json_null() : json_pack("{s:s, s:s, s:s, s:I}",
	    "role", "system", "content", s->system, "env", s->env,
	    "seq", (json_int_t)s->system_seq));
}

/* Every history message from index from on, parsed (new reference). */
json_t *
session_messages(struct session *s, size_t from)
{
	json_t		*a = json_array(), *m;
	json_error_t	 jerr;
	size_t		 i;

	for (i = from; i < s->nhist; i++) {
		m = hist_parse(&s->hist[i], &jerr);
		if (m == NULL)
			fatalx("session %s: history message %zu does not parse",
			    s->id, i);
		json_array_append_new(a, m);
	}
	return a;
}

/*
 * Appends a history message announced as an event of its own type
 * (tool.call, tool.result). A request_id is remembered with it, so
 * session_request_lookup finds it again. result (stolen, may be NULL) is
 * what cb receives; message and fields are stolen.
 */
int
session_message(struct session *s, const char *type, json_t *message,
    json_t *fields, const char *request_id, json_t *result,
    session_done_cb cb, void *arg, struct gbr_error *err)
{
	const struct config	*cfg = config_get();
	struct pending		*pe;
	json_t			*p;
	char			*enc;
	size_t			 len;

	if (session_check_broken(s, err) != 0) {
		json_decref(message);
		json_decref(fields);
		json_decref(result);
		return -1;
	}
	p = session_payload(s, type);
	enc = hist_encode(s->seq + 1, json_integer_value(json_object_get(p,
	    "ts")), message, &len);
	if (s->nhist + 1 > cfg->session_history_messages ||
	    s->hist_bytes + len > cfg->session_history_bytes) {
		free(enc);
		json_decref(p);
		json_decref(message);
		json_decref(fields);
		json_decref(result);
		return gbr_error_set(err, GBR_ERR_LIMIT_REACHED,
		    json_pack("{s:s}", "limit", "history"), "the history of "
		    "session %s is full; start a new session", s->id);
	}
	if (fields != NULL) {
		json_object_update_missing(p, fields);
		json_decref(fields);
	}
	json_object_set_new(p, "message", message);
	if (request_id != NULL)
		json_object_set_new(p, "request_id", json_string(request_id));
	hist_ready.s = s;
	hist_ready.seq = s->seq + 1;
	hist_ready.json = enc;
	hist_ready.len = len;
	pe = session_record(&s, "session.message", p, 0);
	free(hist_ready.json);		/* not taken: the log refused it */
	hist_ready.json = NULL;
	if (pe == NULL) {
		json_decref(result);
		return session_fail_storage(err);
	}
	pe->result = result;
	pending_wait(pe, cb != NULL ? cb : session_nobody, arg, NULL);
	session_settle(s);
	return 0;
}


/*
 * Looks up a remembered request_id. Returns 0 if unknown; else 1, and cb
 * runs (now, or once the record is written) with the history message that
 * carries it plus "duplicate": true.
 */
int
session_request_lookup(struct session *s, const char *request_id,
    session_done_cb cb, void *arg)
{
	struct pending	*pe;
	struct rid	*r;
	json_error_t	 jerr;
	json_t		*m;
	size_t		 i;

	if ((r = rid_find(s, request_id)) == NULL)
		return 0;
	if ((pe = pending_find(s, r->seq)) != NULL) {
		if (pending_wait(pe, cb, arg, json_pack("{s:b}", "duplicate",
		    1)) == 0)
			return 1;
		session_answer(cb, arg, json_pack("{s:b, s:b}", "duplicate", 1,
		    "busy", 1));
		return 1;
	}
	for (i = s->nhist; i > 0; i--) {
		if (s->hist[i - 1].seq != r->seq)
			continue;
		m = hist_parse(&s->hist[i - 1], &jerr);
		if (m == NULL)
			break;
		json_object_set_new(m, "duplicate", json_true());
		session_answer(cb, arg, m);
		return 1;
	}
	session_answer(cb, arg, json_pack("{s:b, s:I}", "duplicate", 1,
	    "seq", (json_int_t)r->seq));
	return 1;
}
