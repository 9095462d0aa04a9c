/*
 * test_store_mysql.c - the store suite on the MySQL store, against a
 * private MariaDB this program starts (and stops) around its tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_service.h"
#include "idem_store_mysql.h"
#include "harness.h"
#include "mariadb.h"
#include "mysql_open.h"
#include "store_suite.h"
#include "store_req.h"

/* where make install puts the schema (-DIDEM_TEST_SCHEMADIR) */
#ifndef IDEM_TEST_SCHEMADIR
#error "IDEM_TEST_SCHEMADIR is set by Makefile.am"
#endif

/* The config of the shared server, with pool size. */
static idem_config *
config(unsigned pool)
{
	char text[1024], section[600];
	idem_config *cfg;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n%s"
	    "pool-size = %u\n", section, pool);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	return cfg;
}

idem_store *
suite_open(void)
{
	idem_config *cfg = config(64);
	idem_store *s = NULL;

	cr_assert_eq(test_mysql_store(cfg, 64, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

Test(mysql, refuses_missing_schema)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	harness_capture cap;
	char log[4096];
	mariadb m;
	char *out;

	mariadb_from_env(&m);
	/* every privilege: the tables are missing, nothing is denied */
	out = mariadb_sql(&m, "CREATE DATABASE empty_db; GRANT ALL ON "
	    "empty_db.* TO 'idem'@'localhost'");
	free(out);
	free(cfg->mysql.database);
	cfg->mysql.database = strdup("empty_db");
	harness_capture_level(&cap, IDEM_LOG_INFO);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	harness_capture_into(&cap, log, sizeof(log));
	cr_expect_null(s);
	/* the missing table (1146): the hint, with the installed path */
	cr_expect(strstr(log, "(error 1146)") != NULL || strstr(log,
	    "doesn't exist") != NULL, "%s", log);
	cr_expect(strstr(log, "database empty_db lacks the tables of "
	    "idemfcgi: apply " IDEM_TEST_SCHEMADIR "/001_idempotency_keys.sql "
	    "and the files after it, in order") != NULL, "%s", log);
	idem_config_free(cfg);
}

/* Another error than a missing table (here the login is refused the
 * database): no schema hint, which would send the operator astray. */
Test(mysql, no_schema_hint_for_other_errors)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	harness_capture cap;
	char log[4096];
	mariadb m;
	char *out;

	mariadb_from_env(&m);
	out = mariadb_sql(&m, "CREATE DATABASE IF NOT EXISTS closed_db");
	free(out);
	free(cfg->mysql.database);
	cfg->mysql.database = strdup("closed_db");
	harness_capture_level(&cap, IDEM_LOG_INFO);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	harness_capture_into(&cap, log, sizeof(log));
	cr_expect_null(s);
	cr_expect(strstr(log, "Access denied") != NULL, "%s", log);
	cr_expect(strstr(log, "cannot use database closed_db (see the error "
	    "above)") != NULL, "%s", log);
	cr_expect(strstr(log, "lacks the tables") == NULL, "%s", log);
	cr_expect(strstr(log, "apply") == NULL, "%s", log);
	idem_config_free(cfg);
}

Test(mysql, refuses_old_schema)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	mariadb m;
	char *out;

	mariadb_from_env(&m);
	out = mariadb_sql(&m, "CREATE DATABASE old_db; CREATE TABLE "
	    "old_db.idemfcgi_schema (version INT); INSERT INTO "
	    "old_db.idemfcgi_schema VALUES (0); GRANT SELECT ON old_db.* TO "
	    "'idem'@'localhost'");
	free(out);
	free(cfg->mysql.database);
	cfg->mysql.database = strdup("old_db");
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	idem_config_free(cfg);
}

/* The client commands that apply schema file name to database db, as an
 * operator does (caller frees). */
static char *
schema_sql(const char *db, const char *name)
{
	const char *src = getenv("IDEM_SRCDIR");
	char *sql;

	cr_assert(asprintf(&sql, "USE %s;\nsource %s/schema/mysql/%s", db,
	    src != NULL ? src : ".", name) > 0);
	return sql;
}

/* A deployment of schema version 1 is refused, naming what to apply;
 * with 002 applied in place still refused (version 3 is needed); once 003
 * is, the store opens, its records are still there and replayed, a
 * record in flight from before (no lease length of its own) is judged by
 * the reader's inflight-ttl, and new records hold progress and their
 * lease's length. */
Test(mysql, schema_migrated_in_place)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	idem_store_key k;
	idem_progress p = { "charged", NULL, 0 };
	idem_reserve_result rr;
	unsigned char fp[32];
	mariadb m;
	char *sql, *out;

	mariadb_from_env(&m);
	out = mariadb_sql(&m, "CREATE DATABASE v1_db; GRANT ALL ON v1_db.* TO "
	    "'idem'@'localhost'");
	free(out);
	sql = schema_sql("v1_db", "001_idempotency_keys.sql");
	free(mariadb_sql(&m, sql));
	free(sql);
	out = mariadb_sql(&m, "INSERT INTO v1_db.idempotency_keys (scope_hash, "
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, "
	    "lease_at, expires_at, status, headers, body) VALUES (UNHEX(REPEAT("
	    "'00', 32)), 'migrated', UNHEX(REPEAT('07', 32)), 'committed', 'o', "
	    "'r', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + "
	    "INTERVAL 1 HOUR, 201, '', 'kept'), (UNHEX(REPEAT('00', 32)), "
	    "'old-flight', UNHEX(REPEAT('07', 32)), 'in_flight', 'dead', 'r', "
	    "UTC_TIMESTAMP(6) - INTERVAL 5 SECOND, UTC_TIMESTAMP(6) - INTERVAL "
	    "5 SECOND, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, NULL, NULL, NULL)");
	free(out);
	free(cfg->mysql.database);
	cfg->mysql.database = strdup("v1_db");
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	sql = schema_sql("v1_db", "002_recovery_points.sql");
	free(mariadb_sql(&m, sql));
	free(sql);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	sql = schema_sql("v1_db", "003_lease_length.sql");
	free(mariadb_sql(&m, sql));
	free(sql);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	sql = schema_sql("v1_db", "004_tombstones.sql");
	free(mariadb_sql(&m, sql));
	free(sql);
	cr_assert_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "migrated");
	memset(fp, 7, sizeof(fp));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o2", "r2", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.body_len, 4);
	idem_reserve_result_clear(&rr);
	/* its lease 5 s old, no length kept: live at 30 s, stale at 1 s */
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "old-flight");
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o4", "r4", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(rr.lease_ms, 0);
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o5", "r5", 1000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_TAKEN_OVER);
	idem_reserve_result_clear(&rr);
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "after-migration");
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o3", "r3", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(idem_store_checkpoint(s, TEST_OWNED(&k, "o3", 60000), &p),
	    IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
}

/* Issue 35.2: an in-flight row from before schema version 3 keeps no
 * lease length; past its lifetime, purge gives it the longest lease there
 * is (a day): one renewed 2 hours ago stays, one 25 hours ago goes. */
Test(mysql, purge_gives_a_row_without_lease_length_a_day)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	mariadb m;
	char sql[1024], *out;
	unsigned n;

	mariadb_from_env(&m);
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys (scope_hash, "
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, "
	    "lease_at, expires_at) VALUES (UNHEX(SHA2('nolease-%d', 256)), "
	    "'recent', UNHEX(REPEAT('07', 32)), 'in_flight', 'o', 'r', "
	    "UTC_TIMESTAMP(6) - INTERVAL 3 DAY, UTC_TIMESTAMP(6) - INTERVAL 2 "
	    "HOUR, UTC_TIMESTAMP(6) - INTERVAL 2 DAY), (UNHEX(SHA2('nolease-%d', "
	    "256)), 'old', UNHEX(REPEAT('07', 32)), 'in_flight', 'o', 'r', "
	    "UTC_TIMESTAMP(6) - INTERVAL 3 DAY, UTC_TIMESTAMP(6) - INTERVAL 25 "
	    "HOUR, UTC_TIMESTAMP(6) - INTERVAL 2 DAY)", (int)getpid(),
	    (int)getpid());
	free(mariadb_sql(&m, sql));
	cr_assert_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	do
		cr_assert_eq(idem_store_purge(s, 100, &n), IDEM_OK);
	while (n == 100);
	snprintf(sql, sizeof(sql), "SELECT GROUP_CONCAT(idem_key) FROM "
	    "idempotency_keys WHERE scope_hash = UNHEX(SHA2('nolease-%d', 256))",
	    (int)getpid());
	out = mariadb_sql(&m, sql);
	cr_assert_not_null(out);
	out[strcspn(out, "\n")] = '\0';
	cr_expect_str_eq(out, "recent");
	free(out);
	idem_store_close(s);
	idem_config_free(cfg);
}

/* Issue 35.4: a reservation's INSERT that the server runs for longer
 * than its client waits (a trigger sleeps 6 s: the client gives up after
 * its lock wait and margin, 3.25 s) is sent again; the retry waits for
 * the first one's row lock and meets 1205: BUSY.  The reserve says its
 * write went unanswered, so that the middleware deletes the row that
 * lands later (FORGET) instead of leaving it in flight until
 * inflight-ttl. */
Test(mysql, busy_after_an_unanswered_insert_says_so, .timeout = 60)
{
	idem_config *cfg = config(2);
	idem_store *s = NULL;
	idem_reserve_result rr;
	idem_store_req *rq;
	idem_store_key k;
	unsigned char fp[32] = { 7 };
	mariadb m;
	char *out;
	int i, landed = 0;

	cr_assert_eq(mariadb_from_env(&m), 0);
	cr_assert_eq(mariadb_new_database(&m, "insert_slow"), 0);
	free(cfg->mysql.database);
	cfg->mysql.database = strdup("insert_slow");
	cr_assert_eq(test_mysql_store(cfg, 2, &s), IDEM_OK);
	free(mariadb_sql(&m, "CREATE TRIGGER insert_slow.slow_insert AFTER "
	    "INSERT ON insert_slow.idempotency_keys FOR EACH ROW SET @d = IF("
	    "NEW.owner = 'slow.1', SLEEP(6), 0)"));
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "slow-insert");
	rq = TEST_REQ(&k, fp, "slow.1", "rid", 30000, 60000);
	memset(&rr, 0, sizeof(rr));
	cr_expect_eq(idem_store_reserve(s, rq, &rr), IDEM_ERR_BUSY);
	cr_expect_eq(rq->unanswered, 1, "the write that may land is not said");
	idem_reserve_result_clear(&rr);
	for (i = 0; i < 100 && !landed; i++) {
		out = mariadb_sql(&m, "SELECT COUNT(*) FROM insert_slow."
		    "idempotency_keys WHERE owner = 'slow.1'");
		landed = out != NULL && atoi(out) == 1;
		free(out);
		if (!landed)
			usleep(100000);
	}
	cr_expect(landed, "the first INSERT never landed");
	/* what the middleware's FORGET does */
	cr_expect_eq(idem_store_release(s, TEST_OWNED(&k, "slow.1", 0)),
	    IDEM_OK);
	free(mariadb_sql(&m, "DROP TRIGGER insert_slow.slow_insert"));
	idem_store_close(s);
	idem_config_free(cfg);
}

Test(mysql, wrong_password)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	FILE *fp = fopen("/tmp/idemfcgi-wrong-pw", "w");

	fputs("not-the-password\n", fp);
	fclose(fp);
	free(cfg->mysql.password_file);
	cfg->mysql.password_file = strdup("/tmp/idemfcgi-wrong-pw");
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	free(cfg->mysql.password_file);
	cfg->mysql.password_file = strdup("/nonexistent/pw");
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_CONFIG);
	idem_config_free(cfg);
}

/* Opens a service on the shared server with max-response bytes; returns
 * what idem_service_new returned. */
static idem_err
service_with(uint64_t max_response)
{
	idem_config *cfg = config(1);
	idem_service *svc = NULL;
	idem_err err;

	cfg->idem.max_response = max_response;
	err = idem_service_new(cfg, "/nowhere", &svc);
	idem_service_free(svc);
	return err;
}

/* Issue 12.1: a max-response that the schema's body column or the
 * server's max_allowed_packet cannot hold is refused at start-up, not
 * discovered at the first large commit; the store itself still opens
 * (the master's sweep and idemfcgi-admin need it). */
Test(mysql, refuses_max_response_it_cannot_store)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;

	cfg->idem.max_response = 16ULL << 20;
	cr_assert_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	cr_expect_eq(s->limits.headers, 65535);
	cr_expect_eq(s->limits.body, 16777215);
	cr_expect_gt(s->limits.total, 1ULL << 20);
	idem_store_close(s);
	idem_config_free(cfg);
	idem_log_set_level(IDEM_LOG_ERROR + 1);
	/* over the column */
	cr_expect_eq(service_with(16ULL << 20), IDEM_ERR_CONFIG);
	/* under the column, over the packet (16 MiB by default) */
	cr_expect_eq(service_with((16ULL << 20) - 100), IDEM_ERR_CONFIG);
	cr_expect_eq(service_with(1ULL << 20), IDEM_OK);
}

/* Issue 12.1: a max_allowed_packet that cannot hold the largest stand-in
 * (IDEM_STAND_IN_MAX, 17024 bytes) besides the commit's 4 KiB of slack is
 * refused at start-up with a message that names it.  It used to record no
 * packet limit at 4096 or less, so start-up passed and every commit, the
 * stand-in's too, then failed; and a packet of a few KiB more let a
 * stand-in with long Location headers fail, its key to run again.  On a
 * server of its own: it changes a global. */
Test(mysql, refuses_a_packet_that_holds_no_answer, .timeout = 120)
{
	char text[1024], section[600], *log;
	idem_config *cfg;
	idem_service *svc = NULL;
	idem_store *s = NULL;
	harness_capture cap;
	mariadb m;

	cr_assert_eq(mariadb_start(&m), 0);
	mariadb_conf(&m, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n"
	    "max-response = 512\n%spool-size = 1\n", section);
	free(mariadb_sql(&m, "SET GLOBAL max_allowed_packet = 20480"));
	cr_assert_eq(harness_capture_begin(&cap), 0);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	cr_expect_null(s);
	idem_store_close(s);
	s = NULL;
	idem_config_free(cfg);
	/* and so idemfcgi does not start, whatever max-response says */
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_expect_neq(idem_service_new(cfg, "/nowhere", &svc), IDEM_OK);
	idem_service_free(svc);
	log = harness_capture_end(&cap);
	cr_assert_not_null(log);
	cr_expect_not_null(strstr(log, "max_allowed_packet is 20480 bytes"),
	    "log: %s", log);
	free(log);
	/* one step up (the server counts in KiB) holds a stand-in: it opens */
	free(mariadb_sql(&m, "SET GLOBAL max_allowed_packet = 21504"));
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	if (s != NULL)
		cr_expect_eq(s->limits.total, 21504 - 4096);
	idem_store_close(s);
	idem_config_free(cfg);
	mariadb_destroy(&m);
}

/* Issue 12.1 and 12.2: max_allowed_packet lowered while the store runs.
 * The server drops the connection of a commit over it (which looks like
 * an outage); the store reads the new limit when it reconnects and says
 * IDEM_ERR_TOO_LARGE, so the answer gets its stand-in instead of being
 * retried forever.  On a server of its own: it changes a global. */
Test(mysql, packet_lowered_at_run_time, .timeout = 120)
{
	char text[1024], section[600], *out;
	idem_config *cfg;
	idem_store *s = NULL;
	idem_store_key k;
	idem_reserve_result rr;
	idem_stored_response big;
	unsigned char fp[32] = { 7 };
	size_t n = 2u << 20;
	mariadb m;

	cr_assert_eq(mariadb_start(&m), 0);
	mariadb_conf(&m, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n%s"
	    "pool-size = 1\n", section);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_assert_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	free(mariadb_sql(&m, "SET GLOBAL max_allowed_packet = 1048576"));
	/* every connection of the store goes: the next one reads 1 MiB */
	out = mariadb_sql(&m, "SELECT GROUP_CONCAT(CONCAT('KILL ', id) "
	    "SEPARATOR ';') FROM information_schema.processlist WHERE user = "
	    "'idem'");
	cr_assert_not_null(out);
	out[strcspn(out, "\n")] = '\0';
	if (out[0] != '\0' && strcmp(out, "NULL") != 0)
		free(mariadb_sql(&m, out));
	free(out);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "packet");
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	memset(&big, 0, sizeof(big));
	big.status = 201;
	big.body = calloc(1, n);
	big.body_len = n;
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, "o", 60000), &big),
	    IDEM_ERR_TOO_LARGE);
	big.body_len = 100;
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, "o", 60000), &big),
	    IDEM_OK,
	    "the record was still ours, in flight");
	free(big.body);
	idem_store_close(s);
	idem_config_free(cfg);
	mariadb_destroy(&m);
}

/* ------------------------------------------------ transactional routes */

#include <pthread.h>
#include <time.h>

#include <mysql.h>

#include "idem_mysql.h"
#include "idem_store_tx.h"

/* A store and a plugin-like pool whose connections carry the store's
 * transaction statements, as idem_app_mysql_pool makes them. */
typedef struct txenv {
	idem_config *cfg;
	idem_store *st;
	idem_mysql_pool *pool;
} txenv;

static txenv
tx_open(const char *extra)
{
	char text[1400], section[600];
	txenv e;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n%s\n%s"
	    "pool-size = 16\n", extra != NULL ? extra : "", section);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &e.cfg), IDEM_OK);
	cr_assert_eq(test_mysql_store(e.cfg, 16, &e.st), IDEM_OK);
	cr_assert_eq(test_mysql_pool(e.cfg, NULL, 0, 16, &e.pool), IDEM_OK);
	cr_assert_eq(test_mysql_tx_prepare(e.cfg, e.pool), IDEM_OK);
	return e;
}

static void
tx_close(txenv *e)
{
	idem_mysql_pool_free(e->pool);
	idem_store_close(e->st);
	idem_config_free(e->cfg);
}

static idem_store_key
tx_key(const char *name)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s-%ld-%d", name,
	    (long)time(NULL), (int)getpid());
	return k;
}

static const unsigned char TXFP[32] = { 7 };

static idem_stored_response
tx_answer(const char *body)
{
	idem_stored_response r;

	memset(&r, 0, sizeof(r));
	r.status = 201;
	r.headers = "Content-Type: text/plain\r\n";
	r.headers_len = strlen(r.headers);
	r.body = (char *)body;
	r.body_len = strlen(body);
	return r;
}

static void
tx_msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

Test(tx, commit_then_replay_everywhere)
{
	txenv e = tx_open(NULL);
	idem_store_key k = tx_key("txcommit");
	idem_stored_response a = tx_answer("committed once");
	idem_reserve_result rr;
	idem_mysql_conn *c = idem_mysql_get(e.pool);
	int unknown = 1;

	cr_assert_not_null(c);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k, TXFP, "o1", "r1",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_tx_record(e.st, &c->db, TEST_OWNED(&k, "o1", 60000),
	    &a), IDEM_OK);
	cr_assert_eq(idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k, "o1", 0), 1,
	    &unknown),
	    IDEM_OK);
	cr_expect_eq(unknown, 0);
	/* a two-phase reserve and a transactional one both replay it */
	cr_assert_eq(idem_store_reserve(e.st, TEST_REQ(&k, TXFP, "o2", "r2",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.body_len, strlen("committed once"));
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k, TXFP, "o3", "r3",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(memcmp(rr.response.body, "committed once", 14), 0);
	idem_reserve_result_clear(&rr);
	idem_mysql_put(e.pool, c);
	tx_close(&e);
}

Test(tx, rollback_leaves_nothing)
{
	txenv e = tx_open(NULL);
	idem_store_key k = tx_key("txrollback");
	idem_reserve_result rr;
	idem_store_record rec;
	idem_mysql_conn *c = idem_mysql_get(e.pool);
	int unknown;

	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k, TXFP, "o1", "r1",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	/* not seen by anybody before it commits: a lookup says only that
	 * an open transaction holds the key */
	cr_expect_eq(idem_store_lookup(e.st, &k, &rec), IDEM_ERR_BUSY);
	cr_assert_eq(idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k, "o1", 0), 0,
	    &unknown),
	    IDEM_OK);
	cr_expect_eq(idem_store_lookup(e.st, &k, &rec), IDEM_ERR_NOT_FOUND);
	cr_assert_eq(idem_store_reserve(e.st, TEST_REQ(&k, TXFP, "o2", "r2",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_mysql_put(e.pool, c);
	tx_close(&e);
}

/* A transaction held open for hold_ms, then committed. */
typedef struct holder {
	txenv *e;
	idem_store_key k;
	const char *owner;
	long hold_ms;
	idem_err begin, end;
	idem_reserve_outcome outcome;
} holder;

static void *
hold(void *arg)
{
	holder *h = arg;
	idem_stored_response a = tx_answer(h->owner);
	idem_mysql_conn *c = idem_mysql_get(h->e->pool);
	idem_reserve_result rr;
	int unknown;

	/* an inflight-ttl of 100 ms: a reservation idle longer is stale */
	h->begin = idem_store_tx_begin(h->e->st, &c->db, TEST_REQ(&h->k, TXFP,
	    h->owner, "r", 100, 60000), &rr);
	h->outcome = rr.outcome;
	idem_reserve_result_clear(&rr);
	if (h->begin == IDEM_OK && (rr.outcome == IDEM_RESERVE_ACQUIRED ||
	    rr.outcome == IDEM_RESERVE_TAKEN_OVER)) {
		tx_msleep(h->hold_ms);
		h->end = idem_store_tx_record(h->e->st, &c->db, TEST_OWNED(&h->k,
		    h->owner, 60000), &a);
		if (h->end == IDEM_OK)
			h->end = idem_store_tx_end(h->e->st, &c->db,
			    TEST_OWNED(&h->k, h->owner, 0), 1, &unknown);
	}
	idem_mysql_put(h->e->pool, c);
	return NULL;
}

/* With inflight-wait 0 a duplicate answers busy (someone holds the key)
 * after the shortest lock wait, a second; with inflight-wait 4s it waits
 * for the commit and replays. */
Test(tx, duplicates_wait_up_to_inflight_wait, .timeout = 60)
{
	txenv e0 = tx_open(NULL), e3 = tx_open("inflight-wait = 4s");
	holder h = { &e0, tx_key("txdup"), "first", 3500, 0, 0, 0 };
	idem_reserve_result rr;
	idem_mysql_conn *c;
	pthread_t t;

	pthread_create(&t, NULL, hold, &h);
	tx_msleep(300);
	cr_expect_eq(idem_store_reserve(e0.st, TEST_REQ(&h.k, TXFP, "dup", "r",
	    30000, 60000), &rr), IDEM_ERR_BUSY);
	c = idem_mysql_get(e0.pool);
	cr_expect_eq(idem_store_tx_begin(e0.st, &c->db, TEST_REQ(&h.k, TXFP, "dup",
	    "r", 30000, 60000), &rr), IDEM_ERR_BUSY);
	idem_mysql_put(e0.pool, c);
	/* waits on the row lock until the first commits */
	c = idem_mysql_get(e3.pool);
	cr_assert_eq(idem_store_tx_begin(e3.st, &c->db, TEST_REQ(&h.k, TXFP, "dup",
	    "r", 30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.body_len, strlen("first"));
	idem_reserve_result_clear(&rr);
	idem_mysql_put(e3.pool, c);
	pthread_join(t, NULL);
	cr_expect_eq(h.begin, IDEM_OK);
	cr_expect_eq(h.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(h.end, IDEM_OK);
	tx_close(&e0);
	tx_close(&e3);
}

/* The old owner of a stale two-phase reservation that a transaction took
 * over cannot commit: its UPDATE waits for the transaction, then finds
 * another owner. */
typedef struct late {
	idem_store *st;
	idem_store_key k;
	idem_err err;
} late;

static void *
late_commit(void *arg)
{
	late *l = arg;
	idem_stored_response a = tx_answer("old");

	l->err = idem_store_commit(l->st, TEST_OWNED(&l->k, "old", 60000), &a);
	return NULL;
}

Test(tx, takeover_fences_the_old_owner, .timeout = 60)
{
	txenv e = tx_open(NULL);
	idem_store_key k = tx_key("txtakeover");
	idem_stored_response a = tx_answer("new");
	idem_reserve_result rr;
	idem_store_record rec;
	idem_mysql_conn *c = idem_mysql_get(e.pool);
	late l = { e.st, k, IDEM_OK };
	pthread_t t;
	int unknown;

	cr_assert_eq(idem_store_reserve(e.st, TEST_REQ(&k, TXFP, "old", "r",
	    100, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	tx_msleep(300);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k, TXFP, "new",
	    "r2", 100, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_TAKEN_OVER);
	cr_expect_str_eq(rr.owner, "old");
	pthread_create(&t, NULL, late_commit, &l);
	tx_msleep(300);
	cr_assert_eq(idem_store_tx_record(e.st, &c->db, TEST_OWNED(&k, "new", 60000),
	    &a),
	    IDEM_OK);
	cr_assert_eq(idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k, "new", 0), 1,
	    &unknown),
	    IDEM_OK);
	pthread_join(t, NULL);
	/* refused (or, with a lock wait of 0, contended): never stored */
	cr_expect(l.err == IDEM_ERR_NOT_FOUND || l.err == IDEM_ERR_BUSY,
	    "old owner's commit: %s", idem_strerror(l.err));
	cr_assert_eq(idem_store_lookup(e.st, &k, &rec), IDEM_OK);
	cr_expect_eq(rec.state, IDEM_RECORD_COMMITTED);
	cr_expect_str_eq(rec.owner, "new");
	cr_expect_eq(idem_store_commit(e.st, TEST_OWNED(&k, "old", 60000), &a),
	    IDEM_ERR_NOT_FOUND);
	idem_mysql_put(e.pool, c);
	tx_close(&e);
}

#include "idem_metrics.h"

/*
 * Contention comes back in the descriptor of the request that met it: a
 * two-phase statement's and a transaction's alike, and the metrics count
 * none of it themselves (the caller counts it on its route).  A
 * transaction holds a key's row lock; a two-phase reservation of the key
 * and another transaction's wait for it (a lock wait: once each), and
 * give up.
 */
Test(tx, contention_comes_back_in_the_descriptor, .timeout = 60)
{
	txenv e = tx_open(NULL);
	idem_store_key k = tx_key("txrow");
	idem_key_policy pol = { .lifetime_ms = 60000, .lease_ms = 30000 };
	idem_store_req hold = { .policy = &pol }, waiter = hold,
	    tx_waiter = hold;
	idem_mysql_conn *c = idem_mysql_get(e.pool), *c2 = idem_mysql_get(e.pool);
	idem_reserve_result rr;
	idem_metrics *m;
	char *text;
	size_t len;
	int unknown;

	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	idem_store_set_metrics(e.st, m);
	test_req_fill(&hold, &k, TXFP, "h", "r1");
	test_req_fill(&waiter, &k, TXFP, "w", "r2");
	test_req_fill(&tx_waiter, &k, TXFP, "t", "r3");
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, &hold, &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(idem_store_reserve(e.st, &waiter, &rr), IDEM_ERR_BUSY);
	cr_expect_eq(idem_store_tx_begin(e.st, &c2->db, &tx_waiter, &rr),
	    IDEM_ERR_BUSY);
	cr_expect_eq(idem_store_tx_end(e.st, &c->db, &hold, 0, &unknown), IDEM_OK);
	cr_expect_eq(waiter.contended, 1);
	cr_expect_eq(tx_waiter.contended, 1);
	cr_expect_eq(hold.contended, 0);
	text = idem_metrics_render(m, NULL, &len);
	cr_assert_not_null(text);
	cr_expect_eq(harness_route_outcome(text, "", "", "contended"), 0);
	free(text);
	idem_store_set_metrics(e.st, NULL);
	idem_metrics_free(m);
	idem_mysql_put(e.pool, c);
	idem_mysql_put(e.pool, c2);
	tx_close(&e);
}

/* Many transactions race to take over one stale reservation: one wins. */
Test(tx, racing_takeovers_one_winner, .timeout = 60)
{
	txenv e = tx_open(NULL);
	holder h[8];
	idem_reserve_result rr;
	pthread_t t[8];
	int i, won = 0, committed = 0;
	idem_store_key k = tx_key("txrace");

	cr_assert_eq(idem_store_reserve(e.st, TEST_REQ(&k, TXFP, "dead", "r",
	    100, 60000), &rr), IDEM_OK);
	tx_msleep(300);
	for (i = 0; i < 8; i++) {
		h[i] = (holder){ &e, k, NULL, 300, 0, 0, 0 };
		h[i].owner = i == 0 ? "t0" : i == 1 ? "t1" : i == 2 ? "t2" :
		    i == 3 ? "t3" : i == 4 ? "t4" : i == 5 ? "t5" : i == 6 ? "t6" :
		    "t7";
		pthread_create(&t[i], NULL, hold, &h[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		if (h[i].begin == IDEM_OK && h[i].outcome ==
		    IDEM_RESERVE_TAKEN_OVER) {
			won++;
			committed += h[i].end == IDEM_OK;
		}
	}
	cr_expect_eq(won, 1);
	cr_expect_eq(committed, 1);
	tx_close(&e);
}

/* A transaction whose connection the server kills (a partition, an
 * operator, a dead worker) is rolled back whole: it cannot commit, and the
 * key is free for a retry. */
Test(tx, killed_connection_cannot_commit, .timeout = 60)
{
	txenv e = tx_open(NULL);
	idem_store_key k = tx_key("txkilled");
	idem_stored_response a = tx_answer("never");
	idem_reserve_result rr;
	idem_store_record rec;
	idem_mysql_conn *c = idem_mysql_get(e.pool);
	char sql[64], *out;
	idem_err err;
	mariadb m;
	int unknown = 0;

	mariadb_from_env(&m);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k, TXFP,
	    "killed-o1", "r1", 30000, 60000), &rr), IDEM_OK);
	snprintf(sql, sizeof(sql), "KILL %lu", mysql_thread_id(c->m));
	free(mariadb_sql(&m, sql));
	tx_msleep(200);
	err = idem_store_tx_record(e.st, &c->db, TEST_OWNED(&k, "killed-o1", 60000),
	    &a);
	if (err == IDEM_OK)
		err = idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k, "killed-o1", 0),
		    1, &unknown);
	cr_expect_neq(err, IDEM_OK);
	idem_mysql_put(e.pool, c);
	cr_expect_eq(idem_store_lookup(e.st, &k, &rec), IDEM_ERR_NOT_FOUND);
	out = mariadb_sql(&m, "SELECT COUNT(*) FROM idempotency_keys WHERE "
	    "owner = 'killed-o1'");
	cr_expect(out != NULL && atoi(out) == 0, "%s", out ? out : "?");
	free(out);
	tx_close(&e);
}

/* A COMMIT whose connection is lost: its outcome is read back, never
 * guessed. */
Test(tx, lost_commit_is_resolved, .timeout = 60)
{
	txenv e = tx_open(NULL);
	idem_store_key k1 = tx_key("txlost-in"), k2 = tx_key("txlost-before");
	idem_stored_response a = tx_answer("maybe");
	idem_reserve_result rr;
	idem_store_record rec;
	idem_mysql_conn *c;
	int unknown = 1;

	/* COMMIT sent, then the connection cut: it committed */
	c = idem_mysql_get(e.pool);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k1, TXFP, "o1",
	    "r1", 30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(idem_store_tx_record(e.st, &c->db, TEST_OWNED(&k1, "o1", 60000),
	    &a),
	    IDEM_OK);
	idem_store_tx_faults(&c->db, IDEM_TX_FAULT_LOSE_IN_COMMIT);
	cr_expect_eq(idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k1, "o1", 0), 1,
	    &unknown),
	    IDEM_OK);
	cr_expect_eq(unknown, 0);
	idem_mysql_put(e.pool, c);
	cr_assert_eq(idem_store_lookup(e.st, &k1, &rec), IDEM_OK);
	cr_expect_eq(rec.state, IDEM_RECORD_COMMITTED);
	/* cut before COMMIT: it did not */
	unknown = 1;
	c = idem_mysql_get(e.pool);
	cr_assert_not_null(c);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k2, TXFP, "o2",
	    "r2", 30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(idem_store_tx_record(e.st, &c->db, TEST_OWNED(&k2, "o2", 60000),
	    &a),
	    IDEM_OK);
	idem_store_tx_faults(&c->db, IDEM_TX_FAULT_LOSE_BEFORE_COMMIT);
	cr_expect_eq(idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k2, "o2", 0), 1,
	    &unknown),
	    IDEM_ERR_STORE);
	cr_expect_eq(unknown, 0);
	idem_mysql_put(e.pool, c);
	cr_expect_eq(idem_store_lookup(e.st, &k2, &rec), IDEM_ERR_NOT_FOUND);
	tx_close(&e);
}

/* A transaction the server rolls back on its own (a deadlock victim) is
 * followed by a new transaction, never by statements that commit alone:
 * a handler that goes on writing after the error has them rolled back
 * with the rest. */
typedef struct locker {
	idem_mysql_conn *c;
	const char *first, *second;
	unsigned err;        /* of the second statement */
} locker;

static void *
lock_two(void *arg)
{
	locker *l = arg;

	mysql_query(l->c->m, l->first);
	tx_msleep(300);
	l->err = mysql_query(l->c->m, l->second) != 0 ? mysql_errno(l->c->m) : 0;
	return NULL;
}

Test(tx, writes_after_a_deadlock_never_commit_alone, .timeout = 60)
{
	txenv e = tx_open(NULL);
	idem_store_key ka = tx_key("txdeadlock-a"), kb = tx_key("txdeadlock-b");
	idem_reserve_result rr;
	idem_mysql_conn *a = idem_mysql_take(e.pool), *b = idem_mysql_take(e.pool);
	locker la = { a, "UPDATE tx_rows SET v = v + 1 WHERE id = 1",
	    "UPDATE tx_rows SET v = v + 1 WHERE id = 2", 0 };
	locker lb = { b, "UPDATE tx_rows SET v = v + 1 WHERE id = 2",
	    "UPDATE tx_rows SET v = v + 1 WHERE id = 1", 0 };
	idem_mysql_conn *victim;
	pthread_t ta, tb;
	int unknown;
	char *out;
	mariadb m;

	mariadb_from_env(&m);
	free(mariadb_sql(&m, "CREATE TABLE IF NOT EXISTS tx_rows (id INT "
	    "PRIMARY KEY, v INT) ENGINE = InnoDB; INSERT IGNORE INTO tx_rows "
	    "VALUES (1, 0), (2, 0); CREATE TABLE IF NOT EXISTS tx_after (k "
	    "VARCHAR(255)) ENGINE = InnoDB; GRANT ALL ON idem.* TO "
	    "'idem'@'localhost'"));
	cr_assert_eq(idem_store_tx_begin(e.st, &a->db, TEST_REQ(&ka, TXFP, "dl-a",
	    "r", 30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(idem_store_tx_begin(e.st, &b->db, TEST_REQ(&kb, TXFP, "dl-b",
	    "r", 30000, 60000), &rr), IDEM_OK);
	pthread_create(&ta, NULL, lock_two, &la);
	pthread_create(&tb, NULL, lock_two, &lb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert(la.err == 1213 || lb.err == 1213, "no deadlock: %u %u",
	    la.err, lb.err);
	victim = la.err == 1213 ? a : b;
	/* the handler goes on as if nothing happened */
	cr_assert_eq(mysql_query(victim->m, victim == a ?
	    "INSERT INTO tx_after VALUES ('after-deadlock-a')" :
	    "INSERT INTO tx_after VALUES ('after-deadlock-b')"), 0);
	/* its answer's record finds no reservation: rolled back, all of it */
	cr_expect_eq(idem_store_tx_record(e.st, &victim->db,
	    TEST_OWNED(victim == a ? &ka : &kb, victim == a ? "dl-a" : "dl-b",
	    60000), &(idem_stored_response){ 201, NULL, 0, NULL, 0 }),
	    IDEM_ERR_NOT_FOUND);
	idem_store_tx_end(e.st, &(victim == a ? b : a)->db, TEST_OWNED(NULL, NULL, 0),
	    0, &unknown);
	out = mariadb_sql(&m, "SELECT COUNT(*) FROM tx_after WHERE k LIKE "
	    "'after-deadlock-%'");
	cr_expect(out != NULL && atoi(out) == 0, "a write after the deadlock "
	    "committed on its own: %s", out != NULL ? out : "?");
	free(out);
	idem_mysql_put(e.pool, a);
	idem_mysql_put(e.pool, b);
	tx_close(&e);
}

/* On the REUSE (and TAKEOVER) path the reservation reads the row: were
 * that a consistent read, the REPEATABLE READ snapshot of the handler's
 * transaction would date from the reservation, and a row committed
 * between the two would be invisible to the handler (the ledger would
 * answer, and store, ACCOUNT_NOT_FOUND for an account that exists).  The
 * read is a locking one, which opens no snapshot. */
Test(tx, handler_snapshot_starts_at_its_first_read, .timeout = 60)
{
	txenv e = tx_open(NULL);
	idem_store_key k = tx_key("rvsnapshot");
	idem_stored_response a = tx_answer("old");
	idem_reserve_result rr;
	idem_mysql_conn *c;
	mariadb m;
	char *out;
	MYSQL_RES *res;
	MYSQL_ROW row;
	int seen = -1, unknown;

	mariadb_from_env(&m);
	free(mariadb_sql(&m, "CREATE TABLE IF NOT EXISTS rv_acc (id INT "
	    "PRIMARY KEY) ENGINE = InnoDB; DELETE FROM rv_acc; GRANT ALL ON "
	    "idem.* TO 'idem'@'localhost'"));
	/* a record committed with a 1 ms lifetime: expired */
	cr_assert_eq(idem_store_reserve(e.st, TEST_REQ(&k, TXFP, "o0", "r",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(idem_store_commit(e.st, TEST_OWNED(&k, "o0", 1), &a),
	    IDEM_OK);
	tx_msleep(50);
	c = idem_mysql_get(e.pool);
	cr_assert_eq(idem_store_tx_begin(e.st, &c->db, TEST_REQ(&k, TXFP, "o1", "r1",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	/* committed by somebody else after the reservation, before the
	 * handler reads */
	out = mariadb_sql(&m, "INSERT INTO rv_acc VALUES (1)");
	free(out);
	/* the handler's first read */
	cr_assert_eq(mysql_query(c->m, "SELECT COUNT(*) FROM rv_acc"), 0);
	res = mysql_store_result(c->m);
	if (res != NULL && (row = mysql_fetch_row(res)) != NULL)
		seen = atoi(row[0]);
	mysql_free_result(res);
	idem_store_tx_end(e.st, &c->db, TEST_OWNED(&k, "o1", 0), 0, &unknown);
	idem_mysql_put(e.pool, c);
	cr_expect_eq(seen, 1, "the handler's first read did not see a row "
	    "committed before it ran (snapshot taken at reservation)");
	tx_close(&e);
}

/* ------------------------------------------------- several hosts (15) */

/* Reserves key on s as owner; returns the outcome, or -1 on an error. */
static int
reserve_as(idem_store *s, const char *key, const char *owner)
{
	unsigned char fp[32] = { 7 };
	idem_store_key k;
	idem_reserve_result rr;
	int outcome;

	memset(&k, 0, sizeof(k));
	snprintf(k.key, sizeof(k.key), "%s", key);
	k.key_len = strlen(k.key);
	memset(&rr, 0, sizeof(rr));
	if (idem_store_reserve(s, TEST_REQ(&k, fp, owner, "rid", 30000, 60000),
	    &rr) !=
	    IDEM_OK)
		return -1;
	outcome = (int)rr.outcome;
	idem_reserve_result_clear(&rr);
	return outcome;
}

/* Releases key on s as owner. */
static idem_err
release_as(idem_store *s, const char *key, const char *owner)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	snprintf(k.key, sizeof(k.key), "%s", key);
	k.key_len = strlen(k.key);
	return idem_store_release(s, TEST_OWNED(&k, owner, 0));
}

/* [mysql] host lists its servers in failover order: a connection opens on
 * the first that accepts it.  A dead first host (a port nothing listens
 * on) costs a refused connection, then the next host serves; the error is
 * logged, naming the host and "trying the next host". */
Test(mysql, next_host_when_the_first_is_down)
{
	char text[1024], key[64], *log;
	idem_config *cfg;
	idem_store *s = NULL;
	harness_capture cap;
	mariadb m;
	int dead = harness_free_port();

	cr_assert_eq(mariadb_from_env(&m), 0);
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n"
	    "[mysql]\nhost = 127.0.0.1:%d 127.0.0.1:%d\nuser = idem\n"
	    "password-file = %s/password\ndatabase = idem\npool-size = 2\n"
	    "connect-timeout = 2s\n", dead, m.port, m.dir);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_assert_eq(harness_capture_level(&cap, IDEM_LOG_WARN), 0);
	cr_expect_eq(test_mysql_store(cfg, 2, &s), IDEM_OK);
	snprintf(key, sizeof(key), "next-host-%d", (int)getpid());
	if (s != NULL) {
		cr_expect_eq(reserve_as(s, key, "owner-a"),
		    IDEM_RESERVE_ACQUIRED);
		cr_expect_eq(release_as(s, key, "owner-a"), IDEM_OK);
	}
	log = harness_capture_end(&cap);
	cr_assert_not_null(log);
	snprintf(text, sizeof(text), "cannot connect to 127.0.0.1:%d as idem",
	    dead);
	cr_expect_not_null(strstr(log, text), "%s", log);
	cr_expect_not_null(strstr(log, "trying the next host"), "%s", log);
	snprintf(text, sizeof(text), "connected to 127.0.0.1:%d, host 2 of "
	    "the list", m.port);
	cr_expect_not_null(strstr(log, text), "%s", log);
	free(log);
	idem_store_close(s);
	idem_config_free(cfg);
}

/* Every host down: the store does not open. */
Test(mysql, no_host_up)
{
	char text[512];
	idem_config *cfg;
	idem_store *s = NULL;

	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n"
	    "[mysql]\nhost = 127.0.0.1:%d [::1]:%d\nuser = idem\n"
	    "database = idem\npool-size = 1\n", harness_free_port(),
	    harness_free_port());
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_ERR_STORE);
	cr_expect_null(s);
	idem_config_free(cfg);
}

/* causal-reads prepares the causal variants of the deciding reads; on a
 * server without Galera they run as plain reads. */
Test(mysql, causal_reads_on_a_plain_server)
{
	idem_config *cfg = config(2);
	idem_store *s = NULL;
	char key[64];

	cfg->mysql.causal_reads = 1;
	cr_assert_eq(test_mysql_store(cfg, 2, &s), IDEM_OK);
	snprintf(key, sizeof(key), "causal-%d", (int)getpid());
	cr_expect_eq(reserve_as(s, key, "owner-a"), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(reserve_as(s, key, "owner-b"), IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(release_as(s, key, "owner-a"), IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
}

/* ------------------------------------------------- the replay cache (16) */

/* Whether two answers are the same, byte for byte. */
static int
same_answer(const idem_stored_response *a, const idem_stored_response *b)
{
	return a->status == b->status && a->headers_len == b->headers_len &&
	    a->body_len == b->body_len &&
	    memcmp(a->headers, b->headers, a->headers_len) == 0 &&
	    memcmp(a->body, b->body, a->body_len) == 0;
}

/*
 * A replay answered from the replay cache is the database's answer, byte
 * for byte (a binary body with NUL bytes, its headers, its status and
 * fingerprint), as a store without the cache reads it, and says it came
 * from the cache (the middleware counts its replay as replay_cached); a
 * request with another fingerprint gets the record's (the middleware's
 * conflict, no replay); and once the record's lifetime is over the cache
 * serves nothing: the key is reserved again.
 */
Test(mysql, replay_cache_same_answer_never_past_expiry, .timeout = 60)
{
	idem_config *cfg = config(2), *nocfg = config(2);
	idem_store *s = NULL, *plain = NULL;
	unsigned char fp[32] = { 3, 1, 4 }, fp2[32] = { 2, 7 };
	idem_store_key k;
	idem_reserve_result db, hit, other, via_plain;
	char body[256];
	idem_stored_response a = { .status = 201 };
	int i;

	nocfg->mysql.replay_cache = 0;
	cr_assert_eq(test_mysql_store(cfg, 2, &s), IDEM_OK);
	cr_assert_eq(test_mysql_store(nocfg, 2, &plain), IDEM_OK);
	for (i = 0; i < (int)sizeof(body); i++)
		body[i] = (char)i;
	a.headers = "Location: /things/1\r\nContent-Type: application/"
	    "octet-stream\r\n";
	a.headers_len = strlen(a.headers);
	a.body = body;
	a.body_len = sizeof(body);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "cache-%d-%ld",
	    (int)getpid(), (long)time(NULL));
	memset(&db, 0, sizeof(db));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o1", "r1", 30000,
	    2000), &db), IDEM_OK);
	cr_assert_eq(db.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, "o1", 2000), &a),
	    IDEM_OK);

	/* the first replay reads the database, the second the cache */
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o2", "r2", 30000,
	    2000), &db), IDEM_OK);
	cr_assert_eq(db.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(db.cached, 0);
	memset(&hit, 0, sizeof(hit));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o3", "r3", 30000,
	    2000), &hit), IDEM_OK);
	cr_assert_eq(hit.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(hit.cached, 1);
	memset(&via_plain, 0, sizeof(via_plain));
	cr_assert_eq(idem_store_reserve(plain, TEST_REQ(&k, fp, "o4", "r4",
	    30000, 2000), &via_plain), IDEM_OK);
	cr_assert_eq(via_plain.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(via_plain.cached, 0);
	cr_expect(same_answer(&hit.response, &db.response));
	cr_expect(same_answer(&hit.response, &via_plain.response));
	cr_expect(same_answer(&hit.response, &a));
	cr_expect_eq(memcmp(hit.fingerprint, fp, 32), 0);
	cr_expect_eq(memcmp(via_plain.fingerprint, fp, 32), 0);
	/* another request with the key: the record's fingerprint comes back */
	memset(&other, 0, sizeof(other));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp2, "o5", "r5", 30000,
	    2000), &other), IDEM_OK);
	cr_expect_eq(other.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(memcmp(other.fingerprint, fp, 32), 0);
	cr_expect_eq(other.cached, 1);
	idem_reserve_result_clear(&db);
	idem_reserve_result_clear(&hit);
	idem_reserve_result_clear(&other);
	idem_reserve_result_clear(&via_plain);

	/* past the lifetime (2 s from the commit): reserved again, once */
	usleep(2200 * 1000);
	cr_expect_eq(reserve_as(s, k.key, "o6"), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(reserve_as(plain, k.key, "o7"), IDEM_RESERVE_IN_FLIGHT);
	idem_store_close(s);
	idem_store_close(plain);
	idem_config_free(cfg);
	idem_config_free(nocfg);
}

/*
 * Issue 23: a statement applied whose answer was lost with its
 * connection is sent again on a new one, and the store recognises its own
 * work.  A takeover applied so is ours (TAKEN_OVER, not IN_FLIGHT under
 * our own owner, which nobody would renew); a commit, a release and a
 * reservation applied so are ours too.
 */
Test(mysql, answers_lost_after_the_statement_applied, .timeout = 60)
{
	idem_config *cfg = config(4);
	idem_store *s = NULL;
	unsigned char fp[32] = { 7 };
	idem_stored_response resp = { .status = 201, .body = "ok",
	    .body_len = 2 };
	idem_reserve_result rr;
	idem_store_key k;
	char key[64];

	cr_assert_eq(test_mysql_store(cfg, 4, &s), IDEM_OK);
	cr_assert_eq(idem_store_mysql_lose_answer(s, "nothing"), -1);
	snprintf(key, sizeof(key), "lost-answer-%d", (int)getpid());
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s", key);

	/* the reservation's INSERT */
	cr_assert_eq(idem_store_mysql_lose_answer(s, "insert"), 0);
	memset(&rr, 0, sizeof(rr));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "old.1", "rid", 1,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	/* a takeover of it (its lease 1 ms: stale at once) */
	tx_msleep(20);
	cr_assert_eq(idem_store_mysql_lose_answer(s, "takeover"), 0);
	memset(&rr, 0, sizeof(rr));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "new.1", "rid2", 1,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_TAKEN_OVER, "outcome %d",
	    (int)rr.outcome);
	cr_expect_str_eq(rr.owner, "old.1");
	idem_reserve_result_clear(&rr);
	/* renewed and committed by its new owner, each answer lost once */
	cr_assert_eq(idem_store_mysql_lose_answer(s, "renew"), 0);
	cr_expect_eq(idem_store_renew(s, TEST_OWNED(&k, "new.1", 0)), IDEM_OK);
	cr_assert_eq(idem_store_mysql_lose_answer(s, "commit"), 0);
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, "new.1", 60000),
	    &resp), IDEM_OK);
	cr_expect_eq(reserve_as(s, key, "third.1"), IDEM_RESERVE_COMMITTED);

	/* a release */
	snprintf(key, sizeof(key), "lost-release-%d", (int)getpid());
	cr_expect_eq(reserve_as(s, key, "rel.1"), IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_mysql_lose_answer(s, "release"), 0);
	cr_expect_eq(release_as(s, key, "rel.1"), IDEM_OK);
	cr_expect_eq(reserve_as(s, key, "rel.2"), IDEM_RESERVE_ACQUIRED);
	idem_store_close(s);
	idem_config_free(cfg);
}
