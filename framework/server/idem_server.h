/*
 * idem_server.h - the FastCGI side (idem_server.c): the listening
 * socket, the worker threads taking requests from the dispatcher
 * (idem_dispatch.c, which reads them with FCGX_Accept_r), and signals.
 *
 * The threads share one dispatcher (idem_dispatch.c): every open
 * connection has a slot with its own libfcgi request object, and the
 * connections waiting for their next request wait in one epoll set with
 * the listening socket, so a connection the web server keeps open
 * (FCGI_KEEP_CONN) never holds a thread between requests: any free thread
 * serves whichever connection has a request.  At most [server]
 * max-connections are open; a new connection past that closes the idle
 * one parked longest.  A TCP peer outside [server] allow-clients is closed
 * at accept, before anything is read.
 * SIGTERM and SIGINT are blocked in every thread and taken by sigwait in
 * the thread that called idem_server_run: they stop accepting, let the
 * requests in flight finish within shutdown-grace, and return.
 */
#ifndef IDEM_SERVER_H
#define IDEM_SERVER_H

#include "idem_service.h"

/*
 * Ignores SIGPIPE and blocks SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGCHLD
 * in the calling thread (and the threads it starts later): call it first
 * thing in main, so only sigwait ever takes them.
 */
void idem_server_block_signals(void);

/*
 * Opens the socket named by svc->cfg->server.listen (or checks fd 0 when it is
 * NULL).  Returns the descriptor or -1 after logging why.
 */
int idem_server_listen(const idem_config *cfg);

/*
 * Serves the listening socket fd that systemd passed (socket activation,
 * idem_sd_listen_fd) instead of cfg->server.listen, which is then not opened
 * (logged).  Returns fd or -1 after logging why.
 */
int idem_server_adopt(const idem_config *cfg, int fd);

/* What idem_server_run returns when shutdown-grace ran out with requests
 * in flight: their threads still run, so svc must not be freed. */
#define IDEM_SERVER_ABANDONED 2

/*
 * Serves svc (borrowed) on listen_fd until SIGTERM or SIGINT.  Returns 0
 * when every request in flight finished, 1 when the threads could not
 * start (none is left running), IDEM_SERVER_ABANDONED when shutdown-grace
 * ran out.
 */
int idem_server_run(idem_service *svc, int listen_fd);

#endif
