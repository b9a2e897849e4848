/*
 * The REPL's terminal on Unix (console.h), but for the line editor
 * (console-edit-unix.c): the tty's size from TIOCGWINSZ, stdio for
 * output, the signals that stand for keys and for the terminal going away
 * (caught with SA_RESTART and turned into a byte on a self-pipe, so that
 * one poll(2) waits for everything), and the editor or pager run through
 * sh with posix_spawn while the caller keeps reading its socket.
 */
#include "gbr-config.h"

#include <sys/ioctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "console.h"
#include "xmalloc.h"

extern char **environ;

/* A program run with the terminal. */
struct console_child {
	pid_t	pid;
};

static int		 cu_sigpipe[2] = { -1, -1 };
static console_sig_cb	 cu_sig_cb;
static struct termios	 cu_tty_orig;

/* Whether stdin and stdout are both a terminal. */
int
console_is_terminal(void)
{
	return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
}

/* At exit: the terminal as the shell left it (el_end restores ours). */
static void
cu_tty_restore(void)
{
	(void)tcsetattr(STDIN_FILENO, TCSANOW, &cu_tty_orig);
}

/*
 * From the start, before the daemon answers: the terminal stops mapping
 * CR to NL, so that an Enter typed while gbr connects is still an Enter
 * when the editor reads it, not the Ctrl-J that ends a line unsent. The
 * shell's settings come back at exit.
 */
void
console_early(void)
{
	struct termios	t;

	if (tcgetattr(STDIN_FILENO, &cu_tty_orig) != 0)
		return;
	t = cu_tty_orig;
	t.c_iflag &= ~(tcflag_t)(ICRNL | INLCR);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
		(void)atexit(cu_tty_restore);
}

/* A terminal takes colour sequences as they are. */
int
console_colors(void)
{
	return 1;
}

/* The terminal's size, from standard output. */
int
console_size(int *cols, int *rows)
{
	struct winsize	ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0)
		return -1;
	*cols = ws.ws_col;
	*rows = ws.ws_row;
	return 0;
}

/* Writes to standard output. */
void
console_write(const char *buf, size_t len)
{
	fwrite(buf, 1, len, stdout);
}

/* Flushes standard output. */
void
console_flush(void)
{
	fflush(stdout);
}

/* Bracketed paste on or off (terminals that know nothing of it ignore it). */
void
console_paste_mode(int on)
{
	fputs(on ? "\033[?2004h" : "\033[?2004l", stdout);
	fflush(stdout);
}

/* Signal handler: tell the caller and wake its loop. */
static void
cu_signal(int sig)
{
	int	saved = errno;
	char	c = 0;

	if (sig == SIGINT)
		cu_sig_cb(CONSOLE_SIG_INT);
	else if (sig == SIGWINCH)
		cu_sig_cb(CONSOLE_SIG_WINCH);
	else
		cu_sig_cb(CONSOLE_SIG_HUP);
	(void)!write(cu_sigpipe[1], &c, 1);
	errno = saved;
}

/* Catches SIGINT, SIGHUP, SIGTERM and SIGWINCH; SIGPIPE is ignored. */
int
console_catch(console_sig_cb cb, char **cause)
{
	struct sigaction	sa;
	int			i;

	if (pipe(cu_sigpipe) != 0) {
		*cause = xasprintf("pipe: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < 2; i++) {
		fcntl(cu_sigpipe[i], F_SETFL, O_NONBLOCK);
		fcntl(cu_sigpipe[i], F_SETFD, FD_CLOEXEC);
	}
	cu_sig_cb = cb;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = cu_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return cu_sigpipe[0];
}

/* Empties the self-pipe. */
void
console_catch_drain(void)
{
	char	drain[64];

	while (read(cu_sigpipe[0], drain, sizeof drain) > 0)
		;
}

/* Standard input is polled as it is. */
int
console_input_fd(char **cause)
{
	(void)cause;
	return STDIN_FILENO;
}

/* Reads standard input. */
ssize_t
console_input_read(void *buf, size_t len)
{
	return read(STDIN_FILENO, buf, len);
}

/*
 * Runs "sh -c CMD sh ARG" with the terminal, stdin from in_fd unless it
 * is -1: for an editor CMD is 'PROG "$1"' (as git does: the variable may
 * hold arguments, so a shell reads it), for a pager PROG itself.
 */
int
console_child_start(int what, const char *prog, const char *arg, int in_fd,
    struct console_child **child, char **cause)
{
	posix_spawnattr_t		 attr;
	posix_spawn_file_actions_t	 fa;
	sigset_t			 def;
	char				*argv[6], *cmd;
	pid_t				 pid;
	int				 r;

	cmd = what == CONSOLE_RUN_EDITOR ? xasprintf("%s \"$1\"", prog) :
	    xstrdup(prog);
	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = cmd;
	argv[3] = (char *)"sh";
	argv[4] = (char *)arg;
	argv[5] = NULL;
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_init(&fa);
	if (in_fd != -1)
		posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
	fflush(stdout);
	r = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(cmd);
	if (r != 0) {
		*cause = xstrdup(strerror(r));
		return -1;
	}
	*child = xcalloc(1, sizeof **child);
	(*child)->pid = pid;
	return 0;
}

/* Whether the child ended (waitpid without waiting). */
int
console_child_done(struct console_child *child, int *status)
{
	pid_t	w;
	int	st;

	if ((w = waitpid(child->pid, &st, WNOHANG)) == child->pid) {
		if (WIFSIGNALED(st))
			*status = 128 + WTERMSIG(st);	/* as a shell says it */
		else if (WIFEXITED(st))
			*status = WEXITSTATUS(st);
		else
			*status = -1;
	} else if (w == -1 && errno != EINTR)
		*status = -1;
	else
		return 0;
	free(child);
	return 1;
}

/* vi, as POSIX has it. */
const char *
console_default_editor(void)
{
	return "vi";
}

/* $PAGER, else less with colours. */
const char *
console_pager(void)
{
	const char	*pager = getenv("PAGER");

	if (pager == NULL || *pager == '\0')
		pager = "less -R";
	return pager;
}

/* $TMPDIR if it is absolute, else /tmp. */
char *
console_tmp_dir(void)
{
	const char	*tmp = getenv("TMPDIR");

	if (tmp == NULL || *tmp != '/')
		tmp = "/tmp";
	return xstrdup(tmp);
}
