/*
 * websrv.c - private lighttpd, Apache and nginx instances for the tests.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "websrv.h"

#define MODS "/usr/lib/apache2/modules"

static const char *const names[] = { "lighttpd", "lighttpd-spawn",
    "apache-proxy-tcp", "apache-proxy-unix", "apache-fcgid", "nginx",
    "nginx-split" };

const char *
websrv_name(websrv_kind kind)
{
	return names[kind];
}

static const char *
srcdir(void)
{
	const char *s = getenv("IDEM_SRCDIR");

	return s != NULL ? s : ".";
}

static void
nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Writes text to dir/name; returns 0 or -1. */
static int
write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "w")) == NULL)
		return -1;
	fputs(text, fp);
	fclose(fp);
	chmod(path, 0644);
	return 0;
}

/* The idemfcgi config for a web server that starts idemfcgi itself. */
static int
write_spawn_conf(websrv *w, const char *idem_conf)
{
	char text[4096], path[400];

	snprintf(text, sizeof(text), "[server]\nthreads = 8\nmax-body = 64k\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so "
	    "@BUILDDIR@/.libs/ledger.so\n%s\n[testkit]\nlog = %s\n", idem_conf,
	    w->testkit_log);
	snprintf(path, sizeof(path), "%s/idemfcgi.conf", w->dir);
	if (harness_write_conf(path, text) != 0)
		return -1;
	chmod(path, 0644);
	return 0;
}

static int
write_lighttpd(websrv *w, const char *socket)
{
	char text[4096];
	const char *b = harness_builddir();

	snprintf(text, sizeof(text),
	    "server.document-root = \"%s\"\n"
	    "server.bind = \"127.0.0.1\"\n"
	    "server.port = %d\n"
	    "server.pid-file = \"%s/lighttpd.pid\"\n"
	    "server.errorlog = \"%s/error.log\"\n"
	    "var.idem_mount = \"/api\"\n"
	    "var.idem_socket = \"%s\"\n"
	    "var.idem_bin = \"%s/idemfcgi\"\n"
	    "var.idem_conf = \"%s/idemfcgi.conf\"\n"
	    "include \"%s/conf/%s\"\n",
	    w->dir, w->port, w->dir, w->dir, socket, b, w->dir, srcdir(),
	    w->kind == WS_LIGHTTPD ? "lighttpd.conf" : "lighttpd-spawn.conf");
	return write_file(w->dir, "lighttpd.conf", text);
}

static int
write_apache(websrv *w, const char *backend, const char *idem_conf)
{
	char text[4096];
	int fcgid = w->kind == WS_APACHE_FCGID;
	int memory = strstr(idem_conf, "store = mysql") == NULL;

	snprintf(text, sizeof(text),
	    "ServerRoot /etc/apache2\n"
	    "DefaultRuntimeDir %s\n"
	    "PidFile %s/httpd.pid\n"
	    "ServerName 127.0.0.1\n"
	    "Listen 127.0.0.1:%d\n"
	    "User www-data\nGroup www-data\n"
	    "ErrorLog %s/error.log\nLogLevel warn\n"
	    "LoadModule mpm_event_module " MODS "/mod_mpm_event.so\n"
	    "LoadModule authz_core_module " MODS "/mod_authz_core.so\n"
	    "LoadModule setenvif_module " MODS "/mod_setenvif.so\n"
	    "%s"
	    "Define IDEM_MOUNT /api\n"
	    "Define IDEM_BACKEND %s\n"
	    "Define IDEM_BIN %s/idemfcgi\n"
	    "Define IDEM_CONF %s/idemfcgi.conf\n"
	    "Define IDEM_MAX_REQUEST 131072\n"
	    "Include %s/conf/%s\n",
	    w->dir, w->dir, w->port, w->dir,
	    fcgid ? (memory ?
	    "LoadModule alias_module " MODS "/mod_alias.so\n"
	    "LoadModule fcgid_module " MODS "/mod_fcgid.so\n"
	    "FcgidIPCDir ${IDEM_DIR}/fcgid\n"
	    "FcgidProcessTableFile ${IDEM_DIR}/fcgid/shm\n"
	    "FcgidMaxProcessesPerClass 1\n" :
	    "LoadModule alias_module " MODS "/mod_alias.so\n"
	    "LoadModule fcgid_module " MODS "/mod_fcgid.so\n"
	    "FcgidIPCDir ${IDEM_DIR}/fcgid\n"
	    "FcgidProcessTableFile ${IDEM_DIR}/fcgid/shm\n"
	    "FcgidMaxProcessesPerClass 8\n") :
	    "LoadModule proxy_module " MODS "/mod_proxy.so\n"
	    "LoadModule proxy_fcgi_module " MODS "/mod_proxy_fcgi.so\n",
	    backend, harness_builddir(), w->dir, srcdir(),
	    fcgid ? "apache-fcgid.conf" : "apache-proxy-fcgi.conf");
	return write_file(w->dir, "httpd.conf", text);
}

/* Writes conf/nginx/idemfcgi-upstream.conf to w->dir with the packaged
 * socket replaced by sock, as an operator edits its server line; returns 0
 * or -1. */
static int
write_nginx_upstream(websrv *w, const char *sock)
{
	static const char packaged[] = "/run/idemfcgi/idemfcgi.sock";
	char path[400], *text, *at, *out;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "%s/conf/nginx/idemfcgi-upstream.conf",
	    srcdir());
	if ((text = harness_slurp(path)) == NULL)
		return -1;
	if ((at = strstr(text, "server unix:/run/idemfcgi/idemfcgi.sock;"))
	    == NULL) {
		fprintf(stderr, "%s: no server line with %s\n", path, packaged);
		free(text);
		return -1;
	}
	at += strlen("server unix:");
	len = strlen(text) + strlen(sock) + 1;
	if ((out = malloc(len)) == NULL) {
		free(text);
		return -1;
	}
	snprintf(out, len, "%.*s%s%s", (int)(at - text), text, sock,
	    at + strlen(packaged));
	rc = write_file(w->dir, "idemfcgi-upstream.conf", out);
	free(out);
	free(text);
	return rc;
}

/* An nginx of two workers in front of idemfcgi's unix socket with the
 * files of conf/nginx/ as a user includes them: the upstream (its socket
 * edited) in http, the error snippet in server and the fastcgi snippet in
 * the location, at /api (idemfcgi's mount) or, for WS_NGINX_SPLIT, at
 * /svc/v1 split by fastcgi_split_path_info; every path of its own in
 * w->dir (PLATFORM.md, "nginx privately"). */
static int
write_nginx(websrv *w, const char *sock)
{
	char text[4096], split[128] = "";
	const char *d = w->dir, *mount = "/api";

	if (write_nginx_upstream(w, sock) != 0)
		return -1;
	if (w->kind == WS_NGINX_SPLIT) {
		mount = "/svc/v1";
		snprintf(split, sizeof(split), "            "
		    "fastcgi_split_path_info ^(%s)(/.*)$;\n", mount);
	}
	snprintf(text, sizeof(text),
	    "user root;\n"
	    "worker_processes 2;\n"
	    "pid %s/nginx.pid;\n"
	    "error_log %s/error.log warn;\n"
	    "events { worker_connections 1024; }\n"
	    "http {\n"
	    "    access_log off;\n"
	    "    client_body_temp_path %s/client_body;\n"
	    "    fastcgi_temp_path %s/fastcgi;\n"
	    "    proxy_temp_path %s/proxy;\n"
	    "    uwsgi_temp_path %s/uwsgi;\n"
	    "    scgi_temp_path %s/scgi;\n"
	    "    include %s/idemfcgi-upstream.conf;\n"
	    "    server {\n"
	    "        listen 127.0.0.1:%d;\n"
	    "        include %s/conf/nginx/idemfcgi-errors.conf;\n"
	    "        location %s/ {\n"
	    "%s"
	    "            include %s/conf/nginx/idemfcgi-fastcgi.conf;\n"
	    "        }\n"
	    "    }\n"
	    "}\n",
	    d, d, d, d, d, d, d, d, w->port, srcdir(), mount, split, srcdir());
	return write_file(w->dir, "nginx.conf", text);
}

/* Whether something answers HTTP on the port. */
static int
answers(const websrv *w)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "curl -s -o /dev/null --max-time 2 "
	    "http://127.0.0.1:%d/ 2>/dev/null", w->port);
	return system(cmd) == 0;
}

int
websrv_start(websrv *w, websrv_kind kind, const char *idem_conf)
{
	return websrv_start_plugins(w, kind, idem_conf, NULL);
}

int
websrv_start_plugins(websrv *w, websrv_kind kind, const char *idem_conf,
    const char *plugins)
{
	char sock[400], backend[450], listen[64], path[400], server[512];
	struct passwd *pw = getpwnam("www-data");
	char *const *argv;
	char *lighttpd_argv[] = { "lighttpd", "-D", "-f", path, NULL };
	char *apache_argv[] = { "apache2", "-f", path, "-DFOREGROUND", NULL };
	char *nginx_argv[] = { "nginx", "-c", path, "-g", "daemon off;", NULL };
	int i, rc = 0;

	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->port = harness_free_port();
	snprintf(w->base, sizeof(w->base), "http://127.0.0.1:%d%s", w->port,
	    kind == WS_NGINX_SPLIT ? "/svc/v1" : "/api");
	snprintf(w->dir, sizeof(w->dir), "/tmp/idemfcgi-web.XXXXXX");
	if (mkdtemp(w->dir) == NULL)
		return -1;
	/* idemfcgi may run as www-data (mod_fcgid): it writes here */
	chmod(w->dir, 01777);
	snprintf(path, sizeof(path), "%s/fcgid", w->dir);
	mkdir(path, 0755);
	if (pw != NULL && chown(path, pw->pw_uid, pw->pw_gid) != 0)
		return -1; /* mod_fcgid's sockets, made as www-data */
	snprintf(w->testkit_log, sizeof(w->testkit_log), "%s/testkit.log",
	    w->dir);
	close(open(w->testkit_log, O_WRONLY | O_CREAT, 0666));
	chmod(w->testkit_log, 0666);

	/* more plugins continue the plugins list the harness writes */
	snprintf(server, sizeof(server), "%s%s%sthreads = 16\nmax-body = 64k",
	    plugins != NULL ? "    " : "", plugins != NULL ? plugins : "",
	    plugins != NULL ? "\n" : "");
	switch (kind) {
	case WS_LIGHTTPD:
	case WS_APACHE_UNIX:
		rc = harness_start(&w->idem, &(harness_opts){
		    .server = server, .rest = idem_conf,
		    .testkit_log = w->testkit_log });
		snprintf(sock, sizeof(sock), "%s", w->idem.addr + 5);
		break;
	case WS_APACHE_TCP:
		snprintf(listen, sizeof(listen), "127.0.0.1:%d",
		    harness_free_port());
		rc = harness_start(&w->idem, &(harness_opts){
		    .server = "threads = 16\nmax-body = 64k", .rest = idem_conf,
		    .testkit_log = w->testkit_log, .listen = listen });
		break;
	case WS_NGINX:
	case WS_NGINX_SPLIT:
		/* fewer threads than nginx keeps connections: 2 workers x
		 * keepalive 16; routed on REQUEST_URI less the mount, or on
		 * the PATH_INFO nginx splits off (no mount) */
		rc = harness_start(&w->idem, &(harness_opts){
		    .server = kind == WS_NGINX ?
		    "threads = 4\nmax-body = 64k\nmount = /api" :
		    "threads = 4\nmax-body = 64k",
		    .rest = idem_conf, .testkit_log = w->testkit_log });
		snprintf(sock, sizeof(sock), "%s", w->idem.addr + 5);
		break;
	default:
		snprintf(sock, sizeof(sock), "%s/spawned.sock", w->dir);
		rc = write_spawn_conf(w, idem_conf);
		break;
	}
	if (rc != 0)
		return -1;
	switch (kind) {
	case WS_LIGHTTPD:
	case WS_LIGHTTPD_SPAWN:
		rc = write_lighttpd(w, sock);
		snprintf(path, sizeof(path), "%s/lighttpd.conf", w->dir);
		argv = lighttpd_argv;
		break;
	case WS_NGINX:
	case WS_NGINX_SPLIT:
		rc = write_nginx(w, sock);
		snprintf(path, sizeof(path), "%s/nginx.conf", w->dir);
		argv = nginx_argv;
		break;
	default:
		if (kind == WS_APACHE_TCP)
			snprintf(backend, sizeof(backend), "fcgi://%s",
			    w->idem.addr);
		else
			snprintf(backend, sizeof(backend), "unix:%s|fcgi://localhost",
			    sock);
		rc = write_apache(w, backend, idem_conf);
		snprintf(path, sizeof(path), "%s/httpd.conf", w->dir);
		argv = apache_argv;
		break;
	}
	if (rc != 0)
		return -1;
	if ((w->pid = fork()) == 0) {
		int fd = open("/dev/null", O_RDWR);
		char out[400];
		snprintf(out, sizeof(out), "%s/server.out", w->dir);
		dup2(fd, 0);
		fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("IDEM_DIR", w->dir, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	for (i = 0; i < 200; i++) {
		int status;
		if (answers(w))
			return 0;
		if (waitpid(w->pid, &status, WNOHANG) == w->pid) {
			w->pid = 0;
			break;
		}
		nap(50);
	}
	{
		char cmd[600];
		fprintf(stderr, "%s did not start; its output:\n", names[kind]);
		snprintf(cmd, sizeof(cmd), "cat '%s/server.out' '%s/error.log' >&2",
		    w->dir, w->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "(none)\n");
	}
	return -1;
}

/* Kills what the web server spawned and left behind: the processes whose
 * environment names this directory's config. */
static void
kill_spawned(const websrv *w)
{
	char want[400], path[300], env[8192];
	struct dirent *d;
	DIR *proc = opendir("/proc");

	snprintf(want, sizeof(want), "IDEMFCGI_CONFIG=%s/idemfcgi.conf", w->dir);
	while (proc != NULL && (d = readdir(proc)) != NULL) {
		ssize_t n;
		int fd;
		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/environ", d->d_name);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		n = read(fd, env, sizeof(env) - 1);
		close(fd);
		if (n > 0 && memmem(env, (size_t)n, want, strlen(want)) != NULL)
			kill((pid_t)atol(d->d_name), SIGKILL);
	}
	if (proc != NULL)
		closedir(proc);
}

void
websrv_stop(websrv *w)
{
	char cmd[400];
	int status, i;

	if (w->pid > 0) {
		kill(w->pid, SIGTERM);
		for (i = 0; i < 400 && waitpid(w->pid, &status, WNOHANG) != w->pid;
		    i++)
			nap(25);
		if (i == 400) {
			kill(w->pid, SIGKILL);
			waitpid(w->pid, &status, 0);
		}
		w->pid = 0;
	}
	if (w->idem.pid > 0)
		harness_stop(&w->idem);
	kill_spawned(w);
	if (getenv("IDEM_KEEP") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", w->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", w->dir);
	}
}

size_t
websrv_count(const websrv *w, const char *path, const char *key)
{
	harness h;

	memset(&h, 0, sizeof(h));
	snprintf(h.testkit_log, sizeof(h.testkit_log), "%s", w->testkit_log);
	return harness_count_key(&h, path, key);
}

int
websrv_logged(const websrv *w, const char *text)
{
	static const char *const files[] = { "error.log", "server.out" };
	char path[400], *all;
	int found = 0;
	size_t i;

	for (i = 0; i < 2 && !found; i++) {
		snprintf(path, sizeof(path), "%s/%s", w->dir, files[i]);
		all = harness_slurp(path);
		found = all != NULL && strstr(all, text) != NULL;
		free(all);
	}
	return found;
}
