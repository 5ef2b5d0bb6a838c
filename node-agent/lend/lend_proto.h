/*
 * lend_proto.h — the wire format between a borrower's and a lender's agent.
 *
 * A lend contract moves 4096-byte pages between two agents over one TCP
 * connection (TLS when configured). This module owns the byte layout of every
 * frame and the contract authentication (HMAC-SHA256 challenge-response keyed
 * by the per-contract secret the exchange gives both sides). It is pure: it
 * encodes and decodes buffers and computes MACs; lend_conn does the I/O.
 * docs/lending.md describes the protocol in prose; this header is the truth.
 *
 * Connection, all integers big-endian:
 *
 *   S: HELLO    magic "RAMXLND1", version u32, flags u32, server_nonce[32]
 *               (flags: LEND_HELLO_ROLES when the lender takes AUTHR)
 *   C: AUTH     magic "RAMXAUTH", contract u64, client_nonce[32], mac[32]
 *      or AUTHR magic "RAMXAUTR", the same 72 bytes, role u32, reserved u32
 *      (a connection for one role of the direct path, enum lend_role_conn)
 *   S: WELCOME  status u32, reserved u32, pages u64, mac[32]
 *      (status != 0: refused; the server closes the connection)
 *   C: request  header (32 bytes) [+ count * 4096 bytes for WRITE]
 *   S: reply    header (32 bytes) [+ count * 4096 bytes for READ,
 *                                  + LEND_METER_WIRE bytes for METER]
 *   S: NOTICE   a reply header with type LEND_NOTICE and handle 0, sent
 *               between replies whenever the lender recalls the pages
 *
 * Direct path (docs/lending.md): a borrower whose kernel speaks to the
 * lender itself opens two connections per contract. The DATA one is, after
 * WELCOME, in NBD's transmission phase (lend_nbd.h: requests and simple
 * replies, no NBD handshake: the size is WELCOME's pages), so that nbd.ko
 * can be handed its socket; the CONTROL one carries the frames above
 * (NOTICE, METER, RELEASE, BYE; READ/WRITE/TRIM work there too). A lender
 * without LEND_HELLO_ROLES in its HELLO is older: the borrower refuses to
 * go on before it sends anything. The role is outside the MACs: it only
 * picks which of the authenticated borrower's own uses a connection
 * serves.
 *
 * The borrower's MAC proves it holds the contract secret and answers this
 * connection's fresh server nonce (no replay); the lender's MAC proves the
 * same to the borrower (no impostor lender). Under TLS both MACs also cover
 * 32 bytes exported from the TLS session (RFC 5705), so an authenticated
 * exchange cannot be relayed into another TLS session.
 */
#ifndef RAMEX_LEND_PROTO_H
#define RAMEX_LEND_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define LEND_PAGE_SIZE     4096
#define LEND_VERSION       1
#define LEND_NONCE_LEN     32
#define LEND_MAC_LEN       32
#define LEND_SECRET_LEN    32 /* bytes; 64 hex digits on the command line */
#define LEND_BINDING_LEN   32 /* TLS exporter output; zeros in plain TCP */
#define LEND_HELLO_LEN     48
#define LEND_AUTH_LEN      80
#define LEND_WELCOME_LEN   48
#define LEND_AUTHR_LEN     88 /* AUTH with a role */
#define LEND_HELLO_ROLES   1u /* HELLO flags: AUTHR understood */
#define LEND_HDR_LEN       32
#define LEND_MAX_REQ_PAGES 256 /* 1 MiB per request bounds every buffer */
/* A borrower keeps at most this many pages in flight (requests sent, not
 * yet answered): after a lost link the lender's meter is at most this far
 * ahead of the borrower's (lend_meter_reconcile). */
#define LEND_WINDOW_PAGES (4 * LEND_MAX_REQ_PAGES)
#define LEND_MAX_PAGES     (INT64_C(1) << 28) /* 1 TiB per contract */
#define LEND_REQ_MAGIC     0x524d5251u        /* "RMRQ" */
#define LEND_REP_MAGIC     0x524d5250u        /* "RMRP" */
#define LEND_TLS_LABEL     "EXPORTER-ramex-lend-v1"

/* Request types; a reply carries the type of its request. */
enum lend_type {
	LEND_READ = 1,    /* count pages from page: reply carries the data */
	LEND_WRITE = 2,   /* count pages from page: request carries the data */
	LEND_TRIM = 3,    /* the borrower no longer needs these pages */
	LEND_FLUSH = 4,   /* every earlier reply is final (pages are in RAM) */
	LEND_METER = 5,   /* the lender's meter, LEND_METER_WIRE bytes */
	LEND_RELEASE = 6, /* the borrower took its pages back: free them */
	LEND_BYE = 7,     /* orderly close */
	LEND_NOTICE = 16, /* lender to borrower: recall, extra = notice in ms */
};

/* Errors in a reply (and WELCOME status); 0 is success. */
enum lend_err {
	LEND_OK = 0,
	LEND_E_RANGE = 1,    /* page range outside the contract */
	LEND_E_INVAL = 2,    /* malformed request */
	LEND_E_AUTH = 3,     /* WELCOME: the MAC does not match */
	LEND_E_CONTRACT = 4, /* WELCOME: this lender serves another contract */
	LEND_E_VERSION = 5,  /* WELCOME: protocol version not spoken */
	LEND_E_RELEASED = 6, /* the pages were freed after a recall */
	LEND_E_UNSUPPORTED = 7 /* unknown request type */
};

/* What an AUTHR asks one connection to be (AUTH: LEND_CONN_LEND). */
enum lend_role_conn {
	LEND_CONN_LEND = 0,    /* the lend protocol, everything on one stream */
	LEND_CONN_DATA = 1,    /* NBD transmission phase after WELCOME */
	LEND_CONN_CONTROL = 2, /* the lend protocol beside a DATA connection */
};

struct lend_hello {
	uint32_t version;
	uint32_t flags; /* LEND_HELLO_ROLES or 0; others ignored */
	uint8_t server_nonce[LEND_NONCE_LEN];
};

struct lend_auth {
	uint32_t role; /* enum lend_role_conn; non-zero: sent as AUTHR */
	uint64_t contract;
	uint8_t client_nonce[LEND_NONCE_LEN];
	uint8_t mac[LEND_MAC_LEN];
};

struct lend_welcome {
	uint32_t status; /* enum lend_err */
	uint64_t pages;  /* pages under contract */
	uint8_t mac[LEND_MAC_LEN];
};

/* One request or reply header; unused fields are zero. */
struct lend_hdr {
	uint16_t type;   /* enum lend_type */
	uint16_t flags;  /* must be 0 */
	uint64_t handle; /* echoed in the reply */
	uint64_t page;   /* first page (requests) */
	uint32_t count;  /* pages (requests, READ/WRITE/TRIM replies) */
	uint32_t error;  /* enum lend_err (replies) */
	uint64_t extra;  /* NOTICE: notice period in ms; METER: payload bytes */
};

/* Which side computes a MAC: each side uses a distinct label. */
enum lend_role { LEND_BORROWER, LEND_LENDER };

void lend_hello_encode(const struct lend_hello *h, uint8_t out[LEND_HELLO_LEN]);
/* Returns 0, or -1 when the magic or version is wrong. */
int lend_hello_decode(const uint8_t in[LEND_HELLO_LEN], struct lend_hello *h);
/* Writes an AUTH, or an AUTHR when a->role != 0. Returns its length
 * (LEND_AUTH_LEN or LEND_AUTHR_LEN; out holds LEND_AUTHR_LEN). */
size_t lend_auth_encode(const struct lend_auth *a,
                        uint8_t out[LEND_AUTHR_LEN]);
/* Decodes the first LEND_AUTH_LEN bytes. Returns 0 for an AUTH (role 0),
 * 1 for an AUTHR (read LEND_AUTHR_LEN - LEND_AUTH_LEN more bytes and give
 * them to lend_auth_role_decode), -1 on a wrong magic. */
int lend_auth_decode(const uint8_t in[LEND_AUTH_LEN], struct lend_auth *a);
/* The role's 8 bytes of an AUTHR. Returns 0, or -1 for an unknown role or
 * a reserved field that is not zero. */
int lend_auth_role_decode(const uint8_t in[LEND_AUTHR_LEN - LEND_AUTH_LEN],
                          struct lend_auth *a);
void lend_welcome_encode(const struct lend_welcome *w,
                         uint8_t out[LEND_WELCOME_LEN]);
void lend_welcome_decode(const uint8_t in[LEND_WELCOME_LEN],
                         struct lend_welcome *w);

/* is_reply picks the magic. Decode returns -1 on a wrong magic. */
void lend_hdr_encode(const struct lend_hdr *h, int is_reply,
                     uint8_t out[LEND_HDR_LEN]);
int lend_hdr_decode(const uint8_t in[LEND_HDR_LEN], int is_reply,
                    struct lend_hdr *h);

/*
 * Checks a request against a contract of `pages` pages: type known, flags
 * zero, count within 1..LEND_MAX_REQ_PAGES and inside the contract for
 * READ/WRITE/TRIM. Returns LEND_OK or the error to reply with.
 */
enum lend_err lend_hdr_check(const struct lend_hdr *h, uint64_t pages);

/*
 * The MAC one side sends:
 *   HMAC-SHA256(secret, label || contract_be64 || server_nonce ||
 *               client_nonce || binding)
 * label is "ramex-lend-v1 borrower" or "ramex-lend-v1 lender" (no NUL).
 * binding is the TLS exporter output, or NULL for plain TCP (32 zeros).
 */
void lend_mac(enum lend_role role, const uint8_t secret[LEND_SECRET_LEN],
              uint64_t contract, const uint8_t server_nonce[LEND_NONCE_LEN],
              const uint8_t client_nonce[LEND_NONCE_LEN],
              const uint8_t *binding, uint8_t mac[LEND_MAC_LEN]);
/* Constant-time comparison of two MACs: 1 when equal. */
int lend_mac_equal(const uint8_t a[LEND_MAC_LEN],
                   const uint8_t b[LEND_MAC_LEN]);

/* Parses 64 hex digits into a secret. Returns 0, or -1 with nothing set. */
int lend_secret_parse(const char *hex, uint8_t secret[LEND_SECRET_LEN]);

/* A short lower-case text for an error code, for logs and messages. */
const char *lend_err_str(uint32_t err);

#endif
