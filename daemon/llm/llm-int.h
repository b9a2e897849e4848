/*
 * What the provider-neutral LLM files share, and nobody else sees (llm.h
 * is the layer's face):
 *
 *   llm.c         building a request, streaming one call and saying how
 *                 it ended; the layer's start and stop
 *   llm-target.c  the keys, and choosing the provider, URL, model and
 *                 key of a session (struct llm_target)
 *   llm-probe.c   the probe for a local Ollama
 */
#ifndef GBRD_LLM_INT_H
#define GBRD_LLM_INT_H

struct event_base;

/* llm-target.c: clears and frees a secret (NULL is fine). */
void	llm_secret_free(char *);

/* llm-probe.c: takes the loop the probe's events run on. */
void	llm_local_init(struct event_base *);
/* llm-probe.c: cancels the probe and frees its state; no waiter runs. */
void	llm_local_shutdown(void);

#endif
