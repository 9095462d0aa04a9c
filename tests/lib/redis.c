/*
 * redis.c - driving tests/lib/redis-ctl from the tests.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "redis.h"

/* The redis-ctl script, quoted for sh. */
static const char *
script(void)
{
	static char path[512];
	const char *src = getenv("IDEM_SRCDIR");

	snprintf(path, sizeof(path), "'%s/tests/lib/redis-ctl'",
	    src != NULL ? src : ".");
	return path;
}

/* Runs redis-ctl with args (quoted already); its exit status, -1 when it
 * did not exit. */
static int
ctl(const char *args)
{
	char cmd[2048];
	int rc;

	snprintf(cmd, sizeof(cmd), "%s %s", script(), args);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A new directory for a server into m->dir; 0 or -1. */
static int
new_dir(redis *m)
{
	char tmp[200];

	memset(m, 0, sizeof(*m));
	/* under the build tree, so CI can find and stop what a crash left */
	snprintf(tmp, sizeof(tmp), "%s/tmp", harness_builddir());
	mkdir(tmp, 0755);
	snprintf(m->dir, sizeof(m->dir), "%s/redis.XXXXXX", tmp);
	if (mkdtemp(m->dir) == NULL) {
		m->dir[0] = '\0';
		return -1;
	}
	return 0;
}

int
redis_start(redis *m, const char *options)
{
	char args[1024];
	int tries;

	if (new_dir(m) != 0)
		return -1;
	/* a free port can be taken by another test before Redis binds it */
	for (tries = 0; tries < 3; tries++) {
		m->port = harness_free_port();
		snprintf(args, sizeof(args), "start '%s' %d %s", m->dir, m->port,
		    options != NULL ? options : "");
		if (ctl(args) == 0)
			return 0;
	}
	return -1;
}

int
redis_restart(redis *m)
{
	char args[512];

	snprintf(args, sizeof(args), "start '%s' %d", m->dir, m->port);
	return ctl(args) == 0 ? 0 : -1;
}

/* Runs redis-ctl VERB on m->dir; its exit status. */
static int
verb(const redis *m, const char *what)
{
	char args[512];

	if (m->dir[0] == '\0')
		return 0;
	snprintf(args, sizeof(args), "%s '%s'", what, m->dir);
	return ctl(args);
}

int
redis_stop(redis *m)
{
	return verb(m, "stop");
}

int
redis_kill(redis *m)
{
	return verb(m, "kill");
}

int
redis_freeze(redis *m)
{
	return verb(m, "freeze");
}

int
redis_thaw(redis *m)
{
	return verb(m, "thaw");
}

int
redis_promote(const redis *m)
{
	return verb(m, "promote") == 0 ? 0 : -1;
}

void
redis_destroy(redis *m)
{
	char cmd[600];

	if (m->dir[0] == '\0')
		return;
	(void)verb(m, "stop");
	if (getenv("IDEM_KEEP") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", m->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "redis: cannot remove %s\n", m->dir);
	}
	m->dir[0] = '\0';
}

char *
redis_cli(const redis *m, const char *const *args, size_t nargs)
{
	char cmd[4096], *out;
	size_t n, i, len = 0, cap = 4096;
	FILE *p;
	int rc;

	n = (size_t)snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d",
	    m->port);
	for (i = 0; i < nargs && n < sizeof(cmd); i++) {
		char *q = harness_shquote(args[i]);
		if (q == NULL)
			return NULL;
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, " %s", q);
		free(q);
	}
	if (n >= sizeof(cmd) || (p = popen(cmd, "r")) == NULL)
		return NULL;
	if ((out = malloc(cap)) == NULL) {
		pclose(p);
		return NULL;
	}
	while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 512) {
			char *g = realloc(out, cap * 2);
			if (g == NULL)
				break;
			out = g;
			cap *= 2;
		}
	}
	out[len] = '\0';
	rc = pclose(p);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

char *
redis_cmd(const redis *m, const char *line)
{
	const char *words[16];
	char buf[1024], *save = NULL, *w;
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s", line);
	for (w = strtok_r(buf, " ", &save); w != NULL && n < 16;
	    w = strtok_r(NULL, " ", &save))
		words[n++] = w;
	return redis_cli(m, words, n);
}

int
redis_replicated(const redis *m)
{
	int tries;

	for (tries = 0; tries < 200; tries++) {
		char *info = redis_cmd(m, "INFO replication"), *p;
		long long want = -1, off;
		int ok = info != NULL, n = 0;

		if (info != NULL && (p = strstr(info, "master_repl_offset:")) !=
		    NULL)
			want = atoll(p + strlen("master_repl_offset:"));
		for (p = info; ok && p != NULL && (p = strstr(p, "slave")) !=
		    NULL; p++) {
			char *o = strstr(p, ",offset=");
			if (o == NULL || strchr(p, '\n') < o)
				continue;
			off = atoll(o + strlen(",offset="));
			n++;
			ok = off >= want;
		}
		free(info);
		if (ok && want >= 0 && n > 0)
			return 0;
		usleep(50 * 1000);
	}
	return -1;
}

void
redis_conf(const redis *m, char *buf, size_t size)
{
	snprintf(buf, size, "[redis]\nhost = 127.0.0.1\nport = %d\n", m->port);
}

int
redis_replica(redis *out, const redis *primary)
{
	char args[1024];
	int tries;

	if (new_dir(out) != 0)
		return -1;
	for (tries = 0; tries < 3; tries++) {
		out->port = harness_free_port();
		snprintf(args, sizeof(args), "replica '%s' '%s' %d", out->dir,
		    primary->dir, out->port);
		if (ctl(args) == 0)
			return 0;
	}
	return -1;
}

int
redis_cluster(redis *m, int masters, int replicas)
{
	char args[1024];
	int tries, n = masters * (1 + replicas);

	if (new_dir(m) != 0)
		return -1;
	for (tries = 0; tries < 3; tries++) {
		m->port = harness_free_ports(n);
		snprintf(args, sizeof(args), "cluster '%s' %d %d %d", m->dir,
		    m->port, masters, replicas);
		if (ctl(args) == 0)
			return 0;
		(void)verb(m, "stop");
	}
	return -1;
}

void
redis_cluster_node(const redis *m, int i, redis *node)
{
	char d[sizeof(node->dir)];

	/* m->dir is a directory under the build tree, well short of it */
	snprintf(d, sizeof(d), "%.200s/node-%d", m->dir, i);
	memcpy(node->dir, d, sizeof(d));
	node->port = m->port + i;
}

int
redis_from_env(redis *m)
{
	const char *dir = getenv("IDEM_TEST_REDIS_DIR");
	const char *port = getenv("IDEM_TEST_REDIS_PORT");

	memset(m, 0, sizeof(*m));
	if (dir == NULL || port == NULL)
		return -1;
	snprintf(m->dir, sizeof(m->dir), "%s", dir);
	m->port = atoi(port);
	return 0;
}

void
redis_to_env(const redis *m)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", m->port);
	setenv("IDEM_TEST_REDIS_DIR", m->dir, 1);
	setenv("IDEM_TEST_REDIS_PORT", port, 1);
}
