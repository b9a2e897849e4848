/*
 * gbrd.conf: parsing and validation with inih, and the live config. inih
 * gives us a line number for every key; we turn every unknown key or bad
 * value into a message with file and line, and never apply half a file.
 */
#include "gbr-config.h"

#include "config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "paths.h"
#include "xmalloc.h"

static struct config	*config_live;

struct config_parse {
	struct config	*cfg;
	const char	*path;
	char		*cause;
};

/* Returns a new config with the built-in defaults. */
struct config *
config_defaults(void)
{
	struct config	*cfg = xcalloc(1, sizeof *cfg);

	cfg->max_line_bytes = 1024 * 1024;
	cfg->client_queue_bytes = 8 * 1024 * 1024;
	cfg->max_clients = 4096;
	cfg->max_input_bytes = 64 * 1024 * 1024;
	cfg->line_timeout_ms = 30000;
	cfg->log_level = LOG_LEVEL_INFO;
	cfg->log_fsync = 1;
	cfg->log_segment_bytes = 64ULL * 1024 * 1024;
	cfg->log_max_bytes = 1024ULL * 1024 * 1024;
	cfg->log_snapshot_bytes = 4ULL * 1024 * 1024;
	cfg->log_commit_delay_us = 0;
	cfg->log_chain = 1;
	cfg->log_chain_every = 1000;
	cfg->session_max = 20000;
	cfg->session_history_messages = 10000;
	cfg->session_history_bytes = 16ULL * 1024 * 1024;
	cfg->session_max_text_bytes = 256 * 1024;
	cfg->session_ring_events = 1024;
	cfg->session_ring_bytes = 1024 * 1024;
	cfg->session_events_memory = 64ULL * 1024 * 1024;
	cfg->session_history_idle = 300;
	cfg->session_history_memory = 256ULL * 1024 * 1024;
	cfg->session_max_attached = 256;
	cfg->session_request_ids = 256;
	cfg->exec_max_timeout_ms = 600000;
	cfg->exec_max_output_bytes = 16 * 1024 * 1024;
	cfg->exec_max_children = 16;
	cfg->exec_max_per_session = 4;
	cfg->exec_max_queued = 64;
	cfg->exec_grace_ms = 2000;
	cfg->exec_max_processes = 512;
	cfg->exec_max_memory_bytes = 4ULL * 1024 * 1024 * 1024;
	cfg->exec_max_file_bytes = 1ULL * 1024 * 1024 * 1024;
	cfg->exec_max_open_files = 1024;
	cfg->exec_landlock = 1;
	cfg->exec_namespaces = 1;
	cfg->exec_seccomp = 1;
	cfg->exec_fork_server = 1;
	cfg->exec_toolchain_reads = 1;
	cfg->exec_cache_max_bytes = 8ULL << 30;
	cfg->approval_expire_after = 86400;
	cfg->approval_max_pending = 1024;
	cfg->llm_connect_timeout_ms = 10000;
	cfg->llm_idle_timeout_ms = 120000;
	cfg->llm_max_response_bytes = 16 * 1024 * 1024;
	cfg->llm_max_request_bytes = 0;
	cfg->llm_max_output_tokens = 8192;
	cfg->llm_max_steps = 50;
	cfg->llm_max_retries = 4;
	cfg->llm_retry_base_ms = 1000;
	cfg->llm_retry_max_ms = 60000;
	return cfg;
}

/* Frees a config. */
void
config_free(struct config *cfg)
{
	size_t	i;

	if (cfg == NULL)
		return;
	free(cfg->path);
	free(cfg->log_signing_key);
	free(cfg->exec_pass_env);
	free(cfg->exec_read_paths);
	free(cfg->exec_helper);
	free(cfg->llm_provider);
	free(cfg->llm_model);
	free(cfg->llm_base_url);
	free(cfg->llm_key_file);
	free(cfg->llm_ollama_url);
	for (i = 0; i < cfg->nprices; i++)
		free(cfg->prices[i].model);
	free(cfg->prices);
	free(cfg);
}

/*
 * Parses a size with an optional K, M or G suffix (powers of 1024) within
 * [min, max]. Returns -1 if it is not one.
 */
static int
config_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char			*end;
	unsigned long long	 v;
	uint64_t		 mult = 1;

	if (*s == '-' || *s == '\0')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': mult = 1024ULL; end++; break;
	case 'm': case 'M': mult = 1024ULL * 1024; end++; break;
	case 'g': case 'G': mult = 1024ULL * 1024 * 1024; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end != '\0' || (v != 0 && mult > UINT64_MAX / v))
		return -1;
	v *= mult;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Parses a boolean (yes/no, true/false, on/off, 1/0). */
static int
config_bool(const char *s, int *out)
{
	if (strcmp(s, "yes") == 0 || strcmp(s, "true") == 0 ||
	    strcmp(s, "on") == 0 || strcmp(s, "1") == 0)
		*out = 1;
	else if (strcmp(s, "no") == 0 || strcmp(s, "false") == 0 ||
	    strcmp(s, "off") == 0 || strcmp(s, "0") == 0)
		*out = 0;
	else
		return -1;
	return 0;
}

/* Parses off, auto or require (enum runner_mode's order). */
static int
config_mode(const char *s, int *out)
{
	if (strcmp(s, "off") == 0)
		*out = 0;
	else if (strcmp(s, "auto") == 0)
		*out = 1;
	else if (strcmp(s, "require") == 0)
		*out = 2;
	else
		return -1;
	return 0;
}

/*
 * Checks a comma-separated list, item by item, with check (which returns
 * a static reason or NULL). Returns a copy without blanks around items, or
 * NULL with *why.
 */
static char *
config_list(const char *value, const char *(*check)(const char *),
    const char **why)
{
	char	*copy, *out, *item, *next, *end;
	size_t	 len = strlen(value), o = 0, n = 0;

	*why = NULL;
	if (len > 4096) {
		*why = "longer than 4096 bytes";
		return NULL;
	}
	copy = xstrdup(value);
	out = xcalloc(1, len + 1);
	for (item = copy; item != NULL; item = next) {
		if ((next = strchr(item, ',')) != NULL)
			*next++ = '\0';
		while (*item == ' ' || *item == '\t')
			item++;
		end = item + strlen(item);
		while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*item == '\0')
			continue;
		if ((*why = check(item)) != NULL || ++n > 64) {
			if (*why == NULL)
				*why = "more than 64 items";
			free(copy);
			free(out);
			return NULL;
		}
		if (o > 0)
			out[o++] = ',';
		memcpy(out + o, item, strlen(item));
		o += strlen(item);
	}
	free(copy);
	return out;
}

/*
 * An environment variable a child may get: a plain name, and nothing that
 * looks like a secret or steers the dynamic loader (the same rule as
 * tool_run_env_name_ok, kept here so gbrd.conf is refused at load).
 */
static const char *
config_env_name(const char *s)
{
	static const char *const bad[] = { "KEY", "TOKEN", "SECRET", "PASS",
	    "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE" };
	char	up[256];
	size_t	i;

	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return "not a variable name";
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= sizeof up - 1 || !((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '_'))
			return "not a variable name";
		up[i] = (s[i] >= 'a' && s[i] <= 'z') ? s[i] - 32 : s[i];
	}
	up[i] = '\0';
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (strstr(up, bad[i]) != NULL)
			return "looks like a secret: secrets never reach a child";
	if (strncmp(up, "LD_", 3) == 0 || strcmp(up, "GLIBC_TUNABLES") == 0 ||
	    strcmp(up, "GCONV_PATH") == 0)
		return "steers the dynamic loader";
	return NULL;
}

/* An absolute folder path without a comma. */
static const char *
config_abs_path(const char *s)
{
	if (!paths_is_absolute(s))
		return "not an absolute path";
	return NULL;
}

/*
 * Parses accept_risks: "none", or a comma-separated list of writes,
 * control and leftovers (runner.h's RUNNER_RISK_*). Returns 0, or -1 with
 * *why (static).
 */
static int
config_risks(const char *value, unsigned *out, const char **why)
{
	static const struct {
		const char	*name;
		unsigned	 bit;
	} names[] = {
		{ "writes", CONFIG_RISK_WRITES },
		{ "control", CONFIG_RISK_CONTROL },
		{ "leftovers", CONFIG_RISK_LEFTOVERS },
	};
	const char	*p = value, *e;
	size_t		 n, i;

	*out = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (strcmp(p, "none") == 0)
		return 0;
	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		for (e = p; *e != '\0' && *e != ',' && *e != ' ' && *e != '\t';
		    e++)
			;
		n = (size_t)(e - p);
		for (i = 0; i < sizeof names / sizeof names[0]; i++)
			if (strlen(names[i].name) == n &&
			    strncmp(names[i].name, p, n) == 0)
				break;
		if (i == sizeof names / sizeof names[0]) {
			*why = "expected none, or a list of writes, control and "
			    "leftovers";
			return -1;
		}
		*out |= names[i].bit;
		p = e;
	}
	return 0;
}

/* One key of [exec]. Returns 1, or 0 with p->cause. */
static int
config_exec(struct config_parse *p, const char *name, const char *value)
{
	struct config	*cfg = p->cfg;
	uint64_t	 v;
	int		 b;
	const char	*want = NULL, *why;
	char		*list;

	if (strcmp(name, "max_timeout_ms") == 0) {
		want = "milliseconds from 100 to 86400000";
		if (config_size(value, 100, 86400000, &v) == 0)
			return cfg->exec_max_timeout_ms = (unsigned)v, 1;
	} else if (strcmp(name, "max_output_bytes") == 0) {
		want = "a size from 1K to 1G";
		if (config_size(value, 1024, 1ULL << 30, &v) == 0)
			return cfg->exec_max_output_bytes = v, 1;
	} else if (strcmp(name, "max_children") == 0) {
		want = "a number from 1 to 1024";
		if (config_size(value, 1, 1024, &v) == 0)
			return cfg->exec_max_children = (unsigned)v, 1;
	} else if (strcmp(name, "max_children_per_session") == 0) {
		want = "a number from 1 to 1024";
		if (config_size(value, 1, 1024, &v) == 0)
			return cfg->exec_max_per_session = (unsigned)v, 1;
	} else if (strcmp(name, "max_queued") == 0) {
		want = "a number from 0 to 100000";
		if (config_size(value, 0, 100000, &v) == 0)
			return cfg->exec_max_queued = (unsigned)v, 1;
	} else if (strcmp(name, "grace_ms") == 0) {
		want = "milliseconds from 10 to 60000";
		if (config_size(value, 10, 60000, &v) == 0)
			return cfg->exec_grace_ms = (unsigned)v, 1;
	} else if (strcmp(name, "max_processes") == 0) {
		want = "a number from 1 to 100000";
		if (config_size(value, 1, 100000, &v) == 0)
			return cfg->exec_max_processes = (unsigned)v, 1;
	} else if (strcmp(name, "max_memory_bytes") == 0) {
		want = "a size from 16M to 1T";
		if (config_size(value, 16 << 20, 1ULL << 40, &v) == 0)
			return cfg->exec_max_memory_bytes = v, 1;
	} else if (strcmp(name, "max_file_bytes") == 0) {
		want = "a size from 1M to 1T";
		if (config_size(value, 1 << 20, 1ULL << 40, &v) == 0)
			return cfg->exec_max_file_bytes = v, 1;
	} else if (strcmp(name, "max_open_files") == 0) {
		want = "a number from 16 to 1048576";
		if (config_size(value, 16, 1048576, &v) == 0)
			return cfg->exec_max_open_files = (unsigned)v, 1;
	} else if (strcmp(name, "landlock") == 0) {
		want = "off, auto or require";
		if (config_mode(value, &b) == 0)
			return cfg->exec_landlock = b, 1;
	} else if (strcmp(name, "namespaces") == 0) {
		want = "off, auto or require";
		if (config_mode(value, &b) == 0)
			return cfg->exec_namespaces = b, 1;
	} else if (strcmp(name, "seccomp") == 0) {
		want = "off, auto or require";
		if (config_mode(value, &b) == 0)
			return cfg->exec_seccomp = b, 1;
	} else if (strcmp(name, "accept_risks") == 0) {
		unsigned	risks;

		if (config_risks(value, &risks, &why) != 0) {
			p->cause = xasprintf("exec.accept_risks = '%s': %s",
			    value, why);
			return 0;
		}
		return cfg->exec_accept_risks = risks, 1;
	} else if (strcmp(name, "fork_server") == 0) {
		want = "off or auto";
		if (config_mode(value, &b) == 0 && b < 2)
			return cfg->exec_fork_server = b, 1;
	} else if (strcmp(name, "toolchain_reads") == 0) {
		want = "off or auto";
		if (config_mode(value, &b) == 0 && b < 2)
			return cfg->exec_toolchain_reads = b, 1;
	} else if (strcmp(name, "cache_max_bytes") == 0) {
		want = "a size from 16M to 16T";
		if (config_size(value, 16 << 20, 1ULL << 44, &v) == 0)
			return cfg->exec_cache_max_bytes = v, 1;
	} else if (strcmp(name, "pass_env") == 0) {
		if ((list = config_list(value, config_env_name, &why)) == NULL) {
			p->cause = xasprintf("exec.pass_env = '%s': %s", value, why);
			return 0;
		}
		free(cfg->exec_pass_env);
		return cfg->exec_pass_env = list, 1;
	} else if (strcmp(name, "read_paths") == 0) {
		if ((list = config_list(value, config_abs_path, &why)) == NULL) {
			p->cause = xasprintf("exec.read_paths = '%s': %s", value, why);
			return 0;
		}
		free(cfg->exec_read_paths);
		return cfg->exec_read_paths = list, 1;
	} else if (strcmp(name, "helper") == 0) {
		want = "an absolute path";
		if (paths_is_absolute(value)) {
			free(cfg->exec_helper);
			return cfg->exec_helper = xstrdup(value), 1;
		}
	}
	if (want == NULL)
		p->cause = xasprintf("unknown key '%s' in [exec]", name);
	else
		p->cause = xasprintf("exec.%s = '%s': expected %s", name, value,
		    want);
	return 0;
}

/* Replaces a string setting. */
static int
config_str(char **slot, const char *value)
{
	free(*slot);
	*slot = xstrdup(value);
	return 1;
}

/* True for an http:// or https:// URL on one line without blanks. */
static int
config_url(const char *v)
{
	return (strncmp(v, "http://", 7) == 0 || strncmp(v, "https://", 8) == 0) &&
	    strlen(v) <= 2048 && strcspn(v, " \t\r\n") == strlen(v);
}

/* One key of [llm] (llm.h). Returns 1, or 0 with p->cause. */
static int
config_llm(struct config_parse *p, const char *name, const char *value)
{
	struct config	*cfg = p->cfg;
	uint64_t	 v;
	const char	*want = NULL;

	if (strcmp(name, "provider") == 0) {
		want = "gemini, openai or anthropic";
		if (strcmp(value, "gemini") == 0 || strcmp(value, "openai") == 0 ||
		    strcmp(value, "anthropic") == 0)
			return config_str(&cfg->llm_provider, value);
	} else if (strcmp(name, "model") == 0) {
		want = "a model name (letters, digits, . _ : / -)";
		if (*value != '\0' && strlen(value) <= 256 &&
		    strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789._:/-") == strlen(value))
			return config_str(&cfg->llm_model, value);
	} else if (strcmp(name, "base_url") == 0) {
		want = "an http:// or https:// URL";
		if (config_url(value))
			return config_str(&cfg->llm_base_url, value);
	} else if (strcmp(name, "key_file") == 0) {
		want = "an absolute path";
		if (paths_is_absolute(value))
			return config_str(&cfg->llm_key_file, value);
	} else if (strcmp(name, "ollama_url") == 0) {
		want = "an http:// URL, or off";
		if (strcmp(value, "off") == 0 || strcmp(value, "no") == 0)
			return config_str(&cfg->llm_ollama_url, "");
		if (config_url(value))
			return config_str(&cfg->llm_ollama_url, value);
	} else if (strcmp(name, "connect_timeout_ms") == 0) {
		want = "milliseconds from 100 to 600000";
		if (config_size(value, 100, 600000, &v) == 0)
			return cfg->llm_connect_timeout_ms = (unsigned)v, 1;
	} else if (strcmp(name, "idle_timeout_ms") == 0) {
		want = "milliseconds from 100 to 3600000";
		if (config_size(value, 100, 3600000, &v) == 0)
			return cfg->llm_idle_timeout_ms = (unsigned)v, 1;
	} else if (strcmp(name, "max_response_bytes") == 0) {
		want = "a size from 64K to 1G";
		if (config_size(value, 64 << 10, 1ULL << 30, &v) == 0)
			return cfg->llm_max_response_bytes = v, 1;
	} else if (strcmp(name, "max_request_bytes") == 0) {
		want = "a size from 16K to 256M";
		if (config_size(value, 16 << 10, 256ULL << 20, &v) == 0)
			return cfg->llm_max_request_bytes = v, 1;
	} else if (strcmp(name, "max_output_tokens") == 0) {
		want = "a number from 16 to 1000000";
		if (config_size(value, 16, 1000000, &v) == 0)
			return cfg->llm_max_output_tokens = (unsigned)v, 1;
	} else if (strcmp(name, "max_steps") == 0) {
		want = "a number from 1 to 10000";
		if (config_size(value, 1, 10000, &v) == 0)
			return cfg->llm_max_steps = (unsigned)v, 1;
	} else if (strcmp(name, "max_retries") == 0) {
		want = "a number from 0 to 100";
		if (config_size(value, 0, 100, &v) == 0)
			return cfg->llm_max_retries = (unsigned)v, 1;
	} else if (strcmp(name, "retry_base_ms") == 0) {
		want = "milliseconds from 1 to 600000";
		if (config_size(value, 1, 600000, &v) == 0)
			return cfg->llm_retry_base_ms = (unsigned)v, 1;
	} else if (strcmp(name, "retry_max_ms") == 0) {
		want = "milliseconds from 1 to 3600000";
		if (config_size(value, 1, 3600000, &v) == 0)
			return cfg->llm_retry_max_ms = (unsigned)v, 1;
	}
	if (want == NULL)
		p->cause = xasprintf("unknown key '%s' in [llm]", name);
	else
		p->cause = xasprintf("llm.%s = '%s': expected %s", name, value,
		    want);
	return 0;
}

/*
 * Parses a price: a plain decimal number of USD per million tokens, finite
 * and not negative. Hex, "inf" and "nan" (which strtod takes) are refused
 * by the character set before strtod sees them.
 */
static int
config_usd(const char *s, size_t len, double *out)
{
	char	buf[64], *end;
	double	v;

	if (len == 0 || len >= sizeof buf || s[0] == '-' ||
	    strspn(s, "0123456789.eE+-") < len)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtod(buf, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0)
		return -1;
	*out = v;
	return 0;
}

/*
 * One line of [prices]: "model = NAME IN OUT". The key is always "model"
 * because inih splits a key at ':' and model names are full of them
 * ("qwen2.5-coder:7b"), so the name goes in the value. Returns 1, or 0
 * with p->cause.
 */
static int
config_prices(struct config_parse *p, const char *name, const char *value)
{
	struct config		*cfg = p->cfg;
	struct config_price	*pr;
	const char		*v = value, *in, *out;
	size_t			 mlen, inlen, outlen, i;
	double			 din, dout;

	if (strcmp(name, "model") != 0) {
		p->cause = xasprintf("unknown key '%s' in [prices] (expected "
		    "model = NAME INPUT OUTPUT)", name);
		return 0;
	}
	mlen = strcspn(v, " \t");
	in = v + mlen + strspn(v + mlen, " \t");
	inlen = strcspn(in, " \t");
	out = in + inlen + strspn(in + inlen, " \t");
	outlen = strcspn(out, " \t");
	if (mlen == 0 || mlen > 256 || strspn(v, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-") < mlen ||
	    config_usd(in, inlen, &din) != 0 ||
	    config_usd(out, outlen, &dout) != 0 ||
	    out[outlen + strspn(out + outlen, " \t")] != '\0') {
		p->cause = xasprintf("prices.model = '%s': expected a model name "
		    "and two prices, USD per million input and output tokens "
		    "(model = NAME 3 15)", value);
		return 0;
	}
	for (i = 0; i < cfg->nprices; i++) {
		if (strlen(cfg->prices[i].model) == mlen &&
		    strncmp(cfg->prices[i].model, v, mlen) == 0) {
			p->cause = xasprintf("prices.model = '%s': %.*s is "
			    "priced twice", value, (int)mlen, v);
			return 0;
		}
	}
	if (cfg->nprices == CONFIG_PRICES_MAX) {
		p->cause = xasprintf("prices.model = '%s': more than %d models",
		    value, CONFIG_PRICES_MAX);
		return 0;
	}
	cfg->prices = xreallocarray(cfg->prices, cfg->nprices + 1,
	    sizeof *cfg->prices);
	pr = &cfg->prices[cfg->nprices++];
	pr->model = xstrndup(v, mlen);
	pr->input = din;
	pr->output = dout;
	return 1;
}

/*
 * inih callback: one key at a time. Returns 0 to stop on the first error;
 * inih then reports that line's number (Debian builds inih without
 * INI_HANDLER_LINENO, so the handler itself does not get it).
 */
static int
config_handler(void *arg, const char *section, const char *name,
    const char *value)
{
	struct config_parse	*p = arg;
	struct config		*cfg = p->cfg;
	uint64_t		 v;
	int			 b;
	const char		*want = NULL;

	if (name == NULL)	/* a section header alone */
		return 1;
	if (strcmp(section, "daemon") == 0) {
		if (strcmp(name, "max_line_bytes") == 0) {
			want = "a size from 1K to 64M";
			if (config_size(value, 1024, 64ULL << 20, &v) == 0)
				return cfg->max_line_bytes = v, 1;
		} else if (strcmp(name, "client_queue_bytes") == 0) {
			want = "a size from 64K to 1G";
			if (config_size(value, 64 << 10, 1ULL << 30, &v) == 0)
				return cfg->client_queue_bytes = v, 1;
		} else if (strcmp(name, "max_clients") == 0) {
			want = "a number from 1 to 1000000";
			if (config_size(value, 1, 1000000, &v) == 0)
				return cfg->max_clients = (unsigned)v, 1;
		} else if (strcmp(name, "max_input_bytes") == 0) {
			want = "a size from 64K to 64G";
			if (config_size(value, 64 << 10, 64ULL << 30, &v) == 0)
				return cfg->max_input_bytes = v, 1;
		} else if (strcmp(name, "line_timeout_ms") == 0) {
			want = "milliseconds from 100 to 3600000";
			if (config_size(value, 100, 3600000, &v) == 0)
				return cfg->line_timeout_ms = (unsigned)v, 1;
		} else if (strcmp(name, "log_level") == 0) {
			want = "error, warn, info or debug";
			if ((b = log_level_parse(value)) != -1)
				return cfg->log_level = b, 1;
		}
	} else if (strcmp(section, "log") == 0) {
		if (strcmp(name, "fsync") == 0) {
			want = "yes or no";
			if (config_bool(value, &b) == 0)
				return cfg->log_fsync = b, 1;
		} else if (strcmp(name, "segment_bytes") == 0) {
			want = "a size from 64K to 4G";
			if (config_size(value, 64 << 10, 4ULL << 30, &v) == 0)
				return cfg->log_segment_bytes = v, 1;
		} else if (strcmp(name, "max_bytes") == 0) {
			want = "a size from 1M to 1T";
			if (config_size(value, 1 << 20, 1ULL << 40, &v) == 0)
				return cfg->log_max_bytes = v, 1;
		} else if (strcmp(name, "snapshot_bytes") == 0) {
			want = "0 or a size from 64K to 1T";
			if (config_size(value, 0, 1ULL << 40, &v) == 0 &&
			    (v == 0 || v >= 64 << 10))
				return cfg->log_snapshot_bytes = v, 1;
		} else if (strcmp(name, "commit_delay_us") == 0) {
			want = "microseconds from 0 to 100000";
			if (config_size(value, 0, 100000, &v) == 0)
				return cfg->log_commit_delay_us = (unsigned)v, 1;
		} else if (strcmp(name, "chain") == 0) {
			want = "yes or no";
			if (config_bool(value, &b) == 0)
				return cfg->log_chain = b, 1;
		} else if (strcmp(name, "chain_every") == 0) {
			want = "a number from 1 to 1000000";
			if (config_size(value, 1, 1000000, &v) == 0)
				return cfg->log_chain_every = (unsigned)v, 1;
		} else if (strcmp(name, "signing_key") == 0) {
			want = "an absolute path";
			if (value[0] == '/') {
				free(cfg->log_signing_key);
				cfg->log_signing_key = xstrdup(value);
				return 1;
			}
		}
	} else if (strcmp(section, "session") == 0) {
		if (strcmp(name, "max_sessions") == 0) {
			want = "a number from 1 to 1000000";
			if (config_size(value, 1, 1000000, &v) == 0)
				return cfg->session_max = (unsigned)v, 1;
		} else if (strcmp(name, "history_messages") == 0) {
			want = "a number from 2 to 1000000";
			if (config_size(value, 2, 1000000, &v) == 0)
				return cfg->session_history_messages = (unsigned)v, 1;
		} else if (strcmp(name, "history_bytes") == 0) {
			want = "a size from 4K to 1G";
			if (config_size(value, 4 << 10, 1ULL << 30, &v) == 0)
				return cfg->session_history_bytes = v, 1;
		} else if (strcmp(name, "max_text_bytes") == 0) {
			want = "a size from 16 to 16M";
			if (config_size(value, 16, 16ULL << 20, &v) == 0)
				return cfg->session_max_text_bytes = v, 1;
		} else if (strcmp(name, "ring_events") == 0) {
			want = "a number from 1 to 1000000";
			if (config_size(value, 1, 1000000, &v) == 0)
				return cfg->session_ring_events = (unsigned)v, 1;
		} else if (strcmp(name, "ring_bytes") == 0) {
			want = "a size from 4K to 1G";
			if (config_size(value, 4 << 10, 1ULL << 30, &v) == 0)
				return cfg->session_ring_bytes = v, 1;
		} else if (strcmp(name, "events_memory_bytes") == 0) {
			want = "a size from 64K to 64G";
			if (config_size(value, 64 << 10, 64ULL << 30, &v) == 0)
				return cfg->session_events_memory = v, 1;
		} else if (strcmp(name, "history_idle") == 0) {
			want = "seconds from 1 to 1000000";
			if (config_size(value, 1, 1000000, &v) == 0)
				return cfg->session_history_idle = (unsigned)v, 1;
		} else if (strcmp(name, "history_memory_bytes") == 0) {
			want = "a size from 0 to 1T";
			if (config_size(value, 0, 1ULL << 40, &v) == 0)
				return cfg->session_history_memory = v, 1;
		} else if (strcmp(name, "max_attached") == 0) {
			want = "a number from 1 to 100000";
			if (config_size(value, 1, 100000, &v) == 0)
				return cfg->session_max_attached = (unsigned)v, 1;
		} else if (strcmp(name, "request_ids") == 0) {
			want = "a number from 1 to 100000";
			if (config_size(value, 1, 100000, &v) == 0)
				return cfg->session_request_ids = (unsigned)v, 1;
		}
	} else if (strcmp(section, "exec") == 0) {
		return config_exec(p, name, value);
	} else if (strcmp(section, "approval") == 0) {
		if (strcmp(name, "expire_after") == 0) {
			want = "seconds from 0 (never) to 31536000";
			if (config_size(value, 0, 31536000, &v) == 0)
				return cfg->approval_expire_after = (unsigned)v, 1;
		} else if (strcmp(name, "max_pending") == 0) {
			want = "a number from 1 to 100000";
			if (config_size(value, 1, 100000, &v) == 0)
				return cfg->approval_max_pending = (unsigned)v, 1;
		}
	} else if (strcmp(section, "llm") == 0) {
		return config_llm(p, name, value);
	} else if (strcmp(section, "prices") == 0) {
		return config_prices(p, name, value);
	} else {
		p->cause = xasprintf("unknown section [%s]", section);
		return 0;
	}
	if (want == NULL)
		p->cause = xasprintf("unknown key '%s' in [%s]", name, section);
	else
		p->cause = xasprintf("%s.%s = '%s': expected %s", section,
		    name, value, want);
	return 0;
}

/* Parses a config file. */
struct config *
config_load(const char *path, char **cause)
{
	struct config_parse	 p;
	FILE			*f;
	int			 r;

	*cause = NULL;
	memset(&p, 0, sizeof p);
	p.cfg = config_defaults();
	p.path = path;
	if ((f = fopen(path, "re")) == NULL) {
		*cause = xasprintf("%s: %s", path, strerror(errno));
		config_free(p.cfg);
		return NULL;
	}
	r = ini_parse_file(f, config_handler, &p);
	fclose(f);
	if (r != 0 || p.cause != NULL) {
		/* inih returns the line of the first error (ours or its own). */
		*cause = xasprintf("%s:%d: %s", path, r, p.cause != NULL ?
		    p.cause : "syntax error (expected [section] or key = value)");
		free(p.cause);
		config_free(p.cfg);
		return NULL;
	}
	/* One line of the maximum length must fit in the input budget. */
	if (p.cfg->max_input_bytes < p.cfg->max_line_bytes) {
		*cause = xasprintf("%s: daemon.max_input_bytes (%zu) is smaller "
		    "than daemon.max_line_bytes (%zu)", path,
		    p.cfg->max_input_bytes, p.cfg->max_line_bytes);
		config_free(p.cfg);
		return NULL;
	}
	p.cfg->path = xstrdup(path);
	return p.cfg;
}

/* Installs a new live config. */
void
config_set(struct config *cfg)
{
	config_free(config_live);
	config_live = cfg;
}

/* Returns the live config. */
const struct config *
config_get(void)
{
	if (config_live == NULL)
		config_live = config_defaults();
	return config_live;
}

/* Finds a model's price in a config. */
const struct config_price *
config_price(const struct config *cfg, const char *model)
{
	size_t	i;

	if (model == NULL)
		return NULL;
	for (i = 0; i < cfg->nprices; i++)
		if (strcmp(cfg->prices[i].model, model) == 0)
			return &cfg->prices[i];
	return NULL;
}
