/*
 * test_ice_meta.c - Iceberg table metadata: create, requirements, updates,
 * validation, and refusal of malformed input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ice_meta.h"

#define UUID	"9c12d441-03fe-4693-9a96-a0705ddf69c1"
#define UUID2	"0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e"
#define T0	1700000000000LL

/* Parses JSON text s; fails the test when it is not JSON. */
static json_t *
J(const char *s)
{
	json_error_t	 err;
	json_t		*v = json_loads(s, JSON_DECODE_ANY, &err);

	cr_assert_not_null(v, "bad test JSON (%s): %s", err.text, s);
	return v;
}

/* Returns integer o[k], or -999. */
static long long
geti(const json_t *o, const char *k)
{
	json_t	*v = json_object_get(o, k);

	return json_is_integer(v) ? json_integer_value(v) : -999;
}

static const char *create_req =
    "{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"schema-id\": 7,"
    " \"identifier-field-ids\": [1], \"fields\": ["
    " {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
    " {\"id\": 2, \"name\": \"data\", \"required\": false,"
    " \"type\": \"string\"},"
    " {\"id\": 3, \"name\": \"ts\", \"required\": false,"
    " \"type\": \"timestamptz\"}]},"
    " \"partition-spec\": {\"spec-id\": 5, \"fields\": [{\"source-id\": 3,"
    " \"field-id\": 1500, \"name\": \"ts_day\", \"transform\": \"day\"}]},"
    " \"write-order\": {\"order-id\": 3, \"fields\": [{\"source-id\": 1,"
    " \"transform\": \"identity\", \"direction\": \"asc\","
    " \"null-order\": \"nulls-first\"}]},"
    " \"properties\": {\"owner\": \"me\", \"format-version\": \"2\"}}";

/* Returns new metadata from create_req, which must succeed. */
static json_t *
base_table(void)
{
	ice_err	 e;
	json_t	*req = J(create_req), *m;

	m = ice_meta_create(req, "s3://b/t", UUID, T0, &e);
	cr_assert_not_null(m, "%s", e.message);
	json_decref(req);
	return m;
}

/* Applies updates (JSON text) to m; returns the result, which must be
 * there. */
static json_t *
apply_ok(const json_t *m, const char *updates, const char *prev, long long now)
{
	ice_err	 e;
	json_t	*u = J(updates), *r;

	r = ice_meta_apply(m, u, prev, now, &e);
	cr_assert_not_null(r, "%s -> %d %s", updates, e.status, e.message);
	cr_assert_eq(ice_meta_validate(r, &e), 0, "%s", e.message);
	json_decref(u);
	return r;
}

/* Applies updates to m, which must fail with status and type. */
static void
apply_fails(const json_t *m, const char *updates, int status,
    const char *type)
{
	ice_err	 e = { 0 };
	json_t	*u = J(updates), *r;

	r = ice_meta_apply(m, u, "s3://b/t/metadata/v1.json", T0 + 5, &e);
	cr_expect_null(r, "accepted: %s", updates);
	json_decref(r);
	cr_expect_eq(e.status, status, "%s -> %d %s", updates, e.status,
	    e.message);
	cr_expect_str_eq(e.type ? e.type : "", type, "%s -> %s", updates,
	    e.message);
	json_decref(u);
}

/* Checks requirements (JSON text) against m; returns the status (0 when
 * they hold). */
static int
check(const json_t *m, const char *reqs, char *msg, size_t msgsz)
{
	ice_err	 e = { 0 };
	json_t	*r = J(reqs);
	int	 rc;

	rc = ice_meta_check(m, r, &e);
	json_decref(r);
	if (msg != NULL)
		snprintf(msg, msgsz, "%s", rc ? e.message : "");
	cr_assert(rc == 0 || e.type != NULL);
	return rc == 0 ? 0 : e.status;
}

/* A table with snapshot 100 (sequence 1) on main. */
static json_t *
table_with_snapshot(void)
{
	json_t	*m = base_table(), *r;

	r = apply_ok(m, "[{\"action\": \"add-snapshot\", \"snapshot\": {"
	    "\"snapshot-id\": 100, \"sequence-number\": 1, \"timestamp-ms\": "
	    "1700000000500, \"manifest-list\": \"s3://b/t/m1.avro\","
	    " \"summary\": {\"operation\": \"append\"}}},"
	    " {\"action\": \"set-snapshot-ref\", \"ref-name\": \"main\","
	    " \"type\": \"branch\", \"snapshot-id\": 100}]", NULL, T0 + 1000);
	json_decref(m);
	return r;
}

Test(ice_meta, create_has_required_fields)
{
	json_t	*m = base_table(), *s, *spec, *order;
	ice_err	 e;

	cr_expect_eq(geti(m, "format-version"), 2);
	cr_expect_str_eq(json_string_value(json_object_get(m, "table-uuid")),
	    UUID);
	cr_expect_str_eq(json_string_value(json_object_get(m, "location")),
	    "s3://b/t");
	cr_expect_eq(geti(m, "last-sequence-number"), 0);
	cr_expect_eq(geti(m, "last-updated-ms"), T0);
	cr_expect_eq(geti(m, "last-column-id"), 3);
	cr_expect_eq(geti(m, "current-schema-id"), 0);
	s = json_array_get(json_object_get(m, "schemas"), 0);
	cr_expect_eq(geti(s, "schema-id"), 0);
	cr_expect_eq(json_array_size(json_object_get(s, "fields")), 3);
	cr_expect_eq(geti(m, "default-spec-id"), 0);
	spec = json_array_get(json_object_get(m, "partition-specs"), 0);
	cr_expect_eq(geti(spec, "spec-id"), 0);
	s = json_array_get(json_object_get(spec, "fields"), 0);
	cr_expect_eq(geti(s, "field-id"), 1000);
	cr_expect_eq(geti(s, "source-id"), 3);
	cr_expect_eq(geti(m, "last-partition-id"), 1000);
	cr_expect_eq(geti(m, "default-sort-order-id"), 1);
	order = json_array_get(json_object_get(m, "sort-orders"), 0);
	cr_expect_eq(geti(order, "order-id"), 1);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(m,
	    "properties"), "owner")), "me");
	cr_expect_null(json_object_get(json_object_get(m, "properties"),
	    "format-version"));
	cr_expect_eq(geti(m, "current-snapshot-id"), -1);
	cr_expect(json_is_object(json_object_get(m, "refs")));
	cr_expect_eq(json_array_size(json_object_get(m, "snapshots")), 0);
	cr_expect(json_is_array(json_object_get(m, "snapshot-log")));
	cr_expect(json_is_array(json_object_get(m, "metadata-log")));
	cr_expect_null(json_object_get(m, "schema"));
	cr_expect_eq(ice_meta_validate(m, &e), 0, "%s", e.message);
	json_decref(m);
}

/* Column ids are reassigned as Java does: a struct's own fields first. */
Test(ice_meta, create_assigns_fresh_ids)
{
	ice_err	 e;
	json_t	*req, *m, *s, *f;

	req = J("{\"name\": \"n\", \"schema\": {\"type\": \"struct\","
	    " \"identifier-field-ids\": [10], \"fields\": ["
	    "{\"id\": 10, \"name\": \"a\", \"required\": true, \"type\": \"long\"},"
	    "{\"id\": 20, \"name\": \"b\", \"required\": false, \"type\":"
	    " {\"type\": \"struct\", \"fields\": [{\"id\": 31, \"name\": \"c\","
	    " \"required\": false, \"type\": \"int\"}, {\"id\": 32, \"name\":"
	    " \"d\", \"required\": false, \"type\": \"string\"}]}},"
	    "{\"id\": 40, \"name\": \"e\", \"required\": false, \"type\":"
	    " {\"type\": \"list\", \"element-id\": 41, \"element\": \"string\","
	    " \"element-required\": false}},"
	    "{\"id\": 50, \"name\": \"f\", \"required\": false, \"type\":"
	    " {\"type\": \"map\", \"key-id\": 51, \"key\": \"string\","
	    " \"value-id\": 52, \"value\": \"long\", \"value-required\": true}}"
	    "]}, \"partition-spec\": {\"fields\": [{\"source-id\": 31,"
	    " \"name\": \"c_b\", \"transform\": \"bucket[4]\"}]}}");
	m = ice_meta_create(req, "/w/n", UUID, T0, &e);
	cr_assert_not_null(m, "%s", e.message);
	cr_expect_eq(geti(m, "last-column-id"), 9);
	s = json_array_get(json_object_get(m, "schemas"), 0);
	f = json_object_get(s, "fields");
	cr_expect_eq(geti(json_array_get(f, 0), "id"), 1);
	cr_expect_eq(geti(json_array_get(f, 1), "id"), 2);
	cr_expect_eq(geti(json_array_get(f, 2), "id"), 3);
	cr_expect_eq(geti(json_array_get(f, 3), "id"), 4);
	cr_expect_eq(geti(json_array_get(json_object_get(json_object_get(
	    json_array_get(f, 1), "type"), "fields"), 1), "id"), 6);
	cr_expect_eq(geti(json_object_get(json_array_get(f, 2), "type"),
	    "element-id"), 7);
	cr_expect_eq(geti(json_object_get(json_array_get(f, 3), "type"),
	    "value-id"), 9);
	cr_expect_eq(json_integer_value(json_array_get(json_object_get(s,
	    "identifier-field-ids"), 0)), 1);
	f = json_array_get(json_object_get(json_array_get(json_object_get(m,
	    "partition-specs"), 0), "fields"), 0);
	cr_expect_eq(geti(f, "source-id"), 5);
	cr_expect_eq(geti(f, "field-id"), 1000);
	/* no write-order: the unsorted order 0 */
	cr_expect_eq(geti(m, "default-sort-order-id"), 0);
	json_decref(m);
	json_decref(req);
}

Test(ice_meta, create_unpartitioned_and_v1)
{
	ice_err	 e;
	json_t	*req, *m;

	req = J("{\"name\": \"n\", \"location\": \"/w/n\", \"properties\":"
	    " {\"format-version\": \"1\"}, \"schema\": {\"type\": \"struct\","
	    " \"fields\": [{\"id\": 1, \"name\": \"a\", \"required\": true,"
	    " \"type\": \"long\"}]}}");
	m = ice_meta_create(req, NULL, UUID, T0, &e);
	cr_assert_not_null(m, "%s", e.message);
	cr_expect_eq(geti(m, "format-version"), 1);
	cr_expect_str_eq(json_string_value(json_object_get(m, "location")),
	    "/w/n");
	cr_expect_null(json_object_get(m, "last-sequence-number"));
	cr_expect(json_is_object(json_object_get(m, "schema")));
	cr_expect_eq(json_array_size(json_object_get(m, "partition-spec")), 0);
	cr_expect_eq(geti(m, "last-partition-id"), 999);
	cr_expect_eq(json_array_size(json_object_get(json_array_get(
	    json_object_get(m, "partition-specs"), 0), "fields")), 0);
	cr_expect_eq(geti(m, "default-sort-order-id"), 0);
	cr_expect_eq(geti(json_array_get(json_object_get(m, "sort-orders"), 0),
	    "order-id"), 0);
	json_decref(m);
	json_decref(req);
}

Test(ice_meta, each_requirement_holds_and_fails)
{
	static const struct {
		const char *ok, *bad;
	} cases[] = {
		{ "{\"type\": \"assert-table-uuid\", \"uuid\": \"" UUID "\"}",
		  "{\"type\": \"assert-table-uuid\", \"uuid\": \"" UUID2 "\"}" },
		{ "{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"main\","
		  " \"snapshot-id\": 100}",
		  "{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"main\","
		  " \"snapshot-id\": 99}" },
		{ "{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"dev\","
		  " \"snapshot-id\": null}",
		  "{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"main\","
		  " \"snapshot-id\": null}" },
		{ "{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"main\","
		  " \"snapshot-id\": 100}",
		  "{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"dev\","
		  " \"snapshot-id\": 100}" },
		{ "{\"type\": \"assert-last-assigned-field-id\","
		  " \"last-assigned-field-id\": 3}",
		  "{\"type\": \"assert-last-assigned-field-id\","
		  " \"last-assigned-field-id\": 2}" },
		{ "{\"type\": \"assert-current-schema-id\","
		  " \"current-schema-id\": 0}",
		  "{\"type\": \"assert-current-schema-id\","
		  " \"current-schema-id\": 1}" },
		{ "{\"type\": \"assert-last-assigned-partition-id\","
		  " \"last-assigned-partition-id\": 1000}",
		  "{\"type\": \"assert-last-assigned-partition-id\","
		  " \"last-assigned-partition-id\": 999}" },
		{ "{\"type\": \"assert-default-spec-id\", \"default-spec-id\": 0}",
		  "{\"type\": \"assert-default-spec-id\", \"default-spec-id\": 1}" },
		{ "{\"type\": \"assert-default-sort-order-id\","
		  " \"default-sort-order-id\": 1}",
		  "{\"type\": \"assert-default-sort-order-id\","
		  " \"default-sort-order-id\": 0}" },
		{ "{\"type\": \"assert-table-uuid\", \"uuid\": \""
		  "9C12D441-03FE-4693-9A96-A0705DDF69C1\"}",
		  "{\"type\": \"assert-create\"}" },
	};
	json_t	*m = table_with_snapshot();
	char	 req[512], msg[512];
	size_t	 i;

	cr_expect_eq(check(m, "[]", NULL, 0), 0);
	cr_expect_eq(ice_meta_check(m, NULL, NULL), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(req, sizeof(req), "[%s]", cases[i].ok);
		cr_expect_eq(check(m, req, msg, sizeof(msg)), 0, "%s: %s", req,
		    msg);
		snprintf(req, sizeof(req), "[%s, %s]", cases[i].ok,
		    cases[i].bad);
		cr_expect_eq(check(m, req, msg, sizeof(msg)), 409, "%s", req);
		cr_expect(strstr(msg, "requirements[1]") != NULL, "%s", msg);
	}
	json_decref(m);
}

Test(ice_meta, requirements_of_a_missing_table)
{
	cr_expect_eq(check(NULL, "[{\"type\": \"assert-create\"}]", NULL, 0),
	    0);
	cr_expect_eq(check(NULL, "[{\"type\": \"assert-create\"},"
	    " {\"type\": \"assert-last-assigned-field-id\","
	    " \"last-assigned-field-id\": 0}]", NULL, 0), 0);
	cr_expect_eq(check(NULL, "[{\"type\": \"assert-table-uuid\","
	    " \"uuid\": \"" UUID "\"}]", NULL, 0), 409);
	cr_expect_eq(check(NULL, "[{\"type\": \"assert-default-spec-id\","
	    " \"default-spec-id\": 0}]", NULL, 0), 409);
}

Test(ice_meta, malformed_requirements_are_400)
{
	static const char *const bad[] = {
		"{}", "[1]", "[null]", "[{}]", "[{\"type\": 7}]",
		"[{\"type\": \"assert-nothing\"}]",
		"[{\"type\": \"assert-table-uuid\"}]",
		"[{\"type\": \"assert-table-uuid\", \"uuid\": 5}]",
		"[{\"type\": \"assert-ref-snapshot-id\", \"snapshot-id\": 1}]",
		"[{\"type\": \"assert-ref-snapshot-id\", \"ref\": \"main\","
		" \"snapshot-id\": \"1\"}]",
		"[{\"type\": \"assert-current-schema-id\"}]",
		"[{\"type\": \"assert-current-schema-id\","
		" \"current-schema-id\": 1.5}]",
		"[{\"type\": \"assert-default-spec-id\","
		" \"default-spec-id\": 9223372036854775807}]",
		/* malformed after one that fails: still 400 */
		"[{\"type\": \"assert-create\"}, {\"type\": \"bogus\"}]",
	};
	json_t	*m = base_table();
	char	 msg[512];
	size_t	 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(check(m, bad[i], msg, sizeof(msg)), 400, "%s",
		    bad[i]);
		cr_expect_eq(check(NULL, bad[i], msg, sizeof(msg)), 400, "%s",
		    bad[i]);
	}
	json_decref(m);
}

Test(ice_meta, snapshot_on_main_moves_current_and_log)
{
	json_t	*m = table_with_snapshot(), *log, *r;

	cr_expect_eq(geti(m, "current-snapshot-id"), 100);
	cr_expect_eq(geti(m, "last-sequence-number"), 1);
	cr_expect_eq(geti(m, "last-updated-ms"), T0 + 1000);
	cr_expect_eq(geti(json_object_get(json_object_get(m, "refs"), "main"),
	    "snapshot-id"), 100);
	log = json_object_get(m, "snapshot-log");
	cr_expect_eq(json_array_size(log), 1);
	cr_expect_eq(geti(json_array_get(log, 0), "snapshot-id"), 100);
	cr_expect_eq(geti(json_array_get(log, 0), "timestamp-ms"),
	    1700000000500LL);

	/* two snapshots in one commit: only the last one is logged */
	r = apply_ok(m, "[{\"action\": \"add-snapshot\", \"snapshot\": {"
	    "\"snapshot-id\": 101, \"parent-snapshot-id\": 100,"
	    " \"sequence-number\": 2, \"timestamp-ms\": 1700000001000,"
	    " \"manifest-list\": \"m2\", \"summary\": {\"operation\": "
	    "\"append\"}}}, {\"action\": \"set-snapshot-ref\", \"ref-name\":"
	    " \"main\", \"type\": \"branch\", \"snapshot-id\": 101},"
	    " {\"action\": \"add-snapshot\", \"snapshot\": {\"snapshot-id\":"
	    " 102, \"parent-snapshot-id\": 101, \"sequence-number\": 3,"
	    " \"timestamp-ms\": 1700000002000, \"manifest-list\": \"m3\","
	    " \"summary\": {\"operation\": \"overwrite\"}}},"
	    " {\"action\": \"set-snapshot-ref\", \"ref-name\": \"main\","
	    " \"type\": \"branch\", \"snapshot-id\": 102},"
	    " {\"action\": \"set-snapshot-ref\", \"ref-name\": \"v1\","
	    " \"type\": \"tag\", \"snapshot-id\": 100, \"max-ref-age-ms\": 5}]",
	    NULL, T0 + 3000);
	log = json_object_get(r, "snapshot-log");
	cr_expect_eq(json_array_size(log), 2);
	cr_expect_eq(geti(json_array_get(log, 1), "snapshot-id"), 102);
	cr_expect_eq(geti(r, "current-snapshot-id"), 102);
	cr_expect_eq(geti(r, "last-sequence-number"), 3);
	cr_expect_eq(geti(json_object_get(json_object_get(r, "refs"), "v1"),
	    "max-ref-age-ms"), 5);
	json_decref(r);

	/* rollback to an older snapshot is logged at now_ms */
	r = apply_ok(m, "[{\"action\": \"set-snapshot-ref\", \"ref-name\":"
	    " \"main\", \"type\": \"branch\", \"snapshot-id\": 100,"
	    " \"min-snapshots-to-keep\": 2}]", NULL, T0 + 7000);
	log = json_object_get(r, "snapshot-log");
	cr_expect_eq(geti(json_array_get(log, 1), "timestamp-ms"), T0 + 7000);
	json_decref(r);
	json_decref(m);
}

/* Two writers commit from the same base: the second one's requirement
 * fails with 409; without the requirement its stale sequence number is
 * a 409 too. */
Test(ice_meta, two_writers_conflict)
{
	static const char *const req = "[{\"type\": \"assert-ref-snapshot-id\","
	    " \"ref\": \"main\", \"snapshot-id\": 100}]";
	static const char *const upd = "[{\"action\": \"add-snapshot\","
	    " \"snapshot\": {\"snapshot-id\": %d, \"parent-snapshot-id\": 100,"
	    " \"sequence-number\": 2, \"timestamp-ms\": 1700000009000,"
	    " \"manifest-list\": \"m\", \"summary\": {\"operation\": "
	    "\"append\"}}}, {\"action\": \"set-snapshot-ref\", \"ref-name\":"
	    " \"main\", \"type\": \"branch\", \"snapshot-id\": %d}]";
	json_t	*base = table_with_snapshot(), *a;
	char	 u[1024], msg[512];
	ice_err	 e = { 0 };
	json_t	*uj;

	cr_assert_eq(check(base, req, NULL, 0), 0);
	snprintf(u, sizeof(u), upd, 200, 200);
	a = apply_ok(base, u, "s3://b/t/metadata/v2.json", T0 + 9000);
	/* writer B, same base, checks against the new table */
	cr_expect_eq(check(a, req, msg, sizeof(msg)), 409);
	cr_expect(strstr(msg, "main") != NULL, "%s", msg);
	snprintf(u, sizeof(u), upd, 300, 300);
	uj = J(u);
	cr_expect_null(ice_meta_apply(a, uj, NULL, T0 + 9001, &e));
	cr_expect_eq(e.status, 409);
	cr_expect_str_eq(e.type, "CommitFailedException");
	json_decref(uj);
	json_decref(a);
	json_decref(base);
}

Test(ice_meta, create_transaction_from_nothing)
{
	static const char *const tx = "[{\"action\": \"assign-uuid\","
	    " \"uuid\": \"" UUID "\"}, {\"action\": \"upgrade-format-version\","
	    " \"format-version\": %d}, {\"action\": \"add-schema\", \"schema\":"
	    " {\"type\": \"struct\", \"schema-id\": 0, \"fields\": [{\"id\": 1,"
	    " \"name\": \"x\", \"required\": false, \"type\": \"int\"},"
	    " {\"id\": 2, \"name\": \"y\", \"required\": false, \"type\":"
	    " {\"type\": \"list\", \"element-id\": 3, \"element\": \"int\","
	    " \"element-required\": true}}]}, \"last-column-id\": 3},"
	    " {\"action\": \"set-current-schema\", \"schema-id\": -1},"
	    " {\"action\": \"add-spec\", \"spec\": {\"fields\": [{\"source-id\":"
	    " 1, \"field-id\": 1000, \"name\": \"x\", \"transform\":"
	    " \"identity\"}]}}, {\"action\": \"set-default-spec\", \"spec-id\":"
	    " -1}, {\"action\": \"add-sort-order\", \"sort-order\": {"
	    "\"order-id\": 0, \"fields\": []}}, {\"action\":"
	    " \"set-default-sort-order\", \"sort-order-id\": -1},"
	    " {\"action\": \"set-location\", \"location\": \"s3://b/x\"},"
	    " {\"action\": \"set-properties\", \"updates\": {\"k\": \"v\"}}]";
	char	 u[2048];
	json_t	*m;
	int	 v;

	for (v = 1; v <= 2; v++) {
		snprintf(u, sizeof(u), tx, v);
		m = apply_ok(NULL, u, "ignored", T0);
		cr_expect_eq(geti(m, "format-version"), v);
		cr_expect_str_eq(json_string_value(json_object_get(m,
		    "table-uuid")), UUID);
		cr_expect_eq(geti(m, "last-column-id"), 3);
		cr_expect_eq(geti(m, "current-schema-id"), 0);
		cr_expect_eq(geti(m, "default-spec-id"), 0);
		cr_expect_eq(geti(m, "last-partition-id"), 1000);
		cr_expect_eq(geti(m, "default-sort-order-id"), 0);
		cr_expect_eq(geti(m, "current-snapshot-id"), -1);
		cr_expect_eq(geti(m, "last-updated-ms"), T0);
		cr_expect_eq(json_array_size(json_object_get(m,
		    "metadata-log")), 0);
		cr_expect_eq(json_object_get(m, "schema") != NULL, v == 1);
		json_decref(m);
	}
	/* no spec nor order: spec 0 and order 0 */
	m = apply_ok(NULL, "[{\"action\": \"assign-uuid\", \"uuid\": \"" UUID
	    "\"}, {\"action\": \"add-schema\", \"schema\": {\"type\":"
	    " \"struct\", \"fields\": []}}, {\"action\": \"set-location\","
	    " \"location\": \"/x\"}]", NULL, T0);
	cr_expect_eq(geti(m, "last-partition-id"), 999);
	cr_expect_eq(json_array_size(json_object_get(m, "sort-orders")), 1);
	json_decref(m);
	apply_fails(NULL, "[{\"action\": \"add-schema\", \"schema\": {\"type\":"
	    " \"struct\", \"fields\": []}}, {\"action\": \"set-location\","
	    " \"location\": \"/x\"}]", 400, "BadRequestException");
	apply_fails(NULL, "[{\"action\": \"assign-uuid\", \"uuid\": \"" UUID
	    "\"}, {\"action\": \"set-location\", \"location\": \"/x\"}]", 400,
	    "ValidationException");
}

Test(ice_meta, metadata_log_appended_and_trimmed)
{
	json_t	*m = base_table(), *r, *log;
	char	 prev[64];
	int	 i;

	r = apply_ok(m, "[{\"action\": \"set-properties\", \"updates\":"
	    " {\"write.metadata.previous-versions-max\": \"2\"}}]",
	    "s3://b/t/metadata/00000.json", T0 + 10);
	log = json_object_get(r, "metadata-log");
	cr_assert_eq(json_array_size(log), 1);
	cr_expect_eq(geti(json_array_get(log, 0), "timestamp-ms"), T0);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(log,
	    0), "metadata-file")), "s3://b/t/metadata/00000.json");
	cr_expect_eq(geti(r, "last-updated-ms"), T0 + 10);
	json_decref(m);
	for (i = 1; i <= 3; i++) {
		m = r;
		snprintf(prev, sizeof(prev), "f%d.json", i);
		r = apply_ok(m, "[{\"action\": \"remove-properties\","
		    " \"removals\": [\"nope\"]}, {\"action\": \"set-location\","
		    " \"location\": \"s3://b/t2\"}]", prev, T0 + 10 + i);
		json_decref(m);
	}
	log = json_object_get(r, "metadata-log");
	cr_expect_eq(json_array_size(log), 2);
	cr_expect_str_eq(json_string_value(json_object_get(json_array_get(log,
	    1), "metadata-file")), "f1.json");
	/* nothing changes: the same metadata, no log entry */
	m = apply_ok(r, "[{\"action\": \"set-location\", \"location\":"
	    " \"s3://b/t2\"}, {\"action\": \"assign-uuid\", \"uuid\": \"" UUID
	    "\"}]", "f9.json", T0 + 99);
	cr_expect(json_equal(m, r));
	json_decref(m);
	json_decref(r);
}

Test(ice_meta, schema_spec_and_order_evolution)
{
	json_t	*m = base_table(), *r, *s;

	r = apply_ok(m, "[{\"action\": \"add-schema\", \"schema\": {"
	    "\"type\": \"struct\", \"schema-id\": 42, \"fields\": [{\"id\": 1,"
	    " \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
	    " {\"id\": 4, \"name\": \"m\", \"required\": false, \"type\":"
	    " {\"type\": \"map\", \"key-id\": 5, \"key\": \"string\","
	    " \"value-id\": 6, \"value\": {\"type\": \"struct\", \"fields\":"
	    " [{\"id\": 7, \"name\": \"z\", \"required\": false, \"type\":"
	    " \"decimal(9,2)\"}]}, \"value-required\": false}}]}},"
	    " {\"action\": \"set-current-schema\", \"schema-id\": -1},"
	    " {\"action\": \"add-spec\", \"spec\": {\"fields\": [{\"source-id\":"
	    " 1, \"name\": \"idb\", \"transform\": \"bucket[8]\"}]}},"
	    " {\"action\": \"set-default-spec\", \"spec-id\": -1},"
	    " {\"action\": \"add-sort-order\", \"sort-order\": {\"order-id\": 9,"
	    " \"fields\": [{\"source-id\": 1, \"transform\": \"identity\","
	    " \"direction\": \"desc\", \"null-order\": \"nulls-last\"}]}},"
	    " {\"action\": \"set-default-sort-order\", \"sort-order-id\": -1}]",
	    NULL, T0 + 1);
	cr_expect_eq(geti(r, "current-schema-id"), 1);
	cr_expect_eq(geti(r, "last-column-id"), 7);
	cr_expect_eq(geti(r, "default-spec-id"), 1);
	s = json_array_get(json_object_get(json_array_get(json_object_get(r,
	    "partition-specs"), 1), "fields"), 0);
	cr_expect_eq(geti(s, "field-id"), 1001);
	cr_expect_eq(geti(r, "last-partition-id"), 1001);
	cr_expect_eq(geti(r, "default-sort-order-id"), 2);
	json_decref(m);
	/* identical schema and spec are reused; equivalent field id too */
	m = apply_ok(r, "[{\"action\": \"add-schema\", \"schema\": {"
	    "\"type\": \"struct\", \"schema-id\": 5, \"identifier-field-ids\":"
	    " [1], \"fields\": [{\"id\": 1, \"name\": \"id\", \"required\":"
	    " true, \"type\": \"long\"}, {\"id\": 2, \"name\": \"data\","
	    " \"required\": false, \"type\": \"string\"}, {\"id\": 3, \"name\":"
	    " \"ts\", \"required\": false, \"type\": \"timestamptz\"}]}},"
	    " {\"action\": \"set-current-schema\", \"schema-id\": -1},"
	    " {\"action\": \"add-spec\", \"spec\": {\"fields\": [{\"source-id\":"
	    " 3, \"name\": \"ts_day\", \"transform\": \"day\"}]}},"
	    " {\"action\": \"set-default-spec\", \"spec-id\": -1},"
	    " {\"action\": \"add-spec\", \"spec\": {\"fields\": [{\"source-id\":"
	    " 3, \"name\": \"day2\", \"transform\": \"day\"}]}}]", NULL, T0 + 2);
	cr_expect_eq(geti(m, "current-schema-id"), 0);
	cr_expect_eq(json_array_size(json_object_get(m, "schemas")), 2);
	cr_expect_eq(geti(m, "default-spec-id"), 0);
	cr_expect_eq(json_array_size(json_object_get(m, "partition-specs")), 3);
	s = json_array_get(json_object_get(json_array_get(json_object_get(m,
	    "partition-specs"), 2), "fields"), 0);
	cr_expect_eq(geti(s, "field-id"), 1000);
	json_decref(m);
	json_decref(r);
}

Test(ice_meta, removals_and_upgrade)
{
	json_t	*m = table_with_snapshot(), *r;

	r = apply_ok(m, "[{\"action\": \"remove-snapshots\", \"snapshot-ids\":"
	    " [100, 555]}]", NULL, T0 + 2);
	cr_expect_eq(geti(r, "current-snapshot-id"), -1);
	cr_expect_eq(json_object_size(json_object_get(r, "refs")), 0);
	cr_expect_eq(json_array_size(json_object_get(r, "snapshots")), 0);
	cr_expect_eq(json_array_size(json_object_get(r, "snapshot-log")), 0);
	json_decref(r);
	r = apply_ok(m, "[{\"action\": \"remove-snapshot-ref\", \"ref-name\":"
	    " \"main\"}]", NULL, T0 + 2);
	cr_expect_eq(geti(r, "current-snapshot-id"), -1);
	cr_expect_eq(json_array_size(json_object_get(r, "snapshots")), 1);
	json_decref(r);
	json_decref(m);

	m = J("{\"format-version\": 1, \"table-uuid\": \"" UUID "\","
	    " \"location\": \"/old\", \"last-updated-ms\": 5,"
	    " \"last-column-id\": 1, \"schema\": {\"type\": \"struct\","
	    " \"fields\": [{\"id\": 1, \"name\": \"a\", \"required\": true,"
	    " \"type\": \"int\"}]}, \"partition-spec\": [{\"name\": \"a\","
	    " \"transform\": \"identity\", \"source-id\": 1}],"
	    " \"properties\": {}, \"current-snapshot-id\": 3, \"snapshots\":"
	    " [{\"snapshot-id\": 3, \"timestamp-ms\": 4, \"manifests\": []}]}");
	cr_expect_eq(ice_meta_validate(m, NULL), 0);
	r = apply_ok(m, "[{\"action\": \"upgrade-format-version\","
	    " \"format-version\": 2}]", "/old/v1.json", T0);
	cr_expect_eq(geti(r, "format-version"), 2);
	cr_expect_eq(geti(r, "last-sequence-number"), 0);
	cr_expect_eq(geti(r, "last-partition-id"), 1000);
	cr_expect_null(json_object_get(r, "schema"));
	cr_expect_eq(json_array_size(json_object_get(r, "metadata-log")), 1);
	cr_expect_eq(geti(json_object_get(json_object_get(r, "refs"), "main"),
	    "snapshot-id"), 3);
	apply_fails(r, "[{\"action\": \"upgrade-format-version\","
	    " \"format-version\": 1}]", 400, "ValidationException");
	apply_fails(r, "[{\"action\": \"upgrade-format-version\","
	    " \"format-version\": 3}]", 400, "ValidationException");
	json_decref(r);
	json_decref(m);
}

Test(ice_meta, malformed_updates_are_400)
{
	static const struct {
		const char *u, *type;
	} bad[] = {
#define B "BadRequestException"
#define V "ValidationException"
		{ "{}", B }, { "[1]", B }, { "[{}]", B },
		{ "[{\"action\": 3}]", B },
		{ "[{\"action\": \"drop-table\"}]", B },
		{ "[{\"action\": \"assign-uuid\"}]", B },
		{ "[{\"action\": \"assign-uuid\", \"uuid\": \"nope\"}]", B },
		{ "[{\"action\": \"assign-uuid\", \"uuid\": \"" UUID2 "\"}]", V },
		{ "[{\"action\": \"upgrade-format-version\","
		  " \"format-version\": \"2\"}]", B },
		{ "[{\"action\": \"add-schema\"}]", B },
		{ "[{\"action\": \"add-schema\", \"schema\": []}]", B },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": {}}}]", B },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": [{\"id\": \"1\", \"name\": \"a\","
		  " \"required\": true, \"type\": \"int\"}]}}]", B },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": [{\"id\": 1, \"name\": \"a\","
		  " \"required\": true, \"type\": \"int\"}, {\"id\": 1,"
		  " \"name\": \"b\", \"required\": true, \"type\": \"int\"}]}}]",
		  B },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": [{\"id\": 1, \"name\": \"a\","
		  " \"required\": true, \"type\": \"intt\"}]}}]", B },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": [{\"id\": 1, \"name\": \"a\","
		  " \"required\": true, \"type\": \"variant\"}]}}]", V },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": [{\"id\": 99999999999, \"name\":"
		  " \"a\", \"required\": true, \"type\": \"int\"}]}}]", B },
		{ "[{\"action\": \"add-schema\", \"schema\": {\"type\": "
		  "\"struct\", \"fields\": [{\"id\": 1, \"name\": \"a\","
		  " \"required\": true, \"type\": {\"type\": \"list\"}}]}}]", B },
		{ "[{\"action\": \"set-current-schema\", \"schema-id\": 9}]", V },
		{ "[{\"action\": \"set-current-schema\", \"schema-id\": -1}]", V },
		{ "[{\"action\": \"set-current-schema\", \"schema-id\": -2}]", B },
		{ "[{\"action\": \"add-spec\", \"spec\": {\"fields\": [{"
		  "\"source-id\": 77, \"name\": \"x\", \"transform\": "
		  "\"identity\"}]}}]", V },
		{ "[{\"action\": \"add-spec\", \"spec\": {\"fields\": [{"
		  "\"source-id\": 1, \"name\": \"x\"}]}}]", B },
		{ "[{\"action\": \"add-spec\", \"spec\": {\"fields\": [{"
		  "\"source-id\": 1, \"name\": \"x\", \"transform\": \"identity\"},"
		  " {\"source-id\": 2, \"name\": \"x\", \"transform\": "
		  "\"identity\"}]}}]", V },
		{ "[{\"action\": \"set-default-spec\", \"spec-id\": 4}]", V },
		{ "[{\"action\": \"add-spec\", \"spec\": {\"fields\": [{"
		  "\"source-id\": 1, \"name\": \"a\", \"transform\": \"identity\"},"
		  " {\"source-id\": 2, \"name\": \"b\", \"transform\": \"identity\","
		  " \"field-id\": 2147483647}]}}]", V },
		{ "[{\"action\": \"add-sort-order\", \"sort-order\": {\"fields\": "
		  "[{\"source-id\": 1, \"transform\": \"identity\", \"direction\":"
		  " \"up\", \"null-order\": \"nulls-last\"}]}}]", B },
		{ "[{\"action\": \"set-default-sort-order\", \"sort-order-id\":"
		  " 8}]", V },
		{ "[{\"action\": \"add-snapshot\", \"snapshot\": {"
		  "\"sequence-number\": 1, \"timestamp-ms\": 1, \"manifest-list\":"
		  " \"m\", \"summary\": {\"operation\": \"append\"}}}]", B },
		{ "[{\"action\": \"add-snapshot\", \"snapshot\": {\"snapshot-id\":"
		  " 1, \"timestamp-ms\": 1, \"manifest-list\": \"m\","
		  " \"summary\": {\"operation\": \"append\"}}}]", B },
		{ "[{\"action\": \"add-snapshot\", \"snapshot\": {\"snapshot-id\":"
		  " 1, \"sequence-number\": 1, \"timestamp-ms\": 1,"
		  " \"manifest-list\": \"m\", \"summary\": {\"operation\":"
		  " \"upsert\"}}}]", B },
		{ "[{\"action\": \"add-snapshot\", \"snapshot\": {\"snapshot-id\":"
		  " 100, \"sequence-number\": 5, \"timestamp-ms\": 1,"
		  " \"manifest-list\": \"m\", \"summary\": {\"operation\":"
		  " \"append\"}}}]", V },
		{ "[{\"action\": \"set-snapshot-ref\", \"ref-name\": \"main\","
		  " \"type\": \"branch\", \"snapshot-id\": 12345}]", V },
		{ "[{\"action\": \"set-snapshot-ref\", \"ref-name\": \"main\","
		  " \"type\": \"tag\", \"snapshot-id\": 100}]", V },
		{ "[{\"action\": \"set-snapshot-ref\", \"ref-name\": \"x\","
		  " \"type\": \"twig\", \"snapshot-id\": 100}]", B },
		{ "[{\"action\": \"set-snapshot-ref\", \"ref-name\": \"x\","
		  " \"type\": \"tag\", \"snapshot-id\": 100,"
		  " \"min-snapshots-to-keep\": 3}]", V },
		{ "[{\"action\": \"set-snapshot-ref\", \"ref-name\": \"x\","
		  " \"type\": \"branch\", \"snapshot-id\": 100,"
		  " \"max-ref-age-ms\": 0}]", B },
		{ "[{\"action\": \"remove-snapshots\", \"snapshot-ids\": [\"1\"]}]",
		  B },
		{ "[{\"action\": \"remove-snapshot-ref\"}]", B },
		{ "[{\"action\": \"set-location\", \"location\": 5}]", B },
		{ "[{\"action\": \"set-properties\", \"updates\": {\"a\": 1}}]", B },
		{ "[{\"action\": \"set-properties\", \"updates\": [\"a\"]}]", B },
		{ "[{\"action\": \"remove-properties\", \"removals\": [1]}]", B },
		{ "[{\"action\": \"remove-schemas\", \"schema-ids\": [0]}]", V },
		{ "[{\"action\": \"remove-partition-specs\", \"spec-ids\": [0]}]",
		  V },
		{ "[{\"action\": \"add-encryption-key\", \"encryption-key\": {}}]",
		  V },
		{ "[{\"action\": \"set-statistics\", \"statistics\": {"
		  "\"snapshot-id\": 100}}]", B },
		{ "[{\"action\": \"set-location\", \"location\": \"/x\"}, null]",
		  B },
#undef B
#undef V
	};
	json_t	*m = table_with_snapshot();
	size_t	 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		apply_fails(m, bad[i].u, 400, bad[i].type);
	json_decref(m);
}

Test(ice_meta, malformed_creates_are_400)
{
	static const char *const bad[] = {
		"[]", "{}", "{\"name\": \"t\"}",
		"{\"name\": 1, \"schema\": {\"type\": \"struct\", \"fields\": []}}",
		"{\"name\": \"\", \"schema\": {\"type\": \"struct\", \"fields\": []}}",
		"{\"name\": \"t\", \"schema\": {\"fields\": []}}",
		"{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"fields\": [],"
		" \"identifier-field-ids\": [4]}}",
		"{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"fields\": []},"
		" \"properties\": {\"format-version\": \"3\"}}",
		"{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"fields\": []},"
		" \"properties\": {\"a\": true}}",
		"{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"fields\": []},"
		" \"partition-spec\": {\"fields\": [{\"source-id\": 1, \"name\":"
		" \"a\", \"transform\": \"identity\"}]}}",
		"{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"fields\": []},"
		" \"write-order\": {\"fields\": 3}}",
		"{\"name\": \"t\", \"schema\": {\"type\": \"struct\", \"fields\": []},"
		" \"stage-create\": \"yes\"}",
	};
	ice_err	 e = { 0 };
	json_t	*req, *m;
	size_t	 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req = J(bad[i]);
		m = ice_meta_create(req, "/x", UUID, T0, &e);
		cr_expect_null(m, "accepted %s", bad[i]);
		json_decref(m);
		cr_expect_eq(e.status, 400, "%s", bad[i]);
		json_decref(req);
	}
	cr_expect_null(ice_meta_create(NULL, "/x", UUID, T0, &e));
	req = J(create_req);
	cr_expect_null(ice_meta_create(req, "/x", "not-a-uuid", T0, NULL));
	cr_expect_null(ice_meta_create(req, NULL, UUID, T0, &e));
	cr_expect_eq(e.status, 400);
	json_decref(req);
	cr_expect_null(ice_meta_apply(NULL, NULL, NULL, T0, &e));
	cr_expect_eq(e.status, 400);
	cr_expect_eq(ice_meta_validate(NULL, &e), -1);
}

Test(ice_meta, validate_refuses_broken_metadata)
{
	static const char *const edits[] = {
		"{\"format-version\": 3}", "{\"format-version\": \"2\"}",
		"{\"table-uuid\": null}", "{\"location\": 1}",
		"{\"current-schema-id\": 4}", "{\"default-spec-id\": 4}",
		"{\"default-sort-order-id\": 4}", "{\"last-sequence-number\": -1}",
		"{\"schemas\": []}", "{\"schemas\": [{\"schema-id\": 0}]}",
		"{\"current-snapshot-id\": 5}",
		"{\"refs\": {\"main\": {\"snapshot-id\": 100, \"type\": \"tag\"}}}",
		"{\"refs\": {\"x\": {\"snapshot-id\": 1, \"type\": \"branch\"}}}",
		"{\"properties\": {\"a\": 1}}", "{\"snapshot-log\": [1]}",
		"{\"metadata-log\": [{\"timestamp-ms\": 1}]}",
		"{\"snapshots\": [{\"snapshot-id\": 100, \"timestamp-ms\": 1,"
		" \"sequence-number\": 1}, {\"snapshot-id\": 100,"
		" \"timestamp-ms\": 1, \"sequence-number\": 1}]}",
	};
	json_t	*m = table_with_snapshot(), *c, *edit;
	ice_err	 e;
	size_t	 i;

	cr_assert_eq(ice_meta_validate(m, &e), 0, "%s", e.message);
	for (i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		c = json_deep_copy(m);
		edit = J(edits[i]);
		json_object_update(c, edit);
		cr_expect_eq(ice_meta_validate(c, &e), -1, "accepted %s",
		    edits[i]);
		cr_expect_eq(e.status, 400);
		json_decref(edit);
		json_decref(c);
	}
	json_decref(m);
}

/* Every member of metadata and of each update, replaced by a value of
 * each JSON type, gives a result or a 400/409, never a crash. */
Test(ice_meta, no_crash_on_wrong_types)
{
	static const char *const vals[] = { "null", "true", "-1", "0",
	    "9223372036854775807", "-9223372036854775808", "1.5", "\"x\"",
	    "[]", "[1, \"a\", null]", "{}", "{\"type\": \"struct\"}" };
	static const char *const upd = "[{\"action\": \"add-snapshot\","
	    " \"snapshot\": {\"snapshot-id\": 7, \"parent-snapshot-id\": 100,"
	    " \"sequence-number\": 2, \"timestamp-ms\": 3, \"manifest-list\":"
	    " \"m\", \"summary\": {\"operation\": \"append\"}}},"
	    " {\"action\": \"set-snapshot-ref\", \"ref-name\": \"b\","
	    " \"type\": \"branch\", \"snapshot-id\": 7,"
	    " \"max-snapshot-age-ms\": 9},"
	    " {\"action\": \"add-schema\", \"schema\": {\"type\": \"struct\","
	    " \"fields\": [{\"id\": 9, \"name\": \"q\", \"required\": false,"
	    " \"type\": \"int\"}]}},"
	    " {\"action\": \"add-spec\", \"spec\": {\"fields\": [{\"source-id\":"
	    " 1, \"name\": \"p\", \"transform\": \"identity\"}]}},"
	    " {\"action\": \"add-sort-order\", \"sort-order\": {\"fields\":"
	    " [{\"source-id\": 1, \"transform\": \"identity\", \"direction\":"
	    " \"asc\", \"null-order\": \"nulls-first\"}]}},"
	    " {\"action\": \"set-statistics\", \"statistics\": {\"snapshot-id\":"
	    " 7, \"statistics-path\": \"s\", \"file-size-in-bytes\": 1,"
	    " \"file-footer-size-in-bytes\": 1, \"blob-metadata\": []}},"
	    " {\"action\": \"remove-snapshots\", \"snapshot-ids\": [7]}]";
	json_t	*m = table_with_snapshot(), *u = J(upd), *c, *v, *r, *el, *tgt;
	const char *k;
	void	*tmp;
	ice_err	 e;
	size_t	 i, j, n = 0;

	r = ice_meta_apply(m, u, "p", T0 + 50, &e);
	cr_assert_not_null(r, "%s", e.message);
	json_decref(r);
	for (j = 0; j < sizeof(vals) / sizeof(vals[0]); j++) {
		v = J(vals[j]);
		json_object_foreach_safe(m, tmp, k, el) {
			c = json_deep_copy(m);
			json_object_set(c, k, v);
			if (ice_meta_validate(c, &e) < 0)
				cr_expect_eq(e.status, 400);
			r = ice_meta_apply(c, u, "p", T0, &e);
			cr_expect(r != NULL || e.status == 400 ||
			    e.status == 409, "%s=%s", k,
			    vals[j]);
			json_decref(r);
			ice_meta_check(c, NULL, &e);
			json_decref(c);
			n++;
		}
		for (i = 0; i < json_array_size(u); i++) {
			c = json_deep_copy(u);
			tgt = json_array_get(c, i);
			if (json_object_get(tgt, "snapshot"))
				tgt = json_object_get(tgt, "snapshot");
			json_object_foreach_safe(tgt, tmp, k, el) {
				r = json_deep_copy(c);
				el = json_array_get(r, i);
				if (json_object_get(el, "snapshot"))
					el = json_object_get(el, "snapshot");
				json_object_set(el, k, v);
				el = ice_meta_apply(m, r, NULL, T0, &e);
				cr_expect(el != NULL || e.status == 400 ||
				    e.status == 409, "%zu.%s=%s", i, k,
				    vals[j]);
				json_decref(el);
				json_decref(r);
				n++;
			}
			json_decref(c);
		}
		json_decref(v);
	}
	cr_expect_gt(n, 100);
	json_decref(u);
	json_decref(m);
}
