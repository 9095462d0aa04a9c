/*
 * harness.h - starts a real idemfcgi (the built binary) for the end-to-end
 * tests, on a unix socket in a private temporary directory, with the
 * testkit and ledger plugins.
 */
#ifndef HARNESS_H
#define HARNESS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct harness {
	char dir[256];          /* private temporary directory */
	char addr[320];         /* "unix:<dir>/fcgi.sock" or "HOST:PORT" */
	char conf[320];         /* the config file */
	char testkit_log[320];  /* [testkit] log */
	char stderr_log[320];   /* idemfcgi's stderr */
	pid_t pid;
} harness;

/* A body in memory for idem_request_read_body (an idem_read_fn): reads at
 * most chunk bytes a call (0: no limit) and counts the calls. */
typedef struct harness_body {
	const char *data;
	size_t len, pos, chunk;
	int calls;
} harness_body;
ssize_t harness_read_body(void *ctx, char *buf, size_t len);

/* A free loopback TCP port (bound, then released). */
int harness_free_port(void);
/* The first of n consecutive free loopback ports, each one's port +
 * 10000 free too (a Redis Cluster node's bus); -1 when none was found. */
int harness_free_ports(int n);

/* s as one sh word in single quotes (caller frees), or NULL when out of
 * memory. */
char *harness_shquote(const char *s);

/* $IDEM_BUILDDIR, where the binary and plugins were built. */
const char *harness_builddir(void);

struct mariadb;
struct postgres;

/*
 * How to start an instance; every field may be left zero.  The config it
 * writes, in this order:
 *
 *   [server]       listen, socket-mode 0666, shutdown-grace 10s, the
 *                  testkit and ledger plugins, then the server lines
 *   [idempotency]  with mysql: store = mysql (with pg: store = postgres);
 *                  then the idem lines
 *   [mysql]        with mysql: the section for db, over its unix socket
 *                  (or TCP); with pg: [postgres], the section for pg
 *   rest           further sections; with mysql or pg, lines before its
 *                  first section header still belong to that section
 *                  ("pool-size")
 *   [testkit]      log = the testkit log
 */
typedef struct harness_opts {
	const char *server;        /* lines under [server] */
	const char *idem;          /* lines under [idempotency] */
	const char *rest;          /* the rest, as above */
	int mysql;                 /* store = mysql on db */
	int mysql_tcp;             /* with mysql: [mysql] over TCP */
	const struct mariadb *db;  /* NULL: the program's (mariadb_from_env) */
	const struct postgres *pg; /* store = postgres on this server */
	const struct redis *redis; /* store = redis on this server */
	const char *testkit_log;   /* shared by several instances, so
	                            * executions are counted across them;
	                            * NULL: a private one in the directory */
	const char *listen;        /* "127.0.0.1:PORT"; NULL: the unix
	                            * socket in the directory */
	const char *const *env;    /* "NAME=value" strings (NULL-terminated)
	                            * set in idemfcgi's environment */
	int listen_fd;             /* > 0: a listening socket passed as fd 3
	                            * with LISTEN_FDS=1 and LISTEN_PID of
	                            * the child, as systemd does (closed in
	                            * the child only) */
	const char *connect;       /* with listen_fd: its address, which
	                            * h->addr then is */
	int journal;               /* JOURNAL_STREAM names idemfcgi's
	                            * stderr (its DEV:INODE) */
} harness_opts;

/*
 * Writes the config of opts (NULL: all defaults) in a private directory
 * and starts idemfcgi on it.  Waits until the socket answers.  Returns 0,
 * or -1 when it did not come up (its stderr is printed).
 */
int harness_start(harness *h, const harness_opts *opts);

/* The value of one series ("name" or "name{labels}") in Prometheus text,
 * or -1 when it is absent. */
double harness_metric(const char *text, const char *series);

/* The sum of the series of family in Prometheus text whose labels include
 * each of labels ('outcome="acquired"', 'route="/c",outcome="in_flight"';
 * "": every series), or -1 when none is there. */
double harness_metric_sum(const char *text, const char *family,
    const char *labels);

/* The idemfcgi_idempotency_outcomes_total series of one route (method and
 * template; "" and "" for the outcomes of no request) and outcome in
 * Prometheus text, or -1 when it is absent. */
double harness_route_outcome(const char *text, const char *method,
    const char *route, const char *outcome);

/* That outcome summed over every route, or -1 when none is there. */
double harness_outcome(const char *text, const char *outcome);

/* GET /metrics from h (over FastCGI, REMOTE_ADDR 127.0.0.1): the
 * exposition text of a 200 (caller frees), or NULL. */
char *harness_scrape(const harness *h);

/* Reads a response-head header (lines "Name: value\r\n"),
 * case-insensitive; a thread-local copy, or NULL. */
const char *harness_head_find(const char *head, const char *name);

/* SIGTERM, then waits up to 20 s.  Returns the exit status (or 128+signal,
 * or -1 on timeout, after SIGKILL), and removes the directory. */
int harness_stop(harness *h);

/* The worker processes of h's master (up to max) into pids; returns how
 * many. */
int harness_workers(const harness *h, int *pids, int max);

/* A whole node dies: SIGKILL to the master and every worker at once. */
void harness_kill(harness *h);

/* Lines of the testkit log whose path field equals path. */
size_t harness_count(const harness *h, const char *path);

/* Lines of the testkit log with this path and Idempotency-Key. */
size_t harness_count_key(const harness *h, const char *path, const char *key);

/* Waits for this process's turn at an outage of the MySQL server (one at a
 * time across the test programs: a lock in the build directory that goes
 * with the process).  Returns 0, or -1 when the lock cannot be taken. */
int harness_outage_turn(void);

/* Removes a testkit log shared by several instances and the files beside
 * it (.crashed, .lifecycle, .started, .flaky, .release), for a test that
 * starts afresh. */
void harness_log_reset(const char *log);

/* Waits up to 60 s
 until n handlers of path with this Idempotency-Key
 * have reserved it and begun their sleep (testkit's <log>.started).
 * Returns 1, or 0 when they did not. */
int harness_await_started(const harness *h, const char *path, const char *key,
    size_t n);

/*
 * What a server logged, one family for every test:
 * - an idemfcgi of harness_start: harness_log is its stderr so far (caller
 *   frees; NULL if it cannot be read), harness_logged whether that
 *   contains text, harness_await_log the same waiting up to 5 s for the
 *   line to be written;
 * - the library in this process (unit tests): between
 *   harness_capture_begin and harness_capture_end, the lines idem_log
 *   writes go to a temporary file; _end returns them (caller frees; NULL
 *   if nothing could be captured) and gives the log its fd back.  The
 *   level is the caller's (idem_log_set_level).
 */
char *harness_log(const harness *h);
int harness_logged(const harness *h, const char *text);
int harness_await_log(const harness *h, const char *text);

typedef struct harness_capture {
	FILE *fp;
	int old_fd;
} harness_capture;
/* Returns 0, or -1 when no temporary file could be made. */
int harness_capture_begin(harness_capture *c);
char *harness_capture_end(harness_capture *c);
/* harness_capture_begin, with idem_log's level set to level (an
 * idem_log_level).  Returns 0 or -1. */
int harness_capture_level(harness_capture *c, int level);
/* harness_capture_end into buf (size bytes, always NUL-terminated), and
 * idem_log silent again (level above error). */
void harness_capture_into(harness_capture *c, char *buf, size_t size);
/* How often needle occurs in hay. */
int harness_occurrences(const char *hay, const char *needle);

/*
 * The placeholder of test config texts: "@BUILDDIR@", the build directory
 * (where the binary and the plugins are).  harness_subst returns text with
 * it replaced (caller frees; NULL when out of memory); harness_write_conf
 * writes that to path (returns 0 or -1).  harness_start and harness_run
 * write their configs through it, so their texts may use it too.
 */
char *harness_subst(const char *text);
int harness_write_conf(const char *path, const char *text);

/* Reads a whole file (caller frees); NULL if it cannot. */
char *harness_slurp(const char *path);

/*
 * Runs "idemfcgi ARGS -c FILE" on a config of the given text (written to a
 * temporary file by harness_write_conf) and waits; with conf_text NULL, no
 * -c is added.
 * Returns the exit status; *output (caller frees) gets stdout and stderr.
 */
int harness_run(const char *args, const char *conf_text, char **output);

#endif
