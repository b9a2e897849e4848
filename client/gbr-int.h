/*
 * What the files of the REPL (gbr) share, and nothing else sees: the one
 * struct gbr (the program's state, G), its limits, and the functions one
 * file calls in another.
 *
 * Who owns what:
 *   gbr.c            main, the session (attach, reconnect, resync), the
 *                    daemon's replies and events, the poll loop, signals
 *   gbr-term.c       the terminal: the prompt, output above it, reading
 *                    lines, Ctrl-C, running the editor (how a system
 *                    does each is platform/console.h's)
 *   gbr-approvals.c  the pending approvals: showing them, the question at
 *                    the prompt, answering (approve, deny, edit)
 *   gbr-input.c      input of more than one line (the block: Alt-Enter,
 *                    Ctrl-J, a paste)
 *   gbr-cmds.c       the /slash commands (a table; /help is made from it),
 *                    /run and /tool and their answers
 *   gbr-show.c       the tool results shown, numbered for /show; /show;
 *                    the pager for output taller than the terminal
 */
#ifndef GBR_INT_H
#define GBR_INT_H

#include <sys/types.h>

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

#include "render.h"
#include "transport.h"		/* struct pollfd */

#define GBR_LINE_MAX		(1024 * 1024) /* a line read without a terminal */
#define GBR_SHOW_MESSAGES	20	/* history shown when attaching */
#define GBR_HISTORY_MAX		1000	/* --history at most */
#define GBR_QUEUE_MAX		16	/* messages typed while a turn runs */
#define GBR_SPIN_MS		100	/* spinner frame */
#define GBR_CALL_MS		30000	/* longest wait for a reply */
#define GBR_RECONNECT_TRIES	20
#define GBR_DOUBLE_INT_MS	2000	/* two Ctrl-C within this leave */
#define GBR_APPROVALS_MAX	256	/* pending approvals kept here */
#define GBR_MINE_MAX		64	/* approvals answered here, remembered */
#define GBR_DIFF_LINES		40	/* diff lines shown before "... N more" */
#define GBR_DEFER_MAX		(1024 * 1024) /* output kept while an editor runs */
#define GBR_LINE_DEFAULT	(1024 * 1024) /* the daemon's line limit, if unsaid */
#define GBR_TOOLS_MAX		16	/* /tool and /run calls waiting at once */
#define GBR_ARGV_MAX		4096	/* words of a /run command line */
#define GBR_SHOWN_MAX		200	/* tool results /show remembers */
#define GBR_LIVE_LINES		100	/* a run's live output shown, in lines */
#define GBR_LIVE_CALLS		16	/* runs whose live output is counted */

/* What the prompt is asking. */
enum gbr_ask {
	ASK_NONE = 0,		/* nothing: lines are messages */
	ASK_DECISION,		/* [a]pprove / [d]eny / [e]dit / [s]ession */
	ASK_REASON,		/* the reason for a denial */
	ASK_REWIND,		/* undo what /rewind showed? */
};

struct gbr {
	char		*socket;
	char		 dir[PATH_MAX];
	struct client	*cl;
	char		*epoch;
	char		*session;	/* id of the attached session */
	const char	*hist_session;	/* whose history is shown, if not it */
	char		*label;		/* its name, or its id */
	char		*env;
	long long	 last_seq;	/* last event seen */
	size_t		 max_line;	/* the longest request line gbrd takes */
	int		 tty;
	struct render	 rd;
	int		 in_fd;		/* standard input, for the poll loop */
	int		 wake_fd;	/* readable after a signal (console_catch) */

	char		*histfile;
	int		 editing;	/* a prompt is on screen */
	int		 out_col;	/* column of an unfinished output line */
	char		 prompt[160];

	int		 running;
	long long	 turn;
	long long	 turn_start_ms;	/* wall clock */
	unsigned	 spin;
	long long	 sent_turn;	/* the last turn this gbr started */
	long long	 ended_turn;	/* the last turn seen ending */
	char		*my_rid;	/* request_id of the last message sent */

	int		 need_resync;
	int		 need_reconnect;
	int		 show;		/* history shown at start (--history) */
	char		*queue[GBR_QUEUE_MAX];	/* typed while a turn ran */
	int		 nqueue;
	char		*stopped;	/* gbrd said it stops on purpose: why */
	int		 waiting;	/* ... and none answers: wait for one */
	int		 leave;
	int		 hangup;	/* the terminal is gone: write nothing */
	int		 exit_code;
	int		 tool_failed;	/* a /run or /tool failed: exit 4 */
	long long	 last_int_ms;

	char		*ibuf;		/* lines read without a terminal */
	size_t		 ilen;
	int		 ieof;
	int		 idiscard;	/* skipping the rest of an over-long line */

	json_t		*appr;		/* pending approvals, oldest first */
	json_t		*appr_mine;	/* ids answered from here: {id: true} */
	int		 appr_full;	/* said that GBR_APPROVALS_MAX was reached */
	int		 replaying;	/* attached, replay_complete not seen yet */
	char		*ask_id;	/* the approval the prompt asks about */
	enum gbr_ask	 ask;
	json_t		*rewind_ask;	/* the session.rewind asked about */
	long long	 rewind_conv;	/* messages it would drop, or offers to */
	char		*saved_line;	/* the half-typed line, put aside */
	int		 in_editor;	/* an editor has the terminal */
	char		*defer;		/* output held while it does */
	size_t		 defer_len;
	size_t		 defer_lost;
	char		*block;		/* lines typed or pasted, not sent yet */
	size_t		 block_len;
	int		 block_lines;
	char		*paste_rest;	/* a paste's lines after the first */
	FILE		*page;		/* output gathered for the pager */
	char		*page_buf;
	size_t		 page_len;

	struct {
		long long	 id;	/* of the tool.call request */
		char		*what;	/* "/run ls" or "/tool NAME", escaped */
		char		*rid;	/* its request_id */
		char		*call_id; /* from its tool.call event, or NULL */
		int		 live;	/* its output was shown as it came */
		long long	 seq;	/* of its tool.result event, or 0 */
	}		 tools[GBR_TOOLS_MAX];	/* answers awaited */
	int		 ntools;
};


/* Output of the renderer gathered to be written above the prompt at once. */
struct gbr_capture {
	FILE	*f;
	char	*buf;
	size_t	 len;
};

extern struct gbr		 G;
extern volatile sig_atomic_t	 gbr_got_int, gbr_got_hup, gbr_got_winch;

/* gbr.c */
long long	 gbr_now_ms(void);
void		 gbr_drain(void);
void		 gbr_say_error(const json_t *);
json_t		*gbr_call(const char *, json_t *, char *, size_t);
int		 gbr_has_method(const char *);
int		 gbr_attach(const char *, int);
void		 gbr_line(char *);
void		 gbr_message_text(char *);

/* gbr-term.c */
int		 gbr_poll(struct pollfd *, unsigned, int);
int		 gbr_cols(void);
size_t		 gbr_diff_lines(void);
void		 gbr_redraw(void);
void		 gbr_write(const char *, size_t);
void		 gbr_say(const char *, ...) __attribute__((format(__printf__, 1, 2)));
void		 gbr_render(const json_t *, int);
FILE		*gbr_capture(struct gbr_capture *);
void		 gbr_capture_end(struct gbr_capture *);
void		 gbr_set_line(const char *, char **);
int		 gbr_run_child(int, const char *, const char *, int, const char *);
int		 gbr_run_editor(const char *);
const char	*gbr_edit_suffix(const char *, char *, size_t);
void		 gbr_stdin_tty(void);
void		 gbr_stdin_plain(void);
void		 gbr_interrupt(void);
void		 gbr_editor(void);

/* gbr-input.c */
void		 gbr_paste_mode(int);
int		 gbr_block_clear(void);
char		*gbr_block_line(const char *);
char		*gbr_block_take(const char *);

/* gbr-approvals.c */
int		 gbr_appr_find(const char *);
int		 gbr_appr_editable(const json_t *);
int		 gbr_appr_grantable(const json_t *);
void		 gbr_appr_requested(const json_t *);
void		 gbr_appr_resolved(const json_t *);
void		 gbr_appr_announce(void);
void		 gbr_appr_clear(void);
void		 gbr_appr_sync(void);
void		 gbr_ask_update(void);
void		 gbr_approvals_cmd(void);
int		 gbr_resolve(const char *, const char *, json_t *, const char *,
		    const char *);
void		 gbr_edit(const char *);
void		 gbr_approval_show(const char *);
void		 gbr_answer(char *);

/* gbr-cmds.c */
void		 gbr_command(char *);
/* gbr-rewind.c */
void		 gbr_cmd_rewind(char *, char *);
void		 gbr_rewind_answer(char *);
void		 gbr_rewind_prompt(char *, size_t);
void		 gbr_list(void);
void		 gbr_tool_reply(const json_t *);
/* 1 if an event belongs to our own /run or /tool (shown by its answer). */
int		 gbr_tool_event(const json_t *);
/* Forgets slot i of the answers awaited. */
void		 gbr_tool_forget(int);
/* A random request_id (new). */
char		*gbr_request_id(void);
/* Says which provider and model the session's next turn asks. */
void		 gbr_say_model(void);
/* The start-up line naming the project's ecosystem and its check. */
void		 gbr_say_project(void);
/* Forgets the messages queued while a turn ran; says so if there were. */
void		 gbr_queue_clear(void);
void		 gbr_tools_lost(void);

/* gbr-show.c */
/* The number of a tool result about to be shown (new if need be), or 0. */
long long	 gbr_show_tag(const json_t *, int);
long long	 gbr_show_number(const char *, long long);
/* Shows a tool.output event: its call's first GBR_LIVE_LINES lines. */
void		 gbr_show_output(const json_t *);
int		 gbr_show_output_cut(const char *);
void		 gbr_show_cmd(char *, char *);
/* Gathers what gbr_write is given until gbr_page_end, which pages it. */
void		 gbr_page_begin(void);
void		 gbr_page_end(void);

#endif
