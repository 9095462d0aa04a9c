/*
 * test_config.c - the configuration file, sizes and durations.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_config.h"
#include "idem_log.h"

/* Log lines written while loading text; caller frees. */
static char *
load_capture(const char *text, idem_config **cfg, idem_err *err)
{
	harness_capture cap;

	harness_capture_begin(&cap);
	*err = idem_config_load_string(text, "test.conf", cfg);
	return harness_capture_end(&cap);
}

/* Expects text to be refused with a message containing want. */
static void
refused(const char *text, const char *want)
{
	idem_config *cfg = NULL;
	idem_err err;
	char *log = load_capture(text, &cfg, &err);

	cr_expect_eq(err, IDEM_ERR_CONFIG, "accepted: %s", text);
	cr_expect_null(cfg);
	cr_expect(strstr(log, want) != NULL, "log lacks \"%s\": %s", want, log);
	free(log);
}

Test(size, units)
{
	uint64_t v;

	cr_assert_eq(idem_parse_size("0", &v), IDEM_OK);
	cr_expect_eq(v, 0);
	cr_assert_eq(idem_parse_size("512", &v), IDEM_OK);
	cr_expect_eq(v, 512);
	cr_assert_eq(idem_parse_size("64k", &v), IDEM_OK);
	cr_expect_eq(v, 65536);
	cr_assert_eq(idem_parse_size("1m", &v), IDEM_OK);
	cr_expect_eq(v, 1048576);
	cr_assert_eq(idem_parse_size("2G", &v), IDEM_OK);
	cr_expect_eq(v, 2147483648ULL);
	cr_assert_eq(idem_parse_size("1M", &v), IDEM_OK);
	cr_expect_eq(v, 1048576);
}

/* "1MB" would be a guess between 10^6 and 2^20: refused, the message
 * saying what to write instead. */
Test(size, no_b_suffix)
{
	static const char *const bad[] = { "1MB", "1mb", "64kb", "2GB", "512b",
	    "512B" };
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(idem_parse_size(bad[i], &v), IDEM_ERR_INVALID,
		    "accepted \"%s\"", bad[i]);
	refused("[server]\nmax-body = 1MB\n", "test.conf:2: [server] "
	    "max-body: bad value \"1MB\": expected a size such as 512, 64k or "
	    "1m: bytes, or k, m or g for KiB, MiB or GiB (without a B: 1m, not "
	    "1MB)");
}

Test(size, bad)
{
	static const char *const bad[] = { "", "k", "-1", "1x", "1 k", "1.5m",
	    "99999999999999999999", "18014398509481984k", " 1", "1kk" };
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(idem_parse_size(bad[i], &v), IDEM_ERR_INVALID,
		    "accepted \"%s\"", bad[i]);
}

Test(duration, units)
{
	static const struct { const char *s; uint64_t ms; } ok[] = {
		{ "0", 0 }, { "500ms", 500 }, { "30s", 30000 }, { "5m", 300000 },
		{ "24h", 86400000 }, { "2d", 172800000 }, { "PT30M", 1800000 },
		{ "PT1H30M", 5400000 }, { "P1D", 86400000 },
		{ "P1DT2H", 93600000 }, { "PT0.5S", 500 }, { "PT1.25S", 1250 },
		{ "PT90S", 90000 }, { "P2W", 1209600000 }, { "0s", 0 },
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_assert_eq(idem_parse_duration(ok[i].s, &v), IDEM_OK,
		    "refused \"%s\"", ok[i].s);
		cr_expect_eq(v, ok[i].ms, "\"%s\" gave %llu", ok[i].s,
		    (unsigned long long)v);
	}
}

Test(duration, bad)
{
	static const char *const bad[] = { "", "5", "s", "5x", "-5s", "P",
	    "PT", "P1H", "PT1D", "PT1M1H", "PT1S1S", "PT.5S", "P1.5D", "1 s",
	    "PT5", "P1Y", "P1M", "99999999999999999999ms", "213503982335d" };
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(idem_parse_duration(bad[i], &v), IDEM_ERR_INVALID,
		    "accepted \"%s\"", bad[i]);
}

Test(bool, words)
{
	int b;

	cr_assert_eq(idem_parse_bool("yes", &b), IDEM_OK);
	cr_expect_eq(b, 1);
	cr_assert_eq(idem_parse_bool("Off", &b), IDEM_OK);
	cr_expect_eq(b, 0);
	cr_expect_eq(idem_parse_bool("maybe", &b), IDEM_ERR_INVALID);
	cr_expect_eq(idem_parse_bool("", &b), IDEM_ERR_INVALID);
}

/* The example of DESIGN.md section 3, comments and all. */
Test(config, design_example)
{
	static const char text[] =
	    "[server]\n"
	    "listen  = 127.0.0.1:9000     # or unix:/run/idemfcgi.sock; omit when the web\n"
	    "                             # server spawns us with the socket on fd 0\n"
	    "workers = 1                  # processes\n"
	    "threads = 8                  # per process\n"
	    "max-connections = 1024       # per process; idle kept ones close first\n"
	    "allow-clients = 127.0.0.0/8 ::1  # FastCGI peers over TCP, or any\n"
	    "max-body = 1m\n"
	    "mount   = /api               # prefix to strip when PATH_INFO is absent\n"
	    "plugins = /usr/lib/idemfcgi/ledger.so\n"
	    "                             # (and further plugins on the same line)\n"
	    "ping-path  = /ping           # liveness, the store not asked; default off\n"
	    "ready-path = /ready          # readiness: 200 while the store answers, else\n"
	    "                             # 503; default off\n"
	    "slow-request = 5s            # handlers over it logged once and counted;\n"
	    "                             # default 0 (off)\n"
	    "\n"
	    "[idempotency]\n"
	    "enabled         = true\n"
	    "store           = memory     # memory | mysql\n"
	    "key-format      = opaque     # opaque | uuid | uuidv7\n"
	    "required        = true       # default policy for mutating routes\n"
	    "lifetime        = 24h\n"
	    "inflight-ttl    = 30s\n"
	    "inflight-wait   = 0\n"
	    "commit-statuses = 2xx 400 404 409 422\n"
	    "conflict-status = 409\n"
	    "scope           = none       # none | remote-user | header:X-Api-Key\n"
	    "max-entries     = 100000     # memory store\n"
	    "max-response    = 1m\n"
	    "cleanup-interval = 5m\n"
	    "replay-omit-headers =        # more response headers never stored for\n"
	    "                             # replay (X-Trace-Id ...), see 2.5\n"
	    "\n"
	    "[mysql]\n"
	    "host = 127.0.0.1\n"
	    "port = 3306                  # or socket = /run/mysqld/mysqld.sock\n"
	    "user = idem\n"
	    "password-file = /etc/idemfcgi/mysql.pw   # never logged\n"
	    "database = idem\n"
	    "pool-size = 8\n"
	    "connect-timeout = 2s\n"
	    "\n"
	    "[metrics]\n"
	    "enabled = true               # default false\n"
	    "path    = /metrics\n"
	    "allow   = 127.0.0.1 ::1      # also for ping-path, ready-path, status-path\n"
	    "status-path = /status        # php-fpm's status fields as JSON; default off\n";
	idem_config *cfg;
	idem_err err;
	char *log = load_capture(text, &cfg, &err);

	cr_assert_eq(err, IDEM_OK, "refused: %s", log);
	cr_expect_str_eq(cfg->server.listen, "127.0.0.1:9000");
	cr_expect_eq(cfg->server.threads, 8);
	cr_expect_eq(cfg->server.max_connections, 1024);
	cr_expect_eq(cfg->server.nallow_clients, 2);
	cr_expect_eq(cfg->server.max_body, 1048576);
	cr_expect_str_eq(cfg->server.mount, "/api");
	cr_assert_eq(cfg->server.nplugins, 1);
	cr_expect_str_eq(cfg->server.plugins[0], "/usr/lib/idemfcgi/ledger.so");
	cr_expect_eq(cfg->idem.lifetime, 86400000);
	cr_expect_eq(cfg->idem.inflight_ttl, 30000);
	cr_expect_eq(cfg->idem.inflight_wait, 0);
	cr_expect(cfg->idem.commit_status[200] && cfg->idem.commit_status[299] &&
	    cfg->idem.commit_status[400] && cfg->idem.commit_status[404] &&
	    cfg->idem.commit_status[409] && cfg->idem.commit_status[422]);
	cr_expect(!cfg->idem.commit_status[401] && !cfg->idem.commit_status[429] &&
	    !cfg->idem.commit_status[500] && !cfg->idem.commit_status[302]);
	cr_expect_eq(cfg->idem.scope, IDEM_SCOPE_NONE);
	cr_expect_eq(cfg->idem.nreplay_omit, 0);
	cr_expect_eq(cfg->mysql.port, 3306);
	cr_expect_str_eq(cfg->mysql.password_file, "/etc/idemfcgi/mysql.pw");
	cr_expect_eq(cfg->mysql.connect_timeout, 2000);
	cr_expect_str_eq(cfg->server.ping_path, "/ping");
	cr_expect_str_eq(cfg->server.ready_path, "/ready");
	cr_expect_eq(cfg->server.slow_request, 5000);
	cr_expect_eq(cfg->metrics.enabled, 1);
	cr_expect_str_eq(cfg->metrics.status_path, "/status");
	idem_config_free(cfg);
	free(log);
}

Test(config, values)
{
	idem_config *cfg;
	idem_err err;
	char *log = load_capture(
	    "[server]\nlisten = unix:/run/x.sock\nsocket-mode = 0600\n"
	    "mount = /api/\nplugins = a.so, b.so\n   /x/c.so\nlog-level = warn\n"
	    "[idempotency]\nkey-format = uuidv7\nscope = header:X-Api-Key\n"
	    "commit-statuses = 201 401 499\ninflight-ttl = PT1M ; comment\n",
	    &cfg, &err);

	cr_assert_eq(err, IDEM_OK, "refused: %s", log);
	cr_expect_str_eq(cfg->server.listen, "unix:/run/x.sock");
	cr_expect_eq(cfg->server.socket_mode, 0600);
	cr_expect_str_eq(cfg->server.mount, "/api");
	cr_assert_eq(cfg->server.nplugins, 3);
	cr_expect_str_eq(cfg->server.plugins[1], "b.so");
	cr_expect_str_eq(cfg->server.plugins[2], "/x/c.so");
	cr_expect_null(cfg->server.plugins[3]);
	cr_expect_eq(cfg->server.log_level, IDEM_LOG_WARN);
	cr_expect_eq(cfg->idem.key_format, IDEM_KEY_UUIDV7);
	cr_expect_eq(cfg->idem.scope, IDEM_SCOPE_HEADER);
	cr_expect_str_eq(cfg->idem.scope_header, "X-Api-Key");
	cr_expect(cfg->idem.commit_status[201] && !cfg->idem.commit_status[200]);
	cr_expect(cfg->idem.commit_status[401] && cfg->idem.commit_status[499] &&
	    !cfg->idem.commit_status[404]);
	cr_expect_eq(cfg->idem.inflight_ttl, 60000);
	idem_config_free(cfg);
	free(log);
}

/* store = mysql: taken by a build with the MySQL store, refused with the
 * reason by one without (./configure --without-mysql). */
Test(config, store_mysql)
{
	const char *text = "[idempotency]\nstore = mysql ; inline comment\n"
	    "[mysql]\nuser = u\ndatabase = d\n";
#ifdef HAVE_MYSQL
	idem_config *cfg;
	idem_err err;
	char *log = load_capture(text, &cfg, &err);

	cr_assert_eq(err, IDEM_OK, "refused: %s", log);
	cr_expect_eq(cfg->idem.store, IDEM_STORE_MYSQL);
	idem_config_free(cfg);
	free(log);
#else
	refused(text, "test.conf:2: [idempotency] store: store = mysql: this "
	    "idemfcgi was built without the MySQL store (./configure "
	    "--without-mysql)");
#endif
}

Test(config, defaults)
{
	idem_config *cfg;

	cr_assert_eq(idem_config_defaults(&cfg), IDEM_OK);
	cr_expect_null(cfg->server.listen);
	cr_expect_eq(cfg->server.threads, 8);
	cr_expect_eq(cfg->idem.conflict_status, 409);
	cr_expect_eq(cfg->idem.max_entries, 100000);
	cr_expect(cfg->idem.required);
	idem_config_free(cfg);
}

Test(config, refused_with_file_line_key)
{
	refused("[server]\nthreads = 8\nthredas = 4\n",
	    "test.conf:3: [server] thredas: unknown key; did you mean threads?");
	refused("[server]\nworksers = 2\n",
	    "test.conf:2: [server] worksers: unknown key; did you mean "
	    "workers?");
	refused("[idempotency]\nlifetiem = 1h\n", "[idempotency] lifetiem: "
	    "unknown key; did you mean lifetime?");
	refused("[server]\nthreads = lots\n",
	    "test.conf:2: [server] threads: bad value \"lots\"");
	refused("[server]\nthreads = 0\n", "from 1 to 1024");
	refused("[server]\nmax-body = 1q\n", "test.conf:2: [server] max-body");
	refused("[idempotency]\nlifetime = forever\n",
	    "test.conf:2: [idempotency] lifetime");
	refused("[idempotency]\nstore = valkey\n",
	    "expected memory, mysql, postgres or redis");
	refused("[redis]\nkey-prefix = {idem}:\n", "[redis] key-prefix: '{' "
	    "and '}' would change the hash tag");
	refused("[redis]\ncluster = true\ndatabase = 2\n", "[redis] database: "
	    "a Redis Cluster has database 0 only");
	refused("[redis]\ndurability = replicas\ndurability-replicas = 0\n",
	    "durability = replicas waits for at least one replica");
	refused("[redis]\ndurability = fsync\n", "expected none, replicas or "
	    "aof");
	refused("[idempotency]\nkey-format = uuid4\n", "opaque, uuid or uuidv7");
	refused("[idempotency]\nscope = header:\n", "header:NAME");
	refused("[idempotency]\ncommit-statuses = 2xx 503\n", "transient");
	refused("[idempotency]\ncommit-statuses = 2xy\n", "expected statuses");
	refused("[idempotency]\nconflict-status = 200\n", "from 400 to 499");
	refused("[server]\nlisten = localhost\n", "HOST:PORT");
	refused("[server]\nlisten = unix:relative.sock\n", "absolute path");
	refused("[server]\nlisten = 1.2.3.4:99999\n", "port");
	refused("[server]\nsocket-mode = 0999\n", "octal");
	refused("[server]\nmount = api\n", "start with '/'");
	refused("[server]\nthreads = 4\nthreads = 5\n",
	    "test.conf:3: [server] threads: given twice (first on line 2)");
	refused("threads = 4\n", "outside a section");
	refused("\nthreads = 4\n", "test.conf:2: threads: key outside a section "
	    "(put it under [server], [idempotency], [metrics], [mysql], [postgres], "
	    "[redis] or a plugin's section)");
	refused("[server\nthreads = 4\n", "test.conf:1: syntax error");
	refused("[server]\njust words\n", "test.conf:2: syntax error");
	refused("[idempotency]\nstore = mysql\n", "store = mysql needs a user");
	refused("[server]\nworkers = 2\n", "workers > 1 needs a store with a database");
	refused("[pluginx]\na = 1\na = 2\n", "given twice");
}

Test(config, long_line)
{
	char text[600];

	snprintf(text, sizeof(text), "[server]\nmount = /%0300d\n", 7);
	refused(text, "test.conf:2: line longer than");
}

Test(config, all_problems_reported)
{
	idem_config *cfg;
	idem_err err;
	char *log = load_capture("[server]\na = 1\nb = 2\n[idempotency]\nc = 3\n",
	    &cfg, &err);

	cr_expect_eq(err, IDEM_ERR_CONFIG);
	cr_expect(strstr(log, ":2: [server] a:") != NULL, "%s", log);
	cr_expect(strstr(log, ":3: [server] b:") != NULL, "%s", log);
	cr_expect(strstr(log, ":5: [idempotency] c:") != NULL, "%s", log);
	free(log);
}

Test(config, unreadable_file)
{
	idem_config *cfg = NULL;
	harness_capture cap;
	int began = harness_capture_begin(&cap);
	idem_err err = idem_config_load("/nonexistent/idemfcgi.conf", &cfg);
	char *buf = harness_capture_end(&cap);

	cr_assert(began == 0 && buf != NULL && buf[0] != '\0');
	cr_expect_eq(err, IDEM_ERR_IO);
	cr_expect_null(cfg);
	cr_expect(strstr(buf, "/nonexistent/idemfcgi.conf: cannot read") != NULL,
	    "%s", buf);
	free(buf);
}

Test(config, plugin_sections)
{
	static const char *const names[] = { "ledger", NULL };
	idem_config *cfg;
	idem_config_entry *e;
	idem_err err;
	harness_capture cap;
	char *buf, *log;

	log = load_capture("[ledger]\nmax-accounts = 5\ntypo = 1\n"
	    "[nobody]\nx = 1\ny = 2\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	e = idem_config_find(cfg, "ledger", "max-accounts");
	cr_assert_not_null(e);
	cr_expect_str_eq(e->value, "5");
	cr_expect_eq(e->line, 2);
	cr_expect_null(idem_config_find(cfg, "ledger", "absent"));

	harness_capture_begin(&cap);
	err = idem_config_check_unused(cfg, names);
	buf = harness_capture_end(&cap);
	cr_assert(buf != NULL && buf[0] != '\0');
	cr_expect_eq(err, IDEM_ERR_CONFIG);
	cr_expect(strstr(buf, ":3: [ledger] typo: unknown key") != NULL, "%s",
	    buf);
	cr_expect(strstr(buf, ":5: [nobody]: unknown section") != NULL, "%s",
	    buf);
	/* a section is reported once, not once per key */
	cr_expect_null(strstr(strstr(buf, "[nobody]") + 1, "[nobody]"), "%s",
	    buf);
	cr_expect(strstr(buf, "max-accounts") == NULL, "%s", buf);
	free(buf);
	idem_config_free(cfg);
}

/* An unknown key of a plugin's section is compared with the keys the
 * plugin looked for there; an unknown section with the plugins' and the
 * core sections' names; nothing close, no suggestion. */
Test(config, did_you_mean)
{
	static const char *const names[] = { "ledger", NULL };
	static const char *const keys[] = { "workers", "threads", "listen" };
	idem_config *cfg;
	idem_err err;
	harness_capture cap;
	char *buf, *log;

	log = load_capture("[ledger]\nmax-acounts = 5\nzzz = 1\n[ledgr]\n"
	    "x = 1\n[sever]\ny = 2\n[elsewhere]\nz = 3\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_expect_null(idem_config_find(cfg, "ledger", "max-accounts"));
	cr_expect_null(idem_config_find(cfg, "ledger", "transactional"));
	harness_capture_begin(&cap);
	err = idem_config_check_unused(cfg, names);
	buf = harness_capture_end(&cap);
	cr_assert(buf != NULL);
	cr_expect_eq(err, IDEM_ERR_CONFIG);
	cr_expect(strstr(buf, ":2: [ledger] max-acounts: unknown key; did you "
	    "mean max-accounts?") != NULL, "%s", buf);
	cr_expect(strstr(buf, ":3: [ledger] zzz: unknown key\n") != NULL, "%s",
	    buf);
	cr_expect(strstr(buf, ":5: [ledgr]: unknown section (no loaded plugin "
	    "is named \"ledgr\"); did you mean [ledger]?") != NULL, "%s", buf);
	cr_expect(strstr(buf, ":7: [sever]: unknown section (no loaded plugin "
	    "is named \"sever\"); did you mean [server]?") != NULL, "%s", buf);
	cr_expect(strstr(buf, ":9: [elsewhere]: unknown section (no loaded "
	    "plugin is named \"elsewhere\")\n") != NULL, "%s", buf);
	free(buf);
	idem_config_free(cfg);

	cr_expect_str_eq(idem_config_closest("worksers", keys, 3), "workers");
	cr_expect_str_eq(idem_config_closest("thraeds", keys, 3), "threads");
	cr_expect_str_eq(idem_config_closest("lisen", keys, 3), "listen");
	cr_expect_null(idem_config_closest("port", keys, 3));
	cr_expect_null(idem_config_closest("workers", keys, 0));
	refused("[server]\nbananas = 1\n", "[server] bananas: unknown key\n");
}

/* The operator's keys: log format, the built-in routes, who may scrape. */
Test(config, operations_keys)
{
	idem_config *cfg;
	idem_err err;
	char *log;

	cr_assert_eq(idem_config_defaults(&cfg), IDEM_OK);
	cr_expect_eq(cfg->server.log_json, 0);
	cr_expect_str_eq(cfg->server.policy_path, "/idempotency");
	cr_expect_eq(cfg->metrics.enabled, 0);
	cr_expect_str_eq(cfg->metrics.path, "/metrics");
	cr_expect(idem_cidr_match(cfg->metrics.allow, cfg->metrics.nallow,
	    "127.0.0.1"));
	cr_expect(idem_cidr_match(cfg->metrics.allow, cfg->metrics.nallow,
	    "::1"));
	cr_expect(!idem_cidr_match(cfg->metrics.allow, cfg->metrics.nallow,
	    "10.0.0.1"));
	idem_config_free(cfg);

	log = load_capture("[server]\nlog-format = json\npolicy-path = off\n"
	    "[metrics]\nenabled = yes\npath = /ops/metrics\n"
	    "allow = 10.0.0.0/8, 192.168.1.7\n  2001:db8::/32\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_expect_eq(cfg->server.log_json, 1);
	cr_expect_null(cfg->server.policy_path);
	cr_expect_eq(cfg->metrics.enabled, 1);
	cr_expect_str_eq(cfg->metrics.path, "/ops/metrics");
	cr_expect_eq(cfg->metrics.nallow, 3);
	cr_expect(idem_cidr_match(cfg->metrics.allow, 3, "10.255.0.1"));
	cr_expect(idem_cidr_match(cfg->metrics.allow, 3, "::ffff:10.1.2.3"),
	    "an IPv4 client seen on an IPv6 socket");
	cr_expect(idem_cidr_match(cfg->metrics.allow, 3, "192.168.1.7"));
	cr_expect(!idem_cidr_match(cfg->metrics.allow, 3, "192.168.1.8"));
	cr_expect(idem_cidr_match(cfg->metrics.allow, 3, "2001:db8:1::5"));
	cr_expect(!idem_cidr_match(cfg->metrics.allow, 3, "2001:db9::5"));
	cr_expect(!idem_cidr_match(cfg->metrics.allow, 3, "127.0.0.1"));
	cr_expect(!idem_cidr_match(cfg->metrics.allow, 3, "not-an-address"));
	cr_expect(!idem_cidr_match(cfg->metrics.allow, 3, NULL));
	idem_config_free(cfg);

	log = load_capture("[metrics]\nallow = any\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_expect(idem_cidr_match(cfg->metrics.allow, cfg->metrics.nallow,
	    "203.0.113.9"));
	cr_expect(idem_cidr_match(cfg->metrics.allow, cfg->metrics.nallow,
	    "2001:db8::1"));
	idem_config_free(cfg);

	refused("[server]\nlog-format = xml\n", "expected text or json");
	refused("[server]\npolicy-path = config\n", "a path such as");
	refused("[server]\npolicy-path = /a b\n", "visible ASCII");
	refused("[metrics]\npath = /m?x=1\n", "without ?");
	refused("[metrics]\nallow = 10.0.0.0/33\n", "expected addresses");
	refused("[metrics]\nallow = 10.0.0.0/8 example.org\n",
	    "expected addresses");
	refused("[metrics]\nallow =\n", "at least one address");
	refused("[metrics]\nbogus = 1\n", "[metrics] bogus: unknown key");
}

/* [server] allow-clients (FastCGI peers over TCP: loopback unless said
 * otherwise, "any" written out) and max-connections (at least threads);
 * bad values are refused with file, line and key, as --check shows them. */
Test(config, connection_keys)
{
	struct sockaddr_in in4;
	struct sockaddr_in6 in6;
	idem_config *cfg;
	idem_err err;
	char *log;

	cr_assert_eq(idem_config_defaults(&cfg), IDEM_OK);
	cr_expect_eq(cfg->server.max_connections, 1024);
	cr_expect(idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "127.0.0.1"));
	cr_expect(idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "127.9.8.7"), "all of 127/8 is loopback");
	cr_expect(idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "::1"));
	cr_expect(!idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "10.0.0.1"));
	cr_expect(!idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "::2"));
	/* a peer as accept gives it: an IPv4 peer of a dual-stack socket is
	 * ::ffff:a.b.c.d and matches as its IPv4 form; a unix peer has no
	 * address to check */
	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	memcpy(&in6.sin6_addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\x05", 16);
	cr_expect_eq(idem_cidr_match_sockaddr(cfg->server.allow_clients,
	    cfg->server.nallow_clients, (struct sockaddr *)&in6), 1);
	memcpy(&in6.sin6_addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x0a\0\0\x05", 16);
	cr_expect_eq(idem_cidr_match_sockaddr(cfg->server.allow_clients,
	    cfg->server.nallow_clients, (struct sockaddr *)&in6), 0);
	memset(&in4, 0, sizeof(in4));
	in4.sin_family = AF_INET;
	memcpy(&in4.sin_addr, "\xc0\x00\x02\x01", 4);
	cr_expect_eq(idem_cidr_match_sockaddr(cfg->server.allow_clients,
	    cfg->server.nallow_clients, (struct sockaddr *)&in4), 0);
	in4.sin_family = AF_UNIX;
	cr_expect_eq(idem_cidr_match_sockaddr(cfg->server.allow_clients,
	    cfg->server.nallow_clients, (struct sockaddr *)&in4), -1);
	idem_config_free(cfg);

	log = load_capture("[server]\nthreads = 4\nmax-connections = 4\n"
	    "allow-clients = 192.0.2.0/24\n  2001:db8::7\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_expect_eq(cfg->server.max_connections, 4);
	cr_expect_eq(cfg->server.nallow_clients, 2);
	cr_expect(idem_cidr_match(cfg->server.allow_clients, 2, "192.0.2.200"));
	cr_expect(idem_cidr_match(cfg->server.allow_clients, 2, "2001:db8::7"));
	cr_expect(!idem_cidr_match(cfg->server.allow_clients, 2, "127.0.0.1"),
	    "a list replaces the loopback default");
	memcpy(&in4.sin_addr, "\xc0\x00\x02\x01", 4);
	in4.sin_family = AF_INET;
	cr_expect_eq(idem_cidr_match_sockaddr(cfg->server.allow_clients, 2,
	    (struct sockaddr *)&in4), 1);
	idem_config_free(cfg);

	log = load_capture("[server]\nallow-clients = any\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_expect(idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "203.0.113.9"));
	cr_expect(idem_cidr_match(cfg->server.allow_clients, cfg->server.nallow_clients,
	    "2001:db8::1"));
	idem_config_free(cfg);

	refused("[server]\nallow-clients = 10.0.0.0/33\n",
	    "test.conf:2: [server] allow-clients: bad value \"10.0.0.0/33\": "
	    "expected addresses");
	refused("[server]\nallow-clients = web1.example.org\n",
	    "expected addresses or blocks such as 127.0.0.1 10.0.0.0/8 ::1, "
	    "or any");
	refused("[server]\nallow-clients = 10.1.2.3/\n", "expected addresses");
	refused("[server]\nallow-clients =\n", "at least one address");
	refused("[server]\nmax-connections = 0\n", "[server] max-connections");
	refused("[server]\nmax-connections = 65537\n",
	    "[server] max-connections");
	refused("[server]\nthreads = 16\nmax-connections = 8\n",
	    "test.conf:3: [server] max-connections: max-connections (8) is "
	    "below threads (16)");
	refused("[server]\nmax-connections = 4\n",
	    "max-connections (4) is below threads (8)");
}

/* More response headers never stored for replay: header names in any
 * case, on continuation lines too; anything else is refused with file,
 * line and key. */
Test(config, replay_omit_headers)
{
	idem_config *cfg;
	idem_err err;
	char *log, text[400];

	cr_assert_eq(idem_config_defaults(&cfg), IDEM_OK);
	cr_expect_eq(cfg->idem.nreplay_omit, 0);
	idem_config_free(cfg);

	log = load_capture("[idempotency]\nreplay-omit-headers = X-Trace, "
	    "x-foo\n   X-Bar  # a comment\nlifetime = 1h\n", &cfg, &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_assert_eq(cfg->idem.nreplay_omit, 3);
	cr_expect_str_eq(cfg->idem.replay_omit[0], "X-Trace");
	cr_expect_str_eq(cfg->idem.replay_omit[1], "x-foo");
	cr_expect_str_eq(cfg->idem.replay_omit[2], "X-Bar");
	cr_expect_null(cfg->idem.replay_omit[3]);
	idem_config_free(cfg);

	refused("[idempotency]\nreplay-omit-headers = X-Trace X/Y\n",
	    "test.conf:2: [idempotency] replay-omit-headers: bad value "
	    "\"X-Trace X/Y\": \"X/Y\" is not a header name");
	refused("[idempotency]\nreplay-omit-headers = X-A\n  X-B Caf\xc3\xa9\n",
	    "test.conf:3: [idempotency] replay-omit-headers: bad value");
	snprintf(text, sizeof(text), "[server]\n[idempotency]\n"
	    "replay-omit-headers = X-%0128d\n", 7);
	refused(text, "test.conf:3: [idempotency] replay-omit-headers");
	refused("[idempotency]\nreplay-omit-headers = X-A\nlifetime = 1h\n"
	    "replay-omit-headers = X-B\n", "test.conf:4: [idempotency] "
	    "replay-omit-headers: given twice (first on line 2)");
}

/* Lifetimes as the policy route advertises them. */
Test(duration, iso_format)
{
	char buf[40];

	cr_expect_str_eq(idem_format_iso_duration(86400000, buf, sizeof(buf)),
	    "PT24H");
	cr_expect_str_eq(idem_format_iso_duration(1800000, buf, sizeof(buf)),
	    "PT30M");
	cr_expect_str_eq(idem_format_iso_duration(5430000, buf, sizeof(buf)),
	    "PT1H30M30S");
	cr_expect_str_eq(idem_format_iso_duration(1500, buf, sizeof(buf)),
	    "PT1.500S");
	cr_expect_str_eq(idem_format_iso_duration(0, buf, sizeof(buf)), "PT0S");
	cr_expect_str_eq(idem_format_iso_duration(172800000, buf, sizeof(buf)),
	    "PT48H");
}

/* Each enumeration has one name table: the values the config takes, the
 * names its messages list, the names the logger and the policy route
 * print.  The messages are as they were before the tables. */
Test(config, enum_names)
{
	idem_config *cfg;
	idem_err err;
	char *log;
	size_t i;

	cr_expect_str_eq(idem_key_format_names[IDEM_KEY_UUIDV7], "uuidv7");
	cr_expect_str_eq(idem_scope_names[IDEM_SCOPE_REMOTE_USER],
	    "remote-user");
	cr_expect_str_eq(idem_store_names[IDEM_STORE_MYSQL], "mysql");
	cr_expect_str_eq(idem_store_names[IDEM_STORE_POSTGRES], "postgres");
	cr_expect_str_eq(idem_pg_sslmode_names[IDEM_PG_SSL_VERIFY_FULL],
	    "verify-full");
	cr_expect_str_eq(idem_log_level_names[IDEM_LOG_WARN], "warn");
	cr_expect_str_eq(idem_log_format_names[IDEM_LOG_JSON], "json");
	for (i = 0; i < IDEM_LOG__MAX; i++)
		cr_expect_not_null(idem_log_level_names[i]);

	/* log-level alone takes any case */
	log = load_capture("[server]\nlog-level = DEBUG\nlog-format = json\n"
	    "[idempotency]\nkey-format = uuid\nscope = remote-user\n", &cfg,
	    &err);
	cr_assert_eq(err, IDEM_OK, "%s", log);
	free(log);
	cr_expect_eq(cfg->server.log_level, IDEM_LOG_DEBUG);
	cr_expect_eq(cfg->server.log_json, 1);
	cr_expect_eq(cfg->idem.key_format, IDEM_KEY_UUID);
	cr_expect_eq(cfg->idem.scope, IDEM_SCOPE_REMOTE_USER);
	idem_config_free(cfg);

	refused("[server]\nlog-level = verbose\n", "test.conf:2: [server] "
	    "log-level: bad value \"verbose\": expected debug, info, warn or "
	    "error");
	refused("[server]\nlog-format = JSON\n", "bad value \"JSON\": expected "
	    "text or json");
	refused("[idempotency]\nstore = Memory\n",
	    "expected memory, mysql, postgres or redis");
	refused("[idempotency]\nkey-format = UUID\n",
	    "expected opaque, uuid or uuidv7");
	refused("[idempotency]\nscope = header\n",
	    "expected none, remote-user or header:NAME");
	refused("[idempotency]\nscope = header:X Y\n",
	    "header:NAME needs an HTTP header name");
}

/* Expects every value of cfg to be the documented default (DESIGN.md
 * section 3 and idemfcgi.conf(5)). */
static void
expect_defaults(const idem_config *cfg)
{
	unsigned s;

	/* [server] */
	cr_expect_null(cfg->server.listen);
	cr_expect_eq(cfg->server.socket_mode, 0660);
	cr_expect_eq(cfg->server.workers, 1);
	cr_expect_eq(cfg->server.threads, 8);
	cr_expect_eq(cfg->server.max_connections, 1024);
	cr_assert_eq(cfg->server.nallow_clients, 2);
	cr_expect_eq(cfg->server.allow_clients[0].family, AF_INET);
	cr_expect_eq(cfg->server.allow_clients[0].bits, 8);
	cr_expect_eq(cfg->server.allow_clients[1].family, AF_INET6);
	cr_expect_eq(cfg->server.allow_clients[1].bits, 128);
	cr_expect_eq(cfg->server.max_body, 1048576);
	cr_expect_eq(cfg->server.max_headers, 100);
	cr_expect_eq(cfg->server.max_header_size, 8192);
	cr_expect_eq(cfg->server.max_params_size, 65536);
	cr_expect_str_eq(cfg->server.mount, "");
	cr_expect_null(cfg->server.plugins);
	cr_expect_eq(cfg->server.nplugins, 0);
	cr_expect_eq(cfg->server.shutdown_grace, 30000);
	cr_expect_eq(cfg->server.log_level, IDEM_LOG_INFO);
	cr_expect_eq(cfg->server.log_json, 0);
	cr_expect_str_eq(cfg->server.policy_path, "/idempotency");
	cr_expect_null(cfg->server.ping_path);
	cr_expect_null(cfg->server.ready_path);
	cr_expect_eq(cfg->server.slow_request, 0);
	/* [idempotency] */
	cr_expect_eq(cfg->idem.enabled, 1);
	cr_expect_eq(cfg->idem.store, IDEM_STORE_MEMORY);
	cr_expect_eq(cfg->idem.key_format, IDEM_KEY_OPAQUE);
	cr_expect_eq(cfg->idem.required, 1);
	cr_expect_eq(cfg->idem.lifetime, 86400000);
	cr_expect_eq(cfg->idem.inflight_ttl, 30000);
	cr_expect_eq(cfg->idem.inflight_wait, 0);
	for (s = 0; s < 600; s++)
		cr_expect_eq(cfg->idem.commit_status[s], (s >= 200 && s < 300) ||
		    s == 400 || s == 404 || s == 409 || s == 422,
		    "commit status %u", s);
	cr_expect_eq(cfg->idem.conflict_status, 409);
	cr_expect_eq(cfg->idem.scope, IDEM_SCOPE_NONE);
	cr_expect_null(cfg->idem.scope_header);
	cr_expect_eq(cfg->idem.max_entries, 100000);
	cr_expect_eq(cfg->idem.max_response, 1048576);
	cr_expect_eq(cfg->idem.cleanup_interval, 300000);
	cr_expect_null(cfg->idem.replay_omit);
	cr_expect_eq(cfg->idem.nreplay_omit, 0);
	/* [mysql] */
	cr_expect_str_eq(cfg->mysql.host, "127.0.0.1");
	cr_expect_eq(cfg->mysql.port, 3306);
	cr_expect_null(cfg->mysql.socket);
	cr_expect_null(cfg->mysql.user);
	cr_expect_null(cfg->mysql.password_file);
	cr_expect_null(cfg->mysql.database);
	cr_expect_eq(cfg->mysql.pool_size, 8);
	cr_expect_eq(cfg->mysql.connect_timeout, 2000);
	cr_expect_eq(cfg->mysql.read_timeout, 5000);
	cr_expect_eq(cfg->mysql.write_timeout, 5000);
	cr_expect_eq(cfg->mysql.batch, 1);
	cr_expect_eq(cfg->mysql.batch_rows, 16);
	/* [postgres] */
	cr_expect_str_eq(cfg->postgres.host, "127.0.0.1");
	cr_expect_eq(cfg->postgres.port, 5432);
	cr_expect_eq(cfg->postgres.pool_size, 8);
	cr_expect_eq(cfg->postgres.batch, 1);
	cr_expect_eq(cfg->postgres.batch_rows, 16);
	/* [metrics] */
	cr_expect_eq(cfg->metrics.enabled, 0);
	cr_expect_str_eq(cfg->metrics.path, "/metrics");
	cr_assert_eq(cfg->metrics.nallow, 2);
	cr_expect_eq(cfg->metrics.allow[0].family, AF_INET);
	cr_expect_eq(cfg->metrics.allow[0].bits, 32);
	cr_expect_eq(memcmp(cfg->metrics.allow[0].addr, "\x7f\0\0\1", 4), 0);
	cr_expect_eq(cfg->metrics.allow[1].family, AF_INET6);
	cr_expect_eq(cfg->metrics.allow[1].bits, 128);
	cr_expect_eq(memcmp(cfg->metrics.allow[1].addr,
	    "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16), 0);
	cr_expect_null(cfg->metrics.status_path);
	/* no plugin sections, no errors */
	cr_expect_eq(cfg->nentries, 0);
	cr_expect_eq(cfg->errors, 0);
}

/* An empty file, a file of empty sections and idem_config_defaults give
 * every documented default. */
Test(config, empty_file_defaults)
{
	static const char *const texts[] = { "", "\n# nothing\n",
	    "[server]\n[idempotency]\n[metrics]\n[mysql]\n" };
	idem_config *cfg;
	idem_err err;
	char *log;
	size_t i;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		log = load_capture(texts[i], &cfg, &err);
		cr_assert_eq(err, IDEM_OK, "%s", log);
		cr_expect_str_eq(log, "");
		free(log);
		cr_expect_str_eq(cfg->path, "test.conf");
		expect_defaults(cfg);
		idem_config_free(cfg);
	}
	cr_assert_eq(idem_config_defaults(&cfg), IDEM_OK);
	cr_expect_str_eq(cfg->path, "(defaults)");
	expect_defaults(cfg);
	idem_config_free(cfg);
}

/* Out of range: the message gives the row's range, in the key's unit. */
Test(config, range_messages)
{
	refused("[server]\nmax-header-size = 10\n", "test.conf:2: [server] "
	    "max-header-size: bad value \"10\": must be from 64 to 1048576 "
	    "bytes");
	refused("[server]\nshutdown-grace = 2h\n", "[server] shutdown-grace: "
	    "bad value \"2h\": must be from 0ms to 3600000ms");
	refused("[idempotency]\nmax-entries = 0\n", "[idempotency] "
	    "max-entries: bad value \"0\": expected a whole number from 1 to "
	    "100000000");
	refused("[mysql]\nport = 65536\n", "expected a whole number from 1 to "
	    "65535");
	refused("[mysql]\nbatch-rows = 1\n", "expected a whole number from 2 to "
	    "64");
	refused("[mysql]\nbatch-rows = 65\n", "expected a whole number from 2 "
	    "to 64");
	refused("[mysql]\nbatch = sometimes\n", "[mysql] batch");
	refused("[mysql]\nhost =\n", "[mysql] host: bad value \"\": an empty "
	    "value");
	refused("[idempotency]\nrequired = 2\n", "expected true or false");
}

/* [mysql] host and socket take a failover list (issue 15); each entry is
 * checked at start-up, and the pool splits the same text with the same
 * parser (idem_parse_endpoints). */
Test(config, mysql_host_lists)
{
	idem_endpoint e[IDEM_ENDPOINTS_MAX];
	idem_config *cfg = NULL;
	size_t n;

	cr_assert_eq(idem_config_load_string("[mysql]\nhost = db1 "
	    "10.0.0.2:3307 [::1]:3308 [fe80::1]\ncausal-reads = true\n",
	    "t.conf", &cfg), IDEM_OK);
	cr_expect(cfg->mysql.causal_reads);
	cr_assert_null(idem_parse_endpoints(cfg->mysql.host, 0, 3306, e, &n));
	cr_assert_eq(n, 4);
	cr_expect_str_eq(e[0].host, "db1");
	cr_expect_eq(e[0].port, 3306);
	cr_expect_str_eq(e[1].host, "10.0.0.2");
	cr_expect_eq(e[1].port, 3307);
	cr_expect_str_eq(e[2].host, "::1");
	cr_expect_eq(e[2].port, 3308);
	cr_expect_str_eq(e[3].host, "fe80::1");
	cr_expect_eq(e[3].port, 3306);
	idem_config_free(cfg);
	cr_assert_null(idem_parse_endpoints("/a.sock  /b.sock", 1, 0, e, &n));
	cr_expect_eq(n, 2);
	cr_expect_str_eq(e[1].socket, "/b.sock");
	refused("[mysql]\nhost = db1:0\n", "a port is a number from 1 to "
	    "65535");
	refused("[mysql]\nhost = db1:x\n", "a port is a number");
	refused("[mysql]\nhost = [::1\n", "an IPv6 address is written");
	refused("[mysql]\nhost = a/b\n", "a host is a name or an address");
	refused("[mysql]\nhost = a b c d e f g h i\n", "at most 8 servers");
	refused("[mysql]\nsocket = /a.sock rel.sock\n", "a socket is an "
	    "absolute path");
	refused("[mysql]\ncausal-reads = maybe\n", "expected true or false");
	/* the same server twice, however spelled; a zone id is no address */
	refused("[mysql]\nhost = db1 DB1:3306\n", "a server is listed twice");
	refused("[mysql]\nhost = [::1] [::1]:3306\n", "listed twice");
	refused("[mysql]\nsocket = /a.sock /a.sock\n", "listed twice");
	refused("[mysql]\nhost = [fe80::1%eth0]\n", "a host is a name or an "
	    "address");
	cr_assert_eq(idem_config_load_string("[mysql]\nhost = db1 db1:3307\n"
	    "failback = 2s\n", "t.conf", &cfg), IDEM_OK);
	cr_expect_eq(cfg->mysql.failback, 2000);
	idem_config_free(cfg);
	refused("[mysql]\nfailback = 10ms\n", "[mysql] failback: bad value");
}

/* ------------------------------------------------------ route sections */

/* [route METHOD PATH] sections: each key is kept on its section, whole
 * (a template longer than inih's 50 bytes of a section name too), with
 * continuation lines for the lists. */
Test(route_sections, parsed)
{
	idem_config *cfg = NULL;
	idem_err err;
	char *log = load_capture("[route POST /orders/{id}/cancel]\n"
	    "lifetime = 7d\ncommit-statuses = 2xx 400 404 409 410 422\n"
	    "fingerprint-ignore = /client_ts\n  /nonce\n"
	    "[idempotency]\nlifetime = 1h\n"
	    "[route PUT /a/very/long/template/{with}/more/than/fifty/bytes/"
	    "in/it]\npolicy = optional\nkey-format = uuid\n"
	    "fingerprint-headers = X-Tenant X-Api-Version\n", &cfg, &err);
	const idem_route_section *rs;

	cr_assert_eq(err, IDEM_OK, "%s", log);
	cr_assert_eq(cfg->nroutes, 2);
	rs = &cfg->routes[0];
	cr_expect_str_eq(rs->method, "POST");
	cr_expect_str_eq(rs->tmpl, "/orders/{id}/cancel");
	cr_expect_eq(rs->line, 1);
	cr_expect_eq(rs->conf.lifetime, 7 * 86400000ULL);
	cr_expect(rs->conf.commit_status[201] && rs->conf.commit_status[410] &&
	    !rs->conf.commit_status[401]);
	cr_assert_eq(rs->conf.nfp_ignore, 2);
	cr_expect_str_eq(rs->conf.fp_ignore[1], "/nonce");
	cr_expect_eq(rs->conf.set, (1u << IDEM_RK_LIFETIME) |
	    (1u << IDEM_RK_COMMIT_STATUSES) | (1u << IDEM_RK_FP_IGNORE));
	cr_expect_eq(cfg->idem.lifetime, 3600000);
	rs = &cfg->routes[1];
	cr_expect_str_eq(rs->tmpl, "/a/very/long/template/{with}/more/than/"
	    "fifty/bytes/in/it");
	cr_expect_eq(rs->conf.policy, IDEM_POLICY_OPTIONAL);
	cr_expect_eq(rs->conf.key_format, IDEM_KEY_UUID);
	cr_assert_eq(rs->conf.nfp_headers, 2);
	cr_expect_str_eq(rs->conf.fp_headers[0], "X-Tenant");
	idem_config_free(cfg);
	free(log);
}

/* The message of a bad value: from the second "bad value" on, as the
 * [idempotency] key of the same name gives it. */
static void
same_refusal(const char *key, const char *value)
{
	char route[256], idem[256];
	char *a, *b;
	idem_config *cfg = NULL;
	idem_err err;

	snprintf(route, sizeof(route), "[route POST /x]\n%s = %s\n", key, value);
	snprintf(idem, sizeof(idem), "[idempotency]\n%s = %s\n", key, value);
	a = load_capture(route, &cfg, &err);
	cr_expect_eq(err, IDEM_ERR_CONFIG, "accepted: %s", route);
	b = load_capture(idem, &cfg, &err);
	cr_expect_eq(err, IDEM_ERR_CONFIG, "accepted: %s", idem);
	cr_assert_not_null(strstr(a, "test.conf:2: [route POST /x] "), "%s", a);
	cr_assert_not_null(strstr(a, "bad value"), "%s", a);
	cr_assert_not_null(strstr(b, "bad value"), "%s", b);
	cr_expect_str_eq(strstr(a, "bad value"), strstr(b, "bad value"));
	free(a);
	free(b);
}

Test(route_sections, values_checked_as_idempotency)
{
	same_refusal("lifetime", "1 day");
	same_refusal("lifetime", "500ms");
	same_refusal("inflight-ttl", "2d");
	same_refusal("inflight-wait", "forever");
	same_refusal("commit-statuses", "2xx 500");
	same_refusal("commit-statuses", "4xx");
	same_refusal("key-format", "ulid");
}

Test(route_sections, refused)
{
	refused("[route POST /x]\nlifetim = 1h\n", "test.conf:2: [route POST "
	    "/x] lifetim: unknown key; did you mean lifetime?");
	refused("[route POST /x]\nlifetime = 1h\nlifetime = 2h\n", "test.conf:3: "
	    "[route POST /x] lifetime: given twice (first on line 2)");
	refused("[route /x]\nlifetime = 1h\n", "test.conf:1: [route /x]: "
	    "expected [route METHOD PATH]");
	refused("[route post /x]\nlifetime = 1h\n", "test.conf:1: [route post "
	    "/x]: expected [route METHOD PATH]");
	refused("[route POST x]\n", "test.conf:1: [route POST x]: expected");
	refused("[route POST /x y]\n", "test.conf:1: [route POST /x y]: "
	    "expected");
	refused("[route POST /x]\n[route POST /x]\n", "test.conf:2: [route "
	    "POST /x]: given twice (first on line 1)");
	refused("[route POST /x]\nfingerprint-ignore = nonce\n", "test.conf:2: "
	    "[route POST /x] fingerprint-ignore: bad value \"nonce\": \"nonce\" "
	    "is not a JSON Pointer");
	refused("[route POST /x]\nfingerprint-ignore = /a~2b\n", "is not a JSON "
	    "Pointer");
	refused("[route POST /x]\nfingerprint-headers = X:Y\n", "is not a "
	    "header name");
	refused("[route POST /x]\npolicy = sometimes\n", "expected default, "
	    "off, optional or required");
	refused("[route POST]\nlifetime = 1h\n", "test.conf:1: [route POST]: "
	    "expected [route METHOD PATH]");
	refused("[route POST]x /y\n", "test.conf:1: [route POST]: expected");
	/* an indented header after a key continues its value, for inih */
	refused("[server]\nplugins = a.so\n  [route POST /x]\nlifetime = 1h\n",
	    "test.conf:4: [server] lifetime: unknown key");
}

/* A file that starts with a UTF-8 byte order mark: its first header is a
 * route section all the same. */
Test(route_sections, after_a_bom)
{
	idem_config *cfg = NULL;
	idem_err err;
	char *log = load_capture("\xEF\xBB\xBF[route POST /x]\nlifetime = 1h\n",
	    &cfg, &err);

	cr_assert_eq(err, IDEM_OK, "%s", log);
	cr_assert_eq(cfg->nroutes, 1);
	cr_expect_eq(cfg->routes[0].conf.lifetime, 3600000);
	idem_config_free(cfg);
	free(log);
}
