/*
 * tlserr.h — why an OpenSSL call failed, in words a person can act on:
 * the one reading of OpenSSL's error queue that the agent's https client
 * (node-agent/http1_io.c) and the lending programs (lend_conn.c) share.
 * OpenSSL's own text ("error:05880002:x509 certificate routines::system
 * lib") names a code, not the cause.
 */
#ifndef RAMEX_TLSERR_H
#define RAMEX_TLSERR_H

#include <stddef.h>

/* Drains this thread's OpenSSL error queue into buf and returns buf: a
 * system error's text ("No such file or directory"), "no PEM block in it
 * (-----BEGIN ...)" for a file that is not PEM, else the most specific
 * reason's words without the code ("certificate verify failed"); `dflt`
 * when the queue is empty. */
const char *tlserr_reason(char *buf, size_t len, const char *dflt);

#endif
