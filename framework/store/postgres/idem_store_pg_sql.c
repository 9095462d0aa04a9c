/*
 * idem_store_pg_sql.c - the PostgreSQL store's statements, their
 * parameters and rows, and the executor that runs a pooled statement:
 * once more on a fresh connection when the old one lost its session,
 * again after a deadlock or a serialization failure, never after a lock
 * wait (which has waited all it may).
 *
 * Every time is the database's clock_timestamp() (the wall clock; now()
 * is the transaction's start, and would be the same for every statement
 * of a transaction), but the purge's, which is now() so that its index
 * serves it (see PURGEABLE).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_store_pg_int.h"
#include "idem_time.h"

#define NOW "clock_timestamp()"
/* a parameter of microseconds (or milliseconds) as an interval */
#define USEC(p) "(" p "::float8 * interval '1 microsecond')"
#define MSEC(e) "(" e " * interval '1 millisecond')"
/* an interval in whole microseconds */
#define US(e) "(extract(epoch FROM " e ") * 1000000)::int8"
#define AGE(col) US(NOW " - " col)
#define UTC(col) "to_char(" col " AT TIME ZONE 'UTC', " \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
/* the record's key, at parameters a and b */
#define PK(a, b) "scope_hash = $" a " AND idem_key = $" b
/* a lease past its length (the holder's, kept in the record) */
#define LAPSED "lease_at < " NOW " - " MSEC("lease_ms")
/* an execution holds a record in flight, or of unknown outcome while it
 * reconciles it (DESIGN.md 2.8) */
#define HELD "state IN ('in_flight', 'unknown')"
/* what a reserve reads of the row: the lease's age and the time left
 * until expires_at (0 or less: expired), in microseconds */
#define ROW_COLS "k.state, k.fingerprint, k.owner, k.request_id, " \
    AGE("k.lease_at") ", " US("k.expires_at - " NOW) ", k.status::int8, " \
    "k.headers, k.body, k.phase, k.progress, k.lease_ms::int8, " \
    "k.tombstone_s::int8"
/* an expired record a purge deletes: committed, paused or unknown; in
 * flight only when abandoned, its lease lapsed and unrenewed for
 * abandon-after (the parameter).  By now(), the statement's start (each
 * statement is its own transaction): earlier than clock_timestamp(), so
 * it deletes no more, and stable, so the expires_at index serves it (a
 * volatile clock_timestamp() would scan the whole table every batch) */
#define PURGE_NOW "now()"
#define PURGEABLE(p) "expires_at < " PURGE_NOW " AND NOT (" \
    TOMB_DUE(PURGE_NOW) ") AND (state <> 'in_flight' OR (lease_at < " \
    PURGE_NOW " - " MSEC("lease_ms") " AND lease_at < " PURGE_NOW " - " \
    USEC(p) "))"
/* a committed row, or one of unknown outcome, past its expiry by now n
 * whose tombstone has not ended: what a purge makes a tombstone (state
 * expired) */
#define TOMB_DUE(n) "state IN ('committed', 'unknown') AND expires_at <= " \
    n " AND " \
    "COALESCE(tombstone_s, 0) > 0 AND expires_at + tombstone_s * " \
    "interval '1 second' > " n

/* one round trip: the INSERT, and the row it met when the key was there
 * (a row committed after the statement began is not seen: neither
 * inserted nor found, the reserve reads again) */
#define RESERVE_SQL "WITH ins AS (INSERT INTO idempotency_keys (scope_hash, " \
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, " \
	    "lease_at, lease_ms, expires_at) VALUES ($1, $2, $3, 'in_flight', " \
	    "$4, $5, " NOW ", " NOW ", $6, " NOW " + " USEC("$7") ") ON " \
	    "CONFLICT DO NOTHING RETURNING 1) SELECT EXISTS (SELECT 1 FROM " \
	    "ins), " ROW_COLS " FROM (SELECT 1) AS one LEFT JOIN " \
	    "idempotency_keys k ON k.scope_hash = $1 AND k.idem_key = $2"

/* the owner-checked commit: its own parameters first, then the key and
 * the owner (owned, idem_store_postgres.c) */
#define COMMIT_SQL "UPDATE idempotency_keys SET state = 'committed', status " \
	    "= $1, headers = $2, body = $3, expires_at = " NOW " + " USEC("$4") \
	    ", lease_at = " NOW ", tombstone_s = $5 WHERE " PK("6", "7") \
	    " AND " HELD " AND owner = $8"

/* which server a transaction ran on: its postmaster's start (in
 * microseconds: text of a time would follow the session's TimeZone),
 * which a restart or a promoted standby changes; a crash the postmaster
 * recovers from in place does not, and may hand a lost transaction's id
 * out again: TX_SERVER_STRICT adds the latest checkpoint's redo point,
 * which that recovery moves (a keyed transaction's outcome is checked
 * against its record instead) */
#define TX_SERVER "(extract(epoch FROM pg_postmaster_start_time()) * " \
	    "1000000)::int8::text"
#define TX_SERVER_STRICT TX_SERVER " || '/' || " \
	    "(pg_control_checkpoint()).redo_lsn::text"
#define TX_ID "pg_current_xact_id()::text, " TX_SERVER

#define TAKEOVER_SQL "UPDATE idempotency_keys SET owner = $1, request_id = " \
	    "$2, lease_at = " NOW ", lease_ms = $3, expires_at = " NOW " + " \
	    USEC("$4") " WHERE " PK("5", "6") " AND state = 'in_flight' AND " \
	    "owner = $7 AND fingerprint = $8 AND " LAPSED
#define REUSE_SQL "UPDATE idempotency_keys SET state = 'in_flight', " \
	    "fingerprint = $1, owner = $2, request_id = $3, reserved_at = " NOW \
	    ", lease_at = " NOW ", lease_ms = $4, expires_at = " NOW " + " \
	    USEC("$5") ", status = NULL, headers = NULL, body = NULL, phase = " \
	    "NULL, progress = NULL, tombstone_s = NULL WHERE " PK("6", "7") \
	    " AND (state = 'expired' OR expires_at <= " NOW " AND (state <> " \
	    "'in_flight' OR (" LAPSED " AND lease_at < " NOW " - " USEC("$8") \
	    "))) AND ($9::boolean OR NOT (state = 'expired' AND expires_at > " \
	    NOW " OR " TOMB_DUE(NOW) "))"
#define RESUME_SQL "UPDATE idempotency_keys SET state = 'in_flight', owner = " \
	    "$1, request_id = $2, lease_at = " NOW ", lease_ms = $3 WHERE " \
	    PK("4", "5") " AND state = 'paused' AND fingerprint = $6 AND " \
	    "expires_at > " NOW
#define RECONCILE_SQL "UPDATE idempotency_keys SET owner = $1, request_id = " \
	    "$2, lease_at = " NOW ", lease_ms = $3 WHERE " PK("4", "5") " AND " \
	    "state = 'unknown' AND fingerprint = $6 AND owner = $7 AND (owner " \
	    "= '' OR " LAPSED ") AND expires_at > " NOW
#define CHECKPOINT_SQL "UPDATE idempotency_keys SET phase = $1, progress = " \
	    "$2, lease_at = " NOW ", lease_ms = COALESCE($3::integer, " \
	    "lease_ms) WHERE " PK("4", "5") " AND " HELD " AND owner = $6"
#define UNKNOWN_SQL "UPDATE idempotency_keys SET state = 'unknown', owner = " \
	    "'', lease_at = " NOW ", tombstone_s = $1 WHERE " PK("2", "3") \
	    " AND " HELD " AND owner = $4"

const char *const idem_pgs_sql[PNSTMT] = {
	[P_RESERVE] = RESERVE_SQL,
	[P_SELECT] = "SELECT false, " ROW_COLS " FROM idempotency_keys k "
	    "WHERE k.scope_hash = $1 AND k.idem_key = $2",
	/* the reservation rule's TAKE_OVER and REUSE (idem_reserve_decide),
	 * made conditional on what was read */
	[P_TAKEOVER] = TAKEOVER_SQL,
	[P_REUSE] = REUSE_SQL,
	/* the rule's RESUME: a paused record, by the same request; its
	 * lifetime is the one it was reserved with */
	[P_RESUME] = RESUME_SQL,
	/* the rule's RECONCILE: held by nobody, or by an execution whose
	 * lease is past its length, conditionally on that holder */
	[P_RECONCILE] = RECONCILE_SQL,
	/* the owner-checked statements: their own parameters first, then
	 * the key and the owner (owned, idem_store_postgres.c) */
	[P_COMMIT] = COMMIT_SQL,
	[P_RELEASE] = "DELETE FROM idempotency_keys WHERE " PK("1", "2") " AND "
	    "state = 'in_flight' AND owner = $3 AND phase IS NULL",
	/* a release of a record with progress: paused, for the same
	 * request only */
	[P_PAUSE] = "UPDATE idempotency_keys SET state = 'paused' WHERE "
	    PK("1", "2") " AND state = 'in_flight' AND owner = $3 AND phase IS "
	    "NOT NULL",
	/* a renewal's length: the owner's inflight-ttl, NULL to keep it */
	[P_RENEW] = "UPDATE idempotency_keys SET lease_at = " NOW ", lease_ms = "
	    "COALESCE($1::integer, lease_ms) WHERE " PK("2", "3") " AND " HELD
	    " AND owner = $4",
	[P_CHECKPOINT] = CHECKPOINT_SQL,
	/* kept of unknown outcome, held by nobody (owner ''): the next retry
	 * may take it to reconcile */
	[P_UNKNOWN] = UNKNOWN_SQL,
	/* an operator's answer for a record of unknown outcome (its expiry
	 * kept), or its release: owner-checked as the owner's are */
	[P_RESOLVE] = "UPDATE idempotency_keys SET state = 'committed', status "
	    "= $1, headers = $2, body = $3, lease_at = " NOW ", tombstone_s = "
	    "$4 WHERE " PK("5", "6") " AND state = 'unknown' AND owner = $7 AND "
	    "expires_at > " NOW,
	[P_RESOLVE_RELEASE] = "DELETE FROM idempotency_keys WHERE " PK("1", "2")
	    " AND state = 'unknown' AND owner = $3",
	/* in bounded batches (DELETE has no LIMIT): the keys chosen, then
	 * the condition again on each, so a row reused meanwhile is not
	 * deleted */
	[P_PURGE] = "DELETE FROM idempotency_keys WHERE (scope_hash, idem_key) "
	    "IN (SELECT scope_hash, idem_key FROM idempotency_keys WHERE "
	    PURGEABLE("$1") " LIMIT $2) AND " PURGEABLE("$1"),
	/* a committed row past its expiry becomes its tombstone: its answer
	 * dropped, its expiry the tombstone's end; chosen as the purge's */
	[P_ENTOMB] = "UPDATE idempotency_keys SET state = 'expired', headers = "
	    "NULL, body = NULL, phase = NULL, progress = NULL, expires_at = "
	    "expires_at + tombstone_s * "
	    "interval '1 second' WHERE (scope_hash, idem_key) IN (SELECT "
	    "scope_hash, idem_key FROM idempotency_keys WHERE expires_at < "
	    PURGE_NOW " AND " TOMB_DUE(PURGE_NOW) " LIMIT $1) AND "
	    TOMB_DUE(PURGE_NOW),
	[P_STATS] = "SELECT count(*), count(*) FILTER (WHERE state = "
	    "'in_flight'), count(*) FILTER (WHERE state = 'unknown'), "
	    "COALESCE(max(" AGE("reserved_at") ") FILTER (WHERE state = "
	    "'unknown'), 0), count(*) FILTER (WHERE state = 'expired') FROM "
	    "idempotency_keys",
	[P_VERSION] = "SELECT max(version)::int8 FROM idemfcgi_schema",
	/* a dead worker's records, by the prefix of their owner tokens
	 * ($1 <= owner < $2, which the owner index serves) */
	[P_OWNED_BY] = "SELECT scope_hash, idem_key FROM idempotency_keys "
	    "WHERE state = 'in_flight' AND owner >= $1 AND owner < $2",
	[P_RELEASE_BY] = "DELETE FROM idempotency_keys WHERE state = "
	    "'in_flight' AND owner >= $1 AND owner < $2 AND phase IS NULL",
	[P_PAUSE_BY] = "UPDATE idempotency_keys SET state = 'paused' WHERE "
	    "state = 'in_flight' AND owner >= $1 AND owner < $2 AND phase IS "
	    "NOT NULL",
	[P_LOOKUP] = "SELECT state, fingerprint, owner, request_id, "
	    UTC("reserved_at") ", " UTC("lease_at") ", " UTC("expires_at") ", "
	    AGE("reserved_at") ", " AGE("lease_at") ", " US("expires_at - " NOW)
	    ", status::int8, octet_length(headers)::int8, "
	    "octet_length(body)::int8, phase, lease_ms::int8, "
	    "tombstone_s::int8 FROM idempotency_keys WHERE " PK("1", "2"),
	/* in-flight records idle past their lease's length are stale */
	[P_CENSUS] = "SELECT count(*) FILTER (WHERE state = 'in_flight'), "
	    "count(*) FILTER (WHERE state = 'in_flight' AND " LAPSED "), "
	    "count(*) FILTER (WHERE state = 'committed' AND expires_at > " NOW
	    "), count(*) FILTER (WHERE state <> 'in_flight' AND expires_at <= "
	    NOW " AND NOT (" TOMB_DUE(NOW) ")), count(*) FILTER (WHERE state = "
	    "'paused' AND expires_at > " NOW "), count(*) FILTER (WHERE state = "
	    "'unknown' AND expires_at > " NOW "), count(*) FILTER (WHERE state "
	    "= 'expired' AND expires_at > " NOW " OR " TOMB_DUE(NOW) ") FROM "
	    "idempotency_keys",
	[P_OLDEST] = "SELECT scope_hash, idem_key, owner, request_id, "
	    AGE("reserved_at") ", " AGE("lease_at") " FROM idempotency_keys "
	    "WHERE state = 'in_flight' ORDER BY reserved_at LIMIT 1",
	/* the records of unknown outcome, the one marked longest ago first
	 * (a scan: idemfcgi-admin unknown); at most $1 rows */
	[P_LIST_UNKNOWN] = "SELECT scope_hash, idem_key, fingerprint, owner, "
	    "request_id, phase, " UTC("reserved_at") ", " UTC("lease_at") ", "
	    UTC("expires_at") ", " AGE("reserved_at") ", " AGE("lease_at") ", "
	    US("expires_at - " NOW) " FROM idempotency_keys WHERE state = "
	    "'unknown' ORDER BY lease_at, scope_hash, idem_key LIMIT $1",
	/* a lost COMMIT's transaction ($1, an xid8) asked of the server
	 * that ran it ($2: TX_SERVER, or TX_SERVER_STRICT with its '/'):
	 * another server's answer would be about another transaction of
	 * that id */
	[P_XACT_STATUS] = "SELECT s = $2, CASE WHEN s = $2 THEN "
	    "pg_xact_status($1::xid8) END FROM (SELECT CASE WHEN strpos($2, "
	    "'/') > 0 THEN " TX_SERVER_STRICT " ELSE " TX_SERVER " END AS s) "
	    "AS server",
};

/* The statements of transactional routes, on a plugin's pool (the
 * transaction is the handler's).  The writes that end one (its record,
 * its mark of unknown outcome), and the read of a keyless one's id,
 * return the transaction's id and its server, so that a COMMIT whose
 * answer is lost can be asked about. */
const char *const idem_pgs_tx_sql[PT_NSTMT] = {
	[PT_BEGIN] = "BEGIN",
	[PT_RESERVE] = RESERVE_SQL,
	[PT_TAKEOVER] = TAKEOVER_SQL,
	[PT_REUSE] = REUSE_SQL,
	[PT_RESUME] = RESUME_SQL,
	[PT_RECONCILE] = RECONCILE_SQL,
	[PT_RECORD] = COMMIT_SQL " RETURNING " TX_ID,
	[PT_CHECKPOINT] = CHECKPOINT_SQL,
	[PT_UNKNOWN] = UNKNOWN_SQL " RETURNING " TX_ID,
	/* NULL: no write, so no transaction id, nothing to commit */
	[PT_XID] = "SELECT pg_current_xact_id_if_assigned()::text, "
	    TX_SERVER_STRICT,
	[PT_COMMIT] = "COMMIT",
	[PT_ROLLBACK] = "ROLLBACK",
};

/* A lane's rows arrive as arrays, element i of each the values of row
 * i, numbered by WITH ORDINALITY in the order sent (sorted by key: every
 * statement locks in that order).  The reservations: P_RESERVE for
 * every row, each answered by its number, whether it inserted, and the
 * row it met when it did not (read as P_RESERVE reads it: a row
 * inserted by this very statement, for a key sent twice, is not seen).
 * The commits: P_COMMIT for every row, RETURNING the numbers of those it
 * stored. */
const char *const idem_pgs_batch_sql[PG_LANE_NSTMT] = {
	"WITH v AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], "
	    "$3::bytea[], $4::text[], $5::text[], $6::int4[], $7::int8[]) "
	    "WITH ORDINALITY AS v (s, k, f, o, r, l, u, i)), ins AS (INSERT "
	    "INTO idempotency_keys (scope_hash, idem_key, fingerprint, state, "
	    "owner, request_id, reserved_at, lease_at, lease_ms, expires_at) "
	    "SELECT s, k, f, 'in_flight', o, r, " NOW ", " NOW ", l, " NOW
	    " + " USEC("u") " FROM v ORDER BY i ON CONFLICT DO NOTHING "
	    "RETURNING scope_hash, idem_key, owner) SELECT v.i, ins.owner IS "
	    "NOT NULL, " ROW_COLS " FROM v LEFT JOIN ins ON ins.scope_hash = "
	    "v.s AND ins.idem_key = v.k AND ins.owner = v.o LEFT JOIN "
	    "idempotency_keys k ON ins.owner IS NULL AND k.scope_hash = v.s "
	    "AND k.idem_key = v.k ORDER BY v.i",
	"UPDATE idempotency_keys k SET state = 'committed', status = v.st, "
	    "headers = v.h, body = v.b, expires_at = " NOW " + " USEC("v.u")
	    ", lease_at = " NOW ", tombstone_s = v.t FROM unnest($1::bytea[], "
	    "$2::bytea[], $3::text[], $4::int4[], $5::bytea[], $6::bytea[], "
	    "$7::int8[], $8::int4[]) WITH ORDINALITY AS v (s, kk, o, st, h, b, "
	    "u, t, i) WHERE k.scope_hash = v.s AND k.idem_key = "
	    "v.kk AND k." HELD " AND k.owner = v.o RETURNING v.i",
	/* a lone request's, on a lane's connection */
	RESERVE_SQL,
	COMMIT_SQL,
};

const char *const idem_pgs_version_sql[1] = {
	"SELECT max(version)::int8 FROM idemfcgi_schema",
};

/* ------------------------------------------------------------ executing */

int
idem_pgs_lose_answer(pg_store *ps, int i)
{
	int want = i + 1;

	return atomic_compare_exchange_strong(&ps->lose_answer, &want, 0);
}

void
idem_pgs_count_contended(pg_store *ps, unsigned *contended)
{
	if (contended != NULL)
		(*contended)++;
	else if (ps->base.metrics != NULL)
		idem_metrics_outcome(ps->base.metrics, IDEM_METRICS_NO_ROUTE,
		    IDEM_OUTCOME_CONTENDED, 1);
}

void
idem_pgs_backoff(int n)
{
	idem_sleep_ms(1 + random() % (1L << (n < 6 ? n : 6)));
}

/* How long statement i may wait for a row lock, in ms: the writes the
 * session's lock_timeout, the reads nothing. */
static uint64_t
lock_wait(const pg_store *ps, int i)
{
	switch (i) {
	case P_SELECT: case P_STATS: case P_VERSION: case P_OWNED_BY:
	case P_LOOKUP: case P_CENSUS: case P_OLDEST: case P_LIST_UNKNOWN:
	case P_XACT_STATUS:
		return 0;
	}
	return ps->lock_wait_ms;
}

idem_err
idem_pgs_run(pg_store *ps, int i, const idem_pg_params *p,
    unsigned *contended, PGresult **res, int *retried)
{
	int attempt, lost = 0, busy = 0;
	idem_err fail = IDEM_ERR_STORE;
	char what[32];

	if (res != NULL)
		*res = NULL;
	snprintf(what, sizeof(what), "statement %d", i);
	for (attempt = 0; attempt < PG_CONTENTION_TRIES + 2; attempt++) {
		idem_pg_conn *c = idem_pg_get(ps->pool);
		char state[6];
		PGresult *r;
		idem_err err;

		if (c == NULL) {
			fail = IDEM_ERR_STORE;
			break;
		}
		atomic_fetch_add(&ps->sent, 1);
		err = idem_pg_exec(c, (size_t)i, p, lock_wait(ps, i), &r, state);
		if (err == IDEM_OK) {
			if (idem_pgs_lose_answer(ps, i)) {
				/* tests: applied, and its answer lost with its
				 * connection, as if the server had gone away */
				c->broken = 1;
				PQclear(r);
				idem_pg_put(ps->pool, c);
				lost++;
				continue;
			}
			idem_pg_put(ps->pool, c);
			if (retried != NULL)
				*retried = lost > 0;
			if (res != NULL)
				*res = r;
			else
				PQclear(r);
			return IDEM_OK;
		}
		if (err == IDEM_ERR_BUSY) {
			idem_pg_put(ps->pool, c);
			idem_pgs_count_contended(ps, contended);
			fail = IDEM_ERR_BUSY;
			/* a lock wait has waited all it may already */
			if (strcmp(state, "55P03") == 0 ||
			    ++busy >= PG_CONTENTION_TRIES)
				break;
			idem_pgs_backoff(busy);
			continue;
		}
		fail = err;
		if (err != IDEM_ERR_STORE || !c->broken || lost++ > 0) {
			idem_pg_log_error(c, what);
			idem_pg_put(ps->pool, c);
			break;
		}
		/* its session lost: once more, on a new connection */
		idem_pg_put(ps->pool, c);
	}
	if (retried != NULL)
		*retried = lost > 0;
	return fail;
}

idem_err
idem_pgs_count(pg_store *ps, int i, const idem_pg_params *p,
    unsigned *contended, unsigned long long *n, int *retried)
{
	PGresult *res;
	idem_err err;

	*n = 0;
	if ((err = idem_pgs_run(ps, i, p, contended, &res, retried)) != IDEM_OK)
		return err;
	*n = strtoull(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return IDEM_OK;
}

/* ------------------------------------------------------ parameters, rows */

void
idem_pgs_p_reserve(idem_pg_params *p, const pg_reserve_args *a)
{
	idem_pg_p_init(p);
	idem_pgs_p_key(p, &a->rq->key);
	idem_pg_p_bytes(p, a->rq->fp, 32);
	idem_pg_p_text(p, a->rq->owner);
	idem_pg_p_text(p, a->rq->request_id);
	idem_pg_p_ll(p, a->lease_ms);
	idem_pg_p_ll(p, a->life_us);
}

void
idem_pgs_p_commit(idem_pg_params *p, const idem_store_req *rq,
    const idem_stored_response *resp)
{
	idem_pg_p_init(p);
	idem_pg_p_ll(p, resp->status);
	idem_pg_p_bytes(p, resp->headers, resp->headers_len);
	idem_pg_p_bytes(p, resp->body, resp->body_len);
	idem_pg_p_ll(p, (long long)rq->policy->lifetime_ms * 1000);
	idem_pg_p_ll(p, idem_pgs_tomb_s(rq->policy));
}

int
idem_pgs_tomb_s(const idem_key_policy *policy)
{
	return policy != NULL ? (int)((policy->tombstone_ms + 999) / 1000) : 0;
}

void
idem_pgs_p_key(idem_pg_params *p, const idem_store_key *k)
{
	idem_pg_p_bytes(p, k->scope, 32);
	idem_pg_p_bytes(p, k->key, k->key_len);
}

void
idem_pgs_p_lease(idem_pg_params *p, const idem_store_req *rq)
{
	long long ms = rq->policy != NULL ? (long long)rq->policy->lease_ms : 0;

	if (ms > 0)
		idem_pg_p_ll(p, ms);
	else
		idem_pg_p_null(p);
}

void
idem_pgs_reserve_args(const pg_store *ps, pg_reserve_args *a,
    idem_store_req *rq)
{
	a->abandon_us = (long long)ps->base.abandon_ms * 1000;
	a->rq = rq;
	a->life_us = (long long)rq->policy->lifetime_ms * 1000;
	a->ttl_us = (long long)rq->policy->lease_ms * 1000;
	a->lease_ms = (long long)rq->policy->lease_ms;
}

void
idem_pgs_p_progress(idem_pg_params *p, const idem_progress *pr,
    const idem_store_req *rq)
{
	idem_pg_p_init(p);
	idem_pg_p_text(p, pr->phase);
	idem_pg_p_bytes(p, pr->state, pr->state_len);
	idem_pgs_p_lease(p, rq);
}

void
idem_pgs_p_takeover(idem_pg_params *p, const pg_reserve_args *a,
    const char *old_owner)
{
	idem_pg_p_init(p);
	idem_pg_p_text(p, a->rq->owner);
	idem_pg_p_text(p, a->rq->request_id);
	idem_pg_p_ll(p, a->lease_ms);
	idem_pg_p_ll(p, a->life_us);
	idem_pgs_p_key(p, &a->rq->key);
	idem_pg_p_text(p, old_owner);
	idem_pg_p_bytes(p, a->rq->fp, 32);
}

void
idem_pgs_p_reuse(idem_pg_params *p, const pg_reserve_args *a)
{
	idem_pg_p_init(p);
	idem_pg_p_bytes(p, a->rq->fp, 32);
	idem_pg_p_text(p, a->rq->owner);
	idem_pg_p_text(p, a->rq->request_id);
	idem_pg_p_ll(p, a->lease_ms);
	idem_pg_p_ll(p, a->life_us);
	idem_pgs_p_key(p, &a->rq->key);
	idem_pg_p_ll(p, a->abandon_us);
	idem_pg_p_text(p, a->rq->policy->run_expired ? "true" : "false");
}

void
idem_pgs_p_held(idem_pg_params *p, const pg_reserve_args *a,
    const char *old_owner)
{
	idem_pg_p_init(p);
	idem_pg_p_text(p, a->rq->owner);
	idem_pg_p_text(p, a->rq->request_id);
	idem_pg_p_ll(p, a->lease_ms);
	idem_pgs_p_key(p, &a->rq->key);
	idem_pg_p_bytes(p, a->rq->fp, 32);
	if (old_owner != NULL)
		idem_pg_p_text(p, old_owner);
}

size_t
idem_pgs_str(const PGresult *res, int row, int col, char *buf, size_t size)
{
	size_t n = 0;

	if (!PQgetisnull(res, row, col)) {
		n = (size_t)PQgetlength(res, row, col);
		if (n > size - 1)
			n = size - 1;
		memcpy(buf, PQgetvalue(res, row, col), n);
	}
	buf[n] = '\0';
	return n;
}

/* Copies column col of row row of res into a new buffer (NUL-
 * terminated) in *out and *len; NULL stays NULL.  Returns 0 or -1 (no
 * memory). */
static int
dup_col(const PGresult *res, int row, int col, char **out, size_t *len)
{
	size_t n;

	*out = NULL;
	*len = 0;
	if (PQgetisnull(res, row, col))
		return 0;
	n = (size_t)PQgetlength(res, row, col);
	if ((*out = malloc(n + 1)) == NULL)
		return -1;
	memcpy(*out, PQgetvalue(res, row, col), n);
	(*out)[n] = '\0';
	*len = n;
	return 0;
}

idem_err
idem_pgs_row(const PGresult *res, int row, int first, pg_row *r)
{
	char state[16];
	int i;

	memset(r, 0, sizeof(*r));
	/* columns first.. are ROW_COLS; state is NOT NULL: NULL is no row */
	if (PQntuples(res) <= row || PQnfields(res) < first + 13 ||
	    PQgetisnull(res, row, first))
		return IDEM_OK;
	r->found = 1;
	idem_pgs_str(res, row, first, state, sizeof(state));
	r->state = IDEM_RECORD_IN_FLIGHT;
	for (i = 0; i < IDEM_RECORD__MAX; i++)
		if (strcmp(state, idem_record_state_names[i]) == 0)
			r->state = (idem_record_state)i;
	r->committed = r->state == IDEM_RECORD_COMMITTED;
	if (PQgetlength(res, row, first + 1) == 32)
		memcpy(r->fp, PQgetvalue(res, row, first + 1), 32);
	idem_pgs_str(res, row, first + 2, r->owner, sizeof(r->owner));
	idem_pgs_str(res, row, first + 3, r->request_id,
	    sizeof(r->request_id));
	r->lease_age_us = idem_pg_ll(res, row, first + 4);
	r->left_us = idem_pg_ll(res, row, first + 5);
	r->expired = r->left_us <= 0;
	idem_pgs_str(res, row, first + 9, r->progress.phase,
	    sizeof(r->progress.phase));
	r->lease_ms = idem_pg_ll(res, row, first + 11);
	r->tombstone_ms = idem_pg_ll(res, row, first + 12) * 1000;
	if (r->progress.phase[0] != '\0' && dup_col(res, row, first + 10,
	    &r->progress.state, &r->progress.state_len) < 0)
		goto nomem;
	r->status = (int)idem_pg_ll(res, row, first + 6);
	/* a committed row past its expiry is never replayed: no answer */
	if (r->committed && !r->expired) {
		r->resp.status = r->status;
		if (dup_col(res, row, first + 7, &r->resp.headers,
		    &r->resp.headers_len) < 0 || dup_col(res, row, first + 8,
		    &r->resp.body, &r->resp.body_len) < 0)
			goto nomem;
	}
	return IDEM_OK;
nomem:
	idem_pgs_row_clear(r);
	return IDEM_ERR_NOMEM;
}

idem_err
idem_pgs_read_row(pg_store *ps, const idem_store_key *k, unsigned *contended,
    pg_row *r)
{
	idem_pg_params p;
	PGresult *res;
	idem_err err;

	memset(r, 0, sizeof(*r));
	idem_pg_p_init(&p);
	idem_pgs_p_key(&p, k);
	if ((err = idem_pgs_run(ps, P_SELECT, &p, contended, &res, NULL)) !=
	    IDEM_OK)
		return err;
	err = idem_pgs_row(res, 0, 1, r);
	PQclear(res);
	return err;
}

void
idem_pgs_row_clear(pg_row *r)
{
	idem_stored_response_clear(&r->resp);
	idem_progress_clear(&r->progress);
}

idem_reserve_step
idem_pgs_step_of(const pg_reserve_args *a, const pg_row *r)
{
	idem_found f = { r->state, r->expired, idem_pgs_row_tomb(r), r->fp,
	    r->owner, r->lease_age_us, r->lease_ms * 1000, a->abandon_us };

	return idem_reserve_decide(&f, a->rq->fp, a->rq->owner, a->ttl_us,
	    a->rq->policy);
}

int
idem_pgs_row_tomb(const pg_row *r)
{
	/* not past its expiry until left_us says so, to the microsecond */
	return idem_tombstone_live(r->state, r->expired ? -r->left_us / 1000 :
	    -1, (uint64_t)r->tombstone_ms);
}

void
idem_pgs_expired_row(pg_row *r, idem_reserve_result *out)
{
	idem_reserve_expired(out, r->fp, r->status, r->lease_age_us);
	idem_pgs_row_clear(r);
}

void
idem_pgs_found_row(pg_store *ps, const pg_reserve_args *a, pg_row *r,
    uint64_t read_at, idem_reserve_result *out)
{
	memcpy(out->fingerprint, r->fp, 32);
	/* what a takeover, a resume or a reconcile goes on from */
	idem_progress_clear(&out->progress);
	out->progress = r->progress;
	memset(&r->progress, 0, sizeof(r->progress));
	if (r->committed) {
		out->outcome = IDEM_RESERVE_COMMITTED;
		out->response = r->resp;
		memset(&r->resp, 0, sizeof(r->resp));
		idem_replay_cache_keep(ps->cache, &a->rq->key, r->fp,
		    &out->response, read_at, r->left_us);
		return;
	}
	idem_copy_string(out->owner, sizeof(out->owner), r->owner);
	idem_copy_string(out->request_id, sizeof(out->request_id),
	    r->request_id);
	out->lease_age_ms = r->lease_age_us > 0 ?
	    (uint64_t)r->lease_age_us / 1000 : 0;
	out->lease_ms = r->lease_ms > 0 ? (uint64_t)r->lease_ms : 0;
	out->outcome = IDEM_RESERVE_IN_FLIGHT;
}
