/*
 * Fault injection for tests, in the SQLite/jq style: the code that does I/O
 * asks fault_inject("site") right before the real call and, when a test has
 * armed that site, behaves as if the call had failed with the errno given.
 *
 * It is inert unless the environment variable GBR_FAULT_FILE is set when the
 * daemon starts; then that file is re-read at most every 20 ms and holds
 * lines "SITE ERRNO-NAME", e.g. "disklog.write ENOSPC". A site stays armed
 * while its line is in the file; a test removes the file to heal the disk.
 * Sites: disklog.write, disklog.fsync, disklog.create, disklog.snapshot.
 * Safe to call from any thread.
 */
#ifndef GBRD_FAULT_H
#define GBRD_FAULT_H

/* Reads GBR_FAULT_FILE once; without it every fault_inject returns 0. */
void	fault_init(void);
/* Returns the errno to simulate at this site, or 0 to do the real thing. */
int	fault_inject(const char *site);

#endif
