/*
 * SHA-256 (see sha256.h): libsodium's crypto_hash_sha256. libsodium's
 * hash functions need no sodium_init (only its random numbers do), so a
 * digest can be taken from any module at any time.
 */
#include "gbr-config.h"

#include <sodium.h>

#include "sha256.h"

/* The digest of one buffer. */
void
sha256_buf(const void *p, size_t len, unsigned char out[SHA256_LEN])
{
	(void)crypto_hash_sha256(out, p, (unsigned long long)len);
}

/* A digest as lowercase hex. */
void
sha256_hex(const unsigned char d[SHA256_LEN], char out[SHA256_HEX])
{
	(void)sodium_bin2hex(out, SHA256_HEX, d, SHA256_LEN);
}
