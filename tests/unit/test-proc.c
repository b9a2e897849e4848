/*
 * Starting gbrd's pieces (platform/proc.h): the running program's folder,
 * finding a program beside it, running a program and reading its exit
 * status with its arguments intact (on Windows they pass through one
 * command line and must be quoted by the C runtime's rules), and the start
 * lock. The program runs itself as the child: --child-args ARGS exits 42
 * when ARGS are child_words.
 */
#include "gbr-config.h"

#include <sys/types.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"
#include "unit.h"
#include "unit-sys.h"
#include "xmalloc.h"

#ifdef _WIN32
#include <shellapi.h>
#endif

/* The arguments --child-args must receive, in order. */
static const char *const child_words[] = { "plain", "two words",
	"quote\"inside", "back\\slash\\", "trail\\\\\"mix", "", "tab\there",
	"end\\", "\\\\server\\share", NULL };

/* The child of test_spawn: its arguments must be child_words. */
static int
child_args(int argc, char **argv)
{
	int	i;

	for (i = 0; child_words[i] != NULL; i++) {
		if (i + 2 >= argc || strcmp(argv[i + 2], child_words[i]) != 0)
			return 1;
	}
	return i + 2 == argc ? 42 : 1;
}

/* A program runs with its arguments intact and its status comes back. */
static void
test_spawn(void)
{
	char	*argv[16], *cause = NULL, *self, *dir;
	size_t	 i;
	int	 r;

	dir = proc_self_dir();
	CHECK(dir != NULL && *dir != '\0', "proc_self_dir: %s",
	    dir != NULL ? dir : "(none)");
	free(dir);
	self = proc_beside_self("test-proc");
	CHECK(self != NULL, "proc_beside_self finds this program");
	if (self == NULL)
		return;
	argv[0] = self;
	argv[1] = (char *)"--child-args";
	for (i = 0; child_words[i] != NULL; i++)
		argv[i + 2] = (char *)child_words[i];
	argv[i + 2] = NULL;
	r = proc_spawn_wait(argv, &cause);
	CHECK(r == 42, "the child got every argument as given (status %d%s%s)",
	    r, cause != NULL ? ": " : "", cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	argv[1] = (char *)"--child-args";
	argv[2] = (char *)"wrong";
	argv[3] = NULL;
	CHECK(proc_spawn_wait(argv, &cause) == 1, "and a status of 1 is 1");
	free(cause);
	cause = NULL;
	argv[0] = (char *)"gbr-no-such-program";
	argv[1] = NULL;
	CHECK(proc_spawn_wait(argv, &cause) == -1 && cause != NULL,
	    "a program that is not there: %s", cause != NULL ? cause : "");
	free(cause);
	free(self);
}

#ifdef _WIN32
/* proc_command_line splits back into the same words. */
static void
test_command_line(void)
{
	const char	*words[] = { "C:\\Program Files\\gbr\\gbrd.exe",
	    "-s", "\\\\.\\pipe\\gbr-a b", "", "a\"b", "c:\\dir\\",
	    "x\\\\\"y", " ", "\\", NULL };
	wchar_t		**out, *w;
	char		 *line, *s;
	int		  n, i, same;

	line = proc_command_line((char *const *)words);
	w = transport_win_wide(line);
	out = CommandLineToArgvW(w, &n);
	same = out != NULL && n == 9;
	for (i = 0; same && i < n; i++) {
		s = transport_win_utf8(out[i]);
		same = strcmp(s, words[i]) == 0;
		if (!same)
			printf("# word %d: [%s] for [%s]\n", i, s, words[i]);
		free(s);
	}
	CHECK(same, "CommandLineToArgvW gives back every word of %s", line);
	LocalFree(out);
	free(w);
	free(line);
}
#endif


/* The start lock is taken, given back, and taken again. */
static void
test_lock(void)
{
	char	*path = test_path(), *cause = NULL;
	int	 r;

	r = proc_start_lock(path, &cause);
	CHECK(r == 0, "the start lock is taken%s%s", cause != NULL ? ": " : "",
	    cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	proc_start_unlock();
	proc_start_unlock();	/* a second time does nothing */
	CHECK(proc_start_lock(path, &cause) == 0, "and taken again once given back");
	free(cause);
	proc_start_unlock();
	test_path_free(path);
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 2 && strcmp(argv[1], "--child-args") == 0)
		return child_args(argc, argv);
	test_spawn();
	test_lock();
#ifdef _WIN32
	test_command_line();
#endif
	return unit_done();
}
