/*
 * idem_health.h - readiness: whether the store answers, cached so that a
 * load balancer polling it costs the store almost nothing.
 *
 * A check is one ping of the store (idem_store_ping), run by a thread of
 * the worker's own (started at the first question), never by the thread
 * asking: a store that hangs costs the asker at most IDEM_HEALTH_WAIT_MS.
 * A result serves every question for IDEM_HEALTH_HOLD_MS after it
 * arrived, so a worker checks at most once per IDEM_HEALTH_HOLD_MS,
 * however often it is asked.
 *
 * Ownership: an idem_health borrows its store (NULL: no store, always
 * ready), which must outlive it.
 */
#ifndef IDEM_HEALTH_H
#define IDEM_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "idem_store.h"

#define IDEM_HEALTH_HOLD_MS 1000     /* how long a result is used */
#define IDEM_HEALTH_WAIT_MS 1000     /* how long a question waits */

typedef struct idem_health idem_health;

/* The health of store (borrowed; NULL is fine).  Starts no thread yet.
 * Returns IDEM_OK with *out (free with idem_health_free) or
 * IDEM_ERR_NOMEM. */
idem_err idem_health_new(idem_store *store, idem_health **out);

/*
 * Whether the store answered its last check, at most IDEM_HEALTH_HOLD_MS
 * ago, or a new one within IDEM_HEALTH_WAIT_MS.  Returns IDEM_OK, or
 * IDEM_ERR_STORE with why (size bytes) saying what failed.
 */
idem_err idem_health_ready(idem_health *h, char *why, size_t size);

/* Stops the thread (after the check it may be in) and frees h.  NULL is
 * fine. */
void idem_health_free(idem_health *h);

#endif
