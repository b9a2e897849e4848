/*
 * The parts of compat-win.h that are not files: the one table from Win32
 * errors and NTSTATUS values to errno, UTF-8 <-> UTF-16, the environment
 * in UTF-8, who "we" are (getuid and the owner rule of st_uid), the string
 * functions the C runtime lacks, and the start-up that makes the standard
 * streams binary. Everything here is shared by the other compat-win-*.c
 * files through compat-win-impl.h.
 */
#include "compat-win-impl.h"

#include <aclapi.h>

/* Win32 errors mingw-w64's winerror.h lacks. */
#ifndef ERROR_DIRECTORY_NOT_SUPPORTED
#define ERROR_DIRECTORY_NOT_SUPPORTED	336
#endif
#ifndef ERROR_STOPPED_ON_SYMLINK
#define ERROR_STOPPED_ON_SYMLINK	681
#endif
#ifndef ERROR_DISK_QUOTA_EXCEEDED
#define ERROR_DISK_QUOTA_EXCEEDED	1295
#endif

/*
 * Win32 errors and NTSTATUS values in one table: they never collide, since
 * every NTSTATUS that is not a success has one of its top two bits set and
 * every Win32 error is below 0x10000. An NTSTATUS missing here goes
 * through RtlNtStatusToDosError and then the Win32 rows; the NTSTATUS rows
 * are the ones whose Win32 translation loses the meaning (a directory
 * where a file was wanted is "access denied" to Win32, for one).
 */
static const struct {
	uint32_t	code;
	int		err;
} cw_errmap[] = {
	{ ERROR_INVALID_FUNCTION,		EINVAL },
	{ ERROR_FILE_NOT_FOUND,			ENOENT },
	{ ERROR_PATH_NOT_FOUND,			ENOENT },
	{ ERROR_TOO_MANY_OPEN_FILES,		EMFILE },
	{ ERROR_ACCESS_DENIED,			EACCES },
	{ ERROR_INVALID_HANDLE,			EBADF },
	{ ERROR_NOT_ENOUGH_MEMORY,		ENOMEM },
	{ ERROR_INVALID_ACCESS,			EACCES },
	{ ERROR_INVALID_DATA,			EINVAL },
	{ ERROR_OUTOFMEMORY,			ENOMEM },
	{ ERROR_INVALID_DRIVE,			ENOENT },
	{ ERROR_CURRENT_DIRECTORY,		EBUSY },
	{ ERROR_NOT_SAME_DEVICE,		EXDEV },
	{ ERROR_NO_MORE_FILES,			ENOENT },
	{ ERROR_WRITE_PROTECT,			EROFS },
	{ ERROR_NOT_READY,			EAGAIN },
	{ ERROR_CRC,				EIO },
	{ ERROR_SEEK,				EIO },
	{ ERROR_SHARING_VIOLATION,		EBUSY },
	{ ERROR_LOCK_VIOLATION,			EACCES },
	{ ERROR_HANDLE_DISK_FULL,		ENOSPC },
	{ ERROR_NOT_SUPPORTED,			ENOTSUP },
	{ ERROR_BAD_NETPATH,			ENOENT },
	{ ERROR_NETWORK_ACCESS_DENIED,		EACCES },
	{ ERROR_BAD_NET_NAME,			ENOENT },
	{ ERROR_FILE_EXISTS,			EEXIST },
	{ ERROR_INVALID_PARAMETER,		EINVAL },
	{ ERROR_BROKEN_PIPE,			EPIPE },
	{ ERROR_OPEN_FAILED,			EIO },
	{ ERROR_BUFFER_OVERFLOW,		ENAMETOOLONG },
	{ ERROR_DISK_FULL,			ENOSPC },
	{ ERROR_INSUFFICIENT_BUFFER,		ERANGE },
	{ ERROR_INVALID_NAME,			EINVAL },
	{ ERROR_NEGATIVE_SEEK,			EINVAL },
	{ ERROR_DIR_NOT_EMPTY,			ENOTEMPTY },
	{ ERROR_PATH_BUSY,			EBUSY },
	{ ERROR_BAD_PATHNAME,			ENOENT },
	{ ERROR_BUSY,				EBUSY },
	{ ERROR_ALREADY_EXISTS,			EEXIST },
	{ ERROR_FILENAME_EXCED_RANGE,		ENAMETOOLONG },
	{ ERROR_NO_DATA,			EPIPE },
	{ ERROR_DIRECTORY,			ENOTDIR },
	{ ERROR_DELETE_PENDING,			ENOENT },
	{ ERROR_DIRECTORY_NOT_SUPPORTED,	EISDIR },
	{ ERROR_STOPPED_ON_SYMLINK,		ELOOP },
	{ ERROR_NOACCESS,			EFAULT },
	{ ERROR_NO_UNICODE_TRANSLATION,		EILSEQ },
	{ ERROR_IO_DEVICE,			EIO },
	{ ERROR_DISK_QUOTA_EXCEEDED,		EDQUOT },
	{ ERROR_PRIVILEGE_NOT_HELD,		EPERM },
	{ ERROR_CANT_ACCESS_FILE,		EACCES },
	{ ERROR_CANT_RESOLVE_FILENAME,		ELOOP },
	{ ERROR_NOT_A_REPARSE_POINT,		EINVAL },
	{ ERROR_INVALID_REPARSE_DATA,		EINVAL },
	{ STATUS_NOT_IMPLEMENTED,		ENOSYS },
	{ STATUS_INVALID_INFO_CLASS,		EINVAL },
	{ STATUS_INVALID_HANDLE,		EBADF },
	{ STATUS_INVALID_PARAMETER,		EINVAL },
	{ STATUS_NO_MEMORY,			ENOMEM },
	{ STATUS_ACCESS_DENIED,			EACCES },
	{ STATUS_OBJECT_NAME_INVALID,		EINVAL },
	{ STATUS_OBJECT_NAME_NOT_FOUND,		ENOENT },
	{ STATUS_OBJECT_NAME_COLLISION,		EEXIST },
	{ STATUS_OBJECT_PATH_NOT_FOUND,		ENOENT },
	{ STATUS_OBJECT_PATH_SYNTAX_BAD,	ENOENT },
	{ STATUS_SHARING_VIOLATION,		EBUSY },
	{ STATUS_QUOTA_EXCEEDED,		EDQUOT },
	{ STATUS_DELETE_PENDING,		ENOENT },
	{ STATUS_PRIVILEGE_NOT_HELD,		EPERM },
	{ STATUS_DISK_FULL,			ENOSPC },
	{ STATUS_INSUFFICIENT_RESOURCES,	ENOMEM },
	{ STATUS_MEDIA_WRITE_PROTECTED,		EROFS },
	{ STATUS_FILE_IS_A_DIRECTORY,		EISDIR },
	{ STATUS_NOT_SUPPORTED,			ENOTSUP },
	{ STATUS_NOT_SAME_DEVICE,		EXDEV },
	{ STATUS_DIRECTORY_NOT_EMPTY,		ENOTEMPTY },
	{ STATUS_NOT_A_DIRECTORY,		ENOTDIR },
	{ STATUS_NAME_TOO_LONG,			ENAMETOOLONG },
	{ STATUS_TOO_MANY_OPENED_FILES,		EMFILE },
	{ STATUS_CANNOT_DELETE,			EACCES },
	{ STATUS_FILE_DELETED,			ENOENT },
	{ STATUS_NOT_A_REPARSE_POINT,		EINVAL },
	{ STATUS_IO_REPARSE_TAG_NOT_HANDLED,	EOPNOTSUPP },
	{ STATUS_REPARSE_POINT_NOT_RESOLVED,	ELOOP },
	{ STATUS_STOPPED_ON_SYMLINK,		ELOOP },
};

/* The row for code, or 0 (every row's errno is non-zero). */
static int
cw_errmap_find(uint32_t code)
{
	size_t	i;

	for (i = 0; i < sizeof cw_errmap / sizeof cw_errmap[0]; i++) {
		if (cw_errmap[i].code == code)
			return cw_errmap[i].err;
	}
	return 0;
}

/* The errno for a Win32 error (EIO for one the table lacks). */
int
cw_errno_win32(DWORD code)
{
	int	err;

	err = cw_errmap_find(code);
	return err != 0 ? err : EIO;
}

/* The errno for an NTSTATUS. */
int
cw_errno_nt(NTSTATUS st)
{
	int	err;

	err = cw_errmap_find((uint32_t)st);
	if (err != 0)
		return err;
	return cw_errno_win32(RtlNtStatusToDosError(st));
}

/* Sets errno from a Win32 error; returns -1. */
int
cw_err_win32(DWORD code)
{
	errno = cw_errno_win32(code);
	return -1;
}

/* Sets errno from an NTSTATUS; returns -1. */
int
cw_err_nt(NTSTATUS st)
{
	errno = cw_errno_nt(st);
	return -1;
}

/*
 * Decodes one UTF-8 sequence of s (n bytes left) into *cp; returns its
 * length, or 0 if it is not UTF-8. Encoded surrogates (WTF-8) are taken,
 * because that is how cw_utf8 writes a lone one from NTFS.
 */
static size_t
cw_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t	len, i;
	uint32_t c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
		min = 0x10000;
	} else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff)
		return 0;
	*cp = c;
	return len;
}

/*
 * Converts s into UTF-16 units at out (NULL: only counts them); returns the
 * count, or -1 (EILSEQ) if s is not UTF-8, or not WTF-8 (an encoded high
 * surrogate followed by an encoded low one should have been one 4-byte
 * sequence).
 */
static ssize_t
cw_to_wide(const char *s, size_t n, int slashes, wchar_t *out)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 i = 0, len, units = 0;
	uint32_t		 c;
	int			 high = 0;

	while (i < n) {
		if ((len = cw_decode(p + i, n - i, &c)) == 0) {
			errno = EILSEQ;
			return -1;
		}
		i += len;
		if (c >= 0xdc00 && c <= 0xdfff && high) {
			errno = EILSEQ;
			return -1;
		}
		high = c >= 0xd800 && c <= 0xdbff;
		if (c >= 0x10000) {
			if (out != NULL) {
				c -= 0x10000;
				out[units] = (wchar_t)(0xd800 + (c >> 10));
				out[units + 1] = (wchar_t)(0xdc00 + (c & 0x3ff));
			}
			units += 2;
			continue;
		}
		if (out != NULL)
			out[units] = (slashes && c == '/') ? L'\\' : (wchar_t)c;
		units++;
	}
	return (ssize_t)units;
}

/* UTF-8 to a new UTF-16 string: see compat-win-impl.h. */
wchar_t *
cw_wide(const char *s, size_t max, int slashes, size_t *lenp)
{
	size_t	 n;
	ssize_t	 units;
	wchar_t	*w;

	n = strlen(s);
	/* Each unit takes at least one byte: check before counting. */
	if (n > max * 3) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if ((units = cw_to_wide(s, n, slashes, NULL)) == -1)
		return NULL;
	if ((size_t)units > max) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if ((w = malloc(((size_t)units + 1) * sizeof *w)) == NULL)
		return NULL;
	cw_to_wide(s, n, slashes, w);
	w[units] = L'\0';
	if (lenp != NULL)
		*lenp = (size_t)units;
	return w;
}

/* UTF-16 to UTF-8 into buf: see compat-win-impl.h. */
size_t
cw_utf8(const wchar_t *w, size_t n, char *buf, size_t size)
{
	unsigned char	 tmp[4];
	size_t		 i, out = 0, len, k;
	uint32_t	 c;

	for (i = 0; i < n; i++) {
		c = (uint16_t)w[i];
		if (c >= 0xd800 && c <= 0xdbff && i + 1 < n &&
		    (uint16_t)w[i + 1] >= 0xdc00 && (uint16_t)w[i + 1] <= 0xdfff) {
			c = 0x10000 + ((c - 0xd800) << 10) +
			    ((uint16_t)w[i + 1] - 0xdc00);
			i++;
		}
		if (c < 0x80) {
			tmp[0] = (unsigned char)c;
			len = 1;
		} else if (c < 0x800) {
			tmp[0] = (unsigned char)(0xc0 | (c >> 6));
			tmp[1] = (unsigned char)(0x80 | (c & 0x3f));
			len = 2;
		} else if (c < 0x10000) {
			tmp[0] = (unsigned char)(0xe0 | (c >> 12));
			tmp[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
			tmp[2] = (unsigned char)(0x80 | (c & 0x3f));
			len = 3;
		} else {
			tmp[0] = (unsigned char)(0xf0 | (c >> 18));
			tmp[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
			tmp[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
			tmp[3] = (unsigned char)(0x80 | (c & 0x3f));
			len = 4;
		}
		for (k = 0; k < len; k++) {
			if (out + k < size)
				buf[out + k] = (char)tmp[k];
		}
		out += len;
	}
	if (size > 0)
		buf[out < size ? out : size - 1] = '\0';
	return out;
}

/* UTF-16 to a new UTF-8 string. */
char *
cw_utf8_new(const wchar_t *w, size_t n)
{
	size_t	 len;
	char	*s;

	len = cw_utf8(w, n, NULL, 0);
	if ((s = malloc(len + 1)) == NULL)
		return NULL;
	cw_utf8(w, n, s, len + 1);
	return s;
}

/* Who we are: the token's user, and whether it is elevated. */
static INIT_ONCE	 cw_ident_once = INIT_ONCE_STATIC_INIT;
static PSID		 cw_ident_user;
static PSID		 cw_ident_admins;

/* Reads the process token once (InitOnceExecuteOnce's callback). */
static BOOL CALLBACK
cw_ident_init(PINIT_ONCE once, PVOID param, PVOID *context)
{
	HANDLE			 token;
	TOKEN_ELEVATION		 elev;
	TOKEN_USER		*user;
	DWORD			 need = 0, len;
	BYTE			 admins[SECURITY_MAX_SID_SIZE];

	if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token))
		return TRUE;
	GetTokenInformation(token, TokenUser, NULL, 0, &need);
	if (need > 0 && need < 65536 && (user = malloc(need)) != NULL) {
		if (GetTokenInformation(token, TokenUser, user, need, &need)) {
			len = GetLengthSid(user->User.Sid);
			if ((cw_ident_user = malloc(len)) != NULL)
				CopySid(len, cw_ident_user, user->User.Sid);
		}
		free(user);
	}
	/*
	 * An elevated administrator's new files are owned by the
	 * Administrators group, not by the user: those count as ours too.
	 */
	if (GetTokenInformation(token, TokenElevation, &elev, sizeof elev,
	    &need) && elev.TokenIsElevated) {
		len = sizeof admins;
		if (CreateWellKnownSid(WinBuiltinAdministratorsSid, NULL, admins,
		    &len) && (cw_ident_admins = malloc(len)) != NULL)
			CopySid(len, cw_ident_admins, admins);
	}
	CloseHandle(token);
	return TRUE;
}

/* 1 if the file's owner is us (see the top of compat-win.h), else 0. */
int
cw_owner_is_self(HANDLE h)
{
	PSID			 owner = NULL;
	PSECURITY_DESCRIPTOR	 sd = NULL;
	int			 self = 0;

	InitOnceExecuteOnce(&cw_ident_once, cw_ident_init, NULL, NULL);
	/* A file whose owner cannot be read is not ours: fail closed. */
	if (GetSecurityInfo(h, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION,
	    &owner, NULL, NULL, NULL, &sd) != ERROR_SUCCESS)
		return 0;
	if (owner != NULL && cw_ident_user != NULL &&
	    EqualSid(owner, cw_ident_user))
		self = 1;
	if (owner != NULL && cw_ident_admins != NULL &&
	    EqualSid(owner, cw_ident_admins))
		self = 1;
	LocalFree(sd);
	return self;
}

/* getuid(2): always the one identity that owns our files. */
uid_t
getuid(void)
{
	return COMPAT_UID_SELF;
}

/* geteuid(2): the same as getuid. */
uid_t
geteuid(void)
{
	return COMPAT_UID_SELF;
}

/* memmem(3). */
void *
memmem(const void *h, size_t hlen, const void *n, size_t nlen)
{
	const char	*p = h, *end;

	if (nlen == 0)
		return (void *)h;
	if (hlen < nlen)
		return NULL;
	end = p + (hlen - nlen);
	while (p <= end) {
		if ((p = memchr(p, *(const char *)n, (size_t)(end - p) + 1)) ==
		    NULL)
			return NULL;
		if (memcmp(p, n, nlen) == 0)
			return (void *)p;
		p++;
	}
	return NULL;
}

/* Lower case of an ASCII letter; other bytes as they are. */
static int
cw_lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

/* strcasestr(3), ASCII letters only (as in the C locale). */
char *
strcasestr(const char *h, const char *n)
{
	size_t	i;

	for (; ; h++) {
		for (i = 0; n[i] != '\0'; i++) {
			if (cw_lower((unsigned char)h[i]) !=
			    cw_lower((unsigned char)n[i]))
				break;
		}
		if (n[i] == '\0')
			return (char *)h;
		if (*h == '\0')
			return NULL;
	}
}

/* explicit_bzero(3): SecureZeroMemory is never optimised away. */
void
explicit_bzero(void *p, size_t n)
{
	SecureZeroMemory(p, n);
}

/* strndup(3): the C runtime has strnlen but not this. */
char *
strndup(const char *s, size_t n)
{
	size_t	 len;
	char	*d;

	len = strnlen(s, n);
	if ((d = malloc(len + 1)) == NULL)
		return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

/*
 * What getenv returned, one entry a name: a value stays valid until that
 * name is set again (POSIX's promise), so an older value the environment
 * no longer holds is kept on the entry's list until then.
 */
struct cw_env {
	struct cw_env	*next;
	char		*name;
	char		*value;
	struct cw_env	*old;		/* values handed out before */
};
static struct cw_env	*cw_envs;
static SRWLOCK		 cw_env_lock = SRWLOCK_INIT;

/* The cache entry of name, made if missing; NULL if out of memory. */
static struct cw_env *
cw_env_entry(const char *name)
{
	struct cw_env	*e;

	for (e = cw_envs; e != NULL; e = e->next) {
		if (strcmp(e->name, name) == 0)
			return e;
	}
	if ((e = calloc(1, sizeof *e)) == NULL)
		return NULL;
	if ((e->name = strdup(name)) == NULL) {
		free(e);
		return NULL;
	}
	e->next = cw_envs;
	cw_envs = e;
	return e;
}

/* Frees the values of e that getenv handed out (name is being set). */
static void
cw_env_forget(struct cw_env *e)
{
	struct cw_env	*o;

	while ((o = e->old) != NULL) {
		e->old = o->old;
		free(o->value);
		free(o);
	}
	free(e->value);
	e->value = NULL;
}

/* getenv(3) in UTF-8 from the process's (UTF-16) environment. */
char *
compat_getenv(const char *name)
{
	wchar_t		*wname, *wvalue;
	DWORD		 n, got;
	char		*value, *ret = NULL;
	struct cw_env	*e, *o;

	if ((wname = cw_wide(name, CW_NAME_MAX, 0, NULL)) == NULL)
		return NULL;
	n = GetEnvironmentVariableW(wname, NULL, 0);
	if (n == 0 || n > CW_NAME_MAX + 1 ||
	    (wvalue = malloc(n * sizeof *wvalue)) == NULL) {
		free(wname);
		return NULL;
	}
	got = GetEnvironmentVariableW(wname, wvalue, n);
	free(wname);
	/* got >= n: it grew in between; treat it as unset this time. */
	value = got < n ? cw_utf8_new(wvalue, got) : NULL;
	free(wvalue);
	if (value == NULL)
		return NULL;

	AcquireSRWLockExclusive(&cw_env_lock);
	if ((e = cw_env_entry(name)) != NULL) {
		if (e->value != NULL && strcmp(e->value, value) == 0) {
			free(value);
			ret = e->value;
		} else if (e->value == NULL ||
		    (o = calloc(1, sizeof *o)) != NULL) {
			if (e->value != NULL) {
				o->value = e->value;
				o->old = e->old;
				e->old = o;
			}
			e->value = ret = value;
		}
	}
	ReleaseSRWLockExclusive(&cw_env_lock);
	if (ret == NULL)
		free(value);	/* out of memory: not kept, so not handed out */
	return ret;
}

/* Sets (value) or removes (NULL) name, and forgets its getenv values. */
static int
cw_env_set(const char *name, const char *value)
{
	wchar_t		*wname, *wvalue = NULL;
	struct cw_env	*e;
	BOOL		 ok;

	if (name == NULL || *name == '\0' || strchr(name, '=') != NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((wname = cw_wide(name, CW_NAME_MAX, 0, NULL)) == NULL)
		return -1;
	if (value != NULL &&
	    (wvalue = cw_wide(value, CW_NAME_MAX, 0, NULL)) == NULL) {
		free(wname);
		return -1;
	}
	AcquireSRWLockExclusive(&cw_env_lock);
	ok = SetEnvironmentVariableW(wname, wvalue);
	if (ok) {
		for (e = cw_envs; e != NULL; e = e->next) {
			if (strcmp(e->name, name) == 0)
				cw_env_forget(e);
		}
	}
	ReleaseSRWLockExclusive(&cw_env_lock);
	free(wname);
	free(wvalue);
	/* Removing a name that is not there is a success, as on POSIX. */
	if (!ok && !(value == NULL &&
	    GetLastError() == ERROR_ENVVAR_NOT_FOUND))
		return cw_err_win32(GetLastError());
	return 0;
}

/* setenv(3) in UTF-8. */
int
setenv(const char *name, const char *value, int overwrite)
{
	if (!overwrite && name != NULL && *name != '\0' &&
	    strchr(name, '=') == NULL && compat_getenv(name) != NULL)
		return 0;
	return cw_env_set(name, value);
}

/* unsetenv(3). */
int
unsetenv(const char *name)
{
	return cw_env_set(name, NULL);
}

void	compat_win_init(void) __attribute__((constructor));

/*
 * Runs before main: the standard streams and every later C runtime open
 * without an explicit mode are binary, as on POSIX. (mingw-w64's binmode.o
 * does not reach the streams msvcrt.dll set up before the program ran.)
 */
void
compat_win_init(void)
{
	static const DWORD	std[] = { STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
				    STD_ERROR_HANDLE };
	HANDLE			h;
	int			fd;

	/*
	 * Only the streams that exist: a service has none, and the C
	 * runtime may treat a mode change of a closed fd as a fatal
	 * invalid parameter.
	 */
	for (fd = 0; fd < 3; fd++) {
		h = GetStdHandle(std[fd]);
		if (h != NULL && h != INVALID_HANDLE_VALUE)
			_setmode(fd, _O_BINARY);
	}
	_fmode = _O_BINARY;
}
