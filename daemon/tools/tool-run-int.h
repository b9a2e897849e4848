/*
 * The run tools' private declarations, shared by their files:
 *   tool-run.c         the tools' table, argument checks, tool_run_call,
 *                      set-up and shutdown, and the module's state (tr)
 *   tool-run-words.c   command words: splitting a line, the patterns
 *   tool-run-env.c     the child's environment and its temp space
 *   tool-run-locks.c   the read-only binds of a call, and the check after
 *                      the commands of a root (lockaudit.h)
 *   tool-run-output.c  bytes as JSON, streamed chunks, the result
 *   tool-run-home.c    what a command reads of the home: the toolchains
 *   tool-run-cache.c   the agent's own package caches, bounded
 */
#ifndef GBRD_TOOL_RUN_INT_H
#define GBRD_TOOL_RUN_INT_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "runner.h"
#include "tool.h"
#include "tool-run.h"

struct config;
struct event_base;

#define TR_RO_MAX	120		/* read-only paths or binds of one call */
#define TR_OWN_MAX	16		/* gbrd's own folders (tr_own_add) */
#define TR_HIDE_MAX	64		/* the home's secret stores (secrets.h) */

enum tr_tool {
	TR_SCRIPT,
	TR_COMMAND,
	TR_CHECK,
};

struct tr_group;

/* A call in flight. */
struct tool_run {
	enum tr_tool		 tool;
	struct runner_job	*job;
	char			*what;		/* the interpreter or program */
	json_t			*command;	/* argv as JSON, for check */
	struct tool_job		 handle;	/* the registry's (tool.h) */
	tool_output_cb		 out_cb;
	tool_done_cb		 done_cb;
	void			*arg;
	/* An unfinished UTF-8 character held back from each stream's chunk. */
	unsigned char		 carry[2][4];
	size_t			 ncarry[2];
	struct tr_group		*group;		/* the check after it */
	int			 locked;	/* it ran with read-only binds */
	TAILQ_ENTRY(tool_run)	 entry;		/* tr_live */
};
TAILQ_HEAD(tool_run_list, tool_run);

/* A bounded list of owned paths (the read-only binds of one call). */
struct tr_locks {
	char	*v[TR_RO_MAX];
	size_t	 n;
	size_t	 nalways;	/* v[0..nalways): even an approved run's */
	int	 full;		/* one did not fit: the call is refused */
};

/* The module's state (tool-run.c). */
struct tr_state {
	int		 ready;
	struct event_base *base;
	char		*tmp;		/* the private temp folder */
	unsigned	 max_timeout_ms;
	size_t		 max_output;
	unsigned	 processes;
	uint64_t	 memory, file_size;
	unsigned	 open_files;
	char		**pass_env;
	char		**read_paths;
	char		**tc_reads;	/* the toolchains' folders (tool-run-home.c) */
	uint64_t	 cache_max;	/* [exec] cache_max_bytes */
	json_t		*schemas[3];
	char		*hide[TR_OWN_MAX];	/* hidden from commands */
	size_t		 nhide;
	char		*secrets[TR_HIDE_MAX];	/* the home's (tool-run-home.c) */
	size_t		 nsecrets;
	char		*own[TR_OWN_MAX];	/* gbrd's own folders */
	size_t		 nown;
	char		*audit_dir;	/* STATE/audit: the checks' records */
	uint64_t	 audits, restored;
};

/* tool-run.c */
extern struct tr_state		tr;
extern struct tool_run_list	tr_live;	/* calls in flight */
/* Forgets a call (out of tr_live, and freed); no callback runs. */
void		 tr_run_free(struct tool_run *);

/* tool-run-env.c */
/* The child's environment: ours through the allow-lists, and TMPDIR. */
char		**tr_build_env(const struct tool_run_ctx *, const char *stmp,
		    const char *cache);
/* Why root cannot have commands (new string), or NULL. */
char		*tr_refuse_root(const char *root);
/* The session's temp space (new string), or NULL (logged). */
char		*tr_session_tmp(const char *session);
/* Removes a folder tree, bounded. Returns 0 or -1. */
int		 tr_rmtree(const char *path);

/* tool-run-locks.c */
/* The read-only binds of a call in root, into l. */
void		 tr_lockset(const struct tool_run_ctx *, const char *root,
		    struct tr_locks *l);
void		 tr_locks_free(struct tr_locks *);
/* Adds a child's read-only paths to ro[nro..]; the new count. */
size_t		 tr_ro_paths(const struct tool_run_ctx *, const char **ro,
		    size_t nro);
/* A short stable name for a path (FNV-1a, hex). */
void		 tr_hash(const char *s, char *out, size_t outsz);
/* A command of root starts (returns its group) or ends (the changes). */
struct tr_group	*tr_group_enter(const char *root, const char *workspace,
		    const struct tr_locks *, int approved);
json_t		*tr_group_leave(struct tr_group *);
/* Every child is gone: the checks of every group, now. */
void		 tr_groups_end(void);
/* Workspaces with commands running now. */
size_t		 tr_groups_count(void);
/* True if a command runs now whose workspace's agent cache is dir. */
int		 tr_group_busy(const char *dir);
/* At start: the checks a gbrd that died did not do. */
void		 tr_audit_recover(const char *state_dir);

/* tool-run-home.c */
/* Works out the toolchain folders commands may read (tr.tc_reads). */
void		 tr_home_setup(const struct config *);
/* The home's secret stores, hidden where Landlock does not keep them out. */
void		 tr_home_hide(void);
/* tr.tc_reads as a JSON array (new). */
json_t		*tr_home_json(void);

/* tool-run-cache.c */
/*
 * The cache of a workspace, made and ready for a command (new string), or
 * NULL with *cause. One found too big is cleared first, unless a command
 * of the workspace runs now.
 */
char		*tr_cache_ready(const char *workspace, char **cause);
/* At start: removes what a dead gbrd's cache.clean left aside. */
void		 tr_cache_sweep(void);
void		 tr_cache_shutdown(void);

/* tool-run-output.c */
/* The runner's callbacks: the chunks, then the result, of a call. */
void		 tr_on_output(void *, enum runner_stream, const char *, size_t);
void		 tr_on_done(void *, const struct runner_result *);

#endif
