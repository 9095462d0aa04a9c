/*
 * idem_store_mysql_sql.c - the MySQL store's statements (their text, the
 * lock waits they may meet), their bindings and rows, and the executor
 * that runs a pooled statement: once more on a fresh connection when the
 * old one turned out to be dead, again after a deadlock, never after a
 * lock wait (which has waited all it may).
 */
#include "config.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>
#include <mysql.h>

#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_store_mysql_int.h"
#include "idem_time.h"

const char *const idem_my_sql[NSTMT] = {
	[S_INSERT] = INSERT_HEAD INSERT_ROW,
	[S_SELECT] = SELECT_ROW,
	/* S_TAKEOVER and S_REUSE: the reservation rule's TAKE_OVER and REUSE
	 * (idem_reserve_decide), made conditional on what was read */
	[S_TAKEOVER] = "UPDATE idempotency_keys SET owner = ?, request_id = ?, "
	    "lease_at = " NOW ", lease_ms = ?, expires_at = " NOW " + INTERVAL "
	    "? MICROSECOND WHERE " PK " AND state = 'in_flight' AND owner = ? "
	    "AND fingerprint = ? AND " LAPSED,
	[S_REUSE] = "UPDATE idempotency_keys SET state = 'in_flight', "
	    "fingerprint = ?, owner = ?, request_id = ?, reserved_at = " NOW
	    ", lease_at = " NOW ", lease_ms = ?, expires_at = " NOW " + INTERVAL ? "
	    "MICROSECOND, status = NULL, headers = NULL, body = NULL, phase = "
	    "NULL, progress = NULL, tombstone_s = NULL WHERE " PK " AND (state "
	    "= 'expired' OR expires_at <= " NOW " AND (state <> 'in_flight' OR "
	    "(" LAPSED " AND " UNRENEWED "))) AND (? = 1 OR NOT (" TOMB_LIVE
	    "))",
	/* the rule's RESUME and RECONCILE */
	[S_RESUME] = RESUME_ROW,
	[S_RECONCILE] = RECONCILE_ROW,
	[S_COMMIT] = COMMIT_ROW,
	[S_RELEASE] = RELEASE_ROW,
	[S_RENEW] = RENEW_ROW,
	[S_CHECKPOINT] = CHECKPOINT_ROW,
	[S_UNKNOWN] = UNKNOWN_ROW,
	[S_PAUSE] = PAUSE_ROW,
	/* never an in_flight row whose lease is live: its owner may still be
	 * working on it; one whose lease lapsed past its lifetime is
	 * abandoned */
	[S_PURGE] = "DELETE FROM idempotency_keys WHERE expires_at < " NOW
	    " AND NOT (" TOMB_DUE ") AND (state <> 'in_flight' OR (" LAPSED
	    " AND " UNRENEWED ")) LIMIT ?",
	/* a committed row past its expiry becomes its tombstone: its answer
	 * dropped, its expiry the tombstone's end (a range of the expiry
	 * index, as the purge's) */
	[S_ENTOMB] = "UPDATE idempotency_keys SET state = 'expired', headers "
	    "= NULL, body = NULL, phase = NULL, progress = NULL, expires_at = "
	    "expires_at + INTERVAL "
	    "tombstone_s SECOND WHERE expires_at < " NOW " AND " TOMB_DUE
	    " LIMIT ?",
	[S_STATS] = "SELECT COUNT(*), COALESCE(SUM(state = 'in_flight'), 0), "
	    "COALESCE(SUM(state = 'unknown'), 0), COALESCE(MAX(IF(state = "
	    "'unknown', TIMESTAMPDIFF(MICROSECOND, reserved_at, " NOW "), 0)), 0), "
	    "COALESCE(SUM(state = 'expired'), 0) FROM idempotency_keys",
	[S_VERSION] = "SELECT MAX(version) FROM idemfcgi_schema",
	[S_OWNED_BY] = "SELECT scope_hash, idem_key FROM idempotency_keys WHERE "
	    "state = 'in_flight' AND owner LIKE ?",
	/* a dead worker's records: released as release does */
	[S_RELEASE_BY] = "DELETE FROM idempotency_keys WHERE state = "
	    "'in_flight' AND owner LIKE ? AND phase IS NULL",
	[S_PAUSE_BY] = "UPDATE idempotency_keys SET state = 'paused' WHERE "
	    "state = 'in_flight' AND owner LIKE ? AND phase IS NOT NULL",
	[S_LOOKUP] = LOOKUP_ROW,
	[S_CENSUS] = "SELECT COALESCE(SUM(state = 'in_flight'), 0), "
	    "COALESCE(SUM(state = 'in_flight' AND " LAPSED "), 0), "
	    "COALESCE(SUM(state = 'committed' AND "
	    "expires_at > " NOW "), 0), COALESCE(SUM(state <> 'in_flight' AND "
	    "expires_at <= " NOW " AND NOT (" TOMB_DUE ")), 0), COALESCE(SUM("
	    "state = 'paused' AND expires_at > " NOW "), 0), COALESCE(SUM(state "
	    "= 'unknown' AND expires_at > " NOW "), 0), COALESCE(SUM(state = "
	    "'expired' AND expires_at > " NOW " OR " TOMB_DUE "), 0) FROM "
	    "idempotency_keys",
	[S_OLDEST] = "SELECT scope_hash, idem_key, owner, request_id, "
	    AGE("reserved_at") ", " AGE("lease_at") " FROM idempotency_keys "
	    "WHERE state = 'in_flight' ORDER BY reserved_at LIMIT 1",
	/* waits (up to the store's lock wait, a second) for a transaction
	 * holding the row to end: how an ambiguous COMMIT learns its
	 * outcome; inside a transaction, a read that opens no snapshot.
	 * Causal whatever causal-reads says (rare, and after a failover it
	 * may run on a node that has not applied that COMMIT yet) */
	[S_SELECT_LOCKED] = CAUSAL SELECT_LOCKED,
	/* fails at once (1205) when a transaction holds the key's row: a
	 * transactional request's reservation, invisible until it commits */
	[S_PROBE] = "SELECT 1 FROM idempotency_keys WHERE " PK " LOCK IN SHARE "
	    "MODE NOWAIT",
	/* On Galera an owner-checked statement that matched no row may
	 * have run on a node that had not yet applied the reservation,
	 * made through another node: a row still ours looks fenced.  These
	 * run it again once the node has applied what the cluster
	 * committed before (see owned), and read the row so */
	[S_SELECT_CAUSAL] = CAUSAL SELECT_ROW,
	[S_COMMIT_CAUSAL] = CAUSAL_WRITE COMMIT_ROW,
	[S_RELEASE_CAUSAL] = CAUSAL_WRITE RELEASE_ROW,
	[S_RENEW_CAUSAL] = CAUSAL_WRITE RENEW_ROW,
	[S_CHECKPOINT_CAUSAL] = CAUSAL_WRITE CHECKPOINT_ROW,
	[S_UNKNOWN_CAUSAL] = CAUSAL_WRITE UNKNOWN_ROW,
	[S_PAUSE_CAUSAL] = CAUSAL_WRITE PAUSE_ROW,
	/* idemfcgi-admin unknown and resolve */
	[S_LIST_UNKNOWN] = LIST_UNKNOWN_ROWS,
	[S_RESOLVE] = RESOLVE_ROW,
	[S_RESOLVE_CAUSAL] = CAUSAL_WRITE RESOLVE_ROW,
	[S_RESOLVE_RELEASE] = RESOLVE_RELEASE_ROW,
	[S_RESOLVE_RELEASE_CAUSAL] = CAUSAL_WRITE RESOLVE_RELEASE_ROW,
};

/*
 * With [mysql] causal-reads, the statements that decide (a reservation's
 * INSERT, see lock_wait_insert, and its read of the row it found: replay,
 * in flight or takeover; idemfcgi-admin's show and unknown; the read that
 * learns a lost COMMIT's outcome always is) wait until the node has
 * applied what the cluster committed before them (wsrep_sync_wait): a
 * replay then never answers IN_FLIGHT for a key another node has just
 * committed.  (Inside a transaction, past its first statement, Galera
 * does not wait: the transactional path's read is causal through its
 * INSERT.)  Without Galera the setting does nothing.
 */
static const char *const causal_sql[NSTMT] = {
	[S_SELECT] = CAUSAL SELECT_ROW,
	[S_LOOKUP] = CAUSAL LOOKUP_ROW,
	[S_LIST_UNKNOWN] = CAUSAL LIST_UNKNOWN_ROWS,
};

/* The statements of a store made from my: sql, or with causal-reads the
 * causal variant of a read that has one.  Fills out[NSTMT]. */
void
idem_my_store_sql(const idem_config_mysql *my, const char **out)
{
	size_t i;

	for (i = 0; i < NSTMT; i++)
		out[i] = my->causal_reads && causal_sql[i] != NULL ?
		    causal_sql[i] : idem_my_sql[i];
}

/* The seconds a reservation's INSERT waits for a row lock: inflight-wait,
 * rounded up, and at least 1 (MariaDB's lock waits are whole seconds; 0
 * would turn any brief lock, concurrent inserts' next-key locks or a
 * purge's gap locks, into a false IN_FLIGHT). */
unsigned long long
idem_my_insert_lock_wait(const idem_store_opts *o)
{
	unsigned long long s = (o->inflight_wait + 999) / 1000;

	return s > 0 ? s : 1;
}

/* Writes into buf (size bytes) S_INSERT waiting for a row lock at most
 * insert_lock_wait: a transactional route holds its key's row lock until
 * it commits, and a duplicate then answers IN_FLIGHT instead of holding a
 * worker for innodb_lock_wait_timeout (50 s by default). */
void
idem_my_lock_wait_insert(const idem_config_mysql *my, const idem_store_opts *o,
    char *buf, size_t size)
{
	/* with causal-reads the INSERT, a transaction's first statement,
	 * first waits for what the cluster committed (wsrep_sync_wait 4:
	 * INSERT; a later read inside the transaction could not wait) */
	snprintf(buf, size, "SET STATEMENT innodb_lock_wait_timeout = %llu%s "
	    "FOR %s", idem_my_insert_lock_wait(o), my->causal_reads ?
	    ", wsrep_sync_wait = 4" : "", idem_my_sql[S_INSERT]);
}

/* Fills waits[NSTMT] with how long each statement may wait for a row
 * lock, in ms: the reservation's INSERT insert_lock_wait, the other
 * writes and the locking read the second of the store's session
 * (idem_store_mysql_new), the plain reads nothing. */
void
idem_my_set_lock_waits(const idem_store_opts *o, uint64_t *waits)
{
	static const int locking[] = { S_TAKEOVER, S_REUSE, S_COMMIT,
	    S_RELEASE, S_RENEW, S_PURGE, S_RELEASE_BY, S_SELECT_LOCKED,
	    S_COMMIT_CAUSAL, S_RELEASE_CAUSAL, S_RENEW_CAUSAL, S_RESUME,
	    S_CHECKPOINT, S_CHECKPOINT_CAUSAL, S_UNKNOWN, S_UNKNOWN_CAUSAL,
	    S_PAUSE, S_PAUSE_CAUSAL, S_PAUSE_BY, S_RECONCILE, S_RESOLVE,
	    S_RESOLVE_CAUSAL, S_RESOLVE_RELEASE, S_RESOLVE_RELEASE_CAUSAL,
	    S_ENTOMB };
	size_t i;

	memset(waits, 0, NSTMT * sizeof(*waits));
	for (i = 0; i < sizeof(locking) / sizeof(locking[0]); i++)
		waits[locking[i]] = 1000;
	waits[S_INSERT] = idem_my_insert_lock_wait(o) * 1000;
}

/* ------------------------------------------------------ binding helpers */

void
idem_my_p_init(params *p)
{
	memset(p, 0, sizeof(*p));
}

void
idem_my_p_blob(params *p, const void *data, size_t len)
{
	MYSQL_BIND *b;

	assert(p->n < PARAMS_MAX);
	b = &p->b[p->n];

	b->buffer_type = MYSQL_TYPE_BLOB;
	b->buffer = (void *)data;
	p->len[p->n] = (unsigned long)len;
	b->buffer_length = (unsigned long)len;
	b->length = &p->len[p->n];
	p->n++;
}

void
idem_my_p_str(params *p, const char *s)
{
	idem_my_p_blob(p, s, strlen(s));
	p->b[p->n - 1].buffer_type = MYSQL_TYPE_STRING;
}

void
idem_my_p_ll(params *p, const long long *v)
{
	MYSQL_BIND *b;

	assert(p->n < PARAMS_MAX);
	b = &p->b[p->n++];

	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = (void *)v;
}

void
idem_my_p_key(params *p, const idem_store_key *k)
{
	idem_my_p_blob(p, k->scope, 32);
	idem_my_p_blob(p, k->key, k->key_len);
}

/* Whether err (a mysql_errno) can never succeed for these values: a value
 * too long for its column, a packet over max_allowed_packet, truncation. */
int
idem_my_permanent_error(unsigned err)
{
	return idem_mysql_error_code(err) == IDEM_ERR_TOO_LARGE;
}

/* Counts one contention: into *contended (a request's), or, with
 * contended NULL (the purge, a dead worker's keys), on no route. */
void
idem_my_count_contended(mysql_store *ms, unsigned *contended)
{
	if (contended != NULL)
		(*contended)++;
	else if (ms->base.metrics != NULL)
		idem_metrics_outcome(ms->base.metrics, IDEM_METRICS_NO_ROUTE,
		    IDEM_OUTCOME_CONTENDED, 1);
}

/* Whether err (a mysql_errno) is contention: ER_LOCK_DEADLOCK or
 * ER_LOCK_WAIT_TIMEOUT, whose statement (or, for a deadlock, transaction)
 * was rolled back because others are working on the same rows.  Counted
 * as idem_my_count_contended counts. */
int
idem_my_contention(mysql_store *ms, unsigned *contended, unsigned err)
{
	if (idem_mysql_error_code(err) != IDEM_ERR_BUSY)
		return 0;
	idem_my_count_contended(ms, contended);
	return 1;
}

/* Sleeps a random 1..2^n ms: the back-off after the n-th deadlock. */
void
idem_my_backoff(int n)
{
	idem_sleep_ms(1 + random() % (1L << (n < 6 ? n : 6)));
}

/*
 * Runs statement i with p on a pooled connection: once more on a fresh
 * connection when the old one turned out to be dead, up to
 * CONTENTION_TRIES times with a random back-off on a deadlock (a lock wait
 * is not retried).  With keep set, the connection is returned in *held for the
 * caller to read results and give back; else *affected gets the affected
 * rows.  *retried (when not NULL) says whether an attempt before the last
 * lost its connection, so it may or may not have been applied (set on
 * every return: a statement that lost its answer and then failed may
 * still be applied, or be running on the server).  Returns
 * IDEM_OK, IDEM_ERR_BUSY (still contended), IDEM_ERR_TOO_LARGE (a
 * permanent error of the values) or IDEM_ERR_STORE; errors are logged.
 */
idem_err
idem_my_run(mysql_store *ms, int i, params *p, idem_mysql_conn **held,
    unsigned long long *affected, int *retried)
{
	int attempt, lost = 0, contended = 0;
	idem_err fail = IDEM_ERR_STORE;

	for (attempt = 0; attempt < CONTENTION_TRIES + 1; attempt++) {
		idem_mysql_conn *c = idem_mysql_get(ms->pool);
		MYSQL_STMT *st;
		unsigned err;

		if (c == NULL) {
			fail = IDEM_ERR_STORE;
			break;
		}
		st = c->stmts[i];
		(void)idem_mysql_expect_lock_wait(c, ms->lock_wait_ms[i]);
		if (mysql_stmt_bind_param(st, p->b) == 0 &&
		    mysql_stmt_execute(st) == 0) {
			if (ms->lose_answer == i + 1) {
				/* tests: applied, and its answer lost with its
				 * connection, as if the server had gone away */
				ms->lose_answer = 0;
				c->broken = 1;
				idem_mysql_put(ms->pool, c);
				lost++;
				continue;
			}
			if (retried != NULL)
				*retried = lost > 0;
			if (held != NULL) {
				*held = c;
				return IDEM_OK;
			}
			if (affected != NULL)
				*affected = mysql_stmt_affected_rows(st);
			idem_mysql_put(ms->pool, c);
			return IDEM_OK;
		}
		err = mysql_stmt_errno(st);
		idem_mysql_check(c, err);
		if (idem_my_permanent_error(err)) {
			idem_mysql_log_error(ms->pool, "statement", st);
			idem_mysql_put(ms->pool, c);
			fail = IDEM_ERR_TOO_LARGE;
			break;
		}
		if (idem_my_contention(ms, p->contended, err)) {
			/* a lock wait has waited all it may already: not
			 * again */
			idem_mysql_put(ms->pool, c);
			fail = IDEM_ERR_BUSY;
			if (err == 1205 || ++contended >= CONTENTION_TRIES)
				break;
			idem_my_backoff(contended);
			continue;
		}
		fail = IDEM_ERR_STORE;
		if (!c->broken || lost++ > 0) {
			idem_mysql_log_error(ms->pool, "statement", st);
			idem_mysql_put(ms->pool, c);
			break;
		}
		idem_mysql_put(ms->pool, c);
	}
	if (retried != NULL)
		*retried = lost > 0;
	return fail;
}

/* Like run, for statements whose only result is the affected row count. */
idem_err
idem_my_exec_count(mysql_store *ms, int i, params *p, unsigned long long *affected,
    int *retried)
{
	return idem_my_run(ms, i, p, NULL, affected, retried);
}

/* --------------------------------------------------------- the reading */

/* Fetches a variable-length column into a new buffer (NUL-terminated). */
static int
fetch_var(MYSQL_STMT *st, MYSQL_BIND *b, unsigned col, unsigned long len,
    char **out, size_t *outlen)
{
	MYSQL_BIND one;

	*out = malloc(len + 1);
	if (*out == NULL)
		return -1;
	memset(&one, 0, sizeof(one));
	one.buffer_type = b->buffer_type;
	one.buffer = *out;
	one.buffer_length = len;
	if (len > 0 && mysql_stmt_fetch_column(st, &one, col, 0) != 0)
		return -1;
	(*out)[len] = '\0';
	*outlen = len;
	return 0;
}

/* Fetches the row of an executed S_SELECT (or T_SELECT) statement st of
 * c into r.  Returns IDEM_OK (r->found tells) or IDEM_ERR_STORE. */
idem_err
idem_my_fetch_row(mysql_store *ms, idem_mysql_conn *c, MYSQL_STMT *st, row *r)
{
	MYSQL_BIND b[13];
	unsigned long len[13];
	my_bool null[13];
	char state[16];
	long long left = 0, status = 0, lease_ms = 0, tomb_s = 0;
	int rc;
	idem_err err = IDEM_OK;

	r->found = 0;
	memset(&r->progress, 0, sizeof(r->progress));
	memset(&r->resp, 0, sizeof(r->resp));
	memset(b, 0, sizeof(b));
	memset(len, 0, sizeof(len));
	memset(null, 0, sizeof(null));
	b[0].buffer_type = MYSQL_TYPE_STRING;
	b[0].buffer = state;
	b[0].buffer_length = sizeof(state) - 1;
	b[1].buffer_type = MYSQL_TYPE_BLOB;
	b[1].buffer = r->fp;
	b[1].buffer_length = 32;
	b[2].buffer_type = MYSQL_TYPE_STRING;
	b[2].buffer = r->owner;
	b[2].buffer_length = IDEM_OWNER_MAX;
	b[3].buffer_type = MYSQL_TYPE_STRING;
	b[3].buffer = r->request_id;
	b[3].buffer_length = IDEM_RID_MAX;
	b[4].buffer_type = MYSQL_TYPE_LONGLONG;
	b[4].buffer = &r->lease_age_us;
	b[5].buffer_type = MYSQL_TYPE_LONGLONG;
	b[5].buffer = &left;
	b[6].buffer_type = MYSQL_TYPE_LONGLONG;
	b[6].buffer = &status;
	b[7].buffer_type = MYSQL_TYPE_BLOB;   /* headers: length only */
	b[8].buffer_type = MYSQL_TYPE_BLOB;   /* body: length only */
	b[9].buffer_type = MYSQL_TYPE_STRING;
	b[9].buffer = r->progress.phase;
	b[9].buffer_length = IDEM_PHASE_MAX;
	b[10].buffer_type = MYSQL_TYPE_BLOB;  /* progress: length only */
	b[11].buffer_type = MYSQL_TYPE_LONGLONG;
	b[11].buffer = &lease_ms;
	b[12].buffer_type = MYSQL_TYPE_LONGLONG;
	b[12].buffer = &tomb_s;
	for (rc = 0; rc < 13; rc++) {
		b[rc].length = &len[rc];
		b[rc].is_null = &null[rc];
	}
	if (mysql_stmt_bind_result(st, b) != 0) {
		err = IDEM_ERR_STORE;
		goto out;
	}
	rc = mysql_stmt_fetch(st);
	if (rc == MYSQL_NO_DATA)
		goto out;
	if (rc == 1) {
		idem_mysql_check(c, mysql_stmt_errno(st));
		idem_mysql_log_error(ms->pool, "fetch", st);
		err = IDEM_ERR_STORE;
		goto out;
	}
	/* MYSQL_DATA_TRUNCATED is expected: headers and body come next */
	r->found = 1;
	state[len[0] < sizeof(state) ? len[0] : sizeof(state) - 1] = '\0';
	r->owner[len[2] < IDEM_OWNER_MAX ? len[2] : IDEM_OWNER_MAX] = '\0';
	r->request_id[len[3] < IDEM_RID_MAX ? len[3] : IDEM_RID_MAX] = '\0';
	r->state = IDEM_RECORD_IN_FLIGHT;
	for (rc = 0; rc < IDEM_RECORD__MAX; rc++)
		if (strcmp(state, idem_record_state_names[rc]) == 0)
			r->state = (idem_record_state)rc;
	r->committed = r->state == IDEM_RECORD_COMMITTED;
	r->progress.phase[null[9] ? 0 : len[9] < IDEM_PHASE_MAX ? len[9] :
	    IDEM_PHASE_MAX] = '\0';
	if (!null[10] && r->progress.phase[0] != '\0' && fetch_var(st, &b[10],
	    10, len[10], &r->progress.state, &r->progress.state_len) < 0) {
		idem_progress_clear(&r->progress);
		err = IDEM_ERR_STORE;
	}
	r->left_us = null[5] ? 0 : left;
	r->lease_ms = null[11] ? 0 : lease_ms;
	r->tombstone_ms = null[12] ? 0 : tomb_s * 1000;
	/* (r->found is 0 until a row is fetched: set at the top) */
	r->expired = !null[5] && left <= 0;
	r->status = null[6] ? 0 : (int)status;
	/* a committed row past its expiry is never replayed: no answer */
	if (r->committed && !r->expired) {
		r->resp.status = r->status;
		if (fetch_var(st, &b[7], 7, null[7] ? 0 : len[7], &r->resp.headers,
		    &r->resp.headers_len) < 0 ||
		    fetch_var(st, &b[8], 8, null[8] ? 0 : len[8], &r->resp.body,
		    &r->resp.body_len) < 0) {
			idem_stored_response_clear(&r->resp);
			err = IDEM_ERR_STORE;
		}
	}
	/* drain, so the statement can run again */
	while (mysql_stmt_fetch(st) == 0)
		;
out:
	mysql_stmt_free_result(st);
	return err;
}

/* Reads the row of k with statement i (S_SELECT, or S_SELECT_LOCKED to
 * wait for a transaction that holds it), its contention counted into
 * contended (see params).  Returns IDEM_OK (r->found tells),
 * IDEM_ERR_BUSY or IDEM_ERR_STORE. */
idem_err
idem_my_read_row_with(mysql_store *ms, int i, const idem_store_key *k,
    unsigned *contended, row *r)
{
	params p;
	idem_mysql_conn *c;
	idem_err err;

	memset(r, 0, sizeof(*r));
	idem_my_p_init(&p);
	idem_my_p_key(&p, k);
	p.contended = contended;
	if ((err = idem_my_run(ms, i, &p, &c, NULL, NULL)) != IDEM_OK)
		return err;
	err = idem_my_fetch_row(ms, c, c->stmts[i], r);
	idem_mysql_put(ms->pool, c);
	return err;
}

/* Reads the row of k.  Returns IDEM_OK (r->found tells) or IDEM_ERR_STORE. */
idem_err
idem_my_read_row(mysql_store *ms, const idem_store_key *k, row *r)
{
	return idem_my_read_row_with(ms, S_SELECT, k, NULL, r);
}

/* Fills *a for the reserve of rq (borrowed for as long as a is used) on
 * ms. */
void
idem_my_reserve_args(const mysql_store *ms, reserve_args *a,
    idem_store_req *rq)
{
	a->abandon_us = (long long)ms->base.abandon_ms * 1000;
	a->rq = rq;
	a->life_us = (long long)rq->policy->lifetime_ms * 1000;
	a->ttl_us = (long long)rq->policy->lease_ms * 1000;
	a->lease_ms = (long long)rq->policy->lease_ms;
	a->run_expired = rq->policy->run_expired != 0;
}

/* ----------------------------------------------------------- operations */

/* The parameters of S_INSERT (and T_INSERT). */
void
idem_my_p_insert(params *p, const reserve_args *a)
{
	idem_my_p_init(p);
	p->contended = &a->rq->contended;
	idem_my_p_key(p, &a->rq->key);
	idem_my_p_blob(p, a->rq->fp, 32);
	idem_my_p_str(p, a->rq->owner);
	idem_my_p_str(p, a->rq->request_id);
	idem_my_p_ll(p, &a->lease_ms);
	idem_my_p_ll(p, &a->life_us);
}

/* The parameters of S_REUSE: an expired row made ours (committed,
 * paused, unknown, or in flight and abandoned). */
void
idem_my_p_reuse(params *p, const reserve_args *a)
{
	idem_my_p_init(p);
	p->contended = &a->rq->contended;
	idem_my_p_blob(p, a->rq->fp, 32);
	idem_my_p_str(p, a->rq->owner);
	idem_my_p_str(p, a->rq->request_id);
	idem_my_p_ll(p, &a->lease_ms);
	idem_my_p_ll(p, &a->life_us);
	idem_my_p_key(p, &a->rq->key);
	idem_my_p_ll(p, &a->ttl_us);
	idem_my_p_ll(p, &a->abandon_us);
	idem_my_p_ll(p, &a->run_expired);
}

/* The parameters of S_TAKEOVER of old_owner's stale reservation. */
void
idem_my_p_takeover(params *p, const reserve_args *a, const char *old_owner)
{
	idem_my_p_init(p);
	p->contended = &a->rq->contended;
	idem_my_p_str(p, a->rq->owner);
	idem_my_p_str(p, a->rq->request_id);
	idem_my_p_ll(p, &a->lease_ms);
	idem_my_p_ll(p, &a->life_us);
	idem_my_p_key(p, &a->rq->key);
	idem_my_p_str(p, old_owner);
	idem_my_p_blob(p, a->rq->fp, 32);
	idem_my_p_ll(p, &a->ttl_us);
}

/* The parameters of S_RESUME (and T_RESUME). */
void
idem_my_p_resume(params *p, const reserve_args *a)
{
	idem_my_p_init(p);
	p->contended = &a->rq->contended;
	idem_my_p_str(p, a->rq->owner);
	idem_my_p_str(p, a->rq->request_id);
	idem_my_p_ll(p, &a->lease_ms);
	idem_my_p_key(p, &a->rq->key);
	idem_my_p_blob(p, a->rq->fp, 32);
}

/* The parameters of S_RECONCILE (and T_RECONCILE) of a record held by
 * old_owner ("": nobody). */
void
idem_my_p_reconcile(params *p, const reserve_args *a, const char *old_owner)
{
	idem_my_p_init(p);
	p->contended = &a->rq->contended;
	idem_my_p_str(p, a->rq->owner);
	idem_my_p_str(p, a->rq->request_id);
	idem_my_p_ll(p, &a->lease_ms);
	idem_my_p_key(p, &a->rq->key);
	idem_my_p_blob(p, a->rq->fp, 32);
	idem_my_p_str(p, old_owner);
	idem_my_p_ll(p, &a->ttl_us);
}

/* Binds the length of the lease rq's owner renews: its policy's
 * lease_ms, or NULL (the record keeps its own) when it has none. */
void
idem_my_p_lease(params *p, const idem_store_req *rq)
{
	p->lease_ms = rq->policy != NULL ? (long long)rq->policy->lease_ms : 0;
	idem_my_p_ll(p, &p->lease_ms);
	if (p->lease_ms <= 0)
		p->b[p->n - 1].buffer_type = MYSQL_TYPE_NULL;
}

/* The first parameters of S_CHECKPOINT (and T_CHECKPOINT): the phase and
 * state of pr, and the lease of rq's owner (the key and owner follow). */
void
idem_my_p_progress(params *p, const idem_progress *pr,
    const idem_store_req *rq)
{
	idem_my_p_init(p);
	idem_my_p_str(p, pr->phase);
	idem_my_p_blob(p, pr->state != NULL ? pr->state : "", pr->state_len);
	idem_my_p_lease(p, rq);
}

/* Frees what the row r owns. */
void
idem_my_row_clear(row *r)
{
	idem_stored_response_clear(&r->resp);
	idem_progress_clear(&r->progress);
}

/* Whether the row r is a live tombstone (idem_tombstone_live). */
int
idem_my_row_tomb(const row *r)
{
	/* not past its expiry until left_us says so, to the microsecond */
	return idem_tombstone_live(r->state, r->expired ? -r->left_us / 1000 :
	    -1, (uint64_t)r->tombstone_ms);
}

/* Fills *out from the row r, a live tombstone that the request's policy
 * refuses: EXPIRED, its fingerprint, first status and commit's age.
 * Frees what r owns. */
void
idem_my_expired_row(row *r, idem_reserve_result *out)
{
	idem_reserve_expired(out, r->fp, r->status, r->lease_age_us);
	idem_my_row_clear(r);
}

/* The step of the reservation rule (idem_reserve_decide) for the row r
 * a reserve found. */
idem_reserve_step
idem_my_step_of(const reserve_args *a, const row *r)
{
	idem_found f = { r->state, r->expired, idem_my_row_tomb(r), r->fp,
	    r->owner, r->lease_age_us, r->lease_ms * 1000, a->abandon_us };

	return idem_reserve_decide(&f, a->rq->fp, a->rq->owner, a->ttl_us,
	    a->rq->policy);
}

/* Fills *out from a found row r that is live (not an expired committed
 * one), read at read_at (idem_boot_ms before the statement): COMMITTED
 * with its answer (moved out of r, and a copy kept in the replay cache),
 * or IN_FLIGHT with its owner (what a takeover then changes). */
void
idem_my_found_row(mysql_store *ms, const reserve_args *a, row *r, uint64_t read_at,
    idem_reserve_result *out)
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
		idem_replay_cache_keep(ms->cache, &a->rq->key, r->fp,
		    &out->response, read_at, r->left_us);
		return;
	}
	snprintf(out->owner, sizeof(out->owner), "%s", r->owner);
	snprintf(out->request_id, sizeof(out->request_id), "%s", r->request_id);
	out->lease_age_ms = r->lease_age_us > 0 ?
	    (uint64_t)r->lease_age_us / 1000 : 0;
	out->lease_ms = r->lease_ms > 0 ? (uint64_t)r->lease_ms : 0;
	out->outcome = IDEM_RESERVE_IN_FLIGHT;
}

/* The first parameters of S_COMMIT: the answer and its lifetime (the key
 * and owner follow). */
void
idem_my_p_answer(params *p, const long long *status, const idem_stored_response *resp,
    const long long *tomb_s, const long long *life_us)
{
	idem_my_p_init(p);
	idem_my_p_ll(p, status);
	idem_my_p_blob(p, resp->headers != NULL ? resp->headers : "",
	    resp->headers_len);
	idem_my_p_blob(p, resp->body != NULL ? resp->body : "", resp->body_len);
	idem_my_p_ll(p, tomb_s);
	idem_my_p_ll(p, life_us);
}

/* The tombstone_s a commit under policy writes: its tombstone-lifetime
 * in whole seconds, rounded up; 0 without a policy or a tombstone. */
long long
idem_my_tomb_s(const idem_key_policy *policy)
{
	return policy != NULL ? (long long)((policy->tombstone_ms + 999) /
	    1000) : 0;
}

/* Whether an answer of size bytes is over the packet the server takes
 * now (max_allowed_packet may have been lowered since start-up). */
int
idem_my_over_packet(mysql_store *ms, uint64_t size)
{
	uint64_t packet = idem_mysql_max_packet(ms->pool);

	return packet > 0 && size + PACKET_SLACK > packet;
}

/* Result column helpers: a string or blob into buf (size bytes, one kept
 * for a NUL), and an integer. */
void
idem_my_r_buf(MYSQL_BIND *b, enum enum_field_types type, void *buf, size_t size,
    unsigned long *len, my_bool *null)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = type;
	b->buffer = buf;
	b->buffer_length = (unsigned long)(type == MYSQL_TYPE_STRING ? size - 1 :
	    size);
	b->length = len;
	b->is_null = null;
}

void
idem_my_r_ll(MYSQL_BIND *b, long long *v, my_bool *null)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
	b->is_null = null;
}

/* Runs statement i with p and fetches at most one row into res.  Returns
 * IDEM_OK with *found, or IDEM_ERR_STORE (logged). */
idem_err
idem_my_fetch_one(mysql_store *ms, int i, params *p, MYSQL_BIND *res, int *found)
{
	idem_mysql_conn *c;
	MYSQL_STMT *st;
	idem_err err;
	int rc;

	*found = 0;
	if ((err = idem_my_run(ms, i, p, &c, NULL, NULL)) != IDEM_OK)
		return err;
	st = c->stmts[i];
	rc = mysql_stmt_bind_result(st, res) == 0 ? mysql_stmt_fetch(st) : 1;
	if (rc == 1) {
		idem_mysql_check(c, mysql_stmt_errno(st));
		idem_mysql_log_error(ms->pool, "fetch", st);
		err = IDEM_ERR_STORE;
	}
	*found = rc == 0 || rc == MYSQL_DATA_TRUNCATED;
	while (rc != 1 && rc != MYSQL_NO_DATA && mysql_stmt_fetch(st) == 0)
		;
	mysql_stmt_free_result(st);
	idem_mysql_put(ms->pool, c);
	return err;
}

/* Runs a parameterless SELECT of one or two integers (NULL reads 0). */
idem_err
idem_my_select_ints(mysql_store *ms, int i, long long *a, long long *b2)
{
	MYSQL_BIND b[2];
	my_bool null[2] = { 0, 0 };
	params p;
	idem_err err;
	int found;

	*a = 0;
	idem_my_r_ll(&b[0], a, &null[0]);
	idem_my_r_ll(&b[1], b2, &null[1]);
	idem_my_p_init(&p);
	/* a one-column statement binds b[0] only */
	err = idem_my_fetch_one(ms, i, &p, b, &found);
	if (null[0])
		*a = 0;
	return err;
}
