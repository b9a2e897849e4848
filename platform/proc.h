/*
 * What a client needs from the system to start gbrd (DESIGN.md 3: "starts
 * gbrd if it is not running, lock file, then connect; never two daemons on
 * one socket"): the start lock that makes concurrent clients take turns,
 * running a program and waiting for its exit status, and finding gbrd
 * beside the running program. One file per system: proc-unix.c (flock,
 * posix_spawn, /proc/self/exe), proc-win.c (a named mutex, CreateProcessW,
 * GetModuleFileNameW).
 */
#ifndef GBR_PROC_H
#define GBR_PROC_H

/*
 * Takes the lock that serialises starting gbrd for path (the socket or
 * pipe), waiting a bounded time for a client starting it meanwhile. Unix:
 * flock on PATH.start.lock, in the socket's private folder (made if
 * missing); Windows: a named mutex derived from the pipe name. One lock
 * per process at a time. Returns 0, or -1 with *cause (the caller frees
 * it).
 */
int	 proc_start_lock(const char *path, char **cause);
/* Releases the start lock (nothing if it is not held). */
void	 proc_start_unlock(void);

/*
 * Runs argv[0] (searched in PATH when it names no folder) with argv and
 * waits for it to exit. Unix: posix_spawn, without the variables a service
 * manager gave this process; Windows: CreateProcessW with no window, and
 * only our standard error inherited. Returns the exit status (0 to 255), or -1 with *cause
 * when it could not be run or did not exit normally.
 */
int	 proc_spawn_wait(char *const argv[], char **cause);

/*
 * Runs a person's editor (editor: $VISUAL or $EDITOR, which may hold
 * arguments, "code -w") on path, on this terminal, and waits for it. Unix:
 * sh -c 'exec $0 "$1"' EDITOR PATH, as git does; Windows: cmd.exe /c
 * EDITOR "PATH" with the console inherited. Returns its exit status, 128+N
 * if signal N ended it, or -1 if it could not run.
 */
int	 proc_run_editor(const char *editor, const char *path);

/* The folder of the running program (a new string), or NULL. */
char	*proc_self_dir(void);
/*
 * The path of the program name (".exe" added on Windows) in the running
 * program's folder, if it is there (a new string); else NULL.
 */
char	*proc_beside_self(const char *name);

/*
 * Windows only: argv as one command line that CommandLineToArgvW (and the
 * C runtime) split back into the same words. A new string.
 */
char	*proc_command_line(char *const argv[]);

#endif
