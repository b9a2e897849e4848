/*
 * A minimal TAP producer for the C unit tests: one "ok N - name" line per
 * check, a plan at the end, exit status 1 if any check failed. automake's
 * tap-driver.sh counts the lines. The same tests run on Linux and, under
 * Wine, on Windows: the helpers below give them a temporary folder with a
 * path the system calls absolute, and a way to skip, saying why, what a
 * system cannot do.
 */
#ifndef GBR_UNIT_H
#define GBR_UNIT_H

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GBR_COMPAT_WIN_H
#include <sddl.h>
#endif

static int unit_n, unit_failed;

/* Evaluates cond exactly once. */
#define CHECK(cond, ...) do {						\
	int	unit_ok_ = (cond) ? 1 : 0;				\
									\
	unit_n++;							\
	if (!unit_ok_)							\
		unit_failed++;						\
	printf("%sok %d - ", unit_ok_ ? "" : "not ", unit_n);		\
	printf(__VA_ARGS__);						\
	if (unit_ok_)							\
		printf("\n");						\
	else								\
		printf("  [%s] at %s:%d\n", #cond, __FILE__, __LINE__);	\
	fflush(stdout);							\
} while (0)

/* True if s equals want; prints both otherwise. */
static inline int
unit_same(const char *s, const char *want)
{
	if (strcmp(s, want) == 0)
		return 1;
	printf("# got  [%s]\n# want [%s]\n", s, want);
	return 0;
}

/*
 * Reports n checks that cannot run on this system, with the reason: a TAP
 * skip, which the driver counts, never a silent pass.
 */
static inline void
unit_skip(int n, const char *why)
{
	while (n-- > 0)
		printf("ok %d # skip %s\n", ++unit_n, why);
	fflush(stdout);
}

/*
 * Makes a new folder for a test's files and writes its real absolute
 * path, as this system spells one, into buf: $TMPDIR (else $TEMP, which
 * Windows sets, else /tmp), then realpath, so "/tmp/gbr-test-NAME-..." on
 * Unix and "C:/Users/.../Temp/gbr-test-NAME-..." on Windows, where a
 * path from "/tmp" would have no drive and would not be absolute. Exits
 * 99 (a hard error to the TAP driver) if it cannot.
 */
static inline char *
unit_tmpdir(char *buf, size_t size, const char *name)
{
	const char	*t = getenv("TMPDIR");
	char		 tmpl[PATH_MAX], real[PATH_MAX];

	if (t == NULL || *t == '\0')
		t = getenv("TEMP");
	if (t == NULL || *t == '\0')
		t = "/tmp";
	if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/gbr-test-%s-XXXXXX", t,
	    name) >= sizeof tmpl || mkdtemp(tmpl) == NULL ||
	    realpath(tmpl, real) == NULL ||
	    (size_t)snprintf(buf, size, "%s", real) >= size) {
		fprintf(stderr, "cannot make a folder for the test in %s: %s\n",
		    t, strerror(errno));
		exit(99);
	}
	return buf;
}

/*
 * 1 if this system lets the test make a symbolic link in dir; 0 where it
 * cannot (Wine makes none, Windows only with Developer Mode or the
 * privilege), so that checks about links are skipped there, saying why.
 */
static inline int
unit_can_symlink(const char *dir)
{
	char	path[PATH_MAX + 32];
	int	ok;

	snprintf(path, sizeof path, "%s/.unit-link-probe", dir);
	ok = symlink("target", path) == 0;
	if (ok)
		unlink(path);
	return ok;
}

/* Why checks about symbolic links are skipped (unit_can_symlink). */
#define UNIT_NO_SYMLINKS \
	"this system cannot make symbolic links (Wine; Windows without " \
	"Developer Mode)"

#ifdef GBR_COMPAT_WIN_H
/* ntdll's; winternl.h does not declare it. */
NTSTATUS NTAPI	NtSetSecurityObject(HANDLE, SECURITY_INFORMATION,
		    PSECURITY_DESCRIPTOR);
#endif

/* What unit_set_shared lets others do. */
#define UNIT_PRIVATE	0	/* nothing: the owner's alone */
#define UNIT_READ	1	/* others may read */
#define UNIT_WRITE	2	/* others may read and change */

/*
 * Lets others do what shared says with path, the way this system says
 * so: the mode on Unix (0600, 0644, 0666 for a file; 0700, 0755, 0777 for
 * a folder); the DACL on Windows, where modes mean nothing (the owner
 * alone, nothing inherited, and Everyone reading, or reading and
 * writing). The DACL is set on a handle with NtSetSecurityObject: Wine
 * 8's SetSecurityInfo puts the parent's entries back into a protected
 * DACL. Returns 0 or -1.
 */
static inline int
unit_set_shared(const char *path, int shared)
{
#ifdef GBR_COMPAT_WIN_H
	PSECURITY_DESCRIPTOR	 sd = NULL;
	HANDLE			 tok, h;
	unsigned char		 user[512];
	DWORD			 n;
	LPSTR			 me = NULL;
	WCHAR			 w[PATH_MAX];
	char			 sddl[512];
	int			 r = -1;

	if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok))
		return -1;
	if (GetTokenInformation(tok, TokenUser, user, sizeof user, &n))
		ConvertSidToStringSidA(((TOKEN_USER *)user)->User.Sid, &me);
	CloseHandle(tok);
	if (me == NULL)
		return -1;
	snprintf(sddl, sizeof sddl, "D:P(A;OICI;FA;;;%s)%s", me,
	    shared == UNIT_WRITE ? "(A;OICI;FRFW;;;WD)" :
	    shared == UNIT_READ ? "(A;OICI;FR;;;WD)" : "");
	LocalFree(me);
	if (MultiByteToWideChar(CP_UTF8, 0, path, -1, w, PATH_MAX) <= 0 ||
	    !ConvertStringSecurityDescriptorToSecurityDescriptorA(sddl,
	    SDDL_REVISION_1, &sd, NULL))
		return -1;
	h = CreateFileW(w, WRITE_DAC | READ_CONTROL, FILE_SHARE_READ |
	    FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
	    FILE_FLAG_BACKUP_SEMANTICS, NULL);
	if (h != INVALID_HANDLE_VALUE) {
		if (NtSetSecurityObject(h, DACL_SECURITY_INFORMATION, sd) == 0)
			r = 0;
		CloseHandle(h);
	}
	LocalFree(sd);
	return r;
#else
	struct stat	sb;

	if (stat(path, &sb) != 0)
		return -1;
	if (S_ISDIR(sb.st_mode))
		return chmod(path, shared == UNIT_WRITE ? 0777 :
		    shared == UNIT_READ ? 0755 : 0700);
	return chmod(path, shared == UNIT_WRITE ? 0666 :
	    shared == UNIT_READ ? 0644 : 0600);
#endif
}

static inline int
unit_done(void)
{
	printf("1..%d\n", unit_n);
	return unit_failed != 0;
}

#endif
