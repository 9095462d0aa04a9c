/*
 * idem_store_pg_int.h - what the files of the PostgreSQL store share (not
 * for other modules):
 *   idem_store_pg_sql.c      the statements, their parameters and rows,
 *                            and the executor of pooled statements
 *   idem_store_postgres.c    the request-path operations (reserve,
 *                            commit, release, renew, checkpoint, mark
 *                            unknown, purge), the owner-checked resolve,
 *                            ping, and opening
 *   idem_store_pg_admin.c    the operations of idemfcgi-admin and the
 *                            gauges (lookup, census, stats, the records
 *                            of unknown outcome, a dead worker's keys)
 *   idem_store_pg_batch.c    group commit: concurrent reservations'
 *                            INSERTs and commits' UPDATEs, one statement
 *                            each (on idem_batch.c)
 */
#ifndef IDEM_STORE_PG_INT_H
#define IDEM_STORE_PG_INT_H

#include <stdatomic.h>

#include <libpq-fe.h>

#include "idem_pg.h"
#include "idem_replay_cache.h"
#include "idem_store.h"
#include "idem_store_postgres.h"

#define PG_SCHEMA_VERSION 2
/* the schema's files, installed in IDEM_PG_SCHEMADIR (configure's
 * $(pkgdatadir)/schema/postgres) */
#define PG_SCHEMA_FILE "001_idempotency_keys.sql"
#define PG_SCHEMA_LAST "002_tombstones.sql"

/* What one answer may hold: a bytea holds up to 1 GB, and a statement's
 * message as much; the rest of a commit besides headers and body, kept
 * generously. */
#define PG_VALUE_MAX (1024ULL * 1024 * 1024 - 1)
#define PG_MESSAGE_SLACK (64ULL * 1024)
/* Attempts of a statement that meets a deadlock or a serialization
 * failure. */
#define PG_CONTENTION_TRIES 6
/* How long a batching lane's statement waits for a row lock (ms): one
 * row held by a transaction must not stall every request behind it. */
#define PG_LANE_LOCK_MS 1
/* Rounds of a reserve whose row keeps vanishing under it. */
#define PG_RESERVE_ROUNDS 4

enum { P_RESERVE, P_SELECT, P_TAKEOVER, P_REUSE, P_RESUME, P_RECONCILE,
    P_COMMIT, P_RELEASE, P_PAUSE, P_RENEW, P_CHECKPOINT, P_UNKNOWN,
    P_RESOLVE, P_RESOLVE_RELEASE, P_PURGE, P_ENTOMB, P_STATS, P_VERSION, P_OWNED_BY,
    P_RELEASE_BY, P_PAUSE_BY, P_LOOKUP, P_CENSUS, P_OLDEST,
    P_LIST_UNKNOWN, P_XACT_STATUS, PNSTMT };

/* The statements' text, by index (idem_store_pg_sql.c). */
extern const char *const idem_pgs_sql[PNSTMT];
/* The statements of the batching lanes' connections: by lane
 * (IDEM_BATCH_INSERT, IDEM_BATCH_COMMIT), each row's values in arrays, one
 * element a row; then, for a lone request, P_RESERVE's and P_COMMIT's. */
enum { PG_LANE_RESERVE_1 = 2, PG_LANE_COMMIT_1, PG_LANE_NSTMT };
extern const char *const idem_pgs_batch_sql[PG_LANE_NSTMT];
/* The statements of transactional routes, prepared on a plugin's pool
 * after its own (idem_pg_db_extra numbers them): BEGIN, the reserve's
 * (P_RESERVE ... P_RECONCILE), the record's (P_COMMIT, returning the
 * transaction's id), the checkpoint's and the unknown mark's, the id of
 * a keyless transaction, COMMIT and ROLLBACK (idem_store_pg_tx.c). */
enum { PT_BEGIN, PT_RESERVE, PT_TAKEOVER, PT_REUSE, PT_RESUME,
    PT_RECONCILE, PT_RECORD, PT_CHECKPOINT, PT_UNKNOWN, PT_XID, PT_COMMIT,
    PT_ROLLBACK, PT_NSTMT };
extern const char *const idem_pgs_tx_sql[PT_NSTMT];
/* The statement of the schema's version alone (the check at open). */
extern const char *const idem_pgs_version_sql[1];

typedef struct idem_pg_batch idem_pg_batch;

typedef struct pg_store {
	idem_store base;
	idem_pg_pool *pool;
	idem_pg_batch *batch;         /* NULL: [postgres] batch = false */
	idem_replay_cache *cache;     /* committed answers; NULL: none */
	uint64_t lock_wait_ms;        /* the session's lock_timeout: how
	                               * long a write may wait for a row
	                               * lock, so its answer that long too */
	atomic_int lose_answer;       /* tests: 1 + the statement whose next
	                               * answer is lost (idem_store_postgres_
	                               * lose_answer); 0: none */
	atomic_ullong sent;           /* statements sent, every attempt
	                               * (idem_store_postgres_statements) */
} pg_store;

/* One row as the reserve and its reads see it. */
typedef struct pg_row {
	int found;
	idem_record_state state;
	int committed;               /* state is committed */
	int expired;
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	long long lease_age_us;
	long long lease_ms;          /* the lease's length */
	long long left_us;           /* time left until it expires */
	long long tombstone_ms;      /* committed: its tombstone's length */
	int status;                  /* committed, expired: its status */
	idem_stored_response resp;   /* committed: owned by the row */
	idem_progress progress;      /* owned by the row */
} pg_row;

/* What a reserve asks for: the request, its policy's times. */
typedef struct pg_reserve_args {
	idem_store_req *rq;
	long long life_us, ttl_us;
	long long lease_ms;
	long long abandon_us;        /* the store's abandon-after */
} pg_reserve_args;

/* idem_store_pg_sql.c */
/* Runs statement i with p on a pooled connection: once more on a fresh
 * connection when the first lost its session, up to PG_CONTENTION_TRIES
 * times with a random back-off after a deadlock or serialization failure
 * (a lock wait, which waited all it may, is not retried); contention is
 * added to *contended (NULL: counted on no route).  On IDEM_OK *res
 * holds the result (caller PQclears; NULL when res is NULL).  *retried
 * (when not NULL) says whether an attempt before the last lost its
 * answer, so it may have been applied, or still run on the server.
 * Returns IDEM_OK, IDEM_ERR_BUSY, IDEM_ERR_EXISTS (a unique violation),
 * IDEM_ERR_TOO_LARGE or IDEM_ERR_STORE (logged). */
idem_err idem_pgs_run(pg_store *ps, int i, const idem_pg_params *p,
    unsigned *contended, PGresult **res, int *retried);
/* Like run, for a write whose result is its count of rows: *n. */
idem_err idem_pgs_count(pg_store *ps, int i, const idem_pg_params *p,
    unsigned *contended, unsigned long long *n, int *retried);
/* Whether the answer of statement i, just applied, is to be taken as
 * lost (tests: idem_store_postgres_lose_answer), once. */
int idem_pgs_lose_answer(pg_store *ps, int i);
/* Counts one contention, as run does. */
void idem_pgs_count_contended(pg_store *ps, unsigned *contended);
/* Sleeps a random 1..2^n ms. */
void idem_pgs_backoff(int n);
/* Binds P_RESERVE's parameters for a. */
void idem_pgs_p_reserve(idem_pg_params *p, const pg_reserve_args *a);
/* Binds P_COMMIT's own parameters for rq's answer resp (its key and
 * owner follow them). */
void idem_pgs_p_commit(idem_pg_params *p, const idem_store_req *rq,
    const idem_stored_response *resp);
/* Binds P_TAKEOVER's parameters for a, taking old_owner's reservation
 * over. */
void idem_pgs_p_takeover(idem_pg_params *p, const pg_reserve_args *a,
    const char *old_owner);
/* Binds P_CHECKPOINT's own parameters: rq's progress pr and lease. */
void idem_pgs_p_progress(idem_pg_params *p, const idem_progress *pr,
    const idem_store_req *rq);
/* Binds P_REUSE's parameters for a. */
void idem_pgs_p_reuse(idem_pg_params *p, const pg_reserve_args *a);
/* Binds P_RESUME's parameters for a (old_owner NULL), or P_RECONCILE's
 * (the unknown record held by old_owner). */
void idem_pgs_p_held(idem_pg_params *p, const pg_reserve_args *a,
    const char *old_owner);
/* Binds k's scope and key. */
void idem_pgs_p_key(idem_pg_params *p, const idem_store_key *k);
/* Binds the length of the lease rq's owner renews: its policy's
 * lease_ms, or NULL (the record keeps its own). */
void idem_pgs_p_lease(idem_pg_params *p, const idem_store_req *rq);
/* Fills *a for the reserve of rq on ps. */
void idem_pgs_reserve_args(const pg_store *ps, pg_reserve_args *a,
    idem_store_req *rq);
/* Reads row row of res, whose columns from first on are a reserve's
 * (ROW_COLS: P_RESERVE's and P_SELECT's from 1, a batch's from 2), into
 * r.  Returns IDEM_OK (r->found tells) or IDEM_ERR_NOMEM. */
idem_err idem_pgs_row(const PGresult *res, int row, int first, pg_row *r);
/* Reads k's row with P_SELECT.  Returns IDEM_OK (r->found tells),
 * IDEM_ERR_BUSY, IDEM_ERR_NOMEM or IDEM_ERR_STORE. */
idem_err idem_pgs_read_row(pg_store *ps, const idem_store_key *k,
    unsigned *contended, pg_row *r);
/* Frees what r owns. */
void idem_pgs_row_clear(pg_row *r);
/* The step of the reservation rule for the row r a reserve found. */
idem_reserve_step idem_pgs_step_of(const pg_reserve_args *a, const pg_row *r);
/* Whether the row r is a live tombstone (idem_tombstone_live). */
int idem_pgs_row_tomb(const pg_row *r);
/* Fills *out from r, a live tombstone the request's policy refuses:
 * EXPIRED, its fingerprint, first status and commit's age.  Frees what
 * r owns. */
void idem_pgs_expired_row(pg_row *r, idem_reserve_result *out);
/* The tombstone_s a commit under policy writes: its tombstone-lifetime
 * in whole seconds, rounded up; 0 without a policy. */
int idem_pgs_tomb_s(const idem_key_policy *policy);
/* Fills *out from the live row r, read at read_at (idem_boot_ms before
 * the statement): COMMITTED with its answer (moved out of r, a copy kept
 * in the replay cache), or IN_FLIGHT with its owner. */
void idem_pgs_found_row(pg_store *ps, const pg_reserve_args *a, pg_row *r,
    uint64_t read_at, idem_reserve_result *out);
/* Copies column col of row row of res into buf (size bytes, NUL-
 * terminated, cut to fit; NULL reads ""); returns its length as
 * copied. */
size_t idem_pgs_str(const PGresult *res, int row, int col, char *buf,
    size_t size);

/* idem_store_postgres.c: a request's own statements, which a request
 * falls back on when its lane's statement did not decide */
/* One round of a's reserve alone: the INSERT with the row it met, into
 * *r.  Returns IDEM_OK with *inserted, or the store's error. */
idem_err idem_pgs_insert_or_read(pg_store *ps, pg_reserve_args *a,
    int *inserted, pg_row *r);
/* The owner-checked commit of rq's answer resp alone.  When it matches
 * no row, the row is read: this very answer stored under rq's owner (by
 * an attempt whose answer was lost, a batch's, a commit repeated) is
 * IDEM_OK.  Returns IDEM_OK, IDEM_ERR_NOT_FOUND (fenced) or the store's
 * error. */
idem_err idem_pgs_commit_alone(pg_store *ps, idem_store_req *rq,
    const idem_stored_response *resp);
/* Whether rq's record holds resp, committed under rq's owner.  Returns
 * IDEM_OK (it does), IDEM_ERR_NOT_FOUND (it does not: fenced), or the
 * read's error. */
idem_err idem_pgs_answer_stored(pg_store *ps, idem_store_req *rq,
    const idem_stored_response *resp);

/* The lock wait of a session for o, in ms: inflight-wait, at least a
 * second (a shorter one would turn a brief lock into contention). */
uint64_t idem_pgs_lock_wait_ms(const idem_store_opts *o);
/* The settings of the store's sessions (libpq's options: statement and
 * lock timeouts, READ COMMITTED), then extra, into buf (size bytes). */
void idem_pgs_session_options(char *buf, size_t size,
    const idem_config_postgres *pg, const idem_store_opts *o,
    const char *extra);

/* idem_store_pg_tx.c: the operations of transactional routes */
extern const struct idem_store_tx_ops idem_pgs_tx_ops;

/* idem_store_pg_batch.c */
/* The batcher of ps for pg ([postgres] batch-rows), its lanes on
 * connections of their own (pg and file borrowed for the call) whose
 * sessions have options (copied): the store's, lock_timeout
 * PG_LANE_LOCK_MS.
 * Returns IDEM_OK with *out (free with idem_pgb_free), IDEM_ERR_CONFIG or
 * IDEM_ERR_NOMEM. */
idem_err idem_pgb_new(pg_store *ps, const idem_config_postgres *pg,
    const char *file, const char *options, idem_pg_batch **out);
/* Frees b; NULL is fine. */
void idem_pgb_free(idem_pg_batch *b);
/* The engine of b (NULL: b is NULL), for ps->base.batch. */
struct idem_batch *idem_pgb_engine(idem_pg_batch *b);
/* One round of a's reserve, in a batch when others reserve at the same
 * time: as idem_pgs_insert_or_read (which it is without batching). */
idem_err idem_pgb_reserve(pg_store *ps, pg_reserve_args *a, int *inserted,
    pg_row *r);
/* The commit of rq's answer resp, in a batch when others commit at the
 * same time: as idem_pgs_commit_alone. */
idem_err idem_pgb_commit(pg_store *ps, idem_store_req *rq,
    const idem_stored_response *resp);

/* idem_store_pg_admin.c: the store's release_prefix, stats, lookup,
 * census and list_unknown operations (idem_store_ops) */
idem_err idem_pgs_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n);
idem_err idem_pgs_stats(idem_store *s, idem_store_stats *st);
idem_err idem_pgs_lookup(idem_store *s, const idem_store_key *k,
    idem_store_record *out);
idem_err idem_pgs_census(idem_store *s, uint64_t inflight_ttl_ms,
    idem_store_census *out);
idem_err idem_pgs_list_unknown(idem_store *s, size_t max,
    idem_store_key **keys, idem_store_record **recs, size_t *n, int *more);

#endif
