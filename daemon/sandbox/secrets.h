/*
 * The secret stores of a home (~/.ssh, ~/.aws, keyrings, browser
 * profiles, shell histories, gbr's own config and state, ...): the one
 * list of what the agent must never reach. Commands get them hidden
 * (tool-run-home.c); a profile may not make one, or a folder that holds
 * one, a read-only root (env.c). doc/SANDBOX.md shows the list.
 */
#ifndef GBRD_SECRETS_H
#define GBRD_SECRETS_H

#include <stddef.h>

/* The stores, relative to the home; *n gets their count. */
const char *const	*secrets_stores(size_t *n);
/*
 * True if path a is b or lies beneath it, comparing strings as the
 * system's names compare (without case on Windows); a root ("/", "C:/")
 * holds everything on it. Real paths: unlike pathgate_is_under, it never
 * refuses, so a check on it cannot fail open on a name the gate would not
 * take.
 */
int			 secrets_beneath(const char *a, const char *b);
/* The home (paths_home_dir) as a real path (new string), or NULL. */
char			*secrets_home(void);
/*
 * Why the agent may not be given a folder (a real path) to read, or NULL:
 * it is the home or a folder above it, or it holds or lies inside a
 * secret store. home NULL: the home is looked up.
 */
const char		*secrets_refuse(const char *path, const char *home);

#endif
