/*
 * rng.h — the simulator's own pseudo-random numbers: splitmix64 to seed,
 * xoshiro256** to draw. Every machine owns one stream, so the draws of one
 * machine never depend on the others or on how machines are spread over
 * threads; the same seed gives the same fleet, bit for bit.
 */
#ifndef RAMEX_SIM_RNG_H
#define RAMEX_SIM_RNG_H

#include <math.h>
#include <stdint.h>

struct rng {
	uint64_t s[4];
};

static inline uint64_t rng_splitmix(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Stream `stream` of seed `seed`: independent streams for every machine. */
static inline void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * UINT64_C(0xd1b54a32d192ed03));
	for (int i = 0; i < 4; i++)
		r->s[i] = rng_splitmix(&x);
}

static inline uint64_t rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rng_rotl(s[3], 45);
	return out;
}

/* Uniform in [0, 1). */
static inline double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static inline double rng_range(struct rng *r, double lo, double hi)
{
	return lo + (hi - lo) * rng_unit(r);
}

/* Log-uniform in [lo, hi]: as many machines at 2-3x as at 6-9x. */
static inline double rng_logrange(struct rng *r, double lo, double hi)
{
	return lo * exp(log(hi / lo) * rng_unit(r));
}

/* Exponential with the given mean. */
static inline double rng_exp(struct rng *r, double mean)
{
	return -mean * log(1.0 - rng_unit(r));
}

/* Standard normal (Box-Muller, one of the pair). */
static inline double rng_normal(struct rng *r)
{
	double u = 1.0 - rng_unit(r), v = rng_unit(r);
	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif
