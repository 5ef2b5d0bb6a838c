/*
 * test_book_prop.c — property tests of the order book against the reference
 * model (tests/unit/book_ref.c) over more than a million seeded random
 * commands, valid and invalid, on several market shapes.
 *
 * After every command: the book and the model emitted the same events, the
 * book is not crossed, and pages are conserved (accepted = 2 x traded +
 * cancelled + expired + reduced away + resting). Every few commands the
 * whole observable state is compared, which checks FIFO within each level.
 * A second test snapshots a book midway through a stream, restores it (and
 * rebuilds another from its open orders) and replays the rest of the stream
 * on all three: the events and final states must be identical.
 *
 * RAMEX_BOOK_PROP_COMMANDS overrides the commands per shape (default
 * 400000); the seed is fixed so a failure always reproduces.
 */
#include "exchange/core/book.h"
#include "tests/unit/book_ref.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXEV 4096

/* check's ck_assert records every passing assertion (a write per call), far
 * too slow in a loop of millions; this only calls into check on failure. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg(__VA_ARGS__);                             \
	} while (0)

struct evbuf {
	struct book_event ev[MAXEV];
	size_t n;
};

static void collect(void *ctx, const struct book_event *ev)
{
	struct evbuf *e = ctx;
	CHECK(e->n < MAXEV, "more than %d events from one command", MAXEV);
	e->ev[e->n] = *ev;
	/* messages live only during the callback; keep the fact there was
	 * one, which is all the comparison looks at */
	if (ev->message)
		e->ev[e->n].message = ev->message[0] ? "x" : "";
	e->n++;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* splitmix64: small, seeded, the same on every machine */
	uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static int64_t below(int64_t n)
{
	return (int64_t)(rnd() % (uint64_t)n);
}

struct shape {
	const char *name;
	struct book_params p;
	int accounts;
};

static const struct shape shapes[] = {
    {"tiny", {1, 1, 1, 5, 1, 8, 16}, 2},
    {"mid", {10, 100, 200, 1000, 100, 410, 64}, 4},
    {"wide", {7, 1, 1, 20, 7, 7 * 5000, 128}, 8},
};

struct gen {
	const struct book_params *p;
	int accounts;
	uint64_t next_id;
	rx_time_ns now;
};

static struct book_cmd gen_cmd(struct gen *g)
{
	const struct book_params *p = g->p;
	struct book_cmd c = {0};
	int64_t r = below(1000);
	g->now += below(4);
	if (below(200) == 0)
		g->now -= 2; /* time may step back: nothing may break */
	c.now = g->now;
	int64_t ticks = (p->price_max - p->price_min) / p->tick + 1;
	if (r < 560) {
		c.kind = BOOK_CMD_NEW;
		c.id = ++g->next_id;
		if (below(40) == 0)
			c.id = g->next_id - 1 - (uint64_t)below(20);
		if (below(300) == 0)
			c.id = 0;
		c.account = 1 + below(g->accounts);
		c.side = (enum book_side)below(2);
		/* cluster prices mid-grid so that orders cross often */
		int64_t mid = ticks / 2, spread = ticks < 40 ? ticks : 40;
		int64_t k = mid - spread / 2 + below(spread);
		if (below(50) == 0)
			k = below(ticks + 2) - 1; /* anywhere, or just off */
		c.price = p->price_min + k * p->tick;
		if (below(100) == 0)
			c.price += 1 + below(p->tick > 1 ? p->tick - 1 : 1);
		c.pages = p->lot * (1 + below(p->max_pages / p->lot));
		if (below(60) == 0)
			c.pages = below(3) - 1 + (below(2) ? p->max_pages : 0);
		if (below(100) == 0 && p->lot > 1)
			c.pages += 1;
		c.tif = (enum book_tif)below(4);
		if (below(300) == 0)
			c.tif = (enum book_tif)4;
		c.stp = (enum book_stp)below(3);
		if (below(300) == 0)
			c.stp = (enum book_stp)3;
		c.post_only = below(7) == 0;
		c.expires = c.now + 1 + below(60);
		if (below(50) == 0)
			c.expires = c.now - below(2);
	} else if (r < 800) {
		c.kind = BOOK_CMD_CANCEL;
		c.id = g->next_id - (uint64_t)below(p->capacity / 2 + 4);
	} else if (r < 960) {
		c.kind = BOOK_CMD_REDUCE;
		c.id = g->next_id - (uint64_t)below(p->capacity / 2 + 4);
		c.pages = p->lot * below(p->max_pages / p->lot / 2 + 2);
		if (below(20) == 0)
			c.pages += 1;
	} else if (r < 995) {
		c.kind = BOOK_CMD_EXPIRE;
		g->now += below(30);
		c.now = g->now;
	} else {
		c.kind = (enum book_cmd_kind)(4 + below(3));
		c.id = 1;
	}
	return c;
}

/* Pages in the book from the events alone. */
struct ledger {
	int64_t accepted, traded, gone; /* gone: cancelled, expired, reduced */
};

static void account(struct ledger *l, const struct evbuf *e)
{
	for (size_t i = 0; i < e->n; i++) {
		const struct book_event *ev = &e->ev[i];
		switch (ev->kind) {
		case BOOK_EV_ACCEPTED:
			l->accepted += ev->pages;
			break;
		case BOOK_EV_TRADE:
			l->traded += ev->pages;
			break;
		case BOOK_EV_CANCELLED:
		case BOOK_EV_EXPIRED:
			l->gone += ev->pages;
			break;
		case BOOK_EV_REDUCED:
			l->gone += ev->remaining - ev->pages;
			break;
		case BOOK_EV_REJECTED:
			break;
		}
	}
}

static int64_t resting(const struct book *b)
{
	static struct book_level lv[8192];
	int64_t sum = 0;
	for (int s = 0; s < 2; s++) {
		size_t n = book_depth(b, (enum book_side)s, lv, 8192);
		for (size_t i = 0; i < n; i++)
			sum += lv[i].pages;
	}
	return sum;
}

static void same_events(const struct evbuf *a, const struct evbuf *b,
                        size_t step, const char *what)
{
	char err[600];
	CHECK(a->n == b->n, "%s step %zu: %zu events vs %zu", what, step, a->n,
	      b->n);
	for (size_t i = 0; i < a->n; i++)
		CHECK(book_ref_event_cmp(&a->ev[i], &b->ev[i], err,
		                         sizeof(err)) == 0,
		      "%s step %zu event %zu: %s", what, step, i, err);
}

static long commands_per_shape(void)
{
	const char *s = getenv("RAMEX_BOOK_PROP_COMMANDS");
	long n = s ? strtol(s, NULL, 10) : 0;
	return n > 0 ? n : 400000;
}

static struct evbuf EA, EB;

START_TEST(book_equals_reference_model)
{
	const struct shape *sh = &shapes[_i];
	char err[600];
	struct book *b = book_new(&sh->p, err, sizeof(err));
	ck_assert_msg(b, "%s", err);
	struct book_ref *r = book_ref_new(&sh->p);
	ck_assert_ptr_nonnull(r);
	struct gen g = {&sh->p, sh->accounts, 0, 1000};
	struct ledger led = {0};
	rng_state = 0x5eed0000u + (uint64_t)_i;
	long n = commands_per_shape();
	size_t kinds[6] = {0};
	for (long step = 0; step < n; step++) {
		struct book_cmd c = gen_cmd(&g);
		EA.n = EB.n = 0;
		enum book_reject ra = book_apply(b, &c, collect, &EA);
		enum book_reject rb = book_ref_apply(r, &c, collect, &EB);
		CHECK(ra == rb, "%s step %ld: reject %d vs %d", sh->name, step,
		      ra, rb);
		same_events(&EA, &EB, (size_t)step, sh->name);
		for (size_t i = 0; i < EA.n; i++)
			kinds[EA.ev[i].kind]++;

		rx_price bid, ask;
		if (book_best_bid(b, &bid, NULL) &&
		    book_best_ask(b, &ask, NULL))
			CHECK(bid < ask, "%s step %ld: crossed %lld/%lld",
			      sh->name, step, (long long)bid, (long long)ask);
		account(&led, &EA);
		if (step % 8 == 0 || EA.n > 3) {
			int64_t open = led.accepted - 2 * led.traded - led.gone;
			CHECK(open == resting(b),
			      "%s step %ld: %lld pages open by the events, "
			      "%lld in the book",
			      sh->name, step, (long long)open,
			      (long long)resting(b));
			CHECK(book_ref_compare(r, b, err, sizeof(err)) == 0,
			      "%s step %ld: %s", sh->name, step, err);
		}
	}
	ck_assert_msg(book_ref_compare(r, b, err, sizeof(err)) == 0, "%s", err);
	/* the stream exercised every kind of event */
	for (int k = 0; k < 6; k++)
		ck_assert_msg(kinds[k] > (size_t)n / 20000,
		              "%s: kind %d seen %zu", sh->name, k, kinds[k]);
	book_ref_free(r);
	book_free(b);
}
END_TEST

static void reinsert(void *ctx, const struct book_order *o)
{
	char err[256];
	CHECK(book_insert_resting(ctx, o, err, sizeof(err)) == 0, "%s", err);
}

static void same_state(const struct book *a, const struct book *b)
{
	size_t na = book_snapshot_size(a), nb = book_snapshot_size(b);
	ck_assert_uint_eq(na, nb);
	unsigned char *x = malloc(na), *y = malloc(nb);
	ck_assert_uint_eq(book_snapshot(a, x, na), na);
	ck_assert_uint_eq(book_snapshot(b, y, nb), nb);
	ck_assert(memcmp(x, y, na) == 0);
	free(x);
	free(y);
}

static struct evbuf EC;

START_TEST(restore_plus_replay_equals_live_book)
{
	const struct shape *sh = &shapes[_i];
	char err[600];
	struct book *live = book_new(&sh->p, err, sizeof(err));
	ck_assert_msg(live, "%s", err);
	struct gen g = {&sh->p, sh->accounts, 0, 1000};
	rng_state = 0xabcd0000u + (uint64_t)_i;
	long n = commands_per_shape() / 8;
	for (int cut = 0; cut < 4; cut++) {
		for (long i = 0; i < n; i++) {
			struct book_cmd c = gen_cmd(&g);
			book_apply(live, &c, NULL, NULL);
		}
		size_t len = book_snapshot_size(live);
		unsigned char *snap = malloc(len);
		ck_assert_uint_eq(book_snapshot(live, snap, len), len);
		struct book *restored =
		    book_restore(snap, len, err, sizeof(err));
		ck_assert_msg(restored, "%s", err);
		free(snap);
		struct book *rebuilt = book_new(&sh->p, err, sizeof(err));
		book_foreach(live, reinsert, rebuilt);
		book_set_seq(rebuilt, book_seq(live));
		same_state(live, restored);
		same_state(live, rebuilt);
		struct gen g2 = g;
		for (long i = 0; i < n; i++) {
			struct book_cmd c = gen_cmd(&g2);
			EA.n = EB.n = EC.n = 0;
			book_apply(live, &c, collect, &EA);
			book_apply(restored, &c, collect, &EB);
			book_apply(rebuilt, &c, collect, &EC);
			same_events(&EA, &EB, (size_t)i, "restored");
			same_events(&EA, &EC, (size_t)i, "rebuilt");
		}
		same_state(live, restored);
		same_state(live, rebuilt);
		g = g2;
		book_free(restored);
		book_free(rebuilt);
	}
	book_free(live);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("book_prop");
	TCase *t = tcase_create("model");
	tcase_set_timeout(t, 300);
	int nshapes = (int)(sizeof(shapes) / sizeof(shapes[0]));
	tcase_add_loop_test(t, book_equals_reference_model, 0, nshapes);
	tcase_add_loop_test(t, restore_plus_replay_equals_live_book, 0,
	                    nshapes);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
