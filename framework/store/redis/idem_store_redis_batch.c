/*
 * idem_store_redis_batch.c - the Redis store's group commit, on the
 * engine every store shares (idem_batch.h): the reservations (their
 * first script) and the commits that the threads of a process send at
 * the same time go to the server as one pipeline, each lane's written at
 * once and its replies read together, with one WAIT (or WAITAOF) after
 * them when [redis] durability asks for it.  Each script still runs
 * alone on the server, as it would have: batching saves the round trips,
 * the system calls and the server's reads and writes, never an owner
 * check.
 *
 * A row whose reply is missing (the connection lost after the write), or
 * an error (a NOSCRIPT, a READONLY: what the client's own path follows),
 * is sent again alone by its thread, which knows whether it was written
 * (maybe applied: its reservation says unanswered, its commit reads the
 * record back).  Outside a cluster only: in one, a pipeline would span
 * slots and servers.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_store_redis.h"
#include "idem_store_redis_int.h"

/* A row's result (idem_batch_member.result). */
enum {
	B_ALONE = 0,    /* no reply to use: send it alone */
	B_REPLY         /* its reply is in its lane row */
};

/* The most an answer a commit carries into a pipeline may hold; larger
 * ones go alone. */
#define BATCH_ANSWER_MAX (64 * 1024)

/* The engine's send: the n rows of lane w in one pipeline. */
static void
send_rows(void *ctx, int w, idem_batch_member **rows, unsigned n)
{
	rds_store *rs = ctx;
	idem_redis_call calls[IDEM_BATCH_ROWS_MAX];
	int durable = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		rds_lane_row *lr = rows[i]->row;
		calls[i].nkeys = 2;
		calls[i].nargs = lr->a->n;
		calls[i].argv = lr->av;
		calls[i].lens = lr->al;
		rows[i]->result = B_ALONE;
	}
	if (idem_redis_eval_pipeline(rs->r, w == IDEM_BATCH_INSERT ?
	    R_RESERVE : R_COMMIT, calls, n, rs->durable ? &durable : NULL,
	    atomic_exchange(&rs->lose_answer[w], 0)) != IDEM_OK)
		return;
	idem_batch_sent(rs->base.batch, w, n);
	for (i = 0; i < n; i++) {
		rds_lane_row *lr = rows[i]->row;
		lr->sent = calls[i].sent;
		if (calls[i].reply == NULL)
			continue;
		if (calls[i].reply->type == REDIS_REPLY_ERROR) {
			/* not applied (a script refused before it ran, or a
			 * server that no longer takes writes); its own path
			 * says what */
			freeReplyObject(calls[i].reply);
			lr->sent = 0;
			continue;
		}
		lr->reply = calls[i].reply;
		lr->durable = rs->durable ? durable : 1;
		rows[i]->result = B_REPLY;
	}
}

/* Lays the script's keys and arguments out for the pipeline. */
static void
lane_row(idem_batch_member *m, rds_lane_row *lr, idem_store_req *rq,
    const rds_key *k, rds_args *a)
{
	int i;

	memset(m, 0, sizeof(*m));
	memset(lr, 0, sizeof(*lr));
	m->key = &rq->key;
	m->owner = rq->owner;
	m->row = lr;
	lr->a = a;
	lr->av[0] = k->name;
	lr->al[0] = k->name_len;
	lr->av[1] = k->index;
	lr->al[1] = k->index_len;
	for (i = 0; i < a->n && i < RDS_ARGS_MAX; i++) {
		lr->av[2 + i] = a->v[i];
		lr->al[2 + i] = a->len[i];
	}
}

int
idem_rds_batched(rds_store *rs, int lane, idem_store_req *rq,
    const rds_key *k, rds_args *a, uint64_t size, redisReply **reply,
    int *durable, int *sent)
{
	idem_batch_member m;
	rds_lane_row lr;

	*reply = NULL;
	*sent = 0;
	if (rs->base.batch == NULL || size > BATCH_ANSWER_MAX)
		return 0;
	lane_row(&m, &lr, rq, k, a);
	m.size = size;
	if (idem_batch_submit(rs->base.batch, lane, &m) == B_REPLY) {
		*reply = lr.reply;
		*durable = lr.durable;
		return 1;
	}
	*sent = lr.sent;
	return 0;
}

int
idem_store_redis_lose_answer(idem_store *s, const char *op)
{
	rds_store *rs = (rds_store *)s;

	if (s == NULL || strcmp(idem_store_name(s), "redis") != 0 ||
	    rs->base.batch == NULL)
		return -1;
	if (strcmp(op, "insert") == 0)
		atomic_store(&rs->lose_answer[IDEM_BATCH_INSERT], 1);
	else if (strcmp(op, "commit") == 0)
		atomic_store(&rs->lose_answer[IDEM_BATCH_COMMIT], 1);
	else
		return -1;
	return 0;
}

idem_err
idem_rds_batch_new(rds_store *rs, unsigned rows)
{
	idem_err err;

	if (idem_redis_is_cluster(rs->r))
		return IDEM_OK;
	if ((err = idem_batch_new(rows, send_rows, NULL, rs, &rs->base.batch)) !=
	    IDEM_OK)
		return err;
	idem_log(NULL, IDEM_LOG_INFO, "redis store: concurrent reservations and "
	    "commits are pipelined, up to %u a round trip",
	    idem_batch_max_rows(rs->base.batch));
	return IDEM_OK;
}
