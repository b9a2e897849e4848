/*
 * toolcall: the one path every tool call takes, whoever asks. tool.call
 * (method-tool.c), the agent loop and the MCP bridge all go
 * through toolcall_start, so a call is checked, recorded, put to a human
 * and run the same way whatever started it.
 *
 * A call, in order:
 *   1. The session and the tool's arguments are checked (session_not_found,
 *      method_not_found, invalid_params): errors here are returned at once
 *      and nothing is recorded.
 *   2. A tool.call history message is appended to the session (unless
 *      TOOLCALL_NO_CALL_MESSAGE: the agent loop records its own assistant
 *      message that carries the call).
 *   3. The policy (policy.h decides), in this order (DESIGN.md 4):
 *        deny:  autonomy read-only refuses every writing or running tool
 *               but check (kind read_only, data {autonomy, tool});
 *               deny_commands (denied_command); a path the sandbox
 *               refuses (path_traversal, read_only, invalid_path, ...);
 *               an approved call is checked again when it runs;
 *        ask:   a write under .gbr_envs/ (always, whatever the autonomy
 *               or a grant says), a protected path, an ask_commands match,
 *               in supervised autonomy a tool named in ask_tools, and in
 *               full autonomy every command where nothing confines its
 *               writes (runner_unconfined: Windows); a session grant
 *               (approval.h) turns all but the first into allow;
 *        allow: everything else.
 *   4. An "ask" creates an approval (approval.h): it is durable in the disk
 *      log before anyone hears of it, the session goes to
 *      awaiting_approval, and the call is suspended (on_approval runs).
 *      Nothing blocks: the loop serves everyone else meanwhile.
 *   5. When a human decides: approve runs the tool exactly once (the
 *      approval records "applying", durably, before it runs and "applied"
 *      after); edit writes the human's content instead (write_file on the
 *      same path); deny, expiry or withdrawal end the call with the error
 *      kind denied, expired or cancelled.
 *   6. A tool.result history message is appended (it carries request_id,
 *      so a resend finds it), and once it is written the callback runs
 *      exactly once with the outcome.
 *
 * Callbacks follow libuv's rule: if toolcall_start returns -1 the callback
 * never runs; if it returns 0 the callback runs exactly once, later, from
 * the loop (never from inside toolcall_start).
 *
 * After a restart the asker of a pending approval is gone; the approval
 * stays pending, and approving it still runs the tool and records the
 * tool.result in the session's history (nobody gets a callback). A
 * tool.call resent with the same request_id adopts such a call and gets
 * its outcome.
 */
#ifndef GBRD_TOOLCALL_H
#define GBRD_TOOLCALL_H

struct event_base;

#include <stdint.h>
#include <jansson.h>

#include "errors.h"
#include "session.h"

struct conn;
struct toolcall;

#define TOOLCALL_ID_MAX		64	/* bytes of a caller-given call_id */

/* toolcall_opts.flags */
#define TOOLCALL_NO_CALL_MESSAGE 0x1	/* do not record the tool.call message */
#define TOOLCALL_END_AT_SHUTDOWN 0x2	/* cb runs (shutting_down) from
					   toolcall_shutdown if still waiting:
					   for a protocol request that must be
					   answered exactly once */
#define TOOLCALL_ASK_ALWAYS	0x4	/* a file tool asks a human even where
					   the path is not protected (what a
					   command changed, proposed again) */

/*
 * How a call ended. Every pointer is borrowed for the duration of the
 * callback: take a reference (json_incref) or a copy to keep one.
 */
struct toolcall_outcome {
	const char	*session;	/* the session's id */
	const char	*call_id;
	const char	*tool;
	int		 ok;		/* 1: the tool ran and result is set */
	json_t		*result;	/* ok: the tool's result */
	enum gbr_err	 kind;		/* !ok: denied, expired, cancelled, a
					   sandbox kind, timeout, ... */
	const char	*message;	/* !ok: why, for people */
	json_t		*data;		/* !ok: the error's data, or NULL; for
					   denied {approval_id, reason} */
	const char	*approval_id;	/* the approval it went through, or NULL */
	int		 duplicate;	/* a resent request_id: the first outcome */
	/*
	 * The tool.result history message as recorded ({role: "tool",
	 * call_id, tool, ok, result | error}), or NULL when the outcome was
	 * not recorded (the session closed, the disk log failed: then ok is
	 * 0 and kind says so).
	 */
	json_t		*record;
};

/* The call's end; runs exactly once (see the top of the file). */
typedef void (*toolcall_done_cb)(void *arg, const struct toolcall_outcome *);

/*
 * The call is suspended for a human: runs once per waiter, from the loop,
 * when the approval.requested event is announced (for a call adopted by
 * its request_id, soon after toolcall_start returns). approval (borrowed)
 * is the approval object of the protocol ({id, session, tool, args, path,
 * command, diff, why, state: "pending", call_id, request_id, ...}). The
 * event is in the session's stream too; a waiter that gave opts.asker and
 * is not attached to the session also gets it as a notification.
 */
typedef void (*toolcall_approval_cb)(void *arg, const json_t *approval);

struct toolcall_opts {
	const char	*request_id;	/* idempotency key, or NULL (the rule is
					   dispatch.c's, checked before) */
	struct conn	*asker;		/* the connection that asked, or NULL;
					   if it closes before a human decides,
					   the approval is withdrawn */
	const char	*call_id;	/* the caller's id for the call (the LLM's
					   tool call id; 1-64 of [A-Za-z0-9_.:-]),
					   or NULL for a random one */
	uint64_t	 turn;		/* the turn it belongs to (recorded in the
					   messages), or 0 */
	int		 flags;		/* TOOLCALL_* */
	toolcall_approval_cb on_approval; /* may be NULL */
};

/* Sets up the module (and the approval module); before disklog_open. */
void		 toolcall_init(struct event_base *);
/*
 * After disklog_open and once tools are registered: approvals left
 * "applying" by a crash become "interrupted" (with an event), expired ones
 * expire, approved ones whose action never started are applied.
 */
void		 toolcall_recover(void);
/*
 * Frees every call, after the loop ends. Only waiters that asked with
 * TOOLCALL_END_AT_SHUTDOWN get their callback (kind shutting_down); no
 * other callback runs. An approval still pending stays pending in the
 * disk log and can be decided after the restart.
 */
void		 toolcall_shutdown(void);
/* A connection closed: the approvals only it was waiting for are withdrawn. */
void		 toolcall_conn_closed(struct conn *);

/*
 * Starts a call of tool with args (borrowed; copied) in session (an id or
 * a name). opts may be NULL (no request_id, no asker, random call_id).
 * Returns 0: cb runs exactly once, later; *handle (may be NULL) is valid
 * until then. Returns -1 with *err filled (the caller frees err->message
 * and err->data): cb never runs. The call_id given out is
 * toolcall_call_id(*handle).
 *
 * A request_id already answered gives the first outcome (duplicate 1),
 * running nothing; one still in flight waits for it.
 */
int		 toolcall_start(const char *session, const char *tool,
		    json_t *args, const struct toolcall_opts *opts,
		    toolcall_done_cb cb, void *arg, struct toolcall **handle,
		    struct gbr_error *err);
/*
 * Gives up on a call (the agent's turn was cancelled): a pending approval
 * is withdrawn, a running command is stopped. cb still runs once, later,
 * with kind cancelled (or with the real outcome if the tool had already
 * finished).
 */
void		 toolcall_cancel(struct toolcall *);
/*
 * A session is closed: every call of it still in flight is given up (its
 * command is stopped, its approval withdrawn). Returns how many.
 */
unsigned	 toolcall_cancel_session(const char *session);
/*
 * Gives up on the call in flight in session with this request_id, as
 * toolcall_cancel. Returns 1 if there was one, 0 if none is in flight
 * (never asked, or already done: a finished call is not undone).
 */
int		 toolcall_cancel_request(const char *session,
		    const char *request_id);
/* The call's id (borrowed, valid until cb returns). */
const char	*toolcall_call_id(const struct toolcall *);
/* The id of the approval the call waits for (borrowed), or NULL. */
const char	*toolcall_approval_id(const struct toolcall *);

#endif
