/*
 * idem_master.c - forking, watching and replacing the worker processes.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "idem_key.h"
#include "idem_log.h"
#include "idem_store_open.h"
#include "idem_master.h"
#include "idem_metrics.h"
#include "idem_server.h"
#include "idem_service.h"
#include "idem_systemd.h"
#include "idem_time.h"

#define MAX_WORKERS 512          /* two generations during a reload */
#define MAX_LATE 64              /* dead workers awaiting a second sweep */
#define EXIT_STARTUP 3           /* a worker that could not start */
#define PROBE_MS 1000            /* tries of a database not up yet */

/* What a master whose store is set aside is doing. */
typedef enum wait_state {
	WAIT_NONE = 0,               /* the store is in use */
	WAIT_PROBING,                /* trying the database every PROBE_MS */
	WAIT_RELOAD                  /* it answered but the store could not
	                              * be set up: until a SIGHUP */
} wait_state;

typedef struct worker {
	pid_t pid;                   /* 0: free slot */
	char instance[17];           /* owner tokens of its reservations */
	uint64_t started;            /* ms */
	int old;                     /* replaced by a reload: draining */
} worker;

/* A dead worker whose reservations are swept again: a statement it sent
 * just before it died may reach the database after the first sweep. */
typedef struct late_sweep {
	char instance[17];           /* "" : free */
	pid_t pid;
	uint64_t due;                /* ms */
	int pass;                    /* sweeps done */
} late_sweep;

typedef struct master {
	const char *path;
	const char *plugin_dir;
	idem_config *cfg;            /* the current generation's */
	int fd;
	idem_metrics *metrics;       /* shared with the workers; NULL: off */
	worker w[MAX_WORKERS];
	late_sweep late[MAX_LATE];
	unsigned failures;           /* workers that died young in a row */
	unsigned pending;            /* restarts waiting for their time */
	uint64_t restart_at;         /* ms */
	int stopping;
	uint64_t deadline;           /* ms: when a stop kills (stopping) */
	int status;                  /* exit status so far */
	wait_state waiting;          /* the workers' store is set aside */
	uint64_t probe_at;           /* ms: WAIT_PROBING's next try */
	uint64_t ping_ms;            /* the watchdog's period / 2; 0: none */
	uint64_t ping_at;            /* ms */
	pid_t withheld;              /* the stopped worker the watchdog's
	                              * pings wait for; 0: none */
} master;

/* The body of a worker process.  Returns its exit status. */
static int
worker_main(master *m, const char *instance, unsigned slot)
{
	idem_service *svc;
	sigset_t chld;
	int rc;

	/* a worker outlives no master */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_UNBLOCK, &chld, NULL);
	if (idem_service_new(m->cfg, m->plugin_dir, &svc) != IDEM_OK)
		return EXIT_STARTUP;
	if (svc->mw != NULL)
		idem_middleware_set_instance(svc->mw, instance);
	idem_service_set_metrics(svc, m->metrics, slot);
	rc = idem_server_run(svc, m->fd);
	/* teardown, unless handlers still run (see idemfcgi.h "Lifecycle") */
	if (rc == IDEM_SERVER_ABANDONED)
		return 1;
	idem_service_free(svc);
	return rc;
}

/* Forks one worker into a free slot.  Returns 0 or -1. */
static int
spawn(master *m)
{
	char instance[17];
	pid_t pid;
	int i;

	for (i = 0; i < MAX_WORKERS && m->w[i].pid != 0; i++)
		;
	if (i == MAX_WORKERS)
		return -1;
	idem_random_id(instance);
	if ((pid = fork()) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		_exit(worker_main(m, instance, (unsigned)i));
	m->w[i].pid = pid;
	m->w[i].old = 0;
	m->w[i].started = idem_now_ms();
	memcpy(m->w[i].instance, instance, sizeof(instance));
	idem_log(NULL, IDEM_LOG_INFO, "worker %ld started (instance %s)",
	    (long)pid, instance);
	return 0;
}

/* Sweeps of a dead worker's reservations: at once, then twice more for
 * statements that were still on their way. */
#define NSWEEPS 3

/* When sweep pass (0 to NSWEEPS - 1) of a dead worker's reservations is
 * due, in ms after its death: at once, after a second, and when every
 * INSERT it left waiting on a row lock has ended (the store's settle
 * time; the server runs such a statement to its end although its client
 * is gone), 5 s at the least. */
static uint64_t
sweep_after_ms(const master *m, int pass)
{
	uint64_t settle = idem_store_settle_for(m->cfg);

	if (pass == 0)
		return 0;
	if (pass == 1)
		return 1000;
	return settle > 5000 ? settle : 5000;
}

/*
 * Deletes the reservations of dead worker pid (owner tokens of instance),
 * so the clients' retries run now rather than after inflight-ttl.  pass 0
 * is the sweep at its death; later passes catch a reservation whose INSERT
 * the database read from the dead connection after pass 0, and log only
 * when they find one.  With the memory store they died with it.
 */
static void
sweep(master *m, pid_t pid, const char *instance, int pass)
{
	idem_store *s = NULL;
	idem_store_key *keys = NULL;
	char prefix[20], list[1024];
	size_t n = 0, i, used = 0;

	if (!m->cfg->idem.enabled || m->cfg->idem.store == IDEM_STORE_MEMORY)
		return;
	snprintf(prefix, sizeof(prefix), "%s.", instance);
	if (idem_store_open(m->cfg, 1, &s) != IDEM_OK ||
	    idem_store_release_prefix(s, prefix, &keys, &n) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "could not release the "
		    "reservations of dead worker %ld (instance %s): they are "
		    "taken over after inflight-ttl", (long)pid, instance);
		idem_store_close(s);
		free(keys);
		return;
	}
	list[0] = '\0';
	for (i = 0; i < n && used + 20 < sizeof(list); i++) {
		char hash[17];
		idem_key_hash(keys[i].scope, keys[i].key, keys[i].key_len, hash);
		used += (size_t)snprintf(list + used, sizeof(list) - used, " %s",
		    hash);
	}
	if (m->metrics != NULL)
		idem_metrics_outcome(m->metrics, IDEM_METRICS_NO_ROUTE,
		    IDEM_OUTCOME_DEAD_WORKER_RELEASED, n);
	if (pass == 0)
		idem_log(NULL, n > 0 ? IDEM_LOG_WARN : IDEM_LOG_INFO, "released "
		    "%zu reservation(s) of dead worker %ld (instance %s); their "
		    "retries run again:%s", n, (long)pid, instance, n > 0 ? list :
		    " none");
	else if (n > 0)
		idem_log(NULL, IDEM_LOG_WARN, "released %zu more reservation(s) "
		    "of dead worker %ld (instance %s), written after it died; "
		    "their retries run again:%s", n, (long)pid, instance, list);
	free(keys);
	idem_store_close(s);
}

/* A worker died without draining: sweeps its reservations now and plans
 * the later sweeps. */
static void
release_dead(master *m, const worker *w)
{
	int i;

	/* a worker whose store was set aside reserved nothing */
	if (!m->cfg->idem.enabled || m->cfg->idem.store == IDEM_STORE_MEMORY ||
	    m->cfg->store_aside)
		return;
	sweep(m, w->pid, w->instance, 0);
	for (i = 0; i < MAX_LATE && m->late[i].instance[0] != '\0'; i++)
		;
	if (i == MAX_LATE)
		return;      /* a crash loop: inflight-ttl frees the rest */
	memcpy(m->late[i].instance, w->instance, sizeof(w->instance));
	m->late[i].pid = w->pid;
	m->late[i].pass = 1;
	m->late[i].due = idem_now_ms() + sweep_after_ms(m, 1);
}

/* Runs the later sweeps that are due; returns ms until the next one
 * (UINT64_MAX: none). */
static uint64_t
late_sweeps(master *m)
{
	uint64_t now = idem_now_ms(), next = UINT64_MAX;
	int i;

	for (i = 0; i < MAX_LATE; i++) {
		late_sweep *l = &m->late[i];
		if (l->instance[0] == '\0')
			continue;
		if (now >= l->due) {
			sweep(m, l->pid, l->instance, l->pass);
			if (++l->pass >= (int)NSWEEPS) {
				l->instance[0] = '\0';
				continue;
			}
			l->due = now + sweep_after_ms(m, l->pass) -
			    sweep_after_ms(m, l->pass - 1);
		}
		if (l->due - now < next)
			next = l->due - now;
	}
	return next;
}

/* Describes a wait status into buf. */
static const char *
describe(int status, char *buf, size_t size)
{
	if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
	return buf;
}

/* Reaps every worker that exited, and plans restarts. */
static void
reap(master *m)
{
	char how[64];
	pid_t pid;
	int status, i;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		worker w;
		int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;

		for (i = 0; i < MAX_WORKERS && m->w[i].pid != pid; i++)
			;
		if (i == MAX_WORKERS)
			continue;
		w = m->w[i];
		m->w[i].pid = 0;
		if (m->metrics != NULL)
			idem_metrics_slot_reset(m->metrics, (unsigned)i);
		describe(status, how, sizeof(how));
		/* the exit status tells whether the final drain was clean */
		if (!clean && m->stopping)
			m->status = 1;
		if (w.old || m->stopping) {
			idem_log(NULL, clean ? IDEM_LOG_INFO : IDEM_LOG_WARN,
			    "worker %ld stopped (%s)", (long)pid, how);
			if (!clean)
				release_dead(m, &w);
			continue;
		}
		/* died while it should be serving */
		if (idem_now_ms() - w.started < 5000)
			m->failures++;
		else
			m->failures = 0;
		release_dead(m, &w);
		m->pending++;
		if (m->metrics != NULL)
			idem_metrics_restart(m->metrics);
		if (m->failures == 0) {
			m->restart_at = idem_now_ms();
		} else {
			uint64_t delay = 100ULL << (m->failures > 7 ? 7 :
			    m->failures - 1);
			if (delay > 10000)
				delay = 10000;
			m->restart_at = idem_now_ms() + delay;
		}
		idem_log(NULL, IDEM_LOG_ERROR, "worker %ld died (%s)%s; "
		    "restarting it in %llu ms", (long)pid, how,
		    WIFEXITED(status) && WEXITSTATUS(status) == EXIT_STARTUP ?
		    " at start-up" : "",
		    (unsigned long long)(m->restart_at - idem_now_ms()));
	}
}

/* Workers still running. */
static unsigned
alive(const master *m)
{
	unsigned n = 0;
	int i;

	for (i = 0; i < MAX_WORKERS; i++)
		if (m->w[i].pid != 0)
			n++;
	return n;
}

/* Tells systemd the master serves: READY=1, and what it serves. */
static void
notify_ready(const master *m)
{
	if (m->waiting != WAIT_NONE)
		idem_sd_notifyf("READY=1\nSTATUS=%u worker(s); the database is "
		    "not up: keyed routes answer 503", m->cfg->server.workers);
	else
		idem_sd_notifyf("READY=1\nSTATUS=%u worker(s) serving",
		    m->cfg->server.workers);
}

/* Maps the shared metrics region once [metrics] is enabled; it then stays
 * for the master's life, so a reload keeps the counters. */
static void
open_metrics(master *m)
{
	if (m->metrics == NULL && m->cfg->metrics.enabled &&
	    idem_metrics_new(&m->metrics) != IDEM_OK)
		idem_log(NULL, IDEM_LOG_ERROR, "no shared metrics region: each "
		    "worker reports only its own requests");
}

/* Sets the master's waiting state from its config's store, and when it
 * probes, the time of its next try. */
static void
set_waiting(master *m, wait_state w)
{
	m->waiting = w;
	if (w == WAIT_PROBING)
		m->probe_at = idem_now_ms() + PROBE_MS;
}

/*
 * A new config, new workers, the old ones drained: at SIGHUP, and when
 * the database of a store set aside answers (probed).  The config file
 * is read again and checked whole (plugins, store, deploy) before
 * anything is replaced.  While the workers' store is set aside, the new
 * one may be set aside too, except after a probe, whose workers are
 * replaced only by ones with a store in use.
 */
static void
reload(master *m, int probed)
{
	idem_config *cfg;
	idem_service *svc;
	unsigned i, started = 0;

	if (probed)
		idem_log(NULL, IDEM_LOG_INFO, "%s store: the database "
		    "answers: reading %s to start serving keyed routes",
		    idem_store_names[m->cfg->idem.store], m->path);
	else
		idem_log(NULL, IDEM_LOG_INFO, "SIGHUP: reading %s", m->path);
	if (idem_config_load(m->path, &cfg) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: not reloaded; the workers "
		    "keep the old configuration", m->path);
		if (probed)
			set_waiting(m, WAIT_RELOAD);
		return;
	}
	cfg->store_may_wait = m->waiting != WAIT_NONE;
	/* check everything (plugins, store) before replacing anything */
	if (idem_service_check(cfg, m->plugin_dir, 1, &svc) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: not reloaded; the workers "
		    "keep the old configuration%s", m->path, probed ?
		    " (the store set aside: keyed routes answer 503): fix it "
		    "and reload" : "");
		if (probed)
			set_waiting(m, WAIT_RELOAD);
		return;
	}
	if (probed && svc->cfg->store_aside) {
		/* gone again before the check: wait on */
		idem_service_free(svc);
		set_waiting(m, WAIT_PROBING);
		return;
	}
	if ((svc->cfg->server.listen == NULL) != (m->cfg->server.listen == NULL) ||
	    (svc->cfg->server.listen != NULL &&
	    strcmp(svc->cfg->server.listen, m->cfg->server.listen) != 0))
		idem_log(NULL, IDEM_LOG_WARN, "listen changed: the socket stays "
		    "as it is until a restart");
	cfg = idem_service_release_config(svc);
	idem_service_free(svc);
	for (i = 0; i < MAX_WORKERS; i++)

		if (m->w[i].pid != 0)
			m->w[i].old = 1;
	idem_config_free(m->cfg);
	m->cfg = cfg;
	/* a probe of the new store's database, if still waiting */
	set_waiting(m, WAIT_NONE);
	set_waiting(m, cfg->store_aside ? WAIT_PROBING : WAIT_NONE);
	idem_log_set_level(cfg->server.log_level);
	idem_log_set_format(cfg->server.log_json ? IDEM_LOG_JSON : IDEM_LOG_TEXT);
	open_metrics(m);
	m->pending = 0;
	m->failures = 0;
	for (i = 0; i < cfg->server.workers; i++)
		started += spawn(m) == 0;
	/* the new workers accept now; the old ones stop accepting and finish
	 * what they hold */
	for (i = 0; i < MAX_WORKERS; i++)
		if (m->w[i].pid != 0 && m->w[i].old)
			kill(m->w[i].pid, SIGTERM);
	idem_log(NULL, IDEM_LOG_INFO, "reloaded: %u new worker(s); the old "
	    "ones are draining", started);
}

/* Tries the database of a store set aside when it is time; reloads once
 * it answers.  Returns ms until the next try (UINT64_MAX: none). */
static uint64_t
probe(master *m)
{
	uint64_t now = idem_now_ms();

	if (m->waiting != WAIT_PROBING || m->stopping)
		return UINT64_MAX;
	if (now < m->probe_at)
		return m->probe_at - now;
	m->probe_at = now + PROBE_MS;
	if (!idem_store_reachable(m->cfg))
		return PROBE_MS;
	idem_sd_reloading();
	reload(m, 1);
	notify_ready(m);
	return m->waiting == WAIT_PROBING ? PROBE_MS : UINT64_MAX;
}

/* The state of process pid in /proc ('R', 'S', 'T' ...); 0 when it
 * cannot be read. */
static char
proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	size_t n;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold anything, the state follows
	 * the last ')' */
	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ')
		return 0;
	return p[2];
}

/* Whether the watchdog may be told all is well: a worker runs, and none
 * is stopped (SIGSTOP; a tracer's stop is not one).  Sets *stopped to
 * the first stopped worker's pid (0: none). */
static int
healthy(const master *m, pid_t *stopped)
{
	int i, running = 0;

	*stopped = 0;
	for (i = 0; i < MAX_WORKERS; i++) {
		char st;
		if (m->w[i].pid == 0)
			continue;
		st = proc_state(m->w[i].pid);
		/* 't' (a tracer's stop: strace, gdb) is an operator at work,
		 * not a hang: it must not get every worker killed */
		if (st == 'T') {

			*stopped = m->w[i].pid;
			return 0;
		}
		running++;
	}
	return running > 0;
}

/* Pings the watchdog when due and the workers are alive.  Returns ms
 * until the next ping (UINT64_MAX: no watchdog). */
static uint64_t
watchdog(master *m)
{
	uint64_t now = idem_now_ms();
	pid_t stopped;

	if (m->ping_ms == 0)
		return UINT64_MAX;
	if (now < m->ping_at)
		return m->ping_at - now;
	m->ping_at = now + m->ping_ms;
	if (healthy(m, &stopped)) {
		if (m->withheld != 0) {
			idem_log(NULL, IDEM_LOG_INFO, "watchdog: worker %ld runs "
			    "again; pinging", (long)m->withheld);
			idem_sd_notify("STATUS=watchdog: pinging");
			m->withheld = 0;
		}
		idem_sd_notify("WATCHDOG=1");
	} else if (stopped != 0 && stopped != m->withheld) {
		idem_log(NULL, IDEM_LOG_ERROR, "watchdog: worker %ld is "
		    "stopped; no ping until it runs", (long)stopped);
		idem_sd_notifyf("STATUS=watchdog: worker %ld is stopped; no ping",
		    (long)stopped);
		m->withheld = stopped;
	}
	return m->ping_ms;
}

/* Starts the master m: its signals, its workers, the first READY.
 * Returns the signals it waits for. */
static sigset_t
master_start(master *m)
{
	sigset_t set;
	unsigned i;

	m->ping_ms = idem_sd_watchdog_ms() / 2;
	if (m->ping_ms == 0 && idem_sd_watchdog_ms() > 0)
		m->ping_ms = 1;
	set_waiting(m, m->cfg->store_aside ? WAIT_PROBING : WAIT_NONE);
	open_metrics(m);
	idem_server_block_signals();
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	for (i = 0; i < m->cfg->server.workers; i++)
		if (spawn(m) != 0) {
			m->pending++;
			m->restart_at = idem_now_ms() + 1000;
		}
	idem_log(NULL, IDEM_LOG_INFO, "master %ld: %u worker(s) x %u "
	    "thread(s)", (long)getpid(), m->cfg->server.workers, m->cfg->server.threads);
	/* the socket accepts (the workers take its connections as they
	 * come up), and the store is set up or set aside */
	notify_ready(m);
	return set;
}

/* Does what is due at now: restarts, the kill at a stop's deadline, the
 * late sweeps, the watchdog, the store's probe.  Returns the ms until the
 * next of them (at most a second). */
static uint64_t
master_tick(master *m, uint64_t now)
{
	uint64_t until = 1000, sweep_in, ping_in, probe_in;
	unsigned i;

	if (!m->stopping && m->pending > 0 && now >= m->restart_at) {
		while (m->pending > 0 && spawn(m) == 0)
			m->pending--;
	}
	if (m->stopping && now >= m->deadline) {
		idem_log(NULL, IDEM_LOG_ERROR, "workers still running "
		    "after shutdown-grace: killing them");
		for (i = 0; i < MAX_WORKERS; i++)
			if (m->w[i].pid != 0)
				kill(m->w[i].pid, SIGKILL);
		m->deadline = now + 60000;
		m->status = 1;
	}
	if (!m->stopping && m->pending > 0)
		until = m->restart_at > now ? m->restart_at - now : 0;
	sweep_in = late_sweeps(m);
	ping_in = watchdog(m);
	probe_in = probe(m);
	if (sweep_in < until)
		until = sweep_in;
	if (ping_in < until)
		until = ping_in;
	if (probe_in < until)
		until = probe_in;
	if (m->stopping && m->deadline > now && m->deadline - now < until)
		until = m->deadline - now;
	return until;
}

/* Acts on the signal sig (0: none came): a stop, a reload. */
static void
master_signal(master *m, int sig)
{
	unsigned i;

	if (sig == SIGTERM || sig == SIGINT) {
		if (!m->stopping) {
			idem_log(NULL, IDEM_LOG_INFO, "%s: stopping %u "
			    "worker(s)", sig == SIGTERM ? "SIGTERM" :
			    "SIGINT", alive(m));
			idem_sd_notify("STOPPING=1");
		}
		m->stopping = 1;
		m->deadline = idem_now_ms() + m->cfg->server.shutdown_grace + 5000;
		for (i = 0; i < MAX_WORKERS; i++)
			if (m->w[i].pid != 0)
				kill(m->w[i].pid, SIGTERM);
	} else if (sig == SIGHUP && !m->stopping) {
		idem_sd_reloading();
		reload(m, 0);
		notify_ready(m);
	} else if (sig == SIGUSR1) {
		idem_log(NULL, IDEM_LOG_INFO, "SIGUSR1 ignored");
	}
}

int
idem_master_run(const char *path, idem_config *cfg, int listen_fd,
    const char *plugin_dir)
{
	master *m = calloc(1, sizeof(*m));
	sigset_t set;
	unsigned i;
	int rc;

	if (m == NULL) {
		idem_config_free(cfg);
		return 1;
	}
	m->path = path;
	m->plugin_dir = plugin_dir;
	m->cfg = cfg;
	m->fd = listen_fd;
	set = master_start(m);
	for (;;) {
		struct timespec wait = { 0, 0 };
		uint64_t until;

		reap(m);
		if (m->metrics != NULL)
			idem_metrics_workers(m->metrics, alive(m));
		if (m->stopping && alive(m) == 0)
			break;
		until = master_tick(m, idem_now_ms());
		wait.tv_sec = (time_t)(until / 1000);
		wait.tv_nsec = (long)(until % 1000) * 1000000L;
		master_signal(m, sigtimedwait(&set, NULL, &wait));
	}
	/* the later sweeps of workers that died lately, without waiting */
	for (i = 0; i < MAX_LATE; i++)
		if (m->late[i].instance[0] != '\0')
			sweep(m, m->late[i].pid, m->late[i].instance,
			    m->late[i].pass);
	rc = m->status;
	idem_log(NULL, IDEM_LOG_INFO, "master stopped");
	idem_config_free(m->cfg);
	idem_metrics_free(m->metrics);
	free(m);
	return rc;
}
