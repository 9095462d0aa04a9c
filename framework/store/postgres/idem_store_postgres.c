/*
 * idem_store_postgres.c - the PostgreSQL store: one row per (scope, key)
 * in idempotency_keys (schema/postgres/), every operation a prepared
 * statement, every time from the database's clock.
 *
 * Statements per operation:
 *   reserve  one: INSERT ... ON CONFLICT DO NOTHING with the row it met;
 *            only for a stale, paused, unknown or expired row, one
 *            conditional UPDATE naming the old owner or the expiry
 *   commit   UPDATE ... WHERE owner = $n    release  DELETE ... owner = $n
 *   renew    UPDATE ... WHERE owner = $n    purge    DELETE of a bounded
 *                                           batch of expired keys
 *   resolve  UPDATE or DELETE ... WHERE state = 'unknown' AND owner = $n
 *
 * A statement whose session was lost (a restarted server, a failover) is
 * sent once more on a new connection; the owner checks make that safe,
 * and an owner-checked write that then matches nothing reads the row to
 * learn whether the first was applied.  Deadlocks and serialization
 * failures are contention (IDEM_ERR_BUSY) after a few retries; a lock
 * wait (lock_timeout) at once.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_store_pg_int.h"
#include "idem_time.h"

static const idem_store_ops pg_ops;

int
idem_store_postgres_lose_answer(idem_store *s, const char *op)
{
	static const struct { const char *name; int stmt; } ops[] = {
		{ "insert", P_RESERVE }, { "takeover", P_TAKEOVER },
		{ "commit", P_COMMIT }, { "release", P_RELEASE },
		{ "renew", P_RENEW },
	};
	size_t i;

	if (s == NULL || s->ops != &pg_ops)
		return -1;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(ops[i].name, op) == 0) {
			atomic_store(&((pg_store *)s)->lose_answer,
			    ops[i].stmt + 1);
			return 0;
		}
	return -1;
}

uint64_t
idem_pgs_lock_wait_ms(const idem_store_opts *o)
{
	return o->inflight_wait > 1000 ? o->inflight_wait : 1000;
}

/* The statement_timeout of a session of pg and o, in ms. */
static uint64_t
statement_ms(const idem_config_postgres *pg, const idem_store_opts *o)
{
	uint64_t w = pg->write_timeout > 0 ? pg->write_timeout : 5000,
	    r = pg->read_timeout > 0 ? pg->read_timeout : 5000;

	return w + r + idem_pgs_lock_wait_ms(o);
}

uint64_t
idem_store_postgres_settle_ms(const idem_config_postgres *pg,
    const idem_store_opts *o)
{
	return statement_ms(pg, o) + 2000;
}

unsigned long long
idem_store_postgres_statements(idem_store *s)
{
	if (s == NULL || s->ops != &pg_ops)
		return 0;
	return atomic_load(&((pg_store *)s)->sent);
}

int
idem_store_postgres_reachable(const idem_config_postgres *pg, const char *file)
{
	idem_pg_pool *pool = NULL;
	idem_pg_conn *c;
	int up = 0;

	if (idem_pg_pool_new(pg, file, NULL, 0, 1, NULL, &pool) != IDEM_OK)
		return 0;
	idem_pg_pool_quiet(pool);
	if ((c = idem_pg_get(pool)) != NULL) {
		up = 1;
		idem_pg_put(pool, c);
	}
	idem_pg_pool_free(pool);
	return up;
}

/* After a takeover, resume or reconcile whose answer was lost and whose
 * second attempt matched no row: the first may have been applied.  Reads
 * the row and makes out->outcome outcome when it is ours.  Returns
 * IDEM_OK or the read's error. */
static idem_err
own_takeover(pg_store *ps, const pg_reserve_args *a, idem_reserve_result *out,
    idem_reserve_outcome outcome)
{
	idem_err err;
	pg_row r;

	if ((err = idem_pgs_read_row(ps, &a->rq->key, &a->rq->contended, &r)) !=
	    IDEM_OK)
		return err;
	idem_pgs_row_clear(&r);
	if (r.found && (r.state == IDEM_RECORD_IN_FLIGHT ||
	    r.state == IDEM_RECORD_UNKNOWN) && strcmp(r.owner, a->rq->owner) == 0)
		out->outcome = outcome;
	return IDEM_OK;
}

/* Resumes the paused record r or takes the unknown one r to reconcile.
 * Returns IDEM_OK with out->outcome RESUMED or RECONCILE, or neither when
 * the record changed meanwhile (the caller rounds again); or the store's
 * error. */
static idem_err
reserve_held(pg_store *ps, pg_reserve_args *a, pg_row *r, uint64_t read_at,
    idem_reserve_result *out)
{
	int resume = r->state == IDEM_RECORD_PAUSED, retried = 0;
	idem_reserve_outcome o = resume ? IDEM_RESERVE_RESUMED :
	    IDEM_RESERVE_RECONCILE;
	char old_owner[IDEM_OWNER_MAX + 1];
	unsigned long long n;
	idem_pg_params p;
	idem_err err;

	idem_copy_string(old_owner, sizeof(old_owner), r->owner);
	idem_pgs_found_row(ps, a, r, read_at, out);
	idem_pgs_p_held(&p, a, resume ? NULL : old_owner);
	err = idem_pgs_count(ps, resume ? P_RESUME : P_RECONCILE, &p,
	    &a->rq->contended, &n, &retried);
	if (retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	if (n == 1) {
		out->outcome = o;
		return IDEM_OK;
	}
	if (retried)
		return own_takeover(ps, a, out, o);
	return IDEM_OK;
}

/* Makes the expired (or abandoned) record r this request's, conditionally
 * on its expiry.  Returns IDEM_OK with *n 1 and out->outcome ACQUIRED
 * (for an abandoned reservation, naming whose it was), or *n 0 when the
 * record changed meanwhile; or the store's error. */
static idem_err
reserve_reuse(pg_store *ps, pg_reserve_args *a, const pg_row *r,
    idem_reserve_result *out, unsigned long long *n)
{
	int retried = 0;
	idem_pg_params p;
	idem_err err;

	idem_pgs_p_reuse(&p, a);
	err = idem_pgs_count(ps, P_REUSE, &p, &a->rq->contended, n, &retried);
	if (retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK || *n != 1)
		return err;
	out->expired_run = idem_pgs_row_tomb(r);
	if (r->state == IDEM_RECORD_IN_FLIGHT) {
		idem_copy_string(out->owner, sizeof(out->owner), r->owner);
		idem_copy_string(out->request_id, sizeof(out->request_id),
		    r->request_id);
	}
	out->outcome = IDEM_RESERVE_ACQUIRED;
	return IDEM_OK;
}

/* Takes the stale reservation of old_owner over (out filled from its row
 * by the caller: IN_FLIGHT).  Returns IDEM_OK with out->outcome
 * TAKEN_OVER, or still IN_FLIGHT when another taker won; or the store's
 * error. */
static idem_err
reserve_takeover(pg_store *ps, pg_reserve_args *a, const char *old_owner,
    idem_reserve_result *out)
{
	unsigned long long n;
	int retried = 0;
	idem_pg_params p;
	idem_err err;

	idem_pgs_p_takeover(&p, a, old_owner);
	err = idem_pgs_count(ps, P_TAKEOVER, &p, &a->rq->contended, &n,
	    &retried);
	if (retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	if (n == 1)
		out->outcome = IDEM_RESERVE_TAKEN_OVER;
	else if (retried)
		return own_takeover(ps, a, out, IDEM_RESERVE_TAKEN_OVER);
	return IDEM_OK;
}

idem_err
idem_pgs_insert_or_read(pg_store *ps, pg_reserve_args *a, int *inserted,
    pg_row *r)
{
	int retried = 0;
	idem_pg_params p;
	PGresult *res;
	idem_err err;

	memset(r, 0, sizeof(*r));
	*inserted = 0;
	idem_pgs_p_reserve(&p, a);
	err = idem_pgs_run(ps, P_RESERVE, &p, &a->rq->contended, &res,
	    &retried);
	/* a row of ours may land after all, whatever is said now */
	if (retried)
		a->rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	*inserted = PQntuples(res) == 1 && idem_pg_ll(res, 0, 0) != 0;
	err = *inserted ? IDEM_OK : idem_pgs_row(res, 0, 1, r);
	PQclear(res);
	return err;
}

static idem_err
pg_reserve(idem_store *s, idem_store_req *rq, idem_reserve_result *out)
{
	pg_store *ps = (pg_store *)s;
	pg_reserve_args a;
	unsigned long long n;
	uint64_t read_at;
	int attempt, inserted;
	char old_owner[IDEM_OWNER_MAX + 1];
	pg_row r;
	idem_err err;

	if (idem_replay_cache_reserve(ps->cache, &rq->key, out))
		return IDEM_OK;
	idem_pgs_reserve_args(ps, &a, rq);
	/* a row that disappears or changes between statements sends us
	 * round again; when it keeps doing so, others are reserving and
	 * releasing this key as fast as we look: that is contention */
	for (attempt = 0; attempt < PG_RESERVE_ROUNDS; attempt++) {
		if (attempt > 1)
			idem_pgs_backoff(attempt - 1);
		idem_progress_clear(&out->progress);
		out->owner[0] = out->request_id[0] = '\0';
		read_at = idem_boot_ms();
		if ((err = idem_pgb_reserve(ps, &a, &inserted, &r)) != IDEM_OK)
			return err;
		if (inserted) {
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		}
		/* committed after the statement began: read it next round */
		if (!r.found)
			continue;
		switch (idem_pgs_step_of(&a, &r)) {
		case IDEM_STEP_OURS:
			/* our own INSERT, applied before a lost answer */
			idem_pgs_row_clear(&r);
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		case IDEM_STEP_RESUME:
		case IDEM_STEP_RECONCILE:
			err = reserve_held(ps, &a, &r, read_at, out);
			idem_pgs_row_clear(&r);
			if (err != IDEM_OK || out->outcome ==
			    IDEM_RESERVE_RESUMED || out->outcome ==
			    IDEM_RESERVE_RECONCILE)
				return err;
			/* changed meanwhile: round again */
			continue;
		case IDEM_STEP_UNKNOWN:
			idem_pgs_found_row(ps, &a, &r, read_at, out);
			idem_pgs_row_clear(&r);
			out->outcome = IDEM_RESERVE_UNKNOWN;
			return IDEM_OK;
		case IDEM_STEP_EXPIRED:
			idem_pgs_expired_row(&r, out);
			return IDEM_OK;
		case IDEM_STEP_REUSE:
			idem_pgs_row_clear(&r);
			if ((err = reserve_reuse(ps, &a, &r, out, &n)) != IDEM_OK ||
			    n == 1)
				return err;
			continue;
		case IDEM_STEP_TAKE_OVER:
			idem_copy_string(old_owner, sizeof(old_owner), r.owner);
			idem_pgs_found_row(ps, &a, &r, read_at, out);
			idem_pgs_row_clear(&r);
			return reserve_takeover(ps, &a, old_owner, out);
		case IDEM_STEP_REPLAY:
		case IDEM_STEP_IN_FLIGHT:
			break;
		}
		idem_pgs_found_row(ps, &a, &r, read_at, out);
		idem_pgs_row_clear(&r);
		return IDEM_OK;
	}
	idem_pgs_count_contended(ps, &rq->contended);
	return IDEM_ERR_BUSY;
}

/* What owner-checked statement i writes (idem_owned_write_applied). */
static idem_owned_write
write_of(int i)
{
	switch (i) {
	case P_COMMIT:
		return IDEM_OWNED_COMMIT;
	case P_RELEASE:
		return IDEM_OWNED_RELEASE;
	case P_PAUSE:
		return IDEM_OWNED_PAUSE;
	case P_UNKNOWN:
		return IDEM_OWNED_UNKNOWN;
	case P_RESOLVE:
		return IDEM_OWNED_RESOLVE;
	case P_RESOLVE_RELEASE:
		return IDEM_OWNED_RESOLVE_RELEASE;
	}
	return IDEM_OWNED_STAYS;
}

/*
 * The owner-checked statements: commit, release (and pause), renew,
 * checkpoint, mark unknown, and an operator's resolve, p holding their
 * own parameters (the key and owner are added here).  One that matches
 * no row after its first attempt lost its answer reads the row: was the
 * first applied?  Returns IDEM_OK, IDEM_ERR_NOT_FOUND (not the owner's),
 * or the store's error.
 */
static idem_err
owned(pg_store *ps, int i, idem_pg_params *p, idem_store_req *rq)
{
	unsigned long long n;
	int retried = 0;
	idem_err err;
	pg_row r;

	idem_pgs_p_key(p, &rq->key);
	idem_pg_p_text(p, rq->owner);
	if ((err = idem_pgs_count(ps, i, p, &rq->contended, &n, &retried)) !=
	    IDEM_OK)
		return err;
	if (n == 1)
		return IDEM_OK;
	/* a commit reads back itself, its answer compared
	 * (idem_pgs_commit_alone) */
	if (retried && i != P_COMMIT && write_of(i) != IDEM_OWNED_STAYS) {
		if ((err = idem_pgs_read_row(ps, &rq->key, &rq->contended, &r))
		    != IDEM_OK)
			return err;
		idem_pgs_row_clear(&r);
		if (idem_owned_write_applied(write_of(i), r.found, r.state,
		    r.owner, rq->owner))
			return IDEM_OK;
	}
	return IDEM_ERR_NOT_FOUND;
}

/* Whether an answer of size bytes is over what the store takes. */
static int
too_large(const pg_store *ps, uint64_t size)
{
	return size > ps->base.limits.total;
}

idem_err
idem_pgs_answer_stored(pg_store *ps, idem_store_req *rq,
    const idem_stored_response *resp)
{
	idem_err err;
	int ours;
	pg_row r;

	if ((err = idem_pgs_read_row(ps, &rq->key, &rq->contended, &r)) !=
	    IDEM_OK)
		return err;
	ours = idem_owned_answer_stored(r.found, r.state, r.owner, &r.resp,
	    rq->owner, resp);
	idem_pgs_row_clear(&r);
	return ours ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

idem_err
idem_pgs_commit_alone(pg_store *ps, idem_store_req *rq,
    const idem_stored_response *resp)
{
	idem_pg_params p;
	idem_err err;

	idem_pgs_p_commit(&p, rq, resp);
	/* matched no row: fenced, or stored already by an attempt of ours
	 * whose answer never came (a batch still running on the server
	 * when its connection timed out, which this commit then waited
	 * for, or which outlasted its lock wait and made it BUSY before
	 * this retry): only the row can tell */
	if ((err = owned(ps, P_COMMIT, &p, rq)) == IDEM_ERR_NOT_FOUND)
		err = idem_pgs_answer_stored(ps, rq, resp);
	return err;
}

static idem_err
pg_commit(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	pg_store *ps = (pg_store *)s;

	if (too_large(ps, (uint64_t)resp->headers_len + resp->body_len))
		return IDEM_ERR_TOO_LARGE;
	return idem_pgb_commit(ps, rq, resp);
}

/* Deletes rq's record, or pauses it when it has progress: the one the
 * request knows of first (a record with progress is never deleted). */
static idem_err
pg_release(idem_store *s, idem_store_req *rq)
{
	int first = rq->has_progress ? P_PAUSE : P_RELEASE;
	idem_pg_params p;
	idem_err err;

	idem_pg_p_init(&p);
	if ((err = owned((pg_store *)s, first, &p, rq)) != IDEM_ERR_NOT_FOUND)
		return err;
	idem_pg_p_init(&p);
	return owned((pg_store *)s, first == P_PAUSE ? P_RELEASE : P_PAUSE, &p,
	    rq);
}

static idem_err
pg_renew(idem_store *s, idem_store_req *rq)
{
	idem_pg_params p;

	idem_pg_p_init(&p);
	idem_pgs_p_lease(&p, rq);
	return owned((pg_store *)s, P_RENEW, &p, rq);
}

static idem_err
pg_checkpoint(idem_store *s, idem_store_req *rq, const idem_progress *pr)
{
	idem_pg_params p;

	idem_pgs_p_progress(&p, pr, rq);
	return owned((pg_store *)s, P_CHECKPOINT, &p, rq);
}

static idem_err
pg_mark_unknown(idem_store *s, idem_store_req *rq)
{
	idem_pg_params p;

	idem_pg_p_init(&p);
	idem_pg_p_ll(&p, idem_pgs_tomb_s(rq->policy));
	return owned((pg_store *)s, P_UNKNOWN, &p, rq);
}

/* An operator's answer (resp) for rq's record of unknown outcome, or its
 * deletion (resp NULL): see the resolve op. */
static idem_err
pg_resolve(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	pg_store *ps = (pg_store *)s;
	idem_pg_params p;

	idem_pg_p_init(&p);
	if (resp == NULL)
		return owned(ps, P_RESOLVE_RELEASE, &p, rq);
	if (too_large(ps, (uint64_t)resp->headers_len + resp->body_len))
		return IDEM_ERR_TOO_LARGE;
	idem_pg_p_ll(&p, resp->status);
	idem_pg_p_bytes(&p, resp->headers, resp->headers_len);
	idem_pg_p_bytes(&p, resp->body, resp->body_len);
	idem_pg_p_ll(&p, idem_pgs_tomb_s(rq->policy));
	return owned(ps, P_RESOLVE, &p, rq);
}

static idem_err
pg_purge(idem_store *s, unsigned max, unsigned *purged)
{
	unsigned long long n = 0, entombed = 0;
	idem_pg_params p;
	idem_err err;

	idem_pg_p_init(&p);
	idem_pg_p_ll(&p, max);
	if ((err = idem_pgs_count((pg_store *)s, P_ENTOMB, &p, NULL, &entombed,
	    NULL)) != IDEM_OK)
		return err;
	/* up to max in all: a full batch says that more may be left */
	*purged = (unsigned)entombed;
	if (entombed >= max)
		return IDEM_OK;
	idem_pg_p_init(&p);
	idem_pg_p_ll(&p, (long long)s->abandon_ms * 1000);
	idem_pg_p_ll(&p, (long long)(max - entombed));
	err = idem_pgs_count((pg_store *)s, P_PURGE, &p, NULL, &n, NULL);
	*purged = (unsigned)(n + entombed);
	return err;
}

/* Reads the schema's version with statement i (P_VERSION, or 0 of the
 * probe's pool) into *v. */
static idem_err
read_version(pg_store *ps, int i, long long *v)
{
	idem_pg_params p;
	PGresult *res;
	idem_err err;

	*v = 0;
	idem_pg_p_init(&p);
	if ((err = idem_pgs_run(ps, i, &p, NULL, &res, NULL)) !=
	    IDEM_OK)
		return err;
	if (PQntuples(res) == 1)
		*v = idem_pg_ll(res, 0, 0);
	PQclear(res);
	return IDEM_OK;
}

/* The store's ping: the schema's version read as the store reads its
 * rows, so that a missing table or a database down fails it as they fail
 * a reservation.  IDEM_OK or IDEM_ERR_STORE. */
static idem_err
pg_ping(idem_store *s)
{
	long long version;

	if (read_version((pg_store *)s, P_VERSION, &version) != IDEM_OK ||
	    version != PG_SCHEMA_VERSION)
		return IDEM_ERR_STORE;
	return IDEM_OK;
}

static void
pg_close(idem_store *s)
{
	pg_store *ps = (pg_store *)s;

	idem_pgb_free(ps->batch);
	idem_pg_pool_free(ps->pool);
	idem_replay_cache_free(ps->cache);
	free(ps);
}

static const idem_store_ops pg_ops = {
	.name = "postgres",
	.reserve = pg_reserve,
	.commit = pg_commit,
	.release = pg_release,
	.renew = pg_renew,
	.checkpoint = pg_checkpoint,
	.mark_unknown = pg_mark_unknown,
	.purge = pg_purge,
	.stats = idem_pgs_stats,
	.close = pg_close,
	.release_prefix = idem_pgs_release_prefix,
	.lookup = idem_pgs_lookup,
	.census = idem_pgs_census,
	.list_unknown = idem_pgs_list_unknown,
	.resolve = pg_resolve,
	.ping = pg_ping,
};

/* Makes ps a store set aside (idem_store_is_aside): no pool, every
 * operation IDEM_ERR_STORE.  Returns IDEM_OK with *out. */
static idem_err
set_aside(pg_store *ps, idem_store **out)
{
	idem_pg_pool_free(ps->pool);
	ps->pool = NULL;
	ps->base.aside = 1;
	*out = &ps->base;
	return IDEM_OK;
}

/* Writes to buf (size bytes) the settings of the store's sessions, a
 * row lock waited for lock_ms, then extra: the server ends a statement
 * its client gave up on (settle_ms), a backend whose client is gone
 * notices within a second, and every statement is READ COMMITTED,
 * whatever the database's default (the conditional UPDATEs are decided
 * on the row's latest version). */
static void
session_options(char *buf, size_t size, const idem_config_postgres *pg,
    const idem_store_opts *o, uint64_t lock_ms, const char *extra)
{
	snprintf(buf, size, "-c statement_timeout=%llu -c lock_timeout=%llu "
	    "-c client_connection_check_interval=1000 "
	    "-c default_transaction_isolation=read\\ committed%s",
	    (unsigned long long)statement_ms(pg, o),
	    (unsigned long long)lock_ms, extra);
}

void
idem_pgs_session_options(char *buf, size_t size,
    const idem_config_postgres *pg, const idem_store_opts *o,
    const char *extra)
{
	session_options(buf, size, pg, o, idem_pgs_lock_wait_ms(o), extra);
}

/*
 * Checks the schema of pg's database on a connection of its own that
 * prepares nothing but the version's read (the store's statements would
 * not prepare on a missing or older schema, and say less).  Returns
 * IDEM_OK, IDEM_ERR_CONFIG (password file), or IDEM_ERR_STORE after
 * logging why; *reached says whether a server answered at all.
 */
static idem_err
check_schema(const idem_config_postgres *pg, const idem_store_opts *o,
    const char *options, int *reached)
{
	pg_store probe;
	char state[6];
	long long version = 0;
	idem_err err;

	memset(&probe, 0, sizeof(probe));
	*reached = 0;
	if ((err = idem_pg_pool_new(pg, o->file, idem_pgs_version_sql, 1, 1,
	    options, &probe.pool)) != IDEM_OK)
		return err;
	err = read_version(&probe, 0, &version);
	*reached = idem_pg_pool_opened(probe.pool);
	idem_pg_pool_last_state(probe.pool, state);
	idem_pg_pool_free(probe.pool);
	if (err != IDEM_OK) {
		/* the hint only where it helps: a missing table (42P01),
		 * not a refused login or a lost server */
		if (strcmp(state, "42P01") == 0)
			idem_log(NULL, IDEM_LOG_ERROR, "postgres store: database "
			    "%s lacks the tables of idemfcgi: apply "
			    IDEM_PG_SCHEMADIR "/" PG_SCHEMA_FILE " and the files "
			    "after it, in order", pg->database);
		else if (*reached)
			idem_log(NULL, IDEM_LOG_ERROR, "postgres store: cannot "
			    "use database %s (see the error above)",
			    pg->database);
		return IDEM_ERR_STORE;
	}
	if (version != PG_SCHEMA_VERSION) {
		idem_log(NULL, IDEM_LOG_ERROR, "postgres store: database %s has "
		    "schema version %lld, this idemfcgi needs %d: apply the "
		    "files of " IDEM_PG_SCHEMADIR "/ after version %lld, in "
		    "order, up to " PG_SCHEMA_LAST, pg->database, version,
		    PG_SCHEMA_VERSION, version);
		return IDEM_ERR_STORE;
	}
	return IDEM_OK;
}

idem_err
idem_store_postgres_new(const idem_config_postgres *pg,
    const idem_store_opts *o, idem_store **out)
{
	pg_store *ps;
	char options[512];
	idem_pg_conn *c;
	int reached;
	idem_err err;

	if ((ps = calloc(1, sizeof(*ps))) == NULL)
		return IDEM_ERR_NOMEM;
	ps->base.ops = &pg_ops;
	ps->base.tx = &idem_pgs_tx_ops;
	ps->base.settle_ms = idem_store_postgres_settle_ms(pg, o);
	ps->base.abandon_ms = IDEM_ABANDON_DEFAULT_MS;
	ps->base.limits.total = PG_VALUE_MAX - PG_MESSAGE_SLACK;
	ps->lock_wait_ms = idem_pgs_lock_wait_ms(o);
	if (o->aside)
		return set_aside(ps, out);
	session_options(options, sizeof(options), pg, o, ps->lock_wait_ms, "");
	if ((err = check_schema(pg, o, options, &reached)) != IDEM_OK) {
		if (err == IDEM_ERR_STORE && !reached && o->may_wait) {
			idem_log(NULL, IDEM_LOG_WARN, "postgres store unavailable: "
			    "database %s cannot be reached (see the error "
			    "above); serving anyway: keyed routes answer 503 "
			    "IDEMPOTENCY_STORE_UNAVAILABLE until it can be",
			    pg->database);
			return set_aside(ps, out);
		}
		if (err == IDEM_ERR_STORE && !reached)
			idem_log(NULL, IDEM_LOG_ERROR, "postgres store: database "
			    "%s cannot be reached (see the error above)",
			    pg->database);
		free(ps);
		return err;
	}
	if ((err = idem_pg_pool_new(pg, o->file, idem_pgs_sql, PNSTMT,
	    o->pool_size > 0 ? o->pool_size : pg->pool_size, options,
	    &ps->pool)) != IDEM_OK) {
		free(ps);
		return err;
	}
	/* every statement must prepare on this schema */
	if ((c = idem_pg_get(ps->pool)) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "postgres store: cannot use "
		    "database %s (see the error above)", pg->database);
		pg_close(&ps->base);
		return IDEM_ERR_STORE;
	}
	idem_pg_put(ps->pool, c);
	/* and the rest of the pool now, not in the first requests */
	(void)idem_pg_pool_warm(ps->pool);
	if ((err = idem_replay_cache_new(pg->replay_cache, &ps->cache)) !=
	    IDEM_OK) {
		pg_close(&ps->base);
		return err;
	}
	/* a store its opener asks one connection of (the master's sweep,
	 * idemfcgi-admin) has one user at a time: nothing to group */
	if (pg->batch && o->pool_size != 1) {
		/* the lanes' joins of their arrays with the table are
		 * planned once per session, maybe on a table still empty:
		 * index lookups, whatever the statistics say */
		session_options(options, sizeof(options), pg, o,
		    PG_LANE_LOCK_MS, " -c enable_seqscan=off "
		    "-c enable_hashjoin=off -c enable_mergejoin=off "
		    "-c plan_cache_mode=force_generic_plan");
		if ((err = idem_pgb_new(ps, pg, o->file, options, &ps->batch)) !=
		    IDEM_OK) {
			pg_close(&ps->base);
			return err;
		}
		ps->base.batch = idem_pgb_engine(ps->batch);
	}
	*out = &ps->base;
	return IDEM_OK;
}
