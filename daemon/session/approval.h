/*
 * Human approvals (ADR-0001's "HITL as a state machine in the disk
 * log"). The module owns every approval and every session grant: their
 * state, their disk log records ("approval.*", replayed and snapshotted),
 * the approval.requested / approval.resolved events in the session's
 * stream, and the expiry timer (approval-int.h says which file holds
 * which part). Nothing here waits for a human: an approval is a persisted
 * state, and a decision is a record.
 *
 * The states:
 *
 *   pending --approve--> approved --> applying --> applied | failed
 *           --edit-----> edited  --> applying --> applied | failed
 *           --deny-----> denied
 *           --(timer)--> expired
 *           --(asker left)--> withdrawn
 *   applying --(daemon died)--> interrupted --approve/edit--> ... (again)
 *                                           --deny--> denied
 *
 * Each arrow is a durable record appended before anyone hears of it; the
 * reply to approval.resolve goes once the decision is fsynced. "applying"
 * is fsynced before the action starts and "applied" is written after it,
 * so a crash in between is seen at the next start (interrupted) and the
 * action is never run again without a human saying so.
 *
 * toolcall.c drives the actions: it creates approvals, and the module
 * calls its hooks when an action must run (apply) or when a call must end
 * without running (closed). Approvals are found by id; the struct is
 * opaque and borrowed, valid until the next change of the module.
 */
#ifndef GBRD_APPROVAL_H
#define GBRD_APPROVAL_H

struct event_base;

#include <stdint.h>
#include <jansson.h>

#include "errors.h"
#include "session.h"

struct approval;

#define APPROVAL_ID_LEN		17	/* "a" + 16 hex */
#define APPROVAL_KEEP_DONE	512	/* finished approvals kept in memory */
#define APPROVAL_GRANTS_MAX	4096	/* session grants, in all */
#define APPROVAL_RESULT_MAX	(64 * 1024) /* bytes of a result kept */
#define APPROVAL_CONTENT_MAX	(16 * 1024 * 1024) /* an edit's content */
#define APPROVAL_LIST_CONTENT	(2 * 1024 * 1024) /* content in one list */

enum approval_state {
	APPROVAL_PENDING = 0,
	APPROVAL_APPROVED,
	APPROVAL_DENIED,
	APPROVAL_EDITED,
	APPROVAL_APPLYING,
	APPROVAL_APPLIED,
	APPROVAL_INTERRUPTED,
	APPROVAL_EXPIRED,
	APPROVAL_WITHDRAWN,
	APPROVAL_FAILED,
};

enum approval_why {
	APPROVAL_WHY_PROTECTED_PATH = 0,	/* "protected_path" */
	APPROVAL_WHY_ASK_COMMAND,		/* "ask_command" */
	APPROVAL_WHY_ASK_TOOL,			/* "ask_tool" */
	APPROVAL_WHY_ENV_DIR,			/* "env_dir": .gbr_envs, never granted */
	APPROVAL_WHY_COMMAND_CHANGE,		/* "command_change": what a command
						   changed in a protected path, put
						   back, and proposed again */
	APPROVAL_WHY_WRITE_PROTECTED,		/* "write_protected": a command
						   that asks to write protected
						   paths */
	APPROVAL_WHY_UNCONFINED,		/* "unconfined": a command in full
						   autonomy where its writes are
						   not confined (runner.h) */
	APPROVAL_WHY_MCP_TOOL,			/* "mcp_tool": an MCP server's tool
						   ([mcp.NAME] ask) */
};

enum approval_decision {
	APPROVAL_APPROVE = 0,
	APPROVAL_DENY,
	APPROVAL_EDIT,
};

/* What a new approval is about (every pointer borrowed and copied). */
struct approval_req {
	const char		*session;	/* the session's id */
	const char		*call_id;
	const char		*tool;
	json_t			*args;		/* as asked */
	const char		*path;		/* canonical, workspace-relative, or NULL */
	const char		*command;	/* the command line, or NULL */
	const char		*diff;		/* unified diff, or NULL */
	const char		*proposed;	/* edit_file: the whole new file, or NULL */
	size_t			 proposed_len;
	json_t			*pin;		/* file tools: what the write resolved
						   to (toolcall.c's form of a
						   sandbox_pin), kept with the
						   approval; or NULL */
	enum approval_why	 why;
	const char		*effect;	/* what approving lets happen, for
						   people ("may write protected
						   paths ..."), or NULL */
	const char		*request_id;	/* the call's request_id, or NULL */
	uint64_t		 turn;
};

/* toolcall.c's part (approval_init). */
struct approval_hooks {
	/*
	 * An approved or edited approval is "applying" (durably): run the
	 * action once, then call approval_applied. From the loop.
	 */
	void	(*apply)(const char *id);
	/*
	 * An approval ended without running (denied, expired, withdrawn):
	 * end its call. From the loop, once the record is written.
	 */
	void	(*closed)(const char *id);
};

/*
 * Called once: error 0 with the approval object (borrowed), or an errno
 * value (the record could not be written).
 */
typedef void (*approval_done_cb)(void *arg, int error, json_t *approval);

/* Registers with the disk log and reads the test hook; before disklog_open. */
void		 approval_init(struct event_base *, const struct approval_hooks *);
/*
 * After disklog_open: "applying" without "applied" becomes interrupted
 * (record and event), the expired expire, approved decisions whose action
 * never started are applied (from the loop), sessions are put in or out
 * of awaiting_approval to match, and the expiry timer starts.
 */
void		 approval_recover(void);
/* Frees everything; no callback runs. */
void		 approval_shutdown(void);
/* Pending and interrupted approvals now (daemon.status). */
unsigned	 approval_pending_count(void);

/*
 * Creates a pending approval: the approval.requested record (durable),
 * then the session's approval.requested event and its awaiting_approval
 * state. Returns 0 with the new id in id (APPROVAL_ID_LEN + 1 bytes) and
 * cb runs once the event is announced, with the event's payload; or -1
 * with *err (limit_reached, storage_error, session_not_found): cb never
 * runs.
 */
int		 approval_create(const struct approval_req *, char *id,
		    approval_done_cb cb, void *arg, struct gbr_error *err);
/*
 * A human's decision on a pending or interrupted approval. content is the
 * whole new file for edit (file tools only), reason and scope
 * ("once" or "session") are optional, request_id makes a resend answer
 * the same, by (or NULL) says who decided ("gbr/0.1.0 pid 4242"), kept and
 * shown to every client as decided_by. Returns 0: cb runs once with the approval once the decision is
 * durable; or -1 with *err (approval_not_found, already_resolved with
 * data {state, decision}, invalid_params, limit_reached, storage_error).
 */
int		 approval_resolve(const char *id, enum approval_decision,
		    const char *content, size_t content_len, const char *reason,
		    const char *scope, const char *request_id, const char *by,
		    json_t *who, approval_done_cb cb, void *arg,
		    struct gbr_error *err);
/*
 * The asker is gone (or gave up) before a decision: a pending approval is
 * withdrawn (record, event, then hooks->closed). Returns 0 if it was
 * pending, else -1.
 */
int		 approval_withdraw(const char *id, const char *why);
/*
 * The action of an applying approval finished: failed 0 with result, or
 * failed 1 with kind and reason (result as the error's data). Records
 * "applied" or "failed" (durable) and announces it. All borrowed.
 */
void		 approval_applied(const char *id, int failed, enum gbr_err kind,
		    const char *reason, json_t *result);

/* The approval called id (borrowed), or NULL. */
struct approval	*approval_get(const char *id);
/* A live approval of a session with this request_id (borrowed), or NULL. */
struct approval	*approval_find_request(const char *session,
		    const char *request_id);

/* Accessors (borrowed). */
const char	*approval_id(const struct approval *);
const char	*approval_session(const struct approval *);
const char	*approval_call_id(const struct approval *);
const char	*approval_tool(const struct approval *);
json_t		*approval_args(const struct approval *);
const char	*approval_path(const struct approval *);
const char	*approval_request_id(const struct approval *);	/* or NULL */
json_t		*approval_pin(const struct approval *);		/* or NULL */
uint64_t	 approval_turn(const struct approval *);
enum approval_state approval_state(const struct approval *);
enum approval_decision approval_decision(const struct approval *);
const char	*approval_reason(const struct approval *);	/* or NULL */
/* An edit's content (NULL unless the decision is edit), and its length. */
const char	*approval_content(const struct approval *, size_t *);
/* What the file tool proposed to write (the whole new file), or NULL. */
const char	*approval_proposed(const struct approval *, size_t *);
/* The approval object of the protocol (new reference). */
json_t		*approval_json(const struct approval *);
const char	*approval_state_name(enum approval_state);
const char	*approval_why_name(enum approval_why);

/*
 * approval.list: pending and interrupted ones, or with all every one kept
 * in memory; of one session or of all (session NULL); only the one called
 * id (any state) when id is not NULL. Each object also has "content", the
 * proposed new file for a file tool (write_file's args.content, edit_file's
 * result), while the reply stays under APPROVAL_LIST_CONTENT bytes of it
 * (later ones get null and "content_omitted": true), and the whole reply
 * under half a client's output queue (*more says some were left out).
 * New reference.
 */
json_t		*approval_list(const char *session, int all, const char *id,
		    int *more);
/*
 * The approvals of sessions that are closed now are withdrawn, their grants
 * forgotten (session.close calls it; listings and the timer do too).
 */
void		 approval_sweep(void);

/*
 * A session grant that lets this call through (same session, tool, and
 * path or command), or NULL. The id is borrowed.
 */
const char	*approval_grant_find(const char *session, const char *tool,
		    const char *path, const char *command);
/* approval.grants: of one session or of all (new reference). */
json_t		*approval_grants(const char *session);
/*
 * Revokes a grant: a durable record (with who, borrowed, may be NULL:
 * who asked, for the audit trail); cb runs once it is written with
 * {revoked: true}. Returns -1 with *err (not_found) if there is no such
 * grant.
 */
int		 approval_revoke(const char *grant_id, json_t *who,
		    approval_done_cb cb, void *arg, struct gbr_error *err);

#endif
