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
 *                                           (expired; in flight only when
 *                                           its lease lapsed too)
 *   resolve  UPDATE or DELETE ... WHERE state = 'unknown' AND owner = ?
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_store_mysql_int.h"
#include "idem_time.h"

static const idem_store_ops mysql_ops;

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

int
idem_store_mysql_reachable(const idem_config_mysql *my, const char *file)
{
	idem_mysql_pool *pool = NULL;
	idem_mysql_conn *c;
	int up = 0;

	if (idem_mysql_pool_new(my, file, NULL, 0, 1, &pool) != IDEM_OK)
		return 0;
	idem_mysql_pool_quiet(pool);
	if ((c = idem_mysql_get(pool)) != NULL) {
		up = 1;
		idem_mysql_put(pool, c);
	}
	idem_mysql_pool_free(pool);
	return up;
}

uint64_t
idem_store_mysql_settle_ms(const idem_store_opts *o)
{
	uint64_t wait = idem_my_insert_lock_wait(o) * 1000;

	return wait + idem_mysql_lock_margin_ms(wait) + 1000;
}

/* After a takeover (or resume) whose connection was lost and whose
 * attempt on a new one matched no row: the first may have been applied,
 * and the row be ours.  Reads it (causally) and makes *out outcome when
 * it is; else *out stays what the reserve found.  Returns IDEM_OK or the
 * read's error. */
static idem_err
own_takeover(mysql_store *ms, const reserve_args *a, idem_reserve_result *out,
    idem_reserve_outcome outcome)
{
	idem_err err;
	row r;

	if ((err = idem_my_read_row_with(ms, S_SELECT_CAUSAL, &a->rq->key,
	    &a->rq->contended, &r)) != IDEM_OK)
		return err;
	idem_my_row_clear(&r);
	if (r.found && (r.state == IDEM_RECORD_IN_FLIGHT ||
	    r.state == IDEM_RECORD_UNKNOWN) && strcmp(r.owner, a->rq->owner) == 0)
		out->outcome = outcome;
	return IDEM_OK;
}

/* Resumes the paused record r (this request's, to run again) or takes the
 * unknown one r to reconcile, with the statement that names its owner.
 * Returns IDEM_OK with out->outcome RESUMED or RECONCILE, or with neither
 * when the record changed meanwhile (the caller rounds again); or the
 * store's error. */
static idem_err
reserve_held(mysql_store *ms, reserve_args *a, row *r, uint64_t read_at,
    idem_reserve_result *out, int *retried)
{
	int resume = r->state == IDEM_RECORD_PAUSED;
	idem_reserve_outcome o = resume ? IDEM_RESERVE_RESUMED :
	    IDEM_RESERVE_RECONCILE;
	unsigned long long n;
	params p;
	idem_err err;

	idem_my_found_row(ms, a, r, read_at, out);
	if (resume)
		idem_my_p_resume(&p, a);
	else
		idem_my_p_reconcile(&p, a, r->owner);
	err = idem_my_exec_count(ms, resume ? S_RESUME : S_RECONCILE, &p, &n,
	    retried);
	if (*retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	if (n == 1) {
		out->outcome = o;
		return IDEM_OK;
	}
	if (*retried)
		return own_takeover(ms, a, out, o);
	return IDEM_OK;
}

/* Makes the expired (or abandoned) record r found for a's key this
 * request's, conditionally on its expiry.  Returns IDEM_OK with *n 1 and
 * out->outcome ACQUIRED (and for an abandoned reservation, whose it was),
 * or with *n 0 when the record changed meanwhile (the caller rounds
 * again); or the store's error. */
static idem_err
reserve_reuse(mysql_store *ms, reserve_args *a, const row *r,
    idem_reserve_result *out, unsigned long long *n)
{
	int retried = 0;
	params p;
	idem_err err;

	*n = 0;
	idem_my_p_reuse(&p, a);
	err = idem_my_exec_count(ms, S_REUSE, &p, n, &retried);
	if (retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK || *n != 1)
		return err;
	out->expired_run = idem_my_row_tomb(r);
	if (r->state == IDEM_RECORD_IN_FLIGHT) {
		idem_copy_string(out->owner, sizeof(out->owner), r->owner);
		idem_copy_string(out->request_id, sizeof(out->request_id),
		    r->request_id);
	}
	out->outcome = IDEM_RESERVE_ACQUIRED;
	return IDEM_OK;
}

/* Takes the stale reservation r of a's key over, naming its owner
 * (out filled from r by the caller: IN_FLIGHT).  Returns IDEM_OK with
 * out->outcome TAKEN_OVER, or IN_FLIGHT when another taker won; or the
 * store's error. */
static idem_err
reserve_takeover(mysql_store *ms, reserve_args *a, const row *r,
    idem_reserve_result *out)
{
	unsigned long long n;
	int retried = 0;
	params p;
	idem_err err;

	idem_my_p_takeover(&p, a, r->owner);
	err = idem_my_exec_count(ms, S_TAKEOVER, &p, &n, &retried);
	if (retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	if (n == 1)
		out->outcome = IDEM_RESERVE_TAKEN_OVER;
	else if (retried)
		return own_takeover(ms, a, out, IDEM_RESERVE_TAKEN_OVER);
	return IDEM_OK;
}

static idem_err
my_reserve(idem_store *s, idem_store_req *rq, idem_reserve_result *out)
{
	mysql_store *ms = (mysql_store *)s;
	const idem_store_key *k = &rq->key;
	reserve_args a;
	unsigned long long n;
	uint64_t read_at;
	int attempt, retried = 0;
	params p;
	row r;
	idem_err err;

	if (idem_replay_cache_reserve(ms->cache, k, out))
		return IDEM_OK;
	idem_my_reserve_args(ms, &a, rq);
	/* a row that disappears or changes between statements sends us
	 * round again; when it keeps doing so, others are reserving and
	 * releasing this key as fast as we look: that is contention */
	for (attempt = 0; attempt < RESERVE_ROUNDS; attempt++) {
		if (attempt > 1)
			idem_my_backoff(attempt - 1);
		/* what an earlier round found is not this one's record */
		idem_progress_clear(&out->progress);
		out->owner[0] = out->request_id[0] = '\0';
		if (attempt == 0)
			err = idem_my_batch_insert(ms, &a, &n, &retried);
		else {
			idem_my_p_insert(&p, &a);
			err = idem_my_exec_count(ms, S_INSERT, &p, &n, &retried);
		}
		/* a row of ours may land after all, whatever is said now */
		if (retried)
			rq->unanswered = 1;
		if (err != IDEM_OK)
			return err;
		if (n == 1) {
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		}
		read_at = idem_boot_ms();
		if ((err = idem_my_read_row_with(ms, S_SELECT, k, &rq->contended,
		    &r)) != IDEM_OK)
			return err;
		if (!r.found)
			continue;
		switch (idem_my_step_of(&a, &r)) {
		case IDEM_STEP_OURS:
			/* our own INSERT, applied before a lost connection */
			idem_my_row_clear(&r);
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		case IDEM_STEP_RESUME:
		case IDEM_STEP_RECONCILE:
			if ((err = reserve_held(ms, &a, &r, read_at, out,
			    &retried)) != IDEM_OK || out->outcome ==
			    IDEM_RESERVE_RESUMED || out->outcome ==
			    IDEM_RESERVE_RECONCILE)
				return err;
			/* changed meanwhile (resumed by another): round again */
			continue;
		case IDEM_STEP_UNKNOWN:
			idem_my_found_row(ms, &a, &r, read_at, out);
			out->outcome = IDEM_RESERVE_UNKNOWN;
			return IDEM_OK;
		case IDEM_STEP_EXPIRED:
			idem_my_expired_row(&r, out);
			return IDEM_OK;
		case IDEM_STEP_REUSE:
			idem_my_row_clear(&r);
			if ((err = reserve_reuse(ms, &a, &r, out, &n)) != IDEM_OK ||
			    n == 1)
				return err;
			/* changed meanwhile: round again */
			continue;
		case IDEM_STEP_TAKE_OVER:
			idem_my_found_row(ms, &a, &r, read_at, out);
			return reserve_takeover(ms, &a, &r, out);
		case IDEM_STEP_REPLAY:
		case IDEM_STEP_IN_FLIGHT:
			break;
		}
		idem_my_found_row(ms, &a, &r, read_at, out);
		return IDEM_OK;
	}
	idem_my_count_contended(ms, &rq->contended);
	return IDEM_ERR_BUSY;
}

/* The causal variant of owner-checked statement i. */
static int
causal_of(int i)
{
	switch (i) {
	case S_COMMIT:
		return S_COMMIT_CAUSAL;
	case S_RELEASE:
		return S_RELEASE_CAUSAL;
	case S_PAUSE:
		return S_PAUSE_CAUSAL;
	case S_CHECKPOINT:
		return S_CHECKPOINT_CAUSAL;
	case S_UNKNOWN:
		return S_UNKNOWN_CAUSAL;
	case S_RESOLVE:
		return S_RESOLVE_CAUSAL;
	case S_RESOLVE_RELEASE:
		return S_RESOLVE_RELEASE_CAUSAL;
	}
	return S_RENEW_CAUSAL;
}

/* What owner-checked statement i writes (idem_owned_write_applied). */
static idem_owned_write
write_of(int i)
{
	switch (i) {
	case S_COMMIT:
		return IDEM_OWNED_COMMIT;
	case S_RELEASE:
		return IDEM_OWNED_RELEASE;
	case S_PAUSE:
		return IDEM_OWNED_PAUSE;
	case S_UNKNOWN:
		return IDEM_OWNED_UNKNOWN;
	case S_RESOLVE:
		return IDEM_OWNED_RESOLVE;
	case S_RESOLVE_RELEASE:
		return IDEM_OWNED_RESOLVE_RELEASE;
	}
	return IDEM_OWNED_STAYS;
}

/*
 * The owner-checked statements: commit, release (and pause), renew,
 * checkpoint, mark unknown, and an operator's resolve.  One that matches
 * no row is run again causally before it counts as fenced: on Galera the
 * first may have run on a node that had not yet applied our reservation
 * (made through another node), and the second waits until it has.  That
 * costs a statement only where the answer is "fenced" or a lagging node.
 */
static idem_err
owned(mysql_store *ms, int i, params *p, idem_store_req *rq)
{
	const idem_store_key *k = &rq->key;
	const char *owner = rq->owner;
	unsigned long long n;
	int retried = 0, retried2 = 0;
	idem_err err;
	row r;

	p->contended = &rq->contended;
	idem_my_p_key(p, k);
	idem_my_p_str(p, owner);
	if ((err = idem_my_exec_count(ms, i, p, &n, &retried)) != IDEM_OK)
		return err;
	if (n == 1)
		return IDEM_OK;
	if ((err = idem_my_exec_count(ms, causal_of(i), p, &n, &retried2)) != IDEM_OK)
		return err;
	if (n == 1)
		return IDEM_OK;
	retried |= retried2;
	if (retried && write_of(i) != IDEM_OWNED_STAYS) {
		/* did the first attempt apply before the connection died? */
		if ((err = idem_my_read_row_with(ms, S_SELECT_CAUSAL, k,
		    &rq->contended, &r)) != IDEM_OK)
			return err;
		idem_my_row_clear(&r);
		if (idem_owned_write_applied(write_of(i), r.found, r.state,
		    r.owner, owner))
			return IDEM_OK;
	}
	return IDEM_ERR_NOT_FOUND;
}

/* Runs owner-checked statement i with p, which writes an answer of size
 * bytes.  Returns what owned returns, IDEM_ERR_TOO_LARGE also when the
 * server dropped the connection on a packet over its limit (that looks
 * like an outage; the reconnect read the new limit). */
idem_err
idem_my_owned_answer(mysql_store *ms, int i, params *p, idem_store_req *rq,
    uint64_t size)
{
	idem_err err = owned(ms, i, p, rq);

	if (err == IDEM_ERR_STORE && idem_my_over_packet(ms, size))
		err = IDEM_ERR_TOO_LARGE;
	return err;
}

static idem_err
my_commit(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	mysql_store *ms = (mysql_store *)s;
	long long life_us = (long long)rq->policy->lifetime_ms * 1000;
	uint64_t size = (uint64_t)resp->headers_len + resp->body_len;

	if (idem_my_over_packet(ms, size))
		return IDEM_ERR_TOO_LARGE;
	return idem_my_batch_commit(ms, rq, resp, &life_us, size);
}

/* Deletes rq's record, or pauses it when it has progress: the one the
 * request knows of first (a record with progress is never deleted). */
static idem_err
my_release(idem_store *s, idem_store_req *rq)
{
	int first = rq->has_progress ? S_PAUSE : S_RELEASE;
	params p;
	idem_err err;

	idem_my_p_init(&p);
	if ((err = owned((mysql_store *)s, first, &p, rq)) != IDEM_ERR_NOT_FOUND)
		return err;
	idem_my_p_init(&p);
	return owned((mysql_store *)s, first == S_PAUSE ? S_RELEASE : S_PAUSE,
	    &p, rq);
}

static idem_err
my_checkpoint(idem_store *s, idem_store_req *rq, const idem_progress *pr)
{
	params p;

	idem_my_p_progress(&p, pr, rq);
	return owned((mysql_store *)s, S_CHECKPOINT, &p, rq);
}

static idem_err
my_mark_unknown(idem_store *s, idem_store_req *rq)
{
	long long tomb_s = idem_my_tomb_s(rq->policy);
	params p;

	idem_my_p_init(&p);
	idem_my_p_ll(&p, &tomb_s);
	return owned((mysql_store *)s, S_UNKNOWN, &p, rq);
}

/* An operator's answer (resp) for rq's record of unknown outcome, or its
 * deletion (resp NULL): see the resolve op. */
static idem_err
my_resolve(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	mysql_store *ms = (mysql_store *)s;
	long long status, tomb_s;
	uint64_t size;
	params p;

	idem_my_p_init(&p);
	if (resp == NULL)
		return owned(ms, S_RESOLVE_RELEASE, &p, rq);
	status = resp->status;
	size = (uint64_t)resp->headers_len + resp->body_len;
	if (idem_my_over_packet(ms, size))
		return IDEM_ERR_TOO_LARGE;
	idem_my_p_ll(&p, &status);
	idem_my_p_blob(&p, resp->headers != NULL ? resp->headers : "",
	    resp->headers_len);
	idem_my_p_blob(&p, resp->body != NULL ? resp->body : "",
	    resp->body_len);
	tomb_s = idem_my_tomb_s(rq->policy);
	idem_my_p_ll(&p, &tomb_s);
	return idem_my_owned_answer(ms, S_RESOLVE, &p, rq, size);
}

static idem_err
my_renew(idem_store *s, idem_store_req *rq)
{
	params p;

	idem_my_p_init(&p);
	idem_my_p_lease(&p, rq);
	return owned((mysql_store *)s, S_RENEW, &p, rq);
}

static idem_err
my_purge(idem_store *s, unsigned max, unsigned *purged)
{
	long long lim = max, longest_us = IDEM_LEASE_LONGEST_MS * 1000,
	    abandon_us = (long long)s->abandon_ms * 1000;
	unsigned long long n = 0, entombed = 0;
	params p;
	idem_err err;

	idem_my_p_init(&p);
	idem_my_p_ll(&p, &lim);
	if ((err = idem_my_exec_count((mysql_store *)s, S_ENTOMB, &p, &entombed,
	    NULL)) != IDEM_OK)
		return err;
	/* up to max in all: a full batch says that more may be left */
	*purged = (unsigned)entombed;
	if ((lim = (long long)max - (long long)entombed) <= 0)
		return IDEM_OK;
	idem_my_p_init(&p);
	idem_my_p_ll(&p, &longest_us);
	idem_my_p_ll(&p, &abandon_us);
	idem_my_p_ll(&p, &lim);
	err = idem_my_exec_count((mysql_store *)s, S_PURGE, &p, &n, NULL);
	*purged = (unsigned)(n + entombed);
	return err;
}

/* The store's ping: the schema's version read as the store reads its rows
 * (a connection of the pool, opened when none is), so that a missing
 * table, a Galera node that refuses queries (1047) or a database down
 * fails it as they fail a reservation (mysql_ping would pass the first
 * two).  IDEM_OK or IDEM_ERR_STORE. */
static idem_err
my_ping(idem_store *s)
{
	long long version, unused;
	idem_err err;

	err = idem_my_select_ints((mysql_store *)s, S_VERSION, &version,
	    &unused);
	if (err == IDEM_OK && version != SCHEMA_VERSION)
		err = IDEM_ERR_STORE;
	return err != IDEM_OK ? IDEM_ERR_STORE : IDEM_OK;
}

static void
my_close(idem_store *s)
{
	mysql_store *ms = (mysql_store *)s;

	idem_mysql_pool_free(ms->pool);
	idem_replay_cache_free(ms->cache);
	idem_my_batch_free(ms->batch);
	free(ms);
}

static const idem_store_ops mysql_ops = {
	.name = "mysql",
	.reserve = my_reserve,
	.commit = my_commit,
	.release = my_release,
	.renew = my_renew,
	.checkpoint = my_checkpoint,
	.mark_unknown = my_mark_unknown,
	.purge = my_purge,
	.stats = idem_my_stats,
	.close = my_close,
	.release_prefix = idem_my_release_prefix,
	.lookup = idem_my_lookup,
	.census = idem_my_census,
	.list_unknown = idem_my_list_unknown,
	.resolve = my_resolve,
	.ping = my_ping,
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

/* Makes ms a store set aside (idem_store_is_aside): no pool, every
 * operation IDEM_ERR_STORE.  Returns IDEM_OK with *out. */
static idem_err
set_aside(mysql_store *ms, idem_store **out)
{
	idem_mysql_pool_free(ms->pool);
	ms->pool = NULL;
	ms->base.aside = 1;
	*out = &ms->base;
	return IDEM_OK;
}

idem_err
idem_store_mysql_new(const idem_config_mysql *my, const idem_store_opts *o,
    idem_store **out)
{
	mysql_store *ms;
	long long version = 0, unused = 0;
	idem_err err;

	if ((ms = calloc(1, sizeof(*ms))) == NULL)
		return IDEM_ERR_NOMEM;
	ms->base.ops = &mysql_ops;
	ms->base.tx = &idem_my_tx_ops;
	ms->base.settle_ms = idem_store_mysql_settle_ms(o);
	ms->base.abandon_ms = IDEM_ABANDON_DEFAULT_MS;
	idem_my_store_sql(my, ms->stmts);
	idem_my_lock_wait_insert(my, o, ms->insert, sizeof(ms->insert));
	ms->stmts[S_INSERT] = ms->insert;
	idem_my_set_lock_waits(o, ms->lock_wait_ms);
	if (o->aside)
		return set_aside(ms, out);
	err = idem_mysql_pool_new(my, o->file, ms->stmts, NSTMT, o->pool_size > 0
	    ? o->pool_size : my->pool_size, &ms->pool);
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
	if (idem_my_select_ints(ms, S_VERSION, &version, &unused) != IDEM_OK) {
		/* no connection at all (the pool reads max_allowed_packet
		 * as each connects): the database is not up yet */
		if (o->may_wait && idem_mysql_max_packet(ms->pool) == 0) {
			idem_log(NULL, IDEM_LOG_WARN, "mysql store unavailable: "
			    "database %s cannot be reached (see the error "
			    "above); serving anyway: keyed routes answer 503 "
			    "IDEMPOTENCY_STORE_UNAVAILABLE until it can be",
			    my->database);
			return set_aside(ms, out);
		}
		/* the hint only where it helps: a missing table
		 * (ER_NO_SUCH_TABLE), not a refused login or a lost server */
		if (idem_mysql_pool_last_errno(ms->pool) == 1146)
			idem_log(NULL, IDEM_LOG_ERROR, "mysql store: database %s "
			    "lacks the tables of idemfcgi: apply " IDEM_SCHEMADIR
			    "/" SCHEMA_FILE " and the files after it, in order",
			    my->database);
		else
			idem_log(NULL, IDEM_LOG_ERROR, "mysql store: cannot use "
			    "database %s (see the error above)",
			    my->database);
		my_close(&ms->base);
		return IDEM_ERR_STORE;
	}
	if (version != SCHEMA_VERSION) {
		idem_log(NULL, IDEM_LOG_ERROR, "mysql store: database %s has "
		    "schema version %lld, this idemfcgi needs %d: apply the "
		    "files of " IDEM_SCHEMADIR "/ after version %lld, in order, "
		    "up to " SCHEMA_LAST, my->database, version, SCHEMA_VERSION,
		    version);
		my_close(&ms->base);
		return IDEM_ERR_STORE;
	}
	if ((err = set_limits(ms)) != IDEM_OK ||
	    (err = idem_replay_cache_new(my->replay_cache, &ms->cache))
	    != IDEM_OK || (my->batch &&
	    (err = idem_my_batch_new(ms, my, &ms->batch)) != IDEM_OK)) {
		my_close(&ms->base);
		return err;
	}
	ms->base.batch = idem_my_batch_engine(ms->batch);
	*out = &ms->base;
	return IDEM_OK;
}
