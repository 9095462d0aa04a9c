/*
 * idem_metrics.h - counters, gauges and histograms shared by every worker
 * of one instance, rendered in the Prometheus text format (0.0.4).
 *
 * The master maps one shared anonymous region before it forks the
 * workers, so every worker adds to the same counters (relaxed atomic adds,
 * no lock on the request path) and whichever worker answers a scrape
 * reports the whole instance.  Route rows are registered by method and
 * template when a worker starts, under a robust process-shared mutex; a
 * reload that keeps a route keeps its counters.  Nothing here allocates
 * on the request path.
 */
#ifndef IDEM_METRICS_H
#define IDEM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "idemfcgi.h"

#define IDEM_METRICS_ROUTES 256     /* route rows; row 0 is "unmatched" */
/* The row of the outcomes no request's route owns (method="", route=""). */
#define IDEM_METRICS_NO_ROUTE IDEM_METRICS_ROUTES
#define IDEM_METRICS_SLOTS 512      /* worker slots of the in-flight gauge */

/* What the idempotency layer did with a request (or a dead worker's key). */
typedef enum idem_outcome {
	IDEM_OUTCOME_ACQUIRED = 0,   /* reserved: the handler ran */
	IDEM_OUTCOME_TAKEN_OVER,     /* a stale reservation taken over */
	IDEM_OUTCOME_REPLAYED,       /* the stored answer was replayed */
	IDEM_OUTCOME_CONFLICT,       /* same key, other request */
	IDEM_OUTCOME_IN_FLIGHT,      /* 409: the first request still runs */
	IDEM_OUTCOME_COMMITTED,      /* the answer was stored */
	IDEM_OUTCOME_RELEASED,       /* released for a retry (5xx, error) */
	IDEM_OUTCOME_FENCED,         /* a commit or release refused: the
	                              * reservation was no longer ours */
	IDEM_OUTCOME_STORE_UNAVAILABLE, /* 503: the store failed */
	IDEM_OUTCOME_KEY_MISSING,    /* 400 */
	IDEM_OUTCOME_KEY_INVALID,    /* 400 */
	IDEM_OUTCOME_SCOPE_MISSING,  /* 400 */
	IDEM_OUTCOME_DEAD_WORKER_RELEASED, /* released by the master (no
	                              * route: IDEM_METRICS_NO_ROUTE) */
	IDEM_OUTCOME_CONTENDED,      /* a deadlock or lock wait on one key:
	                              * retried, or answered 409 in flight
	                              * (the store reports it in the
	                              * request's descriptor, the caller
	                              * counts it on the request's route) */
	IDEM_OUTCOME_ANSWER_NOT_STORED, /* a committable answer too large for
	                              * the store: a stand-in was stored */
	IDEM_OUTCOME_TX_ROLLED_BACK, /* a transactional route's committable
	                              * answer whose transaction did not
	                              * commit: 503, nothing done */
	IDEM_OUTCOME_TX_UNKNOWN,     /* its COMMIT's outcome was lost: 503 */
	IDEM_OUTCOME_REPLAY_CACHED,  /* a replay answered from the MySQL
	                              * store's replay cache (also counted
	                              * as replayed; the store says so in
	                              * idem_reserve_result.cached) */
	IDEM_OUTCOME_RESUMED,        /* a paused record made this request's:
	                              * the handler ran from its progress */
	IDEM_OUTCOME_OUTCOME_UNKNOWN, /* a handler (or reconcile hook) could
	                              * not tell what became of its side
	                              * effect: the record kept as unknown */
	IDEM_OUTCOME_RECONCILED,     /* a reconcile hook gave the final answer
	                              * of a record of unknown outcome */
	IDEM_OUTCOME_UNKNOWN_ANSWERED, /* a retry of a record of unknown
	                              * outcome without a reconcile hook:
	                              * 503, nothing ran */
	IDEM_OUTCOME_EXPIRED_REFUSED, /* a key past its lifetime, its
	                              * tombstone live: 422, nothing ran */
	IDEM_OUTCOME_EXPIRED_RUN,    /* the same, on a route whose
	                              * expired-keys = run: the handler ran
	                              * again (also counted as acquired) */
	IDEM_OUTCOME_COUNT
} idem_outcome;

/* A store operation, for its latency histogram. */
typedef enum idem_store_op {
	IDEM_STORE_OP_RESERVE = 0,
	IDEM_STORE_OP_COMMIT,
	IDEM_STORE_OP_RELEASE,
	IDEM_STORE_OP_RENEW,
	IDEM_STORE_OP_PURGE,
	IDEM_STORE_OP_CHECKPOINT,
	IDEM_STORE_OP_MARK_UNKNOWN,
	IDEM_STORE_OP_PING,          /* readiness (idem_health.h) */
	IDEM_STORE_OP_COUNT
} idem_store_op;

typedef struct idem_metrics idem_metrics;

/* What a scrape adds about the answering worker: its store, and the
 * listening socket every worker shares. */
typedef struct idem_metrics_store_info {
	const char *name;            /* "memory", "mysql" */
	int memory;                  /* the three numbers below are
	                              * meaningful */
	uint64_t entries, in_flight, evictions;
	int has_unknown;             /* the two below are meaningful (the
	                              * store could count them) */
	uint64_t unknown;            /* records of unknown outcome */
	uint64_t unknown_age_ms;     /* since the oldest was marked so */
	uint64_t tombstones;         /* tombstones kept (has_unknown) */
	uint64_t tombstone_evictions; /* the memory store's (memory) */
	int has_listen_queue;        /* the two below are meaningful (the
	                              * kernel told them: idem_sockq.h) */
	uint64_t listen_queue;       /* connections waiting to be accepted */
	uint64_t listen_backlog;     /* the most that may wait */
} idem_metrics_store_info;

/* One worker process as the status route shows it. */
typedef struct idem_metrics_worker {
	unsigned slot;
	long pid;
	uint64_t started_ms;         /* idem_now_ms when it registered */
	uint64_t threads;            /* [server] threads */
	uint64_t active;             /* threads answering a request now */
	uint64_t accepted;           /* requests it began to answer */
	uint64_t max_active;         /* the most active at once */
	uint64_t slow;               /* handlers over slow-request */
} idem_metrics_worker;

/* The whole instance as the status route shows it (idem_metrics_status):
 * since the metrics region was made (the master's start), and each
 * running worker's own numbers. */
typedef struct idem_metrics_status {
	uint64_t start_ms;           /* idem_now_ms of the start */
	uint64_t accepted;           /* requests begun, every worker's, the
	                              * dead ones' too */
	uint64_t active;             /* requests being answered now */
	uint64_t max_active;         /* the most at once since the start */
	uint64_t slow;               /* handlers over slow-request */
	unsigned nworkers;
	idem_metrics_worker workers[IDEM_METRICS_SLOTS];
} idem_metrics_status;

/*
 * A zeroed region shared with the processes forked after this call.
 * Returns IDEM_OK with *out (free with idem_metrics_free) or IDEM_ERR_NOMEM.
 */
idem_err idem_metrics_new(idem_metrics **out);
/* Unmaps m in this process.  NULL is fine. */
void idem_metrics_free(idem_metrics *m);

/* The row of a route (registered when new); keyed says the idempotency
 * layer runs on it (its policy is not off), so its outcomes are exported
 * at zero too, before any happens (once keyed, a row stays so).  Returns
 * the row, or 0 ("unmatched") when every row is taken. */
unsigned idem_metrics_route(idem_metrics *m, const char *method,
    const char *tmpl, int keyed);

/* One answered request of a route row. */
void idem_metrics_request(idem_metrics *m, unsigned row, int status);
/* A handler of a route row took ns nanoseconds. */
void idem_metrics_handler(idem_metrics *m, unsigned row, uint64_t ns);
/* One idempotency outcome (n times) of a route row, or of
 * IDEM_METRICS_NO_ROUTE (outside any request); a row past it counts as 0. */
void idem_metrics_outcome(idem_metrics *m, unsigned row, idem_outcome o,
    uint64_t n);
/* A store operation took ns nanoseconds; failed says it failed. */
void idem_metrics_store(idem_metrics *m, idem_store_op op, uint64_t ns,
    int failed);
/* Requests being answered by the worker in slot: +1 (one more accepted)
 * or -1. */
void idem_metrics_in_flight(idem_metrics *m, unsigned slot, int delta);
/* The worker in slot is gone: its in-flight requests are too, and its
 * row of the status route. */
void idem_metrics_slot_reset(idem_metrics *m, unsigned slot);
/* The worker process pid with threads threads now serves as slot. */
void idem_metrics_worker_start(idem_metrics *m, unsigned slot, long pid,
    unsigned threads);
/* A handler of a route row, run by the worker in slot, went over
 * [server] slow-request. */
void idem_metrics_slow(idem_metrics *m, unsigned row, unsigned slot);
/* Fills *out (caller's; large: allocate it) with the instance's status. */
void idem_metrics_status_get(idem_metrics *m, idem_metrics_status *out);
/* The master: how many workers run, and one more restart. */
void idem_metrics_workers(idem_metrics *m, unsigned running);
/* A FastCGI connection refused ([server] allow-clients), and an idle kept
 * connection closed to admit a new one ([server] max-connections). */
void idem_metrics_connection_refused(idem_metrics *m);
void idem_metrics_connection_evicted(idem_metrics *m);
void idem_metrics_restart(idem_metrics *m);

/*
 * The whole exposition text (caller frees); store may be NULL.  Returns
 * NULL when out of memory; *len gets the length.
 */
char *idem_metrics_render(idem_metrics *m,
    const idem_metrics_store_info *store, size_t *len);

/* A monotonic clock in nanoseconds, for the durations above. */
uint64_t idem_metrics_now_ns(void);

#endif
