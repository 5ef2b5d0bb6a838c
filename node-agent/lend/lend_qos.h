/*
 * lend_qos.h — idle polling: the CPU latency request held at 0 µs while
 * I/O is in flight.
 *
 * A 4 KiB read through the bridge is a chain of four wakeups (lend_awake.h
 * says which); each that lands on a core gone idle also pays for bringing
 * the core back. The kernel's cpuidle governors honour a system-wide
 * latency limit (PM QoS, /dev/cpu_dma_latency): a limit of 0 µs makes every
 * idle core take the POLL state (haltpoll, menu and teo alike) and spin in
 * the idle loop instead of halting, so a wakeup lands on a running core.
 * Unlike lend_awake's spinners this is no task of ours: the scheduler sees
 * an idle core, and a waking task takes it at once; it spends the same idle
 * time (power, and on a VM host the CPU a halted vCPU would have left to
 * other guests).
 *
 * The request is held from the first busy call and released
 * LEND_QOS_LINGER_US after the last: one write(2) when the lender or bridge
 * becomes busy, one when it has been idle that long, never one per request.
 * The owner's loop calls lend_qos_busy while requests are in flight and
 * lend_qos_idle before it sleeps, bounding the sleep by what it returns.
 * The request is the file's: opening it asks for nothing (the kernel's
 * default, no limit), closing it (or the process's death) drops it.
 *
 * Owns one descriptor of the latency device. Not thread-safe: one thread
 * (the loop) calls busy and idle.
 */
#ifndef RAMEX_LEND_QOS_H
#define RAMEX_LEND_QOS_H

#include <stddef.h>
#include <stdint.h>

#define LEND_QOS_PATH "/dev/cpu_dma_latency"
/* keep the request this long after the last busy call (docs/lending.md,
 * "Idle polling": the transitions it saves against what it costs) */
#define LEND_QOS_LINGER_US 1000
/* --idle-poll of ramex-lend-nbd and ramex-lend-server, the agent's
 * lend_idle_poll (docs/lending.md, "Idle polling", says why) */
#define LEND_QOS_DEFAULT 0
/* the value that asks for nothing: PM_QOS_CPU_LATENCY_DEFAULT_VALUE */
#define LEND_QOS_NO_LIMIT 2000000000

struct lend_qos {
	int fd;           /* the latency device, or -1 (off) */
	int open;         /* fd is ours (a zeroed struct is off) */
	int held;         /* the request says 0 µs now */
	int64_t until_ns; /* release at this CLOCK_MONOTONIC time */
	int64_t holds;    /* busy spells begun (tests; the end's log line) */
	char err[200];    /* why it is off, when it could not start */
};

/* Opens `path` (NULL: LEND_QOS_PATH) for a zeroed or stopped q. On
 * failure logs once, in words an operator can act on, why idle polling is
 * off, keeps that in q->err and returns -1: the caller goes on without it
 * (busy and idle then do nothing). */
int lend_qos_start(struct lend_qos *q, const char *path);
/* Requests are in flight: hold 0 µs until now + LEND_QOS_LINGER_US. */
void lend_qos_busy(struct lend_qos *q);
/* Releases the request when the linger has passed. Returns -1 when
 * nothing is held (sleep as long as you like), else the milliseconds
 * until the release is due (>= 1: wake by then and call again). */
int64_t lend_qos_idle(struct lend_qos *q);
/* Drops the request and the descriptor (safe on a zeroed or closed
 * struct). */
void lend_qos_stop(struct lend_qos *q);
/* The system's current latency limit in µs as the kernel aggregates it
 * over every holder (reading `path`, NULL: LEND_QOS_PATH), or -1. */
int64_t lend_qos_system_us(const char *path);

#endif
