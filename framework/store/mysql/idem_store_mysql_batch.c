/*
 * idem_store_mysql_batch.c - group commit for the MySQL store: the first
 * INSERT of the reservations and the UPDATE of the commits that the
 * threads of one process send at the same time go to the database as one
 * statement each, so the database parses, locks, logs and (at flush 1)
 * fsyncs once for several requests.
 *
 * Each kind of statement has a lane, and a lane has at most one statement
 * in flight.  A thread that finds its lane free sends its own row at once
 * (one connection's latency is unchanged: no timer); threads that arrive
 * meanwhile queue, and when the statement comes back the first of them
 * sends the rows of the queue, up to batch-rows of them, in one statement.
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

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "idem_log.h"
#include "idem_store_mysql_int.h"
#include "idem_time.h"

/* An answer larger than this commits on its own: batching it saves
 * nothing worth the copy. */
#define BATCH_ANSWER_MAX (16 * 1024)
/* The most a test's gather waits for the requests it asked for (ms). */
#define GATHER_MAX_MS 10000
/* Parameters of one row of the UPDATE, the most of the lanes'. */
#define COMMIT_PARAMS 11

/* The lanes, each with its statement (by number of rows). */
enum { LANE_INSERT, LANE_COMMIT, NLANES };

/* What a lane's statement did for one request. */
enum {
	M_QUEUED = 0,
	M_APPLIED,     /* inserted; committed (read_returned: returned) */
	M_MISSED,      /* insert: the key was there (read it) */
	M_ALONE,       /* nothing done: send your own statement */
	M_UNSURE       /* maybe applied (a lost answer; a commit: fewer rows
	                * updated than named): a commit reads, then sends
	                * its own; an insert sends its own, which finds its
	                * row, and says its write went unanswered */
};

typedef struct member {
	struct member *next;
	pthread_cond_t wake;                 /* result set, or may send */
	idem_store_req *rq;                  /* borrowed */
	const long long *life_us;            /* borrowed */
	const long long *lease_ms;           /* insert: borrowed */
	const idem_stored_response *resp;    /* commit: borrowed */
	long long status;                    /* commit */
	uint64_t size;                       /* commit: headers and body */
	int result;                          /* M_* */
} member;

typedef struct lane {
	member *head, **tail;    /* the queue */
	unsigned queued;         /* members in it */
	int busy;                /* a statement is in flight */
	unsigned gather;         /* tests: the next statement waits for this
	                          * many requests */
	/* the leader's, while busy */
	MYSQL_BIND *binds;
	member **rows;
	atomic_ullong statements, carried;
} lane;

struct idem_my_batch {
	pthread_mutex_t lock;
	unsigned max_rows;
	int causal;              /* [mysql] causal-reads */
	atomic_int can_insert;   /* the server has INSERT ... RETURNING: 1
	                          * yes, 0 no, -1 not known yet */
	lane lanes[NLANES];
	char *sql[NLANES][IDEM_BATCH_ROWS_MAX + 1];  /* by number of rows */
};

static int can_insert(idem_my_batch *b, idem_mysql_conn *c);

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
	static const char *const cases[] = { "status", "headers", "body" };
	size_t size = 512 + (size_t)n * 200;
	char *s = malloc(size);
	size_t len;
	unsigned i, c;

	if (s == NULL)
		return NULL;
	if (which == LANE_INSERT) {
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
	    "'committed'");
	for (c = 0; c < 4; c++) {
		len += (size_t)snprintf(s + len, size - len, c < 3 ?
		    ", %s = CASE owner" : ", expires_at = " NOW " + INTERVAL "
		    "(CASE owner", c < 3 ? cases[c] : "");
		for (i = 0; i < n; i++)
			len += (size_t)snprintf(s + len, size - len,
			    " WHEN ? THEN ?");
		len += (size_t)snprintf(s + len, size - len, c < 3 ? " END" :
		    " END) MICROSECOND");
	}
	len += (size_t)snprintf(s + len, size - len, " WHERE ");
	len = owned_terms(s, len, size, n);
	snprintf(s + len, size - len, " AND " HELD);
	return s;
}

idem_err
idem_my_batch_new(const idem_config_mysql *my, idem_mysql_pool *pool,
    idem_my_batch **out)
{
	idem_mysql_conn *c;
	idem_my_batch *b;
	unsigned n;
	int w;

	*out = NULL;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return IDEM_ERR_NOMEM;
	b->max_rows = my->batch_rows;
	if (b->max_rows > IDEM_BATCH_ROWS_MAX)
		b->max_rows = IDEM_BATCH_ROWS_MAX;
	b->causal = my->causal_reads;
	atomic_init(&b->can_insert, -1);
	pthread_mutex_init(&b->lock, NULL);
	for (w = 0; w < NLANES; w++) {
		lane *l = &b->lanes[w];

		l->tail = &l->head;
		l->binds = calloc((size_t)b->max_rows * COMMIT_PARAMS,
		    sizeof(*l->binds));
		l->rows = calloc(b->max_rows, sizeof(*l->rows));
		if (l->binds == NULL || l->rows == NULL)
			goto fail;
	}
	for (w = 0; w < NLANES; w++)
		for (n = 1; n <= b->max_rows; n++)
			if ((b->sql[w][n] = batch_sql(w, n, b->causal)) == NULL)
				goto fail;
	/* said at start-up; when no connection opens now, at the first
	 * statement */
	if ((c = idem_mysql_get(pool)) != NULL) {
		if (c->m != NULL)
			(void)can_insert(b, c);
		idem_mysql_put(pool, c);
	}
	*out = b;
	return IDEM_OK;
fail:
	idem_my_batch_free(b);
	return IDEM_ERR_NOMEM;
}

void
idem_my_batch_free(idem_my_batch *b)
{
	unsigned n;
	int w;

	if (b == NULL)
		return;
	for (w = 0; w < NLANES; w++) {
		free(b->lanes[w].binds);
		free(b->lanes[w].rows);
	}
	for (w = 0; w < NLANES; w++)
		for (n = 0; n <= IDEM_BATCH_ROWS_MAX; n++)
			free(b->sql[w][n]);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* Orders members by key: every statement locks its rows in one order, so
 * two batches on the same keys (from two processes) do not deadlock. */
static int
by_key(const void *x, const void *y)
{
	const idem_store_key *a = &(*(member *const *)x)->rq->key;
	const idem_store_key *b = &(*(member *const *)y)->rq->key;
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->scope, b->scope, 32);

	if (c == 0)
		c = memcmp(a->key, b->key, n);
	if (c == 0)
		c = a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
	return c;
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

/* Binds at b the parameters of owned_terms for the n rows of l: each
 * row's key and owner. */
static void
bind_owned_terms(MYSQL_BIND *b, const lane *l, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		const idem_store_req *rq = l->rows[i]->rq;

		bind_blob(b++, rq->key.scope, 32, MYSQL_TYPE_BLOB);
		bind_blob(b++, rq->key.key, rq->key.key_len, MYSQL_TYPE_BLOB);
		bind_owner(b++, rq);
	}
}

/* Binds the n rows of l for the lane's statement. */
static void
bind_rows(int which, lane *l, unsigned n)
{
	MYSQL_BIND *b = l->binds;
	unsigned i;

	if (which == LANE_INSERT) {
		for (i = 0; i < n; i++) {
			const idem_store_req *rq = l->rows[i]->rq;

			bind_blob(b++, rq->key.scope, 32, MYSQL_TYPE_BLOB);
			bind_blob(b++, rq->key.key, rq->key.key_len,
			    MYSQL_TYPE_BLOB);
			bind_blob(b++, rq->fp, 32, MYSQL_TYPE_BLOB);
			bind_owner(b++, rq);
			bind_blob(b++, rq->request_id, strlen(rq->request_id),
			    MYSQL_TYPE_STRING);
			bind_ll(b++, l->rows[i]->lease_ms);
			bind_ll(b++, l->rows[i]->life_us);
		}
		return;
	}
	/* the four CASE columns, then the rows' conditions */
	for (i = 0; i < n; i++, b += 2) {
		bind_owner(b, l->rows[i]->rq);
		bind_ll(b + 1, &l->rows[i]->status);
	}
	for (i = 0; i < n; i++, b += 2) {
		const idem_stored_response *r = l->rows[i]->resp;

		bind_owner(b, l->rows[i]->rq);
		bind_blob(b + 1, r->headers != NULL ? r->headers : "",
		    r->headers_len, MYSQL_TYPE_BLOB);
	}
	for (i = 0; i < n; i++, b += 2) {
		const idem_stored_response *r = l->rows[i]->resp;

		bind_owner(b, l->rows[i]->rq);
		bind_blob(b + 1, r->body != NULL ? r->body : "", r->body_len,
		    MYSQL_TYPE_BLOB);
	}
	for (i = 0; i < n; i++, b += 2) {
		bind_owner(b, l->rows[i]->rq);
		bind_ll(b + 1, l->rows[i]->life_us);
	}
	bind_owned_terms(b, l, n);
}

/* Sets res[i] of the rows of l from the rows (scope_hash, idem_key,
 * owner) that st, an INSERT ... RETURNING, returned (those it inserted):
 * applied for those, missed for the others.  Returns 0, or -1 (a fetch
 * failed). */
static int
read_returned(idem_mysql_conn *c, MYSQL_STMT *st, lane *l, unsigned n,
    int *res)
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
		res[i] = M_MISSED;
	if (mysql_stmt_bind_result(st, r) != 0)
		return -1;
	while ((rc = mysql_stmt_fetch(st)) == 0) {
		if (len[0] != 32 || len[1] > IDEM_KEY_MAX ||
		    len[2] > IDEM_OWNER_MAX)
			continue;
		owner[len[2]] = '\0';
		for (i = 0; i < n; i++) {
			const idem_store_req *rq = l->rows[i]->rq;

			if (rq->key.key_len == len[1] &&
			    memcmp(rq->key.scope, scope, 32) == 0 &&
			    memcmp(rq->key.key, key, len[1]) == 0 &&
			    strcmp(rq->owner, owner) == 0)
				res[i] = M_APPLIED;
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
		    "statement", b->max_rows);
	else
		idem_log(NULL, IDEM_LOG_WARN, "mysql store: the server (%s) has "
		    "no INSERT ... RETURNING (MariaDB 10.5 or later): "
		    "reservations go one statement each; commits are batched, "
		    "up to %u in a statement", mysql_get_server_info(c->m),
		    b->max_rows);
	return can;
}

/* Executes lane kind's statement for n rows with l's binds on c.  Returns
 * it, executed, or NULL (failed: c marked broken when the connection was
 * lost, other errors logged but a lock met). */
static MYSQL_STMT *
run_kind(mysql_store *ms, idem_mysql_conn *c, int kind, lane *l, unsigned n)
{
	MYSQL_STMT *st = idem_mysql_lazy_stmt(c, (size_t)kind *
	    IDEM_BATCH_ROWS_MAX + n - 1, ms->batch->sql[kind][n]);

	if (st == NULL)
		return NULL;
	if (mysql_stmt_bind_param(st, l->binds) == 0 &&
	    mysql_stmt_execute(st) == 0)
		return st;
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

/* Sends the INSERT of the lane's n rows (l->rows, sorted here) on c and
 * sets res[i], what it did for l->rows[i]. */
static void
send_inserts(mysql_store *ms, idem_mysql_conn *c, lane *l, unsigned n,
    int *res)
{
	MYSQL_STMT *st;
	unsigned i;

	bind_rows(LANE_INSERT, l, n);
	st = run_kind(ms, c, LANE_INSERT, l, n);
	if (st != NULL) {
		atomic_fetch_add(&l->statements, 1);
		atomic_fetch_add(&l->carried, n);
	}
	if (st == NULL || lost_answer(ms, c, S_INSERT)) {
		/* lost: it may have been applied, or still run */
		if (c->broken)
			for (i = 0; i < n; i++)
				res[i] = M_UNSURE;
		return;
	}
	if (n == 1)
		res[0] = mysql_stmt_affected_rows(st) == 1 ? M_APPLIED : M_MISSED;
	else if (read_returned(c, st, l, n, res) != 0)
		for (i = 0; i < n; i++)
			res[i] = M_ALONE;
	mysql_stmt_free_result(st);
}

/* Sends the commit of the lane's n rows (l->rows) on c and sets res[i],
 * what it did for l->rows[i]: one owner-checked UPDATE of them all.  When
 * it updated every row it named, each request's answer is stored; when
 * fewer, which it updated is not known (a fenced row, a repeated commit,
 * a reservation this node has not applied yet): each request finds out
 * from its row. */
static void
send_commits(mysql_store *ms, idem_mysql_conn *c, lane *l, unsigned n,
    int *res)
{
	MYSQL_STMT *st;
	unsigned i;

	bind_rows(LANE_COMMIT, l, n);
	if ((st = run_kind(ms, c, LANE_COMMIT, l, n)) != NULL) {
		atomic_fetch_add(&l->statements, 1);
		atomic_fetch_add(&l->carried, n);
	}
	if (st == NULL || lost_answer(ms, c, S_COMMIT)) {
		/* lost: it may have been applied */
		for (i = 0; i < n; i++)
			res[i] = c->broken ? M_UNSURE : M_ALONE;
		return;
	}
	for (i = 0; i < n; i++)
		res[i] = mysql_stmt_affected_rows(st) == n ? M_APPLIED :
		    n == 1 ? M_ALONE : M_UNSURE;
}

/* Sends the lane's statement for its n rows (l->rows) and sets res[i],
 * what it did for l->rows[i] (M_ALONE unless said otherwise). */
static void
send_rows(mysql_store *ms, int which, lane *l, unsigned n, int *res)
{
	idem_mysql_conn *c = idem_mysql_get(ms->pool);
	unsigned i;

	for (i = 0; i < n; i++)
		res[i] = M_ALONE;
	if (c == NULL)
		return;
	if (which == LANE_INSERT && !can_insert(ms->batch, c)) {
		idem_mysql_put(ms->pool, c);
		return;
	}
	if (n > 1)
		qsort(l->rows, n, sizeof(*l->rows), by_key);
	(void)idem_mysql_expect_lock_wait(c, 0);
	if (which == LANE_INSERT)
		send_inserts(ms, c, l, n, res);
	else
		send_commits(ms, c, l, n, res);
	idem_mysql_put(ms->pool, c);
}

/* Whether m may join the rows taken so far (t of them, their answers
 * total bytes): a commit batch names each owner once (its CASE arms are
 * keyed by owner) and fits the server's packet. */
static int
fits(mysql_store *ms, int which, lane *l, unsigned t, uint64_t total,
    const member *m)
{
	uint64_t packet = idem_mysql_max_packet(ms->pool);
	unsigned i;

	if (which == LANE_INSERT)
		return 1;
	if (packet > 0 && total + m->size + (uint64_t)(t + 1) * PACKET_SLACK >
	    packet)
		return 0;
	for (i = 0; i < t; i++)
		if (strcmp(l->rows[i]->rq->owner, m->rq->owner) == 0)
			return 0;
	return 1;
}

/* Takes the rows of the lane's next statement off its queue, the first
 * queued first (up to max_rows that fit).  Under the lock.  Returns their
 * number (at least 1: the head). */
static unsigned
take_rows(mysql_store *ms, int which, lane *l)
{
	member **pm = &l->head, *m;
	uint64_t total = 0;
	unsigned t = 0;

	while ((m = *pm) != NULL && t < ms->batch->max_rows) {
		if (t > 0 && !fits(ms, which, l, t, total, m)) {
			pm = &m->next;
			continue;
		}
		*pm = m->next;
		m->next = NULL;
		l->rows[t++] = m;
		total += m->size;
	}
	l->queued -= t;
	/* the tail: the last member still queued */
	l->tail = &l->head;
	while (*l->tail != NULL)
		l->tail = &(*l->tail)->next;
	return t;
}

/* Whether a thread of lane l is to send its statement now: nothing is in
 * flight and rows are queued (a test's gather: the rows it asked for, or
 * *until passed).  Under the lock. */
static int
may_send(lane *l, uint64_t *until)
{
	if (l->busy || l->head == NULL)
		return 0;
	if (l->gather > 0) {
		if (*until == 0)
			*until = idem_now_ms() + GATHER_MAX_MS;
		if (l->queued < l->gather && idem_now_ms() < *until)
			return 0;
		l->gather = 0;
	}
	return 1;
}

/* Sends lane which's statement with the rows at the head of its queue and
 * hands each of them its result.  Called and returns under the lock, which
 * it drops while the statement is in flight. */
static void
lead(mysql_store *ms, int which, lane *l)
{
	int res[IDEM_BATCH_ROWS_MAX];
	unsigned n, i;

	l->busy = 1;
	n = take_rows(ms, which, l);
	pthread_mutex_unlock(&ms->batch->lock);
	send_rows(ms, which, l, n, res);
	pthread_mutex_lock(&ms->batch->lock);
	/* results are read under the lock; each waiter is woken alone */
	for (i = 0; i < n; i++) {
		l->rows[i]->result = res[i];
		pthread_cond_signal(&l->rows[i]->wake);
	}
	l->busy = 0;
	/* the lane is free: the first still queued sends next */
	if (l->head != NULL)
		pthread_cond_signal(&l->head->wake);
}

/* Queues m on lane which and returns its result once a statement that
 * carried it came back: sent by m's own thread when the lane is free
 * (with whatever queued meanwhile), else by the thread that finds it
 * free or is woken first in the queue when it frees. */
static int
submit(mysql_store *ms, int which, member *m)
{
	idem_my_batch *b = ms->batch;
	lane *l = &b->lanes[which];
	uint64_t gather_until = 0;
	struct timespec ts;

	pthread_cond_init(&m->wake, NULL);
	pthread_mutex_lock(&b->lock);
	*l->tail = m;
	l->tail = &m->next;
	l->queued++;
	while (m->result == M_QUEUED) {
		if (may_send(l, &gather_until)) {
			lead(ms, which, l);
			continue;
		}
		if (gather_until == 0) {
			pthread_cond_wait(&m->wake, &b->lock);
			continue;
		}
		/* tests: a gather waits for its requests, not forever */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&m->wake, &b->lock, &ts);
	}
	pthread_mutex_unlock(&b->lock);
	pthread_cond_destroy(&m->wake);
	return m->result;
}

idem_err
idem_my_batch_insert(mysql_store *ms, const reserve_args *a,
    unsigned long long *inserted, int *retried)
{
	int result = M_ALONE;
	idem_err err;
	member m;
	params p;

	if (ms->batch != NULL && atomic_load(&ms->batch->can_insert) != 0) {
		memset(&m, 0, sizeof(m));
		m.rq = a->rq;
		m.life_us = &a->life_us;
		m.lease_ms = &a->lease_ms;
		switch (result = submit(ms, LANE_INSERT, &m)) {
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

/* Whether a and b are the same answer: status, headers and body. */
static int
same_answer(const idem_stored_response *a, const idem_stored_response *b)
{
	return a->status == b->status && a->headers_len == b->headers_len &&
	    a->body_len == b->body_len &&
	    (a->headers_len == 0 ||
	    memcmp(a->headers, b->headers, a->headers_len) == 0) &&
	    (a->body_len == 0 || memcmp(a->body, b->body, a->body_len) == 0);
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
	ours = r.found && r.committed && strcmp(r.owner, rq->owner) == 0 &&
	    same_answer(&r.resp, resp);
	idem_my_row_clear(&r);
	return ours ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

idem_err
idem_my_batch_commit(mysql_store *ms, idem_store_req *rq,
    const idem_stored_response *resp, const long long *life_us, uint64_t size)
{
	long long status = resp->status;
	member m;
	params p;
	idem_err err;

	if (ms->batch != NULL && size <= BATCH_ANSWER_MAX) {
		memset(&m, 0, sizeof(m));
		m.rq = rq;
		m.life_us = life_us;
		m.resp = resp;
		m.status = status;
		m.size = size;
		switch (submit(ms, LANE_COMMIT, &m)) {
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
	idem_my_p_answer(&p, &status, resp, life_us);
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

int
idem_store_mysql_batch_gather(idem_store *s, const char *op, unsigned n)
{
	mysql_store *ms = (mysql_store *)s;
	int w;

	if (s == NULL || strcmp(s->ops->name, "mysql") != 0 || ms->batch == NULL)
		return -1;
	if (strcmp(op, "insert") == 0)
		w = LANE_INSERT;
	else if (strcmp(op, "commit") == 0)
		w = LANE_COMMIT;
	else
		return -1;
	pthread_mutex_lock(&ms->batch->lock);
	ms->batch->lanes[w].gather = n;
	pthread_mutex_unlock(&ms->batch->lock);
	return 0;
}

int
idem_store_mysql_batch_counts(idem_store *s, idem_store_batch_counts *out)
{
	mysql_store *ms = (mysql_store *)s;

	memset(out, 0, sizeof(*out));
	if (s == NULL || strcmp(s->ops->name, "mysql") != 0 || ms->batch == NULL)
		return -1;
	out->insert_statements = atomic_load(&ms->batch->lanes[LANE_INSERT].statements);
	out->insert_rows = atomic_load(&ms->batch->lanes[LANE_INSERT].carried);
	out->commit_statements = atomic_load(&ms->batch->lanes[LANE_COMMIT].statements);
	out->commit_rows = atomic_load(&ms->batch->lanes[LANE_COMMIT].carried);
	return 0;
}
