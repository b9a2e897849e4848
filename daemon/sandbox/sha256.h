/*
 * SHA-256, through libsodium. The sandbox uses it to pin the content a
 * human was shown in an approval (sandbox.h), so that an approved write
 * goes only to the file as it was then. A thin wrapper so that callers
 * need neither libsodium's names nor its initialisation.
 */
#ifndef GBRD_SHA256_H
#define GBRD_SHA256_H

#include <stddef.h>

#define SHA256_LEN	32	/* bytes of a digest */
#define SHA256_HEX	(2 * SHA256_LEN + 1)	/* hex digest and its NUL */

/* The digest of one buffer. */
void	sha256_buf(const void *, size_t, unsigned char out[SHA256_LEN]);
/* A digest as lowercase hex, NUL-terminated. */
void	sha256_hex(const unsigned char d[SHA256_LEN], char out[SHA256_HEX]);

#endif
