/*
 * The thin client side of the protocol, shared by gbrctl, gbr and the MCP
 * bridge: connect (starting gbrd when asked and nobody answers), hello,
 * calls that wait for their reply, and events read in between. Blocking
 * I/O with poll(2) timeouts: a client has nothing else to do meanwhile.
 */
#ifndef GBR_CLIENT_H
#define GBR_CLIENT_H

#include <jansson.h>

struct client;

/*
 * Called for every message read while client_call waits for its reply, but
 * that reply: notifications, and answers to client_send's requests
 * (borrowed).
 */
typedef void (*client_event_cb)(void *arg, json_t *msg);

/* How client_connect may reach the daemon. */
enum client_start {
	CLIENT_NO_START = 0,	/* fail if nobody answers */
	CLIENT_AUTOSTART,	/* start gbrd under a lock if nobody answers */
};

/*
 * Connects to the socket at path and says hello as name ("gbrctl/0.1").
 * First checks the socket's folder (ours, a real folder, not writable by
 * others) and, once connected, that the server runs as our uid; a folder or
 * server that fails is refused before anything is sent. Returns NULL and
 * sets *cause (the caller frees it) on failure; *unreachable is set when
 * nobody could be reached or we refused whoever answered (as opposed to a
 * refusal by a daemon).
 */
struct client	*client_connect(const char *path, enum client_start,
		    const char *name, char **cause, int *unreachable);
void		 client_free(struct client *);
/* hello's result, borrowed. */
json_t		*client_hello(struct client *);
int		 client_fd(struct client *);
void		 client_set_event_cb(struct client *, client_event_cb, void *);

/*
 * Sends a request and waits up to timeout_ms (-1: forever) for its response,
 * passing everything else read meanwhile to the event callback: events, and
 * the answers to requests sent earlier with client_send. Steals params. Returns the
 * whole response (new reference: look at "result" or "error"), or NULL with
 * *cause on I/O failure or timeout.
 */
json_t		*client_call(struct client *, const char *method, json_t *params,
		    int timeout_ms, char **cause);
/* Sends a request without waiting; returns its id, or -1 with *cause. */
long long	 client_send(struct client *, const char *method, json_t *params,
		    char **cause);
/*
 * Reads the next message (new reference), waiting up to timeout_ms. Returns
 * NULL with *cause NULL on timeout, with *cause set on error or end of input.
 */
json_t		*client_read(struct client *, int timeout_ms, char **cause);

/*
 * Starts gbrd on path if nobody answers there (under the start lock). Makes
 * the same checks as client_connect first: it never starts gbrd in, nor
 * takes for a daemon a server in, a folder or of a uid that is not ours.
 */
int		 client_start_daemon(const char *path, char **cause);
/* Makes the calling client non-dumpable; call it first thing in main. */
void		 client_protect_process(void);
/* Writes all of buf to fd (a file), retrying on EINTR. 0, or -1 (errno). */
int		 client_write_fd(int fd, const char *buf, size_t len);
/*
 * Reads a regular file of at most max bytes, not following a final
 * symbolic link (an edited file read back). Returns a new buffer
 * (NUL-terminated; *len bytes), or NULL with *why (new string).
 */
char		*client_read_file(const char *path, size_t max, size_t *len,
		    char **why);

/* The error kind of a response, or NULL if it is not an error. */
const char	*client_error_kind(const json_t *response);
/* The error message of a response, or NULL. */
const char	*client_error_message(const json_t *response);

#endif
