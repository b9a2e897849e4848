/*
 * The provider-neutral half of the LLM layer (see llm.h): the keys, the
 * choice of provider/URL/model for a session, building a request with its
 * headers, streaming one call (http.c feeds sse.c, whose events the
 * provider's parser turns into text and tool calls), classifying how it
 * ended, and the probe for a local Ollama.
 *
 * Where a key may go. A profile lives in the workspace, and a workspace
 * can come from anywhere (a cloned repository), so a profile must not be
 * able to send the user's API key to a server of its choosing. The key is
 * sent only to the provider's own URL, to gbrd.conf's [llm] base_url, or
 * to $OPENAI_BASE_URL (all set by the user, outside any workspace); a
 * profile's base_url elsewhere gets requests without a key (fine for a
 * local server) and a note saying so.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "config.h"
#include "env.h"
#include "gbrd.h"
#include "http.h"
#include "jsonrpc.h"
#include "llm.h"
#include "log.h"
#include "sse.h"
#include "xmalloc.h"

#define LLM_SSE_LINE_MAX	(8 * 1024 * 1024)
#define LLM_SSE_EVENT_MAX	(8 * 1024 * 1024)
#define LLM_LOCAL_FRESH_MS	30000	/* a probe's answer is kept this long */
#define LLM_LOCAL_BODY_MAX	(1024 * 1024)
#define LLM_LOCAL_WAITERS_MAX	100000

static const struct llm_provider *const llm_providers[] = {
	&llm_gemini, &llm_openai, &llm_anthropic
};
#define LLM_NPROVIDERS	(sizeof llm_providers / sizeof llm_providers[0])

/* The keys known, per provider (same order as llm_providers). */
static struct {
	char		*key;
	const char	*source;	/* the variable's name, or "key_file" */
} llm_keys[LLM_NPROVIDERS];
static char	*llm_openai_base_env;	/* $OPENAI_BASE_URL, trimmed */

#define LLM_NO_PROVIDER \
	"No LLM provider is configured yet, so the agent cannot answer. " \
	"Set GEMINI_API_KEY, OPENAI_API_KEY (with OPENAI_BASE_URL for another " \
	"OpenAI-compatible server) or ANTHROPIC_API_KEY in gbrd's environment " \
	"and restart gbrd; or set [llm] provider and key_file (a file of mode " \
	"0600) in gbrd.conf; or set [llm] provider and base_url in the " \
	"profile (.gbr_envs/NAME.ini) for a local server; or start Ollama on " \
	"127.0.0.1:11434. Your message is kept in the session history; tools " \
	"work through tool.call and the REPL."

/* The provider called name. */
const struct llm_provider *
llm_provider_find(const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < LLM_NPROVIDERS; i++)
		if (strcmp(llm_providers[i]->name, name) == 0)
			return llm_providers[i];
	return NULL;
}

/* The index of a provider in llm_providers. */
static size_t
llm_provider_index(const struct llm_provider *p)
{
	size_t	i;

	for (i = 0; i < LLM_NPROVIDERS; i++)
		if (llm_providers[i] == p)
			return i;
	fatalx("llm: unknown provider");
}

/* Clears and frees a secret. */
static void
llm_secret_free(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

/* Base URL without trailing slashes. */
char *
llm_base_trim(const char *url)
{
	size_t	len = strlen(url);

	while (len > 0 && url[len - 1] == '/')
		len--;
	return xstrndup(url, len);
}

/*
 * Trims blanks around a key and checks it can travel in a header: 1 to
 * LLM_KEY_MAX visible ASCII characters (a newline would smuggle a header
 * in). Returns a new string or NULL with *why.
 */
static char *
llm_key_clean(const char *v, size_t len, const char **why)
{
	size_t	i;

	while (len > 0 && (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n')) {
		v++;
		len--;
	}
	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t' ||
	    v[len - 1] == '\r' || v[len - 1] == '\n'))
		len--;
	if (len == 0) {
		*why = "it is empty";
		return NULL;
	}
	if (len > LLM_KEY_MAX) {
		*why = "it is longer than 4096 bytes";
		return NULL;
	}
	for (i = 0; i < len; i++) {
		if (v[i] < 0x21 || v[i] > 0x7e) {
			*why = "it holds a blank, a control character or a "
			    "non-ASCII byte";
			return NULL;
		}
	}
	return xstrndup(v, len);
}

/* Reads a key file: a regular file of ours that nobody else may read. */
static char *
llm_key_file(const char *path, char **cause)
{
	struct stat	 sb;
	char		 buf[LLM_KEY_MAX + 256];
	const char	*why;
	char		*key;
	ssize_t		 n;
	size_t		 len = 0;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) == -1) {
		*cause = xasprintf("[llm] key_file %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		*cause = xasprintf("[llm] key_file %s: not a regular file", path);
		return NULL;
	}
	if (sb.st_uid != geteuid()) {
		close(fd);
		*cause = xasprintf("[llm] key_file %s: owned by uid %ld, not by "
		    "this user (uid %ld); refusing to use it", path,
		    (long)sb.st_uid, (long)geteuid());
		return NULL;
	}
	if ((sb.st_mode & 077) != 0) {
		close(fd);
		*cause = xasprintf("[llm] key_file %s: mode %04o lets others "
		    "read it; refusing to use it (run: chmod 600 %s)", path,
		    (unsigned)(sb.st_mode & 07777), path);
		return NULL;
	}
	while (len < sizeof buf && (n = read(fd, buf + len,
	    sizeof buf - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*cause = xasprintf("[llm] key_file %s: %s", path,
			    strerror(errno));
			close(fd);
			explicit_bzero(buf, sizeof buf);
			return NULL;
		}
		len += n;
	}
	close(fd);
	if (len == sizeof buf) {
		*cause = xasprintf("[llm] key_file %s: larger than a key can be",
		    path);
		explicit_bzero(buf, sizeof buf);
		return NULL;
	}
	key = llm_key_clean(buf, len, &why);
	explicit_bzero(buf, sizeof buf);
	if (key == NULL)
		*cause = xasprintf("[llm] key_file %s: %s", path, why);
	return key;
}

/* Loads the keys from the environment and the key file. */
int
llm_keys_load(const struct config *cfg, char **cause)
{
	char			*keys[LLM_NPROVIDERS] = { NULL };
	const char		*src[LLM_NPROVIDERS] = { NULL };
	const struct llm_provider *p;
	const char		*v, *why;
	char			*base = NULL, *k;
	size_t			 i;

	for (i = 0; i < LLM_NPROVIDERS; i++) {
		v = getenv(llm_providers[i]->key_env);
		if (v == NULL || *v == '\0')
			continue;
		if ((keys[i] = llm_key_clean(v, strlen(v), &why)) == NULL) {
			*cause = xasprintf("%s: %s", llm_providers[i]->key_env, why);
			goto fail;
		}
		src[i] = llm_providers[i]->key_env;
	}
	if ((v = getenv("OPENAI_BASE_URL")) != NULL && *v != '\0') {
		if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) ||
		    strlen(v) > 2048 || strcspn(v, " \t\r\n") != strlen(v)) {
			*cause = xstrdup("OPENAI_BASE_URL: expected an http:// or "
			    "https:// URL");
			goto fail;
		}
		base = llm_base_trim(v);
	}
	if (cfg->llm_key_file != NULL) {
		if ((p = llm_provider_find(cfg->llm_provider)) == NULL) {
			*cause = xstrdup("[llm] key_file needs [llm] provider (the "
			    "key's provider) in gbrd.conf");
			goto fail;
		}
		if ((k = llm_key_file(cfg->llm_key_file, cause)) == NULL)
			goto fail;
		i = llm_provider_index(p);
		llm_secret_free(keys[i]);
		keys[i] = k;
		src[i] = "key_file";
	}
	llm_keys_clear();
	for (i = 0; i < LLM_NPROVIDERS; i++) {
		llm_keys[i].key = keys[i];
		llm_keys[i].source = src[i];
	}
	llm_openai_base_env = base;
	return 0;
fail:
	for (i = 0; i < LLM_NPROVIDERS; i++)
		llm_secret_free(keys[i]);
	free(base);
	return -1;
}

/* Forgets every key. */
void
llm_keys_clear(void)
{
	size_t	i;

	for (i = 0; i < LLM_NPROVIDERS; i++) {
		llm_secret_free(llm_keys[i].key);
		llm_keys[i].key = NULL;
		llm_keys[i].source = NULL;
	}
	free(llm_openai_base_env);
	llm_openai_base_env = NULL;
}

/* Installs a key (tests). */
void
llm_key_set(const char *provider, const char *key)
{
	const struct llm_provider	*p = llm_provider_find(provider);
	size_t				 i;

	if (p == NULL)
		return;
	i = llm_provider_index(p);
	llm_secret_free(llm_keys[i].key);
	llm_keys[i].key = key != NULL ? xstrdup(key) : NULL;
	llm_keys[i].source = key != NULL ? "test" : NULL;
}

/* Which providers have a key, and from where (never the key). */
json_t *
llm_keys_status(void)
{
	json_t	*o = json_object();
	size_t	 i;

	for (i = 0; i < LLM_NPROVIDERS; i++)
		json_object_set_new(o, llm_providers[i]->name,
		    llm_keys[i].key != NULL ? json_string(llm_keys[i].source) :
		    json_null());
	return o;
}

/* Replaces every known key in s with REDACTED. */
char *
llm_scrub(const char *s)
{
	char		*out = xstrdup(s), *hit, *n;
	const char	*k;
	size_t		 i, klen;

	for (i = 0; i < LLM_NPROVIDERS; i++) {
		if ((k = llm_keys[i].key) == NULL || (klen = strlen(k)) < 4)
			continue;
		while ((hit = strstr(out, k)) != NULL) {
			n = xasprintf("%.*sREDACTED%s", (int)(hit - out), out,
			    hit + klen);
			explicit_bzero(out, strlen(out));
			free(out);
			out = n;
		}
	}
	return out;
}

/* A model name that cannot change the URL it is put in. */
int
llm_model_valid(const char *m)
{
	size_t	len = strlen(m);

	return len > 0 && len <= 256 && strstr(m, "..") == NULL &&
	    m[0] != '/' && strspn(m, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-") == len;
}

/* Statuses worth a retry: rate limits, timeouts, the server's trouble. */
int
llm_status_retryable(int status)
{
	return status == 408 || status == 409 || status == 425 ||
	    status == 429 || (status >= 500 && status <= 599);
}

/* The message of a JSON error body ({"error": {"message"}} and kin). */
char *
llm_error_message(const char *body, size_t len)
{
	json_t		*j, *e, *m;
	json_error_t	 jerr;
	char		*out = NULL;

	if ((j = json_loadb(body, len, 0, &jerr)) == NULL)
		return NULL;
	if (json_is_array(j))
		e = json_object_get(json_array_get(j, 0), "error");
	else
		e = json_object_get(j, "error");
	if (json_is_string(e))
		m = e;
	else if ((m = json_object_get(e, "message")) == NULL)
		m = json_object_get(j, "message");
	if (json_is_string(m))
		out = xstrndup(json_string_value(m), 2048);
	json_decref(j);
	return out;
}

/*
 * True when a refusal says the request is longer than the model's context
 * window. Providers say so in words more than in codes: OpenAI's
 * context_length_exceeded ("maximum context length is"), Anthropic's
 * "prompt is too long", Gemini's "input token count ... exceeds the
 * maximum number of tokens", llama.cpp's "exceeds the available context
 * size", Ollama's and others' "context window". A 413 is the same remedy.
 */
static int
llm_context_overflow(int status, const char *body)
{
	static const char *const words[] = {
		"context_length_exceeded", "context length", "context window",
		"context size", "prompt is too long", "input token count",
		"maximum number of tokens", "too many tokens", "reduce the length",
	};
	size_t	i;

	if (status == 413)
		return 1;
	if (status != 400 || body == NULL)
		return 0;
	for (i = 0; i < sizeof words / sizeof words[0]; i++)
		if (strcasestr(body, words[i]) != NULL)
			return 1;
	return 0;
}

/* Frees a target's strings. */
void
llm_target_free(struct llm_target *t)
{
	free(t->base_url);
	free(t->model);
	llm_secret_free(t->key);
	free(t->note);
	memset(t, 0, sizeof *t);
}

/* The Ollama URL to probe, or NULL when the probe is off. */
const char *
llm_local_url(const struct config *cfg)
{
	if (cfg->llm_ollama_url == NULL)
		return "http://127.0.0.1:11434";
	return *cfg->llm_ollama_url == '\0' ? NULL : cfg->llm_ollama_url;
}

/* The provider a profile and gbrd.conf name, without the keys' help. */
static const char *
llm_named_provider(const struct config *cfg, const struct env *env)
{
	if (env != NULL && env_llm_provider(env) != NULL)
		return env_llm_provider(env);
	/* A base_url alone means an OpenAI-compatible server. */
	if (env != NULL && env_llm_base_url(env) != NULL)
		return "openai";
	if (cfg->llm_provider != NULL)
		return cfg->llm_provider;
	if (cfg->llm_base_url != NULL)
		return "openai";
	return NULL;
}

/* The provider the keys alone suggest, or NULL. */
static const char *
llm_keyed_provider(void)
{
	size_t	i;

	for (i = 0; i < LLM_NPROVIDERS; i++)
		if (llm_keys[i].key != NULL)
			return llm_providers[i]->name;
	if (llm_openai_base_env != NULL)
		return "openai";
	return NULL;
}

/* True if a provider is named or a key is known. */
int
llm_configured(const struct config *cfg, const struct env *env)
{
	return llm_named_provider(cfg, env) != NULL ||
	    llm_keyed_provider() != NULL;
}

/* True if only a local Ollama could answer. */
int
llm_wants_local(const struct config *cfg, const struct env *env)
{
	return llm_named_provider(cfg, env) == NULL &&
	    llm_keyed_provider() == NULL && llm_local_url(cfg) != NULL;
}

/* True if two base URLs are the same once trimmed. */
static int
llm_same_base(const char *a, const char *b)
{
	size_t	la, lb;

	if (a == NULL || b == NULL)
		return 0;
	la = strlen(a);
	lb = strlen(b);
	while (la > 0 && a[la - 1] == '/')
		la--;
	while (lb > 0 && b[lb - 1] == '/')
		lb--;
	return la == lb && strncmp(a, b, la) == 0;
}

/* Chooses provider, URL, model and key for a session. */
int
llm_resolve(const struct config *cfg, const struct env *env,
    const char *ollama_model, struct llm_target *t, char **cause)
{
	const struct llm_provider	*p;
	const char			*name, *base, *model;
	size_t				 i;
	int				 conf, trusted;

	memset(t, 0, sizeof *t);
	*cause = NULL;
	if ((name = llm_named_provider(cfg, env)) == NULL &&
	    (name = llm_keyed_provider()) == NULL) {
		if (ollama_model == NULL || llm_local_url(cfg) == NULL) {
			*cause = xstrdup(LLM_NO_PROVIDER);
			return 1;
		}
		t->provider = &llm_openai;
		t->local = 1;
		{
			char	*b = llm_base_trim(llm_local_url(cfg));

			t->base_url = xasprintf("%s/v1", b);
			free(b);
		}
		t->url_source = "ollama";
		t->model = xstrdup(ollama_model);
		goto limits;
	}
	if ((p = llm_provider_find(name)) == NULL) {
		*cause = xasprintf("unknown LLM provider '%s'", name);
		return -1;
	}
	t->provider = p;
	/* gbrd.conf's URL and model are for its provider (or any, if none). */
	conf = cfg->llm_provider == NULL || strcmp(cfg->llm_provider, name) == 0;
	if (env != NULL && env_llm_base_url(env) != NULL) {
		base = env_llm_base_url(env);
		t->url_source = "profile";
	} else if (conf && cfg->llm_base_url != NULL) {
		base = cfg->llm_base_url;
		t->url_source = "gbrd.conf";
	} else if (p == &llm_openai && llm_openai_base_env != NULL) {
		base = llm_openai_base_env;
		t->url_source = "OPENAI_BASE_URL";
	} else {
		base = p->default_url;
		t->url_source = "default";
	}
	t->base_url = llm_base_trim(base);
	if (env != NULL && env_llm_model(env) != NULL)
		model = env_llm_model(env);
	else if (conf && cfg->llm_model != NULL)
		model = cfg->llm_model;
	else
		model = p->default_model;
	if (!llm_model_valid(model)) {
		*cause = xasprintf("model '%s': not a model name (letters, "
		    "digits, . _ : / -)", model);
		llm_target_free(t);
		return -1;
	}
	t->model = xstrdup(model);
	i = llm_provider_index(p);
	trusted = strcmp(t->url_source, "profile") != 0 ||
	    llm_same_base(t->base_url, p->default_url) ||
	    (conf && llm_same_base(t->base_url, cfg->llm_base_url)) ||
	    (p == &llm_openai && llm_same_base(t->base_url, llm_openai_base_env));
	if (llm_keys[i].key != NULL && trusted) {
		t->key = xstrdup(llm_keys[i].key);
		t->key_source = llm_keys[i].source;
	} else if (llm_keys[i].key != NULL)
		t->note = xasprintf("the profile's base_url (%s) is not one "
		    "gbrd.conf names, so the %s key is not sent there; set "
		    "[llm] base_url in gbrd.conf to trust it", t->base_url,
		    p->name);
	if (t->key == NULL && strcmp(t->url_source, "default") == 0) {
		*cause = xasprintf("%s needs an API key: set %s in gbrd's "
		    "environment and restart gbrd, or set [llm] provider = %s "
		    "and key_file (a file of mode 0600) in gbrd.conf. Your "
		    "message is kept in the session history; tools work "
		    "through tool.call and the REPL.", p->name, p->key_env,
		    p->name);
		llm_target_free(t);
		return 1;
	}
limits:
	t->max_request_bytes = env != NULL && env_llm_max_request_bytes(env) > 0 ?
	    env_llm_max_request_bytes(env) : cfg->llm_max_request_bytes > 0 ?
	    (size_t)cfg->llm_max_request_bytes : t->provider->default_max_request;
	t->max_steps = env != NULL && env_llm_max_steps(env) > 0 ?
	    (unsigned)env_llm_max_steps(env) : cfg->llm_max_steps;
	t->max_output_tokens = cfg->llm_max_output_tokens;
	t->max_retries = cfg->llm_max_retries;
	t->retry_base_ms = cfg->llm_retry_base_ms;
	t->retry_max_ms = cfg->llm_retry_max_ms;
	t->connect_timeout_ms = cfg->llm_connect_timeout_ms;
	t->idle_timeout_ms = cfg->llm_idle_timeout_ms;
	t->max_response_bytes = cfg->llm_max_response_bytes;
	return 0;
}

/* Builds the request for a target. */
int
llm_request_build(const struct llm_target *t, const char *system,
    json_t *conv, json_t *tools, struct llm_request *rq, char **cause)
{
	const char *const	*h;
	size_t			 n = 0, max;

	memset(rq, 0, sizeof *rq);
	if (t->provider->build(t->base_url, t->model, t->max_output_tokens,
	    system, conv, tools, &rq->url, &rq->body, cause) != 0)
		return -1;
	rq->body_len = strlen(rq->body);
	max = 4;
	for (h = t->provider->headers; h != NULL && *h != NULL; h++)
		max++;
	rq->headers = xcalloc(max, sizeof *rq->headers);
	rq->headers[n++] = xstrdup("Content-Type: application/json");
	rq->headers[n++] = xstrdup("Accept: text/event-stream");
	for (h = t->provider->headers; h != NULL && *h != NULL; h++)
		rq->headers[n++] = xstrdup(*h);
	if (t->key != NULL)
		rq->headers[n++] = t->provider->auth_header(t->key);
	rq->nheaders = n;
	return 0;
}

/* Frees a request (the key in its headers is cleared). */
void
llm_request_free(struct llm_request *rq)
{
	size_t	i;

	for (i = 0; i < rq->nheaders; i++)
		llm_secret_free(rq->headers[i]);
	free(rq->headers);
	free(rq->url);
	free(rq->body);
	memset(rq, 0, sizeof *rq);
}

/* One streamed call. */
struct llm_call {
	const struct llm_provider *p;
	struct http_req		*http;
	struct sse		*sse;
	void			*pst;		/* the provider parser's state */
	struct llm_call_cbs	 cbs;
	void			*arg;
	char			*text;
	size_t			 text_len;
	size_t			 text_cap;
	json_t			*calls;
	long long		 input;
	long long		 output;
	int			 status;
	char			*errbody;	/* a non-2xx body, bounded */
	size_t			 errlen;
	struct llm_perr		 perr;
	int			 failed;	/* perr is set */
	const char		*sse_cause;	/* the SSE parser failed */
	int			 busy;		/* inside our data callback */
	int			 cancelled;
};

/* Frees a call. */
static void
llm_call_free(struct llm_call *c)
{
	sse_free(c->sse);
	if (c->pst != NULL)
		c->p->parser_free(c->pst);
	free(c->text);
	json_decref(c->calls);
	free(c->errbody);
	free(c->perr.message);
	free(c);
}

/* The sink: streamed text. */
static void
llm_sink_text(void *arg, const char *s, size_t len)
{
	struct llm_call	*c = arg;
	size_t		 cap;

	if (c->cancelled || len == 0)
		return;
	if (c->text_len + len + 1 > c->text_cap) {
		cap = c->text_cap == 0 ? 1024 : c->text_cap;
		while (cap < c->text_len + len + 1)
			cap *= 2;
		c->text = xreallocarray(c->text, cap, 1);
		c->text_cap = cap;
	}
	memcpy(c->text + c->text_len, s, len);
	c->text_len += len;
	c->text[c->text_len] = '\0';
	if (c->cbs.text != NULL)
		c->cbs.text(c->arg, s, len);
}

/* The sink: a complete tool call. */
static void
llm_sink_call(void *arg, const char *id, const char *name, json_t *args,
    const char *raw, json_t *meta)
{
	struct llm_call	*c = arg;
	json_t		*o, *rs;
	int		 deep;

	/*
	 * Arguments nested as deep as jansson parses would be too deep to read
	 * back once stored in a record or sent in an event: refused as
	 * unusable, with why (see RPC_MAX_NESTING).
	 */
	deep = args != NULL && rpc_nesting_over(args, RPC_MAX_NESTING);
	o = json_pack("{s:s, s:s, s:O?}", "id", id, "name", name, "args",
	    deep ? NULL : args);
	if (o == NULL)
		return;
	if (deep)
		json_object_set_new(o, "args_error", json_sprintf("nested deeper "
		    "than %d levels", RPC_MAX_NESTING));
	if (args == NULL || deep) {
		size_t	n = strlen(raw);

		/* Kept for the model's error message; cut on a character. */
		if (n > 4096) {
			n = 4096;
			while (n > 0 && ((unsigned char)raw[n] & 0xc0) == 0x80)
				n--;
		}
		json_object_set_new(o, "args", json_null());
		rs = json_stringn(raw, n);
		json_object_set_new(o, "raw", rs != NULL ? rs : json_string(""));
	}
	if (meta != NULL)
		json_object_set(o, "meta", meta);
	json_array_append_new(c->calls, o);
}

/* The sink: token counts. */
static void
llm_sink_usage(void *arg, long long in, long long out)
{
	struct llm_call	*c = arg;

	if (in >= 0)
		c->input = in;
	if (out >= 0)
		c->output = out;
}

static const struct llm_sink llm_call_sink = {
	llm_sink_text, llm_sink_call, llm_sink_usage
};

/* sse: one event for the provider's parser. */
static int
llm_call_event(void *arg, const char *event, const char *data, size_t len)
{
	struct llm_call	*c = arg;

	if (c->p->parse(c->pst, event, data, len, &llm_call_sink, c,
	    &c->perr) != 0) {
		c->failed = 1;
		return -1;
	}
	return c->cancelled ? -1 : 0;
}

/* http: body bytes. */
static int
llm_call_data(void *arg, int status, const char *buf, size_t len)
{
	struct llm_call	*c = arg;
	size_t		 n;
	int		 r = 0;

	c->status = status;
	if (status < 200 || status > 299) {
		/* An error body: keep the start of it for the message. */
		n = LLM_ERROR_BODY_MAX - c->errlen;
		if (n > len)
			n = len;
		if (c->errbody == NULL)
			c->errbody = xmalloc(LLM_ERROR_BODY_MAX + 1);
		memcpy(c->errbody + c->errlen, buf, n);
		c->errlen += n;
		c->errbody[c->errlen] = '\0';
		return 0;
	}
	c->busy++;
	if (sse_feed(c->sse, buf, len, llm_call_event, c, &c->sse_cause) != 0) {
		if (c->failed || c->cancelled)
			c->sse_cause = NULL;
		r = -1;
	}
	c->busy--;
	if (c->cancelled) {
		/* Cancelled from a callback: http.c has forgotten the request. */
		llm_call_free(c);
		return -1;
	}
	return r;
}

/* http: the end. */
static void
llm_call_done(void *arg, const struct http_result *res)
{
	struct llm_call		*c = arg;
	struct llm_outcome	 o;
	char			*msg = NULL, *emsg = NULL, *scrubbed;
	int			 complete;

	/* http.c frees the request after this returns. */
	c->http = NULL;
	memset(&o, 0, sizeof o);
	o.input_tokens = c->input;
	o.output_tokens = c->output;
	o.status = res->status;
	o.retry_after_ms = res->retry_after_ms;
	o.kind = "llm_error";
	if (c->failed) {
		o.retryable = c->perr.retryable;
		o.kind = c->perr.retryable ? "llm_unavailable" : "llm_error";
		msg = xasprintf("%s reported: %s", c->p->name, c->perr.message);
	} else if (c->sse_cause != NULL) {
		msg = xasprintf("the %s stream is malformed: %s", c->p->name,
		    c->sse_cause);
	} else if (res->error == HTTP_OK && res->status >= 200 &&
	    res->status <= 299) {
		complete = c->p->finish(c->pst, &llm_call_sink, c);
		if (sse_end(c->sse) && !complete)
			complete = 0;
		o.input_tokens = c->input;
		o.output_tokens = c->output;
		if (complete) {
			o.ok = 1;
			o.kind = NULL;
		} else {
			o.retryable = 1;
			o.kind = "stream_cut";
			msg = xasprintf("the %s stream ended before the answer "
			    "was complete", c->p->name);
		}
	} else if (res->error == HTTP_OK) {
		emsg = c->errbody != NULL ? llm_error_message(c->errbody,
		    c->errlen) : NULL;
		o.retryable = llm_status_retryable(res->status);
		if (res->status == 429)
			o.kind = "rate_limited";
		else if (res->status == 401 || res->status == 403)
			o.kind = "auth";
		else if (o.retryable)
			o.kind = "llm_unavailable";
		else if (llm_context_overflow(res->status, c->errbody))
			o.kind = "context_overflow";
		msg = xasprintf("%s answered HTTP %d%s%s%s", c->p->name,
		    res->status, emsg != NULL ? ": " : "",
		    emsg != NULL ? emsg : "", res->status == 401 ||
		    res->status == 403 ? " (check the API key)" : "");
	} else {
		switch (res->error) {
		case HTTP_ERR_CONNECT:
		case HTTP_ERR_CONNECT_TIMEOUT:
			o.retryable = 1;
			o.kind = "llm_unavailable";
			break;
		case HTTP_ERR_IDLE:
		case HTTP_ERR_DROPPED:
		case HTTP_ERR_TIMEOUT:
			o.retryable = 1;
			o.kind = "stream_cut";
			break;
		case HTTP_ERR_TOO_LARGE:
			o.kind = "too_large";
			break;
		default:
			break;
		}
		msg = xasprintf("%s: %s", c->p->name, res->message);
	}
	o.text = c->text != NULL ? c->text : "";
	o.text_len = c->text_len;
	o.tool_calls = c->calls;
	o.stop_reason = c->p->stop_reason(c->pst);
	scrubbed = llm_scrub(msg != NULL ? msg : "");
	o.message = scrubbed;
	c->busy++;
	c->cbs.done(c->arg, &o);
	free(msg);
	free(emsg);
	free(scrubbed);
	llm_call_free(c);
}

/* Starts a call. */
struct llm_call *
llm_call_start(const struct llm_target *t, const struct llm_request *rq,
    const struct llm_call_cbs *cbs, void *arg, char **cause)
{
	struct http_request	 hr;
	struct llm_call		*c = xcalloc(1, sizeof *c);

	c->p = t->provider;
	c->cbs = *cbs;
	c->arg = arg;
	c->input = c->output = -1;
	c->calls = json_array();
	c->sse = sse_create(LLM_SSE_LINE_MAX, LLM_SSE_EVENT_MAX);
	c->pst = c->p->parser_new();
	memset(&hr, 0, sizeof hr);
	hr.method = "POST";
	hr.url = rq->url;
	hr.headers = (const char *const *)rq->headers;
	hr.nheaders = rq->nheaders;
	hr.body = rq->body;
	hr.body_len = rq->body_len;
	hr.connect_timeout_ms = t->connect_timeout_ms;
	hr.idle_timeout_ms = t->idle_timeout_ms;
	hr.max_response_bytes = t->max_response_bytes;
	if ((c->http = http_start(&hr, llm_call_data, llm_call_done, c,
	    cause)) == NULL) {
		llm_call_free(c);
		return NULL;
	}
	return c;
}

/* Stops a call. */
void
llm_call_cancel(struct llm_call *c)
{
	if (c == NULL || c->cancelled)
		return;
	c->cancelled = 1;
	if (c->http != NULL)
		http_cancel(c->http);
	c->http = NULL;
	if (c->busy == 0)
		llm_call_free(c);
}

/*
 * The local Ollama probe: one GET at a time, its answer kept for a while,
 * the turns that asked meanwhile waiting in a list.
 */
struct llm_waiter {
	llm_local_cb		 cb;
	void			*arg;
	struct llm_waiter	*next;
};

static struct {
	struct http_req		*req;
	char			*url;		/* the base probed */
	char			*body;
	size_t			 len;
	int			 status;
	int			 known;		/* an answer is remembered */
	char			*model;		/* the answer: NULL, none found */
	int64_t			 when_ms;
	struct llm_waiter	*waiters;
	unsigned		 nwaiters;
	struct event		*ev;		/* runs the waiters from the loop */
} llm_local;

/* Calls back every waiter with the remembered answer. */
static void
llm_local_run(evutil_socket_t fd, short events, void *arg)
{
	struct llm_waiter	*w;

	while ((w = llm_local.waiters) != NULL) {
		llm_local.waiters = w->next;
		llm_local.nwaiters--;
		w->cb(w->arg, llm_local.model);
		free(w);
	}
}

/* Schedules the waiters' callbacks. */
static void
llm_local_wake(void)
{
	if (llm_local.ev == NULL && (llm_local.ev = event_new(gbrd_base(), -1, 0,
	    llm_local_run, NULL)) == NULL)
		fatalx("event_new failed");
	event_active(llm_local.ev, EV_TIMEOUT, 0);
}

/* The probe's body. */
static int
llm_local_data(void *arg, int status, const char *buf, size_t len)
{
	llm_local.status = status;
	if (len > LLM_LOCAL_BODY_MAX - llm_local.len)
		return -1;
	llm_local.body = xreallocarray(llm_local.body, llm_local.len + len + 1, 1);
	memcpy(llm_local.body + llm_local.len, buf, len);
	llm_local.len += len;
	llm_local.body[llm_local.len] = '\0';
	return 0;
}

/* The probe ended: remember its answer and wake the waiters. */
static void
llm_local_done(void *arg, const struct http_result *res)
{
	json_t		*j, *m;
	json_error_t	 jerr;
	const char	*name;

	llm_local.req = NULL;
	free(llm_local.model);
	llm_local.model = NULL;
	if (res->error == HTTP_OK && res->status == 200 && llm_local.body != NULL &&
	    (j = json_loadb(llm_local.body, llm_local.len, 0, &jerr)) != NULL) {
		m = json_array_get(json_object_get(j, "models"), 0);
		name = json_string_value(json_object_get(m, "name"));
		if (name == NULL)
			name = json_string_value(json_object_get(m, "model"));
		if (name != NULL && llm_model_valid(name))
			llm_local.model = xstrdup(name);
		json_decref(j);
	}
	if (llm_local.model != NULL)
		log_info("llm: a local Ollama at %s offers %s", llm_local.url,
		    llm_local.model);
	else
		log_debug("llm: no local Ollama at %s (%s)", llm_local.url,
		    res->error != HTTP_OK ? res->message : "no model");
	free(llm_local.body);
	llm_local.body = NULL;
	llm_local.len = 0;
	llm_local.known = 1;
	llm_local.when_ms = gbrd_uptime_ms();
	llm_local_run(-1, 0, NULL);
}

/* Starts a probe nobody waits for (at start, and to refresh an old answer). */
static void
llm_local_refresh(const char *base)
{
	struct http_request	 hr;
	char			*url, *b, *cause;

	if (llm_local.req != NULL)
		return;
	free(llm_local.url);
	llm_local.url = xstrdup(base);
	b = llm_base_trim(base);
	url = xasprintf("%s/api/tags", b);
	free(b);
	memset(&hr, 0, sizeof hr);
	hr.method = "GET";
	hr.url = url;
	hr.connect_timeout_ms = 500;
	hr.total_timeout_ms = 3000;
	hr.max_response_bytes = LLM_LOCAL_BODY_MAX;
	llm_local.req = http_start(&hr, llm_local_data, llm_local_done, NULL,
	    &cause);
	free(url);
	if (llm_local.req == NULL) {
		log_debug("llm: cannot probe for Ollama: %s", cause);
		free(cause);
	}
}

/* Asks a local Ollama which model it offers. */
int
llm_local_probe(const char *base, llm_local_cb cb, void *arg)
{
	struct llm_waiter	*w, **pp;

	if (llm_local.nwaiters >= LLM_LOCAL_WAITERS_MAX)
		return -1;
	if (llm_local.url != NULL && strcmp(llm_local.url, base) != 0 &&
	    llm_local.req == NULL) {
		llm_local.known = 0;
		free(llm_local.url);
		llm_local.url = NULL;
	}
	w = xcalloc(1, sizeof *w);
	w->cb = cb;
	w->arg = arg;
	for (pp = &llm_local.waiters; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = w;
	llm_local.nwaiters++;
	if (llm_local.req != NULL)
		return 0;
	if (llm_local.known &&
	    gbrd_uptime_ms() - llm_local.when_ms < LLM_LOCAL_FRESH_MS) {
		llm_local_wake();
		return 0;
	}
	llm_local_refresh(base);
	if (llm_local.req == NULL) {
		/* Remember "none" and answer from the loop. */
		free(llm_local.model);
		llm_local.model = NULL;
		llm_local.known = 1;
		llm_local.when_ms = gbrd_uptime_ms();
		llm_local_wake();
	}
	return 0;
}

/*
 * What a local Ollama offered, if an answer is remembered (1, *model set,
 * NULL for none) even an old one, which is then refreshed in the
 * background; 0 if none is known yet (a probe is started).
 */
int
llm_local_known(const char *base, const char **model)
{
	if (llm_local.known && llm_local.url != NULL &&
	    strcmp(llm_local.url, base) == 0) {
		*model = llm_local.model;
		if (gbrd_uptime_ms() - llm_local.when_ms >= LLM_LOCAL_FRESH_MS)
			llm_local_refresh(base);
		return 1;
	}
	if (llm_local.req == NULL)
		llm_local_refresh(base);
	return 0;
}

/* Forgets a waiter. */
void
llm_local_forget(void *arg)
{
	struct llm_waiter	*w, **pp;

	for (pp = &llm_local.waiters; (w = *pp) != NULL;) {
		if (w->arg == arg) {
			*pp = w->next;
			llm_local.nwaiters--;
			free(w);
		} else
			pp = &w->next;
	}
}

/* Frees everything. */
void
llm_shutdown(void)
{
	struct llm_waiter	*w;

	if (llm_local.req != NULL)
		http_cancel(llm_local.req);
	while ((w = llm_local.waiters) != NULL) {
		llm_local.waiters = w->next;
		free(w);
	}
	if (llm_local.ev != NULL)
		event_free(llm_local.ev);
	free(llm_local.url);
	free(llm_local.model);
	free(llm_local.body);
	memset(&llm_local, 0, sizeof llm_local);
	llm_keys_clear();
}
