/*
 * gbrctl run SESSION [--timeout-ms MS] -- ARGV...: runs a command in a
 * session exactly as the agent's run_command would (tool.call, so the
 * session's sandbox, limits, deny_commands and ask_commands apply), then
 * prints its stdout and stderr to ours. No shell is involved: ARGV is the
 * argument vector. Exit status, as timeout(1) and env(1) tell theirs
 * apart: the command's own; 128+N if signal N killed it; 124 if it timed
 * out; 127 if there is no such program; 125 for gbrctl's and gbrd's own
 * failures (usage, no daemon, a refusal: the reason on stderr, after
 * "gbrctl:"). With --json the whole tool.call response is printed
 * instead, as one line, with the same exit status.
 */
#include "gbr-config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "ctl.h"
#include "xmalloc.h"

/* Slack over the command's own limit while waiting for the answer. */
#define CTL_RUN_SLACK_MS	30000
/* Exit statuses of gbrctl run (see the top of the file). */
#define CTL_RUN_TIMEOUT		124
#define CTL_RUN_FAILED		125	/* gbrctl's or gbrd's own failure */
#define CTL_RUN_NOT_FOUND	127

/* Decodes base64 into out (at least 3/4 of len); returns the length or -1. */
static long
ctl_run_unbase64(const char *s, size_t len, unsigned char *out)
{
	uint32_t	v = 0;
	size_t		i;
	long		n = 0;
	int		bits = 0, c;

	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		if (c >= 'A' && c <= 'Z')
			c -= 'A';
		else if (c >= 'a' && c <= 'z')
			c = c - 'a' + 26;
		else if (c >= '0' && c <= '9')
			c = c - '0' + 52;
		else if (c == '+')
			c = 62;
		else if (c == '/')
			c = 63;
		else if (c == '=')
			break;
		else
			return -1;
		v = v << 6 | (uint32_t)c;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (unsigned char)(v >> bits);
		}
	}
	return n;
}

/* Writes one stream of a run result to f, decoding base64. */
static void
ctl_run_stream(const json_t *r, const char *name, FILE *f)
{
	const json_t	*v = json_object_get(r, name);
	const char	*enc;
	char		 key[32];
	unsigned char	*buf;
	long		 n;

	if (!json_is_string(v))
		return;
	snprintf(key, sizeof key, "%s_encoding", name);
	enc = json_string_value(json_object_get(r, key));
	if (enc != NULL && strcmp(enc, "base64") == 0) {
		buf = xmalloc(json_string_length(v) / 4 * 3 + 3);
		if ((n = ctl_run_unbase64(json_string_value(v),
		    json_string_length(v), buf)) > 0)
			fwrite(buf, 1, (size_t)n, f);
		free(buf);
	} else
		fwrite(json_string_value(v), 1, json_string_length(v), f);
	fflush(f);
}

/* Says how a run ended, on stderr, unless it simply exited 0. */
static int
ctl_run_report(const json_t *r)
{
	const json_t	*code = json_object_get(r, "exit_code");
	const char	*sig = json_string_value(json_object_get(r, "signal"));
	json_int_t	 num;

	if (json_is_true(json_object_get(r, "truncated")))
		fprintf(stderr, "gbrctl: output truncated (%lld bytes of stdout "
		    "were written in all)\n", (long long)json_integer_value(
		    json_object_get(r, "stdout_bytes")));
	if (json_is_integer(code) && json_integer_value(code) == 0)
		return CTL_EXIT_OK;
	if (json_is_integer(code)) {
		fprintf(stderr, "gbrctl: exit status %lld\n",
		    (long long)json_integer_value(code));
		return (int)(json_integer_value(code) & 0xff);
	}
	if (sig != NULL)
		fprintf(stderr, "gbrctl: killed by %s\n", sig);
	num = json_integer_value(json_object_get(r, "signal_number"));
	return num > 0 && num < 128 ? 128 + (int)num : CTL_RUN_FAILED;
}

/* The exit status for an error reply (see the top of the file). */
static int
ctl_run_error_status(const json_t *reply)
{
	const char	*kind = client_error_kind(reply);

	if (kind != NULL && strcmp(kind, "timeout") == 0)
		return CTL_RUN_TIMEOUT;
	if (kind != NULL && (strcmp(kind, "command_not_found") == 0 ||
	    strcmp(kind, "interpreter_not_found") == 0))
		return CTL_RUN_NOT_FOUND;
	return CTL_RUN_FAILED;
}

/* run SESSION [--timeout-ms MS] -- ARGV... */
int
ctl_run(struct ctl *ctl, int argc, char **argv)
{
	json_t		*av, *args, *reply, *r, *err;
	const char	*session;
	char		*cause, *end;
	long long	 t = 0;
	int		 i = 1, rc, wait;

	if (argc < 1)
		goto usage;
	session = argv[0];
	if (i < argc && strncmp(argv[i], "--timeout-ms", 12) == 0) {
		const char	*v = argv[i][12] == '=' ? argv[i] + 13 :
				    i + 1 < argc ? argv[++i] : "";

		errno = 0;
		t = strtoll(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0' || t < 1 ||
		    t > 86400000) {
			fprintf(stderr, "gbrctl: --timeout-ms takes milliseconds "
			    "from 1 to 86400000\n");
			return CTL_RUN_FAILED;
		}
		i++;
	}
	if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc)
		goto usage;
	av = json_array();
	for (i++; i < argc; i++)
		json_array_append_new(av, json_string(argv[i]));
	args = json_pack("{s:o}", "argv", av);
	if (t > 0)
		json_object_set_new(args, "timeout_ms", json_integer(t));

	/*
	 * The daemon bounds every command (the profile's timeout_ms, capped
	 * by gbrd.conf): wait that long plus some slack, or for the answer.
	 */
	if (ctl->timeout_ms == 0 || t == 0)
		wait = -1;
	else
		wait = t + CTL_RUN_SLACK_MS > ctl->timeout_ms ?
		    (int)(t + CTL_RUN_SLACK_MS) : ctl->timeout_ms;
	reply = client_call(ctl->cl, "tool.call", json_pack("{s:s, s:s, s:o}",
	    "session", session, "tool", "run_command", "args", args), wait,
	    &cause);
	if (reply == NULL) {
		fprintf(stderr, "gbrctl: %s\n", cause);
		free(cause);
		return CTL_RUN_FAILED;
	}
	if (ctl->json) {
		ctl_print_json(reply);
		rc = json_object_get(reply, "error") != NULL ?
		    ctl_run_error_status(reply) :
		    ctl_run_report(json_object_get(json_object_get(reply,
		    "result"), "result"));
		json_decref(reply);
		return rc;
	}
	if ((err = json_object_get(reply, "error")) != NULL) {
		/* A timeout's data is the run so far: show what it printed. */
		r = json_object_get(err, "data");
		ctl_run_stream(r, "stdout", stdout);
		ctl_run_stream(r, "stderr", stderr);
		fprintf(stderr, "gbrctl: %s (%s)\n",
		    client_error_message(reply) != NULL ?
		    client_error_message(reply) : "error",
		    client_error_kind(reply) != NULL ?
		    client_error_kind(reply) : "?");
		rc = ctl_run_error_status(reply);
		json_decref(reply);
		return rc;
	}
	r = json_object_get(json_object_get(reply, "result"), "result");
	ctl_run_stream(r, "stdout", stdout);
	ctl_run_stream(r, "stderr", stderr);
	rc = ctl_run_report(r);
	json_decref(reply);
	return rc;

usage:
	fprintf(stderr, "usage: gbrctl run SESSION [--timeout-ms MS] -- "
	    "PROGRAM [ARGS...]\n");
	return CTL_RUN_FAILED;
}
