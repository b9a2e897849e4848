/*
 * Starting gbrd on Windows (proc.h). The start lock is a named mutex
 * derived from the pipe name (there is no socket folder to put a lock file
 * in); it is owned by the thread that takes it, and a client that dies
 * holding it leaves it abandoned, which the next one takes as free. gbrd
 * is run with CreateProcessW, from a command line quoted so that
 * CommandLineToArgvW and the C runtime give back the same words, with no
 * window and no handle inherited (nothing of ours reaches the daemon).
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "proc.h"
#include "transport-win.h"
#include "xmalloc.h"

/* How long a client waits for another one starting gbrd. */
#define PROC_LOCK_MS	15000
/* The longest module path Windows has (UTF-16 units). */
#define PROC_PATH_MAX	32768

static HANDLE	proc_lock;

/* Takes the start mutex for path's pipe, waiting a bounded time. */
int
proc_start_lock(const char *path, char **cause)
{
	wchar_t	*obj;
	char	*why;
	HANDLE	 m;
	DWORD	 r;

	*cause = NULL;
	if ((obj = transport_win_object_name(path, "start")) == NULL) {
		*cause = xasprintf("%s is not a pipe name (\\\\.\\pipe\\NAME)",
		    path);
		return -1;
	}
	m = CreateMutexW(NULL, FALSE, obj);
	free(obj);
	if (m == NULL) {
		why = transport_win_strerror(GetLastError());
		*cause = xasprintf("cannot make the start lock for %s: %s", path,
		    why);
		free(why);
		return -1;
	}
	/* WAIT_ABANDONED: its last owner died; the lock is ours now. */
	r = WaitForSingleObject(m, PROC_LOCK_MS);
	if (r != WAIT_OBJECT_0 && r != WAIT_ABANDONED) {
		*cause = xasprintf("timed out waiting for another client "
		    "starting gbrd on %s", path);
		CloseHandle(m);
		return -1;
	}
	proc_lock = m;
	return 0;
}

/* Releases the start mutex. */
void
proc_start_unlock(void)
{
	if (proc_lock == NULL)
		return;
	ReleaseMutex(proc_lock);
	CloseHandle(proc_lock);
	proc_lock = NULL;
}

/* Whether a word must be quoted on a command line. */
static int
proc_needs_quotes(const char *s)
{
	return *s == '\0' || strpbrk(s, " \t\n\v\"") != NULL;
}

/*
 * Appends one word by the C runtime's rules: inside quotes, backslashes
 * are literal unless they come before a quote, where each one is doubled
 * and the quote itself escaped.
 */
static char *
proc_quote(char *p, const char *s)
{
	size_t	bs, i;

	if (!proc_needs_quotes(s)) {
		memcpy(p, s, strlen(s));
		return p + strlen(s);
	}
	*p++ = '"';
	for (;;) {
		for (bs = 0; *s == '\\'; s++)
			bs++;
		if (*s == '\0' || *s == '"') {
			/* Doubled before the closing quote or an escaped one. */
			for (i = 0; i < 2 * bs; i++)
				*p++ = '\\';
			if (*s == '\0')
				break;
			*p++ = '\\';
			*p++ = *s++;
			continue;
		}
		for (i = 0; i < bs; i++)
			*p++ = '\\';
		*p++ = *s++;
	}
	*p++ = '"';
	return p;
}

/* Makes the command line for argv (see proc.h). */
char *
proc_command_line(char *const argv[])
{
	size_t	 len = 1, i;
	char	*line, *p;

	/* At worst each byte doubles, plus quotes and a blank per word. */
	for (i = 0; argv[i] != NULL; i++) {
		if (strlen(argv[i]) > (SIZE_MAX - len - 3) / 2)
			return NULL;
		len += 2 * strlen(argv[i]) + 3;
	}
	p = line = xmalloc(len);
	if (argv[0] != NULL) {
		/*
		 * The program's name is split by other rules: up to the next
		 * quote, backslashes literal. Paths hold no quotes.
		 */
		*p++ = '"';
		for (i = 0; argv[0][i] != '\0'; i++) {
			if (argv[0][i] != '"')
				*p++ = argv[0][i];
		}
		*p++ = '"';
		for (i = 1; argv[i] != NULL; i++) {
			*p++ = ' ';
			p = proc_quote(p, argv[i]);
		}
	}
	*p = '\0';
	return line;
}

/*
 * Starts app with command line cmd, no window, its standard error ours
 * (so that what it says of a failed start reaches the person who ran
 * us) and nothing else inherited: the handle list holds that one handle
 * alone, so a gbrd started this way keeps no pipe of ours open after it
 * returns. Falls back to inheriting nothing where the list cannot be made.
 */
static BOOL
proc_create_with_stderr(wchar_t *app, wchar_t *cmd, PROCESS_INFORMATION *pi)
{
	STARTUPINFOEXW	 si;
	HANDLE		 err = GetStdHandle(STD_ERROR_HANDLE), dup = NULL;
	SIZE_T		 size = 0;
	BOOL		 ok = FALSE, listed = FALSE;

	memset(&si, 0, sizeof si);
	si.StartupInfo.cb = sizeof si;
	if (err != NULL && err != INVALID_HANDLE_VALUE &&
	    DuplicateHandle(GetCurrentProcess(), err, GetCurrentProcess(), &dup,
	    0, TRUE, DUPLICATE_SAME_ACCESS)) {
		InitializeProcThreadAttributeList(NULL, 1, 0, &size);
		si.lpAttributeList = xmalloc(size);
		listed = InitializeProcThreadAttributeList(si.lpAttributeList, 1,
		    0, &size) && UpdateProcThreadAttribute(si.lpAttributeList, 0,
		    PROC_THREAD_ATTRIBUTE_HANDLE_LIST, &dup, sizeof dup, NULL, NULL);
	}
	if (listed) {
		si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
		si.StartupInfo.hStdError = dup;
		ok = CreateProcessW(app, cmd, NULL, NULL, TRUE,
		    EXTENDED_STARTUPINFO_PRESENT | CREATE_NO_WINDOW |
		    CREATE_UNICODE_ENVIRONMENT, NULL, NULL, &si.StartupInfo, pi);
	}
	if (si.lpAttributeList != NULL) {
		DeleteProcThreadAttributeList(si.lpAttributeList);
		free(si.lpAttributeList);
	}
	if (dup != NULL)
		CloseHandle(dup);
	if (!listed) {
		memset(&si, 0, sizeof si);
		si.StartupInfo.cb = sizeof si.StartupInfo;
		ok = CreateProcessW(app, cmd, NULL, NULL, FALSE, CREATE_NO_WINDOW |
		    CREATE_UNICODE_ENVIRONMENT, NULL, NULL, &si.StartupInfo, pi);
	}
	return ok;
}

/* Runs a program and waits for its exit status. */
int
proc_spawn_wait(char *const argv[], char **cause)
{
	PROCESS_INFORMATION	 pi;
	wchar_t			*app = NULL, *cmd;
	char			*line, *why;
	DWORD			 code;
	BOOL			 ok;

	*cause = NULL;
	if ((line = proc_command_line(argv)) == NULL ||
	    (cmd = transport_win_wide(line)) == NULL) {
		free(line);
		*cause = xasprintf("cannot start %s: bad arguments", argv[0]);
		return -1;
	}
	free(line);
	/* A bare name is searched for (with ".exe") the way Windows does. */
	if (strpbrk(argv[0], "\\/") != NULL &&
	    (app = transport_win_wide(argv[0])) == NULL) {
		free(cmd);
		*cause = xasprintf("cannot start %s: bad name", argv[0]);
		return -1;
	}
	ok = proc_create_with_stderr(app, cmd, &pi);
	free(app);
	free(cmd);
	if (!ok) {
		why = transport_win_strerror(GetLastError());
		*cause = xasprintf("cannot start %s: %s", argv[0], why);
		free(why);
		return -1;
	}
	CloseHandle(pi.hThread);
	WaitForSingleObject(pi.hProcess, INFINITE);
	if (!GetExitCodeProcess(pi.hProcess, &code))
		code = (DWORD)-1;
	CloseHandle(pi.hProcess);
	if (code > 255) {
		/* An exception (0xC0000005...) or TerminateProcess. */
		*cause = xasprintf("%s ended with status 0x%lx", argv[0],
		    (unsigned long)code);
		return -1;
	}
	return (int)code;
}

/* The running program's folder, from GetModuleFileNameW. */
char *
proc_self_dir(void)
{
	wchar_t	*buf;
	char	*path, *sep;
	DWORD	 n;

	buf = xreallocarray(NULL, PROC_PATH_MAX, sizeof *buf);
	n = GetModuleFileNameW(NULL, buf, PROC_PATH_MAX);
	if (n == 0 || n >= PROC_PATH_MAX) {
		free(buf);
		return NULL;
	}
	buf[n] = L'\0';
	path = transport_win_utf8(buf);
	free(buf);
	sep = strrchr(path, '\\');
	if (sep == NULL || (strrchr(path, '/') != NULL && strrchr(path, '/') > sep))
		sep = strrchr(path, '/');
	if (sep == NULL) {
		free(path);
		return NULL;
	}
	*sep = '\0';
	return path;
}

/* The path of a program beside the running one, if it is there. */
char *
proc_beside_self(const char *name)
{
	wchar_t	*w;
	char	*dir, *path;
	DWORD	 attr;

	if ((dir = proc_self_dir()) == NULL)
		return NULL;
	path = xasprintf("%s\\%s.exe", dir, name);
	free(dir);
	if ((w = transport_win_wide(path)) != NULL) {
		attr = GetFileAttributesW(w);
		free(w);
		if (attr != INVALID_FILE_ATTRIBUTES &&
		    !(attr & FILE_ATTRIBUTE_DIRECTORY))
			return path;
	}
	free(path);
	return NULL;
}

/*
 * Runs the editor through cmd.exe, so that one with arguments or a .cmd
 * shim ("code -w") works, on this console; the path is quoted for cmd's
 * /s rule: the outer quotes go, what is inside stays as typed.
 */
int
proc_run_editor(const char *editor, const char *path)
{
	STARTUPINFOW		 si;
	PROCESS_INFORMATION	 pi;
	wchar_t			*cmd;
	char			*line;
	DWORD			 code;

	/* A quote in the path would end cmd's quoting early: refuse it. */
	if (strchr(path, '"') != NULL)
		return -1;
	line = xasprintf("cmd.exe /d /s /c \"%s \"%s\"\"", editor, path);
	cmd = transport_win_wide(line);
	free(line);
	if (cmd == NULL)
		return -1;
	memset(&si, 0, sizeof si);
	si.cb = sizeof si;
	if (!CreateProcessW(NULL, cmd, NULL, NULL, FALSE,
	    CREATE_UNICODE_ENVIRONMENT, NULL, NULL, &si, &pi)) {
		free(cmd);
		return -1;
	}
	free(cmd);
	CloseHandle(pi.hThread);
	WaitForSingleObject(pi.hProcess, INFINITE);
	if (!GetExitCodeProcess(pi.hProcess, &code))
		code = (DWORD)-1;
	CloseHandle(pi.hProcess);
	return code > 255 ? -1 : (int)code;
}
