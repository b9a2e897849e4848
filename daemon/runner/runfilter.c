/*
 * runfilter: builds the commands' seccomp programs (see runfilter.h). Two
 * programs, made once at start: one for runs in a pid namespace, one with
 * the placeholder pids for runs without. Each lives in a sealed memfd that
 * the runner passes to gbr-exec; nothing here runs per command.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_SYS_PRCTL_H
#include <sys/prctl.h>
#endif
#ifdef HAVE_LIBSECCOMP
#include <seccomp.h>
#endif

#include "runfilter.h"
#include "xmalloc.h"

#ifndef TIOCSTI
#define TIOCSTI		0x5412
#endif
#ifndef TIOCLINUX
#define TIOCLINUX	0x541C
#endif
#ifndef FIOSETOWN
#define FIOSETOWN	0x8901
#endif
#ifndef SIOCSPGRP
#define SIOCSPGRP	0x8902
#endif
#ifndef F_SETOWN_EX
#define F_SETOWN_EX	15
#endif

static struct {
	int		fd[2];		/* [0] no pid namespace, [1] in one */
	unsigned	size[2];
} rf = { { -1, -1 }, { 0, 0 } };

#if defined(HAVE_LIBSECCOMP) && defined(HAVE_MEMFD_CREATE)
/* A 32-bit value as the kernel sees a negated int argument. */
static uint32_t
rf_neg(uint32_t v)
{
	return (uint32_t)(0U - v);
}

/*
 * A comparison of a 32-bit argument: only its low 32 bits count (the
 * kernel sees a 64-bit register, and an int may come sign-extended or
 * not), so it is a masked equality.
 */
static struct scmp_arg_cmp
rf_arg32(unsigned arg, uint32_t value)
{
	struct scmp_arg_cmp	c;

	memset(&c, 0, sizeof c);
	c.arg = arg;
	c.op = SCMP_CMP_MASKED_EQ;
	c.datum_a = 0xffffffffULL;
	c.datum_b = value;
	return c;
}

/*
 * Adds one rule; a system call this libseccomp or architecture does not
 * know is skipped (it cannot be called either). Returns 0 or -errno.
 */
static int
rf_rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
    unsigned n, const struct scmp_arg_cmp *cmp)
{
	int	nr, r;

	if ((nr = seccomp_syscall_resolve_name(name)) == __NR_SCMP_ERROR)
		return 0;
	r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	return r == -EDOM ? 0 : r;	/* not on this architecture */
}

/* The rules every command gets. */
static int
rf_common(scmp_filter_ctx ctx, const char **what)
{
	static const char *const eperm[] = {
		"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	};
	static const char *const enosys[] = {
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"keyctl", "add_key", "request_key",
	};
	struct scmp_arg_cmp	c[1];
	size_t			i;
	int			r;

	*what = "socket";
	c[0] = rf_arg32(0, AF_UNIX);
	if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EACCES), "socket", 1, c)) != 0)
		return r;
	*what = "ptrace";
	for (i = 0; i < sizeof eperm / sizeof eperm[0]; i++)
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), eperm[i], 0,
		    NULL)) != 0)
			return r;
	*what = "io_uring";
	for (i = 0; i < sizeof enosys / sizeof enosys[0]; i++)
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), enosys[i], 0,
		    NULL)) != 0)
			return r;
	*what = "ioctl";
	c[0] = rf_arg32(1, TIOCSTI);
	if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, c)) != 0)
		return r;
	c[0] = rf_arg32(1, TIOCLINUX);
	return rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, c);
}

/*
 * The rules that keep signals away from the supervisor and the runner
 * when there is no pid namespace to do it (see runfilter.h).
 */
static int
rf_signals(scmp_filter_ctx ctx, const char **what)
{
	static const char *const by_pid[] = {
		"tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
		"pidfd_open",
	};
	const uint32_t		pids[] = { RUNFILTER_PID_SUPERVISOR,
				    RUNFILTER_PID_RUNNER };
	const uint32_t		owners[] = { FIOSETOWN, SIOCSPGRP };
	struct scmp_arg_cmp	c[2];
	size_t			i, k;
	int			r;

	*what = "kill";
	c[0] = rf_arg32(0, (uint32_t)-1);
	if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "kill", 1, c)) != 0)
		return r;
	for (k = 0; k < 2; k++) {
		c[0] = rf_arg32(0, pids[k]);
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "kill", 1, c)) != 0)
			return r;
		c[0] = rf_arg32(0, rf_neg(pids[k]));
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "kill", 1, c)) != 0)
			return r;
		c[0] = rf_arg32(0, pids[k]);
		for (i = 0; i < sizeof by_pid / sizeof by_pid[0]; i++)
			if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), by_pid[i],
			    1, c)) != 0)
				return r;
		*what = "fcntl";
		c[0] = rf_arg32(1, F_SETOWN);
		c[1] = rf_arg32(2, pids[k]);
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "fcntl", 2, c)) != 0)
			return r;
		c[1] = rf_arg32(2, rf_neg(pids[k]));
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "fcntl", 2, c)) != 0)
			return r;
		*what = "kill";
	}
	*what = "pidfd_send_signal";
	if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "pidfd_send_signal", 0,
	    NULL)) != 0)
		return r;
	*what = "fcntl";
	c[0] = rf_arg32(1, F_SETOWN_EX);
	if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "fcntl", 1, c)) != 0)
		return r;
	*what = "ioctl";
	for (i = 0; i < sizeof owners / sizeof owners[0]; i++) {
		c[0] = rf_arg32(1, owners[i]);
		if ((r = rf_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, c)) != 0)
			return r;
	}
	return 0;
}

/* Builds one program into a sealed memfd. Returns the fd, or -1. */
static int
rf_build(int ns, unsigned *size, char **cause)
{
	scmp_filter_ctx	 ctx;
	struct stat	 st;
	const char	*what = "init";
	int		 fd = -1, r;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		*cause = xstrdup("libseccomp: seccomp_init failed");
		return -1;
	}
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS)) != 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) != 0 ||
	    (r = rf_common(ctx, &what)) != 0 ||
	    (!ns && (r = rf_signals(ctx, &what)) != 0)) {
		*cause = xasprintf("libseccomp: a rule for %s: %s", what,
		    strerror(-r));
		goto fail;
	}
	if ((fd = memfd_create(ns ? "gbr-seccomp-ns" : "gbr-seccomp",
	    MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1) {
		*cause = xasprintf("memfd_create: %s", strerror(errno));
		goto fail;
	}
	if ((r = seccomp_export_bpf(ctx, fd)) != 0) {
		*cause = xasprintf("libseccomp: export: %s", strerror(-r));
		goto fail;
	}
	if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size % 8 != 0 ||
	    st.st_size > 4096 * 8) {
		*cause = xstrdup("libseccomp: the program has a strange size");
		goto fail;
	}
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL);
	*size = (unsigned)(st.st_size / 8);
	seccomp_release(ctx);
	return fd;

fail:
	if (fd != -1)
		close(fd);
	seccomp_release(ctx);
	return -1;
}
#endif

/* Builds both programs (see runfilter.h). */
int
runfilter_init(char **cause)
{
	*cause = NULL;
	runfilter_shutdown();
#if defined(HAVE_LIBSECCOMP) && defined(HAVE_MEMFD_CREATE)
#if defined(HAVE_SYS_PRCTL_H) && defined(PR_GET_SECCOMP)
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == -1 && errno == EINVAL) {
		*cause = xstrdup("this kernel has no seccomp");
		return -1;
	}
#endif
	if ((rf.fd[0] = rf_build(0, &rf.size[0], cause)) == -1)
		return -1;
	if ((rf.fd[1] = rf_build(1, &rf.size[1], cause)) == -1) {
		runfilter_shutdown();
		return -1;
	}
	return 0;
#else
	*cause = xstrdup("gbrd was built without libseccomp");
	return -1;
#endif
}

/* The program's descriptor (see runfilter.h). */
int
runfilter_fd(int ns)
{
	return rf.fd[ns != 0];
}

/* The program's length in instructions. */
unsigned
runfilter_size(int ns)
{
	return rf.size[ns != 0];
}

/* Closes both programs. */
void
runfilter_shutdown(void)
{
	int	i;

	for (i = 0; i < 2; i++) {
		if (rf.fd[i] != -1)
			close(rf.fd[i]);
		rf.fd[i] = -1;
		rf.size[i] = 0;
	}
}
