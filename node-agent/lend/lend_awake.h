/*
 * lend_awake.h — keeping cores out of idle while the bridge's I/O is in
 * flight.
 *
 * A 4 KiB read through the bridge is a chain of wakeups: the NBD client
 * wakes the bridge, the bridge the lender (or the network), the lender's
 * reply the bridge, the bridge the NBD client. When the core a wakeup
 * lands on has gone idle in between, the wakeup also pays for bringing
 * that core back: a deep C-state's exit on bare metal, and on a virtual
 * machine whose guest does not poll before halting (cpuidle-haltpoll
 * with guest_halt_poll_ns = 0, as on the bench's host) a halted vCPU that
 * the hypervisor must schedule again. docs/lending.md ("Where a QD32
 * read's time goes") has the figures.
 *
 * lend_awake runs N threads under SCHED_IDLE that spin (reading the
 * clock) while the bridge says it has requests in flight, and for a
 * linger after. SCHED_IDLE is the point: such a thread runs only on a core
 * that no other task wants, and any waking task preempts it at once, so it
 * takes no time from other work; what it does take is the idle time (power,
 * and on a VM host CPU time a halted vCPU would have left to others). With
 * nothing in flight past the linger every thread sleeps on a condition
 * variable: an idle borrower costs nothing.
 *
 * lend_qos.h reaches the same end through the kernel (idle cores poll
 * while a CPU latency limit of 0 µs is held), without a thread of ours.
 *
 * Owns its threads, their mutex and condition variable. lend_awake_busy
 * is called by one thread (the bridge's loop); it makes no system call
 * unless the spinners are asleep.
 */
#ifndef RAMEX_LEND_AWAKE_H
#define RAMEX_LEND_AWAKE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define LEND_AWAKE_MAX_THREADS 8
#define LEND_AWAKE_LINGER_US   1000 /* spin on this long after the last busy */
#define LEND_AWAKE_STACK       (128u << 10) /* each thread's stack */

struct lend_awake {
	int n; /* threads started */
	pthread_t thr[LEND_AWAKE_MAX_THREADS];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int sync_ok;              /* mu and cv initialised */
	_Atomic int64_t until_ns; /* spin until this CLOCK_MONOTONIC time */
	_Atomic int on;           /* the threads spin (else they sleep) */
	_Atomic int stop;
	/* rounds of spinning, for tests; on a cache line of its own, away
	 * from until_ns, which the bridge writes on every turn */
	_Alignas(64) _Atomic int64_t spins;
	_Atomic int idle_policy; /* threads that got SCHED_IDLE */
};

/* Starts `threads` (0..LEND_AWAKE_MAX_THREADS) sleeping spinners; 0 is a
 * valid "off". Returns 0, or -1 with err (nothing left running). */
int lend_awake_start(struct lend_awake *a, int threads, char *err,
                     size_t errlen);
/* Requests are in flight: spin until now + LEND_AWAKE_LINGER_US. */
void lend_awake_busy(struct lend_awake *a);
/* Stops and joins the threads (safe on a zeroed or stopped struct). */
void lend_awake_stop(struct lend_awake *a);

#endif
