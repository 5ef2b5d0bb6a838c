/*
 * err.c — see err.h.
 */
#include "common/err.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

size_t err_utf8_prefix(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = n, back = 0;

	/* The last character's lead byte lies at most 3 bytes back. */
	while (i > 0 && back < 4 && (u[i - 1] & 0xC0) == 0x80) {
		i--;
		back++;
	}
	if (i == 0)
		return back ? 0 : n;
	unsigned char lead = u[i - 1];
	size_t need = lead < 0x80             ? 1
	              : (lead & 0xE0) == 0xC0 ? 2
	              : (lead & 0xF0) == 0xE0 ? 3
	              : (lead & 0xF8) == 0xF0 ? 4
	                                      : 1; /* not UTF-8: keep as is */
	if (back + 1 < need)
		return i - 1; /* the last character is cut short: drop it */
	return n;
}

int err_vset(char *buf, size_t len, const char *fmt, va_list ap)
{
	if (!buf || len == 0)
		return -1;
	int n = vsnprintf(buf, len, fmt, ap);
	if (n < 0) {
		buf[0] = '\0';
		return -1;
	}
	if ((size_t)n >= len) { /* cut: keep whole characters only */
		size_t keep = err_utf8_prefix(buf, len - 1);
		assert(keep < len);
		buf[keep] = '\0';
	}
	return -1;
}

int err_set(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(buf, len, fmt, ap);
	va_end(ap);
	return -1;
}

int err_fail(struct err *e, int code, const char *fmt, ...)
{
	assert(code != 0);
	if (!e)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	err_vset(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	e->code = code;
	return -1;
}

void err_clear(struct err *e)
{
	if (!e)
		return;
	e->code = 0;
	e->msg[0] = '\0';
}
