/* spool.c — the durable report outbox; see spool.h for the contract.
 *
 * Record layout (SPOOL_RECORD_SIZE bytes, host byte order: the file never
 * leaves the node):
 *
 *   u32 magic  u32 type  u32 crc32 (of the record with this field 0)  u32 0
 *   payload: HEADER  u64 epoch, u64 seq_next (every seq in the file and
 *                    every seq ever handed out is below the larger of it
 *                    and the last report's seq + 1)
 *            REPORT  u64 seq, char contract[48], i64 start, end,
 *                    page_seconds, carry_pns, cum_page_seconds,
 *                    pages_at_end, u32 final
 *            ACK     u64 seq
 *            ASIDE   u64 seq (refused by the exchange: not pending)
 *
 * Files written before cum_page_seconds and pages_at_end existed read
 * them as 0 (the record was zero-filled), which only means the first
 * report after the upgrade restarts the counters from that figure.
 */
#include "node-agent/spool.h"
#include "common/err.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPOOL_MAGIC 0x50535852u /* "RXSP" */

enum { REC_HEADER = 1, REC_REPORT = 2, REC_ACK = 3, REC_ASIDE = 4 };

struct rec {
	uint32_t magic, type, crc, zero;
	union {
		struct {
			uint64_t epoch, seq_next;
		} h;
		struct {
			uint64_t seq;
			char contract[SPOOL_CONTRACT_LEN];
			int64_t start, end, page_seconds, carry_pns;
			int64_t cum_page_seconds, pages_at_end;
			uint32_t final;
		} r;
		struct {
			uint64_t seq;
		} a;
		unsigned char pad[SPOOL_RECORD_SIZE - 16];
	} u;
};
_Static_assert(sizeof(struct rec) == SPOOL_RECORD_SIZE, "record size");

struct spool {
	char *path;
	int fd;
	uint64_t epoch, next_seq;
	int64_t nrec; /* records in the file */
	size_t dropped;
	int dropped_records; /* whole records of the torn tail */
	struct spool_report *items; /* every report in the file, seq order */
	int n, cap;
};

static uint32_t crc32(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint32_t c = 0xFFFFFFFFu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
	}
	return ~c;
}

static void seal(struct rec *r, uint32_t type)
{
	r->magic = SPOOL_MAGIC;
	r->type = type;
	r->zero = 0;
	r->crc = 0;
	r->crc = crc32(r, sizeof *r);
}

static int valid(const struct rec *r)
{
	struct rec c = *r;
	c.crc = 0;
	return r->magic == SPOOL_MAGIC && r->zero == 0 &&
	       crc32(&c, sizeof c) == r->crc;
}

static int fsync_dir(const char *path)
{
	char buf[PATH_MAX];
	int fd, rc;

	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -1;
	fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static int write_all(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

static int push(struct spool *s, const struct spool_report *r)
{
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 64;
		void *p = realloc(s->items, (size_t)cap * sizeof *s->items);
		if (!p)
			return -1;
		s->items = p;
		s->cap = cap;
	}
	s->items[s->n++] = *r;
	return 0;
}

static struct spool_report *find(struct spool *s, uint64_t seq)
{
	int lo = 0, hi = s->n - 1;
	while (lo <= hi) { /* items are in seq order */
		int mid = lo + (hi - lo) / 2;
		if (s->items[mid].seq == seq)
			return &s->items[mid];
		if (s->items[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

static void to_report(const struct spool *s, const struct rec *r,
                      struct spool_report *o)
{
	memset(o, 0, sizeof *o);
	o->epoch = s->epoch;
	o->seq = r->u.r.seq;
	memcpy(o->contract, r->u.r.contract, SPOOL_CONTRACT_LEN);
	o->contract[SPOOL_CONTRACT_LEN - 1] = 0;
	o->start = r->u.r.start;
	o->end = r->u.r.end;
	o->page_seconds = r->u.r.page_seconds;
	o->carry_pns = r->u.r.carry_pns;
	o->cum_page_seconds = r->u.r.cum_page_seconds;
	o->pages_at_end = r->u.r.pages_at_end;
	o->final = (int)r->u.r.final;
}

static void from_report(const struct spool_report *o, struct rec *r)
{
	memset(r, 0, sizeof *r);
	r->u.r.seq = o->seq;
	snprintf(r->u.r.contract, SPOOL_CONTRACT_LEN, "%s", o->contract);
	r->u.r.start = o->start;
	r->u.r.end = o->end;
	r->u.r.page_seconds = o->page_seconds;
	r->u.r.carry_pns = o->carry_pns;
	r->u.r.cum_page_seconds = o->cum_page_seconds;
	r->u.r.pages_at_end = o->pages_at_end;
	r->u.r.final = o->final ? 1 : 0;
	seal(r, REC_REPORT);
}

static int create(struct spool *s, uint64_t epoch, char *err, size_t len)
{
	struct rec h;

	s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->fd < 0) {
		err_set(err, len, "could not create spool %s: %s", s->path,
		        strerror(errno));
		return -1;
	}
	memset(&h, 0, sizeof h);
	h.u.h.epoch = epoch;
	h.u.h.seq_next = 1;
	seal(&h, REC_HEADER);
	if (write_all(s->fd, &h, sizeof h, 0) < 0 || fsync(s->fd) < 0 ||
	    fsync_dir(s->path) < 0) {
		err_set(err, len, "could not write spool %s: %s", s->path,
		        strerror(errno));
		return -1;
	}
	s->epoch = epoch;
	s->next_seq = 1;
	s->nrec = 1;
	return 0;
}

/* The index of the last record that is known to have gone through an
 * fsync, from what the valid records prove: a report is appended only
 * after the synced record before it returned from its fsync, and an ack
 * or a set-aside is written only after its report was synced and sent.
 * The newest report itself, and the acks around it (never fsync'd: a lost
 * ack costs one resend), may have been torn by a power cut. */
static int64_t synced_end(const struct rec *recs, const unsigned char *ok,
                          int64_t n)
{
	int64_t b = 0, last_synced = 0;
	for (int64_t i = 1; i < n; i++) {
		if (!ok[i])
			continue;
		uint32_t t = recs[i].type;
		if (t == REC_REPORT) {
			if (last_synced > b)
				b = last_synced;
		} else if (t == REC_ACK || t == REC_ASIDE) {
			for (int64_t j = i - 1; j > b; j--)
				if (ok[j] && recs[j].type == REC_REPORT &&
				    recs[j].u.r.seq == recs[i].u.a.seq) {
					b = j;
					break;
				}
		}
		if (t == REC_REPORT || t == REC_ASIDE)
			last_synced = i;
	}
	return b;
}

/* Reads the file back. A bad record (its checksum fails) after the part
 * known to be synced (synced_end) is a torn tail: it and everything behind
 * it are dropped; none of it was ever sent, or it is acks, which only save
 * resends. A bad record inside the synced part is damage, which a person
 * must look at, since guessing there could lose or double money. */
static int recover(struct spool *s, char *err, size_t len)
{
	struct stat st;
	struct rec r;
	int64_t nfull, first_bad = -1;
	uint64_t last_seq = 0;

	if (fstat(s->fd, &st) < 0) {
		err_set(err, len, "could not stat spool %s: %s", s->path,
		        strerror(errno));
		return -1;
	}
	/* Shorter than a header: creation was cut before it fsync'd, so no
	 * report was ever numbered from this file. Start it again. */
	if (st.st_size < SPOOL_RECORD_SIZE)
		return 1;
	nfull = st.st_size / SPOOL_RECORD_SIZE;
	struct rec *recs = malloc((size_t)nfull * sizeof *recs);
	unsigned char *ok = malloc((size_t)nfull);
	if (!recs || !ok) {
		free(recs);
		free(ok);
		err_set(err, len, "out of memory reading spool %s", s->path);
		return -1;
	}
	for (int64_t i = 0; i < nfull; i++) {
		off_t off = (off_t)i * SPOOL_RECORD_SIZE;
		if (pread(s->fd, &recs[i], sizeof r, off) != (ssize_t)sizeof r) {
			err_set(err, len, "could not read spool %s: %s",
			        s->path, strerror(errno));
			free(recs);
			free(ok);
			return -1;
		}
		ok[i] = (unsigned char)valid(&recs[i]);
		if (!ok[i] && first_bad < 0)
			first_bad = i;
	}
	int64_t synced = synced_end(recs, ok, nfull);
	free(recs);
	free(ok);
	if (first_bad == 0 || (first_bad > 0 && first_bad <= synced)) {
		err_set(
		    err, len,
		    "spool %s is damaged at byte %lld (a record that was "
		    "synced to disk, so not a torn write); move it aside and "
		    "restart the agent, then reconcile its reports with the "
		    "exchange",
		    s->path, (long long)first_bad * SPOOL_RECORD_SIZE);
		return -1;
	}
	if (first_bad > 0) {
		s->dropped_records = (int)(nfull - first_bad);
		nfull = first_bad; /* the torn tail */
	}
	for (int64_t i = 0; i < nfull; i++) {
		off_t off = (off_t)i * SPOOL_RECORD_SIZE;
		if (pread(s->fd, &r, sizeof r, off) != (ssize_t)sizeof r) {
			err_set(err, len, "could not read spool %s: %s",
			        s->path, strerror(errno));
			return -1;
		}
		if (i == 0 && r.type != REC_HEADER) {
			err_set(err, len, "%s is not a ramex spool (no header)",
			        s->path);
			return -1;
		}
		if (r.type == REC_HEADER && i == 0) {
			s->epoch = r.u.h.epoch;
			s->next_seq = r.u.h.seq_next;
		} else if (r.type == REC_REPORT) {
			struct spool_report o;
			if (r.u.r.seq <= last_seq) {
				err_set(
				    err, len,
				    "spool %s repeats report seq %llu; move it "
				    "aside and restart the agent",
				    s->path, (unsigned long long)r.u.r.seq);
				return -1;
			}
			to_report(s, &r, &o);
			if (push(s, &o) < 0) {
				err_set(err, len,
				        "out of memory reading spool");
				return -1;
			}
			last_seq = r.u.r.seq;
			if (s->next_seq <= last_seq)
				s->next_seq = last_seq + 1;
		} else if (r.type == REC_ACK || r.type == REC_ASIDE) {
			struct spool_report *o = find(s, r.u.a.seq);
			if (o && r.type == REC_ACK)
				o->acked = 1;
			else if (o)
				o->set_aside = 1;
		} else {
			err_set(err, len,
			        "spool %s has a record of unknown type %u",
			        s->path, r.type);
			return -1;
		}
	}
	s->nrec = nfull;
	s->dropped = (size_t)(st.st_size - nfull * SPOOL_RECORD_SIZE);
	if (s->dropped && (ftruncate(s->fd, nfull * SPOOL_RECORD_SIZE) < 0 ||
	                   fsync(s->fd) < 0)) {
		err_set(err, len, "could not cut the torn tail of spool %s: %s",
		        s->path, strerror(errno));
		return -1;
	}
	return 0;
}

struct spool *spool_open(const char *path, uint64_t new_epoch, char *err,
                         size_t errlen)
{
	struct spool *s = calloc(1, sizeof *s);
	int rc;

	if (s)
		s->fd = -1;
	if (!s || !(s->path = strdup(path))) {
		err_set(err, errlen, "out of memory");
		goto fail;
	}
	s->fd = open(path, O_RDWR | O_CLOEXEC);
	if (s->fd < 0 && errno == ENOENT)
		goto create;
	if (s->fd < 0) {
		err_set(err, errlen, "could not open spool %s: %s", path,
		        strerror(errno));
		goto fail;
	}
	rc = recover(s, err, errlen);
	if (rc < 0)
		goto fail;
	if (rc == 0)
		return s;
	close(s->fd);
	s->fd = -1;
	if (unlink(path) < 0) {
		err_set(err, errlen, "could not remove the torn spool %s: %s",
		        path, strerror(errno));
		goto fail;
	}
create:
	if (create(s, new_epoch, err, errlen) < 0)
		goto fail;
	return s;
fail:
	spool_close(s);
	return NULL;
}

void spool_close(struct spool *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->items);
	free(s->path);
	free(s);
}

uint64_t spool_epoch(const struct spool *s)
{
	return s->epoch;
}

size_t spool_dropped(const struct spool *s)
{
	return s->dropped;
}

int spool_dropped_records(const struct spool *s)
{
	return s->dropped_records;
}

int64_t spool_records(const struct spool *s)
{
	return s->nrec;
}

static int append_rec(struct spool *s, const struct rec *r, int sync, char *err,
                      size_t len)
{
	off_t off = (off_t)s->nrec * SPOOL_RECORD_SIZE;

	if (write_all(s->fd, r, sizeof *r, off) < 0 ||
	    (sync && fdatasync(s->fd) < 0)) {
		err_set(err, len, "could not write spool %s: %s", s->path,
		        strerror(errno));
		/* Leave no partial record for the next append to follow. */
		if (ftruncate(s->fd, off) < 0)
			err_set(err, len, "could not write spool %s: %s",
			        s->path, strerror(errno));
		return -1;
	}
	s->nrec++;
	return 0;
}

int spool_append(struct spool *s, struct spool_report *r, char *err,
                 size_t errlen)
{
	struct rec rec;

	if (strlen(r->contract) == 0 ||
	    strlen(r->contract) >= SPOOL_CONTRACT_LEN) {
		err_set(err, errlen, "contract id must be 1..%d characters",
		        SPOOL_CONTRACT_LEN - 1);
		return -1;
	}
	if (r->end < r->start || r->page_seconds < 0 || r->carry_pns < 0 ||
	    r->cum_page_seconds < 0 || r->pages_at_end < 0) {
		err_set(err, errlen, "report period or usage is negative");
		return -1;
	}
	r->epoch = s->epoch;
	r->seq = s->next_seq;
	r->acked = 0;
	r->set_aside = 0;
	from_report(r, &rec);
	if (append_rec(s, &rec, 1, err, errlen) < 0)
		return -1;
	if (push(s, r) < 0) {
		/* Durable but unindexed: reopening finds it. */
		err_set(err, errlen, "out of memory; restart the agent");
		return -1;
	}
	s->next_seq++;
	return 0;
}

int spool_ack(struct spool *s, uint64_t seq, char *err, size_t errlen)
{
	struct spool_report *o = find(s, seq);
	struct rec rec;

	if (!o || o->acked)
		return 0;
	memset(&rec, 0, sizeof rec);
	rec.u.a.seq = seq;
	seal(&rec, REC_ACK);
	if (append_rec(s, &rec, 0, err, errlen) < 0)
		return -1;
	o->acked = 1;
	return 0;
}

int spool_set_aside(struct spool *s, uint64_t seq, char *err, size_t errlen)
{
	struct spool_report *o = find(s, seq);
	struct rec rec;

	if (!o || o->acked || o->set_aside)
		return 0;
	memset(&rec, 0, sizeof rec);
	rec.u.a.seq = seq;
	seal(&rec, REC_ASIDE);
	/* fsync'd, unlike an ack: a lost mark would resend a report the
	 * exchange refuses, forever. */
	if (append_rec(s, &rec, 1, err, errlen) < 0)
		return -1;
	o->set_aside = 1;
	return 0;
}

int spool_set_aside_count(const struct spool *s)
{
	int n = 0;
	for (int i = 0; i < s->n; i++)
		n += s->items[i].set_aside;
	return n;
}

int spool_pending(const struct spool *s, struct spool_report *out, int cap)
{
	int n = 0;
	for (int i = 0; i < s->n; i++) {
		if (s->items[i].acked || s->items[i].set_aside)
			continue;
		if (n < cap)
			out[n] = s->items[i];
		n++;
	}
	return n;
}

int spool_reports(const struct spool *s, struct spool_report *out, int cap)
{
	for (int i = 0; i < s->n && i < cap; i++)
		out[i] = s->items[i];
	return s->n;
}

int spool_last(const struct spool *s, const char *contract,
               struct spool_report *out)
{
	for (int i = s->n - 1; i >= 0; i--) {
		if (strcmp(s->items[i].contract, contract) == 0) {
			*out = s->items[i];
			return 0;
		}
	}
	return -1;
}

/* Whether compaction keeps item i: pending, or the newest of a contract
 * that is still running. */
static int keep(const struct spool *s, int i)
{
	const struct spool_report *r = &s->items[i];
	if (!r->acked)
		return 1;
	if (r->final)
		return 0;
	for (int j = i + 1; j < s->n; j++)
		if (strcmp(s->items[j].contract, r->contract) == 0)
			return 0;
	return 1;
}

int spool_compact(struct spool *s, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	struct spool_report *kept = NULL;
	int nk = 0, fd = -1;
	int64_t nrec = 0;
	struct rec rec;

	if (snprintf(tmp, sizeof tmp, "%s.tmp", s->path) >= (int)sizeof tmp) {
		err_set(err, errlen, "spool path too long");
		return -1;
	}
	kept = malloc(((size_t)s->n + 1) * sizeof *kept);
	if (!kept) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto io_fail;
	memset(&rec, 0, sizeof rec);
	rec.u.h.epoch = s->epoch;
	rec.u.h.seq_next = s->next_seq; /* numbers are never reused */
	seal(&rec, REC_HEADER);
	if (write_all(fd, &rec, sizeof rec, 0) < 0)
		goto io_fail;
	nrec = 1;
	for (int i = 0; i < s->n; i++) {
		if (!keep(s, i))
			continue;
		kept[nk++] = s->items[i];
		from_report(&s->items[i], &rec);
		if (write_all(fd, &rec, sizeof rec,
		              nrec++ * SPOOL_RECORD_SIZE) < 0)
			goto io_fail;
		if (s->items[i].acked || s->items[i].set_aside) {
			/* Set-aside reports stay, marked, as evidence. */
			memset(&rec, 0, sizeof rec);
			rec.u.a.seq = s->items[i].seq;
			seal(&rec, s->items[i].acked ? REC_ACK : REC_ASIDE);
			if (write_all(fd, &rec, sizeof rec,
			              nrec++ * SPOOL_RECORD_SIZE) < 0)
				goto io_fail;
		}
	}
	if (fsync(fd) < 0 || rename(tmp, s->path) < 0 || fsync_dir(s->path) < 0)
		goto io_fail;
	close(s->fd);
	s->fd = fd;
	free(s->items);
	s->items = kept;
	s->n = nk;
	s->cap = s->n + 1;
	s->nrec = nrec;
	return 0;
io_fail:
	err_set(err, errlen, "could not compact spool %s: %s", s->path,
	        strerror(errno));
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(kept);
	return -1;
}
