/*
 * The tool registry (see tool.h) and the argument check. The check knows
 * the subset of JSON Schema our tools use: an object with "properties"
 * whose "type" is string, integer, boolean, number, array or object,
 * "minimum" and "maximum" on integers, "enum" on strings, "required", and
 * "additionalProperties": false. That is enough to give the agent a
 * precise error, and small enough to trust.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "tool.h"
#include "xmalloc.h"

#define TOOL_MAX	256

struct tool_entry {
	const struct tool_def	*def;
	json_t			*schema;	/* parsed once */
	tool_async_fn		 afn;		/* asynchronous, or NULL */
};

static struct tool_entry	tools[TOOL_MAX];
static size_t			ntools;
static const struct tool_provider *provider;	/* session tools, or NULL */

/* Sets the provider of session tools. */
void
tool_set_provider(const struct tool_provider *p)
{
	provider = p;
}

/* True if name is a provider's (it holds the separator). */
static int
tool_is_provided(const char *session, const char *name)
{
	return provider != NULL && session != NULL && name != NULL &&
	    strstr(name, TOOL_PROVIDER_SEP) != NULL;
}

/* Registers a table of tools: synchronous, or through afn. */
static int
tool_register_entry(const struct tool_def *defs, size_t n, tool_async_fn afn,
    char **cause)
{
	json_error_t	 jerr;
	json_t		*schema;
	size_t		 i;

	*cause = NULL;
	for (i = 0; i < n; i++) {
		if (ntools >= TOOL_MAX) {
			*cause = xasprintf("more than %d tools", TOOL_MAX);
			return -1;
		}
		if (tool_find(defs[i].name) != NULL) {
			*cause = xasprintf("tool %s registered twice", defs[i].name);
			return -1;
		}
		schema = json_loads(defs[i].schema, 0, &jerr);
		if (schema == NULL || !json_is_object(schema)) {
			*cause = xasprintf("tool %s: schema: %s", defs[i].name,
			    schema == NULL ? jerr.text : "not an object");
			json_decref(schema);
			return -1;
		}
		tools[ntools].def = &defs[i];
		tools[ntools].schema = schema;
		tools[ntools].afn = afn;
		ntools++;
	}
	return 0;
}

/* Registers a table of tools. */
int
tool_register(const struct tool_def *defs, size_t n, char **cause)
{
	return tool_register_entry(defs, n, NULL, cause);
}

/* Registers a table of asynchronous tools. */
int
tool_register_async(const struct tool_def *defs, size_t n, tool_async_fn afn,
    char **cause)
{
	return tool_register_entry(defs, n, afn, cause);
}

/* Forgets every tool. */
void
tool_reset(void)
{
	size_t	i;

	for (i = 0; i < ntools; i++)
		json_decref(tools[i].schema);
	ntools = 0;
}

/* Finds an entry by name. */
static struct tool_entry *
tool_entry(const char *name)
{
	size_t	i;

	for (i = 0; i < ntools; i++)
		if (strcmp(tools[i].def->name, name) == 0)
			return &tools[i];
	return NULL;
}

/* The tool called name, or NULL. */
const struct tool_def *
tool_find(const char *name)
{
	struct tool_entry	*t = tool_entry(name);

	return t != NULL ? t->def : NULL;
}

/* A built-in or a provider's tool. */
const struct tool_def *
tool_lookup(const char *session, const char *name)
{
	json_t	*schema;

	if (tool_is_provided(session, name))
		return provider->find(session, name, &schema);
	return tool_find(name);
}

/* Every tool, MCP-shaped. */
json_t *
tool_list_json(const char *session)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; i < ntools; i++) {
		const struct tool_def *d = tools[i].def;

		json_array_append_new(a, json_pack("{s:s, s:s, s:O, s:{s:b, s:b, s:b}}",
		    "name", d->name,
		    "description", d->description,
		    "inputSchema", tools[i].schema,
		    "annotations",
			"readOnlyHint", d->read_only,
			"destructiveHint", d->destructive,
			"idempotentHint", d->idempotent));
	}
	if (provider != NULL && session != NULL)
		provider->list(session, a);
	return a;
}

/* True if v has the JSON type named by type. */
static int
tool_type_ok(const char *type, json_t *v)
{
	if (strcmp(type, "string") == 0)
		return json_is_string(v);
	if (strcmp(type, "integer") == 0)
		return json_is_integer(v);
	if (strcmp(type, "number") == 0)
		return json_is_number(v);
	if (strcmp(type, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(type, "array") == 0)
		return json_is_array(v);
	if (strcmp(type, "object") == 0)
		return json_is_object(v);
	return 0;
}

/* Checks args against a schema (see the top of the file). */
int
tool_check_args(json_t *schema, json_t *args, char **reason)
{
	json_t		*props, *req, *p, *v, *t, *lim, *e;
	const char	*key;
	size_t		 i;
	int		 found;

	*reason = NULL;
	if (args == NULL || json_is_null(args))
		args = NULL;
	else if (!json_is_object(args)) {
		*reason = xstrdup("the arguments must be an object");
		return -1;
	}
	props = json_object_get(schema, "properties");
	req = json_object_get(schema, "required");
	json_array_foreach(req, i, v) {
		if (!json_is_string(v))
			continue;
		if (args == NULL || json_object_get(args, json_string_value(v)) == NULL) {
			*reason = xasprintf("'%s' is required", json_string_value(v));
			return -1;
		}
	}
	if (args == NULL)
		return 0;
	json_object_foreach(args, key, v) {
		p = json_object_get(props, key);
		if (p == NULL) {
			if (json_is_false(json_object_get(schema,
			    "additionalProperties"))) {
				*reason = xasprintf("unknown argument '%s'", key);
				return -1;
			}
			continue;
		}
		t = json_object_get(p, "type");
		if (json_is_string(t) && !tool_type_ok(json_string_value(t), v)) {
			*reason = xasprintf("'%s' must be %s %s", key,
			    strcmp(json_string_value(t), "integer") == 0 ||
			    strcmp(json_string_value(t), "array") == 0 ||
			    strcmp(json_string_value(t), "object") == 0 ? "an" : "a",
			    json_string_value(t));
			return -1;
		}
		if (json_is_integer(v)) {
			lim = json_object_get(p, "minimum");
			if (json_is_integer(lim) &&
			    json_integer_value(v) < json_integer_value(lim)) {
				*reason = xasprintf("'%s' must be at least %lld",
				    key, json_integer_value(lim));
				return -1;
			}
			lim = json_object_get(p, "maximum");
			if (json_is_integer(lim) &&
			    json_integer_value(v) > json_integer_value(lim)) {
				*reason = xasprintf("'%s' must be at most %lld",
				    key, json_integer_value(lim));
				return -1;
			}
		}
		lim = json_object_get(p, "enum");
		if (json_is_array(lim)) {
			found = 0;
			json_array_foreach(lim, i, e)
				if (json_equal(e, v))
					found = 1;
			if (!found) {
				*reason = xasprintf("'%s' has a value it cannot take",
				    key);
				return -1;
			}
		}
	}
	return 0;
}

/* Calls a tool (see tool.h). */
int
tool_call(struct tool_ctx *ctx, const char *name, json_t *args,
    json_t **result, enum gbr_err *kind, char **reason)
{
	struct tool_entry	*t;
	char			*why;

	*result = NULL;
	*reason = NULL;
	if (name == NULL || (t = tool_entry(name)) == NULL) {
		*kind = GBR_ERR_METHOD_NOT_FOUND;
		*reason = xasprintf("no tool called '%s'", name != NULL ? name : "");
		return -1;
	}
	if (tool_check_args(t->schema, args, &why) != 0) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xasprintf("%s: %s", name, why);
		free(why);
		return -1;
	}
	if (t->def->fn == NULL) {
		*kind = GBR_ERR_INTERNAL;
		*reason = xasprintf("%s is asynchronous: call it through "
		    "tool_call_async", name);
		return -1;
	}
	if (t->def->fn(ctx, args, result, kind, reason) != 0) {
		if (*reason == NULL)
			*reason = xasprintf("%s failed", name);
		json_decref(*result);
		*result = NULL;
		return -1;
	}
	if (*result == NULL)
		*result = json_object();
	return 0;
}

/* Calls a tool of either kind (see tool.h). */
int
tool_call_async(struct tool_ctx *ctx, const char *name, json_t *args,
    tool_output_cb out, tool_done_cb done, void *arg, struct tool_job **job,
    enum gbr_err *kind, char **reason, json_t **data)
{
	struct tool_entry	*t;
	json_t			*result;
	char			*why;

	*reason = NULL;
	*data = NULL;
	if (job != NULL)
		*job = NULL;
	if (tool_is_provided(ctx->session, name))
		return provider->call(ctx, name, args, out, done, arg, job,
		    kind, reason, data);
	if (name == NULL || (t = tool_entry(name)) == NULL) {
		*kind = GBR_ERR_METHOD_NOT_FOUND;
		*reason = xasprintf("no tool called '%s'", name != NULL ? name : "");
		return -1;
	}
	if (t->afn != NULL)
		return t->afn(ctx, name, args, out, done, arg, job, kind,
		    reason, data);
	if (tool_check_args(t->schema, args, &why) != 0) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xasprintf("%s: %s", name, why);
		free(why);
		return -1;
	}
	/* A synchronous tool: its failure is a result too, through done. */
	result = NULL;
	why = NULL;
	if (t->def->fn(ctx, args, &result, kind, &why) != 0) {
		json_decref(result);
		if (why == NULL)
			why = xasprintf("%s failed", name);
		done(arg, 1, *kind, why, NULL);
		free(why);
		return 0;
	}
	if (result == NULL)
		result = json_object();
	done(arg, 0, GBR_ERR_INTERNAL, NULL, result);
	json_decref(result);
	return 0;
}

/* Ends an asynchronous call early. */
void
tool_job_cancel(struct tool_job *job)
{
	job->cancel(job);
}

/* Checks a tool's name and arguments. */
int
tool_check(const char *session, const char *name, json_t *args,
    enum gbr_err *kind, char **reason)
{
	struct tool_entry	*t;
	json_t			*schema = NULL;
	char			*why;

	*reason = NULL;
	if (tool_is_provided(session, name)) {
		if (provider->find(session, name, &schema) == NULL) {
			*kind = GBR_ERR_METHOD_NOT_FOUND;
			*reason = xasprintf("no tool called '%s' (an MCP "
			    "server's tool: see mcp.servers)", name);
			return -1;
		}
	} else if (name == NULL || (t = tool_entry(name)) == NULL) {
		*kind = GBR_ERR_METHOD_NOT_FOUND;
		*reason = xasprintf("no tool called '%s'", name != NULL ? name : "");
		return -1;
	} else
		schema = t->schema;
	if (tool_check_args(schema, args, &why) != 0) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xasprintf("%s: %s", name, why);
		free(why);
		return -1;
	}
	return 0;
}
