/*
 * gbrd as a Windows service (gbrd --service). The Service Control Manager
 * starts the program, which must hand its main thread to the SCM's control
 * dispatcher at once; gbrd's own start-up then runs on the thread the SCM
 * gives the service, as one flow: main() parses the options and calls
 * service_run() with the rest of itself, the body, which runs exactly as it
 * would in the foreground. What the SCM hears along the way (start pending
 * with its checkpoints, running, stop pending, stopped with an exit code)
 * comes from the calls gbrd makes anyway to tell a service manager how it
 * is doing, sdnotify.h; the SCM's requests (stop, shutdown, re-read the
 * parameters) reach the loop through osdep_request_stop and
 * osdep_request_reload (osdep-proc.h).
 *
 * Elsewhere there is no such thing: on Unix service_run says so and
 * returns 2, and the other calls do nothing (systemd starts gbrd -f, and
 * sdnotify.c speaks its protocol).
 */
#ifndef GBRD_SERVICE_H
#define GBRD_SERVICE_H

/*
 * Connects to the SCM and runs body() as the service; returns when the
 * service has stopped, with body's exit status, for main to return. A
 * body that calls exit() (a failed start) is reported as stopped with
 * that start's failure (sdnotify_failed). Returns 2 with a message on
 * stderr when the SCM did not start this process, or on a system without
 * one.
 */
int	service_run(int (*body)(void));

/*
 * Tells whether this process runs as a service and the service is not
 * over. Safe from any thread.
 */
int	service_active(void);

/*
 * A service has no console: from now on its standard error (every log
 * line, and those held since start-up) goes to the file open_log opens,
 * STATE/gbrd.log, and its standard input and output to the null device.
 * state is the folder, named in the event log's messages. Does nothing
 * when not a service.
 */
void	service_log_file(const char *state, int (*open_log)(void));

#endif
