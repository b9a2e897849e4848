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
 * This file owns the encoding of history messages, their side file in the
 * disk log (written with each snapshot, read back on demand: a restored
 * history stays on disk until something reads it), the request_id memory
 * and the public calls that read the history or append a message to it.
 * A message enters the history only when its record applies
 * (apply_message in session-log.c), like every other change.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "disklog.h"
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
	size_t	ncap, n = s->nhist - s->hist_base;

	if (n == s->hist_cap) {
		ncap = s->hist_cap == 0 ? 8 : s->hist_cap * 2;
		s->hist = xreallocarray(s->hist, ncap, sizeof *s->hist);
		s->hist_cap = ncap;
	}
	s->hist[n].seq = seq;
	s->hist[n].json = json;
	s->hist[n].len = len;
	s->nhist++;
	s->hist_bytes += len;
}

/* The side file of a session's history: "hist-" and its id. */
static void
hist_file(const struct session *s, char *buf, size_t size)
{
	snprintf(buf, size, "hist-%s", s->id);
}

/*
 * Reads the messages that are only in the side file back in, before the
 * resident ones: one line each, as hist_encode wrote it, in seq order.
 */
int
hist_load(struct session *s)
{
	struct hmsg	*h;
	char		 name[32], *buf, *p, *nl, *end;
	size_t		 i, n = s->nhist - s->hist_base, cap;
	uint64_t	 seq, prev = 0;

	s->hist_used_ms = (uint64_t)clock_mono_ms();
	if (s->hist_base == 0)
		return 0;
	hist_file(s, name, sizeof name);
	if (disklog_file_read(name, 0, s->hist_base_bytes, &buf) != 0) {
		log_error("session %s: cannot read its history (%s%s, %llu "
		    "bytes): %s", s->id, name, ".side",
		    (unsigned long long)s->hist_base_bytes, strerror(errno));
		return -1;
	}
	cap = s->hist_base + n;
	h = xreallocarray(NULL, cap > 0 ? cap : 1, sizeof *h);
	p = buf;
	end = buf + s->hist_base_bytes;
	for (i = 0; i < s->hist_base; i++) {
		if (p >= end || (nl = memchr(p, '\n', end - p)) == NULL ||
		    strncmp(p, "{\"seq\":", 7) != 0 ||
		    (seq = strtoull(p + 7, NULL, 10)) <= prev)
			break;
		h[i].seq = prev = seq;
		h[i].len = nl - p;
		h[i].json = xmalloc(h[i].len + 1);
		memcpy(h[i].json, p, h[i].len);
		h[i].json[h[i].len] = '\0';
		p = nl + 1;
	}
	free(buf);
	if (i < s->hist_base || p != end ||
	    (n > 0 && s->hist[0].seq <= prev)) {
		log_error("session %s: its history file %s.side is damaged at "
		    "message %zu", s->id, name, i);
		while (i > 0)
			free(h[--i].json);
		free(h);
		return -1;
	}
	if (n > 0)
		memcpy(h + s->hist_base, s->hist, n * sizeof *h);
	free(s->hist);
	s->hist = h;
	s->hist_cap = cap;
	s->hist_base = 0;
	s->hist_base_bytes = 0;
	return 0;
}

/* Drops the messages the last written snapshot has in the side file. */
void
hist_unload(struct session *s)
{
	size_t	drop = s->hist_saved_n - s->hist_base, i;

	if (s->hist_saved_n <= s->hist_base)
		return;
	for (i = 0; i < drop; i++)
		free(s->hist[i].json);
	memmove(s->hist, s->hist + drop, (s->nhist - s->hist_saved_n) *
	    sizeof *s->hist);
	s->hist_base = s->hist_saved_n;
	s->hist_base_bytes = s->hist_saved_bytes;
	if (s->nhist == s->hist_base) {
		free(s->hist);
		s->hist = NULL;
		s->hist_cap = 0;
	}
}

/*
 * Messages a snapshot in flight still reads (the writer thread writes
 * them into side files), from sessions freed meanwhile: freed once it is
 * over (hist_limbo_release).
 */
static char	**hist_limbo;
static size_t	  hist_limbo_n, hist_limbo_cap;

/* Frees the messages no snapshot in flight reads any more. */
void
hist_limbo_release(void)
{
	size_t	i;

	for (i = 0; i < hist_limbo_n; i++)
		free(hist_limbo[i]);
	free(hist_limbo);
	hist_limbo = NULL;
	hist_limbo_n = hist_limbo_cap = 0;
}

/* Frees the resident messages, or leaves them in limbo if a snapshot reads them. */
void
hist_free(struct session *s)
{
	size_t	i;

	for (i = s->hist_base; i < s->nhist; i++) {
		if (!s->hist_pend || i < s->hist_saved_n || i >= s->hist_pend_n) {
			free(hist_at(s, i)->json);
			continue;
		}
		if (hist_limbo_n == hist_limbo_cap) {
			hist_limbo_cap = hist_limbo_cap == 0 ? 64 :
			    hist_limbo_cap * 2;
			hist_limbo = xreallocarray(hist_limbo, hist_limbo_cap,
			    sizeof *hist_limbo);
		}
		hist_limbo[hist_limbo_n++] = hist_at(s, i)->json;
	}
	free(s->hist);
	s->hist = NULL;
	s->hist_cap = 0;
}

/*
 * The history's part of a session's snapshot: its side file, which the
 * messages since the last written snapshot are appended to (one line
 * each), and how many messages and bytes of it the snapshot covers. The
 * writer thread reads those messages where they are: they are never
 * changed, and not freed until the snapshot is over (hist_free). So the
 * loop only lists them, whatever their size.
 */
json_t *
hist_snapshot(struct session *s)
{
	static const char	 nl = '\n';
	struct disklog_piece	*pc = NULL;
	char			 name[32];
	size_t			 i, n, k = 0;
	uint64_t		 len = 0;

	s->hist_pend = 0;
	if (s->nhist == 0)
		return json_pack("{s:i, s:i}", "messages", 0, "bytes", 0);
	hist_file(s, name, sizeof name);
	n = s->nhist - s->hist_saved_n;
	if (n > 0)
		pc = xreallocarray(NULL, n, 2 * sizeof *pc);
	for (i = s->hist_saved_n; i < s->nhist; i++) {
		pc[k].data = hist_at(s, i)->json;
		pc[k++].len = hist_at(s, i)->len;
		pc[k].data = &nl;
		pc[k++].len = 1;
		len += hist_at(s, i)->len + 1;
	}
	disklog_snapshot_file(name, s->hist_saved_bytes, pc, k);
	s->hist_pend = 1;
	s->hist_pend_n = s->nhist;
	s->hist_pend_bytes = s->hist_saved_bytes + len;
	return json_pack("{s:s, s:I, s:I}", "file", name,
	    "messages", (json_int_t)s->hist_pend_n,
	    "bytes", (json_int_t)s->hist_pend_bytes);
}

/* A history that could leave memory, for hist_trim. */
struct hist_cand {
	struct session	*s;
	uint64_t	 used_ms;
};

static int
hist_cand_cmp(const void *a, const void *b)
{
	const struct hist_cand	*x = a, *y = b;

	return x->used_ms < y->used_ms ? -1 : x->used_ms > y->used_ms;
}

/* The bytes of a history's resident messages. */
static uint64_t
hist_resident(const struct session *s)
{
	uint64_t	bytes = 0;
	size_t		i;

	for (i = s->hist_base; i < s->nhist; i++)
		bytes += s->hist[i - s->hist_base].len;
	return bytes;
}

/*
 * An idle session's event ring goes back too, when nobody is attached and
 * the disk log still holds every event in it: a client that comes back
 * catches up from the log (catchup.c), as after a restart. A ring whose
 * events the log has dropped stays (it is their last copy; [session]
 * events_memory bounds all rings).
 */
static void
ring_trim_idle(struct session *s)
{
	uint64_t	 lseq;

	if (s->nattached > 0 || ring_count(&s->ring) == 0)
		return;
	lseq = logindex_find(&s->lidx, session_ring_first(s));
	if (lseq + 1 < disklog_first_seq())
		return;
	ring_release(&session_rings, &s->ring);
}

/*
 * Lets the histories nobody read for [session] history_idle seconds leave
 * memory (the part a written snapshot has in the side file), then the
 * least recently read ones while the resident total is over [session]
 * history_memory_bytes. A turn in progress keeps its history.
 */
void
hist_trim(void)
{
	const struct config	*cfg = config_get();
	struct hist_cand	*c = NULL;
	struct session		*s;
	uint64_t		 now = (uint64_t)clock_mono_ms(), total = 0;
	uint64_t		 idle = (uint64_t)cfg->session_history_idle * 1000;
	size_t			 n = 0, cap = 0, i;

	TAILQ_FOREACH(s, &session_all, entry) {
		if (s->state != SESSION_RUNNING &&
		    s->state != SESSION_AWAITING_APPROVAL &&
		    now - s->ring_used_ms >= idle)
			ring_trim_idle(s);
		if (s->state == SESSION_RUNNING ||
		    s->state == SESSION_AWAITING_APPROVAL ||
		    s->hist_saved_n <= s->hist_base) {
			total += hist_resident(s);
			continue;
		}
		if (now - s->hist_used_ms >= idle)
			hist_unload(s);
		total += hist_resident(s);
		if (s->hist_saved_n <= s->hist_base)
			continue;
		if (n == cap) {
			cap = cap == 0 ? 16 : cap * 2;
			c = xreallocarray(c, cap, sizeof *c);
		}
		c[n].s = s;
		c[n++].used_ms = s->hist_used_ms;
	}
	if (total > cfg->session_history_memory && n > 0) {
		qsort(c, n, sizeof *c, hist_cand_cmp);
		for (i = 0; i < n && total > cfg->session_history_memory; i++) {
			total -= hist_resident(c[i].s);
			hist_unload(c[i].s);
			total += hist_resident(c[i].s);
		}
	}
	free(c);
}

/* What histories hold, and what of it is in memory. */
json_t *
hist_status(void)
{
	struct session	*s;
	uint64_t	 msgs = 0, bytes = 0, res_msgs = 0, res_bytes = 0;
	uint64_t	 loaded = 0;

	TAILQ_FOREACH(s, &session_all, entry) {
		msgs += s->nhist;
		bytes += s->hist_bytes;
		res_msgs += s->nhist - s->hist_base;
		res_bytes += hist_resident(s);
		if (s->hist_base == 0 && s->nhist > 0)
			loaded++;
	}
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "messages",
	    (json_int_t)msgs, "bytes", (json_int_t)bytes, "resident_messages",
	    (json_int_t)res_msgs, "resident_bytes", (json_int_t)res_bytes,
	    "loaded", (json_int_t)loaded, "idle_s",
	    (json_int_t)config_get()->session_history_idle, "memory_max",
	    (json_int_t)config_get()->session_history_memory);
}

/* The snapshot is written (its side file too) or it is not. */
void
hist_snapshot_done(struct session *s, int error)
{
	if (!s->hist_pend)
		return;
	s->hist_pend = 0;
	if (error != 0)
		return;
	s->hist_saved_n = s->hist_pend_n;
	s->hist_saved_bytes = s->hist_pend_bytes;
}

/*
 * Restores the history from a snapshot: a list of messages (the first
 * layout), or the side file's part, left on disk until hist_load.
 */
int
hist_restore(struct session *s, json_t *h)
{
	json_t		*m, *v;
	json_int_t	 n, bytes;
	const char	*file;
	char		 name[32], *enc;
	size_t		 i;

	if (json_is_array(h)) {
		json_array_foreach(h, i, m) {
			v = json_object_get(m, "seq");
			if (!json_is_object(m) || !json_is_integer(v))
				return -1;
			if ((enc = json_dumps(m, JSON_COMPACT)) == NULL)
				return -1;
			hist_append(s, (uint64_t)json_integer_value(v), enc,
			    strlen(enc));
		}
		return 0;
	}
	file = NULL;
	if (json_unpack(h, "{s?s, s:I, s:I}", "file", &file, "messages", &n,
	    "bytes", &bytes) != 0 || n < 0 || bytes < n || (n == 0) != (bytes == 0))
		return -1;
	if (n == 0)
		return 0;
	hist_file(s, name, sizeof name);
	if (file == NULL || strcmp(file, name) != 0)
		return -1;
	/* The file must hold what the snapshot says; its lines are read later. */
	if (disklog_file_read(name, (uint64_t)bytes - 1, 1, &enc) != 0) {
		log_error("session %s: its history file %s.side is missing or "
		    "shorter than %lld bytes: %s", s->id, name, (long long)bytes,
		    strerror(errno));
		return -1;
	}
	free(enc);
	s->nhist = s->hist_base = s->hist_saved_n = (size_t)n;
	s->hist_base_bytes = s->hist_saved_bytes = (uint64_t)bytes;
	s->hist_bytes = (uint64_t)(bytes - n);
	return 0;
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
 * session.history's result as JSON text (a new NUL-terminated buffer,
 * *len bytes), or NULL if the history cannot be read back. The messages
 * are spliced in as they are kept (hist_encode's compact JSON text, one
 * per line, checked as they were read back), not parsed and encoded
 * again: a page of 4 MiB is a copy, not 40 ms of the loop.
 */
char *
session_history_text(struct session *s, size_t limit, uint64_t before,
    size_t *len)
{
	size_t	 end = s->nhist, start, i, total, bytes = 0, hlen, slen, n;
	size_t	 max = config_get()->client_queue_bytes / 2;
	char	*head, *sys, *buf;
	json_t	*o;

	if (hist_load(s) != 0)
		return NULL;
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
	o = json_pack("{s:s, s:I, s:I, s:b}", "session", s->id, "seq",
	    (json_int_t)s->announced, "total", (json_int_t)total, "more",
	    start > 0);
	head = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	o = s->system == NULL ? json_null() : json_pack("{s:s, s:s, s:s, s:I}",
	    "role", "system", "content", s->system, "env", s->env, "seq",
	    (json_int_t)s->system_seq);
	sys = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(o);
	if (head == NULL || sys == NULL)
		fatalx("session %s: its history cannot be encoded", s->id);
	hlen = strlen(head) - 1;		/* without its '}' */
	slen = strlen(sys);
	n = hlen + sizeof ",\"messages\":[" - 1 + bytes + (end - start) +
	    sizeof "],\"system\":" - 1 + slen + 2;
	buf = xmalloc(n);
	memcpy(buf, head, hlen);
	*len = hlen;
	memcpy(buf + *len, ",\"messages\":[", sizeof ",\"messages\":[" - 1);
	*len += sizeof ",\"messages\":[" - 1;
	for (i = start; i < end; i++) {
		if (i > start)
			buf[(*len)++] = ',';
		memcpy(buf + *len, s->hist[i].json, s->hist[i].len);
		*len += s->hist[i].len;
	}
	memcpy(buf + *len, "],\"system\":", sizeof "],\"system\":" - 1);
	*len += sizeof "],\"system\":" - 1;
	memcpy(buf + *len, sys, slen);
	*len += slen;
	buf[(*len)++] = '}';
	buf[*len] = '\0';
	free(head);
	free(sys);
	return buf;
}

/*
 * Every history message from index from on, parsed (new reference), or
 * NULL if the history cannot be read back from its side file.
 */
json_t *
session_messages(struct session *s, size_t from)
{
	json_t		*a, *m;
	json_error_t	 jerr;
	size_t		 i;

	if (hist_load(s) != 0)
		return NULL;
	a = json_array();
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
	/* An old message may be only in the side file. */
	if (s->hist_base > 0 && (s->nhist == s->hist_base ||
	    s->hist[0].seq > r->seq) && hist_load(s) != 0)
		i = s->hist_base;
	else
		i = s->nhist;
	for (; i > s->hist_base; i--) {
		if (hist_at(s, i - 1)->seq != r->seq)
			continue;
		m = hist_parse(hist_at(s, i - 1), &jerr);
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
