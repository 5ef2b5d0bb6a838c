/*
 * bench_book.c — replays a fixed, seeded stream of order book commands and
 * prints commands per second and per-command latency percentiles.
 *
 *   bench_book [COMMANDS [SEED]]      (default 10000000 commands, seed 42)
 *
 * The stream: about 50 % new limit orders resting near the touch, 35 %
 * cancels of random open orders, 15 % orders that cross the spread (half
 * IOC, half GTC whose rest stays), on a 65 536-tick grid, 1 000 accounts,
 * the book hovering around 20 000 open orders (takers grow when it is
 * deeper). It is generated segment by segment by running
 * a first book (so cancels hit open orders), then the same segment is
 * replayed on two fresh books: one timed as a whole (throughput) and one
 * timed command by command (latency, clock_gettime around each call, whose
 * own cost is measured and printed). Generation is never timed. The emit
 * callback counts events, as a minimal real caller would.
 */
#include "common/clock.h"
#include "exchange/core/book.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEGMENT  (1 << 20)
#define TICKS    65536
#define TARGET   20000
#define HIST_MAX 100000 /* ns; slower commands land in the last bucket */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static int64_t below(int64_t n)
{
	return (int64_t)(rnd() % (uint64_t)n);
}

/* The CPU time of this thread (its share of a busy machine). */
static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The generator's view of the open orders: ids in an array, and each id's
 * place in it, so a cancel picks a random open order in O(1). */
struct live {
	uint64_t *ids;
	uint32_t *pos; /* by id; UINT32_MAX when not open */
	uint32_t n;
};

static void live_add(struct live *l, uint64_t id)
{
	l->pos[id] = l->n;
	l->ids[l->n++] = id;
}

static void live_del(struct live *l, uint64_t id)
{
	uint32_t p = l->pos[id];
	if (p == UINT32_MAX)
		return;
	uint64_t last = l->ids[--l->n];
	l->ids[p] = last;
	l->pos[last] = p;
	l->pos[id] = UINT32_MAX;
}

static void gen_emit(void *ctx, const struct book_event *ev)
{
	struct live *l = ctx;
	switch (ev->kind) {
	case BOOK_EV_TRADE:
		if (ev->maker_remaining == 0)
			live_del(l, ev->maker_id);
		break;
	case BOOK_EV_CANCELLED:
	case BOOK_EV_EXPIRED:
		live_del(l, ev->id);
		break;
	default:
		break;
	}
}

struct counts {
	uint64_t kind[6];
};

static void count_emit(void *ctx, const struct book_event *ev)
{
	struct counts *c = ctx;
	c->kind[ev->kind]++;
}

struct gen {
	struct book *b;
	struct live live;
	uint64_t next_id;
	rx_time_ns now;
	int64_t mid; /* tick index the price wanders around */
	uint64_t mix[3];
};

static int64_t tick_of(const struct book_params *p, rx_price price)
{
	return (price - p->price_min) / p->tick;
}

static struct book_cmd gen_one(struct gen *g)
{
	const struct book_params *p = book_params_of(g->b);
	struct book_cmd c = {.now = (g->now += 1000)};
	int64_t r = below(100);
	rx_price bid, ask;
	int64_t bt = book_best_bid(g->b, &bid, NULL) ? tick_of(p, bid) : -1;
	int64_t at = book_best_ask(g->b, &ask, NULL) ? tick_of(p, ask) : -1;
	if (below(64) == 0 && g->mid > 1000 && g->mid < TICKS - 1000)
		g->mid += below(2) ? 1 : -1;
	if (r >= 50 && r < 85 && g->live.n > 0) {
		g->mix[1]++;
		c.kind = BOOK_CMD_CANCEL;
		c.id = g->live.ids[below(g->live.n)];
		return c;
	}
	c.kind = BOOK_CMD_NEW;
	c.id = ++g->next_id;
	c.account = 1 + below(1000);
	c.side = (enum book_side)below(2);
	c.stp = (enum book_stp)below(3);
	int64_t k;
	if (r >= 85) {
		g->mix[2]++;
		/* through the touch by a few ticks */
		int64_t opp = c.side == BOOK_BUY ? at : bt;
		if (opp < 0)
			opp = g->mid;
		k = c.side == BOOK_BUY ? opp + below(3) : opp - below(3);
		/* larger takers when the book is deeper than its target, so
		 * it hovers around TARGET open orders whatever the seed */
		c.pages = 1 + below(g->live.n > TARGET ? 200 : 40);
		c.tif = below(2) ? BOOK_IOC : BOOK_GTC;
	} else {
		g->mix[0]++;
		/* behind the touch, most at the first few ticks */
		int64_t opp = c.side == BOOK_BUY ? at : bt;
		int64_t own = c.side == BOOK_BUY ? bt : at;
		int64_t ref = own >= 0 ? own : g->mid;
		int64_t off = below(4) == 0 ? below(20) : below(3);
		k = c.side == BOOK_BUY ? ref + 1 - off : ref - 1 + off;
		if (opp >= 0 && (c.side == BOOK_BUY ? k >= opp : k <= opp))
			k = c.side == BOOK_BUY ? opp - 1 : opp + 1;
		c.pages = 1 + below(100);
		c.tif = below(10) == 0 ? BOOK_GTD : BOOK_GTC;
		c.expires = c.now + 1000 * (1 + below(100000));
		c.post_only = below(4) == 0;
	}
	if (k < 0)
		k = 0;
	if (k >= TICKS)
		k = TICKS - 1;
	c.price = p->price_min + k * p->tick;
	return c;
}

static void gen_segment(struct gen *g, struct book_cmd *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cmds[i] = gen_one(g);
		book_apply(g->b, &cmds[i], gen_emit, &g->live);
		if (cmds[i].kind == BOOK_CMD_NEW &&
		    book_get(g->b, cmds[i].id, &(struct book_order){0}))
			live_add(&g->live, cmds[i].id);
	}
}

static int64_t percentile(const uint64_t *hist, uint64_t total, double q)
{
	uint64_t want = (uint64_t)((double)total * q), seen = 0;
	for (int64_t i = 0; i <= HIST_MAX; i++) {
		seen += hist[i];
		if (seen > want)
			return i;
	}
	return HIST_MAX;
}

int main(int argc, char **argv)
{
	long total = argc > 1 ? strtol(argv[1], NULL, 10) : 10000000;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
	if (total <= 0) {
		fprintf(stderr, "usage: bench_book [COMMANDS [SEED]]\n");
		return 2;
	}
	rng_state = seed;
	struct book_params p = {
	    .tick = 1000,
	    .lot = 1,
	    .min_pages = 1,
	    .max_pages = 1000000,
	    .price_min = 1000,
	    .price_max = 1000 * TICKS,
	    .capacity = 1 << 20,
	};
	char err[256];
	struct book *books[3];
	for (int i = 0; i < 3; i++) {
		books[i] = book_new(&p, err, sizeof(err));
		if (!books[i]) {
			fprintf(stderr, "bench_book: %s\n", err);
			return 1;
		}
	}
	struct gen g = {.b = books[0], .now = 1, .mid = TICKS / 2};
	g.live.ids = malloc(p.capacity * sizeof(uint64_t));
	g.live.pos = malloc(((size_t)total + 2) * sizeof(uint32_t));
	struct book_cmd *cmds = malloc(SEGMENT * sizeof(*cmds));
	uint64_t *hist = calloc(HIST_MAX + 1, sizeof(uint64_t));
	if (!g.live.ids || !g.live.pos || !cmds || !hist) {
		fprintf(stderr, "bench_book: out of memory\n");
		return 1;
	}
	memset(g.live.pos, 0xff, ((size_t)total + 2) * sizeof(uint32_t));

	/* what one clock read costs, to read the latencies against */
	int64_t overhead = INT64_MAX;
	for (int i = 0; i < 100000; i++) {
		int64_t a = clock_mono_ns(), b = clock_mono_ns();
		if (b - a < overhead)
			overhead = b - a;
	}

	struct counts ca = {0}, cb = {0};
	int64_t busy = 0, cpu = 0, maxlat = 0;
	for (long done = 0; done < total;) {
		size_t n =
		    (size_t)(total - done < SEGMENT ? total - done : SEGMENT);
		gen_segment(&g, cmds, n);
		int64_t t0 = clock_mono_ns(), c0 = thread_cpu_ns();
		for (size_t i = 0; i < n; i++)
			book_apply(books[1], &cmds[i], count_emit, &ca);
		busy += clock_mono_ns() - t0;
		cpu += thread_cpu_ns() - c0;
		for (size_t i = 0; i < n; i++) {
			int64_t a = clock_mono_ns();
			book_apply(books[2], &cmds[i], count_emit, &cb);
			int64_t d = clock_mono_ns() - a;
			if (d > maxlat)
				maxlat = d;
			hist[d < HIST_MAX ? d : HIST_MAX]++;
		}
		done += (long)n;
	}
	if (memcmp(&ca, &cb, sizeof(ca)) ||
	    book_seq(books[1]) != book_seq(books[2])) {
		fprintf(stderr, "bench_book: the two replays differ\n");
		return 1;
	}
	double secs = (double)busy / 1e9;
	printf("book: %ld commands, seed %llu: %.1f%% new near the touch, "
	       "%.1f%% cancel, %.1f%% crossing\n",
	       total, (unsigned long long)seed, 100.0 * g.mix[0] / total,
	       100.0 * g.mix[1] / total, 100.0 * g.mix[2] / total);
	printf("book: events: %llu accepted, %llu trades, %llu cancelled, "
	       "%llu expired, %llu rejected; %zu orders open at the end\n",
	       (unsigned long long)ca.kind[BOOK_EV_ACCEPTED],
	       (unsigned long long)ca.kind[BOOK_EV_TRADE],
	       (unsigned long long)ca.kind[BOOK_EV_CANCELLED],
	       (unsigned long long)ca.kind[BOOK_EV_EXPIRED],
	       (unsigned long long)ca.kind[BOOK_EV_REJECTED],
	       book_count(books[1]));
	/* CPU time leaves out the time other processes had the core, which
	 * on a shared machine is the fairer figure for one core */
	printf("book: throughput %.2f M commands/s wall, %.2f M commands/s "
	       "of thread CPU time (%.1f ns per command), one thread\n",
	       (double)total / secs / 1e6, (double)total / (double)cpu * 1e3,
	       (double)cpu / (double)total);
	printf("book: latency per command p50 %lld ns, p99 %lld ns, p99.9 "
	       "%lld ns, max %lld ns (each includes one clock read, %lld "
	       "ns)\n",
	       (long long)percentile(hist, (uint64_t)total, 0.50),
	       (long long)percentile(hist, (uint64_t)total, 0.99),
	       (long long)percentile(hist, (uint64_t)total, 0.999),
	       (long long)maxlat, (long long)overhead);
	printf("book: goal (issue 3): >= 10 M commands/s and p99 <= 1000 ns "
	       "on one core\n");
	for (int i = 0; i < 3; i++)
		book_free(books[i]);
	free(g.live.ids);
	free(g.live.pos);
	free(cmds);
	free(hist);
	return 0;
}
