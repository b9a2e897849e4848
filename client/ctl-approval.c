/*
 * gbrctl's approval commands: approvals, approve, deny, edit, grants and
 * revoke, over approval.list / approval.resolve / approval.grants /
 * approval.revoke. Everything an agent chose (paths, commands, reasons)
 * is escaped before it reaches the terminal: control characters, ANSI
 * escape sequences, bidirectional overrides and line separators become
 * visible \u{XXXX} marks, so a listing cannot be made to lie about what a
 * human is approving.
 *
 * "edit" writes the proposed file to a private temp file (0600), runs
 * $VISUAL or $EDITOR (else vi) on it, and sends what the editor left as
 * the decision "edit". Without a terminal it refuses unless VISUAL or
 * EDITOR is set, so a script never hangs in an editor it cannot see.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "paths.h"
#include "proc.h"
#include "render.h"
#include "xmalloc.h"

#define CTL_EDIT_MAX	(16 * 1024 * 1024)	/* bytes read back from the editor */
#define CTL_CELL_MAX	120			/* bytes of a table cell shown */
#define CTL_DIFF_LINES	40			/* lines of a diff shown */
#define CTL_DIFF_LINE_MAX 1000			/* bytes of one diff line */

/* Options of the approval commands. */
struct ctl_aopts {
	const char	*session;
	const char	*scope;
	const char	*reason;
	const char	*request_id;
	int		 all;
	int		 help;
	const char	*pos[2];
	int		 npos;
};

/* The help of each command. */
static const struct {
	const char	*name;
	const char	*text;
} ctl_ahelp[] = {
	{ "approvals",
"usage: gbrctl approvals [--session S] [--all] [--json]\n"
"\n"
"Lists the approvals waiting for a human (pending and interrupted), or with\n"
"--all every one the daemon still keeps. Columns: ID, SESSION, STATE, WHY\n"
"(protected_path, ask_command, ask_tool, env_dir), TOOL and TARGET (the\n"
"path or the command). Paths and commands are escaped: control characters,\n"
"escape sequences and bidirectional overrides are shown as \\u{XXXX}.\n"
"--json prints the daemon's objects as they are (with the diff).\n" },
	{ "approve",
"usage: gbrctl approve ID [--scope once|session] [--reason R]\n"
"                         [--request-id X]\n"
"\n"
"Approves: the action runs once. --scope session also lets the same tool\n"
"on the same path (or the same command) through for the rest of the\n"
"session, until `gbrctl revoke`. Changes under .gbr_envs/ are never\n"
"granted: they ask every time. Exit 1 with already_resolved if someone\n"
"decided first.\n" },
	{ "deny",
"usage: gbrctl deny ID [--reason R] [--request-id X]\n"
"\n"
"Denies: the action does not run; the agent gets the error \"denied\" with\n"
"your reason.\n" },
	{ "edit",
"usage: gbrctl edit ID [--reason R] [--request-id X]\n"
"\n"
"Opens the proposed file in $VISUAL or $EDITOR (else vi) in a private\n"
"temporary file; when the editor exits 0, what it left is written instead\n"
"of the agent's version. File changes only. Without a terminal, VISUAL or\n"
"EDITOR must be set (an editor that works without one).\n" },
	{ "grants",
"usage: gbrctl grants [--session S] [--json]\n"
"\n"
"Lists the session grants made by `gbrctl approve --scope session`.\n" },
	{ "revoke",
"usage: gbrctl revoke GRANT\n"
"\n"
"Revokes a session grant: the next identical call asks again.\n" },
};

/* Prints a command's help. */
static void
ctl_ausage(FILE *f, const char *cmd)
{
	size_t	i;

	for (i = 0; i < sizeof ctl_ahelp / sizeof ctl_ahelp[0]; i++)
		if (strcmp(ctl_ahelp[i].name, cmd) == 0)
			fputs(ctl_ahelp[i].text, f);
}

/*
 * Parses the options in allowed ("--session --all ...") and up to maxpos
 * positional arguments. Returns 0, or the exit code to use.
 */
static int
ctl_aparse(const char *cmd, int argc, char **argv, const char *allowed,
    int minpos, int maxpos, struct ctl_aopts *o)
{
	const char	*arg, *val, *eq;
	char		 opt[32];
	size_t		 n;
	int		 i;

	memset(o, 0, sizeof *o);
	for (i = 0; i < argc; i++) {
		arg = argv[i];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			o->help = 1;
			ctl_ausage(stdout, cmd);
			return CTL_EXIT_OK;
		}
		if (arg[0] != '-' || arg[1] != '-') {
			if (o->npos >= maxpos)
				goto bad;
			o->pos[o->npos++] = arg;
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
		if (strcmp(opt, "--all") == 0) {
			if (eq != NULL)
				goto bad;
			o->all = 1;
			continue;
		}
		if (eq != NULL)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			goto bad;
		if (strcmp(opt, "--session") == 0)
			o->session = val;
		else if (strcmp(opt, "--scope") == 0) {
			if (strcmp(val, "once") != 0 && strcmp(val, "session") != 0) {
				fprintf(stderr, "gbrctl: --scope is once or "
				    "session\n");
				return CTL_EXIT_USAGE;
			}
			o->scope = val;
		} else if (strcmp(opt, "--reason") == 0)
			o->reason = val;
		else if (strcmp(opt, "--request-id") == 0)
			o->request_id = val;
		else
			goto bad;
	}
	if (o->npos < minpos)
		goto bad;
	return 0;
bad:
	ctl_ausage(stderr, cmd);
	return CTL_EXIT_USAGE;
}

/* Connects (the commands are registered without CMD_CONNECT, for --help). */
static int
ctl_aconnect(struct ctl *ctl)
{
	char	 name[64], *cause;
	int	 unreachable;

	snprintf(name, sizeof name, "gbrctl/%s", PACKAGE_VERSION);
	ctl->cl = client_connect(ctl->socket, CLIENT_NO_START, name, &cause,
	    &unreachable);
	if (ctl->cl == NULL) {
		fprintf(stderr, "gbrctl: %s\n", cause);
		free(cause);
		return unreachable ? CTL_EXIT_UNREACHABLE : CTL_EXIT_ERROR;
	}
	return 0;
}

/* A JSON string escaped for a terminal, or "-". New string. */
static char *
ctl_escape_json(const json_t *v, size_t max)
{
	if (!json_is_string(v))
		return xstrdup("-");
	return render_escape(json_string_value(v), json_string_length(v),
	    RENDER_ESC_BACKSLASH | RENDER_ESC_CODES, max);
}

/* approvals [--session S] [--all] */
int
ctl_approvals(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_aopts	 o;
	struct render		 rd = { .out = stdout };
	json_t			*params, *res, *a, *diff;
	char			*target, *sess, *reason;
	size_t			 i, more;
	int			 r;

	rd.color = render_want_color(STDOUT_FILENO);
	if ((r = ctl_aparse("approvals", argc, argv, "--session --all", 0, 0,
	    &o)) != 0 || o.help)
		return r;
	if ((r = ctl_aconnect(ctl)) != 0)
		return r;
	params = json_pack("{s:b}", "all", o.all);
	if (o.session != NULL)
		json_object_set_new(params, "session", json_string(o.session));
	if ((r = ctl_call(ctl, "approval.list", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json) {
		ctl_print_json(json_object_get(res, "approvals"));
		json_decref(res);
		return CTL_EXIT_OK;
	}
	if (json_array_size(json_object_get(res, "approvals")) == 0)
		printf("no approvals %s\n", o.all ? "kept" : "waiting");
	else
		printf("%-17s  %-12s  %-11s  %-14s  %-11s  %s\n", "ID", "SESSION",
		    "STATE", "WHY", "TOOL", "TARGET");
	json_array_foreach(json_object_get(res, "approvals"), i, a) {
		if (json_is_string(json_object_get(a, "path")))
			target = ctl_escape_json(json_object_get(a, "path"),
			    CTL_CELL_MAX);
		else
			target = ctl_escape_json(json_object_get(a, "command"),
			    CTL_CELL_MAX);
		sess = ctl_escape_json(json_object_get(a, "session"), 12);
		printf("%-17s  %-12s  %-11s  %-14s  %-11s  %s\n",
		    json_string_value(json_object_get(a, "id")), sess,
		    json_string_value(json_object_get(a, "state")),
		    json_string_value(json_object_get(a, "why")),
		    json_string_value(json_object_get(a, "tool")), target);
		if (json_is_string(json_object_get(a, "note"))) {
			reason = ctl_escape_json(json_object_get(a, "note"), 0);
			printf("%-17s  note: %s\n", "", reason);
			free(reason);
		}
		/* What it would change, escaped and coloured as gbr shows it. */
		diff = json_object_get(a, "diff");
		if (json_is_string(diff) && json_string_length(diff) > 0 &&
		    (more = render_diff(&rd, json_string_value(diff),
		    json_string_length(diff), "    ", CTL_DIFF_LINES,
		    CTL_DIFF_LINE_MAX)) > 0)
			printf("    ... %zu more lines (all of it: gbrctl --json "
			    "approvals)\n", more);
		free(sess);
		free(target);
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/* Prints the outcome of a decision. */
static void
ctl_decided(struct ctl *ctl, json_t *res)
{
	json_t	*a = json_object_get(res, "approval");
	char	*target;

	if (ctl->json) {
		ctl_print_json(res);
		return;
	}
	target = json_is_string(json_object_get(a, "path")) ?
	    ctl_escape_json(json_object_get(a, "path"), CTL_CELL_MAX) :
	    ctl_escape_json(json_object_get(a, "command"), CTL_CELL_MAX);
	printf("%s %s: %s %s%s\n", json_string_value(json_object_get(a, "id")),
	    json_string_value(json_object_get(a, "state")),
	    json_string_value(json_object_get(a, "tool")), target,
	    strcmp(json_string_value(json_object_get(a, "scope")) != NULL ?
	    json_string_value(json_object_get(a, "scope")) : "", "session") == 0 ?
	    " (for the rest of the session)" : "");
	free(target);
}

/* Sends a decision. */
static int
ctl_resolve(struct ctl *ctl, const char *id, const char *decision,
    const struct ctl_aopts *o, const char *content, size_t clen)
{
	json_t	*params, *res;
	int	 r;

	params = json_pack("{s:s, s:s}", "id", id, "decision", decision);
	if (o->reason != NULL)
		json_object_set_new(params, "reason", json_string(o->reason));
	if (o->scope != NULL)
		json_object_set_new(params, "scope", json_string(o->scope));
	if (o->request_id != NULL)
		json_object_set_new(params, "request_id",
		    json_string(o->request_id));
	if (content != NULL)
		json_object_set_new(params, "content", json_stringn(content,
		    clen));
	if ((r = ctl_call(ctl, "approval.resolve", params, &res)) != CTL_EXIT_OK)
		return r;
	ctl_decided(ctl, res);
	json_decref(res);
	return CTL_EXIT_OK;
}

/* approve ID [--scope session] [--reason R] */
int
ctl_approve(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_aopts	o;
	int			r;

	if ((r = ctl_aparse("approve", argc, argv, "--scope --reason "
	    "--request-id", 1, 1, &o)) != 0 || o.help)
		return r;
	if ((r = ctl_aconnect(ctl)) != 0)
		return r;
	return ctl_resolve(ctl, o.pos[0], "approve", &o, NULL, 0);
}

/* deny ID [--reason R] */
int
ctl_deny(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_aopts	o;
	int			r;

	if ((r = ctl_aparse("deny", argc, argv, "--reason --request-id", 1, 1,
	    &o)) != 0 || o.help)
		return r;
	if ((r = ctl_aconnect(ctl)) != 0)
		return r;
	return ctl_resolve(ctl, o.pos[0], "deny", &o, NULL, 0);
}


/* edit ID [--reason R] */
int
ctl_edit(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_aopts	 o;
	json_t			*res, *a, *content;
	const char		*editor, *tmpdir, *tool;
	char			*path = NULL, *edited = NULL, *shown, *why;
	char			*rwhy;
	size_t			 elen;
	int			 r, fd, st;

	if ((r = ctl_aparse("edit", argc, argv, "--reason --request-id", 1, 1,
	    &o)) != 0 || o.help)
		return r;
	if ((editor = getenv("VISUAL")) == NULL || *editor == '\0')
		editor = getenv("EDITOR");
	if (editor == NULL || *editor == '\0') {
		if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
			fprintf(stderr, "gbrctl: edit needs a terminal for vi, or "
			    "VISUAL or EDITOR set to an editor that works without "
			    "one\n");
			return CTL_EXIT_USAGE;
		}
		editor = "vi";
	}
	if ((r = ctl_aconnect(ctl)) != 0)
		return r;
	if ((r = ctl_call(ctl, "approval.list", json_pack("{s:s}", "id",
	    o.pos[0]), &res)) != CTL_EXIT_OK)
		return r;
	a = json_array_get(json_object_get(res, "approvals"), 0);
	if (a == NULL) {
		fprintf(stderr, "gbrctl: no approval has the id '%s' "
		    "(approval_not_found)\n", o.pos[0]);
		json_decref(res);
		return CTL_EXIT_ERROR;
	}
	tool = json_string_value(json_object_get(a, "tool"));
	content = json_object_get(a, "content");
	if (tool == NULL || (strcmp(tool, "write_file") != 0 &&
	    strcmp(tool, "edit_file") != 0) || !json_is_string(content)) {
		fprintf(stderr, "gbrctl: approval %s is not a file change gbrctl "
		    "can edit (%s)\n", o.pos[0], tool != NULL ? tool : "?");
		json_decref(res);
		return CTL_EXIT_USAGE;
	}
	/* A private file: the content may be anything the agent wrote. */
	if ((tmpdir = getenv("TMPDIR")) == NULL || *tmpdir != '/')
		tmpdir = "/tmp";
	shown = ctl_escape_json(json_object_get(a, "path"), 0);
	path = xasprintf("%s/gbr-edit-%s-XXXXXX", tmpdir, o.pos[0]);
	if (strspn(o.pos[0], "abcdefghijklmnopqrstuvwxyz0123456789") !=
	    strlen(o.pos[0])) {
		free(path);
		path = xasprintf("%s/gbr-edit-XXXXXX", tmpdir);
	}
	if ((fd = mkstemp(path)) == -1 || fchmod(fd, 0600) != 0 ||
	    client_write_fd(fd, json_string_value(content),
	    json_string_length(content)) != 0 || close(fd) != 0) {
		fprintf(stderr, "gbrctl: cannot write a temporary file in %s: "
		    "%s\n", tmpdir, strerror(errno));
		goto fail;
	}
	if (!ctl->json)
		fprintf(stderr, "gbrctl: editing the proposed %s with %s\n",
		    shown, editor);
	if ((st = proc_run_editor(editor, path)) != 0) {
		fprintf(stderr, "gbrctl: the editor exited with %d; nothing was "
		    "decided\n", st);
		goto fail;
	}
	if ((edited = client_read_file(path, CTL_EDIT_MAX, &elen,
	    &rwhy)) == NULL) {
		fprintf(stderr, "gbrctl: cannot read the edited file back: %s\n",
		    rwhy);
		free(rwhy);
		goto fail;
	}
	if ((why = render_text_problem(edited, elen)) != NULL) {
		fprintf(stderr, "gbrctl: the edited file holds %s, and gbr "
		    "writes text files only: nothing was decided; your text is "
		    "kept in %s\n", why, path);
		free(why);
		r = CTL_EXIT_ERROR;
	} else if ((r = ctl_resolve(ctl, o.pos[0], "edit", &o, edited,
	    elen)) == CTL_EXIT_OK)
		unlink(path);
	else
		fprintf(stderr, "gbrctl: your text is kept in %s\n", path);
	free(edited);
	free(path);
	free(shown);
	json_decref(res);
	return r;
fail:
	if (path != NULL)
		unlink(path);
	free(path);
	free(shown);
	json_decref(res);
	return CTL_EXIT_ERROR;
}

/* grants [--session S] */
int
ctl_grants(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_aopts	 o;
	json_t			*params, *res, *g;
	char			*target;
	size_t			 i;
	int			 r;

	if ((r = ctl_aparse("grants", argc, argv, "--session", 0, 0, &o)) != 0 ||
	    o.help)
		return r;
	if ((r = ctl_aconnect(ctl)) != 0)
		return r;
	params = json_object();
	if (o.session != NULL)
		json_object_set_new(params, "session", json_string(o.session));
	if ((r = ctl_call(ctl, "approval.grants", params, &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json) {
		ctl_print_json(json_object_get(res, "grants"));
		json_decref(res);
		return CTL_EXIT_OK;
	}
	if (json_array_size(json_object_get(res, "grants")) == 0)
		printf("no grants\n");
	else
		printf("%-17s  %-12s  %-11s  %s\n", "ID", "SESSION", "TOOL",
		    "TARGET");
	json_array_foreach(json_object_get(res, "grants"), i, g) {
		target = json_is_string(json_object_get(g, "path")) ?
		    ctl_escape_json(json_object_get(g, "path"), CTL_CELL_MAX) :
		    json_is_string(json_object_get(g, "command")) ?
		    ctl_escape_json(json_object_get(g, "command"), CTL_CELL_MAX) :
		    xstrdup("(any call of the tool)");
		printf("%-17s  %-12s  %-11s  %s\n",
		    json_string_value(json_object_get(g, "id")),
		    json_string_value(json_object_get(g, "session")),
		    json_string_value(json_object_get(g, "tool")), target);
		free(target);
	}
	json_decref(res);
	return CTL_EXIT_OK;
}

/* revoke GRANT */
int
ctl_revoke(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_aopts	 o;
	json_t			*res;
	int			 r;

	if ((r = ctl_aparse("revoke", argc, argv, "", 1, 1, &o)) != 0 ||
	    o.help)
		return r;
	if ((r = ctl_aconnect(ctl)) != 0)
		return r;
	if ((r = ctl_call(ctl, "approval.revoke", json_pack("{s:s}", "id",
	    o.pos[0]), &res)) != CTL_EXIT_OK)
		return r;
	if (ctl->json)
		ctl_print_json(res);
	else
		printf("grant %s revoked\n", o.pos[0]);
	json_decref(res);
	return CTL_EXIT_OK;
}
