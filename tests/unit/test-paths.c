/*
 * Unit tests for the clients' socket-folder check (paths_check_socket_dir):
 * a missing folder, private and readable folders that pass, group- and
 * other-writable ones, a symlink, a file, a folder of another uid (as root,
 * or a root-owned one otherwise), and a path that cannot be looked at. Each
 * refusal must name the folder, its owner and mode, and the way out.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include "paths.h"
#include "unit.h"
#include "xmalloc.h"

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

int
main(void)
{
	char		 tmpl[] = "/tmp/gbr-test-paths-XXXXXX";
	char		*top, *dir, *link, *file, *below, *cause, *name, *me;
	struct stat	 sb;
	int		 fd, r;

	if ((top = mkdtemp(tmpl)) == NULL) {
		perror("mkdtemp");
		return 1;
	}
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
	rmdir(top);
	free(dir);
	free(link);
	free(file);
	free(below);
	free(me);
	return unit_done();
}
