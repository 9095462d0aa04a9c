/*
 * idem_store_pg_batch.c - group commit for the PostgreSQL store: the
 * reservations' INSERTs and the commits' UPDATEs that the threads of one
 * process send at the same time go to the database as one statement
 * each, one transaction, so PostgreSQL plans, locks, logs and (at
 * synchronous_commit = on) flushes once for several requests.  The lanes
 * are the engine's (idem_batch.c); this file is what their statements
 * are and what they did.
 *
 *   reservations  P_RESERVE for every row at once (idem_pgs_batch_sql):
 *                 INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO
 *                 NOTHING, each row answered with whether it inserted
 *                 and, when not, the row it met; a request goes on from
 *                 that row (replay, conflict, takeover) as from its own
 *                 statement's.
 *   commits       P_COMMIT for every row: UPDATE ... FROM unnest(arrays),
 *                 owner-checked row by row, RETURNING the rows it
 *                 stored; a request whose row it did not store commits on
 *                 its own (fenced, or not yet in the row's latest
 *                 version), so a fenced request stays fenced and no other
 *                 is.
 *
 * A lone request sends its own statement, in its lane (one connection's
 * latency and statements are unchanged).  The lanes' statements, a lone
 * request's too, run on connections of their own whose sessions wait a
 * millisecond at most for a row lock: one row held by a transaction
 * would stall every request behind it.  When a statement
 * fails (that lock, a deadlock, a lost connection, values too long),
 * every request it carried sends its own statement as if there were no
 * batching; one that may have been applied before its answer was lost is
 * recognised as a request's own is (its row, with its owner).  Releases,
 * renewals, takeovers and the like are never batched.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_batch.h"
#include "idem_log.h"
#include "idem_store_pg_int.h"

/* An answer larger than this commits on its own: batching it saves
 * nothing worth the copy. */
#define BATCH_ANSWER_MAX (16 * 1024)
/* The arrays of a lane's statement. */
#define LANE_ARRAYS 8

/* The element types of the arrays (pg_type.oid). */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25

/* What a lane's statement did for one request (idem_batch_member's
 * result). */
enum {
	M_APPLIED = 1, /* inserted; committed */
	M_FOUND,       /* insert: the key was there, its row read */
	M_MISSED,      /* commit of one: matched no row (its latest version:
	                * fenced, or stored already) */
	M_ALONE,       /* nothing done: send your own statement */
	M_UNSURE,      /* maybe applied (a lost answer): send your own,
	                * which recognises a row of yours */
	M_HUNG         /* maybe applied, and the server answered nothing
	                * within the timeouts: the store is away (a second
	                * statement would wait as long again) */
};

/* One request's row in a lane (all borrowed). */
typedef struct pg_lane_row {
	pg_reserve_args *a;                 /* insert */
	pg_row *r;                          /* insert: the row met */
	int *inserted;                      /* insert */
	idem_store_req *rq;                 /* commit */
	const idem_stored_response *resp;   /* commit */
} pg_lane_row;

#define ROW(m) ((pg_lane_row *)(m)->row)

/* A binary array being built (array_recv's format). */
typedef struct pg_array {
	char *buf;
	size_t len, cap;
} pg_array;

struct idem_pg_batch {
	pg_store *ps;                       /* borrowed */
	idem_batch *engine;
	idem_pg_pool *pool;                 /* the lanes' connections */
	pg_array arrays[IDEM_BATCH_LANES][LANE_ARRAYS];  /* the leaders' */
};

/* Appends len bytes of data to a.  Returns 0 or -1 (no memory). */
static int
put(pg_array *a, const void *data, size_t len)
{
	if (a->len + len > a->cap) {
		size_t cap = a->cap > 0 ? a->cap : 256;
		char *b;

		while (cap < a->len + len)
			cap *= 2;
		if ((b = realloc(a->buf, cap)) == NULL)
			return -1;
		a->buf = b;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, data, len);
	a->len += len;
	return 0;
}

/* Appends v, 4 bytes in network order. */
static int
put32(pg_array *a, uint32_t v)
{
	unsigned char b[4] = { v >> 24, v >> 16, v >> 8, v };

	return put(a, b, 4);
}

/* Starts a as an array of n elements of type oid (one dimension, no
 * NULLs, numbered from 1).  Returns 0 or -1 (no memory). */
static int
arr_begin(pg_array *a, uint32_t oid, unsigned n)
{
	a->len = 0;
	if (put32(a, 1) < 0 || put32(a, 0) < 0 || put32(a, oid) < 0 ||
	    put32(a, n) < 0 || put32(a, 1) < 0)
		return -1;
	return 0;
}

/* Appends an element of len bytes.  Returns 0 or -1. */
static int
arr_bytes(pg_array *a, const void *data, size_t len)
{
	if (put32(a, (uint32_t)len) < 0 ||
	    put(a, data != NULL ? data : "", len) < 0)
		return -1;
	return 0;
}

/* Appends an int4 element.  Returns 0 or -1. */
static int
arr_int4(pg_array *a, long long v)
{
	if (put32(a, 4) < 0 || put32(a, (uint32_t)v) < 0)
		return -1;
	return 0;
}

/* Appends an int8 element, its high half first.  Returns 0 or -1. */
static int
arr_int8(pg_array *a, long long v)
{
	uint64_t u = (uint64_t)v;

	if (put32(a, 8) < 0 || put32(a, (uint32_t)(u >> 32)) < 0 ||
	    put32(a, (uint32_t)u) < 0)
		return -1;
	return 0;
}

/* Fills the arrays of lane w for the n rows and binds them in p.
 * Returns 0 or -1 (no memory). */
static int
bind_rows(idem_pg_batch *b, int w, idem_batch_member *const *rows,
    unsigned n, idem_pg_params *p)
{
	static const uint32_t types[IDEM_BATCH_LANES][LANE_ARRAYS] = {
		{ OID_BYTEA, OID_BYTEA, OID_BYTEA, OID_TEXT, OID_TEXT,
		    OID_INT4, OID_INT8 },
		{ OID_BYTEA, OID_BYTEA, OID_TEXT, OID_INT4, OID_BYTEA,
		    OID_BYTEA, OID_INT8, OID_INT4 },
	};
	/* the arrays of each lane's statement: the commits' tombstone_s */
	static const unsigned narrays[IDEM_BATCH_LANES] = { 7, 8 };
	pg_array *a = b->arrays[w];
	unsigned i, j;
	int bad = 0;

	for (j = 0; j < narrays[w]; j++)
		bad |= arr_begin(&a[j], types[w][j], n);
	for (i = 0; i < n && !bad; i++) {
		const pg_lane_row *r = ROW(rows[i]);
		const idem_store_key *k = rows[i]->key;

		bad |= arr_bytes(&a[0], k->scope, 32) |
		    arr_bytes(&a[1], k->key, k->key_len);
		if (w == IDEM_BATCH_INSERT) {
			const idem_store_req *rq = r->a->rq;

			bad |= arr_bytes(&a[2], rq->fp, 32) |
			    arr_bytes(&a[3], rq->owner, strlen(rq->owner)) |
			    arr_bytes(&a[4], rq->request_id,
			    strlen(rq->request_id)) |
			    arr_int4(&a[5], r->a->lease_ms) |
			    arr_int8(&a[6], r->a->life_us);
			continue;
		}
		bad |= arr_bytes(&a[2], r->rq->owner, strlen(r->rq->owner)) |
		    arr_int4(&a[3], r->resp->status) |
		    arr_bytes(&a[4], r->resp->headers, r->resp->headers_len) |
		    arr_bytes(&a[5], r->resp->body, r->resp->body_len) |
		    arr_int8(&a[6], (long long)r->rq->policy->lifetime_ms *
		    1000) |
		    arr_int4(&a[7], idem_pgs_tomb_s(r->rq->policy));
	}
	if (bad)
		return -1;
	idem_pg_p_init(p);
	for (j = 0; j < narrays[w]; j++)
		idem_pg_p_bytes(p, a[j].buf, a[j].len);
	return 0;
}

/* The row number (1..n) of row i of res's column col, or 0. */
static unsigned
row_number(const PGresult *res, int i, int col, unsigned n)
{
	long long v = idem_pg_ll(res, i, col);

	return v >= 1 && v <= (long long)n ? (unsigned)v : 0;
}

/* Whether keys a and b are the same. */
static int
same_key(const idem_store_key *a, const idem_store_key *b)
{
	return a->key_len == b->key_len && memcmp(a->scope, b->scope, 32) == 0 &&
	    memcmp(a->key, b->key, a->key_len) == 0;
}

/* Fills r, found by nobody's read, with the row that row w of the same
 * statement inserted for the same key (a key sent twice: the statement's
 * read does not see its own insert), as it is now: in flight, held by
 * w's request since this statement. */
static void
row_inserted_by(pg_row *r, const idem_batch_member *w)
{
	const pg_lane_row *lw = ROW(w);

	memset(r, 0, sizeof(*r));
	r->found = 1;
	r->state = IDEM_RECORD_IN_FLIGHT;
	memcpy(r->fp, lw->a->rq->fp, 32);
	idem_copy_string(r->owner, sizeof(r->owner), lw->a->rq->owner);
	idem_copy_string(r->request_id, sizeof(r->request_id),
	    lw->a->rq->request_id);
	r->lease_ms = lw->a->lease_ms;
	r->left_us = lw->a->life_us;
}

/* Sets each row's result from res, the reservations' answer: applied,
 * or found with its row read (M_ALONE for a row the answer lacks, or when
 * memory ran out reading it). */
static void
read_reserved(const PGresult *res, idem_batch_member *const *rows,
    unsigned n)
{
	unsigned i, j;
	int t;

	for (t = 0; t < PQntuples(res); t++) {
		unsigned at = row_number(res, t, 0, n);
		pg_lane_row *r;

		if (at == 0 || rows[at - 1]->result != M_ALONE)
			continue;
		r = ROW(rows[at - 1]);
		if (idem_pg_ll(res, t, 1) != 0) {
			*r->inserted = 1;
			rows[at - 1]->result = M_APPLIED;
		} else if (idem_pgs_row(res, t, 2, r->r) == IDEM_OK)
			rows[at - 1]->result = M_FOUND;
	}
	for (i = 0; i < n; i++) {
		if (rows[i]->result != M_FOUND || ROW(rows[i])->r->found)
			continue;
		for (j = 0; j < n; j++)
			if (rows[j]->result == M_APPLIED &&
			    same_key(rows[j]->key, rows[i]->key))
				row_inserted_by(ROW(rows[i])->r, rows[j]);
	}
}

/* Binds in p the statement of lane w for its n rows: a lone request's
 * own statement, or the lane's arrays.  Returns the statement's index on
 * the lanes' connections, or -1 (no memory). */
static int
bind_statement(idem_pg_batch *b, int w, idem_batch_member *const *rows,
    unsigned n, idem_pg_params *p)
{
	const pg_lane_row *r = ROW(rows[0]);

	if (n > 1)
		return bind_rows(b, w, rows, n, p) == 0 ? w : -1;
	if (w == IDEM_BATCH_INSERT) {
		idem_pgs_p_reserve(p, r->a);
		return PG_LANE_RESERVE_1;
	}
	idem_pgs_p_commit(p, r->rq, r->resp);
	idem_pgs_p_key(p, &r->rq->key);
	idem_pg_p_text(p, r->rq->owner);
	return PG_LANE_COMMIT_1;
}

/* Sets a lone request's result from res, its own statement's answer. */
static void
read_lone(const PGresult *res, int w, idem_batch_member *m)
{
	pg_lane_row *r = ROW(m);

	if (w == IDEM_BATCH_COMMIT) {
		m->result = strcmp(PQcmdTuples((PGresult *)res), "1") == 0 ?
		    M_APPLIED : M_MISSED;
		return;
	}
	if (PQntuples(res) == 1 && idem_pg_ll(res, 0, 0) != 0) {
		*r->inserted = 1;
		m->result = M_APPLIED;
	} else if (idem_pgs_row(res, 0, 1, r->r) == IDEM_OK)
		m->result = M_FOUND;
}

/* Sends lane w's statement for the n rows and sets each one's result. */
static void
send_batch(idem_pg_batch *b, int w, idem_batch_member *const *rows,
    unsigned n)
{
	pg_store *ps = b->ps;
	int lose = w == IDEM_BATCH_INSERT ? P_RESERVE : P_COMMIT, i;
	idem_pg_params p;
	idem_pg_conn *c;
	PGresult *res;
	char state[6];
	unsigned k;

	if ((i = bind_statement(b, w, rows, n, &p)) < 0 ||
	    (c = idem_pg_get(b->pool)) == NULL)
		return;
	atomic_fetch_add(&ps->sent, 1);
	if (idem_pg_exec(c, (size_t)i, &p, PG_LANE_LOCK_MS, &res, state) !=
	    IDEM_OK) {
		/* a lock held, a deadlock: the requests' own statements meet
		 * it as they would without batching (and count it); a lost
		 * connection: it may have been applied */
		if (idem_pg_error_code(state) != IDEM_ERR_BUSY || c->broken)
			idem_pg_log_error(c, "batched statement");
		if (c->broken)
			for (k = 0; k < n; k++)
				rows[k]->result = c->timed_out ? M_HUNG :
				    M_UNSURE;
		idem_pg_put(b->pool, c);
		return;
	}
	idem_batch_sent(b->engine, w, n);
	if (idem_pgs_lose_answer(ps, lose)) {
		/* tests: applied, and its answer lost with its connection */
		c->broken = 1;
		PQclear(res);
		idem_pg_put(b->pool, c);
		for (k = 0; k < n; k++)
			rows[k]->result = M_UNSURE;
		return;
	}
	idem_pg_put(b->pool, c);
	if (n == 1)
		read_lone(res, w, rows[0]);
	else if (w == IDEM_BATCH_INSERT)
		read_reserved(res, rows, n);
	else
		for (i = 0; i < PQntuples(res); i++) {
			unsigned at = row_number(res, i, 0, n);

			if (at > 0)
				rows[at - 1]->result = M_APPLIED;
		}
	PQclear(res);
}

/* The engine's send: the lane's statement for the n rows, a lone
 * request's too (its lock wait is the lane's: a request's own statement,
 * which may wait inflight-wait for a row lock, is sent out of the lane,
 * never holding it). */
static void
send_rows(void *ctx, int w, idem_batch_member **rows, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		rows[i]->result = M_ALONE;
	send_batch(ctx, w, rows, n);
}

/* The engine's fits: a commit batch names each owner once (no row is
 * stored twice by one statement). */
static int
fits(void *ctx, int w, idem_batch_member *const *rows, unsigned t,
    uint64_t total, const idem_batch_member *m)
{
	unsigned i;

	(void)ctx;
	(void)total;
	if (w == IDEM_BATCH_INSERT)
		return 1;
	for (i = 0; i < t; i++)
		if (strcmp(rows[i]->owner, m->owner) == 0)
			return 0;
	return 1;
}

idem_err
idem_pgb_new(pg_store *ps, const idem_config_postgres *pg, const char *file,
    const char *options, idem_pg_batch **out)
{
	idem_pg_batch *b;
	idem_err err;

	*out = NULL;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return IDEM_ERR_NOMEM;
	b->ps = ps;
	if ((err = idem_batch_new(pg->batch_rows, send_rows, fits, b,
	    &b->engine)) != IDEM_OK ||
	    (err = idem_pg_pool_new(pg, file, idem_pgs_batch_sql,
	    PG_LANE_NSTMT, IDEM_BATCH_LANES, options, &b->pool)) !=
	    IDEM_OK) {
		idem_pgb_free(b);
		return err;
	}
	(void)idem_pg_pool_warm(b->pool);
	idem_log(NULL, IDEM_LOG_INFO, "postgres store: concurrent reservations "
	    "and commits are batched, up to %u in a statement",
	    idem_batch_max_rows(b->engine));
	*out = b;
	return IDEM_OK;
}

void
idem_pgb_free(idem_pg_batch *b)
{
	int w, j;

	if (b == NULL)
		return;
	idem_batch_free(b->engine);
	idem_pg_pool_free(b->pool);
	for (w = 0; w < IDEM_BATCH_LANES; w++)
		for (j = 0; j < LANE_ARRAYS; j++)
			free(b->arrays[w][j].buf);
	free(b);
}

struct idem_batch *
idem_pgb_engine(idem_pg_batch *b)
{
	return b != NULL ? b->engine : NULL;
}

/* Fills m and r for rq's row in a lane. */
static void
member_of(idem_batch_member *m, pg_lane_row *r, idem_store_req *rq)
{
	memset(m, 0, sizeof(*m));
	memset(r, 0, sizeof(*r));
	m->key = &rq->key;
	m->owner = rq->owner;
	m->row = r;
}

idem_err
idem_pgb_reserve(pg_store *ps, pg_reserve_args *a, int *inserted, pg_row *r)
{
	idem_batch_member m;
	pg_lane_row lr;

	memset(r, 0, sizeof(*r));
	*inserted = 0;
	if (ps->batch == NULL)
		return idem_pgs_insert_or_read(ps, a, inserted, r);
	member_of(&m, &lr, a->rq);
	lr.a = a;
	lr.r = r;
	lr.inserted = inserted;
	switch (idem_batch_submit(ps->batch->engine, IDEM_BATCH_INSERT, &m)) {
	case M_APPLIED:
	case M_FOUND:
		return IDEM_OK;
	case M_HUNG:
		/* the row may land: the request that does not run deletes
		 * it (FORGET) */
		a->rq->unanswered = 1;
		return IDEM_ERR_STORE;
	case M_UNSURE:
		/* a row of ours may be there, or land: its own statement
		 * recognises the first, and the request says the second */
		a->rq->unanswered = 1;
		break;
	}
	return idem_pgs_insert_or_read(ps, a, inserted, r);
}

idem_err
idem_pgb_commit(pg_store *ps, idem_store_req *rq,
    const idem_stored_response *resp)
{
	idem_batch_member m;
	pg_lane_row lr;

	if (ps->batch != NULL && (uint64_t)resp->headers_len + resp->body_len <=
	    BATCH_ANSWER_MAX) {
		member_of(&m, &lr, rq);
		lr.rq = rq;
		lr.resp = resp;
		m.size = (uint64_t)resp->headers_len + resp->body_len;
		switch (idem_batch_submit(ps->batch->engine,
		    IDEM_BATCH_COMMIT, &m)) {
		case M_APPLIED:
			return IDEM_OK;
		case M_MISSED:
			/* decided on the row's latest version: read it */
			return idem_pgs_answer_stored(ps, rq, resp);
		case M_HUNG:
			/* the lease thread commits again, and reads back */
			return IDEM_ERR_STORE;
		}
		/* not stored by it (a batch's join read an older version),
		 * or maybe (a lost answer): the commit alone decides, and
		 * reads back when it matches no row */
	}
	return idem_pgs_commit_alone(ps, rq, resp);
}
