/*
 * The run tools (see tool-run.h): argument checks, the command policy
 * (autonomy, deny_commands, ask_commands), the child's environment and
 * rights, and turning a runner result into JSON. The module also owns the
 * private temp folder every child gets as TMPDIR, made at start and
 * removed at shutdown.
 *
 * Bounds: code and each argument at most 120 KiB (the kernel's limit on
 * one argument string is 128 KiB), at most TOOL_RUN_ARGV_MAX arguments and
 * TOOL_RUN_ARGV_BYTES in all, stdin at most TOOL_RUN_STDIN_MAX; output as
 * the profile and gbrd.conf say; check returns at most TOOL_RUN_DIAG_MAX
 * diagnostics of at most 400 bytes each.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "env.h"
#include "log.h"
#include "pathgate.h"
#include "runner.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-run.h"
#include "xmalloc.h"

#define TR_SPLIT_WORDS	256		/* words of a check_command or pattern */
#define TR_DIAG_TEXT	400		/* bytes of one diagnostic's message */
#define TR_RMTREE_MAX	100000		/* entries removed from the temp folder */
#define TR_RO_MAX	40		/* read-only paths or binds of one call */
#define TR_BASE_ENV	"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", \
			"TZ", "USER", "LOGNAME"

enum tr_tool {
	TR_SCRIPT,
	TR_COMMAND,
	TR_CHECK,
};

/* A call in flight. */
struct tool_run {
	enum tr_tool		 tool;
	struct runner_job	*job;
	char			*what;		/* the interpreter or program */
	json_t			*command;	/* argv as JSON, for check */
	tool_run_output_cb	 out_cb;
	tool_run_done_cb	 done_cb;
	void			*arg;
	/* An unfinished UTF-8 character held back from each stream's chunk. */
	unsigned char		 carry[2][4];
	size_t			 ncarry[2];
	TAILQ_ENTRY(tool_run)	 entry;		/* tr_live */
};
TAILQ_HEAD(tool_run_list, tool_run);

/* Calls in flight: freed by tool_run_shutdown if their child never ends. */
static struct tool_run_list	tr_live = TAILQ_HEAD_INITIALIZER(tr_live);

static struct {
	int		 ready;
	char		*tmp;		/* the private temp folder */
	unsigned	 max_timeout_ms;
	size_t		 max_output;
	unsigned	 processes;
	uint64_t	 memory, file_size;
	unsigned	 open_files;
	char		**pass_env;
	char		**read_paths;
	json_t		*schemas[3];
} tr;

static int	tr_sync(struct tool_ctx *, json_t *, json_t **, enum gbr_err *,
		    char **);

static const char tr_script_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"node\",\"sh\"],"
    "\"description\":\"python (python3), node or sh\"},"
    "\"code\":{\"type\":\"string\",\"description\":\"The program text "
    "(at most 120 KiB)\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400000,"
    "\"description\":\"Stop it after this long (at most the environment's "
    "limit)\"},"
    "\"stdin\":{\"type\":\"string\",\"description\":\"Text given on "
    "standard input (default: none)\"}},"
    "\"required\":[\"language\",\"code\"],\"additionalProperties\":false}";

static const char tr_command_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
    "\"minItems\":1,\"description\":\"The program and its arguments, one "
    "per item; no shell is involved\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400000,"
    "\"description\":\"Stop it after this long (at most the environment's "
    "limit)\"}},"
    "\"required\":[\"argv\"],\"additionalProperties\":false}";

static const char tr_check_schema[] =
    "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";

static const struct tool_def tr_defs[] = {
	{ "run_script", "Run a short Python, Node.js or shell script in the "
	    "workspace, with a time limit; returns its exit code and output.",
	    tr_script_schema, 0, 1, 0, tr_sync },
	{ "run_command", "Run a program with arguments (an argument vector, "
	    "no shell) in the workspace, with a time limit; returns its exit "
	    "code and output.", tr_command_schema, 0, 1, 0, tr_sync },
	{ "check", "Run the environment's check command (a build or type "
	    "check) and return its diagnostics.", tr_check_schema, 0, 0, 1,
	    tr_sync },
};

/* The registry's synchronous entry: these tools go through tool_run_call. */
static int
tr_sync(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	*kind = GBR_ERR_INTERNAL;
	*reason = xstrdup("this tool is asynchronous: call it through "
	    "tool_run_call");
	return -1;
}

/* The tool table. */
const struct tool_def *
tool_run_defs(size_t *n)
{
	*n = sizeof tr_defs / sizeof tr_defs[0];
	return tr_defs;
}

/* True for the run tools. */
int
tool_run_handles(const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < sizeof tr_defs / sizeof tr_defs[0]; i++)
		if (strcmp(tr_defs[i].name, name) == 0)
			return 1;
	return 0;
}

/* Fills a refusal. Returns -1. */
static int __attribute__((format(printf, 4, 5)))
tr_fail(enum gbr_err *kind, char **reason, enum gbr_err k, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	*kind = k;
	*reason = xvasprintf(fmt, ap);
	va_end(ap);
	return -1;
}

/* Frees a NULL-terminated vector of strings. */
void
tool_run_strv_free(char **v)
{
	size_t	i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* Splits a comma-separated config list into a vector (NULL for none). */
static char **
tr_list(const char *s)
{
	char	**v = NULL, *copy, *item, *next;
	size_t	  n = 0;

	if (s == NULL || *s == '\0')
		return NULL;
	copy = xstrdup(s);
	for (item = copy; item != NULL; item = next) {
		if ((next = strchr(item, ',')) != NULL)
			*next++ = '\0';
		if (*item == '\0')
			continue;
		v = xreallocarray(v, n + 2, sizeof *v);
		v[n++] = xstrdup(item);
		v[n] = NULL;
	}
	free(copy);
	return v;
}

/* Splits a command line (see tool-run.h). */
char **
tool_run_split(const char *line, const char **reason)
{
	char		**v = NULL, *word;
	size_t		  n = 0, len = strlen(line), w;
	const char	 *p = line;
	int		  in_word;

	*reason = NULL;
	word = xmalloc(len + 1);
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		w = 0;
		in_word = 0;
		while (*p != '\0' && *p != ' ' && *p != '\t') {
			in_word = 1;
			if (*p == '\'') {
				for (p++; *p != '\0' && *p != '\''; p++)
					word[w++] = *p;
				if (*p != '\'') {
					*reason = "an unclosed ' quote";
					goto fail;
				}
				p++;
			} else if (*p == '"') {
				for (p++; *p != '\0' && *p != '"'; p++) {
					if (*p == '\\' && (p[1] == '"' ||
					    p[1] == '\\' || p[1] == '$' ||
					    p[1] == '`'))
						p++;
					else if (*p == '$' || *p == '`') {
						*reason = "$ or ` inside \"...\" "
						    "(no expansion without a shell)";
						goto fail;
					}
					word[w++] = *p;
				}
				if (*p != '"') {
					*reason = "an unclosed \" quote";
					goto fail;
				}
				p++;
			} else if (*p == '\\') {
				if (p[1] == '\0') {
					*reason = "a backslash at the end";
					goto fail;
				}
				word[w++] = p[1];
				p += 2;
			} else if (strchr("|&;<>()$`\n\r", *p) != NULL) {
				*reason = "shell syntax (| & ; < > ( ) $ `): "
				    "write sh -c '...' to use a shell";
				goto fail;
			} else
				word[w++] = *p++;
		}
		if (!in_word)
			continue;
		if (n >= TR_SPLIT_WORDS) {
			*reason = "too many words";
			goto fail;
		}
		v = xreallocarray(v, n + 2, sizeof *v);
		v[n++] = xstrndup(word, w);
		v[n] = NULL;
	}
	free(word);
	if (n == 0) {
		*reason = "no words";
		return NULL;
	}
	return v;

fail:
	free(word);
	tool_run_strv_free(v);
	return NULL;
}

/* Matches one character against a [...] class at *pp; advances *pp. */
static int
tr_class(const char **pp, unsigned char c, int *ok)
{
	const char	*p = *pp + 1;
	int		 neg = 0, hit = 0;
	unsigned char	 lo, hi;

	if (*p == '!' || *p == '^') {
		neg = 1;
		p++;
	}
	if (*p == ']') {	/* a leading ] is literal */
		hit |= c == ']';
		p++;
	}
	while (*p != '\0' && *p != ']') {
		lo = (unsigned char)*p;
		if (*p == '\\' && p[1] != '\0')
			lo = (unsigned char)*++p;
		p++;
		if (*p == '-' && p[1] != '\0' && p[1] != ']') {
			hi = (unsigned char)p[1];
			p += 2;
			hit |= c >= lo && c <= hi;
		} else
			hit |= c == lo;
	}
	if (*p != ']') {
		*ok = 0;	/* not a class: '[' is literal */
		return c == '[';
	}
	*ok = 1;
	*pp = p;	/* at the closing ] */
	return hit != neg;
}

/*
 * Wildcard match in O(len(pattern) * len(word)): the classic greedy walk
 * that, on a mismatch, goes back to the last '*' only.
 */
int
tool_run_wildcard(const char *pattern, const char *word)
{
	const char	*p = pattern, *w = word, *star_p = NULL, *star_w = NULL;
	const char	*q;
	int		 ok, m;

	while (*w != '\0') {
		if (*p == '*') {
			while (*p == '*')
				p++;
			star_p = p;
			star_w = w;
			continue;
		}
		q = p;
		if (*p == '?')
			m = 1;
		else if (*p == '[') {
			m = tr_class(&q, (unsigned char)*w, &ok);
			if (!ok)
				q = p;
		} else if (*p == '\\' && p[1] != '\0')
			m = *++q == *w;
		else
			m = *p != '\0' && *p == *w;
		if (m) {
			p = q + 1;
			w++;
			continue;
		}
		if (star_p == NULL)
			return 0;
		p = star_p;
		w = ++star_w;
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

/* The base name of a path. */
static const char *
tr_base(const char *s)
{
	const char	*b = strrchr(s, '/');

	return b != NULL && b[1] != '\0' ? b + 1 : s;
}

/* Matches split pattern words against argv[0..]. */
static int
tr_match_words(char **pw, const char *const *argv)
{
	size_t	i;

	for (i = 0; pw[i] != NULL; i++) {
		if (pw[i + 1] == NULL && strcmp(pw[i], "*") == 0)
			return 1;	/* any number of remaining arguments */
		if (argv[i] == NULL)
			return 0;
		if (tool_run_wildcard(pw[i], argv[i]))
			continue;
		if (i == 0 && strchr(pw[0], '/') == NULL &&
		    tool_run_wildcard(pw[0], tr_base(argv[0])))
			continue;
		return 0;
	}
	return argv[i] == NULL;
}

/* How many leading words of argv a wrapper takes (0: not a wrapper). */
static size_t
tr_wrapper(const char *const *argv)
{
	static const char *const plain[] = { "env", "nice", "nohup", "time",
	    "stdbuf", "setsid", "command", "exec", "xargs", "sudo", "doas",
	    "ionice", "chrt", "taskset", "timeout" };
	const char	*b = tr_base(argv[0]);
	size_t		 i, k;
	int		 numeric;

	for (i = 0; i < sizeof plain / sizeof plain[0]; i++)
		if (strcmp(b, plain[i]) == 0)
			break;
	if (i == sizeof plain / sizeof plain[0])
		return 0;
	/* Options, VAR=value, and for some one numeric word (a duration). */
	numeric = strcmp(b, "timeout") == 0 || strcmp(b, "chrt") == 0 ||
	    strcmp(b, "taskset") == 0 || strcmp(b, "nice") == 0 ||
	    strcmp(b, "ionice") == 0;
	for (k = 1; argv[k] != NULL; k++) {
		if (argv[k][0] == '-' || (strcmp(b, "env") == 0 &&
		    strchr(argv[k], '=') != NULL))
			continue;
		if (numeric && strspn(argv[k], "0123456789.smhdx,-") ==
		    strlen(argv[k])) {
			numeric = 0;
			continue;
		}
		break;
	}
	return k;
}

/* True if argv (or what it wraps) matches the split pattern. */
static int
tr_match_argv(char **pw, const char *const *argv, int depth)
{
	const char	*b, *r;
	char		**sub, *s, *part, *next;
	size_t		 k;
	int		 hit = 0;

	if (argv[0] == NULL || depth > 4)
		return 0;
	if (tr_match_words(pw, argv))
		return 1;
	if ((k = tr_wrapper(argv)) > 0 && argv[k] != NULL)
		return tr_match_argv(pw, argv + k, depth + 1);
	b = tr_base(argv[0]);
	if ((strcmp(b, "sh") == 0 || strcmp(b, "bash") == 0 ||
	    strcmp(b, "dash") == 0 || strcmp(b, "zsh") == 0 ||
	    strcmp(b, "ksh") == 0) && argv[1] != NULL &&
	    strcmp(argv[1], "-c") == 0 && argv[2] != NULL) {
		/* Each simple command of the string, split as we split. */
		s = xstrdup(argv[2]);
		for (part = s; part != NULL && !hit; part = next) {
			next = strpbrk(part, ";&|\n");
			if (next != NULL) {
				while (*next == ';' || *next == '&' ||
				    *next == '|' || *next == '\n')
					*next++ = '\0';
			}
			if ((sub = tool_run_split(part, &r)) != NULL) {
				hit = tr_match_argv(pw, (const char *const *)sub,
				    depth + 1);
				tool_run_strv_free(sub);
			}
		}
		free(s);
	}
	return hit;
}

/* True if argv matches a command pattern (see tool-run.h). */
int
tool_run_match(const char *pattern, const char *const *argv)
{
	const char	*reason;
	char		**pw;
	int		  hit;

	if ((pw = tool_run_split(pattern, &reason)) == NULL)
		return 0;
	hit = tr_match_argv(pw, argv, 0);
	tool_run_strv_free(pw);
	return hit;
}

/* True if a variable may reach a child (see config.c's twin). */
int
tool_run_env_name_ok(const char *s)
{
	static const char *const bad[] = { "KEY", "TOKEN", "SECRET", "PASS",
	    "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE" };
	char	up[256];
	size_t	i;

	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= sizeof up - 1 || !((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_'))
			return 0;
		up[i] = (s[i] >= 'a' && s[i] <= 'z') ? s[i] - 32 : s[i];
	}
	up[i] = '\0';
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (strstr(up, bad[i]) != NULL)
			return 0;
	return strncmp(up, "LD_", 3) != 0 && strcmp(up, "GLIBC_TUNABLES") != 0 &&
	    strcmp(up, "GCONV_PATH") != 0;
}

/* True if bytes are valid UTF-8. */
static int
tr_utf8_valid(const char *s, size_t len)
{
	uint32_t	cp;
	size_t		i = 0, n;

	while (i < len) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		if ((n = pathgate_utf8_next((const unsigned char *)s + i,
		    len - i, &cp)) == 0)
			return 0;
		i += n;
	}
	return 1;
}

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
	if (tr_utf8_valid(s, len) && !tr_mostly_controls(s, len) &&
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

/* Length of the valid text before a cut at len that may split a character. */
static size_t
tr_utf8_head(const char *s, size_t len)
{
	size_t	i, back;

	/* Back over at most 3 continuation bytes to a lead byte. */
	for (back = 0; back < 4 && back < len; back++) {
		i = len - 1 - back;
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			unsigned char	c = (unsigned char)s[i];
			size_t		need = c < 0x80 ? 1 : c >= 0xf0 ? 4 :
					    c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;

			return need > back + 1 ? i : len;
		}
	}
	return len;
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
				ll = tr_utf8_head(line, TR_DIAG_TEXT);
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

/* True if v[0..n) already sets name. */
static int
tr_env_has(char **v, size_t n, const char *name)
{
	size_t	i, len = strlen(name);

	for (i = 0; i < n; i++)
		if (strncmp(v[i], name, len) == 0 && v[i][len] == '=')
			return 1;
	return 0;
}

/* Builds the child's environment from ours and the allow-lists. */
static char **
tr_build_env(const struct tool_run_ctx *ctx)
{
	static const char *const base[] = { TR_BASE_ENV };
	char		**v = NULL, **p;
	const char	*val;
	size_t		  n = 0, i;

	v = xcalloc(sizeof base / sizeof base[0] + 128 + 4, sizeof *v);
	for (i = 0; i < sizeof base / sizeof base[0]; i++) {
		if ((val = getenv(base[i])) != NULL)
			v[n++] = xasprintf("%s=%s", base[i], val);
		else if (strcmp(base[i], "PATH") == 0)
			v[n++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
	}
	for (p = tr.pass_env; p != NULL && *p != NULL && n < 64 + 9; p++)
		if (tool_run_env_name_ok(*p) && !tr_env_has(v, n, *p) &&
		    strcmp(*p, "TMPDIR") != 0 && (val = getenv(*p)) != NULL)
			v[n++] = xasprintf("%s=%s", *p, val);
	for (i = 0; i < ctx->npass_env && i < 64; i++)
		if (tool_run_env_name_ok(ctx->pass_env[i]) &&
		    !tr_env_has(v, n, ctx->pass_env[i]) &&
		    strcmp(ctx->pass_env[i], "TMPDIR") != 0 &&
		    (val = getenv(ctx->pass_env[i])) != NULL)
			v[n++] = xasprintf("%s=%s", ctx->pass_env[i], val);
	if (tr.tmp != NULL)
		v[n++] = xasprintf("TMPDIR=%s", tr.tmp);
	v[n] = NULL;
	return v;
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
static void
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
	head = tr_utf8_head(joined, total);
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
		len = tr_utf8_head(p, len);
	json_object_set_new(o, name, tool_run_bytes_json(p, len, &enc));
	snprintf(key, sizeof key, "%s_encoding", name);
	json_object_set_new(o, key, json_string(enc));
	snprintf(key, sizeof key, "%s_bytes", name);
	json_object_set_new(o, key, json_integer((json_int_t)total));
}

/* The runner's done callback: the result as JSON, then the caller's. */
static void
tr_on_done(void *arg, const struct runner_result *res)
{
	struct tool_run	*r = arg;
	json_t		*o, *data = NULL;
	enum gbr_err	 kind = GBR_ERR_INTERNAL;
	char		*reason = NULL;
	size_t		 i;

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
		r->done_cb(r->arg, 1, kind, reason, data);
		json_decref(data);
		free(reason);
		goto out;
	}
	if (res->cancelled && !res->exited && res->signo == 0) {
		r->done_cb(r->arg, 1, GBR_ERR_CANCELLED, "cancelled before it "
		    "ran", NULL);
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
	    "s:b, s:i, s:i}",
	    "landlock", res->landlock_abi,
	    "namespaces", res->ns,
	    "user_namespace", res->userns,
	    "process_limit", res->nproc != NULL ? res->nproc : "none",
	    "capabilities_dropped", res->caps_dropped,
	    "hidden", res->hidden,
	    "read_only_binds", res->ro_binds));
	if (r->tool == TR_CHECK) {
		json_t	*diag = tool_run_diagnostics(res->out, res->out_len,
		    TOOL_RUN_DIAG_MAX);
		json_t	*more = tool_run_diagnostics(res->err, res->err_len,
		    TOOL_RUN_DIAG_MAX - json_array_size(diag));

		json_array_extend(diag, more);
		json_decref(more);
		json_object_set_new(o, "diagnostics", diag);
	}
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
	TAILQ_REMOVE(&tr_live, r, entry);
	free(r->what);
	json_decref(r->command);
	free(r);
}

/* A string argument and its length. */
static const char *
tr_str(json_t *args, const char *key, size_t *len)
{
	json_t	*v = json_object_get(args, key);

	if (!json_is_string(v)) {
		*len = 0;
		return NULL;
	}
	*len = json_string_length(v);
	return json_string_value(v);
}

/* Checks run_command's argv: strings, no NUL, within the bounds. */
static int
tr_argv(json_t *a, char ***out, enum gbr_err *kind, char **reason)
{
	json_t	*v;
	size_t	 i, n = json_array_size(a), total = 0, len;
	char	**argv;

	if (n == 0)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: 'argv' must hold at least the program");
	if (n > TOOL_RUN_ARGV_MAX)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: more than %d arguments", TOOL_RUN_ARGV_MAX);
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_command: argv[%zu] must be a string", i);
		len = json_string_length(v);
		if (memchr(json_string_value(v), '\0', len) != NULL)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_command: argv[%zu] holds a NUL character", i);
		if (len > TOOL_RUN_ARG_MAX)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_command: argv[%zu] is longer than %d bytes", i,
			    TOOL_RUN_ARG_MAX);
		total += len + 1;
	}
	if (total > TOOL_RUN_ARGV_BYTES)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: the arguments take more than %d bytes",
		    TOOL_RUN_ARGV_BYTES);
	if (json_string_length(json_array_get(a, 0)) == 0)
		return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "run_command: argv[0] is empty");
	argv = xcalloc(n + 1, sizeof *argv);
	json_array_foreach(a, i, v)
		argv[i] = xstrdup(json_string_value(v));
	*out = argv;
	return 0;
}

/* A policy refusal's data: the pattern and the argument vector. */
static json_t *
tr_policy_data(const char *pattern, char **argv)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; argv[i] != NULL; i++)
		json_array_append_new(a, json_string(argv[i]));
	return json_pack("{s:s, s:o}", "pattern", pattern, "argv", a);
}

/* True if a protected pattern names one file literally. */
static int
tr_literal(const char *pat)
{
	return strpbrk(pat, "*?[\\") == NULL && strstr(pat, "..") == NULL &&
	    pat[0] != '/' && pat[0] != '\0';
}

/* Calls a run tool (see tool-run.h). */
int
tool_run_call(const struct tool_run_ctx *ctx, const char *tool, json_t *args,
    tool_run_output_cb out_cb, tool_run_done_cb done_cb, void *arg,
    struct tool_run **runp, enum gbr_err *kind, char **reason, json_t **data)
{
	struct runner_opts	 o;
	struct tool_run		*r = NULL;
	const struct tool_def	*def = NULL;
	const char		*s, *code, *input = NULL, *why, *lang;
	const char *const	*pats;
	const char		*rw[2], *ro[TR_RO_MAX], *binds[TR_RO_MAX];
	char			**argv = NULL, **envp = NULL, *owned[TR_RO_MAX];
	size_t			 len, input_len = 0, i, n, nro = 0, nb = 0;
	size_t			 nowned = 0;
	json_int_t		 t;
	enum tr_tool		 which;
	int			 rc = -1, timeout;
	char			*why_s;

	if (runp != NULL)
		*runp = NULL;
	*reason = NULL;
	if (data != NULL)
		*data = NULL;
	for (i = 0; tool != NULL && i < sizeof tr_defs / sizeof tr_defs[0]; i++)
		if (strcmp(tr_defs[i].name, tool) == 0)
			def = &tr_defs[i];
	if (def == NULL)
		return tr_fail(kind, reason, GBR_ERR_METHOD_NOT_FOUND,
		    "no run tool called '%s'", tool != NULL ? tool : "");
	which = (enum tr_tool)(def - tr_defs);
	if (!tr.ready)
		return tr_fail(kind, reason, GBR_ERR_UNAVAILABLE,
		    "the runner is not set up");
	if (tool_check_args(tr.schemas[which], args, &why_s) != 0) {
		*kind = GBR_ERR_INVALID_PARAMS;
		*reason = xasprintf("%s: %s", tool, why_s);
		free(why_s);
		return -1;
	}
	if (ctx == NULL || ctx->sandbox == NULL || ctx->env == NULL)
		return tr_fail(kind, reason, GBR_ERR_INTERNAL,
		    "%s: no sandbox or environment", tool);

	switch (which) {
	case TR_SCRIPT:
		lang = json_string_value(json_object_get(args, "language"));
		code = tr_str(args, "code", &len);
		if (memchr(code, '\0', len) != NULL)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_script: 'code' holds a NUL character");
		if (len > TOOL_RUN_CODE_MAX)
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_script: 'code' is longer than %d bytes: write "
			    "it to a file and run that with run_command",
			    TOOL_RUN_CODE_MAX);
		argv = xcalloc(4, sizeof *argv);
		if (strcmp(lang, "python") == 0) {
			argv[0] = xstrdup("python3");
			argv[1] = xstrdup("-c");
		} else if (strcmp(lang, "node") == 0) {
			argv[0] = xstrdup("node");
			argv[1] = xstrdup("-e");
		} else {
			argv[0] = xstrdup("sh");
			argv[1] = xstrdup("-c");
		}
		argv[2] = xstrdup(code);
		if ((input = tr_str(args, "stdin", &input_len)) != NULL &&
		    input_len > TOOL_RUN_STDIN_MAX) {
			tool_run_strv_free(argv);
			return tr_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "run_script: 'stdin' is longer than %d bytes",
			    TOOL_RUN_STDIN_MAX);
		}
		break;
	case TR_COMMAND:
		if (tr_argv(json_object_get(args, "argv"), &argv, kind,
		    reason) != 0)
			return -1;
		break;
	case TR_CHECK:
		if ((s = env_check_command(ctx->env)) == NULL)
			return tr_fail(kind, reason, GBR_ERR_NOT_FOUND,
			    "this environment has no check_command");
		if ((argv = tool_run_split(s, &why)) == NULL)
			return tr_fail(kind, reason, GBR_ERR_INVALID_ENV,
			    "check_command '%s': %s", s, why);
		break;
	}

	/* The policy, before anything runs. */
	if (which != TR_CHECK && env_autonomy(ctx->env) == ENV_READ_ONLY) {
		tr_fail(kind, reason, GBR_ERR_PERMISSION_DENIED, "%s: this "
		    "environment's autonomy is read-only", tool);
		goto out;
	}
	/*
	 * Patterns apply to run_script too: "sh -c CODE" is looked into, so
	 * a shell script cannot simply say what run_command may not.
	 */
	if (which != TR_CHECK) {
		n = env_deny_commands(ctx->env, &pats);
		for (i = 0; i < n; i++) {
			if (!tool_run_match(pats[i], (const char *const *)argv))
				continue;
			tr_fail(kind, reason, GBR_ERR_DENIED_COMMAND, "'%s' is "
			    "refused by this environment (deny_commands: %s)",
			    argv[0], pats[i]);
			if (data != NULL)
				*data = tr_policy_data(pats[i], argv);
			goto out;
		}
		n = env_ask_commands(ctx->env, &pats);
		for (i = 0; i < n && !ctx->approved; i++) {
			if (!tool_run_match(pats[i], (const char *const *)argv))
				continue;
			tr_fail(kind, reason, GBR_ERR_NEEDS_APPROVAL, "'%s' "
			    "needs a human's approval (ask_commands: %s)",
			    argv[0], pats[i]);
			if (data != NULL)
				*data = tr_policy_data(pats[i], argv);
			goto out;
		}
	}

	/* Limits: the call's, within the profile's, within gbrd.conf's. */
	timeout = env_timeout_ms(ctx->env);
	if (json_is_integer(json_object_get(args, "timeout_ms"))) {
		t = json_integer_value(json_object_get(args, "timeout_ms"));
		if (t < timeout)
			timeout = (int)t;
	}
	if ((unsigned)timeout > tr.max_timeout_ms)
		timeout = (int)tr.max_timeout_ms;

	/* Rights: write the allowed root and the temp folder; read the rest. */
	memset(&o, 0, sizeof o);
	rw[0] = sandbox_root_path(ctx->sandbox, 0);
	rw[1] = tr.tmp;
	for (i = 1; i < (size_t)sandbox_nroots(ctx->sandbox) && nb < TR_RO_MAX;
	    i++) {
		if (sandbox_root_inside(ctx->sandbox, (int)i) != NULL)
			binds[nb++] = sandbox_root_path(ctx->sandbox, (int)i);
		else if (nro < TR_RO_MAX)
			ro[nro++] = sandbox_root_path(ctx->sandbox, (int)i);
	}
	for (i = 0; tr.read_paths != NULL && tr.read_paths[i] != NULL &&
	    nro < TR_RO_MAX; i++)
		ro[nro++] = tr.read_paths[i];
	/* Never writable by a child: the profiles and literal protected files. */
	if (nb < TR_RO_MAX) {
		owned[nowned] = xasprintf("%s/%s", rw[0], ENV_DIR);
		binds[nb++] = owned[nowned++];
	}
	if (nb < TR_RO_MAX && strcmp(env_workspace(ctx->env), rw[0]) != 0) {
		/* The workspace's own .gbr_envs, where it differs. */
		owned[nowned] = xasprintf("%s/%s", env_workspace(ctx->env),
		    ENV_DIR);
		binds[nb++] = owned[nowned++];
	}
	n = env_protected(ctx->env, &pats);
	for (i = 0; i < n && nb < TR_RO_MAX && nowned < TR_RO_MAX; i++) {
		if (!tr_literal(pats[i]))
			continue;
		owned[nowned] = xasprintf("%s/%s", rw[0], pats[i]);
		binds[nb++] = owned[nowned++];
	}
	envp = tr_build_env(ctx);
	o.argv = (const char *const *)argv;
	o.envp = (const char *const *)envp;
	o.cwd = rw[0];
	o.input = input;
	o.input_len = input_len;
	o.key = ctx->session;
	o.limits.timeout_ms = timeout;
	o.limits.max_output = env_max_output_bytes(ctx->env) < tr.max_output ?
	    env_max_output_bytes(ctx->env) : tr.max_output;
	o.limits.address_space = tr.memory;
	o.limits.file_size = tr.file_size;
	o.limits.processes = tr.processes;
	o.limits.open_files = tr.open_files;
	o.rw_paths = rw;
	o.nrw = tr.tmp != NULL ? 2 : 1;
	o.ro_paths = ro;
	o.nro = nro;
	o.ro_binds = binds;
	o.nro_binds = nb;
	o.landlock = ctx->require_landlock ? RUNNER_REQUIRE : RUNNER_OFF;

	r = xcalloc(1, sizeof *r);
	r->tool = which;
	r->what = xstrdup(argv[0]);
	if (which == TR_CHECK) {
		r->command = json_array();
		for (i = 0; argv[i] != NULL; i++)
			json_array_append_new(r->command, json_string(argv[i]));
	}
	r->out_cb = out_cb;
	r->done_cb = done_cb;
	r->arg = arg;
	TAILQ_INSERT_TAIL(&tr_live, r, entry);
	if (runner_start(&o, tr_on_output, tr_on_done, r, &r->job, kind,
	    reason) != 0) {
		TAILQ_REMOVE(&tr_live, r, entry);
		free(r->what);
		json_decref(r->command);
		free(r);
		goto out;
	}
	if (runp != NULL)
		*runp = r;
	rc = 0;
out:
	tool_run_strv_free(argv);
	tool_run_strv_free(envp);
	for (i = 0; i < nowned; i++)
		free(owned[i]);
	return rc;
}

/* Ends a call early. */
void
tool_run_cancel(struct tool_run *r)
{
	if (r != NULL)
		runner_cancel(r->job);
}

/* The pid of the call's child. */
long
tool_run_job_pid(const struct tool_run *r)
{
	return r != NULL && r->job != NULL ? runner_job_pid(r->job) : -1;
}

/* The runner's config from gbrd.conf. */
static void
tr_runner_config(const struct config *cfg, struct runner_config *rc,
    const char *const *hide, size_t nhide, const char *instance)
{
	memset(rc, 0, sizeof *rc);
	rc->instance = instance;
	rc->exec_path = cfg->exec_helper;
	rc->max_children = cfg->exec_max_children;
	rc->max_per_key = cfg->exec_max_per_session;
	rc->max_queued = cfg->exec_max_queued;
	rc->grace_ms = (int)cfg->exec_grace_ms;
	rc->landlock = (enum runner_mode)cfg->exec_landlock;
	rc->namespaces = (enum runner_mode)cfg->exec_namespaces;
	rc->spawn = cfg->exec_fork_server ? RUNNER_SPAWN_AUTO :
	    RUNNER_SPAWN_DIRECT;
	rc->hide = hide;
	rc->nhide = nhide;
}

/* Takes the per-call caps from gbrd.conf. */
static void
tr_caps(const struct config *cfg)
{
	tr.max_timeout_ms = cfg->exec_max_timeout_ms;
	tr.max_output = (size_t)cfg->exec_max_output_bytes;
	tr.processes = cfg->exec_max_processes;
	tr.memory = cfg->exec_max_memory_bytes;
	tr.file_size = cfg->exec_max_file_bytes;
	tr.open_files = cfg->exec_max_open_files;
	tool_run_strv_free(tr.pass_env);
	tool_run_strv_free(tr.read_paths);
	tr.pass_env = tr_list(cfg->exec_pass_env);
	tr.read_paths = tr_list(cfg->exec_read_paths);
}

static unsigned	tr_rm_count;

/* One entry of the temp folder's removal. */
static int
tr_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (++tr_rm_count > TR_RMTREE_MAX)
		return 1;
	(void)remove(path);
	return 0;
}

/* Removes a folder tree, bounded (a child may have filled it). */
static int
tr_rmtree(const char *path)
{
	struct stat	st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	tr_rm_count = 0;
	return nftw(path, tr_rm, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 &&
	    lstat(path, &st) != 0 ? 0 : -1;
}

/* A short stable name for a state folder (FNV-1a, hex). */
static void
tr_instance(const char *s, char *out, size_t outsz)
{
	uint64_t	h = 1469598103934665603ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	snprintf(out, outsz, "%016llx", (unsigned long long)h);
}

/* Sets the tools and the runner up. */
int
tool_run_init(struct event_base *base, const struct config *cfg,
    const char *state_dir, const char *const *hide, size_t nhide,
    char **cause)
{
	struct runner_config	 rc;
	const char		*t, *all[10];
	char			*tmpl, inst[32], *ucfg = NULL;
	size_t			 i, n = 0;

	*cause = NULL;
	for (i = 0; i < sizeof tr_defs / sizeof tr_defs[0]; i++)
		if ((tr.schemas[i] = json_loads(tr_defs[i].schema, 0,
		    NULL)) == NULL)
			fatalx("tool-run: schema of %s", tr_defs[i].name);
	tr_caps(cfg);
	if (state_dir != NULL) {
		tmpl = xasprintf("%s/run-tmp", state_dir);
		if (tr_rmtree(tmpl) != 0 || mkdir(tmpl, 0700) != 0) {
			log_warn("tool-run: %s: %s; children get no temp folder",
			    tmpl, strerror(errno));
			free(tmpl);
		} else
			tr.tmp = tmpl;
		tr_instance(state_dir, inst, sizeof inst);
	} else {
		if ((t = getenv("TMPDIR")) == NULL || t[0] != '/')
			t = "/tmp";
		tmpl = xasprintf("%s/gbr-run-%lu-XXXXXX", t,
		    (unsigned long)getuid());
		if (mkdtemp(tmpl) == NULL) {
			log_warn("tool-run: %s: %s; children get no temp folder",
			    tmpl, strerror(errno));
			free(tmpl);
		} else
			tr.tmp = tmpl;
	}
	/*
	 * Also hidden: the user's gbr config folder, where gbrd.env keeps
	 * the providers' API keys for systemd (gbrd(8), FILES).
	 */
	for (i = 0; i < nhide && n < 9; i++)
		all[n++] = hide[i];
	if ((t = getenv("XDG_CONFIG_HOME")) != NULL && t[0] == '/')
		ucfg = xasprintf("%s/gbr", t);
	else if ((t = getenv("HOME")) != NULL && t[0] == '/')
		ucfg = xasprintf("%s/.config/gbr", t);
	if (ucfg != NULL)
		all[n++] = ucfg;
	tr_runner_config(cfg, &rc, all, n, state_dir != NULL ? inst : NULL);
	i = runner_init(base, &rc, cause) != 0;
	free(ucfg);
	if (i)
		return -1;
	tr.ready = 1;
	return 0;
}

/* Applies a reloaded gbrd.conf. */
void
tool_run_reconfigure(const struct config *cfg)
{
	struct runner_config	rc;

	tr_caps(cfg);
	/* The hidden files stay those given at start. */
	tr_runner_config(cfg, &rc, NULL, 0, NULL);
	runner_reconfigure(&rc);
}

/* Kills every child and removes the temp folder. */
void
tool_run_shutdown(void)
{
	struct tool_run	*r;
	size_t		 i;

	runner_shutdown();
	/* No callback runs now: what the calls still held goes here. */
	while ((r = TAILQ_FIRST(&tr_live)) != NULL) {
		TAILQ_REMOVE(&tr_live, r, entry);
		free(r->what);
		json_decref(r->command);
		free(r);
	}
	if (tr.tmp != NULL && tr_rmtree(tr.tmp) != 0)
		log_warn("tool-run: %s was not removed completely", tr.tmp);
	free(tr.tmp);
	tool_run_strv_free(tr.pass_env);
	tool_run_strv_free(tr.read_paths);
	for (i = 0; i < sizeof tr.schemas / sizeof tr.schemas[0]; i++)
		json_decref(tr.schemas[i]);
	memset(&tr, 0, sizeof tr);
}

/* The runner's layers for daemon.status. */
json_t *
tool_run_status(void)
{
	json_t	*o = runner_status_json();

	json_object_set_new(o, "temp_dir", tr.tmp != NULL ?
	    json_string(tr.tmp) : json_null());
	json_object_set_new(o, "limits", json_pack("{s:I, s:I, s:I, s:I, "
	    "s:I, s:I}",
	    "max_timeout_ms", (json_int_t)tr.max_timeout_ms,
	    "max_output_bytes", (json_int_t)tr.max_output,
	    "max_processes", (json_int_t)tr.processes,
	    "max_memory_bytes", (json_int_t)tr.memory,
	    "max_file_bytes", (json_int_t)tr.file_size,
	    "max_open_files", (json_int_t)tr.open_files));
	return o;
}
