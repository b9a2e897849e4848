/*
 * runhold (see runhold.h): a short list of workspaces and their counts of
 * running commands. At most as many entries as commands can run at once.
 */
#include "gbr-config.h"

#include <sys/queue.h>

#include <stdlib.h>
#include <string.h>

#include "runhold.h"
#include "xmalloc.h"

struct rh_ws {
	TAILQ_ENTRY(rh_ws)	 entry;
	char			*workspace;
	unsigned		 n;
};
TAILQ_HEAD(rh_list, rh_ws);

static struct rh_list		 rh_all = TAILQ_HEAD_INITIALIZER(rh_all);
static runhold_release_cb	 rh_cb;
static void			*rh_arg;

/* The callback for released workspaces. */
void
runhold_set_release(runhold_release_cb cb, void *arg)
{
	rh_cb = cb;
	rh_arg = arg;
}

/* The entry of a workspace, or NULL. */
static struct rh_ws *
rh_find(const char *workspace)
{
	struct rh_ws	*w;

	TAILQ_FOREACH(w, &rh_all, entry)
		if (strcmp(w->workspace, workspace) == 0)
			return w;
	return NULL;
}

/* A command of workspace starts. */
void
runhold_enter(const char *workspace)
{
	struct rh_ws	*w;

	if ((w = rh_find(workspace)) == NULL) {
		w = xcalloc(1, sizeof *w);
		w->workspace = xstrdup(workspace);
		TAILQ_INSERT_TAIL(&rh_all, w, entry);
	}
	w->n++;
}

/* A command of workspace has ended (and its check is done). */
void
runhold_leave(const char *workspace)
{
	struct rh_ws	*w;
	char		*ws;

	if ((w = rh_find(workspace)) == NULL || w->n == 0)
		return;
	if (--w->n > 0)
		return;
	TAILQ_REMOVE(&rh_all, w, entry);
	ws = w->workspace;
	free(w);
	if (rh_cb != NULL)
		rh_cb(ws, rh_arg);
	free(ws);
}

/* Commands of workspace running now. */
unsigned
runhold_active(const char *workspace)
{
	struct rh_ws	*w = rh_find(workspace);

	return w != NULL ? w->n : 0;
}

/* Forgets every count. */
void
runhold_clear(void)
{
	struct rh_ws	*w;

	while ((w = TAILQ_FIRST(&rh_all)) != NULL) {
		TAILQ_REMOVE(&rh_all, w, entry);
		free(w->workspace);
		free(w);
	}
}
