/*
 * store_req.h - request descriptors (idem_store_req) for tests that call
 * a store directly, as the middleware builds them for a request.
 */
#ifndef TEST_STORE_REQ_H
#define TEST_STORE_REQ_H

#include <stdint.h>

#include "idem_store.h"

/*
 * Fills rq for key k (NULL: no key, a transaction without a record),
 * fingerprint fp (NULL: zeros), owner and request id rid (NULL: ""),
 * keeping its policy; contended is zeroed.  Returns rq.
 */
idem_store_req *test_req_fill(idem_store_req *rq, const idem_store_key *k,
    const unsigned char *fp, const char *owner, const char *rid);

/* A descriptor that lives until the end of the enclosing block, under a
 * policy of lease ttl_ms and lifetime life_ms (inflight-ttl and
 * lifetime). */
#define TEST_REQ(k, fp, owner, rid, ttl_ms, life_ms) \
	test_req_fill(&(idem_store_req){ .policy = &(idem_key_policy){ \
	    .lease_ms = (ttl_ms), .lifetime_ms = (life_ms) } }, (k), (fp), \
	    (owner), (rid))

/* The same for an owner-checked operation: only key and owner are read,
 * and commit reads the lifetime. */
#define TEST_OWNED(k, owner, life_ms) \
	TEST_REQ((k), NULL, (owner), NULL, 0, (life_ms))

#endif
