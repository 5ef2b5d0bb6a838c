/*
 * agent_contract.h — the contracts this node holds, brought in line with the
 * exchange's: deliver what it sold (pages out, then POST .../deliver),
 * receive what it borrowed, give back what is over or recalled and tell
 * the exchange (recall, end), retried until it answers; the kernel's
 * losses (OOM) turned into recalls.
 *
 * Owns a->held and the meter's start and stop for each contract.
 */
#ifndef RAMEX_AGENT_CONTRACT_H
#define RAMEX_AGENT_CONTRACT_H

#include "node-agent/agent.h"

struct held *agent_contract_find(struct agent *a, int64_t id);

/* A contract move on the exchange (deliver, recall, end). 1 when the
 * exchange answered with the move made (or made before), 0 when it refused
 * it for good, -1 when it must be retried. */
int agent_contract_move(struct agent *a, int64_t id, const char *move,
                        const char *note);

/* Gives back up to `pages` of h (all when pages >= held); the period is
 * the contract's last when every page is back. */
void agent_contract_take_back(struct agent *a, struct held *h, rx_pages pages,
                              rx_time_ns t);

/* Lists the exchange's contracts and acts on the difference. */
void agent_contract_reconcile(struct agent *a, rx_time_ns t);

/* Takes every page of h back, then tells the exchange (`move`: recall
 * for a sale, end for a borrow). */
void agent_contract_give_up(struct agent *a, struct held *h, const char *move,
                            const char *why, rx_time_ns t);

/* Moves that take time: delivers and meters the pages moved since the
 * last call (a sale is delivered with its first pages). */
void agent_contract_moving_tick(struct agent *a, rx_time_ns t);
/* The kernel took offline pages back (OOM): meter the loss, recall. */
void agent_contract_sync_losses(struct agent *a, rx_time_ns t);

#endif
