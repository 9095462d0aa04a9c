/*
 * redis.h - a private Redis per test program (tests/lib/redis-ctl): its
 * own directory under $IDEM_BUILDDIR/tmp, a free loopback port, AOF on
 * (appendfsync everysec), no snapshots.
 */
#ifndef REDIS_H
#define REDIS_H

#include <stddef.h>

/* A server: dir is its directory (empty: none), port its TCP port on
 * 127.0.0.1.  The caller owns the struct; redis_destroy ends what
 * redis_start made. */
typedef struct redis {
	char dir[256];
	int port;
} redis;

/* Starts one in a new directory, the options (NULL: none; "--name value
 * ..." for redis-server) after the defaults; returns 0 or -1 (the reason
 * is printed).  After -1, m->dir may name a directory that redis_destroy
 * removes. */
int redis_start(redis *m, const char *options);
/* Starts it again after a stop or kill, on the same port and files;
 * 0 or -1. */
int redis_restart(redis *m);
/* SHUTDOWN NOSAVE (SIGKILL after 10 s) / SIGKILL / SIGSTOP / SIGCONT.
 * Return 0 (also when it did not run), or non-zero on failure. */
int redis_stop(redis *m);
int redis_kill(redis *m);
int redis_freeze(redis *m);
int redis_thaw(redis *m);
/* Stops it and removes its directory (IDEM_KEEP set: keeps it); m->dir is
 * emptied.  Does nothing for an empty m->dir. */
void redis_destroy(redis *m);
/* Runs redis-cli with args (one sh word each, quoted here) on m; returns
 * its output (caller frees) or NULL when it failed. */
char *redis_cli(const redis *m, const char *const *args, size_t nargs);
/* The same for a command line of words without blanks or quotes
 * ("INFO replication"). */
char *redis_cmd(const redis *m, const char *line);
/* Writes the [redis] section for this server into buf (truncated to
 * size). */
void redis_conf(const redis *m, char *buf, size_t size);

/* Makes *out a replica of the running *primary, in a new directory on a
 * free port, synced; 0 or -1. */
int redis_replica(redis *out, const redis *primary);
/* Waits (10 s at most) until every replica of master m has acknowledged
 * all m's writes (each slaveN's offset in INFO replication at m's
 * master_repl_offset); 0, or -1 when they did not.  (A WAIT sent by
 * redis-cli waits for the writes of its own connection: none.) */
int redis_replicated(const redis *m);
/* Promotes the replica m (REPLICAOF NO ONE); 0 or -1. */
int redis_promote(const redis *m);

/* A cluster: masters masters, each with replicas replicas, on ports
 * port .. port + n - 1; m->port is the first, m->dir holds node-0 ...
 * Returns 0 or -1. */
int redis_cluster(redis *m, int masters, int replicas);
/* Node i of the cluster m (its directory and port) into *node. */
void redis_cluster_node(const redis *m, int i, redis *node);

/* For test programs that share one server: the one their runner started
 * (environment IDEM_TEST_REDIS_DIR and _PORT) into *m; 0, or -1 when none
 * was (m then empty). */
int redis_from_env(redis *m);
/* Exports m in the environment for redis_from_env. */
void redis_to_env(const redis *m);

#endif
