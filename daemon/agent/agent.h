/*
 * The agent loop: a session's turn with an LLM. The user's
 * message starts it (session.c calls agent_turn_begin once the running
 * state is announced); the model's answer streams to the attached
 * clients as live message.delta events, and the whole answer becomes one
 * durable history message (role assistant, with the tool calls it asked
 * for); each tool call then runs through toolcall.h, exactly as tool.call
 * runs one (sandbox, approvals, runner, disk log), and its result goes
 * back to the model with the next request; this repeats until the model
 * answers without tool calls or the step limit is reached. After a turn
 * that changed files, the profile's check_command runs; a failure is
 * given back to the model (a user message with "source": "check") up to
 * max_fix_attempts times, each run announced by a check.result event.
 *
 * Nothing about a turn lives only in memory: what to do next is read
 * from the session's history each time (the last assistant message, the
 * results recorded after it, the check messages), so a turn can go on
 * after a restart (agent_recover) and a retried request never re-runs a
 * tool whose result is already recorded.
 */
#ifndef GBRD_AGENT_H
#define GBRD_AGENT_H

#include <stdint.h>
#include <jansson.h>

struct event_base;
struct session;

/* Takes the loop and registers with session as who runs turns. */
void		 agent_init(struct event_base *);
/*
 * The running state of a turn is announced: the agent takes it. Returns
 * 0, or -1 when no provider is configured at all (the caller runs the
 * no_provider stub turn).
 */
int		 agent_turn_begin(struct session *, uint64_t turn);
/* session.cancel, session.close: the stream, the tool and timers stop now. */
void		 agent_cancel(struct session *);
/*
 * After toolcall_recover: a turn that waited for an approval when gbrd
 * stopped waits again, and goes on once a human decides.
 */
void		 agent_recover(void);
/* Stops every turn; no callback runs. Before http_shutdown. */
void		 agent_shutdown(void);
/* Turns running, for daemon.status (new reference). */
json_t		*agent_status(void);

/*
 * The provider-neutral conversation (llm.h) that a session history (an
 * array of history messages, borrowed) stands for (new reference): the
 * user's and check messages, the agent's answers with their tool calls,
 * and right after each answer one result per call (a call never answered,
 * because its turn ended first, gets a "not run" result). Tool calls a
 * human made through tool.call are not the model's and are left out.
 */
json_t		*agent_conversation(json_t *history);

#endif
