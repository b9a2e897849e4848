/*
 * gbrctl's tool and environment commands: "tool SESSION NAME JSON" runs a
 * tool exactly as the agent would (tool.call), "tools" lists them, and
 * "env list|show|use|reload" wraps the env.* methods.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "ctl.h"
#include "escape.h"
#include "render.h"
#include "xmalloc.h"

/* tool SESSION NAME [JSON-ARGS|-] */
int
ctl_tool(struct ctl *ctl, int argc, char **argv)
{
	json_error_t	 jerr;
	json_t		*args = NULL, *res;
	char		*in = NULL;
	int		 r;

	if (argc == 3) {
		/* "-": from stdin, for arguments past the command line's limit. */
		if (strcmp(argv[2], "-") == 0 && (in = ctl_read_stdin()) == NULL)
			return CTL_EXIT_USAGE;
		args = json_loads(in != NULL ? in : argv[2],
		    JSON_REJECT_DUPLICATES, &jerr);
		free(in);
		if (args == NULL || !json_is_object(args)) {
			fprintf(stderr, "gbrctl: JSON-ARGS must be a JSON object%s%s\n",
			    args == NULL ? ": " : "", args == NULL ? jerr.text : "");
			json_decref(args);
			return CTL_EXIT_USAGE;
		}
	}
	r = ctl_call(ctl, "tool.call", json_pack("{s:s, s:s, s:o}", "session",
	    argv[0], "tool", argv[1], "args", args != NULL ? args :
	    json_object()), &res);
	if (r != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else
		ctl_print_json(json_object_get(res, "result"));
	json_decref(res);
	return CTL_EXIT_OK;
}

/* tools */
int
ctl_tools(struct ctl *ctl, int argc, char **argv)
{
	json_t		*res, *t, *params = NULL;
	const char	*d;
	char		*name, *desc;
	size_t		 i;
	int		 r;

	/* With a session, its MCP servers' tools too (untrusted: escaped). */
	if (argc > 0)
		params = json_pack("{s:s}", "session", argv[0]);
	if ((r = ctl_call(ctl, "tool.list", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else {
		json_array_foreach(json_object_get(res, "tools"), i, t) {
			d = json_string_value(json_object_get(t, "description"));
			name = render_escape(json_string_value(json_object_get(t,
			    "name")) != NULL ? json_string_value(
			    json_object_get(t, "name")) : "", json_string_length(
			    json_object_get(t, "name")), ESCAPE_CODES, 200);
			desc = render_escape(d != NULL ? d : "", d != NULL ?
			    strlen(d) : 0, ESCAPE_CODES, 400);
			printf("%-16s %s\n", name, desc);
			free(name);
			free(desc);
		}
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/* mcp-servers [SESSION]: the MCP servers, their state, tools and last error. */
int
ctl_mcp_servers(struct ctl *ctl, int argc, char **argv)
{
	json_t		*res, *srv, *t, *params = NULL;
	const char	*err;
	char		*esc;
	size_t		 i, j;
	int		 r;

	if (argc > 0)
		params = json_pack("{s:s}", "session", argv[0]);
	if ((r = ctl_call(ctl, "mcp.servers", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json) {
		ctl_print_json(res);
		json_decref(res);
		return CTL_EXIT_OK;
	}
	json_array_foreach(json_object_get(res, "servers"), i, srv) {
		printf("%s %s %s (%s", json_string_value(json_object_get(srv,
		    "session")), json_string_value(json_object_get(srv, "name")),
		    json_string_value(json_object_get(srv, "state")),
		    json_string_value(json_object_get(srv, "transport")));
		if (json_is_integer(json_object_get(srv, "pid")))
			printf(", pid %lld", (long long)json_integer_value(
			    json_object_get(srv, "pid")));
		if (json_is_string(json_object_get(srv, "protocol")))
			printf(", protocol %s", json_string_value(
			    json_object_get(srv, "protocol")));
		printf(", %zu tools)\n", json_array_size(json_object_get(srv,
		    "tools")));
		json_array_foreach(json_object_get(srv, "tools"), j, t)
			printf("  %s%s\n", json_string_value(json_object_get(t,
			    "name")), json_is_true(json_object_get(t, "ask")) ?
			    " (asks)" : "");
		if ((err = json_string_value(json_object_get(srv,
		    "last_error"))) != NULL) {
			esc = render_escape(err, strlen(err), ESCAPE_CODES, 1000);
			printf("  last error: %s\n", esc);
			free(esc);
		}
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/*
 * {workspace} for an argument that names a folder (it holds a '/', or is
 * "."), else {session}; NULL (said on stderr) for a folder that is not one.
 */
static json_t *
ctl_dir_or_session(const char *arg)
{
	json_t	*params;
	char	*ws;

	if (strchr(arg, '/') == NULL && strcmp(arg, ".") != 0)
		return json_pack("{s:s}", "session", arg);
	if ((ws = realpath(arg, NULL)) == NULL) {
		fprintf(stderr, "gbrctl: %s: not a folder\n", arg);
		return NULL;
	}
	params = json_pack("{s:s}", "workspace", ws);
	free(ws);
	return params;
}

/* env list SESSION|DIR | show SESSION [ENV] | use SESSION ENV | reload SESSION */
int
ctl_env(struct ctl *ctl, int argc, char **argv)
{
	const char	*sub = argv[0], *method, *cur, *name;
	json_t		*params, *res, *e;
	size_t		 i;
	int		 r;

	if (strcmp(sub, "list") == 0 && argc == 2) {
		method = "env.list";
		if ((params = ctl_dir_or_session(argv[1])) == NULL)
			return CTL_EXIT_USAGE;
	} else if (strcmp(sub, "show") == 0 && (argc == 2 || argc == 3)) {
		method = "env.show";
		params = json_pack("{s:s}", "session", argv[1]);
		if (argc == 3)
			json_object_set_new(params, "env", json_string(argv[2]));
	} else if (strcmp(sub, "use") == 0 && argc == 3) {
		method = "env.use";
		params = json_pack("{s:s, s:s}", "session", argv[1], "env",
		    argv[2]);
	} else if (strcmp(sub, "reload") == 0 && argc == 2) {
		method = "env.reload";
		params = json_pack("{s:s}", "session", argv[1]);
	} else {
		fprintf(stderr, "usage: gbrctl env list SESSION|DIR | show "
		    "SESSION [ENV] | use SESSION ENV | reload SESSION\n");
		return CTL_EXIT_USAGE;
	}
	if ((r = ctl_call(ctl, method, params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else if (strcmp(method, "env.list") == 0) {
		/* "*" marks the session's profile (a listing of a session). */
		cur = json_string_value(json_object_get(res, "current"));
		json_array_foreach(json_object_get(res, "envs"), i, e) {
			name = json_string_value(json_object_get(e, "name"));
			printf("%c %-20s %s\n", cur != NULL && name != NULL &&
			    strcmp(cur, name) == 0 ? '*' : ' ', name != NULL ?
			    name : "?", json_is_true(json_object_get(e,
			    "builtin")) ? "(built in)" : json_string_value(
			    json_object_get(e, "file")) != NULL ?
			    json_string_value(json_object_get(e, "file")) : "");
		}
	} else
		ctl_print_flat("", res);
	json_decref(res);
	return CTL_EXIT_OK;
}

/* A size for people: 1.2 GiB. */
static void
ctl_size(char *buf, size_t len, double b)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t	i = 0;

	while (b >= 1024 && i < sizeof u / sizeof u[0] - 1) {
		b /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%.0f %s", b, u[i]);
	else
		snprintf(buf, len, "%.1f %s", b, u[i]);
}

/* cache du|clean [DIR|SESSION]: the agent's package caches. */
int
ctl_cache(struct ctl *ctl, int argc, char **argv)
{
	const char	*method;
	json_t		*params = NULL, *res, *c;
	char		 a[32], b[32];
	size_t		 i;
	int		 r;

	if (strcmp(argv[0], "du") == 0)
		method = "cache.du";
	else if (strcmp(argv[0], "clean") == 0)
		method = "cache.clean";
	else {
		fprintf(stderr, "usage: gbrctl cache du|clean [DIR|SESSION]\n"
		    "  du     the size of the agent's package caches: a "
		    "workspace's (DIR, or a\n         session's), or every "
		    "one\n  clean  remove them (refused while a command that "
		    "uses one runs)\n");
		return CTL_EXIT_USAGE;
	}
	if (argc == 2) {
		if ((params = ctl_dir_or_session(argv[1])) == NULL)
			return CTL_EXIT_USAGE;
	}
	if ((r = ctl_call(ctl, method, params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else if (strcmp(method, "cache.du") == 0) {
		json_array_foreach(json_object_get(res, "caches"), i, c) {
			ctl_size(a, sizeof a, (double)json_integer_value(
			    json_object_get(c, "bytes")));
			printf("%10s%s %8lld files  %s\n", a,
			    json_is_true(json_object_get(c, "complete")) ? " " :
			    "+", (long long)json_integer_value(
			    json_object_get(c, "files")), json_string_value(
			    json_object_get(c, "path")));
		}
		ctl_size(a, sizeof a, (double)json_integer_value(
		    json_object_get(res, "bytes")));
		ctl_size(b, sizeof b, (double)json_integer_value(
		    json_object_get(res, "max_bytes")));
		printf("%10s%s in all; each workspace's is cleared over %s "
		    "([exec] cache_max_bytes)\n", a, json_is_true(
		    json_object_get(res, "complete")) ? " " : "+", b);
	} else {
		json_array_foreach(json_object_get(res, "cleaned"), i, c)
			printf("removed %s\n", json_string_value(c));
		if (json_array_size(json_object_get(res, "cleaned")) == 0)
			printf("no cache to remove\n");
	}
	json_decref(res);
	return CTL_EXIT_OK;
}
