/*
 * What the Windows side of the transport shares with gbrd's pipe listener
 * (daemon/osdep/listen-win.c) and, later, with whatever else must turn a
 * Win32 handle into something a poll loop can wait on (the REPL's console
 * input). Only Windows builds see this header.
 *
 * The bridge: a named pipe cannot be given to libevent or WSAPoll, so each
 * connected pipe is paired with a loopback socket pair; the caller holds
 * one end, and a thread of the bridge copies between the other end and the
 * pipe with overlapped I/O, through two fixed buffers (transport-bridge-
 * win.c says how it ends).
 */
#ifndef GBR_TRANSPORT_WIN_H
#define GBR_TRANSPORT_WIN_H

#include <winsock2.h>
#include <windows.h>

#include <wchar.h>

/* Starts Winsock once per process. Returns 0, or -1 with errno. */
int		 transport_win_init(void);
/* The errno for a Winsock error (WSAGetLastError). */
int		 transport_win_wsa_errno(int);
/* The errno for a Win32 error (GetLastError). */
int		 transport_win_errno(DWORD);
/* A person's text for a Win32 error: a new string. */
char		*transport_win_strerror(DWORD);
/* UTF-8 to UTF-16: a new string, or NULL if s is not valid UTF-8. */
wchar_t		*transport_win_wide(const char *s);
/* UTF-16 to UTF-8: a new string. */
char		*transport_win_utf8(const wchar_t *s);

/*
 * Whether path is a local pipe name, \\.\pipe\NAME (NAME of 1 to 200
 * characters, no backslash: Windows' rule for pipe names).
 */
int		 transport_win_is_pipe(const char *path);
/*
 * The name of a kernel object that stands for path's pipe (path must pass
 * transport_win_is_pipe): "Local\gbr-KIND-name", the pipe's name in lower
 * case since pipe names are not case-sensitive and object names are. A
 * new string.
 */
wchar_t		*transport_win_object_name(const char *path, const char *kind);

/*
 * Our own account's SID (the user of this process's token), read once;
 * borrowed. NULL if it cannot be read.
 */
PSID		 transport_win_self_sid(void);
/*
 * Whether process pid runs as our account (its token's user SID): 1 yes;
 * 0 another account, naming it in *who (a new string) if who is not NULL;
 * -1 when it cannot be told (callers fail closed).
 */
int		 transport_win_pid_same_user(DWORD pid, char **who);

/*
 * A connected pair of loopback TCP sockets, both ends ours (the accepted
 * peer is checked to be the socket that connected), not inherited by
 * children, Nagle off, small fixed buffers. sv[0] and sv[1] are blocking.
 * Returns 0, or -1 with errno.
 */
int		 transport_win_socketpair(SOCKET sv[2]);

/*
 * Bridges h, a handle opened for overlapped I/O (a connected pipe), to a
 * new socket pair. Returns the caller's end (blocking; close it with
 * transport_close); the bridge then owns h. On failure returns -1 with
 * errno and, if cause is not NULL, *cause; h is still the caller's.
 */
int		 transport_bridge_handle(HANDLE h, char **cause);
/* Bridges alive now (tests, status). */
unsigned	 transport_bridge_count(void);
/*
 * transport_close's part: if s is the caller's end of a live bridge, the
 * bridge takes it and closes it once everything written before has been
 * passed on (returns 1); else returns 0 and s is the caller's to close.
 */
int		 transport_bridge_release(SOCKET s);

#endif
