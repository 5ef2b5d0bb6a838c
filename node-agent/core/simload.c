/* simload.c — workload profiles of a simulated machine; see simload.h. */
#include "node-agent/core/simload.h"

#include <assert.h>
#include <string.h>

#define MS_PER_S   INT64_C(1000)
#define NS_PER_MS  INT64_C(1000000)
#define MAX_PERIOD INT64_C(31536000)  /* a year: keeps products in 128 bits */
#define MAX_PAGES  (INT64_C(1) << 40) /* 4 PiB, the agent's own limit */

static const char *const names[] = {"steady", "diurnal", "bursty"};

int simload_kind_parse(const char *name, enum simload_kind *out)
{
	for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++)
		if (strcmp(name, names[k]) == 0) {
			*out = (enum simload_kind)k;
			return 0;
		}
	return -1;
}

const char *simload_kind_name(enum simload_kind k)
{
	return k >= SIMLOAD_STEADY && k <= SIMLOAD_BURSTY ? names[k] : "?";
}

const char *simload_check(const struct simload_config *c)
{
	if (c->kind < SIMLOAD_STEADY || c->kind > SIMLOAD_BURSTY)
		return "the profile must be steady, diurnal or bursty";
	if (c->total < 1 || c->total > MAX_PAGES)
		return "the machine needs between 1 and 2^40 pages";
	if (c->base < 0 || c->base > c->total)
		return "the workload's pages must be within the machine's";
	if (c->kind == SIMLOAD_STEADY)
		return NULL;
	if (c->swing < 0 || c->swing > c->total - c->base)
		return "the swing must fit between the workload's pages and "
		       "the machine's";
	if (c->kind == SIMLOAD_DIURNAL && c->swing > c->base)
		return "a diurnal swing cannot exceed the workload's mean "
		       "pages (it would go below zero)";
	if (c->period_s < 1 || c->period_s > MAX_PERIOD)
		return "the period must be between 1 s and a year";
	return NULL;
}

/* splitmix64: a well-mixed hash of a counter, so slot k's burst depends on
 * (seed, k) only and not on which slots were asked for before. */
static uint64_t mix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static int64_t mod(int64_t a, int64_t m)
{
	int64_t r = a % m;
	return r < 0 ? r + m : r;
}

/* swing × sin(2π·u/p) for u in [0, p), by Bhaskara I's approximation on
 * each half wave: sin(πx/h) ≈ 16x(h−x) / (5h² − 4x(h−x)), exact at 0,
 * h/6, h/2 and h; the sign flips on the second half. Rounded towards 0. */
static int64_t sine(int64_t swing, int64_t u, int64_t p)
{
	int64_t h = p / 2, x = u < h ? u : u - h;
	if (h == 0)
		return 0;
	if (x > h)
		x = h; /* odd p: the second half is one ms longer */
	__int128 q = (__int128)x * (h - x);
	__int128 num = (__int128)swing * 16 * q;
	__int128 den = (__int128)5 * h * h - 4 * q;
	int64_t v = (int64_t)(num / den);
	return u < h ? v : -v;
}

static int64_t burst(const struct simload_config *c, int64_t t_ms)
{
	int64_t p = c->period_s * MS_PER_S;
	int64_t slot = t_ms >= 0 ? t_ms / p : -((-t_ms + p - 1) / p);
	int64_t off = t_ms - slot * p;
	uint64_t h = mix(c->seed ^ mix((uint64_t)slot));

	if ((int64_t)(h % 100) >= SIMLOAD_BURST_PCT)
		return 0;
	/* starts in the first half, lasts a quarter to a half of the slot,
	 * so it ends within the slot; rises to half the swing or more */
	int64_t start = (int64_t)((h >> 8) % (uint64_t)(p / 2));
	int64_t len = p / 4 + (int64_t)((h >> 24) % (uint64_t)(p / 4 + 1));
	int64_t pct = 50 + (int64_t)((h >> 40) % 51);
	if (off < start || off >= start + len)
		return 0;
	return (int64_t)((__int128)c->swing * pct / 100);
}

rx_pages simload_pages(const struct simload_config *c, rx_time_ns t)
{
	assert(simload_check(c) == NULL);
	int64_t t_ms = t / NS_PER_MS, v = c->base;

	switch (c->kind) {
	case SIMLOAD_STEADY:
		break;
	case SIMLOAD_DIURNAL: {
		int64_t p = c->period_s * MS_PER_S;
		int64_t shift = (int64_t)(c->seed % (uint64_t)p);
		v += sine(c->swing, mod(mod(t_ms, p) + shift, p), p);
		break;
	}
	case SIMLOAD_BURSTY:
		v += burst(c, t_ms);
		break;
	}
	if (v < 0)
		v = 0;
	if (v > c->total)
		v = c->total;
	return v;
}
