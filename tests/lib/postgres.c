/*
 * postgres.c - driving tests/lib/postgres-ctl from the tests.
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
#include "postgres.h"

/* The postgres-ctl script, quoted for sh. */
static const char *
script(void)
{
	static char path[512];
	const char *src = getenv("IDEM_SRCDIR");

	snprintf(path, sizeof(path), "'%s/tests/lib/postgres-ctl'",
	    src != NULL ? src : ".");
	return path;
}

/* Runs postgres-ctl with args (quoted already); returns its exit status,
 * -1 when it did not exit. */
static int
ctl(const char *args)
{
	char cmd[1024];
	int rc;

	snprintf(cmd, sizeof(cmd), "%s %s", script(), args);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A new directory for a server into m->dir; 0 or -1. */
static int
new_dir(postgres *m)
{
	char tmp[200];

	memset(m, 0, sizeof(*m));
	/* under the build tree, so CI can find and stop what a crash left */
	snprintf(tmp, sizeof(tmp), "%s/tmp", harness_builddir());
	mkdir(tmp, 0755);
	snprintf(m->dir, sizeof(m->dir), "%s/postgres.XXXXXX", tmp);
	if (mkdtemp(m->dir) == NULL) {
		m->dir[0] = '\0';
		return -1;
	}
	/* user postgres enters it; an idemfcgi spawned as www-data reads
	 * the password file here */
	chmod(tmp, 0755);
	chmod(m->dir, 0755);
	return 0;
}

/* Runs postgres-ctl start or standby (primary non-NULL) in m->dir on a
 * free port, three tries; 0 or -1. */
static int
start_on_free_port(postgres *m, const postgres *primary)
{
	char args[768];
	int tries;

	/* a free port can be taken by another test before PostgreSQL binds
	 * it: then try another */
	for (tries = 0; tries < 3; tries++) {
		m->port = harness_free_port();
		if (primary != NULL)
			snprintf(args, sizeof(args), "standby '%s' '%s' %d",
			    m->dir, primary->dir, m->port);
		else
			snprintf(args, sizeof(args), "start '%s' %d", m->dir,
			    m->port);
		if (ctl(args) == 0)
			return 0;
	}
	return -1;
}

/* Installs and starts a new server. */
int
postgres_start(postgres *m)
{
	if (new_dir(m) != 0)
		return -1;
	return start_on_free_port(m, NULL);
}

/* Starts m again on its port and data. */
int
postgres_restart(postgres *m)
{
	char args[512];

	snprintf(args, sizeof(args), "start '%s' %d", m->dir, m->port);
	return ctl(args) == 0 ? 0 : -1;
}

/* Runs postgres-ctl VERB on m->dir; its exit status. */
static int
verb(const postgres *m, const char *what)
{
	char args[512];

	snprintf(args, sizeof(args), "%s '%s'", what, m->dir);
	return ctl(args);
}

/* Fast shutdown. */
int
postgres_stop(postgres *m)
{
	return verb(m, "stop");
}

/* SIGKILL, backends too. */
int
postgres_kill(postgres *m)
{
	return verb(m, "kill");
}

/* SIGSTOP, backends too. */
int
postgres_freeze(postgres *m)
{
	return verb(m, "freeze");
}

/* SIGCONT, backends too. */
int
postgres_thaw(postgres *m)
{
	return verb(m, "thaw");
}

/* Promotes a standby. */
int
postgres_promote(const postgres *m)
{
	return verb(m, "promote") == 0 ? 0 : -1;
}

/* Stops m and removes its directories. */
void
postgres_destroy(postgres *m)
{
	char cmd[768];
	const char *base;

	if (m->dir[0] == '\0')
		return;
	postgres_stop(m);
	base = strrchr(m->dir, '/');
	/* the socket directory postgres-ctl made in /tmp: empty now */
	snprintf(cmd, sizeof(cmd), "rm -rf '/tmp/idemfcgi-pg-%s'",
	    base != NULL ? base + 1 : m->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove the socket of %s\n", m->dir);
	if (getenv("IDEM_KEEP") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", m->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", m->dir);
	}
	m->dir[0] = '\0';
}

/* Runs sql; its output (caller frees) or NULL. */
char *
postgres_sql_on(const postgres *m, const char *db, const char *sql)
{
	static atomic_uint calls;
	char out[300], *q, *qdb, *cmd, *text = NULL;
	size_t n;
	FILE *fp;

	/* one file per call: tests run in parallel processes and threads */
	snprintf(out, sizeof(out), "%s/sql.%d.%u.out", m->dir, (int)getpid(),
	    atomic_fetch_add(&calls, 1));
	if ((fp = fopen(out, "w")) == NULL)
		return NULL;
	fclose(fp);
	q = harness_shquote(sql);
	qdb = harness_shquote(db);
	n = (q != NULL ? strlen(q) : 0) + (qdb != NULL ? strlen(qdb) : 0) +
	    strlen(m->dir) + sizeof(out) + 600;
	if (q == NULL || qdb == NULL || (cmd = malloc(n)) == NULL) {
		free(q);
		free(qdb);
		goto done;
	}
	snprintf(cmd, n, "%s sql '%s' %s %s >'%s'", script(), m->dir, q, qdb,
	    out);
	if (system(cmd) == 0)
		text = harness_slurp(out);
	free(cmd);
	free(q);
	free(qdb);
done:
	unlink(out);
	return text;
}

/* Runs sql on database idem. */
char *
postgres_sql(const postgres *m, const char *sql)
{
	return postgres_sql_on(m, "idem", sql);
}

/* Runs sql in the background. */
int
postgres_sql_background(const postgres *m, const char *sql)
{
	char *q, *cmd;
	size_t n;
	int rc;

	if ((q = harness_shquote(sql)) == NULL)
		return -1;
	n = strlen(q) + strlen(m->dir) + 600;
	if ((cmd = malloc(n)) == NULL) {
		free(q);
		return -1;
	}
	snprintf(cmd, n, "%s sql '%s' %s >/dev/null 2>&1 &", script(), m->dir,
	    q);
	rc = system(cmd) == 0 ? 0 : -1;
	free(cmd);
	free(q);
	return rc;
}

/* Creates database db afresh. */
int
postgres_new_database(const postgres *m, const char *db)
{
	char args[768];

	snprintf(args, sizeof(args), "database '%s' '%s'", m->dir, db);
	return ctl(args) == 0 ? 0 : -1;
}

/* The [postgres] section for m. */
void
postgres_conf(const postgres *m, char *buf, size_t size)
{
	snprintf(buf, size, "[postgres]\nhost = 127.0.0.1\nport = %d\n"
	    "user = idem\npassword-file = %s/password\ndatabase = idem\n",
	    m->port, m->dir);
}

/* Makes out a standby of primary. */
int
postgres_standby(postgres *out, const postgres *primary)
{
	if (new_dir(out) != 0)
		return -1;
	return start_on_free_port(out, primary);
}

/* The server the runner exported. */
int
postgres_from_env(postgres *m)
{
	const char *dir = getenv("IDEM_TEST_POSTGRES_DIR");
	const char *port = getenv("IDEM_TEST_POSTGRES_PORT");

	memset(m, 0, sizeof(*m));
	if (dir == NULL || port == NULL)
		return -1;
	snprintf(m->dir, sizeof(m->dir), "%s", dir);
	m->port = atoi(port);
	return 0;
}

/* Exports m for postgres_from_env. */
void
postgres_to_env(const postgres *m)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", m->port);
	setenv("IDEM_TEST_POSTGRES_DIR", m->dir, 1);
	setenv("IDEM_TEST_POSTGRES_PORT", port, 1);
}
