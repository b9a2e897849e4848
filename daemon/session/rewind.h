/*
 * Rewind: undoing what the agent changed in a session's workspace
 * (doc/REWIND.md). Every tool call that may change the workspace is
 * bracketed (rewind_begin before the tool runs, rewind_end after): a
 * write_file or edit_file by the bytes of its file before and after, a
 * command (run_command, run_script, check) by two snapshots of the work
 * tree; both kept in the workspace's shadow store (tools/shadow.h). What
 * changed is recorded as a "workspace.changed" event of the session
 * {call_id, tool, turn, changes: [{path, before, after}]} (ids of the
 * shadow store, "" for no file), before the call's tool.result.
 *
 * A command's snapshots are taken on the shadow store's worker thread
 * (shadow_snapshot_start), never on the event loop: rewind_begin and
 * rewind_end then answer REWIND_WAIT and call back once done, and the
 * tool call path waits for that (the command starts only after its
 * "before" snapshot; its tool.result is written only after its
 * workspace.changed). Rewind is best effort: a snapshot that fails is
 * logged and the tool call goes on, unrecorded.
 *
 * Memory keeps the changes of every open session, rebuilt from those
 * events at replay (rewind_note, from session_apply) and from the disk
 * log snapshot that replaced older events (rewind_state, rewind_restore:
 * the session's part of the snapshot). What is forgotten (past
 * REWIND_ENTRIES_MAX, to stay within the disk budget, or covered by an
 * older snapshot without that part) sets the session's floor: it can be
 * rewound to the floor at the earliest, and rewind says so.
 *
 * A rewind restores each file the selected changes touched to what it
 * was before the first of them, only where the file still holds what the
 * agent (or a rewind) last left there (else it refuses, naming the files,
 * unless forced), through the sandbox (nothing outside the workspace,
 * no link followed out). It is recorded as a "workspace.rewound" event
 * with its own changes, so it is itself undone by a rewind to the seq
 * before it.
 */
#ifndef GBRD_REWIND_H
#define GBRD_REWIND_H

#include <stdint.h>
#include <jansson.h>

#include "errors.h"
#include "session.h"

struct event_base;
struct rewind_call;
struct sandbox;
struct shadow_gc;
struct event_base;

#define REWIND_ENTRIES_MAX	4096	/* calls remembered per session */
#define REWIND_FILES_MAX	2000	/* files one call's record names */
#define REWIND_SNAP_FILES	20000	/* files of a session in a snapshot */

#define REWIND_READY	0	/* done now */
#define REWIND_WAIT	1	/* the callback runs once done */

/* A bracket's step is done (rc may be freed inside). */
typedef void	(*rewind_cb)(void *arg);

/* The loop a command's snapshots report back on. */
void		 rewind_init(struct event_base *);
/* Stops the snapshots and closes the shadow stores (shutdown). */
void		 rewind_shutdown(void);
/*
 * Before a tool runs in session sid on sandbox sb: *rcp gets what it may
 * change, or NULL when the tool changes nothing rewind knows of (or it
 * cannot be kept: logged; the tool runs anyway). Returns REWIND_READY, or
 * REWIND_WAIT for a command: its "before" snapshot is being taken and
 * cb(arg) runs from the loop once it is (if it failed, that is logged and
 * rewind_end will record nothing); the tool must not start before.
 * rewind_call_free before then: cb never runs.
 */
int		 rewind_begin(const char *sid, struct sandbox *sb,
		    const char *tool, json_t *args, struct rewind_call **rcp,
		    rewind_cb cb, void *arg);
/*
 * After the tool ran: records what it changed as a workspace.changed
 * event of session s (nothing if nothing changed). Returns REWIND_READY
 * (recorded, or nothing to record), or REWIND_WAIT for a command: its
 * "after" snapshot and diff are being taken and cb(arg) runs from the
 * loop once the event is recorded (nothing is if that failed or the
 * session closed meanwhile). rc stays the caller's either way.
 */
int		 rewind_end(struct rewind_call *rc, struct session *s,
		    struct sandbox *sb, const char *call_id, uint64_t turn,
		    rewind_cb cb, void *arg);
/*
 * Frees rc; a snapshot it waits for is dropped (its callback never runs)
 * and nothing more is recorded.
 */
void		 rewind_call_free(struct rewind_call *);
/* session_apply: an event record (payload borrowed) at seq. */
void		 rewind_note(const char *sid, uint64_t seq, json_t *payload);
/* A session was restored from a snapshot covering up to seq. */
void		 rewind_floor(const char *sid, uint64_t seq);
/* A session closed: forget its changes. */
void		 rewind_forget(const char *sid);
/*
 * A session's part of a disk log snapshot: a new object, or NULL when it
 * remembers nothing (see rewind.c for the layout).
 */
json_t		*rewind_state(const char *sid);
/*
 * A session restored from a snapshot covering up to seq upto, with its
 * part (borrowed). -1 if malformed: then only later changes are known
 * (floor upto), as for a snapshot without a part.
 */
int		 rewind_restore(const char *sid, uint64_t upto, json_t *state);

/*
 * The shadow store's collection and disk budget (rewind-gc.c): a run on
 * a thread removes what no remembered change, call in flight or store
 * index needs; when the disk log and the stores together pass [log]
 * max_bytes, the oldest changes are forgotten first.
 */
void		 rewind_gc_init(struct event_base *);
/* Something changed what the stores must keep: a run will follow. */
void		 rewind_gc_kick(void);
/* daemon.status: the stores' figures, a new object. */
json_t		*rewind_gc_status(void);
/* Adds what every remembered change and call in flight needs to gc. */
void		 rewind_keep(struct shadow_gc *gc);
/*
 * Forgets the oldest remembered changes until what their contents take
 * (as the finished run gc measured them) adds up to need. Returns how
 * many were forgotten.
 */
size_t		 rewind_trim(uint64_t need, struct shadow_gc *gc);

/* What a rewind is asked to do (session.rewind). */
struct rewind_req {
	uint64_t	 turn;		/* undo turns >= turn (0: use seq) */
	uint64_t	 seq;		/* or: undo every change after seq */
	int		 dry_run;
	int		 force;
	json_t		*who;		/* who asked (borrowed), or NULL */
};

/*
 * Rewinds session s. A dry run answers at once (*result: {changes:
 * [{path, action, diff}], conflicts}); else the files are restored and
 * cb runs once the workspace.rewound event is written (returns 0), or
 * nothing is done (-1 with err: conflict, not_found for nothing to
 * undo, gone for what was forgotten or is no longer stored).
 */
int		 rewind_run(struct session *s, const struct rewind_req *,
		    json_t **result, session_done_cb cb, void *arg,
		    struct gbr_error *err);
/*
 * The changes remembered for s, oldest first: a new object {floor,
 * changes: [{seq, turn, call_id, tool, rewind, files: [path]}]}.
 */
json_t		*rewind_list(struct session *s);

#endif
