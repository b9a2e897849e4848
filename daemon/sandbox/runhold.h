/*
 * runhold: which workspaces have an agent's command running. While one
 * does, a change to its profiles on disk may be the command's own, so the
 * hot reload waits (session-env.c asks runhold_active and keeps what it saw);
 * when the last command of the workspace has ended and the check after it
 * (lockaudit.h) has put back what it changed, runhold_leave calls the
 * release callback, and the reload looks again at what is there now.
 * Counts only; no state of the commands themselves.
 */
#ifndef GBRD_RUNHOLD_H
#define GBRD_RUNHOLD_H

typedef void (*runhold_release_cb)(const char *workspace, void *arg);

/* The callback for a workspace whose last command has ended. */
void	runhold_set_release(runhold_release_cb, void *arg);
/* A command of workspace (absolute, real) starts, or has ended. */
void	runhold_enter(const char *workspace);
void	runhold_leave(const char *workspace);
/* Commands of workspace running now. */
unsigned runhold_active(const char *workspace);
/* Forgets everything (at shutdown); no callback runs. */
void	runhold_clear(void);

#endif
