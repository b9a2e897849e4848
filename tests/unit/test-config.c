/*
 * Unit tests for gbrd.conf parsing: defaults, sizes with suffixes, and
 * every error naming the file and line.
 */
#include "gbr-config.h"

#include <unistd.h>

#include "config.h"
#include "log.h"
#include "unit.h"
#include "xmalloc.h"

static char path[] = "/tmp/gbr-test-config-XXXXXX";

/* Writes text to the temp file and parses it. */
static struct config *
load(const char *text, char **cause)
{
	FILE	*f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
	return config_load(path, cause);
}

int
main(void)
{
	struct config	*c;
	char		*cause, want[256];
	int		 fd;

	if ((fd = mkstemp(path)) == -1)
		return 1;
	close(fd);

	c = config_defaults();
	CHECK(c->max_line_bytes == 1024 * 1024 && c->max_clients > 1000,
	    "defaults: 1 MiB lines, over 1000 clients");
	config_free(c);

	c = load("[daemon]\nmax_line_bytes = 2M\nmax_clients = 10\n"
	    "log_level = debug\n[log]\nfsync = no\nmax_bytes = 512MiB\n", &cause);
	CHECK(c != NULL && c->max_line_bytes == 2 * 1024 * 1024 &&
	    c->max_clients == 10 && c->log_level == LOG_LEVEL_DEBUG &&
	    c->log_fsync == 0 && c->log_max_bytes == 512ULL << 20,
	    "values and suffixes parsed");
	config_free(c);

	c = load("[daemon]\nmax_input_bytes = 4M\nline_timeout_ms = 500\n", &cause);
	CHECK(c != NULL && c->max_input_bytes == 4 << 20 &&
	    c->line_timeout_ms == 500, "input budget and line timeout parsed");
	config_free(c);
	c = config_defaults();
	CHECK(c->max_input_bytes >= 64 * c->max_line_bytes &&
	    c->line_timeout_ms == 30000, "defaults: room for 64 lines of the "
	    "maximum, 30 s per line");
	config_free(c);

	c = load("[daemon]\nmax_line_bytes = 2M\nmax_input_bytes = 1M\n", &cause);
	CHECK(c == NULL && strstr(cause, "max_input_bytes (1048576) is smaller "
	    "than daemon.max_line_bytes") != NULL,
	    "a budget that cannot hold one line of the maximum is refused");
	free(cause);

	c = load("[daemon]\nline_timeout_ms = 10\n", &cause);
	CHECK(c == NULL && strstr(cause, "milliseconds from 100") != NULL,
	    "a line timeout under the minimum is refused");
	free(cause);

	c = load("[daemon]\n\nbogus = 1\n", &cause);
	snprintf(want, sizeof want, "%s:3: unknown key 'bogus'", path);
	CHECK(c == NULL && strncmp(cause, want, strlen(want)) == 0,
	    "unknown key names file and line");
	free(cause);

	c = load("[nope]\nx = 1\n", &cause);
	CHECK(c == NULL && strstr(cause, "unknown section [nope]") != NULL,
	    "unknown section refused");
	free(cause);

	c = load("[daemon]\nmax_line_bytes = -5\n", &cause);
	CHECK(c == NULL && strstr(cause, ":2:") != NULL &&
	    strstr(cause, "expected") != NULL, "negative size refused with line");
	free(cause);

	c = load("[daemon]\nmax_line_bytes = 100\n", &cause);
	CHECK(c == NULL, "size under the minimum refused");
	free(cause);

	c = load("[daemon]\nmax_line_bytes = 99999999999999999999999\n", &cause);
	CHECK(c == NULL, "overflowing size refused");
	free(cause);

	c = load("[daemon]\nmax_line_bytes = 1Q\n", &cause);
	CHECK(c == NULL, "unknown suffix refused");
	free(cause);

	c = load("[daemon]\nlog_level = loud\n", &cause);
	CHECK(c == NULL && strstr(cause, "error, warn, info or debug") != NULL,
	    "bad log level names the choices");
	free(cause);

	c = load("this is not ini\n", &cause);
	CHECK(c == NULL && cause != NULL, "syntax error refused");
	free(cause);

	c = config_load("/nonexistent/gbrd.conf", &cause);
	CHECK(c == NULL && strstr(cause, "No such file") != NULL,
	    "missing file says so");
	free(cause);

	c = load("[session]\nmax_sessions = 3\nhistory_messages = 10\n"
	    "history_bytes = 64K\nmax_text_bytes = 1K\nring_events = 5\n"
	    "ring_bytes = 8K\nevents_memory_bytes = 1M\nmax_attached = 2\n"
	    "request_ids = 7\n", &cause);
	CHECK(c != NULL && c->session_max == 3 && c->session_history_messages == 10 &&
	    c->session_history_bytes == 64 << 10 && c->session_max_text_bytes == 1024 &&
	    c->session_ring_events == 5 && c->session_ring_bytes == 8 << 10 &&
	    c->session_events_memory == 1 << 20 && c->session_max_attached == 2 &&
	    c->session_request_ids == 7, "[session] bounds parsed");
	config_free(c);
	c = config_defaults();
	CHECK(c->session_max >= 10000 && c->session_max_attached >= 100 &&
	    c->session_ring_bytes <= c->client_queue_bytes / 2,
	    "[session] defaults: 10000 sessions, 100 clients, a ring that fits a queue");
	config_free(c);
	c = load("[session]\nmax_attached = 0\n", &cause);
	CHECK(c == NULL && strstr(cause, "session.max_attached") != NULL,
	    "[session] zero clients refused");
	free(cause);
	c = load("[session]\nring_events = lots\n", &cause);
	CHECK(c == NULL && strstr(cause, ":2:") != NULL, "[session] bad number refused with line");
	free(cause);

	unlink(path);
	return unit_done();
}
