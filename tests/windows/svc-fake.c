/*
 * svc-fake: gbrd's flow as a service, with everything between start-up and
 * the loop made up, for tests/windows/test-service.sh under Wine's service
 * manager. What is real: service-win.c (the SCM's side, sdnotify.h on
 * Windows), proc-win.c (stop and reload requests reaching the loop from
 * the SCM's thread), loop.c, the log, and a libevent loop. What is fake:
 * the "config" (a text file; one containing the word "broken" is refused
 * the way gbrd refuses a bad gbrd.conf), the "replay" (a few seconds of
 * steps that each call sdnotify_progress), and the "pipe" (a thread that
 * answers every connection with daemon.status's "service" object).
 *
 * usage: svc-fake [--service] -S STATE -c CONFIG [-r STEPS] [-p PIPE]
 *                 [-d STOP_DELAY_MS]
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "log.h"
#include "loop.h"
#include "osdep-proc.h"
#include "sdnotify.h"
#include "service.h"
#include "xmalloc.h"

static const char	*fake_state, *fake_config, *fake_pipe;
static int		 fake_steps, fake_stop_delay;
static HANDLE		 fake_pipe_first = INVALID_HANDLE_VALUE;

/* Exits as gbrd_fail does: the log, the service manager, status 1. */
static void __attribute__((noreturn))
fake_fail(const char *msg)
{
	log_error("%s", msg);
	sdnotify_failed(1, msg);
	log_release();
	exit(1);
}

/* STATE/gbrd.log, appended to, as gbrd's own. */
static int
fake_open_log(void)
{
	char	*path = xasprintf("%s/gbrd.log", fake_state);
	int	 fd;

	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_BINARY, 0600);
	free(path);
	return fd;
}

/* Reads the "config": each line is logged; "broken" refuses it. */
static int
fake_read_config(char **why)
{
	char	 line[256];
	FILE	*f;
	int	 no = 0;

	if ((f = fopen(fake_config, "r")) == NULL) {
		*why = xasprintf("%s: %s", fake_config, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		no++;
		line[strcspn(line, "\r\n")] = '\0';
		if (strstr(line, "broken") != NULL) {
			*why = xasprintf("%s:%d: the config is broken",
			    fake_config, no);
			fclose(f);
			return -1;
		}
		log_info("config %s:%d: %s", fake_config, no, line);
	}
	fclose(f);
	return 0;
}

/* A stop request, on the loop, as gbrd_stop. */
static void
fake_stop(const char *why)
{
	loop_shutdown(why);
}

/* A reload request, on the loop, as gbrd_request_reload. */
static void
fake_reload(const char *trigger)
{
	char	*why;

	sdnotify_reloading();
	if (fake_read_config(&why) != 0) {
		log_error("%s: %s; keeping the previous config", trigger, why);
		free(why);
	} else
		log_info("%s: reloaded %s", trigger, fake_config);
	sdnotify_ready();
}

/* A pipe instance of the fake's channel. */
static HANDLE
fake_pipe_make(const WCHAR *name, int first)
{
	return CreateNamedPipeW(name, PIPE_ACCESS_OUTBOUND |
	    (first ? FILE_FLAG_FIRST_PIPE_INSTANCE : 0), PIPE_TYPE_BYTE |
	    PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, PIPE_UNLIMITED_INSTANCES,
	    4096, 4096, 0, NULL);
}

/* Answers each client with one line: the "service" object, then closes. */
static DWORD WINAPI
fake_pipe_thread(LPVOID arg)
{
	WCHAR	*name = arg;
	HANDLE	 h = fake_pipe_first;
	json_t	*j;
	char	*line, *text;
	DWORD	 n;

	for (;;) {
		if (h == INVALID_HANDLE_VALUE &&
		    (h = fake_pipe_make(name, 0)) == INVALID_HANDLE_VALUE)
			return 1;
		if (ConnectNamedPipe(h, NULL) ||
		    GetLastError() == ERROR_PIPE_CONNECTED) {
			j = sdnotify_status_json();
			text = json_dumps(j, JSON_COMPACT);
			line = xasprintf("%s\n", text != NULL ? text : "null");
			WriteFile(h, line, (DWORD)strlen(line), &n, NULL);
			FlushFileBuffers(h);
			free(line);
			free(text);
			json_decref(j);
		}
		DisconnectNamedPipe(h);
		CloseHandle(h);
		h = INVALID_HANDLE_VALUE;
	}
}

/* Takes the pipe (first instance) and serves it from a thread. */
static void
fake_pipe_start(void)
{
	char	 path[256];
	WCHAR	*w;
	int	 n;

	snprintf(path, sizeof path, "\\\\.\\pipe\\%s", fake_pipe);
	n = MultiByteToWideChar(CP_UTF8, 0, path, -1, NULL, 0);
	w = xcalloc((size_t)n, sizeof *w);
	MultiByteToWideChar(CP_UTF8, 0, path, -1, w, n);
	fake_pipe_first = fake_pipe_make(w, 1);
	if (fake_pipe_first == INVALID_HANDLE_VALUE)
		fake_fail("cannot take the pipe (another server has it)");
	if (CreateThread(NULL, 0, fake_pipe_thread, w, 0, NULL) == NULL)
		fake_fail("cannot start the pipe's thread");
	log_info("serving %s", path);
}

/* Nothing: the timer it belongs to keeps the loop turning, as gbrd's
 * listener does (a loop with no event pending returns at once). */
static void
fake_keep_cb(evutil_socket_t fd, short events, void *arg)
{
}

/* gbrd_run's shape: state, log, config, replay, listen, ready, loop. */
static int
fake_run(void)
{
	struct event_base	*base;
	struct event		*keep;
	struct timeval		 hour = { 3600, 0 };
	char			*why;
	int			 i;

	log_open("svc-fake", LOG_LEVEL_DEBUG, LOG_DEST_STDERR);
	osdep_requests_hold();
	/* Win32's: compat's mkdir and the C library's differ in arguments. */
	(void)CreateDirectoryA(fake_state, NULL);
	service_log_file(fake_state, fake_open_log);
	if (fake_read_config(&why) != 0)
		fake_fail(why);
	if (osdep_loop_prepare(&why) != 0)
		fake_fail(why);
	if ((base = event_base_new()) == NULL)
		fake_fail("cannot create the event loop");
	loop_init(base, fake_state, "fake");
	loop_on_shutdown(sdnotify_stopping);
	sdnotify_init(base);
	/* The "replay": 50 ms steps, each one a call to the progress hook. */
	log_info("replaying: %d steps", fake_steps * 20);
	for (i = 0; i < fake_steps * 20; i++) {
		Sleep(50);
		sdnotify_progress();
	}
	if (fake_pipe != NULL)
		fake_pipe_start();
	if (osdep_stop_events(base, fake_stop, fake_reload) != 0)
		fake_fail("cannot take stop and reload requests");
	keep = event_new(base, -1, EV_PERSIST, fake_keep_cb, NULL);
	if (keep == NULL || event_add(keep, &hour) != 0)
		fake_fail("cannot arm the loop's timer");
	log_info("svc-fake started (pid %lu)",
	    (unsigned long)GetCurrentProcessId());
	sdnotify_ready();

	event_base_dispatch(base);
	event_free(keep);

	/* A slow shutdown, so that STOP_PENDING can be seen. */
	if (fake_stop_delay > 0)
		Sleep((DWORD)fake_stop_delay);
	osdep_stop_events_free();
	sdnotify_close();
	event_base_free(base);
	log_info("stopped");
	log_close();
	return 0;
}

int
main(int argc, char **argv)
{
	int	i, service = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--service") == 0)
			service = 1;
		else if (strcmp(argv[i], "-S") == 0 && i + 1 < argc)
			fake_state = argv[++i];
		else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			fake_config = argv[++i];
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			fake_steps = (int)strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
			fake_pipe = argv[++i];
		else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
			fake_stop_delay = (int)strtol(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: svc-fake [--service] -S STATE "
			    "-c CONFIG [-r STEPS] [-p PIPE] [-d MS]\n");
			return 2;
		}
	}
	if (fake_state == NULL || fake_config == NULL) {
		fprintf(stderr, "svc-fake: -S and -c are needed\n");
		return 2;
	}
	if (service)
		return service_run(fake_run);
	return fake_run();
}
