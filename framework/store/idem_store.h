/*
 * idem_store.h - where reservations and stored answers live.
 *
 * The idempotency middleware talks to a store only through this table of
 * operations; a store is one file that fills it (idem_store_memory.c, and
 * the MySQL store).  Every operation is atomic with respect to every other
 * operation on the same key, across all threads (and, for a shared store,
 * all processes and nodes).  Times come from the store's own clock; the
 * caller passes only durations.
 *
 * A record is (scope, key) -> a state (idem_record_state), the request's
 * fingerprint, an owner token, the owner's request id, a lease time (when
 * the owner last proved it is alive) and the lease's length (the owner's
 * inflight-ttl, set by whoever takes or renews the record: staleness is
 * judged by it, never by the reader's own policy, so an owner whose
 * inflight-ttl differs from a taker's, after a reload or on another node,
 * is never taken over while it renews in time), an expiry time, the
 * progress of its
 * executions (their last checkpoint: a phase and a JSON state) and, once
 * committed, the answer (status, headers, body).
 *
 * Ownership: keys, tokens, fingerprints and answers passed in are borrowed
 * for the call; what a store returns in idem_reserve_result belongs to the
 * result and is freed by idem_reserve_result_clear.
 */
#ifndef IDEM_STORE_H
#define IDEM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "idemfcgi.h"
#include "idem_key_policy.h"

#define IDEM_KEY_MAX 255        /* bytes of an Idempotency-Key */
#define IDEM_OWNER_MAX 64       /* bytes of an owner token */
#define IDEM_RID_MAX 64         /* bytes of a request id */
#define IDEM_PHASE_MAX 64       /* bytes of a checkpoint's phase */
#define IDEM_PROGRESS_MAX 16384 /* bytes of a checkpoint's JSON state */

/* The states of a record (DESIGN.md 2.8); idem_record_state_names has
 * their names, the MySQL schema's ENUM values. */
typedef enum idem_record_state {
	IDEM_RECORD_IN_FLIGHT = 0, /* an execution holds it (its owner) */
	IDEM_RECORD_COMMITTED,     /* its answer is final */
	IDEM_RECORD_PAUSED,        /* released with progress: held for the
	                            * same request, which resumes it */
	IDEM_RECORD_UNKNOWN,       /* its handler could not tell whether its
	                            * side effect happened */
	IDEM_RECORD_EXPIRED,       /* a tombstone: a committed record past its
	                            * lifetime, its answer dropped (fingerprint,
	                            * first status and commit time kept) until
	                            * its expiry, the tombstone's end */
	IDEM_RECORD__MAX
} idem_record_state;

/* "in_flight", "committed", "paused", "unknown" (static). */
extern const char *const idem_record_state_names[IDEM_RECORD__MAX];

/* The progress of a record's executions: its last checkpoint. */
typedef struct idem_progress {
	char phase[IDEM_PHASE_MAX + 1];  /* "": none */
	char *state;            /* JSON text, NUL-terminated; NULL: none;
	                         * owned by whoever holds the struct */
	size_t state_len;
} idem_progress;

/* Frees p's state and zeroes p. */
void idem_progress_clear(idem_progress *p);
/* A deep copy of src into dst.  Returns IDEM_OK or IDEM_ERR_NOMEM. */
idem_err idem_progress_copy(idem_progress *dst, const idem_progress *src);

/* Which record: the SHA-256 of the scope (all zero for scope = none) and
 * the key as the client sent it. */
typedef struct idem_store_key {
	unsigned char scope[32];
	char key[IDEM_KEY_MAX + 1];
	size_t key_len;
} idem_store_key;


/*
 * One request's dealings with its key's record: made once (by the
 * middleware, idemfcgi-admin or a test) and passed to every operation on
 * the record.  The store reads it and adds to contended, which the caller
 * counts and clears.
 */
typedef struct idem_store_req {
	idem_store_key key;
	unsigned char fp[32];               /* the request's fingerprint */
	char owner[IDEM_OWNER_MAX + 1];     /* its owner token */
	char request_id[IDEM_RID_MAX + 1];
	const idem_key_policy *policy;      /* borrowed; reserve and commit
	                                     * read it */
	char key_hash[17];                  /* the key's hash in log lines
	                                     * (idem_key_hash); "" unset */
	unsigned contended;                 /* out: deadlocks and lock waits
	                                     * the store met on the key for
	                                     * this request, and reserves it
	                                     * gave up as contended */
	int has_progress;                   /* the record has progress (read
	                                     * at reserve or checkpointed):
	                                     * a release pauses it */
	int unanswered;                     /* out: a write of a reserve of
	                                     * this request lost its answer
	                                     * with its connection (applied,
	                                     * or still running on the
	                                     * server): a reservation of its
	                                     * owner may exist, or come into
	                                     * being, though no reserve said
	                                     * so; the caller that does not
	                                     * run deletes it (FORGET) */
} idem_store_req;

/* A stored answer.  headers is "Name: value\r\n" lines. */
typedef struct idem_stored_response {
	int status;
	char *headers;
	size_t headers_len;
	char *body;
	size_t body_len;
} idem_stored_response;

typedef enum idem_reserve_outcome {
	IDEM_RESERVE_ACQUIRED = 0, /* new in_flight record: run the handler */
	IDEM_RESERVE_COMMITTED,    /* a live committed record: see response */
	IDEM_RESERVE_IN_FLIGHT,    /* someone else holds it (or other fp; or
	                            * a paused or unknown record of another
	                            * fingerprint) */
	IDEM_RESERVE_TAKEN_OVER,   /* a stale in_flight record is now ours */
	IDEM_RESERVE_RESUMED,      /* a paused record is now ours: run the
	                            * handler, from its progress */
	IDEM_RESERVE_RECONCILE,    /* a record of unknown outcome is now held
	                            * by us (the policy has reconcile; it
	                            * stays unknown: a crash, a release or a
	                            * sweep leaves it so): run the route's
	                            * reconcile hook */
	IDEM_RESERVE_UNKNOWN,      /* a record of unknown outcome, and no
	                            * reconcile hook: nothing runs */
	IDEM_RESERVE_EXPIRED       /* a live tombstone (a committed record past
	                            * its lifetime), and the policy refuses
	                            * expired keys: nothing runs; see
	                            * first_status and used_age_ms */
} idem_reserve_outcome;

typedef struct idem_reserve_result {
	idem_reserve_outcome outcome;
	/* the record found (not for ACQUIRED): its fingerprint, and for
	 * IN_FLIGHT and TAKEN_OVER its (old) owner and request id, how
	 * long ago its lease was last renewed and the lease's length (0: the
	 * record keeps none) */
	unsigned char fingerprint[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	uint64_t lease_age_ms;
	uint64_t lease_ms;
	/* ACQUIRED: owner and request_id above name the abandoned in-flight
	 * record it replaced (IDEM_STEP_REUSE), or are empty */
	/* COMMITTED: the answer, owned by the result */
	idem_stored_response response;
	/* COMMITTED: read from the store's copy of answers read before
	 * (the replay cache of a store with a database), no statement
	 * sent; the caller
	 * counts it as replay_cached when it replays */
	int cached;
	/* TAKEN_OVER, RESUMED, RECONCILE: the record's progress, owned by
	 * the result */
	idem_progress progress;
	/* EXPIRED: the status first committed, and how long ago */
	int first_status;
	uint64_t used_age_ms;
	/* ACQUIRED over a live tombstone (the policy runs expired keys) */
	int expired_run;
} idem_reserve_result;

typedef struct idem_store idem_store;

typedef struct idem_store_stats {
	uint64_t entries;       /* records held */
	uint64_t in_flight;     /* of which in flight */
	uint64_t evictions;     /* committed records evicted to make room */
	uint64_t unknown;       /* records of unknown outcome */
	uint64_t unknown_age_ms; /* since the oldest of them was reserved */
	uint64_t tombstones;    /* tombstones kept (state expired) */
	uint64_t tombstone_evictions; /* tombstones evicted before their end
	                         * to make room (the memory store) */
} idem_store_stats;

/* One record as idemfcgi-admin shows it.  Ages are by the store's clock;
 * the times are UTC, "2026-11-30T07:25:05.123456Z". */
typedef struct idem_store_record {
	idem_record_state state;
	char phase[IDEM_PHASE_MAX + 1]; /* its last checkpoint's; "": none */
	unsigned char fingerprint[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	char reserved_at[32], lease_at[32], expires_at[32];
	uint64_t reserved_age_ms;   /* since it was (last) reserved */
	uint64_t lease_age_ms;      /* since its lease was last renewed */
	uint64_t lease_ms;          /* the lease's length (its holder's
	                             * inflight-ttl); 0: the record keeps
	                             * none */
	int64_t expires_in_ms;      /* negative: past its expiry (a
	                             * tombstone's: its end) */
	int status;                 /* committed, expired: the stored
	                             * status */
	size_t headers_len, body_len;
	uint64_t tombstone_ms;      /* committed: how long a tombstone of it
	                             * is kept past its expiry; 0: none */
} idem_store_record;

/* Records by state, for idemfcgi-admin stats. */
typedef struct idem_store_census {
	uint64_t in_flight;         /* in flight */
	uint64_t stale;             /* of which idle past their lease's
	                             * length: the next retry takes them
	                             * over */
	uint64_t committed;         /* committed and live */
	uint64_t expired;           /* committed, paused or unknown, past
	                             * expiry, not purged */
	uint64_t paused;            /* paused and live */
	uint64_t unknown;           /* of unknown outcome and live */
	uint64_t tombstones;        /* tombstones, live (and committed
	                             * records past expiry whose tombstone
	                             * is not made yet) */
	int has_oldest;             /* the oldest in-flight record: */
	idem_store_key oldest_key;
	char oldest_owner[IDEM_OWNER_MAX + 1];
	char oldest_request_id[IDEM_RID_MAX + 1];
	uint64_t oldest_age_ms;     /* since it was reserved */
	uint64_t oldest_lease_age_ms;
} idem_store_census;

typedef struct idem_store_ops {
	const char *name;
	/*
	 * Each operation on a record takes the request's descriptor rq
	 * (borrowed for the call): its key, fingerprint, owner, request id
	 * and policy; contention met is added to rq->contended.
	 *
	 * Reserves rq's key for its owner: inserts an in_flight record (lease
	 * now, of the policy's lease_ms; expiry now + lifetime) when there is
	 * none, or when the record there is committed and past its expiry,
	 * or a tombstone, and not a live tombstone (idem_found.tombstone)
	 * that the policy refuses (run_expired 0: IDEM_RESERVE_EXPIRED).
	 * When an in_flight record with the same fingerprint has a lease
	 * older than its own length (the record's; the policy's lease_ms for
	 * a record that keeps none), takes it over in one conditional step
	 * naming the old owner, so that of many racing takers exactly one
	 * wins.  Never takes over a record with another fingerprint; an
	 * abandoned one (past its lifetime, unrenewed for abandon_ms) it
	 * reserves as if absent (idem_reserve_decide).
	 * Returns IDEM_OK with *out filled,
	 * IDEM_ERR_BUSY (contention on k that outlasted the store's retries:
	 * nothing was reserved, someone else is working on k) or
	 * IDEM_ERR_STORE (unreachable, full: nothing was reserved).
	 */
	idem_err (*reserve)(idem_store *s, idem_store_req *rq,
	    idem_reserve_result *out);
	/*
	 * Stores the answer and marks the record committed with expiry now +
	 * lifetime, its commit time now and its tombstone's length the
	 * policy's tombstone_ms, only if it is in_flight and owned by rq's
	 * owner.  Returns
	 * IDEM_OK, IDEM_ERR_NOT_FOUND when the owner no longer matches (the
	 * record was taken over or released: nothing is changed; also a
	 * second commit by the owner, except that the MySQL store may answer
	 * IDEM_OK to one of the very answer already stored, which is then
	 * true),
	 * IDEM_ERR_TOO_LARGE when the store can never hold this answer (over
	 * its limits, a column or a packet: nothing is changed, a smaller
	 * answer may still be committed), IDEM_ERR_BUSY (contention: try
	 * again) or IDEM_ERR_STORE.
	 */
	idem_err (*commit)(idem_store *s, idem_store_req *rq,
	    const idem_stored_response *resp);
	/* Deletes the in_flight record of rq's owner, or, when it has
	 * progress, makes it paused (kept for the same fingerprint only); key,
	 * owner and has_progress (which it tries first) are read.  Returns
	 * IDEM_OK, IDEM_ERR_NOT_FOUND (not owner's: nothing changed),
	 * IDEM_ERR_BUSY or IDEM_ERR_STORE. */
	idem_err (*release)(idem_store *s, idem_store_req *rq);
	/* Sets the lease of rq's owner's in_flight record to now, of the
	 * policy's lease_ms (kept as it was when that is 0).  Same reads and
	 * returns. */
	idem_err (*renew)(idem_store *s, idem_store_req *rq);
	/* Records p (borrowed; its phase not empty, its state at most
	 * IDEM_PROGRESS_MAX bytes: the wrapper refuses others with
	 * IDEM_ERR_INVALID or IDEM_ERR_TOO_LARGE) as the progress of rq's
	 * owner's in_flight record, and renews its lease.  Returns as renew. */
	idem_err (*checkpoint)(idem_store *s, idem_store_req *rq,
	    const idem_progress *p);
	/* Marks rq's owner's in_flight record as of unknown outcome (kept with
	 * its progress for the same fingerprint), keeping a tombstone of the
	 * policy's tombstone_ms past its expiry, as a commit does.  Returns
	 * as renew. */
	idem_err (*mark_unknown)(idem_store *s, idem_store_req *rq);
	/* Turns committed records past their expiry that keep a tombstone
	 * into tombstones (state expired: the answer dropped, expiry moved
	 * on by the tombstone's length), and deletes records past their
	 * expiry: tombstones, committed ones without one, paused and
	 * unknown ones, and in_flight ones abandoned too (their lease lapsed,
	 * and not renewed for the store's abandon_ms: nobody renews them; a
	 * record that keeps no lease length counts as lapsed after
	 * IDEM_LEASE_LONGEST_MS); at most max records in all, tombstones
	 * made first, *purged says how many went or became tombstones (fewer
	 * than max: none left).  Never an in_flight record whose lease is
	 * live, however old: its handler may still be running.  Safe to run
	 * anywhere at any time. */
	idem_err (*purge)(idem_store *s, unsigned max, unsigned *purged);
	/* Fills *st (zeroed by the caller); a store that cannot count
	 * cheaply leaves zeros.  Returns IDEM_OK, or IDEM_ERR_STORE when it
	 * could not count (what *st holds then means nothing). */
	idem_err (*stats)(idem_store *s, idem_store_stats *st);
	/* Frees the store. */
	void (*close)(idem_store *s);
	/*
	 * Crash recovery: releases every in_flight record whose owner token
	 * starts with prefix (a dead worker's instance id) as release does
	 * (deleted, or paused with its progress), so retries run at once
	 * instead of after inflight-ttl.  *keys (caller frees) and *n say
	 * which.  May be NULL for a store that cannot outlive its worker.
	 */
	idem_err (*release_prefix)(idem_store *s, const char *prefix,
	    idem_store_key **keys, size_t *n);
	/* Administration (idemfcgi-admin), not on the request path. */
	/* Fills *out with k's record.  Returns IDEM_OK, IDEM_ERR_NOT_FOUND,
	 * IDEM_ERR_BUSY (no committed record, but an open transaction holds
	 * the key's: a transactional request's reservation) or
	 * IDEM_ERR_STORE. */
	idem_err (*lookup)(idem_store *s, const idem_store_key *k,
	    idem_store_record *out);
	/* Counts records by state (a full scan in MySQL); in-flight records
	 * idle past their lease's length (inflight_ttl_ms for a record that
	 * keeps none) count as stale.  Returns IDEM_OK or IDEM_ERR_STORE. */
	idem_err (*census)(idem_store *s, uint64_t inflight_ttl_ms,
	    idem_store_census *out);
	/*
	 * Lists the records of unknown outcome (past their expiry too, until
	 * purged), the one marked longest ago (the oldest lease) first: at
	 * most max of them (max at least 1) into *keys and *recs, two
	 * arrays of *n entries each (the same index is the same record;
	 * caller frees both with free(), NULL when *n is 0); *more says
	 * whether there were more than max.  Returns IDEM_OK, IDEM_ERR_NOMEM
	 * or IDEM_ERR_STORE (nothing returned).
	 */
	idem_err (*list_unknown)(idem_store *s, size_t max,
	    idem_store_key **keys, idem_store_record **recs, size_t *n,
	    int *more);
	/*
	 * An operator's answer for rq's record of unknown outcome: with resp
	 * (borrowed), stores it and marks the record committed, its expiry
	 * unchanged (a commit needs the record not past it); with resp NULL,
	 * deletes the record, so that the next retry runs the handler again.
	 * Only if the record is still unknown and its owner is rq's owner (the
	 * one that marked it), in one conditional statement: a record
	 * reconciled, resolved or taken meanwhile is not touched.  Reads rq's
	 * key and owner.  Returns IDEM_OK, IDEM_ERR_NOT_FOUND (not so:
	 * nothing changed), IDEM_ERR_TOO_LARGE (resp over the store's
	 * limits), IDEM_ERR_BUSY (contention) or IDEM_ERR_STORE.
	 */
	idem_err (*resolve)(idem_store *s, idem_store_req *rq,
	    const idem_stored_response *resp);
	/* Whether the store answers now: one round trip, bounded by the
	 * store's own timeouts.  Returns IDEM_OK or IDEM_ERR_STORE.  NULL
	 * for a store that is always reachable (the memory store); a store
	 * that can be away must have one (readiness asks it). */
	idem_err (*ping)(idem_store *s);
} idem_store_ops;

struct idem_metrics;

/* What one stored answer may hold, in bytes; 0: no limit of the store's
 * own (max-response still applies).  An answer over them is never sent to
 * commit: the middleware stores a stand-in instead. */
typedef struct idem_store_limits {
	uint64_t headers;       /* the serialized header lines */
	uint64_t body;
	uint64_t total;         /* headers and body together */
} idem_store_limits;

/* The longest lease there is (inflight-ttl's most, a day): what purge
 * gives an in-flight record that keeps no lease length of its own. */
#define IDEM_LEASE_LONGEST_MS (24ULL * 3600 * 1000)
/* abandon-after's default (idem_store.abandon_ms) */
#define IDEM_ABANDON_DEFAULT_MS (24ULL * 3600 * 1000)

/* The most a stand-in answer holds: its header lines (a Content-Type, and
 * Location and Content-Location of up to 8192 bytes each) and its notice.
 * Every store must hold one: a store whose limits cannot refuses to
 * open. */
#define IDEM_STAND_IN_HEADERS (2 * 8192 + 128)
#define IDEM_STAND_IN_BODY 512
#define IDEM_STAND_IN_MAX (IDEM_STAND_IN_HEADERS + IDEM_STAND_IN_BODY)

/* Every store begins with this (a store allocates it zeroed). */
struct idem_store_tx_ops;

struct idem_store {
	const idem_store_ops *ops;
	struct idem_batch *batch;      /* its group commit (idem_batch.h),
	                                * owned by the store; NULL: none */
	const struct idem_store_tx_ops *tx; /* transactional routes
	                                * (idem_store_tx.h); NULL: none */
	struct idem_metrics *metrics;  /* borrowed; when set, the wrappers
	                                * below time every operation */
	idem_store_limits limits;      /* set by the store when it opens */
	uint64_t settle_ms;            /* set by the store when it opens: how
	                                * long a reservation whose reserve got
	                                * no answer may still come into being
	                                * (a statement the database runs after
	                                * its client gave up on it); 0: never */
	uint64_t abandon_ms;           /* [idempotency] abandon-after: an
	                                * in-flight record past its lifetime
	                                * whose lease has not been renewed
	                                * for this long is abandoned (reused
	                                * by another request, purged); set by
	                                * the store when it opens (the
	                                * default), and by idem_store_open */
	int aside;                     /* set aside: its database could not be
	                                * reached when it opened, and every
	                                * operation fails with IDEM_ERR_STORE
	                                * (idem_store_is_aside) */
};

/*
 * The reservation rule (DESIGN.md 2.4 and 2.8), once for every store and
 * path: what a reserve does with the record it found for its key.  The
 * SQL of the MySQL store (S_REUSE's, S_TAKEOVER's and S_RESUME's WHERE)
 * says the same, and points here.
 */
typedef enum idem_reserve_step {
	IDEM_STEP_REUSE = 0,  /* committed, paused or unknown, past its
	                       * lifetime; or in flight, past its lifetime,
	                       * its lease lapsed and unrenewed for
	                       * abandon-after (abandoned: its instance died,
	                       * or is cut off, that long), met by another
	                       * request: as absent, so the record is made
	                       * this request's (without progress) */
	IDEM_STEP_REPLAY,     /* committed, live: its answer is the outcome
	                       * (another fingerprint: the caller's conflict) */
	IDEM_STEP_OURS,       /* in flight under this request's own owner: its
	                       * reservation, applied before a lost answer */
	IDEM_STEP_TAKE_OVER,  /* in flight, same fingerprint, lease older than
	                       * its length: taken over (conditionally on the
	                       * old owner), the handler runs */
	IDEM_STEP_IN_FLIGHT,  /* in flight otherwise: someone else holds it (or
	                       * another request: the caller's conflict); so
	                       * too a paused or unknown record of another
	                       * fingerprint */
	IDEM_STEP_RESUME,     /* paused, same fingerprint: made this request's
	                       * (conditionally on its state), the handler
	                       * runs from its progress */
	IDEM_STEP_RECONCILE,  /* unknown, same fingerprint, held by nobody (or
	                       * by an execution whose lease is older than its
	                       * length), the policy has reconcile: held
	                       * by this request (conditionally on the old
	                       * holder), still unknown, while the route's
	                       * reconcile hook runs; one being reconciled by
	                       * a live execution is as in flight */
	IDEM_STEP_UNKNOWN,    /* unknown, same fingerprint, held by nobody,
	                       * no reconcile: nothing runs, the outcome is
	                       * being determined */
	IDEM_STEP_EXPIRED     /* a live tombstone (committed past its
	                       * lifetime, or expired before its end), any
	                       * fingerprint, the policy refuses expired
	                       * keys: nothing runs (with expired-keys =
	                       * run: REUSE) */
} idem_reserve_step;

/* What the rule reads of a record found (all borrowed). */
typedef struct idem_found {
	idem_record_state state;
	int expired;                /* past expires_at */
	int tombstone;              /* a live tombstone: expired and not
	                             * expired, or committed, expired, and
	                             * within its tombstone's length of its
	                             * expiry */
	const unsigned char *fp;    /* 32 bytes */
	const char *owner;
	int64_t lease_age_us;       /* in flight: since its lease was renewed */
	int64_t lease_us;           /* the lease's length, as the record keeps
	                             * it (its holder's inflight-ttl); 0: it
	                             * keeps none */
	int64_t abandon_us;         /* the store's abandon-after: in flight past
	                             * its lifetime and unrenewed this long,
	                             * abandoned; 0: never */
} idem_found;

/* The step for found, met by the request of fingerprint fp and owner
 * owner; inflight_ttl_us judges a lease only when found keeps no length
 * of its own; policy (borrowed) is the request's: its reconcile hook,
 * and whether it runs expired keys. */
idem_reserve_step idem_reserve_decide(const idem_found *found,
    const unsigned char fp[32], const char *owner, int64_t inflight_ttl_us,
    const idem_key_policy *policy);

/* Fills *out as a reserve that met a live tombstone refused by the
 * policy: EXPIRED, the record's fingerprint fp, its first status, and
 * its commit's age lease_age_us (the record's lease_at is its commit). */
void idem_reserve_expired(idem_reserve_result *out, const unsigned char
    fp[32], int status, int64_t lease_age_us);

/* Whether a record of state, past its expiry by past_ms (negative: not
 * yet) and keeping a tombstone of tombstone_ms, is a live tombstone
 * (idem_found.tombstone): a tombstone before its end, or a committed
 * record, or one of unknown outcome, past its expiry by less than its
 * tombstone's length.  1 or 0. */
int idem_tombstone_live(idem_record_state state, int64_t past_ms,
    uint64_t tombstone_ms);

/* Whether found is an abandoned in-flight record: past its lifetime, its
 * lease lapsed (by its own length; inflight_ttl_us for one that keeps
 * none) and not renewed for found->abandon_us (its instance died, or is
 * cut off, that long).  1 or 0.  What the rule reuses for another
 * request, and a purge deletes. */
int idem_record_abandoned(const idem_found *found, int64_t inflight_ttl_us);

/* The owner-checked writes of a store whose answer may be lost with its
 * connection (idem_owned_write_applied). */
typedef enum idem_owned_write {
	IDEM_OWNED_COMMIT = 0,      /* the answer stored: committed */
	IDEM_OWNED_RELEASE,         /* the record deleted */
	IDEM_OWNED_PAUSE,           /* the record paused with its progress */
	IDEM_OWNED_UNKNOWN,         /* marked of unknown outcome */
	IDEM_OWNED_RESOLVE,         /* an operator's answer stored */
	IDEM_OWNED_RESOLVE_RELEASE, /* an operator's release: deleted */
	IDEM_OWNED_STAYS            /* a renewal or a checkpoint: sent again,
	                             * it matches while the record is ours */
} idem_owned_write;

/* Whether owner-checked write w of owner, sent again after its answer was
 * lost and then matching no record, was applied the first time, by the
 * record read since (found; its state and owner).  1 or 0. */
int idem_owned_write_applied(idem_owned_write w, int found,
    idem_record_state state, const char *row_owner, const char *owner);
/* Whether a commit of want by owner that matched no record was stored
 * already, by an attempt of its own whose answer never came (a batch, a
 * statement still running when its client gave up), by the record read
 * since (found; its state, owner and stored answer): committed, owner's,
 * and want itself, status, headers and body.  1 or 0. */
int idem_owned_answer_stored(int found, idem_record_state state,
    const char *row_owner, const idem_stored_response *stored,
    const char *owner, const idem_stored_response *want);

/* Thin wrappers over s->ops, so callers read like function calls. */
idem_err idem_store_reserve(idem_store *s, idem_store_req *rq,
    idem_reserve_result *out);
idem_err idem_store_commit(idem_store *s, idem_store_req *rq,
    const idem_stored_response *resp);
idem_err idem_store_release(idem_store *s, idem_store_req *rq);
idem_err idem_store_renew(idem_store *s, idem_store_req *rq);
/* On success also sets rq->has_progress. */
idem_err idem_store_checkpoint(idem_store *s, idem_store_req *rq,
    const idem_progress *p);
idem_err idem_store_mark_unknown(idem_store *s, idem_store_req *rq);
idem_err idem_store_purge(idem_store *s, unsigned max, unsigned *purged);
/* Zeroes *st and fills it; IDEM_ERR_INVALID for a store without
 * counts. */
idem_err idem_store_stats_get(idem_store *s, idem_store_stats *st);
idem_err idem_store_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n);
/* IDEM_ERR_INVALID for a store without the operation. */
idem_err idem_store_lookup(idem_store *s, const idem_store_key *k,
    idem_store_record *out);
idem_err idem_store_census_get(idem_store *s, uint64_t inflight_ttl_ms,
    idem_store_census *out);
/* The records of unknown outcome, as the list_unknown op (*keys, *recs
 * caller frees); max 0 is IDEM_ERR_INVALID. */
idem_err idem_store_list_unknown(idem_store *s, size_t max,
    idem_store_key **keys, idem_store_record **recs, size_t *n, int *more);
/* An operator's answer (resp) or release (resp NULL) of a record of
 * unknown outcome, as the resolve op. */
idem_err idem_store_resolve(idem_store *s, idem_store_req *rq,
    const idem_stored_response *resp);
/* Whether s answers now (the ping op; IDEM_OK for a store without one,
 * and for s NULL: no store, nothing to wait for).  Timed as
 * IDEM_STORE_OP_PING. */
idem_err idem_store_ping(idem_store *s);
/* Purges in batches of batch until one comes back short; *total says how
 * many records went.  Returns IDEM_OK or the first error. */
idem_err idem_store_purge_all(idem_store *s, unsigned batch,
    unsigned long *total);
/* The store's name ("memory", "mysql", "postgres"; static, never
 * freed). */
const char *idem_store_name(const idem_store *s);
/* What one stored answer may hold in s (owned by s). */
const idem_store_limits *idem_store_get_limits(const idem_store *s);
/* Sets s's abandon-after (idem_store.abandon_ms): ms > 0. */
void idem_store_set_abandon_ms(idem_store *s, uint64_t ms);

/*
 * What a store is opened with besides its own section of the file (its
 * constructor's other argument): from [idempotency] and the process's
 * state, filled by idem_store_opts_of.
 */
typedef struct idem_store_opts {
	const char *file;          /* the config file, for messages */
	unsigned pool_size;        /* connections of a pooled store; 0: its
	                            * section's pool-size */
	uint64_t inflight_ttl;     /* ms: [idempotency] inflight-ttl */
	uint64_t inflight_wait;    /* ms: [idempotency] inflight-wait */
	int may_wait;              /* a database that cannot be reached sets
	                            * the store aside instead of failing its
	                            * open (the master's start, --check) */
	int aside;                 /* opens set aside, without trying the
	                            * database (the workers of a master
	                            * waiting for it) */
} idem_store_opts;

struct idem_config;
/* The options of a store opened for cfg (borrowed for the call) with
 * pool_size connections (0: the store section's pool-size). */
idem_store_opts idem_store_opts_of(const struct idem_config *cfg,
    unsigned pool_size);
/* Times every operation of s into m (borrowed; must outlive s or be
 * replaced first; NULL: not timed). */
void idem_store_set_metrics(idem_store *s, struct idem_metrics *m);
/* Whether a store error may clear up by itself: an outage
 * (IDEM_ERR_STORE) or contention (IDEM_ERR_BUSY). */
int idem_store_err_transient(idem_err err);
/* Closes s; NULL is fine. */
void idem_store_close(idem_store *s);

/* Whether a reserve that returned err and r made the record the caller's
 * (ACQUIRED, TAKEN_OVER, RESUMED, RECONCILE). */
int idem_reserve_runs(idem_err err, const idem_reserve_result *r);

/* Frees the answer a result owns and zeroes the result. */
void idem_reserve_result_clear(idem_reserve_result *r);
/* Frees the buffers of resp and zeroes it. */
void idem_stored_response_clear(idem_stored_response *resp);
/* A deep copy of src into dst.  Returns IDEM_OK or IDEM_ERR_NOMEM. */
idem_err idem_stored_response_copy(idem_stored_response *dst,
    const idem_stored_response *src);
/* Copies the string src into dst (size bytes, at least 1), cut to fit
 * as snprintf would cut it: owner tokens and request ids. */
void idem_copy_string(char *dst, size_t size, const char *src);

/*
 * Whether s is set aside (idem_store_open with the config's store_aside
 * or store_may_wait): its database could not be reached, and every
 * operation answers IDEM_ERR_STORE, as in an outage, until the master
 * replaces the process's store (DESIGN.md 3, "A database that is not up
 * yet").  1 or 0.
 */
int idem_store_is_aside(const idem_store *s);

#endif
