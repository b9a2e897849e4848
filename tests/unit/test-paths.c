/*
 * Unit tests for platform/paths: on every system, what is absolute, the
 * private folder (paths_private_dir) and the private file
 * (paths_fd_private), each refused once others may get in, with the way
 * out. Then, where the daemon's channel is a socket in a folder (Unix),
 * the clients' socket-folder check (paths_check_socket_dir): a missing
 * folder, private and readable folders that pass, group- and
 * other-writable ones, a symlink, a file, a folder of another uid (as
 * root, or a root-owned one otherwise), and a path that cannot be looked
 * at. Each refusal must name the folder, its owner and mode, and the way
 * out. On Windows the channel is a named pipe, which has no folder: those
 * checks are skipped, saying so.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "paths.h"
#include "unit.h"
#include "xmalloc.h"

#ifndef GBR_PATHS_WINDOWS
/* Sets dir's mode, checks it, and returns the result; *cause is kept. */
static int
check_mode(const char *dir, mode_t mode, char **cause)
{
	if (chmod(dir, mode) != 0)
		return -2;
	return paths_check_socket_dir(dir, cause);
}

/* True when s contains every one of the NULL-terminated words. */
static int
says(const char *s, const char *const *words)
{
	if (s == NULL)
		return 0;
	for (; *words != NULL; words++) {
		if (strstr(s, *words) == NULL)
			return 0;
	}
	return 1;
}

/* The socket folder's checks (see the top of the file). */
static void
check_socket_dir(const char *top)
{
	char		*dir, *link, *file, *below, *cause, *name, *me;
	struct stat	 sb;
	int		 fd, r;

	dir = xasprintf("%s/run", top);
	link = xasprintf("%s/link", top);
	file = xasprintf("%s/file", top);
	below = xasprintf("%s/file/run", top);
	me = xasprintf("(uid %ld)", (long)getuid());

	r = paths_check_socket_dir(dir, &cause);
	CHECK(r == 1 && cause == NULL, "a missing folder is not an error (1)");

	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	r = check_mode(dir, 0700, &cause);
	CHECK(r == 0 && cause == NULL, "a private folder of ours passes");
	r = check_mode(dir, 0755, &cause);
	CHECK(r == 0 && cause == NULL, "others may read and search it");
	r = check_mode(dir, 0750, &cause);
	CHECK(r == 0 && cause == NULL, "so may the group");

	r = check_mode(dir, 0770, &cause);
	CHECK(r == -1 && says(cause, (const char *const[]){ dir, "mode 0770",
	    me, "chmod 700", "GBR_SOCKET", NULL }),
	    "a group-writable folder is refused: %s", cause);
	free(cause);
	r = check_mode(dir, 0702, &cause);
	CHECK(r == -1 && says(cause, (const char *const[]){ "mode 0702",
	    NULL }), "an other-writable folder is refused");
	free(cause);
	r = check_mode(dir, 01777, &cause);
	CHECK(r == -1 && says(cause, (const char *const[]){ "mode 1777",
	    NULL }), "the sticky bit does not make it safe");
	free(cause);
	check_mode(dir, 0700, &cause);

	CHECK(symlink(dir, link) == 0, "symlink");
	r = paths_check_socket_dir(link, &cause);
	CHECK(r == -1 && says(cause, (const char *const[]){ link,
	    "symbolic link", me, "mode 0777", "XDG_RUNTIME_DIR", NULL }),
	    "a symlink to a good folder is refused: %s", cause);
	free(cause);

	fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd != -1, "create a file");
	close(fd);
	r = paths_check_socket_dir(file, &cause);
	CHECK(r == -1 && says(cause, (const char *const[]){ file,
	    "not a folder", "mode 0600", NULL }), "a file is refused");
	free(cause);
	r = paths_check_socket_dir(below, &cause);
	CHECK(r == -1 && says(cause, (const char *const[]){ below,
	    "cannot check", NULL }), "a path through a file is refused");
	free(cause);

	/* Another user's folder: ours made foreign as root, else root's own. */
	if (getuid() == 0) {
		CHECK(chown(dir, 65534, 65534) == 0, "chown to uid 65534");
		r = paths_check_socket_dir(dir, &cause);
		CHECK(r == -1 && says(cause, (const char *const[]){ dir,
		    "(uid 65534)", "not by you (uid 0)", "mode 0700",
		    "fake gbrd", "ask the owner of", NULL }),
		    "a folder of another uid is refused: %s", cause);
		free(cause);
	} else if (stat("/", &sb) == 0 && sb.st_uid != getuid()) {
		r = paths_check_socket_dir("/", &cause);
		CHECK(r == -1 && says(cause, (const char *const[]){
		    "not by you", "ask the owner of /", NULL }),
		    "root's folder is refused to an ordinary user: %s", cause);
		free(cause);
	}

	name = paths_uid_name(getuid());
	CHECK(says(name, (const char *const[]){ me, NULL }),
	    "paths_uid_name names the uid: %s", name);
	free(name);

	unlink(link);
	unlink(file);
	rmdir(dir);
	free(dir);
	free(link);
	free(file);
	free(below);
	free(me);
}
#endif

/*
 * What is absolute, and private folders and files, on every system: each
 * is refused once others may get in, with the way out the platform says.
 */
static void
check_private(const char *top)
{
	char	*dir, *file, *cause = NULL;
	int	 fd, r;

	CHECK(paths_is_absolute(top) && !paths_is_absolute("relative/x") &&
	    !paths_is_absolute(""), "the test's folder is absolute (%s), "
	    "\"relative/x\" is not", top);

	dir = xasprintf("%s/private/sub", top);
	r = paths_private_dir(dir, 1, &cause);
	CHECK(r == 0 && cause == NULL, "paths_private_dir makes a private "
	    "folder and its parents (%s)", r == 0 ? "ok" : cause);
	free(cause);
	r = paths_private_dir(dir, 0, &cause);
	CHECK(r == 0, "and takes it again as it is (%s)", r == 0 ? "ok" :
	    cause);
	free(cause);
	CHECK(unit_set_shared(dir, UNIT_WRITE) == 0, "let others in");
	r = paths_private_dir(dir, 0, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, dir) != NULL &&
	    strstr(cause, "private") != NULL, "a folder others may write in "
	    "is refused: %s", cause);
	free(cause);
	unit_set_shared(dir, UNIT_READ);
	r = paths_private_dir(dir, 0, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, dir) != NULL &&
	    strstr(cause, "private") != NULL, "so is one they may only read: "
	    "%s", cause);
	free(cause);
	unit_set_shared(dir, UNIT_PRIVATE);

	file = xasprintf("%s/key", dir);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd != -1 && unit_set_shared(file, UNIT_PRIVATE) == 0,
	    "a file of ours alone");
	if (fd != -1)
		close(fd);
	fd = open(file, O_RDONLY);
	r = paths_fd_private(fd, file, &cause);
	CHECK(r == 0 && cause == NULL, "paths_fd_private takes it (%s)",
	    r == 0 ? "ok" : cause);
	free(cause);
	close(fd);
	unit_set_shared(file, UNIT_READ);
	fd = open(file, O_RDONLY);
	r = paths_fd_private(fd, file, &cause);
	CHECK(r == -1 && cause != NULL && (strstr(cause, "chmod 600") !=
	    NULL || strstr(cause, "icacls") != NULL) && strstr(cause, "other") !=
	    NULL, "a file others may read is refused with the way out: %s",
	    cause);
	free(cause);
	close(fd);
	unlink(file);
	free(file);
	rmdir(dir);
	free(dir);
	dir = xasprintf("%s/private", top);
	rmdir(dir);
	free(dir);
}

int
main(void)
{
	char	top[PATH_MAX];

	unit_tmpdir(top, sizeof top, "paths");
	check_private(top);
#ifdef GBR_PATHS_WINDOWS
	{
		char	*cause = (char *)"x", *name;

		CHECK(paths_check_socket_dir(top, &cause) == 0 && cause ==
		    NULL, "a named pipe has no folder: nothing to refuse");
		unit_skip(14, "the daemon's channel is a named pipe here, "
		    "which has no folder to check (its server is checked on "
		    "connection)");
		name = paths_uid_name(getuid());
		CHECK(*name != '\0' && strcmp(name, "another account") != 0,
		    "paths_uid_name names this account: %s", name);
		free(name);
	}
#else
	check_socket_dir(top);
#endif
	rmdir(top);
	return unit_done();
}
