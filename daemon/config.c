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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
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
	cfg->log_level = LOG_LEVEL_INFO;
	cfg->log_fsync = 1;
	cfg->log_segment_bytes = 64ULL * 1024 * 1024;
	cfg->log_max_bytes = 1024ULL * 1024 * 1024;
	cfg->log_commit_delay_us = 0;
	return cfg;
}

/* Frees a config. */
void
config_free(struct config *cfg)
{
	if (cfg == NULL)
		return;
	free(cfg->path);
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
		} else if (strcmp(name, "commit_delay_us") == 0) {
			want = "microseconds from 0 to 100000";
			if (config_size(value, 0, 100000, &v) == 0)
				return cfg->log_commit_delay_us = (unsigned)v, 1;
		}
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
