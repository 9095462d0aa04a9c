/*
 * ledger.c - the demo plugin: accounts with deposits and withdrawals.
 *
 *   POST /accounts/{id}/deposit   {"amount": n}  -> 201 {"account","balance"}
 *   POST /accounts/{id}/withdraw  {"amount": n}  -> 201, or 409
 *                                                   INSUFFICIENT_FUNDS
 *   GET  /accounts/{id}                          -> 200, or 404
 *
 * n is a positive integer up to max-amount; malformed JSON is a 400, a bad
 * amount a 422.  Balances live in memory (one table per process, under a
 * mutex, bounded by max-accounts) or, when the idempotency store has a
 * database (MySQL, PostgreSQL), in the table ledger_accounts of that
 * database (through the data API, idemfcgi_db.h), each operation one
 * statement, written in the store's dialect.  There, deposits and
 * withdrawals are transactional routes ([ledger] transactional = true,
 * the default): the balance changes in the transaction that stores the
 * answer, so a change happens exactly once per key even when a worker is
 * killed at any instant.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "idemfcgi_db.h"

#define ID_MAX 64

typedef struct account {
	char id[ID_MAX + 1];
	long long balance;
	UT_hash_handle hh;
} account;

typedef enum outcome {
	DONE,            /* *balance is the new balance */
	NO_ACCOUNT,
	INSUFFICIENT,    /* *balance is the current balance */
	OVERFLOW,
	FULL,
	UNAVAILABLE      /* the database could not be reached */
} outcome;

typedef struct ledger {
	long long max_accounts;
	long long max_amount;
	/* in memory */
	pthread_mutex_t lock;
	account *accounts;          /* uthash head */
	unsigned long long count;
	/* in the store's database */
	idem_db *db;                /* owned by the server */
	idem_db_dialect dialect;    /* its statements' */
} ledger;

/* ------------------------------------------------------------- memory */

static outcome
mem_move(ledger *lg, const char *id, long long amount, long long *balance)
{
	account *acc;
	outcome o = DONE;

	pthread_mutex_lock(&lg->lock);
	HASH_FIND_STR(lg->accounts, id, acc);
	if (acc == NULL && amount < 0) {
		o = NO_ACCOUNT;
	} else if (acc == NULL && lg->count >= (unsigned long long)lg->max_accounts) {
		o = FULL;
	} else if (acc == NULL && (acc = calloc(1, sizeof(*acc))) == NULL) {
		o = UNAVAILABLE;
	} else {
		if (acc->id[0] == '\0') {
			strcpy(acc->id, id);
			HASH_ADD_STR(lg->accounts, id, acc);
			lg->count++;
		}
		if (amount < 0 && acc->balance < -amount) {
			o = INSUFFICIENT;
		} else if (amount > 0 && acc->balance > INT64_MAX - amount) {
			o = OVERFLOW;
		} else {
			acc->balance += amount;
		}
		*balance = acc->balance;
	}
	pthread_mutex_unlock(&lg->lock);
	return o;
}

static outcome
mem_balance(ledger *lg, const char *id, long long *balance)
{
	account *acc;

	pthread_mutex_lock(&lg->lock);
	HASH_FIND_STR(lg->accounts, id, acc);
	if (acc != NULL)
		*balance = acc->balance;
	pthread_mutex_unlock(&lg->lock);
	return acc != NULL ? DONE : NO_ACCOUNT;
}

/* ------------------------------------------------- the store's database */

enum { Q_DEPOSIT, Q_WITHDRAW, Q_BALANCE, NQ };

/* MySQL: LAST_INSERT_ID(expr) hands the new balance back with the
 * statement's result, so each change is one atomic round trip; a BIGINT
 * overflow is an error (1690). */
static const char *const mysql_queries[NQ] = {
	[Q_DEPOSIT] = "INSERT INTO ledger_accounts (id, balance) VALUES "
	    "(?, LAST_INSERT_ID(?)) ON DUPLICATE KEY UPDATE balance = "
	    "LAST_INSERT_ID(balance + VALUES(balance))",
	[Q_WITHDRAW] = "UPDATE ledger_accounts SET balance = "
	    "LAST_INSERT_ID(balance - ?) WHERE id = ? AND balance >= ?",
	[Q_BALANCE] = "SELECT balance FROM ledger_accounts WHERE id = ?",
};

/* PostgreSQL: RETURNING hands the new balance back as a row; an error
 * would abort the request's transaction, so a deposit that would
 * overflow matches no row instead. */
static const char *const postgres_queries[NQ] = {
	[Q_DEPOSIT] = "INSERT INTO ledger_accounts AS a (id, balance) VALUES "
	    "(?, ?) ON CONFLICT (id) DO UPDATE SET balance = a.balance + "
	    "EXCLUDED.balance WHERE a.balance <= 9223372036854775807 - "
	    "EXCLUDED.balance RETURNING balance",
	[Q_WITHDRAW] = "UPDATE ledger_accounts SET balance = balance - ? "
	    "WHERE id = ? AND balance >= ? RETURNING balance",
	[Q_BALANCE] = "SELECT balance FROM ledger_accounts WHERE id = ?",
};

static const char *const create_table[] = {
	[IDEM_DB_MYSQL] = "CREATE TABLE IF NOT EXISTS ledger_accounts (id "
	    "VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL "
	    "PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB",
	[IDEM_DB_POSTGRES] = "CREATE TABLE IF NOT EXISTS ledger_accounts (id "
	    "VARCHAR(64) NOT NULL PRIMARY KEY, balance BIGINT NOT NULL)",
};

/* The outcome of a statement that failed with err: contention or an
 * outage (logged by the helper) leaves the ledger unavailable. */
static outcome
failed(idem_err err)
{
	return err == IDEM_ERR_TOO_LARGE ? OVERFLOW : UNAVAILABLE;
}

/* Reads the balance of id on c.  DONE, NO_ACCOUNT or UNAVAILABLE. */
static outcome
db_balance_on(idem_db_conn *c, const char *id, long long *balance)
{
	idem_err err = idem_db_one(c, Q_BALANCE, "s", "i", id, balance);

	return err == IDEM_OK ? DONE : err == IDEM_ERR_NOT_FOUND ? NO_ACCOUNT :
	    UNAVAILABLE;
}

/* Moves amount on id: inside the request's transaction on a transactional
 * route (tx not NULL), else as one autocommit statement. */
static outcome
db_move(ledger *lg, idem_db_conn *tx, const char *id, long long amount,
    long long *balance)
{
	idem_db_conn *c = tx != NULL ? tx : idem_db_get(lg->db);
	long long abs = amount < 0 ? -amount : amount;
	idem_err err;
	outcome o = DONE;
	int q = amount > 0 ? Q_DEPOSIT : Q_WITHDRAW;

	if (c == NULL)
		return UNAVAILABLE;
	if (lg->dialect == IDEM_DB_POSTGRES) {
		/* the new balance as a row; none: an overflow, or a
		 * withdrawal from an unknown or too poor account */
		err = amount > 0 ? idem_db_one(c, q, "si", "i", id, abs,
		    balance) : idem_db_one(c, q, "isi", "i", abs, id, abs,
		    balance);
		if (err == IDEM_ERR_NOT_FOUND && amount > 0)
			err = IDEM_ERR_TOO_LARGE;
	} else
		/* a BIGINT overflow (1690) is IDEM_ERR_TOO_LARGE */
		err = amount > 0 ? idem_db_run(c, q, "si", id, abs) :
		    idem_db_run(c, q, "isi", abs, id, abs);
	if (err == IDEM_ERR_NOT_FOUND || (err == IDEM_OK &&
	    idem_db_affected(c, q) == 0)) {
		/* a withdrawal that matched no row: unknown, or too poor */
		o = db_balance_on(c, id, balance);
		if (o == DONE)
			o = INSUFFICIENT;
	} else if (err != IDEM_OK) {
		o = failed(err);
	} else if (lg->dialect == IDEM_DB_MYSQL) {
		*balance = (long long)idem_db_insert_id(c, q);
	}
	if (tx == NULL)
		idem_db_put(lg->db, c);
	return o;
}

static outcome
db_balance(ledger *lg, const char *id, long long *balance)
{
	idem_db_conn *c = idem_db_get(lg->db);
	outcome o;

	if (c == NULL)
		return UNAVAILABLE;
	o = db_balance_on(c, id, balance);
	idem_db_put(lg->db, c);
	return o;
}

/* ----------------------------------------------------------- handlers */

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

/*
 * Puts the {id} of the path in *id.  Returns IDEM_OK, with *id NULL after
 * a 400 in res, or the error of answering (the client then gets a 500, not
 * a half-made answer that would be stored).
 */
static idem_err
account_id(const idem_request *req, idem_response *res, const char **id)
{
	*id = idem_request_param(req, "id");
	if (*id != NULL && id_ok(*id))
		return IDEM_OK;
	*id = NULL;
	return idem_response_problem(res, 400, "INVALID_ACCOUNT_ID",
	    "an account id is 1 to 64 of A-Z a-z 0-9 _ . -");
}

/*
 * Reads {"amount": n} from the body into *amount.  Returns IDEM_OK, with
 * *amount 0 after putting the problem in res, or the error of answering.
 */
static idem_err
read_amount(const ledger *lg, const idem_request *req, idem_response *res,
    long long *amount)
{
	json_error_t jerr;
	json_t *body = idem_request_json(req, &jerr), *a;
	char detail[200];

	*amount = 0;
	if (body == NULL) {
		snprintf(detail, sizeof(detail), "malformed JSON: %s", jerr.text);
		return idem_response_problem(res, 400, "MALFORMED_JSON", detail);
	}
	a = json_is_object(body) ? json_object_get(body, "amount") : NULL;
	if (a == NULL || !json_is_integer(a) || json_integer_value(a) <= 0 ||
	    json_integer_value(a) > lg->max_amount) {
		snprintf(detail, sizeof(detail), "expected {\"amount\": n} with "
		    "n a whole number from 1 to %lld", lg->max_amount);
		json_decref(body);
		return idem_response_problem(res, 422, "INVALID_AMOUNT", detail);
	}
	*amount = (long long)json_integer_value(a);
	json_decref(body);
	return IDEM_OK;
}

/* Answers an outcome that is not DONE. */
static idem_err
refuse(idem_response *res, outcome o, long long balance, long long amount)
{
	char detail[200];

	switch (o) {
	case NO_ACCOUNT:
		return idem_response_problem(res, 404, "ACCOUNT_NOT_FOUND",
		    "no such account");
	case INSUFFICIENT:
		snprintf(detail, sizeof(detail), "the balance is %lld, the "
		    "withdrawal %lld", balance, amount);
		return idem_response_problem(res, 409, "INSUFFICIENT_FUNDS",
		    detail);
	case OVERFLOW:
		return idem_response_problem(res, 422, "BALANCE_LIMIT",
		    "the deposit would take the balance over its limit");
	case FULL:
		return idem_response_problem(res, 422, "LEDGER_FULL",
		    "the ledger holds max-accounts accounts");
	default: {
		idem_err err = idem_response_problem(res, 503,
		    "LEDGER_UNAVAILABLE", "the ledger database is unavailable; "
		    "retry later");
		return err != IDEM_OK ? err :
		    idem_response_header(res, "Retry-After", "1");
	}
	}
}

/* POST /accounts/{id}/deposit and /withdraw; sign is +1 or -1. */
static idem_err
move(const idem_request *req, idem_response *res, ledger *lg, int sign)
{
	const char *id;
	long long amount, balance = 0;
	idem_err err;
	outcome o;

	if ((err = account_id(req, res, &id)) != IDEM_OK || id == NULL ||
	    (err = read_amount(lg, req, res, &amount)) != IDEM_OK || amount == 0)
		return err;
	o = lg->db != NULL ? db_move(lg, idem_request_db(req), id,
	    sign * amount, &balance) : mem_move(lg, id, sign * amount, &balance);
	if (o != DONE)
		return refuse(res, o, balance, amount);
	return idem_response_json(res, 201, json_pack("{s:s, s:I}", "account",
	    id, "balance", (json_int_t)balance));
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
	const char *id;
	long long balance = 0;
	idem_err err;
	outcome o;

	if ((err = account_id(req, res, &id)) != IDEM_OK || id == NULL)
		return err;
	o = lg->db != NULL ? db_balance(lg, id, &balance) :
	    mem_balance(lg, id, &balance);
	if (o != DONE)
		return refuse(res, o, balance, 0);
	return idem_response_json(res, 200, json_pack("{s:s, s:I}", "account",
	    id, "balance", (json_int_t)balance));
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
	idem_err (*add)(idem_app *, const char *, const char *, idem_policy,
	    idem_handler_fn, void *);
	idem_err err;
	int tx;

	if (lg == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&lg->lock, NULL);
	if ((err = idem_config_int(app, "max-accounts", 100000, 1, 100000000,
	    &lg->max_accounts)) != IDEM_OK ||
	    (err = idem_config_int(app, "max-amount", 1000000000000LL, 1,
	    1000000000000000LL, &lg->max_amount)) != IDEM_OK)
		goto fail;
	if ((err = idem_config_bool(app, "transactional", 1, &tx)) != IDEM_OK)
		goto fail;
	lg->dialect = idem_app_db_dialect(app);
	if (lg->dialect != IDEM_DB_NONE &&
	    (lg->db = idem_app_db(app, lg->dialect == IDEM_DB_POSTGRES ?
	    postgres_queries : mysql_queries, NQ)) == NULL) {
		err = IDEM_ERR_STORE;
		goto fail;
	}
	/* in the store's database a change and its answer commit together
	 * (exactly once across crashes); in memory there is nothing to
	 * share */
	add = lg->db != NULL && tx ? idem_route_add_tx : idem_route_add;
	if ((err = add(app, "POST", "/accounts/{id}/deposit",
	    IDEM_POLICY_DEFAULT, deposit, lg)) != IDEM_OK ||
	    (err = add(app, "POST", "/accounts/{id}/withdraw",
	    IDEM_POLICY_DEFAULT, withdraw, lg)) != IDEM_OK ||
	    (err = idem_route_add(app, "GET", "/accounts/{id}",
	    IDEM_POLICY_OFF, show, lg)) != IDEM_OK)
		goto fail;
	*data = lg;
	return IDEM_OK;
fail:
	teardown(lg);
	return err;
}

/* Creates the accounts table, once per start (not for --check). */
static idem_err
deploy(idem_app *app, void *data)
{
	idem_db_dialect d = idem_app_db_dialect(app);

	(void)data;
	return d != IDEM_DB_NONE ? idem_app_db_exec(app, create_table[d]) :
	    IDEM_OK;
}

IDEM_PLUGIN("ledger", setup, deploy, teardown)
