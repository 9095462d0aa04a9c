/*
 * main.c - the idemfcgi program: options, config, plugins, serve.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idem_builtin.h"
#include "idem_log.h"
#include "idem_master.h"
#include "idem_openapi.h"
#include "idem_server.h"
#include "idem_service.h"
#include "idem_systemd.h"

#ifndef IDEM_SYSCONFDIR
#define IDEM_SYSCONFDIR "/etc"
#endif
#ifndef IDEM_PLUGINDIR
#define IDEM_PLUGINDIR "/usr/lib/idemfcgi"
#endif

#define DEFAULT_CONFIG IDEM_SYSCONFDIR "/idemfcgi/idemfcgi.conf"

static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: idemfcgi [-c FILE] [--check [--strict] | --openapi]\n"
	    "\n"
	    "A FastCGI application server that makes mutation handlers safe\n"
	    "to retry with Idempotency-Key.\n"
	    "\n"
	    "  -c, --config FILE  the configuration file (default: $IDEMFCGI_CONFIG,\n"
	    "                     else %s)\n"
	    "  -t, --check        check the configuration and plugins, then exit:\n"
	    "                     0 when good, 1 with every problem on stderr\n"
	    "      --strict       with --check: a store's database that cannot\n"
	    "                     be reached is an error (1), not a warning\n"
	    "      --openapi      write the OpenAPI 3.1 document of the routes the\n"
	    "                     plugins register (JSON, on stdout), then exit\n"
	    "  -h, --help         this text\n"
	    "  -V, --version      the version\n"
	    "\n"
	    "Plugins named without a '/' are looked up in %s.\n"
	    "See idemfcgi(8) and idemfcgi.conf(5).\n",
	    DEFAULT_CONFIG, IDEM_PLUGINDIR);
}

/* --check: every stage of the file that can run (the core keys, the
 * plugins and their keys, the built-in routes, the store), each problem
 * reported.  Returns the exit status: 0 good, 1 with problems. */
static int
check_all(const char *path, int strict)
{
	idem_config *cfg = NULL;
	idem_service *svc;
	idem_err err = idem_config_load_all(path, &cfg);
	size_t i, builtin = 0;
	const char *db;
	int aside;

	if (cfg == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: not checked", path);
		return 1;
	}
	if (err == IDEM_OK) {
		idem_log_set_level(cfg->server.log_level);
		idem_log_set_format(cfg->server.log_json ? IDEM_LOG_JSON :
		    IDEM_LOG_TEXT);
	}
	/* a database not up yet is a warning, as idemfcgi would start */
	cfg->store_may_wait = 1;
	if (idem_service_check_all(cfg, IDEM_PLUGINDIR, &svc) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: check failed: every problem "
		    "found is above", path);
		return 1;
	}
	for (i = 0; i < idem_router_count(svc->router); i++)
		builtin += strcmp(idem_router_at(svc->router, i)->owner,
		    IDEM_BUILTIN_OWNER) == 0;
	aside = svc->cfg->store_aside;
	db = svc->cfg->idem.store == IDEM_STORE_POSTGRES ? "PostgreSQL" :
	    svc->cfg->idem.store == IDEM_STORE_REDIS ? "Redis" : "MySQL";
	if (aside && strict) {
		fprintf(stderr, "%s: the %s database cannot be reached "
		    "(--strict)\n", path, db);
		idem_service_free(svc);
		return 1;
	}
	printf("%s: configuration OK (%zu route(s) of plugins, %zu built in)%s%s%s"
	    "\n", path, idem_router_count(svc->router) - builtin, builtin,
	    aside ? "; warning: the " : "", aside ? db : "", aside ? " database "
	    "cannot be reached (keyed routes would answer 503 until it can be; "
	    "--strict makes this an error)" : "");
	idem_service_free(svc);
	return 0;
}

/* --openapi: sets the plugins up as the check of a start does, then
 * writes the OpenAPI document of their routes to stdout.  Returns the
 * exit status: 0, or 1 when the config or a plugin is refused. */
static int
openapi(const char *path)
{
	idem_config *cfg;
	idem_service *svc;
	json_t *doc;
	int rc = 0;

	if (idem_config_load(path, &cfg) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: no document", path);
		return 1;
	}
	idem_log_set_level(cfg->server.log_level);
	idem_log_set_format(cfg->server.log_json ? IDEM_LOG_JSON : IDEM_LOG_TEXT);
	/* the document does not need the database */
	cfg->store_may_wait = 1;
	if (idem_service_check(cfg, IDEM_PLUGINDIR, 0, &svc) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: no document", path);
		return 1;
	}
	doc = idem_openapi_document(svc->cfg, svc->router, svc->mw != NULL);
	if (doc == NULL || json_dumpf(doc, stdout, JSON_INDENT(2)) != 0 ||
	    fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: the document could not be "
		    "written", path);
		rc = 1;
	}
	json_decref(doc);
	idem_service_free(svc);
	return rc;
}

/* Whether the options given go together (--strict with --check only,
 * --openapi without --check); when not, says why.  Returns 1 or 0. */
static int
options_agree(int check, int strict, int doc)
{
	const char *why = strict && !check ? "--strict goes with --check" :
	    doc && check ? "--openapi and --check go apart" : NULL;

	if (why == NULL)
		return 1;
	fprintf(stderr, "idemfcgi: %s\n", why);
	usage(stderr);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 't' },
		{ "strict", no_argument, NULL, 's' },
		{ "openapi", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	const char *path = getenv("IDEMFCGI_CONFIG");
	idem_config *cfg;
	idem_service *svc;
	char sock[128] = "";
	int c, check = 0, strict = 0, doc = 0, fd, rc;

	while ((c = getopt_long(argc, argv, "c:thV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 't':
			check = 1;
			break;
		case 's':
			strict = 1;
			break;
		case 'o':
			doc = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("idemfcgi %s (plugin ABI %u)\n", PACKAGE_VERSION,
			    IDEM_ABI_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (path == NULL || *path == '\0')
		path = DEFAULT_CONFIG;
	if (!options_agree(check, strict, doc))
		return 2;
	if (optind < argc) {
		fprintf(stderr, "idemfcgi: unexpected argument \"%s\"\n",
		    argv[optind]);
		usage(stderr);
		return 2;
	}
	/* before any thread exists (plugins and stores start some): the
	 * signals are taken by sigwait, never delivered to a worker */
	idem_server_block_signals();
	if (check)
		return check_all(path, strict);
	if (doc)
		return openapi(path);
	if (idem_config_load(path, &cfg) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: not started", path);
		return 1;
	}
	idem_log_set_level(cfg->server.log_level);
	idem_log_set_format(cfg->server.log_json ? IDEM_LOG_JSON : IDEM_LOG_TEXT);
	/* a database not up yet: serve anyway, the store set aside */
	cfg->store_may_wait = 1;
	if (idem_service_check(cfg, IDEM_PLUGINDIR, 1, &svc) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: not started", path);
		return 1;
	}
	/* socket activation: the socket systemd holds wins over listen */
	if ((fd = idem_sd_listen_fd()) >= 0)
		fd = idem_server_adopt(svc->cfg, fd);
	else if (fd == -1 && (fd = idem_server_listen(svc->cfg)) >= 0 &&
	    svc->cfg->server.listen != NULL && strncmp(svc->cfg->server.listen, "unix:", 5)
	    == 0)
		snprintf(sock, sizeof(sock), "%s", svc->cfg->server.listen + 5);
	if (fd < 0) {
		idem_service_free(svc);
		return 1;
	}
	/* the check is done: the master keeps only the config, with no
	 * thread and no connection left to fork */
	cfg = idem_service_release_config(svc);
	idem_service_free(svc);
	rc = idem_master_run(path, cfg, fd, IDEM_PLUGINDIR);
	close(fd);
	if (sock[0] != '\0')
		unlink(sock);
	return rc;
}
