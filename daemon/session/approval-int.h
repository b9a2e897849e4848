/*
 * What the approval files share, and nobody else sees (approval.h is the
 * module's face). The module is split by what each part does:
 *
 *   approval.c        the state machine: creating, deciding, applying,
 *                     ending and expiring approvals, the session states
 *                     and events that follow them, start and stop, and
 *                     the two crash test hooks
 *   approval-log.c    the "approval.*" records: appending them, applying
 *                     each one to memory (live and at replay), snapshots
 *   approval-grant.c  session grants: finding, listing, revoking them
 *   approval-view.c   what others read: accessors, the protocol's
 *                     approval object, approval.list
 *
 * Memory changes only through the records (ap_record applies what it
 * appends), so every file that changes an approval goes through
 * approval-log.c.
 */
#ifndef GBRD_APPROVAL_INT_H
#define GBRD_APPROVAL_INT_H

#include <sys/queue.h>

#include <stdint.h>
#include <jansson.h>

#include "approval.h"
#include "session.h"

struct event_base;

struct approval {
	TAILQ_ENTRY(approval)	 entry;
	char			 id[APPROVAL_ID_LEN + 1];
	char			*session;
	char			*call_id;
	char			*tool;
	json_t			*args;
	char			*path;		/* or NULL */
	char			*command;	/* or NULL */
	char			*diff;		/* or NULL */
	char			*effect;	/* or NULL */
	char			*proposed;	/* edit_file's new file, or NULL */
	size_t			 proposed_len;
	json_t			*pin;		/* file tools: what was shown, or NULL */
	char			*rid;		/* the call's request_id, or NULL */
	uint64_t		 turn;
	enum approval_why	 why;
	enum approval_state	 state;
	int			 decided;	/* decision is set */
	enum approval_decision	 decision;
	int			 scope_session;
	char			*reason;	/* or NULL */
	char			*content;	/* an edit's content, or NULL */
	size_t			 content_len;
	char			*resolve_rid;	/* the decision's request_id, or NULL */
	char			*by;		/* who decided (approval_resolve), or NULL */
	char			*note;		/* interrupted: what may have happened */
	json_t			*result;	/* applied/failed: kept result, or NULL */
	int64_t			 created_ms;
	int64_t			 expires_ms;	/* 0: never */
	int64_t			 resolved_ms;
	int			 applying_started; /* this run: the apply hook ran */
	int			 announced;	/* state of its last session event; -1: none */
};
TAILQ_HEAD(approval_list, approval);

/* A record's continuation once the log has written it. */
struct ap_wait {
	void			(*fn)(struct ap_wait *, int error);
	char			 id[APPROVAL_ID_LEN + 1];
	approval_done_cb	 cb;
	void			*arg;
	json_t			*reply;		/* what cb gets, or NULL */
};

#define AP_NSTATES	(APPROVAL_FAILED + 1)
#define AP_NWHYS	(APPROVAL_WHY_MCP_TOOL + 1)
#define AP_NDECISIONS	(APPROVAL_EDIT + 1)

/* approval.c: every approval, and its counters. */
extern struct approval_list	 ap_all;
extern unsigned			 ap_nlive;	/* not finished */
extern unsigned			 ap_ndone;
/* The names of the enums, as in the protocol and the records. */
extern const char *const	 ap_states[AP_NSTATES];
extern const char *const	 ap_whys[AP_NWHYS];
extern const char *const	 ap_decisions[AP_NDECISIONS];

/* approval.c: small helpers. */
int		 ap_parse(const char *const *table, size_t n, const char *name);
int		 ap_finished(enum approval_state);
int		 ap_open(enum approval_state);
char		*ap_strdup(const char *);
int		 ap_streq(const char *, const char *);
const char	*ap_str(json_t *, const char *key);
int64_t		 ap_int(json_t *, const char *key);
void		 ap_new_id(char *id, char prefix);
/* Frees an approval that is off ap_all. */
void		 ap_free(struct approval *);
/* Moves an approval to a state, keeping the counters and the bound. */
void		 ap_set_state(struct approval *, enum approval_state);
/* Withdraws the open approvals whose session is gone; drops its grants. */
void		 ap_sweep_closed(void);

/* approval-log.c: set once a record failed; nothing changes after. */
extern int	 ap_broken;
/* Registers the module with the disk log and the session stream. */
void		 ap_log_register(void);
/*
 * Appends a record (payload borrowed) and applies it to memory. w (may
 * be NULL) runs once the log wrote it, and is freed here if the log
 * refuses. Returns 0, or -1 if the log would not take it (nothing
 * changed).
 */
int		 ap_record(const char *type, json_t *payload, int durable,
		    struct ap_wait *w);
/* A new continuation (freed once it ran). */
struct ap_wait	*ap_wait_new(void (*fn)(struct ap_wait *, int), const char *id,
		    approval_done_cb cb, void *arg);
/* Fills err for a record the log refused; returns -1. */
int		 ap_fail_storage(struct gbr_error *err);

/* approval-grant.c. */
unsigned	 ap_grant_count(void);
/* The "grant" of an approval.resolved record for a, with a new id (new). */
json_t		*ap_grant_new(const struct approval *a);
/* Adds a grant from its JSON (a record or a snapshot): 0 or -1. */
int		 ap_grant_add(json_t *);
/* Removes a grant (approval.revoke): 0, or -1 if there is none. */
int		 ap_grant_remove(const char *id);
/* Forgets the grants of sessions that are closed (memory only). */
void		 ap_grant_forget_closed(void);
/* The grants for a snapshot (new reference). */
json_t		*ap_grant_snapshot(void);
/* Frees every grant. */
void		 ap_grant_clear(void);

#endif
