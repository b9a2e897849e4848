/*
 * Who hears a session's events: the connections attached to it, each
 * through a struct attach that holds a counted reference to the
 * connection. This file owns the attachments (per session and all of
 * them), the fan-out of an event line to every attached client (a client
 * that cannot take it is detached), and session.attach/detach. Right
 * after attaching, a client catches up on what it missed (catchup.c) and
 * gets no live events until then.
 *
 * A send can close a connection, which detaches it: while a session fans
 * out (s->fanning), detaching only marks the attachment dead, and the
 * fan-out unlinks the marked ones when it ends.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdlib.h>

#include "config.h"
#include "conn.h"
#include "jsonrpc.h"
#include "session.h"
#include "session-int.h"
#include "xmalloc.h"

#define SESSION_CONN_ATTACH_MAX	64	/* sessions one connection may attach */

static struct attach_list	 attach_all = TAILQ_HEAD_INITIALIZER(attach_all);
static unsigned			 attach_n;

/* Unlinks and frees an attachment, or marks it while its session fans out. */
void
attach_remove(struct attach *a)
{
	struct session	*s = a->s;

	if (a->cu != NULL)
		catchup_cancel(a);
	if (s->fanning > 0) {
		a->dead = 1;
		return;
	}
	TAILQ_REMOVE(&s->attached, a, sentry);
	TAILQ_REMOVE(&attach_all, a, gentry);
	s->nattached--;
	attach_n--;
	conn_unref(a->c);
	free(a);
	/* A closed session waits for its last catching-up client. */
	if (s->retired && s->nattached == 0)
		session_reap_schedule();
}

/* Unlinks the attachments marked during a fan-out. */
void
attach_sweep(struct session *s)
{
	struct attach	*a, *next;

	for (a = TAILQ_FIRST(&s->attached); a != NULL; a = next) {
		next = TAILQ_NEXT(a, sentry);
		if (a->dead)
			attach_remove(a);
	}
}

/* Queues one line to every attached client; the slow ones are detached. */
void
session_fanout(struct session *s, const char *line, size_t len)
{
	struct attach	*a;
	int		 dead = 0;

	s->fanning++;
	TAILQ_FOREACH(a, &s->attached, sentry) {
		/* One catching up gets this line from the ring or the log. */
		if (!a->dead && a->cu == NULL &&
		    conn_send_raw(a->c, line, len) != 0)
			a->dead = 1;
		dead |= a->dead;
	}
	if (--s->fanning == 0 && dead)
		attach_sweep(s);
}

/* Sends a client-local event (resync_required, replay_complete) to one connection. */
int
session_send_local(struct session *s, struct conn *c, json_t *payload)
{
	json_t	*msg = rpc_notification("event", payload);
	int	 r;

	r = conn_send(c, msg);
	json_decref(msg);
	return r;
}

/* Finds the attachment of a connection to a session. */
static struct attach *
attach_find(struct session *s, struct conn *c)
{
	struct attach	*a;

	TAILQ_FOREACH(a, &s->attached, sentry) {
		if (a->c == c && !a->dead)
			return a;
	}
	return NULL;
}

/* Counts a connection's attachments. */
static unsigned
attach_count(struct conn *c)
{
	struct attach	*a;
	unsigned	 n = 0;

	TAILQ_FOREACH(a, &attach_all, gentry) {
		if (a->c == c && !a->dead)
			n++;
	}
	return n;
}

/*
 * Attaches a connection: the reply, the missed events (from the ring, else
 * from the disk log), replay_complete, then live (catchup.c).
 */
int
session_attach(struct session *s, struct conn *c, int has_after,
    uint64_t after, session_done_cb cb, void *arg, struct gbr_error *err)
{
	const struct config	*cfg = config_get();
	struct attach		*a;
	json_t			*res;

	if (conn_closing(c))
		return gbr_error_set(err, GBR_ERR_INVALID_REQUEST, NULL,
		    "the connection is closing");
	if ((a = attach_find(s, c)) != NULL)
		attach_remove(a);	/* attaching again restarts the stream */
	else {
		if (s->nattached >= cfg->session_max_attached)
			return gbr_error_set(err, GBR_ERR_LIMIT_REACHED,
			    json_pack("{s:s, s:I}", "limit", "max_attached", "max",
			    (json_int_t)cfg->session_max_attached), "%u clients "
			    "are attached to session %s, the configured maximum",
			    s->nattached, s->id);
		if (attach_count(c) >= SESSION_CONN_ATTACH_MAX)
			return gbr_error_set(err, GBR_ERR_LIMIT_REACHED,
			    json_pack("{s:s, s:I}", "limit", "attach_per_connection",
			    "max", (json_int_t)SESSION_CONN_ATTACH_MAX), "this "
			    "connection is attached to %d sessions already",
			    SESSION_CONN_ATTACH_MAX);
	}
	res = json_pack("{s:o, s:I, s:I}", "session", session_info(s),
	    "seq", (json_int_t)s->announced, "first_seq",
	    (json_int_t)session_ring_first(s));
	session_answer(cb, arg, res);

	/*
	 * The attachment is linked at once but catching up: live events skip
	 * it until catchup_finish, which runs in the same callback that sends
	 * the newest event, so nothing can slip in between.
	 */
	a = xcalloc(1, sizeof *a);
	a->s = s;
	a->c = c;
	conn_ref(c);
	TAILQ_INSERT_TAIL(&s->attached, a, sentry);
	TAILQ_INSERT_TAIL(&attach_all, a, gentry);
	s->nattached++;
	attach_n++;
	catchup_start(a, has_after, after);
	return 0;
}

/* Detaches a connection from one session or from all. */
unsigned
session_detach(struct session *s, struct conn *c)
{
	struct attach	*a, *next;
	unsigned	 n = 0;

	for (a = TAILQ_FIRST(&attach_all); a != NULL; a = next) {
		next = TAILQ_NEXT(a, gentry);
		if (a->c != c || a->dead || (s != NULL && a->s != s))
			continue;
		attach_remove(a);
		n++;
	}
	return n;
}

/* A connection closed. */
void
session_conn_closed(struct conn *c)
{
	session_detach(NULL, c);
}

/* Tells whether a connection is attached to a session. */
int
session_is_attached(struct session *s, struct conn *c)
{
	return attach_find(s, c) != NULL;
}

/* Removes every attachment (session_shutdown), even in a fan-out. */
void
attach_remove_all(void)
{
	struct attach	*a;

	while ((a = TAILQ_FIRST(&attach_all)) != NULL) {
		a->s->fanning = 0;
		attach_remove(a);
	}
}

/* Who is attached to s: [{client, pid}] (hello's name, the peer's pid). */
json_t *
session_clients(struct session *s)
{
	struct attach	*a;
	json_t		*l = json_array();

	TAILQ_FOREACH(a, &s->attached, sentry)
		if (!a->dead)
			json_array_append_new(l, json_pack("{s:s, s:I}", "client",
			    conn_client(a->c), "pid", (json_int_t)conn_pid(a->c)));
	return l;
}

/* The number of attachments, for daemon.status. */
unsigned
attach_total(void)
{
	return attach_n;
}
