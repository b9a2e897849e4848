/*
 * Logging state: one destination and one level for the whole process.
 * A line is formatted into a bounded buffer and written with one write(2)
 * so that concurrent writers to the same stderr do not interleave.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char	*log_progname = "gbr";
static enum log_level	 log_level = LOG_LEVEL_INFO;
static enum log_dest	 log_dest = LOG_DEST_STDERR;
static int		 log_journal;

static const char *log_names[] = { "error", "warn", "info", "debug" };
static const int log_syslog_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

/* Checks $JOURNAL_STREAM ("dev:ino") against stderr, as sd-journal documents. */
int
log_stderr_is_journal(void)
{
	const char	*s = getenv("JOURNAL_STREAM");
	struct stat	 sb;
	uintmax_t	 dev, ino;

	if (s == NULL || sscanf(s, "%ju:%ju", &dev, &ino) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &sb) != 0)
		return 0;
	return (uintmax_t)sb.st_dev == dev && (uintmax_t)sb.st_ino == ino;
}

/* Sets where lines go; may be called again to change destination. */
void
log_open(const char *progname, enum log_level level, enum log_dest dest)
{
	if (progname != NULL)
		log_progname = progname;
	log_level = level;
	if (log_dest == LOG_DEST_SYSLOG && dest != LOG_DEST_SYSLOG)
		closelog();
	log_dest = dest;
	log_journal = log_stderr_is_journal();
	if (dest == LOG_DEST_SYSLOG)
		openlog(log_progname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Closes syslog if it was open. */
void
log_close(void)
{
	if (log_dest == LOG_DEST_SYSLOG)
		closelog();
}

/* Changes the level at run time (SIGHUP, --log-level). */
void
log_set_level(enum log_level level)
{
	log_level = level;
}

/* Returns the current level. */
enum log_level
log_get_level(void)
{
	return log_level;
}

/* Parses a level name. */
int
log_level_parse(const char *s)
{
	size_t	i;

	for (i = 0; i < sizeof log_names / sizeof log_names[0]; i++) {
		if (strcmp(s, log_names[i]) == 0)
			return (int)i;
	}
	if (strcmp(s, "warning") == 0)
		return LOG_LEVEL_WARN;
	return -1;
}

/* Returns a level's name. */
const char *
log_level_name(enum log_level level)
{
	if ((unsigned)level >= sizeof log_names / sizeof log_names[0])
		return "?";
	return log_names[level];
}

/* Formats and writes one line if the level is enabled. */
void
log_vwrite(enum log_level level, const char *fmt, va_list ap)
{
	char		 line[2048];
	size_t		 off = 0;
	int		 n, saved_errno = errno;
	struct timespec	 ts;
	struct tm	 tm;

	if (level > log_level)
		return;
	if (log_dest == LOG_DEST_SYSLOG) {
		vsyslog(log_syslog_prio[level], fmt, ap);
		errno = saved_errno;
		return;
	}
	if (log_journal) {
		/* journald reads the priority prefix and adds its own time. */
		n = snprintf(line, sizeof line, "<%d>", log_syslog_prio[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof line,
		    "%04d-%02d-%02d %02d:%02d:%02d.%03ld %s[%ld] %s: ",
		    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, log_progname,
		    (long)getpid(), log_names[level]);
	}
	if (n > 0)
		off = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
	n = vsnprintf(line + off, sizeof line - off, fmt, ap);
	if (n > 0)
		off += (size_t)n < sizeof line - off ? (size_t)n : sizeof line - off - 1;
	/* Over-long lines are cut, and say so, rather than dropped. */
	if (off >= sizeof line - 1)
		memcpy(line + sizeof line - 5, "...", 3), off = sizeof line - 2;
	line[off++] = '\n';
	(void)!write(STDERR_FILENO, line, off);
	errno = saved_errno;
}

#define LOG_FN(name, level)				\
void							\
name(const char *fmt, ...)				\
{							\
	va_list	ap;					\
							\
	va_start(ap, fmt);				\
	log_vwrite(level, fmt, ap);			\
	va_end(ap);					\
}
/* One function per level. */
LOG_FN(log_error, LOG_LEVEL_ERROR)
LOG_FN(log_warn, LOG_LEVEL_WARN)
LOG_FN(log_info, LOG_LEVEL_INFO)
LOG_FN(log_debug, LOG_LEVEL_DEBUG)

/* Logs a broken invariant and aborts. */
void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LEVEL_ERROR, fmt, ap);
	va_end(ap);
	abort();
}
