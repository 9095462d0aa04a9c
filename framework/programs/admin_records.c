/*
 * admin_records.c - the commands of idemfcgi-admin over the store: stats,
 * show, release, unknown, resolve and purge, and how they print records
 * (text or --json).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "admin.h"
#include "idem_answer.h"
#include "idem_config.h"
#include "idem_key.h"
#include "idem_store.h"

/* A duration for people: "850 ms", "12.3 s", "4 min 10 s", "3 h 2 min". */
static const char *
human(uint64_t ms, char *buf, size_t size)
{
	if (ms < 1000)
		snprintf(buf, size, "%llu ms", (unsigned long long)ms);
	else if (ms < 60000)
		snprintf(buf, size, "%.1f s", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, size, "%llu min %llu s",
		    (unsigned long long)(ms / 60000),
		    (unsigned long long)(ms / 1000 % 60));
	else
		snprintf(buf, size, "%llu h %llu min",
		    (unsigned long long)(ms / 3600000),
		    (unsigned long long)(ms / 60000 % 60));
	return buf;
}

/* Hex of n bytes into out (2n + 1 bytes). */
static char *
hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
	return out;
}

/* Prints obj as one line of JSON and frees it. */
static void
print_json(json_t *obj)
{
	char *text = obj != NULL ? json_dumps(obj, JSON_SORT_KEYS) : NULL;

	if (text != NULL)
		puts(text);
	free(text);
	json_decref(obj);
}

/* Builds the record key from KEY (read as the Idempotency-Key header is,
 * so a UUID matches in either case) and --scope.  Returns 0, or EXIT_USAGE
 * after saying why. */
static int
make_key(const idem_config *cfg, const options *o, const char *key,
    idem_store_key *sk)
{
	memset(sk, 0, sizeof(*sk));
	if (idem_key_parse(cfg->idem.key_format, key, sk->key, &sk->key_len) !=
	    IDEM_OK) {
		admin_complain("\"%s\" is not a valid key under "
		    "key-format in %s: no request can have it", key, cfg->path);
		return EXIT_USAGE;
	}
	if (cfg->idem.scope == IDEM_SCOPE_NONE && o->scope != NULL) {
		admin_complain("%s has scope = none: keys have "
		    "no scope, leave out --scope", cfg->path);
		return EXIT_USAGE;
	}
	if (cfg->idem.scope != IDEM_SCOPE_NONE && (o->scope == NULL ||
	    *o->scope == '\0')) {
		admin_complain("%s scopes keys by %s%s: give "
		    "--scope with the %s the client sent", cfg->path,
		    cfg->idem.scope == IDEM_SCOPE_HEADER ? "the header " :
		    "the authenticated user", cfg->idem.scope == IDEM_SCOPE_HEADER ?
		    cfg->idem.scope_header : "", cfg->idem.scope == IDEM_SCOPE_HEADER ?
		    "header value" : "user name");
		return EXIT_USAGE;
	}
	if (o->scope != NULL &&
	    idem_scope_hash(cfg, o->scope, sk->scope) != IDEM_OK)
		return EXIT_STORE;
	return 0;
}

/* Prints one record. */
static void
print_record(const options *o, const idem_store_key *sk,
    const idem_store_record *r)
{
	char kh[17], fp[65], scope[65], a[32], b[32], c[32];

	idem_key_hash(sk->scope, sk->key, sk->key_len, kh);
	hex(r->fingerprint, 32, fp);
	hex(sk->scope, 32, scope);
	if (o->json) {
		json_t *obj = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, "
		    "s:s, s:s, s:I, s:I, s:I, s:s}",
		    "key", sk->key, "key_hash", kh, "scope_hash", scope,
		    "state", idem_record_state_names[r->state],
		    "owner", r->owner, "request_id", r->request_id,
		    "reserved_at", r->reserved_at, "lease_at", r->lease_at,
		    "expires_at", r->expires_at,
		    "reserved_age_ms", (json_int_t)r->reserved_age_ms,
		    "lease_age_ms", (json_int_t)r->lease_age_ms,
		    "expires_in_ms", (json_int_t)r->expires_in_ms,
		    "fingerprint", fp);
		if (obj != NULL && r->phase[0] != '\0')
			json_object_set_new(obj, "phase", json_string(r->phase));
		if (obj != NULL && r->lease_ms > 0)
			json_object_set_new(obj, "lease_ms",
			    json_integer((json_int_t)r->lease_ms));
		if (obj != NULL && (r->state == IDEM_RECORD_COMMITTED ||
		    r->state == IDEM_RECORD_EXPIRED))
			json_object_update_new(obj, json_pack("{s:i, s:I, s:I, "
			    "s:I, s:b}", "status", r->status,
			    "headers_bytes", (json_int_t)r->headers_len,
			    "body_bytes", (json_int_t)r->body_len,
			    "tombstone_ms", (json_int_t)r->tombstone_ms,
			    "tombstone", idem_tombstone_live(r->state,
			    -r->expires_in_ms, r->tombstone_ms)));
		print_json(obj);
		return;
	}
	printf("key:          %s\n", sk->key);
	printf("key hash:     %s (how the logs name it)\n", kh);
	printf("state:        %s\n", idem_record_state_names[r->state]);
	if (r->phase[0] != '\0')
		printf("phase:        %s (its last checkpoint)\n", r->phase);
	printf("owner:        %s\n", r->owner);
	printf("request id:   %s\n", r->request_id);
	printf("reserved at:  %s (%s ago)\n", r->reserved_at,
	    human(r->reserved_age_ms, a, sizeof(a)));
	if (r->state == IDEM_RECORD_IN_FLIGHT && r->lease_ms > 0)
		printf("lease at:     %s (renewed %s ago, for %s)\n", r->lease_at,
		    human(r->lease_age_ms, b, sizeof(b)),
		    human(r->lease_ms, c, sizeof(c)));
	else if (r->state == IDEM_RECORD_IN_FLIGHT)
		printf("lease at:     %s (renewed %s ago)\n", r->lease_at,
		    human(r->lease_age_ms, b, sizeof(b)));
	if (r->state == IDEM_RECORD_UNKNOWN)
		printf("marked at:    %s (%s ago: its outcome is unknown since)"
		    "\n", r->lease_at, human(r->lease_age_ms, b, sizeof(b)));
	if (r->state == IDEM_RECORD_COMMITTED || r->state ==
	    IDEM_RECORD_EXPIRED)
		printf("committed at: %s (%s ago)\n", r->lease_at,
		    human(r->lease_age_ms, b, sizeof(b)));
	if (r->state == IDEM_RECORD_EXPIRED && r->expires_in_ms >= 0)
		printf("tombstone:    until %s (in %s): its answer is dropped, "
		    "a retry is refused (expired-keys)\n", r->expires_at,
		    human((uint64_t)r->expires_in_ms, c, sizeof(c)));
	else if (idem_tombstone_live(r->state, -r->expires_in_ms,
	    r->tombstone_ms))
		printf("expires at:   %s (%s ago: a tombstone now, refused for "
		    "%s more)\n", r->expires_at, human((uint64_t)
		    -r->expires_in_ms, c, sizeof(c)), human(r->tombstone_ms -
		    (uint64_t)-r->expires_in_ms, b, sizeof(b)));
	else if (r->expires_in_ms >= 0)
		printf("expires at:   %s (in %s)\n", r->expires_at,
		    human((uint64_t)r->expires_in_ms, c, sizeof(c)));
	else
		printf("expires at:   %s (%s ago: the next purge deletes it)\n",
		    r->expires_at, human((uint64_t)-r->expires_in_ms, c,
		    sizeof(c)));
	if (r->state == IDEM_RECORD_COMMITTED || r->state ==
	    IDEM_RECORD_EXPIRED)
		printf("status:       %d (answer of %zu bytes: headers %zu, "
		    "body %zu)\n", r->status, r->headers_len + r->body_len,
		    r->headers_len, r->body_len);
	printf("fingerprint:  %s\n", fp);
}

/* stats: the records by state and the oldest in flight.  Returns the exit
 * status. */
int
admin_stats(const idem_config *cfg, const options *o, idem_store *s)
{
	idem_store_census c;
	char kh[17], a[32], b[32], ttl[32];

	if (idem_store_census_get(s, cfg->idem.inflight_ttl, &c) != IDEM_OK)
		return EXIT_STORE;
	if (c.has_oldest)
		idem_key_hash(c.oldest_key.scope, c.oldest_key.key,
		    c.oldest_key.key_len, kh);
	if (o->json) {
		json_t *obj = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, "
		    "s:I}", "store", idem_store_name(s),
		    "tombstones", (json_int_t)c.tombstones,
		    "in_flight", (json_int_t)c.in_flight,
		    "stale", (json_int_t)c.stale,
		    "committed", (json_int_t)c.committed,
		    "expired", (json_int_t)c.expired,
		    "paused", (json_int_t)c.paused,
		    "unknown", (json_int_t)c.unknown);
		if (obj != NULL && c.has_oldest)
			json_object_set_new(obj, "oldest_in_flight", json_pack(
			    "{s:s%, s:s, s:s, s:s, s:I, s:I}",
			    "key", c.oldest_key.key, c.oldest_key.key_len,
			    "key_hash", kh, "owner", c.oldest_owner,
			    "request_id", c.oldest_request_id,
			    "age_ms", (json_int_t)c.oldest_age_ms,
			    "lease_age_ms", (json_int_t)c.oldest_lease_age_ms));
		print_json(obj);
		return EXIT_DONE;
	}
	human(cfg->idem.inflight_ttl, ttl, sizeof(ttl));
	printf("store:            %s\n", idem_store_name(s));
	printf("in flight:        %llu (%llu idle for over inflight-ttl %s: "
	    "the next retry of each takes it over)\n",
	    (unsigned long long)c.in_flight, (unsigned long long)c.stale, ttl);
	printf("committed:        %llu\n", (unsigned long long)c.committed);
	printf("paused:           %llu (released with progress: the next "
	    "retry resumes it)\n", (unsigned long long)c.paused);
	printf("unknown outcome:  %llu\n", (unsigned long long)c.unknown);
	printf("tombstones:       %llu (past their lifetime: retries refused "
	    "until tombstone-lifetime ends)\n",
	    (unsigned long long)c.tombstones);
	printf("expired:          %llu (deleted by the next purge)\n",
	    (unsigned long long)c.expired);
	if (c.has_oldest)
		printf("oldest in flight: key %.*s (hash %s), owner %s, "
		    "request %s, reserved %s ago, lease renewed %s ago\n",
		    (int)c.oldest_key.key_len, c.oldest_key.key, kh,
		    c.oldest_owner, c.oldest_request_id,
		    human(c.oldest_age_ms, a, sizeof(a)),
		    human(c.oldest_lease_age_ms, b, sizeof(b)));
	else
		printf("oldest in flight: none\n");
	return EXIT_DONE;
}

/* Finds the record of KEY into *sk and *r.  Returns 0, or the exit
 * status after saying why not; absent says what not finding it means. */
static int
find(const idem_config *cfg, const options *o, idem_store *s,
    const char *key, idem_store_key *sk, idem_store_record *r,
    const char *absent)
{
	idem_err err;
	int rc;

	if ((rc = make_key(cfg, o, key, sk)) != 0)
		return rc;
	err = idem_store_lookup(s, sk, r);
	if (err == IDEM_ERR_NOT_FOUND) {
		admin_complain("no record for key %s%s: %s",
		    key, o->scope != NULL ? " in this scope" : "", absent);
		return EXIT_REFUSED;
	}
	if (err == IDEM_ERR_BUSY) {
		admin_complain("no committed record for key %s%s yet: an open "
		    "transaction holds it, most likely a transactional request "
		    "still running (its record exists only inside its "
		    "transaction until it commits or rolls back); look again "
		    "when it has ended", key, o->scope != NULL ?
		    " in this scope" : "");
		return EXIT_REFUSED;
	}
	return err == IDEM_OK ? 0 : EXIT_STORE;
}

/* show KEY: one record.  Returns the exit status. */
int
admin_show(const idem_config *cfg, const options *o, idem_store *s,
    const char *key)
{
	idem_store_record r;
	idem_store_key sk;
	int rc;

	if ((rc = find(cfg, o, s, key, &sk, &r, "never used, released, or "
	    "purged")) != 0)
		return rc;
	print_record(o, &sk, &r);
	return EXIT_DONE;
}

/* release KEY: deletes a stuck in-flight reservation (only with --yes,
 * and only the owner shown or --owner).  Returns the exit status. */
int
admin_release(const idem_config *cfg, const options *o, idem_store *s,
    const char *key)
{
	idem_store_record r;
	idem_store_req rq;
	char age[32], ttl[32];
	uint64_t lease;
	idem_err err;
	int rc;

	memset(&rq, 0, sizeof(rq));
	if ((rc = find(cfg, o, s, key, &rq.key, &r, "nothing to release")) != 0)
		return rc;
	if (r.state == IDEM_RECORD_COMMITTED) {
		admin_complain("key %s is committed (status %d): "
		    "its answer is replayed to every retry until %s.  release "
		    "frees only in-flight reservations.", key, r.status,
		    r.expires_at);
		return EXIT_REFUSED;
	}
	if (r.state != IDEM_RECORD_IN_FLIGHT) {
		admin_complain("key %s is %s (phase %s): it is kept for its request "
		    "until %s.  release frees only in-flight reservations%s.",
		    key, idem_record_state_names[r.state], r.phase,
		    r.expires_at, r.state == IDEM_RECORD_UNKNOWN ? "; resolve "
		    "ends a record of unknown outcome" : "");
		return EXIT_REFUSED;
	}
	if (o->owner != NULL && strcmp(o->owner, r.owner) != 0) {
		admin_complain("key %s is now held by owner %s, "
		    "not %s: not released", key, r.owner, o->owner);
		return EXIT_REFUSED;
	}
	/* judged by the lease the record keeps: its holder's inflight-ttl */
	lease = r.lease_ms > 0 ? r.lease_ms : cfg->idem.inflight_ttl;
	human(r.lease_age_ms, age, sizeof(age));
	human(lease, ttl, sizeof(ttl));
	if (r.lease_age_ms <= lease && !o->force) {
		admin_complain("the lease of key %s was renewed "
		    "%s ago (for %s): a worker is running its handler "
		    "now.  Releasing it lets a retry run the handler a second "
		    "time.  Wait for it to finish; if you know its worker is "
		    "gone, add --force.", key, age, ttl);
		return EXIT_REFUSED;
	}
	if (!o->yes) {
		print_record(o, &rq.key, &r);
		admin_complain("this would delete the in-flight reservation above, "
		    "so that the next retry runs the handler again.  Add --yes "
		    "to do it.");
		return EXIT_REFUSED;
	}
	/* owner-checked: only the reservation shown above goes */
	idem_copy_string(rq.owner, sizeof(rq.owner), r.owner);
	err = idem_store_release(s, &rq);
	if (err == IDEM_ERR_NOT_FOUND) {
		admin_complain("key %s changed meanwhile (committed, released or "
		    "taken over): not released; run show again", key);
		return EXIT_REFUSED;
	}
	if (err == IDEM_ERR_BUSY)
		admin_complain("key %s is contended (clients are retrying it): not "
		    "released; try again", key);
	if (err != IDEM_OK)
		return EXIT_STORE;
	if (o->json)
		print_json(json_pack("{s:s, s:s, s:s}", "released", key,
		    "owner", r.owner, "request_id", r.request_id));
	else
		printf("released key %s (owner %s, request %s): the next retry "
		    "runs the handler\n", key, r.owner, r.request_id);
	return EXIT_DONE;
}

/* Prints the records of unknown outcome keys[i], recs[i] (n of them) as
 * JSON; more: there are more than shown. */
static void
print_unknown_json(const options *o, const idem_store_key *keys,
    const idem_store_record *recs, size_t n, int more)
{
	json_t *list = json_array();
	char kh[17], fp[65], scope[65];
	size_t i;

	for (i = 0; list != NULL && i < n; i++) {
		const idem_store_key *k = &keys[i];
		const idem_store_record *r = &recs[i];
		idem_key_hash(k->scope, k->key, k->key_len, kh);
		if (json_array_append_new(list, json_pack("{s:s%, s:s, s:s, "
		    "s:s, s:s, s:s?, s:s, s:s, s:s, s:I, s:I, s:I, s:s}",
		    "key", k->key, k->key_len, "key_hash", kh,
		    "scope_hash", hex(k->scope, 32, scope),
		    "owner", r->owner, "request_id", r->request_id,
		    "phase", r->phase[0] != '\0' ? r->phase : NULL,
		    "reserved_at", r->reserved_at, "lease_at", r->lease_at,
		    "expires_at", r->expires_at,
		    "reserved_age_ms", (json_int_t)r->reserved_age_ms,
		    "lease_age_ms", (json_int_t)r->lease_age_ms,
		    "expires_in_ms", (json_int_t)r->expires_in_ms,
		    "fingerprint", hex(r->fingerprint, 32, fp))) != 0) {
			json_decref(list);
			list = NULL;
		}
	}
	print_json(list != NULL ? json_pack("{s:o, s:b, s:I}", "unknown", list,
	    "more", more, "limit", (json_int_t)o->max) : NULL);
}

/* Lists the records of unknown outcome, the one marked longest ago
 * first, at most --limit of them. */
int
admin_unknown(const options *o, idem_store *s)
{
	idem_store_key *keys;
	idem_store_record *recs;
	char age[32];
	/* the columns of varying width: key, phase, owner */
	size_t n, i, wk = 3, wp = 5, wo = 5;
	int more;

	if (idem_store_list_unknown(s, o->max, &keys, &recs, &n, &more) !=
	    IDEM_OK)
		return EXIT_STORE;
	if (o->json) {
		print_unknown_json(o, keys, recs, n, more);
	} else if (n == 0) {
		printf("no records of unknown outcome\n");
	} else {
		for (i = 0; i < n; i++) {
			if (keys[i].key_len > wk)
				wk = keys[i].key_len;
			if (strlen(recs[i].phase) > wp)
				wp = strlen(recs[i].phase);
			if (strlen(recs[i].owner) > wo)
				wo = strlen(recs[i].owner);
		}
		printf("%zu record(s) of unknown outcome, the one marked "
		    "longest ago first:\n", n);
		printf("%-*s  %-16s  %-15s  %-27s  %-*s  %-*s  %s\n", (int)wk,
		    "KEY", "KEY HASH", "MARKED", "EXPIRES AT", (int)wp, "PHASE",
		    (int)wo, "OWNER", "REQUEST ID");
		for (i = 0; i < n; i++) {
			char kh[17], marked[48];
			idem_key_hash(keys[i].scope, keys[i].key,
			    keys[i].key_len, kh);
			snprintf(marked, sizeof(marked), "%s ago",
			    human(recs[i].lease_age_ms, age, sizeof(age)));
			printf("%-*s  %-16s  %-15s  %-27s  %-*s  %-*s  %s%s\n",
			    (int)wk, keys[i].key, kh, marked,
			    recs[i].expires_at, (int)wp, recs[i].phase[0] !=
			    '\0' ? recs[i].phase : "-", (int)wo, recs[i].owner,
			    recs[i].request_id, recs[i].expires_in_ms < 0 ?
			    "  (expired: the next purge deletes it)" : "");
		}
		if (more)
			printf("more than %lu record(s) of unknown outcome: "
			    "only the %lu marked longest ago are shown "
			    "(--limit N shows up to %d)\n", o->max, o->max,
			    UNKNOWN_MAX);
	}
	free(keys);
	free(recs);
	return EXIT_DONE;
}

/* Reads the file path (at most max bytes) into a new buffer *out (caller
 * frees) of *len bytes.  Returns 0, or EXIT_USAGE after saying why. */
static int
read_body(const char *path, uint64_t max, char **out, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	size_t cap = 0, n;
	char *buf = NULL, *grown;
	int rc = 0;

	*out = NULL;
	*len = 0;
	if (fp == NULL) {
		admin_complain("cannot read --body %s: %s", path, strerror(errno));
		return EXIT_USAGE;
	}
	do {
		if (*len == cap) {
			cap = cap ? cap * 2 : 4096;
			if ((grown = realloc(buf, cap + 1)) == NULL) {
				admin_complain("out of memory reading %s", path);
				rc = EXIT_STORE;
				break;
			}
			buf = grown;
		}
		n = fread(buf + *len, 1, cap - *len, fp);
		*len += n;
	} while (n > 0 && *len <= max);
	if (rc == 0 && ferror(fp)) {
		admin_complain("cannot read --body %s: %s", path, strerror(errno));
		rc = EXIT_USAGE;
	} else if (rc == 0 && *len > max) {
		admin_complain("--body %s is over the %llu bytes an answer may hold "
		    "(max-response, and the store's limits)", path,
		    (unsigned long long)max);
		rc = EXIT_USAGE;
	}
	fclose(fp);
	if (rc != 0) {
		free(buf);
		*len = 0;
		return rc;
	}
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

/* Makes the answer of resolve --commit into *a (caller clears it with
 * idem_stored_response_clear): the status, and with --body its body and
 * Content-Type.  Returns 0, or the exit status after saying why not. */
static int
make_answer(const idem_config *cfg, const options *o, idem_store *s,
    idem_stored_response *a)
{
	const idem_store_limits *lim = idem_store_get_limits(s);
	const char *type = o->content_type != NULL ? o->content_type :
	    DEFAULT_CONTENT_TYPE;
	uint64_t max = cfg->idem.max_response;
	const char *why;
	int rc;

	memset(a, 0, sizeof(*a));
	a->status = o->status;
	if (o->body == NULL) {
		a->headers = strdup("");
		a->body = strdup("");
		if (a->headers == NULL || a->body == NULL) {
			idem_stored_response_clear(a);
			return EXIT_STORE;
		}
		return 0;
	}
	if (lim->body > 0 && lim->body < max)
		max = lim->body;
	if ((rc = read_body(o->body, max, &a->body, &a->body_len)) != 0)
		return rc;
	if (asprintf(&a->headers, "Content-Type: %s\r\n", type) < 0) {
		a->headers = NULL;
		idem_stored_response_clear(a);
		return EXIT_STORE;
	}
	a->headers_len = strlen(a->headers);
	if ((why = idem_answer_too_large(cfg, lim, a->headers_len,
	    a->body_len)) != NULL) {
		admin_complain("the answer of --body %s (%zu bytes) cannot be "
		    "stored: %s", o->body, a->body_len + a->headers_len, why);
		idem_stored_response_clear(a);
		return EXIT_USAGE;
	}
	return 0;
}

/* Says, after the record shown, what resolve would do, and that --yes does
 * it. */
static void
would(const options *o, const idem_store_record *r,
    const idem_stored_response *a)
{
	if (o->release)
		admin_complain("this would delete the record of unknown outcome "
		    "above, so that the next retry runs the handler again: do "
		    "it only when you know its side effect did not happen "
		    "(else it happens twice).  Add --yes to do it.");
	else
		admin_complain("this would store status %d (a body of %zu bytes%s%s) "
		    "as the answer of the record of unknown outcome above: "
		    "every retry of its request gets it replayed until %s, and "
		    "its handler does not run again.  Add --yes to do it.",
		    a->status, a->body_len, o->body != NULL ? ", " : "",
		    o->body != NULL ? (o->content_type != NULL ?
		    o->content_type : DEFAULT_CONTENT_TYPE) : "",
		    r->expires_at);
}

/* Gives KEY's record of unknown outcome the answer of --commit, or deletes
 * it (--release): only that record, still unknown, under the owner
 * shown. */
int
admin_resolve(const idem_config *cfg, const options *o, idem_store *s,
    const char *key)
{
	idem_stored_response a;
	idem_store_record r;
	idem_store_req rq;
	/* an operator's answer keeps a tombstone of [idempotency]'s */
	idem_key_policy pol = { .lifetime_ms = cfg->idem.lifetime,
	    .tombstone_ms = cfg->idem.tombstone_lifetime };
	idem_err err;
	int rc;

	memset(&rq, 0, sizeof(rq));
	rq.policy = &pol;
	memset(&a, 0, sizeof(a));
	if ((rc = find(cfg, o, s, key, &rq.key, &r, "nothing to resolve")) != 0)
		return rc;
	if (r.state != IDEM_RECORD_UNKNOWN) {
		admin_complain("key %s is %s%s: resolve ends only records of unknown "
		    "outcome; not resolved", key,
		    idem_record_state_names[r.state],
		    r.state == IDEM_RECORD_COMMITTED ?
		    " (its answer is final)" : r.state ==
		    IDEM_RECORD_IN_FLIGHT ? " (a request, or a reconcile "
		    "hook, holds it)" : "");
		return EXIT_REFUSED;
	}
	if (o->owner != NULL && strcmp(o->owner, r.owner) != 0) {
		admin_complain("key %s is now of owner %s, not %s: not resolved", key,
		    r.owner, o->owner);
		return EXIT_REFUSED;
	}
	if (!o->release && r.expires_in_ms < 0) {
		admin_complain("key %s is past its lifetime (it expired at %s): a "
		    "retry runs the handler as for a new key, and the next "
		    "purge deletes it; there is no answer to store.  --release "
		    "deletes it now.", key, r.expires_at);
		return EXIT_REFUSED;
	}
	if (!o->release && (rc = make_answer(cfg, o, s, &a)) != 0)
		return rc;
	if (!o->yes) {
		print_record(o, &rq.key, &r);
		would(o, &r, &a);
		idem_stored_response_clear(&a);
		return EXIT_REFUSED;
	}
	/* owner-checked: only the record shown above, if still unknown */
	idem_copy_string(rq.owner, sizeof(rq.owner), r.owner);
	err = idem_store_resolve(s, &rq, o->release ? NULL : &a);
	idem_stored_response_clear(&a);
	if (err == IDEM_ERR_NOT_FOUND) {
		admin_complain("key %s changed meanwhile (reconciled, resolved, "
		    "expired or released): not resolved; run show again", key);
		return EXIT_REFUSED;
	}
	if (err == IDEM_ERR_BUSY)
		admin_complain("key %s is contended (clients are retrying it): not "
		    "resolved; try again", key);
	if (err == IDEM_ERR_TOO_LARGE)
		admin_complain("the store cannot hold this answer (over its limits): "
		    "not resolved");
	if (err != IDEM_OK)
		return EXIT_STORE;
	if (o->json && o->release)
		print_json(json_pack("{s:s, s:s, s:s, s:s}", "resolved", key,
		    "action", "release", "owner", r.owner, "request_id",
		    r.request_id));
	else if (o->json)
		print_json(json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}",
		    "resolved", key, "action", "commit", "status", o->status,
		    "owner", r.owner, "request_id", r.request_id,
		    "expires_at", r.expires_at));
	else if (o->release)
		printf("resolved key %s (owner %s, request %s): deleted; the "
		    "next retry runs the handler again\n", key, r.owner,
		    r.request_id);
	else
		printf("resolved key %s (owner %s, request %s): status %d "
		    "stored as its answer, replayed to every retry until %s\n",
		    key, r.owner, r.request_id, o->status, r.expires_at);
	return EXIT_DONE;
}

/* purge: deletes the expired records now.  Returns the exit status. */
int
admin_purge(const options *o, idem_store *s)
{
	unsigned long n;

	if (idem_store_purge_all(s, PURGE_BATCH, &n) != IDEM_OK)
		return EXIT_STORE;
	if (o->json)
		print_json(json_pack("{s:I}", "purged", (json_int_t)n));
	else
		printf("purged %lu expired record(s)\n", n);
	return EXIT_DONE;
}
