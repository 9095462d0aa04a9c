/*
 * test_webservers.c - the protocol through a real lighttpd and a real
 * Apache (mod_proxy_fcgi over TCP and a unix socket, mod_fcgid, lighttpd
 * with an external socket and with bin-path) and a real nginx (an upstream
 * with keepalive and fastcgi_keep_conn, more kept connections than
 * idemfcgi has threads; at idemfcgi's mount, and at a deeper prefix split
 * into PATH_INFO), driven by a real HTTP client (curl), with the
 * memory store and with MySQL; nginx's own 502 and 413 are problem+json.  The web servers use the
 * config files of conf/ as shipped; the Apache snippet also loads into an
 * Apache without mod_proxy_fcgi.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "http.h"
#include "mariadb.h"
#include "websrv.h"

typedef struct setup {
	websrv_kind kind;
	int mysql;
} setup;

static struct criterion_test_params
setups(void)
{
	static setup s[14];
	int i;

	for (i = 0; i < 14; i++) {
		s[i].kind = (websrv_kind)(i / 2);
		s[i].mysql = i % 2;
	}
	return cr_make_param_array(setup, s, 14);
}

static websrv w;

/* Starts the web server of s with idem under [idempotency]. */
static void
start(const setup *s, const char *idem)
{
	char conf[1500], my[600];
	mariadb m;

	my[0] = '\0';
	if (s->mysql) {
		cr_assert_eq(mariadb_from_env(&m), 0);
		mariadb_conf(&m, my, sizeof(my));
	}
	snprintf(conf, sizeof(conf), "[idempotency]\nstore = %s\n%s\n%s",
	    s->mysql ? "mysql" : "memory", idem, my);
	cr_assert_eq(websrv_start(&w, s->kind, conf), 0, "%s did not start",
	    websrv_name(s->kind));
}

/* A key unique to this process (the MySQL database outlives tests). */
static const char *
key(const char *name)
{
	static __thread char buf[8][96];
	static __thread int next;
	char *k = buf[next++ % 8];

	snprintf(k, 96, "%s-%d-%ld", name, (int)w.kind, (long)getpid());
	return k;
}

typedef struct req {
	const char *path;
	char keyhdr[160];
	char extra[160];
	const char *body;
	size_t len;
	http_response r;
	char exec[40];
	char code[64];
} req;

static void
send_req(req *q)
{
	char url[512];
	const char *h[4] = { "Content-Type: application/json", NULL, NULL,
	    NULL };
	int n = 1;
	json_t *j;

	if (q->keyhdr[0] != '\0')
		h[n++] = q->keyhdr;
	if (q->extra[0] != '\0')
		h[n++] = q->extra;
	snprintf(url, sizeof(url), "%s%s", w.base, q->path);
	q->exec[0] = q->code[0] = '\0';
	if (http_request("POST", url, h, q->body != NULL ? q->body : "{}",
	    q->body != NULL ? (q->len ? q->len : strlen(q->body)) : 2, &q->r)
	    != 0)
		q->r.status = -1;
	if (q->r.body != NULL && (j = json_loads(q->r.body, 0, NULL)) != NULL) {
		if (json_is_string(json_object_get(j, "exec")))
			snprintf(q->exec, sizeof(q->exec), "%s",
			    json_string_value(json_object_get(j, "exec")));
		if (json_is_string(json_object_get(j, "code")))
			snprintf(q->code, sizeof(q->code), "%s",
			    json_string_value(json_object_get(j, "code")));
		json_decref(j);
	}
}

static req
mk(const char *path, const char *k, const char *body)
{
	req q;

	memset(&q, 0, sizeof(q));
	q.path = path;
	if (k != NULL)
		snprintf(q.keyhdr, sizeof(q.keyhdr), "Idempotency-Key: %s", k);
	q.body = body;
	return q;
}

static req
one(const char *path, const char *k, const char *body)
{
	req q = mk(path, k, body);

	send_req(&q);
	return q;
}

static void
done(req *q)
{
	http_response_free(&q->r);
}

static void *
req_thread(void *arg)
{
	send_req(arg);
	return NULL;
}

ParameterizedTestParameters(web, protocol)
{
	return setups();
}

/* The scenarios of the protocol through one web server and store. */
ParameterizedTest(setup *s, web, protocol, .timeout = 120)
{
	req c[16], a, b;
	pthread_t t[16];
	char big[100 * 1024];
	const char *k;
	int i, ran = 0;

	start(s, "");
	cr_log_info("protocol through %s, %s store", websrv_name(s->kind),
	    s->mysql ? "mysql" : "memory");

	/* concurrent duplicates: one execution */
	k = key("dup");
	for (i = 0; i < 16; i++) {
		c[i] = mk("/testkit/sleep/300", k, "{\"n\": 1}");
		pthread_create(&t[i], NULL, req_thread, &c[i]);
	}
	for (i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 16; i++) {
		const char *rep = http_header(&c[i].r, "Idempotent-Replayed");
		if (c[i].r.status == 201 && rep == NULL)
			ran++;
		else
			cr_expect(c[i].r.status == 201 ||
			    strcmp(c[i].code, "IDEMPOTENCY_IN_FLIGHT") == 0,
			    "%s: %d %s", websrv_name(s->kind), c[i].r.status,
			    c[i].r.body);
		done(&c[i]);
	}
	cr_expect_eq(ran, 1, "%s: %d ran", websrv_name(s->kind), ran);
	cr_expect_eq(websrv_count(&w, "/testkit/sleep/300", k), 1);

	/* replay, byte for byte, with Idempotent-Replayed */
	k = key("replay");
	a = one("/testkit/echo", k, "{\"x\": [1, 2]}");
	b = one("/testkit/echo", k, "{\"x\":[1,2]}");
	cr_expect_eq(a.r.status, 201);
	cr_expect_eq(b.r.status, 201);
	cr_expect_str_eq(http_header(&b.r, "Idempotent-Replayed"), "true");
	cr_expect_str_eq(b.r.body, a.r.body);
	done(&b);
	/* conflict */
	b = one("/testkit/echo", k, "{\"x\": [2, 1]}");
	cr_expect_eq(b.r.status, 409);
	cr_expect_str_eq(b.code, "IDEMPOTENCY_CONFLICT");
	cr_expect_str_eq(http_header(&b.r, "Content-Type"),
	    "application/problem+json");
	done(&a);
	done(&b);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", k), 1);

	/* invalid key */
	a = one("/testkit/echo", "not valid", NULL);
	cr_expect_eq(a.r.status, 400);
	cr_expect_str_eq(a.code, "IDEMPOTENCY_KEY_INVALID");
	done(&a);

	/* a 5xx is released: the retry runs again */
	k = key("five");
	a = one("/testkit/status/502", k, NULL);
	b = one("/testkit/status/502", k, NULL);
	cr_expect_eq(a.r.status, 502);
	cr_expect_eq(b.r.status, 502);
	cr_expect_null(http_header(&b.r, "Idempotent-Replayed"));
	/* the handler's own 502 passes nginx's error_page untouched */
	cr_expect_neq(strcmp(b.code, "BACKEND_UNAVAILABLE"), 0, "%s: %s",
	    websrv_name(s->kind), b.r.body);
	done(&a);
	done(&b);
	cr_expect_eq(websrv_count(&w, "/testkit/status/502", k), 2);

	/* a body over max-body (64k) is refused and nothing runs */
	memset(big, 'x', sizeof(big));
	cr_log_info("413");
	a = mk("/testkit/echo", key("big"), big);
	a.len = sizeof(big);
	send_req(&a);
	cr_expect_eq(a.r.status, 413, "%s: %d %s", websrv_name(s->kind),
	    a.r.status, a.r.body);
	if (s->kind == WS_NGINX || s->kind == WS_NGINX_SPLIT)
		cr_expect_str_eq(a.code, "BODY_TOO_LARGE", "%s", a.r.body);
	done(&a);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", key("big")), 0);

	cr_log_info("escapes");
	/* escaped characters in the path */
	a = one("/accounts/a%2Db/deposit", key("esc"), "{\"amount\": 3}");
	cr_expect_eq(a.r.status, 201, "%s: %s", websrv_name(s->kind),
	    a.r.body);
	cr_expect(strstr(a.r.body, "\"account\":\"a-b\"") != NULL, "%s",
	    a.r.body);
	done(&a);
	a = one("/testkit/status/%32%30%31", key("esc2"), NULL);
	cr_expect_eq(a.r.status, 201);
	done(&a);
	a = one("/accounts/a%20b/deposit", key("esc3"), "{\"amount\": 3}");
	cr_expect_eq(a.r.status, 400, "routed, refused by the ledger: %s",
	    a.r.body);
	cr_expect_str_eq(a.code, "INVALID_ACCOUNT_ID");
	done(&a);
	/* mod_fcgid with the memory store is a trap idemfcgi names */
	if (s->kind == WS_APACHE_FCGID)
		cr_expect_eq(websrv_logged(&w, "started by apache2 (mod_fcgid) "
		    "with store = memory"), !s->mysql);
	websrv_stop(&w);
}

/* Requests sent by a pool of client threads, each taking the next one. */
typedef struct pool {
	req *q;
	size_t n;
	atomic_size_t next;
} pool;

static void *
pool_thread(void *arg)
{
	pool *p = arg;
	size_t i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		send_req(&p->q[i]);
	return NULL;
}

/* Sends the n requests of q from clients threads at once. */
static void
send_all(req *q, size_t n, int clients)
{
	pool p = { q, n, 0 };
	pthread_t t[64];
	int i;

	cr_assert_leq(clients, 64);
	for (i = 0; i < clients; i++)
		pthread_create(&t[i], NULL, pool_thread, &p);
	for (i = 0; i < clients; i++)
		pthread_join(t[i], NULL);
}

/* Whether q got a true answer of the protocol for a keyed request: the
 * handler's 201 (first or replayed) or 409 in flight.  Anything else,
 * curl's -1 (its 30 s timeout) or nginx's 502/504 included, is a request
 * left unanswered. */
static int
answered(const req *q)
{
	return q->r.status == 201 || (q->r.status == 409 &&
	    strcmp(q->code, "IDEMPOTENCY_IN_FLIGHT") == 0);
}

ParameterizedTestParameters(web, nginx_keepalive_load)
{
	static setup s[2] = { { WS_NGINX, 0 }, { WS_NGINX, 1 } };

	return cr_make_param_array(setup, s, 2);
}

/*
 * Through nginx with keepalive 16 per worker (2 workers) and
 * fastcgi_keep_conn on, to idemfcgi with 4 threads: more kept connections
 * and more concurrent clients than threads.  Every request is answered
 * (before the dispatcher, threads sat on idle kept connections and new
 * ones timed out), and the handler runs once per key.
 */
ParameterizedTest(setup *s, web, nginx_keepalive_load, .timeout = 300)
{
	static req q[200];
	char keys[50][96], body[64];
	size_t i, unanswered = 0;
	int ran = 0;

	start(s, "");
	cr_log_info("nginx keepalive, %s store", s->mysql ? "mysql" : "memory");

	/* 32 concurrent duplicates of one slow request */
	snprintf(keys[0], sizeof(keys[0]), "%s", key("ngx-dup"));
	for (i = 0; i < 32; i++)
		q[i] = mk("/testkit/sleep/300", keys[0], "{\"n\": 1}");
	send_all(q, 32, 32);
	for (i = 0; i < 32; i++) {
		if (!answered(&q[i]))
			unanswered++;
		else if (q[i].r.status == 201 &&
		    http_header(&q[i].r, "Idempotent-Replayed") == NULL)
			ran++;
		done(&q[i]);
	}
	cr_expect_eq(unanswered, 0, "%zu of 32 duplicates unanswered",
	    unanswered);
	cr_expect_eq(ran, 1, "%d of 32 duplicates ran", ran);
	cr_expect_eq(websrv_count(&w, "/testkit/sleep/300", keys[0]), 1);

	/* 200 requests over 50 keys from 32 clients */
	for (i = 0; i < 50; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ngx-many-%zu", i);
		snprintf(keys[i], sizeof(keys[i]), "%s", key(name));
	}
	for (i = 0; i < 200; i++) {
		snprintf(body, sizeof(body), "{\"k\": %zu}", i % 50);
		q[i] = mk("/testkit/echo", keys[i % 50], NULL);
		q[i].body = strdup(body);
	}
	send_all(q, 200, 32);
	unanswered = 0;
	for (i = 0; i < 200; i++) {
		if (!answered(&q[i])) {
			if (unanswered++ < 5)
				cr_log_error("request %zu: %d %s", i, q[i].r.status,
				    q[i].r.body != NULL ? q[i].r.body : "");
		}
		free((char *)q[i].body);
		done(&q[i]);
	}
	cr_expect_eq(unanswered, 0, "%zu of 200 requests unanswered",
	    unanswered);
	for (i = 0; i < 50; i++)
		cr_expect_eq(websrv_count(&w, "/testkit/echo", keys[i]), 1,
		    "key %zu ran %zu times", i,
		    websrv_count(&w, "/testkit/echo", keys[i]));

	/* one key hammered by 12 clients, 120 requests */
	snprintf(keys[0], sizeof(keys[0]), "%s", key("ngx-hammer"));
	for (i = 0; i < 120; i++)
		q[i] = mk("/testkit/sleep/20", keys[0], "{}");
	send_all(q, 120, 12);
	unanswered = 0;
	for (i = 0; i < 120; i++) {
		if (!answered(&q[i]))
			unanswered++;
		done(&q[i]);
	}
	cr_expect_eq(unanswered, 0, "%zu of 120 hammering requests unanswered",
	    unanswered);
	cr_expect_eq(websrv_count(&w, "/testkit/sleep/20", keys[0]), 1);
	websrv_stop(&w);
}

ParameterizedTestParameters(web, nginx_own_errors)
{
	static setup s[2] = { { WS_NGINX, 0 }, { WS_NGINX_SPLIT, 0 } };

	return cr_make_param_array(setup, s, 2);
}

/* Expects q to be nginx's own error status as problem+json with code. */
static void
expect_problem(const setup *s, const req *q, int status, const char *code)
{
	cr_expect_eq(q->r.status, status, "%s: %d %s", websrv_name(s->kind),
	    q->r.status, q->r.body != NULL ? q->r.body : "");
	cr_expect_str_eq(http_header(&q->r, "Content-Type"),
	    "application/problem+json");
	cr_expect_str_eq(q->code, code, "%s: %s", websrv_name(s->kind),
	    q->r.body != NULL ? q->r.body : "");
}

/*
 * nginx's own answers through conf/nginx/idemfcgi-errors.conf: a body over
 * client_max_body_size (1m, over idemfcgi's max-body of 64k here) is 413
 * BODY_TOO_LARGE without reaching idemfcgi; with idemfcgi stopped, 502
 * BACKEND_UNAVAILABLE with Retry-After, not nginx's HTML.
 */
ParameterizedTest(setup *s, web, nginx_own_errors, .timeout = 60)
{
	static char big[1100 * 1024];
	req a;

	start(s, "");
	memset(big, 'x', sizeof(big));
	a = mk("/testkit/echo", key("ngx-big"), big);
	a.len = sizeof(big);
	send_req(&a);
	expect_problem(s, &a, 413, "BODY_TOO_LARGE");
	done(&a);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", key("ngx-big")), 0);

	/* served, then idemfcgi stops: nginx answers alone */
	a = one("/testkit/echo", key("ngx-up"), NULL);
	cr_expect_eq(a.r.status, 201, "%s: %s", websrv_name(s->kind),
	    a.r.body);
	done(&a);
	cr_assert_eq(harness_stop(&w.idem), 0);
	a = one("/testkit/echo", key("ngx-down"), NULL);
	expect_problem(s, &a, 502, "BACKEND_UNAVAILABLE");
	cr_expect_str_eq(http_header(&a.r, "Retry-After"), "1");
	done(&a);
	websrv_stop(&w);
}

ParameterizedTestParameters(web, authorization_scope)
{
	return setups();
}

/* scope = header:Authorization: the same key from two users is two
 * operations; the header reaches idemfcgi through every server. */
ParameterizedTest(setup *s, web, authorization_scope, .timeout = 60)
{
	req a, b;
	const char *k;

	start(s, "scope = header:Authorization");
	k = key("auth");
	a = mk("/testkit/echo", k, NULL);
	strcpy(a.extra, "Authorization: Basic YWxpY2U6c2VjcmV0");
	send_req(&a);
	b = mk("/testkit/echo", k, NULL);
	strcpy(b.extra, "Authorization: Basic Ym9iOnNlY3JldA==");
	send_req(&b);
	cr_expect_eq(a.r.status, 201);
	cr_expect_eq(b.r.status, 201);
	cr_expect_null(http_header(&b.r, "Idempotent-Replayed"),
	    "%s: bob got alice's answer", websrv_name(s->kind));
	done(&b);
	b = mk("/testkit/echo", k, NULL);
	strcpy(b.extra, "Authorization: Basic YWxpY2U6c2VjcmV0");
	send_req(&b);
	cr_expect_str_eq(http_header(&b.r, "Idempotent-Replayed"), "true");
	cr_expect_str_eq(b.exec, a.exec);
	done(&a);
	done(&b);
	/* no Authorization at all: refused, never shared */
	a = one("/testkit/echo", k, NULL);
	cr_expect_eq(a.r.status, 400, "%s: %s", websrv_name(s->kind),
	    a.r.body);
	cr_expect_str_eq(a.code, "IDEMPOTENCY_SCOPE_MISSING");
	done(&a);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", k), 2);
	websrv_stop(&w);
}

/* "apache2 -t" on a config of the modules given and the Apache snippet
 * (conf/apache-proxy-fcgi.conf): its exit status; what it printed goes
 * into out (size bytes). */
static int
apache_configtest(const char *modules, char *out, size_t size)
{
	char dir[] = "/tmp/idemfcgi-apache-t.XXXXXX", conf[320], cmd[700];
	const char *src = getenv("IDEM_SRCDIR");
	FILE *fp;
	size_t got;
	int st;

	cr_assert_not_null(src, "IDEM_SRCDIR is not set");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/httpd.conf", dir);
	fp = fopen(conf, "w");
	cr_assert_not_null(fp);
	fprintf(fp, "ServerRoot /etc/apache2\nDefaultRuntimeDir %s\n"
	    "PidFile %s/httpd.pid\nServerName 127.0.0.1\n"
	    "Listen 127.0.0.1:%d\nErrorLog %s/error.log\n"
	    "LoadModule mpm_event_module /usr/lib/apache2/modules/"
	    "mod_mpm_event.so\n%sInclude %s/conf/apache-proxy-fcgi.conf\n",
	    dir, dir, harness_free_port(), dir, modules, src);
	cr_assert_eq(fclose(fp), 0);
	snprintf(cmd, sizeof(cmd), "PATH=/usr/sbin:$PATH apache2 -t -f %s 2>&1; "
	    "st=$?; rm -rf '%s'; exit $st", conf, dir);
	fp = popen(cmd, "r");
	cr_assert_not_null(fp);
	got = fread(out, 1, size - 1, fp);
	out[got] = '\0';
	st = pclose(fp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The Apache snippet loads whether mod_proxy_fcgi is (a2enconf idemfcgi
 * before a2enmod proxy_fcgi keeps apache2ctl configtest passing) or not
 * (then it does nothing). */
Test(web, apache_snippet_loads_without_proxy_fcgi)
{
	char out[2048];

	cr_expect_eq(apache_configtest("", out, sizeof(out)), 0, "%s", out);
	cr_expect_eq(apache_configtest("LoadModule proxy_module "
	    "/usr/lib/apache2/modules/mod_proxy.so\nLoadModule proxy_fcgi_module "
	    "/usr/lib/apache2/modules/mod_proxy_fcgi.so\n", out, sizeof(out)), 0,
	    "%s", out);
}

static struct criterion_test_params
kinds(void)
{
	static setup s[7];
	int i;

	for (i = 0; i < 7; i++)
		s[i].kind = (websrv_kind)i;
	return cr_make_param_array(setup, s, 7);
}

ParameterizedTestParameters(web, location_under_mount)
{
	return kinds();
}

/* idem_request_script_name through each web server, at /api (lighttpd's
 * SCRIPT_NAME, Apache's ProxyFCGISetEnvIf and mod_fcgid's ScriptAlias,
 * nginx's REQUEST_URI less [server] mount) and at /svc/v1 (nginx's
 * fastcgi_split_path_info, no mount): a handler's Location names the URL
 * a client can follow, first answer and replay alike. */
ParameterizedTest(setup *s, web, location_under_mount, .timeout = 60)
{
	const char *mount = s->kind == WS_NGINX_SPLIT ? "/svc/v1" : "/api";
	const char *k = key("loc");
	char want[128], url[256];
	http_response r;
	req a, b;

	start(s, "");
	a = one("/testkit/created", k, "{}");
	cr_assert_eq(a.r.status, 201, "%s: %d %s", websrv_name(s->kind),
	    a.r.status, a.r.body);
	snprintf(want, sizeof(want), "%s/testkit/things/%s", mount, a.exec);
	cr_expect_str_eq(http_header(&a.r, "Location"), want, "%s",
	    websrv_name(s->kind));
	b = one("/testkit/created", k, "{}");
	cr_expect_eq(b.r.status, 201);
	cr_expect_str_eq(http_header(&b.r, "Idempotent-Replayed"), "true");
	cr_expect_str_eq(http_header(&b.r, "Location"), want);
	cr_expect_eq(websrv_count(&w, "/testkit/created", k), 1);
	/* the client follows it: the same instance answers under the mount
	 * (a route it does not have: 404 from idemfcgi, not the server) */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", w.port, want);
	cr_assert_eq(http_request("GET", url, NULL, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 404);
	cr_expect(r.body != NULL && strstr(r.body, "ROUTE_NOT_FOUND") != NULL,
	    "%s: %s", websrv_name(s->kind), r.body);
	http_response_free(&r);
	done(&a);
	done(&b);
	websrv_stop(&w);
}

ParameterizedTestParameters(web, late_retry_refused)
{
	static setup s[3] = { { WS_LIGHTTPD, 0 }, { WS_NGINX, 1 },
	    { WS_APACHE_UNIX, 1 } };

	return cr_make_param_array(setup, s, 3);
}

/*
 * Issue 40.1: a retry that comes after the key's lifetime is refused, 422
 * IDEMPOTENCY_KEY_EXPIRED with the key's first status and when it was
 * used, whether or not the purge has dropped the answer; the handler ran
 * once.  A route with expired-keys = run runs it again, counted.
 */
ParameterizedTest(setup *s, web, late_retry_refused, .timeout = 60)
{
	const char *k = key("late"), *k2 = key("late-run");
	req a, b, c, d;
	json_t *j;

	start(s, "lifetime = 1s\ncleanup-interval = 1s\n"
	    "tombstone-lifetime = 1h\n"
	    "[route POST /testkit/status/{code}]\nexpired-keys = run");
	a = one("/testkit/echo", k, "{\"n\":1}");
	cr_assert_eq(a.r.status, 201, "%s: %s", websrv_name(s->kind),
	    a.r.body);
	c = one("/testkit/status/200", k2, "{}");
	cr_assert_eq(c.r.status, 200, "%s", c.r.body);
	usleep(2500 * 1000);    /* past the lifetime, and a purge */
	b = one("/testkit/echo", k, "{\"n\":1}");
	cr_expect_eq(b.r.status, 422, "%s: %d %s", websrv_name(s->kind),
	    b.r.status, b.r.body);
	cr_expect_str_eq(b.code, "IDEMPOTENCY_KEY_EXPIRED");
	j = b.r.body != NULL ? json_loads(b.r.body, 0, NULL) : NULL;
	cr_expect(j != NULL && json_integer_value(json_object_get(j,
	    "first-status")) == 201, "%s", b.r.body);
	cr_expect(j != NULL && json_is_true(json_object_get(j,
	    "same-request")), "%s", b.r.body);
	cr_expect(j != NULL && json_string_length(json_object_get(j,
	    "used-at")) == 20, "%s", b.r.body);
	json_decref(j);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", k), 1,
	    "a late retry ran again through %s", websrv_name(s->kind));
	d = one("/testkit/status/200", k2, "{}");
	cr_expect_eq(d.r.status, 200, "%s", d.r.body);
	cr_expect_eq(websrv_count(&w, "/testkit/status/200", k2), 2);
	done(&a);
	done(&b);
	done(&c);
	done(&d);
	websrv_stop(&w);
}
