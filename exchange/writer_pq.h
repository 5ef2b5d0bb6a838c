/*
 * writer_pq.h — the real connection under the writer's pipeline: each call
 * of struct wpipe_pq (writer_pipe.h) made on libpq, the results read
 * through pgpipe.h (never a loop on NULL), the test fault hook applied as
 * pgpipe_fault_hit does. Nothing else: the pipeline decides, this only
 * carries.
 */
#ifndef RAMEX_WRITER_PQ_H
#define RAMEX_WRITER_PQ_H

#include "exchange/writer_pipe.h"

extern const struct wpipe_pq writer_pq_libpq;

#endif
