/*
 * ctl_bill.h — ramexctl's money commands: usage reports and their gaps,
 * invoices (list, show, the FOCUS CSV export), the usage export, the
 * ledger check (exit 5 when it finds a problem), the billing run and the
 * billing summary. Exports are written to a temporary file and renamed
 * into place. Each returns an exit code (ctl_http.h).
 */
#ifndef RAMEX_CTL_BILL_H
#define RAMEX_CTL_BILL_H

#include "exchange/ctl/ctl_args.h"

int ctl_bill_billing_run(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_billing_summary(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_invoices_csv(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_invoices_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_invoices_show(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_ledger_check(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_usage_export(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_usage_gaps(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_bill_usage_list(struct ctl_ctx *x, struct ctl_opts *o);

#endif
