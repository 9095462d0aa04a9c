/*
 * idem_config_keys.c - the keys of [server], [idempotency], [metrics] and
 * [mysql]: one table of rows (their value types are in idem_config_value.c)
 * and the names of the config's enumerations.
 */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "idem_config_keys.h"
#include "idem_config_value.h"
#include "idem_log.h"

/* ------------------------------------------------ names of enumerations */

const char *const idem_key_format_names[IDEM_KEY__MAX] = {
	[IDEM_KEY_OPAQUE] = "opaque",
	[IDEM_KEY_UUID] = "uuid",
	[IDEM_KEY_UUIDV7] = "uuidv7",
};

const char *const idem_path_source_names[2] = { "path-info",
    "request-uri" };

const char *const idem_expired_keys_names[2] = { "refuse", "run" };

const char *const idem_key_status_names[IDEM_KEY_STATUS__MAX] = {
	[IDEM_KEY_STATUS_AUTO] = "auto",
	[IDEM_KEY_STATUS_ON] = "on",
	[IDEM_KEY_STATUS_OFF] = "off",
};

const char *const idem_scope_names[IDEM_SCOPE__MAX] = {
	[IDEM_SCOPE_NONE] = "none",
	[IDEM_SCOPE_REMOTE_USER] = "remote-user",
	[IDEM_SCOPE_HEADER] = "header",
};

const char *const idem_policy_names[IDEM_POLICY_REQUIRED + 1] = {
	[IDEM_POLICY_DEFAULT] = "default",
	[IDEM_POLICY_OFF] = "off",
	[IDEM_POLICY_OPTIONAL] = "optional",
	[IDEM_POLICY_REQUIRED] = "required",
};

const char *const idem_store_names[IDEM_STORE__MAX] = {
	[IDEM_STORE_MEMORY] = "memory",
	[IDEM_STORE_MYSQL] = "mysql",
	[IDEM_STORE_POSTGRES] = "postgres",
	[IDEM_STORE_REDIS] = "redis",
};

const char *const idem_redis_durability_names[IDEM_REDIS_DURABLE__MAX] = {
	[IDEM_REDIS_DURABLE_NONE] = "none",
	[IDEM_REDIS_DURABLE_REPLICAS] = "replicas",
	[IDEM_REDIS_DURABLE_AOF] = "aof",
};

const char *const idem_pg_sslmode_names[IDEM_PG_SSL__MAX] = {
	[IDEM_PG_SSL_DISABLE] = "disable",
	[IDEM_PG_SSL_ALLOW] = "allow",
	[IDEM_PG_SSL_PREFER] = "prefer",
	[IDEM_PG_SSL_REQUIRE] = "require",
	[IDEM_PG_SSL_VERIFY_CA] = "verify-ca",
	[IDEM_PG_SSL_VERIFY_FULL] = "verify-full",
};

/* An enumeration's field is set as an int. */
_Static_assert(sizeof(idem_key_format) == sizeof(int) &&
    sizeof(idem_scope_kind) == sizeof(int) &&
    sizeof(idem_store_kind) == sizeof(int) &&
    sizeof(idem_pg_sslmode) == sizeof(int) &&
    sizeof(idem_log_level) == sizeof(int), "enums are ints");

/* ------------------------------------------------------------ the table */

/* The field f of idem_config: where it is and its size. */
#define FIELD(f) .offset = offsetof(idem_config, f), \
	.size = sizeof(((idem_config *)0)->f)
#define DAY_MS (86400000ULL)
/* The value type x (idem_config_value.h). */
#define T(x) (&idem_kt_##x)

static const idem_key_def keys[] = {
	{ "server", "listen", T(listen), FIELD(server.listen) },
	{ "server", "socket-mode", T(mode), FIELD(server.socket_mode),
	    .def = "0660" },
	{ "server", "workers", T(uint), FIELD(server.workers), .min = 1, .max = 256,
	    .def = "1" },
	{ "server", "threads", T(uint), FIELD(server.threads), .min = 1, .max = 1024,
	    .def = "8" },
	{ "server", "max-connections", T(uint), FIELD(server.max_connections),
	    .min = 1, .max = 65536, .def = "1024" },
	{ "server", "allow-clients", T(blocks), FIELD(server.allow_clients),
	    .aux = offsetof(idem_config, server.nallow_clients),
	    .def = "127.0.0.0/8 ::1" },
	{ "server", "max-body", T(size), FIELD(server.max_body), .min = 0,
	    .max = 1ULL << 31, .def = "1m" },
	{ "server", "max-headers", T(uint), FIELD(server.max_headers), .min = 1,
	    .max = 10000, .def = "100" },
	{ "server", "max-header-size", T(size), FIELD(server.max_header_size),
	    .min = 64, .max = 1ULL << 20, .def = "8k" },
	{ "server", "max-params-size", T(size), FIELD(server.max_params_size),
	    .min = 1024, .max = 16ULL << 20, .def = "64k" },
	{ "server", "mount", T(mount), FIELD(server.mount), .def = "" },
	{ "server", "path-source", T(enum), FIELD(server.path_from_uri),
	    .names = idem_path_source_names, .max = 1, .def = "path-info" },
	{ "server", "plugins", T(words), FIELD(server.plugins),
	    .aux = offsetof(idem_config, server.nplugins) },
	{ "server", "shutdown-grace", T(duration), FIELD(server.shutdown_grace),
	    .min = 0, .max = 3600000, .def = "30s" },
	{ "server", "log-level", T(enum), FIELD(server.log_level),
	    .names = idem_log_level_names, .max = IDEM_LOG__MAX - 1,
	    .nocase = 1, .def = "info" },
	{ "server", "log-format", T(enum), FIELD(server.log_json),
	    .names = idem_log_format_names, .max = IDEM_LOG_FORMAT__MAX - 1,
	    .def = "text" },
	{ "server", "policy-path", T(route_path), FIELD(server.policy_path),
	    .off = 1, .def = "/idempotency" },
	{ "server", "ping-path", T(route_path), FIELD(server.ping_path), .off = 1 },
	{ "server", "openapi-path", T(route_path), FIELD(server.openapi_path),
	    .off = 1 },
	{ "server", "ready-path", T(route_path), FIELD(server.ready_path), .off = 1 },
	{ "server", "slow-request", T(duration), FIELD(server.slow_request),
	    .min = 0, .max = 86400000, .def = "0" },

	{ "idempotency", "enabled", T(bool), FIELD(idem.enabled),
	    .def = "true" },
	{ "idempotency", "store", T(enum), FIELD(idem.store),
	    .names = idem_store_names, .max = IDEM_STORE__MAX - 1,
	    .def = "memory" },
	{ "idempotency", "key-format", T(enum), FIELD(idem.key_format),
	    .names = idem_key_format_names, .max = IDEM_KEY__MAX - 1,
	    .def = "opaque" },
	{ "idempotency", "required", T(bool), FIELD(idem.required), .def = "true" },
	{ "idempotency", "lifetime", T(duration), FIELD(idem.lifetime),
	    .min = 1000, .max = 3650 * DAY_MS, .def = "24h" },
	{ "idempotency", "tombstone-lifetime", T(duration),
	    FIELD(idem.tombstone_lifetime), .min = 0, .max = 3650 * DAY_MS,
	    .def = "30d" },
	{ "idempotency", "expired-keys", T(enum), FIELD(idem.run_expired),
	    .names = idem_expired_keys_names, .max = 1, .def = "refuse" },
	{ "idempotency", "key-status", T(enum), FIELD(idem.key_status),
	    .names = idem_key_status_names, .max = IDEM_KEY_STATUS__MAX - 1,
	    .def = "auto" },
	{ "idempotency", "inflight-ttl", T(duration), FIELD(idem.inflight_ttl),
	    .min = 100, .max = DAY_MS, .def = "30s" },
	{ "idempotency", "inflight-wait", T(duration), FIELD(idem.inflight_wait),
	    .min = 0, .max = 600000, .def = "0" },
	{ "idempotency", "commit-statuses", T(statuses), FIELD(idem.commit_status),
	    .def = "2xx 400 404 409 422" },
	{ "idempotency", "conflict-status", T(uint), FIELD(idem.conflict_status),
	    .min = 400, .max = 499, .def = "409" },
	{ "idempotency", "scope", T(scope), FIELD(idem.scope),
	    .aux = offsetof(idem_config, idem.scope_header), .def = "none" },
	{ "idempotency", "max-entries", T(u64), FIELD(idem.max_entries), .min = 1,
	    .max = 100000000, .def = "100000" },
	{ "idempotency", "max-response", T(size), FIELD(idem.max_response),
	    .min = 0, .max = 16ULL << 20, .def = "1m" },
	{ "idempotency", "cleanup-interval", T(duration),
	    FIELD(idem.cleanup_interval), .min = 1000, .max = DAY_MS, .def = "5m" },
	{ "idempotency", "abandon-after", T(duration), FIELD(idem.abandon_after),
	    .min = 1000, .max = 3650 * DAY_MS, .def = "24h" },
	{ "idempotency", "replay-omit-headers", T(headers), FIELD(idem.replay_omit),
	    .aux = offsetof(idem_config, idem.nreplay_omit) },
	{ "idempotency", "key-secret-file", T(secret), FIELD(idem.key_secret) },

	{ "metrics", "enabled", T(bool), FIELD(metrics.enabled),
	    .def = "false" },
	{ "metrics", "path", T(route_path), FIELD(metrics.path),
	    .def = "/metrics" },
	{ "metrics", "allow", T(blocks), FIELD(metrics.allow),
	    .aux = offsetof(idem_config, metrics.nallow),
	    .def = "127.0.0.1 ::1" },
	{ "metrics", "status-path", T(route_path), FIELD(metrics.status_path),
	    .off = 1 },

	{ "mysql", "host", T(hosts), FIELD(mysql.host), .def = "127.0.0.1" },
	{ "mysql", "port", T(uint), FIELD(mysql.port), .min = 1, .max = 65535,
	    .def = "3306" },
	{ "mysql", "socket", T(sockets), FIELD(mysql.socket) },
	{ "mysql", "user", T(string), FIELD(mysql.user) },
	{ "mysql", "password-file", T(string), FIELD(mysql.password_file) },
	{ "mysql", "database", T(string), FIELD(mysql.database) },
	{ "mysql", "pool-size", T(uint), FIELD(mysql.pool_size), .min = 1,
	    .max = 1024, .def = "8" },
	{ "mysql", "connect-timeout", T(duration),
	    FIELD(mysql.connect_timeout), .min = 1, .max = 3600000,
	    .def = "2s" },
	{ "mysql", "read-timeout", T(duration), FIELD(mysql.read_timeout),
	    .min = 1000, .max = 3600000, .def = "5s" },
	{ "mysql", "write-timeout", T(duration), FIELD(mysql.write_timeout),
	    .min = 1000, .max = 3600000, .def = "5s" },
	{ "mysql", "causal-reads", T(bool), FIELD(mysql.causal_reads),
	    .def = "false" },
	{ "mysql", "failback", T(duration), FIELD(mysql.failback),
	    .min = 1000, .max = 86400000, .def = "30s" },
	{ "mysql", "replay-cache", T(size), FIELD(mysql.replay_cache),
	    .min = 0, .max = 1ULL << 40, .def = "8m" },
	{ "mysql", "batch", T(bool), FIELD(mysql.batch), .def = "true" },
	{ "mysql", "batch-rows", T(uint), FIELD(mysql.batch_rows), .min = 2,
	    .max = IDEM_BATCH_ROWS_MAX, .def = "16" },

	{ "postgres", "host", T(hosts), FIELD(postgres.host),
	    .def = "127.0.0.1" },
	{ "postgres", "port", T(uint), FIELD(postgres.port), .min = 1,
	    .max = 65535, .def = "5432" },
	{ "postgres", "user", T(string), FIELD(postgres.user) },
	{ "postgres", "password-file", T(string),
	    FIELD(postgres.password_file) },
	{ "postgres", "database", T(string), FIELD(postgres.database) },
	{ "postgres", "pool-size", T(uint), FIELD(postgres.pool_size),
	    .min = 1, .max = 1024, .def = "8" },
	{ "postgres", "connect-timeout", T(duration),
	    FIELD(postgres.connect_timeout), .min = 1, .max = 3600000,
	    .def = "2s" },
	{ "postgres", "read-timeout", T(duration),
	    FIELD(postgres.read_timeout), .min = 1000, .max = 3600000,
	    .def = "5s" },
	{ "postgres", "write-timeout", T(duration),
	    FIELD(postgres.write_timeout), .min = 1000, .max = 3600000,
	    .def = "5s" },
	{ "postgres", "sslmode", T(enum), FIELD(postgres.sslmode),
	    .names = idem_pg_sslmode_names, .max = IDEM_PG_SSL__MAX - 1,
	    .def = "prefer" },
	{ "postgres", "replay-cache", T(size), FIELD(postgres.replay_cache),
	    .min = 0, .max = 1ULL << 40, .def = "8m" },
	{ "postgres", "batch", T(bool), FIELD(postgres.batch), .def = "true" },
	{ "postgres", "batch-rows", T(uint), FIELD(postgres.batch_rows),
	    .min = 2, .max = IDEM_BATCH_ROWS_MAX, .def = "16" },

	{ "redis", "host", T(hosts), FIELD(redis.host), .def = "127.0.0.1" },
	{ "redis", "port", T(uint), FIELD(redis.port), .min = 1, .max = 65535,
	    .def = "6379" },
	{ "redis", "user", T(string), FIELD(redis.user) },
	{ "redis", "password-file", T(string), FIELD(redis.password_file) },
	{ "redis", "database", T(uint), FIELD(redis.database), .min = 0,
	    .max = 65535, .def = "0" },
	{ "redis", "pool-size", T(uint), FIELD(redis.pool_size), .min = 1,
	    .max = 1024, .def = "8" },
	{ "redis", "connect-timeout", T(duration),
	    FIELD(redis.connect_timeout), .min = 1, .max = 3600000,
	    .def = "2s" },
	{ "redis", "read-timeout", T(duration), FIELD(redis.read_timeout),
	    .min = 100, .max = 3600000, .def = "5s" },
	{ "redis", "write-timeout", T(duration), FIELD(redis.write_timeout),
	    .min = 100, .max = 3600000, .def = "5s" },
	{ "redis", "cluster", T(bool), FIELD(redis.cluster), .def = "false" },
	{ "redis", "key-prefix", T(string), FIELD(redis.key_prefix),
	    .def = "idemfcgi:" },
	{ "redis", "durability", T(enum), FIELD(redis.durability),
	    .names = idem_redis_durability_names,
	    .max = IDEM_REDIS_DURABLE__MAX - 1, .def = "none" },
	{ "redis", "durability-replicas", T(uint),
	    FIELD(redis.durability_replicas), .min = 0, .max = 64,
	    .def = "1" },
	{ "redis", "durability-timeout", T(duration),
	    FIELD(redis.durability_timeout), .min = 1, .max = 60000,
	    .def = "1s" },
	{ "redis", "batch", T(bool), FIELD(redis.batch), .def = "true" },
	{ "redis", "batch-rows", T(uint), FIELD(redis.batch_rows), .min = 2,
	    .max = IDEM_BATCH_ROWS_MAX, .def = "16" },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* The field f of idem_route_conf. */
#define RFIELD(f) .offset = offsetof(idem_route_conf, f), \
	.size = sizeof(((idem_route_conf *)0)->f)

/* The keys of a route's own policy, by idem_route_key.  A row of section
 * "idempotency" and no type takes the type, range and names of that
 * section's key of the same name, so a value is checked as there. */
static const idem_key_def route_keys[IDEM_RK__MAX] = {
	[IDEM_RK_POLICY] = { "route", "policy", T(enum), RFIELD(policy),
	    .names = idem_policy_names, .max = IDEM_POLICY_REQUIRED },
	[IDEM_RK_KEY_FORMAT] = { "idempotency", "key-format", NULL,
	    RFIELD(key_format) },
	[IDEM_RK_LIFETIME] = { "idempotency", "lifetime", NULL,
	    RFIELD(lifetime) },
	[IDEM_RK_INFLIGHT_TTL] = { "idempotency", "inflight-ttl", NULL,
	    RFIELD(inflight_ttl) },
	[IDEM_RK_INFLIGHT_WAIT] = { "idempotency", "inflight-wait", NULL,
	    RFIELD(inflight_wait) },
	[IDEM_RK_COMMIT_STATUSES] = { "idempotency", "commit-statuses", NULL,
	    RFIELD(commit_status) },
	[IDEM_RK_FP_IGNORE] = { "route", "fingerprint-ignore", T(pointers),
	    RFIELD(fp_ignore), .aux = offsetof(idem_route_conf, nfp_ignore) },
	[IDEM_RK_FP_HEADERS] = { "route", "fingerprint-headers", T(headers),
	    RFIELD(fp_headers), .aux = offsetof(idem_route_conf, nfp_headers) },
	[IDEM_RK_TOMBSTONE_LIFETIME] = { "idempotency", "tombstone-lifetime",
	    NULL, RFIELD(tombstone_lifetime) },
	[IDEM_RK_EXPIRED_KEYS] = { "idempotency", "expired-keys", NULL,
	    RFIELD(run_expired) },
	[IDEM_RK_CALLS_OUTSIDE] = { "route", "calls-outside", T(bool),
	    RFIELD(calls_outside) },
};
_Static_assert(NKEYS <= IDEM_CONFIG_MAX_KEYS, "raise IDEM_CONFIG_MAX_KEYS");

/* ------------------------------------------------------ using the table */

/* The row of [section] key.  Returns its index or -1. */
int
idem_config_key_index(const char *section, const char *key)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].section, section) == 0 &&
		    strcmp(keys[i].key, key) == 0)
			return (int)i;
	return -1;
}

/* The key and section of row i, or NULL past the table. */
const char *
idem_config_key_at(size_t i, const char **section)
{
	if (i >= NKEYS)
		return NULL;
	*section = keys[i].section;
	return keys[i].key;
}

/* Whether row i is a list.  Returns 1 or 0 (also for no such row). */
int
idem_config_key_is_list(int i)
{
	return i >= 0 && (size_t)i < NKEYS && keys[i].type->list;
}

/* The i-th distinct section of the table, or NULL. */
const char *
idem_config_core_section(size_t i)
{
	size_t k, j;

	for (k = 0; k < NKEYS; k++) {
		for (j = 0; j < k; j++)
			if (strcmp(keys[j].section, keys[k].section) == 0)
				break;
		if (j == k && i-- == 0)
			return keys[k].section;
	}
	return NULL;
}

/* Whether name is a section of the table.  Returns 1 or 0. */
int
idem_config_is_core_section(const char *name)
{
	size_t i;

	for (i = 0; name != NULL && i < NKEYS; i++)
		if (strcmp(keys[i].section, name) == 0)
			return 1;
	return 0;
}

/* Fills *a for row i of cfg. */
static void
arg_of(idem_key_arg *a, idem_config *cfg, int i, int continued, char *why,
    size_t size)
{
	const idem_key_def *d = &keys[i];

	a->cfg = cfg;
	a->def = d;
	a->field = (char *)cfg + d->offset;
	a->aux = d->aux != 0 ? (char *)cfg + d->aux : NULL;
	a->continued = continued;
	a->why = why;
	a->whysize = size;
}

/* Parses v into row i.  Returns NULL or why not. */
const char *
idem_config_key_set(idem_config *cfg, int i, const char *v, int continued,
    char *why, size_t size)
{
	idem_key_arg a;

	if (i < 0 || (size_t)i >= NKEYS)
		return "not a key of the table";
	arg_of(&a, cfg, i, continued, why, size);
	return keys[i].type->parse(&a, v);
}

/* Parses every row's default into cfg.  Returns IDEM_OK, IDEM_ERR_NOMEM or
 * IDEM_ERR_CONFIG (a bad row, logged). */
idem_err
idem_config_keys_defaults(idem_config *cfg)
{
	char why[256];
	const char *bad;
	size_t i;

	for (i = 0; i < NKEYS; i++) {
		const idem_key_def *d = &keys[i];

		if (d->size != d->type->size || (d->type->aux && d->aux == 0) ||
		    (d->type == &idem_kt_enum && d->names == NULL)) {
			idem_config_error(cfg, 0, d->section, d->key, "the key "
			    "table gives a field of the wrong kind");
			return IDEM_ERR_CONFIG;
		}
		if (d->def == NULL)
			continue;
		bad = idem_config_key_set(cfg, (int)i, d->def, 0, why,
		    sizeof(why));
		if (bad == idem_key_oom)
			return IDEM_ERR_NOMEM;
		if (bad != NULL) {
			idem_config_error(cfg, 0, d->section, d->key, "bad "
			    "default \"%s\": %s", d->def, bad);
			return IDEM_ERR_CONFIG;
		}
	}
	return IDEM_OK;
}

/* The line where [section] key was set (0: it was not). */
static unsigned
seen_line(const unsigned *seen, const char *section, const char *key)
{
	int i = idem_config_key_index(section, key);

	return i >= 0 ? seen[i] : 0;
}

/* Refuses a store with a database (cfg's, its section named after it)
 * whose section lacks user or database, at the store line line. */
static void
needs_login(idem_config *cfg, unsigned line, const char *user,
    const char *database)
{
	const char *name = idem_store_names[cfg->idem.store];

	if (user == NULL)
		idem_config_error(cfg, line, name, "user", "store = %s needs a "
		    "user", name);
	if (database == NULL)
		idem_config_error(cfg, line, name, "database", "store = %s "
		    "needs a database", name);
}

/* The [redis] section's combinations: a key prefix that cannot hold a
 * hash tag's braces, SELECT under cluster, durability's replicas. */
static void
redis_check(idem_config *cfg, const unsigned seen[IDEM_CONFIG_MAX_KEYS])
{
	const idem_config_redis *r = &cfg->redis;

	if (r->key_prefix != NULL && strpbrk(r->key_prefix, "{}") != NULL)
		idem_config_error(cfg, seen_line(seen, "redis", "key-prefix"),
		    "redis", "key-prefix", "'{' and '}' would change the hash "
		    "tag that keeps a record and its index on one slot");
	if (r->cluster && r->database != 0)
		idem_config_error(cfg, seen_line(seen, "redis", "database"),
		    "redis", "database", "a Redis Cluster has database 0 only");
	if (r->durability == IDEM_REDIS_DURABLE_REPLICAS &&
	    r->durability_replicas == 0)
		idem_config_error(cfg, seen_line(seen, "redis",
		    "durability-replicas"), "redis", "durability-replicas",
		    "durability = replicas waits for at least one replica");
}

/* Checks combinations of keys; each problem is logged. */
void
idem_config_keys_check(idem_config *cfg,
    const unsigned seen[IDEM_CONFIG_MAX_KEYS])
{
	if (cfg->server.workers > 1 && cfg->idem.enabled &&
	    cfg->idem.store == IDEM_STORE_MEMORY)
		idem_config_error(cfg, seen_line(seen, "server", "workers"),
		    "server", "workers", "workers > 1 needs a store with a "
		    "database (%s): a memory store is per process, and a retry "
		    "that reaches another worker would run again",
		    idem_config_db_stores());
	if (cfg->server.max_connections < cfg->server.threads)
		idem_config_error(cfg, seen_line(seen, "server",
		    "max-connections") != 0 ? seen_line(seen, "server",
		    "max-connections") : seen_line(seen, "server", "threads"),
		    "server", "max-connections", "max-connections (%u) is below "
		    "threads (%u): threads beyond the connections would never "
		    "serve", cfg->server.max_connections, cfg->server.threads);
	if (cfg->metrics.enabled && cfg->server.policy_path != NULL &&
	    strcmp(cfg->metrics.path, cfg->server.policy_path) == 0)
		idem_config_error(cfg, seen_line(seen, "metrics", "path"),
		    "metrics", "path", "the same path as [server] policy-path");
	if (!cfg->metrics.enabled && cfg->metrics.status_path != NULL)
		idem_config_error(cfg, seen_line(seen, "metrics",
		    "status-path"), "metrics", "status-path", "the status route "
		    "reads the counters of [metrics]: set enabled = true");
#ifndef HAVE_MYSQL
	if (cfg->idem.store == IDEM_STORE_MYSQL && cfg->idem.enabled)
		idem_config_error(cfg, seen_line(seen, "idempotency", "store"),
		    "idempotency", "store", "store = mysql: %s",
		    IDEM_WITHOUT_MYSQL);
#endif
#ifndef HAVE_POSTGRES
	if (cfg->idem.store == IDEM_STORE_POSTGRES && cfg->idem.enabled)
		idem_config_error(cfg, seen_line(seen, "idempotency", "store"),
		    "idempotency", "store", "store = postgres: %s",
		    IDEM_WITHOUT_POSTGRES);
#endif
#ifndef HAVE_REDIS
	if (cfg->idem.store == IDEM_STORE_REDIS && cfg->idem.enabled)
		idem_config_error(cfg, seen_line(seen, "idempotency", "store"),
		    "idempotency", "store", "store = redis: %s",
		    IDEM_WITHOUT_REDIS);
#endif
	redis_check(cfg, seen);
	if (cfg->idem.store == IDEM_STORE_POSTGRES && cfg->idem.enabled)
		needs_login(cfg, seen_line(seen, "idempotency", "store"),
		    cfg->postgres.user, cfg->postgres.database);
	if (cfg->idem.store == IDEM_STORE_MYSQL && cfg->idem.enabled)
		needs_login(cfg, seen_line(seen, "idempotency", "store"),
		    cfg->mysql.user, cfg->mysql.database);
}

/* ------------------------------------------------ the keys of a route */

int
idem_route_key_index(const char *key)
{
	int k;

	for (k = 0; k < IDEM_RK__MAX; k++)
		if (strcmp(route_keys[k].key, key) == 0)
			return k;
	return -1;
}

const char *
idem_route_key_name(int k)
{
	return k >= 0 && k < IDEM_RK__MAX ? route_keys[k].key : NULL;
}

/* The row that says how route key k is parsed: its own, or the
 * [idempotency] row it names. */
static const idem_key_def *
route_key_def(int k)
{
	int i;

	if (route_keys[k].type != NULL)
		return &route_keys[k];
	i = idem_config_key_index(route_keys[k].section, route_keys[k].key);
	return i >= 0 ? &keys[i] : NULL;
}

int
idem_route_key_is_list(int k)
{
	const idem_key_def *d = k >= 0 && k < IDEM_RK__MAX ? route_key_def(k) :
	    NULL;

	return d != NULL && d->type->list;
}

/* Fills *a for route key k of rc. */
static const idem_key_def *
route_arg_of(idem_key_arg *a, idem_route_conf *rc, int k, int continued,
    char *why, size_t size)
{
	const idem_key_def *d = route_key_def(k);

	memset(a, 0, sizeof(*a));
	a->def = d;
	a->field = (char *)rc + route_keys[k].offset;
	a->aux = route_keys[k].aux != 0 ? (char *)rc + route_keys[k].aux : NULL;
	a->continued = continued;
	a->why = why;
	a->whysize = size;
	return d;
}

const char *
idem_route_key_set(idem_route_conf *rc, int k, const char *v, int continued,
    char *why, size_t size)
{
	const idem_key_def *d;
	idem_key_arg a;
	const char *bad;

	if (k < 0 || k >= IDEM_RK__MAX)
		return "not a key of a route";
	d = route_arg_of(&a, rc, k, continued, why, size);
	if (d == NULL || d->type->size != route_keys[k].size ||
	    (d->type->aux && route_keys[k].aux == 0))
		return "the route key table gives a field of the wrong kind";
	if ((bad = d->type->parse(&a, v)) == NULL)
		rc->set |= 1u << k;
	return bad;
}

void
idem_route_conf_clear(idem_route_conf *rc)
{
	idem_key_arg a;
	int k;

	for (k = 0; k < IDEM_RK__MAX; k++) {
		const idem_key_def *d = route_arg_of(&a, rc, k, 0, NULL, 0);
		if (d != NULL && d->type->release != NULL)
			d->type->release(&a);
	}
	memset(rc, 0, sizeof(*rc));
}

/* Frees what each row's field owns. */
void
idem_config_keys_free(idem_config *cfg)
{
	idem_key_arg a;
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (keys[i].type->release != NULL) {
			arg_of(&a, cfg, (int)i, 0, NULL, 0);
			keys[i].type->release(&a);
		}
	for (i = 0; i < cfg->nroutes; i++) {
		idem_route_section *rs = &cfg->routes[i];
		free(rs->method);
		free(rs->tmpl);
		free(rs->name);
		idem_route_conf_clear(&rs->conf);
	}
	free(cfg->routes);
	cfg->routes = NULL;
	cfg->nroutes = 0;
}
