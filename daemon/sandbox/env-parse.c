/*
 * Parsing environment profiles (see env.h): the INI and JSON front ends
 * and the value checks, which fill a struct env that env.c then checks
 * against the workspace.
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

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "env-int.h"
#include "escape.h"
#include "pathgate.h"
#include "utf8.h"
#include "xmalloc.h"

#if defined(HAVE_DECL_INI_MAX_LINE) && HAVE_DECL_INI_MAX_LINE && \
    HAVE_DECL_INI_ALLOW_REALLOC && HAVE_DECL_INI_USE_STACK
#define ENV_INI_GROWS	1
#else
#define ENV_INI_GROWS	0
#endif

const struct env_keydef env_keys[K__COUNT] = {
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
	[K_EXTENDS] =		{ "env", "extends", 0 },
};

static const char *const env_sections[] = { "env", "prompt", "exec", "llm" };

const char *const env_autonomies[ENV_FULL + 1] = {
	[ENV_READ_ONLY] = "read-only",
	[ENV_SUPERVISED] = "supervised",
	[ENV_FULL] = "full",
};

/* Records the first error, with the current line. Returns -1. */
static int __attribute__((format(__printf__, 2, 3)))
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
		if ((n = utf8_decode(s + i, len - i, &cp)) == 0) {
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
		if ((n = utf8_decode(s + i, len - i, &cp)) == 0 ||
		    cp == 0 || pathgate_is_control(cp) || escape_is_bidi(cp))
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

	if (pathgate_check_bytes(v, len, PATHGATE_HOST, &why) != 0) {
		env_error(p, "%s '%.*s': %s", env_keys[k].name,
		    (int)(len > 200 ? 200 : len), v, why.reason);
		return NULL;
	}
	if (pathgate_is_absolute(v, len, PATHGATE_HOST))
		n = pathgate_normalize_absolute(v, len, PATHGATE_HOST, &why);
	else
		n = pathgate_normalize(v, len, PATHGATE_HOST, &why);
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
	case K_EXTENDS:
		if (strcmp(v, "builtin") != 0)
			return env_error(p, "extends: only 'builtin' (the "
			    "built-in default, with this file's keys over it)");
		e->extends = 1;
		return 0;
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
		    "[prompt], [exec], [llm] or [mcp.NAME])", section);
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
	if (strncmp(section, "mcp.", 4) == 0) {
		const char *why = env_mcp_ini(p->env, section + 4, name, value);

		p->prev_key = -1;
		if (why != NULL)
			env_error(p, "[%s] %s: %s", section, name, why);
		return why == NULL;
	}
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
		snprintf(num, sizeof num, "%lld",
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
		if (strcmp(sname, "mcp") == 0) {
			char *why;

			if ((r = env_mcp_json(p->env, sec, &why)) != 0) {
				env_error(p, "%s", why);
				free(why);
				break;
			}
			continue;
		}
		if (!env_section_known(sname)) {
			r = env_error(p, "unknown section [%s] (expected [env], "
			    "[prompt], [exec], [llm] or mcp)", sname);
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
	if (r == 0 && p.cause == NULL) {
		char *why;

		if (env_mcp_finish(p.env, &why) != 0) {
			p.line = 0;
			r = env_error(&p, "%s", why);
			free(why);
		}
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
