/*
 * What others ask of a finished environment profile (see env.h): its
 * fields, its JSON for env.show, the diff a reload reports, and the
 * sandbox configuration it makes.
 */
#include "gbr-config.h"


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "env-int.h"
#include "pathgate.h"
#include "sandbox.h"
#include "xmalloc.h"

/* The profile's name. */
const char *
env_name(const struct env *e)
{
	return e->name;
}

/* The profile file, or NULL for the built-in default. */
const char *
env_source(const struct env *e)
{
	return e->source;
}

/* The workspace's real path. */
const char *
env_workspace(const struct env *e)
{
	return e->workspace;
}

/* The allowed root's real path. */
const char *
env_allowed_root(const struct env *e)
{
	return e->allowed_root;
}

/* The read-only roots that exist (real paths). */
size_t
env_ro_roots(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->ro.v;
	return e->ro.n;
}

/* The protected exact paths (canonical, relative to the allowed root). */
size_t
env_protected_paths(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->literal.v;
	return e->literal.n;
}

/* The protected globs, relative to the allowed root. */
size_t
env_protected(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->protected.v;
	return e->protected.n;
}

/* The command run after edits, or NULL. */
const char *
env_check_command(const struct env *e)
{
	return e->check;
}

/* How many times the agent may try to make the check pass. */
int
env_max_fix_attempts(const struct env *e)
{
	return e->max_fix;
}

/* The autonomy level. */
enum env_autonomy
env_autonomy(const struct env *e)
{
	return e->autonomy;
}

/* The wire name of an autonomy level. */
const char *
env_autonomy_name(enum env_autonomy a)
{
	if ((unsigned)a >= sizeof env_autonomies / sizeof env_autonomies[0])
		return "supervised";
	return env_autonomies[a];
}

/* The command globs that need a human. */
size_t
env_ask_commands(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->ask.v;
	return e->ask.n;
}

/* The command globs always refused. */
size_t
env_deny_commands(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->deny.v;
	return e->deny.n;
}

/* The tools that ask a human in supervised autonomy. */
size_t
env_ask_tools(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->ask_tools.v;
	return e->ask_tools.n;
}

/* The system prompt text. */
const char *
env_system_prompt(const struct env *e)
{
	return e->system;
}

/* The system_file's real path, or NULL. */
const char *
env_system_file(const struct env *e)
{
	return e->system_file;
}

/* The wall-clock limit of a command. */
int
env_timeout_ms(const struct env *e)
{
	return e->timeout_ms;
}

/* The output kept from a command. */
size_t
env_max_output_bytes(const struct env *e)
{
	return e->max_output;
}

/* The provider, or NULL for the daemon's choice. */
const char *
env_llm_provider(const struct env *e)
{
	return e->provider;
}

/* The model, or NULL. */
const char *
env_llm_model(const struct env *e)
{
	return e->model;
}

/* The provider URL, or NULL. */
const char *
env_llm_base_url(const struct env *e)
{
	return e->base_url;
}

/* Model calls in one turn, or 0 for the daemon's limit. */
int
env_llm_max_steps(const struct env *e)
{
	return e->max_steps;
}

/* Bytes of one request to the model, or 0 for the daemon's limit. */
size_t
env_llm_max_request_bytes(const struct env *e)
{
	return e->max_request;
}

/* Warnings from loading. */
size_t
env_warnings(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->warnings.v;
	return e->warnings.n;
}

/* The files a reload watches. */
size_t
env_files(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->files.v;
	return e->files.n;
}

/* Everything, as JSON (env.show). */
json_t *
env_to_json(const struct env *e)
{
	json_t	*o;

	o = json_pack("{s:s, s:b, s:s?, s:s?, s:s?, s:o, s:o, s:s?, s:i, s:s, "
	    "s:o, s:o}",
	    "name", e->name,
	    "builtin", e->builtin,
	    "source", e->source,
	    "workspace", e->workspace,
	    "allowed_root", e->allowed_root,
	    "read_only_roots", env_strs_json(&e->ro),
	    "protected_files", env_strs_json(&e->protected),
	    "check_command", e->check,
	    "max_fix_attempts", e->max_fix,
	    "autonomy", env_autonomy_name(e->autonomy),
	    "ask_commands", env_strs_json(&e->ask),
	    "deny_commands", env_strs_json(&e->deny));
	if (o != NULL) {
		json_object_set_new(o, "ask_tools", env_strs_json(&e->ask_tools));
		json_object_set_new(o, "protected_paths",
		    env_strs_json(&e->literal));
	}
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "prompt", json_pack("{s:s?, s:s?}",
	    "system", e->system, "system_file", e->system_file));
	json_object_set_new(o, "exec", json_pack("{s:i, s:I}",
	    "timeout_ms", e->timeout_ms,
	    "max_output_bytes", (json_int_t)e->max_output));
	json_object_set_new(o, "llm", json_pack("{s:s?, s:s?, s:s?}",
	    "provider", e->provider, "model", e->model,
	    "base_url", e->base_url));
	if (e->max_steps > 0)
		json_object_set_new(json_object_get(o, "llm"), "max_steps",
		    json_integer(e->max_steps));
	if (e->max_request > 0)
		json_object_set_new(json_object_get(o, "llm"),
		    "max_request_bytes", json_integer((json_int_t)e->max_request));
	json_object_set_new(o, "files", env_strs_json(&e->files));
	json_object_set_new(o, "warnings", env_strs_json(&e->warnings));
	json_object_set_new(o, "ecosystem", e->eco != NULL ?
	    json_string(e->eco) : json_null());
	json_object_set_new(o, "knowledge_base", env_strs_json(&e->kb));
	json_object_set_new(o, "mcp", e->mcp != NULL ? json_deep_copy(e->mcp) :
	    json_object());
	json_object_set_new(o, "extends", e->extends ? json_string("builtin") :
	    json_null());
	return o;
}

/* The keys that differ between two envs (see env.h). */
json_t *
env_diff(const struct env *a, const struct env *b)
{
	json_t	*d = json_array();

#define DIFF(cond, key) do {						\
	if (!(cond))							\
		json_array_append_new(d, json_string(key));		\
} while (0)
	DIFF(env_str_equal(a->allowed_root, b->allowed_root), "env.allowed_root");
	DIFF(env_strs_equal(&a->ro, &b->ro), "env.read_only_roots");
	DIFF(env_strs_equal(&a->protected, &b->protected), "env.protected_files");
	DIFF(env_str_equal(a->check, b->check), "env.check_command");
	DIFF(a->max_fix == b->max_fix, "env.max_fix_attempts");
	DIFF(a->autonomy == b->autonomy, "env.autonomy");
	DIFF(env_strs_equal(&a->ask, &b->ask), "env.ask_commands");
	DIFF(env_strs_equal(&a->deny, &b->deny), "env.deny_commands");
	DIFF(env_strs_equal(&a->ask_tools, &b->ask_tools), "env.ask_tools");
	DIFF(env_str_equal(a->system, b->system), "prompt.system");
	DIFF(env_str_equal(a->system_file, b->system_file), "prompt.system_file");
	DIFF(a->timeout_ms == b->timeout_ms, "exec.timeout_ms");
	DIFF(a->max_output == b->max_output, "exec.max_output_bytes");
	DIFF(env_str_equal(a->provider, b->provider), "llm.provider");
	DIFF(env_str_equal(a->model, b->model), "llm.model");
	DIFF(env_str_equal(a->base_url, b->base_url), "llm.base_url");
	DIFF(a->max_steps == b->max_steps, "llm.max_steps");
	DIFF(a->max_request == b->max_request, "llm.max_request_bytes");
	DIFF(env_str_equal(a->eco, b->eco), "ecosystem");
	DIFF(env_mcp(a) == env_mcp(b) || (env_mcp(a) != NULL &&
	    env_mcp(b) != NULL && json_equal(a->mcp, b->mcp)), "mcp");
#undef DIFF
	return d;
}

/* Fills a sandbox config from an env (pointers borrowed). */
void
env_sandbox_config(const struct env *e, struct sandbox_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->root = e->allowed_root;
	cfg->ro_roots = (const char *const *)e->ro.v;
	cfg->nro = e->ro.n;
	cfg->protected = (const char *const *)e->protected.v;
	cfg->nprotected = e->protected.n;
	cfg->literal = (const char *const *)e->literal.v;
	cfg->nliteral = e->literal.n;
}

/* Creates the sandbox an env describes. */
struct sandbox *
env_sandbox(const struct env *e, char **cause)
{
	struct sandbox_config	 cfg;
	struct sandbox		*sb;

	if (!e->finished) {
		*cause = xstrdup("the profile was not checked against a workspace");
		return NULL;
	}
	env_sandbox_config(e, &cfg);
	if ((sb = sandbox_create(&cfg, cause)) == NULL)
		return NULL;
	/* The root as opened, not as checked: it must still be inside. */
	if (!pathgate_is_under(e->workspace, sandbox_root_path(sb, 0),
	    PATHGATE_HOST)) {
		*cause = xasprintf("allowed_root %s moved outside the workspace "
		    "(it is now %s)", e->allowed_root, sandbox_root_path(sb, 0));
		sandbox_free(sb);
		return NULL;
	}
	return sb;
}

