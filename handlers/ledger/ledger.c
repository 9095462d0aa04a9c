/*
 * ledger.c - the demo plugin: accounts with deposits and withdrawals.
 *
 *   POST /accounts/{id}/deposit   {"amount": n}  -> 201 {"account","balance"}
 *   POST /accounts/{id}/withdraw  {"amount": n}  -> 201, or 409
 *                                                   INSUFFICIENT_FUNDS
 *   GET  /accounts/{id}                          -> 200, or 404
 *
 * n is a positive integer up to max-amount; malformed JSON is a 400, a bad
 * amount a 422.  Balances live in memory (one table per process, guarded by
 * a mutex); [ledger] max-accounts bounds the table.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "idemfcgi.h"

#define ID_MAX 64

typedef struct account {
	char id[ID_MAX + 1];
	long long balance;
	UT_hash_handle hh;
} account;

typedef struct ledger {
	pthread_mutex_t lock;
	account *accounts;          /* uthash head */
	unsigned long long count;
	long long max_accounts;
	long long max_amount;
	long long max_balance;
} ledger;

/* Account ids: 1..64 of [A-Za-z0-9_.-]. */
static int
id_ok(const char *id)
{
	size_t n;

	for (n = 0; id[n] != '\0'; n++)
		if (n >= ID_MAX || (!isalnum((unsigned char)id[n]) &&
		    strchr("_.-", id[n]) == NULL))
			return 0;
	return n > 0;
}

/* Answers {"account": id, "balance": balance} with status. */
static idem_err
balance_reply(idem_response *res, int status, const char *id,
    long long balance)
{
	return idem_response_json(res, status, json_pack("{s:s, s:I}",
	    "account", id, "balance", (json_int_t)balance));
}

/*
 * Reads {"amount": n} from the body into *amount.  Returns 0, or the status
 * of the problem it already put in res.
 */
static int
read_amount(const ledger *lg, const idem_request *req, idem_response *res,
    long long *amount)
{
	json_error_t jerr;
	json_t *body = idem_request_json(req, &jerr), *a;
	char detail[200];

	if (body == NULL) {
		snprintf(detail, sizeof(detail), "malformed JSON: %s", jerr.text);
		idem_response_problem(res, 400, "MALFORMED_JSON", detail);
		return 400;
	}
	a = json_is_object(body) ? json_object_get(body, "amount") : NULL;
	if (a == NULL || !json_is_integer(a) || json_integer_value(a) <= 0 ||
	    json_integer_value(a) > lg->max_amount) {
		snprintf(detail, sizeof(detail), "expected {\"amount\": n} with "
		    "n a whole number from 1 to %lld", lg->max_amount);
		json_decref(body);
		idem_response_problem(res, 422, "INVALID_AMOUNT", detail);
		return 422;
	}
	*amount = (long long)json_integer_value(a);
	json_decref(body);
	return 0;
}

/* The {id} of the path, or NULL after a 400 in res. */
static const char *
account_id(const idem_request *req, idem_response *res)
{
	const char *id = idem_request_param(req, "id");

	if (id == NULL || !id_ok(id)) {
		idem_response_problem(res, 400, "INVALID_ACCOUNT_ID",
		    "an account id is 1 to 64 of A-Z a-z 0-9 _ . -");
		return NULL;
	}
	return id;
}

/* POST /accounts/{id}/deposit and /withdraw; sign is +1 or -1. */
static idem_err
move(const idem_request *req, idem_response *res, ledger *lg, int sign)
{
	const char *id = account_id(req, res);
	long long amount, balance;
	account *acc;
	char detail[200];

	if (id == NULL || read_amount(lg, req, res, &amount) != 0)
		return IDEM_OK;
	pthread_mutex_lock(&lg->lock);
	HASH_FIND_STR(lg->accounts, id, acc);
	if (acc == NULL && sign < 0) {
		pthread_mutex_unlock(&lg->lock);
		return idem_response_problem(res, 404, "ACCOUNT_NOT_FOUND",
		    "no such account");
	}
	if (acc == NULL) {
		if (lg->count >= (unsigned long long)lg->max_accounts) {
			pthread_mutex_unlock(&lg->lock);
			return idem_response_problem(res, 422, "LEDGER_FULL",
			    "the ledger holds max-accounts accounts");
		}
		if ((acc = calloc(1, sizeof(*acc))) == NULL) {
			pthread_mutex_unlock(&lg->lock);
			return IDEM_ERR_NOMEM;
		}
		strcpy(acc->id, id);
		HASH_ADD_STR(lg->accounts, id, acc);
		lg->count++;
	}
	if (sign < 0 && acc->balance < amount) {
		balance = acc->balance;
		pthread_mutex_unlock(&lg->lock);
		snprintf(detail, sizeof(detail), "the balance is %lld, the "
		    "withdrawal %lld", balance, amount);
		return idem_response_problem(res, 409, "INSUFFICIENT_FUNDS",
		    detail);
	}
	if (sign > 0 && acc->balance > lg->max_balance - amount) {
		pthread_mutex_unlock(&lg->lock);
		return idem_response_problem(res, 422, "BALANCE_LIMIT",
		    "the deposit would take the balance over its limit");
	}
	acc->balance += sign * amount;
	balance = acc->balance;
	pthread_mutex_unlock(&lg->lock);
	return balance_reply(res, 201, id, balance);
}

static idem_err
deposit(const idem_request *req, idem_response *res, void *data)
{
	return move(req, res, data, 1);
}

static idem_err
withdraw(const idem_request *req, idem_response *res, void *data)
{
	return move(req, res, data, -1);
}

/* GET /accounts/{id} */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	ledger *lg = data;
	const char *id = account_id(req, res);
	account *acc;
	long long balance;

	if (id == NULL)
		return IDEM_OK;
	pthread_mutex_lock(&lg->lock);
	HASH_FIND_STR(lg->accounts, id, acc);
	balance = acc != NULL ? acc->balance : 0;
	pthread_mutex_unlock(&lg->lock);
	if (acc == NULL)
		return idem_response_problem(res, 404, "ACCOUNT_NOT_FOUND",
		    "no such account");
	return balance_reply(res, 200, id, balance);
}

static void
teardown(void *data)
{
	ledger *lg = data;
	account *acc, *tmp;

	if (lg == NULL)
		return;
	HASH_ITER(hh, lg->accounts, acc, tmp) {
		HASH_DEL(lg->accounts, acc);
		free(acc);
	}
	pthread_mutex_destroy(&lg->lock);
	free(lg);
}

static idem_err
setup(idem_app *app, void **data)
{
	ledger *lg = calloc(1, sizeof(*lg));
	idem_err err;

	if (lg == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&lg->lock, NULL);
	lg->max_balance = 1000000000000000000LL;
	if ((err = idem_config_int(app, "max-accounts", 100000, 1, 100000000,
	    &lg->max_accounts)) != IDEM_OK ||
	    (err = idem_config_int(app, "max-amount", 1000000000000LL, 1,
	    1000000000000000LL, &lg->max_amount)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/accounts/{id}/deposit",
	    IDEM_POLICY_DEFAULT, deposit, lg)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/accounts/{id}/withdraw",
	    IDEM_POLICY_DEFAULT, withdraw, lg)) != IDEM_OK ||
	    (err = idem_route_add(app, "GET", "/accounts/{id}",
	    IDEM_POLICY_OFF, show, lg)) != IDEM_OK) {
		teardown(lg);
		return err;
	}
	*data = lg;
	return IDEM_OK;
}

int
idem_plugin_init(idem_plugin *p)
{
	p->abi_version = IDEM_ABI_VERSION;
	p->name = "ledger";
	p->setup = setup;
	p->teardown = teardown;
	return 0;
}
