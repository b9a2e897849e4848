/*
 * gbrctl acp's connection to gbrd (see ctl-acp.c for the whole agent):
 * connecting (starting gbrd if nobody answers), sending requests without
 * blocking, reading gbrd's lines and routing them (replies to the call
 * that waits, events to acp-update.c), and losing the connection: every
 * call still waiting is answered then, every prompt in flight fails, and
 * the sessions are attached again, from the last event seen, on the next
 * connection.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp-int.h"
#include "client.h"
#include "frame.h"
#include "jsonrpc.h"
#include "transport.h"
#include "xmalloc.h"

/* Connects to gbrd, starting it under the start lock if nobody answers. */
int
acp_connect(struct acp *a, char **cause, int *unreachable)
{
	struct client	*cl;
	json_t		*max;
	char		 name[64];

	snprintf(name, sizeof name, "gbrctl-acp/%s", PACKAGE_VERSION);
	cl = client_connect(a->ctl->socket, CLIENT_AUTOSTART, name, cause,
	    unreachable);
	if (cl == NULL)
		return -1;
	/* Nothing is read ahead: gbrd sends nothing unasked yet. */
	max = json_object_get(json_object_get(client_hello(cl), "limits"),
	    "max_line_bytes");
	a->dmax_line = json_is_integer(max) && json_integer_value(max) > 0 ?
	    (size_t)json_integer_value(max) : 1024 * 1024;
	a->cl = cl;
	a->dfd = client_fd(cl);
	(void)transport_set_nonblock(a->dfd);
	a->dframe = frame_create(ACP_DAEMON_LINE_MAX);
	a->next_did = ACP_FIRST_DID;
	return 0;
}

/*
 * Connects again after gbrd went away, and attaches the sessions again
 * from the last event each saw. Returns 0 or -1 with *cause.
 */
int
acp_ensure(struct acp *a, char **cause)
{
	struct acp_sess	*s;
	int		 unreachable;

	*cause = NULL;
	if (a->cl != NULL)
		return 0;
	if (acp_connect(a, cause, &unreachable) != 0) {
		acp_log("cannot reach gbrd: %s", *cause);
		return -1;
	}
	acp_log("connected to gbrd again");
	TAILQ_FOREACH(s, &a->sessions, entry) {
		acp_call(a, ACP_D_ATTACH, s->id, NULL, "session.attach",
		    json_pack("{s:s, s:I}", "session", s->id, "after_seq",
		    (json_int_t)s->seq));
	}
	return 0;
}

/* Frees a call record. */
void
acp_call_free(struct acp *a, struct acp_call *c)
{
	TAILQ_REMOVE(&a->calls, c, entry);
	a->ncalls--;
	json_decref(c->id);
	json_decref(c->data);
	free(c);
}

/*
 * Sends a request to gbrd for the editor's request id (may be NULL) about
 * session sess (may be NULL). Steals params. Returns the call, or NULL
 * after answering id with the error when it cannot go.
 */
struct acp_call *
acp_call(struct acp *a, enum acp_call_kind kind, const char *sess, json_t *id,
    const char *method, json_t *params)
{
	struct acp_call	*c;
	json_t		*req;
	size_t		 len;
	char		*why;

	if (a->ncalls >= ACP_CALLS_MAX) {
		json_decref(params);
		if (id != NULL)
			acp_error(a, id, RPC_INTERNAL_ERROR, "busy", "%u requests "
			    "already wait on gbrd", a->ncalls);
		return NULL;
	}
	if (acp_ensure(a, &why) != 0) {
		json_decref(params);
		if (id != NULL)
			acp_error(a, id, RPC_INTERNAL_ERROR, "unavailable",
			    "cannot reach gbrd: %s", why);
		free(why);
		return NULL;
	}
	req = rpc_request(a->next_did, method, params);
	len = mcp_buf_add_json(&a->dout, req);
	json_decref(req);
	if (len > a->dmax_line) {
		/* Taken back (the last len bytes) before any was written. */
		a->dout.len -= len;
		if (id != NULL)
			acp_error(a, id, RPC_INVALID_PARAMS, "too_large", "the "
			    "request is %zu bytes encoded; gbrd takes at most %zu",
			    len, a->dmax_line);
		return NULL;
	}
	c = xcalloc(1, sizeof *c);
	c->kind = kind;
	c->did = a->next_did++;
	c->id = id != NULL ? json_incref(id) : NULL;
	if (sess != NULL)
		snprintf(c->sess, sizeof c->sess, "%s", sess);
	TAILQ_INSERT_TAIL(&a->calls, c, entry);
	a->ncalls++;
	return c;
}

/* Framer callback: one line from gbrd. */
static int
acp_daemon_line(void *arg, const char *line, size_t len)
{
	struct acp	*a = arg;
	struct acp_call	*c;
	struct rpc_msg	 msg;
	json_t		*err, *id;

	if (rpc_parse_from_daemon(line, len, &msg, &err) != 0) {
		json_decref(err);
		acp_log("gbrd sent a line that is not JSON-RPC");
		return 0;
	}
	if (msg.kind == RPC_RESPONSE) {
		id = json_object_get(msg.root, "id");
		TAILQ_FOREACH(c, &a->calls, entry) {
			if (json_is_integer(id) && json_integer_value(id) ==
			    c->did)
				break;
		}
		if (c != NULL) {
			acp_daemon_reply(a, c, msg.root);
			acp_call_free(a, c);
		}
	} else if (msg.method != NULL && strcmp(msg.method, "event") == 0)
		acp_event(a, msg.params);
	rpc_msg_release(&msg);
	return 0;
}

/*
 * gbrd went away. The calls waiting are answered with an error, the
 * prompts in flight fail (whether their turn goes on is for gbrd to say
 * when it is back), and the permission requests are dropped: gbrd
 * withdraws nothing the agent asked (those approvals belong to the turn
 * and stay in its log), so a terminal can still decide them.
 */
void
acp_daemon_lost(struct acp *a, const char *why)
{
	struct acp_call	*c;
	struct acp_sess	*s;
	struct acp_perm	*p;

	acp_log("lost gbrd: %s", why);
	while ((c = TAILQ_FIRST(&a->calls)) != NULL) {
		if (c->id != NULL)
			acp_error(a, c->id, RPC_INTERNAL_ERROR, "unavailable",
			    "gbrd closed the connection: %s", why);
		acp_call_free(a, c);
	}
	TAILQ_FOREACH(s, &a->sessions, entry) {
		s->attached = 0;
		if (s->prompt_id != NULL) {
			acp_error(a, s->prompt_id, RPC_INTERNAL_ERROR,
			    "unavailable", "gbrd closed the connection during "
			    "the turn (%s); see `gbrctl history %s`", why, s->id);
			json_decref(s->prompt_id);
			s->prompt_id = NULL;
		}
	}
	while ((p = TAILQ_FIRST(&a->perms)) != NULL) {
		acp_notify(a, "$/cancel_request", json_pack("{s:I}",
		    "requestId", (json_int_t)p->rid));
		acp_perm_free(a, p);
	}
	client_free(a->cl);
	a->cl = NULL;
	a->dfd = -1;
	frame_free(a->dframe);
	a->dframe = NULL;
	mcp_buf_release(&a->dout);
}

/* Reads what gbrd sent. */
void
acp_daemon_read(struct acp *a)
{
	char	buf[ACP_READ_CHUNK];
	ssize_t	n;

	n = transport_read(a->dfd, buf, sizeof buf);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		acp_daemon_lost(a, strerror(errno));
		return;
	}
	if (n == 0) {
		acp_daemon_lost(a, "end of stream");
		return;
	}
	if (frame_feed(a->dframe, buf, (size_t)n, acp_daemon_line, a) ==
	    FRAME_TOO_LARGE)
		acp_daemon_lost(a, "it sent an over-long line");
}
