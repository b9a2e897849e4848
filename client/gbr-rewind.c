/*
 * The REPL's /rewind: undoing what the agent changed in the workspace
 * (session.rewind, doc/PROTOCOL.md). "/rewind" lists the turns that
 * changed files, with the files; "/rewind N" (a turn) or "/rewind to SEQ"
 * shows the diff that would undo it, and the prompt asks before anything
 * is undone. A file someone changed after the agent did is named, and
 * the question then says the rewind would undo that change too.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client.h"
#include "gbr-int.h"
#include "render.h"
#include "xmalloc.h"

/* A string from gbrd made safe for the terminal (new). */
static char *
gbr_rw_esc(const json_t *v, int flags)
{
	const char	*s = json_string_value(v);

	return render_escape(s != NULL ? s : "", s != NULL ? strlen(s) : 0,
	    flags, 4096);
}

/* /rewind alone: the turns and the files each changed. */
static void
gbr_rw_list(void)
{
	json_t		*res, *c, *f;
	long long	 turn, last = -1;
	size_t		 i, j;
	char		*e;

	if ((res = gbr_call("session.changes", json_pack("{s:s}", "session",
	    G.session), NULL, 0)) == NULL)
		return;
	if (json_integer_value(json_object_get(res, "floor")) > 0)
		gbr_say("(the changes up to seq %lld were dropped, with old "
		    "log segments or to keep the disk budget, and can no "
		    "longer be rewound)\n",
		    (long long)json_integer_value(json_object_get(res,
		    "floor")));
	json_array_foreach(json_object_get(res, "changes"), i, c) {
		turn = (long long)json_integer_value(json_object_get(c,
		    "turn"));
		if (json_is_true(json_object_get(c, "rewind")))
			gbr_say("  seq %lld: a rewind:", (long long)
			    json_integer_value(json_object_get(c, "seq")));
		else if (turn != last)
			gbr_say("  turn %lld (seq %lld):", turn, (long long)
			    json_integer_value(json_object_get(c, "seq")));
		else
			gbr_say("    (seq %lld):", (long long)
			    json_integer_value(json_object_get(c, "seq")));
		if (!json_is_true(json_object_get(c, "rewind")))
			last = turn;
		json_array_foreach(json_object_get(c, "files"), j, f) {
			e = gbr_rw_esc(f, RENDER_ESC_BACKSLASH |
			    RENDER_ESC_CODES);
			gbr_say(" %s", e);
			free(e);
		}
		gbr_say("\n");
	}
	if (json_array_size(json_object_get(res, "changes")) == 0)
		gbr_say("the agent has changed no file in this session\n");
	else
		gbr_say("/rewind N undoes turn N and every later one; /rewind "
		    "to SEQ undoes every change after SEQ\n");
	json_decref(res);
}

/* /rewind N | /rewind to SEQ: the diff, then the question. */
void
gbr_cmd_rewind(char *arg, char *rest)
{
	struct gbr_capture	 cap;
	struct render		 rd;
	json_t			*params, *res, *c;
	const char		*key = "turn", *num = arg;
	char			*end, *e;
	long long		 n;
	size_t			 i, nconf;
	FILE			*f;

	if (G.session == NULL)
		return;
	if (*arg == '\0') {
		gbr_rw_list();
		return;
	}
	if (strcasecmp(arg, "to") == 0) {
		key = "seq";
		num = rest != NULL ? rest : "";
	}
	n = strtoll(num, &end, 10);
	if (*num == '\0' || *end != '\0' || n < 0 || (n == 0 &&
	    *key == 't')) {
		gbr_say("usage: /rewind [N | to SEQ] (N: a turn)\n");
		return;
	}
	params = json_pack("{s:s, s:I}", "session", G.session, key,
	    (json_int_t)n);
	json_object_set_new(params, "dry_run", json_true());
	if ((res = gbr_call("session.rewind", json_deep_copy(params), NULL,
	    0)) == NULL) {
		json_decref(params);
		return;
	}
	json_object_del(params, "dry_run");
	nconf = json_array_size(json_object_get(res, "conflicts"));
	if ((f = gbr_capture(&cap)) != NULL) {
		rd = G.rd;
		rd.out = f;
		json_array_foreach(json_object_get(res, "changes"), i, c) {
			e = gbr_rw_esc(json_object_get(c, "path"),
			    RENDER_ESC_BACKSLASH | RENDER_ESC_CODES);
			fprintf(f, "%s %s\n", json_string_value(
			    json_object_get(c, "action")), e);
			free(e);
			if (json_is_string(json_object_get(c, "diff")))
				(void)render_diff(&rd, json_string_value(
				    json_object_get(c, "diff")), json_string_length(
				    json_object_get(c, "diff")), "    ", 0, 0);
		}
		json_array_foreach(json_object_get(res, "conflicts"), i, c) {
			e = gbr_rw_esc(json_object_get(c, "path"),
			    RENDER_ESC_BACKSLASH | RENDER_ESC_CODES);
			fprintf(f, "! %s changed since the agent changed it: a "
			    "rewind would undo that change too\n", e);
			free(e);
		}
		gbr_capture_end(&cap);
	}
	if (json_array_size(json_object_get(res, "changes")) == 0) {
		gbr_say("every file is already as it was: nothing to undo\n");
		json_decref(params);
		json_decref(res);
		return;
	}
	if (nconf > 0)
		json_object_set_new(params, "force", json_true());
	json_decref(G.rewind_ask);
	G.rewind_ask = params;
	G.ask = ASK_REWIND;
	json_decref(res);
	gbr_set_line(NULL, NULL);
}

/* The answer to the question /rewind asked. */
void
gbr_rewind_answer(char *line)
{
	json_t	*params = G.rewind_ask, *res, *c;
	size_t	 i;
	char	*e;

	G.rewind_ask = NULL;
	G.ask = ASK_NONE;
	if (params == NULL)
		return;
	if (strcasecmp(line, "y") != 0 && strcasecmp(line, "yes") != 0) {
		gbr_say("nothing was undone\n");
		json_decref(params);
		gbr_ask_update();
		return;
	}
	if ((res = gbr_call("session.rewind", params, NULL, 0)) != NULL) {
		json_array_foreach(json_object_get(res, "changes"), i, c) {
			e = gbr_rw_esc(json_object_get(c, "path"),
			    RENDER_ESC_BACKSLASH | RENDER_ESC_CODES);
			gbr_say("%s %s\n", json_string_value(json_object_get(c,
			    "after"))[0] == '\0' ? "removed" : "restored", e);
			free(e);
		}
		json_array_foreach(json_object_get(res, "failed"), i, c) {
			e = gbr_rw_esc(json_object_get(c, "path"),
			    RENDER_ESC_BACKSLASH | RENDER_ESC_CODES);
			gbr_say("! not restored: %s\n", e);
			free(e);
		}
		gbr_say("rewound (/rewind to %lld undoes this rewind)\n",
		    (long long)json_integer_value(json_object_get(res,
		    "undo_to_seq")));
		json_decref(res);
	}
	gbr_ask_update();
}
