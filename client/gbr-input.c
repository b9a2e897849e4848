/*
 * Input of more than one line in the REPL: the block.
 *
 * Where the terminal can (platform/console.h), Alt-Enter or Ctrl-J ends a
 * line without sending it, and a paste is taken whole, newlines and all.
 * The lines held so far are the block; Enter sends the block and the line
 * being typed as one message, Ctrl-C drops them. Without this, a pasted
 * stack trace went out as one message per line, each starting a turn.
 */
#include "gbr-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "gbr-int.h"
#include "xmalloc.h"

#define GBR_PASTE_SHOW		12	/* pasted lines echoed before "N more" */

/* Turns bracketed paste on or off, on a terminal that is still there. */
void
gbr_paste_mode(int on)
{
	if (!G.tty || G.hangup)
		return;
	console_paste_mode(on);
}

/* Appends one line to the block (never past GBR_LINE_MAX: then 0). */
static int
gbr_block_add(const char *line, size_t n)
{
	if (n + 1 > GBR_LINE_MAX - G.block_len)
		return 0;
	G.block = xreallocarray(G.block, G.block_len + n + 2, 1);
	memcpy(G.block + G.block_len, line, n);
	G.block_len += n;
	G.block[G.block_len++] = '\n';
	G.block[G.block_len] = '\0';
	G.block_lines++;
	return 1;
}

/* Drops the block (Ctrl-C, leaving); returns how many lines it held. */
int
gbr_block_clear(void)
{
	int	n = G.block_lines;

	free(G.block);
	G.block = NULL;
	G.block_len = 0;
	G.block_lines = 0;
	free(G.paste_rest);
	G.paste_rest = NULL;
	return n;
}

/*
 * A line of a block was ended (G.nl_key): keeps it, and the lines of a
 * paste after it, echoing those (the line itself is on screen already).
 * Returns what is left to type on, or NULL.
 */
char *
gbr_block_line(const char *line)
{
	char	*rest = G.paste_rest, *p, *nl, *left = NULL;
	size_t	 shown = 0, more = 0;
	int	 full = 0;

	G.paste_rest = NULL;
	full = !gbr_block_add(line, strlen(line));
	for (p = rest; !full && p != NULL && (nl = strchr(p, '\n')) != NULL;
	    p = nl + 1) {
		if (!gbr_block_add(p, (size_t)(nl - p))) {
			full = 1;
			break;
		}
		if (shown++ < GBR_PASTE_SHOW)
			gbr_say("%*s> %.*s\n", (int)strlen(G.label), "...",
			    (int)(nl - p), p);
		else
			more++;
	}
	if (more > 0)
		gbr_say("%*s  (%zu more lines pasted)\n", (int)strlen(G.label),
		    "", more);
	if (full)
		gbr_say("! the message is over %d bytes: the lines beyond that "
		    "were left out\n", GBR_LINE_MAX);
	else if (p != NULL && *p != '\0')
		left = xstrdup(p);
	free(rest);
	return left;
}

/*
 * Enter, with a block held: the block and the last line are the message
 * (new), the block is emptied. NULL without a block.
 */
char *
gbr_block_take(const char *line)
{
	char	*text;

	if (G.block == NULL)
		return NULL;
	text = xasprintf("%s%s", G.block, line);
	gbr_block_clear();
	return text;
}
