/*
 * notify.h - the service manager's end of $NOTIFY_SOCKET for the tests: a
 * datagram socket that an idemfcgi started with NOTIFY_SOCKET=<path> (an
 * env entry of harness_opts) sends its sd_notify states to.
 */
#ifndef NOTIFY_H
#define NOTIFY_H

#include <sys/types.h>

/* The longest notify_await waits for a datagram that must come, in ms. */
#define NOTIFY_EVENT_MS 30000

typedef struct notify_sock {
	char dir[40];
	char path[64];
	char env[96];            /* "NOTIFY_SOCKET=<path>", for harness_opts */
	int fd;
} notify_sock;

/* Binds the socket in a temporary directory of its own.  Returns 0 or
 * -1. */
int notify_open(notify_sock *n);

/* Closes it and removes its directory. */
void notify_close(notify_sock *n);

/* The next datagram into buf (NUL-terminated), waiting up to ms.
 * Returns its length, or -1 when none came. */
ssize_t notify_next(notify_sock *n, char *buf, size_t size, long ms);

/* Whether a datagram holds a line that starts with want ("READY=1",
 * "STATUS=watchdog:").  1 or 0. */
int notify_has_line(const char *msg, const char *want);

/* Reads datagrams until one with a line starting with want; counts in
 * *skipped (may be NULL) those before it with a line starting with
 * other.  Returns 1, or 0 when none came within NOTIFY_EVENT_MS. */
int notify_await(notify_sock *n, const char *want, const char *other,
    int *skipped);

#endif
