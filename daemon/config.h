/*
 * The daemon config (gbrd.conf, INI, parsed with inih). The live config is
 * replaced as a whole on SIGHUP: a new one is parsed and validated first and
 * the old one stays in force if the new one is broken (openbgpd's
 * reconfigure). Other modules read it through config_get(), borrowed.
 */
#ifndef GBRD_CONFIG_H
#define GBRD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct config {
	char	*path;			/* the file read, NULL for built-in defaults */
	/* [daemon] */
	size_t	 max_line_bytes;	/* longest protocol line accepted */
	size_t	 client_queue_bytes;	/* output queued for one client before eviction */
	unsigned max_clients;		/* connections at once */
	int	 log_level;		/* enum log_level */
	/* [log]: the disk log (see disklog.h) */
	int	 log_fsync;		/* durable records are fsynced (else trusted to the OS) */
	uint64_t log_segment_bytes;	/* size at which a segment is closed */
	uint64_t log_max_bytes;		/* disk budget for all segments */
	unsigned log_commit_delay_us;	/* extra wait to gather a group commit */
};

/* Returns a new config with the built-in defaults. */
struct config	*config_defaults(void);
/*
 * Parses a file into a new config (defaults for what it does not set).
 * Unknown sections or keys and bad values are errors naming file and line.
 * Returns NULL and sets *cause on error.
 */
struct config	*config_load(const char *path, char **cause);
void		 config_free(struct config *);
/* Installs a config as the live one (steals it, frees the old one). */
void		 config_set(struct config *);
/* The live config, borrowed. */
const struct config *config_get(void);

#endif
