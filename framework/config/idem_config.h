/*
 * idem_config.h - the configuration file (DESIGN.md section 3).
 *
 * idem_config_load() parses the INI file with inih (idem_config.c), checks
 * every key of the [server], [idempotency], [metrics] and [mysql] sections
 * against the key table of types, ranges and defaults
 * (idem_config_keys.c), and keeps the keys of every other section for the
 * plugin of that name.  Every problem is logged as "FILE:LINE: [section]
 * key: message" and parsing goes on, so one run reports them all.
 */
#ifndef IDEM_CONFIG_H
#define IDEM_CONFIG_H

#include <stdint.h>
#include <stdio.h>
#include "idemfcgi.h"
#include "idem_cidr.h"    /* [metrics] allow */
#include "idem_parse.h"   /* the scalars of the key table */

/*
 * The enumerations of [idempotency], each with one table of its names,
 * indexed by the enum: the key table parses them, the policy route
 * advertises them.  The __MAX counts are defines, not enumerators, so a
 * switch over the enum stays exhaustive.  (Log levels and formats:
 * idem_log.h.)
 */
typedef enum idem_key_format {
	IDEM_KEY_OPAQUE = 0,
	IDEM_KEY_UUID,
	IDEM_KEY_UUIDV7
} idem_key_format;
#define IDEM_KEY__MAX (IDEM_KEY_UUIDV7 + 1)
extern const char *const idem_key_format_names[IDEM_KEY__MAX];
/* The names of [server] path-source: path-info (0), request-uri (1). */
extern const char *const idem_path_source_names[2];
/* "refuse", "run": [idempotency] expired-keys */
extern const char *const idem_expired_keys_names[2];

/* [idempotency] key-status: the route GET policy-path/keys/{key} */
typedef enum idem_key_status_mode {
	IDEM_KEY_STATUS_AUTO = 0,   /* on unless scope = none */
	IDEM_KEY_STATUS_ON,         /* on, even with scope = none (keys are
	                             * then global: anyone asks any) */
	IDEM_KEY_STATUS_OFF,
	IDEM_KEY_STATUS__MAX
} idem_key_status_mode;
extern const char *const idem_key_status_names[IDEM_KEY_STATUS__MAX];

/* scope = header:NAME is IDEM_SCOPE_HEADER, named "header". */
typedef enum idem_scope_kind {
	IDEM_SCOPE_NONE = 0,
	IDEM_SCOPE_REMOTE_USER,
	IDEM_SCOPE_HEADER
} idem_scope_kind;
#define IDEM_SCOPE__MAX (IDEM_SCOPE_HEADER + 1)
extern const char *const idem_scope_names[IDEM_SCOPE__MAX];

typedef enum idem_store_kind {
	IDEM_STORE_MEMORY = 0,
	IDEM_STORE_MYSQL,
	IDEM_STORE_POSTGRES,
	IDEM_STORE_REDIS
} idem_store_kind;
#define IDEM_STORE__MAX (IDEM_STORE_REDIS + 1)

/* [postgres] sslmode: libpq's, by the same names */
typedef enum idem_pg_sslmode {
	IDEM_PG_SSL_DISABLE = 0,
	IDEM_PG_SSL_ALLOW,
	IDEM_PG_SSL_PREFER,
	IDEM_PG_SSL_REQUIRE,
	IDEM_PG_SSL_VERIFY_CA,
	IDEM_PG_SSL_VERIFY_FULL
} idem_pg_sslmode;
#define IDEM_PG_SSL__MAX (IDEM_PG_SSL_VERIFY_FULL + 1)
extern const char *const idem_pg_sslmode_names[IDEM_PG_SSL__MAX];

/* [redis] durability: what a reservation and a commit wait for before
 * the handler runs (and before the answer is sent) */
typedef enum idem_redis_durability {
	IDEM_REDIS_DURABLE_NONE = 0, /* the server's own (its appendfsync) */
	IDEM_REDIS_DURABLE_REPLICAS, /* WAIT: durability-replicas replicas
	                              * have the write */
	IDEM_REDIS_DURABLE_AOF       /* WAITAOF: the server's AOF fsynced
	                              * (and durability-replicas replicas'),
	                              * or appendfsync always on a server
	                              * without WAITAOF */
} idem_redis_durability;
#define IDEM_REDIS_DURABLE__MAX (IDEM_REDIS_DURABLE_AOF + 1)
extern const char *const idem_redis_durability_names[
    IDEM_REDIS_DURABLE__MAX];

/* The most requests one batched statement of a store carries ([mysql]
 * and [postgres] batch-rows). */
#define IDEM_BATCH_ROWS_MAX 64
extern const char *const idem_store_names[IDEM_STORE__MAX];

/* The names of idem_policy (idemfcgi.h), indexed by it: "default", "off",
 * "optional", "required". */
extern const char *const idem_policy_names[IDEM_POLICY_REQUIRED + 1];

/*
 * The keys of a route's own policy: a [route METHOD PATH] section sets
 * them, and so does a plugin in code (idem_route_set).  Their names are
 * the rows of the route key table (idem_config_keys.c,
 * idem_route_key_name); the keys that [idempotency] has too take their
 * type and range from its row.
 */
typedef enum idem_route_key {
	IDEM_RK_POLICY = 0,          /* policy: default|off|optional|required */
	IDEM_RK_KEY_FORMAT,
	IDEM_RK_LIFETIME,
	IDEM_RK_INFLIGHT_TTL,
	IDEM_RK_INFLIGHT_WAIT,
	IDEM_RK_COMMIT_STATUSES,
	IDEM_RK_FP_IGNORE,           /* fingerprint-ignore */
	IDEM_RK_FP_HEADERS,          /* fingerprint-headers */
	IDEM_RK_TOMBSTONE_LIFETIME,
	IDEM_RK_EXPIRED_KEYS,
	IDEM_RK_CALLS_OUTSIDE        /* calls-outside: true|false */
} idem_route_key;
#define IDEM_RK__MAX (IDEM_RK_CALLS_OUTSIDE + 1)

/* The values of a route's own policy: those whose bit is in set were
 * given; the others come from [idempotency]. */
typedef struct idem_route_conf {
	unsigned set;                  /* 1u << IDEM_RK_x for each key given */
	int policy;                    /* idem_policy */
	int key_format;                /* idem_key_format */
	uint64_t lifetime;             /* ms */
	uint64_t inflight_ttl;         /* ms */
	uint64_t inflight_wait;        /* ms */
	unsigned char commit_status[600];
	uint64_t tombstone_lifetime;   /* ms */
	int run_expired;               /* expired-keys = run */
	int calls_outside;             /* calls-outside: its handler calls
	                                * other services (DESIGN.md 2.7) */
	char **fp_ignore;              /* JSON Pointers (RFC 6901) of body
	                                * members left out of the
	                                * fingerprint: NULL-terminated, owned */
	size_t nfp_ignore;
	char **fp_headers;             /* request headers added to it, as
	                                * configured: NULL-terminated, owned */
	size_t nfp_headers;
} idem_route_conf;

/* A [route METHOD PATH] section of the file. */
typedef struct idem_route_section {
	char *method;                  /* owned */
	char *tmpl;                    /* owned: PATH, a route template */
	char *name;                    /* owned: "route METHOD PATH", for
	                                * messages */
	unsigned line;                 /* of the section's header */
	unsigned lines[IDEM_RK__MAX];  /* where each key was set; 0: not */
	idem_route_conf conf;
} idem_route_section;

/* One key = value of a plugin's section. */
typedef struct idem_config_entry {
	char *section;
	char *key;
	char *value;
	unsigned line;
	int used;          /* read by a plugin */
} idem_config_entry;

/* [server]: the process, its socket, its limits, its plugins, its logs */
typedef struct idem_config_server {
	char *listen;                  /* NULL: the socket on fd 0 */
	unsigned socket_mode;          /* unix socket permissions */
	unsigned workers;
	unsigned threads;
	unsigned max_connections;      /* FastCGI connections open at once,
	                                * per worker process */
	idem_cidr *allow_clients;      /* FastCGI peers accepted over TCP */
	size_t nallow_clients;
	uint64_t max_body;             /* bytes */
	unsigned max_headers;          /* HTTP_* params */
	uint64_t max_header_size;      /* bytes of one header value */
	uint64_t max_params_size;      /* bytes of all params */
	char *mount;                   /* "" or "/prefix" without trailing '/' */
	int path_from_uri;             /* path-source = request-uri */
	char **plugins;                /* NULL-terminated list of paths */
	size_t nplugins;
	uint64_t shutdown_grace;       /* ms */
	idem_log_level log_level;
	int log_json;                  /* log-format = json */
	char *policy_path;             /* GET route of the advertised
	                                * policy; NULL: none */
	char *ping_path;               /* GET route of liveness; NULL: none */
	char *openapi_path;            /* GET route of the OpenAPI document;
	                                * NULL: none */
	char *ready_path;              /* GET route of readiness (the store
	                                * answers); NULL: none */
	uint64_t slow_request;         /* ms a handler may run before it is
	                                * logged and counted; 0: never */
} idem_config_server;

/* [idempotency]: the protocol's defaults and which store keeps records */
typedef struct idem_config_idem {
	int enabled;
	idem_store_kind store;
	idem_key_format key_format;
	int required;
	uint64_t lifetime;             /* ms */
	uint64_t tombstone_lifetime;   /* ms a committed record's tombstone
	                                * is kept past its lifetime; 0: none */
	int run_expired;               /* expired-keys = run */
	int key_status;                /* idem_key_status_mode */
	uint64_t inflight_ttl;         /* ms */
	uint64_t inflight_wait;        /* ms */
	unsigned char commit_status[600]; /* 1 where a status is committed */
	unsigned conflict_status;
	idem_scope_kind scope;
	char *scope_header;            /* for IDEM_SCOPE_HEADER */
	uint64_t max_entries;
	uint64_t max_response;         /* bytes */
	uint64_t cleanup_interval;     /* ms */
	uint64_t abandon_after;        /* ms an in-flight record past its
	                                * lifetime stays unrenewed before it
	                                * is abandoned */
	struct idem_secret *key_secret; /* key-secret-file, read when the
	                                * config is; NULL: none (owned) */
	char **replay_omit;            /* response headers never stored for
	                                * replay besides the fixed ones:
	                                * NULL-terminated, owned */
	size_t nreplay_omit;
} idem_config_idem;

/* [mysql]: the MySQL store's database (and its plugins' data) */
typedef struct idem_config_mysql {
	char *host;               /* HOST[:PORT] ..., in failover order */
	unsigned port;
	char *socket;             /* or sockets, in failover order */
	char *user;
	char *password_file;
	char *database;
	unsigned pool_size;
	uint64_t connect_timeout; /* ms */
	uint64_t read_timeout;    /* ms */
	uint64_t write_timeout;   /* ms */
	int causal_reads;         /* wsrep_sync_wait on the reads that
	                                 * decide (Galera) */
	uint64_t failback;        /* ms between tries of the head of
	                                 * the host list */
	uint64_t replay_cache;    /* bytes of committed answers kept
	                                 * per process; 0: none */
	int batch;                /* group concurrent reservations and
	                                 * commits into one statement */
	unsigned batch_rows;      /* most requests in one statement */
} idem_config_mysql;

/* [postgres]: the PostgreSQL store's database */
typedef struct idem_config_postgres {
	char *host;               /* HOST[:PORT] ..., in failover order */
	unsigned port;
	char *user;
	char *password_file;
	char *database;
	unsigned pool_size;
	uint64_t connect_timeout; /* ms, each host */
	uint64_t read_timeout;    /* ms */
	uint64_t write_timeout;   /* ms */
	idem_pg_sslmode sslmode;
	uint64_t replay_cache;    /* bytes of committed answers kept
	                           * per process; 0: none */
	int batch;                /* group concurrent reservations and
	                           * commits into one statement */
	unsigned batch_rows;      /* most requests in one statement */
} idem_config_postgres;

/* [redis]: the Redis store's server, or cluster */
typedef struct idem_config_redis {
	char *host;               /* HOST[:PORT] ...: one server and its
	                           * stand-ins in failover order, or with
	                           * cluster the nodes asked for the
	                           * cluster's map */
	unsigned port;
	char *user;               /* an ACL user; NULL: "default" */
	char *password_file;
	unsigned database;        /* SELECT's; 0 under cluster */
	unsigned pool_size;       /* connections per server */
	uint64_t connect_timeout; /* ms, each host */
	uint64_t read_timeout;    /* ms */
	uint64_t write_timeout;   /* ms */
	int cluster;              /* a Redis Cluster: keys by slot */
	char *key_prefix;         /* of every key the store writes */
	idem_redis_durability durability;
	unsigned durability_replicas;
	uint64_t durability_timeout; /* ms */
	int batch;                /* pipeline concurrent reservations and
	                           * commits (outside a cluster) */
	unsigned batch_rows;      /* most requests in one pipeline */
} idem_config_redis;

/* [metrics]: the Prometheus page and the status route */
typedef struct idem_config_metrics {
	int enabled;
	char *path;
	idem_cidr *allow;              /* who may scrape, and ask the
	                                * ping, ready and status routes */
	size_t nallow;
	char *status_path;             /* GET route of the status JSON;
	                                * NULL: none */
} idem_config_metrics;

/* The whole file: one struct per core section (one key table still,
 * idem_config_keys.c), the [route] sections, the plugins' sections. */
typedef struct idem_config {
	char *path;                    /* the file name used in messages */
	idem_config_server server;
	idem_config_idem idem;
	idem_config_mysql mysql;
	idem_config_postgres postgres;
	idem_config_redis redis;
	idem_config_metrics metrics;

	/* the [route METHOD PATH] sections, in the order of the file */
	idem_route_section *routes;    /* owned */
	size_t nroutes;

	/* the sections of plugins */
	idem_config_entry *entries;
	size_t nentries;
	size_t capentries;
	idem_config_entry *asked;      /* keys plugins looked for (value
	                               * NULL): the suggestions for an
	                               * unknown key (owned) */
	size_t nasked;
	unsigned errors;               /* problems logged so far */
	unsigned store_errors;         /* of them, in [idempotency] or
	                                * [mysql] */

	/* set at run time, never from the file */
	int store_may_wait;            /* a MySQL database that cannot be
	                                * reached sets the store aside
	                                * (idem_store_is_aside) instead of
	                                * failing its open: the master's
	                                * start, --check */
	int store_aside;               /* the store opens set aside, without
	                                * trying its database: the workers of
	                                * a master waiting for it */
} idem_config;

/*
 * Reads and checks the file at path.  Returns IDEM_OK with *out set (caller
 * frees with idem_config_free), IDEM_ERR_IO when the file cannot be read,
 * IDEM_ERR_CONFIG when it has problems (all of them logged).
 */
idem_err idem_config_load(const char *path, idem_config **out);

/* The same for --check: a file with problems (logged) still gives *out
 * (cfg->errors counts them) with IDEM_ERR_CONFIG, so the later stages
 * can be checked too; the bad keys keep their defaults. */
idem_err idem_config_load_all(const char *path, idem_config **out);

/* The same, from a string in memory; name is used in messages. */
idem_err idem_config_load_string(const char *text, const char *name,
    idem_config **out);

/* A configuration with every default, as if from an empty file: each
 * key's default text parsed by the key table.  Returns IDEM_OK with *out
 * (caller frees with idem_config_free), IDEM_ERR_NOMEM, or IDEM_ERR_CONFIG
 * (logged) when a row of the table is wrong. */
idem_err idem_config_defaults(idem_config **out);

/* Frees cfg and everything it owns.  NULL is allowed. */
void idem_config_free(idem_config *cfg);

/*
 * After every plugin's setup: logs each key of a plugin section that no
 * plugin read, and each section that no plugin owns.  Returns IDEM_OK or
 * IDEM_ERR_CONFIG.  plugin_names is a NULL-terminated list.
 */
idem_err idem_config_check_unused(idem_config *cfg,
    const char *const *plugin_names);

/* Whether name is a core section ([server], [idempotency], [metrics],
 * [mysql]: the sections of the key table), which no plugin may take as
 * its name.  Returns 1 or 0. */
int idem_config_is_core_section(const char *name);

/* Finds a plugin key (not a core one); NULL when absent.  Marks it used,
 * and remembers key as one of that section's. */
idem_config_entry *idem_config_find(idem_config *cfg, const char *section,
    const char *key);

/*
 * The closest of candidates to word by edit distance (insertions,
 * deletions, substitutions and swaps of neighbours), when it differs in
 * at most a third of word's characters (at least one); NULL when none is
 * that close.  Used as "unknown key; did you mean X?".
 */
const char *idem_config_closest(const char *word,
    const char *const *candidates, size_t n);

/* Why store = postgres is refused by a build without the PostgreSQL
 * store. */
#define IDEM_WITHOUT_POSTGRES "this idemfcgi was built without the " \
	"PostgreSQL store (./configure --without-postgres)"

/* Why store = redis is refused by a build without the Redis store. */
#define IDEM_WITHOUT_REDIS "this idemfcgi was built without the Redis " \
	"store (./configure --without-redis)"

/* Why store = mysql is refused by a build without the MySQL store. */
#define IDEM_WITHOUT_MYSQL "this idemfcgi was built without the MySQL " \
	"store (./configure --without-mysql): use store = memory, or a " \
	"build with MySQL"

/* The stores with a database this build has, for messages that send an
 * operator to one: "store = mysql", or, in a build without any, why. */
const char *idem_config_db_stores(void);

/* Logs "FILE:LINE: [section] key: message" (without the parts that are
 * NULL) and counts the error. */
void idem_config_error(idem_config *cfg, unsigned line, const char *section,
    const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
