/*
 * postgres.h - a private PostgreSQL 15 per test program
 * (tests/lib/postgres-ctl): its own data directory under
 * $IDEM_BUILDDIR/tmp, a free loopback port, database "idem" owned by role
 * "idem" (password in dir/password, asked over TCP), the schema applied.
 * Its socket lives in /tmp/idemfcgi-pg-<basename of dir>, for the
 * superuser's sessions postgres_sql runs.
 */
#ifndef POSTGRES_H
#define POSTGRES_H

#include <stddef.h>

/* A server: dir is its directory (empty: none), port its TCP port on
 * 127.0.0.1.  The caller owns the struct; postgres_destroy ends what
 * postgres_start or postgres_standby made. */
typedef struct postgres {
	char dir[256];
	int port;
} postgres;

/* Installs and starts one in a new directory; returns 0 or -1 (the
 * reason is printed).  After -1, m->dir may name a directory that
 * postgres_destroy removes. */
int postgres_start(postgres *m);
/* Starts it again after a stop or kill, on the same port and data;
 * 0 or -1. */
int postgres_restart(postgres *m);
/* Fast shutdown (SIGKILL after 30 s) / SIGKILL of the postmaster and
 * every backend.  Return 0 (also when it did not run). */
int postgres_stop(postgres *m);
int postgres_kill(postgres *m);
/* SIGSTOP / SIGCONT the postmaster and every backend: a server that
 * holds its sessions and answers nothing (libpq's blocking calls then
 * wait forever).  Return 0, or non-zero when it does not run. */
int postgres_freeze(postgres *m);
int postgres_thaw(postgres *m);
/* Stops it and removes its directory (IDEM_KEEP set: keeps it) and its
 * socket directory; m->dir is emptied.  Does nothing for an empty
 * m->dir. */
void postgres_destroy(postgres *m);
/* Runs sql as superuser postgres on database idem; returns the rows
 * (tab-separated, one a line, no header; caller frees) or NULL on any
 * error. */
char *postgres_sql(const postgres *m, const char *sql);
/* The same on database db. */
char *postgres_sql_on(const postgres *m, const char *db, const char *sql);
/* Runs sql as postgres_sql does, in the background, its rows thrown
 * away, and returns at once: a session a test holds open meanwhile.
 * Returns 0, or -1 when it could not be started. */
int postgres_sql_background(const postgres *m, const char *sql);
/* Creates database db afresh (dropped first when it exists, its
 * sessions ended) owned by role idem, with every schema file applied,
 * for a test that must not touch the database the others share.
 * Returns 0 or -1. */
int postgres_new_database(const postgres *m, const char *db);
/* Writes the [postgres] section for this server into buf (truncated to
 * size): over TCP (127.0.0.1 and its port), user idem, the password
 * file, database idem. */
void postgres_conf(const postgres *m, char *buf, size_t size);

/* Makes *out a streaming standby of the running *primary, in a new
 * directory on a free port, started; the same roles and password.
 * Returns 0 or -1 (as postgres_start). */
int postgres_standby(postgres *out, const postgres *primary);
/* Promotes the standby m and waits until it takes writes; 0 or -1. */
int postgres_promote(const postgres *m);

/* For test programs that share one server: the one their runner started
 * (environment IDEM_TEST_POSTGRES_DIR and _PORT) into *m; 0, or -1 when
 * none was (m then empty). */
int postgres_from_env(postgres *m);
/* Exports m in the environment for postgres_from_env. */
void postgres_to_env(const postgres *m);

#endif
