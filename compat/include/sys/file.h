/*
 * <sys/file.h> for a C library that has none (mingw-w64): POSIX code
 * includes it for flock(2), which compat/compat-win.h declares (every
 * Windows compile sees that header first), so this one is empty on
 * purpose: its presence is all a portable source needs.
 */
#ifndef GBR_COMPAT_SYS_FILE_H
#define GBR_COMPAT_SYS_FILE_H
#endif
