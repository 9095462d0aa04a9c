/*
 * ice_ns.c - the namespace routes of the Iceberg REST catalog:
 *
 *   GET    /v1/{prefix}/namespaces                  list (parent, paging)
 *   POST   /v1/{prefix}/namespaces                  create
 *   GET    /v1/{prefix}/namespaces/{namespace}      load
 *   HEAD   /v1/{prefix}/namespaces/{namespace}      exists: 204 or 404
 *   POST   /v1/{prefix}/namespaces/{namespace}/properties   update
 *   DELETE /v1/{prefix}/namespaces/{namespace}      drop: 204, or 409
 *                                                   NamespaceNotEmpty
 */
#include <stdlib.h>
#include <string.h>

#include "iceberg.h"
#include "ice_ident.h"

idem_err
ice_ns_list(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	char *parent_q = NULL, *parent = NULL, *after = NULL;
	ice_list l = { 0 };
	ice_tx *tx = NULL;
	json_t *doc = NULL, *list;
	size_t i, limit;
	int bad;

	if (prefix == NULL ||
	    ice_paging(ib, req, res, &err, &after, &limit) != 0)
		return err;
	parent_q = ice_query(idem_request_query(req), "parent", &bad);
	if (bad || (parent_q != NULL && *parent_q != '\0' &&
	    (parent = ice_ns_from_param(parent_q)) == NULL)) {
		err = ice_fail(res, 400, "BadRequestException", "malformed "
		    "parent namespace");
		goto out;
	}
	if (parent == NULL && (parent = strdup("")) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = ice_unavailable(res, IDEM_ERR_STORE);
		goto out;
	}
	if (*parent != '\0' && ice_need_ns(ib, tx, res, prefix, parent,
	    ICE_LOCK_NONE, &err) != 0)
		goto out;
	if ((err = ib->cat->ops->ns_list(tx, prefix, parent, after, limit, &l))
	    != IDEM_OK) {
		err = ice_unavailable(res, err);
		goto out;
	}
	if ((doc = json_pack("{s:[]}", "namespaces")) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	list = json_object_get(doc, "namespaces");
	for (i = 0; i < l.n; i++)
		json_array_append_new(list, ice_ns_to_json(l.names[i]));
	ice_next_token(doc, &l, limit < ICE_LIST_ALL);
	err = idem_response_json(res, 200, doc);
out:
	ib->cat->end(tx);
	ice_list_clear(&l);
	free(parent_q);
	free(parent);
	free(after);
	return err;
}

/* Whether props is an object of strings. */
static int
string_map(const json_t *props)
{
	const char *k;
	json_t *v;

	if (!json_is_object(props))
		return 0;
	json_object_foreach((json_t *)props, k, v)
		if (!json_is_string(v))
			return 0;
	return 1;
}

idem_err
ice_ns_create(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	json_t *body = NULL, *props;
	char *key = NULL, *parent = NULL, *text = NULL;
	ice_tx *tx = NULL;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	props = json_object_get(body, "properties");
	if ((key = ice_ns_from_json(json_object_get(body, "namespace"), 0))
	    == NULL) {
		err = ice_fail(res, 400, "BadRequestException", "namespace: "
		    "an array of 1 or more names (each 1 to 255 bytes, no "
		    "control characters; %d bytes in all)", ICE_NS_MAX);
		goto out;
	}
	if (props != NULL && !json_is_null(props) && !string_map(props)) {
		err = ice_fail(res, 400, "BadRequestException", "properties: "
		    "an object of strings");
		goto out;
	}
	if (props == NULL || json_is_null(props))
		props = json_object();
	else
		json_incref(props);
	text = json_dumps(props, JSON_COMPACT | JSON_SORT_KEYS);
	if (text == NULL || (parent = ice_ns_parent(key)) == NULL) {
		json_decref(props);
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	if ((tx = ib->cat->begin(ib->cat, req)) == NULL) {
		err = IDEM_ERR_STORE;
	} else if (*parent != '\0' && ice_need_ns(ib, tx, res, prefix,
	    parent, ICE_LOCK_SHARE, &err) != 0) {
		/* its parent must exist, and stays while it is made (a drop
		 * of the parent waits, then finds it) */
		json_decref(props);
		goto out;
	}
	if (err == IDEM_OK)
		err = ib->cat->ops->ns_create(tx, prefix, key, parent, text);
	if (err == IDEM_ERR_EXISTS)
		err = ice_fail(res, 409, "AlreadyExistsException", "Namespace "
		    "already exists");
	else if (err != IDEM_OK)
		err = ice_unavailable(res, err);
	else
		err = idem_response_json(res, 200, json_pack("{s:O, s:O}",
		    "namespace", json_object_get(body, "namespace"),
		    "properties", props));
	json_decref(props);
out:
	ib->cat->end(tx);
	json_decref(body);
	free(key);
	free(parent);
	free(text);
	return err;
}

/* Reads namespace {namespace} of req (locked as lock) into *key and
 * *props (a JSON object).  Returns 0, or -1 after answering (404, 400,
 * 503) with *err the error of answering. */
static int
read_ns(iceberg *ib, ice_tx *tx, const idem_request *req,
    idem_response *res, const char *prefix, ice_lock lock, char **key,
    json_t **props, idem_err *err)
{
	char *text = NULL;

	*props = NULL;
	if ((*key = ice_ns_param(req, res, err)) == NULL)
		return -1;
	if (tx == NULL) {
		*err = ice_unavailable(res, IDEM_ERR_STORE);
		return -1;
	}
	*err = ib->cat->ops->ns_get(tx, prefix, *key, lock, &text);
	if (*err == IDEM_ERR_NOT_FOUND) {
		*err = ice_no_namespace(res, *key);
		return -1;
	}
	if (*err != IDEM_OK) {
		*err = ice_unavailable(res, *err);
		return -1;
	}
	*props = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(*props)) {
		json_decref(*props);
		*props = json_object();
	}
	return 0;
}

/* Answers namespace {namespace} of req: its properties (200), or that it
 * exists (204: exists set). */
static idem_err
load(const idem_request *req, idem_response *res, iceberg *ib, int exists)
{
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	ice_tx *tx;
	json_t *props;
	char *key;

	if (prefix == NULL)
		return err;
	tx = ib->cat->begin(ib->cat, req);
	if (read_ns(ib, tx, req, res, prefix, ICE_LOCK_NONE, &key, &props,
	    &err) != 0) {
		/* answered */
	} else if (exists) {
		json_decref(props);
		err = idem_response_status(res, 204);
	} else {
		err = idem_response_json(res, 200, json_pack("{s:o, s:o}",
		    "namespace", ice_ns_to_json(key), "properties", props));
	}
	ib->cat->end(tx);
	free(key);
	return err;
}

idem_err
ice_ns_load(const idem_request *req, idem_response *res, void *data)
{
	return load(req, res, data, 0);
}

idem_err
ice_ns_exists(const idem_request *req, idem_response *res, void *data)
{
	return load(req, res, data, 1);
}

/* Whether a is an array of distinct strings. */
static int
string_set(const json_t *a)
{
	size_t i, j;

	if (!json_is_array(a))
		return 0;
	for (i = 0; i < json_array_size(a); i++) {
		if (!json_is_string(json_array_get(a, i)))
			return 0;
		for (j = 0; j < i; j++)
			if (json_equal(json_array_get(a, i),
			    json_array_get(a, j)))
				return 0;
	}
	return 1;
}

idem_err
ice_ns_props(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err), *k;
	json_t *body = NULL, *props = NULL, *rm, *up, *v, *doc;
	char *key = NULL, *text = NULL;
	ice_tx *tx = NULL;
	size_t i;

	if (prefix == NULL || (body = ice_body(req, res, &err)) == NULL)
		return err;
	rm = json_object_get(body, "removals");
	up = json_object_get(body, "updates");
	if ((rm != NULL && !json_is_null(rm) && !string_set(rm)) ||
	    (up != NULL && !json_is_null(up) && !string_map(up))) {
		err = ice_fail(res, 400, "BadRequestException", "removals: an "
		    "array of distinct strings; updates: an object of strings");
		goto out;
	}
	json_array_foreach(rm, i, v)
		if (json_object_get(up, json_string_value(v)) != NULL) {
			err = ice_fail(res, 422, "UnprocessableEntityException",
			    "Duplicate key to update and remove: %s",
			    json_string_value(v));
			goto out;
		}
	tx = ib->cat->begin(ib->cat, req);
	if (read_ns(ib, tx, req, res, prefix, ICE_LOCK_UPDATE, &key, &props,
	    &err) != 0)
		goto out;
	doc = json_pack("{s:[], s:[], s:[]}", "updated", "removed", "missing");
	if (doc == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	json_array_foreach(rm, i, v) {
		const char *name = json_string_value(v);
		json_array_append(json_object_get(doc, json_object_get(props,
		    name) != NULL ? "removed" : "missing"), v);
		json_object_del(props, name);
	}
	json_object_foreach(up, k, v) {
		json_object_set(props, k, v);
		json_array_append_new(json_object_get(doc, "updated"),
		    json_string(k));
	}
	if ((text = json_dumps(props, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		err = IDEM_ERR_NOMEM;
	else if ((err = ib->cat->ops->ns_set(tx, prefix, key, text)) != IDEM_OK)
		err = ice_unavailable(res, err);
	if (err == IDEM_OK)
		err = idem_response_json(res, 200, doc);
	else
		json_decref(doc);
out:
	ib->cat->end(tx);
	json_decref(body);
	json_decref(props);
	free(key);
	free(text);
	return err;
}

idem_err
ice_ns_drop(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	idem_err err = IDEM_OK;
	const char *prefix = ice_prefix(req, res, &err);
	ice_tx *tx;
	json_t *props;
	char *key;
	int busy = 0;

	if (prefix == NULL)
		return err;
	tx = ib->cat->begin(ib->cat, req);
	if (read_ns(ib, tx, req, res, prefix, ICE_LOCK_UPDATE, &key, &props,
	    &err) == 0) {
		json_decref(props);
		if ((err = ib->cat->ops->ns_busy(tx, prefix, key, &busy))
		    != IDEM_OK)
			err = ice_unavailable(res, err);
		else if (busy)
			err = ice_fail(res, 409, "NamespaceNotEmptyException",
			    "Namespace is not empty: it holds tables or "
			    "namespaces");
		else if ((err = ib->cat->ops->ns_drop(tx, prefix, key))
		    != IDEM_OK)
			err = ice_unavailable(res, err);
		else
			err = idem_response_status(res, 204);
	}
	ib->cat->end(tx);
	free(key);
	return err;
}
