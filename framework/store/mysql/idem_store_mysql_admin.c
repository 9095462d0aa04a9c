/*
 * idem_store_mysql_admin.c - the MySQL store's operations for
 * idemfcgi-admin and the gauges: a record as it stands, the census of the
 * table, the counts, and the release of a dead worker's keys by the prefix
 * of their owner tokens.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_store_mysql_int.h"

/* Ends the listing of st on c, whose last fetch gave rc (1: it failed,
 * logged here), reads what is left of its rows and puts c back.  Returns
 * IDEM_OK or IDEM_ERR_STORE (the fetch failed). */
static idem_err
fetch_done(mysql_store *ms, idem_mysql_conn *c, MYSQL_STMT *st, int rc)
{
	if (rc == 1) {
		idem_mysql_check(c, mysql_stmt_errno(st));
		idem_mysql_log_error(ms->pool, "fetch", st);
	}
	while (rc == 0 && mysql_stmt_fetch(st) == 0)
		;
	mysql_stmt_free_result(st);
	idem_mysql_put(ms->pool, c);
	return rc == 1 ? IDEM_ERR_STORE : IDEM_OK;
}

idem_err
idem_my_release_prefix(idem_store *s, const char *prefix, idem_store_key **keys,
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
	idem_my_p_init(&p);
	idem_my_p_str(&p, like);
	if ((err = idem_my_run(ms, S_OWNED_BY, &p, &c, NULL, NULL)) != IDEM_OK)
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
		memcpy(k->scope, scope, 32);
		k->key_len = len[1] < IDEM_KEY_MAX ? len[1] : IDEM_KEY_MAX;
		memcpy(k->key, key, k->key_len);
	}
	if (fetch_done(ms, c, st, rc) != IDEM_OK)
		err = IDEM_ERR_STORE;
	if (err != IDEM_OK)
		return err;
	/* as release does: a record with progress is paused, not deleted */
	idem_my_p_init(&p);
	idem_my_p_str(&p, like);
	if ((err = idem_my_exec_count(ms, S_PAUSE_BY, &p, &gone, NULL)) !=
	    IDEM_OK)
		return err;
	idem_my_p_init(&p);
	idem_my_p_str(&p, like);
	return idem_my_exec_count(ms, S_RELEASE_BY, &p, &gone, NULL);
}

idem_err
idem_my_stats(idem_store *s, idem_store_stats *st)
{
	long long v[5] = { 0, 0, 0, 0, 0 };
	MYSQL_BIND b[5];
	my_bool null[5];
	params p;
	idem_err err;
	int found, i;

	memset(null, 0, sizeof(null));
	for (i = 0; i < 5; i++)
		idem_my_r_ll(&b[i], &v[i], &null[i]);
	idem_my_p_init(&p);
	if ((err = idem_my_fetch_one((mysql_store *)s, S_STATS, &p, b, &found))
	    != IDEM_OK)
		return err;
	if (!found)
		return IDEM_ERR_STORE;
	st->entries = (uint64_t)v[0];
	st->in_flight = (uint64_t)v[1];
	st->unknown = (uint64_t)v[2];
	st->unknown_age_ms = v[3] > 0 ? (uint64_t)v[3] / 1000 : 0;
	st->tombstones = (uint64_t)v[4];
	return IDEM_OK;
}

/* ------------------------------------------------------ administration */

/* NUL-terminates a fetched string of length len in a buffer of size. */
static void
terminate(char *buf, size_t size, unsigned long len, my_bool null)
{
	buf[null ? 0 : len < size ? len : size - 1] = '\0';
}

idem_err
idem_my_lookup(idem_store *s, const idem_store_key *k, idem_store_record *out)
{
	MYSQL_BIND b[16];
	unsigned long len[16];
	my_bool null[16];
	char state[16];
	long long age_res = 0, age_lease = 0, exp_in = 0, status = 0, hl = 0,
	    bl = 0, lease_ms = 0, tomb_s = 0;
	params p;
	idem_err err;
	int found, i;

	memset(len, 0, sizeof(len));
	memset(null, 0, sizeof(null));
	idem_my_r_buf(&b[0], MYSQL_TYPE_STRING, state, sizeof(state), &len[0], &null[0]);
	idem_my_r_buf(&b[1], MYSQL_TYPE_BLOB, out->fingerprint, 32, &len[1], &null[1]);
	idem_my_r_buf(&b[2], MYSQL_TYPE_STRING, out->owner, sizeof(out->owner), &len[2],
	    &null[2]);
	idem_my_r_buf(&b[3], MYSQL_TYPE_STRING, out->request_id,
	    sizeof(out->request_id), &len[3], &null[3]);
	idem_my_r_buf(&b[4], MYSQL_TYPE_STRING, out->reserved_at,
	    sizeof(out->reserved_at), &len[4], &null[4]);
	idem_my_r_buf(&b[5], MYSQL_TYPE_STRING, out->lease_at, sizeof(out->lease_at),
	    &len[5], &null[5]);
	idem_my_r_buf(&b[6], MYSQL_TYPE_STRING, out->expires_at,
	    sizeof(out->expires_at), &len[6], &null[6]);
	idem_my_r_ll(&b[7], &age_res, &null[7]);
	idem_my_r_ll(&b[8], &age_lease, &null[8]);
	idem_my_r_ll(&b[9], &exp_in, &null[9]);
	idem_my_r_ll(&b[10], &status, &null[10]);
	idem_my_r_ll(&b[11], &hl, &null[11]);
	idem_my_r_ll(&b[12], &bl, &null[12]);
	idem_my_r_buf(&b[13], MYSQL_TYPE_STRING, out->phase, sizeof(out->phase),
	    &len[13], &null[13]);
	idem_my_r_ll(&b[14], &lease_ms, &null[14]);
	idem_my_r_ll(&b[15], &tomb_s, &null[15]);
	idem_my_p_init(&p);
	idem_my_p_key(&p, k);
	if ((err = idem_my_fetch_one((mysql_store *)s, S_LOOKUP, &p, b, &found))
	    != IDEM_OK)
		return err;
	if (!found) {
		/* no committed row: is an open transaction holding one? */
		idem_my_p_init(&p);
		idem_my_p_key(&p, k);
		err = idem_my_fetch_one((mysql_store *)s, S_PROBE, &p, b, &found);
		return err == IDEM_OK ? IDEM_ERR_NOT_FOUND : err;
	}
	terminate(state, sizeof(state), len[0], null[0]);
	terminate(out->owner, sizeof(out->owner), len[2], null[2]);
	terminate(out->request_id, sizeof(out->request_id), len[3], null[3]);
	terminate(out->reserved_at, sizeof(out->reserved_at), len[4], null[4]);
	terminate(out->lease_at, sizeof(out->lease_at), len[5], null[5]);
	terminate(out->expires_at, sizeof(out->expires_at), len[6], null[6]);
	terminate(out->phase, sizeof(out->phase), len[13], null[13]);
	out->state = IDEM_RECORD_IN_FLIGHT;
	for (i = 0; i < IDEM_RECORD__MAX; i++)
		if (strcmp(state, idem_record_state_names[i]) == 0)
			out->state = (idem_record_state)i;
	out->reserved_age_ms = age_res > 0 ? (uint64_t)age_res / 1000 : 0;
	out->lease_age_ms = age_lease > 0 ? (uint64_t)age_lease / 1000 : 0;
	out->lease_ms = !null[14] && lease_ms > 0 ? (uint64_t)lease_ms : 0;
	out->expires_in_ms = exp_in / 1000;
	out->status = null[10] ? 0 : (int)status;
	out->headers_len = null[11] ? 0 : (size_t)hl;
	out->body_len = null[12] ? 0 : (size_t)bl;
	out->tombstone_ms = !null[15] && tomb_s > 0 ? (uint64_t)tomb_s * 1000 :
	    0;
	return IDEM_OK;
}

idem_err
idem_my_census(idem_store *s, uint64_t inflight_ttl_ms, idem_store_census *out)
{
	mysql_store *ms = (mysql_store *)s;
	long long v[7] = { 0, 0, 0, 0, 0, 0, 0 }, ttl_us =
	    (long long)inflight_ttl_ms * 1000, age = 0, lease = 0;
	MYSQL_BIND b[7];
	unsigned long len[7];
	my_bool null[7];
	params p;
	idem_err err;
	int found, i;

	memset(null, 0, sizeof(null));
	for (i = 0; i < 7; i++)
		idem_my_r_ll(&b[i], &v[i], &null[i]);
	idem_my_p_init(&p);
	idem_my_p_ll(&p, &ttl_us);
	if ((err = idem_my_fetch_one(ms, S_CENSUS, &p, b, &found)) != IDEM_OK)
		return err;
	out->in_flight = (uint64_t)v[0];
	out->stale = (uint64_t)v[1];
	out->committed = (uint64_t)v[2];
	out->expired = (uint64_t)v[3];
	out->paused = (uint64_t)v[4];
	out->unknown = (uint64_t)v[5];
	out->tombstones = (uint64_t)v[6];
	memset(len, 0, sizeof(len));
	memset(null, 0, sizeof(null));
	idem_my_r_buf(&b[0], MYSQL_TYPE_BLOB, out->oldest_key.scope, 32, &len[0],
	    &null[0]);
	idem_my_r_buf(&b[1], MYSQL_TYPE_BLOB, out->oldest_key.key, IDEM_KEY_MAX,
	    &len[1], &null[1]);
	idem_my_r_buf(&b[2], MYSQL_TYPE_STRING, out->oldest_owner,
	    sizeof(out->oldest_owner), &len[2], &null[2]);
	idem_my_r_buf(&b[3], MYSQL_TYPE_STRING, out->oldest_request_id,
	    sizeof(out->oldest_request_id), &len[3], &null[3]);
	idem_my_r_ll(&b[4], &age, &null[4]);
	idem_my_r_ll(&b[5], &lease, &null[5]);
	idem_my_p_init(&p);
	if ((err = idem_my_fetch_one(ms, S_OLDEST, &p, b, &found)) != IDEM_OK)
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

/* The columns of one row of S_LIST_UNKNOWN, fetched into. */
typedef struct unknown_row {
	MYSQL_BIND b[12];
	unsigned long len[12];
	my_bool null[12];
	idem_store_key key;
	idem_store_record rec;
	long long age_res, age_lease, exp_in;
} unknown_row;

/* Binds the columns of S_LIST_UNKNOWN into u. */
static void
bind_unknown(unknown_row *u)
{
	idem_store_record *r = &u->rec;

	memset(u, 0, sizeof(*u));
	idem_my_r_buf(&u->b[0], MYSQL_TYPE_BLOB, u->key.scope, 32, &u->len[0],
	    &u->null[0]);
	idem_my_r_buf(&u->b[1], MYSQL_TYPE_BLOB, u->key.key, IDEM_KEY_MAX,
	    &u->len[1], &u->null[1]);
	idem_my_r_buf(&u->b[2], MYSQL_TYPE_BLOB, r->fingerprint, 32, &u->len[2],
	    &u->null[2]);
	idem_my_r_buf(&u->b[3], MYSQL_TYPE_STRING, r->owner, sizeof(r->owner),
	    &u->len[3], &u->null[3]);
	idem_my_r_buf(&u->b[4], MYSQL_TYPE_STRING, r->request_id,
	    sizeof(r->request_id), &u->len[4], &u->null[4]);
	idem_my_r_buf(&u->b[5], MYSQL_TYPE_STRING, r->phase, sizeof(r->phase),
	    &u->len[5], &u->null[5]);
	idem_my_r_buf(&u->b[6], MYSQL_TYPE_STRING, r->reserved_at,
	    sizeof(r->reserved_at), &u->len[6], &u->null[6]);
	idem_my_r_buf(&u->b[7], MYSQL_TYPE_STRING, r->lease_at,
	    sizeof(r->lease_at), &u->len[7], &u->null[7]);
	idem_my_r_buf(&u->b[8], MYSQL_TYPE_STRING, r->expires_at,
	    sizeof(r->expires_at), &u->len[8], &u->null[8]);
	idem_my_r_ll(&u->b[9], &u->age_res, &u->null[9]);
	idem_my_r_ll(&u->b[10], &u->age_lease, &u->null[10]);
	idem_my_r_ll(&u->b[11], &u->exp_in, &u->null[11]);
}

/* Makes the fetched row u a record (NUL-terminated, ages in ms). */
static void
finish_unknown(unknown_row *u)
{
	idem_store_record *r = &u->rec;

	u->key.key_len = u->len[1] < IDEM_KEY_MAX ? u->len[1] : IDEM_KEY_MAX;
	u->key.key[u->key.key_len] = '\0';
	terminate(r->owner, sizeof(r->owner), u->len[3], u->null[3]);
	terminate(r->request_id, sizeof(r->request_id), u->len[4], u->null[4]);
	terminate(r->phase, sizeof(r->phase), u->len[5], u->null[5]);
	terminate(r->reserved_at, sizeof(r->reserved_at), u->len[6],
	    u->null[6]);
	terminate(r->lease_at, sizeof(r->lease_at), u->len[7], u->null[7]);
	terminate(r->expires_at, sizeof(r->expires_at), u->len[8], u->null[8]);
	r->state = IDEM_RECORD_UNKNOWN;
	r->reserved_age_ms = u->age_res > 0 ? (uint64_t)u->age_res / 1000 : 0;
	r->lease_age_ms = u->age_lease > 0 ? (uint64_t)u->age_lease / 1000 : 0;
	r->expires_in_ms = u->exp_in / 1000;
}

idem_err
idem_my_list_unknown(idem_store *s, size_t max, idem_store_key **keys,
    idem_store_record **recs, size_t *n, int *more)
{
	mysql_store *ms = (mysql_store *)s;
	/* one row past max says there are more */
	long long limit = max < 1000000 ? (long long)max + 1 : 1000001;
	unknown_row *u;
	idem_mysql_conn *c;
	MYSQL_STMT *st;
	size_t cap = 0, got = 0;
	params p;
	idem_err err;
	int rc;

	if ((u = malloc(sizeof(*u))) == NULL)
		return IDEM_ERR_NOMEM;
	idem_my_p_init(&p);
	idem_my_p_ll(&p, &limit);
	if ((err = idem_my_run(ms, S_LIST_UNKNOWN, &p, &c, NULL, NULL)) !=
	    IDEM_OK) {
		free(u);
		return err;
	}
	st = c->stmts[S_LIST_UNKNOWN];
	bind_unknown(u);
	rc = mysql_stmt_bind_result(st, u->b) == 0 ? 0 : 1;
	while (rc == 0 && ((rc = mysql_stmt_fetch(st)) == 0 ||
	    rc == MYSQL_DATA_TRUNCATED)) {
		rc = 0;
		if (got++ >= max) {
			*more = 1;
			continue;
		}
		if (*n == cap) {
			idem_store_key *k;
			idem_store_record *r;
			cap = cap ? cap * 2 : 16;
			if (cap > max)
				cap = max;
			k = realloc(*keys, cap * sizeof(*k));
			if (k != NULL)
				*keys = k;
			r = k != NULL ? realloc(*recs, cap * sizeof(*r)) : NULL;
			if (r == NULL) {
				err = IDEM_ERR_NOMEM;
				break;
			}
			*recs = r;
		}
		finish_unknown(u);
		(*keys)[*n] = u->key;
		(*recs)[*n] = u->rec;
		(*n)++;
		/* the buffers are bound: clear them for the next row */
		memset(&u->key, 0, sizeof(u->key));
		memset(&u->rec, 0, sizeof(u->rec));
	}
	if (fetch_done(ms, c, st, rc) != IDEM_OK)
		err = IDEM_ERR_STORE;
	free(u);
	if (err != IDEM_OK) {
		free(*keys);
		free(*recs);
		*keys = NULL;
		*recs = NULL;
		*n = 0;
		*more = 0;
	}
	return err;
}
