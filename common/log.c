/* log.c — logfmt lines on stderr; see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_comp = "ramex";
static enum log_level log_min = LOG_INFO;

void log_init(const char *component, enum log_level min_level)
{
	log_comp = component;
	log_min = min_level;
}

int log_level_parse(const char *s)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *log_quote(char *buf, int len, const char *s)
{
	int o = 0;
	if (len < 3)
		return "\"\"";
	buf[o++] = '"';
	/* an optional value that is absent (a JSON null: a pause without a
	 * note) is logged as "", never read through */
	if (!s)
		s = "";
	for (; *s && o < len - 3; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 0x20) {
			buf[o++] = ' ';
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o++] = '"';
	buf[o] = 0;
	return buf;
}

void log_msg(enum log_level level, const char *msg, const char *kv, ...)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	char line[2048], q[512];
	struct timespec ts;
	struct tm tm;
	int n;

	if (level < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(
	    line, sizeof line,
	    "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s comp=%s msg=%s",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	    tm.tm_sec, ts.tv_nsec / 1000000, names[level], log_comp,
	    log_quote(q, sizeof q, msg));
	if (kv && n > 0 && n < (int)sizeof line - 2) {
		va_list ap;
		line[n++] = ' ';
		va_start(ap, kv);
		int m = vsnprintf(line + n, sizeof line - (size_t)n, kv, ap);
		va_end(ap);
		n = m < 0 ? n : n + m;
	}
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	/* One write so concurrent threads never interleave within a line. */
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}
