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
	json_t	*res, *t;
	size_t	 i;
	int	 r;

	if ((r = ctl_call(ctl, "tool.list", NULL, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else {
		json_array_foreach(json_object_get(res, "tools"), i, t)
			printf("%-16s %s\n", json_string_value(json_object_get(t,
			    "name")), json_string_value(json_object_get(t,
			    "description")));
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/* env list SESSION|DIR | show SESSION [ENV] | use SESSION ENV | reload SESSION */
int
ctl_env(struct ctl *ctl, int argc, char **argv)
{
	const char	*sub = argv[0], *method, *cur, *name;
	json_t		*params, *res, *e;
	char		*ws;
	size_t		 i;
	int		 r;

	if (strcmp(sub, "list") == 0 && argc == 2) {
		method = "env.list";
		if (strchr(argv[1], '/') != NULL || strcmp(argv[1], ".") == 0) {
			if ((ws = realpath(argv[1], NULL)) == NULL) {
				fprintf(stderr, "gbrctl: %s: not a folder\n",
				    argv[1]);
				return CTL_EXIT_USAGE;
			}
			params = json_pack("{s:s}", "workspace", ws);
			free(ws);
		} else
			params = json_pack("{s:s}", "session", argv[1]);
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
