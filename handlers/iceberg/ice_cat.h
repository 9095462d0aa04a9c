/*
 * ice_cat.h - where the Iceberg catalog keeps its state: namespaces with
 * their properties, and tables with their metadata and its file's
 * location.  Two backends sit behind one methods struct: the memory of
 * the worker (the memory store), and the tables iceberg_namespaces and
 * iceberg_tables of the store's database (MySQL, PostgreSQL), written
 * inside the request's transaction on the catalog's transactional routes.
 *
 * Names: a catalog (prefix, "" for none) holds namespaces, each a key of
 * its parts joined by 0x1F ("a\x1fb" is a.b); a table is (namespace key,
 * name), with its directory (its location as an absolute path inside the
 * warehouse: dir).  A dropped table's directory waits in the purges until
 * the purger deleted its files.  Strings passed in are borrowed for the call; strings passed
 * out are new (caller frees).
 */
#ifndef ICE_CAT_H
#define ICE_CAT_H

#include <stddef.h>

#include "idemfcgi_db.h"

/* The namespace part separator of a namespace key. */
#define ICE_SEP '\x1f'
#define ICE_SEP_S "\x1f"
/* Bounds: the bytes of a prefix, of a namespace key, of a table name. */
#define ICE_PREFIX_MAX 128
#define ICE_NS_MAX 512
#define ICE_NAME_MAX 255
/* The bytes of a table's directory (its location as a path): PostgreSQL
 * indexes a few more, MySQL up to 3072. */
#define ICE_DIR_MAX 2048

/* What a lookup locks until the request's transaction ends. */
typedef enum ice_lock {
	ICE_LOCK_NONE = 0,
	ICE_LOCK_SHARE,     /* no one may change or drop it meanwhile */
	ICE_LOCK_UPDATE     /* this request is about to change it */
} ice_lock;

/* A page of names: namespace keys, or table names. */
typedef struct ice_list {
	char **names;       /* owned, each owned */
	size_t n;
	int more;           /* a name after the last one exists */
} ice_list;

/* Frees what l holds (not l). */
void ice_list_clear(ice_list *l);

typedef struct ice_cat ice_cat;
/* One request's view of the catalog: on the database, a connection (in
 * the request's transaction, or taken from the pool for a read); in
 * memory, the catalog's lock, held until ice_tx_end. */
typedef struct ice_tx ice_tx;

/*
 * Every method returns IDEM_OK; IDEM_ERR_NOT_FOUND (no such namespace or
 * table); IDEM_ERR_EXISTS (create: it exists); IDEM_ERR_NOMEM; or the
 * database's error (IDEM_ERR_BUSY, IDEM_ERR_STORE, IDEM_ERR_TOO_LARGE):
 * answer 503 and let the framework roll the transaction back.
 */
typedef struct ice_cat_ops {
	/* Creates namespace ns under parent (its key less the last part). */
	idem_err (*ns_create)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *parent, const char *props);
	/* Reads the properties (a JSON object's text) of ns, locked. */
	idem_err (*ns_get)(ice_tx *tx, const char *prefix, const char *ns,
	    ice_lock lock, char **props);
	/* Replaces the properties of ns (read with ICE_LOCK_UPDATE). */
	idem_err (*ns_set)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *props);
	/* Drops ns (read with ICE_LOCK_UPDATE). */
	idem_err (*ns_drop)(ice_tx *tx, const char *prefix, const char *ns);
	/* Whether ns holds a table or a namespace (*yes). */
	idem_err (*ns_busy)(ice_tx *tx, const char *prefix, const char *ns,
	    int *yes);
	/* The namespaces under parent, in byte order, after after ("": from
	 * the first), at most limit. */
	idem_err (*ns_list)(ice_tx *tx, const char *prefix, const char *parent,
	    const char *after, size_t limit, ice_list *out);
	/* Reads table (ns, name): its metadata location and metadata. */
	idem_err (*tbl_get)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *name, ice_lock lock, char **location, char **metadata);
	idem_err (*tbl_create)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *name, const char *dir, const char *location,
	    const char *metadata);
	/* Points table (read with ICE_LOCK_UPDATE) at new metadata. */
	idem_err (*tbl_set)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *name, const char *dir, const char *location,
	    const char *metadata);
	idem_err (*tbl_drop)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *name);
	/* The tables of ns as ns_list lists namespaces. */
	idem_err (*tbl_list)(ice_tx *tx, const char *prefix, const char *ns,
	    const char *after, size_t limit, ice_list *out);
	/* Whether dir, a directory inside it or one it lies in, is the
	 * directory of a table of any catalog (purges 0) or of a dropped
	 * table whose files wait for the purger (purges 1, a locking read:
	 * the purger forgets it only after its files are gone) (*yes). */
	idem_err (*dir_used)(ice_tx *tx, const char *dir, int purges,
	    const char *root, int *yes);
	/* Records dir (a dropped table's) for its files to be deleted once
	 * the drop commits. */
	idem_err (*purge_add)(ice_tx *tx, const char *dir);
	/* Up to limit directories recorded by committed drops. */
	idem_err (*purge_next)(ice_tx *tx, size_t limit, ice_list *out);
	/* Forgets dir, its files deleted (or kept: another table's). */
	idem_err (*purge_done)(ice_tx *tx, const char *dir);
} ice_cat_ops;

struct ice_cat {
	const ice_cat_ops *ops;
	/* the backend's own (ice_cat_mem.c, ice_cat_sql.c) */
	void *impl;
	/* begins a request's view: req's transaction on its transactional
	 * routes, a connection of the pool for reads (req NULL: a
	 * connection of the pool, for the purger); NULL when the database
	 * cannot be reached */
	ice_tx *(*begin)(ice_cat *cat, const idem_request *req);
	/* ends it (the transaction itself is the framework's) */
	void (*end)(ice_tx *tx);
	void (*free)(ice_cat *cat);
};

/* The catalog in memory.  Returns it (free with cat->free) or NULL. */
ice_cat *ice_cat_mem_new(void);
/* The catalog in the store's database of app, whose dialect is dialect
 * (IDEM_DB_MYSQL or IDEM_DB_POSTGRES): makes the plugin's pool.  Returns
 * it or NULL (logged). */
ice_cat *ice_cat_sql_new(idem_app *app, idem_db_dialect dialect);
/* The DDL of the catalog's tables in dialect: nsql statements. */
const char *const *ice_cat_sql_ddl(idem_db_dialect dialect, size_t *nsql);

#endif /* ICE_CAT_H */
