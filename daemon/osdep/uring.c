/*
 * Batched socket writes through io_uring.
 *
 * Why: an event for a session reaches every attached client, one socket
 * each. Written with one writev(2) per client, each write wakes that
 * client's reader, and the kernel may switch to the reader as soon as the
 * write returns to user space, before gbrd has written to the others: with
 * 100 clients the last one waited for gbrd to be scheduled back again and
 * again (bench-fanout: gbrd at nice -15, never preempted, halved the time
 * from the first client to the last). Submitted as one batch, every send
 * runs inside one io_uring_enter(2); the readers are woken all the same,
 * but gbrd only yields once the batch is done.
 *
 * Only what gbrd needs: a small ring of SENDMSG requests with
 * MSG_DONTWAIT, which complete inline (a full socket answers -EAGAIN,
 * nothing waits), submitted and reaped in the same call, so no request
 * outlives the caller's iovecs. Raw system calls and the kernel's own
 * header, no liburing. Where io_uring is missing or forbidden (old
 * kernels, seccomp, kernel.io_uring_disabled, GBR_TEST_NO_IO_URING=1 for
 * tests), uring_init fails and the caller writes one socket at a time.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "uring.h"

#if defined(__linux__) && defined(HAVE_LINUX_IO_URING_H) && \
    defined(HAVE_SYS_SYSCALL_H)
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/io_uring.h>

#if defined(__NR_io_uring_setup) && defined(__NR_io_uring_enter)
#define URING_OK	1
#endif
#endif

#ifdef URING_OK

#define URING_ENTRIES	256

static struct {
	int			 fd;
	void			*sq_map;
	size_t			 sq_len;
	void			*cq_map;	/* == sq_map with one mapping */
	size_t			 cq_len;
	struct io_uring_sqe	*sqes;
	size_t			 sqes_len;
	unsigned		*sq_tail;
	unsigned		*sq_mask;
	unsigned		*sq_array;
	unsigned		*cq_head;
	unsigned		*cq_tail;
	unsigned		*cq_mask;
	struct io_uring_cqe	*cqes;
	unsigned		 entries;
} ur = { .fd = -1 };

/* Sets the ring up. */
int
uring_init(void)
{
	struct io_uring_params	 p;
	char			*sq;
	int			 fd;

	if (ur.fd != -1)
		return 0;
	if (fault_hook_on("NO_IO_URING"))
		return -1;
	memset(&p, 0, sizeof p);
	fd = (int)syscall(__NR_io_uring_setup, URING_ENTRIES, &p);
	if (fd == -1) {
		log_debug("io_uring: not available (%s); one write per client",
		    strerror(errno));
		return -1;
	}
	ur.fd = fd;
	ur.entries = p.sq_entries;
	ur.sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	ur.cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (ur.cq_len > ur.sq_len)
			ur.sq_len = ur.cq_len;
		ur.cq_len = 0;
	}
	ur.sq_map = mmap(NULL, ur.sq_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
	if (ur.sq_map == MAP_FAILED)
		goto fail;
	if (ur.cq_len == 0)
		ur.cq_map = ur.sq_map;
	else if ((ur.cq_map = mmap(NULL, ur.cq_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING)) == MAP_FAILED) {
		ur.cq_map = NULL;
		goto fail;
	}
	ur.sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	ur.sqes = mmap(NULL, ur.sqes_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
	if (ur.sqes == MAP_FAILED) {
		ur.sqes = NULL;
		goto fail;
	}
	sq = ur.sq_map;
	ur.sq_tail = (unsigned *)(sq + p.sq_off.tail);
	ur.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	ur.sq_array = (unsigned *)(sq + p.sq_off.array);
	ur.cq_head = (unsigned *)((char *)ur.cq_map + p.cq_off.head);
	ur.cq_tail = (unsigned *)((char *)ur.cq_map + p.cq_off.tail);
	ur.cq_mask = (unsigned *)((char *)ur.cq_map + p.cq_off.ring_mask);
	ur.cqes = (struct io_uring_cqe *)((char *)ur.cq_map + p.cq_off.cqes);
	log_debug("io_uring: %u entries; events reach many clients in one "
	    "system call", ur.entries);
	return 0;
fail:
	log_warn("io_uring: cannot map the ring (%s); one write per client",
	    strerror(errno));
	uring_shutdown();
	return -1;
}

/* 1 if the ring is there. */
int
uring_available(void)
{
	return ur.fd != -1;
}

/* Closes the ring. */
void
uring_shutdown(void)
{
	if (ur.sqes != NULL)
		munmap(ur.sqes, ur.sqes_len);
	if (ur.cq_map != NULL && ur.cq_map != ur.sq_map)
		munmap(ur.cq_map, ur.cq_len);
	if (ur.sq_map != NULL && ur.sq_map != MAP_FAILED)
		munmap(ur.sq_map, ur.sq_len);
	if (ur.fd != -1)
		close(ur.fd);
	memset(&ur, 0, sizeof ur);
	ur.fd = -1;
}

/* Reaps every completion there is; returns how many. */
static size_t
uring_reap(struct uring_send *s, size_t n)
{
	unsigned	head = *ur.cq_head, tail, mask = *ur.cq_mask;
	size_t		got = 0, i;

	tail = __atomic_load_n(ur.cq_tail, __ATOMIC_ACQUIRE);
	for (; head != tail; head++, got++) {
		i = (size_t)ur.cqes[head & mask].user_data;
		if (i < n)
			s[i].res = ur.cqes[head & mask].res;
	}
	__atomic_store_n(ur.cq_head, head, __ATOMIC_RELEASE);
	return got;
}

/* Sends up to the ring's size of entries with one system call. */
static void
uring_batch(struct uring_send *s, size_t n)
{
	struct msghdr		 msgs[URING_ENTRIES];
	struct io_uring_sqe	*sqe;
	unsigned		 tail = *ur.sq_tail, mask = *ur.sq_mask, slot;
	size_t			 i, m = 0, submitted = 0, done = 0, got;
	int			 r, idle = 0;

	for (i = 0; i < n; i++) {
		if (s[i].iovcnt <= 0) {
			s[i].res = 0;
			continue;
		}
		s[i].res = -EIO;	/* until the kernel says otherwise */
		memset(&msgs[i], 0, sizeof msgs[i]);
		msgs[i].msg_iov = (struct iovec *)s[i].iov;
		msgs[i].msg_iovlen = (size_t)s[i].iovcnt;
		slot = (tail + (unsigned)m) & mask;
		sqe = &ur.sqes[slot];
		memset(sqe, 0, sizeof *sqe);
		sqe->opcode = IORING_OP_SENDMSG;
		sqe->fd = s[i].fd;
		sqe->addr = (uint64_t)(uintptr_t)&msgs[i];
		sqe->len = 1;
		sqe->msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
		sqe->user_data = i;
		ur.sq_array[slot] = slot;
		m++;
	}
	if (m == 0)
		return;
	__atomic_store_n(ur.sq_tail, tail + (unsigned)m, __ATOMIC_RELEASE);

	/* Every request completes inline (MSG_DONTWAIT): wait for them all. */
	while (submitted < m || done < submitted) {
		r = (int)syscall(__NR_io_uring_enter, ur.fd,
		    (unsigned)(m - submitted), (unsigned)(m - done),
		    IORING_ENTER_GETEVENTS, NULL, 0);
		if (r <= 0 && ++idle > 1000)
			errno = r < 0 ? errno : EIO;	/* no progress: give up */
		if ((r < 0 && errno != EINTR && errno != EAGAIN) ||
		    idle > 1000) {
			/*
			 * Unknown outcomes stay -EIO (those streams are
			 * closed); no request may outlive msgs, so the ring
			 * goes too.
			 */
			log_error("io_uring: enter failed: %s; one write per "
			    "client from now on", strerror(errno));
			done += uring_reap(s, n);
			uring_shutdown();
			return;
		}
		got = uring_reap(s, n);
		if (r > 0 || got > 0)
			idle = 0;
		if (r > 0)
			submitted += (size_t)r;
		done += got;
	}
}

/* Sends every entry, a ring's worth per system call. */
void
uring_sendv(struct uring_send *s, size_t n)
{
	size_t	i, k;

	for (i = 0; i < n; i += k) {
		k = n - i < URING_ENTRIES ? n - i : URING_ENTRIES;
		if (ur.fd == -1 || k > ur.entries) {
			/* Nothing of these was sent: they wait for EV_WRITE. */
			for (; i < n; i++)
				s[i].res = -EAGAIN;
			return;
		}
		uring_batch(s + i, k);
	}
}

#else /* !URING_OK */

int
uring_init(void)
{
	return -1;
}

int
uring_available(void)
{
	return 0;
}

void
uring_sendv(struct uring_send *s, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		s[i].res = -EIO;
}

void
uring_shutdown(void)
{
}

#endif
