/*
 * status.c: the status descriptor's lines ("Status" at the top of
 * gbr-exec.c says what each means): building one without stdio, writing
 * it in one write (atomic, under PIPE_BUF), the setup line, how the
 * target ended, and the "error" line of a failed stage. Everything here
 * may run in a shared-memory child. What a run's setup holds is decided
 * elsewhere (confine.c, mounts.c, nsinit.c); this file only says it.
 */
#include "exec.h"

/* The status descriptor (main or the server sets it); -1: none. */
int	ge_status = -1;

/* Writes a whole buffer, retrying on EINTR; errors are ignored. */
static void GE_CHILD
ge_write(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (fd != -1 && len > 0) {
		n = ge_write1(fd, buf, len);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* Appends a string. */
void GE_CHILD
ge_ls(struct ge_line *l, const char *s)
{
	while (*s != '\0' && l->n < sizeof l->b - 1)
		l->b[l->n++] = *s++;
}

/* Appends a number. */
void GE_CHILD
ge_ln(struct ge_line *l, long long v)
{
	char			t[24];
	unsigned long long	u;
	int			i = 0;

	if (v < 0) {
		ge_ls(l, "-");
		u = 0ULL - (unsigned long long)v;
	} else
		u = (unsigned long long)v;
	do
		t[i++] = (char)('0' + u % 10);
	while ((u /= 10) != 0 && i < (int)sizeof t);
	while (i > 0 && l->n < sizeof l->b - 1)
		l->b[l->n++] = t[--i];
}

/* Writes the line to the status descriptor (one write: atomic). */
void GE_CHILD
ge_lsend(struct ge_line *l)
{
	ge_write(ge_status, l->b, l->n);
}

/* Reports a failed setup stage and exits. */
void __attribute__((noreturn)) GE_CHILD
ge_fail(const char *stage, int err)
{
	struct ge_line	l;

	l.n = 0;
	ge_ls(&l, "error ");
	ge_ls(&l, stage);
	ge_ls(&l, " ");
	ge_ln(&l, err);
	ge_ls(&l, "\n");
	ge_lsend(&l);
	ge_exit(126);
}

/* Appends the setup line (see "Status") to l. */
void GE_CHILD
ge_line_setup(struct ge_line *l, const struct ge_setup *su)
{
	ge_ls(l, "setup ns=");
	ge_ln(l, su->ns);
	ge_ls(l, " userns=");
	ge_ln(l, su->userns);
	ge_ls(l, " landlock=");
	ge_ln(l, su->abi);
	ge_ls(l, " caps=");
	ge_ln(l, su->caps);
	ge_ls(l, " nproc=");
	ge_ls(l, su->nproc != NULL ? su->nproc : "none");
	ge_ls(l, " hidden=");
	ge_ln(l, su->hidden);
	ge_ls(l, " ro=");
	ge_ln(l, su->ro);
	ge_ls(l, " seccomp=");
	ge_ln(l, su->seccomp);
	ge_ls(l, " proc=");
	ge_ln(l, su->proc);
	ge_ls(l, " tmp=");
	ge_ln(l, su->tmp);
	ge_ls(l, " sup=");
	ge_ln(l, su->sup);
	ge_ls(l, " chain=");
	ge_ln(l, su->chain);
	ge_ls(l, "\n");
}

/* Writes the setup line (see "Status"). */
void GE_CHILD
ge_report_setup(const struct ge_setup *su)
{
	struct ge_line	l;

	l.n = 0;
	ge_line_setup(&l, su);
	ge_lsend(&l);
}

/* Appends how the target ended to l. */
void GE_CHILD
ge_line_end(struct ge_line *l, int st)
{
	if (WIFSIGNALED(st)) {
		ge_ls(l, "signal ");
		ge_ln(l, WTERMSIG(st));
		ge_ls(l, WCOREDUMP(st) ? " 1\n" : " 0\n");
	} else {
		ge_ls(l, "exit ");
		ge_ln(l, WEXITSTATUS(st));
		ge_ls(l, "\n");
	}
}
