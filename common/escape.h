/*
 * Escaping untrusted text for a person to read, the one escaper of the
 * tree: what is seen is what it is, on one line. gbrd escapes an agent's
 * raw path in a refusal with it (sandbox_escape_for_display); the clients
 * escape what a person is asked to approve (render_escaped, which adds
 * reverse video on top).
 *
 * Newline, carriage return and tab are written as \n \r \t (or \u{XXXX}
 * with ESCAPE_CODES; a tab kept as it is with ESCAPE_TAB); the other
 * characters that must not pass for text as \u{XXXX}; bytes that are not
 * UTF-8 as \x{XX}. Which characters those are depends on the flags: by
 * default every control, bidi formatting, invisible or look-alike
 * character (escape_is_hidden); with ESCAPE_PATH only those the path gate
 * refuses in a path.
 */
#ifndef GBR_ESCAPE_H
#define GBR_ESCAPE_H

#include <stddef.h>
#include <stdint.h>

/* Flags of escape_write and escape_string. */
#define ESCAPE_BACKSLASH	0x01	/* show '\' as "\\": paths, names */
#define ESCAPE_TAB		0x02	/* keep tabs as they are: diff lines */
#define ESCAPE_CODES		0x04	/* newline, CR, tab as \u{XXXX} too */
#define ESCAPE_PATH		0x08	/* escape only controls, the line and
					   paragraph separators, bidi formatting,
					   zero-width spaces and U+FEFF */

/* True for the C0 and C1 controls and DEL. */
int	 escape_is_control(uint32_t cp);
/* True for the characters that change the direction of text (Trojan Source). */
int	 escape_is_bidi(uint32_t cp);
/*
 * True for what a person cannot see or tell apart from something else:
 * controls, bidi formatting, zero-width and other invisible characters,
 * the line and paragraph separators, spaces that are not U+0020, tag
 * characters and noncharacters.
 */
int	 escape_is_hidden(uint32_t cp);

/*
 * Receives the escaped text piece by piece: text to write as it is
 * (escape 0) or one escape such as "\u{202E}" (escape 1), which a caller
 * with colours may set apart.
 */
typedef void (*escape_cb)(const char *data, size_t n, int escape, void *arg);

/*
 * Escapes the characters of s that start in its first max bytes (0: all
 * len bytes; the last one may run past max) and hands the result to cb.
 * Returns the number of bytes of s used; what is left out is for the
 * caller to mention in its own words.
 */
size_t	 escape_write(const char *s, size_t len, int flags, size_t max,
	    escape_cb cb, void *arg);
/*
 * The same as a new string the caller frees; *used (if given) gets the
 * number of bytes of s used.
 */
char	*escape_string(const char *s, size_t len, int flags, size_t max,
	    size_t *used);

#endif
