/*
 * idem_batch.h - group commit, the engine the stores with a database
 * share: the statements of one kind (a lane) that the threads of a
 * process send at the same time go to the database as one statement, so
 * the database parses, locks, logs and fsyncs once for several requests.
 *
 * A lane has at most one statement in flight.  A thread that finds its
 * lane free sends its own row at once (one connection's latency is
 * unchanged: no timer); threads that arrive meanwhile queue, and when the
 * statement comes back the first of them sends the rows of the queue, up
 * to max-rows that fit, in one statement.  What a statement is, and what
 * it did for each row, is the store's (its send callback): the engine
 * queues, picks the leader, and wakes each waiter with its result.
 */
#ifndef IDEM_BATCH_H
#define IDEM_BATCH_H

#include <pthread.h>
#include <stdint.h>

#include "idemfcgi.h"
#include "idem_store.h"

/* The lanes of both stores: reservations' INSERT, commits' UPDATE. */
enum { IDEM_BATCH_INSERT, IDEM_BATCH_COMMIT, IDEM_BATCH_LANES };

/* One request's row in a lane.  The store fills key, owner, size and row
 * before idem_batch_submit; send sets result. */
typedef struct idem_batch_member {
	struct idem_batch_member *next;    /* the engine's */
	pthread_cond_t wake;               /* the engine's */
	const idem_store_key *key;         /* borrowed: the statement's rows
	                                    * are sorted by it */
	const char *owner;                 /* borrowed */
	uint64_t size;                     /* bytes it adds to a statement */
	void *row;                         /* the store's (borrowed) */
	int result;                        /* the store's, set by send */
	int done;                          /* the engine's: result is set,
	                                    * read under its lock */
} idem_batch_member;

typedef struct idem_batch idem_batch;

/* Sends lane's statement with the n rows (sorted by key, n >= 1) and sets
 * each rows[i]->result.  Called without the engine's lock. */
typedef void (*idem_batch_send_fn)(void *ctx, int lane,
    idem_batch_member **rows, unsigned n);
/* Whether m may join the t rows taken so far, whose sizes total total
 * bytes (t >= 1); NULL: every row fits. */
typedef int (*idem_batch_fits_fn)(void *ctx, int lane,
    idem_batch_member *const *rows, unsigned t, uint64_t total,
    const idem_batch_member *m);

/* A batcher of IDEM_BATCH_LANES lanes of up to max_rows rows a statement
 * (cut to IDEM_BATCH_ROWS_MAX), sending with send and fits on ctx (all
 * borrowed for its life).  Returns IDEM_OK with *out (free with
 * idem_batch_free) or IDEM_ERR_NOMEM. */
idem_err idem_batch_new(unsigned max_rows, idem_batch_send_fn send,
    idem_batch_fits_fn fits, void *ctx, idem_batch **out);
/* Frees b (no thread may be in it); NULL is fine. */
void idem_batch_free(idem_batch *b);
/* The most rows one statement of b carries. */
unsigned idem_batch_max_rows(const idem_batch *b);

/* Queues m on lane and returns its result once a statement that carried
 * it came back: sent by m's own thread when the lane is free (with
 * whatever queued meanwhile), else by the thread that finds it free or is
 * woken first in the queue when it frees. */
int idem_batch_submit(idem_batch *b, int lane, idem_batch_member *m);
/* Counts a statement of lane w that reached the database with n rows: the
 * send callback's, for idem_store_batch_counts. */
void idem_batch_sent(idem_batch *b, int w, unsigned n);

/* What the lanes of a store sent: statements, and the requests they
 * carried (tests, benchmarks). */
typedef struct idem_batch_counts {
	unsigned long long insert_statements, insert_rows;
	unsigned long long commit_statements, commit_rows;
} idem_batch_counts;

/* Tests only: the next statement of s's lane op ("insert" or "commit")
 * waits until n requests are queued (at most 10 s), so a test makes a
 * batch certain without timing.  Returns 0, or -1 (s does not batch, no
 * such lane). */
int idem_store_batch_gather(idem_store *s, const char *op, unsigned n);
/* Fills *out with what s's lanes sent.  Returns 0, or -1 (s does not
 * batch; *out zero). */
int idem_store_batch_counts(idem_store *s, idem_batch_counts *out);

#endif
