/*
 * gbrctl log: prints the disk log's records through log.read (with
 * --follow, then every new record as the daemon writes it), and gbrctl log
 * verify, which checks every segment and snapshot offline, straight from
 * the files and without the daemon, with the very decoding code the daemon
 * uses (protocol/logscan.c), so both give one verdict on a file.
 */
#include "gbr-config.h"

#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "jsonfast.h"
#include <sodium.h>

#include "logchain.h"
#include "paths.h"
#include "logscan.h"
#include "xmalloc.h"

/* Records asked for per log.read call. */
#define CTL_LOG_PAGE	1000

/* Parses a non-negative integer option. */
static int
ctl_log_number(const char *flag, const char *s, long long max, long long *out)
{
	char		*end;
	long long	 v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max) {
		fprintf(stderr, "gbrctl log: %s takes a number from 0 to %lld\n",
		    flag, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* Prints one record: a JSON line, or "seq time type data" for people. */
static void
ctl_log_print(struct ctl *ctl, json_t *rec)
{
	json_int_t	 ts = json_integer_value(json_object_get(rec, "ts_ms"));
	time_t		 t = (time_t)(ts / 1000);
	struct tm	 tm;
	char		 when[32], *data;

	if (ctl->json) {
		ctl_print_json(rec);
		return;
	}
	if (localtime_r(&t, &tm) == NULL ||
	    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(when, sizeof when, "?");
	data = json_dumps(json_object_get(rec, "data"), JSON_COMPACT |
	    JSON_ENCODE_ANY);
	printf("%8lld  %s.%03d  %-24s %s\n",
	    json_integer_value(json_object_get(rec, "seq")), when,
	    (int)(ts % 1000), json_string_value(json_object_get(rec, "type")),
	    data != NULL ? data : "?");
	free(data);
}

/* Connects for the commands that need the daemon (gbrctl main does not). */
static int
ctl_log_connect(struct ctl *ctl)
{
	char	*cause, name[64];
	int	 unreachable;

	snprintf(name, sizeof name, "gbrctl/%s", PACKAGE_VERSION);
	ctl->cl = client_connect(ctl->socket, CLIENT_NO_START, name, &cause,
	    &unreachable);
	if (ctl->cl == NULL) {
		fprintf(stderr, "gbrctl: %s\n", cause);
		free(cause);
		return unreachable ? CTL_EXIT_UNREACHABLE : CTL_EXIT_ERROR;
	}
	return CTL_EXIT_OK;
}

/* Prints events after a following log.read until the daemon stops. */
static int
ctl_log_follow(struct ctl *ctl)
{
	json_t		*msg, *params;
	const char	*type;
	char		*cause;

	for (;;) {
		fflush(stdout);
		if ((msg = client_read(ctl->cl, -1, &cause)) == NULL) {
			fprintf(stderr, "gbrctl: %s\n", cause != NULL ? cause :
			    "no more events");
			free(cause);
			return CTL_EXIT_UNREACHABLE;
		}
		params = json_object_get(msg, "params");
		type = json_string_value(json_object_get(params, "type"));
		if (type != NULL && strcmp(type, "log.record") == 0)
			ctl_log_print(ctl, json_object_get(params, "record"));
		else if (type != NULL && strcmp(type, "log.gap") == 0)
			fprintf(stderr, "gbrctl: records from seq %lld"
			    " were dropped after a snapshot; the log now starts "
			    "at %lld\n",
			    json_integer_value(json_object_get(params, "from")),
			    json_integer_value(json_object_get(params, "first_seq")));
		else if (type != NULL && (strcmp(type, "evicted") == 0 ||
		    strcmp(type, "error") == 0)) {
			fprintf(stderr, "gbrctl: the daemon stopped the stream: %s\n",
			    json_string_value(json_object_get(params, "reason")) ?
			    json_string_value(json_object_get(params, "reason")) :
			    type);
			json_decref(msg);
			return CTL_EXIT_ERROR;
		}
		json_decref(msg);
	}
}

/* gbrctl log [--follow] [--after SEQ] [--limit N] */
static int
ctl_log_read(struct ctl *ctl, int argc, char **argv)
{
	long long	 after = 0, limit = -1, page, got = 0;
	json_t		*res, *rec;
	size_t		 i;
	int		 follow = 0, r, more;

	for (i = 0; i < (size_t)argc; i++) {
		if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0)
			follow = 1;
		else if (strcmp(argv[i], "--after") == 0 && i + 1 < (size_t)argc) {
			if (ctl_log_number("--after", argv[++i], INT64_MAX,
			    &after) != 0)
				return CTL_EXIT_USAGE;
		} else if (strcmp(argv[i], "--limit") == 0 && i + 1 < (size_t)argc) {
			if (ctl_log_number("--limit", argv[++i], INT64_MAX,
			    &limit) != 0)
				return CTL_EXIT_USAGE;
		} else {
			fprintf(stderr, "usage: gbrctl log [--follow] [--after "
			    "SEQ] [--limit N]\n       gbrctl log verify "
			    "[--state-dir DIR]\n");
			return CTL_EXIT_USAGE;
		}
	}
	if ((r = ctl_log_connect(ctl)) != CTL_EXIT_OK)
		return r;
	do {
		page = CTL_LOG_PAGE;
		if (limit >= 0 && limit - got < page)
			page = limit - got;
		if (page == 0)
			break;
		r = ctl_call(ctl, "log.read", json_pack("{s:I, s:I, s:b}",
		    "after_seq", (json_int_t)after, "limit", (json_int_t)page,
		    "follow", follow), &res);
		if (r != CTL_EXIT_OK)
			return r;
		if (json_is_true(json_object_get(res, "gap")))
			fprintf(stderr, "gbrctl: records after seq %lld were "
			    "dropped after a snapshot; the log starts at "
			    "%lld\n", after, json_integer_value(
			    json_object_get(res, "first_seq")));
		json_array_foreach(json_object_get(res, "records"), i, rec) {
			ctl_log_print(ctl, rec);
			after = json_integer_value(json_object_get(rec, "seq"));
			got++;
		}
		more = json_is_true(json_object_get(res, "more"));
		json_decref(res);
	} while (!follow && more);
	if (follow)
		return ctl_log_follow(ctl);
	return CTL_EXIT_OK;
}

/* Heads of the chain remembered, to check a log.chain record against. */
#define CTL_CHAIN_RING	65536

struct ctl_verify {
	uint64_t	bad_json;	/* seq of a record whose data is not JSON */
	/* The chain (doc/DISKLOG.md, "The chain"). */
	struct logchain	 chain;
	int		 chain_known;	/* the head at chain.seq is known */
	uint64_t	 log_id;
	uint64_t	 good;		/* the last seq a head vouched for */
	uint64_t	 heads;		/* log.chain records checked */
	uint64_t	 signed_ok;	/* ... whose signature held */
	uint64_t	 broken;	/* seq of the log.chain that failed, or 0 */
	char		*why;		/* what failed (new) */
	const unsigned char *key;	/* --key, or NULL */
	unsigned char	(*ring)[LOGCHAIN_LEN];
};

/* A failed check of the chain: the first one is kept. */
static void
ctl_chain_fail(struct ctl_verify *v, uint64_t seq, char *why)
{
	if (v->broken != 0) {
		free(why);
		return;
	}
	v->broken = seq;
	v->why = why;
}

/* Checks a head a record or a snapshot carries against the chain. */
static void
ctl_chain_check(struct ctl_verify *v, uint64_t at, json_t *o,
    const char *seqname)
{
	struct logchain	 c;
	unsigned char	 head[LOGCHAIN_LEN], sig[LOGCHAIN_SIG_LEN];
	unsigned char	 pk[LOGCHAIN_PK_LEN];
	const char	*s;
	uint64_t	 upto;

	upto = (uint64_t)json_integer_value(json_object_get(o, seqname));
	if (logchain_unhex(json_string_value(json_object_get(o, "head")), head,
	    sizeof head) != 0) {
		ctl_chain_fail(v, at, xasprintf("the head recorded at seq %"
		    PRIu64 " is malformed", at));
		return;
	}
	if (strcmp(seqname, "upto") == 0 && upto >= at) {
		/* A head covers records before it, never itself or later. */
		ctl_chain_fail(v, at, xasprintf("the chain is broken between "
		    "seq %" PRIu64 " and seq %" PRIu64 ": the head recorded at "
		    "seq %" PRIu64 " claims to cover seq %" PRIu64 " (records "
		    "were removed or moved)", v->good + 1, at, at, upto));
		return;
	}
	if (!v->chain_known || upto > v->chain.seq ||
	    v->chain.seq - upto >= CTL_CHAIN_RING)
		return;		/* nothing to compare it with */
	if (memcmp(v->ring[upto % CTL_CHAIN_RING], head, sizeof head) != 0) {
		ctl_chain_fail(v, at, xasprintf("the chain is broken between "
		    "seq %" PRIu64 " and seq %" PRIu64 ": the records there "
		    "are not the ones the head recorded at seq %" PRIu64
		    " covers (a record changed, removed, added or moved)",
		    v->good + 1, upto, at));
		return;
	}
	logchain_init(&c, upto, head);
	s = json_string_value(json_object_get(o, "sig"));
	if (v->key != NULL) {
		if (s == NULL || logchain_unhex(s, sig, sizeof sig) != 0) {
			ctl_chain_fail(v, at, xasprintf("the head recorded at "
			    "seq %" PRIu64 " is not signed", at));
			return;
		}
		if (!logchain_check(v->key, v->log_id, &c, sig)) {
			ctl_chain_fail(v, at, xasprintf("bad signature on the "
			    "head recorded at seq %" PRIu64 " (not made by "
			    "this key, or the head was changed)", at));
			return;
		}
		v->signed_ok++;
	} else if (s != NULL && logchain_unhex(json_string_value(
	    json_object_get(o, "key")), pk, sizeof pk) == 0 &&
	    logchain_unhex(s, sig, sizeof sig) == 0) {
		/* Without --key, at least the signature must hold for its key. */
		if (!logchain_check(pk, v->log_id, &c, sig)) {
			ctl_chain_fail(v, at, xasprintf("bad signature on the "
			    "head recorded at seq %" PRIu64, at));
			return;
		}
		v->signed_ok++;
	}
	v->heads++;
	v->good = upto;
}

/* logscan callback: the data of each record must be JSON. */
static int
ctl_verify_cb(void *arg, const struct logfmt_record *rec, uint64_t off)
{
	struct ctl_verify	*v = arg;
	json_error_t		 jerr;
	json_t			*data;

	/* As gbrd reads it back (jansson writes a NUL byte as \u0000). */
	if ((data = jsonfast_loadb(rec->data, rec->data_len, JSON_ALLOW_NUL,
	    &jerr)) == NULL) {
		v->bad_json = rec->seq;
		return 1;
	}
	if (v->chain_known && rec->seq <= v->chain.seq) {
		json_decref(data);
		return 0;	/* before the snapshot's head */
	}
	if (v->chain_known && rec->seq != v->chain.seq + 1)
		v->chain_known = 0;	/* a hole: the seq checks report it */
	/* A head covers records before it: check it first. */
	if (rec->type_len == strlen(LOGCHAIN_ANCHOR_TYPE) &&
	    memcmp(rec->type, LOGCHAIN_ANCHOR_TYPE, rec->type_len) == 0)
		ctl_chain_check(v, rec->seq, data, "upto");
	if (v->chain_known) {
		logchain_add(&v->chain, rec->seq, rec->ts_ms, rec->type,
		    rec->type_len, rec->data, rec->data_len);
		memcpy(v->ring[rec->seq % CTL_CHAIN_RING], v->chain.head,
		    LOGCHAIN_LEN);
	}
	json_decref(data);
	return 0;
}

/* Reports one finding, for people or as JSON. */
static void
ctl_verify_note(struct ctl *ctl, json_t *files, const char *file,
    const char *verdict, const char *detail)
{
	if (ctl->json)
		json_array_append_new(files, json_pack("{s:s, s:s, s:s}", "file",
		    file, "verdict", verdict, "detail", detail));
	else
		printf("%-28s %-8s %s\n", file, verdict, detail);
}

/*
 * A segment the snapshot covers: its records make no state and are before
 * the chain's head, but it stays for log.read (under half the budget), so
 * its checksums are checked. Returns the problems found (0 or 1).
 */
static int
ctl_verify_covered(struct ctl *ctl, json_t *files, int dirfd,
    const struct logscan_file *seg, uint64_t log_id)
{
	struct logscan_seg	 res;
	char			 detail[256];

	logscan_segment(dirfd, seg->name, log_id, seg->seq, 0, NULL, NULL,
	    &res);
	if (res.status == LOGSCAN_OK) {
		snprintf(detail, sizeof detail, "%" PRIu64 " records, seq %"
		    PRIu64 "..%" PRIu64 ", covered by the snapshot (kept for "
		    "log.read)", res.records, res.hdr.first_seq, res.last_seq);
		ctl_verify_note(ctl, files, seg->name, "ok", detail);
		return 0;
	}
	ctl_verify_note(ctl, files, seg->name, res.status == LOGSCAN_IOERR ?
	    "UNREADABLE" : "CORRUPT", res.why);
	return 1;
}

/* A public key from --key: 64 hex digits, or a file holding them. */
static int
ctl_verify_key(const char *arg, unsigned char pk[LOGCHAIN_PK_LEN])
{
	char	 buf[2 * LOGCHAIN_PK_LEN + 2];
	FILE	*f;
	size_t	 n;

	if (logchain_unhex(arg, pk, LOGCHAIN_PK_LEN) == 0)
		return 0;
	if ((f = fopen(arg, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, " \t\r\n")] = '\0';
	return logchain_unhex(buf, pk, LOGCHAIN_PK_LEN);
}

/* The chain a snapshot's body carries (or none: it starts there). */
static void
ctl_verify_snapchain(struct ctl_verify *v, const char *body, size_t len,
    uint64_t seq)
{
	json_t		*root, *c;
	json_error_t	 jerr;
	unsigned char	 head[LOGCHAIN_LEN];

	logchain_init(&v->chain, seq, NULL);
	root = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
	c = json_object_get(root, "chain");
	if (json_is_object(c) && logchain_unhex(json_string_value(
	    json_object_get(c, "head")), head, sizeof head) == 0) {
		logchain_init(&v->chain, (uint64_t)json_integer_value(
		    json_object_get(c, "seq")), head);
		memcpy(v->ring[v->chain.seq % CTL_CHAIN_RING], head,
		    sizeof head);
		v->chain_known = 1;
		v->good = v->chain.seq;
		if (json_object_get(c, "sig") != NULL || v->key != NULL)
			ctl_chain_check(v, seq, c, "seq");
	}
	v->chain_known = 1;
	v->good = v->chain.seq;
	json_decref(root);
}

/* gbrctl log verify [--state-dir DIR] [--key PUB] */
static int
ctl_log_verify(struct ctl *ctl, int argc, char **argv)
{
	struct logscan_dir	 d;
	struct logscan_seg	 res;
	struct logfmt_snaphdr	 sh;
	struct ctl_verify	 v;
	const char		*state = ctl->state_dir;
	char			*dir, *cause, *body, *why, detail[320];
	uint64_t		 log_id = 0, snap_seq = 0, need = 0;
	size_t			 i, len, problems = 0;
	int			 dirfd, lockfd, live = 0, last;
	json_t			*files = json_array(), *summary;
	unsigned char		 pk[LOGCHAIN_PK_LEN];

	memset(&v, 0, sizeof v);
	for (i = 0; i < (size_t)argc; i++) {
		if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < (size_t)argc)
			state = argv[++i];
		else if (strcmp(argv[i], "--key") == 0 && i + 1 < (size_t)argc) {
			if (ctl_verify_key(argv[++i], pk) != 0) {
				fprintf(stderr, "gbrctl: --key: 64 hex digits "
				    "(an Ed25519 public key) or a file holding "
				    "them: %s\n", argv[i]);
				json_decref(files);
				return CTL_EXIT_USAGE;
			}
			v.key = pk;
		} else {
			fprintf(stderr, "usage: gbrctl log verify [--state-dir "
			    "DIR] [--key PUB]\n");
			json_decref(files);
			return CTL_EXIT_USAGE;
		}
	}
	dir = xasprintf("%s/log", state);
	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "gbrctl: %s: %s\n", dir, strerror(errno));
		free(dir);
		json_decref(files);
		return CTL_EXIT_ERROR;
	}
	/* A running daemon holds the lock: its last segment may be mid-write. */
	lockfd = openat(dirfd, "LOCK", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (lockfd != -1 && flock(lockfd, LOCK_SH | LOCK_NB) != 0 &&
	    errno == EWOULDBLOCK)
		live = 1;
	if (lockfd != -1)
		close(lockfd);
	if (logscan_list(dirfd, &d, &cause) != 0) {
		fprintf(stderr, "gbrctl: %s\n", cause);
		free(cause);
		free(dir);
		close(dirfd);
		json_decref(files);
		return CTL_EXIT_ERROR;
	}
	v.ring = xcalloc(CTL_CHAIN_RING, sizeof *v.ring);
	logchain_init(&v.chain, 0, NULL);
	v.chain_known = 1;
	if (!ctl->json)
		printf("disk log %s%s: %zu segment%s, %zu snapshot%s\n", dir,
		    live ? " (in use by a running gbrd)" : "", d.nsegs,
		    d.nsegs == 1 ? "" : "s", d.nsnaps, d.nsnaps == 1 ? "" : "s");

	/* The newest valid snapshot decides where the records must start. */
	for (i = d.nsnaps; i > 0; i--) {
		if (logscan_snapshot(dirfd, d.snaps[i - 1].name, &sh, &body, &len,
		    &why) != 0) {
			ctl_verify_note(ctl, files, d.snaps[i - 1].name, "DAMAGED",
			    why);
			free(why);
			problems++;
			continue;
		}
		if (snap_seq == 0) {
			snap_seq = sh.seq;
			log_id = v.log_id = sh.log_id;
			ctl_verify_snapchain(&v, body, len, sh.seq);
		}
		free(body);
		snprintf(detail, sizeof detail, "snapshot covering seq 1..%"
		    PRIu64 ", %zu bytes", sh.seq, len);
		ctl_verify_note(ctl, files, d.snaps[i - 1].name, "ok", detail);
	}
	for (i = 0; i < d.nsegs; i++) {
		last = i + 1 == d.nsegs;
		/* (Kept for the chain if it holds records after its head.) */
		if (i + 1 < d.nsegs && d.segs[i + 1].seq <= (v.chain.seq <
		    snap_seq ? v.chain.seq : snap_seq) + 1) {
			problems += ctl_verify_covered(ctl, files, dirfd,
			    &d.segs[i], log_id);
			continue;
		}
		if (need == 0 ? d.segs[i].seq > snap_seq + 1 :
		    (d.segs[i].seq != need && (d.segs[i].seq > snap_seq + 1 ||
		    need > snap_seq + 1))) {
			snprintf(detail, sizeof detail, "starts at seq %" PRIu64
			    " but seq %" PRIu64 " was expected (records are "
			    "missing)", d.segs[i].seq, need == 0 ? snap_seq + 1 :
			    need);
			ctl_verify_note(ctl, files, d.segs[i].name, "CORRUPT",
			    detail);
			problems++;
		}
		v.bad_json = 0;
		if (log_id == 0 && i == 0) {
			/* No snapshot: the log's id from the first header. */
			logscan_segment(dirfd, d.segs[i].name, 0, d.segs[i].seq,
			    last, NULL, NULL, &res);
			if (res.header_ok)
				v.log_id = res.hdr.log_id;
		}
		logscan_segment(dirfd, d.segs[i].name, log_id, d.segs[i].seq,
		    last, ctl_verify_cb, &v, &res);
		if (res.header_ok && log_id == 0)
			log_id = v.log_id = res.hdr.log_id;
		need = res.last_seq + 1;
		switch (res.status) {
		case LOGSCAN_OK:
			snprintf(detail, sizeof detail, "%" PRIu64 " records, "
			    "seq %" PRIu64 "..%" PRIu64 ", %" PRIu64 " bytes, %s",
			    res.records, res.hdr.first_seq, res.last_seq,
			    res.size, res.hdr.clean ? "sealed" : "open");
			ctl_verify_note(ctl, files, d.segs[i].name, "ok", detail);
			break;
		case LOGSCAN_TORN:
			if (live && last) {
				snprintf(detail, sizeof detail, "%s (the daemon "
				    "is writing here; not a problem)", res.why);
				ctl_verify_note(ctl, files, d.segs[i].name,
				    "ok", detail);
				break;
			}
			snprintf(detail, sizeof detail, "%s; gbrd cuts it at its "
			    "next start", res.why);
			ctl_verify_note(ctl, files, d.segs[i].name, "TORN", detail);
			problems++;
			break;
		case LOGSCAN_STOPPED:
			snprintf(detail, sizeof detail, "record seq %" PRIu64
			    " holds no valid JSON", v.bad_json);
			ctl_verify_note(ctl, files, d.segs[i].name, "CORRUPT",
			    detail);
			problems++;
			break;
		default:
			ctl_verify_note(ctl, files, d.segs[i].name,
			    res.status == LOGSCAN_IOERR ? "UNREADABLE" :
			    "CORRUPT", res.why);
			problems++;
			break;
		}
	}
	/* The chain: the first broken link, or how far the heads vouch. */
	if (v.broken != 0) {
		ctl_verify_note(ctl, files, "chain", "BROKEN", v.why);
		problems++;
	} else if (v.key != NULL && v.signed_ok == 0) {
		ctl_verify_note(ctl, files, "chain", "UNSIGNED", "no head signed "
		    "with this key was found");
		problems++;
	} else {
		snprintf(detail, sizeof detail, "%" PRIu64 " head%s checked (%"
		    PRIu64 " signed%s), records up to seq %" PRIu64 " vouched "
		    "for%s", v.heads, v.heads == 1 ? "" : "s", v.signed_ok,
		    v.key != NULL ? " with this key" : "", v.good,
		    need > v.good + 1 ? "; the later ones get a head at the "
		    "next one" : "");
		ctl_verify_note(ctl, files, "chain", "ok", detail);
	}
	free(v.why);
	free(v.ring);
	if (ctl->json) {
		summary = json_pack("{s:b, s:s, s:b, s:I, s:o}", "clean",
		    problems == 0, "dir", dir, "live", live, "problems",
		    (json_int_t)problems, "files", files);
		files = NULL;
		ctl_print_json(summary);
		json_decref(summary);
	} else if (problems == 0)
		printf("clean\n");
	else
		printf("%zu problem%s found%s\n", problems, problems == 1 ? "" :
		    "s", live ? "" : " (gbrd refuses to start on corruption; "
		    "gbrd --repair keeps the good part)");
	json_decref(files);
	logscan_dir_free(&d);
	close(dirfd);
	free(dir);
	return problems == 0 ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}

/*
 * gbrctl log keygen [FILE]: a new Ed25519 key to sign the disk log's
 * heads with: its seed (64 hex digits, mode 0600, never overwritten) in
 * FILE (default: log-signing.key in the user's gbr config folder, where
 * gbrd looks), its public key printed and written beside it (FILE.pub).
 * gbrd reads it at its next start.
 */
static int
ctl_log_keygen(int argc, char **argv)
{
	unsigned char	 seed[LOGCHAIN_SEED_LEN], pk[LOGCHAIN_PK_LEN];
	unsigned char	 sk[LOGCHAIN_SK_LEN];
	char		 hex[2 * LOGCHAIN_SK_LEN + 1], *path, *dir, *pub;
	FILE		*f;
	int		 fd;

	if (argc > 1) {
		fprintf(stderr, "usage: gbrctl log keygen [FILE]\n");
		return CTL_EXIT_USAGE;
	}
	if (argc == 1)
		path = xstrdup(argv[0]);
	else if ((dir = paths_user_config_dir()) == NULL) {
		fprintf(stderr, "gbrctl: no config folder; name a FILE\n");
		return CTL_EXIT_USAGE;
	} else {
		(void)mkdir(dir, 0700);
		path = xasprintf("%s/log-signing.key", dir);
		free(dir);
	}
	if (sodium_init() < 0) {
		fprintf(stderr, "gbrctl: libsodium cannot start\n");
		free(path);
		return CTL_EXIT_ERROR;
	}
	randombytes_buf(seed, sizeof seed);
	logchain_keypair(seed, pk, sk);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1 || (f = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "gbrctl: %s: %s\n", path, strerror(errno));
		if (fd != -1)
			close(fd);
		free(path);
		return CTL_EXIT_ERROR;
	}
	logchain_hex(seed, sizeof seed, hex);
	fprintf(f, "%s\n", hex);
	sodium_memzero(seed, sizeof seed);
	sodium_memzero(sk, sizeof sk);
	sodium_memzero(hex, sizeof hex);
	if (fclose(f) != 0) {
		fprintf(stderr, "gbrctl: %s: %s\n", path, strerror(errno));
		free(path);
		return CTL_EXIT_ERROR;
	}
	logchain_hex(pk, sizeof pk, hex);
	pub = xasprintf("%s.pub", path);
	if ((f = fopen(pub, "w")) != NULL) {
		fprintf(f, "%s\n", hex);
		fclose(f);
	}
	printf("%s\n", hex);
	fprintf(stderr, "gbrctl: the signing key is in %s (gbrd uses it from "
	    "its next start); the public key is above and in %s: keep a copy "
	    "elsewhere for gbrctl log verify --key\n", path, pub);
	free(pub);
	free(path);
	return CTL_EXIT_OK;
}

/* gbrctl log ...: verify offline, or read through the daemon. */
int
ctl_log(struct ctl *ctl, int argc, char **argv)
{
	if (argc > 0 && strcmp(argv[0], "verify") == 0)
		return ctl_log_verify(ctl, argc - 1, argv + 1);
	if (argc > 0 && strcmp(argv[0], "keygen") == 0)
		return ctl_log_keygen(argc - 1, argv + 1);
	return ctl_log_read(ctl, argc, argv);
}
