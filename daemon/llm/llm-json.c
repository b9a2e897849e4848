/*
 * What the providers send, read as JSON (llm.h). A model may write a NUL
 * byte in its text, quoting a command's output say; JSON carries it as
 * \u0000, which jansson refuses unless told. Told, it gives strings that
 * hold a NUL, and the providers' code and what comes after them (tool
 * names and ids, a Gemini call's arguments, the answer's text) treat
 * strings as C strings, which a NUL would cut short without a word. So
 * every NUL in a string becomes U+FFFD, the character that stands for one
 * that cannot be shown, as a terminal would show it. A NUL in a member
 * name is still refused: jansson refuses it in any case.
 */
#include "gbr-config.h"

#include <string.h>

#include "llm.h"
#include "xmalloc.h"

#define LLM_JSON_FFFD		"\xef\xbf\xbd"
#define LLM_JSON_FFFD_LEN	3

/* Replaces the NUL bytes of every string in v with U+FFFD. */
static void
llm_json_scrub(json_t *v)
{
	const char	*s, *key;
	char		*buf;
	json_t		*e;
	size_t		 len, i, n;

	if (json_is_string(v)) {
		s = json_string_value(v);
		len = json_string_length(v);
		if (memchr(s, '\0', len) == NULL)
			return;
		buf = xmalloc(len * LLM_JSON_FFFD_LEN + 1);
		for (i = n = 0; i < len; i++) {
			if (s[i] != '\0')
				buf[n++] = s[i];
			else {
				memcpy(buf + n, LLM_JSON_FFFD, LLM_JSON_FFFD_LEN);
				n += LLM_JSON_FFFD_LEN;
			}
		}
		(void)json_string_setn_nocheck(v, buf, n);
		free(buf);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			llm_json_scrub(e);
	} else if (json_is_object(v)) {
		json_object_foreach(v, key, e)
			llm_json_scrub(e);
	}
}

/* A provider's JSON document (see llm.h). */
json_t *
llm_json_parse(const char *data, size_t len, json_error_t *err)
{
	json_t	*j;

	j = json_loadb(data, len, JSON_ALLOW_NUL, err);
	/* Only a \u0000 escape makes a NUL: no walk without one. */
	if (j != NULL && memmem(data, len, "\\u0000", 6) != NULL)
		llm_json_scrub(j);
	return j;
}
