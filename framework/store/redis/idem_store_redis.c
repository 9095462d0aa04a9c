/*
 * idem_store_redis.c - the Redis store: one hash per (scope, key), every
 * operation one Lua script (idem_store_redis_lua.c), atomic on the
 * server and timed by its clock.
 *
 * Round trips per operation:
 *   reserve  one: the record made, or the one met read; only for a stale,
 *            paused, unknown or expired one, one conditional script
 *            naming the old owner or the expiry
 *   commit, release, renew, checkpoint, mark unknown, resolve: one,
 *            owner-checked
 * With [redis] durability the scripts that let a handler run, and the
 * commit, carry WAIT (or WAITAOF) in the same round trip.
 *
 * The reservation rule is idem_reserve_decide's, in C, on the record a
 * script returned; the scripts that act on it check again what it read.
 * A command whose answer was lost is sent once more on a new connection:
 * the owner checks make that safe, and an owner-checked write that then
 * matches nothing reads the record to learn whether the first applied.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_store_redis.h"
#include "idem_store_redis_int.h"
#include "idem_time.h"

/* rounds of a reserve whose record changes under it */
#define RESERVE_ROUNDS 8

static const idem_store_ops rds_ops;

/* ----------------------------------------------------------------- keys */

/* FNV-1a over the scope and the key: the key's bucket. */
static unsigned
bucket_of(const idem_store_key *k)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < sizeof(k->scope); i++)
		h = (h ^ k->scope[i]) * 16777619u;
	for (i = 0; i < k->key_len; i++)
		h = (h ^ (unsigned char)k->key[i]) * 16777619u;
	return h % RDS_BUCKETS;
}

size_t
idem_rds_index(const rds_store *rs, unsigned b, char *buf)
{
	return (size_t)snprintf(buf, RDS_PREFIX_MAX + 8, "%s{%02x}:i",
	    rs->prefix, b % RDS_BUCKETS);
}

void
idem_rds_key(const rds_store *rs, const idem_store_key *k, rds_key *out)
{
	unsigned b = bucket_of(k);
	size_t n, i;

	n = (size_t)snprintf(out->name, sizeof(out->name), "%s{%02x}:",
	    rs->prefix, b);
	out->member = out->name + n;
	for (i = 0; i < sizeof(k->scope); i++)
		n += (size_t)snprintf(out->name + n, sizeof(out->name) - n,
		    "%02x", k->scope[i]);
	out->name[n++] = ':';
	memcpy(out->name + n, k->key, k->key_len);
	n += k->key_len;
	out->name[n] = '\0';
	out->name_len = n;
	out->member_len = n - (size_t)(out->member - out->name);
	out->index_len = idem_rds_index(rs, b, out->index);
}

int
idem_rds_member_key(const char *member, size_t len, idem_store_key *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	if (len < 65 || member[64] != ':' || len - 65 > IDEM_KEY_MAX)
		return -1;
	for (i = 0; i < 32; i++) {
		unsigned v;
		if (sscanf(member + 2 * i, "%2x", &v) != 1)
			return -1;
		out->scope[i] = (unsigned char)v;
	}
	out->key_len = len - 65;
	memcpy(out->key, member + 65, out->key_len);
	out->key[out->key_len] = '\0';
	return 0;
}

/* ---------------------------------------------------------------- rows */

long long
idem_rds_ll(const redisReply *rep)
{
	if (rep == NULL)
		return 0;
	if (rep->type == REDIS_REPLY_INTEGER)
		return rep->integer;
	if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS)
		return strtoll(rep->str, NULL, 10);
	return 0;
}

idem_record_state
idem_rds_state(const char *s, size_t len)
{
	int i;

	for (i = 0; i < IDEM_RECORD__MAX; i++)
		if (strlen(idem_record_state_names[i]) == len &&
		    memcmp(idem_record_state_names[i], s, len) == 0)
			return (idem_record_state)i;
	return IDEM_RECORD__MAX;
}

void
idem_rds_utc(int64_t us, char buf[32])
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	size_t n;

	gmtime_r(&sec, &tm);
	n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, 32 - n, ".%06dZ", (int)(us % 1000000));
}

/* A copy of a string reply (NULL, nil: none) into *out and *len.
 * Returns 0, or -1 when out of memory. */
static int
dup_value(const redisReply *v, char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	if (v == NULL || v->type != REDIS_REPLY_STRING)
		return 0;
	if ((*out = malloc(v->len + 1)) == NULL)
		return -1;
	memcpy(*out, v->str, v->len);
	(*out)[v->len] = '\0';
	*len = v->len;
	return 0;
}

/* A string reply copied into dst (size bytes), cut to fit. */
static void
copy_value(char *dst, size_t size, const redisReply *v)
{
	size_t n = v != NULL && v->type == REDIS_REPLY_STRING ? v->len : 0;

	if (n >= size)
		n = size - 1;
	if (n > 0)
		memcpy(dst, v->str, n);
	dst[n] = '\0';
}

idem_err
idem_rds_row(const redisReply *fields, int64_t now_us, rds_row *row)
{
	const redisReply *const *e;

	memset(row, 0, sizeof(*row));
	row->now_us = now_us;
	if (fields == NULL || fields->type != REDIS_REPLY_ARRAY ||
	    fields->elements < 14)
		return IDEM_OK;
	e = (const redisReply *const *)fields->element;
	if (e[0]->type != REDIS_REPLY_STRING)
		return IDEM_OK;
	row->found = 1;
	if ((row->state = idem_rds_state(e[0]->str, e[0]->len)) ==
	    IDEM_RECORD__MAX || e[1]->type != REDIS_REPLY_STRING ||
	    e[1]->len != 32) {
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: a record of state "
		    "'%.*s' is not one of this idemfcgi's", (int)e[0]->len,
		    e[0]->str);
		return IDEM_ERR_STORE;
	}
	memcpy(row->fp, e[1]->str, 32);
	copy_value(row->owner, sizeof(row->owner), e[2]);
	copy_value(row->request_id, sizeof(row->request_id), e[3]);
	row->reserved_us = idem_rds_ll(e[4]);
	row->lease_us = idem_rds_ll(e[5]);
	row->lease_ms = idem_rds_ll(e[6]);
	row->expires_us = idem_rds_ll(e[7]);
	row->tombstone_ms = (uint64_t)idem_rds_ll(e[13]);
	if (row->state == IDEM_RECORD_COMMITTED && row->expires_us > now_us) {
		row->committed = 1;
		row->resp.status = (int)idem_rds_ll(e[8]);
		if (dup_value(e[9], &row->resp.headers,
		    &row->resp.headers_len) != 0 || dup_value(e[10],
		    &row->resp.body, &row->resp.body_len) != 0) {
			idem_rds_row_clear(row);
			return IDEM_ERR_NOMEM;
		}
	} else
		row->resp.status = (int)idem_rds_ll(e[8]);
	copy_value(row->progress.phase, sizeof(row->progress.phase), e[11]);
	if (row->progress.phase[0] != '\0' && dup_value(e[12],
	    &row->progress.state, &row->progress.state_len) != 0) {
		idem_rds_row_clear(row);
		return IDEM_ERR_NOMEM;
	}
	return IDEM_OK;
}

void
idem_rds_row_clear(rds_row *row)
{
	idem_stored_response_clear(&row->resp);
	idem_progress_clear(&row->progress);
}

/* ------------------------------------------------------------- calling */

idem_err
idem_rds_call(rds_store *rs, size_t i, const rds_key *k, int nargs,
    const char **argv, const size_t *lens, redisReply **reply, int *retried,
    int *durable)
{
	const char *av[16];
	size_t al[16];
	int a;

	if (nargs + 2 > 16)
		return IDEM_ERR_INVALID;
	av[0] = k->name;
	al[0] = k->name_len;
	av[1] = k->index;
	al[1] = k->index_len;
	for (a = 0; a < nargs; a++) {
		av[2 + a] = argv[a];
		al[2 + a] = lens[a];
	}
	if (durable != NULL)
		return idem_redis_eval_durable(rs->r, i, 2, nargs, av, al, reply,
		    retried, durable);
	return idem_redis_eval(rs->r, i, 2, nargs, av, al, reply, retried);
}

static void
arg_bytes(rds_args *a, const void *p, size_t len)
{
	a->v[a->n] = len > 0 ? p : "";
	a->len[a->n++] = len;
}

static void
arg_text(rds_args *a, const char *s)
{
	arg_bytes(a, s, strlen(s));
}

static void
arg_ll(rds_args *a, long long v)
{
	a->len[a->n] = (size_t)snprintf(a->num[a->n], sizeof(a->num[0]), "%lld",
	    v);
	a->v[a->n] = a->num[a->n];
	a->n++;
}

/* The lease a renewal sets: the policy's, or "" to keep the record's. */
static void
arg_lease(rds_args *a, const idem_store_req *rq)
{
	if (rq->policy != NULL && rq->policy->lease_ms > 0)
		arg_ll(a, (long long)rq->policy->lease_ms);
	else
		arg_text(a, "");
}

static long long
tomb_ms(const idem_store_req *rq)
{
	return rq->policy != NULL ? (long long)rq->policy->tombstone_ms : 0;
}

/* The record of k as a reserve reads it, into *row.  Returns IDEM_OK or
 * the store's error. */
static idem_err
read_row(rds_store *rs, const rds_key *k, rds_row *row)
{
	redisReply *rep;
	idem_err err;

	memset(row, 0, sizeof(*row));
	if ((err = idem_rds_call(rs, R_READ, k, 0, NULL, NULL, &rep, NULL,
	    NULL)) != IDEM_OK)
		return err;
	/* {0, now, the fields}; {0, now} when there is none */
	err = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 ?
	    idem_rds_row(rep->elements > 2 ? rep->element[2] : NULL,
	    idem_rds_ll(rep->element[1]), row) : IDEM_ERR_STORE;
	freeReplyObject(rep);
	return err;
}

/* ------------------------------------------------------------- reserve */

/* The reservation rule on row r, met by rq. */
static idem_reserve_step
step_of(const rds_store *rs, const idem_store_req *rq, const rds_row *r)
{
	int64_t past_ms = (r->now_us - r->expires_us) / 1000;
	idem_found f = {
		.state = r->state,
		.expired = r->expires_us <= r->now_us,
		.fp = r->fp,
		.owner = r->owner,
		.lease_age_us = r->now_us - r->lease_us,
		.lease_us = r->lease_ms * 1000,
		.abandon_us = (int64_t)rs->base.abandon_ms * 1000,
	};

	f.tombstone = idem_tombstone_live(r->state, f.expired ? (past_ms > 0 ?
	    past_ms : 0) : -1, r->tombstone_ms);
	return idem_reserve_decide(&f, rq->fp, rq->owner,
	    (int64_t)rq->policy->lease_ms * 1000, rq->policy);
}

/* What a reserve tells of the record r it met (REPLAY, IN_FLIGHT: its
 * answer, or its holder), and the progress a takeover, a resume or a
 * reconcile goes on from; r's answer and progress move into out. */
static void
found_row(rds_row *r, idem_reserve_result *out)
{
	memcpy(out->fingerprint, r->fp, 32);
	idem_progress_clear(&out->progress);
	out->progress = r->progress;
	memset(&r->progress, 0, sizeof(r->progress));
	if (r->committed) {
		out->outcome = IDEM_RESERVE_COMMITTED;
		out->response = r->resp;
		memset(&r->resp, 0, sizeof(r->resp));
		return;
	}
	idem_copy_string(out->owner, sizeof(out->owner), r->owner);
	idem_copy_string(out->request_id, sizeof(out->request_id),
	    r->request_id);
	out->lease_age_ms = r->now_us > r->lease_us ? (uint64_t)(r->now_us -
	    r->lease_us) / 1000 : 0;
	out->lease_ms = r->lease_ms > 0 ? (uint64_t)r->lease_ms : 0;
	out->outcome = IDEM_RESERVE_IN_FLIGHT;
}

/* A reservation of rq's, made but short of [redis] durability: it may not
 * outlive a failover, so the handler must not run, and the caller
 * forgets it (rq's unanswered).  Clears *ours; returns IDEM_ERR_STORE. */
static idem_err
not_durable(idem_store_req *rq, int *ours)
{
	rq->unanswered = 1;
	*ours = 0;
	idem_log(NULL, IDEM_LOG_ERROR, "redis store: a reservation did not "
	    "reach [redis] durability in time (or its wait's answer was "
	    "lost); refused");
	return IDEM_ERR_STORE;
}

/* A script that makes the record rq's (i: TAKEOVER, REUSE, RESUME,
 * RECONCILE, with a) run for k.  Returns IDEM_OK with *won (1: ours), or
 * the store's error; a lost answer reads the record: ours is ours. */
static idem_err
take(rds_store *rs, size_t i, const rds_key *k, rds_args *a,
    idem_store_req *rq, int *won)
{
	int retried = 0, durable = 1;
	redisReply *rep;
	rds_row r;
	idem_err err;

	*won = 0;
	err = idem_rds_call(rs, i, k, a->n, a->v, a->len, &rep, &retried,
	    rs->durable ? &durable : NULL);
	if (retried)
		rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	*won = idem_rds_ll(rep) == 1;
	freeReplyObject(rep);
	if (!*won && retried) {
		/* the first attempt may have made it ours */
		if ((err = read_row(rs, k, &r)) != IDEM_OK)
			return err;
		*won = r.found && (r.state == IDEM_RECORD_IN_FLIGHT ||
		    r.state == IDEM_RECORD_UNKNOWN) && strcmp(r.owner,
		    rq->owner) == 0;
		idem_rds_row_clear(&r);
		/* its wait is unknown: not durable for this request */
		if (*won && rs->durable)
			durable = 0;
	}
	if (*won && !durable)
		return not_durable(rq, won);
	return IDEM_OK;
}

/* The first round trip of a reserve: the record made (*made), or the one
 * met read into *r. */
static idem_err
reserve_first(rds_store *rs, const rds_key *k, idem_store_req *rq, int *made,
    rds_row *r)
{
	int retried = 0, durable = 1;
	rds_args a = { .n = 0 };
	redisReply *rep;
	idem_err err;

	*made = 0;
	memset(r, 0, sizeof(*r));
	arg_bytes(&a, rq->fp, 32);
	arg_text(&a, rq->owner);
	arg_text(&a, rq->request_id);
	arg_ll(&a, (long long)rq->policy->lease_ms);
	arg_ll(&a, (long long)rq->policy->lifetime_ms * 1000);
	arg_bytes(&a, k->member, k->member_len);
	if (!idem_rds_batched(rs, IDEM_BATCH_INSERT, rq, k, &a, 0, &rep,
	    &durable, &retried)) {
		/* a pipeline that wrote it and lost its reply: the same
		 * as a lost answer of our own */
		if (retried)
			rq->unanswered = 1;
		err = idem_rds_call(rs, R_RESERVE, k, a.n, a.v, a.len, &rep,
		    &retried, rs->durable ? &durable : NULL);
	} else
		err = IDEM_OK;
	/* a record of ours may be there after all, whatever is said now */
	if (retried)
		rq->unanswered = 1;
	if (err != IDEM_OK)
		return err;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2) {
		freeReplyObject(rep);
		return IDEM_ERR_STORE;
	}
	*made = idem_rds_ll(rep->element[0]) == 1;
	err = *made ? IDEM_OK : idem_rds_row(rep->elements > 2 ?
	    rep->element[2] : NULL, idem_rds_ll(rep->element[1]), r);
	freeReplyObject(rep);
	if (err == IDEM_OK && *made && !durable)
		return not_durable(rq, made);
	return err;
}

/* What a takeover, a resume and a reconcile of the record r met begin
 * with: out told of r (its progress moved there), r's owner kept in old,
 * r cleared, and a's first arguments: rq's owner, request id and lease. */
static void
take_args(rds_args *a, const idem_store_req *rq, rds_row *r,
    idem_reserve_result *out, char old[IDEM_OWNER_MAX + 1])
{
	idem_copy_string(old, IDEM_OWNER_MAX + 1, r->owner);
	found_row(r, out);
	idem_rds_row_clear(r);
	arg_text(a, rq->owner);
	arg_text(a, rq->request_id);
	arg_ll(a, (long long)rq->policy->lease_ms);
}

static idem_err
rds_reserve(idem_store *s, idem_store_req *rq, idem_reserve_result *out)
{
	rds_store *rs = (rds_store *)s;
	rds_args a;
	rds_key k;
	rds_row r;
	int attempt, made, won;
	idem_err err;

	idem_rds_key(rs, &rq->key, &k);
	for (attempt = 0; attempt < RESERVE_ROUNDS; attempt++) {
		if (attempt > 1)
			idem_sleep_ms(1 + random() % (1L << (attempt < 6 ?
			    attempt : 6)));
		idem_progress_clear(&out->progress);
		out->owner[0] = out->request_id[0] = '\0';
		if ((err = reserve_first(rs, &k, rq, &made, &r)) != IDEM_OK)
			return err;
		if (made) {
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		}
		/* deleted between the script and now cannot be: the script
		 * read it; gone before it ran is a round more */
		if (!r.found)
			continue;
		a.n = 0;
		switch (step_of(rs, rq, &r)) {
		case IDEM_STEP_OURS:
			/* our own reservation, made before a lost answer:
			 * its wait for durability is unknown */
			idem_rds_row_clear(&r);
			if (rs->durable)
				return not_durable(rq, &made);
			out->outcome = IDEM_RESERVE_ACQUIRED;
			return IDEM_OK;
		case IDEM_STEP_RESUME:
		case IDEM_STEP_RECONCILE: {
			int resume = r.state == IDEM_RECORD_PAUSED;
			char old[IDEM_OWNER_MAX + 1];
			take_args(&a, rq, &r, out, old);
			arg_bytes(&a, rq->fp, 32);
			if (!resume)
				arg_text(&a, old);
			if ((err = take(rs, resume ? R_RESUME : R_RECONCILE,
			    &k, &a, rq, &won)) != IDEM_OK)
				return err;
			if (won) {
				out->outcome = resume ? IDEM_RESERVE_RESUMED :
				    IDEM_RESERVE_RECONCILE;
				return IDEM_OK;
			}
			continue;
		}
		case IDEM_STEP_UNKNOWN:
			found_row(&r, out);
			idem_rds_row_clear(&r);
			out->outcome = IDEM_RESERVE_UNKNOWN;
			return IDEM_OK;
		case IDEM_STEP_EXPIRED:
			idem_reserve_expired(out, r.fp, r.resp.status,
			    r.now_us - r.lease_us);
			idem_rds_row_clear(&r);
			return IDEM_OK;
		case IDEM_STEP_REUSE: {
			int tomb = idem_tombstone_live(r.state, (r.now_us -
			    r.expires_us) / 1000, r.tombstone_ms);
			arg_bytes(&a, rq->fp, 32);
			arg_text(&a, rq->owner);
			arg_text(&a, rq->request_id);
			arg_ll(&a, (long long)rq->policy->lease_ms);
			arg_ll(&a, (long long)rq->policy->lifetime_ms * 1000);
			arg_ll(&a, (long long)rs->base.abandon_ms * 1000);
			arg_text(&a, rq->policy->run_expired ? "1" : "0");
			arg_bytes(&a, k.member, k.member_len);
			err = take(rs, R_REUSE, &k, &a, rq, &won);
			if (err == IDEM_OK && won) {
				out->expired_run = tomb;
				if (r.state == IDEM_RECORD_IN_FLIGHT) {
					idem_copy_string(out->owner,
					    sizeof(out->owner), r.owner);
					idem_copy_string(out->request_id,
					    sizeof(out->request_id),
					    r.request_id);
				}
				out->outcome = IDEM_RESERVE_ACQUIRED;
			}
			idem_rds_row_clear(&r);
			if (err != IDEM_OK || won)
				return err;
			continue;
		}
		case IDEM_STEP_TAKE_OVER: {
			char old[IDEM_OWNER_MAX + 1];
			take_args(&a, rq, &r, out, old);
			arg_ll(&a, (long long)rq->policy->lifetime_ms * 1000);
			arg_text(&a, old);
			arg_bytes(&a, rq->fp, 32);
			arg_bytes(&a, k.member, k.member_len);
			if ((err = take(rs, R_TAKEOVER, &k, &a, rq, &won)) !=
			    IDEM_OK)
				return err;
			if (won)
				out->outcome = IDEM_RESERVE_TAKEN_OVER;
			return IDEM_OK;
		}
		case IDEM_STEP_REPLAY:
		case IDEM_STEP_IN_FLIGHT:
			break;
		}
		found_row(&r, out);
		idem_rds_row_clear(&r);
		return IDEM_OK;
	}
	rq->contended++;
	return IDEM_ERR_BUSY;
}

/* ------------------------------------------------- owner-checked writes */

/*
 * Owner-checked script i for rq with a (its arguments); commit waits for
 * [redis] durability.  Returns IDEM_OK (applied: *result the script's
 * number when not NULL), IDEM_ERR_NOT_FOUND (not the owner's) or the
 * store's error.  One that matches nothing after its answer was lost
 * reads the record: was the first applied (w)?  want: the commit's
 * answer, compared with the one stored.
 */
static idem_err
owned(rds_store *rs, size_t i, idem_owned_write w, rds_args *a,
    idem_store_req *rq, const idem_stored_response *want, long long *result)
{
	int retried = 0, durable = 1;
	redisReply *rep;
	long long n;
	rds_key k;
	rds_row r;
	idem_err err;
	int ok;

	idem_rds_key(rs, &rq->key, &k);
	if (i == R_COMMIT && idem_rds_batched(rs, IDEM_BATCH_COMMIT, rq, &k, a,
	    (uint64_t)want->headers_len + want->body_len, &rep, &durable,
	    &retried))
		err = IDEM_OK;
	else
		err = idem_rds_call(rs, i, &k, a->n, a->v, a->len, &rep,
		    &retried, i == R_COMMIT && rs->durable ? &durable : NULL);
	if (err != IDEM_OK)
		return err;
	n = idem_rds_ll(rep);
	freeReplyObject(rep);
	if (result != NULL)
		*result = n;
	if (n > 0) {
		if (!durable) {
			idem_log(NULL, IDEM_LOG_WARN, "redis store: a commit "
			    "did not reach [redis] durability in time: a "
			    "failover before it does may lose it");
		}
		return IDEM_OK;
	}
	if (!retried || w == IDEM_OWNED_STAYS)
		return IDEM_ERR_NOT_FOUND;
	if ((err = read_row(rs, &k, &r)) != IDEM_OK)
		return err;
	/* read_row keeps a live committed record's answer only */
	/* one release script deletes or pauses, whichever the record's
	 * progress says: either may be what the first attempt did */
	ok = w == IDEM_OWNED_COMMIT ? idem_owned_answer_stored(r.found,
	    r.state, r.owner, &r.resp, rq->owner, want) :
	    w == IDEM_OWNED_RELEASE || w == IDEM_OWNED_PAUSE ?
	    idem_owned_write_applied(IDEM_OWNED_RELEASE, r.found, r.state,
	    r.owner, rq->owner) || idem_owned_write_applied(IDEM_OWNED_PAUSE,
	    r.found, r.state, r.owner, rq->owner) :
	    idem_owned_write_applied(w, r.found, r.state, r.owner, rq->owner);
	idem_rds_row_clear(&r);
	return ok ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

/* Whether resp is over what one record holds. */
static int
too_large(const rds_store *rs, const idem_stored_response *resp)
{
	return (uint64_t)resp->headers_len > rs->base.limits.headers ||
	    (uint64_t)resp->body_len > rs->base.limits.body;
}

static idem_err
rds_commit(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	rds_store *rs = (rds_store *)s;
	rds_args a = { .n = 0 };
	rds_key k;

	if (too_large(rs, resp))
		return IDEM_ERR_TOO_LARGE;
	idem_rds_key(rs, &rq->key, &k);
	arg_text(&a, rq->owner);
	arg_ll(&a, resp->status);
	arg_bytes(&a, resp->headers, resp->headers_len);
	arg_bytes(&a, resp->body, resp->body_len);
	arg_ll(&a, rq->policy != NULL ? (long long)rq->policy->lifetime_ms *
	    1000 : 0);
	arg_ll(&a, tomb_ms(rq));
	arg_bytes(&a, k.member, k.member_len);
	return owned(rs, R_COMMIT, IDEM_OWNED_COMMIT, &a, rq, resp, NULL);
}

/* Deletes rq's record, or pauses it when it has progress: one script
 * does either, by the record's own progress (rq's has_progress is not
 * needed). */
static idem_err
rds_release(idem_store *s, idem_store_req *rq)
{
	rds_store *rs = (rds_store *)s;
	rds_args a = { .n = 0 };
	rds_key k;

	idem_rds_key(rs, &rq->key, &k);
	arg_text(&a, rq->owner);
	arg_bytes(&a, k.member, k.member_len);
	return owned(rs, R_RELEASE, IDEM_OWNED_RELEASE, &a, rq, NULL, NULL);
}

static idem_err
rds_renew(idem_store *s, idem_store_req *rq)
{
	rds_args a = { .n = 0 };

	arg_text(&a, rq->owner);
	arg_lease(&a, rq);
	return owned((rds_store *)s, R_RENEW, IDEM_OWNED_STAYS, &a, rq, NULL,
	    NULL);
}

static idem_err
rds_checkpoint(idem_store *s, idem_store_req *rq, const idem_progress *p)
{
	rds_args a = { .n = 0 };

	arg_text(&a, rq->owner);
	arg_text(&a, p->phase);
	arg_bytes(&a, p->state, p->state != NULL ? p->state_len : 0);
	arg_lease(&a, rq);
	return owned((rds_store *)s, R_CHECKPOINT, IDEM_OWNED_STAYS, &a, rq,
	    NULL, NULL);
}

static idem_err
rds_mark_unknown(idem_store *s, idem_store_req *rq)
{
	rds_args a = { .n = 0 };

	rds_key k;

	idem_rds_key((rds_store *)s, &rq->key, &k);
	arg_text(&a, rq->owner);
	arg_ll(&a, tomb_ms(rq));
	arg_bytes(&a, k.member, k.member_len);
	return owned((rds_store *)s, R_UNKNOWN, IDEM_OWNED_UNKNOWN, &a, rq,
	    NULL, NULL);
}

static idem_err
rds_resolve(idem_store *s, idem_store_req *rq,
    const idem_stored_response *resp)
{
	rds_store *rs = (rds_store *)s;
	rds_args a = { .n = 0 };
	rds_key k;

	arg_text(&a, rq->owner);
	if (resp == NULL) {
		idem_rds_key(rs, &rq->key, &k);
		arg_bytes(&a, k.member, k.member_len);
		return owned(rs, R_RESOLVE_RELEASE, IDEM_OWNED_RESOLVE_RELEASE,
		    &a, rq, NULL, NULL);
	}
	if (too_large(rs, resp))
		return IDEM_ERR_TOO_LARGE;
	arg_ll(&a, resp->status);
	arg_bytes(&a, resp->headers, resp->headers_len);
	arg_bytes(&a, resp->body, resp->body_len);
	arg_ll(&a, tomb_ms(rq));
	idem_rds_key(rs, &rq->key, &k);
	arg_bytes(&a, k.member, k.member_len);
	return owned(rs, R_RESOLVE, IDEM_OWNED_RESOLVE, &a, rq, NULL, NULL);
}

static idem_err
rds_ping(idem_store *s)
{
	return idem_redis_ping(((rds_store *)s)->r);
}

static void
rds_close(idem_store *s)
{
	rds_store *rs = (rds_store *)s;

	idem_batch_free(rs->base.batch);
	idem_redis_free(rs->r);
	free(rs);
}

static const idem_store_ops rds_ops = {
	.name = "redis",
	.reserve = rds_reserve,
	.commit = rds_commit,
	.release = rds_release,
	.renew = rds_renew,
	.checkpoint = rds_checkpoint,
	.mark_unknown = rds_mark_unknown,
	.purge = idem_rds_purge,
	.stats = idem_rds_stats,
	.close = rds_close,
	.release_prefix = idem_rds_release_prefix,
	.lookup = idem_rds_lookup,
	.census = idem_rds_census,
	.list_unknown = idem_rds_list_unknown,
	.resolve = rds_resolve,
	.ping = rds_ping,
};

/* ------------------------------------------------------------- opening */

uint64_t
idem_store_redis_settle_ms(const idem_config_redis *rc)
{
	uint64_t w = rc->write_timeout > 0 ? rc->write_timeout : 5000,
	    r = rc->read_timeout > 0 ? rc->read_timeout : 5000;

	return w + r + 2000;
}

int
idem_store_redis_reachable(const idem_config_redis *rc, const char *file)
{
	idem_redis *r = NULL;
	int up;

	if (idem_redis_new(rc, file, 1, NULL, 0, &r) != IDEM_OK)
		return 0;
	idem_redis_quiet(r);
	up = idem_redis_ping(r) == IDEM_OK;
	idem_redis_free(r);
	return up;
}

unsigned long long
idem_store_redis_commands(idem_store *s)
{
	if (s == NULL || s->ops != &rds_ops)
		return 0;
	return idem_redis_sent(((rds_store *)s)->r);
}

/* Whether the server has WAITAOF (Redis 7.2), by its version in INFO
 * server.  1, 0, or -1 when it did not answer. */
static int
has_waitaof(idem_redis *r)
{
	char *info = idem_redis_info(r, "server"), *v;
	int major = 0, minor = 0, has;

	if (info == NULL)
		return -1;
	v = strstr(info, "redis_version:");
	if (v != NULL)
		sscanf(v + 14, "%d.%d", &major, &minor);
	has = major > 7 || (major == 7 && minor >= 2);
	free(info);
	return has;
}

/* Whether the server fsyncs its AOF at every write (appendonly yes,
 * appendfsync always), by INFO persistence and CONFIG GET.  1, 0, or -1
 * when it did not answer. */
static int
aof_always(idem_redis *r)
{
	const char *argv[3] = { "CONFIG", "GET", "appendfsync" };
	size_t lens[3] = { 6, 3, 11 };
	char *info = idem_redis_info(r, "persistence");
	redisReply *rep;
	int on, always;

	if (info == NULL)
		return -1;
	on = strstr(info, "aof_enabled:1") != NULL;
	free(info);
	if (idem_redis_run(r, 0, 3, argv, lens, &rep, NULL) != IDEM_OK)
		return -1;
	always = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    rep->element[1]->type == REDIS_REPLY_STRING &&
	    strcmp(rep->element[1]->str, "always") == 0;
	freeReplyObject(rep);
	return on && always;
}

/*
 * Whether the server may evict records: a maxmemory-policy of allkeys-*
 * drops keys that keep no TTL (every record) when memory runs out, and a
 * key evicted runs its handler again.  The volatile-* policies and
 * noeviction never touch them.  Returns IDEM_OK, IDEM_ERR_CONFIG (an
 * evicting policy: logged), or IDEM_OK with a warning when the server
 * does not say (CONFIG renamed away, as managed services do).
 */
static idem_err
eviction_checked(rds_store *rs)
{
	const char *argv[3] = { "CONFIG", "GET", "maxmemory-policy" };
	size_t lens[3] = { 6, 3, 16 };
	redisReply *rep;
	idem_err err = IDEM_OK;

	if (idem_redis_run(rs->r, 0, 3, argv, lens, &rep, NULL) != IDEM_OK)
		return IDEM_ERR_STORE;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    rep->element[1]->type == REDIS_REPLY_STRING) {
		if (strncmp(rep->element[1]->str, "allkeys-", 8) == 0) {
			idem_log(NULL, IDEM_LOG_ERROR, "redis store: the server's "
			    "maxmemory-policy is %s: when its memory runs out it "
			    "evicts records, and a key whose record is evicted "
			    "runs its handler again; set noeviction (a full "
			    "server then refuses reservations: 503)",
			    rep->element[1]->str);
			err = IDEM_ERR_CONFIG;
		}
	} else
		idem_log(NULL, IDEM_LOG_WARN, "redis store: cannot read the "
		    "server's maxmemory-policy (CONFIG GET: %s); it must not be "
		    "allkeys-*, which evicts records", rep->type ==
		    REDIS_REPLY_ERROR ? rep->str : "no answer");
	freeReplyObject(rep);
	return err;
}

/* Sets up [redis] durability on rs's client: WAIT, WAITAOF, or on a server
 * without WAITAOF its own appendfsync always.  Returns IDEM_OK,
 * IDEM_ERR_CONFIG (the server cannot: logged) or IDEM_ERR_STORE. */
static idem_err
durability(rds_store *rs, const idem_config_redis *rc)
{
	int waitaof, always;

	switch (rc->durability) {
	case IDEM_REDIS_DURABLE_NONE:
		return IDEM_OK;
	case IDEM_REDIS_DURABLE_REPLICAS:
		idem_redis_set_wait(rs->r, IDEM_REDIS_WAIT_REPLICAS,
		    rc->durability_replicas, (unsigned)rc->durability_timeout);
		rs->durable = 1;
		return IDEM_OK;
	case IDEM_REDIS_DURABLE_AOF:
		break;
	}
	if ((waitaof = has_waitaof(rs->r)) < 0)
		return IDEM_ERR_STORE;
	if (waitaof) {
		idem_redis_set_wait(rs->r, IDEM_REDIS_WAIT_AOF,
		    rc->durability_replicas, (unsigned)rc->durability_timeout);
		rs->durable = 1;
		return IDEM_OK;
	}
	if ((always = aof_always(rs->r)) < 0)
		return IDEM_ERR_STORE;
	if (!always) {
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: durability = aof: "
		    "this server has no WAITAOF (Redis 7.2 and later) and does "
		    "not fsync every write: set appendonly yes and appendfsync "
		    "always on it, or use durability = replicas or none");
		return IDEM_ERR_CONFIG;
	}
	if (rc->durability_replicas > 0) {
		idem_redis_set_wait(rs->r, IDEM_REDIS_WAIT_REPLICAS,
		    rc->durability_replicas, (unsigned)rc->durability_timeout);
		rs->durable = 1;
	}
	return IDEM_OK;
}

idem_err
idem_store_redis_new(const idem_config_redis *rc, const idem_store_opts *o,
    idem_store **out)
{
	const char *prefix = rc->key_prefix != NULL ? rc->key_prefix :
	    "idemfcgi:";
	rds_store *rs;
	idem_err err;

	if (strlen(prefix) > RDS_PREFIX_MAX || strpbrk(prefix, "{}") != NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: key-prefix '%s': at "
		    "most %d bytes, without '{' or '}'", prefix, RDS_PREFIX_MAX);
		return IDEM_ERR_CONFIG;
	}
	if ((rs = calloc(1, sizeof(*rs))) == NULL)
		return IDEM_ERR_NOMEM;
	rs->base.ops = &rds_ops;
	rs->base.settle_ms = idem_store_redis_settle_ms(rc);
	rs->base.abandon_ms = IDEM_ABANDON_DEFAULT_MS;
	rs->base.limits.headers = RDS_VALUE_MAX;
	rs->base.limits.body = RDS_VALUE_MAX;
	rs->prefix_len = strlen(prefix);
	memcpy(rs->prefix, prefix, rs->prefix_len + 1);
	if ((err = idem_redis_new(rc, o->file, o->pool_size, idem_rds_lua,
	    R_NSCRIPT, &rs->r)) != IDEM_OK) {
		free(rs);
		return err;
	}
	if (o->aside) {
		rs->base.aside = 1;
		*out = &rs->base;
		return IDEM_OK;
	}
	if (idem_redis_ping(rs->r) != IDEM_OK) {
		if (o->may_wait) {
			idem_log(NULL, IDEM_LOG_WARN, "redis store unavailable: "
			    "no server of [redis] host answered (see above); "
			    "serving anyway: keyed routes answer 503 "
			    "IDEMPOTENCY_STORE_UNAVAILABLE until one does");
			rs->base.aside = 1;
			*out = &rs->base;
			return IDEM_OK;
		}
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: no server of [redis] "
		    "host answered (see above)");
		rds_close(&rs->base);
		return IDEM_ERR_STORE;
	}
	if ((err = eviction_checked(rs)) != IDEM_OK ||
	    (err = durability(rs, rc)) != IDEM_OK ||
	    /* a store its opener asks one connection of (the master's
	     * sweep, idemfcgi-admin) has one user at a time */
	    (rc->batch && o->pool_size != 1 && (err = idem_rds_batch_new(rs,
	    rc->batch_rows)) != IDEM_OK)) {
		rds_close(&rs->base);
		return err;
	}
	*out = &rs->base;
	return IDEM_OK;
}
