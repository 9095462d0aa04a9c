/*
 * idem_server.c - the listening socket, the worker threads over the
 * dispatcher (idem_dispatch.c), the purge thread, signals and the stop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "idem_log.h"
#include "idem_dispatch.h"
#include "idem_server.h"
#include "idem_time.h"

#define BACKLOG 1024

typedef struct server {
	idem_service *svc;
	idem_dispatch *dispatch;     /* the connections and their threads */
	int stop_fd;                 /* eventfd, readable once stopping */
	atomic_int stopping;
	atomic_int in_flight;        /* requests being served (logs) */
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

	if (!cfg->idem.enabled || cfg->idem.store != IDEM_STORE_MEMORY)
		return;
	parent_name(parent, sizeof(parent));
	if (strcmp(parent, "apache2") == 0 || strcmp(parent, "httpd") == 0)
		idem_log(NULL, IDEM_LOG_WARN, "started by %s (mod_fcgid) with "
		    "store = memory: mod_fcgid sends one request at a time to "
		    "each process and starts several, and each process has its "
		    "own memory store, so a retry that reaches another process "
		    "runs again; use a store with a database (%s), or "
		    "FcgidMaxProcessesPerClass 1", parent,
		    idem_config_db_stores());
	else
		idem_log(NULL, IDEM_LOG_INFO, "started on fd 0 with store = "
		    "memory: records are per process; if the web server starts "
		    "several processes (lighttpd max-procs > 1), use a store "
		    "with a database (%s)", idem_config_db_stores());
}

int
idem_server_listen(const idem_config *cfg)
{
	int fd, accepting = 0;
	socklen_t len = sizeof(accepting);

	if (cfg->server.listen != NULL)
		fd = strncmp(cfg->server.listen, "unix:", 5) == 0 ?
		    listen_unix(cfg->server.listen + 5, cfg->server.socket_mode) :
		    listen_tcp(cfg->server.listen);
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

int
idem_server_adopt(const idem_config *cfg, int fd)
{
	if (cfg->server.listen != NULL)
		idem_log(NULL, IDEM_LOG_INFO, "listening on the socket systemd "
		    "passed (fd %d); listen = %s is not opened", fd,
		    cfg->server.listen);
	else
		idem_log(NULL, IDEM_LOG_INFO, "listening on the socket systemd "
		    "passed (fd %d)", fd);
	if (set_flags(fd) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "listening socket: %s",
		    strerror(errno));
		return -1;
	}
	return fd;
}

/* A worker thread: serves the dispatcher's connections until stopping. */
static void *
worker(void *arg)
{
	server *srv = arg;

	idem_dispatch_thread(srv->dispatch);
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
		idem_deadline(&next, srv->svc->cfg->idem.cleanup_interval);
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

/* Starts the n worker threads of srv into tids.  Returns how many
 * started (all of them, or fewer after logging why). */
static unsigned
start_workers(server *srv, pthread_t *tids, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		int rc;

		pthread_mutex_lock(&srv->lock);
		srv->live++;
		pthread_mutex_unlock(&srv->lock);
		if ((rc = pthread_create(&tids[i], NULL, worker, srv)) != 0) {
			idem_log(NULL, IDEM_LOG_ERROR, "cannot start thread %u: %s",
			    i, strerror(rc));
			pthread_mutex_lock(&srv->lock);
			srv->live--;
			pthread_mutex_unlock(&srv->lock);
			return i;
		}
	}
	return n;
}

/* Waits for SIGTERM or SIGINT (SIGHUP and SIGUSR1 are logged and
 * ignored: this process reloads nothing; its master replaces it).
 * Returns the signal. */
static int
await_stop(void)
{
	sigset_t set;
	int sig = 0;

	signal_set(&set);
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
	return sig;
}

/*
 * Stops srv: no more accepting, the purge thread joined, the idle kept
 * connections closed, the requests in flight given shutdown-grace, then a
 * last try at the store's waiting jobs within what is left of it.
 * Returns whether every thread ended within shutdown-grace.
 */
static int
stop(server *srv, pthread_t *purge_tid)
{
	const idem_config *cfg = srv->svc->cfg;
	uint64_t one = 1, stop_at;
	int drained;

	pthread_mutex_lock(&srv->lock);
	atomic_store(&srv->stopping, 1);
	pthread_cond_signal(&srv->wake_purger);
	pthread_mutex_unlock(&srv->lock);
	if (purge_tid != NULL)
		pthread_join(*purge_tid, NULL);
	if (write(srv->stop_fd, &one, sizeof(one)) < 0)
		idem_log(NULL, IDEM_LOG_ERROR, "eventfd: %s", strerror(errno));
	idem_dispatch_close_idle(srv->dispatch);
	stop_at = idem_now_ms();
	drained = drain(srv, cfg->server.shutdown_grace) == 0;
	if (!drained)
		idem_log(NULL, IDEM_LOG_ERROR, "shutdown-grace ran out with %d "
		    "request(s) in flight; exiting anyway",
		    atomic_load(&srv->in_flight));
	/* a last try at the commits and releases waiting for the store,
	 * within what is left of shutdown-grace (a second at least) */
	if (srv->svc->mw != NULL) {
		uint64_t spent = idem_now_ms() - stop_at;
		idem_middleware_flush(srv->svc->mw, spent + 1000 <
		    cfg->server.shutdown_grace ? cfg->server.shutdown_grace - spent : 1000);
	}
	return drained;
}

int
idem_server_run(idem_service *svc, int listen_fd)
{
	server srv;
	pthread_condattr_t ca;
	pthread_t *tids, purge_tid;
	unsigned i, n = svc->cfg->server.threads, started;
	int sig = 0, purging = 0;

	memset(&srv, 0, sizeof(srv));
	srv.svc = svc;
	svc->listen_fd = listen_fd;
	atomic_init(&srv.stopping, 0);
	atomic_init(&srv.in_flight, 0);
	pthread_mutex_init(&srv.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv.done, &ca);
	pthread_cond_init(&srv.wake_purger, &ca);
	pthread_condattr_destroy(&ca);

	idem_server_block_signals();
	if (FCGX_Init() != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "FCGX_Init failed");
		return 1;
	}
	if (getenv("FCGI_WEB_SERVER_ADDRS") != NULL)
		idem_log(NULL, IDEM_LOG_WARN, "FCGI_WEB_SERVER_ADDRS is set and "
		    "ignored: idemfcgi accepts its connections itself, and "
		    "[server] allow-clients decides which peers may connect");
	srv.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	tids = calloc(n, sizeof(*tids));
	if (srv.stop_fd < 0 || tids == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "cannot start: %s",
		    strerror(errno));
		free(tids);
		return 1;
	}
	if ((srv.dispatch = idem_dispatch_new(svc, listen_fd, srv.stop_fd,
	    &srv.stopping, &srv.in_flight)) == NULL) {
		close(srv.stop_fd);
		free(tids);
		return 1;
	}
	if ((started = start_workers(&srv, tids, n)) < n)
		sig = -1;
	if (sig == 0 && svc->mw != NULL) {
		int rc = pthread_create(&purge_tid, NULL, purger, &srv);
		if (rc == 0)
			purging = 1;
		else
			idem_log(NULL, IDEM_LOG_WARN, "no purge thread: %s; "
			    "expired records are dropped only when reused",
			    strerror(rc));
	}
	if (sig == 0) {
		idem_log(NULL, IDEM_LOG_INFO, "serving with %u threads, at most "
		    "%u connections", n, idem_dispatch_max(srv.dispatch));
		sig = await_stop();
		idem_log(NULL, IDEM_LOG_INFO, "%s: no longer accepting; %d "
		    "request(s) in flight, waiting up to %llu ms",
		    sig == SIGTERM ? "SIGTERM" : "SIGINT",
		    atomic_load(&srv.in_flight),
		    (unsigned long long)svc->cfg->server.shutdown_grace);
	}
	if (!stop(&srv, purging ? &purge_tid : NULL))
		return IDEM_SERVER_ABANDONED;
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	idem_dispatch_free(srv.dispatch);
	close(srv.stop_fd);
	idem_log(NULL, IDEM_LOG_INFO, "stopped");
	return sig < 0 ? 1 : 0;
}
