/*
 * input.h — strict reading of request bodies and query strings.
 *
 * Every field is checked for its JSON type and its range before a command
 * is made from it; a wrong type, an unknown field, a real where an integer
 * belongs or a number out of range answers 400 with the field's name, and
 * nothing changes. Each function replies itself and returns -1 on error, so
 * handlers read as a list of fields.
 */
#ifndef RAMEX_INPUT_H
#define RAMEX_INPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_req;

/*
 * The ranges of the API's integers, one place for all handlers; each field
 * of api/openapi.yaml carries its minimum and maximum from here. A value
 * outside is a 400 naming the field and the range, and a limit is chosen so
 * that nothing derived from it (pages x price, ns since 1970) overflows.
 */
#define IN_ID_MAX      INT64_MAX                 /* ids are bigint */
#define IN_PAGES_MAX   (INT64_C(1) << 36)        /* 256 TiB of 4 KiB pages */
#define IN_PRICE_MAX   INT64_C(1000000000000000) /* n$/page-year: $1 000 000 */
#define IN_TIME_NS_MAX INT64_C(7258118400000000000) /* 2200-01-01 UTC */
#define IN_YEAR_S      INT64_C(31536000)
/* perm-YYYY: its term ends at YYYY+1-01-01, at most IN_TIME_NS_MAX */
#define IN_PERM_YEAR_MIN 2000
#define IN_PERM_YEAR_MAX 2199

/* 400 when `o` has a key not in the NULL-terminated list `known`. */
int in_known(struct http_req *rq, json_t *o, const char *const *known);
/*
 * The typed fields. Absent: -1 and 400 when required, else 0 with *out
 * untouched; present: 1. `null` is not absent: no field of the API takes
 * null (api/openapi.yaml), so it is a 400 that says to leave the field out.
 */
/* Integer field in [min, max]. */
int in_int(struct http_req *rq, json_t *o, const char *key, bool required,
           int64_t min, int64_t max, int64_t *out);
/* String of 1..maxlen characters from [A-Za-z0-9._:-] when `ident`. */
int in_str(struct http_req *rq, json_t *o, const char *key, bool required,
           bool ident, char *out, size_t outlen);
/* A note in a person's words (why an order was cancelled, a node paused,
 * a contract moved): 1 to IN_NOTE_CHARS characters, counted as the
 * database counts them (UTF-8 code points, not bytes: 150 letters of
 * Hebrew are 300 bytes), into out of IN_NOTE_BUF bytes. */
#define IN_NOTE_CHARS 200
#define IN_NOTE_BUF   (4 * IN_NOTE_CHARS + 1)
int in_note(struct http_req *rq, json_t *o, char out[IN_NOTE_BUF]);
int in_bool(struct http_req *rq, json_t *o, const char *key, bool *out);
/* A required name of a team or an account, as the schema wants it: 1 to
 * 63 characters of a-z 0-9 . _ -, the first a letter or digit (out holds
 * 64 bytes). */
int in_name(struct http_req *rq, json_t *o, const char *key, char *out,
            size_t outlen);

/* Query parameter as an integer in [min, max]; absent: 0 (def kept). */
int in_qint(struct http_req *rq, const char *name, int64_t min, int64_t max,
            int64_t *out);
/* Path parameter {name} as a positive integer. */
int in_pid(struct http_req *rq, const char *name, int64_t *out);
/* The body of a request that takes no fields: none, or {}. 0; else -1
 * after answering 400 (malformed JSON, not an object, any field), so that
 * a body is never taken for something it does not say. */
int in_no_fields(struct http_req *rq);
/* Query parameter that must be one of the NULL-terminated `allowed`. */
int in_qenum(struct http_req *rq, const char *name, const char *const *allowed,
             const char **out);

/* Strict decimal int64; 0 on success. */
int in_parse_i64(const char *s, int64_t *out);

/*
 * UTF-8 (RFC 3629: shortest forms, no surrogates, nothing above U+10FFFF).
 * Whatever ramexd sends is valid UTF-8, or the JSON it is put in cannot be
 * made: request targets are checked with in_utf8_valid at the edge, text is
 * cut with in_utf8_cut, and text of unknown origin (a library's message)
 * goes through in_utf8_clean.
 */
bool in_utf8_valid(const char *s, size_t n);
/* The longest prefix of s (a C string) of at most max bytes that ends on
 * a character boundary, for "%.*s". */
int in_utf8_cut(const char *s, size_t max);
/* Copies n bytes of src into dst (cap >= 4) as valid UTF-8, always
 * NUL-terminated: each byte that does not begin a valid character (and a
 * NUL) becomes U+FFFD, and the copy stops before a character that would
 * not fit. Returns the length written. */
size_t in_utf8_clean(char *dst, size_t cap, const char *src, size_t n);

/* Whether `name` is a market's name: "spot", or "perm-YYYY" with a year
 * from 2000 to 2199 (the permanent-offline product of that year, brief.md;
 * its term ends within the exchange's time range). The
 * one rule for a market created through the API and one named in the
 * `markets` setting (owner.c). */
bool in_market_name_ok(const char *name);
/* Whether every contract a market with these limits can make is billable
 * (invoice_market_check, from now_ns to its term's end or, spot, to
 * IN_TIME_NS_MAX): 0, or -1 with err saying the largest price_max and
 * max_pages allowed. The one rule for POST /v1/markets (422) and for the
 * markets ramexd finds at start. */
int in_market_billable(const char *name, int64_t max_pages, int64_t price_max,
                       int64_t now_ns, char *err, size_t errlen);

#endif
