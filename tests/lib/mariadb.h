/*
 * mariadb.h - a private MariaDB per test program (tests/lib/mariadb-ctl):
 * its own data directory under $IDEM_BUILDDIR/tmp, a free loopback port,
 * database and user "idem", the schema applied.
 */
#ifndef MARIADB_H
#define MARIADB_H

#include <stddef.h>

typedef struct mariadb {
	char dir[256];
	int port;
} mariadb;

/* Installs and starts one; returns 0 or -1 (the reason is printed). */
int mariadb_start(mariadb *m);
/* Starts it again after a stop or kill, on the same port and data. */
int mariadb_restart(mariadb *m);
/* Clean shutdown / SIGKILL.  Return 0. */
int mariadb_stop(mariadb *m);
int mariadb_kill(mariadb *m);
/* Stops it and removes its directory. */
void mariadb_destroy(mariadb *m);
/* Runs sql as root on database idem; returns the rows (tab-separated,
 * caller frees) or NULL. */
char *mariadb_sql(const mariadb *m, const char *sql);
/* Runs sql as root on database idem in the background, its rows thrown
 * away, and returns at once: a session a test holds open meanwhile.
 * Returns 0, or -1 when it could not be started. */
int mariadb_sql_background(const mariadb *m, const char *sql);
/* Creates database db afresh (dropped first when it exists) with every
 * schema file applied and all of it granted to user idem, for a test that
 * must not touch the database the others share.  Returns 0 or -1. */
int mariadb_new_database(const mariadb *m, const char *db);
/* A global status counter ("Questions"), or -1. */
long long mariadb_status(const mariadb *m, const char *name);
/* Writes the [mysql] section for this server into buf: over its unix
 * socket, or over TCP (127.0.0.1 and its port). */
void mariadb_conf(const mariadb *m, char *buf, size_t size);
void mariadb_conf_tcp(const mariadb *m, char *buf, size_t size);

/* For test programs that share one server: the one their runner started
 * (environment IDEM_TEST_MARIADB_DIR and _PORT), or -1. */
int mariadb_from_env(mariadb *m);
/* Exports m in the environment for mariadb_from_env. */
void mariadb_to_env(const mariadb *m);

#endif
