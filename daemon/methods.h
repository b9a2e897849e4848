/*
 * The method handlers, one group per file (method-*.c). dispatch.c holds the
 * table that maps names to these.
 */
#ifndef GBRD_METHODS_H
#define GBRD_METHODS_H

#include <jansson.h>

struct request;

/* method-daemon.c */
void	method_hello(struct request *, json_t *);
void	method_daemon_ping(struct request *, json_t *);
void	method_daemon_status(struct request *, json_t *);
void	method_daemon_shutdown(struct request *, json_t *);

#endif
