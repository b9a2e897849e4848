/*
 * Damage in the disk log, found at open by the replay (disklog-replay.c)
 * or the snapshot restore (disklog-snapshot.c): the message that refuses
 * the start and names the repair command, and gbrd --repair itself, which
 * keeps the good part of a damaged segment (a copy), moves the damaged
 * files into STATE/log/damaged and never deletes anything. Deciding what
 * is damaged is not this file's (logscan judges the bytes); cutting a torn
 * tail, which is not damage but the end of a crash, is the replay's.
 */
#include "gbr-config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "disklog-int.h"
#include "log.h"
#include "logfmt.h"
#include "logscan.h"
#include "paths.h"
#include "xmalloc.h"

/* Moves a file into STATE/log/damaged under a name that says when. */
int
dl_move_aside(const char *name, json_t *moved, char **cause)
{
	char	*to;

	if (mkdirat(dl.dirfd, "damaged", 0700) != 0 && errno != EEXIST) {
		*cause = xasprintf("cannot create %s/damaged: %s", dl.dir,
		    strerror(errno));
		return -1;
	}
	to = xasprintf("damaged/%s.%lld", name, (long long)time(NULL));
	if (renameat(dl.dirfd, name, dl.dirfd, to) != 0) {
		*cause = xasprintf("cannot move %s/%s to %s/%s: %s", dl.dir,
		    name, dl.dir, to, strerror(errno));
		free(to);
		return -1;
	}
	log_warn("disk log: moved %s/%s to %s/%s", dl.dir, name, dl.dir, to);
	json_array_append_new(moved, json_string(to));
	free(to);
	return 0;
}

/* Copies the first len bytes of the moved-aside file into a new one named name. */
static int
dl_copy_prefix(const char *from, const char *name, uint64_t len, char **cause)
{
	char		 buf[65536];
	uint64_t	 off = 0;
	long long	 n;
	int		 in, out;

	in = openat(dl.dirfd, from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	out = openat(dl.dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	if (in == -1 || out == -1)
		goto fail;
	while (off < len) {
		n = logscan_pread(in, buf, len - off < sizeof buf ?
		    (size_t)(len - off) : sizeof buf, off);
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			goto fail;
		}
		if (dl_pwrite_all(out, buf, (size_t)n, off) != 0)
			goto fail;
		off += (uint64_t)n;
	}
	if (dl_datasync(out) != 0)
		goto fail;
	close(in);
	close(out);
	return 0;
fail:
	*cause = xasprintf("cannot copy the good part of %s/%s: %s", dl.dir,
	    name, strerror(errno));
	if (in != -1)
		close(in);
	if (out != -1)
		close(out);
	return -1;
}

/* Forgets the listed segments from the n-th on (their names too). */
void
dl_dir_cut(struct logscan_dir *d, size_t n)
{
	while (d->nsegs > n)
		free(d->segs[--d->nsegs].name);
}

/*
 * --repair: keeps segment i up to good_end (a copy; the damaged original is
 * moved aside) and moves every later segment aside. Never deletes.
 */
int
dl_repair(struct logscan_dir *d, size_t i, uint64_t good_end, int header_ok,
    const char *why, char **cause)
{
	json_t	*moved = json_array();
	char	*aside;
	size_t	 j;

	for (j = d->nsegs; j > i + 1; j--) {
		if (dl_move_aside(d->segs[j - 1].name, moved, cause) != 0)
			goto fail;
	}
	if (dl_move_aside(d->segs[i].name, moved, cause) != 0)
		goto fail;
	if (header_ok && good_end > LOGFMT_HEADER_SIZE) {
		aside = xstrdup(json_string_value(json_array_get(moved,
		    json_array_size(moved) - 1)));
		if (dl_copy_prefix(aside, d->segs[i].name, good_end,
		    cause) != 0) {
			free(aside);
			goto fail;
		}
		free(aside);
	}
	(void)fsync(dl.dirfd);
	json_decref(dl.repaired);
	dl.repaired = json_pack("{s:s, s:s, s:I, s:o}", "file", d->segs[i].name,
	    "why", why, "kept_bytes", (json_int_t)(header_ok ? good_end : 0),
	    "moved", moved);
	return 0;
fail:
	json_decref(moved);
	return -1;
}

/* The message that refuses a start. */
char *
dl_refuse(const char *file, uint64_t offset, const char *why, uint64_t good)
{
	char	*state = paths_dirname(dl.dir), *msg;

	msg = xasprintf("the disk log is damaged: %s/%s at offset %" PRIu64
	    ": %s. gbrd will not start and skip records silently. To keep "
	    "every record up to seq %" PRIu64 " and move the damaged files "
	    "aside (into %s/damaged), run: gbrd --repair -S %s", dl.dir, file,
	    offset, why, good, dl.dir, state);
	free(state);
	return msg;
}
