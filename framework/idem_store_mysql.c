/*
 * idem_store_mysql.c - the MySQL/MariaDB store: one row per (scope, key) in
 * idempotency_keys (schema/mysql/), every operation a prepared statement,
 * every time from the database clock (UTC_TIMESTAMP(6)), so nodes whose
 * clocks disagree still agree on leases and expiry.
 *
 * Statements per operation:
 *   reserve  INSERT IGNORE; only when the key exists, a SELECT; only for a
 *            stale or expired row, one conditional UPDATE naming the old
 *            owner (takeover) or the expiry (reuse).
 *   commit   UPDATE ... WHERE owner = ?      release  DELETE ... WHERE owner = ?
 *   renew    UPDATE ... WHERE owner = ?      purge    DELETE ... LIMIT ?
 *
 * A statement that fails because the connection was lost (the database
 * restarted) is retried once on a fresh connection; the owner checks make
 * that retry safe.  A deadlock or lock wait timeout is contention on one
 * key, not an outage, reported as IDEM_ERR_BUSY: a deadlock after a few
 * retries with a short random pause, a lock wait (which has waited all it
 * may) at once.  An error that no retry can cure (data too long, packet
 * too large, truncation) is IDEM_ERR_TOO_LARGE.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <errmsg.h>
#include <mysql.h>

#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_mysql.h"
#include "idem_replay_cache.h"
#include "idem_store.h"
#include "idem_time.h"

#define SCHEMA_VERSION 1
#define SCHEMA_FILE "schema/mysql/001_idempotency_keys.sql"
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

/* The longest a committed answer is served from the replay cache */
#define CACHE_HOLD_MS 60000

enum { S_INSERT, S_SELECT, S_TAKEOVER, S_REUSE, S_COMMIT, S_RELEASE,
    S_RENEW, S_PURGE, S_STATS, S_VERSION, S_OWNED_BY, S_RELEASE_BY,
    S_LOOKUP, S_CENSUS, S_OLDEST, S_SELECT_LOCKED, S_PROBE,
    S_SELECT_CAUSAL, S_COMMIT_CAUSAL, S_RELEASE_CAUSAL, S_RENEW_CAUSAL,
    NSTMT };

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
    "status, headers, body FROM idempotency_keys WHERE " PK
/* a locking read: waits for a transaction that holds the row */
#define SELECT_LOCKED SELECT_ROW " LOCK IN SHARE MODE"
/* the owner-checked statements */
#define COMMIT_ROW "UPDATE idempotency_keys SET state = 'committed', " \
    "status = ?, headers = ?, body = ?, expires_at = " NOW " + INTERVAL " \
    "? MICROSECOND WHERE " PK " AND state = 'in_flight' AND owner = ?"
#define RELEASE_ROW "DELETE FROM idempotency_keys WHERE " PK " AND " \
    "state = 'in_flight' AND owner = ?"
#define RENEW_ROW "UPDATE idempotency_keys SET lease_at = " NOW " WHERE " \
    PK " AND state = 'in_flight' AND owner = ?"
#define UTC(col) "DATE_FORMAT(" col ", '%Y-%m-%dT%H:%i:%s.%fZ')"
#define AGE(col) "TIMESTAMPDIFF(MICROSECOND, " col ", " NOW ")"
#define LOOKUP_ROW "SELECT state, fingerprint, owner, request_id, " \
    UTC("reserved_at") ", " UTC("lease_at") ", " UTC("expires_at") ", " \
    AGE("reserved_at") ", " AGE("lease_at") ", TIMESTAMPDIFF(" \
    "MICROSECOND, " NOW ", expires_at), status, LENGTH(headers), " \
    "LENGTH(body) FROM idempotency_keys WHERE " PK

static const char *const sql[NSTMT] = {
	[S_INSERT] = "INSERT IGNORE INTO idempotency_keys (scope_hash, "
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, "
	    "lease_at, expires_at) VALUES (?, ?, ?, 'in_flight', ?, ?, " NOW
	    ", " NOW ", " NOW " + INTERVAL ? MICROSECOND)",
	[S_SELECT] = SELECT_ROW,
	/* S_TAKEOVER and S_REUSE: the reservation rule's TAKE_OVER and REUSE
	 * (idem_reserve_decide), made conditional on what was read */
	[S_TAKEOVER] = "UPDATE idempotency_keys SET owner = ?, request_id = ?, "
	    "lease_at = " NOW ", expires_at = " NOW " + INTERVAL ? MICROSECOND "
	    "WHERE " PK " AND state = 'in_flight' AND owner = ? AND "
	    "fingerprint = ? AND lease_at < " NOW " - INTERVAL ? MICROSECOND",
	[S_REUSE] = "UPDATE idempotency_keys SET state = 'in_flight', "
	    "fingerprint = ?, owner = ?, request_id = ?, reserved_at = " NOW
	    ", lease_at = " NOW ", expires_at = " NOW " + INTERVAL ? "
	    "MICROSECOND, status = NULL, headers = NULL, body = NULL WHERE " PK
	    " AND state = 'committed' AND expires_at <= " NOW,
	[S_COMMIT] = COMMIT_ROW,
	[S_RELEASE] = RELEASE_ROW,
	[S_RENEW] = RENEW_ROW,
	/* never an in_flight row: its owner may still be working on it */
	[S_PURGE] = "DELETE FROM idempotency_keys WHERE state = 'committed' "
	    "AND expires_at < " NOW " LIMIT ?",
	[S_STATS] = "SELECT COUNT(*), COALESCE(SUM(state = 'in_flight'), 0) "
	    "FROM idempotency_keys",
	[S_VERSION] = "SELECT MAX(version) FROM idemfcgi_schema",
	[S_OWNED_BY] = "SELECT scope_hash, idem_key FROM idempotency_keys WHERE "
	    "state = 'in_flight' AND owner LIKE ?",
	[S_RELEASE_BY] = "DELETE FROM idempotency_keys WHERE state = "
	    "'in_flight' AND owner LIKE ?",
	[S_LOOKUP] = LOOKUP_ROW,
	[S_CENSUS] = "SELECT COALESCE(SUM(state = 'in_flight'), 0), "
	    "COALESCE(SUM(state = 'in_flight' AND lease_at < " NOW " - INTERVAL "
	    "? MICROSECOND), 0), COALESCE(SUM(state = 'committed' AND "
	    "expires_at > " NOW "), 0), COALESCE(SUM(state = 'committed' AND "
	    "expires_at <= " NOW "), 0) FROM idempotency_keys",
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
};

/*
 * With [mysql] causal-reads, the statements that decide (a reservation's
 * INSERT, see lock_wait_insert, and its read of the row it found: replay,
 * in flight or takeover; idemfcgi-admin's show; the read that learns a
 * lost COMMIT's outcome always is) wait until the node has applied what
 * the cluster committed before them (wsrep_sync_wait): a replay then never
 * answers IN_FLIGHT for a key another node has just committed.  (Inside a
 * transaction, past its first statement, Galera does not wait: the
 * transactional path's read is causal through its INSERT.)  Without
 * Galera the setting does nothing.
 */
static const char *const causal_sql[NSTMT] = {
	[S_SELECT] = CAUSAL SELECT_ROW,
	[S_LOOKUP] = CAUSAL LOOKUP_ROW,
};

/* The statements of a store made from cfg: sql, or with causal-reads the
 * causal variant of a read that has one.  Fills out[NSTMT]. */
static void
store_sql(const idem_config *cfg, const char **out)
{
	size_t i;

	for (i = 0; i < NSTMT; i++)
		out[i] = cfg->mysql_causal_reads && causal_sql[i] != NULL ?
		    causal_sql[i] : sql[i];
}

static const idem_store_ops mysql_ops;

typedef struct mysql_store {
	idem_store base;
	idem_mysql_pool *pool;
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

/* The seconds a reservation's INSERT waits for a row lock: inflight-wait,
 * rounded up, and at least 1 (MariaDB's lock waits are whole seconds; 0
 * would turn any brief lock, concurrent inserts' next-key locks or a
 * purge's gap locks, into a false IN_FLIGHT). */
static unsigned long long
insert_lock_wait(const idem_config *cfg)
{
	unsigned long long s = (cfg->inflight_wait + 999) / 1000;

	return s > 0 ? s : 1;
}

/* Writes into buf (size bytes) S_INSERT waiting for a row lock at most
 * insert_lock_wait: a transactional route holds its key's row lock until
 * it commits, and a duplicate then answers IN_FLIGHT instead of holding a
 * worker for innodb_lock_wait_timeout (50 s by default). */
static void
lock_wait_insert(const idem_config *cfg, char *buf, size_t size)
{
	/* with causal-reads the INSERT, a transaction's first statement,
	 * first waits for what the cluster committed (wsrep_sync_wait 4:
	 * INSERT; a later read inside the transaction could not wait) */
	snprintf(buf, size, "SET STATEMENT innodb_lock_wait_timeout = %llu%s "
	    "FOR %s", insert_lock_wait(cfg), cfg->mysql_causal_reads ?
	    ", wsrep_sync_wait = 4" : "", sql[S_INSERT]);
}

int
idem_store_mysql_lose_answer(idem_store *s, const char *op)
{
	static const struct { const char *name; int stmt; } ops[] = {
		{ "insert", S_INSERT }, { "takeover", S_TAKEOVER },
		{ "commit", S_COMMIT }, { "release", S_RELEASE },
		{ "renew", S_RENEW },
	};
	size_t i;

	if (s == NULL || s->ops != &mysql_ops)
		return -1;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(ops[i].name, op) == 0) {
			((mysql_store *)s)->lose_answer = ops[i].stmt + 1;
			return 0;
		}
	return -1;
}

uint64_t
idem_store_mysql_settle_ms(const idem_config *cfg)
{
	uint64_t wait = insert_lock_wait(cfg) * 1000;

	return wait + idem_mysql_lock_margin_ms(wait) + 1000;
}

/* Fills waits[NSTMT] with how long each statement may wait for a row
 * lock, in ms: the reservation's INSERT insert_lock_wait, the other
 * writes and the locking read the second of the store's session
 * (idem_store_mysql_new), the plain reads nothing. */
static void
set_lock_waits(const idem_config *cfg, uint64_t *waits)
{
	static const int locking[] = { S_TAKEOVER, S_REUSE, S_COMMIT,
	    S_RELEASE, S_RENEW, S_PURGE, S_RELEASE_BY, S_SELECT_LOCKED,
	    S_COMMIT_CAUSAL, S_RELEASE_CAUSAL, S_RENEW_CAUSAL };
	size_t i;

	memset(waits, 0, NSTMT * sizeof(*waits));
	for (i = 0; i < sizeof(locking) / sizeof(locking[0]); i++)
		waits[locking[i]] = 1000;
	waits[S_INSERT] = insert_lock_wait(cfg) * 1000;
}

/* ------------------------------------------------------ binding helpers */

typedef struct params {
	MYSQL_BIND b[10];
	unsigned long len[10];
	unsigned n;
	unsigned row;            /* the metrics row contention counts on: the
	                          * bound key's, or no route */
} params;

static void
p_init(params *p)
{
	memset(p, 0, sizeof(*p));
	p->row = IDEM_METRICS_NO_ROUTE;
}

static void
p_blob(params *p, const void *data, size_t len)
{
	MYSQL_BIND *b = &p->b[p->n];

	b->buffer_type = MYSQL_TYPE_BLOB;
	b->buffer = (void *)data;
	p->len[p->n] = (unsigned long)len;
	b->buffer_length = (unsigned long)len;
	b->length = &p->len[p->n];
	p->n++;
}

static void
p_str(params *p, const char *s)
{
	p_blob(p, s, strlen(s));
	p->b[p->n - 1].buffer_type = MYSQL_TYPE_STRING;
}

static void
p_ll(params *p, const long long *v)
{
	MYSQL_BIND *b = &p->b[p->n++];

	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = (void *)v;
}

static void
p_key(params *p, const idem_store_key *k)
{
	p_blob(p, k->scope, 32);
	p_blob(p, k->key, k->key_len);
	p->row = k->metrics_row;
}

/* Whether err (a mysql_errno) can never succeed for these values: a value
 * too long for its column, a packet over max_allowed_packet, truncation. */
static int
permanent_error(unsigned err)
{
	return err == 1406 /* ER_DATA_TOO_LONG */ ||
	    err == 1153 /* ER_NET_PACKET_TOO_LARGE */ ||
	    err == CR_NET_PACKET_TOO_LARGE ||
	    err == 1301 /* ER_WARN_ALLOWED_PACKET_OVERFLOWED */ ||
	    err == 1265 /* WARN_DATA_TRUNCATED */ ||
	    err == 1292 /* ER_TRUNCATED_WRONG_VALUE */ ||
	    err == 1366 /* ER_TRUNCATED_WRONG_VALUE_FOR_FIELD */ ||
	    err == 1264 /* ER_WARN_DATA_OUT_OF_RANGE */ ||
	    err == 1118 /* ER_TOO_BIG_ROWSIZE */;
}

/* Counts one contention on metrics row r (a route's, or no route). */
static void
count_contended(mysql_store *ms, unsigned r)
{
	if (ms->base.metrics != NULL)
		idem_metrics_outcome(ms->base.metrics, r, IDEM_OUTCOME_CONTENDED,
		    1);
}

/* Whether err (a mysql_errno) is contention: ER_LOCK_DEADLOCK or
 * ER_LOCK_WAIT_TIMEOUT, whose statement (or, for a deadlock, transaction)
 * was rolled back because others are working on the same rows.  Counted
 * in the metrics on row r. */
static int
contention(mysql_store *ms, unsigned r, unsigned err)
{
	if (err != 1213 && err != 1205)
		return 0;
	count_contended(ms, r);
	return 1;
}

/* Sleeps a random 1..2^n ms: the back-off after the n-th deadlock. */
static void
backoff(int n)
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
 * lost its connection, so it may or may not have been applied.  Returns
 * IDEM_OK, IDEM_ERR_BUSY (still contended), IDEM_ERR_TOO_LARGE (a
 * permanent error of the values) or IDEM_ERR_STORE; errors are logged.
 */
static idem_err
run(mysql_store *ms, int i, params *p, idem_mysql_conn **held,
    unsigned long long *affected, int *retried)
{
	int attempt, lost = 0, contended = 0;
	idem_err fail = IDEM_ERR_STORE;

	for (attempt = 0; attempt < CONTENTION_TRIES + 1; attempt++) {
		idem_mysql_conn *c = idem_mysql_get(ms->pool);
		MYSQL_STMT *st;
		unsigned err;

		if (c == NULL)
			return IDEM_ERR_STORE;
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
		if (permanent_error(err)) {
			idem_mysql_log_error(ms->pool, "statement", st);
			idem_mysql_put(ms->pool, c);
			return IDEM_ERR_TOO_LARGE;
		}
		if (contention(ms, p->row, err)) {
			/* a lock wait has waited all it may already: not
			 * again */
			idem_mysql_put(ms->pool, c);
			fail = IDEM_ERR_BUSY;
			if (err == 1205 || ++contended >= CONTENTION_TRIES)
				break;
			backoff(contended);
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
	return fail;
}

/* Like run, for statements whose only result is the affected row count. */
static idem_err
exec_count(mysql_store *ms, int i, params *p, unsigned long long *affected,
    int *retried)
{
	return run(ms, i, p, NULL, affected, retried);
}

/* --------------------------------------------------------- the reading */

/* One row of S_SELECT. */
typedef struct row {
	int found;
	int committed;
	int expired;
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	long long lease_age_us;
	long long left_us;           /* committed: time left until it expires */
	int status;
	idem_stored_response resp;   /* committed: owned by the row */
} row;

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
static idem_err
fetch_row(mysql_store *ms, idem_mysql_conn *c, MYSQL_STMT *st, row *r)
{
	MYSQL_BIND b[9];
	unsigned long len[9];
	my_bool null[9];
	char state[16];
	long long left = 0, status = 0;
	int rc;
	idem_err err = IDEM_OK;

	r->found = 0;
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
	for (rc = 0; rc < 9; rc++) {
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
	r->committed = strcmp(state, "committed") == 0;
	r->left_us = null[5] ? 0 : left;
	/* (r->found is 0 until a row is fetched: set at the top) */
	r->expired = !null[5] && left <= 0;
	r->status = null[6] ? 0 : (int)status;
	if (r->committed) {
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
 * wait for a transaction that holds it).  Returns IDEM_OK (r->found
 * tells), IDEM_ERR_BUSY or IDEM_ERR_STORE. */
static idem_err
read_row_with(mysql_store *ms, int i, const idem_store_key *k, row *r)
{
	params p;
	idem_mysql_conn *c;
	idem_err err;

	memset(r, 0, sizeof(*r));
	p_init(&p);
	p_key(&p, k);
	if ((err = run(ms, i, &p, &c, NULL, NULL)) != IDEM_OK)
		return err;
	err = fetch_row(ms, c, c->stmts[i], r);
	idem_mysql_put(ms->pool, c);
	return err;
}

/* Reads the row of k.  Returns IDEM_OK (r->found tells) or IDEM_ERR_STORE. */
static idem_err
read_row(mysql_store *ms, const idem_store_key *k, row *r)
{
	return read_row_with(ms, S_SELECT, k, r);
}

/* ----------------------------------------------------------- operations */

/* What a reserve asks for, shared by the two-phase and the transactional
 * reserve. */
typedef struct reserve_args {
	const idem_store_key *k;
	const unsigned char *fp;
	const char *owner, *request_id;
	long long life_us, ttl_us;
} reserve_args;

/* The parameters of S_INSERT (and T_INSERT). */
static void
p_insert(params *p, const reserve_args *a)
{
	p_init(p);
	p_key(p, a->k);
	p_blob(p, a->fp, 32);
	p_str(p, a->owner);
	p_str(p, a->request_id);
	p_ll(p, &a->life_us);
}

/* The parameters of S_REUSE: an expired committed row made ours. */
static void
p_reuse(params *p, const reserve_args *a)
{
	p_init(p);
	p_blob(p, a->fp, 32);
	p_str(p, a->owner);
	p_str(p, a->request_id);
	p_ll(p, &a->life_us);
	p_key(p, a->k);
}

/* The parameters of S_TAKEOVER of old_owner's stale reservation. */
static void
p_takeover(params *p, const reserve_args *a, const char *old_owner)
{
	p_init(p);
	p_str(p, a->owner);
	p_str(p, a->request_id);
	p_ll(p, &a->life_us);
	p_key(p, a->k);
	p_str(p, old_owner);
	p_blob(p, a->fp, 32);
	p_ll(p, &a->ttl_us);
}

/* The step of the reservation rule (idem_reserve_decide) for the row r
 * a reserve found. */
static idem_reserve_step
step_of(const reserve_args *a, const row *r)
{
	idem_found f = { r->committed, r->expired, r->fp, r->owner,
	    r->lease_age_us };

	return idem_reserve_decide(&f, a->fp, a->owner, a->ttl_us);
}

/* Fills *out from a found row r that is live (not an expired committed
 * one), read at read_at (idem_boot_ms before the statement): COMMITTED
 * with its answer (moved out of r, and a copy kept in the replay cache),
 * or IN_FLIGHT with its owner (what a takeover then changes). */
static void
found_row(mysql_store *ms, const reserve_args *a, row *r, uint64_t read_at,
    idem_reserve_result *out)
{
	uint64_t left_ms;

	memcpy(out->fingerprint, r->fp, 32);
	if (r->committed) {
		out->outcome = IDEM_RESERVE_COMMITTED;
		out->response = r->resp;
		memset(&r->resp, 0, sizeof(r->resp));
		/* served until the time left, counted from before the read
		 * (never past expires_at), and at most CACHE_HOLD_MS: what
		 * the clocks' rates may drift apart, or a row changed by
		 * hand, lasts no longer */
		left_ms = (uint64_t)r->left_us / 1000;
		if (left_ms > 0)
			idem_replay_cache_put(ms->cache, a->k, r->fp,
			    &out->response, read_at + (left_ms < CACHE_HOLD_MS ?
			    left_ms : CACHE_HOLD_MS));
		return;
	}
	snprintf(out->owner, sizeof(out->owner), "%s", r->owner);
	snprintf(out->request_id, sizeof(out->request_id), "%s", r->request_id);
	out->lease_age_ms = r->lease_age_us > 0 ?
	    (uint64_t)r->lease_age_us / 1000 : 0;
	out->outcome = IDEM_RESERVE_IN_FLIGHT;
}

/* Whether k's committed answer is in the replay cache: then *out is
 * COMMITTED with it, marked cached, and no statement is sent (the
 * middleware counts a replay of it, a request of the record's
 * fingerprint, as replay_cached; another request is its conflict).  The
 * cache's times are CLOCK_BOOTTIME: an entry also ages while the machine
 * is suspended. */
static int
cached(mysql_store *ms, const idem_store_key *k, idem_reserve_result *out)
{
	if (ms->cache == NULL || !idem_replay_cache_get(ms->cache, k,
	    idem_boot_ms(), out->fingerprint, &out->response))
		return 0;
	out->outcome = IDEM_RESERVE_COMMITTED;
	out->cached = 1;
	return 1;
}

/* After a takeover whose connection was lost and whose attempt on a new
 * one matched no row: the first may have been applied, and the row be
 * ours.  Reads it (causally) and makes *out TAKEN_OVER when it is; else
 * *out stays what the takeover found.  Returns IDEM_OK or the read's
 * error. */
static idem_err
own_takeover(mysql_store *ms, const reserve_args *a, idem_reserve_result *out)
{
	idem_err err;
	row r;

	if ((err = read_row_with(ms, S_SELECT_CAUSAL, a->k, &r)) != IDEM_OK)
		return err;
	idem_stored_response_clear(&r.resp);
	if (r.found && !r.committed && strcmp(r.owner, a->owner) == 0)
		out->outcome = IDEM_RESERVE_TAKEN_OVER;
	return IDEM_OK;
}

static idem_err
my_reserve(idem_store *s, const idem_store_key *k, const unsigned char fp[32],
    const char *owner, const char *request_id, uint64_t inflight_ttl_ms,
    uint64_t lifetime_ms, idem_reserve_result *out)
{
	mysql_store *ms = (mysql_store *)s;
	reserve_args a = { k, fp, owner, request_id,
	    (long long)lifetime_ms * 1000, (long long)inflight_ttl_ms * 1000 };
	unsigned long long n;
	uint64_t read_at;
	int attempt, retried = 0;
	params p;
	row r;
	idem_err err;

	if (cached(ms, k, out))
		return IDEM_OK;
	/* a row that disappears or changes between statements sends us
	 * round again; when it keeps doing so, others are reserving and
	 * releasing this key as fast as we look: that is contention */
	for (attempt = 0; attempt < RESERVE_ROUNDS; attempt++) {
		if (attempt > 1)
			backoff(attempt - 1);
		p_insert(&p, &a);
		if ((err = exec_count(ms, S_INSERT, &p, &n, &retried)) != IDEM_OK)
			return err;
		if (n == 1) {
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		}
		read_at = idem_boot_ms();
		if ((err = read_row(ms, k, &r)) != IDEM_OK)
			return err;
		if (!r.found)
			continue;
		switch (step_of(&a, &r)) {
		case IDEM_STEP_OURS:
			/* our own INSERT, applied before a lost connection */
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		case IDEM_STEP_REUSE:
			idem_stored_response_clear(&r.resp);
			p_reuse(&p, &a);
			if ((err = exec_count(ms, S_REUSE, &p, &n, NULL)) != IDEM_OK)
				return err;
			if (n == 1) {
				out->outcome = IDEM_RESERVE_ACQUIRED;
				return IDEM_OK;
			}
			continue;
		case IDEM_STEP_TAKE_OVER:
			found_row(ms, &a, &r, read_at, out);
			p_takeover(&p, &a, r.owner);
			if ((err = exec_count(ms, S_TAKEOVER, &p, &n, &retried))
			    != IDEM_OK)
				return err;
			if (n == 1)
				out->outcome = IDEM_RESERVE_TAKEN_OVER;
			else if (retried)
				return own_takeover(ms, &a, out);
			return IDEM_OK;
		case IDEM_STEP_REPLAY:
		case IDEM_STEP_IN_FLIGHT:
			break;
		}
		found_row(ms, &a, &r, read_at, out);
		return IDEM_OK;
	}
	count_contended(ms, k->metrics_row);
	return IDEM_ERR_BUSY;
}

/* The causal variant of owner-checked statement i. */
static int
causal_of(int i)
{
	return i == S_COMMIT ? S_COMMIT_CAUSAL : i == S_RELEASE ?
	    S_RELEASE_CAUSAL : S_RENEW_CAUSAL;
}

/*
 * The owner-checked statements: commit, release, renew.  One that matches
 * no row is run again causally before it counts as fenced: on Galera the
 * first may have run on a node that had not yet applied our reservation
 * (made through another node), and the second waits until it has.  That
 * costs a statement only where the answer is "fenced" or a lagging node.
 */
static idem_err
owned(mysql_store *ms, int i, params *p, const idem_store_key *k,
    const char *owner)
{
	unsigned long long n;
	int retried = 0, retried2 = 0;
	idem_err err;
	row r;

	p_key(p, k);
	p_str(p, owner);
	if ((err = exec_count(ms, i, p, &n, &retried)) != IDEM_OK)
		return err;
	if (n == 1)
		return IDEM_OK;
	if ((err = exec_count(ms, causal_of(i), p, &n, &retried2)) != IDEM_OK)
		return err;
	if (n == 1)
		return IDEM_OK;
	retried |= retried2;
	if (retried && i == S_COMMIT) {
		/* did the first attempt commit before the connection died? */
		if ((err = read_row_with(ms, S_SELECT_CAUSAL, k, &r)) != IDEM_OK)
			return err;
		idem_stored_response_clear(&r.resp);
		if (r.found && r.committed && strcmp(r.owner, owner) == 0)
			return IDEM_OK;
	}
	if (retried && i == S_RELEASE) {
		if ((err = read_row_with(ms, S_SELECT_CAUSAL, k, &r)) != IDEM_OK)
			return err;
		idem_stored_response_clear(&r.resp);
		if (!r.found || strcmp(r.owner, owner) != 0)
			return IDEM_OK;
	}
	return IDEM_ERR_NOT_FOUND;
}

/* The first parameters of S_COMMIT: the answer and its lifetime (the key
 * and owner follow). */
static void
p_answer(params *p, const long long *status, const idem_stored_response *resp,
    const long long *life_us)
{
	p_init(p);
	p_ll(p, status);
	p_blob(p, resp->headers != NULL ? resp->headers : "",
	    resp->headers_len);
	p_blob(p, resp->body != NULL ? resp->body : "", resp->body_len);
	p_ll(p, life_us);
}

/* Whether an answer of size bytes is over the packet the server takes
 * now (max_allowed_packet may have been lowered since start-up). */
static int
over_packet(mysql_store *ms, uint64_t size)
{
	uint64_t packet = idem_mysql_max_packet(ms->pool);

	return packet > 0 && size + PACKET_SLACK > packet;
}

static idem_err
my_commit(idem_store *s, const idem_store_key *k, const char *owner,
    const idem_stored_response *resp, uint64_t lifetime_ms)
{
	mysql_store *ms = (mysql_store *)s;
	long long status = resp->status, life_us = (long long)lifetime_ms * 1000;
	uint64_t size = (uint64_t)resp->headers_len + resp->body_len;
	params p;
	idem_err err;

	if (over_packet(ms, size))
		return IDEM_ERR_TOO_LARGE;
	p_answer(&p, &status, resp, &life_us);
	err = owned(ms, S_COMMIT, &p, k, owner);
	/* a server that drops the connection on a packet over its limit
	 * looks like an outage; the reconnect read the new limit */
	if (err == IDEM_ERR_STORE && over_packet(ms, size))
		err = IDEM_ERR_TOO_LARGE;
	return err;
}

static idem_err
my_release(idem_store *s, const idem_store_key *k, const char *owner)
{
	params p;

	p_init(&p);
	return owned((mysql_store *)s, S_RELEASE, &p, k, owner);
}

static idem_err
my_renew(idem_store *s, const idem_store_key *k, const char *owner)
{
	params p;

	p_init(&p);
	return owned((mysql_store *)s, S_RENEW, &p, k, owner);
}

static idem_err
my_purge(idem_store *s, unsigned max, unsigned *purged)
{
	long long lim = max;
	unsigned long long n = 0;
	params p;
	idem_err err;

	p_init(&p);
	p_ll(&p, &lim);
	err = exec_count((mysql_store *)s, S_PURGE, &p, &n, NULL);
	*purged = (unsigned)n;
	return err;
}

/* Result column helpers: a string or blob into buf (size bytes, one kept
 * for a NUL), and an integer. */
static void
r_buf(MYSQL_BIND *b, enum enum_field_types type, void *buf, size_t size,
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

static void
r_ll(MYSQL_BIND *b, long long *v, my_bool *null)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
	b->is_null = null;
}

/* Runs statement i with p and fetches at most one row into res.  Returns
 * IDEM_OK with *found, or IDEM_ERR_STORE (logged). */
static idem_err
fetch_one(mysql_store *ms, int i, params *p, MYSQL_BIND *res, int *found)
{
	idem_mysql_conn *c;
	MYSQL_STMT *st;
	idem_err err;
	int rc;

	*found = 0;
	if ((err = run(ms, i, p, &c, NULL, NULL)) != IDEM_OK)
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
static idem_err
select_ints(mysql_store *ms, int i, long long *a, long long *b2)
{
	MYSQL_BIND b[2];
	my_bool null[2] = { 0, 0 };
	params p;
	idem_err err;
	int found;

	*a = 0;
	r_ll(&b[0], a, &null[0]);
	r_ll(&b[1], b2, &null[1]);
	p_init(&p);
	/* a one-column statement binds b[0] only */
	err = fetch_one(ms, i, &p, b, &found);
	if (null[0])
		*a = 0;
	return err;
}

static idem_err
my_release_prefix(idem_store *s, const char *prefix, idem_store_key **keys,
    size_t *n)
{
	mysql_store *ms = (mysql_store *)s;
	char like[IDEM_OWNER_MAX + 2];
	idem_mysql_conn *c;
	MYSQL_STMT *st;
	MYSQL_BIND b[2];
	unsigned long len[2];
	unsigned char scope[32];
	char key[IDEM_KEY_MAX + 1];
	unsigned long long gone;
	size_t cap = 0;
	params p;
	idem_err err;
	int rc;

	/* prefixes are hex and '.', never LIKE's % or _ */
	if (strlen(prefix) > IDEM_OWNER_MAX || strpbrk(prefix, "%_\\") != NULL)
		return IDEM_ERR_INVALID;
	snprintf(like, sizeof(like), "%s%%", prefix);
	p_init(&p);
	p_str(&p, like);
	if ((err = run(ms, S_OWNED_BY, &p, &c, NULL, NULL)) != IDEM_OK)
		return err;
	st = c->stmts[S_OWNED_BY];
	memset(b, 0, sizeof(b));
	b[0].buffer_type = MYSQL_TYPE_BLOB;
	b[0].buffer = scope;
	b[0].buffer_length = 32;
	b[0].length = &len[0];
	b[1].buffer_type = MYSQL_TYPE_BLOB;
	b[1].buffer = key;
	b[1].buffer_length = IDEM_KEY_MAX;
	b[1].length = &len[1];
	rc = mysql_stmt_bind_result(st, b) == 0 ? 0 : 1;
	while (rc == 0 && (rc = mysql_stmt_fetch(st)) == 0) {
		idem_store_key *k;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			if ((k = realloc(*keys, cap * sizeof(*k))) == NULL) {
				err = IDEM_ERR_NOMEM;
				break;
			}
			*keys = k;
		}
		k = &(*keys)[(*n)++];
		memset(k, 0, sizeof(*k));
		k->metrics_row = IDEM_METRICS_NO_ROUTE;   /* no request's */
		memcpy(k->scope, scope, 32);
		k->key_len = len[1] < IDEM_KEY_MAX ? len[1] : IDEM_KEY_MAX;
		memcpy(k->key, key, k->key_len);
	}
	if (rc == 1) {
		idem_mysql_check(c, mysql_stmt_errno(st));
		idem_mysql_log_error(ms->pool, "fetch", st);
		err = IDEM_ERR_STORE;
	}
	while (rc == 0 && mysql_stmt_fetch(st) == 0)
		;
	mysql_stmt_free_result(st);
	idem_mysql_put(ms->pool, c);
	if (err != IDEM_OK)
		return err;
	p_init(&p);
	p_str(&p, like);
	return exec_count(ms, S_RELEASE_BY, &p, &gone, NULL);
}

static void
my_stats(idem_store *s, idem_store_stats *st)
{
	long long all = 0, in_flight = 0;

	if (select_ints((mysql_store *)s, S_STATS, &all, &in_flight) == IDEM_OK) {
		st->entries = (uint64_t)all;
		st->in_flight = (uint64_t)in_flight;
	}
}

/* ------------------------------------------------------ administration */

/* NUL-terminates a fetched string of length len in a buffer of size. */
static void
terminate(char *buf, size_t size, unsigned long len, my_bool null)
{
	buf[null ? 0 : len < size ? len : size - 1] = '\0';
}

static idem_err
my_lookup(idem_store *s, const idem_store_key *k, idem_store_record *out)
{
	MYSQL_BIND b[13];
	unsigned long len[13];
	my_bool null[13];
	char state[16];
	long long age_res = 0, age_lease = 0, exp_in = 0, status = 0, hl = 0,
	    bl = 0;
	params p;
	idem_err err;
	int found;

	memset(len, 0, sizeof(len));
	memset(null, 0, sizeof(null));
	r_buf(&b[0], MYSQL_TYPE_STRING, state, sizeof(state), &len[0], &null[0]);
	r_buf(&b[1], MYSQL_TYPE_BLOB, out->fingerprint, 32, &len[1], &null[1]);
	r_buf(&b[2], MYSQL_TYPE_STRING, out->owner, sizeof(out->owner), &len[2],
	    &null[2]);
	r_buf(&b[3], MYSQL_TYPE_STRING, out->request_id,
	    sizeof(out->request_id), &len[3], &null[3]);
	r_buf(&b[4], MYSQL_TYPE_STRING, out->reserved_at,
	    sizeof(out->reserved_at), &len[4], &null[4]);
	r_buf(&b[5], MYSQL_TYPE_STRING, out->lease_at, sizeof(out->lease_at),
	    &len[5], &null[5]);
	r_buf(&b[6], MYSQL_TYPE_STRING, out->expires_at,
	    sizeof(out->expires_at), &len[6], &null[6]);
	r_ll(&b[7], &age_res, &null[7]);
	r_ll(&b[8], &age_lease, &null[8]);
	r_ll(&b[9], &exp_in, &null[9]);
	r_ll(&b[10], &status, &null[10]);
	r_ll(&b[11], &hl, &null[11]);
	r_ll(&b[12], &bl, &null[12]);
	p_init(&p);
	p_key(&p, k);
	if ((err = fetch_one((mysql_store *)s, S_LOOKUP, &p, b, &found))
	    != IDEM_OK)
		return err;
	if (!found) {
		/* no committed row: is an open transaction holding one? */
		p_init(&p);
		p_key(&p, k);
		err = fetch_one((mysql_store *)s, S_PROBE, &p, b, &found);
		return err == IDEM_OK ? IDEM_ERR_NOT_FOUND : err;
	}
	terminate(state, sizeof(state), len[0], null[0]);
	terminate(out->owner, sizeof(out->owner), len[2], null[2]);
	terminate(out->request_id, sizeof(out->request_id), len[3], null[3]);
	terminate(out->reserved_at, sizeof(out->reserved_at), len[4], null[4]);
	terminate(out->lease_at, sizeof(out->lease_at), len[5], null[5]);
	terminate(out->expires_at, sizeof(out->expires_at), len[6], null[6]);
	out->committed = strcmp(state, "committed") == 0;
	out->reserved_age_ms = age_res > 0 ? (uint64_t)age_res / 1000 : 0;
	out->lease_age_ms = age_lease > 0 ? (uint64_t)age_lease / 1000 : 0;
	out->expires_in_ms = exp_in / 1000;
	out->status = null[10] ? 0 : (int)status;
	out->headers_len = null[11] ? 0 : (size_t)hl;
	out->body_len = null[12] ? 0 : (size_t)bl;
	return IDEM_OK;
}

static idem_err
my_census(idem_store *s, uint64_t inflight_ttl_ms, idem_store_census *out)
{
	mysql_store *ms = (mysql_store *)s;
	long long v[4] = { 0, 0, 0, 0 }, ttl_us = (long long)inflight_ttl_ms *
	    1000, age = 0, lease = 0;
	MYSQL_BIND b[6];
	unsigned long len[6];
	my_bool null[6];
	params p;
	idem_err err;
	int found, i;

	memset(null, 0, sizeof(null));
	for (i = 0; i < 4; i++)
		r_ll(&b[i], &v[i], &null[i]);
	p_init(&p);
	p_ll(&p, &ttl_us);
	if ((err = fetch_one(ms, S_CENSUS, &p, b, &found)) != IDEM_OK)
		return err;
	out->in_flight = (uint64_t)v[0];
	out->stale = (uint64_t)v[1];
	out->committed = (uint64_t)v[2];
	out->expired = (uint64_t)v[3];
	memset(len, 0, sizeof(len));
	memset(null, 0, sizeof(null));
	r_buf(&b[0], MYSQL_TYPE_BLOB, out->oldest_key.scope, 32, &len[0],
	    &null[0]);
	r_buf(&b[1], MYSQL_TYPE_BLOB, out->oldest_key.key, IDEM_KEY_MAX,
	    &len[1], &null[1]);
	r_buf(&b[2], MYSQL_TYPE_STRING, out->oldest_owner,
	    sizeof(out->oldest_owner), &len[2], &null[2]);
	r_buf(&b[3], MYSQL_TYPE_STRING, out->oldest_request_id,
	    sizeof(out->oldest_request_id), &len[3], &null[3]);
	r_ll(&b[4], &age, &null[4]);
	r_ll(&b[5], &lease, &null[5]);
	p_init(&p);
	if ((err = fetch_one(ms, S_OLDEST, &p, b, &found)) != IDEM_OK)
		return err;
	if (found) {
		out->has_oldest = 1;
		out->oldest_key.key_len = len[1] < IDEM_KEY_MAX ? len[1] :
		    IDEM_KEY_MAX;
		terminate(out->oldest_owner, sizeof(out->oldest_owner), len[2],
		    null[2]);
		terminate(out->oldest_request_id,
		    sizeof(out->oldest_request_id), len[3], null[3]);
		out->oldest_age_ms = age > 0 ? (uint64_t)age / 1000 : 0;
		out->oldest_lease_age_ms = lease > 0 ? (uint64_t)lease / 1000 : 0;
	}
	return IDEM_OK;
}

static void
my_close(idem_store *s)
{
	mysql_store *ms = (mysql_store *)s;

	idem_mysql_pool_free(ms->pool);
	idem_replay_cache_free(ms->cache);
	free(ms);
}

/* ---------------------------------------------- transactional routes */

/*
 * A transactional route's handler and the record of its key share one
 * transaction on a connection of the plugin's pool (protocol (b) of
 * DESIGN.md 2.7), with autocommit off: the reservation's INSERT
 * IGNORE (which opens it); the handler's statements; the owner-checked
 * UPDATE that stores the answer; COMMIT.  One durable commit per first execution; a crash
 * anywhere before COMMIT leaves nothing.  Until COMMIT the row exists only
 * inside the transaction: others' INSERT IGNORE waits on its lock (up to
 * inflight-wait, then IN_FLIGHT), so it needs no lease and cannot be taken
 * over.  These statements are prepared on the plugin's pool.
 */
enum { T_INSERT, T_SELECT, T_TAKEOVER, T_REUSE, T_COMMIT, T_OUTCOME, NTX };

/* How long T_OUTCOME waits for the transaction it asks about to end. */
#define OUTCOME_LOCK_WAIT_S 2
#define STR_(x) #x
#define STR(x) STR_(x)

idem_err
idem_store_mysql_tx_prepare(const idem_config *cfg, idem_mysql_pool *pool)
{
	char insert[1024], init[128];
	const char *tsql[NTX];

	/* a transaction left idle longer than inflight-ttl is a hung or
	 * partitioned node's, as far as anyone can tell: the server rolls
	 * it back and frees its key, as a takeover would on the two-phase
	 * path (MariaDB 10.3+; a plain user of the pool has no open write
	 * transaction when idle) */
	snprintf(init, sizeof(init), "SET SESSION idle_write_transaction_timeout "
	    "= %llu", (unsigned long long)(cfg->inflight_ttl + 999) / 1000);
	if (idem_mysql_pool_init(pool, init) != IDEM_OK)
		return IDEM_ERR_NOMEM;
	lock_wait_insert(cfg, insert, sizeof(insert));
	tsql[T_INSERT] = insert;
	/* a locking read (the INSERT holds that lock already) opens no
	 * snapshot: the handler's first read does, seeing what committed
	 * before it */
	tsql[T_SELECT] = cfg->mysql_causal_reads ? CAUSAL SELECT_LOCKED :
	    SELECT_LOCKED;
	tsql[T_TAKEOVER] = sql[S_TAKEOVER];
	tsql[T_REUSE] = sql[S_REUSE];
	tsql[T_COMMIT] = sql[S_COMMIT];
	/* a lost COMMIT's outcome, read on the transaction's own node: the
	 * locking read waits for the transaction to end (the server ends it
	 * once it sees the connection cut) */
	tsql[T_OUTCOME] = "SET STATEMENT innodb_lock_wait_timeout = "
	    STR(OUTCOME_LOCK_WAIT_S) ", wsrep_sync_wait = 1 FOR "
	    SELECT_LOCKED;
	return idem_mysql_pool_extra(pool, tsql, NTX);
}

/* Runs transaction statement i of c with p; *affected gets its count.
 * Returns 0, or the statement's mysql_stmt_errno. */
static unsigned
tx_exec(idem_mysql_conn *c, int i, params *p, unsigned long long *affected)
{
	MYSQL_STMT *st = c->extra[i];

	unsigned err;

	if (mysql_stmt_bind_param(st, p->b) != 0 || mysql_stmt_execute(st) != 0) {
		err = mysql_stmt_errno(st) != 0 ? mysql_stmt_errno(st) :
		    CR_UNKNOWN_ERROR;
		/* a lost connection is known at once (the callers retry a
		 * connection that died idle once, on a new one) */
		idem_mysql_check(c, err);
		return err;
	}
	if (affected != NULL)
		*affected = mysql_stmt_affected_rows(st);
	return 0;
}

/* Rolls back c's transaction (the server does it anyway when c is lost). */
static void
tx_rollback(idem_mysql_conn *c)
{
	if (!c->broken && mysql_rollback(c->m) != 0)
		idem_mysql_check(c, mysql_errno(c->m));
}

/* After statement i of c failed with err: rolls back and says why.
 * Returns IDEM_ERR_BUSY (a deadlock, a lock wait: contention, counted on
 * c's metrics row) or IDEM_ERR_STORE (logged). */
static idem_err
tx_failed(mysql_store *ms, idem_mysql_conn *c, int i, unsigned err)
{
	int contended = contention(ms, c->metrics_row, err);

	idem_mysql_check(c, err);
	if (!c->broken && i >= 0 && !contended)
		idem_mysql_log_error(ms->pool, "transaction", c->extra[i]);
	tx_rollback(c);
	return contended ? IDEM_ERR_BUSY : IDEM_ERR_STORE;
}

static idem_err
my_tx_begin(idem_store *s, idem_mysql_conn *c, const idem_store_key *k,
    const unsigned char fp[32], const char *owner, const char *request_id,
    uint64_t inflight_ttl_ms, uint64_t lifetime_ms, idem_reserve_result *out)
{
	mysql_store *ms = (mysql_store *)s;
	reserve_args a = { k, fp, owner, request_id,
	    (long long)lifetime_ms * 1000, (long long)inflight_ttl_ms * 1000 };
	unsigned long long n;
	uint64_t read_at;
	unsigned e;
	int attempt, first = 1;
	params p;
	row r;
	idem_err err;

	/* a cached answer opens no transaction */
	if (k != NULL && cached(ms, k, out))
		return IDEM_OK;
	/* a round ends early when the row vanished or changed, or when
	 * others hold it (a lock wait, a deadlock: racing takers each hold
	 * a shared lock and want an exclusive one); after a random pause
	 * the next round starts a new transaction */
	for (attempt = 0; attempt < CONTENTION_TRIES; attempt++) {
		if (attempt > 0)
			backoff(attempt);
		/* autocommit off: the INSERT opens the transaction (no START
		 * TRANSACTION round trip), and nothing after a rollback the
		 * server makes on its own (a deadlock) ever commits alone */
		if (idem_mysql_tx_mode(c) != 0) {
			if (first && c->broken && idem_mysql_reconnect(c) == 0) {
				first = 0;
				attempt--;
				continue;
			}
			idem_mysql_log_conn_error(ms->pool, "autocommit", c->m);
			return IDEM_ERR_STORE;
		}
		out->outcome = IDEM_RESERVE_ACQUIRED;
		if (k == NULL)
			return IDEM_OK;
		p_insert(&p, &a);
		(void)idem_mysql_expect_lock_wait(c, ms->lock_wait_ms[S_INSERT]);
		e = tx_exec(c, T_INSERT, &p, &n);
		if (!c->broken)
			(void)idem_mysql_expect_lock_wait(c, 0);
		if (e != 0) {
			if (first && c->broken && idem_mysql_reconnect(c) == 0) {
				/* a connection that died idle in the pool (the
				 * database restarted): once more on a new one */
				first = 0;
				attempt--;
				continue;
			}
			/* a lock wait already waited inflight-wait for the
			 * transaction that holds the key: in flight */
			if ((err = tx_failed(ms, c, T_INSERT, e)) != IDEM_ERR_BUSY ||
			    e == 1205)
				return err;
			continue;
		}
		first = 0;
		if (n == 1)
			return IDEM_OK;
		/* the INSERT found the row and holds a shared lock on it: this
		 * read sees its latest committed state */
		p_init(&p);
		p_key(&p, k);
		read_at = idem_boot_ms();
		if ((e = tx_exec(c, T_SELECT, &p, NULL)) != 0) {
			if ((err = tx_failed(ms, c, T_SELECT, e)) != IDEM_ERR_BUSY)
				return err;
			continue;
		}
		if ((err = fetch_row(ms, c, c->extra[T_SELECT], &r)) != IDEM_OK) {
			tx_rollback(c);
			return err;
		}
		if (!r.found) {
			tx_rollback(c);
			continue;
		}
		switch (step_of(&a, &r)) {
		case IDEM_STEP_OURS:
			/* owners are fresh per attempt: not met in a
			 * transaction; ours all the same */
			idem_stored_response_clear(&r.resp);
			return IDEM_OK;
		case IDEM_STEP_REUSE:
			idem_stored_response_clear(&r.resp);
			p_reuse(&p, &a);
			if ((e = tx_exec(c, T_REUSE, &p, &n)) != 0) {
				if ((err = tx_failed(ms, c, T_REUSE, e)) !=
				    IDEM_ERR_BUSY)
					return err;
				continue;
			}
			if (n == 1)
				return IDEM_OK;
			tx_rollback(c);
			continue;
		case IDEM_STEP_TAKE_OVER:
			/* an in_flight row here is committed: a two-phase
			 * reservation (another route, or a node before this
			 * one took over); taken over inside the transaction,
			 * its old owner's commit waits for ours, then finds
			 * another owner */
			found_row(ms, &a, &r, read_at, out);
			p_takeover(&p, &a, r.owner);
			if ((e = tx_exec(c, T_TAKEOVER, &p, &n)) != 0) {
				if ((err = tx_failed(ms, c, T_TAKEOVER, e)) !=
				    IDEM_ERR_BUSY)
					return err;
				continue;
			}
			if (n == 1) {
				out->outcome = IDEM_RESERVE_TAKEN_OVER;
				return IDEM_OK;
			}
			break;
		case IDEM_STEP_REPLAY:
		case IDEM_STEP_IN_FLIGHT:
			found_row(ms, &a, &r, read_at, out);
			break;
		}
		tx_rollback(c);
		return IDEM_OK;
	}
	return IDEM_ERR_BUSY;
}

static idem_err
my_tx_record(idem_store *s, idem_mysql_conn *c, const idem_store_key *k,
    const char *owner, const idem_stored_response *resp, uint64_t lifetime_ms)
{
	mysql_store *ms = (mysql_store *)s;
	long long status = resp->status, life_us = (long long)lifetime_ms * 1000;
	unsigned long long n;
	unsigned e;
	params p;

	if (over_packet(ms, (uint64_t)resp->headers_len + resp->body_len))
		return IDEM_ERR_TOO_LARGE;
	p_answer(&p, &status, resp, &life_us);
	p_key(&p, k);
	p_str(&p, owner);
	if ((e = tx_exec(c, T_COMMIT, &p, &n)) != 0) {
		/* the statement was undone; the transaction stays open for
		 * a smaller answer */
		if (permanent_error(e)) {
			idem_mysql_log_error(ms->pool, "transaction",
			    c->extra[T_COMMIT]);
			return IDEM_ERR_TOO_LARGE;
		}
		return tx_failed(ms, c, T_COMMIT, e);
	}
	if (n != 1) {
		tx_rollback(c);
		return IDEM_ERR_NOT_FOUND;
	}
	return IDEM_OK;
}

/* Cuts c's socket, so the server sees the connection end at once and
 * rolls back what it has not committed. */
static void
tx_cut(idem_mysql_conn *c)
{
	my_socket fd = mysql_get_socket(c->m);

	c->broken = 1;
	if ((int)fd >= 0)
		shutdown(fd, SHUT_RDWR);
}

/*
 * After c's COMMIT was lost and c cut: reads k's record on the node the
 * transaction ran on, through c opened there again, with a locking read
 * that waits for the transaction to end.  Returns 1 when it committed
 * under owner, 0 when it did not (not committed on its own node: it never
 * will be), -1 when that node cannot tell (unreachable, another node
 * answers at its address, the wait ran out).
 */
static int
outcome_here(mysql_store *ms, idem_mysql_conn *c, const idem_store_key *k,
    const char *owner)
{
	params p;
	row r;
	unsigned e;
	int rc;

	if (idem_mysql_reopen_same(c) != 0)
		return -1;
	memset(&r, 0, sizeof(r));
	p_init(&p);
	p_key(&p, k);
	(void)idem_mysql_expect_lock_wait(c, OUTCOME_LOCK_WAIT_S * 1000);
	if ((e = tx_exec(c, T_OUTCOME, &p, NULL)) != 0) {
		idem_mysql_log_error(ms->pool, "reading a lost COMMIT's outcome",
		    c->extra[T_OUTCOME]);
		return -1;
	}
	if (fetch_row(ms, c, c->extra[T_OUTCOME], &r) != IDEM_OK)
		return -1;
	rc = r.found && r.committed && strcmp(r.owner, owner) == 0;
	idem_stored_response_clear(&r.resp);
	if (!c->broken)
		(void)idem_mysql_expect_lock_wait(c, 0);
	return rc;
}

static idem_err
my_tx_end(idem_store *s, idem_mysql_conn *c, const idem_store_key *k,
    const char *owner, int commit, unsigned faults, int *unknown)
{
	mysql_store *ms = (mysql_store *)s;
	unsigned e;
	idem_err err;
	row r;

	*unknown = 0;
	if (!commit) {
		tx_rollback(c);
		return IDEM_OK;
	}
	if (faults & IDEM_TX_FAULT_DIE_IN_COMMIT) {
		/* the COMMIT reaches the server; its answer never comes back */
		mysql_send_query(c->m, "COMMIT", 6);
		raise(SIGKILL);
	}
	if (faults & IDEM_TX_FAULT_LOSE_BEFORE_COMMIT)
		tx_cut(c);
	if (faults & IDEM_TX_FAULT_LOSE_IN_COMMIT) {
		mysql_send_query(c->m, "COMMIT", 6);
		tx_cut(c);
	}
	if (!c->broken && mysql_commit(c->m) == 0)
		return IDEM_OK;
	e = c->m != NULL ? mysql_errno(c->m) : CR_SERVER_LOST;
	idem_mysql_check(c, e);
	if (!c->broken && (e == 1213 || e == 1205)) {
		/* the server rolled back (a deadlock; on Galera, a
		 * certification failure): contention */
		return tx_failed(ms, c, -1, e);
	}
	/* the connection was lost during COMMIT, or COMMIT failed in a way
	 * that does not say what became of it (killed, an error after the
	 * engine committed): it may or may not have committed.  Once the
	 * server sees the connection gone it finishes either way; a locking
	 * read waits for that and reads the truth. */
	if (!c->broken)
		idem_mysql_log_conn_error(ms->pool, "COMMIT", c->m);
	tx_cut(c);
	if (k == NULL) {
		*unknown = 1;
		return IDEM_ERR_STORE;
	}
	switch (outcome_here(ms, c, k, owner)) {
	case 1:
		return IDEM_OK;
	case 0:
		return IDEM_ERR_STORE;
	}
	/* the transaction's node cannot be asked: another node knows only
	 * what the cluster has ordered, not a COMMIT still on its way, so
	 * only our own commit is an answer there (another owner's record
	 * proves nothing: ours may be reusing it, expired, or taking it
	 * over, stale, in a write set not yet ordered) */
	err = read_row_with(ms, S_SELECT_LOCKED, k, &r);
	idem_stored_response_clear(&r.resp);
	if (err == IDEM_OK && r.found && r.committed &&
	    strcmp(r.owner, owner) == 0)
		return IDEM_OK;
	*unknown = 1;
	return IDEM_ERR_STORE;
}

static const idem_store_ops mysql_ops = {
	"mysql", my_reserve, my_commit, my_release, my_renew, my_purge,
	my_stats, my_close, my_release_prefix, my_lookup, my_census,
	my_tx_begin, my_tx_record, my_tx_end
};

/* Sets the store's limits from the schema's columns and the server's
 * max_allowed_packet, which the pool read when it connected.  A packet
 * that cannot hold the largest stand-in besides PACKET_SLACK is refused:
 * a commit of an answer over the limits, the stand-in's, would fail, and
 * its key would run again after inflight-ttl.  Returns IDEM_OK or
 * IDEM_ERR_STORE (logged). */
static idem_err
set_limits(mysql_store *ms)
{
	uint64_t packet = idem_mysql_max_packet(ms->pool);

	if (packet == 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "mysql store: cannot read "
		    "max_allowed_packet");
		return IDEM_ERR_STORE;
	}
	if (packet < PACKET_SLACK + IDEM_STAND_IN_MAX) {
		idem_log(NULL, IDEM_LOG_ERROR, "mysql store: the server's "
		    "max_allowed_packet is %llu bytes, and a commit needs %llu "
		    "besides the answer, which must hold at least %d bytes (the "
		    "notice stored for an answer too large to store): raise "
		    "max_allowed_packet (16 MiB by default) to more than "
		    "max-response plus %llu", (unsigned long long)packet,
		    PACKET_SLACK, IDEM_STAND_IN_MAX, PACKET_SLACK);
		return IDEM_ERR_STORE;
	}
	ms->base.limits.headers = HEADERS_COLUMN_MAX;
	ms->base.limits.body = BODY_COLUMN_MAX;
	ms->base.limits.total = packet - PACKET_SLACK;
	return IDEM_OK;
}

idem_err
idem_store_mysql_new(const idem_config *cfg, unsigned pool_size,
    idem_store **out)
{
	mysql_store *ms;
	long long version = 0, unused = 0;
	idem_err err;

	if ((ms = calloc(1, sizeof(*ms))) == NULL)
		return IDEM_ERR_NOMEM;
	ms->base.ops = &mysql_ops;
	ms->base.settle_ms = idem_store_mysql_settle_ms(cfg);
	store_sql(cfg, ms->stmts);
	lock_wait_insert(cfg, ms->insert, sizeof(ms->insert));
	ms->stmts[S_INSERT] = ms->insert;
	set_lock_waits(cfg, ms->lock_wait_ms);
	err = idem_mysql_pool_new(cfg, ms->stmts, NSTMT, pool_size, &ms->pool);
	if (err != IDEM_OK) {
		free(ms);
		return err;
	}
	/* the store's statements are short; a row lock held longer belongs
	 * to a transactional route's open transaction, and waiting for it
	 * must not stall the caller (the lease thread above all) for
	 * innodb_lock_wait_timeout: a second, then contention */
	if ((err = idem_mysql_pool_init(ms->pool, "SET SESSION "
	    "innodb_lock_wait_timeout = 1")) != IDEM_OK) {
		my_close(&ms->base);
		return err;
	}
	/* the schema must be there, and of this version */
	if (select_ints(ms, S_VERSION, &version, &unused) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "mysql store: cannot use database "
		    "%s (see the error above); if the tables are missing, apply "
		    SCHEMA_FILE, cfg->mysql_database);
		my_close(&ms->base);
		return IDEM_ERR_STORE;
	}
	if (version != SCHEMA_VERSION) {
		idem_log(NULL, IDEM_LOG_ERROR, "mysql store: database %s has "
		    "schema version %lld, this idemfcgi needs %d: apply "
		    SCHEMA_FILE, cfg->mysql_database, version, SCHEMA_VERSION);
		my_close(&ms->base);
		return IDEM_ERR_STORE;
	}
	if ((err = set_limits(ms)) != IDEM_OK ||
	    (err = idem_replay_cache_new(cfg->mysql_replay_cache, &ms->cache))
	    != IDEM_OK) {
		my_close(&ms->base);
		return err;
	}
	*out = &ms->base;
	return IDEM_OK;
}
