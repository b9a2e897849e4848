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
 *
 * It also owns every other test and bench hook, so that production files
 * read none from the environment: a hook NAME is the variable GBR_TEST_NAME,
 * read when its module asks at start, and each one armed says so in the log.
 */
#ifndef GBRD_FAULT_H
#define GBRD_FAULT_H

#include <stdint.h>

/* Reads GBR_FAULT_FILE once; without it every fault_inject returns 0. */
void	fault_init(void);
/* Returns the errno to simulate at this site, or 0 to do the real thing. */
int	fault_inject(const char *site);
/* Whether the test hook GBR_TEST_<name> is set to 1. */
int	fault_hook_on(const char *name);
/*
 * The test hook GBR_TEST_<name> as a number from min to max, or dflt when it
 * is unset or out of range (that case is logged as ignored).
 */
long	fault_hook_long(const char *name, long min, long max, long dflt);
/* The test hook GBR_TEST_<name> as a string (borrowed), or NULL if unset. */
const char	*fault_hook_str(const char *name);
/*
 * The benchmark probe: GBR_BENCH_LOGGED_FILE names a file of 8-byte slots
 * shared with a benchmark (bench-fanout times "logged -> last client" with
 * it). fault_probe_mark(n) stores the CLOCK_MONOTONIC time in nanoseconds
 * in slot n, if the file has one: one clock read and one store, nothing
 * when unset. The file is mapped by the first call.
 */
void	fault_probe_mark(uint64_t slot);

#endif
