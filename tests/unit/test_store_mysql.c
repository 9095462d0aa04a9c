/*
 * test_store_mysql.c - the store suite on the MySQL store, against a
 * private MariaDB this program starts (and stops) around its tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_service.h"
#include "mariadb.h"
#include "store_suite.h"

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

	cr_assert_eq(idem_store_mysql_new(cfg, 64, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

Test(mysql, refuses_missing_schema)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	mariadb m;
	char *out;

	mariadb_from_env(&m);
	out = mariadb_sql(&m, "CREATE DATABASE empty_db; GRANT SELECT ON "
	    "empty_db.* TO 'idem'@'localhost'");
	free(out);
	free(cfg->mysql_database);
	cfg->mysql_database = strdup("empty_db");
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_ERR_STORE);
	cr_expect_null(s);
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
	free(cfg->mysql_database);
	cfg->mysql_database = strdup("old_db");
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_ERR_STORE);
	idem_config_free(cfg);
}

Test(mysql, wrong_password)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;
	FILE *fp = fopen("/tmp/idemfcgi-wrong-pw", "w");

	fputs("not-the-password\n", fp);
	fclose(fp);
	free(cfg->mysql_password_file);
	cfg->mysql_password_file = strdup("/tmp/idemfcgi-wrong-pw");
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_ERR_STORE);
	free(cfg->mysql_password_file);
	cfg->mysql_password_file = strdup("/nonexistent/pw");
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_ERR_CONFIG);
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

	cfg->max_response = max_response;
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

	cfg->max_response = 16ULL << 20;
	cr_assert_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_OK);
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
	cr_assert_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_OK);
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
	cr_assert_eq(idem_store_reserve(s, &k, fp, "o", "rid", 30000, 60000,
	    &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	memset(&big, 0, sizeof(big));
	big.status = 201;
	big.body = calloc(1, n);
	big.body_len = n;
	cr_expect_eq(idem_store_commit(s, &k, "o", &big, 60000),
	    IDEM_ERR_TOO_LARGE);
	big.body_len = 100;
	cr_expect_eq(idem_store_commit(s, &k, "o", &big, 60000), IDEM_OK,
	    "the record was still ours, in flight");
	free(big.body);
	idem_store_close(s);
	idem_config_free(cfg);
	mariadb_destroy(&m);
}
