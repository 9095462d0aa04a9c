/*
 * idem_key_policy.h - what a request's policy says of its key's record:
 * the values of [idempotency] (or of its route's own policy) that the
 * store and the protocol read, in one struct.  Filled by the router
 * (idem_route_key_policy), read by the stores (idem_store.h) and the
 * middleware.
 */
#ifndef IDEM_KEY_POLICY_H
#define IDEM_KEY_POLICY_H

#include <stdint.h>

/*
 * What a request's policy says of its key's record (DESIGN.md 3,
 * [idempotency]), in one struct so that a route can carry its own.  The
 * store reads lifetime_ms, lease_ms, tombstone_ms and run_expired; the
 * middleware the rest.
 */
typedef struct idem_key_policy {
	uint64_t lifetime_ms;   /* lifetime: how long an answer is replayed */
	uint64_t lease_ms;      /* inflight-ttl: the length of the leases
	                         * this request takes (kept in the record);
	                         * judges only records that keep none */
	uint64_t wait_ms;       /* inflight-wait: how long a duplicate waits
	                         * while the key is in flight */
	const unsigned char *commit_status; /* commit-statuses: 600 flags,
	                         * set for a status stored as final
	                         * (borrowed) */
	int reconcile;          /* the route has a reconcile hook: a record
	                         * of unknown outcome is taken to reconcile
	                         * it (else answered as unknown) */
	uint64_t tombstone_ms;  /* tombstone-lifetime: how long a committed
	                         * record's tombstone is kept past its
	                         * lifetime (kept in the record); 0: none */
	int run_expired;        /* expired-keys = run: a live tombstone is
	                         * reused (else refused, 422) */
} idem_key_policy;

#endif
