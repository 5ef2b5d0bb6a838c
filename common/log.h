/*
 * log.h — structured logs for every ramex daemon.
 *
 * One line per event on stderr in logfmt (`ts=… level=… comp=… msg="…" k=v`),
 * so that journald, grep and log shippers all read it. The module owns the
 * process-wide level and component name, set once at start-up; it is the only
 * global state outside the I/O edges and holds no locks (one write(2) a line).
 */
#ifndef RAMEX_LOG_H
#define RAMEX_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_init(const char *component, enum log_level min_level);
/* Parses "debug", "info", "warn" or "error"; returns -1 for anything else. */
int log_level_parse(const char *s);

/* `msg` is a short lower-case sentence; `kv` is printf-style key=value pairs
 * (may be NULL). Values with spaces must be quoted by the caller, or passed
 * through log_quote. */
void log_msg(enum log_level level, const char *msg, const char *kv, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies `s` into `buf` as a logfmt-safe quoted value; returns buf. A NULL
 * `s` (an absent optional value) is written as "". */
const char *log_quote(char *buf, int len, const char *s);

#define log_debug(msg, ...) log_msg(LOG_DEBUG, msg, __VA_ARGS__)
#define log_info(msg, ...)  log_msg(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...)  log_msg(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_msg(LOG_ERROR, msg, __VA_ARGS__)

#endif
