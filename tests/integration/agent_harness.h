/*
 * agent_harness.h — real ramex-agent processes for integration tests
 * (test_agent, test_agent_lend), beside a real ramexd (ramexd_harness.h).
 *
 * agh_init gives an agent its own folder under the test output (spool,
 * status file, node secret, the sim workload's usage file) and the flags
 * every test agent runs with: the sim backend, one-second samples and
 * reports, the spot market. agh_start runs it as a child bound to the test
 * with PR_SET_PDEATHSIG, its log in the agent's folder; agh_signal stops
 * it. Waits are bounded (AGH_WAIT_S): only a broken agent needs the bound.
 */
#ifndef RAMEX_AGENT_HARNESS_H
#define RAMEX_AGENT_HARNESS_H

#include <check.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AGH_WAIT_S 90

struct agh_agent {
	char name[80];
	char dir[512], spool[600], status[600], usage[600], secret[600];
	char log[600];
	char args[32][700];
	int nargs;
	pid_t pid;
	int64_t account;
};

/* The test output folder ($RAMEX_TEST_OUTPUT, else var/test-output). */
const char *agh_out_dir(void);
/* The folder of the built programs: the sanitizer build's when it has
 * ramex-agent, else the normal build's. */
void agh_bin_dir(char *buf, size_t len);
void agh_sleep_ms(int ms);
/* Writes text to path (the test fails when it cannot). */
void agh_write_file(const char *path, const char *text);

/* A fresh folder agh_out_dir()/leaf and the common flags for a sim agent
 * of `total` pages whose workload uses `usage`, signing with key/secret
 * against ramexd on 127.0.0.1:port; `more` (NULL-ended, may be NULL) are
 * extra --key=value flags. */
void agh_init(struct agh_agent *a, const char *leaf, const char *key,
              const char *secret, int port, long total, long usage,
              const char *const *more);
/* One more flag. */
void agh_arg(struct agh_agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void agh_start(struct agh_agent *a);
/* Sends sig and waits; returns the wait status (0 when not running). */
int agh_signal(struct agh_agent *a, int sig);
/* A metric of the agent's status file (-1 when absent). */
int64_t agh_metric(const struct agh_agent *a, const char *name);
/* The integer that a formatted query answers. */
long agh_q(PGconn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Polls the condition every 100 ms until it holds or AGH_WAIT_S passed. */
#define AGH_WAIT_FOR(cond, ...)                                                \
	do {                                                                   \
		int ok_ = 0;                                                   \
		for (int i_ = 0; i_ < AGH_WAIT_S * 10; i_++) {                 \
			if ((cond)) {                                          \
				ok_ = 1;                                       \
				break;                                         \
			}                                                      \
			agh_sleep_ms(100);                                     \
		}                                                              \
		ck_assert_msg(ok_, __VA_ARGS__);                               \
	} while (0)

#endif
