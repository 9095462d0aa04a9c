/*
 * idem_replay_cache.h - a bounded, process-local cache of committed
 * answers, in front of a store with a database (MySQL, PostgreSQL).
 *
 * A committed record never changes until it expires (commit, release and
 * takeover only touch in-flight records; purge and idemfcgi-admin only
 * remove expired ones), so a replay may be answered from a copy with no
 * statement at all.  Each entry holds the record's fingerprint (a
 * different request with the key is still a conflict) and its answer, and
 * is served only before its expiry, which the caller computes so that it is
 * never later than the record's expires_at.
 * Over max_bytes, the least recently used entries go first.  Thread-safe:
 * one mutex per cache.
 */
#ifndef IDEM_REPLAY_CACHE_H
#define IDEM_REPLAY_CACHE_H

#include <stdint.h>

#include "idem_store.h"

typedef struct idem_replay_cache idem_replay_cache;

/*
 * A cache holding at most max_bytes of answers (headers and body; the
 * bookkeeping of an entry, about 400 bytes, is counted too).  Returns
 * IDEM_OK with *out (free with idem_replay_cache_free; max_bytes 0 gives
 * NULL, no cache, which every function below accepts), or IDEM_ERR_NOMEM.
 */
idem_err idem_replay_cache_new(uint64_t max_bytes, idem_replay_cache **out);

void idem_replay_cache_free(idem_replay_cache *c);

/*
 * Keeps a copy of resp (borrowed) under k (borrowed), with the record's
 * fingerprint fp, to be served while now < expires_ms (milliseconds on
 * the caller's clock).  An entry
 * larger than an eighth of the cache is not kept; one already there for k
 * is replaced.  Out of memory, nothing is kept.
 */
void idem_replay_cache_put(idem_replay_cache *c, const idem_store_key *k,
    const unsigned char fp[32], const idem_stored_response *resp,
    uint64_t expires_ms);

/*
 * Looks k up at now_ms (on the clock of the expiries given to put).  On a live entry, fp gets the
 * record's fingerprint and *resp a copy of its answer (caller frees with
 * idem_stored_response_clear) and it returns 1; an expired entry is
 * dropped.  Returns 0 when there is none (or no memory for the copy).
 */
int idem_replay_cache_get(idem_replay_cache *c, const idem_store_key *k,
    uint64_t now_ms, unsigned char fp[32], idem_stored_response *resp);

/* The longest a committed answer is served from a cache: what the
 * clocks' rates may drift apart, or a row changed by hand, lasts no
 * longer. */
#define IDEM_REPLAY_CACHE_HOLD_MS 60000

/*
 * What a store with a database keeps of the committed answer resp
 * (borrowed) of k, fingerprint fp, that a statement sent at read_at
 * (idem_boot_ms before it) found with left_us microseconds left to live:
 * served until then, counted from before the read (never past its
 * expires_at), and at most IDEM_REPLAY_CACHE_HOLD_MS.  Nothing when
 * nothing is left.
 */
void idem_replay_cache_keep(idem_replay_cache *c, const idem_store_key *k,
    const unsigned char fp[32], const idem_stored_response *resp,
    uint64_t read_at, int64_t left_us);

/*
 * A reserve answered from c, with no statement: when k's committed answer
 * is there (on CLOCK_BOOTTIME: an entry also ages while the machine is
 * suspended), *out is COMMITTED with its fingerprint and a copy of its
 * answer, marked cached (the middleware counts a replay of it, a request
 * of the record's fingerprint, as replay_cached; another request is its
 * conflict), and it returns 1; else 0.
 */
int idem_replay_cache_reserve(idem_replay_cache *c, const idem_store_key *k,
    idem_reserve_result *out);

/* Entries and bytes held now (0 for no cache). */
void idem_replay_cache_size(idem_replay_cache *c, uint64_t *entries,
    uint64_t *bytes);

#endif
