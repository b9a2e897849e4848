/*
 * struct iovec for a C library without <sys/uio.h> (mingw-w64): gbr's
 * scatter-gather writes name their pieces with it; on Windows
 * transport_writev hands them to WSASend.
 */
#ifndef GBR_COMPAT_SYS_UIO_H
#define GBR_COMPAT_SYS_UIO_H

#include <stddef.h>

struct iovec {
	void	*iov_base;
	size_t	 iov_len;
};

#endif
