/*
 * idem_dispatch.c - the FastCGI connections of a worker process and the
 * threads that serve them (see idem_dispatch.h).
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "idem_cidr.h"
#include "idem_dispatch.h"
#include "idem_log.h"
#include "idem_request_log.h"
#include "idem_metrics.h"
#include "idem_time.h"

/*
 * The dispatcher.  A connection is not a thread: every open FastCGI
 * connection has a slot (a conn) with its own libfcgi request object, and
 * the connections that wait for their next request sit in one epoll set
 * with the listening socket and the stop eventfd.  Each thread takes one
 * ready item at a time:
 *   - the listening socket: accept one connection (non-blocking), check
 *     its peer against allow-clients, park it in a free slot;
 *   - a parked connection: FCGX_Accept_r reads its next request from the
 *     connection (never from the listening socket: see conn_open), serve,
 *     FCGX_Finish_r; a connection the web server keeps (FCGI_KEEP_CONN,
 *     ipcFd still >= 0) is parked again, else its slot is freed;
 *   - the stop eventfd: exit.
 * Connections and the listening socket are armed with EPOLLONESHOT, so one
 * readiness goes to one thread, and an item is re-armed only by the thread
 * that took it; the stop eventfd is level-triggered and never read, so it
 * wakes every thread.  An event carries the slot's index and generation;
 * a slot closed or reused since (an idle connection evicted, a stop) has
 * another generation or state, and its stale event is dropped.
 *
 * At most max-connections slots are taken, and one more while a new
 * connection is admitted.  When a new connection from an allowed peer
 * arrives and every slot is taken, the kept connection idle longest
 * (served before, between requests) is closed to admit it; when none is
 * (every connection is being served, or new with its first request on its
 * way), the listening socket is not re-armed until a slot frees or a
 * connection goes idle: the new connection waits in the backlog.
 *
 * Once a parked connection is readable, libfcgi reads the request's
 * records blocking: a web server that sends half a request and then stalls
 * (without closing) holds that thread until it sends the rest, closes, or
 * CONN_TIMEOUT_S passes (SO_RCVTIMEO on every accepted connection, as
 * long as nginx's own fastcgi_send_timeout; and SO_SNDTIMEO for a peer
 * that stops reading its answer, as its fastcgi_read_timeout).
 */

/* How long a read or a write on a FastCGI connection may wait for the
 * peer (s), and how long the rest of a kept request's FCGI_STDIN may be
 * waited for once its answer is written (ms) and how much of it is read
 * (drain_stdin). */
#define CONN_TIMEOUT_S 60
#define DRAIN_WAIT_MS 1000
#define DRAIN_MAX (1024 * 1024)
/* At a stop, how long a new connection's first request is waited for (ms):
 * it is answered rather than reset. */
#define STOP_WAIT_MS 1000

#define LISTEN_TAG UINT64_MAX         /* the event of the listening socket */
#define STOP_TAG (UINT64_MAX - 1)     /* the event of the stop eventfd */

typedef enum conn_state {
	C_FREE = 0,     /* on the free list */
	C_IDLE,         /* parked in the epoll set, on the idle list */
	C_BUSY          /* taken by one thread (being accepted or served) */
} conn_state;

/* One FastCGI connection's slot.  The fields are under the dispatcher's
 * lock, except
 * fr, which belongs to the one thread that holds the slot C_BUSY (or to
 * the lock holder while C_IDLE: nothing of it is in use then). */
typedef struct conn {
	FCGX_Request fr;             /* fr.ipcFd: the connection (owned) */
	conn_state state;
	uint32_t gen;                /* bumped each time the slot is taken */
	int in_set;                  /* fr.ipcFd is in the epoll set */
	int served;                  /* a request of it has been served: a
	                              * web server's kept connection, idle
	                              * between requests, not a new one whose
	                              * first request is on its way */
	struct conn *prev, *next;    /* the idle list, oldest first; or the
	                              * free list (next) */
} conn;

struct idem_dispatch {
	idem_service *svc;           /* borrowed */
	int listen_fd;               /* borrowed */
	int stop_fd;                 /* borrowed: readable once stopping */
	atomic_int *stopping;        /* borrowed: the server's */
	atomic_int *in_flight;       /* borrowed: requests being served */
	int ep;                      /* the epoll set (owned) */
	pthread_mutex_t lock;
	/* connections (lock) */
	conn *conns;                 /* max_conns + 1 slots (owned; the
	                              * last for the admitting thread) */
	unsigned max_conns;
	conn *free_list;
	unsigned open;               /* slots taken */
	conn *idle_head, *idle_tail; /* parked connections, oldest first */
	unsigned nidle;
	int listen_armed;            /* the listening socket is armed, or a
	                              * thread is admitting a connection */
	/* the rate limit of the refusal log line (lock) */
	uint64_t refused_logged_ms;
	unsigned long refused_quiet; /* refusals not logged since */
};

/* What the functions below call the dispatcher. */
typedef struct idem_dispatch server;



/* idem_read_fn over a FastCGI input stream. */
static ssize_t
fcgi_read(void *ctx, char *buf, size_t len)
{
	int n = len > 65536 ? 65536 : (int)len;

	n = FCGX_GetStr(buf, n, ctx);
	return n > 0 ? n : (FCGX_GetError(ctx) != 0 ? -1 : 0);
}

/* Answers the request just accepted on fr.  A HEAD gets the head of its
 * answer, Content-Length included, and no body. */
static void
serve_one(server *srv, FCGX_Request *fr)
{
	idem_request req;
	idem_response res;
	struct timespec t0, t1;
	char *head;
	size_t hlen;
	int body;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	idem_response_init(&res);
	idem_service_handle(srv->svc, fr->envp, fcgi_read, fr->in, &req, &res);
	head = idem_response_head(&res, req.request_id, &hlen);
	body = res.len > 0 && (req.method == NULL ||
	    strcmp(req.method, "HEAD") != 0);
	if (head == NULL ||
	    FCGX_PutStr(head, (int)hlen, fr->out) < 0 ||
	    (body && FCGX_PutStr(res.body, (int)res.len, fr->out) < 0))
		idem_log(&req, IDEM_LOG_INFO, "the client went away before the "
		    "response was sent");
	free(head);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	idem_log(&req, IDEM_LOG_INFO, "%s %s -> %d (%.3f ms)",
	    req.method != NULL ? req.method : "-",
	    req.path != NULL ? req.path : "-", res.status,
	    (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	idem_response_clear(&res);
	idem_request_clear(&req);
}

/* ------------------------------------------------------------ dispatcher */

/* Puts c (under the lock) at the tail of the idle list. */
static void
idle_push(server *srv, conn *c)
{
	c->next = NULL;
	c->prev = srv->idle_tail;
	if (srv->idle_tail != NULL)
		srv->idle_tail->next = c;
	else
		srv->idle_head = c;
	srv->idle_tail = c;
	srv->nidle++;
}

/* Takes c (under the lock) off the idle list. */
static void
idle_unlink(server *srv, conn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->idle_head = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	else
		srv->idle_tail = c->prev;
	c->prev = c->next = NULL;
	srv->nidle--;
}

/* Takes a free slot (under the lock) for a connection being accepted.
 * Returns it C_BUSY, or NULL when max-connections are open. */
static conn *
slot_take(server *srv)
{
	conn *c = srv->free_list;

	if (c == NULL)
		return NULL;
	srv->free_list = c->next;
	c->next = NULL;
	c->state = C_BUSY;
	c->gen++;
	c->in_set = 0;
	c->served = 0;
	srv->open++;
	return c;
}

/* Frees c's slot (under the lock); its connection is already closed. */
static void
slot_free(server *srv, conn *c)
{
	c->state = C_FREE;
	c->in_set = 0;
	c->next = srv->free_list;
	srv->free_list = c;
	srv->open--;
}

/* Closes the connection of c (under the lock; c is idle, or busy and held
 * by the caller) without libfcgi's lingering close, and frees the slot.
 * An event of c still queued finds another generation or state. */
static void
conn_close(server *srv, conn *c)
{
	if (c->state == C_IDLE)
		idle_unlink(srv, c);
	if (c->fr.ipcFd >= 0) {
		/* close() drops it from the epoll set: no one else holds the
		 * descriptor (accept4 gives SOCK_CLOEXEC) */
		close(c->fr.ipcFd);
		c->fr.ipcFd = -1;
	}
	FCGX_Free(&c->fr, 0);
	slot_free(srv, c);
}

/* The event tag of c: its generation and index. */
static uint64_t
conn_tag(const server *srv, const conn *c)
{
	return (uint64_t)c->gen << 32 | (uint64_t)(c - srv->conns);
}

/* Parks c (under the lock; held C_BUSY by the caller, its connection
 * open) to wait for its next request: armed once in the epoll set, last
 * on the idle list.  A failure closes it.  Returns 0 or -1. */
static int
conn_park(server *srv, conn *c)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = conn_tag(srv, c);
	/* re-arming a kept connection (MOD) reports data already there */
	if (epoll_ctl(srv->ep, c->in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
	    c->fr.ipcFd, &ev) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "epoll: %s; closing a FastCGI "
		    "connection", strerror(errno));
		conn_close(srv, c);
		return -1;
	}
	c->in_set = 1;
	c->state = C_IDLE;
	idle_push(srv, c);
	return 0;
}

/* Arms the listening socket once more (under the lock) when it is not,
 * the server is not stopping, and a connection could be admitted: a slot
 * is free within max-connections, or an idle connection could be closed
 * for it (else the spare slot, see admit, is left for the next one). */
static void
listen_rearm(server *srv)
{
	struct epoll_event ev;

	if (srv->listen_armed || atomic_load(srv->stopping) ||
	    srv->open > srv->max_conns ||
	    (srv->open == srv->max_conns && srv->nidle == 0))
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = LISTEN_TAG;
	if (epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev) < 0)
		idem_log(NULL, IDEM_LOG_ERROR, "epoll: %s; no longer accepting",
		    strerror(errno));
	else
		srv->listen_armed = 1;
}

/*
 * Closes (under the lock) the idle connection parked longest that the web
 * server keeps between requests (one served before) and that has no
 * request waiting, to admit a new one.  Never a connection whose first
 * request has not come yet (a web server opens one to send a request at
 * once: closing it would fail that request, however late it is on a busy
 * machine), nor one with bytes to read (about to be served).  Returns 1
 * when one was closed, 0 when none could be.
 */
static int
evict_idle(server *srv)
{
	conn *c;

	for (c = srv->idle_head; c != NULL; c = c->next) {
		char b;
		ssize_t n;

		if (!c->served)
			continue;
		n = recv(c->fr.ipcFd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n > 0)
			continue;
		conn_close(srv, c);
		if (srv->svc->metrics != NULL)
			idem_metrics_connection_evicted(srv->svc->metrics);
		return 1;
	}
	return 0;
}

/* The peer of a refused connection as text, into buf. */
static void
peer_text(const struct sockaddr_storage *ss, socklen_t len, char *buf,
    size_t size)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host),
	    port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, size, "(unknown)");
	else if (ss->ss_family == AF_INET6)
		snprintf(buf, size, "[%s]:%s", host, port);
	else
		snprintf(buf, size, "%s:%s", host, port);
}

/*
 * A connection refused by allow-clients (already closed): counted, and
 * logged at most once a second per process, with how many went unlogged
 * since the last line.
 */
static void
refused(server *srv, const struct sockaddr_storage *ss, socklen_t len)
{
	char peer[NI_MAXHOST + NI_MAXSERV + 8];
	uint64_t now = idem_now_ms();
	unsigned long quiet = 0;
	int say = 0;

	if (srv->svc->metrics != NULL)
		idem_metrics_connection_refused(srv->svc->metrics);
	pthread_mutex_lock(&srv->lock);
	if (srv->refused_logged_ms == 0 || now - srv->refused_logged_ms >= 1000) {
		say = 1;
		quiet = srv->refused_quiet;
		srv->refused_quiet = 0;
		srv->refused_logged_ms = now;
	} else {
		srv->refused_quiet++;
	}
	pthread_mutex_unlock(&srv->lock);
	if (!say)
		return;
	peer_text(ss, len, peer, sizeof(peer));
	idem_log_event(NULL, IDEM_LOG_WARN, "connection_refused", NULL,
	    "refused a FastCGI connection from %s: not in [server] "
	    "allow-clients (closed before reading anything; %lu more refused "
	    "since the last such line)", peer, quiet);
}

/* Whether the peer of a new connection may talk FastCGI to us: an IP
 * peer must be in allow-clients; a unix socket's peer is governed by the
 * socket's mode and owner. */
static int
peer_allowed(const server *srv, const struct sockaddr_storage *ss)
{
	const idem_config *cfg = srv->svc->cfg;

	return idem_cidr_match_sockaddr(cfg->server.allow_clients,
	    cfg->server.nallow_clients, (const struct sockaddr *)ss) != 0;
}

/* Wraps the accepted connection fd in c's request object.  listen_sock
 * is -1, so should libfcgi ever look for a new connection on this request
 * (FCGX_Accept_r does when the connection closes or breaks), its accept
 * fails (EBADF) instead of taking one off the listening socket behind the
 * dispatcher's back; keepConnection = 1 makes FCGX_Accept_r's first
 * FCGX_Finish_r keep the fresh connection open, and read its first
 * request from it. */
static void
conn_open(conn *c, int fd)
{
	FCGX_InitRequest(&c->fr, -1, 0);
	c->fr.ipcFd = fd;
	c->fr.keepConnection = 1;
}

/* Bounds how long a read (SO_RCVTIMEO) and a write (SO_SNDTIMEO) on fd
 * wait for the peer: ms. */
static void
set_timeouts(int fd, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * The listening socket is readable: admits one connection.  Its peer is
 * checked first: only an allowed peer may make room, at max-connections,
 * by closing the idle connection parked longest (a refused peer, or
 * another worker process that took the connection first, closes none).
 * The admitting thread (one at a time: the socket is armed once) has one
 * slot beyond the bound for the connection while no idle one could be
 * closed; the socket is then not armed again until a slot frees, and new
 * connections wait in the backlog.
 */
static void serve_late(server *srv, conn **taken, unsigned n,
    uint64_t wait_ms);

static void
admit(server *srv)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	conn *c = NULL, *late = NULL;
	int fd = -1, err = 0, one = 1;

	pthread_mutex_lock(&srv->lock);
	srv->listen_armed = 1;   /* until this thread re-arms it */
	pthread_mutex_unlock(&srv->lock);
	if (!atomic_load(srv->stopping)) {
		fd = accept4(srv->listen_fd, (struct sockaddr *)&ss, &len,
		    SOCK_CLOEXEC);
		err = fd < 0 ? errno : 0;
	}
	if (fd >= 0 && !peer_allowed(srv, &ss)) {
		close(fd);
		fd = -1;
		refused(srv, &ss, len);
	} else if (fd >= 0) {
		set_timeouts(fd, CONN_TIMEOUT_S * 1000);
		/* no replies to coalesce: Nagle only delays answers (libfcgi
		 * sets it too when it accepts) */
		if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			    sizeof(one));
	}
	if (err != 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR &&
	    err != ECONNABORTED && err != EPROTO)
		idem_log(NULL, IDEM_LOG_WARN, "accept: %s", strerror(err));
	pthread_mutex_lock(&srv->lock);
	if (fd >= 0) {
		if (srv->open >= srv->max_conns)
			evict_idle(srv);
		/* never NULL: listen_rearm leaves the spare slot to this
		 * thread; closed all the same, should it be */
		if ((c = slot_take(srv)) == NULL) {
			close(fd);
		} else {
			conn_open(c, fd);
			/* a stop that came meanwhile: the other threads are
			 * leaving, so this one serves it (serve_late) */
			if (atomic_load(srv->stopping))
				late = c;
			else
				conn_park(srv, c);
		}
	}
	srv->listen_armed = 0;
	/* out of descriptors: accepting again at once would spin.  Close an
	 * idle connection for room; else go on once one of ours closes (its
	 * thread re-arms), or after a pause when none is ours */
	if ((err == EMFILE || err == ENFILE) && !evict_idle(srv)) {
		struct timespec pause = { 0, 100 * 1000000L };

		if (srv->open > 0) {
			pthread_mutex_unlock(&srv->lock);
			return;
		}
		pthread_mutex_unlock(&srv->lock);
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&srv->lock);
	}
	/* when every idle connection has a request waiting, none could be
	 * closed and this re-arms at once: those requests are served by the
	 * next threads to wake, and the new connection is admitted after */
	listen_rearm(srv);
	pthread_mutex_unlock(&srv->lock);
	if (late != NULL)
		serve_late(srv, &late, 1, STOP_WAIT_MS);
}

/*
 * Reads what is left of the request's FCGI_STDIN up to its end (the empty
 * record), so a kept connection's next read starts at the next request.
 * A handler reads CONTENT_LENGTH bytes; the end record may still be on
 * the wire, and libfcgi would take it (the old request's id, before any
 * FCGI_BEGIN_REQUEST) as a protocol error and drop the connection.  The
 * answer is flushed first, so the drain never holds it; the rest is read
 * for at most DRAIN_WAIT_MS and DRAIN_MAX bytes.  Returns 1 when the
 * stream ended (the connection can be kept), 0 when it did not (a peer
 * still sending, or a body left unread that is too large: the connection
 * is closed after the answer, which is whole).
 */
static int
drain_stdin(FCGX_Request *fr)
{
	char buf[4096];
	size_t total = 0;
	int n;

	if (FCGX_HasSeenEOF(fr->in))
		return 1;
	FCGX_FFlush(fr->out);
	set_timeouts(fr->ipcFd, DRAIN_WAIT_MS);
	while ((n = FCGX_GetStr(buf, sizeof(buf), fr->in)) > 0 &&
	    (total += (size_t)n) <= DRAIN_MAX)
		;
	set_timeouts(fr->ipcFd, CONN_TIMEOUT_S * 1000);
	return n == 0 && FCGX_HasSeenEOF(fr->in) && FCGX_GetError(fr->in) == 0;
}

/* Serves the next request of c (held C_BUSY by the caller, the lock not
 * held), then parks c again or, when the web server does not keep it or
 * the server is stopping, closes it. */
static void
serve_slot(server *srv, conn *c)
{
	/* reads the next request from c->fr.ipcFd; when the web server closed
	 * the connection (or broke the protocol) libfcgi closes it and fails
	 * on listen_sock -1: rc < 0 and ipcFd -1 */
	int rc = FCGX_Accept_r(&c->fr);

	if (rc == 0) {
		atomic_fetch_add(srv->in_flight, 1);
		serve_one(srv, &c->fr);
		if (c->fr.keepConnection && !drain_stdin(&c->fr))
			c->fr.keepConnection = 0;
		FCGX_Finish_r(&c->fr);
		atomic_fetch_sub(srv->in_flight, 1);
		c->served = 1;
	}
	pthread_mutex_lock(&srv->lock);
	if (c->fr.ipcFd >= 0 && !atomic_load(srv->stopping))
		conn_park(srv, c);
	else
		conn_close(srv, c);
	listen_rearm(srv);
	pthread_mutex_unlock(&srv->lock);
}

/*
 * At a stop, serves the connections in taken (held C_BUSY, the lock not
 * held) whose request arrives within wait_ms, one at a time, and closes
 * the rest: a request a web server sent, or is sending on a connection it
 * just opened, is answered rather than reset.  Frees taken's entries.
 */
static void
serve_late(server *srv, conn **taken, unsigned n, uint64_t wait_ms)
{
	uint64_t deadline = idem_now_ms() + wait_ms;
	struct pollfd *pf = n > 0 ? calloc(n, sizeof(*pf)) : NULL;
	unsigned i, left = n;

	while (pf != NULL && left > 0) {
		uint64_t now = idem_now_ms();
		int r;

		if (now >= deadline)
			break;
		for (i = 0; i < left; i++) {
			pf[i].fd = taken[i]->fr.ipcFd;
			pf[i].events = POLLIN;
			pf[i].revents = 0;
		}
		r = poll(pf, left, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (i = 0; i < left;) {
			if (pf[i].revents == 0) {
				i++;
				continue;
			}
			serve_slot(srv, taken[i]);
			taken[i] = taken[--left];
			pf[i] = pf[left];
		}
	}
	pthread_mutex_lock(&srv->lock);
	for (i = 0; i < left; i++)
		conn_close(srv, taken[i]);
	pthread_mutex_unlock(&srv->lock);
	free(pf);
}

/* A parked connection (the event's tag) is readable: serves its next
 * request, then parks it again or frees its slot. */
static void
serve_conn(server *srv, uint64_t tag)
{
	uint64_t idx = tag & 0xffffffffu;
	conn *c;

	if (idx > srv->max_conns)
		return;
	c = &srv->conns[idx];
	pthread_mutex_lock(&srv->lock);
	if (c->state != C_IDLE || c->gen != (uint32_t)(tag >> 32)) {
		/* closed, or closed and reused, since the event was queued */
		pthread_mutex_unlock(&srv->lock);
		return;
	}
	idle_unlink(srv, c);
	c->state = C_BUSY;
	pthread_mutex_unlock(&srv->lock);
	serve_slot(srv, c);
}

void
idem_dispatch_thread(idem_dispatch *srv)
{
	uint64_t one = 1;

	while (!atomic_load(srv->stopping)) {
		struct epoll_event ev;
		int n = epoll_wait(srv->ep, &ev, 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			idem_log(NULL, IDEM_LOG_ERROR, "epoll_wait: %s",
			    strerror(errno));
			break;
		}
		if (n == 0)
			continue;
		if (ev.data.u64 == STOP_TAG)
			break;
		if (ev.data.u64 == LISTEN_TAG)
			admit(srv);
		else
			serve_conn(srv, ev.data.u64);
	}
	/* pass the stop on to a thread still asleep (the counter only
	 * grows; nobody reads it) */
	if (write(srv->stop_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		idem_log(NULL, IDEM_LOG_ERROR, "eventfd: %s", strerror(errno));
}

void
idem_dispatch_close_idle(idem_dispatch *srv)
{
	conn **taken = calloc(srv->max_conns + 1, sizeof(*taken));
	conn *c, *next;
	unsigned n = 0;

	pthread_mutex_lock(&srv->lock);
	epoll_ctl(srv->ep, EPOLL_CTL_DEL, srv->listen_fd, NULL);
	srv->listen_armed = 1;
	for (c = srv->idle_head; c != NULL; c = next) {
		char b;
		next = c->next;
		/* a kept connection between requests goes; one with a
		 * request waiting, or a new one (its first request on its
		 * way), is served first (serve_late) */
		if (taken != NULL && (!c->served || recv(c->fr.ipcFd, &b, 1,
		    MSG_PEEK | MSG_DONTWAIT) > 0)) {
			idle_unlink(srv, c);
			c->state = C_BUSY;
			taken[n++] = c;
		} else {
			conn_close(srv, c);
		}
	}
	pthread_mutex_unlock(&srv->lock);
	serve_late(srv, taken, n, STOP_WAIT_MS);
	free(taken);
}

/*
 * Gives this process room for max-connections descriptors and the rest it
 * opens (the store's pool, logs, plugins): raises the soft limit toward
 * the hard one when it is lower, and warns when even that is too low.
 */
static void
fd_room(unsigned max_conns)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)max_conns + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ?
	    want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want)
		idem_log(NULL, IDEM_LOG_WARN, "max-connections = %u, but this "
		    "process may open only %llu files: connections beyond about "
		    "%llu are refused by the kernel; raise the limit "
		    "(LimitNOFILE=) or lower max-connections", max_conns,
		    (unsigned long long)rl.rlim_cur,
		    (unsigned long long)(rl.rlim_cur > 256 ? rl.rlim_cur - 256 :
		    0));
}


idem_dispatch *
idem_dispatch_new(idem_service *svc, int listen_fd, int stop_fd,
    atomic_int *stopping, atomic_int *in_flight)
{
	struct epoll_event ev;
	server *srv = calloc(1, sizeof(*srv));
	unsigned i;

	if (srv == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "cannot start: out of memory");
		return NULL;
	}
	srv->svc = svc;
	srv->listen_fd = listen_fd;
	srv->stop_fd = stop_fd;
	srv->stopping = stopping;
	srv->in_flight = in_flight;
	pthread_mutex_init(&srv->lock, NULL);
	fd_room(svc->cfg->server.max_connections);
	srv->max_conns = svc->cfg->server.max_connections;
	/* and the admitting thread's spare (see admit) */
	srv->conns = calloc(srv->max_conns + 1, sizeof(*srv->conns));
	srv->ep = epoll_create1(EPOLL_CLOEXEC);
	if (srv->conns == NULL || srv->ep < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "cannot start: %s",
		    strerror(errno));
		idem_dispatch_free(srv);
		return NULL;
	}
	for (i = srv->max_conns + 1; i-- > 0;) {
		FCGX_InitRequest(&srv->conns[i].fr, -1, 0);
		srv->conns[i].next = srv->free_list;
		srv->free_list = &srv->conns[i];
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = LISTEN_TAG;
	if (epoll_ctl(srv->ep, EPOLL_CTL_ADD, srv->listen_fd, &ev) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "epoll: %s", strerror(errno));
		idem_dispatch_free(srv);
		return NULL;
	}
	srv->listen_armed = 1;
	ev.events = EPOLLIN;
	ev.data.u64 = STOP_TAG;
	if (epoll_ctl(srv->ep, EPOLL_CTL_ADD, srv->stop_fd, &ev) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "epoll: %s", strerror(errno));
		idem_dispatch_free(srv);
		return NULL;
	}
	return srv;
}

unsigned
idem_dispatch_max(const idem_dispatch *srv)
{
	return srv->max_conns;
}

void
idem_dispatch_free(idem_dispatch *srv)
{
	unsigned i;

	if (srv == NULL)
		return;
	for (i = 0; srv->conns != NULL && i <= srv->max_conns; i++)
		if (srv->conns[i].state != C_FREE)
			conn_close(srv, &srv->conns[i]);
	free(srv->conns);
	if (srv->ep >= 0)
		close(srv->ep);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}
