/*
 * ice_cat_mem.c - the catalog in the worker's memory (the memory store):
 * two JSON objects under one lock, which a request holds from
 * ice_tx begin to end, so that its reads and writes are one step.
 * Keys: "prefix \x1e namespace" for namespaces, "prefix \x1e namespace
 * \x1e name" for tables (names hold no control byte: ice_ident.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ice_cat.h"

typedef struct mem {
	pthread_mutex_t lock;
	json_t *ns;      /* key -> {"parent", "props"} */
	json_t *tables;  /* key -> {"dir", "location", "metadata"} */
	json_t *purges;  /* dir -> true */
} mem;

struct ice_tx {
	mem *m;
};

/* "a \x1e b [\x1e c]" in a new string, or NULL. */
static char *
join(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = c != NULL ? strlen(c) : 0;
	char *s = malloc(la + lb + lc + 3);

	if (s == NULL)
		return NULL;
	memcpy(s, a, la);
	s[la] = '\x1e';
	memcpy(s + la + 1, b, lb + 1);
	if (c != NULL) {
		s[la + 1 + lb] = '\x1e';
		memcpy(s + la + lb + 2, c, lc + 1);
	}
	return s;
}

/* A new copy of s, or NULL. */
static char *
dup(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

static idem_err
ns_create(ice_tx *tx, const char *prefix, const char *ns, const char *parent,
    const char *props)
{
	char *k = join(prefix, ns, NULL);
	idem_err err = IDEM_OK;

	if (k == NULL)
		return IDEM_ERR_NOMEM;
	if (json_object_get(tx->m->ns, k) != NULL)
		err = IDEM_ERR_EXISTS;
	else if (json_object_set_new(tx->m->ns, k, json_pack("{s:s, s:s}",
	    "parent", parent, "props", props)) != 0)
		err = IDEM_ERR_NOMEM;
	free(k);
	return err;
}

/* The entry of namespace ns, or NULL. */
static json_t *
ns_entry(ice_tx *tx, const char *prefix, const char *ns)
{
	char *k = join(prefix, ns, NULL);
	json_t *e = k != NULL ? json_object_get(tx->m->ns, k) : NULL;

	free(k);
	return e;
}

static idem_err
ns_get(ice_tx *tx, const char *prefix, const char *ns, ice_lock lock,
    char **props)
{
	json_t *e = ns_entry(tx, prefix, ns);

	(void)lock;   /* the whole catalog is locked */
	*props = NULL;
	if (e == NULL)
		return IDEM_ERR_NOT_FOUND;
	*props = dup(json_string_value(json_object_get(e, "props")));
	return *props != NULL ? IDEM_OK : IDEM_ERR_NOMEM;
}

static idem_err
ns_set(ice_tx *tx, const char *prefix, const char *ns, const char *props)
{
	json_t *e = ns_entry(tx, prefix, ns);

	if (e == NULL)
		return IDEM_ERR_NOT_FOUND;
	return json_object_set_new(e, "props", json_string(props)) == 0 ?
	    IDEM_OK : IDEM_ERR_NOMEM;
}

static idem_err
ns_drop(ice_tx *tx, const char *prefix, const char *ns)
{
	char *k = join(prefix, ns, NULL);
	int gone;

	if (k == NULL)
		return IDEM_ERR_NOMEM;
	gone = json_object_del(tx->m->ns, k) == 0;
	free(k);
	return gone ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

static idem_err
ns_busy(ice_tx *tx, const char *prefix, const char *ns, int *yes)
{
	char *k = join(prefix, ns, "");
	size_t kl = k != NULL ? strlen(k) : 0;
	const char *key;
	json_t *v;

	if (k == NULL)
		return IDEM_ERR_NOMEM;
	*yes = 0;
	/* a table of ns: its key starts "prefix \x1e ns \x1e" */
	json_object_foreach(tx->m->tables, key, v)
		if (strncmp(key, k, kl) == 0)
			*yes = 1;
	json_object_foreach(tx->m->ns, key, v)
		if (strncmp(key, k, strlen(prefix) + 1) == 0 &&
		    strcmp(json_string_value(json_object_get(v, "parent")),
		    ns) == 0)
			*yes = 1;
	free(k);
	return IDEM_OK;
}

/* Orders strings bytewise, for qsort. */
static int
by_bytes(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the n names of *out, keeps those after after, at most limit,
 * and frees the rest. */
static void
page(ice_list *out, const char *after, size_t limit)
{
	size_t i, kept = 0;

	qsort(out->names, out->n, sizeof(*out->names), by_bytes);
	out->more = 0;
	for (i = 0; i < out->n; i++) {
		if (strcmp(out->names[i], after) <= 0 || kept == limit) {
			if (kept == limit)
				out->more = 1;
			free(out->names[i]);
			continue;
		}
		out->names[kept++] = out->names[i];
	}
	out->n = kept;
}

/* Adds a copy of name to out (room for cap names).  Returns 0 or -1. */
static int
add_name(ice_list *out, const char *name)
{
	if ((out->names[out->n] = strdup(name)) == NULL)
		return -1;
	out->n++;
	return 0;
}

static idem_err
ns_list(ice_tx *tx, const char *prefix, const char *parent, const char *after,
    size_t limit, ice_list *out)
{
	size_t pl = strlen(prefix);
	const char *key;
	json_t *v;

	memset(out, 0, sizeof(*out));
	if ((out->names = calloc(json_object_size(tx->m->ns) + 1,
	    sizeof(*out->names))) == NULL)
		return IDEM_ERR_NOMEM;
	json_object_foreach(tx->m->ns, key, v)
		if (strncmp(key, prefix, pl) == 0 && key[pl] == '\x1e' &&
		    strcmp(json_string_value(json_object_get(v, "parent")),
		    parent) == 0 && add_name(out, key + pl + 1) != 0) {
			ice_list_clear(out);
			return IDEM_ERR_NOMEM;
		}
	page(out, after, limit);
	return IDEM_OK;
}

/* The entry of table (ns, name), or NULL. */
static json_t *
tbl_entry(ice_tx *tx, const char *prefix, const char *ns, const char *name)
{
	char *inner = join(ns, name, NULL);
	char *k = inner != NULL ? join(prefix, inner, NULL) : NULL;
	json_t *e = k != NULL ? json_object_get(tx->m->tables, k) : NULL;

	free(inner);
	free(k);
	return e;
}

static idem_err
tbl_get(ice_tx *tx, const char *prefix, const char *ns, const char *name,
    ice_lock lock, char **location, char **metadata)
{
	json_t *e = tbl_entry(tx, prefix, ns, name);

	(void)lock;
	*location = *metadata = NULL;
	if (e == NULL)
		return IDEM_ERR_NOT_FOUND;
	*location = dup(json_string_value(json_object_get(e, "location")));
	*metadata = dup(json_string_value(json_object_get(e, "metadata")));
	if (*location != NULL && *metadata != NULL)
		return IDEM_OK;
	free(*location);
	free(*metadata);
	*location = *metadata = NULL;
	return IDEM_ERR_NOMEM;
}

static idem_err
tbl_create(ice_tx *tx, const char *prefix, const char *ns, const char *name,
    const char *dir, const char *location, const char *metadata)
{
	char *inner = join(ns, name, NULL);
	char *k = inner != NULL ? join(prefix, inner, NULL) : NULL;
	idem_err err = IDEM_OK;

	if (k == NULL)
		err = IDEM_ERR_NOMEM;
	else if (json_object_get(tx->m->tables, k) != NULL)
		err = IDEM_ERR_EXISTS;
	else if (json_object_set_new(tx->m->tables, k, json_pack("{s:s, s:s, "
	    "s:s}", "dir", dir, "location", location, "metadata", metadata))
	    != 0)
		err = IDEM_ERR_NOMEM;
	free(inner);
	free(k);
	return err;
}

static idem_err
tbl_set(ice_tx *tx, const char *prefix, const char *ns, const char *name,
    const char *dir, const char *location, const char *metadata)
{
	json_t *e = tbl_entry(tx, prefix, ns, name);

	if (e == NULL)
		return IDEM_ERR_NOT_FOUND;
	if (json_object_set_new(e, "dir", json_string(dir)) != 0 ||
	    json_object_set_new(e, "location", json_string(location)) != 0 ||
	    json_object_set_new(e, "metadata", json_string(metadata)) != 0)
		return IDEM_ERR_NOMEM;
	return IDEM_OK;
}

static idem_err
tbl_drop(ice_tx *tx, const char *prefix, const char *ns, const char *name)
{
	char *inner = join(ns, name, NULL);
	char *k = inner != NULL ? join(prefix, inner, NULL) : NULL;
	idem_err err = IDEM_ERR_NOMEM;

	if (k != NULL)
		err = json_object_del(tx->m->tables, k) == 0 ? IDEM_OK :
		    IDEM_ERR_NOT_FOUND;
	free(inner);
	free(k);
	return err;
}

static idem_err
tbl_list(ice_tx *tx, const char *prefix, const char *ns, const char *after,
    size_t limit, ice_list *out)
{
	char *k = join(prefix, ns, "");
	size_t kl = k != NULL ? strlen(k) : 0;
	const char *key;
	json_t *v;

	memset(out, 0, sizeof(*out));
	if (k == NULL || (out->names = calloc(json_object_size(tx->m->tables) +
	    1, sizeof(*out->names))) == NULL) {
		free(k);
		return IDEM_ERR_NOMEM;
	}
	json_object_foreach(tx->m->tables, key, v)
		if (strncmp(key, k, kl) == 0 && strchr(key + kl, '\x1e') == NULL &&
		    add_name(out, key + kl) != 0) {
			free(k);
			ice_list_clear(out);
			return IDEM_ERR_NOMEM;
		}
	free(k);
	page(out, after, limit);
	return IDEM_OK;
}

/* Whether directories a and b are one, or one lies in the other. */
static int
nested(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;

	return strncmp(a, b, n) == 0 && (la == lb ||
	    (la < lb ? b[la] : a[lb]) == '/');
}

static idem_err
dir_used(ice_tx *tx, const char *dir, int purges, const char *root, int *yes)
{
	const char *key;
	json_t *v;

	(void)root;
	*yes = 0;
	if (purges) {
		json_object_foreach(tx->m->purges, key, v)
			*yes |= nested(key, dir);
	} else {
		json_object_foreach(tx->m->tables, key, v)
			*yes |= nested(json_string_value(json_object_get(v,
			    "dir")), dir);
	}
	return IDEM_OK;
}

static idem_err
purge_add(ice_tx *tx, const char *dir)
{
	return json_object_set_new(tx->m->purges, dir, json_true()) == 0 ?
	    IDEM_OK : IDEM_ERR_NOMEM;
}

static idem_err
purge_next(ice_tx *tx, size_t limit, ice_list *out)
{
	const char *key;
	json_t *v;

	memset(out, 0, sizeof(*out));
	if ((out->names = calloc(limit + 1, sizeof(*out->names))) == NULL)
		return IDEM_ERR_NOMEM;
	json_object_foreach(tx->m->purges, key, v) {
		if (out->n == limit)
			break;
		if (add_name(out, key) != 0) {
			ice_list_clear(out);
			return IDEM_ERR_NOMEM;
		}
	}
	return IDEM_OK;
}

static idem_err
purge_done(ice_tx *tx, const char *dir)
{
	json_object_del(tx->m->purges, dir);
	return IDEM_OK;
}

static const ice_cat_ops mem_ops = {
	ns_create, ns_get, ns_set, ns_drop, ns_busy, ns_list,
	tbl_get, tbl_create, tbl_set, tbl_drop, tbl_list,
	dir_used, purge_add, purge_next, purge_done,
};

/* Takes the catalog's lock for the request.  Returns the view or NULL. */
static ice_tx *
mem_begin(ice_cat *cat, const idem_request *req)
{
	ice_tx *tx = malloc(sizeof(*tx));

	(void)req;
	if (tx == NULL)
		return NULL;
	tx->m = cat->impl;
	pthread_mutex_lock(&tx->m->lock);
	return tx;
}

static void
mem_end(ice_tx *tx)
{
	if (tx == NULL)
		return;
	pthread_mutex_unlock(&tx->m->lock);
	free(tx);
}

static void
mem_free(ice_cat *cat)
{
	mem *m;

	if (cat == NULL)
		return;
	m = cat->impl;
	json_decref(m->ns);
	json_decref(m->tables);
	json_decref(m->purges);
	pthread_mutex_destroy(&m->lock);
	free(m);
	free(cat);
}

ice_cat *
ice_cat_mem_new(void)
{
	ice_cat *cat = calloc(1, sizeof(*cat));
	mem *m = calloc(1, sizeof(*m));

	if (cat == NULL || m == NULL || (m->ns = json_object()) == NULL ||
	    (m->tables = json_object()) == NULL ||
	    (m->purges = json_object()) == NULL) {
		if (m != NULL) {
			json_decref(m->ns);
			json_decref(m->tables);
		}
		free(m);
		free(cat);
		return NULL;
	}
	pthread_mutex_init(&m->lock, NULL);
	cat->ops = &mem_ops;
	cat->impl = m;
	cat->begin = mem_begin;
	cat->end = mem_end;
	cat->free = mem_free;
	return cat;
}

void
ice_list_clear(ice_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof(*l));
}
