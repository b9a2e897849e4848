/*
 * Unit tests for compat/ (POSIX on Windows). The same program, with the
 * same assertions, is built twice: for Linux against the real C library,
 * which proves that what is asserted is POSIX's behaviour, and for
 * Windows against compat/compat-win-*.c, run under Wine. It works in a
 * fresh folder from mkdtemp: openat beneath a folder fd, O_CREAT|O_EXCL,
 * O_DIRECTORY, "." and "..", file identity (st_dev, st_ino) and hard
 * links, renameat over an open file, unlinkat, the folder listing with a
 * UTF-8 name, remove and nftw, I/O at offsets, flock, mkstemps, realpath,
 * the UTF-8 environment,
 * memmem and strcasestr, and links where the system lets the test make
 * one (a check that cannot run says "skip" and why). Built on compat/,
 * it also checks the rules compat-win.h adds (streams refused, names
 * without case, fixed modes, no inheritance); elsewhere those four say
 * "skip".
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

/* A name in UTF-8 with two- and three-byte sequences. */
#define UTF8_NAME	"a\xc3\xa7\xc3\xa3o-\xe6\x97\xa5\xe6\x9c\xac.txt"
#define UTF8_VALUE	"a\xc3\xa7\xc3\xa3o-\xe6\x97\xa5\xe6\x9c\xac"

static char	tmp[1024];	/* the test's folder */
static int	dfd = -1;	/* open on it */

/* Reports n checks that cannot run here, and why. */
static void
skip(int n, const char *why)
{
	while (n-- > 0)
		printf("ok %d # skip %s\n", ++unit_n, why);
	fflush(stdout);
}

/* tmp/name into buf. */
static const char *
full(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", tmp, name);
	return buf;
}

/* Creates or truncates name under dir with s; 0 or -1. */
static int
put(int dir, const char *name, const char *s)
{
	int	fd;
	ssize_t	n;

	fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* Reads name under dir into buf (NUL-terminated); its length or -1. */
static ssize_t
get(int dir, const char *name, char *buf, size_t size)
{
	int	fd;
	ssize_t	n;

	if ((fd = openat(dir, name, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* Reads all of fd (up to size - 1 bytes) into buf. */
static ssize_t
get_fd(int fd, char *buf, size_t size)
{
	ssize_t	n;

	n = read(fd, buf, size - 1);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* 1 if two stats are the same file. */
static int
same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* openat beneath a folder fd, and what it refuses. */
static void
check_open(void)
{
	char		buf[64], path[1200];
	struct stat	a, b;
	int		fd, sub, r;

	fd = openat(dfd, "a.txt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0644);
	CHECK(fd != -1, "openat O_CREAT|O_EXCL makes a new file");
	CHECK(write(fd, "hello", 5) == 5, "write through it");
	CHECK(close(fd) == 0, "close");
	CHECK(get(dfd, "a.txt", buf, sizeof buf) == 5 &&
	    strcmp(buf, "hello") == 0, "what was written reads back");
	errno = 0;
	CHECK(openat(dfd, "a.txt", O_WRONLY | O_CREAT | O_EXCL, 0644) == -1 &&
	    errno == EEXIST, "O_CREAT|O_EXCL again: EEXIST");
	errno = 0;
	CHECK(openat(dfd, "a.txt", O_RDONLY | O_DIRECTORY) == -1 &&
	    errno == ENOTDIR, "O_DIRECTORY on a file: ENOTDIR");
	errno = 0;
	CHECK(openat(dfd, "missing", O_RDONLY) == -1 && errno == ENOENT,
	    "a missing name: ENOENT");

	CHECK(mkdirat(dfd, "sub", 0755) == 0, "mkdirat");
	errno = 0;
	CHECK(mkdirat(dfd, "sub", 0755) == -1 && errno == EEXIST,
	    "mkdirat again: EEXIST");
	errno = 0;
	CHECK(mkdirat(dfd, "no/such", 0755) == -1 && errno == ENOENT,
	    "mkdirat under a missing folder: ENOENT");
	errno = 0;
	CHECK(openat(dfd, "sub", O_WRONLY) == -1 && errno == EISDIR,
	    "a folder opened for writing: EISDIR");
	CHECK(put(dfd, "sub/b.txt", "bee") == 0, "openat of sub/b.txt");
	CHECK(get(dfd, "sub/./b.txt", buf, sizeof buf) == 3 &&
	    strcmp(buf, "bee") == 0, "\".\" components are skipped");

	sub = openat(dfd, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(sub != -1, "openat O_DIRECTORY on a folder");
	CHECK(get(sub, "b.txt", buf, sizeof buf) == 3,
	    "openat beneath the second folder fd");
	CHECK(get(sub, "../a.txt", buf, sizeof buf) == 5 &&
	    strcmp(buf, "hello") == 0, "\"..\" beneath a folder fd: its parent");
	CHECK(get(dfd, "sub/../sub/b.txt", buf, sizeof buf) == 3,
	    "\"..\" in the middle of a path");
	fd = openat(sub, "..", O_RDONLY | O_DIRECTORY);
	r = fd != -1 && fstat(fd, &a) == 0 && fstat(dfd, &b) == 0 &&
	    same_file(&a, &b);
	CHECK(r, "\"..\" of sub is the test folder");
	if (fd != -1)
		close(fd);
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY);
	r = fd != -1 && fstat(fd, &a) == 0 && fstat(dfd, &b) == 0 &&
	    same_file(&a, &b);
	CHECK(r, "\".\" is the folder itself");
	if (fd != -1)
		close(fd);
	close(sub);

	errno = 0;
	CHECK(openat(dfd, "a.txt/", O_RDONLY) == -1 && errno == ENOTDIR,
	    "a file named with a trailing '/': ENOTDIR");
	fd = openat(dfd, "sub/", O_RDONLY);
	CHECK(fd != -1, "a folder named with a trailing '/'");
	if (fd != -1)
		close(fd);
	errno = 0;
	CHECK(openat(dfd, "sub", O_WRONLY | O_CREAT, 0644) == -1 &&
	    errno == EISDIR, "O_CREAT on a folder: EISDIR");
	fd = openat(dfd, "a.txt", O_RDONLY | O_NOFOLLOW);
	CHECK(fd != -1, "O_NOFOLLOW on a plain file opens it");
	if (fd != -1)
		close(fd);
	sub = openat(dfd, "sub", O_RDONLY | O_DIRECTORY);
	CHECK(sub != -1 && get(sub, full(path, sizeof path, "a.txt"), buf,
	    sizeof buf) == 5, "an absolute path ignores the folder fd");
	if (sub != -1)
		close(sub);
	sub = openat(dfd, "sub", O_PATH | O_DIRECTORY);
	CHECK(sub != -1 && get(sub, "b.txt", buf, sizeof buf) == 3,
	    "an O_PATH folder fd serves openat");
	if (sub != -1)
		close(sub);

	fd = openat(dfd, "a.txt", O_WRONLY | O_TRUNC);
	r = fd != -1 && fstat(fd, &a) == 0 && a.st_size == 0;
	CHECK(r, "O_TRUNC empties the file");
	if (fd != -1) {
		CHECK(write(fd, "hello", 5) == 5, "and it is written again");
		close(fd);
	} else
		CHECK(0, "and it is written again");
	fd = openat(dfd, "log", O_WRONLY | O_CREAT | O_APPEND, 0644);
	r = fd != -1 && write(fd, "1", 1) == 1 &&
	    lseek(fd, 0, SEEK_SET) == 0 && write(fd, "2", 1) == 1;
	if (fd != -1)
		close(fd);
	CHECK(r && get(dfd, "log", buf, sizeof buf) == 2 &&
	    strcmp(buf, "12") == 0, "O_APPEND writes at the end");
}

/* (st_dev, st_ino), the link count and the rest of struct stat. */
static void
check_stat(void)
{
	char		path[1200], path2[1200];
	struct stat	a, b, c, d;
	int		fd;

	fd = openat(dfd, "a.txt", O_RDONLY);
	CHECK(fd != -1 && fstat(fd, &a) == 0, "fstat");
	CHECK(fstatat(dfd, "a.txt", &b, 0) == 0, "fstatat");
	CHECK(stat(full(path, sizeof path, "a.txt"), &c) == 0, "stat");
	CHECK(same_file(&a, &b) && same_file(&a, &c),
	    "one file: the same (st_dev, st_ino) through an fd and two paths");
	CHECK(fstatat(dfd, "sub/b.txt", &d, 0) == 0 && !same_file(&a, &d),
	    "two files: different (st_dev, st_ino)");
	CHECK(S_ISREG(a.st_mode) && a.st_size == 5, "a file of 5 bytes");
	CHECK(a.st_nlink == 1, "one link");
	CHECK(a.st_uid == geteuid(), "owned by us");
	CHECK(a.st_mtim.tv_sec > 1577836800 &&
	    a.st_mtim.tv_nsec >= 0 && a.st_mtim.tv_nsec < 1000000000,
	    "a modification time after 2020");
	CHECK(lstat(path, &d) == 0 && S_ISREG(d.st_mode),
	    "lstat of a plain file: S_ISREG");
	CHECK(fstatat(dfd, "sub", &d, 0) == 0 && S_ISDIR(d.st_mode),
	    "a folder: S_ISDIR");
	CHECK(link(path, full(path2, sizeof path2, "a2.txt")) == 0, "link");
	CHECK(fstatat(dfd, "a.txt", &b, 0) == 0 && b.st_nlink == 2,
	    "two links after link");
	CHECK(fstatat(dfd, "a2.txt", &c, 0) == 0 && same_file(&b, &c),
	    "the hard link is the same file");
	CHECK(fsync(fd) == 0, "fsync of a file opened for reading");
	CHECK(fsync(dfd) == 0, "fsync of a folder");
	CHECK(fchmod(fd, 0444) == 0 && fstat(fd, &b) == 0 &&
	    (b.st_mode & 0222) == 0, "fchmod 0444: no write bit");
	CHECK(fchmod(fd, 0644) == 0 && fstat(fd, &b) == 0 &&
	    (b.st_mode & 0200) != 0, "fchmod 0644: writable again");
	if (fd != -1)
		close(fd);
}

/* 1 if name under dir does not exist. */
static int
faccessat_gone(int dir, const char *name)
{
	struct stat	st;

	errno = 0;
	return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == -1 &&
	    errno == ENOENT;
}

/* renameat replaces, even a file that is open. */
static void
check_rename(void)
{
	char	buf[64];
	int	held, sub;

	CHECK(put(dfd, "new.txt", "NEW") == 0, "a file to rename");
	held = openat(dfd, "a2.txt", O_RDONLY);
	CHECK(held != -1, "the target held open");
	CHECK(renameat(dfd, "new.txt", dfd, "a2.txt") == 0,
	    "renameat over an open file");
	CHECK(get(dfd, "a2.txt", buf, sizeof buf) == 3 &&
	    strcmp(buf, "NEW") == 0, "the name has the new content");
	errno = 0;
	CHECK(openat(dfd, "new.txt", O_RDONLY) == -1 && errno == ENOENT,
	    "the old name is gone");
	CHECK(held != -1 && get_fd(held, buf, sizeof buf) == 5 &&
	    strcmp(buf, "hello") == 0, "the open fd still reads the old file");
	if (held != -1)
		close(held);
	sub = openat(dfd, "sub", O_RDONLY | O_DIRECTORY);
	CHECK(sub != -1 && renameat(sub, "b.txt", dfd, "b2.txt") == 0,
	    "renameat between two folder fds");
	CHECK(get(dfd, "b2.txt", buf, sizeof buf) == 3, "it arrived");
	CHECK(renameat(dfd, "b2.txt", sub, "b.txt") == 0, "and went back");
	errno = 0;
	CHECK(renameat(dfd, "missing", dfd, "x") == -1 && errno == ENOENT,
	    "renameat of a missing name: ENOENT");
	CHECK(mkdirat(dfd, "r1", 0755) == 0 && mkdirat(dfd, "r2", 0755) == 0 &&
	    renameat(dfd, "r1", dfd, "r2") == 0 &&
	    faccessat_gone(dfd, "r1"), "a folder renamed over an empty one");
	CHECK(mkdirat(dfd, "r3", 0755) == 0 && put(dfd, "r2/f", "f") == 0,
	    "a folder with a file in it");
	errno = 0;
	CHECK(renameat(dfd, "r3", dfd, "r2") == -1 &&
	    (errno == ENOTEMPTY || errno == EEXIST),
	    "a folder renamed over a full one: ENOTEMPTY");
	errno = 0;
	CHECK(renameat(dfd, "log", dfd, "r3") == -1 && errno == EISDIR,
	    "a file renamed over a folder: EISDIR");
	if (sub != -1)
		close(sub);
}

/* unlinkat of files and folders. */
static void
check_unlink(void)
{
	struct stat	st;

	char		buf[64];
	int		held, fd;

	held = openat(dfd, "a2.txt", O_RDONLY);
	CHECK(held != -1, "a file held open");
	CHECK(unlinkat(dfd, "a2.txt", 0) == 0, "unlinkat of it");
	errno = 0;
	CHECK(fstatat(dfd, "a2.txt", &st, 0) == -1 && errno == ENOENT,
	    "it is gone");
	fd = openat(dfd, "a2.txt", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd != -1, "its name is free at once (O_CREAT|O_EXCL)");
	if (fd != -1)
		close(fd);
	CHECK(held != -1 && get_fd(held, buf, sizeof buf) == 3 &&
	    strcmp(buf, "NEW") == 0, "the open fd still reads the file");
	if (held != -1)
		close(held);
	CHECK(unlinkat(dfd, "a2.txt", 0) == 0, "unlinkat of the new one");
	errno = 0;
	CHECK(unlinkat(dfd, "log/", 0) == -1 && errno == ENOTDIR,
	    "unlinkat of a file named with a trailing '/': ENOTDIR");
	errno = 0;
	CHECK(unlinkat(dfd, "sub", AT_REMOVEDIR) == -1 && errno == ENOTEMPTY,
	    "AT_REMOVEDIR of a folder with a file: ENOTEMPTY");
	errno = 0;
	CHECK(unlinkat(dfd, "sub", 0) == -1 && errno == EISDIR,
	    "unlinkat of a folder without AT_REMOVEDIR: EISDIR");
	errno = 0;
	CHECK(unlinkat(dfd, "log", AT_REMOVEDIR) == -1 && errno == ENOTDIR,
	    "AT_REMOVEDIR of a file: ENOTDIR");
	CHECK(mkdirat(dfd, "empty", 0755) == 0 &&
	    unlinkat(dfd, "empty", AT_REMOVEDIR) == 0,
	    "AT_REMOVEDIR of an empty folder");
	errno = 0;
	CHECK(unlinkat(dfd, "empty", AT_REMOVEDIR) == -1 && errno == ENOENT,
	    "and again: ENOENT");

	/* A folder held open (a sandbox holds its root so): the name goes now. */
	held = mkdirat(dfd, "heldd", 0755) == 0 ? openat(dfd, "heldd",
	    O_RDONLY | O_DIRECTORY) : -1;
	CHECK(held != -1 && unlinkat(dfd, "heldd", AT_REMOVEDIR) == 0,
	    "AT_REMOVEDIR of an empty folder held open");
	errno = 0;
	CHECK(fstatat(dfd, "heldd", &st, 0) == -1 && errno == ENOENT &&
	    mkdirat(dfd, "heldd", 0755) == 0, "its name is gone and free at "
	    "once");
	if (held != -1)
		close(held);
	CHECK(unlinkat(dfd, "heldd", AT_REMOVEDIR) == 0, "the new one goes too");
}

/* A listing with fdopendir and readdir: exactly the names made. */
static void
check_dir(void)
{
	static const struct {
		const char	*name;
		unsigned char	 type;
	} want[] = {
		{ ".", DT_DIR }, { "..", DT_DIR }, { "f1", DT_REG },
		{ "d1", DT_DIR }, { UTF8_NAME, DT_REG },
	};
	const size_t	 nwant = sizeof want / sizeof want[0];
	char		 path[1200], buf[64];
	struct dirent	*de;
	struct stat	 a, b;
	DIR		*d;
	size_t		 i, seen[8], n, again;
	int		 fd, bad = 0;

	CHECK(mkdirat(dfd, "list", 0755) == 0, "a folder to list");
	CHECK(put(dfd, "list/f1", "x") == 0 && mkdirat(dfd, "list/d1", 0755) ==
	    0, "a file and a folder in it");
	CHECK(put(dfd, "list/" UTF8_NAME, "utf") == 0,
	    "a file with a UTF-8 name");
	fd = openat(dfd, "list", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd == -1 ? NULL : fdopendir(fd);
	CHECK(d != NULL, "fdopendir");
	if (d == NULL) {
		skip(4, "no listing");
		return;
	}
	CHECK(dirfd(d) == fd, "dirfd gives the fd back");
	memset(seen, 0, sizeof seen);
	n = 0;
	while ((de = readdir(d)) != NULL) {
		n++;
		for (i = 0; i < nwant; i++) {
			if (strcmp(de->d_name, want[i].name) == 0)
				break;
		}
		if (i == nwant || de->d_type != want[i].type) {
			printf("# unexpected: [%s] type %d\n", de->d_name,
			    de->d_type);
			bad++;
			continue;
		}
		seen[i]++;
	}
	for (i = 0; i < nwant; i++) {
		if (seen[i] != 1) {
			printf("# [%s] seen %zu times\n", want[i].name,
			    seen[i]);
			bad++;
		}
	}
	CHECK(bad == 0 && n == nwant,
	    "readdir lists ., .., f1, d1 and the UTF-8 name with their types");
	rewinddir(d);
	for (again = 0; readdir(d) != NULL; again++)
		;
	CHECK(again == nwant, "rewinddir lists them again");
	CHECK(closedir(d) == 0, "closedir (which closes the fd)");

	/*
	 * A listing shows the folder as it is now, also through a dup of an
	 * fd already listed (the disk log lists its folder so): Wine keeps
	 * what it read for an open file object.
	 */
	fd = openat(dfd, "list", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd == -1 ? NULL : fdopendir(dup(fd));
	for (again = 0; d != NULL && readdir(d) != NULL; again++)
		;
	if (d != NULL)
		closedir(d);
	put(dfd, "list/new", "n");
	d = fd == -1 ? NULL : fdopendir(dup(fd));
	if (d != NULL)
		rewinddir(d);	/* a dup shares the offset, at the end now */
	for (n = 0; d != NULL && (de = readdir(d)) != NULL; )
		n += strcmp(de->d_name, "new") == 0;
	if (d != NULL)
		closedir(d);
	CHECK(again == nwant && n == 1, "a new file shows in the next listing "
	    "of a dup of the same fd");
	if (fd != -1)
		close(fd);
	unlinkat(dfd, "list/new", 0);

	CHECK(get(dfd, "list/" UTF8_NAME, buf, sizeof buf) == 3 &&
	    strcmp(buf, "utf") == 0, "the UTF-8 name opens and reads back");
	CHECK(fstatat(dfd, "list/" UTF8_NAME, &a, 0) == 0 &&
	    stat(full(path, sizeof path, "list/" UTF8_NAME), &b) == 0 &&
	    same_file(&a, &b) && a.st_size == 3,
	    "and stats the same by fd and by full path");
}

static int	walk_n, walk_bad;
static char	walk_order[8][16];

/* nftw callback: removes what it is shown, noting names and types. */
static int
walk_rm(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	const char	*name = path + ftw->base;

	if (walk_n < 8)
		snprintf(walk_order[walk_n], sizeof walk_order[0], "%s",
		    strcmp(name, UTF8_NAME) == 0 ? "utf" : name);
	walk_n++;
	if ((type == FTW_F && (!S_ISREG(sb->st_mode) || sb->st_size != 2)) ||
	    (type == FTW_DP && !S_ISDIR(sb->st_mode)) ||
	    (type != FTW_F && type != FTW_DP))
		walk_bad++;
	return remove(path);
}

/* remove(3) and nftw(3), as a test's or a temp folder's cleanup uses them. */
static void
check_walk(void)
{
	char	path[1200];
	int	i;

	CHECK(mkdirat(dfd, "walk", 0755) == 0 &&
	    mkdirat(dfd, "walk/sub", 0755) == 0 &&
	    put(dfd, "walk/sub/" UTF8_NAME, "ab") == 0 &&
	    put(dfd, "walk/f", "cd") == 0, "a tree to walk");
	CHECK(remove(full(path, sizeof path, "walk")) == -1 &&
	    errno == ENOTEMPTY, "remove of a folder with files: ENOTEMPTY");
	walk_n = walk_bad = 0;
	CHECK(nftw(full(path, sizeof path, "walk"), walk_rm, 8,
	    FTW_DEPTH | FTW_PHYS) == 0 && walk_n == 4 && walk_bad == 0,
	    "nftw FTW_DEPTH shows 4 entries with their types and sizes, and "
	    "remove takes files and empty folders (%d, %d bad)", walk_n,
	    walk_bad);
	for (i = 0; i < 4 && i < walk_n; i++)
		if (strcmp(walk_order[i], "sub") == 0 ||
		    strcmp(walk_order[i], "walk") == 0)
			break;
	CHECK(i < walk_n && strcmp(walk_order[i], "sub") == 0 && i >= 1 &&
	    strcmp(walk_order[walk_n - 1], "walk") == 0,
	    "a folder comes after what is in it, the top last");
	CHECK(fstatat(dfd, "walk", &(struct stat){ 0 }, 0) == -1 &&
	    errno == ENOENT, "the tree is gone");
	errno = 0;
	CHECK(nftw(full(path, sizeof path, "walk"), walk_rm, 8, FTW_PHYS) ==
	    -1 && errno == ENOENT, "nftw of a missing top: -1, ENOENT");
}

/* pread, pwrite and flock. */
static void
check_io(void)
{
	char	buf[16];
	int	fd, fd2, r;

	fd = openat(dfd, "p.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd != -1, "a file for I/O at offsets");
	CHECK(pwrite(fd, "XYZ", 3, 10) == 3, "pwrite at 10");
	CHECK(lseek(fd, 0, SEEK_CUR) == 0, "the file offset did not move");
	memset(buf, 0, sizeof buf);
	CHECK(pread(fd, buf, 3, 10) == 3 && memcmp(buf, "XYZ", 3) == 0,
	    "pread at 10 reads it");
	CHECK(pread(fd, buf, 3, 100) == 0, "pread past the end: 0");
	r = read(fd, buf, sizeof buf) == 13 && buf[0] == '\0' &&
	    memcmp(buf + 10, "XYZ", 3) == 0;
	CHECK(r, "read from the offset: a hole of zeros, then XYZ");

	fd2 = openat(dfd, "p.bin", O_RDWR);
	CHECK(fd2 != -1, "a second open of the file");
	CHECK(flock(fd, LOCK_EX) == 0, "flock LOCK_EX");
	errno = 0;
	CHECK(flock(fd2, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK,
	    "LOCK_EX|LOCK_NB on a second open: EWOULDBLOCK");
	errno = 0;
	CHECK(flock(fd2, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK,
	    "LOCK_SH|LOCK_NB on a second open: EWOULDBLOCK");
	CHECK(pread(fd2, buf, 3, 10) == 3,
	    "the lock is advisory: the second open still reads");
	CHECK(flock(fd, LOCK_UN) == 0, "LOCK_UN");
	CHECK(flock(fd2, LOCK_SH | LOCK_NB) == 0 &&
	    flock(fd, LOCK_SH | LOCK_NB) == 0, "two shared locks");
	errno = 0;
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK,
	    "no exclusive lock beside a shared one");
	close(fd2);
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0,
	    "closing the other open drops its lock");
	close(fd);
}

/* mkstemps: a new file named from the template, its suffix kept. */
static void
check_mkstemps(void)
{
	char	path[1100];
	size_t	len;
	int	fd, fd2;

	snprintf(path, sizeof path, "%s/t-XXXXXX.ini", tmp);
	fd = mkstemps(path, 4);
	len = strlen(path);
	CHECK(fd != -1 && strstr(path, "XXXXXX") == NULL && len > 4 &&
	    strcmp(path + len - 4, ".ini") == 0,
	    "mkstemps fills the X and keeps the suffix (%s)", path);
	CHECK(fd != -1 && write(fd, "x", 1) == 1, "the file is open for writing");
	errno = 0;
	fd2 = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(fd2 == -1 && errno == EEXIST, "and it exists");
	if (fd2 != -1)
		close(fd2);
	if (fd != -1)
		close(fd);
	CHECK(unlink(path) == 0, "it is removed");
	snprintf(path, sizeof path, "%s/t-XXXXX.ini", tmp);
	errno = 0;
	CHECK(mkstemps(path, 4) == -1 && errno == EINVAL,
	    "five X before the suffix: EINVAL");
}

/* realpath, getcwd and chdir, fopen, access. */
static void
check_paths(void)
{
	char		 path[1200], buf[PATH_MAX], line[16];
	char		*r1, *r2, *r3, *cwd, *here;
	struct stat	 st;
	FILE		*f;
	int		 fd;

	r1 = realpath(full(path, sizeof path, "a.txt"), NULL);
	CHECK(r1 != NULL, "realpath of a file");
	r2 = realpath(full(path, sizeof path, "sub/../a.txt"), NULL);
	CHECK(r1 != NULL && r2 != NULL && strcmp(r1, r2) == 0,
	    "realpath resolves \"..\"");
	CHECK(r1 != NULL && strlen(r1) > 6 &&
	    strcmp(r1 + strlen(r1) - 6, "/a.txt") == 0 &&
	    strchr(r1, '\\') == NULL && strstr(r1, "//") == NULL,
	    "realpath form: '/' separators, ends in /a.txt");
	CHECK(r1 != NULL && (r1[0] == '/' || (r1[1] == ':' && r1[2] == '/')),
	    "realpath is absolute (/x or C:/x)");
	r3 = r1 == NULL ? NULL : realpath(r1, buf);
	CHECK(r3 == buf && strcmp(r1, buf) == 0,
	    "realpath of its own result, into a buffer: the same");
	errno = 0;
	CHECK(realpath(full(path, sizeof path, "missing"), NULL) == NULL &&
	    errno == ENOENT, "realpath of a missing file: ENOENT");
	free(r2);

	cwd = getcwd(NULL, 0);
	CHECK(cwd != NULL, "getcwd");
	CHECK(chdir(tmp) == 0, "chdir");
	here = getcwd(NULL, 0);
	r2 = here == NULL ? NULL : realpath(here, NULL);
	r3 = realpath(tmp, NULL);
	CHECK(r2 != NULL && r3 != NULL && strcmp(r2, r3) == 0,
	    "getcwd is the folder chdir went to");
	free(here);
	free(r2);
	free(r3);
	fd = open("a.txt", O_RDONLY);
	CHECK(fd != -1, "open of a relative path from there");
	if (fd != -1)
		close(fd);
	CHECK(access("a.txt", F_OK) == 0 && access("a.txt", R_OK) == 0,
	    "access F_OK and R_OK");
	errno = 0;
	CHECK(access("missing", F_OK) == -1 && errno == ENOENT,
	    "access of a missing file: ENOENT");
	CHECK(cwd != NULL && chdir(cwd) == 0, "chdir back");
	free(cwd);

	f = fopen(full(path, sizeof path, "t.txt"), "w");
	CHECK(f != NULL && fputs("a\nb\n", f) >= 0 && fclose(f) == 0,
	    "fopen \"w\" and two lines");
	CHECK(stat(path, &st) == 0 && st.st_size == 4,
	    "4 bytes: no CR added");
	f = fopen(path, "r");
	CHECK(f != NULL && fgets(line, sizeof line, f) != NULL &&
	    strcmp(line, "a\n") == 0, "fopen \"r\" reads the line back");
	if (f != NULL)
		fclose(f);
	free(r1);
}

/* getenv and setenv in UTF-8; memmem and strcasestr. */
static void
check_env_strings(void)
{
	static const char	 hay[] = "abc\0def";
	const char		*s = "Hello World";
	char			*v;

	CHECK(setenv("GBR_TEST_COMPAT", UTF8_VALUE, 1) == 0, "setenv");
	v = getenv("GBR_TEST_COMPAT");
	CHECK(v != NULL && strcmp(v, UTF8_VALUE) == 0,
	    "getenv gives the UTF-8 value back");
	CHECK(getenv("GBR_TEST_COMPAT") != NULL && v != NULL &&
	    strcmp(v, UTF8_VALUE) == 0, "an earlier getenv result stays valid");
	CHECK(setenv("GBR_TEST_COMPAT", "other", 0) == 0 &&
	    (v = getenv("GBR_TEST_COMPAT")) != NULL &&
	    strcmp(v, UTF8_VALUE) == 0, "setenv without overwrite keeps it");
	CHECK(setenv("GBR_TEST_COMPAT", "other", 1) == 0 &&
	    (v = getenv("GBR_TEST_COMPAT")) != NULL &&
	    strcmp(v, "other") == 0, "setenv with overwrite replaces it");
	CHECK(unsetenv("GBR_TEST_COMPAT") == 0 &&
	    getenv("GBR_TEST_COMPAT") == NULL, "unsetenv");
	errno = 0;
	CHECK(setenv("A=B", "x", 1) == -1 && errno == EINVAL,
	    "a name with '=': EINVAL");

	CHECK(memmem(hay, 7, "\0de", 3) == hay + 3,
	    "memmem finds bytes past a NUL");
	CHECK(memmem(hay, 7, "", 0) == hay, "memmem of nothing: the start");
	CHECK(memmem(hay, 7, "fg", 2) == NULL, "memmem: not there");
	CHECK(strcasestr(s, "WORLD") == s + 6, "strcasestr ignores case");
	CHECK(strcasestr(s, "") == s, "strcasestr of \"\": the start");
	CHECK(strcasestr(s, "worlds") == NULL, "strcasestr: not there");
}

#ifdef GBR_COMPAT_WIN_H
/*
 * Built on compat/ (Windows): a junction dlnk -> sub
 * (FSCTL_SET_REPARSE_POINT), where symlink() is refused; 0, or -1 with
 * what Windows said in why.
 */
static int
make_junction(char *why, size_t size)
{
	wchar_t		 wl[1200], wt[1300];
	char		 path[1200], *real;
	unsigned char	 rb[4096];
	DWORD		 got, tag = 0xA0000003UL;
	USHORT		 sl, pl, v[4];
	HANDLE		 h;
	BOOL		 ok;

	if ((real = realpath(full(path, sizeof path, "sub"), NULL)) == NULL) {
		snprintf(why, size, "realpath: %s", strerror(errno));
		return -1;
	}
	memcpy(wt, L"\\??\\", 4 * sizeof *wt);
	MultiByteToWideChar(CP_UTF8, 0, real, -1, wt + 4, 1200);
	free(real);
	for (wchar_t *c = wt; *c != L'\0'; c++)
		if (*c == L'/')
			*c = L'\\';
	MultiByteToWideChar(CP_UTF8, 0, full(path, sizeof path, "dlnk"), -1,
	    wl, 1200);
	if (!CreateDirectoryW(wl, NULL)) {
		snprintf(why, size, "CreateDirectoryW: error %lu",
		    GetLastError());
		return -1;
	}
	h = CreateFileW(wl, GENERIC_WRITE, 0, NULL, OPEN_EXISTING,
	    FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
	if (h == INVALID_HANDLE_VALUE) {
		snprintf(why, size, "CreateFileW: error %lu", GetLastError());
		RemoveDirectoryW(wl);
		return -1;
	}
	/* Substitute name \??\C:\...\sub, print name C:\...\sub. */
	sl = (USHORT)(wcslen(wt) * 2);
	pl = (USHORT)(sl - 8);
	memset(rb, 0, sizeof rb);
	memcpy(rb, &tag, 4);
	v[0] = (USHORT)(8 + sl + 2 + pl + 2);
	memcpy(rb + 4, &v[0], 2);
	v[0] = 0;
	v[1] = sl;
	v[2] = (USHORT)(sl + 2);
	v[3] = pl;
	memcpy(rb + 8, v, sizeof v);
	memcpy(rb + 16, wt, sl);
	memcpy(rb + 16 + sl + 2, wt + 4, pl);
	ok = DeviceIoControl(h, FSCTL_SET_REPARSE_POINT, rb,
	    8 + 8 + sl + 2 + pl + 2, NULL, 0, &got, NULL);
	if (!ok)
		snprintf(why, size, "FSCTL_SET_REPARSE_POINT: error %lu",
		    GetLastError());
	CloseHandle(h);
	if (!ok)
		RemoveDirectoryW(wl);
	return ok ? 0 : -1;
}
#endif

/* Links, where the test can make one: dlnk -> sub. */
static void
check_links(void)
{
	char		 path[1200], why[256], why2[256], buf[1200];
	struct stat	 st;
	ssize_t		 n;
	int		 fd, made, r;

	made = symlink("sub", full(path, sizeof path, "dlnk")) == 0;
	/* msvcrt has no text for the POSIX numbers it lacks. */
	snprintf(why, sizeof why, "symlink: %s", errno == ENOTSUP ? "ENOTSUP" :
	    errno == EPERM ? "EPERM" : strerror(errno));
#ifdef GBR_COMPAT_WIN_H
	if (!made) {
		made = make_junction(why2, sizeof why2) == 0;
		if (!made) {
			snprintf(buf, sizeof buf, "%s; junction: %s", why,
			    why2);
			snprintf(why, sizeof why, "%s", buf);
		}
	}
#else
	(void)why2;
#endif
	printf("# a link to a folder: %s\n", made ? "made" : why);
	if (!made) {
		skip(9, why);
		return;
	}
	errno = 0;
	CHECK(openat(dfd, "dlnk", O_RDONLY | O_NOFOLLOW) == -1 &&
	    errno == ELOOP, "O_NOFOLLOW on a link: ELOOP");
	CHECK(fstatat(dfd, "dlnk", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode), "fstatat AT_SYMLINK_NOFOLLOW: S_ISLNK");
	CHECK(fstatat(dfd, "dlnk", &st, 0) == 0 && S_ISDIR(st.st_mode),
	    "fstatat following it: the folder");
	fd = openat(dfd, "dlnk", O_PATH | O_NOFOLLOW);
	r = fd != -1 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode);
	CHECK(r, "O_PATH|O_NOFOLLOW opens the link itself");
	if (fd != -1)
		close(fd);
	n = readlinkat(dfd, "dlnk", buf, sizeof buf - 1);
	if (n >= 0)
		buf[n] = '\0';
	CHECK(n >= 3 && strcmp(buf + n - 3, "sub") == 0,
	    "readlinkat gives the target");
	errno = 0;
	CHECK(readlinkat(dfd, "log", buf, sizeof buf) == -1 &&
	    errno == EINVAL, "readlinkat of a file: EINVAL");
	CHECK(get(dfd, "dlnk/b.txt", buf, sizeof buf) == 3,
	    "a path through the link is followed");
	errno = 0;
	CHECK(unlinkat(dfd, "dlnk", AT_REMOVEDIR) == -1 && errno == ENOTDIR,
	    "AT_REMOVEDIR of a link: ENOTDIR");
	CHECK(unlinkat(dfd, "dlnk", 0) == 0 &&
	    fstatat(dfd, "sub/b.txt", &st, 0) == 0,
	    "unlinkat removes the link, not what it points to");
}

/*
 * What Windows' rules add (see compat-win.h), which POSIX does not have:
 * skipped on other systems.
 */
static void
check_windows(void)
{
#ifdef GBR_COMPAT_WIN_H
	char		buf[64];
	struct stat	a, b;
	DWORD		flags;
	int		fd;

	errno = 0;
	CHECK(openat(dfd, "a.txt:stream", O_WRONLY | O_CREAT, 0644) == -1 &&
	    errno == EINVAL, "a ':' (an NTFS stream) is refused: EINVAL");
	CHECK(get(dfd, "A.TXT", buf, sizeof buf) == 5 &&
	    fstatat(dfd, "A.TXT", &a, 0) == 0 &&
	    fstatat(dfd, "a.txt", &b, 0) == 0 && same_file(&a, &b),
	    "names are case-insensitive");
	CHECK(fstatat(dfd, "sub", &a, 0) == 0 && (a.st_mode & 0777) == 0755 &&
	    fstatat(dfd, "a.txt", &b, 0) == 0 && (b.st_mode & 0777) == 0644,
	    "modes: 0755 for a folder, 0644 for a file");
	fd = openat(dfd, "a.txt", O_RDONLY);
	CHECK(fd != -1 && GetHandleInformation((HANDLE)_get_osfhandle(fd),
	    &flags) && (flags & HANDLE_FLAG_INHERIT) == 0,
	    "an fd opened without O_CLOEXEC is not inherited either");
	if (fd != -1)
		close(fd);
#else
	skip(4, "Windows' own rules (streams, case, fixed modes, inheritance)");
#endif
}

/* Removes everything under the folder fd dir (the test's own files). */
static int
remove_tree(int dir)
{
	struct dirent	*de;
	DIR		*d;
	char		 name[1024];
	int		 fd, sub, rc = 0;

	if ((fd = openat(dir, ".", O_RDONLY | O_DIRECTORY)) == -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(name, sizeof name, "%s", de->d_name);
		if (de->d_type == DT_DIR) {
			sub = openat(dir, name, O_RDONLY | O_DIRECTORY);
			if (sub == -1 || remove_tree(sub) != 0)
				rc = -1;
			if (sub != -1)
				close(sub);
			if (unlinkat(dir, name, AT_REMOVEDIR) != 0)
				rc = -1;
		} else if (unlinkat(dir, name, 0) != 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int
main(void)
{
	const char	*base;
	struct stat	 st;
	char		*r;

	if ((base = getenv("TEMP")) == NULL &&
	    (base = getenv("TMP")) == NULL &&
	    (base = getenv("TMPDIR")) == NULL)
		base = "/tmp";
	snprintf(tmp, sizeof tmp, "%s/gbr-compat-XXXXXX", base);
	r = mkdtemp(tmp);
	CHECK(r == tmp && strstr(tmp, "XXXXXX") == NULL,
	    "mkdtemp makes a folder (%s)", tmp);
	CHECK(stat(tmp, &st) == 0 && S_ISDIR(st.st_mode), "it is a folder");
	dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dfd != -1, "open O_DIRECTORY on it");
	if (r == NULL || dfd == -1)
		return unit_done();

	check_open();
	check_stat();
	check_rename();
	check_unlink();
	check_dir();
	check_walk();
	check_io();
	check_mkstemps();
	check_paths();
	check_env_strings();
	check_links();
	check_windows();

	CHECK(remove_tree(dfd) == 0, "everything made is removed");
	close(dfd);
	CHECK(rmdir(tmp) == 0, "and the folder too");
	return unit_done();
}
