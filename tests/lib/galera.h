/*
 * galera.h - a private 3-node MariaDB Galera cluster per test program
 * (tests/lib/galera-ctl): its directory under $IDEM_BUILDDIR/tmp, a free
 * range of 12 loopback ports, database and user "idem" on every node, the
 * schema applied.  Nodes are numbered 1, 2 and 3, as in galera-ctl; node 1
 * bootstraps the cluster.
 */
#ifndef GALERA_H
#define GALERA_H

#include <stddef.h>

struct mariadb;

typedef struct galera {
	char dir[256];
	int baseport;   /* node i uses baseport + 4(i-1) .. + 3 */
	int port[3];    /* the SQL port of node i is port[i - 1] */
} galera;

/*
 * Installs and starts the cluster, returns once it has size 3 (every node
 * Synced); 0 or -1 (the reason is printed).  options (NULL: none) are
 * mariadbd options for every node, shell words ("--wsrep_retry_autocommit=0
 * --wsrep_sync_wait=1"), after the defaults of galera-ctl.
 */
int galera_start(galera *g, const char *options);
/* Stops every node (node 1 last); returns 0.  galera_start (same g, same
 * options) starts the stopped cluster again on its data. */
int galera_stop(galera *g);
/* Stops it and removes its directory (IDEM_KEEP set: keeps it). */
void galera_destroy(galera *g);

/* One node: clean shutdown, SIGKILL, or (after either) rejoin the running
 * cluster, returning once it is Synced again.  0 or -1. */
int galera_stop_node(galera *g, int i);
int galera_kill_node(galera *g, int i);
int galera_start_node(galera *g, int i);

/* Runs sql as root on node i, database idem; returns the rows
 * (tab-separated, caller frees) or NULL. */
char *galera_sql(const galera *g, int i, const char *sql);
/* wsrep_cluster_size as node i sees it, or -1 when it does not answer. */
int galera_size(const galera *g, int i);
/* Node i's wsrep_local_state_comment ("Synced", "Donor/Desynced", ...)
 * into buf; "" when it does not answer.  Returns buf. */
char *galera_state(const galera *g, int i, char *buf, size_t size);
/* Waits up to ms milliseconds until node i reports cluster size n;
 * returns 0, or -1 on timeout. */
int galera_await_size(const galera *g, int i, int n, int ms);

/* Writes the [mysql] section for node i into buf: over TCP (127.0.0.1 and
 * its port), user idem, the password file, database idem, 2 s timeouts. */
void galera_conf(const galera *g, int i, char *buf, size_t size);
/*
 * Node i seen as a mariadb, for the helpers that take one: mariadb_sql,
 * mariadb_status, mariadb_conf (its socket), mariadb_conf_tcp,
 * mariadb_stop, mariadb_kill and harness_opts.db all work on it
 * (galera-ctl lays a node out as mariadb-ctl does); mariadb_restart and
 * mariadb_destroy do not (use galera_start_node, galera_destroy).
 */
void galera_node_as_mariadb(const galera *g, int i, struct mariadb *m);

/* For test programs that share one cluster: the one their runner started
 * (environment IDEM_TEST_GALERA_DIR and _BASEPORT), or -1. */
int galera_from_env(galera *g);
/* Exports g in the environment for galera_from_env. */
void galera_to_env(const galera *g);

#endif
