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
#ifdef HAVE_SYSLOG_H
#include <syslog.h>
#else
/* No syslog (Windows): LOG_DEST_SYSLOG writes to stderr. */
#define LOG_ERR		3
#define LOG_WARNING	4
#define LOG_INFO	6
#define LOG_DEBUG	7
#define openlog(a, b, c)	((void)0)
#define closelog()	((void)0)
#endif
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char	*log_progname = "gbr";
static enum log_level	 log_level = LOG_LEVEL_INFO;
static enum log_dest	 log_dest = LOG_DEST_STDERR;
static int		 log_journal;
/* Lines held back while a daemon has not detached yet (log_hold). */
#define LOG_HELD_MAX		256
struct log_held {
	enum log_level	 level;
	struct timespec	 ts;
	char		*msg;
};
static int		 log_holding;
static struct log_held	 log_held[LOG_HELD_MAX];
static size_t		 log_nheld;

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

/*
 * Writes one line: the prefix for where stderr goes now (journald reads a
 * priority and adds its own time; a file or terminal gets ours), then msg.
 */
static void
log_emit(enum log_level level, const struct timespec *ts, const char *msg)
{
	char		 line[2048];
	size_t		 off = 0;
	int		 n;
	struct tm	 tm;

#ifdef HAVE_SYSLOG_H
	if (log_dest == LOG_DEST_SYSLOG) {
		syslog(log_syslog_prio[level], "%s", msg);
		return;
	}
#endif
	if (log_journal)
		n = snprintf(line, sizeof line, "<%d>", log_syslog_prio[level]);
	else {
		localtime_r(&ts->tv_sec, &tm);
		n = snprintf(line, sizeof line,
		    "%04d-%02d-%02d %02d:%02d:%02d.%03ld %s[%ld] %s: ",
		    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		    tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000000L, log_progname,
		    (long)getpid(), log_names[level]);
	}
	if (n > 0)
		off = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
	n = snprintf(line + off, sizeof line - off, "%s", msg);
	if (n > 0)
		off += (size_t)n < sizeof line - off ? (size_t)n : sizeof line - off - 1;
	/* Over-long lines are cut, and say so, rather than dropped. */
	if (off >= sizeof line - 1)
		memcpy(line + sizeof line - 5, "...", 3), off = sizeof line - 2;
	line[off++] = '\n';
	(void)!write(STDERR_FILENO, line, off);
}

/* Formats and writes one line if the level is enabled. */
void
log_vwrite(enum log_level level, const char *fmt, va_list ap)
{
	char		 msg[2048];
	int		 saved_errno = errno;
	struct timespec	 ts;
	struct log_held	*h;

	if (level > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	(void)vsnprintf(msg, sizeof msg, fmt, ap);
	if (log_holding && log_nheld < LOG_HELD_MAX &&
	    (h = &log_held[log_nheld])->msg == NULL &&
	    (h->msg = strdup(msg)) != NULL) {
		h->level = level;
		h->ts = ts;
		log_nheld++;
	} else if (!log_holding)
		log_emit(level, &ts, msg);
	errno = saved_errno;
}

/*
 * Holds every line back instead of writing it: a daemon starting in the
 * background must not print on its caller's terminal before it detaches.
 * Past LOG_HELD_MAX lines, later ones are dropped.
 */
void
log_hold(void)
{
	log_holding = 1;
}

/* Writes what was held, as stderr and the destination are now; stops holding. */
void
log_release(void)
{
	size_t	i;

	log_holding = 0;
	for (i = 0; i < log_nheld; i++) {
		log_emit(log_held[i].level, &log_held[i].ts, log_held[i].msg);
		free(log_held[i].msg);
		log_held[i].msg = NULL;
	}
	log_nheld = 0;
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
