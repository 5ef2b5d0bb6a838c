/*
 * agent_sample.h — the agent's measuring: one sample per round (sim, or
 * /proc and the cgroup, MGLRU's generations or idle pages), fed to the
 * estimator (core/wsest), and the active probe through memory.reclaim
 * (core/probe decides how much).
 *
 * Owns a->e, a->source, the MGLRU buffers and the probe's state.
 */
#ifndef RAMEX_AGENT_SAMPLE_H
#define RAMEX_AGENT_SAMPLE_H

#include "node-agent/agent.h"

/* Samples at t into s and updates a->e; -1 (logged) when no estimate. */
int agent_sample_take(struct agent *a, rx_time_ns t, struct wsest_sample *s);

/* Takes the next probe's pages away; the next sample carries them. */
void agent_sample_probe(struct agent *a);

/* MGLRU as the working-set source, if the kernel and settings allow;
 * a failure is logged and leaves the other sources. */
void agent_sample_mglru_start(struct agent *a);
/* Chooses how to probe (memory.reclaim, memory.high, or not at all) and
 * sets back a memory.high a killed agent left lowered. */
void agent_sample_probe_start(struct agent *a);

#endif
