/*
 * Starting gbrd on Unix (proc.h): the start lock is flock(2) on a file
 * beside the socket, in its private folder, as tmux's client does; gbrd
 * is run with posix_spawn and waited for; the running program is found
 * through /proc/self/exe.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/file.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "paths.h"
#include "proc.h"
#include "xmalloc.h"

extern char **environ;

/* How long a client waits for another one starting gbrd. */
#define PROC_LOCK_MS	15000

static int	proc_lock_fd = -1;

/* Takes the start lock beside path, waiting a bounded time. */
int
proc_start_lock(const char *path, char **cause)
{
	char		*dir, *lock;
	long long	 deadline;
	int		 fd;

	*cause = NULL;
	dir = paths_dirname(path);
	if (paths_private_dir(dir, 1, cause) != 0) {
		free(dir);
		return -1;
	}
	free(dir);
	lock = xasprintf("%s.start.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1) {
		*cause = xasprintf("cannot open %s: %s", lock, strerror(errno));
		free(lock);
		return -1;
	}
	/* Another client may be starting it: wait for its lock, bounded. */
	deadline = clock_mono_ms() + PROC_LOCK_MS;
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (clock_mono_ms() > deadline) {
			*cause = xasprintf("timed out waiting for %s", lock);
			free(lock);
			close(fd);
			return -1;
		}
		usleep(10 * 1000);
	}
	free(lock);
	proc_lock_fd = fd;
	return 0;
}

/* Releases the start lock. */
void
proc_start_unlock(void)
{
	if (proc_lock_fd != -1)
		close(proc_lock_fd);	/* releases the lock */
	proc_lock_fd = -1;
}

/*
 * Copies the environment without the variables a service manager gave to
 * this process: passed on, they would make gbrd believe it was started by
 * that manager and stay in the foreground (and we wait for gbrd's first
 * process to exit), or talk to a manager that is not its own. Returns a
 * new array of borrowed strings.
 */
static char **
proc_spawn_env(void)
{
	static const char *const drop[] = { "NOTIFY_SOCKET=", "LISTEN_PID=",
	    "LISTEN_FDS=", "LISTEN_FDNAMES=", "WATCHDOG_USEC=", "WATCHDOG_PID=",
	    "INVOCATION_ID=", NULL };
	char	**env;
	size_t	  n = 0, i, j, k = 0;

	while (environ[n] != NULL)
		n++;
	env = xreallocarray(NULL, n + 1, sizeof *env);
	for (i = 0; i < n; i++) {
		for (j = 0; drop[j] != NULL; j++) {
			if (strncmp(environ[i], drop[j], strlen(drop[j])) == 0)
				break;
		}
		if (drop[j] == NULL)
			env[k++] = environ[i];
	}
	env[k] = NULL;
	return env;
}

/* Runs a program and waits for its exit status. */
int
proc_spawn_wait(char *const argv[], char **cause)
{
	char	**env = proc_spawn_env();
	pid_t	  pid;
	int	  status, r;

	*cause = NULL;
	r = strchr(argv[0], '/') != NULL ?
	    posix_spawn(&pid, argv[0], NULL, NULL, argv, env) :
	    posix_spawnp(&pid, argv[0], NULL, NULL, argv, env);
	free(env);
	if (r != 0) {
		*cause = xasprintf("cannot start %s: %s", argv[0], strerror(r));
		return -1;
	}
	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			*cause = xasprintf("waitpid: %s", strerror(errno));
			return -1;
		}
	}
	if (!WIFEXITED(status)) {
		*cause = xasprintf("%s was killed by signal %d", argv[0],
		    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		return -1;
	}
	return WEXITSTATUS(status);
}

/* The running program's folder, from /proc/self/exe. */
char *
proc_self_dir(void)
{
	char	self[PATH_MAX];
	ssize_t	n;

	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0)
		return NULL;
	self[n] = '\0';
	return paths_dirname(self);
}

/* The path of a program beside the running one, if it is there. */
char *
proc_beside_self(const char *name)
{
	char	*dir, *path;

	if ((dir = proc_self_dir()) == NULL)
		return NULL;
	path = xasprintf("%s/%s", dir, name);
	free(dir);
	if (access(path, X_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/* Runs the editor through sh, so that one with arguments works. */
int
proc_run_editor(const char *editor, const char *path)
{
	pid_t	pid;
	int	status;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "exec $0 \"$1\"", editor, path,
		    (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 +
	    (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
