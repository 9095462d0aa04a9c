/*
 * idem_batch.c - group commit's engine: each lane's queue, its leader,
 * and the waking of each waiter with its result (idem_batch.h).  The
 * statements are the stores' (idem_store_mysql_batch.c,
 * idem_store_pg_batch.c).
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem_batch.h"
#include "idem_config.h"
#include "idem_time.h"

/* The most a test's gather waits for the requests it asked for (ms). */
#define GATHER_MAX_MS 10000

typedef struct lane {
	idem_batch_member *head, **tail;   /* the queue */
	unsigned queued;                   /* members in it */
	int busy;                          /* a statement is in flight */
	unsigned gather;                   /* tests: the next statement
	                                    * waits for this many requests */
	idem_batch_member **rows;          /* the leader's, while busy */
	atomic_ullong statements, carried;
} lane;

struct idem_batch {
	pthread_mutex_t lock;
	unsigned max_rows;
	idem_batch_send_fn send;
	idem_batch_fits_fn fits;
	void *ctx;
	lane lanes[IDEM_BATCH_LANES];
};

idem_err
idem_batch_new(unsigned max_rows, idem_batch_send_fn send,
    idem_batch_fits_fn fits, void *ctx, idem_batch **out)
{
	idem_batch *b;
	int w;

	*out = NULL;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return IDEM_ERR_NOMEM;
	b->max_rows = max_rows < 1 ? 1 : max_rows > IDEM_BATCH_ROWS_MAX ?
	    IDEM_BATCH_ROWS_MAX : max_rows;
	b->send = send;
	b->fits = fits;
	b->ctx = ctx;
	pthread_mutex_init(&b->lock, NULL);
	for (w = 0; w < IDEM_BATCH_LANES; w++) {
		b->lanes[w].tail = &b->lanes[w].head;
		if ((b->lanes[w].rows = calloc(b->max_rows,
		    sizeof(*b->lanes[w].rows))) == NULL) {
			idem_batch_free(b);
			return IDEM_ERR_NOMEM;
		}
	}
	*out = b;
	return IDEM_OK;
}

void
idem_batch_free(idem_batch *b)
{
	int w;

	if (b == NULL)
		return;
	for (w = 0; w < IDEM_BATCH_LANES; w++)
		free(b->lanes[w].rows);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

unsigned
idem_batch_max_rows(const idem_batch *b)
{
	return b->max_rows;
}

void
idem_batch_sent(idem_batch *b, int w, unsigned n)
{
	atomic_fetch_add(&b->lanes[w].statements, 1);
	atomic_fetch_add(&b->lanes[w].carried, n);
}

/* Orders members by key: every statement takes its rows' locks in one
 * order, so two batches on the same keys (from two processes) do not
 * deadlock.  The order is the database's of the key columns: bytes, the
 * shorter first on a tie. */
static int
by_key(const void *x, const void *y)
{
	const idem_store_key *a = (*(idem_batch_member *const *)x)->key;
	const idem_store_key *b = (*(idem_batch_member *const *)y)->key;
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->scope, b->scope, 32);

	if (c == 0)
		c = memcmp(a->key, b->key, n);
	if (c == 0)
		c = a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
	return c;
}

/* Takes the rows of the lane's next statement off its queue, the first
 * queued first (up to max_rows that fit).  Under the lock.  Returns their
 * number (at least 1: the head). */
static unsigned
take_rows(idem_batch *b, int w)
{
	lane *l = &b->lanes[w];
	idem_batch_member **pm = &l->head, *m;
	uint64_t total = 0;
	unsigned t = 0;

	while ((m = *pm) != NULL && t < b->max_rows) {
		if (t > 0 && b->fits != NULL &&
		    !b->fits(b->ctx, w, l->rows, t, total, m)) {
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

/* Sends lane w's statement with the rows at the head of its queue and
 * wakes each of them with its result.  Called and returns under the lock,
 * which it drops while the statement is in flight. */
static void
lead(idem_batch *b, int w)
{
	lane *l = &b->lanes[w];
	unsigned n, i;

	l->busy = 1;
	n = take_rows(b, w);
	pthread_mutex_unlock(&b->lock);
	if (n > 1)
		qsort(l->rows, n, sizeof(*l->rows), by_key);
	b->send(b->ctx, w, l->rows, n);
	pthread_mutex_lock(&b->lock);
	/* a waiter reads its result under the lock, once done (it may
	 * leave, its member with it, as soon as it sees done); each is woken
	 * alone */
	for (i = 0; i < n; i++) {
		l->rows[i]->done = 1;
		pthread_cond_signal(&l->rows[i]->wake);
	}
	l->busy = 0;
	/* the lane is free: the first still queued sends next */
	if (l->head != NULL)
		pthread_cond_signal(&l->head->wake);
}

int
idem_batch_submit(idem_batch *b, int w, idem_batch_member *m)
{
	lane *l = &b->lanes[w];
	uint64_t gather_until = 0;
	struct timespec ts;

	m->next = NULL;
	m->result = m->done = 0;
	pthread_cond_init(&m->wake, NULL);
	pthread_mutex_lock(&b->lock);
	*l->tail = m;
	l->tail = &m->next;
	l->queued++;
	while (!m->done) {
		if (may_send(l, &gather_until)) {
			lead(b, w);
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

int
idem_store_batch_gather(idem_store *s, const char *op, unsigned n)
{
	int w;

	if (s == NULL || s->batch == NULL)
		return -1;
	if (strcmp(op, "insert") == 0)
		w = IDEM_BATCH_INSERT;
	else if (strcmp(op, "commit") == 0)
		w = IDEM_BATCH_COMMIT;
	else
		return -1;
	pthread_mutex_lock(&s->batch->lock);
	s->batch->lanes[w].gather = n;
	pthread_mutex_unlock(&s->batch->lock);
	return 0;
}

int
idem_store_batch_counts(idem_store *s, idem_batch_counts *out)
{
	memset(out, 0, sizeof(*out));
	if (s == NULL || s->batch == NULL)
		return -1;
	out->insert_statements =
	    atomic_load(&s->batch->lanes[IDEM_BATCH_INSERT].statements);
	out->insert_rows =
	    atomic_load(&s->batch->lanes[IDEM_BATCH_INSERT].carried);
	out->commit_statements =
	    atomic_load(&s->batch->lanes[IDEM_BATCH_COMMIT].statements);
	out->commit_rows =
	    atomic_load(&s->batch->lanes[IDEM_BATCH_COMMIT].carried);
	return 0;
}
