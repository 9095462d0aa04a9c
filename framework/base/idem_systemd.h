/*
 * idem_systemd.h - what idemfcgi tells systemd and takes from it: state
 * notifications (READY=1, RELOADING=1, STOPPING=1, WATCHDOG=1, STATUS=)
 * over $NOTIFY_SOCKET, and a listening socket passed by socket activation
 * ($LISTEN_FDS, $LISTEN_PID).  Through libsystemd when idemfcgi is built
 * with it (HAVE_SYSTEMD); without it, notifications are not sent and an
 * inherited socket is refused with a message.
 */
#ifndef IDEM_SYSTEMD_H
#define IDEM_SYSTEMD_H

#include <stdint.h>

/* Sends state ("READY=1", lines separated by '\n') to the service
 * manager when $NOTIFY_SOCKET names one; nothing otherwise. */
void idem_sd_notify(const char *state);

/* printf-style idem_sd_notify. */
void idem_sd_notifyf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* RELOADING=1, with the time (MONOTONIC_USEC) that systemd 253 and
 * later want with it. */
void idem_sd_reloading(void);

/* The watchdog's period for this process ($WATCHDOG_USEC, and
 * $WATCHDOG_PID when set), in ms; 0 when there is no watchdog. */
uint64_t idem_sd_watchdog_ms(void);

/* The listening socket passed to this process ($LISTEN_FDS and
 * $LISTEN_PID naming it), the variables then removed from the
 * environment so no child takes them.  Returns the descriptor (3), -1
 * when none was passed, or -2 when what was passed cannot be served
 * (more than one socket, not a listening stream socket, idemfcgi built
 * without libsystemd; logged). */
int idem_sd_listen_fd(void);

#endif
