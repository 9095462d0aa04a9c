/*
 * idem_plugin.h - loading handler plugins (shared objects) and running
 * their hooks (the lifecycle of idemfcgi.h).
 *
 * Each path of [server] plugins is opened with dlopen(RTLD_NOW), its
 * idem_plugin_init is called, the ABI version and struct size it reports
 * are checked, and its setup registers routes and reads its config
 * section.  Any failure stops start-up with a message that names the
 * file.
 */
#ifndef IDEM_PLUGIN_H
#define IDEM_PLUGIN_H

#include "idemfcgi.h"
#include "idem_config.h"
#include "idem_router.h"
#include "idem_store_tx.h"

typedef struct idem_loaded_plugin {
	char *path;          /* owned: the file as resolved */
	void *dl;            /* dlopen handle */
	idem_plugin desc;    /* what idem_plugin_init filled */
	void *data;          /* from setup, for teardown */
	int set_up;          /* setup succeeded */
	struct idem_db *db;  /* owned: its pool (idem_app_db,
	                      * idem_app_mysql_pool), or NULL */
	/* its routes' error format (idem_app_error_format), or all NULL */
	idem_error_fn error_fn;
	void *error_data;    /* borrowed from the plugin */
	char *error_type;    /* owned */
	json_t *error_schema; /* owned reference */
} idem_loaded_plugin;

typedef struct idem_plugins {
	idem_loaded_plugin *items;   /* owned */
	size_t n;
	const char **names;          /* owned array, NULL-terminated */
	int incomplete;              /* a plugin could not be opened or set
	                              * up (--check goes on): its routes are
	                              * missing */
	const idem_db_maker *maker;  /* borrowed: of plugins' pools, NULL:
	                              * none (idem_store_db_maker) */
} idem_plugins;

/* The context a plugin's setup gets (see idemfcgi.h). */
struct idem_app {
	idem_config *cfg;            /* borrowed */
	idem_router *router;         /* borrowed */
	const char *name;            /* borrowed: the plugin's section */
	const char *path;            /* borrowed: the plugin's file */
	idem_loaded_plugin *self;    /* borrowed: where its pool is kept */
	int check;                   /* the master's check (idem_app_is_check) */
	int deploying;               /* in deploy: no routes, no pool */
	const idem_db_maker *maker;  /* borrowed: of its pool (NULL: the
	                              * store has none, or MySQL's) */
};

/* Refuses what only setup may do when app is deploy's (what names the
 * call).  Returns 0 when allowed, else -1 (logged). */
int idem_app_setup_only(const idem_app *app, const char *what);

/*
 * Loads every plugin of cfg->server.plugins, in order, and runs its setup, which
 * registers routes in router; check says whether this is the master's
 * check (idem_app_is_check).  Then refuses config keys no plugin read.  A
 * relative path is taken from the directory of the config file, a bare
 * file name from plugin_dir.  maker makes the plugins' pools of the
 * store's database (NULL: the store has none, or they are MySQL's).  cfg,
 * router and maker are borrowed and must outlive *out.  Returns IDEM_OK with *out (caller frees with idem_plugins_free),
 * or IDEM_ERR_PLUGIN / IDEM_ERR_CONFIG after logging.  With all (for
 * --check) a plugin that fails is logged and the next one loaded all the
 * same; the keys of a plugin whose setup failed are not judged (it may
 * have stopped before reading them), and no section is called unknown
 * when a plugin could not be opened (its name is unknown); *out is then
 * set even on failure.
 */
idem_err idem_plugins_load(idem_config *cfg, idem_router *router,
    const char *plugin_dir, const idem_db_maker *maker, int check, int all,
    idem_plugins **out);

/*
 * Runs each plugin's deploy hook, in order, with the data of its setup.
 * Returns IDEM_OK, or IDEM_ERR_PLUGIN / IDEM_ERR_CONFIG at the first that
 * failed (logged with the plugin's file).
 */
idem_err idem_plugins_deploy(idem_plugins *plugins, idem_config *cfg,
    idem_router *router);

/* Calls every teardown (in reverse order) and frees each plugin's pool; the
 * code stays mapped (a route may still point into it).  NULL is fine. */
void idem_plugins_free(idem_plugins *plugins);

/*
 * Loads one plugin file into *lp (for the loader and the tests).  Returns
 * IDEM_OK or IDEM_ERR_PLUGIN with the reason logged as "plugin PATH: ...".
 */
idem_err idem_plugin_open(const char *path, idem_loaded_plugin *lp);

#endif
