/*
 * The daemon process on Windows (osdep-proc.h). There is no fork: a gbrd
 * asked to go to the background starts itself again, detached from the
 * console and in a new process group, before it takes the pipe, and waits
 * on an anonymous pipe for that daemon's report, as the Unix parent does
 * after its fork. The child knows it is the daemon from one environment
 * variable naming the report pipe's handle, the only handle it inherits.
 *
 * Stop and reload requests come from the console's control events (Ctrl-C,
 * Ctrl-Break, the window closing, log-off, shutdown) and from the service
 * manager (service-win.c): they arrive on other threads and reach the loop
 * through libevent's thread-safe event_active.
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "log.h"
#include "osdep-proc.h"
#include "service.h"
#include "xmalloc.h"

/* Names the report pipe's handle in the detached daemon's environment. */
#define PROC_READY_ENV		"GBRD_DETACHED_READY"
#define PROC_READY_ENV_W	L"GBRD_DETACHED_READY"
/* How long a closing console waits for the loop to end cleanly. */
#define PROC_CLOSE_WAIT_MS	4500

static struct event	*proc_ev_stop, *proc_ev_reload;
static void		(*proc_stop)(const char *);
static void		(*proc_reload)(const char *);
static const char	*volatile proc_stop_why = "stop requested";
static const char	*volatile proc_reload_why = "reload requested";
static volatile LONG	 proc_pending;	/* a request before the loop was ready */
static HANDLE		 proc_ended;	/* set once the loop has ended */

/* Exits during start-up with the system's reason. */
static void __attribute__((noreturn))
proc_fail(const char *what)
{
	fprintf(stderr, "gbrd: %s failed (Windows error %lu)\n", what,
	    (unsigned long)GetLastError());
	exit(1);
}

/* Points a standard stream at fd, for the C library and for Win32 both. */
static void
proc_std(int std, DWORD which, int fd)
{
	if (_dup2(fd, std) == 0)
		SetStdHandle(which, (HANDLE)_get_osfhandle(std));
}

/* In the detached daemon: takes the report pipe and detaches the streams. */
static void
proc_become_daemon(const char *value, int (*open_log)(void),
    const char *state, int *ready_fd)
{
	unsigned long long	 h;
	char			*end;
	int			 fd, logfd;

	errno = 0;
	h = strtoull(value, &end, 16);
	SetEnvironmentVariableW(PROC_READY_ENV_W, NULL);
	_putenv(PROC_READY_ENV "=");
	if (errno != 0 || end == value || *end != '\0' || h == 0)
		proc_fail("reading the report pipe's handle");
	*ready_fd = _open_osfhandle((intptr_t)h, _O_WRONLY | _O_BINARY);
	if (*ready_fd == -1)
		proc_fail("opening the report pipe");
	/* Hold no folder a person may want to delete: the state is ours. */
	(void)chdir(state);
	if ((fd = open("NUL", O_RDWR)) != -1) {
		proc_std(0, STD_INPUT_HANDLE, fd);
		proc_std(1, STD_OUTPUT_HANDLE, fd);
	}
	if ((logfd = open_log()) != -1) {
		proc_std(2, STD_ERROR_HANDLE, logfd);
		close(logfd);
	} else if (fd != -1)
		proc_std(2, STD_ERROR_HANDLE, fd);
	if (fd > 2)
		close(fd);
}

/* Starts this program again detached, the report pipe's write end its one
 * inherited handle. Returns the process handle. */
static HANDLE
proc_spawn_detached(HANDLE wr)
{
	STARTUPINFOEXW		 si;
	PROCESS_INFORMATION	 pi;
	SIZE_T			 size = 0;
	WCHAR			 val[32];
	DWORD			 flags;
	BOOL			 ok;

	swprintf(val, sizeof val / sizeof val[0], L"%llx",
	    (unsigned long long)(uintptr_t)wr);
	if (!SetEnvironmentVariableW(PROC_READY_ENV_W, val))
		proc_fail("SetEnvironmentVariable");
	memset(&si, 0, sizeof si);
	si.StartupInfo.cb = sizeof si;
	/* Only the report pipe is inherited, whatever else is inheritable. */
	InitializeProcThreadAttributeList(NULL, 1, 0, &size);
	si.lpAttributeList = xmalloc(size);
	if (!InitializeProcThreadAttributeList(si.lpAttributeList, 1, 0,
	    &size) || !UpdateProcThreadAttribute(si.lpAttributeList, 0,
	    PROC_THREAD_ATTRIBUTE_HANDLE_LIST, &wr, sizeof wr, NULL, NULL))
		proc_fail("preparing the daemon's handles");
	flags = EXTENDED_STARTUPINFO_PRESENT | DETACHED_PROCESS |
	    CREATE_NEW_PROCESS_GROUP | CREATE_UNICODE_ENVIRONMENT;
	/* Out of the starter's job, so closing a terminal does not kill it. */
	ok = CreateProcessW(NULL, GetCommandLineW(), NULL, NULL, TRUE,
	    flags | CREATE_BREAKAWAY_FROM_JOB, NULL, NULL, &si.StartupInfo, &pi);
	if (!ok && GetLastError() == ERROR_ACCESS_DENIED)
		ok = CreateProcessW(NULL, GetCommandLineW(), NULL, NULL, TRUE,
		    flags, NULL, NULL, &si.StartupInfo, &pi);
	DeleteProcThreadAttributeList(si.lpAttributeList);
	free(si.lpAttributeList);
	SetEnvironmentVariableW(PROC_READY_ENV_W, NULL);
	if (!ok)
		proc_fail("starting the daemon (CreateProcess)");
	CloseHandle(pi.hThread);
	return pi.hProcess;
}

/* Goes to the background before the pipe is taken (see osdep-proc.h). */
void
osdep_detach(enum osdep_detach_at at, int (*open_log)(void),
    const char *state, int *ready_fd)
{
	SECURITY_ATTRIBUTES	 sa = { sizeof sa, NULL, FALSE };
	const char		*value;
	HANDLE			 rd, wr, child;
	char			 buf[1024];
	DWORD			 n, off = 0;

	if (at != OSDEP_DETACH_BEFORE_LISTEN)
		return;
	if ((value = getenv(PROC_READY_ENV)) != NULL && *value != '\0') {
		proc_become_daemon(value, open_log, state, ready_fd);
		return;
	}
	if (!CreatePipe(&rd, &wr, &sa, 0) ||
	    !SetHandleInformation(wr, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT))
		proc_fail("CreatePipe");
	child = proc_spawn_detached(wr);
	CloseHandle(wr);
	while (off < sizeof buf - 1 &&
	    ReadFile(rd, buf + off, (DWORD)(sizeof buf - 1 - off), &n, NULL) &&
	    n > 0)
		off += n;
	buf[off] = '\0';
	CloseHandle(rd);
	CloseHandle(child);
	if (strncmp(buf, "ok", 2) == 0)
		exit(0);
	if (off == 0)
		fprintf(stderr, "gbrd: the daemon exited during start-up; see "
		    "%s/gbrd.log\n", state);
	else
		fprintf(stderr, "gbrd: %s", buf);
	exit(1);
}

/*
 * A console control event: every one of them is a request to stop, except
 * in a service, which Windows sends log-off and shutdown too: log-off is
 * any user's (a service outlives them all), and the Service Control
 * Manager announces a shutdown itself (SERVICE_CONTROL_SHUTDOWN).
 */
static BOOL WINAPI
proc_console_cb(DWORD type)
{
	const char	*why;

	if (service_active() && (type == CTRL_LOGOFF_EVENT ||
	    type == CTRL_SHUTDOWN_EVENT))
		return TRUE;
	switch (type) {
	case CTRL_C_EVENT:
		why = "Ctrl-C";
		break;
	case CTRL_BREAK_EVENT:
		why = "Ctrl-Break";
		break;
	case CTRL_CLOSE_EVENT:
		why = "console closed";
		break;
	case CTRL_LOGOFF_EVENT:
		why = "log-off";
		break;
	default:
		why = "system shutdown";
		break;
	}
	osdep_request_stop(why);
	/*
	 * For these three Windows ends the process when the handler returns:
	 * give the loop the time to close the log cleanly first.
	 */
	if (type == CTRL_CLOSE_EVENT || type == CTRL_LOGOFF_EVENT ||
	    type == CTRL_SHUTDOWN_EVENT)
		WaitForSingleObject(proc_ended, PROC_CLOSE_WAIT_MS);
	return TRUE;
}

/* Takes console events from now on; held ones are delivered later. */
void
osdep_requests_hold(void)
{
	if (proc_ended == NULL)
		proc_ended = CreateEventW(NULL, TRUE, FALSE, NULL);
	SetConsoleCtrlHandler(proc_console_cb, TRUE);
}

/* Winsock for libevent and libcurl; libevent's locks for threads. */
int
osdep_loop_prepare(char **cause)
{
	WSADATA	wsa;

	if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) {
		*cause = xstrdup("cannot start Winsock");
		return -1;
	}
	if (evthread_use_windows_threads() != 0) {
		*cause = xstrdup("libevent has no thread support");
		return -1;
	}
	return 0;
}

/* A stop asked for by a console event or the service manager. */
static void
proc_stop_cb(evutil_socket_t fd, short events, void *arg)
{
	proc_stop(proc_stop_why);
}

/* A reload asked for by the service manager. */
static void
proc_reload_cb(evutil_socket_t fd, short events, void *arg)
{
	proc_reload(proc_reload_why);
}

/* Makes the request events; delivers a stop that came during start-up. */
int
osdep_stop_events(struct event_base *base, void (*stop)(const char *),
    void (*reload)(const char *))
{
	proc_stop = stop;
	proc_reload = reload;
	proc_ev_stop = event_new(base, -1, 0, proc_stop_cb, NULL);
	proc_ev_reload = event_new(base, -1, 0, proc_reload_cb, NULL);
	if (proc_ev_stop == NULL || proc_ev_reload == NULL)
		return -1;
	if (proc_ended == NULL)
		osdep_requests_hold();
	if (InterlockedExchange(&proc_pending, 0) != 0)
		event_active(proc_ev_stop, 0, 0);
	return 0;
}

/* Wakes the loop to stop, from any thread. */
void
osdep_request_stop(const char *why)
{
	proc_stop_why = why;
	if (proc_ev_stop == NULL) {
		InterlockedExchange(&proc_pending, 1);
		return;
	}
	event_active(proc_ev_stop, 0, 0);
}

/* Wakes the loop to re-read the config, from any thread. */
void
osdep_request_reload(const char *why)
{
	proc_reload_why = why;
	if (proc_ev_reload != NULL)
		event_active(proc_ev_reload, 0, 0);
}

/* Frees the request events and lets a waiting console handler return. */
void
osdep_stop_events_free(void)
{
	SetConsoleCtrlHandler(proc_console_cb, FALSE);
	if (proc_ev_stop != NULL)
		event_free(proc_ev_stop);
	if (proc_ev_reload != NULL)
		event_free(proc_ev_reload);
	proc_ev_stop = proc_ev_reload = NULL;
	if (proc_ended != NULL)
		SetEvent(proc_ended);
}
