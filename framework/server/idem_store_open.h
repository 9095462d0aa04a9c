/*
 * idem_store_open.h - the store factory: the store a config names, made
 * from it.  Above every store, so that the store layer knows none of its
 * backends (store/ depends on nothing above it).
 */
#ifndef IDEM_STORE_OPEN_H
#define IDEM_STORE_OPEN_H

#include "idem_config.h"
#include "idem_store.h"
#include "idem_store_tx.h"

/*
 * The store cfg's [idempotency] store names, made from cfg: the memory
 * store of max-entries, or the MySQL or PostgreSQL store with pool_size
 * connections (0: its section's pool-size), with abandon-after.  What the service, the master's sweeps and
 * idemfcgi-admin open.  Returns what the constructor returned (IDEM_OK
 * with *out, free with idem_store_close), or IDEM_ERR_CONFIG for a store
 * the config does not name.
 */
idem_err idem_store_open(const idem_config *cfg, unsigned pool_size,
    idem_store **out);

/* The settle_ms (idem_store.h) of the store cfg names, without opening
 * it: how long after a worker died a reservation it sent may still come
 * into being (the master's last sweep of its keys waits that long); 0:
 * never, or a store that dies with its worker. */
uint64_t idem_store_settle_for(const idem_config *cfg);

/* Whether the database of the store cfg names answers now, tried quietly
 * (a database not up yet is tried again and again): 1 or 0; a store with
 * no database of its own (memory) always answers. */
int idem_store_reachable(const idem_config *cfg);

/* The maker of plugins' pools of the database of the store cfg names
 * (borrowed, static), NULL for a store without one, or whose pools the
 * plugin layer makes itself (MySQL's, for its raw API). */
const idem_db_maker *idem_store_db_maker(const idem_config *cfg);

#endif
