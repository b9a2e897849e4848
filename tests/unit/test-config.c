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

/* [prices]: model = NAME IN OUT, once per model, bounded. */
static void
test_prices(void)
{
	static const char *const bad[] = {
		"model = m 1\n", "model = m\n", "model = m 1 2 3\n",
		"model = m -1 2\n", "model = m 1 -0.5\n", "model = m inf 1\n",
		"model = m nan 1\n", "model = m 0x10 1\n", "model = m 1e999 1\n",
		"model = m 1..2 1\n", "model = m 1$ 1\n", "model = m,x 1 1\n",
		"model = m 1 2e\n", "m:x = 1 2\n",
	};
	const struct config_price	*pr;
	struct config			*c;
	char				*cause, *text, want[256];
	size_t				 i, len, cap;

	c = load("[prices]\nmodel = gpt-4o 2.5 10\n"
	    "model = qwen2.5-coder:7b 0 0\n"
	    "model =  claude-sonnet-4-5\t3   15.00 ; per million\n"
	    "model = tiny 1.5e-1 0.6\n", &cause);
	CHECK(c != NULL && c->nprices == 4, "[prices] four models parsed");
	pr = c != NULL ? config_price(c, "qwen2.5-coder:7b") : NULL;
	CHECK(pr != NULL && pr->input == 0 && pr->output == 0,
	    "[prices] a model name with ':' is kept whole");
	pr = c != NULL ? config_price(c, "claude-sonnet-4-5") : NULL;
	CHECK(pr != NULL && pr->input == 3 && pr->output == 15,
	    "[prices] blanks and an inline comment around the numbers");
	pr = c != NULL ? config_price(c, "tiny") : NULL;
	CHECK(pr != NULL && pr->input == 0.15 && pr->output == 0.6,
	    "[prices] exponent and fraction");
	CHECK(c != NULL && config_price(c, "gpt-4") == NULL &&
	    config_price(c, NULL) == NULL, "[prices] unknown model: no price");
	config_free(c);

	c = config_defaults();
	CHECK(c->nprices == 0 && config_price(c, "gpt-4o") == NULL,
	    "[prices] defaults price nothing");
	config_free(c);

	c = load("[prices]\nmodel = a:1 1 2\n\nmodel = a:1 3 4\n", &cause);
	snprintf(want, sizeof want, "%s:4: prices.model", path);
	CHECK(c == NULL && strncmp(cause, want, strlen(want)) == 0 &&
	    strstr(cause, "a:1 is priced twice") != NULL,
	    "[prices] a model priced twice is refused with its line");
	free(cause);

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		text = xasprintf("[prices]\n%s", bad[i]);
		c = load(text, &cause);
		CHECK(c == NULL && cause != NULL && strstr(cause, ":2:") != NULL,
		    "[prices] refused with its line: %.*s", (int)strlen(bad[i]) - 1,
		    bad[i]);
		free(cause);
		free(text);
	}

	/* CONFIG_PRICES_MAX models load; one more is refused. */
	cap = 64 * (CONFIG_PRICES_MAX + 2);
	text = xmalloc(cap);
	len = (size_t)snprintf(text, cap, "[prices]\n");
	for (i = 0; i < CONFIG_PRICES_MAX; i++)
		len += (size_t)snprintf(text + len, cap - len,
		    "model = m%zu:x 1 2\n", i);
	c = load(text, &cause);
	CHECK(c != NULL && c->nprices == CONFIG_PRICES_MAX &&
	    config_price(c, "m255:x") != NULL, "[prices] %d models load",
	    CONFIG_PRICES_MAX);
	config_free(c);
	snprintf(text + len, cap - len, "model = one-more 1 2\n");
	c = load(text, &cause);
	snprintf(want, sizeof want, "%s:%d:", path, CONFIG_PRICES_MAX + 2);
	CHECK(c == NULL && strncmp(cause, want, strlen(want)) == 0 &&
	    strstr(cause, "more than 256 models") != NULL,
	    "[prices] one model over the bound is refused");
	free(cause);
	free(text);
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
	    "log_level = debug\n[log]\nfsync = no\nmax_bytes = 512MiB\n"
	    "snapshot_bytes = 0\n", &cause);
	CHECK(c != NULL && c->max_line_bytes == 2 * 1024 * 1024 &&
	    c->max_clients == 10 && c->log_level == LOG_LEVEL_DEBUG &&
	    c->log_fsync == 0 && c->log_max_bytes == 512ULL << 20 &&
	    c->log_snapshot_bytes == 0, "values and suffixes parsed");
	config_free(c);
	c = load("[log]\nsnapshot_bytes = 1K\n", &cause);
	CHECK(c == NULL && cause != NULL, "[log] snapshot_bytes under 64K refused");
	free(cause);

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
	    "request_ids = 7\nhistory_idle = 9\nhistory_memory_bytes = 0\n", &cause);
	CHECK(c != NULL && c->session_max == 3 && c->session_history_messages == 10 &&
	    c->session_history_idle == 9 && c->session_history_memory == 0 &&
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

	test_prices();

	unlink(path);
	return unit_done();
}
