/*
 * Unit tests for the disk log's hash chain (store/logchain.c): heads
 * against values computed independently (Python's hashlib over the same
 * bytes, so the definition in doc/DISKLOG.md is what the code does), a
 * change anywhere changing the head, hex both ways and its malformed
 * inputs, and Ed25519 signatures: good, another key, another head,
 * another log.
 */
#include "gbr-config.h"

#include <stdint.h>
#include <string.h>

#include "logchain.h"
#include "unit.h"

/* hashlib: h = sha256(h + pack('<QQB', seq, ts, len(t)) + t + d). */
#define HEAD1 "42c601ce8c095c71e065509ec1f0b7c2233bfbaa8f1b9a6ab4196cc1d0cec7c8"
#define HEAD2 "d710bef00d387f8f05980af0020785168486f6b26f30997f5406f0e6364bfadb"

static void
add(struct logchain *c, uint64_t seq, const char *type, const char *data)
{
	logchain_add(c, seq, 1700000000000LL + (int64_t)seq, type,
	    strlen(type), data, strlen(data));
}

static void
test_heads(void)
{
	struct logchain	 c, d;
	char		 hex[LOGCHAIN_HEX];

	logchain_init(&c, 0, NULL);
	add(&c, 1, "user.test", "{\"i\":1}");
	logchain_hex(c.head, LOGCHAIN_LEN, hex);
	CHECK(c.seq == 1 && unit_same(hex, HEAD1), "the head after seq 1");
	add(&c, 2, "log.chain", "{\"upto\":1}");
	logchain_hex(c.head, LOGCHAIN_LEN, hex);
	CHECK(c.seq == 2 && unit_same(hex, HEAD2), "the head after seq 2");

	/* One byte of data, the type, the seq, the time: each changes it. */
	logchain_init(&d, 0, NULL);
	add(&d, 1, "user.test", "{\"i\":2}");
	logchain_hex(d.head, LOGCHAIN_LEN, hex);
	CHECK(strcmp(hex, HEAD1) != 0, "another byte of data, another head");
	logchain_init(&d, 0, NULL);
	add(&d, 1, "user.tesu", "{\"i\":1}");
	CHECK(memcmp(d.head, c.head, LOGCHAIN_LEN) != 0, "another type");
	logchain_init(&d, 0, NULL);
	logchain_add(&d, 1, 1700000000002LL, "user.test", 9, "{\"i\":1}", 7);
	logchain_hex(d.head, LOGCHAIN_LEN, hex);
	CHECK(strcmp(hex, HEAD1) != 0, "another time, another head");
	/* A chain started from a head goes on as the whole one did. */
	logchain_init(&d, 0, NULL);
	add(&d, 1, "user.test", "{\"i\":1}");
	logchain_init(&c, 1, d.head);
	add(&c, 2, "log.chain", "{\"upto\":1}");
	logchain_hex(c.head, LOGCHAIN_LEN, hex);
	CHECK(unit_same(hex, HEAD2), "a chain resumed from a snapshot's head");
}

static void
test_hex(void)
{
	unsigned char	b[4];
	char		hex[9];

	CHECK(logchain_unhex("00ff7A1b", b, 4) == 0 && b[0] == 0 &&
	    b[1] == 0xff && b[2] == 0x7a && b[3] == 0x1b, "hex in");
	logchain_hex(b, 4, hex);
	CHECK(unit_same(hex, "00ff7a1b"), "hex out");
	CHECK(logchain_unhex("00ff7a1", b, 4) == -1, "too short");
	CHECK(logchain_unhex("00ff7a1bb", b, 4) == -1, "too long");
	CHECK(logchain_unhex("00ff7a1g", b, 4) == -1, "not hex");
	CHECK(logchain_unhex(NULL, b, 4) == -1, "none");
}

static void
test_signatures(void)
{
	unsigned char	 seed[LOGCHAIN_SEED_LEN], pk[LOGCHAIN_PK_LEN];
	unsigned char	 sk[LOGCHAIN_SK_LEN], pk2[LOGCHAIN_PK_LEN];
	unsigned char	 sk2[LOGCHAIN_SK_LEN], sig[LOGCHAIN_SIG_LEN];
	struct logchain	 c, other;

	memset(seed, 7, sizeof seed);
	logchain_keypair(seed, pk, sk);
	seed[0] = 8;
	logchain_keypair(seed, pk2, sk2);
	logchain_init(&c, 0, NULL);
	add(&c, 1, "user.test", "{\"i\":1}");
	logchain_sign(sk, 42, &c, sig);
	CHECK(logchain_check(pk, 42, &c, sig), "a good signature holds");
	CHECK(!logchain_check(pk2, 42, &c, sig), "not for another key");
	CHECK(!logchain_check(pk, 43, &c, sig), "not for another log");
	other = c;
	other.head[5] ^= 1;
	CHECK(!logchain_check(pk, 42, &other, sig), "not for another head");
	other = c;
	other.seq = 2;
	CHECK(!logchain_check(pk, 42, &other, sig), "not for another seq");
	sig[10] ^= 0x40;
	CHECK(!logchain_check(pk, 42, &c, sig), "a flipped bit of it fails");
}

int
main(void)
{
	test_heads();
	test_hex();
	test_signatures();
	return unit_done();
}
