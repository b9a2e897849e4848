/*
 * What the files of environment profiles share (env.h is the public face):
 * the keys, the profile's fields and the parser's state. env-parse.c reads
 * files into a struct env, env.c checks it against the workspace and loads
 * it, env-view.c answers what others ask of a finished one.
 */
#ifndef GBRD_ENV_INT_H
#define GBRD_ENV_INT_H

#include <stddef.h>

#include <jansson.h>

#include "env.h"

#define ENV_LIST_MAX	256	/* items in one list */
#define ENV_ITEM_MAX	4096	/* bytes in one item, command or path */

enum env_key {
	K_ALLOWED_ROOT,
	K_RO_ROOTS,
	K_PROTECTED,
	K_CHECK,
	K_MAX_FIX,
	K_AUTONOMY,
	K_ASK,
	K_DENY,
	K_SYSTEM,
	K_SYSTEM_FILE,
	K_TIMEOUT,
	K_MAX_OUTPUT,
	K_PROVIDER,
	K_MODEL,
	K_BASE_URL,
	K_ASK_TOOLS,
	K_MAX_STEPS,
	K_MAX_REQUEST,
	K_EXTENDS,
	K__COUNT
};

/* A list of owned strings. */
struct env_strs {
	char	**v;
	size_t	  n;
};

struct env {
	int		 refs;
	int		 builtin;
	int		 finished;
	char		*name;
	char		*source;	/* the profile file, absolute; NULL if built in */
	char		*workspace;	/* real path */
	char		*root_given;	/* allowed_root as written (normal form) */
	char		*allowed_root;	/* real path */
	struct env_strs	 ro_given;
	struct env_strs	 ro;		/* real paths of those that exist */
	struct env_strs	 protected;
	struct env_strs	 literal;	/* protected exact paths (system_file) */
	char		*check;		/* NULL: none */
	int		 max_fix;
	enum env_autonomy autonomy;
	struct env_strs	 ask;
	struct env_strs	 deny;
	struct env_strs	 ask_tools;	/* tools that ask in supervised autonomy */
	char		*system;	/* the prompt text */
	char		*system_file_given;
	char		*system_file;	/* real path */
	int		 timeout_ms;
	size_t		 max_output;
	char		*provider;
	char		*model;
	char		*base_url;
	int		 max_steps;	/* 0: the daemon's */
	size_t		 max_request;	/* 0: the daemon's */
	struct env_strs	 warnings;
	struct env_strs	 files;
	int		 extends;	/* extends = builtin (env_load) */
	const char	*eco;		/* the ecosystem (env-eco.c), static */
	const char	*eco_title;
	struct env_strs	 kb;		/* its knowledge base in the workspace */
	json_t		*mcp;		/* [mcp.NAME] servers (env-mcp.c), or NULL */
	unsigned	 set;		/* bit per enum env_key given */
	int		 line[K__COUNT];
};

/* Parser state, shared by the INI and JSON front ends. */
struct env_parse {
	struct env	*env;
	const char	*file;
	char		*cause;
	int		 err_line;
	int		 line;		/* the line being parsed (0: unknown) */
	int		 prev_key;	/* the key set by the previous INI line */
	/* The INI reader. */
	const char	*buf;
	size_t		 len;
	size_t		 pos;
	size_t		 cur_len;
	size_t		 line_start;	/* offset of the line being parsed */
	int		 at_start;
};

/* A key: its section, its name, and whether it is a list. */
struct env_keydef {
	const char	*section;
	const char	*name;
	int		 list;
};
extern const struct env_keydef	 env_keys[K__COUNT];
extern const char *const	 env_autonomies[ENV_FULL + 1];

/* Lists of owned strings, and NULL-safe equality (env.c). */
void		 env_strs_add(struct env_strs *, const char *);
void		 env_strs_clear(struct env_strs *);
int		 env_strs_equal(const struct env_strs *, const struct env_strs *);
json_t		*env_strs_json(const struct env_strs *);
int		 env_str_equal(const char *, const char *);
/* A new, empty profile of that name with one reference (env.c). */
struct env	*env_new(const char *name);

/*
 * env-eco.c: chooses the workspace's (a real path) ecosystem, if any, and
 * sets its check, ask_commands, read-only roots and knowledge base; and,
 * on a finished default, adds what would change that choice to the files
 * watched.
 */
void		 env_eco_apply(struct env *, const char *workspace);
void		 env_eco_watch(struct env *);

/*
 * env-mcp.c: one key of [mcp.SERVER] (INI; NULL or why not, static), the
 * JSON "mcp" section and the check once all is parsed (0, or -1 and *why,
 * new).
 */
const char	*env_mcp_ini(struct env *, const char *server, const char *key,
		    const char *value);
int		 env_mcp_json(struct env *, json_t *, char **why);
int		 env_mcp_finish(struct env *, char **why);

#endif
