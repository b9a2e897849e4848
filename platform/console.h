/*
 * The terminal a person types at, as the REPL (gbr) needs it: what the
 * terminal is (its size, whether it takes colours), writing to it, the
 * line editor with its prompt and the output written above that prompt,
 * the keys that are not lines (Ctrl-C, a closed terminal, a new size), and
 * running the person's editor or pager on it. gbr's files say what a line
 * or a key means; this interface only gets them and draws.
 *
 * One file set per system, chosen by Makefile.am: console-unix.c and
 * console-edit-unix.c (termios, libedit, signals, sh); console-win.c,
 * console-read-win.c and console-edit-win.c (the Win32 console: its own
 * cooked mode edits the line, read on a thread and handed to the poll
 * loop through a socket, since WSAPoll waits on sockets only). A process
 * has one terminal, so the state is each file's own; nothing here is an
 * object.
 *
 * What the two differ in, on purpose: Unix has Alt-Enter, Ctrl-J and
 * bracketed paste for lines held without being sent, and a history file;
 * the Windows console has neither, and keeps its own history (Up, F7) for
 * as long as the window lives. Everything written goes out as it is given:
 * the caller escapes what came from the model or the daemon (render.c).
 */
#ifndef GBR_CONSOLE_H
#define GBR_CONSOLE_H

#include <sys/types.h>

#include <stddef.h>

/* Whether both standard input and output are the terminal. */
int	 console_is_terminal(void);
/*
 * Set-up that cannot wait for the daemon's answer, before anything is
 * read (Unix: the terminal stops turning CR into NL, so an Enter typed
 * while gbr connects stays an Enter; Windows: UTF-8 output). Undone at
 * exit.
 */
void	 console_early(void);
/*
 * Whether colour sequences may be written to standard output (asked once
 * the caller knows it is a terminal and NO_COLOR is unset). Unix: yes;
 * Windows: if the console takes virtual-terminal sequences, which this
 * turns on (undone at exit).
 */
int	 console_colors(void);
/* The terminal's columns and rows. Returns 0, or -1 if it has no size. */
int	 console_size(int *cols, int *rows);
/* Writes text as it is to standard output (UTF-8; flushed by console_flush). */
void	 console_write(const char *, size_t);
void	 console_flush(void);
/* Turns the terminal's bracketed paste on or off (nothing where there is none). */
void	 console_paste_mode(int on);

/* What console_catch reports. */
#define CONSOLE_SIG_INT		1	/* Ctrl-C */
#define CONSOLE_SIG_HUP		2	/* the terminal went away, or "stop" */
#define CONSOLE_SIG_WINCH	3	/* the terminal's size changed */
/*
 * Called for each of them; on Unix from a signal handler (so it may only
 * set a volatile sig_atomic_t), on Windows from the console's own thread.
 */
typedef void	(*console_sig_cb)(int);
/*
 * Catches them. Returns a descriptor that becomes readable after each
 * (for transport_poll; emptied with console_catch_drain), or -1 with
 * *cause (the caller frees it).
 */
int	 console_catch(console_sig_cb, char **cause);
void	 console_catch_drain(void);

/*
 * Standard input as the poll loop waits on it: a descriptor for
 * transport_poll, or -1 with *cause. Without a line editor (input that is
 * not a terminal) its bytes come from console_input_read (0 at its end).
 * Unix: standard input itself; Windows: a socket a thread fills.
 */
int	 console_input_fd(char **cause);
ssize_t	 console_input_read(void *, size_t);

/* What the prompt asks for (struct console_ops' asking). */
#define CONSOLE_ASK_NONE	0	/* nothing: lines are messages */
#define CONSOLE_ASK_LINE	1	/* a question answered by a line */
#define CONSOLE_ASK_KEYS	2	/* ... or by one of answer_keys alone */

/* What the editor asks of its caller (copied by console_edit_open). */
struct console_ops {
	/* The prompt now; borrowed, kept the same until the next call. */
	const char	*(*prompt)(void *);
	/* What it asks (CONSOLE_ASK_*). */
	int		 (*asking)(void *);
	/* The keys that answer a CONSOLE_ASK_KEYS question at once. */
	const char	*answer_keys;
	void		*arg;
};

/* A line the person ended (console_edit_read). */
struct console_line {
	char	*text;		/* the line (new), without its newline */
	char	*rest;		/* a paste's lines after it (new), or NULL */
	int	 block;		/* ended without sending (Alt-Enter, Ctrl-J, a paste) */
	size_t	 lost;		/* bytes of a paste too long to take, left out */
};

/* What console_edit_read returns. */
#define CONSOLE_NONE	0	/* no line yet */
#define CONSOLE_LINE	1	/* a line (*in) */
#define CONSOLE_EOF	2	/* Ctrl-D (Windows: or Ctrl-Z) on an empty line */

/*
 * Sets up the line editor on the terminal, with the history kept in
 * histfile when it is not NULL (Unix; the Windows console keeps its own).
 */
void	 console_edit_open(const struct console_ops *, const char *histfile);
/* Ends it: the history saved, the terminal as it was. */
void	 console_edit_close(const char *histfile);
/* Shows the prompt and reads keys; off: the line ended, keys wait. */
void	 console_edit_on(void);
void	 console_edit_off(void);
/*
 * Reads what the terminal has (call it when console_input_fd is readable,
 * or console_edit_held says so); fills *in for CONSOLE_LINE (the caller
 * frees text and rest). in->lost may be set whatever it returns.
 */
int	 console_edit_read(struct console_line *in);
/*
 * Whether input was already taken from the terminal (while output was
 * written) and waits for console_edit_read: the loop must not wait.
 */
int	 console_edit_held(void);
/*
 * Output above the prompt: begin takes the prompt and the half-typed line
 * off the screen and puts the cursor where output goes on (at out_col of
 * the line above when that line is unfinished); end puts them back under
 * the output.
 */
void	 console_out_begin(int out_col);
void	 console_out_end(int out_col);
/*
 * Between console_out_begin and console_out_end: replaces the line being
 * typed with text (NULL: empty); *old (if old is not NULL) gets what was
 * there (new), or NULL if it was empty.
 */
void	 console_set_line(const char *text, char **old);
/* Ctrl-C at the prompt: drops a half-typed line (1), or says there was none (0). */
int	 console_drop_line(void);
/* Adds a line to the history. */
void	 console_history_add(const char *);
/* The terminal's size changed (after CONSOLE_SIG_WINCH). */
void	 console_resize(void);

/* What console_child_start runs. */
#define CONSOLE_RUN_EDITOR	1	/* prog on the file arg */
#define CONSOLE_RUN_PAGER	2	/* prog with in_fd as its input */
struct console_child;
/*
 * Runs a person's program with the terminal: an editor command (which
 * may hold arguments, "code -w") on the file arg, or a pager reading
 * in_fd; Unix through sh, Windows through cmd.exe. Returns 0 with *child,
 * or -1 with *cause (the caller frees it).
 */
int	 console_child_start(int what, const char *prog, const char *arg,
	    int in_fd, struct console_child **child, char **cause);
/*
 * Whether it ended, without waiting: 1 with *status (its exit status,
 * 128 + N if signal N ended it, -1 if neither) and the child freed; or 0.
 */
int	 console_child_done(struct console_child *, int *status);
/*
 * The line editor's keys, for /help: the start of a paragraph, wrapped at
 * 72 columns, its last line unfinished (no newline).
 */
const char *console_keys_help(void);

/* The editor when neither VISUAL nor EDITOR says one ("vi", "notepad"). */
const char *console_default_editor(void);
/* The pager: $PAGER, else the system's; NULL where none is run (Windows). */
const char *console_pager(void);
/* The folder for files a person's program opens (new string). */
char	*console_tmp_dir(void);

#endif
