/*
 * idem_store_mysql_batch.c - group commit for the MySQL store: the first
 * INSERT of the reservations and the UPDATE of the commits that the
 * threads of one process send at the same time go to the database as one
 * statement each, so the database parses, locks, logs and (at flush 1)
 * fsyncs once for several requests.
 *
 * The lanes, their queues and leaders are the engine's (idem_batch.c);
 * this file is what MySQL's statements are and what they did:
 *
 *   reservations  INSERT IGNORE ... VALUES (...), (...) RETURNING
 *                 scope_hash, idem_key, owner: MariaDB returns exactly the
 *                 rows it inserted (10.5 and later); a request whose row is
 *                 not among them goes on as a reserve that found its key
 *                 (read, replay, conflict, takeover), on its own.
 *   commits       UPDATE ... SET status = CASE owner WHEN ? THEN ? ...
 *                 WHERE (scope_hash = ? AND idem_key = ? AND owner = ?) OR
 *                 ... AND state IN ('in_flight', 'unknown'): the owner check
 *                 of every row, as a commit alone has it.  A statement
 *                 that updated as many rows as it named committed them all;
 *                 when it updated fewer, each request reads its own row:
 *                 held by its owner with its answer, it is done; else it
 *                 commits on its own, so a fenced request stays fenced and
 *                 no other is.
 *
 * A lane's statement never waits for a row lock (innodb_lock_wait_timeout
 * 0): one held row would stall every request behind it.  When the
 * statement fails in any way (that lock, a deadlock, a Galera certification
 * failure, a lost connection, values too long), every request it carried
 * sends its own statement as if there were no batching; one that may have
 * been applied before its answer was lost is recognised as a request's own
 * statement is (its row, with its owner).  Releases, renewals, takeovers
 * and the transactional routes are never batched.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "idem_batch.h"
#include "idem_log.h"
#include "idem_store_mysql_int.h"
#include "idem_time.h"

/* An answer larger than this commits on its own: batching it saves
 * nothing worth the copy. */
#define BATCH_ANSWER_MAX (16 * 1024)
/* Parameters of one row of the UPDATE, the most of the lanes'. */
#define COMMIT_PARAMS 13

/* What a lane's statement did for one request (idem_batch_member's
 * result). */
enum {
	M_APPLIED = 1, /* inserted; committed (read_returned: returned) */
	M_MISSED,      /* insert: the key was there (read it) */
	M_ALONE,       /* nothing done: send your own statement */
	M_UNSURE       /* maybe applied (a lost answer; a commit: fewer rows
	                * updated than named): a commit reads, then sends
	                * its own; an insert sends its own, which finds its
	                * row, and says its write went unanswered */
};

/* One request's row: what its statement binds (all borrowed). */
typedef struct my_row {
	idem_store_req *rq;
	const long long *life_us;
	const long long *tomb_s;             /* commit: tombstone_s */
	const long long *lease_ms;           /* insert */
	const idem_stored_response *resp;    /* commit */
	long long status;                    /* commit */
} my_row;

#define ROW(m) ((my_row *)(m)->row)

struct idem_my_batch {
	mysql_store *ms;         /* borrowed: the store it batches for */
	idem_batch *engine;
	int causal;              /* [mysql] causal-reads */
	atomic_int can_insert;   /* the server has INSERT ... RETURNING: 1
	                          * yes, 0 no, -1 not known yet */
	MYSQL_BIND *binds[IDEM_BATCH_LANES];  /* each lane's leader's */
	char *sql[IDEM_BATCH_LANES][IDEM_BATCH_ROWS_MAX + 1];  /* by rows */
};

static int can_insert(idem_my_batch *b, idem_mysql_conn *c);
static void send_rows(void *ctx, int which, idem_batch_member **rows,
    unsigned n);
static int fits(void *ctx, int which, idem_batch_member *const *rows,
    unsigned t, uint64_t total, const idem_batch_member *m);

/* Appends to s (len of size bytes used) the n terms each naming a row by
 * key and owner, joined by OR, in parentheses.  Returns the new len. */
static size_t
owned_terms(char *s, size_t len, size_t size, unsigned n)
{
	unsigned i;

	len += (size_t)snprintf(s + len, size - len, "(");
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, size - len, "%s" OWNED_TERM,
		    i > 0 ? " OR " : "");
	return len + (size_t)snprintf(s + len, size - len, ")");
}

/* The text of the lane's statement of n rows, or NULL (no memory). */
static char *
batch_sql(int which, unsigned n, int causal)
{
	static const char *const cases[] = { "status", "headers", "body",
	    "tombstone_s" };
	size_t size = 512 + (size_t)n * 200;
	char *s = malloc(size);
	size_t len;
	unsigned i, c;

	if (s == NULL)
		return NULL;
	if (which == IDEM_BATCH_INSERT) {
		len = (size_t)snprintf(s, size, "SET STATEMENT "
		    "innodb_lock_wait_timeout = 0%s FOR " INSERT_HEAD,
		    causal ? ", wsrep_sync_wait = 4" : "");
		for (i = 0; i < n; i++)
			len += (size_t)snprintf(s + len, size - len, "%s"
			    INSERT_ROW, i > 0 ? ", " : "");
		if (n > 1)
			snprintf(s + len, size - len, " RETURNING scope_hash, "
			    "idem_key, owner");
		return s;
	}
	len = (size_t)snprintf(s, size, "SET STATEMENT innodb_lock_wait_timeout "
	    "= 0 FOR UPDATE idempotency_keys FORCE INDEX (PRIMARY) SET state = "
	    "'committed', lease_at = " NOW);
	for (c = 0; c < 5; c++) {
		len += (size_t)snprintf(s + len, size - len, c < 4 ?
		    ", %s = CASE owner" : ", expires_at = " NOW " + INTERVAL "
		    "(CASE owner", c < 4 ? cases[c] : "");
		for (i = 0; i < n; i++)
			len += (size_t)snprintf(s + len, size - len,
			    " WHEN ? THEN ?");
		len += (size_t)snprintf(s + len, size - len, c < 4 ? " END" :
		    " END) MICROSECOND");
	}
	len += (size_t)snprintf(s + len, size - len, " WHERE ");
	len = owned_terms(s, len, size, n);
	snprintf(s + len, size - len, " AND " HELD);
	return s;
}

idem_err
idem_my_batch_new(mysql_store *ms, const idem_config_mysql *my,
    idem_my_batch **out)
{
	idem_mysql_conn *c;
	idem_my_batch *b;
	unsigned n, max;
	int w;

	*out = NULL;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return IDEM_ERR_NOMEM;
	b->ms = ms;
	b->causal = my->causal_reads;
	atomic_init(&b->can_insert, -1);
	if (idem_batch_new(my->batch_rows, send_rows, fits, b, &b->engine) !=
	    IDEM_OK)
		goto fail;
	max = idem_batch_max_rows(b->engine);
	for (w = 0; w < IDEM_BATCH_LANES; w++) {
		if ((b->binds[w] = calloc((size_t)max * COMMIT_PARAMS,
		    sizeof(*b->binds[w]))) == NULL)
			goto fail;
		for (n = 1; n <= max; n++)
			if ((b->sql[w][n] = batch_sql(w, n, b->causal)) == NULL)
				goto fail;
	}
	/* said at start-up; when no connection opens now, at the first
	 * statement */
	if ((c = idem_mysql_get(ms->pool)) != NULL) {
		if (c->m != NULL)
			(void)can_insert(b, c);
		idem_mysql_put(ms->pool, c);
	}
	*out = b;
	return IDEM_OK;
fail:
	idem_my_batch_free(b);
	return IDEM_ERR_NOMEM;
}

idem_batch *
idem_my_batch_engine(idem_my_batch *b)
{
	return b != NULL ? b->engine : NULL;
}

void
idem_my_batch_free(idem_my_batch *b)
{
	unsigned n;
	int w;

	if (b == NULL)
		return;
	idem_batch_free(b->engine);
	for (w = 0; w < IDEM_BATCH_LANES; w++) {
		free(b->binds[w]);
		for (n = 0; n <= IDEM_BATCH_ROWS_MAX; n++)
			free(b->sql[w][n]);
	}
	free(b);
}

static void
bind_blob(MYSQL_BIND *b, const void *data, size_t len,
    enum enum_field_types type)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = type;
	b->buffer = (void *)data;
	b->buffer_length = (unsigned long)len;
}

static void
bind_ll(MYSQL_BIND *b, const long long *v)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = (void *)v;
}

static void
bind_owner(MYSQL_BIND *b, const idem_store_req *rq)
{
	bind_blob(b, rq->owner, strlen(rq->owner), MYSQL_TYPE_STRING);
}

/* Binds at b the parameters of owned_terms for the n rows: each row's
 * key and owner. */
static void
bind_owned_terms(MYSQL_BIND *b, idem_batch_member *const *rows, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		const idem_store_req *rq = ROW(rows[i])->rq;

		bind_blob(b++, rq->key.scope, 32, MYSQL_TYPE_BLOB);
		bind_blob(b++, rq->key.key, rq->key.key_len, MYSQL_TYPE_BLOB);
		bind_owner(b++, rq);
	}
}

/* Binds the n rows at b for lane which's statement. */
static void
bind_rows(MYSQL_BIND *b, int which, idem_batch_member *const *rows,
    unsigned n)
{
	unsigned i;

	if (which == IDEM_BATCH_INSERT) {
		for (i = 0; i < n; i++) {
			const idem_store_req *rq = ROW(rows[i])->rq;

			bind_blob(b++, rq->key.scope, 32, MYSQL_TYPE_BLOB);
			bind_blob(b++, rq->key.key, rq->key.key_len,
			    MYSQL_TYPE_BLOB);
			bind_blob(b++, rq->fp, 32, MYSQL_TYPE_BLOB);
			bind_owner(b++, rq);
			bind_blob(b++, rq->request_id, strlen(rq->request_id),
			    MYSQL_TYPE_STRING);
			bind_ll(b++, ROW(rows[i])->lease_ms);
			bind_ll(b++, ROW(rows[i])->life_us);
		}
		return;
	}
	/* the five CASE columns, then the rows' conditions */
	for (i = 0; i < n; i++, b += 2) {
		bind_owner(b, ROW(rows[i])->rq);
		bind_ll(b + 1, &ROW(rows[i])->status);
	}
	for (i = 0; i < n; i++, b += 2) {
		const idem_stored_response *r = ROW(rows[i])->resp;

		bind_owner(b, ROW(rows[i])->rq);
		bind_blob(b + 1, r->headers != NULL ? r->headers : "",
		    r->headers_len, MYSQL_TYPE_BLOB);
	}
	for (i = 0; i < n; i++, b += 2) {
		const idem_stored_response *r = ROW(rows[i])->resp;

		bind_owner(b, ROW(rows[i])->rq);
		bind_blob(b + 1, r->body != NULL ? r->body : "", r->body_len,
		    MYSQL_TYPE_BLOB);
	}
	for (i = 0; i < n; i++, b += 2) {
		bind_owner(b, ROW(rows[i])->rq);
		bind_ll(b + 1, ROW(rows[i])->tomb_s);
	}
	for (i = 0; i < n; i++, b += 2) {
		bind_owner(b, ROW(rows[i])->rq);
		bind_ll(b + 1, ROW(rows[i])->life_us);
	}
	bind_owned_terms(b, rows, n);
}

/* Sets the result of each of the n rows from the rows (scope_hash, idem_key,
 * owner) that st, an INSERT ... RETURNING, returned (those it inserted):
 * applied for those, missed for the others.  Returns 0, or -1 (a fetch
 * failed). */
static int
read_returned(idem_mysql_conn *c, MYSQL_STMT *st,
    idem_batch_member *const *rows, unsigned n)
{
	unsigned char scope[32];
	char key[IDEM_KEY_MAX + 1], owner[IDEM_OWNER_MAX + 1];
	unsigned long len[3];
	my_bool null[3];
	MYSQL_BIND r[3];
	unsigned i;
	int rc;

	idem_my_r_buf(&r[0], MYSQL_TYPE_BLOB, scope, sizeof(scope), &len[0],
	    &null[0]);
	idem_my_r_buf(&r[1], MYSQL_TYPE_BLOB, key, sizeof(key) - 1, &len[1],
	    &null[1]);
	idem_my_r_buf(&r[2], MYSQL_TYPE_STRING, owner, sizeof(owner), &len[2],
	    &null[2]);
	for (i = 0; i < n; i++)
		rows[i]->result = M_MISSED;
	if (mysql_stmt_bind_result(st, r) != 0)
		return -1;
	while ((rc = mysql_stmt_fetch(st)) == 0) {
		if (len[0] != 32 || len[1] > IDEM_KEY_MAX ||
		    len[2] > IDEM_OWNER_MAX)
			continue;
		owner[len[2]] = '\0';
		for (i = 0; i < n; i++) {
			const idem_store_req *rq = ROW(rows[i])->rq;

			if (rq->key.key_len == len[1] &&
			    memcmp(rq->key.scope, scope, 32) == 0 &&
			    memcmp(rq->key.key, key, len[1]) == 0 &&
			    strcmp(rq->owner, owner) == 0)
				rows[i]->result = M_APPLIED;
		}
	}
	if (rc != MYSQL_NO_DATA) {
		idem_mysql_check(c, mysql_stmt_errno(st));
		return -1;
	}
	return 0;
}

/* Decides, on the first connection, whether the server has INSERT ...
 * RETURNING (MariaDB 10.5 and later), and says what that means once. */
static int
can_insert(idem_my_batch *b, idem_mysql_conn *c)
{
	int can = atomic_load(&b->can_insert);
	int expected = -1;

	if (can >= 0)
		return can;
	can = mariadb_connection(c->m) &&
	    mysql_get_server_version(c->m) >= 100500;
	if (!atomic_compare_exchange_strong(&b->can_insert, &expected, can))
		return expected;
	if (can)
		idem_log(NULL, IDEM_LOG_INFO, "mysql store: concurrent "
		    "reservations and commits are batched, up to %u in a "
		    "statement", idem_batch_max_rows(b->engine));
	else
		idem_log(NULL, IDEM_LOG_WARN, "mysql store: the server (%s) has "
		    "no INSERT ... RETURNING (MariaDB 10.5 or later): "
		    "reservations go one statement each; commits are batched, "
		    "up to %u in a statement", mysql_get_server_info(c->m),
		    idem_batch_max_rows(b->engine));
	return can;
}

/* Executes lane kind's statement for n rows (bound at binds) on c.
 * Returns it, executed, or NULL (failed: c marked broken when the
 * connection was lost, other errors logged but a lock met). */
static MYSQL_STMT *
run_kind(mysql_store *ms, idem_mysql_conn *c, int kind, MYSQL_BIND *binds,
    unsigned n)
{
	MYSQL_STMT *st = idem_mysql_lazy_stmt(c, (size_t)kind *
	    IDEM_BATCH_ROWS_MAX + n - 1, ms->batch->sql[kind][n]);

	if (st == NULL)
		return NULL;
	if (mysql_stmt_bind_param(st, binds) == 0 &&
	    mysql_stmt_execute(st) == 0) {
		idem_batch_sent(ms->batch->engine, kind, n);
		return st;
	}
	idem_mysql_check(c, mysql_stmt_errno(st));
	/* a lock held, a deadlock: the requests' own statements meet it as
	 * they would without batching (and count it) */
	if (idem_mysql_error_code(mysql_stmt_errno(st)) != IDEM_ERR_BUSY)
		idem_mysql_log_error(ms->pool, "batched statement", st);
	return NULL;
}

/* Whether the statement just executed on c is to be taken as lost
 * (tests: idem_store_mysql_lose_answer of op): then c is broken. */
static int
lost_answer(mysql_store *ms, idem_mysql_conn *c, int op)
{
	if (ms->lose_answer != op + 1)
		return 0;
	ms->lose_answer = 0;
	c->broken = 1;
	return 1;
}

/* Sends the INSERT of the n rows on c and sets each one's result. */
static void
send_inserts(mysql_store *ms, idem_mysql_conn *c,
    idem_batch_member *const *rows, unsigned n)
{
	MYSQL_BIND *binds = ms->batch->binds[IDEM_BATCH_INSERT];
	MYSQL_STMT *st;
	unsigned i;

	bind_rows(binds, IDEM_BATCH_INSERT, rows, n);
	st = run_kind(ms, c, IDEM_BATCH_INSERT, binds, n);
	if (st == NULL || lost_answer(ms, c, S_INSERT)) {
		/* lost: it may have been applied, or still run */
		if (c->broken)
			for (i = 0; i < n; i++)
				rows[i]->result = M_UNSURE;
		return;
	}
	if (n == 1)
		rows[0]->result = mysql_stmt_affected_rows(st) == 1 ?
		    M_APPLIED : M_MISSED;
	else if (read_returned(c, st, rows, n) != 0)
		for (i = 0; i < n; i++)
			rows[i]->result = M_ALONE;
	mysql_stmt_free_result(st);
}

/* Sends the commit of the n rows on c and sets each one's result: one
 * owner-checked UPDATE of them all.  When it updated every row it named,
 * each request's answer is stored; when fewer, which it updated is not
 * known (a fenced row, a repeated commit, a reservation this node has not
 * applied yet): each request finds out from its row. */
static void
send_commits(mysql_store *ms, idem_mysql_conn *c,
    idem_batch_member *const *rows, unsigned n)
{
	MYSQL_BIND *binds = ms->batch->binds[IDEM_BATCH_COMMIT];
	MYSQL_STMT *st;
	unsigned i;

	bind_rows(binds, IDEM_BATCH_COMMIT, rows, n);
	st = run_kind(ms, c, IDEM_BATCH_COMMIT, binds, n);
	if (st == NULL || lost_answer(ms, c, S_COMMIT)) {
		/* lost: it may have been applied */
		for (i = 0; i < n; i++)
			rows[i]->result = c->broken ? M_UNSURE : M_ALONE;
		return;
	}
	for (i = 0; i < n; i++)
		rows[i]->result = mysql_stmt_affected_rows(st) == n ?
		    M_APPLIED : n == 1 ? M_ALONE : M_UNSURE;
}

/* The engine's send: lane which's statement for the n rows (sorted by
 * key), each row's result set (M_ALONE unless said otherwise). */
static void
send_rows(void *ctx, int which, idem_batch_member **rows, unsigned n)
{
	idem_my_batch *b = ctx;
	idem_mysql_conn *c = idem_mysql_get(b->ms->pool);
	unsigned i;

	for (i = 0; i < n; i++)
		rows[i]->result = M_ALONE;
	if (c == NULL)
		return;
	if (which == IDEM_BATCH_INSERT && !can_insert(b, c)) {
		idem_mysql_put(b->ms->pool, c);
		return;
	}
	(void)idem_mysql_expect_lock_wait(c, 0);
	if (which == IDEM_BATCH_INSERT)
		send_inserts(b->ms, c, rows, n);
	else
		send_commits(b->ms, c, rows, n);
	idem_mysql_put(b->ms->pool, c);
}

/* The engine's fits: a commit batch names each owner once (its CASE arms
 * are keyed by owner) and fits the server's packet. */
static int
fits(void *ctx, int which, idem_batch_member *const *rows, unsigned t,
    uint64_t total, const idem_batch_member *m)
{
	idem_my_batch *b = ctx;
	uint64_t packet = idem_mysql_max_packet(b->ms->pool);
	unsigned i;

	if (which == IDEM_BATCH_INSERT)
		return 1;
	if (packet > 0 && total + m->size + (uint64_t)(t + 1) * PACKET_SLACK >
	    packet)
		return 0;
	for (i = 0; i < t; i++)
		if (strcmp(rows[i]->owner, m->owner) == 0)
			return 0;
	return 1;
}

/* Fills m and r for rq's row in a lane. */
static void
member_of(idem_batch_member *m, my_row *r, idem_store_req *rq,
    const long long *life_us)
{
	memset(m, 0, sizeof(*m));
	memset(r, 0, sizeof(*r));
	r->rq = rq;
	r->life_us = life_us;
	m->key = &rq->key;
	m->owner = rq->owner;
	m->row = r;
}

idem_err
idem_my_batch_insert(mysql_store *ms, const reserve_args *a,
    unsigned long long *inserted, int *retried)
{
	int result = M_ALONE;
	idem_batch_member m;
	idem_err err;
	my_row r;
	params p;

	if (ms->batch != NULL && atomic_load(&ms->batch->can_insert) != 0) {
		member_of(&m, &r, a->rq, &a->life_us);
		r.lease_ms = &a->lease_ms;
		switch (result = idem_batch_submit(ms->batch->engine,
		    IDEM_BATCH_INSERT, &m)) {
		case M_APPLIED:
			*inserted = 1;
			return IDEM_OK;
		case M_MISSED:
			*inserted = 0;
			return IDEM_OK;
		}
	}
	/* on its own, as without batching: a row of this request's that a
	 * failed statement inserted after all is found as its own */
	idem_my_p_insert(&p, a);
	err = idem_my_exec_count(ms, S_INSERT, &p, inserted, retried);
	if (result == M_UNSURE && retried != NULL)
		*retried = 1;
	return err;
}

/* Whether rq's record holds resp, committed under rq's owner (a causal
 * read).  Returns IDEM_OK (it does), IDEM_ERR_NOT_FOUND (it does not), or
 * the read's error. */
static idem_err
answer_stored(mysql_store *ms, idem_store_req *rq,
    const idem_stored_response *resp)
{
	idem_err err;
	int ours;
	row r;

	if ((err = idem_my_read_row_with(ms, S_SELECT_CAUSAL, &rq->key,
	    &rq->contended, &r)) != IDEM_OK)
		return err;
	ours = idem_owned_answer_stored(r.found, r.state, r.owner, &r.resp,
	    rq->owner, resp);
	idem_my_row_clear(&r);
	return ours ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

idem_err
idem_my_batch_commit(mysql_store *ms, idem_store_req *rq,
    const idem_stored_response *resp, const long long *life_us, uint64_t size)
{
	long long status = resp->status, tomb_s = idem_my_tomb_s(rq->policy);
	idem_batch_member m;
	my_row r;
	params p;
	idem_err err;

	if (ms->batch != NULL && size <= BATCH_ANSWER_MAX) {
		member_of(&m, &r, rq, life_us);
		r.resp = resp;
		r.status = status;
		r.tomb_s = &tomb_s;
		m.size = size;
		switch (idem_batch_submit(ms->batch->engine, IDEM_BATCH_COMMIT,
		    &m)) {
		case M_APPLIED:
			return IDEM_OK;
		case M_UNSURE:
			/* is this answer stored already, under our owner?
			 * Else the commit on its own decides: done, or
			 * fenced */
			if ((err = answer_stored(ms, rq, resp)) !=
			    IDEM_ERR_NOT_FOUND)
				return err;
			break;
		}
	}
	idem_my_p_answer(&p, &status, resp, &tomb_s, life_us);
	err = idem_my_owned_answer(ms, S_COMMIT, &p, rq, size);
	/* matched no row: fenced, or stored already by an attempt of ours
	 * whose answer never came (a batch or a statement still running on
	 * the server when its connection timed out, which a commit alone
	 * then waited for, or which outlasted that commit's lock wait and
	 * made it BUSY before this retry): only the row can tell */
	if (err == IDEM_ERR_NOT_FOUND)
		err = answer_stored(ms, rq, resp);
	return err;
}
