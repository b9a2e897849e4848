/*
 * gbrctl audit [--session S] [--since TIME] [--json]: who did what, read
 * back from the disk log (log.read): the approvals asked and who approved
 * or denied them (the client, its uid, pid and terminal), what commands
 * ran and how they ended, which files the agent's calls changed, the
 * rewinds, the session grants given and revoked, and profile reloads. For
 * a person one line each; with --json one object per line for programs:
 * {seq, ts_ms, session, what, ...}. What a disk log snapshot dropped is
 * no longer there to read, and the first line says so.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "escape.h"
#include "xmalloc.h"

#define CTL_AUDIT_PAGE		1000	/* records per log.read */
#define CTL_AUDIT_REMEMBER	100000	/* approvals and calls remembered */

#define CTL_AUDIT_USAGE "audit [--session S] [--since TIME] [--json]"

struct ctl_audit {
	struct ctl	*ctl;
	const char	*session;	/* an id, or NULL for every one */
	long long	 since_ms;
	json_t		*approvals;	/* id -> {session, tool, what} */
	json_t		*calls;		/* call_id -> args */
};

/* Parses --since: N[smhd] ago, YYYY-MM-DD[ HH:MM[:SS]] local, or ms. */
static long long
ctl_audit_since(const char *s)
{
	struct tm	 tm;
	char		*e, sep = ' ', tail;
	long long	 n;
	int		 y, mo, d, h = 0, mi = 0, sec = 0, got;

	n = strtoll(s, &e, 10);
	if (e != s && n >= 0 && e[0] != '\0' && e[1] == '\0' &&
	    strchr("smhd", e[0]) != NULL) {
		n *= e[0] == 's' ? 1 : e[0] == 'm' ? 60 : e[0] == 'h' ? 3600 :
		    86400;
		return ((long long)time(NULL) - n) * 1000;
	}
	if (e != s && *e == '\0' && n > 100000000000LL)
		return n;	/* ms since the epoch */
	got = sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d%c", &y, &mo, &d, &sep, &h,
	    &mi, &sec, &tail);
	if (!(got == 3 || ((got == 6 || got == 7) && (sep == ' ' ||
	    sep == 'T'))) || mo < 1 || mo > 12 || d < 1 || d > 31)
		return -1;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	tm.tm_isdst = -1;
	return (long long)mktime(&tm) * 1000;
}

/* A string for the terminal (new). */
static char *
ctl_audit_esc(const char *s)
{
	return escape_string(s != NULL ? s : "", s != NULL ? strlen(s) : 0,
	    ESCAPE_BACKSLASH | ESCAPE_CODES, 512, NULL);
}

/* "gbrctl/0.1.0 (uid 1000, pid 42, /dev/pts/3)" for a who object. */
static char *
ctl_audit_who(const json_t *who, const char *by)
{
	const char	*tty;
	char		*c, *r;

	if (!json_is_object(who))
		return ctl_audit_esc(by != NULL ? by : "?");
	c = ctl_audit_esc(json_string_value(json_object_get(who, "client")));
	tty = json_string_value(json_object_get(who, "tty"));
	r = xasprintf("%s (uid %lld, pid %lld%s%s)", c,
	    (long long)json_integer_value(json_object_get(who, "uid")),
	    (long long)json_integer_value(json_object_get(who, "pid")),
	    tty != NULL ? ", " : "", tty != NULL ? tty : "");
	free(c);
	return r;
}

/* The paths of a changes array, escaped, between blanks (new). */
static char *
ctl_audit_files(const json_t *changes)
{
	const json_t	*c;
	char		*out = xstrdup(""), *e, *n;
	size_t		 i;

	json_array_foreach(changes, i, c) {
		e = ctl_audit_esc(json_string_value(json_object_get(c, "path")));
		n = xasprintf("%s%s%s", out, i > 0 ? " " : "", e);
		free(out);
		free(e);
		out = n;
	}
	return out;
}

/* What a call did, in a few words: its argv, path or script (new). */
static char *
ctl_audit_args(const json_t *args)
{
	const json_t	*v;
	char		*s, *e;

	if ((v = json_object_get(args, "argv")) != NULL && json_is_array(v))
		s = json_dumps(v, JSON_COMPACT);
	else if ((v = json_object_get(args, "path")) != NULL)
		s = xstrdup(json_string_value(v) != NULL ?
		    json_string_value(v) : "");
	else if ((v = json_object_get(args, "code")) != NULL)
		s = xstrdup(json_string_value(v) != NULL ?
		    json_string_value(v) : "");
	else
		s = xstrdup("");
	e = escape_string(s, strlen(s), ESCAPE_BACKSLASH | ESCAPE_CODES, 160,
	    NULL);
	free(s);
	return e;
}

/* Prints one line (or object) of the trail; o is stolen. */
static void
ctl_audit_out(struct ctl_audit *a, const json_t *rec, const char *session,
    json_t *o, const char *line)
{
	char		 when[32];
	time_t		 t;
	struct tm	 tm;
	long long	 ms = json_integer_value(json_object_get(rec, "ts_ms"));

	if (a->ctl->json) {
		json_object_set_new(o, "seq", json_incref(json_object_get(rec,
		    "seq")));
		json_object_set_new(o, "ts_ms", json_integer(ms));
		if (session != NULL)
			json_object_set_new(o, "session", json_string(session));
		ctl_print_json(o);
	} else {
		t = (time_t)(ms / 1000);
		localtime_r(&t, &tm);
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		printf("%s %-12s %s\n", when, session != NULL ? session : "-",
		    line);
	}
	json_decref(o);
}

/* One approval.* record. */
static void
ctl_audit_approval(struct ctl_audit *a, const json_t *rec, const char *type,
    const json_t *d)
{
	const char	*id = json_string_value(json_object_get(d, "id"));
	const char	*session = NULL, *state;
	const json_t	*ap;
	char		*who, *line, *what, *reason;

	if (id == NULL)
		return;
	if (strcmp(type, "approval.requested") == 0) {
		session = json_string_value(json_object_get(d, "session"));
		if (json_object_size(a->approvals) < CTL_AUDIT_REMEMBER)
			json_object_set_new(a->approvals, id, json_pack(
			    "{s:s?, s:s?, s:s?}", "session", session, "tool",
			    json_string_value(json_object_get(d, "tool")),
			    "what", json_string_value(json_object_get(d,
			    json_object_get(d, "command") != NULL ? "command" :
			    "path"))));
	}
	ap = json_object_get(a->approvals, id);
	if (session == NULL)
		session = json_string_value(json_object_get(ap, "session"));
	if (a->session != NULL && (session == NULL ||
	    strcmp(session, a->session) != 0))
		return;
	what = ctl_audit_esc(json_string_value(json_object_get(ap, "what")));
	if (strcmp(type, "approval.requested") == 0) {
		line = xasprintf("asked    approval %s: %s %s", id,
		    json_string_value(json_object_get(ap, "tool")), what);
		ctl_audit_out(a, rec, session, json_pack("{s:s, s:s, s:O?, "
		    "s:O?}", "what", "approval.asked", "approval", id, "tool",
		    json_object_get(ap, "tool"), "target", json_object_get(ap,
		    "what")), line);
	} else if (strcmp(type, "approval.resolved") == 0) {
		state = json_string_value(json_object_get(d, "state"));
		who = ctl_audit_who(json_object_get(d, "who"),
		    json_string_value(json_object_get(d, "by")));
		reason = ctl_audit_esc(json_string_value(json_object_get(d,
		    "reason")));
		line = xasprintf("%-8s approval %s: %s %s%s%s%s%s", state != NULL ?
		    state : "?", id, json_string_value(json_object_get(ap,
		    "tool")) != NULL ? json_string_value(json_object_get(ap,
		    "tool")) : "?", what, json_object_get(d, "who") != NULL ||
		    json_object_get(d, "by") != NULL ? " by " : "",
		    json_object_get(d, "who") != NULL || json_object_get(d,
		    "by") != NULL ? who : "", *reason != '\0' ? ": " : "",
		    reason);
		ctl_audit_out(a, rec, session, json_pack("{s:s, s:s, s:s?, "
		    "s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "what",
		    "approval.decided", "approval", id, "state", state, "tool",
		    json_object_get(ap, "tool"), "target", json_object_get(ap,
		    "what"), "who", json_object_get(d, "who"), "by",
		    json_object_get(d, "by"), "reason", json_object_get(d,
		    "reason"), "grant", json_object_get(d, "grant")), line);
		free(who);
		free(reason);
		if (json_is_object(json_object_get(d, "grant"))) {
			free(line);
			line = xasprintf("granted  %s for the session: %s %s",
			    json_string_value(json_object_get(json_object_get(
			    d, "grant"), "id")), json_string_value(
			    json_object_get(ap, "tool")), what);
			ctl_audit_out(a, rec, session, json_pack("{s:s, s:O}",
			    "what", "grant.given", "grant", json_object_get(d,
			    "grant")), line);
		}
	} else {
		free(what);
		return;
	}
	free(what);
	free(line);
}

/* One session.* record. */
static void
ctl_audit_session(struct ctl_audit *a, const json_t *rec, const char *type,
    const json_t *d)
{
	const char	*session = json_string_value(json_object_get(d,
	    "session"));
	const char	*et = json_string_value(json_object_get(d, "type"));
	const json_t	*m, *r, *args;
	const char	*call_id, *tool;
	char		*line, *files, *who, *s;

	if (session == NULL || (a->session != NULL &&
	    strcmp(session, a->session) != 0))
		return;
	if (strcmp(type, "session.message") == 0 && et != NULL &&
	    strcmp(et, "conversation.rewound") == 0) {
		if (json_integer_value(json_object_get(rec, "ts_ms")) <
		    a->since_ms)
			return;
		who = ctl_audit_who(json_object_get(d, "who"), NULL);
		line = xasprintf("rewound  the conversation by %s: %lld "
		    "message(s) after seq %lld dropped", who, (long long)
		    json_integer_value(json_object_get(d, "messages")),
		    (long long)json_integer_value(json_object_get(d,
		    "to_seq")));
		ctl_audit_out(a, rec, session, json_pack("{s:s, s:O?, s:O?, "
		    "s:O?, s:O?}", "what", et, "to_seq", json_object_get(d,
		    "to_seq"), "from_turn", json_object_get(d, "from_turn"),
		    "messages", json_object_get(d, "messages"), "who",
		    json_object_get(d, "who")), line);
		free(who);
		free(line);
		return;
	}
	if (strcmp(type, "session.message") == 0) {
		m = json_object_get(d, "message");
		call_id = json_string_value(json_object_get(m, "call_id"));
		tool = json_string_value(json_object_get(m, "tool"));
		if (call_id == NULL || tool == NULL)
			return;
		if (json_object_get(m, "args") != NULL) {
			if (json_object_size(a->calls) < CTL_AUDIT_REMEMBER)
				json_object_set(a->calls, call_id,
				    json_object_get(m, "args"));
			return;
		}
		if ((strcmp(tool, "run_command") != 0 &&
		    strcmp(tool, "run_script") != 0 &&
		    strcmp(tool, "check") != 0) || json_integer_value(
		    json_object_get(rec, "ts_ms")) < a->since_ms)
			return;
		args = json_object_get(a->calls, call_id);
		r = json_object_get(m, "result");
		s = ctl_audit_args(args);
		if (json_is_true(json_object_get(m, "ok")))
			line = xasprintf("ran      %s %s: exit %lld", tool, s,
			    (long long)json_integer_value(json_object_get(r,
			    "exit_code")));
		else
			line = xasprintf("ran      %s %s: %s", tool, s,
			    json_string_value(json_object_get(json_object_get(
			    m, "error"), "kind")));
		ctl_audit_out(a, rec, session, json_pack("{s:s, s:s, s:s, "
		    "s:O?, s:b, s:O?, s:O?}", "what", "command", "tool", tool,
		    "call_id", call_id, "args", args, "ok", json_is_true(
		    json_object_get(m, "ok")), "exit_code", json_object_get(r,
		    "exit_code"), "error", json_object_get(m, "error")), line);
		json_object_del(a->calls, call_id);
		free(s);
		free(line);
		return;
	}
	/* Events, and session.env: a profile applied (env.reloaded). */
	if ((strcmp(type, "session.event") != 0 &&
	    strcmp(type, "session.env") != 0) || et == NULL)
		return;
	if (strcmp(et, "workspace.changed") == 0 ||
	    strcmp(et, "workspace.rewound") == 0) {
		files = ctl_audit_files(json_object_get(d, "changes"));
		who = ctl_audit_who(json_object_get(d, "who"), NULL);
		if (strcmp(et, "workspace.changed") == 0)
			line = xasprintf("changed  %s: %s", json_string_value(
			    json_object_get(d, "tool")), files);
		else
			line = xasprintf("rewound  by %s: %s%s", who, files,
			    json_is_true(json_object_get(d, "forced")) ?
			    " (forced)" : "");
		ctl_audit_out(a, rec, session, json_pack("{s:s, s:O?, s:O?, "
		    "s:O, s:O?}", "what", et, "tool", json_object_get(d,
		    "tool"), "call_id", json_object_get(d, "call_id"),
		    "changes", json_object_get(d, "changes"), "who",
		    json_object_get(d, "who")), line);
		free(files);
		free(who);
		free(line);
	} else if (strcmp(et, "env.reloaded") == 0 ||
	    strcmp(et, "env.invalid") == 0) {
		s = ctl_audit_esc(json_string_value(json_object_get(d,
		    strcmp(et, "env.reloaded") == 0 ? "reason" : "error")));
		line = xasprintf("%s %s: %s", strcmp(et, "env.reloaded") == 0 ?
		    "profile " : "profile!", json_string_value(
		    json_object_get(d, "env")), s);
		ctl_audit_out(a, rec, session, json_pack("{s:s, s:O?, s:O?, "
		    "s:O?}", "what", et, "env", json_object_get(d, "env"),
		    "reason", json_object_get(d, "reason"), "error",
		    json_object_get(d, "error")), line);
		free(s);
		free(line);
	}
}

/* One record of the log. */
static void
ctl_audit_record(struct ctl_audit *a, const json_t *rec)
{
	const char	*type = json_string_value(json_object_get(rec, "type"));
	const json_t	*d = json_object_get(rec, "data");
	const char	*id;
	char		*who, *line;

	if (type == NULL || !json_is_object(d))
		return;
	/* Approvals are remembered from before --since: later ones need them. */
	if (strcmp(type, "approval.requested") == 0 &&
	    json_integer_value(json_object_get(rec, "ts_ms")) < a->since_ms) {
		id = json_string_value(json_object_get(d, "id"));
		if (id != NULL && json_object_size(a->approvals) <
		    CTL_AUDIT_REMEMBER)
			json_object_set_new(a->approvals, id, json_pack(
			    "{s:O?, s:O?, s:O?}", "session", json_object_get(d,
			    "session"), "tool", json_object_get(d, "tool"),
			    "what", json_object_get(d, json_object_get(d,
			    "command") != NULL ? "command" : "path")));
		return;
	}
	if (json_integer_value(json_object_get(rec, "ts_ms")) < a->since_ms) {
		if (strcmp(type, "session.message") == 0)
			ctl_audit_session(a, rec, type, d);	/* calls' args */
		return;
	}
	if (strcmp(type, "approval.revoke") == 0) {
		if (a->session != NULL)
			return;		/* a grant's session is not in it */
		who = ctl_audit_who(json_object_get(d, "who"), NULL);
		line = xasprintf("revoked  grant %s by %s", json_string_value(
		    json_object_get(d, "id")), who);
		ctl_audit_out(a, rec, NULL, json_pack("{s:s, s:O?, s:O?}",
		    "what", "grant.revoked", "grant", json_object_get(d, "id"),
		    "who", json_object_get(d, "who")), line);
		free(who);
		free(line);
	} else if (strncmp(type, "approval.", 9) == 0)
		ctl_audit_approval(a, rec, type, d);
	else if (strncmp(type, "session.", 8) == 0)
		ctl_audit_session(a, rec, type, d);
}

/* The id of a session named by name or id (open sessions), or key. */
static const char *
ctl_audit_sid(struct ctl *ctl, const char *key, json_t **keep)
{
	json_t		*res, *s;
	size_t		 i;

	*keep = NULL;
	if (ctl_call(ctl, "session.list", json_object(), &res) != CTL_EXIT_OK)
		return key;
	json_array_foreach(json_object_get(res, "sessions"), i, s) {
		if (json_string_value(json_object_get(s, "name")) != NULL &&
		    strcmp(json_string_value(json_object_get(s, "name")),
		    key) == 0) {
			*keep = res;
			return json_string_value(json_object_get(s, "id"));
		}
	}
	json_decref(res);
	return key;
}

/* audit [--session S] [--since TIME] */
int
ctl_audit(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_audit	 a;
	json_t			*res, *rec, *keep = NULL;
	long long		 after = 0;
	size_t			 i;
	int			 k, r, more, first = 1;

	memset(&a, 0, sizeof a);
	a.ctl = ctl;
	for (k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--json") == 0)
			ctl->json = 1;
		else if (strcmp(argv[k], "--session") == 0 && k + 1 < argc)
			a.session = argv[++k];
		else if (strcmp(argv[k], "--since") == 0 && k + 1 < argc) {
			if ((a.since_ms = ctl_audit_since(argv[++k])) < 0) {
				fprintf(stderr, "gbrctl audit: --since: a time "
				    "(YYYY-MM-DD[ HH:MM[:SS]]) or an age "
				    "(30m, 2h, 7d): %s\n", argv[k]);
				return CTL_EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "usage: gbrctl %s\n", CTL_AUDIT_USAGE);
			return CTL_EXIT_USAGE;
		}
	}
	if (a.session != NULL)
		a.session = ctl_audit_sid(ctl, a.session, &keep);
	a.approvals = json_object();
	a.calls = json_object();
	do {
		r = ctl_call(ctl, "log.read", json_pack("{s:I, s:I}",
		    "after_seq", (json_int_t)after, "limit",
		    (json_int_t)CTL_AUDIT_PAGE), &res);
		if (r != CTL_EXIT_OK)
			break;
		if (first && json_integer_value(json_object_get(res,
		    "first_seq")) > 1)
			fprintf(stderr, "gbrctl audit: the records before seq "
			    "%lld were dropped after a snapshot of the disk "
			    "log; the trail starts there\n", (long long)
			    json_integer_value(json_object_get(res,
			    "first_seq")));
		first = 0;
		json_array_foreach(json_object_get(res, "records"), i, rec) {
			ctl_audit_record(&a, rec);
			after = json_integer_value(json_object_get(rec, "seq"));
		}
		more = json_is_true(json_object_get(res, "more"));
		json_decref(res);
	} while (more);
	json_decref(a.approvals);
	json_decref(a.calls);
	json_decref(keep);
	return r;
}
