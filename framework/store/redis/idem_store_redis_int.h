/*
 * idem_store_redis_int.h - what the files of the Redis store share: the
 * store, its keys, the records its scripts read, and the scripts.
 */
#ifndef IDEM_STORE_REDIS_INT_H
#define IDEM_STORE_REDIS_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "idem_batch.h"
#include "idem_redis.h"
#include "idem_store.h"

/* The scripts (idem_store_redis_lua.c says what each takes). */
enum {
	R_RESERVE = 0, R_READ, R_TAKEOVER, R_REUSE, R_RESUME, R_RECONCILE,
	R_COMMIT, R_RELEASE, R_RENEW, R_CHECKPOINT, R_UNKNOWN, R_RESOLVE,
	R_RESOLVE_RELEASE, R_LOOKUP, R_PURGE, R_COUNT, R_UNKNOWNS, R_STATS,
	R_RELEASE_PREFIX, R_NSCRIPT
};
extern const char *const idem_rds_lua[R_NSCRIPT];

/* Buckets of records: each one slot of a cluster (its hash tag), with
 * the index of its records' expiries.  Fixed: it is in every key. */
#define RDS_BUCKETS 256
/* The longest [redis] key-prefix. */
#define RDS_PREFIX_MAX 64
/* A record's key: prefix, "{BB}:", the scope in hex, ':', the key. */
#define RDS_NAME_MAX (RDS_PREFIX_MAX + 5 + 64 + 1 + IDEM_KEY_MAX + 1)
/* The most a value may hold: Redis's proto-max-bulk-len (512 MB), the
 * answer's headers and body each. */
#define RDS_VALUE_MAX (512ULL * 1024 * 1024)

typedef struct rds_store {
	idem_store base;
	idem_redis *r;
	char prefix[RDS_PREFIX_MAX + 1];
	size_t prefix_len;
	int durable;                /* [redis] durability is not none */
	atomic_int lose_answer[IDEM_BATCH_LANES]; /* tests: the next pipeline
	                             * of the lane loses its replies */
} rds_store;

/* A record's key and its bucket's index; member is the record's name
 * after "PREFIX{BB}:", what the index holds. */
typedef struct rds_key {
	char name[RDS_NAME_MAX];
	size_t name_len;
	char index[RDS_PREFIX_MAX + 8];
	size_t index_len;
	const char *member;         /* into name */
	size_t member_len;
} rds_key;

/* Arguments of a script: text or bytes, numbers printed into their own
 * room. */
#define RDS_ARGS_MAX 12
typedef struct rds_args {
	const char *v[RDS_ARGS_MAX];
	size_t len[RDS_ARGS_MAX];
	char num[RDS_ARGS_MAX][24];
	int n;
} rds_args;

/* A request's row in a lane of group commit: its command laid out for
 * the pipeline, and what came back. */
typedef struct rds_lane_row {
	rds_args *a;                    /* borrowed */
	const char *av[2 + RDS_ARGS_MAX];
	size_t al[2 + RDS_ARGS_MAX];
	redisReply *reply;              /* out, the caller's to free */
	int durable;                    /* out: the pipeline's wait met */
	int sent;                       /* out: written, no reply */
} rds_lane_row;

/* Fills *out for k in store rs. */
void idem_rds_key(const rds_store *rs, const idem_store_key *k, rds_key *out);
/* The index of bucket b (0 .. RDS_BUCKETS-1) into buf (size at least
 * RDS_PREFIX_MAX + 8); returns its length. */
size_t idem_rds_index(const rds_store *rs, unsigned b, char *buf);
/* The scope and key of a member of an index (len bytes) into *out.
 * Returns 0, or -1 when it is not one of the store's. */
int idem_rds_member_key(const char *member, size_t len, idem_store_key *out);

/* A record as the scripts return it (R_RESERVE, R_READ). */
typedef struct rds_row {
	int found;
	idem_record_state state;
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	int64_t now_us, reserved_us, lease_us, lease_ms, expires_us;
	uint64_t tombstone_ms;
	int committed;              /* committed and live: resp is its answer */
	idem_stored_response resp;  /* owned */
	idem_progress progress;     /* owned */
} rds_row;

/* Reads a record from fields (the reply's array of R_RESERVE's fields,
 * or NULL: none) at now_us into *row.  Returns IDEM_OK, IDEM_ERR_NOMEM or
 * IDEM_ERR_STORE (not a record of this store: logged). */
idem_err idem_rds_row(const redisReply *fields, int64_t now_us, rds_row *row);
/* Frees what *row owns. */
void idem_rds_row_clear(rds_row *row);
/* A reply's integer, or its string's number; 0 for anything else. */
long long idem_rds_ll(const redisReply *rep);
/* The state named by s (len bytes); IDEM_RECORD__MAX when none is. */
idem_record_state idem_rds_state(const char *s, size_t len);
/* A time of the server's clock (us since the epoch) as UTC text,
 * "2026-11-30T07:25:05.123456Z", into buf (32 bytes). */
void idem_rds_utc(int64_t us, char buf[32]);

/*
 * Calls script i for the record k (its keys first: the record and its
 * index) with the nargs arguments of argv and lens; a script that makes
 * a handler run (durable) waits for [redis] durability in the same round
 * trip (*durable set: whether it was met).  Returns as idem_redis_eval.
 */
idem_err idem_rds_call(rds_store *rs, size_t i, const rds_key *k, int nargs,
    const char **argv, const size_t *lens, redisReply **reply,
    int *retried, int *durable);

/*
 * Sends rq's script for k with a (the reserve's first, lane
 * IDEM_BATCH_INSERT, or the commit's, IDEM_BATCH_COMMIT; size its answer's
 * bytes) in its lane's pipeline (idem_store_redis_batch.c).  Returns 1
 * with *reply (caller frees) and *durable; or 0 when the store does not
 * batch, the row is too large, or the pipeline gave no reply to use:
 * the caller sends it alone, *sent saying whether it was written (maybe
 * applied).
 */
int idem_rds_batched(rds_store *rs, int lane, idem_store_req *rq,
    const rds_key *k, rds_args *a, uint64_t size, redisReply **reply,
    int *durable, int *sent);
/* Makes rs's group commit of rows a pipeline (none in a cluster).
 * Returns IDEM_OK or IDEM_ERR_NOMEM. */
idem_err idem_rds_batch_new(rds_store *rs, unsigned rows);

/* The administration's operations (idem_store_redis_admin.c). */
idem_err idem_rds_purge(idem_store *s, unsigned max, unsigned *purged);
idem_err idem_rds_stats(idem_store *s, idem_store_stats *st);
idem_err idem_rds_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n);
idem_err idem_rds_lookup(idem_store *s, const idem_store_key *k,
    idem_store_record *out);
idem_err idem_rds_census(idem_store *s, uint64_t inflight_ttl_ms,
    idem_store_census *out);
idem_err idem_rds_list_unknown(idem_store *s, size_t max,
    idem_store_key **keys, idem_store_record **recs, size_t *n, int *more);

#endif
