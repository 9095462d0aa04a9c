/*
 * idem_store_mysql_int.h - what the files of the MySQL store share (not
 * for other modules):
 *   idem_store_mysql_sql.c    the statements, their bindings and rows,
 *                             and the executor of pooled statements
 *   idem_store_mysql.c        the request-path operations (reserve,
 *                             commit, release, renew, purge), the
 *                             owner-checked resolve, and opening
 *   idem_store_mysql_batch.c  group commit: concurrent reservations'
 *                             INSERTs and commits in one statement
 *   idem_store_mysql_tx.c     the operations of transactional routes
 *   idem_store_mysql_admin.c  the operations of idemfcgi-admin and the
 *                             gauges (lookup, census, stats, the records
 *                             of unknown outcome, a dead worker's keys)
 */
#ifndef IDEM_STORE_MYSQL_INT_H
#define IDEM_STORE_MYSQL_INT_H

#include <mysql.h>

#include "idem_mysql.h"
#include "idem_replay_cache.h"
#include "idem_store.h"
#include "idem_store_mysql.h"
#include "idem_store_tx.h"

#define SCHEMA_VERSION 4
/* the schema's files, installed in IDEM_SCHEMADIR (configure's
 * $(pkgdatadir)/schema/mysql: /usr/share/idemfcgi/schema/mysql in the
 * package) */
#define SCHEMA_FILE "001_idempotency_keys.sql"
#define SCHEMA_LAST "004_tombstones.sql"
#define NOW "UTC_TIMESTAMP(6)"
#define PK "scope_hash = ? AND idem_key = ?"

/* What the schema's columns hold: headers BLOB, body MEDIUMBLOB. */
#define HEADERS_COLUMN_MAX 65535ULL
#define BODY_COLUMN_MAX 16777215ULL
/* The rest of a commit's packet besides headers and body, generously. */
#define PACKET_SLACK 4096ULL
/* Attempts of a statement that meets a deadlock or a lock wait. */
#define CONTENTION_TRIES 6
/* Rounds of a reserve whose row keeps vanishing under it. */
#define RESERVE_ROUNDS 4

enum { S_INSERT, S_SELECT, S_TAKEOVER, S_REUSE, S_COMMIT, S_RELEASE,
    S_RENEW, S_PURGE, S_STATS, S_VERSION, S_OWNED_BY, S_RELEASE_BY,
    S_LOOKUP, S_CENSUS, S_OLDEST, S_SELECT_LOCKED, S_PROBE,
    S_SELECT_CAUSAL, S_COMMIT_CAUSAL, S_RELEASE_CAUSAL, S_RENEW_CAUSAL,
    S_RESUME, S_CHECKPOINT, S_CHECKPOINT_CAUSAL, S_UNKNOWN,
    S_UNKNOWN_CAUSAL, S_PAUSE, S_PAUSE_CAUSAL, S_PAUSE_BY, S_RECONCILE,
    S_LIST_UNKNOWN, S_RESOLVE, S_RESOLVE_CAUSAL, S_RESOLVE_RELEASE,
    S_RESOLVE_RELEASE_CAUSAL, S_ENTOMB,
    NSTMT };

/* A reservation's INSERT: its head, and the values of one row (a batch
 * repeats them, idem_store_mysql_batch.c). */
#define INSERT_HEAD "INSERT IGNORE INTO idempotency_keys (scope_hash, " \
    "idem_key, fingerprint, state, owner, request_id, reserved_at, " \
    "lease_at, lease_ms, expires_at) VALUES "
#define INSERT_ROW "(?, ?, ?, 'in_flight', ?, ?, " NOW ", " NOW ", ?, " NOW \
    " + INTERVAL ? MICROSECOND)"
/* A lease past its length: the holder's, kept in the record, or for a
 * record that keeps none (made before schema version 3) the reader's
 * inflight-ttl, the parameter, in microseconds */
#define LAPSED "lease_at < " NOW " - INTERVAL COALESCE(lease_ms * 1000, ?) " \
    "MICROSECOND"
/* Unrenewed for the store's abandon-after, the parameter, in microseconds:
 * with LAPSED, past its lifetime, an abandoned in-flight record */
#define UNRENEWED "lease_at < " NOW " - INTERVAL ? MICROSECOND"
/* The rows of an owner-checked batch, each "(" PK " AND owner = ?)",
 * joined by OR (idem_store_mysql_batch.c). */
#define OWNED_TERM "(" PK " AND owner = ?)"

/* Galera's causal read: the statement waits until the node has applied
 * what the cluster committed before it (nothing without Galera). */
#define CAUSAL "SET STATEMENT wsrep_sync_wait = 1 FOR "
/* The same for an UPDATE or DELETE (bit 2; bit 1 covers reads only). */
#define CAUSAL_WRITE "SET STATEMENT wsrep_sync_wait = 2 FOR "
/* the lease's age and the time left until expires_at (0 or less:
 * expired; in flight, until the reservation's lifetime would end), in
 * microseconds */
#define SELECT_ROW "SELECT state, fingerprint, owner, request_id, " \
    "TIMESTAMPDIFF(MICROSECOND, lease_at, " NOW "), " \
    "TIMESTAMPDIFF(MICROSECOND, " NOW ", expires_at), " \
    "status, headers, body, phase, progress, lease_ms, tombstone_s FROM " \
    "idempotency_keys WHERE " PK
/* a locking read: waits for a transaction that holds the row */
#define SELECT_LOCKED SELECT_ROW " LOCK IN SHARE MODE"
/* the owner-checked statements; an execution holds a record in flight,
 * or of unknown outcome while it reconciles it (DESIGN.md 2.8) */
#define HELD "state IN ('in_flight', 'unknown')"
#define COMMIT_ROW "UPDATE idempotency_keys SET state = 'committed', " \
    "status = ?, headers = ?, body = ?, lease_at = " NOW ", tombstone_s = " \
    "?, expires_at = " NOW " + INTERVAL ? MICROSECOND WHERE " PK " AND " \
    HELD " AND owner = ?"
#define RELEASE_ROW "DELETE FROM idempotency_keys WHERE " PK " AND " \
    "state = 'in_flight' AND owner = ? AND phase IS NULL"
/* a release of a record with progress (idem_reserve_decide: a paused
 * record is resumed by the same request only) */
#define PAUSE_ROW "UPDATE idempotency_keys SET state = 'paused' WHERE " PK \
    " AND state = 'in_flight' AND owner = ? AND phase IS NOT NULL"
/* a renewal's length: the owner's inflight-ttl, NULL to keep it */
#define CHECKPOINT_ROW "UPDATE idempotency_keys SET phase = ?, progress = " \
    "?, lease_at = " NOW ", lease_ms = COALESCE(?, lease_ms) WHERE " PK \
    " AND " HELD " AND owner = ?"
/* kept of unknown outcome, held by nobody (owner ''): the next retry may
 * take it to reconcile */
#define UNKNOWN_ROW "UPDATE idempotency_keys SET state = 'unknown', owner = " \
    "'', lease_at = " NOW ", tombstone_s = ? WHERE " PK " AND " HELD " AND " \
    "owner = ?"
/* a paused record resumed by the same request (idem_reserve_decide); its
 * lifetime is the one it was reserved with */
#define RESUME_ROW "UPDATE idempotency_keys SET state = 'in_flight', " \
    "owner = ?, request_id = ?, lease_at = " NOW ", lease_ms = ? WHERE " PK \
    " AND state = 'paused' AND fingerprint = ? AND expires_at > " NOW
/* a record of unknown outcome taken to reconcile by the same request: held
 * by nobody, or by an execution whose lease is past its length,
 * conditionally on that holder (one of many racing retries wins); it
 * stays unknown until its reconcile hook gives the final answer */
#define RECONCILE_ROW "UPDATE idempotency_keys SET owner = ?, request_id = " \
    "?, lease_at = " NOW ", lease_ms = ? WHERE " PK " AND state = " \
    "'unknown' AND fingerprint = ? AND owner = ? AND (owner = '' OR " \
    LAPSED ") AND expires_at > " NOW
#define RENEW_ROW "UPDATE idempotency_keys SET lease_at = " NOW ", lease_ms " \
    "= COALESCE(?, lease_ms) WHERE " PK " AND " HELD " AND owner = ?"
/* an operator's answer for a record of unknown outcome, or its release
 * (idemfcgi-admin resolve): owner-checked as the owner's own statements
 * are, so a record reconciled, resolved or taken meanwhile is left alone;
 * the answer keeps the record's expiry */
#define RESOLVE_ROW "UPDATE idempotency_keys SET state = 'committed', " \
    "status = ?, headers = ?, body = ?, lease_at = " NOW ", tombstone_s = " \
    "? WHERE " PK " AND state = 'unknown' AND owner = ? AND expires_at > " NOW
#define RESOLVE_RELEASE_ROW "DELETE FROM idempotency_keys WHERE " PK " AND " \
    "state = 'unknown' AND owner = ?"
#define UTC(col) "DATE_FORMAT(" col ", '%Y-%m-%dT%H:%i:%s.%fZ')"
#define AGE(col) "TIMESTAMPDIFF(MICROSECOND, " col ", " NOW ")"
#define LOOKUP_ROW "SELECT state, fingerprint, owner, request_id, " \
    UTC("reserved_at") ", " UTC("lease_at") ", " UTC("expires_at") ", " \
    AGE("reserved_at") ", " AGE("lease_at") ", TIMESTAMPDIFF(" \
    "MICROSECOND, " NOW ", expires_at), status, LENGTH(headers), " \
    "LENGTH(body), phase, lease_ms, tombstone_s FROM idempotency_keys " \
    "WHERE " PK
/* A committed row, or one of unknown outcome, past its expiry whose
 * tombstone has not ended (what purge turns into one, state expired) */
#define TOMB_DUE "state IN ('committed', 'unknown') AND expires_at <= " \
    NOW " AND " \
    "COALESCE(tombstone_s, 0) > 0 AND expires_at + INTERVAL tombstone_s " \
    "SECOND > " NOW
/* A live tombstone (idem_tombstone_live): one made, before its end, or
 * one due */
#define TOMB_LIVE "state = 'expired' AND expires_at > " NOW " OR " TOMB_DUE
/* the records of unknown outcome, the one marked longest ago first (a
 * scan: idemfcgi-admin unknown); at most ? rows */
#define LIST_UNKNOWN_ROWS "SELECT scope_hash, idem_key, fingerprint, " \
    "owner, request_id, phase, " UTC("reserved_at") ", " UTC("lease_at") \
    ", " UTC("expires_at") ", " AGE("reserved_at") ", " AGE("lease_at") \
    ", TIMESTAMPDIFF(MICROSECOND, " NOW ", expires_at) FROM " \
    "idempotency_keys WHERE state = 'unknown' ORDER BY lease_at, " \
    "scope_hash, idem_key LIMIT ?"

typedef struct idem_my_batch idem_my_batch;

typedef struct mysql_store {
	idem_store base;
	idem_mysql_pool *pool;
	idem_my_batch *batch;        /* NULL: [mysql] batch = false */
	idem_replay_cache *cache;    /* committed answers; NULL: none */
	/* sql with S_INSERT bounded by inflight-wait (see lock_wait_insert):
	 * the statements of the pool */
	const char *stmts[NSTMT];
	char insert[1024];
	/* ms: how long each statement may wait for a row lock (S_INSERT:
	 * insert_lock_wait; the other writes and the locking read: the
	 * session's second; plain reads: none), so its connection waits
	 * longer than that for the answer (idem_mysql_expect_lock_wait) */
	uint64_t lock_wait_ms[NSTMT];
	int lose_answer;             /* tests: 1 + the statement whose next
	                              * answer is lost (idem_store_mysql_lose_
	                              * answer); 0: none */
} mysql_store;

/* The most parameters a statement of the store binds (S_TAKEOVER's 9). */
#define PARAMS_MAX 12

typedef struct params {
	MYSQL_BIND b[PARAMS_MAX];
	unsigned long len[PARAMS_MAX];
	unsigned n;
	long long lease_ms;      /* idem_my_p_lease's value */
	unsigned *contended;     /* contention met is added here: the
	                          * request's (idem_store_req.contended);
	                          * NULL (idem_my_p_init): counted on no
	                          * route */
} params;

/* One row of S_SELECT. */
typedef struct row {
	int found;
	idem_record_state state;
	int committed;               /* state is committed */
	int expired;
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	long long lease_age_us;
	long long lease_ms;          /* the lease's length; 0: none kept */
	long long left_us;           /* committed: time left until it expires */
	long long tombstone_ms;      /* committed: its tombstone's length */
	int status;
	idem_stored_response resp;   /* committed: owned by the row */
	idem_progress progress;      /* owned by the row */
} row;

/* What a reserve asks for, shared by the two-phase and the transactional
 * reserve: the request, its policy's times in microseconds, and the
 * length of the lease it takes (kept in the record), in ms. */
typedef struct reserve_args {
	idem_store_req *rq;
	long long life_us, ttl_us;
	long long lease_ms;
	long long abandon_us;    /* the store's abandon-after */
	long long run_expired;   /* 1: the policy reuses a live tombstone */
} reserve_args;

/* The statements' text, by index (idem_store_mysql_sql.c). */
extern const char *const idem_my_sql[NSTMT];

/* idem_store_mysql_sql.c: statements, bindings, rows, the executor */
void
idem_my_store_sql(const idem_config_mysql *my, const char **out);
unsigned long long
idem_my_insert_lock_wait(const idem_store_opts *o);
void
idem_my_lock_wait_insert(const idem_config_mysql *my, const idem_store_opts *o,
    char *buf, size_t size);
void
idem_my_set_lock_waits(const idem_store_opts *o, uint64_t *waits);
void
idem_my_p_init(params *p);
void
idem_my_p_blob(params *p, const void *data, size_t len);
void
idem_my_p_str(params *p, const char *s);
void
idem_my_p_ll(params *p, const long long *v);
void
idem_my_p_key(params *p, const idem_store_key *k);
int
idem_my_permanent_error(unsigned err);
void
idem_my_count_contended(mysql_store *ms, unsigned *contended);
int
idem_my_contention(mysql_store *ms, unsigned *contended, unsigned err);
void
idem_my_backoff(int n);
idem_err
idem_my_run(mysql_store *ms, int i, params *p, idem_mysql_conn **held,
    unsigned long long *affected, int *retried);
idem_err
idem_my_exec_count(mysql_store *ms, int i, params *p, unsigned long long *affected,
    int *retried);
idem_err
idem_my_fetch_row(mysql_store *ms, idem_mysql_conn *c, MYSQL_STMT *st, row *r);
idem_err
idem_my_read_row_with(mysql_store *ms, int i, const idem_store_key *k,
    unsigned *contended, row *r);
idem_err
idem_my_read_row(mysql_store *ms, const idem_store_key *k, row *r);
void
idem_my_reserve_args(const mysql_store *ms, reserve_args *a,
    idem_store_req *rq);
void
idem_my_p_insert(params *p, const reserve_args *a);
void
idem_my_p_reuse(params *p, const reserve_args *a);
void
idem_my_p_takeover(params *p, const reserve_args *a, const char *old_owner);
void
idem_my_p_resume(params *p, const reserve_args *a);
void
idem_my_p_reconcile(params *p, const reserve_args *a, const char *old_owner);
void
idem_my_p_lease(params *p, const idem_store_req *rq);
void
idem_my_p_progress(params *p, const idem_progress *pr,
    const idem_store_req *rq);
void
idem_my_row_clear(row *r);
idem_reserve_step
idem_my_step_of(const reserve_args *a, const row *r);
int
idem_my_row_tomb(const row *r);
void
idem_my_expired_row(row *r, idem_reserve_result *out);
void
idem_my_found_row(mysql_store *ms, const reserve_args *a, row *r, uint64_t read_at,
    idem_reserve_result *out);
void
idem_my_p_answer(params *p, const long long *status, const idem_stored_response *resp,
    const long long *tomb_s, const long long *life_us);
long long
idem_my_tomb_s(const idem_key_policy *policy);
int
idem_my_over_packet(mysql_store *ms, uint64_t size);
void
idem_my_r_buf(MYSQL_BIND *b, enum enum_field_types type, void *buf, size_t size,
    unsigned long *len, my_bool *null);
void
idem_my_r_ll(MYSQL_BIND *b, long long *v, my_bool *null);
idem_err
idem_my_fetch_one(mysql_store *ms, int i, params *p, MYSQL_BIND *res, int *found);
idem_err
idem_my_select_ints(mysql_store *ms, int i, long long *a, long long *b2);

/* idem_store_mysql.c: the owner-checked commit of an answer of size
 * bytes (statement i, S_COMMIT or S_RESOLVE, with p's first parameters) */
idem_err
idem_my_owned_answer(mysql_store *ms, int i, params *p, idem_store_req *rq,
    uint64_t size);

/* idem_store_mysql_batch.c */
/* The batcher of ms made from my ([mysql] batch-rows, causal-reads),
 * which asks (and logs) whether ms's server can batch reservations.
 * Returns IDEM_OK with *out (free with idem_my_batch_free) or
 * IDEM_ERR_NOMEM. */
idem_err
idem_my_batch_new(mysql_store *ms, const idem_config_mysql *my,
    idem_my_batch **out);
/* The engine of b (NULL: b is NULL), for ms->base.batch. */
struct idem_batch *
idem_my_batch_engine(idem_my_batch *b);
void
idem_my_batch_free(idem_my_batch *b);
/* The first INSERT of a's reserve, in a batch when others reserve at the
 * same time: as idem_my_exec_count(S_INSERT) it returns IDEM_OK with
 * *inserted 1 (the row is ours) or 0 (the key is there: read it), or the
 * error of the request's own statement; *retried also when a batch that
 * carried it lost its answer (it may land). */
idem_err
idem_my_batch_insert(mysql_store *ms, const reserve_args *a,
    unsigned long long *inserted, int *retried);
/* The commit of rq's answer resp (size bytes of headers and body, its
 * lifetime *life_us), in a batch when others commit at the same time.
 * Returns what a commit on its own returns: IDEM_OK,
 * IDEM_ERR_NOT_FOUND (fenced), IDEM_ERR_TOO_LARGE, IDEM_ERR_BUSY or
 * IDEM_ERR_STORE. */
idem_err
idem_my_batch_commit(mysql_store *ms, idem_store_req *rq,
    const idem_stored_response *resp, const long long *life_us,
    uint64_t size);

/* idem_store_mysql_admin.c */
idem_err
idem_my_release_prefix(idem_store *s, const char *prefix, idem_store_key **keys,
    size_t *n);
idem_err
idem_my_stats(idem_store *s, idem_store_stats *st);
idem_err
idem_my_lookup(idem_store *s, const idem_store_key *k, idem_store_record *out);
idem_err
idem_my_census(idem_store *s, uint64_t inflight_ttl_ms, idem_store_census *out);
idem_err
idem_my_list_unknown(idem_store *s, size_t max, idem_store_key **keys,
    idem_store_record **recs, size_t *n, int *more);

/* idem_store_mysql_tx.c: the store's transaction operations */
extern const struct idem_store_tx_ops idem_my_tx_ops;

#endif
