/*
 * Dispatch: turns a line from a client into a typed call of one method
 * handler, and carries the reply back. This is the validation boundary
 * (STYLE.md habit 7): handlers check their params with the params_*
 * helpers, which answer invalid_params naming the field, and deeper code
 * trusts what it is given.
 *
 * A handler receives a struct request and must finish it exactly once, with
 * request_reply or request_error, now or later from a callback (a durable
 * write, a child exiting, a human deciding). The request holds a reference
 * to its connection, so a reply to a client that has gone is simply dropped.
 */
#ifndef GBRD_DISPATCH_H
#define GBRD_DISPATCH_H

/* The longest request_id (dispatch checks the rule for every method). */
#define DISPATCH_RID_MAX	128

#include <stddef.h>
#include <jansson.h>

#include "errors.h"

struct conn;
struct request;

typedef void (*method_fn)(struct request *, json_t *params);

/* Handles one line from a client. */
void		 dispatch_line(struct conn *, const char *, size_t);
/* A connection closed: tells the modules that track clients. */
void		 dispatch_conn_closed(struct conn *);
/*
 * Modules that track clients ask to be told when one closes (and, with
 * on_eof, as soon as the peer closes its side, before its replies are out).
 */
#define DISPATCH_OBSERVERS_MAX	8
typedef void (*dispatch_close_fn)(struct conn *);
void		 dispatch_observe_close(dispatch_close_fn, int on_eof);
/*
 * The peer closed its side: nobody will read a reply that waits for a
 * human, so those calls are given up (their approvals withdrawn).
 */
void		 dispatch_conn_eof(struct conn *);
/* The three above, for conn_init. */
extern const struct conn_ops dispatch_conn_ops;
/* Every method name, as a new JSON array (hello's capabilities). */
json_t		*dispatch_methods(void);

/* Finishes a request with a result (stolen; NULL means {}). Frees req. */
void		 request_reply(struct request *, json_t *result);
/* The same with a result that is JSON text already (borrowed). */
void		 request_reply_text(struct request *, const char *result,
		    size_t len);
/* Finishes a request with an error; data (stolen) may be NULL. Frees req. */
void		 request_error(struct request *, enum gbr_err, json_t *data,
		    const char *fmt, ...) __attribute__((format(__printf__, 4, 5)));
/* The connection that asked (borrowed; may be closed by now). */
struct conn	*request_conn(const struct request *);
/*
 * Who sent a request, for the audit trail: a new object {client (its
 * hello name), pid, uid, tty (its terminal, if it has one)}.
 */
json_t		*request_who(const struct request *);
const char	*request_method(const struct request *);
/* The request's JSON-RPC id (borrowed), or NULL for a notification. */
json_t		*request_rpc_id(const struct request *);

/*
 * Param helpers. Each returns 0 when the value is acceptable, or finishes
 * the request with invalid_params (data.field names the field) and returns
 * -1, after which the handler must return without touching req.
 */
/* params must be an object (or absent) with no key outside keys (NULL-terminated). */
int	 params_only(struct request *, json_t *params, const char *const *keys);
/* A string; *out is borrowed from params and left alone when absent. */
int	 params_string(struct request *, json_t *params, const char *key,
	    int required, const char **out);
/* An integer in [min, max]; *out left alone when absent. */
int	 params_integer(struct request *, json_t *params, const char *key,
	    int required, json_int_t min, json_int_t max, json_int_t *out);
/* A boolean; *out left alone when absent. */
int	 params_boolean(struct request *, json_t *params, const char *key,
	    int required, int *out);
/* An object; *out borrowed, left alone when absent. */
int	 params_object(struct request *, json_t *params, const char *key,
	    int required, json_t **out);

#endif
