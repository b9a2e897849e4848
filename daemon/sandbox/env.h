/*
 * Environment profiles (DESIGN.md section 3): what an agent may do in a
 * workspace. A profile is <workspace>/.gbr_envs/<name>.ini (inih) or
 * <name>.json (jansson) with the same sections and keys; a workspace
 * without a "default" profile gets the built-in default (env_builtin:
 * supervised, the workspace its own root, .git and .gbr_envs protected).
 *
 * A loaded env is immutable and reference-counted, so a session can keep
 * using the one it has while a reload parses and validates a new one; the
 * reloader compares the two (env_diff) and swaps pointers (the openbgpd
 * reconfigure() model: parse new, validate, swap, keep the old one on
 * error). Every error names the file and, where one exists, the line.
 *
 * Loading happens in two steps so that the parser can be fuzzed without
 * touching the disk: env_parse turns bytes into an env and checks every
 * value on its own; env_finish checks it against the workspace (the
 * allowed root exists inside it, system_file is readable) and makes every
 * path absolute.
 */
#ifndef GBRD_ENV_H
#define GBRD_ENV_H

#include <stddef.h>
#include <jansson.h>

struct env;
struct sandbox;
struct sandbox_config;

#define ENV_NAME_MAX	64		/* bytes in a profile name */
#define ENV_FILE_MAX	(256 * 1024)	/* bytes in a profile or a system_file */
#define ENV_LINE_MAX	(64 * 1024)	/* bytes in one INI line */
#define ENV_DIR		".gbr_envs"

enum env_format {
	ENV_INI,
	ENV_JSON,
};

enum env_autonomy {
	ENV_READ_ONLY,
	ENV_SUPERVISED,
	ENV_FULL,
};

/*
 * Loads profile name (NULL means "default") of a workspace: the file, or
 * the built-in default when name is "default" and no such file exists.
 * Returns 0 and a new reference in *env, or -1 with *cause (caller frees).
 */
int		 env_load(const char *workspace, const char *name,
		    struct env **env, char **cause);
/* The built-in default for a workspace (new reference), or NULL with *cause. */
struct env	*env_builtin(const char *workspace, char **cause);
/*
 * Parses a profile from memory without touching the disk (file names the
 * source in messages; name is the profile's name). New reference or NULL.
 */
struct env	*env_parse(const char *name, const char *file, const char *data,
		    size_t len, enum env_format, char **cause);
/* Checks a parsed env against its workspace and makes paths absolute. */
int		 env_finish(struct env *, const char *workspace, char **cause);

/*
 * The profiles of a workspace as a new JSON array of {name, file, format,
 * builtin}; the built-in default is listed when there is no "default".
 */
json_t		*env_list(const char *workspace, char **cause);
/* True if name may name a profile: [A-Za-z0-9][A-Za-z0-9._-]*, at most 64. */
int		 env_name_valid(const char *name);

struct env	*env_ref(struct env *);
void		 env_unref(struct env *);

/* Accessors: strings are borrowed and live as long as the env. */
const char	*env_name(const struct env *);
const char	*env_source(const struct env *);	/* NULL: built in */
const char	*env_workspace(const struct env *);	/* absolute, real */
const char	*env_allowed_root(const struct env *);	/* absolute, real */
size_t		 env_ro_roots(const struct env *, const char *const **);
size_t		 env_protected(const struct env *, const char *const **);
/* Protected exact paths (the system_file inside the allowed root). */
size_t		 env_protected_paths(const struct env *, const char *const **);
const char	*env_check_command(const struct env *);	/* NULL: none */
int		 env_max_fix_attempts(const struct env *);
enum env_autonomy env_autonomy(const struct env *);
const char	*env_autonomy_name(enum env_autonomy);
size_t		 env_ask_commands(const struct env *, const char *const **);
size_t		 env_deny_commands(const struct env *, const char *const **);
/* Tool names that ask a human in supervised autonomy (ask_tools). */
size_t		 env_ask_tools(const struct env *, const char *const **);
const char	*env_system_prompt(const struct env *);
const char	*env_system_file(const struct env *);	/* NULL: none */
int		 env_timeout_ms(const struct env *);
size_t		 env_max_output_bytes(const struct env *);
const char	*env_llm_provider(const struct env *);	/* NULL: daemon's choice */
const char	*env_llm_model(const struct env *);
const char	*env_llm_base_url(const struct env *);
int		 env_llm_max_steps(const struct env *);		/* 0: the daemon's */
size_t		 env_llm_max_request_bytes(const struct env *);	/* 0: the daemon's */
/*
 * The profile's MCP servers ([mcp.NAME]; env-mcp.c says their shape):
 * borrowed, or NULL if it names none.
 */
const json_t	*env_mcp(const struct env *);
/* True if s may name an MCP server. */
int		 env_mcp_name_valid(const char *);
/* Warnings from loading (a read-only root that does not exist yet). */
size_t		 env_warnings(const struct env *, const char *const **);
/*
 * The files a hot reload must watch: the profile and its system_file
 * (absolute paths; none for the built-in default).
 */
size_t		 env_files(const struct env *, const char *const **);

/* Everything, as a new JSON object (env.show). */
json_t		*env_to_json(const struct env *);
/* The keys ("env.allowed_root", "prompt.system", ...) that differ (new array). */
json_t		*env_diff(const struct env *, const struct env *);
/*
 * Fills a sandbox_config for this env (pointers borrowed from the env).
 * The arrays are the env's own; nothing to free.
 */
void		 env_sandbox_config(const struct env *, struct sandbox_config *);
/* Creates the sandbox this env describes (new), or NULL with *cause. */
struct sandbox	*env_sandbox(const struct env *, char **cause);

#endif
