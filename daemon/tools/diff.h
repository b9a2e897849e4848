/*
 * Unified diffs of text, line by line, for the approvals a human reads
 * (approval.h): what a write to a protected file would change; and for
 * the results of write_file and edit_file: what a write changed. Pure: no
 * I/O, no loop, so it is unit-tested on its own (tests/unit/test-diff.c).
 *
 * Bounded, since it runs on the event loop on content an agent chose: the
 * common head and tail are cut first; Myers' O((N+M)D) search runs on the
 * middle only while it has at most DIFF_MAX_LINES lines and needs at most
 * DIFF_MAX_EDITS edits (memory O(D^2), at most a few MB); past either cap
 * the middle becomes one replacement (a correct diff, not the shortest
 * one). Output longer than the caller's cap is replaced by a note that
 * says so, in the same "--- a/PATH" form.
 */
#ifndef GBRD_DIFF_H
#define GBRD_DIFF_H

#include <stddef.h>

#define DIFF_CONTEXT	3		/* lines of context around a change */
#define DIFF_MAX_LINES	20000		/* lines of the middle Myers looks at */
#define DIFF_MAX_EDITS	1000		/* edits Myers looks for */
#define DIFF_OUT_MAX	(64 * 1024)	/* the approvals' default cap */

/*
 * The unified diff turning a (alen bytes) into b (blen bytes) for a file
 * at path (shown as a/PATH and b/PATH; a missing old file is simply
 * empty). Text with a NUL byte is "binary" and only its sizes are shown;
 * equal texts give the two header lines and no hunk. A final line without
 * a newline is marked "\ No newline at end of file". Over max_out bytes
 * (0: DIFF_OUT_MAX) the hunks are replaced by a one-line note. Returns a
 * new NUL-terminated string, its length in *len (may be NULL).
 */
char	*diff_unified(const char *path, const char *a, size_t alen,
	    const char *b, size_t blen, size_t max_out, size_t *len);
/*
 * The same, but over max_out bytes the hunks are cut after the last whole
 * line that fits, and *cut is set (else cleared): the head of a long diff,
 * for the results of write_file and edit_file (tool-file-write.c), where a
 * person would rather see the first changes than a note.
 */
char	*diff_unified_head(const char *path, const char *a, size_t alen,
	    const char *b, size_t blen, size_t max_out, size_t *len, int *cut);

#endif
