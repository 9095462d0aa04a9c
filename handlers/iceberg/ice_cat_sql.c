/*
 * ice_cat_sql.c - the catalog in the store's database (MySQL or
 * PostgreSQL), through the data API (idemfcgi_db.h): the tables
 * iceberg_namespaces, iceberg_tables and iceberg_purges.  A mutation runs
 * in its request's transaction (the catalog's routes are transactional),
 * so the catalog changes exactly when the answer is stored.  Statements
 * that may meet an existing row never fail for it (INSERT IGNORE, ON
 * CONFLICT DO NOTHING: a failed statement aborts a PostgreSQL
 * transaction); reads that decide a change are locking reads, which see
 * the latest committed rows under MySQL's REPEATABLE READ too.
 */
#include <stdlib.h>
#include <string.h>

#include "ice_cat.h"
#include "ice_ident.h"

enum {
	Q_NS_CREATE, Q_NS_GET, Q_NS_GET_SHARE, Q_NS_GET_UPDATE, Q_NS_SET,
	Q_NS_DROP, Q_NS_CHILD, Q_NS_TABLE, Q_NS_LIST,
	Q_TBL_GET, Q_TBL_GET_SHARE, Q_TBL_GET_UPDATE, Q_TBL_CREATE, Q_TBL_SET,
	Q_TBL_DROP, Q_TBL_LIST,
	Q_PURGE_ADD, Q_PURGE_NEXT, Q_PURGE_DONE,
	Q_DIR_TABLE, Q_DIR_TABLE_UNDER, Q_DIR_PURGE, Q_DIR_PURGE_UNDER,
	NQ
};

#define NS_GET "SELECT props FROM iceberg_namespaces WHERE prefix = ? AND " \
	"ns = ?"
#define TBL_GET "SELECT location, metadata FROM iceberg_tables WHERE " \
	"prefix = ? AND ns = ? AND name = ?"
#define NS_CHILD "SELECT 1 FROM iceberg_namespaces WHERE prefix = ? AND " \
	"parent = ? LIMIT 1"
#define NS_TABLE "SELECT 1 FROM iceberg_tables WHERE prefix = ? AND ns = ? " \
	"LIMIT 1"
#define DIR_TABLE "SELECT 1 FROM iceberg_tables WHERE dir = ? LIMIT 1"
#define DIR_TABLE_UNDER "SELECT 1 FROM iceberg_tables WHERE dir >= ? AND " \
	"dir < ? LIMIT 1"
#define DIR_PURGE "SELECT 1 FROM iceberg_purges WHERE dir = ? LIMIT 1"
#define DIR_PURGE_UNDER "SELECT 1 FROM iceberg_purges WHERE dir >= ? AND " \
	"dir < ? LIMIT 1"
#define COMMON \
	[Q_NS_GET] = NS_GET, \
	[Q_NS_GET_UPDATE] = NS_GET " FOR UPDATE", \
	[Q_NS_SET] = "UPDATE iceberg_namespaces SET props = ? WHERE prefix = ? " \
	    "AND ns = ?", \
	[Q_NS_DROP] = "DELETE FROM iceberg_namespaces WHERE prefix = ? AND " \
	    "ns = ?", \
	[Q_NS_LIST] = "SELECT ns FROM iceberg_namespaces WHERE prefix = ? AND " \
	    "parent = ? AND ns > ? ORDER BY ns LIMIT ?", \
	[Q_TBL_GET] = TBL_GET, \
	[Q_TBL_GET_UPDATE] = TBL_GET " FOR UPDATE", \
	[Q_TBL_SET] = "UPDATE iceberg_tables SET dir = ?, location = ?, " \
	    "metadata = ? WHERE prefix = ? AND ns = ? AND name = ?", \
	[Q_TBL_DROP] = "DELETE FROM iceberg_tables WHERE prefix = ? AND " \
	    "ns = ? AND name = ?", \
	[Q_TBL_LIST] = "SELECT name FROM iceberg_tables WHERE prefix = ? AND " \
	    "ns = ? AND name > ? ORDER BY name LIMIT ?", \
	[Q_PURGE_NEXT] = "SELECT dir FROM iceberg_purges ORDER BY dir " \
	    "LIMIT ?", \
	[Q_PURGE_DONE] = "DELETE FROM iceberg_purges WHERE dir = ?", \
	[Q_DIR_TABLE] = DIR_TABLE, \
	[Q_DIR_TABLE_UNDER] = DIR_TABLE_UNDER

static const char *const mysql_sql[NQ] = {
	COMMON,
	[Q_NS_CREATE] = "INSERT IGNORE INTO iceberg_namespaces (prefix, ns, "
	    "parent, props) VALUES (?, ?, ?, ?)",
	[Q_NS_GET_SHARE] = NS_GET " LOCK IN SHARE MODE",
	[Q_NS_CHILD] = NS_CHILD " LOCK IN SHARE MODE",
	[Q_NS_TABLE] = NS_TABLE " LOCK IN SHARE MODE",
	[Q_TBL_GET_SHARE] = TBL_GET " LOCK IN SHARE MODE",
	[Q_TBL_CREATE] = "INSERT IGNORE INTO iceberg_tables (prefix, ns, name, "
	    "dir, location, metadata) VALUES (?, ?, ?, ?, ?, ?)",
	/* not IGNORE: that would cut a value too long, silently */
	[Q_PURGE_ADD] = "INSERT INTO iceberg_purges (dir) VALUES (?) ON "
	    "DUPLICATE KEY UPDATE dir = dir",
	[Q_DIR_PURGE] = DIR_PURGE " LOCK IN SHARE MODE",
	[Q_DIR_PURGE_UNDER] = DIR_PURGE_UNDER " LOCK IN SHARE MODE",
};

static const char *const postgres_sql[NQ] = {
	COMMON,
	[Q_NS_CREATE] = "INSERT INTO iceberg_namespaces (prefix, ns, parent, "
	    "props) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
	[Q_NS_GET_SHARE] = NS_GET " FOR SHARE",
	[Q_NS_CHILD] = NS_CHILD " FOR SHARE",
	[Q_NS_TABLE] = NS_TABLE " FOR SHARE",
	[Q_TBL_GET_SHARE] = TBL_GET " FOR SHARE",
	[Q_TBL_CREATE] = "INSERT INTO iceberg_tables (prefix, ns, name, dir, "
	    "location, metadata) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO "
	    "NOTHING",
	[Q_PURGE_ADD] = "INSERT INTO iceberg_purges (dir) VALUES (?) ON "
	    "CONFLICT DO NOTHING",
	[Q_DIR_PURGE] = DIR_PURGE " FOR SHARE",
	[Q_DIR_PURGE_UNDER] = DIR_PURGE_UNDER " FOR SHARE",
};

/* Names are bytes compared bytewise (VARBINARY, COLLATE "C"), so that
 * pages follow one order on every store. */
static const char *const mysql_ddl[] = {
	"CREATE TABLE IF NOT EXISTS iceberg_namespaces (prefix VARBINARY(128) "
	"NOT NULL, ns VARBINARY(512) NOT NULL, parent VARBINARY(512) NOT NULL, "
	"props MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL, PRIMARY KEY (prefix, "
	"ns), KEY by_parent (prefix, parent, ns)) ENGINE = InnoDB",
	"CREATE TABLE IF NOT EXISTS iceberg_tables (prefix VARBINARY(128) NOT "
	"NULL, ns VARBINARY(512) NOT NULL, name VARBINARY(255) NOT NULL, "
	"dir VARBINARY(2048) NOT NULL, location TEXT CHARACTER SET utf8mb4 "
	"NOT NULL, metadata LONGTEXT CHARACTER SET utf8mb4 NOT NULL, PRIMARY "
	"KEY (prefix, ns, name), KEY by_dir (dir)) ENGINE = InnoDB",
	"CREATE TABLE IF NOT EXISTS iceberg_purges (dir VARBINARY(2048) NOT "
	"NULL PRIMARY KEY) ENGINE = InnoDB",
};

static const char *const postgres_ddl[] = {
	"CREATE TABLE IF NOT EXISTS iceberg_namespaces (prefix TEXT COLLATE "
	"\"C\" NOT NULL, ns TEXT COLLATE \"C\" NOT NULL, parent TEXT COLLATE "
	"\"C\" NOT NULL, props TEXT NOT NULL, PRIMARY KEY (prefix, ns))",
	"CREATE INDEX IF NOT EXISTS iceberg_namespaces_by_parent ON "
	"iceberg_namespaces (prefix, parent, ns)",
	"CREATE TABLE IF NOT EXISTS iceberg_tables (prefix TEXT COLLATE \"C\" "
	"NOT NULL, ns TEXT COLLATE \"C\" NOT NULL, name TEXT COLLATE \"C\" NOT "
	"NULL, dir TEXT COLLATE \"C\" NOT NULL, location TEXT NOT NULL, "
	"metadata TEXT NOT NULL, PRIMARY KEY (prefix, ns, name))",
	"CREATE INDEX IF NOT EXISTS iceberg_tables_by_dir ON iceberg_tables "
	"(dir)",
	"CREATE TABLE IF NOT EXISTS iceberg_purges (dir TEXT COLLATE \"C\" "
	"NOT NULL PRIMARY KEY)",
};

typedef struct sql {
	idem_db *db;    /* owned by the server */
} sql;

struct ice_tx {
	sql *s;
	idem_db_conn *c;
	int own;        /* c is from the pool (not the request's) */
};

/* Statement q with a lock's variant: base, base + 1 (share), base + 2
 * (update). */
static size_t
locked(size_t base, ice_lock lock)
{
	return base + (size_t)lock;
}

/* IDEM_ERR_EXISTS when the latest run of q changed no row, else err. */
static idem_err
inserted(ice_tx *tx, size_t q, idem_err err)
{
	if (err == IDEM_OK && idem_db_affected(tx->c, q) == 0)
		return IDEM_ERR_EXISTS;
	return err;
}

static idem_err
ns_create(ice_tx *tx, const char *prefix, const char *ns, const char *parent,
    const char *props)
{
	return inserted(tx, Q_NS_CREATE, idem_db_run(tx->c, Q_NS_CREATE, "ssss",
	    prefix, ns, parent, props));
}

static idem_err
ns_get(ice_tx *tx, const char *prefix, const char *ns, ice_lock lock,
    char **props)
{
	return idem_db_one(tx->c, locked(Q_NS_GET, lock), "ss", "S", prefix, ns,
	    props, (size_t *)NULL);
}

static idem_err
ns_set(ice_tx *tx, const char *prefix, const char *ns, const char *props)
{
	return idem_db_run(tx->c, Q_NS_SET, "sss", props, prefix, ns);
}

static idem_err
ns_drop(ice_tx *tx, const char *prefix, const char *ns)
{
	idem_err err = idem_db_run(tx->c, Q_NS_DROP, "ss", prefix, ns);

	if (err == IDEM_OK && idem_db_affected(tx->c, Q_NS_DROP) == 0)
		return IDEM_ERR_NOT_FOUND;
	return err;
}

static idem_err
ns_busy(ice_tx *tx, const char *prefix, const char *ns, int *yes)
{
	long long one;
	idem_err err = idem_db_one(tx->c, Q_NS_TABLE, "ss", "i", prefix, ns,
	    &one);

	if (err == IDEM_ERR_NOT_FOUND)
		err = idem_db_one(tx->c, Q_NS_CHILD, "ss", "i", prefix, ns, &one);
	*yes = err == IDEM_OK;
	return err == IDEM_ERR_NOT_FOUND ? IDEM_OK : err;
}

/* Fetches the one-column rows of q (run) into out, the one past limit
 * setting out->more. */
static idem_err
fetch_names(ice_tx *tx, size_t q, size_t limit, ice_list *out)
{
	size_t cap = 0;
	idem_err err;
	char *name;

	memset(out, 0, sizeof(*out));
	while ((err = idem_db_fetch(tx->c, q, "S", &name, (size_t *)NULL))
	    == IDEM_OK) {
		if (out->n == limit) {
			out->more = 1;
			free(name);
			continue;
		}
		if (out->n == cap) {
			char **grown = realloc(out->names, (cap = cap ? 2 * cap :
			    16) * sizeof(*grown));
			if (grown == NULL) {
				free(name);
				ice_list_clear(out);
				return IDEM_ERR_NOMEM;
			}
			out->names = grown;
		}
		out->names[out->n++] = name;
	}
	if (err == IDEM_ERR_NOT_FOUND)
		return IDEM_OK;
	ice_list_clear(out);
	return err;
}

static idem_err
ns_list(ice_tx *tx, const char *prefix, const char *parent, const char *after,
    size_t limit, ice_list *out)
{
	idem_err err = idem_db_run(tx->c, Q_NS_LIST, "sssi", prefix, parent,
	    after, (long long)limit + 1);

	if (err != IDEM_OK) {
		memset(out, 0, sizeof(*out));
		return err;
	}
	return fetch_names(tx, Q_NS_LIST, limit, out);
}

static idem_err
tbl_get(ice_tx *tx, const char *prefix, const char *ns, const char *name,
    ice_lock lock, char **location, char **metadata)
{
	idem_err err = idem_db_one(tx->c, locked(Q_TBL_GET, lock), "sss", "SS",
	    prefix, ns, name, location, (size_t *)NULL, metadata,
	    (size_t *)NULL);

	if (err != IDEM_OK) {
		free(*location);
		*location = NULL;
	}
	return err;
}

static idem_err
tbl_create(ice_tx *tx, const char *prefix, const char *ns, const char *name,
    const char *dir, const char *location, const char *metadata)
{
	return inserted(tx, Q_TBL_CREATE, idem_db_run(tx->c, Q_TBL_CREATE,
	    "ssssss", prefix, ns, name, dir, location, metadata));
}

static idem_err
tbl_set(ice_tx *tx, const char *prefix, const char *ns, const char *name,
    const char *dir, const char *location, const char *metadata)
{
	return idem_db_run(tx->c, Q_TBL_SET, "ssssss", dir, location, metadata,
	    prefix, ns, name);
}

static idem_err
tbl_drop(ice_tx *tx, const char *prefix, const char *ns, const char *name)
{
	idem_err err = idem_db_run(tx->c, Q_TBL_DROP, "sss", prefix, ns, name);

	if (err == IDEM_OK && idem_db_affected(tx->c, Q_TBL_DROP) == 0)
		return IDEM_ERR_NOT_FOUND;
	return err;
}

static idem_err
tbl_list(ice_tx *tx, const char *prefix, const char *ns, const char *after,
    size_t limit, ice_list *out)
{
	idem_err err = idem_db_run(tx->c, Q_TBL_LIST, "sssi", prefix, ns, after,
	    (long long)limit + 1);

	if (err != IDEM_OK) {
		memset(out, 0, sizeof(*out));
		return err;
	}
	return fetch_names(tx, Q_TBL_LIST, limit, out);
}

/* Whether statement q (one parameter) finds a row for v (*yes). */
static idem_err
found(ice_tx *tx, size_t q, const char *v, int *yes)
{
	long long one;
	idem_err err = idem_db_one(tx->c, q, "s", "i", v, &one);

	*yes |= err == IDEM_OK;
	return err == IDEM_ERR_NOT_FOUND ? IDEM_OK : err;
}

static idem_err
dir_used(ice_tx *tx, const char *dir, int purges, const char *root, int *yes)
{
	size_t q = purges ? Q_DIR_PURGE : Q_DIR_TABLE, n = strlen(dir);
	char *lo = malloc(n + 2), *hi = malloc(n + 2), *up = strdup(dir);
	long long one;
	idem_err err = IDEM_ERR_NOMEM;

	*yes = 0;
	if (lo == NULL || hi == NULL || up == NULL)
		goto out;
	/* dir itself, the directories in it ("dir/" <= d < "dir0": '0'
	 * follows '/'), and those it lies in, up to the warehouse */
	memcpy(lo, dir, n);
	memcpy(hi, dir, n);
	strcpy(lo + n, "/");
	strcpy(hi + n, "0");
	if ((err = found(tx, q, dir, yes)) != IDEM_OK)
		goto out;
	err = idem_db_one(tx->c, q + 1, "ss", "i", lo, hi, &one);
	*yes |= err == IDEM_OK;
	if (err == IDEM_ERR_NOT_FOUND)
		err = IDEM_OK;
	while (err == IDEM_OK && !*yes && ice_dir_up(up, strlen(root)) == 0)
		err = found(tx, q, up, yes);
out:
	free(lo);
	free(hi);
	free(up);
	return err;
}

static idem_err
purge_add(ice_tx *tx, const char *dir)
{
	return idem_db_run(tx->c, Q_PURGE_ADD, "s", dir);
}

static idem_err
purge_next(ice_tx *tx, size_t limit, ice_list *out)
{
	idem_err err = idem_db_run(tx->c, Q_PURGE_NEXT, "i", (long long)limit);

	if (err != IDEM_OK) {
		memset(out, 0, sizeof(*out));
		return err;
	}
	return fetch_names(tx, Q_PURGE_NEXT, limit, out);
}

static idem_err
purge_done(ice_tx *tx, const char *dir)
{
	return idem_db_run(tx->c, Q_PURGE_DONE, "s", dir);
}

static const ice_cat_ops sql_ops = {
	ns_create, ns_get, ns_set, ns_drop, ns_busy, ns_list,
	tbl_get, tbl_create, tbl_set, tbl_drop, tbl_list,
	dir_used, purge_add, purge_next, purge_done,
};

/* The request's transaction, or a connection of the pool.  Returns the
 * view, or NULL when no connection can be had. */
static ice_tx *
sql_begin(ice_cat *cat, const idem_request *req)
{
	ice_tx *tx = calloc(1, sizeof(*tx));

	if (tx == NULL)
		return NULL;
	tx->s = cat->impl;
	if (req != NULL && (tx->c = idem_request_db(req)) != NULL)
		return tx;
	tx->own = 1;
	if ((tx->c = idem_db_get(tx->s->db)) == NULL) {
		free(tx);
		return NULL;
	}
	return tx;
}

static void
sql_end(ice_tx *tx)
{
	if (tx == NULL)
		return;
	if (tx->own)
		idem_db_put(tx->s->db, tx->c);
	free(tx);
}

static void
sql_free(ice_cat *cat)
{
	if (cat == NULL)
		return;
	free(cat->impl);
	free(cat);
}

ice_cat *
ice_cat_sql_new(idem_app *app, idem_db_dialect dialect)
{
	ice_cat *cat = calloc(1, sizeof(*cat));
	sql *s = calloc(1, sizeof(*s));

	if (cat == NULL || s == NULL || (s->db = idem_app_db(app,
	    dialect == IDEM_DB_POSTGRES ? postgres_sql : mysql_sql, NQ))
	    == NULL) {
		free(s);
		free(cat);
		return NULL;
	}
	cat->ops = &sql_ops;
	cat->impl = s;
	cat->begin = sql_begin;
	cat->end = sql_end;
	cat->free = sql_free;
	return cat;
}

const char *const *
ice_cat_sql_ddl(idem_db_dialect dialect, size_t *nsql)
{
	if (dialect == IDEM_DB_POSTGRES) {
		*nsql = sizeof(postgres_ddl) / sizeof(postgres_ddl[0]);
		return postgres_ddl;
	}
	*nsql = sizeof(mysql_ddl) / sizeof(mysql_ddl[0]);
	return mysql_ddl;
}
