/*
 * What the agent's files share, and nobody else sees (agent.h is the
 * module's face). The module is split by what each part does:
 *
 *   agent.c          the turns in flight and their steps: asking the
 *                    model, its answers and retries, the tool calls
 *   agent-context.c  what is sent: the conversation a history stands
 *                    for, cut to the context budget, and the budgets
 *                    learned from the models' refusals
 *   agent-check.c    the check after a turn that changed files, and the
 *                    fix attempts it gives back to the model
 *
 * agent-context.c knows nothing of turns: it works on histories,
 * conversations and targets. agent-check.c works on a turn (struct
 * agent_turn) and ends it through agent.c.
 */
#ifndef GBRD_AGENT_INT_H
#define GBRD_AGENT_INT_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "llm.h"

struct event;
struct session;
struct tool_job;
struct toolcall;

#define AGENT_SID_MAX		64
#define AGENT_MCP_WAIT_MS	20000	/* for MCP servers to start, per turn */
#define AGENT_BUDGET_MIN	(16 * 1024) /* a learned context budget, at least */

struct agent_turn {
	TAILQ_ENTRY(agent_turn)	 entry;
	uint64_t		 id;		/* the key callbacks carry */
	char			 sid[AGENT_SID_MAX + 1];
	uint64_t		 turn;
	int			 resumed;	/* goes on from before a restart */
	struct llm_target	 target;
	int			 have_target;
	char			*local_model;	/* what a local Ollama offered */
	int			 probing;
	struct llm_call		*call;
	unsigned		 step;		/* the step the call is for */
	struct toolcall		*tc;
	int			 tc_busy;	/* a tool call's callback is due */
	struct tool_job		*check;
	int			 check_busy;
	unsigned		 fixes;		/* check messages so far, for the run */
	int			 writing;	/* a record of ours is being written */
	struct event		*ev;		/* steps, and retry backoff */
	unsigned		 attempt;	/* retries of the current request */
	unsigned		 trimmed;	/* messages shortened or left out, as told */
	size_t			 sent;		/* bytes of the last request sent */
	unsigned		 shrinks;	/* requests cut after a context overflow */
	size_t			 budget;	/* tried after one; learned if it works */
	long long		 mcp_since;	/* began waiting for MCP servers */
};
TAILQ_HEAD(agent_list, agent_turn);

/* What a callback needs to find its turn again. */
struct agent_key {
	uint64_t	id;
};

/* The current turn as the history tells it. */
struct agent_view {
	size_t	 start;		/* the user's message that began it */
	long	 last;		/* the last assistant message of ours, or -1 */
	long	 feedback;	/* the last check message, or -1 */
	unsigned steps;		/* assistant messages of ours in the turn */
	unsigned fixes;		/* check messages in the turn */
	int	 changed;	/* a tool that changes files worked */
};

/* agent.c: turns. */
/* A key for a callback (the callback frees it). */
struct agent_key *agent_key(struct agent_turn *);
/* The turn a key names, or NULL; frees the key. */
struct agent_turn *agent_unkey(struct agent_key *);
/* Forgets a turn at once; what it waited for is told to stop. */
void		 agent_kill(struct agent_turn *);
/*
 * Ends the turn (outcome, an error kind and message or NULL, fields
 * stolen) with its usage, and forgets it.
 */
void		 agent_end(struct agent_turn *, struct session *,
		    const char *outcome, const char *kind, const char *message,
		    json_t *fields);
/* session_message's callback for a record of a turn: the next step. */
void		 agent_written(void *key, int error, json_t *result);

/* agent-check.c: the model's final answer; runs the check, or ends. */
void		 agent_check(struct agent_turn *, struct session *,
		    const struct agent_view *);

/* agent-context.c. */
/* True for an assistant message the agent wrote. */
int		 agent_ours(json_t *m);
/*
 * Builds the request for target within max bytes, cutting conv (changed
 * in place), oldest first, until it fits. Returns 0 (*shortened says how
 * many messages were shortened or left out, *before the size uncut), or
 * -1 with *cause.
 */
int		 agent_build(const struct llm_target *, const char *system,
		    json_t *conv, json_t *tools, size_t max,
		    struct llm_request *rq, unsigned *shortened, size_t *before,
		    char **cause);
/* The request size a session's model takes (0: none learned). */
size_t		 agent_budget(const char *sid, const struct llm_target *);
/* Remembers a smaller budget for a session's model. */
void		 agent_budget_set(const char *sid, const struct llm_target *,
		    size_t bytes);
/* The budget to learn from a context overflow after sending sent bytes. */
size_t		 agent_budget_learn(size_t sent, const char *message);
/* Forgets every learned budget. */
void		 agent_budget_clear(void);

#endif
