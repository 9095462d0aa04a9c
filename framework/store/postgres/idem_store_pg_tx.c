/*
 * idem_store_pg_tx.c - the PostgreSQL store's operations of transactional
 * routes (DESIGN.md 2.7): the reservation inside the handler's
 * transaction, the record of its answer, COMMIT or ROLLBACK, and the
 * outcome of a lost COMMIT asked of the server by the transaction's id.
 *
 * A transactional request's statements, on a connection of the plugin's
 * pool (idem_pg_db.c): BEGIN; the reserve's INSERT ... ON CONFLICT DO
 * NOTHING with the row it met (a committed row's step of the reservation
 * rule is a conditional UPDATE, as on the two-phase path); the
 * handler's statements; the owner-checked UPDATE of the answer, which
 * returns the transaction's id and its server; COMMIT.  Until COMMIT the
 * row is seen by nobody: another reserve of the key waits on it (up to
 * the session's lock_timeout, inflight-wait: then in flight), so it needs
 * no lease and cannot be taken over.  A session idle in its transaction
 * longer than inflight-ttl (a hung or paused worker) is ended by the
 * server (idle_in_transaction_session_timeout), which frees its key.
 *
 * PostgreSQL aborts a transaction at its first failed statement, so the
 * store's own never fail on a duplicate key (ON CONFLICT); a statement of
 * the handler's that fails leaves the transaction aborted, and its
 * record cannot be written: rolled back, the request answers 503.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_pg_db.h"
#include "idem_store_pg_int.h"
#include "idem_time.h"

/* How long a lost COMMIT's transaction may stay in progress (its server
 * finishing it) before its outcome is said unknown, and how often it is
 * asked meanwhile (ms). */
#define OUTCOME_WAIT_MS 5000
#define OUTCOME_POLL_MS 20

/* Runs transaction statement t (PT_*) on c with p (NULL: none), its row
 * into *res when res is not NULL (caller PQclears).  Returns as
 * idem_pg_exec; contention is added to *contended. */
static idem_err
tx_exec(pg_store *ps, idem_pg_conn *c, int t, const idem_pg_params *p,
    unsigned *contended, PGresult **res)
{
	static const idem_pg_params none = { 0 };
	size_t i = idem_pg_db_extra(c->db.source, (size_t)t);
	uint64_t wait = t == PT_RESERVE || t == PT_TAKEOVER || t == PT_REUSE ||
	    t == PT_RESUME || t == PT_RECONCILE ? ps->lock_wait_ms : 0;
	PGresult *r;
	idem_err err;

	atomic_fetch_add(&ps->sent, 1);
	err = idem_pg_exec(c, i, p != NULL ? p : &none, wait, &r, NULL);
	if (err == IDEM_ERR_BUSY)
		idem_pgs_count_contended(ps, contended);
	if (err == IDEM_OK && res != NULL)
		*res = r;
	else
		PQclear(r);
	return err;
}

/* Reads a transaction's id and server from the first row of res. */
static void
read_txid(const PGresult *res, idem_pg_txid *id)
{
	idem_pgs_str(res, 0, 0, id->xid, sizeof(id->xid));
	idem_pgs_str(res, 0, 1, id->server, sizeof(id->server));
}

/* The rows statement t changed, its result's count. */
static unsigned long long
tx_count(pg_store *ps, idem_pg_conn *c, int t, const idem_pg_params *p,
    unsigned *contended, idem_err *err)
{
	unsigned long long n = 0;
	PGresult *res;

	if ((*err = tx_exec(ps, c, t, p, contended, &res)) == IDEM_OK) {
		n = strtoull(PQcmdTuples(res), NULL, 10);
		/* a write that returns the transaction's id */
		if (n == 1 && PQntuples(res) == 1 && PQnfields(res) == 2)
			read_txid(res, idem_pg_db_txid(&c->db));
		PQclear(res);
	}
	return n;
}

/* Rolls back c's transaction (the server does it anyway when c is
 * lost). */
static void
tx_rollback(pg_store *ps, idem_pg_conn *c)
{
	unsigned contended = 0;

	if (!c->broken && c->pg != NULL)
		(void)tx_exec(ps, c, PT_ROLLBACK, NULL, &contended, NULL);
	idem_pg_db_drop_rows(&c->db);
}

/* After statement t failed on c with err: rolls back, logs what is not
 * contention.  Returns err. */
static idem_err
tx_failed(pg_store *ps, idem_pg_conn *c, int t, idem_err err)
{
	char what[48];

	if (err != IDEM_ERR_BUSY) {
		snprintf(what, sizeof(what), "transaction statement %d", t);
		idem_pg_log_error(c, what);
	}
	tx_rollback(ps, c);
	return err;
}

/* How a round of the transactional reserve ended: with its answer, or
 * to be run again after a pause (contention, a row that changed), or at
 * once (a connection that died idle in the pool, reopened). */
typedef enum round_end { R_DONE, R_AGAIN, R_NOW } round_end;

/* Statement t of the reserve's transaction on c failed with e: a
 * connection that died idle in the pool (the round's first statement,
 * once: *first) is reopened (R_NOW); else the transaction is rolled back,
 * and contention is R_AGAIN but for a lock wait, which waited
 * inflight-wait already for a reservation still open (R_DONE, busy: in
 * flight); the rest R_DONE with *err. */
static round_end
round_failed(pg_store *ps, idem_pg_conn *c, int t, idem_err e, int *first,
    idem_err *err)
{
	int lock_wait = strcmp(c->state, "55P03") == 0;

	if (*first && c->broken && idem_pg_reopen(c) == 0) {
		*first = 0;
		return R_NOW;
	}
	*err = tx_failed(ps, c, t, e);
	if (*err != IDEM_ERR_BUSY || lock_wait)
		return R_DONE;
	return R_AGAIN;
}

/* The reserve met the committed row r (read at read_at) in c's
 * transaction: what the reservation rule says to do with it, done inside
 * the transaction.  R_DONE with *err and *out, or R_AGAIN. */
static round_end
round_found(pg_store *ps, idem_pg_conn *c, pg_reserve_args *a, pg_row *r,
    uint64_t read_at, idem_reserve_result *out, idem_err *err)
{
	char old_owner[IDEM_OWNER_MAX + 1];
	unsigned long long n;
	idem_pg_params p;
	int t, first = 0;

	*err = IDEM_OK;
	switch (idem_pgs_step_of(a, r)) {
	case IDEM_STEP_OURS:
		/* owners are fresh per attempt: not met in a transaction;
		 * ours all the same */
		return R_DONE;
	case IDEM_STEP_REUSE:
		idem_pgs_p_reuse(&p, a);
		n = tx_count(ps, c, PT_REUSE, &p, &a->rq->contended, err);
		if (*err != IDEM_OK)
			return round_failed(ps, c, PT_REUSE, *err, &first, err);
		if (n != 1) {
			tx_rollback(ps, c);
			return R_AGAIN;
		}
		out->expired_run = idem_pgs_row_tomb(r);
		if (r->state == IDEM_RECORD_IN_FLIGHT) {
			/* an abandoned reservation: whose it was */
			idem_copy_string(out->owner, sizeof(out->owner),
			    r->owner);
			idem_copy_string(out->request_id,
			    sizeof(out->request_id), r->request_id);
		}
		return R_DONE;
	case IDEM_STEP_TAKE_OVER:
		/* a committed in_flight row: a two-phase reservation
		 * (another route, or an instance before this one took over);
		 * taken over inside the transaction, its old owner's commit
		 * waits for ours, then finds another owner */
		idem_copy_string(old_owner, sizeof(old_owner), r->owner);
		idem_pgs_found_row(ps, a, r, read_at, out);
		idem_pgs_p_takeover(&p, a, old_owner);
		n = tx_count(ps, c, PT_TAKEOVER, &p, &a->rq->contended, err);
		if (*err != IDEM_OK)
			return round_failed(ps, c, PT_TAKEOVER, *err, &first,
			    err);
		if (n == 1) {
			out->outcome = IDEM_RESERVE_TAKEN_OVER;
			return R_DONE;
		}
		break;
	case IDEM_STEP_RESUME:
	case IDEM_STEP_RECONCILE: {
		/* a paused record, or one of unknown outcome to reconcile:
		 * made ours inside the transaction, with its progress */
		int resume = r->state == IDEM_RECORD_PAUSED;
		idem_reserve_outcome o = resume ? IDEM_RESERVE_RESUMED :
		    IDEM_RESERVE_RECONCILE;

		idem_copy_string(old_owner, sizeof(old_owner), r->owner);
		idem_pgs_found_row(ps, a, r, read_at, out);
		idem_pgs_p_held(&p, a, resume ? NULL : old_owner);
		t = resume ? PT_RESUME : PT_RECONCILE;
		n = tx_count(ps, c, t, &p, &a->rq->contended, err);
		if (*err != IDEM_OK)
			return round_failed(ps, c, t, *err, &first, err);
		if (n == 1) {
			out->outcome = o;
			return R_DONE;
		}
		tx_rollback(ps, c);
		return R_AGAIN;
	}
	case IDEM_STEP_UNKNOWN:
		idem_pgs_found_row(ps, a, r, read_at, out);
		out->outcome = IDEM_RESERVE_UNKNOWN;
		break;
	case IDEM_STEP_EXPIRED:
		idem_pgs_expired_row(r, out);
		break;
	case IDEM_STEP_REPLAY:
	case IDEM_STEP_IN_FLIGHT:
		idem_pgs_found_row(ps, a, r, read_at, out);
		break;
	}
	tx_rollback(ps, c);
	return R_DONE;
}

/* One round of the transactional reserve of a's key (none: no record)
 * on c: BEGIN, the INSERT, and when the row was there, what the rule
 * says.  *first is set while a dead connection may still be reopened
 * once. */
static round_end
round_run(pg_store *ps, idem_pg_conn *c, pg_reserve_args *a,
    idem_reserve_result *out, int *first, idem_err *err)
{
	uint64_t read_at;
	idem_pg_params p;
	PGresult *res;
	round_end end;
	pg_row r;

	*err = IDEM_OK;
	memset(idem_pg_db_txid(&c->db), 0, sizeof(idem_pg_txid));
	if ((*err = tx_exec(ps, c, PT_BEGIN, NULL, &a->rq->contended, NULL)) !=
	    IDEM_OK)
		return round_failed(ps, c, PT_BEGIN, *err, first, err);
	*first = 0;
	out->outcome = IDEM_RESERVE_ACQUIRED;
	/* what an earlier round found is not this one's record */
	idem_progress_clear(&out->progress);
	out->owner[0] = out->request_id[0] = '\0';
	if (a->rq->key.key_len == 0)
		return R_DONE;
	idem_pgs_p_reserve(&p, a);
	read_at = idem_boot_ms();
	if ((*err = tx_exec(ps, c, PT_RESERVE, &p, &a->rq->contended, &res)) !=
	    IDEM_OK)
		return round_failed(ps, c, PT_RESERVE, *err, first, err);
	if (PQntuples(res) == 1 && idem_pg_ll(res, 0, 0) != 0) {
		PQclear(res);
		return R_DONE;
	}
	*err = idem_pgs_row(res, 0, 1, &r);
	PQclear(res);
	if (*err != IDEM_OK) {
		tx_rollback(ps, c);
		return R_DONE;
	}
	/* committed after the statement began (the transaction it waited
	 * for): seen by the next round's */
	if (!r.found) {
		tx_rollback(ps, c);
		return R_NOW;
	}
	end = round_found(ps, c, a, &r, read_at, out, err);
	idem_pgs_row_clear(&r);
	return end;
}

static idem_err
pg_tx_begin(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    idem_reserve_result *out)
{
	idem_pg_conn *c = idem_pg_of(dc);
	pg_store *ps = (pg_store *)s;
	pg_reserve_args a = { rq, 0, 0, 0, 0 };
	int tries = 0, rounds = 0, first = 1;
	idem_err err = IDEM_OK;

	if (rq->key.key_len > 0) {
		/* a cached answer opens no transaction */
		if (idem_replay_cache_reserve(ps->cache, &rq->key, out))
			return IDEM_OK;
		idem_pgs_reserve_args(ps, &a, rq);
	}
	/* a round ends early when the row changed (again at once), or when
	 * others hold it (a deadlock: again after a random pause); each
	 * round is a new transaction */
	for (;;) {
		switch (round_run(ps, c, &a, out, &first, &err)) {
		case R_DONE:
			return err;
		case R_NOW:
			if (++rounds > PG_RESERVE_ROUNDS)
				return IDEM_ERR_BUSY;
			break;
		case R_AGAIN:
			if (++tries >= PG_CONTENTION_TRIES)
				return IDEM_ERR_BUSY;
			idem_pgs_backoff(tries);
			break;
		}
	}
}

/* Whether c's transaction was aborted by a failed statement of the
 * handler's: then rolled back and logged (what the record was to be).
 * 1 or 0. */
static int
tx_aborted(pg_store *ps, idem_pg_conn *c, const char *what)
{
	if (c->pg == NULL || c->broken ||
	    PQtransactionStatus(c->pg) != PQTRANS_INERROR)
		return 0;
	idem_log(NULL, IDEM_LOG_ERROR, "postgres: a statement of the "
	    "handler failed in its transaction, which PostgreSQL then aborts: "
	    "%s not written, rolled back (write the handler's statements so "
	    "that an expected outcome is no error: ON CONFLICT, a WHERE)",
	    what);
	tx_rollback(ps, c);
	return 1;
}

/* Runs owner-checked statement t (PT_RECORD, PT_CHECKPOINT, PT_UNKNOWN)
 * of rq's record with the leading parameters p inside c's transaction.
 * Returns IDEM_OK; else the transaction is rolled back: IDEM_ERR_NOT_FOUND
 * (not ours), IDEM_ERR_BUSY or IDEM_ERR_STORE. */
static idem_err
tx_owned(pg_store *ps, idem_pg_conn *c, idem_store_req *rq, int t,
    idem_pg_params *p, const char *what)
{
	unsigned long long n;
	idem_err err;

	if (tx_aborted(ps, c, what))
		return IDEM_ERR_STORE;
	idem_pgs_p_key(p, &rq->key);
	idem_pg_p_text(p, rq->owner);
	n = tx_count(ps, c, t, p, &rq->contended, &err);
	if (err != IDEM_OK)
		return tx_failed(ps, c, t, err);
	if (n != 1) {
		tx_rollback(ps, c);
		return IDEM_ERR_NOT_FOUND;
	}
	return IDEM_OK;
}

static idem_err
pg_tx_record(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    const idem_stored_response *resp)
{
	pg_store *ps = (pg_store *)s;
	idem_pg_params p;

	/* nothing sent: the transaction stays open for a smaller answer */
	if ((uint64_t)resp->headers_len + resp->body_len > ps->base.limits.total)
		return IDEM_ERR_TOO_LARGE;
	idem_pgs_p_commit(&p, rq, resp);
	return tx_owned(ps, idem_pg_of(dc), rq, PT_RECORD, &p, "the answer");
}

static idem_err
pg_tx_checkpoint(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    const idem_progress *pr)
{
	idem_pg_params p;

	idem_pgs_p_progress(&p, pr, rq);
	return tx_owned((pg_store *)s, idem_pg_of(dc), rq, PT_CHECKPOINT, &p,
	    "the checkpoint");
}

static idem_err
pg_tx_mark_unknown(idem_store *s, idem_db_conn *dc, idem_store_req *rq)
{
	idem_pg_params p;

	idem_pg_p_init(&p);
	idem_pg_p_ll(&p, idem_pgs_tomb_s(rq->policy));
	return tx_owned((pg_store *)s, idem_pg_of(dc), rq, PT_UNKNOWN, &p,
	    "the mark of unknown outcome");
}

/*
 * The outcome of the transaction id (on server, both from its last
 * write) whose COMMIT was lost: asked of a connection of the store's pool
 * with pg_xact_status, again while it is in progress (its server
 * finishing it) up to OUTCOME_WAIT_MS.  Returns 1 (committed), 0
 * (aborted: never will commit), -1 (cannot tell: another server answers,
 * the database is away, still in progress).
 */
static int
xact_outcome(pg_store *ps, const idem_pg_txid *id, unsigned *contended)
{
	uint64_t deadline = idem_now_ms() + OUTCOME_WAIT_MS;
	char status[16];
	idem_pg_params p;
	PGresult *res;

	idem_pg_p_init(&p);
	idem_pg_p_text(&p, id->xid);
	idem_pg_p_text(&p, id->server);
	for (;;) {
		int same;

		if (idem_pgs_run(ps, P_XACT_STATUS, &p, contended, &res, NULL) !=
		    IDEM_OK)
			return -1;
		same = PQntuples(res) == 1 && idem_pg_ll(res, 0, 0) != 0;
		status[0] = '\0';
		if (same)
			idem_pgs_str(res, 0, 1, status, sizeof(status));
		PQclear(res);
		if (!same)
			return -1;
		if (strcmp(status, "committed") == 0)
			return 1;
		if (strcmp(status, "aborted") == 0)
			return 0;
		/* "in progress", or NULL: an id too old to tell (never so
		 * soon after its COMMIT) */
		if (strcmp(status, "in progress") != 0 ||
		    idem_now_ms() >= deadline)
			return -1;
		idem_sleep_ms(OUTCOME_POLL_MS);
	}
}

/* Whether rq's record is committed under its owner: read by a
 * connection of the store's pool.  1, 0, or -1 (the read failed). */
static int
committed_ours(pg_store *ps, idem_store_req *rq)
{
	idem_err err;
	pg_row r;
	int ours;

	err = idem_pgs_read_row(ps, &rq->key, &rq->contended, &r);
	ours = r.found && r.committed && strcmp(r.owner, rq->owner) == 0;
	idem_pgs_row_clear(&r);
	return err != IDEM_OK ? -1 : ours;
}

/*
 * After c's COMMIT was lost (c cut): whether it committed.  Asked by the
 * transaction's id of its server: aborted is final (had it committed, its
 * id could not have been handed out again); committed is taken from a
 * keyed transaction only once its record says so too (a crash recovered
 * in place may have lost ours and given its id to another: only our own
 * commit under the owner proves it), and from a keyless one only when
 * no checkpoint came between (its server's strict name).  When that
 * server cannot be asked (another answers at its address: a promoted
 * standby, a restart), rq's record committed under its owner is the
 * only answer (what a promoted standby lacks was lost with the handler's
 * writes).  Returns IDEM_OK (committed), IDEM_ERR_STORE (not, or
 * *unknown set: cannot tell).
 */
static idem_err
lost_commit(pg_store *ps, idem_store_req *rq, const idem_pg_txid *id,
    int *unknown)
{
	int keyed = rq->key.key_len > 0, said = -1;

	if (id->xid[0] == '\0' && id->server[0] != '\0')
		return IDEM_OK;   /* no write: nothing to commit */
	if (id->xid[0] != '\0')
		said = xact_outcome(ps, id, &rq->contended);
	if (said == 0)
		return IDEM_ERR_STORE;
	if (said == 1 && !keyed)
		return IDEM_OK;
	if (keyed && committed_ours(ps, rq) == 1)
		return IDEM_OK;
	*unknown = 1;
	return IDEM_ERR_STORE;
}

static idem_err
pg_tx_end(idem_store *s, idem_db_conn *dc, idem_store_req *rq, int commit,
    int *unknown)
{
	idem_pg_conn *c = idem_pg_of(dc);
	unsigned faults = c->db.tx_faults;
	pg_store *ps = (pg_store *)s;
	static const idem_pg_params none = { 0 };
	PGresult *res;
	idem_pg_txid id;
	idem_err err;

	*unknown = 0;
	c->db.tx_faults = 0;
	if (!commit) {
		tx_rollback(ps, c);
		return IDEM_OK;
	}
	if (tx_aborted(ps, c, "the transaction"))
		return IDEM_ERR_STORE;
	/* a keyless transaction's id, to ask about a lost COMMIT (a
	 * failure here: no COMMIT was sent) */
	if (rq->key.key_len == 0) {
		if ((err = tx_exec(ps, c, PT_XID, NULL, &rq->contended, &res)) !=
		    IDEM_OK)
			return tx_failed(ps, c, PT_XID, err);
		if (PQntuples(res) == 1)
			read_txid(res, idem_pg_db_txid(dc));
		PQclear(res);
	}
	id = *idem_pg_db_txid(dc);
	memset(idem_pg_db_txid(dc), 0, sizeof(id));
	idem_pg_db_drop_rows(dc);
	if (faults & IDEM_TX_FAULT_DIE_IN_COMMIT) {
		/* the COMMIT reaches the server; its answer never comes back */
		(void)idem_pg_send(c, idem_pg_db_extra(dc->source, PT_COMMIT),
		    &none);
		raise(SIGKILL);
	}
	if (faults & IDEM_TX_FAULT_LOSE_BEFORE_COMMIT)
		idem_pg_cut(c);
	if (faults & IDEM_TX_FAULT_LOSE_IN_COMMIT) {
		(void)idem_pg_send(c, idem_pg_db_extra(dc->source, PT_COMMIT),
		    &none);
		idem_pg_cut(c);
	}
	if (!c->broken) {
		err = tx_exec(ps, c, PT_COMMIT, NULL, &rq->contended, &res);
		if (err == IDEM_OK) {
			/* COMMIT of an aborted transaction says ROLLBACK */
			int done = strcmp(PQcmdStatus(res), "COMMIT") == 0;

			PQclear(res);
			return done ? IDEM_OK : IDEM_ERR_STORE;
		}
		/* refused with the session kept (a serialization failure, a
		 * deferred constraint): rolled back */
		if (!c->broken)
			return tx_failed(ps, c, PT_COMMIT, err);
		idem_pg_log_error(c, "COMMIT");
	}
	/* the connection was lost during COMMIT, or the session ended (a
	 * terminated backend, a shutdown): it may or may not have
	 * committed */
	idem_pg_cut(c);
	return lost_commit(ps, rq, &id, unknown);
}

const struct idem_store_tx_ops idem_pgs_tx_ops = {
	.tx_begin = pg_tx_begin,
	.tx_record = pg_tx_record,
	.tx_checkpoint = pg_tx_checkpoint,
	.tx_mark_unknown = pg_tx_mark_unknown,
	.tx_end = pg_tx_end,
};

idem_err
idem_store_postgres_db_new(const idem_config_postgres *pg,
    const idem_store_opts *o, const char *const *sql, size_t nsql,
    unsigned size, idem_db **out)
{
	char options[512], extra[96];

	/* in whole seconds, as MySQL's idle_write_transaction_timeout: a
	 * handler between two statements gets at least inflight-ttl */
	snprintf(extra, sizeof(extra), " -c idle_in_transaction_session_"
	    "timeout=%llu", (unsigned long long)(o->inflight_ttl > 0 ?
	    (o->inflight_ttl + 999) / 1000 * 1000 : 30000));
	idem_pgs_session_options(options, sizeof(options), pg, o, extra);
	return idem_pg_db_new(pg, o->file, sql, nsql, idem_pgs_tx_sql,
	    PT_NSTMT, size, options, idem_pgs_lock_wait_ms(o), out);
}

idem_err
idem_store_postgres_db_exec(const idem_config_postgres *pg, const char *file,
    const char *sql)
{
	return idem_pg_db_exec(pg, file, sql);
}
