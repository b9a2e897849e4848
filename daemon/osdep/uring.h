/*
 * Batched socket writes: many sockets written with one system call
 * (io_uring on Linux). See uring.c for why.
 */
#ifndef GBRD_URING_H
#define GBRD_URING_H

#include <sys/types.h>
#include <sys/uio.h>

#include <stddef.h>

struct uring_send {
	int		 fd;		/* a non-blocking stream socket */
	const struct iovec *iov;
	int		 iovcnt;
	ssize_t		 res;		/* out: bytes sent, or -errno */
};

/* Sets the ring up; 0, or -1 if the kernel offers none (then unused). */
int		 uring_init(void);
/* 1 if uring_sendv can be used. */
int		 uring_available(void);
/*
 * Sends each entry (MSG_DONTWAIT | MSG_NOSIGNAL), all with one system
 * call per ring's worth of entries, and fills every res (0 for an entry
 * with no iovec: nothing is sent). An entry whose
 * outcome the ring could not report gets -EIO: its stream must be closed,
 * never written again, since some of it may have gone.
 */
void		 uring_sendv(struct uring_send *, size_t n);
/* Closes the ring. */
void		 uring_shutdown(void);

#endif
