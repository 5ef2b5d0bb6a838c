/*
 * ctl_out.h — ramexctl's output for people: a call to the server and what
 * it answered shown as an aligned table, "key value" lines or an object
 * with its arrays as tables under it, each field by its name (every price
 * exact in $ per page-year, every amount to the cent, every page count
 * with its size, every *_ns as an RFC 3339 time); with --json the
 * server's JSON as it came. Failures go to stderr with the server's
 * problem title, detail and reason. Unit formatting is ctl_units.h.
 */
#ifndef RAMEX_CTL_OUT_H
#define RAMEX_CTL_OUT_H

#include "exchange/ctl/ctl_args.h"
#include "exchange/ctl/ctl_http.h"

#include <jansson.h>

#define CTL_MAX_COLS 16 /* columns of a table made from its rows' keys */

/* An aligned table of rows (an array of objects) with these columns
 * (NULL-terminated). */
void ctl_print_table(json_t *rows, const char *const *cols);
/* A table whose columns are the scalar keys of the first row. */
void ctl_print_rows(json_t *rows);
/* One object as "key value" lines; its arrays of objects are left out. */
void ctl_print_object(json_t *o);
void ctl_print_json(json_t *j);
/* A table with those of cols that the rows have; their own keys when
 * none is there or cols is NULL. */
void ctl_print_some(json_t *rows, const char *const *cols);
/* An object's scalar fields, then each array in it under its name. */
void ctl_print_doc(json_t *o, const char *const *line_cols);
/* A page of a list ({"items", "next"}), and how to get the next page. */
void ctl_print_list(json_t *j, const char *const *cols);

/* Says on stderr why a call of x's command failed (the API's field names
 * as the command's options); returns its exit code e. */
int ctl_report_failure(const struct ctl_ctx *x, enum ctl_exit e,
                       struct ctl_http_resp *r);

/* Makes a call; on success leaves the JSON in *out (caller decrefs),
 * else says why and returns the exit code. */
int ctl_call(struct ctl_ctx *x, const char *method, const char *path,
             json_t *body, json_t **out);
/* A call (body is consumed), then its answer printed: JSON as it came
 * with --json, else a table of .items, a table, or an object. */
int ctl_call_show(struct ctl_ctx *x, const char *method, const char *path,
                  json_t *body, const char *const *cols);

#endif
