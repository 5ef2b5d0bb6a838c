/*
 * fuzz_lend_proto.c — libFuzzer target for the lend protocol's frames, the
 * bytes a peer sends: every decoder (HELLO, AUTH, WELCOME, request and
 * reply headers, the METER payload) and the request check take any bytes
 * without reading past the frame, and what they accept encodes and
 * decodes back to itself (an AUTH to its very bytes); the meter
 * file line a child writes parses only into a report that formats back to
 * a line that parses to the same report.
 */
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
	fprintf(stderr, "fuzz_lend_proto: %s\n", what);
	abort();
}

/* A frame of exactly n bytes in its own allocation, so that ASan sees a
 * read past it. */
static uint8_t *frame(const uint8_t *d, size_t sz, size_t n)
{
	uint8_t *f = malloc(n);
	if (!f)
		abort();
	memset(f, 0, n);
	memcpy(f, d, sz < n ? sz : n);
	return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[128];
	uint8_t *f;

	f = frame(data, size, LEND_HELLO_LEN);
	struct lend_hello h;
	if (lend_hello_decode(f, &h) == 0) {
		lend_hello_encode(&h, out);
		if (lend_hello_decode(out, &h) != 0)
			die("an accepted HELLO does not decode again");
	}
	free(f);

	f = frame(data, size, LEND_AUTHR_LEN);
	struct lend_auth a;
	int more = lend_auth_decode(f, &a);
	if (more == 0 || (more == 1 && lend_auth_role_decode(
	                                   f + LEND_AUTH_LEN, &a) == 0)) {
		size_t n = lend_auth_encode(&a, out);
		if (n != (more ? LEND_AUTHR_LEN : LEND_AUTH_LEN) ||
		    memcmp(out, f, n) != 0)
			die("an accepted AUTH encodes to other bytes");
	}
	free(f);

	f = frame(data, size, LEND_WELCOME_LEN);
	struct lend_welcome w;
	lend_welcome_decode(f, &w);
	(void)lend_err_str(w.status);
	free(f);

	for (int is_reply = 0; is_reply < 2; is_reply++) {
		f = frame(data, size, LEND_HDR_LEN);
		struct lend_hdr q, q2;
		if (lend_hdr_decode(f, is_reply, &q) == 0) {
			/* a field the other direction does not carry is
			 * dropped; after that, bytes and fields agree */
			uint8_t out2[LEND_HDR_LEN];
			lend_hdr_encode(&q, is_reply, out);
			if (lend_hdr_decode(out, is_reply, &q2) != 0)
				die("an encoded header does not decode");
			lend_hdr_encode(&q2, is_reply, out2);
			if (memcmp(out, out2, LEND_HDR_LEN) != 0)
				die("a header does not round-trip");
			uint64_t pages = size > LEND_HDR_LEN
			                     ? data[LEND_HDR_LEN] * 4099u
			                     : 1;
			enum lend_err e = lend_hdr_check(&q, pages);
			if (e == LEND_OK &&
			    (q.type == LEND_READ || q.type == LEND_WRITE ||
			     q.type == LEND_TRIM) &&
			    (q.count == 0 || q.count > LEND_MAX_REQ_PAGES ||
			     q.page >= pages || q.count > pages - q.page))
				die("a request outside the contract passed");
			(void)lend_err_str(e);
		}
		free(f);
	}

	f = frame(data, size, LEND_METER_WIRE);
	struct lend_meter_report r, r2;
	lend_meter_decode(f, &r);
	free(f);

	/* the meter file's line: NUL-terminated text from a child */
	char *line = malloc(size + 1);
	if (!line)
		abort();
	memcpy(line, data, size);
	line[size] = 0;
	if (lend_meter_parse(line, &r) == 0) {
		char buf[1024];
		if (lend_meter_format(&r, buf, sizeof buf) < 0)
			die("a parsed meter line does not format");
		if (lend_meter_parse(buf, &r2) != 0 ||
		    memcmp(&r, &r2, sizeof r) != 0)
			die("a meter line does not round-trip");
	}
	free(line);
	return 0;
}
