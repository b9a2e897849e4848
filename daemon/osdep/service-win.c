/*
 * gbrd under the Windows Service Control Manager (gbrd --service): this
 * file is service.h, and sdnotify.h on Windows, in one place because both
 * speak to the SCM about the one status a service has. Started any other
 * way, gbrd never calls service_run, and every sdnotify_* call here is a
 * cheap no-op, as on Unix with no NOTIFY_SOCKET.
 *
 * Threads. The main thread hands itself to the SCM's control dispatcher
 * (StartServiceCtrlDispatcherW) for as long as the service lives, and our
 * control handler runs on it: it reports a state, asks the loop
 * (osdep_request_stop, osdep_request_reload) and returns, never waiting
 * for the loop. The SCM runs svc_main on a thread of its own, which runs
 * gbrd's body: the start-up, then the event loop. The status both report
 * is kept under svc_lock.
 *
 * States. START_PENDING from the first moment, its checkpoint moved on by
 * sdnotify_progress while the disk log replays (at most once a second, so
 * a start that stalls stops moving it, and `sc query` shows that);
 * RUNNING at sdnotify_ready, which gbrd calls once the pipe accepts
 * clients; STOP_PENDING when the SCM asks for a stop (or the system shuts
 * down) or gbrd begins one itself (sdnotify_stopping); STOPPED when the
 * body returns, with exit code 0. A start that fails ends in exit() on the
 * service's thread: an atexit handler then reports STOPPED with
 * ERROR_SERVICE_SPECIFIC_ERROR and the status gbrd gave sdnotify_failed,
 * so the SCM records a failure it can show, not a crash (which is what
 * the recovery actions restart).
 *
 * The event log gets the few lines a person looks for there (running,
 * stopped, could not start and why), under the source "gbrd", whose
 * messages are gbrd.exe's own message table (gbrd-msg.mc: every message
 * is "%1", the text we pass). Everything else goes to STATE/gbrd.log, as
 * for a detached gbrd: a service has no console, so its lines are held
 * from the start until gbrd knows its state folder (service_log_file).
 */
#include "gbr-config.h"

/* Also what compat-win.h brings first on a full build; named here so that
 * this file builds alone too (tests/windows/). */
#include <winsock2.h>
#include <windows.h>

#include <fcntl.h>
#include <io.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "log.h"
#include "loop.h"
#include "osdep-proc.h"
#include "sdnotify.h"
#include "service.h"
#include "transport-win.h"
#include "xmalloc.h"

/* How long the SCM is told to wait for the next checkpoint or state. */
#define SVC_START_WAIT_MS	30000
#define SVC_STOP_WAIT_MS	30000
/* sdnotify_progress moves the checkpoint on at most this often. */
#define SVC_PROGRESS_MS		1000
/* The event source install.ps1 registers, and the messages in gbrd-msg.mc. */
#define SVC_EVENT_SOURCE	L"gbrd"
#define SVC_MSG_RUNNING		1
#define SVC_MSG_STOPPED		2
#define SVC_MSG_FAILED		3
#define SVC_MSG_NOTE		4
/* What an event log message may hold; longer ones are cut. */
#define SVC_EVENT_MAX		2048

static CRITICAL_SECTION		 svc_lock;
static SERVICE_STATUS_HANDLE	 svc_handle;
static SERVICE_STATUS		 svc_status;	/* under svc_lock */
static ULONGLONG		 svc_progress_ms; /* last checkpoint moved */
static volatile LONG		 svc_is_active;	/* svc_main runs the body */
static int			(*svc_body)(void);
static int			 svc_exit;	/* the body's exit status */
static WCHAR			*svc_wname;	/* the service's name */
static char			*svc_name;	/* the same, UTF-8 */
static char			*svc_state;	/* the state folder, once known */
static HANDLE			 svc_events;	/* the event source, or NULL */
static int			 svc_failed;	/* sdnotify_failed has spoken */
static int			 svc_fail_status;
static char			 svc_stop_why[128];
static unsigned			 svc_reloads;

/* Writes one event of type (EVENTLOG_*_TYPE) with message id to the log. */
static void __attribute__((format(__printf__, 3, 4)))
svc_event(WORD type, DWORD id, const char *fmt, ...)
{
	char	 text[SVC_EVENT_MAX];
	WCHAR	*w;
	LPCWSTR	 strings[1];
	va_list	 ap;

	if (svc_events == NULL)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if ((w = transport_win_wide(text)) == NULL)
		return;
	strings[0] = w;
	/* A full event log or a stopped event service is no reason to stop. */
	(void)ReportEventW(svc_events, type, 0, id, NULL, 1, 0, strings, NULL);
	free(w);
}

/* Names a state for the log and daemon.status. */
static const char *
svc_state_name(DWORD state)
{
	switch (state) {
	case SERVICE_START_PENDING:
		return "start_pending";
	case SERVICE_RUNNING:
		return "running";
	case SERVICE_STOP_PENDING:
		return "stop_pending";
	case SERVICE_STOPPED:
		return "stopped";
	default:
		return "other";
	}
}

/*
 * Reports state to the SCM, under svc_lock. A pending state moves the
 * checkpoint on; only RUNNING accepts controls (the SCM sends none to a
 * pending service anyway, and a stop asked for during the replay would
 * have nowhere to go before the loop runs).
 */
static void
svc_report_locked(DWORD state, DWORD win32, DWORD specific)
{
	if (svc_status.dwCurrentState == SERVICE_STOPPED)
		return;
	if (state == svc_status.dwCurrentState && (state ==
	    SERVICE_START_PENDING || state == SERVICE_STOP_PENDING))
		svc_status.dwCheckPoint++;
	else
		svc_status.dwCheckPoint = state == SERVICE_RUNNING ||
		    state == SERVICE_STOPPED ? 0 : 1;
	svc_status.dwCurrentState = state;
	svc_status.dwWin32ExitCode = win32;
	svc_status.dwServiceSpecificExitCode = specific;
	switch (state) {
	case SERVICE_START_PENDING:
		svc_status.dwWaitHint = SVC_START_WAIT_MS;
		svc_status.dwControlsAccepted = 0;
		break;
	case SERVICE_STOP_PENDING:
		svc_status.dwWaitHint = SVC_STOP_WAIT_MS;
		svc_status.dwControlsAccepted = 0;
		break;
	case SERVICE_RUNNING:
		svc_status.dwWaitHint = 0;
		svc_status.dwControlsAccepted = SERVICE_ACCEPT_STOP |
		    SERVICE_ACCEPT_SHUTDOWN | SERVICE_ACCEPT_PARAMCHANGE;
		break;
	default:
		svc_status.dwWaitHint = 0;
		svc_status.dwControlsAccepted = 0;
		break;
	}
	svc_progress_ms = GetTickCount64();
	if (!SetServiceStatus(svc_handle, &svc_status))
		log_warn("service: cannot report %s to the service manager "
		    "(Windows error %lu)", svc_state_name(state),
		    (unsigned long)GetLastError());
	if (state == SERVICE_STOPPED)
		InterlockedExchange(&svc_is_active, 0);
}

/* Reports state, taking svc_lock. */
static void
svc_report(DWORD state, DWORD win32, DWORD specific)
{
	EnterCriticalSection(&svc_lock);
	svc_report_locked(state, win32, specific);
	LeaveCriticalSection(&svc_lock);
}

/*
 * The SCM's requests, on the dispatcher's thread: each is passed to the
 * loop and answered at once. Controls we did not accept never come; any
 * that does is refused as the SCM expects.
 */
static DWORD WINAPI
svc_control(DWORD control, DWORD type, LPVOID data, LPVOID ctx)
{
	switch (control) {
	case SERVICE_CONTROL_STOP:
	case SERVICE_CONTROL_SHUTDOWN:
		svc_report(SERVICE_STOP_PENDING, NO_ERROR, 0);
		osdep_request_stop(control == SERVICE_CONTROL_STOP ?
		    "service stop" : "system shutdown");
		return NO_ERROR;
	case SERVICE_CONTROL_PARAMCHANGE:
		/* gbrd's log names the trigger: "PARAMCHANGE: reloaded ...". */
		osdep_request_reload("PARAMCHANGE");
		return NO_ERROR;
	case SERVICE_CONTROL_INTERROGATE:
		/* The SCM already holds our status; answering is enough. */
		return NO_ERROR;
	default:
		return ERROR_CALL_NOT_IMPLEMENTED;
	}
}

/*
 * exit() while the service runs: the body failed to start (gbrd_fail), or
 * something else ended the process on purpose. Either way the SCM hears a
 * stop with the reason's status instead of finding the process gone.
 */
static void
svc_atexit(void)
{
	int	status;

	if (!service_active())
		return;
	status = svc_failed && svc_fail_status != 0 ? svc_fail_status : 1;
	if (!svc_failed)
		svc_event(EVENTLOG_ERROR_TYPE, SVC_MSG_FAILED, "gbrd (service "
		    "%s) exited with status %d%s%s", svc_name, status,
		    svc_state != NULL ? "; see " : "",
		    svc_state != NULL ? svc_state : "");
	svc_report(SERVICE_STOPPED, ERROR_SERVICE_SPECIFIC_ERROR,
	    (DWORD)status);
}

/* The service's thread: registers the handler, then runs gbrd's body. */
static void WINAPI
svc_main(DWORD argc, LPWSTR *argv)
{
	int	status;

	svc_wname = _wcsdup(argc > 0 && argv[0] != NULL ? argv[0] : L"gbrd");
	svc_name = transport_win_utf8(svc_wname);
	svc_events = RegisterEventSourceW(NULL, SVC_EVENT_SOURCE);
	svc_handle = RegisterServiceCtrlHandlerExW(svc_wname, svc_control,
	    NULL);
	if (svc_handle == NULL) {
		/* Nothing can be reported without the handle: leave. */
		svc_event(EVENTLOG_ERROR_TYPE, SVC_MSG_FAILED, "gbrd (service "
		    "%s) could not register with the service manager (Windows "
		    "error %lu)", svc_name, (unsigned long)GetLastError());
		exit(1);
	}
	svc_status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
	svc_status.dwCurrentState = SERVICE_START_PENDING;
	InterlockedExchange(&svc_is_active, 1);
	atexit(svc_atexit);
	svc_report(SERVICE_START_PENDING, NO_ERROR, 0);

	/* No console to write to: held until service_log_file. */
	log_hold();
	log_info("service: started by the service manager as '%s'",
	    svc_name);
	if (argc > 1)
		log_warn("service: ignoring %lu start parameter%s: gbrd takes "
		    "its options from the service's command line only",
		    (unsigned long)(argc - 1), argc == 2 ? "" : "s");

	status = svc_exit = svc_body();
	if (status == 0) {
		svc_event(EVENTLOG_INFORMATION_TYPE, SVC_MSG_STOPPED, "gbrd "
		    "(service %s) stopped: %s", svc_name, svc_stop_why[0] !=
		    '\0' ? svc_stop_why : "its loop ended");
		svc_report(SERVICE_STOPPED, NO_ERROR, 0);
	} else {
		if (!svc_failed)
			svc_event(EVENTLOG_ERROR_TYPE, SVC_MSG_FAILED, "gbrd "
			    "(service %s) ended with status %d", svc_name,
			    status);
		svc_report(SERVICE_STOPPED, ERROR_SERVICE_SPECIFIC_ERROR,
		    (DWORD)status);
	}
	/* After STOPPED the dispatcher returns on the main thread. */
}

/* Hands the main thread to the SCM's dispatcher (see service.h). */
int
service_run(int (*body)(void))
{
	SERVICE_TABLE_ENTRYW	table[2];

	svc_body = body;
	InitializeCriticalSection(&svc_lock);
	/* The name is ignored for an own-process service, but not NULL. */
	table[0].lpServiceName = (LPWSTR)L"gbrd";
	table[0].lpServiceProc = svc_main;
	table[1].lpServiceName = NULL;
	table[1].lpServiceProc = NULL;
	if (StartServiceCtrlDispatcherW(table))
		return svc_exit;
	if (GetLastError() == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT)
		fprintf(stderr, "gbrd: --service is for the Service Control "
		    "Manager, which did not start this process: install the "
		    "service (contrib/windows-service), or run gbrd -f\n");
	else
		fprintf(stderr, "gbrd: cannot reach the Service Control "
		    "Manager (Windows error %lu)\n",
		    (unsigned long)GetLastError());
	return 2;
}

/* Tells whether the service runs (see service.h). */
int
service_active(void)
{
	return InterlockedCompareExchange(&svc_is_active, 0, 0) != 0;
}

/* Points one standard stream at fd, for the C library and Win32 both. */
static void
svc_std(int std, DWORD which, int fd)
{
	if (_dup2(fd, std) == 0)
		SetStdHandle(which, (HANDLE)_get_osfhandle(std));
}

/* Gives a service its log file and writes the held lines (service.h). */
void
service_log_file(const char *state, int (*open_log)(void))
{
	HANDLE	nul;
	int	fd = -1, logfd;

	if (!service_active())
		return;
	free(svc_state);
	svc_state = xasprintf("%s/gbrd.log", state);
	/* The null device through Win32: compat's open() takes files. */
	nul = CreateFileW(L"NUL", GENERIC_READ | GENERIC_WRITE,
	    FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_EXISTING, 0, NULL);
	if (nul != INVALID_HANDLE_VALUE &&
	    (fd = _open_osfhandle((intptr_t)nul, _O_RDWR | _O_BINARY)) == -1)
		CloseHandle(nul);
	if (fd != -1) {
		svc_std(0, STD_INPUT_HANDLE, fd);
		svc_std(1, STD_OUTPUT_HANDLE, fd);
	}
	if ((logfd = open_log()) != -1) {
		svc_std(2, STD_ERROR_HANDLE, logfd);
		close(logfd);
	} else {
		svc_event(EVENTLOG_WARNING_TYPE, SVC_MSG_NOTE, "gbrd (service "
		    "%s) cannot open its log file %s: its lines are lost",
		    svc_name, svc_state);
		if (fd != -1)
			svc_std(2, STD_ERROR_HANDLE, fd);
	}
	if (fd > 2)
		close(fd);
	log_release();
}

/* Nothing to read from the environment: service_run made the connection. */
void
sdnotify_init(struct event_base *base)
{
}

void
sdnotify_close(void)
{
}

/* RUNNING, the Windows READY=1: the pipe accepts clients. */
void
sdnotify_ready(void)
{
	int	first = 0;

	if (!service_active())
		return;
	EnterCriticalSection(&svc_lock);
	if (svc_status.dwCurrentState == SERVICE_START_PENDING) {
		svc_report_locked(SERVICE_RUNNING, NO_ERROR, 0);
		first = 1;
	}
	LeaveCriticalSection(&svc_lock);
	if (first) {
		log_info("service: running");
		svc_event(EVENTLOG_INFORMATION_TYPE, SVC_MSG_RUNNING, "gbrd "
		    "%s is running as the service %s (pid %lu); its log is %s",
		    PACKAGE_VERSION, svc_name,
		    (unsigned long)GetCurrentProcessId(),
		    svc_state != NULL ? svc_state : "not open");
	}
}

/* The SCM has no reloading state: the service stays RUNNING throughout. */
void
sdnotify_reloading(void)
{
	if (service_active())
		svc_reloads++;
}

/* STOP_PENDING: shutdown has begun, whoever asked for it. */
void
sdnotify_stopping(void)
{
	if (!service_active())
		return;
	snprintf(svc_stop_why, sizeof svc_stop_why, "%s",
	    loop_stop_reason());
	svc_report(SERVICE_STOP_PENDING, NO_ERROR, 0);
}

/* The SCM shows no summary line; daemon.status has the clients. */
void
sdnotify_status_update(unsigned clients)
{
}

/* A step of a long start: the checkpoint moves on, once a second at most. */
void
sdnotify_progress(void)
{
	if (!service_active())
		return;
	EnterCriticalSection(&svc_lock);
	if (svc_status.dwCurrentState == SERVICE_START_PENDING &&
	    GetTickCount64() - svc_progress_ms >= SVC_PROGRESS_MS)
		svc_report_locked(SERVICE_START_PENDING, NO_ERROR, 0);
	LeaveCriticalSection(&svc_lock);
}

/* The start failed: the event log says why; svc_atexit reports the stop. */
void
sdnotify_failed(int status, const char *why)
{
	if (!service_active())
		return;
	svc_failed = 1;
	svc_fail_status = status;
	svc_event(EVENTLOG_ERROR_TYPE, SVC_MSG_FAILED, "gbrd (service %s) "
	    "could not start: %s%s%s", svc_name, why,
	    svc_state != NULL ? "; see " : "",
	    svc_state != NULL ? svc_state : "");
}

/* What daemon.status shows of the service manager. */
json_t *
sdnotify_status_json(void)
{
	const char	*state = NULL;
	json_int_t	 checkpoint = 0;

	if (service_active()) {
		EnterCriticalSection(&svc_lock);
		state = svc_state_name(svc_status.dwCurrentState);
		checkpoint = (json_int_t)svc_status.dwCheckPoint;
		LeaveCriticalSection(&svc_lock);
	}
	return json_pack("{s:n, s:s, s:b, s:s?, s:s?, s:I, s:I, s:b}",
	    "notify_socket",
	    "notify", state != NULL ? "scm" : "none",
	    "socket_activated", 0,
	    "name", state != NULL ? svc_name : NULL,
	    "state", state,
	    "checkpoint", checkpoint,
	    "reloads", (json_int_t)svc_reloads,
	    "event_log", state != NULL && svc_events != NULL);
}
