/*
 * config.h — ramex-agent's settings: defaults, a `key = value` file and
 * `--key=value` flags, in that order of precedence (flags win).
 *
 * Every setting lives in one table in config.c with its type, default and
 * help line, so --help, the file parser and the flags cannot disagree. The
 * module owns struct agent_config and nothing else; it embeds the
 * estimator's and the strategy's configurations, which it fills and checks
 * through their own modules.
 */
#ifndef RAMEX_AGENT_CONFIG_H
#define RAMEX_AGENT_CONFIG_H

#include "node-agent/core/probe.h"
#include "node-agent/core/strategy.h"
#include "node-agent/core/wsest.h"

#include <stddef.h>
#include <stdio.h>

#define CONFIG_STR 256

struct agent_config {
	char exchange_url[CONFIG_STR]; /* "http://127.0.0.1:8080" */
	char key_id[CONFIG_STR];       /* this node's key id */
	char secret_file[CONFIG_STR];  /* file holding the node secret */
	char ca_file[CONFIG_STR];      /* CA bundle for https, "" = system */
	char backend[16];              /* sim | cgroup | kmod */
	char cgroup[CONFIG_STR];       /* cgroup v2 directory (cgroup) */
	rx_pages cgroup_pages;         /* cgroup: pages when nothing sold */
	char kmod_device[CONFIG_STR];
	rx_pages sim_total;              /* sim: machine pages */
	rx_pages sim_usage;              /* sim: pages the workload uses */
	char sim_usage_file[CONFIG_STR]; /* sim: usage re-read from, "" off */
	char sim_profile[16];            /* sim: steady | diurnal | bursty */
	rx_pages sim_swing;   /* sim: diurnal amplitude, highest burst */
	int64_t sim_period_s; /* sim: a diurnal day, a bursty slot */
	int64_t sim_seed;     /* sim: diurnal phase, which slots burst */
	/* sim: pages a second moves take, as on the real path (0: at once) */
	int64_t sim_offline_rate, sim_online_rate, sim_lend_rate;
	rx_pages managed_pages; /* pages traded; 0 = MemTotal */
	char spool[CONFIG_STR];
	char status_file[CONFIG_STR]; /* metrics in Prometheus text, "" off */
	char log_level[16];
	int64_t sample_s;    /* seconds between samples */
	int64_t report_s;    /* seconds between usage reports */
	int events;          /* listen to /v1/events */
	int64_t poll_s;      /* contract listing interval with events up */
	int idle_sampling;   /* use page_idle/bitmap when present */
	int64_t idle_stride; /* sample every n-th page frame */
	int mglru;           /* use MGLRU generations when present */
	int mglru_enable;    /* switch MGLRU on when it is off (root) */
	char mglru_file[CONFIG_STR]; /* debugfs lru_gen */
	/* lend contracts' data path (lendsup.h, docs/lending.md) */
	char lend_listen[CONFIG_STR];    /* HOST:PORT; "" = serve no lends */
	char lend_advertise[CONFIG_STR]; /* HOST[:PORT] for the exchange */
	char lend_bin_dir[CONFIG_STR];   /* "" = the agent's directory */
	char lend_borrow_mode[16];       /* attach | listen | off */
	char lend_nbd_device[CONFIG_STR];
	char lend_tls_cert[CONFIG_STR]; /* lender: TLS when cert and key set */
	char lend_tls_key[CONFIG_STR];
	char lend_tls_ca[CONFIG_STR]; /* borrower: TLS, trusting this CA */
	int lend_plaintext; /* allow plain TCP off loopback (both ends) */
	/* borrower: a request the lender leaves unanswered this long loses
	 * the lender (ramex-lend-nbd --reply-timeout-ms) */
	int64_t lend_reply_timeout_ms;
	/* SCHED_IDLE threads keeping cores out of idle while requests are in
	 * flight (--keep-awake of ramex-lend-nbd and ramex-lend-server) */
	int64_t lend_keep_awake;
	/* the CPU latency limit held at 0 µs while requests are in flight,
	 * so idle cores poll instead of halting (--idle-poll of both) */
	int lend_idle_poll;
	/* borrower: nbd.ko on the lender's own connection (ramex-lend-nbd
	 * --direct) where it can be: see config_lend_direct */
	int lend_direct;
	/* borrower, attach mode: the device the borrowed pages are swapped
	 * to: nbd | ublk | auto (see config_lend_ublk) */
	char lend_device[16];
	struct wsest_config est;
	struct strategy_config strat;
	int probe; /* active probing through memory.reclaim or memory.high */
	char probe_via[16];          /* auto | reclaim | high */
	char probe_cgroup[CONFIG_STR]; /* kmod backend: the cgroup probed */
	struct probe_config prb;
};

/* Fills `c` with the defaults. */
void config_default(struct agent_config *c);

/* Whether a borrower's bridge runs the direct path: lend_direct set,
 * lend_borrow_mode attach (nbd.ko takes the socket) and no lend_tls_ca
 * (nbd.ko cannot speak TLS; such a lend keeps the bridge between). */
int config_lend_direct(const struct agent_config *c);

/* Whether a borrower serves its pages as a ublk device (ramex-lend-ublk)
 * rather than through nbd.ko: lend_borrow_mode attach and lend_device
 * ublk, or auto with `ublk_control` (/dev/ublk-control) present. Decided
 * per contract, so a module loaded later counts. */
int config_lend_ublk(const struct agent_config *c, const char *ublk_control);

/* Reads `key = value` lines ('#' starts a comment). Returns 0, or -1 with
 * err naming the file, line and problem. */
int config_load(struct agent_config *c, const char *path, char *err,
                size_t errlen);

/* Sets one setting from text. Returns 0, or -1 with err set. */
int config_set(struct agent_config *c, const char *key, const char *value,
               char *err, size_t errlen);

/* Defaults, then --config=FILE (if given), then every other --key=value
 * or --key value. Returns 0, 1 when --help was asked for, -1 on error. */
int config_args(struct agent_config *c, int argc, char **argv, char *err,
                size_t errlen);

/* Checks the whole configuration; returns 0 or -1 with err set. */
int config_check(const struct agent_config *c, char *err, size_t errlen);

struct simload_config;
/* The sim backend's workload profile (node-agent/core/simload.h) from
 * the sim_* settings; returns 0, or -1 with err naming the setting. */
int config_sim_load(const struct agent_config *c, struct simload_config *out,
                    char *err, size_t errlen);

/* Prints usage and every setting with its default and help line. */
void config_help(FILE *f);

/* Writes the effective configuration as a config file (secrets are only
 * ever file names, so this is safe to log). */
void config_dump(const struct agent_config *c, FILE *f);

#endif
