/*
 * iceberg.h - the Iceberg REST catalog plugin's shared state and helpers:
 * iceberg.c sets it up (config, routes, the error format, GET
 * /v1/config, the purger); ice_ns.c answers the namespace routes and
 * ice_table.c the table routes.
 */
#ifndef ICEBERG_H
#define ICEBERG_H

#include <pthread.h>
#include <stdint.h>

#include "idemfcgi_db.h"
#include "ice_cat.h"
#include "ice_files.h"
#include "ice_meta.h"

/* The most names a page holds, and what "all" is bounded by. */
#define ICE_PAGE_MAX 1000
#define ICE_LIST_ALL 100000

typedef struct iceberg {
	ice_cat *cat;             /* owned */
	ice_wh *wh;               /* owned */
	const char *prefix;       /* [iceberg] prefix, "" for none (borrowed
	                           * from the config) */
	char lifetime[40];        /* advertised, "" when keys are ignored */
	long long page_size;      /* the default page */
	uint64_t purge_interval;  /* ms between the purger's rounds */
	/* the purger (a worker's thread) */
	pthread_t purger;
	int purger_running;
	pthread_mutex_t purge_lock;
	pthread_cond_t purge_wake;
	int stopping;
} iceberg;

/*
 * Answers an Iceberg error: status, type ("NoSuchTableException") and a
 * message (printf).  Returns the error of answering (IDEM_OK when
 * answered).
 */
idem_err ice_fail(idem_response *res, int status, const char *type,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Answers 404 NoSuchNamespaceException for namespace key. */
idem_err ice_no_namespace(idem_response *res, const char *key);
/* Checks that namespace key of catalog prefix exists, locking it as lock
 * on tx.  Returns 0, or -1 after answering (404, 503) with *err the
 * error of answering. */
int ice_need_ns(iceberg *ib, ice_tx *tx, idem_response *res,
    const char *prefix, const char *key, ice_lock lock, idem_err *err);
/* Answers a failure of the catalog's storage (err): 503, retry. */
idem_err ice_unavailable(idem_response *res, idem_err err);
/* The catalog's prefix of req ("" or its {prefix}); NULL after a 400 in
 * res. */
const char *ice_prefix(const idem_request *req, idem_response *res,
    idem_err *err);
/* req's body as a JSON object (new reference); NULL after a 400 in res. */
json_t *ice_body(const idem_request *req, idem_response *res, idem_err *err);
/* The {namespace} of req as a key (caller frees); NULL after a 400. */
char *ice_ns_param(const idem_request *req, idem_response *res,
    idem_err *err);
/* Reads the paging of req's query into *after (caller frees; "" for the
 * first page) and *limit.  Returns 0, or -1 after a 400 in res. */
int ice_paging(const iceberg *ib, const idem_request *req,
    idem_response *res, idem_err *err, char **after, size_t *limit);
/* Sets "next-page-token" of doc: the token after the last of l when more
 * follow, else null (only when paged). */
void ice_next_token(json_t *doc, const ice_list *l, int paged);
/* Now, in ms since the epoch. */
int64_t ice_now_ms(void);

/* Names the catalog's schemas in the OpenAPI document and describes its
 * routes (ice_openapi.c).  Returns IDEM_OK or the API's error. */
idem_err ice_openapi_describe(idem_app *app);

/* The route handlers: namespaces (ice_ns.c), tables (ice_table.c). */
idem_err ice_ns_list(const idem_request *, idem_response *, void *);
idem_err ice_ns_create(const idem_request *, idem_response *, void *);
idem_err ice_ns_load(const idem_request *, idem_response *, void *);
idem_err ice_ns_exists(const idem_request *, idem_response *, void *);
idem_err ice_ns_props(const idem_request *, idem_response *, void *);
idem_err ice_ns_drop(const idem_request *, idem_response *, void *);
idem_err ice_tbl_list(const idem_request *, idem_response *, void *);
idem_err ice_tbl_create(const idem_request *, idem_response *, void *);
idem_err ice_tbl_load(const idem_request *, idem_response *, void *);
idem_err ice_tbl_exists(const idem_request *, idem_response *, void *);
idem_err ice_tbl_commit(const idem_request *, idem_response *, void *);
idem_err ice_tbl_drop(const idem_request *, idem_response *, void *);
idem_err ice_tbl_rename(const idem_request *, idem_response *, void *);
idem_err ice_tbl_register(const idem_request *, idem_response *, void *);
idem_err ice_tbl_metrics(const idem_request *, idem_response *, void *);
idem_err ice_tx_commit(const idem_request *, idem_response *, void *);

#endif /* ICEBERG_H */
