/*
 * idem_store_mysql_tx.c - the MySQL store's operations of transactional
 * routes (DESIGN.md 2.7): the reservation inside the handler's transaction,
 * the record of its answer, COMMIT or ROLLBACK, and the outcome of a lost
 * COMMIT read on the transaction's own node.
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
#include "idem_store_mysql_int.h"
#include "idem_time.h"

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
enum { T_INSERT, T_SELECT, T_TAKEOVER, T_REUSE, T_COMMIT, T_OUTCOME,
    T_RESUME, T_CHECKPOINT, T_UNKNOWN, T_RECONCILE, T_ADOPT, NTX };

/* How long T_OUTCOME waits for the transaction it asks about to end. */
#define OUTCOME_LOCK_WAIT_S 2
#define STR_(x) #x
#define STR(x) STR_(x)

idem_err
idem_store_mysql_tx_prepare(const idem_config_mysql *my,
    const idem_store_opts *o, idem_mysql_pool *pool)
{
	char insert[1024], init[128];
	const char *tsql[NTX];

	/* a transaction left idle longer than inflight-ttl is a hung or
	 * partitioned node's, as far as anyone can tell: the server rolls
	 * it back and frees its key, as a takeover would on the two-phase
	 * path (MariaDB 10.3+; a plain user of the pool has no open write
	 * transaction when idle) */
	snprintf(init, sizeof(init), "SET SESSION idle_write_transaction_timeout "
	    "= %llu", (unsigned long long)(o->inflight_ttl + 999) / 1000);
	if (idem_mysql_pool_init(pool, init) != IDEM_OK)
		return IDEM_ERR_NOMEM;
	idem_my_lock_wait_insert(my, o, insert, sizeof(insert));
	tsql[T_INSERT] = insert;
	/* a locking read (the INSERT holds that lock already) opens no
	 * snapshot: the handler's first read does, seeing what committed
	 * before it */
	tsql[T_SELECT] = my->causal_reads ? CAUSAL SELECT_LOCKED :
	    SELECT_LOCKED;
	tsql[T_TAKEOVER] = idem_my_sql[S_TAKEOVER];
	tsql[T_REUSE] = idem_my_sql[S_REUSE];
	tsql[T_COMMIT] = idem_my_sql[S_COMMIT];
	tsql[T_RESUME] = idem_my_sql[S_RESUME];
	tsql[T_CHECKPOINT] = idem_my_sql[S_CHECKPOINT];
	tsql[T_UNKNOWN] = idem_my_sql[S_UNKNOWN];
	tsql[T_RECONCILE] = idem_my_sql[S_RECONCILE];
	/* a reservation committed on its own, read without a lock once this
	 * node has applied it (causal whatever causal-reads says: it may
	 * have been made through another node a moment ago) */
	tsql[T_ADOPT] = CAUSAL SELECT_ROW;
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
 * Returns IDEM_ERR_BUSY (a deadlock, a lock wait: contention, added to
 * rq's count) or IDEM_ERR_STORE (logged). */
static idem_err
tx_failed(mysql_store *ms, idem_mysql_conn *c, idem_store_req *rq, int i,
    unsigned err)
{
	int contended = idem_my_contention(ms, &rq->contended, err);

	idem_mysql_check(c, err);
	if (!c->broken && i >= 0 && !contended)
		idem_mysql_log_error(ms->pool, "transaction", c->extra[i]);
	tx_rollback(c);
	return contended ? IDEM_ERR_BUSY : IDEM_ERR_STORE;
}

/* How a round of the transactional reserve ended: with its answer, or
 * to be run again after a pause (contention, a row that vanished), or at
 * once (a connection that died idle in the pool, reopened). */
typedef enum round_end { R_DONE, R_AGAIN, R_NOW } round_end;

/* Statement i of the reserve's transaction on c failed with e: a
 * connection that died idle in the pool (the round's first statement,
 * once: *first) is reopened (R_NOW); else the transaction is rolled back,
 * and contention is R_AGAIN but for the INSERT's lock wait, which waited
 * inflight-wait already (R_DONE, busy: in flight); the rest R_DONE with
 * *err. */
static round_end
round_failed(mysql_store *ms, idem_mysql_conn *c, const reserve_args *a,
    int i, unsigned e, int *first, idem_err *err)
{
	if (*first && c->broken && idem_mysql_reconnect(c) == 0) {
		*first = 0;
		return R_NOW;
	}
	*err = tx_failed(ms, c, a->rq, i, e);
	if (*err != IDEM_ERR_BUSY || (i == T_INSERT && e == 1205))
		return R_DONE;
	return R_AGAIN;
}

/* The reserve found the row r (read at read_at) in c's transaction: what
 * the reservation rule says to do with it, done.  R_DONE with *err and
 * *out, or R_AGAIN. */
static round_end
round_found(mysql_store *ms, idem_mysql_conn *c, const reserve_args *a,
    row *r, uint64_t read_at, idem_reserve_result *out, idem_err *err)
{
	unsigned long long n = 0;
	int first = 0;
	unsigned e;
	params p;

	*err = IDEM_OK;
	switch (idem_my_step_of(a, r)) {
	case IDEM_STEP_OURS:
		/* owners are fresh per attempt: not met in a transaction;
		 * ours all the same */
		idem_my_row_clear(r);
		return R_DONE;
	case IDEM_STEP_REUSE:
		idem_my_row_clear(r);
		idem_my_p_reuse(&p, a);
		if ((e = tx_exec(c, T_REUSE, &p, &n)) != 0)
			return round_failed(ms, c, a, T_REUSE, e, &first, err);
		out->expired_run = n == 1 && idem_my_row_tomb(r);
		if (n == 1 && r->state == IDEM_RECORD_IN_FLIGHT) {
			/* an abandoned reservation: whose it was */
			idem_copy_string(out->owner, sizeof(out->owner),
			    r->owner);
			idem_copy_string(out->request_id,
			    sizeof(out->request_id), r->request_id);
		}
		if (n == 1)
			return R_DONE;
		tx_rollback(c);
		return R_AGAIN;
	case IDEM_STEP_TAKE_OVER:
		/* an in_flight row here is committed: a two-phase reservation
		 * (another route, or a node before this one took over); taken
		 * over inside the transaction, its old owner's commit waits
		 * for ours, then finds another owner */
		idem_my_found_row(ms, a, r, read_at, out);
		idem_my_p_takeover(&p, a, r->owner);
		if ((e = tx_exec(c, T_TAKEOVER, &p, &n)) != 0)
			return round_failed(ms, c, a, T_TAKEOVER, e, &first,
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
		int t = resume ? T_RESUME : T_RECONCILE;
		idem_my_found_row(ms, a, r, read_at, out);
		if (resume)
			idem_my_p_resume(&p, a);
		else
			idem_my_p_reconcile(&p, a, r->owner);
		if ((e = tx_exec(c, t, &p, &n)) != 0)
			return round_failed(ms, c, a, t, e, &first, err);
		if (n == 1) {
			out->outcome = o;
			return R_DONE;
		}
		tx_rollback(c);
		return R_AGAIN;
	}
	case IDEM_STEP_UNKNOWN:
		idem_my_found_row(ms, a, r, read_at, out);
		out->outcome = IDEM_RESERVE_UNKNOWN;
		break;
	case IDEM_STEP_EXPIRED:
		idem_my_expired_row(r, out);
		break;
	case IDEM_STEP_REPLAY:
	case IDEM_STEP_IN_FLIGHT:
		idem_my_found_row(ms, a, r, read_at, out);
		break;
	}
	tx_rollback(c);
	return R_DONE;
}

/* One round of the transactional reserve of a's key (none: no record) on c:
 * autocommit off, the INSERT IGNORE that opens the transaction, and when
 * the row was there, its locking read and what the rule says.  *first is
 * set while a dead connection may still be reopened once. */
static round_end
round_run(mysql_store *ms, idem_mysql_conn *c, const reserve_args *a,
    idem_reserve_result *out, int *first, idem_err *err)
{
	unsigned long long n = 0;
	uint64_t read_at;
	unsigned e;
	params p;
	row r;

	/* autocommit off: the INSERT opens the transaction (no START
	 * TRANSACTION round trip), and nothing after a rollback the server
	 * makes on its own (a deadlock) ever commits alone */
	if (idem_mysql_tx_mode(c) != 0) {
		if (*first && c->broken && idem_mysql_reconnect(c) == 0) {
			*first = 0;
			return R_NOW;
		}
		idem_mysql_log_conn_error(ms->pool, "autocommit", c->m);
		*err = IDEM_ERR_STORE;
		return R_DONE;
	}
	out->outcome = IDEM_RESERVE_ACQUIRED;
	*err = IDEM_OK;
	/* what an earlier round found is not this one's record */
	idem_progress_clear(&out->progress);
	out->owner[0] = out->request_id[0] = '\0';
	if (a->rq->key.key_len == 0)
		return R_DONE;
	idem_my_p_insert(&p, a);
	(void)idem_mysql_expect_lock_wait(c, ms->lock_wait_ms[S_INSERT]);
	e = tx_exec(c, T_INSERT, &p, &n);
	if (!c->broken)
		(void)idem_mysql_expect_lock_wait(c, 0);
	if (e != 0)
		return round_failed(ms, c, a, T_INSERT, e, first, err);
	*first = 0;
	if (n == 1)
		return R_DONE;
	/* the INSERT found the row and holds a shared lock on it: this read
	 * sees its latest committed state */
	idem_my_p_init(&p);
	idem_my_p_key(&p, &a->rq->key);
	read_at = idem_boot_ms();
	if ((e = tx_exec(c, T_SELECT, &p, NULL)) != 0)
		return round_failed(ms, c, a, T_SELECT, e, first, err);
	if ((*err = idem_my_fetch_row(ms, c, c->extra[T_SELECT], &r)) !=
	    IDEM_OK) {
		tx_rollback(c);
		return R_DONE;
	}
	if (!r.found) {
		tx_rollback(c);
		return R_AGAIN;
	}
	return round_found(ms, c, a, &r, read_at, out, err);
}

static idem_err
idem_my_tx_begin(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    idem_reserve_result *out)
{
	idem_mysql_conn *c = idem_mysql_of(dc);
	mysql_store *ms = (mysql_store *)s;
	reserve_args a = { rq, 0, 0, 0, 0, 0 };
	int attempt, first = 1;
	idem_err err = IDEM_OK;

	if (rq->key.key_len > 0) {
		/* a cached answer opens no transaction */
		if (idem_replay_cache_reserve(ms->cache, &rq->key, out))
			return IDEM_OK;
		idem_my_reserve_args(ms, &a, rq);
	}
	/* a round ends early when the row vanished or changed, or when
	 * others hold it (a lock wait, a deadlock: racing takers each hold
	 * a shared lock and want an exclusive one); after a random pause
	 * the next round starts a new transaction */
	for (attempt = 0; attempt < CONTENTION_TRIES; attempt++) {
		if (attempt > 0)
			idem_my_backoff(attempt);
		switch (round_run(ms, c, &a, out, &first, &err)) {
		case R_DONE:
			return err;
		case R_NOW:
			attempt--;
			break;
		case R_AGAIN:
			break;
		}
	}
	return IDEM_ERR_BUSY;
}

/*
 * Protocol (a) of DESIGN.md 2.7: rq's owner holds the key by a
 * reservation committed on its own.  Opens c's transaction (autocommit
 * off) with a causal read of the record, which does not lock it (the
 * lease thread renews it meanwhile) and sees a reservation made through
 * another node; its snapshot is the handler's.  A connection that died
 * idle in the pool is reopened once.
 */
static idem_err
idem_my_tx_adopt(idem_store *s, idem_db_conn *dc, idem_store_req *rq)
{
	idem_mysql_conn *c = idem_mysql_of(dc);
	mysql_store *ms = (mysql_store *)s;
	int first = 1, ours;
	idem_err err;
	unsigned e;
	params p;
	row r;

	for (;;) {
		/* the lease thread renews the record, and checkpoints write
		 * it, while this transaction is open: under snapshot
		 * isolation its answer's write would be refused */
		if (idem_mysql_snapshot_off(c) != 0 ||
		    idem_mysql_tx_mode(c) != 0) {
			if (first && c->broken && idem_mysql_reconnect(c) == 0) {
				first = 0;
				continue;
			}
			idem_mysql_log_conn_error(ms->pool, "autocommit", c->m);
			return IDEM_ERR_STORE;
		}
		idem_my_p_init(&p);
		idem_my_p_key(&p, &rq->key);
		if ((e = tx_exec(c, T_ADOPT, &p, NULL)) == 0)
			break;
		if (first && c->broken && idem_mysql_reconnect(c) == 0) {
			first = 0;
			continue;
		}
		return tx_failed(ms, c, rq, T_ADOPT, e);
	}
	if ((err = idem_my_fetch_row(ms, c, c->extra[T_ADOPT], &r)) !=
	    IDEM_OK) {
		tx_rollback(c);
		return err;
	}
	ours = r.found && (r.state == IDEM_RECORD_IN_FLIGHT ||
	    r.state == IDEM_RECORD_UNKNOWN) && strcmp(r.owner, rq->owner) == 0;
	idem_my_row_clear(&r);
	if (!ours) {
		tx_rollback(c);
		return IDEM_ERR_NOT_FOUND;
	}
	return IDEM_OK;
}

/* Runs owner-checked statement i (T_CHECKPOINT, T_UNKNOWN) of rq's record
 * with the leading parameters p inside c's transaction.  Returns IDEM_OK;
 * else the transaction is rolled back: IDEM_ERR_NOT_FOUND (not ours),
 * IDEM_ERR_BUSY or IDEM_ERR_STORE. */
static idem_err
tx_owned(mysql_store *ms, idem_mysql_conn *c, idem_store_req *rq, int i,
    params *p)
{
	unsigned long long n = 0;
	unsigned e;

	idem_my_p_key(p, &rq->key);
	idem_my_p_str(p, rq->owner);
	if ((e = tx_exec(c, i, p, &n)) != 0)
		return tx_failed(ms, c, rq, i, e);
	if (n != 1) {
		tx_rollback(c);
		return IDEM_ERR_NOT_FOUND;
	}
	return IDEM_OK;
}

static idem_err
idem_my_tx_checkpoint(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    const idem_progress *pr)
{
	idem_mysql_conn *c = idem_mysql_of(dc);
	params p;

	idem_my_p_progress(&p, pr, rq);
	return tx_owned((mysql_store *)s, c, rq, T_CHECKPOINT, &p);
}

static idem_err
idem_my_tx_mark_unknown(idem_store *s, idem_db_conn *dc, idem_store_req *rq)
{
	idem_mysql_conn *c = idem_mysql_of(dc);
	long long tomb_s = idem_my_tomb_s(rq->policy);
	params p;

	idem_my_p_init(&p);
	idem_my_p_ll(&p, &tomb_s);
	return tx_owned((mysql_store *)s, c, rq, T_UNKNOWN, &p);
}

static idem_err
idem_my_tx_record(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    const idem_stored_response *resp)
{
	idem_mysql_conn *c = idem_mysql_of(dc);
	mysql_store *ms = (mysql_store *)s;
	long long status = resp->status;
	long long life_us = (long long)rq->policy->lifetime_ms * 1000;
	long long tomb_s = idem_my_tomb_s(rq->policy);
	unsigned long long n;
	unsigned e;
	params p;

	if (idem_my_over_packet(ms, (uint64_t)resp->headers_len + resp->body_len))
		return IDEM_ERR_TOO_LARGE;
	idem_my_p_answer(&p, &status, resp, &tomb_s, &life_us);
	idem_my_p_key(&p, &rq->key);
	idem_my_p_str(&p, rq->owner);
	if ((e = tx_exec(c, T_COMMIT, &p, &n)) != 0) {
		/* the statement was undone; the transaction stays open for
		 * a smaller answer */
		if (idem_my_permanent_error(e)) {
			idem_mysql_log_error(ms->pool, "transaction",
			    c->extra[T_COMMIT]);
			return IDEM_ERR_TOO_LARGE;
		}
		return tx_failed(ms, c, rq, T_COMMIT, e);
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
	idem_my_p_init(&p);
	idem_my_p_key(&p, k);
	(void)idem_mysql_expect_lock_wait(c, OUTCOME_LOCK_WAIT_S * 1000);
	if ((e = tx_exec(c, T_OUTCOME, &p, NULL)) != 0) {
		idem_mysql_log_error(ms->pool, "reading a lost COMMIT's outcome",
		    c->extra[T_OUTCOME]);
		return -1;
	}
	if (idem_my_fetch_row(ms, c, c->extra[T_OUTCOME], &r) != IDEM_OK)
		return -1;
	rc = r.found && r.committed && strcmp(r.owner, owner) == 0;
	idem_my_row_clear(&r);
	if (!c->broken)
		(void)idem_mysql_expect_lock_wait(c, 0);
	return rc;
}

static idem_err
idem_my_tx_end(idem_store *s, idem_db_conn *dc, idem_store_req *rq,
    int commit, int *unknown)
{
	idem_mysql_conn *c = idem_mysql_of(dc);
	unsigned faults = c->db.tx_faults;
	mysql_store *ms = (mysql_store *)s;
	unsigned e;
	idem_err err;
	row r;

	*unknown = 0;
	c->db.tx_faults = 0;
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
		return tx_failed(ms, c, rq, -1, e);
	}
	/* the connection was lost during COMMIT, or COMMIT failed in a way
	 * that does not say what became of it (killed, an error after the
	 * engine committed): it may or may not have committed.  Once the
	 * server sees the connection gone it finishes either way; a locking
	 * read waits for that and reads the truth. */
	if (!c->broken)
		idem_mysql_log_conn_error(ms->pool, "COMMIT", c->m);
	tx_cut(c);
	if (rq->key.key_len == 0) {
		*unknown = 1;
		return IDEM_ERR_STORE;
	}
	switch (outcome_here(ms, c, &rq->key, rq->owner)) {
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
	err = idem_my_read_row_with(ms, S_SELECT_LOCKED, &rq->key,
	    &rq->contended, &r);
	idem_my_row_clear(&r);
	if (err == IDEM_OK && r.found && r.committed &&
	    strcmp(r.owner, rq->owner) == 0)
		return IDEM_OK;
	*unknown = 1;
	return IDEM_ERR_STORE;
}

const struct idem_store_tx_ops idem_my_tx_ops = {
	.tx_begin = idem_my_tx_begin,
	.tx_adopt = idem_my_tx_adopt,
	.tx_record = idem_my_tx_record,
	.tx_checkpoint = idem_my_tx_checkpoint,
	.tx_mark_unknown = idem_my_tx_mark_unknown,
	.tx_end = idem_my_tx_end,
};
