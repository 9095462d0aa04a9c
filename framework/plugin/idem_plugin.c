/*
 * idem_plugin.c - the plugin loader: opens each plugin, checks its ABI
 * and runs its hooks (the API the hooks call is in idem_app.c).
 */
#include "config.h"

#include <ctype.h>
#include <stddef.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idemfcgi_db.h"
#ifdef HAVE_MYSQL
#include "idemfcgi_mysql.h"
#endif
#include "idem_log.h"
#include "idem_store_tx.h"
#include "idem_plugin.h"
#include "idem_store.h"

/*
 * Every function of the plugin API (idemfcgi.h, idemfcgi_db.h,
 * idemfcgi_mysql.h).  A
 * program links an object of libidem only when something references it,
 * and the plugins a program loads must find the whole API in the program
 * itself (it exports it with -export-dynamic), so that their calls reach
 * the program's own copy rather than that of libidemfcgi.so, whose
 * internals may have another layout.  Referenced here, in the loader, they
 * are in every program that loads plugins; tests/exports/check-exports.sh
 * checks the server's exports.
 */
static void (*const plugin_api[])(void) __attribute__((used)) = {
	(void (*)(void))idem_app_db,
	(void (*)(void))idem_app_db_dialect,
	(void (*)(void))idem_app_db_exec,
	(void (*)(void))idem_app_error_format,
	(void (*)(void))idem_app_has_key_secret,
	(void (*)(void))idem_app_is_check,
	(void (*)(void))idem_app_schema,
	(void (*)(void))idem_config_bool,
	(void (*)(void))idem_config_duration,
	(void (*)(void))idem_config_int,
	(void (*)(void))idem_config_size,
	(void (*)(void))idem_config_string,
	(void (*)(void))idem_db_affected,
	(void (*)(void))idem_db_fetch,
	(void (*)(void))idem_db_get,
	(void (*)(void))idem_db_insert_id,
	(void (*)(void))idem_db_one,
	(void (*)(void))idem_db_put,
	(void (*)(void))idem_db_run,
	(void (*)(void))idem_log,
	(void (*)(void))idem_request_body,
	(void (*)(void))idem_request_checkpoint,
	(void (*)(void))idem_request_db,
	(void (*)(void))idem_request_downstream_key,
	(void (*)(void))idem_request_header,
	(void (*)(void))idem_request_id,
	(void (*)(void))idem_request_json,
	(void (*)(void))idem_request_method,
	(void (*)(void))idem_request_param,
	(void (*)(void))idem_request_path,
	(void (*)(void))idem_request_phase,
	(void (*)(void))idem_request_progress,
	(void (*)(void))idem_request_query,
	(void (*)(void))idem_request_remote_user,
	(void (*)(void))idem_request_route,
	(void (*)(void))idem_response_get_status,
	(void (*)(void))idem_response_header,
	(void (*)(void))idem_response_json,
	(void (*)(void))idem_response_problem,
	(void (*)(void))idem_response_status,
	(void (*)(void))idem_response_write,
	(void (*)(void))idem_route_add,
	(void (*)(void))idem_route_add_tx,
	(void (*)(void))idem_route_describe,
	(void (*)(void))idem_route_error_format,
	(void (*)(void))idem_route_lifetime,
	(void (*)(void))idem_route_reconcile,
	(void (*)(void))idem_route_set,
	(void (*)(void))idem_strerror,
#ifdef HAVE_MYSQL
	/* the raw MySQL API (idemfcgi_mysql.h) */
	(void (*)(void))idem_app_mysql_exec,
	(void (*)(void))idem_app_mysql_pool,
	(void (*)(void))idem_app_uses_mysql,
	(void (*)(void))idem_mysql_affected,
	(void (*)(void))idem_mysql_check,
	(void (*)(void))idem_mysql_fetch,
	(void (*)(void))idem_mysql_get,
	(void (*)(void))idem_mysql_insert_id,
	(void (*)(void))idem_mysql_one,
	(void (*)(void))idem_mysql_put,
	(void (*)(void))idem_mysql_run,
	(void (*)(void))idem_mysql_stmt,
	(void (*)(void))idem_request_tx,
#endif
};

/* A plugin name is a config section name: [a-z0-9_-], 1..32 bytes. */
static int
name_ok(const char *s)
{
	size_t n;

	if (s == NULL)
		return 0;
	for (n = 0; s[n] != '\0'; n++)
		if (n >= 32 || (!islower((unsigned char)s[n]) &&
		    !isdigit((unsigned char)s[n]) && s[n] != '_' && s[n] != '-'))
			return 0;
	return n > 0;
}

/* What to add to dlopen's error why: in a build without MySQL, a plugin
 * that needs the raw MySQL API is told so ("" otherwise). */
static const char *
raw_api_hint(const char *why)
{
#ifdef HAVE_MYSQL
	(void)why;
#else
	const char *sym;

	if (why != NULL && (sym = strstr(why, "undefined symbol: ")) != NULL &&
	    (strncmp(sym + 18, "idem_mysql_", 11) == 0 ||
	    strncmp(sym + 18, "idem_app_mysql_", 15) == 0 ||
	    strncmp(sym + 18, "idem_app_uses_mysql", 19) == 0 ||
	    strncmp(sym + 18, "idem_request_tx", 15) == 0))
		return " (the plugin uses the raw MySQL API, idemfcgi_mysql.h, "
		    "which this idemfcgi has not: it was built ./configure "
		    "--without-mysql; write the plugin against idemfcgi_db.h)";
#endif
	return "";
}

/* Room given to idem_plugin_init: an idem_plugin of a later idemfcgi.h,
 * with hooks appended, still fits. */
#define PLUGIN_ROOM 512
/* The size of the ABI 2 idem_plugin, the smallest accepted. */
#define PLUGIN_BASE_SIZE (offsetof(idem_plugin, teardown) + \
	sizeof(void (*)(void *)))

/* Checks the struct_size a plugin reported and that it sets no hook this
 * server does not know.  Returns IDEM_OK or IDEM_ERR_PLUGIN (logged). */
static idem_err
check_size(const char *path, const unsigned char *room)
{
	const idem_plugin *p = (const idem_plugin *)room;
	size_t i;

	if (p->struct_size < PLUGIN_BASE_SIZE || p->struct_size > PLUGIN_ROOM) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: struct_size %u is not "
		    "the size of an idem_plugin: set p->struct_size = "
		    "sizeof(*p) in %s", path, p->struct_size,
		    IDEM_PLUGIN_SYMBOL);
		return IDEM_ERR_PLUGIN;
	}
	for (i = sizeof(*p); i < p->struct_size; i++)
		if (room[i] != 0) {
			idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: it sets hooks "
			    "of a later idemfcgi than this one: upgrade "
			    "idemfcgi, or rebuild the plugin against this "
			    "idemfcgi.h", path);
			return IDEM_ERR_PLUGIN;
		}
	return IDEM_OK;
}

idem_err
idem_plugin_open(const char *path, idem_loaded_plugin *lp)
{
	int (*init)(idem_plugin *);
	union {
		idem_plugin p;
		unsigned char b[PLUGIN_ROOM];
	} room;
	void *sym;
	int rc;

	memset(lp, 0, sizeof(*lp));
	memset(&room, 0, sizeof(room));
	if ((lp->path = strdup(path)) == NULL)
		return IDEM_ERR_NOMEM;
	lp->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lp->dl == NULL) {
		const char *why = dlerror();

		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: cannot load: %s%s",
		    path, why, raw_api_hint(why));
		return IDEM_ERR_PLUGIN;
	}
	dlerror();
	sym = dlsym(lp->dl, IDEM_PLUGIN_SYMBOL);
	if (sym == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: no symbol %s: not an "
		    "idemfcgi plugin", path, IDEM_PLUGIN_SYMBOL);
		return IDEM_ERR_PLUGIN;
	}
	/* POSIX guarantees this conversion for dlsym results */
	*(void **)&init = sym;
	rc = init(&room.p);
	if (rc != 0 && room.p.abi_version == 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: %s returned %d", path,
		    IDEM_PLUGIN_SYMBOL, rc);
		return IDEM_ERR_PLUGIN;
	}
	if (room.p.abi_version != IDEM_ABI_VERSION) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: built for plugin ABI "
		    "version %u, this idemfcgi has version %u: rebuild the "
		    "plugin against this idemfcgi.h", path,
		    room.p.abi_version, IDEM_ABI_VERSION);
		return IDEM_ERR_PLUGIN;
	}
	if (rc != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: %s returned %d", path,
		    IDEM_PLUGIN_SYMBOL, rc);
		return IDEM_ERR_PLUGIN;
	}
	if (check_size(path, room.b) != IDEM_OK)
		return IDEM_ERR_PLUGIN;
	lp->desc = room.p;
	if (!name_ok(lp->desc.name)) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: its name must be 1 to "
		    "32 of [a-z0-9_-]", path);
		return IDEM_ERR_PLUGIN;
	}
	if (lp->desc.setup == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: it has no setup "
		    "function", path);
		return IDEM_ERR_PLUGIN;
	}
	return IDEM_OK;
}

/* Resolves a plugins entry to a path for dlopen (caller frees). */
static char *
resolve(const char *entry, const char *cfg_path, const char *plugin_dir)
{
	char *dir, *copy, *out;
	size_t len;

	if (entry[0] == '/')
		return strdup(entry);
	if (strchr(entry, '/') == NULL) {
		len = strlen(plugin_dir) + strlen(entry) + 2;
		if ((out = malloc(len)) != NULL)
			snprintf(out, len, "%s/%s", plugin_dir, entry);
		return out;
	}
	if ((copy = strdup(cfg_path)) == NULL)
		return NULL;
	dir = dirname(copy);
	len = strlen(dir) + strlen(entry) + 2;
	if ((out = malloc(len)) != NULL)
		snprintf(out, len, "%s/%s", dir, entry);
	free(copy);
	return out;
}

/* Fills the context a plugin's hooks get. */
static void
app_init(idem_app *app, const idem_plugins *ps, idem_config *cfg,
    idem_router *router, idem_loaded_plugin *lp, int check)
{
	memset(app, 0, sizeof(*app));
	app->maker = ps->maker;
	app->cfg = cfg;
	app->router = router;
	app->name = lp->desc.name;
	app->path = lp->path;
	app->self = lp;
	app->check = check;
}

idem_err
idem_plugins_load(idem_config *cfg, idem_router *router,
    const char *plugin_dir, const idem_db_maker *maker, int check, int all,
    idem_plugins **out)
{
	idem_plugins *ps;
	idem_err err = IDEM_OK, first = IDEM_OK;
	size_t i, j, nnames = 0;
	int unopened = 0;

	if ((ps = calloc(1, sizeof(*ps))) == NULL ||
	    (ps->items = calloc(cfg->server.nplugins + 1, sizeof(*ps->items))) == NULL ||
	    (ps->names = calloc(cfg->server.nplugins + 1, sizeof(char *))) == NULL) {
		idem_plugins_free(ps);
		return IDEM_ERR_NOMEM;
	}
	ps->maker = maker;
	for (i = 0; i < cfg->server.nplugins; i++) {
		idem_loaded_plugin *lp = &ps->items[i];
		idem_app app;
		char *path = resolve(cfg->server.plugins[i], cfg->path, plugin_dir);

		if (first != IDEM_OK && !all)
			break;
		if (path == NULL) {
			first = IDEM_ERR_NOMEM;
			break;
		}
		err = idem_plugin_open(path, lp);
		free(path);
		ps->n = i + 1;
		if (err != IDEM_OK) {
			unopened = 1;
			ps->incomplete = 1;
			first = first != IDEM_OK ? first : err;
			continue;
		}
		if (idem_config_is_core_section(lp->desc.name)) {
			idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: the name \"%s\" "
			    "is reserved", lp->path, lp->desc.name);
			first = first != IDEM_OK ? first : IDEM_ERR_PLUGIN;
			ps->incomplete = 1;
			continue;
		}
		for (j = 0; j < i; j++)
			if (ps->items[j].desc.name != NULL &&
			    strcmp(ps->items[j].desc.name, lp->desc.name) == 0)
				break;
		if (j < i) {
			idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: the name \"%s\" "
			    "is taken by %s", lp->path, lp->desc.name,
			    ps->items[j].path);
			first = first != IDEM_OK ? first : IDEM_ERR_PLUGIN;
			ps->incomplete = 1;
			continue;
		}
		ps->names[nnames++] = lp->desc.name;
		app_init(&app, ps, cfg, router, lp, check);
		if ((err = lp->desc.setup(&app, &lp->data)) != IDEM_OK) {
			idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: setup failed: %s",
			    lp->path, idem_strerror(err));
			err = err == IDEM_ERR_CONFIG ? err : IDEM_ERR_PLUGIN;
			first = first != IDEM_OK ? first : err;
			ps->incomplete = 1;
			/* its keys are not judged: setup may have stopped
			 * before reading them */
			for (j = 0; j < cfg->nentries; j++)
				if (strcmp(cfg->entries[j].section,
				    lp->desc.name) == 0)
					cfg->entries[j].used = 1;
			continue;
		}
		lp->set_up = 1;
		idem_log(NULL, IDEM_LOG_DEBUG, "plugin %s loaded as [%s]",
		    lp->path, lp->desc.name);
	}
	if ((first == IDEM_OK || all) && first != IDEM_ERR_NOMEM) {
		if (!unopened)
			err = idem_config_check_unused(cfg, ps->names);
		else if (cfg->nentries > 0) {
			idem_log(NULL, IDEM_LOG_WARN, "%s: the keys of plugin "
			    "sections are not checked: a plugin did not load",
			    cfg->path);
			err = IDEM_OK;
		}
		first = first != IDEM_OK ? first : err;
	}
	if (first != IDEM_OK && !all) {
		idem_plugins_free(ps);
		return first;
	}
	*out = ps;
	return first;
}

idem_err
idem_plugins_deploy(idem_plugins *ps, idem_config *cfg, idem_router *router)
{
	idem_err err;
	size_t i;

	for (i = 0; i < ps->n; i++) {
		idem_loaded_plugin *lp = &ps->items[i];
		idem_app app;

		if (lp->desc.deploy == NULL)
			continue;
		app_init(&app, ps, cfg, router, lp, 0);
		app.deploying = 1;
		if ((err = lp->desc.deploy(&app, lp->data)) != IDEM_OK) {
			idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: deploy failed: "
			    "%s", lp->path, idem_strerror(err));
			return err == IDEM_ERR_CONFIG ? err : IDEM_ERR_PLUGIN;
		}
		idem_log(NULL, IDEM_LOG_DEBUG, "plugin %s deployed", lp->path);
	}
	return IDEM_OK;
}

void
idem_plugins_free(idem_plugins *ps)
{
	size_t i;

	if (ps == NULL)
		return;
	for (i = ps->n; i-- > 0; ) {
		idem_loaded_plugin *lp = &ps->items[i];
		if (lp->set_up && lp->desc.teardown != NULL)
			lp->desc.teardown(lp->data);
		idem_db_free(lp->db);
		free(lp->error_type);
		json_decref(lp->error_schema);
		/* keep the code mapped: a route may still point into it */
		free(lp->path);
	}
	free(ps->items);
	free(ps->names);
	free(ps);
}
