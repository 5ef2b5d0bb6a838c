/*
 * ctl_bill.c — ramexctl's money commands; see ctl_bill.h.
 */
#include "exchange/ctl/ctl_bill.h"
#include "exchange/ctl/ctl_out.h"
#include "exchange/ctl/ctl_units.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *const usage_cols[] = {
    "id",   "node_id",         "epoch",         "seq",          "contract_id",
    "side", "period_start_ns", "period_end_ns", "page_seconds", NULL};

int ctl_bill_usage_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[512] = "/v1/usage", f[32], t[32];
	const char *from, *to;
	if (ctl_from_to(o, 1, f, t, &from, &to))
		return CTL_USAGE;
	if (ctl_add_int_query(p, sizeof p, "contract_id", o, "--contract"))
		return CTL_USAGE;
	if (ctl_add_int_query(p, sizeof p, "node_id", o, "--node"))
		return CTL_USAGE;
	if (ctl_add_int_query(p, sizeof p, "epoch", o, "--epoch"))
		return CTL_USAGE;
	ctl_add_query(p, sizeof p, "from", from ? f : NULL);
	ctl_add_query(p, sizeof p, "to", to ? t : NULL);
	if (ctl_add_int_query(p, sizeof p, "limit", o, "--limit"))
		return CTL_USAGE;
	ctl_add_query(p, sizeof p, "after", ctl_opt(o, "--after"));
	return ctl_call_show(x, "GET", p, NULL, usage_cols);
}

int ctl_bill_usage_gaps(struct ctl_ctx *x, struct ctl_opts *o)
{
	static const char *const cols[] = {"node_id", "epoch",   "first",
	                                   "last",    "missing", NULL};
	char p[256] = "/v1/usage/gaps";
	if (ctl_add_int_query(p, sizeof p, "node_id", o, "--node"))
		return CTL_USAGE;
	if (ctl_add_int_query(p, sizeof p, "epoch", o, "--epoch"))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, cols);
}

static const char *const invoice_cols[] = {
    "id", "account", "team", "year", "month", "status", "lines", "total", NULL};
static const char *const line_cols[] = {
    "contract_id", "market",       "kind",       "role",
    "usage_month", "charge_start", "charge_end", "page_seconds",
    "unit_price",  "amount",       NULL};

/* "2026-12" or "2026": a year and maybe a month, checked here so that a
 * typo is a usage error and not a surprising empty list */
static int month_ok(const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++)
		if (!(i == 4 ? s[i] == '-' : s[i] >= '0' && s[i] <= '9'))
			return 0;
	if (n == 4)
		return 1;
	return n == 7 &&
	       ((s[5] == '0' && s[6] >= '1') || (s[5] == '1' && s[6] <= '2'));
}

int ctl_bill_invoices_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	const char *status = ctl_opt(o, "--status"), *m = ctl_opt(o, "--month");
	char p[512] = "/v1/invoices", y[8], mo[4];
	if (status && strcmp(status, "draft") && strcmp(status, "final"))
		return ctl_usage_error("--status must be draft or final");
	if (ctl_add_int_query(p, sizeof p, "account_id", o, "--account"))
		return CTL_USAGE;
	if (m) {
		/* --month 2026-12 for one month, --month 2026 for a year */
		if (!month_ok(m))
			return ctl_usage_error(
			    "--month must be YYYY-MM or YYYY, "
			    "not \"%s\"",
			    m);
		snprintf(y, sizeof y, "%.4s", m);
		ctl_add_query(p, sizeof p, "year", y);
		if (strlen(m) == 7) {
			snprintf(mo, sizeof mo, "%d", atoi(m + 5));
			ctl_add_query(p, sizeof p, "month", mo);
		}
	}
	ctl_add_query(p, sizeof p, "status", status);
	if (ctl_add_paging(p, sizeof p, o))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, invoice_cols);
}

int ctl_bill_invoices_show(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	json_t *j = NULL;
	if (ctl_path_id(p, sizeof p, "/v1/invoices/%s", o->pos[0],
	                "an invoice id"))
		return CTL_USAGE;
	int rc = ctl_call(x, "GET", p, NULL, &j);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else
		ctl_print_doc(j, line_cols);
	json_decref(j);
	return CTL_OK;
}

/* Writes `len` bytes to `path` through a temporary file renamed into
 * place, so a reader never sees half an export. A path that is there and
 * is not a regular file (a device, a pipe, a link: /dev/stdout) is written
 * as it is: renamed over, --output /dev/null made root's /dev/null a
 * regular file (found from outside, with /dev/full, whose "disk full"
 * went unsaid). */
static int write_file(const char *path, const char *data, size_t len)
{
	char tmp[1100];
	struct stat st;
	int direct = lstat(path, &st) == 0 && !S_ISREG(st.st_mode);
	if (snprintf(tmp, sizeof tmp, "%s.part", path) >= (int)sizeof tmp) {
		fprintf(stderr, "%s: the file name is too long\n", ctl_prog);
		return CTL_USAGE;
	}
	FILE *f = fopen(direct ? path : tmp, "w");
	if (!f)
		goto fail;
	if (fwrite(data, 1, len, f) != len || fflush(f) != 0) {
		fclose(f);
		goto fail_unlink;
	}
	if (fclose(f) != 0)
		goto fail_unlink;
	if (!direct && rename(tmp, path) != 0)
		goto fail_unlink;
	return CTL_OK;
fail_unlink:
	fprintf(stderr, "%s: could not write %s: %s\n", ctl_prog, path,
	        strerror(errno));
	if (!direct)
		remove(tmp);
	return CTL_USAGE;
fail:
	fprintf(stderr, "%s: could not write %s: %s\n", ctl_prog, path,
	        strerror(errno));
	return CTL_USAGE;
}

/* An export as the server makes it (path p, room for its query): CSV to
 * stdout or to `out`; with --json the same rows as JSON. */
static int export(struct ctl_ctx *x, char *p, size_t plen, const char *out)
{
	struct ctl_http h = x->http;
	struct ctl_http_resp r;
	if (out && !*out)
		return ctl_usage_error("--output needs a file name");
	ctl_add_query(p, plen, "format", x->json ? "json" : "csv");
	h.accept = x->json ? NULL : "text/csv";
	enum ctl_exit e = ctl_http_call(&h, "GET", p, NULL, &r);
	int rc = e;
	if (e != CTL_OK) {
		ctl_report_failure(x, e, &r);
		goto out;
	}
	if (out) {
		rc = write_file(out, r.body ? r.body : "", r.len);
		if (rc == CTL_OK && !x->json) {
			size_t rows = 0;
			for (size_t i = 0; i < r.len; i++)
				rows += r.body[i] == '\n';
			printf("wrote %s: %zu line%s\n", out, rows,
			       rows == 1 ? "" : "s");
		}
	} else if (r.len > 0 && fwrite(r.body, 1, r.len, stdout) != r.len) {
		rc = CTL_USAGE;
	}
out:
	ctl_http_resp_free(&r);
	return rc;
}

/* The FOCUS-style export of one invoice. */
int ctl_bill_invoices_csv(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path_id(p, sizeof p, "/v1/invoices/%s/export", o->pos[0],
	                "an invoice id"))
		return CTL_USAGE;
	return export(x, p, sizeof p, ctl_opt(o, "--output"));
}

/* Billed usage per contract and month (finance, admin). */
int ctl_bill_usage_export(struct ctl_ctx *x, struct ctl_opts *o)
{
	const char *f = ctl_opt(o, "--from"), *t = ctl_opt(o, "--to");
	char p[256] = "/v1/usage/export";
	if ((f && (!month_ok(f) || strlen(f) != 7)) ||
	    (t && (!month_ok(t) || strlen(t) != 7)))
		return ctl_usage_error("--from and --to are months: YYYY-MM");
	ctl_add_query(p, sizeof p, "from", f);
	ctl_add_query(p, sizeof p, "to", t);
	return export(x, p, sizeof p, ctl_opt(o, "--output"));
}

/* Exit 5 when the check ran and found the books wrong, so that a cron job
 * or a test can act on it; the differences are on stdout. */
int ctl_bill_ledger_check(struct ctl_ctx *x, struct ctl_opts *o)
{
	json_t *j = NULL;
	(void)o;
	int rc = ctl_call(x, "GET", "/v1/ledger/check", NULL, &j);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else
		ctl_print_doc(j, NULL);
	static const char *const verdicts[] = {"ok", "balanced", NULL};
	for (const char *const *v = verdicts; *v; v++)
		if (json_is_false(json_object_get(j, *v))) {
			fprintf(stderr, "error: the ledger check failed: see "
			                "the differences above\n");
			rc = CTL_CHECK_FAILED;
		}
	json_decref(j);
	return rc;
}

int ctl_bill_billing_run(struct ctl_ctx *x, struct ctl_opts *o)
{
	json_t *j = NULL, *b = json_object();
	(void)o;
	int rc = ctl_call(x, "POST", "/v1/billing/run", b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else
		ctl_print_doc(j, NULL);
	json_decref(j);
	return CTL_OK;
}

int ctl_bill_billing_summary(struct ctl_ctx *x, struct ctl_opts *o)
{
	const char *by = ctl_opt(o, "--by"), *f = ctl_opt(o, "--from"),
	           *t = ctl_opt(o, "--to");
	char p[512] = "/v1/billing/summary";
	json_t *j = NULL;
	if (by && strcmp(by, "account") && strcmp(by, "team"))
		return ctl_usage_error("--by must be account or team");
	if ((f && (!month_ok(f) || strlen(f) != 7)) ||
	    (t && (!month_ok(t) || strlen(t) != 7)))
		return ctl_usage_error("--from and --to are months: YYYY-MM");
	ctl_add_query(p, sizeof p, "from", f);
	ctl_add_query(p, sizeof p, "to", t);
	ctl_add_query(p, sizeof p, "by", by);
	int rc = ctl_call(x, "GET", p, NULL, &j);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else if (json_is_array(json_object_get(j, "items")))
		ctl_print_list(j, NULL);
	else
		ctl_print_doc(j, NULL);
	json_decref(j);
	return CTL_OK;
}
