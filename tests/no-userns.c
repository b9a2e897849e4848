/*
 * no-userns: runs a program where user namespaces cannot be made, as on
 * Ubuntu (AppArmor's restriction) or with user.max_user_namespaces = 0,
 * so the test suite can show what gbrd does there without changing the
 * machine: a seccomp filter, inherited by everything the program starts,
 * makes unshare() and clone() with CLONE_NEWUSER fail with EPERM, and
 * clone3() (whose flags a filter cannot see) fail with ENOSYS, which
 * makes libc fall back to clone().
 *
 * usage: no-userns PROGRAM [ARGS...]
 */
#include "gbr-config.h"

#include <sched.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/prctl.h>

#ifdef HAVE_LIBSECCOMP
#include <seccomp.h>
#endif

int
main(int argc, char **argv)
{
#ifdef HAVE_LIBSECCOMP
	scmp_filter_ctx	ctx;
	int		r;

	if (argc < 2) {
		fprintf(stderr, "usage: no-userns PROGRAM [ARGS...]\n");
		return 2;
	}
	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		return 1;
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone),
		    1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (r == 0 && seccomp_syscall_resolve_name("clone3") != __NR_SCMP_ERROR)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
		    seccomp_syscall_resolve_name("clone3"), 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r != 0) {
		fprintf(stderr, "no-userns: %s\n", strerror(-r));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no-userns: %s: %s\n", argv[1], strerror(errno));
	return 127;
#else
	fprintf(stderr, "no-userns: built without libseccomp\n");
	return 1;
#endif
}
