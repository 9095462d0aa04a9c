/*
 * idem_metrics.c - the shared metrics region and its Prometheus text.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "idem_metrics.h"
#include "idem_time.h"

/* Histogram bounds in microseconds; the last bucket is +Inf. */
static const uint64_t bounds_us[] = { 100, 250, 500, 1000, 2500, 5000,
    10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000,
    5000000, 10000000 };
#define NBOUNDS (sizeof(bounds_us) / sizeof(bounds_us[0]))

#define ROUTE_MAX 240            /* bytes of a template kept */
#define METHOD_MAX 16

typedef struct histogram {
	_Atomic uint64_t bucket[NBOUNDS + 1];  /* not cumulative */
	_Atomic uint64_t sum_ns;
} histogram;

typedef struct row {
	_Atomic int used;
	_Atomic int keyed;                     /* outcomes exported at zero */
	char method[METHOD_MAX];
	char route[ROUTE_MAX];
	_Atomic uint64_t status[500];          /* 100 .. 599 */
	_Atomic uint64_t outcomes[IDEM_OUTCOME_COUNT];
	_Atomic uint64_t slow;                 /* over slow-request */
	histogram handler;
} row;

/* A worker slot's row of the status route (zero: no worker). */
typedef struct slot_row {
	_Atomic long pid;
	_Atomic uint64_t started_ms;
	_Atomic uint64_t threads, accepted, max_active, slow;
} slot_row;

struct idem_metrics {
	pthread_mutex_t lock;                  /* registering rows */
	/* the outcomes of IDEM_METRICS_NO_ROUTE */
	_Atomic uint64_t outside[IDEM_OUTCOME_COUNT];
	histogram store[IDEM_STORE_OP_COUNT];
	_Atomic uint64_t store_errors[IDEM_STORE_OP_COUNT];
	_Atomic int64_t in_flight[IDEM_METRICS_SLOTS];
	_Atomic uint64_t workers;
	_Atomic uint64_t restarts;
	_Atomic uint64_t conn_refused;         /* allow-clients */
	_Atomic uint64_t conn_evicted;         /* max-connections */
	uint64_t start_ms;                     /* idem_now_ms at creation */
	_Atomic uint64_t accepted;             /* requests begun */
	_Atomic int64_t active;                /* the sum of in_flight */
	_Atomic uint64_t max_active;           /* its most */
	_Atomic uint64_t slow;                 /* over slow-request */
	slot_row slots[IDEM_METRICS_SLOTS];
	row rows[IDEM_METRICS_ROUTES];
};

static const char *const outcome_names[IDEM_OUTCOME_COUNT] = {
	"acquired", "taken_over", "replayed", "conflict", "in_flight",
	"committed", "released", "fenced", "store_unavailable", "key_missing",
	"key_invalid", "scope_missing", "dead_worker_released", "contended",
	"answer_not_stored", "tx_rolled_back", "tx_outcome_unknown",
	"replay_cached", "resumed", "outcome_unknown", "reconciled",
	"unknown_answered", "expired_refused", "expired_run"
};

static const char *const op_names[IDEM_STORE_OP_COUNT] = {
	"reserve", "commit", "release", "renew", "purge", "checkpoint",
	"mark_unknown", "ping"
};

#define ADD(p, n) atomic_fetch_add_explicit((p), (n), memory_order_relaxed)
#define GET(p) atomic_load_explicit((p), memory_order_relaxed)

idem_err
idem_metrics_new(idem_metrics **out)
{
	pthread_mutexattr_t ma;
	idem_metrics *m;

	m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return IDEM_ERR_NOMEM;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&m->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	m->rows[0].used = 1;
	m->start_ms = idem_now_ms();
	*out = m;
	return IDEM_OK;
}

void
idem_metrics_free(idem_metrics *m)
{
	if (m != NULL)
		munmap(m, sizeof(*m));
}

/* Locks m's mutex, recovering it from a worker that died holding it. */
static void
lock(idem_metrics *m)
{
	if (pthread_mutex_lock(&m->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&m->lock);
}

unsigned
idem_metrics_route(idem_metrics *m, const char *method, const char *tmpl,
    int keyed)
{
	unsigned i, found = 0;

	lock(m);
	for (i = 1; i < IDEM_METRICS_ROUTES && m->rows[i].used; i++)
		if (strncmp(m->rows[i].method, method, METHOD_MAX - 1) == 0 &&
		    strncmp(m->rows[i].route, tmpl, ROUTE_MAX - 1) == 0) {
			found = i;
			break;
		}
	if (found == 0 && i < IDEM_METRICS_ROUTES) {
		snprintf(m->rows[i].method, METHOD_MAX, "%s", method);
		snprintf(m->rows[i].route, ROUTE_MAX, "%s", tmpl);
		atomic_store(&m->rows[i].used, 1);
		found = i;
	}
	if (found != 0 && keyed)
		atomic_store(&m->rows[found].keyed, 1);
	pthread_mutex_unlock(&m->lock);
	return found;
}

void
idem_metrics_request(idem_metrics *m, unsigned r, int status)
{
	if (r >= IDEM_METRICS_ROUTES)
		r = 0;
	if (status < 100 || status > 599)
		status = 500;
	ADD(&m->rows[r].status[status - 100], 1);
}

/* Adds one observation to h. */
static void
observe(histogram *h, uint64_t ns)
{
	uint64_t us = ns / 1000;
	size_t i;

	for (i = 0; i < NBOUNDS && us > bounds_us[i]; i++)
		;
	ADD(&h->bucket[i], 1);
	ADD(&h->sum_ns, ns);
}

void
idem_metrics_handler(idem_metrics *m, unsigned r, uint64_t ns)
{
	if (r >= IDEM_METRICS_ROUTES)
		r = 0;
	observe(&m->rows[r].handler, ns);
}

void
idem_metrics_outcome(idem_metrics *m, unsigned r, idem_outcome o, uint64_t n)
{
	if ((unsigned)o >= IDEM_OUTCOME_COUNT)
		return;
	if (r == IDEM_METRICS_NO_ROUTE)
		ADD(&m->outside[o], n);
	else
		ADD(&m->rows[r < IDEM_METRICS_ROUTES ? r : 0].outcomes[o], n);
}

void
idem_metrics_store(idem_metrics *m, idem_store_op op, uint64_t ns, int failed)
{
	if ((unsigned)op >= IDEM_STORE_OP_COUNT)
		return;
	observe(&m->store[op], ns);
	if (failed)
		ADD(&m->store_errors[op], 1);
}

/* Raises *most to at least v. */
static void
raise_to(_Atomic uint64_t *most, uint64_t v)
{
	uint64_t cur = GET(most);

	while (v > cur && !atomic_compare_exchange_weak(most, &cur, v))
		;
}

void
idem_metrics_in_flight(idem_metrics *m, unsigned slot, int delta)
{
	slot_row *sr = &m->slots[slot % IDEM_METRICS_SLOTS];
	int64_t mine = ADD(&m->in_flight[slot % IDEM_METRICS_SLOTS], delta) +
	    delta;
	int64_t all = ADD(&m->active, delta) + delta;

	if (delta <= 0)
		return;
	ADD(&m->accepted, 1);
	ADD(&sr->accepted, 1);
	raise_to(&sr->max_active, mine > 0 ? (uint64_t)mine : 0);
	raise_to(&m->max_active, all > 0 ? (uint64_t)all : 0);
}

void
idem_metrics_slot_reset(idem_metrics *m, unsigned slot)
{
	slot_row *sr = &m->slots[slot % IDEM_METRICS_SLOTS];

	ADD(&m->active, -atomic_exchange(&m->in_flight[slot %
	    IDEM_METRICS_SLOTS], 0));
	atomic_store(&sr->pid, 0);
	atomic_store(&sr->threads, 0);
	atomic_store(&sr->accepted, 0);
	atomic_store(&sr->max_active, 0);
	atomic_store(&sr->slow, 0);
}

void
idem_metrics_worker_start(idem_metrics *m, unsigned slot, long pid,
    unsigned threads)
{
	slot_row *sr = &m->slots[slot % IDEM_METRICS_SLOTS];

	atomic_store(&sr->started_ms, idem_now_ms());
	atomic_store(&sr->threads, threads);
	atomic_store(&sr->pid, pid);
}

void
idem_metrics_slow(idem_metrics *m, unsigned r, unsigned slot)
{
	ADD(&m->rows[r < IDEM_METRICS_ROUTES ? r : 0].slow, 1);
	ADD(&m->slots[slot % IDEM_METRICS_SLOTS].slow, 1);
	ADD(&m->slow, 1);
}

void
idem_metrics_status_get(idem_metrics *m, idem_metrics_status *out)
{
	int64_t active = GET(&m->active);
	unsigned i;

	memset(out, 0, sizeof(*out));
	out->start_ms = m->start_ms;
	out->accepted = GET(&m->accepted);
	out->active = active > 0 ? (uint64_t)active : 0;
	out->max_active = GET(&m->max_active);
	out->slow = GET(&m->slow);
	for (i = 0; i < IDEM_METRICS_SLOTS; i++) {
		const slot_row *sr = &m->slots[i];
		idem_metrics_worker *w = &out->workers[out->nworkers];
		int64_t mine = GET(&m->in_flight[i]);

		if ((w->pid = GET(&sr->pid)) == 0)
			continue;
		w->slot = i;
		w->started_ms = GET(&sr->started_ms);
		w->threads = GET(&sr->threads);
		w->active = mine > 0 ? (uint64_t)mine : 0;
		w->accepted = GET(&sr->accepted);
		w->max_active = GET(&sr->max_active);
		w->slow = GET(&sr->slow);
		out->nworkers++;
	}
}

void
idem_metrics_workers(idem_metrics *m, unsigned running)
{
	atomic_store(&m->workers, running);
}

void
idem_metrics_restart(idem_metrics *m)
{
	ADD(&m->restarts, 1);
}

/* Counts one connection refused by allow-clients. */
void
idem_metrics_connection_refused(idem_metrics *m)
{
	ADD(&m->conn_refused, 1);
}

/* Counts one idle connection closed for max-connections. */
void
idem_metrics_connection_evicted(idem_metrics *m)
{
	ADD(&m->conn_evicted, 1);
}

uint64_t
idem_metrics_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Writes s as a label value: backslash, quote and newline escaped. */
static void
label(FILE *fp, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(fp, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", fp);
		else
			fputc(*s, fp);
	}
}

/* The HELP and TYPE lines of a metric. */
static void
head(FILE *fp, const char *name, const char *type, const char *help)
{
	fprintf(fp, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Writes the labels of a route row, without braces. */
static void
route_labels(FILE *fp, const row *r, int unmatched)
{
	fputs("method=\"", fp);
	label(fp, unmatched ? "" : r->method);
	fputs("\",route=\"", fp);
	label(fp, unmatched ? "unmatched" : r->route);
	fputs("\"", fp);
}

/* The series of one histogram; labels is written by put_labels. */
static void
histogram_series(FILE *fp, const char *name, const histogram *h,
    void (*put_labels)(FILE *, const void *), const void *arg)
{
	uint64_t cum = 0;
	size_t i;

	for (i = 0; i <= NBOUNDS; i++) {
		cum += GET(&h->bucket[i]);
		fprintf(fp, "%s_bucket{", name);
		put_labels(fp, arg);
		if (i < NBOUNDS)
			fprintf(fp, ",le=\"%g\"}", (double)bounds_us[i] / 1e6);
		else
			fputs(",le=\"+Inf\"}", fp);
		fprintf(fp, " %llu\n", (unsigned long long)cum);
	}
	fprintf(fp, "%s_sum{", name);
	put_labels(fp, arg);
	fprintf(fp, "} %.9f\n%s_count{", (double)GET(&h->sum_ns) / 1e9, name);
	put_labels(fp, arg);
	fprintf(fp, "} %llu\n", (unsigned long long)cum);
}

typedef struct row_arg {
	const row *r;
	int unmatched;
} row_arg;

static void
put_route(FILE *fp, const void *arg)
{
	const row_arg *ra = arg;

	route_labels(fp, ra->r, ra->unmatched);
}

static void
put_op(FILE *fp, const void *arg)
{
	fprintf(fp, "op=\"%s\"", (const char *)arg);
}

/* Whether outcome o is one counted outside any request, so exported at
 * zero for IDEM_METRICS_NO_ROUTE too. */
static int
outside_outcome(unsigned o)
{
	return o == IDEM_OUTCOME_DEAD_WORKER_RELEASED ||
	    o == IDEM_OUTCOME_CONTENDED;
}

/* The outcome series: of every used row (a keyed one's at zero too), then
 * of no route (method="", route=""). */
static void
outcome_series(FILE *fp, const idem_metrics *m)
{
	unsigned i, o;

	for (i = 0; i < IDEM_METRICS_ROUTES && GET(&m->rows[i].used); i++)
		for (o = 0; o < IDEM_OUTCOME_COUNT; o++) {
			uint64_t n = GET(&m->rows[i].outcomes[o]);
			if (n == 0 && !GET(&m->rows[i].keyed))
				continue;
			fputs("idemfcgi_idempotency_outcomes_total{", fp);
			route_labels(fp, &m->rows[i], i == 0);
			fprintf(fp, ",outcome=\"%s\"} %llu\n", outcome_names[o],
			    (unsigned long long)n);
		}
	for (o = 0; o < IDEM_OUTCOME_COUNT; o++) {
		uint64_t n = GET(&m->outside[o]);
		if (n == 0 && !outside_outcome(o))
			continue;
		fprintf(fp, "idemfcgi_idempotency_outcomes_total{method=\"\","
		    "route=\"\",outcome=\"%s\"} %llu\n", outcome_names[o],
		    (unsigned long long)n);
	}
}

/* Whether a histogram has seen anything. */
static int
histogram_used(const histogram *h)
{
	size_t i;

	for (i = 0; i <= NBOUNDS; i++)
		if (GET(&h->bucket[i]) != 0)
			return 1;
	return 0;
}

/* The wall-clock time of the CLOCK_MONOTONIC instant mono_ms, in seconds
 * since the epoch. */
static double
wall_seconds(uint64_t mono_ms)
{
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	return (double)rt.tv_sec + (double)rt.tv_nsec / 1e9 -
	    (double)(idem_now_ms() - mono_ms) / 1e3;
}

/* What the status route shows that the rest does not: the start, the
 * threads, the most in flight, slow handlers, the listen queue. */
static void
status_series(FILE *fp, const idem_metrics *m,
    const idem_metrics_store_info *info)
{
	uint64_t threads = 0;
	unsigned i;

	head(fp, "idemfcgi_requests_in_flight_max", "gauge",
	    "The most requests answered at once since the start.");
	fprintf(fp, "idemfcgi_requests_in_flight_max %llu\n",
	    (unsigned long long)GET(&m->max_active));
	for (i = 0; i < IDEM_METRICS_SLOTS; i++)
		if (GET(&m->slots[i].pid) != 0)
			threads += GET(&m->slots[i].threads);
	head(fp, "idemfcgi_threads", "gauge", "Request threads of the "
	    "running workers; those not in idemfcgi_requests_in_flight are "
	    "idle.");
	fprintf(fp, "idemfcgi_threads %llu\n", (unsigned long long)threads);
	head(fp, "idemfcgi_slow_requests_total", "counter",
	    "Handlers that ran longer than [server] slow-request, by route.");
	for (i = 1; i < IDEM_METRICS_ROUTES && GET(&m->rows[i].used); i++) {
		uint64_t n = GET(&m->rows[i].slow);
		if (n == 0)
			continue;
		fputs("idemfcgi_slow_requests_total{", fp);
		route_labels(fp, &m->rows[i], 0);
		fprintf(fp, "} %llu\n", (unsigned long long)n);
	}
	if (info != NULL && info->has_listen_queue) {
		head(fp, "idemfcgi_listen_queue", "gauge", "Connections waiting "
		    "in the listening socket's accept queue.");
		fprintf(fp, "idemfcgi_listen_queue %llu\n",
		    (unsigned long long)info->listen_queue);
		head(fp, "idemfcgi_listen_queue_max", "gauge", "The most "
		    "connections the accept queue holds (the backlog).");
		fprintf(fp, "idemfcgi_listen_queue_max %llu\n",
		    (unsigned long long)info->listen_backlog);
	}
	head(fp, "idemfcgi_start_time_seconds", "gauge", "When the instance "
	    "started, in seconds since the epoch.");
	fprintf(fp, "idemfcgi_start_time_seconds %.3f\n",
	    wall_seconds(m->start_ms));
}

/* The series of requests: answered, in flight, by status class, time in
 * handlers. */
static void
request_series(FILE *fp, idem_metrics *m,
    const idem_metrics_store_info *store)
{
	int64_t in_flight = 0;
	unsigned i, s;

	head(fp, "idemfcgi_requests_total", "counter",
	    "Requests answered, by route and status.");
	for (i = 0; i < IDEM_METRICS_ROUTES && GET(&m->rows[i].used); i++)
		for (s = 0; s < 500; s++) {
			uint64_t n = GET(&m->rows[i].status[s]);
			if (n == 0)
				continue;
			fputs("idemfcgi_requests_total{", fp);
			route_labels(fp, &m->rows[i], i == 0);
			fprintf(fp, ",status=\"%u\"} %llu\n", s + 100,
			    (unsigned long long)n);
		}
	head(fp, "idemfcgi_requests_in_flight", "gauge",
	    "Requests being answered by the workers of this instance.");
	for (i = 0; i < IDEM_METRICS_SLOTS; i++)
		in_flight += GET(&m->in_flight[i]);
	fprintf(fp, "idemfcgi_requests_in_flight %lld\n",
	    (long long)(in_flight > 0 ? in_flight : 0));
	status_series(fp, m, store);
	head(fp, "idemfcgi_handler_duration_seconds", "histogram",
	    "Time spent in handlers, by route.");
	for (i = 1; i < IDEM_METRICS_ROUTES && GET(&m->rows[i].used); i++) {
		row_arg ra = { &m->rows[i], 0 };
		if (histogram_used(&m->rows[i].handler))
			histogram_series(fp,
			    "idemfcgi_handler_duration_seconds",
			    &m->rows[i].handler, put_route, &ra);
	}
}

/* The series of the store: its operations' latency and errors, the memory
 * store's records, the records of unknown outcome. */
static void
store_series(FILE *fp, idem_metrics *m, const idem_metrics_store_info *store)
{
	unsigned i;

	head(fp, "idemfcgi_store_duration_seconds", "histogram",
	    "Latency of idempotency store operations, by operation.");
	for (i = 0; i < IDEM_STORE_OP_COUNT; i++)
		histogram_series(fp, "idemfcgi_store_duration_seconds",
		    &m->store[i], put_op, op_names[i]);
	head(fp, "idemfcgi_store_errors_total", "counter",
	    "Idempotency store operations that failed, by operation.");
	for (i = 0; i < IDEM_STORE_OP_COUNT; i++)
		fprintf(fp, "idemfcgi_store_errors_total{op=\"%s\"} %llu\n",
		    op_names[i], (unsigned long long)GET(&m->store_errors[i]));
	if (store != NULL && store->memory) {
		head(fp, "idemfcgi_memory_store_entries", "gauge",
		    "Records in the memory store.");
		fprintf(fp, "idemfcgi_memory_store_entries %llu\n",
		    (unsigned long long)store->entries);
		head(fp, "idemfcgi_memory_store_in_flight", "gauge",
		    "Records of the memory store that are in flight.");
		fprintf(fp, "idemfcgi_memory_store_in_flight %llu\n",
		    (unsigned long long)store->in_flight);
		head(fp, "idemfcgi_memory_store_evictions_total", "counter",
		    "Committed records evicted before their lifetime to make "
		    "room (max-entries); each one can let a retry run again.");
		fprintf(fp, "idemfcgi_memory_store_evictions_total %llu\n",
		    (unsigned long long)store->evictions);
		head(fp, "idemfcgi_memory_store_tombstone_evictions_total",
		    "counter", "Tombstones evicted before their end to make "
		    "room (max-entries); each one lets a late retry of its key "
		    "run again.");
		fprintf(fp, "idemfcgi_memory_store_tombstone_evictions_total "
		    "%llu\n", (unsigned long long)store->tombstone_evictions);
	}
	if (store != NULL && store->has_unknown) {
		head(fp, "idemfcgi_idempotency_unknown_records", "gauge",
		    "Records of unknown outcome in the store: a handler could "
		    "not tell whether its side effect happened; each waits for "
		    "a reconcile hook, an operator (idemfcgi-admin unknown) or "
		    "its expiry.");
		fprintf(fp, "idemfcgi_idempotency_unknown_records %llu\n",
		    (unsigned long long)store->unknown);
		head(fp, "idemfcgi_idempotency_unknown_oldest_seconds", "gauge",
		    "Seconds since the oldest record of unknown outcome was "
		    "reserved; 0 when there is none.");
		fprintf(fp, "idemfcgi_idempotency_unknown_oldest_seconds "
		    "%llu.%03u\n", (unsigned long long)(store->unknown_age_ms /
		    1000), (unsigned)(store->unknown_age_ms % 1000));
		head(fp, "idemfcgi_idempotency_tombstones", "gauge",
		    "Tombstones in the store: keys past their lifetime whose "
		    "retries are refused (expired-keys) until "
		    "tombstone-lifetime ends.");
		fprintf(fp, "idemfcgi_idempotency_tombstones %llu\n",
		    (unsigned long long)store->tombstones);
	}
}

/* The series of the process: workers, connections, the build. */
static void
process_series(FILE *fp, idem_metrics *m,
    const idem_metrics_store_info *store)
{
	head(fp, "idemfcgi_workers", "gauge", "Worker processes running.");
	fprintf(fp, "idemfcgi_workers %llu\n",
	    (unsigned long long)GET(&m->workers));
	head(fp, "idemfcgi_worker_restarts_total", "counter",
	    "Workers that died and were started again.");
	fprintf(fp, "idemfcgi_worker_restarts_total %llu\n",
	    (unsigned long long)GET(&m->restarts));
	head(fp, "idemfcgi_connections_refused_total", "counter",
	    "FastCGI connections closed at accept: the peer is not in "
	    "[server] allow-clients.");
	fprintf(fp, "idemfcgi_connections_refused_total %llu\n",
	    (unsigned long long)GET(&m->conn_refused));
	head(fp, "idemfcgi_connections_evicted_total", "counter",
	    "Idle kept FastCGI connections closed to admit a new one "
	    "([server] max-connections reached).");
	fprintf(fp, "idemfcgi_connections_evicted_total %llu\n",
	    (unsigned long long)GET(&m->conn_evicted));
	head(fp, "idemfcgi_build_info", "gauge", "The version; always 1.");
	fprintf(fp, "idemfcgi_build_info{version=\"%s\",store=\"%s\"} 1\n",
	    PACKAGE_VERSION, store != NULL && store->name != NULL ?
	    store->name : "none");
}

char *
idem_metrics_render(idem_metrics *m, const idem_metrics_store_info *store,
    size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *fp;

	if ((fp = open_memstream(&buf, &size)) == NULL)
		return NULL;
	request_series(fp, m, store);
	head(fp, "idemfcgi_idempotency_outcomes_total", "counter",
	    "What the idempotency layer did, by route and outcome (method "
	    "and route empty: outside any request).");
	outcome_series(fp, m);
	store_series(fp, m, store);
	process_series(fp, m, store);
	if (fclose(fp) != 0) {
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}
