/*
 * The disk log's hash chain and the signatures of its heads (see
 * logchain.h): SHA-256 and Ed25519 from libsodium, nothing hand-written.
 */
#include "gbr-config.h"

#include <string.h>

#include <sodium.h>
#ifdef HAVE_LIBCRYPTO
/* SHA256_Init and the rest: still in OpenSSL 3, only marked old. */
#define OPENSSL_API_COMPAT	0x10100000L
#include <openssl/sha.h>
#endif

#include "log.h"
#include "logchain.h"

/* Little-endian bytes of a 64-bit value. */
static void
lc_le64(unsigned char *p, uint64_t v)
{
	int	i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

void
logchain_init(struct logchain *c, uint64_t seq, const unsigned char *head)
{
	c->seq = seq;
	if (head != NULL)
		memcpy(c->head, head, LOGCHAIN_LEN);
	else
		memset(c->head, 0, LOGCHAIN_LEN);
}

/*
 * head' = SHA-256(head || seq || ts || type length || type || data): the
 * record as the log means it (little-endian integers, one length byte),
 * not as one file happens to hold it.
 */
#ifdef HAVE_LIBCRYPTO
/*
 * OpenSSL's SHA-256 through its plain interface: the EVP one costs more
 * in calls than the hash of a small record does (bench-disklog).
 */
void
logchain_add(struct logchain *c, uint64_t seq, int64_t ts_ms,
    const char *type, size_t type_len, const char *data, size_t data_len)
{
	SHA256_CTX	st;
	unsigned char	b[17];

	lc_le64(b, seq);
	lc_le64(b + 8, (uint64_t)ts_ms);
	b[16] = (unsigned char)type_len;
	SHA256_Init(&st);
	SHA256_Update(&st, c->head, LOGCHAIN_LEN);
	SHA256_Update(&st, b, sizeof b);
	SHA256_Update(&st, type, type_len);
	SHA256_Update(&st, data, data_len);
	SHA256_Final(c->head, &st);
	c->seq = seq;
}
#else
void
logchain_add(struct logchain *c, uint64_t seq, int64_t ts_ms,
    const char *type, size_t type_len, const char *data, size_t data_len)
{
	crypto_hash_sha256_state	 st;
	unsigned char			 b[17];

	lc_le64(b, seq);
	lc_le64(b + 8, (uint64_t)ts_ms);
	b[16] = (unsigned char)type_len;
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, c->head, LOGCHAIN_LEN);
	crypto_hash_sha256_update(&st, b, sizeof b);
	crypto_hash_sha256_update(&st, (const unsigned char *)type, type_len);
	crypto_hash_sha256_update(&st, (const unsigned char *)data, data_len);
	crypto_hash_sha256_final(&st, c->head);
	c->seq = seq;
}
#endif

void
logchain_hex(const unsigned char *b, size_t len, char *out)
{
	static const char	 x[] = "0123456789abcdef";
	size_t			 i;

	for (i = 0; i < len; i++) {
		out[2 * i] = x[b[i] >> 4];
		out[2 * i + 1] = x[b[i] & 15];
	}
	out[2 * len] = '\0';
}

int
logchain_unhex(const char *s, unsigned char *out, size_t len)
{
	size_t	i;
	int	hi, lo;

	if (s == NULL || strlen(s) != 2 * len)
		return -1;
	for (i = 0; i < len; i++) {
#define LC_NIB(ch) ((ch) >= '0' && (ch) <= '9' ? (ch) - '0' : \
	(ch) >= 'a' && (ch) <= 'f' ? (ch) - 'a' + 10 : \
	(ch) >= 'A' && (ch) <= 'F' ? (ch) - 'A' + 10 : -1)
		hi = LC_NIB(s[2 * i]);
		lo = LC_NIB(s[2 * i + 1]);
#undef LC_NIB
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

void
logchain_keypair(const unsigned char seed[LOGCHAIN_SEED_LEN],
    unsigned char pk[LOGCHAIN_PK_LEN], unsigned char sk[LOGCHAIN_SK_LEN])
{
	crypto_sign_seed_keypair(pk, sk, seed);
}

/* What a signature covers: a tag, the log's id, the seq, the head. */
static void
lc_message(unsigned char m[16 + 8 + 8 + LOGCHAIN_LEN], uint64_t log_id,
    const struct logchain *c)
{
	memcpy(m, "gbr-log-head-v1", 16);
	lc_le64(m + 16, log_id);
	lc_le64(m + 24, c->seq);
	memcpy(m + 32, c->head, LOGCHAIN_LEN);
}

void
logchain_sign(const unsigned char sk[LOGCHAIN_SK_LEN], uint64_t log_id,
    const struct logchain *c, unsigned char sig[LOGCHAIN_SIG_LEN])
{
	unsigned char	m[16 + 8 + 8 + LOGCHAIN_LEN];

	lc_message(m, log_id, c);
	crypto_sign_detached(sig, NULL, m, sizeof m, sk);
}

int
logchain_check(const unsigned char pk[LOGCHAIN_PK_LEN], uint64_t log_id,
    const struct logchain *c, const unsigned char sig[LOGCHAIN_SIG_LEN])
{
	unsigned char	m[16 + 8 + 8 + LOGCHAIN_LEN];

	lc_message(m, log_id, c);
	return crypto_sign_verify_detached(sig, m, sizeof m, pk) == 0;
}
