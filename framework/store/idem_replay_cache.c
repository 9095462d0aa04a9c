/*
 * idem_replay_cache.c - committed answers kept in the process: a uthash
 * table, and a utlist list in order of use (most recent last).  Each
 * entry is one allocation: the struct, then its headers and body.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* out of memory, an entry is not kept (uthash sets its hh.tbl to NULL)
 * rather than the process exiting */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>
#include <utlist.h>

#include "idem_replay_cache.h"
#include "idem_time.h"

typedef struct entry {
	unsigned char key[32 + IDEM_KEY_MAX];   /* scope, then key bytes */
	unsigned key_len;
	unsigned char fp[32];
	int status;
	uint64_t expires_ms;
	size_t headers_len, body_len;
	size_t size;                 /* what it counts against max_bytes */
	struct entry *prev, *next;   /* the use order */
	UT_hash_handle hh;
	char data[];                 /* headers, then body */
} entry;

struct idem_replay_cache {
	pthread_mutex_t lock;
	entry *table;                /* uthash head */
	entry *used;                 /* utlist, least recently used first */
	uint64_t max_bytes, bytes, entries;
};

idem_err
idem_replay_cache_new(uint64_t max_bytes, idem_replay_cache **out)
{
	idem_replay_cache *c;

	*out = NULL;
	if (max_bytes == 0)
		return IDEM_OK;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->max_bytes = max_bytes;
	*out = c;
	return IDEM_OK;
}

/* Unlinks e from c and frees it; c's lock is held. */
static void
drop(idem_replay_cache *c, entry *e)
{
	HASH_DEL(c->table, e);
	DL_DELETE(c->used, e);
	c->bytes -= e->size;
	c->entries--;
	free(e);
}

void
idem_replay_cache_free(idem_replay_cache *c)
{
	if (c == NULL)
		return;
	while (c->used != NULL)
		drop(c, c->used);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Writes k's hashed form (scope, then key bytes) into buf; returns its
 * length. */
static unsigned
key_bytes(const idem_store_key *k, unsigned char *buf)
{
	size_t len = k->key_len > IDEM_KEY_MAX ? IDEM_KEY_MAX : k->key_len;

	memcpy(buf, k->scope, 32);
	memcpy(buf + 32, k->key, len);
	return (unsigned)(32 + len);
}

void
idem_replay_cache_put(idem_replay_cache *c, const idem_store_key *k,
    const unsigned char fp[32], const idem_stored_response *resp,
    uint64_t expires_ms)
{
	size_t size = sizeof(entry) + resp->headers_len + resp->body_len;
	entry *e, *old;

	if (c == NULL || size > c->max_bytes / 8 ||
	    (e = malloc(size)) == NULL)
		return;
	e->key_len = key_bytes(k, e->key);
	memcpy(e->fp, fp, 32);
	e->status = resp->status;
	e->expires_ms = expires_ms;
	e->headers_len = resp->headers_len;
	e->body_len = resp->body_len;
	e->size = size;
	if (resp->headers_len > 0)
		memcpy(e->data, resp->headers, resp->headers_len);
	if (resp->body_len > 0)
		memcpy(e->data + resp->headers_len, resp->body, resp->body_len);
	pthread_mutex_lock(&c->lock);
	HASH_FIND(hh, c->table, e->key, e->key_len, old);
	if (old != NULL)
		drop(c, old);
	while (c->used != NULL && c->bytes + size > c->max_bytes)
		drop(c, c->used);
	HASH_ADD(hh, c->table, key[0], e->key_len, e);
	if (e->hh.tbl == NULL) {
		pthread_mutex_unlock(&c->lock);
		free(e);
		return;
	}
	DL_APPEND(c->used, e);
	c->bytes += size;
	c->entries++;
	pthread_mutex_unlock(&c->lock);
}

/* Copies len bytes of src into a new NUL-terminated string at *out.
 * Returns 0, or -1 out of memory. */
static int
copy_out(const char *src, size_t len, char **out)
{
	if ((*out = malloc(len + 1)) == NULL)
		return -1;
	memcpy(*out, src, len);
	(*out)[len] = '\0';
	return 0;
}

int
idem_replay_cache_get(idem_replay_cache *c, const idem_store_key *k,
    uint64_t now_ms, unsigned char fp[32], idem_stored_response *resp)
{
	unsigned char key[32 + IDEM_KEY_MAX];
	unsigned len;
	entry *e;
	int hit = 0;

	if (c == NULL)
		return 0;
	len = key_bytes(k, key);
	pthread_mutex_lock(&c->lock);
	HASH_FIND(hh, c->table, key, len, e);
	if (e != NULL && now_ms >= e->expires_ms) {
		drop(c, e);
		e = NULL;
	}
	if (e != NULL) {
		memset(resp, 0, sizeof(*resp));
		if (copy_out(e->data, e->headers_len, &resp->headers) == 0 &&
		    copy_out(e->data + e->headers_len, e->body_len,
		    &resp->body) == 0) {
			resp->status = e->status;
			resp->headers_len = e->headers_len;
			resp->body_len = e->body_len;
			memcpy(fp, e->fp, 32);
			DL_DELETE(c->used, e);
			DL_APPEND(c->used, e);
			hit = 1;
		} else
			idem_stored_response_clear(resp);
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void
idem_replay_cache_size(idem_replay_cache *c, uint64_t *entries,
    uint64_t *bytes)
{
	*entries = *bytes = 0;
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	*entries = c->entries;
	*bytes = c->bytes;
	pthread_mutex_unlock(&c->lock);
}

void
idem_replay_cache_keep(idem_replay_cache *c, const idem_store_key *k,
    const unsigned char fp[32], const idem_stored_response *resp,
    uint64_t read_at, int64_t left_us)
{
	uint64_t left_ms = left_us > 0 ? (uint64_t)left_us / 1000 : 0;

	if (left_ms > 0)
		idem_replay_cache_put(c, k, fp, resp, read_at + (left_ms <
		    IDEM_REPLAY_CACHE_HOLD_MS ? left_ms :
		    IDEM_REPLAY_CACHE_HOLD_MS));
}

int
idem_replay_cache_reserve(idem_replay_cache *c, const idem_store_key *k,
    idem_reserve_result *out)
{
	if (c == NULL || !idem_replay_cache_get(c, k, idem_boot_ms(),
	    out->fingerprint, &out->response))
		return 0;
	out->outcome = IDEM_RESERVE_COMMITTED;
	out->cached = 1;
	return 1;
}
