/*
 * idem_master.h - the process model: a master process and [server] workers
 * worker processes sharing one listening socket.
 *
 * The master never serves.  It forks the workers (each builds its own
 * service: plugins, store connections, threads), restarts one that dies
 * (with back-off when it keeps dying), releases the reservations a dead
 * worker held so their retries run at once, drains on SIGTERM/SIGINT, and
 * on SIGHUP re-reads the config and replaces the workers: the new ones
 * accept before the old ones stop accepting, and the old ones finish what
 * they hold, so no request is dropped.
 */
#ifndef IDEM_MASTER_H
#define IDEM_MASTER_H

#include "idem_config.h"

/*
 * Runs the master with cfg (taken over) read from path, on listen_fd.
 * plugin_dir is where bare plugin names are found.  Returns the exit
 * status: 0 when every worker drained cleanly.
 */
int idem_master_run(const char *path, idem_config *cfg, int listen_fd,
    const char *plugin_dir);

#endif
