/*
 * search (see tool-file-int.h): a POSIX extended regular expression over
 * the files of the workspace and the read-only roots, or of one folder,
 * with an optional glob on the names. Bounds, since it runs on the event
 * loop: it reads files of at most TF_SEARCH_FILE_MAX bytes, at most
 * TF_SEARCH_FILES_MAX files and TF_SEARCH_BYTES_MAX bytes in all, returns
 * at most max_results matches, and stops after TF_SEARCH_MS of wall-clock
 * time. In gbrd it runs in slices of at most TF_SLICE_MS (and
 * TF_SLICE_FILES files, TF_SLICE_BYTES bytes), one per pass of the loop,
 * so other clients wait for a slice, never for a whole search; the
 * regular expression runs one line at a time on at most the first
 * TF_SEARCH_LINE_MAX bytes of the line: glibc's matcher can be quadratic
 * in the text it is given (measured: "a*b" over a 10 MB buffer took 21 s,
 * over the same text line by line 0.04 s), so bounding the line bounds
 * one call, and the clock is checked between lines. Back-references, the
 * one POSIX feature that is exponential, are refused.
 *
 * Like the other file tools it holds only fds the sandbox opened, or
 * opened below them with sandbox_open_child, which never follows a link.
 */
#include "gbr-config.h"

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#ifdef HAVE_TRE
#include <tre/regex.h>
#else
#include <regex.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "fault.h"
#include "pathgate.h"
#include "sandbox.h"
#include "tool.h"
#include "tool-file.h"
#include "tool-file-int.h"
#include "utf8.h"
#include "xmalloc.h"

#define TF_MATCH_TEXT_MAX	240	/* bytes of a matching line returned */

/* Names read, or merged, in one step of preparing a folder. */
#define TF_NAMES_STEP	1024

enum tf_names {
	TF_NAMES_READING,	/* readdir, a step at a time */
	TF_NAMES_SORTING,	/* a bottom-up merge sort, a step at a time */
	TF_NAMES_READY,
};

/*
 * One folder being searched: its names and where we are in them. A
 * folder may hold TF_DIR_NAMES_MAX names, whose reading and sorting took
 * about 100 ms in one go, so they are read and sorted a step at a time
 * too (tf_names_step): a merge sort whose order is qsort's with strcmp.
 * The names are kept end to end in one pool, found by their offsets:
 * 100,000 small blocks freed one by one made glibc consolidate them in
 * one 15 to 30 ms call at the next large free.
 */
struct tf_frame {
	DIR		 *d;
	char		 *pool;		/* every name, NUL-terminated */
	size_t		  plen;
	size_t		  pcap;
	size_t		 *names;	/* offsets into pool, sorted once ready */
	size_t		  n;
	size_t		  cap;
	size_t		  i;
	char		 *rel;		/* relative to the search base, "" at the top */
	enum tf_names	  state;
	size_t		 *tmp;		/* sorting: the pass being written */
	size_t		  width;	/* sorting: the length of the runs */
	size_t		  lo, a, b, o;	/* sorting: the pair, and where in it */
};

/* A folder to search from, opened through the sandbox when the call began. */
struct tf_root {
	int	 fd;		/* -1 once handed to the folder stack */
	char	*shown;		/* its display path */
};

/*
 * A search in progress. All the state lives here, not on the stack, so
 * that it can stop after any entry or any 64 lines of a file and go on
 * later from the same place (tf_search_run): the event loop runs it in
 * slices (tf_slice_cb). It holds only descriptors the sandbox opened or
 * opened below them with sandbox_open_child, never the sandbox itself,
 * which a reload may replace while the search runs.
 */
struct tf_search {
	struct tool_job	 job;		/* first: the registry's handle */
	regex_t		 re;
	char		 literal[1025];	/* a string every match contains */
	size_t		 literal_len;	/* 0: none */
	char		*glob;
	int		 glob_slash;
	size_t		 max_results;
	json_t		*matches;
	uint64_t	 bytes;
	size_t		 files;
	size_t		 skipped_binary;
	size_t		 skipped_large;
	size_t		 lines_cut;
	const char	*stop;		/* why the search stopped early, or NULL */
	uint64_t	 deadline;	/* clock_mono_ns */

	/* Where it is: the roots, the folder stack, the file being scanned. */
	struct tf_root	*roots;
	int		 nroots;
	int		 root;		/* the next root to open */
	struct tf_frame	 stack[TF_SEARCH_DEPTH_MAX];
	int		 depth;		/* -1: no folder open */
	int		 cut;		/* a folder of this root had too many names */
	const char	*prefix;	/* the open root's display path (borrowed) */
	char		*buf;		/* the file being scanned, or NULL */
	size_t		 blen;
	size_t		 pos;		/* where its next line begins */
	size_t		 line;		/* lines before pos */
	const char	*hit;		/* the next literal hit, or NULL */
	unsigned	 checked;	/* lines looked at in this file */
	char		*shown;		/* its display path */

	/* Run from the loop (NULL done: a synchronous call). */
	tool_done_cb	 done;
	void		*arg;
	int		 cancelled;
	int		 active;	/* on tf_active, else waiting */
	TAILQ_ENTRY(tf_search) entry;
};
TAILQ_HEAD(tf_search_list, tf_search);

/* What one slice may spend; a synchronous search has none. */
struct tf_slice {
	uint64_t	 end;		/* clock_mono_ns */
	size_t		 files;		/* left in this slice */
	uint64_t	 bytes;
};

/* A deadline ms milliseconds from now, in common/clock's nanoseconds. */
static uint64_t
tf_after_ms(long ms)
{
	return clock_mono_ns() + (uint64_t)ms * 1000000u;
}

/*
 * The wall-clock budget of a search: TF_SEARCH_MS, or the test hook
 * SEARCH_MS, for tests that check what a search finds on a machine (an
 * emulator, a loaded one) where reading the files takes longer.
 */
static long
tf_search_ms(void)
{
	static long	ms = -1;

	if (ms == -1)
		ms = fault_hook_long("SEARCH_MS", 1, 600000, TF_SEARCH_MS);
	return ms;
}

/* True once the wall-clock budget is spent. */
static int
tf_late(const struct tf_search *s)
{
	return clock_mono_ns() >= s->deadline;
}

/* True once the slice is spent (never for a synchronous search). */
static int
tf_slice_over(const struct tf_slice *sl)
{
	return sl != NULL && (sl->files == 0 || sl->bytes == 0 ||
	    clock_mono_ns() >= sl->end);
}

/* Forgets the file being scanned. */
static void
tf_file_end(struct tf_search *s)
{
	free(s->buf);
	free(s->shown);
	s->buf = s->shown = NULL;
}

/*
 * Matches one line of len bytes (no NUL needed at its end): REG_STARTEND
 * where the library has it (glibc), else a length-bounded regnexec (TRE on
 * Windows). Both give POSIX's leftmost-longest match. Returns regexec's.
 */
static int
tf_regexec_line(const regex_t *re, const char *p, size_t len)
{
	regmatch_t	m;

#ifdef REG_STARTEND
	m.rm_so = 0;
	m.rm_eo = (regoff_t)len;
	return regexec(re, p, 1, &m, REG_STARTEND);
#else
	return regnexec(re, p, len, 1, &m, 0);
#endif
}

/*
 * Scans the open file's lines from where it stopped. Returns 1 if the
 * slice ran out first (call again to go on), 0 once the file is done or
 * the search stopped. Every 64 lines, or 16 KiB of long ones, it looks at
 * the clock (a few tens of nanoseconds): the deadline, then the slice.
 */
static int
tf_search_text(struct tf_search *s, const struct tf_slice *sl)
{
	const char	*buf = s->buf, *end = s->buf + s->blen, *nl, *q;
	const char	*p = buf + s->pos, *hit = s->hit, *look = p;
	size_t		 line = s->line, ll, tl;
	int		 lossy;

	if (s->literal_len > 0 && s->pos == 0 && (hit = memmem(buf, s->blen,
	    s->literal, s->literal_len)) == NULL)
		return 0;
	for (; p < end; p = nl + 1) {
		if (s->literal_len > 0) {
			/* Only lines holding the required string can match. */
			if (hit < p && (hit = memmem(p, (size_t)(end - p),
			    s->literal, s->literal_len)) == NULL)
				return 0;
			for (q = p; (q = memchr(q, '\n', (size_t)(hit - q))) != NULL;
			    q++) {
				line++;
				p = q + 1;
			}
		}
		if ((++s->checked & 63) == 0 || p - look >= 16384) {
			look = p;
			if (tf_late(s)) {
				s->stop = "time";
				return 0;
			}
			if (tf_slice_over(sl)) {
				/* Go on from this line next time. */
				s->pos = (size_t)(p - buf);
				s->line = line;
				s->hit = hit;
				return 1;
			}
		}
		line++;
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		ll = (size_t)(nl - p);
		if (ll > TF_SEARCH_LINE_MAX) {
			ll = TF_SEARCH_LINE_MAX;
			s->lines_cut++;
		}
		if (tf_regexec_line(&s->re, p, ll) != 0)
			continue;
		tl = ll;
		if (tl > 0 && p[tl - 1] == '\r')
			tl--;
		if (tl > TF_MATCH_TEXT_MAX)
			tl = utf8_cut(p, TF_MATCH_TEXT_MAX);
		lossy = 0;
		json_array_append_new(s->matches, json_pack("{s:s, s:I, s:o}",
		    "path", s->shown, "line", (json_int_t)line,
		    "text", tf_json_text(p, tl, &lossy)));
		if (json_array_size(s->matches) >= s->max_results) {
			s->stop = "max_results";
			return 0;
		}
		if (nl == end)
			break;
	}
	return 0;
}

/*
 * Opens and reads one regular file below a searched folder; its text is
 * then scanned from s->buf. shown (taken) is its display path.
 */
static void
tf_search_file(struct tf_search *s, struct tf_slice *sl, int dirfd,
    const char *name, const char *rel, char *shown)
{
	struct stat	 st;
	const char	*base;
	char		*buf;
	size_t		 used = 0;
	ssize_t		 n;
	int		 fd;

	if (s->glob != NULL) {
		base = strrchr(rel, '/');
		base = base != NULL ? base + 1 : rel;
		if (!pathgate_glob_match(s->glob, s->glob_slash ? rel : base, 0))
			goto skip;
	}
	if (s->files >= TF_SEARCH_FILES_MAX) {
		s->stop = "files";
		goto skip;
	}
	if ((fd = sandbox_open_child(dirfd, name, 0, &st)) == -1)
		goto skip;
	if (st.st_size > TF_SEARCH_FILE_MAX) {
		s->skipped_large++;
		close(fd);
		goto skip;
	}
	if (s->bytes + (uint64_t)st.st_size > TF_SEARCH_BYTES_MAX) {
		s->stop = "bytes";
		close(fd);
		goto skip;
	}
	s->files++;
	buf = xmalloc((size_t)st.st_size + 1);
	while (used < (size_t)st.st_size) {
		n = read(fd, buf + used, (size_t)st.st_size - used);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	/* REG_STARTEND bounds the match, but a NUL end keeps strlen-based
	 * regexec wrappers (ASan's interceptor) inside the buffer too. */
	buf[used] = '\0';
	s->bytes += used;
	if (sl != NULL) {
		sl->files--;
		sl->bytes = sl->bytes > used ? sl->bytes - used : 0;
	}
	if (memchr(buf, '\0', used) != NULL) {
		s->skipped_binary++;
		free(buf);
		goto skip;
	}
	s->buf = buf;
	s->blen = used;
	s->pos = s->line = 0;
	s->hit = NULL;
	s->checked = 0;
	s->shown = shown;
	return;

skip:
	free(shown);
}

/*
 * One bounded step of reading and sorting a folder's names: up to
 * TF_NAMES_STEP names read, or merged. Sets *cut if the folder has more
 * than TF_DIR_NAMES_MAX names. Returns 1 once the names are ready.
 */
static int
tf_names_step(struct tf_frame *f, int *cut)
{
	struct dirent	*e;
	size_t		 k, len, mid, hi, *swap;

	switch (f->state) {
	case TF_NAMES_READING:
		for (k = 0; k < TF_NAMES_STEP; k++) {
			if ((e = readdir(f->d)) == NULL)
				break;
			if (strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			if (f->n == TF_DIR_NAMES_MAX) {
				*cut = 1;
				break;
			}
			if (f->n == f->cap) {
				f->cap = f->cap == 0 ? 64 : f->cap * 2;
				f->names = xreallocarray(f->names, f->cap,
				    sizeof *f->names);
			}
			len = strlen(e->d_name) + 1;
			while (f->pcap - f->plen < len) {
				f->pcap = f->pcap == 0 ? 4096 : f->pcap * 2;
				f->pool = xreallocarray(f->pool, 1, f->pcap);
			}
			memcpy(f->pool + f->plen, e->d_name, len);
			f->names[f->n++] = f->plen;
			f->plen += len;
		}
		if (k < TF_NAMES_STEP) {
			f->state = TF_NAMES_SORTING;
			f->width = 1;
			f->lo = f->a = f->b = f->o = 0;
			if (f->n > 1)
				f->tmp = xreallocarray(NULL, f->n, sizeof *f->tmp);
		}
		return 0;
	case TF_NAMES_SORTING:
		for (k = 0; k < TF_NAMES_STEP && f->width < f->n; k++) {
			/* Merge the pair of runs at lo into tmp, one name. */
			mid = f->lo + f->width < f->n ? f->lo + f->width : f->n;
			hi = mid + f->width < f->n ? mid + f->width : f->n;
			if (f->o == f->lo) {
				f->a = f->lo;
				f->b = mid;
			}
			if (f->b >= hi || (f->a < mid && strcmp(f->pool +
			    f->names[f->a], f->pool + f->names[f->b]) <= 0))
				f->tmp[f->o++] = f->names[f->a++];
			else
				f->tmp[f->o++] = f->names[f->b++];
			if (f->o < hi)
				continue;
			f->lo = hi;
			if (f->lo < f->n)
				continue;
			/* The pass is written: it is the input of the next. */
			swap = f->names;
			f->names = f->tmp;
			f->tmp = swap;
			f->lo = f->o = 0;
			f->width *= 2;
		}
		if (f->width < f->n)
			return 0;
		free(f->tmp);
		f->tmp = NULL;
		f->state = TF_NAMES_READY;
		return 1;
	case TF_NAMES_READY:
		break;
	}
	return 1;
}

/* Leaves the folder on top of the stack. */
static void
tf_pop(struct tf_search *s)
{
	struct tf_frame	*f = &s->stack[s->depth];

	free(f->names);
	free(f->pool);
	free(f->tmp);
	free(f->rel);
	closedir(f->d);
	s->depth--;
	/* The end of a root's tree: did a folder have too many names? */
	if (s->depth < 0 && s->cut && s->stop == NULL)
		s->stop = "folder_size";
}

/*
 * Opens a folder (takes fd) as the top of the stack, rel (taken) its path
 * from the root; its names are read by the next steps. Returns -1 (fd
 * closed, rel freed) if it cannot be read.
 */
static int
tf_push(struct tf_search *s, int fd, char *rel)
{
	struct tf_frame	*f = &s->stack[s->depth + 1];

	if ((f->d = fdopendir(fd)) == NULL) {
		close(fd);
		free(rel);
		return -1;
	}
	f->pool = NULL;
	f->names = f->tmp = NULL;
	f->plen = f->pcap = f->n = f->cap = f->i = 0;
	f->state = TF_NAMES_READING;
	f->rel = rel;
	s->depth++;
	return 0;
}

/*
 * Looks at the next name of the folder on top of the stack, or takes one
 * more step of reading its names.
 */
static void
tf_search_entry(struct tf_search *s, struct tf_slice *sl)
{
	struct tf_frame	*f = &s->stack[s->depth];
	struct stat	 st;
	const char	*name;
	char		*rel, *shown;
	int		 cfd;

	if (f->state != TF_NAMES_READY) {
		(void)tf_names_step(f, &s->cut);
		return;
	}
	if (f->i >= f->n) {
		tf_pop(s);
		return;
	}
	name = f->pool + f->names[f->i++];
	if (tf_late(s)) {
		s->stop = "time";
		return;
	}
	if (fstatat(dirfd(f->d), name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return;
	rel = f->rel[0] == '\0' ? xstrdup(name) :
	    xasprintf("%s/%s", f->rel, name);
	if (S_ISDIR(st.st_mode)) {
		if (!tf_skip_dir(name) && s->depth + 1 < TF_SEARCH_DEPTH_MAX &&
		    (cfd = sandbox_open_child(dirfd(f->d), name, 1, &st)) != -1) {
			(void)tf_push(s, cfd, rel);
			return;
		}
	} else if (S_ISREG(st.st_mode)) {
		/* Links are never followed: in or out, they are skipped. */
		shown = strcmp(s->prefix, ".") == 0 ? xstrdup(rel) :
		    xasprintf("%s/%s", s->prefix, rel);
		tf_search_file(s, sl, dirfd(f->d), name, rel, shown);
	}
	free(rel);
}

/*
 * Goes on with a search until it ends or the slice (NULL: none) is spent.
 * Returns 1 once it has ended: stopped at a bound, cancelled, or every
 * root searched.
 */
static int
tf_search_run(struct tf_search *s, struct tf_slice *sl)
{
	struct tf_root	*r;

	for (;;) {
		if (s->stop != NULL || s->cancelled)
			return 1;
		if (s->buf != NULL) {
			if (tf_search_text(s, sl))
				return 0;
			tf_file_end(s);
			continue;
		}
		if (tf_slice_over(sl))
			return 0;
		if (s->depth >= 0) {
			tf_search_entry(s, sl);
			continue;
		}
		/* The allowed root, then each read-only root outside it. */
		if (s->root >= s->nroots)
			return 1;
		r = &s->roots[s->root++];
		s->prefix = r->shown;
		s->cut = 0;
		(void)tf_push(s, r->fd, xstrdup(""));
		r->fd = -1;
	}
}

/* Frees a search and everything it holds (it is on no list). */
static void
tf_search_free(struct tf_search *s)
{
	int	i;

	while (s->depth >= 0) {
		s->cut = 0;
		tf_pop(s);
	}
	tf_file_end(s);
	for (i = 0; i < s->nroots; i++) {
		if (s->roots[i].fd != -1)
			close(s->roots[i].fd);
		free(s->roots[i].shown);
	}
	free(s->roots);
	regfree(&s->re);
	free(s->glob);
	json_decref(s->matches);
	free(s);
}

/* Adds a root to search; fd and shown are taken. */
static void
tf_search_root(struct tf_search *s, int fd, char *shown)
{
	s->roots = xreallocarray(s->roots, (size_t)s->nroots + 1,
	    sizeof *s->roots);
	s->roots[s->nroots].fd = fd;
	s->roots[s->nroots].shown = shown;
	s->nroots++;
}

/*
 * Finds a string that every match of an ERE must contain, to skip with
 * memmem the lines that cannot match: the longest run of plain characters
 * outside any group or bracket. Conservative: any '|' means none; a
 * character followed by '*', '?' or '{' may be absent, so it leaves the
 * run; GNU escapes such as \w end it. Writes it to out (NUL-terminated)
 * and returns its length, 0 if there is none worth using.
 */
static size_t
tf_required_literal(const char *p, char *out, size_t outsz)
{
	char	run[1025];
	size_t	rl = 0, best = 0;
	int	depth = 0;

	if (strchr(p, '|') != NULL || strlen(p) >= sizeof run)
		return 0;
	out[0] = '\0';
	for (;;) {
		char	c = *p;
		int	lit = 0;

		if (c == '\\' && p[1] != '\0' && strchr(".[]()*+?{}|^$\\/", p[1]) != NULL) {
			c = p[1];	/* an escaped operator is itself */
			p++;
			lit = depth == 0;
		} else if (c == '\\') {
			p += p[1] != '\0' ? 1 : 0;	/* \w, \b, ...: not plain */
		} else if (c == '(') {
			depth++;
		} else if (c == ')') {
			depth -= depth > 0;
		} else if (c == '[') {
			/* Skip the class: ']' first is a member, as is "[:x:]". */
			p++;
			if (*p == '^')
				p++;
			if (*p == ']')
				p++;
			while (*p != '\0' && *p != ']') {
				if (*p == '[' && (p[1] == ':' || p[1] == '.' ||
				    p[1] == '=')) {
					const char *e = strstr(p + 2, "]");

					p = e != NULL ? e : p + strlen(p) - 1;
				}
				p++;
			}
			if (*p == '\0')
				break;
		} else if (c != '\0' && strchr(".*+?{}^$", c) == NULL)
			lit = depth == 0;
		/* A following '*', '?' or '{' makes this character optional. */
		if (lit && p[1] != '\0' && strchr("*?{", p[1]) != NULL)
			lit = 0;
		if (lit) {
			run[rl++] = c;
			if (p[1] == '+') {
				/* Present at least once, but the run stops here. */
				lit = 0;
				p++;
			}
		}
		if (!lit || c == '\0') {
			if (rl > best && rl < outsz) {
				memcpy(out, run, rl);
				out[rl] = '\0';
				best = rl;
			}
			rl = 0;
		}
		if (*p == '\0')
			break;
		p++;
	}
	return best >= 3 ? best : 0;
}


/*
 * Checks search's arguments and sets up a search: the pattern compiled,
 * and every folder to search opened through the sandbox now. Returns the
 * new search, or NULL with *kind and *reason.
 */
static struct tf_search *
tf_search_begin(struct tool_ctx *ctx, json_t *args, enum gbr_err *kind,
    char **reason)
{
	struct sandbox_loc	 loc = { 0, NULL };
	struct tf_search	*s;
	const char		*pattern, *path, *glob, *why;
	char			 err[256];
	size_t			 len, plen, i;
	int			 r, fd, n;

	pattern = tf_str(args, "pattern", &len);
	if (len == 0 || len > 1024 || strlen(pattern) != len) {
		tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
		    "pattern must be 1 to 1024 bytes, without NUL");
		return NULL;
	}
	for (i = 0; i + 1 < len; i++) {
		if (pattern[i] == '\\' && pattern[i + 1] >= '1' &&
		    pattern[i + 1] <= '9') {
			tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS,
			    "back-references (\\1 to \\9) are not supported");
			return NULL;
		}
		if (pattern[i] == '\\')
			i++;
	}
	glob = tf_str(args, "glob", &len);
	if (glob != NULL && (strlen(glob) != len ||
	    pathgate_glob_check(glob, &why) != 0)) {
		tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS, "glob: %s",
		    strlen(glob) != len ? "holds a NUL" : why);
		return NULL;
	}
	s = xcalloc(1, sizeof *s);
	s->depth = -1;
	if ((r = regcomp(&s->re, pattern, REG_EXTENDED | REG_NEWLINE)) != 0) {
		regerror(r, &s->re, err, sizeof err);
		free(s);
		tf_fail(kind, reason, GBR_ERR_INVALID_PARAMS, "pattern: %s", err);
		return NULL;
	}
	if (glob != NULL) {
		s->glob = xstrdup(glob);
		s->glob_slash = strchr(glob, '/') != NULL;
	}
	s->literal_len = tf_required_literal(pattern, s->literal,
	    sizeof s->literal);
	s->max_results = (size_t)tf_int(args, "max_results", TF_SEARCH_RESULTS);
	s->matches = json_array();
	s->deadline = tf_after_ms(tf_search_ms());

	path = tf_str(args, "path", &plen);
	if (path != NULL) {
		if (sandbox_open_dir(ctx->sandbox, path, plen, &fd, &loc, kind,
		    reason) != 0) {
			tf_search_free(s);
			return NULL;
		}
		tf_search_root(s, fd, sandbox_display(ctx->sandbox, &loc));
		sandbox_loc_release(&loc);
		return s;
	}
	/* The allowed root, then each read-only root outside it. */
	for (n = 0; n < sandbox_nroots(ctx->sandbox); n++) {
		const char	*p = n == 0 ? "." :
		    sandbox_root_path(ctx->sandbox, n);

		if (n > 0 && sandbox_root_inside(ctx->sandbox, n) != NULL)
			continue;
		if (sandbox_open_dir(ctx->sandbox, p, strlen(p), &fd, &loc,
		    kind, reason) != 0) {
			free(*reason);
			*reason = NULL;
			continue;
		}
		tf_search_root(s, fd, sandbox_display(ctx->sandbox, &loc));
		sandbox_loc_release(&loc);
	}
	return s;
}

/* The result of a search that ended (a new reference). */
static json_t *
tf_search_result(struct tf_search *s)
{
	json_t	*result;

	result = json_pack("{s:O, s:I, s:I, s:I, s:I, s:b}",
	    "matches", s->matches,
	    "files_scanned", (json_int_t)s->files,
	    "bytes_scanned", (json_int_t)s->bytes,
	    "skipped_binary", (json_int_t)s->skipped_binary,
	    "skipped_large", (json_int_t)s->skipped_large,
	    "truncated", s->stop != NULL);
	if (s->stop != NULL)
		json_object_set_new(result, "truncated_reason",
		    json_string(s->stop));
	if (s->lines_cut > 0)
		json_object_set_new(result, "long_lines_cut",
		    json_integer((json_int_t)s->lines_cut));
	return result;
}

/*
 * search {pattern, path?, glob?, max_results?}, to the end at once: for
 * tool_file_call and the unit tests. gbrd runs it in slices instead.
 */
int
tf_search(struct tool_ctx *ctx, json_t *args, json_t **result,
    enum gbr_err *kind, char **reason)
{
	struct tf_search	*s;

	if ((s = tf_search_begin(ctx, args, kind, reason)) == NULL)
		return -1;
	while (!tf_search_run(s, NULL))
		;
	*result = tf_search_result(s);
	tf_search_free(s);
	return 0;
}

/*
 * Searches run by the loop. The active ones (at most TF_SEARCH_ACTIVE)
 * take turns, one slice per pass of the loop for all of them together,
 * so several searches stall the loop no longer than one; the others wait
 * in order, holding only their roots, and their clock starts when they
 * become active. A slice is rescheduled with a zero timer, never
 * event_active: libevent runs events made active during a pass in the
 * same pass, so the loop would never poll the sockets in between.
 */
static struct tf_search_list	 tf_active = TAILQ_HEAD_INITIALIZER(tf_active);
static struct tf_search_list	 tf_waiting = TAILQ_HEAD_INITIALIZER(tf_waiting);
static unsigned			 tf_nactive;
static struct event		*tf_ev;

/* Makes waiting searches active while there is room. */
static void
tf_search_promote(void)
{
	struct tf_search	*s;

	while (tf_nactive < TF_SEARCH_ACTIVE &&
	    (s = TAILQ_FIRST(&tf_waiting)) != NULL) {
		TAILQ_REMOVE(&tf_waiting, s, entry);
		s->deadline = tf_after_ms(tf_search_ms());
		s->active = 1;
		TAILQ_INSERT_TAIL(&tf_active, s, entry);
		tf_nactive++;
	}
}

/* Runs the next slice from the loop (see above). */
static void
tf_search_kick(void)
{
	struct timeval	now = { 0, 0 };

	if (!evtimer_pending(tf_ev, NULL))
		evtimer_add(tf_ev, &now);
}

/* Ends a search: off its list, its callback, freed. */
static void
tf_search_end(struct tf_search *s)
{
	json_t	*result;

	if (s->active) {
		TAILQ_REMOVE(&tf_active, s, entry);
		tf_nactive--;
	} else
		TAILQ_REMOVE(&tf_waiting, s, entry);
	if (s->cancelled)
		s->done(s->arg, 1, GBR_ERR_CANCELLED, "the search was cancelled",
		    NULL);
	else {
		result = tf_search_result(s);
		s->done(s->arg, 0, GBR_ERR_INTERNAL, NULL, result);
		json_decref(result);
	}
	tf_search_free(s);
}

/* One slice of the first active search, which then goes to the back. */
static void
tf_slice_cb(evutil_socket_t fd, short events, void *arg)
{
	struct tf_search	*s, *next;
	struct tf_slice		 sl;

	/* Cancelled ones end first, whether active or waiting. */
	for (s = TAILQ_FIRST(&tf_waiting); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->cancelled)
			tf_search_end(s);
	}
	if ((s = TAILQ_FIRST(&tf_active)) != NULL) {
		sl.end = tf_after_ms(TF_SLICE_MS);
		sl.files = TF_SLICE_FILES;
		sl.bytes = TF_SLICE_BYTES;
		if (tf_search_run(s, &sl))
			tf_search_end(s);
		else if (TAILQ_NEXT(s, entry) != NULL) {
			TAILQ_REMOVE(&tf_active, s, entry);
			TAILQ_INSERT_TAIL(&tf_active, s, entry);
		}
	}
	tf_search_promote();
	if (!TAILQ_EMPTY(&tf_active) || !TAILQ_EMPTY(&tf_waiting))
		tf_search_kick();
}

/* tool_job's cancel: the search ends at its next slice, done says cancelled. */
static void
tf_search_cancel(struct tool_job *job)
{
	struct tf_search	*s = (struct tf_search *)job;

	s->cancelled = 1;
	tf_search_kick();
}

/* The registry's asynchronous entry for search. */
int
tf_search_async(struct tool_ctx *ctx, const char *name, json_t *args,
    tool_output_cb out, tool_done_cb done, void *arg, struct tool_job **job,
    enum gbr_err *kind, char **reason, json_t **data)
{
	struct tf_search	*s;

	*data = NULL;
	if (tool_check(NULL, name, args, kind, reason) != 0)
		return -1;
	if ((s = tf_search_begin(ctx, args, kind, reason)) == NULL)
		return -1;
	s->job.cancel = tf_search_cancel;
	s->done = done;
	s->arg = arg;
	TAILQ_INSERT_TAIL(&tf_waiting, s, entry);
	tf_search_promote();
	tf_search_kick();
	if (job != NULL)
		*job = &s->job;
	return 0;
}

/* Sets up the timer that runs the slices on base's loop. */
int
tf_search_init(struct event_base *base, char **cause)
{
	if ((tf_ev = evtimer_new(base, tf_slice_cb, NULL)) == NULL) {
		*cause = xstrdup("event_new failed");
		return -1;
	}
	return 0;
}

/* Frees every search in flight; no callback runs. */
void
tf_search_shutdown(void)
{
	struct tf_search	*s;

	while ((s = TAILQ_FIRST(&tf_active)) != NULL) {
		TAILQ_REMOVE(&tf_active, s, entry);
		tf_search_free(s);
	}
	while ((s = TAILQ_FIRST(&tf_waiting)) != NULL) {
		TAILQ_REMOVE(&tf_waiting, s, entry);
		tf_search_free(s);
	}
	tf_nactive = 0;
	if (tf_ev != NULL)
		event_free(tf_ev);
	tf_ev = NULL;
}
