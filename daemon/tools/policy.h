/*
 * The policy: whether a tool call is denied, put to a human, or allowed
 * (DESIGN.md 4; toolcall.h gives the order). This is the one place that
 * decides. Its functions are pure: they look at the environment, the
 * sandbox (a file tool's path is resolved, nothing is written), the tool
 * and its arguments, and whether this system confines what commands
 * write (runner_unconfined), and say what the rules make of them;
 * recording, asking and running are the callers'.
 *
 * Three callers, one set of rules:
 *   - policy_decide, before a call (toolcall.c): deny, ask or allow;
 *   - policy_recheck, before an approved call runs (toolcall.c): a deny
 *     rule that came in while a human decided wins over the decision;
 *   - policy_command, before a child starts (tool-run.c): the command
 *     rules again where no toolcall stands in front (the agent's check,
 *     the runner driver), and for an approved call the deny rules that
 *     may have come in meanwhile.
 */
#ifndef GBRD_POLICY_H
#define GBRD_POLICY_H

#include <stddef.h>
#include <jansson.h>

#include "errors.h"
#include "sandbox.h"

struct env;
struct tool_def;

enum policy_verdict {
	POLICY_DENY = -1,
	POLICY_ALLOW = 0,
	POLICY_ASK = 1,
};

/* Why a call asks (approval.h names each for people). */
enum policy_why {
	POLICY_WHY_PROTECTED_PATH,	/* a protected file */
	POLICY_WHY_ASK_COMMAND,		/* an ask_commands pattern */
	POLICY_WHY_ASK_TOOL,		/* ask_tools, in supervised autonomy */
	POLICY_WHY_ENV_DIR,		/* .gbr_envs: always, never granted */
	POLICY_WHY_COMMAND_CHANGE,	/* what a command changed, proposed */
	POLICY_WHY_WRITE_PROTECTED,	/* a command asks to write protected paths */
	POLICY_WHY_UNCONFINED,		/* a command in full autonomy, and its
					   writes are not confined here */
	POLICY_WHY_MCP_TOOL,		/* an MCP server's tool whose profile
					   asks (ask = all | writes) */
};

/* policy_decide's flags */
#define POLICY_ASK_ALWAYS	0x1	/* a file tool asks even where the path
					   is not protected */

/*
 * A decision. Every pointer but effect is owned by the decision
 * (policy_decision_release frees them).
 */
struct policy_decision {
	enum policy_verdict	 verdict;
	/* POLICY_DENY: */
	enum gbr_err		 kind;
	char			*reason;
	json_t			*data;		/* the error's data, or NULL */
	/* POLICY_ASK (path and pin are set for an allowed file tool too): */
	enum policy_why		 why;
	const char		*effect;	/* what a yes lets happen (static),
						   or NULL */
	char			*path;		/* the file, workspace-relative */
	char			*command;	/* the command line, quoted for a
						   POSIX shell (cut past 16 KiB,
						   saying so) */
	char			*diff;		/* unified diff of the change */
	char			*proposed;	/* edit_file: the whole new file */
	size_t			 proposed_len;
	struct sandbox_pin	 pin;		/* a file tool: what its write
						   resolved to (rel NULL if none) */
};

/*
 * The decision for a call of def (its arguments checked against its
 * schema) in env and sb, in the order of toolcall.h. Returns d->verdict;
 * the caller releases d whatever it is.
 */
enum policy_verdict policy_decide(const struct env *, struct sandbox *,
		    const struct tool_def *def, json_t *args, int flags,
		    struct policy_decision *d);
/* Frees what a decision holds. */
void		 policy_decision_release(struct policy_decision *);
/*
 * An approved call of def is about to run: POLICY_DENY (kind read_only,
 * *reason for the caller to free, *data a new reference) if env no longer
 * lets it run at all, else POLICY_ALLOW. def may be NULL (allow).
 */
enum policy_verdict policy_recheck(const struct env *,
		    const struct tool_def *def, enum gbr_err *kind,
		    char **reason, json_t **data);
/*
 * The command rules for run tool def about to run argv: read-only autonomy
 * (permission_denied), deny_commands (denied_command) and, unless
 * approved, ask_commands (needs_approval); check is none of their
 * business. POLICY_DENY and POLICY_ASK come with *kind, *reason (caller
 * frees) and *data ({pattern, argv}, new reference, or NULL).
 */
enum policy_verdict policy_command(const struct env *,
		    const struct tool_def *def, const char *const *argv,
		    int approved, enum gbr_err *kind, char **reason,
		    json_t **data);

#endif
