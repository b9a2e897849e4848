/*
 * The [mcp.NAME] sections of environment profiles (INI), "mcp": {NAME:
 * {...}} in JSON: the external MCP servers a session may use (daemon/mcp/
 * runs them). Both formats fill one normalized JSON object per server,
 * kept in the env as env->mcp and handed out by env_mcp():
 *
 *   {command, args: [...], env: [...], ask, tools: [...],
 *    deny_tools: [...], timeout_ms, idle_ms}      a server over stdio
 *   {url, headers: [...], ...the same keys but command, args and env}
 *                                                  Streamable HTTP
 *
 * Every value is checked here, so the MCP client trusts what it gets:
 * a server's name is 1 to 32 of [A-Za-z0-9-] and single underscores
 * (never "__", which separates it from a tool's name), at most
 * ENV_MCP_MAX servers, lists bounded like the profile's others.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "env.h"
#include "env-int.h"
#include "xmalloc.h"

#define ENV_MCP_MAX		16	/* servers in one profile */
#define ENV_MCP_NAME_MAX	32	/* bytes of a server's name */
#define ENV_MCP_ARGS_MAX	64	/* items of args, env, tools */

#define NITEMS(a)	(sizeof (a) / sizeof (a)[0])

static const char *const env_mcp_lists[] = { "args", "env", "tools",
    "deny_tools", "headers" };
/* Headers gbrd sets itself: a profile's headers never name them. */
static const char *const env_mcp_own_headers[] = { "accept",
    "content-type", "content-length", "host", "transfer-encoding",
    "connection", "mcp-session-id", "mcp-protocol-version", "expect",
    "last-event-id" };
static const char *const env_mcp_strings[] = { "command", "url", "ask" };
static const char *const env_mcp_ints[] = { "timeout_ms", "idle_ms" };

/* True if s may name a server (see the top of the file). */
int
env_mcp_name_valid(const char *s)
{
	size_t	i;

	for (i = 0; s[i] != '\0'; i++) {
		if (i >= ENV_MCP_NAME_MAX || !((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return 0;
		if (s[i] == '_' && s[i + 1] == '_')
			return 0;
	}
	return i > 0 && s[0] != '_' && s[i - 1] != '_';
}

/* True if name is one of n. */
static int
env_mcp_in(const char *name, const char *const *v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return 1;
	return 0;
}


/* The server's object, made on first sight. NULL with *why if refused. */
static json_t *
env_mcp_server(struct env *e, const char *server, const char **why)
{
	json_t	*o;

	if (!env_mcp_name_valid(server)) {
		*why = "a server's name is 1 to 32 of [A-Za-z0-9_-], not "
		    "starting or ending with '_', without '__'";
		return NULL;
	}
	if (e->mcp == NULL)
		e->mcp = json_object();
	if ((o = json_object_get(e->mcp, server)) != NULL)
		return o;
	if (json_object_size(e->mcp) >= ENV_MCP_MAX) {
		*why = "too many MCP servers (at most 16)";
		return NULL;
	}
	o = json_object();
	json_object_set_new(e->mcp, server, o);
	return o;
}

/* Checks a headers item: Header-Name=VARIABLE. Returns NULL or why not. */
static const char *
env_mcp_header_bad(const char *v, size_t len)
{
	const char	*eq = memchr(v, '=', len);
	size_t		 i, n;

	if (eq == NULL || eq == v || eq == v + len - 1)
		return "a header is Name=VARIABLE (its value is that variable "
		    "of gbrd's environment)";
	n = (size_t)(eq - v);
	for (i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' &&
		    v[i] <= 'Z') || (v[i] >= '0' && v[i] <= '9') ||
		    v[i] == '-' || v[i] == '_'))
			return "a header's name is [A-Za-z0-9_-]";
	for (i = 0; i < NITEMS(env_mcp_own_headers); i++)
		if (strlen(env_mcp_own_headers[i]) == n &&
		    strncasecmp(env_mcp_own_headers[i], v, n) == 0)
			return "gbrd sets this header itself";
	for (i = n + 1; i < len; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' &&
		    v[i] <= 'Z') || (v[i] >= '0' && v[i] <= '9') ||
		    v[i] == '_') || (i == n + 1 && v[i] >= '0' && v[i] <= '9'))
			return "a variable name is [A-Za-z_][A-Za-z0-9_]*";
	return NULL;
}

/* Checks one list item. Returns NULL or why not. */
static const char *
env_mcp_item_bad(const char *key, const char *v, size_t len)
{
	size_t	i;

	if (len == 0 || len > ENV_ITEM_MAX || strlen(v) != len)
		return "an empty, too long or NUL-holding item";
	if (strcmp(key, "args") == 0)
		return NULL;
	if (strcmp(key, "headers") == 0)
		return env_mcp_header_bad(v, len);
	for (i = 0; i < len; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' &&
		    v[i] <= 'Z') || (v[i] >= '0' && v[i] <= '9') ||
		    v[i] == '_' || v[i] == '-' || v[i] == '.') || i >= 128)
			return strcmp(key, "env") == 0 ? "a variable name is "
			    "[A-Za-z0-9_]" : "a tool name is [A-Za-z0-9_.-]";
	if (strcmp(key, "env") == 0 && (memchr(v, '-', len) != NULL ||
	    memchr(v, '.', len) != NULL || (v[0] >= '0' && v[0] <= '9')))
		return "a variable name is [A-Za-z_][A-Za-z0-9_]*";
	return NULL;
}

/*
 * Sets one key of a server from a string (both formats; INI lists are
 * comma-separated and a repeated key adds items). Returns NULL or why not
 * (static).
 */
static const char *
env_mcp_set(struct env *e, const char *server, const char *key,
    const char *v, size_t len, int from_ini)
{
	json_t		*o, *l;
	const char	*why = NULL;
	char		*end, *s;
	long long	 n;
	size_t		 i = 0, start, stop;

	if ((o = env_mcp_server(e, server, &why)) == NULL)
		return why;
	if (env_mcp_in(key, env_mcp_strings, NITEMS(env_mcp_strings))) {
		if (json_object_get(o, key) != NULL)
			return "given twice";
		if (len == 0 || len > ENV_ITEM_MAX || strlen(v) != len)
			return "an empty, too long or NUL-holding value";
		if (strcmp(key, "ask") == 0 && strcmp(v, "all") != 0 &&
		    strcmp(v, "writes") != 0 && strcmp(v, "none") != 0)
			return "ask is all, writes or none";
		if (strcmp(key, "url") == 0 && strncmp(v, "http://", 7) != 0 &&
		    strncmp(v, "https://", 8) != 0)
			return "url must start with http:// or https://";
		json_object_set_new(o, key, json_stringn(v, len));
		return NULL;
	}
	if (env_mcp_in(key, env_mcp_ints, NITEMS(env_mcp_ints))) {
		if (json_object_get(o, key) != NULL)
			return "given twice";
		s = xstrndup(v, len);
		n = strtoll(s, &end, 10);
		if (*s == '\0' || *end != '\0' || n < 0 || n > 86400000 ||
		    (strcmp(key, "timeout_ms") == 0 && n < 100)) {
			free(s);
			return strcmp(key, "timeout_ms") == 0 ? "timeout_ms is "
			    "100 to 86400000" : "idle_ms is 0 (never) to 86400000";
		}
		free(s);
		json_object_set_new(o, key, json_integer(n));
		return NULL;
	}
	if (!env_mcp_in(key, env_mcp_lists, NITEMS(env_mcp_lists)))
		return "unknown key (command, args, url, env, headers, ask, "
		    "tools, deny_tools, timeout_ms, idle_ms)";
	if ((l = json_object_get(o, key)) == NULL) {
		l = json_array();
		json_object_set_new(o, key, l);
	}
	if (!from_ini) {
		if ((why = env_mcp_item_bad(key, v, len)) != NULL)
			return why;
		if (json_array_size(l) >= ENV_MCP_ARGS_MAX)
			return "more than 64 items";
		json_array_append_new(l, json_stringn(v, len));
		return NULL;
	}
	while (i <= len) {
		start = i;
		while (i < len && v[i] != ',')
			i++;
		stop = i;
		while (start < stop && (v[start] == ' ' || v[start] == '\t'))
			start++;
		while (stop > start && (v[stop - 1] == ' ' ||
		    v[stop - 1] == '\t'))
			stop--;
		if (stop > start) {
			s = xstrndup(v + start, stop - start);
			why = env_mcp_item_bad(key, s, stop - start);
			if (why == NULL && json_array_size(l) >= ENV_MCP_ARGS_MAX)
				why = "more than 64 items";
			if (why == NULL)
				json_array_append_new(l, json_string(s));
			free(s);
			if (why != NULL)
				return why;
		}
		i++;
	}
	return NULL;
}

/* One INI key of [mcp.SERVER]. Returns NULL or why not (static). */
const char *
env_mcp_ini(struct env *e, const char *server, const char *key,
    const char *value)
{
	return env_mcp_set(e, server, key, value, strlen(value), 1);
}

/* The JSON "mcp" section. Returns 0, or -1 and why not in *why (new). */
int
env_mcp_json(struct env *e, json_t *sec, char **why)
{
	const char	*server, *key, *bad;
	json_t		*o, *v, *item;
	char		 num[32];
	size_t		 i;

	*why = NULL;
	if (!json_is_object(sec)) {
		*why = xstrdup("[mcp] must be an object of servers");
		return -1;
	}
	json_object_foreach(sec, server, o) {
		if (!json_is_object(o)) {
			*why = xasprintf("mcp.%s must be an object", server);
			return -1;
		}
		if (json_object_size(o) == 0 &&
		    env_mcp_server(e, server, &bad) == NULL) {
			*why = xasprintf("mcp.%s: %s", server, bad);
			return -1;
		}
		json_object_foreach(o, key, v) {
			bad = NULL;
			if (json_is_string(v))
				bad = env_mcp_set(e, server, key,
				    json_string_value(v), json_string_length(v),
				    0);
			else if (json_is_integer(v)) {
				snprintf(num, sizeof num, "%lld",
				    (long long)json_integer_value(v));
				bad = env_mcp_set(e, server, key, num,
				    strlen(num), 0);
			} else if (json_is_array(v) && env_mcp_in(key,
			    env_mcp_lists, NITEMS(env_mcp_lists))) {
				json_array_foreach(v, i, item) {
					if (!json_is_string(item)) {
						bad = "items must be strings";
						break;
					}
					if ((bad = env_mcp_set(e, server, key,
					    json_string_value(item),
					    json_string_length(item), 0)) != NULL)
						break;
				}
				/* An empty list is still given. */
				if (json_array_size(v) == 0 && bad == NULL)
					bad = env_mcp_set(e, server, key, "", 0,
					    1);
			} else
				bad = "a string, a number or a list of strings";
			if (bad != NULL) {
				*why = xasprintf("mcp.%s.%s: %s", server, key,
				    bad);
				return -1;
			}
		}
	}
	return 0;
}

/* After parsing: each server runs a command or names a url. */
int
env_mcp_finish(struct env *e, char **why)
{
	const char	*server;
	json_t		*o;

	*why = NULL;
	json_object_foreach(e->mcp, server, o) {
		if ((json_object_get(o, "command") == NULL) ==
		    (json_object_get(o, "url") == NULL)) {
			*why = xasprintf("[mcp.%s]: give command (a server over "
			    "stdio) or url (Streamable HTTP), not both", server);
			return -1;
		}
		if (json_object_get(o, "url") != NULL &&
		    (json_object_get(o, "args") != NULL ||
		    json_object_get(o, "env") != NULL)) {
			*why = xasprintf("[mcp.%s]: args and env go with command, "
			    "not url (a url server's secrets go in headers)",
			    server);
			return -1;
		}
		if (json_object_get(o, "command") != NULL &&
		    json_object_get(o, "headers") != NULL) {
			*why = xasprintf("[mcp.%s]: headers go with url, not "
			    "command", server);
			return -1;
		}
	}
	return 0;
}

/* The MCP servers of a profile (borrowed), or NULL if none. */
const json_t *
env_mcp(const struct env *e)
{
	return e->mcp != NULL && json_object_size(e->mcp) > 0 ? e->mcp : NULL;
}
