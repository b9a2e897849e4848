/*
 * Who is at the other end of a pipe, on Windows: our own account's SID,
 * read once from this process's token, and whether another process runs
 * as the same account (its token's user SID), for the client's check of
 * the server (transport-win.c) and gbrd's of each client (listen-win.c).
 * Comparing SIDs of the process tokens, not the pipe's owner: an elevated
 * process's objects are owned by the Administrators group, while its
 * token's user is still the person.
 */
#include "gbr-config.h"

#include <winsock2.h>
#include <windows.h>
#include <sddl.h>

#include <stdlib.h>

#include "transport-win.h"
#include "xmalloc.h"

static INIT_ONCE	 transport_sid_once = INIT_ONCE_STATIC_INIT;
static PSID		 transport_sid;

/* Reads a token's user SID into a new buffer; NULL if it cannot. */
static PSID
transport_token_sid(HANDLE token)
{
	union {
		TOKEN_USER	tu;
		BYTE		b[sizeof(TOKEN_USER) + SECURITY_MAX_SID_SIZE];
	}	 u;
	DWORD	 len;
	PSID	 sid;

	if (!GetTokenInformation(token, TokenUser, &u, sizeof u, &len) ||
	    !IsValidSid(u.tu.User.Sid))
		return NULL;
	len = GetLengthSid(u.tu.User.Sid);
	sid = xmalloc(len);
	if (!CopySid(len, sid, u.tu.User.Sid)) {
		free(sid);
		return NULL;
	}
	return sid;
}

/* InitOnce callback: reads our own SID. */
static BOOL CALLBACK
transport_read_self_sid(PINIT_ONCE once, void *arg, void **ctx)
{
	HANDLE	token;

	if (OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) {
		transport_sid = transport_token_sid(token);
		CloseHandle(token);
	}
	return TRUE;
}

/* Our own account's SID. */
PSID
transport_win_self_sid(void)
{
	InitOnceExecuteOnce(&transport_sid_once, transport_read_self_sid, NULL,
	    NULL);
	return transport_sid;
}

/* Names an account for a person: "DOMAIN\name", else its SID string. */
static char *
transport_sid_name(PSID sid)
{
	wchar_t		 name[256], dom[256], *str;
	DWORD		 nlen = 256, dlen = 256;
	SID_NAME_USE	 use;
	char		*n, *d, *s;

	if (LookupAccountSidW(NULL, sid, name, &nlen, dom, &dlen, &use)) {
		n = transport_win_utf8(name);
		d = transport_win_utf8(dom);
		s = *d != '\0' ? xasprintf("%s\\%s", d, n) : xstrdup(n);
		free(n);
		free(d);
		return s;
	}
	if (ConvertSidToStringSidW(sid, &str)) {
		s = transport_win_utf8(str);
		LocalFree(str);
		return s;
	}
	return xstrdup("an account that cannot be named");
}

/*
 * Whether process pid runs as our account. A pid is only a number: the
 * caller asks while the pipe is connected, so the process at the other
 * end cannot have gone and given its number away unless it handed its end
 * of the pipe to another process first.
 */
int
transport_win_pid_same_user(DWORD pid, char **who)
{
	HANDLE	proc, token;
	PSID	self = transport_win_self_sid(), sid;
	int	same;

	if (self == NULL || pid == 0)
		return -1;
	if ((proc = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE,
	    pid)) == NULL)
		return -1;
	if (!OpenProcessToken(proc, TOKEN_QUERY, &token)) {
		CloseHandle(proc);
		return -1;
	}
	sid = transport_token_sid(token);
	CloseHandle(token);
	CloseHandle(proc);
	if (sid == NULL)
		return -1;
	same = EqualSid(sid, self) ? 1 : 0;
	if (!same && who != NULL)
		*who = transport_sid_name(sid);
	free(sid);
	return same;
}
