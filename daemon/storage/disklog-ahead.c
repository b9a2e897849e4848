/*
 * Parse-ahead for the replay at open (disklog-replay.c judges the records
 * and applies them; this file only parses payloads ahead of it).
 *
 * Parsing the JSON payloads is nearly all of a replay's time, so for a
 * large segment a helper thread scans the same file with its own reader
 * and parses chunks of DL_PA_CHUNK records for the loop thread, which
 * takes their payloads in order. The two share the work as it
 * comes: of the next DL_PA_RING - 1 chunks ahead of the loop, the helper
 * claims the furthest one nobody has claimed, and the loop claims and
 * parses any chunk it reaches that the helper has not. So the helper works
 * well ahead, the loop rarely waits for it, and whichever thread is faster
 * (the loop also applies every record) does more.
 *
 * The loop's own scan stays the only judge of the file. The helper hops
 * over records to reach a chunk without checking them, then checks the
 * chunk's own records before it parses them; it only ever offers
 * payloads, taken for the seq and offset the loop itself found valid, and
 * whatever it did not parse (it stopped early, a record was not valid
 * JSON) the loop parses and judges itself. The helper frees what it
 * parsed once the loop is past it, so the two threads never free into
 * each other's malloc arena. It is joined before the segment's scan
 * result is acted on.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cpu.h"
#include "disklog-int.h"
#include "jsonfast.h"
#include "logfmt.h"
#include "logscan.h"
#include "xmalloc.h"

#define DL_PA_CHUNK	256		/* records per chunk */
#define DL_PA_RING	16		/* chunks the window holds */
#define DL_PA_MIN_BYTES	(256 * 1024)	/* smaller segments: no helper */
#define DL_PA_SPIN_NS	200000		/* the loop spins before it sleeps */

enum dl_pa_state {
	DL_PA_FREE = 0,
	DL_PA_BUSY,			/* the helper parses it */
	DL_PA_READY,			/* the helper parsed it */
	DL_PA_LOOP,			/* the loop parses it */
};

struct dl_pa_chunk {
	uint64_t	 k;		/* chunk number in the segment */
	int		 state;		/* enum dl_pa_state */
	unsigned	 n;		/* records the helper parsed */
	json_t		*p[DL_PA_CHUNK]; /* NULL: the loop parses it */
	uint64_t	 off[DL_PA_CHUNK]; /* where the helper found each */
};

struct dl_pa {
	pthread_t		 thr;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	int			 fd;
	uint64_t		 base;		/* the segment's first seq */
	uint64_t		 snap_seq;
	uint64_t		 first_k;	/* chunks before it: covered, the loop's */
	uint64_t		 loop_k;	/* the loop's chunk */
	int			 loop_mine;	/* ... which it parses itself */
	int			 stop;		/* the loop gave up: end now */
	int			 done;		/* the helper has ended */
	struct dl_pa_chunk	 ring[DL_PA_RING];
	/* The helper's own: chunk starts found so far, the segment's end. */
	uint64_t		*starts;
	uint64_t		 nstarts;
	uint64_t		 hop_pos, hop_seq;
	uint64_t		 nchunks;	/* UINT64_MAX until the end is seen */
};

/* Parses a payload to replay, or NULL if it needs none or is not JSON. */
static json_t *
dl_pa_parse(const struct logfmt_record *rec, uint64_t snap_seq)
{
	const struct disklog_module	*m;

	if (rec->seq <= snap_seq ||
	    (m = dl_module_for(rec->type, rec->type_len)) == NULL ||
	    m->replay == NULL)
		return NULL;
	return jsonfast_loadb(rec->data, rec->data_len, DL_JSON, NULL);
}

/* Frees what a chunk holds. */
static void
dl_pa_clear(struct dl_pa_chunk *c)
{
	unsigned	i;

	for (i = 0; i < c->n; i++)
		json_decref(c->p[i]);
	c->n = 0;
}

/*
 * The helper's claim: the furthest unclaimed chunk in the window, or -1.
 * A slot whose chunk the loop is past is free again. Under pa->mtx.
 */
static int64_t
dl_pa_claimable(struct dl_pa *pa)
{
	struct dl_pa_chunk	*c;
	uint64_t		 k;

	for (k = pa->loop_k + DL_PA_RING - 1; k > pa->loop_k; k--) {
		if (k >= pa->nchunks || k < pa->first_k)
			continue;
		c = &pa->ring[k % DL_PA_RING];
		if (c->state == DL_PA_FREE || c->k < pa->loop_k)
			return (int64_t)k;
	}
	return -1;
}

/*
 * Moves the helper's reader to the start of chunk k, hopping over records
 * unchecked and noting each chunk's start. Returns 0, or -1 at the end of
 * the segment (then nchunks is known) or at a record that cannot be hopped.
 */
static int
dl_pa_seek(struct dl_pa *pa, struct logscan_reader *rd, uint64_t k,
    uint64_t *pos)
{
	size_t	sz;

	while (pa->nstarts <= k) {
		if (pa->hop_seq - pa->base == pa->nstarts * DL_PA_CHUNK) {
			if (pa->hop_pos >= rd->size) {
				pa->nchunks = pa->nstarts;
				return -1;
			}
			pa->starts = xreallocarray(pa->starts, pa->nstarts + 1,
			    sizeof *pa->starts);
			pa->starts[pa->nstarts++] = pa->hop_pos;
			continue;
		}
		if ((sz = logscan_record_size_at(rd, pa->hop_pos)) == 0) {
			if (pa->hop_pos >= rd->size)
				pa->nchunks = pa->nstarts;
			return -1;
		}
		pa->hop_pos += sz;
		pa->hop_seq++;
	}
	*pos = pa->starts[k];
	return 0;
}

/* The helper: claims chunks ahead of the loop and parses them. */
static void *
dl_pa_main(void *arg)
{
	struct dl_pa		*pa = arg;
	struct dl_pa_chunk	*c;
	struct logscan_reader	 rd;
	struct logfmt_record	 rec;
	struct stat		 sb;
	const char		*why;
	uint64_t		 pos, seq;
	int64_t			 k;
	int			 st;

	if (fstat(pa->fd, &sb) != 0)
		goto out;
	logscan_reader_init(&rd, pa->fd, (uint64_t)sb.st_size);
	pa->hop_pos = LOGFMT_HEADER_SIZE;
	pa->hop_seq = pa->base;
	for (;;) {
		pthread_mutex_lock(&pa->mtx);
		while (!pa->stop && (k = dl_pa_claimable(pa)) < 0)
			pthread_cond_wait(&pa->cv, &pa->mtx);
		if (pa->stop) {
			pthread_mutex_unlock(&pa->mtx);
			break;
		}
		c = &pa->ring[k % DL_PA_RING];
		c->k = (uint64_t)k;
		c->state = DL_PA_BUSY;
		pthread_mutex_unlock(&pa->mtx);
		/* The loop reads p and n only once the chunk is ready. */
		dl_pa_clear(c);
		if (dl_pa_seek(pa, &rd, (uint64_t)k, &pos) == 0) {
			seq = pa->base + (uint64_t)k * DL_PA_CHUNK;
			while (c->n < DL_PA_CHUNK && pos < rd.size) {
				/* Checked: only a valid record is parsed. */
				if ((st = logscan_record_at(&rd, pos, &rec,
				    &why)) < 0 || st != LOGFMT_OK ||
				    rec.seq != seq)
					break;
				c->off[c->n] = pos;
				c->p[c->n++] = dl_pa_parse(&rec, pa->snap_seq);
				pos += rec.size;
				seq++;
			}
		}
		pthread_mutex_lock(&pa->mtx);
		__atomic_store_n(&c->state, DL_PA_READY, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&pa->cv);
		pthread_mutex_unlock(&pa->mtx);
		if (c->n == 0 && pa->nchunks == UINT64_MAX)
			break;	/* a record it cannot get past: the rest is the loop's */
	}
	logscan_reader_release(&rd);
out:
	pthread_mutex_lock(&pa->mtx);
	pa->done = 1;
	pthread_cond_broadcast(&pa->cv);
	pthread_mutex_unlock(&pa->mtx);
	return NULL;
}

/* Starts a helper for a segment worth one, or returns NULL. */
struct dl_pa *
dl_pa_start(const char *name, uint64_t base, uint64_t snap_seq,
    uint64_t covered)
{
	struct dl_pa	*pa;
	struct stat	 sb;
	int		 fd;

	if (osdep_cpu_count() < 2 || dl_nmodules == 0)
		return NULL;
	if ((fd = openat(dl.dirfd, name, O_RDONLY | O_CLOEXEC |
	    O_NOFOLLOW)) == -1)
		return NULL;
	if (fstat(fd, &sb) != 0 || sb.st_size < DL_PA_MIN_BYTES) {
		close(fd);
		return NULL;
	}
	pa = xcalloc(1, sizeof *pa);
	pa->fd = fd;
	pa->base = base;
	pa->snap_seq = snap_seq;
	/*
	 * Records the snapshot and the chain's head cover need neither a
	 * checksum nor a parse (disklog-replay.c): the loop hops over them
	 * itself, and the helper starts where the replay does.
	 */
	pa->first_k = covered >= base ? (covered + 1 - base) / DL_PA_CHUNK : 0;
	pa->nchunks = UINT64_MAX;
	/* The loop starts on chunk 0, its own. */
	pa->loop_mine = 1;
	pa->ring[0].state = DL_PA_LOOP;
	pthread_mutex_init(&pa->mtx, NULL);
	pthread_cond_init(&pa->cv, NULL);
	if (pthread_create(&pa->thr, NULL, dl_pa_main, pa) != 0) {
		pthread_cond_destroy(&pa->cv);
		pthread_mutex_destroy(&pa->mtx);
		close(fd);
		free(pa);
		return NULL;
	}
	return pa;
}

/*
 * Waits a little for the helper to finish a chunk without sleeping: it is
 * usually nearly done, and a sleep and a wake-up cost more than that.
 */
static void
dl_pa_spin(struct dl_pa_chunk *c)
{
	uint64_t	t0;
	unsigned	i;

	t0 = clock_mono_ns();
	for (i = 1; __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == DL_PA_BUSY;
	    i++) {
		if (i % 64 == 0 && clock_mono_ns() - t0 > DL_PA_SPIN_NS)
			return;
		osdep_cpu_relax();
	}
}

/*
 * The helper's chunk holding seq, ready, or NULL if the loop parses that
 * chunk itself. Called for every record of the segment, in order; on
 * reaching a new chunk it claims it, or waits for the helper's.
 */
static struct dl_pa_chunk *
dl_pa_chunk_of(struct dl_pa *pa, uint64_t seq)
{
	struct dl_pa_chunk	*c;
	uint64_t		 k;

	if (pa == NULL || seq < pa->base)
		return NULL;
	k = (seq - pa->base) / DL_PA_CHUNK;
	c = &pa->ring[k % DL_PA_RING];
	if (k != pa->loop_k) {
		/* A new chunk: the helper's if it claimed it, else ours. */
		pthread_mutex_lock(&pa->mtx);
		pa->loop_k = k;
		pa->loop_mine = !(c->k == k && (c->state == DL_PA_BUSY ||
		    c->state == DL_PA_READY));
		if (pa->loop_mine) {
			c->k = k;
			c->state = DL_PA_LOOP;
		}
		pthread_cond_broadcast(&pa->cv);	/* the window moved */
		pthread_mutex_unlock(&pa->mtx);
		if (!pa->loop_mine) {
			dl_pa_spin(c);
			pthread_mutex_lock(&pa->mtx);
			while (c->state != DL_PA_READY && !pa->done)
				pthread_cond_wait(&pa->cv, &pa->mtx);
			if (c->state != DL_PA_READY)
				pa->loop_mine = 1;
			pthread_mutex_unlock(&pa->mtx);
		}
	}
	/* Ready: the helper leaves it alone until the loop is past it. */
	return pa->loop_mine ? NULL : c;
}

/*
 * The slot of the record at seq and off if the helper checked it there
 * (and parsed it, when it needed parsing), or NULL.
 */
json_t **
dl_pa_slot(struct dl_pa *pa, uint64_t seq, uint64_t off)
{
	struct dl_pa_chunk	*c;
	uint64_t		 idx;

	if ((c = dl_pa_chunk_of(pa, seq)) == NULL)
		return NULL;
	idx = (seq - pa->base) % DL_PA_CHUNK;
	return idx < c->n && c->off[idx] == off ? &c->p[idx] : NULL;
}

/*
 * The helper's payload for the record at seq and off, or NULL if the loop
 * must parse it.
 */
json_t *
dl_pa_take(struct dl_pa *pa, uint64_t seq, uint64_t off)
{
	json_t	**p = dl_pa_slot(pa, seq, off);

	return p != NULL ? json_incref(*p) : NULL;
}

/* Stops and joins the helper, and frees what it parsed. */
void
dl_pa_end(struct dl_pa *pa)
{
	unsigned	i;

	if (pa == NULL)
		return;
	pthread_mutex_lock(&pa->mtx);
	pa->stop = 1;
	pthread_cond_broadcast(&pa->cv);
	pthread_mutex_unlock(&pa->mtx);
	pthread_join(pa->thr, NULL);
	for (i = 0; i < DL_PA_RING; i++)
		dl_pa_clear(&pa->ring[i]);
	pthread_cond_destroy(&pa->cv);
	pthread_mutex_destroy(&pa->mtx);
	close(pa->fd);
	free(pa->starts);
	free(pa);
}
