/* tlserr.c — see tlserr.h. */
#include "common/tlserr.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <string.h>

const char *tlserr_reason(char *buf, size_t len, const char *dflt)
{
	unsigned long e, sys = 0, last = 0;
	int nopem = 0;
	while ((e = ERR_get_error()) != 0) {
		if (ERR_GET_LIB(e) == ERR_LIB_SYS && !sys)
			sys = e;
		nopem |= ERR_GET_LIB(e) == ERR_LIB_PEM &&
		         ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
		last = e; /* the most specific, for a handshake's failure */
	}
	const char *r = last ? ERR_reason_error_string(last) : NULL;
	if (sys)
		snprintf(buf, len, "%s", strerror(ERR_GET_REASON(sys)));
	else if (nopem)
		snprintf(buf, len, "no PEM block in it (-----BEGIN ...)");
	else
		snprintf(buf, len, "%s", r ? r : dflt);
	return buf;
}
