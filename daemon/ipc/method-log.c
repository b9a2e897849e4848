/*
 * The disk log's methods: log.read (a page of records; with follow: true,
 * every later record afterwards as a log.record event until the client
 * goes) and log.append (records of type "user.*" from clients, acknowledged
 * only once written, or fsynced when durable).
 *
 * Followers are owned here. Each holds a reference to its connection and
 * the next seq it must get. Live records come by value from the disk log's
 * watch and are framed once for all followers; a follower that is behind
 * (it just attached, or records were done before the watch had copies)
 * catches up with reads from the files, one bounded page at a time. A
 * follower that does not read is evicted by its connection's bounded
 * queue, never buffered here.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "disklog.h"
#include "dispatch.h"
#include "jsonrpc.h"
#include "log.h"
#include "logfmt.h"
#include "methods.h"
#include "xmalloc.h"

#define LOG_READ_DEFAULT	100
#define LOG_READ_MAX		1000
/* Data bytes in one log.read reply (at least one record always goes). */
#define LOG_READ_BYTES		(4U * 1024 * 1024)
/* Data bytes in one catch-up page for a follower. */
#define LOG_FOLLOW_BYTES	(1024U * 1024)
/* Largest data a client may append, as compact JSON. */
#define LOG_APPEND_MAX		(256U * 1024)
/* The prefix of client record types. */
#define LOG_USER_PREFIX		"user."

struct follower {
	struct conn		*c;		/* counted reference */
	uint64_t		 next_seq;	/* the next record it must get */
	int			 reading;	/* a read is in flight */
	int			 gone;		/* its connection closed */
	LIST_ENTRY(follower)	 entry;
};

struct log_read {
	struct request		*req;
	struct follower		*f;		/* for follow: true */
	uint64_t		 after;
};

static LIST_HEAD(, follower) log_followers = LIST_HEAD_INITIALIZER(log_followers);
static unsigned	log_nfollowers;
static int	log_walking;		/* the list is being walked */

static void	log_watch_cb(void *, uint64_t, int64_t, const char *, size_t,
		    const char *, size_t);

/* Frees a follower that has left the list. */
static void
log_follower_free(struct follower *f)
{
	conn_unref(f->c);
	free(f);
}

/* Takes a follower off the list; freed now unless a read still holds it. */
static void
log_follower_drop(struct follower *f)
{
	f->gone = 1;
	if (log_walking)
		return;		/* the walk sweeps it */
	LIST_REMOVE(f, entry);
	log_nfollowers--;
	if (log_nfollowers == 0)
		disklog_watch(NULL, NULL);
	if (!f->reading)
		log_follower_free(f);
}

/* Removes followers marked gone during a walk. */
static void
log_sweep(void)
{
	struct follower	*f, *next;

	for (f = LIST_FIRST(&log_followers); f != NULL; f = next) {
		next = LIST_NEXT(f, entry);
		if (f->gone)
			log_follower_drop(f);
	}
}

/* Sends one record (a JSON object) to a follower; drops it if it is gone. */
static int
log_send_record(struct follower *f, json_t *rec)
{
	json_t	*ev;
	int	 r;

	ev = rpc_notification("event", json_pack("{s:s, s:O, s:O}", "type",
	    "log.record", "seq", json_object_get(rec, "seq"), "record", rec));
	r = conn_send(f->c, ev);
	json_decref(ev);
	if (r != 0)
		f->gone = 1;
	return r;
}

static void	log_follow_read_cb(void *, int, const struct disklog_page *);

/* Starts a catch-up read if the follower is behind the log. */
static void
log_pump(struct follower *f)
{
	if (f->reading || f->gone || f->next_seq > disklog_done_seq())
		return;
	if (disklog_read(f->next_seq - 1, LOG_READ_MAX, LOG_FOLLOW_BYTES,
	    log_follow_read_cb, f) != 0) {
		f->gone = 1;
		return;
	}
	f->reading = 1;
}

/* A catch-up page arrived: send it, then read on or go live. */
static void
log_follow_read_cb(void *arg, int error, const struct disklog_page *page)
{
	struct follower	*f = arg;
	json_t		*rec, *ev;
	size_t		 i;

	f->reading = 0;
	if (f->gone) {
		/* It left the list while the read was out: ours to free. */
		log_follower_free(f);
		return;
	}
	log_walking++;
	if (error != 0) {
		ev = rpc_notification("event", json_pack("{s:s, s:s, s:i, s:s}",
		    "type", "error", "kind", "storage_error", "errno", error,
		    "message", strerror(error)));
		conn_send(f->c, ev);
		json_decref(ev);
		conn_close_after_flush(f->c, "log follow failed");
		f->gone = 1;
	} else {
		if (page->gap) {
			/* Records it asked for were dropped after a snapshot. */
			ev = rpc_notification("event", json_pack("{s:s, s:I, s:I}",
			    "type", "log.gap", "from", (json_int_t)f->next_seq,
			    "first_seq", (json_int_t)page->first_seq));
			if (conn_send(f->c, ev) != 0)
				f->gone = 1;
			json_decref(ev);
			if (f->next_seq < page->first_seq)
				f->next_seq = page->first_seq;
		}
		json_array_foreach(page->records, i, rec) {
			if (f->gone || log_send_record(f, rec) != 0)
				break;
			f->next_seq = (uint64_t)json_integer_value(
			    json_object_get(rec, "seq")) + 1;
		}
		log_pump(f);
	}
	log_walking--;
	log_sweep();
}

/*
 * The disk log's watch: a record by value (framed once, sent to every
 * follower that is exactly there), or a tick after which followers that
 * are behind catch up from the files.
 */
static void
log_watch_cb(void *arg, uint64_t seq, int64_t ts_ms, const char *type,
    size_t type_len, const char *data, size_t data_len)
{
	struct follower	*f;
	char		*line = NULL;
	size_t		 len = 0;

	log_walking++;
	LIST_FOREACH(f, &log_followers, entry) {
		if (f->gone || f->reading)
			continue;
		if (type == NULL || f->next_seq < seq) {
			log_pump(f);
			continue;
		}
		if (f->next_seq != seq)
			continue;
		if (line == NULL) {
			/* Our own compact JSON: no raw newline can be inside. */
			line = xasprintf("{\"jsonrpc\":\"2.0\",\"method\":"
			    "\"event\",\"params\":{\"type\":\"log.record\","
			    "\"seq\":%" PRIu64 ",\"record\":{\"seq\":%" PRIu64
			    ",\"ts_ms\":%" PRId64 ",\"type\":\"%.*s\",\"data\":"
			    "%.*s}}}\n", seq, seq, ts_ms, (int)type_len, type,
			    (int)data_len, data);
			len = strlen(line);
		}
		if (conn_send_raw(f->c, line, len) != 0)
			f->gone = 1;
		else
			f->next_seq = seq + 1;
	}
	free(line);
	log_walking--;
	log_sweep();
}

/* The page for a log.read request: the reply, then following begins. */
static void
log_read_cb(void *arg, int error, const struct disklog_page *page)
{
	struct log_read	*r = arg;
	struct follower	*f = r->f;
	json_t		*last;

	if (error != 0) {
		request_error(r->req, GBR_ERR_STORAGE, json_pack("{s:i, s:s}",
		    "errno", error, "error", strerror(error)),
		    "cannot read the disk log: %s", strerror(error));
		if (f != NULL) {
			f->reading = 0;
			if (f->gone)
				log_follower_free(f);
			else
				log_follower_drop(f);
		}
		free(r);
		return;
	}
	request_reply(r->req, json_pack("{s:O, s:I, s:I, s:b, s:b, s:b}",
	    "records", page->records,
	    "first_seq", (json_int_t)page->first_seq,
	    "last_seq", (json_int_t)page->last_seq,
	    "more", page->more,
	    "gap", page->gap,
	    "following", f != NULL));
	if (f != NULL) {
		f->reading = 0;
		if (f->gone) {
			log_follower_free(f);
			free(r);
			return;
		}
		if ((last = json_array_get(page->records,
		    json_array_size(page->records) - 1)) != NULL)
			f->next_seq = (uint64_t)json_integer_value(
			    json_object_get(last, "seq")) + 1;
		else if (page->gap && f->next_seq < page->first_seq)
			f->next_seq = page->first_seq;
		log_walking++;
		log_pump(f);
		log_walking--;
		log_sweep();
	}
	free(r);
}

/* log.read {after_seq?, limit?, follow?} */
void
method_log_read(struct request *req, json_t *params)
{
	static const char *const keys[] = { "after_seq", "limit", "follow",
	    NULL };
	struct conn	*c = request_conn(req);
	struct follower	*f = NULL;
	struct log_read	*r;
	json_int_t	 after = 0, limit = LOG_READ_DEFAULT;
	int		 follow = 0;

	if (params_only(req, params, keys) != 0 ||
	    params_integer(req, params, "after_seq", 0, 0, INT64_MAX,
	    &after) != 0 ||
	    params_integer(req, params, "limit", 0, 1, LOG_READ_MAX,
	    &limit) != 0 ||
	    params_boolean(req, params, "follow", 0, &follow) != 0)
		return;
	if (follow) {
		LIST_FOREACH(f, &log_followers, entry) {
			if (f->c == c && !f->gone) {
				request_error(req, GBR_ERR_BUSY, NULL, "this "
				    "connection already follows the log");
				return;
			}
		}
	}
	r = xcalloc(1, sizeof *r);
	r->req = req;
	r->after = (uint64_t)after;
	if (disklog_read((uint64_t)after, (unsigned)limit, LOG_READ_BYTES,
	    log_read_cb, r) != 0) {
		free(r);
		request_error(req, GBR_ERR_SHUTTING_DOWN, NULL,
		    "the disk log is closed");
		return;
	}
	if (follow) {
		f = xcalloc(1, sizeof *f);
		f->c = c;
		conn_ref(c);
		f->next_seq = (uint64_t)after + 1;
		f->reading = 1;		/* until the reply has gone */
		LIST_INSERT_HEAD(&log_followers, f, entry);
		if (log_nfollowers++ == 0)
			disklog_watch(log_watch_cb, NULL);
		r->f = f;
	}
}

/* A log.append record is on disk (or failed). */
static void
log_append_done(void *arg, int error, uint64_t seq)
{
	struct request	*req = arg;

	if (error != 0) {
		request_error(req, GBR_ERR_STORAGE, json_pack("{s:i, s:s}",
		    "errno", error, "error", strerror(error)),
		    "the record could not be written: %s", strerror(error));
		return;
	}
	request_reply(req, json_pack("{s:I}", "seq", (json_int_t)seq));
}

/* log.append {type, data, durable?} */
void
method_log_append(struct request *req, json_t *params)
{
	static const char *const keys[] = { "type", "data", "durable", NULL };
	const char	*type = NULL;
	json_t		*data;
	int		 durable = 1, err;

	if (params_only(req, params, keys) != 0 ||
	    params_string(req, params, "type", 1, &type) != 0 ||
	    params_boolean(req, params, "durable", 0, &durable) != 0)
		return;
	if (strncmp(type, LOG_USER_PREFIX, strlen(LOG_USER_PREFIX)) != 0 ||
	    strlen(type) == strlen(LOG_USER_PREFIX) ||
	    !logfmt_type_valid(type, strlen(type))) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "type"), "type: must be \"user.\" followed by "
		    "[a-z0-9._-], at most %d bytes in all", LOGFMT_MAX_TYPE);
		return;
	}
	if ((data = json_object_get(params, "data")) == NULL) {
		request_error(req, GBR_ERR_INVALID_PARAMS, json_pack("{s:s}",
		    "field", "data"), "data: required");
		return;
	}
	if (disklog_append_bounded(type, data, durable, LOG_APPEND_MAX,
	    log_append_done, req) != 0)
		return;
	switch ((err = disklog_error())) {
	case EMSGSIZE:
		request_error(req, GBR_ERR_TOO_LARGE, json_pack("{s:s, s:I}",
		    "field", "data", "max_bytes", (json_int_t)LOG_APPEND_MAX),
		    "data: over %u bytes as JSON", LOG_APPEND_MAX);
		break;
	case EAGAIN:
		request_error(req, GBR_ERR_BUSY, NULL, "the disk log has too "
		    "much queued; try again");
		break;
	case ESHUTDOWN:
		request_error(req, GBR_ERR_SHUTTING_DOWN, NULL,
		    "the disk log is closed");
		break;
	default:
		request_error(req, GBR_ERR_STORAGE, json_pack("{s:i, s:s}",
		    "errno", err, "error", strerror(err)),
		    "the record was refused: %s", strerror(err));
		break;
	}
}

/* A connection closed: its follower goes. */
void
method_log_conn_closed(struct conn *c)
{
	struct follower	*f, *next;

	for (f = LIST_FIRST(&log_followers); f != NULL; f = next) {
		next = LIST_NEXT(f, entry);
		if (f->c == c && !f->gone)
			log_follower_drop(f);
	}
}

/* The number of followers, for daemon.status. */
unsigned
method_log_followers(void)
{
	return log_nfollowers;
}
