/*
 * The REPL's approvals. The session's pending approvals (from
 * approval.requested events, and from approval.list on attach) are kept in
 * arrival order. On a terminal the oldest is shown (escaped, its diff
 * coloured and bounded) and the prompt turns into the question; the line
 * the person was typing is put aside and given back afterwards. The
 * question is only a prompt: the loop goes on reading events meanwhile, so
 * streamed text and other approvals keep coming, and when another terminal
 * answers first the approval.resolved event drops the question. "e" runs
 * the editor on a private temporary file; while it has the terminal the
 * socket is still read (a client that stops reading gets evicted) and what
 * would have been printed waits in a bounded buffer. Without a terminal
 * approvals are printed and /approve, /deny answer them.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "client.h"
#include "console.h"
#include "gbr-int.h"
#include "render.h"
#include "xmalloc.h"

/* The id of an approval object (borrowed), or NULL. */
static const char *
gbr_appr_id(const json_t *a)
{
	return json_string_value(json_object_get(a, "id"));
}

/* Finds a pending approval by id: its index in G.appr, or -1. */
int
gbr_appr_find(const char *id)
{
	json_t	*a;
	size_t	 i;

	if (id == NULL)
		return -1;
	json_array_foreach(G.appr, i, a) {
		if (gbr_appr_id(a) != NULL && strcmp(gbr_appr_id(a), id) == 0)
			return (int)i;
	}
	return -1;
}

/* Tells whether an approval is a change to a file, which "e" can edit. */
int
gbr_appr_editable(const json_t *a)
{
	const char	*tool = json_string_value(json_object_get(a, "tool"));

	/* approval.list's content comes with these two only. */
	return tool != NULL && (strcmp(tool, "write_file") == 0 ||
	    strcmp(tool, "edit_file") == 0);
}

/*
 * Tells whether "s" can grant an approval for the rest of the session:
 * not for .gbr_envs/, which gbrd asks about every time.
 */
int
gbr_appr_grantable(const json_t *a)
{
	const char	*why = json_string_value(json_object_get(a, "why"));

	return why == NULL || strcmp(why, "env_dir") != 0;
}

/* Adds (a copy of) a pending approval, or updates it. Returns 1 if it is new. */
static int
gbr_appr_add(const json_t *a)
{
	json_t	*copy, *old;
	int	 i;

	if (!json_is_object(a) || gbr_appr_id(a) == NULL)
		return 0;
	copy = json_deep_copy(a);
	if ((i = gbr_appr_find(gbr_appr_id(a))) >= 0) {
		old = json_array_get(G.appr, (size_t)i);
		json_object_set_new(copy, "gbr_shown", json_boolean(json_is_true(
		    json_object_get(old, "gbr_shown"))));
		json_array_set_new(G.appr, (size_t)i, copy);
		return 0;
	}
	if (json_array_size(G.appr) >= GBR_APPROVALS_MAX) {
		json_decref(copy);
		if (!G.appr_full)
			gbr_say("%s? more than %d approvals are pending; /approvals "
			    "lists them%s\n", render_color(&G.rd, "approval"),
			    GBR_APPROVALS_MAX, render_color(&G.rd, "reset"));
		G.appr_full = 1;
		return 0;
	}
	json_object_set_new(copy, "gbr_shown", json_false());
	json_array_append_new(G.appr, copy);
	return 1;
}

/*
 * Forgets a pending approval. Returns -1 if it was not pending here, else
 * whether it had been shown.
 */
static int
gbr_appr_remove(const char *id)
{
	int	i = gbr_appr_find(id), shown;

	if (i < 0)
		return -1;
	shown = json_is_true(json_object_get(json_array_get(G.appr, (size_t)i),
	    "gbr_shown"));
	json_array_remove(G.appr, (size_t)i);
	if (json_array_size(G.appr) < GBR_APPROVALS_MAX)
		G.appr_full = 0;
	return shown;
}

/* Forgets every pending approval (another session is attached). */
void
gbr_appr_clear(void)
{
	json_array_clear(G.appr);
	G.appr_full = 0;
	free(G.ask_id);
	G.ask_id = NULL;
	G.ask = ASK_NONE;
}

/*
 * The pending approval a person means by key: its id, or the one id it
 * starts. Returns a new string: the id, or key itself.
 */
static char *
gbr_appr_match(const char *key)
{
	json_t		*a;
	const char	*hit = NULL;
	size_t		 i, n = 0;

	if (gbr_appr_find(key) >= 0)
		return xstrdup(key);
	json_array_foreach(G.appr, i, a) {
		if (gbr_appr_id(a) != NULL &&
		    strncmp(gbr_appr_id(a), key, strlen(key)) == 0) {
			hit = gbr_appr_id(a);
			n++;
		}
	}
	return xstrdup(n == 1 ? hit : key);
}

/* Shows an approval: its diff bounded, or whole when all is set. */
static void
gbr_show_approval(const json_t *a, int all)
{
	const json_t		*id = json_object_get(a, "id");
	struct gbr_capture	 cap;
	char			*hint, *shown;
	FILE			*f;

	shown = render_escape(json_string_value(id), json_string_length(id),
	    RENDER_ESC_BACKSLASH, 128);
	hint = xasprintf(" (/approval %s shows them all)", shown);
	/* The whole diff may be taller than the terminal: the pager's then. */
	if (all)
		gbr_page_begin();
	if ((f = gbr_capture(&cap)) != NULL) {
		render_approval(&G.rd, a, all ? 0 : gbr_diff_lines(), hint);
		if (!G.tty)
			fprintf(f, "  answer with /approve %s or /deny %s [REASON]\n",
			    shown, shown);
		gbr_capture_end(&cap);
	}
	if (all)
		gbr_page_end();
	free(hint);
	free(shown);
}

/* One line about an approval waiting behind the one being asked. */
static void
gbr_show_queued(const json_t *a)
{
	struct gbr_capture	 cap;
	FILE			*f;

	if ((f = gbr_capture(&cap)) == NULL)
		return;
	render_close_line(&G.rd);
	fprintf(f, "%s? approval ", render_color(&G.rd, "approval"));
	render_escaped(&G.rd, gbr_appr_id(a), strlen(gbr_appr_id(a)),
	    RENDER_ESC_BACKSLASH, 128);
	fputs(" waits its turn: ", f);
	render_approval_what(&G.rd, a);
	fprintf(f, "%s\n", render_color(&G.rd, "reset"));
	gbr_capture_end(&cap);
}

/* Ends the question. */
static void
gbr_ask_end(void)
{
	free(G.ask_id);
	G.ask_id = NULL;
	G.ask = ASK_NONE;
}

/*
 * Puts the prompt in step with the pending approvals: drops a question
 * whose approval is gone, asks about the oldest one when nothing is
 * asked (putting the half-typed line aside), and gives that line back
 * when nothing is left to ask.
 */
void
gbr_ask_update(void)
{
	json_t	*a;
	char	*old;
	int	 was_asking = G.ask != ASK_NONE, changed = 0;

	if (!G.tty || G.leave || G.hangup)
		return;
	if (G.ask_id != NULL && gbr_appr_find(G.ask_id) < 0) {
		gbr_ask_end();
		changed = 1;
	}
	if (G.ask_id == NULL && !G.in_editor && !G.replaying &&
	    json_array_size(G.appr) > 0) {
		a = json_array_get(G.appr, 0);
		G.ask_id = xstrdup(gbr_appr_id(a));
		G.ask = ASK_DECISION;
		json_object_set_new(a, "gbr_shown", json_true());
		gbr_show_approval(a, 0);
		/* A half-typed answer is dropped; a half-typed message kept. */
		gbr_set_line(NULL, &old);
		if (old != NULL && !was_asking) {
			free(G.saved_line);
			G.saved_line = old;
		} else
			free(old);
		if (!G.editing)
			changed = 1;
	} else if (G.ask_id == NULL && G.saved_line != NULL && G.editing) {
		old = G.saved_line;
		G.saved_line = NULL;
		gbr_set_line(old, NULL);
		free(old);
	} else if (G.ask_id == NULL && was_asking && G.editing)
		gbr_set_line(NULL, NULL);	/* a half-typed answer goes */
	else if (changed)
		gbr_redraw();
}

/*
 * Tells about the approvals not shown yet: on a terminal the oldest is
 * asked and the others announced in one line each; without one they are
 * printed whole.
 */
void
gbr_appr_announce(void)
{
	json_t	*a;
	size_t	 i;

	if (G.replaying)
		return;
	gbr_ask_update();
	json_array_foreach(G.appr, i, a) {
		if (json_is_true(json_object_get(a, "gbr_shown")))
			continue;
		json_object_set_new(a, "gbr_shown", json_true());
		if (G.tty)
			gbr_show_queued(a);
		else
			gbr_show_approval(a, 0);
	}
}

/* approval.requested: one more approval to decide. */
void
gbr_appr_requested(const json_t *a)
{
	if (gbr_appr_add(a))
		gbr_appr_announce();
}

/* The past tense of a decision. */
static const char *
gbr_decided(const char *decision)
{
	if (decision == NULL)
		return NULL;
	if (strcmp(decision, "approve") == 0)
		return "approved";
	if (strcmp(decision, "deny") == 0)
		return "denied";
	if (strcmp(decision, "edit") == 0)
		return "edited";
	return NULL;
}

/*
 * approval.resolved: an approval was decided (here or elsewhere), applied,
 * expired or withdrawn. A question about it is dropped.
 */
void
gbr_appr_resolved(const json_t *a)
{
	const char		*id = gbr_appr_id(a), *state, *done;
	struct gbr_capture	 cap;
	char			*where = NULL;
	int			 was, mine;

	if (id == NULL)
		return;
	state = json_string_value(json_object_get(a, "state"));
	if (state != NULL && (strcmp(state, "pending") == 0 ||
	    strcmp(state, "interrupted") == 0)) {
		/* To be decided again (gbrd died while applying it). */
		if (gbr_appr_add(a))
			gbr_appr_announce();
		else if (!G.replaying)
			gbr_show_approval(a, 0);
		return;
	}
	mine = json_object_get(G.appr_mine, id) != NULL;
	was = gbr_appr_remove(id);
	if (G.replaying && was != 1)
		return;		/* history nobody here was shown */
	done = gbr_decided(json_string_value(json_object_get(a, "decision")));
	if (!mine && was >= 0 && done != NULL)
		where = state != NULL && strcmp(state, done) == 0 ?
		    xstrdup("in another terminal") :
		    xasprintf("(%s in another terminal)", done);
	if (gbr_capture(&cap) != NULL) {
		render_approval_resolved(&G.rd, a, where);
		gbr_capture_end(&cap);
	}
	free(where);
	gbr_ask_update();
}

/*
 * Makes the pending approvals those gbrd lists for the session (after
 * attaching, reconnecting, or on /approvals), keeping what was shown.
 */
void
gbr_appr_sync(void)
{
	json_t	*res, *list, *a, *copy, *keep;
	char	*shown;
	size_t	 i;
	int	 j;

	if (!gbr_has_method("approval.list") || G.session == NULL)
		return;
	if ((res = gbr_call("approval.list", json_pack("{s:s}", "session",
	    G.session), NULL, 0)) == NULL)
		return;
	list = json_is_array(res) ? res : json_object_get(res, "approvals");
	keep = json_array();
	json_array_foreach(list, i, a) {
		if (!json_is_object(a) || gbr_appr_id(a) == NULL ||
		    json_array_size(keep) >= GBR_APPROVALS_MAX)
			continue;
		copy = json_deep_copy(a);
		j = gbr_appr_find(gbr_appr_id(a));
		json_object_set_new(copy, "gbr_shown", json_boolean(j >= 0 &&
		    json_is_true(json_object_get(json_array_get(G.appr,
		    (size_t)j), "gbr_shown"))));
		json_array_append_new(keep, copy);
	}
	/* Shown here, answered while this terminal was away. */
	json_array_foreach(G.appr, i, a) {
		for (j = 0; j < (int)json_array_size(keep); j++) {
			if (strcmp(gbr_appr_id(json_array_get(keep, (size_t)j)),
			    gbr_appr_id(a)) == 0)
				break;
		}
		if (j < (int)json_array_size(keep) ||
		    !json_is_true(json_object_get(a, "gbr_shown")))
			continue;
		shown = render_escape(gbr_appr_id(a), strlen(gbr_appr_id(a)),
		    RENDER_ESC_BACKSLASH, 128);
		gbr_say("%s? approval %s is no longer pending%s\n",
		    render_color(&G.rd, "approval"), shown,
		    render_color(&G.rd, "reset"));
		free(shown);
	}
	json_decref(G.appr);
	G.appr = keep;
	G.appr_full = json_array_size(list) > GBR_APPROVALS_MAX;
	json_decref(res);
	gbr_appr_announce();
}

/* /approvals: the pending approvals of this session, from gbrd. */
void
gbr_approvals_cmd(void)
{
	struct gbr_capture	 cap;
	json_t			*a;
	size_t			 i;
	FILE			*f;

	if (!gbr_has_method("approval.list")) {
		gbr_say("this gbrd has no approvals\n");
		return;
	}
	gbr_appr_sync();
	if (json_array_size(G.appr) == 0) {
		gbr_say("no approvals pending\n");
		return;
	}
	if ((f = gbr_capture(&cap)) == NULL)
		return;
	json_array_foreach(G.appr, i, a) {
		fprintf(f, "%s ", G.ask_id != NULL &&
		    strcmp(G.ask_id, gbr_appr_id(a)) == 0 ? "*" : " ");
		render_escaped(&G.rd, gbr_appr_id(a), strlen(gbr_appr_id(a)),
		    RENDER_ESC_BACKSLASH, 128);
		fputs("  ", f);
		render_approval_what(&G.rd, a);
		if (json_is_string(json_object_get(a, "state")) && strcmp(
		    json_string_value(json_object_get(a, "state")), "pending") != 0) {
			fputs("  [", f);
			render_escaped(&G.rd, json_string_value(json_object_get(a,
			    "state")), json_string_length(json_object_get(a,
			    "state")), RENDER_ESC_BACKSLASH, 64);
			fputc(']', f);
		}
		fputc('\n', f);
	}
	fputs("(/approval ID shows one; /approve ID, /deny ID [REASON], "
	    "/edit ID answer)\n", f);
	gbr_capture_end(&cap);
}

/* Remembers that an approval is being answered from this terminal. */
static void
gbr_appr_mark_mine(const char *id)
{
	if (json_object_size(G.appr_mine) >= GBR_MINE_MAX)
		json_object_clear(G.appr_mine);
	json_object_set_new(G.appr_mine, id, json_true());
}

/*
 * Sends a decision about approval id. Steals content (NULL: none).
 * Returns 0 when gbrd took it, -1 after saying why not.
 */
int
gbr_resolve(const char *key, const char *decision, json_t *content,
    const char *reason, const char *scope)
{
	json_t		*params, *reply, *res, *data;
	struct gbr_capture	 cap;
	const char		*kind, *st;
	char			*id = gbr_appr_match(key), *line, *cause, *shown;
	char			*est;
	size_t			 len;
	int			 r = -1;

	shown = render_escape(id, strlen(id), RENDER_ESC_BACKSLASH, 128);
	params = json_pack("{s:s, s:s}", "id", id, "decision", decision);
	if (content != NULL)
		json_object_set_new(params, "content", content);
	if (reason != NULL && *reason != '\0') {
		if (json_object_set_new(params, "reason", json_string(reason)) != 0) {
			gbr_say("! the reason is not valid UTF-8; nothing was sent\n");
			goto out;
		}
	}
	if (scope != NULL)
		json_object_set_new(params, "scope", json_string(scope));
	if (G.cl == NULL)
		goto out;
	/* A request over gbrd's line limit would cost the connection. */
	line = json_dumps(params, JSON_COMPACT);
	len = line != NULL ? strlen(line) : 0;
	free(line);
	if (len + 128 > G.max_line) {
		gbr_say("! that is too large to send: %zu bytes, gbrd takes at most "
		    "%zu in one request; nothing was sent\n", len, G.max_line);
		goto out;
	}
	gbr_appr_mark_mine(id);
	reply = client_call(G.cl, "approval.resolve", params, GBR_CALL_MS, &cause);
	params = NULL;
	if (reply == NULL) {
		gbr_say("%s! %s%s\n", render_color(&G.rd, "error"), cause,
		    render_color(&G.rd, "reset"));
		free(cause);
		G.need_reconnect = 1;
		goto out;
	}
	if (json_object_get(reply, "error") != NULL) {
		kind = client_error_kind(reply) != NULL ? client_error_kind(reply) : "?";
		data = json_object_get(json_object_get(reply, "error"), "data");
		st = json_string_value(json_object_get(data, "state"));
		if (st == NULL)
			st = json_string_value(json_object_get(json_object_get(data,
			    "approval"), "state"));
		if (strcmp(kind, "already_resolved") == 0) {
			est = st != NULL ? render_escape(st, strlen(st),
			    RENDER_ESC_BACKSLASH, 64) : NULL;
			gbr_say("%s? approval %s was already answered%s%s%s%s\n",
			    render_color(&G.rd, "approval"), shown, est != NULL ?
			    " (" : "", est != NULL ? est : "", est != NULL ? ")" : "",
			    render_color(&G.rd, "reset"));
			free(est);
			gbr_appr_remove(id);
		} else if (strcmp(kind, "approval_not_found") == 0) {
			gbr_say("%s? there is no approval %s (/approvals lists the "
			    "pending ones)%s\n", render_color(&G.rd, "approval"),
			    shown, render_color(&G.rd, "reset"));
			gbr_appr_remove(id);
		} else
			gbr_say_error(reply);
		json_decref(reply);
		gbr_ask_update();
		goto out;
	}
	res = json_object_get(reply, "result");
	if (json_object_get(res, "approval") != NULL)
		res = json_object_get(res, "approval");
	/* Of another session, no event will tell: the reply does. */
	if (res != NULL && (G.session == NULL || !json_is_string(json_object_get(
	    res, "session")) || strcmp(json_string_value(json_object_get(res,
	    "session")), G.session) != 0) && gbr_capture(&cap) != NULL) {
		render_approval_resolved(&G.rd, res, NULL);
		gbr_capture_end(&cap);
	}
	json_decref(reply);
	gbr_appr_remove(id);
	gbr_ask_update();
	r = 0;
out:
	json_decref(params);
	free(shown);
	free(id);
	return r;
}

/*
 * The whole new file gbrd would write for approval id: approval.list's
 * content for it, asked for now (events do not carry it), so what the
 * person edits is what gbrd proposes (for edit_file, the file gbrd made
 * the diff from, with the change applied). Returns a new buffer, or NULL
 * with *why.
 */
static char *
gbr_proposed(const char *id, size_t *len, char **why)
{
	json_t		*res, *a, *v;
	char		*out = NULL;

	if ((res = gbr_call("approval.list", json_pack("{s:s}", "id", id), NULL,
	    0)) == NULL) {
		*why = xstrdup("gbrd did not say what it proposes");
		return NULL;
	}
	a = json_array_get(json_is_array(res) ? res : json_object_get(res,
	    "approvals"), 0);
	v = json_object_get(a, "content");
	if (a == NULL)
		*why = xstrdup("gbrd no longer has it");
	else if (json_is_string(v)) {
		*len = json_string_length(v);
		out = xstrndup(json_string_value(v), *len);
	} else if (json_is_true(json_object_get(a, "content_omitted")))
		*why = xstrdup("the proposed file is larger than gbrd sends in "
		    "one reply");
	else
		*why = xstrdup("it is not a change to a file: there is nothing to "
		    "edit");
	json_decref(res);
	return out;
}

/*
 * "e" or /edit: the proposed content in the editor, on a private
 * temporary file; what the person saves is sent as the decision "edit".
 * Nothing is sent when the editor fails or nothing changed.
 */
void
gbr_edit(const char *key)
{
	json_t		*a = NULL, *content;
	char		*id = gbr_appr_match(key), *shown, *why = NULL;
	char		*tmpdir = NULL;
	char		*proposed = NULL, *edited = NULL, *path = NULL, suffix[16];
	size_t		 plen = 0, elen = 0;
	int		 i, fd, st, keep = 0;

	shown = render_escape(id, strlen(id), RENDER_ESC_BACKSLASH, 128);
	if (!G.tty) {
		gbr_say("! editing needs a terminal (gbrctl edit %s works too)\n",
		    shown);
		goto out;
	}
	if ((i = gbr_appr_find(id)) < 0) {
		gbr_say("? no approval %s is pending here (/approvals lists them)\n",
		    shown);
		goto out;
	}
	a = json_incref(json_array_get(G.appr, (size_t)i));
	if ((proposed = gbr_proposed(id, &plen, &why)) == NULL) {
		gbr_say("! cannot edit approval %s: %s\n", shown, why);
		goto out;
	}
	tmpdir = console_tmp_dir();
	gbr_edit_suffix(json_string_value(json_object_get(a, "path")), suffix,
	    sizeof suffix);
	path = xasprintf("%s/gbr-approval-XXXXXX%s", tmpdir, suffix);
	if ((fd = mkstemps(path, (int)strlen(suffix))) == -1) {
		gbr_say("! cannot make a temporary file in %s: %s\n", tmpdir,
		    strerror(errno));
		goto out;
	}
	keep = 1;
	if (fchmod(fd, 0600) != 0 || client_write_fd(fd, proposed, plen) != 0) {
		gbr_say("! cannot write %s: %s\n", path, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	gbr_say("* editing %s (the whole new file, as gbrd proposes it)\n",
	    path);
	if ((st = gbr_run_editor(path)) != 0) {
		gbr_say("! the editor failed (exit %d): nothing was sent, approval "
		    "%s still waits\n", st, shown);
		keep = 0;
		goto out;
	}
	if (gbr_appr_find(id) < 0) {
		gbr_say("? approval %s was answered while you edited: your text was "
		    "not sent and is kept in %s\n", shown, path);
		goto out;
	}
	if ((edited = client_read_file(path, G.max_line, &elen, &why)) == NULL) {
		gbr_say("! %s: nothing was sent\n", why);
		goto out;
	}
	if (elen == plen && memcmp(edited, proposed, plen) == 0) {
		gbr_say("* no change, so nothing was sent (answer a to approve it "
		    "as proposed)\n");
		keep = 0;
		goto out;
	}
	if ((why = render_text_problem(edited, elen)) != NULL ||
	    (content = json_stringn(edited, elen)) == NULL) {
		gbr_say("! the edited text holds %s, and gbr writes text files "
		    "only: nothing was sent; it is kept in %s\n", why != NULL ?
		    why : "what is not text", path);
		goto out;
	}
	if (gbr_resolve(id, "edit", content, NULL, NULL) == 0)
		keep = 0;
	else
		gbr_say("your text is kept in %s\n", path);
out:
	if (path != NULL && !keep)
		unlink(path);
	json_decref(a);
	free(tmpdir);
	free(path);
	free(proposed);
	free(edited);
	free(why);
	free(shown);
	free(id);
}

/* /approval ID: one approval, whole. */
void
gbr_approval_show(const char *key)
{
	json_t	*res, *a;
	char	*id = gbr_appr_match(key), *shown;
	size_t	 i;
	int	 j;

	if ((j = gbr_appr_find(id)) >= 0) {
		gbr_show_approval(json_array_get(G.appr, (size_t)j), 1);
		free(id);
		return;
	}
	if (gbr_has_method("approval.list") && (res = gbr_call("approval.list",
	    NULL, NULL, 0)) != NULL) {
		json_array_foreach(json_is_array(res) ? res :
		    json_object_get(res, "approvals"), i, a) {
			if (gbr_appr_id(a) != NULL && strcmp(gbr_appr_id(a), id) == 0) {
				gbr_show_approval(a, 1);
				json_decref(res);
				free(id);
				return;
			}
		}
		json_decref(res);
	}
	shown = render_escape(id, strlen(id), RENDER_ESC_BACKSLASH, 128);
	gbr_say("? no approval %s is pending (/approvals lists them)\n", shown);
	free(shown);
	free(id);
}

/*
 * A line typed while the prompt asks about an approval: a, d [REASON],
 * e or s at the question, anything (the reason) after d.
 */
void
gbr_answer(char *line)
{
	char	*id, *word = line, *rest;

	if (G.ask_id == NULL || gbr_appr_find(G.ask_id) < 0) {
		gbr_ask_update();
		return;
	}
	id = xstrdup(G.ask_id);
	if (G.ask == ASK_REASON) {
		G.ask = ASK_DECISION;
		(void)gbr_resolve(id, "deny", NULL, line, NULL);
		free(id);
		return;
	}
	rest = word + strcspn(word, " \t");
	if (*rest != '\0') {
		*rest++ = '\0';
		rest += strspn(rest, " \t");
	}
	if (strcasecmp(word, "a") == 0 || strcasecmp(word, "approve") == 0)
		(void)gbr_resolve(id, "approve", NULL, NULL, NULL);
	else if ((strcasecmp(word, "s") == 0 || strcasecmp(word, "session") == 0) &&
	    !gbr_appr_grantable(json_array_get(G.appr, (size_t)gbr_appr_find(id))))
		gbr_say("changes to .gbr_envs/ are asked every time: there is no "
		    "approval for the session (a approves this one)\n");
	else if (strcasecmp(word, "s") == 0 || strcasecmp(word, "session") == 0)
		(void)gbr_resolve(id, "approve", NULL, NULL, "session");
	else if ((strcasecmp(word, "d") == 0 || strcasecmp(word, "deny") == 0) &&
	    *rest != '\0')
		(void)gbr_resolve(id, "deny", NULL, rest, NULL);
	else if (strcasecmp(word, "d") == 0 || strcasecmp(word, "deny") == 0)
		G.ask = ASK_REASON;
	else if (strcasecmp(word, "e") == 0 || strcasecmp(word, "edit") == 0)
		gbr_edit(id);
	else if (*word != '\0')
		gbr_say("answer a (approve), d (deny), e (edit the content) or s "
		    "(approve it for the rest of the session); /approval ID shows "
		    "it again\n");
	free(id);
}
