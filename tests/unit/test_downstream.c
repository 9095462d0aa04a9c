/*
 * test_downstream.c - downstream keys (idem_request_downstream_key): the
 * same for every execution of one record, on any process that holds the
 * same secret, different per purpose and per record, and telling nothing
 * of the client's key; the key secret file as the config reads it.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_config.h"
#include "idem_downstream.h"
#include "idem_middleware_int.h"
#include "idem_log.h"
#include "idem_router.h"
#include "idem_service.h"

/* Answers {"charge": K1, "refund": K2} (or the error of each), with the
 * status in ?s=NNN (default 201). */
static idem_err
keys(const idem_request *req, idem_response *res, void *data)
{
	char a[IDEM_DOWNSTREAM_KEY_SIZE], b[IDEM_DOWNSTREAM_KEY_SIZE];
	const char *q = idem_request_query(req);
	idem_err ea, eb;
	json_t *j;

	(void)data;
	ea = idem_request_downstream_key(req, "charge", a);
	eb = idem_request_downstream_key(req, "refund", b);
	j = json_pack("{s:s, s:s}", "charge", ea == IDEM_OK ? a :
	    idem_strerror(ea), "refund", eb == IDEM_OK ? b : idem_strerror(eb));
	return idem_response_json(res, strncmp(q, "s=", 2) == 0 ? atoi(q + 2) :
	    201, j);
}

/* A service of conf_text with the routes /ds (key required) and /opt
 * (optional). */
static idem_service *
service(const char *conf_text)
{
	idem_service *svc;
	idem_config *cfg;

	idem_log_set_level(IDEM_LOG_ERROR + 1);
	cr_assert_eq(idem_config_load_string(conf_text, "ds.conf", &cfg),
	    IDEM_OK);
	cr_assert_eq(idem_service_new(cfg, "/nowhere", &svc), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/ds",
	    IDEM_POLICY_REQUIRED, keys, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/opt",
	    IDEM_POLICY_OPTIONAL, keys, NULL, "test"), IDEM_OK);
	return svc;
}

/* POSTs body to uri on svc with the extra param p ("HTTP_...=v", or
 * NULL); the answer's body into out (size bytes).  Returns the status. */
static int
post(idem_service *svc, const char *uri, const char *body, const char *p,
    const char *p2, char *out, size_t size)
{
	char u[256], cl[64], q[256];
	const char *qs = strchr(uri, '?');
	char *env[] = { "REQUEST_METHOD=POST", u, q, cl, (char *)p, (char *)p2,
	    NULL };
	harness_body r = { body, strlen(body), 0, 0, 0 };
	idem_request req;
	idem_response res;
	int status;

	snprintf(u, sizeof(u), "REQUEST_URI=%s", uri);
	snprintf(q, sizeof(q), "QUERY_STRING=%s", qs != NULL ? qs + 1 : "");
	snprintf(cl, sizeof(cl), "CONTENT_LENGTH=%zu", r.len);
	idem_response_init(&res);
	idem_service_handle(svc, env, harness_read_body, &r, &req, &res);
	status = res.status;
	snprintf(out, size, "%.*s", (int)res.len, res.body != NULL ? res.body :
	    "");
	idem_response_clear(&res);
	idem_request_clear(&req);
	return status;
}

/* The member name of the JSON object text, into out. */
static void
member(const char *text, const char *name, char *out, size_t size)
{
	json_t *j = json_loads(text, 0, NULL);
	const char *v;

	cr_assert_not_null(j, "not JSON: %s", text);
	v = json_string_value(json_object_get(j, name));
	cr_assert_not_null(v, "no %s in %s", name, text);
	snprintf(out, size, "%s", v);
	json_decref(j);
}

static char secret_path[64], secret2_path[64];

/* Writes text (with mode) to a new file; its name into path. */
static void
secret_file(char *path, size_t size, const char *text, mode_t mode)
{
	int fd;

	snprintf(path, size, "/tmp/idem-ds-XXXXXX");
	cr_assert((fd = mkstemp(path)) >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void
setup(void)
{
	secret_file(secret_path, sizeof(secret_path),
	    "k5Gq3pJd2ZrTn8YwB1xVe0sLm4HcUa7QfRiOyNtKjDw=\n", 0600);
	secret_file(secret2_path, sizeof(secret2_path),
	    "another secret of the deployment, long enough\n", 0640);
}

static void
teardown(void)
{
	unlink(secret_path);
	unlink(secret2_path);
	idem_log_set_level(IDEM_LOG_INFO);
}

/* The config of a service with the key secret in path (NULL: none). */
static char *
conf(const char *path)
{
	static char text[512];

	snprintf(text, sizeof(text), "[idempotency]\nscope = header:X-Tenant\n"
	    "%s%s\n", path != NULL ? "key-secret-file = " : "",
	    path != NULL ? path : "");
	return text;
}

#define KEY(k) "HTTP_IDEMPOTENCY_KEY=" k
#define TENANT(t) "HTTP_X_TENANT=" t

Test(downstream, same_for_every_execution_of_a_record, .init = setup,
    .fini = teardown)
{
	idem_service *a = service(conf(secret_path)), *b;
	char body[512], k1[64], k2[64], r1[64], other[64];
	regex_t uuid8;

	/* released (503): the retry runs again, with the same keys */
	cr_assert_eq(post(a, "/ds?s=503", "{}", KEY("order-1"), TENANT("t1"),
	    body, sizeof(body)), 503);
	member(body, "charge", k1, sizeof(k1));
	member(body, "refund", r1, sizeof(r1));
	cr_assert_eq(post(a, "/ds?s=503", "{}", KEY("order-1"), TENANT("t1"),
	    body, sizeof(body)), 503);
	member(body, "charge", k2, sizeof(k2));
	cr_expect_str_eq(k2, k1);
	/* another process (a worker, a node, a restart) with the secret */
	b = service(conf(secret_path));
	cr_assert_eq(post(b, "/ds?s=503", "{}", KEY("order-1"), TENANT("t1"),
	    body, sizeof(body)), 503);
	member(body, "charge", k2, sizeof(k2));
	cr_expect_str_eq(k2, k1);
	/* a UUID of version 8, one per purpose, with nothing of the key */
	cr_assert_eq(regcomp(&uuid8, "^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-"
	    "[89ab][0-9a-f]{3}-[0-9a-f]{12}$", REG_EXTENDED | REG_NOSUB), 0);
	cr_expect_eq(regexec(&uuid8, k1, 0, NULL, 0), 0, "%s", k1);
	cr_expect_eq(regexec(&uuid8, r1, 0, NULL, 0), 0, "%s", r1);
	regfree(&uuid8);
	cr_expect_str_neq(r1, k1);
	cr_expect_null(strstr(body, "order-1"));
	/* another key, another scope: other keys */
	cr_assert_eq(post(a, "/ds?s=503", "{}", KEY("order-2"), TENANT("t1"),
	    body, sizeof(body)), 503);
	member(body, "charge", other, sizeof(other));
	cr_expect_str_neq(other, k1);
	cr_assert_eq(post(a, "/ds?s=503", "{}", KEY("order-1"), TENANT("t2"),
	    body, sizeof(body)), 503);
	member(body, "charge", other, sizeof(other));
	cr_expect_str_neq(other, k1);
	idem_service_free(b);
	/* another secret: other keys */
	b = service(conf(secret2_path));
	cr_assert_eq(post(b, "/ds?s=503", "{}", KEY("order-1"), TENANT("t1"),
	    body, sizeof(body)), 503);
	member(body, "charge", other, sizeof(other));
	cr_expect_str_neq(other, k1);
	idem_service_free(b);
	idem_service_free(a);
}

Test(downstream, none_without_a_record_or_a_secret, .init = setup,
    .fini = teardown)
{
	idem_service *a = service(conf(secret_path)), *b = service(conf(NULL));
	char body[512], k[64];
	char key[IDEM_DOWNSTREAM_KEY_SIZE];

	/* an optional route without a key has no record */
	cr_assert_eq(post(a, "/opt", "{}", TENANT("t1"), NULL, body,
	    sizeof(body)), 201);
	member(body, "charge", k, sizeof(k));
	cr_expect_str_eq(k, idem_strerror(IDEM_ERR_NOT_FOUND));
	/* no key-secret-file */
	cr_assert_eq(post(b, "/ds", "{}", KEY("order-1"), TENANT("t1"), body,
	    sizeof(body)), 201);
	member(body, "charge", k, sizeof(k));
	cr_expect_str_eq(k, idem_strerror(IDEM_ERR_CONFIG));
	/* a purpose must name something, in 64 bytes at most */
	cr_expect_eq(idem_request_downstream_key(NULL, "charge", key),
	    IDEM_ERR_INVALID);
	idem_service_free(b);
	idem_service_free(a);
}

Test(downstream, purposes_checked)
{
	unsigned char base[32] = { 7 };
	char a[IDEM_DOWNSTREAM_KEY_SIZE], b[IDEM_DOWNSTREAM_KEY_SIZE];
	char purpose[IDEM_PURPOSE_MAX + 2];
	idem_request req;
	idem_exec ex;

	memset(&req, 0, sizeof(req));
	memset(&ex, 0, sizeof(ex));
	memcpy(ex.downstream, base, 32);
	ex.has_downstream = 1;
	req.exec = &ex;
	cr_expect_eq(idem_request_downstream_key(&req, "", a),
	    IDEM_ERR_INVALID);
	memset(purpose, 'p', sizeof(purpose) - 1);
	purpose[sizeof(purpose) - 1] = '\0';
	cr_expect_eq(idem_request_downstream_key(&req, purpose, a),
	    IDEM_ERR_INVALID);
	purpose[IDEM_PURPOSE_MAX] = '\0';
	cr_expect_eq(idem_request_downstream_key(&req, purpose, a), IDEM_OK);
	/* derived from the base alone: what another process derives */
	idem_downstream_key(base, purpose, IDEM_PURPOSE_MAX, b);
	cr_expect_str_eq(a, b);
}

/* What the config says of a secret file it cannot use. */
static void
expect_refused(const char *path, const char *why)
{
	harness_capture cap;
	idem_config *cfg = NULL;
	char *log;

	idem_log_set_level(IDEM_LOG_INFO);
	cr_assert_eq(harness_capture_begin(&cap), 0);
	cr_expect_eq(idem_config_load_string(conf(path), "ds.conf", &cfg),
	    IDEM_ERR_CONFIG);
	log = harness_capture_end(&cap);
	cr_assert_not_null(log);
	cr_expect_not_null(strstr(log, "key-secret-file"), "%s", log);
	cr_expect_not_null(strstr(log, why), "%s", log);
	free(log);
	idem_config_free(cfg);
}

Test(downstream, secret_file_checked, .init = setup, .fini = teardown)
{
	char shortp[64], open_to_all[64];

	expect_refused("/nonexistent/secret", "cannot read");
	expect_refused("/tmp", "not a regular file");
	secret_file(shortp, sizeof(shortp), "too short\n", 0600);
	expect_refused(shortp, "holds 9 bytes");
	secret_file(open_to_all, sizeof(open_to_all),
	    "long enough but readable by every user of the machine\n", 0644);
	expect_refused(open_to_all, "readable or writable by every user");
	unlink(shortp);
	unlink(open_to_all);
}
