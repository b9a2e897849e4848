/*
 * The words of a command (see tool-run.h): splitting a command line the
 * way check_command and the command patterns are written, without a
 * shell, and matching an argument vector against a pattern word by word,
 * through wrappers (env, nice, sudo, ...) and "sh -c STRING". Pure
 * functions: the unit tests call them directly, the policy (policy.c)
 * matches deny_commands and ask_commands with them.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "tool-run.h"
#include "xmalloc.h"

#define TR_SPLIT_WORDS	256		/* words of a check_command or pattern */

/* Frees a NULL-terminated vector of strings. */
void
tool_run_strv_free(char **v)
{
	size_t	i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* The argument vector of a script (see tool-run.h). */
char **
tool_run_script_argv(const char *language, const char *code)
{
	static const char *const python[] = { "python3", "-c", NULL };
	static const char *const node[] = { "node", "-e", NULL };
	/* /d: no AutoRun commands from the registry; /q: echo off. */
	static const char *const cmd[] = { "cmd", "/d", "/q", "/c", NULL };
	static const char *const ps[] = { "powershell", "-NoLogo",
	    "-NoProfile", "-NonInteractive", "-Command", NULL };
	static const char *const sh[] = { "sh", "-c", NULL };
	const char *const	*w = sh;
	char			**argv = xcalloc(8, sizeof *argv);
	size_t			  i;

	if (language != NULL && strcmp(language, "python") == 0)
		w = python;
	else if (language != NULL && strcmp(language, "node") == 0)
		w = node;
	else if (language != NULL && strcmp(language, "cmd") == 0)
		w = cmd;
	else if (language != NULL && strcmp(language, "powershell") == 0)
		w = ps;
	for (i = 0; w[i] != NULL; i++)
		argv[i] = xstrdup(w[i]);
	argv[i] = xstrdup(code != NULL ? code : "");
	return argv;
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
