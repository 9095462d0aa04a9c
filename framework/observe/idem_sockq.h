/*
 * idem_sockq.h - the accept queue of a listening socket, as the kernel
 * tells it (Linux): for TCP, getsockopt(TCP_INFO) on the listening socket
 * (tcpi_unacked: the connections waiting, tcpi_sacked: the backlog); for
 * a unix socket, sock_diag (UNIX_DIAG_RQLEN, by the socket's inode).
 */
#ifndef IDEM_SOCKQ_H
#define IDEM_SOCKQ_H

#include <stdint.h>

#include "idemfcgi.h"

/*
 * Reads the accept queue of the listening socket fd: *queued, the
 * connections waiting to be accepted, and *backlog, the most that may.
 * Returns IDEM_OK, or IDEM_ERR_INVALID when the kernel does not tell (not
 * a listening TCP or unix socket, no sock_diag).
 */
idem_err idem_sockq_get(int fd, uint64_t *queued, uint64_t *backlog);

#endif
