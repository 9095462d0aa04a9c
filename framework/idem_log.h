/*
 * idem_log.h - one line per event on stderr (the web server keeps it).
 *
 * Lines look like
 *   2026-11-30T07:25:05.123Z idemfcgi[42] info req=9f1c...: message
 * and are written with a single write(2), so lines of concurrent threads
 * and processes never interleave.
 */
#ifndef IDEM_LOG_H
#define IDEM_LOG_H

#include <stdarg.h>
#include "idemfcgi.h"

/* Lines below level are dropped.  The default is IDEM_LOG_INFO. */
void idem_log_set_level(idem_log_level level);
/* Sends lines to fd instead of 2 (tests).  Returns the previous fd. */
int idem_log_set_fd(int fd);
/* idem_log with a request id given directly (NULL for none). */
void idem_logv_id(const char *request_id, idem_log_level level,
    const char *fmt, va_list ap);

#endif
