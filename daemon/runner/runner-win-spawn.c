/*
 * Making one run on Windows: what runner-win.c's rw_spawn does between a
 * job and a running process in its own Job object, watched.
 *
 * The program. argv[0] is looked for the way cmd.exe does, with the
 * child's own PATH and PATHEXT: a name with a folder in it relative to
 * the working folder, else in each absolute folder of PATH in turn (never
 * the working folder first, which cmd.exe would search: a workspace
 * cannot shadow a program), as typed if it has an extension and then
 * with each extension of PATHEXT. Only what CreateProcessW can start
 * counts (.exe and .com, and .bat and .cmd through cmd.exe); a name found
 * nowhere is the result's "not found" at stage "exec", which the run
 * tools turn into command_not_found or interpreter_not_found, as gbr-exec's
 * failed execve does on Unix.
 *
 * The command line. Windows hands a program one string, and the program
 * splits it: for an .exe it is quoted by the C runtime's rules, which
 * CommandLineToArgvW follows too (proc_command_line), so each word
 * arrives as it was given and no shell sees it. A shell is only involved
 * where the command is one:
 * - cmd.exe itself (run_script's language cmd, or run_command with cmd):
 *   what follows /c or /k is cmd's own command line, joined by blanks as
 *   typed and given with /s /c "..." so that cmd takes it verbatim. cmd
 *   reads one line after /c, so a command of several lines is written to
 *   a batch file in the session's temp space and run as one.
 * - a .bat or .cmd file: cmd.exe /d /e:on /v:off /s /c ""FILE" ARGS". cmd
 *   parses ARGS itself, and no quoting keeps " % or a line break from
 *   meaning something to it, so an argument holding one is refused
 *   (invalid_params) rather than passed on; the others are quoted where
 *   cmd would split or act on them.
 *
 * The environment block is the job's (already scrubbed by the run tools)
 * with TEMP and TMP pointed at the session's temp space, without
 * duplicates (Windows' names ignore case), sorted as CreateProcessW asks.
 *
 * The rights. stdout and stderr are named pipes made here with random
 * names, one instance each, our end overlapped for the watcher; stdin is
 * the NUL device or a third pipe. The child inherits those three handles
 * and nothing else (PROC_THREAD_ATTRIBUTE_HANDLE_LIST; every other handle
 * of gbrd is made uninheritable anyway). It is created suspended, put in
 * a new Job object with the limits (runner.h's struct runner_limits as
 * far as Job objects have them: active processes, committed memory per
 * process, user CPU time per process; file size and open files have no
 * Windows counterpart), registered with osdep for the pipe's wall
 * (osdep-win.h), and only then resumed: it never runs outside its Job
 * object. A run that cannot be put in one does not run.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <wchar.h>

#include "log.h"
#include "osdep.h"
#include "osdep-win.h"
#include "proc.h"
#include "runner-win.h"
#include "transport-win.h"
#include "xmalloc.h"

#define RW_PIPE_BUF	65536		/* each pipe's buffer */
#define RW_PATH_MAX	32768		/* UTF-16 units of a long path */
#define RW_DEFAULT_EXT	".COM;.EXE;.BAT;.CMD"

/* What the program found is. */
enum rw_kind {
	RW_EXE,		/* started as it is */
	RW_BATCH,	/* a .bat or .cmd file, through cmd.exe */
	RW_CMD,		/* cmd.exe itself */
};

/* Frees a NULL-terminated vector of strings. */
void
rw_strv_free(char **v)
{
	size_t	i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* The value of name in a job's environment (names ignore case), or NULL. */
static const char *
rw_env_get(char **envp, const char *name)
{
	size_t	i, n = strlen(name);

	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncasecmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}

/* True if s ends with ext, ignoring case. */
static int
rw_ends(const char *s, const char *ext)
{
	size_t	n = strlen(s), e = strlen(ext);

	return n >= e && strcasecmp(s + n - e, ext) == 0;
}

/* The kind of a file by its extension, or -1 if Windows cannot start it. */
static int
rw_kind_of(const char *path)
{
	const char	*base = path, *p;

	for (p = path; *p != '\0'; p++)
		if (*p == '/' || *p == '\\')
			base = p + 1;
	if (strcasecmp(base, "cmd.exe") == 0)
		return RW_CMD;
	if (rw_ends(base, ".exe") || rw_ends(base, ".com"))
		return RW_EXE;
	if (rw_ends(base, ".bat") || rw_ends(base, ".cmd"))
		return RW_BATCH;
	return -1;
}

/* True if path names a file (not a folder). */
static int
rw_is_file(const char *path)
{
	wchar_t	*w;
	DWORD	 a;

	if ((w = transport_win_wide(path)) == NULL)
		return 0;
	a = GetFileAttributesW(w);
	free(w);
	return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

/*
 * Looks for base (a path without its extension, or with one) as typed and
 * with each extension of exts that Windows can start. Returns a new
 * string, or NULL.
 */
static char *
rw_try(const char *base, const char *exts)
{
	const char	*e, *next, *dot, *slash;
	char		*p, ext[16];
	size_t		 len;

	dot = strrchr(base, '.');
	slash = strpbrk(dot != NULL ? dot : base, "/\\");
	if (dot != NULL && slash == NULL && rw_kind_of(base) != -1 &&
	    rw_is_file(base))
		return xstrdup(base);
	for (e = exts; e != NULL && *e != '\0'; e = next) {
		next = strchr(e, ';');
		len = next != NULL ? (size_t)(next - e) : strlen(e);
		if (next != NULL)
			next++;
		if (len == 0 || len >= sizeof ext || e[0] != '.')
			continue;
		memcpy(ext, e, len);
		ext[len] = '\0';
		if (rw_kind_of(ext) == -1)
			continue;	/* .vbs, .js, ...: a file association */
		p = xasprintf("%s%s", base, ext);
		if (rw_is_file(p))
			return p;
		free(p);
	}
	return NULL;
}

/*
 * Finds a job's program (see the top of this file): a new string, or
 * NULL with *err (ENOENT: nowhere; ENOEXEC: found, but not a program).
 */
static char *
rw_find(struct runner_job *j, int *err)
{
	const char	*name = j->argv[0], *path, *exts, *d, *next;
	char		*dir, *cand, *found = NULL;
	size_t		 len;

	*err = ENOENT;
	if ((exts = rw_env_get(j->envp, "PATHEXT")) == NULL || *exts == '\0')
		exts = RW_DEFAULT_EXT;
	if (strpbrk(name, "/\\:") != NULL) {
		/* "C:x" is relative to drive C's own current folder: none. */
		if (name[0] != '\0' && name[1] == ':' && name[2] != '/' &&
		    name[2] != '\\')
			return NULL;
		if (name[0] != '\0' && name[1] == ':')
			cand = xstrdup(name);
		else
			cand = xasprintf("%s\\%s", j->cwd, name);
		found = rw_try(cand, exts);
		if (found == NULL && rw_is_file(cand))
			*err = ENOEXEC;
		free(cand);
		return found;
	}
	if ((path = rw_env_get(j->envp, "PATH")) == NULL)
		return NULL;
	for (d = path; d != NULL && *d != '\0' && found == NULL; d = next) {
		next = strchr(d, ';');
		len = next != NULL ? (size_t)(next - d) : strlen(d);
		if (next != NULL)
			next++;
		/* Quotes around a folder are PATH's, not the folder's. */
		if (len >= 2 && d[0] == '"' && d[len - 1] == '"') {
			d++;
			len -= 2;
		}
		/* Only absolute folders: "." or "" would be the workspace. */
		if (len < 3 || d[1] != ':' || (d[2] != '\\' && d[2] != '/'))
			continue;
		dir = xstrndup(d, len);
		cand = xasprintf("%s%s%s", dir, dir[len - 1] == '\\' ||
		    dir[len - 1] == '/' ? "" : "\\", name);
		found = rw_try(cand, exts);
		if (found == NULL && *err == ENOENT && rw_is_file(cand))
			*err = ENOEXEC;
		free(cand);
		free(dir);
	}
	return found;
}

/* cmd.exe of this system (a new string). */
static char *
rw_cmd_exe(void)
{
	wchar_t	 w[MAX_PATH];
	UINT	 n;
	char	*d, *p;

	n = GetSystemDirectoryW(w, MAX_PATH);
	if (n == 0 || n >= MAX_PATH)
		return xstrdup("C:\\Windows\\System32\\cmd.exe");
	d = transport_win_utf8(w);
	p = xasprintf("%s\\cmd.exe", d);
	free(d);
	return p;
}

/* A growing string, for command lines. */
struct rw_str {
	char	*p;
	size_t	 len, cap;
};

/* Appends n bytes to a string. */
static void
rw_put(struct rw_str *s, const char *p, size_t n)
{
	if (s->len + n + 1 > s->cap) {
		while (s->len + n + 1 > s->cap)
			s->cap = s->cap == 0 ? 256 : s->cap * 2;
		s->p = xreallocarray(s->p, s->cap, 1);
	}
	memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = '\0';
}

/* Appends a C string. */
static void
rw_puts(struct rw_str *s, const char *p)
{
	rw_put(s, p, strlen(p));
}

/* A path with backslashes, for cmd.exe (a new string). */
static char *
rw_backslashes(const char *path)
{
	char	*p = xstrdup(path), *c;

	for (c = p; *c != '\0'; c++)
		if (*c == '/')
			*c = '\\';
	return p;
}

/* True if a word is a switch of cmd.exe: "/d", "/v:off", "/C". */
static int
rw_cmd_switch(const char *w)
{
	return w[0] == '/' && w[1] != '\0' &&
	    strspn(w + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789:") == strlen(w + 1);
}

/*
 * Writes a command of several lines to a batch file in the session's
 * temp space, its lines ended by CR LF (cmd.exe misreads labels in a file
 * of bare LFs). Returns its path (a new string), or NULL.
 */
static char *
rw_write_script(struct runner_job *j, const char *code)
{
	unsigned char	 rnd[8];
	char		*path, *tmp, buf[4096];
	const char	*p;
	size_t		 n = 0;
	int		 fd, bad = 0;

	if (j->tmpdir == NULL)
		return NULL;
	if (osdep_random(rnd, sizeof rnd) != 0)
		memset(rnd, 0, sizeof rnd);
	tmp = xasprintf("%s/tmp/gbr-%llu-%02x%02x%02x%02x%02x%02x%02x%02x.cmd",
	    j->tmpdir, (unsigned long long)++rw.serial, rnd[0], rnd[1], rnd[2],
	    rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	path = rw_backslashes(tmp);
	free(tmp);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1) {
		free(path);
		return NULL;
	}
	for (p = code; ; p++) {
		if (n + 2 > sizeof buf || *p == '\0') {
			if (write(fd, buf, n) != (ssize_t)n)
				bad = 1;
			n = 0;
		}
		if (*p == '\0')
			break;
		if (*p == '\n' && (p == code || p[-1] != '\r'))
			buf[n++] = '\r';
		buf[n++] = *p;
	}
	if (close(fd) != 0 || bad) {
		(void)unlink(path);
		free(path);
		return NULL;
	}
	return path;
}

/*
 * cmd.exe's command line for argv (see the top of this file). Returns a
 * new string, or NULL with j->reason.
 */
static char *
rw_cmd_line(struct runner_job *j, const char *app)
{
	struct rw_str	 s = { NULL, 0, 0 };
	struct rw_str	 rest = { NULL, 0, 0 };
	size_t		 i;
	int		 c = 0;

	rw_puts(&s, "\"");
	rw_puts(&s, app);
	rw_puts(&s, "\"");
	for (i = 1; j->argv[i] != NULL; i++) {
		if (!c && (strcasecmp(j->argv[i], "/c") == 0 ||
		    strcasecmp(j->argv[i], "/k") == 0)) {
			c = j->argv[i][1] == 'c' || j->argv[i][1] == 'C' ? 'c' : 'k';
			continue;
		}
		if (!c && !rw_cmd_switch(j->argv[i])) {
			j->reason = xasprintf("cmd.exe: '%s' is not a switch; "
			    "the command goes after /c", j->argv[i]);
			goto fail;
		}
		if (!c) {
			rw_puts(&s, " ");
			rw_puts(&s, j->argv[i]);
			continue;
		}
		if (rest.len > 0)
			rw_puts(&rest, " ");
		rw_puts(&rest, j->argv[i]);
	}
	if (!c) {
		/* No command: cmd reads its input, like sh without -c. */
		free(rest.p);
		return s.p;
	}
	if (rest.p != NULL && strpbrk(rest.p, "\r\n") != NULL) {
		/* One line is all cmd /c reads: the lines go in a file. */
		if ((j->script = rw_write_script(j, rest.p)) == NULL) {
			j->reason = xasprintf("cmd.exe: a command of several "
			    "lines needs the session's temp space, which "
			    "cannot be written");
			goto fail;
		}
		free(rest.p);
		rest.p = xasprintf("\"%s\"", j->script);
		rest.len = strlen(rest.p);
	}
	/* /s: the outer quotes go, everything between them stays as typed. */
	rw_puts(&s, c == 'c' ? " /s /c \"" : " /s /k \"");
	if (rest.p != NULL)
		rw_puts(&s, rest.p);
	rw_puts(&s, "\"");
	free(rest.p);
	return s.p;

fail:
	free(s.p);
	free(rest.p);
	return NULL;
}

/*
 * The command line of a batch file through cmd.exe. Returns a new string,
 * or NULL with j->reason (an argument cmd would read as its own syntax).
 */
static char *
rw_batch_line(struct runner_job *j, const char *cmd, const char *file)
{
	struct rw_str	 s = { NULL, 0, 0 };
	size_t		 i;
	const char	*a;

	if (strpbrk(file, "\"%") != NULL) {
		j->reason = xasprintf("'%s': cmd.exe cannot run a batch file "
		    "whose path holds \" or %%", file);
		return NULL;
	}
	rw_puts(&s, "\"");
	rw_puts(&s, cmd);
	rw_puts(&s, "\" /d /e:on /v:off /s /c \"\"");
	rw_puts(&s, file);
	rw_puts(&s, "\"");
	for (i = 1; j->argv[i] != NULL; i++) {
		a = j->argv[i];
		if (strpbrk(a, "\"%\r\n") != NULL) {
			j->reason = xasprintf("'%s': argument %zu holds \", %% "
			    "or a line break, which cmd.exe would read as its "
			    "own syntax in a batch file's arguments", j->argv0,
			    i);
			free(s.p);
			return NULL;
		}
		rw_puts(&s, " ");
		/* Inside quotes & | < > ^ ( ) , ; = and blanks are plain. */
		if (*a == '\0' || strpbrk(a, " \t&|<>^(),;=!") != NULL) {
			rw_puts(&s, "\"");
			rw_puts(&s, a);
			rw_puts(&s, "\"");
		} else
			rw_puts(&s, a);
	}
	rw_puts(&s, "\"");
	return s.p;
}

/* Compares two environment entries by name, ignoring case (for qsort). */
static int
rw_env_cmp(const void *a, const void *b)
{
	const wchar_t	*x = *(const wchar_t *const *)a;
	const wchar_t	*y = *(const wchar_t *const *)b;
	const wchar_t	*ex = wcschr(x + 1, L'='), *ey = wcschr(y + 1, L'=');
	int		 lx = (int)(ex != NULL ? ex - x : (ptrdiff_t)wcslen(x));
	int		 ly = (int)(ey != NULL ? ey - y : (ptrdiff_t)wcslen(y));
	int		 r;

	r = CompareStringOrdinal(x, lx, y, ly, TRUE);
	return r == CSTR_LESS_THAN ? -1 : r == CSTR_GREATER_THAN ? 1 : 0;
}

/*
 * The job's environment block: its entries, TEMP and TMP the session's,
 * each name once (the first wins), sorted. A new block, or NULL.
 */
static wchar_t *
rw_env_block(struct runner_job *j)
{
	wchar_t		**v, *blk, *p;
	char		 *t, *tmp = NULL;
	size_t		  n = 0, i, k, total = 1, len;
	int		  dup;

	for (i = 0; j->envp[i] != NULL; i++)
		;
	v = xcalloc(i + 3, sizeof *v);
	if (j->tmpdir != NULL) {
		t = xasprintf("%s/tmp", j->tmpdir);
		tmp = rw_backslashes(t);
		free(t);
		t = xasprintf("TEMP=%s", tmp);
		v[n++] = transport_win_wide(t);
		free(t);
		t = xasprintf("TMP=%s", tmp);
		v[n++] = transport_win_wide(t);
		free(t);
		free(tmp);
	}
	for (i = 0; j->envp[i] != NULL; i++) {
		if (strchr(j->envp[i] + 1, '=') == NULL ||
		    (p = transport_win_wide(j->envp[i])) == NULL)
			continue;
		dup = 0;
		len = (size_t)(wcschr(p + 1, L'=') - p);
		for (k = 0; k < n && !dup; k++)
			dup = CompareStringOrdinal(v[k], (int)(wcschr(v[k] + 1,
			    L'=') - v[k]), p, (int)len, TRUE) == CSTR_EQUAL;
		if (dup) {
			free(p);
			continue;
		}
		v[n++] = p;
	}
	qsort(v, n, sizeof *v, rw_env_cmp);
	for (i = 0; i < n; i++)
		total += wcslen(v[i]) + 1;
	blk = xreallocarray(NULL, total + 1, sizeof *blk);
	p = blk;
	for (i = 0; i < n; i++) {
		len = wcslen(v[i]) + 1;
		memcpy(p, v[i], len * sizeof *p);
		p += len;
		free(v[i]);
	}
	*p++ = L'\0';
	if (n == 0)
		*p = L'\0';	/* an empty block is two NULs */
	free(v);
	return blk;
}

/*
 * A pipe for the child: our end overlapped (inbound: we read), theirs
 * synchronous and inheritable. Returns 0, or -1 (GetLastError).
 */
static int
rw_pipe(int inbound, HANDLE *ours, HANDLE *theirs)
{
	SECURITY_ATTRIBUTES	 sa = { sizeof sa, NULL, TRUE };
	unsigned char		 rnd[8];
	char			*name;
	wchar_t			*w;
	DWORD			 err;

	if (osdep_random(rnd, sizeof rnd) != 0) {
		SetLastError(ERROR_GEN_FAILURE);
		return -1;
	}
	/* One instance, a random name: nobody else can be its other end. */
	name = xasprintf("\\\\.\\pipe\\gbr-run-%lu-%llu-%02x%02x%02x%02x%02x"
	    "%02x%02x%02x", (unsigned long)GetCurrentProcessId(),
	    (unsigned long long)++rw.serial, rnd[0], rnd[1], rnd[2], rnd[3],
	    rnd[4], rnd[5], rnd[6], rnd[7]);
	w = transport_win_wide(name);
	free(name);
	*ours = CreateNamedPipeW(w, (inbound ? PIPE_ACCESS_INBOUND :
	    PIPE_ACCESS_OUTBOUND) | FILE_FLAG_OVERLAPPED |
	    FILE_FLAG_FIRST_PIPE_INSTANCE, PIPE_TYPE_BYTE | PIPE_READMODE_BYTE |
	    PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1, RW_PIPE_BUF, RW_PIPE_BUF,
	    0, NULL);
	if (*ours == INVALID_HANDLE_VALUE) {
		free(w);
		return -1;
	}
	*theirs = CreateFileW(w, inbound ? GENERIC_WRITE | FILE_READ_ATTRIBUTES :
	    GENERIC_READ | FILE_WRITE_ATTRIBUTES, 0, &sa, OPEN_EXISTING,
	    FILE_ATTRIBUTE_NORMAL, NULL);
	free(w);
	if (*theirs == INVALID_HANDLE_VALUE) {
		err = GetLastError();
		CloseHandle(*ours);
		SetLastError(err);
		return -1;
	}
	return 0;
}

/*
 * A new Job object with the job's limits (see the top of this file).
 * Returns it, or NULL (GetLastError).
 */
static HANDLE
rw_job_object(const struct runner_limits *l)
{
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION	li;
	JOBOBJECT_BASIC_UI_RESTRICTIONS		ui;
	HANDLE					h;
	uint64_t				cpu;
	DWORD					err;

	if ((h = CreateJobObjectW(NULL, NULL)) == NULL)
		return NULL;
	memset(&li, 0, sizeof li);
	/*
	 * No JOB_OBJECT_LIMIT_BREAKAWAY_OK: nothing of the run leaves it.
	 * DIE_ON_UNHANDLED_EXCEPTION: a crash ends the process instead of
	 * waiting for a person to close an error dialog.
	 */
	li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE |
	    JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION |
	    JOB_OBJECT_LIMIT_PROCESS_TIME;
	/* As RLIMIT_CPU on Unix: the timeout, rounded up, plus one. */
	cpu = l->cpu_seconds > 0 ? l->cpu_seconds :
	    (uint64_t)(l->timeout_ms + 999) / 1000 + 1;
	li.BasicLimitInformation.PerProcessUserTimeLimit.QuadPart =
	    (LONGLONG)(cpu * 10000000ULL);	/* 100 ns units */
	if (l->processes > 0) {
		li.BasicLimitInformation.LimitFlags |=
		    JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
		li.BasicLimitInformation.ActiveProcessLimit = l->processes;
	}
	if (l->address_space > 0) {
		li.BasicLimitInformation.LimitFlags |=
		    JOB_OBJECT_LIMIT_PROCESS_MEMORY;
		li.ProcessMemoryLimit = (SIZE_T)l->address_space;
	}
	if (!SetInformationJobObject(h, JobObjectExtendedLimitInformation, &li,
	    sizeof li)) {
		err = GetLastError();
		CloseHandle(h);
		SetLastError(err);
		return NULL;
	}
	/*
	 * No clipboard (a person's copied passwords), no other windows'
	 * handles, no global atoms, no system-wide settings, no logoff.
	 */
	memset(&ui, 0, sizeof ui);
	ui.UIRestrictionsClass = JOB_OBJECT_UILIMIT_HANDLES |
	    JOB_OBJECT_UILIMIT_READCLIPBOARD | JOB_OBJECT_UILIMIT_WRITECLIPBOARD |
	    JOB_OBJECT_UILIMIT_GLOBALATOMS | JOB_OBJECT_UILIMIT_DESKTOP |
	    JOB_OBJECT_UILIMIT_DISPLAYSETTINGS | JOB_OBJECT_UILIMIT_EXITWINDOWS |
	    JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS;
	if (!SetInformationJobObject(h, JobObjectBasicUIRestrictions, &ui,
	    sizeof ui)) {
		err = GetLastError();
		CloseHandle(h);
		SetLastError(err);
		return NULL;
	}
	return h;
}

/* Probes Job objects once (see runner-win.h). */
char *
rw_probe_job(void)
{
	struct runner_limits	 l;
	HANDLE			 h;
	char			*why, *s;

	memset(&l, 0, sizeof l);
	l.timeout_ms = 1000;
	l.processes = 8;
	l.address_space = 64ULL << 20;
	if ((h = rw_job_object(&l)) == NULL) {
		why = transport_win_strerror(GetLastError());
		s = xasprintf("a Job object with limits cannot be made here "
		    "(%s): commands could outlive their run and gbrd", why);
		free(why);
		return s;
	}
	CloseHandle(h);
	return NULL;
}

/* The job cannot start its program: it finishes with stage "exec". */
static int
rw_exec_failed(struct runner_job *j, int err, const char *why)
{
	j->failed = 1;
	j->stage = "exec";
	j->serrno = err;
	j->kind = err == ENOENT ? GBR_ERR_NOT_FOUND : err == EACCES ?
	    GBR_ERR_PERMISSION_DENIED : err == EINVAL ?
	    GBR_ERR_INVALID_PARAMS : GBR_ERR_INTERNAL;
	if (j->reason == NULL)
		j->reason = xasprintf("cannot run '%s': %s", j->argv0, why);
	rw_to_finished(j);
	return 0;
}

/* Fails the whole start (nothing could be set up); see rw_spawn. */
static int
rw_setup_failed(struct runner_job *j, const char *what, DWORD err)
{
	char	*why = transport_win_strerror(err);

	j->kind = GBR_ERR_INTERNAL;
	free(j->reason);
	j->reason = xasprintf("cannot run '%s': %s: %s", j->argv0, what, why);
	free(why);
	return -1;
}

/* Starts a job's process in its Job object, and its watcher. */
int
rw_spawn(struct runner_job *j)
{
	STARTUPINFOEXW		 si;
	PROCESS_INFORMATION	 pi;
	SECURITY_ATTRIBUTES	 sa = { sizeof sa, NULL, TRUE };
	HANDLE			 out = NULL, err = NULL, in = NULL;
	HANDLE			 c_out = NULL, c_err = NULL, c_in = NULL;
	HANDLE			 job = NULL, dup = NULL, list[3];
	SIZE_T			 alen = 0;
	wchar_t			*wapp = NULL, *wline = NULL, *wcwd = NULL;
	wchar_t			*wenv = NULL;
	char			*app = NULL, *line = NULL, *cmd = NULL, *why;
	int			 e, kind, rc = -1;
	DWORD			 gle;

	memset(&si, 0, sizeof si);
	memset(&pi, 0, sizeof pi);
	if ((app = rw_find(j, &e)) == NULL) {
		rw_exec_failed(j, e, e == ENOENT ? "not found in PATH (with "
		    "PATHEXT)" : "Windows cannot start it: only .exe and .com "
		    "files are programs (.bat and .cmd run through cmd.exe)");
		return 0;
	}
	kind = rw_kind_of(app);
	if (kind == RW_BATCH) {
		cmd = rw_cmd_exe();
		line = rw_batch_line(j, cmd, app);
		free(app);
		app = cmd;
	} else if (kind == RW_CMD)
		line = rw_cmd_line(j, app);
	else
		line = proc_command_line(j->argv);
	if (line == NULL) {
		free(app);
		return rw_exec_failed(j, EINVAL, "");
	}
	if (strlen(line) >= RW_PATH_MAX) {
		free(app);
		free(line);
		return rw_exec_failed(j, E2BIG, "its command line is longer "
		    "than Windows takes (32767 characters)");
	}
	wapp = transport_win_wide(app);
	wline = transport_win_wide(line);
	wcwd = transport_win_wide(j->cwd);
	if (wapp == NULL || wline == NULL || wcwd == NULL) {
		rc = rw_exec_failed(j, EINVAL, "an argument, the program or "
		    "the folder is not valid UTF-8");
		goto out;
	}
	wenv = rw_env_block(j);

	if (rw_pipe(1, &out, &c_out) != 0) {
		rw_setup_failed(j, "a pipe for stdout", GetLastError());
		goto out;
	}
	if (rw_pipe(1, &err, &c_err) != 0) {
		rw_setup_failed(j, "a pipe for stderr", GetLastError());
		goto out;
	}
	if (j->input != NULL) {
		if (rw_pipe(0, &in, &c_in) != 0) {
			rw_setup_failed(j, "a pipe for stdin", GetLastError());
			goto out;
		}
	} else if ((c_in = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ |
	    FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, NULL)) ==
	    INVALID_HANDLE_VALUE) {
		c_in = NULL;
		rw_setup_failed(j, "the NUL device", GetLastError());
		goto out;
	}
	if ((job = rw_job_object(&j->limits)) == NULL) {
		rw_setup_failed(j, "a Job object", GetLastError());
		goto out;
	}

	/* Only these three handles go to the child. */
	list[0] = c_in;
	list[1] = c_out;
	list[2] = c_err;
	(void)InitializeProcThreadAttributeList(NULL, 1, 0, &alen);
	si.lpAttributeList = xmalloc(alen);
	if (!InitializeProcThreadAttributeList(si.lpAttributeList, 1, 0,
	    &alen)) {
		free(si.lpAttributeList);
		si.lpAttributeList = NULL;
		rw_setup_failed(j, "an attribute list", GetLastError());
		goto out;
	}
	if (!UpdateProcThreadAttribute(si.lpAttributeList, 0,
	    PROC_THREAD_ATTRIBUTE_HANDLE_LIST, list, sizeof list, NULL, NULL)) {
		rw_setup_failed(j, "the list of inherited handles",
		    GetLastError());
		goto out;
	}
	si.StartupInfo.cb = sizeof si;
	si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
	si.StartupInfo.hStdInput = c_in;
	si.StartupInfo.hStdOutput = c_out;
	si.StartupInfo.hStdError = c_err;
	if (!CreateProcessW(wapp, wline, NULL, NULL, TRUE, CREATE_SUSPENDED |
	    CREATE_UNICODE_ENVIRONMENT | CREATE_NO_WINDOW |
	    CREATE_NEW_PROCESS_GROUP | EXTENDED_STARTUPINFO_PRESENT, wenv,
	    wcwd, &si.StartupInfo, &pi)) {
		gle = GetLastError();
		why = transport_win_strerror(gle);
		e = gle == ERROR_FILE_NOT_FOUND || gle == ERROR_PATH_NOT_FOUND ?
		    ENOENT : gle == ERROR_ACCESS_DENIED ? EACCES :
		    gle == ERROR_DIRECTORY ? ENOTDIR : ENOEXEC;
		rc = rw_exec_failed(j, e, why);
		free(why);
		goto out;
	}
	/* Suspended: nothing of it runs before it is in its Job object. */
	if (!AssignProcessToJobObject(job, pi.hProcess)) {
		gle = GetLastError();
		TerminateProcess(pi.hProcess, RW_KILL_CODE);
		rw_setup_failed(j, "putting it in a Job object (is gbrd "
		    "itself in one that allows no other?)", gle);
		goto out;
	}
	/* Known to the pipe's wall before it can reach the pipe. */
	j->hjob = job;
	job = NULL;
	osdep_jobs_add(j->hjob);
	if (!DuplicateHandle(GetCurrentProcess(), j->hjob, GetCurrentProcess(),
	    &dup, 0, FALSE, DUPLICATE_SAME_ACCESS)) {
		rw_setup_failed(j, "a handle of the Job object", GetLastError());
		TerminateJobObject(j->hjob, RW_KILL_CODE);
		goto out;
	}
	j->pid = pi.dwProcessId;
	j->t_start = (int64_t)clock_mono_ms();
	/* The watcher takes the process, the duplicate and our pipe ends. */
	if (rw_watch_start(j, pi.hProcess, dup, out, err, in) != 0) {
		pi.hProcess = NULL;
		out = err = in = NULL;
		TerminateJobObject(j->hjob, RW_KILL_CODE);
		rw_setup_failed(j, "a watcher for it", GetLastError());
		goto out;
	}
	pi.hProcess = NULL;
	out = err = in = NULL;
	ResumeThread(pi.hThread);
	rc = 0;
out:
	if (rc != 0 && j->hjob != NULL) {
		osdep_jobs_remove(j->hjob);
		CloseHandle(j->hjob);
		j->hjob = NULL;
	}
	if (pi.hThread != NULL)
		CloseHandle(pi.hThread);
	if (pi.hProcess != NULL)
		CloseHandle(pi.hProcess);
	if (si.lpAttributeList != NULL) {
		DeleteProcThreadAttributeList(si.lpAttributeList);
		free(si.lpAttributeList);
	}
	if (job != NULL)
		CloseHandle(job);
	if (out != NULL)
		CloseHandle(out);
	if (err != NULL)
		CloseHandle(err);
	if (in != NULL)
		CloseHandle(in);
	if (c_out != NULL)
		CloseHandle(c_out);
	if (c_err != NULL)
		CloseHandle(c_err);
	if (c_in != NULL)
		CloseHandle(c_in);
	free(wapp);
	free(wline);
	free(wcwd);
	free(wenv);
	free(app);
	free(line);
	return rc;
}
