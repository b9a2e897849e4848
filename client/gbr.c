/*
 * gbr: the interactive client. It starts gbrd when nobody answers on the
 * socket (under the start lock, so two terminals starting at once end with
 * one daemon) and then reads commands. Sessions, streaming and approvals
 * build on this loop.
 */
#include "gbr-config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "paths.h"
#include "xmalloc.h"

/* Prints usage. */
static void
usage(FILE *f)
{
	fprintf(f,
"usage: gbr [-s SOCKET] [DIR]\n"
"\n"
"The gbr interactive client. Starts the daemon (gbrd) if it is not running,\n"
"then reads commands; type /help for the list.\n"
"\n"
"  -s, --socket PATH  daemon socket (default: $GBR_SOCKET, else\n"
"                     $XDG_RUNTIME_DIR/gbr/gbrd.sock, else /tmp/gbr-$UID/gbrd.sock)\n"
"  -h, --help         this help\n"
"  -V, --version      print the version\n");
}

/* Prints a JSON value, indented for people. */
static void
gbr_print(const json_t *v)
{
	char	*s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);

	printf("%s\n", s != NULL ? s : "?");
	free(s);
}

/* Runs one call and prints its result or error. Returns -1 if the daemon is gone. */
static int
gbr_call(struct client *cl, const char *method, json_t *params)
{
	json_t	*reply;
	char	*cause;

	if ((reply = client_call(cl, method, params, 30000, &cause)) == NULL) {
		fprintf(stderr, "gbr: %s\n", cause);
		free(cause);
		return -1;
	}
	if (json_object_get(reply, "error") != NULL)
		fprintf(stderr, "error: %s (%s)\n", client_error_message(reply),
		    client_error_kind(reply));
	else
		gbr_print(json_object_get(reply, "result"));
	json_decref(reply);
	return 0;
}

/* Handles one command line; returns 1 to leave, -1 if the daemon is gone. */
static int
gbr_command(struct client *cl, char *line)
{
	json_error_t	 jerr;
	json_t		*params = NULL;
	char		*method, *rest;

	line[strcspn(line, "\r\n")] = '\0';
	while (*line == ' ' || *line == '\t')
		line++;
	if (*line == '\0')
		return 0;
	if (strcmp(line, "/quit") == 0 || strcmp(line, "/detach") == 0)
		return 1;
	if (strcmp(line, "/help") == 0) {
		printf("/status              the daemon's state\n"
		    "/call METHOD [JSON]  call any protocol method\n"
		    "/quit                leave (the daemon keeps running)\n");
		return 0;
	}
	if (strcmp(line, "/status") == 0)
		return gbr_call(cl, "daemon.status", NULL);
	if (strncmp(line, "/call ", 6) == 0) {
		method = line + 6;
		if ((rest = strchr(method, ' ')) != NULL) {
			*rest++ = '\0';
			params = json_loads(rest, 0, &jerr);
			if (params == NULL) {
				fprintf(stderr, "not valid JSON: %s\n", jerr.text);
				return 0;
			}
		}
		return gbr_call(cl, method, params);
	}
	fprintf(stderr, "unknown command; /help lists them\n");
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket",	required_argument,	NULL, 's' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "version",	no_argument,		NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char	*socket_flag = NULL;
	char		*path, *cause, name[64], dir[PATH_MAX], line[4096];
	struct client	*cl;
	int		 ch, unreachable, r = 0, tty = isatty(STDIN_FILENO);

	while ((ch = getopt_long(argc, argv, "s:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': socket_flag = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("gbr %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind > 1) {
		usage(stderr);
		return 2;
	}
	if (realpath(argc - optind == 1 ? argv[optind] : ".", dir) == NULL) {
		fprintf(stderr, "gbr: %s: %s\n", argc - optind == 1 ?
		    argv[optind] : ".", strerror(errno));
		return 2;
	}
	path = paths_socket(socket_flag);
	snprintf(name, sizeof name, "gbr/%s", PACKAGE_VERSION);
	if ((cl = client_connect(path, CLIENT_AUTOSTART, name, &cause,
	    &unreachable)) == NULL) {
		fprintf(stderr, "gbr: %s\n", cause);
		free(cause);
		free(path);
		return 3;
	}
	if (tty)
		printf("gbr %s: connected to gbrd %s (epoch %s) for %s\n"
		    "type /help for commands\n", PACKAGE_VERSION,
		    json_string_value(json_object_get(client_hello(cl), "version")),
		    json_string_value(json_object_get(client_hello(cl), "epoch")),
		    dir);
	for (;;) {
		if (tty) {
			printf("gbr> ");
			fflush(stdout);
		}
		if (fgets(line, sizeof line, stdin) == NULL)
			break;
		if ((r = gbr_command(cl, line)) != 0)
			break;
	}
	client_free(cl);
	free(path);
	return r < 0 ? 3 : 0;
}
