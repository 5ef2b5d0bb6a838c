/* config.c — the settings table and its flag parser; the file is read by
 * common/conf.h. See config.h. */
#include "node-agent/config.h"
#include "common/conf.h"
#include "common/err.h"
#include "common/hostport.h"

#include "common/log.h"
#include "node-agent/core/simload.h"
#include "node-agent/lend/lend_client.h" /* LEND_CLIENT_REPLY_TIMEOUT_MS */
#include "node-agent/lend/lend_qos.h"    /* LEND_QOS_DEFAULT */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum type { T_STR, T_I64, T_INT, T_BOOL };

struct setting {
	const char *key;
	enum type type;
	size_t off, size; /* size: for strings */
	int64_t scale;    /* file value × scale = stored value */
	int64_t min, max;
	const char *help;
};

#define S(k, f, h)                                                             \
	{                                                                      \
		k, T_STR, offsetof(struct agent_config, f),                    \
		    sizeof(((struct agent_config *)0)->f), 1, 0, 0, h          \
	}
#define I(k, f, sc, lo, hi, h)                                                 \
	{                                                                      \
		k, T_I64, offsetof(struct agent_config, f), 0, sc, lo, hi, h   \
	}
#define N(k, f, lo, hi, h)                                                     \
	{                                                                      \
		k, T_INT, offsetof(struct agent_config, f), 0, 1, lo, hi, h    \
	}
#define B(k, f, h)                                                             \
	{                                                                      \
		k, T_BOOL, offsetof(struct agent_config, f), 0, 1, 0, 1, h     \
	}

#define YEAR_PAGES (INT64_C(1) << 40)
#define BIG        INT64_C(4611686018427387904)

static const struct setting settings[] = {
    S("exchange_url", exchange_url, "ramexd base URL (http:// or https://)"),
    S("key_id", key_id, "this node's key id (from POST /v1/nodes/{id}/keys)"),
    S("secret_file", secret_file, "file holding the node's HMAC secret"),
    S("ca_file", ca_file, "CA bundle for https (empty: the system's)"),
    S("backend", backend, "executor: sim, cgroup or kmod"),
    S("cgroup", cgroup, "cgroup v2 directory the cgroup backend limits"),
    I("cgroup_pages", cgroup_pages, 1, 0, YEAR_PAGES,
      "pages the cgroup may use when nothing is sold (0: its memory.max)"),
    S("kmod_device", kmod_device, "the kernel module's device"),
    I("sim_total_pages", sim_total, 1, 1, YEAR_PAGES,
      "sim backend: pages of the simulated machine"),
    I("sim_usage_pages", sim_usage, 1, 0, YEAR_PAGES,
      "sim backend: pages its workload uses"),
    S("sim_usage_file", sim_usage_file,
      "sim backend: file re-read every sample whose number replaces "
      "sim_usage_pages (tests, demos; empty: off)"),
    S("sim_profile", sim_profile,
      "sim backend: steady, diurnal (a day's sine) or bursty (seeded)"),
    I("sim_swing_pages", sim_swing, 1, 0, YEAR_PAGES,
      "sim: diurnal amplitude or highest burst (0: half the free pages)"),
    I("sim_period_s", sim_period_s, 1, 1, 31536000,
      "sim: seconds of one diurnal day, or of one bursty slot"),
    I("sim_seed", sim_seed, 1, 0, BIG,
      "sim: diurnal phase shift in ms; which bursty slots burst"),
    I("sim_offline_rate", sim_offline_rate, 1, 0, BIG,
      "sim: pages a second taken offline (0: at once; the kernel "
      "module's measured 569747, bench/30-kmod.sh)"),
    I("sim_online_rate", sim_online_rate, 1, 0, BIG,
      "sim: pages a second given back online (0: at once; measured "
      "1461478)"),
    I("sim_lend_rate", sim_lend_rate, 1, 0, BIG,
      "sim: pages a second lent or borrowed (0: at once; 262144, 1 GiB/s, "
      "the lending bridge's stream, docs/lending.md)"),
    I("managed_pages", managed_pages, 1, 0, YEAR_PAGES,
      "pages the agent trades (0: MemTotal, or sim_total_pages)"),
    S("spool", spool, "usage report spool file (fsync'd)"),
    S("status_file", status_file,
      "metrics file in Prometheus text format, rewritten every sample"),
    S("log_level", log_level, "debug, info, warn or error"),
    I("sample_s", sample_s, 1, 1, 3600, "seconds between samples"),
    I("report_s", report_s, 1, 1, 86400, "seconds between usage reports"),
    B("events", events,
      "follow /v1/events to act on fills and contract moves at once"),
    I("poll_s", poll_s, 1, 1, 86400,
      "seconds between contract listings while the event stream is up "
      "(down: every sample)"),
    B("idle_sampling", idle_sampling,
      "sample idle pages through /sys/kernel/mm/page_idle/bitmap"),
    I("idle_stride", idle_stride, 1, 64, 1 << 20,
      "sample every n-th page frame (>= 64)"),
    B("mglru", mglru,
      "measure the working set from MGLRU generations (aged by the agent "
      "every half window) where the kernel has them; preferred over "
      "idle_sampling"),
    B("mglru_enable", mglru_enable,
      "switch MGLRU on (/sys/kernel/mm/lru_gen/enabled) when it is off "
      "(default: on when run as root)"),
    S("mglru_file", mglru_file,
      "MGLRU's generations file (debugfs must be mounted)"),
    B("probe", probe,
      "probe actively (Senpai/TMO), taking a share of the cold pages away "
      "and measuring dy/dx by the refaults that follow (cgroup backend: "
      "its cgroup; kmod: probe_cgroup)"),
    S("probe_via", probe_via,
      "how a probe takes pages: reclaim (memory.reclaim, 5.19+), high (a "
      "memory.high lowered by the step, then set back) or auto (reclaim "
      "where the cgroup has it, else high)"),
    S("probe_cgroup", probe_cgroup,
      "kmod backend (the whole machine): the cgroup v2 directory probes "
      "take pages from: the cgroup2 root (it has memory.reclaim from "
      "5.19 on), or one holding the workload; empty: not probed"),
    I("probe_ceiling_ppm", prb.ceiling_ppm, 1, 1, 1000000,
      "no probe while PSI some (ppm of time) is at half of this or more; "
      "after one, none for probe_backoff_samples"),
    N("probe_step_pct", prb.step_pct, 1, 100,
      "share of the cold pages (resident beyond working set + error) one "
      "probe takes"),
    I("probe_step_max_pages", prb.step_max, 1, 1, YEAR_PAGES,
      "the most one probe takes"),
    N("probe_backoff_samples", prb.backoff_samples, 0, 100000,
      "samples without probing after a stall near the ceiling"),
    S("lend_listen", lend_listen,
      "HOST:PORT this node's lend page servers bind (port 0: a free one "
      "per contract; empty: this node does not serve lend contracts)"),
    S("lend_advertise", lend_advertise,
      "HOST[:PORT] told to the exchange for borrowers (empty: "
      "lend_listen's host; no port: the one bound)"),
    S("lend_bin_dir", lend_bin_dir,
      "directory of ramex-lend-server, ramex-lend-nbd and ramex-lend-ublk "
      "(empty: the agent's own)"),
    S("lend_borrow_mode", lend_borrow_mode,
      "borrowed pages: attach (/dev/nbdX as swap), listen (NBD on "
      "127.0.0.1, tests) or off (no data path)"),
    S("lend_device", lend_device,
      "borrower, lend_borrow_mode attach: nbd (nbd.ko, default), ublk "
      "(ramex-lend-ublk on /dev/ublkbN: Linux >= 6.0 with ublk_drv; "
      "lend_direct, lend_keep_awake and lend_idle_poll do not apply) or "
      "auto (ublk when /dev/ublk-control exists, else nbd)"),
    S("lend_nbd_device", lend_nbd_device,
      "the first NBD device lend_borrow_mode=attach uses: each "
      "borrowed contract takes the first free one from it on"),
    S("lend_tls_cert", lend_tls_cert,
      "lender: certificate file (PEM) of its lend servers; with "
      "lend_tls_key, borrowers must speak TLS 1.3 (empty: plain TCP)"),
    S("lend_tls_key", lend_tls_key,
      "lender: the private key file (PEM) of lend_tls_cert"),
    S("lend_tls_ca", lend_tls_ca,
      "borrower: CA file (PEM) that lenders' certificates must chain to; "
      "set, the bridge speaks TLS (empty: plain TCP)"),
    B("lend_plaintext", lend_plaintext,
      "allow plain TCP for lending off loopback, where pages would cross "
      "the network in clear (default no: TLS is required there)"),
    I("lend_reply_timeout_ms", lend_reply_timeout_ms, 1, 1, 3600000,
      "borrower: a request the lender leaves unanswered this long (ms) "
      "loses the lender: every request in flight and after fails with "
      "EIO and the device is swapped off, instead of the swap waiting "
      "for ever on a silent peer; a false loss costs the lent pages, so "
      "keep it well above the slowest healthy reply"),
    B("lend_direct", lend_direct,
      "borrower, lend_borrow_mode attach over plain TCP: the kernel's nbd "
      "driver talks to the lender itself (ramex-lend-nbd --direct): no "
      "process between, the kernel's reserves carry swap; with "
      "lend_tls_ca the bridge stays between (nbd.ko has no TLS)"),
    I("lend_keep_awake", lend_keep_awake, 1, 0, 8,
      "threads of the bridge (borrower) and of the lend server (lender) "
      "that keep cores out of idle (SCHED_IDLE, spinning only on time no "
      "other task wants) while requests are in flight, so that their "
      "wakeups do not wait for a halted core; 0 (default) spends no idle "
      "CPU on it"),
    B("lend_idle_poll", lend_idle_poll,
      "bridge (borrower) and lend server (lender) hold the CPU latency "
      "limit at 0 us while requests are in flight and 1 ms after "
      "(/dev/cpu_dma_latency, root): idle cores poll instead of halting, "
      "so a request's wakeups find them running; costs idle CPU (power, "
      "host CPU on a VM) only while lending is busy"),
    I("window_s", est.window_ns, 1000000000, 1, 86400,
      "working-set window: touched within it = working"),
    I("fault_cost_us", est.fault_cost_ns, 1000, 1, 10000,
      "stall per refault until PSI calibrates it"),
    N("smooth_pct", est.smooth_pct, 1, 100, "weight of a new sample"),
    N("stable_pct", est.stable_pct, 1, 100,
      "error and drift below this are stable"),
    N("stable_samples", est.stable_samples, 1, 1000,
      "samples in a row to be stable (allows perm sales)"),
    I("pressure_ppm", est.pressure_ppm, 1, 0, 1000000,
      "PSI stall share (ppm) where pressure starts"),
    I("unpressure_ppm", est.unpressure_ppm, 1, 0, 1000000,
      "PSI stall share (ppm) where pressure ends"),
    N("margin_pct", strat.margin_pct, 0, 1000,
      "safety margin above the working set, % of it"),
    I("margin_min_pages", strat.margin_min, 1, 0, YEAR_PAGES,
      "safety margin, at least"),
    I("lot_pages", strat.lot, 1, 1, YEAR_PAGES, "quote in multiples of"),
    I("tick", strat.tick, 1, 1, BIG,
      "prices in multiples of (the market's tick), n$/page-year"),
    N("perm_share_pct", strat.perm_share_pct, 0, 100,
      "share of the spare offered on perm when stable"),
    S("spot_market", strat.spot_market, "the spot market's name"),
    S("perm_market", strat.perm_market,
      "the perm market to sell on, e.g. perm-2027 (empty: none)"),
    I("spot_floor", strat.spot_floor, 1, 0, BIG,
      "lowest spot ask, n$/page-year"),
    I("spot_ceiling", strat.spot_ceiling, 1, 0, BIG,
      "highest spot ask; pages worth more are kept"),
    I("perm_floor", strat.perm_floor, 1, 0, BIG, "lowest perm ask"),
    I("perm_ceiling", strat.perm_ceiling, 1, 0, BIG, "highest perm ask"),
    I("bid_ceiling", strat.bid_ceiling, 1, 0, BIG, "highest bid, n$/page-year"),
    I("stall_value", strat.stall_value, 1, 0, BIG,
      "n$ one second of workload stall costs"),
    I("move_cost", strat.move_cost, 1, 0, BIG,
      "n$ to take one page out and back"),
    I("hold_s", strat.hold_s, 1, 1, BIG,
      "move cost is spread over this many seconds"),
    N("perm_premium_pct", strat.perm_premium_pct, 0, 10000,
      "perm asks this much over spot"),
    N("requote_price_pct", strat.requote_price_pct, 0, 100,
      "re-quote when the price moved more than"),
    N("requote_qty_pct", strat.requote_qty_pct, 0, 100,
      "re-quote when the size moved more than"),
    B("breach_perm", strat.breach_perm,
      "under pressure, take perm pages back too (a breach)"),
    N("sell_band_pct", strat.sell_band_pct, 0, 100,
      "offer spare only past this % of the working set (half stays kept)"),
    I("min_offer", strat.min_offer, 1, 0, BIG,
      "smallest offer in pages, and the least selling band"),
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

void config_default(struct agent_config *c)
{
	memset(c, 0, sizeof *c);
	strcpy(c->exchange_url, "http://127.0.0.1:8080");
	strcpy(c->secret_file, "/etc/ramex/node.secret");
	strcpy(c->backend, "kmod");
	strcpy(c->kmod_device, "/dev/ramex");
	c->sim_total = 2097152; /* 8 GiB */
	c->sim_usage = 524288;
	strcpy(c->sim_profile, "steady");
	c->sim_period_s = 86400;
	c->sim_seed = 1;
	c->sim_offline_rate = 569747;
	c->sim_online_rate = 1461478;
	c->sim_lend_rate = 262144;
	strcpy(c->spool, "/var/lib/ramex/agent.spool");
	strcpy(c->status_file, "/run/ramex/agent.prom");
	strcpy(c->log_level, "info");
	c->sample_s = 10;
	c->report_s = 60;
	c->events = 1;
	c->poll_s = 60;
	c->idle_sampling = 1;
	c->idle_stride = 257; /* odd: no aliasing with huge-page alignment */
	c->mglru = 1;
	c->mglru_enable = geteuid() == 0;
	strcpy(c->mglru_file, "/sys/kernel/debug/lru_gen");
	strcpy(c->lend_borrow_mode, "attach");
	strcpy(c->lend_nbd_device, "/dev/nbd0");
	c->lend_reply_timeout_ms = LEND_CLIENT_REPLY_TIMEOUT_MS;
	c->lend_idle_poll = LEND_QOS_DEFAULT;
	c->lend_direct = 1;
	strcpy(c->lend_device, "nbd");
	wsest_config_default(&c->est);
	strategy_config_default(&c->strat);
	probe_config_default(&c->prb);
	c->probe = 1;
	strcpy(c->probe_via, "auto");
	/* The whole machine is probed through the cgroup2 root: Debian's 6.1
	 * has memory.reclaim there (no memory.high). */
	strcpy(c->probe_cgroup, "/sys/fs/cgroup");
}

static const struct setting *lookup(const char *key, size_t len)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strlen(settings[i].key) == len &&
		    memcmp(settings[i].key, key, len) == 0)
			return &settings[i];
	return NULL;
}

static int set(struct agent_config *c, const struct setting *s, const char *v,
               char *err, size_t errlen)
{
	char *p = (char *)c + s->off;

	if (s->type == T_STR) {
		if (strlen(v) >= s->size) {
			err_set(err, errlen, "%s: longer than %zu characters",
			        s->key, s->size - 1);
			return -1;
		}
		strcpy(p, v);
		return 0;
	}
	if (s->type == T_BOOL) {
		int b;
		if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
			b = 1;
		else if (!strcmp(v, "no") || !strcmp(v, "false") ||
		         !strcmp(v, "0"))
			b = 0;
		else {
			err_set(err, errlen,
			        "%s: expected yes or no, not \"%s\"", s->key,
			        v);
			return -1;
		}
		*(int *)p = b;
		return 0;
	}
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || end == v || *end) {
		err_set(err, errlen, "%s: expected a whole number, not \"%s\"",
		        s->key, v);
		return -1;
	}
	if (x < s->min || x > s->max) {
		err_set(err, errlen, "%s: %lld is outside %lld..%lld", s->key,
		        x, (long long)s->min, (long long)s->max);
		return -1;
	}
	if (s->type == T_INT)
		*(int *)p = (int)x;
	else
		*(int64_t *)p = (int64_t)x * s->scale;
	return 0;
}

int config_lend_direct(const struct agent_config *c)
{
	return c->lend_direct && !strcmp(c->lend_borrow_mode, "attach") &&
	       !c->lend_tls_ca[0];
}

int config_lend_ublk(const struct agent_config *c, const char *ublk_control)
{
	if (strcmp(c->lend_borrow_mode, "attach"))
		return 0;
	if (!strcmp(c->lend_device, "ublk"))
		return 1;
	return !strcmp(c->lend_device, "auto") &&
	       access(ublk_control, F_OK) == 0;
}

int config_set(struct agent_config *c, const char *key, const char *value,
               char *err, size_t errlen)
{
	const struct setting *s = lookup(key, strlen(key));
	if (!s) {
		err_set(err, errlen, "unknown setting \"%s\" (see --help)",
		        key);
		return -1;
	}
	return set(c, s, value, err, errlen);
}

/* conf.h's view of the table: which key, and whether its value fits. */
static int conf_set(void *ctx, const char *key, const char *value,
                    struct err *e)
{
	const struct setting *s = lookup(key, strlen(key));
	if (!s)
		return err_fail(e, CONF_UNKNOWN,
		                "unknown setting \"%s\" (see --help)", key);
	if (set(ctx, s, value, e->msg, sizeof e->msg) < 0) {
		e->code = CONF_VALUE;
		return -1;
	}
	return 0;
}

int config_load(struct agent_config *c, const char *path, char *err,
                size_t errlen)
{
	struct err e;
	if (conf_read_file(path, conf_set, c, &e) < 0)
		return err_set(err, errlen, "%s", e.msg);
	return 0;
}

int config_args(struct agent_config *c, int argc, char **argv, char *err,
                size_t errlen)
{
	config_default(c);
	/* The file first, wherever --config stands, so flags override it. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return 1;
		if (!strncmp(a, "--config=", 9) &&
		    config_load(c, a + 9, err, errlen) < 0)
			return -1;
		if (!strcmp(a, "--config")) {
			if (i + 1 >= argc) {
				err_set(err, errlen, "--config needs a file");
				return -1;
			}
			if (config_load(c, argv[++i], err, errlen) < 0)
				return -1;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq;
		if (strncmp(a, "--", 2)) {
			err_set(err, errlen,
			        "unexpected argument \"%s\" (see --help)", a);
			return -1;
		}
		a += 2;
		if (!strncmp(a, "config", 6) && (a[6] == '=' || a[6] == 0)) {
			i += a[6] == 0;
			continue;
		}
		eq = strchr(a, '=');
		const struct setting *s =
		    lookup(a, eq ? (size_t)(eq - a) : strlen(a));
		if (!s) {
			err_set(err, errlen, "unknown option --%s (see --help)",
			        a);
			return -1;
		}
		const char *v = eq ? eq + 1 : NULL;
		if (!v) {
			if (i + 1 >= argc) {
				err_set(err, errlen, "--%s needs a value",
				        s->key);
				return -1;
			}
			v = argv[++i];
		}
		if (set(c, s, v, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int config_check(const struct agent_config *c, char *err, size_t errlen)
{
	const char *why = NULL;
	struct wsest *w;

	if (strcmp(c->backend, "sim") && strcmp(c->backend, "cgroup") &&
	    strcmp(c->backend, "kmod")) {
		err_set(err, errlen,
		        "backend must be sim, cgroup or kmod, not \"%s\"",
		        c->backend);
		return -1;
	}
	if (!strcmp(c->backend, "cgroup") && !c->cgroup[0]) {
		err_set(err, errlen, "the cgroup backend needs cgroup = DIR");
		return -1;
	}
	if (strncmp(c->exchange_url, "http://", 7) &&
	    strncmp(c->exchange_url, "https://", 8)) {
		err_set(err, errlen,
		        "exchange_url must start with http:// or "
		        "https://");
		return -1;
	}
	/* names that go into request paths and headers as they are: a
	 * market name with a space, a '/' or a byte outside ASCII made
	 * requests the exchange could not route, refused with nothing
	 * saying which setting was wrong */
	const struct {
		const char *key, *v;
		int may_be_empty, path;
	} names[] = {{"spot_market", c->strat.spot_market, 0, 1},
	             {"perm_market", c->strat.perm_market, 1, 1},
	             {"key_id", c->key_id, 1, 0}};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *v = names[i].v;
		int ok = *v || names[i].may_be_empty;
		for (const char *p = v; ok && *p; p++)
			ok = names[i].path
			         ? (*p >= 'a' && *p <= 'z') ||
			               (*p >= 'A' && *p <= 'Z') ||
			               (*p >= '0' && *p <= '9') || *p == '-' ||
			               *p == '_' || *p == '.'
			         : *p > ' ' && *p < 0x7f;
		if (ok && names[i].path && (!strcmp(v, ".") || !strcmp(v, "..")))
			ok = 0;
		if (!ok) {
			err_set(err, errlen,
			        names[i].path
			            ? "%s must be a market's name (letters, "
			              "digits, - _ .), not \"%s\""
			            : "%s has a space, a control character or a "
			              "byte outside ASCII: \"%s\"",
			        names[i].key, v);
			return -1;
		}
	}
	if (strcmp(c->lend_borrow_mode, "attach") &&
	    strcmp(c->lend_borrow_mode, "listen") &&
	    strcmp(c->lend_borrow_mode, "off")) {
		err_set(err, errlen,
		        "lend_borrow_mode must be attach, listen or off, not "
		        "\"%s\"",
		        c->lend_borrow_mode);
		return -1;
	}
	if (strcmp(c->lend_device, "nbd") && strcmp(c->lend_device, "ublk") &&
	    strcmp(c->lend_device, "auto")) {
		err_set(
		    err, errlen,
		    "lend_device must be nbd, ublk (Linux >= 6.0 with "
		    "ublk_drv loaded) or auto (ublk where /dev/ublk-control "
		    "exists), not \"%s\"",
		    c->lend_device);
		return -1;
	}
	/* listen serves NBD on loopback to whoever connects: no device of
	 * ours, so a ublk there would be silently NBD */
	if (!strcmp(c->lend_device, "ublk") &&
	    strcmp(c->lend_borrow_mode, "attach")) {
		err_set(err, errlen,
		        "lend_device = ublk needs lend_borrow_mode = attach "
		        "(it is %s): set lend_borrow_mode = attach, or "
		        "lend_device = nbd or auto",
		        c->lend_borrow_mode);
		return -1;
	}
	if (!c->lend_tls_cert[0] != !c->lend_tls_key[0]) {
		err_set(err, errlen,
		        "lend_tls_cert and lend_tls_key go together: set both "
		        "for TLS on the lend servers, or neither");
		return -1;
	}
	char lh[CONFIG_STR];
	int lp;
	if (c->lend_listen[0] &&
	    hostport_split(c->lend_listen, lh, sizeof lh, &lp) < 0) {
		err_set(
		    err, errlen,
		    "lend_listen must be HOST:PORT, an IPv6 host in "
		    "brackets (port 0: a free one per contract), not \"%s\"",
		    c->lend_listen);
		return -1;
	}
	/* ramex-lend-server refuses plain TCP off loopback: found at start,
	 * not when the first lend contract is sold and cannot be delivered
	 * (found from outside: the agent started, advertised the endpoint
	 * and its lend server then failed to start for every contract) */
	if (c->lend_listen[0] && !c->lend_tls_cert[0] && !c->lend_plaintext &&
	    !hostport_is_loopback(lh)) {
		err_set(err, errlen,
		        "lend_listen %s is off loopback and plain TCP would carry "
		        "the borrowers' pages in clear: set lend_tls_cert and "
		        "lend_tls_key, or lend_plaintext = yes",
		        c->lend_listen);
		return -1;
	}
	if (!c->spool[0]) {
		err_set(err, errlen,
		        "spool must name a file: reports are written "
		        "there before they are sent");
		return -1;
	}
	if (!strcmp(c->backend, "sim") && c->sim_usage > c->sim_total) {
		err_set(err, errlen, "sim_usage_pages exceeds sim_total_pages");
		return -1;
	}
	if (!strcmp(c->backend, "sim")) {
		struct simload_config l;
		if (config_sim_load(c, &l, err, errlen) < 0)
			return -1;
	}
	if (log_level_parse(c->log_level) < 0) {
		err_set(err, errlen,
		        "log_level must be debug, info, warn or error");
		return -1;
	}
	if (!(w = wsest_new(&c->est, &why))) {
		err_set(err, errlen, "estimator: %s", why);
		return -1;
	}
	wsest_free(w);
	if ((why = probe_config_check(&c->prb))) {
		err_set(err, errlen, "%s", why);
		return -1;
	}
	if (strcmp(c->probe_via, "auto") && strcmp(c->probe_via, "reclaim") &&
	    strcmp(c->probe_via, "high")) {
		err_set(err, errlen,
		        "probe_via must be auto, reclaim or high, not \"%s\"",
		        c->probe_via);
		return -1;
	}
	if ((why = strategy_config_check(&c->strat))) {
		err_set(err, errlen, "strategy: %s", why);
		return -1;
	}
	return 0;
}

int config_sim_load(const struct agent_config *c, struct simload_config *out,
                    char *err, size_t errlen)
{
	const char *why;

	memset(out, 0, sizeof *out);
	if (simload_kind_parse(c->sim_profile, &out->kind) < 0) {
		err_set(err, errlen,
		        "sim_profile must be steady, diurnal or bursty, not "
		        "\"%s\"",
		        c->sim_profile);
		return -1;
	}
	out->total = c->sim_total;
	out->base = c->sim_usage;
	out->period_s = c->sim_period_s;
	out->seed = (uint64_t)c->sim_seed;
	out->swing = c->sim_swing;
	if (out->kind != SIMLOAD_STEADY && out->swing == 0 &&
	    out->total > out->base) {
		/* half the free pages, and a sine may not dip below zero */
		out->swing = (out->total - out->base) / 2;
		if (out->kind == SIMLOAD_DIURNAL && out->swing > out->base)
			out->swing = out->base;
	}
	if ((why = simload_check(out))) {
		err_set(err, errlen,
		        "sim_profile %s: %s (sim_total_pages, "
		        "sim_usage_pages, sim_swing_pages, sim_period_s)",
		        c->sim_profile, why);
		return -1;
	}
	return 0;
}

static void print_value(const struct agent_config *c, const struct setting *s,
                        FILE *f)
{
	const char *p = (const char *)c + s->off;
	if (s->type == T_STR)
		fprintf(f, "%s", p);
	else if (s->type == T_BOOL)
		fprintf(f, "%s", *(const int *)p ? "yes" : "no");
	else if (s->type == T_INT)
		fprintf(f, "%d", *(const int *)p);
	else
		fprintf(f, "%lld", (long long)(*(const int64_t *)p / s->scale));
}

void config_help(FILE *f)
{
	struct agent_config d;
	config_default(&d);
	fprintf(f,
	        "usage: ramex-agent [--config=FILE] [--SETTING=VALUE ...]\n"
	        "\n"
	        "The node agent: measures this machine's working set, trades "
	        "the spare\nmemory on ramexd, delivers what it sells and "
	        "reports what it delivered.\nSettings come from the defaults, "
	        "then FILE (lines of `key = value`),\nthen the flags "
	        "(--key=value or --key value).\n\n"
	        "SIGTERM or SIGINT: cancel the open offers, give every page "
	        "back, recall\nspot sales and end borrows, send the last usage "
	        "reports, exit.\nExit status: 0 after a clean stop, 1 when it "
	        "could not start (see the\nlog on stderr), 2 for a bad "
	        "setting. Operations: docs/agent.md.\n\n"
	        "settings (default in brackets):\n");
	for (size_t i = 0; i < NSETTINGS; i++) {
		fprintf(f, "  --%-20s %s [", settings[i].key, settings[i].help);
		print_value(&d, &settings[i], f);
		fprintf(f, "]\n");
	}
}

void config_dump(const struct agent_config *c, FILE *f)
{
	for (size_t i = 0; i < NSETTINGS; i++) {
		fprintf(f, "%s = ", settings[i].key);
		print_value(c, &settings[i], f);
		fputc('\n', f);
	}
}
