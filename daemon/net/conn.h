/*
 * One client connection. conn.c owns every connection: the socket, the line
 * framer, the bounded output queue and the lifecycle. Others hold a counted
 * reference (conn_ref/conn_unref) to reply later; a closed connection stays
 * valid until the last reference goes and silently drops what is sent to it.
 */
#ifndef GBRD_CONN_H
#define GBRD_CONN_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

struct event_base;
struct conn;

/*
 * What the layer above does with a connection's input: every complete
 * line, the close (once, for every connection), and the peer's end of
 * writing. Given at init (the dispatcher's), so conn.c never calls up.
 */
struct conn_ops {
	void	(*line)(struct conn *, const char *, size_t);
	void	(*closed)(struct conn *);
	void	(*eof)(struct conn *);
};

/* Sets the event base and the input's handlers for every connection. */
void		 conn_init(struct event_base *, const struct conn_ops *);
/* Takes a connected, non-blocking socket whose peer was checked. */
struct conn	*conn_create(int fd, uid_t uid, pid_t pid);
/*
 * Closes a connection now: the socket is closed and it leaves the list;
 * the memory goes when the last reference does, from the loop. Safe to call
 * from any callback, also twice.
 */
void		 conn_close(struct conn *, const char *why);
/* Closes once everything queued so far has been written (or a grace time passed). */
void		 conn_close_after_flush(struct conn *, const char *why);
void		 conn_ref(struct conn *);
void		 conn_unref(struct conn *);

/*
 * Queues one message (borrowed) for the client. A client whose queue goes
 * over the limit is evicted: it gets a final "evicted" event and is closed.
 * Returns 0 if queued, -1 if the connection is closing or was evicted.
 */
int		 conn_send(struct conn *, const json_t *);
/* Queues raw, already framed bytes (each line ending in '\n'). */
int		 conn_send_raw(struct conn *, const char *, size_t);

/* Counts a request answered later (dispatch.c); a draining connection waits for it. */
void		 conn_request_begin(struct conn *);
void		 conn_request_end(struct conn *);

uint64_t	 conn_id(const struct conn *);
pid_t		 conn_pid(const struct conn *);
uid_t		 conn_uid(const struct conn *);
/* Bytes queued for the client and not yet written (catch-up pacing). */
size_t		 conn_queued(const struct conn *);
int		 conn_closing(const struct conn *);
int		 conn_has_hello(const struct conn *);
/* Records a successful hello and the client's name (copied, bounded). */
void		 conn_set_hello(struct conn *, const char *client);
const char	*conn_client(const struct conn *);

/* Connections open now. */
unsigned	 conn_count(void);
/* Evictions since start. */
uint64_t	 conn_evictions(void);
/* How events reach many clients at once: "io_uring" or "writev". */
const char	*conn_write_batching(void);
/*
 * The input budget ({max_bytes, used_bytes, peak_bytes, line_timeout_ms,
 * refused, timed_out}) for daemon.status: a new reference.
 */
json_t		*conn_input_status(void);
/* Applies changed limits from the live config to every connection. */
void		 conn_apply_config(void);
/* Closes every connection (shutdown), trying once to flush each. */
void		 conn_close_all(const char *why);
/* Sends msg to every client that said hello (before conn_close_all). */
void		 conn_notify_all(const json_t *msg);

#endif
