/*
 * idemfcgi.h - the public API of idemfcgi, for handler plugins.
 *
 * A plugin is a shared object that exports one function,
 *
 *     int idem_plugin_init(idem_plugin *p);
 *
 * which fills *p (ABI version first) and returns 0.  The server checks
 * p->abi_version against IDEM_ABI_VERSION, then calls p->setup once, where
 * the plugin reads its own config section ([name]) and registers its routes
 * with idem_route_add().  Handlers run concurrently on the worker threads:
 * whatever a plugin shares between requests must be thread-safe.
 *
 * Ownership, everywhere in this header:
 *  - "borrowed" pointers belong to the framework and stay valid only for
 *    the call they are passed to (a handler's request: until it returns);
 *  - strings passed in are copied unless stated otherwise;
 *  - "caller frees" results are released with the named function.
 */
#ifndef IDEMFCGI_H
#define IDEMFCGI_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever idem_plugin or any function below changes incompatibly. */
#define IDEM_ABI_VERSION 1

/* Error codes of every idem_* function.  IDEM_OK is 0. */
typedef enum idem_err {
	IDEM_OK = 0,
	IDEM_ERR_NOMEM,     /* out of memory */
	IDEM_ERR_INVALID,   /* a bad argument */
	IDEM_ERR_CONFIG,    /* a bad configuration value (already logged) */
	IDEM_ERR_PLUGIN,    /* a plugin could not be loaded or set up */
	IDEM_ERR_IO,        /* a system call failed (errno says why) */
	IDEM_ERR_PROTOCOL,  /* a malformed request from the web server */
	IDEM_ERR_TOO_LARGE, /* a limit was exceeded */
	IDEM_ERR_EXISTS,    /* a duplicate (route, key, ...) */
	IDEM_ERR_HANDLER,   /* a handler failed; the client gets a 500 */
	IDEM_ERR_STORE,     /* the idempotency store failed */
	IDEM_ERR_NOT_FOUND, /* no such entry */
	IDEM_ERR_BUSY       /* contention (a deadlock, a lock wait): nothing
	                     * was changed; try again later */
} idem_err;

/* Returns a static, human-readable description of err. */
const char *idem_strerror(idem_err err);

/* ---------------------------------------------------------------- logging */

typedef enum idem_log_level {
	IDEM_LOG_DEBUG = 0,
	IDEM_LOG_INFO,
	IDEM_LOG_WARN,
	IDEM_LOG_ERROR
} idem_log_level;

typedef struct idem_request idem_request;
typedef struct idem_response idem_response;
/* A pooled database connection (see "database" below). */
typedef struct idem_mysql_conn idem_mysql_conn;

/*
 * Writes one line to stderr: time, level, and when req is not NULL its
 * request id, route and key hash (never the key), then the message; as text
 * or as one JSON object ([server] log-format).  Control characters in the
 * message are escaped.
 */
void idem_log(const idem_request *req, idem_log_level level,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- request */

/* The HTTP method ("GET", "POST", ...).  Borrowed. */
const char *idem_request_method(const idem_request *req);
/* The routed path, percent-decoded, without the mount prefix.  Borrowed. */
const char *idem_request_path(const idem_request *req);
/* The raw query string without '?', "" when absent.  Borrowed. */
const char *idem_request_query(const idem_request *req);
/*
 * A request header by its HTTP name ("Idempotency-Key"), case-insensitive;
 * NULL when absent.  Content-Type and Content-Length are found too.  Borrowed.
 */
const char *idem_request_header(const idem_request *req, const char *name);
/* A path parameter of the route template ("id" for "{id}"); NULL if none. */
const char *idem_request_param(const idem_request *req, const char *name);
/* The body and its length (*len may be NULL); never NULL, NUL-terminated. */
const char *idem_request_body(const idem_request *req, size_t *len);
/* The authenticated user (REMOTE_USER), NULL when absent.  Borrowed. */
const char *idem_request_remote_user(const idem_request *req);
/* The request id (X-Request-Id when sane, else generated).  Borrowed. */
const char *idem_request_id(const idem_request *req);
/* The route template that matched ("/accounts/{id}"); borrowed. */
const char *idem_request_route(const idem_request *req);
/*
 * On a transactional route (idem_route_add_tx), the connection inside the
 * request's open transaction: run the handler's statements on it
 * (idem_mysql_stmt).  The handler never commits or rolls back, nor runs
 * statements that do so implicitly (DDL, LOCK TABLES, START TRANSACTION).
 * Borrowed until the handler returns; NULL on other routes.
 */
idem_mysql_conn *idem_request_tx(const idem_request *req);
/*
 * Parses the body as JSON.  Returns a new reference (caller calls
 * json_decref) or NULL with *error filled (error may be NULL).
 */
json_t *idem_request_json(const idem_request *req, json_error_t *error);

/* --------------------------------------------------------------- response */

/* Sets the status code (100..599).  The default is 200. */
idem_err idem_response_status(idem_response *res, int status);
/*
 * Adds a header.  Name and value are copied; a name or value with CR, LF or
 * NUL, or a name that is not an HTTP token, is refused with IDEM_ERR_INVALID.
 * Status and Content-Length are set by the framework and refused here.  A
 * response holds up to 64 headers (IDEM_ERR_TOO_LARGE beyond).
 */
idem_err idem_response_header(idem_response *res, const char *name,
    const char *value);
/* Appends len bytes to the body (copied). */
idem_err idem_response_write(idem_response *res, const void *data, size_t len);
/*
 * Sets status, Content-Type: application/json and the body to the compact
 * encoding of json.  Steals the reference to json (even on error).
 */
idem_err idem_response_json(idem_response *res, int status, json_t *json);
/*
 * Sets a problem response (RFC 9457, application/problem+json):
 * {"status":..,"title":..,"code":..,"detail":..}.  code and detail may be
 * NULL; title defaults to the reason phrase of status.
 */
idem_err idem_response_problem(idem_response *res, int status,
    const char *code, const char *detail);
/* The status set so far. */
int idem_response_get_status(const idem_response *res);

/* ---------------------------------------------------------------- plugins */

typedef enum idem_policy {
	IDEM_POLICY_DEFAULT = 0, /* off on GET, HEAD, OPTIONS, TRACE; on other
	                          * methods "required" from [idempotency]
	                          * decides */
	IDEM_POLICY_OFF,         /* never idempotent (reads) */
	IDEM_POLICY_OPTIONAL,    /* idempotent when the client sends a key */
	IDEM_POLICY_REQUIRED     /* a request without a key gets 400 */
} idem_policy;

/*
 * A handler answers one request by filling res.  Returns IDEM_OK, or any
 * other code for a failure the client sees as 500 (whatever was put in res
 * is discarded).  req and res are borrowed for the call; data is the pointer
 * given to idem_route_add.
 */
typedef idem_err (*idem_handler_fn)(const idem_request *req,
    idem_response *res, void *data);

/* The registration context passed to a plugin's setup.  Borrowed. */
typedef struct idem_app idem_app;

/*
 * Registers a route: method ("GET", "POST", ...), a path template whose
 * segments are literals or "{name}" (one whole segment each), the
 * idempotency policy and the handler.  Templates are copied.  Returns
 * IDEM_ERR_EXISTS when the same method and template shape is registered,
 * IDEM_ERR_INVALID for a malformed template.
 */
idem_err idem_route_add(idem_app *app, const char *method,
    const char *tmpl, idem_policy policy, idem_handler_fn handler,
    void *data);

/*
 * Read keys of the plugin's own config section.  Each returns IDEM_OK with
 * *out set (to def when the key is absent) or IDEM_ERR_CONFIG after logging
 * the file, line and key of a bad value.  A key the plugin never reads is
 * refused as unknown after setup.  String results are borrowed for the
 * lifetime of the server.
 */
idem_err idem_config_string(idem_app *app, const char *key, const char *def,
    const char **out);
idem_err idem_config_int(idem_app *app, const char *key, long long def,
    long long min, long long max, long long *out);
idem_err idem_config_bool(idem_app *app, const char *key, int def, int *out);
/* Sizes: "512", "64k", "1m", "1g" (powers of 1024). */
idem_err idem_config_size(idem_app *app, const char *key, uint64_t def,
    uint64_t *out);
/* Durations in milliseconds: "500ms", "30s", "5m", "24h", "2d", "PT30M". */
idem_err idem_config_duration(idem_app *app, const char *key, uint64_t def,
    uint64_t *out);

/* --------------------------------------------------------- database */

/*
 * Plugins that keep their own data in the database of the MySQL store
 * ([idempotency] store = mysql) use the server's [mysql] settings through
 * these.  A pool hands out connections whose statements are prepared once;
 * statement handles are MYSQL_STMT * from <mysql.h>.
 */
typedef struct idem_mysql_pool idem_mysql_pool;

/*
 * Registers a transactional route (DESIGN.md 2.7): like
 * idem_route_add, but its handler runs inside a database transaction on a
 * connection of the plugin's pool (make it first with idem_app_mysql_pool),
 * which idem_request_tx hands it.  The record of the request's key is
 * reserved and written in the same transaction, which the framework
 * commits when the answer is stored (a status in commit-statuses) and
 * rolls back otherwise (a handler error, 5xx, 429, ...): the handler's
 * writes and its answer are committed together, exactly once, or not at
 * all.  Needs idempotency enabled with store = mysql; else, or without a
 * pool, returns IDEM_ERR_CONFIG after logging the route.
 */
idem_err idem_route_add_tx(idem_app *app, const char *method,
    const char *tmpl, idem_policy policy, idem_handler_fn handler,
    void *data);

/* Whether idempotency records live in MySQL (enabled, store = mysql). */
int idem_app_uses_mysql(const idem_app *app);

/*
 * Runs one statement (DDL such as CREATE TABLE IF NOT EXISTS) on the
 * [mysql] database during setup.  Returns IDEM_OK or IDEM_ERR_STORE
 * (logged).
 */
idem_err idem_app_mysql_exec(idem_app *app, const char *sql);

/*
 * A pool of [mysql] pool-size connections, each preparing the nsql
 * statements of sql (borrowed: static storage) when it connects.  The
 * server owns the pool and frees it after the plugin's teardown.  Returns
 * NULL (logged) when it cannot be made.
 */
idem_mysql_pool *idem_app_mysql_pool(idem_app *app, const char *const *sql,
    size_t nsql);

/*
 * Takes a connected connection (NULL when the database cannot be reached
 * within the timeouts: answer 503).  Give it back with idem_mysql_put.
 */
idem_mysql_conn *idem_mysql_get(idem_mysql_pool *p);
/* Gives c back; closes it when idem_mysql_check saw it was lost. */
void idem_mysql_put(idem_mysql_pool *p, idem_mysql_conn *c);
/* Statement i of c (a MYSQL_STMT *), borrowed until idem_mysql_put. */
void *idem_mysql_stmt(idem_mysql_conn *c, size_t i);
/* After a failed call, with its mysql_stmt_errno: marks c lost if the
 * error means the connection is gone, so the next taker reconnects. */
void idem_mysql_check(idem_mysql_conn *c, unsigned err);

/* What a plugin's idem_plugin_init fills in. */
typedef struct idem_plugin {
	/* Must be first, and set to IDEM_ABI_VERSION. */
	unsigned int abi_version;
	/* Short name, also the config section; static storage. */
	const char *name;
	/*
	 * Called once at start-up, before any request: read config, register
	 * routes.  *data is passed to teardown.  A non-OK return stops start-up;
	 * setup then frees what it allocated itself (teardown is not called).
	 */
	idem_err (*setup)(idem_app *app, void **data);
	/* Called once at shutdown after the last request; may be NULL. */
	void (*teardown)(void *data);
} idem_plugin;

/* The one symbol a plugin exports. */
#define IDEM_PLUGIN_SYMBOL "idem_plugin_init"
int idem_plugin_init(idem_plugin *p);

#ifdef __cplusplus
}
#endif
#endif /* IDEMFCGI_H */
