/*
 * agent_status.h — the status file: the agent's view, counters and
 * per-contract figures in Prometheus text format, rewritten whole each
 * round (write to NAME.tmp, rename).
 *
 * Owns nothing but the file; reads the whole struct agent.
 */
#ifndef RAMEX_AGENT_STATUS_H
#define RAMEX_AGENT_STATUS_H

#include "node-agent/agent.h"

void agent_status_write(struct agent *a);

#endif
