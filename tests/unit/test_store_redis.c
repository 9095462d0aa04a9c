/*
 * test_store_redis.c - the store suite on the Redis store, against a
 * private Redis this program starts (and stops) around its tests; and
 * what is the Redis store's own: scripts loaded again on a server that
 * lost them, a server down, frozen or restarted, and [redis] durability.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_store_redis.h"
#include "harness.h"
#include "redis.h"
#include "store_suite.h"
#include "store_req.h"

/* The config of server r with extra lines for [redis]. */
static idem_config *
config_of(const redis *r, const char *extra)
{
	char text[2048], section[256];
	idem_config *cfg;

	redis_conf(r, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = redis\n%s%s",
	    section, extra != NULL ? extra : "");
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK,
	    "%s", text);
	return cfg;
}

/* The config of the shared server. */
static idem_config *
config(void)
{
	redis r;

	cr_assert_eq(redis_from_env(&r), 0);
	return config_of(&r, NULL);
}

/* The Redis store of cfg with pool_size connections, as the factory
 * opens it. */
static idem_err
open_redis(const idem_config *cfg, unsigned pool_size, idem_store **out)
{
	idem_store_opts o = idem_store_opts_of(cfg, pool_size);

	return idem_store_redis_new(&cfg->redis, &o, out);
}

/* A pool of 16: 64 racers share them. */
idem_store *
suite_open(void)
{
	idem_config *cfg = config();
	idem_store *s = NULL;

	cr_assert_eq(open_redis(cfg, 16, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

/* A key of its own for test name. */
static idem_store_key
own_key(const char *name)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s-%lx", name,
	    (unsigned long)time(NULL) ^ (unsigned long)getpid());
	return k;
}

/* A server that lost its scripts (restarted, or SCRIPT FLUSH) has them
 * loaded again: the request never sees NOSCRIPT. */
Test(redis, scripts_loaded_again_after_flush)
{
	idem_store *s = suite_open();
	idem_store_key k = own_key("flush");
	unsigned char fp[32] = { 3 };
	idem_reserve_result rr;
	char *out;
	redis r;

	cr_assert_eq(redis_from_env(&r), 0);
	out = redis_cmd(&r, "SCRIPT FLUSH");
	cr_assert_not_null(out);
	free(out);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o1", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	idem_store_close(s);
}

/* A server that is down at open: refused, or set aside when the caller
 * may wait (the master's start). */
Test(redis, down_at_open_set_aside_when_allowed)
{
	idem_config *cfg = config();
	idem_store *s = NULL;
	idem_store_opts o;

	cfg->redis.port = (unsigned)harness_free_port();
	cfg->redis.connect_timeout = 1000;
	o = idem_store_opts_of(cfg, 1);
	cr_expect_eq(idem_store_redis_new(&cfg->redis, &o, &s), IDEM_ERR_STORE);
	cr_expect_null(s);
	o.may_wait = 1;
	cr_assert_eq(idem_store_redis_new(&cfg->redis, &o, &s), IDEM_OK);
	cr_expect(idem_store_is_aside(s));
	idem_store_close(s);
	cr_expect_eq(idem_store_redis_reachable(&cfg->redis, "t.conf"), 0);
	idem_config_free(cfg);
	cfg = config();
	cr_expect_eq(idem_store_redis_reachable(&cfg->redis, "t.conf"), 1);
	idem_config_free(cfg);
}

/* A server that stops (a restart, a crash) fails each operation closed,
 * and once it is back the store serves again by itself, its scripts
 * loaded again on the new process; records it had written to its AOF
 * are there. */
Test(redis, restart_fails_closed_then_recovers, .timeout = 120)
{
	idem_stored_response a = { 201, "", 0, "made", 4 };
	idem_config *cfg;
	idem_store *s = NULL;
	idem_reserve_result rr;
	idem_store_key k = own_key("restart"), k2 = own_key("restart2");
	unsigned char fp[32] = { 4 };
	char *out;
	redis own;

	cr_assert_eq(redis_start(&own, NULL), 0);
	cfg = config_of(&own, "connect-timeout = 1s\nread-timeout = 1s\n"
	    "write-timeout = 1s\n");
	cr_assert_eq(open_redis(cfg, 2, &s), IDEM_OK);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o1", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, "o1", 60000), &a),
	    IDEM_OK);
	/* written to the AOF before the stop (SHUTDOWN fsyncs it) */
	cr_assert_eq(redis_stop(&own), 0);
	cr_expect_eq(idem_store_reserve(s, TEST_REQ(&k2, fp, "o2", "rid", 30000,
	    60000), &rr), IDEM_ERR_STORE);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_ping(s), IDEM_ERR_STORE);
	cr_assert_eq(redis_restart(&own), 0);
	cr_expect_eq(idem_store_ping(s), IDEM_OK);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o3", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.body_len, 4);
	idem_reserve_result_clear(&rr);
	out = redis_cmd(&own, "SCRIPT EXISTS 0000000000000000000000000000000000000000");
	free(out);
	idem_store_close(s);
	idem_config_free(cfg);
	redis_destroy(&own);
}

/* A server that hangs (SIGSTOP) costs each operation its timeouts, then
 * IDEM_ERR_STORE, never a hung caller; the reservation sent to it may
 * land as it thaws: ours, never another's. */
Test(redis, frozen_server_fails_closed_then_recovers, .timeout = 120)
{
	idem_config *cfg;
	idem_store *s = NULL;
	idem_reserve_result rr;
	idem_store_key k = own_key("frozen");
	unsigned char fp[32] = { 6 };
	idem_store_req *rq;
	redis own;

	cr_assert_eq(redis_start(&own, NULL), 0);
	cfg = config_of(&own, "connect-timeout = 1s\nread-timeout = 1s\n"
	    "write-timeout = 1s\n");
	cr_assert_eq(open_redis(cfg, 2, &s), IDEM_OK);
	cr_assert_eq(redis_freeze(&own), 0);
	rq = TEST_REQ(&k, fp, "f.1", "rid", 30000, 60000);
	cr_expect_eq(idem_store_reserve(s, rq, &rr), IDEM_ERR_STORE);
	cr_expect_eq(rq->unanswered, 1, "a lost reserve not said so");
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_ping(s), IDEM_ERR_STORE);
	cr_assert_eq(redis_thaw(&own), 0);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "f.1", "rid", 30000,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_ping(s), IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
	redis_destroy(&own);
}

/* durability = replicas: a reservation no replica acknowledged in time
 * is refused (the handler does not run) and said unanswered, so the
 * caller forgets it; with a replica it is acquired. */
Test(redis, durability_replicas_waits_for_a_replica, .timeout = 120)
{
	idem_config *cfg;
	idem_store *s = NULL;
	idem_reserve_result rr;
	idem_store_key k = own_key("durable"), k2 = own_key("durable2");
	unsigned char fp[32] = { 7 };
	idem_store_req *rq;
	redis own, rep;

	cr_assert_eq(redis_start(&own, NULL), 0);
	/* long enough for a loaded machine's replica to answer WAIT */
	cfg = config_of(&own, "durability = replicas\n"
	    "durability-timeout = 2s\n");
	cr_assert_eq(open_redis(cfg, 2, &s), IDEM_OK);
	rq = TEST_REQ(&k, fp, "d.1", "rid", 30000, 60000);
	cr_expect_eq(idem_store_reserve(s, rq, &rr), IDEM_ERR_STORE,
	    "acquired with no replica");
	cr_expect_eq(rq->unanswered, 1);
	idem_reserve_result_clear(&rr);
	cr_assert_eq(redis_replica(&rep, &own), 0);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k2, fp, "d.2", "rid",
	    30000, 60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	idem_store_close(s);
	idem_config_free(cfg);
	redis_destroy(&rep);
	redis_destroy(&own);
}

/* durability = aof on a server without WAITAOF (Redis 7.0): refused at
 * open unless the server fsyncs every write itself. */
Test(redis, durability_aof_needs_the_server_to_fsync, .timeout = 60)
{
	idem_config *cfg;
	idem_store *s = NULL;
	char *info;
	redis own;
	int waitaof;

	cr_assert_eq(redis_start(&own, NULL), 0);
	info = redis_cmd(&own, "INFO server");
	cr_assert_not_null(info);
	waitaof = strstr(info, "redis_version:7.0") == NULL &&
	    strstr(info, "redis_version:6") == NULL;
	free(info);
	cfg = config_of(&own, "durability = aof\ndurability-replicas = 0\n");
	if (!waitaof) {
		cr_expect_eq(open_redis(cfg, 1, &s), IDEM_ERR_CONFIG);
		free(redis_cmd(&own, "CONFIG SET appendfsync always"));
	}
	cr_expect_eq(open_redis(cfg, 1, &s), IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
	redis_destroy(&own);
}

/* A server that evicts keys without a TTL when its memory runs out
 * (maxmemory-policy allkeys-*) would drop records, and their keys would
 * run again: refused at open, naming the policy; noeviction and the
 * volatile-* policies are taken. */
Test(redis, evicting_server_refused, .timeout = 60)
{
	idem_config *cfg;
	idem_store *s = NULL;
	char log[4096];
	harness_capture cap;
	redis own;
	idem_err err;

	cr_assert_eq(redis_start(&own, "--maxmemory-policy allkeys-lru"), 0);
	cfg = config_of(&own, NULL);
	harness_capture_level(&cap, IDEM_LOG_INFO);
	err = open_redis(cfg, 1, &s);
	harness_capture_into(&cap, log, sizeof(log));
	cr_expect_eq(err, IDEM_ERR_CONFIG);
	cr_expect(strstr(log, "maxmemory-policy is allkeys-lru") != NULL, "%s",
	    log);
	free(redis_cmd(&own, "CONFIG SET maxmemory-policy volatile-lru"));
	cr_expect_eq(open_redis(cfg, 1, &s), IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
	redis_destroy(&own);
}

/* The metrics' counts (idem_store_stats) are kept by the scripts, never
 * a scan: a record marked of unknown outcome counts until it is resolved
 * or purged, a tombstone from its making to its end (found by review:
 * each scrape read every record of every bucket). */
Test(redis, stats_kept_without_a_scan, .timeout = 60)
{
	idem_key_policy pol = { .lease_ms = 30000, .lifetime_ms = 300,
	    .tombstone_ms = 3600000 };
	idem_stored_response a = { 201, "", 0, "made", 4 };
	idem_store_req rq = { .policy = &pol }, rq2 = rq;
	idem_store_key k = own_key("st-unknown"), k2 = own_key("st-tomb");
	unsigned char fp[32] = { 5 };
	idem_reserve_result rr;
	idem_store_stats st;
	unsigned long purged;
	idem_config *cfg;
	idem_store *s = NULL;
	redis own;

	cr_assert_eq(redis_start(&own, NULL), 0);
	cfg = config_of(&own, NULL);
	cr_assert_eq(open_redis(cfg, 2, &s), IDEM_OK);
	test_req_fill(&rq, &k, fp, "o1", "r1");
	test_req_fill(&rq2, &k2, fp, "o2", "r2");
	cr_assert_eq(idem_store_reserve(s, &rq, &rr), IDEM_OK);
	cr_assert_eq(idem_store_mark_unknown(s, &rq), IDEM_OK);
	cr_assert_eq(idem_store_reserve(s, &rq2, &rr), IDEM_OK);
	cr_assert_eq(idem_store_commit(s, &rq2, &a), IDEM_OK);
	cr_assert_eq(idem_store_stats_get(s, &st), IDEM_OK);
	cr_expect_eq(st.unknown, 1);
	cr_expect_eq(st.tombstones, 0);
	usleep(400 * 1000);
	cr_assert_eq(idem_store_stats_get(s, &st), IDEM_OK);
	cr_expect_geq(st.unknown_age_ms, 300, "%llu",
	    (unsigned long long)st.unknown_age_ms);
	/* past their lifetime: both made tombstones by the purge */
	cr_assert_eq(idem_store_purge_all(s, 100, &purged), IDEM_OK);
	cr_assert_eq(idem_store_stats_get(s, &st), IDEM_OK);
	cr_expect_eq(st.unknown, 0, "a tombstone still counted unknown");
	cr_expect_eq(st.tombstones, 2);
	/* a tombstone reused by a policy that runs expired keys */
	pol.run_expired = 1;
	test_req_fill(&rq2, &k2, fp, "o3", "r3");
	cr_assert_eq(idem_store_reserve(s, &rq2, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_stats_get(s, &st), IDEM_OK);
	cr_expect_eq(st.tombstones, 1);
	idem_store_close(s);
	idem_config_free(cfg);
	redis_destroy(&own);
}

/* A server that asks for a password: the password file's is sent (AUTH),
 * a wrong one refuses the store at open, naming the server's answer. */
Test(redis, password_file_sent, .timeout = 60)
{
	char extra[600], path[300], log[4096];
	harness_capture cap;
	idem_config *cfg;
	idem_store *s = NULL;
	idem_err err;
	FILE *f;
	redis own;

	cr_assert_eq(redis_start(&own, "--requirepass s3cret"), 0);
	snprintf(path, sizeof(path), "%s/pw", own.dir);
	cr_assert_not_null(f = fopen(path, "w"));
	fputs("s3cret\n", f);
	fclose(f);
	snprintf(extra, sizeof(extra), "password-file = %s\n", path);
	cfg = config_of(&own, extra);
	cr_expect_eq(open_redis(cfg, 1, &s), IDEM_OK);
	idem_store_close(s);
	idem_config_free(cfg);
	cr_assert_not_null(f = fopen(path, "w"));
	fputs("wrong\n", f);
	fclose(f);
	cfg = config_of(&own, extra);
	harness_capture_level(&cap, IDEM_LOG_INFO);
	err = open_redis(cfg, 1, &s);
	harness_capture_into(&cap, log, sizeof(log));
	cr_expect_eq(err, IDEM_ERR_STORE);
	cr_expect(strstr(log, "AUTH: WRONGPASS") != NULL, "%s", log);
	idem_config_free(cfg);
	redis_destroy(&own);
}
