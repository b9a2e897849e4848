/*
 * svcctl: the few Service Control Manager calls tests/windows/test-service.sh
 * needs and Wine's sc.exe lacks (it has create, start, stop, query, failure,
 * delete, but no "control", no exit codes in its query, and no waiting).
 * One line of output per answer, "key=value" words, for the script to
 * match.
 *
 * usage: svcctl query NAME
 *        svcctl wait NAME STATE SECONDS   every change, until STATE (exit 0)
 *                                         or the time is up (exit 1)
 *        svcctl control NAME stop|paramchange|interrogate|pause
 *        svcctl failure NAME              the recovery actions
 *        svcctl pipe NAME                 the line a pipe's server writes
 *        svcctl sleep SECONDS             nothing: Wine stops its services
 *                                         once no other program runs, so
 *                                         the script keeps one running
 */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* A command line's UTF-8 (ASCII here) as a new wide string. */
static WCHAR *
ctl_wide(const char *s)
{
	WCHAR	*w;
	int	 n;

	n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
	if (n <= 0 || (w = calloc((size_t)n, sizeof *w)) == NULL)
		exit(3);
	MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
	return w;
}

/* Opens a service with access, or exits with the error. */
static SC_HANDLE
ctl_open(const char *name, DWORD access)
{
	SC_HANDLE	 scm, svc;
	WCHAR		*w = ctl_wide(name);

	if ((scm = OpenSCManagerW(NULL, NULL, SC_MANAGER_CONNECT)) == NULL) {
		printf("error=%lu call=OpenSCManager\n", GetLastError());
		exit(3);
	}
	if ((svc = OpenServiceW(scm, w, access)) == NULL) {
		printf("error=%lu call=OpenService\n", GetLastError());
		exit(3);
	}
	free(w);
	return svc;
}

/* A state's name, as sc.exe prints it. */
static const char *
ctl_state(DWORD s)
{
	switch (s) {
	case SERVICE_STOPPED:		return "STOPPED";
	case SERVICE_START_PENDING:	return "START_PENDING";
	case SERVICE_STOP_PENDING:	return "STOP_PENDING";
	case SERVICE_RUNNING:		return "RUNNING";
	case SERVICE_CONTINUE_PENDING:	return "CONTINUE_PENDING";
	case SERVICE_PAUSE_PENDING:	return "PAUSE_PENDING";
	case SERVICE_PAUSED:		return "PAUSED";
	default:			return "UNKNOWN";
	}
}

/* Prints one status line. */
static void
ctl_print(const SERVICE_STATUS_PROCESS *st)
{
	static const struct {
		DWORD		 bit;
		const char	*name;
	} names[] = {
		{ SERVICE_ACCEPT_STOP, "stop" },
		{ SERVICE_ACCEPT_SHUTDOWN, "shutdown" },
		{ SERVICE_ACCEPT_PARAMCHANGE, "paramchange" },
		{ SERVICE_ACCEPT_PAUSE_CONTINUE, "pause" },
		{ SERVICE_ACCEPT_PRESHUTDOWN, "preshutdown" },
	};
	char	acc[128];
	size_t	i, off = 0;

	acc[0] = '\0';
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		if ((st->dwControlsAccepted & names[i].bit) && off < sizeof acc)
			off += (size_t)snprintf(acc + off, sizeof acc - off,
			    "%s%s", off > 0 ? "," : "", names[i].name);
	}
	printf("state=%s checkpoint=%lu wait_hint=%lu win32_exit=%lu "
	    "service_exit=%lu accepts=%s pid=%lu\n",
	    ctl_state(st->dwCurrentState), st->dwCheckPoint, st->dwWaitHint,
	    st->dwWin32ExitCode, st->dwServiceSpecificExitCode,
	    acc[0] != '\0' ? acc : "none", st->dwProcessId);
	fflush(stdout);
}

/* Reads a service's status, or exits with the error. */
static void
ctl_status(SC_HANDLE svc, SERVICE_STATUS_PROCESS *st)
{
	DWORD	n;

	if (!QueryServiceStatusEx(svc, SC_STATUS_PROCESS_INFO, (LPBYTE)st,
	    sizeof *st, &n)) {
		printf("error=%lu call=QueryServiceStatusEx\n", GetLastError());
		exit(3);
	}
}

/* Polls every 100 ms, printing each change, until state or the deadline. */
static int
ctl_wait(SC_HANDLE svc, const char *want, int seconds)
{
	SERVICE_STATUS_PROCESS	st, last;
	ULONGLONG		end = GetTickCount64() + (ULONGLONG)seconds * 1000;
	int			first = 1;

	memset(&last, 0, sizeof last);
	for (;;) {
		ctl_status(svc, &st);
		if (first || st.dwCurrentState != last.dwCurrentState ||
		    st.dwCheckPoint != last.dwCheckPoint)
			ctl_print(&st);
		first = 0;
		last = st;
		if (strcmp(ctl_state(st.dwCurrentState), want) == 0)
			return 0;
		if (GetTickCount64() > end) {
			printf("timeout waiting for %s\n", want);
			return 1;
		}
		Sleep(100);
	}
}

/* Sends one control; prints the answer and the status it returns. */
static int
ctl_control(SC_HANDLE svc, const char *what)
{
	SERVICE_STATUS	st;
	DWORD		code;

	if (strcmp(what, "stop") == 0)
		code = SERVICE_CONTROL_STOP;
	else if (strcmp(what, "paramchange") == 0)
		code = SERVICE_CONTROL_PARAMCHANGE;
	else if (strcmp(what, "interrogate") == 0)
		code = SERVICE_CONTROL_INTERROGATE;
	else if (strcmp(what, "pause") == 0)
		code = SERVICE_CONTROL_PAUSE;
	else {
		printf("unknown control %s\n", what);
		return 2;
	}
	memset(&st, 0, sizeof st);
	if (!ControlService(svc, code, &st)) {
		printf("control=%s error=%lu\n", what, GetLastError());
		return 1;
	}
	printf("control=%s error=0 state=%s\n", what,
	    ctl_state(st.dwCurrentState));
	return 0;
}

/* Prints the recovery actions set with sc failure. */
static int
ctl_failure(SC_HANDLE svc)
{
	SERVICE_FAILURE_ACTIONSW	*fa;
	BYTE				 buf[8192];
	DWORD				 n, i;

	if (!QueryServiceConfig2W(svc, SERVICE_CONFIG_FAILURE_ACTIONS, buf,
	    sizeof buf, &n)) {
		printf("error=%lu call=QueryServiceConfig2\n", GetLastError());
		return 1;
	}
	fa = (SERVICE_FAILURE_ACTIONSW *)buf;
	printf("reset=%lu actions=%lu", fa->dwResetPeriod, fa->cActions);
	for (i = 0; i < fa->cActions; i++)
		printf(" %s/%lu", fa->lpsaActions[i].Type == SC_ACTION_RESTART ?
		    "restart" : fa->lpsaActions[i].Type == SC_ACTION_NONE ?
		    "none" : "other", fa->lpsaActions[i].Delay);
	printf("\n");
	return 0;
}

/* Connects to \\.\pipe\NAME and prints what the server writes. */
static int
ctl_pipe(const char *name)
{
	char	 path[256], buf[4096];
	WCHAR	*w;
	HANDLE	 h;
	DWORD	 n, off = 0;

	snprintf(path, sizeof path, "\\\\.\\pipe\\%s", name);
	w = ctl_wide(path);
	h = CreateFileW(w, GENERIC_READ, 0, NULL, OPEN_EXISTING, 0, NULL);
	free(w);
	if (h == INVALID_HANDLE_VALUE) {
		printf("error=%lu call=CreateFile\n", GetLastError());
		return 1;
	}
	while (off < sizeof buf - 1 && ReadFile(h, buf + off,
	    (DWORD)(sizeof buf - 1 - off), &n, NULL) && n > 0)
		off += n;
	buf[off] = '\0';
	CloseHandle(h);
	printf("%s", buf);
	return 0;
}

int
main(int argc, char **argv)
{
	SERVICE_STATUS_PROCESS	st;

	if (argc == 3 && strcmp(argv[1], "query") == 0) {
		ctl_status(ctl_open(argv[2], SERVICE_QUERY_STATUS), &st);
		ctl_print(&st);
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "wait") == 0)
		return ctl_wait(ctl_open(argv[2], SERVICE_QUERY_STATUS),
		    argv[3], (int)strtol(argv[4], NULL, 10));
	if (argc == 4 && strcmp(argv[1], "control") == 0)
		return ctl_control(ctl_open(argv[2], SERVICE_STOP |
		    SERVICE_PAUSE_CONTINUE | SERVICE_INTERROGATE |
		    SERVICE_QUERY_STATUS), argv[3]);
	if (argc == 3 && strcmp(argv[1], "failure") == 0)
		return ctl_failure(ctl_open(argv[2], SERVICE_QUERY_CONFIG));
	if (argc == 3 && strcmp(argv[1], "pipe") == 0)
		return ctl_pipe(argv[2]);
	if (argc == 3 && strcmp(argv[1], "sleep") == 0) {
		Sleep((DWORD)strtoul(argv[2], NULL, 10) * 1000);
		return 0;
	}
	fprintf(stderr, "usage: svcctl query|wait|control|failure|pipe|sleep "
	    "...\n");
	return 2;
}
