/*
 * Logging with levels, for the daemon and the clients. Lines go to stderr
 * (with a timestamp, or with a "<N>" priority prefix and no timestamp when
 * stderr is the systemd journal) or to syslog. Nothing here knows about
 * libevent. Callers never log API keys or file contents.
 */
#ifndef GBR_LOG_H
#define GBR_LOG_H

#include <stdarg.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

enum log_dest {
	LOG_DEST_STDERR = 0,	/* timestamps unless stderr is the journal */
	LOG_DEST_SYSLOG,
};

void	 log_open(const char *progname, enum log_level, enum log_dest);
void	 log_close(void);
void	 log_set_level(enum log_level);
enum log_level log_get_level(void);
/* Parses "error", "warn", "info" or "debug"; returns -1 if unknown. */
int	 log_level_parse(const char *);
const char *log_level_name(enum log_level);
/* True when stderr is connected to the systemd journal (JOURNAL_STREAM). */
int	 log_stderr_is_journal(void);
/* Holds lines back until log_release writes them to stderr as it is then. */
void	 log_hold(void);
void	 log_release(void);

void	 log_error(const char *, ...) __attribute__((format(__printf__, 1, 2)));
void	 log_warn(const char *, ...) __attribute__((format(__printf__, 1, 2)));
void	 log_info(const char *, ...) __attribute__((format(__printf__, 1, 2)));
void	 log_debug(const char *, ...) __attribute__((format(__printf__, 1, 2)));
void	 log_vwrite(enum log_level, const char *, va_list) __attribute__((format(__printf__, 2, 0)));
/* A broken invariant: logs and aborts. Never for untrusted input. */
void	 fatalx(const char *, ...) __attribute__((format(__printf__, 1, 2), noreturn));

#endif
