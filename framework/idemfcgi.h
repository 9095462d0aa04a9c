/*
 * idemfcgi.h - the public API of idemfcgi, for handler plugins.
 * idemfcgi_db.h adds what plugins that keep data in the store's database
 * use, and idemfcgi_mysql.h MySQL's own statement handles for those that
 * want them.  libidemfcgi exports exactly the functions declared in these
 * three headers (IDEM_API).
 *
 * A plugin is a shared object that exports one function,
 *
 *     int idem_plugin_init(idem_plugin *p);
 *
 * which fills *p (ABI version and struct size first) and returns 0
 * (IDEM_PLUGIN below writes it for the common case).  The server checks
 * them, then runs the plugin's hooks as "Lifecycle" at the
 * end of this file says: setup reads the plugin's own config section
 * ([name]) and registers its routes with idem_route_add().  Handlers run
 * concurrently on a worker's threads: whatever a plugin shares between
 * requests must be thread-safe.
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

/* Marks the functions libidemfcgi exports (everything else is hidden). */
#define IDEM_API __attribute__((visibility("default")))
/* An idem_err result must be looked at. */
#define IDEM_WUR __attribute__((warn_unused_result))

/*
 * Bumped whenever idem_plugin or any function below changes incompatibly.
 * Adding a hook at the end of idem_plugin, or a function, is not such a
 * change (see struct_size).
 */
#define IDEM_ABI_VERSION 2

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
	IDEM_ERR_BUSY,      /* contention (a deadlock, a lock wait): nothing
	                     * was changed; try again later */
	IDEM_ERR_OUTCOME_UNKNOWN /* a handler's side effect may or may not
	                     * have happened (a timeout after sending): its
	                     * record is kept, neither committed nor
	                     * released (see idem_route_reconcile) */
} idem_err;

/* Returns a static, human-readable description of err. */
IDEM_API const char *idem_strerror(idem_err err);

/* ---------------------------------------------------------------- logging */

typedef enum idem_log_level {
	IDEM_LOG_DEBUG = 0,
	IDEM_LOG_INFO,
	IDEM_LOG_WARN,
	IDEM_LOG_ERROR
} idem_log_level;

typedef struct idem_request idem_request;
typedef struct idem_response idem_response;

/*
 * Writes one line to stderr: time, level, and when req is not NULL its
 * request id, route and key hash (never the key), then the message; as text
 * or as one JSON object ([server] log-format).  Control characters in the
 * message are escaped.
 */
IDEM_API void idem_log(const idem_request *req, idem_log_level level,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- request */

/* The HTTP method ("GET", "POST", ...).  Borrowed. */
IDEM_API const char *idem_request_method(const idem_request *req);
/* The routed path, percent-decoded, without the mount prefix.  Borrowed. */
IDEM_API const char *idem_request_path(const idem_request *req);
/*
 * Where this instance is mounted: the URL path before the routed path
 * (idem_request_path), so that a handler builds a Location under any
 * mount as script_name followed by its own path:
 * "/api" + "/notes/7".  It is SCRIPT_NAME when the web server split the
 * URL into SCRIPT_NAME and PATH_INFO (lighttpd, Apache with the
 * ProxyFCGISetEnvIf lines of conf/, mod_fcgid, nginx with
 * fastcgi_split_path_info), else [server] mount when it was stripped
 * from REQUEST_URI, else "".  As a URI path: it starts with '/' or is
 * "", has no trailing '/' and no "//", and bytes a path cannot hold are
 * percent-encoded ('%' is kept as sent).  Never NULL; borrowed.
 */
IDEM_API const char *idem_request_script_name(const idem_request *req);
/* The raw query string without '?', "" when absent.  Borrowed. */
IDEM_API const char *idem_request_query(const idem_request *req);
/*
 * A request header by its HTTP name ("Idempotency-Key"), case-insensitive;
 * NULL when absent.  Content-Type and Content-Length are found too.  Borrowed.
 */
IDEM_API const char *idem_request_header(const idem_request *req,
    const char *name);
/* A path parameter of the route template ("id" for "{id}"); NULL if none. */
IDEM_API const char *idem_request_param(const idem_request *req,
    const char *name);
/* The body and its length (*len may be NULL); never NULL, NUL-terminated. */
IDEM_API const char *idem_request_body(const idem_request *req, size_t *len);
/* The authenticated user (REMOTE_USER), NULL when absent.  Borrowed. */
IDEM_API const char *idem_request_remote_user(const idem_request *req);
/* The request id (X-Request-Id when sane, else generated).  Borrowed. */
IDEM_API const char *idem_request_id(const idem_request *req);
/* The route template that matched ("/accounts/{id}"); borrowed. */
IDEM_API const char *idem_request_route(const idem_request *req);
/*
 * Parses the body as JSON.  Returns a new reference (caller calls
 * json_decref) or NULL with *error filled (error may be NULL).
 */
IDEM_API json_t *idem_request_json(const idem_request *req,
    json_error_t *error);

/* The size of a downstream key with its NUL: a UUID (RFC 9562, version
 * 8) in lower case. */
#define IDEM_DOWNSTREAM_KEY_SIZE 37
/*
 * A key to send as another service's Idempotency-Key for the call named
 * purpose (1 to 64 bytes: "charge", "refund"), written to out: the same on
 * every execution of this request's record (its first run, a retry after
 * a release, a takeover after a crash, a run on another worker or node),
 * different for each purpose and each (scope, key).  It is derived with
 * the deployment's secret ([idempotency] key-secret-file): it tells the
 * other service nothing of the client's key or scope, and cannot be
 * guessed without the secret.  Returns IDEM_OK; IDEM_ERR_INVALID for a
 * bad purpose; IDEM_ERR_NOT_FOUND when req has no record (no
 * Idempotency-Key on an optional route, a route whose policy is off);
 * IDEM_ERR_CONFIG when the configuration has no key-secret-file.
 */
IDEM_API IDEM_WUR idem_err
idem_request_downstream_key(const idem_request *req, const char *purpose,
    char out[IDEM_DOWNSTREAM_KEY_SIZE]);

/*
 * Records the handler's progress under its request's record: phase (1 to
 * 64 bytes of letters, digits and "._:-", naming how far it got: "charged")
 * and state (a JSON object, borrowed; NULL: none), at most 16 KiB as
 * compact JSON.  Durable with the record: on a transactional route in the
 * request's transaction (kept when it commits, as an answer or an unknown
 * outcome); else at once, owner-checked.  When this request's record runs
 * again (a retry after a release, a takeover after a crash, a reconcile)
 * its handler reads the last phase and state back and goes on from there;
 * a record with progress is not deleted by a release but kept for the same
 * request.  Returns IDEM_OK; IDEM_ERR_INVALID (a bad phase or state);
 * IDEM_ERR_TOO_LARGE; IDEM_ERR_NOT_FOUND when req has no record, or this
 * execution no longer holds it (taken over: stop, without side effects);
 * IDEM_ERR_STORE or IDEM_ERR_BUSY (not recorded: return the error; the
 * request is released, with the progress recorded before, and retried).
 */
IDEM_API IDEM_WUR idem_err
idem_request_checkpoint(const idem_request *req, const char *phase,
    json_t *state);
/* The last phase recorded under req's record (by an earlier execution or
 * this one), or NULL when none.  Borrowed until the next checkpoint. */
IDEM_API const char *idem_request_phase(const idem_request *req);
/* Its state: a new reference (caller calls json_decref), or NULL when
 * none. */
IDEM_API json_t *idem_request_progress(const idem_request *req);

/* --------------------------------------------------------------- response */

/* Sets the status code (100..599).  The default is 200. */
IDEM_API IDEM_WUR idem_err
idem_response_status(idem_response *res, int status);
/*
 * Adds a header.  Name and value are copied.  Refused with
 * IDEM_ERR_INVALID: a name that is not an HTTP token or is over 128 bytes,
 * a value with a control character other than TAB (CR, LF, NUL, DEL, ...)
 * or of 8192 bytes or more, and the headers the framework sets (Status,
 * Content-Length, X-Request-Id).  A response holds up to 64 headers
 * (IDEM_ERR_TOO_LARGE beyond); IDEM_ERR_NOMEM when out of memory.
 */
IDEM_API IDEM_WUR idem_err
idem_response_header(idem_response *res, const char *name, const char *value);
/* Appends len bytes to the body (copied). */
IDEM_API IDEM_WUR idem_err
idem_response_write(idem_response *res, const void *data, size_t len);
/*
 * Sets status, Content-Type: application/json and the body to the compact
 * encoding of json.  Steals the reference to json (even on error).
 */
IDEM_API IDEM_WUR idem_err
idem_response_json(idem_response *res, int status, json_t *json);
/*
 * Sets a problem response (RFC 9457, application/problem+json):
 * {"status":..,"title":..,"code":..,"detail":..}.  code and detail may be
 * NULL; title defaults to the reason phrase of status.
 */
IDEM_API IDEM_WUR idem_err
idem_response_problem(idem_response *res, int status, const char *code,
    const char *detail);
/* The status set so far. */
IDEM_API int idem_response_get_status(const idem_response *res);

/*
 * An error format: writes into res the answer to an error of status (400
 * to 599), named by code (a stable upper-case name: the framework's, such
 * as "IDEMPOTENCY_IN_FLIGHT" (DESIGN.md 5), or a handler's) and detail (a
 * sentence for a person; may be NULL).  All three are borrowed for the
 * call; data is the pointer given with the format.  It sets the body and
 * its Content-Type (idem_response_json, say); the status stays status
 * whatever it sets, and headers the framework adds (Retry-After) come
 * after.  Returns IDEM_OK, or an error after which the default problem
 * (RFC 9457) is written instead.  Runs on a worker's threads at once:
 * thread-safe.
 */
typedef idem_err (*idem_error_fn)(idem_response *res, int status,
    const char *code, const char *detail, void *data);

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
 * idempotency policy and the handler.  Method and template are copied;
 * data is the plugin's, passed to each call of handler.  Only in setup.
 * Returns IDEM_OK; IDEM_ERR_EXISTS when the same method and template shape
 * is registered; IDEM_ERR_INVALID for a malformed method or template (not
 * starting with '/', over 4096 bytes or 32 segments, an empty or
 * half-braced segment, a parameter named twice) or a call from deploy;
 * IDEM_ERR_NOMEM.  Each is logged with the plugin's file.
 */
IDEM_API IDEM_WUR idem_err
idem_route_add(idem_app *app, const char *method, const char *tmpl,
    idem_policy policy, idem_handler_fn handler, void *data);

/*
 * Gives the route method tmpl, registered by this plugin, a reconcile
 * hook: when a handler returned IDEM_ERR_OUTCOME_UNKNOWN, a retry of the
 * same request runs reconcile instead of the handler, once at a time, with
 * the record's progress (idem_request_phase) and the same downstream keys.
 * It asks the other service what became of the call (by the downstream
 * key, or a reference) and answers: a final answer (a status in
 * commit-statuses) is stored and replayed; anything else, or
 * IDEM_ERR_OUTCOME_UNKNOWN, leaves the outcome unknown (the retry gets 503
 * IDEMPOTENCY_OUTCOME_UNKNOWN).  Without a hook such a record waits for an
 * operator (idemfcgi-admin) or its expiry.  Only in setup.  Returns IDEM_OK;
 * IDEM_ERR_NOT_FOUND (no such route of this plugin); IDEM_ERR_EXISTS (it has
 * one); IDEM_ERR_INVALID (from deploy, or reconcile NULL).  Logged.
 */
IDEM_API IDEM_WUR idem_err
idem_route_reconcile(idem_app *app, const char *method, const char *tmpl,
    idem_handler_fn reconcile);

/*
 * Sets one key of the policy of the route method tmpl, registered by this
 * plugin, as a [route METHOD PATH] section of the config file would
 * (idemfcgi.conf(5)): key is "policy" (default, off, optional,
 * required), "key-format", "lifetime", "inflight-ttl", "inflight-wait",
 * "commit-statuses", "fingerprint-ignore" (JSON Pointers of body members
 * left out of the fingerprint), "fingerprint-headers" (request headers
 * added to it), "tombstone-lifetime", "expired-keys" or "calls-outside"
 * (its handler calls another service: a transactional route then
 * reserves its key in a commit of its own first, DESIGN.md 2.7), and
 * value its text ("7d", "2xx 404 409", "/client_ts /nonce", "true"),
 * checked as the config file's.  The route's keys left unset
 * keep the [idempotency] values; a [route] section of the file wins over
 * what code sets.  Key and value are copied.  Only in setup.  Returns
 * IDEM_OK; IDEM_ERR_NOT_FOUND (no such route of this plugin);
 * IDEM_ERR_INVALID (an unknown key, a bad value, inflight-ttl or
 * inflight-wait on a transactional route, a call from deploy);
 * IDEM_ERR_NOMEM.  Each is logged with the plugin's file.
 */
IDEM_API IDEM_WUR idem_err
idem_route_set(idem_app *app, const char *method, const char *tmpl,
    const char *key, const char *value);

/*
 * Describes the route method tmpl, registered by this plugin, in the
 * OpenAPI document (idemfcgi --openapi): summary (copied; NULL: none),
 * the JSON Schema of its request body and of its answers' bodies (2XX),
 * each borrowed (a reference is taken; NULL: none).  Only in setup.
 * Returns IDEM_OK; IDEM_ERR_NOT_FOUND (no such route of this plugin);
 * IDEM_ERR_INVALID (a schema that is not an object, a call from deploy);
 * IDEM_ERR_NOMEM.  Logged.
 */
IDEM_API IDEM_WUR idem_err
idem_route_describe(idem_app *app, const char *method, const char *tmpl,
    const char *summary, json_t *request_schema, json_t *response_schema);

/*
 * Names schema (a JSON Schema object; borrowed: a reference is taken) in
 * the OpenAPI document's components, so that route descriptions and error
 * formats refer to it as {"$ref": "#/components/schemas/NAME"}.  name: 1
 * to 64 letters, digits, '.', '_' or '-'.  Only in setup.  Returns
 * IDEM_OK; IDEM_ERR_EXISTS (a name taken, by this plugin, another, or the
 * framework's "Problem"); IDEM_ERR_INVALID (a bad name, a schema that is
 * not an object, a call from deploy); IDEM_ERR_NOMEM.  Logged.
 */
IDEM_API IDEM_WUR idem_err
idem_app_schema(idem_app *app, const char *name, json_t *schema);

/*
 * Gives the plugin's routes an error format: every answer that
 * idem_response_problem or the framework itself writes for a request of
 * these routes (a malformed key, a key in flight, a key reused for
 * another request, the store away, a handler that failed) is written by
 * render instead of as an RFC 9457 problem, the default.  Answers to
 * requests no route matched (404, 405) and the stand-in of an answer too
 * large to store (IDEMPOTENCY_ANSWER_NOT_STORED) stay problems.
 * media_type ("application/json") and schema (a JSON Schema of the body;
 * borrowed: a reference is taken) describe it in the OpenAPI document.
 * idem_app_error_format sets it for every route the plugin registers,
 * before the call or after; idem_route_error_format for one route of the
 * plugin, which then keeps it.  data is the plugin's, passed to each call
 * of render.  Only in setup.  Returns IDEM_OK; IDEM_ERR_NOT_FOUND (no such
 * route of this plugin); IDEM_ERR_INVALID (render, media_type or schema
 * NULL, a schema that is not an object, a call from deploy);
 * IDEM_ERR_NOMEM.  Logged.
 */
IDEM_API IDEM_WUR idem_err
idem_app_error_format(idem_app *app, const char *media_type, json_t *schema,
    idem_error_fn render, void *data);
IDEM_API IDEM_WUR idem_err
idem_route_error_format(idem_app *app, const char *method, const char *tmpl,
    const char *media_type, json_t *schema, idem_error_fn render,
    void *data);

/*
 * The lifetime of the route method tmpl, registered by this plugin, into
 * *ms: how long the answer of a key is kept and replayed (DESIGN.md 3),
 * as every setting says: its [route] section, else idem_route_set's, else
 * [idempotency]'s.  For a plugin that advertises it (an Iceberg catalog's
 * idempotency-key-lifetime): call it after the route's last
 * idem_route_set.  Only in setup.  Returns IDEM_OK; IDEM_ERR_NOT_FOUND (no
 * such route of this plugin, or its policy is off: none is kept);
 * IDEM_ERR_INVALID (a call from deploy, an argument NULL).
 */
IDEM_API IDEM_WUR idem_err
idem_route_lifetime(idem_app *app, const char *method, const char *tmpl,
    uint64_t *ms);

/*
 * Read keys of the plugin's own config section.  Each returns IDEM_OK with
 * *out set (to def when the key is absent) or IDEM_ERR_CONFIG after logging
 * the file, line and key of a bad value.  A key the plugin never reads is
 * refused as unknown after setup.  String results are borrowed for the
 * lifetime of the server.
 */
IDEM_API IDEM_WUR idem_err
idem_config_string(idem_app *app, const char *key, const char *def,
    const char **out);
IDEM_API IDEM_WUR idem_err
idem_config_int(idem_app *app, const char *key, long long def, long long min,
    long long max, long long *out);
IDEM_API IDEM_WUR idem_err
idem_config_bool(idem_app *app, const char *key, int def, int *out);
/* Sizes: "512", "64k", "1m", "1g" (powers of 1024). */
IDEM_API IDEM_WUR idem_err
idem_config_size(idem_app *app, const char *key, uint64_t def, uint64_t *out);
/* Durations in milliseconds: "500ms", "30s", "5m", "24h", "2d", "PT30M". */
IDEM_API IDEM_WUR idem_err
idem_config_duration(idem_app *app, const char *key, uint64_t def,
    uint64_t *out);

/*
 * Whether app is the master's check of the configuration (1) rather than
 * a process that will serve requests (0).  A check registers routes and
 * reads config like a real start, but none of its routes will ever run:
 * setup makes no outside change there (no DDL, no call to another
 * service).  See "Lifecycle".
 */
IDEM_API int idem_app_is_check(const idem_app *app);

/* Whether the configuration has a key secret ([idempotency]
 * key-secret-file), so that handlers get downstream keys
 * (idem_request_downstream_key): a plugin that needs them refuses to set
 * up without it. */
IDEM_API int idem_app_has_key_secret(const idem_app *app);

/*
 * What a plugin's idem_plugin_init fills in.  The server hands init a
 * zeroed struct: a hook left NULL is absent.
 */
typedef struct idem_plugin {
	/* Must be first, and set to IDEM_ABI_VERSION. */
	unsigned int abi_version;
	/* Set to sizeof(idem_plugin): hooks added after teardown by a later
	 * idemfcgi.h are absent in plugins built before them, and a plugin
	 * built against a later header is accepted as long as the hooks
	 * this server does not know are NULL (and the whole struct holds in
	 * the 512 bytes the server gives idem_plugin_init). */
	unsigned int struct_size;
	/* Short name, also the config section; static storage. */
	const char *name;
	/*
	 * Reads config, registers routes, makes the plugin's pool; once per
	 * process that loads the plugin (see "Lifecycle").  *data, owned by
	 * the plugin, is passed to deploy and teardown in the same process.
	 * A non-OK return stops start-up (or refuses a reload); setup then
	 * frees what it allocated itself (teardown is not called).  Required.
	 */
	idem_err (*setup)(idem_app *app, void **data);
	/*
	 * Makes the changes a deployment needs once (CREATE TABLE IF NOT
	 * EXISTS, migrations): in the master, once per start and per reload,
	 * after every plugin's setup passed the check and before any worker
	 * starts; never for --check.  data is what this process's setup
	 * returned.  A non-OK return stops start-up (or refuses the reload).
	 * May be NULL.
	 */
	idem_err (*deploy)(idem_app *app, void *data);
	/* Frees what setup made; once after each setup that succeeded, in the
	 * same process, after its last request (see "Lifecycle" for when it
	 * cannot run).  May be NULL. */
	void (*teardown)(void *data);
} idem_plugin;

/*
 * Lifecycle.  idemfcgi runs as a master process and the workers it forks;
 * a plugin's data never crosses a fork (threads and connections do not
 * survive one), so each process sets the plugin up for itself:
 *
 *   hook              process   how often
 *   idem_plugin_init  each      each time a process loads the plugin
 *   setup             master    at start-up, for --check and on each
 *                               SIGHUP: the check (idem_app_is_check 1)
 *                     worker    once, after fork, before its first
 *                               request (idem_app_is_check 0); also in a
 *                               worker that replaces a dead one
 *   deploy            master    once per start and per reload, after the
 *                               check passed, before the workers start;
 *                               never for --check
 *   handlers          worker    per request, concurrently on its threads
 *   teardown          both      after each setup that succeeded: the
 *                               master's at the end of its check (after
 *                               deploy), a worker's after its last request
 *
 * teardown does not run when the process is killed (SIGKILL, a crash),
 * when a worker's shutdown-grace ends with handlers still running (they
 * may still use data, so the worker exits without freeing it), or after
 * a setup that failed.
 */

/* The one symbol a plugin exports (the plugin's, not libidemfcgi's);
 * exported even from a plugin built with -fvisibility=hidden. */
#define IDEM_PLUGIN_SYMBOL "idem_plugin_init"
#define IDEM_PLUGIN_EXPORT __attribute__((visibility("default")))
IDEM_PLUGIN_EXPORT int idem_plugin_init(idem_plugin *p);

/*
 * The common idem_plugin_init, written for a plugin: name (a string
 * literal, also its config section) and its hooks (NULL for an absent
 * deploy or teardown).  Use it once, at file scope:
 *
 *     IDEM_PLUGIN("hello", setup, NULL, NULL)
 *
 * A plugin that needs more (a name chosen at load time) writes
 * idem_plugin_init itself.
 */
#define IDEM_PLUGIN(name_, setup_, deploy_, teardown_)                    \
	IDEM_PLUGIN_EXPORT int                                            \
	idem_plugin_init(idem_plugin *p)                                  \
	{                                                                 \
		p->abi_version = IDEM_ABI_VERSION;                        \
		p->struct_size = sizeof(*p);                              \
		p->name = (name_);                                        \
		p->setup = (setup_);                                      \
		p->deploy = (deploy_);                                    \
		p->teardown = (teardown_);                                \
		return 0;                                                 \
	}

#ifdef __cplusplus
}
#endif
#endif /* IDEMFCGI_H */
