/*
 * websrv.h - a real lighttpd, Apache or nginx in front of idemfcgi for the
 * tests,
 * configured with the files of conf/ as a user would include them: private
 * config files, a free loopback port, nothing of the system's touched.
 */
#ifndef WEBSRV_H
#define WEBSRV_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

typedef enum websrv_kind {
	WS_LIGHTTPD,          /* mod_fastcgi to idemfcgi's unix socket */
	WS_LIGHTTPD_SPAWN,    /* mod_fastcgi bin-path: lighttpd starts it */
	WS_APACHE_TCP,        /* mod_proxy_fcgi to idemfcgi on TCP */
	WS_APACHE_UNIX,       /* mod_proxy_fcgi to idemfcgi's unix socket */
	WS_APACHE_FCGID,      /* mod_fcgid starts it */
	WS_NGINX,             /* fastcgi_pass to idemfcgi's unix socket, 4
	                       * threads, an upstream with keepalive 16 and
	                       * fastcgi_keep_conn on: more kept connections
	                       * than threads; at /api, idemfcgi's mount */
	WS_NGINX_SPLIT        /* the same at /svc/v1, no mount: PATH_INFO
	                       * from fastcgi_split_path_info */
} websrv_kind;

typedef struct websrv {
	websrv_kind kind;
	char dir[256];          /* configs, logs; world-writable */
	int port;
	char base[128];         /* "http://127.0.0.1:PORT/api" (nginx-split:
	                         * "/svc/v1") */
	pid_t pid;              /* the web server */
	harness idem;           /* idemfcgi, when it runs on its own */
	char testkit_log[320];  /* where executions are counted */
} websrv;

/* The name of a kind, for messages ("apache-fcgid"). */
const char *websrv_name(websrv_kind kind);

/*
 * Starts idemfcgi (or lets the web server start it) with the testkit and
 * ledger plugins, idem_conf appended to its config (sections and all),
 * max-body 64k, and the web server in front under /api (nginx-split:
 * /svc/v1).  Returns 0, or -1
 * after printing why.
 */
int websrv_start(websrv *w, websrv_kind kind, const char *idem_conf);

/* The same with more plugins (paths, @BUILDDIR@ for the build tree)
 * loaded after those two; lighttpd and Apache on its unix socket only. */
int websrv_start_plugins(websrv *w, websrv_kind kind, const char *idem_conf,
    const char *plugins);

/* Stops the web server and idemfcgi and removes the directory. */
void websrv_stop(websrv *w);

/* Whether the web server's error log (where a spawned idemfcgi writes)
 * contains text. */
int websrv_logged(const websrv *w, const char *text);

/* Executions of path with key, counted in the testkit log. */
size_t websrv_count(const websrv *w, const char *path, const char *key);

#endif
