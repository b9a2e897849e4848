/*
 * Turns. A turn starts when the user's message is appended (session_send)
 * and is the agent loop's once the running state is announced: the agent
 * registers itself with session_set_turn_ops, so the session layer never
 * calls up into it. The agent reads the history (session_messages),
 * streams live-only events (session_live: fanned out in order with the
 * records, never logged), appends messages and ends the turn
 * (session_end_turn). With no provider configured at all the turn is a
 * stub that ends with a no_provider error event, after the delay of the
 * GBR_TEST_TURN_MS hook (fault.c; session_init reads it).
 *
 * This file owns the turn ops, the stub turn and its timer, and the calls
 * that move a turn along: cancel, end, resume after a restart, adopt. The
 * states themselves change only through records (session-log.c).
 */
#include "gbr-config.h"

#include <string.h>

#include <event2/event.h>

#include "disklog.h"
#include "log.h"
#include "session.h"
#include "session-int.h"

#define SESSION_NO_PROVIDER \
	"No LLM provider is configured yet, so the agent cannot answer. " \
	"Set GEMINI_API_KEY, OPENAI_API_KEY (with OPENAI_BASE_URL for another " \
	"OpenAI-compatible server) or ANTHROPIC_API_KEY in gbrd's environment " \
	"and restart gbrd; or set [llm] provider and key_file (mode 0600) in " \
	"gbrd.conf; or [llm] base_url in the profile for a local server; or " \
	"start Ollama on 127.0.0.1:11434. Your message is kept in the session " \
	"history; tools work through tool.call."

/* Who takes a running turn (the agent), from session_set_turn_ops. */
static struct session_turn_ops	session_turn_ops;

/* Registers who takes running turns. */
void
session_set_turn_ops(const struct session_turn_ops *ops)
{
	session_turn_ops = *ops;
}

/* Stops whatever runs the session's turn (its model stream, tool, timers). */
void
session_turn_cancel(struct session *s)
{
	if (session_turn_ops.cancel != NULL)
		session_turn_ops.cancel(s);
}

static void	session_turn_timer_cb(evutil_socket_t, short, void *);

/* Arms the turn timer. */
static void
session_turn_timer(struct session *s, unsigned ms)
{
	struct timeval	tv;

	if (s->turn_ev == NULL &&
	    (s->turn_ev = evtimer_new(session_base, session_turn_timer_cb, s)) == NULL)
		fatalx("evtimer_new failed");
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(s->turn_ev, &tv);
}

/*
 * The stub turn ends: no provider yet. If the log cannot take the records
 * now (it is full or failing), the turn keeps running and this is tried
 * again shortly: memory only changes with a record.
 */
static void
session_turn_end(struct session *s, uint64_t turn)
{
	json_t	*p;

	if (s->state != SESSION_RUNNING || s->turn != turn || s->broken)
		return;
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
	if (s->turn_erred != turn) {
		p = session_payload(s, "error");
		json_object_set_new(p, "turn", json_integer((json_int_t)turn));
		json_object_set_new(p, "kind", json_string("no_provider"));
		json_object_set_new(p, "message", json_string(SESSION_NO_PROVIDER));
		if (session_record(&s, "session.error", p, 0) == NULL)
			goto retry;
		s->turn_erred = turn;
	}
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("idle"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "outcome", json_string("no_provider"));
	if (session_record(&s, "session.state", p, 0) == NULL)
		goto retry;
	return;
retry:
	log_warn("session %s: the disk log refused the end of turn %llu (%s); "
	    "retrying", s->id, (unsigned long long)turn, strerror(disklog_error()));
	session_turn_timer(s, 100);
}

/* The stub turn's timer fired. */
static void
session_turn_timer_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s = arg;

	session_turn_end(s, s->turn);
	session_settle(s);
}

/*
 * No provider: the stub turn (GBR_TEST_TURN_MS keeps it running that
 * long), which ends with a no_provider error.
 */
void
session_turn_stub(struct session *s, uint64_t turn)
{
	if (s->state != SESSION_RUNNING || s->turn != turn)
		return;
	if (session_turn_ms == 0)
		session_turn_end(s, turn);
	else
		session_turn_timer(s, session_turn_ms);
}

/* The running state is announced: the agent loop takes the turn. */
void
session_turn_begin(struct session *s, uint64_t turn)
{
	if (s->state != SESSION_RUNNING || s->turn != turn)
		return;
	if (session_turn_ops.begin == NULL ||
	    session_turn_ops.begin(s, turn) != 0)
		session_turn_stub(s, turn);
}

/* Ends the running turn. */
int
session_cancel(struct session *s, session_done_cb cb, void *arg,
    struct gbr_error *err)
{
	struct pending	*pe;
	json_t		*p;

	if (s->state != SESSION_RUNNING && s->state != SESSION_AWAITING_APPROVAL) {
		session_answer(cb, arg, json_pack("{s:b, s:s}", "cancelled", 0,
		    "state", session_state_name(s->state)));
		return 0;
	}
	if (session_check_broken(s, err) != 0)
		return -1;
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("idle"));
	json_object_set_new(p, "turn", json_integer((json_int_t)s->turn));
	json_object_set_new(p, "outcome", json_string("cancelled"));
	if ((pe = session_record(&s, "session.state", p, 1)) == NULL)
		return session_fail_storage(err);
	/* The model's stream, the tool and the timers stop at once. */
	session_turn_cancel(s);
	pe->result = json_pack("{s:b, s:I}", "cancelled", 1,
	    "turn", (json_int_t)s->turn);
	pending_wait(pe, cb, arg, NULL);
	session_settle(s);
	return 0;
}

/* The session's state and its last turn. */
enum session_state
session_state(const struct session *s)
{
	return s->state;
}

uint64_t
session_turn(const struct session *s)
{
	return s->turn;
}

/*
 * Ends a turn: an error event first when kind is set, then the idle
 * session.state with outcome and fields (stolen: usage, check, ...).
 */
int
session_end_turn(struct session *s, uint64_t turn, const char *outcome,
    const char *kind, const char *message, json_t *fields,
    struct gbr_error *err)
{
	json_t	*p;

	if (session_check_broken(s, err) != 0) {
		json_decref(fields);
		return -1;
	}
	if (s->turn != turn || (s->state != SESSION_RUNNING &&
	    s->state != SESSION_AWAITING_APPROVAL &&
	    s->state != SESSION_INTERRUPTED)) {
		json_decref(fields);
		return 0;	/* cancelled or closed meanwhile */
	}
	if (s->turn_ev != NULL)
		evtimer_del(s->turn_ev);
	if (kind != NULL && s->turn_erred != turn) {
		p = session_payload(s, "error");
		json_object_set_new(p, "turn", json_integer((json_int_t)turn));
		json_object_set_new(p, "kind", json_string(kind));
		json_object_set_new(p, "message", json_string(message != NULL ?
		    message : kind));
		if (session_record(&s, "session.error", p, 0) == NULL) {
			json_decref(fields);
			return session_fail_storage(err);
		}
		s->turn_erred = turn;
	}
	p = session_payload(s, "session.state");
	if (fields != NULL) {
		json_object_update_missing(p, fields);
		json_decref(fields);
	}
	json_object_set_new(p, "state", json_string("idle"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "outcome", json_string(outcome));
	if (session_record(&s, "session.state", p, 0) == NULL)
		return session_fail_storage(err);
	session_settle(s);
	return 0;
}

/*
 * A turn goes on (running again) after a restart left it interrupted or
 * waiting: an agent turn whose approval a human decided after the restart.
 */
int
session_resume_turn(struct session *s, uint64_t turn, const char *why,
    struct gbr_error *err)
{
	json_t	*p;

	if (session_check_broken(s, err) != 0)
		return -1;
	if (s->turn != turn || s->state != SESSION_INTERRUPTED)
		return 0;
	p = session_payload(s, "session.state");
	json_object_set_new(p, "state", json_string("running"));
	json_object_set_new(p, "turn", json_integer((json_int_t)turn));
	json_object_set_new(p, "reason", json_string(why));
	if (session_record(&s, "session.state", p, 0) == NULL)
		return session_fail_storage(err);
	session_settle(s);
	return 0;
}

/*
 * A turn that waited for a human when gbrd stopped is taken up again by
 * the agent (agent_recover): once no approval waits, it goes back to
 * running rather than to interrupted (memory only: a later restart
 * decides again).
 */
void
session_adopt_turn(struct session *s)
{
	if (s->state == SESSION_AWAITING_APPROVAL &&
	    s->prev_state == SESSION_INTERRUPTED)
		s->prev_state = SESSION_RUNNING;
}
