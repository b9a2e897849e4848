/*
 * What a run gives back (see tool-run.h for the shapes): bytes as JSON
 * (UTF-8 text, or base64 where it is not text), the chunks streamed while
 * the child runs (whole characters only: an unfinished one waits for the
 * next chunk), the file:line diagnostics of check, and the result made
 * from the runner's (runner.h) once the child is gone.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "tool-run-int.h"
#include "utf8.h"
#include "xmalloc.h"

#define TR_DIAG_TEXT	400		/* bytes of one diagnostic's message */

/* Base64 of bytes (new string). */
static char *
tr_base64(const char *s, size_t len)
{
	static const char	 tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char	*u = (const unsigned char *)s;
	char			*out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t			 i;
	uint32_t		 v;

	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)u[i] << 16 | (uint32_t)u[i + 1] << 8 | u[i + 2];
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = tab[v >> 6 & 63];
		*o++ = tab[v & 63];
	}
	if (i < len) {
		v = (uint32_t)u[i] << 16 | (i + 1 < len ? (uint32_t)u[i + 1] << 8 : 0);
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

/*
 * True if text would grow more as JSON than as base64: each control
 * character but tab, newline and carriage return costs six bytes as
 * \u00XX, so past one in sixteen base64 is smaller (and such output is
 * binary anyway).
 */
static int
tr_mostly_controls(const char *s, size_t len)
{
	size_t	i, n = 0;

	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' &&
		    s[i] != '\r')
			n++;
	return n > len / 16;
}

/* Bytes as JSON (see tool-run.h). */
json_t *
tool_run_bytes_json(const char *s, size_t len, const char **encoding)
{
	json_t	*j;
	char	*b;

	if (len == 0) {
		*encoding = "utf-8";
		return json_string("");
	}
	if (utf8_valid(s, len) && !tr_mostly_controls(s, len) &&
	    (j = json_stringn(s, len)) != NULL) {
		*encoding = "utf-8";
		return j;
	}
	b = tr_base64(s, len);
	j = json_string(b);
	free(b);
	*encoding = "base64";
	return j;
}

/* file:line[:col] diagnostics in text (see tool-run.h). */
json_t *
tool_run_diagnostics(const char *text, size_t len, size_t max)
{
	json_t		*a = json_array(), *d, *msg;
	const char	*line = text, *end = text + len, *eol, *p, *f;
	const char	*enc;
	unsigned long	 ln, col;
	char		*file, *e;
	size_t		 ll;

	while (line < end && json_array_size(a) < max) {
		eol = memchr(line, '\n', (size_t)(end - line));
		if (eol == NULL)
			eol = end;
		for (p = line; p < eol; p++) {
			if (*p != ':' || p + 1 >= eol || p[1] < '1' || p[1] > '9')
				continue;
			/* The token before the colon: the file. */
			for (f = p; f > line && strchr(" \t\"'(<[", f[-1]) == NULL &&
			    (unsigned char)f[-1] >= 0x20; f--)
				;
			if (f == p || (memchr(f, '/', (size_t)(p - f)) == NULL &&
			    memchr(f, '.', (size_t)(p - f)) == NULL))
				continue;
			file = xstrndup(f, (size_t)(p - f));
			ln = strtoul(p + 1, &e, 10);
			col = 0;
			if (e < eol && *e == ':' && e + 1 < eol && e[1] >= '0' &&
			    e[1] <= '9')
				col = strtoul(e + 1, NULL, 10);
			while (line < eol && (*line == ' ' || *line == '\t'))
				line++;
			ll = (size_t)(eol - line);
			if (ll > TR_DIAG_TEXT)
				ll = utf8_whole(line, TR_DIAG_TEXT);
			msg = tool_run_bytes_json(line, ll, &enc);
			if (strcmp(enc, "utf-8") != 0) {
				json_decref(msg);
				msg = json_string("(not UTF-8)");
			}
			d = json_pack("{s:s?, s:I, s:o}", "file", file,
			    "line", (json_int_t)ln, "message", msg);
			if (d != NULL && col > 0)
				json_object_set_new(d, "column",
				    json_integer((json_int_t)col));
			if (d != NULL && json_object_get(d, "file") != NULL)
				json_array_append_new(a, d);
			else
				json_decref(d);
			free(file);
			break;
		}
		line = eol + 1;
	}
	return a;
}

/* A copy of the text of one output stream chunk as JSON (new reference). */
static json_t *
tr_chunk_json(enum runner_stream s, const char *buf, size_t len)
{
	const char	*enc;
	json_t		*data = tool_run_bytes_json(buf, len, &enc), *c;

	if (strcmp(enc, "utf-8") == 0)
		c = json_pack("{s:s, s:o}", "stream",
		    s == RUNNER_STDOUT ? "stdout" : "stderr", "text", data);
	else
		c = json_pack("{s:s, s:o, s:s}", "stream",
		    s == RUNNER_STDOUT ? "stdout" : "stderr", "data", data,
		    "encoding", enc);
	return c;
}

/* The runner's output callback: pass whole characters on. */
void
tr_on_output(void *arg, enum runner_stream s, const char *buf, size_t len)
{
	struct tool_run	*r = arg;
	int		 i = s == RUNNER_STDOUT ? 0 : 1;
	size_t		 total, head;
	char		*joined;
	json_t		*c;

	if (r->out_cb == NULL || len == 0)
		return;
	total = r->ncarry[i] + len;
	joined = xmalloc(total);
	memcpy(joined, r->carry[i], r->ncarry[i]);
	memcpy(joined + r->ncarry[i], buf, len);
	head = utf8_whole(joined, total);
	r->ncarry[i] = total - head;
	memcpy(r->carry[i], joined + head, r->ncarry[i]);
	if (head > 0 && (c = tr_chunk_json(s, joined, head)) != NULL) {
		r->out_cb(r->arg, c);
		json_decref(c);
	}
	free(joined);
}

/* Adds a stream's bytes to a result. */
static void
tr_set_stream(json_t *o, const char *name, const char *p, size_t len,
    uint64_t total, int truncated)
{
	const char	*enc;
	char		 key[32];

	/* A cut at the cap may split a character: keep the text text. */
	if (truncated && (uint64_t)len < total)
		len = utf8_whole(p, len);
	json_object_set_new(o, name, tool_run_bytes_json(p, len, &enc));
	snprintf(key, sizeof key, "%s_encoding", name);
	json_object_set_new(o, key, json_string(enc));
	snprintf(key, sizeof key, "%s_bytes", name);
	json_object_set_new(o, key, json_integer((json_int_t)total));
}

/* The runner's done callback: the result as JSON, then the caller's. */
void
tr_on_done(void *arg, const struct runner_result *res)
{
	struct tool_run	*r = arg;
	json_t		*o, *data = NULL, *changes;
	enum gbr_err	 kind = GBR_ERR_INTERNAL;
	char		*reason = NULL;
	size_t		 i;

	/* Every process of the run is gone: the check, if it was the last. */
	changes = tr_group_leave(r->group);
	r->group = NULL;
	/* What is held back of a stream goes out now, as it is. */
	for (i = 0; i < 2 && r->out_cb != NULL; i++) {
		if (r->ncarry[i] > 0) {
			json_t	*c = tr_chunk_json(i == 0 ? RUNNER_STDOUT :
			    RUNNER_STDERR, (char *)r->carry[i], r->ncarry[i]);

			if (c != NULL)
				r->out_cb(r->arg, c);
			json_decref(c);
		}
	}
	if (res->failed) {
		kind = res->kind;
		if (res->kind == GBR_ERR_NOT_FOUND && res->setup_stage != NULL &&
		    strcmp(res->setup_stage, "exec") == 0) {
			if (r->tool == TR_SCRIPT) {
				kind = GBR_ERR_INTERPRETER_NOT_FOUND;
				reason = xasprintf("the interpreter '%s' is not "
				    "installed (or not in PATH)", r->what);
				data = json_pack("{s:s}", "interpreter", r->what);
			} else {
				kind = GBR_ERR_COMMAND_NOT_FOUND;
				reason = xasprintf("no program '%s' (not in PATH, "
				    "or its #! interpreter is missing)", r->what);
				data = json_pack("{s:s}", "command", r->what);
			}
		} else
			reason = xstrdup(res->reason != NULL ? res->reason :
			    "the command could not run");
		if (changes != NULL) {
			if (data == NULL)
				data = json_object();
			json_object_set(data, "protected_changes", changes);
		}
		r->done_cb(r->arg, 1, kind, reason, data);
		json_decref(data);
		free(reason);
		goto out;
	}
	if (res->cancelled && !res->exited && res->signo == 0) {
		data = changes != NULL ? json_pack("{s:O}", "protected_changes",
		    changes) : NULL;
		r->done_cb(r->arg, 1, GBR_ERR_CANCELLED, "cancelled before it "
		    "ran", data);
		json_decref(data);
		goto out;
	}
	o = json_object();
	if (r->tool == TR_CHECK) {
		json_object_set_new(o, "ok", json_boolean(res->exited &&
		    res->exit_code == 0 && !res->timed_out));
		json_object_set(o, "command", r->command);
	}
	json_object_set_new(o, "exit_code", res->exited ?
	    json_integer(res->exit_code) : json_null());
	json_object_set_new(o, "signal", res->signo != 0 ?
	    json_string(runner_signal_name(res->signo)) : json_null());
	if (res->signo != 0)
		json_object_set_new(o, "signal_number", json_integer(res->signo));
	if (res->core)
		json_object_set_new(o, "core_dumped", json_true());
	json_object_set_new(o, "timed_out", json_boolean(res->timed_out));
	json_object_set_new(o, "truncated", json_boolean(res->truncated));
	json_object_set_new(o, "output_limited",
	    json_boolean(res->output_limited));
	json_object_set_new(o, "duration_ms", json_integer(res->duration_ms));
	tr_set_stream(o, "stdout", res->out, res->out_len, res->out_total,
	    res->truncated);
	tr_set_stream(o, "stderr", res->err, res->err_len, res->err_total,
	    res->truncated);
	json_object_set_new(o, "sandbox", json_pack("{s:i, s:b, s:b, s:s, "
	    "s:b, s:i, s:i, s:b, s:b, s:b, s:b, s:i}",
	    "landlock", res->landlock_abi,
	    "namespaces", res->ns,
	    "user_namespace", res->userns,
	    "process_limit", res->nproc != NULL ? res->nproc : "none",
	    "capabilities_dropped", res->caps_dropped,
	    "hidden", res->hidden,
	    "read_only_binds", res->ro_binds,
	    "seccomp", res->seccomp,
	    "private_tmp", res->private_tmp,
	    "own_proc", res->own_proc,
	    "supervised", res->supervised,
	    "unrenamable_folders", res->chained));
	if (r->tool == TR_CHECK) {
		json_t	*diag = tool_run_diagnostics(res->out, res->out_len,
		    TOOL_RUN_DIAG_MAX);
		json_t	*more = tool_run_diagnostics(res->err, res->err_len,
		    TOOL_RUN_DIAG_MAX - json_array_size(diag));

		json_array_extend(diag, more);
		json_decref(more);
		json_object_set_new(o, "diagnostics", diag);
	}
	if (changes != NULL) {
		json_object_set(o, "protected_changes", changes);
		json_object_set_new(o, "note", json_string("the command changed "
		    "protected paths of this workspace (protected_changes): "
		    "gbrd put them back as they were, and a changed file's new "
		    "version waits for a human's approval; do not retry the "
		    "same way: ask for the change with write_file, or run the "
		    "command with write_protected"));
	} else if (r->locked && ((res->err_len > 0 && memmem(res->err,
	    res->err_len, "Read-only file system", 21) != NULL) ||
	    (res->out_len > 0 && memmem(res->out, res->out_len,
	    "Read-only file system", 21) != NULL)))
		json_object_set_new(o, "note", json_string("the workspace's "
		    "protected paths (.gbr_envs, the protected files, .git/hooks "
		    "and .git/config, .git where it is protected) are read-only "
		    "for commands: a command that must write them asks a human "
		    "first when called with write_protected: true (git's "
		    "writing commands ask already in the built-in default)"));
	if (res->timed_out) {
		reason = xasprintf("'%s' did not finish within its time limit; "
		    "it was stopped", r->what);
		r->done_cb(r->arg, 1, GBR_ERR_TIMEOUT, reason, o);
		free(reason);
	} else if (res->cancelled)
		r->done_cb(r->arg, 1, GBR_ERR_CANCELLED, "cancelled", o);
	else
		r->done_cb(r->arg, 0, GBR_ERR__COUNT, NULL, o);
	json_decref(o);
out:
	json_decref(changes);
	tr_run_free(r);
}
