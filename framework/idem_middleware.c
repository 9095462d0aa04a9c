/*
 * idem_middleware.c - reserve, run, commit or release, replay.  The leases
 * of the reservations and the jobs a store outage defers are idem_lease.c's.
 */
#include "config.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "idem_key.h"
#include "idem_lease.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_middleware.h"
#include "idem_mysql.h"
#include "idem_router.h"
#include "idem_time.h"

/* The request header that injects a fault (DESIGN.md 4), read
 * only when the environment has IDEMFCGI_TEST_FAULTS=1. */
#define FAULT_HEADER "X-Idemfcgi-Fault"

struct idem_middleware {
	const idem_config *cfg;   /* borrowed */
	idem_store *store;        /* owned */
	struct idem_metrics *metrics; /* borrowed; NULL: not counted */
	char instance[17];        /* owner tokens start with it and '.' */
	/* the leases of this process's reservations, renewed while their
	 * handlers run, and the commits and releases that met an outage */
	idem_leases *leases;      /* owned */
	/* a store outage is logged when it begins and when it ends, not on
	 * every request it refuses */
	atomic_int store_down;
	_Atomic uint64_t down_since;   /* ms */
	atomic_ulong refused_down;     /* 503s since */
	int faults;               /* IDEMFCGI_TEST_FAULTS=1: requests may
	                           * inject faults (DESIGN.md 4) */
};

/* Whether req asks for the fault named point (see FAULT_HEADER). */
static int
fault(const idem_middleware *mw, const idem_request *req, const char *point)
{
	const char *v;

	if (!mw->faults)
		return 0;
	v = idem_request_header(req, FAULT_HEADER);
	return v != NULL && strcmp(v, point) == 0;
}

/* Dies at point when req asks for it: a worker killed there. */
static void
fault_die(const idem_middleware *mw, const idem_request *req,
    const char *point)
{
	if (fault(mw, req, point))
		raise(SIGKILL);
}

/* Counts an outcome on a metrics row when mw has metrics. */
static void
count_row(const idem_middleware *mw, unsigned row, idem_outcome o)
{
	if (mw->metrics != NULL)
		idem_metrics_outcome(mw->metrics, row, o, 1);
}

/* Counts an outcome of req's route when mw has metrics. */
static void
count(const idem_middleware *mw, const idem_request *req, idem_outcome o)
{
	count_row(mw, req->route->metrics_row, o);
}

static idem_err commit_deferred(void *arg, const idem_store_key *sk,
    const char *owner, const idem_stored_response *sr,
    const idem_log_ctx *ctx);

idem_err
idem_middleware_new(const idem_config *cfg, idem_store *store,
    idem_middleware **out)
{
	idem_middleware *mw = calloc(1, sizeof(*mw));
	const char *faults;

	if (mw == NULL || idem_leases_new(store, cfg->inflight_ttl,
	    commit_deferred, mw, &mw->leases) != IDEM_OK) {
		free(mw);
		idem_store_close(store);
		return IDEM_ERR_NOMEM;
	}
	mw->cfg = cfg;
	mw->store = store;
	faults = getenv("IDEMFCGI_TEST_FAULTS");
	mw->faults = faults != NULL && strcmp(faults, "1") == 0;
	idem_random_id(mw->instance);
	idem_sha256_init();
	*out = mw;
	return IDEM_OK;
}

void
idem_middleware_set_instance(idem_middleware *mw, const char *id)
{
	snprintf(mw->instance, sizeof(mw->instance), "%s", id);
}

unsigned
idem_middleware_flush(idem_middleware *mw, uint64_t budget_ms)
{
	return idem_leases_flush(mw->leases, budget_ms);
}

void
idem_middleware_free(idem_middleware *mw)
{
	if (mw == NULL)
		return;
	idem_middleware_flush(mw, mw->cfg->shutdown_grace);
	idem_leases_free(mw->leases);
	idem_store_close(mw->store);
	free(mw);
}

idem_store *
idem_middleware_store(const idem_middleware *mw)
{
	return mw->store;
}

idem_store *
idem_middleware_swap_store(idem_middleware *mw, idem_store *store)
{
	idem_store *old = mw->store;

	mw->store = store;
	idem_leases_set_store(mw->leases, store);
	return old;
}

void
idem_middleware_set_metrics(idem_middleware *mw, struct idem_metrics *m)
{
	mw->metrics = m;
	idem_store_set_metrics(mw->store, m);
	idem_leases_set_metrics(mw->leases, m);
}

unsigned
idem_middleware_backlog(idem_middleware *mw)
{
	return idem_leases_backlog(mw->leases);
}

int
idem_middleware_store_down(const idem_middleware *mw)
{
	return atomic_load(&mw->store_down);
}

/* Methods that change nothing (RFC 9110 section 9.2.1): the default policy
 * leaves their routes off. */
static const char *const safe_methods[] = { "GET", "HEAD", "OPTIONS",
    "TRACE" };

idem_policy
idem_route_policy(const idem_config *cfg, const idem_route *rt)
{
	size_t i;

	if (rt->policy != IDEM_POLICY_DEFAULT)
		return rt->policy;
	for (i = 0; i < sizeof(safe_methods) / sizeof(safe_methods[0]); i++)
		if (strcmp(rt->method, safe_methods[i]) == 0)
			return IDEM_POLICY_OFF;
	return cfg->required ? IDEM_POLICY_REQUIRED : IDEM_POLICY_OPTIONAL;
}

idem_policy
idem_middleware_policy(const idem_middleware *mw, const idem_request *req)
{
	return idem_route_policy(mw->cfg, req->route);
}

void
idem_answer_problem(idem_response *res, int status, const char *code,
    const char *detail, int retry_after)
{
	char ra[16];

	idem_response_clear(res);
	if (idem_response_problem(res, status, code, detail) != IDEM_OK) {
		idem_response_clear(res);
		res->status = 500;
		return;
	}
	if (retry_after > 0) {
		snprintf(ra, sizeof(ra), "%d", retry_after);
		if (idem_response_header(res, "Retry-After", ra) != IDEM_OK)
			res->status = 500;
	}
}

/* Replaces res with the 503 of a store that failed: the handler did not
 * run (fail closed). */
static void
refuse_store_unavailable(idem_response *res)
{
	idem_answer_problem(res, 503, "IDEMPOTENCY_STORE_UNAVAILABLE", "the "
	    "idempotency store is unavailable; retry later", 1);
}

/*
 * Response headers never stored for replay: those of one response only (a
 * client's cookie, the time, the request id), the hop-by-hop ones (RFC 9110
 * section 7.6.1), and the replay marker, which replay adds itself.
 */
static const struct {
	const char *name;
	size_t len;
} never_stored[] = {
#define NAME(s) { s, sizeof(s) - 1 }
	NAME("Set-Cookie"), NAME("Date"), NAME("X-Request-Id"),
	NAME("Connection"), NAME("Keep-Alive"), NAME("Proxy-Connection"),
	NAME("Transfer-Encoding"), NAME("Upgrade"), NAME("TE"),
	NAME("Trailer"), NAME(IDEM_REPLAYED_HEADER)
#undef NAME
};

int
idem_header_stored(const idem_config *cfg, const char *name)
{
	size_t i, len = strlen(name);

	/* names of another length cannot be equal */
	for (i = 0; i < sizeof(never_stored) / sizeof(never_stored[0]); i++)
		if (len == never_stored[i].len &&
		    strcasecmp(name, never_stored[i].name) == 0)
			return 0;
	for (i = 0; cfg != NULL && i < cfg->nreplay_omit; i++)
		if (strcasecmp(name, cfg->replay_omit[i]) == 0)
			return 0;
	return 1;
}

/* The bytes headers_write may need for res, its NUL included. */
static size_t
headers_size(const idem_response *res)
{
	size_t i, size = 1;

	for (i = 0; i < res->nheaders; i++)
		size += strlen(res->headers[i].name) +
		    strlen(res->headers[i].value) + 4;
	return size;
}

/* Writes the stored headers of res to out (headers_size(res) bytes):
 * "Name: value\r\n" each, and a NUL.  Returns the length written. */
static size_t
headers_write(const idem_config *cfg, const idem_response *res, char *out)
{
	size_t i, kept = 0, n;
	char *p = out;

	for (i = 0; i < res->nheaders && kept < IDEM_MAX_HEADERS; i++) {
		const idem_header *h = &res->headers[i];
		/* what replay would refuse is never stored */
		if (!idem_response_header_ok(h->name, h->value) ||
		    !idem_header_stored(cfg, h->name))
			continue;
		n = strlen(h->name);
		memcpy(p, h->name, n);
		p += n;
		*p++ = ':';
		*p++ = ' ';
		n = strlen(h->value);
		memcpy(p, h->value, n);
		p += n;
		*p++ = '\r';
		*p++ = '\n';
		kept++;
	}
	*p = '\0';
	return (size_t)(p - out);
}

char *
idem_headers_serialize(const idem_config *cfg, const idem_response *res,
    size_t *len)
{
	char *out = malloc(headers_size(res));

	if (out != NULL)
		*len = headers_write(cfg, res, out);
	return out;
}

/* Fills res from a stored answer plus Idempotent-Replayed, which does not
 * count against the handler's IDEM_MAX_HEADERS.  The never-stored headers
 * of cfg are dropped here too, should an answer stored by an older
 * version, or before replay-omit-headers named them, carry them.  Returns
 * IDEM_OK or an error (res then holds whatever was built). */
static idem_err
replay(const idem_config *cfg, const idem_stored_response *sr,
    idem_response *res)
{
	/* the usual few headers are cut up here, not in an allocation */
	char small[1024], *copy = small, *heap = NULL, *line, *save = NULL;
	idem_err err = IDEM_OK;

	idem_response_clear(res);
	if ((err = idem_response_status(res, sr->status)) != IDEM_OK)
		return err;
	if (sr->headers_len >= sizeof(small) &&
	    (copy = heap = malloc(sr->headers_len + 1)) == NULL)
		return IDEM_ERR_NOMEM;
	/* up to the first NUL, as a C string would be */
	copy[0] = '\0';
	if (sr->headers != NULL)
		strncat(copy, sr->headers, sr->headers_len);
	for (line = strtok_r(copy, "\r\n", &save); line != NULL && err == IDEM_OK;
	    line = strtok_r(NULL, "\r\n", &save)) {
		char *colon = strchr(line, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		if (!idem_header_stored(cfg, line))
			continue;
		/* the one space idem_headers_serialize writes: a value's own
		 * leading blanks stay */
		err = idem_response_header(res, line,
		    colon[1] == ' ' ? colon + 2 : colon + 1);
	}
	free(heap);
	if (err == IDEM_OK)
		err = idem_response_framework_header(res, IDEM_REPLAYED_HEADER,
		    "true");
	if (err == IDEM_OK)
		err = idem_response_write(res, sr->body, sr->body_len);
	return err;
}

/* Whether this process has warned that scope = none ignores principals. */
static atomic_int unscoped_warned;

/* Under scope = none: logs once per process, at warn, that req carries a
 * principal (REMOTE_USER, Authorization) the key ignores, so clients that
 * send the same key and request share one answer. */
static void
warn_unscoped(const idem_request *req)
{
	const char *auth = idem_request_env(req, "HTTP_AUTHORIZATION");
	int was = 0;

	if (idem_request_remote_user(req) == NULL &&
	    (auth == NULL || *auth == '\0'))
		return;
	if (atomic_load_explicit(&unscoped_warned, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong(&unscoped_warned, &was, 1))
		return;
	idem_log_event(req, IDEM_LOG_WARN, "unscoped_principal", NULL,
	    "[idempotency] scope = none, but requests carry a principal "
	    "(REMOTE_USER or Authorization) that idempotency keys ignore: "
	    "clients sending the same key and request get one answer; set "
	    "scope = remote-user or header:NAME (logged once per process)");
}

/* Fills *sk: the key, the scope hash, and the metrics row of req's route
 * (what the store counts on the key's behalf).  Returns 0, or -1 after
 * putting a 400 in res when the scope's principal is missing. */
static int
store_key(const idem_middleware *mw, const idem_request *req, const char *key,
    idem_store_key *sk, idem_response *res)
{
	const char *who = NULL;

	memset(sk, 0, sizeof(*sk));
	sk->key_len = strlen(key);
	memcpy(sk->key, key, sk->key_len);
	sk->metrics_row = req->route->metrics_row;
	switch (mw->cfg->scope) {
	case IDEM_SCOPE_NONE:
		warn_unscoped(req);
		return 0;
	case IDEM_SCOPE_REMOTE_USER:
		who = idem_request_remote_user(req);
		break;
	case IDEM_SCOPE_HEADER:
		who = idem_request_header(req, mw->cfg->scope_header);
		break;
	}
	if (who == NULL || *who == '\0') {
		char detail[256];
		snprintf(detail, sizeof(detail), "idempotency keys are scoped by "
		    "%s%s, and this request has none", mw->cfg->scope ==
		    IDEM_SCOPE_HEADER ? "the header " : "", mw->cfg->scope ==
		    IDEM_SCOPE_HEADER ? mw->cfg->scope_header :
		    "the authenticated user");
		idem_answer_problem(res, 400, "IDEMPOTENCY_SCOPE_MISSING", detail,
		    0);
		return -1;
	}
	if (idem_scope_hash(mw->cfg, who, sk->scope) != IDEM_OK) {
		idem_answer_problem(res, 500, "OUT_OF_MEMORY", "out of memory",
		    0);
		return -1;
	}
	return 0;
}

/* The store failed on a request: logs the start of an outage once, and
 * counts the refusals it causes. */
static void
store_failed(idem_middleware *mw, const idem_request *req, idem_err err)
{
	int was_up = 0;

	count(mw, req, IDEM_OUTCOME_STORE_UNAVAILABLE);
	atomic_fetch_add(&mw->refused_down, 1);
	if (atomic_compare_exchange_strong(&mw->store_down, &was_up, 1)) {
		mw->down_since = idem_now_ms();
		idem_log_event(req, IDEM_LOG_ERROR, "store_unavailable", NULL,
		    "idempotency store unavailable (%s): requests get 503 and "
		    "their handlers do not run until it is back",
		    idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_DEBUG, "store_unavailable", NULL,
		    "idempotency store still unavailable: %s; answered 503",
		    idem_strerror(err));
	}
}

/* The store answered: logs the end of an outage once. */
static void
store_answered(idem_middleware *mw, const idem_request *req)
{
	int was_down = 1;

	if (atomic_load_explicit(&mw->store_down, memory_order_relaxed) &&
	    atomic_compare_exchange_strong(&mw->store_down, &was_down, 0))
		idem_log_event(req, IDEM_LOG_WARN, "store_recovered", NULL,
		    "idempotency store is back after %llu ms; %lu request(s) "
		    "got 503 meanwhile",
		    (unsigned long long)(idem_now_ms() - mw->down_since),
		    atomic_exchange(&mw->refused_down, 0));
}

/* Why the store cannot hold an answer of these sizes (max-response, or
 * the store's own limits), or NULL when it can. */
static const char *
too_large(const idem_middleware *mw, size_t headers_len, size_t body_len)
{
	const idem_store_limits *lim = idem_store_get_limits(mw->store);
	uint64_t total = (uint64_t)headers_len + body_len;

	if (total > mw->cfg->max_response)
		return "it is over max-response";
	if (lim->headers > 0 && headers_len > lim->headers)
		return "its headers are over what the store can hold";
	if (lim->body > 0 && body_len > lim->body)
		return "its body is over what the store can hold";
	if (lim->total > 0 && total > lim->total)
		return "it is over what the store can take in one statement";
	return NULL;
}

/* Appends the "Name: value\r\n" line of name in headers (len bytes) to
 * out (size bytes, NUL-terminated) when it is there and fits. */
static void
keep_line(const char *headers, size_t len, const char *name, char *out,
    size_t size)
{
	size_t nlen = strlen(name), used = strlen(out);
	const char *p = headers, *end = headers + len;

	while (p != NULL && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t n = eol != NULL ? (size_t)(eol + 1 - p) : (size_t)(end - p);
		if (n > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0) {
			if (used + n < size) {
				memcpy(out + used, p, n);
				out[used + n] = '\0';
			}
			return;
		}
		p = eol != NULL ? eol + 1 : NULL;
	}
}

/* Times a transactional request whose transaction lost a race for its key
 * (a deadlock, a certification failure; at COMMIT or under the handler)
 * reserves again before answering 503 TRANSACTION_ROLLED_BACK. */
#define TX_RACES 3

/* Room for a stand-in answer (see stand_in). */
typedef struct stand_in_buf {
	char headers[IDEM_STAND_IN_HEADERS];
	char body[IDEM_STAND_IN_BODY];
} stand_in_buf;
_Static_assert(IDEM_STAND_IN_HEADERS >= 2 * IDEM_MAX_HEADER_VALUE + 100,
    "a stand-in holds Location and Content-Location of any length");

/*
 * Fills *sub, in buf, with the stand-in for sr (a committable answer the
 * store cannot hold) that tells a retry the truth: sr's status, its
 * Location and Content-Location, and a problem+json body with the code
 * IDEMPOTENCY_ANSWER_NOT_STORED saying the request was executed.  Needs
 * no allocation, and is always small enough to store.
 */
static void
stand_in(const idem_stored_response *sr, stand_in_buf *buf,
    idem_stored_response *sub)
{
	static const char type[] = "Content-Type: application/problem+json\r\n";
	/* statuses that carry no body keep none */
	int n, nobody = sr->status < 200 || sr->status == 204 ||
	    sr->status == 304;

	snprintf(buf->headers, sizeof(buf->headers), "%s", nobody ? "" : type);
	keep_line(sr->headers, sr->headers_len, "Location", buf->headers,
	    sizeof(buf->headers));
	keep_line(sr->headers, sr->headers_len, "Content-Location",
	    buf->headers, sizeof(buf->headers));
	n = snprintf(buf->body, sizeof(buf->body), "{\"status\":%d,\"title\":"
	    "\"%s\",\"code\":\"IDEMPOTENCY_ANSWER_NOT_STORED\",\"detail\":"
	    "\"this request was executed and answered %d; its answer (%zu "
	    "bytes) was too large to store, so this notice is replayed in its "
	    "place\"}", sr->status, idem_status_reason(sr->status), sr->status,
	    sr->headers_len + sr->body_len);
	memset(sub, 0, sizeof(*sub));
	sub->status = sr->status;
	sub->headers = buf->headers;
	sub->headers_len = strlen(buf->headers);
	if (!nobody) {
		sub->body = buf->body;
		sub->body_len = n > 0 && (size_t)n < sizeof(buf->body) ?
		    (size_t)n : 0;
	}
}

/* Commits the stand-in for sr.  Returns what the commit returned. */
static idem_err
commit_stand_in(idem_middleware *mw, const idem_store_key *sk,
    const char *owner, const idem_stored_response *sr)
{
	stand_in_buf *buf = malloc(sizeof(*buf));
	idem_stored_response sub;
	idem_err err;

	if (buf == NULL)
		return IDEM_ERR_NOMEM;
	stand_in(sr, buf, &sub);
	err = idem_store_commit(mw->store, sk, owner, &sub, mw->cfg->lifetime);
	free(buf);
	return err;
}

/*
 * The lease thread's writer of a deferred commit (idem_lease_commit_fn):
 * commits sr, or its stand-in when the store cannot hold it.  An answer
 * that was already too large waits as it is, and only its stand-in is
 * ever written.  Returns what the commit returned.
 */
static idem_err
commit_deferred(void *arg, const idem_store_key *sk, const char *owner,
    const idem_stored_response *sr, const idem_log_ctx *ctx)
{
	idem_middleware *mw = arg;
	idem_log_ctx c;
	idem_err err;

	if (too_large(mw, sr->headers_len, sr->body_len) != NULL)
		err = commit_stand_in(mw, sk, owner, sr);
	else
		err = idem_store_commit(mw->store, sk, owner, sr,
		    mw->cfg->lifetime);
	if (err == IDEM_ERR_TOO_LARGE) {
		c = *ctx;
		c.event = "answer_not_stored";
		idem_log_at(&c, IDEM_LOG_WARN, "the store refused the answer as "
		    "too large; storing a stand-in saying it was executed");
		count_row(mw, sk->metrics_row, IDEM_OUTCOME_ANSWER_NOT_STORED);
		err = commit_stand_in(mw, sk, owner, sr);
	}
	return err;
}

/*
 * Stores res as the answer of the key: a committable answer is never
 * released.  When the store cannot hold it (over max-response or the
 * store's limits, or refused as too large), a stand-in saying the request
 * was executed is stored instead; when the store is away or contended,
 * the commit is retried by the lease thread while the key stays reserved.
 */
static void
commit_answer(idem_middleware *mw, const idem_request *req,
    const idem_store_key *sk, const char *owner, const idem_response *res)
{
	const char *why;
	idem_stored_response sr, sub, *tried = &sr;
	stand_in_buf *buf = NULL;
	/* the usual few headers are written here, not allocated */
	char small[1024], *heap = NULL;
	size_t size = headers_size(res);
	idem_err err;

	memset(&sr, 0, sizeof(sr));
	sr.status = res->status;
	sr.body = res->body;
	sr.body_len = res->len;
	sr.headers = size <= sizeof(small) ? small : (heap = malloc(size));
	if (sr.headers != NULL)
		sr.headers_len = headers_write(mw->cfg, res, sr.headers);
	if (sr.headers == NULL)
		why = "out of memory";
	else
		why = too_large(mw, sr.headers_len, sr.body_len);
	err = why != NULL ? IDEM_ERR_TOO_LARGE : idem_store_commit(mw->store,
	    sk, owner, &sr, mw->cfg->lifetime);
	if (err == IDEM_ERR_TOO_LARGE) {
		count(mw, req, IDEM_OUTCOME_ANSWER_NOT_STORED);
		idem_log_event(req, IDEM_LOG_WARN, "answer_not_stored", owner,
		    "answer of %zu bytes (status %d) not stored: %s; retries "
		    "get a notice that the request was executed",
		    sr.headers_len + sr.body_len, sr.status, why != NULL ? why :
		    "the store refused it as too large");
		if ((buf = malloc(sizeof(*buf))) == NULL) {
			err = IDEM_ERR_NOMEM;
		} else {
			stand_in(&sr, buf, &sub);
			tried = &sub;
			err = idem_store_commit(mw->store, sk, owner, &sub,
			    mw->cfg->lifetime);
		}
	}
	if (err == IDEM_OK) {
		count(mw, req, IDEM_OUTCOME_COMMITTED);
	} else if (err == IDEM_ERR_NOT_FOUND) {
		count(mw, req, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_WARN, "fenced", owner, "commit "
		    "refused: this request no longer holds its reservation (taken "
		    "over or released); its answer was not stored");
	} else if (idem_store_err_transient(err) && tried->headers != NULL &&
	    idem_leases_add(mw->leases, IDEM_LEASE_COMMIT, req, sk, owner,
	    tried) != NULL) {
		idem_log_event(req, err == IDEM_ERR_BUSY ? IDEM_LOG_WARN :
		    IDEM_LOG_ERROR, "commit_deferred", owner, "commit failed: "
		    "%s; it is retried in the background while the reservation "
		    "is held", idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_ERROR, "commit_failed", owner,
		    "commit failed: %s; a retry after inflight-ttl runs again",
		    idem_strerror(err));
	}
	free(heap);
	free(buf);
}

/* Whether an answer is stored (and a transaction committed): the handler
 * succeeded with a status in commit-statuses. */
static int
committable(const idem_config *cfg, const idem_response *res, idem_err herr)
{
	return herr == IDEM_OK && res->status >= 100 && res->status <= 599 &&
	    cfg->commit_status[res->status];
}

/*
 * Deletes the reservation of an answer that is not stored (status status,
 * the handler's result herr), so a retry runs again; when the store is
 * away or contended, the release is retried by the lease thread.
 */
static void
release_reservation(idem_middleware *mw, const idem_request *req,
    const idem_store_key *sk, const char *owner, int status, idem_err herr)
{
	const char *why = herr != IDEM_OK ? "the handler failed" :
	    "its status is not in commit-statuses";
	idem_err err = idem_store_release(mw->store, sk, owner);

	if (err == IDEM_OK) {
		count(mw, req, IDEM_OUTCOME_RELEASED);
		idem_log_event(req, IDEM_LOG_INFO, "released", owner, "released "
		    "(status %d: %s); a retry runs again", status, why);
	} else if (err == IDEM_ERR_NOT_FOUND) {
		count(mw, req, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_WARN, "fenced", owner, "release "
		    "refused: this request no longer holds its reservation");
	} else if (idem_leases_add(mw->leases, IDEM_LEASE_RELEASE, req, sk,
	    owner, NULL) != NULL) {
		idem_log_event(req, err == IDEM_ERR_BUSY ? IDEM_LOG_WARN :
		    IDEM_LOG_ERROR, "release_deferred", owner, "release failed: "
		    "%s; it is retried in the background", idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_ERROR, "release_failed", owner,
		    "release failed: %s; retries get 409 until inflight-ttl "
		    "passes", idem_strerror(err));
	}
}

/* The IDEM_TX_FAULT_* bits req asks for. */
static unsigned
tx_faults(const idem_middleware *mw, const idem_request *req)
{
	return (fault(mw, req, "in-commit") ? IDEM_TX_FAULT_DIE_IN_COMMIT : 0) |
	    (fault(mw, req, "lose-before-commit") ?
	    IDEM_TX_FAULT_LOSE_BEFORE_COMMIT : 0) |
	    (fault(mw, req, "lose-in-commit") ? IDEM_TX_FAULT_LOSE_IN_COMMIT : 0);
}

/*
 * After a transactional route's handler ran in c's transaction: writes the
 * answer into sk's record (sk NULL: no record) and commits, or rolls back
 * when the answer is not stored.  A committable answer the store cannot
 * hold is written as its stand-in.  When the transaction does not commit,
 * res becomes a 503 saying so (or that the outcome is unknown), except
 * when may_retry and the transaction lost a race for sk, at COMMIT or
 * under the handler (lost: idem_mysql_tx_lost) (a deadlock; on Galera, a
 * certification failure against another node's transaction): then
 * nothing of it was done, res is left to the caller, and 1 is returned:
 * the caller reserves again, which replays the winner's answer, waits for
 * it, or runs once more.  Returns 0 otherwise.
 */
static int
tx_finish(idem_middleware *mw, idem_request *req, idem_mysql_conn *c,
    const idem_store_key *sk, const char *owner, idem_response *res,
    idem_err herr, int lost, int may_retry)
{
	idem_stored_response sr, sub;
	stand_in_buf *buf = NULL;
	const char *why = NULL;
	int unknown = 0;
	idem_err err = IDEM_OK;

	/* the server rolled the transaction back under the handler (a
	 * deadlock; on Galera, another node's commit of this key won):
	 * whatever the handler answered, nothing of it was done */
	if (sk != NULL && lost) {
		idem_store_tx_end(mw->store, c, sk, owner, 0, 0, &unknown);
		err = IDEM_ERR_BUSY;
		goto not_committed;
	}
	if (!committable(mw->cfg, res, herr)) {
		idem_store_tx_end(mw->store, c, sk, owner, 0, 0, &unknown);
		if (sk != NULL) {
			count(mw, req, IDEM_OUTCOME_RELEASED);
			idem_log_event(req, IDEM_LOG_INFO, "released", owner,
			    "rolled back (status %d%s); a retry runs again",
			    res->status, herr != IDEM_OK ? ", the handler failed" :
			    "");
		}
		return 0;
	}
	memset(&sr, 0, sizeof(sr));
	if (sk != NULL) {
		sr.status = res->status;
		sr.body = res->body;
		sr.body_len = res->len;
		sr.headers = idem_headers_serialize(mw->cfg, res, &sr.headers_len);
		why = sr.headers == NULL ? "out of memory" :
		    too_large(mw, sr.headers_len, sr.body_len);
		err = why != NULL ? IDEM_ERR_TOO_LARGE : idem_store_tx_record(
		    mw->store, c, sk, owner, &sr, mw->cfg->lifetime);
		if (err == IDEM_ERR_TOO_LARGE) {
			count(mw, req, IDEM_OUTCOME_ANSWER_NOT_STORED);
			idem_log_event(req, IDEM_LOG_WARN, "answer_not_stored", owner,
			    "answer of %zu bytes (status %d) not stored: %s; retries "
			    "get a notice that the request was executed",
			    sr.headers_len + sr.body_len, sr.status, why != NULL ?
			    why : "the store refused it as too large");
			if ((buf = malloc(sizeof(*buf))) == NULL) {
				err = IDEM_ERR_NOMEM;
			} else {
				stand_in(&sr, buf, &sub);
				err = idem_store_tx_record(mw->store, c, sk, owner, &sub,
				    mw->cfg->lifetime);
			}
			if (err == IDEM_ERR_TOO_LARGE || err == IDEM_ERR_NOMEM)
				idem_store_tx_end(mw->store, c, sk, owner, 0, 0,
				    &unknown);
		}
		free(sr.headers);
		free(buf);
	}
	if (err == IDEM_OK) {
		fault_die(mw, req, "after-record");
		err = idem_store_tx_end(mw->store, c, sk, owner, 1,
		    tx_faults(mw, req), &unknown);
	}
	if (err == IDEM_OK) {
		if (sk != NULL)
			count(mw, req, IDEM_OUTCOME_COMMITTED);
		return 0;
	}
not_committed:
	if (err == IDEM_ERR_BUSY && sk != NULL && may_retry) {
		idem_log_event(req, IDEM_LOG_INFO, "tx_lost_race", owner,
		    "the transaction lost a race for the key, at COMMIT or under "
		    "the handler (a deadlock, or a certification failure): "
		    "nothing was done; reserving again");
		return 1;
	}
	/* not committed (or not known to be): the handler's answer is void */
	if (err == IDEM_ERR_NOT_FOUND)
		count(mw, req, IDEM_OUTCOME_FENCED);
	else if (sk != NULL)
		count(mw, req, unknown ? IDEM_OUTCOME_TX_UNKNOWN :
		    IDEM_OUTCOME_TX_ROLLED_BACK);
	idem_log_event(req, unknown ? IDEM_LOG_ERROR : IDEM_LOG_WARN, unknown ?
	    "tx_outcome_unknown" : "tx_rolled_back", owner, "%s (status %d "
	    "not sent): %s", unknown ? "the connection was lost during COMMIT "
	    "and its outcome could not be read" : "the transaction did not "
	    "commit", res->status, err == IDEM_ERR_NOT_FOUND ? "this request "
	    "no longer held its key" : idem_strerror(err));
	if (unknown)
		idem_answer_problem(res, 503, "TRANSACTION_OUTCOME_UNKNOWN", "the "
		    "connection to the database was lost while committing, and "
		    "whether the request took effect could not be learned; retry "
		    "with the same Idempotency-Key to get its answer", 1);
	else
		idem_answer_problem(res, 503, "TRANSACTION_ROLLED_BACK", "the "
		    "request's transaction could not be committed and was rolled "
		    "back: nothing was done; retry", 1);
	return 0;
}

/* Logs a handler that ended its own transaction (COMMIT, ROLLBACK, DDL):
 * its writes no longer commit with the answer.  What follows then runs as
 * the two-phase path would: the answer's UPDATE commits when the
 * reservation was committed with the handler's writes, and finds no row
 * (503, not done) when it was rolled back.  A handler that commits and
 * then writes again is in a new transaction and goes unnoticed. */
static void
tx_check_open(const idem_request *req, idem_mysql_conn *c, const char *owner)
{
	/* the reservation opened it: open it must still be, autocommit off */
	if (!c->broken && !idem_mysql_tx_intact(c))
		idem_log_event(req, IDEM_LOG_ERROR, "tx_ended_by_handler", owner,
		    "the handler of %s %s ended its transaction itself (COMMIT, "
		    "ROLLBACK, DDL or LOCK TABLES): its writes are no longer "
		    "committed with its answer; fix the plugin", req->route->method,
		    req->route->tmpl);
}

/* Runs a transactional route's handler with no key to record, in a
 * transaction of its own. */
static void
tx_plain(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next)
{
	idem_mysql_pool *pool = req->route->tx_pool;
	idem_mysql_conn *c = idem_mysql_take(pool);
	idem_reserve_result rr;
	idem_err err;

	if (c != NULL)
		c->metrics_row = req->route->metrics_row;
	if (c == NULL || idem_store_tx_begin(mw->store, c, NULL, NULL, NULL,
	    NULL, 0, 0, &rr) != IDEM_OK) {
		if (c != NULL)
			idem_mysql_put(pool, c);
		idem_answer_problem(res, 503, "DATABASE_UNAVAILABLE", "the "
		    "database is unavailable; retry later", 1);
		return;
	}
	req->tx = c;
	err = next(req, res);
	req->tx = NULL;
	fault_die(mw, req, "after-handler");
	/* without a reservation the transaction opens with the handler's
	 * first statement, if any: nothing to check */
	tx_finish(mw, req, c, NULL, NULL, res, err, 0, 0);
	idem_mysql_put(pool, c);
}

void
idem_middleware_plain(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next)
{
	if (req->route->tx_pool != NULL)
		tx_plain(mw, req, res, next);
	else
		next(req, res);
}

/* Writes a fresh owner token into owner (IDEM_OWNER_MAX + 1 bytes):
 * "<instance>.<random>", so the master can release a dead worker's
 * reservations by the prefix. */
static void
new_owner(const idem_middleware *mw, char *owner)
{
	/* the instance id is at most 16 bytes: 16 + 1 + 32 fit */
	size_t n = strlen(mw->instance);

	_Static_assert(sizeof(mw->instance) + 33 <= IDEM_OWNER_MAX + 1,
	    "an owner token holds the instance id and 32 hex digits");
	memcpy(owner, mw->instance, n);
	owner[n] = '.';
	idem_random_hex(owner + n + 1, 16);
}

void
idem_middleware_handle(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next)
{
	const idem_config *cfg = mw->cfg;
	/* idem_request_header(req, "Idempotency-Key"), its CGI name known */
	const char *key = idem_request_env(req, "HTTP_IDEMPOTENCY_KEY");
	static const char *const formats[] = { "1 to 255 visible ASCII "
	    "characters", "a UUID in its 36-character form", "a UUIDv7 "
	    "(RFC 9562) in its 36-character form" };
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1], detail[200];
	idem_lease *lease;
	idem_store_key sk;
	idem_reserve_result rr;
	idem_mysql_pool *txpool = req->route->tx_pool;
	idem_mysql_conn *txc = NULL;
	uint64_t deadline;
	long pause = 5;
	int races = 0, lost;
	size_t klen;
	idem_err err;

	if (key == NULL) {
		if (idem_middleware_policy(mw, req) == IDEM_POLICY_REQUIRED) {
			count(mw, req, IDEM_OUTCOME_KEY_MISSING);
			idem_answer_problem(res, 400, "IDEMPOTENCY_KEY_MISSING",
			    "this route needs an Idempotency-Key header", 0);
		} else {
			idem_middleware_plain(mw, req, res, next);
		}
		return;
	}
	if (idem_key_parse(cfg->key_format, key, req->idem_keybuf, &klen) !=
	    IDEM_OK) {
		count(mw, req, IDEM_OUTCOME_KEY_INVALID);
		snprintf(detail, sizeof(detail), "an Idempotency-Key here is %s",
		    formats[cfg->key_format]);
		idem_answer_problem(res, 400, "IDEMPOTENCY_KEY_INVALID", detail,
		    0);
		return;
	}
	if (store_key(mw, req, req->idem_keybuf, &sk, res) < 0) {
		count(mw, req, IDEM_OUTCOME_SCOPE_MISSING);
		return;
	}
	/* from here on, log lines about req carry the key's hash */
	req->idem_key = req->idem_keybuf;
	req->idem_key_len = sk.key_len;
	memcpy(req->idem_scope, sk.scope, sizeof(sk.scope));
	if (idem_fingerprint(req, fp) != IDEM_OK) {
		idem_answer_problem(res, 500, "OUT_OF_MEMORY", "out of memory",
		    0);
		return;
	}
	new_owner(mw, owner);
	/* a transactional route reserves inside its handler's transaction */
	if (txpool != NULL && (txc = idem_mysql_take(txpool)) == NULL) {
		store_failed(mw, req, IDEM_ERR_STORE);
		refuse_store_unavailable(res);
		return;
	}
	if (txc != NULL)
		txc->metrics_row = sk.metrics_row;

	deadline = idem_now_ms() + cfg->inflight_wait;
again:
	for (;;) {
		err = txc != NULL ? idem_store_tx_begin(mw->store, txc, &sk, fp,
		    owner, req->request_id, cfg->inflight_ttl, cfg->lifetime, &rr) :
		    idem_store_reserve(mw->store, &sk, fp, owner,
		    req->request_id, cfg->inflight_ttl, cfg->lifetime, &rr);
		if (err == IDEM_ERR_BUSY) {
			/* contention on this key: others are working on it */
			store_answered(mw, req);
			goto wait;
		}
		if (err != IDEM_OK) {
			store_failed(mw, req, err);
			idem_reserve_result_clear(&rr);
			/* a reservation that reached the store unanswered must
			 * not hold the key until inflight-ttl (a transaction's
			 * dies with it) */
			if (txc == NULL)
				idem_leases_add(mw->leases, IDEM_LEASE_FORGET, req,
				    &sk, owner, NULL);
			refuse_store_unavailable(res);
			goto out;
		}
		store_answered(mw, req);
		if (rr.outcome == IDEM_RESERVE_ACQUIRED ||
		    rr.outcome == IDEM_RESERVE_TAKEN_OVER)
			break;
		if (memcmp(rr.fingerprint, fp, 32) != 0) {
			idem_reserve_result_clear(&rr);
			count(mw, req, IDEM_OUTCOME_CONFLICT);
			idem_answer_problem(res, (int)cfg->conflict_status,
			    "IDEMPOTENCY_CONFLICT", "this Idempotency-Key was used "
			    "for a different request", 0);
			goto out;
		}
		if (rr.outcome == IDEM_RESERVE_COMMITTED) {
			int cached = rr.cached;
			err = replay(cfg, &rr.response, res);
			idem_reserve_result_clear(&rr);
			if (err != IDEM_OK) {
				idem_answer_problem(res, 500, "REPLAY_FAILED",
				    "the stored answer could not be replayed", 0);
				goto out;
			}
			count(mw, req, IDEM_OUTCOME_REPLAYED);
			if (cached)
				count(mw, req, IDEM_OUTCOME_REPLAY_CACHED);
			goto out;
		}
		idem_reserve_result_clear(&rr);
wait:
		/* in flight, same request: wait for it (from the first
		 * attempt on: a transactional duplicate's attempt may itself
		 * have waited), or say so */
		if (idem_now_ms() >= deadline) {
			count(mw, req, IDEM_OUTCOME_IN_FLIGHT);
			idem_answer_problem(res, 409, "IDEMPOTENCY_IN_FLIGHT",
			    "a request with this Idempotency-Key is being "
			    "processed; retry later", 1);
			goto out;
		}
		idem_sleep_ms(pause);
		if (pause < 100)
			pause *= 2;
	}
	if (rr.outcome == IDEM_RESERVE_TAKEN_OVER) {
		count(mw, req, IDEM_OUTCOME_TAKEN_OVER);
		idem_log_event(req, IDEM_LOG_WARN, "takeover", owner, "took over "
		    "the reservation of request %s (owner %s), idle for %llu ms "
		    "(inflight-ttl %llu ms); running the handler", rr.request_id,
		    rr.owner, (unsigned long long)rr.lease_age_ms,
		    (unsigned long long)cfg->inflight_ttl);
	} else {
		count(mw, req, IDEM_OUTCOME_ACQUIRED);
	}
	idem_reserve_result_clear(&rr);
	if (txc != NULL) {
		/* the open transaction holds the key: no lease to renew */
		/* what the reservation's own retries met is not the
		 * handler's: only a 1213 under the handler is a lost race */
		(void)idem_mysql_tx_lost(txc);
		req->tx = txc;
		err = next(req, res);
		req->tx = NULL;
		fault_die(mw, req, "after-handler");
		lost = idem_mysql_tx_lost(txc);
		if (!lost)
			tx_check_open(req, txc, owner);
		else
			/* for its side effect: a handler that turned autocommit
			 * back on leaves tx mode, so the next reservation turns
			 * it off again */
			(void)idem_mysql_tx_intact(txc);
		if (tx_finish(mw, req, txc, &sk, owner, res, err, lost,
		    races < TX_RACES)) {
			/* lost a race: as a retry of the client would */
			races++;
			idem_response_clear(res);
			new_owner(mw, owner);
			goto again;
		}
		goto out;
	}
	lease = idem_leases_add(mw->leases, IDEM_LEASE_RENEW, req, &sk, owner,
	    NULL);
	err = next(req, res);
	fault_die(mw, req, "after-handler");
	/* renewed until the commit's or release's outcome is known, so a
	 * slow commit is never taken over */
	idem_leases_finishing(mw->leases, lease);
	if (committable(cfg, res, err))
		commit_answer(mw, req, &sk, owner, res);
	else
		release_reservation(mw, req, &sk, owner, res->status, err);
	idem_leases_remove(mw->leases, lease);
out:
	if (txc != NULL)
		idem_mysql_put(txpool, txc);
}
