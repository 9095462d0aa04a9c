/*
 * idem_log.h - one line per event on stderr (the web server keeps it).
 *
 * log-format = text gives lines such as
 *   2026-11-30T07:25:05.123Z idemfcgi[42] info req=9f1c... route="POST
 *   /accounts/{id}/deposit" key=3fa4...: message
 * and log-format = json one object per line:
 *   {"time":"...","level":"info","host":"node1","pid":42,"request_id":"...",
 *    "route":"POST /accounts/{id}/deposit","key_hash":"3fa4...",
 *    "msg":"..."}
 * plus "event" and "owner" on the lines an operator follows a key by
 * (takeover, fenced, released, store_unavailable, ...).  The key itself is
 * never logged, only its hash (idem_key_hash), which also covers the scope.
 * Every line is one write(2), so lines of concurrent threads and processes
 * never interleave.
 */
#ifndef IDEM_LOG_H
#define IDEM_LOG_H

#include <stdarg.h>

#include "idemfcgi.h"

typedef enum idem_log_format {
	IDEM_LOG_TEXT = 0,
	IDEM_LOG_JSON
} idem_log_format;

/*
 * The names of the levels (idem_log_level, idemfcgi.h) and of the formats,
 * as [server] log-level and log-format take them and as every line shows
 * its level: one table each, indexed by the enum.  The __MAX counts are
 * defines, not enumerators, so a switch over the enum stays exhaustive.
 */
#define IDEM_LOG__MAX (IDEM_LOG_ERROR + 1)
#define IDEM_LOG_FORMAT__MAX (IDEM_LOG_JSON + 1)
extern const char *const idem_log_level_names[IDEM_LOG__MAX];
extern const char *const idem_log_format_names[IDEM_LOG_FORMAT__MAX];

/* What a line is about; every field may be NULL.  All borrowed. */
typedef struct idem_log_ctx {
	const char *request_id;
	const char *method;       /* the route's method and template */
	const char *route;
	const char *key_hash;     /* 16 hex digits */
	const char *event;        /* "takeover", "fenced", ... */
	const char *owner;        /* a reservation's owner token */
} idem_log_ctx;

/* Lines below level are dropped.  The default is IDEM_LOG_INFO. */
void idem_log_set_level(idem_log_level level);
/* Text (the default) or JSON lines. */
void idem_log_set_format(idem_log_format format);
/* The program a text line names ("idemfcgi", the default, or
 * "idemfcgi-admin"); name is borrowed and must outlive the logging. */
void idem_log_set_name(const char *name);
/* Sends lines to fd instead of 2 (tests).  Returns the previous fd. */
int idem_log_set_fd(int fd);

/* Writes one line about ctx (NULL: about nothing in particular). */
void idem_log_at(const idem_log_ctx *ctx, idem_log_level level,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* idem_log_at with a va_list (for a layer that builds its own context). */
void idem_logv_at(const idem_log_ctx *ctx, idem_log_level level,
    const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* Whether a line of level is written at the level set now: 1 or 0. */
int idem_log_enabled(idem_log_level level);

#endif
