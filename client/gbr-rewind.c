/*
 * The REPL's /rewind: undoing what the agent changed in the workspace
 * (session.rewind, doc/PROTOCOL.md). "/rewind" lists the turns that
 * changed files, with the files; "/rewind N" (a turn) or "/rewind to SEQ"
 * shows the diff that would undo it, and the prompt asks before anything
 * is undone. A file someone changed after the agent did is named, and
 * the question then says the rewind would undo that change too.
 * "--conversation" also drops the later messages from what the model is
 * sent; without it the question offers that too ("c"), saying how many.
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

/*
 * The conversation part of a dry run's reply, or NULL. Without asking
 * for it (conv 0), a second dry run finds out quietly what the
 * conversation would lose, so the question can offer it.
 */
static json_t *
gbr_rw_conv(json_t *params, json_t *res, int conv)
{
	json_t	*p, *reply, *cv;
	char	*cause;

	if (conv) {
		cv = json_object_get(res, "conversation");
		return json_is_object(cv) ? json_incref(cv) : NULL;
	}
	p = json_deep_copy(params);
	json_object_set_new(p, "dry_run", json_true());
	json_object_set_new(p, "conversation", json_true());
	if ((reply = client_call(G.cl, "session.rewind", p, GBR_CALL_MS,
	    &cause)) == NULL) {
		free(cause);
		return NULL;
	}
	cv = json_object_get(json_object_get(reply, "result"), "conversation");
	cv = json_is_object(cv) ? json_incref(cv) : NULL;
	json_decref(reply);
	return cv;
}

/* The question /rewind asks, in buf. */
void
gbr_rewind_prompt(char *buf, size_t size)
{
	json_t		*p = G.rewind_ask;
	int		 files = json_is_true(json_object_get(p, "_files"));
	int		 conv = json_is_true(json_object_get(p, "conversation"));
	const char	*force = json_is_true(json_object_get(p, "force")) ?
			    " (and the later ones named above)" : "";

	if (conv && !files)
		snprintf(buf, size, "drop these %lld messages from the "
		    "conversation? [y/N] ", G.rewind_conv);
	else if (conv)
		snprintf(buf, size, "undo these changes%s and drop the %lld "
		    "later messages? [y/N] ", force, G.rewind_conv);
	else if (G.rewind_conv > 0)
		snprintf(buf, size, "undo these changes%s? [y/N, c: and drop "
		    "the %lld later messages] ", force, G.rewind_conv);
	else
		snprintf(buf, size, "undo these changes%s? [y/N] ", force);
}

/*
 * /rewind N | /rewind to SEQ, each with --conversation or not: the diff
 * (and what the conversation would lose), then the question.
 */
void
gbr_cmd_rewind(char *arg, char *rest)
{
	struct gbr_capture	 cap;
	struct render		 rd;
	json_t			*params, *res, *c, *cv;
	const char		*key = "turn", *num = NULL, *w;
	char			*words, *end, *e, *sp;
	long long		 n;
	size_t			 i, nconf, nch;
	int			 conv = 0, bad = 0;
	FILE			*f;

	if (G.session == NULL)
		return;
	if (*arg == '\0') {
		gbr_rw_list();
		return;
	}
	/* N, to SEQ and --conversation, in any order. */
	words = xasprintf("%s %s", arg, rest != NULL ? rest : "");
	for (sp = words; *(sp += strspn(sp, " \t")) != '\0'; ) {
		w = sp;
		sp += strcspn(sp, " \t");
		if (*sp != '\0')
			*sp++ = '\0';
		if (strcmp(w, "--conversation") == 0)
			conv = 1;
		else if (strcasecmp(w, "to") == 0 && num == NULL)
			key = "seq";
		else if (num == NULL)
			num = w;
		else
			bad = 1;
	}
	n = num != NULL ? strtoll(num, &end, 10) : -1;
	if (bad || num == NULL || *num == '\0' || *end != '\0' || n < 0 ||
	    (n == 0 && *key == 't')) {
		gbr_say("usage: /rewind [N | to SEQ] [--conversation] (N: a "
		    "turn; --conversation: also drop the later messages)\n");
		free(words);
		return;
	}
	free(words);
	params = json_pack("{s:s, s:I}", "session", G.session, key,
	    (json_int_t)n);
	if (conv)
		json_object_set_new(params, "conversation", json_true());
	json_object_set_new(params, "dry_run", json_true());
	if ((res = gbr_call("session.rewind", json_deep_copy(params), NULL,
	    0)) == NULL) {
		json_decref(params);
		return;
	}
	json_object_del(params, "dry_run");
	nconf = json_array_size(json_object_get(res, "conflicts"));
	nch = json_array_size(json_object_get(res, "changes"));
	cv = nch > 0 || conv ? gbr_rw_conv(params, res, conv) : NULL;
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
		if (cv != NULL) {
			e = gbr_rw_esc(json_object_get(cv, "first_user"),
			    RENDER_ESC_BACKSLASH | RENDER_ESC_CODES);
			fprintf(f, "the conversation after seq %lld: %lld "
			    "message%s%s%s%s\n", (long long)json_integer_value(
			    json_object_get(cv, "to_seq")), (long long)
			    json_integer_value(json_object_get(cv, "messages")),
			    json_integer_value(json_object_get(cv, "messages"))
			    == 1 ? "" : "s", *e != '\0' ? ", from \"" : "", e,
			    *e != '\0' ? "\"" : "");
			free(e);
		} else if (conv)
			fprintf(f, "the conversation has nothing after that "
			    "point\n");
		gbr_capture_end(&cap);
	}
	if (nch == 0 && cv == NULL) {
		gbr_say("every file is already as it was: nothing to undo\n");
		json_decref(params);
		json_decref(res);
		return;
	}
	if (nconf > 0)
		json_object_set_new(params, "force", json_true());
	/* Whether files change: the question says what it undoes. */
	json_object_set_new(params, "_files", json_boolean(nch > 0));
	if (conv && cv == NULL)
		json_object_del(params, "conversation");
	G.rewind_conv = cv != NULL ? json_integer_value(json_object_get(cv,
	    "messages")) : 0;
	json_decref(cv);
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
	json_t	*params = G.rewind_ask, *res, *c, *cv;
	size_t	 i;
	char	*e;

	G.rewind_ask = NULL;
	G.ask = ASK_NONE;
	if (params == NULL)
		return;
	if (G.rewind_conv > 0 && strcasecmp(line, "c") == 0 &&
	    !json_is_true(json_object_get(params, "conversation")))
		json_object_set_new(params, "conversation", json_true());
	else if (strcasecmp(line, "y") != 0 && strcasecmp(line, "yes") != 0) {
		gbr_say("nothing was undone\n");
		json_decref(params);
		gbr_ask_update();
		return;
	}
	json_object_del(params, "_files");
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
		cv = json_object_get(res, "conversation");
		if (json_is_object(cv))
			gbr_say("dropped %lld message%s from the conversation "
			    "(the history keeps them)\n", (long long)
			    json_integer_value(json_object_get(cv, "messages")),
			    json_integer_value(json_object_get(cv, "messages"))
			    == 1 ? "" : "s");
		if (json_is_string(json_object_get(res, "conversation_error")))
			gbr_say("! the conversation was not rewound\n");
		if (json_object_get(res, "undo_to_seq") != NULL)
			gbr_say("rewound (/rewind to %lld undoes this rewind of "
			    "the files)\n", (long long)json_integer_value(
			    json_object_get(res, "undo_to_seq")));
		json_decref(res);
	}
	gbr_ask_update();
}
