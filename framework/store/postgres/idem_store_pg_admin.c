/*
 * idem_store_pg_admin.c - the PostgreSQL store's operations for
 * idemfcgi-admin and the gauges: a record as it stands, the census of the
 * table, the counts, the records of unknown outcome, and the release of a
 * dead worker's keys by the prefix of their owner tokens.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_store_pg_int.h"

/* Copies the bytea column col of row i of res into k (scope col, key
 * col + 1). */
static void
key_of(const PGresult *res, int i, int col, idem_store_key *k)
{
	size_t n = (size_t)PQgetlength(res, i, col + 1);

	memset(k, 0, sizeof(*k));
	if (PQgetlength(res, i, col) == 32)
		memcpy(k->scope, PQgetvalue(res, i, col), 32);
	k->key_len = n < IDEM_KEY_MAX ? n : IDEM_KEY_MAX;
	memcpy(k->key, PQgetvalue(res, i, col + 1), k->key_len);
}

idem_err
idem_pgs_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n)
{
	pg_store *ps = (pg_store *)s;
	char upper[IDEM_OWNER_MAX + 2];
	unsigned long long gone;
	idem_pg_params p;
	PGresult *res;
	idem_err err;
	int i, rows;

	/* prefixes are hex and '.': every owner that starts with one sorts
	 * (COLLATE "C") from it to it with DEL appended */
	if (strlen(prefix) > IDEM_OWNER_MAX || prefix[0] == '\0' ||
	    strchr(prefix, '\x7f') != NULL)
		return IDEM_ERR_INVALID;
	snprintf(upper, sizeof(upper), "%s\x7f", prefix);
	idem_pg_p_init(&p);
	idem_pg_p_text(&p, prefix);
	idem_pg_p_text(&p, upper);
	if ((err = idem_pgs_run(ps, P_OWNED_BY, &p, NULL, &res, NULL)) !=
	    IDEM_OK)
		return err;
	rows = PQntuples(res);
	if (rows > 0) {
		idem_store_key *k = realloc(*keys, (*n + (size_t)rows) *
		    sizeof(*k));
		if (k == NULL) {
			PQclear(res);
			return IDEM_ERR_NOMEM;
		}
		*keys = k;
		for (i = 0; i < rows; i++)
			key_of(res, i, 0, &(*keys)[(*n)++]);
	}
	PQclear(res);
	/* as release does: a record with progress is paused, not deleted */
	if ((err = idem_pgs_count(ps, P_PAUSE_BY, &p, NULL, &gone, NULL)) !=
	    IDEM_OK)
		return err;
	return idem_pgs_count(ps, P_RELEASE_BY, &p, NULL, &gone, NULL);
}

idem_err
idem_pgs_stats(idem_store *s, idem_store_stats *st)
{
	idem_pg_params p;
	PGresult *res;
	idem_err err;
	long long age;

	idem_pg_p_init(&p);
	if ((err = idem_pgs_run((pg_store *)s, P_STATS, &p, NULL, &res, NULL))
	    != IDEM_OK)
		return err;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return IDEM_ERR_STORE;
	}
	st->entries = (uint64_t)idem_pg_ll(res, 0, 0);
	st->in_flight = (uint64_t)idem_pg_ll(res, 0, 1);
	st->unknown = (uint64_t)idem_pg_ll(res, 0, 2);
	age = idem_pg_ll(res, 0, 3);
	st->unknown_age_ms = age > 0 ? (uint64_t)age / 1000 : 0;
	st->tombstones = (uint64_t)idem_pg_ll(res, 0, 4);
	PQclear(res);
	return IDEM_OK;
}

/* A state's name as the table holds it. */
static idem_record_state
state_of(const char *name)
{
	int i;

	for (i = 0; i < IDEM_RECORD__MAX; i++)
		if (strcmp(name, idem_record_state_names[i]) == 0)
			return (idem_record_state)i;
	return IDEM_RECORD_IN_FLIGHT;
}

/* Microseconds as ms, 0 for none or negative. */
static uint64_t
ms_of(long long us)
{
	return us > 0 ? (uint64_t)us / 1000 : 0;
}

idem_err
idem_pgs_lookup(idem_store *s, const idem_store_key *k, idem_store_record *out)
{
	idem_pg_params p;
	PGresult *res;
	char state[16];
	idem_err err;

	idem_pg_p_init(&p);
	idem_pgs_p_key(&p, k);
	if ((err = idem_pgs_run((pg_store *)s, P_LOOKUP, &p, NULL, &res, NULL))
	    != IDEM_OK)
		return err;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return IDEM_ERR_NOT_FOUND;
	}
	idem_pgs_str(res, 0, 0, state, sizeof(state));
	out->state = state_of(state);
	if (PQgetlength(res, 0, 1) == 32)
		memcpy(out->fingerprint, PQgetvalue(res, 0, 1), 32);
	idem_pgs_str(res, 0, 2, out->owner, sizeof(out->owner));
	idem_pgs_str(res, 0, 3, out->request_id, sizeof(out->request_id));
	idem_pgs_str(res, 0, 4, out->reserved_at, sizeof(out->reserved_at));
	idem_pgs_str(res, 0, 5, out->lease_at, sizeof(out->lease_at));
	idem_pgs_str(res, 0, 6, out->expires_at, sizeof(out->expires_at));
	out->reserved_age_ms = ms_of(idem_pg_ll(res, 0, 7));
	out->lease_age_ms = ms_of(idem_pg_ll(res, 0, 8));
	out->expires_in_ms = idem_pg_ll(res, 0, 9) / 1000;
	out->status = (int)idem_pg_ll(res, 0, 10);
	out->headers_len = (size_t)idem_pg_ll(res, 0, 11);
	out->body_len = (size_t)idem_pg_ll(res, 0, 12);
	idem_pgs_str(res, 0, 13, out->phase, sizeof(out->phase));
	out->lease_ms = (uint64_t)idem_pg_ll(res, 0, 14);
	out->tombstone_ms = (uint64_t)ms_of(idem_pg_ll(res, 0, 15) * 1000000);
	PQclear(res);
	return IDEM_OK;
}

idem_err
idem_pgs_census(idem_store *s, uint64_t inflight_ttl_ms, idem_store_census *out)
{
	pg_store *ps = (pg_store *)s;
	idem_pg_params p;
	PGresult *res;
	idem_err err;

	/* every record keeps its lease's length: the ttl judges none */
	(void)inflight_ttl_ms;
	idem_pg_p_init(&p);
	if ((err = idem_pgs_run(ps, P_CENSUS, &p, NULL, &res, NULL)) != IDEM_OK)
		return err;
	if (PQntuples(res) == 1) {
		out->in_flight = (uint64_t)idem_pg_ll(res, 0, 0);
		out->stale = (uint64_t)idem_pg_ll(res, 0, 1);
		out->committed = (uint64_t)idem_pg_ll(res, 0, 2);
		out->expired = (uint64_t)idem_pg_ll(res, 0, 3);
		out->paused = (uint64_t)idem_pg_ll(res, 0, 4);
		out->unknown = (uint64_t)idem_pg_ll(res, 0, 5);
		out->tombstones = (uint64_t)idem_pg_ll(res, 0, 6);
	}
	PQclear(res);
	if ((err = idem_pgs_run(ps, P_OLDEST, &p, NULL, &res, NULL)) != IDEM_OK)
		return err;
	if (PQntuples(res) == 1) {
		out->has_oldest = 1;
		key_of(res, 0, 0, &out->oldest_key);
		idem_pgs_str(res, 0, 2, out->oldest_owner,
		    sizeof(out->oldest_owner));
		idem_pgs_str(res, 0, 3, out->oldest_request_id,
		    sizeof(out->oldest_request_id));
		out->oldest_age_ms = ms_of(idem_pg_ll(res, 0, 4));
		out->oldest_lease_age_ms = ms_of(idem_pg_ll(res, 0, 5));
	}
	PQclear(res);
	return IDEM_OK;
}

idem_err
idem_pgs_list_unknown(idem_store *s, size_t max, idem_store_key **keys,
    idem_store_record **recs, size_t *n, int *more)
{
	/* one row past max says there are more */
	long long limit = max < 1000000 ? (long long)max + 1 : 1000001;
	idem_pg_params p;
	PGresult *res;
	idem_err err;
	size_t i, rows, take;

	idem_pg_p_init(&p);
	idem_pg_p_ll(&p, limit);
	if ((err = idem_pgs_run((pg_store *)s, P_LIST_UNKNOWN, &p, NULL, &res,
	    NULL)) != IDEM_OK)
		return err;
	rows = (size_t)PQntuples(res);
	take = rows < max ? rows : max;
	*more = rows > max;
	if (take > 0) {
		*keys = calloc(take, sizeof(**keys));
		*recs = calloc(take, sizeof(**recs));
		if (*keys == NULL || *recs == NULL) {
			free(*keys);
			free(*recs);
			*keys = NULL;
			*recs = NULL;
			*more = 0;
			PQclear(res);
			return IDEM_ERR_NOMEM;
		}
	}
	for (i = 0; i < take; i++) {
		idem_store_record *r = &(*recs)[i];
		int row = (int)i;

		key_of(res, row, 0, &(*keys)[i]);
		r->state = IDEM_RECORD_UNKNOWN;
		if (PQgetlength(res, row, 2) == 32)
			memcpy(r->fingerprint, PQgetvalue(res, row, 2), 32);
		idem_pgs_str(res, row, 3, r->owner, sizeof(r->owner));
		idem_pgs_str(res, row, 4, r->request_id, sizeof(r->request_id));
		idem_pgs_str(res, row, 5, r->phase, sizeof(r->phase));
		idem_pgs_str(res, row, 6, r->reserved_at,
		    sizeof(r->reserved_at));
		idem_pgs_str(res, row, 7, r->lease_at, sizeof(r->lease_at));
		idem_pgs_str(res, row, 8, r->expires_at, sizeof(r->expires_at));
		r->reserved_age_ms = ms_of(idem_pg_ll(res, row, 9));
		r->lease_age_ms = ms_of(idem_pg_ll(res, row, 10));
		r->expires_in_ms = idem_pg_ll(res, row, 11) / 1000;
	}
	*n = take;
	PQclear(res);
	return IDEM_OK;
}
