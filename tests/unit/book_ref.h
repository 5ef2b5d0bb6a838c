/*
 * book_ref.h — a reference model of the order book, for tests only.
 *
 * It implements the rules of exchange/core/book.h in the most obvious way
 * that could work: one plain array of open orders in arrival order, and for
 * every fill a linear scan for the best maker (best price, then earliest
 * arrival). A FOK is decided by running the match on a copy. It is slow on
 * purpose and shares no code with book.c, so that the two agreeing on
 * millions of random commands means something.
 *
 * The model owns its array (capacity orders). Rejection messages are the
 * reason's name; tests compare reasons, not wording.
 */
#ifndef RAMEX_BOOK_REF_H
#define RAMEX_BOOK_REF_H

#include "exchange/core/book.h"

struct book_ref;

/* params must pass book_params_check; NULL when memory is short. */
struct book_ref *book_ref_new(const struct book_params *p);
void book_ref_free(struct book_ref *r);

/* Same contract as book_apply. */
enum book_reject book_ref_apply(struct book_ref *r, const struct book_cmd *c,
                                book_emit_fn emit, void *ctx);

size_t book_ref_count(const struct book_ref *r);

/*
 * Compares everything a caller of `b` can observe with the model: open
 * order count, best bid and ask, depth of both sides, every open order
 * with its fields in priority order (book_foreach), book_get of each, and
 * the sequence number. Returns 0, or -1 with the first difference in err.
 */
int book_ref_compare(const struct book_ref *r, const struct book *b, char *err,
                     size_t errlen);

/* 0 when two events are equal field by field (messages: both non-empty
 * for REJECTED, else both NULL), or -1 with the difference in err. */
int book_ref_event_cmp(const struct book_event *a, const struct book_event *b,
                       char *err, size_t errlen);

#endif
