/*
 * test_admin.c - idemfcgi-admin against a real MariaDB: it shows,
 * releases and purges the right rows, refuses what would be unsafe, and
 * refuses bad arguments.  One private MariaDB for the program.
 *
 * Built a second time with ADMIN_ON_POSTGRES (test_admin_postgres): the
 * same scenarios against a private PostgreSQL, but for what only MySQL
 * has (transactional routes; the arguments, checked once).
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
#ifdef ADMIN_ON_POSTGRES
#include "postgres.h"
#else
#include "mariadb.h"
#endif

#ifdef ADMIN_ON_POSTGRES
/* The program's PostgreSQL (postgres_hooks.c). */
static const postgres *
program_pg(void)
{
	static postgres pg;

	if (pg.port == 0)
		cr_assert_eq(postgres_from_env(&pg), 0);
	return &pg;
}
/* The harness options of the program's database. */
#define DB_OPTS .pg = program_pg()
/* A key as the table holds it, in a statement. */
#define KEY_SQL "'%s'::bytea"
/* The database's clock minus %d of a unit (an int parameter). */
#define AGO(unit) "clock_timestamp() - interval '%d " unit "'"

/* Runs sql on the program's database; returns its rows (caller frees). */
static char *
db_sql(const char *text)
{
	return postgres_sql(program_pg(), text);
}
#else
#define DB_OPTS .mysql = 1
#define KEY_SQL "'%s'"
#define AGO(unit) "UTC_TIMESTAMP(6) - INTERVAL %d " unit

static char *
db_sql(const char *text)
{
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	return mariadb_sql(&m, text);
}
#endif

/* Starts an instance on the program's database, keys scoped by
 * X-Api-Key. */
static void
start(harness *h)
{
	cr_assert_eq(harness_start(h, &(harness_opts){ DB_OPTS,
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

	snprintf(sql, sizeof(sql), "SELECT state FROM idempotency_keys WHERE "
	    "idem_key = " KEY_SQL, key);
	rows = db_sql(sql);
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
	cr_assert(harness_await_started(&h, "/testkit/sleep/5000", live, 1));
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
	cr_assert(harness_await_started(&dead, "/testkit/sleep/1500", stuck, 1));
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

	/* purge takes the expired rows and only them: committed ones keep
	 * a tombstone (issue 40), shown as one */
	snprintf(sql, sizeof(sql), "UPDATE idempotency_keys SET expires_at = "
	    AGO("HOUR") " WHERE idem_key IN (" KEY_SQL ", " KEY_SQL ")", 1,
	    done, live);
	free(db_sql(sql));
	snprintf(args, sizeof(args), "show %s --scope alice", done);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0);
	cr_expect(strstr(out, "a tombstone now, refused for") != NULL, "%s",
	    out);
	free(out);
	free(err);
	doc = admin_json(h.conf, "purge", &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_eq(json_integer_value(json_object_get(doc, "purged")), 2);
	json_decref(doc);
	st = row_state(done);
	cr_expect_str_eq(st, "expired");
	free(st);
	st = row_state(live);
	cr_expect_str_eq(st, "expired");
	free(st);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0);
	cr_expect(strstr(out, "state:        expired") != NULL &&
	    strstr(out, "tombstone:    until") != NULL && strstr(out,
	    "answer of 0 bytes") != NULL, "%s", out);
	free(out);
	free(err);
	/* past the tombstone's end: deleted */
	snprintf(sql, sizeof(sql), "UPDATE idempotency_keys SET expires_at = "
	    AGO("HOUR") " WHERE idem_key IN (" KEY_SQL ", " KEY_SQL ")", 1,
	    done, live);
	free(db_sql(sql));
	doc = admin_json(h.conf, "purge", &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_eq(json_integer_value(json_object_get(doc, "purged")), 2);
	json_decref(doc);
	st = row_state(done);
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

static void refused(const char *conf, const char *args, int rc,
    const char *text);

/* Runs sql on the program's database, ignoring what it returns. */
static void
sql(const char *text)
{
	free(db_sql(text));
}

/* Makes key's committed record one of unknown outcome of owner, marked
 * minutes ago, with the checkpoint phase (NULL: none): what a handler
 * that returned IDEM_ERR_OUTCOME_UNKNOWN leaves. */
static void
make_unknown(const char *key, const char *owner, int minutes,
    const char *phase)
{
	char text[600];

	snprintf(text, sizeof(text), "UPDATE idempotency_keys SET state = "
	    "'unknown', owner = '%s', status = NULL, headers = NULL, body = "
	    "NULL, phase = %s%s%s, lease_at = " AGO("MINUTE") ", reserved_at = "
	    AGO("MINUTE") " WHERE idem_key = " KEY_SQL, owner,
	    phase != NULL ? "'" : "", phase != NULL ? phase : "NULL",
	    phase != NULL ? "'" : "", minutes, minutes, key);
	sql(text);
}

/* The object of key in the "unknown" array of doc, or NULL; *at gets its
 * index. */
static json_t *
listed(json_t *doc, const char *key, size_t *at)
{
	json_t *r;
	size_t i;

	json_array_foreach(json_object_get(doc, "unknown"), i, r) {
		const char *k = json_string_value(json_object_get(r, "key"));
		if (k != NULL && strcmp(k, key) == 0) {
			*at = i;
			return r;
		}
	}
	return NULL;
}

/*
 * Records of unknown outcome: unknown lists them, the one marked longest
 * ago first, bounded by --limit, and the metrics count them; resolve
 * refuses without --yes, for another owner and for a record that is not
 * unknown; --commit stores an answer that the retry of the same request
 * gets replayed; --release deletes the record, and the retry runs the
 * handler again.
 */
Test(admin, unknown_and_resolve)
{
	harness h;
	char kc[64], kr[64], kn[64], args[600], body[128], *out, *err, *st,
	    *text;
	const char *answer = "{\"charged\":true,\"by\":\"operator\"}";
	json_t *doc, *r;
	size_t ic = 0, ir = 0;
	call c;
	FILE *fp;
	int rc;

	snprintf(kc, sizeof(kc), "%s", call_key("adm-unk-commit"));
	snprintf(kr, sizeof(kr), "%s", call_key("adm-unk-release"));
	snprintf(kn, sizeof(kn), "%s", call_key("adm-unk-none"));
	cr_assert_eq(harness_start(&h, &(harness_opts){ DB_OPTS,
	    .idem = "inflight-ttl = 1s\nscope = header:X-Api-Key",
	    .rest = "[metrics]\nenabled = true\n" }), 0);
	cr_expect_eq(send_as_alice(h.addr, "/testkit/echo", kc).status, 201);
	cr_expect_eq(send_as_alice(h.addr, "/testkit/echo", kr).status, 201);
	cr_expect_eq(send_as_alice(h.addr, "/testkit/echo", kn).status, 201);
	make_unknown(kc, "0123456789abcdef.unk1", 20, "charging");
	make_unknown(kr, "0123456789abcdef.unk2", 10, NULL);
	/* a retry learns the outcome is unknown; nothing runs */
	c = send_as_alice(h.addr, "/testkit/echo", kc);
	cr_expect_eq(c.status, 503);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_OUTCOME_UNKNOWN");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", kc), 1);

	/* listed, the one marked longest ago first */
	doc = admin_json(h.conf, "unknown", &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect(json_is_false(json_object_get(doc, "more")));
	cr_expect_eq(json_integer_value(json_object_get(doc, "limit")), 1000);
	r = listed(doc, kc, &ic);
	cr_assert_not_null(r, "%s not listed", kc);
	cr_assert_not_null(listed(doc, kr, &ir), "%s not listed", kr);
	cr_expect_null(listed(doc, kn, &ir), "a committed record is listed");
	cr_assert_not_null(listed(doc, kr, &ir));
	cr_expect_lt(ic, ir);
	cr_expect_str_eq(json_string_value(json_object_get(r, "owner")),
	    "0123456789abcdef.unk1");
	cr_expect_str_eq(json_string_value(json_object_get(r, "phase")),
	    "charging");
	cr_expect_eq(strlen(json_string_value(json_object_get(r, "key_hash"))),
	    16);
	cr_expect_gt(strlen(json_string_value(json_object_get(r,
	    "request_id"))), 0);
	cr_expect_geq(json_integer_value(json_object_get(r, "lease_age_ms")),
	    20 * 60000 - 5000);
	cr_expect_gt(json_integer_value(json_object_get(r, "expires_in_ms")),
	    0);
	cr_expect(json_is_string(json_object_get(r, "expires_at")));
	json_decref(doc);
	/* bounded, and it says so */
	doc = admin_json(h.conf, "unknown --limit 1", &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_eq(json_array_size(json_object_get(doc, "unknown")), 1);
	cr_expect(json_is_true(json_object_get(doc, "more")));
	json_decref(doc);
	cr_expect_eq(admin(h.conf, "unknown", &out, &err), 0, "%s", err);
	cr_expect(strstr(out, "record(s) of unknown outcome, the one marked "
	    "longest ago first") != NULL, "%s", out);
	cr_expect(strstr(out, kc) != NULL && strstr(out, kr) != NULL &&
	    strstr(out, kc) < strstr(out, kr), "%s", out);
	cr_expect(strstr(out, "charging") != NULL, "%s", out);
	cr_expect(strstr(out, "0123456789abcdef.unk1") != NULL, "%s", out);
	free(out);
	free(err);
	cr_expect_eq(admin(h.conf, "unknown --limit 1", &out, &err), 0);
	cr_expect(strstr(out, "more than 1 record(s) of unknown outcome") !=
	    NULL, "%s", out);
	free(out);
	free(err);

	/* the metrics count them, and the oldest's age */
	text = harness_scrape(&h);
	cr_assert_not_null(text);
	cr_expect_geq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_records"), 2, "%s", text);
	cr_expect_geq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_oldest_seconds"), 20 * 60 - 5);
	free(text);

	/* refused: not unknown, another owner, without --yes */
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 200 "
	    "--yes", kn);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "is committed") != NULL, "%s", err);
	free(out);
	free(err);
	snprintf(args, sizeof(args), "resolve %s --scope alice --release "
	    "--yes", kn);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "only records of unknown outcome") != NULL, "%s",
	    err);
	free(out);
	free(err);
	st = row_state(kn);
	cr_expect_str_eq(st, "committed");
	free(st);
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 202 "
	    "--yes --owner 0123456789abcdef.unk2", kc);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "not resolved") != NULL, "%s", err);
	free(out);
	free(err);
	snprintf(body, sizeof(body), "/tmp/idemfcgi-admin-body-%ld",
	    (long)getpid());
	fp = fopen(body, "w");
	cr_assert_not_null(fp);
	fputs(answer, fp);
	fclose(fp);
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 202 "
	    "--body %s", kc, body);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(out, "state:        unknown") != NULL, "%s", out);
	cr_expect(strstr(out, "marked at:") != NULL, "%s", out);
	cr_expect(strstr(err, "would store status 202") != NULL, "%s", err);
	cr_expect(strstr(err, "--yes") != NULL, "%s", err);
	free(out);
	free(err);
	st = row_state(kc);
	cr_expect_str_eq(st, "unknown");
	free(st);

	/* --commit: the retry of the same request gets that answer */
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 202 "
	    "--body %s --content-type application/json --owner "
	    "0123456789abcdef.unk1 --yes", kc, body);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0, "%s", err);
	cr_expect(strstr(out, "status 202 stored as its answer") != NULL, "%s",
	    out);
	free(out);
	free(err);
	st = row_state(kc);
	cr_expect_str_eq(st, "committed");
	free(st);
	c = send_as_alice(h.addr, "/testkit/echo", kc);
	cr_expect_eq(c.status, 202);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_str_eq(c.body_out, answer);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", kc), 1,
	    "the handler did not run again");
	/* and once only */
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 202 "
	    "--yes", kc);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "is committed") != NULL, "%s", err);
	free(out);
	free(err);

	/* --release: shown without --yes; then gone, and the retry runs */
	snprintf(args, sizeof(args), "resolve %s --scope alice --release", kr);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "the next retry runs the handler again") !=
	    NULL, "%s", err);
	free(out);
	free(err);
	doc = admin_json(h.conf, args, &rc);
	json_decref(doc);
	cr_expect_eq(rc, 1);
	snprintf(args, sizeof(args), "resolve %s --scope alice --release "
	    "--yes", kr);
	cr_expect_eq(admin(h.conf, args, &out, &err), 0, "%s", err);
	cr_expect(strstr(out, "the next retry runs the handler again") !=
	    NULL, "%s", out);
	free(out);
	free(err);
	st = row_state(kr);
	cr_expect_str_eq(st, "");
	free(st);
	c = send_as_alice(h.addr, "/testkit/echo", kr);
	cr_expect_eq(c.status, 201);
	cr_expect_str_eq(c.replayed, "");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", kr), 2);
	snprintf(args, sizeof(args), "resolve %s --scope alice --release "
	    "--yes", kr);
	cr_expect_eq(admin(h.conf, args, &out, &err), 1);
	cr_expect(strstr(err, "only records of unknown outcome") != NULL, "%s",
	    err);
	free(out);
	free(err);
	/* neither is listed any more */
	doc = admin_json(h.conf, "unknown", &rc);
	cr_assert_not_null(doc);
	cr_expect_null(listed(doc, kc, &ic));
	cr_expect_null(listed(doc, kr, &ir));
	json_decref(doc);
	unlink(body);
	cr_expect_eq(harness_stop(&h), 0);
}

/* Writes n bytes of 'x' to path. */
static void
write_body(const char *path, size_t n)
{
	FILE *fp = fopen(path, "w");

	cr_assert_not_null(fp);
	while (n-- > 0)
		fputc('x', fp);
	fclose(fp);
}

/* resolve as JSON, and a commit without a body; a body the store would
 * not take is refused; an expired record of unknown outcome has no answer
 * to store, but may be released. */
Test(admin, resolve_json_and_expired)
{
	harness h;
	char kj[64], kx[64], args[400], text[300], body[128], *st;
	json_t *doc;
	call c;
	int rc;

	snprintf(kj, sizeof(kj), "%s", call_key("adm-unk-json"));
	snprintf(kx, sizeof(kx), "%s", call_key("adm-unk-expired"));
	cr_assert_eq(harness_start(&h, &(harness_opts){ DB_OPTS,
	    .idem = "inflight-ttl = 1s\nscope = header:X-Api-Key\n"
	    "max-response = 1k" }), 0);
	cr_expect_eq(send_as_alice(h.addr, "/testkit/echo", kj).status, 201);
	cr_expect_eq(send_as_alice(h.addr, "/testkit/echo", kx).status, 201);
	make_unknown(kj, "0123456789abcdef.unk3", 1, NULL);
	make_unknown(kx, "0123456789abcdef.unk4", 1, NULL);
	snprintf(text, sizeof(text), "UPDATE idempotency_keys SET expires_at = "
	    AGO("MINUTE") " WHERE idem_key = " KEY_SQL, 1, kx);
	sql(text);
	/* within max-response, headers and all */
	snprintf(body, sizeof(body), "/tmp/idemfcgi-admin-big-%ld",
	    (long)getpid());
	write_body(body, 2000);
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 200 "
	    "--body %s --yes", kj, body);
	refused(h.conf, args, 2, "is over the 1024 bytes an answer may hold");
	write_body(body, 1000);
	refused(h.conf, args, 2, "cannot be stored: it is over max-response");
	unlink(body);
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 200 "
	    "--body /nonexistent/body --yes", kj);
	refused(h.conf, args, 2, "cannot read --body /nonexistent/body");
	st = row_state(kj);
	cr_expect_str_eq(st, "unknown");
	free(st);
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 204 "
	    "--yes", kj);
	doc = admin_json(h.conf, args, &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "resolved")),
	    kj);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "action")),
	    "commit");
	cr_expect_eq(json_integer_value(json_object_get(doc, "status")), 204);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "owner")),
	    "0123456789abcdef.unk3");
	json_decref(doc);
	c = send_as_alice(h.addr, "/testkit/echo", kj);
	cr_expect_eq(c.status, 204);
	cr_expect_str_eq(c.replayed, "true");
	/* expired: no answer to store; released, it is gone */
	snprintf(args, sizeof(args), "resolve %s --scope alice --commit 200 "
	    "--yes", kx);
	refused(h.conf, args, 1, "past its lifetime");
	st = row_state(kx);
	cr_expect_str_eq(st, "unknown");
	free(st);
	snprintf(args, sizeof(args), "resolve %s --scope alice --release --yes",
	    kx);
	doc = admin_json(h.conf, args, &rc);
	cr_expect_eq(rc, 0);
	cr_assert_not_null(doc);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "action")),
	    "release");
	json_decref(doc);
	st = row_state(kx);
	cr_expect_str_eq(st, "");
	free(st);
	cr_expect_eq(harness_stop(&h), 0);
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

#ifndef ADMIN_ON_POSTGRES
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
	refused(conf, "show x --yes", 2, "go with release and resolve only");
	refused(conf, "--bogus stats", 2, "unrecognized option");
	refused(conf, "show not-a-uuid", 2, "not a valid key");
	/* the config's and the store's log lines name this program */
	refused(conf_file("[idempotency]\nstore = mysql\nlifetim = 1h\n"),
	    "stats", 2, " idemfcgi-admin[");
	refused(conf_file("[idempotency]\nstore = mysql\nlifetim = 1h\n"),
	    "stats", 2, "lifetim: unknown key; did you mean lifetime?");
	conf = conf_file(text);   /* (one file: it was overwritten) */
	refused(conf, "show 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10 --scope x", 2,
	    "scope = none");
	refused(conf, "show 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10", 1,
	    "no record");
	refused(conf, "release 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10 --yes", 1,
	    "nothing to release");
	/* the records of unknown outcome, and their resolution */
	refused(conf, "unknown x", 2, "unknown takes no argument");
	refused(conf, "unknown --limit 0", 2, "--limit 0: give a number from 1 "
	    "to 1000");
	refused(conf, "unknown --limit 1001", 2, "--limit 1001");
	refused(conf, "unknown --limit 5x", 2, "--limit 5x");
	refused(conf, "show x --limit 5", 2, "--limit goes with unknown only");
	refused(conf, "unknown --yes", 2, "go with release and resolve only");
	refused(conf, "resolve", 2, "resolve takes one KEY");
	refused(conf, "resolve k --yes", 2, "either --commit STATUS");
	refused(conf, "resolve k --commit 200 --release", 2,
	    "either --commit STATUS");
	refused(conf, "resolve k --commit 99", 2, "from 100 to 599");
	refused(conf, "resolve k --commit 600", 2, "from 100 to 599");
	refused(conf, "resolve k --commit 2OO", 2, "from 100 to 599");
	refused(conf, "resolve k --commit -200", 2, "from 100 to 599");
	refused(conf, "resolve k --commit ''", 2, "from 100 to 599");
	refused(conf, "resolve k --release --body /dev/null", 2,
	    "go with --commit only");
	refused(conf, "resolve k --commit 200 --content-type text/plain", 2,
	    "goes with --body only");
	refused(conf, "resolve k --commit 204 --body /dev/null", 2,
	    "status 204 carries no body");
	refused(conf, "resolve k --commit 200 --body /dev/null --content-type "
	    "'text/plain\r\nX: y'", 2, "is not a media type");
	refused(conf, "resolve k --commit 200 --body /dev/null --content-type "
	    "plain", 2, "is not a media type");
	refused(conf, "resolve k --commit 200 --force", 2,
	    "--force goes with release only");
	refused(conf, "show k --commit 200", 2, "go with resolve only");
	refused(conf, "release k --release --yes", 2, "go with resolve only");
	refused(conf, "resolve 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10 --commit "
	    "200 --yes", 1, "nothing to resolve");
	refused(conf, "resolve 0193a5c4-7f2e-7a31-9c1d-5e8f2b6a4d10 --commit "
	    "200 --body /nonexistent/body --yes", 1, "nothing to resolve");
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
	conf = conf_file("[idempotency]\nstore = cassandra\n");
	refused(conf, "stats", 2, ":2: [idempotency] store");
	refused("/nonexistent/idemfcgi.conf", "stats", 2, "cannot read");
	/* a database that is not there */
	conf = conf_file("[idempotency]\nstore = mysql\n[mysql]\n"
	    "host = 127.0.0.1\nport = 1\nuser = idem\ndatabase = idem\n"
	    "connect-timeout = 1s\n");
	refused(conf, "stats", 3, "cannot use the store of");
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
	cr_assert_eq(harness_start(&h, &(harness_opts){ DB_OPTS,
	    .rest = "pool-size = 4\n" }), 0);
	first = call_make(h.addr, "/testkit/tx/201?ms=3000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
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
#endif
