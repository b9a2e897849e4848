/*
 * Confining one thread (see tconfine.h): Landlock where the kernel has
 * it. landlock_restrict_self and PR_SET_NO_NEW_PRIVS apply to the calling
 * thread only, which is what makes a confined worker thread possible in
 * an unconfined gbrd. The kernel's ABI is stable, so what an old
 * <linux/landlock.h> lacks is defined here with the kernel's values (as
 * exec/confine.c does for commands).
 */
#include "gbr-config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif
#ifdef HAVE_SYS_SYSCALL_H
#include <sys/syscall.h>
#endif
#ifdef HAVE_LINUX_LANDLOCK_H
#include <linux/landlock.h>
#endif

#include "tconfine.h"
#include "xmalloc.h"

#if defined(HAVE_LINUX_LANDLOCK_H) && defined(SYS_landlock_create_ruleset) \
    && defined(HAVE_SYS_PRCTL_H)

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER	(1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE	(1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV	(1ULL << 15)
#endif

#define TC_READ	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* The kernel's Landlock ABI, if 2 or later. */
int
tconfine_abi(const char **why)
{
	long	v;

	v = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	/*
	 * ABI 1 denies every rename and link from one folder to another;
	 * libgit2 links each new object into place from objects/.
	 */
	if (v >= 2)
		return (int)v;
	*why = v == 1 ? "this kernel's Landlock is ABI 1; 2 or later is "
	    "needed" : errno == EOPNOTSUPP ? "Landlock is disabled in this "
	    "kernel" : "this kernel has no Landlock";
	return 0;
}

/* Every file system right an ABI knows. */
static uint64_t
tc_rights(int abi)
{
	uint64_t	r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;	/* ABI 1 */

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

/* Allows rights beneath the folder path. */
static int
tc_allow(int rs, const char *path, uint64_t rights, char **cause)
{
	struct landlock_path_beneath_attr	pb;
	int					fd, r;

	if ((fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		*cause = xasprintf("%s: %s", path, strerror(errno));
		return -1;
	}
	memset(&pb, 0, sizeof pb);
	pb.allowed_access = rights;
	pb.parent_fd = fd;
	r = (int)syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH,
	    &pb, 0);
	if (r != 0)
		*cause = xasprintf("Landlock rule for %s: %s", path,
		    strerror(errno));
	close(fd);
	return r == 0 ? 0 : -1;
}

/* Confines this thread (see tconfine.h). */
int
tconfine_enter(const char *read_root, const char *rw_dir, char **cause)
{
	struct landlock_ruleset_attr	 attr;
	const char			*why = NULL;
	uint64_t			 all;
	int				 abi, rs, r = -1;
	char				*c = NULL;

	if ((abi = tconfine_abi(&why)) == 0) {
		*cause = xstrdup(why);
		return -1;
	}
	all = tc_rights(abi);
	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = all;
	/* Only the first field: every ABI takes it; no network is handled. */
	if ((rs = (int)syscall(SYS_landlock_create_ruleset, &attr,
	    sizeof attr.handled_access_fs, 0)) < 0) {
		*cause = xasprintf("Landlock ruleset: %s", strerror(errno));
		return -1;
	}
	if (tc_allow(rs, read_root, TC_READ, &c) != 0 ||
	    tc_allow(rs, rw_dir, all, &c) != 0)
		goto out;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		c = xasprintf("no_new_privs: %s", strerror(errno));
		goto out;
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
		c = xasprintf("Landlock restrict_self: %s", strerror(errno));
		goto out;
	}
	r = 0;
out:
	close(rs);
	if (r != 0)
		*cause = c;
	return r;
}

#else /* no Landlock */

int
tconfine_abi(const char **why)
{
	*why = "this system has no Landlock";
	return 0;
}

int
tconfine_enter(const char *read_root, const char *rw_dir, char **cause)
{
	(void)read_root;
	(void)rw_dir;
	*cause = xstrdup("this system has no Landlock");
	return -1;
}

#endif
