/*
 * agent_report.h — usage reporting: the meter's periods cut into numbered
 * reports, written to the spool (fsync) before they are sent, sent to
 * POST /v1/usage in batches and resent until acknowledged; a refused batch
 * is resent report by report and what is refused alone is set aside.
 *
 * Owns the report counters (n_reports, n_acked, n_batches, ...).
 */
#ifndef RAMEX_AGENT_REPORT_H
#define RAMEX_AGENT_REPORT_H

#include "node-agent/agent.h"

/* Spools one metered period of h (NULL: not held); `pages` is what the
 * contract holds at its end, `final` marks its last. The cumulative
 * counter continues from the contract's last report. A period that cannot
 * be spooled (a full or read-only disk) is put back into the meter
 * (meter_uncut), to go with the contract's next report: returns -1 then. */
int agent_report_spool(struct agent *a, struct held *h,
                       const struct meter_period *p, rx_pages pages,
                       int final);

/* Cuts every metered contract's period at t and spools it. */
void agent_report_cut_all(struct agent *a, rx_time_ns t);

/* Sends what the spool holds unacknowledged (a bounded number of batches
 * a round), and compacts the spool when it has grown. */
void agent_report_send(struct agent *a);

#endif
