/*
 * billing_store.h — writes a priced batch of the billing job
 * (billing_batch.h) in the batch's transaction: the invoices its
 * movements land on (made when missing), the movements and their balanced
 * postings, the invoice totals, the contracts' billing state and the
 * months they billed, each table once per batch as unnest arrays. The
 * caller owns the transaction.
 */
#ifndef RAMEX_BILLING_STORE_H
#define RAMEX_BILLING_STORE_H

#include "exchange/billing_batch.h"

/* Stores the batch's movements, postings, invoice totals and state; 0, or
 * -1 with err set (the caller rolls back). */
int billing_store_batch(PGconn *db, struct billing_batch *b,
                        struct billing_phases *ph, struct billing_result *res,
                        char *err, size_t errlen);

#endif
