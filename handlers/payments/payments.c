/*
 * payments.c - the example plugin for side effects outside the database:
 * payments charged at a provider that honours Idempotency-Key (like
 * Stripe), exactly once per client key even when the provider times out
 * after charging, answers 500 after charging, or a worker dies anywhere.
 *
 *   POST /payments       {"account": "a", "amount": 500}
 *                        -> 201 {"payment", "account", "amount", "charge"}
 *                           with Location <mount>/payments/ID; a
 *                           provider 400, 402 or 422 is 422
 *                           PAYMENT_DECLINED; any other
 *                           answer (another 4xx, a 5xx, a timeout, a
 *                           refused connection) is an unknown outcome:
 *                           503 IDEMPOTENCY_OUTCOME_UNKNOWN, and a retry
 *                           reconciles it
 *   GET  /payments/{id}  -> 200, or 404
 *
 * How (docs/plugins.md, "Side effects outside the database"):
 *   - the charge is sent with the record's downstream key "charge", the
 *     same on every execution of one client key, so the provider
 *     deduplicates our retries, takeovers and reconciles;
 *   - once the provider names the charge, the phase "charged" is recorded
 *     with it (a later execution never asks again);
 *   - a provider answer that does not say whether it charged is
 *     IDEM_ERR_OUTCOME_UNKNOWN; the route's reconcile hook is the handler
 *     itself, which asks the provider again with the same key;
 *   - the payment is stored under the downstream key "payment": in memory,
 *     or in the store's database (MySQL, PostgreSQL) in the request's
 *     transaction (a transactional route), which calls outside
 *     (calls-outside: on MySQL its key is reserved in a commit of its own
 *     before the charge, so that on Galera another body under the same
 *     key through another node never charges).
 * [payments] recovery = false sends a fresh key on every execution and
 * records no progress, as a handler written without this framework's help
 * would: a timeout after charging then charges again on the retry (the
 * tests show it).
 */
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <uthash.h>
#include <uuid.h>

#include "idemfcgi_db.h"

#define ACCOUNT_MAX 64
#define CHARGE_MAX 255           /* bytes of a provider's charge id */
#define ANSWER_MAX (64 * 1024)   /* bytes of a provider's answer kept */

typedef struct payment {
	char id[IDEM_DOWNSTREAM_KEY_SIZE];
	char account[ACCOUNT_MAX + 1];
	long long amount;
	char charge[CHARGE_MAX + 1];
	UT_hash_handle hh;
} payment;

typedef struct payments {
	const char *url;            /* provider-url (the config's) */
	long timeout_ms;            /* provider-timeout */
	long long max_amount;
	long long max_payments;
	int recovery;               /* downstream keys and checkpoints */
	/* in memory */
	pthread_mutex_t lock;
	payment *table;             /* uthash head */
	unsigned long long count;
	/* in the store's database */
	idem_db *db;                /* owned by the server */
} payments;

/* What a call to the provider says of the charge. */
typedef enum charge_result {
	CHARGED,                    /* charge is its id */
	DECLINED,                   /* a 4xx: not charged, never will be */
	AMBIGUOUS                   /* no answer that says: maybe charged */
} charge_result;

/* ---------------------------------------------------------- the provider */

/* A provider's answer, bounded. */
typedef struct answer {
	char buf[ANSWER_MAX + 1];
	size_t len;
} answer;

/* libcurl's write callback: keeps up to ANSWER_MAX bytes. */
static size_t
keep(char *data, size_t size, size_t n, void *arg)
{
	answer *a = arg;
	size_t len = size * n, room = ANSWER_MAX - a->len;

	memcpy(a->buf + a->len, data, len < room ? len : room);
	a->len += len < room ? len : room;
	return len;
}

/*
 * Charges amount to account at the provider, with key as its
 * Idempotency-Key.  Returns CHARGED with the charge's id in charge
 * (CHARGE_MAX + 1 bytes), DECLINED with the provider's reason in why, or
 * AMBIGUOUS with why (whysize bytes each).
 */
static charge_result
charge(const payments *pm, const idem_request *req, const char *key,
    const char *account, long long amount, char *charge_id, char *why,
    size_t whysize)
{
	char keyhdr[64 + IDEM_DOWNSTREAM_KEY_SIZE];
	struct curl_slist *hdrs = NULL, *more = NULL;
	json_t *body = json_pack("{s:s, s:I}", "account", account, "amount",
	    (json_int_t)amount), *j;
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	answer *a = calloc(1, sizeof(*a));
	CURL *curl = curl_easy_init();
	charge_result r = AMBIGUOUS;
	long status = 0;
	CURLcode rc;

	json_decref(body);
	snprintf(why, whysize, "out of memory");
	snprintf(keyhdr, sizeof(keyhdr), "Idempotency-Key: %s", key);
	if (text == NULL || a == NULL || curl == NULL ||
	    (hdrs = curl_slist_append(NULL, "Content-Type: application/json")) ==
	    NULL || (more = curl_slist_append(hdrs, keyhdr)) == NULL)
		goto out;
	hdrs = more;
	curl_easy_setopt(curl, CURLOPT_URL, pm->url);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, pm->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
	rc = curl_easy_perform(curl);
	if (rc != CURLE_OK) {
		/* refused, timed out, cut: it may have charged (or not) */
		snprintf(why, whysize, "the provider did not answer: %s",
		    curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	a->buf[a->len] = '\0';
	/* a decline (402) or a charge the provider will never accept (400,
	 * 422) is final; any other 4xx says nothing of a charge under way
	 * (409: another request with this key is in progress; 408, 429:
	 * try later; 401, 403, 404: our configuration), so it is not */
	if (status == 400 || status == 402 || status == 422) {
		snprintf(why, whysize, "the provider declined the charge "
		    "(status %ld)", status);
		r = DECLINED;
		goto out;
	}
	j = status >= 200 && status < 300 ? json_loadb(a->buf, a->len, 0,
	    NULL) : NULL;
	if (j != NULL && json_is_string(json_object_get(j, "id")) &&
	    strlen(json_string_value(json_object_get(j, "id"))) > 0 &&
	    strlen(json_string_value(json_object_get(j, "id"))) <= CHARGE_MAX) {
		snprintf(charge_id, CHARGE_MAX + 1, "%s",
		    json_string_value(json_object_get(j, "id")));
		r = CHARGED;
	} else {
		snprintf(why, whysize, "the provider answered status %ld without "
		    "a charge", status);
	}
	json_decref(j);
out:
	if (r != CHARGED)
		idem_log(req, IDEM_LOG_WARN, "payments: %s", why);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(curl);
	free(a);
	free(text);
	return r;
}

/* ------------------------------------------------------------- storage */

enum { Q_INSERT, Q_SELECT, NQ };

/* By dialect (idem_app_db_dialect); the same payment id on every
 * execution is stored once. */
static const char *const queries[][NQ] = {
	[IDEM_DB_MYSQL] = {
		[Q_INSERT] = "INSERT INTO payments (id, account, amount, "
		    "charge, created_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6)) "
		    "ON DUPLICATE KEY UPDATE id = id",
		[Q_SELECT] = "SELECT account, amount, charge FROM payments "
		    "WHERE id = ?",
	},
	[IDEM_DB_POSTGRES] = {
		[Q_INSERT] = "INSERT INTO payments (id, account, amount, "
		    "charge, created_at) VALUES (?, ?, ?, ?, now()) ON CONFLICT "
		    "(id) DO NOTHING",
		[Q_SELECT] = "SELECT account, amount, charge FROM payments "
		    "WHERE id = ?",
	},
};

static const char *const create_table[] = {
	[IDEM_DB_MYSQL] = "CREATE TABLE IF NOT EXISTS payments (id CHAR(36) "
	    "CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY, "
	    "account VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT "
	    "NULL, amount BIGINT NOT NULL, charge VARCHAR(255) CHARACTER SET "
	    "ascii COLLATE ascii_bin NOT NULL, created_at DATETIME(6) NOT "
	    "NULL) ENGINE = InnoDB",
	[IDEM_DB_POSTGRES] = "CREATE TABLE IF NOT EXISTS payments (id "
	    "CHAR(36) NOT NULL PRIMARY KEY, account VARCHAR(64) NOT NULL, "
	    "amount BIGINT NOT NULL, charge VARCHAR(255) NOT NULL, created_at "
	    "TIMESTAMPTZ NOT NULL)",
};

/* Stores p, once: in the request's transaction (tx) or autocommit in the
 * store's database, else in memory.  Returns IDEM_OK, IDEM_ERR_TOO_LARGE (the memory
 * table is full) or IDEM_ERR_STORE. */
static idem_err
store(payments *pm, idem_db_conn *tx, const payment *p)
{
	idem_db_conn *c;
	payment *old;
	idem_err err = IDEM_OK;

	if (pm->db == NULL) {
		pthread_mutex_lock(&pm->lock);
		HASH_FIND_STR(pm->table, p->id, old);
		if (old != NULL)
			;       /* stored by an earlier execution */
		else if (pm->count >= (unsigned long long)pm->max_payments)
			err = IDEM_ERR_TOO_LARGE;
		else if ((old = malloc(sizeof(*old))) == NULL)
			err = IDEM_ERR_STORE;
		else {
			*old = *p;
			HASH_ADD_STR(pm->table, id, old);
			pm->count++;
		}
		pthread_mutex_unlock(&pm->lock);
		return err;
	}
	if ((c = tx != NULL ? tx : idem_db_get(pm->db)) == NULL)
		return IDEM_ERR_STORE;
	/* any failure (logged by the helper) is the store's: a retry */
	if (idem_db_run(c, Q_INSERT, "ssis", p->id, p->account, p->amount,
	    p->charge) != IDEM_OK)
		err = IDEM_ERR_STORE;
	if (tx == NULL)
		idem_db_put(pm->db, c);
	return err;
}

/* Reads payment id into *p.  Returns IDEM_OK, IDEM_ERR_NOT_FOUND or
 * IDEM_ERR_STORE. */
static idem_err
load(payments *pm, const char *id, payment *p)
{
	idem_db_conn *c;
	payment *found;
	idem_err err;

	memset(p, 0, sizeof(*p));
	snprintf(p->id, sizeof(p->id), "%s", id);
	if (pm->db == NULL) {
		pthread_mutex_lock(&pm->lock);
		HASH_FIND_STR(pm->table, id, found);
		if (found != NULL)
			*p = *found;
		pthread_mutex_unlock(&pm->lock);
		return found != NULL ? IDEM_OK : IDEM_ERR_NOT_FOUND;
	}
	if ((c = idem_db_get(pm->db)) == NULL)
		return IDEM_ERR_STORE;
	err = idem_db_one(c, Q_SELECT, "s", "sis", id, p->account,
	    sizeof(p->account), &p->amount, p->charge, sizeof(p->charge));
	idem_db_put(pm->db, c);
	return err == IDEM_OK || err == IDEM_ERR_NOT_FOUND ? err :
	    IDEM_ERR_STORE;
}

/* ------------------------------------------------------------ handlers */

/* Account ids and payment ids: 1..max of [A-Za-z0-9_.-]. */
static int
id_ok(const char *id, size_t max)
{
	size_t n;

	for (n = 0; id[n] != '\0'; n++)
		if (n >= max || (!isalnum((unsigned char)id[n]) &&
		    strchr("_.-", id[n]) == NULL))
			return 0;
	return n > 0;
}

/*
 * Reads {"account": a, "amount": n} into p.  Returns IDEM_OK, with
 * p->amount 0 after putting the problem in res, or the error of answering.
 */
static idem_err
read_payment(const payments *pm, const idem_request *req, idem_response *res,
    payment *p)
{
	json_error_t jerr;
	json_t *body = idem_request_json(req, &jerr), *acc, *amt;
	char detail[200];

	p->amount = 0;
	if (body == NULL) {
		snprintf(detail, sizeof(detail), "malformed JSON: %s", jerr.text);
		return idem_response_problem(res, 400, "MALFORMED_JSON", detail);
	}
	acc = json_object_get(body, "account");
	amt = json_object_get(body, "amount");
	if (!json_is_string(acc) || !id_ok(json_string_value(acc),
	    ACCOUNT_MAX) || !json_is_integer(amt) || json_integer_value(amt) <=
	    0 || json_integer_value(amt) > pm->max_amount) {
		snprintf(detail, sizeof(detail), "expected {\"account\": a, "
		    "\"amount\": n}: a 1 to 64 of A-Z a-z 0-9 _ . -, n a whole "
		    "number from 1 to %lld", pm->max_amount);
		json_decref(body);
		return idem_response_problem(res, 422, "INVALID_PAYMENT",
		    detail);
	}
	snprintf(p->account, sizeof(p->account), "%s", json_string_value(acc));
	p->amount = (long long)json_integer_value(amt);
	json_decref(body);
	return IDEM_OK;
}

/* A fresh random key: what a handler without downstream keys sends. */
static void
fresh_key(char out[IDEM_DOWNSTREAM_KEY_SIZE])
{
	uuid_t u;

	uuid_generate_random(u);
	uuid_unparse_lower(u, out);
}

/* Answers 201 with p, and its URL under the mount as Location. */
static idem_err
created(const idem_request *req, idem_response *res, const payment *p)
{
	const char *mount = idem_request_script_name(req);
	char *location = malloc(strlen(mount) + sizeof("/payments/") +
	    sizeof(p->id));
	idem_err err;

	if (location == NULL)
		return IDEM_ERR_NOMEM;
	sprintf(location, "%s/payments/%s", mount, p->id);
	err = idem_response_header(res, "Location", location);
	free(location);
	if (err != IDEM_OK)
		return err;
	return idem_response_json(res, 201, json_pack("{s:s, s:s, s:I, s:s}",
	    "payment", p->id, "account", p->account, "amount",
	    (json_int_t)p->amount, "charge", p->charge));
}

/*
 * The charge of p, as an earlier execution recorded it (phase "charged"),
 * or as the provider names it now; with recovery, recorded as the phase
 * "charged".  Returns IDEM_OK with p->charge set; IDEM_OK with it empty
 * after putting the answer in res (a decline); IDEM_ERR_OUTCOME_UNKNOWN;
 * or an error.
 */
static idem_err
charged(payments *pm, const idem_request *req, idem_response *res,
    payment *p)
{
	char key[IDEM_DOWNSTREAM_KEY_SIZE], why[256];
	const char *phase = idem_request_phase(req);
	json_t *state;
	idem_err err;

	p->charge[0] = '\0';
	if (pm->recovery && phase != NULL && strcmp(phase, "charged") == 0 &&
	    (state = idem_request_progress(req)) != NULL) {
		const char *c = json_string_value(json_object_get(state,
		    "charge"));
		if (c != NULL)
			snprintf(p->charge, sizeof(p->charge), "%s", c);
		json_decref(state);
		if (p->charge[0] != '\0')
			return IDEM_OK;
	}
	if (!pm->recovery)
		fresh_key(key);
	else if ((err = idem_request_downstream_key(req, "charge", key)) !=
	    IDEM_OK)
		return err;
	switch (charge(pm, req, key, p->account, p->amount, p->charge, why,
	    sizeof(why))) {
	case CHARGED:
		break;
	case DECLINED:
		p->charge[0] = '\0';
		return idem_response_problem(res, 422, "PAYMENT_DECLINED", why);
	case AMBIGUOUS:
		p->charge[0] = '\0';
		if (pm->recovery)
			return IDEM_ERR_OUTCOME_UNKNOWN;
		/* without recovery: a timeout, released for a retry */
		err = idem_response_problem(res, 504, "PROVIDER_TIMEOUT", why);
		p->charge[0] = '\0';
		return err;
	}
	if (!pm->recovery)
		return IDEM_OK;
	/* the provider named the charge: no later execution asks again */
	state = json_pack("{s:s}", "charge", p->charge);
	err = idem_request_checkpoint(req, "charged", state);
	json_decref(state);
	return err;
}

/* POST /payments, and its reconcile hook: asks the provider (again, with
 * the same key) what became of the charge. */
static idem_err
pay(const idem_request *req, idem_response *res, void *data)
{
	payments *pm = data;
	payment p;
	idem_err err;

	memset(&p, 0, sizeof(p));
	if ((err = read_payment(pm, req, res, &p)) != IDEM_OK || p.amount == 0)
		return err;
	if ((err = charged(pm, req, res, &p)) != IDEM_OK || p.charge[0] == '\0')
		return err;
	if (!pm->recovery)
		fresh_key(p.id);
	else if ((err = idem_request_downstream_key(req, "payment", p.id)) !=
	    IDEM_OK)
		return err;
	if ((err = store(pm, idem_request_db(req), &p)) != IDEM_OK) {
		/* charged, not stored: the retry finds "charged" (two-phase,
		 * and transactional on MySQL, where the key is reserved
		 * first and the checkpoint commits on its own), or asks again
		 * with the same key (transactional on PostgreSQL: the
		 * checkpoint went back with the transaction) */
		idem_log(req, IDEM_LOG_ERROR, "payments: charge %s not stored: "
		    "%s", p.charge, idem_strerror(err));
		return err == IDEM_ERR_TOO_LARGE ? idem_response_problem(res, 507,
		    "PAYMENTS_FULL", "the payments table holds max-payments") :
		    err;
	}
	return created(req, res, &p);
}

/* GET /payments/{id} */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	const char *id = idem_request_param(req, "id");
	payment p;
	idem_err err;

	if (id == NULL || !id_ok(id, IDEM_DOWNSTREAM_KEY_SIZE - 1))
		return idem_response_problem(res, 404, "PAYMENT_NOT_FOUND",
		    "no such payment");
	if ((err = load(data, id, &p)) == IDEM_ERR_NOT_FOUND)
		return idem_response_problem(res, 404, "PAYMENT_NOT_FOUND",
		    "no such payment");
	if (err != IDEM_OK)
		return err;
	return idem_response_json(res, 200, json_pack("{s:s, s:s, s:I, s:s}",
	    "payment", p.id, "account", p.account, "amount",
	    (json_int_t)p.amount, "charge", p.charge));
}

static void
teardown(void *data)
{
	payments *pm = data;
	payment *p, *tmp;

	if (pm == NULL)
		return;
	HASH_ITER(hh, pm->table, p, tmp) {
		HASH_DEL(pm->table, p);
		free(p);
	}
	pthread_mutex_destroy(&pm->lock);
	free(pm);
	curl_global_cleanup();
}

/* Whether url is an http or https URL with a host (libcurl's parser). */
static int
url_ok(const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	int ok;

	ok = u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0);
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ok;
}

/* Reads [payments]; refuses a missing or bad provider-url and, with
 * recovery, a configuration without a key secret. */
static idem_err
configure(idem_app *app, payments *pm)
{
	uint64_t timeout;
	idem_err err;

	if ((err = idem_config_string(app, "provider-url", NULL, &pm->url)) !=
	    IDEM_OK || (err = idem_config_duration(app, "provider-timeout",
	    2000, &timeout)) != IDEM_OK || (err = idem_config_int(app,
	    "max-amount", 1000000000LL, 1, 1000000000000000LL,
	    &pm->max_amount)) != IDEM_OK || (err = idem_config_int(app,
	    "max-payments", 100000, 1, 100000000, &pm->max_payments)) !=
	    IDEM_OK || (err = idem_config_bool(app, "recovery", 1,
	    &pm->recovery)) != IDEM_OK)
		return err;
	if (pm->url == NULL || !url_ok(pm->url)) {
		idem_log(NULL, IDEM_LOG_ERROR, "payments: [payments] provider-url "
		    "= http://HOST:PORT/PATH is required (%s)", pm->url == NULL ?
		    "not set" : "not an http or https URL");
		return IDEM_ERR_CONFIG;
	}
	if (timeout == 0 || timeout > 600000) {
		idem_log(NULL, IDEM_LOG_ERROR, "payments: [payments] "
		    "provider-timeout must be from 1ms to 10m");
		return IDEM_ERR_CONFIG;
	}
	pm->timeout_ms = (long)timeout;
	if (pm->recovery && !idem_app_has_key_secret(app)) {
		idem_log(NULL, IDEM_LOG_ERROR, "payments: charges are sent with "
		    "downstream keys, which need [idempotency] key-secret-file");
		return IDEM_ERR_CONFIG;
	}
	return IDEM_OK;
}

static idem_err
setup(idem_app *app, void **data)
{
	payments *pm = calloc(1, sizeof(*pm));
	idem_err (*add)(idem_app *, const char *, const char *, idem_policy,
	    idem_handler_fn, void *);
	idem_err err;
	int tx;

	if (pm == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&pm->lock, NULL);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(pm);
		return IDEM_ERR_PLUGIN;
	}
	if ((err = configure(app, pm)) != IDEM_OK ||
	    (err = idem_config_bool(app, "transactional", 1, &tx)) != IDEM_OK)
		goto fail;
	if (idem_app_db_dialect(app) != IDEM_DB_NONE && (pm->db =
	    idem_app_db(app, queries[idem_app_db_dialect(app)], NQ)) == NULL) {
		err = IDEM_ERR_STORE;
		goto fail;
	}
	/* in the store's database the payment and its answer commit
	 * together */
	add = pm->db != NULL && tx ? idem_route_add_tx : idem_route_add;
	if ((err = add(app, "POST", "/payments", IDEM_POLICY_REQUIRED, pay,
	    pm)) != IDEM_OK || (pm->recovery && (err = idem_route_reconcile(app,
	    "POST", "/payments", pay)) != IDEM_OK) ||
	    (err = idem_route_add(app, "GET", "/payments/{id}", IDEM_POLICY_OFF,
	    show, pm)) != IDEM_OK)
		goto fail;
	/* the charge is a call to another service: on Galera with several
	 * writers the key is reserved in a commit of its own before it
	 * (DESIGN.md 2.7, reliability.md G7) */
	if ((err = idem_route_set(app, "POST", "/payments", "calls-outside",
	    "true")) != IDEM_OK)
		goto fail;
	*data = pm;
	return IDEM_OK;
fail:
	teardown(pm);
	return err;
}

/* Creates the payments table, once per start (not for --check). */
static idem_err
deploy(idem_app *app, void *data)
{
	idem_db_dialect d = idem_app_db_dialect(app);

	(void)data;
	return d != IDEM_DB_NONE ? idem_app_db_exec(app, create_table[d]) :
	    IDEM_OK;
}

IDEM_PLUGIN("payments", setup, deploy, teardown)
