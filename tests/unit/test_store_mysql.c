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

/* Issue 12.1: a max-response that the schema's body column or the
 * server's max_allowed_packet cannot hold is refused at start-up, not
 * discovered at the first large commit. */
Test(mysql, refuses_max_response_it_cannot_store)
{
	idem_config *cfg = config(1);
	idem_store *s = NULL;

	cfg->max_response = 16ULL << 20;   /* the column holds one less */
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_ERR_CONFIG);
	cr_expect_null(s);
	/* under the column, over the packet (16 MiB by default) */
	cfg->max_response = (16ULL << 20) - 100;
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_ERR_CONFIG);
	cfg->max_response = 1ULL << 20;
	cr_expect_eq(idem_store_mysql_new(cfg, 1, &s), IDEM_OK);
	cr_expect_eq(s->limits.headers, 65535);
	cr_expect_eq(s->limits.body, 16777215);
	cr_expect_gt(s->limits.total, 1ULL << 20);
	idem_store_close(s);
	idem_config_free(cfg);
}
