/*
 * Where gbr's files live on Windows (paths.h). The daemon's channel is the
 * named pipe \\.\pipe\gbr-USER; the state is %LOCALAPPDATA%\gbr\state and
 * the config %APPDATA%\gbr\gbrd.conf (else %PROGRAMDATA%\gbr\gbrd.conf, the
 * machine-wide one, as /etc is on Unix). Folders are written with forward
 * slashes ("C:/Users/alice/AppData/Local/gbr/state"), which every Win32
 * call takes and which the rest of gbr joins paths with.
 *
 * A private folder is created with a protected DACL that grants the user
 * alone (inheritable by what is made in it), and an existing one is
 * refused unless it is a real folder (not a junction or a link), owned by
 * the user, and its DACL lets no other account read or write in it (as a
 * mode with no group or other bit on Unix). A file is
 * private (a key) when its DACL lets no other account read or change it:
 * modes mean nothing here. A pipe has no
 * folder: who serves it is checked on every connection instead (the
 * transport compares the server's account with ours), so
 * paths_check_socket_dir has nothing to look at here.
 */
#include "gbr-config.h"

#include <aclapi.h>
#include <sddl.h>
#include <shlobj.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"
#include "transport-win.h"
#include "xmalloc.h"

/* The pipe every name given without a pipe prefix is put under. */
#define PATHS_PIPE_PREFIX	"\\\\.\\pipe\\"

/* Returns a non-empty environment variable (UTF-8), or NULL. */
static const char *
paths_env(const char *name)
{
	const char	*v = getenv(name);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* Turns backslashes into forward slashes, in place; returns s. */
static char *
paths_forward(char *s)
{
	char	*p;

	for (p = s; *p != '\0'; p++)
		if (*p == '\\')
			*p = '/';
	return s;
}

/* A known folder (FOLDERID_*) as UTF-8 with forward slashes, or NULL. */
static char *
paths_known_folder(const KNOWNFOLDERID *id)
{
	PWSTR	 w = NULL;
	char	*s = NULL;

	if (SHGetKnownFolderPath(id, KF_FLAG_DEFAULT, NULL, &w) == S_OK)
		s = paths_forward(transport_win_utf8(w));
	CoTaskMemFree(w);
	return s;
}

/* A per-user folder: the variable, else the known folder, else "C:/". */
static char *
paths_user_folder(const char *var, const KNOWNFOLDERID *id)
{
	const char	*v;
	char		*s;

	if ((v = paths_env(var)) != NULL)
		return paths_forward(xstrdup(v));
	if ((s = paths_known_folder(id)) != NULL)
		return s;
	return xstrdup("C:/");
}

/* This account's name (UTF-8), or NULL if it cannot be read. */
static char *
paths_user_name(void)
{
	WCHAR	w[257];
	DWORD	n = sizeof w / sizeof w[0];

	if (!GetUserNameW(w, &n))
		return NULL;
	return transport_win_utf8(w);
}

/*
 * The pipe's name: a full \\.\pipe\ name is taken as it is, a bare name
 * goes under \\.\pipe\ (so -s gbr-test works), anything else with a
 * separator is kept for the listener to refuse with its reason.
 */
static char *
paths_pipe(const char *v)
{
	if (strncmp(v, PATHS_PIPE_PREFIX, strlen(PATHS_PIPE_PREFIX)) == 0 ||
	    strchr(v, '\\') != NULL || strchr(v, '/') != NULL)
		return xstrdup(v);
	return xasprintf(PATHS_PIPE_PREFIX "%s", v);
}

const char paths_help_socket[] = "%GBR_SOCKET%, else \\\\.\\pipe\\gbr-USER; a "
    "bare NAME is \\\\.\\pipe\\NAME";
const char paths_help_state[] = "%GBR_STATE_DIR%, else "
    "%LOCALAPPDATA%\\gbr\\state";
const char paths_help_config[] = "%GBR_CONFIG%, else "
    "%APPDATA%\\gbr\\gbrd.conf, else %PROGRAMDATA%\\gbr\\gbrd.conf";

/* The user's gbr config folder: %APPDATA%/gbr. */
char *
paths_user_config_dir(void)
{
	char	*base, *s;

	base = paths_user_folder("APPDATA", &FOLDERID_RoamingAppData);
	s = xasprintf("%s/gbr", base);
	free(base);
	return s;
}

/* Resolves the pipe: flag, $GBR_SOCKET, else \\.\pipe\gbr-USER. */
char *
paths_socket(const char *flag)
{
	const char	*v;
	char		*user, *p, *s;

	if (flag != NULL && *flag != '\0')
		return paths_pipe(flag);
	if ((v = paths_env("GBR_SOCKET")) != NULL)
		return paths_pipe(v);
	if ((user = paths_user_name()) == NULL)
		user = xasprintf("pid%lu", (unsigned long)GetCurrentProcessId());
	/* A pipe name may hold anything but a backslash. */
	for (p = user; *p != '\0'; p++)
		if (*p == '\\')
			*p = '_';
	s = xasprintf(PATHS_PIPE_PREFIX "gbr-%s", user);
	free(user);
	return s;
}

/* Resolves the state folder: flag, $GBR_STATE_DIR, %LOCALAPPDATA%/gbr/state. */
char *
paths_state_dir(const char *flag)
{
	const char	*v;
	char		*base, *s;

	if (flag != NULL && *flag != '\0')
		return paths_forward(xstrdup(flag));
	if ((v = paths_env("GBR_STATE_DIR")) != NULL)
		return paths_forward(xstrdup(v));
	base = paths_user_folder("LOCALAPPDATA", &FOLDERID_LocalAppData);
	s = xasprintf("%s/gbr/state", base);
	free(base);
	return s;
}

/* Resolves the config: flag, $GBR_CONFIG, %APPDATA%, %PROGRAMDATA%, none. */
char *
paths_config(const char *flag)
{
	const char	*v;
	char		*base, *path;

	if (flag != NULL && *flag != '\0')
		return paths_forward(xstrdup(flag));
	if ((v = paths_env("GBR_CONFIG")) != NULL)
		return paths_forward(xstrdup(v));
	base = paths_user_folder("APPDATA", &FOLDERID_RoamingAppData);
	path = xasprintf("%s/gbr/gbrd.conf", base);
	free(base);
	if (access(path, F_OK) == 0)
		return path;
	free(path);
	base = paths_user_folder("PROGRAMDATA", &FOLDERID_ProgramData);
	path = xasprintf("%s/gbr/gbrd.conf", base);
	free(base);
	if (access(path, F_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/* The folder part of a path, by either separator; a drive's root stays. */
char *
paths_dirname(const char *path)
{
	const char	*a = strrchr(path, '/'), *b = strrchr(path, '\\');
	const char	*slash = a == NULL || (b != NULL && b > a) ? b : a;
	size_t		 root = 0;

	if (((path[0] >= 'A' && path[0] <= 'Z') || (path[0] >= 'a' &&
	    path[0] <= 'z')) && path[1] == ':')
		root = 2;
	if (slash == NULL)
		return root != 0 ? xasprintf("%.2s/", path) : xstrdup(".");
	if ((size_t)(slash - path) <= root)
		return xstrndup(path, root + 1);
	return xstrndup(path, (size_t)(slash - path));
}

/* Absolute here means a drive letter and its root. */
int
paths_is_absolute(const char *path)
{
	return path != NULL && ((path[0] >= 'A' && path[0] <= 'Z') ||
	    (path[0] >= 'a' && path[0] <= 'z')) && path[1] == ':' &&
	    (path[2] == '/' || path[2] == '\\');
}

/* The root of an absolute path is its drive and the separator after it. */
size_t
paths_root_len(const char *path)
{
	return paths_is_absolute(path) ? 3 : 0;
}

/*
 * The home: an absolute $HOME (Git for Windows and MSYS set one), else
 * %USERPROFILE%, else the profile known folder.
 */
char *
paths_home_dir(void)
{
	const char	*v;

	if ((v = paths_env("HOME")) != NULL && paths_is_absolute(v))
		return paths_forward(xstrdup(v));
	if ((v = paths_env("USERPROFILE")) != NULL && paths_is_absolute(v))
		return paths_forward(xstrdup(v));
	return paths_known_folder(&FOLDERID_Profile);
}

/* The calling process's user SID (a new allocation), or NULL. */
static PSID
paths_user_sid(void)
{
	HANDLE		 tok;
	unsigned char	 buf[512];
	DWORD		 n;
	PSID		 sid = NULL;

	if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok))
		return NULL;
	if (GetTokenInformation(tok, TokenUser, buf, sizeof buf, &n)) {
		n = GetLengthSid(((TOKEN_USER *)buf)->User.Sid);
		sid = xmalloc(n);
		CopySid(n, sid, ((TOKEN_USER *)buf)->User.Sid);
	}
	CloseHandle(tok);
	return sid;
}

/* Creates dir with a DACL for the user alone. Returns 0, or -1 with errno. */
static int
paths_mkdir_private(const char *dir)
{
	SECURITY_ATTRIBUTES	 sa = { sizeof sa, NULL, FALSE };
	PSECURITY_DESCRIPTOR	 sd = NULL;
	PSID			 sid;
	LPSTR			 ssid = NULL;
	WCHAR			*w;
	char			*sddl;
	int			 r = -1;

	if ((sid = paths_user_sid()) == NULL ||
	    !ConvertSidToStringSidA(sid, &ssid)) {
		free(sid);
		errno = EACCES;
		return -1;
	}
	/* Protected (P): nothing inherited from the parent; OICI: inherited
	 * by every file and folder made in it. */
	sddl = xasprintf("D:P(A;OICI;FA;;;%s)", ssid);
	LocalFree(ssid);
	free(sid);
	if (!ConvertStringSecurityDescriptorToSecurityDescriptorA(sddl,
	    SDDL_REVISION_1, &sd, NULL)) {
		free(sddl);
		errno = EINVAL;
		return -1;
	}
	free(sddl);
	sa.lpSecurityDescriptor = sd;
	if ((w = transport_win_wide(dir)) == NULL) {
		LocalFree(sd);
		errno = EINVAL;
		return -1;
	}
	if (CreateDirectoryW(w, &sa))
		r = 0;
	else
		errno = GetLastError() == ERROR_ALREADY_EXISTS ? EEXIST :
		    GetLastError() == ERROR_PATH_NOT_FOUND ? ENOENT : EACCES;
	free(w);
	LocalFree(sd);
	return r;
}

/*
 * 1 if the DACL lets an account other than ours, SYSTEM and the
 * Administrators group (who can take any file anyway) have any of the
 * rights in mask; a missing DACL lets everyone in. Entries that only pass
 * to what is made inside do not count; every allowing entry but the
 * plain kind does, as it cannot be read here (never too lenient).
 */
static int
paths_dacl_lets_others(PACL dacl, DWORD mask)
{
	ACE_HEADER		*h;
	ACCESS_ALLOWED_ACE	*ace;
	PSID			 me, sid;
	DWORD			 i;
	int			 others = 0;

	if (dacl == NULL || (me = paths_user_sid()) == NULL)
		return 1;
	for (i = 0; i < dacl->AceCount && !others; i++) {
		if (!GetAce(dacl, i, (void **)&h) ||
		    (h->AceFlags & INHERIT_ONLY_ACE) ||
		    h->AceType == ACCESS_DENIED_ACE_TYPE ||
		    h->AceType == ACCESS_DENIED_OBJECT_ACE_TYPE ||
		    h->AceType == ACCESS_DENIED_CALLBACK_ACE_TYPE ||
		    h->AceType == ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE)
			continue;
		if (h->AceType != ACCESS_ALLOWED_ACE_TYPE) {
			others = 1;
			continue;
		}
		ace = (ACCESS_ALLOWED_ACE *)h;
		sid = (PSID)&ace->SidStart;
		if ((ace->Mask & mask) == 0 || EqualSid(sid, me) ||
		    IsWellKnownSid(sid, WinLocalSystemSid) ||
		    IsWellKnownSid(sid, WinBuiltinAdministratorsSid) ||
		    IsWellKnownSid(sid, WinCreatorOwnerSid))
			continue;
		others = 1;
	}
	free(me);
	return others;
}

/*
 * 1 if the folder's DACL lets another account list or read it, or write
 * in it: what a Unix mode with a group or other bit lets them.
 */
static int
paths_others_may_enter(const char *dir)
{
	PSECURITY_DESCRIPTOR	 sd = NULL;
	PACL			 dacl = NULL;
	WCHAR			*w;
	int			 others = 1;

	if ((w = transport_win_wide(dir)) == NULL)
		return 1;
	if (GetNamedSecurityInfoW(w, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION,
	    NULL, NULL, &dacl, NULL, &sd) == ERROR_SUCCESS)
		others = paths_dacl_lets_others(dacl, FILE_LIST_DIRECTORY |
		    FILE_READ_DATA | FILE_WRITE_DATA | FILE_APPEND_DATA |
		    FILE_ADD_FILE | FILE_ADD_SUBDIRECTORY | FILE_DELETE_CHILD |
		    WRITE_DAC | WRITE_OWNER | GENERIC_READ | GENERIC_WRITE |
		    GENERIC_ALL);
	LocalFree(sd);
	free(w);
	return others;
}

/* Creates missing parents of dir (existing ones untouched). */
static int
paths_mkparents(const char *dir, char **cause)
{
	char	*copy = xstrdup(dir), *p;

	/* Past the drive's root: "C:/" itself is never made. */
	p = copy + (paths_root_len(copy) > 0 ? paths_root_len(copy) : 1);
	for (; *p != '\0'; p++) {
		if (*p != '/' && *p != '\\')
			continue;
		*p = '\0';
		if (paths_mkdir_private(copy) != 0 && errno != EEXIST) {
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

/* Creates and checks a private folder (see the top of this file). */
int
paths_private_dir(const char *dir, int parents, char **cause)
{
	struct stat	sb;

	*cause = NULL;
	if (parents && paths_mkparents(dir, cause) != 0)
		return -1;
	if (paths_mkdir_private(dir) != 0 && errno != EEXIST) {
		*cause = xasprintf("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &sb) != 0) {
		*cause = xasprintf("cannot check %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		*cause = xasprintf("%s is not a folder (a link, junction or file "
		    "is in the way; remove it)", dir);
		return -1;
	}
	if (sb.st_uid != getuid()) {
		*cause = xasprintf("%s is owned by another account, not by you",
		    dir);
		return -1;
	}
	if (paths_others_may_enter(dir)) {
		*cause = xasprintf("%s lets other accounts read or write in it; "
		    "it must be private (remove the other accounts from its "
		    "permissions, or delete it and let gbr make it)", dir);
		return -1;
	}
	return 0;
}

/*
 * A file is private when its DACL, read from the open handle (the file
 * checked is the file read), lets no other account read or change it.
 */
int
paths_fd_private(int fd, const char *path, char **cause)
{
	PSECURITY_DESCRIPTOR	 sd = NULL;
	PACL			 dacl = NULL;
	HANDLE			 h = (HANDLE)_get_osfhandle(fd);
	DWORD			 err;
	char			*shown, *p;
	int			 others;

	*cause = NULL;
	if (h == INVALID_HANDLE_VALUE || (err = GetSecurityInfo(h,
	    SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL, &dacl,
	    NULL, &sd)) != ERROR_SUCCESS) {
		*cause = xasprintf("cannot read the permissions of %s", path);
		return -1;
	}
	others = paths_dacl_lets_others(dacl, FILE_READ_DATA |
	    FILE_WRITE_DATA | FILE_APPEND_DATA | WRITE_DAC | WRITE_OWNER |
	    GENERIC_READ | GENERIC_WRITE | GENERIC_ALL);
	LocalFree(sd);
	if (!others)
		return 0;
	/* icacls wants the system's backslashes. */
	shown = xstrdup(path);
	for (p = shown; *p != '\0'; p++)
		if (*p == '/')
			*p = '\\';
	*cause = xasprintf("its permissions let other accounts read it (run: "
	    "icacls \"%s\" /inheritance:r /grant:r \"%%USERNAME%%:F\")", shown);
	free(shown);
	return -1;
}

/* Names an account for a person: this user's name, or "another account". */
char *
paths_uid_name(uid_t uid)
{
	char	*name;

	if (uid == getuid() && (name = paths_user_name()) != NULL)
		return name;
	return xstrdup("another account");
}

/* A pipe has no folder; its server is checked on connection instead. */
int
paths_check_socket_dir(const char *dir, char **cause)
{
	*cause = NULL;
	return 0;
}
