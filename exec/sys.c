/*
 * sys.c: the few things a shared-memory child would take from libc, built
 * on the system call layer of exec.h instead: closing every descriptor
 * above one, the kernel's version, path strings, writing a /proc file, and
 * execvpe (the target's PATH search and exec, with /bin/sh for ENOEXEC).
 * None of it keeps state. The system calls themselves are exec.h's; what
 * the run is confined to is confine.c's and mounts.c's.
 */
#include "exec.h"

/* Closes every descriptor from first on (close_range where it exists). */
void GE_CHILD
ge_close_from(int first)
{
#ifdef GE_RAW
	char		 buf[4096];
	long		 n, off, fd;
	int		 dfd;
	const char	*p;

	if (GE_S3(SYS_close_range, first, ~0U, 0) == 0)
		return;
	/* Before Linux 5.9: what /proc/self/fd lists, read by hand. */
	if ((dfd = ge_open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    0)) < 0) {
		for (fd = first; fd < 65536; fd++)
			(void)ge_close((int)fd);
		return;
	}
	while ((n = GE_S3(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
		for (off = 0; off < n; ) {
			/* struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name */
			unsigned short	reclen;

			memcpy(&reclen, buf + off + 16, sizeof reclen);
			p = buf + off + 19;
			for (fd = 0; *p >= '0' && *p <= '9'; p++)
				fd = fd * 10 + (*p - '0');
			if (*p == '\0' && p != buf + off + 19 && fd >= first &&
			    fd != dfd)
				(void)ge_close((int)fd);
			if (reclen == 0)
				break;
			off += reclen;
		}
	}
	(void)ge_close(dfd);
#else
#ifdef HAVE_CLOSE_RANGE
	if (close_range((unsigned)first, ~0U, 0) == 0)
		return;
#endif
	{
		DIR		*d;
		struct dirent	*de;
		long		 fd, max;

		/* /proc/self/fd lists what is open; else a bounded loop. */
		if ((d = opendir("/proc/self/fd")) != NULL) {
			while ((de = readdir(d)) != NULL) {
				fd = strtol(de->d_name, NULL, 10);
				if (fd >= first && fd != dirfd(d))
					close((int)fd);
			}
			closedir(d);
			return;
		}
		max = sysconf(_SC_OPEN_MAX);
		if (max < 0 || max > 65536)
			max = 65536;
		for (fd = first; fd < max; fd++)
			close((int)fd);
	}
#endif
}

/* Reads a decimal number at *p, moving *p past it. */
static long GE_CHILD
ge_atol(const char **p)
{
	long	v = 0;

	while (**p >= '0' && **p <= '9' && v < 100000)
		v = v * 10 + (*(*p)++ - '0');
	return v;
}

/* True if the running kernel is at least major.minor. */
int GE_CHILD
ge_kernel_at_least(int major, int minor)
{
	struct utsname	 u;
	const char	*p;
	long		 ma, mi;

	if (ge_uname(&u) != 0)
		return 0;
	p = u.release;
	ma = ge_atol(&p);
	if (*p++ != '.')
		return 0;
	mi = ge_atol(&p);
	return ma > major || (ma == major && mi >= minor);
}

/* True if path is dir or lies beneath it, comparing strings. */
int GE_CHILD
ge_under(const char *path, const char *dir)
{
	size_t	n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return 1;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' ||
	    path[n] == '/');
}

/* Joins a and b into buf (PATH_MAX). Returns 0, or -ENAMETOOLONG. */
int GE_CHILD
ge_join(char *buf, const char *a, const char *b)
{
	size_t	na = strlen(a), nb = strlen(b);

	if (na + nb + 1 > PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(buf, a, na);
	memcpy(buf + na, b, nb + 1);
	return 0;
}

/* Writes a short string to a /proc file. Returns 0 or -errno. */
int GE_CHILD
ge_proc_write(const char *path, const char *s)
{
	size_t	len = strlen(s);
	ssize_t	n;
	int	fd, r;

	if ((fd = ge_open(path, O_WRONLY | O_CLOEXEC, 0)) < 0)
		return fd;
	n = ge_write1(fd, s, len);
	r = ge_close(fd);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	return r;
}

/*
 * execve with a PATH search in envp's PATH (execvpe, without libc): a name
 * with a slash is run as it is; ENOEXEC runs the file with /bin/sh (through
 * shargv, which has room for it); EACCES anywhere wins over ENOENT, and
 * any other error stops the search. Returns -errno.
 */
static int GE_CHILD
ge_execvpe(char *const argv[], char *const envp[], char **shargv)
{
	const char	*file = argv[0], *path = "/bin:/usr/bin", *p, *q;
	char		 buf[PATH_MAX];
	size_t		 flen, dlen;
	int		 r, eacces = 0, last = -ENOENT;

	for (flen = 0; file[flen] != '\0'; flen++)
		if (file[flen] == '/')
			break;
	if (file[flen] == '/') {
		r = ge_execve(file, argv, envp);
		if (r == -ENOEXEC && shargv != NULL) {
			shargv[1] = (char *)file;
			(void)ge_execve("/bin/sh", shargv, envp);
		}
		return r;
	}
	if (flen == 0)
		return -ENOENT;
	for (r = 0; envp != NULL && envp[r] != NULL; r++)
		if (strncmp(envp[r], "PATH=", 5) == 0) {
			path = envp[r] + 5;
			break;
		}
	for (p = path; ; p = q + 1) {
		for (q = p; *q != '\0' && *q != ':'; q++)
			;
		dlen = (size_t)(q - p);
		if (dlen == 0) {
			buf[0] = '.';
			dlen = 1;
		} else if (dlen < sizeof buf)
			memcpy(buf, p, dlen);
		if (dlen + 1 + flen + 1 <= sizeof buf) {
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			r = ge_execve(buf, argv, envp);
			if (r == -ENOEXEC && shargv != NULL) {
				shargv[1] = buf;
				(void)ge_execve("/bin/sh", shargv, envp);
				return r;
			}
			/*
			 * EACCES from a PATH folder we may not look into
			 * (Landlock, or another user's home in an inherited
			 * PATH) says nothing of the program: only a file that
			 * is there and refused is "permission denied".
			 */
			if (r == -EACCES) {
				struct stat	st;

				if (ge_stat(buf, &st, 1) != 0)
					r = -ENOENT;
			}
			switch (r) {
			case -EACCES:
				eacces = 1;
				/* FALLTHROUGH */
			case -ENOENT:
			case -ESTALE:
			case -ENOTDIR:
			case -ENODEV:
			case -ETIMEDOUT:
				last = r;
				break;
			default:
				return r;
			}
		}
		if (*q == '\0')
			break;
	}
	return eacces ? -EACCES : last;
}

/* Runs the target; reports and exits if it cannot. */
void __attribute__((noreturn)) GE_CHILD
ge_exec(const struct ge_opts *o, char *const envp[], char **shargv)
{
	int	r;

	if (o->probe)
		ge_exit(0);
	r = ge_execvpe(o->argv, envp, shargv);
	ge_fail("exec", -r);
}
