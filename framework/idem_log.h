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

#include "idemfcgi.h"

/* Lines below level are dropped.  The default is IDEM_LOG_INFO. */
void idem_log_set_level(idem_log_level level);
/* Sends lines to fd instead of 2 (tests).  Returns the previous fd. */
int idem_log_set_fd(int fd);

#endif
