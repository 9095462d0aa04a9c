/*
 * ice_table.c - the table routes of the Iceberg REST catalog (under
 * /v1/{prefix}):
 *
 *   GET    namespaces/{namespace}/tables            list (paging)
 *   POST   namespaces/{namespace}/tables            create (stage-create)
 *   GET    namespaces/{namespace}/tables/{table}    load (ETag)
 *   HEAD   namespaces/{namespace}/tables/{table}    exists: 204 or 404
 *   POST   namespaces/{namespace}/tables/{table}    commit: 200, or 409
 *                                                   CommitFailedException
 *   DELETE namespaces/{namespace}/tables/{table}    drop (purgeRequested)
 *   POST   namespaces/{namespace}/register          register a metadata
 *                                                   file of the warehouse
 *   POST   namespaces/{namespace}/tables/{table}/metrics   204
 *   POST   tables/rename                            204
 *   POST   transactions/commit                      several tables, all
 *                                                   or nothing: 204
 *
 * A change writes the table's new metadata file first, then points the
 * table at it in the request's transaction: an attempt rolled back leaves
 * at most a file nothing refers to, as in Iceberg itself.
 */
#include <stdlib.h>
#include <string.h>

#include <uuid/uuid.h>

#include "iceberg.h"
#include "ice_ident.h"

/* A table named by a request. */
typedef struct ident {
	char *ns;        /* namespace key */
	char *name;
} ident;

static void
ident_clear(ident *id)
{
	free(id->ns);
	free(id->name);
	id->ns = id->name = NULL;
}

/* The table of req's path into *id.  Returns 0, or -1 after a 400. */
static int
path_ident(const idem_request *req, idem_response *res, idem_err *err,
    ident *id)
{
	const char *name = idem_request_param(req, "table");

	id->name = NULL;
	if ((id->ns = ice_ns_param(req, res, err)) == NULL)
		return -1;
	if (name == NULL || !ice_name_ok(name, strlen(name)) ||
	    (id->name = strdup(name)) == NULL) {
		*err = ice_fail(res, 400, "BadRequestException", "a table name "
		    "is 1 to %d bytes without control characters",
		    ICE_NAME_MAX);
		ident_clear(id);
		return -1;
	}
	return 0;
}

/* A TableIdentifier ({"namespace": [...], "name": "t"}) into *id.
 * Returns 0, or -1 (id cleared). */
static int
json_ident(const json_t *j, ident *id)
{
	const char *name = json_string_value(json_object_get(j, "name"));

	id->name = NULL;
	if ((id->ns = ice_ns_from_json(json_object_get(j, "namespace"), 0))
	    == NULL)
		return -1;
	if (name == NULL || !ice_name_ok(name, strlen(name)) ||
	    (id->name = strdup(name)) == NULL) {
		ident_clear(id);
		return -1;
	}
	return 0;
}

/* Answers that table id does not exist. */
static idem_err
no_table(idem_response *res, const ident *id)
{
	json_t *parts = ice_ns_to_json(id->ns);
	char *text = parts != NULL ? json_dumps(parts, JSON_COMPACT) : NULL;
	idem_err err = ice_fail(res, 404, "NoSuchTableException", "Table does "
	    "not exist: %s.%s", text != NULL ? text : "?", id->name);

	json_decref(parts);
	free(text);
	return err;
}

/* Reads table id (locked as lock): *location and *meta (new reference).
 * Returns IDEM_OK, IDEM_ERR_NOT_FOUND, or the storage's error. */
static idem_err
read_table(iceberg *ib, ice_tx *tx, const char *prefix, const ident *id,
    ice_lock lock, char **location, json_t **meta)
{
	char *text = NULL;
	idem_err err;

	*meta = NULL;
	*location = NULL;
	err = ib->cat->ops->tbl_get(tx, prefix, id->ns, id->name, lock,
	    location, &text);
	if (err != IDEM_OK)
		return err;
	*meta = json_loads(text, 0, NULL);
	free(text);
	if (*meta == NULL) {
		free(*location);
		*location = NULL;
		return IDEM_ERR_STORE;
	}
	return IDEM_OK;
}

/* A LoadTableResult: location (NULL: staged), a reference to meta. */
static json_t *
load_result(const char *location, json_t *meta)
{
	return json_pack("{s:s?, s:O, s:{}}", "metadata-location", location,
	    "metadata", meta, "config");
}

/* The ETag of a table's state: its metadata file, hashed (FNV-1a). */
static void
etag(const char *location, char out[24])
{
	unsigned long long h = 1469598103934665603ULL;

	for (; *location != '\0'; location++)
		h = (h ^ (unsigned char)*location) * 1099511628211ULL;
	snprintf(out, 24, "\"%016llx\"", h);
}

/* The next metadata file's version after the one at location (meta's). */
static long
next_version(const char *location, const json_t *meta)
{
	long v = location != NULL ? ice_wh_version(location) : -1;

	return v >= 0 ? v + 1 :
	    (long)json_array_size(json_object_get(meta, "metadata-log")) + 1;
}

/* Answers an ice_meta error. */
static idem_err
meta_fail(idem_response *res, const ice_err *e)
{
	return ice_fail(res, e->status, e->type != NULL ? e->type :
	    "BadRequestException", "%s", e->message);
}

/* The directory of meta's location, which must lie in the warehouse
 * (caller frees).  NULL after a 400 in res. */
static char *
table_dir(iceberg *ib, idem_response *res, const json_t *meta, idem_err *err)
{
	const char *loc = json_string_value(json_object_get(meta, "location"));
	char *path = loc != NULL ? ice_wh_path(ib->wh, loc) : NULL;

	if (path != NULL && strlen(path) <= ICE_DIR_MAX)
		return path;
	free(path);
	*err = ice_fail(res, 400, "BadRequestException", "the table's location "
	    "(%.200s) must be a directory inside the catalog's warehouse, at "
	    "most %d bytes long", loc != NULL ? loc : "none", ICE_DIR_MAX);
	return NULL;
}

/* Checks that no dropped table's files wait for the purger at dir (or in
 * it, or around it): the purger would delete what is written there.
 * Returns 0, or -1 after answering (503: retry once they are gone). */
static int
not_purging(iceberg *ib, ice_tx *tx, idem_response *res, const char *dir,
    idem_err *err)
{
	int yes = 0;

	*err = ib->cat->ops->dir_used(tx, dir, 1, ice_wh_root(ib->wh), &yes);
	if (*err != IDEM_OK) {
		*err = ice_unavailable(res, *err);
		return -1;
	}
	if (!yes)
		return 0;
	*err = ice_fail(res, 503, "ServiceUnavailableException", "the "
	    "location %.200s is a dropped table's, whose files are being "
	    "deleted; nothing was changed: retry later", dir);
	if (*err == IDEM_OK)
		*err = idem_response_header(res, "Retry-After", "5");
	return -1;
}

/* Answers a failed write of a metadata file (err): 400 when the location
 * cannot hold one (a path through a file, a name too long), else 503. */
static idem_err
write_failed(idem_response *res, idem_err err)
{
	if (err == IDEM_ERR_INVALID)
		return ice_fail(res, 400, "BadRequestException", "the table's "
		    "metadata cannot be written under its location");
	return ice_unavailable(res, err);
}

idem_err
ice_tbl_list(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	char *key = NULL, *after = NULL;
	ice_list l = { 0 };
	ice_tx *tx = NULL;
	json_t *doc, *ids;
	size_t i, limit;

	if (prefix == NULL || (key = ice_ns_param(req, res, &err)) == NULL ||
	    ice_paging(ib, req, res, &err, &after, &limit) != 0)
		goto out;
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	if (ice_need_ns(ib, tx, res, prefix, key, ICE_LOCK_NONE, &err) != 0)
		goto out;
	if ((err = ib->cat->ops->tbl_list(tx, prefix, key, after, limit, &l))
	    != IDEM_OK) {
		err = ice_unavailable(res, err);
		goto out;
	}
	if ((doc = json_pack("{s:[]}", "identifiers")) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	ids = json_object_get(doc, "identifiers");
	for (i = 0; i < l.n; i++)
		json_array_append_new(ids, json_pack("{s:o, s:s}", "namespace",
		    ice_ns_to_json(key), "name", l.names[i]));
	ice_next_token(doc, &l, limit < ICE_LIST_ALL);
	err = idem_response_json(res, 200, doc);
out:
	ib->cat->end(tx);
	ice_list_clear(&l);
	free(key);
	free(after);
	return err;
}

/* A new random UUID into out. */
static void
new_uuid(char out[37])
{
	uuid_t u;

	uuid_generate_random(u);
	uuid_unparse_lower(u, out);
}

idem_err
ice_tbl_create(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err), *given;
	json_t *body = NULL, *meta = NULL, *old = NULL;
	char *location = NULL, *file = NULL, *oldloc = NULL, *dir = NULL;
	char id[37];
	ident t = { NULL, NULL };
	ice_tx *tx = NULL;
	ice_err e;
	int staged;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	if ((t.ns = ice_ns_param(req, res, &err)) == NULL)
		goto out;
	given = json_string_value(json_object_get(body, "name"));
	if (given == NULL || !ice_name_ok(given, strlen(given))) {
		err = ice_fail(res, 400, "BadRequestException", "name: a table "
		    "name of 1 to %d bytes without control characters",
		    ICE_NAME_MAX);
		goto out;
	}
	staged = json_is_true(json_object_get(body, "stage-create"));
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	/* the namespace stays while the table is made in it */
	if (ice_need_ns(ib, tx, res, prefix, t.ns, ICE_LOCK_SHARE, &err) != 0)
		goto out;
	t.name = strdup(given);
	if (t.name == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	/* a plain read spares a file for a table that exists; the INSERT
	 * decides (a locking read of a missing row would take a gap lock on
	 * MySQL, and concurrent creates deadlock on it) */
	err = read_table(ib, tx, prefix, &t, ICE_LOCK_NONE, &oldloc, &old);
	if (err == IDEM_OK) {
		err = ice_fail(res, 409, "AlreadyExistsException", "Table "
		    "already exists: %s", t.name);
		goto out;
	}
	if (err != IDEM_ERR_NOT_FOUND) {
		err = ice_unavailable(res, err);
		goto out;
	}
	new_uuid(id);
	if (json_is_string(json_object_get(body, "location")))
		location = strdup(json_string_value(json_object_get(body,
		    "location")));
	else
		location = ice_wh_location(ib->wh, prefix, t.ns, t.name, id);
	if (location == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	if ((meta = ice_meta_create(body, location, id, ice_now_ms(), &e))
	    == NULL) {
		err = meta_fail(res, &e);
		goto out;
	}
	if ((dir = table_dir(ib, res, meta, &err)) == NULL)
		goto out;
	if (staged) {
		/* nothing is made: the client commits it with assert-create */
		err = idem_response_json(res, 200, load_result(NULL, meta));
		goto out;
	}
	if (not_purging(ib, tx, res, dir, &err) != 0)
		goto out;
	if ((err = ice_wh_write(ib->wh, location, 0, meta, &file)) != IDEM_OK) {
		err = write_failed(res, err);
		goto out;
	}
	char *text = json_dumps(meta, JSON_COMPACT);
	err = text == NULL ? IDEM_ERR_NOMEM : ib->cat->ops->tbl_create(tx,
	    prefix, t.ns, t.name, dir, file, text);
	free(text);
	if (err == IDEM_ERR_EXISTS)
		err = ice_fail(res, 409, "AlreadyExistsException", "Table "
		    "already exists: %s", t.name);
	else if (err != IDEM_OK)
		err = ice_unavailable(res, err);
	else {
		char tag[24];
		etag(file, tag);
		if ((err = idem_response_header(res, "ETag", tag)) == IDEM_OK)
			err = idem_response_json(res, 200, load_result(file,
			    meta));
	}
out:
	ib->cat->end(tx);
	json_decref(body);
	json_decref(meta);
	json_decref(old);
	ident_clear(&t);
	free(location);
	free(file);
	free(oldloc);
	free(dir);
	return err;
}

/* Answers table (from req's path) as load does, or 204 for exists. */
static idem_err
load(const idem_request *req, idem_response *res, iceberg *ib, int exists)
{
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err), *inm;
	char *location = NULL, tag[24];
	ident t = { NULL, NULL };
	json_t *meta = NULL;
	ice_tx *tx = NULL;

	if (prefix == NULL || path_ident(req, res, &err, &t) != 0)
		return err;
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	err = read_table(ib, tx, prefix, &t, ICE_LOCK_NONE, &location, &meta);
	if (err == IDEM_ERR_NOT_FOUND) {
		err = no_table(res, &t);
		goto out;
	}
	if (err != IDEM_OK) {
		err = ice_unavailable(res, err);
		goto out;
	}
	if (exists) {
		err = idem_response_status(res, 204);
		goto out;
	}
	etag(location, tag);
	inm = idem_request_header(req, "If-None-Match");
	if ((err = idem_response_header(res, "ETag", tag)) != IDEM_OK)
		goto out;
	if (inm != NULL && strcmp(inm, tag) == 0)
		err = idem_response_status(res, 304);
	else
		err = idem_response_json(res, 200, load_result(location, meta));
out:
	ib->cat->end(tx);
	json_decref(meta);
	ident_clear(&t);
	free(location);
	return err;
}

idem_err
ice_tbl_load(const idem_request *req, idem_response *res, void *data)
{
	return load(req, res, data, 0);
}

idem_err
ice_tbl_exists(const idem_request *req, idem_response *res, void *data)
{
	return load(req, res, data, 1);
}

/* Whether requirements hold an assert-create. */
static int
asserts_create(const json_t *requirements)
{
	size_t i;
	json_t *r;

	json_array_foreach(requirements, i, r)
		if (json_is_string(json_object_get(r, "type")) &&
		    strcmp(json_string_value(json_object_get(r, "type")),
		    "assert-create") == 0)
			return 1;
	return 0;
}

/* One table's change of a commit: what it was, what it becomes. */
typedef struct change {
	ident id;
	const json_t *req;     /* its CommitTableRequest, borrowed */
	char *location;        /* the metadata file it points at, NULL:
	                        * a table it creates */
	json_t *meta;          /* its metadata, then the new one */
	char *olddir;          /* its directory before, NULL: new */
	char *dir;             /* its directory after */
	char *file;            /* the new metadata file */
	char *text;            /* the new metadata as text */
} change;

static void
change_clear(change *c)
{
	ident_clear(&c->id);
	free(c->location);
	free(c->olddir);
	free(c->dir);
	free(c->file);
	free(c->text);
	json_decref(c->meta);
	memset(c, 0, sizeof(*c));
}

/*
 * Reads c's table (locked for update), checks the requirements and
 * applies the updates of c->req into c->meta; a table that does not exist
 * is made when create allows it and the requirements assert-create.
 * Returns 0, or -1 after answering (400, 404, 409, 503).
 */
static int
prepare(iceberg *ib, ice_tx *tx, idem_response *res, const char *prefix,
    change *c, int create, idem_err *err)
{
	const json_t *reqs = json_object_get(c->req, "requirements");
	const json_t *ups = json_object_get(c->req, "updates");
	json_t *next;
	ice_err e;

	if (!json_is_array(reqs) || !json_is_array(ups)) {
		*err = ice_fail(res, 400, "BadRequestException", "a commit has "
		    "the arrays requirements and updates");
		return -1;
	}
	/* a create transaction reads without a lock: its assert-create
	 * fails on a table it finds, and its INSERT decides on one made
	 * meanwhile (a locking read of a missing row would take a gap lock
	 * on MySQL, where concurrent creates deadlock) */
	*err = read_table(ib, tx, prefix, &c->id, create &&
	    asserts_create(reqs) ? ICE_LOCK_NONE : ICE_LOCK_UPDATE,
	    &c->location, &c->meta);
	if (*err == IDEM_ERR_NOT_FOUND && !(create && asserts_create(reqs))) {
		*err = no_table(res, &c->id);
		return -1;
	}
	if (*err == IDEM_ERR_NOT_FOUND) {
		/* a create transaction: the namespace must stay */
		if (ice_need_ns(ib, tx, res, prefix, c->id.ns, ICE_LOCK_SHARE, err)
		    != 0)
			return -1;
	} else if (*err != IDEM_OK) {
		*err = ice_unavailable(res, *err);
		return -1;
	} else if ((c->olddir = table_dir(ib, res, c->meta, err)) == NULL) {
		return -1;
	}
	if (ice_meta_check(c->meta, reqs, &e) != 0) {
		*err = meta_fail(res, &e);
		return -1;
	}
	if ((next = ice_meta_apply(c->meta, ups, c->location, ice_now_ms(),
	    &e)) == NULL) {
		*err = meta_fail(res, &e);
		return -1;
	}
	json_decref(c->meta);
	c->meta = next;
	if ((c->dir = table_dir(ib, res, c->meta, err)) == NULL)
		return -1;
	/* a new directory must not be one the purger is deleting */
	if ((c->olddir == NULL || strcmp(c->olddir, c->dir) != 0) &&
	    not_purging(ib, tx, res, c->dir, err) != 0)
		return -1;
	return 0;
}

/* Writes c's new metadata file.  Returns 0, or -1 after answering (400,
 * 503). */
static int
write_file(iceberg *ib, idem_response *res, change *c, idem_err *err)
{
	const char *dir = json_string_value(json_object_get(c->meta,
	    "location"));

	*err = ice_wh_write(ib->wh, dir, next_version(c->location, c->meta),
	    c->meta, &c->file);
	if (*err == IDEM_OK && (c->text = json_dumps(c->meta, JSON_COMPACT))
	    == NULL)
		*err = IDEM_ERR_NOMEM;
	if (*err == IDEM_OK)
		return 0;
	*err = write_failed(res, *err);
	return -1;
}

/* Points c's table at its new file (written by write_file).  Returns 0,
 * or -1 after answering (409: made meanwhile by another; 503). */
static int
point(iceberg *ib, ice_tx *tx, idem_response *res, const char *prefix,
    change *c, idem_err *err)
{
	if (c->location == NULL)
		*err = ib->cat->ops->tbl_create(tx, prefix, c->id.ns, c->id.name,
		    c->dir, c->file, c->text);
	else
		*err = ib->cat->ops->tbl_set(tx, prefix, c->id.ns, c->id.name,
		    c->dir, c->file, c->text);
	if (*err == IDEM_OK)
		return 0;
	*err = *err == IDEM_ERR_EXISTS ? ice_fail(res, 409,
	    "CommitFailedException", "Requirement failed: table %s was created "
	    "concurrently (assert-create)", c->id.name) :
	    ice_unavailable(res, *err);
	return -1;
}

idem_err
ice_tbl_commit(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	json_t *body = NULL;
	change c;
	ice_tx *tx = NULL;
	char tag[24];

	memset(&c, 0, sizeof(c));
	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	if (path_ident(req, res, &err, &c.id) != 0)
		goto out;
	c.req = body;
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	if (prepare(ib, tx, res, prefix, &c, 1, &err) != 0 ||
	    write_file(ib, res, &c, &err) != 0 ||
	    point(ib, tx, res, prefix, &c, &err) != 0)
		goto out;
	etag(c.file, tag);
	if ((err = idem_response_header(res, "ETag", tag)) == IDEM_OK)
		err = idem_response_json(res, 200, json_pack("{s:s, s:O}",
		    "metadata-location", c.file, "metadata", c.meta));
out:
	ib->cat->end(tx);
	change_clear(&c);
	json_decref(body);
	return err;
}

/* Orders changes by namespace, then name, for qsort: tables are locked
 * in one order, so that two transactions never wait on each other. */
static int
by_ident(const void *a, const void *b)
{
	const change *x = a, *y = b;
	int d = strcmp(x->id.ns, y->id.ns);

	return d != 0 ? d : strcmp(x->id.name, y->id.name);
}

idem_err
ice_tx_commit(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	json_t *body = NULL, *changes, *tc;
	change *cs = NULL;
	ice_tx *tx = NULL;
	size_t i, n = 0;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	changes = json_object_get(body, "table-changes");
	if (!json_is_array(changes) || json_array_size(changes) == 0 ||
	    json_array_size(changes) > 100) {
		err = ice_fail(res, 400, "BadRequestException", "table-changes: "
		    "an array of 1 to 100 table commits");
		goto out;
	}
	if ((cs = calloc(json_array_size(changes), sizeof(*cs))) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	json_array_foreach(changes, i, tc) {
		if (json_ident(json_object_get(tc, "identifier"), &cs[n].id)
		    != 0) {
			err = ice_fail(res, 400, "BadRequestException", "table-"
			    "changes[%zu]: no valid identifier", i);
			goto out;
		}
		cs[n++].req = tc;
	}
	qsort(cs, n, sizeof(*cs), by_ident);
	for (i = 1; i < n; i++)
		if (by_ident(&cs[i - 1], &cs[i]) == 0) {
			err = ice_fail(res, 400, "BadRequestException", "table "
			    "%s changed twice in one transaction",
			    cs[i].id.name);
			goto out;
		}
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	/* every requirement is checked and every file written before any
	 * table changes (in memory nothing can be rolled back) */
	for (i = 0; i < n; i++)
		if (prepare(ib, tx, res, prefix, &cs[i], 0, &err) != 0)
			goto out;
	for (i = 0; i < n; i++)
		if (write_file(ib, res, &cs[i], &err) != 0)
			goto out;
	for (i = 0; i < n; i++)
		if (point(ib, tx, res, prefix, &cs[i], &err) != 0)
			goto out;
	err = idem_response_status(res, 204);
out:
	ib->cat->end(tx);
	for (i = 0; i < n; i++)
		change_clear(&cs[i]);
	free(cs);
	json_decref(body);
	return err;
}

idem_err
ice_tbl_drop(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err), *dir;
	char *location = NULL, *purge_q = NULL, *path;
	ident t = { NULL, NULL };
	json_t *meta = NULL;
	ice_tx *tx = NULL;
	int bad, purge;

	if (prefix == NULL || path_ident(req, res, &err, &t) != 0)
		return err;
	purge_q = ice_query(idem_request_query(req), "purgeRequested", &bad);
	purge = purge_q != NULL && strcmp(purge_q, "true") == 0;
	if (bad || (purge_q != NULL && !purge && strcmp(purge_q, "false")
	    != 0)) {
		err = ice_fail(res, 400, "BadRequestException",
		    "purgeRequested: true or false");
		goto out;
	}
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	err = read_table(ib, tx, prefix, &t, ICE_LOCK_UPDATE, &location, &meta);
	if (err == IDEM_OK)
		err = ib->cat->ops->tbl_drop(tx, prefix, t.ns, t.name);
	dir = json_string_value(json_object_get(meta, "location"));
	if (err == IDEM_OK && purge && dir != NULL &&
	    (path = ice_wh_path(ib->wh, dir)) != NULL) {
		/* deleted by the purger once the drop is committed */
		err = ib->cat->ops->purge_add(tx, path);
		free(path);
	}
	if (err == IDEM_ERR_NOT_FOUND)
		err = no_table(res, &t);
	else if (err != IDEM_OK)
		err = ice_unavailable(res, err);
	else
		err = idem_response_status(res, 204);
out:
	ib->cat->end(tx);
	ident_clear(&t);
	json_decref(meta);
	free(location);
	free(purge_q);
	return err;
}

idem_err
ice_tbl_rename(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	ident from = { NULL, NULL }, to = { NULL, NULL };
	char *location = NULL, *text = NULL, *dir = NULL;
	json_t *body = NULL, *meta = NULL;
	ice_tx *tx = NULL;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	if (json_ident(json_object_get(body, "source"), &from) != 0 ||
	    json_ident(json_object_get(body, "destination"), &to) != 0) {
		err = ice_fail(res, 400, "BadRequestException", "source and "
		    "destination: table identifiers");
		goto out;
	}
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	err = read_table(ib, tx, prefix, &from, ICE_LOCK_UPDATE, &location,
	    &meta);
	if (err == IDEM_ERR_NOT_FOUND) {
		err = no_table(res, &from);
		goto out;
	}
	if (err != IDEM_OK) {
		err = ice_unavailable(res, err);
		goto out;
	}
	if (ice_need_ns(ib, tx, res, prefix, to.ns, ICE_LOCK_SHARE, &err) != 0 ||
	    (dir = table_dir(ib, res, meta, &err)) == NULL)
		goto out;
	if ((text = json_dumps(meta, JSON_COMPACT)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	err = ib->cat->ops->tbl_create(tx, prefix, to.ns, to.name, dir,
	    location, text);
	if (err == IDEM_OK)
		err = ib->cat->ops->tbl_drop(tx, prefix, from.ns, from.name);
	if (err == IDEM_ERR_EXISTS)
		err = ice_fail(res, 409, "AlreadyExistsException", "Table "
		    "already exists: %s", to.name);
	else if (err != IDEM_OK)
		err = ice_unavailable(res, err);
	else
		err = idem_response_status(res, 204);
out:
	ib->cat->end(tx);
	ident_clear(&from);
	ident_clear(&to);
	json_decref(body);
	json_decref(meta);
	free(location);
	free(text);
	free(dir);
	return err;
}

idem_err
ice_tbl_register(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err), *file, *name;
	json_t *body = NULL, *meta = NULL, *old = NULL;
	char *oldloc = NULL, *text = NULL, *dir = NULL;
	ident t = { NULL, NULL };
	ice_tx *tx = NULL;
	ice_err e;
	int overwrite;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	name = json_string_value(json_object_get(body, "name"));
	file = json_string_value(json_object_get(body, "metadata-location"));
	overwrite = json_is_true(json_object_get(body, "overwrite"));
	if ((t.ns = ice_ns_param(req, res, &err)) == NULL)
		goto out;
	if (name == NULL || !ice_name_ok(name, strlen(name)) || file == NULL ||
	    (t.name = strdup(name)) == NULL) {
		err = ice_fail(res, 400, "BadRequestException", "name and "
		    "metadata-location are required");
		goto out;
	}
	err = ice_wh_read(ib->wh, file, &meta);
	if (err == IDEM_ERR_NOT_FOUND) {
		err = ice_fail(res, 404, "NotFoundException", "no metadata file "
		    "at %s", file);
		goto out;
	}
	if (err != IDEM_OK) {
		err = ice_fail(res, 400, "BadRequestException", "%s is not a "
		    "readable table metadata file inside the catalog's "
		    "warehouse", file);
		goto out;
	}
	if (ice_meta_validate(meta, &e) != 0) {
		err = meta_fail(res, &e);
		goto out;
	}
	if ((dir = table_dir(ib, res, meta, &err)) == NULL)
		goto out;
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	if (ice_need_ns(ib, tx, res, prefix, t.ns, ICE_LOCK_SHARE, &err) != 0 ||
	    not_purging(ib, tx, res, dir, &err) != 0)
		goto out;
	if ((text = json_dumps(meta, JSON_COMPACT)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	/* the INSERT first: a locking read of a missing row would take a
	 * gap lock on MySQL */
	err = ib->cat->ops->tbl_create(tx, prefix, t.ns, t.name, dir, file,
	    text);
	if (err == IDEM_ERR_EXISTS && overwrite &&
	    (err = read_table(ib, tx, prefix, &t, ICE_LOCK_UPDATE, &oldloc,
	    &old)) == IDEM_OK)
		err = ib->cat->ops->tbl_set(tx, prefix, t.ns, t.name, dir, file,
		    text);
	if (err == IDEM_ERR_EXISTS || err == IDEM_ERR_NOT_FOUND)
		err = ice_fail(res, 409, "AlreadyExistsException", "Table "
		    "already exists: %s", t.name);
	else if (err != IDEM_OK)
		err = ice_unavailable(res, err);
	else
		err = idem_response_json(res, 200, load_result(file, meta));
out:
	ib->cat->end(tx);
	ident_clear(&t);
	json_decref(body);
	json_decref(meta);
	json_decref(old);
	free(oldloc);
	free(text);
	free(dir);
	return err;
}

idem_err
ice_tbl_metrics(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	char *location = NULL;
	ident t = { NULL, NULL };
	json_t *body = NULL, *meta = NULL;
	ice_tx *tx = NULL;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	if (path_ident(req, res, &err, &t) != 0)
		goto out;
	if (!json_is_string(json_object_get(body, "report-type"))) {
		err = ice_fail(res, 400, "BadRequestException", "a metrics "
		    "report has a report-type");
		goto out;
	}
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	err = read_table(ib, tx, prefix, &t, ICE_LOCK_NONE, &location, &meta);
	if (err == IDEM_ERR_NOT_FOUND)
		err = no_table(res, &t);
	else if (err != IDEM_OK)
		err = ice_unavailable(res, err);
	else
		/* accepted; the catalog keeps no metrics */
		err = idem_response_status(res, 204);
out:
	ib->cat->end(tx);
	ident_clear(&t);
	json_decref(body);
	json_decref(meta);
	free(location);
	return err;
}
