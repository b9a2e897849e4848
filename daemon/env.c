/*
 * Environment profiles (see env.h): the INI and JSON parsers, value
 * checks, the checks against the workspace, the built-in default, and the
 * views (env.show, the diff a reload reports, the sandbox config).
 *
 * Both formats feed one setter, env_set, so a key means the same thing
 * whichever file it came from. INI line numbers come from our own inih
 * reader, which counts lines as it hands them over: Debian builds inih
 * without INI_HANDLER_LINENO, and inih only reports the line of the first
 * error it saw itself. Our reader also refuses a line longer than
 * ENV_LINE_MAX instead of letting inih cut it (inih's default is to parse
 * the rest of a long line as if it were a new line, which could turn the
 * tail of a prompt into a key); where Debian's inih lets a program lift its
 * 200-byte limit at run time (HAVE_DECL_INI_MAX_LINE) we do, for the whole
 * process, which also spares gbrd.conf that cut.
 *
 * In INI, a key repeated right after itself (inih's indented continuation
 * lines arrive the same way) continues it: [prompt] system joins the lines
 * with newlines and lists add items; any other key given twice is an
 * error. JSON rejects duplicate keys outright.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "osdep-fs.h"
#include "pathgate.h"
#include "sandbox.h"
#include "xmalloc.h"

#if defined(HAVE_DECL_INI_MAX_LINE) && HAVE_DECL_INI_MAX_LINE && \
    HAVE_DECL_INI_ALLOW_REALLOC && HAVE_DECL_INI_USE_STACK
#define ENV_INI_GROWS	1
#else
#define ENV_INI_GROWS	0
#endif

#define ENV_LIST_MAX	256	/* items in one list */
#define ENV_ITEM_MAX	4096	/* bytes in one item, command or path */

enum env_key {
	K_ALLOWED_ROOT,
	K_RO_ROOTS,
	K_PROTECTED,
	K_CHECK,
	K_MAX_FIX,
	K_AUTONOMY,
	K_ASK,
	K_DENY,
	K_SYSTEM,
	K_SYSTEM_FILE,
	K_TIMEOUT,
	K_MAX_OUTPUT,
	K_PROVIDER,
	K_MODEL,
	K_BASE_URL,
	K_ASK_TOOLS,
	K_MAX_STEPS,
	K_MAX_REQUEST,
	K__COUNT
};

static const struct {
	const char	*section;
	const char	*name;
	int		 list;
} env_keys[K__COUNT] = {
	[K_ALLOWED_ROOT] =	{ "env", "allowed_root", 0 },
	[K_RO_ROOTS] =		{ "env", "read_only_roots", 1 },
	[K_PROTECTED] =		{ "env", "protected_files", 1 },
	[K_CHECK] =		{ "env", "check_command", 0 },
	[K_MAX_FIX] =		{ "env", "max_fix_attempts", 0 },
	[K_AUTONOMY] =		{ "env", "autonomy", 0 },
	[K_ASK] =		{ "env", "ask_commands", 1 },
	[K_DENY] =		{ "env", "deny_commands", 1 },
	[K_SYSTEM] =		{ "prompt", "system", 0 },
	[K_SYSTEM_FILE] =	{ "prompt", "system_file", 0 },
	[K_TIMEOUT] =		{ "exec", "timeout_ms", 0 },
	[K_MAX_OUTPUT] =	{ "exec", "max_output_bytes", 0 },
	[K_PROVIDER] =		{ "llm", "provider", 0 },
	[K_MODEL] =		{ "llm", "model", 0 },
	[K_BASE_URL] =		{ "llm", "base_url", 0 },
	[K_MAX_STEPS] =		{ "llm", "max_steps", 0 },
	[K_MAX_REQUEST] =	{ "llm", "max_request_bytes", 0 },
	[K_ASK_TOOLS] =		{ "env", "ask_tools", 1 },
};

static const char *const env_sections[] = { "env", "prompt", "exec", "llm" };

static const char *const env_autonomies[] = {
	[ENV_READ_ONLY] = "read-only",
	[ENV_SUPERVISED] = "supervised",
	[ENV_FULL] = "full",
};

/* A list of owned strings. */
struct env_strs {
	char	**v;
	size_t	  n;
};

struct env {
	int		 refs;
	int		 builtin;
	int		 finished;
	char		*name;
	char		*source;	/* the profile file, absolute; NULL if built in */
	char		*workspace;	/* real path */
	char		*root_given;	/* allowed_root as written (normal form) */
	char		*allowed_root;	/* real path */
	struct env_strs	 ro_given;
	struct env_strs	 ro;		/* real paths of those that exist */
	struct env_strs	 protected;
	char		*check;		/* NULL: none */
	int		 max_fix;
	enum env_autonomy autonomy;
	struct env_strs	 ask;
	struct env_strs	 deny;
	struct env_strs	 ask_tools;	/* tools that ask in supervised autonomy */
	char		*system;	/* the prompt text */
	char		*system_file_given;
	char		*system_file;	/* real path */
	int		 timeout_ms;
	size_t		 max_output;
	char		*provider;
	char		*model;
	char		*base_url;
	int		 max_steps;	/* 0: the daemon's */
	size_t		 max_request;	/* 0: the daemon's */
	struct env_strs	 warnings;
	struct env_strs	 files;
	unsigned	 set;		/* bit per enum env_key given */
	int		 line[K__COUNT];
};

/* Parser state, shared by the INI and JSON front ends. */
struct env_parse {
	struct env	*env;
	const char	*file;
	char		*cause;
	int		 err_line;
	int		 line;		/* the line being parsed (0: unknown) */
	int		 prev_key;	/* the key set by the previous INI line */
	/* The INI reader. */
	const char	*buf;
	size_t		 len;
	size_t		 pos;
	size_t		 cur_len;
	size_t		 line_start;	/* offset of the line being parsed */
	int		 at_start;
};

/* Appends an owned copy. */
static void
strs_add(struct env_strs *l, const char *s)
{
	l->v = xreallocarray(l->v, l->n + 1, sizeof *l->v);
	l->v[l->n++] = xstrdup(s);
}

/* Frees a list's strings. */
static void
strs_clear(struct env_strs *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* True if two lists hold the same strings in the same order. */
static int
strs_equal(const struct env_strs *a, const struct env_strs *b)
{
	size_t	i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return 0;
	return 1;
}

/* A list as a new JSON array. */
static json_t *
strs_json(const struct env_strs *l)
{
	json_t	*a = json_array();
	size_t	 i;

	for (i = 0; i < l->n; i++)
		json_array_append_new(a, json_string(l->v[i]));
	return a;
}

/* NULL-safe string equality. */
static int
str_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* A new env with the defaults every profile starts from. */
static struct env *
env_new(const char *name)
{
	struct env	*e = xcalloc(1, sizeof *e);

	e->refs = 1;
	e->name = xstrdup(name);
	e->root_given = xstrdup(".");
	e->max_fix = 3;
	e->autonomy = ENV_SUPERVISED;
	e->timeout_ms = 30000;
	e->max_output = 1024 * 1024;
	return e;
}

/* Takes a reference. */
struct env *
env_ref(struct env *e)
{
	e->refs++;
	return e;
}

/* Drops a reference; the last one frees. */
void
env_unref(struct env *e)
{
	if (e == NULL || --e->refs > 0)
		return;
	free(e->name);
	free(e->source);
	free(e->workspace);
	free(e->root_given);
	free(e->allowed_root);
	strs_clear(&e->ro_given);
	strs_clear(&e->ro);
	strs_clear(&e->protected);
	free(e->check);
	strs_clear(&e->ask);
	strs_clear(&e->deny);
	strs_clear(&e->ask_tools);
	free(e->system);
	free(e->system_file_given);
	free(e->system_file);
	free(e->provider);
	free(e->model);
	free(e->base_url);
	strs_clear(&e->warnings);
	strs_clear(&e->files);
	free(e);
}

/* Records the first error, with the current line. Returns -1. */
static int __attribute__((format(printf, 2, 3)))
env_error(struct env_parse *p, const char *fmt, ...)
{
	va_list	ap;

	if (p->cause != NULL)
		return -1;
	va_start(ap, fmt);
	p->cause = xvasprintf(fmt, ap);
	va_end(ap);
	p->err_line = p->line;
	return -1;
}

/* Finds the line of byte offset off in buf (1-based). */
static int
env_line_of(const char *buf, size_t off)
{
	int	line = 1;
	size_t	i;

	for (i = 0; i < off; i++)
		if (buf[i] == '\n')
			line++;
	return line;
}

/*
 * Checks a whole file's bytes: no NUL, valid UTF-8. Returns 0, or -1 with
 * the error and its line.
 */
static int
env_check_text(struct env_parse *p, const char *buf, size_t len)
{
	const unsigned char	*s = (const unsigned char *)buf;
	size_t			 i = 0, n;
	uint32_t		 cp;

	while (i < len) {
		if (s[i] == '\0') {
			p->line = env_line_of(buf, i);
			return env_error(p, "a NUL byte");
		}
		if ((n = pathgate_utf8_next(s + i, len - i, &cp)) == 0) {
			p->line = env_line_of(buf, i);
			return env_error(p, "not valid UTF-8");
		}
		i += n;
	}
	return 0;
}

/*
 * Checks a one-line value (command, name, pattern): valid UTF-8 without
 * control or bidi characters, at most max bytes. Returns 0 or -1.
 */
static int
env_check_line(struct env_parse *p, enum env_key k, const char *v, size_t len,
    size_t max)
{
	const unsigned char	*s = (const unsigned char *)v;
	size_t			 i = 0, n;
	uint32_t		 cp;

	if (len > max)
		return env_error(p, "%s: longer than %zu bytes",
		    env_keys[k].name, max);
	while (i < len) {
		if ((n = pathgate_utf8_next(s + i, len - i, &cp)) == 0 ||
		    cp == 0 || pathgate_is_control(cp) || pathgate_is_bidi(cp))
			return env_error(p, "%s: holds a control, bidi or "
			    "non-UTF-8 character", env_keys[k].name);
		i += n;
	}
	return 0;
}

/* Parses an integer in [min, max]. Returns 0 or -1. */
static int
env_int(const char *v, long long min, long long max, long long *out)
{
	char		*end;
	long long	 n;

	if (*v == '\0')
		return -1;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

/* Parses a size with an optional K, M or G suffix in [min, max]. */
static int
env_size(const char *v, unsigned long long min, unsigned long long max,
    unsigned long long *out)
{
	char			*end;
	unsigned long long	 n, mult = 1;

	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': mult = 1ULL << 10; end++; break;
	case 'm': case 'M': mult = 1ULL << 20; end++; break;
	case 'g': case 'G': mult = 1ULL << 30; end++; break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end != '\0' || (n != 0 && mult > ULLONG_MAX / n))
		return -1;
	n *= mult;
	if (n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

/*
 * Checks a path value: its bytes, and that a relative one stays inside
 * the workspace lexically. Returns its normal form (new) or NULL.
 */
static char *
env_path(struct env_parse *p, enum env_key k, const char *v, size_t len)
{
	struct pathgate_refusal	 why;
	char			*n;

	if (pathgate_check_bytes(v, len, PATHGATE_UNIX, &why) != 0) {
		env_error(p, "%s '%.*s': %s", env_keys[k].name,
		    (int)(len > 200 ? 200 : len), v, why.reason);
		return NULL;
	}
	if (pathgate_is_absolute(v, len, PATHGATE_UNIX))
		n = pathgate_normalize_absolute(v, len, PATHGATE_UNIX, &why);
	else
		n = pathgate_normalize(v, len, PATHGATE_UNIX, &why);
	if (n == NULL) {
		if (why.kind == GBR_ERR_PATH_TRAVERSAL)
			env_error(p, "%s '%s' is outside the workspace",
			    env_keys[k].name, v);
		else
			env_error(p, "%s '%s': %s", env_keys[k].name, v,
			    why.reason);
	}
	return n;
}

/* True if s looks like a tool's name: 1 to 64 of [a-z0-9_.-]. */
static int
env_tool_name_valid(const char *s)
{
	size_t	i;

	for (i = 0; s[i] != '\0'; i++) {
		if (i >= 64 || !((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		    s[i] == '.' || s[i] == '-'))
			return 0;
	}
	return i > 0;
}

/* Adds one list item after checking it. Returns 0 or -1. */
static int
env_set_item(struct env_parse *p, enum env_key k, const char *v, size_t len)
{
	struct env	*e = p->env;
	struct env_strs	*l;
	const char	*why;
	char		*n;

	switch (k) {
	case K_RO_ROOTS:
		l = &e->ro_given;
		break;
	case K_PROTECTED:
		l = &e->protected;
		break;
	case K_ASK:
		l = &e->ask;
		break;
	case K_ASK_TOOLS:
		l = &e->ask_tools;
		break;
	default:
		l = &e->deny;
		break;
	}
	if (l->n >= ENV_LIST_MAX)
		return env_error(p, "%s: more than %d items", env_keys[k].name,
		    ENV_LIST_MAX);
	if (env_check_line(p, k, v, len, ENV_ITEM_MAX) != 0)
		return -1;
	n = xstrndup(v, len);
	if (k == K_RO_ROOTS) {
		char *norm = env_path(p, k, n, len);

		free(n);
		if (norm == NULL)
			return -1;
		n = norm;
	} else if (k == K_PROTECTED && pathgate_glob_check(n, &why) != 0) {
		env_error(p, "protected_files '%s': %s", n, why);
		free(n);
		return -1;
	} else if (k == K_ASK_TOOLS && !env_tool_name_valid(n)) {
		env_error(p, "ask_tools '%s': a tool name is 1 to 64 of "
		    "[a-z0-9_.-]", n);
		free(n);
		return -1;
	}
	l->v = xreallocarray(l->v, l->n + 1, sizeof *l->v);
	l->v[l->n++] = n;
	return 0;
}

/* Splits a comma-separated list value and adds each non-empty item. */
static int
env_set_list(struct env_parse *p, enum env_key k, const char *v, size_t len)
{
	size_t	i = 0, start, end;

	while (i <= len) {
		start = i;
		while (i < len && v[i] != ',')
			i++;
		end = i;
		while (start < end && (v[start] == ' ' || v[start] == '\t'))
			start++;
		while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
			end--;
		if (end > start && env_set_item(p, k, v + start,
		    end - start) != 0)
			return -1;
		i++;
	}
	return 0;
}

/*
 * Sets one key from a string value (both formats). cont: this continues
 * the same key (INI continuation). Returns 0 or -1.
 */
static int
env_set(struct env_parse *p, enum env_key k, const char *v, size_t len,
    int cont)
{
	struct env		*e = p->env;
	const char		*name = env_keys[k].name;
	long long		 n;
	unsigned long long	 u;
	size_t			 i, old;

	if (strlen(v) != len)
		return env_error(p, "%s: holds a NUL byte", name);
	if ((e->set & (1u << k)) && !env_keys[k].list && !(k == K_SYSTEM && cont))
		return env_error(p, cont ? "%s: only [prompt] system and lists "
		    "may continue on a second line" : "%s is given twice", name);
	if (!(e->set & (1u << k)))
		e->line[k] = p->line;
	e->set |= 1u << k;
	if (env_keys[k].list)
		return env_set_list(p, k, v, len);

	switch (k) {
	case K_ALLOWED_ROOT:
		if (len == 0)
			return env_error(p, "allowed_root is empty");
		free(e->root_given);
		e->root_given = env_path(p, k, v, len);
		return e->root_given == NULL ? -1 : 0;
	case K_SYSTEM_FILE:
		if (len == 0)
			return env_error(p, "system_file is empty");
		free(e->system_file_given);
		e->system_file_given = env_path(p, k, v, len);
		return e->system_file_given == NULL ? -1 : 0;
	case K_CHECK:
		if (env_check_line(p, k, v, len, ENV_ITEM_MAX) != 0)
			return -1;
		free(e->check);
		e->check = len == 0 ? NULL : xstrdup(v);
		return 0;
	case K_MAX_FIX:
		if (env_int(v, 0, 100, &n) != 0)
			return env_error(p, "max_fix_attempts = '%s': expected a "
			    "number from 0 to 100", v);
		e->max_fix = (int)n;
		return 0;
	case K_AUTONOMY:
		for (i = 0; i < sizeof env_autonomies / sizeof env_autonomies[0]; i++) {
			if (strcmp(v, env_autonomies[i]) == 0) {
				e->autonomy = (enum env_autonomy)i;
				return 0;
			}
		}
		return env_error(p, "autonomy = '%s': expected read-only, "
		    "supervised or full", v);
	case K_SYSTEM:
		old = e->system != NULL ? strlen(e->system) : 0;
		if (old + len + 1 > ENV_FILE_MAX)
			return env_error(p, "system: longer than %d bytes",
			    ENV_FILE_MAX);
		if (e->system == NULL || old == 0) {
			free(e->system);
			e->system = xstrdup(v);
		} else {
			e->system = xreallocarray(e->system, old + len + 2, 1);
			e->system[old] = '\n';
			memcpy(e->system + old + 1, v, len + 1);
		}
		return 0;
	case K_TIMEOUT:
		if (env_int(v, 1, 3600000, &n) != 0)
			return env_error(p, "timeout_ms = '%s': expected "
			    "milliseconds from 1 to 3600000", v);
		e->timeout_ms = (int)n;
		return 0;
	case K_MAX_OUTPUT:
		if (env_size(v, 1024, 64ULL << 20, &u) != 0)
			return env_error(p, "max_output_bytes = '%s': expected a "
			    "size from 1K to 64M", v);
		e->max_output = (size_t)u;
		return 0;
	case K_PROVIDER:
		if (strcmp(v, "gemini") != 0 && strcmp(v, "openai") != 0 &&
		    strcmp(v, "anthropic") != 0)
			return env_error(p, "provider = '%s': expected gemini, "
			    "openai or anthropic", v);
		free(e->provider);
		e->provider = xstrdup(v);
		return 0;
	case K_MODEL:
		if (len == 0 || env_check_line(p, k, v, len, 256) != 0)
			return env_error(p, "model = '%s': expected a model name",
			    v);
		free(e->model);
		e->model = xstrdup(v);
		return 0;
	case K_BASE_URL:
		if (env_check_line(p, k, v, len, 2048) != 0)
			return -1;
		if ((strncmp(v, "http://", 7) != 0 &&
		    strncmp(v, "https://", 8) != 0) || strchr(v, ' ') != NULL)
			return env_error(p, "base_url = '%s': expected an http:// "
			    "or https:// URL", v);
		free(e->base_url);
		e->base_url = xstrdup(v);
		return 0;
	case K_MAX_STEPS:
		if (env_int(v, 1, 10000, &n) != 0)
			return env_error(p, "max_steps = '%s': expected a number "
			    "from 1 to 10000", v);
		e->max_steps = (int)n;
		return 0;
	case K_MAX_REQUEST:
		if (env_size(v, 16 * 1024, 256ULL << 20, &u) != 0)
			return env_error(p, "max_request_bytes = '%s': expected a "
			    "size from 16K to 256M", v);
		e->max_request = (size_t)u;
		return 0;
	default:
		return env_error(p, "%s: internal error", name);
	}
}

/* True if section is one of the four. */
static int
env_section_known(const char *section)
{
	size_t	i;

	for (i = 0; i < sizeof env_sections / sizeof env_sections[0]; i++)
		if (strcmp(env_sections[i], section) == 0)
			return 1;
	return 0;
}

/* Finds a key by section and name; -1 with an error if unknown. */
static int
env_find_key(struct env_parse *p, const char *section, const char *name)
{
	size_t	i;

	for (i = 0; i < K__COUNT; i++)
		if (strcmp(env_keys[i].section, section) == 0 &&
		    strcmp(env_keys[i].name, name) == 0)
			return (int)i;
	if (section[0] == '\0')
		return env_error(p, "'%s' is outside any [section] (use [env], "
		    "[prompt], [exec] or [llm])", name);
	if (!env_section_known(section))
		return env_error(p, "unknown section [%s] (expected [env], "
		    "[prompt], [exec] or [llm])", section);
	return env_error(p, "unknown key '%s' in [%s]", name, section);
}

/*
 * inih's reader: hands over one line (or the next piece of a long one),
 * counting lines and refusing any longer than ENV_LINE_MAX.
 */
static char *
env_ini_reader(char *str, int num, void *stream)
{
	struct env_parse	*p = stream;
	size_t			 n = 0, max;
	char			 c;

	if (p->cause != NULL || p->pos >= p->len || num < 2)
		return NULL;
	max = (size_t)num - 1;
	if (p->at_start) {
		p->line++;
		p->cur_len = 0;
		p->line_start = p->pos;
	}
	while (n < max && p->pos < p->len) {
		c = p->buf[p->pos++];
		str[n++] = c;
		if (c == '\n')
			break;
	}
	str[n] = '\0';
	p->cur_len += n;
	p->at_start = (str[n - 1] == '\n' || p->pos >= p->len);
	/* The line goes on: inih reads the rest only when it can grow. */
	if ((!p->at_start && !ENV_INI_GROWS) ||
	    p->cur_len - (str[n - 1] == '\n') > ENV_LINE_MAX) {
		env_error(p, "the line is longer than %d bytes (continue a "
		    "long value on indented lines, or use system_file)",
		    ENV_INI_GROWS ? ENV_LINE_MAX : num - 3);
		return NULL;
	}
	return str;
}

/* inih's handler: one key = value at a time. */
static int
env_ini_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct env_parse	*p = arg;
	int			 k, cont;

	if (p->cause != NULL)
		return 0;
	if (name == NULL)
		return 1;
	if ((k = env_find_key(p, section, name)) < 0)
		return 0;
	/* inih's continuation lines are the indented ones after a key. */
	cont = (p->prev_key == k && p->line_start < p->len &&
	    (p->buf[p->line_start] == ' ' || p->buf[p->line_start] == '\t'));
	p->prev_key = k;
	return env_set(p, (enum env_key)k, value, strlen(value), cont) == 0;
}

/* Parses the INI form. */
static int
env_parse_ini(struct env_parse *p, const char *data, size_t len)
{
	char	*copy;
	int	 r;

#if ENV_INI_GROWS
	/* Process-wide: lets inih grow its line buffer instead of cutting. */
	ini_use_stack = false;
	ini_allow_realloc = true;
	ini_max_line = ENV_LINE_MAX + 64;
#endif
	/* inih's string reader wants a NUL-terminated buffer; ours does not. */
	copy = xstrndup(data, len);
	p->buf = copy;
	p->len = len;
	p->pos = 0;
	p->at_start = 1;
	p->prev_key = -1;
	r = ini_parse_stream(env_ini_reader, p, env_ini_handler, p);
	free(copy);
	p->buf = NULL;
	if (r > 0 && (p->cause == NULL || r < p->err_line)) {
		/* inih met a syntax error before our first complaint. */
		free(p->cause);
		p->cause = NULL;
		p->line = r;
		return env_error(p, "syntax error (expected [section] or "
		    "key = value)");
	}
	if (p->cause != NULL)
		return -1;
	if (r != 0)
		return env_error(p, "out of memory");
	return 0;
}

/*
 * The line of a key in JSON text: jansson keeps no positions, so this finds
 * the first "key" that is followed by ':' (best effort; 0 if not found).
 */
static int
env_json_line(const char *buf, size_t len, const char *key)
{
	size_t	klen = strlen(key), i, j;

	for (i = 0; i + klen + 2 <= len; i++) {
		if (buf[i] != '"' || (i > 0 && buf[i - 1] == '\\') ||
		    memcmp(buf + i + 1, key, klen) != 0 || buf[i + 1 + klen] != '"')
			continue;
		for (j = i + klen + 2; j < len && (buf[j] == ' ' ||
		    buf[j] == '\t' || buf[j] == '\r' || buf[j] == '\n'); j++)
			;
		if (j < len && buf[j] == ':')
			return env_line_of(buf, i);
	}
	return 0;
}

/* Sets one key from a JSON value. */
static int
env_json_value(struct env_parse *p, enum env_key k, json_t *v)
{
	char	 num[32];
	size_t	 i;
	json_t	*item;

	if (json_is_string(v))
		return env_set(p, k, json_string_value(v), json_string_length(v), 0);
	if (json_is_integer(v) && (k == K_MAX_FIX || k == K_TIMEOUT ||
	    k == K_MAX_OUTPUT || k == K_MAX_STEPS || k == K_MAX_REQUEST)) {
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		return env_set(p, k, num, strlen(num), 0);
	}
	if (json_is_array(v) && env_keys[k].list) {
		p->env->set |= 1u << k;
		p->env->line[k] = p->line;
		json_array_foreach(v, i, item) {
			if (!json_is_string(item))
				return env_error(p, "%s: item %zu is not a string",
				    env_keys[k].name, i);
			if (strlen(json_string_value(item)) !=
			    json_string_length(item))
				return env_error(p, "%s: holds a NUL byte",
				    env_keys[k].name);
			if (env_set_item(p, k, json_string_value(item),
			    json_string_length(item)) != 0)
				return -1;
		}
		return 0;
	}
	return env_error(p, "%s: expected %s", env_keys[k].name,
	    env_keys[k].list ? "an array of strings" :
	    (k == K_MAX_FIX || k == K_TIMEOUT || k == K_MAX_OUTPUT ||
	    k == K_MAX_STEPS || k == K_MAX_REQUEST) ? "a number" : "a string");
}

/* Parses the JSON form. */
static int
env_parse_json(struct env_parse *p, const char *data, size_t len)
{
	json_error_t	 jerr;
	json_t		*root, *sec, *v;
	const char	*sname, *kname;
	int		 k, r = 0;

	root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		p->line = jerr.line > 0 ? jerr.line : 0;
		return env_error(p, "column %d: %s", jerr.column, jerr.text);
	}
	if (!json_is_object(root)) {
		json_decref(root);
		p->line = 1;
		return env_error(p, "expected a JSON object of sections");
	}
	json_object_foreach(root, sname, sec) {
		p->line = env_json_line(data, len, sname);
		if (!env_section_known(sname)) {
			r = env_error(p, "unknown section [%s] (expected [env], "
			    "[prompt], [exec] or [llm])", sname);
			break;
		}
		if (!json_is_object(sec)) {
			r = env_error(p, "[%s] must be an object", sname);
			break;
		}
		json_object_foreach(sec, kname, v) {
			p->line = env_json_line(data, len, kname);
			if ((k = env_find_key(p, sname, kname)) < 0 ||
			    env_json_value(p, (enum env_key)k, v) != 0) {
				r = -1;
				break;
			}
		}
		if (r != 0)
			break;
	}
	json_decref(root);
	return r;
}

/* Parses a profile from memory (see env.h). */
struct env *
env_parse(const char *name, const char *file, const char *data, size_t len,
    enum env_format fmt, char **cause)
{
	struct env_parse	 p;
	int			 r;

	*cause = NULL;
	memset(&p, 0, sizeof p);
	p.env = env_new(name);
	p.file = file;
	if (len > ENV_FILE_MAX) {
		*cause = xasprintf("%s: larger than %d bytes", file, ENV_FILE_MAX);
		env_unref(p.env);
		return NULL;
	}
	r = env_check_text(&p, data, len);
	if (r == 0)
		r = fmt == ENV_INI ? env_parse_ini(&p, data, len) :
		    env_parse_json(&p, data, len);
	if (r == 0 && (p.env->set & (1u << K_SYSTEM)) &&
	    (p.env->set & (1u << K_SYSTEM_FILE))) {
		p.line = p.env->line[K_SYSTEM_FILE];
		r = env_error(&p, "give system or system_file, not both");
	}
	if (r != 0 || p.cause != NULL) {
		if (p.err_line > 0)
			*cause = xasprintf("%s:%d: %s", file, p.err_line,
			    p.cause != NULL ? p.cause : "invalid");
		else
			*cause = xasprintf("%s: %s", file, p.cause != NULL ?
			    p.cause : "invalid");
		free(p.cause);
		env_unref(p.env);
		return NULL;
	}
	return p.env;
}

/* An error about a key found while finishing, with the key's line. */
static int __attribute__((format(printf, 4, 5)))
env_key_error(const struct env *e, enum env_key k, char **cause,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	if (e->source != NULL && e->line[k] > 0)
		*cause = xasprintf("%s:%d: %s", e->source, e->line[k], msg);
	else if (e->source != NULL)
		*cause = xasprintf("%s: %s", e->source, msg);
	else
		*cause = xstrdup(msg);
	free(msg);
	return -1;
}

/* Joins a workspace and a normal path (absolute paths are kept). */
static char *
env_join(const char *ws, const char *path)
{
	if (path[0] == '/')
		return xstrdup(path);
	if (strcmp(path, ".") == 0)
		return xstrdup(ws);
	return xasprintf("%s/%s", ws, path);
}

/*
 * Opens a file of the workspace for reading. A relative path must stay
 * inside the workspace even through symlinks (openat2 RESOLVE_BENEATH, or
 * realpath then O_NOFOLLOW): a command the agent ran could otherwise point
 * .gbr_envs/x.ini or prompts/x.md at a secret and have it read into a
 * prompt. An absolute path is the human's explicit choice and is opened as
 * is. O_NONBLOCK: a FIFO put there must not block the daemon. Returns the
 * fd, or -1 with *why (new).
 */
static int
env_open(const char *ws, const char *path, char **why)
{
	char	*full, *real;
	int	 wsfd, fd, err;

	if (path[0] == '/') {
		if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY |
		    O_CLOEXEC)) == -1)
			*why = xstrdup(strerror(errno));
		return fd;
	}
	if (osdep_have_open_beneath()) {
		if ((wsfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
			*why = xstrdup(strerror(errno));
			return -1;
		}
		fd = osdep_open_beneath(wsfd, path, O_RDONLY | O_NONBLOCK |
		    O_NOCTTY | O_CLOEXEC, 0, 0);
		err = errno;
		close(wsfd);
		if (fd == -1)
			*why = xstrdup(err == EXDEV || err == ELOOP ?
			    "it leads outside the workspace" : strerror(err));
		return fd;
	}
	full = xasprintf("%s/%s", ws, path);
	real = realpath(full, NULL);
	free(full);
	if (real == NULL) {
		*why = xstrdup(strerror(errno));
		return -1;
	}
	if (!pathgate_is_under(ws, real, PATHGATE_UNIX)) {
		free(real);
		*why = xstrdup("it leads outside the workspace");
		return -1;
	}
	fd = open(real, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1)
		*why = xstrdup(strerror(errno));
	free(real);
	return fd;
}

/*
 * Reads a small regular file (a profile or a system_file) from fd, which
 * it closes, into a new NUL-terminated buffer. Returns 0, or -1 with *why.
 */
static int
env_read_fd(int fd, char **data, size_t *len, char **why)
{
	struct stat	 st;
	char		*buf;
	size_t		 used = 0;
	ssize_t		 n;
	int		 err;

	*data = NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = xstrdup("not a regular file");
		close(fd);
		return -1;
	}
	if (st.st_size > ENV_FILE_MAX) {
		*why = xasprintf("larger than %d bytes", ENV_FILE_MAX);
		close(fd);
		return -1;
	}
	buf = xmalloc(ENV_FILE_MAX + 2);
	for (;;) {
		n = read(fd, buf + used, ENV_FILE_MAX + 1 - used);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
		if (used > ENV_FILE_MAX)
			break;
	}
	err = errno;
	close(fd);
	if (n == -1) {
		*why = xstrdup(strerror(err));
		free(buf);
		return -1;
	}
	if (used > ENV_FILE_MAX) {
		*why = xasprintf("larger than %d bytes", ENV_FILE_MAX);
		free(buf);
		return -1;
	}
	buf[used] = '\0';
	*data = buf;
	*len = used;
	return 0;
}

/* True if path is an existing folder. */
static int
env_is_dir(const char *path)
{
	struct stat	st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* True if path is an existing regular file. */
static int
env_is_file(const char *path)
{
	struct stat	st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Appends item to a ", "-separated list being built (new string). */
static char *
env_cat(char *list, const char *item)
{
	char	*out;

	out = xasprintf("%s%s%s", list != NULL ? list : "",
	    list != NULL ? ", " : "", item);
	free(list);
	return out;
}

/*
 * The default system prompt: the tools, the confinement, and the local
 * knowledge (ADR-0001: look library APIs up in the read-only roots).
 */
static char *
env_default_prompt(const struct env *e)
{
	char	*ro = NULL, *prot = NULL, *rel, *out;
	size_t	 i;

	for (i = 0; i < e->ro.n; i++) {
		rel = pathgate_relative(e->allowed_root, e->ro.v[i], PATHGATE_UNIX);
		ro = env_cat(ro, rel != NULL ? rel : e->ro.v[i]);
		free(rel);
	}
	for (i = 0; i < e->protected.n; i++)
		if (strcmp(e->protected.v[i], ".gbr_envs/**") != 0)
			prot = env_cat(prot, e->protected.v[i]);
	out = xasprintf(
	    "You are a coding agent working in the folder %s. You can only "
	    "see and change files inside it: give paths relative to it; a "
	    "path that leaves it, by '..' or through a symbolic link, is "
	    "refused.\n"
	    "Your file tools: read_file {path, offset?, limit?} reads a text "
	    "file (offset and limit count lines); write_file {path, content} "
	    "creates or replaces a whole file; edit_file {path, old_string, "
	    "new_string, replace_all?} replaces an exact piece of text, which "
	    "must be unique unless replace_all is true; list_directory {path, "
	    "depth?} lists a folder; search {pattern, path?, glob?, "
	    "max_results?} finds a POSIX extended regular expression in "
	    "files.\n"
	    "Writing %s%s.gbr_envs/** (your own rules) needs a human's "
	    "approval: say why when you ask.\n"
	    "%s%s%s"
	    "%s%s%s",
	    e->allowed_root,
	    prot != NULL ? prot : "", prot != NULL ? " or " : "",
	    ro != NULL ? "Read-only reference folders: " : "",
	    ro != NULL ? ro : "",
	    ro != NULL ? ". They hold the source code of the project's "
	    "dependencies, as the build tool downloaded them. Before you use "
	    "a library function, look its real API up there with search "
	    "(for example search {pattern: \"pub fn name\", path: \"the "
	    "folder\"}) instead of guessing from memory.\n" : "",
	    e->check != NULL ? "After you change code, `" : "",
	    e->check != NULL ? e->check : "",
	    e->check != NULL ? "` runs and its errors come back to you: fix "
	    "them before you say you are done.\n" : "");
	free(ro);
	free(prot);
	return out;
}

/* Checks an env against its workspace (see env.h). */
int
env_finish(struct env *e, const char *workspace, char **cause)
{
	char	*ws, *path, *real, *data, *why, *rel;
	size_t	 i, len;
	int	 fd;

	*cause = NULL;
	if (e->finished) {
		*cause = xstrdup("the profile was already checked");
		return -1;
	}
	if ((ws = realpath(workspace, NULL)) == NULL) {
		*cause = xasprintf("workspace %s: %s", workspace, strerror(errno));
		return -1;
	}
	if (!env_is_dir(ws)) {
		*cause = xasprintf("workspace %s is not a folder", workspace);
		free(ws);
		return -1;
	}
	free(e->workspace);
	e->workspace = ws;

	path = env_join(ws, e->root_given);
	real = realpath(path, NULL);
	free(path);
	if (real == NULL)
		return env_key_error(e, K_ALLOWED_ROOT, cause,
		    "allowed_root '%s': %s", e->root_given, strerror(errno));
	if (!pathgate_is_under(ws, real, PATHGATE_UNIX)) {
		env_key_error(e, K_ALLOWED_ROOT, cause, "allowed_root '%s' is "
		    "outside the workspace %s (it is %s)", e->root_given, ws, real);
		free(real);
		return -1;
	}
	if (!env_is_dir(real)) {
		env_key_error(e, K_ALLOWED_ROOT, cause,
		    "allowed_root '%s' is not a folder", e->root_given);
		free(real);
		return -1;
	}
	free(e->allowed_root);
	e->allowed_root = real;

	strs_clear(&e->ro);
	for (i = 0; i < e->ro_given.n; i++) {
		path = env_join(ws, e->ro_given.v[i]);
		real = realpath(path, NULL);
		free(path);
		if (real == NULL && errno == ENOENT) {
			/* build/packages appears with the first build: not an error. */
			why = xasprintf("read_only_roots: '%s' does not exist (yet); "
			    "skipped until the profile is reloaded", e->ro_given.v[i]);
			strs_add(&e->warnings, why);
			free(why);
			continue;
		}
		if (real == NULL || !env_is_dir(real)) {
			free(real);
			return env_key_error(e, K_RO_ROOTS, cause,
			    "read_only_roots: '%s' is not a folder", e->ro_given.v[i]);
		}
		strs_add(&e->ro, real);
		free(real);
	}

	if (e->system_file_given != NULL) {
		path = env_join(ws, e->system_file_given);
		real = realpath(path, NULL);
		free(path);
		if (real == NULL)
			return env_key_error(e, K_SYSTEM_FILE, cause,
			    "system_file '%s': %s", e->system_file_given,
			    strerror(errno));
		if ((fd = env_open(ws, e->system_file_given, &why)) == -1 ||
		    env_read_fd(fd, &data, &len, &why) != 0) {
			env_key_error(e, K_SYSTEM_FILE, cause, "system_file '%s': %s",
			    e->system_file_given, why);
			free(why);
			free(real);
			return -1;
		}
		if (strlen(data) != len) {
			free(data);
			free(real);
			return env_key_error(e, K_SYSTEM_FILE, cause,
			    "system_file '%s' holds a NUL byte", e->system_file_given);
		}
		for (i = 0; i < len; ) {
			uint32_t cp;
			size_t n = pathgate_utf8_next((const unsigned char *)data + i,
			    len - i, &cp);

			if (n == 0) {
				free(data);
				free(real);
				return env_key_error(e, K_SYSTEM_FILE, cause,
				    "system_file '%s' is not valid UTF-8",
				    e->system_file_given);
			}
			i += n;
		}
		free(e->system);
		e->system = data;
		free(e->system_file);
		e->system_file = real;
		/* The agent must not rewrite its own prompt: protect the file. */
		if ((rel = pathgate_relative(e->allowed_root, real,
		    PATHGATE_UNIX)) != NULL) {
			strs_add(&e->protected, rel);
			free(rel);
		}
	}
	if (e->system == NULL)
		e->system = env_default_prompt(e);

	strs_clear(&e->files);
	if (e->source != NULL)
		strs_add(&e->files, e->source);
	if (e->system_file != NULL)
		strs_add(&e->files, e->system_file);
	e->finished = 1;
	return 0;
}

/* True if name may name a profile. */
int
env_name_valid(const char *name)
{
	size_t	i, len;

	if (name == NULL || (len = strlen(name)) == 0 || len > ENV_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '.' || c == '_' || c == '-'))
			continue;
		return 0;
	}
	return strstr(name, "..") == NULL;
}

/* The built-in default (see env.h and issue 5). */
struct env *
env_builtin(const char *workspace, char **cause)
{
	static const char *const prot[] = {
		"gleam.toml", "manifest.toml", ".gbr_envs/**", ".git/**"
	};
	struct env	*e = env_new("default");
	char		*ws, *p;
	size_t		 i;

	*cause = NULL;
	e->builtin = 1;
	for (i = 0; i < sizeof prot / sizeof prot[0]; i++)
		strs_add(&e->protected, prot[i]);
	if ((ws = realpath(workspace, NULL)) != NULL) {
		p = xasprintf("%s/build/packages", ws);
		if (env_is_dir(p))
			strs_add(&e->ro_given, "build/packages");
		free(p);
		p = xasprintf("%s/gleam.toml", ws);
		if (env_is_file(p)) {
			e->check = xstrdup("gleam check");
			strs_add(&e->ask, "gleam add *");
		}
		free(p);
		free(ws);
	}
	if (env_finish(e, workspace, cause) != 0) {
		env_unref(e);
		return NULL;
	}
	return e;
}

/* Loads a profile or the built-in default (see env.h). */
int
env_load(const char *workspace, const char *name, struct env **out,
    char **cause)
{
	struct env	*e;
	char		*ws, *ini, *json, *path, *data, *why, *rel;
	size_t		 len;
	int		 have_ini, have_json, fd;

	*out = NULL;
	*cause = NULL;
	if (name == NULL)
		name = "default";
	if (!env_name_valid(name)) {
		*cause = xasprintf("'%s' is not a profile name (letters, digits, "
		    ". _ -, at most %d)", name, ENV_NAME_MAX);
		return -1;
	}
	if ((ws = realpath(workspace, NULL)) == NULL) {
		*cause = xasprintf("workspace %s: %s", workspace, strerror(errno));
		return -1;
	}
	ini = xasprintf("%s/%s/%s.ini", ws, ENV_DIR, name);
	json = xasprintf("%s/%s/%s.json", ws, ENV_DIR, name);
	have_ini = access(ini, F_OK) == 0;
	have_json = access(json, F_OK) == 0;
	if (have_ini && have_json) {
		free(ws);
		*cause = xasprintf("both %s and %s exist: keep one", ini, json);
		free(ini);
		free(json);
		return -1;
	}
	if (!have_ini && !have_json) {
		free(ws);
		free(ini);
		free(json);
		if (strcmp(name, "default") == 0)
			return (*out = env_builtin(workspace, cause)) == NULL ? -1 : 0;
		*cause = xasprintf("no profile '%s' in %s/%s", name, workspace,
		    ENV_DIR);
		return -1;
	}
	path = have_ini ? ini : json;
	rel = xasprintf("%s/%s.%s", ENV_DIR, name, have_ini ? "ini" : "json");
	fd = env_open(ws, rel, &why);
	free(rel);
	free(ws);
	if (fd == -1 || env_read_fd(fd, &data, &len, &why) != 0) {
		*cause = xasprintf("%s: %s", path, why);
		free(why);
		free(ini);
		free(json);
		return -1;
	}
	e = env_parse(name, path, data, len, have_ini ? ENV_INI : ENV_JSON, cause);
	free(data);
	if (e != NULL) {
		e->source = xstrdup(path);
		if (env_finish(e, workspace, cause) != 0) {
			env_unref(e);
			e = NULL;
		}
	}
	free(ini);
	free(json);
	if (e == NULL)
		return -1;
	*out = e;
	return 0;
}

/* Orders profile list entries by name. */
static int
env_list_cmp(const void *a, const void *b)
{
	const char	*na = json_string_value(json_object_get(*(json_t *const *)a, "name"));
	const char	*nb = json_string_value(json_object_get(*(json_t *const *)b, "name"));
	int		 r = strcmp(na, nb);

	if (r != 0)
		return r;
	return strcmp(json_string_value(json_object_get(*(json_t *const *)a,
	    "format")), json_string_value(json_object_get(*(json_t *const *)b,
	    "format")));
}

/* Lists the profiles of a workspace (see env.h). */
json_t *
env_list(const char *workspace, char **cause)
{
	DIR		*d;
	struct dirent	*de;
	json_t		**items = NULL, *out;
	size_t		 n = 0, i, len;
	char		*dir, *name;
	const char	*fmt;
	int		 have_default = 0;

	*cause = NULL;
	dir = xasprintf("%s/%s", workspace, ENV_DIR);
	if ((d = opendir(dir)) == NULL && errno != ENOENT) {
		*cause = xasprintf("%s: %s", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	while (d != NULL && (de = readdir(d)) != NULL && n < 1024) {
		len = strlen(de->d_name);
		if (len > 4 && strcmp(de->d_name + len - 4, ".ini") == 0)
			fmt = "ini";
		else if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0)
			fmt = "json";
		else
			continue;
		name = xstrndup(de->d_name, len - strlen(fmt) - 1);
		if (env_name_valid(name)) {
			char *file = xasprintf("%s/%s", dir, de->d_name);

			items = xreallocarray(items, n + 1, sizeof *items);
			items[n++] = json_pack("{s:s, s:s, s:s, s:b}", "name", name,
			    "file", file, "format", fmt, "builtin", 0);
			free(file);
			if (strcmp(name, "default") == 0)
				have_default = 1;
		}
		free(name);
	}
	if (d != NULL)
		closedir(d);
	free(dir);
	if (n > 0)
		qsort(items, n, sizeof *items, env_list_cmp);
	out = json_array();
	if (!have_default)
		json_array_append_new(out, json_pack("{s:s, s:n, s:n, s:b}",
		    "name", "default", "file", "format", "builtin", 1));
	for (i = 0; i < n; i++)
		json_array_append_new(out, items[i]);
	free(items);
	return out;
}

/* The profile's name. */
const char *
env_name(const struct env *e)
{
	return e->name;
}

/* The profile file, or NULL for the built-in default. */
const char *
env_source(const struct env *e)
{
	return e->source;
}

/* The workspace's real path. */
const char *
env_workspace(const struct env *e)
{
	return e->workspace;
}

/* The allowed root's real path. */
const char *
env_allowed_root(const struct env *e)
{
	return e->allowed_root;
}

/* The read-only roots that exist (real paths). */
size_t
env_ro_roots(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->ro.v;
	return e->ro.n;
}

/* The protected globs, relative to the allowed root. */
size_t
env_protected(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->protected.v;
	return e->protected.n;
}

/* The command run after edits, or NULL. */
const char *
env_check_command(const struct env *e)
{
	return e->check;
}

/* How many times the agent may try to make the check pass. */
int
env_max_fix_attempts(const struct env *e)
{
	return e->max_fix;
}

/* The autonomy level. */
enum env_autonomy
env_autonomy(const struct env *e)
{
	return e->autonomy;
}

/* The wire name of an autonomy level. */
const char *
env_autonomy_name(enum env_autonomy a)
{
	if ((unsigned)a >= sizeof env_autonomies / sizeof env_autonomies[0])
		return "supervised";
	return env_autonomies[a];
}

/* The command globs that need a human. */
size_t
env_ask_commands(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->ask.v;
	return e->ask.n;
}

/* The command globs always refused. */
size_t
env_deny_commands(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->deny.v;
	return e->deny.n;
}

/* The tools that ask a human in supervised autonomy. */
size_t
env_ask_tools(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->ask_tools.v;
	return e->ask_tools.n;
}

/* The system prompt text. */
const char *
env_system_prompt(const struct env *e)
{
	return e->system;
}

/* The system_file's real path, or NULL. */
const char *
env_system_file(const struct env *e)
{
	return e->system_file;
}

/* The wall-clock limit of a command. */
int
env_timeout_ms(const struct env *e)
{
	return e->timeout_ms;
}

/* The output kept from a command. */
size_t
env_max_output_bytes(const struct env *e)
{
	return e->max_output;
}

/* The provider, or NULL for the daemon's choice. */
const char *
env_llm_provider(const struct env *e)
{
	return e->provider;
}

/* The model, or NULL. */
const char *
env_llm_model(const struct env *e)
{
	return e->model;
}

/* The provider URL, or NULL. */
const char *
env_llm_base_url(const struct env *e)
{
	return e->base_url;
}

/* Model calls in one turn, or 0 for the daemon's limit. */
int
env_llm_max_steps(const struct env *e)
{
	return e->max_steps;
}

/* Bytes of one request to the model, or 0 for the daemon's limit. */
size_t
env_llm_max_request_bytes(const struct env *e)
{
	return e->max_request;
}

/* Warnings from loading. */
size_t
env_warnings(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->warnings.v;
	return e->warnings.n;
}

/* The files a reload watches. */
size_t
env_files(const struct env *e, const char *const **v)
{
	*v = (const char *const *)e->files.v;
	return e->files.n;
}

/* Everything, as JSON (env.show). */
json_t *
env_to_json(const struct env *e)
{
	json_t	*o;

	o = json_pack("{s:s, s:b, s:s?, s:s?, s:s?, s:o, s:o, s:s?, s:i, s:s, "
	    "s:o, s:o}",
	    "name", e->name,
	    "builtin", e->builtin,
	    "source", e->source,
	    "workspace", e->workspace,
	    "allowed_root", e->allowed_root,
	    "read_only_roots", strs_json(&e->ro),
	    "protected_files", strs_json(&e->protected),
	    "check_command", e->check,
	    "max_fix_attempts", e->max_fix,
	    "autonomy", env_autonomy_name(e->autonomy),
	    "ask_commands", strs_json(&e->ask),
	    "deny_commands", strs_json(&e->deny));
	if (o != NULL)
		json_object_set_new(o, "ask_tools", strs_json(&e->ask_tools));
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "prompt", json_pack("{s:s?, s:s?}",
	    "system", e->system, "system_file", e->system_file));
	json_object_set_new(o, "exec", json_pack("{s:i, s:I}",
	    "timeout_ms", e->timeout_ms,
	    "max_output_bytes", (json_int_t)e->max_output));
	json_object_set_new(o, "llm", json_pack("{s:s?, s:s?, s:s?}",
	    "provider", e->provider, "model", e->model,
	    "base_url", e->base_url));
	if (e->max_steps > 0)
		json_object_set_new(json_object_get(o, "llm"), "max_steps",
		    json_integer(e->max_steps));
	if (e->max_request > 0)
		json_object_set_new(json_object_get(o, "llm"),
		    "max_request_bytes", json_integer((json_int_t)e->max_request));
	json_object_set_new(o, "files", strs_json(&e->files));
	json_object_set_new(o, "warnings", strs_json(&e->warnings));
	return o;
}

/* The keys that differ between two envs (see env.h). */
json_t *
env_diff(const struct env *a, const struct env *b)
{
	json_t	*d = json_array();

#define DIFF(cond, key) do {						\
	if (!(cond))							\
		json_array_append_new(d, json_string(key));		\
} while (0)
	DIFF(str_equal(a->allowed_root, b->allowed_root), "env.allowed_root");
	DIFF(strs_equal(&a->ro, &b->ro), "env.read_only_roots");
	DIFF(strs_equal(&a->protected, &b->protected), "env.protected_files");
	DIFF(str_equal(a->check, b->check), "env.check_command");
	DIFF(a->max_fix == b->max_fix, "env.max_fix_attempts");
	DIFF(a->autonomy == b->autonomy, "env.autonomy");
	DIFF(strs_equal(&a->ask, &b->ask), "env.ask_commands");
	DIFF(strs_equal(&a->deny, &b->deny), "env.deny_commands");
	DIFF(strs_equal(&a->ask_tools, &b->ask_tools), "env.ask_tools");
	DIFF(str_equal(a->system, b->system), "prompt.system");
	DIFF(str_equal(a->system_file, b->system_file), "prompt.system_file");
	DIFF(a->timeout_ms == b->timeout_ms, "exec.timeout_ms");
	DIFF(a->max_output == b->max_output, "exec.max_output_bytes");
	DIFF(str_equal(a->provider, b->provider), "llm.provider");
	DIFF(str_equal(a->model, b->model), "llm.model");
	DIFF(str_equal(a->base_url, b->base_url), "llm.base_url");
	DIFF(a->max_steps == b->max_steps, "llm.max_steps");
	DIFF(a->max_request == b->max_request, "llm.max_request_bytes");
#undef DIFF
	return d;
}

/* Fills a sandbox config from an env (pointers borrowed). */
void
env_sandbox_config(const struct env *e, struct sandbox_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->root = e->allowed_root;
	cfg->ro_roots = (const char *const *)e->ro.v;
	cfg->nro = e->ro.n;
	cfg->protected = (const char *const *)e->protected.v;
	cfg->nprotected = e->protected.n;
}

/* Creates the sandbox an env describes. */
struct sandbox *
env_sandbox(const struct env *e, char **cause)
{
	struct sandbox_config	 cfg;
	struct sandbox		*sb;

	if (!e->finished) {
		*cause = xstrdup("the profile was not checked against a workspace");
		return NULL;
	}
	env_sandbox_config(e, &cfg);
	if ((sb = sandbox_create(&cfg, cause)) == NULL)
		return NULL;
	/* The root as opened, not as checked: it must still be inside. */
	if (!pathgate_is_under(e->workspace, sandbox_root_path(sb, 0),
	    PATHGATE_UNIX)) {
		*cause = xasprintf("allowed_root %s moved outside the workspace "
		    "(it is now %s)", e->allowed_root, sandbox_root_path(sb, 0));
		sandbox_free(sb);
		return NULL;
	}
	return sb;
}
