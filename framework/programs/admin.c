/*
 * admin.c - idemfcgi-admin: look at, unstick and resolve the idempotency
 * records of a deployment, with the same configuration file as idemfcgi.
 *
 *   stats                      records by state, the oldest in flight
 *   show KEY [--scope S]       one record
 *   release KEY [--scope S] --yes [--owner TOKEN] [--force]
 *                              delete a stuck in-flight reservation
 *   unknown [--limit N]        the records of unknown outcome, oldest
 *                              first
 *   resolve KEY [--scope S] (--commit STATUS [--body FILE]
 *       [--content-type TYPE] | --release) --yes [--owner TOKEN]
 *                              give a record of unknown outcome its
 *                              answer, or delete it so a retry runs
 *   purge                      delete the expired records now
 *
 * Exit status: 0 done; 1 not found or refused (nothing changed); 2 a bad
 * command line or configuration, or a store it cannot reach by nature
 * (memory); 3 the store failed.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "idem_config.h"
#include "idem_log.h"
#include "idem_store_open.h"
#include "idem_store.h"

#ifndef IDEM_SYSCONFDIR
#define IDEM_SYSCONFDIR "/etc"
#endif
#define DEFAULT_CONFIG IDEM_SYSCONFDIR "/idemfcgi/idemfcgi.conf"

/* The longest --content-type. */
#define CONTENT_TYPE_MAX 255

/* The options without a short form. */
enum { OPT_COMMIT = 256, OPT_RELEASE, OPT_BODY, OPT_CONTENT_TYPE,
    OPT_LIMIT };

/* Writes the usage on fp. */
static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: idemfcgi-admin [-c FILE] [--json] COMMAND\n"
	    "\n"
	    "Looks at and unsticks the idempotency records of the MySQL,\n"
	    "PostgreSQL or Redis store that idemfcgi (with the same\n"
	    "configuration file) uses.\n"
	    "\n"
	    "commands:\n"
	    "  stats              records by state, and the oldest in flight\n"
	    "  show KEY           one record: state, owner, times, status\n"
	    "  release KEY --yes  delete a stuck in-flight reservation, so\n"
	    "                     the next retry runs the handler again\n"
	    "  unknown            the records of unknown outcome, the one\n"
	    "                     marked longest ago first\n"
	    "  resolve KEY --commit STATUS --yes\n"
	    "                     store an answer for a record of unknown\n"
	    "                     outcome: its retries get it replayed\n"
	    "  resolve KEY --release --yes\n"
	    "                     delete a record of unknown outcome, so\n"
	    "                     the next retry runs the handler again\n"
	    "  purge              delete the expired records now\n"
	    "\n"
	    "options:\n"
	    "  -c, --config FILE  the configuration (default:\n"
	    "                     $IDEMFCGI_CONFIG, else %s)\n"
	    "  -s, --scope VALUE  the principal the key belongs to, when\n"
	    "                     [idempotency] scope is not none: the user\n"
	    "                     name, or the value of the scope header\n"
	    "  -y, --yes          release, resolve: really do it\n"
	    "  -o, --owner TOKEN  release, resolve: only if this owner still\n"
	    "                     holds it\n"
	    "  -f, --force        release: even if its lease is live\n"
	    "  --commit STATUS    resolve: store this status (100 to 599)\n"
	    "  --body FILE        resolve --commit: the answer's body\n"
	    "  --content-type TYPE\n"
	    "                     resolve --commit --body: its type\n"
	    "                     (default " DEFAULT_CONTENT_TYPE ")\n"
	    "  --release          resolve: delete the record instead\n"
	    "  --limit N          unknown: show at most N records (1 to %d,\n"
	    "                     the default)\n"
	    "  -j, --json         print JSON instead of text\n"
	    "  -h, --help         this text\n"
	    "  -V, --version      the version\n"
	    "\n"
	    "Exit status: 0 done, 1 not found or refused, 2 usage, 3 store\n"
	    "error.  See idemfcgi-admin(8).\n", DEFAULT_CONFIG, UNKNOWN_MAX);
}

/* Writes "idemfcgi-admin: MESSAGE" and a newline on stderr. */
void
admin_complain(const char *fmt, ...)
{
	va_list ap;

	fputs("idemfcgi-admin: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Checks the word count of a command: want arguments after it. */
static int
arity(const char *cmd, int have, int want)
{
	if (have == want)
		return 0;
	admin_complain("%s takes %s", cmd, want == 0 ?
	    "no argument" : "one KEY");
	return -1;
}

/* Reads the options of the command line into *o, leaving optind at the
 * command.  Returns -1 to go on, or the exit status when done (--help,
 * --version) or the options are bad. */
static int
parse_options(int argc, char **argv, options *o)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "scope", required_argument, NULL, 's' },
		{ "owner", required_argument, NULL, 'o' },
		{ "yes", no_argument, NULL, 'y' },
		{ "force", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "commit", required_argument, NULL, OPT_COMMIT },
		{ "release", no_argument, NULL, OPT_RELEASE },
		{ "body", required_argument, NULL, OPT_BODY },
		{ "content-type", required_argument, NULL, OPT_CONTENT_TYPE },
		{ "limit", required_argument, NULL, OPT_LIMIT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:s:o:yfjhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config = optarg; break;
		case 's': o->scope = optarg; break;
		case 'o': o->owner = optarg; break;
		case 'y': o->yes = 1; break;
		case 'f': o->force = 1; break;
		case 'j': o->json = 1; break;
		case OPT_COMMIT: o->commit = optarg; break;
		case OPT_RELEASE: o->release = 1; break;
		case OPT_BODY: o->body = optarg; break;
		case OPT_CONTENT_TYPE: o->content_type = optarg; break;
		case OPT_LIMIT: o->limit = optarg; break;
		case 'h': usage(stdout); return EXIT_DONE;
		case 'V':
			printf("idemfcgi-admin %s\n", PACKAGE_VERSION);
			return EXIT_DONE;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	return -1;
}

/* Reads the decimal number text, from lo to hi, into *v.  Returns 0, or
 * -1 when it is not one. */
static int
number(const char *text, unsigned long lo, unsigned long hi,
    unsigned long *v)
{
	char *end;

	if (*text < '0' || *text > '9')
		return -1;
	errno = 0;
	*v = strtoul(text, &end, 10);
	return errno != 0 || *end != '\0' || *v < lo || *v > hi ? -1 : 0;
}

/* Whether type can be a Content-Type value: visible ASCII and spaces, a
 * "/" in it, at most CONTENT_TYPE_MAX bytes. */
static int
content_type_ok(const char *type)
{
	const char *p;

	if (strlen(type) > CONTENT_TYPE_MAX || strchr(type, '/') == NULL ||
	    *type == ' ')
		return 0;
	for (p = type; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			return 0;
	return 1;
}

/* Checks resolve's options, and reads --commit's status into o.  Returns
 * 0, or EXIT_USAGE after saying why. */
static int
check_resolve(options *o)
{
	unsigned long status;

	if ((o->commit != NULL) == o->release) {
		admin_complain("resolve takes either --commit STATUS (store that "
		    "answer) or --release (delete the record)");
		return EXIT_USAGE;
	}
	if (o->release && (o->body != NULL || o->content_type != NULL)) {
		admin_complain("--body and --content-type go with --commit only");
		return EXIT_USAGE;
	}
	if (o->release)
		return 0;
	if (number(o->commit, 100, 599, &status) < 0) {
		admin_complain("--commit %s: the status must be a number from 100 to "
		    "599", o->commit);
		return EXIT_USAGE;
	}
	o->status = (int)status;
	if (o->content_type != NULL && o->body == NULL) {
		admin_complain("--content-type goes with --body only (an answer "
		    "without a body has no Content-Type)");
		return EXIT_USAGE;
	}
	if (o->body != NULL && (o->status < 200 || o->status == 204 ||
	    o->status == 304)) {
		admin_complain("status %d carries no body: leave out --body",
		    o->status);
		return EXIT_USAGE;
	}
	if (o->content_type != NULL && !content_type_ok(o->content_type)) {
		admin_complain("--content-type \"%s\" is not a media type "
		    "(type/subtype, visible ASCII, at most %d bytes)",
		    o->content_type, CONTENT_TYPE_MAX);
		return EXIT_USAGE;
	}
	return 0;
}

/* Checks that cmd is a command, with its nargs arguments and only the
 * options it takes, and reads their numbers into o.  Returns 0, or
 * EXIT_USAGE. */
static int
check_command(const char *cmd, int nargs, options *o)
{
	int resolve = strcmp(cmd, "resolve") == 0;

	if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "purge") == 0 ||
	    strcmp(cmd, "unknown") == 0) {
		if (arity(cmd, nargs, 0) < 0)
			return EXIT_USAGE;
	} else if (strcmp(cmd, "show") == 0 || strcmp(cmd, "release") == 0 ||
	    resolve) {
		if (arity(cmd, nargs, 1) < 0)
			return EXIT_USAGE;
	} else {
		admin_complain("unknown command \"%s\" (stats, "
		    "show, release, unknown, resolve, purge)", cmd);
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "release") != 0 && !resolve && (o->yes ||
	    o->owner != NULL)) {
		admin_complain("--yes and --owner go with release and resolve only");
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "release") != 0 && o->force) {
		admin_complain("--force goes with release only");
		return EXIT_USAGE;
	}
	if (!resolve && (o->commit != NULL || o->release || o->body != NULL ||
	    o->content_type != NULL)) {
		admin_complain("--commit, --release, --body and --content-type go "
		    "with resolve only");
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "unknown") != 0 && o->limit != NULL) {
		admin_complain("--limit goes with unknown only");
		return EXIT_USAGE;
	}
	o->max = UNKNOWN_MAX;
	if (o->limit != NULL && number(o->limit, 1, UNKNOWN_MAX, &o->max) < 0) {
		admin_complain("--limit %s: give a number from 1 to %d", o->limit,
		    UNKNOWN_MAX);
		return EXIT_USAGE;
	}
	return resolve ? check_resolve(o) : 0;
}

/* Loads the configuration of o (the default one when it names none) into
 * *cfg and opens its store (MySQL, PostgreSQL or Redis) into *s.  Returns 0, or
 * the exit status with nothing left to free. */
static int
open_store(options *o, idem_config **cfg, idem_store **s)
{
	if (o->config == NULL || *o->config == '\0')
		o->config = DEFAULT_CONFIG;
	if (idem_config_load(o->config, cfg) != IDEM_OK)
		return EXIT_USAGE;
	/* the pool's own notices are not this tool's output */
	idem_log_set_level((*cfg)->server.log_level > IDEM_LOG_WARN ?
	    (*cfg)->server.log_level : IDEM_LOG_WARN);
	if (!(*cfg)->idem.enabled) {
		admin_complain("%s has [idempotency] enabled = "
		    "false: there are no records", o->config);
		idem_config_free(*cfg);
		return EXIT_USAGE;
	}
	if ((*cfg)->idem.store == IDEM_STORE_MEMORY) {
		admin_complain("%s uses store = memory: its "
		    "records live inside the idemfcgi worker process, and no "
		    "other program can read or change them.  Watch them with "
		    "the metrics route ([metrics] enabled = true: "
		    "idemfcgi_memory_store_entries, ..._evictions_total); "
		    "expired records go every cleanup-interval; restarting "
		    "idemfcgi empties the store.  Use a store with a "
		    "database (%s) to administer records.", o->config,
		    idem_config_db_stores());
		idem_config_free(*cfg);
		return EXIT_USAGE;
	}
	if (idem_store_open(*cfg, 1, s) != IDEM_OK) {
		admin_complain("cannot use the store of %s "
		    "(see above)", o->config);
		idem_config_free(*cfg);
		return EXIT_STORE;
	}
	return 0;
}

/* Runs the checked command cmd, with its KEY argument key (NULL for stats,
 * unknown and purge).  Returns its exit status. */
static int
run_command(const idem_config *cfg, const options *o, idem_store *s,
    const char *cmd, const char *key)
{
	if (strcmp(cmd, "stats") == 0)
		return admin_stats(cfg, o, s);
	if (strcmp(cmd, "show") == 0)
		return admin_show(cfg, o, s, key);
	if (strcmp(cmd, "release") == 0)
		return admin_release(cfg, o, s, key);
	if (strcmp(cmd, "unknown") == 0)
		return admin_unknown(o, s);
	if (strcmp(cmd, "resolve") == 0)
		return admin_resolve(cfg, o, s, key);
	return admin_purge(o, s);
}

/* Checks the command line, opens the store and runs the command.  Returns
 * the exit status (see the top of this file). */
int
main(int argc, char **argv)
{
	options o = { .config = getenv("IDEMFCGI_CONFIG") };
	idem_config *cfg;
	idem_store *s = NULL;
	const char *cmd;
	int rc, nargs;

	idem_log_set_name("idemfcgi-admin");
	if ((rc = parse_options(argc, argv, &o)) >= 0)
		return rc;
	if (optind >= argc) {
		admin_complain("no command");
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[optind];
	nargs = argc - optind - 1;
	if ((rc = check_command(cmd, nargs, &o)) != 0)
		return rc;
	if ((rc = open_store(&o, &cfg, &s)) != 0)
		return rc;
	rc = run_command(cfg, &o, s, cmd, nargs == 1 ? argv[optind + 1] :
	    NULL);
	if (rc == EXIT_STORE)
		admin_complain("the store failed (see above)");
	idem_store_close(s);
	idem_config_free(cfg);
	return rc;
}
