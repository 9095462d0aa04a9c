/*
 * galera.c - driving tests/lib/galera-ctl from the tests.
 */
#include "config.h"

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "galera.h"
#include "harness.h"
#include "mariadb.h"

/* the ports a cluster uses, from its base */
#define GALERA_PORTS 12

/* Runs galera-ctl with args; returns its exit status. */
static int
ctl(const char *args)
{
	char cmd[2048];
	const char *src = getenv("IDEM_SRCDIR");
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s/tests/lib/galera-ctl' %s",
	    src != NULL ? src : ".", args);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void
set_ports(galera *g, int base)
{
	int i;

	g->baseport = base;
	for (i = 0; i < 3; i++)
		g->port[i] = base + 4 * i;
}

/* Whether port can be bound on 127.0.0.1 now. */
static int
port_free(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	if (fd < 0)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((unsigned short)port);
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/*
 * A base of 12 free ports, below the kernel's ephemeral range (32768 and
 * up) where harness_free_port's ports and every outgoing connection's
 * come from; at random, so that clusters of programs running at once
 * rarely pick the same.  -1 if none was found.
 */
static int
free_base(void)
{
	unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^
	    (unsigned)clock();
	int tries, base, p;

	for (tries = 0; tries < 200; tries++) {
		base = 20000 + 12 * (rand_r(&seed) % 1000);
		for (p = 0; p < GALERA_PORTS && port_free(base + p); p++)
			;
		if (p == GALERA_PORTS)
			return base;
	}
	return -1;
}

int
galera_start(galera *g, const char *options)
{
	char args[1024], tmp[200];
	int tries;

	memset(g, 0, sizeof(*g));
	/* under the build tree, so CI can find and stop what a crash left */
	snprintf(tmp, sizeof(tmp), "%s/tmp", harness_builddir());
	mkdir(tmp, 0755);
	snprintf(g->dir, sizeof(g->dir), "%s/galera.XXXXXX", tmp);
	if (mkdtemp(g->dir) == NULL) {
		g->dir[0] = '\0';
		return -1;
	}
	/* mariadbd runs as mysql, an idemfcgi as www-data reads the password
	 * file: both go through these */
	chmod(tmp, 0755);
	chmod(g->dir, 0755);
	/* free ports can be taken by another test before the nodes bind
	 * them: then try others (galera-ctl left no half-made install) */
	for (tries = 0; tries < 3; tries++) {
		int base = free_base();

		if (base < 0)
			break;
		set_ports(g, base);
		snprintf(args, sizeof(args), "start '%s' %d %s", g->dir, base,
		    options != NULL ? options : "");
		if (ctl(args) == 0)
			return 0;
	}
	return -1;
}

int
galera_stop(galera *g)
{
	char args[512];

	snprintf(args, sizeof(args), "stop '%s'", g->dir);
	return ctl(args);
}

void
galera_destroy(galera *g)
{
	char cmd[512];

	if (g->dir[0] == '\0')
		return;
	galera_stop(g);
	if (getenv("IDEM_KEEP") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", g->dir);
	}
	g->dir[0] = '\0';
}

static int
node_cmd(galera *g, const char *cmd, int i)
{
	char args[512];

	if (i < 1 || i > 3)
		return -1;
	snprintf(args, sizeof(args), "%s '%s' %d", cmd, g->dir, i);
	return ctl(args) == 0 ? 0 : -1;
}

int
galera_stop_node(galera *g, int i)
{
	return node_cmd(g, "stop-node", i);
}

int
galera_kill_node(galera *g, int i)
{
	return node_cmd(g, "kill-node", i);
}

int
galera_start_node(galera *g, int i)
{
	return node_cmd(g, "start-node", i);
}

char *
galera_sql(const galera *g, int i, const char *sql)
{
	static atomic_uint calls;
	char cmd[4096], out[300];
	const char *src = getenv("IDEM_SRCDIR");
	char *text;
	FILE *fp;

	if (i < 1 || i > 3)
		return NULL;
	/* one file per call: tests run in parallel processes and threads */
	snprintf(out, sizeof(out), "%s/sql.%d.%u.out", g->dir, (int)getpid(),
	    atomic_fetch_add(&calls, 1));
	if ((fp = fopen(out, "w")) == NULL)
		return NULL;
	fclose(fp);
	/* stderr too: a node that is down is a normal answer here */
	snprintf(cmd, sizeof(cmd), "'%s/tests/lib/galera-ctl' sql '%s' %d "
	    "\"%s\" >'%s' 2>/dev/null", src != NULL ? src : ".", g->dir, i,
	    sql, out);
	if (system(cmd) != 0) {
		unlink(out);
		return NULL;
	}
	text = harness_slurp(out);
	unlink(out);
	return text;
}

/* A global status variable of node i into buf ("" if none). */
static char *
status_var(const galera *g, int i, const char *name, char *buf, size_t size)
{
	char sql[256], *out, *tab, *nl;

	buf[0] = '\0';
	snprintf(sql, sizeof(sql), "SHOW GLOBAL STATUS LIKE '%s'", name);
	if ((out = galera_sql(g, i, sql)) == NULL)
		return buf;
	if ((tab = strchr(out, '\t')) != NULL) {
		if ((nl = strchr(tab + 1, '\n')) != NULL)
			*nl = '\0';
		snprintf(buf, size, "%s", tab + 1);
	}
	free(out);
	return buf;
}

int
galera_size(const galera *g, int i)
{
	char buf[32];

	status_var(g, i, "wsrep_cluster_size", buf, sizeof(buf));
	return buf[0] != '\0' ? atoi(buf) : -1;
}

char *
galera_state(const galera *g, int i, char *buf, size_t size)
{
	return status_var(g, i, "wsrep_local_state_comment", buf, size);
}

int
galera_await_size(const galera *g, int i, int n, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (galera_size(g, i) == n)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
			return -1;
		usleep(50 * 1000);
	}
}

void
galera_conf(const galera *g, int i, char *buf, size_t size)
{
	mariadb m;

	galera_node_as_mariadb(g, i, &m);
	mariadb_conf_tcp(&m, buf, size);
}

void
galera_node_as_mariadb(const galera *g, int i, mariadb *m)
{
	const char *base = strrchr(g->dir, '/');
	char dir[sizeof(g->dir) * 2 + 16];
	size_t len;

	memset(m, 0, sizeof(*m));
	if (i < 1 || i > 3)
		return;
	/* galera-ctl's node directory: DIR/<basename of DIR>-I, with pid
	 * and password files, its socket named after it */
	snprintf(dir, sizeof(dir), "%s/%s-%d", g->dir,
	    base != NULL ? base + 1 : g->dir, i);
	if ((len = strlen(dir)) >= sizeof(m->dir))
		return;
	memcpy(m->dir, dir, len + 1);
	m->port = g->port[i - 1];
}

int
galera_from_env(galera *g)
{
	const char *dir = getenv("IDEM_TEST_GALERA_DIR");
	const char *base = getenv("IDEM_TEST_GALERA_BASEPORT");

	memset(g, 0, sizeof(*g));
	if (dir == NULL || base == NULL)
		return -1;
	snprintf(g->dir, sizeof(g->dir), "%s", dir);
	set_ports(g, atoi(base));
	return 0;
}

void
galera_to_env(const galera *g)
{
	char base[16];

	snprintf(base, sizeof(base), "%d", g->baseport);
	setenv("IDEM_TEST_GALERA_DIR", g->dir, 1);
	setenv("IDEM_TEST_GALERA_BASEPORT", base, 1);
}
