/*
 * Path resolution for gbr's files. The private-folder check is the first
 * layer that keeps other users away from the socket: it is done with lstat
 * so that a symlink planted in /tmp cannot redirect us. Clients make the
 * same check before they connect (paths_check_socket_dir), so that a folder
 * another user created first, such as /tmp/gbr-1000, is refused with a
 * message saying whose it is, instead of quietly reaching their server.
 */
#include "gbr-config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"
#include "xmalloc.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

/* Returns a non-empty environment variable, or NULL. */
static const char *
paths_env(const char *name)
{
	const char	*v = getenv(name);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* Returns the home folder: $HOME, else the password database, else "/". */
static const char *
paths_home(void)
{
	const char	*home = paths_env("HOME");
	struct passwd	*pw;

	if (home != NULL)
		return home;
	if ((pw = getpwuid(getuid())) != NULL && pw->pw_dir != NULL)
		return pw->pw_dir;
	return "/";
}

const char paths_help_socket[] = "$GBR_SOCKET, else "
    "$XDG_RUNTIME_DIR/gbr/gbrd.sock, else /tmp/gbr-$UID/gbrd.sock";
const char paths_help_state[] = "$GBR_STATE_DIR, else $XDG_STATE_HOME/gbr, "
    "else ~/.local/state/gbr";
const char paths_help_config[] = "$GBR_CONFIG, else "
    "$XDG_CONFIG_HOME/gbr/gbrd.conf, else " SYSCONFDIR "/gbr/gbrd.conf";

/* The user's gbr config folder, from XDG_CONFIG_HOME or the home. */
char *
paths_user_config_dir(void)
{
	const char	*x = paths_env("XDG_CONFIG_HOME"), *h = paths_env("HOME");

	if (x != NULL && paths_is_absolute(x))
		return xasprintf("%s/gbr", x);
	if (h != NULL && paths_is_absolute(h))
		return xasprintf("%s/.config/gbr", h);
	return NULL;
}

/* Resolves the socket path. */
char *
paths_socket(const char *flag)
{
	const char	*v;

	if (flag != NULL && *flag != '\0')
		return xstrdup(flag);
	if ((v = paths_env("GBR_SOCKET")) != NULL)
		return xstrdup(v);
	if ((v = paths_env("XDG_RUNTIME_DIR")) != NULL)
		return xasprintf("%s/gbr/gbrd.sock", v);
	return xasprintf("/tmp/gbr-%ld/gbrd.sock", (long)getuid());
}

/* Resolves the state folder. */
char *
paths_state_dir(const char *flag)
{
	const char	*v;

	if (flag != NULL && *flag != '\0')
		return xstrdup(flag);
	if ((v = paths_env("GBR_STATE_DIR")) != NULL)
		return xstrdup(v);
	if ((v = paths_env("XDG_STATE_HOME")) != NULL)
		return xasprintf("%s/gbr", v);
	return xasprintf("%s/.local/state/gbr", paths_home());
}

/* Resolves the daemon config file, or NULL for built-in defaults. */
char *
paths_config(const char *flag)
{
	const char	*v;
	char		*path;

	if (flag != NULL && *flag != '\0')
		return xstrdup(flag);
	if ((v = paths_env("GBR_CONFIG")) != NULL)
		return xstrdup(v);
	if ((v = paths_env("XDG_CONFIG_HOME")) != NULL)
		path = xasprintf("%s/gbr/gbrd.conf", v);
	else
		path = xasprintf("%s/.config/gbr/gbrd.conf", paths_home());
	if (access(path, F_OK) == 0)
		return path;
	free(path);
	path = xstrdup(SYSCONFDIR "/gbr/gbrd.conf");
	if (access(path, F_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/* Returns the folder part of a path ("." when there is none). */
char *
paths_dirname(const char *path)
{
	const char	*slash = strrchr(path, '/');

	if (slash == NULL)
		return xstrdup(".");
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

/* An absolute path starts at the root. */
int
paths_is_absolute(const char *path)
{
	return path != NULL && path[0] == '/';
}

/* The root of an absolute path is its first '/'. */
size_t
paths_root_len(const char *path)
{
	return paths_is_absolute(path) ? 1 : 0;
}

/* The home: $HOME when it is absolute (no other guess: see paths.h). */
char *
paths_home_dir(void)
{
	const char	*v = paths_env("HOME");

	return v != NULL && paths_is_absolute(v) ? xstrdup(v) : NULL;
}

/* Creates missing parents of dir with mode 0700 (existing ones untouched). */
static int
paths_mkparents(const char *dir, char **cause)
{
	char	*copy = xstrdup(dir), *p;

	for (p = copy + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
			*cause = xasprintf("cannot create %s: %s", copy,
			    strerror(errno));
			free(copy);
			return -1;
		}
		*p = '/';
	}
	free(copy);
	return 0;
}

/* Creates and checks a private folder. */
int
paths_private_dir(const char *dir, int parents, char **cause)
{
	struct stat	sb;

	*cause = NULL;
	if (parents && paths_mkparents(dir, cause) != 0)
		return -1;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		*cause = xasprintf("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &sb) != 0) {
		*cause = xasprintf("cannot check %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		*cause = xasprintf("%s is not a directory (a symlink or file is "
		    "in the way; remove it)", dir);
		return -1;
	}
	if (sb.st_uid != getuid()) {
		*cause = xasprintf("%s is owned by uid %ld, not by us (uid %ld)",
		    dir, (long)sb.st_uid, (long)getuid());
		return -1;
	}
	if ((sb.st_mode & 077) != 0) {
		*cause = xasprintf("%s has mode %03o; it must be private "
		    "(chmod 700 %s)", dir, (unsigned)(sb.st_mode & 0777), dir);
		return -1;
	}
	return 0;
}

/* A file is private when neither its group nor others have a permission bit. */
int
paths_fd_private(int fd, const char *path, char **cause)
{
	struct stat	sb;

	*cause = NULL;
	if (fstat(fd, &sb) != 0) {
		*cause = xasprintf("cannot check %s: %s", path, strerror(errno));
		return -1;
	}
	if ((sb.st_mode & 077) != 0) {
		*cause = xasprintf("mode %04o lets others read it (run: chmod "
		    "600 %s)", (unsigned)(sb.st_mode & 07777), path);
		return -1;
	}
	return 0;
}

/* Names a user: "alice (uid 1000)", or "uid 1000" when nobody has that uid. */
char *
paths_uid_name(uid_t uid)
{
	struct passwd	*pw;

	if ((pw = getpwuid(uid)) != NULL && pw->pw_name != NULL &&
	    *pw->pw_name != '\0')
		return xasprintf("%s (uid %ld)", pw->pw_name, (long)uid);
	return xasprintf("uid %ld", (long)uid);
}

/*
 * Checks a socket folder before a client connects there (see paths.h). The
 * daemon itself insists on 0700; a client is a little more lenient about
 * read and search bits because they give nobody a way in (the socket is
 * 0600 and the daemon checks every peer's uid), but it refuses anything
 * that would let another user put a socket of their own in our path.
 */
int
paths_check_socket_dir(const char *dir, char **cause)
{
	struct stat	 sb;
	char		*owner;
	unsigned	 mode;
	uid_t		 uid = getuid();

	*cause = NULL;
	if (lstat(dir, &sb) != 0) {
		if (errno == ENOENT)
			return 1;
		*cause = xasprintf("cannot check the socket folder %s: %s; %s",
		    dir, strerror(errno), PATHS_SOCKET_WAY_OUT);
		return -1;
	}
	if (S_ISDIR(sb.st_mode) && sb.st_uid == uid &&
	    (sb.st_mode & (S_IWGRP | S_IWOTH)) == 0)
		return 0;

	owner = paths_uid_name(sb.st_uid);
	mode = (unsigned)(sb.st_mode & 07777);
	if (S_ISLNK(sb.st_mode)) {
		*cause = xasprintf("refusing the socket folder %s: it is a "
		    "symbolic link (owned by %s, mode %04o), not a real folder, "
		    "and could lead anywhere; remove the link, or %s", dir,
		    owner, mode, PATHS_SOCKET_WAY_OUT);
	} else if (!S_ISDIR(sb.st_mode)) {
		*cause = xasprintf("refusing the socket folder %s: it is not a "
		    "folder (owned by %s, mode %04o); remove it, or %s", dir,
		    owner, mode, PATHS_SOCKET_WAY_OUT);
	} else if (sb.st_uid != uid) {
		*cause = xasprintf("refusing the socket folder %s: it is owned "
		    "by %s, not by you (uid %ld), mode %04o; another user may "
		    "be running a fake gbrd there, so %s, or ask the owner of "
		    "%s to remove it", dir, owner, (long)uid, mode,
		    PATHS_SOCKET_WAY_OUT, dir);
	} else {
		*cause = xasprintf("refusing the socket folder %s: it is owned "
		    "by %s but has mode %04o, so other users may write in it "
		    "and replace the socket; make it private (chmod 700 %s), "
		    "or %s", dir, owner, mode, dir, PATHS_SOCKET_WAY_OUT);
	}
	free(owner);
	return -1;
}
