/*
 * idem_systemd.c - notifications to systemd and socket activation.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "idem_log.h"
#include "idem_systemd.h"

void
idem_sd_notify(const char *state)
{
#ifdef HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

void
idem_sd_notifyf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	idem_sd_notify(buf);
}

void
idem_sd_reloading(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	idem_sd_notifyf("RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL +
	    (unsigned long long)ts.tv_nsec / 1000ULL);
}

uint64_t
idem_sd_watchdog_ms(void)
{
#ifdef HAVE_SYSTEMD
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	return usec / 1000 > 0 ? usec / 1000 : 1;
#else
	return 0;
#endif
}

int
idem_sd_listen_fd(void)
{
#ifdef HAVE_SYSTEMD
	int n = sd_listen_fds(1);

	if (n == 0)
		return -1;
	if (n < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "socket activation: LISTEN_FDS "
		    "cannot be read");
		return -2;
	}
	if (n > 1) {
		idem_log(NULL, IDEM_LOG_ERROR, "socket activation: %d sockets "
		    "passed (LISTEN_FDS=%d), and idemfcgi serves one: give its "
		    "socket unit a single ListenStream=", n, n);
		return -2;
	}
	if (sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "socket activation: fd %d is not "
		    "a listening stream socket (the socket unit needs "
		    "ListenStream=, not ListenDatagram= or Accept=yes)",
		    SD_LISTEN_FDS_START);
		return -2;
	}
	return SD_LISTEN_FDS_START;
#else
	const char *pid = getenv("LISTEN_PID");

	if (getenv("LISTEN_FDS") == NULL || pid == NULL ||
	    strtol(pid, NULL, 10) != (long)getpid())
		return -1;
	idem_log(NULL, IDEM_LOG_ERROR, "socket activation: LISTEN_FDS is set, "
	    "but this idemfcgi was built without libsystemd (configure "
	    "--with-systemd): use listen = in [server]");
	return -2;
#endif
}
