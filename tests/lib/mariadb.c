/*
 * mariadb.c - driving tests/lib/mariadb-ctl from the tests.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "mariadb.h"

/* Runs mariadb-ctl with args; returns its exit status. */
static int
ctl(const char *args)
{
	char cmd[1024];
	const char *src = getenv("IDEM_SRCDIR");
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s/tests/lib/mariadb-ctl' %s",
	    src != NULL ? src : ".", args);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int
mariadb_start(mariadb *m)
{
	char args[512];
	int tries;

	char tmp[200];

	memset(m, 0, sizeof(*m));
	/* under the build tree, so CI can find and stop what a crash left */
	snprintf(tmp, sizeof(tmp), "%s/tmp", harness_builddir());
	mkdir(tmp, 0755);
	snprintf(m->dir, sizeof(m->dir), "%s/mariadb.XXXXXX", tmp);
	if (mkdtemp(m->dir) == NULL)
		return -1;
	/* an idemfcgi spawned as www-data reads the password file here */
	chmod(tmp, 0755);
	chmod(m->dir, 0755);
	/* a free port can be taken by another test before MariaDB binds it:
	 * then try another */
	for (tries = 0; tries < 3; tries++) {
		m->port = harness_free_port();
		snprintf(args, sizeof(args), "start '%s' %d", m->dir, m->port);
		if (ctl(args) == 0)
			return 0;
	}
	return -1;
}

int
mariadb_restart(mariadb *m)
{
	char args[512];

	snprintf(args, sizeof(args), "start '%s' %d", m->dir, m->port);
	return ctl(args) == 0 ? 0 : -1;
}

int
mariadb_stop(mariadb *m)
{
	char args[512];

	snprintf(args, sizeof(args), "stop '%s'", m->dir);
	return ctl(args);
}

int
mariadb_kill(mariadb *m)
{
	char args[512];

	snprintf(args, sizeof(args), "kill '%s'", m->dir);
	return ctl(args);
}

void
mariadb_destroy(mariadb *m)
{
	char cmd[512];

	if (m->dir[0] == '\0')
		return;
	mariadb_stop(m);
	if (getenv("IDEM_KEEP") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", m->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", m->dir);
	}
	m->dir[0] = '\0';
}

char *
mariadb_sql(const mariadb *m, const char *sql)
{
	static atomic_uint calls;
	char cmd[4096], out[300];
	const char *src = getenv("IDEM_SRCDIR");
	char *text;
	FILE *fp;

	/* one file per call: tests run in parallel processes and threads */
	snprintf(out, sizeof(out), "%s/sql.%d.%u.out", m->dir, (int)getpid(),
	    atomic_fetch_add(&calls, 1));
	if ((fp = fopen(out, "w")) == NULL)
		return NULL;
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "'%s/tests/lib/mariadb-ctl' sql '%s' \"%s\" "
	    ">'%s'", src != NULL ? src : ".", m->dir, sql, out);
	if (system(cmd) != 0)
		return NULL;
	text = harness_slurp(out);
	unlink(out);
	return text;
}

int
mariadb_sql_background(const mariadb *m, const char *sql)
{
	const char *src = getenv("IDEM_SRCDIR");
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "'%s/tests/lib/mariadb-ctl' sql '%s' \"%s\" "
	    ">/dev/null 2>&1 &", src != NULL ? src : ".", m->dir, sql);
	return system(cmd) == 0 ? 0 : -1;
}

int
mariadb_new_database(const mariadb *m, const char *db)
{
	const char *src = getenv("IDEM_SRCDIR");
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "'%s/tests/lib/mariadb-ctl' database '%s' "
	    "'%s'", src != NULL ? src : ".", m->dir, db);
	return system(cmd) == 0 ? 0 : -1;
}

long long
mariadb_status(const mariadb *m, const char *name)
{
	char sql[256], *out, *tab;
	long long v = -1;

	snprintf(sql, sizeof(sql), "SHOW GLOBAL STATUS LIKE '%s'", name);
	if ((out = mariadb_sql(m, sql)) == NULL)
		return -1;
	if ((tab = strchr(out, '\t')) != NULL)
		v = atoll(tab + 1);
	free(out);
	return v;
}

void
mariadb_conf_tcp(const mariadb *m, char *buf, size_t size)
{
	snprintf(buf, size, "[mysql]\nhost = 127.0.0.1\nport = %d\nuser = idem\n"
	    "password-file = %s/password\ndatabase = idem\n"
	    "connect-timeout = 2s\nread-timeout = 2s\nwrite-timeout = 2s\n",
	    m->port, m->dir);
}

void
mariadb_conf(const mariadb *m, char *buf, size_t size)
{
	const char *base = strrchr(m->dir, '/');

	/* the unix socket: no other test's server can ever answer on it */
	snprintf(buf, size, "[mysql]\nsocket = /tmp/idemfcgi-mdb-%s.sock\n"
	    "user = idem\npassword-file = %s/password\ndatabase = idem\n"
	    "connect-timeout = 2s\nread-timeout = 2s\nwrite-timeout = 2s\n",
	    base != NULL ? base + 1 : m->dir, m->dir);
}

int
mariadb_from_env(mariadb *m)
{
	const char *dir = getenv("IDEM_TEST_MARIADB_DIR");
	const char *port = getenv("IDEM_TEST_MARIADB_PORT");

	memset(m, 0, sizeof(*m));
	if (dir == NULL || port == NULL)
		return -1;
	snprintf(m->dir, sizeof(m->dir), "%s", dir);
	m->port = atoi(port);
	return 0;
}

void
mariadb_to_env(const mariadb *m)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", m->port);
	setenv("IDEM_TEST_MARIADB_DIR", m->dir, 1);
	setenv("IDEM_TEST_MARIADB_PORT", port, 1);
}
