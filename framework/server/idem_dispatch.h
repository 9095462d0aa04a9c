/*
 * idem_dispatch.h - the FastCGI connections of one worker process and the
 * threads that serve them.  A connection is not a thread: connections the
 * web server keeps open between requests (FCGI_KEEP_CONN) wait in one
 * epoll set with the listening socket, and any free thread serves
 * whichever has a request; [server] max-connections bounds them, and
 * [server] allow-clients decides which TCP peers may connect.  The
 * design, in detail, is at the top of idem_dispatch.c.
 *
 * Ownership: a dispatcher borrows its service, the listening socket, the
 * stop eventfd and the two counters (the server's; they must outlive it);
 * it owns its connections.  idem_dispatch_new runs before the threads
 * start, idem_dispatch_free after they all returned.
 */
#ifndef IDEM_DISPATCH_H
#define IDEM_DISPATCH_H

#include <stdatomic.h>

#include "idem_service.h"

typedef struct idem_dispatch idem_dispatch;

/*
 * The dispatcher of svc's FastCGI connections on listen_fd (non-blocking).
 * stop_fd, an eventfd made readable once *stopping is set, wakes its
 * threads; *in_flight counts the requests being served.  Raises the
 * process's open-file limit toward max-connections.  Returns it (free
 * with idem_dispatch_free), or NULL after logging why.
 */
idem_dispatch *idem_dispatch_new(idem_service *svc, int listen_fd,
    int stop_fd, atomic_int *stopping, atomic_int *in_flight);

/* One thread's share of the serving: takes one ready item at a time (a
 * new connection, a request on a parked one) until stopping, then passes
 * the stop on to a thread still asleep and returns. */
void idem_dispatch_thread(idem_dispatch *d);

/* At a stop: closes the idle kept connections (the web server opens
 * another, to a worker that accepts) and stops polling the listening
 * socket. */
void idem_dispatch_close_idle(idem_dispatch *d);

/* max-connections, as the dispatcher applies it. */
unsigned idem_dispatch_max(const idem_dispatch *d);

/* Closes what connections are left and frees d; NULL is fine. */
void idem_dispatch_free(idem_dispatch *d);

#endif
