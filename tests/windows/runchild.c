/*
 * A child for the Windows runner's system tests
 * (tests/system/test_windows_runner.py): what a command does that cmd.exe
 * cannot do well, on purpose and measurably.
 *
 *   runchild eat MIB       commits MIB MiB, 16 at a time; prints how much
 *                          it got; exit 0 if all, 3 if an allocation failed
 *   runchild spin MS       burns CPU for MS ms of wall time; prints "spun"
 *   runchild procs N MS    starts N copies of "runchild sleep MS"; prints
 *                          how many started; exit 0 if all, 3 if not
 *   runchild sleep MS      sleeps
 *   runchild flood BYTES [MS]
 *                          writes BYTES bytes of 'x' to stdout, then
 *                          sleeps MS ms (holding stdout open)
 *   runchild late MS FILE  sleeps, then creates FILE (a marker: a child
 *                          killed before MS never writes it)
 *   runchild spawn MS FILE starts "runchild late MS FILE" and exits at once
 *   runchild env NAME      prints NAME's value, or "(unset)"
 */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Starts this program again with the given arguments; 0 or -1. */
static int
again(const char *args)
{
	STARTUPINFOA		si;
	PROCESS_INFORMATION	pi;
	char			self[MAX_PATH], line[2 * MAX_PATH];

	if (GetModuleFileNameA(NULL, self, sizeof self) == 0)
		return -1;
	snprintf(line, sizeof line, "\"%s\" %s", self, args);
	memset(&si, 0, sizeof si);
	si.cb = sizeof si;
	if (!CreateProcessA(NULL, line, NULL, NULL, FALSE, 0, NULL, NULL, &si,
	    &pi))
		return -1;
	CloseHandle(pi.hThread);
	CloseHandle(pi.hProcess);
	return 0;
}

int
main(int argc, char **argv)
{
	char	buf[4096], args[MAX_PATH + 64];
	long	n, i, got = 0;
	DWORD	t0;
	HANDLE	h;
	void	*p;

	if (argc >= 3 && strcmp(argv[1], "eat") == 0) {
		n = strtol(argv[2], NULL, 10);
		for (i = 0; i < n; i += 16) {
			p = VirtualAlloc(NULL, 16 << 20, MEM_COMMIT | MEM_RESERVE,
			    PAGE_READWRITE);
			if (p == NULL) {
				printf("got %ld MiB\n", got);
				return 3;
			}
			memset(p, 1, 16 << 20);
			got += 16;
		}
		printf("got %ld MiB\n", got);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "spin") == 0) {
		volatile unsigned long	x = 0;

		t0 = GetTickCount();
		while (GetTickCount() - t0 < (DWORD)strtol(argv[2], NULL, 10))
			x++;
		printf("spun\n");
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "procs") == 0) {
		n = strtol(argv[2], NULL, 10);
		snprintf(args, sizeof args, "sleep %s", argv[3]);
		for (i = 0; i < n; i++)
			if (again(args) == 0)
				got++;
		printf("started %ld\n", got);
		fflush(stdout);
		return got == n ? 0 : 3;
	}
	if (argc >= 3 && strcmp(argv[1], "sleep") == 0) {
		Sleep((DWORD)strtol(argv[2], NULL, 10));
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "flood") == 0) {
		n = strtol(argv[2], NULL, 10);
		memset(buf, 'x', sizeof buf);
		for (i = 0; i < n; i += (long)sizeof buf)
			fwrite(buf, 1, n - i < (long)sizeof buf ?
			    (size_t)(n - i) : sizeof buf, stdout);
		fflush(stdout);
		if (argc >= 4)
			Sleep((DWORD)strtol(argv[3], NULL, 10));
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "late") == 0) {
		Sleep((DWORD)strtol(argv[2], NULL, 10));
		h = CreateFileA(argv[3], GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
		    FILE_ATTRIBUTE_NORMAL, NULL);
		if (h == INVALID_HANDLE_VALUE)
			return 3;
		CloseHandle(h);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "spawn") == 0) {
		snprintf(args, sizeof args, "late %s \"%s\"", argv[2], argv[3]);
		return again(args) == 0 ? 0 : 3;
	}
	if (argc >= 3 && strcmp(argv[1], "env") == 0) {
		const char	*v = getenv(argv[2]);

		printf("%s\n", v != NULL ? v : "(unset)");
		return 0;
	}
	fprintf(stderr, "usage: runchild eat|spin|procs|sleep|flood|late|"
	    "spawn|env ...\n");
	return 2;
}
