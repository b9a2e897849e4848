/*
 * The REPL's tool results, numbered, and /show: a tool result is shown as
 * one summary line ("  = [3] run_command exit 0 in 4 ms: first (+411
 * lines, /show 3 for all)"), and /show 3 prints all of it. Also the pager
 * that output taller than the terminal goes through.
 *
 * Only where each result is kept here, never its content: a bounded table
 * of the last GBR_SHOWN_MAX numbers with their session and seq, so memory
 * stays the same however long gbr runs. /show asks gbrd for that one
 * history message (session.history, before_seq = seq + 1, limit 1), which
 * works the same for a result seen live and for one shown from the
 * history when attaching.
 *
 * A run's live output is cut on the screen after GBR_LIVE_LINES lines,
 * with a line that says so: its result, one /show away, has the rest.
 *
 * The pager: gbr_page_begin gathers what gbr_write is given; gbr_page_end
 * writes it to an unlinked temporary file and runs the pager
 * (console_pager: $PAGER, else "less -R", with LESS=FRX when LESS is
 * unset) on it as stdin, the way the editor is run (gbr_run_child), if
 * stdin and stdout are a terminal and the text is taller than it.
 * Anything else, a system that runs no pager (Windows), or a pager that
 * cannot run, and the text is written as it would have been.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "console.h"
#include "gbr-int.h"
#include "render.h"
#include "xmalloc.h"

/* One tool result shown: the number it was given, where it is kept. */
struct gbr_shown {
	long long	 n;	/* 0: a free slot */
	long long	 seq;	/* its message's seq in the session's history */
	char		*session;
};

/* A call whose live output is being shown: how much of it. */
struct gbr_live {
	char		*call_id;	/* NULL: a free slot */
	int		 lines;		/* lines shown */
	int		 cut;		/* GBR_LIVE_LINES reached: no more */
};

static struct gbr_live	 gbr_live[GBR_LIVE_CALLS];
static size_t		 gbr_live_next;

/* Number n is in slot (n - 1) % GBR_SHOWN_MAX while it is the newest there. */
static struct gbr_shown	 gbr_shown[GBR_SHOWN_MAX];
static long long	 gbr_shown_last;	/* the last number given */

/* The seq of a tool result, event or history message; 0 if v is none. */
static long long
gbr_show_seq(const json_t *v, int message)
{
	const char	*s;

	if (message) {
		s = json_string_value(json_object_get(v, "role"));
		if (s == NULL || strcmp(s, "tool") != 0)
			return 0;
	} else {
		s = json_string_value(json_object_get(v, "type"));
		if (s == NULL || strcmp(s, "tool.result") != 0)
			return 0;
	}
	return (long long)json_integer_value(json_object_get(v, "seq"));
}

/* Gives a tool result its number: the one it had if it was shown before. */
long long
gbr_show_tag(const json_t *v, int message)
{
	const char	*sid = G.hist_session;

	if (sid == NULL)
		sid = G.session;
	return gbr_show_number(sid, gbr_show_seq(v, message));
}

/* The number of the tool result at seq in session sid (new if need be). */
long long
gbr_show_number(const char *sid, long long seq)
{
	struct gbr_shown	*e;
	size_t			 i;

	if (seq <= 0 || sid == NULL)
		return 0;
	/* /history shows the same result again: the same number. */
	for (i = 0; i < GBR_SHOWN_MAX; i++) {
		e = &gbr_shown[i];
		if (e->n != 0 && e->seq == seq && strcmp(e->session, sid) == 0)
			return e->n;
	}
	e = &gbr_shown[gbr_shown_last % GBR_SHOWN_MAX];
	free(e->session);
	e->n = ++gbr_shown_last;
	e->seq = seq;
	e->session = xstrdup(sid);
	return e->n;
}

/*
 * A run tool's live output (a tool.output event): shown, but only its
 * first GBR_LIVE_LINES lines for each call; then one line says the rest
 * is cut, and the rest is left out. The result, when it comes, is one
 * /show away (its summary line says so).
 */
void
gbr_show_output(const json_t *p)
{
	struct gbr_live	*l = NULL;
	const char	*cid = json_string_value(json_object_get(p, "call_id"));
	const json_t	*text = json_object_get(p, "text");
	const char	*s, *nl;
	json_t		*cut;
	size_t		 i, len;

	if (cid == NULL) {
		gbr_render(p, 0);
		return;
	}
	for (i = 0; i < GBR_LIVE_CALLS && l == NULL; i++)
		if (gbr_live[i].call_id != NULL &&
		    strcmp(gbr_live[i].call_id, cid) == 0)
			l = &gbr_live[i];
	if (l == NULL) {
		/* A new call takes the oldest slot: calls run a few at once. */
		l = &gbr_live[gbr_live_next++ % GBR_LIVE_CALLS];
		free(l->call_id);
		l->call_id = xstrdup(cid);
		l->lines = 0;
		l->cut = 0;
	}
	if (l->cut)
		return;		/* also gbrd's own "stops here": said already */
	if (!json_is_string(text)) {
		gbr_render(p, 0);
		return;
	}
	s = json_string_value(text);
	len = json_string_length(text);
	for (i = 0; i < len; i += (size_t)(nl - (s + i)) + 1) {
		if ((nl = memchr(s + i, '\n', len - i)) == NULL)
			break;
		if (++l->lines == GBR_LIVE_LINES) {
			/* Up to this line, then no more. */
			l->cut = 1;
			cut = json_copy((json_t *)p);
			json_object_set_new(cut, "text",
			    json_stringn(s, (size_t)(nl - s) + 1));
			gbr_render(cut, 0);
			json_decref(cut);
			gbr_say("%s  ... more output, cut here after %d lines: "
			    "its result, when it comes, has all of it (/show)"
			    "%s\n", render_color(&G.rd, "dim"), GBR_LIVE_LINES,
			    render_color(&G.rd, "reset"));
			return;
		}
	}
	gbr_render(p, 0);
}

/* Tells whether the live output of call cid was cut on the screen. */
int
gbr_show_output_cut(const char *cid)
{
	size_t	i;

	for (i = 0; cid != NULL && i < GBR_LIVE_CALLS; i++)
		if (gbr_live[i].call_id != NULL &&
		    strcmp(gbr_live[i].call_id, cid) == 0)
			return gbr_live[i].cut;
	return 0;
}

/* Tells whether a result is one of a run tool's ({stdout, exit_code, ...}). */
static int
gbr_show_is_run(const char *tool, const json_t *res)
{
	if (json_object_get(res, "exit_code") != NULL ||
	    json_object_get(res, "stdout") != NULL)
		return 1;
	return tool != NULL && (strcmp(tool, "run_command") == 0 ||
	    strcmp(tool, "run_script") == 0 || strcmp(tool, "check") == 0);
}

/* Renders the whole of one tool result message, number n. */
static void
gbr_show_message(long long n, const json_t *m)
{
	struct gbr_capture	 cap;
	const char		*tool = json_string_value(json_object_get(m,
				    "tool"));
	const json_t		*res = json_object_get(m, "result");
	const json_t		*content = json_object_get(res, "content");
	int			 ok = !json_is_false(json_object_get(m, "ok"));

	if (gbr_capture(&cap) == NULL)
		return;
	render_close_line(&G.rd);
	fprintf(cap.f, "%s[%lld] ", render_color(&G.rd, ok ? "dim" : "error"),
	    n);
	render_escaped(&G.rd, tool != NULL ? tool : "?", tool != NULL ?
	    strlen(tool) : 1, RENDER_ESC_BACKSLASH, 128);
	fprintf(cap.f, "%s:%s\n", ok ? "" : " failed", render_color(&G.rd,
	    "reset"));
	if (!ok)
		render_json_block(&G.rd, json_object_get(m, "error"));
	else if (res != NULL && gbr_show_is_run(tool, res))
		render_run_result(&G.rd, res);
	else if (tool != NULL && strcmp(tool, "read_file") == 0 &&
	    json_is_string(content))
		render_text_block(&G.rd, json_string_value(content),
		    json_string_length(content), "  ");
	else
		render_json_block(&G.rd, res != NULL ? res : m);
	gbr_capture_end(&cap);
}

/* /show [N]: all of tool result N, or of the last one. */
void
gbr_show_cmd(char *arg, char *rest)
{
	struct gbr_shown	*e;
	json_t			*hist, *m, *found = NULL;
	char			*end;
	long long		 n = gbr_shown_last;
	size_t			 i;

	if (*arg != '\0') {
		errno = 0;
		n = strtoll(arg, &end, 10);
		if (errno != 0 || *end != '\0' || n < 1 || rest != NULL) {
			gbr_say("usage: /show [N] (N: the number of a tool "
			    "result, [N] on its line)\n");
			return;
		}
	}
	if (n < 1 || n > gbr_shown_last) {
		if (gbr_shown_last == 0)
			gbr_say("! no tool result has been shown yet\n");
		else
			gbr_say("! there is no tool result [%lld] (the last is "
			    "[%lld])\n", n, gbr_shown_last);
		return;
	}
	e = &gbr_shown[(n - 1) % GBR_SHOWN_MAX];
	if (e->n != n) {
		gbr_say("! [%lld] is too old: only the last %d are remembered "
		    "(/history N shows older ones)\n", n, GBR_SHOWN_MAX);
		return;
	}
	if ((hist = gbr_call("session.history", json_pack("{s:s, s:I, s:i}",
	    "session", e->session, "before_seq", (json_int_t)e->seq + 1,
	    "limit", 1), NULL, 0)) == NULL)
		return;
	json_array_foreach(json_object_get(hist, "messages"), i, m)
		if (json_integer_value(json_object_get(m, "seq")) == e->seq)
			found = m;
	if (found == NULL)
		gbr_say("! [%lld] is no longer in the session's history\n", n);
	else {
		gbr_page_begin();
		gbr_show_message(n, found);
		gbr_page_end();
	}
	json_decref(hist);
}

/* Starts gathering output for the pager. */
void
gbr_page_begin(void)
{
	if (G.page != NULL)
		return;
	G.page_buf = NULL;
	G.page_len = 0;
	G.page = open_memstream(&G.page_buf, &G.page_len);
}

/* The rows text takes on a terminal cols wide (escape sequences take none). */
static size_t
gbr_page_rows(const char *s, size_t len, size_t cols)
{
	size_t	i, col = 0, rows = 0;

	for (i = 0; i < len; i++) {
		if (s[i] == '\n') {
			rows += 1 + (col > 0 ? (col - 1) / cols : 0);
			col = 0;
		} else if (s[i] == '\033' && i + 1 < len && s[i + 1] == '[') {
			for (i += 2; i < len && (s[i] < 0x40 ||
			    s[i] > 0x7e); i++)
				;
		} else if (((unsigned char)s[i] & 0xc0) != 0x80)
			col++;
	}
	return rows + (col > 0 ? 1 + (col - 1) / cols : 0);
}

/*
 * Runs the pager on text; returns 0 if it ran, -1 if it could not (then
 * nothing was shown).
 */
static int
gbr_page_run(const char *text, size_t len)
{
	const char	*pager = console_pager();
	char		*path, *tmp;
	size_t		 off;
	ssize_t		 w;
	int		 fd, st, less_set = getenv("LESS") != NULL;

	if (pager == NULL)
		return -1;	/* this system runs none */
	tmp = console_tmp_dir();
	path = xasprintf("%s/gbr-show.XXXXXX", tmp);
	free(tmp);
	fd = mkstemp(path);
	if (fd != -1)
		unlink(path);	/* only the descriptor: nothing left behind */
	free(path);
	if (fd == -1)
		return -1;
	for (off = 0; off < len; off += (size_t)w) {
		if ((w = write(fd, text + off, len - off)) <= 0) {
			if (w == -1 && errno == EINTR) {
				w = 0;
				continue;
			}
			close(fd);
			return -1;
		}
	}
	if (lseek(fd, 0, SEEK_SET) == -1) {
		close(fd);
		return -1;
	}
	/* F: quit if it fits one screen; R: colours; X: no clearing. */
	if (!less_set)
		setenv("LESS", "FRX", 1);
	st = gbr_run_child(CONSOLE_RUN_PAGER, pager, NULL, fd, "pager");
	if (!less_set)
		unsetenv("LESS");
	close(fd);
	/* sh says 126 or 127 when the pager is not there or cannot run. */
	return st == -1 || st == 126 || st == 127 ? -1 : 0;
}

/*
 * Ends gathering: the text through the pager when a person at a terminal
 * would see it scroll away, else written as it is.
 */
void
gbr_page_end(void)
{
	FILE		*f = G.page;
	int		 paged = 0, cols, rows;

	if (f == NULL)
		return;
	G.page = NULL;
	fclose(f);
	if (G.tty && !G.hangup && console_size(&cols, &rows) == 0 && rows > 0 &&
	    cols > 0 && gbr_page_rows(G.page_buf, G.page_len, (size_t)cols) >=
	    (size_t)rows)
		paged = gbr_page_run(G.page_buf, G.page_len) == 0;
	if (paged)
		G.out_col = 0;	/* the pager left the cursor on a new line */
	else
		gbr_write(G.page_buf, G.page_len);
	free(G.page_buf);
	G.page_buf = NULL;
	G.page_len = 0;
}
