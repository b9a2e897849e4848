/*
 * LLM providers behind one interface (the OpenSMTPD queue_backend model):
 * llm-gemini.c, llm-openai.c and llm-anthropic.c each only turn a
 * provider-neutral conversation into their request (URL, headers, JSON
 * body) and turn their streamed events back into provider-neutral
 * callbacks. The provider-neutral files own the rest: llm-target.c
 * chooses the provider, model, URL and key for a session (gbrd.conf
 * [llm], the profile's [llm], the environment, a key file, a local
 * Ollama), llm-probe.c finds a local Ollama, and llm.c runs one streamed
 * call over http.c and sse.c.
 *
 * The conversation (a JSON array, borrowed by the builders):
 *   {"role":"user", "content": TEXT}
 *   {"role":"assistant", "content": TEXT, "tool_calls": [{"id", "name",
 *        "args": OBJECT, "meta"?: OBJECT}]}      (content may be "")
 *   {"role":"tool", "call_id", "name", "ok": BOOL, "output": TEXT}
 * "meta" carries what a provider needs back verbatim (Gemini's
 * thoughtSignature). The tool list is tool_list_json()'s shape:
 * [{"name", "description", "inputSchema"}].
 *
 * Secrets: the key lives in struct llm_target and in the request headers
 * only. It is never put in a URL, never logged (http.c redacts), and
 * llm_scrub removes it from any text that came back from the network
 * before that text reaches an event, an error or the disk log.
 */
#ifndef GBRD_LLM_H
#define GBRD_LLM_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

struct config;
struct env;
struct event_base;
struct llm_call;

#define LLM_KEY_MAX		4096	/* bytes of an API key */
#define LLM_TOOL_ARGS_MAX	(4 * 1024 * 1024) /* the tool calls' JSON of one answer */
#define LLM_TOOL_CALLS_MAX	64	/* tool calls in one answer */
#define LLM_ERROR_BODY_MAX	(16 * 1024) /* error response kept */

/* What the parsers report while a stream is read. */
struct llm_sink {
	/* Streamed text (not NUL-terminated). */
	void	(*text)(void *arg, const char *s, size_t len);
	/*
	 * A complete tool call. args (borrowed) is an object, or NULL when
	 * the model's arguments were not valid JSON (raw then holds them) or
	 * were larger than LLM_TOOL_ARGS_MAX in all (oversized is 1; raw is
	 * what was kept). Such a call is answered as an error the model can
	 * recover from; it does not end the turn.
	 */
	void	(*tool_call)(void *arg, const char *id, const char *name,
		    json_t *args, const char *raw, int oversized, json_t *meta);
	/* Token counts so far (cumulative; -1: not given). */
	void	(*usage)(void *arg, long long input, long long output);
};

/* An error the provider reported inside the stream. */
struct llm_perr {
	int	 retryable;	/* overloaded, rate limited, server error */
	char	*message;	/* caller frees */
};

/* A provider: how to build its requests and read its streams. */
struct llm_provider {
	const char	*name;		/* "gemini", "openai", "anthropic" */
	const char	*default_url;
	const char	*default_model;
	const char	*key_env;	/* the environment variable of its key */
	size_t		 default_max_request; /* bytes of one request body */
	/*
	 * Builds the URL (new) and the JSON body (new) for a conversation;
	 * -1 with *cause when the conversation is malformed.
	 */
	int	(*build)(const char *base_url, const char *model,
		    unsigned max_output_tokens, const char *system, json_t *conv,
		    json_t *tools, char **url, char **body, char **cause);
	/* The header that carries the key (new), e.g. "x-api-key: KEY". */
	char	*(*auth_header)(const char *key);
	/* Extra headers (static, NULL-terminated), e.g. anthropic-version. */
	const char *const *headers;
	/* A parser's state for one stream. */
	void	*(*parser_new)(void);
	void	 (*parser_free)(void *);
	/*
	 * One SSE event. Returns 0, or -1 with err filled when the stream
	 * carries an error or cannot be understood.
	 */
	int	 (*parse)(void *, const char *event, const char *data,
		    size_t len, const struct llm_sink *, void *arg,
		    struct llm_perr *err);
	/*
	 * The stream ended: emits what is still held (OpenAI's tool calls)
	 * and returns 1 if the provider said the answer was complete, 0 if
	 * the stream was cut.
	 */
	int	 (*finish)(void *, const struct llm_sink *, void *arg);
	/* Why the model stopped ("stop", "tool_calls", "max_tokens"...), or NULL. */
	const char *(*stop_reason)(void *);
};

extern const struct llm_provider llm_gemini;
extern const struct llm_provider llm_openai;
extern const struct llm_provider llm_anthropic;

/* The provider called name, or NULL. */
const struct llm_provider *llm_provider_find(const char *name);

/*
 * A provider's JSON document (an object or an array), like json_loadb
 * with flags 0, except that a \u0000 in a string is taken and made U+FFFD
 * (llm-json.c says why). Returns a new reference or NULL with err filled.
 */
json_t		*llm_json_parse(const char *data, size_t len, json_error_t *err);

/* Everything one request needs, resolved for a session. */
struct llm_target {
	const struct llm_provider *provider;
	char		*base_url;
	char		*model;
	char		*key;		/* NULL: none is sent */
	const char	*key_source;	/* "GEMINI_API_KEY", "key_file", NULL */
	const char	*url_source;	/* "profile", "gbrd.conf", "default", ... */
	int		 local;		/* the Ollama found on this machine */
	size_t		 max_request_bytes;
	unsigned	 max_output_tokens;
	unsigned	 max_steps;
	unsigned	 max_retries;
	long		 retry_base_ms;
	long		 retry_max_ms;
	long		 connect_timeout_ms;
	long		 idle_timeout_ms;
	size_t		 max_response_bytes;
	char		*note;		/* a warning for the user, or NULL */
};

void		 llm_target_free(struct llm_target *);

/* Takes the loop; before the first request. */
void		 llm_init(struct event_base *);
/*
 * Reads the keys: the provider variables of gbrd's environment and
 * gbrd.conf's [llm] key_file, which must be a regular file owned by this
 * user with no permission for group or others (mode 0600 or stricter).
 * Returns 0, or -1 with *cause (the old keys stay).
 */
int		 llm_keys_load(const struct config *, char **cause);
/* Forgets every key (their memory is cleared). */
void		 llm_keys_clear(void);
/* The providers for which a key is known, for daemon.status (new array). */
json_t		*llm_keys_status(void);

/*
 * Chooses the provider, URL, model and key for a session with profile
 * env (may be NULL) under config cfg. ollama_model is the model a local
 * Ollama offers (NULL: none found). Returns 0 with *t filled, 1 when no
 * provider can be used (*cause says exactly what to set), or -1 with
 * *cause when the configuration is wrong.
 */
int		 llm_resolve(const struct config *, const struct env *,
		    const char *ollama_model, struct llm_target *t, char **cause);
/* True if a provider is named (profile, gbrd.conf) or a key is known. */
int		 llm_configured(const struct config *, const struct env *);
/* True if resolving needs to know about a local Ollama first. */
int		 llm_wants_local(const struct config *, const struct env *);
/* The Ollama base URL probed (gbrd.conf [llm] ollama_url), or NULL: off. */
const char	*llm_local_url(const struct config *);

/*
 * Builds a request for t: URL, headers (with the key) and body. *body_len
 * is what the context budget compares with t->max_request_bytes. Returns
 * 0, or -1 with *cause. Free with llm_request_free.
 */
struct llm_request {
	char	*url;
	char	**headers;
	size_t	 nheaders;
	char	*body;
	size_t	 body_len;
};
int		 llm_request_build(const struct llm_target *, const char *system,
		    json_t *conv, json_t *tools, struct llm_request *,
		    char **cause);
void		 llm_request_free(struct llm_request *);

/* How a call ended. Pointers are borrowed for the callback. */
struct llm_outcome {
	int		 ok;
	const char	*text;		/* the whole answer text */
	size_t		 text_len;
	json_t		*tool_calls;	/* [{id, name, args | null, raw?, meta?}] */
	const char	*stop_reason;
	long long	 input_tokens;	/* -1: unknown */
	long long	 output_tokens;
	/* !ok: */
	int		 retryable;
	const char	*kind;		/* "llm_error", "rate_limited", "auth", ... */
	const char	*message;	/* scrubbed of the key */
	int		 status;	/* HTTP status or 0 */
	long		 retry_after_ms; /* -1: none given */
};

struct llm_call_cbs {
	/* Streamed text as it arrives. */
	void	(*text)(void *arg, const char *s, size_t len);
	/* The end; runs exactly once unless the call is cancelled. */
	void	(*done)(void *arg, const struct llm_outcome *);
};

/*
 * Sends a built request and streams its answer. Returns the call, or NULL
 * with *cause (then done never runs).
 */
struct llm_call	*llm_call_start(const struct llm_target *,
		    const struct llm_request *, const struct llm_call_cbs *,
		    void *arg, char **cause);
/* Stops a call at once; no callback runs again. */
void		 llm_call_cancel(struct llm_call *);

/*
 * A local Ollama: asks base_url/api/tags once (non-blocking, short
 * timeouts) and calls cb with the first model it offers, or NULL. The
 * answer is remembered for a while, so a burst of turns asks once.
 * Returns 0 (cb runs later, or at once from the memory when
 * remembered... never from inside this call), or -1 when no probe can be
 * started (cb never runs).
 */
typedef void (*llm_local_cb)(void *arg, const char *model);
int		 llm_local_probe(const char *base_url, llm_local_cb, void *arg);
/*
 * The answer of the last probe of base, without waiting: 1 with *model
 * (NULL: no Ollama there) when one is remembered, even an old one (then
 * refreshed in the background); 0 when none is known yet (a probe starts).
 */
int		 llm_local_known(const char *base, const char **model);
/* Forgets a waiter (its cb never runs). */
void		 llm_local_forget(void *arg);
/* Frees the probe's state and the keys; at shutdown. */
void		 llm_shutdown(void);

/*
 * Pure helpers, exposed for the unit tests.
 *
 * Replaces every occurrence of the known keys in s (new string).
 */
char		*llm_scrub(const char *s);
/* The model name is safe to put in a URL path. */
int		 llm_model_valid(const char *);
/* Whether an HTTP status is worth retrying. */
int		 llm_status_retryable(int status);
/* The error message in a provider's JSON error body (new), or NULL. */
char		*llm_error_message(const char *body, size_t len);
/* The retry delay an error body asks for (Gemini's RetryInfo), ms, or -1. */
long		 llm_retry_delay_ms(const char *body, size_t len);
/* Base URL without a trailing slash (new). */
char		*llm_base_trim(const char *);
/* Installs a key for a provider (tests); NULL removes it. */
void		 llm_key_set(const char *provider, const char *key);

#endif
