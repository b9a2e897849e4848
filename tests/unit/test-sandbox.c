/*
 * The sandbox attack suite, on real temporary folders: every escape the
 * file tools must refuse (".." in every form, absolute paths, the sibling-prefix folder,
 * symlinks out of every shape, /proc, hard links, FIFOs, sockets, NUL,
 * control and bidi characters, long names, a symlink swapped in while
 * another thread reads and writes), then the legitimate cases that must
 * keep working. After each attack the secret outside the root is checked
 * unchanged and the tree outside the root is checked for anything new.
 *
 * The suite runs twice: with openat2 (when the kernel has it) and with the
 * forced openat(O_NOFOLLOW) walk. A watchdog alarm turns a hang (a FIFO
 * that blocked) into a failure.
 *
 * Then approval pins: an approved write goes only to the object a human
 * was shown (every swap of a link, file, content or folder in between is
 * changed_since_approval, and writes nothing), and lifts the protection
 * of that one path only.
 *
 * Then the SHA-256 that pins approved content, against the standard's
 * vectors.
 *
 * What a system cannot make is not attacked there, and each check that
 * needed it is a TAP skip saying why: symlinks (Wine makes none, Windows
 * only with Developer Mode), FIFOs and Unix sockets in folders, the swap
 * of two names (renameat2), times set back (utimensat), kept modes.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/stat.h>
#ifdef HAVE_SYS_UN_H
#include <sys/socket.h>
#include <sys/un.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "osdep-fs.h"
#include "sandbox.h"
#include "sha256.h"
#include "unit.h"
#include "xmalloc.h"

#define SECRET	"TOP SECRET: never readable through the sandbox\n"

static char		 base[256];	/* the temp folder holding everything */
static char		 root[PATH_MAX];	/* base/proj: the allowed root */
static char		 ro_out[PATH_MAX];	/* base/ro: a read-only root outside */
static char		*snapshot;		/* the tree outside the root, as text */
static const char	*mode;			/* "openat2" or "walk", in test names */
static struct sandbox	*sb;
static int		 links;		/* symlinks can be made here */
static int		 fifo, sock;	/* a FIFO, a Unix socket were made */
static int		 modes;		/* chmod's modes are kept here */

/* Builds a path under base. */
static const char *
at(const char *rel)
{
	static char	buf[4][PATH_MAX + 64];
	static int	i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof buf[i], "%s/%s", base, rel);
	return buf[i];
}

/* Writes a file with given content, or dies (test setup). */
static void
put(const char *path, const char *content)
{
	FILE	*f = fopen(path, "w");

	if (f == NULL || fputs(content, f) == EOF || fclose(f) != 0) {
		fprintf(stderr, "setup: %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* Makes a folder, or dies. */
static void
mkd(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "setup: mkdir %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* Makes a symlink, or dies; nothing where the system makes none. */
static void
sym(const char *target, const char *path)
{
	if (!links)
		return;
	if (symlink(target, path) != 0) {
		fprintf(stderr, "setup: symlink %s: %s\n", path, strerror(errno));
		exit(99);
	}
}

/* Reads a whole small file into a static buffer ("" if missing). */
static const char *
slurp(const char *path)
{
	static char	buf[65536];
	ssize_t		n;
	int		fd;

	buf[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_NONBLOCK)) == -1)
		return buf;
	n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static char	*snap_buf;
static size_t	 snap_len, snap_cap;

/* nftw callback: records one entry outside the root. */
static int
snap_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char	line[PATH_MAX + 128];
	int	n;

	(void)type;
	(void)ftw;
	if (strncmp(path, root, strlen(root)) == 0 &&
	    (path[strlen(root)] == '\0' || path[strlen(root)] == '/'))
		return 0;
	n = snprintf(line, sizeof line, "%s %o %jd %ld.%09ld\n", path,
	    (unsigned)st->st_mode, (intmax_t)st->st_size,
	    (long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (snap_len + (size_t)n + 1 > snap_cap) {
		snap_cap = (snap_len + (size_t)n + 1) * 2;
		snap_buf = xreallocarray(snap_buf, snap_cap, 1);
	}
	memcpy(snap_buf + snap_len, line, (size_t)n + 1);
	snap_len += (size_t)n;
	return 0;
}

/* The tree under base, except the root, as text (new string). */
static char *
take_snapshot(void)
{
	snap_buf = NULL;
	snap_len = snap_cap = 0;
	if (nftw(base, snap_one, 16, FTW_PHYS) != 0 || snap_buf == NULL)
		return xstrdup("nftw failed");
	return snap_buf;
}

/* True if the secret is unchanged and nothing outside the root changed. */
static int
outside_intact(void)
{
	char	*now;
	int	 same;

	if (strcmp(slurp(at("secret.txt")), SECRET) != 0)
		return 0;
	now = take_snapshot();
	same = strcmp(now, snapshot) == 0;
	if (!same)
		fprintf(stderr, "outside changed:\n--- before\n%s--- after\n%s",
		    snapshot, now);
	free(now);
	return same;
}

/* Expects a read of path (len bytes) to be refused with kind. */
static void
read_refused_n(const char *path, size_t len, enum gbr_err kind, const char *what)
{
	enum gbr_err	 k = GBR_ERR_INTERNAL;
	char		*reason = NULL, *data = NULL;
	size_t		 dlen;
	int		 r;

	r = sandbox_read_file(sb, path, len, 0, &data, &dlen, NULL, NULL, &k,
	    &reason);
	CHECK(r == -1 && k == kind && reason != NULL && data == NULL &&
	    outside_intact(), "%s: read %s refused as %s (%s: %s)", mode, what,
	    gbr_err_kind(kind), r == 0 ? "READ" : gbr_err_kind(k),
	    r == 0 ? data : reason);
	free(reason);
	free(data);
}

/* Expects a read of path to be refused with kind. */
static void
read_refused(const char *path, enum gbr_err kind, const char *what)
{
	read_refused_n(path, strlen(path), kind, what);
}

/* Expects a read of path to give content. */
static void
read_ok(const char *path, const char *content, const char *what)
{
	enum gbr_err	 k;
	char		*reason = NULL, *data = NULL;
	size_t		 dlen = 0;
	int		 r;

	r = sandbox_read_file(sb, path, strlen(path), 0, &data, &dlen, NULL,
	    NULL, &k, &reason);
	CHECK(r == 0 && dlen == strlen(content) && memcmp(data, content, dlen) == 0,
	    "%s: read %s works (%s)", mode, what, r == 0 ? "ok" : reason);
	free(reason);
	free(data);
}

/* Expects a write to path to be refused with kind, changing nothing. */
static void
write_refused(const char *path, enum gbr_err kind, const char *what)
{
	enum gbr_err	 k = GBR_ERR_INTERNAL;
	char		*reason = NULL;
	int		 r;

	r = sandbox_write_file(sb, path, strlen(path), "PWNED\n", 6, NULL, NULL,
	    NULL, &k, &reason);
	CHECK(r == -1 && k == kind && outside_intact(),
	    "%s: write %s refused as %s (%s: %s)", mode, what, gbr_err_kind(kind),
	    r == 0 ? "WRITTEN" : gbr_err_kind(k), r == 0 ? "" : reason);
	free(reason);
}

/* Expects a write to path to work and land at canonical rel with content. */
static void
write_ok(const char *path, const char *content, const char *canon, int created,
    const char *what)
{
	struct sandbox_loc	 loc = { 0, NULL };
	enum gbr_err		 k;
	char			*reason = NULL, full[PATH_MAX + 64];
	int			 r, c = -1;

	r = sandbox_write_file(sb, path, strlen(path), content, strlen(content),
	    NULL, &c, &loc, &k, &reason);
	snprintf(full, sizeof full, "%s/%s", root, canon);
	CHECK(r == 0 && c == created && loc.rel != NULL &&
	    strcmp(loc.rel, canon) == 0 && strcmp(slurp(full), content) == 0 &&
	    outside_intact(), "%s: write %s works (%s, at %s)", mode, what,
	    r == 0 ? "ok" : reason, loc.rel ? loc.rel : "-");
	sandbox_loc_release(&loc);
	free(reason);
}

/* Expects a folder open to give kind (or success when kind is -1). */
static void
dir_check(const char *path, int kind, const char *what)
{
	enum gbr_err	 k = GBR_ERR_INTERNAL;
	char		*reason = NULL;
	int		 r, fd = -1;

	r = sandbox_open_dir(sb, path, strlen(path), &fd, NULL, &k, &reason);
	if (kind == -1)
		CHECK(r == 0 && fd != -1, "%s: open folder %s works (%s)", mode,
		    what, r == 0 ? "ok" : reason);
	else
		CHECK(r == -1 && (int)k == kind && outside_intact(),
		    "%s: open folder %s refused as %s (%s)", mode, what,
		    gbr_err_kind(kind), r == 0 ? "OPENED" : reason);
	if (fd != -1)
		close(fd);
	free(reason);
}

/* True if a folder of the root holds a leftover temp file. */
static int
has_temp(const char *rel)
{
	char		 path[PATH_MAX + 64];
	DIR		*d;
	struct dirent	*e;
	int		 found = 0;

	snprintf(path, sizeof path, "%s/%s", root, rel);
	if ((d = opendir(path)) == NULL)
		return 1;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, ".gbr-", 5) == 0)
			found = 1;
	closedir(d);
	return found;
}

/* Builds the tree every attack runs against. */
static void
setup(void)
{
#ifdef HAVE_SYS_UN_H
	struct sockaddr_un	 sun;
	int			 s;
#endif
	struct stat		 st;
	char			 deep[PATH_MAX], target[PATH_MAX + 64];
	int			 i;

	unit_tmpdir(base, sizeof base, "sandbox");
	links = unit_can_symlink(base);
	snprintf(root, sizeof root, "%s/proj", base);
	snprintf(ro_out, sizeof ro_out, "%s/ro", base);

	put(at("secret.txt"), SECRET);
	mkd(at("outside"));
	put(at("outside/file.txt"), "outside file\n");
	put(at("outside/f.txt"), "OUTSIDE\n");
	mkd(at("proj-evil"));
	put(at("proj-evil/evil.txt"), "evil sibling\n");
	mkd(at("ro"));
	mkd(at("ro/pkg"));
	put(at("ro/pkg/lib.gleam"), "pub fn lib() { 1 }\n");

	mkd(root);
	put(at("proj/gleam.toml"), "name = \"proj\"\n");
	put(at("proj/manifest.toml"), "# manifest\n");
	mkd(at("proj/.gbr_envs"));
	put(at("proj/.gbr_envs/default.ini"), "[env]\n");
	mkd(at("proj/.git"));
	put(at("proj/.git/config"), "[core]\n");
	mkd(at("proj/src"));
	put(at("proj/src/main.gleam"), "pub fn main() { 0 }\n");
	mkd(at("proj/build"));
	mkd(at("proj/build/packages"));
	put(at("proj/build/packages/pkg.gleam"), "pub fn pkg() { 2 }\n");
	put(at("proj/a..b"), "dots in a name\n");
	mkd(at("proj/sub"));

	sym("../secret.txt", at("proj/link_file_out"));
	sym("../outside", at("proj/link_dir_out"));
	sym("chain2", at("proj/chain1"));
	sym("chain3", at("proj/chain2"));
	sym("../secret.txt", at("proj/chain3"));
	sym("chain_in2", at("proj/chain_in1"));
	sym("src/main.gleam", at("proj/chain_in2"));
	sym("../nonexistent", at("proj/dangling_out"));
	sym("src/nothing.txt", at("proj/dangling_in"));
	sym("loop2", at("proj/loop1"));
	sym("loop1", at("proj/loop2"));
	sym("self", at("proj/self"));
	snprintf(target, sizeof target, "%s/src/main.gleam", root);
	sym(target, at("proj/abs_in"));
	sym("/etc/passwd", at("proj/abs_out"));
	snprintf(target, sizeof target, "/proc/self/root%s/secret.txt", base);
	sym(target, at("proj/proc_root"));
	sym("/proc/self/fd/0", at("proj/proc_fd"));
	sym("/proc/self/cwd", at("proj/proc_cwd"));
	sym("../../../../../../../../../../proc/self/root/etc/passwd",
	    at("proj/rel_proc"));
	sym("src", at("proj/dir_in"));
	sym(".gbr_envs", at("proj/envs_link"));
	sym("build/packages", at("proj/ro_link"));
	sym("gleam.toml", at("proj/toml_link"));
	sym("../src", at("proj/sub/up"));
	sym("../../outside", at("proj/sub/esc"));
	sym("../sub/../../secret.txt", at("proj/sub/tricky"));
	sym("./../secret.txt", at("proj/dotdot_out"));
	sym("sub/up/../../secret.txt", at("proj/lexical_trap"));
	if (link(at("secret.txt"), at("proj/hard")) != 0) {
		fprintf(stderr, "setup: link: %s\n", strerror(errno));
		exit(99);
	}
#ifdef HAVE_MKFIFO
	if (mkfifo(at("proj/fifo"), 0600) != 0)
		exit(99);
	fifo = 1;
#endif
#ifdef HAVE_SYS_UN_H
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", at("proj/sock"));
	if ((s = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    bind(s, (struct sockaddr *)&sun, sizeof sun) != 0)
		exit(99);
	close(s);
	sock = 1;
#endif
	/* Whether a mode set is the mode read back (Windows fixes them). */
	put(at("modes"), "");
	modes = chmod(at("modes"), 0751) == 0 && stat(at("modes"), &st) ==
	    0 && (st.st_mode & 0777) == 0751;
	unlink(at("modes"));

	mkd(at("proj/unicod\xc3\xa9"));
	put(at("proj/unicod\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt"), "unicode\n");
	snprintf(deep, sizeof deep, "%s", root);
	for (i = 0; i < 40; i++) {
		size_t	l = strlen(deep);

		snprintf(deep + l, sizeof deep - l, "/d%d", i);
		mkd(deep);
	}
	strncat(deep, "/deep.txt", sizeof deep - strlen(deep) - 1);
	put(deep, "deep\n");

	/* The race folders: race/d is a folder or a link out, swapped. */
	mkd(at("proj/race"));
	mkd(at("proj/race/d"));
	put(at("proj/race/d/f.txt"), "inside\n");
	sym("../../outside", at("proj/race/l"));
}

/* Creates the sandbox under test. */
static void
make_sandbox(void)
{
	static const char *const prot[] = { "gleam.toml", "manifest.toml",
	    ".git/**", "pin/*.lock" };
	const char		*ro[2];
	char			 inside_ro[PATH_MAX + 64], *cause = NULL;
	struct sandbox_config	 cfg;

	snprintf(inside_ro, sizeof inside_ro, "%s/build/packages", root);
	ro[0] = inside_ro;
	ro[1] = ro_out;
	memset(&cfg, 0, sizeof cfg);
	cfg.root = root;
	cfg.ro_roots = ro;
	cfg.nro = 2;
	cfg.protected = prot;
	cfg.nprotected = 4;
	cfg.max_write = 1 << 20;
	if ((sb = sandbox_create(&cfg, &cause)) == NULL) {
		fprintf(stderr, "sandbox_create: %s\n", cause);
		exit(99);
	}
}

/* ".." in every form, absolute paths, the sibling, and bad bytes. */
static void
attacks_lexical(void)
{
	char	buf[8192], abs[PATH_MAX + 64];

	read_refused("../secret.txt", GBR_ERR_PATH_TRAVERSAL, "../secret.txt");
	read_refused("src/../../secret.txt", GBR_ERR_PATH_TRAVERSAL, "src/../../");
	read_refused("./src/./../../secret.txt", GBR_ERR_PATH_TRAVERSAL, "./src/./../../");
	read_refused("src//..//..//secret.txt", GBR_ERR_PATH_TRAVERSAL, "doubled slashes");
	read_refused("..", GBR_ERR_PATH_TRAVERSAL, "..");
	read_refused("a/../../proj/src/main.gleam", GBR_ERR_PATH_TRAVERSAL,
	    "out and back in by name");
	read_refused(at("secret.txt"), GBR_ERR_PATH_TRAVERSAL, "absolute secret");
	read_refused("/etc/passwd", GBR_ERR_PATH_TRAVERSAL, "/etc/passwd");
	read_refused("/proc/self/root/etc/passwd", GBR_ERR_PATH_TRAVERSAL,
	    "/proc/self/root/etc/passwd");
	read_refused(at("proj-evil/evil.txt"), GBR_ERR_PATH_TRAVERSAL,
	    "sibling folder with the root's name as prefix (CVE-2025-53110)");
	snprintf(abs, sizeof abs, "%s/../proj-evil/evil.txt", root);
	read_refused(abs, GBR_ERR_PATH_TRAVERSAL, "root/../proj-evil");
	snprintf(abs, sizeof abs, "%s/../secret.txt", root);
	read_refused(abs, GBR_ERR_PATH_TRAVERSAL, "root/../secret.txt");
	dir_check(at("proj-evil"), GBR_ERR_PATH_TRAVERSAL, "the sibling folder");
	dir_check("..", GBR_ERR_PATH_TRAVERSAL, "..");
	read_refused("%2e%2e/secret.txt", GBR_ERR_NOT_FOUND, "URL-encoded .. (a name)");

	read_refused_n("src/main.gleam\0/../../../secret.txt", 36,
	    GBR_ERR_INVALID_PATH, "NUL byte inside");
	read_refused_n("\0", 1, GBR_ERR_INVALID_PATH, "a lone NUL");
	read_refused("", GBR_ERR_INVALID_PATH, "an empty path");
	read_refused("src/\x1b[2Jmain.gleam", GBR_ERR_INVALID_PATH, "an escape sequence");
	read_refused("src/main.gleam\n", GBR_ERR_INVALID_PATH, "a newline");
	read_refused("src/\xe2\x80\xaemain.gleam", GBR_ERR_INVALID_PATH, "U+202E");
	read_refused("src/\xe2\x81\xa6main.gleam", GBR_ERR_INVALID_PATH, "U+2066");
	read_refused("src/\xd8\x9cmain.gleam", GBR_ERR_INVALID_PATH, "U+061C");
	read_refused("src/\xc0\xae\xc0\xae/x", GBR_ERR_INVALID_PATH, "overlong dots");
	read_refused("src/\xed\xa0\x80", GBR_ERR_INVALID_PATH, "a surrogate");

	memset(buf, 'x', 300);
	buf[300] = '\0';
	read_refused(buf, GBR_ERR_INVALID_PATH, "a 300-byte name");
	write_refused(buf, GBR_ERR_INVALID_PATH, "a 300-byte name");
	memset(buf, 0, sizeof buf);
	for (size_t i = 0; i + 2 < 5000; i += 2)
		memcpy(buf + i, "a/", 2);
	read_refused(buf, GBR_ERR_INVALID_PATH, "a 5000-byte path");

	write_refused("../pwned.txt", GBR_ERR_PATH_TRAVERSAL, "../pwned.txt");
	write_refused("src/../../outside/pwned.txt", GBR_ERR_PATH_TRAVERSAL,
	    "src/../../outside");
	write_refused(at("outside/pwned.txt"), GBR_ERR_PATH_TRAVERSAL, "absolute outside");
	write_refused(at("proj-evil/pwned.txt"), GBR_ERR_PATH_TRAVERSAL, "absolute sibling");
	write_refused("new/\xe2\x80\xaepwned", GBR_ERR_INVALID_PATH, "a bidi name");
	write_refused("x\ty", GBR_ERR_INVALID_PATH, "a tab in a name");
}

/* Symlinks out in every shape, through /proc, and hard links. */
static void
attacks_links(void)
{
	if (!links) {
		unit_skip(25, UNIT_NO_SYMLINKS);
		goto hard;
	}
	read_refused("link_file_out", GBR_ERR_PATH_TRAVERSAL, "a symlink to a file outside");
	read_refused("link_dir_out/file.txt", GBR_ERR_PATH_TRAVERSAL,
	    "through a symlink to a folder outside");
	dir_check("link_dir_out", GBR_ERR_PATH_TRAVERSAL, "a symlink to a folder outside");
	read_refused("chain1", GBR_ERR_PATH_TRAVERSAL, "a chain of symlinks out");
	read_refused("dangling_out", GBR_ERR_PATH_TRAVERSAL, "a dangling symlink out");
	read_refused("loop1", GBR_ERR_PATH_TRAVERSAL, "a symlink loop");
	read_refused("self", GBR_ERR_PATH_TRAVERSAL, "a symlink to itself");
	read_refused("abs_in", GBR_ERR_PATH_TRAVERSAL,
	    "an absolute symlink pointing inside (refused: absolute links never followed)");
	read_refused("abs_out", GBR_ERR_PATH_TRAVERSAL, "an absolute symlink out");
	read_refused("proc_root", GBR_ERR_PATH_TRAVERSAL, "a symlink through /proc/self/root");
	read_refused("proc_fd", GBR_ERR_PATH_TRAVERSAL, "a symlink to /proc/self/fd/0");
	dir_check("proc_cwd", GBR_ERR_PATH_TRAVERSAL, "a symlink to /proc/self/cwd");
	read_refused("rel_proc", GBR_ERR_PATH_TRAVERSAL, "a relative symlink up to /proc");
	read_refused("sub/esc/file.txt", GBR_ERR_PATH_TRAVERSAL, "a nested symlink out");
	read_refused("sub/tricky", GBR_ERR_PATH_TRAVERSAL, "a symlink with .. inside its target");
	read_refused("dotdot_out", GBR_ERR_PATH_TRAVERSAL, "a symlink ./../");
	read_refused("lexical_trap", GBR_ERR_PATH_TRAVERSAL,
	    "a symlink whose target goes through another link then ..");

	write_refused("link_file_out", GBR_ERR_PATH_TRAVERSAL, "through a symlink to a file outside");
	write_refused("link_dir_out/pwned.txt", GBR_ERR_PATH_TRAVERSAL,
	    "into a symlinked folder outside");
	write_refused("chain1", GBR_ERR_PATH_TRAVERSAL, "through a chain out");
	write_refused("dangling_out", GBR_ERR_PATH_TRAVERSAL, "through a dangling symlink out");
	write_refused("loop1", GBR_ERR_PATH_TRAVERSAL, "through a loop");
	write_refused("abs_in", GBR_ERR_PATH_TRAVERSAL, "through an absolute symlink");
	write_refused("proc_root", GBR_ERR_PATH_TRAVERSAL, "through /proc/self/root");
	write_refused("sub/esc/pwned.txt", GBR_ERR_PATH_TRAVERSAL, "into a nested symlink out");
hard:
	write_refused("hard", GBR_ERR_PATH_TRAVERSAL, "a hard link to a file outside");
	read_ok("hard", SECRET,
	    "a hard link a human made inside (reads allowed: see sandbox.c)");
}

/* Object checks, protected and read-only rules, size caps. */
static void
attacks_objects(void)
{
	char	*big;

#ifdef SIGALRM
	alarm(30);	/* a FIFO that blocks turns into a failure, not a hang */
#endif
	if (fifo) {
		read_refused("fifo", GBR_ERR_NOT_A_FILE, "a FIFO (must not block)");
		write_refused("fifo", GBR_ERR_NOT_A_FILE, "a FIFO");
	} else
		unit_skip(2, "this system has no FIFOs in folders");
	if (sock) {
		read_refused("sock", GBR_ERR_NOT_A_FILE, "a socket");
		write_refused("sock", GBR_ERR_NOT_A_FILE, "a socket");
	} else
		unit_skip(2, "this system has no Unix sockets in folders");
	read_refused("/dev/zero", GBR_ERR_PATH_TRAVERSAL, "/dev/zero");
#ifdef SIGALRM
	alarm(0);
#endif
	read_refused("src", GBR_ERR_NOT_A_FILE, "a folder");
	read_refused(".", GBR_ERR_NOT_A_FILE, "the root");
	write_refused("src", GBR_ERR_NOT_A_FILE, "a folder");
	write_refused(".", GBR_ERR_NOT_A_FILE, "the root");
	dir_check("src/main.gleam", GBR_ERR_NOT_A_FILE, "a file as a folder");
	read_refused("src/main.gleam/x", GBR_ERR_NOT_FOUND, "below a file");
	write_refused("src/main.gleam/x", GBR_ERR_NOT_FOUND, "below a file");
	read_refused("nothing-here", GBR_ERR_NOT_FOUND, "a missing file");
	if (links)
		read_refused("dangling_in", GBR_ERR_NOT_FOUND,
		    "a dangling symlink inside");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);

	write_refused("gleam.toml", GBR_ERR_PROTECTED_PATH, "gleam.toml");
	write_refused("./src/../gleam.toml", GBR_ERR_PROTECTED_PATH, "gleam.toml by a detour");
	write_refused("GLEAM.TOML", GBR_ERR_PROTECTED_PATH, "GLEAM.TOML (case-folded)");
	if (links)
		write_refused("toml_link", GBR_ERR_PROTECTED_PATH,
		    "a symlink to gleam.toml");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);
	write_refused("manifest.toml", GBR_ERR_PROTECTED_PATH, "manifest.toml");
	write_refused(".git/config", GBR_ERR_PROTECTED_PATH, ".git/config");
	write_refused(".gbr_envs/default.ini", GBR_ERR_PROTECTED_PATH,
	    ".gbr_envs/default.ini (always protected)");
	write_refused(".gbr_envs/wider.ini", GBR_ERR_PROTECTED_PATH, "a new profile");
	write_refused(".GBR_ENVS/x.ini", GBR_ERR_PROTECTED_PATH, ".GBR_ENVS (case-folded)");
	if (links)
		write_refused("envs_link/default.ini", GBR_ERR_PROTECTED_PATH,
		    "a profile through a symlink to .gbr_envs");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);
	write_refused("sub/.gbr_envs/x.ini", GBR_ERR_PROTECTED_PATH, "a nested .gbr_envs");
	write_refused("build/packages/pkg.gleam", GBR_ERR_READ_ONLY, "a read-only root inside");
	write_refused("build/packages/new/x.gleam", GBR_ERR_READ_ONLY, "a new file in it");
	if (links)
		write_refused("ro_link/pkg.gleam", GBR_ERR_READ_ONLY,
		    "a read-only root via a symlink");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);
	write_refused(at("ro/pkg/lib.gleam"), GBR_ERR_READ_ONLY, "a read-only root outside");
	write_refused(at("ro/pkg/new.gleam"), GBR_ERR_READ_ONLY, "a new file in it");

	big = xmalloc((1 << 20) + 2);
	memset(big, 'b', (1 << 20) + 1);
	big[(1 << 20) + 1] = '\0';
	{
		enum gbr_err	 k = GBR_ERR_INTERNAL;
		char		*reason = NULL;
		int		 r;

		r = sandbox_write_file(sb, "big.txt", 7, big, (1 << 20) + 1, NULL,
		    NULL, NULL, &k, &reason);
		CHECK(r == -1 && k == GBR_ERR_TOO_LARGE && access(at("proj/big.txt"), F_OK) != 0,
		    "%s: a write over the cap is too_large", mode);
		free(reason);
		put(at("proj/big.txt"), "0123456789");
		{
			char	*data = NULL;
			size_t	 dlen = 0;

			reason = NULL;
			r = sandbox_read_file(sb, "big.txt", 7, 5, &data, &dlen,
			    NULL, NULL, &k, &reason);
			CHECK(r == -1 && k == GBR_ERR_TOO_LARGE && data == NULL,
			    "%s: a read over its cap is too_large", mode);
			free(reason);
		}
		unlink(at("proj/big.txt"));
	}
	free(big);
}

/* What must keep working. */
static void
legitimate(void)
{
	struct sandbox_loc	 loc = { 0, NULL };
	struct stat		 st;
	enum gbr_err		 k;
	char			*reason = NULL, *data = NULL, deep[PATH_MAX], abs[PATH_MAX + 64];
	size_t			 dlen, l;
	int			 i, r, fd;

	read_ok("src/main.gleam", "pub fn main() { 0 }\n", "src/main.gleam");
	read_ok("./src//main.gleam", "pub fn main() { 0 }\n", "./src//main.gleam");
	read_ok("link_dir_out/../src/main.gleam", "pub fn main() { 0 }\n",
	    "'..' is lexical: link/../x is x");
	read_ok("a..b", "dots in a name\n", "a..b");
	if (links) {
		read_ok("chain_in1", "pub fn main() { 0 }\n",
		    "a chain of symlinks inside");
		read_ok("dir_in/main.gleam", "pub fn main() { 0 }\n",
		    "a symlinked folder inside");
		read_ok("sub/up/main.gleam", "pub fn main() { 0 }\n",
		    "a ../ symlink staying inside");
	} else
		unit_skip(3, UNIT_NO_SYMLINKS);
	read_ok("unicod\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt", "unicode\n", "unicode names");
	snprintf(abs, sizeof abs, "%s/src/main.gleam", root);
	read_ok(abs, "pub fn main() { 0 }\n", "an absolute path inside");
	read_ok(at("ro/pkg/lib.gleam"), "pub fn lib() { 1 }\n", "a read-only root outside");
	read_ok("build/packages/pkg.gleam", "pub fn pkg() { 2 }\n", "a read-only root inside");
	read_ok("gleam.toml", "name = \"proj\"\n", "a protected file (reads are fine)");
	deep[0] = '\0';
	for (i = 0; i < 40; i++) {
		l = strlen(deep);
		snprintf(deep + l, sizeof deep - l, "d%d/", i);
	}
	strncat(deep, "deep.txt", sizeof deep - strlen(deep) - 1);
	read_ok(deep, "deep\n", "40 folders deep");
	dir_check(".", -1, "the root");
	dir_check("src", -1, "src");
	if (links)
		dir_check("dir_in", -1, "a symlinked folder inside");
	else
		unit_skip(1, UNIT_NO_SYMLINKS);

	r = sandbox_open_file(sb, at("ro/pkg/lib.gleam"), strlen(at("ro/pkg/lib.gleam")),
	    &fd, &st, &loc, &k, &reason);
	if (r == 0) {
		char *shown = sandbox_display(sb, &loc);

		CHECK(loc.root == 2 && strcmp(loc.rel, "pkg/lib.gleam") == 0 &&
		    strcmp(shown, at("ro/pkg/lib.gleam")) == 0,
		    "%s: an outside read-only root is shown absolute (%s)", mode, shown);
		free(shown);
		close(fd);
	} else
		CHECK(0, "%s: open in the outside read-only root (%s)", mode, reason);
	sandbox_loc_release(&loc);
	free(reason);
	reason = NULL;

	write_ok("src/new.gleam", "pub fn new() { 1 }\n", "src/new.gleam", 1, "a new file");
	write_ok("src/new.gleam", "pub fn new() { 2 }\n", "src/new.gleam", 0, "an overwrite");
	write_ok("fresh/a/b/c.txt", "nested\n", "fresh/a/b/c.txt", 1, "new folders");
	if (links) {
		struct stat	lst;

		write_ok("dir_in/via_link.txt", "via\n", "src/via_link.txt", 1,
		    "through a symlinked folder inside (canonical path "
		    "reported)");
		write_ok("chain_in1", "pub fn main() { 1 }\n", "src/main.gleam",
		    0, "through a chain inside (the target changes, the links "
		    "stay)");
		CHECK(lstat(at("proj/chain_in1"), &lst) == 0 &&
		    S_ISLNK(lst.st_mode), "%s: the symlink is still a symlink "
		    "after writing through it", mode);
		write_ok("dangling_in", "now exists\n", "src/nothing.txt", 1,
		    "a dangling symlink inside creates its target");
	} else
		unit_skip(4, UNIT_NO_SYMLINKS);
	write_ok("unicod\xc3\xa9/\xc3\xb1.txt", "\xc3\xb1\n", "unicod\xc3\xa9/\xc3\xb1.txt", 1,
	    "a unicode name");
	write_ok("x..y", "dots\n", "x..y", 1, "x..y");
	CHECK(!has_temp("src") && !has_temp(".") && !has_temp("fresh/a/b"),
	    "%s: no temporary files are left behind", mode);

	/* A file without write permission is not replaced by a rename. */
	put(at("proj/src/ro.txt"), "keep\n");
	chmod(at("proj/src/ro.txt"), 0444);
	write_refused("src/ro.txt", GBR_ERR_PERMISSION_DENIED, "a file with mode 0444");
	CHECK(strcmp(slurp(at("proj/src/ro.txt")), "keep\n") == 0, "%s: it is unchanged", mode);
	unlink(at("proj/src/ro.txt"));

	/* A write keeps the file's mode and drops set-id bits. */
	if (modes) {
		chmod(at("proj/src/new.gleam"), 04751);
		write_ok("src/new.gleam", "pub fn new() { 3 }\n",
		    "src/new.gleam", 0, "a chmod'ed file");
		CHECK(stat(at("proj/src/new.gleam"), &st) == 0 &&
		    (st.st_mode & 07777) == 0751, "%s: mode kept, set-id "
		    "dropped (%o)", mode, (unsigned)(st.st_mode & 07777));
	} else
		unit_skip(2, "this system keeps no permission modes");

	/* expect: the file read must still be the one written. */
	r = sandbox_read_file(sb, "src/new.gleam", 13, 0, &data, &dlen, &st, NULL, &k, &reason);
	CHECK(r == 0, "%s: read for an edit", mode);
	free(data);
	rename(at("proj/src/main.gleam"), at("proj/src/new.gleam"));
	r = sandbox_write_file(sb, "src/new.gleam", 13, "x", 1, &st, NULL, NULL, &k, &reason);
	CHECK(r == -1 && k == GBR_ERR_BUSY, "%s: a file replaced since it was read is busy (%s)",
	    mode, r == 0 ? "written" : reason);
	free(reason);
	reason = NULL;
	put(at("proj/src/main.gleam"), "pub fn main() { 0 }\n");

	/* An in-place change keeps the inode: size and mtime still tell. */
	r = sandbox_read_file(sb, "src/main.gleam", 14, 0, &data, &dlen, &st, NULL, &k, &reason);
	free(data);
	{
		FILE	*f = fopen(at("proj/src/main.gleam"), "a");

		fputs("// changed in place\n", f);
		fclose(f);
	}
	r = sandbox_write_file(sb, "src/main.gleam", 14, "x", 1, &st, NULL, NULL, &k, &reason);
	CHECK(r == -1 && k == GBR_ERR_BUSY, "%s: a file changed in place since it was read is busy",
	    mode);
	free(reason);
	reason = NULL;
	put(at("proj/src/main.gleam"), "pub fn main() { 0 }\n");

	/* Undo the writes, so the next resolver mode starts from the same tree. */
	unlink(at("proj/src/new.gleam"));
	unlink(at("proj/src/via_link.txt"));
	unlink(at("proj/src/nothing.txt"));
	unlink(at("proj/fresh/a/b/c.txt"));
	rmdir(at("proj/fresh/a/b"));
	rmdir(at("proj/fresh/a"));
	rmdir(at("proj/fresh"));
	unlink(at("proj/unicod\xc3\xa9/\xc3\xb1.txt"));
	unlink(at("proj/x..y"));
}

#ifdef HAVE_RENAMEAT2
static atomic_int	race_stop;

/* Swaps race/d (a folder) and race/l (a link out) as fast as it can. */
static void *
race_swapper(void *arg)
{
	char	d[PATH_MAX + 64], l[PATH_MAX + 64];

	(void)arg;
	snprintf(d, sizeof d, "%s/race/d", root);
	snprintf(l, sizeof l, "%s/race/l", root);
	while (!atomic_load(&race_stop))
		renameat2(AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE);
	return NULL;
}

/*
 * The race: while a thread swaps race/d between a folder inside and a
 * symlink out, reads and writes of race/d/... must never touch outside.
 */
static void
attack_race(void)
{
	pthread_t	 t;
	struct timespec	 start, now;
	enum gbr_err	 k;
	char		*reason, *data;
	size_t		 dlen;
	long		 ok = 0, refused = 0, leaked = 0, wrote_out = 0, n;

	atomic_store(&race_stop, 0);
	if (pthread_create(&t, NULL, race_swapper, NULL) != 0) {
		CHECK(0, "%s: race thread", mode);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (n = 0;; n++) {
		reason = data = NULL;
		if (sandbox_read_file(sb, "race/d/f.txt", 12, 0, &data, &dlen, NULL,
		    NULL, &k, &reason) == 0) {
			if (strcmp(data, "inside\n") == 0)
				ok++;
			else
				leaked++;
		} else
			refused++;
		free(data);
		free(reason);
		reason = NULL;
		if (n % 8 == 0 && sandbox_write_file(sb, "race/d/w.txt", 12, "w\n", 2,
		    NULL, NULL, NULL, &k, &reason) == 0 &&
		    access(at("outside/w.txt"), F_OK) == 0)
			wrote_out++;
		free(reason);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 2 && ok > 0 && refused > 0)
			break;
		if (now.tv_sec - start.tv_sec >= 10)
			break;
	}
	atomic_store(&race_stop, 1);
	pthread_join(t, NULL);
	/* Put race/d back to being the folder. */
	{
		struct stat	st;

		if (lstat(at("proj/race/d"), &st) == 0 && S_ISLNK(st.st_mode))
			renameat2(AT_FDCWD, at("proj/race/d"), AT_FDCWD,
			    at("proj/race/l"), RENAME_EXCHANGE);
	}
	CHECK(leaked == 0 && wrote_out == 0 && outside_intact(),
	    "%s: race: %ld calls, %ld inside, %ld refused, %ld leaked, %ld written out",
	    mode, n, ok, refused, leaked, wrote_out);
	CHECK(ok > 0 && refused > 0,
	    "%s: race: both outcomes seen, so the swap really raced the reads", mode);
}
#endif

static int	rm_one(const char *, const struct stat *, int, struct FTW *);

/* Rebuilds proj/pin for the pin tests (each mode starts afresh). */
static void
pin_setup(void)
{
	nftw(at("proj/pin"), rm_one, 16, FTW_DEPTH | FTW_PHYS);
	mkd(at("proj/pin"));
	mkd(at("proj/pin/.gbr_envs"));
	mkd(at("proj/pin/d"));
	put(at("proj/pin/app.lock"), "lock 1\n");
	put(at("proj/pin/.gbr_envs/p.ini"), "[env]\n");
	put(at("proj/pin/d/f.lock"), "f\n");
}

/* Pins path now (expects success). */
static void
pin_take(const char *path, struct sandbox_check *chk, const char *what)
{
	enum gbr_err	 k;
	char		*reason = NULL;
	int		 r;

	r = sandbox_check_write(sb, path, strlen(path), 8, chk, &k, &reason);
	CHECK(r == 0 && chk->pin.rel != NULL, "%s: pin %s (%s)", mode, what,
	    r == 0 ? "ok" : reason);
	free(reason);
}

/* An approved write of path with pin: 0, or the refusal's kind. */
static int
pin_write(const char *path, const char *data, const struct sandbox_pin *pin,
    char **why)
{
	enum gbr_err	 k = GBR_ERR_INTERNAL;
	char		*reason = NULL;

	if (sandbox_write_file_approved(sb, path, strlen(path), data,
	    strlen(data), NULL, pin, NULL, NULL, &k, &reason) == 0) {
		free(reason);
		*why = xstrdup("written");
		return 0;
	}
	*why = reason != NULL ? reason : xstrdup("?");
	return (int)k;
}

/* Expects an approved write to be refused as changed, writing nothing. */
static void
pin_changed(const char *path, const struct sandbox_pin *pin,
    const char *file, const char *holds, const char *what)
{
	char	*why;
	int	 k = pin_write(path, "PWNED\n", pin, &why);

	CHECK(k == GBR_ERR_CHANGED_SINCE_APPROVAL && strstr(why,
	    "ask again") != NULL && strcmp(slurp(at(file)), holds) == 0 &&
	    !has_temp("pin") && !has_temp("pin/.gbr_envs") && !has_temp("pin/d") &&
	    outside_intact(), "%s: pinned write refused: %s (%s: %s)", mode,
	    what, k == 0 ? "WRITTEN" : gbr_err_kind((enum gbr_err)k), why);
	free(why);
}

/* Approval pins: see the top of the file. */
static void
pins(void)
{
	struct sandbox_check	 chk;
	struct timespec		 ts[2];
	struct stat		 st;
	char			*why, *saved;
	int			 k, fd;

	pin_setup();
	pin_take("pin/app.lock", &chk, "an existing protected file");
	CHECK(chk.protected && chk.pin.exists && chk.pin.hashed &&
	    strcmp(chk.pin.rel, "pin/app.lock") == 0 &&
	    strcmp(chk.pin.asked, "pin/app.lock") == 0 &&
	    strcmp(chk.pin.root, root) == 0 && chk.cur != NULL &&
	    strcmp(chk.cur, "lock 1\n") == 0 && chk.pin.size == 7 &&
	    sandbox_pin_content(&chk.pin, "lock 1\n", 7) &&
	    !sandbox_pin_content(&chk.pin, "lock 2\n", 7),
	    "%s: the pin names the file, its bytes and their hash", mode);
	k = pin_write("pin/app.lock", "lock 2\n", &chk.pin, &why);
	CHECK(k == 0 && strcmp(slurp(at("proj/pin/app.lock")), "lock 2\n") == 0,
	    "%s: an approved write of the pinned file works (%s)", mode, why);
	free(why);
	/* The pin is spent: the file it named was replaced by the write. */
	pin_changed("pin/app.lock", &chk.pin, "proj/pin/app.lock", "lock 2\n",
	    "the same pin again, after its write");
	sandbox_check_release(&chk);

	/* A link into .gbr_envs swapped in: the profile is never written. */
	pin_take("pin/app.lock", &chk, "before a link swap");
	if (links) {
		unlink(at("proj/pin/app.lock"));
		sym(".gbr_envs/p.ini", at("proj/pin/app.lock"));
		pin_changed("pin/app.lock", &chk.pin,
		    "proj/pin/.gbr_envs/p.ini", "[env]\n",
		    "a link into .gbr_envs swapped in");
		/*
		 * Nor with the pin's checks out of the way: only the
		 * protection of the pinned path is lifted, so the profile's
		 * own still holds.
		 */
		sandbox_test_skip_pin_checks(1);
		k = pin_write("pin/app.lock", "PWNED\n", &chk.pin, &why);
		sandbox_test_skip_pin_checks(0);
		CHECK(k == GBR_ERR_PROTECTED_PATH &&
		    strcmp(slurp(at("proj/pin/.gbr_envs/p.ini")), "[env]\n") ==
		    0 && !has_temp("pin/.gbr_envs"), "%s: without its checks, "
		    "a pin still lifts no protection but its own path's (%s)",
		    mode, why);
		free(why);
	} else
		unit_skip(2, UNIT_NO_SYMLINKS);
	unlink(at("proj/pin/app.lock"));
	put(at("proj/pin/app.lock"), "lock 1\n");
	sandbox_check_release(&chk);

	/* Another protected path, typed: the pin does not lift its protection. */
	pin_take("pin/app.lock", &chk, "for another path");
	k = pin_write("manifest.toml", "PWNED\n", &chk.pin, &why);
	CHECK(k == GBR_ERR_PROTECTED_PATH && strcmp(slurp(at("proj/manifest.toml")),
	    "# manifest\n") == 0, "%s: a pin lifts the protection of its own "
	    "path only (%s)", mode, why);
	free(why);
	k = pin_write("pin/app.lock", "PWNED\n", NULL, &why);
	CHECK(k == GBR_ERR_CHANGED_SINCE_APPROVAL &&
	    strcmp(slurp(at("proj/pin/app.lock")), "lock 1\n") == 0,
	    "%s: an approved write without a pin writes nothing (%s)", mode, why);
	free(why);
	saved = chk.pin.root;
	chk.pin.root = (char *)"/elsewhere";
	pin_changed("pin/app.lock", &chk.pin, "proj/pin/app.lock", "lock 1\n",
	    "another allowed root");
	chk.pin.root = saved;

	/* The same bytes under a new inode. */
	put(at("proj/pin/app.new"), "lock 1\n");
	rename(at("proj/pin/app.new"), at("proj/pin/app.lock"));
	pin_changed("pin/app.lock", &chk.pin, "proj/pin/app.lock", "lock 1\n",
	    "the file replaced by a copy");
	sandbox_check_release(&chk);

	/* Changed in place, same size, mtime set back. */
	pin_take("pin/app.lock", &chk, "before an in-place change");
	if (stat(at("proj/pin/app.lock"), &st) != 0 ||
	    (fd = open(at("proj/pin/app.lock"), O_WRONLY)) == -1 ||
	    write(fd, "LOCK", 4) != 4 || close(fd) != 0)
		exit(99);
#ifdef HAVE_UTIMENSAT
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	utimensat(AT_FDCWD, at("proj/pin/app.lock"), ts, 0);
	pin_changed("pin/app.lock", &chk.pin, "proj/pin/app.lock", "LOCK 1\n",
	    "the bytes changed in place, mtime set back");
#else
	(void)ts;
	unit_skip(1, "this system cannot set a file's times back (utimensat)");
#endif
	/* Even a pin whose times agree again sees other bytes. */
	if (stat(at("proj/pin/app.lock"), &st) != 0)
		exit(99);
	chk.pin.mtime = st.st_mtim;
	chk.pin.ctime = st.st_ctim;
	pin_changed("pin/app.lock", &chk.pin, "proj/pin/app.lock", "LOCK 1\n",
	    "other bytes behind the same times (the hash)");
	sandbox_check_release(&chk);
	put(at("proj/pin/app.lock"), "lock 1\n");

	/* A new file: pinned absent, below its folder. */
	pin_take("pin/new.lock", &chk, "a new file");
	CHECK(!chk.pin.exists && chk.cur == NULL && chk.protected,
	    "%s: a new file is pinned absent", mode);
	put(at("proj/pin/new.lock"), "mine\n");
	pin_changed("pin/new.lock", &chk.pin, "proj/pin/new.lock", "mine\n",
	    "a new file that appeared");
	unlink(at("proj/pin/new.lock"));
	k = pin_write("pin/new.lock", "new\n", &chk.pin, &why);
	CHECK(k == 0 && strcmp(slurp(at("proj/pin/new.lock")), "new\n") == 0,
	    "%s: the pinned new file is written while still absent (%s)", mode,
	    why);
	free(why);
	sandbox_check_release(&chk);

	/* Its folder replaced by another, or by a link to another. */
	pin_take("pin/d/n.txt", &chk, "a new file in a folder");
	rename(at("proj/pin/d"), at("proj/pin/d.old"));
	mkd(at("proj/pin/d"));
	pin_changed("pin/d/n.txt", &chk.pin, "proj/pin/d/n.txt", "",
	    "the folder replaced");
	rmdir(at("proj/pin/d"));
	mkd(at("proj/pin/e"));
	if (links) {
		sym("e", at("proj/pin/d"));
		pin_changed("pin/d/n.txt", &chk.pin, "proj/pin/e/n.txt", "",
		    "the folder replaced by a link to another");
		CHECK(access(at("proj/pin/d.old/n.txt"), F_OK) != 0 &&
		    access(at("proj/pin/e/n.txt"), F_OK) != 0,
		    "%s: nothing was created in either folder", mode);
		unlink(at("proj/pin/d"));
	} else
		unit_skip(2, UNIT_NO_SYMLINKS);
	rename(at("proj/pin/d.old"), at("proj/pin/d"));
	k = pin_write("pin/d/n.txt", "n\n", &chk.pin, &why);
	CHECK(k == 0, "%s: the folder back, the pinned write works (%s)", mode,
	    why);
	free(why);
	sandbox_check_release(&chk);

	/* Folders still to create: pinned below the deepest that exists. */
	pin_take("pin/x/y/z.txt", &chk, "a file in new folders");
	k = pin_write("pin/x/y/z.txt", "z\n", &chk.pin, &why);
	CHECK(k == 0 && strcmp(slurp(at("proj/pin/x/y/z.txt")), "z\n") == 0,
	    "%s: a pinned write creates the missing folders (%s)", mode, why);
	free(why);
	sandbox_check_release(&chk);
	CHECK(outside_intact(), "%s: pins: nothing outside changed", mode);
}

/* SHA-256 against FIPS 180-4's vectors. */
static void
check_sha256(void)
{
	static const struct {
		const char	*in;
		const char	*hex;
	} v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	};
	unsigned char	 d[SHA256_LEN];
	char		 hex[SHA256_HEX], *a;
	size_t		 i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		sha256_buf(v[i].in, strlen(v[i].in), d);
		sha256_hex(d, hex);
		CHECK(strcmp(hex, v[i].hex) == 0, "sha256 of %zu bytes (%s)",
		    strlen(v[i].in), hex);
	}
	/* A million 'a': the long FIPS vector. */
	a = xmalloc(1000000);
	memset(a, 'a', 1000000);
	sha256_buf(a, 1000000, d);
	sha256_hex(d, hex);
	CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67"
	    "f1809a48a497200e046d39ccc7112cd0") == 0,
	    "sha256 of a million 'a' (%s)", hex);
	free(a);
}

/* The display escaping on its own. */
static void
check_escape(void)
{
	enum gbr_err	 k;
	char		*s, *reason = NULL, *data = NULL;
	size_t		 dlen;
	char		 longp[1000];

	s = sandbox_escape_for_display("a\x1b[31m\xe2\x80\xae" "b\\c\xff\n", 14);
	CHECK(strcmp(s, "a\\u{001B}[31m\\u{202E}b\\\\c\\x{FF}\\u{000A}") == 0,
	    "escape: controls, bidi, backslash, bad bytes (%s)", s);
	free(s);
	s = sandbox_escape_for_display("x\0y", 3);
	CHECK(strcmp(s, "x\\u{0000}y") == 0, "escape: NUL (%s)", s);
	free(s);
	s = sandbox_escape_for_display("caf\xc3\xa9", 5);
	CHECK(strcmp(s, "caf\xc3\xa9") == 0, "escape: printable UTF-8 is kept");
	free(s);
	memset(longp, 'a', sizeof longp);
	s = sandbox_escape_for_display(longp, sizeof longp);
	CHECK(strlen(s) < 300 && strstr(s, "more bytes") != NULL, "escape: long paths are cut");
	free(s);

	sandbox_read_file(sb, "\xe2\x80\xae" "evil", 7, 0, &data, &dlen, NULL, NULL, &k, &reason);
	CHECK(reason != NULL && strstr(reason, "\\u{202E}evil") != NULL &&
	    strstr(reason, "\xe2\x80\xae") == NULL,
	    "a refusal's reason shows the raw path escaped (%s)", reason ? reason : "-");
	free(reason);
}

/* Runs every group in the current resolver mode. */
static void
suite(void)
{
	make_sandbox();
	attacks_lexical();
	attacks_links();
	attacks_objects();
	legitimate();
#ifdef HAVE_RENAMEAT2
	if (links)
		attack_race();
	else
		unit_skip(2, UNIT_NO_SYMLINKS);
#else
	unit_skip(2, "this system cannot swap two names (renameat2)");
#endif
	pins();
	sandbox_free(sb);
	sb = NULL;
}

/*
 * A root's real path is what its open fd is: through a link it is the
 * target, and a folder whose own name ends in " (deleted)" keeps it (the
 * kernel marks a removed folder that way in /proc).
 */
static void
root_paths(void)
{
	struct sandbox_config	 cfg;
	struct sandbox		*s;
	char			 link[PATH_MAX + 64], odd[PATH_MAX + 64];
	char			*real, *cause = NULL;
	size_t			 i;
	const char		*given[2];

	snprintf(link, sizeof link, "%s/root-link", base);
	snprintf(odd, sizeof odd, "%s/ws (deleted)", base);
	sym(root, link);
	mkd(odd);
	given[0] = link;
	given[1] = odd;
	if (!links)
		unit_skip(1, UNIT_NO_SYMLINKS);
	for (i = links ? 0 : 1; i < 2; i++) {
		memset(&cfg, 0, sizeof cfg);
		cfg.root = given[i];
		s = sandbox_create(&cfg, &cause);
		real = realpath(given[i], NULL);
		CHECK(s != NULL && real != NULL &&
		    strcmp(sandbox_root_path(s, 0), real) == 0,
		    "root %s is %s (%s)", given[i], real != NULL ? real : "?",
		    s != NULL ? sandbox_root_path(s, 0) : cause);
		free(real);
		free(cause);
		cause = NULL;
		if (s != NULL)
			sandbox_free(s);
	}
	unlink(link);
	rmdir(odd);
}

/* Removes the temp tree (best effort). */
static int
rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

int
main(void)
{
#ifdef SIGPIPE
	signal(SIGPIPE, SIG_IGN);
#endif
	setup();
	snapshot = take_snapshot();

	if (osdep_have_open_beneath()) {
		mode = "openat2";
		sandbox_force_fallback(0);
		CHECK(strcmp(sandbox_resolver(), "openat2") == 0, "resolver is openat2");
		suite();
	} else
		printf("# openat2 is not available here: only the walk is tested\n");
	mode = "walk";
	sandbox_force_fallback(1);
	CHECK(strcmp(sandbox_resolver(), "openat-walk") == 0, "resolver is the walk");
	suite();

	make_sandbox();
	check_escape();
	sandbox_free(sb);
	root_paths();
	check_sha256();

	free(snapshot);
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return unit_done();
}
