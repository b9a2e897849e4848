/*
 * gbrctl rewind SESSION [--turn N | --to SEQ] [--dry-run] [--force]
 * [--conversation]: undoes what the agent changed in a session's
 * workspace (session.rewind, doc/PROTOCOL.md). Without --turn or --to it
 * lists what rewind knows: each call that changed files, with its seq,
 * turn and files. --dry-run prints the files and the diff that would
 * undo them. A refusal (a file someone changed after the agent did)
 * names the files and exits 1. --conversation also drops the messages
 * after that point from what the model is sent (the history keeps them,
 * and a record that they were dropped); --dry-run says how many.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "escape.h"
#include "xmalloc.h"

#define CTL_REWIND_USAGE "rewind SESSION [--turn N | --to SEQ] [--dry-run] " \
	"[--force] [--conversation]"

/* A number option's value; -1 if it is not one. */
static long long
ctl_rewind_number(const char *opt, const char *s)
{
	char		*end;
	long long	 v;

	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0) {
		fprintf(stderr, "gbrctl: %s: not a number: %s\n", opt, s);
		return -1;
	}
	return v;
}

/*
 * Prints a string from the daemon, escaped for a terminal: a path on one
 * line, a diff with its newlines and tabs.
 */
static void
ctl_rewind_out(const char *s, int flags)
{
	char	*e = escape_string(s != NULL ? s : "", s != NULL ?
	    strlen(s) : 0, flags, 0, NULL);

	fputs(e, stdout);
	free(e);
}

#define ctl_rewind_puts(s)	ctl_rewind_out((s), ESCAPE_BACKSLASH | ESCAPE_CODES)

/* One line: what, a file's path, and why (a conflict, a failure). */
static void
ctl_rewind_why(const char *what, json_t *c)
{
	printf("%s", what);
	ctl_rewind_puts(json_string_value(json_object_get(c, "path")));
	printf(": ");
	ctl_rewind_puts(json_string_value(json_object_get(c, "why")));
	printf("\n");
}

/* Prints a diff line by line, each escaped. */
static void
ctl_rewind_diff(const char *d)
{
	const char	*nl;
	char		*line;

	while (d != NULL && *d != '\0') {
		nl = strchr(d, '\n');
		line = xstrndup(d, nl != NULL ? (size_t)(nl - d) : strlen(d));
		ctl_rewind_out(line, ESCAPE_TAB);
		free(line);
		printf("\n");
		d = nl != NULL ? nl + 1 : NULL;
	}
}

/* What a rewind did to the conversation, or would do (dry run). */
static void
ctl_rewind_conv(json_t *res, int dry)
{
	json_t		*cv = json_object_get(res, "conversation");
	json_int_t	 n = json_integer_value(json_object_get(cv, "messages"));

	if (json_is_string(json_object_get(res, "conversation_error"))) {
		printf("the conversation was not rewound: ");
		ctl_rewind_puts(json_string_value(json_object_get(res,
		    "conversation_error")));
		printf("\n");
		return;
	}
	if (json_object_get(res, "conversation") == NULL)
		return;
	if (!json_is_object(cv)) {
		printf("the conversation has nothing after that point\n");
		return;
	}
	printf("%s %lld message%s from the conversation (after seq %lld)",
	    dry ? "would drop" : "dropped", (long long)n, n == 1 ? "" : "s",
	    (long long)json_integer_value(json_object_get(cv, "to_seq")));
	if (json_is_string(json_object_get(cv, "first_user"))) {
		printf(", from \"");
		ctl_rewind_puts(json_string_value(json_object_get(cv,
		    "first_user")));
		printf("\"");
	}
	printf("\n");
}

/* The list of known changes. */
static int
ctl_rewind_list(struct ctl *ctl, const char *session)
{
	json_t	*res, *c, *f;
	size_t	 i, j;
	int	 r;

	if ((r = ctl_call(ctl, "session.changes", json_pack("{s:s}",
	    "session", session), &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json) {
		ctl_print_json(res);
		json_decref(res);
		return CTL_EXIT_OK;
	}
	if (json_integer_value(json_object_get(res, "floor")) > 0)
		printf("(changes up to seq %lld were dropped, with old log "
		    "segments or to keep the disk budget: they can no longer "
		    "be rewound)\n",
		    (long long)json_integer_value(json_object_get(res,
		    "floor")));
	json_array_foreach(json_object_get(res, "changes"), i, c) {
		printf("seq %-6lld ", (long long)json_integer_value(
		    json_object_get(c, "seq")));
		if (json_is_true(json_object_get(c, "rewind")))
			printf("rewind   ");
		else
			printf("turn %-3lld ", (long long)json_integer_value(
			    json_object_get(c, "turn")));
		ctl_rewind_puts(json_string_value(json_object_get(c, "tool")));
		printf(":");
		json_array_foreach(json_object_get(c, "files"), j, f) {
			printf(" ");
			ctl_rewind_puts(json_string_value(f));
		}
		printf("\n");
	}
	if (json_array_size(json_object_get(res, "changes")) == 0)
		printf("the agent has changed no file in this session\n");
	json_decref(res);
	return CTL_EXIT_OK;
}

/* rewind SESSION [...] */
int
ctl_rewind(struct ctl *ctl, int argc, char **argv)
{
	const char	*session = NULL;
	json_t		*params, *res, *c;
	long long	 v;
	size_t		 i;
	int		 r, dry = 0, k;

	params = json_object();
	for (k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--dry-run") == 0)
			dry = 1;
		else if (strcmp(argv[k], "--force") == 0)
			json_object_set_new(params, "force", json_true());
		else if (strcmp(argv[k], "--conversation") == 0)
			json_object_set_new(params, "conversation", json_true());
		else if ((strcmp(argv[k], "--turn") == 0 ||
		    strcmp(argv[k], "--to") == 0) && k + 1 < argc) {
			if ((v = ctl_rewind_number(argv[k], argv[k + 1])) < 0)
				goto usage;
			json_object_set_new(params, strcmp(argv[k], "--turn") ==
			    0 ? "turn" : "seq", json_integer(v));
			k++;
		} else if (argv[k][0] != '-' && session == NULL)
			session = argv[k];
		else
			goto usage;
	}
	if (session == NULL)
		goto usage;
	if (json_object_get(params, "turn") == NULL &&
	    json_object_get(params, "seq") == NULL) {
		json_decref(params);
		return ctl_rewind_list(ctl, session);
	}
	json_object_set_new(params, "session", json_string(session));
	if (dry)
		json_object_set_new(params, "dry_run", json_true());
	if ((r = ctl_call(ctl, "session.rewind", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else if (dry) {
		json_array_foreach(json_object_get(res, "conflicts"), i, c)
			ctl_rewind_why("conflict: ", c);
		json_array_foreach(json_object_get(res, "changes"), i, c) {
			printf("%s ", json_string_value(json_object_get(c,
			    "action")));
			ctl_rewind_puts(json_string_value(json_object_get(c,
			    "path")));
			printf("\n");
			if (json_string_value(json_object_get(c, "diff")) !=
			    NULL)
				ctl_rewind_diff(json_string_value(
				    json_object_get(c, "diff")));
		}
		ctl_rewind_conv(res, 1);
	} else {
		json_array_foreach(json_object_get(res, "changes"), i, c) {
			printf("%s ", json_string_value(json_object_get(c,
			    "after"))[0] == '\0' ? "removed" : "restored");
			ctl_rewind_puts(json_string_value(json_object_get(c,
			    "path")));
			printf("\n");
		}
		json_array_foreach(json_object_get(res, "failed"), i, c)
			ctl_rewind_why("failed ", c);
		ctl_rewind_conv(res, 0);
		if (json_object_get(res, "undo_to_seq") != NULL)
			printf("rewound at seq %lld; to undo this rewind: "
			    "gbrctl rewind %s --to %lld\n", (long long)
			    json_integer_value(json_object_get(res, "seq")),
			    session, (long long)json_integer_value(
			    json_object_get(res, "undo_to_seq")));
		else
			printf("rewound at seq %lld\n", (long long)
			    json_integer_value(json_object_get(res, "seq")));
		r = json_array_size(json_object_get(res, "failed")) > 0 ||
		    json_object_get(res, "conversation_error") != NULL ?
		    CTL_EXIT_ERROR : CTL_EXIT_OK;
	}
	json_decref(res);
	return r;

usage:
	json_decref(params);
	fprintf(stderr, "usage: gbrctl %s\n", CTL_REWIND_USAGE);
	return CTL_EXIT_USAGE;
}
