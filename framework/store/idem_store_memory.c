/*
 * idem_store_memory.c - the in-memory store: a uthash table under one mutex,
 * plus a list of the records that expire (committed, paused, unknown) and
 * one of the tombstones, each in expiry order for purging and eviction.
 * Times are CLOCK_MONOTONIC milliseconds.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>
#include <utlist.h>

#include "idem_log.h"
#include "idem_time.h"
#include "idem_store_memory.h"

/* The hashed key: the scope's 32 bytes, then the key's; only 32 + key_len
 * bytes are hashed and compared. */
typedef struct mkey {
	unsigned char bytes[32 + IDEM_KEY_MAX];
	unsigned len;
} mkey;

typedef struct record {
	mkey k;
	idem_record_state state;
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1];
	char request_id[IDEM_RID_MAX + 1];
	uint64_t reserved_at;
	uint64_t lease_at;              /* committed: when it was */
	uint64_t lease_ms;              /* the lease's length: its holder's
	                                 * inflight-ttl */
	uint64_t expires_at;            /* a tombstone: its end */
	uint64_t tombstone_ms;          /* committed: the tombstone kept past
	                                 * its expiry; 0: none */
	idem_stored_response resp;      /* committed only */
	int first_status;               /* committed, expired: its status */
	idem_progress progress;         /* its last checkpoint */
	struct record *prev, *next;     /* the expiring list (not in
	                                 * flight), the tombstones or the
	                                 * in-flight list */
	UT_hash_handle hh;
} record;

typedef struct memory_store {
	idem_store base;
	pthread_mutex_t lock;
	record *table;                  /* uthash head */
	record *expiring;               /* utlist, by expires_at: the
	                                 * records not in flight */
	record *flying;                 /* utlist: the records in flight */
	record *tombs;                  /* utlist, by expires_at: the
	                                 * tombstones */
	uint64_t tombstones;            /* on it */
	uint64_t tombstone_evictions;
	uint64_t max_entries;
	uint64_t count;
	uint64_t in_flight;
	uint64_t unknown;               /* records of unknown outcome */
	uint64_t evictions;
	uint64_t last_eviction;         /* ms */
	uint64_t last_warning;          /* ms */
	uint64_t evictions_at_warning;
} memory_store;

static void
make_key(mkey *mk, const idem_store_key *k)
{
	size_t len = k->key_len > IDEM_KEY_MAX ? IDEM_KEY_MAX : k->key_len;

	memcpy(mk->bytes, k->scope, 32);
	memcpy(mk->bytes + 32, k->key, len);
	mk->len = (unsigned)(32 + len);
}

static record *
find(memory_store *ms, const idem_store_key *k)
{
	record *r;
	mkey mk;

	make_key(&mk, k);
	HASH_FIND(hh, ms->table, mk.bytes, mk.len, r);
	return r;
}

/* Copies src into dst in one allocation: the headers, a NUL, the body, a
 * NUL (freed with answer_free).  Returns IDEM_OK or IDEM_ERR_NOMEM. */
static idem_err
answer_copy(idem_stored_response *dst, const idem_stored_response *src)
{
	char *block;

	if (src->body_len > SIZE_MAX - 2 - src->headers_len ||
	    (block = malloc(src->headers_len + src->body_len + 2)) == NULL)
		return IDEM_ERR_NOMEM;
	dst->status = src->status;
	dst->headers = block;
	dst->headers_len = src->headers_len;
	dst->body = block + src->headers_len + 1;
	dst->body_len = src->body_len;
	if (src->headers_len > 0)
		memcpy(dst->headers, src->headers, src->headers_len);
	dst->headers[src->headers_len] = '\0';
	if (src->body_len > 0)
		memcpy(dst->body, src->body, src->body_len);
	dst->body[src->body_len] = '\0';
	return IDEM_OK;
}

/* Frees an answer answer_copy made, and zeroes it. */
static void
answer_free(idem_stored_response *a)
{
	free(a->headers);
	memset(a, 0, sizeof(*a));
}

/* Takes r out of the list of its state, and its counters. */
static void
unlist(memory_store *ms, record *r)
{
	if (r->state == IDEM_RECORD_IN_FLIGHT) {
		DL_DELETE(ms->flying, r);
		ms->in_flight--;
	} else if (r->state == IDEM_RECORD_EXPIRED) {
		DL_DELETE(ms->tombs, r);
		ms->tombstones--;
	} else {
		DL_DELETE(ms->expiring, r);
		if (r->state == IDEM_RECORD_UNKNOWN)
			ms->unknown--;
	}
}

/* Moves the record r into state: out of its list (unlist), then into
 * flight, or into the tombstones or the expiring list, sorted by expiry
 * (records mostly arrive in order, so the scan from the tail is short). */
static void
settle(memory_store *ms, record *r, idem_record_state state)
{
	record *after, **list = &ms->expiring;

	unlist(ms, r);
	r->state = state;
	if (state == IDEM_RECORD_IN_FLIGHT) {
		DL_APPEND(ms->flying, r);
		ms->in_flight++;
		return;
	}
	if (state == IDEM_RECORD_UNKNOWN)
		ms->unknown++;
	if (state == IDEM_RECORD_EXPIRED) {
		list = &ms->tombs;
		ms->tombstones++;
	}
	after = *list != NULL ? (*list)->prev : NULL;
	while (after != NULL && after->expires_at > r->expires_at)
		after = after == *list ? NULL : after->prev;
	if (after == NULL)
		DL_PREPEND(*list, r);
	else if (after == (*list)->prev)
		DL_APPEND(*list, r);
	else
		DL_APPEND_ELEM(*list, after, r);
}

/* Removes r from the table (and its list) and frees it. */
static void
drop(memory_store *ms, record *r)
{
	HASH_DEL(ms->table, r);
	unlist(ms, r);
	ms->count--;
	answer_free(&r->resp);
	idem_progress_clear(&r->progress);
	free(r);
}

/* Whether r is a live tombstone at now (idem_tombstone_live). */
static int
live_tomb(const record *r, uint64_t now)
{
	return idem_tombstone_live(r->state, (int64_t)now -
	    (int64_t)r->expires_at, r->tombstone_ms);
}

/* Frees one entry for a new record: an expired one, else the tombstone
 * closest to its end (a late retry of its key runs again: counted), else
 * the committed one closest to expiry (a retry runs again: counted;
 * never a paused or unknown record: their progress, and what became of
 * their side effects, would be lost).  Returns 0, or -1 when every entry
 * is in flight, paused or unknown. */
static int
make_room(memory_store *ms, uint64_t now)
{
	record *victim = ms->tombs, *r = ms->expiring;

	if (victim == NULL || victim->expires_at > now) {
		while (r != NULL && r->expires_at > now &&
		    r->state != IDEM_RECORD_COMMITTED)
			r = r->next;
		if (r != NULL && (r->expires_at <= now || victim == NULL))
			victim = r;
	}
	if (victim == NULL)
		return -1;
	if (live_tomb(victim, now))
		ms->tombstone_evictions++;
	else if (victim->expires_at > now) {
		ms->evictions++;
		if (now - ms->last_eviction < 1000 &&
		    now - ms->last_warning >= 60000) {
			idem_log(NULL, IDEM_LOG_WARN, "memory store full: %llu "
			    "committed record(s) evicted since the last warning, "
			    "more than one a second; retries of those keys run "
			    "again: raise max-entries (now %llu)",
			    (unsigned long long)(ms->evictions -
			    ms->evictions_at_warning),
			    (unsigned long long)ms->max_entries);
			ms->last_warning = now;
			ms->evictions_at_warning = ms->evictions;
		}
		ms->last_eviction = now;
	}
	drop(ms, victim);
	return 0;
}

/* What the reservation rule reads of r (idem_found) at now.  Under
 * ms->lock; borrows from r. */
static idem_found
found_of(const memory_store *ms, const record *r, uint64_t now)
{
	idem_found f = { r->state, r->expires_at <= now, live_tomb(r, now),
	    r->fp, r->owner, (int64_t)(now - r->lease_at) * 1000,
	    (int64_t)r->lease_ms * 1000, (int64_t)ms->base.abandon_ms * 1000 };

	return f;
}

/* Adds rq's record, in flight, at now (room made first: an expired
 * record, else the committed one closest to expiry).  Under ms->lock.
 * Returns IDEM_OK, or IDEM_ERR_STORE (full of records it may not evict,
 * logged; out of memory). */
static idem_err
add_record(memory_store *ms, const idem_store_req *rq, uint64_t now)
{
	record *r;

	if (ms->count >= ms->max_entries && make_room(ms, now) < 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "memory store full: all %llu "
		    "entries are in flight, paused or of unknown outcome; raise "
		    "max-entries", (unsigned long long)ms->max_entries);
		return IDEM_ERR_STORE;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return IDEM_ERR_STORE;
	make_key(&r->k, &rq->key);
	memcpy(r->fp, rq->fp, 32);
	idem_copy_string(r->owner, sizeof(r->owner), rq->owner);
	idem_copy_string(r->request_id, sizeof(r->request_id),
	    rq->request_id);
	r->reserved_at = now;
	r->lease_at = now;
	r->lease_ms = rq->policy->lease_ms;
	r->expires_at = now + rq->policy->lifetime_ms;
	HASH_ADD_KEYPTR(hh, ms->table, r->k.bytes, r->k.len, r);
	DL_APPEND(ms->flying, r);
	ms->count++;
	ms->in_flight++;
	return IDEM_OK;
}

static idem_err
mem_reserve(idem_store *s, idem_store_req *rq, idem_reserve_result *out)
{
	memory_store *ms = (memory_store *)s;
	const idem_store_key *k = &rq->key;
	idem_reserve_step step = IDEM_STEP_IN_FLIGHT;
	uint64_t now;
	record *r;
	idem_err err = IDEM_OK;

	pthread_mutex_lock(&ms->lock);
	now = idem_now_ms();
	if ((r = find(ms, k)) != NULL) {
		idem_found f = found_of(ms, r, now);

		step = idem_reserve_decide(&f, rq->fp, rq->owner,
		    (int64_t)rq->policy->lease_ms * 1000, rq->policy);
		if (step == IDEM_STEP_REUSE) {
			out->expired_run = f.tombstone;
			/* an abandoned reservation: whose it was */
			if (r->state == IDEM_RECORD_IN_FLIGHT) {
				idem_copy_string(out->owner, sizeof(out->owner),
				    r->owner);
				idem_copy_string(out->request_id,
				    sizeof(out->request_id), r->request_id);
			}
			drop(ms, r);
			r = NULL;
		}
	}
	if (r == NULL) {
		err = add_record(ms, rq, now);
		pthread_mutex_unlock(&ms->lock);
		if (err == IDEM_OK)
			out->outcome = IDEM_RESERVE_ACQUIRED;
		return err;
	}
	memcpy(out->fingerprint, r->fp, 32);
	if (step == IDEM_STEP_EXPIRED) {
		idem_reserve_expired(out, r->fp, r->first_status,
		    (int64_t)(now - r->lease_at) * 1000);
		pthread_mutex_unlock(&ms->lock);
		return IDEM_OK;
	}
	if (step == IDEM_STEP_REPLAY) {
		out->outcome = IDEM_RESERVE_COMMITTED;
		if (idem_stored_response_copy(&out->response, &r->resp) != IDEM_OK)
			err = IDEM_ERR_STORE;
		pthread_mutex_unlock(&ms->lock);
		return err;
	}
	if (step == IDEM_STEP_OURS) {
		/* owners are fresh per request: only a caller's own retry */
		out->outcome = IDEM_RESERVE_ACQUIRED;
		pthread_mutex_unlock(&ms->lock);
		return IDEM_OK;
	}
	idem_copy_string(out->owner, sizeof(out->owner), r->owner);
	idem_copy_string(out->request_id, sizeof(out->request_id),
	    r->request_id);
	out->lease_age_ms = now - r->lease_at;
	out->lease_ms = r->lease_ms;
	switch (step) {
	case IDEM_STEP_TAKE_OVER:
	case IDEM_STEP_RESUME:
	case IDEM_STEP_RECONCILE:
		if (idem_progress_copy(&out->progress, &r->progress) != IDEM_OK) {
			pthread_mutex_unlock(&ms->lock);
			return IDEM_ERR_STORE;
		}
		/* resumed, back in flight; reconciled, held but unknown until
		 * its hook's final answer; both within their lifetime */
		if (step == IDEM_STEP_RESUME)
			settle(ms, r, IDEM_RECORD_IN_FLIGHT);
		else if (step == IDEM_STEP_TAKE_OVER)
			r->expires_at = now + rq->policy->lifetime_ms;
		idem_copy_string(r->owner, sizeof(r->owner), rq->owner);
		idem_copy_string(r->request_id, sizeof(r->request_id),
		    rq->request_id);
		r->lease_at = now;
		r->lease_ms = rq->policy->lease_ms;
		out->outcome = step == IDEM_STEP_TAKE_OVER ?
		    IDEM_RESERVE_TAKEN_OVER : step == IDEM_STEP_RESUME ?
		    IDEM_RESERVE_RESUMED : IDEM_RESERVE_RECONCILE;
		break;
	case IDEM_STEP_UNKNOWN:
		out->outcome = IDEM_RESERVE_UNKNOWN;
		break;
	default:
		out->outcome = IDEM_RESERVE_IN_FLIGHT;
		break;
	}
	pthread_mutex_unlock(&ms->lock);
	return err;
}

/* Finds owner's in_flight record of k (held: or the record of unknown
 * outcome it holds to reconcile), or NULL. */
static record *
find_owned(memory_store *ms, const idem_store_key *k, const char *owner,
    int held)
{
	record *r = find(ms, k);

	if (r == NULL || owner[0] == '\0' || strcmp(r->owner, owner) != 0)
		return NULL;
	if (r->state == IDEM_RECORD_IN_FLIGHT ||
	    (held && r->state == IDEM_RECORD_UNKNOWN))
		return r;
	return NULL;
}

static idem_err
mem_commit(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	memory_store *ms = (memory_store *)s;
	idem_stored_response copy;
	record *r;

	/* copy before taking the lock, to hold it briefly */
	if (answer_copy(&copy, resp) != IDEM_OK)
		return IDEM_ERR_STORE;
	pthread_mutex_lock(&ms->lock);
	if ((r = find_owned(ms, &rq->key, rq->owner, 1)) == NULL) {
		pthread_mutex_unlock(&ms->lock);
		answer_free(&copy);
		return IDEM_ERR_NOT_FOUND;
	}
	r->resp = copy;
	r->first_status = copy.status;
	r->lease_at = idem_now_ms();
	r->expires_at = r->lease_at + rq->policy->lifetime_ms;
	r->tombstone_ms = rq->policy->tombstone_ms;
	settle(ms, r, IDEM_RECORD_COMMITTED);
	pthread_mutex_unlock(&ms->lock);
	return IDEM_OK;
}

/* Releases the in_flight record r: deleted, or paused when it has
 * progress.  Under ms->lock. */
static void
release_record(memory_store *ms, record *r)
{
	if (r->progress.phase[0] != '\0')
		settle(ms, r, IDEM_RECORD_PAUSED);
	else
		drop(ms, r);
}

static idem_err
mem_release(idem_store *s, idem_store_req *rq)
{
	memory_store *ms = (memory_store *)s;
	record *r;

	pthread_mutex_lock(&ms->lock);
	/* never a record of unknown outcome: it stays unknown */
	if ((r = find_owned(ms, &rq->key, rq->owner, 0)) != NULL)
		release_record(ms, r);
	pthread_mutex_unlock(&ms->lock);
	return r != NULL ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

/* Renews r's lease for rq's owner: now, of rq's policy's length (kept
 * when that says none).  Under ms->lock. */
static void
renew_record(record *r, const idem_store_req *rq)
{
	r->lease_at = idem_now_ms();
	if (rq->policy != NULL && rq->policy->lease_ms > 0)
		r->lease_ms = rq->policy->lease_ms;
}

static idem_err
mem_checkpoint(idem_store *s, idem_store_req *rq, const idem_progress *p)
{
	memory_store *ms = (memory_store *)s;
	idem_progress copy;
	record *r;

	if (idem_progress_copy(&copy, p) != IDEM_OK)
		return IDEM_ERR_STORE;
	pthread_mutex_lock(&ms->lock);
	if ((r = find_owned(ms, &rq->key, rq->owner, 1)) != NULL) {
		idem_progress_clear(&r->progress);
		r->progress = copy;
		renew_record(r, rq);
	}
	pthread_mutex_unlock(&ms->lock);
	if (r == NULL)
		idem_progress_clear(&copy);
	return r != NULL ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

static idem_err
mem_mark_unknown(idem_store *s, idem_store_req *rq)
{
	memory_store *ms = (memory_store *)s;
	record *r;

	pthread_mutex_lock(&ms->lock);
	if ((r = find_owned(ms, &rq->key, rq->owner, 1)) != NULL) {
		/* held by nobody: the next retry may take it to reconcile */
		r->lease_at = idem_now_ms();
		r->owner[0] = '\0';
		r->tombstone_ms = rq->policy != NULL ?
		    rq->policy->tombstone_ms : 0;
		if (r->state != IDEM_RECORD_UNKNOWN)
			settle(ms, r, IDEM_RECORD_UNKNOWN);
	}
	pthread_mutex_unlock(&ms->lock);
	return r != NULL ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

static idem_err
mem_renew(idem_store *s, idem_store_req *rq)
{
	memory_store *ms = (memory_store *)s;
	record *r;

	pthread_mutex_lock(&ms->lock);
	if ((r = find_owned(ms, &rq->key, rq->owner, 1)) != NULL)
		renew_record(r, rq);
	pthread_mutex_unlock(&ms->lock);
	return r != NULL ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

static idem_err
mem_purge(idem_store *s, unsigned max, unsigned *purged)
{
	memory_store *ms = (memory_store *)s;
	record *r, *tmp;
	uint64_t now;

	pthread_mutex_lock(&ms->lock);
	now = idem_now_ms();
	while (*purged < max && ms->expiring != NULL &&
	    ms->expiring->expires_at <= now) {
		r = ms->expiring;
		if (live_tomb(r, now)) {
			/* the answer goes, the tombstone stays its length */
			answer_free(&r->resp);
			idem_progress_clear(&r->progress);
			r->expires_at += r->tombstone_ms;
			settle(ms, r, IDEM_RECORD_EXPIRED);
		} else
			drop(ms, r);
		(*purged)++;
	}
	while (*purged < max && ms->tombs != NULL &&
	    ms->tombs->expires_at <= now) {
		drop(ms, ms->tombs);
		(*purged)++;
	}
	/* the abandoned records in flight (a scan of them, in the purge
	 * thread) */
	DL_FOREACH_SAFE(ms->flying, r, tmp) {
		idem_found f = found_of(ms, r, now);

		if (*purged >= max)
			break;
		if (idem_record_abandoned(&f, (int64_t)IDEM_LEASE_LONGEST_MS *
		    1000)) {
			drop(ms, r);
			(*purged)++;
		}
	}
	pthread_mutex_unlock(&ms->lock);
	return IDEM_OK;
}

static idem_err
mem_release_prefix(idem_store *s, const char *prefix, idem_store_key **keys,
    size_t *n)
{
	memory_store *ms = (memory_store *)s;
	size_t plen = strlen(prefix), cap = 0;
	record *r, *tmp;
	idem_err err = IDEM_OK;

	pthread_mutex_lock(&ms->lock);
	HASH_ITER(hh, ms->table, r, tmp) {
		idem_store_key *k;
		if (r->state != IDEM_RECORD_IN_FLIGHT ||
		    strncmp(r->owner, prefix, plen) != 0)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			k = realloc(*keys, cap * sizeof(*k));
			if (k == NULL) {
				err = IDEM_ERR_NOMEM;
				break;
			}
			*keys = k;
		}
		k = &(*keys)[(*n)++];
		memset(k, 0, sizeof(*k));
		memcpy(k->scope, r->k.bytes, 32);
		k->key_len = r->k.len - 32;
		memcpy(k->key, r->k.bytes + 32, k->key_len);
		release_record(ms, r);
	}
	pthread_mutex_unlock(&ms->lock);
	return err;
}

static idem_err
mem_stats(idem_store *s, idem_store_stats *st)
{
	memory_store *ms = (memory_store *)s;

	record *r;
	uint64_t now;

	pthread_mutex_lock(&ms->lock);
	st->entries = ms->count;
	st->in_flight = ms->in_flight;
	st->evictions = ms->evictions;
	st->unknown = ms->unknown;
	st->tombstones = ms->tombstones;
	st->tombstone_evictions = ms->tombstone_evictions;
	now = idem_now_ms();
	if (ms->unknown > 0)
		/* rare: a walk of the expiring list */
		DL_FOREACH(ms->expiring, r)
			if (r->state == IDEM_RECORD_UNKNOWN &&
			    now - r->reserved_at > st->unknown_age_ms)
				st->unknown_age_ms = now - r->reserved_at;
	pthread_mutex_unlock(&ms->lock);
	return IDEM_OK;
}

/* Fills *out (zeroed) with what r holds, at now.  Under ms->lock. */
static void
fill_record(const record *r, uint64_t now, idem_store_record *out)
{
	out->state = r->state;
	memcpy(out->phase, r->progress.phase, sizeof(out->phase));
	memcpy(out->fingerprint, r->fp, 32);
	snprintf(out->owner, sizeof(out->owner), "%s", r->owner);
	snprintf(out->request_id, sizeof(out->request_id), "%s", r->request_id);
	idem_mono_to_utc(r->reserved_at, out->reserved_at,
	    sizeof(out->reserved_at));
	idem_mono_to_utc(r->lease_at, out->lease_at, sizeof(out->lease_at));
	idem_mono_to_utc(r->expires_at, out->expires_at,
	    sizeof(out->expires_at));
	out->reserved_age_ms = now - r->reserved_at;
	out->lease_age_ms = now - r->lease_at;
	out->lease_ms = r->lease_ms;
	out->expires_in_ms = (int64_t)r->expires_at - (int64_t)now;
	if (r->state == IDEM_RECORD_COMMITTED ||
	    r->state == IDEM_RECORD_EXPIRED) {
		out->status = r->first_status;
		out->headers_len = r->resp.headers_len;
		out->body_len = r->resp.body_len;
		out->tombstone_ms = r->tombstone_ms;
	}
}

static idem_err
mem_lookup(idem_store *s, const idem_store_key *k, idem_store_record *out)
{
	memory_store *ms = (memory_store *)s;
	uint64_t now;
	record *r;

	pthread_mutex_lock(&ms->lock);
	now = idem_now_ms();
	if ((r = find(ms, k)) == NULL) {
		pthread_mutex_unlock(&ms->lock);
		return IDEM_ERR_NOT_FOUND;
	}
	fill_record(r, now, out);
	pthread_mutex_unlock(&ms->lock);
	return IDEM_OK;
}

/* The records of unknown outcome by lease, the oldest first (qsort). */
static int
by_lease(const void *a, const void *b)
{
	const record *x = *(record *const *)a, *y = *(record *const *)b;

	return x->lease_at < y->lease_at ? -1 : x->lease_at > y->lease_at;
}

static idem_err
mem_list_unknown(idem_store *s, size_t max, idem_store_key **keys,
    idem_store_record **recs, size_t *n, int *more)
{
	memory_store *ms = (memory_store *)s;
	record **all = NULL, *r;
	size_t count = 0, i;
	uint64_t now;

	pthread_mutex_lock(&ms->lock);
	now = idem_now_ms();
	/* every unknown record is on the expiring list; ms->unknown of them */
	if (ms->unknown > 0 && (all = malloc((size_t)ms->unknown *
	    sizeof(*all))) == NULL) {
		pthread_mutex_unlock(&ms->lock);
		return IDEM_ERR_NOMEM;
	}
	DL_FOREACH(ms->expiring, r)
		if (r->state == IDEM_RECORD_UNKNOWN && count < ms->unknown)
			all[count++] = r;
	if (count > 0)
		qsort(all, count, sizeof(*all), by_lease);
	*more = count > max;
	if (count > max)
		count = max;
	if (count > 0 && ((*keys = calloc(count, sizeof(**keys))) == NULL ||
	    (*recs = calloc(count, sizeof(**recs))) == NULL)) {
		pthread_mutex_unlock(&ms->lock);
		free(all);
		free(*keys);
		*keys = NULL;
		*more = 0;
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < count; i++) {
		memcpy((*keys)[i].scope, all[i]->k.bytes, 32);
		(*keys)[i].key_len = all[i]->k.len - 32;
		memcpy((*keys)[i].key, all[i]->k.bytes + 32,
		    (*keys)[i].key_len);
		fill_record(all[i], now, &(*recs)[i]);
	}
	*n = count;
	pthread_mutex_unlock(&ms->lock);
	free(all);
	return IDEM_OK;
}

static idem_err
mem_resolve(idem_store *s, idem_store_req *rq,
    const idem_stored_response *resp)
{
	memory_store *ms = (memory_store *)s;
	idem_stored_response copy;
	record *r;
	int done = 0;

	memset(&copy, 0, sizeof(copy));
	if (resp != NULL && answer_copy(&copy, resp) != IDEM_OK)
		return IDEM_ERR_STORE;
	pthread_mutex_lock(&ms->lock);
	r = find(ms, &rq->key);
	if (r != NULL && r->state == IDEM_RECORD_UNKNOWN &&
	    strcmp(r->owner, rq->owner) == 0) {
		if (resp == NULL) {
			drop(ms, r);
			done = 1;
		} else if (r->expires_at > idem_now_ms()) {
			/* still on the expiring list, at its place: its
			 * expiry is unchanged */
			r->state = IDEM_RECORD_COMMITTED;
			ms->unknown--;
			r->resp = copy;
			r->first_status = copy.status;
			r->lease_at = idem_now_ms();
			r->tombstone_ms = rq->policy != NULL ?
			    rq->policy->tombstone_ms : 0;
			memset(&copy, 0, sizeof(copy));
			done = 1;
		}
	}
	pthread_mutex_unlock(&ms->lock);
	answer_free(&copy);
	return done ? IDEM_OK : IDEM_ERR_NOT_FOUND;
}

static idem_err
mem_census(idem_store *s, uint64_t inflight_ttl_ms, idem_store_census *out)
{
	memory_store *ms = (memory_store *)s;
	record *r, *tmp, *oldest = NULL;
	uint64_t now;

	pthread_mutex_lock(&ms->lock);
	now = idem_now_ms();
	HASH_ITER(hh, ms->table, r, tmp) {
		if (r->state != IDEM_RECORD_IN_FLIGHT) {
			if (live_tomb(r, now))
				out->tombstones++;
			else if (r->expires_at <= now)
				out->expired++;
			else if (r->state == IDEM_RECORD_COMMITTED)
				out->committed++;
			else if (r->state == IDEM_RECORD_PAUSED)
				out->paused++;
			else
				out->unknown++;
			continue;
		}
		out->in_flight++;
		if (now - r->lease_at > (r->lease_ms > 0 ? r->lease_ms :
		    inflight_ttl_ms))
			out->stale++;
		if (oldest == NULL || r->reserved_at < oldest->reserved_at)
			oldest = r;
	}
	if (oldest != NULL) {
		out->has_oldest = 1;
		memcpy(out->oldest_key.scope, oldest->k.bytes, 32);
		out->oldest_key.key_len = oldest->k.len - 32;
		memcpy(out->oldest_key.key, oldest->k.bytes + 32,
		    out->oldest_key.key_len);
		snprintf(out->oldest_owner, sizeof(out->oldest_owner), "%s",
		    oldest->owner);
		snprintf(out->oldest_request_id, sizeof(out->oldest_request_id),
		    "%s", oldest->request_id);
		out->oldest_age_ms = now - oldest->reserved_at;
		out->oldest_lease_age_ms = now - oldest->lease_at;
	}
	pthread_mutex_unlock(&ms->lock);
	return IDEM_OK;
}

static void
mem_close(idem_store *s)
{
	memory_store *ms = (memory_store *)s;
	record *r, *tmp;

	HASH_ITER(hh, ms->table, r, tmp) {
		HASH_DEL(ms->table, r);
		answer_free(&r->resp);
		idem_progress_clear(&r->progress);
		free(r);
	}
	pthread_mutex_destroy(&ms->lock);
	free(ms);
}

/* no transactional routes (tx_begin, tx_record, tx_end): see DESIGN.md
 * 2.7 */
static const idem_store_ops memory_ops = {
	.name = "memory",
	.reserve = mem_reserve,
	.commit = mem_commit,
	.release = mem_release,
	.renew = mem_renew,
	.checkpoint = mem_checkpoint,
	.mark_unknown = mem_mark_unknown,
	.purge = mem_purge,
	.stats = mem_stats,
	.close = mem_close,
	.release_prefix = mem_release_prefix,
	.lookup = mem_lookup,
	.census = mem_census,
	.list_unknown = mem_list_unknown,
	.resolve = mem_resolve,
};

idem_err
idem_store_memory_new(uint64_t max_entries, idem_store **out)
{
	memory_store *ms;

	if (max_entries == 0)
		return IDEM_ERR_INVALID;
	if ((ms = calloc(1, sizeof(*ms))) == NULL)
		return IDEM_ERR_NOMEM;
	ms->base.ops = &memory_ops;
	ms->base.abandon_ms = IDEM_ABANDON_DEFAULT_MS;
	ms->max_entries = max_entries;
	pthread_mutex_init(&ms->lock, NULL);
	*out = &ms->base;
	return IDEM_OK;
}
