/*
 * Unit tests for client/render.c: what people see of session events. The
 * daemon's text is untrusted (an agent wrote it), so escape sequences and
 * control characters must never reach the terminal; colours only when asked.
 */
#include "gbr-config.h"

#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "unit.h"

/* Renders one event (JSON text) into a string the caller frees. */
static char *
show(struct render *r, const char *event, int message)
{
	json_error_t	 jerr;
	json_t		*v = json_loads(event, 0, &jerr);
	char		*buf = NULL;
	size_t		 len = 0;

	r->out = open_memstream(&buf, &len);
	if (v == NULL)
		printf("# bad test JSON: %s\n", jerr.text);
	else if (message)
		render_message(r, v);
	else
		render_event(r, v);
	fclose(r->out);
	json_decref(v);
	return buf;
}

int
main(void)
{
	struct render	 r;
	char		*s;

	memset(&r, 0, sizeof r);
	s = show(&r, "{\"type\":\"message\",\"seq\":2,\"message\":{\"role\":\"user\","
	    "\"content\":\"hi\\nthere\"}}", 0);
	CHECK(strcmp(s, "> hi\n  there\n") == 0, "user message, continuation indented");
	free(s);

	s = show(&r, "{\"type\":\"message\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"evil \\u001b[2J\\u001b]0;title\\u0007 end\"}}", 0);
	CHECK(strchr(s, '\033') == NULL && strchr(s, '\007') == NULL,
	    "escape and bell characters never reach the terminal");
	CHECK(strstr(s, "evil ?[2J?]0;title? end") != NULL, "they show as '?'");
	free(s);

	s = show(&r, "{\"role\":\"user\",\"content\":\"trailing\\n\\n\"}", 1);
	CHECK(strcmp(s, "> trailing\n") == 0, "trailing newlines add no blank lines");
	free(s);

	s = show(&r, "{\"type\":\"message.delta\",\"text\":\"stream\"}", 0);
	CHECK(strcmp(s, "stream") == 0 && r.open_line, "a delta leaves the line open");
	free(s);
	s = show(&r, "{\"type\":\"error\",\"kind\":\"no_provider\",\"message\":\"m\"}", 0);
	CHECK(strcmp(s, "\n! no_provider: m\n") == 0 && !r.open_line,
	    "the next event closes the streamed line first");
	free(s);

	s = show(&r, "{\"type\":\"session.state\",\"state\":\"idle\",\"turn\":3,"
	    "\"outcome\":\"cancelled\"}", 0);
	CHECK(strcmp(s, "* turn 3 cancelled\n") == 0, "cancelled turn");
	free(s);
	s = show(&r, "{\"type\":\"session.state\",\"state\":\"idle\",\"turn\":3,"
	    "\"outcome\":\"no_provider\"}", 0);
	CHECK(strcmp(s, "") == 0, "no_provider end is said by its error event only");
	free(s);
	s = show(&r, "{\"type\":\"session.state\",\"state\":\"interrupted\",\"turn\":4,"
	    "\"reason\":\"daemon died\"}", 0);
	CHECK(strcmp(s, "! turn 4 interrupted: daemon died\n") == 0, "interrupted turn");
	free(s);

	s = show(&r, "{\"role\":\"tool_call\",\"name\":\"read_file\",\"args\":"
	    "{\"path\":\"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}", 1);
	CHECK(strncmp(s, "~ read_file {\"path\":\"", 21) == 0 &&
	    strstr(s, "...\n") != NULL && strlen(s) < 200,
	    "tool calls are one line, cut");
	free(s);

	s = show(&r, "{\"type\":\"replay_complete\",\"seq\":5}", 0);
	CHECK(strcmp(s, "* live\n") == 0, "replay_complete shown by default");
	free(s);
	r.quiet_local = 1;
	s = show(&r, "{\"type\":\"replay_complete\",\"seq\":5}", 0);
	CHECK(strcmp(s, "") == 0, "and hidden when quiet");
	free(s);

	s = show(&r, "{\"type\":\"no.such.type\"}", 0);
	CHECK(strcmp(s, "* no.such.type \n") == 0, "unknown types still show");
	free(s);
	s = show(&r, "{\"seq\":1}", 0);
	CHECK(strcmp(s, "") == 0, "no type, nothing");
	free(s);

	r.color = 1;
	s = show(&r, "{\"type\":\"error\",\"kind\":\"x\",\"message\":\"y\"}", 0);
	CHECK(strcmp(s, "\033[31m! x: y\033[0m\n") == 0, "colour when asked");
	free(s);

	setenv("NO_COLOR", "1", 1);
	CHECK(render_want_color(1) == 0, "NO_COLOR turns colours off");
	setenv("NO_COLOR", "", 1);
	CHECK(render_want_color(-1) == 0, "not a terminal: no colours");
	return unit_done();
}
