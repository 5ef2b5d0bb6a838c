/* lend_awake.c — spinning SCHED_IDLE threads while I/O is in flight (see
 * the header). */
#include "node-agent/lend/lend_awake.h"
#include "common/clock.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void *awake_main(void *arg)
{
	struct lend_awake *a = arg;
	struct sched_param sp = {.sched_priority = 0};
	/* lowering a thread's own policy needs no privilege; without it
	 * the thread would compete with real work, so it then never spins */
	int idle = pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0;
	if (idle)
		atomic_fetch_add(&a->idle_policy, 1);
	pthread_mutex_lock(&a->mu);
	while (!atomic_load(&a->stop)) {
		if (!idle || !atomic_load(&a->on)) {
			pthread_cond_wait(&a->cv, &a->mu);
			continue;
		}
		pthread_mutex_unlock(&a->mu);
		/* no PAUSE: on a VM a loop of them is taken for a lock spin
		 * (pause-loop exiting) and the host deschedules the vCPU,
		 * the very thing to avoid. The count is published every
		 * 1024 rounds: a shared counter bumped on every round would
		 * bounce its cache line between the spinners */
		int64_t n = 0;
		while (
		    !atomic_load_explicit(&a->stop, memory_order_relaxed) &&
		    atomic_load_explicit(&a->until_ns, memory_order_relaxed) >
		        clock_mono_ns()) {
			if (++n == 1024) {
				atomic_fetch_add_explicit(&a->spins, n,
				                          memory_order_relaxed);
				n = 0;
			}
		}
		atomic_fetch_add_explicit(&a->spins, n, memory_order_relaxed);
		pthread_mutex_lock(&a->mu);
		/* busy() may have moved the bound since: look again under the
		 * lock it takes to wake us */
		if (atomic_load(&a->until_ns) <= clock_mono_ns())
			atomic_store(&a->on, 0);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

int lend_awake_start(struct lend_awake *a, int threads, char *err,
                     size_t errlen)
{
	memset(a, 0, sizeof *a);
	if (threads < 0 || threads > LEND_AWAKE_MAX_THREADS) {
		snprintf(err, errlen, "keep-awake threads must be 0..%d",
		         LEND_AWAKE_MAX_THREADS);
		return -1;
	}
	if (threads == 0)
		return 0;
	if (pthread_mutex_init(&a->mu, NULL) != 0 ||
	    pthread_cond_init(&a->cv, NULL) != 0) {
		snprintf(err, errlen,
		         "could not set up the keep-awake threads");
		return -1;
	}
	a->sync_ok = 1;
	/* a small stack: under the bridge's mlockall(MCL_FUTURE) every
	 * thread's stack is locked whole, and the default is 8 MiB */
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, LEND_AWAKE_STACK);
	for (; a->n < threads; a->n++) {
		int rc = pthread_create(&a->thr[a->n], &at, awake_main, a);
		if (rc != 0) {
			snprintf(err, errlen,
			         "could not start a keep-awake thread: %s",
			         strerror(rc));
			pthread_attr_destroy(&at);
			lend_awake_stop(a);
			return -1;
		}
	}
	pthread_attr_destroy(&at);
	return 0;
}

void lend_awake_busy(struct lend_awake *a)
{
	if (a->n == 0)
		return;
	atomic_store_explicit(&a->until_ns,
	                      clock_mono_ns() +
	                          (int64_t)LEND_AWAKE_LINGER_US * 1000,
	                      memory_order_relaxed);
	/* a spinner that is just giving up may miss this bound and sleep;
	 * the bridge calls again on its next turn, which finds it off */
	if (atomic_load(&a->on))
		return;
	pthread_mutex_lock(&a->mu);
	atomic_store(&a->on, 1);
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

void lend_awake_stop(struct lend_awake *a)
{
	if (!a->sync_ok)
		return;
	pthread_mutex_lock(&a->mu);
	atomic_store(&a->stop, 1);
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	for (int i = 0; i < a->n; i++)
		pthread_join(a->thr[i], NULL);
	a->n = 0;
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	a->sync_ok = 0;
}
