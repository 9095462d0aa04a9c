/*
 * admin.h - what the two halves of idemfcgi-admin share: the command line
 * (admin.c) and the commands over the store (admin_records.c).
 */
#ifndef IDEM_ADMIN_H
#define IDEM_ADMIN_H

#include <stdint.h>

#include "idem_config.h"
#include "idem_store.h"

/* The exit statuses (see the top of admin.c). */
enum { EXIT_DONE = 0, EXIT_REFUSED = 1, EXIT_USAGE = 2, EXIT_STORE = 3 };

/* The most records purge deletes in one statement. */
#define PURGE_BATCH 1000
/* The most records of unknown outcome one listing shows. */
#define UNKNOWN_MAX 1000
/* The Content-Type of an answer given with resolve --commit --body. */
#define DEFAULT_CONTENT_TYPE "application/json"

typedef struct options {
	const char *config;
	const char *scope;        /* --scope, or NULL */
	const char *owner;        /* --owner, or NULL */
	int yes, force, json;
	const char *commit;       /* resolve --commit STATUS, or NULL */
	int release;              /* resolve --release */
	const char *body;         /* resolve --body FILE, or NULL */
	const char *content_type; /* resolve --content-type, or NULL */
	const char *limit;        /* unknown --limit N, or NULL */
	int status;               /* --commit's, once checked */
	unsigned long max;        /* --limit's, once checked */
} options;

/* Writes "idemfcgi-admin: MESSAGE" and a newline on stderr. */
void admin_complain(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The commands, each on the open store s with the checked options o (key:
 * the command's KEY, borrowed).  Each returns the exit status. */
int admin_stats(const idem_config *cfg, const options *o, idem_store *s);
int admin_show(const idem_config *cfg, const options *o, idem_store *s,
    const char *key);
int admin_release(const idem_config *cfg, const options *o, idem_store *s,
    const char *key);
int admin_unknown(const options *o, idem_store *s);
int admin_resolve(const idem_config *cfg, const options *o, idem_store *s,
    const char *key);
int admin_purge(const options *o, idem_store *s);

#endif
