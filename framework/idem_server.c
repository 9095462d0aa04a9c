/*
 * idem_server.c - sockets, worker threads and signals.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "idem_log.h"
#include "idem_server.h"
#include "idem_time.h"

#define BACKLOG 1024

typedef struct server {
	idem_service *svc;
	int listen_fd;
	int stop_fd;                 /* eventfd, readable once stopping */
	atomic_int stopping;
	atomic_int in_flight;
	pthread_mutex_t lock;
	pthread_cond_t done;         /* signalled as each thread exits */
	unsigned live;               /* threads still running (lock) */
	pthread_cond_t wake_purger;  /* signalled when stopping */
} server;

/* ---------------------------------------------------------------- sockets */

/* Makes fd non-blocking and close-on-exec. */
static int
set_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	fl = fcntl(fd, F_GETFD);
	if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -1;
	return 0;
}

/* Binds a unix socket at path with mode. */
static int
listen_unix(const char *path, unsigned mode)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	/* a socket left by an earlier run is replaced; anything else is not */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			idem_log(NULL, IDEM_LOG_ERROR, "listen unix:%s: exists and "
			    "is not a socket", path);
			return -1;
		}
		unlink(path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, (mode_t)mode) < 0 || listen(fd, BACKLOG) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "listen unix:%s: %s", path,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	idem_log(NULL, IDEM_LOG_INFO, "listening on unix:%s (mode %04o)", path,
	    mode);
	return fd;
}

/* Binds host:port ([v6]:port); port 0 picks a free one, which is logged. */
static int
listen_tcp(const char *spec)
{
	struct addrinfo hints, *res = NULL, *ai;
	char host[256], port[8], shost[NI_MAXHOST], sport[NI_MAXSERV];
	const char *colon = strrchr(spec, ':');
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	size_t hlen = (size_t)(colon - spec);
	int fd = -1, one = 1, rc;

	if (spec[0] == '[') {
		spec++;
		hlen -= 2;
	}
	if (hlen >= sizeof(host)) {
		idem_log(NULL, IDEM_LOG_ERROR, "listen %s: host too long", spec);
		return -1;
	}
	memcpy(host, spec, hlen);
	host[hlen] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	if ((rc = getaddrinfo(strcmp(host, "*") == 0 ? NULL : host, port,
	    &hints, &res)) != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "listen %s:%s: %s", host, port,
		    gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, BACKLOG) == 0)
			break;
		rc = errno;
		close(fd);
		fd = -1;
		errno = rc;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "listen %s:%s: %s", host, port,
		    strerror(errno));
		return -1;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, sslen, shost, sizeof(shost),
	    sport, sizeof(sport), NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		idem_log(NULL, IDEM_LOG_INFO, "listening on %s:%s", shost, sport);
	return fd;
}

/* The command name of our parent process ("apache2"), or "". */
static void
parent_name(char *buf, size_t size)
{
	char path[64];
	FILE *fp;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)getppid());
	if ((fp = fopen(path, "r")) == NULL)
		return;
	if (fgets(buf, (int)size, fp) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(fp);
}

/*
 * Spawned by a web server on fd 0 with the memory store: mod_fcgid (and
 * lighttpd with max-procs > 1) run several idemfcgi processes, each with
 * its own memory store, so a retry that reaches another process runs
 * again.  Say so.
 */
static void
warn_private_store(const idem_config *cfg)
{
	char parent[64];

	if (!cfg->idem_enabled || cfg->store != IDEM_STORE_MEMORY)
		return;
	parent_name(parent, sizeof(parent));
	if (strcmp(parent, "apache2") == 0 || strcmp(parent, "httpd") == 0)
		idem_log(NULL, IDEM_LOG_WARN, "started by %s (mod_fcgid) with "
		    "store = memory: mod_fcgid sends one request at a time to "
		    "each process and starts several, and each process has its "
		    "own memory store, so a retry that reaches another process "
		    "runs again; use store = mysql, or FcgidMaxProcessesPerClass 1",
		    parent);
	else
		idem_log(NULL, IDEM_LOG_INFO, "started on fd 0 with store = "
		    "memory: records are per process; if the web server starts "
		    "several processes (lighttpd max-procs > 1), use store = "
		    "mysql");
}

int
idem_server_listen(const idem_config *cfg)
{
	int fd, accepting = 0;
	socklen_t len = sizeof(accepting);

	if (cfg->listen != NULL)
		fd = strncmp(cfg->listen, "unix:", 5) == 0 ?
		    listen_unix(cfg->listen + 5, cfg->socket_mode) :
		    listen_tcp(cfg->listen);
	else {
		fd = 0;
		if (getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len)
		    < 0 || !accepting) {
			idem_log(NULL, IDEM_LOG_ERROR, "no listen = in [server] "
			    "and fd 0 is not a listening socket: set listen, or "
			    "let the web server (lighttpd bin-path, mod_fcgid, "
			    "spawn-fcgi) start idemfcgi");
			return -1;
		}
		idem_log(NULL, IDEM_LOG_INFO, "listening on the socket passed "
		    "on fd 0");
		warn_private_store(cfg);
	}
	if (fd >= 0 && set_flags(fd) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "listening socket: %s",
		    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* ---------------------------------------------------------------- workers */

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

/*
 * Waits until fd (a kept connection) or the listening socket (through ep)
 * is readable.  Returns 1 to go on accepting, 0 when stopping.
 */
static int
wait_ready(server *srv, int ep, int kept_fd)
{
	for (;;) {
		int n;

		if (atomic_load(&srv->stopping))
			return 0;
		if (kept_fd >= 0) {
			struct pollfd pf[2] = { { kept_fd, POLLIN, 0 },
			    { srv->stop_fd, POLLIN, 0 } };
			n = poll(pf, 2, -1);
			if (n > 0)
				return !(pf[1].revents & POLLIN);
		} else {
			struct epoll_event ev[2];
			int i;
			n = epoll_wait(ep, ev, 2, -1);
			for (i = 0; i < n; i++)
				if (ev[i].data.fd == srv->stop_fd)
					return 0;
			if (n > 0)
				return 1;
		}
		if (n < 0 && errno != EINTR) {
			idem_log(NULL, IDEM_LOG_ERROR, "poll: %s",
			    strerror(errno));
			return 0;
		}
	}
}

/* A worker thread: accept, serve, repeat until stopping. */
static void *
worker(void *arg)
{
	server *srv = arg;
	FCGX_Request fr;
	struct epoll_event ev;
	int ep;

	FCGX_InitRequest(&fr, srv->listen_fd, 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLEXCLUSIVE;
	ev.data.fd = srv->listen_fd;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, srv->listen_fd, &ev) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "epoll: %s", strerror(errno));
		goto out;
	}
	ev.events = EPOLLIN;
	ev.data.fd = srv->stop_fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, srv->stop_fd, &ev) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "epoll: %s", strerror(errno));
		goto out;
	}
	/* fr.ipcFd >= 0 between requests means the web server keeps the
	 * connection (FCGI_KEEP_CONN): its next request comes on it. */
	while (wait_ready(srv, ep, fr.ipcFd)) {
		int rc = FCGX_Accept_r(&fr);

		if (rc < 0) {
			if (rc != -EAGAIN && rc != -EWOULDBLOCK && rc != -EINTR &&
			    rc != -ECONNABORTED)
				idem_log(NULL, IDEM_LOG_WARN, "accept: %s",
				    strerror(-rc));
			continue;
		}
		atomic_fetch_add(&srv->in_flight, 1);
		serve_one(srv, &fr);
		FCGX_Finish_r(&fr);
		atomic_fetch_sub(&srv->in_flight, 1);
	}
out:
	FCGX_Free(&fr, 1);
	if (ep >= 0)
		close(ep);
	pthread_mutex_lock(&srv->lock);
	srv->live--;
	pthread_cond_signal(&srv->done);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/* The purge thread: every cleanup-interval, deletes expired records. */
static void *
purger(void *arg)
{
	server *srv = arg;
	struct timespec next;

	pthread_mutex_lock(&srv->lock);
	while (!atomic_load(&srv->stopping)) {
		idem_deadline(&next, srv->svc->cfg->cleanup_interval);
		while (!atomic_load(&srv->stopping) &&
		    pthread_cond_timedwait(&srv->wake_purger, &srv->lock, &next)
		    == 0)
			;
		if (atomic_load(&srv->stopping))
			break;
		pthread_mutex_unlock(&srv->lock);
		idem_service_purge(srv->svc);
		pthread_mutex_lock(&srv->lock);
	}
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/* Waits for the threads to exit until the grace period ends.  Returns 0 when
 * all did. */
static int
drain(server *srv, uint64_t grace_ms)
{
	struct timespec deadline;
	int rc = 0;

	idem_deadline(&deadline, grace_ms);
	pthread_mutex_lock(&srv->lock);
	while (srv->live > 0 && rc == 0)
		rc = pthread_cond_timedwait(&srv->done, &srv->lock, &deadline);
	rc = srv->live > 0;
	pthread_mutex_unlock(&srv->lock);
	return rc;
}

/* The signals sigwait takes. */
static void
signal_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR1);
}

void
idem_server_block_signals(void)
{
	sigset_t set;

	/* a client that hangs up gives EPIPE, never SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	signal_set(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int
idem_server_run(idem_service *svc, int listen_fd)
{
	server srv;
	pthread_condattr_t ca;
	pthread_t *tids, purge_tid;
	int purging = 0;
	sigset_t set;
	unsigned i, n = svc->cfg->threads;
	uint64_t one = 1, stop_at;
	int sig = 0, drained;

	memset(&srv, 0, sizeof(srv));
	srv.svc = svc;
	srv.listen_fd = listen_fd;
	atomic_init(&srv.stopping, 0);
	atomic_init(&srv.in_flight, 0);
	pthread_mutex_init(&srv.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv.done, &ca);
	pthread_cond_init(&srv.wake_purger, &ca);
	pthread_condattr_destroy(&ca);

	idem_server_block_signals();
	signal_set(&set);
	if (FCGX_Init() != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "FCGX_Init failed");
		return 1;
	}
	srv.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	tids = calloc(n, sizeof(*tids));
	if (srv.stop_fd < 0 || tids == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "cannot start: %s",
		    strerror(errno));
		free(tids);
		return 1;
	}
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&srv.lock);
		srv.live++;
		pthread_mutex_unlock(&srv.lock);
		int rc = pthread_create(&tids[i], NULL, worker, &srv);
		if (rc != 0) {
			idem_log(NULL, IDEM_LOG_ERROR, "cannot start thread %u: %s",
			    i, strerror(rc));
			pthread_mutex_lock(&srv.lock);
			srv.live--;
			pthread_mutex_unlock(&srv.lock);
			n = i;
			sig = -1;
			break;
		}
	}
	if (sig == 0 && svc->mw != NULL) {
		int rc = pthread_create(&purge_tid, NULL, purger, &srv);
		if (rc == 0)
			purging = 1;
		else
			idem_log(NULL, IDEM_LOG_WARN, "no purge thread: %s; "
			    "expired records are dropped only when reused",
			    strerror(rc));
	}
	if (sig == 0)
		idem_log(NULL, IDEM_LOG_INFO, "serving with %u threads", n);
	while (sig == 0) {
		if (sigwait(&set, &sig) != 0)
			sig = 0;
		else if (sig == SIGHUP || sig == SIGUSR1) {
			idem_log(NULL, IDEM_LOG_INFO, "signal %d ignored (this "
			    "version reloads nothing; restart to apply a new "
			    "config)", sig);
			sig = 0;
		}
	}
	if (sig > 0)
		idem_log(NULL, IDEM_LOG_INFO, "%s: no longer accepting; %d "
		    "request(s) in flight, waiting up to %llu ms",
		    sig == SIGTERM ? "SIGTERM" : "SIGINT",
		    atomic_load(&srv.in_flight),
		    (unsigned long long)svc->cfg->shutdown_grace);
	pthread_mutex_lock(&srv.lock);
	atomic_store(&srv.stopping, 1);
	pthread_cond_signal(&srv.wake_purger);
	pthread_mutex_unlock(&srv.lock);
	if (purging)
		pthread_join(purge_tid, NULL);
	if (write(srv.stop_fd, &one, sizeof(one)) < 0)
		idem_log(NULL, IDEM_LOG_ERROR, "eventfd: %s", strerror(errno));
	stop_at = idem_now_ms();
	drained = drain(&srv, svc->cfg->shutdown_grace) == 0;
	if (!drained)
		idem_log(NULL, IDEM_LOG_ERROR, "shutdown-grace ran out with %d "
		    "request(s) in flight; exiting anyway",
		    atomic_load(&srv.in_flight));
	/* a last try at the commits and releases waiting for the store,
	 * within what is left of shutdown-grace (a second at least) */
	if (svc->mw != NULL) {
		uint64_t spent = idem_now_ms() - stop_at;
		idem_middleware_flush(svc->mw, spent + 1000 <
		    svc->cfg->shutdown_grace ? svc->cfg->shutdown_grace - spent :
		    1000);
	}
	if (!drained)
		return IDEM_SERVER_ABANDONED;
	for (i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	close(srv.stop_fd);
	idem_log(NULL, IDEM_LOG_INFO, "stopped");
	return sig < 0 ? 1 : 0;
}
