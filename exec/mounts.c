/*
 * mounts.c: the run's view of the file system, set up by the init in its
 * new mount namespace: nothing propagates back to the host, the session's
 * temp space replaces /tmp and /dev/shm (with what the run needs from the
 * host's /tmp bound back in), hidden paths are covered, the folders above
 * each read-only path are made impossible to rename, each read-only path
 * is bound read-only, and /proc is the pid namespace's own. It also says
 * where a path is in that view (ge_tmp_alias, which Landlock needs too).
 * Creating the namespaces is nsinit.c's; Landlock is confine.c's.
 */
#include "exec.h"

/*
 * Where a writable path is in the run's view: the session's tmp/ and
 * shm/ folders are /tmp and /dev/shm once mounted there (tmp 1); any
 * other path is itself.
 */
const char * GE_CHILD
ge_tmp_alias(const struct ge_opts *o, int tmp, const char *path)
{
	size_t	n;

	if (!tmp || o->tmpdir == NULL || !ge_under(path, o->tmpdir))
		return path;
	n = strlen(o->tmpdir);
	if (strcmp(path + n, "/tmp") == 0)
		return "/tmp";
	if (strcmp(path + n, "/shm") == 0)
		return "/dev/shm";
	return path;
}

#ifdef GE_HAVE_NS
/* mount(2). */
static int GE_CHILD
ge_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data)
{
#ifdef GE_RAW
	return (int)GE_S5(SYS_mount, src, dst, type, flags, data);
#else
	return (int)ge_ret(mount(src, dst, type, flags, data));
#endif
}

/* The flags a read-only remount must keep (a user namespace locks them). */
static unsigned long GE_CHILD
ge_locked_flags(const char *path)
{
	struct statfs	sf;
	unsigned long	f = 0;

#ifdef GE_RAW
	if (GE_S2(SYS_statfs, path, &sf) != 0)
		return 0;
#else
	if (statfs(path, &sf) != 0)
		return 0;
#endif
	/* f_flags holds the ST_* mount flags (Linux 2.6.36 and later). */
	if (sf.f_flags & ST_NOSUID)
		f |= MS_NOSUID;
	if (sf.f_flags & ST_NODEV)
		f |= MS_NODEV;
	if (sf.f_flags & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sf.f_flags & ST_NOATIME)
		f |= MS_NOATIME;
	if (sf.f_flags & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sf.f_flags & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/* mkdir(2). Returns 0 or -errno. */
static int GE_CHILD
ge_mkdir(const char *path, int mode)
{
#ifdef GE_RAW
	return (int)GE_S3(SYS_mkdirat, AT_FDCWD, path, mode);
#else
	return (int)ge_ret(mkdir(path, mode));
#endif
}

/* "/proc/self/fd/N" for a descriptor, a bind mount's source. */
static void GE_CHILD
ge_fd_path(char *buf, size_t len, int fd)
{
	struct ge_line	l;

	l.n = 0;
	ge_ls(&l, "/proc/self/fd/");
	ge_ln(&l, fd);
	if (l.n >= len)
		l.n = len - 1;
	memcpy(buf, l.b, l.n);
	buf[l.n] = '\0';
}

/*
 * Makes a mount point for path in the new /tmp: its missing folders, then
 * path itself (a folder, or an empty file for a file). Returns 0 or -errno.
 */
static int GE_CHILD
ge_mount_point(const char *path, int dir)
{
	char	buf[PATH_MAX];
	size_t	i, n = strlen(path);
	int	r, fd;

	if (n >= sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (i = 1; i < n; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = '\0';
		r = ge_mkdir(buf, 0700);
		buf[i] = '/';
		if (r != 0 && r != -EEXIST)
			return r;
	}
	if (dir)
		r = ge_mkdir(buf, 0700);
	else if ((fd = ge_open(buf, O_WRONLY | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) >= 0)
		r = ge_close(fd);
	else
		r = fd;
	return r == -EEXIST ? 0 : r;
}

#define GE_KEEP_MAX	(3 * GE_PATHS_MAX + 2)

/*
 * The session's temp folder becomes /tmp, and its shm folder /dev/shm:
 * the host's /tmp, where other users' files and every /tmp/gbr-UID
 * socket folder live, is gone from the run's view.
 * What the run needs that lies under /tmp (its working folder, the roots
 * it may read or write) is bound back in at the same path, from
 * descriptors opened before /tmp was covered.
 */
static void GE_CHILD
ge_mount_tmp(const struct ge_opts *o, struct ge_setup *su)
{
	const struct ge_paths	*lists[3] = { &o->wr, &o->rd, &o->robind };
	const char		*keep[GE_KEEP_MAX], *p;
	char			 buf[PATH_MAX], src[64];
	struct stat		 st;
	int			 kfd[GE_KEEP_MAX], tfd, sfd, nk = 0, i, k, l, r;

	if (o->tmpdir == NULL)
		return;
	if ((r = ge_join(buf, o->tmpdir, "/tmp")) != 0 ||
	    (r = tfd = ge_open(buf, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC, 0)) < 0)
		ge_fail("tmp", -r);
	if ((r = ge_join(buf, o->tmpdir, "/shm")) != 0 ||
	    (r = sfd = ge_open(buf, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC, 0)) < 0)
		ge_fail("tmp", -r);
	/* The outermost of the paths under /tmp, each opened now. */
	for (l = -1; l < 3; l++) {
		for (i = 0; i < (l < 0 ? 1 : lists[l]->n); i++) {
			p = l < 0 ? o->dir : lists[l]->v[i];
			/* The temp space itself is at /tmp from now on. */
			if (p == NULL || !ge_under(p, "/tmp") ||
			    strcmp(p, "/tmp") == 0 || ge_under(p, o->tmpdir))
				continue;
			for (k = 0; k < nk && !ge_under(p, keep[k]); k++)
				;
			if (k < nk)
				continue;	/* inside one kept already */
			if ((r = ge_open(p, O_PATH | O_CLOEXEC, 0)) < 0) {
				if (r == -ENOENT)
					continue;
				ge_fail("tmp-keep", -r);
			}
			/* One that holds earlier ones takes their place. */
			for (k = 0; k < nk; k++)
				if (ge_under(keep[k], p)) {
					(void)ge_close(kfd[k]);
					keep[k] = keep[--nk];
					kfd[k--] = kfd[nk];
				}
			if (nk >= GE_KEEP_MAX)
				ge_fail("tmp-keep", E2BIG);
			keep[nk] = p;
			kfd[nk++] = r;
		}
	}
	ge_fd_path(src, sizeof src, tfd);
	if ((r = ge_mount(src, "/tmp", NULL, MS_BIND | MS_REC, NULL)) != 0)
		ge_fail("mount-tmp", -r);
	for (k = 0; k < nk; k++) {
		if ((r = ge_fstat(kfd[k], &st)) != 0 ||
		    (r = ge_mount_point(keep[k], S_ISDIR(st.st_mode))) != 0)
			ge_fail("tmp-keep", -r);
		ge_fd_path(src, sizeof src, kfd[k]);
		if ((r = ge_mount(src, keep[k], NULL, MS_BIND | MS_REC,
		    NULL)) != 0)
			ge_fail("mount-keep", -r);
		(void)ge_close(kfd[k]);
	}
	if (ge_stat("/dev/shm", &st, 0) == 0 && S_ISDIR(st.st_mode)) {
		ge_fd_path(src, sizeof src, sfd);
		if ((r = ge_mount(src, "/dev/shm", NULL, MS_BIND | MS_REC,
		    NULL)) != 0)
			ge_fail("mount-shm", -r);
	}
	(void)ge_close(tfd);
	(void)ge_close(sfd);
	su->tmp = 1;
}

/* The writable root path lies in, or NULL. */
static const char * GE_CHILD
ge_wr_root(const struct ge_opts *o, const char *path)
{
	const char	*best = NULL;
	int		 i;

	for (i = 0; i < o->wr.n; i++)
		if (ge_under(path, o->wr.v[i]) && (best == NULL ||
		    strlen(o->wr.v[i]) > strlen(best)))
			best = o->wr.v[i];
	return best;
}

/*
 * Makes every folder between a writable root and a read-only path a mount
 * point of its own (a bind over itself, still writable): the kernel
 * refuses to rename or remove a mount point (EBUSY), so "mv build b" can
 * no longer move a read-only root or a protected file out from under its
 * name, or a look-alike take its place.
 */
static void GE_CHILD
ge_mount_chains(const struct ge_opts *o, struct ge_setup *su)
{
	char		 a[PATH_MAX];
	const char	*w;
	struct stat	 st;
	size_t		 n;
	int		 i, j, r, done;

	for (i = 0; i < o->robind.n; i++) {
		if (ge_stat(o->robind.v[i], &st, 0) != 0 ||
		    (w = ge_wr_root(o, o->robind.v[i])) == NULL)
			continue;
		n = strlen(o->robind.v[i]);
		if (n >= sizeof a)
			ge_fail("mount-chain", ENAMETOOLONG);
		memcpy(a, o->robind.v[i], n + 1);
		for (;;) {
			while (n > 0 && a[n] != '/')
				n--;
			a[n] = '\0';
			if (n <= strlen(w))
				break;	/* the root itself, or above it */
			for (done = 0, j = 0; j < i && !done; j++)
				done = ge_under(o->robind.v[j], a) &&
				    ge_stat(o->robind.v[j], &st, 0) == 0 &&
				    ge_wr_root(o, o->robind.v[j]) == w;
			/*
			 * Inside a read-only path a folder cannot be renamed
			 * anyway, and a writable bind there would be copied
			 * into that path's read-only bind (MS_REC), writable.
			 */
			for (j = 0; j < o->robind.n && !done; j++)
				done = ge_under(a, o->robind.v[j]) &&
				    strcmp(a, o->robind.v[j]) != 0;
			if (done)
				continue;
			if ((r = ge_mount(a, a, NULL, MS_BIND | MS_REC,
			    NULL)) != 0)
				ge_fail("mount-chain", -r);
			su->chain++;
		}
	}
}

/*
 * True if a folder to hide holds (or is) the run's working folder or a
 * root it may write (other than the temp space, which is at /tmp by now):
 * covering it would cover them. The gbrd files in it are hidden one by
 * one instead (the runner names them too).
 */
static int GE_CHILD
ge_hide_holds_run(const struct ge_opts *o, const struct ge_setup *su,
    const char *dir)
{
	int	i;

	if (o->dir != NULL && ge_under(o->dir, dir))
		return 1;
	for (i = 0; i < o->wr.n; i++)
		if (ge_under(o->wr.v[i], dir) && ge_tmp_alias(o, su->tmp,
		    o->wr.v[i]) == o->wr.v[i])
			return 1;
	return 0;
}

/* Hides one path (-x, -X): an empty tmpfs over a folder, /dev/null over a file. */
static void GE_CHILD
ge_hide(const struct ge_opts *o, struct ge_setup *su, const char *path)
{
	struct stat	st;
	int		r;

	if (ge_stat(path, &st, 0) != 0)
		return;		/* nothing there to reach */
	if (S_ISDIR(st.st_mode) && ge_hide_holds_run(o, su, path))
		return;		/* its socket file is hidden alone */
	if (S_ISDIR(st.st_mode))
		r = ge_mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV |
		    MS_NOEXEC | MS_RDONLY, "size=4k,mode=000");
	else
		r = ge_mount("/dev/null", path, NULL, MS_BIND, NULL);
	if (r != 0)
		ge_fail("mount-hide", -r);
	su->hidden++;
}

/* Binds path over itself, read-only (ro) or writable again (!ro). */
static int GE_CHILD
ge_bind_self(const char *path, int ro)
{
	int	r;

	if ((r = ge_mount(path, path, NULL, MS_BIND | MS_REC, NULL)) != 0)
		return r;
	return ge_mount(NULL, path, NULL, MS_REMOUNT | MS_BIND |
	    (ro ? MS_RDONLY : 0) | ge_locked_flags(path), NULL);
}

/*
 * The read-only paths that were bound back under /tmp are bound read-only
 * there. Landlock alone cannot keep them so: the run may write /tmp (the
 * session's temp space, mounted there), and Landlock's rules follow the
 * path, so everything bound beneath /tmp would be writable too. A path
 * the run may write that lies inside one of them is bound writable again
 * over itself, on top.
 */
static void GE_CHILD
ge_mount_tmp_ro(const struct ge_opts *o, struct ge_setup *su)
{
	struct stat	st;
	const char	*p;
	int		i, j, r, mine;

	if (!su->tmp)
		return;
	for (i = 0; i < o->rd.n; i++) {
		p = o->rd.v[i];
		if (!ge_under(p, "/tmp") || strcmp(p, "/tmp") == 0 ||
		    ge_under(p, o->tmpdir))
			continue;
		for (j = 0, mine = 0; j < o->wr.n && !mine; j++)
			mine = ge_under(p, o->wr.v[j]);
		if (mine || ge_stat(p, &st, 0) != 0 || S_ISLNK(st.st_mode))
			continue;
		if ((r = ge_bind_self(p, 1)) != 0)
			ge_fail("mount-tmp-readonly", -r);
		for (j = 0; j < o->wr.n; j++) {
			if (!ge_under(o->wr.v[j], p) ||
			    ge_stat(o->wr.v[j], &st, 0) != 0 ||
			    S_ISLNK(st.st_mode))
				continue;
			if ((r = ge_bind_self(o->wr.v[j], 0)) != 0)
				ge_fail("mount-tmp-writable", -r);
		}
		su->ro++;
	}
}

/*
 * In the new mount namespace: nothing propagates back to the host; the
 * session's temp space replaces /tmp and /dev/shm; each hidden folder is
 * an empty tmpfs and each hidden file /dev/null; the folders above each -R
 * path become mount points; each -R path is bound read-only over itself;
 * /proc is the pid namespace's own. Fills the counts of su.
 */
void GE_CHILD
ge_mounts(const struct ge_opts *o, struct ge_setup *su)
{
	struct stat	st;
	int		i, r;

	su->hidden = su->ro = su->chain = su->tmp = su->proc = 0;
	if ((r = ge_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) != 0)
		ge_fail("mount-private", -r);
	ge_mount_tmp(o, su);
	for (i = 0; i < o->hide.n; i++)
		ge_hide(o, su, o->hide.v[i]);
	/* A secret needs a mount only where Landlock would let it be read. */
	for (i = 0; i < o->secret.n; i++)
		if (!ge_landlock_keeps_out(o, o->secret.v[i]))
			ge_hide(o, su, o->secret.v[i]);
	/* Chains first: a read-only bind must end up on top of them. */
	ge_mount_chains(o, su);
	ge_mount_tmp_ro(o, su);
	for (i = 0; i < o->robind.n; i++) {
		if (ge_stat(o->robind.v[i], &st, 0) != 0 || S_ISLNK(st.st_mode))
			continue;
		if ((r = ge_mount(o->robind.v[i], o->robind.v[i], NULL,
		    MS_BIND | MS_REC, NULL)) != 0 ||
		    (r = ge_mount(NULL, o->robind.v[i], NULL, MS_REMOUNT |
		    MS_BIND | MS_RDONLY | ge_locked_flags(o->robind.v[i]),
		    NULL)) != 0)
			ge_fail("mount-readonly", -r);
		su->ro++;
	}
	/*
	 * A /proc of the pid namespace's own: its processes only. Where the
	 * kernel refuses (a /proc with locked mounts over parts of it, as in
	 * some containers), the host's stays, and the setup line says so.
	 */
	su->proc = ge_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, NULL) == 0;
}
#endif
