/*
 * gbrctl acp's view of a gbr session for the editor (see ctl-acp.c):
 * gbrd's events, and the history a session/load replays, become ACP
 * session/update notifications. The model's streamed text is
 * agent_message_chunk (the durable message only when nothing streamed),
 * a user message from another client is user_message_chunk, a tool call
 * is a tool_call card (its kind, title and file location) and its result
 * a tool_call_update (completed or failed, with the file's diff, the
 * command's output or the tool's result), a check run is a card of its
 * own. An approval gbrd asks for is a session/request_permission; when
 * another client decides it first, the request is cancelled
 * ($/cancel_request) and a late answer is ignored.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp-int.h"
#include "jsonrpc.h"
#include "xmalloc.h"

#define ACP_ARGS_MAX	256	/* tool calls remembered until their result */

/* Sends one session/update; steals update. */
static void
acp_update(struct acp *a, struct acp_sess *s, json_t *update)
{
	acp_notify(a, "session/update", json_pack("{s:s, s:o}", "sessionId",
	    s->id, "update", update));
}

/* Sends a text chunk of the given kind (agent_message_chunk, ...). */
static void
acp_chunk(struct acp *a, struct acp_sess *s, const char *kind, const char *text)
{
	if (text == NULL || *text == '\0')
		return;
	acp_update(a, s, json_pack("{s:s, s:{s:s, s:s}}", "sessionUpdate",
	    kind, "content", "type", "text", "text", text));
}

/* ACP's kind of a gbr tool. */
static const char *
acp_tool_kind(const char *tool)
{
	if (strcmp(tool, "read_file") == 0)
		return "read";
	if (strcmp(tool, "write_file") == 0 || strcmp(tool, "edit_file") == 0)
		return "edit";
	if (strcmp(tool, "search") == 0 || strcmp(tool, "list_directory") == 0)
		return "search";
	if (strncmp(tool, "run_", 4) == 0 || strcmp(tool, "check") == 0)
		return "execute";
	return "other";
}

/* The absolute path a tool's path argument names, or NULL. */
static char *
acp_abs_path(struct acp_sess *s, json_t *args)
{
	const char	*p = json_string_value(json_object_get(args, "path"));

	if (p == NULL)
		return NULL;
	if (*p == '/')
		return xstrdup(p);
	if (strcmp(p, ".") == 0 || *p == '\0')
		return xstrdup(s->workspace);
	return xasprintf("%s/%s", s->workspace, p);
}

/* A card's title: the tool and what it works on. */
static char *
acp_title(const char *tool, json_t *args)
{
	json_t		*v;
	const char	*what = NULL;
	char		*joined = NULL, *t, *shown;
	size_t		 i;

	if ((v = json_object_get(args, "argv")) != NULL && json_is_array(v)) {
		joined = xstrdup("");
		for (i = 0; i < json_array_size(v) && strlen(joined) < 200; i++) {
			t = xasprintf("%s%s%s", joined, i > 0 ? " " : "",
			    json_string_value(json_array_get(v, i)) != NULL ?
			    json_string_value(json_array_get(v, i)) : "?");
			free(joined);
			joined = t;
		}
		what = joined;
	} else if ((what = json_string_value(json_object_get(args,
	    "path"))) == NULL &&
	    (what = json_string_value(json_object_get(args, "pattern"))) ==
	    NULL)
		what = json_string_value(json_object_get(args, "language"));
	shown = mcp_shown(what != NULL ? what : "", 200);
	t = xasprintf("%s%s%s", tool, *shown != '\0' ? " " : "", shown);
	free(shown);
	free(joined);
	return t;
}

/*
 * The file before a change, from the file after it and the unified diff
 * between them (gbr's write results carry the diff, not the old text).
 * Returns a new string, or NULL when the diff does not fit the text.
 */
static char *
acp_unpatch(const char *after, const char *diff)
{
	const char	*p = after, *d = diff, *nl, *line;
	size_t		 len, olen = 0, ocap = strlen(after) + strlen(diff) + 1;
	long		 a0, b0, c0, d0;
	char		*out = xmalloc(ocap), last = 0;
	int		 in_hunk = 0, pos = 1, n;

	while (*d != '\0') {
		line = d;
		nl = strchr(d, '\n');
		len = nl != NULL ? (size_t)(nl - d) : strlen(d);
		d = nl != NULL ? nl + 1 : d + len;
		if (strncmp(line, "@@ ", 3) == 0) {
			b0 = d0 = 1;
			if (sscanf(line, "@@ -%ld,%ld +%ld,%ld @@", &a0, &b0, &c0,
			    &d0) != 4 && sscanf(line, "@@ -%ld +%ld,%ld @@", &a0,
			    &c0, &d0) != 3 && sscanf(line, "@@ -%ld,%ld +%ld @@",
			    &a0, &b0, &c0) != 3 && sscanf(line,
			    "@@ -%ld +%ld @@", &a0, &c0) != 2)
				goto fail;
			(void)a0;
			(void)b0;
			if (d0 != 0)
				c0--;	/* the hunk starts at line c0, 1-based */
			/* Copy the untouched lines before the hunk. */
			for (n = pos; n <= c0; n++) {
				if (*p == '\0')
					goto fail;
				nl = strchr(p, '\n');
				len = nl != NULL ? (size_t)(nl - p) + 1 : strlen(p);
				memcpy(out + olen, p, len);
				olen += len;
				p += len;
			}
			pos = (int)c0 + 1;
			in_hunk = 1;
			continue;
		}
		if (!in_hunk || len == 0)
			continue;
		if (line[0] == ' ' || line[0] == '+') {
			/* A line of the new file: it must be there; skip it. */
			if (*p == '\0' || strncmp(p, line + 1, len - 1) != 0 ||
			    (p[len - 1] != '\n' && p[len - 1] != '\0'))
				goto fail;
			nl = strchr(p, '\n');
			p += nl != NULL ? (size_t)(nl - p) + 1 : strlen(p);
			pos++;
		}
		if (line[0] == ' ' || line[0] == '-') {
			if (olen + len + 1 > ocap)
				goto fail;
			memcpy(out + olen, line + 1, len - 1);
			olen += len - 1;
			out[olen++] = '\n';
		} else if (line[0] == '\\' && (last == ' ' || last == '-')) {
			if (olen > 0 && out[olen - 1] == '\n')
				olen--;		/* no newline at the end */
		} else if (line[0] != '+')
			goto fail;
		last = line[0];
	}
	len = strlen(p);
	if (olen + len + 1 > ocap)
		goto fail;
	memcpy(out + olen, p, len);
	olen += len;
	out[olen] = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

/* Text content for a card, cut at ACP_SHOWN_MAX. */
static json_t *
acp_text_content(const char *text)
{
	json_t	*c;
	size_t	 len = strlen(text);

	if (len > ACP_SHOWN_MAX) {
		len = ACP_SHOWN_MAX;
		while (len > 0 && ((unsigned char)text[len] & 0xc0) == 0x80)
			len--;	/* never cut a character */
	}
	c = json_pack("{s:s, s:{s:s, s:s%}}", "type", "content", "content",
	    "type", "text", "text", text, len);
	return c;
}

/*
 * The diff of a file change, as ACP's diff content: the file's old and new
 * text for write_file (the old one rebuilt from gbr's unified diff), the
 * replaced and the new string for edit_file. NULL when it cannot be shown.
 */
static json_t *
acp_diff_content(struct acp_sess *s, const char *tool, json_t *args,
    const char *udiff, int created)
{
	const char	*newt, *oldt;
	char		*path, *old;
	json_t		*c = NULL;

	if ((path = acp_abs_path(s, args)) == NULL)
		return NULL;
	if (strcmp(tool, "edit_file") == 0) {
		oldt = json_string_value(json_object_get(args, "old_string"));
		newt = json_string_value(json_object_get(args, "new_string"));
		if (oldt != NULL && newt != NULL)
			c = json_pack("{s:s, s:s, s:s, s:s}", "type", "diff",
			    "path", path, "oldText", oldt, "newText", newt);
	} else if (strcmp(tool, "write_file") == 0 &&
	    (newt = json_string_value(json_object_get(args, "content"))) !=
	    NULL) {
		if (created)
			c = json_pack("{s:s, s:s, s:n, s:s}", "type", "diff",
			    "path", path, "oldText", "newText", newt);
		else if (udiff != NULL && (old = acp_unpatch(newt, udiff)) !=
		    NULL) {
			c = json_pack("{s:s, s:s, s:s, s:s}", "type", "diff",
			    "path", path, "oldText", old, "newText", newt);
			free(old);
		}
	}
	free(path);
	return c;
}

/*
 * A tool call's card: pending when the model asks for it (the calls of
 * one answer run one after the other), in progress when a client's own
 * tool.call runs it.
 */
static void
acp_tool_start(struct acp *a, struct acp_sess *s, const char *id,
    const char *tool, json_t *args, const char *status)
{
	json_t		*u;
	char		*title, *path;

	if (id == NULL || tool == NULL)
		return;
	if (json_object_size(s->args) >= ACP_ARGS_MAX)
		json_object_clear(s->args);
	json_object_set_new(s->args, id, json_pack("{s:s, s:O}", "tool", tool,
	    "args", json_is_object(args) ? args : json_null()));
	title = acp_title(tool, args);
	u = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O}", "sessionUpdate",
	    "tool_call", "toolCallId", id, "title", title, "kind",
	    acp_tool_kind(tool), "status", status, "rawInput",
	    json_is_object(args) ? args : json_object());
	if ((path = acp_abs_path(s, args)) != NULL) {
		json_object_set_new(u, "locations", json_pack("[{s:s}]", "path",
		    path));
		free(path);
	}
	free(title);
	acp_update(a, s, u);
}

/* What a run tool's result shows: its output and how it ended. */
static char *
acp_run_text(json_t *r)
{
	const char	*out = json_string_value(json_object_get(r, "stdout"));
	const char	*err = json_string_value(json_object_get(r, "stderr"));
	json_t		*code = json_object_get(r, "exit_code");
	char		*all, *end;

	all = xasprintf("%s%s", out != NULL ? out : "", err != NULL ? err : "");
	if (json_is_true(json_object_get(r, "timed_out")))
		end = xstrdup("(timed out)");
	else if (json_is_integer(code))
		end = xasprintf("(exit code %lld)", (long long)
		    json_integer_value(code));
	else
		end = xstrdup("(killed by a signal)");
	out = all;
	all = xasprintf("%s%s%s", out, *out != '\0' && out[strlen(out) - 1] !=
	    '\n' ? "\n" : "", end);
	free((char *)out);
	free(end);
	return all;
}

/* A tool call ended: its card's final state and content. */
static void
acp_tool_done(struct acp *a, struct acp_sess *s, json_t *m)
{
	const char	*id = json_string_value(json_object_get(m, "call_id"));
	const char	*tool = json_string_value(json_object_get(m, "tool"));
	json_t		*r = json_object_get(m, "result");
	json_t		*e = json_object_get(m, "error");
	json_t		*call, *content = json_array(), *d;
	char		*text;
	int		 ok = json_is_true(json_object_get(m, "ok"));

	if (id == NULL || tool == NULL) {
		json_decref(content);
		return;
	}
	call = json_object_get(s->args, id);
	if (!ok) {
		text = xasprintf("%s: %s", json_string_value(json_object_get(e,
		    "kind")) != NULL ? json_string_value(json_object_get(e,
		    "kind")) : "error", json_string_value(json_object_get(e,
		    "message")) != NULL ? json_string_value(json_object_get(e,
		    "message")) : "the tool failed");
		json_array_append_new(content, acp_text_content(text));
		free(text);
	} else if (strcmp(tool, "read_file") == 0 &&
	    json_is_string(json_object_get(r, "content")))
		json_array_append_new(content, acp_text_content(
		    json_string_value(json_object_get(r, "content"))));
	else if (strcmp(tool, "write_file") == 0 ||
	    strcmp(tool, "edit_file") == 0) {
		d = acp_diff_content(s, tool, json_object_get(call, "args"),
		    json_is_true(json_object_get(r, "diff_truncated")) ? NULL :
		    json_string_value(json_object_get(r, "diff")),
		    json_is_true(json_object_get(r, "created")));
		if (d == NULL && json_is_string(json_object_get(r, "diff")))
			d = acp_text_content(json_string_value(json_object_get(r,
			    "diff")));
		if (d != NULL)
			json_array_append_new(content, d);
	} else if (json_object_get(r, "exit_code") != NULL) {
		text = acp_run_text(r);
		json_array_append_new(content, acp_text_content(text));
		free(text);
	} else if (r != NULL) {
		text = json_dumps(r, JSON_COMPACT);
		if (text != NULL)
			json_array_append_new(content, acp_text_content(text));
		free(text);
	}
	acp_update(a, s, json_pack("{s:s, s:s, s:s, s:o}", "sessionUpdate",
	    "tool_call_update", "toolCallId", id, "status", ok ? "completed" :
	    "failed", "content", content));
	json_object_del(s->args, id);
}

/* A history message (live or replayed) as updates. */
static void
acp_message(struct acp *a, struct acp_sess *s, json_t *m, const char *rid)
{
	const char	*role = json_string_value(json_object_get(m, "role"));
	const char	*text = json_string_value(json_object_get(m, "content"));
	json_t		*c;
	size_t		 i;

	if (role == NULL)
		return;
	if (strcmp(role, "user") == 0) {
		/* The editor shows its own prompt already. */
		if (rid == NULL || strcmp(rid, s->prompt_rid) != 0)
			acp_chunk(a, s, "user_message_chunk", text);
	} else if (strcmp(role, "assistant") == 0) {
		if (json_is_string(json_object_get(m, "call_id"))) {
			acp_tool_start(a, s, json_string_value(json_object_get(m,
			    "call_id")), json_string_value(json_object_get(m,
			    "tool")), json_object_get(m, "args"), "in_progress");
			return;
		}
		if (json_integer_value(json_object_get(m, "turn")) !=
		    s->delta_turn || json_integer_value(json_object_get(m,
		    "step")) != s->delta_step)
			acp_chunk(a, s, "agent_message_chunk", text);
		json_array_foreach(json_object_get(m, "tool_calls"), i, c)
			acp_tool_start(a, s, json_string_value(json_object_get(c,
			    "call_id")), json_string_value(json_object_get(c,
			    "name")), json_object_get(c, "args"), "pending");
	} else if (strcmp(role, "tool") == 0)
		acp_tool_done(a, s, m);
}

/* session/load: the history, oldest first, as updates. */
void
acp_replay(struct acp *a, struct acp_sess *s, json_t *messages,
    json_int_t older)
{
	json_t	*m;
	size_t	 i;
	char	*note;

	s->delta_turn = s->delta_step = -1;
	if (older > 0) {
		/* Said, not silently dropped: where the rest can be read. */
		note = xasprintf("(%lld older messages of this session are "
		    "not shown here: `gbrctl history %s` lists them)\n\n",
		    (long long)older, s->id);
		acp_chunk(a, s, "agent_message_chunk", note);
		free(note);
	}
	json_array_foreach(messages, i, m)
		acp_message(a, s, m, NULL);
}

/* Frees a permission request record. */
void
acp_perm_free(struct acp *a, struct acp_perm *p)
{
	TAILQ_REMOVE(&a->perms, p, entry);
	a->nperms--;
	free(p->approval);
	free(p->call_id);
	free(p);
}

/* Asks the editor about an approval gbrd waits for (once per approval). */
void
acp_ask_permission(struct acp *a, struct acp_sess *s, json_t *ap)
{
	const char	*aid = json_string_value(json_object_get(ap, "id"));
	const char	*cid = json_string_value(json_object_get(ap, "call_id"));
	const char	*tool = json_string_value(json_object_get(ap, "tool"));
	const char	*why = json_string_value(json_object_get(ap, "why"));
	const char	*cmd = json_string_value(json_object_get(ap, "command"));
	const char	*diff = json_string_value(json_object_get(ap, "diff"));
	json_t		*args = json_object_get(ap, "args");
	json_t		*tc, *content, *opts, *d;
	struct acp_perm	*p;
	char		*title, *path, *text;

	if (aid == NULL || cid == NULL || tool == NULL)
		return;
	TAILQ_FOREACH(p, &a->perms, entry) {
		if (strcmp(p->approval, aid) == 0)
			return;
	}
	if (a->nperms >= ACP_PERMS_MAX) {
		p = TAILQ_FIRST(&a->perms);
		acp_notify(a, "$/cancel_request", json_pack("{s:I}",
		    "requestId", (json_int_t)p->rid));
		acp_perm_free(a, p);
	}
	content = json_array();
	d = diff != NULL ? acp_diff_content(s, tool, args, diff,
	    strstr(diff, "--- /dev/null") != NULL) : NULL;
	if (d != NULL)
		json_array_append_new(content, d);
	text = xasprintf("gbr asks (%s): %s%s%s%s%s", why != NULL ? why : "?",
	    cmd != NULL ? cmd : "", cmd != NULL ? "\n" : "", d == NULL &&
	    diff != NULL ? diff : "", json_string_value(json_object_get(ap,
	    "effect")) != NULL ? "\n" : "", json_string_value(json_object_get(
	    ap, "effect")) != NULL ? json_string_value(json_object_get(ap,
	    "effect")) : "");
	json_array_append_new(content, acp_text_content(text));
	free(text);
	title = acp_title(tool, args);
	tc = json_pack("{s:s, s:s, s:s, s:s, s:o}", "toolCallId", cid, "title",
	    title, "kind", acp_tool_kind(tool), "status", "pending", "content",
	    content);
	free(title);
	if ((path = acp_abs_path(s, args)) != NULL) {
		json_object_set_new(tc, "locations", json_pack("[{s:s}]", "path",
		    path));
		free(path);
	}
	opts = json_pack("[{s:s, s:s, s:s}]", "optionId", "allow", "name",
	    "Allow once", "kind", "allow_once");
	/* gbr never grants anything under .gbr_envs/ for the session. */
	if (why == NULL || strcmp(why, "env_dir") != 0)
		json_array_append_new(opts, json_pack("{s:s, s:s, s:s}",
		    "optionId", "allow_session", "name", "Allow for this session",
		    "kind", "allow_always"));
	json_array_append_new(opts, json_pack("{s:s, s:s, s:s}", "optionId",
	    "reject", "name", "Reject", "kind", "reject_once"));
	p = xcalloc(1, sizeof *p);
	snprintf(p->sess, sizeof p->sess, "%s", s->id);
	p->approval = xstrdup(aid);
	p->call_id = xstrdup(cid);
	p->rid = acp_request(a, "session/request_permission", json_pack(
	    "{s:s, s:o, s:o}", "sessionId", s->id, "toolCall", tc, "options",
	    opts));
	TAILQ_INSERT_TAIL(&a->perms, p, entry);
	a->nperms++;
}

/* An approval changed: if another client decided it, our question goes. */
static void
acp_approval_resolved(struct acp *a, struct acp_sess *s, json_t *ap)
{
	const char	*aid = json_string_value(json_object_get(ap, "id"));
	const char	*state = json_string_value(json_object_get(ap, "state"));
	const char	*cid = json_string_value(json_object_get(ap, "call_id"));
	struct acp_perm	*p;

	if (aid == NULL || state == NULL)
		return;
	TAILQ_FOREACH(p, &a->perms, entry) {
		if (strcmp(p->approval, aid) == 0 && !p->stale)
			break;
	}
	if (p != NULL) {
		p->stale = 1;
		acp_notify(a, "$/cancel_request", json_pack("{s:I}",
		    "requestId", (json_int_t)p->rid));
	}
	/* Approved: the call runs; any other end comes as its result. */
	if (cid != NULL && (strcmp(state, "approved") == 0 ||
	    strcmp(state, "edited") == 0))
		acp_update(a, s, json_pack("{s:s, s:s, s:s}", "sessionUpdate",
		    "tool_call_update", "toolCallId", cid, "status",
		    "in_progress"));
}

/* A check run after the agent changed files: a card of its own. */
static void
acp_check(struct acp *a, struct acp_sess *s, json_t *p)
{
	char	 id[64], *title;

	snprintf(id, sizeof id, "check-%lld-%lld", (long long)
	    json_integer_value(json_object_get(p, "turn")), (long long)
	    json_integer_value(json_object_get(p, "attempt")));
	title = xasprintf("check: %s", json_string_value(json_object_get(p,
	    "command")) != NULL ? json_string_value(json_object_get(p,
	    "command")) : "?");
	acp_update(a, s, json_pack("{s:s, s:s, s:s, s:s, s:s, s:[o]}",
	    "sessionUpdate", "tool_call", "toolCallId", id, "title", title,
	    "kind", "execute", "status", json_is_true(json_object_get(p,
	    "ok")) ? "completed" : "failed", "content", acp_text_content(
	    json_string_value(json_object_get(p, "output")) != NULL ?
	    json_string_value(json_object_get(p, "output")) : "")));
	free(title);
}

/* An event from gbrd on one of our sessions. */
void
acp_event(struct acp *a, json_t *p)
{
	struct acp_sess	*s;
	const char	*type = json_string_value(json_object_get(p, "type"));
	const char	*state;
	json_t		*seq = json_object_get(p, "seq");

	s = acp_sess_find(a, json_string_value(json_object_get(p, "session")));
	if (s == NULL || type == NULL)
		return;
	if (json_is_integer(seq) && json_integer_value(seq) > s->seq)
		s->seq = json_integer_value(seq);
	if (strcmp(type, "message.delta") == 0) {
		s->delta_turn = json_integer_value(json_object_get(p, "turn"));
		s->delta_step = json_integer_value(json_object_get(p, "step"));
		acp_chunk(a, s, "agent_message_chunk", json_string_value(
		    json_object_get(p, "text")));
	} else if (strcmp(type, "message") == 0 || strcmp(type,
	    "tool.call") == 0 || strcmp(type, "tool.result") == 0)
		acp_message(a, s, json_object_get(p, "message"),
		    json_string_value(json_object_get(p, "request_id")));
	else if (strcmp(type, "approval.requested") == 0)
		acp_ask_permission(a, s, json_object_get(p, "approval"));
	else if (strcmp(type, "approval.resolved") == 0)
		acp_approval_resolved(a, s, json_object_get(p, "approval"));
	else if (strcmp(type, "check.result") == 0)
		acp_check(a, s, p);
	else if (strcmp(type, "error") == 0) {
		free(s->ended_error);
		free(s->ended_kind);
		s->ended_error = xstrdup(json_string_value(json_object_get(p,
		    "message")) != NULL ? json_string_value(json_object_get(p,
		    "message")) : "the turn failed");
		s->ended_kind = xstrdup(json_string_value(json_object_get(p,
		    "kind")) != NULL ? json_string_value(json_object_get(p,
		    "kind")) : "error");
	} else if (strcmp(type, "session.state") == 0) {
		state = json_string_value(json_object_get(p, "state"));
		if (state != NULL && strcmp(state, "running") == 0 &&
		    s->ended_turn < json_integer_value(json_object_get(p,
		    "turn"))) {
			/* A new turn: an older turn's error is not its. */
			free(s->ended_error);
			free(s->ended_kind);
			s->ended_error = s->ended_kind = NULL;
		}
		if (state == NULL || strcmp(state, "running") == 0 ||
		    strcmp(state, "awaiting_approval") == 0)
			return;
		if (strcmp(state, "closed") == 0) {
			free(s->ended_outcome);
			s->ended_outcome = xstrdup("error");
			free(s->ended_error);
			s->ended_error = xstrdup("the session was closed");
			s->ended_turn = s->prompt_turn;
		} else {
			s->ended_turn = json_integer_value(json_object_get(p,
			    "turn"));
			free(s->ended_outcome);
			s->ended_outcome = xstrdup(json_string_value(
			    json_object_get(p, "outcome")) != NULL ?
			    json_string_value(json_object_get(p, "outcome")) :
			    "completed");
		}
		acp_turn_ended(a, s);
	} else if (strcmp(type, "resync_required") == 0)
		acp_log("session %s: some events were lost (%s); load the "
		    "session again", s->id, json_string_value(json_object_get(p,
		    "reason")) != NULL ? json_string_value(json_object_get(p,
		    "reason")) : "?");
}
