/*
 * toolcall's private declarations, shared by its files:
 *   toolcall.c           the calls in flight, their waiters and outcome,
 *                        running the tool, the tool.call and tool.result
 *                        messages, toolcall_start and the module's life
 *   toolcall-approval.c  a call's way through a human: the policy's
 *                        decision, the approval it waits for (and its
 *                        pin), what approval.c calls back, and calls
 *                        adopted from before a restart
 *   toolcall-proposal.c  what a command changed in protected paths,
 *                        proposed to a human again
 */
#ifndef GBRD_TOOLCALL_INT_H
#define GBRD_TOOLCALL_INT_H

#include <sys/queue.h>

#include <stdint.h>
#include <jansson.h>

#include "approval.h"
#include "errors.h"
#include "toolcall.h"

struct conn;
struct env;
struct event;
struct sandbox;
struct sandbox_pin;
struct tool_job;
struct rewind_call;

#define TC_SESSION_LEN		64
#define TC_HUMAN_DIFF_MAX	(16 * 1024)	/* a human's edit, told the model */

enum tc_state {
	TC_RUNNING,		/* the tool runs, or its result is being written */
	TC_WAITING,		/* an approval is pending */
	TC_APPLYING,		/* approved: the tool runs */
	TC_DONE,		/* the outcome is set: waiters are told */
};

/* Where a call is in its rewind bracket (rewind.h). */
enum tc_rw {
	TC_RW_NONE,
	TC_RW_BEFORE,		/* the "before" snapshot: the tool waits */
	TC_RW_CANCELLED,	/* cancelled then: its end is deferred */
	TC_RW_AFTER,		/* the "after" one: the tool.result waits */
};

/* Someone waiting for a call's outcome. */
struct tc_waiter {
	struct tc_waiter	*next;
	toolcall_done_cb	 cb;
	toolcall_approval_cb	 on_approval;
	void			*arg;
	struct conn		*conn;		/* counted reference, or NULL */
	int			 had_conn;	/* asked over a connection */
	int			 dup;		/* a resend */
	int			 notified;	/* told about the approval */
	int			 end_at_shutdown;
};

struct toolcall {
	TAILQ_ENTRY(toolcall)	 entry;
	char			 session[TC_SESSION_LEN + 1];
	char			 call_id[TOOLCALL_ID_MAX + 1];
	char			 approval[APPROVAL_ID_LEN + 1];	/* "" if none */
	char			*tool;
	char			*rid;
	json_t			*args;
	uint64_t		 turn;
	int			 flags;
	enum tc_state		 state;
	struct tc_waiter	*waiters;
	unsigned		 nwaiters;
	struct tool_job		*job;		/* an asynchronous tool in flight */
	struct rewind_call	*rw;		/* what it may change (rewind.h) */
	enum tc_rw		 rw_phase;
	/* TC_RW_BEFORE: what runs once the snapshot is taken. */
	char			*run_tool;
	json_t			*run_args;
	int			 run_approved;
	/* TC_RW_AFTER: the tool's outcome, told once it is recorded. */
	int			 out_failed;
	enum gbr_err		 out_kind;
	char			*out_reason;
	json_t			*out_result;
	uint64_t		 streamed;	/* tool.output: bytes, events */
	unsigned		 nstreamed;
	int			 stream_cut;	/* the last one said truncated */
	char			*grant;		/* the grant that let it through */
	int			 edited;	/* a human's content was written */
	char			*human_diff;	/* how it differs from the proposal */
	int			 cancelled;
	json_t			*event;		/* approval.requested's payload */
	struct event		*ev;		/* deferred notifications and the end */
	/* The outcome. */
	int			 ok;
	enum gbr_err		 kind;
	char			*message;
	json_t			*result;	/* ok: the result; else error data */
	json_t			*record;	/* the tool.result message, or NULL */
	int			 dup_outcome;	/* a request_id answered before */
};
TAILQ_HEAD(tc_list, toolcall);

/* toolcall.c */
extern struct tc_list	tc_calls;	/* every call in flight */
/* A new call, in tc_calls; tc_free frees it (no callback runs). */
struct toolcall	*tc_new(const char *session, const char *call_id,
		    const char *tool, json_t *args, const char *rid,
		    uint64_t turn, int flags);
void		 tc_free(struct toolcall *);
/* Sets the outcome; the waiters hear from the loop. */
void		 tc_complete(struct toolcall *, int ok, enum gbr_err,
		    const char *message, json_t *result, json_t *record);
/* Records the outcome (tool.result); the waiters hear once it is written. */
void		 tc_record_result(struct toolcall *, int failed, enum gbr_err,
		    const char *reason, json_t *result);
/* Runs the tool now (approved: a human or a grant said yes). */
void		 tc_run(struct toolcall *, const char *tool, json_t *args,
		    int approved, const struct sandbox_pin *);

/* toolcall-approval.c */
extern const struct approval_hooks tc_approval_hooks;
/* Deny, ask or run a call that was checked and recorded. */
void		 tc_begin(struct toolcall *, struct env *, struct sandbox *);
/* A call for an approval nobody waits on in this run (after a restart). */
struct toolcall	*tc_adopt(struct approval *);
/* Tells a waiter about the approval its call waits for. */
void		 tc_notify(struct toolcall *, struct tc_waiter *);

/* toolcall-proposal.c */
/* result without the bytes of the protected changes it proposes (new). */
json_t		*tc_propose_changes(struct toolcall *, json_t *result);


#endif
