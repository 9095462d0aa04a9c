/*
 * test_admin.c - idemfcgi-admin against a real MariaDB: it shows,
 * releases and purges the right rows, refuses what would be unsafe, and
 * refuses bad arguments.  One private MariaDB for the program.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"

/* Starts an instance on the program's MariaDB, keys scoped by X-Api-Key. */
static void
start(harness *h)
{
	cr_assert_eq(harness_start(h, &(harness_opts){ .mysql = 1,
	    .idem = "inflight-ttl = 1s\nscope = header:X-Api-Key" }), 0);
}

/* Runs idemfcgi-admin -c conf ARGS; *out gets stdout, *err stderr (caller
 * frees both).  Returns the exit status. */
static int
admin(const char *conf, const char *args, char **out, char **err)
{
	char dir[] = "/tmp/idemfcgi-admin.XXXXXX", cmd[2000], o[128], e[128];
	int status;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(o, sizeof(o), "%s/out", dir);
	snprintf(e, sizeof(e), "%s/err", dir);
	snprintf(cmd, sizeof(cmd), "'%s/idemfcgi-admin' -c '%s' %s >'%s' 2>'%s' "
	    "</dev/null", harness_builddir(), conf, args, o, e);
	status = system(cmd);
	*out = harness_slurp(o);
	*err = harness_slurp(e);
	unlink(o);
	unlink(e);
	rmdir(dir);
	cr_assert_not_null(*out);
	cr_assert_not_null(*err);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* admin with --json; the parsed stdout (caller decrefs), NULL if none. */
static json_t *
admin_json(const char *conf, const char *args, int *rc)
{
	char all[1500], *out, *err;
	json_t *doc;

	snprintf(all, sizeof(all), "--json %s", args);
	*rc = admin(conf, all, &out, &err);
	doc = json_loads(out, 0, NULL);
	if (doc == NULL && *rc == 0)
		cr_log_error("not JSON: %s / %s", out, err);
	free(out);
	free(err);
	return doc;
}

/* The rows of idempotency_keys with this key, by state ("" if none). */
static char *
row_state(const char *key)
{
	char sql[300], *rows;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	snprintf(sql, sizeof(sql), "SELECT state FROM idempotency_keys WHERE "
	    "idem_key = '%s'", key);
	rows = mariadb_sql(&m, sql);
	cr_assert_not_null(rows);
	rows[strcspn(rows, "\n")] = '\0';
	return rows;
}

/* Sends key with the scope header alice to path. */
static call
send_as_alice(const char *addr, const char *path, const char *key)
{
	call c = call_make(addr, path, key, NULL);

	snprintf(c.extra, sizeof(c.extra), "X-Api-Key: alice");
	call_send(&c);
	return c;
}

static void *
alice_thread(void *arg)
{
	call *c = arg;

	snprintf(c->extra, sizeof(c->extra), "X-Api-Key: alice");
	call_send(c);
	return NULL;
}

Test(admin, show_release_purge)
{
	harness h, dead;
	const char *done = call_key("adm-done"), *live = call_key("adm-live"),
	    *stuck = call_key("adm-stuck");
	char args[400], *out, *err, *st, sql[400];
	call c, slow, doomed;
	json_t *doc;
	pthread_t t;
	mariadb m;
	int rc;

	start(&h);
	start(&dead);
	c = send_as_alice(h.addr, "/testkit/echo", done);
	cr_expect_eq(c.status, 201);

	/* show: a committed record, in its scope only */
	snprintf(args, sizeof(args), "show %s --scope alice", done);
	doc = admin_json(h.conf, args, &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "state")),
	    "committed");
	cr_expect_eq(json_integer_value(json_object_get(doc, "status")), 201);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "key")), done);
	cr_expect_eq(strlen(json_string_value(json_object_get(doc,
	    "key_hash"))), 16);
	json_decref(doc);
	snprintf(args, sizeof(args), "show %s --scope bob", done);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "no record") != NULL, "%s", err);
	free(out);
	free(err);
	snprintf(args, sizeof(args), "show %s --scope alice", done);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0);
	cr_expect(strstr(out, "state:        committed\n") != NULL, "%s", out);
	cr_expect(strstr(out, "status:       201") != NULL, "%s", out);
	free(out);
	free(err);

	/* a committed record is never released */
	snprintf(args, sizeof(args), "release %s --scope alice --yes", done);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "is committed") != NULL, "%s", err);
	free(out);
	free(err);
	st = row_state(done);
	cr_expect_str_eq(st, "committed");
	free(st);

	/* a live lease: a handler runs it; release refuses */
	slow = call_make(h.addr, "/testkit/sleep/5000", live, NULL);
	pthread_create(&t, NULL, alice_thread, &slow);
	call_sleep(1500);
	snprintf(args, sizeof(args), "release %s --scope alice --yes", live);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "running its handler") != NULL, "%s", err);
	free(out);
	free(err);
	st = row_state(live);
	cr_expect_str_eq(st, "in_flight");
	free(st);
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);

	/* a node dies holding a key: stuck until inflight-ttl, or released */
	doomed = call_make(dead.addr, "/testkit/sleep/1500", stuck, NULL);
	pthread_create(&t, NULL, alice_thread, &doomed);
	call_sleep(300);
	harness_kill(&dead);
	pthread_join(t, NULL);
	cr_expect_eq(doomed.status, -1);
	call_sleep(1100);
	doc = admin_json(h.conf, "stats", &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_geq(json_integer_value(json_object_get(doc, "in_flight")), 1);
	cr_expect_geq(json_integer_value(json_object_get(doc, "stale")), 1);
	cr_expect_geq(json_integer_value(json_object_get(doc, "committed")), 2);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc,
	    "oldest_in_flight"), "key")), stuck);
	json_decref(doc);
	cr_expect_eq(admin(h.conf, "stats", &out, &err), 0);
	cr_expect(strstr(out, stuck) != NULL, "%s", out);
	free(out);
	free(err);
	/* without --yes: shown, not released */
	snprintf(args, sizeof(args), "release %s --scope alice", stuck);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(out, "state:        in_flight") != NULL, "%s", out);
	cr_expect(strstr(err, "--yes") != NULL, "%s", err);
	free(out);
	free(err);
	/* another owner named: not released */
	snprintf(args, sizeof(args), "release %s --scope alice --yes --owner "
	    "0000000000000000.x", stuck);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "not released") != NULL, "%s", err);
	free(out);
	free(err);
	st = row_state(stuck);
	cr_expect_str_eq(st, "in_flight");
	free(st);
	snprintf(args, sizeof(args), "release %s --scope alice --yes", stuck);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0, "%s", err);
	cr_expect(strstr(out, "released key") != NULL, "%s", out);
	free(out);
	free(err);
	st = row_state(stuck);
	cr_expect_str_eq(st, "");
	free(st);
	/* and the retry runs the handler */
	c = send_as_alice(h.addr, "/testkit/sleep/1500", stuck);
	cr_expect_eq(c.status, 201);
	cr_expect_str_eq(c.replayed, "");
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/1500", stuck), 1);

	/* purge takes the expired rows and only them */
	cr_assert_eq(mariadb_from_env(&m), 0);
	snprintf(sql, sizeof(sql), "UPDATE idempotency_keys SET expires_at = "
	    "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE idem_key IN ('%s', '%s')",
	    done, live);
	free(mariadb_sql(&m, sql));
	snprintf(args, sizeof(args), "show %s --scope alice", done);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0);
	cr_expect(strstr(out, "the next purge deletes it") != NULL, "%s", out);
	free(out);
	free(err);
	doc = admin_json(h.conf, "purge", &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_eq(json_integer_value(json_object_get(doc, "purged")), 2);
	json_decref(doc);
	st = row_state(done);
	cr_expect_str_eq(st, "");
	free(st);
	st = row_state(live);
	cr_expect_str_eq(st, "");
	free(st);
	st = row_state(stuck);
	cr_expect_str_eq(st, "committed");
	free(st);
	cr_expect_eq(admin(h.conf, "purge", &out, &err), 0);
	cr_expect_str_eq(out, "purged 0 expired record(s)\n");
	free(out);
	free(err);
	harness_stop(&dead);
	cr_expect_eq(harness_stop(&h), 0);
}

/* Writes text to a config file in dir; returns its path (static). */
static const char *
conf_file(const char *text)
{
	static char path[128];

	snprintf(path, sizeof(path), "/tmp/idemfcgi-admin-%ld.conf",
	    (long)getpid());
	cr_assert_eq(harness_write_conf(path, text), 0);
	return path;
}

/* Runs admin on conf with args and expects status rc and text in stderr. */
static void
refused(const char *conf, const char *args, int rc, const char *text)
{
	char *out, *err;

	cr_expect_eq(admin(conf, args, &out, &err), rc, "%s: %s%s", args, out,
	    err);
	cr_expect(strstr(err, text) != NULL, "%s: wanted \"%s\" in: %s", args,
	    text, err);
	free(out);
	free(err);
}

Test(admin, bad_arguments)
{
	char my[600], text[1500];
	const char *conf;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, my, sizeof(my));
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n"
	    "key-format = uuidv7\n%s", my);
	conf = conf_file(text);
	refused(conf, "", 2, "no command");
	refused(conf, "frobnicate", 2, "unknown command \"frobnicate\"");
	refused(conf, "show", 2, "show takes one KEY");
	refused(conf, "release a b", 2, "release takes one KEY");
	refused(conf, "stats extra", 2, "stats takes no argument");
	refused(conf, "show x --yes", 2, "go with release only");
	refused(conf, "--bogus stats", 2, "unrecognized option");
	refused(conf, "show not-a-uuid", 2, "not a valid key");
	refused(conf, "show 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10 --scope x", 2,
	    "scope = none");
	refused(conf, "show 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10", 1,
	    "no record");
	refused(conf, "release 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10 --yes", 1,
	    "nothing to release");
	/* scoped keys need their principal */
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n"
	    "scope = remote-user\n%s", my);
	conf = conf_file(text);
	refused(conf, "show k1", 2, "give --scope");
	/* the memory store cannot be reached from outside */
	conf = conf_file("[idempotency]\nstore = memory\n");
	refused(conf, "stats", 2, "store = memory");
	conf = conf_file("[idempotency]\nenabled = false\n");
	refused(conf, "purge", 2, "enabled = false");
	/* a bad file: the line and key, as idemfcgi says it */
	conf = conf_file("[idempotency]\nstore = postgres\n");
	refused(conf, "stats", 2, ":2: [idempotency] store");
	refused("/nonexistent/idemfcgi.conf", "stats", 2, "cannot read");
	/* a database that is not there */
	conf = conf_file("[idempotency]\nstore = mysql\n[mysql]\n"
	    "host = 127.0.0.1\nport = 1\nuser = idem\ndatabase = idem\n"
	    "connect-timeout = 1s\n");
	refused(conf, "stats", 3, "cannot use the MySQL store");
	unlink(conf);
}

/* show during a transactional request: its record exists only inside the
 * request's open transaction, and show says that a transaction holds the
 * key rather than that it was never used; once it commits, show finds it
 * (issue 23). */
Test(admin, show_names_a_record_held_by_an_open_transaction)
{
	harness h;
	const char *key = call_key("adm-tx");
	char args[400], *out, *err;
	call first;
	pthread_t t;

	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .mysql = 1,
	    .rest = "pool-size = 4\n" }), 0);
	first = call_make(h.addr, "/testkit/tx/201?ms=3000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	call_sleep(800);
	snprintf(args, sizeof(args), "show %s", key);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "an open transaction holds it") != NULL, "%s",
	    err);
	cr_expect(strstr(err, "never used") == NULL, "%s", err);
	free(out);
	free(err);
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201, "%d %s", first.status, first.body_out);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0, "%s", err);
	cr_expect(strstr(out, "state:        committed\n") != NULL, "%s", out);
	free(out);
	free(err);
	/* a key never used is still said to be so */
	snprintf(args, sizeof(args), "show %s", call_key("adm-never"));
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "never used") != NULL, "%s", err);
	free(out);
	free(err);
	harness_stop(&h);
}
