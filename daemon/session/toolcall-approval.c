/*
 * A tool call's way through a human (see toolcall.h, steps 3 to 5): the
 * policy's decision (policy.h) turned into an approval, a session grant,
 * or a run; the approval a call waits for and the waiters told about it;
 * the pin of a file change kept with the approval, so what runs is what
 * the human saw, a restart included; what approval.c calls back once a
 * human decides; and the calls adopted from approvals of an earlier run.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approval.h"
#include "conn.h"
#include "diff.h"
#include "jsonrpc.h"
#include "log.h"
#include "policy.h"
#include "sandbox.h"
#include "session.h"
#include "tool.h"
#include "toolcall-int.h"
#include "xmalloc.h"

/* Sends the approval.requested event to a waiter's connection if it is not attached. */
void
tc_notify(struct toolcall *c, struct tc_waiter *w)
{
	struct session	*s = session_find(c->session);
	json_t		*msg;

	w->notified = 1;
	if (c->event == NULL)
		return;
	if (w->on_approval != NULL)
		w->on_approval(w->arg, json_object_get(c->event, "approval"));
	if (w->conn != NULL && !conn_closing(w->conn) &&
	    (s == NULL || !session_is_attached(s, w->conn))) {
		msg = rpc_notification("event", json_incref(c->event));
		conn_send(w->conn, msg);
		json_decref(msg);
	}
}

/* Finds the call waiting for an approval. */
static struct toolcall *
tc_find_approval(const char *id)
{
	struct toolcall	*c;

	TAILQ_FOREACH(c, &tc_calls, entry)
		if (strcmp(c->approval, id) == 0 && c->state != TC_DONE)
			return c;
	return NULL;
}

/* A call for an approval nobody waits on in this run (after a restart). */
struct toolcall *
tc_adopt(struct approval *a)
{
	struct toolcall	*c;

	c = tc_new(approval_session(a), approval_call_id(a), approval_tool(a),
	    approval_args(a), approval_request_id(a), approval_turn(a), 0);
	snprintf(c->approval, sizeof c->approval, "%s", approval_id(a));
	c->state = approval_state(a) == APPROVAL_PENDING ||
	    approval_state(a) == APPROVAL_INTERRUPTED ? TC_WAITING :
	    TC_APPLYING;
	if (c->state == TC_WAITING) {
		c->event = json_pack("{s:s, s:s, s:o}", "session",
		    approval_session(a), "type", "approval.requested",
		    "approval", approval_json(a));
	}
	return c;
}

/* The approval.requested event is out: tell the waiters. */
static void
tc_asked(void *arg, int error, json_t *payload)
{
	struct toolcall		*c = arg;
	struct tc_waiter	*w;

	if (error != 0) {
		/* The log failed: approvals take no more changes; end the call. */
		tc_complete(c, 0, GBR_ERR_STORAGE, "the approval could not be "
		    "written to the disk log", NULL, NULL);
		return;
	}
	json_decref(c->event);
	c->event = json_incref(payload);
	if (c->state != TC_WAITING)
		return;		/* decided already */
	for (w = c->waiters; w != NULL; w = w->next)
		if (!w->notified)
			tc_notify(c, w);
}

/* Suspends a call on a new approval. */
static void
tc_ask(struct toolcall *c, struct approval_req *req)
{
	struct gbr_error	err;

	req->session = c->session;
	req->call_id = c->call_id;
	req->tool = c->tool;
	req->args = c->args;
	req->request_id = c->rid;
	req->turn = c->turn;
	c->state = TC_WAITING;
	if (approval_create(req, c->approval, tc_asked, c, &err) != 0) {
		c->approval[0] = '\0';
		tc_record_result(c, 1, err.kind, err.message, err.data);
		gbr_error_clear(&err);
	}
}

/*
 * A pin in the form the approval.requested record keeps (new reference):
 * device and inode as decimal strings (they may not fit a JSON integer),
 * times as [seconds, nanoseconds], the hash in hex.
 */
static json_t *
tc_pin_json(const struct sandbox_pin *pin)
{
	char	 n[32], hex[SHA256_HEX];
	json_t	*o;

	o = json_pack("{s:s, s:s, s:s, s:b}", "root", pin->root, "path",
	    pin->rel, "asked", pin->asked, "exists", pin->exists);
	snprintf(n, sizeof n, "%" PRIu64, pin->dev);
	json_object_set_new(o, "dev", json_string(n));
	snprintf(n, sizeof n, "%" PRIu64, pin->ino);
	json_object_set_new(o, "ino", json_string(n));
	if (!pin->exists)
		return o;
	json_object_set_new(o, "size", json_integer((json_int_t)pin->size));
	json_object_set_new(o, "mtime", json_pack("[I, I]",
	    (json_int_t)pin->mtime.tv_sec, (json_int_t)pin->mtime.tv_nsec));
	json_object_set_new(o, "ctime", json_pack("[I, I]",
	    (json_int_t)pin->ctime.tv_sec, (json_int_t)pin->ctime.tv_nsec));
	if (pin->hashed) {
		sha256_hex(pin->sha256, hex);
		json_object_set_new(o, "sha256", json_string(hex));
	}
	return o;
}

/* The value of a lowercase hex digit, or -1. */
static int
tc_hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* A decimal string of a pin (dev, ino). Returns 0 or -1. */
static int
tc_pin_u64(json_t *o, const char *key, uint64_t *v)
{
	const char		*s = json_string_value(json_object_get(o, key));
	char			*end;
	unsigned long long	 n;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*v = (uint64_t)n;
	return 0;
}

/* A [seconds, nanoseconds] pair of a pin. Returns 0 or -1. */
static int
tc_pin_time(json_t *o, const char *key, struct timespec *ts)
{
	json_t		*a = json_object_get(o, key);
	json_int_t	 sec, nsec;

	if (json_unpack(a, "[II]", &sec, &nsec) != 0 || nsec < 0 ||
	    nsec >= 1000000000)
		return -1;
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)nsec;
	return 0;
}

/*
 * Reads a pin back from an approval (tc_pin_json's form). Returns 0 with
 * *pin filled (caller releases), or -1 (absent or malformed: the write is
 * then refused, never let through unpinned).
 */
static int
tc_pin_parse(json_t *o, struct sandbox_pin *pin)
{
	const char	*hex;
	json_t		*v;
	size_t		 i;
	int		 hi, lo;

	memset(pin, 0, sizeof *pin);
	if (!json_is_object(o) || json_string_value(json_object_get(o,
	    "root")) == NULL || json_string_value(json_object_get(o,
	    "path")) == NULL || json_string_value(json_object_get(o,
	    "asked")) == NULL || !json_is_boolean(json_object_get(o, "exists")) ||
	    tc_pin_u64(o, "dev", &pin->dev) != 0 ||
	    tc_pin_u64(o, "ino", &pin->ino) != 0)
		return -1;
	pin->exists = json_is_true(json_object_get(o, "exists"));
	if (pin->exists) {
		v = json_object_get(o, "size");
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    tc_pin_time(o, "mtime", &pin->mtime) != 0 ||
		    tc_pin_time(o, "ctime", &pin->ctime) != 0)
			return -1;
		pin->size = (int64_t)json_integer_value(v);
		if ((hex = json_string_value(json_object_get(o,
		    "sha256"))) != NULL) {
			if (strlen(hex) != 2 * SHA256_LEN)
				return -1;
			for (i = 0; i < SHA256_LEN; i++) {
				hi = tc_hexval(hex[2 * i]);
				lo = tc_hexval(hex[2 * i + 1]);
				if (hi == -1 || lo == -1)
					return -1;
				pin->sha256[i] = (unsigned char)(hi << 4 | lo);
			}
			pin->hashed = 1;
		}
	}
	pin->root = xstrdup(json_string_value(json_object_get(o, "root")));
	pin->rel = xstrdup(json_string_value(json_object_get(o, "path")));
	pin->asked = xstrdup(json_string_value(json_object_get(o, "asked")));
	return 0;
}

/* What approval.h calls each reason to ask (policy.h's enum policy_why). */
static enum approval_why
tc_why(enum policy_why why)
{
	switch (why) {
	case POLICY_WHY_ASK_COMMAND:
		return APPROVAL_WHY_ASK_COMMAND;
	case POLICY_WHY_ASK_TOOL:
		return APPROVAL_WHY_ASK_TOOL;
	case POLICY_WHY_ENV_DIR:
		return APPROVAL_WHY_ENV_DIR;
	case POLICY_WHY_COMMAND_CHANGE:
		return APPROVAL_WHY_COMMAND_CHANGE;
	case POLICY_WHY_WRITE_PROTECTED:
		return APPROVAL_WHY_WRITE_PROTECTED;
	case POLICY_WHY_UNCONFINED:
		return APPROVAL_WHY_UNCONFINED;
	case POLICY_WHY_MCP_TOOL:
		return APPROVAL_WHY_MCP_TOOL;
	case POLICY_WHY_PROTECTED_PATH:
	default:
		return APPROVAL_WHY_PROTECTED_PATH;
	}
}

/* Starts a call that was checked and recorded: deny, ask or run. */
void
tc_begin(struct toolcall *c, struct env *env, struct sandbox *sb)
{
	struct policy_decision	 d;
	struct approval_req	 req;
	const struct tool_def	*def;
	const char		*g;

	if ((def = tool_lookup(c->session, c->tool)) == NULL) {
		/* An MCP server's tool that went away since the check. */
		tc_record_result(c, 1, GBR_ERR_METHOD_NOT_FOUND, "the tool is "
		    "gone (its MCP server changed its tools)", NULL);
		return;
	}
	switch (policy_decide(env, sb, def, c->args, (c->flags &
	    TOOLCALL_ASK_ALWAYS) ? POLICY_ASK_ALWAYS : 0, &d)) {
	case POLICY_DENY:
		tc_record_result(c, 1, d.kind, d.reason, d.data);
		break;
	case POLICY_ASK:
		if (d.why != POLICY_WHY_ENV_DIR && (g = approval_grant_find(
		    c->session, c->tool, d.path, d.command)) != NULL) {
			/*
			 * A session grant: a human already said yes to this
			 * tool on this canonical path (found by what the path
			 * resolves to now). The write is pinned to what was
			 * just checked, so a link swapped in before it runs
			 * cannot redirect it.
			 */
			c->grant = xstrdup(g);
			log_info("session %s: %s allowed by grant %s",
			    c->session, c->tool, g);
			tc_run(c, c->tool, c->args, 1, d.pin.rel != NULL ?
			    &d.pin : NULL);
			break;
		}
		memset(&req, 0, sizeof req);
		req.why = tc_why(d.why);
		req.effect = d.effect;
		req.path = d.path;
		req.command = d.command;
		req.diff = d.diff;
		req.proposed = d.proposed;
		req.proposed_len = d.proposed_len;
		req.pin = d.pin.rel != NULL ? tc_pin_json(&d.pin) : NULL;
		tc_ask(c, &req);
		json_decref(req.pin);
		break;
	case POLICY_ALLOW:
		tc_run(c, c->tool, c->args, 0, NULL);
		break;
	}
	policy_decision_release(&d);
}

/* A connection closed: withdraw what only it was waiting for. */
void
toolcall_conn_closed(struct conn *conn)
{
	struct toolcall		*c, *next;
	struct tc_waiter	*w;
	int			 hit, alive;

	for (c = TAILQ_FIRST(&tc_calls); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		hit = alive = 0;
		for (w = c->waiters; w != NULL; w = w->next) {
			if (w->conn == conn) {
				conn_unref(w->conn);
				w->conn = NULL;
				hit = 1;
			}
			if (w->conn != NULL || !w->had_conn)
				alive = 1;
		}
		if (hit && !alive && c->state == TC_WAITING &&
		    c->approval[0] != '\0') {
			log_info("session %s: the caller of %s left; approval "
			    "%s withdrawn", c->session, c->call_id, c->approval);
			approval_withdraw(c->approval, "the caller disconnected "
			    "before a human decided");
		}
	}
}

/* approval.c: an approved or edited approval must run now. */
static void
tc_apply_hook(const char *id)
{
	struct approval		*a = approval_get(id);
	struct toolcall		*c;
	struct sandbox_pin	 pin;
	const char		*content, *proposed;
	json_t			*args;
	size_t			 len, plen;
	int			 pinned;

	if (a == NULL)
		return;
	if ((c = tc_find_approval(id)) == NULL)
		c = tc_adopt(a);
	c->state = TC_APPLYING;
	/*
	 * A file change applies to what the human was shown, kept with the
	 * approval (a restart included); one without a pin is refused by
	 * the sandbox (changed_since_approval), never written unpinned.
	 */
	pinned = tc_pin_parse(approval_pin(a), &pin) == 0;
	if ((content = approval_content(a, &len)) != NULL) {
		/* Edit: the human's content, written as write_file would. */
		c->edited = 1;
		if ((proposed = approval_proposed(a, &plen)) != NULL) {
			free(c->human_diff);
			c->human_diff = diff_unified(json_string_value(
			    json_object_get(approval_args(a), "path")) != NULL ?
			    json_string_value(json_object_get(approval_args(a),
			    "path")) : "file", proposed, plen, content, len,
			    TC_HUMAN_DIFF_MAX, NULL);
		}
		args = json_pack("{s:O, s:s%}", "path", json_object_get(
		    approval_args(a), "path"), "content", content, len);
		tc_run(c, "write_file", args, 1, pinned ? &pin : NULL);
		json_decref(args);
	} else
		tc_run(c, c->tool, c->args, 1, pinned ? &pin : NULL);
	sandbox_pin_release(&pin);
}

/* approval.c: an approval ended without running. */
static void
tc_closed_hook(const char *id)
{
	struct approval	*a = approval_get(id);
	struct toolcall	*c;
	const char	*why;
	char		*msg;
	json_t		*data;
	enum gbr_err	 kind;

	if (a == NULL)
		return;
	if ((c = tc_find_approval(id)) == NULL)
		c = tc_adopt(a);
	why = approval_reason(a);
	data = json_pack("{s:s, s:o}", "approval_id", id, "reason",
	    why != NULL ? json_string(why) : json_null());
	switch (approval_state(a)) {
	case APPROVAL_DENIED:
		kind = GBR_ERR_DENIED;
		msg = xasprintf("a human denied this call%s%s", why != NULL ?
		    ": " : "", why != NULL ? why : "");
		break;
	case APPROVAL_EXPIRED:
		kind = GBR_ERR_EXPIRED;
		msg = xstrdup("nobody decided on this call in time");
		break;
	default:
		kind = GBR_ERR_CANCELLED;
		msg = xasprintf("the approval was withdrawn: %s", why != NULL ?
		    why : "the caller left");
		break;
	}
	tc_record_result(c, 1, kind, msg, data);
	free(msg);
	json_decref(data);
}

const struct approval_hooks tc_approval_hooks = {
	tc_apply_hook, tc_closed_hook
};
