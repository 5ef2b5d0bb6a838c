/* lend_args.c — command-line helpers for the lending programs. */
#include "node-agent/lend/lend_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lend_args_secret(const char *path, uint8_t secret[LEND_SECRET_LEN],
                     char *err, size_t errlen)
{
	char line[2 * LEND_SECRET_LEN + 4];
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "could not open the secret file %s: %s",
		         path, strerror(errno));
		return -1;
	}
	if (!fgets(line, sizeof line, f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (lend_secret_parse(line, secret) < 0) {
		snprintf(err, errlen,
		         "the secret file %s must hold 64 hex digits (the "
		         "contract secret from the exchange)",
		         path);
		return -1;
	}
	return 0;
}

void lend_args_write_meter(const char *path, const struct lend_meter_report *r)
{
	char line[512], tmp[4096];
	if (!path || lend_meter_format(r, line, sizeof line) < 0)
		return;
	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
		return;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%s\n", line);
	if (fclose(f) == 0)
		rename(tmp, path);
}
