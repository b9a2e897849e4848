/*
 * The daemon config (gbrd.conf, INI, parsed with inih). The live config is
 * replaced as a whole on SIGHUP: a new one is parsed and validated first and
 * the old one stays in force if the new one is broken (openbgpd's
 * reconfigure). Other modules read it through config_get(), borrowed.
 */
#ifndef GBRD_CONFIG_H
#define GBRD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/*
 * Risks [exec] accept_risks may accept: what a command could do where a
 * layer is missing (runner.h keeps the same bits).
 */
#define CONFIG_RISK_WRITES	0x1	/* write anywhere the user can */
#define CONFIG_RISK_CONTROL	0x2	/* reach a gbrd control socket */
#define CONFIG_RISK_LEFTOVERS	0x4	/* leave processes after the run */

/* Models [prices] may price: a bound on a list one file can grow. */
#define CONFIG_PRICES_MAX	256

/* One [prices] line: USD per million input and output tokens of a model. */
struct config_price {
	char	*model;
	double	 input;
	double	 output;
};

struct config {
	char	*path;			/* the file read, NULL for built-in defaults */
	/* [daemon] */
	size_t	 max_line_bytes;	/* longest protocol line accepted */
	size_t	 client_queue_bytes;	/* output queued for one client before eviction */
	unsigned max_clients;		/* connections at once */
	size_t	 max_input_bytes;	/* unfinished lines of all clients together */
	unsigned line_timeout_ms;	/* a line must be complete this long after
					   its first byte */
	int	 log_level;		/* enum log_level */
	/* [log]: the disk log (see disklog.h) */
	int	 log_fsync;		/* durable records are fsynced (else trusted to the OS) */
	uint64_t log_segment_bytes;	/* size at which a segment is closed */
	uint64_t log_max_bytes;		/* disk budget for all segments */
	uint64_t log_snapshot_bytes;	/* a snapshot after this much is logged */
	unsigned log_commit_delay_us;	/* extra wait to gather a group commit */
	int	 log_chain;		/* hash-chain the records */
	unsigned log_chain_every;	/* a log.chain head every N records */
	char	*log_signing_key;	/* Ed25519 seed file, or NULL */
	/* [session]: bounds of what clients can make a session hold */
	unsigned session_max;		/* open sessions at once */
	unsigned session_history_messages; /* messages in one history */
	uint64_t session_history_bytes;	/* bytes of one history */
	size_t	 session_max_text_bytes; /* one message sent by a client */
	unsigned session_ring_events;	/* recent events kept per session for catch-up */
	uint64_t session_ring_bytes;	/* bytes of those per session */
	uint64_t session_events_memory;	/* bytes of all sessions' recent events */
	unsigned session_history_idle;	/* s: then a history on disk leaves memory */
	uint64_t session_history_memory; /* bytes of histories kept in memory */
	unsigned session_max_attached;	/* clients attached to one session */
	unsigned session_request_ids;	/* request_ids remembered per session */
	/* [exec]: daemon-wide caps on the agent's commands (runner.h, tool-run.h) */
	unsigned exec_max_timeout_ms;	/* cap on every profile's timeout_ms */
	uint64_t exec_max_output_bytes;	/* cap on every profile's max_output_bytes */
	unsigned exec_max_children;	/* children running at once, in all */
	unsigned exec_max_per_session;	/* children running at once for one session */
	unsigned exec_max_queued;	/* calls waiting for a slot; more are busy */
	unsigned exec_grace_ms;		/* from SIGTERM to SIGKILL */
	unsigned exec_max_processes;	/* processes one run may hold at once */
	uint64_t exec_max_memory_bytes;	/* RLIMIT_AS of each process */
	uint64_t exec_max_file_bytes;	/* RLIMIT_FSIZE */
	unsigned exec_max_open_files;	/* RLIMIT_NOFILE */
	int	 exec_landlock;		/* enum runner_mode: 0 off, 1 auto, 2 require */
	int	 exec_namespaces;	/* the same, for pid/mount/user namespaces */
	int	 exec_seccomp;		/* the same, for the system call filter */
	unsigned exec_accept_risks;	/* RUNNER_RISK_* bits gbrd.conf accepts */
	int	 exec_fork_server;	/* 1 auto (the default), 0 off: runner.h */
	char	*exec_pass_env;		/* extra variable names, comma-separated, checked */
	char	*exec_read_paths;	/* extra readable folders, comma-separated, absolute */
	char	*exec_helper;		/* gbr-exec's path; NULL: found (runner.h) */
	int	 exec_toolchain_reads;	/* 1 auto (the default), 0 off: tool-run-home.c */
	uint64_t exec_cache_max_bytes;	/* a workspace's agent cache; over it, cleared */
	/* [approval]: human approvals (approval.h) */
	unsigned approval_expire_after;	/* seconds a pending approval waits; 0: forever */
	unsigned approval_max_pending;	/* approvals waiting at once, in all */
	/* [llm]: the daemon's default provider and the agent loop's bounds (llm.h) */
	char	*llm_provider;		/* gemini, openai, anthropic; NULL: from the keys */
	char	*llm_model;		/* NULL: the provider's default */
	char	*llm_base_url;		/* NULL: the provider's; keys may go here */
	char	*llm_key_file;		/* the provider's key, a 0600 file; NULL: none */
	char	*llm_ollama_url;	/* local Ollama probed when nothing is set; "" off */
	unsigned llm_connect_timeout_ms; /* to reach the provider */
	unsigned llm_idle_timeout_ms;	/* a stream silent this long is dropped */
	uint64_t llm_max_response_bytes; /* one streamed answer */
	uint64_t llm_max_request_bytes;	/* one request; 0: the provider's default */
	unsigned llm_max_output_tokens;	/* asked of the model per answer */
	unsigned llm_max_steps;		/* model calls in one turn */
	unsigned llm_max_retries;	/* retries of one model call */
	unsigned llm_retry_base_ms;	/* first backoff (doubles, with jitter) */
	unsigned llm_retry_max_ms;	/* longest wait between retries */
	/* [prices]: what a turn costs, where the provider reports usage */
	struct config_price *prices;	/* nprices entries, one per model */
	size_t	 nprices;
};

/* Returns a new config with the built-in defaults. */
struct config	*config_defaults(void);
/*
 * Parses a file into a new config (defaults for what it does not set).
 * Unknown sections or keys and bad values are errors naming file and line.
 * Returns NULL and sets *cause on error.
 */
struct config	*config_load(const char *path, char **cause);
void		 config_free(struct config *);
/* Installs a config as the live one (steals it, frees the old one). */
void		 config_set(struct config *);
/* The live config, borrowed. */
const struct config *config_get(void);
/*
 * The price of a model in a config, borrowed (it lives as long as the
 * config); NULL if [prices] does not name it.
 */
const struct config_price *config_price(const struct config *,
		    const char *model);

#endif
