/*
 * pipecat PIPE: the Windows system tests' raw client. It connects to a
 * named pipe and copies standard input to it and what it sends back to
 * standard output, byte for byte, until the pipe closes (exit 0) or
 * cannot be opened (exit 3, with the Windows error on standard error).
 * With standard input at its end it keeps reading the pipe, so a test can
 * send a request, close its side and read the whole answer. It checks
 * nothing about the server on purpose: the tests drive gbrd.exe's own
 * checks, and gbrctl.exe is what checks a server.
 *
 * The pipe is opened for overlapped I/O: on a synchronous handle a read
 * waiting for the server would hold back every write.
 */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>

static HANDLE	pc_pipe;

/* One overlapped transfer on the pipe; FALSE once it is broken. */
static BOOL
pc_pipe_io(BOOL write, void *buf, DWORD len, DWORD *done)
{
	OVERLAPPED	ov;
	BOOL		ok;

	ZeroMemory(&ov, sizeof ov);
	if ((ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL)) == NULL)
		return FALSE;
	ok = write ? WriteFile(pc_pipe, buf, len, done, &ov) :
	    ReadFile(pc_pipe, buf, len, done, &ov);
	if (!ok && GetLastError() == ERROR_IO_PENDING)
		ok = GetOverlappedResult(pc_pipe, &ov, done, TRUE);
	CloseHandle(ov.hEvent);
	return ok;
}

/* Standard input to the pipe; at its end the pipe stays open for reading. */
static DWORD WINAPI
pc_to_pipe(LPVOID arg)
{
	HANDLE	in = GetStdHandle(STD_INPUT_HANDLE);
	char	buf[65536];
	DWORD	n, off, w;

	while (ReadFile(in, buf, sizeof buf, &n, NULL) && n > 0) {
		for (off = 0; off < n; off += w)
			if (!pc_pipe_io(TRUE, buf + off, n - off, &w))
				return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	HANDLE	out = GetStdHandle(STD_OUTPUT_HANDLE), t;
	char	buf[65536];
	DWORD	n, w, off;

	if (argc != 2) {
		fprintf(stderr, "usage: pipecat PIPE\n");
		return 2;
	}
	pc_pipe = CreateFileA(argv[1], GENERIC_READ | GENERIC_WRITE, 0, NULL,
	    OPEN_EXISTING, FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT |
	    SECURITY_IDENTIFICATION, NULL);
	if (pc_pipe == INVALID_HANDLE_VALUE) {
		fprintf(stderr, "pipecat: %s: Windows error %lu\n", argv[1],
		    (unsigned long)GetLastError());
		return 3;
	}
	if ((t = CreateThread(NULL, 0, pc_to_pipe, NULL, 0, NULL)) == NULL)
		return 1;
	CloseHandle(t);
	while (pc_pipe_io(FALSE, buf, sizeof buf, &n) && n > 0) {
		for (off = 0; off < n; off += w)
			if (!WriteFile(out, buf + off, n - off, &w, NULL))
				return 1;
	}
	return 0;
}
