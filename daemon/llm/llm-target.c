/*
 * Which provider, URL, model and key a session's requests use (struct
 * llm_target, llm.h). This file owns the keys (gbrd's environment and
 * gbrd.conf's [llm] key_file, checked before they are taken), scrubbing
 * them out of text that came back, and the choice for a session from the
 * profile's [llm], gbrd.conf's [llm], the keys known and a local Ollama
 * (which llm-probe.c finds; the caller passes its model in). It does not
 * send anything: llm.c builds and streams the requests.
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

#include "config.h"
#include "env.h"
#include "llm.h"
#include "llm-int.h"
#include "log.h"
#include "paths.h"
#include "xmalloc.h"

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
void
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
	char		*key, *why_private;
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
	if (paths_fd_private(fd, path, &why_private) != 0) {
		close(fd);
		*cause = xasprintf("[llm] key_file %s: %s; refusing to use it",
		    path, why_private);
		free(why_private);
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
