/*
 * gbrctl's session commands: new, sessions, status SESSION, send, attach,
 * history, cancel, close. Each is a thin wrapper over one or two session.* calls; "send"
 * waits for the turn it started to end by attaching right after its own
 * message (after_seq = the message's seq), so it sees every event of the
 * turn exactly once even if the turn ended before it attached.
 */
#include "gbr-config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "render.h"
#include "xmalloc.h"

/* Longest text read from stdin for "send SESSION -". */
#define CTL_STDIN_MAX	(16 * 1024 * 1024)

/* Parsed options of one command. */
struct ctl_opts {
	const char	*name;
	const char	*env;
	const char	*request_id;
	long long	 after;		/* -1: none */
	long long	 limit;		/* -1: none */
	int		 no_wait;
	int		 events;	/* --events */
	char		*pos[4];	/* positional arguments */
	int		 npos;
};

/* Parses a number option. */
static int
ctl_number(const char *opt, const char *s, long long min, long long max,
    long long *out)
{
	char		*end;
	long long	 v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "gbrctl: %s takes a number from %lld to %lld\n",
		    opt, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * Parses "--opt VALUE", "--opt=VALUE" and flags among positional
 * arguments; allowed lists the options the command takes.
 */
static int
ctl_parse(int argc, char **argv, const char *allowed, struct ctl_opts *o,
    int min_pos, int max_pos, const char *usage)
{
	const char	*arg, *val, *eq;
	char		 opt[32];
	size_t		 n;
	int		 i, dashdash = 0;

	memset(o, 0, sizeof *o);
	o->after = o->limit = -1;
	for (i = 0; i < argc; i++) {
		arg = argv[i];
		if (dashdash || arg[0] != '-' || arg[1] != '-' ||
		    strcmp(arg, "-") == 0) {
			if (o->npos >= max_pos || o->npos >= 4)
				goto bad;
			o->pos[o->npos++] = argv[i];
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			dashdash = 1;
			continue;
		}
		eq = strchr(arg, '=');
		n = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
		if (n >= sizeof opt)
			goto bad;
		memcpy(opt, arg, n);
		opt[n] = '\0';
		if (strstr(allowed, opt) == NULL)
			goto bad;
		if (strcmp(opt, "--no-wait") == 0 || strcmp(opt, "--events") == 0) {
			if (eq != NULL)
				goto bad;
			if (opt[2] == 'n')
				o->no_wait = 1;
			else
				o->events = 1;
			continue;
		}
		if (eq != NULL)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			goto bad;
		if (strcmp(opt, "--name") == 0)
			o->name = val;
		else if (strcmp(opt, "--env") == 0)
			o->env = val;
		else if (strcmp(opt, "--request-id") == 0)
			o->request_id = val;
		else if (strcmp(opt, "--after") == 0) {
			if (ctl_number("--after", val, 0, INT64_MAX, &o->after) != 0)
				return -1;
		} else if (strcmp(opt, "--limit") == 0) {
			if (ctl_number("--limit", val, 1, 100000, &o->limit) != 0)
				return -1;
		} else
			goto bad;
	}
	if (o->npos < min_pos)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "usage: gbrctl %s\n", usage);
	return -1;
}

/* Formats how long ago a wall-clock time was. */
static void
ctl_ago(long long ms, char *buf, size_t len)
{
	long long	now = (long long)time(NULL) * 1000, s;

	s = ms > 0 && now > ms ? (now - ms) / 1000 : 0;
	if (s < 60)
		snprintf(buf, len, "%llds ago", s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm ago", s / 60);
	else if (s < 86400)
		snprintf(buf, len, "%lldh ago", s / 3600);
	else
		snprintf(buf, len, "%lldd ago", s / 86400);
}

/* new [--name N] [--env E] [--request-id ID] [DIR] */
int
ctl_session_new(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_opts	 o;
	json_t		*params, *res;
	char		 dir[PATH_MAX];
	int		 r;

	if (ctl_parse(argc, argv, "--name --env --request-id", &o, 0, 1,
	    "new [--name NAME] [--env ENV] [--request-id ID] [DIR]") != 0)
		return CTL_EXIT_USAGE;
	if (realpath(o.npos > 0 ? o.pos[0] : ".", dir) == NULL) {
		fprintf(stderr, "gbrctl: %s: %s\n", o.npos > 0 ? o.pos[0] : ".",
		    strerror(errno));
		return CTL_EXIT_USAGE;
	}
	params = json_pack("{s:s}", "workspace", dir);
	if (o.name != NULL)
		json_object_set_new(params, "name", json_string(o.name));
	if (o.env != NULL)
		json_object_set_new(params, "env", json_string(o.env));
	if (o.request_id != NULL)
		json_object_set_new(params, "request_id", json_string(o.request_id));
	if ((r = ctl_call(ctl, "session.create", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else
		printf("%s\n", json_string_value(json_object_get(res, "id")));
	json_decref(res);
	return CTL_EXIT_OK;
}

/* sessions: every open session. */
int
ctl_session_list(struct ctl *ctl, int argc, char **argv)
{
	json_t		*res, *s;
	size_t		 i;
	char		 ago[32];
	int		 r;

	if ((r = ctl_call(ctl, "session.list", NULL, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json) {
		ctl_print_json(res);
		json_decref(res);
		return CTL_EXIT_OK;
	}
	if (json_array_size(json_object_get(res, "sessions")) == 0)
		printf("no sessions (gbrctl new DIR, or gbr DIR, makes one)\n");
	else
		printf("%-12s  %-16s  %-17s  %3s  %5s  %-9s  %s\n", "ID", "NAME",
		    "STATE", "ATT", "MSGS", "ACTIVE", "WORKSPACE");
	json_array_foreach(json_object_get(res, "sessions"), i, s) {
		ctl_ago(json_integer_value(json_object_get(s, "active_ms")), ago,
		    sizeof ago);
		printf("%-12s  %-16s  %-17s  %3lld  %5lld  %-9s  %s\n",
		    json_string_value(json_object_get(s, "id")),
		    json_string_value(json_object_get(s, "name")) != NULL ?
		    json_string_value(json_object_get(s, "name")) : "-",
		    json_string_value(json_object_get(s, "state")),
		    (long long)json_integer_value(json_object_get(s, "attached")),
		    (long long)json_integer_value(json_object_get(s, "messages")),
		    ago, json_string_value(json_object_get(s, "workspace")));
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/*
 * status SESSION: one session's state, tokens and estimated cost, from its
 * session.list entry (found by id or name, as gbrd finds sessions).
 */
int
ctl_session_status(struct ctl *ctl, const char *key)
{
	json_t		*res, *s, *found = NULL, *u, *last, *c;
	const char	*id, *name;
	char		 cost[32], lcost[32];
	size_t		 i;
	long long	 unpriced;
	int		 r;

	if ((r = ctl_call(ctl, "session.list", NULL, &res)) != CTL_EXIT_OK)
		return r;
	json_array_foreach(json_object_get(res, "sessions"), i, s) {
		id = json_string_value(json_object_get(s, "id"));
		name = json_string_value(json_object_get(s, "name"));
		if ((id != NULL && strcmp(id, key) == 0) ||
		    (name != NULL && strcmp(name, key) == 0)) {
			found = s;
			break;
		}
	}
	if (found == NULL) {
		fprintf(stderr, "gbrctl: no open session is called %s (gbrctl "
		    "sessions lists them)\n", key);
		json_decref(res);
		return CTL_EXIT_ERROR;
	}
	if (ctl->json) {
		ctl_print_json(found);
		json_decref(res);
		return CTL_EXIT_OK;
	}
	s = found;
	name = json_string_value(json_object_get(s, "name"));
	printf("session   %s%s%s%s on %s\n", id, name != NULL ? " (" : "",
	    name != NULL ? name : "", name != NULL ? ")" : "",
	    json_string_value(json_object_get(s, "workspace")));
	printf("state     %s, turn %lld, %lld messages, %lld attached\n",
	    json_string_value(json_object_get(s, "state")),
	    (long long)json_integer_value(json_object_get(s, "turn")),
	    (long long)json_integer_value(json_object_get(s, "messages")),
	    (long long)json_integer_value(json_object_get(s, "attached")));
	u = json_object_get(s, "usage");
	last = json_object_get(u, "last_turn");
	printf("tokens    in %lld, out %lld; last turn in %lld, out %lld\n",
	    (long long)json_integer_value(json_object_get(u, "input_tokens")),
	    (long long)json_integer_value(json_object_get(u, "output_tokens")),
	    (long long)json_integer_value(json_object_get(last, "input_tokens")),
	    (long long)json_integer_value(json_object_get(last,
	    "output_tokens")));
	/* cost_usd sums the priced turns; the others are counted apart. */
	c = json_object_get(u, "cost_usd");
	unpriced = json_integer_value(json_object_get(u, "unpriced_turns"));
	if (json_is_number(c) && (json_number_value(c) > 0 || unpriced == 0)) {
		render_cost(cost, sizeof cost, json_number_value(c));
		snprintf(lcost, sizeof lcost, "unpriced");
		if (json_is_number(json_object_get(last, "cost_usd")))
			render_cost(lcost, sizeof lcost, json_number_value(
			    json_object_get(last, "cost_usd")));
		printf("cost      %s; last turn %s\n", cost, lcost);
	}
	if (unpriced > 0)
		printf("unpriced  %lld turn%s (no gbrd.conf [prices] line for the "
		    "model)\n", unpriced, unpriced == 1 ? "" : "s");
	json_decref(res);
	return CTL_EXIT_OK;
}

/* Reads all of stdin, bounded (see ctl.h). */
char *
ctl_read_stdin(void)
{
	size_t	 len = 0, cap = 4096;
	char	*buf = xmalloc(cap);
	ssize_t	 n;

	for (;;) {
		if (len + 1 >= cap) {
			if (cap >= CTL_STDIN_MAX) {
				fprintf(stderr, "gbrctl: stdin is over %d bytes\n",
				    CTL_STDIN_MAX);
				free(buf);
				return NULL;
			}
			cap *= 2;
			buf = xreallocarray(buf, cap, 1);
		}
		n = read(STDIN_FILENO, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "gbrctl: stdin: %s\n", strerror(errno));
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (strlen(buf) != len) {
		fprintf(stderr, "gbrctl: stdin contains a NUL byte\n");
		free(buf);
		return NULL;
	}
	return buf;
}

/* How to answer an approval a turn waits for, from another shell. */
static void
ctl_approval_hint(const json_t *a)
{
	const char	*id = json_string_value(json_object_get(a, "id"));
	size_t		 i;

	if (id == NULL)
		return;
	for (i = 0; id[i] != '\0'; i++)
		if (!((id[i] >= '0' && id[i] <= '9') ||
		    (id[i] >= 'a' && id[i] <= 'z')) || i >= 64)
			return;		/* not an id we would print as is */
	printf("  the turn waits: gbrctl approve %s | gbrctl deny %s [REASON] "
	    "| gbrctl edit %s\n", id, id, id);
}

/*
 * Waits for turn `turn` to end, printing its events. Returns the exit
 * code: 0 if the turn completed, 1 if it ended otherwise.
 */
static int
ctl_wait_turn(struct ctl *ctl, const char *session, json_int_t seq,
    json_int_t turn, int events)
{
	struct render	 rd = { .out = stdout, .quiet_local = 1 };
	json_t		*res, *msg, *p, *answer = json_array(), *errors = json_array();
	const char	*type, *state, *outcome = "unknown", *role;
	char		*cause = NULL;
	int		 r, done = 0;

	rd.color = render_want_color(STDOUT_FILENO);
	if ((r = ctl_call(ctl, "session.attach", json_pack("{s:s, s:I}", "session",
	    session, "after_seq", seq), &res)) != CTL_EXIT_OK) {
		json_decref(answer);
		json_decref(errors);
		return r;
	}
	json_decref(res);
	while (!done && (msg = client_read(ctl->cl, -1, &cause)) != NULL) {
		p = json_object_get(msg, "params");
		type = json_string_value(json_object_get(p, "type"));
		/*
		 * Attached after the send's own seq, every event is of this
		 * turn or later: those that name another turn are skipped;
		 * those that name none (tool.call, tool.output, tool.result,
		 * approvals) are this turn's while it runs.
		 */
		if (json_object_get(msg, "method") == NULL || type == NULL ||
		    (json_object_get(p, "turn") != NULL &&
		    json_integer_value(json_object_get(p, "turn")) != turn)) {
			if (type != NULL && (strcmp(type, "resync_required") == 0 ||
			    strcmp(type, "evicted") == 0)) {
				fprintf(stderr, "gbrctl: %s: the events of this "
				    "turn are gone; see gbrctl history %s\n", type,
				    session);
				outcome = type;
				done = 1;
			}
			json_decref(msg);
			continue;
		}
		if (events) {
			/* One line per event as it comes, for programs. */
			ctl_print_json(p);
			fflush(stdout);
		}
		if (ctl->json) {
			if (strcmp(type, "message") == 0 &&
			    (role = json_string_value(json_object_get(json_object_get(p,
			    "message"), "role"))) != NULL && strcmp(role, "assistant") == 0)
				json_array_append(answer, json_object_get(p, "message"));
			else if (strcmp(type, "error") == 0)
				json_array_append(errors, p);
		} else if (strcmp(type, "error") == 0) {
			fprintf(stderr, "gbrctl: %s: %s\n",
			    json_string_value(json_object_get(p, "kind")),
			    json_string_value(json_object_get(p, "message")));
		} else if (strcmp(type, "session.state") != 0 &&
		    !(strcmp(type, "message") == 0 && (role = json_string_value(
		    json_object_get(json_object_get(p, "message"), "role"))) != NULL &&
		    strcmp(role, "user") == 0)) {
			render_event(&rd, p);
			if (strcmp(type, "approval.requested") == 0)
				ctl_approval_hint(json_object_get(p, "approval"));
			/* On a terminal too, streamed text shows as it comes. */
			fflush(stdout);
		}
		if (strcmp(type, "session.state") == 0 &&
		    (state = json_string_value(json_object_get(p, "state"))) != NULL &&
		    strcmp(state, "running") != 0 &&
		    strcmp(state, "awaiting_approval") != 0) {
			outcome = json_string_value(json_object_get(p, "outcome"));
			if (outcome == NULL)
				outcome = state;
			outcome = strcmp(outcome, "completed") == 0 ? "completed" :
			    strcmp(outcome, "no_provider") == 0 ? "no_provider" :
			    strcmp(outcome, "cancelled") == 0 ? "cancelled" :
			    strcmp(outcome, "check_failed") == 0 ? "check_failed" :
			    strcmp(outcome, "max_steps") == 0 ? "max_steps" :
			    strcmp(outcome, "refused") == 0 ? "refused" :
			    strcmp(outcome, "error") == 0 ? "error" :
			    strcmp(state, "interrupted") == 0 ? "interrupted" :
			    strcmp(state, "closed") == 0 ? "closed" : "ended";
			done = 1;
		}
		json_decref(msg);
	}
	render_close_line(&rd);
	if (!done) {
		fprintf(stderr, "gbrctl: %s\n", cause != NULL ? cause :
		    "the connection ended");
		free(cause);
		json_decref(answer);
		json_decref(errors);
		return CTL_EXIT_UNREACHABLE;
	}
	if (ctl->json) {
		res = json_pack("{s:s, s:I, s:I, s:s, s:o, s:o}", "session",
		    session, "seq", seq, "turn", turn, "outcome", outcome,
		    "answer", answer, "errors", errors);
		ctl_print_json(res);
		json_decref(res);
	} else {
		json_decref(answer);
		json_decref(errors);
		if (strcmp(outcome, "completed") != 0 &&
		    strcmp(outcome, "no_provider") != 0)
			fprintf(stderr, "gbrctl: turn %lld %s\n", (long long)turn,
			    outcome);
	}
	return strcmp(outcome, "completed") == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}

/* send [--no-wait] [--events] [--request-id ID] SESSION TEXT|- */
int
ctl_session_send(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_opts	 o;
	json_t		*params, *res;
	char		*text = NULL, *session;
	json_int_t	 seq, turn;
	int		 r;

	if (ctl_parse(argc, argv, "--no-wait --request-id --events", &o, 2, 2,
	    "send [--no-wait] [--events] [--request-id ID] SESSION TEXT|-") != 0)
		return CTL_EXIT_USAGE;
	/* --events: every event a JSON line, then the summary as --json's. */
	if (o.events)
		ctl->json = 1;
	if (strcmp(o.pos[1], "-") == 0 && (text = ctl_read_stdin()) == NULL)
		return CTL_EXIT_USAGE;
	params = json_pack("{s:s, s:s}", "session", o.pos[0], "text",
	    text != NULL ? text : o.pos[1]);
	free(text);
	if (o.request_id != NULL)
		json_object_set_new(params, "request_id", json_string(o.request_id));
	if ((r = ctl_call(ctl, "session.send", params, &res)) != CTL_EXIT_OK)
		return r;
	if (o.no_wait) {
		if (ctl->json)
			ctl_print_json(res);
		else
			printf("sent: seq %lld, turn %lld%s\n",
			    (long long)json_integer_value(json_object_get(res, "seq")),
			    (long long)json_integer_value(json_object_get(res, "turn")),
			    json_is_true(json_object_get(res, "duplicate")) ?
			    " (already sent before)" : "");
		json_decref(res);
		return CTL_EXIT_OK;
	}
	session = xstrdup(json_string_value(json_object_get(res, "session")));
	seq = json_integer_value(json_object_get(res, "seq"));
	turn = json_integer_value(json_object_get(res, "turn"));
	json_decref(res);
	r = ctl_wait_turn(ctl, session, seq, turn, o.events);
	free(session);
	return r;
}

/* attach [--after SEQ] SESSION: prints events until the connection ends. */
int
ctl_session_attach(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_opts	 o;
	struct render	 rd = { .out = stdout };
	json_t		*params, *res, *msg, *p;
	char		*cause = NULL;
	int		 r;

	if (ctl_parse(argc, argv, "--after", &o, 1, 1,
	    "attach [--after SEQ] SESSION") != 0)
		return CTL_EXIT_USAGE;
	rd.color = render_want_color(STDOUT_FILENO);
	params = json_pack("{s:s}", "session", o.pos[0]);
	if (o.after >= 0)
		json_object_set_new(params, "after_seq", json_integer(o.after));
	if ((r = ctl_call(ctl, "session.attach", params, &res)) != CTL_EXIT_OK)
		return r;
	json_decref(res);
	while ((msg = client_read(ctl->cl, -1, &cause)) != NULL) {
		if (json_object_get(msg, "method") != NULL &&
		    (p = json_object_get(msg, "params")) != NULL) {
			if (ctl->json)
				ctl_print_json(p);
			else
				render_event(&rd, p);
			fflush(stdout);
		}
		json_decref(msg);
	}
	render_close_line(&rd);
	fprintf(stderr, "gbrctl: %s\n", cause != NULL ? cause : "detached");
	free(cause);
	return CTL_EXIT_UNREACHABLE;
}

/* history [--limit N] SESSION */
int
ctl_session_history(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_opts	 o;
	struct render	 rd = { .out = stdout };
	json_t		*params, *res, *m;
	size_t		 i;
	int		 r;

	if (ctl_parse(argc, argv, "--limit", &o, 1, 1,
	    "history [--limit N] SESSION") != 0)
		return CTL_EXIT_USAGE;
	rd.color = render_want_color(STDOUT_FILENO);
	params = json_pack("{s:s}", "session", o.pos[0]);
	if (o.limit > 0)
		json_object_set_new(params, "limit", json_integer(o.limit));
	if ((r = ctl_call(ctl, "session.history", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else {
		json_array_foreach(json_object_get(res, "messages"), i, m)
			render_message(&rd, m);
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/* cancel SESSION */
int
ctl_session_cancel(struct ctl *ctl, int argc, char **argv)
{
	json_t	*res;
	int	 r;

	if ((r = ctl_call(ctl, "session.cancel", json_pack("{s:s}", "session",
	    argv[0]), &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else if (json_is_true(json_object_get(res, "cancelled")))
		printf("cancelled turn %lld\n", (long long)json_integer_value(
		    json_object_get(res, "turn")));
	else
		printf("nothing to cancel (the session is %s)\n",
		    json_string_value(json_object_get(res, "state")));
	json_decref(res);
	return CTL_EXIT_OK;
}

/* close SESSION */
int
ctl_session_close(struct ctl *ctl, int argc, char **argv)
{
	json_t	*res;
	int	 r;

	if ((r = ctl_call(ctl, "session.close", json_pack("{s:s}", "session",
	    argv[0]), &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else
		printf("closed %s\n", json_string_value(json_object_get(res,
		    "session")));
	json_decref(res);
	return CTL_EXIT_OK;
}
