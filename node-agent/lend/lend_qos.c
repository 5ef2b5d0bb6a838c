/* lend_qos.c — the CPU latency request held at 0 µs while I/O is in flight
 * (see the header). */
#include "node-agent/lend/lend_qos.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

int lend_qos_start(struct lend_qos *q, const char *path)
{
	memset(q, 0, sizeof *q);
	q->fd = -1;
	if (!path)
		path = LEND_QOS_PATH;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		const char *hint =
		    e == ENOENT
		        ? "this kernel has no CPU latency device (a kernel "
		          "without CONFIG_CPU_IDLE's PM QoS, or a container "
		          "without it in /dev): idle cores halt as before"
		    : e == EACCES || e == EPERM
		        ? "it is root's alone (mode 0600): run the lender and "
		          "the bridge as root, as the agent does, or give "
		          "their user the device"
		        : "idle cores halt as before";
		snprintf(q->err, sizeof q->err,
		         "idle polling is off: could not open %s: %s", path,
		         strerror(e));
		char p[160], h[240], r[80];
		log_warn("idle polling is off: the CPU latency request cannot "
		         "be held",
		         "path=%s error=%s hint=%s", log_quote(p, sizeof p, path),
		         log_quote(r, sizeof r, strerror(e)),
		         log_quote(h, sizeof h, hint));
		return -1;
	}
	q->fd = fd;
	q->open = 1;
	return 0;
}

/* Asks for `us`; on a failure (the device refuses a value: never seen, but
 * then no later write would do better) logs why and turns itself off. */
static int put(struct lend_qos *q, int32_t us)
{
	if (write(q->fd, &us, sizeof us) == (ssize_t)sizeof us)
		return 0;
	int e = errno;
	char r[80];
	snprintf(q->err, sizeof q->err,
	         "idle polling is off: the CPU latency device refused a "
	         "request: %s",
	         strerror(e));
	log_warn("idle polling is off: the CPU latency device refused a "
	         "request",
	         "value_us=%ld error=%s", (long)us,
	         log_quote(r, sizeof r, strerror(e)));
	lend_qos_stop(q);
	return -1;
}

void lend_qos_busy(struct lend_qos *q)
{
	if (!q->open)
		return;
	q->until_ns = clock_mono_ns() + (int64_t)LEND_QOS_LINGER_US * 1000;
	if (q->held)
		return;
	if (put(q, 0) == 0) {
		q->held = 1;
		q->holds++;
	}
}

int64_t lend_qos_idle(struct lend_qos *q)
{
	if (!q->open || !q->held)
		return -1;
	int64_t left = q->until_ns - clock_mono_ns();
	if (left > 0)
		return (left + 999999) / 1000000;
	q->held = 0;
	(void)put(q, LEND_QOS_NO_LIMIT);
	return -1;
}

void lend_qos_stop(struct lend_qos *q)
{
	if (!q->open)
		return;
	/* closing drops the request whatever it said */
	close(q->fd);
	q->fd = -1;
	q->open = 0;
	q->held = 0;
}

int64_t lend_qos_system_us(const char *path)
{
	int fd = open(path ? path : LEND_QOS_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int32_t v;
	ssize_t n = read(fd, &v, sizeof v);
	close(fd);
	return n == (ssize_t)sizeof v ? v : -1;
}
