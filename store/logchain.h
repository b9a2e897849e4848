/*
 * The disk log's hash chain (doc/DISKLOG.md, "The chain"): every record
 * is chained to the one before it by SHA-256 (libsodium) over the previous
 * head and the record's seq, timestamp, type and data, so a record changed,
 * removed, added or moved anywhere changes every head after it. Heads are
 * written into the log itself ("log.chain" records) every N records and
 * at shutdown, and into each snapshot, optionally signed with Ed25519. The
 * daemon (daemon/storage/) and gbrctl log verify compute it with this one
 * code. Pure: no I/O.
 */
#ifndef GBR_LOGCHAIN_H
#define GBR_LOGCHAIN_H

#include <stddef.h>
#include <stdint.h>

#define LOGCHAIN_LEN		32	/* a head */
#define LOGCHAIN_HEX		65	/* as hex, NUL included */
#define LOGCHAIN_SEED_LEN	32	/* an Ed25519 key's seed */
#define LOGCHAIN_PK_LEN		32
#define LOGCHAIN_SK_LEN		64
#define LOGCHAIN_SIG_LEN	64
#define LOGCHAIN_ANCHOR_TYPE	"log.chain"

/* A chain: the head after the record at seq (seq 0: the empty chain). */
struct logchain {
	uint64_t	 seq;
	unsigned char	 head[LOGCHAIN_LEN];
};

/* The empty chain, or one that starts at seq with head (may be NULL). */
void	logchain_init(struct logchain *, uint64_t seq,
	    const unsigned char *head);
/* Adds the record after c->seq: c->seq becomes seq. */
void	logchain_add(struct logchain *, uint64_t seq, int64_t ts_ms,
	    const char *type, size_t type_len, const char *data,
	    size_t data_len);
void	logchain_hex(const unsigned char *, size_t, char *out);
/* Reads len bytes of hex (exactly 2*len digits). Returns 0 or -1. */
int	logchain_unhex(const char *, unsigned char *, size_t len);
/* The key pair of a seed. */
void	logchain_keypair(const unsigned char seed[LOGCHAIN_SEED_LEN],
	    unsigned char pk[LOGCHAIN_PK_LEN], unsigned char sk[LOGCHAIN_SK_LEN]);
/* Signs the head of a log (its id) at seq. */
void	logchain_sign(const unsigned char sk[LOGCHAIN_SK_LEN], uint64_t log_id,
	    const struct logchain *, unsigned char sig[LOGCHAIN_SIG_LEN]);
/* 1 if sig is pk's signature of that head, else 0. */
int	logchain_check(const unsigned char pk[LOGCHAIN_PK_LEN], uint64_t log_id,
	    const struct logchain *, const unsigned char sig[LOGCHAIN_SIG_LEN]);

#endif
