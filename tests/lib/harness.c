/*
 * harness.c - running the real idemfcgi binary for the tests.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fcgi_client.h"
#include "harness.h"
#include "idem_log.h"
#include "mariadb.h"
#include "postgres.h"
#include "redis.h"

ssize_t
harness_read_body(void *ctx, char *buf, size_t len)
{
	harness_body *b = ctx;
	size_t n = b->len - b->pos;

	b->calls++;
	if (n > len)
		n = len;
	if (b->chunk > 0 && n > b->chunk)
		n = b->chunk;
	memcpy(buf, b->data + b->pos, n);
	b->pos += n;
	return (ssize_t)n;
}

int
harness_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Whether loopback port port is free now (bound, then released). */
static int
port_free(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((unsigned short)port);
	ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

int
harness_free_ports(int n)
{
	int tries, base, i;

	/* below the ephemeral range's usual start, with each port's
	 * cluster bus (port + 10000) free too */
	srandom((unsigned)getpid() ^ (unsigned)time(NULL));
	for (tries = 0; tries < 200; tries++) {
		base = 20000 + (int)(random() % 12000);
		for (i = 0; i < n && port_free(base + i) &&
		    port_free(base + i + 10000); i++)
			;
		if (i == n)
			return base;
	}
	return -1;
}

char *
harness_shquote(const char *s)
{
	size_t n = 3;
	const char *p;
	char *q, *out;

	for (p = s; *p != '\0'; p++)
		n += *p == '\'' ? 4 : 1;
	if ((out = malloc(n)) == NULL)
		return NULL;
	q = out;
	*q++ = '\'';
	for (p = s; *p != '\0'; p++) {
		if (*p == '\'') {
			memcpy(q, "'\\''", 4);
			q += 4;
		} else
			*q++ = *p;
	}
	*q++ = '\'';
	*q = '\0';
	return out;
}

const char *
harness_builddir(void)
{
	const char *d = getenv("IDEM_BUILDDIR");

	return d != NULL ? d : ".";
}

/* The rest of fp, in a new string (caller frees), or NULL. */
static char *
read_all(FILE *fp)
{
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	do {
		if (len + 4096 + 1 > cap) {
			char *g;
			cap = cap ? cap * 2 : 8192;
			if ((g = realloc(buf, cap)) == NULL) {
				free(buf);
				return NULL;
			}
			buf = g;
		}
		n = fread(buf + len, 1, 4096, fp);
		len += n;
	} while (n > 0);
	buf[len] = '\0';
	return buf;
}

char *
harness_slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *buf;

	if (fp == NULL)
		return NULL;
	buf = read_all(fp);
	fclose(fp);
	return buf;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Starts the binary with args, stdout/stderr to out_path, and what o
 * asks of its environment and descriptors, as systemd passes them.
 * Returns the pid. */
static pid_t
spawn(char *const argv[], const char *out_path, const harness_opts *o)
{
	pid_t pid = fork();

	if (pid == 0) {
		char buf[64];
		size_t i;
		for (i = 0; o->env != NULL && o->env[i] != NULL; i++)
			putenv((char *)o->env[i]);
		if (o->listen_fd > 0) {
			/* fd 3, LISTEN_PID set after the fork: sd_listen_fds(3) */
			if (o->listen_fd != 3) {
				dup2(o->listen_fd, 3);
				close(o->listen_fd);
			}
			fcntl(3, F_SETFD, 0);
			snprintf(buf, sizeof(buf), "%ld", (long)getpid());
			setenv("LISTEN_PID", buf, 1);
			setenv("LISTEN_FDS", "1", 1);
		}
		/* its own process group: harness_kill takes master and workers;
		 * and it goes when the test does, even one that failed an
		 * assertion before harness_stop */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			struct stat st;
			dup2(fd, 1);
			dup2(fd, 2);
			if (o->journal && fstat(2, &st) == 0) {
				snprintf(buf, sizeof(buf), "%llu:%llu",
				    (unsigned long long)st.st_dev,
				    (unsigned long long)st.st_ino);
				setenv("JOURNAL_STREAM", buf, 1);
			}
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Whether addr ("unix:/path" or "HOST:PORT") accepts connections. */
static int
can_connect(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, ok;

	memset(&ss, 0, sizeof(ss));
	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un *sa = (struct sockaddr_un *)&ss;
		sa->sun_family = AF_UNIX;
		snprintf(sa->sun_path, sizeof(sa->sun_path), "%s", addr + 5);
		len = sizeof(*sa);
	} else {
		struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
		const char *colon = strrchr(addr, ':');
		sa->sin_family = AF_INET;
		sa->sin_port = htons((uint16_t)atoi(colon != NULL ? colon + 1 :
		    "0"));
		sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*sa);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

int
harness_start(harness *h, const harness_opts *opts)
{
	static const harness_opts none;
	const harness_opts *o = opts != NULL ? opts : &none;
	int mysql = o->mysql || o->mysql_tcp;
	char bin[512], my[600] = "", text[8192], *argv[4];
	int i;

	memset(h, 0, sizeof(*h));
	if (o->pg != NULL)
		postgres_conf(o->pg, my, sizeof(my));
	else if (o->redis != NULL)
		redis_conf(o->redis, my, sizeof(my));
	else if (mysql) {
		mariadb env;
		const mariadb *db = o->db;
		if (db == NULL) {
			if (mariadb_from_env(&env) != 0) {
				fprintf(stderr, "harness_start: no MariaDB for "
				    "mysql\n");
				return -1;
			}
			db = &env;
		}
		if (o->mysql_tcp)
			mariadb_conf_tcp(db, my, sizeof(my));
		else
			mariadb_conf(db, my, sizeof(my));
	}
	snprintf(h->dir, sizeof(h->dir), "/tmp/idemfcgi-test.XXXXXX");
	if (mkdtemp(h->dir) == NULL)
		return -1;
	/* web servers' workers (www-data) reach the socket through it */
	chmod(h->dir, 0755);
	if (o->listen != NULL)
		snprintf(h->addr, sizeof(h->addr), "%s", o->listen);
	else
		snprintf(h->addr, sizeof(h->addr), "unix:%s/fcgi.sock", h->dir);
	snprintf(h->conf, sizeof(h->conf), "%s/idemfcgi.conf", h->dir);
	if (o->testkit_log != NULL)
		snprintf(h->testkit_log, sizeof(h->testkit_log), "%s",
		    o->testkit_log);
	else
		snprintf(h->testkit_log, sizeof(h->testkit_log), "%s/testkit.log",
		    h->dir);
	snprintf(h->stderr_log, sizeof(h->stderr_log), "%s/stderr.log",
	    h->dir);
	snprintf(text, sizeof(text), "[server]\nlisten = %s\nsocket-mode = 0666\n"
	    "shutdown-grace = 10s\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "    @BUILDDIR@/.libs/ledger.so\n%s\n"
	    "[idempotency]\n%s%s\n%s%s\n[testkit]\nlog = %s\n",
	    h->addr, o->server != NULL ? o->server : "",
	    o->pg != NULL ? "store = postgres\n" : o->redis != NULL ?
	    "store = redis\n" : mysql ? "store = mysql\n" :
	    "", o->idem != NULL ? o->idem : "", my,
	    o->rest != NULL ? o->rest : "", h->testkit_log);
	if (harness_write_conf(h->conf, text) != 0)
		return -1;
	snprintf(bin, sizeof(bin), "%s/idemfcgi", harness_builddir());
	argv[0] = bin;
	argv[1] = "-c";
	argv[2] = h->conf;
	argv[3] = NULL;
	h->pid = spawn(argv, h->stderr_log, o);
	if (o->listen_fd > 0 && o->connect != NULL)
		snprintf(h->addr, sizeof(h->addr), "%s", o->connect);
	for (i = 0; i < 200; i++) {
		int status;
		if (can_connect(h->addr))
			return 0;
		if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
			h->pid = 0;
			break;
		}
		sleep_ms(25);
	}
	{
		char *err = harness_slurp(h->stderr_log);
		fprintf(stderr, "idemfcgi did not start:\n%s\n",
		    err != NULL ? err : "(no output)");
		free(err);
	}
	return -1;
}

int
harness_stop(harness *h)
{
	int status = 0, i, rc = -1;
	char cmd[300];

	if (h->pid > 0) {
		kill(h->pid, SIGTERM);
		for (i = 0; i < 2000; i++) {
			if (waitpid(h->pid, &status, WNOHANG) == h->pid)
				break;
			sleep_ms(10);
		}
		if (i == 2000) {
			kill(h->pid, SIGKILL);
			waitpid(h->pid, &status, 0);
		} else if (WIFEXITED(status)) {
			rc = WEXITSTATUS(status);
		} else if (WIFSIGNALED(status)) {
			rc = 128 + WTERMSIG(status);
		}
		h->pid = 0;
	}
	if (h->dir[0] != '\0' && getenv("IDEM_KEEP") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", h->dir);
	}
	return rc;
}

/* Counts the lines "<path> <key>[ <exec>]" of file; key NULL: any key. */
static size_t
count_in(const char *file, const char *path, const char *key)
{
	char *all = harness_slurp(file), *line, *save = NULL, end;
	size_t n = 0, plen = strlen(path), klen = key != NULL ? strlen(key) : 0;

	if (all == NULL)
		return 0;
	for (line = strtok_r(all, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, path, plen) != 0 || line[plen] != ' ')
			continue;
		if (key == NULL)
			n++;
		else if (strncmp(line + plen + 1, key, klen) == 0 &&
		    ((end = line[plen + 1 + klen]) == ' ' || end == '\0'))
			n++;
	}
	free(all);
	return n;
}

/* Counts testkit log lines "<path> <key> <exec>"; key NULL: any key. */
static size_t
count_lines(const harness *h, const char *path, const char *key)
{
	return count_in(h->testkit_log, path, key);
}

int
harness_outage_turn(void)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/outage.lock", harness_builddir());
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	return fd >= 0 && flock(fd, LOCK_EX) == 0 ? 0 : -1;
}

void
harness_log_reset(const char *log)
{
	static const char *const beside[] = { "", ".crashed", ".lifecycle",
	    ".started", ".flaky", ".release" };
	char path[4096];
	size_t i;

	for (i = 0; i < sizeof(beside) / sizeof(beside[0]); i++)
		if (snprintf(path, sizeof(path), "%s%s", log, beside[i]) <
		    (int)sizeof(path))
			unlink(path);
}

int
harness_await_started(
const harness *h, const char *path, const char *key,
    size_t n)
{
	char file[340];
	int i;

	snprintf(file, sizeof(file), "%s.started", h->testkit_log);
	for (i = 0; i < 1200; i++) {
		if (count_in(file, path, key) >= n)
			return 1;
		sleep_ms(50);
	}
	return 0;
}

int
harness_workers(const harness *h, int *pids, int max)
{
	DIR *proc = opendir("/proc");
	struct dirent *d;
	int n = 0;

	while (proc != NULL && n < max && (d = readdir(proc)) != NULL) {
		char path[300], buf[512], *p;
		FILE *fp;
		long ppid;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		if ((fp = fopen(path, "r")) == NULL)
			continue;
		if (fgets(buf, sizeof(buf), fp) != NULL &&
		    (p = strrchr(buf, ')')) != NULL &&
		    sscanf(p + 2, "%*c %ld", &ppid) == 1 && ppid == h->pid)
			pids[n++] = atoi(d->d_name);
		fclose(fp);
	}
	if (proc != NULL)
		closedir(proc);
	return n;
}

void
harness_kill(harness *h)
{
	int status;

	if (h->pid <= 0)
		return;
	kill(-h->pid, SIGKILL);
	waitpid(h->pid, &status, 0);
	h->pid = 0;
}

size_t
harness_count(const harness *h, const char *path)
{
	return count_lines(h, path, NULL);
}

size_t
harness_count_key(const harness *h, const char *path, const char *key)
{
	return count_lines(h, path, key);
}

int
harness_await_log(const harness *h, const char *text)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (harness_logged(h, text))
			return 1;
		sleep_ms(50);
	}
	return 0;
}

char *
harness_log(const harness *h)
{
	return harness_slurp(h->stderr_log);
}

int
harness_logged(const harness *h, const char *text)
{
	char *all = harness_log(h);
	int found = all != NULL && strstr(all, text) != NULL;

	free(all);
	return found;
}

int
harness_capture_begin(harness_capture *c)
{
	c->old_fd = -1;
	if ((c->fp = tmpfile()) == NULL)
		return -1;
	c->old_fd = idem_log_set_fd(fileno(c->fp));
	return 0;
}

char *
harness_capture_end(harness_capture *c)
{
	char *buf;

	if (c->fp == NULL)
		return NULL;
	idem_log_set_fd(c->old_fd);
	rewind(c->fp);
	buf = read_all(c->fp);
	fclose(c->fp);
	c->fp = NULL;
	return buf;
}

int
harness_capture_level(harness_capture *c, int level)
{
	if (harness_capture_begin(c) != 0)
		return -1;
	idem_log_set_level((idem_log_level)level);
	return 0;
}

void
harness_capture_into(harness_capture *c, char *buf, size_t size)
{
	char *text = harness_capture_end(c);

	idem_log_set_level(IDEM_LOG_ERROR + 1);
	snprintf(buf, size, "%s", text != NULL ? text : "");
	free(text);
}

int
harness_occurrences(const char *hay, const char *needle)
{
	int n = 0;

	for (; (hay = strstr(hay, needle)) != NULL; hay++)
		n++;
	return n;
}

char *
harness_subst(const char *text)
{
	static const char ph[] = "@BUILDDIR@";
	const size_t pl = sizeof(ph) - 1;
	const char *dir = harness_builddir(), *p;
	size_t n = 0, dl = strlen(dir);
	char *out, *w;

	for (p = text; (p = strstr(p, ph)) != NULL; p += pl)
		n++;
	if ((out = malloc(strlen(text) + n * dl + 1)) == NULL)
		return NULL;
	for (w = out, p = text; *p != '\0'; ) {
		if (strncmp(p, ph, pl) == 0) {
			memcpy(w, dir, dl);
			w += dl;
			p += pl;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	return out;
}

int
harness_write_conf(const char *path, const char *text)
{
	char *t = harness_subst(text);
	FILE *fp;
	int rc = -1;

	if (t != NULL && (fp = fopen(path, "w")) != NULL) {
		rc = fputs(t, fp) < 0 ? -1 : 0;
		if (fclose(fp) != 0)
			rc = -1;
	}
	free(t);
	return rc;
}

int
harness_run(const char *args, const char *conf_text, char **output)
{
	char dir[] = "/tmp/idemfcgi-run.XXXXXX", conf[128], out[128], cmd[1200];
	int status;

	*output = NULL;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(conf, sizeof(conf), "%s/test.conf", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	if (conf_text != NULL) {
		if (harness_write_conf(conf, conf_text) != 0)
			return -1;
		snprintf(cmd, sizeof(cmd), "'%s/idemfcgi' %s -c '%s' >'%s' 2>&1 "
		    "</dev/null", harness_builddir(), args, conf, out);
	} else {
		snprintf(cmd, sizeof(cmd), "'%s/idemfcgi' %s >'%s' 2>&1 "
		    "</dev/null", harness_builddir(), args, out);
	}
	status = system(cmd);
	*output = harness_slurp(out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double
harness_metric(const char *text, const char *series)
{
	size_t len = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[len] == ' ')
			return atof(p + len + 1);
		p += len;
	}
	return -1;
}

/* Past the label pair at p (name="value", escapes kept, and a ',' after
 * it), with its text in *pair and *len; NULL when p holds none. */
static const char *
label_pair(const char *p, const char **pair, size_t *len)
{
	const char *q = p;

	while (*q == '_' || isalnum((unsigned char)*q))
		q++;
	if (q == p || q[0] != '=' || q[1] != '"')
		return NULL;
	for (q += 2; *q != '\0' && *q != '"'; q++)
		if (*q == '\\' && q[1] != '\0')
			q++;
	if (*q != '"')
		return NULL;
	*pair = p;
	*len = (size_t)(++q - p);
	return *q == ',' ? q + 1 : q;
}

/* Past the '}' of the label set at p (after its '{'), or NULL when it
 * is malformed. */
static const char *
labels_end(const char *p)
{
	const char *pair;
	size_t len;

	while (p != NULL && *p != '}')
		p = label_pair(p, &pair, &len);
	return p != NULL ? p + 1 : NULL;
}

/* Whether the label set at p (after its '{') has the pair want (wlen
 * bytes). */
static int
has_pair(const char *p, const char *want, size_t wlen)
{
	const char *pair;
	size_t len;

	while (p != NULL && *p != '}') {
		p = label_pair(p, &pair, &len);
		if (p != NULL && len == wlen && memcmp(pair, want, len) == 0)
			return 1;
	}
	return 0;
}

double
harness_metric_sum(const char *text, const char *family, const char *labels)
{
	size_t flen = strlen(family), len;
	const char *line, *eol, *p, *end, *want, *pair;
	double sum = 0;
	int seen = 0, match;

	for (line = text; *line != '\0'; line = *eol != '\0' ? eol + 1 : eol) {
		eol = strchrnul(line, '\n');
		if (strncmp(line, family, flen) != 0 ||
		    (line[flen] != '{' && line[flen] != ' '))
			continue;
		p = line + flen;
		end = *p == '{' ? labels_end(p + 1) : p;
		if (end == NULL || *end != ' ')
			continue;
		for (match = 1, want = labels; match && *want != '\0'; ) {
			if ((want = label_pair(want, &pair, &len)) == NULL)
				return -1;
			match = *p == '{' && has_pair(p + 1, pair, len);
		}
		if (match) {
			sum += atof(end + 1);
			seen = 1;
		}
	}
	return seen ? sum : -1;
}

double
harness_route_outcome(const char *text, const char *method, const char *route,
    const char *outcome)
{
	char series[320];

	snprintf(series, sizeof(series), "idemfcgi_idempotency_outcomes_total"
	    "{method=\"%s\",route=\"%s\",outcome=\"%s\"}", method, route,
	    outcome);
	return harness_metric(text, series);
}

double
harness_outcome(const char *text, const char *outcome)
{
	char labels[64];

	snprintf(labels, sizeof(labels), "outcome=\"%s\"", outcome);
	return harness_metric_sum(text, "idemfcgi_idempotency_outcomes_total",
	    labels);
}

const char *
harness_head_find(const char *head, const char *name)
{
	static __thread char value[1024];
	size_t nlen = strlen(name);
	const char *p = head;

	while (p != NULL && *p != '\0') {
		const char *eol = strstr(p, "\r\n");
		size_t llen = eol != NULL ? (size_t)(eol - p) : strlen(p);
		if (llen > nlen && strncasecmp(p, name, nlen) == 0 &&
		    p[nlen] == ':') {
			const char *v = p + nlen + 1;
			while (*v == ' ')
				v++;
			snprintf(value, sizeof(value), "%.*s",
			    (int)(llen - (size_t)(v - p)), v);
			return value;
		}
		p = eol != NULL ? eol + 2 : NULL;
	}
	return NULL;
}

char *
harness_scrape(const harness *h)
{
	fc_response r;
	char *text = NULL;

	if (fc_http(h->addr, "GET", "/metrics", NULL, NULL, &r) != 0)
		return NULL;
	if (r.status == 200 && r.body != NULL)
		text = strdup(r.body);
	fc_response_free(&r);
	return text;
}
