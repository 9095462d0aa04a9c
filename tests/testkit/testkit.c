/*
 * testkit.c - the test plugin of DESIGN.md section 4 (built for the tests,
 * never installed).
 *
 * Every execution that reaches its end appends "<path> <key or -> <exec>\n"
 * to [testkit] log with one write(2) on an O_APPEND descriptor: the tests
 * count side effects by counting lines, across threads, processes and
 * instances.  Bytes of the path or key outside 0x21..0x7e are written as
 * %XX so a line always has three fields.
 *
 * Each hook of the plugin's lifecycle appends "<hook> <pid>[ check]\n" to
 * <log>.lifecycle, so a test can see which process ran which hook.
 *
 * A handler that sleeps (sleep/{ms}, tx/{code}?ms=N) appends
 * "<path> <key or ->\n" to <log>.started before its sleep: the key is
 * reserved by then, so a test sends a duplicate once the line is there
 * instead of after a guessed delay.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uuid.h>

#include "idemfcgi_db.h"

typedef struct testkit {
	int log_fd;
	char *crashed_path;   /* <log>.crashed */
	char *lifecycle_path; /* <log>.lifecycle */
	int started_fd;       /* <log>.started */
	char *flaky_path;     /* <log>.flaky */
	char *release_path;   /* <log>.release */
} testkit;

/* Appends "<hook> <pid>[ check]" to tk's lifecycle file (best effort: a
 * test that reads it fails when a line is missing). */
static void
lifecycle(const testkit *tk, const char *hook, int check)
{
	char line[64];
	int fd, n;

	if (tk->lifecycle_path == NULL || (fd = open(tk->lifecycle_path,
	    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return;
	n = snprintf(line, sizeof(line), "%s %ld%s\n", hook, (long)getpid(),
	    check ? " check" : "");
	if (write(fd, line, (size_t)n) != n)
		idem_log(NULL, IDEM_LOG_WARN, "testkit: %s: short write",
		    tk->lifecycle_path);
	close(fd);
}

/* Appends s to out (size left in *left), %XX-escaping unusual bytes. */
static char *
put_field(char *out, size_t *left, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0' && *left > 4; s++) {
		unsigned char c = (unsigned char)*s;
		if (c > 0x20 && c < 0x7f && c != '%') {
			*out++ = (char)c;
			(*left)--;
		} else {
			*out++ = '%';
			*out++ = hex[c >> 4];
			*out++ = hex[c & 15];
			*left -= 3;
		}
	}
	return out;
}

/* Appends "<path> <key or ->[ exec]\n" to fd with one write(2).  Returns
 * IDEM_OK or IDEM_ERR_IO. */
static idem_err
put_line(int fd, const idem_request *req, const char *exec)
{
	char line[2048], *p = line;
	size_t left = sizeof(line) - 64;
	const char *key = idem_request_header(req, "Idempotency-Key");

	p = put_field(p, &left, idem_request_path(req));
	*p++ = ' ';
	p = put_field(p, &left, key != NULL ? key : "-");
	p += exec != NULL ? sprintf(p, " %s\n", exec) : sprintf(p, "\n");
	if (write(fd, line, (size_t)(p - line)) != p - line) {
		idem_log(req, IDEM_LOG_ERROR, "testkit: log write: %s",
		    strerror(errno));
		return IDEM_ERR_IO;
	}
	return IDEM_OK;
}

/* Records the side effect of one execution.  Returns IDEM_OK or IDEM_ERR_IO. */
static idem_err
record(const testkit *tk, const idem_request *req, const char *exec)
{
	return put_line(tk->log_fd, req, exec);
}

/* Notes in <log>.started that req's handler holds its key and is about to
 * sleep ms milliseconds, then sleeps. */
static void
started_then_sleep(const testkit *tk, const idem_request *req, long ms)
{
	struct timespec ts;

	(void)put_line(tk->started_fd, req, NULL);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void
new_exec(char exec[37])
{
	uuid_t u;

	uuid_generate_random(u);
	uuid_unparse_lower(u, exec);
}

/* Answers status with {"status": status, "exec": exec} after recording. */
static idem_err
finish(const testkit *tk, const idem_request *req, idem_response *res,
    int status, json_t *extra)
{
	char exec[37];
	json_t *obj = extra != NULL ? extra : json_object();
	idem_err err;

	new_exec(exec);
	if (obj == NULL)
		return IDEM_ERR_NOMEM;
	json_object_set_new(obj, "exec", json_string(exec));
	if ((err = record(tk, req, exec)) != IDEM_OK) {
		json_decref(obj);
		return err;
	}
	return idem_response_json(res, status, obj);
}

/* POST /testkit/echo */
static idem_err
echo(const idem_request *req, idem_response *res, void *data)
{
	size_t len;
	const char *body = idem_request_body(req, &len);
	json_t *parsed, *obj = json_object();

	if (obj == NULL)
		return IDEM_ERR_NOMEM;
	if (len == 0)
		parsed = json_null();
	else if ((parsed = idem_request_json(req, NULL)) == NULL)
		parsed = json_stringn(body, len); /* NULL if not UTF-8 */
	json_object_set_new(obj, "echo", parsed != NULL ? parsed :
	    json_null());
	return finish(data, req, res, 201, obj);
}

/* GET /testkit/read: a read under the default policy, so off. */
static idem_err
read_route(const idem_request *req, idem_response *res, void *data)
{
	return finish(data, req, res, 200, NULL);
}

/* Parses a path parameter as a whole number in [min, max]; -1 if not. */
static long
num_param(const idem_request *req, const char *name, long min, long max)
{
	const char *s = idem_request_param(req, name);
	char *end;
	long v;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	return v;
}

/* POST /testkit/status/{code} */
static idem_err
status(const idem_request *req, idem_response *res, void *data)
{
	long code = num_param(req, "code", 200, 599);

	if (code < 0)
		return idem_response_problem(res, 400, "BAD_STATUS",
		    "status/{code} takes a code from 200 to 599");
	return finish(data, req, res, (int)code,
	    json_pack("{s:i}", "status", (int)code));
}

/* POST /testkit/sleep/{ms} */
static idem_err
sleep_ms(const idem_request *req, idem_response *res, void *data)
{
	long ms = num_param(req, "ms", 0, 600000);

	if (ms < 0)
		return idem_response_problem(res, 400, "BAD_DURATION",
		    "sleep/{ms} takes 0 to 600000 milliseconds");
	started_then_sleep(data, req, ms);
	return finish(data, req, res, 201, NULL);
}

/* POST /testkit/headers/{n}: 201 {"exec": ...} with n headers in all:
 * Content-Type, Location and Set-Cookie naming the execution, then
 * X-Testkit-1: 1 and on. */
static idem_err
headers(const idem_request *req, idem_response *res, void *data)
{
	long n = num_param(req, "n", 3, 64), i;
	char exec[37], name[32], value[64];
	idem_err err;

	if (n < 0)
		return idem_response_problem(res, 400, "BAD_COUNT",
		    "headers/{n} takes 3 to 64 headers");
	new_exec(exec);
	if ((err = record(data, req, exec)) != IDEM_OK ||
	    (err = idem_response_json(res, 201, json_pack("{s:s}", "exec",
	    exec))) != IDEM_OK)
		return err;
	snprintf(value, sizeof(value), "/testkit/things/%s", exec);
	err = idem_response_header(res, "Location", value);
	snprintf(value, sizeof(value), "exec=%s; Path=/; HttpOnly", exec);
	if (err == IDEM_OK)
		err = idem_response_header(res, "Set-Cookie", value);
	for (i = 1; err == IDEM_OK && i <= n - 3; i++) {
		snprintf(name, sizeof(name), "X-Testkit-%ld", i);
		snprintf(value, sizeof(value), "%ld", i);
		err = idem_response_header(res, name, value);
	}
	return err;
}

/* POST /testkit/created: 201 {"exec", "script_name"} with Location
 * <script name>/testkit/things/<exec>, the URL of what it made under any
 * mount. */
static idem_err
created(const idem_request *req, idem_response *res, void *data)
{
	const char *sn = idem_request_script_name(req);
	char exec[37], *where;
	idem_err err;

	new_exec(exec);
	if ((where = malloc(strlen(sn) + 64)) == NULL)
		return IDEM_ERR_NOMEM;
	sprintf(where, "%s/testkit/things/%s", sn, exec);
	err = idem_response_header(res, "Location", where);
	free(where);
	if (err != IDEM_OK || (err = record(data, req, exec)) != IDEM_OK)
		return err;
	return idem_response_json(res, 201, json_pack("{s:s, s:s}", "exec",
	    exec, "script_name", sn));
}

/* POST /testkit/fat-headers/{n}: 201 with n headers X-Fill-1.. of 8000 bytes
 * each (an answer whose headers outgrow a store's column), Location and
 * Content-Location (which a stand-in keeps). */
static idem_err
fat_headers(const idem_request *req, idem_response *res, void *data)
{
	long n = num_param(req, "n", 0, 60), i;
	char name[32], *value;
	idem_err err = IDEM_OK;

	if (n < 0)
		return idem_response_problem(res, 400, "BAD_COUNT",
		    "fat-headers/{n} takes 0 to 60 headers");
	if ((value = malloc(8001)) == NULL)
		return IDEM_ERR_NOMEM;
	memset(value, 'h', 8000);
	value[8000] = '\0';
	for (i = 1; i <= n && err == IDEM_OK; i++) {
		snprintf(name, sizeof(name), "X-Fill-%ld", i);
		err = idem_response_header(res, name, value);
	}
	free(value);
	if (err == IDEM_OK)
		err = idem_response_header(res, "Location", "/testkit/made/1");
	if (err == IDEM_OK)
		err = idem_response_header(res, "Content-Location",
		    "/testkit/made/1/answer");
	return err != IDEM_OK ? err : finish(data, req, res, 201, NULL);
}

/* POST /testkit/fail: the side effect happens, then the handler fails. */
static idem_err
fail(const idem_request *req, idem_response *res, void *data)
{
	char exec[37];
	idem_err err;

	new_exec(exec);
	if ((err = record(data, req, exec)) != IDEM_OK)
		return err;
	return IDEM_ERR_HANDLER;
}

/* Lines of the file at path that are key. */
static long
lines_of(const char *path, const char *key)
{
	char line[1024];
	FILE *fp = fopen(path, "r");
	long n = 0;

	if (fp == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		n += strcmp(line, key) == 0;
	}
	fclose(fp);
	return n;
}

/* POST /testkit/flaky/{n}: the first n executions of a key fail, each
 * noted as a line <key> in <log>.flaky: 503 then 429, in turn, both with
 * Retry-After: 1 (not stored: released, so the retry runs again); then
 * it acts as echo. */
static idem_err
flaky(const idem_request *req, idem_response *res, void *data)
{
	testkit *tk = data;
	long n = num_param(req, "n", 0, 100), seen;
	const char *key = idem_request_header(req, "Idempotency-Key");
	char line[1024];
	idem_err err;
	int fd, len;

	if (n < 0)
		return idem_response_problem(res, 400, "BAD_COUNT",
		    "flaky/{n} takes 0 to 100 failures");
	if (key == NULL)
		key = "-";
	if ((seen = lines_of(tk->flaky_path, key)) >= n)
		return echo(req, res, data);
	len = snprintf(line, sizeof(line), "%s\n", key);
	fd = open(tk->flaky_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0644);
	if (fd < 0 || len >= (int)sizeof(line) ||
	    write(fd, line, (size_t)len) != len) {
		if (fd >= 0)
			close(fd);
		return IDEM_ERR_IO;
	}
	close(fd);
	err = seen % 2 == 0 ? idem_response_problem(res, 503,
	    "TESTKIT_FLAKY", "failing on purpose; retry") :
	    idem_response_problem(res, 429, "TESTKIT_FLAKY",
	    "too many on purpose; retry");
	return err != IDEM_OK ? err :
	    idem_response_header(res, "Retry-After", "1");
}

/* Waits (at most 60 s) until <log>.release exists. */
static void
await_release(const testkit *tk)
{
	int i;

	for (i = 0; i < 6000 && access(tk->release_path, F_OK) != 0; i++) {
		struct timespec ts = { 0, 10000000L };
		nanosleep(&ts, NULL);
	}
}

/* POST /testkit/hold: notes itself in <log>.started, waits (at most 60 s)
 * until <log>.release exists, then 201 with exec. */
static idem_err
hold(const idem_request *req, idem_response *res, void *data)
{
	testkit *tk = data;

	(void)put_line(tk->started_fd, req, NULL);
	await_release(tk);
	return finish(data, req, res, 201, NULL);
}

/* The side effects of /testkit/tx, one row per execution that commits,
 * and the table of the rows that /testkit/tx?deadlock=1 locks, 1 to 201:
 * by dialect (idem_app_db_dialect), in the store's database.  The test
 * that locks them fills the table (deploy touches no row of it: every
 * test starts an instance, and an INSERT meeting a row the deadlock test
 * holds would wait for it). */
static const char *const tx_tables[][2] = {
	[IDEM_DB_MYSQL] = {
		"CREATE TABLE IF NOT EXISTS testkit_effects (id BIGINT NOT "
		"NULL AUTO_INCREMENT PRIMARY KEY, path VARCHAR(255) NOT NULL, "
		"idem_key VARBINARY(255) NULL, exec CHAR(36) NOT NULL) "
		"ENGINE = InnoDB",
		"CREATE TABLE IF NOT EXISTS testkit_locks (id INT NOT NULL "
		"PRIMARY KEY, n BIGINT NOT NULL) ENGINE = InnoDB",
	},
	[IDEM_DB_POSTGRES] = {
		"CREATE TABLE IF NOT EXISTS testkit_effects (id BIGSERIAL "
		"PRIMARY KEY, path VARCHAR(255) NOT NULL, idem_key BYTEA NULL, "
		"exec CHAR(36) NOT NULL)",
		"CREATE TABLE IF NOT EXISTS testkit_locks (id INT NOT NULL "
		"PRIMARY KEY, n BIGINT NOT NULL)",
	},
};
/* The same text in either dialect. */
enum { Q_EFFECT, Q_LOCK, Q_DUPLICATE };
static const char *const effects_sql[] = {
	[Q_EFFECT] = "INSERT INTO testkit_effects (path, idem_key, exec) "
	    "VALUES (?, ?, ?)",
	[Q_LOCK] = "UPDATE testkit_locks SET n = n + 1 WHERE id = ?",
	/* a duplicate key within the statement: it fails whatever the
	 * table holds, and leaves nothing */
	[Q_DUPLICATE] = "INSERT INTO testkit_locks (id, n) VALUES (-1, 0), "
	    "(-1, 0)",
};

/* ?deadlock=1 of /testkit/tx: locks row 1, notes itself in <log>.started,
 * waits for <log>.release (the test holds rows 2 to 201 by then and waits
 * for row 1), then locks row 2: a deadlock, which this transaction, the
 * lighter (on PostgreSQL: the first to wait), loses.  The handler ignores
 * it, as a faulty one would (the statement helper told the connection),
 * and goes on. */
static idem_err
lose_a_deadlock(const testkit *tk, const idem_request *req)
{
	idem_db_conn *c = idem_request_db(req);
	idem_err err;

	if ((err = idem_db_run(c, Q_LOCK, "i", 1LL)) != IDEM_OK)
		return err;
	(void)put_line(tk->started_fd, req, NULL);
	await_release(tk);
	err = idem_db_run(c, Q_LOCK, "i", 2LL);
	idem_log(req, IDEM_LOG_WARN, "testkit: row 2: %s (ignored)",
	    idem_strerror(err));
	return IDEM_OK;
}

/* Dies with SIGKILL when the request's X-Testkit-Crash names point. */
static void
crash_at(const idem_request *req, const char *point)
{
	const char *v = idem_request_header(req, "X-Testkit-Crash");

	if (v != NULL && strcmp(v, point) == 0)
		raise(SIGKILL);
}

/* POST /testkit/tx/{code}: a transactional route.  Inserts its execution
 * into testkit_effects in the request's transaction, sleeps ?ms=N, and
 * answers code like status/{code}; ?deadlock=1 first loses a deadlock
 * and ignores it (lose_a_deadlock); ?unknown=1 then runs a statement
 * that fails (a duplicate key: on PostgreSQL the transaction is aborted)
 * and says it cannot tell what became of its side effect
 * (IDEM_ERR_OUTCOME_UNKNOWN).  X-Testkit-Crash: before-writes or
 * after-writes kills the worker there. */
static idem_err
tx(const idem_request *req, idem_response *res, void *data)
{
	long code = num_param(req, "code", 200, 599);
	const char *key = idem_request_header(req, "Idempotency-Key");
	const char *q = idem_request_query(req);
	char exec[37];
	idem_err err;
	long ms = 0;

	if (code < 0)
		return idem_response_problem(res, 400, "BAD_STATUS",
		    "tx/{code} takes a code from 200 to 599");
	if (strncmp(q, "ms=", 3) == 0)
		ms = strtol(q + 3, NULL, 10);
	crash_at(req, "before-writes");
	if (strcmp(q, "deadlock=1") == 0 && lose_a_deadlock(data, req) !=
	    IDEM_OK)
		return IDEM_ERR_STORE;
	new_exec(exec);
	if ((err = idem_db_run(idem_request_db(req), Q_EFFECT, "sbs",
	    idem_request_path(req), key, key != NULL ? strlen(key) : 0,
	    exec)) != IDEM_OK) {
		idem_log(req, IDEM_LOG_ERROR, "testkit: its side effect: %s",
		    idem_strerror(err));
		return IDEM_ERR_STORE;
	}
	crash_at(req, "after-writes");
	if (ms > 0 && ms <= 600000)
		started_then_sleep(data, req, ms);
	if (record(data, req, exec) != IDEM_OK)
		return IDEM_ERR_IO;
	if (strcmp(q, "unknown=1") == 0) {
		err = idem_db_run(idem_request_db(req), Q_DUPLICATE, "");
		idem_log(req, IDEM_LOG_WARN, "testkit: a duplicate row: %s",
		    idem_strerror(err));
		return IDEM_ERR_OUTCOME_UNKNOWN;
	}
	return idem_response_json(res, (int)code, json_pack("{s:i, s:s}",
	    "status", (int)code, "exec", exec));
}

/* POST /testkit/crash */
static idem_err
crash(const idem_request *req, idem_response *res, void *data)
{
	idem_log(req, IDEM_LOG_WARN, "testkit: crashing on purpose");
	abort();
}

/* Whether key is a line of the file at path. */
static int
file_has_line(const char *path, const char *key)
{
	char line[1024];
	FILE *fp = fopen(path, "r");
	int found = 0;

	if (fp == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, key) == 0;
	}
	fclose(fp);
	return found;
}

/* POST /testkit/crash-once */
static idem_err
crash_once(const idem_request *req, idem_response *res, void *data)
{
	testkit *tk = data;
	const char *key = idem_request_header(req, "Idempotency-Key");
	char line[1024];
	int fd, n;

	if (key == NULL)
		key = "-";
	if (!file_has_line(tk->crashed_path, key)) {
		n = snprintf(line, sizeof(line), "%s\n", key);
		fd = open(tk->crashed_path, O_WRONLY | O_APPEND | O_CREAT |
		    O_CLOEXEC, 0644);
		if (fd < 0 || n >= (int)sizeof(line) ||
		    write(fd, line, (size_t)n) != n)
			return IDEM_ERR_IO;
		close(fd);
		idem_log(req, IDEM_LOG_WARN, "testkit: crashing once on purpose");
		abort();
	}
	return echo(req, res, data);
}

static void
teardown(void *data)
{
	testkit *tk = data;

	if (tk == NULL)
		return;
	lifecycle(tk, "teardown", 0);
	if (tk->log_fd >= 0)
		close(tk->log_fd);
	if (tk->started_fd >= 0)
		close(tk->started_fd);
	free(tk->crashed_path);
	free(tk->lifecycle_path);
	free(tk->flaky_path);
	free(tk->release_path);
	free(tk);
}

/* Opens <log>.started for appending.  Returns IDEM_OK, or an error logged. */
static idem_err
open_started(testkit *tk, const char *log)
{
	char path[4096];

	if (snprintf(path, sizeof(path), "%s.started", log) >= (int)sizeof(path))
		return IDEM_ERR_CONFIG;
	tk->started_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	    0644);
	if (tk->started_fd < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "testkit: %s: %s", path,
		    strerror(errno));
		return IDEM_ERR_CONFIG;
	}
	return IDEM_OK;
}

/* Describes echo in the OpenAPI document: a summary and its bodies'
 * schemas. */
static idem_err
describe_echo(idem_app *app)
{
	json_t *req = json_pack("{s:s}", "type", "object");
	json_t *res = json_pack("{s:s, s:{s:{}, s:{s:s, s:s}}, s:[s]}", "type",
	    "object", "properties", "echo", "exec", "type", "string", "format",
	    "uuid", "required", "exec");
	idem_err err = req == NULL || res == NULL ? IDEM_ERR_NOMEM :
	    idem_route_describe(app, "POST", "/testkit/echo", "Answers the "
	    "request body back, with a fresh execution id", req, res);

	json_decref(req);
	json_decref(res);
	return err;
}

static idem_err
setup(idem_app *app, void **data)
{
	static const struct {
		const char *method;
		const char *tmpl;
		idem_handler_fn fn;
	} routes[] = {
		{ "POST", "/testkit/echo", echo },
		{ "POST", "/testkit/status/{code}", status },
		{ "POST", "/testkit/sleep/{ms}", sleep_ms },
		{ "POST", "/testkit/headers/{n}", headers },
		{ "POST", "/testkit/fat-headers/{n}", fat_headers },
		{ "POST", "/testkit/created", created },
		{ "POST", "/testkit/fail", fail },
		{ "POST", "/testkit/crash", crash },
		{ "POST", "/testkit/crash-once", crash_once },
		{ "POST", "/testkit/flaky/{n}", flaky },
		{ "POST", "/testkit/hold", hold },
		{ "GET", "/testkit/read", read_route },
	};
	testkit *tk = calloc(1, sizeof(*tk));
	const char *log = NULL;
	idem_err err = IDEM_OK;
	int tx_route;
	size_t i;

	if (tk == NULL)
		return IDEM_ERR_NOMEM;
	tk->log_fd = -1;
	tk->started_fd = -1;
	if ((err = idem_config_string(app, "log", NULL, &log)) != IDEM_OK)
		goto fail;
	if (log == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "testkit: [testkit] log = FILE "
		    "is required");
		err = IDEM_ERR_CONFIG;
		goto fail;
	}
	tk->log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (tk->log_fd < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "testkit: %s: %s", log,
		    strerror(errno));
		err = IDEM_ERR_CONFIG;
		goto fail;
	}
	if ((tk->crashed_path = malloc(strlen(log) + 9)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto fail;
	}
	sprintf(tk->crashed_path, "%s.crashed", log);
	if ((tk->lifecycle_path = malloc(strlen(log) + 11)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto fail;
	}
	sprintf(tk->lifecycle_path, "%s.lifecycle", log);
	if ((tk->flaky_path = malloc(strlen(log) + 7)) == NULL ||
	    (tk->release_path = malloc(strlen(log) + 9)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto fail;
	}
	sprintf(tk->flaky_path, "%s.flaky", log);
	sprintf(tk->release_path, "%s.release", log);
	if ((err = open_started(tk, log)) != IDEM_OK)
		goto fail;

	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if ((err = idem_route_add(app, routes[i].method,
		    routes[i].tmpl, IDEM_POLICY_DEFAULT, routes[i].fn, tk))
		    != IDEM_OK)
			goto fail;
	if ((err = describe_echo(app)) != IDEM_OK)
		goto fail;
	/* echo-lifetime = DURATION: echo's lifetime, set in code */
	if ((err = idem_config_string(app, "echo-lifetime", NULL, &log)) !=
	    IDEM_OK || (log != NULL && (err = idem_route_set(app, "POST",
	    "/testkit/echo", "lifetime", log)) != IDEM_OK))
		goto fail;
	/* tx-route = true registers it on any store, to see it refused */
	if ((err = idem_config_bool(app, "tx-route", 0, &tx_route)) != IDEM_OK)
		goto fail;
	if (idem_app_db_dialect(app) != IDEM_DB_NONE &&
	    idem_app_db(app, effects_sql, sizeof(effects_sql) /
	    sizeof(effects_sql[0])) == NULL) {
		err = IDEM_ERR_STORE;
		goto fail;
	}
	if ((idem_app_db_dialect(app) != IDEM_DB_NONE || tx_route) &&
	    (err = idem_route_add_tx(app, "POST", "/testkit/tx/{code}",
	    IDEM_POLICY_DEFAULT, tx, tk)) != IDEM_OK)
		goto fail;
	/* the same with a reconcile hook (itself) */
	if (idem_app_db_dialect(app) != IDEM_DB_NONE &&
	    ((err = idem_route_add_tx(app, "POST", "/testkit/txr/{code}",
	    IDEM_POLICY_DEFAULT, tx, tk)) != IDEM_OK ||
	    (err = idem_route_reconcile(app, "POST", "/testkit/txr/{code}",
	    tx)) != IDEM_OK))
		goto fail;
	*data = tk;
	lifecycle(tk, "setup", idem_app_is_check(app));
	return IDEM_OK;
fail:
	free(tk->lifecycle_path);   /* a failed setup has no teardown */
	tk->lifecycle_path = NULL;
	teardown(tk);
	return err;
}

/* Creates the tables of /testkit/tx, once per start. */
static idem_err
deploy(idem_app *app, void *data)
{
	idem_db_dialect d = idem_app_db_dialect(app);
	idem_err err;
	size_t i;

	lifecycle(data, "deploy", 0);
	if (d == IDEM_DB_NONE)
		return IDEM_OK;
	for (i = 0; i < 2; i++)
		if ((err = idem_app_db_exec(app, tx_tables[d][i])) != IDEM_OK)
			return err;
	return IDEM_OK;
}

IDEM_PLUGIN("testkit", setup, deploy, teardown)
