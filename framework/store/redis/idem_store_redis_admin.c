/*
 * idem_store_redis_admin.c - the Redis store's operations off the request
 * path: the purge, the counts (stats and census), a dead worker's keys,
 * the records of unknown outcome, and a record's lookup.
 *
 * All but the lookup go bucket by bucket (RDS_BUCKETS scripts, each on
 * its bucket's slot); the purge walks a bucket's index by expiry, the
 * others every record of the bucket, as MySQL's census scans its table.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_store_redis_int.h"

/* Calls bucket script i on bucket b with the nargs arguments of argv.
 * Returns as idem_redis_eval. */
static idem_err
bucket_call(rds_store *rs, size_t i, unsigned b, int nargs,
    const char **argv, const size_t *lens, redisReply **reply)
{
	const char *av[4];
	size_t al[4];
	char index[RDS_PREFIX_MAX + 8];
	int a;

	al[0] = idem_rds_index(rs, b, index);
	av[0] = index;
	for (a = 0; a < nargs && a < 3; a++) {
		av[1 + a] = argv[a];
		al[1 + a] = lens[a];
	}
	return idem_redis_eval(rs->r, i, 1, nargs, av, al, reply, NULL);
}

/* A number as an argument, into buf. */
static const char *
num(char buf[24], long long v, size_t *len)
{
	*len = (size_t)snprintf(buf, 24, "%lld", v);
	return buf;
}

idem_err
idem_rds_purge(idem_store *s, unsigned max, unsigned *purged)
{
	rds_store *rs = (rds_store *)s;
	char nb[24], ab[24];
	const char *argv[2];
	size_t lens[2];
	redisReply *rep;
	unsigned b, done = 0;
	long long n;
	idem_err err;

	*purged = 0;
	argv[1] = num(ab, (long long)rs->base.abandon_ms * 1000, &lens[1]);
	/* every bucket, until max are done: fewer says none is left */
	for (b = 0; b < RDS_BUCKETS && done < max; b++) {
		argv[0] = num(nb, (long long)(max - done), &lens[0]);
		if ((err = bucket_call(rs, R_PURGE, b, 2, argv, lens, &rep)) !=
		    IDEM_OK)
			return err;
		n = idem_rds_ll(rep);
		freeReplyObject(rep);
		if (n > 0)
			done += (unsigned)n;
	}
	*purged = done < max ? done : max;
	return IDEM_OK;
}

/* R_COUNT's reply: {now, entries, in flight, stale, committed, expired,
 * paused, unknown live, unknown, tombstones, oldest unknown's ra, oldest
 * in flight's member, owner, rid, ra, la}. */
enum { C_NOW, C_ENTRIES, C_FLIGHT, C_STALE, C_COMMITTED, C_EXPIRED, C_PAUSED,
	C_UNKNOWN_LIVE, C_UNKNOWN, C_TOMBS, C_UNKNOWN_RA, C_O_MEMBER,
	C_O_OWNER, C_O_RID, C_O_RA, C_O_LA, C__N };

/* Each bucket's counts, fn called with each reply (borrowed) and arg.
 * Returns IDEM_OK or the store's error. */
static idem_err
count_all(rds_store *rs, uint64_t ttl_ms, void (*fn)(const redisReply
    *const *c, void *arg), void *arg)
{
	const char *argv[1];
	size_t lens[1];
	char tb[24];
	redisReply *rep;
	unsigned b;
	idem_err err;

	argv[0] = num(tb, (long long)ttl_ms, &lens[0]);
	for (b = 0; b < RDS_BUCKETS; b++) {
		if ((err = bucket_call(rs, R_COUNT, b, 1, argv, lens, &rep)) !=
		    IDEM_OK)
			return err;
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements < C__N) {
			freeReplyObject(rep);
			return IDEM_ERR_STORE;
		}
		fn((const redisReply *const *)rep->element, arg);
		freeReplyObject(rep);
	}
	return IDEM_OK;
}

idem_err
idem_rds_stats(idem_store *s, idem_store_stats *st)
{
	rds_store *rs = (rds_store *)s;
	redisReply *rep;
	long long now, ra;
	unsigned b;
	idem_err err;

	/* the records of unknown outcome and the tombstones, each bucket's
	 * kept by its scripts: no record is read (the metrics ask every 30
	 * seconds, each worker); the records and those in flight are not
	 * counted */
	for (b = 0; b < RDS_BUCKETS; b++) {
		if ((err = bucket_call(rs, R_STATS, b, 0, NULL, NULL, &rep)) !=
		    IDEM_OK)
			return err;
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 4) {
			freeReplyObject(rep);
			return IDEM_ERR_STORE;
		}
		now = idem_rds_ll(rep->element[0]);
		st->unknown += (uint64_t)idem_rds_ll(rep->element[1]);
		ra = idem_rds_ll(rep->element[2]);
		if (ra > 0 && now > ra && (uint64_t)(now - ra) / 1000 >
		    st->unknown_age_ms)
			st->unknown_age_ms = (uint64_t)(now - ra) / 1000;
		if (idem_rds_ll(rep->element[3]) > 0)
			st->tombstones += (uint64_t)idem_rds_ll(rep->element[3]);
		freeReplyObject(rep);
	}
	return IDEM_OK;
}

/* A census being added up, and its oldest in-flight record's reservation
 * time (each bucket's ages are by its own now: the oldest is chosen by
 * the time). */
typedef struct census_sum {
	idem_store_census *out;
	long long oldest_ra;
} census_sum;

/* count_all's fn for the census: adds up into the census_sum arg, and
 * keeps the oldest in-flight record. */
static void
add_census(const redisReply *const *c, void *arg)
{
	census_sum *sum = arg;
	idem_store_census *out = sum->out;
	long long now = idem_rds_ll(c[C_NOW]), ra = idem_rds_ll(c[C_O_RA]),
	    la = idem_rds_ll(c[C_O_LA]);
	uint64_t age;

	out->in_flight += (uint64_t)idem_rds_ll(c[C_FLIGHT]);
	out->stale += (uint64_t)idem_rds_ll(c[C_STALE]);
	out->committed += (uint64_t)idem_rds_ll(c[C_COMMITTED]);
	out->expired += (uint64_t)idem_rds_ll(c[C_EXPIRED]);
	out->paused += (uint64_t)idem_rds_ll(c[C_PAUSED]);
	out->unknown += (uint64_t)idem_rds_ll(c[C_UNKNOWN_LIVE]);
	out->tombstones += (uint64_t)idem_rds_ll(c[C_TOMBS]);
	if (ra <= 0 || c[C_O_MEMBER]->type != REDIS_REPLY_STRING)
		return;
	age = now > ra ? (uint64_t)(now - ra) / 1000 : 0;
	if (out->has_oldest && ra >= sum->oldest_ra)
		return;
	if (idem_rds_member_key(c[C_O_MEMBER]->str, c[C_O_MEMBER]->len,
	    &out->oldest_key) != 0)
		return;
	out->has_oldest = 1;
	sum->oldest_ra = ra;
	out->oldest_age_ms = age;
	out->oldest_lease_age_ms = now > la ? (uint64_t)(now - la) / 1000 : 0;
	idem_copy_string(out->oldest_owner, sizeof(out->oldest_owner),
	    c[C_O_OWNER]->type == REDIS_REPLY_STRING ? c[C_O_OWNER]->str : "");
	idem_copy_string(out->oldest_request_id,
	    sizeof(out->oldest_request_id), c[C_O_RID]->type ==
	    REDIS_REPLY_STRING ? c[C_O_RID]->str : "");
}

idem_err
idem_rds_census(idem_store *s, uint64_t inflight_ttl_ms, idem_store_census *out)
{
	census_sum sum = { out, 0 };

	return count_all((rds_store *)s, inflight_ttl_ms, add_census, &sum);
}

idem_err
idem_rds_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n)
{
	rds_store *rs = (rds_store *)s;
	const char *argv[1] = { prefix };
	size_t lens[1] = { strlen(prefix) }, i, cap = 0;
	idem_store_key *out = NULL, *grown;
	redisReply *rep;
	unsigned b;
	idem_err err;

	*keys = NULL;
	*n = 0;
	/* an empty prefix would be every owner's: never a dead worker's */
	if (lens[0] == 0)
		return IDEM_ERR_INVALID;
	for (b = 0; b < RDS_BUCKETS; b++) {
		if ((err = bucket_call(rs, R_RELEASE_PREFIX, b, 1, argv, lens,
		    &rep)) != IDEM_OK) {
			free(out);
			*n = 0;
			return err;
		}
		for (i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements;
		    i++) {
			const redisReply *m = rep->element[i];
			if (*n == cap) {
				cap = cap > 0 ? 2 * cap : 16;
				if ((grown = realloc(out, cap * sizeof(*out))) ==
				    NULL) {
					freeReplyObject(rep);
					free(out);
					*n = 0;
					return IDEM_ERR_NOMEM;
				}
				out = grown;
			}
			if (m->type == REDIS_REPLY_STRING &&
			    idem_rds_member_key(m->str, m->len, &out[*n]) == 0)
				(*n)++;
		}
		freeReplyObject(rep);
	}
	*keys = out;
	return IDEM_OK;
}

/* A reply's string as text into dst (size bytes), cut to fit. */
static void
text_of(const redisReply *v, char *dst, size_t size)
{
	idem_copy_string(dst, size, v != NULL && v->type == REDIS_REPLY_STRING ?
	    v->str : "");
}

/* Microseconds as ms, 0 for none or negative. */
static uint64_t
ms_of(long long us)
{
	return us > 0 ? (uint64_t)us / 1000 : 0;
}

idem_err
idem_rds_lookup(idem_store *s, const idem_store_key *k, idem_store_record *out)
{
	rds_store *rs = (rds_store *)s;
	const redisReply *const *e;
	redisReply *rep;
	long long now, ra, la, ea;
	rds_key rk;
	idem_err err;

	idem_rds_key(rs, k, &rk);
	if ((err = idem_rds_call(rs, R_LOOKUP, &rk, 0, NULL, NULL, &rep, NULL,
	    NULL)) != IDEM_OK)
		return err;
	/* {now, st, fp, o, r, ra, la, lm, ea, s, len h, len b, ph, tm} */
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 14) {
		freeReplyObject(rep);
		return IDEM_ERR_NOT_FOUND;
	}
	e = (const redisReply *const *)rep->element;
	memset(out, 0, sizeof(*out));
	now = idem_rds_ll(e[0]);
	out->state = e[1]->type == REDIS_REPLY_STRING ? idem_rds_state(e[1]->str,
	    e[1]->len) : IDEM_RECORD__MAX;
	if (out->state == IDEM_RECORD__MAX)
		out->state = IDEM_RECORD_IN_FLIGHT;
	if (e[2]->type == REDIS_REPLY_STRING && e[2]->len == 32)
		memcpy(out->fingerprint, e[2]->str, 32);
	text_of(e[3], out->owner, sizeof(out->owner));
	text_of(e[4], out->request_id, sizeof(out->request_id));
	ra = idem_rds_ll(e[5]);
	la = idem_rds_ll(e[6]);
	ea = idem_rds_ll(e[8]);
	idem_rds_utc(ra, out->reserved_at);
	idem_rds_utc(la, out->lease_at);
	idem_rds_utc(ea, out->expires_at);
	out->reserved_age_ms = ms_of(now - ra);
	out->lease_age_ms = ms_of(now - la);
	out->lease_ms = (uint64_t)idem_rds_ll(e[7]);
	out->expires_in_ms = (ea - now) / 1000;
	out->status = (int)idem_rds_ll(e[9]);
	out->headers_len = (size_t)idem_rds_ll(e[10]);
	out->body_len = (size_t)idem_rds_ll(e[11]);
	text_of(e[12], out->phase, sizeof(out->phase));
	out->tombstone_ms = (uint64_t)idem_rds_ll(e[13]);
	freeReplyObject(rep);
	return IDEM_OK;
}

/* A record of unknown outcome and its key, while they are sorted: its
 * times by the server's clock (us), its ages made from them once every
 * bucket is read, against one time. */
typedef struct unknown_rec {
	idem_store_key k;
	idem_store_record r;
	long long ra, la, ea;
} unknown_rec;

/* One record of unknown outcome of R_UNKNOWNS (8 values at e) into *u, its
 * ages left to fill.  Returns 0, or -1 when it is not one. */
static int
unknown_of(const redisReply *const *e, unknown_rec *u)
{
	idem_store_record *r = &u->r;

	if (e[0]->type != REDIS_REPLY_STRING || idem_rds_member_key(e[0]->str,
	    e[0]->len, &u->k) != 0)
		return -1;
	memset(r, 0, sizeof(*r));
	u->ra = idem_rds_ll(e[5]);
	u->la = idem_rds_ll(e[6]);
	u->ea = idem_rds_ll(e[7]);
	r->state = IDEM_RECORD_UNKNOWN;
	if (e[1]->type == REDIS_REPLY_STRING && e[1]->len == 32)
		memcpy(r->fingerprint, e[1]->str, 32);
	text_of(e[2], r->owner, sizeof(r->owner));
	text_of(e[3], r->request_id, sizeof(r->request_id));
	text_of(e[4], r->phase, sizeof(r->phase));
	idem_rds_utc(u->ra, r->reserved_at);
	idem_rds_utc(u->la, r->lease_at);
	idem_rds_utc(u->ea, r->expires_at);
	return 0;
}

/* Orders two records of unknown outcome: the one marked longest ago (the
 * oldest lease) first, then by key. */
static int
by_lease(const void *a, const void *b)
{
	const unknown_rec *x = a, *y = b;
	int c;

	if (x->la != y->la)
		return x->la < y->la ? -1 : 1;
	c = memcmp(x->k.scope, y->k.scope, sizeof(x->k.scope));
	return c != 0 ? c : strcmp(x->k.key, y->k.key);
}

/* Adds the records of one bucket's R_UNKNOWNS reply to *all (*total of
 * *cap), and keeps the latest server time seen in *now.  Returns IDEM_OK
 * or IDEM_ERR_NOMEM. */
static idem_err
add_unknowns(const redisReply *rep, unknown_rec **all, size_t *total,
    size_t *cap, long long *now)
{
	unknown_rec *grown;
	size_t i;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0)
		return IDEM_OK;
	if (idem_rds_ll(rep->element[0]) > *now)
		*now = idem_rds_ll(rep->element[0]);
	for (i = 1; i + 8 <= rep->elements; i += 8) {
		if (*total == *cap) {
			*cap = *cap > 0 ? 2 * *cap : 16;
			if ((grown = realloc(*all, *cap * sizeof(**all))) == NULL)
				return IDEM_ERR_NOMEM;
			*all = grown;
		}
		if (unknown_of((const redisReply *const *)rep->element + i,
		    &(*all)[*total]) == 0)
			(*total)++;
	}
	return IDEM_OK;
}

idem_err
idem_rds_list_unknown(idem_store *s, size_t max, idem_store_key **keys,
    idem_store_record **recs, size_t *n, int *more)
{
	rds_store *rs = (rds_store *)s;
	char lb[24];
	const char *argv[1];
	size_t lens[1], cap = 0, i, total = 0;
	unknown_rec *all = NULL;
	long long now = 0;
	redisReply *rep;
	unsigned b;
	idem_err err = IDEM_OK;

	*keys = NULL;
	*recs = NULL;
	*n = 0;
	*more = 0;
	/* each bucket's oldest max + 1: one past max says there are more */
	argv[0] = num(lb, (long long)(max < 1000000 ? max + 1 : 1000001),
	    &lens[0]);
	for (b = 0; b < RDS_BUCKETS && err == IDEM_OK; b++) {
		if ((err = bucket_call(rs, R_UNKNOWNS, b, 1, argv, lens, &rep)) !=
		    IDEM_OK)
			break;
		err = add_unknowns(rep, &all, &total, &cap, &now);
		freeReplyObject(rep);
	}
	if (err == IDEM_OK && total > 0) {
		qsort(all, total, sizeof(*all), by_lease);
		*n = total < max ? total : max;
		*more = total > max;
		*keys = calloc(*n, sizeof(**keys));
		*recs = calloc(*n, sizeof(**recs));
		if (*keys == NULL || *recs == NULL) {
			free(*keys);
			free(*recs);
			*keys = NULL;
			*recs = NULL;
			*n = 0;
			*more = 0;
			err = IDEM_ERR_NOMEM;
		}
		/* every age against one time: the buckets were read one
		 * after another, each at its own */
		for (i = 0; *keys != NULL && i < *n; i++) {
			(*keys)[i] = all[i].k;
			(*recs)[i] = all[i].r;
			(*recs)[i].reserved_age_ms = ms_of(now - all[i].ra);
			(*recs)[i].lease_age_ms = ms_of(now - all[i].la);
			(*recs)[i].expires_in_ms = (all[i].ea - now) / 1000;
		}
	}
	free(all);
	return err;
}
