/*
 * idem_store.c - the store wrappers and the helpers every store shares.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_metrics.h"
#include "idem_config.h"
#include "idem_store.h"
#include "idem_store_tx.h"

/* Records an operation's latency and result when s has metrics. */
static idem_err
timed(idem_store *s, idem_store_op op, uint64_t t0, idem_err err)
{
	if (s->metrics != NULL)
		idem_metrics_store(s->metrics, op, idem_metrics_now_ns() - t0,
		    err != IDEM_OK && err != IDEM_ERR_NOT_FOUND);
	return err;
}

/* The start time of an operation (0 without metrics). */
static uint64_t
start(const idem_store *s)
{
	return s->metrics != NULL ? idem_metrics_now_ns() : 0;
}

/* Whether p may be recorded: IDEM_OK, IDEM_ERR_INVALID (no phase) or
 * IDEM_ERR_TOO_LARGE (a state over IDEM_PROGRESS_MAX), for every store. */
static idem_err
progress_ok(const idem_progress *p)
{
	if (p->phase[0] == '\0')
		return IDEM_ERR_INVALID;
	return p->state_len > IDEM_PROGRESS_MAX ? IDEM_ERR_TOO_LARGE : IDEM_OK;
}

idem_err
idem_store_reserve(idem_store *s, idem_store_req *rq, idem_reserve_result *out)
{
	uint64_t t0 = start(s);

	idem_err err;

	memset(out, 0, sizeof(*out));
	err = (s->aside ? IDEM_ERR_STORE :
	    s->ops->reserve(s, rq, out));
	if (idem_reserve_runs(err, out) && out->progress.phase[0] != '\0')
		rq->has_progress = 1;
	return timed(s, IDEM_STORE_OP_RESERVE, t0, err);
}

idem_err
idem_store_commit(idem_store *s, idem_store_req *rq,
    const idem_stored_response *resp)
{
	uint64_t t0 = start(s);

	return timed(s, IDEM_STORE_OP_COMMIT, t0, (s->aside ? IDEM_ERR_STORE :
	    s->ops->commit(s, rq, resp)));
}

idem_err
idem_store_tx_begin(idem_store *s, idem_db_conn *c, idem_store_req *rq,
    idem_reserve_result *out)
{
	uint64_t t0 = start(s);

	idem_err err;

	memset(out, 0, sizeof(*out));
	if (s->tx == NULL)
		return IDEM_ERR_INVALID;
	err = (s->aside ? IDEM_ERR_STORE : s->tx->tx_begin(s, c, rq, out));
	if (idem_reserve_runs(err, out) && out->progress.phase[0] != '\0')
		rq->has_progress = 1;
	return timed(s, IDEM_STORE_OP_RESERVE, t0, err);
}

int
idem_store_has_tx_adopt(const idem_store *s)
{
	return s->tx != NULL && s->tx->tx_adopt != NULL;
}

idem_err
idem_store_tx_adopt(idem_store *s, idem_db_conn *c, idem_store_req *rq)
{
	if (!idem_store_has_tx_adopt(s))
		return IDEM_ERR_INVALID;
	/* not timed: the reserve it follows was, once per request */
	return s->aside ? IDEM_ERR_STORE : s->tx->tx_adopt(s, c, rq);
}

idem_err
idem_store_tx_record(idem_store *s, idem_db_conn *c, idem_store_req *rq,
    const idem_stored_response *resp)
{
	uint64_t t0 = start(s);
	idem_err err = s->tx->tx_record(s, c, rq, resp);

	/* one commit is one operation: a record that succeeds is timed with
	 * the COMMIT (tx_end) that follows it, one that ends the commit
	 * (the transaction rolled back) here; too large is no failure */
	if (err == IDEM_OK || err == IDEM_ERR_TOO_LARGE)
		return err;
	return timed(s, IDEM_STORE_OP_COMMIT, t0, err);
}

idem_err
idem_store_tx_end(idem_store *s, idem_db_conn *c, idem_store_req *rq,
    int commit, int *unknown)
{
	uint64_t t0 = start(s);

	return timed(s, commit ? IDEM_STORE_OP_COMMIT : IDEM_STORE_OP_RELEASE,
	    t0, s->tx->tx_end(s, c, rq, commit, unknown));
}

idem_err
idem_store_tx_checkpoint(idem_store *s, idem_db_conn *c, idem_store_req *rq,
    const idem_progress *p)
{
	uint64_t t0 = start(s);
	idem_err err = progress_ok(p);

	if (err != IDEM_OK)
		return err;
	err = s->tx->tx_checkpoint(s, c, rq, p);

	if (err == IDEM_OK)
		rq->has_progress = 1;
	return timed(s, IDEM_STORE_OP_CHECKPOINT, t0, err);
}

idem_err
idem_store_tx_mark_unknown(idem_store *s, idem_db_conn *c,
    idem_store_req *rq)
{
	uint64_t t0 = start(s);

	return timed(s, IDEM_STORE_OP_MARK_UNKNOWN, t0,
	    s->tx->tx_mark_unknown(s, c, rq));
}

void
idem_store_tx_faults(idem_db_conn *c, unsigned faults)
{
	c->tx_faults = faults;
}

idem_err
idem_store_release(idem_store *s, idem_store_req *rq)
{
	uint64_t t0 = start(s);

	return timed(s, IDEM_STORE_OP_RELEASE, t0, (s->aside ? IDEM_ERR_STORE :
	    s->ops->release(s, rq)));
}

idem_err
idem_store_renew(idem_store *s, idem_store_req *rq)
{
	uint64_t t0 = start(s);

	return timed(s, IDEM_STORE_OP_RENEW, t0, (s->aside ? IDEM_ERR_STORE :
	    s->ops->renew(s, rq)));
}

idem_err
idem_store_checkpoint(idem_store *s, idem_store_req *rq,
    const idem_progress *p)
{
	uint64_t t0 = start(s);
	idem_err err = progress_ok(p);

	if (err != IDEM_OK)
		return err;
	err = (s->aside ? IDEM_ERR_STORE :
	    s->ops->checkpoint(s, rq, p));

	if (err == IDEM_OK)
		rq->has_progress = 1;
	return timed(s, IDEM_STORE_OP_CHECKPOINT, t0, err);
}

idem_err
idem_store_mark_unknown(idem_store *s, idem_store_req *rq)
{
	uint64_t t0 = start(s);

	return timed(s, IDEM_STORE_OP_MARK_UNKNOWN, t0,
	    (s->aside ? IDEM_ERR_STORE :
	    s->ops->mark_unknown(s, rq)));
}

idem_err
idem_store_purge(idem_store *s, unsigned max, unsigned *purged)
{
	uint64_t t0 = start(s);

	*purged = 0;
	return timed(s, IDEM_STORE_OP_PURGE, t0, (s->aside ? IDEM_ERR_STORE :
	    s->ops->purge(s, max, purged)));
}

idem_err
idem_store_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n)
{
	*keys = NULL;
	*n = 0;
	if (s->ops->release_prefix == NULL)
		return IDEM_OK;
	return (s->aside ? IDEM_ERR_STORE :
	    s->ops->release_prefix(s, prefix, keys, n));
}

idem_err
idem_store_purge_all(idem_store *s, unsigned batch, unsigned long *total)
{
	unsigned n;
	idem_err err;

	*total = 0;
	do {
		if ((err = idem_store_purge(s, batch, &n)) != IDEM_OK)
			return err;
		*total += n;
	} while (n == batch);
	return IDEM_OK;
}

idem_err
idem_store_lookup(idem_store *s, const idem_store_key *k,
    idem_store_record *out)
{
	memset(out, 0, sizeof(*out));
	if (s->ops->lookup == NULL)
		return IDEM_ERR_INVALID;
	return (s->aside ? IDEM_ERR_STORE :
	    s->ops->lookup(s, k, out));
}

idem_err
idem_store_census_get(idem_store *s, uint64_t inflight_ttl_ms,
    idem_store_census *out)
{
	memset(out, 0, sizeof(*out));
	if (s->ops->census == NULL)
		return IDEM_ERR_INVALID;
	return (s->aside ? IDEM_ERR_STORE :
	    s->ops->census(s, inflight_ttl_ms, out));
}

idem_err
idem_store_stats_get(idem_store *s, idem_store_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s->ops->stats == NULL)
		return IDEM_ERR_INVALID;
	return (s->aside ? IDEM_ERR_STORE :
	    s->ops->stats(s, st));
}

idem_err
idem_store_ping(idem_store *s)
{
	uint64_t t0;

	if (s == NULL)
		return IDEM_OK;
	if (s->aside)
		return IDEM_ERR_STORE; /* set aside: keyed routes answer 503 */
	if (s->ops->ping == NULL)
		return IDEM_OK;
	t0 = start(s);
	return timed(s, IDEM_STORE_OP_PING, t0, s->ops->ping(s));

}

idem_err
idem_store_list_unknown(idem_store *s, size_t max, idem_store_key **keys,
    idem_store_record **recs, size_t *n, int *more)
{
	*keys = NULL;
	*recs = NULL;
	*n = 0;
	*more = 0;
	if (s->ops->list_unknown == NULL || max == 0)
		return IDEM_ERR_INVALID;
	return (s->aside ? IDEM_ERR_STORE :
	    s->ops->list_unknown(s, max, keys, recs, n, more));
}

idem_err
idem_store_resolve(idem_store *s, idem_store_req *rq,
    const idem_stored_response *resp)
{
	if (s->ops->resolve == NULL)
		return IDEM_ERR_INVALID;
	return (s->aside ? IDEM_ERR_STORE :
	    s->ops->resolve(s, rq, resp));
}

int
idem_store_is_aside(const idem_store *s)
{
	return s->aside;
}

const char *
idem_store_name(const idem_store *s)
{
	return s->ops->name;
}

const idem_store_limits *
idem_store_get_limits(const idem_store *s)
{
	return &s->limits;
}

void
idem_store_set_abandon_ms(idem_store *s, uint64_t ms)
{
	if (ms > 0)
		s->abandon_ms = ms;
}

void
idem_store_set_metrics(idem_store *s, struct idem_metrics *m)
{
	s->metrics = m;
}

int
idem_store_err_transient(idem_err err)
{
	return err == IDEM_ERR_STORE || err == IDEM_ERR_BUSY;
}

void
idem_store_close(idem_store *s)
{
	if (s != NULL)
		s->ops->close(s);
}

void
idem_stored_response_clear(idem_stored_response *resp)
{
	free(resp->headers);
	free(resp->body);
	memset(resp, 0, sizeof(*resp));
}


void
idem_reserve_result_clear(idem_reserve_result *r)
{
	idem_stored_response_clear(&r->response);
	idem_progress_clear(&r->progress);
	memset(r, 0, sizeof(*r));
}

idem_err
idem_stored_response_copy(idem_stored_response *dst,
    const idem_stored_response *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->status = src->status;
	dst->headers = malloc(src->headers_len + 1);
	dst->body = malloc(src->body_len + 1);
	if (dst->headers == NULL || dst->body == NULL) {
		idem_stored_response_clear(dst);
		return IDEM_ERR_NOMEM;
	}
	if (src->headers_len > 0)
		memcpy(dst->headers, src->headers, src->headers_len);
	dst->headers[src->headers_len] = '\0';
	dst->headers_len = src->headers_len;
	if (src->body_len > 0)
		memcpy(dst->body, src->body, src->body_len);
	dst->body[src->body_len] = '\0';
	dst->body_len = src->body_len;
	return IDEM_OK;
}

void
idem_copy_string(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

int
idem_reserve_runs(idem_err err, const idem_reserve_result *r)
{
	return err == IDEM_OK && (r->outcome == IDEM_RESERVE_ACQUIRED ||
	    r->outcome == IDEM_RESERVE_TAKEN_OVER ||
	    r->outcome == IDEM_RESERVE_RESUMED ||
	    r->outcome == IDEM_RESERVE_RECONCILE);
}

const char *const idem_record_state_names[IDEM_RECORD__MAX] = {
	[IDEM_RECORD_IN_FLIGHT] = "in_flight",
	[IDEM_RECORD_COMMITTED] = "committed",
	[IDEM_RECORD_PAUSED] = "paused",
	[IDEM_RECORD_UNKNOWN] = "unknown",
	[IDEM_RECORD_EXPIRED] = "expired",
};

void
idem_reserve_expired(idem_reserve_result *out, const unsigned char fp[32],
    int status, int64_t lease_age_us)
{
	memcpy(out->fingerprint, fp, 32);
	out->first_status = status;
	out->used_age_ms = lease_age_us > 0 ? (uint64_t)lease_age_us / 1000 :
	    0;
	out->outcome = IDEM_RESERVE_EXPIRED;
}

int
idem_tombstone_live(idem_record_state state, int64_t past_ms,
    uint64_t tombstone_ms)
{
	if (state == IDEM_RECORD_EXPIRED)
		return past_ms < 0;
	return (state == IDEM_RECORD_COMMITTED || state ==
	    IDEM_RECORD_UNKNOWN) && past_ms >= 0 && tombstone_ms > 0 &&
	    (uint64_t)past_ms < tombstone_ms;
}

idem_reserve_step
idem_reserve_decide(const idem_found *f, const unsigned char fp[32],
    const char *owner, int64_t inflight_ttl_us, const idem_key_policy *policy)
{
	int reconcile = policy != NULL && policy->reconcile;
	int same = memcmp(f->fp, fp, 32) == 0;
	/* the holder's lease, as the record keeps it: a taker whose own
	 * inflight-ttl is shorter must not cut it short */
	int64_t ttl_us = f->lease_us > 0 ? f->lease_us : inflight_ttl_us;

	/* an expired key never runs again silently: refused, or reused
	 * where the policy says so (counted by the caller) */
	if (f->tombstone)
		return policy != NULL && policy->run_expired ? IDEM_STEP_REUSE :
		    IDEM_STEP_EXPIRED;
	switch (f->state) {
	case IDEM_RECORD_COMMITTED:
		return f->expired ? IDEM_STEP_REUSE : IDEM_STEP_REPLAY;
	case IDEM_RECORD_EXPIRED:
		/* past the tombstone's end */
		return IDEM_STEP_REUSE;
	case IDEM_RECORD_PAUSED:
		if (f->expired)
			return IDEM_STEP_REUSE;
		return same ? IDEM_STEP_RESUME : IDEM_STEP_IN_FLIGHT;
	case IDEM_RECORD_UNKNOWN:
		if (f->expired)
			return IDEM_STEP_REUSE;
		if (!same)
			return IDEM_STEP_IN_FLIGHT;
		/* being reconciled by a live execution: as in flight */
		if (f->owner != NULL && f->owner[0] != '\0' &&
		    f->lease_age_us <= ttl_us)
			return IDEM_STEP_IN_FLIGHT;
		return reconcile ? IDEM_STEP_RECONCILE : IDEM_STEP_UNKNOWN;
	case IDEM_RECORD_IN_FLIGHT:
	case IDEM_RECORD__MAX:
		break;
	}
	if (owner != NULL && f->owner != NULL && strcmp(f->owner, owner) == 0)
		return IDEM_STEP_OURS;
	if (same && f->lease_age_us > ttl_us)
		return IDEM_STEP_TAKE_OVER;
	/* another request may have the key of an abandoned one */
	if (idem_record_abandoned(f, inflight_ttl_us))
		return IDEM_STEP_REUSE;
	return IDEM_STEP_IN_FLIGHT;
}

int
idem_owned_write_applied(idem_owned_write w, int found,
    idem_record_state state, const char *row_owner, const char *owner)
{
	int ours = found && strcmp(row_owner, owner) == 0;

	switch (w) {
	case IDEM_OWNED_COMMIT:
	case IDEM_OWNED_RESOLVE:
		return ours && state == IDEM_RECORD_COMMITTED;
	case IDEM_OWNED_RELEASE:
		return !ours;
	case IDEM_OWNED_PAUSE:
		return ours && state == IDEM_RECORD_PAUSED;
	case IDEM_OWNED_UNKNOWN:
		/* nobody holds it after: unknown it is, whoever marked it */
		return found && state == IDEM_RECORD_UNKNOWN;
	case IDEM_OWNED_RESOLVE_RELEASE:
		/* gone; a record there now (reconciled, or a new request's
		 * after ours went) counts as changed meanwhile */
		return !found;
	case IDEM_OWNED_STAYS:
		break;
	}
	return 0;
}

int
idem_owned_answer_stored(int found, idem_record_state state,
    const char *row_owner, const idem_stored_response *stored,
    const char *owner, const idem_stored_response *want)
{
	return idem_owned_write_applied(IDEM_OWNED_COMMIT, found, state,
	    row_owner, owner) && stored->status == want->status &&
	    stored->headers_len == want->headers_len &&
	    stored->body_len == want->body_len &&
	    (want->headers_len == 0 ||
	    memcmp(stored->headers, want->headers, want->headers_len) == 0) &&
	    (want->body_len == 0 ||
	    memcmp(stored->body, want->body, want->body_len) == 0);
}

int
idem_record_abandoned(const idem_found *f, int64_t inflight_ttl_us)
{
	int64_t ttl_us = f->lease_us > 0 ? f->lease_us : inflight_ttl_us;

	return f->state == IDEM_RECORD_IN_FLIGHT && f->expired &&
	    f->abandon_us > 0 && f->lease_age_us > ttl_us &&
	    f->lease_age_us > f->abandon_us;
}

void
idem_progress_clear(idem_progress *p)
{
	free(p->state);
	memset(p, 0, sizeof(*p));
}

idem_err
idem_progress_copy(idem_progress *dst, const idem_progress *src)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->phase, src->phase, sizeof(dst->phase));
	if (src->state == NULL)
		return IDEM_OK;
	if ((dst->state = malloc(src->state_len + 1)) == NULL)
		return IDEM_ERR_NOMEM;
	memcpy(dst->state, src->state, src->state_len);
	dst->state[src->state_len] = '\0';
	dst->state_len = src->state_len;
	return IDEM_OK;
}

idem_store_opts
idem_store_opts_of(const idem_config *cfg, unsigned pool_size)
{
	return (idem_store_opts){
		.file = cfg->path,
		.pool_size = pool_size,
		.inflight_ttl = cfg->idem.inflight_ttl,
		.inflight_wait = cfg->idem.inflight_wait,
		.may_wait = cfg->store_may_wait,
		.aside = cfg->store_aside,
	};
}
