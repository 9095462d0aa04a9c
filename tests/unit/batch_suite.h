/*
 * batch_suite.h - the batching suite (group commit of concurrent
 * reservations and commits), written once against the store interface
 * and the store-neutral hooks of idem_batch.h (batch_suite.c), linked
 * into the program of each store that batches, which defines how to open
 * one and lose a statement's answer.  Its helpers serve the store's own
 * batching tests too.
 */
#ifndef BATCH_SUITE_H
#define BATCH_SUITE_H

#include <stdint.h>

#include "idem_batch.h"
#include "idem_store.h"

/* Opens a batching store of the program's kind with pool connections,
 * extra appended to its section ("batch = false\n": one that does not
 * batch).  Defined per store. */
idem_store *batch_open(unsigned pool, const char *extra);
/* The store's test hook: the next statement op ("insert", "commit") is
 * applied and its answer lost with its connection.  0 or -1.  Defined
 * per store. */
int batch_lose_answer(idem_store *s, const char *op);

/* The config of store (its name) whose section, as the tests' server
 * helper writes it (naming database idem), names database db instead,
 * with pool-size pool and extra appended (the caller frees it). */
struct idem_config *batch_config(const char *store, const char *section,
    const char *db, unsigned pool, const char *extra);

/* One request of a batch: its key, fingerprint, owner and lease; what
 * the store answered. */
typedef struct job {
	idem_store *s;
	char key[64];
	unsigned char fp[32];
	char owner[32];
	uint64_t ttl_ms;
	int commit;                /* commit instead of reserve */
	char body[32];
	idem_err err;
	int outcome;
	char found_owner[IDEM_OWNER_MAX + 1];
} job;

/* The key named key (scope zero). */
idem_store_key key_of(const char *key);
/* Runs the n jobs (32 at most) at once, after asking the store to send
 * them in one statement per lane. */
void run_batch(idem_store *s, job *jobs, unsigned n);
/* Reserves key alone into *rr (caller clears); returns the outcome. */
int reserve1(idem_store *s, const char *key, const unsigned char *fp,
    const char *owner, uint64_t ttl_ms, idem_reserve_result *rr);
/* The reservation of key (this process's own: the pid appended) with
 * fingerprint byte fp by owner with lease ttl_ms. */
job reserve_job(const char *key, unsigned char fp, const char *owner,
    uint64_t ttl_ms);
/* The commit of of's key by owner with body. */
job commit_job(const job *of, const char *owner, const char *body);
/* Expects key's record in s to be committed with body. */
void expect_stored(idem_store *s, const char *key, const char *body);

#endif
