/*
 * provider.c - a payment provider for the tests of handlers/payments: it
 * honours Idempotency-Key as Stripe does (a key charged once is answered
 * with the same charge ever after) and misbehaves on demand.
 *
 *   POST /charges       {"account": a, "amount": n}, Idempotency-Key: K
 *                       -> 200 {"id": "ch_N", "account", "amount"}; an
 *                          account starting with "declined" -> 402
 *   GET  /charges/{id}  -> 200, or 404
 *
 * [provider]
 *   log        = PATH   one line "charge ID KEY ACCOUNT AMOUNT" per charge
 *                       made (a replay writes none): the provider's own
 *                       records, which the tests count
 *   faults     = KIND.. what a faulty request does, in turn:
 *                timeout-after-charge (charge, then answer only after
 *                delay), 500-after-charge (charge, answer 500),
 *                refuse-before-charge (answer 503, charge nothing)
 *   fail-first = N      the first N requests for each account are faulty
 *                       (by account, so that a client sending a fresh key
 *                       each time meets the same faults)
 *   fault-rate = P      and then P percent of them, at random
 *   delay      = 3s     of timeout-after-charge
 * Its routes have the policy off: the provider keeps its own keys, as a
 * real one does, whatever idemfcgi's store.  One worker holds them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

#include "idemfcgi.h"

#define KEY_MAX 255

typedef enum fault {
	F_NONE = 0, F_TIMEOUT, F_500, F_REFUSE
} fault;

typedef struct charge {
	char key[KEY_MAX + 1];
	char id[32];
	char account[65];
	long long amount;
	UT_hash_handle hh;           /* by key */
} charge;

/* The requests for one account. */
typedef struct tally {
	char account[65];
	unsigned attempts;
	UT_hash_handle hh;
} tally;

typedef struct provider {
	int log_fd;
	fault faults[8];
	size_t nfaults;
	long long fail_first, rate;
	uint64_t delay_ms;
	pthread_mutex_t lock;
	charge *by_key;              /* uthash; also keys never charged */
	tally *by_account;           /* uthash */
	unsigned long next_id;
	unsigned seed;
} provider;

/* The fault of the attempt-th request for an account (1 first), under
 * lock. */
static fault
fault_of(provider *pv, unsigned attempt)
{
	if (pv->nfaults == 0)
		return F_NONE;
	if (attempt <= (unsigned long long)pv->fail_first)
		return pv->faults[(attempt - 1) % pv->nfaults];
	if (pv->rate > 0 && (long long)(rand_r(&pv->seed) % 100) < pv->rate)
		return pv->faults[(size_t)rand_r(&pv->seed) % pv->nfaults];
	return F_NONE;
}

/* Appends the charge c to the log, in one write. */
static void
log_charge(const provider *pv, const charge *c)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "charge %s %s %s %lld\n", c->id,
	    c->key, c->account, c->amount);

	if (n > 0 && (size_t)n < sizeof(line) &&
	    write(pv->log_fd, line, (size_t)n) != n)
		idem_log(NULL, IDEM_LOG_ERROR, "provider: short write to its log");
}

/* Answers the charge c (borrowed) with status. */
static idem_err
answer(idem_response *res, int status, const charge *c)
{
	return idem_response_json(res, status, json_pack("{s:s, s:s, s:I}",
	    "id", c->id, "account", c->account, "amount",
	    (json_int_t)c->amount));
}

/* POST /charges */
static idem_err
create(const idem_request *req, idem_response *res, void *data)
{
	provider *pv = data;
	const char *key = idem_request_header(req, "Idempotency-Key");
	json_t *body = idem_request_json(req, NULL);
	const char *account = json_string_value(json_object_get(body,
	    "account"));
	json_t *amount = json_object_get(body, "amount");
	charge *c, copy;
	tally *t;
	unsigned attempt;
	fault f;
	int made = 0;

	if (key == NULL || strlen(key) == 0 || strlen(key) > KEY_MAX ||
	    account == NULL || strlen(account) > 64 || !json_is_integer(amount)) {
		json_decref(body);
		return idem_response_problem(res, 400, "BAD_CHARGE", "a charge is "
		    "{\"account\", \"amount\"} with an Idempotency-Key");
	}
	if (strncmp(account, "declined", 8) == 0) {
		json_decref(body);
		return idem_response_problem(res, 402, "CARD_DECLINED",
		    "the card was declined");
	}
	pthread_mutex_lock(&pv->lock);
	HASH_FIND_STR(pv->by_key, key, c);
	if (c == NULL && (c = calloc(1, sizeof(*c))) != NULL) {
		snprintf(c->key, sizeof(c->key), "%s", key);
		HASH_ADD_STR(pv->by_key, key, c);
	}
	HASH_FIND_STR(pv->by_account, account, t);
	if (t == NULL && (t = calloc(1, sizeof(*t))) != NULL) {
		snprintf(t->account, sizeof(t->account), "%s", account);
		HASH_ADD_STR(pv->by_account, account, t);
	}
	if (c == NULL || t == NULL) {
		pthread_mutex_unlock(&pv->lock);
		json_decref(body);
		return IDEM_ERR_NOMEM;
	}
	attempt = ++t->attempts;
	f = fault_of(pv, attempt);
	if (f != F_REFUSE && c->id[0] == '\0') {
		snprintf(c->id, sizeof(c->id), "ch_%lu", ++pv->next_id);
		snprintf(c->account, sizeof(c->account), "%s", account);
		c->amount = (long long)json_integer_value(amount);
		log_charge(pv, c);
		made = 1;
	}
	copy = *c;
	pthread_mutex_unlock(&pv->lock);
	json_decref(body);
	idem_log(req, IDEM_LOG_INFO, "provider: key %s attempt %u: %s%s", key,
	    attempt, f == F_NONE ? "answered" : f == F_TIMEOUT ?
	    "timeout after charging" : f == F_500 ? "500 after charging" :
	    "refused before charging", made ? " (charged now)" : "");
	switch (f) {
	case F_REFUSE:
		return idem_response_problem(res, 503, "TRY_AGAIN", "the provider "
		    "is busy; nothing was charged");
	case F_500:
		return idem_response_problem(res, 500, "INTERNAL", "the provider "
		    "failed");
	case F_TIMEOUT: {
		struct timespec ts = { (time_t)(pv->delay_ms / 1000),
		    (long)(pv->delay_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		break;
	}
	case F_NONE:
		break;
	}
	return answer(res, 200, &copy);
}

/* GET /charges/{id} */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	provider *pv = data;
	const char *id = idem_request_param(req, "id");
	charge *c, *tmp, copy;
	int found = 0;

	pthread_mutex_lock(&pv->lock);
	HASH_ITER(hh, pv->by_key, c, tmp)
		if (!found && id != NULL && strcmp(c->id, id) == 0) {
			copy = *c;
			found = 1;
		}
	pthread_mutex_unlock(&pv->lock);
	if (!found)
		return idem_response_problem(res, 404, "NO_SUCH_CHARGE",
		    "no such charge");
	return answer(res, 200, &copy);
}

static void
teardown(void *data)
{
	provider *pv = data;
	charge *c, *tmp;
	tally *t, *ttmp;

	if (pv == NULL)
		return;
	HASH_ITER(hh, pv->by_key, c, tmp) {
		HASH_DEL(pv->by_key, c);
		free(c);
	}
	HASH_ITER(hh, pv->by_account, t, ttmp) {
		HASH_DEL(pv->by_account, t);
		free(t);
	}
	if (pv->log_fd >= 0)
		close(pv->log_fd);
	pthread_mutex_destroy(&pv->lock);
	free(pv);
}

/* Reads faults = KIND... into pv.  Returns IDEM_OK or IDEM_ERR_CONFIG. */
static idem_err
read_faults(provider *pv, const char *list)
{
	char buf[256], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list != NULL ? list : "");
	for (tok = strtok_r(buf, " ", &save); tok != NULL;
	    tok = strtok_r(NULL, " ", &save)) {
		fault f = strcmp(tok, "timeout-after-charge") == 0 ? F_TIMEOUT :
		    strcmp(tok, "500-after-charge") == 0 ? F_500 :
		    strcmp(tok, "refuse-before-charge") == 0 ? F_REFUSE : F_NONE;
		if (f == F_NONE || pv->nfaults >= 8) {
			idem_log(NULL, IDEM_LOG_ERROR, "provider: bad fault %s", tok);
			return IDEM_ERR_CONFIG;
		}
		pv->faults[pv->nfaults++] = f;
	}
	return IDEM_OK;
}

static idem_err
setup(idem_app *app, void **data)
{
	provider *pv = calloc(1, sizeof(*pv));
	const char *log = NULL, *faults = NULL;
	idem_err err;

	if (pv == NULL)
		return IDEM_ERR_NOMEM;
	pv->log_fd = -1;
	pthread_mutex_init(&pv->lock, NULL);
	pv->seed = (unsigned)getpid();
	if ((err = idem_config_string(app, "log", NULL, &log)) != IDEM_OK ||
	    (err = idem_config_string(app, "faults", NULL, &faults)) !=
	    IDEM_OK || (err = idem_config_int(app, "fail-first", 0, 0, 1000,
	    &pv->fail_first)) != IDEM_OK || (err = idem_config_int(app,
	    "fault-rate", 0, 0, 100, &pv->rate)) != IDEM_OK ||
	    (err = idem_config_duration(app, "delay", 3000, &pv->delay_ms)) !=
	    IDEM_OK || (err = read_faults(pv, faults)) != IDEM_OK)
		goto fail;
	if (log == NULL || (!idem_app_is_check(app) && (pv->log_fd = open(log,
	    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)) {
		idem_log(NULL, IDEM_LOG_ERROR, "provider: [provider] log: cannot "
		    "open %s", log != NULL ? log : "(not set)");
		err = IDEM_ERR_CONFIG;
		goto fail;
	}
	if ((err = idem_route_add(app, "POST", "/charges", IDEM_POLICY_OFF,
	    create, pv)) != IDEM_OK || (err = idem_route_add(app, "GET",
	    "/charges/{id}", IDEM_POLICY_OFF, show, pv)) != IDEM_OK)
		goto fail;
	*data = pv;
	return IDEM_OK;
fail:
	teardown(pv);
	return err;
}

IDEM_PLUGIN("provider", setup, NULL, teardown)
