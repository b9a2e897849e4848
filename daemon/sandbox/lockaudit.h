/*
 * lockaudit: the check after the commands of a workspace, for what decides
 * the sandbox or needs a human (.gbr_envs, protected files, .git/hooks,
 * .git/config, read-only roots inside the root): a layer of its own,
 * behind the read-only mounts.
 *
 * Where the kernel cannot make a change impossible (no mount namespace:
 * Landlock cannot keep one name in a writable folder from being written;
 * and with one, a path that does not exist yet cannot be bound), the state
 * of each such path is recorded before the first command of a workspace
 * starts and compared once the last one has ended (every process of each
 * run is gone then: namespace or supervisor). What changed is put back as
 * it was, from the recorded bytes; what a command created is taken away;
 * and a new or changed regular file's new bytes are returned so that the
 * caller can put them to a human as an approval. A change that cannot be
 * put back (a file past the byte budget, a folder past the entry budget)
 * is reported as such, never ignored.
 *
 * Every operation on the tree goes through descriptors opened from the
 * root one component at a time without following links, so nothing a
 * command left behind (a link, a folder swapped for a file) can make gbrd
 * write anywhere else.
 *
 * The record is also written to a file (in the state folder), so that a
 * gbrd killed while commands ran puts things back at its next start
 * (lockaudit_recover) before any profile is loaded.
 *
 * Bounds: LOCKAUDIT_ENTRIES entries and LOCKAUDIT_BYTES recorded bytes per
 * workspace, LOCKAUDIT_FILE_MAX bytes per recorded file.
 */
#ifndef GBRD_LOCKAUDIT_H
#define GBRD_LOCKAUDIT_H

#include <jansson.h>

#define LOCKAUDIT_ENTRIES	4096
#define LOCKAUDIT_BYTES		(8 * 1024 * 1024)
#define LOCKAUDIT_FILE_MAX	(1024 * 1024)

struct lockaudit;

/*
 * A record for the tree under root (absolute, real), kept in file (NULL:
 * in memory only). Returns a new record, or NULL with *cause.
 */
struct lockaudit *lockaudit_create(const char *root, const char *file,
		    char **cause);
/*
 * Records path (absolute, under the root) as it is now, with what it
 * holds if it is a folder; a path recorded already keeps its first state.
 * always: even a command a human approved may not change it (.gbr_envs,
 * read-only roots); otherwise an approved command may (lockaudit_finish's
 * exempt). content: keep the bytes of its files to put them back (else
 * only their identity: changes are reported, not undone).
 */
void		 lockaudit_add(struct lockaudit *, const char *path, int always,
		    int content);
/* Writes the record to its file (if it has one). Returns 0 or -1. */
int		 lockaudit_save(struct lockaudit *);
/*
 * Compares, puts back, removes the file. exempt: paths that are not
 * "always" are left as the commands made them. Returns a new array of
 * {path, change: created|modified|removed|replaced|mode, restored: bool,
 * why?: string, proposed?: the new bytes (string, for a regular file
 * created or changed, valid UTF-8 without NUL, at most LOCKAUDIT_FILE_MAX)}.
 */
json_t		*lockaudit_finish(struct lockaudit *, int exempt);
void		 lockaudit_free(struct lockaudit *);
/*
 * At start: puts back what the records left in dir say (a gbrd that died
 * while commands ran), and removes them. Returns the changes found (new
 * array, as lockaudit_finish's, each with "root").
 */
json_t		*lockaudit_recover(const char *dir);

#endif
