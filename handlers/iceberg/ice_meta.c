/*
 * ice_meta.c - Iceberg table metadata (format v1/v2): create, commit
 * requirements, table updates and validation, as ice_meta.h describes.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "ice_meta.h"

#define FV_MAX		2
#define PART_START	1000		/* first partition field id */
#define NONE		INT64_MIN	/* nothing added yet */
#define LOG_MAX_DEFAULT	100

/* Where errors go, and what their messages start with. */
typedef struct at {
	ice_err	*e;
	char	 pre[160];
} at;

/* Field ids of a schema, and what was learnt of one target id. */
struct ids {
	int64_t	*v;
	size_t	 n, cap;
	int64_t	 max;
	int64_t	 target;
	int	 found, prim, nested;
};

/* Old column ids of a create, in the order of their new ids 1, 2, ... */
struct remap {
	int64_t	*from;
	size_t	 n, cap;
	int64_t	 next;
};

/* The state of one ice_meta_apply. */
struct ctx {
	at	 a;
	json_t	*m;
	int64_t	 fv, now;
	int64_t	 last_schema, last_spec, last_order;
	json_t	*added;		/* snapshot ids added by this commit */
	json_t	*on_main;	/* added ids main was set to */
	int	 removed;	/* some snapshot was removed */
};

static const char *const reserved[] = { "format-version", "uuid",
	"snapshot-count", "current-snapshot-id", "current-snapshot-summary",
	"current-snapshot-timestamp-ms", "current-schema",
	"default-partition-spec", "default-sort-order", NULL };

/* Fills *a->e with status, type and a->pre + fmt; returns -1. */
static int __attribute__((format(printf, 4, 5)))
fail(at *a, int status, const char *type, const char *fmt, ...)
{
	char	 msg[320];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	a->e->status = status;
	a->e->type = type;
	if (snprintf(a->e->message, sizeof(a->e->message), "%s%s",
	    a->pre, msg) < 0)
		a->e->message[0] = '\0';
	return -1;
}

#define BADREQ(a, ...)	 fail((a), 400, "BadRequestException", __VA_ARGS__)
#define INVALID(a, ...)	 fail((a), 400, "ValidationException", __VA_ARGS__)
#define CONFLICT(a, ...) fail((a), 409, "CommitFailedException", __VA_ARGS__)

/* Makes *dst a copy of src whose prefix goes on with fmt. */
static void __attribute__((format(printf, 3, 4)))
sub(at *dst, const at *src, const char *fmt, ...)
{
	size_t	 len;
	va_list	 ap;

	*dst = *src;
	len = strlen(dst->pre);
	va_start(ap, fmt);
	vsnprintf(dst->pre + len, sizeof(dst->pre) - len, fmt, ap);
	va_end(ap);
}

/* Returns o[k] when o is an object and the member is there and not null. */
static json_t *
field(const json_t *o, const char *k)
{
	json_t	*v = json_is_object(o) ? json_object_get(o, k) : NULL;

	return json_is_null(v) ? NULL : v;
}

/* Reads integer o[k] in [lo, hi]; returns 1, 0 when absent and optional,
 * or -1 with *a. */
static int
get_int(at *a, const json_t *o, const char *k, int req, int64_t lo,
    int64_t hi, int64_t *out)
{
	json_t		*v = field(o, k);
	json_int_t	 x;

	if (v == NULL)
		return req ? BADREQ(a, "missing '%s'", k) : 0;
	if (!json_is_integer(v))
		return BADREQ(a, "'%s' must be an integer", k);
	x = json_integer_value(v);
	if (x < lo || x > hi)
		return BADREQ(a, "'%s' out of range: %lld", k, (long long)x);
	*out = x;
	return 1;
}

/* Reads o[k] of JSON type t into *out; returns 1, 0 when absent and
 * optional, or -1 with *a. */
static int
get_typed(at *a, const json_t *o, const char *k, int req, json_type t,
    json_t **out)
{
	static const char *const names[] = { "an object", "an array",
	    "a string", "an integer", "a number", "a boolean", "a boolean" };
	json_t	*v = field(o, k);

	*out = NULL;
	if (v == NULL)
		return req ? BADREQ(a, "missing '%s'", k) : 0;
	if (json_typeof(v) != t && !(t == JSON_TRUE && json_is_boolean(v)))
		return BADREQ(a, "'%s' must be %s", k,
		    t <= JSON_FALSE ? names[t] : "given");
	*out = v;
	return 1;
}

/* Reads string o[k] into *out; returns 1, 0 when absent and optional, or
 * -1 with *a. */
static int
get_str(at *a, const json_t *o, const char *k, int req, const char **out)
{
	json_t	*v;
	int	 rc;

	rc = get_typed(a, o, k, req, JSON_STRING, &v);
	*out = json_string_value(v);
	return rc;
}

/* Returns integer m[k], or dflt when it is not an integer. */
static int64_t
mint(const json_t *m, const char *k, int64_t dflt)
{
	json_t	*v = field(m, k);

	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* Returns the element of array arr whose integer key equals id, or NULL;
 * its index goes to *idx when idx is not NULL. */
static json_t *
find_by(const json_t *arr, const char *key, int64_t id, size_t *idx)
{
	size_t	 i;
	json_t	*v;

	json_array_foreach(arr, i, v) {
		json_t *k = json_object_get(v, key);
		if (json_is_integer(k) && json_integer_value(k) == id) {
			if (idx != NULL)
				*idx = i;
			return v;
		}
	}
	return NULL;
}

/* Returns whether array arr holds the integer id. */
static int
has_int(const json_t *arr, int64_t id)
{
	size_t	 i;
	json_t	*v;

	json_array_foreach(arr, i, v)
		if (json_is_integer(v) && json_integer_value(v) == id)
			return 1;
	return 0;
}

/* Compares two int64 for qsort. */
static int
cmp64(const void *x, const void *y)
{
	int64_t	 p = *(const int64_t *)x, q = *(const int64_t *)y;

	return (p > q) - (p < q);
}

/* Appends v to the growable array *arr; returns 0, or -1 when out of
 * memory. */
static int
push64(int64_t **arr, size_t *n, size_t *cap, int64_t v)
{
	int64_t	*p;

	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 32;
		if ((p = realloc(*arr, *cap * sizeof(*p))) == NULL)
			return -1;
		*arr = p;
	}
	(*arr)[(*n)++] = v;
	return 0;
}

/* Sorts v[0..n) and returns 1 with *dup when a value repeats, else 0. */
static int
find_dup(int64_t *v, size_t n, int64_t *dup)
{
	size_t	 i;

	if (n < 2)
		return 0;
	qsort(v, n, sizeof(*v), cmp64);
	for (i = 1; i < n; i++)
		if (v[i] == v[i - 1]) {
			*dup = v[i];
			return 1;
		}
	return 0;
}

/* Returns whether s has the 8-4-4-4-12 hex form of a UUID. */
static int
uuid_ok(const char *s)
{
	size_t	 i;

	if (s == NULL || strlen(s) != 36)
		return 0;
	for (i = 0; i < 36; i++)
		if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' :
		    strchr("0123456789abcdefABCDEF", s[i]) == NULL)
			return 0;
	return 1;
}

static int walk_fields(at *, const json_t *, struct ids *, int);

/* Records field id id (of type t, inside a list or map when nested) in w;
 * returns 0, or -1 with *a. */
static int
note_id(at *a, struct ids *w, int64_t id, const json_t *t, int nested)
{
	if (push64(&w->v, &w->n, &w->cap, id) < 0)
		return INVALID(a, "out of memory");
	if (id > w->max)
		w->max = id;
	if (id == w->target) {
		w->found = 1;
		w->prim = json_is_string(t);
		w->nested = nested;
	}
	return 0;
}

/* Checks type t (a primitive name, struct, list or map) and collects its
 * field ids into w; returns 0, or -1 with *a. */
static int
walk_type(at *a, const json_t *t, struct ids *w, int nested)
{
	static const char *const prims[] = { "boolean", "int", "long",
	    "float", "double", "date", "time", "timestamp", "timestamptz",
	    "string", "uuid", "binary", NULL };
	static const char *const v3[] = { "timestamp_ns", "timestamptz_ns",
	    "variant", "unknown", "geometry", "geography", NULL };
	const char	*s;
	json_t		*x, *y;
	int64_t		 id = 0, id2 = 0;
	size_t		 i;

	if (json_is_string(t)) {
		s = json_string_value(t);
		for (i = 0; prims[i] != NULL; i++)
			if (strcmp(s, prims[i]) == 0)
				return 0;
		if (strncmp(s, "fixed[", 6) == 0 ||
		    strncmp(s, "decimal(", 8) == 0)
			return 0;
		for (i = 0; v3[i] != NULL; i++)
			if (strncmp(s, v3[i], strlen(v3[i])) == 0)
				return INVALID(a, "type %s is not supported "
				    "until v3", v3[i]);
		return BADREQ(a, "unknown type '%.64s'", s);
	}
	if (get_str(a, t, "type", 1, &s) < 0)
		return -1;
	if (strcmp(s, "struct") == 0) {
		if (get_typed(a, t, "fields", 1, JSON_ARRAY, &x) < 0)
			return -1;
		return walk_fields(a, x, w, nested);
	}
	if (strcmp(s, "list") == 0) {
		if (get_int(a, t, "element-id", 1, 0, INT32_MAX, &id) < 0 ||
		    get_typed(a, t, "element-required", 1, JSON_TRUE, &y) < 0)
			return -1;
		if ((x = field(t, "element")) == NULL)
			return BADREQ(a, "missing 'element'");
		if (note_id(a, w, id, x, 1) < 0)
			return -1;
		return walk_type(a, x, w, 1);
	}
	if (strcmp(s, "map") == 0) {
		if (get_int(a, t, "key-id", 1, 0, INT32_MAX, &id) < 0 ||
		    get_int(a, t, "value-id", 1, 0, INT32_MAX, &id2) < 0 ||
		    get_typed(a, t, "value-required", 1, JSON_TRUE, &y) < 0)
			return -1;
		if ((x = field(t, "key")) == NULL ||
		    (y = field(t, "value")) == NULL)
			return BADREQ(a, "map needs 'key' and 'value'");
		if (note_id(a, w, id, x, 1) < 0 ||
		    note_id(a, w, id2, y, 1) < 0 ||
		    walk_type(a, x, w, 1) < 0)
			return -1;
		return walk_type(a, y, w, 1);
	}
	return BADREQ(a, "unknown type '%.64s'", s);
}

/* Checks the struct fields array fs and collects its ids into w; returns
 * 0, or -1 with *a. */
static int
walk_fields(at *a, const json_t *fs, struct ids *w, int nested)
{
	size_t		 i;
	json_t		*f, *v;
	const char	*name;
	int64_t		 id = 0;

	json_array_foreach(fs, i, f) {
		if (!json_is_object(f))
			return BADREQ(a, "struct field %zu must be an object",
			    i);
		if (get_int(a, f, "id", 1, 0, INT32_MAX, &id) < 0 ||
		    get_str(a, f, "name", 1, &name) < 0 ||
		    get_typed(a, f, "required", 1, JSON_TRUE, &v) < 0)
			return -1;
		if ((v = field(f, "type")) == NULL)
			return BADREQ(a, "field %lld has no 'type'",
			    (long long)id);
		if (field(f, "initial-default") != NULL)
			return INVALID(a, "field %lld: a non-null "
			    "initial-default is not supported until v3",
			    (long long)id);
		if (note_id(a, w, id, v, nested) < 0 ||
		    walk_type(a, v, w, nested) < 0)
			return -1;
	}
	return 0;
}

/* Checks schema s (struct type, unique field ids, identifier fields that
 * exist); fills w (caller frees w->v; w->target may be preset).  Returns
 * 0, or -1 with *a. */
static int
schema_scan(at *a, const json_t *s, struct ids *w)
{
	const char	*type;
	json_t		*fs, *idf = NULL, *v;
	int64_t		 dup, *copy;
	size_t		 i, j;

	w->max = 0;
	w->found = 0;
	if (!json_is_object(s))
		return BADREQ(a, "schema must be an object");
	if (get_str(a, s, "type", 1, &type) < 0)
		return -1;
	if (strcmp(type, "struct") != 0)
		return BADREQ(a, "schema 'type' must be \"struct\"");
	if (get_typed(a, s, "fields", 1, JSON_ARRAY, &fs) < 0 ||
	    get_typed(a, s, "identifier-field-ids", 0, JSON_ARRAY, &idf) < 0 ||
	    walk_fields(a, fs, w, 0) < 0)
		return -1;
	if (w->n > 0) {
		if ((copy = malloc(w->n * sizeof(*copy))) == NULL)
			return INVALID(a, "out of memory");
		memcpy(copy, w->v, w->n * sizeof(*copy));
		i = find_dup(copy, w->n, &dup);
		free(copy);
		if (i)
			return BADREQ(a, "field id %lld is used twice",
			    (long long)dup);
	}
	json_array_foreach(idf, i, v) {
		for (j = 0; j < w->n; j++)
			if (json_is_integer(v) &&
			    json_integer_value(v) == w->v[j])
				break;
		if (j == w->n)
			return BADREQ(a, "identifier-field-ids[%zu] is not a "
			    "field id of the schema", i);
	}
	return 0;
}

/* Checks that source column id is a primitive column of schema, not in a
 * list or map; returns 0, or -1 with *a. */
static int
check_source(at *a, const json_t *schema, int64_t id)
{
	struct ids	 w = { .target = id };
	ice_err		 ignored;
	at		 quiet = { &ignored, "" };
	int		 rc;

	rc = schema_scan(&quiet, schema, &w);
	free(w.v);
	if (rc < 0 || !w.found)
		return INVALID(a, "source column %lld is not in the schema",
		    (long long)id);
	if (!w.prim || w.nested)
		return INVALID(a, "source column %lld must be a primitive "
		    "outside lists and maps", (long long)id);
	return 0;
}

/* Checks partition field f (index i) against schema; returns a new
 * {name, transform, source-id} object, or NULL with *a. */
static json_t *
part_field(at *a, const json_t *f, size_t i, const json_t *schema)
{
	at		 b;
	const char	*name, *tr;
	int64_t		 src = 0;

	sub(&b, a, "fields[%zu]: ", i);
	if (!json_is_object(f)) {
		BADREQ(&b, "must be an object");
		return NULL;
	}
	if (get_int(&b, f, "source-id", 1, 0, INT32_MAX, &src) < 0 ||
	    get_str(&b, f, "name", 1, &name) < 0 ||
	    get_str(&b, f, "transform", 1, &tr) < 0)
		return NULL;
	if (*name == '\0') {
		BADREQ(&b, "'name' is empty");
		return NULL;
	}
	if (strcmp(tr, "void") != 0 && check_source(&b, schema, src) < 0)
		return NULL;
	return json_pack("{s:s, s:s, s:I}", "name", name, "transform", tr,
	    "source-id", (json_int_t)src);
}

/* Checks sort field f (index i) against schema; returns a new
 * {transform, source-id, direction, null-order}, or NULL with *a. */
static json_t *
sort_field(at *a, const json_t *f, size_t i, const json_t *schema)
{
	at		 b;
	const char	*tr, *dir, *nulls;
	int64_t		 src = 0;

	sub(&b, a, "fields[%zu]: ", i);
	if (!json_is_object(f)) {
		BADREQ(&b, "must be an object");
		return NULL;
	}
	if (get_int(&b, f, "source-id", 1, 0, INT32_MAX, &src) < 0 ||
	    get_str(&b, f, "transform", 1, &tr) < 0 ||
	    get_str(&b, f, "direction", 1, &dir) < 0 ||
	    get_str(&b, f, "null-order", 1, &nulls) < 0)
		return NULL;
	if (strcmp(dir, "asc") != 0 && strcmp(dir, "desc") != 0) {
		BADREQ(&b, "'direction' must be asc or desc");
		return NULL;
	}
	if (strcmp(nulls, "nulls-first") != 0 &&
	    strcmp(nulls, "nulls-last") != 0) {
		BADREQ(&b, "'null-order' must be nulls-first or nulls-last");
		return NULL;
	}
	if (check_source(&b, schema, src) < 0)
		return NULL;
	return json_pack("{s:s, s:I, s:s, s:s}", "transform", tr,
	    "source-id", (json_int_t)src, "direction", dir,
	    "null-order", nulls);
}

/* Checks that the partition fields of array fs have distinct names;
 * returns 0, or -1 with *a. */
static int
distinct_names(at *a, const json_t *fs)
{
	size_t	 i, j;

	for (i = 0; i < json_array_size(fs); i++)
		for (j = 0; j < i; j++)
			if (json_equal(json_object_get(json_array_get(fs, i),
			    "name"), json_object_get(json_array_get(fs, j),
			    "name")))
				return INVALID(a, "partition name '%s' is "
				    "used twice", json_string_value(
				    json_object_get(json_array_get(fs, i),
				    "name")));
	return 0;
}

/* Returns the current schema of metadata m, or NULL. */
static json_t *
cur_schema(const json_t *m)
{
	return find_by(field(m, "schemas"), "schema-id",
	    mint(m, "current-schema-id", NONE), NULL);
}

/* Gives the v1-only members (schema, partition-spec) to v1 metadata m and
 * takes them, or last-sequence-number, from the version without them. */
static void
finish_version(json_t *m)
{
	json_t	*spec;

	if (mint(m, "format-version", 2) == 1) {
		spec = find_by(field(m, "partition-specs"), "spec-id",
		    mint(m, "default-spec-id", NONE), NULL);
		if (cur_schema(m) != NULL)
			json_object_set_new(m, "schema",
			    json_deep_copy(cur_schema(m)));
		if (spec != NULL)
			json_object_set_new(m, "partition-spec",
			    json_deep_copy(json_object_get(spec, "fields")));
		json_object_del(m, "last-sequence-number");
	} else {
		json_object_del(m, "schema");
		json_object_del(m, "partition-spec");
	}
}

/* Sets m[k] to a new empty array or object made by mk when absent. */
static void
fill(json_t *m, const char *k, json_t *(*mk)(void))
{
	if (field(m, k) == NULL)
		json_object_set_new(m, k, mk());
}

/* Fills metadata m read from a file with what Java assumes when legacy v1
 * members are missing; what is malformed is left for check_meta. */
static void
normalize(json_t *m)
{
	json_t	*s, *fs, *f, *refs, *cur;
	int64_t	 id, max = PART_START - 1;
	size_t	 i, j;

	if (!json_is_object(m))
		return;
	if (field(m, "schemas") == NULL && json_is_object(s = field(m,
	    "schema"))) {
		s = json_deep_copy(s);
		id = mint(s, "schema-id", 0);
		json_object_set_new(s, "schema-id", json_integer(id));
		json_object_set_new(m, "schemas", json_pack("[o]", s));
		json_object_set_new(m, "current-schema-id", json_integer(id));
	}
	if (field(m, "partition-specs") == NULL &&
	    json_is_array(fs = field(m, "partition-spec"))) {
		fs = json_deep_copy(fs);
		json_array_foreach(fs, i, f)
			if (json_is_object(f) && !field(f, "field-id"))
				json_object_set_new(f, "field-id",
				    json_integer(PART_START + (int64_t)i));
		json_object_set_new(m, "partition-specs",
		    json_pack("[{s:i, s:o}]", "spec-id", 0, "fields", fs));
		json_object_set_new(m, "default-spec-id", json_integer(0));
	}
	if (field(m, "last-partition-id") == NULL) {
		json_array_foreach(field(m, "partition-specs"), i, s)
			json_array_foreach(field(s, "fields"), j, f)
				if (mint(f, "field-id", max) > max)
					max = mint(f, "field-id", max);
		json_object_set_new(m, "last-partition-id",
		    json_integer(max));
	}
	if (field(m, "sort-orders") == NULL) {
		json_object_set_new(m, "sort-orders",
		    json_pack("[{s:i, s:[]}]", "order-id", 0, "fields"));
		json_object_set_new(m, "default-sort-order-id",
		    json_integer(0));
	}
	if (field(m, "current-snapshot-id") == NULL)
		json_object_set_new(m, "current-snapshot-id",
		    json_integer(-1));
	fill(m, "properties", json_object);
	fill(m, "refs", json_object);
	fill(m, "snapshots", json_array);
	fill(m, "statistics", json_array);
	fill(m, "partition-statistics", json_array);
	fill(m, "snapshot-log", json_array);
	fill(m, "metadata-log", json_array);
	refs = field(m, "refs");
	cur = field(m, "current-snapshot-id");
	if (json_is_object(refs) && json_is_integer(cur) &&
	    json_integer_value(cur) != -1 && field(refs, "main") == NULL)
		json_object_set_new(refs, "main", json_pack("{s:O, s:s}",
		    "snapshot-id", cur, "type", "branch"));
}

/* Checks that every element of array arr (named what) has a distinct
 * integer key; returns 0, or -1 with *a. */
static int
unique_ids(at *a, const json_t *arr, const char *what, const char *key,
    int64_t lo, int64_t hi)
{
	int64_t	*v = NULL, x = 0, dup;
	size_t	 n = 0, cap = 0, i;
	json_t	*el;
	at	 b;
	int	 rc = 0;

	json_array_foreach(arr, i, el) {
		sub(&b, a, "%s[%zu]: ", what, i);
		if (!json_is_object(el))
			rc = BADREQ(&b, "must be an object");
		else if (get_int(&b, el, key, 1, lo, hi, &x) < 0)
			rc = -1;
		else if (push64(&v, &n, &cap, x) < 0)
			rc = INVALID(&b, "out of memory");
		if (rc < 0)
			break;
	}
	if (rc == 0 && find_dup(v, n, &dup))
		rc = INVALID(a, "%s: %s %lld is used twice", what, key,
		    (long long)dup);
	free(v);
	return rc;
}

/* Checks normalized metadata m; returns 0, or -1 with *a. */
static int
check_meta(at *a, const json_t *m)
{
	int64_t		 fv = 0, x = 0, cur = 0;
	json_t		*arr, *el, *f, *o;
	const char	*s, *k;
	struct ids	 w;
	size_t		 i, j;
	at		 b;

	if (!json_is_object(m))
		return BADREQ(a, "metadata must be an object");
	if (get_int(a, m, "format-version", 1, 1, INT32_MAX, &fv) < 0)
		return -1;
	if (fv > FV_MAX)
		return INVALID(a, "unsupported format-version %lld "
		    "(supported: 1, 2)", (long long)fv);
	if (get_str(a, m, "table-uuid", 1, &s) < 0 ||
	    get_str(a, m, "location", 1, &s) < 0 ||
	    get_int(a, m, "last-updated-ms", 1, INT64_MIN, INT64_MAX, &x) < 0 ||
	    get_int(a, m, "last-column-id", 1, 0, INT32_MAX, &x) < 0 ||
	    (fv >= 2 && get_int(a, m, "last-sequence-number", 1, 0,
	    INT64_MAX, &x) < 0) ||
	    get_int(a, m, "last-partition-id", 1, 0, INT32_MAX, &x) < 0)
		return -1;
	if (get_typed(a, m, "schemas", 1, JSON_ARRAY, &arr) < 0 ||
	    unique_ids(a, arr, "schemas", "schema-id", 0, INT32_MAX) < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		memset(&w, 0, sizeof(w));
		w.target = NONE;
		sub(&b, a, "schemas[%zu]: ", i);
		x = schema_scan(&b, el, &w);
		free(w.v);
		if (x < 0)
			return -1;
	}
	if (get_int(a, m, "current-schema-id", 1, 0, INT32_MAX, &x) < 0)
		return -1;
	if (find_by(arr, "schema-id", x, NULL) == NULL)
		return INVALID(a, "current-schema-id %lld is not among the "
		    "schemas", (long long)x);
	if (get_typed(a, m, "partition-specs", 1, JSON_ARRAY, &arr) < 0 ||
	    unique_ids(a, arr, "partition-specs", "spec-id", 0,
	    INT32_MAX) < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		sub(&b, a, "partition-specs[%zu]: ", i);
		if (get_typed(&b, el, "fields", 1, JSON_ARRAY, &o) < 0)
			return -1;
		json_array_foreach(o, j, f)
			if (!json_is_object(f) ||
			    get_int(&b, f, "source-id", 1, 0, INT32_MAX,
			    &x) < 0 ||
			    get_int(&b, f, "field-id", 1, 0, INT32_MAX,
			    &x) < 0 || get_str(&b, f, "name", 1, &s) < 0 ||
			    get_str(&b, f, "transform", 1, &s) < 0)
				return json_is_object(f) ? -1 :
				    BADREQ(&b, "fields must be objects");
	}
	if (get_int(a, m, "default-spec-id", 1, 0, INT32_MAX, &x) < 0)
		return -1;
	if (find_by(arr, "spec-id", x, NULL) == NULL)
		return INVALID(a, "default-spec-id %lld is not among the "
		    "partition-specs", (long long)x);
	if (get_typed(a, m, "sort-orders", 1, JSON_ARRAY, &arr) < 0 ||
	    unique_ids(a, arr, "sort-orders", "order-id", 0, INT32_MAX) < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		sub(&b, a, "sort-orders[%zu]: ", i);
		if (get_typed(&b, el, "fields", 1, JSON_ARRAY, &o) < 0)
			return -1;
	}
	if (get_int(a, m, "default-sort-order-id", 1, 0, INT32_MAX, &x) < 0)
		return -1;
	if (find_by(arr, "order-id", x, NULL) == NULL)
		return INVALID(a, "default-sort-order-id %lld is not among "
		    "the sort-orders", (long long)x);
	if (get_typed(a, m, "properties", 1, JSON_OBJECT, &o) < 0)
		return -1;
	json_object_foreach(o, k, el)
		if (!json_is_string(el))
			return BADREQ(a, "property '%.64s' must be a string",
			    k);
	if (get_typed(a, m, "snapshots", 1, JSON_ARRAY, &arr) < 0 ||
	    unique_ids(a, arr, "snapshots", "snapshot-id", INT64_MIN,
	    INT64_MAX) < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		sub(&b, a, "snapshots[%zu]: ", i);
		if (get_int(&b, el, "timestamp-ms", 1, INT64_MIN, INT64_MAX,
		    &x) < 0 || get_int(&b, el, "sequence-number", 0, 0,
		    INT64_MAX, &x) < 0)
			return -1;
	}
	if (get_int(a, m, "current-snapshot-id", 1, INT64_MIN, INT64_MAX,
	    &cur) < 0)
		return -1;
	if (cur != -1 && find_by(arr, "snapshot-id", cur, NULL) == NULL)
		return INVALID(a, "current-snapshot-id %lld is not among the "
		    "snapshots", (long long)cur);
	if (get_typed(a, m, "refs", 1, JSON_OBJECT, &o) < 0)
		return -1;
	json_object_foreach(o, k, el) {
		sub(&b, a, "refs[%.64s]: ", k);
		if (get_int(&b, el, "snapshot-id", 1, INT64_MIN, INT64_MAX,
		    &x) < 0 || get_str(&b, el, "type", 1, &s) < 0)
			return -1;
		if (strcmp(s, "branch") != 0 && strcmp(s, "tag") != 0)
			return BADREQ(&b, "'type' must be branch or tag");
		if (find_by(arr, "snapshot-id", x, NULL) == NULL)
			return INVALID(&b, "snapshot %lld does not exist",
			    (long long)x);
		if (strcmp(k, "main") == 0 && (strcmp(s, "branch") != 0 ||
		    x != cur))
			return INVALID(&b, "main must be a branch at "
			    "current-snapshot-id %lld", (long long)cur);
	}
	if (cur != -1 && field(o, "main") == NULL)
		return INVALID(a, "current-snapshot-id %lld has no main "
		    "branch", (long long)cur);
	if (get_typed(a, m, "snapshot-log", 1, JSON_ARRAY, &arr) < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		sub(&b, a, "snapshot-log[%zu]: ", i);
		if (get_int(&b, el, "timestamp-ms", 1, INT64_MIN, INT64_MAX,
		    &x) < 0 || get_int(&b, el, "snapshot-id", 1, INT64_MIN,
		    INT64_MAX, &x) < 0)
			return -1;
	}
	if (get_typed(a, m, "metadata-log", 1, JSON_ARRAY, &arr) < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		sub(&b, a, "metadata-log[%zu]: ", i);
		if (get_int(&b, el, "timestamp-ms", 1, INT64_MIN, INT64_MAX,
		    &x) < 0 || get_str(&b, el, "metadata-file", 1, &s) < 0)
			return -1;
	}
	return 0;
}

int
ice_meta_validate(const json_t *meta, ice_err *e)
{
	ice_err	 ignored;
	at	 a = { e ? e : &ignored, "metadata: " };
	json_t	*m;
	int	 rc;

	if (!json_is_object(meta))
		return BADREQ(&a, "must be a JSON object");
	if ((m = json_deep_copy(meta)) == NULL)
		return INVALID(&a, "out of memory");
	normalize(m);
	rc = check_meta(&a, m);
	json_decref(m);
	return rc;
}

/* Evaluates requirement r against normalized metadata m (NULL: no table)
 * when eval, else only checks its shape; returns 0, or -1 with *a. */
static int
requirement(at *a, const json_t *m, const json_t *r, int eval)
{
	static const struct {
		const char *type, *key, *meta;
	} ints[] = {
		{ "assert-last-assigned-field-id", "last-assigned-field-id",
		  "last-column-id" },
		{ "assert-last-assigned-partition-id",
		  "last-assigned-partition-id", "last-partition-id" },
		{ "assert-current-schema-id", "current-schema-id",
		  "current-schema-id" },
		{ "assert-default-spec-id", "default-spec-id",
		  "default-spec-id" },
		{ "assert-default-sort-order-id", "default-sort-order-id",
		  "default-sort-order-id" },
	};
	const char	*type, *s, *cur;
	json_t		*ref, *sid;
	int64_t		 x, want = 0;
	size_t		 i;

	if (!json_is_object(r))
		return BADREQ(a, "requirement must be an object");
	if (get_str(a, r, "type", 1, &type) < 0)
		return -1;
	if (strcmp(type, "assert-create") == 0) {
		if (eval && m != NULL)
			return CONFLICT(a, "table already exists");
		return 0;
	}
	if (strcmp(type, "assert-table-uuid") == 0) {
		if (get_str(a, r, "uuid", 1, &s) < 0)
			return -1;
		if (!eval)
			return 0;
		if (m == NULL)
			return CONFLICT(a, "table does not exist");
		cur = json_string_value(field(m, "table-uuid"));
		if (cur == NULL || strcasecmp(cur, s) != 0)
			return CONFLICT(a, "UUID does not match: expected "
			    "%.40s, found %.40s", s, cur ? cur : "none");
		return 0;
	}
	if (strcmp(type, "assert-ref-snapshot-id") == 0) {
		sid = field(r, "snapshot-id");
		if (get_str(a, r, "ref", 1, &s) < 0 || get_int(a, r,
		    "snapshot-id", 0, INT64_MIN, INT64_MAX, &want) < 0)
			return -1;
		if (!eval)
			return 0;
		if (m == NULL)
			return CONFLICT(a, "table does not exist");
		if ((ref = field(field(m, "refs"), s)) != NULL) {
			x = mint(ref, "snapshot-id", -1);
			cur = json_string_value(field(ref, "type"));
			if (sid == NULL)
				return CONFLICT(a, "%s %.64s was created "
				    "concurrently", cur ? cur : "ref", s);
			if (x != want)
				return CONFLICT(a, "%s %.64s has changed: "
				    "expected id %lld, found %lld", cur ? cur :
				    "ref", s, (long long)want, (long long)x);
		} else if (sid != NULL)
			return CONFLICT(a, "branch or tag %.64s is missing, "
			    "expected %lld", s, (long long)want);
		return 0;
	}
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		if (strcmp(type, ints[i].type) != 0)
			continue;
		if (get_int(a, r, ints[i].key, 1, INT32_MIN, INT32_MAX,
		    &want) < 0)
			return -1;
		if (!eval)
			return 0;
		if (m == NULL)
			return i < 2 ? 0 : CONFLICT(a, "table does not exist");
		x = mint(m, ints[i].meta, NONE);
		if (x != want)
			return CONFLICT(a, "%s changed: expected %lld, found "
			    "%lld", ints[i].meta, (long long)want,
			    (long long)x);
		return 0;
	}
	return BADREQ(a, "unknown requirement type '%.64s'", type);
}

int
ice_meta_check(const json_t *meta, const json_t *reqs, ice_err *e)
{
	ice_err	 ignored;
	at	 a = { e ? e : &ignored, "" }, b;
	json_t	*m = NULL, *r;
	size_t	 i;
	int	 pass, rc = 0;

	if (reqs == NULL || json_is_null(reqs))
		return 0;
	if (!json_is_array(reqs))
		return BADREQ(&a, "'requirements' must be an array");
	if (meta != NULL) {
		if ((m = json_deep_copy(meta)) == NULL)
			return INVALID(&a, "out of memory");
		normalize(m);
	}
	for (pass = 0; pass < 2 && rc == 0; pass++)
		json_array_foreach(reqs, i, r) {
			sub(&b, &a, "requirements[%zu] (%.48s): ", i,
			    json_is_string(field(r, "type")) ?
			    json_string_value(field(r, "type")) : "?");
			if ((rc = requirement(&b, m, r, pass)) < 0)
				break;
		}
	json_decref(m);
	return rc;
}

/* Returns the id asked for by update u's key k (-1: the last added,
 * *last) if arr holds it under idkey; else -1 with c->a. */
static int
pick(struct ctx *c, const json_t *u, const char *k, int64_t last,
    const json_t *arr, const char *idkey, int64_t *id)
{
	if (get_int(&c->a, u, k, 1, -1, INT32_MAX, id) < 0)
		return -1;
	if (*id == -1) {
		if (last == NONE)
			return INVALID(&c->a, "-1 (last added) but nothing "
			    "was added");
		*id = last;
	}
	if (find_by(arr, idkey, *id, NULL) == NULL)
		return INVALID(&c->a, "%s %lld does not exist", idkey,
		    (long long)*id);
	return 0;
}

/* assign-uuid: sets table-uuid, unless another one is set. */
static int
u_assign_uuid(struct ctx *c, const json_t *u)
{
	const char	*s, *cur;

	if (get_str(&c->a, u, "uuid", 1, &s) < 0)
		return -1;
	if (!uuid_ok(s))
		return BADREQ(&c->a, "'uuid' is not a UUID");
	cur = json_string_value(field(c->m, "table-uuid"));
	if (cur != NULL && strcasecmp(cur, s) != 0)
		return INVALID(&c->a, "cannot reassign table uuid %.40s",
		    cur);
	json_object_set_new(c->m, "table-uuid", json_string(s));
	return 0;
}

/* upgrade-format-version: raises format-version, never lowers it. */
static int
u_upgrade(struct ctx *c, const json_t *u)
{
	int64_t	 v = 0;

	if (get_int(&c->a, u, "format-version", 1, 1, INT32_MAX, &v) < 0)
		return -1;
	if (v > FV_MAX)
		return INVALID(&c->a, "unsupported format version %lld "
		    "(supported: 1, 2)", (long long)v);
	if (v < c->fv)
		return INVALID(&c->a, "cannot downgrade v%lld table to v%lld",
		    (long long)c->fv, (long long)v);
	c->fv = v;
	json_object_set_new(c->m, "format-version", json_integer(v));
	if (v >= 2 && field(c->m, "last-sequence-number") == NULL)
		json_object_set_new(c->m, "last-sequence-number",
		    json_integer(0));
	return 0;
}

/* add-schema: adds the schema (or finds an identical one) and raises
 * last-column-id. */
static int
u_add_schema(struct ctx *c, const json_t *u)
{
	json_t		*s, *arr = field(c->m, "schemas"), *el, *n;
	json_t		*e1, *e2;
	struct ids	 w = { .target = NONE };
	int64_t		 lc = 0, id = mint(c->m, "current-schema-id", 0);
	size_t		 i;
	int		 found = 0, rc;

	if (get_typed(&c->a, u, "schema", 1, JSON_OBJECT, &s) < 0 ||
	    get_int(&c->a, u, "last-column-id", 0, 0, INT32_MAX, &lc) < 0)
		return -1;
	rc = schema_scan(&c->a, s, &w);
	free(w.v);
	if (rc < 0)
		return -1;
	json_array_foreach(arr, i, el) {
		e1 = field(el, "identifier-field-ids");
		e2 = field(s, "identifier-field-ids");
		if (json_equal(field(el, "fields"), field(s, "fields")) &&
		    (e1 == e2 || json_equal(e1, e2) ||
		    (json_array_size(e1) == 0 && json_array_size(e2) == 0))) {
			id = mint(el, "schema-id", 0);
			found = 1;
			break;
		}
		if (mint(el, "schema-id", 0) >= id)
			id = mint(el, "schema-id", 0) + 1;
	}
	if (id > INT32_MAX)
		return INVALID(&c->a, "no schema id left");
	if (!found) {
		n = json_deep_copy(s);
		json_object_set_new(n, "schema-id", json_integer(id));
		json_array_append_new(arr, n);
	}
	if (w.max < lc)
		w.max = lc;
	if (w.max > mint(c->m, "last-column-id", 0))
		json_object_set_new(c->m, "last-column-id",
		    json_integer(w.max));
	c->last_schema = id;
	return 0;
}

/* set-current-schema */
static int
u_set_schema(struct ctx *c, const json_t *u)
{
	int64_t	 id = 0;

	if (pick(c, u, "schema-id", c->last_schema, field(c->m, "schemas"),
	    "schema-id", &id) < 0)
		return -1;
	json_object_set_new(c->m, "current-schema-id", json_integer(id));
	return 0;
}

/* Returns the id of the partition field in metadata m with this source
 * and transform, or NONE. */
static int64_t
equivalent_pid(const json_t *m, int64_t src, const char *tr)
{
	size_t	 i, j;
	json_t	*s, *f;

	json_array_foreach(field(m, "partition-specs"), i, s)
		json_array_foreach(field(s, "fields"), j, f)
			if (mint(f, "source-id", NONE) == src &&
			    json_is_string(field(f, "transform")) &&
			    strcmp(json_string_value(field(f, "transform")),
			    tr) == 0)
				return mint(f, "field-id", NONE);
	return NONE;
}

/* Returns whether partition field arrays x and y have the same sources,
 * transforms and names in the same order. */
static int
same_spec(const json_t *x, const json_t *y)
{
	static const char *const keys[] = { "source-id", "transform", "name" };
	size_t	 i, k;

	if (json_array_size(x) != json_array_size(y))
		return 0;
	for (i = 0; i < json_array_size(x); i++)
		for (k = 0; k < 3; k++)
			if (!json_equal(field(json_array_get(x, i), keys[k]),
			    field(json_array_get(y, i), keys[k])))
				return 0;
	return 1;
}

/* add-spec: adds the partition spec (or finds a compatible one) and raises
 * last-partition-id. */
static int
u_add_spec(struct ctx *c, const json_t *u)
{
	json_t	*spec, *fs, *nf, *f, *g, *arr = field(c->m, "partition-specs");
	json_t	*schema = cur_schema(c->m);
	int64_t	 fid = 0, next, max, id = 0, *ids = NULL, dup;
	size_t	 i, n = 0, cap = 0;
	int	 rc = -1, r;

	if (get_typed(&c->a, u, "spec", 1, JSON_OBJECT, &spec) < 0 ||
	    get_typed(&c->a, spec, "fields", 1, JSON_ARRAY, &fs) < 0)
		return -1;
	if (schema == NULL)
		return INVALID(&c->a, "no current schema to partition");
	next = mint(c->m, "last-partition-id", PART_START - 1);
	if (next < PART_START - 1)
		next = PART_START - 1;
	json_array_foreach(fs, i, f)
		if (mint(f, "field-id", 0) > next &&
		    mint(f, "field-id", 0) <= INT32_MAX)
			next = mint(f, "field-id", 0);
	max = PART_START - 1;
	nf = json_array();
	json_array_foreach(fs, i, f) {
		if ((g = part_field(&c->a, f, i, schema)) == NULL)
			goto out;
		json_array_append_new(nf, g);
		if ((r = get_int(&c->a, f, "field-id", 0, 0, INT32_MAX,
		    &fid)) < 0)
			goto out;
		if (c->fv == 1) {
			if (r == 1 && fid != PART_START + (int64_t)i) {
				INVALID(&c->a, "v1 partition field ids must "
				    "be 1000, 1001, ...");
				goto out;
			}
			fid = PART_START + (int64_t)i;
		} else if (r == 0 && (fid = equivalent_pid(c->m,
		    mint(g, "source-id", 0), json_string_value(field(g,
		    "transform")))) == NONE)
			fid = ++next;
		if (fid > INT32_MAX) {
			INVALID(&c->a, "no partition field id left");
			goto out;
		}
		json_object_set_new(g, "field-id", json_integer(fid));
		if (fid > max)
			max = fid;
		if (push64(&ids, &n, &cap, fid) < 0) {
			INVALID(&c->a, "out of memory");
			goto out;
		}
	}
	if (find_dup(ids, n, &dup)) {
		INVALID(&c->a, "partition field id %lld is used twice",
		    (long long)dup);
		goto out;
	}
	if (distinct_names(&c->a, nf) < 0)
		goto out;
	json_array_foreach(arr, i, f) {
		if (same_spec(field(f, "fields"), nf)) {
			id = mint(f, "spec-id", 0);
			break;
		}
		if (mint(f, "spec-id", 0) >= id)
			id = mint(f, "spec-id", 0) + 1;
	}
	if (id > INT32_MAX) {
		INVALID(&c->a, "no spec id left");
		goto out;
	}
	if (i == json_array_size(arr)) {
		json_array_append_new(arr, json_pack("{s:I, s:O}", "spec-id",
		    (json_int_t)id, "fields", nf));
		if (max > mint(c->m, "last-partition-id", 0))
			json_object_set_new(c->m, "last-partition-id",
			    json_integer(max));
	}
	c->last_spec = id;
	rc = 0;
out:
	json_decref(nf);
	free(ids);
	return rc;
}

/* set-default-spec */
static int
u_set_spec(struct ctx *c, const json_t *u)
{
	int64_t	 id = 0;

	if (pick(c, u, "spec-id", c->last_spec,
	    field(c->m, "partition-specs"), "spec-id", &id) < 0)
		return -1;
	json_object_set_new(c->m, "default-spec-id", json_integer(id));
	return 0;
}

/* add-sort-order: adds the order (or finds an identical one; no fields is
 * the unsorted order 0). */
static int
u_add_order(struct ctx *c, const json_t *u)
{
	json_t	*o, *fs, *nf, *f, *g, *arr = field(c->m, "sort-orders");
	json_t	*schema = cur_schema(c->m);
	int64_t	 id = 1;
	size_t	 i;

	if (get_typed(&c->a, u, "sort-order", 1, JSON_OBJECT, &o) < 0 ||
	    get_typed(&c->a, o, "fields", 1, JSON_ARRAY, &fs) < 0)
		return -1;
	if (schema == NULL && json_array_size(fs) > 0)
		return INVALID(&c->a, "no current schema to sort");
	nf = json_array();
	json_array_foreach(fs, i, f) {
		if ((g = sort_field(&c->a, f, i, schema)) == NULL) {
			json_decref(nf);
			return -1;
		}
		json_array_append_new(nf, g);
	}
	if (json_array_size(nf) == 0)
		id = 0;
	json_array_foreach(arr, i, f) {
		if (json_equal(field(f, "fields"), nf)) {
			id = mint(f, "order-id", 0);
			break;
		}
		if (id != 0 && mint(f, "order-id", 0) >= id)
			id = mint(f, "order-id", 0) + 1;
	}
	if (id > INT32_MAX) {
		json_decref(nf);
		return INVALID(&c->a, "no sort order id left");
	}
	if (i == json_array_size(arr))
		json_array_append_new(arr, json_pack("{s:I, s:O}",
		    "order-id", (json_int_t)id, "fields", nf));
	json_decref(nf);
	c->last_order = id;
	return 0;
}

/* set-default-sort-order */
static int
u_set_order(struct ctx *c, const json_t *u)
{
	int64_t	 id = 0;

	if (pick(c, u, "sort-order-id", c->last_order,
	    field(c->m, "sort-orders"), "order-id", &id) < 0)
		return -1;
	json_object_set_new(c->m, "default-sort-order-id", json_integer(id));
	return 0;
}

/* add-snapshot: adds a snapshot with a new id (and, in v2, a newer
 * sequence number, which becomes last-sequence-number). */
static int
u_add_snapshot(struct ctx *c, const json_t *u)
{
	static const char *const ops[] = { "append", "replace", "overwrite",
	    "delete", NULL };
	json_t		*s, *sum = NULL, *ml, *v;
	int64_t		 id = 0, x = 0, seq = 0;
	const char	*op, *k;
	size_t		 i;

	if (get_typed(&c->a, u, "snapshot", 1, JSON_OBJECT, &s) < 0 ||
	    get_int(&c->a, s, "snapshot-id", 1, INT64_MIN, INT64_MAX,
	    &id) < 0 ||
	    get_int(&c->a, s, "timestamp-ms", 1, INT64_MIN, INT64_MAX,
	    &x) < 0 ||
	    get_int(&c->a, s, "parent-snapshot-id", 0, INT64_MIN, INT64_MAX,
	    &x) < 0 ||
	    get_int(&c->a, s, "sequence-number", c->fv >= 2, 0, INT64_MAX,
	    &seq) < 0 ||
	    get_int(&c->a, s, "schema-id", 0, 0, INT32_MAX, &x) < 0 ||
	    get_typed(&c->a, s, "summary", c->fv >= 2, JSON_OBJECT,
	    &sum) < 0)
		return -1;
	if ((ml = field(s, "manifest-list")) != NULL ? !json_is_string(ml) :
	    c->fv >= 2 || !json_is_array(field(s, "manifests")))
		return BADREQ(&c->a, "'manifest-list' must be a string");
	if (sum != NULL) {
		json_object_foreach(sum, k, v)
			if (!json_is_string(v))
				return BADREQ(&c->a, "summary '%.64s' must "
				    "be a string", k);
		if (get_str(&c->a, sum, "operation", 1, &op) < 0)
			return -1;
		for (i = 0; ops[i] != NULL && strcmp(ops[i], op) != 0; i++)
			continue;
		if (ops[i] == NULL)
			return BADREQ(&c->a, "unknown operation '%.32s'", op);
	}
	if (json_array_size(field(c->m, "schemas")) == 0)
		return INVALID(&c->a, "a snapshot needs a schema first");
	if (json_array_size(field(c->m, "partition-specs")) == 0 ||
	    json_array_size(field(c->m, "sort-orders")) == 0)
		return INVALID(&c->a, "a snapshot needs a partition spec "
		    "and a sort order first");
	if (find_by(field(c->m, "snapshots"), "snapshot-id", id, NULL))
		return INVALID(&c->a, "snapshot %lld already exists",
		    (long long)id);
	if (c->fv >= 2) {
		x = mint(c->m, "last-sequence-number", 0);
		if (seq <= x)
			return CONFLICT(&c->a, "sequence number %lld is not "
			    "above last sequence number %lld; retry",
			    (long long)seq, (long long)x);
		json_object_set_new(c->m, "last-sequence-number",
		    json_integer(seq));
	}
	json_array_append_new(field(c->m, "snapshots"), json_deep_copy(s));
	json_array_append_new(c->added, json_integer(id));
	return 0;
}

/* set-snapshot-ref: points a branch or tag at a snapshot; main is also
 * the current snapshot. */
static int
u_set_ref(struct ctx *c, const json_t *u)
{
	static const char *const ret[] = { "min-snapshots-to-keep",
	    "max-snapshot-age-ms", "max-ref-age-ms" };
	const char	*name, *type;
	json_t		*ref, *snap, *refs = field(c->m, "refs");
	int64_t		 id = 0, x = 0, ts;
	size_t		 i;
	int		 main, r;

	if (get_str(&c->a, u, "ref-name", 1, &name) < 0 ||
	    get_str(&c->a, u, "type", 1, &type) < 0 ||
	    get_int(&c->a, u, "snapshot-id", 1, INT64_MIN, INT64_MAX,
	    &id) < 0)
		return -1;
	if (*name == '\0')
		return BADREQ(&c->a, "'ref-name' is empty");
	if (strcmp(type, "branch") != 0 && strcmp(type, "tag") != 0)
		return BADREQ(&c->a, "'type' must be branch or tag");
	main = strcmp(name, "main") == 0;
	if (main && strcmp(type, "branch") != 0)
		return INVALID(&c->a, "main must be a branch");
	ref = json_pack("{s:I, s:s}", "snapshot-id", (json_int_t)id,
	    "type", type);
	for (i = 0; i < 3; i++) {
		if ((r = get_int(&c->a, u, ret[i], 0, 1, i ? INT64_MAX :
		    INT32_MAX, &x)) < 0 || (r == 1 && i < 2 &&
		    strcmp(type, "tag") == 0)) {
			json_decref(ref);
			return r < 0 ? -1 : INVALID(&c->a, "tags do not "
			    "support %s", ret[i]);
		}
		if (r == 1)
			json_object_set_new(ref, ret[i], json_integer(x));
	}
	if ((snap = find_by(field(c->m, "snapshots"), "snapshot-id", id,
	    NULL)) == NULL) {
		json_decref(ref);
		return INVALID(&c->a, "cannot set %.64s to unknown snapshot "
		    "%lld", name, (long long)id);
	}
	if (json_equal(field(refs, name), ref)) {
		json_decref(ref);
		return 0;
	}
	if (main) {
		json_object_set_new(c->m, "current-snapshot-id",
		    json_integer(id));
		ts = has_int(c->added, id) ?
		    mint(snap, "timestamp-ms", c->now) : c->now;
		if (has_int(c->added, id))
			json_array_append_new(c->on_main, json_integer(id));
		json_array_append_new(field(c->m, "snapshot-log"),
		    json_pack("{s:I, s:I}", "timestamp-ms", (json_int_t)ts,
		    "snapshot-id", (json_int_t)id));
	}
	json_object_set_new(refs, name, ref);
	return 0;
}

/* Removes from array arr the objects whose integer key is in ids (or, when
 * ids is NULL, equals id); returns how many went. */
static size_t
drop_by(json_t *arr, const char *key, const json_t *ids, int64_t id)
{
	size_t	 i, n = 0;
	json_t	*k;

	for (i = json_array_size(arr); i-- > 0;) {
		k = field(json_array_get(arr, i), key);
		if (json_is_integer(k) && (ids ? has_int(ids,
		    json_integer_value(k)) : json_integer_value(k) == id)) {
			json_array_remove(arr, i);
			n++;
		}
	}
	return n;
}

/* Reads integer array u[k] into *out; returns 0, or -1 with c->a. */
static int
int_array(struct ctx *c, const json_t *u, const char *k, json_t **out)
{
	size_t	 i;
	json_t	*v;

	if (get_typed(&c->a, u, k, 1, JSON_ARRAY, out) < 0)
		return -1;
	json_array_foreach(*out, i, v)
		if (!json_is_integer(v))
			return BADREQ(&c->a, "'%s' must hold integers", k);
	return 0;
}

/* remove-snapshots: drops the snapshots, their statistics and the refs
 * left pointing at nothing. */
static int
u_remove_snapshots(struct ctx *c, const json_t *u)
{
	json_t		*ids, *refs = field(c->m, "refs"), *ref;
	const char	*k;
	void		*tmp;

	if (int_array(c, u, "snapshot-ids", &ids) < 0)
		return -1;
	if (drop_by(field(c->m, "snapshots"), "snapshot-id", ids, 0) == 0)
		return 0;
	c->removed = 1;
	drop_by(field(c->m, "statistics"), "snapshot-id", ids, 0);
	drop_by(field(c->m, "partition-statistics"), "snapshot-id", ids, 0);
	json_object_foreach_safe(refs, tmp, k, ref)
		if (has_int(ids, mint(ref, "snapshot-id", NONE))) {
			if (strcmp(k, "main") == 0)
				json_object_set_new(c->m,
				    "current-snapshot-id", json_integer(-1));
			json_object_del(refs, k);
		}
	return 0;
}

/* remove-snapshot-ref */
static int
u_remove_ref(struct ctx *c, const json_t *u)
{
	const char	*name;

	if (get_str(&c->a, u, "ref-name", 1, &name) < 0)
		return -1;
	if (strcmp(name, "main") == 0)
		json_object_set_new(c->m, "current-snapshot-id",
		    json_integer(-1));
	json_object_del(field(c->m, "refs"), name);
	return 0;
}

/* set-location */
static int
u_set_location(struct ctx *c, const json_t *u)
{
	const char	*s;

	if (get_str(&c->a, u, "location", 1, &s) < 0)
		return -1;
	if (*s == '\0')
		return BADREQ(&c->a, "'location' is empty");
	json_object_set_new(c->m, "location", json_string(s));
	return 0;
}

/* set-properties */
static int
u_set_props(struct ctx *c, const json_t *u)
{
	json_t		*up, *v;
	const char	*k;

	if (get_typed(&c->a, u, "updates", 1, JSON_OBJECT, &up) < 0)
		return -1;
	json_object_foreach(up, k, v)
		if (!json_is_string(v))
			return BADREQ(&c->a, "property '%.64s' must be a "
			    "string", k);
	json_object_foreach(up, k, v)
		json_object_set(field(c->m, "properties"), k, v);
	return 0;
}

/* remove-properties */
static int
u_remove_props(struct ctx *c, const json_t *u)
{
	json_t	*rm, *v;
	size_t	 i;

	if (get_typed(&c->a, u, "removals", 1, JSON_ARRAY, &rm) < 0)
		return -1;
	json_array_foreach(rm, i, v)
		if (!json_is_string(v))
			return BADREQ(&c->a, "'removals' must hold strings");
	json_array_foreach(rm, i, v)
		json_object_del(field(c->m, "properties"),
		    json_string_value(v));
	return 0;
}

/* set-statistics and set-partition-statistics: replaces the file of that
 * snapshot. */
static int
u_set_stats(struct ctx *c, const json_t *u)
{
	int		 part = strcmp(json_string_value(field(u, "action")),
			    "set-partition-statistics") == 0;
	const char	*key = part ? "partition-statistics" : "statistics";
	json_t		*f, *v;
	int64_t		 id = 0, x = 0;
	const char	*s;

	if (get_typed(&c->a, u, key, 1, JSON_OBJECT, &f) < 0 ||
	    get_int(&c->a, f, "snapshot-id", 1, INT64_MIN, INT64_MAX,
	    &id) < 0 || get_str(&c->a, f, "statistics-path", 1, &s) < 0 ||
	    get_int(&c->a, f, "file-size-in-bytes", 1, 0, INT64_MAX, &x) < 0 ||
	    (!part && (get_int(&c->a, f, "file-footer-size-in-bytes", 1, 0,
	    INT64_MAX, &x) < 0 || get_typed(&c->a, f, "blob-metadata", 1,
	    JSON_ARRAY, &v) < 0)))
		return -1;
	drop_by(field(c->m, key), "snapshot-id", NULL, id);
	json_array_append_new(field(c->m, key), json_deep_copy(f));
	return 0;
}

/* remove-statistics and remove-partition-statistics */
static int
u_remove_stats(struct ctx *c, const json_t *u)
{
	int64_t	 id = 0;

	if (get_int(&c->a, u, "snapshot-id", 1, INT64_MIN, INT64_MAX,
	    &id) < 0)
		return -1;
	drop_by(field(c->m, strcmp(json_string_value(field(u, "action")),
	    "remove-statistics") ? "partition-statistics" : "statistics"),
	    "snapshot-id", NULL, id);
	return 0;
}

/* remove-partition-specs and remove-schemas: drops the listed ones, never
 * the default spec or current schema. */
static int
u_remove_ids(struct ctx *c, const json_t *u)
{
	int		 sch = strcmp(json_string_value(field(u, "action")),
			    "remove-schemas") == 0;
	const char	*idkey = sch ? "schema-id" : "spec-id";
	const char	*cur = sch ? "current-schema-id" : "default-spec-id";
	json_t		*ids;

	if (int_array(c, u, sch ? "schema-ids" : "spec-ids", &ids) < 0)
		return -1;
	if (has_int(ids, mint(c->m, cur, NONE)))
		return INVALID(&c->a, "cannot remove the %s",
		    sch ? "current schema" : "default partition spec");
	drop_by(field(c->m, sch ? "schemas" : "partition-specs"), idkey, ids,
	    0);
	return 0;
}

/* add-encryption-key and remove-encryption-key: refused, v3 only. */
static int
u_v3_only(struct ctx *c, const json_t *u)
{
	(void)u;
	return INVALID(&c->a, "encryption keys need format version 3 "
	    "(supported: 1, 2)");
}

typedef int (*update_fn)(struct ctx *, const json_t *);

static const struct {
	const char	*action;
	update_fn	 fn;
} actions[] = {
	{ "assign-uuid", u_assign_uuid },
	{ "upgrade-format-version", u_upgrade },
	{ "add-schema", u_add_schema },
	{ "set-current-schema", u_set_schema },
	{ "add-spec", u_add_spec },
	{ "set-default-spec", u_set_spec },
	{ "add-sort-order", u_add_order },
	{ "set-default-sort-order", u_set_order },
	{ "add-snapshot", u_add_snapshot },
	{ "set-snapshot-ref", u_set_ref },
	{ "remove-snapshots", u_remove_snapshots },
	{ "remove-snapshot-ref", u_remove_ref },
	{ "set-location", u_set_location },
	{ "set-properties", u_set_props },
	{ "remove-properties", u_remove_props },
	{ "set-statistics", u_set_stats },
	{ "remove-statistics", u_remove_stats },
	{ "set-partition-statistics", u_set_stats },
	{ "remove-partition-statistics", u_remove_stats },
	{ "remove-partition-specs", u_remove_ids },
	{ "remove-schemas", u_remove_ids },
	{ "add-encryption-key", u_v3_only },
	{ "remove-encryption-key", u_v3_only },
};

/* Returns the handler of update u, or NULL with *a. */
static update_fn
handler(at *a, const json_t *u)
{
	const char	*s;
	size_t		 i;

	if (!json_is_object(u)) {
		BADREQ(a, "update must be an object");
		return NULL;
	}
	if (get_str(a, u, "action", 1, &s) < 0)
		return NULL;
	for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strcmp(s, actions[i].action) == 0)
			return actions[i].fn;
	BADREQ(a, "unknown action '%.64s'", s);
	return NULL;
}

/* Returns new empty metadata of format version fv for a create
 * transaction. */
static json_t *
empty_meta(int64_t fv, int64_t now)
{
	json_t	*m;

	m = json_pack("{s:I, s:I, s:I, s:i, s:[], s:i, s:[], s:i, s:i, s:[],"
	    " s:{}, s:i, s:i, s:{}, s:[], s:[], s:[], s:[], s:[]}",
	    "format-version", (json_int_t)fv, "last-sequence-number",
	    (json_int_t)0, "last-updated-ms", (json_int_t)now,
	    "last-column-id", 0, "schemas", "current-schema-id", 0,
	    "partition-specs", "default-spec-id", 0, "last-partition-id",
	    PART_START - 1, "sort-orders", "properties",
	    "default-sort-order-id", 0, "current-snapshot-id", -1, "refs",
	    "snapshots", "statistics",
	    "partition-statistics", "snapshot-log", "metadata-log");
	return m;
}

/* Drops intermediate snapshots of this commit from the snapshot log and,
 * after removals, every entry up to a removed snapshot (as Java). */
static void
fix_snapshot_log(struct ctx *c)
{
	json_t	*log = field(c->m, "snapshot-log"), *keep, *el;
	json_t	*snaps = field(c->m, "snapshots");
	int64_t	 cur = mint(c->m, "current-snapshot-id", -1), id;
	size_t	 i;
	int	 mid = 0;

	json_array_foreach(c->on_main, i, el)
		mid |= json_integer_value(el) != cur;
	if (!mid && !c->removed)
		return;
	keep = json_array();
	json_array_foreach(log, i, el) {
		id = mint(el, "snapshot-id", NONE);
		if (find_by(snaps, "snapshot-id", id, NULL) != NULL) {
			if (id == cur || !has_int(c->on_main, id))
				json_array_append(keep, el);
		} else if (c->removed)
			json_array_clear(keep);
	}
	json_object_set_new(c->m, "snapshot-log", keep);
}

/* Appends prev (read at ts) to the metadata log of m, keeping the newest
 * write.metadata.previous-versions-max entries. */
static void
log_metadata(json_t *m, const char *prev, int64_t ts)
{
	json_t		*log = field(m, "metadata-log");
	const char	*p;
	char		*end;
	long		 max = LOG_MAX_DEFAULT;

	p = json_string_value(field(field(m, "properties"),
	    "write.metadata.previous-versions-max"));
	if (p != NULL && (max = strtol(p, &end, 10), *p == '\0' ||
	    *end != '\0'))
		max = LOG_MAX_DEFAULT;
	if (max < 1)
		max = 1;
	while (json_array_size(log) >= (size_t)max)
		json_array_remove(log, 0);
	json_array_append_new(log, json_pack("{s:I, s:s}", "timestamp-ms",
	    (json_int_t)ts, "metadata-file", prev));
}

/* Does ice_meta_apply; pre[i], when pre is not NULL, starts the messages
 * of update i instead of its index and action. */
static json_t *
apply(const json_t *meta, const json_t *updates, const char *prev_location,
    int64_t now_ms, ice_err *e, const char *const *pre)
{
	struct ctx c = { .a = { e, "" }, .fv = 2, .now = now_ms,
	    .last_schema = NONE, .last_spec = NONE, .last_order = NONE };
	at	 base;
	json_t	*u, *v;
	size_t	 i;
	update_fn fn;
	int	 seen = 0;

	if (updates != NULL && !json_is_array(updates))
		return BADREQ(&c.a, "'updates' must be an array"), NULL;
	json_array_foreach(updates, i, u) {
		sub(&base, &c.a, "updates[%zu]: ", i);
		if (handler(&base, u) == NULL)
			return NULL;
		v = field(u, "format-version");
		if (meta == NULL && !seen && strcmp(json_string_value(
		    field(u, "action")), "upgrade-format-version") == 0) {
			seen = 1;
			if (json_is_integer(v) && json_integer_value(v) == 1)
				c.fv = 1;
		}
	}
	if (meta != NULL) {
		if ((c.m = json_deep_copy(meta)) == NULL)
			return INVALID(&c.a, "out of memory"), NULL;
		normalize(c.m);
		sub(&base, &c.a, "base metadata: ");
		if (check_meta(&base, c.m) < 0)
			goto fail;
		c.fv = mint(c.m, "format-version", 2);
	} else
		c.m = empty_meta(c.fv, now_ms);
	c.added = json_array();
	c.on_main = json_array();
	json_array_foreach(updates, i, u) {
		if (pre != NULL)
			sub(&c.a, &(at){ e, "" }, "%s", pre[i]);
		else
			sub(&c.a, &(at){ e, "" }, "updates[%zu] (%.48s): ", i,
			    json_string_value(field(u, "action")));
		fn = handler(&c.a, u);
		if (fn == NULL || fn(&c, u) < 0)
			goto fail;
	}
	c.a.pre[0] = '\0';
	if (meta == NULL) {
		if (json_array_size(field(c.m, "partition-specs")) == 0)
			json_array_append_new(field(c.m, "partition-specs"),
			    json_pack("{s:i, s:[]}", "spec-id", 0, "fields"));
		if (json_array_size(field(c.m, "sort-orders")) == 0)
			json_array_append_new(field(c.m, "sort-orders"),
			    json_pack("{s:i, s:[]}", "order-id", 0, "fields"));
	}
	fix_snapshot_log(&c);
	finish_version(c.m);
	if (meta == NULL || !json_equal(c.m, meta)) {
		json_object_set_new(c.m, "last-updated-ms",
		    json_integer(now_ms));
		if (meta != NULL && prev_location != NULL)
			log_metadata(c.m, prev_location,
			    mint(meta, "last-updated-ms", now_ms));
	}
	sub(&base, &c.a, "result: ");
	if (check_meta(&base, c.m) < 0)
		goto fail;
	json_decref(c.added);
	json_decref(c.on_main);
	return c.m;
fail:
	json_decref(c.m);
	json_decref(c.added);
	json_decref(c.on_main);
	return NULL;
}

json_t *
ice_meta_apply(const json_t *meta, const json_t *updates,
    const char *prev_location, int64_t now_ms, ice_err *e)
{
	ice_err	 ignored;

	return apply(meta, updates, prev_location, now_ms, e ? e : &ignored,
	    NULL);
}

static int fresh_fields(json_t *, struct remap *);

/* Gives type t's nested ids fresh values; returns 0 or -1 (no memory). */
static int
fresh_type(json_t *t, struct remap *r)
{
	static const char *const keys[] = { "element-id", "key-id",
	    "value-id" };
	static const char *const kids[] = { "element", "key", "value" };
	size_t	 i;

	if (!json_is_object(t))
		return 0;
	if (json_is_array(field(t, "fields")))
		return fresh_fields(field(t, "fields"), r);
	for (i = 0; i < 3; i++)
		if (field(t, keys[i]) != NULL) {
			if (push64(&r->from, &r->n, &r->cap,
			    mint(t, keys[i], 0)) < 0)
				return -1;
			json_object_set_new(t, keys[i],
			    json_integer(++r->next));
		}
	for (i = 0; i < 3; i++)
		if (fresh_type(field(t, kids[i]), r) < 0)
			return -1;
	return 0;
}

/* Gives the fields of array fs fresh ids from r->next + 1, a struct's own
 * fields before their children (as Java's assignFreshIds); returns 0 or
 * -1 (no memory). */
static int
fresh_fields(json_t *fs, struct remap *r)
{
	size_t	 i;
	json_t	*f;

	json_array_foreach(fs, i, f) {
		if (push64(&r->from, &r->n, &r->cap, mint(f, "id", 0)) < 0)
			return -1;
		json_object_set_new(f, "id", json_integer(++r->next));
	}
	json_array_foreach(fs, i, f)
		if (fresh_type(field(f, "type"), r) < 0)
			return -1;
	return 0;
}

/* Returns the new id of old column id in r, or NONE. */
static int64_t
remapped(const struct remap *r, int64_t old)
{
	size_t	 i;

	for (i = 0; i < r->n; i++)
		if (r->from[i] == old)
			return (int64_t)i + 1;
	return NONE;
}

/* Returns a copy of the fields of o (a partition spec or sort order of
 * the create request, or NULL) with source ids mapped through r and no
 * field ids; NULL with *a when a source column is unknown. */
static json_t *
remap_fields(at *a, const json_t *o, const struct remap *r)
{
	json_t		*fs = json_deep_copy(field(o, "fields")), *f;
	int64_t		 id;
	size_t		 i;
	const char	*tr;

	if (!json_is_array(fs))
		return fs != NULL ? fs : json_array();
	json_array_foreach(fs, i, f) {
		if (!json_is_integer(field(f, "source-id")))
			continue;
		json_object_del(f, "field-id");
		id = remapped(r, mint(f, "source-id", NONE));
		tr = json_string_value(field(f, "transform"));
		if (id != NONE)
			json_object_set_new(f, "source-id", json_integer(id));
		else if (tr == NULL || strcmp(tr, "void") != 0) {
			INVALID(a, "fields[%zu]: source column %lld is not in "
			    "the schema", i, (long long)mint(f, "source-id",
			    0));
			json_decref(fs);
			return NULL;
		}
	}
	return fs;
}

/* ice_meta_create: the request, checked, and given fresh ids, becomes the
 * create transaction Java's client sends, applied to no table. */
json_t *
ice_meta_create(const json_t *req, const char *location,
    const char *table_uuid, int64_t now_ms, ice_err *e)
{
	static const char *const pre[] = { "", "", "schema: ", "",
	    "partition-spec: ", "", "write-order: ", "", "", "" };
	ice_err		 ignored;
	at		 a = { e ? e : &ignored, "" }, b;
	struct ids	 w = { .target = NONE };
	struct remap	 r = { 0 };
	json_t		*schema, *spec = NULL, *order = NULL, *props = NULL;
	json_t		*v, *sch, *pf = NULL, *sf = NULL, *keep, *u, *m = NULL;
	const char	*name, *k;
	int64_t		 fv = 2;
	size_t		 j;
	int		 rc;

	if (!json_is_object(req))
		return BADREQ(&a, "request must be a JSON object"), NULL;
	if (get_str(&a, req, "name", 1, &name) < 0 ||
	    get_typed(&a, req, "stage-create", 0, JSON_TRUE, &v) < 0 ||
	    get_typed(&a, req, "schema", 1, JSON_OBJECT, &schema) < 0 ||
	    get_typed(&a, req, "partition-spec", 0, JSON_OBJECT, &spec) < 0 ||
	    get_typed(&a, req, "write-order", 0, JSON_OBJECT, &order) < 0 ||
	    get_typed(&a, req, "properties", 0, JSON_OBJECT, &props) < 0 ||
	    (location == NULL && get_str(&a, req, "location", 1,
	    &location) < 0))
		return NULL;
	if (*name == '\0' || *location == '\0')
		return BADREQ(&a, "empty name or location"), NULL;
	if (!uuid_ok(table_uuid))
		return BADREQ(&a, "table uuid is not a UUID"), NULL;
	json_object_foreach(props, k, v)
		if (!json_is_string(v))
			return BADREQ(&a, "property '%.64s' must be a string",
			    k), NULL;
	if ((v = field(props, "format-version")) != NULL) {
		if (strcmp(json_string_value(v), "1") != 0 &&
		    strcmp(json_string_value(v), "2") != 0)
			return INVALID(&a, "unsupported format-version '%.16s'"
			    " (supported: 1, 2)", json_string_value(v)), NULL;
		fv = json_string_value(v)[0] - '0';
	}
	sub(&b, &a, "schema: ");
	rc = schema_scan(&b, schema, &w);
	free(w.v);
	if (rc < 0)
		return NULL;
	sch = json_deep_copy(schema);
	if (fresh_fields(field(sch, "fields"), &r) < 0) {
		INVALID(&a, "out of memory");
		goto out;
	}
	json_object_set_new(sch, "schema-id", json_integer(0));
	json_array_foreach(field(sch, "identifier-field-ids"), j, v)
		json_array_set_new(field(sch, "identifier-field-ids"), j,
		    json_integer(remapped(&r, json_integer_value(v))));
	sub(&b, &a, "partition-spec: ");
	if ((pf = remap_fields(&b, spec, &r)) == NULL)
		goto out;
	sub(&b, &a, "write-order: ");
	if ((sf = remap_fields(&b, order, &r)) == NULL)
		goto out;
	keep = json_object();
	json_object_foreach(props, k, v) {
		for (j = 0; reserved[j] != NULL && strcmp(reserved[j], k); j++)
			continue;
		if (reserved[j] == NULL)
			json_object_set(keep, k, v);
	}
	u = json_pack("[{s:s, s:s}, {s:s, s:I}, {s:s, s:O}, {s:s, s:i},"
	    " {s:s, s:{s:O}}, {s:s, s:i}, {s:s, s:{s:O}}, {s:s, s:i},"
	    " {s:s, s:s}, {s:s, s:o}]",
	    "action", "assign-uuid", "uuid", table_uuid,
	    "action", "upgrade-format-version", "format-version",
	    (json_int_t)fv, "action", "add-schema", "schema", sch,
	    "action", "set-current-schema", "schema-id", -1,
	    "action", "add-spec", "spec", "fields", pf,
	    "action", "set-default-spec", "spec-id", -1,
	    "action", "add-sort-order", "sort-order", "fields", sf,
	    "action", "set-default-sort-order", "sort-order-id", -1,
	    "action", "set-location", "location", location,
	    "action", "set-properties", "updates", keep);
	if (u == NULL)
		INVALID(&a, "out of memory");
	else
		m = apply(NULL, u, NULL, now_ms, a.e, pre);
	json_decref(u);
out:
	free(r.from);
	json_decref(sch);
	json_decref(pf);
	json_decref(sf);
	return m;
}
