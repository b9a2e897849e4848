/*
 * <sys/uio.h> for a C library without it (mingw-w64): struct iovec is
 * declared by compat-win.h, which every Windows compile includes first;
 * on Windows transport_writev hands iovecs to WSASend.
 */
#ifndef GBR_COMPAT_SYS_UIO_H
#define GBR_COMPAT_SYS_UIO_H

#endif
