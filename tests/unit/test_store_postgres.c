/*
 * test_store_postgres.c - the store suite on the PostgreSQL store, against
 * a private PostgreSQL this program starts (and stops) around its tests;
 * and what is the PostgreSQL store's own: the schema checks at open, lost
 * answers read back, a frozen server.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_store_postgres.h"
#include "harness.h"
#include "postgres.h"
#include "store_suite.h"
#include "store_req.h"

/* where make install puts the schema (-DIDEM_TEST_PG_SCHEMADIR) */
#ifndef IDEM_TEST_PG_SCHEMADIR
#error "IDEM_TEST_PG_SCHEMADIR is set by Makefile.am"
#endif

/* The config of server pg with extra lines for [postgres]. */
static idem_config *
config_of(const postgres *pg, const char *extra)
{
	char text[2048], section[700];
	idem_config *cfg;

	postgres_conf(pg, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = postgres\n%s%s",
	    section, extra != NULL ? extra : "");
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK,
	    "%s", text);
	return cfg;
}

/* The config of the shared server. */
static idem_config *
config(void)
{
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	return config_of(&pg, NULL);
}

/* The PostgreSQL store of cfg with pool_size connections, as the factory
 * opens it. */
static idem_err
open_pg(const idem_config *cfg, unsigned pool_size, idem_store **out)
{
	idem_store_opts o = idem_store_opts_of(cfg, pool_size);

	return idem_store_postgres_new(&cfg->postgres, &o, out);
}

/* A pool of 16, opened whole (the store warms it): the suite's races
 * meet connections ready, and 64 racers share them. */
idem_store *
suite_open(void)
{
	idem_config *cfg = config();
	idem_store *s = NULL;

	cr_assert_eq(open_pg(cfg, 16, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

/* Opens cfg's store with the log captured into log; returns what the
 * constructor returned (the store, if any, closed). */
static idem_err
open_logged(idem_config *cfg, char *log, size_t size)
{
	harness_capture cap;
	idem_store *s = NULL;
	idem_err err;

	harness_capture_level(&cap, IDEM_LOG_INFO);
	err = open_pg(cfg, 1, &s);
	harness_capture_into(&cap, log, size);
	idem_store_close(s);
	return err;
}

/* A database without the tables: refused with the hint, naming the
 * installed schema file. */
Test(postgres, refuses_missing_schema)
{
	idem_config *cfg;
	char log[4096];
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	free(postgres_sql(&pg, "CREATE DATABASE empty_db OWNER idem"));
	cfg = config_of(&pg, NULL);
	free(cfg->postgres.database);
	cfg->postgres.database = strdup("empty_db");
	cr_expect_eq(open_logged(cfg, log, sizeof(log)), IDEM_ERR_STORE);
	cr_expect(strstr(log, "42P01") != NULL, "%s", log);
	cr_expect(strstr(log, "database empty_db lacks the tables of "
	    "idemfcgi: apply " IDEM_TEST_PG_SCHEMADIR "/001_idempotency_keys.sql "
	    "and the files after it, in order") != NULL, "%s", log);
	idem_config_free(cfg);
}

/* Another error than a missing table (a database that does not exist):
 * no schema hint, which would send the operator astray. */
Test(postgres, no_schema_hint_for_other_errors)
{
	idem_config *cfg = config();
	char log[4096];

	free(cfg->postgres.database);
	cfg->postgres.database = strdup("no_such_db");
	cr_expect_eq(open_logged(cfg, log, sizeof(log)), IDEM_ERR_STORE);
	cr_expect(strstr(log, "no_such_db\" does not exist") != NULL, "%s",
	    log);
	cr_expect(strstr(log, "lacks the tables") == NULL, "%s", log);
	cr_expect(strstr(log, "apply") == NULL, "%s", log);
	idem_config_free(cfg);
}

/* A schema of an older version is refused, naming what to apply. */
Test(postgres, refuses_old_schema)
{
	idem_config *cfg;
	char log[4096];
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	cr_assert_eq(postgres_new_database(&pg, "old_db"), 0);
	cfg = config_of(&pg, NULL);
	free(cfg->postgres.database);
	cfg->postgres.database = strdup("old_db");
	cr_assert_eq(open_logged(cfg, log, sizeof(log)), IDEM_OK, "%s", log);
	/* the version table as a deployment before this one had it */
	free(postgres_sql_on(&pg, "old_db", "DELETE FROM idemfcgi_schema; "
	    "INSERT INTO idemfcgi_schema VALUES (0, now())"));
	cr_expect_eq(open_logged(cfg, log, sizeof(log)), IDEM_ERR_STORE);
	cr_expect(strstr(log, "database old_db has schema version 0, this "
	    "idemfcgi needs 2: apply the files of " IDEM_TEST_PG_SCHEMADIR
	    "/ after version 0, in order, up to 002_tombstones.sql") !=
	    NULL, "%s", log);
	idem_config_free(cfg);
}

Test(postgres, wrong_password)
{
	idem_config *cfg = config();
	char log[4096];
	FILE *fp = fopen("/tmp/idemfcgi-pg-wrong-pw", "w");

	cr_assert_not_null(fp);
	fputs("not-the-password\n", fp);
	fclose(fp);
	free(cfg->postgres.password_file);
	cfg->postgres.password_file = strdup("/tmp/idemfcgi-pg-wrong-pw");
	cr_expect_eq(open_logged(cfg, log, sizeof(log)), IDEM_ERR_STORE);
	cr_expect(strstr(log, "password authentication failed") != NULL, "%s",
	    log);
	cr_expect(strstr(log, "not-the-password") == NULL, "%s", log);
	free(cfg->postgres.password_file);
	cfg->postgres.password_file = strdup("/nonexistent/pw");
	cr_expect_eq(open_logged(cfg, log, sizeof(log)), IDEM_ERR_CONFIG);
	cr_expect(strstr(log, "password-file /nonexistent/pw") != NULL, "%s",
	    log);
	unlink("/tmp/idemfcgi-pg-wrong-pw");
	idem_config_free(cfg);
}

/* The owner of key's row, "" when there is none. */
static void
owner_of(const postgres *pg, const char *key, char *out, size_t size)
{
	char sql[256], *rows;

	snprintf(sql, sizeof(sql), "SELECT owner || '|' || state FROM "
	    "idempotency_keys WHERE idem_key = '%s'::bytea", key);
	rows = postgres_sql(pg, sql);
	cr_assert_not_null(rows);
	rows[strcspn(rows, "\n")] = '\0';
	snprintf(out, size, "%s", rows);
	free(rows);
}

/* A store of 16 connections that sends every statement alone ([postgres]
 * batch = false): the lost answers of a request's own statements. */
static idem_store *
open_unbatched(void)
{
	postgres pg;
	idem_config *cfg;
	idem_store *s = NULL;

	cr_assert_eq(postgres_from_env(&pg), 0);
	cfg = config_of(&pg, "batch = false\n");
	cr_assert_eq(open_pg(cfg, 16, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

/* A reservation whose answer is lost (applied, its connection gone) is
 * sent again: the second meets the row of its own owner and the reserve
 * is ACQUIRED, saying its write went unanswered.  On s, the keys named
 * with tag. */
static void
lost_insert(idem_store *s, const char *tag)
{
	idem_reserve_result rr;
	idem_store_req *rq;
	idem_store_key k;
	unsigned char fp[32] = { 3 };
	char owner[128];
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "lost-insert-%s-%d",
	    tag, (int)getpid());
	cr_assert_eq(idem_store_postgres_lose_answer(s, "insert"), 0);
	rq = TEST_REQ(&k, fp, "li.1", "rid", 30000, 60000);
	memset(&rr, 0, sizeof(rr));
	cr_assert_eq(idem_store_reserve(s, rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(rq->unanswered, 1);
	owner_of(&pg, k.key, owner, sizeof(owner));
	cr_expect_str_eq(owner, "li.1|in_flight");
	idem_reserve_result_clear(&rr);
	idem_store_close(s);
}

/* Through a batching lane (the statement of one lone request), and
 * alone. */
Test(postgres, lost_insert_answer_is_ours)
{
	lost_insert(suite_open(), "lane");
}

Test(postgres, lost_insert_answer_is_ours_unbatched)
{
	lost_insert(open_unbatched(), "alone");
}

/* An owner-checked write whose answer is lost, sent again, matches
 * nothing: the row read back says it was applied (commit: committed and
 * ours; release: gone), so the answer is IDEM_OK, never a false "fenced".
 * On s, the keys named with tag. */
static void
lost_commit_and_release(idem_store *s, const char *tag)
{
	idem_stored_response resp = { 201, "", 0, "made", 4 };
	idem_reserve_result rr;
	idem_store_key k;
	unsigned char fp[32] = { 4 };
	char owner[128];
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "lost-commit-%s-%d",
	    tag, (int)getpid());
	memset(&rr, 0, sizeof(rr));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "lc.1", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_postgres_lose_answer(s, "commit"), 0);
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, "lc.1", 60000), &resp),
	    IDEM_OK);
	owner_of(&pg, k.key, owner, sizeof(owner));
	cr_expect_str_eq(owner, "lc.1|committed");

	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "lost-release-%s-%d",
	    tag, (int)getpid());
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "lr.1", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_postgres_lose_answer(s, "release"), 0);
	cr_expect_eq(idem_store_release(s, TEST_OWNED(&k, "lr.1", 0)),
	    IDEM_OK);
	owner_of(&pg, k.key, owner, sizeof(owner));
	cr_expect_str_eq(owner, "");
	/* a release by someone who does not hold it is still refused */
	cr_expect_eq(idem_store_release(s, TEST_OWNED(&k, "lr.2", 0)),
	    IDEM_ERR_NOT_FOUND);
	idem_store_close(s);
}

Test(postgres, lost_commit_and_release_answers_read_back)
{
	lost_commit_and_release(suite_open(), "lane");
}

Test(postgres, lost_commit_and_release_answers_read_back_unbatched)
{
	lost_commit_and_release(open_unbatched(), "alone");
}

/* A takeover whose answer is lost: the row read back is ours, so the
 * reserve is TAKEN_OVER, and the old owner is fenced. */
Test(postgres, lost_takeover_answer_read_back)
{
	idem_store *s = suite_open();
	idem_reserve_result rr;
	idem_store_key k;
	unsigned char fp[32] = { 5 };
	char owner[128];
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "lost-takeover-%d",
	    (int)getpid());
	memset(&rr, 0, sizeof(rr));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "lt.1", "rid",
	    200, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	usleep(400000);
	cr_assert_eq(idem_store_postgres_lose_answer(s, "takeover"), 0);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "lt.2", "rid",
	    200, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_TAKEN_OVER);
	idem_reserve_result_clear(&rr);
	owner_of(&pg, k.key, owner, sizeof(owner));
	cr_expect_str_eq(owner, "lt.2|in_flight");
	cr_expect_eq(idem_store_renew(s, TEST_OWNED(&k, "lt.1", 0)),
	    IDEM_ERR_NOT_FOUND);
	idem_store_close(s);
}

/* A server that hangs (SIGSTOP, as a frozen VM or a cut network) costs
 * each operation its timeouts, then IDEM_ERR_STORE, never a hung caller;
 * once it is back, the store serves again by itself. */
Test(postgres, frozen_server_fails_closed_then_recovers, .timeout = 120)
{
	idem_config *cfg;
	idem_store *s = NULL;
	idem_reserve_result rr;
	idem_store_key k;
	unsigned char fp[32] = { 6 };
	postgres own;

	cr_assert_eq(postgres_start(&own), 0);
	cfg = config_of(&own, "connect-timeout = 1s\nread-timeout = 1s\n"
	    "write-timeout = 1s\n");
	cr_assert_eq(open_pg(cfg, 2, &s), IDEM_OK);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "frozen");
	memset(&rr, 0, sizeof(rr));
	cr_assert_eq(postgres_freeze(&own), 0);
	cr_expect_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "f.1", "rid", 30000,
	    60000), &rr), IDEM_ERR_STORE);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_ping(s), IDEM_ERR_STORE);
	cr_assert_eq(postgres_thaw(&own), 0);
	/* the statement sent to the frozen server may land as it thaws:
	 * ours, or none; never another's */
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "f.1", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_ping(s), IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
	postgres_destroy(&own);
}

/* A server that is down at open: refused, or set aside when the caller
 * may wait (the master's start) and no server answered. */
Test(postgres, down_at_open_set_aside_when_allowed)
{
	idem_config *cfg;
	idem_store *s = NULL;
	idem_store_opts o;
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	cfg = config_of(&pg, "connect-timeout = 1s\n");
	/* a port nothing listens on */
	cfg->postgres.port = (unsigned)harness_free_port();
	o = idem_store_opts_of(cfg, 1);
	cr_expect_eq(idem_store_postgres_new(&cfg->postgres, &o, &s),
	    IDEM_ERR_STORE);
	cr_expect_null(s);
	o.may_wait = 1;
	cr_assert_eq(idem_store_postgres_new(&cfg->postgres, &o, &s), IDEM_OK);
	cr_expect(idem_store_is_aside(s));
	idem_store_close(s);
	cr_expect_eq(idem_store_postgres_reachable(&cfg->postgres, "t.conf"), 0);
	idem_config_free(cfg);
	cfg = config();
	cr_expect_eq(idem_store_postgres_reachable(&cfg->postgres, "t.conf"), 1);
	idem_config_free(cfg);
}

/* A failure at the commit of a statement (here a deferred constraint
 * trigger raising a serialization failure, as SERIALIZABLE transactions
 * or a failed WAL write do) comes after the statement's own completion:
 * the statement was rolled back, and the store must say so, never OK.
 * A reservation so refused is contention (BUSY) and leaves no row; a
 * commit so refused is BUSY and leaves the record in flight. */
Test(postgres, failure_at_commit_is_not_success, .timeout = 60)
{
	idem_stored_response resp = { 201, "", 0, "made", 4 };
	idem_config *cfg;
	idem_store *s = NULL;
	idem_reserve_result rr;
	idem_store_key k;
	unsigned char fp[32] = { 8 };
	char *rows;
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	cr_assert_eq(postgres_new_database(&pg, "commit_fails"), 0);
	rows = postgres_sql_on(&pg, "commit_fails", "CREATE FUNCTION refuse() "
	    "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.owner = "
	    "'ci.1' OR (NEW.owner = 'ct.1' AND NEW.state = 'committed') THEN "
	    "RAISE EXCEPTION 'refused at commit' USING ERRCODE = "
	    "'serialization_failure'; END IF; RETURN NULL; END $$; "
	    "CREATE CONSTRAINT TRIGGER refuse AFTER INSERT OR UPDATE ON "
	    "idempotency_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
	    "EXECUTE FUNCTION refuse()");
	cr_assert_not_null(rows);
	free(rows);
	cfg = config_of(&pg, NULL);
	free(cfg->postgres.database);
	cfg->postgres.database = strdup("commit_fails");
	cr_assert_eq(open_pg(cfg, 2, &s), IDEM_OK);
	memset(&k, 0, sizeof(k));
	memset(&rr, 0, sizeof(rr));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "refused-insert");
	cr_expect_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "ci.1", "rid",
	    30000, 60000), &rr), IDEM_ERR_BUSY);
	idem_reserve_result_clear(&rr);
	rows = postgres_sql_on(&pg, "commit_fails", "SELECT count(*) FROM "
	    "idempotency_keys");
	cr_assert_not_null(rows);
	cr_expect_eq(atoi(rows), 0, "%s", rows);
	free(rows);
	/* another owner reserves it */
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "ok.1", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);

	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "refused-commit");
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "ct.1", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, "ct.1", 60000), &resp),
	    IDEM_ERR_BUSY);
	rows = postgres_sql_on(&pg, "commit_fails", "SELECT owner || '|' || "
	    "state FROM idempotency_keys WHERE idem_key = 'refused-commit'");
	cr_assert_not_null(rows);
	rows[strcspn(rows, "\n")] = '\0';
	cr_expect_str_eq(rows, "ct.1|in_flight");
	free(rows);
	idem_store_close(s);
	idem_config_free(cfg);
}

/* The round trips of each kind of request, counted by the store: a first
 * execution is two statements (the reserve with the row it met, the
 * commit), a replay none from the replay cache and one without it, a
 * conflict one, a release one after its reserve. */
Test(postgres, statements_per_request)
{
	idem_stored_response resp = { 201, "", 0, "made", 4 };
	idem_config *cfg;
	idem_store *s, *nocache = NULL;
	idem_reserve_result rr;
	idem_store_key k;
	unsigned char fp[32] = { 9 }, other[32] = { 10 };
	unsigned long long n;
	postgres pg;

	s = suite_open();
	memset(&k, 0, sizeof(k));
	memset(&rr, 0, sizeof(rr));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "count-%d",
	    (int)getpid());
	n = idem_store_postgres_statements(s);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "n.1", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, "n.1", 60000), &resp),
	    IDEM_OK);
	cr_expect_eq(idem_store_postgres_statements(s) - n, 2,
	    "a first execution: %llu statements",
	    idem_store_postgres_statements(s) - n);
	/* the first replay reads the row (and keeps the answer), the next
	 * ones send nothing */
	n = idem_store_postgres_statements(s);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "n.2", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.cached, 0);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_postgres_statements(s) - n, 1);
	n = idem_store_postgres_statements(s);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "n.3", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.cached, 1);
	cr_expect_eq(rr.response.body_len, 4);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_postgres_statements(s) - n, 0);
	/* another request with the key: the cached fingerprint tells */
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, other, "n.4", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(memcmp(rr.fingerprint, fp, 32), 0);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_postgres_statements(s) - n, 0);

	/* without the cache every replay reads */
	cr_assert_eq(postgres_from_env(&pg), 0);
	cfg = config_of(&pg, "replay-cache = 0\n");
	cr_assert_eq(open_pg(cfg, 2, &nocache), IDEM_OK);
	n = idem_store_postgres_statements(nocache);
	cr_assert_eq(idem_store_reserve(nocache, TEST_REQ(&k, fp, "n.5", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_reserve(nocache, TEST_REQ(&k, fp, "n.6", "rid",
	    30000, 60000), &rr), IDEM_OK);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_postgres_statements(nocache) - n, 2);

	/* a released execution: its reserve and its delete */
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "count-rel-%d",
	    (int)getpid());
	n = idem_store_postgres_statements(s);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "n.7", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_assert_eq(idem_store_release(s, TEST_OWNED(&k, "n.7", 0)), IDEM_OK);
	cr_expect_eq(idem_store_postgres_statements(s) - n, 2);
	idem_store_close(nocache);
	idem_config_free(cfg);
	idem_store_close(s);
}
